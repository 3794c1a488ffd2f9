//! Rejected workloads: every message names the file and line (or the override), the key,
//! and the fix.

use dlio_config::ConfigError;

use crate::{TempWorkload, assert_contains, builtin, error_of, load_words};

/// A unet3d-like workload with `batch_size` on line 14.
const UNET3D_SEVEN: &str = "\
model:
  name: unet3d
framework: pytorch
workflow:
  generate_data: False
  train: True
dataset:
  data_folder: data/unet3d/
  format: npz
  num_files_train: 168
reader:
  data_loader: pytorch
  read_threads: 4
  batch_size: seven
";

#[test]
fn a_wrong_type_names_file_line_key_and_expected_type() {
    let err = error_of("unet3d.yaml", UNET3D_SEVEN, &[]);
    assert_contains(
        &err,
        &[
            "workload file ",
            "unet3d.yaml, line 14: `reader.batch_size` must be a non-negative integer, got `seven`",
        ],
    );
}

#[test]
fn wrong_values_of_every_kind_say_what_is_expected() {
    crate::register_names();
    let cases = [
        (
            "dataset:\n  num_files_train: -3\n",
            "line 2",
            "`dataset.num_files_train` must be a non-negative integer, got `-3`",
        ),
        ("dataset:\n  num_files_train: 2.5\n", "line 2", "got `2.5`"),
        (
            "dataset:\n  format: npzz\n",
            "line 2",
            "`dataset.format` must be one of `npz`, `npy`",
        ),
        (
            "reader:\n  pin_memory: maybe\n",
            "line 2",
            "`reader.pin_memory` must be true or false, got `maybe`",
        ),
        (
            "dataset:\n  record_dims: 7\n",
            "line 2",
            "`dataset.record_dims` must be a list",
        ),
        (
            "dataset:\n  record_dims: [1, x]\n",
            "line 2",
            "`dataset.record_dims[1]` must be a non-negative integer, got `x`",
        ),
        (
            "metric:\n  au: high\n",
            "line 2",
            "`metric.au` must be a number, got `high`",
        ),
        ("reader: 5\n", "line 1", "`reader` must be a section"),
        (
            "model:\n  parallelism:\n    tensor: 99999999999\n",
            "line 3",
            "`model.parallelism.tensor` must be",
        ),
    ];
    for (yaml, line, needle) in cases {
        let err = error_of("w.yaml", yaml, &[]);
        assert_contains(&err, &["w.yaml", line, needle]);
    }
}

#[test]
fn an_unknown_key_suggests_the_closest_key_even_in_another_section() {
    let err = error_of("w.yaml", "model:\n  name: x\nreader:\n  epochs: 3\n", &[]);
    assert_contains(
        &err,
        &[
            "w.yaml, line 4: unknown key `reader.epochs`",
            "did you mean `train.epochs`?",
        ],
    );
    let err = error_of("w.yaml", "reader:\n  batchsize: 3\n", &[]);
    assert_contains(&err, &["line 2", "did you mean `reader.batch_size`?"]);
    let err = error_of("w.yaml", "datset:\n  format: npz\n", &[]);
    assert_contains(
        &err,
        &["line 1", "unknown key `datset`", "did you mean `dataset`?"],
    );
}

#[test]
fn an_unknown_key_without_a_close_match_lists_the_allowed_keys() {
    let err = error_of("w.yaml", "metric:\n  zzzzzzzz: 1\n", &[]);
    assert_contains(
        &err,
        &[
            "unknown key `metric.zzzzzzzz`",
            "the keys allowed in `metric` are: au",
        ],
    );
}

#[test]
fn keys_in_flow_mappings_and_under_data_reader_are_located() {
    let err = error_of(
        "w.yaml",
        "framework: pytorch\nreader: {batch_size: seven}\n",
        &[],
    );
    assert_contains(&err, &["line 2", "`reader.batch_size`"]);
    let err = error_of(
        "w.yaml",
        "# comment\ndata_reader:\n  read_threads: many\n",
        &[],
    );
    assert_contains(&err, &["line 3", "`reader.read_threads`"]);
    let err = error_of("w.yaml", "dataset:\n  record_length: big\n", &[]);
    assert_contains(
        &err,
        &["line 2", "`dataset.record_length_bytes` must be a number"],
    );
}

