//! DLIO's pre-run rules (dlio-semantics.md §3.12) that depend on the config alone.

use dlio_config::{Config, ConfigError};

use crate::assert_contains;

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

/// The validation error for `yaml` on `world` ranks, which must exist.
fn rejected(yaml: &str, world: u32) -> String {
    match config(yaml).validate(world) {
        Ok(w) => panic!("expected a rejection of\n{yaml}\ngot warnings {w:?}"),
        Err(e) => {
            assert!(matches!(e, ConfigError::Invalid { .. }), "{e:?}");
            e.to_string()
        }
    }
}

const PYTORCH_NPZ: &str = "framework: pytorch\ndataset:\n  format: npz\n";
const CHECKPOINTING: &str =
    "framework: pytorch\ndataset:\n  format: npz\nworkflow:\n  checkpoint: True\n";

#[test]
fn a_plain_pytorch_workload_is_valid() {
    assert_eq!(
        config(PYTORCH_NPZ).validate(4).expect("valid"),
        Vec::<String>::new()
    );
}

#[test]
fn tfrecord_is_read_by_the_pytorch_loader_through_its_index() {
    // DLIO refuses this combination; dlio reads the records through the DALI index files.
    let c = config("framework: pytorch\nreader:\n  data_loader: pytorch\n");
    assert_eq!(c.dataset.format, dlio_config::FormatKind::Tfrecord);
    assert_eq!(c.sampler(), dlio_config::Sampler::Index);
    assert_eq!(
        config("framework: tensorflow\n").sampler(),
        dlio_config::Sampler::FileShards
    );
}

#[test]
fn a_parquet_row_group_of_zero_rows_is_refused() {
    let err = rejected(
        "framework: pytorch\ndataset:\n  format: parquet\n  parquet_row_group_size: 0\n",
        1,
    );
    assert_contains(&err, &["dataset.parquet_row_group_size", "1024"]);
}

#[test]
fn framework_and_loader_must_match_under_upstream_semantics_and_warn_under_the_forks() {
    let mismatched = format!("{PYTORCH_NPZ}reader:\n  data_loader: tensorflow\n");
    // MLPerf Storage's fork dropped upstream's check: the pair runs, with a warning.
    let warnings = config(&mismatched).validate(1).unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("upstream DLIO refuses the pair")),
        "{warnings:?}"
    );
    let err = rejected(&format!("semantics: upstream\n{mismatched}"), 1);
    assert_contains(
        &err,
        &[
            "tensorflow data loader",
            "framework pytorch",
            "data_loader=pytorch",
        ],
    );
    let err = rejected(
        "semantics: upstream\nframework: tensorflow\ndataset:\n  format: npz\nreader:\n  \
         data_loader: pytorch\n",
        1,
    );
    assert_contains(&err, &["pytorch data loader", "framework tensorflow"]);
    // DALI serves both frameworks.
    assert!(
        config(&format!("{PYTORCH_NPZ}reader:\n  data_loader: dali\n"))
            .validate(1)
            .is_ok()
    );
}

#[test]
fn loader_rules_do_not_apply_when_nothing_is_read() {
    let checkpoint_only = "framework: pytorch\nworkflow:\n  train: False\n  checkpoint: True\n";
    assert!(config(checkpoint_only).validate(1).is_ok());
}

#[test]
fn a_custom_loader_needs_a_sampler_and_python_plugins_are_refused() {
    let err = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  data_loader_classname: my.Loader\n"),
        1,
    );
    assert_contains(
        &err,
        &[
            "`reader.data_loader_sampler`",
            "data_loader_sampler=iterative",
        ],
    );
    let err = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  data_loader_classname: my.Loader\n  data_loader_sampler: index\n"
        ),
        1,
    );
    assert_contains(
        &err,
        &[
            "`reader.data_loader_classname`",
            "`my.Loader`",
            "Python",
            "built-in loader",
        ],
    );
    let err = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  reader_classname: my.Reader\n"),
        1,
    );
    assert_contains(&err, &["`reader.reader_classname`", "dataset.format"]);
    let err = rejected(
        &format!("{PYTORCH_NPZ}checkpoint:\n  checkpoint_mechanism_classname: my.Ckpt\n"),
        1,
    );
    assert_contains(
        &err,
        &["`checkpoint.checkpoint_mechanism_classname`", "pt_save"],
    );
}

