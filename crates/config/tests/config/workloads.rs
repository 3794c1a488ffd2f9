//! DLIO's 24 shipped workloads load unmodified and resolve to the values of
//! dlio-semantics.md §8, from the spec's copies and from the built-in ones.

use dlio_config::{
    BUILTIN_SOURCE, CheckpointMode, Config, DataLoaderKind, FormatKind, Framework, Sampler,
    Shuffle, StorageType, TimeDistribution, WorkloadOrigin, builtin_workloads,
};

use crate::{assert_contains, builtin, load_words, spec_workloads_dir};

fn spec_file_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(spec_workloads_dir())
        .expect("the spec's workload directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

fn constant(value: f64) -> TimeDistribution {
    TimeDistribution::Constant { value }
}

#[test]
fn every_spec_workload_loads_unmodified_and_equals_its_builtin_copy() {
    let names = spec_file_names();
    assert_eq!(names.len(), 24);
    for file in &names {
        let path = spec_workloads_dir().join(file);
        let from_spec = load_words(&[&format!("workload={}", path.display())])
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(from_spec.source, path.display().to_string());
        let name = file.trim_end_matches(".yaml");
        // DLIO's own file, as `--semantics upstream` resolves a name MLPerf Storage v3 shares.
        let from_builtin = dlio_config::load(&dlio_config::LoadArgs {
            positional: vec![format!("workload={name}")],
            semantics: Some(dlio_config::Semantics::Upstream),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut from_spec = from_spec;
        from_spec.config.semantics = dlio_config::Semantics::Upstream;
        assert_eq!(from_builtin.source, BUILTIN_SOURCE);
        assert_eq!(from_builtin.workload, name);
        assert_eq!(
            from_spec.config, from_builtin.config,
            "{name}: built-in copy differs"
        );
        assert_eq!(
            from_spec.warnings.len(),
            from_builtin.warnings.len(),
            "{name}"
        );
    }
}

#[test]
fn builtin_copies_are_the_spec_files_plus_one_provenance_line() {
    let names = spec_file_names();
    let builtins: Vec<&str> = builtin_workloads()
        .filter(|w| w.origin == WorkloadOrigin::Dlio)
        .map(|w| w.name)
        .collect();
    let expected: Vec<&str> = names.iter().map(|n| n.trim_end_matches(".yaml")).collect();
    assert_eq!(builtins, expected);
    for w in builtin_workloads().filter(|w| w.origin == WorkloadOrigin::Dlio) {
        let spec = std::fs::read_to_string(spec_workloads_dir().join(format!("{}.yaml", w.name)))
            .expect("spec file");
        let (first, rest) = w.yaml.split_once('\n').expect("provenance line");
        assert!(first.starts_with("# DLIO workload"), "{}: {first}", w.name);
        assert_eq!(rest, spec, "{}", w.name);
    }
}

#[test]
fn unet3d_a100_resolves_to_the_published_parameters() {
    let loaded = builtin("unet3d_a100", &[]);
    let c = &loaded.config;
    assert_eq!(c.framework, Framework::Pytorch);
    assert_eq!(c.reader.data_loader, DataLoaderKind::Pytorch);
    assert_eq!(c.reader.sampler(), Sampler::Index);
    assert_eq!(c.dataset.format, FormatKind::Npz);
    assert_eq!(c.dataset.data_folder, "data/unet3d");
    assert_eq!(c.dataset.num_files_train, 168);
    assert_eq!(c.dataset.num_samples_per_file, 1);
    assert_eq!(c.dataset.record_length_bytes, 146600628.0);
    assert_eq!(c.dataset.record_length_bytes_stdev, 68341808.0);
    assert_eq!(c.dataset.record_length_bytes_resize, 2097152.0);
    assert_eq!(c.reader.batch_size, 7);
    assert_eq!(c.reader.read_threads, 4);
    assert_eq!(c.reader.file_shuffle, Shuffle::Seed);
    assert_eq!(c.reader.sample_shuffle, Shuffle::Seed);
    assert_eq!(c.train.epochs, 5);
    assert_eq!(c.train.computation_time, constant(0.636));
    assert!(c.workflow.checkpoint);
    assert_eq!(c.checkpoint.checkpoint_folder, "checkpoints/unet3d");
    assert_eq!(c.checkpoint.checkpoint_after_epoch, 5);
    assert_eq!(c.checkpoint.epochs_between_checkpoints, 2);
    assert_eq!(c.model.name, "unet3d");
    assert_eq!(c.model.r#type.as_deref(), Some("cnn"));
    // `model.model_size: 499153191` is ignored, as in DLIO: the default stays.
    assert_eq!(c.model.model_size_bytes, 10240);
    assert_eq!(c.metric.au, 0.90);
}

#[test]
fn unet3d_model_size_gives_exactly_one_warning_naming_the_key_dlio_reads() {
    let loaded = builtin("unet3d_a100", &[]);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert_contains(
        &loaded.warnings[0],
        &[
            "unet3d_a100.yaml (built-in, MLPerf Storage v3), line 4",
            "`model.model_size`",
            "`model.model_size_bytes`",
        ],
    );
    // In the spec's copy (no provenance line) the key is on line 4.
    let path = spec_workloads_dir().join("unet3d_h100.yaml");
    let spec = load_words(&[&format!("workload={}", path.display())]).expect("load");
    assert_eq!(spec.warnings.len(), 1);
    assert_contains(
        &spec.warnings[0],
        &["unet3d_h100.yaml, line 4", "model.model_size_bytes"],
    );
}

#[test]
fn unet3d_variants_differ_where_section_8_says() {
    let h100 = builtin("unet3d_h100", &[]).config;
    assert_eq!(h100.train.computation_time, constant(0.323));
    let v100 = builtin("unet3d_v100", &[]).config;
    assert_eq!(v100.reader.batch_size, 4);
    assert_eq!(v100.train.computation_time, constant(1.3604));
    assert_eq!(v100.metric.au, 0.90);

    let s3 = builtin("unet3d_h100_s3", &[]).config;
    assert_eq!(s3.train.epochs, 7);
    assert!(s3.workflow.generate_data);
    assert!(!s3.workflow.checkpoint);
    assert_eq!(s3.dataset.record_length_bytes_stdev, 0.0);
    assert_eq!(s3.dataset.data_folder, "s3://s3pytorchconnector");
    assert_eq!(s3.storage.storage_type, StorageType::S3);
    assert_eq!(s3.storage.storage_root, "s3pytorchconnector");
    let options = s3.storage.storage_options.expect("storage_options");
    assert_eq!(options.access_key_id.as_deref(), Some("access-key"));
    assert_eq!(options.secret_access_key.as_deref(), Some("secret-key"));
    assert_eq!(
        options.endpoint_url.as_deref(),
        Some("http://localhost:9020")
    );
    assert_eq!(options.region, "us-east-1");
    assert!(!options.s3_force_path_style);
    assert_eq!(options.s3_max_attempts, 5);
    assert_eq!(
        builtin("unet3d_v100_s3", &[]).config.dataset.format,
        FormatKind::Npy
    );
}

#[test]
fn resnet50_keeps_its_fractional_record_length() {
    let c = builtin("resnet50_h100", &[]).config;
    assert_eq!(c.framework, Framework::Tensorflow);
    assert_eq!(c.reader.data_loader, DataLoaderKind::Tensorflow);
    assert_eq!(c.reader.sampler(), Sampler::Iterative);
    assert_eq!(c.dataset.format, FormatKind::Tfrecord);
    assert_eq!(c.dataset.record_length_bytes, 114660.07);
    assert_eq!(c.dataset.record_length_bytes_resize, 150528.0);
    assert_eq!(c.dataset.num_files_train, 1024);
    assert_eq!(c.dataset.num_samples_per_file, 1251);
    assert_eq!(c.reader.batch_size, 400);
    assert_eq!(c.reader.read_threads, 8);
    assert_eq!(c.reader.computation_threads, 8);
    assert_eq!(c.train.computation_time, constant(0.224));
    assert_eq!(c.train.epochs, 5);
    assert!(!c.reader.dont_use_mmap);
    let a100 = builtin("resnet50_a100", &[]).config;
    assert!(a100.reader.dont_use_mmap);
    assert_eq!(a100.train.computation_time, constant(0.435));
    let v100 = builtin("resnet50_v100", &[]).config;
    assert_eq!(
        (v100.reader.batch_size, v100.reader.batch_size_eval),
        (64, 128)
    );
    let tf = builtin("resnet50_tf", &[]).config;
    assert_eq!((tf.train.epochs, tf.reader.batch_size), (1, 64));
    assert_eq!(tf.train.computation_time, constant(0.098));
}

#[test]
fn bert_v100_caps_steps_and_checkpoints_by_steps() {
    let loaded = builtin("bert_v100", &[]);
    let c = &loaded.config;
    assert_eq!(c.train.total_training_steps, 1000);
    assert_eq!(c.train.step_cap(), Some(1000));
    assert!(!c.train.seed_change_epoch);
    assert_eq!(c.reader.transfer_size, Some(262144));
    assert_eq!(c.reader.batch_size, 48);
    assert_eq!(c.reader.read_threads, 1);
    assert_eq!(c.dataset.num_files_train, 500);
    assert_eq!(c.dataset.num_samples_per_file, 313532);
    assert_eq!(c.dataset.record_length_bytes, 2500.0);
    assert_eq!(c.dataset.file_prefix, "part");
    assert_eq!(c.checkpoint.steps_between_checkpoints, 250);
    assert_eq!(c.model.model_size_bytes, 4034713312);
    assert_eq!(c.train.computation_time, constant(0.968));
    // `workflow.debug: False` has no effect in DLIO: one warning.
    assert_eq!(loaded.warnings.len(), 1);
    assert_contains(
        &loaded.warnings[0],
        &[
            "`workflow.debug`",
            "bert_v100.yaml (built-in, DLIO), line 11",
        ],
    );
}

#[test]
fn cosmoflow_and_dlrm_match_section_8() {
    let a100 = builtin("cosmoflow_a100", &[]).config;
    assert_eq!(a100.metric.au, 0.70);
    assert_eq!(a100.reader.shuffle_size, 2);
    assert_eq!(a100.dataset.num_files_train, 524288);
    assert_eq!(a100.dataset.record_length_bytes_stdev, 71311.0);
    assert_eq!(a100.train.computation_time, constant(0.00551));
    let v100 = builtin("cosmoflow_v100", &[]).config;
    assert_eq!(v100.metric.au, 0.90);
    assert_eq!(v100.reader.file_shuffle, Shuffle::Off);

    let dlrm = builtin("dlrm", &[]).config;
    assert_eq!(dlrm.dataset.format, FormatKind::IndexedBinary);
    assert_eq!(
        (dlrm.dataset.num_files_train, dlrm.dataset.num_files_eval),
        (1, 1)
    );
    assert_eq!(dlrm.dataset.num_samples_per_file, 1024);
    assert_eq!(dlrm.dataset.record_length_bytes, 671088640.0);
    assert_eq!(dlrm.reader.sample_shuffle, Shuffle::Random);
    assert_eq!(dlrm.train.computation_time, constant(0.064296));
}

#[test]
fn default_workload_evaluates_and_uses_subfolders() {
    let c = builtin("default", &[]).config;
    assert!(c.workflow.evaluation);
    assert!(!c.workflow.profiling);
    assert_eq!(c.dataset.data_folder, "data/default");
    assert_eq!(
        (c.dataset.num_files_train, c.dataset.num_files_eval),
        (64, 8)
    );
    assert_eq!(
        (
            c.dataset.num_subfolders_train,
            c.dataset.num_subfolders_eval
        ),
        (2, 2)
    );
    assert_eq!(c.dataset.record_length_bytes, 4096.0);
    assert_eq!((c.reader.batch_size, c.reader.batch_size_eval), (4, 1));
    assert_eq!(c.train.epochs, 10);
    assert_eq!(c.train.computation_time, constant(1.0));
    assert_eq!(c.evaluation.eval_time, constant(0.5));
    // With no `workload=`, the default workload is loaded.
    assert_eq!(load_words(&[]).expect("default").config, c);
}

#[test]
fn megatron_reads_its_legacy_optimizer_groups() {
    let loaded = builtin("megatron_deepspeed_LLNL", &[]);
    let c = &loaded.config;
    assert_eq!(
        c.model.optimization_groups,
        vec![1009254400, 865075200, 793600]
    );
    assert_eq!(c.model.layer_parameters, vec![52583936, 209715200]);
    assert_eq!(c.model.num_layers, 40);
    assert_eq!(c.model.parallelism.pipeline, 8);
    assert_eq!(c.model.parallelism.tensor, 4);
    assert_eq!(c.model.parallelism.zero_stage, 1);
    assert_eq!(c.dataset.format, FormatKind::MmapIndexedBinary);
    assert_eq!(c.dataset.data_folder, "dataset/megatron-deepspeed");
    assert_eq!(c.dataset.num_samples_per_file, 277203535);
    assert_eq!(c.train.total_training_steps, 1000);
    assert_eq!(c.train.computation_time, constant(2.44));
    assert_eq!(c.checkpoint.steps_between_checkpoints, 1000);
    // `model.model_size` and `checkpoint.type` are both ignored upstream.
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("`model.model_size`"))
    );
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("`checkpoint.type`"))
    );
}

