//! The exported functions that stand in for libc's: each calls libc's own, and when tracing
//! records one event with the call's times, arguments and result. `errno` is what libc left.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};

use libc::{FILE, iovec, mode_t, off_t, size_t, ssize_t};

use crate::fds;
use crate::sink::{self, Event, now_ns};
use crate::{Guard, real};

const POSIX: &str = "POSIX";
const STDIO: &str = "STDIO";
/// Pipes' events (`dlio_trace::CAT_IPC`; this library links no crate of the project).
const IPC: &str = "IPC";

fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno, valid for its lifetime.
    unsafe { *libc::__errno_location() }
}

fn set_errno(value: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}

/// What a hook returns when libc has no definition of the symbol it stands in for.
fn missing<R: From<i8>>() -> R {
    set_errno(libc::ENOSYS);
    R::from(-1)
}

/// Runs `call`; when recording, hands its result and start and end times to `after`.
fn traced<R: Copy>(call: impl FnOnce() -> R, after: impl FnOnce(R, i64, i64)) -> R {
    let Some(_guard) = Guard::enter() else {
        return call();
    };
    let start = now_ns();
    let ret = call();
    let end = now_ns();
    let saved = errno();
    after(ret, start, end);
    set_errno(saved);
    ret
}

/// A read or write on a followed descriptor: at `offset`, or at the descriptor's position,
/// which then moves by what was transferred.
#[allow(clippy::too_many_arguments)]
fn transfer(
    name: &'static str,
    cat: &'static str,
    fd: c_int,
    start_ns: i64,
    end_ns: i64,
    count: usize,
    ret: i64,
    offset: Option<i64>,
    buffer: Buffer,
) {
    let Some((json_path, at)) = fds::with(fd, |t| {
        let at = offset.unwrap_or(t.position);
        if offset.is_none() && ret > 0 && t.position >= 0 {
            t.position += ret;
        }
        (t.json_path.clone(), at)
    }) else {
        return;
    };
    let args = [
        ("fd", i64::from(fd)),
        ("offset", at),
        ("count", count as i64),
        ("ret", ret),
        ("buf_page_offset", (buffer.address % PAGE_BYTES) as i64),
        ("untouched_pages", buffer.untouched_pages.unwrap_or(-1)),
    ];
    let known = if buffer.untouched_pages.is_some() {
        args.len()
    } else {
        args.len() - 1
    };
    sink::record(&Event {
        name,
        cat: category(&json_path, cat),
        start_ns,
        end_ns,
        json_path: Some(&json_path),
        args: &args[..known],
    });
}

/// The caller's memory of a transfer: where it starts, and for a read on a followed
/// descriptor, how many of its whole pages the process had not touched before the call.
#[derive(Debug, Clone, Copy)]
struct Buffer {
    address: usize,
    untouched_pages: Option<i64>,
}

impl Buffer {
    /// The memory of the call `name` (a read or a write) on `fd`.
    fn of(name: &str, fd: c_int, parts: impl Iterator<Item = (usize, usize)> + Clone) -> Buffer {
        if name.starts_with("read") || name.starts_with("pread") || name == "fread" {
            Buffer::destination(fd, parts)
        } else {
            Buffer::source(first_address(parts))
        }
    }

    /// The memory a write takes its bytes from.
    fn source(address: usize) -> Buffer {
        Buffer {
            address,
            untouched_pages: None,
        }
    }

    /// The memory a read of `fd` fills: `parts` (address, length), the first non-empty one's
    /// address kept, their untouched pages counted when `fd` is followed.
    fn destination(fd: c_int, parts: impl Iterator<Item = (usize, usize)> + Clone) -> Buffer {
        let address = first_address(parts.clone());
        let followed = Guard::enter().is_some() && fds::with(fd, |_| ()).is_some();
        let untouched_pages = if followed {
            parts.map(|(a, len)| untouched_pages(a, len)).sum()
        } else {
            None
        };
        Buffer {
            address,
            untouched_pages,
        }
    }
}

/// Where the first non-empty part of a buffer starts (0 when every part is empty).
fn first_address(mut parts: impl Iterator<Item = (usize, usize)>) -> usize {
    parts.find(|&(_, len)| len > 0).map_or(0, |(a, _)| a)
}