#[test]
fn model_parallelism_rules_follow_dlio() {
    let err = rejected(
        &format!("{PYTORCH_NPZ}model:\n  num_layers: 2\n  parallelism:\n    pipeline: 4\n"),
        4,
    );
    assert_contains(&err, &["`model.num_layers`", "is 2", "pipeline (4)"]);
    let err = rejected(
        &format!("{PYTORCH_NPZ}model:\n  parallelism:\n    pipeline: 2\n    zero_stage: 3\n"),
        2,
    );
    assert_contains(
        &err,
        &["`model.parallelism.zero_stage`", "ZeRO stage 3", "pipeline"],
    );
    let err = rejected(
        &format!("{CHECKPOINTING}model:\n  parallelism:\n    data: 4\n"),
        4,
    );
    assert_contains(
        &err,
        &["`model.parallelism.data`", "checkpoint.mode=subset"],
    );
    let err = rejected(
        &format!("{CHECKPOINTING}model:\n  parallelism:\n    tensor: 8\n    pipeline: 4\n"),
        8,
    );
    assert_contains(
        &err,
        &[
            "8 rank(s), which is not a multiple",
            "8×4 = 32",
            "mode=subset",
        ],
    );
    assert!(
        config(&format!(
            "{CHECKPOINTING}model:\n  parallelism:\n    tensor: 8\n    pipeline: 4\n"
        ))
        .validate(64)
        .is_ok()
    );
}

#[test]
fn subset_mode_needs_a_data_parallelism_that_covers_the_world() {
    let err = rejected(&format!("{CHECKPOINTING}checkpoint:\n  mode: subset\n"), 2);
    assert_contains(
        &err,
        &["`model.parallelism.data`", "subset", "parallelism.data=N"],
    );
    let err = rejected(
        &format!(
            "{CHECKPOINTING}checkpoint:\n  mode: subset\nmodel:\n  parallelism:\n    data: 2\n"
        ),
        4,
    );
    assert_contains(&err, &["2×1×1 = 2 ranks", "fewer than the 4 ranks"]);
    assert!(
        config(&format!(
            "{CHECKPOINTING}checkpoint:\n  mode: subset\nmodel:\n  parallelism:\n    data: 2\n"
        ))
        .validate(2)
        .is_ok()
    );
}

#[test]
fn world_rules_apply_only_when_checkpointing() {
    let training = format!("{PYTORCH_NPZ}model:\n  parallelism:\n    tensor: 8\n    data: 4\n");
    assert!(config(&training).validate(3).is_ok());
}

#[test]
fn checkpoint_reads_cannot_exceed_writes_and_ksm_needs_constant_tensors() {
    let err = rejected(
        &format!(
            "{PYTORCH_NPZ}checkpoint:\n  num_checkpoints_write: 2\n  num_checkpoints_read: 3\n"
        ),
        1,
    );
    assert_contains(
        &err,
        &[
            "`checkpoint.num_checkpoints_read`",
            "is 3",
            "the 2 checkpoints written",
        ],
    );
    let err = rejected(&format!("{PYTORCH_NPZ}checkpoint:\n  ksm: {{}}\n"), 1);
    assert_contains(&err, &["`checkpoint.ksm`", "randomize_tensor=False"]);
    assert!(
        config(&format!(
            "{PYTORCH_NPZ}checkpoint:\n  ksm: {{}}\n  randomize_tensor: False\n"
        ))
        .validate(1)
        .is_ok()
    );
}

#[test]
fn record_dims_rules_follow_dlio() {
    let err = rejected(
        &format!("{PYTORCH_NPZ}  record_dims: [3, 8]\n  hdf5:\n    num_dset_per_record: 2\n"),
        1,
    );
    assert_contains(
        &err,
        &["`dataset.hdf5.num_dset_per_record`", "record_dims[0] = 3"],
    );
    let err = rejected(
        &format!("{PYTORCH_NPZ}  record_dims: [8, 8]\n  record_length_bytes_stdev: 10\n"),
        1,
    );
    assert_contains(
        &err,
        &["`dataset.record_dims`", "record_length_bytes_stdev"],
    );
}

