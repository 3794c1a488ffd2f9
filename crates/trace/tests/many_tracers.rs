//! A process of many ranks: the tracers map their buffers ahead of the run only within an
//! allowance for the whole process, and the ones beyond it trace just as well. (A test
//! binary of its own: it measures the process's resident memory.)

use std::io::Read;
use std::path::Path;

use dlio_trace::{FileId, IoOp, TraceOptions, Tracer};

/// Resident memory of this process, in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("resident pages");
    pages * 4096
}

fn pread_count(path: &Path) -> usize {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    text.lines()
        .filter(|l| l.contains("\"name\":\"pread\""))
        .count()
}

#[test]
fn twelve_ranks_map_ahead_what_four_would_and_all_twelve_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = resident();
    let tracers: Vec<Tracer> = (0..12)
        .map(|rank| Tracer::create(&TraceOptions::new(dir.path(), rank, 12)).expect("tracer"))
        .collect();
    let grown = resident().saturating_sub(before);
    // Four tracers map about 9 MiB each ahead; twelve would map 108 MiB.
    assert!(
        grown < 60 << 20,
        "{} MiB resident after creating twelve tracers",
        grown >> 20
    );
    assert!(
        grown > 30 << 20,
        "{} MiB: the first four tracers map their buffers ahead",
        grown >> 20
    );
    for (rank, tracer) in tracers.iter().enumerate() {
        let file = tracer.file(Path::new("/data/img.npy"));
        for i in 0..=rank as u64 {
            let s = tracer.stamp();
            tracer.io_between(IoOp::Read, file, Some(i * 4096), Some(4096), s, s);
        }
        assert_ne!(file, FileId::NONE);
    }
    for (rank, tracer) in tracers.iter().enumerate() {
        let summary = tracer.finish().expect("finish").expect("enabled");
        assert_eq!(pread_count(&summary.path), rank + 1, "rank {rank}");
    }
    drop(tracers);
    // The allowance is back: a new tracer maps ahead again.
    let before = resident();
    let again = Tracer::create(&TraceOptions::new(dir.path().join("again"), 0, 1)).expect("tracer");
    assert!(
        resident().saturating_sub(before) > 7 << 20,
        "a tracer created after the others finished maps its buffers ahead"
    );
    again.finish().expect("finish");
}
