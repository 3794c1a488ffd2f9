//! Micro-benchmark of image decoding: a DLIO-like 256x256 noise image (or `SIDE` x `SIDE`),
//! decoded `N` times by the `image` crate (zune-jpeg / png) and by the dlio reader (open, read,
//! decode, close: what one `on_demand` sample costs). Prints wall time and this thread's CPU
//! time per decode (from /proc/thread-self/schedstat), which other processes disturb less.
//!
//!     cargo run --release -p dlio-format --example image_decode -- 2000 256
use std::error::Error;
use std::io::Write;
use std::time::Instant;

use dlio_config::{Compression, ElementType, FormatKind};
use dlio_format::{DataRng, FileLayout, format_for};
use dlio_storage::PosixStorage;

/// This thread's CPU time in nanoseconds (0 where /proc does not say).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `f` `n` times; prints wall and CPU microseconds per call.
fn measure(
    label: &str,
    n: u32,
    mut f: impl FnMut() -> Result<(), Box<dyn Error>>,
) -> Result<(), Box<dyn Error>> {
    let (start, cpu) = (Instant::now(), cpu_ns());
    for _ in 0..n {
        f()?;
    }
    let wall = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let cpu = cpu_ns().saturating_sub(cpu) as f64 / 1e3 / f64::from(n);
    say(format_args!(
        "  {label:28} {wall:8.1} us wall {cpu:8.1} us CPU"
    ))
}

/// Prints a line; a closed stdout (`| head`) ends the program quietly.
fn say(line: std::fmt::Arguments<'_>) -> Result<(), Box<dyn Error>> {
    match writeln!(std::io::stdout(), "{line}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        result => Ok(result?),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().map_or(Ok(2000), |s| s.parse())?;
    let side: usize = args.next().map_or(Ok(256), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let storage = PosixStorage::new();
    let layout = FileLayout {
        samples: 1,
        sample_dims: vec![side, side],
        element: ElementType::Uint8,
        compression: Compression::None,
        fixed_size: false,
    };
    for (kind, format_name, image_format) in [
        (FormatKind::Jpeg, "jpeg", image::ImageFormat::Jpeg),
        (FormatKind::Png, "png", image::ImageFormat::Png),
    ] {
        let format = format_for(kind)?;
        let path = dir.path().join(format!("a.{format_name}"));
        format.generate(&storage, &path, &layout, &mut DataRng::for_file(1, 0, 0))?;
        let bytes = std::fs::read(&path)?;
        say(format_args!(
            "{format_name}: {side}x{side}, {} bytes",
            bytes.len()
        ))?;
        measure("image crate decode", n, || {
            std::hint::black_box(image::load_from_memory_with_format(&bytes, image_format)?);
            Ok(())
        })?;
        let mut reader = format.reader(&layout);
        measure("dlio reader open+read+close", n, || {
            reader.open(&storage, 0, &path)?;
            std::hint::black_box(reader.read_sample(&storage, 0, 0)?);
            reader.close(0);
            Ok(())
        })?;
    }
    Ok(())
}
