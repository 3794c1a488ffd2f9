//! A workload that sets nothing gets DLIO's defaults (dlio-semantics.md §3).

use dlio_config::{
    CheckpointMode, Compression, Config, DataLoaderKind, DataType, ElementType, FormatKind,
    Framework, MultiprocessingContext, Profiler, ReadType, Sampler, Shuffle, StorageType,
    TimeDistribution,
};

#[test]
fn an_empty_workload_has_dlio_defaults_for_every_section() {
    let c = Config::from_yaml("").expect("empty workload");
    assert_eq!(c, Config::default());
    assert_eq!(c.framework, Framework::Tensorflow);

    let m = &c.model;
    assert_eq!(m.name, "default");
    assert_eq!(m.r#type, None);
    assert_eq!(m.model_size_bytes, 10240);
    assert_eq!(
        (m.model_datatype, m.optimizer_datatype),
        (DataType::Fp16, DataType::Fp32)
    );
    assert!(m.optimization_groups.is_empty() && m.layer_parameters.is_empty());
    assert_eq!(m.num_layers, -1);
    assert_eq!(
        (
            m.parallelism.tensor,
            m.parallelism.pipeline,
            m.parallelism.data
        ),
        (1, 1, -1)
    );
    assert_eq!(m.parallelism.zero_stage, 0);
    let t = &m.transformer;
    assert_eq!(
        (
            t.vocab_size,
            t.hidden_size,
            t.ffn_hidden_size,
            t.num_attention_heads,
            t.num_kv_heads
        ),
        (32000, 2048, 8192, 32, 8)
    );

    let w = &c.workflow;
    assert!(!w.generate_data && w.train && !w.evaluation && !w.checkpoint && !w.profiling);
    assert_eq!(w.query, None);

    assert_eq!(c.storage.storage_type, StorageType::LocalFs);
    assert_eq!(c.storage.storage_type.as_str(), "local_fs");
    assert_eq!(c.storage.storage_root, "./");
    assert_eq!(c.storage.storage_options, None);

    let d = &c.dataset;
    assert_eq!(d.data_folder, "./data");
    assert_eq!(d.format, FormatKind::Tfrecord);
    assert_eq!(
        (d.num_files_train, d.num_files_eval, d.num_samples_per_file),
        (8, 0, 1)
    );
    assert_eq!(d.record_length_bytes, 65536.0);
    assert_eq!(d.record_length_bytes_stdev, 0.0);
    assert_eq!(d.record_length_bytes_resize, 0.0);
    assert!(d.record_dims.is_empty());
    assert_eq!(d.record_element_type, ElementType::Uint8);
    assert_eq!((d.num_subfolders_train, d.num_subfolders_eval), (0, 0));
    assert_eq!(d.file_prefix, "img");
    assert_eq!(d.compression, Compression::None);
    assert_eq!(d.compression_level, 4);
    assert!(d.keep_files);
    assert_eq!(d.generation_buffer_size, 2 * 1073741824);
    assert_eq!(d.hdf5.num_dset_per_record, 1);
    assert!(d.hdf5.chunk_dims.is_empty() && d.hdf5.max_shape.is_empty());

    let r = &c.reader;
    assert_eq!(r.data_loader, DataLoaderKind::Tensorflow);
    assert_eq!(r.sampler(), Sampler::Iterative);
    assert_eq!(
        (r.data_loader_classname.clone(), r.reader_classname.clone()),
        (None, None)
    );
    assert_eq!((r.batch_size, r.batch_size_eval), (1, 1));
    assert_eq!(
        (r.read_threads, r.computation_threads, r.prefetch_size),
        (1, 1, 2)
    );
    assert_eq!(
        (r.file_shuffle, r.sample_shuffle),
        (Shuffle::Off, Shuffle::Off)
    );
    assert_eq!(r.shuffle_size, 1024);
    assert_eq!(r.read_type, ReadType::OnDemand);
    assert_eq!(r.transfer_size, None);
    assert!(r.preprocess_time.is_zero());
    assert!(r.pin_memory);
    assert_eq!(r.multiprocessing_context, MultiprocessingContext::Fork);
    assert!(!r.odirect && !r.dont_use_mmap);
    assert!(r.transformed_record_dims.is_empty());
    assert_eq!(r.transformed_record_element_type, ElementType::Uint8);

    assert_eq!(c.train.epochs, 1);
    assert_eq!(
        c.train.computation_time,
        TimeDistribution::Constant { value: 0.0 }
    );
    assert_eq!(c.train.total_training_steps, -1);
    assert_eq!(c.train.step_cap(), None);
    assert_eq!(c.train.seed, 123);
    assert!(c.train.seed_change_epoch);

    assert!(c.evaluation.eval_time.is_zero());
    assert_eq!(
        (
            c.evaluation.eval_after_epoch,
            c.evaluation.epochs_between_evals
        ),
        (1, 1)
    );

    let k = &c.checkpoint;
    assert_eq!(k.checkpoint_folder, "./checkpoints");
    assert_eq!(
        (k.checkpoint_after_epoch, k.epochs_between_checkpoints),
        (1, 1)
    );
    assert_eq!(k.steps_between_checkpoints, -1);
    assert_eq!(k.mode, CheckpointMode::Default);
    assert_eq!(k.time_between_checkpoints, -1.0);
    assert_eq!((k.num_checkpoints_write, k.num_checkpoints_read), (-1, -1));
    assert!(!k.rank_sync && !k.fsync && !k.recovery_rank_shift && k.randomize_tensor);
    assert_eq!(k.checkpoint_mechanism_classname, None);
    assert_eq!(k.ksm, None);

    assert_eq!(c.output.folder, None);
    assert_eq!(c.output.log_file, "dlio.log");
    assert_eq!(
        (
            c.output.metric.exclude_start_steps,
            c.output.metric.exclude_end_steps
        ),
        (1, 0)
    );
    assert_eq!(c.profiling.profiler, Profiler::Iostat);
    assert!(c.profiling.iostat_devices.is_empty());
    assert_eq!(c.metric.au, 0.90);
}

#[test]
fn ksm_defaults_apply_once_the_section_is_present() {
    let c = Config::from_yaml("checkpoint:\n  ksm: {}\n").expect("ksm");
    let ksm = c.checkpoint.ksm.expect("present");
    assert_eq!(ksm.madv_mergeable_id, 12);
    assert_eq!(ksm.high_ram_trigger, 30.0);
    assert_eq!(ksm.low_ram_exit, 15.0);
    assert_eq!(ksm.await_time, 200);
}

#[test]
fn the_data_loader_follows_the_framework_when_unset() {
    let c = Config::from_yaml("framework: pytorch\n").expect("pytorch");
    assert_eq!(c.reader.data_loader, DataLoaderKind::Pytorch);
    assert_eq!(c.reader.sampler(), Sampler::Index);
    let explicit =
        Config::from_yaml("framework: pytorch\nreader:\n  data_loader: dali\n").expect("dali");
    assert_eq!(explicit.reader.data_loader, DataLoaderKind::Dali);
    assert_eq!(explicit.reader.sampler(), Sampler::Index);
    let custom = Config::from_yaml("reader:\n  data_loader_sampler: index\n").expect("sampler");
    assert_eq!(custom.reader.sampler(), Sampler::Index);
}

#[test]
fn generate_only_and_checkpoint_only_follow_dlio() {
    let gen_only =
        Config::from_yaml("workflow:\n  generate_data: True\n  train: False\n").expect("gen");
    assert!(gen_only.generate_only() && !gen_only.checkpoint_only());
    let both =
        Config::from_yaml("workflow:\n  generate_data: True\n  train: False\n  checkpoint: True\n")
            .expect("both");
    assert!(!both.generate_only() && both.checkpoint_only());
    let train = Config::from_yaml("workflow:\n  generate_data: True\n").expect("train");
    assert!(!train.generate_only() && !train.checkpoint_only());
}

#[test]
fn lenient_scalars_read_as_dlio_users_write_them() {
    crate::register_names();
    let c = Config::from_yaml(
        "dataset:\n  format: NPZ\n  num_files_train: 1e3\n  record_element_type: Float32\n  \
         data_folder: data/x///\nreader:\n  pin_memory: 'no'\n  data_loader: PyTorch\n\
         framework: pytorch\nmodel:\n  name: 123\nprofiling:\n  iostat_devices: sda\n",
    )
    .expect("lenient");
    assert_eq!(c.dataset.format, FormatKind::Npz);
    assert_eq!(c.dataset.num_files_train, 1000);
    assert_eq!(c.dataset.record_element_type, ElementType::Float32);
    assert_eq!(c.dataset.data_folder, "data/x");
    assert!(!c.reader.pin_memory);
    assert_eq!(c.reader.data_loader, DataLoaderKind::Pytorch);
    assert_eq!(c.model.name, "123");
    assert_eq!(c.profiling.iostat_devices, vec!["sda".to_string()]);
}

#[test]
fn time_values_accept_every_form_dlio_accepts() {
    let cases = [
        ("0.25", TimeDistribution::Constant { value: 0.25 }),
        ("{mean: 0.5}", TimeDistribution::Constant { value: 0.5 }),
        (
            "{mean: 0.5, stdev: 0.1}",
            TimeDistribution::Normal {
                mean: 0.5,
                stdev: 0.1,
            },
        ),
        (
            "{type: normal, mean: 1, stdev: 0.2}",
            TimeDistribution::Normal {
                mean: 1.0,
                stdev: 0.2,
            },
        ),
        (
            "{type: uniform, min: 0.1, max: 0.3}",
            TimeDistribution::Uniform { min: 0.1, max: 0.3 },
        ),
        (
            "{type: gamma, shape: 2, scale: 0.5}",
            TimeDistribution::Gamma {
                shape: 2.0,
                scale: 0.5,
            },
        ),
        (
            "{type: exponential, scale: 0.4}",
            TimeDistribution::Exponential { scale: 0.4 },
        ),
        (
            "{type: poisson, lam: 3}",
            TimeDistribution::Poisson { lam: 3.0 },
        ),
        (
            "{type: quantiles, values: [0.02, 0.021, 0.031]}",
            TimeDistribution::Quantiles {
                values: vec![0.02, 0.021, 0.031],
            },
        ),
        (
            "{type: empirical, values: [0.021, 0.44, 0.02]}",
            TimeDistribution::Empirical {
                values: vec![0.021, 0.44, 0.02],
            },
        ),
    ];
    for (text, expected) in cases {
        let yaml = format!(
            "train:\n  computation_time: {text}\nevaluation:\n  eval_time: {text}\n\
             reader:\n  preprocess_time: {text}\n"
        );
        let c = Config::from_yaml(&yaml).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.train.computation_time, expected, "{text}");
        assert_eq!(c.evaluation.eval_time, expected, "{text}");
        assert_eq!(c.reader.preprocess_time, expected, "{text}");
    }
}

