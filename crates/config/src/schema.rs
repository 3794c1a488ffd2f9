//! The typed configuration: one struct per YAML section, field names equal to DLIO's keys,
//! defaults equal to DLIO's `ConfigArguments` (dlio-semantics.md §3).
//!
//! Every struct is `#[serde(default, deny_unknown_fields)]`: a missing key takes DLIO's
//! default, an unknown key is an error (upstream ignores it silently, which hides typos).
//! Keys that DLIO reads under another name, and keys DLIO ignores, never reach these
//! structs: the loader renames or removes them first (see `tree.rs`).

use serde::{Deserialize, Serialize};

use crate::vocab::{
    Compression, DataLoaderKind, ElementType, FormatKind, Framework, LabelRead, PreprocessWork,
    ReadType, Sampler, Semantics, Shuffle, TimeDistribution,
};

/// The whole resolved workload, in DLIO's section order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `model`: the emulated model (checkpoint sizes, run-directory name).
    pub model: ModelConfig,
    /// `framework`: `tensorflow` or `pytorch`.
    pub framework: Framework,
    /// `workflow`: which phases run.
    pub workflow: WorkflowConfig,
    /// `storage`: where the data set and checkpoints live.
    pub storage: StorageConfig,
    /// `dataset`: the synthetic data set (files, samples, sizes, format).
    pub dataset: DatasetConfig,
    /// `reader` (also spelled `data_reader`): the data loader.
    pub reader: ReaderConfig,
    /// `train`: the training loop.
    pub train: TrainConfig,
    /// `evaluation`: the evaluation passes.
    pub evaluation: EvaluationConfig,
    /// `checkpoint`: emulated checkpoints.
    pub checkpoint: CheckpointConfig,
    /// `output`: where results go and which steps the metrics skip.
    pub output: OutputConfig,
    /// `profiling`: the profiler started when `workflow.profiling` is on.
    pub profiling: ProfilingConfig,
    /// `metric`: the expectation thresholds.
    pub metric: MetricConfig,
    /// `semantics` (ours): MLPerf Storage's DLIO fork (the default) or argonne upstream DLIO,
    /// where the two differ (see [`Semantics`]).
    pub semantics: Semantics,
}

impl Config {
    /// DLIO's `generate_only`: generate the data set and do nothing else
    /// (`generate_data ∧ ¬train ∧ ¬checkpoint`).
    pub fn generate_only(&self) -> bool {
        self.workflow.generate_data && !self.workflow.train && !self.workflow.checkpoint
    }

    /// DLIO's `checkpoint_only`: write and read checkpoints without a training loop
    /// (`¬train ∧ checkpoint`).
    pub fn checkpoint_only(&self) -> bool {
        !self.workflow.train && self.workflow.checkpoint
    }

    /// The sampler of this workload: [`Sampler::FileShards`] (tf.data's native TFRecord
    /// pipeline) for the tensorflow loader on tfrecord files, as DLIO's TF reader does, unless
    /// `reader.data_loader_sampler` is set; otherwise [`ReaderConfig::sampler`].
    pub fn sampler(&self) -> Sampler {
        if self.dataset.format == FormatKind::Tfrecord
            && self.reader.data_loader == DataLoaderKind::Tensorflow
            && self.reader.data_loader_sampler.is_none()
        {
            Sampler::FileShards
        } else {
            self.reader.sampler()
        }
    }

    /// A config in which every optional section is present, so that listing its keys gives
    /// every key of the schema (used for suggestions).
    pub(crate) fn schema_example() -> Config {
        let mut config = Config::default();
        config.storage.storage_options = Some(StorageOptions::default());
        config.checkpoint.ksm = Some(KsmConfig::default());
        config.dataset.parquet.columns = vec![ParquetColumn::default()];
        config.dataset.arrow.columns = vec![ParquetColumn::default()];
        config.dataset.record_length_bytes_distribution = vec![TransferSizeWeight::default()];
        config.dataset.side_files = vec![SideFile::default()];
        config.dataset.sample_companions = vec![SampleCompanion::default()];
        config.reader.transfer_size_distribution = vec![TransferSizeWeight::default()];
        config.reader.sample_requests = vec![SampleRequest::default()];
        config.reader.read_buffer = Some(ReadBuffer::default());
        config.reader.sample_request_patterns = vec![SampleRequestPattern {
            requests: vec![SampleRequest::default()],
            ..SampleRequestPattern::default()
        }];
        config.dataset.parquet.row_group_size = Some(1024);
        config.dataset.parquet.partition_by = Some(String::new());
        config.dataset.data_gen_method = Some(String::new());
        config.dataset.file_list_train = Some(String::new());
        config.dataset.file_list_eval = Some(String::new());
        config.storage.storage_library = Some(String::new());
        if let Some(options) = &mut config.storage.storage_options {
            options.storage_library = Some(String::new());
        }
        config
    }
}

/// `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Label of the run; also names the Hydra run directory and the report. Default `default`.
    pub name: String,
    /// `model.type`. When it is not `transformer` and `model_size_bytes > 0`, a flat
    /// `model_states-{rank}` tensor of `model_size_bytes` is checkpointed. Default none.
    pub r#type: Option<String>,
    /// Size of the flat model-state tensor in bytes. Default 10240.
    pub model_size_bytes: u64,
    /// Element type of the layer tensors. Default fp16.
    pub model_datatype: DataType,
    /// Element type of the optimizer tensors. Default fp32.
    pub optimizer_datatype: DataType,
    /// Legacy explicit optimizer tensor sizes (dlio-semantics.md §6.3). Default empty.
    pub optimization_groups: Vec<u64>,
    /// Transformer layers; `<= 0` means no layer or optimizer state from the transformer
    /// formulas. Default -1.
    pub num_layers: i64,
    /// Legacy explicit per-layer tensor sizes. Default empty.
    pub layer_parameters: Vec<u64>,
    /// `model.parallelism`: 3D parallelism and ZeRO.
    pub parallelism: ParallelismConfig,
    /// `model.transformer`: the transformer shape used for checkpoint sizes.
    pub transformer: TransformerConfig,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            name: "default".into(),
            r#type: None,
            model_size_bytes: 10240,
            model_datatype: DataType::Fp16,
            optimizer_datatype: DataType::Fp32,
            optimization_groups: Vec::new(),
            num_layers: -1,
            layer_parameters: Vec::new(),
            parallelism: ParallelismConfig::default(),
            transformer: TransformerConfig::default(),
        }
    }
}

impl ModelConfig {
    /// True when `model.type` is `transformer` (case-insensitive): the checkpoint is the
    /// layer/optimizer state of §6 rather than one flat tensor.
    pub fn is_transformer(&self) -> bool {
        self.r#type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("transformer"))
    }
}

/// `model.parallelism`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParallelismConfig {
    /// Tensor parallelism (TP). Default 1.
    pub tensor: u32,
    /// Pipeline parallelism (PP). Default 1.
    pub pipeline: u32,
    /// Data parallelism (DP); -1 means "derived: world / (TP·PP)". Must be set (> 0) exactly
    /// when `checkpoint.mode` is `subset`. Default -1.
    pub data: i64,
    /// ZeRO stage 0..=3. Default 0.
    pub zero_stage: u8,
}

impl Default for ParallelismConfig {
    fn default() -> Self {
        ParallelismConfig {
            tensor: 1,
            pipeline: 1,
            data: -1,
            zero_stage: 0,
        }
    }
}

/// `model.transformer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformerConfig {
    /// Vocabulary size V. Default 32000.
    pub vocab_size: u64,
    /// Hidden size h. Default 2048.
    pub hidden_size: u64,
    /// Feed-forward hidden size. Default 8192 (DLIO's docs say 8196; the code uses 8192).
    pub ffn_hidden_size: u64,
    /// Attention heads. Default 32.
    pub num_attention_heads: u64,
    /// Key/value heads (GQA). Default 8.
    pub num_kv_heads: u64,
}

impl Default for TransformerConfig {
    fn default() -> Self {
        TransformerConfig {
            vocab_size: 32000,
            hidden_size: 2048,
            ffn_hidden_size: 8192,
            num_attention_heads: 32,
            num_kv_heads: 8,
        }
    }
}

