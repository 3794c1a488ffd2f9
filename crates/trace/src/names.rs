//! The vocabulary of a trace: span names (dftracer's AI taxonomy), I/O operations, their
//! categories, and the hash that names files and hosts.

/// The category and name of a span, as written in an event's `cat` and `name` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanName {
    /// The event's `cat` (`pipeline`, `dataloader`, `data`, `compute`, ...).
    pub cat: &'static str,
    /// The event's `name` (`train`, `fetch.iter`, `item`, ...).
    pub name: &'static str,
}

impl SpanName {
    /// A span name outside the AI taxonomy (shows up in the analysis as "other").
    pub const fn new(cat: &'static str, name: &'static str) -> SpanName {
        SpanName { cat, name }
    }
}

/// dftracer's AI taxonomy (`pydftracer`'s `ai.<cat>.<name>`): the category is the first
/// component and the name the rest, so `ai.dataloader.fetch.iter` is `cat: "dataloader",
/// name: "fetch.iter"`. These are the spans `dlio analyze` recognises in our traces and in
/// traces of other programs that use the taxonomy.
pub mod ai {
    use super::SpanName;

    /// The whole of a rank's work (pydftracer's root `ai` span; dfanalyzer's app layer).
    pub const AI_ROOT: SpanName = SpanName::new("ai_root", "ai_root");
    /// The whole training phase of a run (one span per rank).
    pub const PIPELINE_TRAIN: SpanName = SpanName::new("pipeline", "train");
    /// One evaluation pass.
    pub const PIPELINE_EVALUATE: SpanName = SpanName::new("pipeline", "evaluate");
    /// The body of one epoch (pydftracer's `pipeline.epoch.iter` writes `epoch.block`).
    pub const EPOCH_BLOCK: SpanName = SpanName::new("pipeline", "epoch.block");
    /// Getting to the next epoch (pydftracer's `pipeline.epoch.iter`, the iterator's wait):
    /// the page-cache drop and the epoch's plan, before its `epoch.block`.
    pub const EPOCH_ITER: SpanName = SpanName::new("pipeline", "epoch.iter");
    /// One step's body after its batch arrived: compute, barrier, step checkpoint
    /// (pydftracer's `dataloader.fetch.block`).
    pub const FETCH_BLOCK: SpanName = SpanName::new("dataloader", "fetch.block");
    /// Waiting for the next batch in the step loop (pydftracer's `dataloader.fetch.iter`).
    pub const FETCH_ITER: SpanName = SpanName::new("dataloader", "fetch.iter");
    /// Reading one sample (on a reader thread).
    pub const DATA_ITEM: SpanName = SpanName::new("data", "item");
    /// The pass over the first bytes of every file before the first epoch
    /// (`reader.header_scan_bytes`).
    pub const DATA_HEADER_SCAN: SpanName = SpanName::new("data", "header_scan");
    /// The emulated per-sample preprocessing (`preprocess_time`).
    pub const DATA_PREPROCESS: SpanName = SpanName::new("data", "preprocess");
    /// The emulated computation of one step.
    pub const COMPUTE: SpanName = SpanName::new("compute", "compute");
    /// Writing a checkpoint.
    pub const CHECKPOINT_CAPTURE: SpanName = SpanName::new("checkpoint", "capture");
    /// Reading a checkpoint back.
    pub const CHECKPOINT_RESTART: SpanName = SpanName::new("checkpoint", "restart");
    /// The barrier after a step.
    pub const COMM_BARRIER: SpanName = SpanName::new("comm", "barrier");
}

/// Categories of I/O events. `dlio analyze` counts every event of these categories as I/O.
pub const IO_CATEGORIES: [&str; 3] = [CAT_POSIX, CAT_STDIO, CAT_OBJECT];
/// File-system calls (what dftracer's POSIX interception records).
pub const CAT_POSIX: &str = "POSIX";
/// C stdio calls (dftracer's STDIO interception).
pub const CAT_STDIO: &str = "STDIO";
/// Object-store requests (S3 GET/PUT/LIST/HEAD).
pub const CAT_OBJECT: &str = "S3";
/// Calls on the pipes between a program's processes, as `dlio trace` records them: not file
/// I/O (not in [`IO_CATEGORIES`]).
pub const CAT_IPC: &str = "IPC";
/// The start of a pipe's name in those events (`pipe:[INODE]`, as `/proc/PID/fd` shows it).
pub const PIPE_NAME_PREFIX: &str = "pipe:[";

