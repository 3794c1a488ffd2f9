//! Checkpoint sizing: which files every rank writes and how large they are.

use dlio_config::vocab::Framework;

use crate::{CheckpointError, CheckpointMode, Datatype, ModelSpec};

/// What a checkpoint file holds, for the totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// The flat `model_states-{rank}` tensor (`model.model_size_bytes`).
    FlatModel,
    /// Transformer layer tensors (or legacy `layer_parameters`).
    Model,
    /// Optimizer state (derived groups or legacy `optimization_groups`).
    Optimizer,
    /// TensorFlow bookkeeping: a `.index` file or the per-directory `checkpoint` file.
    Metadata,
}

/// The bytes of a checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// Raw tensor payload: `tensors` tensors of `datatype`, concatenated. Written as unique
    /// pseudo-random bytes, or as the encoding of 1 in `datatype` when tensors are not
    /// randomized.
    Tensors {
        /// Element type of every tensor of the file.
        datatype: Datatype,
        /// How many tensors the payload holds.
        tensors: u32,
    },
    /// A small text file, written verbatim (TensorFlow `.index` listing and `checkpoint`).
    Text(String),
}

/// One file of one rank in one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    /// Path relative to the checkpoint's directory (`global_epoch{E}_step{S}`), as DLIO names it.
    pub name: String,
    /// What it holds.
    pub kind: FileKind,
    /// Its exact size in bytes.
    pub bytes: u64,
    /// How its bytes are made.
    pub content: FileContent,
}

/// One rank's place in the emulated job and the files it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlan {
    /// The rank.
    pub rank: u32,
    /// `rank % TP`.
    pub tensor_rank: u32,
    /// `(rank / TP) % PP`.
    pub pipeline_rank: u32,
    /// `rank / (TP x PP)`.
    pub data_rank: u64,
    /// `rank % (TP x PP)`, the `mp_rank` of the file names.
    pub model_rank: u64,
    /// Whether the rank saves anything: with ZeRO-0 only the first data-parallel replica
    /// (ranks below TP x PP) does; with ZeRO >= 1 every rank does.
    pub writer: bool,
    /// Layers `first..=last` of the rank's pipeline stage that it holds state for (0 is the
    /// embedding, `L+1` the LM head, `L+2` the final norm), if any.
    pub layers: Option<(u64, u64)>,
    /// Files in the order they are written.
    pub files: Vec<CheckpointFile>,
}

impl RankPlan {
    /// Bytes of every file of the rank.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// Bytes of the files of one kind.
    pub fn bytes_of(&self, kind: FileKind) -> u64 {
        self.files
            .iter()
            .filter(|f| f.kind == kind)
            .map(|f| f.bytes)
            .sum()
    }
}

/// Sizes over all ranks of one checkpoint, counting the bytes that are really written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointTotals {
    /// Model state: layer tensors plus every flat `model_states` file.
    pub model_bytes: u64,
    /// Optimizer state.
    pub optimizer_bytes: u64,
    /// `model_bytes + optimizer_bytes`: the checkpoint size (summary.json's
    /// `checkpoint_size_GB` is this / 2^30).
    pub checkpoint_bytes: u64,
    /// TensorFlow `.index` and `checkpoint` files (0 for PyTorch).
    pub metadata_bytes: u64,
    /// Everything that lands on storage: `checkpoint_bytes + metadata_bytes`.
    pub stored_bytes: u64,
    /// Number of files.
    pub files: u64,
}

/// The sizes upstream DLIO reports for the same configuration (its bug B9 included): ZeRO-2
/// counts the layer state of every data-parallel rank although only the first replica writes
/// it; legacy `optimization_groups` and `layer_parameters` count as nothing; a flat
/// `model_states` tensor counts once and replaces the layer size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSizes {
    /// Upstream's model size.
    pub model_bytes: u64,
    /// Upstream's optimizer size.
    pub optimizer_bytes: u64,
    /// Upstream's `checkpoint_size`.
    pub checkpoint_bytes: u64,
    /// Why upstream's count differs from [`CheckpointTotals`] for this configuration, one
    /// sentence per cause (empty when it counts the same way).
    pub differences: Vec<&'static str>,
}