/// How many of the whole pages inside `[address, address + len)` are not resident: memory the
/// process has not touched since it was mapped (or since it was handed back to the kernel), so
/// that a read into it faults each page in and zeroes it before the copy. `None` when the
/// kernel will not say (the range is not mapped, or the page size is not known).
fn untouched_pages(address: usize, len: usize) -> Option<i64> {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|p| p.is_power_of_two())?;
    let start = address.checked_next_multiple_of(page)?;
    let end = address.checked_add(len)? & !(page - 1);
    let mut untouched = 0i64;
    let mut at = start;
    // One byte of residency per page, a chunk of pages at a time (no allocation in a hook).
    let mut vec = [0u8; 512];
    while at < end {
        let pages = ((end - at) / page).min(vec.len());
        // SAFETY: `at` is page-aligned and `vec` has room for `pages` bytes; mincore only
        // reads the page tables of the range and writes `vec`. An unmapped range is an error
        // (ENOMEM), not a fault.
        let ret = unsafe { libc::mincore(at as *mut libc::c_void, pages * page, vec.as_mut_ptr()) };
        if ret != 0 {
            return None;
        }
        untouched += vec[..pages].iter().filter(|&&v| v & 1 == 0).count() as i64;
        at += pages * page;
    }
    Some(untouched)
}

/// The page size the buffers' offsets are taken in: the kernel's copy between the page cache
/// and a buffer runs several times slower on some CPUs (AMD's Zen) when the buffer starts a
/// few bytes past the file's page boundary, so where a program's buffers start is part of
/// what its reads cost.
const PAGE_BYTES: usize = 4096;

/// The (address, length) of each buffer of an iovec array.
///
/// # Safety
/// `iov` points to `count` iovecs (the caller's contract with libc), or `count` is not positive;
/// they stay valid while the iterator is used.
unsafe fn iov_parts<'a>(
    iov: *const iovec,
    count: c_int,
) -> impl Iterator<Item = (usize, usize)> + Clone + 'a {
    let iovecs: &'a [iovec] = if iov.is_null() || count <= 0 {
        &[]
    } else {
        // SAFETY: the caller's contract above.
        unsafe { std::slice::from_raw_parts(iov, count as usize) }
    };
    iovecs.iter().map(|v| (v.iov_base as usize, v.iov_len))
}

/// An event on a followed descriptor that moves no data (close, fstat, mmap, lseek).
fn on_fd(
    name: &'static str,
    cat: &'static str,
    json_path: &str,
    start_ns: i64,
    end_ns: i64,
    args: &[(&'static str, i64)],
) {
    sink::record(&Event {
        name,
        cat: category(json_path, cat),
        start_ns,
        end_ns,
        json_path: Some(json_path),
        args,
    });
}

/// The category of an event on a followed descriptor: `IPC` for a pipe (whose name, unlike
/// every file's absolute path, starts with `pipe:[`), so that tools reading the trace for file
/// I/O (dftracer's, `dlio analyze`'s I/O layers) leave it out; else the call's own.
fn category(json_path: &str, cat: &'static str) -> &'static str {
    if json_path.starts_with("\"pipe:[") {
        IPC
    } else {
        cat
    }
}

/// An `open` that returned `fd` (or -1) for `path`: followed from here on.
fn opened(
    name: &'static str,
    cat: &'static str,
    path: Option<PathBuf>,
    flags: c_int,
    fd: c_int,
    start_ns: i64,
    end_ns: i64,
) {
    let Some(path) = path else {
        return;
    };
    if fd >= 0 {
        let position = if flags & libc::O_APPEND != 0 { -1 } else { 0 };
        fds::track(fd, &path, position);
    }
    sink::record(&Event {
        name,
        cat,
        start_ns,
        end_ns,
        json_path: Some(&fds::json_quoted(&path)),
        args: &[("flags", i64::from(flags)), ("ret", i64::from(fd))],
    });
}

fn stat_of(
    name: &'static str,
    path: Option<PathBuf>,
    ret: c_int,
    size: i64,
    start_ns: i64,
    end_ns: i64,
) {
    let Some(path) = path else {
        return;
    };
    sink::record(&Event {
        name,
        cat: POSIX,
        start_ns,
        end_ns,
        json_path: Some(&fds::json_quoted(&path)),
        args: &[
            ("ret", i64::from(ret)),
            ("size", if ret == 0 { size } else { -1 }),
        ],
    });
}

// --- open, close ------------------------------------------------------------------------
//
// `open`, `openat` and their 64-bit names are variadic in C: the mode is read only with
// O_CREAT or O_TMPFILE. Rust cannot define a variadic function, so the mode is declared as a
// third named argument: on the Linux ABIs (x86-64 System V, AArch64 AAPCS64) an integer
// variadic argument travels in the same register as a named one, and the value is only passed
// on to libc, which reads it under the same conditions as the caller wrote it.

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, mode_t) -> c_int;
type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, mode_t) -> c_int;

macro_rules! open_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
            let Some(real) = real!($name: OpenFn) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(path, flags, mode) }, |fd, s, e| {
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(libc::AT_FDCWD, path) };
                opened(stringify!($name), POSIX, abs, flags, fd, s, e)
            })
        }
    };
}
open_hook!(open);
open_hook!(open64);

