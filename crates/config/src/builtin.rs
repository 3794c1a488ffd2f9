//! The built-in workloads, embedded in the binary: the 24 workloads DLIO ships
//! (crates/config/workloads/*.yaml: upstream's files with a one-line provenance comment on
//! top, parameters unchanged), 6 presets of the applications the DLIO paper characterised (each
//! file's comment block says what it represents and where its numbers come from), and the 64
//! workload files of MLPerf Storage v3.0 (crates/config/workloads/mlperf-v3/workload/, copied
//! unmodified; see its SOURCE.md).
//!
//! Seven names exist both in DLIO and in MLPerf Storage v3 (`unet3d_h100`, `resnet50_a100`,
//! ...). Under the default [`Semantics::Mlperf`] the name means the v3 file, as an MLPerf
//! Storage user expects; under [`Semantics::Upstream`] it means DLIO's.

use crate::vocab::Semantics;

/// Where a built-in workload file comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadOrigin {
    /// One of the files argonne DLIO ships (`dlio_benchmark/configs/workload/`).
    Dlio,
    /// A preset of an application the DLIO paper characterised.
    Paper,
    /// One of MLPerf Storage v3.0's files (`configs/dlio/workload/` of mlcommons/storage).
    MlperfV3,
}

impl WorkloadOrigin {
    /// A short label for listings and messages.
    pub fn label(self) -> &'static str {
        match self {
            WorkloadOrigin::Dlio => "DLIO",
            WorkloadOrigin::Paper => "DLIO paper",
            WorkloadOrigin::MlperfV3 => "MLPerf Storage v3",
        }
    }
}

/// One built-in workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinWorkload {
    /// The name given as `workload=NAME` (the file name without `.yaml`).
    pub name: &'static str,
    /// The YAML text.
    pub yaml: &'static str,
    /// Where the file comes from.
    pub origin: WorkloadOrigin,
}

macro_rules! dlio {
    ($name:literal) => {
        BuiltinWorkload {
            name: $name,
            yaml: include_str!(concat!("../workloads/", $name, ".yaml")),
            origin: WorkloadOrigin::Dlio,
        }
    };
    ($name:literal, paper) => {
        BuiltinWorkload {
            name: $name,
            yaml: include_str!(concat!("../workloads/", $name, ".yaml")),
            origin: WorkloadOrigin::Paper,
        }
    };
}

macro_rules! v3 {
    ($name:literal) => {
        BuiltinWorkload {
            name: $name,
            yaml: include_str!(concat!("../workloads/mlperf-v3/workload/", $name, ".yaml")),
            origin: WorkloadOrigin::MlperfV3,
        }
    };
}

static DLIO_AND_PAPER: [BuiltinWorkload; 30] = [
    dlio!("bert_v100"),
    dlio!("candle", paper),
    dlio!("cosmic_tagger", paper),
    dlio!("cosmoflow_2021", paper),
    dlio!("cosmoflow_a100"),
    dlio!("cosmoflow_h100"),
    dlio!("cosmoflow_v100"),
    dlio!("default"),
    dlio!("dlrm"),
    dlio!("ffn", paper),
    dlio!("frnn", paper),
    dlio!("imagenet_2021", paper),
    dlio!("llama_1t"),
    dlio!("llama_405b"),
    dlio!("llama_70b"),
    dlio!("llama_70b_zero3"),
    dlio!("llama_7b"),
    dlio!("llama_7b_zero3"),
    dlio!("llama_8b_zero3"),
    dlio!("megatron_deepspeed_LLNL"),
    dlio!("resnet50_a100"),
    dlio!("resnet50_h100"),
    dlio!("resnet50_tf"),
    dlio!("resnet50_v100"),
    dlio!("unet3d_a100"),
    dlio!("unet3d_a100_s3"),
    dlio!("unet3d_h100"),
    dlio!("unet3d_h100_s3"),
    dlio!("unet3d_v100"),
    dlio!("unet3d_v100_s3"),
];

