//! Checkpoint sizing against DLIO's numbers: golden totals of the shipped Llama workloads,
//! the file counts of upstream's checkpoint tests, rank roles, file names and validation.

use dlio_checkpoint::{
    CheckpointError, CheckpointMode, CheckpointPlan, Datatype, FileContent, FileKind, ModelSpec,
    Parallelism, TransformerShape, checkpoint_plan,
};
use dlio_config::vocab::Framework;

const GIB: f64 = (1u64 << 30) as f64;

/// A Llama workload of `dlio-workloads/llama_*.yaml`: fp16 model, fp32 optimizer.
fn llama(
    layers: i64,
    (vocab_size, hidden_size, ffn_hidden_size, num_attention_heads, num_kv_heads): (
        u64,
        u64,
        u64,
        u64,
        u64,
    ),
    (tensor, pipeline, zero_stage): (u32, u32, u32),
) -> ModelSpec {
    ModelSpec {
        model_type: Some("transformer".to_string()),
        num_layers: layers,
        parallelism: Parallelism {
            tensor,
            pipeline,
            data: -1,
            zero_stage,
        },
        transformer: TransformerShape {
            vocab_size,
            hidden_size,
            ffn_hidden_size,
            num_attention_heads,
            num_kv_heads,
        },
        ..ModelSpec::dlio_default()
    }
}

fn llama_7b(zero_stage: u32) -> ModelSpec {
    llama(32, (32000, 4096, 11008, 32, 32), (1, 1, zero_stage))
}

fn llama_8b_zero3() -> ModelSpec {
    llama(32, (128256, 4096, 14336, 32, 8), (1, 1, 3))
}

fn llama_70b() -> ModelSpec {
    llama(80, (128256, 8192, 28672, 128, 8), (8, 4, 1))
}

fn llama_70b_zero3() -> ModelSpec {
    llama(80, (128256, 8192, 28672, 128, 8), (8, 1, 3))
}

fn llama_405b() -> ModelSpec {
    llama(126, (128256, 16384, 53248, 128, 8), (8, 32, 1))
}

fn llama_1t() -> ModelSpec {
    llama(128, (128256, 25872, 98304, 192, 32), (8, 64, 1))
}

fn plan(model: &ModelSpec, world: u32) -> CheckpointPlan {
    checkpoint_plan(model, CheckpointMode::Default, Framework::Pytorch, world).expect("valid plan")
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / GIB)
}

fn file_names(plan: &CheckpointPlan, rank: u32) -> Vec<&str> {
    plan.ranks[rank as usize]
        .files
        .iter()
        .map(|f| f.name.as_str())
        .collect()
}

#[test]
fn shipped_llama_workloads_match_the_golden_checkpoint_sizes() {
    // (workload, world, params, model GiB, optimizer GiB, total GiB): dlio-semantics.md §6.7,
    // matching MLPerf Storage's published ~105 GB / 912 GB / 5.29 TB / 15.4 TB.
    let cases = [
        (
            "llama_7b",
            llama_7b(1),
            8,
            6_738_415_616,
            "12.55",
            "75.31",
            "87.86",
        ),
        (
            "llama_7b_zero3",
            llama_7b(3),
            8,
            6_738_415_616,
            "12.55",
            "75.31",
            "87.86",
        ),
        (
            "llama_8b_zero3",
            llama_8b_zero3(),
            8,
            8_030_261_248,
            "14.96",
            "89.75",
            "104.70",
        ),
        (
            "llama_70b",
            llama_70b(),
            64,
            69_882_617_856,
            "130.18",
            "781.03",
            "911.21",
        ),
        (
            "llama_70b_zero3",
            llama_70b_zero3(),
            64,
            69_882_617_856,
            "130.18",
            "781.03",
            "911.21",
        ),
        (
            "llama_405b",
            llama_405b(),
            512,
            405_853_388_800,
            "756.01",
            "4536.23",
            "5292.25",
        ),
        (
            "llama_1t",
            llama_1t(),
            1024,
            1_183_035_102_480,
            "2203.66",
            "13222.93",
            "15426.59",
        ),
    ];
    for (name, model, world, params, model_gib, optimizer_gib, total_gib) in cases {
        let plan = plan(&model, world);
        assert_eq!(plan.num_parameters, params, "{name}");
        assert_eq!(gib(plan.totals.model_bytes), model_gib, "{name} model");
        assert_eq!(
            gib(plan.totals.optimizer_bytes),
            optimizer_gib,
            "{name} optimizer"
        );
        assert_eq!(gib(plan.totals.checkpoint_bytes), total_gib, "{name} total");
        assert_eq!(
            format!("{:.2}", plan.checkpoint_size_gib()),
            total_gib,
            "{name}"
        );
        // ZeRO-1 and ZeRO-3 have no B9 over-count: upstream reports the same figure.
        assert_eq!(
            plan.upstream.checkpoint_bytes, plan.totals.checkpoint_bytes,
            "{name}"
        );
        assert_eq!(plan.totals.metadata_bytes, 0, "{name}");
        let sum: u64 = plan.ranks.iter().map(|r| r.bytes()).sum();
        assert_eq!(sum, plan.totals.stored_bytes, "{name}");
    }
}