#[test]
fn malformed_yaml_gives_line_and_column() {
    let err = error_of("broken.yaml", "model:\n  name: x\n reader: [1, 2\n", &[]);
    assert_contains(
        &err,
        &[
            "workload file ",
            "broken.yaml, line ",
            ", column ",
            "invalid YAML",
        ],
    );
    let w = TempWorkload::new("broken.yaml", "train:\n  epochs: 1\n   seed: 3\n");
    match w.load(&[]).unwrap_err() {
        ConfigError::Yaml { line, column, .. } => {
            assert_eq!(line, 3);
            assert!(column > 0);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_duplicate_key_is_reported_where_it_happens() {
    let err = error_of(
        "dup.yaml",
        "reader:\n  batch_size: 1\n  batch_size: 2\n",
        &[],
    );
    assert_contains(
        &err,
        &[
            "dup.yaml, line ",
            "duplicate",
            "\"batch_size\"",
            "remove one of them",
        ],
    );
}

#[test]
fn a_workload_that_is_not_a_mapping_is_rejected() {
    let err = error_of("list.yaml", "- a\n- b\n", &[]);
    assert_contains(&err, &["list.yaml", "must be a mapping of sections"]);
    let err = error_of("keys.yaml", "dataset:\n  1: x\n", &[]);
    assert_contains(&err, &["keys.yaml", "`1`", "`dataset`"]);
}

#[test]
fn both_spellings_with_different_values_are_an_error_naming_both() {
    let err = error_of(
        "w.yaml",
        "dataset:\n  record_length_bytes: 100\n  record_length: 200\n",
        &[],
    );
    assert_contains(
        &err,
        &[
            "w.yaml, line 3",
            "both `dataset.record_length_bytes` and `dataset.record_length`",
            "100 and 200",
        ],
    );
    let err = error_of(
        "w.yaml",
        "reader:\n  batch_size: 1\ndata_reader:\n  batch_size: 2\n",
        &[],
    );
    assert_contains(&err, &["both `reader` and `data_reader`", "line 3"]);
    let err = error_of(
        "w.yaml",
        "train:\n  computation_time: {mean: 1, stdev: 0.1}\n  computation_time_stdev: 0.2\n",
        &[],
    );
    assert_contains(
        &err,
        &[
            "train.computation_time.stdev",
            "train.computation_time_stdev",
        ],
    );
}

#[test]
fn a_malformed_time_distribution_says_which_parameter_is_missing() {
    let err = error_of(
        "w.yaml",
        "train:\n  computation_time: {type: uniform, min: 1}\n",
        &[],
    );
    assert_contains(
        &err,
        &[
            "line 2",
            "`train.computation_time`",
            "needs `min` and `max`",
        ],
    );
    let err = error_of(
        "w.yaml",
        "train:\n  computation_time: {type: weibull, a: 1}\n",
        &[],
    );
    assert_contains(&err, &["`type: weibull`", "normal, uniform, gamma"]);
    let err = error_of("w.yaml", "train:\n  computation_time: slow\n", &[]);
    assert_contains(&err, &["must be a number of seconds"]);
}

#[test]
fn every_key_dlio_ignores_is_accepted_with_one_warning_naming_what_dlio_reads() {
    let yaml = "\
model:
  model_size: 5
workflow:
  debug: True
dataset:
  enable_chunking: True
  chunk_size: 10
  record_element_bytes: 4
reader:
  file_access: multi
checkpoint:
  type: all_ranks
  model_size: 7
  model_datatype: fp32
";
    let w = TempWorkload::new("w.yaml", yaml);
    let loaded = w.load(&[]).expect("ignored keys load");
    let expected = [
        ("`model.model_size`", "line 2", "`model.model_size_bytes`"),
        (
            "`checkpoint.model_size`",
            "line 13",
            "`model.model_size_bytes`",
        ),
        (
            "`checkpoint.model_datatype`",
            "line 14",
            "`model.model_datatype`",
        ),
        ("`checkpoint.type`", "line 12", "no effect"),
        (
            "`dataset.enable_chunking`",
            "line 6",
            "`dataset.hdf5.chunk_dims`",
        ),
        (
            "`dataset.chunk_size`",
            "line 7",
            "`dataset.hdf5.chunk_dims`",
        ),
        (
            "`dataset.record_element_bytes`",
            "line 8",
            "`dataset.record_element_type`",
        ),
        ("`reader.file_access`", "line 10", "no effect"),
        ("`workflow.debug`", "line 4", "no effect"),
    ];
    assert_eq!(
        loaded.warnings.len(),
        expected.len(),
        "{:#?}",
        loaded.warnings
    );
    for (key, line, reads) in expected {
        let hits: Vec<&String> = loaded.warnings.iter().filter(|w| w.contains(key)).collect();
        assert_eq!(hits.len(), 1, "{key}: {:#?}", loaded.warnings);
        assert_contains(hits[0], &["w.yaml", line, reads]);
    }
    assert_eq!(loaded.config.model.model_size_bytes, 10240);
    // The same keys given as overrides name the override.
    let loaded = builtin("default", &["++workload.workflow.debug=True"]);
    assert_eq!(loaded.warnings.len(), 1);
    assert_contains(
        &loaded.warnings[0],
        &["override `++workload.workflow.debug=True`"],
    );
}

#[test]
fn unknown_workloads_and_missing_files_say_what_exists() {
    let err = load_words(&["workload=unet4d"]).unwrap_err().to_string();
    assert_contains(
        &err,
        &["unknown workload `unet4d`", "unet3d_a100", "llama_8b_zero3"],
    );
    let err = load_words(&["workload=/nonexistent/w.yaml"])
        .unwrap_err()
        .to_string();
    assert_contains(&err, &["cannot read workload file /nonexistent/w.yaml"]);
}