macro_rules! openat_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            flags: c_int,
            mode: mode_t,
        ) -> c_int {
            let Some(real) = real!($name: OpenatFn) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(dirfd, path, flags, mode) }, |fd, s, e| {
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(dirfd, path) };
                opened(stringify!($name), POSIX, abs, flags, fd, s, e)
            })
        }
    };
}
openat_hook!(openat);
openat_hook!(openat64);

macro_rules! creat_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: mode_t) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn(*const c_char, mode_t) -> c_int) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(path, mode) }, |fd, s, e| {
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(libc::AT_FDCWD, path) };
                let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
                opened(stringify!($name), POSIX, abs, flags, fd, s, e)
            })
        }
    };
}
creat_hook!(creat);
creat_hook!(creat64);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let Some(real) = real!(close: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing();
    };
    // The trace's own descriptor does not exist for the program (a program that closes every
    // descriptor it did not open would otherwise close it, and the trace would be written into
    // the next file it opens): answered as libc would answer without this library.
    if sink::is_trace_fd(fd) {
        set_errno(libc::EBADF);
        return -1;
    }
    // Forget the descriptor before libc frees its number: after that another thread's `open`
    // may get the same number, and its entry must not be the one removed.
    let path = if Guard::enter().is_some() {
        fds::untrack(fd)
    } else {
        None
    };
    // SAFETY: the caller's argument, passed on unchanged.
    traced(
        || unsafe { real(fd) },
        |ret, s, e| {
            if let Some(path) = &path {
                on_fd(
                    "close",
                    POSIX,
                    path,
                    s,
                    e,
                    &[("fd", i64::from(fd)), ("ret", i64::from(ret))],
                );
            }
        },
    )
}

/// Closes `first..=last` (libc's `close_range` semantics for `flags`) around the trace's own
/// descriptor, which stays open, and stops following every closed number.
fn close_range_keeping_trace(first: u32, last: u32, flags: c_int) -> c_int {
    let trace = sink::trace_fd();
    let ranges: [(u32, u32); 2] = match u32::try_from(trace) {
        // Below the trace's number (none when it is `first`), then above it.
        Ok(t) if (first..=last).contains(&t) => match t.checked_sub(1) {
            Some(below) => [(first, below), (t.saturating_add(1), last)],
            None => [(1, last), (1, 0)],
        },
        _ => [(first, last), (1, 0)],
    };
    let mut ret = 0;
    for (low, high) in ranges {
        if low > high {
            continue;
        }
        fds::untrack_range(low, high);
        // SAFETY: close_range takes plain integers.
        let r = unsafe { libc::syscall(libc::SYS_close_range, low, high, flags) };
        if r != 0 {
            ret = -1;
        }
    }
    ret
}

