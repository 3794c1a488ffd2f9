//! Hydra's override grammar on the `workload.` subtree (dlio-semantics.md §2.13).

use std::path::PathBuf;

use dlio_config::{ConfigError, KsmConfig, TimeDistribution};

use crate::{TempWorkload, assert_contains, builtin, load_words};

#[test]
fn plus_plus_sets_a_key_whether_or_not_the_workload_has_it() {
    let c = builtin(
        "unet3d_h100",
        &[
            "++workload.reader.read_threads=8",
            "++workload.reader.prefetch_size=6",
        ],
    )
    .config;
    assert_eq!(c.reader.read_threads, 8);
    assert_eq!(c.reader.prefetch_size, 6);
}

#[test]
fn a_bare_override_replaces_any_key_of_the_schema() {
    let c = builtin(
        "unet3d_h100",
        &["workload.reader.batch_size=3", "workload.train.seed=7"],
    )
    .config;
    assert_eq!(c.reader.batch_size, 3);
    assert_eq!(c.train.seed, 7);
}

#[test]
fn plus_adds_a_key_but_refuses_one_that_is_already_set() {
    let c = builtin("unet3d_h100", &["+workload.reader.prefetch_size=4"]).config;
    assert_eq!(c.reader.prefetch_size, 4);
    let err = load_words(&["workload=unet3d_h100", "+workload.reader.batch_size=3"])
        .unwrap_err()
        .to_string();
    assert_contains(
        &err,
        &[
            "+workload.reader.batch_size=3",
            "already set",
            "++workload.reader.batch_size",
        ],
    );
}

#[test]
fn tilde_removes_a_key_so_its_default_applies() {
    let c = builtin("unet3d_h100", &["~workload.train.epochs"]).config;
    assert_eq!(c.train.epochs, 1);
}

#[test]
fn the_last_override_of_a_key_wins() {
    let c = builtin(
        "default",
        &["++workload.train.epochs=3", "++workload.train.epochs=4"],
    )
    .config;
    assert_eq!(c.train.epochs, 4);
}

#[test]
fn values_are_read_as_yaml_scalars_and_flow_collections() {
    let loaded = builtin(
        "default",
        &[
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=False",
            "++workload.train.computation_time=1e-3",
            "++workload.reader.transfer_size=null",
            "++workload.dataset.record_dims=[1024,128]",
            "++workload.checkpoint.ksm={}",
            "++workload.dataset.data_folder='s3://bucket/prefix'",
            "++workload.dataset.file_prefix=\"001\"",
            "++workload.output.folder=",
        ],
    );
    let c = &loaded.config;
    assert!(c.workflow.generate_data);
    assert!(!c.workflow.train);
    assert_eq!(
        c.train.computation_time,
        TimeDistribution::Constant { value: 0.001 }
    );
    assert_eq!(c.reader.transfer_size, None);
    assert_eq!(c.dataset.record_dims, vec![1024, 128]);
    assert_eq!(c.checkpoint.ksm, Some(KsmConfig::default()));
    assert_eq!(c.dataset.data_folder, "s3://bucket/prefix");
    assert_eq!(c.dataset.file_prefix, "001");
    assert_eq!(c.output.folder.as_deref(), Some(""));
}

#[test]
fn nested_keys_turn_a_time_number_into_a_distribution() {
    let uniform = builtin(
        "unet3d_h100",
        &[
            "++workload.train.computation_time.type=uniform",
            "++workload.train.computation_time.min=0.3",
            "++workload.train.computation_time.max=0.35",
        ],
    )
    .config;
    // The number (0.323) was the mean; a uniform distribution has none, so it is dropped.
    assert_eq!(
        uniform.train.computation_time,
        TimeDistribution::Uniform {
            min: 0.3,
            max: 0.35
        }
    );

    let normal = builtin(
        "unet3d_h100",
        &["++workload.train.computation_time.stdev=0.01"],
    )
    .config;
    assert_eq!(
        normal.train.computation_time,
        TimeDistribution::Normal {
            mean: 0.323,
            stdev: 0.01
        }
    );

    // A workload without the key gets the mapping created.
    let fresh = builtin(
        "llama_7b",
        &[
            "++workload.evaluation.eval_time.type=exponential",
            "++workload.evaluation.eval_time.scale=0.2",
        ],
    )
    .config;
    assert_eq!(
        fresh.evaluation.eval_time,
        TimeDistribution::Exponential { scale: 0.2 }
    );
}

#[test]
fn an_explicit_mean_left_on_a_non_normal_distribution_is_an_error() {
    let err = load_words(&[
        "workload=unet3d_h100",
        "++workload.train.computation_time={mean: 0.3, stdev: 0.1}",
        "++workload.train.computation_time.type=uniform",
        "++workload.train.computation_time.min=0.2",
        "++workload.train.computation_time.max=0.4",
    ])
    .unwrap_err()
    .to_string();
    assert_contains(
        &err,
        &[
            "override `++workload.train.computation_time",
            "`mean`",
            "uniform",
        ],
    );
}