/// `workflow`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkflowConfig {
    /// Generate the data set first. Default false.
    pub generate_data: bool,
    /// Run the training loop. Default true.
    pub train: bool,
    /// Run evaluation passes. Default false.
    pub evaluation: bool,
    /// Write checkpoints; with `train: false` this is checkpoint-only mode. Default false.
    pub checkpoint: bool,
    /// Start `profiling.profiler`. Default false.
    pub profiling: bool,
    /// The key that `dlio_benchmark_query` prints (`++workload.workflow.query=KEY`).
    /// Default none.
    pub query: Option<String>,
}

impl Default for WorkflowConfig {
    fn default() -> Self {
        WorkflowConfig {
            generate_data: false,
            train: true,
            evaluation: false,
            checkpoint: false,
            profiling: false,
            query: None,
        }
    }
}

/// `storage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// The storage backend. Default `local_fs`.
    pub storage_type: StorageType,
    /// Local: the directory `dataset.data_folder` is joined under; object stores: the bucket.
    /// Default `./`.
    pub storage_root: String,
    /// Object-store settings. Default none.
    pub storage_options: Option<StorageOptions>,
    /// How local files are read and written (ours, not DLIO's): `posix` (buffered pread, the
    /// default), `direct` (O_DIRECT; `reader.odirect: True` selects it too), `mmap` (reads
    /// copy out of a mapping) or `io_uring`. Must stay `posix` with `storage_type: s3`.
    pub io_engine: IoEngine,
    /// Requests in flight per reader thread for engines that overlap them (io_uring, s3),
    /// e.g. the transfers of one split read (ours). Default 8.
    pub io_depth: u32,
    /// Drop the dataset's pages from the page cache (posix_fadvise DONTNEED per file, no root
    /// needed) before every epoch and between the generation, training and checkpoint
    /// phases, so reads reach the storage (ours). Default false.
    pub drop_page_cache: bool,
    /// The object-store client library (MLPerf Storage's fork: `s3dlio`, `minio` or
    /// `s3torchconnector`; the fork moves it into `storage_options`). Every one of them is an
    /// S3 API client, and dlio serves them all with its own S3 engine. Default none.
    pub storage_library: Option<String>,
    /// Seconds to wait after generation before training starts, for storage that settles
    /// (the fork's key). Default 0.
    pub post_generation_settle_seconds: f64,
    /// Caps the bytes per second this process reads from the dataset, over all its ranks and
    /// reader threads (ours, as fio's `rate`): every read completes no earlier than a shared
    /// token bucket allows, so a fast device can stand in for a slower one (what-if runs, and
    /// `dlio capacity` tests whose answer is known by construction). Under MPI the cap is per
    /// process. 0 (the default) is no cap.
    pub read_bytes_per_second: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            storage_type: StorageType::LocalFs,
            storage_root: "./".into(),
            storage_options: None,
            io_engine: IoEngine::Posix,
            io_depth: 8,
            drop_page_cache: false,
            storage_library: None,
            post_generation_settle_seconds: 0.0,
            read_bytes_per_second: 0,
        }
    }
}

/// `storage.io_engine`: an engine's name. The engines are rows of the storage crate's table,
/// each declared in the engine's own file; config keeps the name, checked against the names
/// the table registers ([`crate::register_engine_names`]) when a workload is loaded (any name
/// without them, for the table to refuse). The constants name the engines config refers to.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IoEngine(&'static str);

#[allow(non_upper_case_globals)]
impl IoEngine {
    /// Buffered `pread`/`write` through the page cache.
    pub const Posix: IoEngine = IoEngine("posix");
    /// O_DIRECT with aligned buffers.
    pub const Direct: IoEngine = IoEngine("direct");
    /// Reads copy out of a read-only memory mapping.
    pub const Mmap: IoEngine = IoEngine("mmap");
    /// io_uring with `storage.io_depth` reads in flight per reader thread.
    pub const IoUring: IoEngine = IoEngine("io_uring");

    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl Default for IoEngine {
    fn default() -> Self {
        IoEngine::Posix
    }
}

impl std::fmt::Debug for IoEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for IoEngine {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for IoEngine {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        crate::vocab::registered_name(&crate::vocab::ENGINE_NAMES, &name)
            .map(IoEngine)
            .map_err(|allowed| serde::de::Error::unknown_variant(&name, allowed))
    }
}

/// `storage.storage_options` (S3 and AIStore).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageOptions {
    /// S3 access key id.
    pub access_key_id: Option<String>,
    /// S3 secret access key.
    pub secret_access_key: Option<String>,
    /// Endpoint URL (S3: required with pytorch; AIStore: default `http://localhost:8080`).
    pub endpoint_url: Option<String>,
    /// S3 region. Default `us-east-1`.
    pub region: String,
    /// Path-style S3 addressing (DLIO reads the strings "true"/"false"; booleans are accepted
    /// too). Default false.
    pub s3_force_path_style: bool,
    /// Retries per S3 request. Default 5.
    pub s3_max_attempts: u32,
    /// The object-store client library, as `storage.storage_library` (the fork reads it
    /// here). Default none.
    pub storage_library: Option<String>,
    /// An `endpoint_url` written without a scheme is `https://` when true, `http://` when
    /// false (the fork's minio client). Default true.
    pub secure: bool,
    /// The fork's URI scheme: `s3` (S3 API), `file` (local files under `storage_root`) or
    /// `direct` (the same with O_DIRECT); `az` and `gs` are refused. Read at load time, which
    /// turns `file`/`direct` into `storage_type: local_fs`/`direct_fs`. Default none (`s3`).
    pub uri_scheme: Option<String>,
    /// Whole-object reads each reader thread keeps in flight on object storage. Default none:
    /// the fork's default for the client (`s3dlio`: 64, a sliding window; `minio`,
    /// `s3torchconnector`: chunks of 256).
    pub prefetch_window: Option<u32>,
    /// Reader thread `i` waits `i` × the mean computation time before its first read (the
    /// fork's chunked readers: minio, s3torchconnector and local streaming). Default none:
    /// on for those, off for s3dlio.
    pub stagger_workers: Option<bool>,
    /// Parquet columns to read, by name (the fork's selection). Default none: the columns of
    /// `dataset.parquet.columns` marked `read: true`.
    pub columns: Option<Vec<String>>,
    /// The fork's s3dlio parquet reader: bytes read from a file's end for its footer. dlio
    /// reads a parquet footer so when `dataset.parquet.footer_read_size` is not set. Default
    /// none.
    pub footer_cap: Option<u64>,
    /// The fork's s3dlio parquet reader: footers fetched together at the first epoch. No
    /// effect in dlio (a reader thread reads a file's footer when it opens it). Default none.
    pub footer_batch_size: Option<u64>,
    /// The fork's s3dlio parquet reader: this many consecutive row groups fetched in one
    /// request (from the first selected chunk of the first to the end of the last selected
    /// chunk of the last), which dlio does too. Default none (one row group a request).
    pub coalesce_rgs: Option<u64>,
    /// The fork's parquet readers: row-group requests in flight. No effect in dlio (a reader
    /// thread fetches a row group's ranges in turn; `reader.read_threads` and
    /// `storage.io_depth` set the requests in flight). Default none.
    pub max_outstanding: Option<u64>,
    /// The fork's parquet readers: threads fetching row groups (alias `prefetch`). No effect
    /// in dlio, as `max_outstanding`. Default none.
    pub prefetch_workers: Option<u64>,
    /// The fork's s3dlio parquet reader: `raw` (the bytes) or `arrow` (decoded to Arrow).
    /// dlio reads the bytes and decodes nothing: `arrow` is refused. Default none (`raw`).
    pub decode: Option<String>,
    /// The fork's Arrow parquet reader: what a decoded row group becomes (`none`, `pyarrow`,
    /// `torch`). dlio decodes nothing: anything but `none` is refused. Default none.
    pub decode_output: Option<String>,
    /// The fork's parquet readers: no I/O, dummy batches only. Refused by dlio: a run that
    /// moves no bytes measures nothing of the storage (`dataset.format: synthetic` is dlio's
    /// run without I/O). Default none.
    pub simulate_io: Option<bool>,
    /// The fork's simulated I/O's log window, seconds. Refused with `simulate_io`. Default none.
    pub sim_log_secs: Option<f64>,
    /// The fork's minio and s3torchconnector clients: object keys are the full URI
    /// (`s3://bucket/key`) instead of the key, for gateways that want them so. Default none
    /// (false).
    pub use_full_object_uri: Option<bool>,
    /// The fork's s3torchconnector client: the AWS profile whose credentials and region are
    /// used (from `~/.aws/credentials` and `~/.aws/config`, or `AWS_SHARED_CREDENTIALS_FILE`
    /// and `AWS_CONFIG_FILE`), when `access_key_id` is not given. Default none.
    pub s3_profile: Option<String>,
}

