//! The object window: how MLPerf Storage's DLIO fork reads objects it does not decode. Its
//! S3 readers keep a window of whole-object GETs in flight per worker (s3dlio: a sliding
//! window of `prefetch_window`, 64 by default; minio: up to 16 at a time; s3torchconnector:
//! one), count each object's bytes and hand the loop a dummy tensor. A reader thread here does
//! the same over the samples of its own batches, in order: it keeps `window` background reads
//! ([`Storage::start_whole_read`]) running ahead of the sample it waits for, so the storage
//! sees that many requests in flight per thread while the thread itself only waits. Where the
//! engine says when each read finishes (S3), a read that finishes before the oldest one is
//! replaced at once (a few windows of finished reads may wait to be consumed), so a slow
//! request does not empty the other slots. No object bytes are held: the engine counts and
//! drops them as they arrive.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dlio_metrics::LatencyHistogram;
use dlio_plan::{EpochPlan, SampleRef};
use dlio_storage::{PathScratch, PendingRead, ReadBell, Storage};
use rustc_hash::FxHashMap;

use crate::reader::{OpenPolicy, SampleReader};
use crate::{FileList, LoadedBatch, LoaderError, collate};

/// Which samples cost a read under the loader's open policy: every sample when files are
/// opened per sample, the first sample of a file otherwise (until the iterative sampler
/// moves to another file, or the epoch ends for `read_type: memory`). Deterministic, so the
/// issuing side and the consuming side agree on which samples have a read. The consuming side
/// also records each read's bytes for the samples of the file that follow without a read;
/// only what the policy can ask for again is kept (nothing per sample, one file sequentially).
struct ReadDecider {
    policy: OpenPolicy,
    /// The iterative sampler's current file and its bytes.
    current: Option<(u64, u64)>,
    /// `read_type: memory`: every file read this epoch and its bytes.
    seen: FxHashMap<u64, u64>,
}

impl ReadDecider {
    fn new(policy: OpenPolicy) -> ReadDecider {
        ReadDecider {
            policy,
            current: None,
            seen: FxHashMap::default(),
        }
    }

    fn needs_read(&mut self, file: u64) -> bool {
        match self.policy {
            OpenPolicy::PerSample => true,
            OpenPolicy::KeepOpen => {
                let new = !self.seen.contains_key(&file);
                if new {
                    self.seen.insert(file, 0);
                }
                new
            }
            OpenPolicy::Sequential => {
                let new = self.current.is_none_or(|(f, _)| f != file);
                if new {
                    self.current = Some((file, 0));
                }
                new
            }
        }
    }

    /// Records that `file` (just decided to need a read) holds `bytes`.
    fn record(&mut self, file: u64, bytes: u64) {
        match self.policy {
            OpenPolicy::PerSample => {}
            OpenPolicy::KeepOpen => {
                self.seen.insert(file, bytes);
            }
            OpenPolicy::Sequential => self.current = Some((file, bytes)),
        }
    }

    /// The bytes of `file`, read for an earlier sample.
    fn bytes_of(&self, file: u64) -> u64 {
        match self.policy {
            OpenPolicy::PerSample => 0,
            OpenPolicy::KeepOpen => self.seen.get(&file).copied().unwrap_or_default(),
            OpenPolicy::Sequential => self
                .current
                .filter(|&(f, _)| f == file)
                .map_or(0, |(_, bytes)| bytes),
        }
    }
}

/// The samples a reader thread reads in one epoch, in order: those of batches `worker`,
/// `worker + threads`, ...
fn samples_of(plan: &EpochPlan, worker: u64, threads: u64) -> impl Iterator<Item = SampleRef> {
    (worker..plan.steps())
        .step_by(threads as usize)
        .flat_map(move |step| plan.batch(step))
}

/// Bytes of sample `index` of a file of `bytes` bytes and `samples` samples: its share of
/// the file, as the undecoded reader slices it.
fn sample_share(bytes: u64, index: u64, samples: u64) -> u64 {
    let samples = samples.max(1);
    bytes * (index + 1) / samples - bytes * index / samples
}