#[test]
fn zero_and_negative_counts_are_rejected() {
    let cases = [
        ("reader:\n  batch_size: 0\n", "`reader.batch_size`"),
        (
            "reader:\n  batch_size_eval: 0\n",
            "`reader.batch_size_eval`",
        ),
        ("train:\n  epochs: 0\n", "`train.epochs`"),
        (
            "dataset:\n  format: npz\n  num_samples_per_file: 0\n",
            "`dataset.num_samples_per_file`",
        ),
        (
            "train:\n  total_training_steps: -5\n",
            "`train.total_training_steps`",
        ),
        (
            "checkpoint:\n  num_checkpoints_write: -2\n",
            "`checkpoint.num_checkpoints_write`",
        ),
        (
            "dataset:\n  format: npz\n  record_length_bytes: -1\n",
            "`dataset.record_length_bytes`",
        ),
        (
            "model:\n  parallelism:\n    tensor: 0\n",
            "`model.parallelism.tensor`",
        ),
        (
            "model:\n  parallelism:\n    zero_stage: 4\n",
            "`model.parallelism.zero_stage`",
        ),
        ("metric:\n  au: 90\n", "`metric.au`"),
        (
            "train:\n  computation_time: {mean: 1, stdev: -1}\n",
            "`train.computation_time`",
        ),
    ];
    for (yaml, key) in cases {
        let yaml = format!("framework: pytorch\n{yaml}");
        let yaml = if yaml.contains("dataset:") {
            yaml
        } else {
            format!("{yaml}dataset:\n  format: npz\n")
        };
        let err = rejected(&yaml, 1);
        assert_contains(&err, &[key, "Fix:"]);
    }
    let err = rejected(&format!("{PYTORCH_NPZ}metric:\n  au: 90\n"), 1);
    assert_contains(&err, &["metric.au=0.9"]);
}

#[test]
fn storage_engine_keys_parse_with_defaults_and_contradictions_are_refused() {
    crate::register_names();
    use dlio_config::IoEngine;
    let defaults = config(PYTORCH_NPZ);
    assert_eq!(defaults.storage.io_engine, IoEngine::Posix);
    assert_eq!(defaults.storage.io_depth, 8);
    assert!(!defaults.storage.drop_page_cache);
    let uring = config(&format!(
        "{PYTORCH_NPZ}storage:\n  io_engine: io_uring\n  io_depth: 32\n  drop_page_cache: True\n"
    ));
    assert_eq!(uring.storage.io_engine, IoEngine::IoUring);
    assert_eq!(uring.storage.io_depth, 32);
    assert!(uring.storage.drop_page_cache);
    assert!(uring.validate(1).is_ok());

    let message = rejected(
        &format!("{PYTORCH_NPZ}storage:\n  storage_type: s3\n  io_engine: io_uring\n"),
        1,
    );
    assert_contains(&message, &["storage.io_engine"]);
    let message = rejected(&format!("{PYTORCH_NPZ}storage:\n  io_depth: 0\n"), 1);
    assert_contains(&message, &["storage.io_depth"]);
    assert!(Config::from_yaml("storage:\n  io_engine: spdk\n").is_err());
}

#[test]
fn an_s3_run_refuses_a_local_checkpoint_folder() {
    let yaml = "storage:\n  storage_type: s3\n  storage_root: bkt\nworkflow:\n  checkpoint: True\n  \
                train: False\ncheckpoint:\n  checkpoint_folder: file:///nvme/ckpt\n";
    let err = rejected(yaml, 1);
    assert_contains(
        &err,
        &["checkpoint.checkpoint_folder", "file:///nvme/ckpt", "s3://"],
    );
    let fine = yaml.replace("file:///nvme/ckpt", "s3://bkt/ckpt");
    assert!(config(&fine).validate(1).is_ok());
}

