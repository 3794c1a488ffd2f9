//! Hand-built reports with known times, so every expected figure can be worked out on paper.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dlio_metrics::{
    BlockRecord, CheckpointKind, CheckpointRecord, EpochRecord, EvalRecord, IoTotals, MetricParams,
    RankReport, Span, StepTimes,
};

/// Asserts two floats agree to 1e-9 relative (absolute near zero).
#[macro_export]
macro_rules! assert_close {
    ($actual:expr, $expected:expr) => {{
        let (actual, expected): (f64, f64) = ($actual, $expected);
        let tolerance = 1e-9 * expected.abs().max(1e-12);
        assert!(
            (actual - expected).abs() <= tolerance,
            "{} = {actual}, expected {expected}",
            stringify!($actual)
        );
    }};
}

/// A fixed instant plus `seconds`.
pub fn at(seconds: f64) -> SystemTime {
    UNIX_EPOCH
        + Duration::from_secs(1_700_000_000)
        + Duration::from_nanos((seconds * 1e9).round() as u64)
}

/// Steps from `(compute, proc)` pairs; load is `proc - compute`.
pub fn steps(compute_proc: &[(f64, f64)]) -> StepTimes {
    StepTimes {
        load: compute_proc.iter().map(|(c, p)| p - c).collect(),
        proc_: compute_proc.iter().map(|(_, p)| *p).collect(),
        compute: compute_proc.iter().map(|(c, _)| *c).collect(),
    }
}

/// `n` identical steps.
pub fn uniform_steps(n: usize, compute: f64, proc_: f64) -> StepTimes {
    steps(&vec![(compute, proc_); n])
}

/// A closed block from `start` to `end` seconds.
pub fn block(number: u32, start: f64, end: f64, steps: StepTimes) -> BlockRecord {
    BlockRecord {
        block: number,
        span: Span {
            start: at(start),
            end: Some(at(end)),
        },
        reported_steps: Some(steps.len() as u64),
        steps,
    }
}

/// A closed evaluation pass.
pub fn eval(start: f64, end: f64, steps: StepTimes) -> EvalRecord {
    EvalRecord {
        span: Span {
            start: at(start),
            end: Some(at(end)),
        },
        reported_steps: Some(steps.len() as u64),
        steps,
        passes: 1,
        pass_seconds: end - start,
        pass_start: None,
        last_pass: None,
    }
}

/// An epoch from `start` to `end` (None = never ended) with these blocks.
pub fn epoch(number: u32, start: f64, end: Option<f64>, blocks: Vec<BlockRecord>) -> EpochRecord {
    EpochRecord {
        epoch: number,
        span: Span {
            start: at(start),
            end: end.map(at),
        },
        reported_steps: None,
        host_meminfo: serde_json::Map::new(),
        blocks,
        eval: None,
        checkpoints: Vec::new(),
        train_io: IoTotals::default(),
        eval_io: IoTotals::default(),
        train_latency: None,
        eval_latency: None,
    }
}

/// A checkpoint record.
pub fn checkpoint(
    kind: CheckpointKind,
    index: u32,
    start: f64,
    end: f64,
    size_bytes: u64,
) -> CheckpointRecord {
    CheckpointRecord {
        kind,
        index,
        start: at(start),
        end: at(end),
        size_bytes,
        stall_seconds: None,
    }
}

/// A report of one rank.
pub fn report(rank: u32, epochs: Vec<EpochRecord>) -> RankReport {
    RankReport {
        rank,
        epochs,
        train_latency: None,
        eval_latency: None,
    }
}

/// An epoch of one closed block of `n` steps lasting `wall` seconds, each computing
/// `compute` with `proc_` total: with `exclude_start_steps = 0` its AU is
/// `100 n compute / wall` and its throughput `n batch / wall`.
pub fn simple_epoch(number: u32, n: usize, wall: f64, compute: f64) -> EpochRecord {
    let start = f64::from(number) * 1000.0;
    epoch(
        number,
        start,
        Some(start + wall + 1.0),
        vec![block(
            1,
            start,
            start + wall,
            uniform_steps(n, compute, compute),
        )],
    )
}

/// World 1, batch 4 (eval 2), 10 steps per epoch (eval 5), DLIO's default exclusions,
/// 1 MiB records, AU threshold 90%.
pub fn params() -> MetricParams {
    MetricParams {
        world: 1,
        batch_size: 4,
        batch_size_eval: 2,
        steps_per_epoch: 10,
        eval_steps_per_epoch: 5,
        exclude_start_steps: 1,
        exclude_end_steps: 0,
        record_length_bytes: 1024.0 * 1024.0,
        au_threshold: 0.9,
        checkpoint_size_bytes: None,
        upstream_throughput: false,
    }
}
