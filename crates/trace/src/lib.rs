//! `dlio-trace`: writes what a run did as a dftracer-format trace, for `dlio analyze`,
//! Perfetto and dftracer's own tools.
//!
//! Where it sits: beside the pipeline, not in it. The run driver creates one [`Tracer`]
//! per rank (`trace-{rank}-of-{size}.pfw.gz` in the output folder, DLIO's name); the
//! storage used by the rank is wrapped in [`Traced`] so every engine call becomes an I/O
//! event; the loader and the step loop open AI spans with [`Tracer::span`] or record
//! measured ones with [`Tracer::complete`]. [`Tracer::finish`] closes the file.
//!
//! Why this shape: the hot path must stay cheap. A small-record run makes a million
//! events per second, so a call appends one fixed-size record to a small staging area of
//! the calling thread (no lock, no formatting, no allocation), which moves to the thread's
//! buffer every 32 samples or so; a full buffer goes to one background thread per
//! rank, which packs it (a few bytes per field; at the lowest priority, nice 19, so that it
//! does not preempt the readers) in memory, and beyond 64 MiB per process
//! into a spill file (`trace-{rank}-of-{size}.pfw.spill`), while the run goes on.
//! [`Tracer::finish`], after the measured phase, writes the JSON lines and gzips them, as
//! dftracer compresses at finalisation; the trace appears under its final name only when
//! complete. Timestamps read the CPU's time-stamp counter where the kernel trusts it
//! ([`Stamp`]). A read handle stages each of its events as the call returns, and it holds
//! the tracer's id, not a reference-counted tracer, so reader threads never write to a
//! cache line they share. A span recorded per sample is a [`PreparedSpan`] (its name and
//! keys looked up once). The run driver names
//! the dataset's files before the run ([`Tracer::name_files`]); other files are named the
//! first time a thread opens them ([`Tracer::file`]). A [disabled](Tracer::disabled) tracer
//! returns at once, so call sites need no `if`.
//!
//! Events of a thread reach the file when the thread ends or calls [`Tracer::finish`]; a
//! thread still running when another thread finishes the trace may keep its last few
//! events (fewer than 128) out of it. The run driver finishes traces after every rank,
//! reader and checkpoint thread has ended.
//!
//! # Format (dftracer's, Chrome-trace JSON)
//! One JSON array, one event per line: `[`, then events separated by `,` at line ends, then
//! `]`, so Perfetto and `chrome://tracing` load the file directly and line readers read one
//! event per line after dropping the trailing comma. Complete events are
//! `{"id":N,"name":..,"cat":..,"pid":..,"tid":..,"ts":µs,"dur":µs,"ph":"X","args":{"hhash":..,..}}`
//! with `ts` in microseconds since the Unix epoch and `ts`/`dur` carrying up to three
//! decimals (nanoseconds). Metadata events (`"ph":"M"`, `"cat":"dftracer"`) map hashes to
//! text as dftracer does: `HH` (host), `FH` (file: `args.name` is the path, `args.value`
//! the 16-hex-digit [`name_hash`] that I/O events carry as `fhash`), `PR` (`rank` and
//! `size`), plus Chrome's `thread_name`. `pid` is the OS process id (all ranks of one
//! `dlio run` share it; the rank is in the file name and in `PR`).
//!
//! I/O events (category [`CAT_POSIX`], or [`CAT_OBJECT`] for `GET`/`PUT`) are named after
//! the call they stand for ([`IoOp::event_name`]): `open`, `pread`, `write`, `close`,
//! `fsync`, `stat`, `opendir`, `mkdir`, `unlink`, `rmdir`, `GET`, `PUT`; args carry
//! `fhash`, `count` and `ret` (bytes moved; `ret` is -1 on failure) and `offset` for
//! positional calls.
//!
//! # The AI spans the integration must emit
//! Names follow dftracer's AI taxonomy (constants in [`ai`]); `dlio analyze` maps them to
//! dfanalyzer's layers. Epochs and steps are 1-based, as DLIO prints them.
//!
//! | constant | cat / name | where, around what | args | analyzer layer |
//! |---|---|---|---|---|
//! | [`ai::AI_ROOT`] | `ai_root` / `ai_root` | rank thread, the rank's whole run | – | app |
//! | [`ai::PIPELINE_TRAIN`] | `pipeline` / `train` | rank thread, one epoch's training steps and its epoch checkpoint | `epoch` | train |
//! | [`ai::PIPELINE_EVALUATE`] | `pipeline` / `evaluate` | rank thread, one evaluation pass | `epoch` | evaluate |
//! | [`ai::EPOCH_BLOCK`] | `pipeline` / `epoch.block` | rank thread, one epoch | `epoch` | (epochs) |
//! | [`ai::EPOCH_ITER`] | `pipeline` / `epoch.iter` | rank thread, before an epoch's block (page-cache drop, plan) | `epoch` | (epochs) |
//! | [`ai::FETCH_BLOCK`] | `dataloader` / `fetch.block` | rank thread, one step after its batch arrived | `epoch`, `step` | – |
//! | [`ai::FETCH_ITER`] | `dataloader` / `fetch.iter` | rank thread, waiting for one batch ([`Tracer::complete`]) | `epoch`, `step` | fetch |
//! | [`ai::DATA_ITEM`] | `data` / `item` | reader thread, reading one sample | `epoch`, `image_idx` | reader |
//! | [`ai::DATA_PREPROCESS`] | `data` / `preprocess` | reader thread, the `preprocess_time` sleep after each sample (of no length without one; none for the synthetic format) | `epoch`, `image_idx` | reader |
//! | [`ai::COMPUTE`] | `compute` / `compute` | rank thread, the emulated step computation (in checkpoint-only mode, the `time_between_checkpoints` before each save and load) | `epoch`, `step` | compute |
//! | [`ai::CHECKPOINT_CAPTURE`] | `checkpoint` / `capture` | rank thread, writing one checkpoint | `epoch`, `step` | checkpoint |
//! | [`ai::CHECKPOINT_RESTART`] | `checkpoint` / `restart` | rank thread, reading a checkpoint | `epoch`, `step` | checkpoint |
//! | [`ai::COMM_BARRIER`] | `comm` / `barrier` | rank thread, the barrier after a step | `epoch`, `step` | comm |
//!
//! These are the counts upstream's `tests/dlio_ai_logging_test.py` asserts (one `ai_root`
//! per rank, one `train` and one `epoch.block` per epoch, `fetch.iter` and `compute` per step
//! of training and evaluation); as there, a TFRecord data set read by the stream pipeline
//! (tf.data's fused graph upstream) has no `data.item` or `data.preprocess` spans.
//!
//! I/O events are split between the "reader POSIX" and "checkpoint POSIX" layers by path:
//! a file with a path component containing `checkpoint` is checkpoint I/O.
//!
//! ```
//! use std::time::Instant;
//! use dlio_storage::{PosixStorage, Storage};
//! use dlio_trace::{TraceOptions, Traced, Tracer, ai};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let out = tempfile::tempdir()?;
//! let tracer = Tracer::create(&TraceOptions::new(out.path(), 0, 1))?;
//! let storage = Traced::new(PosixStorage::new(), tracer.clone());
//! let sample = out.path().join("data/img_0.bin");
//! storage.create_dir_all(sample.parent().expect("parent"))?;
//! let mut w = storage.create(&sample)?;
//! w.write_all(&[7u8; 4096])?;
//! w.commit()?;
//!
//! let train = tracer.span(ai::PIPELINE_TRAIN);
//! for step in 1..=2u64 {
//!     let wait = Instant::now();
//!     {
//!         // On a reader thread in a real run:
//!         let _item = tracer.span(ai::DATA_ITEM).epoch(1).arg("image_idx", 0);
//!         let mut buf = vec![0u8; 4096];
//!         storage.open(&sample)?.read_exact_at(&mut buf, 0)?;
//!     }
//!     tracer.complete(ai::FETCH_ITER, wait, Instant::now(), &[("epoch", 1), ("step", step as i64)]);
//!     let _compute = tracer.span(ai::COMPUTE).epoch(1).step(step);
//! }
//! drop(train);
//!
//! let summary = tracer.finish()?.expect("tracing is enabled");
//! // mkdir, open+write+close (create), 2 x (item, open, pread, close, fetch.iter, compute), train
//! assert_eq!(summary.events, 4 + 2 * 6 + 1);
//! assert!(summary.path.ends_with("trace-0-of-1.pfw.gz"));
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod clock;
mod error;
mod intern;
mod names;
mod traced;
mod tracer;
mod writer;

pub use clock::Stamp;
pub use error::TraceError;
pub use names::{
    CAT_IPC, CAT_OBJECT, CAT_POSIX, CAT_STDIO, IO_CATEGORIES, IoOp, PIPE_NAME_PREFIX, SpanName, ai,
    name_hash,
};
pub use traced::{Traced, metered_and_traced};
pub use tracer::{
    FileId, MAX_ARGS, PRENAMED_MAX, PreparedSpan, RANK_PID_BASE, SpanGuard, TraceOptions,
    TraceSummary, Tracer, dftracer_compression_from_env, dftracer_enabled_by_env,
};