#[test]
fn upstreams_none_and_custom_loaders_and_none_sampler_are_accepted_with_its_meaning() {
    // `none` and `custom` parse; a run that reads is refused (DLIO fails building the loader),
    // a run that reads nothing is valid.
    let err = rejected("framework: pytorch\nreader:\n  data_loader: none\n", 1);
    assert_contains(&err, &["reader.data_loader", "none", "pytorch"]);
    let err = rejected("framework: pytorch\nreader:\n  data_loader: custom\n", 1);
    assert_contains(&err, &["reader.data_loader", "data_loader_classname"]);
    for loader in ["none", "custom"] {
        let generate_only = format!(
            "framework: pytorch\nworkflow:\n  generate_data: True\n  train: False\n  \
             evaluation: False\nreader:\n  data_loader: {loader}\n"
        );
        config(&generate_only)
            .validate(1)
            .expect("a run that reads nothing");
    }
    // `data_loader_sampler: none` is the loader's own sampler, as when unset.
    let c = config(
        "framework: pytorch\nreader:\n  data_loader: pytorch\n  data_loader_sampler: none\n",
    );
    assert_eq!(c.reader.data_loader_sampler, None);
    assert_eq!(c.sampler(), dlio_config::Sampler::Index);
}

#[test]
fn upstreams_unsigned_and_bool_element_types_have_numpys_sizes() {
    for (name, size, descr) in [
        ("uint16", 2, "<u2"),
        ("uint32", 4, "<u4"),
        ("uint64", 8, "<u8"),
        ("bool", 1, "|b1"),
    ] {
        let c = config(&format!("dataset:\n  record_element_type: {name}\n"));
        assert_eq!(c.dataset.record_element_type.size(), size, "{name}");
        assert_eq!(c.dataset.record_element_type.numpy_descr(), descr, "{name}");
        assert_eq!(c.dataset.record_element_type.name(), name);
    }
}

