//! `Config::validate`: DLIO's `validate()` rules that depend on the config alone
//! (dlio-semantics.md §3.12), plus the checks that keep later stages from dividing by zero.
//! Rules about the file list, the environment (LD_PRELOAD) or installed Python packages are
//! checked where that information exists, not here. `train.total_training_steps` larger
//! than an epoch is checked by the trainer, which knows the file count.

use crate::error::ConfigError;
use crate::schema::{CheckpointMode, Config, IoEngine, StorageType};
use crate::vocab::{
    Compression, DataLoaderKind, FormatKind, Framework, MAX_SECONDS, TimeDistribution,
};

fn invalid(key: &str, message: String, fix: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        message,
        fix: fix.into(),
    }
}

impl Config {
    /// Checks the rules DLIO enforces before a run, for a run on `world` ranks. Returns the
    /// warnings (things DLIO also only warns about) or the first rule broken, with a message
    /// that says how to fix it.
    pub fn validate(&self, world: u32) -> Result<Vec<String>, ConfigError> {
        let mut warnings = Vec::new();
        self.validate_plugins(&mut warnings)?;
        self.validate_loader(&mut warnings)?;
        self.validate_counts()?;
        self.validate_dataset()?;
        self.validate_model(world)?;
        self.validate_checkpoint()?;
        self.validate_times()?;
        self.validate_storage()?;
        self.validate_characterized()?;
        Ok(warnings)
    }

