//! Progress: one bar per phase with live AU and samples/s when stderr is a terminal, DLIO's
//! plain log lines always. Only rank 0 drives the display; other ranks' calls return at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use dlio_config::Config;
use dlio_format::GenerationProgress;
use dlio_metrics::{CheckpointKind, MetricParams, RankRecorder};
use dlio_trainer::{Observer, Pass};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::log::RunLog;

pub struct Progress<'a> {
    bars: MultiProgress,
    log: &'a RunLog,
    config: &'a Config,
    world: u32,
    params: MetricParams,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    bar: Option<ProgressBar>,
    started: Option<Instant>,
    compute: Duration,
    samples: u64,
}

impl<'a> Progress<'a> {
    pub fn new(
        bars: MultiProgress,
        log: &'a RunLog,
        config: &'a Config,
        params: MetricParams,
    ) -> Self {
        Progress {
            bars,
            log,
            config,
            world: params.world,
            params,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn finish(&self) {
        if let Some(bar) = self.state().bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} steps {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Observer for Progress<'_> {
    fn pass_started(&self, rank: u32, pass: Pass, steps: u64) {
        if rank != 0 {
            return;
        }
        let (label, line) = match pass {
            Pass::Train { epoch } => (
                format!("epoch {epoch}/{}", self.config.train.epochs),
                format!("Starting epoch {epoch}: {steps} steps expected"),
            ),
            Pass::Eval { epoch } => (
                format!("eval {epoch}"),
                format!("Starting eval - {steps} steps expected"),
            ),
        };
        self.log.output(&line);
        let bar = self.bars.add(ProgressBar::new(steps));
        bar.set_style(bar_style());
        bar.set_prefix(label);
        let mut s = self.state();
        if let Some(old) = s.bar.replace(bar) {
            old.finish_and_clear();
        }
        s.started = Some(Instant::now());
        s.compute = Duration::ZERO;
        s.samples = 0;
    }

    fn step_done(
        &self,
        rank: u32,
        pass: Pass,
        step: u64,
        samples: u64,
        load: Duration,
        compute: Duration,
    ) {
        if self.log.shows(crate::log::LogLevel::Info) {
            // DLIO's per-step INFO lines, from every rank.
            let what = match pass {
                Pass::Train { .. } => "",
                Pass::Eval { .. } => " (eval)",
            };
            self.log.info(&format!(
                "Rank {rank} step {step}{what}: loaded {samples} samples in {:.4} s",
                load.as_secs_f64()
            ));
            self.log.info(&format!(
                "Rank {rank} step {step}{what} processed {samples} samples in {:.4} s",
                compute.as_secs_f64()
            ));
        }
        if rank != 0 {
            return;
        }
        let mut s = self.state();
        s.compute += compute;
        s.samples += samples;
        let elapsed = s
            .started
            .map_or(0.0, |t| t.elapsed().as_secs_f64())
            .max(1e-9);
        let au = 100.0 * s.compute.as_secs_f64() / elapsed;
        let rate = s.samples as f64 * f64::from(self.world) / elapsed;
        if let Some(bar) = &s.bar {
            bar.inc(1);
            bar.set_message(format!("AU {au:5.1}%  {rate:9.1} samples/s"));
        }
    }

    fn pass_finished(&self, rank: u32, pass: Pass, recorder: &RankRecorder) {
        if self.log.shows(crate::log::LogLevel::Debug) {
            let (what, epoch) = match pass {
                Pass::Train { epoch } => ("training", epoch),
                Pass::Eval { epoch } => ("evaluation", epoch),
            };
            let steps = recorder.epoch(epoch).map_or(0, |e| match pass {
                Pass::Train { .. } => e.train_steps(),
                Pass::Eval { .. } => e.eval.as_ref().map_or(0, |v| v.steps.len()),
            });
            self.log.debug(&format!(
                "Rank {rank} returned after {steps} steps of {what} in epoch {epoch}"
            ));
        }
        if rank != 0 {
            return;
        }
        if let Some(bar) = self.state().bar.take() {
            bar.finish_and_clear();
        }
        let set_value = self.config.train.computation_time.mean();
        let lines = match pass {
            Pass::Train { epoch } => {
                dlio_metrics::train_pass_lines(recorder, &self.params, epoch, set_value)
            }
            Pass::Eval { epoch } => dlio_metrics::eval_pass_lines(recorder, &self.params, epoch),
        };
        for line in lines {
            self.log.output(&line);
        }
    }

    fn checkpoint_finished(
        &self,
        rank: u32,
        epoch: u32,
        kind: CheckpointKind,
        index: u32,
        recorder: &RankRecorder,
    ) {
        if rank == 0 {
            self.checkpoint_lines(epoch, kind, index, recorder);
        }
    }

    fn warn(&self, rank: u32, message: &str) {
        self.log.warn(&format!("rank {rank}: {message}"));
    }
}

impl Progress<'_> {
    fn checkpoint_lines(
        &self,
        epoch: u32,
        kind: CheckpointKind,
        index: u32,
        recorder: &RankRecorder,
    ) {
        for line in dlio_metrics::checkpoint_end_lines(recorder, &self.params, epoch, kind, index) {
            self.log.output(&line);
        }
    }
}

pub fn generation_bar(bars: &MultiProgress, files: u64) -> ProgressBar {
    let bar = bars.add(ProgressBar::new(files));
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>18} [{bar:30}] {pos}/{len} files {msg} ({elapsed}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix("generating");
    bar
}

pub fn generation_update(bar: &ProgressBar, p: &GenerationProgress) {
    bar.set_position(p.files_done);
    let secs = bar.elapsed().as_secs_f64().max(1e-9);
    bar.set_message(format!(
        "{:.1} MiB, {:.1} MiB/s",
        p.bytes_done as f64 / 1048576.0,
        p.bytes_done as f64 / 1048576.0 / secs
    ));
}