static MLPERF_V3: [BuiltinWorkload; 64] = [
    v3!("cosmoflow_a100"),
    v3!("cosmoflow_datagen"),
    v3!("cosmoflow_h100"),
    v3!("cosmoflow_v100"),
    v3!("datagen_s3dlio_azure"),
    v3!("datagen_s3dlio_multiendpoint"),
    v3!("datagen_s3dlio_s3"),
    v3!("dlrm_a100"),
    v3!("dlrm_b200"),
    v3!("dlrm_datagen"),
    v3!("dlrm_h100"),
    v3!("dlrm_mi355"),
    v3!("dlrm_parquet_a100"),
    v3!("dlrm_parquet_datagen"),
    v3!("dlrm_parquet_h100"),
    v3!("flux_a100"),
    v3!("flux_b200"),
    v3!("flux_datagen"),
    v3!("flux_h100"),
    v3!("flux_mi355"),
    v3!("hybrid_storage"),
    v3!("llama3_1t"),
    v3!("llama3_405b"),
    v3!("llama3_70b"),
    v3!("llama3_8b"),
    v3!("llama3_8b_checkpoint"),
    v3!("llama3_8b_checkpoint_minio"),
    v3!("multi_endpoint_mpi"),
    v3!("multi_endpoint_roundrobin"),
    v3!("parquet_selective_read_example"),
    v3!("pytorch_file_backend"),
    v3!("pytorch_s3dlio"),
    v3!("pytorch_s3dlio_azure"),
    v3!("pytorch_s3dlio_local_test"),
    v3!("pytorch_s3dlio_multiendpoint"),
    v3!("pytorch_s3torchconnector"),
    v3!("resnet50_a100"),
    v3!("resnet50_datagen"),
    v3!("resnet50_h100"),
    v3!("resnet50_s3dlio_test"),
    v3!("retinanet_a100"),
    v3!("retinanet_b200"),
    v3!("retinanet_datagen"),
    v3!("retinanet_h100"),
    v3!("retinanet_mi355"),
    v3!("test_local_datagen"),
    v3!("test_local_train"),
    v3!("test_unet3d_datagen_minio"),
    v3!("test_unet3d_datagen_s3"),
    v3!("test_unet3d_datagen_s3dlio"),
    v3!("test_unet3d_train_minio"),
    v3!("test_unet3d_train_s3"),
    v3!("test_unet3d_train_s3dlio"),
    v3!("unet3d_a100"),
    v3!("unet3d_b200"),
    v3!("unet3d_datagen"),
    v3!("unet3d_h100"),
    v3!("unet3d_h100_minio"),
    v3!("unet3d_h100_minio_datagen"),
    v3!("unet3d_h100_s3dlio"),
    v3!("unet3d_h100_s3dlio_datagen"),
    v3!("unet3d_h100_s3torch"),
    v3!("unet3d_h100_s3torch_datagen"),
    v3!("zerocopy_file_test"),
];

/// Every built-in workload file: DLIO's and the paper presets, then MLPerf Storage v3's
/// (names shared by both appear twice; [`builtin_workload`] says which one a name means).
pub fn builtin_workloads() -> impl Iterator<Item = &'static BuiltinWorkload> {
    DLIO_AND_PAPER.iter().chain(MLPERF_V3.iter())
}

/// The built-in workload `name` means under `semantics`: MLPerf Storage v3's file first under
/// [`Semantics::Mlperf`], DLIO's first under [`Semantics::Upstream`].
pub fn builtin_workload(name: &str, semantics: Semantics) -> Option<&'static BuiltinWorkload> {
    let dlio = DLIO_AND_PAPER.iter().find(|w| w.name == name);
    let v3 = MLPERF_V3.iter().find(|w| w.name == name);
    match semantics {
        Semantics::Mlperf => v3.or(dlio),
        Semantics::Upstream => dlio.or(v3),
    }
}

/// The names of the built-in workloads, each once, sorted.
pub fn builtin_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = builtin_workloads().map(|w| w.name).collect();
    names.sort_unstable();
    names.dedup();
    names
}