    /// The keys `dlio characterize` writes: `reader.transfer_size_distribution`,
    /// `dataset.side_files` and `dataset.sample_companions`.
    fn validate_characterized(&self) -> Result<(), ConfigError> {
        if self.dataset.hdf5.label_read != crate::LabelRead::None
            && (self.dataset.format != FormatKind::Hdf5
                || self.semantics != crate::Semantics::Upstream)
        {
            return Err(invalid(
                "dataset.hdf5.label_read",
                "reads the labels of each sample through dlio's HDF5 reader, which reads \
                 samples as h5py does only with format hdf5 under upstream semantics (MLPerf's \
                 fork, the default, reads each file whole as bytes)."
                    .into(),
                "set format: hdf5 and semantics: upstream, or remove dataset.hdf5.label_read",
            ));
        }
        if self.dataset.hdf5.sieve_bytes > 0
            && (self.dataset.format != FormatKind::Hdf5
                || self.semantics != crate::Semantics::Upstream
                || !self.dataset.hdf5.chunk_dims.is_empty())
        {
            return Err(invalid(
                "dataset.hdf5.sieve_bytes",
                "models HDF5's sieve buffer for contiguous record datasets read sample by \
                 sample through dlio's HDF5 reader: it needs format hdf5, semantics: upstream \
                 (the fork reads each file whole as bytes) and no dataset.hdf5.chunk_dims \
                 (chunked datasets go through the chunk cache instead)."
                    .into(),
                "set format: hdf5 and semantics: upstream without chunk_dims, or remove \
                 dataset.hdf5.sieve_bytes",
            ));
        }
        if self.reader.spread_batches
            && (!self.reader.read_ahead
                || self.reader.read_threads == 0
                || self.sampler() == crate::Sampler::FileShards)
        {
            return Err(invalid(
                "reader.spread_batches",
                "spreads each batch over reader threads that read ahead; it needs \
                 reader.read_ahead True (without read-ahead every batch is spread already), \
                 read_threads of 1 or more, and an index sampler (not the tf.data TFRecord \
                 pipeline)."
                    .into(),
                "remove reader.spread_batches, or set reader.read_ahead: True and \
                 reader.read_threads: 1 or more",
            ));
        }
        if !self.reader.read_ahead && self.sampler() == crate::Sampler::FileShards {
            return Err(invalid(
                "reader.read_ahead",
                "reader.read_ahead is False, but TFRecord files read by the tensorflow loader go \
                 through the tf.data pipeline, which always reads ahead."
                    .into(),
                "keep reader.read_ahead True, or read with another data_loader (pytorch)",
            ));
        }
        if self.reader.sample_replacement && self.reader.sample_shuffle == crate::Shuffle::Off {
            return Err(invalid(
                "reader.sample_replacement",
                "draws samples at random, keyed by reader.sample_shuffle's seed, which is off."
                    .into(),
                "set reader.sample_shuffle to seed (the same draws in every run) or random",
            ));
        }
        if self.reader.sample_replacement && self.sampler() == crate::Sampler::FileShards {
            return Err(invalid(
                "reader.sample_replacement",
                "cannot draw a record twice from the tf.data TFRecord pipeline (format tfrecord \
                 with the tensorflow loader), which streams whole files."
                    .into(),
                "remove reader.sample_replacement, or read through data_loader_sampler: index",
            ));
        }
        let share = self.reader.fresh_read_share;
        if !(0.0..=1.0).contains(&share) {
            return Err(invalid(
                "reader.fresh_read_share",
                format!("is {share}; a share goes from 0 to 1."),
                "set ++workload.reader.fresh_read_share between 0 and 1",
            ));
        }
        if let Some(offset) = self.reader.buffer_page_offset {
            if offset >= 4096 {
                return Err(invalid(
                    "reader.buffer_page_offset",
                    format!(
                        "is {offset}; an offset past a 4 KiB page boundary goes from 0 to 4095."
                    ),
                    "set ++workload.reader.buffer_page_offset between 0 and 4095",
                ));
            }
            if self.reader.odirect {
                return Err(invalid(
                    "reader.buffer_page_offset",
                    format!(
                        "places each read {offset} bytes past a page boundary, which O_DIRECT \
                         (reader.odirect: True) refuses."
                    ),
                    "remove reader.buffer_page_offset, or set ++workload.reader.odirect=False",
                ));
            }
        }
        seconds_in_range(
            "reader.epoch_start_time",
            self.reader.epoch_start_time,
            "the seconds a loader takes to start",
        )?;
        // Keys of the evaluation pass that would do nothing without one.
        for (key, value) in [
            (
                "evaluation.steps_between_evals",
                self.evaluation.steps_between_evals,
            ),
            ("evaluation.steps_per_eval", self.evaluation.steps_per_eval),
        ] {
            if value > 0 && !self.workflow.evaluation {
                return Err(invalid(
                    key,
                    format!(
                        "is {value}, but workflow.evaluation is False: no evaluation pass runs."
                    ),
                    format!("set workflow.evaluation: True, or remove {key}"),
                ));
            }
        }
        let interval = self.reader.worker_start_interval;
        seconds_in_range(
            "reader.worker_start_interval",
            interval,
            "the seconds between two readers' starts",
        )?;
        if interval > 0.0 && self.sampler() == crate::Sampler::FileShards {
            return Err(invalid(
                "reader.worker_start_interval",
                "staggers reader threads, which the tf.data TFRecord pipeline (format \
                 tfrecord with the tensorflow loader) does not have."
                    .into(),
                "remove reader.worker_start_interval, or read through data_loader_sampler: index",
            ));
        }
        let delay = self.reader.request_delay;
        seconds_in_range(
            "reader.request_delay",
            delay,
            "the seconds from a take to the next request",
        )?;
        if delay > 0.0 {
            let without = if self.sampler() == crate::Sampler::FileShards {
                Some("the tf.data TFRecord pipeline (format tfrecord with the tensorflow loader)")
            } else if self.reader.read_threads == 0 {
                Some("read_threads: 0, which reads on the training loop's own thread")
            } else if !self.reader.read_ahead {
                Some("read_ahead: False, which reads each batch when the loop asks for it")
            } else if self.reader.spread_batches {
                Some("spread_batches: True, whose readers read the shares each step asks for")
            } else {
                None
            };
            if let Some(without) = without {
                return Err(invalid(
                    "reader.request_delay",
                    format!(
                        "delays the reader threads that read ahead, which {without} does not \
                         have."
                    ),
                    "remove reader.request_delay, or read ahead through reader threads \
                     (read_threads 1 or more, read_ahead: True)",
                ));
            }
        }
        let sizes = &self.reader.transfer_size_distribution;
        if !sizes.is_empty() && self.reader.transfer_size.is_some() {
            return Err(invalid(
                "reader.transfer_size_distribution",
                "reader.transfer_size_distribution and reader.transfer_size both set the \
                 request size."
                    .into(),
                "keep one: remove reader.transfer_size, or the distribution",
            ));
        }
        let direct = self.storage.io_engine == IoEngine::Direct || self.reader.odirect;
        let (one, several) = (
            &self.reader.sample_requests,
            &self.reader.sample_request_patterns,
        );
        if !one.is_empty() && !several.is_empty() {
            return Err(invalid(
                "reader.sample_request_patterns",
                "reader.sample_requests and reader.sample_request_patterns both set the \
                 requests of a sample read."
                    .into(),
                "keep one: a single pattern is reader.sample_requests, several are \
                 reader.sample_request_patterns",
            ));
        }
        let key = if one.is_empty() {
            "reader.sample_request_patterns"
        } else {
            "reader.sample_requests"
        };
        if !one.is_empty() || !several.is_empty() {
            if self.reader.transfer_size.is_some() || !sizes.is_empty() {
                return Err(invalid(
                    key,
                    format!(
                        "{key} sets every request of a sample read, so reader.transfer_size \
                         and reader.transfer_size_distribution cannot be set beside it."
                    ),
                    "keep one of the three",
                ));
            }
            if direct {
                return Err(invalid(
                    key,
                    format!(
                        "{key} replays a program's unaligned requests, which O_DIRECT refuses."
                    ),
                    "read without O_DIRECT (reader.odirect=False, storage.io_engine posix or io_uring)",
                ));
            }
        }
        // The two shapes that make every request of a read exclude the other request keys
        // (and the first excludes the second).
        let shapes = [
            (self.reader.transfer_size.is_some(), "reader.transfer_size"),
            (!sizes.is_empty(), "reader.transfer_size_distribution"),
            (!one.is_empty(), "reader.sample_requests"),
            (!several.is_empty(), "reader.sample_request_patterns"),
            (self.reader.read_buffer.is_some(), "reader.read_buffer"),
        ];
        let alone = |key: &str, others: &[(bool, &str)]| match others.iter().find(|(set, _)| *set) {
            Some((_, other)) => Err(invalid(
                key,
                format!("{key} makes every request of a read, so {other} cannot be set beside it."),
                format!("keep one: remove {other}, or {key}"),
            )),
            None => Ok(()),
        };
        if let Some(head) = self.reader.head_request_size {
            alone("reader.head_request_size", &shapes)?;
            if head == 0 {
                return Err(invalid(
                    "reader.head_request_size",
                    "is 0; the first request reads one byte or more.".into(),
                    "give the head's size, e.g. head_request_size: 4096",
                ));
            }
            if direct && !head.is_multiple_of(4096) {
                return Err(invalid(
                    "reader.head_request_size",
                    format!("is {head}, which O_DIRECT cannot read at an unaligned place."),
                    "read without O_DIRECT, or give a multiple of 4096",
                ));
            }
        }
        let work = self.reader.request_work_time;
        if work != 0.0 {
            seconds_in_range(
                "reader.request_work_time",
                work,
                "the seconds a reader works between two requests",
            )?;
            if !(shapes[0].0 || shapes[1].0) {
                return Err(invalid(
                    "reader.request_work_time",
                    format!(
                        "is {work}, but reads are not split into requests of their own sizes, so \
                         there are no requests to work between."
                    ),
                    "set reader.transfer_size or reader.transfer_size_distribution beside it, or \
                     remove reader.request_work_time",
                ));
            }
        }
        if let Some(buffer) = &self.reader.read_buffer {
            alone("reader.read_buffer", &shapes[..4])?;
            if buffer.size == 0 {
                return Err(invalid(
                    "reader.read_buffer.size",
                    "is 0; a buffer holds one byte or more.".into(),
                    "give the stream's buffer size, e.g. size: 4096",
                ));
            }
            if direct {
                return Err(invalid(
                    "reader.read_buffer",
                    "replays a buffered stream's unaligned requests, which O_DIRECT refuses."
                        .into(),
                    "read without O_DIRECT (reader.odirect=False, storage.io_engine posix or io_uring)",
                ));
            }
        }
        for (p, pattern) in several.iter().enumerate() {
            if !(pattern.weight.is_finite() && pattern.weight > 0.0) {
                return Err(invalid(
                    &format!("reader.sample_request_patterns[{p}].weight"),
                    format!("is {}; a weight is a positive number.", pattern.weight),
                    "give the pattern's share of the openings, e.g. weight: 96",
                ));
            }
            // No requests of its own and the rest read: the whole file in one request.
            if pattern.requests.is_empty() && !pattern.read_rest {
                return Err(invalid(
                    &format!("reader.sample_request_patterns[{p}].requests"),
                    "is empty and read_rest is False, so the pattern reads nothing.".into(),
                    "list the pattern's requests, e.g. requests: [{from: start, offset: 0, size: 4096}], or set read_rest: True (the whole file in one request)",
                ));
            }
        }
        let patterns = std::iter::once((key.to_string(), one))
            .filter(|(_, r)| !r.is_empty())
            .chain(several.iter().enumerate().map(|(p, pattern)| {
                (
                    format!("reader.sample_request_patterns[{p}].requests"),
                    &pattern.requests,
                )
            }));
        let seconds = |t: f64| t.is_finite() && (0.0..=MAX_SECONDS).contains(&t);
        for (key, requests) in patterns {
            for (i, r) in requests.iter().enumerate() {
                for (name, time) in [("work", r.work), ("wait", r.wait)] {
                    if !seconds(time) {
                        return Err(invalid(
                            &format!("{key}[{i}].{name}"),
                            format!("is {time}; a time is 0 or more seconds."),
                            format!("give the {name} in seconds, e.g. {name}: 0.00024"),
                        ));
                    }
                }
            }
            if let Some(i) = requests.iter().position(|r| r.size == 0) {
                return Err(invalid(
                    &format!("{key}[{i}]"),
                    format!("{key}[{i}].size is 0."),
                    "give every request a positive size",
                ));
            }
        }
        for (i, entry) in sizes.iter().enumerate() {
            let key = format!("reader.transfer_size_distribution[{i}]");
            if entry.size == 0 || !(entry.weight.is_finite() && entry.weight > 0.0) {
                return Err(invalid(
                    &key,
                    format!(
                        "{key} has size {} and weight {}; sizes must be positive and weights \
                         positive numbers.",
                        entry.size, entry.weight
                    ),
                    "write entries as {size: 4096, weight: 3}",
                ));
            }
            if direct && entry.size % 4096 != 0 {
                return Err(invalid(
                    &key,
                    format!(
                        "{key} has size {}, not a multiple of 4096, which O_DIRECT needs.",
                        entry.size
                    ),
                    "round the sizes up to multiples of 4096, or read without O_DIRECT",
                ));
            }
        }
        for (i, side) in self.dataset.side_files.iter().enumerate() {
            let key = format!("dataset.side_files[{i}]");
            if !inside_the_data_folder(&side.name) {
                return Err(invalid(
                    &key,
                    format!(
                        "{key}.name is `{}`; it must be a relative path inside the data folder.",
                        side.name
                    ),
                    "name it like meta/metadata.json",
                ));
            }
            if side.every_steps == 0 {
                return Err(invalid(
                    &key,
                    format!("{key}.every_steps is 0."),
                    "set every_steps to 1 (every step) or more",
                ));
            }
        }
        for (i, companion) in self.dataset.sample_companions.iter().enumerate() {
            let key = format!("dataset.sample_companions[{i}]");
            let in_a_split = std::path::Path::new(&companion.folder)
                .components()
                .next()
                .is_some_and(|c| c.as_os_str() == "train" || c.as_os_str() == "valid");
            if !inside_the_data_folder(&companion.folder) || in_a_split {
                return Err(invalid(
                    &key,
                    format!(
                        "{key}.folder is `{}`; it must be a relative path inside the data \
                         folder, outside the splits' own `train` and `valid`.",
                        companion.folder
                    ),
                    "name it like calib or labels",
                ));
            }
            if self.sampler() == crate::Sampler::FileShards {
                return Err(invalid(
                    &key,
                    format!(
                        "{key}: the tf.data pipeline of TFRecord files (file shards) streams \
                         records, not samples of their own, and reads no companions."
                    ),
                    "remove dataset.sample_companions, or read TFRecord with \
                     reader.data_loader_sampler: index",
                ));
            }
            if companion.size_bytes == 0 {
                return Err(invalid(
                    &key,
                    format!("{key}.size_bytes is 0."),
                    "set size_bytes to the bytes a companion holds (1 or more)",
                ));
            }
        }
        Ok(())
    }

