//! The `dlio checkpoint-plan` table: every rank's files, identical ranks grouped in large
//! worlds, and the totals in bytes and GiB.

use dlio_checkpoint::{
    CheckpointMode, CheckpointPlan, ModelSpec, Parallelism, TransformerShape, checkpoint_plan,
    format_plan_table,
};
use dlio_config::vocab::Framework;

fn transformer(layers: i64, shape: TransformerShape, parallelism: Parallelism) -> ModelSpec {
    ModelSpec {
        model_type: Some("transformer".to_string()),
        num_layers: layers,
        parallelism,
        transformer: shape,
        ..ModelSpec::dlio_default()
    }
}

fn llama_70b() -> ModelSpec {
    transformer(
        80,
        TransformerShape {
            vocab_size: 128256,
            hidden_size: 8192,
            ffn_hidden_size: 28672,
            num_attention_heads: 128,
            num_kv_heads: 8,
        },
        Parallelism {
            tensor: 8,
            pipeline: 4,
            data: -1,
            zero_stage: 1,
        },
    )
}

fn llama_7b() -> ModelSpec {
    transformer(
        32,
        TransformerShape {
            vocab_size: 32000,
            hidden_size: 4096,
            ffn_hidden_size: 11008,
            num_attention_heads: 32,
            num_kv_heads: 32,
        },
        Parallelism {
            tensor: 1,
            pipeline: 1,
            data: -1,
            zero_stage: 1,
        },
    )
}

fn table(model: &ModelSpec, framework: Framework, world: u32) -> (CheckpointPlan, String) {
    let plan = checkpoint_plan(model, CheckpointMode::Default, framework, world).unwrap();
    let table = format_plan_table(&plan);
    (plan, table)
}

fn headers(table: &str) -> Vec<&str> {
    table.lines().filter(|l| l.starts_with("rank")).collect()
}

#[test]
fn large_worlds_group_identical_ranks() {
    let (plan, table) = table(&llama_70b(), Framework::Pytorch, 64);
    assert_eq!(
        headers(&table),
        [
            "ranks 0-7 (8 ranks): tp 0-7, pp 0, dp 0, layers 0-20: 22 files, 17603053056 bytes (16.39 GiB) each; names of rank 0:",
            "ranks 8-15 (8 ranks): tp 0-7, pp 1, dp 0, layers 21-40: 21 files, 17340384768 bytes (16.15 GiB) each; names of rank 8:",
            "ranks 16-23 (8 ranks): tp 0-7, pp 2, dp 0, layers 41-60: 21 files, 17340384768 bytes (16.15 GiB) each; names of rank 16:",
            "ranks 24-31 (8 ranks): tp 0-7, pp 3, dp 0, layers 61-82: 23 files, 17603069440 bytes (16.39 GiB) each; names of rank 24:",
            "ranks 32-63 (32 ranks): tp 0-7, pp 0-3, dp 1: 1 file, 13103482368 bytes (12.20 GiB) each; names of rank 32:",
        ]
    );
    assert!(table.contains("\n         262668288  250.50 MiB  layer_0-model_0_model_states.pt\n"));
    assert!(
        table.contains("\n             16384   16.00 KiB  layer_82-model_24_model_states.pt\n")
    );
    // One line per file of each group's first rank.
    let file_lines = table.lines().filter(|l| l.ends_with(".pt")).count();
    assert_eq!(file_lines, 22 + 21 + 21 + 23 + 1);
    assert!(table.starts_with(
        "checkpoint plan: pytorch, default mode, ZeRO stage 1\n  \
         64 ranks; emulated job: TP 8 x PP 4 x DP 2 = 64 ranks\n  \
         transformer: 80 layers, 69882617856 parameters\n  \
         728 files per checkpoint"
    ));
    assert_eq!(plan.totals.files, 728);
    assert!(table.contains("\n  model              139783700480       130.18\n"));
    assert!(table.contains("\n  optimizer          838622871552       781.03\n"));
    assert!(table.contains("\n  all                978406572032       911.21\n"));
    assert!(!table.contains("upstream DLIO"), "ZeRO-1 counts agree");
}

#[test]
fn small_worlds_list_every_rank() {
    let (_, table) = table(&llama_7b(), Framework::Pytorch, 8);
    let headers = headers(&table);
    assert_eq!(headers.len(), 8);
    assert!(
        headers[0].starts_with("rank 0: tp 0, pp 0, dp 0, layers 0-34: 2 files, "),
        "{}",
        headers[0]
    );
    for (rank, header) in headers.iter().enumerate().skip(1) {
        assert!(
            header.starts_with(&format!("rank {rank}: tp 0, pp 0, dp {rank}: 1 file, ")),
            "{header}"
        );
    }
    assert!(table.contains("  zero_pp_rank_7_mp_rank_0_optim_states.pt\n"));
    assert!(table.contains("       87.86\n"));
}

#[test]
fn idle_ranks_metadata_and_upstream_differences_are_explained() {
    // ZeRO-0 with TP 2 over 4 ranks, TensorFlow, and a flat model state next to the layers.
    let mut model = llama_7b();
    model.model_type = None;
    model.num_layers = 2;
    model.parallelism = Parallelism {
        tensor: 2,
        pipeline: 1,
        data: -1,
        zero_stage: 0,
    };
    let (plan, table) = table(&model, Framework::Tensorflow, 4);
    assert!(table.contains(
        "rank 2: tp 0, pp 0, dp 1: no files (with ZeRO stage 0 only the first data-parallel replica, ranks 0-1, saves)\n"
    ));
    assert!(table.contains("  model_states-0.pb-1.data-00000-of-00001\n"));
    assert!(table.contains(&format!(
        "  plus {} bytes of TensorFlow .index/checkpoint files",
        plan.totals.metadata_bytes
    )));
    assert!(table.contains("upstream DLIO reports "), "{table}");
    assert!(table.contains(
        "  - it counts the flat model_states tensor once, in place of the layer tensors"
    ));
    assert_eq!(plan.upstream.differences.len(), 1);
}