/// Everything about one checkpoint of a run: the resolved parallel layout, every rank's files
/// and the totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// PyTorch (`.pt` files) or TensorFlow (`.index` + `.data` files).
    pub framework: Framework,
    /// Default or subset.
    pub mode: CheckpointMode,
    /// Ranks in the run.
    pub world: u32,
    /// Tensor parallelism.
    pub tensor: u32,
    /// Pipeline parallelism.
    pub pipeline: u32,
    /// Data parallelism of the emulated job (derived in default mode).
    pub data: u64,
    /// ZeRO stage.
    pub zero_stage: u32,
    /// Transformer layers (0 when there are none).
    pub num_layers: u64,
    /// Transformer parameter count (0 without layers).
    pub num_parameters: u64,
    /// One entry per rank, in rank order.
    pub ranks: Vec<RankPlan>,
    /// Sizes of what is written.
    pub totals: CheckpointTotals,
    /// What upstream DLIO would report instead.
    pub upstream: UpstreamSizes,
}

const GIB: f64 = (1u64 << 30) as f64;

impl CheckpointPlan {
    /// The checkpoint size in GiB (DLIO labels it GB): `totals.checkpoint_bytes / 2^30`.
    pub fn checkpoint_size_gib(&self) -> f64 {
        self.totals.checkpoint_bytes as f64 / GIB
    }

    /// The size upstream DLIO would report, in GiB.
    pub fn upstream_checkpoint_size_gib(&self) -> f64 {
        self.upstream.checkpoint_bytes as f64 / GIB
    }

    /// The plan of one rank.
    pub fn rank(&self, rank: u32) -> Result<&RankPlan, CheckpointError> {
        self.ranks
            .get(rank as usize)
            .ok_or(CheckpointError::RankOutOfRange {
                rank,
                world: self.world,
            })
    }
}

/// The directory of one checkpoint under the checkpoint folder: `global_epoch{E}_step{S}`.
pub fn checkpoint_dir_name(epoch: u64, step: u64) -> String {
    format!("global_epoch{epoch}_step{step}")
}

/// The rank whose files rank `rank` reads back with `checkpoint.recovery_rank_shift`:
/// `(rank + ranks_per_node) % world`, i.e. the same local rank on the next node, so that no
/// rank reads what its own node just wrote (and may still hold in its page cache).
pub fn recovery_source_rank(
    rank: u32,
    ranks_per_node: u32,
    world: u32,
) -> Result<u32, CheckpointError> {
    if ranks_per_node == 0 {
        return Err(CheckpointError::NoRanksPerNode);
    }
    if rank >= world {
        return Err(CheckpointError::RankOutOfRange { rank, world });
    }
    Ok(((u64::from(rank) + u64::from(ranks_per_node)) % u64::from(world)) as u32)
}