#[test]
fn llama_workloads_are_checkpoint_only_transformers() {
    let c = builtin("llama_8b_zero3", &[]).config;
    assert!(c.checkpoint_only());
    assert!(!c.generate_only());
    assert!(c.model.is_transformer());
    assert_eq!(c.model.parallelism.zero_stage, 3);
    assert_eq!(c.model.num_layers, 32);
    assert_eq!(c.model.transformer.vocab_size, 128256);
    assert_eq!(c.model.transformer.hidden_size, 4096);
    assert_eq!(c.model.transformer.ffn_hidden_size, 14336);
    assert_eq!(c.model.transformer.num_attention_heads, 32);
    assert_eq!(c.model.transformer.num_kv_heads, 8);
    assert_eq!(c.checkpoint.num_checkpoints_write, 10);
    assert_eq!(c.checkpoint.num_checkpoints_read, 10);
    assert_eq!(c.checkpoint.time_between_checkpoints, 5.0);
    assert!(c.checkpoint.fsync);
    let seventy = builtin("llama_70b", &[]).config;
    assert_eq!(
        (
            seventy.model.parallelism.tensor,
            seventy.model.parallelism.pipeline
        ),
        (8, 4)
    );
    let seven = builtin("llama_7b", &[]).config;
    assert_eq!(seven.model.transformer.num_kv_heads, 32);
    assert_eq!(seven.model.transformer.ffn_hidden_size, 11008);
    let one_t = builtin("llama_1t", &[]).config;
    assert_eq!(one_t.model.name, "llama_405b");
    assert!(one_t.workflow.generate_data && one_t.workflow.train);
    assert_eq!(one_t.model.transformer.hidden_size, 25872);
}