impl Default for StorageOptions {
    fn default() -> Self {
        StorageOptions {
            access_key_id: None,
            secret_access_key: None,
            endpoint_url: None,
            region: "us-east-1".into(),
            s3_force_path_style: false,
            s3_max_attempts: 5,
            storage_library: None,
            secure: true,
            uri_scheme: None,
            prefetch_window: None,
            stagger_workers: None,
            columns: None,
            footer_cap: None,
            footer_batch_size: None,
            coalesce_rgs: None,
            max_outstanding: None,
            prefetch_workers: None,
            decode: None,
            decode_output: None,
            simulate_io: None,
            sim_log_secs: None,
            use_full_object_uri: None,
            s3_profile: None,
        }
    }
}

/// `dataset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatasetConfig {
    /// Data set root; `train/` and `valid/` are underneath. Trailing `/` is removed, as DLIO
    /// does. Default `./data` (DLIO's `./data/` with that `/` removed).
    pub data_folder: String,
    /// File format. Default `tfrecord`.
    pub format: FormatKind,
    /// Files in the training set. Default 8.
    pub num_files_train: u64,
    /// Files in the evaluation set. Default 0.
    pub num_files_eval: u64,
    /// Training files the data set was generated with, when a run reads fewer (the fork's
    /// key; mlpstorage passes it from its datagen manifest on every `training run`): file
    /// names say `_of_{num_files_generated}` and pad the index to its digits, and the run
    /// reads files `0 .. num_files_train` of them. Generation names its files the same way.
    /// Default 0: the same as `num_files_train`.
    pub num_files_generated: u64,
    /// Samples (records) per file. Default 1.
    pub num_samples_per_file: u64,
    /// Nominal bytes per sample (a float, as upstream allows: resnet50 uses 114660.07); also
    /// the unit of the MB/s metric. Legacy name `record_length`. Default 65536.
    pub record_length_bytes: f64,
    /// Spread of the sample size. Legacy name `record_length_stdev`. Default 0.
    pub record_length_bytes_stdev: f64,
    /// Ours: the bytes of a sample of the evaluation files, which DLIO makes of the training
    /// size (a validation shard smaller than a training shard, an evaluation split whose
    /// images are of another size): every evaluation sample takes this size, with no spread
    /// (`record_length_bytes_stdev` and `record_length_bytes_distribution` shape the training
    /// files only). Default 0: the training size.
    pub record_length_bytes_eval: f64,
    /// Ours: the sample sizes of the data set's files as a distribution (`dlio characterize`
    /// writes the measured one): the files of a list take the sizes at evenly spaced
    /// quantiles of it, in a seeded order, so the set's total and shape are the
    /// distribution's whatever the number of files (a random draw per file moves a small set's
    /// total by 5% and more). Excludes `record_length_bytes_stdev` and `record_dims`.
    /// Default none.
    pub record_length_bytes_distribution: Vec<TransferSizeWeight>,
    /// Ours: what `record_length_bytes_distribution` sizes: each `file`'s samples (one size a
    /// file, every format), or each `sample` (records of their own sizes inside a file, for
    /// the formats that store each sample at its own size: `indexed_binary`,
    /// `mmap_indexed_binary`), a file's samples taking the distribution's evenly spaced
    /// quantiles in a seeded order. Default file.
    pub record_length_bytes_per: SizesPer,
    /// Ours: each opening of a data file first reads its first N bytes, before the samples it
    /// opened the file for (a library parsing the file's header: `wave.open` before a random
    /// crop), through the same requests as the samples (`reader.read_buffer`'s buffer then
    /// holds them). `indexed_binary` and `mmap_indexed_binary` only. Default 0 (none).
    pub header_read_bytes: u64,
    /// Size of the in-memory sample handed to the training loop. Legacy name
    /// `record_length_resize`. Default 0.
    pub record_length_bytes_resize: f64,
    /// Explicit sample shape; overrides the length-derived dims. Default empty.
    pub record_dims: Vec<u64>,
    /// Element type of a sample. Default uint8.
    pub record_element_type: ElementType,
    /// More than 1: files are spread round-robin into that many subfolders. Default 0.
    pub num_subfolders_train: u64,
    /// As `num_subfolders_train`, for the evaluation set. Default 0.
    pub num_subfolders_eval: u64,
    /// File name prefix. Default `img`.
    pub file_prefix: String,
    /// Compression codec. Default none.
    pub compression: Compression,
    /// gzip level (hdf5). Default 4.
    pub compression_level: u32,
    /// False: the data folder is deleted at the end of the run. Default true.
    pub keep_files: bool,
    /// Write chunk of the indexed-binary generator, in bytes. Default 2 GiB.
    pub generation_buffer_size: u64,
    /// `dataset.hdf5`: HDF5-only layout settings.
    pub hdf5: Hdf5Config,
    /// Parquet: rows per row group (MLPerf Storage's DLIO fork). Default 1024.
    /// `dataset.parquet.row_group_size` takes precedence.
    pub parquet_row_group_size: u64,
    /// Parquet: column codec (ours) when `dataset.compression` is none. Default none, as the
    /// fork writes.
    pub parquet_compression: ParquetCompression,
    /// `dataset.parquet`: the fork's parquet layout (columns, row groups).
    pub parquet: ParquetConfig,
    /// `dataset.arrow`: the Arrow IPC layout (columns, rows per record batch).
    pub arrow: ArrowConfig,
    /// Compute the file names instead of listing the data folder (the fork's key for datasets
    /// of millions of files); the listing's check is done on every
    /// `listing_validation_interval`-th file instead. Default false.
    pub skip_listing: bool,
    /// With `skip_listing`, every this-many-th computed file is checked to exist before the
    /// run (the fork's key). Default 1000.
    pub listing_validation_interval: u64,
    /// Ours: a manifest of the training files, one name per line (relative to
    /// `data_folder/train` unless absolute or a URI), located as `data_folder` is. The run reads
    /// its first `num_files_train` names, in its order, instead of listing the folder; each
    /// rank holds only the names it reads. Default none.
    pub file_list_train: Option<String>,
    /// Ours: the same for the evaluation files (`data_folder/valid`). Default none.
    pub file_list_eval: Option<String>,
    /// Threads that list a data set's subfolders at once (the fork's field, on POSIX and
    /// object storage alike); the files keep the order of one listing. Default 4.
    pub listing_threads: u32,
    /// The fork's generator back end (`dgen` or `numpy`); dlio generates with its own
    /// generator, so this only says which the workload asked for. Default none.
    pub data_gen_method: Option<String>,
    /// Ours: small files beside the data set that training reads every few steps (metadata,
    /// vocabularies, shard indexes), as `dlio characterize` finds them in a traced program.
    /// Generation writes each under `data_folder`; every rank reads each whole at the first
    /// step of every epoch and then every `every_steps` steps. Default none.
    pub side_files: Vec<SideFile>,
    /// Ours: a small file of its own beside every data file (a lidar frame's calibration, an
    /// image's label JSON or mask), as `dlio characterize` finds them in a traced program.
    /// Generation writes one per data file under `data_folder/<folder>/`, at the data file's
    /// place in its split (`<folder>/train/img_1_of_8.bin` for `train/img_1_of_8.npz`); the
    /// reader that reads a sample reads its file's companion whole first. Default none.
    pub sample_companions: Vec<SampleCompanion>,
}

/// One entry of `dataset.sample_companions` (ours).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SampleCompanion {
    /// The folder under `dataset.data_folder` that holds them (a relative path, not the
    /// splits' own `train` or `valid`). Default `companion`.
    pub folder: String,
    /// Bytes of each. Default 1024.
    pub size_bytes: u64,
}