#[test]
fn llama_70b_ranks_have_megatron_deepspeed_roles_and_layer_files() {
    // TP 8 x PP 4 x DP 2, ZeRO-1: 80 layers, 20 per stage.
    let plan = plan(&llama_70b(), 64);
    assert_eq!((plan.tensor, plan.pipeline, plan.data), (8, 4, 2));
    let roles = |r: u32| {
        let p = &plan.ranks[r as usize];
        (
            p.tensor_rank,
            p.pipeline_rank,
            p.data_rank,
            p.model_rank,
            p.layers,
        )
    };
    assert_eq!(roles(0), (0, 0, 0, 0, Some((0, 20))));
    assert_eq!(roles(9), (1, 1, 0, 9, Some((21, 40))));
    assert_eq!(roles(31), (7, 3, 0, 31, Some((61, 82))));
    // The second replica holds no parameters with ZeRO-1.
    assert_eq!(roles(33), (1, 0, 1, 1, None));

    let rank0 = file_names(&plan, 0);
    assert_eq!(rank0.len(), 22);
    assert_eq!(rank0[0], "layer_0-model_0_model_states.pt");
    assert_eq!(rank0[20], "layer_20-model_0_model_states.pt");
    assert_eq!(rank0[21], "zero_pp_rank_0_mp_rank_0_optim_states.pt");
    let rank31 = file_names(&plan, 31);
    assert_eq!(rank31[0], "layer_61-model_31_model_states.pt");
    assert_eq!(rank31[21], "layer_82-model_31_model_states.pt");
    assert_eq!(
        file_names(&plan, 33),
        ["zero_pp_rank_1_mp_rank_1_optim_states.pt"]
    );

    // Embedding shard: h*V/TP fp16 elements.
    assert_eq!(plan.ranks[0].files[0].bytes, 8192 * 128256 / 8 * 2);
    // Final norm: h elements, not split by TP.
    assert_eq!(plan.ranks[31].files[21].bytes, 8192 * 2);
    // Optimizer: [n, 5h] x 3 in fp32 with n = P / (DP x TP x PP).
    let n = 69_882_617_856 / 64;
    assert_eq!(plan.ranks[33].files[0].bytes, 3 * (n + 5 * 8192) * 4);
}

#[test]
fn zero_0_saves_only_the_first_data_parallel_replica() {
    let model = llama(4, (1000, 64, 256, 4, 4), (2, 1, 0));
    let plan = plan(&model, 6);
    for rank in 0..2 {
        assert!(plan.ranks[rank].writer);
        assert_eq!(
            file_names(&plan, rank as u32),
            [
                format!("zero_pp_rank_0_mp_rank_{rank}_model_states.pt"),
                format!("zero_pp_rank_0_mp_rank_{rank}_optim_states.pt"),
            ]
        );
    }
    for rank in 2..6 {
        assert!(!plan.ranks[rank].writer);
        assert!(plan.ranks[rank].files.is_empty());
    }
    // ZeRO-0 optimizer: n = P / (TP x PP), not divided by DP.
    let n = plan.num_parameters / 2;
    assert_eq!(plan.ranks[0].files[1].bytes, 3 * (n + 5 * 64) * 4);
}