/// Python's `os.closerange` and `subprocess` call this.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close_range(
    first: libc::c_uint,
    last: libc::c_uint,
    flags: c_int,
) -> c_int {
    let Some(real) =
        real!(close_range: unsafe extern "C" fn(libc::c_uint, libc::c_uint, c_int) -> c_int)
    else {
        return missing();
    };
    // Marking close-on-exec closes nothing now (and the trace's descriptor has the mark).
    let closes = flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0;
    if closes && Guard::enter().is_some() && sink::trace_fd() >= 0 {
        return close_range_keeping_trace(first, last, flags);
    }
    if closes {
        fds::untrack_range(first, last);
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { real(first, last, flags) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let first = u32::try_from(low).unwrap_or(0);
    if Guard::enter().is_some() && sink::trace_fd() >= 0 {
        close_range_keeping_trace(first, u32::MAX, 0);
        return;
    }
    fds::untrack_range(first, u32::MAX);
    if let Some(real) = real!(closefrom: unsafe extern "C" fn(c_int)) {
        // SAFETY: the caller's argument, passed on unchanged.
        unsafe { real(low) }
    }
}

/// `closedir` closes the descriptor of a directory stream inside libc, past the `close`
/// hook: a stream made with `fdopendir` on a followed descriptor must stop its following.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closedir(dir: *mut libc::DIR) -> c_int {
    let Some(real) = real!(closedir: unsafe extern "C" fn(*mut libc::DIR) -> c_int) else {
        return missing();
    };
    if !dir.is_null() && Guard::enter().is_some() {
        // SAFETY: a non-null stream the caller owns; dirfd only reads it.
        fds::untrack(unsafe { libc::dirfd(dir) });
    }
    // SAFETY: the caller's argument, passed on unchanged.
    unsafe { real(dir) }
}

// --- descriptors made by calls this library does not follow ------------------------------
//
// A number the kernel hands out again is a new file: whatever was followed under it (a
// descriptor closed past the hooks) is forgotten, so reads on a pipe or socket are never taken
// for reads of a data file.

macro_rules! new_fd_hook {
    ($name:ident ( $($arg:ident : $ty:ty),* )) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn($($ty),*) -> c_int) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            let fd = unsafe { real($($arg),*) };
            if fd >= 0 {
                let saved = errno();
                fds::untrack(fd);
                set_errno(saved);
            }
            fd
        }
    };
}
new_fd_hook!(socket(domain: c_int, kind: c_int, protocol: c_int));
new_fd_hook!(accept(fd: c_int, address: *mut libc::sockaddr, len: *mut libc::socklen_t));
new_fd_hook!(accept4(fd: c_int, address: *mut libc::sockaddr, len: *mut libc::socklen_t, flags: c_int));
new_fd_hook!(eventfd(initial: libc::c_uint, flags: c_int));
new_fd_hook!(epoll_create1(flags: c_int));
new_fd_hook!(memfd_create(name: *const c_char, flags: libc::c_uint));

/// A call that makes two descriptors (`pipe`, `socketpair`): `$on_pair` gets them when it
/// succeeds.
macro_rules! fd_pair_hook {
    ($name:ident ( $($arg:ident : $ty:ty),* ), $pair:ident, $on_pair:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn($($ty),*) -> c_int) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            let ret = unsafe { real($($arg),*) };
            if ret == 0 && !$pair.is_null() {
                let saved = errno();
                // SAFETY: on success libc wrote two descriptors where `$pair` points.
                $on_pair(unsafe { [*$pair, *$pair.add(1)] });
                set_errno(saved);
            }
            ret
        }
    };
}
fd_pair_hook!(socketpair(domain: c_int, kind: c_int, protocol: c_int, fds_out: *mut c_int), fds_out, forget_pair);
fd_pair_hook!(pipe(fds_out: *mut c_int), fds_out, follow_pipe);
fd_pair_hook!(pipe2(fds_out: *mut c_int, flags: c_int), fds_out, follow_pipe);

/// A socket pair is not followed: whatever its numbers held is forgotten.
fn forget_pair(pair: [c_int; 2]) {
    for fd in pair {
        fds::untrack(fd);
    }
}

// --- pipes ---------------------------------------------------------------------------------
//
// Both ends of a pipe are followed under the name `pipe:[INODE]` (as `/proc/PID/fd` shows it),
// with no file position: a framework's worker processes hand their batches to the training
// process through pipes (Python's multiprocessing queues), and the moments that process takes
// them are its steps (`dlio characterize` reads them; no data set is ever a pipe).

/// Follows both ends of a new pipe (when recording; else forgets their numbers).
fn follow_pipe(pair: [c_int; 2]) {
    let recording = Guard::enter();
    for fd in pair {
        match recording.as_ref().and_then(|_| pipe_inode(fd)) {
            Some(inode) => fds::track(fd, Path::new(&format!("pipe:[{inode}]")), -1),
            None => {
                fds::untrack(fd);
            }
        }
    }
}

