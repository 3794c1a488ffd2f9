//! Probes of the machine properties a test may skip for, run before the code under test.
//! Each answers `Err(reason)` when the property holds (the feature is missing), naming what
//! refused it, so the skip can say why.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether the kernel sets up an io_uring (a ring of 2 entries, then dropped).
pub fn io_uring() -> Result<(), String> {
    io_uring::IoUring::new(2)
        .map(drop)
        .map_err(|e| format!("the kernel refuses io_uring_setup: {e}"))
}

/// Whether `dir`'s file system accepts an `O_DIRECT` open and an aligned 4 KiB read of a
/// file written there.
pub fn o_direct(dir: &Path) -> Result<(), String> {
    let probe = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write a probe file in {}: {e}", dir.display()))?;
    std::fs::write(probe.path(), vec![7u8; 4096])
        .map_err(|e| format!("cannot write {}: {e}", probe.path().display()))?;
    let fd = open(probe.path(), libc::O_RDONLY | libc::O_DIRECT)
        .map_err(|e| format!("{} refuses O_DIRECT opens: {e}", dir.display()))?;
    let mut buffer = Box::new(AlignedPage([0; 4096]));
    // SAFETY: `fd` is open; the buffer is 4096 bytes, 4096-aligned, and outlives the call.
    let got = unsafe { libc::pread(fd, buffer.0.as_mut_ptr().cast(), 4096, 0) };
    let error = std::io::Error::last_os_error();
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    if got != 4096 {
        return Err(format!(
            "{} refuses an aligned O_DIRECT read: {error}",
            dir.display()
        ));
    }
    Ok(())
}

/// Whether `dir`'s file system answers `preadv2(RWF_NOWAIT)` (with the bytes, or with
/// EAGAIN) rather than refusing the flag.
pub fn nowait_reads(dir: &Path) -> Result<(), String> {
    let probe = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write a probe file in {}: {e}", dir.display()))?;
    std::fs::write(probe.path(), [1u8; 64])
        .map_err(|e| format!("cannot write {}: {e}", probe.path().display()))?;
    let fd = open(probe.path(), libc::O_RDONLY).map_err(|e| e.to_string())?;
    let mut buffer = [0u8; 64];
    let iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: `fd` is open, `iov` describes `buffer`, which outlives the call.
    let got = unsafe { libc::preadv2(fd, &iov, 1, 0, libc::RWF_NOWAIT) };
    let error = std::io::Error::last_os_error();
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    if got < 0 && error.raw_os_error() != Some(libc::EAGAIN) {
        return Err(format!(
            "{} refuses preadv2(RWF_NOWAIT): {error}",
            dir.display()
        ));
    }
    Ok(())
}

/// Whether `dir` is on tmpfs (`statfs`'s file system type).
pub fn is_tmpfs(dir: &Path) -> bool {
    let Ok(path) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: an all-zero `statfs` is a valid value of the plain C struct.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and `info` is a valid, writable statfs.
    let status = unsafe { libc::statfs(path.as_ptr(), &mut info) };
    status == 0 && info.f_type == libc::TMPFS_MAGIC
}

fn open(path: &Path, flags: libc::c_int) -> std::io::Result<libc::c_int> {
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is NUL-terminated; open only reads it.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

/// One 4 KiB page at a 4 KiB-aligned address, for the O_DIRECT probe.
#[repr(C, align(4096))]
struct AlignedPage([u8; 4096]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_answer_on_this_machine_and_tmpfs_is_told_apart() {
        // The probes must not panic; /dev/shm is tmpfs on Linux, / is not.
        let _ = io_uring();
        let dir = tempfile::tempdir().unwrap();
        let _ = o_direct(dir.path());
        let _ = nowait_reads(dir.path());
        if Path::new("/dev/shm").is_dir() {
            assert!(is_tmpfs(Path::new("/dev/shm")));
        }
        assert!(!is_tmpfs(Path::new("/proc")));
    }
}