#[test]
fn zero_2_writes_parameters_once_but_upstream_counts_every_replica() {
    let model = llama(4, (1000, 64, 256, 4, 4), (1, 1, 2));
    let plan = plan(&model, 4);
    assert_eq!(
        file_names(&plan, 0),
        [
            "model_0_model_states.pt",
            "zero_pp_rank_0_mp_rank_0_optim_states.pt"
        ]
    );
    for rank in 1..4 {
        assert_eq!(
            file_names(&plan, rank),
            [format!("zero_pp_rank_{rank}_mp_rank_0_optim_states.pt")]
        );
    }
    let parameters = plan.ranks[0].bytes_of(FileKind::Model);
    assert_eq!(parameters, plan.num_parameters * 2);
    assert_eq!(plan.totals.model_bytes, parameters);
    // Bug B9: upstream allocates (and counts) the parameters on all 4 data-parallel ranks.
    assert_eq!(plan.upstream.model_bytes, 4 * parameters);
    assert_eq!(plan.upstream.optimizer_bytes, plan.totals.optimizer_bytes);
}

#[test]
fn zero_3_shards_parameters_over_data_parallel_ranks() {
    let model = llama(4, (1000, 64, 256, 4, 4), (1, 1, 3));
    let plan = plan(&model, 4);
    for rank in 0..4u32 {
        assert_eq!(
            file_names(&plan, rank),
            [
                format!("zero_pp_rank_{rank}_mp_rank_0_model_states.pt"),
                format!("zero_pp_rank_{rank}_mp_rank_0_optim_states.pt"),
            ]
        );
    }
    // Every tensor is divided by DP = 4 (all sizes here are multiples of 4).
    assert_eq!(plan.ranks[1].files[0].bytes * 4, plan.num_parameters * 2);
    assert_eq!(plan.totals.model_bytes, plan.num_parameters * 2);
}

#[test]
fn pipeline_stages_take_the_remainder_layers_first() {
    // 10 layers over 4 stages: 3, 3, 2, 2, plus embedding / LM head + final norm.
    let model = llama(10, (1000, 64, 256, 4, 4), (1, 4, 1));
    let plan = plan(&model, 4);
    let layers: Vec<_> = plan.ranks.iter().map(|r| r.layers).collect();
    assert_eq!(
        layers,
        [Some((0, 3)), Some((4, 6)), Some((7, 8)), Some((9, 12))]
    );
    assert_eq!(
        file_names(&plan, 2),
        [
            "layer_7-model_2_model_states.pt",
            "layer_8-model_2_model_states.pt",
            "zero_pp_rank_0_mp_rank_2_optim_states.pt",
        ]
    );
}

#[test]
fn subset_mode_plans_the_first_ranks_of_a_larger_job() {
    // llama_8b_zero3 on one 8-rank host emulating DP 64 (MLPerf's subset runs).
    let mut model = llama_8b_zero3();
    model.parallelism.data = 64;
    let subset = checkpoint_plan(&model, CheckpointMode::Subset, Framework::Pytorch, 8).unwrap();
    assert_eq!(subset.data, 64);
    assert_eq!(
        file_names(&subset, 7),
        [
            "zero_pp_rank_7_mp_rank_0_model_states.pt",
            "zero_pp_rank_7_mp_rank_0_optim_states.pt"
        ]
    );
    // 8 of 64 identical ranks: one eighth of the full checkpoint.
    let full = plan(&llama_8b_zero3(), 64);
    let ratio = subset.totals.checkpoint_bytes as f64 / full.totals.checkpoint_bytes as f64;
    assert!((ratio - 0.125).abs() < 1e-6, "{ratio}");
    // Every rank also keeps three 5h optimizer groups, so 64 ranks hold 0.02 GiB more than
    // the 8 of the golden 104.70 GiB.
    assert_eq!(gib(full.totals.checkpoint_bytes), "104.72");
}