/// Sizes one checkpoint of `model` for a run of `world` ranks: every rank's files (named as
/// DLIO names them) with exact sizes, and the totals.
///
/// The rules are DLIO's (see the crate docs for the formulas and for where we differ). The
/// configuration is checked first, with DLIO's rules: in default mode the world must be a
/// multiple of TP x PP and `parallelism.data` must be unset; subset mode needs a positive
/// `parallelism.data` and at most DP x TP x PP ranks; ZeRO-3 excludes PP > 1; a transformer
/// needs at least one layer per pipeline stage.
pub fn checkpoint_plan(
    model: &ModelSpec,
    mode: CheckpointMode,
    framework: Framework,
    world: u32,
) -> Result<CheckpointPlan, CheckpointError> {
    let layout = Layout::validate(model, mode, world)?;
    let num_parameters = model
        .num_parameters()
        .ok_or(CheckpointError::SizeOverflow)?;
    let builder = Builder::new(model, layout, num_parameters)?;

    let mut ranks = Vec::with_capacity(world as usize);
    let mut upstream_model: u64 = 0;
    let mut upstream_optimizer: u64 = 0;
    for rank in 0..world {
        let built = builder.rank(rank, framework)?;
        upstream_model = add(upstream_model, built.upstream_model)?;
        upstream_optimizer = add(upstream_optimizer, built.upstream_optimizer)?;
        ranks.push(built.plan);
    }
    if framework == Framework::Tensorflow {
        add_tf_checkpoint_list(&mut ranks);
    }
    let mut differences = Vec::new();
    if layout.zero_stage == 2 && layout.num_layers > 0 && model.layer_parameters.is_empty() {
        differences.push(
            "it counts ZeRO-2 parameters on every data-parallel rank, though only the first replica writes them",
        );
    }
    if !model.optimization_groups.is_empty() {
        differences.push("it does not count legacy model.optimization_groups");
    }
    if !model.layer_parameters.is_empty() {
        differences.push("it does not count legacy model.layer_parameters");
    }
    if model.model_size_bytes > 0 && !model.is_transformer() {
        upstream_model = model.model_size_bytes;
        differences.push(
            "it counts the flat model_states tensor once, in place of the layer tensors, though every saving rank writes one",
        );
    }

    let mut totals = CheckpointTotals {
        model_bytes: 0,
        optimizer_bytes: 0,
        checkpoint_bytes: 0,
        metadata_bytes: 0,
        stored_bytes: 0,
        files: 0,
    };
    for file in ranks.iter().flat_map(|r| &r.files) {
        let slot = match file.kind {
            FileKind::FlatModel | FileKind::Model => &mut totals.model_bytes,
            FileKind::Optimizer => &mut totals.optimizer_bytes,
            FileKind::Metadata => &mut totals.metadata_bytes,
        };
        *slot = add(*slot, file.bytes)?;
        totals.files += 1;
    }
    totals.checkpoint_bytes = add(totals.model_bytes, totals.optimizer_bytes)?;
    totals.stored_bytes = add(totals.checkpoint_bytes, totals.metadata_bytes)?;

    Ok(CheckpointPlan {
        framework,
        mode,
        world,
        tensor: layout.tensor,
        pipeline: layout.pipeline,
        data: layout.data,
        zero_stage: layout.zero_stage,
        num_layers: layout.num_layers,
        num_parameters,
        ranks,
        totals,
        upstream: UpstreamSizes {
            model_bytes: upstream_model,
            optimizer_bytes: upstream_optimizer,
            checkpoint_bytes: add(upstream_model, upstream_optimizer)?,
            differences,
        },
    })
}

fn add(a: u64, b: u64) -> Result<u64, CheckpointError> {
    a.checked_add(b).ok_or(CheckpointError::SizeOverflow)
}

fn mul(a: u64, b: u64) -> Result<u64, CheckpointError> {
    a.checked_mul(b).ok_or(CheckpointError::SizeOverflow)
}

/// The validated parallel layout.
#[derive(Debug, Clone, Copy)]
struct Layout {
    tensor: u32,
    pipeline: u32,
    /// TP x PP.
    model_parallel: u64,
    /// DP of the emulated job.
    data: u64,
    zero_stage: u32,
    /// `num_layers` clamped at 0.
    num_layers: u64,
}

impl Layout {
    fn validate(
        model: &ModelSpec,
        mode: CheckpointMode,
        world: u32,
    ) -> Result<Layout, CheckpointError> {
        let p = model.parallelism;
        if world == 0 {
            return Err(CheckpointError::EmptyWorld);
        }
        if p.tensor == 0 {
            return Err(CheckpointError::ZeroParallelism { key: "tensor" });
        }
        if p.pipeline == 0 {
            return Err(CheckpointError::ZeroParallelism { key: "pipeline" });
        }
        if p.zero_stage > 3 {
            return Err(CheckpointError::InvalidZeroStage {
                stage: p.zero_stage,
            });
        }
        let num_layers = u64::try_from(model.num_layers).unwrap_or(0);
        if num_layers > 0 && num_layers < u64::from(p.pipeline) {
            return Err(CheckpointError::TooFewLayers {
                num_layers: model.num_layers,
                pipeline: p.pipeline,
            });
        }
        if num_layers > 0 && model.transformer.num_attention_heads == 0 {
            return Err(CheckpointError::NoAttentionHeads {
                num_layers: model.num_layers,
            });
        }
        if p.pipeline > 1 && p.zero_stage == 3 {
            return Err(CheckpointError::PipelineWithZero3 {
                pipeline: p.pipeline,
            });
        }
        let model_parallel = u64::from(p.tensor) * u64::from(p.pipeline);
        let data = match mode {
            CheckpointMode::Default => {
                if p.data > 0 {
                    return Err(CheckpointError::DataParallelismInDefaultMode { data: p.data });
                }
                if u64::from(world) % model_parallel != 0 {
                    return Err(CheckpointError::WorldNotMultipleOfModelParallel {
                        world,
                        tensor: p.tensor,
                        pipeline: p.pipeline,
                        model_parallel,
                    });
                }
                u64::from(world) / model_parallel
            }
            CheckpointMode::Subset => {
                let Ok(data @ 1..) = u64::try_from(p.data) else {
                    return Err(CheckpointError::SubsetWithoutDataParallelism { data: p.data });
                };
                let job_ranks = mul(data, model_parallel)?;
                if u64::from(world) > job_ranks {
                    return Err(CheckpointError::SubsetLargerThanJob {
                        world,
                        data,
                        tensor: p.tensor,
                        pipeline: p.pipeline,
                        job_ranks,
                    });
                }
                data
            }
        };
        Ok(Layout {
            tensor: p.tensor,
            pipeline: p.pipeline,
            model_parallel,
            data,
            zero_stage: p.zero_stage,
            num_layers,
        })
    }

