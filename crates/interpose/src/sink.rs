//! The process's trace file: events formatted into one buffer under a lock, written with
//! libc's own `write` when a megabyte has gathered and when the process ends.

use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::{ENABLED, real};

/// Bytes of formatted events kept before they are written.
const FLUSH_BYTES: usize = 1 << 20;

static DIR: OnceLock<PathBuf> = OnceLock::new();
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// The trace's lock, taken (a panic that left it poisoned left the sink as it was).
fn sink() -> MutexGuard<'static, Option<Sink>> {
    SINK.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// The trace's lock, held by the forking thread across a fork (see [`before_fork`]).
    static HELD_FOR_FORK: RefCell<Option<MutexGuard<'static, Option<Sink>>>> =
        const { RefCell::new(None) };
}

/// The descriptor of this process's open trace, -1 when none is open. The program never
/// opened it, so the hooks keep it from the program's closes and copies (see
/// [`is_trace_fd`]); read without the lock, as a close of it may come from any thread.
static TRACE_FD: AtomicI32 = AtomicI32::new(-1);

/// The lowest descriptor number the trace takes: high, so that the program's own opens get
/// the numbers they would get untraced (3 first, ...), and below the usual limit of 1024.
fn high_fd_floor() -> c_int {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    (soft / 2).clamp(10, 1000) as c_int
}

thread_local! {
    /// The calling thread's kernel id (0 until first asked; reset in a forked child).
    static TID: Cell<i64> = const { Cell::new(0) };
}

struct Sink {
    fd: c_int,
    pid: i64,
    partial: CString,
    complete: CString,
    buf: Vec<u8>,
    next_id: u64,
    /// A write failed (a full disk): the file stays `.partial`, nothing more is written.
    broken: bool,
}

/// One event to record.
pub(crate) struct Event<'a> {
    pub name: &'static str,
    pub cat: &'static str,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The file's path as a JSON literal.
    pub json_path: Option<&'a str>,
    /// Integer arguments (`fd`, `offset`, `count`, `ret`, `size`, ...).
    pub args: &'a [(&'static str, i64)],
}

pub(crate) fn configure(dir: PathBuf) {
    let _ = DIR.set(dir);
}

/// Nanoseconds since the Unix epoch (dftracer's clock).
pub(crate) fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn tid() -> i64 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid takes no arguments and cannot fail.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) });
        }
        t.get()
    })
}

fn host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut name = [0u8; 256];
        // SAFETY: the buffer is writable for its whole length, which is what we pass.
        let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
        let end = name.iter().position(|&b| b == 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&name[..end]);
        if ok && !text.is_empty() {
            text.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect()
        } else {
            "host".to_string()
        }
    })
}