/// The inode of the pipe `fd` is an end of (both ends share it).
fn pipe_inode(fd: c_int) -> Option<u64> {
    // SAFETY: a zeroed `stat` is a valid value to be overwritten; fstat writes only into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable `stat`; a bad descriptor only makes fstat fail.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

// --- descriptor copies -----------------------------------------------------------------------
//
// A copy of a followed descriptor is followed too: numpy reads an array through `fread` on a
// `FILE*` it opens on a copy of the Python file's descriptor. No event is recorded for the
// copy itself (dftracer records none either).

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let Some(real) = real!(dup: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing();
    };
    // SAFETY: the caller's argument, passed on unchanged.
    traced(
        || unsafe { real(fd) },
        |new, _, _| {
            if new >= 0 {
                fds::copy(fd, new);
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(fd: c_int, target: c_int) -> c_int {
    let Some(real) = real!(dup2: unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing();
    };
    // Onto the trace's number: the trace moves first (the program's copy takes the number,
    // free as far as it knows).
    sink::move_trace_off(target, target.saturating_add(1));
    // SAFETY: the caller's arguments, passed on unchanged.
    traced(
        || unsafe { real(fd, target) },
        |new, _, _| {
            if new >= 0 && new != fd {
                fds::copy(fd, new);
            }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(fd: c_int, target: c_int, flags: c_int) -> c_int {
    let Some(real) = real!(dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int) else {
        return missing();
    };
    sink::move_trace_off(target, target.saturating_add(1));
    // SAFETY: the caller's arguments, passed on unchanged.
    traced(
        || unsafe { real(fd, target, flags) },
        |new, _, _| {
            if new >= 0 {
                fds::copy(fd, new);
            }
        },
    )
}

// `fcntl` is variadic in C, with one optional argument (an int, a long or a pointer by
// command). As for `open`, it is declared as a named argument of register width: on the Linux
// ABIs the caller's third argument, whatever its type, is in that register, and it is passed on
// unchanged. Only F_DUPFD and F_DUPFD_CLOEXEC are looked at.
macro_rules! fcntl_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn(c_int, c_int, libc::c_ulong) -> c_int)
            else {
                return missing();
            };
            if cmd != libc::F_DUPFD && cmd != libc::F_DUPFD_CLOEXEC {
                // SAFETY: the caller's arguments, passed on unchanged.
                return unsafe { real(fd, cmd, arg) };
            }
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, cmd, arg) }, |new, _, _| {
                if new >= 0 {
                    fds::copy(fd, new);
                }
            })
        }
    };
}
fcntl_hook!(fcntl);
fcntl_hook!(fcntl64);

// --- reads and writes ---------------------------------------------------------------------

#[unsafe(no_mangle)]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let Some(real) = real!(read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t)
    else {
        return missing();
    };
    let buffer = Buffer::destination(fd, std::iter::once((buf as usize, count)));
    // SAFETY: the caller's arguments, passed on unchanged.
    traced(
        || unsafe { real(fd, buf, count) },
        |ret, s, e| transfer("read", POSIX, fd, s, e, count, ret as i64, None, buffer),
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let Some(real) = real!(write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t)
    else {
        return missing();
    };
    // SAFETY: the caller's arguments, passed on unchanged.
    traced(
        || unsafe { real(fd, buf, count) },
        |ret, s, e| {
            let buffer = Buffer::source(buf as usize);
            transfer("write", POSIX, fd, s, e, count, ret as i64, None, buffer)
        },
    )
}

macro_rules! positional_hook {
    ($name:ident, $label:literal, $buf:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, buf: $buf, count: size_t, offset: off_t) -> ssize_t {
            let Some(real) =
                real!($name: unsafe extern "C" fn(c_int, $buf, size_t, off_t) -> ssize_t)
            else {
                return missing();
            };
            let buffer = Buffer::of($label, fd, std::iter::once((buf as usize, count)));
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, buf, count, offset) }, |ret, s, e| {
                transfer($label, POSIX, fd, s, e, count, ret as i64, Some(offset), buffer)
            })
        }
    };
}
positional_hook!(pread, "pread", *mut c_void);
positional_hook!(pread64, "pread64", *mut c_void);
positional_hook!(pwrite, "pwrite", *const c_void);
positional_hook!(pwrite64, "pwrite64", *const c_void);