/// One storage operation, named as dftracer names the system call it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IoOp {
    /// Open an existing file for reading (`open`).
    Open,
    /// Create a file for writing (`open` with `"create":1` in args).
    Create,
    /// Positional read (`pread`).
    Read,
    /// Append (`write`).
    Write,
    /// Close a handle, or publish a written file (`close`).
    Close,
    /// Make written data durable (`fsync`).
    Fsync,
    /// Size / existence query (`stat`).
    Stat,
    /// Directory listing (`opendir`).
    List,
    /// Create directories (`mkdir`).
    Mkdir,
    /// Remove a file (`unlink`).
    Unlink,
    /// Remove a directory tree (`rmdir`).
    Rmdir,
    /// Object GET (`GET`).
    Get,
    /// Object PUT (`PUT`).
    Put,
}

impl IoOp {
    /// Every operation, in declaration order (`ALL[op as usize] == op`).
    pub const ALL: [IoOp; 13] = [
        IoOp::Open,
        IoOp::Create,
        IoOp::Read,
        IoOp::Write,
        IoOp::Close,
        IoOp::Fsync,
        IoOp::Stat,
        IoOp::List,
        IoOp::Mkdir,
        IoOp::Unlink,
        IoOp::Rmdir,
        IoOp::Get,
        IoOp::Put,
    ];

    /// The event category: [`CAT_OBJECT`] for GET/PUT, [`CAT_POSIX`] otherwise.
    pub const fn category(self) -> &'static str {
        match self {
            IoOp::Get | IoOp::Put => CAT_OBJECT,
            _ => CAT_POSIX,
        }
    }

    /// The event name written in the trace.
    pub const fn event_name(self) -> &'static str {
        match self {
            IoOp::Open | IoOp::Create => "open",
            IoOp::Read => "pread",
            IoOp::Write => "write",
            IoOp::Close => "close",
            IoOp::Fsync => "fsync",
            IoOp::Stat => "stat",
            IoOp::List => "opendir",
            IoOp::Mkdir => "mkdir",
            IoOp::Unlink => "unlink",
            IoOp::Rmdir => "rmdir",
            IoOp::Get => "GET",
            IoOp::Put => "PUT",
        }
    }
}

/// The 64-bit hash that names files (`fhash`) and hosts (`hhash`); written as 16
/// lowercase hex digits, as dftracer writes its hashes. `dlio analyze` hashes the plain
/// `fname` of older traces the same way, so both kinds of trace key files alike.
///
/// Hand-written because it runs once per open on the hot path: eight bytes per step (a
/// multiply and a rotate), about a fifth of the time byte-wise FNV-1a took on a typical
/// 60-byte dataset path. Stable across runs and machines (little-endian words, fixed
/// constants), so hashes in traces of different runs compare.
pub fn name_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes(w.try_into().expect("chunks of eight"));
        h = (h ^ v).wrapping_mul(K).rotate_left(29);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let last = match bytes.len().checked_sub(8) {
            // The last eight bytes, overlapping the last whole word: one load instead of a
            // loop over the rest (the length, mixed in first, tells the overlaps apart).
            Some(from) => u64::from_le_bytes(bytes[from..].try_into().expect("eight bytes")),
            // A short name: its bytes as a little-endian word padded with zeros, built in
            // registers (a copy into a zeroed array was a `memcpy` call per hash).
            None => rest
                .iter()
                .enumerate()
                .fold(0u64, |w, (i, &b)| w | u64::from(b) << (8 * i)),
        };
        h = (h ^ last).wrapping_mul(K).rotate_left(29);
    }
    // Final mix (from splitmix64) so that every input bit reaches every output bit.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    // 0 means "no file" in the records; keep real names away from it.
    if h == 0 { 1 } else { h }
}

#[cfg(test)]
mod tests {
    use super::name_hash;
    use std::collections::HashSet;

    #[test]
    fn names_differ_in_their_hashes() {
        // Paths that differ in one character, in length only, or in a trailing zero byte.
        let mut names: Vec<Vec<u8>> = (0..20_000)
            .map(|i| format!("/data/train/img_{i:05}_of_20000.npz").into_bytes())
            .collect();
        names.push(b"/data/train/img".to_vec());
        names.push(b"/data/train/img\0".to_vec());
        names.push(b"/data/train/img\0\0".to_vec());
        names.push(Vec::new());
        let hashes: HashSet<u64> = names.iter().map(|n| name_hash(n)).collect();
        assert_eq!(hashes.len(), names.len());
        assert!(!hashes.contains(&0));
    }

    #[test]
    fn the_hash_is_stable() {
        // Traces of different runs must name a file alike: pinned value (changed once, in
        // November 2026, when the tail of a name became one overlapping word).
        assert_eq!(
            format!("{:016x}", name_hash(b"/data/train/img_0.npz")),
            "43c064d2cfc45bc9"
        );
    }
}