#[test]
fn nested_keys_below_a_plain_value_are_rejected() {
    let err = load_words(&["workload=default", "++workload.dataset.format.level=3"])
        .unwrap_err()
        .to_string();
    assert_contains(
        &err,
        &["`dataset.format` holds a value", "workload.dataset.format"],
    );
}

#[test]
fn data_reader_is_an_alias_of_reader_in_overrides() {
    let c = builtin("unet3d_h100", &["++workload.data_reader.batch_size=5"]).config;
    assert_eq!(c.reader.batch_size, 5);
    let w = TempWorkload::new(
        "w.yaml",
        "framework: pytorch\ndata_reader:\n  data_loader: pytorch\n  batch_size: 2\n",
    );
    let c = w
        .load(&["++workload.reader.batch_size=6"])
        .expect("load")
        .config;
    assert_eq!(c.reader.batch_size, 6);
}

#[test]
fn legacy_record_length_names_work_in_overrides() {
    let c = builtin(
        "unet3d_h100",
        &[
            "++workload.dataset.record_length=4096",
            "++workload.dataset.record_length_stdev=0",
        ],
    )
    .config;
    assert_eq!(c.dataset.record_length_bytes, 4096.0);
    assert_eq!(c.dataset.record_length_bytes_stdev, 0.0);
}

#[test]
fn hydra_run_dir_is_kept_and_other_hydra_settings_are_accepted() {
    let loaded = load_words(&[
        "workload=resnet50_h100",
        "hydra.run.dir=/tmp/run-1",
        "++hydra.output_subdir=dlio_config",
        "+hydra.job.chdir=False",
        "hydra/job_logging=disabled",
        "++workload.train.epochs=2",
    ])
    .expect("hydra words");
    assert_eq!(loaded.hydra_run_dir, Some(PathBuf::from("/tmp/run-1")));
    assert_eq!(loaded.workload, "resnet50_h100");
    assert_eq!(
        loaded.overrides,
        vec![
            "hydra.run.dir=/tmp/run-1",
            "++hydra.output_subdir=dlio_config",
            "+hydra.job.chdir=False",
            "hydra/job_logging=disabled",
            "++workload.train.epochs=2",
        ]
    );
    assert_eq!(loaded.config.train.epochs, 2);
}

#[test]
fn an_argument_that_is_not_key_equals_value_explains_the_grammar() {
    let err = load_words(&["unet3d_h100"]).unwrap_err();
    assert!(matches!(err, ConfigError::BadOverride { .. }));
    assert_contains(
        &err.to_string(),
        &[
            "`unet3d_h100`",
            "not KEY=VALUE",
            "`workload=NAME`",
            "++workload.SECTION.KEY=VALUE",
        ],
    );
}

#[test]
fn a_key_outside_workload_suggests_the_prefix() {
    let err = load_words(&["workload=default", "++reader.batch_size=4"])
        .unwrap_err()
        .to_string();
    assert_contains(&err, &["did you mean `++workload.reader.batch_size=4`?"]);
    let err = load_words(&["workload=default", "foo=bar"])
        .unwrap_err()
        .to_string();
    assert_contains(
        &err,
        &["`foo=bar`", "must start with `workload.` or `hydra.`"],
    );
}

#[test]
fn the_workload_is_chosen_once() {
    let err = load_words(&["workload=default", "workload=dlrm"])
        .unwrap_err()
        .to_string();
    assert_contains(&err, &["`workload=dlrm`", "already `default`"]);
}