    /// Layers `first..=last` of pipeline stage `stage`: the transformer layers 1..=L split as
    /// evenly as possible (the first `L % PP` stages get one more); with `with_ends`, stage 0
    /// also holds layer 0 (embedding) and the last stage layers L+1 (LM head) and L+2 (final
    /// norm). `None` when the stage holds nothing.
    fn stage_layers(&self, stage: u32, with_ends: bool) -> Option<(u64, u64)> {
        let layers = self.num_layers;
        if layers == 0 {
            return None;
        }
        let pipeline = u64::from(self.pipeline);
        let stage = u64::from(stage);
        let per_stage = layers / pipeline;
        let remainder = layers % pipeline;
        let (mut first, mut last) = if stage < remainder {
            let first = stage * (per_stage + 1) + 1;
            (first, first + per_stage)
        } else {
            let first = remainder * (per_stage + 1) + (stage - remainder) * per_stage + 1;
            (first, first + per_stage - 1)
        };
        if with_ends {
            if stage == pipeline - 1 {
                last = layers + 2;
            }
            if stage == 0 {
                first = 0;
            }
        }
        (first <= last).then_some((first, last))
    }
}

/// One state dict before it becomes files: a base name and its tensors.
struct State {
    base: String,
    kind: FileKind,
    datatype: Datatype,
    /// `(key, elements)`; no zero-element tensors.
    tensors: Vec<(String, u64)>,
}

impl State {
    fn payload_bytes(&self) -> Result<u64, CheckpointError> {
        let mut elements: u64 = 0;
        for (_, n) in &self.tensors {
            elements = add(elements, *n)?;
        }
        mul(elements, self.datatype.size())
    }

    /// The files of the state: one `.pt` for PyTorch; for TensorFlow the `.data` payload and
    /// the `.index` listing of `tf.train.Checkpoint.save("{base}.pb")`.
    fn into_files(
        self,
        framework: Framework,
        files: &mut Vec<CheckpointFile>,
    ) -> Result<(), CheckpointError> {
        if self.tensors.is_empty() {
            return Ok(());
        }
        let bytes = self.payload_bytes()?;
        let content = FileContent::Tensors {
            datatype: self.datatype,
            tensors: u32::try_from(self.tensors.len())
                .map_err(|_| CheckpointError::SizeOverflow)?,
        };
        match framework {
            Framework::Pytorch => files.push(CheckpointFile {
                name: format!("{}.pt", self.base),
                kind: self.kind,
                bytes,
                content,
            }),
            Framework::Tensorflow => {
                let mut index = String::from("# key dtype elements offset\n");
                let mut offset: u64 = 0;
                for (key, elements) in &self.tensors {
                    index.push_str(&format!(
                        "{key} {} {elements} {offset}\n",
                        self.datatype.name()
                    ));
                    offset += elements * self.datatype.size();
                }
                files.push(CheckpointFile {
                    name: format!("{}.pb-1.data-00000-of-00001", self.base),
                    kind: self.kind,
                    bytes,
                    content,
                });
                files.push(CheckpointFile {
                    name: format!("{}.pb-1.index", self.base),
                    kind: FileKind::Metadata,
                    bytes: index.len() as u64,
                    content: FileContent::Text(index),
                });
            }
        }
        Ok(())
    }
}