/// The bytes an iovec array asks for.
///
/// # Safety
/// `iov` points to `count` iovecs (the caller's contract with libc), or `count` is not positive.
unsafe fn iov_bytes(iov: *const iovec, count: c_int) -> usize {
    // SAFETY: the caller's contract above, which is `iov_parts`'.
    unsafe { iov_parts(iov, count) }.map(|(_, len)| len).sum()
}

macro_rules! vector_hook {
    ($name:ident, $label:literal) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, iov: *const iovec, count: c_int) -> ssize_t {
            let Some(real) = real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t)
            else {
                return missing();
            };
            // SAFETY: the iovecs the caller gives libc, valid for the whole call.
            let buffer = Buffer::of($label, fd, unsafe { iov_parts(iov, count) });
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, iov, count) }, |ret, s, e| {
                // SAFETY: the iovecs the caller gave libc, still valid after the call.
                let bytes = unsafe { iov_bytes(iov, count) };
                transfer($label, POSIX, fd, s, e, bytes, ret as i64, None, buffer)
            })
        }
    };
}
vector_hook!(readv, "readv");
vector_hook!(writev, "writev");

macro_rules! positional_vector_hook {
    ($name:ident, $label:literal) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            fd: c_int,
            iov: *const iovec,
            count: c_int,
            offset: off_t,
        ) -> ssize_t {
            let Some(real) =
                real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t)
            else {
                return missing();
            };
            // SAFETY: the iovecs the caller gives libc, valid for the whole call.
            let buffer = Buffer::of($label, fd, unsafe { iov_parts(iov, count) });
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, iov, count, offset) }, |ret, s, e| {
                // SAFETY: the iovecs the caller gave libc, still valid after the call.
                let bytes = unsafe { iov_bytes(iov, count) };
                transfer($label, POSIX, fd, s, e, bytes, ret as i64, Some(offset), buffer)
            })
        }
    };
}
positional_vector_hook!(preadv, "preadv");
positional_vector_hook!(preadv64, "preadv64");
positional_vector_hook!(pwritev, "pwritev");
positional_vector_hook!(pwritev64, "pwritev64");

/// `preadv2`/`pwritev2` (CPython's `os.preadv` and `os.pwritev` call them): an offset of -1
/// reads or writes at the file's position and moves it, as `readv` does.
macro_rules! flagged_vector_hook {
    ($name:ident, $label:literal) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            fd: c_int,
            iov: *const iovec,
            count: c_int,
            offset: off_t,
            flags: c_int,
        ) -> ssize_t {
            let Some(real) = real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t)
            else {
                return missing();
            };
            // SAFETY: the iovecs the caller gives libc, valid for the whole call.
            let buffer = Buffer::of($label, fd, unsafe { iov_parts(iov, count) });
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, iov, count, offset, flags) }, |ret, s, e| {
                // SAFETY: the iovecs the caller gave libc, still valid after the call.
                let bytes = unsafe { iov_bytes(iov, count) };
                let at = (offset != -1).then_some(offset);
                transfer($label, POSIX, fd, s, e, bytes, ret as i64, at, buffer)
            })
        }
    };
}
flagged_vector_hook!(preadv2, "preadv2");
flagged_vector_hook!(preadv64v2, "preadv2");
flagged_vector_hook!(pwritev2, "pwritev2");
flagged_vector_hook!(pwritev64v2, "pwritev2");

macro_rules! lseek_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, offset: off_t, whence: c_int) -> off_t {
            let Some(real) = real!($name: unsafe extern "C" fn(c_int, off_t, c_int) -> off_t) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, offset, whence) }, |ret, s, e| {
                let moved = fds::with(fd, |t| {
                    if ret >= 0 {
                        t.position = ret;
                    }
                    t.json_path.clone()
                });
                if let Some(path) = moved {
                    let args = [("fd", i64::from(fd)), ("whence", i64::from(whence)), ("ret", ret)];
                    on_fd("lseek", POSIX, &path, s, e, &args);
                }
            })
        }
    };
}
lseek_hook!(lseek);
lseek_hook!(lseek64);

