//! What tracing costs a reader thread per sample: the calls one 4 KiB-sample read makes
//! (`open`, `pread`, `close` through [`Traced`] storage, inside a `data.item` span),
//! N times on each of THREADS threads (default 1) over a few page-cached files, without
//! and with a trace. Prints the recording threads' CPU time per sample (thread CPU time,
//! so other load on the machine inflates it little) and the difference.
//!   THREADS=2 cargo run --release -p dlio-trace --example hot_path [N]

use std::time::Instant;

use dlio_storage::{PosixStorage, Storage};
use dlio_trace::{PreparedSpan, TraceOptions, Traced, Tracer, ai};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is valid and writable; the clock id exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300_000);
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let paths: Vec<_> = (0..64)
        .map(|i| {
            let p = data.join(format!("img_{i:05}_of_00064.npy"));
            std::fs::write(&p, [7u8; 4096]).expect("sample file");
            p
        })
        .collect();
    let mut per_sample = [0.0f64; 2];
    // Alternate a few rounds so that drift on the machine hits both alike.
    for round in 0..3 {
        for (k, traced) in [false, true].into_iter().enumerate() {
            let tracer = if traced {
                Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer")
            } else {
                Tracer::disabled()
            };
            let storage = Traced::new(PosixStorage::new(), tracer.clone());
            let threads: usize = std::env::var("THREADS")
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(1);
            // Each thread measures its own CPU time; the mean is the figure.
            let ns: f64 = std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| {
                        let (tracer, storage, paths) = (&tracer, &storage, &paths);
                        s.spawn(move || {
                            let mut buf = vec![0u8; 4096];
                            let start = thread_cpu_ns();
                            // As the loader records a sample: its read, timed by two
                            // clock readings, then a prepared `data.item` span.
                            let item = PreparedSpan::new(ai::DATA_ITEM, ["epoch", "image_idx"]);
                            for i in 0..n {
                                let started = Instant::now();
                                let mut h = storage.open(&paths[(i % 64) as usize]).expect("open");
                                h.read_exact_at(&mut buf, 0).expect("read");
                                drop(h);
                                tracer.complete_prepared(
                                    &item,
                                    started,
                                    started.elapsed(),
                                    [1, i as i64],
                                );
                            }
                            (thread_cpu_ns() - start) as f64 / n as f64
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("thread"))
                    .sum::<f64>()
                    / threads as f64
            });
            if round > 0 {
                per_sample[k] += ns / 2.0;
            }
            tracer.finish().expect("finish");
        }
    }
    println!(
        "untraced {:.0} ns, traced {:.0} ns of CPU per sample: tracing adds {:.0} ns ({:.1}%)",
        per_sample[0],
        per_sample[1],
        per_sample[1] - per_sample[0],
        100.0 * (per_sample[1] - per_sample[0]) / per_sample[0]
    );
}
