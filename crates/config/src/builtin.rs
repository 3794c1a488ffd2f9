//! The built-in workloads, embedded in the binary (crates/config/workloads/*.yaml): the 24
//! workloads DLIO ships (upstream's files with a one-line provenance comment on top,
//! parameters unchanged) and 6 presets of the applications the DLIO paper characterised
//! (each file's comment block says what it represents and where its numbers come from).

/// One built-in workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinWorkload {
    /// The name given as `workload=NAME` (the file name without `.yaml`).
    pub name: &'static str,
    /// The YAML text.
    pub yaml: &'static str,
    /// True for DLIO's own workload files; false for the DLIO paper presets.
    pub upstream: bool,
}

macro_rules! builtin {
    ($name:literal) => {
        BuiltinWorkload {
            name: $name,
            yaml: include_str!(concat!("../workloads/", $name, ".yaml")),
            upstream: true,
        }
    };
    ($name:literal, paper) => {
        BuiltinWorkload {
            name: $name,
            yaml: include_str!(concat!("../workloads/", $name, ".yaml")),
            upstream: false,
        }
    };
}

static BUILTIN: [BuiltinWorkload; 30] = [
    builtin!("bert_v100"),
    builtin!("candle", paper),
    builtin!("cosmic_tagger", paper),
    builtin!("cosmoflow_2021", paper),
    builtin!("cosmoflow_a100"),
    builtin!("cosmoflow_h100"),
    builtin!("cosmoflow_v100"),
    builtin!("default"),
    builtin!("dlrm"),
    builtin!("ffn", paper),
    builtin!("frnn", paper),
    builtin!("imagenet_2021", paper),
    builtin!("llama_1t"),
    builtin!("llama_405b"),
    builtin!("llama_70b"),
    builtin!("llama_70b_zero3"),
    builtin!("llama_7b"),
    builtin!("llama_7b_zero3"),
    builtin!("llama_8b_zero3"),
    builtin!("megatron_deepspeed_LLNL"),
    builtin!("resnet50_a100"),
    builtin!("resnet50_h100"),
    builtin!("resnet50_tf"),
    builtin!("resnet50_v100"),
    builtin!("unet3d_a100"),
    builtin!("unet3d_a100_s3"),
    builtin!("unet3d_h100"),
    builtin!("unet3d_h100_s3"),
    builtin!("unet3d_v100"),
    builtin!("unet3d_v100_s3"),
];

/// The built-in workloads, sorted by name.
pub fn builtin_workloads() -> &'static [BuiltinWorkload] {
    &BUILTIN
}

/// The built-in workload called `name`, if there is one.
pub fn builtin_workload(name: &str) -> Option<&'static BuiltinWorkload> {
    BUILTIN.iter().find(|w| w.name == name)
}
