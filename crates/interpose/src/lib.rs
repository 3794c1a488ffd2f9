//! `dlio-interpose`: the library `dlio trace -- CMD` preloads into a program (`LD_PRELOAD`) to
//! record the file I/O it does, for `dlio characterize` and `dlio fidelity`.
//!
//! Where it sits: outside the pipeline, in someone else's process. `dlio trace` sets
//! `DLIO_TRACE_DIR` and `LD_PRELOAD`; without `DLIO_TRACE_DIR` every hook only calls libc.
//!
//! What it records: the POSIX calls `open`/`openat`/`creat`,
//! `read`/`pread`/`readv`/`preadv`/`preadv2`, `write`/`pwrite`/`writev`/`pwritev`/`pwritev2`,
//! `lseek`, `mmap`, `close`, `stat`/`lstat`/`fstat`/`fstatat` (with the file's size) and
//! stdio's `fopen`/`fread`/`fwrite`/`fclose`, on every thread, each as one dftracer event
//! (`cat` `POSIX` or `STDIO`, `ts`/`dur` in microseconds with nanosecond decimals,
//! `args.fname` the absolute path). Reads and writes carry the file
//! offset they started at: given for positional calls, followed per descriptor for the others
//! (`read` advances it, `lseek` sets it). Only descriptors the program opened through these
//! calls (and their copies) are followed, and pipes, named `pipe:[INODE]` with no offset: a
//! framework's worker processes hand batches to the training process through them; sockets
//! are not followed.
//!
//! The trace: one file per process, `DIR/trace-{host}-{pid}-{start}.pfw`, in the layout of
//! `dlio run --trace` (a JSON array with one event per line). It is written as
//! `….pfw.partial` and renamed when the process ends (`exit`, `_exit`, `execve`), after a last
//! event (`cat` `dlio_trace`, `name` `end`) that marks when, so a process that was killed
//! leaves a file that says so. A forked child starts its own file at its first
//! event (the parent's unwritten events stay the parent's); an `exec`'d program loads this
//! library again and starts a new file.
//!
//! Why by hand: no crate interposes libc for tracing; the hooks are plain `extern "C"`
//! functions that find libc's own with `dlsym(RTLD_NEXT)`.

// The hooks keep libc's contracts (the caller's pointers are passed to libc unchanged), which
// is all their safety section could say.
#![allow(clippy::missing_safety_doc)]

mod fds;
mod hooks;
mod sink;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once, by the constructor, when `DLIO_TRACE_DIR` names where traces go.
static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// True while this thread is inside a hook: the library's own libc calls (and libc's
    /// calls back into hooked names) pass straight through.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Held while a hook records; `None` when tracing is off or the thread is already recording.
struct Guard;

impl Guard {
    fn enter() -> Option<Guard> {
        if !ENABLED.load(Ordering::Relaxed) {
            return None;
        }
        IN_HOOK.with(|inside| {
            if inside.replace(true) {
                None
            } else {
                Some(Guard)
            }
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        IN_HOOK.with(|inside| inside.set(false));
    }
}

/// The next definition of a libc function after this library's (libc's own), looked up once.
/// `None` when libc has no such symbol.
macro_rules! real {
    ($name:ident : $ty:ty) => {{
        static ADDRESS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let address = *ADDRESS.get_or_init(|| {
            // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name only reads the loaded
            // objects' symbol tables.
            let symbol = unsafe {
                libc::dlsym(
                    libc::RTLD_NEXT,
                    concat!(stringify!($name), "\0").as_ptr().cast(),
                )
            };
            symbol as usize
        });
        if address == 0 {
            None
        } else {
            // SAFETY: the address is the definition of the symbol this hook stands in for,
            // whose C prototype is `$ty` (the hook is declared with the same prototype).
            Some(unsafe { std::mem::transmute::<usize, $ty>(address) })
        }
    }};
}
pub(crate) use real;

/// The library's constructor: runs when the dynamic loader maps it, before `main`.
extern "C" fn init() {
    let Some(dir) = std::env::var_os("DLIO_TRACE_DIR").filter(|d| !d.is_empty()) else {
        return;
    };
    IN_HOOK.with(|inside| inside.set(true));
    sink::configure(std::path::PathBuf::from(dir));
    sink::claim();
    // SAFETY: the handlers are `extern "C" fn()` with static lifetime, as both calls require.
    unsafe {
        libc::atexit(at_exit);
        libc::pthread_atfork(
            Some(sink::before_fork),
            Some(sink::after_fork_in_parent),
            Some(sink::after_fork_in_child),
        );
    }
    install_terminate_handler();
    IN_HOOK.with(|inside| inside.set(false));
    ENABLED.store(true, Ordering::Release);
}

/// Completes the trace on SIGTERM (see `sink::on_terminate`) when the signal still has its
/// default action; an ignored or handled SIGTERM is left as the program set it.
fn install_terminate_handler() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; sigaction reads and
    // writes only the two structs given.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = sink::on_terminate as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

extern "C" fn at_exit() {
    IN_HOOK.with(|inside| inside.set(true));
    let _ = sink::finish();
}

// The loader calls every function in `.init_array` of a shared object when it loads it; this
// is how a C library marks a constructor (`__attribute__((constructor))`).
#[used]
#[unsafe(link_section = ".init_array")]
static CONSTRUCTOR: extern "C" fn() = init;