impl Default for SampleCompanion {
    fn default() -> Self {
        SampleCompanion {
            folder: "companion".into(),
            size_bytes: 1024,
        }
    }
}

/// One entry of `dataset.side_files` (ours).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SideFile {
    /// Path under `dataset.data_folder` (no `..`, not absolute). Default `meta/side.bin`.
    pub name: String,
    /// Bytes of the file. Default 4096.
    pub size_bytes: u64,
    /// Read at the epoch's step 1, 1 + every_steps, ... (1-based steps). Default 1.
    pub every_steps: u64,
}

impl Default for SideFile {
    fn default() -> Self {
        SideFile {
            name: "meta/side.bin".into(),
            size_bytes: 4096,
            every_steps: 1,
        }
    }
}

/// One entry of `reader.sample_requests` (ours).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SampleRequest {
    /// Where `offset` counts from: `start` or `end` of the file. Default `start`.
    pub from: RequestAnchor,
    /// Bytes from that end (from the end: the request starts this many bytes before it).
    /// Default 0.
    pub offset: u64,
    /// Bytes asked for. Default 4096.
    pub size: u64,
    /// When not 0, the request is cut down to a whole number of blocks of this many bytes
    /// (after the cut at the file's end) and left out when none fits: a buffered stream asked
    /// for more than its buffer reads whole blocks directly and the tail through its buffer.
    /// Default 0.
    pub blocks: u64,
    /// When set, the request also stops this many bytes short of the file's end (a zip's
    /// stored member read up to the central directory, whose length changes little from file
    /// to file while the file's size does); nothing is read when that is at or before its
    /// start. Default none.
    pub until_end: Option<u64>,
    /// The reader's own work after this request, before its next, seconds, spent busy (a
    /// loader parsing the header it just read: np.load between an npy's header and its
    /// array). Default 0.
    pub work: f64,
    /// Ours: the reader's wait after this request (and its `work`), before its next,
    /// seconds, asleep: the pause of one of several readers that take turns on one
    /// interpreter, or wait for a pipeline to take what they read. Default 0.
    pub wait: f64,
}

impl Default for SampleRequest {
    fn default() -> Self {
        SampleRequest {
            from: RequestAnchor::Start,
            offset: 0,
            size: 4096,
            blocks: 0,
            until_end: None,
            work: 0.0,
            wait: 0.0,
        }
    }
}

/// One entry of `reader.sample_request_patterns` (ours): the requests of one kind of
/// opening.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SampleRequestPattern {
    /// The share of the openings that make this pattern, relative to the other patterns'.
    /// Default 1.
    pub weight: f64,
    /// Whether the bytes the requests left unread are read after them (the opening reads the
    /// whole file) or not (it reads only what the requests cover). Default true.
    pub read_rest: bool,
    /// The requests, in order, as `reader.sample_requests` gives them. Default none: with
    /// `read_rest`, the opening reads its whole file in one request (a file a program reads
    /// in one call beside files it reads in parts).
    pub requests: Vec<SampleRequest>,
}

impl Default for SampleRequestPattern {
    fn default() -> Self {
        SampleRequestPattern {
            weight: 1.0,
            read_rest: true,
            requests: Vec::new(),
        }
    }
}

/// `reader.sample_requests[].from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestAnchor {
    /// From the file's first byte.
    #[default]
    Start,
    /// Back from the file's end.
    End,
}

/// `reader.read_buffer` (ours): the buffered stream a program reads its samples through.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadBuffer {
    /// The buffer's size in bytes: Python's is the file system's block size (`st_blksize`),
    /// 4096 or 8192 on most. Default 4096.
    pub size: u64,
    /// Each sample read starts with a read smaller than the buffer (a header parsed before
    /// the data: a Kaldi matrix's, a PNG's signature), which fills the buffer at the
    /// sample's start. Default false.
    pub header_read: bool,
    /// The most bytes the program asks for in one read after that (Pillow's 65536); 0: the
    /// rest of the sample in one read. Default 0.
    pub app_read_size: u64,
}

impl Default for ReadBuffer {
    fn default() -> Self {
        ReadBuffer {
            size: 4096,
            header_read: false,
            app_read_size: 0,
        }
    }
}

/// One entry of `reader.transfer_size_distribution` (ours).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransferSizeWeight {
    /// Request size in bytes. Default 4096.
    pub size: u64,
    /// Relative share of the requests of this size. Default 1.
    pub weight: f64,
}

impl Default for TransferSizeWeight {
    fn default() -> Self {
        TransferSizeWeight {
            size: 4096,
            weight: 1.0,
        }
    }
}

/// `dataset.record_length_bytes_per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizesPer {
    /// One size for all the samples of a file.
    #[default]
    File,
    /// Each sample its own size.
    Sample,
}

/// `dataset.parquet` (MLPerf Storage's DLIO fork).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParquetConfig {
    /// The columns of every file, in order; empty means the fork's legacy layout (one `data`
    /// column holding each sample's bytes). Default empty.
    pub columns: Vec<ParquetColumn>,
    /// Rows per row group; none means `dataset.parquet_row_group_size`. Default none.
    pub row_group_size: Option<u64>,
    /// How samples are read: `row_group` (or `default`): a sample read fetches the selected
    /// columns of its row group, once per row group and epoch. Default `default`.
    pub read_mode: ParquetReadMode,
    /// A column to partition the files by (pyarrow's `write_to_dataset`). Default none.
    pub partition_by: Option<String>,
    /// Rows generated per batch (bounds the fork's generator memory). Default 0 (one row
    /// group).
    pub generation_batch_size: u64,
    /// Generate through s3dlio's parquet writer (the fork's key). Default false.
    pub use_s3dlio_gen: bool,
    /// Ours: readers read a file's footer as its last this-many bytes in one request, as
    /// pyarrow (64 KiB) and Arrow C++ do, then what the metadata needs beyond them; 0 reads the
    /// length, then the metadata (parquet-rs). Default 0.
    pub footer_read_size: u64,
    /// Ours (the name of the wvaske fork's key): footers are read once per file and run, as
    /// by a program that keeps its `ParquetFile`s; false reads them again every epoch, as the
    /// MLPerf fork's readers reopen their files. Default false.
    pub metadata_cache: bool,
    /// Consecutive row groups fetched in one request (`storage.storage_options.coalesce_rgs`,
    /// the fork's s3dlio reader): from the first selected chunk of the first to the end of the
    /// last selected chunk of the last, unselected bytes between them included. Default 0
    /// (as 1: a row group a request).
    pub coalesce_row_groups: u64,
}

/// `dataset.parquet.read_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParquetReadMode {
    /// Row-group reads (the fork's only reader).
    #[default]
    Default,
    /// Row-group reads, said explicitly.
    RowGroup,
}

/// One entry of `dataset.parquet.columns` (and of `dataset.arrow.columns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParquetColumn {
    /// Column name. Default `data`.
    pub name: String,
    /// Element type: uint8..uint64, int8..int64, float16/32/64, `list` (float32), `string`,
    /// `binary`, `bool`. Default float32.
    pub dtype: String,
    /// Elements per row (a fixed-size list when above 1; bytes for `binary`). Default 1.
    pub size: u64,
    /// Whether readers fetch this column (false: generated, never read). Default true.
    pub read: bool,
}

impl Default for ParquetColumn {
    fn default() -> Self {
        ParquetColumn {
            name: "data".into(),
            dtype: "float32".into(),
            size: 1,
            read: true,
        }
    }
}

/// `dataset.arrow` (`format: arrow`; the keys of the fork's Arrow branch).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArrowConfig {
    /// The columns of every file, in order, as `dataset.parquet.columns` (name, dtype, size,
    /// read); empty means one `data` column of each sample's bytes and an int64 `label`.
    /// Default empty.
    pub columns: Vec<ParquetColumn>,
    /// Rows per record batch; 0 writes each file as one record batch, as the fork's branch
    /// does. Readers fetch a record batch's selected columns once per batch and epoch.
    /// Default 0.
    pub generation_batch_size: u64,
}