#[test]
fn the_keys_characterize_writes_are_validated() {
    let fine = format!(
        "{PYTORCH_NPZ}  side_files:\n    - {{name: meta/m.json, size_bytes: 191, every_steps: 4}}\n\
         reader:\n  sample_requests:\n    - {{from: end, offset: 22, size: 22}}\n  read_ahead: False\n"
    );
    let c = config(&fine);
    c.validate(1).expect("valid");
    assert_eq!(c.dataset.side_files[0].every_steps, 4);
    assert!(!c.reader.read_ahead);
    assert_eq!(
        c.reader.sample_requests[0].from,
        dlio_config::RequestAnchor::End
    );

    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  transfer_size: 4096\n  transfer_size_distribution:\n    - {{size: 512, weight: 1}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &[
            "reader.transfer_size_distribution",
            "remove reader.transfer_size",
        ],
    );
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  transfer_size_distribution:\n    - {{size: 0, weight: 1}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &["reader.transfer_size_distribution[0]", "positive"],
    );
    // A header read at each opening: indexed_binary's only.
    let message = rejected(
        &PYTORCH_NPZ.replace("dataset:\n", "dataset:\n  header_read_bytes: 44\n"),
        1,
    );
    assert_contains(&message, &["dataset.header_read_bytes", "indexed_binary"]);
    // A buffered stream: read, and refused beside another request shape, at size 0, with
    // O_DIRECT.
    let c = config(&format!(
        "{PYTORCH_NPZ}reader:\n  read_buffer: {{size: 8192, header_read: True, app_read_size: 65536}}\n"
    ));
    c.validate(1).expect("valid");
    assert_eq!(
        c.reader.read_buffer,
        Some(dlio_config::ReadBuffer {
            size: 8192,
            header_read: true,
            app_read_size: 65536
        })
    );
    assert!(c.shapes_requests());
    // The work between requests: read beside a transfer size.
    let c = config(&format!(
        "{PYTORCH_NPZ}reader:\n  transfer_size: 10240\n  request_work_time: 0.00015\n"
    ));
    c.validate(1).expect("valid");
    assert_eq!(c.reader.request_work_time, 0.00015);
    for (yaml, said) in [
        (
            "  read_buffer: {size: 4096}\n  transfer_size: 4096\n",
            &["reader.read_buffer", "remove reader.transfer_size"][..],
        ),
        (
            "  read_buffer: {size: 0}\n",
            &["reader.read_buffer.size", "size: 4096"][..],
        ),
        (
            "  read_buffer: {size: 4096}\n  odirect: True\n",
            &["reader.read_buffer", "O_DIRECT"][..],
        ),
        (
            "  head_request_size: 4096\n  read_buffer: {size: 4096}\n",
            &["reader.head_request_size", "remove reader.read_buffer"][..],
        ),
        (
            "  head_request_size: 0\n",
            &["reader.head_request_size", "is 0"][..],
        ),
        (
            "  request_work_time: 0.001\n",
            &["reader.request_work_time", "reader.transfer_size"][..],
        ),
        (
            "  request_work_time: 0.001\n  read_buffer: {size: 4096}\n",
            &[
                "reader.request_work_time",
                "remove reader.request_work_time",
            ][..],
        ),
        (
            "  request_work_time: -1\n  transfer_size: 4096\n",
            &["reader.request_work_time", "is -1"][..],
        ),
    ] {
        let message = rejected(&format!("{PYTORCH_NPZ}reader:\n{yaml}"), 1);
        assert_contains(&message, said);
    }
    for name in ["work", "wait"] {
        let message = rejected(
            &format!(
                "{PYTORCH_NPZ}reader:\n  sample_requests:\n    - {{from: start, offset: 0, size: 100, {name}: -0.5}}\n"
            ),
            1,
        );
        assert_contains(
            &message,
            &[&format!("reader.sample_requests[0].{name}"), "-0.5"],
        );
    }
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  odirect: True\n  sample_requests:\n    - {{from: start, offset: 0, size: 100}}\n"
        ),
        1,
    );
    assert_contains(&message, &["reader.sample_requests", "O_DIRECT"]);

    // Several patterns: parsed with their weights and whether they read the rest; refused
    // beside reader.sample_requests, with a weight of 0 or with no request.
    let patterns = "  sample_request_patterns:\n    - {weight: 3, read_rest: False, requests: \
                    [{from: end, offset: 22, size: 22}, {from: start, offset: 0, size: 100}]}\n    \
                    - {requests: [{from: start, offset: 100, size: 100}]}\n";
    let c = config(&format!("{PYTORCH_NPZ}reader:\n{patterns}"));
    c.validate(1).expect("valid");
    let read = c.sample_request_patterns();
    assert_eq!(read.len(), 2);
    assert_eq!((read[0].weight, read[0].read_rest), (3.0, false));
    assert_eq!(read[0].requests[1].size, 100);
    assert_eq!((read[1].weight, read[1].read_rest), (1.0, true));
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n{patterns}  sample_requests:\n    - {{from: start, offset: 0, size: 100}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &[
            "reader.sample_request_patterns",
            "reader.sample_requests",
            "keep one",
        ],
    );
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  sample_request_patterns:\n    - {{weight: 0, requests: [{{size: 10}}]}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &["reader.sample_request_patterns[0].weight", "positive"],
    );
    // No request and the rest read (the default): the whole file in one request, beside a
    // pattern of parts. No request and no rest reads nothing.
    let whole = config(&format!(
        "{PYTORCH_NPZ}reader:\n  sample_request_patterns:\n    - {{weight: 1}}\n    - {{weight: 2, requests: [{{size: 10}}]}}\n"
    ));
    whole.validate(1).expect("valid");
    assert!(whole.sample_request_patterns()[0].requests.is_empty());
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  sample_request_patterns:\n    - {{weight: 1, read_rest: False}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &[
            "reader.sample_request_patterns[0].requests",
            "empty",
            "reads nothing",
        ],
    );
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}reader:\n  sample_request_patterns:\n    - {{requests: [{{size: 0}}]}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &["reader.sample_request_patterns[0].requests[0]", "size is 0"],
    );
    // One pattern as reader.sample_requests reads the rest.
    let one = config(&fine).sample_request_patterns();
    assert!(one.len() == 1 && one[0].read_rest);
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}  side_files:\n    - {{name: ../escape.json, size_bytes: 10, every_steps: 1}}\n"
        ),
        1,
    );
    assert_contains(
        &message,
        &[
            "dataset.side_files[0]",
            "../escape.json",
            "inside the data folder",
        ],
    );
    let message = rejected(
        &format!(
            "{PYTORCH_NPZ}  side_files:\n    - {{name: m.json, size_bytes: 10, every_steps: 0}}\n"
        ),
        1,
    );
    assert_contains(&message, &["every_steps is 0"]);
    // Companions: a folder of their own, outside the splits; not for tf.data's file shards.
    let c = config(&format!(
        "{PYTORCH_NPZ}  sample_companions:\n    - {{folder: calib, size_bytes: 1620}}\n"
    ));
    c.validate(1).expect("valid");
    assert_eq!(c.dataset.sample_companions[0].size_bytes, 1620);
    for (folder, says) in [
        ("../up", "inside the data"),
        ("train/calib", "outside the splits"),
        ("valid", "outside the splits"),
    ] {
        let message = rejected(
            &format!(
                "{PYTORCH_NPZ}  sample_companions:\n    - {{folder: {folder}, size_bytes: 9}}\n"
            ),
            1,
        );
        assert_contains(&message, &["dataset.sample_companions[0]", says]);
    }
    let message = rejected(
        &format!("{PYTORCH_NPZ}  sample_companions:\n    - {{folder: c, size_bytes: 0}}\n"),
        1,
    );
    assert_contains(&message, &["size_bytes is 0"]);
    let message = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\n  sample_companions:\n    - \
         {folder: c, size_bytes: 9}\n",
        1,
    );
    assert_contains(&message, &["dataset.sample_companions[0]", "file shards"]);
    // The tf.data pipeline always reads ahead.
    let message = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\nreader:\n  read_ahead: False\n",
        1,
    );
    assert_contains(&message, &["reader.read_ahead", "tf.data"]);
    // An unknown key inside an entry is named like any other.
    let loaded = dlio_config::load_text(
        "w.yaml",
        &format!("{PYTORCH_NPZ}  side_files:\n    - {{nme: m.json}}\n"),
        &[],
    )
    .unwrap();
    assert_contains(
        &loaded.warnings.join("\n"),
        &["unknown key `dataset.side_files.nme`"],
    );
}