/// TensorFlow writes a `checkpoint` file next to every save; all ranks of a directory write
/// the same name, so one rank (the lowest that saves anything) owns it here.
fn add_tf_checkpoint_list(ranks: &mut [RankPlan]) {
    let Some(owner) = ranks.iter_mut().find(|r| !r.files.is_empty()) else {
        return;
    };
    let Some(last_save) = owner
        .files
        .iter()
        .rev()
        .find_map(|f| f.name.strip_suffix(".index"))
        .map(str::to_string)
    else {
        return;
    };
    let text = format!(
        "model_checkpoint_path: \"{last_save}\"\nall_model_checkpoint_paths: \"{last_save}\"\n"
    );
    owner.files.push(CheckpointFile {
        name: "checkpoint".to_string(),
        kind: FileKind::Metadata,
        bytes: text.len() as u64,
        content: FileContent::Text(text),
    });
}

/// A rank's plan plus what upstream would count for it.
struct BuiltRank {
    plan: RankPlan,
    upstream_model: u64,
    upstream_optimizer: u64,
}

/// Per-stage layer tensors, computed once and shared by the ranks of the stage.
struct Builder<'a> {
    model: &'a ModelSpec,
    layout: Layout,
    num_parameters: u64,
    /// Per pipeline stage: `(layer, element counts)` of the derived transformer layers.
    derived_layers: Vec<Vec<(u64, Vec<u64>)>>,
    /// Per pipeline stage: the layers holding legacy `layer_parameters`.
    legacy_layers: Vec<Option<(u64, u64)>>,
}

