//! The inputs of checkpoint sizing: plain data mirroring DLIO's `model.*` and
//! `checkpoint.mode` keys, filled by the caller from the config.

use crate::CheckpointError;

/// Element type of checkpoint tensors (`model.model_datatype`, `model.optimizer_datatype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Datatype {
    /// IEEE half precision, 2 bytes.
    Fp16,
    /// bfloat16, 2 bytes.
    Bf16,
    /// IEEE single precision, 4 bytes.
    Fp32,
    /// IEEE double precision, 8 bytes.
    Fp64,
    /// Signed byte.
    Int8,
    /// Unsigned byte.
    Uint8,
}

impl Datatype {
    /// Every datatype, in the order the docs list them.
    pub const ALL: [Datatype; 6] = [
        Datatype::Fp16,
        Datatype::Bf16,
        Datatype::Fp32,
        Datatype::Fp64,
        Datatype::Int8,
        Datatype::Uint8,
    ];

    /// Parses DLIO's spelling (`fp16`, `bf16`, `fp32`, `fp64`, `int8`, `uint8`); `key` names
    /// the config key in the error.
    pub fn parse(key: &str, value: &str) -> Result<Datatype, CheckpointError> {
        Datatype::ALL
            .into_iter()
            .find(|d| d.name() == value)
            .ok_or_else(|| CheckpointError::UnknownDatatype {
                key: key.to_string(),
                value: value.to_string(),
            })
    }

    /// DLIO's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Datatype::Fp16 => "fp16",
            Datatype::Bf16 => "bf16",
            Datatype::Fp32 => "fp32",
            Datatype::Fp64 => "fp64",
            Datatype::Int8 => "int8",
            Datatype::Uint8 => "uint8",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Datatype::Int8 | Datatype::Uint8 => 1,
            Datatype::Fp16 | Datatype::Bf16 => 2,
            Datatype::Fp32 => 4,
            Datatype::Fp64 => 8,
        }
    }

    /// The little-endian bytes of the value 1 in this type: what `torch.ones` stores, used
    /// when `checkpoint.randomize_tensor` is false.
    pub fn one_bytes(self) -> &'static [u8] {
        match self {
            Datatype::Fp16 => &[0x00, 0x3c],
            Datatype::Bf16 => &[0x80, 0x3f],
            Datatype::Fp32 => &[0x00, 0x00, 0x80, 0x3f],
            Datatype::Fp64 => &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
            Datatype::Int8 | Datatype::Uint8 => &[0x01],
        }
    }
}

/// `checkpoint.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckpointMode {
    /// Every rank of the emulated job runs: data parallelism = world / (tensor x pipeline).
    Default,
    /// The run's ranks are the first `world` ranks of a larger job whose data parallelism is
    /// `model.parallelism.data` (MLPerf Storage's single-host checkpoint runs).
    Subset,
}

impl CheckpointMode {
    /// DLIO's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::Default => "default",
            CheckpointMode::Subset => "subset",
        }
    }
}

/// `model.parallelism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Tensor parallelism (TP), at least 1.
    pub tensor: u32,
    /// Pipeline parallelism (PP), at least 1.
    pub pipeline: u32,
    /// Data parallelism (DP): -1 (or any value <= 0) derives it as world / (TP x PP) in
    /// default mode; subset mode requires it to be positive.
    pub data: i64,
    /// DeepSpeed ZeRO stage, 0 to 3.
    pub zero_stage: u32,
}

/// `model.transformer`: the shape of a Llama-style decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformerShape {
    /// Vocabulary size `V`.
    pub vocab_size: u64,
    /// Hidden size `h`.
    pub hidden_size: u64,
    /// Feed-forward hidden size.
    pub ffn_hidden_size: u64,
    /// Attention heads.
    pub num_attention_heads: u64,
    /// Key/value heads (grouped-query attention).
    pub num_kv_heads: u64,
}

/// The model whose checkpoint is emulated: DLIO's `model.*` keys as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// `model.model_size_bytes`: size of the flat `model_states-{rank}` tensor (int8), written
    /// when it is positive and `model_type` is not `transformer`.
    pub model_size_bytes: u64,
    /// `model.type`; only the exact value `transformer` matters (it turns the flat tensor off).
    pub model_type: Option<String>,
    /// `model.model_datatype` (layer tensors).
    pub model_datatype: Datatype,
    /// `model.optimizer_datatype` (optimizer tensors derived from the transformer).
    pub optimizer_datatype: Datatype,
    /// `model.optimization_groups` (legacy): explicit optimizer group sizes in elements of
    /// int8; zero entries are skipped. When non-empty they replace the derived optimizer.
    pub optimization_groups: Vec<u64>,
    /// `model.num_layers`: transformer layers; zero or negative means no transformer state.
    pub num_layers: i64,
    /// `model.layer_parameters` (legacy): explicit per-layer tensor sizes in int8 elements,
    /// divided by tensor parallelism; zero entries are skipped. When non-empty they replace the
    /// derived layer tensors.
    pub layer_parameters: Vec<u64>,
    /// `model.parallelism`.
    pub parallelism: Parallelism,
    /// `model.transformer`.
    pub transformer: TransformerShape,
}