/// `dataset.parquet_compression`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParquetCompression {
    /// Uncompressed pages (what the fork writes unless `dataset.compression` is gzip).
    #[default]
    None,
    /// Snappy (pyarrow's default).
    Snappy,
    /// Zstandard.
    Zstd,
    /// gzip.
    Gzip,
    /// LZ4 (Parquet's LZ4_RAW).
    Lz4,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            data_folder: "./data".into(),
            format: FormatKind::Tfrecord,
            num_files_train: 8,
            num_files_eval: 0,
            num_files_generated: 0,
            num_samples_per_file: 1,
            record_length_bytes: 65536.0,
            record_length_bytes_stdev: 0.0,
            record_length_bytes_eval: 0.0,
            record_length_bytes_distribution: Vec::new(),
            record_length_bytes_per: SizesPer::File,
            header_read_bytes: 0,
            record_length_bytes_resize: 0.0,
            record_dims: Vec::new(),
            record_element_type: ElementType::Uint8,
            num_subfolders_train: 0,
            num_subfolders_eval: 0,
            file_prefix: "img".into(),
            compression: Compression::None,
            compression_level: 4,
            keep_files: true,
            generation_buffer_size: 2 * 1024 * 1024 * 1024,
            hdf5: Hdf5Config::default(),
            parquet_row_group_size: 1024,
            parquet_compression: ParquetCompression::None,
            parquet: ParquetConfig::default(),
            arrow: ArrowConfig::default(),
            skip_listing: false,
            listing_validation_interval: 1000,
            file_list_train: None,
            file_list_eval: None,
            listing_threads: 4,
            data_gen_method: None,
            side_files: Vec::new(),
            sample_companions: Vec::new(),
        }
    }
}

/// `dataset.hdf5`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Hdf5Config {
    /// Datasets per record; must divide `record_dims[0]`. Default 1.
    pub num_dset_per_record: u64,
    /// h5py chunk shape. Default empty (no chunking).
    pub chunk_dims: Vec<u64>,
    /// h5py `maxshape`; `null` entries mean unlimited. Default empty.
    pub max_shape: Vec<Option<u64>>,
    /// Ours: what each sample's read also takes of the `labels` dataset: `none` (DLIO's),
    /// `element` (its label) or `to_end` (from its label to the end of the labels, at most
    /// 64 KiB, as h5py reads `labels[i]` of a dataset opened for each access; `dlio
    /// characterize` finds it). Default none.
    pub label_read: LabelRead,
    /// Ours: HDF5's sieve buffer for contiguous record datasets, in bytes (0: off, DLIO's
    /// reading of the sample's bytes). A sample smaller than it is read as a window of this
    /// many bytes from the sample on (up to the dataset's end), kept per open file, and a later
    /// sample that lies inside the window is served from it without a read, as h5py reads rows
    /// of a contiguous dataset it keeps open (65536, the library's default; `dlio
    /// characterize` finds it). Default 0.
    pub sieve_bytes: u64,
}

impl Default for Hdf5Config {
    fn default() -> Self {
        Hdf5Config {
            num_dset_per_record: 1,
            chunk_dims: Vec::new(),
            max_shape: Vec::new(),
            label_read: LabelRead::None,
            sieve_bytes: 0,
        }
    }
}