impl<'a> Builder<'a> {
    fn new(
        model: &'a ModelSpec,
        layout: Layout,
        num_parameters: u64,
    ) -> Result<Builder<'a>, CheckpointError> {
        let legacy = !model.layer_parameters.is_empty();
        let mut derived_layers = Vec::with_capacity(layout.pipeline as usize);
        let mut legacy_layers = Vec::with_capacity(layout.pipeline as usize);
        for stage in 0..layout.pipeline {
            let mut layers = Vec::new();
            if !legacy && let Some((first, last)) = layout.stage_layers(stage, true) {
                for layer in first..=last {
                    layers.push((layer, layer_elements(model, &layout, layer)?));
                }
            }
            derived_layers.push(layers);
            legacy_layers.push(if legacy {
                layout.stage_layers(stage, false)
            } else {
                None
            });
        }
        Ok(Builder {
            model,
            layout,
            num_parameters,
            derived_layers,
            legacy_layers,
        })
    }

    fn rank(&self, rank: u32, framework: Framework) -> Result<BuiltRank, CheckpointError> {
        let layout = &self.layout;
        let model = self.model;
        let tensor = layout.tensor;
        let rank64 = u64::from(rank);
        let tensor_rank = rank % tensor;
        let pipeline_rank = (rank / tensor) % layout.pipeline;
        let data_rank = rank64 / layout.model_parallel;
        let model_rank = rank64 % layout.model_parallel;
        let zero = layout.zero_stage;
        let writer = zero > 0 || rank64 < layout.model_parallel;
        let stage = pipeline_rank as usize;

        let mut built = BuiltRank {
            plan: RankPlan {
                rank,
                tensor_rank,
                pipeline_rank,
                data_rank,
                model_rank,
                writer,
                layers: None,
                files: Vec::new(),
            },
            upstream_model: 0,
            upstream_optimizer: 0,
        };
        if !writer {
            return Ok(built);
        }
        let mut states = Vec::new();

        // Flat model state.
        if model.model_size_bytes > 0 && !model.is_transformer() {
            states.push(State {
                base: format!("model_states-{rank}"),
                kind: FileKind::FlatModel,
                datatype: Datatype::Int8,
                tensors: vec![("a".to_string(), model.model_size_bytes)],
            });
        }

        self.layer_states(stage, data_rank, model_rank, &mut built, &mut states)?;
        if let Some((state, upstream_bytes)) = self.optimizer_state(data_rank, model_rank)? {
            built.upstream_optimizer = upstream_bytes;
            states.push(state);
        }

        for state in states {
            state.into_files(framework, &mut built.plan.files)?;
        }
        Ok(built)
    }

    /// The layer states rank (`stage`, `data_rank`, `model_rank`) saves: which layers, their
    /// tensors, and whether the rank allocates them (upstream counts what is allocated, into
    /// `built.upstream_model`) and saves them (into `states`).
    fn layer_states(
        &self,
        stage: usize,
        data_rank: u64,
        model_rank: u64,
        built: &mut BuiltRank,
        states: &mut Vec<State>,
    ) -> Result<(), CheckpointError> {
        let (layout, model) = (&self.layout, self.model);
        let (tensor, zero) = (layout.tensor, layout.zero_stage);
        let legacy_layers = !model.layer_parameters.is_empty();
        let (layers, datatype, allocated) = if legacy_layers {
            let tensors: Vec<u64> = model
                .layer_parameters
                .iter()
                .map(|p| p / u64::from(tensor))
                .filter(|&n| n > 0)
                .collect();
            let layers: Vec<(u64, Vec<u64>)> = match self.legacy_layers[stage] {
                Some((first, last)) => (first..=last).map(|l| (l, tensors.clone())).collect(),
                None => Vec::new(),
            };
            (layers, Datatype::Int8, false)
        } else {
            // ZeRO-1 keeps the parameters on the first replica only.
            let allocated = layout.num_layers > 0 && !(zero == 1 && data_rank != 0);
            let layers = if allocated {
                self.derived_layers[stage].clone()
            } else {
                Vec::new()
            };
            (layers, model.model_datatype, allocated)
        };
        if allocated {
            for (_, tensors) in &layers {
                let elements = tensors.iter().try_fold(0u64, |a, &b| add(a, b))?;
                built.upstream_model = add(
                    built.upstream_model,
                    mul(elements, model.model_datatype.size())?,
                )?;
            }
        }
        let saves_layers = match zero {
            // ZeRO-1/2: the first data-parallel replica saves the parameters.
            1 | 2 => data_rank == 0 && layout.num_layers > 0,
            // ZeRO-0 (writers are the first replica) and ZeRO-3 (sharded): every writer.
            _ => true,
        };
        if saves_layers && !layers.is_empty() {
            built.plan.layers = Some((layers[0].0, layers[layers.len() - 1].0));
            if matches!(zero, 1 | 2) && layout.pipeline > 1 {
                for (layer, tensors) in &layers {
                    states.push(State {
                        base: format!("layer_{layer}-model_{model_rank}_model_states"),
                        kind: FileKind::Model,
                        datatype,
                        tensors: keyed(None, tensors),
                    });
                }
            } else {
                let base = if matches!(zero, 1 | 2) {
                    format!("model_{model_rank}_model_states")
                } else {
                    format!("zero_pp_rank_{data_rank}_mp_rank_{model_rank}_model_states")
                };
                let mut all = Vec::new();
                for (layer, tensors) in &layers {
                    all.extend(keyed(Some(*layer), tensors));
                }
                states.push(State {
                    base,
                    kind: FileKind::Model,
                    datatype,
                    tensors: all,
                });
            }
        }

        Ok(())
    }

    /// The optimizer state of rank (`data_rank`, `model_rank`), if it has one, and the bytes
    /// upstream counts for it.
    fn optimizer_state(
        &self,
        data_rank: u64,
        model_rank: u64,
    ) -> Result<Option<(State, u64)>, CheckpointError> {
        let (layout, model) = (&self.layout, self.model);
        let zero = layout.zero_stage;
        let optimizer_base = format!("zero_pp_rank_{data_rank}_mp_rank_{model_rank}_optim_states");
        if !model.optimization_groups.is_empty() {
            let mut tensors = Vec::new();
            let mut combined: u64 = 0;
            for (index, &group) in model.optimization_groups.iter().enumerate() {
                if group > 0 {
                    tensors.push((format!("{index}/a"), group));
                    tensors.push((format!("{index}/b"), group));
                    combined = add(combined, group)?;
                }
            }
            if combined > 0 {
                tensors.push(("combined".to_string(), combined));
            }
            let state = State {
                base: optimizer_base,
                kind: FileKind::Optimizer,
                datatype: Datatype::Int8,
                tensors,
            };
            // Upstream does not count these groups' bytes.
            return Ok(Some((state, 0)));
        } else if layout.num_layers > 0 {
            let divisor = if zero > 0 {
                mul(layout.data, layout.model_parallel)?
            } else {
                layout.model_parallel
            };
            let shard = self.num_parameters / divisor;
            if shard > 0 {
                let h5 = mul(model.transformer.hidden_size, 5)?;
                let groups = [shard, h5, shard, h5, shard, h5];
                let tensors: Vec<(String, u64)> = groups
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| (i.to_string(), *n))
                    .collect();
                let state = State {
                    base: optimizer_base,
                    kind: FileKind::Optimizer,
                    datatype: model.optimizer_datatype,
                    tensors,
                };
                let upstream_bytes = state.payload_bytes()?;
                return Ok(Some((state, upstream_bytes)));
            }
        }
        Ok(None)
    }
}