impl ModelSpec {
    /// DLIO's defaults for every `model.*` key: a 10 KiB flat model state, no transformer
    /// layers, fp16 model and fp32 optimizer, no parallelism, and the default transformer shape.
    pub fn dlio_default() -> ModelSpec {
        ModelSpec {
            model_size_bytes: 10240,
            model_type: None,
            model_datatype: Datatype::Fp16,
            optimizer_datatype: Datatype::Fp32,
            optimization_groups: Vec::new(),
            num_layers: -1,
            layer_parameters: Vec::new(),
            parallelism: Parallelism {
                tensor: 1,
                pipeline: 1,
                data: -1,
                zero_stage: 0,
            },
            transformer: TransformerShape {
                vocab_size: 32000,
                hidden_size: 2048,
                ffn_hidden_size: 8192,
                num_attention_heads: 32,
                num_kv_heads: 8,
            },
        }
    }

    /// True when `model.type` is exactly `transformer`.
    pub fn is_transformer(&self) -> bool {
        self.model_type.as_deref() == Some("transformer")
    }

    /// Parameter count of the transformer (0 when `num_layers <= 0`), as DLIO counts it:
    /// embedding + per layer (input norm, QKV with grouped KV, output projection, post norm,
    /// gated MLP up (2 x ffn x h) and down (ffn x h)) + final norm + LM head. Biases are not
    /// counted. `None` when the count overflows 64 bits.
    pub fn num_parameters(&self) -> Option<u64> {
        let Ok(layers) = u64::try_from(self.num_layers) else {
            return Some(0);
        };
        if layers == 0 {
            return Some(0);
        }
        let t = &self.transformer;
        let h = t.hidden_size;
        let dim_kv = h
            .checked_div(t.num_attention_heads)?
            .checked_mul(t.num_kv_heads)?;
        let embedding = t.vocab_size.checked_mul(h)?;
        let qkv = h.checked_mul(h.checked_add(dim_kv.checked_mul(2)?)?)?;
        let dense = h.checked_mul(h)?;
        let mlp = t.ffn_hidden_size.checked_mul(h)?.checked_mul(3)?;
        let per_layer = h
            .checked_mul(2)?
            .checked_add(qkv)?
            .checked_add(dense)?
            .checked_add(mlp)?;
        per_layer
            .checked_mul(layers)?
            .checked_add(embedding.checked_mul(2)?)?
            .checked_add(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datatype_names_round_trip_and_sizes_match_dlio() {
        for d in Datatype::ALL {
            assert_eq!(Datatype::parse("k", d.name()).unwrap(), d);
            assert_eq!(d.one_bytes().len() as u64, d.size());
        }
        assert_eq!(Datatype::Fp16.size(), 2);
        assert_eq!(Datatype::Bf16.size(), 2);
        assert_eq!(Datatype::Fp64.size(), 8);
        assert_eq!(Datatype::Uint8.size(), 1);
    }

    #[test]
    fn unknown_datatype_names_the_key_and_the_choices() {
        let message = Datatype::parse("model.model_datatype", "float16")
            .unwrap_err()
            .to_string();
        assert!(message.starts_with("model.model_datatype: unknown datatype `float16`"));
        assert!(message.contains("fp16, bf16, fp32, fp64, int8, uint8"));
    }

    #[test]
    fn one_bytes_are_the_ieee_encodings_of_one() {
        assert_eq!(f32::from_le_bytes([0x00, 0x00, 0x80, 0x3f]), 1.0);
        assert_eq!(Datatype::Fp32.one_bytes(), 1.0f32.to_le_bytes());
        assert_eq!(Datatype::Fp64.one_bytes(), 1.0f64.to_le_bytes());
        // bf16 is the top half of the f32 encoding; fp16 1.0 is 0x3c00.
        assert_eq!(Datatype::Bf16.one_bytes(), &1.0f32.to_le_bytes()[2..]);
        assert_eq!(
            u16::from_le_bytes([Datatype::Fp16.one_bytes()[0], Datatype::Fp16.one_bytes()[1]]),
            0x3c00
        );
    }

    #[test]
    fn no_layers_means_no_parameters() {
        let mut spec = ModelSpec::dlio_default();
        assert_eq!(spec.num_parameters(), Some(0));
        spec.num_layers = 0;
        assert_eq!(spec.num_parameters(), Some(0));
    }

    #[test]
    fn llama_7b_has_6_738_415_616_parameters() {
        let mut spec = ModelSpec::dlio_default();
        spec.num_layers = 32;
        spec.transformer = TransformerShape {
            vocab_size: 32000,
            hidden_size: 4096,
            ffn_hidden_size: 11008,
            num_attention_heads: 32,
            num_kv_heads: 32,
        };
        assert_eq!(spec.num_parameters(), Some(6_738_415_616));
    }
}