impl SampleReader {
    /// Reads the batches of `worker` through the object window and sends each in order.
    /// Returns `false`, having read nothing, when the storage has no background reads.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_epoch_windowed(
        &mut self,
        storage: &dyn Storage,
        plan: &EpochPlan,
        files: &FileList,
        worker: u64,
        send: &mut dyn FnMut(Result<LoadedBatch, LoaderError>) -> bool,
        hist: &mut LatencyHistogram,
    ) -> bool {
        let window = self.window.max(1);
        let held = window.saturating_mul(UNCONSUMED_PER_WINDOW);
        let mut ahead = samples_of(plan, worker, u64::from(plan.reader_threads()));
        let mut issue = ReadDecider::new(self.policy);
        let mut consume = ReadDecider::new(self.policy);
        let mut pending: VecDeque<(u64, Box<dyn PendingRead>)> = VecDeque::new();
        let mut probed = false;
        let mut scratch = PathScratch::default();
        let bell = Arc::new(ReadBell::default());
        // Starts reads until `window` of them run (or `held` wait to be consumed).
        let mut refill =
            |pending: &mut VecDeque<(u64, Box<dyn PendingRead>)>| -> Result<bool, LoaderError> {
                let mut running = pending
                    .iter()
                    .filter(|(_, read)| read.finished() != Some(true))
                    .count();
                while running < window && pending.len() < held {
                    let Some(sample) = ahead.next() else {
                        return Ok(true);
                    };
                    if !issue.needs_read(sample.file) {
                        continue;
                    }
                    let path = path_of(files, sample.file, &mut scratch)?;
                    match storage.start_whole_read(path, &bell) {
                        Some(read) => pending.push_back((sample.file, read)),
                        None => return Ok(false),
                    }
                    running += 1;
                }
                Ok(true)
            };
        let stopped_mid_epoch =
            || LoaderError::Setting("the storage stopped taking background reads mid-epoch".into());
        let samples_per_file = u64::from(self.samples_per_file.max(1));
        let mut step = worker;
        while step < plan.steps() {
            if self.stop.is_stopped() {
                break;
            }
            let mut samples = 0;
            let mut sample_bytes = 0;
            let mut failed = None;
            for sample in plan.batch(step) {
                let started = Instant::now();
                match refill(&mut pending) {
                    Ok(true) => {}
                    Ok(false) if !probed => return false,
                    Ok(false) => {
                        failed = Some(stopped_mid_epoch());
                        break;
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                probed = true;
                let bytes = if consume.needs_read(sample.file) {
                    // While the oldest read runs, each read that finishes makes room for
                    // another, as a raw request loop keeps its slots full.
                    let waited = loop {
                        let seen = bell.rings();
                        if pending.front().and_then(|(_, read)| read.finished()) != Some(false) {
                            break Ok(());
                        }
                        match refill(&mut pending) {
                            Ok(true) => bell.wait_past(seen),
                            Ok(false) => break Err(stopped_mid_epoch()),
                            Err(e) => break Err(e),
                        }
                    };
                    if let Err(e) = waited {
                        failed = Some(e);
                        break;
                    }
                    let Some((file, read)) = pending.pop_front() else {
                        failed = Some(LoaderError::Setting(
                            "the object window ran dry before the epoch's last read".into(),
                        ));
                        break;
                    };
                    debug_assert_eq!(file, sample.file);
                    match read.wait() {
                        Ok(done) => {
                            consume.record(file, done.bytes);
                            done.bytes
                        }
                        Err(source) => {
                            // The path from the list, not a copy per read.
                            failed = Some(LoaderError::Read {
                                path: files.path_buf(file as usize).unwrap_or_default(),
                                index: sample.index_in_file,
                                source: Box::new(source.into()),
                            });
                            break;
                        }
                    }
                } else {
                    consume.bytes_of(sample.file)
                };
                let share = sample_share(bytes, sample.index_in_file, samples_per_file);
                // The fork hands the loop a dummy tensor; a resized sample is still copied
                // into the batch as a collate step would.
                let len = match self.sample_out_bytes {
                    None => share as usize,
                    Some(out) => collate(&mut self.batch, samples as usize, out, &[]),
                };
                let _ = self.sample_done(started, hist, plan.epoch(), sample.global);
                samples += 1;
                sample_bytes += len as u64;
            }
            if failed.is_none() {
                self.batch_done();
            }
            let result = match failed {
                Some(e) => Err(e),
                None => Ok(LoadedBatch {
                    step,
                    samples,
                    sample_bytes,
                }),
            };
            let failed = result.is_err();
            if !send(result) || failed {
                break;
            }
            step += u64::from(plan.reader_threads());
        }
        // Reads still in flight (the epoch was cut short) are abandoned here.
        drop(pending);
        true
    }
}

/// Reads a thread may hold unconsumed per read of its window. A finished read holds its byte
/// count, not its bytes, so holding a few windows' worth costs nothing and lets the window's
/// slots be refilled while the oldest read is still running.
const UNCONSUMED_PER_WINDOW: usize = 4;

fn path_of<'a>(
    files: &'a FileList,
    file: u64,
    scratch: &'a mut PathScratch,
) -> Result<&'a Path, LoaderError> {
    files
        .path(file as usize, scratch)
        .ok_or(LoaderError::NoSuchFile {
            file,
            len: files.len(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_samples_share_its_bytes_exactly() {
        let shares: Vec<u64> = (0..3).map(|i| sample_share(10, i, 3)).collect();
        assert_eq!(shares, [3, 3, 4]);
        assert_eq!(sample_share(7, 0, 1), 7);
    }

    #[test]
    fn reads_follow_the_open_policy() {
        let mut per_sample = ReadDecider::new(OpenPolicy::PerSample);
        assert!([1, 1, 2].iter().all(|&f| per_sample.needs_read(f)));
        let mut sequential = ReadDecider::new(OpenPolicy::Sequential);
        let got: Vec<bool> = [1, 1, 2, 1]
            .iter()
            .map(|&f| sequential.needs_read(f))
            .collect();
        assert_eq!(got, [true, false, true, true]);
        let mut keep = ReadDecider::new(OpenPolicy::KeepOpen);
        let got: Vec<bool> = [1, 1, 2, 1].iter().map(|&f| keep.needs_read(f)).collect();
        assert_eq!(got, [true, false, true, false]);
    }

    #[test]
    fn later_samples_of_a_file_get_the_bytes_of_its_read() {
        let mut keep = ReadDecider::new(OpenPolicy::KeepOpen);
        assert!(keep.needs_read(1));
        keep.record(1, 100);
        assert!(keep.needs_read(2));
        keep.record(2, 7);
        assert!(!keep.needs_read(1));
        assert_eq!((keep.bytes_of(1), keep.bytes_of(2)), (100, 7));
        let mut sequential = ReadDecider::new(OpenPolicy::Sequential);
        assert!(sequential.needs_read(3));
        sequential.record(3, 50);
        assert!(!sequential.needs_read(3));
        assert_eq!(sequential.bytes_of(3), 50);
        // Only the current file is kept.
        assert!(sequential.needs_read(4));
        assert_eq!(sequential.bytes_of(3), 0);
    }
}