#[test]
fn a_batch_time_is_read_by_reader_threads_and_refused_with_the_tfrecord_stream() {
    let c = config(&format!(
        "{PYTORCH_NPZ}reader:\n  batch_time: {{type: quantiles, values: [0.001, 0.003]}}\n"
    ));
    assert!((c.reader.batch_time.mean() - 0.002).abs() < 1e-12);
    assert!(c.validate(1).is_ok());
    let err = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\nreader:\n  batch_time: 0.002\n",
        1,
    );
    assert_contains(&err, &["reader.batch_time", "data_loader_sampler: index"]);
    let negative = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  batch_time: {{mean: 0.001, stdev: -1}}\n"),
        1,
    );
    assert_contains(&negative, &["reader.batch_time", "stdev"]);
}

#[test]
fn hdf5_label_reads_need_the_hdf5_reader_of_upstream_semantics() {
    let ok = config(
        "framework: pytorch\nsemantics: upstream\ndataset:\n  format: hdf5\n  hdf5:\n    label_read: to_end\n",
    );
    assert_eq!(ok.dataset.hdf5.label_read, dlio_config::LabelRead::ToEnd);
    assert!(ok.validate(1).is_ok());
    // The fork's semantics (the default) read each hdf5 file whole as bytes.
    let err = rejected(
        "framework: pytorch\ndataset:\n  format: hdf5\n  hdf5:\n    label_read: element\n",
        1,
    );
    assert_contains(&err, &["dataset.hdf5.label_read", "semantics: upstream"]);
}

#[test]
fn draws_with_replacement_need_a_keyed_shuffle_and_an_index_sampler() {
    let ok = config(&format!(
        "{PYTORCH_NPZ}reader:\n  sample_shuffle: seed\n  sample_replacement: True\n"
    ));
    assert!(ok.reader.sample_replacement);
    assert!(ok.validate(1).is_ok());
    let unkeyed = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  sample_replacement: True\n"),
        1,
    );
    assert_contains(
        &unkeyed,
        &["reader.sample_replacement", "sample_shuffle to seed"],
    );
    let streamed = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\nreader:\n  sample_shuffle: seed\n  sample_replacement: True\n",
        1,
    );
    assert_contains(
        &streamed,
        &["reader.sample_replacement", "data_loader_sampler: index"],
    );
}

