//! What `dlio config`, `dlio config --query` and `dlio workloads` print.

use dlio_config::{
    Config, ConfigError, builtin_workloads, load_text, workload_row, workload_table,
};

use crate::{assert_contains, builtin};

#[test]
fn to_yaml_round_trips_every_builtin_workload() {
    for w in builtin_workloads() {
        let config = builtin(w.name, &[]).config;
        let yaml = config.to_yaml();
        let back = load_text("resolved.yaml", &yaml, &[])
            .unwrap_or_else(|e| panic!("{}: {e}\n{yaml}", w.name));
        assert_eq!(back.config, config, "{}:\n{yaml}", w.name);
        assert!(back.warnings.is_empty(), "{}: {:?}", w.name, back.warnings);
    }
}

#[test]
fn to_yaml_round_trips_distributions_and_optional_sections() {
    let config = builtin(
        "unet3d_h100_s3",
        &[
            "++workload.train.computation_time={type: gamma, shape: 2, scale: 0.1}",
            "++workload.evaluation.eval_time={mean: 1, stdev: 0.5}",
            "++workload.reader.preprocess_time={type: poisson, lam: 0.01}",
            "++workload.checkpoint.ksm={await_time: 5}",
            "++workload.checkpoint.randomize_tensor=False",
            "++workload.dataset.hdf5.max_shape=[null, 8]",
            "++workload.reader.data_loader_sampler=iterative",
        ],
    )
    .config;
    let back = Config::from_yaml(&config.to_yaml()).expect("round trip");
    assert_eq!(back, config);
}

#[test]
fn to_yaml_lists_every_section_in_dlio_order_with_every_key() {
    let yaml = builtin("unet3d_a100", &[]).config.to_yaml();
    let sections: Vec<&str> = yaml
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(|l| l.split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(
        sections,
        [
            "model",
            "framework",
            "workflow",
            "storage",
            "dataset",
            "reader",
            "train",
            "evaluation",
            "checkpoint",
            "output",
            "profiling",
            "metric",
            "semantics"
        ]
    );
    assert_contains(
        &yaml,
        &[
            "  record_length_bytes: 146600628\n",
            "  computation_time: 0.636\n",
            "  batch_size: 7\n",
            "  data_loader: pytorch\n",
            "  transfer_size: null\n",
            "  hdf5:\n    num_dset_per_record: 1\n",
            "  metric:\n    exclude_start_steps: 1\n",
        ],
    );
}

#[test]
fn query_prints_one_value_or_a_section() {
    let c = builtin("default", &[]).config;
    assert_eq!(c.query("dataset.num_files_train").expect("q"), "64");
    assert_eq!(c.query("dataset.record_length_bytes").expect("q"), "4096");
    assert_eq!(c.query("dataset.record_length").expect("legacy"), "4096");
    assert_eq!(c.query("framework").expect("q"), "pytorch");
    assert_eq!(c.query("data_reader.batch_size").expect("alias"), "4");
    assert_eq!(c.query("workflow.evaluation").expect("q"), "true");
    assert_eq!(c.query("reader.transfer_size").expect("q"), "null");
    assert_eq!(c.query("dataset.data_folder").expect("q"), "data/default");
    assert_eq!(c.query("evaluation.eval_time").expect("q"), "0.5");
    assert_eq!(c.query("train.computation_time_stdev").expect("q"), "0");
    assert_eq!(
        c.query("model.parallelism").expect("section"),
        "tensor: 1\npipeline: 1\ndata: -1\nzero_stage: 0"
    );
    let dims = builtin("default", &["++workload.dataset.record_dims=[3,4]"]).config;
    assert_eq!(dims.query("dataset.record_dims").expect("list"), "[3, 4]");
    let resnet = builtin("resnet50_h100", &[]).config;
    assert_eq!(
        resnet.query("dataset.record_length_bytes").expect("q"),
        "114660.07"
    );
}

#[test]
fn query_of_an_unknown_key_suggests_one() {
    let err = builtin("default", &[])
        .config
        .query("reader.epochs")
        .unwrap_err();
    assert!(matches!(err, ConfigError::UnknownKey { .. }));
    assert_contains(
        &err.to_string(),
        &[
            "query: unknown key `reader.epochs`",
            "did you mean `train.epochs`?",
        ],
    );
}

#[test]
fn the_workload_table_has_one_line_per_builtin() {
    let table = workload_table().expect("table");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + dlio_config::builtin_names().len());
    assert!(lines[0].starts_with("WORKLOAD"));
    let unet = lines
        .iter()
        .find(|l| l.starts_with("unet3d_a100 "))
        .expect("unet3d row");
    assert_contains(
        unet,
        &["npz", "168/0", "139.8 MiB ±65.2 MiB", "7", "0.636 s"],
    );
    let row = workload_row("resnet50_h100").expect("row");
    assert_eq!(row.format, "tfrecord");
    assert_eq!(row.files, "1024/0");
    assert_eq!(row.record, "112.0 KiB ×1251/file");
    assert_eq!(row.batch, "400");
    assert_eq!(row.compute, "0.224 s");
    let llama = workload_row("llama_70b").expect("row");
    assert_eq!(llama.format, "-");
    assert_eq!(
        llama.compute,
        "checkpoint only: 80 layers, TP8 PP4 ZeRO1, write 10 / read 10"
    );
    assert!(workload_row("nope").is_err());
}