#[test]
fn measured_quantiles_are_refused_out_of_order_empty_negative_or_with_other_keys() {
    for (text, says) in [
        (
            "{type: quantiles, values: [0.03, 0.02]}",
            "increasing order",
        ),
        ("{type: quantiles, values: []}", "no `values`"),
        ("{type: quantiles}", "needs `values`"),
        ("{type: quantiles, values: [0.1, x]}", "must be a number"),
        ("{type: quantiles, values: [0.1], mean: 1}", "`mean`"),
        (
            "{type: quantiles, values: [-0.1, 0.2]}",
            "negative `values`",
        ),
        ("{type: empirical, values: []}", "no `values`"),
        ("{type: empirical}", "needs `values`"),
        (
            "{type: empirical, values: [0.2, -0.1]}",
            "negative `values`",
        ),
        ("{type: empirical, values: [0.1], stdev: 1}", "`stdev`"),
    ] {
        let err = Config::from_yaml(&format!("train:\n  computation_time: {text}\n"))
            .and_then(|c| c.validate(1))
            .expect_err(text)
            .to_string();
        assert!(
            err.contains("train.computation_time") && err.contains(says),
            "{text}: {err}"
        );
    }
}

#[test]
fn legacy_stdev_siblings_make_a_normal_distribution() {
    let c = Config::from_yaml(
        "train:\n  computation_time: 0.5\n  computation_time_stdev: 0.1\n\
         evaluation:\n  eval_time_stdev: 0.2\n\
         reader:\n  preprocess_time: {mean: 0.3}\n  preprocess_time_stdev: 0.05\n",
    )
    .expect("stdev siblings");
    assert_eq!(
        c.train.computation_time,
        TimeDistribution::Normal {
            mean: 0.5,
            stdev: 0.1
        }
    );
    assert_eq!(
        c.evaluation.eval_time,
        TimeDistribution::Normal {
            mean: 0.0,
            stdev: 0.2
        }
    );
    assert_eq!(
        c.reader.preprocess_time,
        TimeDistribution::Normal {
            mean: 0.3,
            stdev: 0.05
        }
    );
}

