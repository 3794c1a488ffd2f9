//! Reads one file through one engine, fio-style, and prints one JSON line: what
//! `bench/vs-fio.sh` compares with fio.
//!
//! ```text
//! engine_bench FILE BLOCK_BYTES seq|rand posix|direct|mmap|io_uring DEPTH [odirect] [batch=N]
//! ```
//!
//! Every block of the file is read once (in order, or in a fixed pseudo-random permutation,
//! as fio's random map does). The file's page cache is dropped first (fio's `invalidate=1`);
//! the clock starts after the file is open and the buffer allocated, as fio's does.
//!
//! By default the blocks are one `read_stream` over a window of `DEPTH x BLOCK` bytes (one
//! block at depth 1), the same memory as fio's `iodepth` buffers: on the project's VM the
//! disk's bandwidth falls as the destination memory grows, at the same depth
//! (bench/HISTORY.md, "Why the io_uring gap was there"), so a larger window would measure the memory, not the engine. io_uring
//! keeps `DEPTH` requests in flight and refills a slot as soon as its block has completed,
//! and its queue drains only after the last block, as fio's does.
//!
//! `batch=N` reads instead with `read_batch`, `N` blocks per call into a buffer of
//! `N x BLOCK` bytes: io_uring refills slots within a batch, but each call returns only when
//! all of its requests are done, so the queue drains at every batch end (what
//! `bench/vs-fio.sh MODE=explain` measures). The JSON line says which `mode` ran; its latency
//! percentiles are per block when streaming and per call with `batch=N`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dlio_storage::{
    EngineKind, EngineSettings, Extent, IoBuffer, IoCounters, ReadHandle, ReadRequest,
    StorageError, drop_file_cache, engine_for,
};

fn usage() -> ! {
    eprintln!("usage: engine_bench FILE BLOCK_BYTES seq|rand ENGINE DEPTH [odirect] [batch=N]");
    std::process::exit(2)
}

/// A stride coprime with `n`, so `i * stride % n` visits every block once.
fn coprime_stride(n: u64) -> u64 {
    let mut stride = (n as f64 * 0.618_033_988_7) as u64 | 1;
    while gcd(stride, n) != 1 {
        stride += 2;
    }
    stride
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        usage();
    }
    let path = Path::new(&args[0]);
    let block: usize = args[1].parse().unwrap_or_else(|_| usage());
    let random = match args[2].as_str() {
        "seq" => false,
        "rand" => true,
        _ => usage(),
    };
    let engine = EngineKind::from_name(&args[3]).unwrap_or_else(|| usage());
    let depth: usize = args[4].parse().unwrap_or_else(|_| usage());
    let mut odirect = false;
    // `None`: one stream; `Some(n)`: batches of `n` blocks.
    let mut per_batch: Option<usize> = None;
    for arg in &args[5..] {
        match arg.strip_prefix("batch=") {
            Some(n) => {
                per_batch = Some(n.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| usage()))
            }
            None if arg == "odirect" => odirect = true,
            None => usage(),
        }
    }
    let engine = engine_for(&EngineSettings {
        engine,
        odirect,
        transfer_size: None,
        transfer_size_distribution: Vec::new(),
        seed: 0,
        sample_request_patterns: Vec::new(),
        read_buffer: None,
        head_request_size: None,
        io_depth: depth as u32,
        s3: None,
        read_bytes_per_second: 0,
        fresh_read_share: 0.0,
        buffer_page_offset: None,
        request_work: std::time::Duration::ZERO,
    })
    .unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    if let Err(e) = drop_file_cache(path) {
        eprintln!("{e}");
        std::process::exit(1)
    }
    let counters = Arc::new(IoCounters::default());
    let storage = engine.metered(Arc::clone(&counters));
    let alignment = storage.capabilities().alignment.max(4096);
    let mut handle = storage.open(path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let blocks = handle.len() / block as u64;
    let stride = coprime_stride(blocks.max(1));
    // fio's buffer memory: `depth` blocks (see the module comment), or one batch.
    let slots = per_batch.unwrap_or(depth.max(1));
    let mut buffer = IoBuffer::zeroed(block * slots, alignment).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let offset_of = |i: u64| {
        let index = if random { i * stride % blocks } else { i };
        index * block as u64
    };
    let started = Instant::now();
    let read = match per_batch {
        None => stream(&mut *handle, &mut buffer, block, blocks, &offset_of),
        Some(n) => batches(&mut *handle, &mut buffer, block, n, blocks, &offset_of),
    };
    if let Err(e) = read {
        eprintln!("{e}");
        std::process::exit(1)
    }
    let seconds = started.elapsed().as_secs_f64();
    let counts = counters.snapshot();
    let latency = counters.read_latency();
    println!(
        "{{\"engine\":\"{}\",\"mode\":\"{}\",\"bw_mib_s\":{:.1},\"requests\":{},\"bytes\":{},\"calls\":{},\
         \"call_p50_us\":{:.1},\"call_p99_us\":{:.1}}}",
        storage.engine(),
        if per_batch.is_some() {
            "batch"
        } else {
            "stream"
        },
        counts.bytes_read as f64 / seconds / (1 << 20) as f64,
        counts.read_requests,
        counts.bytes_read,
        latency.count(),
        latency.percentile_ns(50.0) as f64 / 1e3,
        latency.percentile_ns(99.0) as f64 / 1e3,
    );
}

/// Every block in one stream over `window`.
fn stream(
    handle: &mut dyn ReadHandle,
    window: &mut [u8],
    block: usize,
    blocks: u64,
    offset_of: &dyn Fn(u64) -> u64,
) -> Result<(), StorageError> {
    let mut extents = (0..blocks).map(|i| Extent::new(offset_of(i), block));
    handle.read_stream(window, block, &mut extents, &mut |_, _| Ok(()))
}

/// Every block, `per_batch` per `read_batch` call into `buffer`.
fn batches(
    handle: &mut dyn ReadHandle,
    buffer: &mut [u8],
    block: usize,
    per_batch: usize,
    blocks: u64,
    offset_of: &dyn Fn(u64) -> u64,
) -> Result<(), StorageError> {
    let mut next = 0u64;
    while next < blocks {
        let batch = (blocks - next).min(per_batch as u64) as usize;
        let mut requests: Vec<ReadRequest<'_>> = buffer
            .chunks_mut(block)
            .take(batch)
            .enumerate()
            .map(|(i, buf)| ReadRequest {
                offset: offset_of(next + i as u64),
                buf,
            })
            .collect();
        handle.read_batch(&mut requests)?;
        next += batch as u64;
    }
    Ok(())
}
