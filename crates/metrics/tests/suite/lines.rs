//! DLIO's log lines: the final `[METRIC]` block and rank 0's progress lines.

use std::time::Duration;

use dlio_metrics::{
    CheckpointKind, MetricParams, Phase, RankRecorder, RunMetrics, aggregate, block_end_lines,
    checkpoint_end_lines, epoch_end_lines, eval_pass_lines, format_timestamp, train_pass_lines,
};

use super::util::{at, checkpoint, eval, params, report, simple_epoch, uniform_steps};

fn window_free_params() -> MetricParams {
    MetricParams {
        exclude_start_steps: 0,
        steps_per_epoch: 100,
        world: 2,
        checkpoint_size_bytes: Some(8 << 30),
        ..params()
    }
}

fn run_metrics() -> RunMetrics {
    let mut reports = vec![
        report(
            0,
            vec![simple_epoch(1, 3, 2.0, 0.5), simple_epoch(2, 4, 2.0, 0.4)],
        ),
        report(
            1,
            vec![
                simple_epoch(1, 2, 2.0, 0.5),
                simple_epoch(2, 3, 2.0, 0.65 * 2.0 / 3.0),
            ],
        ),
    ];
    reports[0].epochs[0].eval = Some(eval(100.0, 102.0, uniform_steps(4, 0.25, 0.25)));
    reports[1].epochs[0].eval = Some(eval(100.0, 102.0, uniform_steps(4, 0.45, 0.45)));
    reports[0].epochs[0].checkpoints = vec![checkpoint(CheckpointKind::Save, 1, 10.0, 12.0, 1)];
    aggregate(&reports, &window_free_params())
}

#[test]
fn metric_block_matches_dlio_line_for_line() {
    let expected = [
        "Averaged metric over all steps/epochs",
        "[METRIC] ==========================================================",
        "[METRIC] Number of Simulated Accelerators: 2 ",
        "[METRIC] Training Accelerator Utilization [AU] (%): 67.5000 (5.0000)",
        "[METRIC] Training Throughput (samples/second): 12.0000 (2.0000)",
        "[METRIC] Training I/O Throughput (MB/second): 12.0000 (2.0000)",
        "[METRIC] train_au_meet_expectation: fail",
        "[METRIC] Checkpoint save duration (seconds): 2.0000 (0.0000)",
        "[METRIC] Checkpoint save I/O Throughput (GB/second): 4.0000 (0.0000)",
        "[METRIC] Eval Accelerator Utilization [AU] (%): 70.0000 (0.0000)",
        "[METRIC] Eval Throughput (samples/second): 8.000000 (0.000000)",
        "[METRIC] Eval Throughput (MB/second): 8.000000 (0.000000)",
        "[METRIC] eval_au_meet_expectation: fail",
        "[METRIC] ==========================================================",
    ];
    assert_eq!(run_metrics().metric_lines(), expected);
}

#[test]
fn block_lines_report_rank_zero_times_world_and_the_set_compute_time() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    recorder.start_block(1, 1);
    for _ in 0..3 {
        let step = Duration::from_millis(1);
        recorder.record_step(1, Phase::Train { block: 1 }, step, step, 2 * step);
    }
    recorder.end_block(1, 1, 3);
    let lines = block_end_lines(&recorder, &window_free_params(), 1, 1, "0.001");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("Ending block 1 - 3 steps completed in "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" s"));
    assert!(
        lines[1].starts_with("Epoch 1 - Block 1 [Training] Accelerator Utilization [AU] (%): ")
    );
    assert!(lines[2].starts_with("Epoch 1 - Block 1 [Training] Throughput (samples/second): "));
    assert_eq!(
        lines[3],
        "Epoch 1 - Block 1 [Training] Computation time per step (second): 0.0010+/-0.0000 (set value: 0.001)"
    );
    assert!(block_end_lines(&recorder, &window_free_params(), 1, 2, "0.001").is_empty());

    let epoch = epoch_end_lines(&recorder, 1);
    assert!(
        epoch[0].starts_with("Ending epoch 1 - 3 steps completed in "),
        "{epoch:?}"
    );
}

#[test]
fn train_pass_lines_give_every_block_then_the_epoch() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    for block in 1..=2 {
        recorder.start_block(1, block);
        let step = Duration::from_millis(1);
        recorder.record_step(1, Phase::Train { block }, step, step, 2 * step);
        recorder.end_block(1, block, 1);
    }
    let lines = train_pass_lines(&recorder, &window_free_params(), 1, 0.323);
    assert_eq!(lines.len(), 9, "{lines:?}");
    assert!(lines[0].starts_with("Ending block 1 - 1 steps"));
    assert!(lines[3].ends_with("(set value: 0.323)"), "{}", lines[3]);
    assert!(lines[4].starts_with("Ending block 2 - 1 steps"));
    assert!(lines[8].starts_with("Ending epoch 1 - 2 steps completed in "));
    assert!(train_pass_lines(&recorder, &window_free_params(), 2, 0.323).is_empty());
}

#[test]
fn eval_and_checkpoint_lines_say_what_dlio_says() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    recorder.start_eval(1);
    recorder.record_step(
        1,
        Phase::Eval,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    recorder.end_eval(1, 1);
    let start = recorder.now();
    recorder.record_checkpoint(
        1,
        CheckpointKind::Save,
        2,
        start,
        start + Duration::from_secs(2),
        1,
    );
    let params = window_free_params();

    let eval = eval_pass_lines(&recorder, &params, 1);
    assert!(
        eval[0].starts_with("Ending eval - 1 steps completed in "),
        "{eval:?}"
    );
    assert!(eval[1].starts_with("Epoch 1 [Eval] Accelerator Utilization [AU] (%): "));
    assert!(eval[2].starts_with("Epoch 1 [Eval] Throughput (samples/second): "));

    let saved = checkpoint_end_lines(&recorder, &params, 1, CheckpointKind::Save, 2);
    assert_eq!(
        saved,
        ["Finished saving checkpoint 2 for epoch 1 in 2.0000 s; Throughput: 4.0000 GB/s"]
    );
    assert!(checkpoint_end_lines(&recorder, &params, 1, CheckpointKind::Load, 2).is_empty());
}

#[test]
fn timestamps_use_dlio_local_iso_format_with_microseconds() {
    let stamp = format_timestamp(at(0.123456));
    assert_eq!(stamp.len(), "2023-11-14T22:13:20.123456".len(), "{stamp}");
    assert_eq!(&stamp[4..5], "-");
    assert_eq!(&stamp[10..11], "T");
    assert_eq!(&stamp[19..], ".123456");
}

#[test]
fn each_pass_of_an_epoch_with_several_ends_with_its_own_steps() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    let params = window_free_params();
    let mut ends = Vec::new();
    for steps in [2u64, 3] {
        recorder.start_eval(1);
        for _ in 0..steps {
            recorder.record_step(
                1,
                Phase::Eval,
                Duration::ZERO,
                Duration::ZERO,
                Duration::ZERO,
            );
        }
        recorder.end_eval(1, steps);
        ends.push(eval_pass_lines(&recorder, &params, 1)[0].clone());
    }
    assert!(
        ends[0].starts_with("Ending eval - 2 steps completed in "),
        "{ends:?}"
    );
    // The second pass's line counts its own 3 steps, not the epoch's 5.
    assert!(
        ends[1].starts_with("Ending eval - 3 steps completed in "),
        "{ends:?}"
    );
}