#[test]
fn data_reader_and_legacy_record_length_names_are_read() {
    let c = Config::from_yaml(
        "data_reader:\n  batch_size: 9\ndataset:\n  record_length: 1000\n  \
         record_length_stdev: 10\n  record_length_resize: 4096\n",
    )
    .expect("aliases");
    assert_eq!(c.reader.batch_size, 9);
    assert_eq!(c.dataset.record_length_bytes, 1000.0);
    assert_eq!(c.dataset.record_length_bytes_stdev, 10.0);
    assert_eq!(c.dataset.record_length_bytes_resize, 4096.0);
    // The same value under both names is not a conflict.
    let same = Config::from_yaml("dataset:\n  record_length: 10\n  record_length_bytes: 10\n")
        .expect("same value");
    assert_eq!(same.dataset.record_length_bytes, 10.0);
}

#[test]
fn hdf5_max_shape_accepts_unlimited_entries() {
    let c = Config::from_yaml(
        "dataset:\n  hdf5:\n    max_shape: [null, 64]\n    chunk_dims: [1, 64]\n",
    )
    .expect("hdf5");
    assert_eq!(c.dataset.hdf5.max_shape, vec![None, Some(64)]);
    assert_eq!(c.dataset.hdf5.chunk_dims, vec![1, 64]);
}

