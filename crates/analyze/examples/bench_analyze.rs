//! Benchmark helper for `bench/analyze.sh`:
//!
//! ```text
//! bench_analyze gen DIR EVENTS RANKS   # write a synthetic trace through dlio-trace
//! bench_analyze run PATH [OUT]         # analyse it, print events/s (and write reports)
//! ```
//! The synthetic workload per rank: steps of one compute span, one fetch wait and four
//! samples, each sample an item span with open, two preads and close (1 + 1 + 4 x 5 = 22
//! events per step), on a reader thread and the rank thread.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dlio_trace::{IoOp, TraceOptions, Tracer, ai};

fn generate(dir: &Path, events: u64, ranks: u32) -> Result<(), Box<dyn std::error::Error>> {
    let per_rank = events / u64::from(ranks);
    let steps = per_rank / 22;
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let mut handles = Vec::new();
        for rank in 0..ranks {
            handles.push(s.spawn(move || -> Result<u64, dlio_trace::TraceError> {
                let tracer = Tracer::create(&TraceOptions::new(dir, rank, ranks))?;
                let files: Vec<_> = (0..1000)
                    .map(|i| tracer.file(Path::new(&format!("/data/train/img_{i}_of_1000.npz"))))
                    .collect();
                let t0 = Instant::now();
                let us = |n: u64| Duration::from_micros(n);
                for step in 0..steps {
                    let base = t0 + us(step * 1000);
                    for k in 0..4u64 {
                        let f = files[((step * 4 + k) % 1000) as usize];
                        let at = base + us(k * 100);
                        tracer.io(IoOp::Open, f, None, None, at, us(5));
                        tracer.io(IoOp::Read, f, Some(0), Some(4096), at + us(10), us(20));
                        tracer.io(
                            IoOp::Read,
                            f,
                            Some(4096),
                            Some(131_072),
                            at + us(40),
                            us(40),
                        );
                        tracer.io(IoOp::Close, f, None, None, at + us(90), us(2));
                        tracer.complete(
                            ai::DATA_ITEM,
                            at,
                            at + us(95),
                            &[("image_idx", (step * 4 + k) as i64)],
                        );
                    }
                    tracer.complete(
                        ai::FETCH_ITER,
                        base,
                        base + us(400),
                        &[("step", step as i64)],
                    );
                    tracer.complete(
                        ai::COMPUTE,
                        base + us(400),
                        base + us(1000),
                        &[("step", step as i64)],
                    );
                }
                Ok(tracer.finish()?.map_or(0, |s| s.events))
            }));
        }
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| "generator thread panicked")??;
        }
        println!(
            "wrote {total} events in {} files to {}",
            ranks,
            dir.display()
        );
        Ok(())
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["gen", dir, events, ranks] => {
            let t = Instant::now();
            generate(Path::new(dir), events.parse()?, ranks.parse()?)?;
            println!("generation: {:.2} s", t.elapsed().as_secs_f64());
            Ok(())
        }
        ["run", path, rest @ ..] => {
            let t = Instant::now();
            // THREADS=n sets the parsing threads (default: one per core).
            let threads = std::env::var("THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let opts = dlio_analyze::AnalyzeOptions { threads };
            let a = dlio_analyze::analyze(&[PathBuf::from(path)], &opts)?;
            let secs = t.elapsed().as_secs_f64();
            print!("{}", dlio_analyze::render_terminal(&a));
            println!(
                "\nanalysed {} events in {secs:.2} s: {:.0} events/s",
                a.events + a.metadata_events,
                (a.events + a.metadata_events) as f64 / secs
            );
            if let Some(out) = rest.first() {
                dlio_analyze::write_reports(&a, Path::new(out))?;
            }
            Ok(())
        }
        _ => Err("usage: bench_analyze gen DIR EVENTS RANKS | bench_analyze run PATH [OUT]".into()),
    }
}