#[test]
fn upstream_checkpoint_epoch_test_file_counts() {
    // tests/dlio_benchmark_test.py::test_checkpoint_epoch under `mpirun -np 2`, TP = 2:
    // (optimization_groups, num_layers, layer_parameters, zero_stage).
    let cases: [(&[u64], i64, &[u64], u32); 4] = [
        (&[1024, 128], 2, &[16], 0),
        (&[1024, 128], 2, &[16], 3),
        (&[128], 1, &[16], 0),
        (&[128], 1, &[16], 3),
    ];
    for (groups, layers, layer_parameters, zero_stage) in cases {
        let model = ModelSpec {
            model_size_bytes: 1024,
            optimization_groups: groups.to_vec(),
            num_layers: layers,
            layer_parameters: layer_parameters.to_vec(),
            parallelism: Parallelism {
                tensor: 2,
                pipeline: 1,
                data: -1,
                zero_stage,
            },
            ..ModelSpec::dlio_default()
        };
        let pt = checkpoint_plan(&model, CheckpointMode::Default, Framework::Pytorch, 2).unwrap();
        // model_states + layers + optimizer, per rank.
        assert_eq!(pt.totals.files, 3 * 2, "{model:?}");
        let tf =
            checkpoint_plan(&model, CheckpointMode::Default, Framework::Tensorflow, 2).unwrap();
        // .index + .data per save, plus one `checkpoint` file per directory.
        assert_eq!(tf.totals.files, 3 * 2 * 2 + 1, "{model:?}");
        assert_eq!(tf.totals.checkpoint_bytes, pt.totals.checkpoint_bytes);
    }
}

#[test]
fn upstream_checkpoint_step_test_writes_one_flat_file() {
    // Default model: a 10 KiB flat tensor saved by rank 0 only.
    let plan = plan(&ModelSpec::dlio_default(), 2);
    assert_eq!(plan.totals.files, 1);
    assert_eq!(file_names(&plan, 0), ["model_states-0.pt"]);
    assert_eq!(plan.ranks[0].files[0].kind, FileKind::FlatModel);
    assert_eq!(plan.totals.checkpoint_bytes, 10240);
    assert_eq!(plan.upstream.checkpoint_bytes, 10240);
}

#[test]
fn tensorflow_files_are_named_like_tf_train_checkpoint_saves() {
    let model = llama(2, (1000, 64, 256, 4, 4), (1, 1, 3));
    let plan = checkpoint_plan(&model, CheckpointMode::Default, Framework::Tensorflow, 2).unwrap();
    assert_eq!(
        file_names(&plan, 0),
        [
            "zero_pp_rank_0_mp_rank_0_model_states.pb-1.data-00000-of-00001",
            "zero_pp_rank_0_mp_rank_0_model_states.pb-1.index",
            "zero_pp_rank_0_mp_rank_0_optim_states.pb-1.data-00000-of-00001",
            "zero_pp_rank_0_mp_rank_0_optim_states.pb-1.index",
            "checkpoint",
        ]
    );
    assert_eq!(
        file_names(&plan, 1).len(),
        4,
        "one `checkpoint` file per directory"
    );
    let rank0 = &plan.ranks[0];
    let FileContent::Text(ref index) = rank0.files[3].content else {
        panic!("index files are text");
    };
    // One line per optimizer group, with its byte offset in the data file.
    let n = plan.num_parameters / 2;
    assert_eq!(index.lines().count(), 1 + 6);
    assert_eq!(
        index.lines().nth(2).unwrap(),
        format!("1 fp32 320 {}", n * 4)
    );
    let FileContent::Text(ref list) = rank0.files[4].content else {
        panic!("the checkpoint file is text");
    };
    assert_eq!(
        list,
        "model_checkpoint_path: \"zero_pp_rank_0_mp_rank_0_optim_states.pb-1\"\n\
         all_model_checkpoint_paths: \"zero_pp_rank_0_mp_rank_0_optim_states.pb-1\"\n"
    );
    assert_eq!(rank0.files[4].bytes, list.len() as u64);
    assert!(plan.totals.metadata_bytes > 0);
    assert_eq!(
        plan.totals.stored_bytes,
        plan.totals.checkpoint_bytes + plan.totals.metadata_bytes
    );
}

