//! The descriptors the program opened: each one's path (already JSON-quoted, as every event
//! writes it) and the file position that `read`, `write` and `lseek` move.

use std::cell::RefCell;
use std::ffi::{CStr, OsStr, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One followed descriptor.
#[derive(Clone)]
pub(crate) struct Tracked {
    /// The absolute path.
    pub path: Arc<Path>,
    /// The same as a JSON string literal, quotes included.
    pub json_path: Arc<str>,
    /// Where the next `read`/`write` on the descriptor starts.
    pub position: i64,
}

static TABLE: Mutex<Vec<Option<Tracked>>> = Mutex::new(Vec::new());

/// The table's lock, taken (a panic that left it poisoned left the table as it was).
fn table() -> MutexGuard<'static, Vec<Option<Tracked>>> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// The table's lock, held by the forking thread across a fork (see `sink::before_fork`).
    static HELD_FOR_FORK: RefCell<Option<MutexGuard<'static, Vec<Option<Tracked>>>>> =
        const { RefCell::new(None) };
}

/// Starts following `fd`, opened on `path`, at `position`.
pub(crate) fn track(fd: c_int, path: &Path, position: i64) {
    let Ok(slot) = usize::try_from(fd) else {
        return;
    };
    let mut table = table();
    if table.len() <= slot {
        table.resize(slot + 1, None);
    }
    table[slot] = Some(Tracked {
        path: Arc::from(path),
        json_path: json_quoted(path),
        position,
    });
}

/// Follows `new` as a copy of `old` (`dup`, `fcntl(F_DUPFD)`), at `old`'s position; replaces
/// what `new` was. A copy shares its file position with the original in the kernel; here each
/// keeps its own from the copy on (reads through both at once are rare: numpy's `fread`s on a
/// copy carry their own position, from `ftello`).
pub(crate) fn copy(old: c_int, new: c_int) {
    let Some(entry) = with(old, |t| t.clone()) else {
        untrack(new);
        return;
    };
    let Ok(slot) = usize::try_from(new) else {
        return;
    };
    let mut table = table();
    if table.len() <= slot {
        table.resize(slot + 1, None);
    }
    table[slot] = Some(entry);
}

/// Stops following `fd`; its path when it was followed.
pub(crate) fn untrack(fd: c_int) -> Option<Arc<str>> {
    let slot = usize::try_from(fd).ok()?;
    table()
        .get_mut(slot)
        .and_then(Option::take)
        .map(|t| t.json_path)
}

/// Stops following every descriptor in `first..=last`.
pub(crate) fn untrack_range(first: u32, last: u32) {
    let mut table = table();
    let end = table.len().min((last as usize).saturating_add(1));
    for slot in table.iter_mut().take(end).skip(first as usize) {
        *slot = None;
    }
}

/// Runs `f` on `fd`'s entry when it is followed.
pub(crate) fn with<R>(fd: c_int, f: impl FnOnce(&mut Tracked) -> R) -> Option<R> {
    let slot = usize::try_from(fd).ok()?;
    table().get_mut(slot)?.as_mut().map(f)
}

/// The path of a followed descriptor (for `openat` relative to a directory descriptor).
fn path_of(fd: c_int) -> Option<Arc<Path>> {
    with(fd, |t| t.path.clone())
}

/// `path` as an absolute path with `.` and `..` resolved lexically: relative to the working
/// directory, or to the directory `dirfd` was opened on (`AT_FDCWD` for the working one).
/// `None` for a null pointer or a relative path against a directory that is not followed.
///
/// # Safety
/// `path` is null or a NUL-terminated string, as libc's callers pass it.
pub(crate) unsafe fn absolute(dirfd: c_int, path: *const c_char) -> Option<PathBuf> {
    if path.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract, which libc has too).
    let given = Path::new(OsStr::from_bytes(
        unsafe { CStr::from_ptr(path) }.to_bytes(),
    ));
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else if dirfd == libc::AT_FDCWD {
        std::env::current_dir().ok()?.join(given)
    } else {
        path_of(dirfd)?.join(given)
    };
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    Some(clean)
}

/// A path as a JSON string literal (non-UTF-8 bytes replaced, as dftracer does).
pub(crate) fn json_quoted(path: &Path) -> Arc<str> {
    serde_json::to_string(&path.to_string_lossy())
        .unwrap_or_else(|_| "\"?\"".to_string())
        .into()
}

/// Takes the table's lock across a fork (see `sink::before_fork`).
pub(crate) fn hold_for_fork() {
    let guard = table();
    let _ = HELD_FOR_FORK.try_with(|held| held.replace(Some(guard)));
}

/// Releases the lock [`hold_for_fork`] took, on either side of the fork (in the child, on
/// the thread that forked, now its only one).
pub(crate) fn release_after_fork() {
    let _ = HELD_FOR_FORK.try_with(|held| held.take());
}