    fn validate_storage(&self) -> Result<(), ConfigError> {
        let storage = &self.storage;
        let engine = storage.io_engine;
        if storage.io_depth == 0 || storage.io_depth > 4096 {
            return Err(invalid(
                "storage.io_depth",
                format!(
                    "storage.io_depth is {}; it must be between 1 and 4096.",
                    storage.io_depth
                ),
                "set ++workload.storage.io_depth=8 (requests in flight per reader thread)",
            ));
        }
        let rate = storage.read_bytes_per_second;
        if rate != 0 && rate < MIN_READ_BYTES_PER_SECOND {
            return Err(invalid(
                "storage.read_bytes_per_second",
                format!(
                    "storage.read_bytes_per_second is {rate}; a cap must be at least \
                     {MIN_READ_BYTES_PER_SECOND} (4 KiB/s), or 0 for none."
                ),
                "set ++workload.storage.read_bytes_per_second=0, or a rate such as 104857600",
            ));
        }
        if rate != 0 && self.reader.collective_io {
            return Err(invalid(
                "storage.read_bytes_per_second",
                "storage.read_bytes_per_second caps the engine's own reads, but with \
                 reader.collective_io MPI-IO reads the files."
                    .to_owned(),
                "set ++workload.storage.read_bytes_per_second=0, or reader.collective_io=False",
            ));
        }
        if engine.as_str() == "s3" {
            return Err(invalid(
                "storage.io_engine",
                "is s3, which storage.storage_type selects, not storage.io_engine.".into(),
                "set ++workload.storage.storage_type=s3 (with storage.storage_root the bucket) \
                 and leave storage.io_engine at posix",
            ));
        }
        if storage.storage_type == StorageType::S3 && engine != IoEngine::Posix {
            return Err(invalid(
                "storage.io_engine",
                format!(
                    "storage.io_engine is {} but storage.storage_type is s3, which has its own engine.",
                    engine.as_str()
                ),
                "remove storage.io_engine (or set it to posix) for S3",
            ));
        }
        // reader.odirect and reader.transfer_size are checked against the engine's O_DIRECT
        // use by the engine table (dlio_storage::engine_for), the one place that knows it.
        Ok(())
    }

    fn validate_plugins(&self, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
        let reader = &self.reader;
        let reads = (self.workflow.train || self.workflow.evaluation) && !self.checkpoint_only();
        match reader.data_loader {
            DataLoaderKind::None if reads => {
                return Err(invalid(
                    "reader.data_loader",
                    "is `none`, which loads nothing, but the workflow trains (DLIO raises \
                     'Data Loader none not supported' here)"
                        .into(),
                    "set ++workload.reader.data_loader=pytorch, tensorflow, dali, native_dali or \
                     synthetic, or run without training (workflow.train False)",
                ));
            }
            DataLoaderKind::Custom if reads && reader.data_loader_classname.is_none() => {
                return Err(invalid(
                    "reader.data_loader",
                    "is `custom`, which needs a plugin class in reader.data_loader_classname; \
                     none is given"
                        .into(),
                    "set ++workload.reader.data_loader=pytorch, tensorflow, dali, native_dali or \
                     synthetic",
                ));
            }
            _ => {}
        }
        if reader.data_loader_classname.is_some() && reader.data_loader_sampler.is_none() {
            return Err(invalid(
                "reader.data_loader_sampler",
                "a custom data loader (reader.data_loader_classname) needs a sampler.".into(),
                "set ++workload.reader.data_loader_sampler=iterative or =index",
            ));
        }
        // A framework's own loader class is not a DLIO plugin (not a BaseDataLoader): DLIO
        // finds no plugin in it and runs its built-in loader, which is what happens here.
        let stock = reader.data_loader_classname.as_deref().filter(|class| {
            matches!(
                *class,
                "torch.utils.data.DataLoader"
                    | "torch.utils.data.dataloader.DataLoader"
                    | "tf.data.Dataset"
                    | "tensorflow.data.Dataset"
            )
        });
        if let Some(class) = stock {
            warnings.push(format!(
                "reader.data_loader_classname `{class}` is the framework's own loader, not a \
                 DLIO data loader plugin; as DLIO does, the built-in {} loader of \
                 reader.data_loader is used",
                format!("{:?}", self.reader.data_loader).to_ascii_lowercase()
            ));
        }
        let plugins = [
            (
                "reader.data_loader_classname",
                if stock.is_some() {
                    &None
                } else {
                    &reader.data_loader_classname
                },
                "use a built-in loader: reader.data_loader = pytorch, tensorflow, dali, \
                 native_dali or synthetic",
            ),
            (
                "reader.reader_classname",
                &reader.reader_classname,
                "remove the key; the reader is chosen by dataset.format",
            ),
            (
                "checkpoint.checkpoint_mechanism_classname",
                &self.checkpoint.checkpoint_mechanism_classname,
                "remove the key; the checkpoint mechanism follows `framework` (pytorch: pt_save, \
                 tensorflow: tf_save)",
            ),
        ];
        for (key, class, fix) in plugins {
            if let Some(class) = class {
                return Err(invalid(
                    key,
                    format!(
                        "names the Python class `{class}`; DLIO plugins are Python classes \
                         imported at run time, and dlio (a native program) cannot load them."
                    ),
                    fix,
                ));
            }
        }
        Ok(())
    }