#[test]
fn yaml_anchors_and_merge_keys_are_resolved() {
    let c = Config::from_yaml(
        "reader: &base\n  batch_size: 3\n  read_threads: 2\ntrain:\n  epochs: 4\n\
         evaluation:\n  eval_time: &half 0.5\n  epochs_between_evals: 2\n",
    )
    .expect("anchors");
    assert_eq!(c.reader.batch_size, 3);
    assert_eq!(
        c.evaluation.eval_time,
        TimeDistribution::Constant { value: 0.5 }
    );
    let merged = Config::from_yaml("x_defaults: &d {batch_size: 5}\n");
    assert!(
        merged.is_ok(),
        "an unknown top-level key is dropped (with a warning)"
    );
    let merged =
        Config::from_yaml("reader:\n  <<: {batch_size: 5, read_threads: 3}\n  read_threads: 4\n")
            .expect("merge key");
    assert_eq!(
        (merged.reader.batch_size, merged.reader.read_threads),
        (5, 4)
    );
}

#[test]
fn preprocess_work_names_how_the_loader_time_is_spent() {
    use dlio_config::PreprocessWork;
    for (text, expected) in [
        ("sleep", PreprocessWork::Sleep),
        ("cpu", PreprocessWork::Cpu),
        ("gil", PreprocessWork::Gil),
    ] {
        let c = Config::from_yaml(&format!("reader:\n  preprocess_work: {text}\n"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.reader.preprocess_work, expected, "{text}");
    }
    let e = Config::from_yaml("reader:\n  preprocess_work: threads\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("preprocess_work") && e.contains("gil"), "{e}");
}