macro_rules! mmap_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: off_t,
        ) -> *mut c_void {
            let Some(real) = real!(
                $name: unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void
            ) else {
                set_errno(libc::ENOSYS);
                return libc::MAP_FAILED;
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(addr, len, prot, flags, fd, offset) }, |ret, s, e| {
                if fd < 0 {
                    return;
                }
                if let Some(path) = fds::with(fd, |t| t.json_path.clone()) {
                    let ok = if ret == libc::MAP_FAILED { -1 } else { 0 };
                    let args = [
                        ("fd", i64::from(fd)),
                        ("offset", offset),
                        ("count", len as i64),
                        ("ret", ok),
                    ];
                    on_fd("mmap", POSIX, &path, s, e, &args);
                }
            })
        }
    };
}
mmap_hook!(mmap);
mmap_hook!(mmap64);

// --- stat -----------------------------------------------------------------------------------

macro_rules! stat_hook {
    ($name:ident, $label:literal, $st:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, buf: *mut $st) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn(*const c_char, *mut $st) -> c_int)
            else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(path, buf) }, |ret, s, e| {
                // SAFETY: after a successful call libc has filled the caller's buffer.
                let size = if ret == 0 && !buf.is_null() { unsafe { (*buf).st_size } } else { -1 };
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(libc::AT_FDCWD, path) };
                stat_of($label, abs, ret, size, s, e)
            })
        }
    };
}
stat_hook!(stat, "stat", libc::stat);
stat_hook!(stat64, "stat64", libc::stat64);
stat_hook!(lstat, "lstat", libc::stat);
stat_hook!(lstat64, "lstat64", libc::stat64);

macro_rules! fstatat_hook {
    ($name:ident, $st:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            dirfd: c_int,
            path: *const c_char,
            buf: *mut $st,
            flags: c_int,
        ) -> c_int {
            let Some(real) =
                real!($name: unsafe extern "C" fn(c_int, *const c_char, *mut $st, c_int) -> c_int)
            else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(dirfd, path, buf, flags) }, |ret, s, e| {
                // SAFETY: after a successful call libc has filled the caller's buffer.
                let size = if ret == 0 && !buf.is_null() { unsafe { (*buf).st_size } } else { -1 };
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(dirfd, path) };
                stat_of("fstatat", abs, ret, size, s, e)
            })
        }
    };
}
fstatat_hook!(fstatat, libc::stat);
fstatat_hook!(fstatat64, libc::stat64);

macro_rules! fstat_hook {
    ($name:ident, $st:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(fd: c_int, buf: *mut $st) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn(c_int, *mut $st) -> c_int) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(fd, buf) }, |ret, s, e| {
                if let Some(path) = fds::with(fd, |t| t.json_path.clone()) {
                    // SAFETY: after a successful call libc has filled the caller's buffer.
                    let size =
                        if ret == 0 && !buf.is_null() { unsafe { (*buf).st_size } } else { -1 };
                    let args = [("fd", i64::from(fd)), ("ret", i64::from(ret)), ("size", size)];
                    on_fd("fstat", POSIX, &path, s, e, &args);
                }
            })
        }
    };
}
fstat_hook!(fstat, libc::stat);
fstat_hook!(fstat64, libc::stat64);

// --- stdio ----------------------------------------------------------------------------------

/// The descriptor under a stream, or -1.
fn fd_of(stream: *mut FILE) -> c_int {
    if stream.is_null() {
        -1
    } else {
        // SAFETY: a non-null stream the caller owns; fileno only reads it.
        unsafe { libc::fileno(stream) }
    }
}

macro_rules! fopen_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char) -> *mut FILE {
            let Some(real) =
                real!($name: unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE)
            else {
                set_errno(libc::ENOSYS);
                return std::ptr::null_mut();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(path, mode) }, |stream, s, e| {
                // SAFETY: `path` is the caller's NUL-terminated path (or null).
                let abs = unsafe { fds::absolute(libc::AT_FDCWD, path) };
                // SAFETY: `mode` is the caller's NUL-terminated mode string (or null).
                let appends = !mode.is_null()
                    && unsafe { std::ffi::CStr::from_ptr(mode) }.to_bytes().contains(&b'a');
                let flags = if appends { libc::O_APPEND } else { 0 };
                opened("fopen", STDIO, abs, flags, fd_of(stream), s, e)
            })
        }
    };
}
fopen_hook!(fopen);
fopen_hook!(fopen64);