impl Sink {
    fn open() -> Option<Sink> {
        let dir = DIR.get()?;
        let pid = this_pid();
        let stem = dir.join(format!("trace-{}-{pid}-{}.pfw", host(), now_ns() / 1000));
        let complete = CString::new(stem.as_os_str().as_bytes()).ok()?;
        let partial = CString::new([stem.as_os_str().as_bytes(), b".partial"].concat()).ok()?;
        let open =
            real!(open: unsafe extern "C" fn(*const libc::c_char, c_int, libc::mode_t) -> c_int)?;
        // SAFETY: a NUL-terminated path; libc's open with O_CREAT reads the mode argument.
        let fd = unsafe {
            open(
                partial.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            eprintln!(
                "dlio trace: cannot create the trace {}: {err}; process {pid} is not traced",
                stem.display()
            );
            return None;
        }
        let fd = move_above(fd, high_fd_floor());
        TRACE_FD.store(fd, Ordering::Release);
        let mut buf = Vec::with_capacity(FLUSH_BYTES + 4096);
        buf.extend_from_slice(b"[\n");
        Some(Sink {
            fd,
            pid,
            partial,
            complete,
            buf,
            next_id: 0,
            broken: false,
        })
    }

    fn flush(&mut self) {
        if self.broken {
            self.buf.clear();
            return;
        }
        let Some(write) = real!(write: unsafe extern "C" fn(c_int, *const c_void, usize) -> isize)
        else {
            self.broken = true;
            return;
        };
        let mut done = 0;
        while done < self.buf.len() {
            let rest = &self.buf[done..];
            // SAFETY: `rest` is a live, initialised slice of `rest.len()` bytes.
            let n = unsafe { write(self.fd, rest.as_ptr().cast(), rest.len()) };
            if n > 0 {
                done += n as usize;
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                let err = std::io::Error::last_os_error();
                eprintln!(
                    "dlio trace: cannot write the trace {}: {err}; it stays incomplete",
                    self.partial.to_string_lossy()
                );
                self.broken = true;
                break;
            }
        }
        self.buf.clear();
    }

    fn push(&mut self, ev: &Event<'_>) {
        let mut num = itoa::Buffer::new();
        let b = &mut self.buf;
        if self.next_id > 0 {
            b.extend_from_slice(b",\n");
        }
        b.extend_from_slice(b"{\"id\":");
        b.extend_from_slice(num.format(self.next_id).as_bytes());
        self.next_id += 1;
        b.extend_from_slice(b",\"name\":\"");
        b.extend_from_slice(ev.name.as_bytes());
        b.extend_from_slice(b"\",\"cat\":\"");
        b.extend_from_slice(ev.cat.as_bytes());
        b.extend_from_slice(b"\",\"pid\":");
        b.extend_from_slice(num.format(self.pid).as_bytes());
        b.extend_from_slice(b",\"tid\":");
        b.extend_from_slice(num.format(tid()).as_bytes());
        b.extend_from_slice(b",\"ts\":");
        push_micros(b, ev.start_ns);
        b.extend_from_slice(b",\"dur\":");
        push_micros(b, (ev.end_ns - ev.start_ns).max(0));
        b.extend_from_slice(b",\"ph\":\"X\",\"args\":{");
        let mut first = true;
        if let Some(path) = ev.json_path {
            b.extend_from_slice(b"\"fname\":");
            b.extend_from_slice(path.as_bytes());
            first = false;
        }
        for (key, value) in ev.args {
            if !first {
                b.push(b',');
            }
            first = false;
            b.push(b'"');
            b.extend_from_slice(key.as_bytes());
            b.extend_from_slice(b"\":");
            b.extend_from_slice(num.format(*value).as_bytes());
        }
        b.extend_from_slice(b"}}");
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Writes the rest, closes the array and gives the file its final name.
    fn finish(mut self) {
        self.buf.extend_from_slice(b"\n]\n");
        self.flush();
        TRACE_FD.store(-1, Ordering::Release);
        // SAFETY: the descriptor is the trace's own, opened by `open`; a plain system call
        // (libc's `close` would be this library's hook).
        unsafe { libc::syscall(libc::SYS_close, self.fd) };
        if !self.broken {
            // SAFETY: both are NUL-terminated paths.
            unsafe { libc::rename(self.partial.as_ptr(), self.complete.as_ptr()) };
        }
    }
}

impl Sink {
    /// [`Sink::finish`] inside a signal handler: raw system calls only (no allocation, no
    /// lock, no symbol lookup), and nothing freed, as the process is about to end.
    fn finish_in_signal_handler(&self) {
        if self.broken {
            return;
        }
        let complete = raw_write_all(self.fd, &self.buf) && raw_write_all(self.fd, b"\n]\n");
        // SAFETY: close and renameat take plain integers and the sink's NUL-terminated paths;
        // both are async-signal-safe system calls.
        unsafe {
            libc::syscall(libc::SYS_close, self.fd);
            if complete {
                libc::syscall(
                    libc::SYS_renameat,
                    libc::AT_FDCWD,
                    self.partial.as_ptr(),
                    libc::AT_FDCWD,
                    self.complete.as_ptr(),
                );
            }
        }
    }
}

/// SIGTERM blocked on this thread while it lives.
struct BlockTerminate {
    old: libc::sigset_t,
}

impl BlockTerminate {
    fn new() -> BlockTerminate {
        // SAFETY: sigemptyset/sigaddset initialise the set; pthread_sigmask reads it and writes
        // the old mask into `old`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            BlockTerminate { old }
        }
    }
}

impl Drop for BlockTerminate {
    fn drop(&mut self) {
        // SAFETY: restores the mask `new` saved.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Writes all of `bytes` with the write system call; false when it fails.
fn raw_write_all(fd: c_int, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        let n = unsafe { libc::syscall(libc::SYS_write, fd, bytes.as_ptr(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// SIGTERM while tracing (multiprocessing terminates its pool's workers so): the trace is
/// completed, then the signal is raised again with its default action (the handler is
/// installed with SA_RESETHAND), so the process ends as it would have. A program that installs
/// its own handler replaces this one and ends through exit, which completes the trace too. When
/// the signal interrupts a thread that holds the trace's lock, the events are left (the file
/// stays `.partial`) rather than risking a deadlock.
pub(crate) extern "C" fn on_terminate(signal: c_int) {
    if let Ok(mut sink) = SINK.try_lock() {
        if let Some(s) = sink.as_ref()
            && owns_memory()
        {
            s.finish_in_signal_handler();
        }
        // Nothing may be freed here (the allocator's lock may be held): the process ends.
        if let Some(s) = sink.take() {
            std::mem::forget(s);
        }
        std::mem::forget(sink);
    }
    // SAFETY: raise is async-signal-safe; the disposition is the default again.
    unsafe { libc::raise(signal) };
}

/// `ns` nanoseconds as microseconds with three decimals.
fn push_micros(b: &mut Vec<u8>, ns: i64) {
    let mut num = itoa::Buffer::new();
    b.extend_from_slice(num.format(ns / 1000).as_bytes());
    let frac = (ns % 1000) as u16;
    b.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

fn this_pid() -> i64 {
    // SAFETY: getpid cannot fail.
    i64::from(unsafe { libc::getpid() })
}

/// The process whose memory this is: set when the library is loaded and in a forked child. A
/// `vfork` child (Python's subprocess starts programs so) runs in its parent's memory until it
/// calls `execve`, without the fork handlers, so it sees its parent's pid here.
static OWNER: AtomicI64 = AtomicI64::new(0);

/// Records that this process owns this memory (at load and after a fork).
pub(crate) fn claim() {
    OWNER.store(this_pid(), Ordering::Relaxed);
}

/// Whether this process owns the memory, and with it the trace in it (a forked child starts
/// with none): false in a `vfork` child, which must neither write to its parent's trace nor
/// start one of its own in the parent's memory (the parent would then take it for its own).
fn owns_memory() -> bool {
    OWNER.load(Ordering::Relaxed) == this_pid()
}

/// Records one event, opening this process's trace at its first.
pub(crate) fn record(ev: &Event<'_>) {
    if !owns_memory() {
        return;
    }
    let mut sink = sink();
    if sink.is_none() {
        *sink = Sink::open();
        if sink.is_none() {
            ENABLED.store(false, Ordering::Relaxed);
            return;
        }
    }
    if let Some(s) = sink.as_mut() {
        s.push(ev);
    }
}

/// Completes the trace (at exit, `_exit` and before `execve`); nothing is recorded after it
/// until [`resume`]. False (and nothing done) in a `vfork` child, whose trace is its parent's.
pub(crate) fn finish() -> bool {
    if !owns_memory() {
        // A vfork child: the trace is its parent's, which goes on.
        return false;
    }
    // A SIGTERM in the middle (a pool terminating a worker that is already exiting) would find
    // the lock taken and end the process before the rename: it waits until the trace is done.
    let _blocked = BlockTerminate::new();
    let mut sink = sink();
    ENABLED.store(false, Ordering::Relaxed);
    if let Some(mut s) = sink.take() {
        // The last event marks when the process ended (or exec'd): a program whose last
        // stretch makes no traced call (training from memory) still shows how long it ran.
        let now = now_ns();
        s.push(&Event {
            name: "end",
            cat: "dlio_trace",
            start_ns: now,
            end_ns: now,
            json_path: None,
            args: &[],
        });
        s.finish();
    }
    true
}

/// Records again after an `execve` that failed (the next event starts a new file).
pub(crate) fn resume() {
    ENABLED.store(DIR.get().is_some(), Ordering::Relaxed);
}

// Fork: the child gets a copy of every lock as it was, so both locks are taken before the
// fork (no other thread can be half-way through an event) and released on both sides after,
// by the forking thread (the child's only one), dropping the guards it kept.
//
// std's lock, not parking_lot's: parking_lot hands a contended lock over to a waiting thread
// now and then (its eventual fairness), and in the child the waiter it finds in its table is
// one of the parent's threads, which the child does not have: the handover left the child's
// lock held for ever (a PyTorch DataLoader's worker, forked while reader threads traced, hung
// in its first event). std's unlock only clears the lock's word and wakes whoever waits on it,
// which in the child is no one.
pub(crate) extern "C" fn before_fork() {
    crate::fds::hold_for_fork();
    let guard = sink();
    // Without the thread's storage (a thread on its way out), the lock is not held across.
    let _ = HELD_FOR_FORK.try_with(|held| held.replace(Some(guard)));
}

/// Drops the trace's lock [`before_fork`] kept.
fn release_held() {
    let _ = HELD_FOR_FORK.try_with(|held| held.take());
}

pub(crate) extern "C" fn after_fork_in_parent() {
    release_held();
    crate::fds::release_after_fork();
}

pub(crate) extern "C" fn after_fork_in_child() {
    release_held();
    crate::fds::release_after_fork();
    claim();
    TID.with(|t| t.set(0));
    // The parent's unwritten events and its file are the parent's: forget the buffer and close
    // the child's copy of the descriptor; the child's first event opens its own file.
    if let Some(s) = sink().take() {
        TRACE_FD.store(-1, Ordering::Release);
        // SAFETY: the child's copy of the trace's descriptor, used by nothing else.
        unsafe { libc::syscall(libc::SYS_close, s.fd) };
    }
}

/// Whether `fd` is the trace's own descriptor: a number the program would find closed
/// without this library, so a `close` of it answers EBADF and leaves it open.
pub(crate) fn is_trace_fd(fd: c_int) -> bool {
    fd >= 0 && TRACE_FD.load(Ordering::Acquire) == fd
}

/// The trace's descriptor, -1 when none is open.
pub(crate) fn trace_fd() -> c_int {
    TRACE_FD.load(Ordering::Acquire)
}

/// Moves the trace off descriptor `fd` when it is there (the program is about to make `fd`
/// a copy of another file with `dup2`/`dup3`, which would close the trace silently), to a
/// number at least `floor`.
pub(crate) fn move_trace_off(fd: c_int, floor: c_int) {
    if !is_trace_fd(fd) {
        return;
    }
    let mut sink = sink();
    if let Some(s) = sink.as_mut()
        && s.fd == fd
    {
        s.fd = move_above(fd, floor.max(high_fd_floor()));
        TRACE_FD.store(s.fd, Ordering::Release);
    }
}

/// `fd` copied to the lowest free number >= `floor` (close-on-exec) and closed, with plain
/// system calls; `fd` itself when no such number is free.
fn move_above(fd: c_int, floor: c_int) -> c_int {
    // SAFETY: F_DUPFD_CLOEXEC on an open descriptor only allocates a new number.
    let moved = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, floor) };
    if moved < 0 {
        return fd;
    }
    // SAFETY: the old number, now a copy of the trace nobody uses.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    moved as c_int
}