/// `reader` (alias `data_reader`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReaderConfig {
    /// The data loader. When the workload does not set it, it follows `framework`
    /// (DLIO's default is the string "tensorflow" whatever the framework, bug B6).
    pub data_loader: DataLoaderKind,
    /// Custom loader class (Python plugins; rejected by `Config::validate`).
    pub data_loader_classname: Option<String>,
    /// Sampler; none means derived from the loader, see [`ReaderConfig::sampler`].
    pub data_loader_sampler: Option<Sampler>,
    /// Custom reader class (Python plugins; rejected by `Config::validate`).
    pub reader_classname: Option<String>,
    /// Per-rank training batch. Default 1.
    pub batch_size: u64,
    /// Per-rank evaluation batch. Default 1.
    pub batch_size_eval: u64,
    /// Loader parallelism. Default 1.
    pub read_threads: u32,
    /// TF tfrecord `map` parallelism. Default 1.
    pub computation_threads: u32,
    /// Generation's writer threads per rank (the fork's key). 1 (the default, as in the
    /// fork) sizes them from the machine: one per core on local storage, enough to keep
    /// 256 MiB of objects in flight on object storage (at most 16 per process), capped by the
    /// environment's `DLIO_MAX_AUTO_THREADS`; more than 1 is that many per rank of the process.
    pub write_threads: u32,
    /// Check the CRC of every TFRecord's data (ours; the length's CRC is always checked).
    /// Default: off under the MLPerf Storage semantics, whose readers do not pay for it, on
    /// under upstream's (TensorFlow's record reader checks it).
    pub tfrecord_check_crc: Option<bool>,
    /// Batches prefetched. Default 2.
    pub prefetch_size: u32,
    /// File-order shuffle. Default off.
    pub file_shuffle: Shuffle,
    /// Sample-order shuffle. Default off.
    pub sample_shuffle: Shuffle,
    /// Ours: each sample of a rank's epoch is an independent, uniform draw of the rank's
    /// shard, so samples repeat within an epoch and others are not read in it (PyTorch's
    /// `RandomSampler(replacement=True)`, the weighted samplers of imbalanced data sets); the
    /// draws are keyed by `sample_shuffle`'s seed and epoch rule, which must not be off.
    /// Default false (each sample once per epoch).
    pub sample_replacement: bool,
    /// Shuffle buffer (TF) / initial fill (DALI). Default 1024.
    pub shuffle_size: u64,
    /// Open-read-close per sample (`on_demand`) or keep files open (`memory`). Default
    /// `on_demand`.
    pub read_type: ReadType,
    /// Request size in bytes: every engine splits longer reads of every format into
    /// requests of this size (upstream: TF tfrecord's buffer only). Default none.
    pub transfer_size: Option<u64>,
    /// Ours: request sizes as a distribution, for programs whose reads a single size cannot
    /// describe (`dlio characterize` derives it from a trace): every read is split into
    /// requests whose sizes are drawn from these sizes with these weights (the last request of
    /// a read is cut to what remains), reproducibly from the seed. Excludes `transfer_size`.
    /// Default none.
    pub transfer_size_distribution: Vec<TransferSizeWeight>,
    /// Ours: the requests every whole-file sample read makes, in order (`dlio characterize`
    /// derives them when a program's library reads each file the same way, as `np.load` reads
    /// a zip's directory at the end first): offsets from the file's start or end, sizes cut at
    /// the file's end; bytes no request covered are read after them. Reads of part of a file
    /// are made as asked. Excludes `transfer_size` and its distribution. Default none.
    pub sample_requests: Vec<SampleRequest>,
    /// Ours: several request patterns, each opening of a file read whole making one of them
    /// (chosen in proportion to their weights, spread evenly over the openings), with or
    /// without the bytes its requests left (`read_rest`): a program whose openings each read
    /// one member of a file (an npz's array, one of several) in a library's own requests.
    /// Excludes `sample_requests`, `transfer_size` and its distribution. Default none.
    pub sample_request_patterns: Vec<SampleRequestPattern>,
    /// Ours: every read is made as a program reading through a buffered stream makes it
    /// (Python's file objects; `dlio characterize` derives it when a program's requests are
    /// whole buffers and whole blocks): a read the buffer answers makes no request, a longer
    /// one reads its whole blocks straight and refills the buffer for its tail. Excludes
    /// `transfer_size`, its distribution and the request patterns. Default none.
    pub read_buffer: Option<ReadBuffer>,
    /// Ours: a read longer than this many bytes is made as a request of them, then one of the
    /// rest (a record's header read before its payload; h5py reading a heap block's first
    /// 4 KiB, then the rest of it). Excludes the other request keys. Default none.
    pub head_request_size: Option<u64>,
    /// Ours: false reads each batch only when the step asks for it, its samples spread over
    /// the `read_threads` (a thread pool mapped over each batch), so no read overlaps compute;
    /// with `read_threads: 0` the step's own thread reads. Default true (the frameworks'
    /// loaders read ahead by `prefetch_size`).
    pub read_ahead: bool,
    /// Ours, with `read_ahead`: every batch's samples are spread over the reader threads (as
    /// without read-ahead) and `prefetch_size` batches beyond the step's are asked for in
    /// advance: a pool mapped over each batch that runs ahead, as tf.data's parallel `map`
    /// followed by `batch` and `prefetch`. Default false (each reader thread reads whole
    /// batches in turn).
    pub spread_batches: bool,
    /// Time slept per sample in the reader; legacy sibling `preprocess_time_stdev`.
    /// Default 0.
    #[serde(with = "time_value")]
    pub preprocess_time: TimeDistribution,
    /// Ours: what `preprocess_time` and `batch_time` are spent on: `sleep` (DLIO's) or `cpu` (the reader
    /// thread keeps its core busy, as the decoding or interpreter work the time stands for
    /// does; `dlio characterize` sets it for a traced loader's own time between its reads).
    /// Default sleep.
    pub preprocess_work: PreprocessWork,
    /// Ours: time a reader spends per batch, after the batch's samples are read and before
    /// it is handed over (a PyTorch worker's collate_fn and the pickling of the batch through
    /// its pipe; `dlio characterize` measures it between a worker's batches read back to
    /// back). Any time distribution, as `preprocess_time`. Default 0.
    #[serde(with = "time_value")]
    pub batch_time: TimeDistribution,
    /// Ours: time a reader spends each time it opens a file, after the format's opening (a
    /// parquet footer's read) and before the file's first sample read: a library parsing the
    /// file's metadata (pyarrow's footer, h5py's superblock). Slept, or spent busy under
    /// `preprocess_work: cpu`. Any time distribution, as `preprocess_time`. Default 0.
    #[serde(with = "time_value")]
    pub open_time: TimeDistribution,
    /// Ours: the share of reads of 64 KiB and more that land in pages the process has not
    /// touched, as a program's reads into new objects fault theirs in (0: every read into
    /// the reader's warm buffer; 1: every one fresh; `dlio characterize` measures it as the
    /// share of a traced program's large reads slower than twice the fastest). Default 0.
    pub fresh_read_share: f64,
    /// Ours: each sample read lands in a buffer that starts this many bytes past a 4 KiB page
    /// boundary (0 to 4095), as a traced program's buffers did: the kernel copies from the
    /// page cache several times slower on some CPUs when the buffer starts a few bytes past
    /// the file's page boundary (AMD Zen: 1 to 31 bytes), and a Python `bytearray` of 128 KiB
    /// or more starts 16 bytes past one. `dlio characterize` writes the offset holding most
    /// of a traced program's data bytes (`dlio trace` records each buffer's). Buffered reads
    /// only. Default none: the engine's own alignment.
    pub buffer_page_offset: Option<u64>,
    /// Ours: seconds of the reader's own work between two requests of one read that
    /// continue each other, when reads are split (`transfer_size`,
    /// `transfer_size_distribution`): a program that decodes as it streams a file (gunzip,
    /// text decoding, a tar member's header) works on each chunk before it asks for the next.
    /// Spent busy on the reader's core, as `sample_requests`' `work`; the requests are then
    /// made one after another. `dlio characterize` measures it as the mean pause between two
    /// reads of one opening. Default 0.
    pub request_work_time: f64,
    /// Ours: before the first epoch, each rank reads the first this many bytes of every file
    /// it trains on, once, as a sampler that groups samples by what their headers say does
    /// (image sizes for aspect-ratio buckets; `dlio characterize` finds such a pass). 0: no
    /// such pass. Default 0.
    pub header_scan_bytes: u64,
    /// Ours: seconds each training epoch's loader takes to start before its readers begin
    /// (a PyTorch DataLoader without persistent workers forks them again for every epoch, and
    /// the training loop waits for its first batch meanwhile; `dlio characterize` measures
    /// it). Counted in the epoch's first wait for a batch. Default 0.
    pub epoch_start_time: f64,
    /// Ours: seconds between the starts of two reader threads: thread `i` begins reading
    /// `i` times this after the epoch's start, in the first epoch, and in every epoch when
    /// `epoch_start_time` is above 0 (a loader started again each epoch), as a PyTorch
    /// DataLoader forks its worker processes one after another (`dlio characterize`
    /// measures it). Default 0.
    pub worker_start_interval: f64,
    /// Ours: seconds from the training loop's take of a batch to the moment the reader thread
    /// whose finished batch it took may begin its next one, as a PyTorch DataLoader sends a
    /// worker its next index only after it has unpickled the batch it took (rebuilding its
    /// tensors from shared memory: one to ten milliseconds; `dlio characterize` measures it).
    /// A reader that is behind (no finished batch waiting) goes on at once, as a worker whose
    /// next index is already queued does. Default 0.
    pub request_delay: f64,
    /// Ours: false reads each pass's last, short batch as a PyTorch DataLoader does by default
    /// (`drop_last=False`), so the pass has one step more; true drops it, as DLIO's loaders
    /// do. DLIO's throughput (steps times the batch) counts the short batch as a whole one.
    /// Default true.
    pub drop_last: bool,
    /// PyTorch `pin_memory`. Default true.
    pub pin_memory: bool,
    /// PyTorch/DALI worker start method. Default fork.
    pub multiprocessing_context: MultiprocessingContext,
    /// O_DIRECT: selects `storage.io_engine: direct` (as upstream), or O_DIRECT files for
    /// `io_uring`. Default false.
    pub odirect: bool,
    /// Ours: read the shared file of the data set through MPI-IO collective calls
    /// (`MPI_File_read_at_all`), with the same plan. Needs `mpirun`, the `mpi` build feature,
    /// one rank per process, at most one reader thread and one training file. Default false.
    pub collective_io: bool,
    /// DALI readers: do not mmap. Default false.
    pub dont_use_mmap: bool,
    /// Shape of the sample tensor handed to the training loop. Default empty.
    pub transformed_record_dims: Vec<u64>,
    /// Element type of that tensor. Default uint8.
    pub transformed_record_element_type: ElementType,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig {
            data_loader: DataLoaderKind::Tensorflow,
            data_loader_classname: None,
            data_loader_sampler: None,
            reader_classname: None,
            batch_size: 1,
            batch_size_eval: 1,
            read_threads: 1,
            computation_threads: 1,
            write_threads: 1,
            tfrecord_check_crc: None,
            prefetch_size: 2,
            file_shuffle: Shuffle::Off,
            sample_shuffle: Shuffle::Off,
            sample_replacement: false,
            shuffle_size: 1024,
            read_type: ReadType::OnDemand,
            transfer_size: None,
            transfer_size_distribution: Vec::new(),
            sample_requests: Vec::new(),
            sample_request_patterns: Vec::new(),
            read_buffer: None,
            head_request_size: None,
            read_ahead: true,
            spread_batches: false,
            preprocess_time: TimeDistribution::default(),
            preprocess_work: PreprocessWork::Sleep,
            batch_time: TimeDistribution::default(),
            open_time: TimeDistribution::default(),
            fresh_read_share: 0.0,
            buffer_page_offset: None,
            request_work_time: 0.0,
            header_scan_bytes: 0,
            epoch_start_time: 0.0,
            worker_start_interval: 0.0,
            request_delay: 0.0,
            drop_last: true,
            pin_memory: true,
            multiprocessing_context: MultiprocessingContext::Fork,
            odirect: false,
            collective_io: false,
            dont_use_mmap: false,
            transformed_record_dims: Vec::new(),
            transformed_record_element_type: ElementType::Uint8,
        }
    }
}

impl ReaderConfig {
    /// The sampler in effect: `data_loader_sampler` when set, otherwise derived from the
    /// loader as DLIO does (tensorflow → iterative, every other loader → index).
    pub fn sampler(&self) -> Sampler {
        match self.data_loader_sampler {
            Some(sampler) => sampler,
            None if self.data_loader == DataLoaderKind::Tensorflow => Sampler::Iterative,
            None => Sampler::Index,
        }
    }
}

/// `train`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Epochs. Default 1.
    pub epochs: u64,
    /// Emulated compute time per step; legacy sibling `computation_time_stdev`. Default 0.
    #[serde(with = "time_value")]
    pub computation_time: TimeDistribution,
    /// Per-epoch step cap; `<= 0` means none. Default -1.
    pub total_training_steps: i64,
    /// Shuffle seed base. Default 123.
    pub seed: u64,
    /// Shuffle seed is `seed + epoch` when true. Default true.
    pub seed_change_epoch: bool,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 1,
            computation_time: TimeDistribution::default(),
            total_training_steps: -1,
            seed: 123,
            seed_change_epoch: true,
        }
    }
}