#[test]
fn shipped_workloads_pass_validation_on_a_world_that_fits_their_parallelism() {
    let cases: &[(&str, u32, &[&str])] = &[
        ("default", 1, &[]),
        ("unet3d_a100", 8, &[]),
        ("unet3d_h100_s3", 2, &[]),
        ("resnet50_h100", 4, &[]),
        ("cosmoflow_a100", 2, &[]),
        ("bert_v100", 1, &[]),
        ("dlrm", 1, &[]),
        ("megatron_deepspeed_LLNL", 32, &[]),
        ("llama_7b", 8, &[]),
        ("llama_7b_zero3", 8, &[]),
        ("llama_70b", 64, &[]),
        ("llama_70b_zero3", 64, &[]),
        ("llama_405b", 512, &[]),
        // The CI of upstream runs llama_8b_zero3 on 2 ranks as a slice of a 1024-rank job.
        (
            "llama_8b_zero3",
            2,
            &[
                "++workload.model.parallelism.data=1024",
                "++workload.checkpoint.mode=subset",
            ],
        ),
    ];
    for (name, world, overrides) in cases {
        let c: Config = builtin(name, overrides).config;
        if let Err(e) = c.validate(*world) {
            panic!("{name} on {world} ranks: {e}");
        }
    }
    let subset = builtin(
        "llama_8b_zero3",
        &[
            "++workload.model.parallelism.data=1024",
            "++workload.checkpoint.mode=subset",
        ],
    )
    .config;
    assert_eq!(subset.checkpoint.mode, CheckpointMode::Subset);
    assert_eq!(subset.model.parallelism.data, 1024);
}