    fn validate_loader(&self, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
        // The data loader only runs in the training loop (evaluation runs inside it); a
        // generate-only or checkpoint-only workload never builds one, as in DLIO.
        if !self.workflow.train {
            return Ok(());
        }
        let loader = self.reader.data_loader;
        // Unlike DLIO, the pytorch loader reads tfrecord files: record by record, through the
        // DALI index files the generator writes.
        let mismatch = matches!(
            (self.framework, loader),
            (Framework::Tensorflow, DataLoaderKind::Pytorch)
                | (Framework::Pytorch, DataLoaderKind::Tensorflow)
        );
        let framework = match self.framework {
            Framework::Tensorflow => "tensorflow",
            Framework::Pytorch => "pytorch",
        };
        // MLPerf Storage's fork dropped the check (its example files set data_loader: pytorch
        // without a framework, which defaults to tensorflow); upstream DLIO 2.0 refuses.
        if mismatch && self.semantics == crate::vocab::Semantics::Mlperf {
            warnings.push(format!(
                "reader.data_loader {} with framework {framework}: upstream DLIO refuses the \
                 pair, MLPerf Storage's fork runs it; the {0} loader is used",
                if loader == DataLoaderKind::Pytorch {
                    "pytorch"
                } else {
                    "tensorflow"
                }
            ));
            return Ok(());
        }
        if mismatch {
            return Err(invalid(
                "reader.data_loader",
                format!(
                    "the {} data loader does not belong to framework {framework} (DLIO: \
                     \"Incompatible between framework and data_loader setup\").",
                    if loader == DataLoaderKind::Pytorch {
                        "pytorch"
                    } else {
                        "tensorflow"
                    }
                ),
                format!(
                    "set ++workload.reader.data_loader={framework} (or dali/native_dali), or \
                     change ++workload.framework"
                ),
            ));
        }
        Ok(())
    }