impl TrainConfig {
    /// The per-epoch step cap, if any (`total_training_steps > 0`).
    pub fn step_cap(&self) -> Option<u64> {
        u64::try_from(self.total_training_steps)
            .ok()
            .filter(|&steps| steps > 0)
    }
}

/// `evaluation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvaluationConfig {
    /// Emulated compute time per evaluation step; legacy sibling `eval_time_stdev`.
    /// Default 0.
    #[serde(with = "time_value")]
    pub eval_time: TimeDistribution,
    /// First epoch followed by an evaluation. Default 1.
    pub eval_after_epoch: u64,
    /// Epochs between evaluations. Default 1.
    pub epochs_between_evals: u64,
    /// Ours: an evaluation pass after every this many training steps, counted over the run
    /// (a training loop's `eval_steps` or `eval_interval`), in place of the epoch rule
    /// (`eval_after_epoch`, `epochs_between_evals`); a pass may fall inside an epoch. 0 (the
    /// default): evaluations follow epochs, as DLIO's.
    pub steps_between_evals: u64,
    /// Ours: the steps (of `reader.batch_size_eval`) each evaluation pass reads, as a training
    /// loop's `eval_iters` or `limit_val_batches` reads a part of the split. 0 (the default):
    /// the whole split, as DLIO's.
    pub steps_per_eval: u64,
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            eval_time: TimeDistribution::default(),
            eval_after_epoch: 1,
            epochs_between_evals: 1,
            steps_between_evals: 0,
            steps_per_eval: 0,
        }
    }
}

/// `checkpoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointConfig {
    /// Checkpoint root (trailing `/` removed, as DLIO does). Default `./checkpoints`.
    pub checkpoint_folder: String,
    /// First epoch with an epoch checkpoint. Default 1.
    pub checkpoint_after_epoch: u64,
    /// Epochs between epoch checkpoints. Default 1.
    pub epochs_between_checkpoints: u64,
    /// `> 0`: checkpoint every N steps within each epoch (the epoch rule is then ignored).
    /// Default -1.
    pub steps_between_checkpoints: i64,
    /// `default` or `subset`. Default `default`.
    pub mode: CheckpointMode,
    /// Checkpoint-only mode: seconds slept before each write/read (DLIO sleeps `abs` of it,
    /// so the default -1 sleeps 1 s). Default -1.
    pub time_between_checkpoints: f64,
    /// Checkpoint-only mode: checkpoints written. Default -1.
    pub num_checkpoints_write: i64,
    /// Checkpoint-only mode: checkpoints read back (≤ written). Default -1.
    pub num_checkpoints_read: i64,
    /// Barrier after each save/load in checkpoint-only mode. Default false.
    pub rank_sync: bool,
    /// fsync after each save (never applied upstream, bug B5). Default false.
    pub fsync: bool,
    /// Read another node's checkpoint files (never applied upstream, bug B5). Default false.
    pub recovery_rank_shift: bool,
    /// Random tensors (true) or ones (false). Default true.
    pub randomize_tensor: bool,
    /// Custom checkpoint mechanism (Python plugins; rejected by `Config::validate`).
    pub checkpoint_mechanism_classname: Option<String>,
    /// KSM settings; present (even `{}`) means KSM is on. Default none.
    pub ksm: Option<KsmConfig>,
    /// Ours (`checkpoint.async`): the step loop hands each save to a background writer and goes
    /// on; the next save waits for the previous one. Default false (DLIO's synchronous saves).
    #[serde(rename = "async")]
    pub asynchronous: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            checkpoint_folder: "./checkpoints".into(),
            checkpoint_after_epoch: 1,
            epochs_between_checkpoints: 1,
            steps_between_checkpoints: -1,
            mode: CheckpointMode::Default,
            time_between_checkpoints: -1.0,
            num_checkpoints_write: -1,
            num_checkpoints_read: -1,
            rank_sync: false,
            fsync: false,
            recovery_rank_shift: false,
            randomize_tensor: true,
            checkpoint_mechanism_classname: None,
            ksm: None,
            asynchronous: false,
        }
    }
}

/// `checkpoint.ksm`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KsmConfig {
    /// `madvise` advice number for MADV_MERGEABLE. Default 12.
    pub madv_mergeable_id: u32,
    /// RAM use (%) that starts waiting for KSM. Default 30.
    pub high_ram_trigger: f64,
    /// RAM use (%) below which the wait ends. Default 15.
    pub low_ram_exit: f64,
    /// Longest wait, in seconds. Default 200.
    pub await_time: u64,
}

impl Default for KsmConfig {
    fn default() -> Self {
        KsmConfig {
            madv_mergeable_id: 12,
            high_ram_trigger: 30.0,
            low_ram_exit: 15.0,
            await_time: 200,
        }
    }
}

/// `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Output folder; none means the Hydra run directory. Default none.
    pub folder: Option<String>,
    /// Log file name inside the output folder. Default `dlio.log`.
    pub log_file: String,
    /// `output.metric`: steps left out of the metrics.
    pub metric: OutputMetricConfig,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            folder: None,
            log_file: "dlio.log".into(),
            metric: OutputMetricConfig::default(),
        }
    }
}

/// `output.metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputMetricConfig {
    /// Steps left out at the start of each block. Default 1.
    pub exclude_start_steps: u64,
    /// Steps left out at the end of each block. Default 0.
    pub exclude_end_steps: u64,
}

impl Default for OutputMetricConfig {
    fn default() -> Self {
        OutputMetricConfig {
            exclude_start_steps: 1,
            exclude_end_steps: 0,
        }
    }
}

/// `profiling`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfilingConfig {
    /// Profiler started when `workflow.profiling` is on. Default iostat.
    pub profiler: Profiler,
    /// iostat devices; empty means all (a single string is accepted). Default empty.
    pub iostat_devices: Vec<String>,
}

/// `metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricConfig {
    /// AU expectation, a fraction: a run meets it when mean AU% ≥ `au`·100. Default 0.90.
    pub au: f64,
}

impl Default for MetricConfig {
    fn default() -> Self {
        MetricConfig { au: 0.90 }
    }
}

/// `storage.storage_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageType {
    /// POSIX files under `storage_root`.
    #[default]
    LocalFs,
    /// Local files read with O_DIRECT (the fork's `direct_fs`; as `storage.io_engine:
    /// direct`).
    DirectFs,
    /// Accepted because upstream's enum has it; upstream's storage factory rejects it.
    ParallelFs,
    /// S3 (bucket = `storage_root`).
    S3,
    /// AIStore.
    Aistore,
}

impl StorageType {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageType::LocalFs => "local_fs",
            StorageType::DirectFs => "direct_fs",
            StorageType::ParallelFs => "parallel_fs",
            StorageType::S3 => "s3",
            StorageType::Aistore => "aistore",
        }
    }
}

/// `checkpoint.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointMode {
    /// Every rank of a world of `DP·TP·PP` ranks, DP derived from the world size.
    #[default]
    Default,
    /// Emulate a slice of a bigger job: `model.parallelism.data` gives the target DP.
    Subset,
}

/// `profiling.profiler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profiler {
    /// `iostat -mdxtcy -o JSON` on rank 0.
    #[default]
    Iostat,
    /// Darshan (needs LD_PRELOAD).
    Darshan,
    /// TensorFlow profiler.
    Tensorboard,
    /// No profiler.
    None,
}

impl Profiler {
    /// The YAML spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Profiler::Iostat => "iostat",
            Profiler::Darshan => "darshan",
            Profiler::Tensorboard => "tensorboard",
            Profiler::None => "none",
        }
    }
}

/// `reader.multiprocessing_context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MultiprocessingContext {
    /// `fork`.
    #[default]
    Fork,
    /// `spawn`.
    Spawn,
    /// `forkserver`.
    Forkserver,
    /// `None`: PyTorch's default for the platform (fork on Linux), as upstream's test
    /// `test_pytorch_multiprocessing_context[0-None]` passes it.
    None,
}