#[test]
fn legacy_groups_and_layer_parameters_are_counted_unlike_upstream() {
    // workload megatron_deepspeed_LLNL on 32 ranks (TP 4 x PP 8): its `model_size` key is
    // ignored, so the default 10 KiB flat tensor is written too.
    let model = ModelSpec {
        model_type: Some("megatron_deepspeed".to_string()),
        optimization_groups: vec![1_009_254_400, 865_075_200, 793_600],
        num_layers: 40,
        layer_parameters: vec![52_583_936, 209_715_200],
        parallelism: Parallelism {
            tensor: 4,
            pipeline: 8,
            data: -1,
            zero_stage: 1,
        },
        ..ModelSpec::dlio_default()
    };
    let plan = plan(&model, 32);
    // Legacy layers are the stage's transformer layers only: 5 per stage, one file each.
    assert_eq!(plan.ranks[4].layers, Some((6, 10)));
    let rank4 = file_names(&plan, 4);
    assert_eq!(rank4[0], "model_states-4.pt");
    assert_eq!(rank4[1], "layer_6-model_4_model_states.pt");
    assert_eq!(rank4[6], "zero_pp_rank_0_mp_rank_4_optim_states.pt");
    let per_layer = 52_583_936 / 4 + 209_715_200 / 4;
    assert_eq!(plan.ranks[4].files[1].bytes, per_layer);
    let groups: u64 = 1_009_254_400 + 865_075_200 + 793_600;
    assert_eq!(plan.ranks[4].files[6].bytes, 3 * groups);

    assert_eq!(plan.totals.model_bytes, 32 * 10240 + 32 * 5 * per_layer);
    assert_eq!(plan.totals.optimizer_bytes, 32 * 3 * groups);
    // Upstream: legacy state counts as nothing, and the flat tensor counts once.
    assert_eq!(plan.upstream.model_bytes, 10240);
    assert_eq!(plan.upstream.optimizer_bytes, 0);
}

#[test]
fn datatypes_set_the_bytes_per_element() {
    let mut model = llama(2, (1000, 64, 256, 4, 4), (1, 1, 3));
    let fp16 = plan(&model, 2);
    model.model_datatype = Datatype::Fp64;
    model.optimizer_datatype = Datatype::Bf16;
    let other = plan(&model, 2);
    assert_eq!(other.totals.model_bytes, 4 * fp16.totals.model_bytes);
    assert_eq!(
        other.totals.optimizer_bytes * 2,
        fp16.totals.optimizer_bytes
    );
    assert_eq!(
        other.ranks[0].files[0].content,
        FileContent::Tensors {
            datatype: Datatype::Fp64,
            tensors: 2 * 6 + 3,
        }
    );
}

#[test]
fn a_transformer_type_has_no_flat_model_state() {
    let mut model = llama(2, (1000, 64, 256, 4, 4), (1, 1, 0));
    let with_type = plan(&model, 1);
    assert!(
        with_type
            .ranks
            .iter()
            .flat_map(|r| &r.files)
            .all(|f| f.kind != FileKind::FlatModel)
    );
    model.model_type = None;
    let without_type = plan(&model, 1);
    assert_eq!(file_names(&without_type, 0)[0], "model_states-0.pt");
    assert_eq!(
        without_type.totals.model_bytes,
        with_type.totals.model_bytes + 10240
    );
}

fn error(model: &ModelSpec, mode: CheckpointMode, world: u32) -> CheckpointError {
    checkpoint_plan(model, mode, Framework::Pytorch, world).expect_err("invalid configuration")
}

