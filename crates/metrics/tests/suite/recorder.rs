//! The recorder: what the trainer's calls leave in the report.

use std::time::Duration;

use dlio_metrics::{
    CheckpointKind, IoTotals, LatencyHistogram, Phase, PhaseKind, RankRecorder, RankReport,
};

const MS: Duration = Duration::from_millis(1);

fn train_step(recorder: &mut RankRecorder, epoch: u32, block: u32) {
    recorder.record_step(epoch, Phase::Train { block }, MS, 2 * MS, 3 * MS);
}

#[test]
fn steps_land_in_their_block_with_load_compute_and_proc() {
    let mut recorder = RankRecorder::new(3);
    recorder.start_epoch(1);
    recorder.start_block(1, 1);
    train_step(&mut recorder, 1, 1);
    train_step(&mut recorder, 1, 1);
    recorder.end_block(1, 1, 2);
    recorder.start_block(1, 2);
    train_step(&mut recorder, 1, 2);
    recorder.end_block(1, 2, 1);
    recorder.end_epoch(1, 3);
    let report = recorder.finish();

    assert_eq!(report.rank, 3);
    let epoch = report.epoch(1).expect("epoch 1");
    assert_eq!(epoch.blocks.len(), 2);
    assert_eq!(epoch.blocks[0].steps.load, vec![0.001, 0.001]);
    assert_eq!(epoch.blocks[0].steps.compute, vec![0.002, 0.002]);
    assert_eq!(epoch.blocks[0].steps.proc_, vec![0.003, 0.003]);
    assert_eq!(epoch.blocks[1].steps.len(), 1);
    assert_eq!(epoch.train_steps(), 3);
    assert_eq!(epoch.reported_steps, Some(3));
    let (first, second) = (&epoch.blocks[0].span, &epoch.blocks[1].span);
    assert!(epoch.span.start <= first.start);
    assert!(first.end.is_some_and(|end| end <= second.start));
    assert!(second.end <= epoch.span.end);
}

#[test]
fn ending_a_block_twice_keeps_the_first_end() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    recorder.start_block(1, 1);
    recorder.end_block(1, 1, 5);
    let first_end = recorder.epoch(1).and_then(|e| e.blocks[0].span.end);
    std::thread::sleep(MS);
    recorder.end_block(1, 1, 9);
    let block = &recorder.epoch(1).expect("epoch 1").blocks[0];
    assert_eq!(block.span.end, first_end);
    assert_eq!(block.reported_steps, Some(5));
}

#[test]
fn a_step_for_a_block_never_started_opens_it() {
    let mut recorder = RankRecorder::new(0);
    train_step(&mut recorder, 2, 4);
    let epoch = recorder.epoch(2).expect("epoch 2 opened by the step");
    assert_eq!(epoch.blocks[0].block, 4);
    assert_eq!(epoch.blocks[0].steps.len(), 1);
    assert_eq!(epoch.blocks[0].span.end, None);
}

#[test]
fn eval_steps_and_checkpoints_are_kept_per_epoch() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    recorder.start_eval(1);
    recorder.record_step(1, Phase::Eval, MS, MS, 2 * MS);
    recorder.end_eval(1, 1);
    let start = recorder.now();
    let end = recorder.now();
    recorder.record_checkpoint(1, CheckpointKind::Save, 1, start, end, 1234);
    let report = recorder.finish();
    let epoch = report.epoch(1).expect("epoch 1");
    let eval = epoch.eval.as_ref().expect("eval ran");
    assert_eq!(eval.steps.len(), 1);
    assert_eq!(eval.reported_steps, Some(1));
    assert!(eval.span.end.is_some());
    assert_eq!(epoch.checkpoints.len(), 1);
    assert_eq!(epoch.checkpoints[0].size_bytes, 1234);
    assert_eq!(epoch.checkpoints[0].kind, CheckpointKind::Save);
}

#[test]
fn several_evaluation_passes_of_an_epoch_add_up_without_the_training_between() {
    let mut recorder = RankRecorder::new(0);
    recorder.start_epoch(1);
    for steps in [2u64, 3] {
        recorder.start_eval(1);
        for _ in 0..steps {
            recorder.record_step(1, Phase::Eval, MS, MS, 2 * MS);
        }
        recorder.end_eval(1, steps);
        // Training between the passes: in the span, not in the evaluation's time.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let report = recorder.finish();
    let eval = report.epoch(1).unwrap().eval.as_ref().unwrap();
    assert_eq!((eval.passes, eval.steps.len()), (2, 5));
    assert_eq!(eval.reported_steps, Some(5));
    let span = eval.span.seconds().unwrap();
    let passes = eval.seconds().unwrap();
    assert!(
        span >= 0.05 && passes < span - 0.04,
        "span {span}, passes {passes}"
    );
}

#[test]
fn io_totals_accumulate_per_epoch_and_phase() {
    let mut recorder = RankRecorder::new(0);
    let io = IoTotals {
        bytes_read: 100,
        read_ops: 2,
        opens: 1,
        samples: 1,
    };
    recorder.add_io(1, PhaseKind::Train, io);
    recorder.add_io(1, PhaseKind::Train, io);
    recorder.add_io(1, PhaseKind::Eval, io);
    recorder.add_io(2, PhaseKind::Train, io);
    let report = recorder.finish();
    let first = report.epoch(1).expect("epoch 1");
    assert_eq!(first.train_io.bytes_read, 200);
    assert_eq!(first.train_io.read_ops, 4);
    assert_eq!(first.eval_io.bytes_read, 100);
    assert_eq!(report.io(PhaseKind::Train).bytes_read, 300);
    assert_eq!(report.io(PhaseKind::Eval).opens, 1);
}

#[test]
fn latencies_merge_per_epoch_and_over_the_run() {
    let mut recorder = RankRecorder::new(0);
    let mut reads = LatencyHistogram::new();
    let mut waits = LatencyHistogram::new();
    reads.record(1000);
    waits.record(5000);
    // Two loader threads in epoch 1, one in epoch 2.
    recorder.merge_latencies(1, PhaseKind::Train, &reads, &waits);
    recorder.merge_latencies(1, PhaseKind::Train, &reads, &waits);
    recorder.merge_latencies(2, PhaseKind::Train, &reads, &LatencyHistogram::new());
    let report = recorder.finish();
    let first = report
        .epoch(1)
        .and_then(|e| e.train_latency)
        .expect("epoch 1 latencies");
    assert_eq!(first.sample_read.count, 2);
    assert_eq!(first.batch_wait.count, 2);
    let second = report
        .epoch(2)
        .and_then(|e| e.train_latency)
        .expect("epoch 2 latencies");
    assert_eq!(second.sample_read.count, 1);
    assert_eq!(second.batch_wait.count, 0);
    let run = report.train_latency.as_ref().expect("run latencies");
    assert_eq!(run.sample_read.count(), 3);
    assert!(report.eval_latency.is_none());
}

#[test]
fn a_report_survives_a_json_round_trip() {
    let mut recorder = RankRecorder::new(1);
    recorder.start_epoch(1);
    recorder.start_block(1, 1);
    train_step(&mut recorder, 1, 1);
    recorder.end_block(1, 1, 1);
    recorder.end_epoch(1, 1);
    let report = recorder.finish();
    let json = serde_json::to_string(&report).expect("serializes");
    let back: RankReport = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back.epochs, report.epochs);
}
