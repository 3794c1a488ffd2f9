//! What the loader test files share.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use dlio_config::FormatKind;
use dlio_format::{FileLayout, GenerationFile, GenerationJob};
use dlio_loader::FileList;
use dlio_storage::{PathTable, PosixStorage};

/// Generates `n` files of `kind` with `layout`, file `i` at `path_of(i)`; returns their paths
/// in file order.
pub fn generate_files(
    kind: FormatKind,
    layout: &FileLayout,
    n: u64,
    path_of: impl Fn(u64) -> PathBuf,
) -> FileList {
    let storage = PosixStorage::new();
    let format = dlio_format::format_for(kind).unwrap();
    let files: Vec<GenerationFile> = (0..n)
        .map(|i| GenerationFile {
            path: path_of(i),
            layout: layout.clone(),
            list_id: 0,
            file_index: i,
        })
        .collect();
    let paths: PathTable = files.iter().map(|f| f.path.as_path()).collect();
    dlio_format::generate(
        GenerationJob {
            storage: &storage,
            format: &*format,
            files,
            threads: 2,
            seed: 1,
        },
        &|_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    FileList::from(paths)
}