#[test]
fn the_open_time_is_a_reader_thread_s_and_refused_with_the_tfrecord_stream() {
    let ok = config(&format!("{PYTORCH_NPZ}reader:\n  open_time: 0.0005\n"));
    assert!(ok.validate(1).is_ok());
    let err = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\nreader:\n  open_time: 0.002\n",
        1,
    );
    assert_contains(&err, &["reader.open_time", "data_loader_sampler: index"]);
}

#[test]
fn spread_batches_need_reader_threads_that_read_ahead() {
    let ok = config(&format!(
        "{PYTORCH_NPZ}reader:\n  read_threads: 4\n  spread_batches: True\n"
    ));
    assert!(ok.reader.spread_batches);
    assert!(ok.validate(1).is_ok());
    let without = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  read_ahead: False\n  spread_batches: True\n"),
        1,
    );
    assert_contains(&without, &["reader.spread_batches", "read_ahead True"]);
}

#[test]
fn a_sieve_needs_contiguous_hdf5_records_read_sample_by_sample() {
    let hdf5 = "framework: pytorch\nsemantics: upstream\ndataset:\n  format: hdf5\n";
    let ok = config(&format!("{hdf5}  hdf5:\n    sieve_bytes: 65536\n"));
    assert_eq!(ok.dataset.hdf5.sieve_bytes, 65536);
    assert!(ok.validate(1).is_ok());
    // The fork reads files whole; chunked records go through the chunk cache.
    let fork = rejected(
        "framework: pytorch\ndataset:\n  format: hdf5\n  hdf5:\n    sieve_bytes: 65536\n",
        1,
    );
    assert_contains(&fork, &["dataset.hdf5.sieve_bytes", "semantics: upstream"]);
    let chunked = rejected(
        &format!("{hdf5}  hdf5:\n    sieve_bytes: 65536\n    chunk_dims: [4]\n"),
        1,
    );
    assert_contains(&chunked, &["dataset.hdf5.sieve_bytes", "chunk_dims"]);
    let npz = rejected(
        &format!("{PYTORCH_NPZ}  hdf5:\n    sieve_bytes: 65536\n"),
        1,
    );
    assert_contains(&npz, &["dataset.hdf5.sieve_bytes", "format hdf5"]);
}

#[test]
fn a_request_delay_needs_reader_threads_that_read_ahead() {
    let c = config(&format!("{PYTORCH_NPZ}reader:\n  request_delay: 0.0015\n"));
    assert!((c.reader.request_delay - 0.0015).abs() < 1e-12);
    assert!(c.validate(1).is_ok());
    for (reader, names) in [
        ("read_threads: 0", "read_threads: 0"),
        ("read_ahead: False", "read_ahead: False"),
        ("spread_batches: True", "spread_batches: True"),
        ("request_delay: -1", "seconds"),
    ] {
        let delay = if reader.starts_with("request_delay") {
            String::new()
        } else {
            "  request_delay: 0.002\n".into()
        };
        let err = rejected(&format!("{PYTORCH_NPZ}reader:\n  {reader}\n{delay}"), 1);
        assert_contains(&err, &["reader.request_delay", names]);
    }
    let stream = rejected(
        "framework: tensorflow\ndataset:\n  format: tfrecord\nreader:\n  request_delay: 0.002\n",
        1,
    );
    assert_contains(&stream, &["reader.request_delay", "tf.data"]);
}

#[test]
fn a_buffer_page_offset_is_inside_a_page_and_refused_with_o_direct() {
    let c = config(&format!("{PYTORCH_NPZ}reader:\n  buffer_page_offset: 16\n"));
    assert_eq!(c.reader.buffer_page_offset, Some(16));
    assert!(c.validate(1).is_ok());
    assert_eq!(config(PYTORCH_NPZ).reader.buffer_page_offset, None);
    let past = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  buffer_page_offset: 4096\n"),
        1,
    );
    assert_contains(&past, &["reader.buffer_page_offset", "0 to 4095"]);
    let direct = rejected(
        &format!("{PYTORCH_NPZ}reader:\n  buffer_page_offset: 16\n  odirect: True\n"),
        1,
    );
    assert_contains(&direct, &["reader.buffer_page_offset", "O_DIRECT"]);
}