    fn validate_counts(&self) -> Result<(), ConfigError> {
        if self.reader.batch_size == 0 {
            return Err(invalid(
                "reader.batch_size",
                "is 0; a step needs at least one sample.".into(),
                "set ++workload.reader.batch_size to 1 or more",
            ));
        }
        if self.reader.batch_size_eval == 0 {
            return Err(invalid(
                "reader.batch_size_eval",
                "is 0; an evaluation step needs at least one sample.".into(),
                "set ++workload.reader.batch_size_eval to 1 or more",
            ));
        }
        if self.train.epochs == 0 {
            return Err(invalid(
                "train.epochs",
                "is 0; a run has at least one epoch.".into(),
                "set ++workload.train.epochs to 1 or more (or ++workload.workflow.train=False to \
                 skip training)",
            ));
        }
        if self.dataset.num_samples_per_file > u64::from(u32::MAX) {
            return Err(invalid(
                "dataset.num_samples_per_file",
                format!(
                    "is {}; a file holds at most {} samples.",
                    self.dataset.num_samples_per_file,
                    u32::MAX
                ),
                "spread the samples over more files (dataset.num_files_train)",
            ));
        }
        if self.dataset.num_samples_per_file == 0 {
            return Err(invalid(
                "dataset.num_samples_per_file",
                "is 0; every file holds at least one sample.".into(),
                "set ++workload.dataset.num_samples_per_file to 1 or more",
            ));
        }
        let sentinels = [
            (
                "train.total_training_steps",
                self.train.total_training_steps,
            ),
            (
                "checkpoint.steps_between_checkpoints",
                self.checkpoint.steps_between_checkpoints,
            ),
            (
                "checkpoint.num_checkpoints_write",
                self.checkpoint.num_checkpoints_write,
            ),
            (
                "checkpoint.num_checkpoints_read",
                self.checkpoint.num_checkpoints_read,
            ),
            ("model.parallelism.data", self.model.parallelism.data),
            ("model.num_layers", self.model.num_layers),
        ];
        for (key, value) in sentinels {
            if value < -1 {
                return Err(invalid(
                    key,
                    format!("is {value}; a count cannot be negative (-1 means \"not set\")."),
                    format!("set ++workload.{key} to -1 or to a count"),
                ));
            }
        }
        let lengths = [
            (
                "dataset.record_length_bytes",
                self.dataset.record_length_bytes,
            ),
            (
                "dataset.record_length_bytes_stdev",
                self.dataset.record_length_bytes_stdev,
            ),
            (
                "dataset.record_length_bytes_resize",
                self.dataset.record_length_bytes_resize,
            ),
            (
                "dataset.record_length_bytes_eval",
                self.dataset.record_length_bytes_eval,
            ),
        ];
        for (key, value) in lengths {
            if value.is_nan() || value < 0.0 || value.is_infinite() {
                return Err(invalid(
                    key,
                    format!("is {value}; a size in bytes cannot be negative."),
                    format!("set ++workload.{key} to 0 or more"),
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.metric.au) {
            return Err(invalid(
                "metric.au",
                format!(
                    "is {}; it is a fraction between 0 and 1 (0.90 means 90%).",
                    self.metric.au
                ),
                format!(
                    "set ++workload.metric.au={}",
                    if self.metric.au > 1.0 && self.metric.au <= 100.0 {
                        format!("{}", self.metric.au / 100.0)
                    } else {
                        "0.90".to_string()
                    }
                ),
            ));
        }
        Ok(())
    }

    fn validate_dataset(&self) -> Result<(), ConfigError> {
        let d = &self.dataset;
        // The prefix starts every file name: a separator or `..` would put files outside the
        // data folder (`../../evil`), where listing never finds them and cleanup never goes.
        if d.file_prefix.contains(['/', '\\', '\0']) || d.file_prefix == ".." {
            return Err(invalid(
                "dataset.file_prefix",
                format!(
                    "is `{}`; it begins each file's name, so it cannot hold a path separator or \
                     be `..` (files would land outside dataset.data_folder).",
                    d.file_prefix
                ),
                "set ++workload.dataset.file_prefix to a plain name (img, sample), and choose \
                 the folder with dataset.data_folder",
            ));
        }
        self.validate_sample_shape()?;
        if d.parquet_row_group_size == 0 {
            return Err(invalid(
                "dataset.parquet_row_group_size",
                "is 0; a row group holds at least one row.".into(),
                "set ++workload.dataset.parquet_row_group_size to 1 or more (pyarrow's \
                 DLIO default is 1024)",
            ));
        }
        if d.compression == Compression::Gzip && d.compression_level > 9 {
            return Err(invalid(
                "dataset.compression_level",
                format!("is {}; gzip levels go from 0 to 9.", d.compression_level),
                "set ++workload.dataset.compression_level between 0 and 9",
            ));
        }
        if matches!(
            d.compression,
            Compression::Snappy | Compression::Zstd | Compression::Lz4
        ) && d.format != FormatKind::Parquet
        {
            return Err(invalid(
                "dataset.compression",
                format!(
                    "is {:?}, a parquet codec, but the format is {}.",
                    d.compression,
                    d.format.name()
                ),
                "set ++workload.dataset.compression=none (or gzip, zip for csv and npz)",
            ));
        }
        self.validate_parquet()?;
        self.validate_listing_and_generation()?;
        if let Some(library) = self.storage_library() {
            check_storage_library(library)?;
        }
        Ok(())
    }

    /// A sample's shape: hdf5's datasets per record divide it, it fits in memory, and an
    /// explicit shape has no size spread.
    fn validate_sample_shape(&self) -> Result<(), ConfigError> {
        let d = &self.dataset;
        if d.hdf5.num_dset_per_record == 0 {
            return Err(invalid(
                "dataset.hdf5.num_dset_per_record",
                "is 0; a record is stored in at least one dataset.".into(),
                "set ++workload.dataset.hdf5.num_dset_per_record to 1 or more",
            ));
        }
        if let Some(&first) = d.record_dims.first()
            && first % d.hdf5.num_dset_per_record != 0
        {
            return Err(invalid(
                "dataset.hdf5.num_dset_per_record",
                format!(
                    "is {}, which does not divide record_dims[0] = {first} (each dataset holds \
                     an equal slice of the record).",
                    d.hdf5.num_dset_per_record
                ),
                "choose a num_dset_per_record that divides the first record dimension",
            ));
        }
        // Both files and memory hold whole samples: bound one sample at 2^48 bytes (256 TiB),
        // far past any real sample and far inside every size computation.
        let r = &self.reader;
        let too_large = [
            (
                "dataset.record_dims",
                !fits_a_sample(&d.record_dims, d.record_element_type.size()),
            ),
            (
                "dataset.record_length_bytes",
                d.record_length_bytes > MAX_SAMPLE_BYTES as f64,
            ),
            (
                "dataset.record_length_bytes_resize",
                d.record_length_bytes_resize > MAX_SAMPLE_BYTES as f64,
            ),
            (
                "dataset.record_length_bytes_eval",
                d.record_length_bytes_eval > MAX_SAMPLE_BYTES as f64,
            ),
            (
                "reader.transformed_record_dims",
                !fits_a_sample(
                    &r.transformed_record_dims,
                    r.transformed_record_element_type.size(),
                ),
            ),
        ];
        if let Some((key, _)) = too_large.iter().find(|(_, bad)| *bad) {
            return Err(invalid(
                key,
                format!(
                    "makes a sample larger than {MAX_SAMPLE_BYTES} bytes (256 TiB), which no \
                     file or memory holds."
                ),
                format!("give {key} a sample size below 2^48 bytes"),
            ));
        }
        if d.header_read_bytes > 0
            && !matches!(
                d.format,
                FormatKind::IndexedBinary | FormatKind::MmapIndexedBinary
            )
        {
            return Err(invalid(
                "dataset.header_read_bytes",
                format!(
                    "is {}, but {} files are opened by their own format's reads, which a header \
                     read before the samples would add to.",
                    d.header_read_bytes,
                    d.format.name()
                ),
                "use format indexed_binary (or mmap_indexed_binary), or remove the key",
            ));
        }
        let sizes = &d.record_length_bytes_distribution;
        if d.record_length_bytes_per == crate::SizesPer::Sample {
            if sizes.is_empty() {
                return Err(invalid(
                    "dataset.record_length_bytes_per",
                    "is sample, but dataset.record_length_bytes_distribution gives no sizes."
                        .into(),
                    "give the distribution, or set record_length_bytes_per to file",
                ));
            }
            if !matches!(
                d.format,
                FormatKind::IndexedBinary | FormatKind::MmapIndexedBinary
            ) {
                return Err(invalid(
                    "dataset.record_length_bytes_per",
                    format!(
                        "is sample, but {} files hold every sample of a file at one size.",
                        d.format.name()
                    ),
                    "use format indexed_binary (or mmap_indexed_binary), or size per file",
                ));
            }
        }
        if !sizes.is_empty() {
            if d.record_length_bytes_stdev > 0.0 || !d.record_dims.is_empty() {
                return Err(invalid(
                    "dataset.record_length_bytes_distribution",
                    "and dataset.record_length_bytes_stdev or dataset.record_dims are both set; \
                     the distribution gives every file its size."
                        .into(),
                    "keep the distribution, or the stdev (and record_dims) without it",
                ));
            }
            if let Some(i) = sizes
                .iter()
                .position(|e| e.size == 0 || !(e.weight.is_finite() && e.weight > 0.0))
            {
                let key = format!("dataset.record_length_bytes_distribution[{i}]");
                return Err(invalid(
                    &key,
                    format!(
                        "{key} has size {} and weight {}; sizes must be positive and weights \
                         positive numbers.",
                        sizes[i].size, sizes[i].weight
                    ),
                    "write entries as {size: 65536, weight: 3}",
                ));
            }
        }
        if !d.record_dims.is_empty() && d.record_length_bytes_stdev > 0.0 {
            return Err(invalid(
                "dataset.record_dims",
                "and dataset.record_length_bytes_stdev are both set; an explicit shape cannot \
                 vary in size."
                    .into(),
                "remove record_dims, or set record_length_bytes_stdev to 0",
            ));
        }
        Ok(())
    }

    /// Listing, generation and the settle after it: the fork's keys for large data sets.
    fn validate_listing_and_generation(&self) -> Result<(), ConfigError> {
        let d = &self.dataset;
        if d.skip_listing && d.listing_validation_interval == 0 {
            return Err(invalid(
                "dataset.listing_validation_interval",
                "is 0; with dataset.skip_listing every n-th computed file is checked, n >= 1."
                    .into(),
                "set ++workload.dataset.listing_validation_interval=1000 (the fork's default)",
            ));
        }
        for (key, list) in [
            ("dataset.file_list_train", &d.file_list_train),
            ("dataset.file_list_eval", &d.file_list_eval),
        ] {
            match list.as_deref().map(str::trim) {
                Some("") => {
                    return Err(invalid(
                        key,
                        "is empty; it names a file that lists the data set's files, one per line."
                            .into(),
                        "set it to the manifest's path, or remove the key",
                    ));
                }
                Some(_) if d.skip_listing => {
                    return Err(invalid(
                        key,
                        "is set with dataset.skip_listing; the names come either from the \
                         manifest or from generation's pattern, not both."
                            .into(),
                        "remove one of dataset.skip_listing and the file list",
                    ));
                }
                _ => {}
            }
        }
        if d.num_files_generated > 0 && d.num_files_generated < d.num_files_train {
            return Err(invalid(
                "dataset.num_files_generated",
                format!(
                    "is {}, fewer than the {} files dataset.num_files_train asks to read; a run \
                     reads files 0 .. num_files_train of those generated.",
                    d.num_files_generated, d.num_files_train
                ),
                "generate more files, or lower ++workload.dataset.num_files_train to at most \
                 num_files_generated",
            ));
        }
        if d.listing_threads == 0 {
            return Err(invalid(
                "dataset.listing_threads",
                "is 0; at least one thread lists the data set.".into(),
                "set ++workload.dataset.listing_threads=4 (the fork's default)",
            ));
        }
        if self.reader.write_threads == 0 {
            return Err(invalid(
                "reader.write_threads",
                "is 0; at least one thread writes the data set (1 sizes them from the \
                 machine)."
                    .into(),
                "set ++workload.reader.write_threads=1 (the fork's default)",
            ));
        }
        if let Some(method) = &d.data_gen_method
            && !matches!(
                method.to_ascii_lowercase().as_str(),
                "dgen" | "numpy" | "auto"
            )
        {
            return Err(invalid(
                "dataset.data_gen_method",
                format!("is `{method}`; the fork knows dgen, numpy and auto."),
                "set ++workload.dataset.data_gen_method=dgen, or remove it",
            ));
        }
        let settle = self.storage.post_generation_settle_seconds;
        if !(0.0..=86_400.0).contains(&settle) {
            return Err(invalid(
                "storage.post_generation_settle_seconds",
                format!("is {settle}; give seconds between 0 and 86400."),
                "set ++workload.storage.post_generation_settle_seconds=0",
            ));
        }
        Ok(())
    }

    /// The object-store client the workload names (`storage.storage_options.storage_library`,
    /// where the loader puts `storage.storage_library` and `DLIO_STORAGE_LIBRARY` too).
    pub fn storage_library(&self) -> Option<&str> {
        self.storage
            .storage_options
            .as_ref()
            .and_then(|o| o.storage_library.as_deref())
            .or(self.storage.storage_library.as_deref())
    }

    /// Whether TFRecord data CRCs are checked: `reader.tfrecord_check_crc`, else only under
    /// upstream's semantics (TensorFlow's record reader checks them; the fork's readers are
    /// measured without).
    pub fn tfrecord_check_crc(&self) -> bool {
        self.reader
            .tfrecord_check_crc
            .unwrap_or(self.semantics.decodes())
    }

    /// Whether reads are shaped into requests (`reader.transfer_size`, its distribution or
    /// `reader.sample_requests`), which only foreground reads do.
    pub fn shapes_requests(&self) -> bool {
        let r = &self.reader;
        r.transfer_size.is_some()
            || !r.transfer_size_distribution.is_empty()
            || !r.sample_requests.is_empty()
            || !r.sample_request_patterns.is_empty()
            || r.read_buffer.is_some()
            || r.head_request_size.is_some()
    }

    /// The request patterns of whole-file sample reads: `reader.sample_request_patterns`, or
    /// `reader.sample_requests` as one pattern that reads the rest. Empty: none.
    pub fn sample_request_patterns(&self) -> Vec<crate::SampleRequestPattern> {
        let r = &self.reader;
        if r.sample_requests.is_empty() {
            r.sample_request_patterns.clone()
        } else {
            vec![crate::SampleRequestPattern {
                requests: r.sample_requests.clone(),
                ..crate::SampleRequestPattern::default()
            }]
        }
    }

    /// Whole-object reads a reader thread keeps in flight. On object storage, as the fork's
    /// client does: s3dlio (and no library) a sliding window of
    /// `storage_options.prefetch_window` (64), minio up to 16 at a time (its thread pool) out
    /// of chunks of `prefetch_window` (256), s3torchconnector one at a time. With the
    /// `io_uring` engine on local files, `storage.io_depth`: its requests stay in flight
    /// across sample boundaries, not only within one sample. 0 otherwise (local files are
    /// read in the foreground, as the fork's map-style readers do).
    pub fn object_read_window(&self) -> u32 {
        if self.storage.storage_type != StorageType::S3 {
            return if self.storage.io_engine == IoEngine::IoUring {
                self.storage.io_depth.max(1)
            } else {
                0
            };
        }
        let window = self
            .storage
            .storage_options
            .as_ref()
            .and_then(|o| o.prefetch_window);
        match self.storage_library() {
            Some("minio") => window.unwrap_or(256).clamp(1, 16),
            Some("s3torchconnector") => 1,
            _ => window.unwrap_or(64).max(1),
        }
    }

    /// Whether reader threads stagger their first reads (`storage_options.stagger_workers`):
    /// by default on object storage through minio or s3torchconnector (the fork's chunked
    /// readers), off otherwise (its s3dlio reader does not stagger).
    pub fn stagger_workers(&self) -> bool {
        let set = self
            .storage
            .storage_options
            .as_ref()
            .and_then(|o| o.stagger_workers);
        set.unwrap_or_else(|| {
            self.storage.storage_type == StorageType::S3
                && matches!(self.storage_library(), Some("minio" | "s3torchconnector"))
        })
    }

    fn validate_parquet(&self) -> Result<(), ConfigError> {
        let p = &self.dataset.parquet;
        if p.row_group_size == Some(0) {
            return Err(invalid(
                "dataset.parquet.row_group_size",
                "is 0; a row group holds at least one row.".into(),
                "set ++workload.dataset.parquet.row_group_size to 1 or more",
            ));
        }
        if let Some(column) = &p.partition_by {
            return Err(invalid(
                "dataset.parquet.partition_by",
                format!(
                    "is `{column}`; partitioned (hive-style) parquet data sets are not \
                     supported by this version of dlio."
                ),
                "remove dataset.parquet.partition_by",
            ));
        }
        check_columns("dataset.parquet.columns", &p.columns)
    }

    fn validate_model(&self, world: u32) -> Result<(), ConfigError> {
        let p = &self.model.parallelism;
        for (key, value) in [
            ("model.parallelism.tensor", p.tensor),
            ("model.parallelism.pipeline", p.pipeline),
        ] {
            if value == 0 {
                return Err(invalid(
                    key,
                    "is 0; the smallest parallelism degree is 1.".into(),
                    format!("set ++workload.{key}=1"),
                ));
            }
        }
        if p.zero_stage > 3 {
            return Err(invalid(
                "model.parallelism.zero_stage",
                format!("is {}; ZeRO stages are 0, 1, 2 and 3.", p.zero_stage),
                "set ++workload.model.parallelism.zero_stage to 0..3",
            ));
        }
        let num_layers = self.model.num_layers;
        // A checkpoint writes (and plans) a file per layer per rank: bound the count well past
        // any model (the largest have a few hundred layers) and well inside memory.
        const MAX_LAYERS: i64 = 1 << 16;
        if num_layers > MAX_LAYERS {
            return Err(invalid(
                "model.num_layers",
                format!(
                    "is {num_layers}; a checkpoint plans and writes files per layer, and at most \
                     {MAX_LAYERS} layers are supported."
                ),
                format!("set ++workload.model.num_layers to at most {MAX_LAYERS}"),
            ));
        }
        if num_layers > 0 && num_layers < i64::from(p.pipeline) {
            return Err(invalid(
                "model.num_layers",
                format!(
                    "is {num_layers}, fewer than model.parallelism.pipeline ({}): every \
                     pipeline stage needs at least one layer.",
                    p.pipeline
                ),
                "raise num_layers or lower the pipeline parallelism",
            ));
        }
        if p.pipeline > 1 && p.zero_stage == 3 {
            return Err(invalid(
                "model.parallelism.zero_stage",
                format!(
                    "ZeRO stage 3 is not compatible with pipeline parallelism (pipeline = {}).",
                    p.pipeline
                ),
                "set ++workload.model.parallelism.pipeline=1 or a zero_stage below 3",
            ));
        }
        // Data parallelism (world / TP·PP, or parallelism.data in subset mode) only shapes
        // the checkpoint; DLIO checks it even when no checkpoint is written, we do not.
        if !self.workflow.checkpoint {
            return Ok(());
        }
        let model_parallel = u64::from(p.tensor) * u64::from(p.pipeline);
        match self.checkpoint.mode {
            CheckpointMode::Default => {
                if p.data > 0 {
                    return Err(invalid(
                        "model.parallelism.data",
                        format!(
                            "is {} but checkpoint.mode is default, where data parallelism is \
                             derived from the number of ranks.",
                            p.data
                        ),
                        "remove model.parallelism.data, or set ++workload.checkpoint.mode=subset \
                         to emulate a slice of a bigger job",
                    ));
                }
                if u64::from(world) % model_parallel != 0 {
                    return Err(invalid(
                        "model.parallelism",
                        format!(
                            "the run has {world} rank(s), which is not a multiple of the model \
                             parallelism tensor×pipeline = {}×{} = {model_parallel}.",
                            p.tensor, p.pipeline
                        ),
                        format!(
                            "run on a multiple of {model_parallel} ranks, or emulate a slice of \
                             the job with ++workload.checkpoint.mode=subset \
                             ++workload.model.parallelism.data=N"
                        ),
                    ));
                }
            }
            CheckpointMode::Subset => {
                if p.data <= 0 {
                    return Err(invalid(
                        "model.parallelism.data",
                        "is not set, but checkpoint.mode subset needs the target data \
                         parallelism."
                            .into(),
                        "set ++workload.model.parallelism.data=N (the data parallelism of the \
                         full job)",
                    ));
                }
                let full = u64::try_from(p.data).unwrap_or(0) * model_parallel;
                if u64::from(world) > full {
                    return Err(invalid(
                        "model.parallelism.data",
                        format!(
                            "gives a job of data×tensor×pipeline = {}×{}×{} = {full} ranks, \
                             fewer than the {world} ranks running.",
                            p.data, p.tensor, p.pipeline
                        ),
                        "raise model.parallelism.data or run on fewer ranks",
                    ));
                }
            }
        }
        Ok(())
    }

    fn validate_checkpoint(&self) -> Result<(), ConfigError> {
        let c = &self.checkpoint;
        // Checkpoints go through the run's storage: in an S3 run, a `file://` (or other
        // non-S3) folder would name no object (hybrid_storage.yaml of the v3 examples).
        let scheme = c.checkpoint_folder.split_once("://").map(|(s, _)| s);
        if self.workflow.checkpoint
            && self.storage.storage_type == StorageType::S3
            && scheme.is_some_and(|s| s != "s3")
        {
            return Err(invalid(
                "checkpoint.checkpoint_folder",
                format!(
                    "is `{}`, but checkpoints are written through the run's storage, S3 bucket \
                     `{}`; a run cannot keep its data in S3 and its checkpoints on a local \
                     file system.",
                    c.checkpoint_folder, self.storage.storage_root
                ),
                "set ++workload.checkpoint.checkpoint_folder=s3://BUCKET/PREFIX (or a key in the \
                 bucket), or checkpoint to local storage in a separate run with \
                 storage_type local_fs",
            ));
        }
        if c.num_checkpoints_write > 0 && c.num_checkpoints_read > c.num_checkpoints_write {
            return Err(invalid(
                "checkpoint.num_checkpoints_read",
                format!(
                    "is {}, more than the {} checkpoints written.",
                    c.num_checkpoints_read, c.num_checkpoints_write
                ),
                "read at most checkpoint.num_checkpoints_write checkpoints",
            ));
        }
        if c.ksm.is_some() && c.randomize_tensor {
            return Err(invalid(
                "checkpoint.ksm",
                "is set, which requires checkpoint.randomize_tensor to be False (random tensors \
                 cannot be merged)."
                    .into(),
                "add ++workload.checkpoint.randomize_tensor=False, or remove checkpoint.ksm",
            ));
        }
        Ok(())
    }

    fn validate_times(&self) -> Result<(), ConfigError> {
        let times = [
            ("train.computation_time", &self.train.computation_time),
            ("evaluation.eval_time", &self.evaluation.eval_time),
            ("reader.preprocess_time", &self.reader.preprocess_time),
            ("reader.batch_time", &self.reader.batch_time),
            ("reader.open_time", &self.reader.open_time),
        ];
        if self.sampler() == crate::Sampler::FileShards
            && self.reader.open_time != TimeDistribution::default()
        {
            return Err(invalid(
                "reader.open_time",
                "is not spent by the tf.data TFRecord pipeline (format tfrecord with the \
                 tensorflow loader), whose files are opened by its stream, not by a reader \
                 thread."
                    .into(),
                "remove reader.open_time, or read through data_loader_sampler: index",
            ));
        }
        if self.sampler() == crate::Sampler::FileShards
            && self.reader.batch_time != TimeDistribution::default()
        {
            return Err(invalid(
                "reader.batch_time",
                "is not spent by the tf.data TFRecord pipeline (format tfrecord with the \
                 tensorflow loader), whose batches are parsed from a stream, not read by a \
                 reader thread."
                    .into(),
                "remove reader.batch_time, or read through data_loader_sampler: index",
            ));
        }
        for (key, dist) in times {
            let bad = match *dist {
                TimeDistribution::Normal { stdev, .. } if stdev < 0.0 => Some("stdev"),
                TimeDistribution::Gamma { shape, .. } if shape < 0.0 => Some("shape"),
                TimeDistribution::Gamma { scale, .. } | TimeDistribution::Exponential { scale }
                    if scale < 0.0 =>
                {
                    Some("scale")
                }
                TimeDistribution::Poisson { lam } if lam < 0.0 => Some("lam"),
                TimeDistribution::Quantiles { ref values }
                | TimeDistribution::Empirical { ref values }
                    if values.iter().any(|&v| v < 0.0) =>
                {
                    Some("values")
                }
                _ => None,
            };
            if let Some(param) = bad {
                return Err(invalid(
                    key,
                    format!("has a negative `{param}`, which the distribution does not allow."),
                    format!("set {key}.{param} to 0 or more"),
                ));
            }
            for (param, value) in dist.parameters() {
                // A gamma shape is a count, bounded through the mean below.
                if !value.is_finite() || (param != "shape" && value.abs() > MAX_SECONDS) {
                    return Err(invalid(
                        &format!("{key}.{param}"),
                        format!(
                            "is {value:e}; a time in seconds must be a number within \
                             {MAX_SECONDS:e} (about 31 years)."
                        ),
                        format!("set {key} in seconds, at most {MAX_SECONDS:e}"),
                    ));
                }
            }
            let mean = dist.mean();
            if !mean.is_finite() || mean.abs() > MAX_SECONDS {
                return Err(invalid(
                    key,
                    format!(
                        "has a mean of {mean:e} s; a time must average at most {MAX_SECONDS:e} s \
                         (about 31 years)."
                    ),
                    format!("lower the parameters of {key}"),
                ));
            }
        }
        let single = [
            (
                "checkpoint.time_between_checkpoints",
                self.checkpoint.time_between_checkpoints,
            ),
            (
                "storage.post_generation_settle_seconds",
                self.storage.post_generation_settle_seconds,
            ),
        ];
        for (key, value) in single {
            if !value.is_finite() || value.abs() > MAX_SECONDS {
                return Err(invalid(
                    key,
                    format!(
                        "is {value:e}; a time in seconds must be a number within {MAX_SECONDS:e} \
                         (about 31 years)."
                    ),
                    format!("set ++workload.{key} in seconds, at most {MAX_SECONDS:e}"),
                ));
            }
        }
        Ok(())
    }
}

/// The largest sample, in bytes, a config may describe.
const MAX_SAMPLE_BYTES: u64 = 1 << 48;

/// The smallest non-zero `storage.read_bytes_per_second`: below it one 4 KiB read would wait
/// more than a second, and a run could not be stopped promptly.
const MIN_READ_BYTES_PER_SECOND: u64 = 4096;

/// The checks of a column schema (`dataset.parquet.columns`, `dataset.arrow.columns`, named by
/// `key`): names unique, dtypes known, sizes of one or more, at least one column read.
pub fn check_columns(key: &str, columns: &[crate::ParquetColumn]) -> Result<(), ConfigError> {
    let mut names = std::collections::HashSet::new();
    for (i, c) in columns.iter().enumerate() {
        let key = format!("{key}[{i}]");
        if !names.insert(c.name.as_str()) {
            return Err(invalid(
                &key,
                format!("repeats the column name `{}`.", c.name),
                "give every column its own name",
            ));
        }
        if !PARQUET_DTYPES.contains(&c.dtype.as_str()) {
            return Err(invalid(
                &format!("{key}.dtype"),
                format!("is `{}`.", c.dtype),
                format!("use one of {}", PARQUET_DTYPES.join(", ")),
            ));
        }
        if c.size == 0 {
            return Err(invalid(
                &format!("{key}.size"),
                "is 0; a column holds at least one element per row.".into(),
                "set size to 1 or more",
            ));
        }
    }
    if !columns.is_empty() && !columns.iter().any(|c| c.read) {
        return Err(invalid(
            key,
            "has `read: false` on every column, so a sample read would read nothing.".into(),
            "mark at least one column `read: true`",
        ));
    }
    Ok(())
}

/// True when `dims` of `element_size`-byte elements make at most [`MAX_SAMPLE_BYTES`].
fn fits_a_sample(dims: &[u64], element_size: usize) -> bool {
    dims.iter()
        .try_fold(element_size as u64, |bytes, &dim| bytes.checked_mul(dim))
        .is_some_and(|bytes| bytes <= MAX_SAMPLE_BYTES)
}

/// The element types of `dataset.parquet.columns[].dtype` (those of the fork's generator).
pub const PARQUET_DTYPES: &[&str] = &[
    "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32",
    "float64", "list", "string", "binary", "bool",
];

/// The object-store client libraries MLPerf Storage's fork accepts; every one is an S3 API
/// client, and dlio's S3 engine serves them all.
pub const STORAGE_LIBRARIES: &[&str] = &["s3dlio", "minio", "s3torchconnector"];

fn check_storage_library(library: &str) -> Result<(), ConfigError> {
    if STORAGE_LIBRARIES.contains(&library) {
        return Ok(());
    }
    Err(invalid(
        "storage.storage_options.storage_library",
        format!("is `{library}`, which is not an object-store client MLPerf Storage knows."),
        format!(
            "set ++workload.storage.storage_library to one of {} (for dlio they all mean its \
             own S3 engine)",
            STORAGE_LIBRARIES.join(", ")
        ),
    ))
}

/// A time `key` of `seconds` from 0 to [`MAX_SECONDS`], or the error that says what it is for.
fn seconds_in_range(key: &str, seconds: f64, what: &str) -> Result<(), ConfigError> {
    if (0.0..=MAX_SECONDS).contains(&seconds) {
        return Ok(());
    }
    Err(invalid(
        key,
        format!("is {seconds}; a time in seconds goes from 0 to {MAX_SECONDS:e}."),
        format!("set ++workload.{key} to {what}, or 0"),
    ))
}

/// Whether `name` is a relative path that stays inside the folder it is joined to (no root,
/// no `..`, not empty).
fn inside_the_data_folder(name: &str) -> bool {
    let path = std::path::Path::new(name);
    !name.is_empty()
        && !path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}