/// Element type of checkpoint tensors (`model.model_datatype`, `model.optimizer_datatype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataType {
    /// 16-bit float.
    Fp16,
    /// bfloat16.
    Bf16,
    /// 32-bit float.
    Fp32,
    /// 64-bit float.
    Fp64,
    /// Signed byte.
    Int8,
    /// Unsigned byte.
    Uint8,
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Fp16 | DataType::Bf16 => 2,
            DataType::Fp32 => 4,
            DataType::Fp64 => 8,
        }
    }
}

/// How a [`TimeDistribution`] is written in YAML: a plain number for a constant (what the
/// workloads use), `{type: normal, mean, stdev}` and so on otherwise. Reading accepts
/// everything DLIO accepts (dlio-semantics.md §2.7); the legacy `*_stdev` sibling keys are
/// folded in before this runs.
pub(crate) mod time_value {
    use serde::de::Error as _;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    use crate::vocab::TimeDistribution;

    const FORMS: &str = "a number of seconds, or a mapping such as {mean: 0.5, stdev: 0.1}, \
                         {type: uniform, min: 0.4, max: 0.6}, {type: gamma, shape: 2, scale: 0.1}, \
                         {type: exponential, scale: 0.2}, {type: poisson, lam: 0.3}, \
                         {type: quantiles, values: [0.020, 0.021, 0.031]} or \
                         {type: empirical, values: [0.021, 0.020, 0.440]}";

    pub fn serialize<S: Serializer>(t: &TimeDistribution, s: S) -> Result<S::Ok, S::Error> {
        if let TimeDistribution::Quantiles { values } | TimeDistribution::Empirical { values } = t {
            let mut map = s.serialize_map(Some(2))?;
            map.serialize_entry("type", type_name(t))?;
            map.serialize_entry("values", values)?;
            return map.end();
        }
        let entries: Vec<(&str, f64)> = match *t {
            TimeDistribution::Constant { value } => return s.serialize_f64(value),
            TimeDistribution::Normal { mean, stdev } => vec![("mean", mean), ("stdev", stdev)],
            TimeDistribution::Uniform { min, max } => vec![("min", min), ("max", max)],
            TimeDistribution::Gamma { shape, scale } => vec![("shape", shape), ("scale", scale)],
            TimeDistribution::Exponential { scale } => vec![("scale", scale)],
            TimeDistribution::Poisson { lam } => vec![("lam", lam)],
            TimeDistribution::Quantiles { .. } | TimeDistribution::Empirical { .. } => {
                unreachable!("serialized above")
            }
        };
        let mut map = s.serialize_map(Some(entries.len() + 1))?;
        map.serialize_entry("type", type_name(t))?;
        for (key, value) in entries {
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }

    fn type_name(t: &TimeDistribution) -> &'static str {
        match t {
            TimeDistribution::Constant { .. } => "constant",
            TimeDistribution::Normal { .. } => "normal",
            TimeDistribution::Uniform { .. } => "uniform",
            TimeDistribution::Gamma { .. } => "gamma",
            TimeDistribution::Exponential { .. } => "exponential",
            TimeDistribution::Poisson { .. } => "poisson",
            TimeDistribution::Quantiles { .. } => "quantiles",
            TimeDistribution::Empirical { .. } => "empirical",
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TimeDistribution, D::Error> {
        let value = Value::deserialize(d)?;
        parse(&value).map_err(D::Error::custom)
    }

    /// Interprets one time value; the error text completes "`train.computation_time` ...".
    pub(crate) fn parse(value: &Value) -> Result<TimeDistribution, String> {
        let map = match value {
            Value::Null => return Ok(TimeDistribution::Constant { value: 0.0 }),
            Value::Number(n) => {
                let value = n.as_f64().unwrap_or(0.0);
                return Ok(TimeDistribution::Constant { value });
            }
            Value::Object(map) => map,
            other => return Err(format!("must be {FORMS}; got `{other}`")),
        };
        let kind = match map.get("type") {
            None => {
                if map.contains_key("stdev") {
                    "normal".to_string()
                } else if map.contains_key("value") && !map.contains_key("mean") {
                    "constant".to_string()
                } else {
                    "mean-only".to_string()
                }
            }
            Some(Value::String(s)) => s.to_ascii_lowercase(),
            Some(other) => {
                return Err(format!(
                    "has `type: {other}`; the type must be one of normal, uniform, gamma, \
                     exponential, poisson, quantiles, empirical (or constant)"
                ));
            }
        };
        if kind == "quantiles" || kind == "empirical" {
            return listed_times(map, &kind);
        }
        let (params, allowed): (&[&str], &[&str]) = match kind.as_str() {
            "mean-only" => (&[], &["mean"]),
            "constant" => (&[], &["value", "mean"]),
            "normal" => (&[], &["mean", "stdev"]),
            "uniform" => (&["min", "max"], &["min", "max"]),
            "gamma" => (&["shape", "scale"], &["shape", "scale"]),
            "exponential" => (&["scale"], &["scale"]),
            "poisson" => (&["lam"], &["lam"]),
            other => {
                return Err(format!(
                    "has `type: {other}`; the type must be one of normal, uniform, gamma, \
                     exponential, poisson, quantiles, empirical (or constant)"
                ));
            }
        };
        let shown = if kind == "mean-only" {
            "normal"
        } else {
            kind.as_str()
        };
        for key in map.keys() {
            if key != "type" && !allowed.contains(&key.as_str()) {
                return Err(format!(
                    "has `{key}`, which is not a parameter of the {shown} distribution (it takes \
                     {}); remove it",
                    allowed.join(", ")
                ));
            }
        }
        for key in params {
            if !map.contains_key(*key) {
                return Err(format!(
                    "is a {shown} distribution and needs `{}` (missing `{key}`)",
                    params.join("` and `")
                ));
            }
        }
        let num = |key: &str| -> Result<f64, String> {
            match map.get(key) {
                None | Some(Value::Null) => Ok(0.0),
                Some(Value::Number(n)) => Ok(n.as_f64().unwrap_or(0.0)),
                Some(other) => Err(format!("has `{key}: {other}`, which must be a number")),
            }
        };
        Ok(match kind.as_str() {
            "mean-only" => TimeDistribution::Constant {
                value: num("mean")?,
            },
            "constant" if map.contains_key("value") => TimeDistribution::Constant {
                value: num("value")?,
            },
            "constant" => TimeDistribution::Constant {
                value: num("mean")?,
            },
            "normal" => {
                let (mean, stdev) = (num("mean")?, num("stdev")?);
                if stdev == 0.0 {
                    TimeDistribution::Constant { value: mean }
                } else {
                    TimeDistribution::Normal { mean, stdev }
                }
            }
            "uniform" => TimeDistribution::Uniform {
                min: num("min")?,
                max: num("max")?,
            },
            "gamma" => TimeDistribution::Gamma {
                shape: num("shape")?,
                scale: num("scale")?,
            },
            "exponential" => TimeDistribution::Exponential {
                scale: num("scale")?,
            },
            _ => TimeDistribution::Poisson { lam: num("lam")? },
        })
    }

    /// `{type: quantiles, values: [...]}`, one or more numbers of seconds in increasing order,
    /// or `{type: empirical, values: [...]}`, one or more in any order.
    fn listed_times(
        map: &serde_json::Map<String, Value>,
        kind: &str,
    ) -> Result<TimeDistribution, String> {
        let order = if kind == "quantiles" {
            " in increasing order"
        } else {
            ""
        };
        if let Some(key) = map.keys().find(|k| *k != "type" && *k != "values") {
            return Err(format!(
                "has `{key}`, which is not a parameter of the {kind} distribution (it takes \
                 values); remove it"
            ));
        }
        let Some(Value::Array(items)) = map.get("values") else {
            return Err(format!(
                "is a {kind} distribution and needs `values`, a list of seconds{order}"
            ));
        };
        let values = items
            .iter()
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| format!("has `values` holding `{v}`, which must be a number"))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        if values.is_empty() {
            return Err(format!("has no `values`; give one or more seconds{order}"));
        }
        if kind == "empirical" {
            return Ok(TimeDistribution::Empirical { values });
        }
        if values.windows(2).any(|w| w[0] > w[1]) {
            return Err(
                "has `values` out of increasing order; list the quantiles smallest first".into(),
            );
        }
        Ok(TimeDistribution::Quantiles { values })
    }
}