#[test]
fn default_mode_needs_a_whole_number_of_model_parallel_groups() {
    let e = error(&llama_70b(), CheckpointMode::Default, 48);
    assert!(matches!(
        e,
        CheckpointError::WorldNotMultipleOfModelParallel {
            world: 48,
            tensor: 8,
            pipeline: 4,
            model_parallel: 32
        }
    ));
    let message = e.to_string();
    assert!(
        message.starts_with(
            "48 ranks is not a multiple of tensor x pipeline parallelism = 8 x 4 = 32"
        ),
        "{message}"
    );
    assert!(message.contains("checkpoint.mode: subset"), "{message}");
}

#[test]
fn default_mode_rejects_an_explicit_data_parallelism() {
    let mut model = llama_7b(1);
    model.parallelism.data = 8;
    assert!(matches!(
        error(&model, CheckpointMode::Default, 8),
        CheckpointError::DataParallelismInDefaultMode { data: 8 }
    ));
}

#[test]
fn subset_mode_needs_data_parallelism_and_a_world_that_fits() {
    let model = llama_70b_zero3();
    assert!(matches!(
        error(&model, CheckpointMode::Subset, 8),
        CheckpointError::SubsetWithoutDataParallelism { data: -1 }
    ));
    let mut model = llama_70b_zero3();
    model.parallelism.data = 2;
    let e = error(&model, CheckpointMode::Subset, 24);
    assert!(matches!(
        e,
        CheckpointError::SubsetLargerThanJob {
            world: 24,
            data: 2,
            tensor: 8,
            pipeline: 1,
            job_ranks: 16
        }
    ));
    assert!(e.to_string().contains("= 2 x 8 x 1 = 16"), "{e}");
    // A subset need not be a multiple of TP x PP.
    assert!(checkpoint_plan(&model, CheckpointMode::Subset, Framework::Pytorch, 12).is_ok());
}

#[test]
fn zero_3_cannot_be_combined_with_pipelines() {
    let model = llama(8, (1000, 64, 256, 4, 4), (1, 2, 3));
    assert!(matches!(
        error(&model, CheckpointMode::Default, 2),
        CheckpointError::PipelineWithZero3 { pipeline: 2 }
    ));
}

#[test]
fn every_pipeline_stage_needs_a_layer() {
    let model = llama(2, (1000, 64, 256, 4, 4), (1, 4, 1));
    let e = error(&model, CheckpointMode::Default, 4);
    assert!(matches!(
        e,
        CheckpointError::TooFewLayers {
            num_layers: 2,
            pipeline: 4
        }
    ));
    assert!(e.to_string().contains("model.num_layers (2)"), "{e}");
}

#[test]
fn degenerate_parallelism_is_rejected_not_divided_by() {
    let mut model = llama_7b(1);
    model.parallelism.tensor = 0;
    assert!(matches!(
        error(&model, CheckpointMode::Default, 8),
        CheckpointError::ZeroParallelism { key: "tensor" }
    ));
    let mut model = llama_7b(1);
    model.parallelism.zero_stage = 4;
    assert!(matches!(
        error(&model, CheckpointMode::Default, 8),
        CheckpointError::InvalidZeroStage { stage: 4 }
    ));
    assert!(matches!(
        error(&llama_7b(1), CheckpointMode::Default, 0),
        CheckpointError::EmptyWorld
    ));
    let mut model = llama_7b(1);
    model.transformer.num_attention_heads = 0;
    assert!(matches!(
        error(&model, CheckpointMode::Default, 8),
        CheckpointError::NoAttentionHeads { num_layers: 32 }
    ));
}

#[test]
fn absurd_sizes_overflow_into_an_error() {
    let model = llama(1, (u64::MAX / 2, 1 << 20, 1, 1, 1), (1, 1, 0));
    assert!(matches!(
        error(&model, CheckpointMode::Default, 1),
        CheckpointError::SizeOverflow
    ));
}

#[test]
fn rank_lookup_outside_the_world_is_an_error() {
    let plan = plan(&llama_7b(1), 8);
    assert_eq!(plan.rank(7).unwrap().rank, 7);
    assert!(matches!(
        plan.rank(8),
        Err(CheckpointError::RankOutOfRange { rank: 8, world: 8 })
    ));
}