#[test]
fn llama_1t_standalone_reads_tfrecord_with_the_pytorch_loader() {
    // No dataset or reader section: tfrecord files and a pytorch loader (the framework's).
    // Upstream refuses that combination; dlio reads the records through their index files.
    let c = builtin("llama_1t", &[]).config;
    assert_eq!(c.dataset.format, FormatKind::Tfrecord);
    assert_eq!(c.reader.data_loader, DataLoaderKind::Pytorch);
    assert_eq!(c.sampler(), Sampler::Index);
    assert!(c.validate(1024).is_ok());
    let fixed = builtin("llama_1t", &["++workload.workflow.train=False"]).config;
    assert!(fixed.validate(1024).is_ok());
}

#[test]
fn dlio_paper_presets_load_with_the_papers_parameters() {
    let presets: Vec<&str> = builtin_workloads()
        .filter(|w| w.origin == WorkloadOrigin::Paper)
        .map(|w| w.name)
        .collect();
    assert_eq!(
        presets,
        [
            "candle",
            "cosmic_tagger",
            "cosmoflow_2021",
            "ffn",
            "frnn",
            "imagenet_2021"
        ]
    );
    for name in &presets {
        let loaded = builtin(name, &[]);
        let w = builtin_workloads().find(|w| w.name == *name).unwrap();
        assert!(w.yaml.starts_with("# DLIO paper preset"), "{name}");
        assert!(w.yaml.contains("CCGrid'21"), "{name}: cites its source");
        loaded
            .config
            .validate(1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let c = builtin("cosmoflow_2021", &[]).config;
    assert_eq!(c.dataset.format, FormatKind::Tfrecord);
    assert_eq!(
        (c.dataset.num_files_train, c.dataset.num_samples_per_file),
        (1024, 512)
    );
    assert_eq!(c.dataset.record_length_bytes, 131072.0);
    assert_eq!(c.reader.transfer_size, Some(1048576));
    assert_eq!(
        (c.reader.read_threads, c.reader.computation_threads),
        (8, 8)
    );
    assert_eq!(c.sampler(), Sampler::FileShards);
    let c = builtin("imagenet_2021", &[]).config;
    assert_eq!(
        (c.dataset.num_files_train, c.dataset.num_samples_per_file),
        (1024, 1024)
    );
    assert_eq!(c.dataset.record_length_bytes, 262144.0);
    let c = builtin("cosmic_tagger", &[]).config;
    assert_eq!(c.dataset.format, FormatKind::Hdf5);
    assert_eq!(c.dataset.num_files_train, 1);
    assert_eq!(c.dataset.hdf5.chunk_dims, [1, 64, 64]);
    assert_eq!(c.train.computation_time, constant(0.001));
    let c = builtin("ffn", &[]).config;
    assert_eq!(
        (
            c.dataset.num_samples_per_file,
            c.dataset.record_length_bytes
        ),
        (43008, 32768.0)
    );
    let c = builtin("candle", &[]).config;
    assert_eq!(c.dataset.format, FormatKind::Csv);
    assert_eq!(c.dataset.record_dims, [65536]);
    assert_eq!(c.dataset.num_samples_per_file, 1120);
    let c = builtin("frnn", &[]).config;
    assert_eq!(c.dataset.format, FormatKind::Npz);
    assert_eq!(
        (c.dataset.num_files_train, c.dataset.num_samples_per_file),
        (28000, 1024)
    );
}

/// The fork's object-storage options: `uri_scheme` turns local schemes into local storage,
/// refuses non-S3 services, and `storage_options.columns` becomes the parquet read flags.
#[test]
fn uri_scheme_and_column_selection_of_the_fork() {
    let s3 = "storage:\n  storage_type: s3\n  storage_root: /data/set\n  storage_options:\n";
    let local =
        dlio_config::load_text("w.yaml", &format!("{s3}    uri_scheme: file\n"), &[]).unwrap();
    assert_eq!(
        local.config.storage.storage_type,
        dlio_config::StorageType::LocalFs
    );
    assert_eq!(local.config.storage.storage_root, "/data/set");
    assert!(
        local
            .warnings
            .iter()
            .any(|w| w.contains("uri_scheme `file`"))
    );
    let direct =
        dlio_config::load_text("w.yaml", &format!("{s3}    uri_scheme: 'direct://'\n"), &[])
            .unwrap();
    assert_eq!(
        direct.config.storage.storage_type,
        dlio_config::StorageType::DirectFs
    );
    let err = dlio_config::load_text("w.yaml", &format!("{s3}    uri_scheme: az\n"), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("uri_scheme") && err.contains("Azure"), "{err}");

    let parquet = "dataset:\n  format: parquet\n  parquet:\n    columns:\n      - {name: a}\n      \
                   - {name: b, read: false}\n      - {name: c}\n";
    let picked = dlio_config::load_text(
        "w.yaml",
        parquet,
        &["++workload.storage.storage_options.columns=[b]".to_string()],
    )
    .unwrap();
    let read: Vec<bool> = picked
        .config
        .dataset
        .parquet
        .columns
        .iter()
        .map(|c| c.read)
        .collect();
    assert_eq!(read, [false, true, false]);
    let err = dlio_config::load_text(
        "w.yaml",
        parquet,
        &["++workload.storage.storage_options.columns=[a, zz]".to_string()],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`zz`") && err.contains("a, b, c"), "{err}");
}

#[test]
fn arrow_columns_and_a_size_distribution_load_with_their_values_and_no_warning() {
    crate::register_names();
    let yaml = "dataset:\n  format: arrow\n  arrow:\n    generation_batch_size: 256\n    \
                columns:\n      - {name: a, dtype: float32, size: 8}\n      - {name: b, dtype: \
                int64, read: false}\n  record_length_bytes_distribution:\n    - {size: 1000, \
                weight: 7}\n    - {size: 50000, weight: 3}\n";
    let loaded = dlio_config::load_text("w.yaml", yaml, &[]).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let d = &loaded.config.dataset;
    assert_eq!(d.format, FormatKind::Arrow);
    assert_eq!(d.arrow.generation_batch_size, 256);
    let columns: Vec<(&str, &str, u64, bool)> = d
        .arrow
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.dtype.as_str(), c.size, c.read))
        .collect();
    assert_eq!(
        columns,
        [("a", "float32", 8, true), ("b", "int64", 1, false)]
    );
    let sizes: Vec<(u64, f64)> = d
        .record_length_bytes_distribution
        .iter()
        .map(|e| (e.size, e.weight))
        .collect();
    assert_eq!(sizes, [(1000, 7.0), (50000, 3.0)]);
    loaded.config.validate(1).unwrap();
    // The alias, and a distribution beside a stdev, refused naming both keys.
    let alias = dlio_config::load_text("w.yaml", "dataset:\n  format: arrow_ipc\n", &[]).unwrap();
    assert_eq!(alias.config.dataset.format, FormatKind::Arrow);
    let both = dlio_config::load_text(
        "w.yaml",
        &format!("{yaml}  record_length_bytes_stdev: 10\n"),
        &[],
    )
    .unwrap();
    let err = both.config.validate(1).unwrap_err().to_string();
    assert!(
        err.contains("record_length_bytes_distribution") && err.contains("stdev"),
        "{err}"
    );
}

/// The fork's parquet and client options of `storage.storage_options`: what dlio does with
/// each (honoured, said to have no effect, or refused with the fix).
#[test]
fn the_forks_parquet_storage_options_are_honoured_warned_or_refused() {
    let base = "dataset:\n  format: parquet\nstorage:\n  storage_options:\n";
    let loaded = dlio_config::load_text(
        "w.yaml",
        &format!(
            "{base}    footer_cap: 1048576\n    coalesce_rgs: 8\n    max_outstanding: 64\n    \
             prefetch: 16\n    footer_batch_size: 4\n    decode: raw\n    decode_output: none\n"
        ),
        &[],
    )
    .unwrap();
    let parquet = &loaded.config.dataset.parquet;
    assert_eq!(parquet.footer_read_size, 1 << 20);
    assert_eq!(parquet.coalesce_row_groups, 8);
    for key in ["max_outstanding", "prefetch_workers", "footer_batch_size"] {
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains(key) && w.contains("no effect")),
            "{key}: {:?}",
            loaded.warnings
        );
    }
    // An explicit footer_read_size wins over the fork's footer_cap.
    let explicit = dlio_config::load_text(
        "w.yaml",
        &format!("{base}    footer_cap: 1048576\n"),
        &["++workload.dataset.parquet.footer_read_size=65536".to_string()],
    )
    .unwrap();
    assert_eq!(explicit.config.dataset.parquet.footer_read_size, 65536);
    for (option, key) in [
        ("decode: arrow", "decode"),
        ("decode_output: torch", "decode_output"),
        ("simulate_io: 'true'", "simulate_io"),
        ("use_full_object_uri: 'true'", "use_full_object_uri"),
    ] {
        let err = dlio_config::load_text("w.yaml", &format!("{base}    {option}\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("storage.storage_options.{key}")),
            "{option}: {err}"
        );
    }
}