#[unsafe(no_mangle)]
pub unsafe extern "C" fn fclose(stream: *mut FILE) -> c_int {
    let Some(real) = real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int) else {
        return missing();
    };
    // As in `close`: forgotten before the number is free again.
    let (fd, path) = if Guard::enter().is_some() {
        let fd = fd_of(stream);
        (fd, fds::untrack(fd))
    } else {
        (-1, None)
    };
    // SAFETY: the caller's argument, passed on unchanged.
    traced(
        || unsafe { real(stream) },
        |ret, s, e| {
            if let Some(path) = &path {
                on_fd(
                    "fclose",
                    STDIO,
                    path,
                    s,
                    e,
                    &[("fd", i64::from(fd)), ("ret", i64::from(ret))],
                );
            }
        },
    )
}

macro_rules! stdio_transfer_hook {
    ($name:ident, $buf:ty) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            ptr: $buf,
            size: size_t,
            items: size_t,
            stream: *mut FILE,
        ) -> size_t {
            let Some(real) =
                real!($name: unsafe extern "C" fn($buf, size_t, size_t, *mut FILE) -> size_t)
            else {
                set_errno(libc::ENOSYS);
                return 0;
            };
            let before = if Guard::enter().is_some() && !stream.is_null() {
                // SAFETY: a non-null stream the caller owns.
                unsafe { libc::ftello(stream) }
            } else {
                -1
            };
            let parts = std::iter::once((ptr as usize, size.saturating_mul(items)));
            let buffer = Buffer::of(stringify!($name), fd_of(stream), parts);
            // SAFETY: the caller's arguments, passed on unchanged.
            traced(|| unsafe { real(ptr, size, items, stream) }, |ret, s, e| {
                let bytes = size.saturating_mul(items);
                let moved = (ret.saturating_mul(size)) as i64;
                let at = (before >= 0).then_some(before);
                transfer(stringify!($name), STDIO, fd_of(stream), s, e, bytes, moved, at, buffer)
            })
        }
    };
}
stdio_transfer_hook!(fread, *mut c_void);
stdio_transfer_hook!(fwrite, *const c_void);

// --- the end of a process image --------------------------------------------------------------

/// Completes the trace, then runs `exec` (which replaces the process image and returns only
/// when it failed); records again if it returned.
fn around_exec(exec: impl FnOnce() -> c_int) -> c_int {
    let finished = Guard::enter().is_some_and(|_guard| sink::finish());
    let ret = exec();
    if finished {
        sink::resume();
    }
    ret
}

type Argv = *const *const c_char;

// libc's `execv`, `execvp` and `execvpe` call its `execve` inside libc, past the hook, so each
// has a hook of its own. The variadic `execl`, `execlp` and `execle` cannot be defined in
// stable Rust: a process that ends with them leaves its trace `.partial` (Python's `os.exec*`
// and `subprocess` call `execv`/`execve`).
macro_rules! exec_hook {
    ($name:ident ( $($arg:ident : $ty:ty),* )) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let Some(real) = real!($name: unsafe extern "C" fn($($ty),*) -> c_int) else {
                return missing();
            };
            // SAFETY: the caller's arguments, passed on unchanged.
            around_exec(|| unsafe { real($($arg),*) })
        }
    };
}
exec_hook!(execve(path: *const c_char, argv: Argv, envp: Argv));
exec_hook!(execv(path: *const c_char, argv: Argv));
exec_hook!(execvp(file: *const c_char, argv: Argv));
exec_hook!(execvpe(file: *const c_char, argv: Argv, envp: Argv));
exec_hook!(fexecve(fd: c_int, argv: Argv, envp: Argv));

macro_rules! exit_hook {
    ($name:ident) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(status: c_int) -> ! {
            if let Some(_guard) = Guard::enter() {
                let _ = sink::finish();
            }
            if let Some(real) = real!($name: unsafe extern "C" fn(c_int) -> !) {
                // SAFETY: the caller's argument, passed on unchanged.
                unsafe { real(status) }
            }
            // SAFETY: exit_group ends the process; it takes the status and cannot fail.
            unsafe { libc::syscall(libc::SYS_exit_group, status) };
            unreachable!("exit_group returned")
        }
    };
}
exit_hook!(_exit);
exit_hook!(_Exit);
