//! `dlio-checkpoint`: the checkpoint engine of dlio: how large DLIO's emulated checkpoints
//! are, which files each rank writes, and the streaming writes and reads themselves.
//!
//! # Where it sits
//!
//! `config -> plan -> loader (storage + format) -> trainer -> metrics`, with this crate beside
//! the trainer: the trainer (step/epoch checkpoints, checkpoint-only mode) and the CLI
//! (`dlio checkpoint-plan`) call it; it moves bytes only through a
//! [`dlio_storage::Storage`]. It does not read the config: the caller fills a [`ModelSpec`]
//! (plain data mirroring `model.*`) and passes `checkpoint.mode`, the framework and the world
//! size, so sizing stays a pure function that is cheap to test against DLIO's numbers.
//!
//! # Map
//!
//! - [`checkpoint_plan`] turns ([`ModelSpec`], [`CheckpointMode`], framework, world) into a
//!   [`CheckpointPlan`]: every rank's [`RankPlan`] (its TP/PP/DP roles and its
//!   [`CheckpointFile`]s with exact sizes), the [`CheckpointTotals`] that `dlio
//!   checkpoint-plan` prints and summary.json's `checkpoint_size_GB` uses, and the
//!   [`UpstreamSizes`] DLIO itself would report.
//! - [`CheckpointWriter`] writes one rank's files of one checkpoint
//!   (`<folder>/global_epoch{E}_step{S}/`, see [`checkpoint_dir_name`]);
//!   [`CheckpointReader`] reads them back (optionally another node's, with
//!   [`recovery_source_rank`], after [`drop_page_cache`]).
//! - [`format_plan_table`] renders a plan for people.
//!
//! # Why this shape
//!
//! The plan is computed once and shared by every rank: each rank's writer looks up its own
//! files, so what is written, what is read back and what is reported can never disagree.
//! Writers own one chunk buffer (16 MiB by default) and stream every file through it, from a
//! Xoshiro256++ generator seeded per file (unique, dedup-proof bytes) or a constant `ones`
//! pattern; readers own one window of the engine's `io_depth` chunks (at most
//! [`MAX_READ_WINDOW_BYTES`]) and read each file as one stream of chunks with that many in
//! flight. Memory does not grow with the checkpoint, unlike DLIO, which allocates every
//! tensor in RAM up front (issues #308, #188) and whose random generation caps write speed
//! (mlcommons/storage #689). The files hold the raw tensor bytes only, not torch pickles or
//! TensorFlow protobufs; their sizes are the tensors' sizes (torch.save's few-KiB framing is
//! not emulated), and they are named exactly as DLIO names them.
//!
//! # Sizing (DLIO's formulas)
//!
//! Roles: `mp = TP*PP`, `dp = world/mp` (or `parallelism.data` in subset mode),
//! `tp_rank = r % TP`, `pp_rank = (r/TP) % PP`, `dp_rank = r/mp`, `mp_rank = r % mp`. With
//! ZeRO-0 only ranks below `mp` save; with ZeRO >= 1 every rank does.
//!
//! - Parameters `P = 2Vh + L(2h + h(h + 2*dkv) + h^2 + 3*ffn*h) + h`, `dkv = (h/heads)*kv_heads`.
//! - Layers 1..=L are split over pipeline stages (the first `L % PP` get one more); stage 0
//!   also holds layer 0 (embedding), the last stage L+1 (LM head) and L+2 (final norm). Layer
//!   tensors (elements, in `model_datatype`), with `s = dp` for ZeRO-3 and 1 otherwise:
//!   embedding and LM head `hV/TP/s`; final norm `h/s`; a transformer layer
//!   `[h/s, h(h+2dkv)/TP/s, h^2/TP/s, h/s, 2h*ffn/TP/s, h*ffn/TP/s]`.
//! - Who saves them: ZeRO-1/2, the first data-parallel replica: one file per layer
//!   `layer_{i}-model_{mp_rank}_model_states` when PP > 1, else `model_{mp_rank}_model_states`;
//!   ZeRO-0/3: `zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_model_states`.
//! - Optimizer (`zero_pp_rank_{dp_rank}_mp_rank_{mp_rank}_optim_states`, `optimizer_datatype`):
//!   `[n, 5h, n, 5h, n, 5h]` with `n = P/(dp*mp)` (ZeRO >= 1) or `P/mp` (ZeRO-0).
//! - Legacy `optimization_groups` `[g..]` replace it: int8 tensors `a`, `b` of `g` each plus a
//!   `combined` one of `sum(g)`. Legacy `layer_parameters` `[p..]` replace the layer tensors:
//!   every transformer layer of the stage holds int8 tensors of `p/TP`.
//! - A flat `model_states-{rank}` int8 tensor of `model_size_bytes` when `model.type` is not
//!   `transformer`.
//! - Extensions: PyTorch `{name}.pt`; TensorFlow `{name}.pb-1.data-00000-of-00001` (payload)
//!   plus `{name}.pb-1.index` (a text listing of the tensors here), and one `checkpoint` file
//!   per directory (written by the lowest rank that saves anything).
//!
//! # Where we differ from DLIO on purpose
//!
//! - **Sizes count what is written** (upstream bug B9). Upstream counts ZeRO-2 parameters on
//!   every data-parallel rank though only the first replica writes them, leaves legacy
//!   `optimization_groups` and `layer_parameters` out, and counts a flat `model_states` tensor
//!   once (replacing the layer size) although every saving rank writes one. Upstream's figure
//!   stays available in [`CheckpointPlan::upstream`].
//! - Legacy `layer_parameters` in a single file: upstream shares one tensor dict between all
//!   layers, which torch.save stores once; we write every layer's tensors, as the config
//!   describes.
//! - A state with no tensor (all sizes 0) writes no file.
//! - `checkpoint.fsync` and `recovery_rank_shift` work (upstream bug B5 ignores them); the
//!   shifted read really reads the other rank's files.
//! - Nothing is held in memory, so DLIO's KSM options (`checkpoint.ksm`) have nothing to merge.
//!
//! # Example
//!
//! ```
//! use dlio_checkpoint::{
//!     CheckpointMode, CheckpointReader, CheckpointWriter, ModelSpec, ReadOptions, WriteOptions,
//!     checkpoint_dir_name, checkpoint_plan,
//! };
//! use dlio_config::vocab::Framework;
//! use dlio_storage::PosixStorage;
//!
//! # fn main() -> Result<(), dlio_checkpoint::CheckpointError> {
//! // DLIO's default model: a 10 KiB flat tensor saved by rank 0 only (ZeRO-0, no TP/PP).
//! let model = ModelSpec::dlio_default();
//! let plan = checkpoint_plan(&model, CheckpointMode::Default, Framework::Pytorch, 2)?;
//! assert_eq!(plan.ranks[0].files[0].name, "model_states-0.pt");
//! assert!(plan.ranks[1].files.is_empty());
//! assert_eq!(plan.totals.checkpoint_bytes, 10240);
//!
//! let dir = tempfile::tempdir().expect("temp dir");
//! let storage = PosixStorage::new();
//! let name = checkpoint_dir_name(1, 3);
//! let mut writer = CheckpointWriter::new(WriteOptions {
//!     randomize_tensor: true,
//!     fsync: false,
//!     seed: 123,
//!     chunk_bytes: 4096,
//! })?;
//! let written = writer.write(&storage, dir.path(), &name, &plan, 0)?;
//! assert_eq!((written.files, written.bytes), (1, 10240));
//!
//! let mut reader = CheckpointReader::new(ReadOptions {
//!     drop_page_cache: false,
//!     recovery_rank_shift: None,
//!     chunk_bytes: 4096,
//! })?;
//! assert_eq!(reader.read(&storage, dir.path(), &name, &plan, 0)?.bytes, 10240);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod error;
mod io;
mod model;
mod plan;
mod table;

pub use error::CheckpointError;
pub use io::{
    CheckpointReader, CheckpointWriter, DEFAULT_CHUNK_BYTES, MAX_READ_WINDOW_BYTES, ReadOptions,
    ReadReport, WriteOptions, WriteReport, drop_page_cache,
};
pub use model::{CheckpointMode, Datatype, ModelSpec, Parallelism, TransformerShape};
pub use plan::{
    CheckpointFile, CheckpointPlan, CheckpointTotals, FileContent, FileKind, RankPlan,
    UpstreamSizes, checkpoint_dir_name, checkpoint_plan, recovery_source_rank,
};
pub use table::format_plan_table;