#[test]
fn an_unknown_key_in_an_override_names_the_override_and_suggests() {
    let loaded = load_words(&["workload=default", "workload.reader.epochs=3"]).unwrap();
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("did you mean `train.epochs`?"));
    let err =
        crate::load_words_strict(&["workload=default", "workload.reader.epochs=3"]).unwrap_err();
    match &err {
        ConfigError::UnknownKey {
            key, suggestion, ..
        } => {
            assert_eq!(key, "reader.epochs");
            assert_eq!(suggestion.as_deref(), Some("train.epochs"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_contains(
        &err.to_string(),
        &[
            "override `workload.reader.epochs=3`",
            "unknown key `reader.epochs`",
            "did you mean `train.epochs`?",
        ],
    );
}

#[test]
fn a_wrong_type_in_an_override_names_the_override_instead_of_a_line() {
    let err = load_words(&["workload=unet3d_h100", "++workload.reader.batch_size=seven"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "override `++workload.reader.batch_size=seven`: `reader.batch_size` must be a \
         non-negative integer, got `seven`"
    );
}

#[test]
fn config_dir_workloads_come_first_then_the_builtins() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("workload")).expect("mkdir");
    let mine = dir.path().join("workload/mine.yaml");
    std::fs::write(&mine, "model:\n  name: mine\nframework: pytorch\n").expect("write");
    let args = |name: &str| dlio_config::LoadArgs {
        positional: vec![format!("workload={name}")],
        config_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let loaded = dlio_config::load(&args("mine")).expect("mine");
    assert_eq!(loaded.config.model.name, "mine");
    assert_eq!(loaded.source, mine.display().to_string());
    let fallback = dlio_config::load(&args("dlrm")).expect("builtin");
    assert_eq!(fallback.source, dlio_config::BUILTIN_SOURCE);
    let err = dlio_config::load(&args("nope")).unwrap_err().to_string();
    assert_contains(
        &err,
        &[
            "unknown workload `nope`",
            "workload/nope.yaml",
            "unet3d_h100",
        ],
    );
}

#[test]
fn the_tensorflow_loader_with_no_reader_threads_gets_one_with_a_warning() {
    let loaded = load_words(&[
        "workload=resnet50_a100",
        "++workload.framework=tensorflow",
        "++workload.reader.data_loader=tensorflow",
        "++workload.reader.read_threads=0",
    ])
    .unwrap();
    assert_eq!(loaded.config.reader.read_threads, 1);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("reader.read_threads") && w.contains("1 is used")),
        "{:?}",
        loaded.warnings
    );
    let pytorch = load_words(&[
        "workload=unet3d_a100",
        "++workload.reader.data_loader=pytorch",
        "++workload.reader.read_threads=0",
    ])
    .unwrap();
    assert_eq!(
        pytorch.config.reader.read_threads, 0,
        "pytorch reads inline"
    );
}

#[test]
fn hydra_dictionaries_need_no_space_after_the_colon() {
    let loaded = load_words(&[
        "workload=unet3d_a100",
        "++workload.train.computation_time={type:uniform,min:0.5,max:1.5}",
    ])
    .unwrap();
    assert_eq!(
        loaded.config.train.computation_time,
        TimeDistribution::Uniform { min: 0.5, max: 1.5 }
    );
}

/// What mlpstorage 3.0.x adds to a `training run` (from its datagen manifest, its object mode
/// and `--params`) loads under `--strict`, each key with its meaning.
#[test]
fn the_keys_mlpstorage_3_passes_load_under_strict() {
    let loaded = crate::load_words_strict(&[
        "workload=unet3d_b200",
        "++workload.dataset.num_files_train=100",
        "++workload.dataset.num_files_generated=168",
        "++workload.dataset.listing_threads=8",
        "++workload.reader.write_threads=16",
        "++workload.storage.s3_force_path_style=true",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let c = &loaded.config;
    assert_eq!(c.dataset.num_files_generated, 168);
    assert_eq!(c.dataset.listing_threads, 8);
    assert_eq!(c.reader.write_threads, 16);
    // The storage-level key is the option DLIO reads.
    assert!(
        c.storage
            .storage_options
            .as_ref()
            .unwrap()
            .s3_force_path_style
    );
    // No warning beyond the workload file's own.
    let plain = builtin("unet3d_b200", &[]);
    assert_eq!(loaded.warnings, plain.warnings);
    // Their defaults: the fork's.
    let d = plain.config;
    assert_eq!(
        (
            d.dataset.num_files_generated,
            d.dataset.listing_threads,
            d.reader.write_threads
        ),
        (0, 4, 1)
    );
}

#[test]
fn a_storage_level_option_that_contradicts_storage_options_is_refused() {
    // The same value, spelled as the fork's strings or as a boolean, is one value.
    let same = builtin(
        "unet3d_b200",
        &[
            "++workload.storage.s3_force_path_style=true",
            "++workload.storage.storage_options.s3_force_path_style='True'",
        ],
    );
    assert!(
        same.config
            .storage
            .storage_options
            .as_ref()
            .unwrap()
            .s3_force_path_style
    );
    let err = load_words(&[
        "workload=unet3d_b200",
        "++workload.storage.s3_force_path_style=true",
        "++workload.storage.storage_options.s3_force_path_style=false",
    ])
    .unwrap_err()
    .to_string();
    assert_contains(&err, &["storage.s3_force_path_style"]);
    assert_contains(&err, &["storage.storage_options.s3_force_path_style"]);
}

#[test]
fn files_pre_sharded_is_accepted_with_a_warning_as_the_fork_ignores_it() {
    let loaded = crate::load_words_strict(&[
        "workload=unet3d_b200",
        "++workload.dataset.files_pre_sharded=True",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let plain = builtin("unet3d_b200", &[]).warnings;
    assert_eq!(
        loaded.warnings.len(),
        plain.len() + 1,
        "{:?}",
        loaded.warnings
    );
    let added = loaded.warnings.last().unwrap();
    assert_contains(added, &["dataset.files_pre_sharded", "remove the key"]);
}

#[test]
fn fork_key_values_that_cannot_work_are_refused_with_the_fix() {
    for (words, key) in [
        (
            vec![
                "++workload.dataset.num_files_train=100",
                "++workload.dataset.num_files_generated=50",
            ],
            "dataset.num_files_generated",
        ),
        (
            vec!["++workload.dataset.listing_threads=0"],
            "dataset.listing_threads",
        ),
        (
            vec!["++workload.reader.write_threads=0"],
            "reader.write_threads",
        ),
    ] {
        let mut all = vec!["workload=unet3d_b200"];
        all.extend(words);
        let loaded = load_words(&all).unwrap_or_else(|e| panic!("{e}"));
        let err = loaded.config.validate(1).unwrap_err().to_string();
        assert_contains(&err, &[key]);
        assert_contains(&err, &["++workload."]);
    }
}
