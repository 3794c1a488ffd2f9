//! Files the command line writes itself (the run's config copies, capacity reports).

use std::path::Path;

/// Writes `bytes` to `path` under a temporary name and renames it when complete, so a crash or
/// a full disk never leaves a partial file under the final name.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.partial"));
    let written =
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