/// Tensor keys as the state dicts name them: `"{i}"` inside a layer file, `"{layer}/{i}"` when
/// several layers share a file.
fn keyed(layer: Option<u64>, tensors: &[u64]) -> Vec<(String, u64)> {
    tensors
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| match layer {
            Some(layer) => (format!("{layer}/{i}"), *n),
            None => (i.to_string(), *n),
        })
        .collect()
}

/// Element counts of the tensors of layer `layer` (0 = embedding, 1..=L transformer layers,
/// L+1 = LM head, L+2 = final norm), split over tensor-parallel ranks and, with ZeRO-3, over
/// data-parallel ranks. Zero-element tensors are dropped.
fn layer_elements(
    model: &ModelSpec,
    layout: &Layout,
    layer: u64,
) -> Result<Vec<u64>, CheckpointError> {
    let t = &model.transformer;
    let h = t.hidden_size;
    let tp = u64::from(layout.tensor);
    let shard = if layout.zero_stage == 3 {
        layout.data
    } else {
        1
    };
    let split = mul(tp, shard)?;
    let l = layout.num_layers;
    let tensors = if layer == 0 || layer == l + 1 {
        vec![mul(h, t.vocab_size)? / split]
    } else if layer == l + 2 {
        vec![h / shard]
    } else {
        // `num_attention_heads > 0` was validated.
        let dim_kv = mul(h / t.num_attention_heads, t.num_kv_heads)?;
        let qkv = mul(h, add(h, mul(dim_kv, 2)?)?)?;
        let ffn = mul(h, t.ffn_hidden_size)?;
        vec![
            h / shard,
            qkv / split,
            mul(h, h)? / split,
            h / shard,
            mul(ffn, 2)? / split,
            ffn / split,
        ]
    };
    Ok(tensors.into_iter().filter(|&n| n > 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(layers: u64, pipeline: u32) -> Layout {
        Layout {
            tensor: 1,
            pipeline,
            model_parallel: u64::from(pipeline),
            data: 1,
            zero_stage: 1,
            num_layers: layers,
        }
    }

    #[test]
    fn stages_split_layers_with_the_remainder_first() {
        let l = layout(10, 4);
        // 10 layers over 4 stages: 3, 3, 2, 2.
        assert_eq!(l.stage_layers(0, false), Some((1, 3)));
        assert_eq!(l.stage_layers(1, false), Some((4, 6)));
        assert_eq!(l.stage_layers(2, false), Some((7, 8)));
        assert_eq!(l.stage_layers(3, false), Some((9, 10)));
        // Embedding on the first stage, LM head and final norm on the last.
        assert_eq!(l.stage_layers(0, true), Some((0, 3)));
        assert_eq!(l.stage_layers(3, true), Some((9, 12)));
    }

    #[test]
    fn one_stage_holds_every_layer() {
        assert_eq!(layout(32, 1).stage_layers(0, true), Some((0, 34)));
        assert_eq!(layout(0, 1).stage_layers(0, true), None);
    }

    #[test]
    fn recovery_shift_moves_to_the_next_node() {
        assert_eq!(recovery_source_rank(0, 4, 8).unwrap(), 4);
        assert_eq!(recovery_source_rank(5, 4, 8).unwrap(), 1);
        assert_eq!(recovery_source_rank(3, 4, 4).unwrap(), 3);
        assert!(matches!(
            recovery_source_rank(0, 0, 8),
            Err(CheckpointError::NoRanksPerNode)
        ));
        assert!(matches!(
            recovery_source_rank(8, 4, 8),
            Err(CheckpointError::RankOutOfRange { rank: 8, world: 8 })
        ));
    }
}
