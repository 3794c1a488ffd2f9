//! `dlio_rs.page_cache`: whether the device under the data folder delivered the bytes read.

mod common;

use common::{dlio, json, run_ok};

#[test]
fn a_warm_run_is_called_a_page_cache_run_and_a_dropped_one_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let mut fractions = Vec::new();
    for drop in ["False", "True"] {
        let out = tmp.path().join(format!("out-{drop}"));
        let output = run_ok(dlio().args([
            "run".to_string(),
            "workload=default".into(),
            format!(
                "++workload.dataset.data_folder={}",
                tmp.path().join("data").display()
            ),
            format!("++workload.output.folder={}", out.display()),
            "++workload.workflow.generate_data=True".into(),
            "++workload.dataset.num_files_train=64".into(),
            "++workload.dataset.record_length_bytes=1048576".into(),
            "++workload.train.computation_time=0".into(),
            "++workload.workflow.evaluation=False".into(),
            format!("++workload.storage.drop_page_cache={drop}"),
        ]));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let section = json(&out.join("summary.json"))["dlio_rs"]["page_cache"].clone();
        assert!(
            section["bytes_read"].as_u64().unwrap() >= 64 << 20,
            "{section}"
        );
        match section["page_cache_fraction"].as_f64() {
            // tmpfs or overlay under TMPDIR (some CI machines): no counters to read.
            None => {
                assert!(
                    stderr.contains("Cannot tell whether the page cache served"),
                    "{stderr}"
                );
                return;
            }
            Some(f) => fractions.push((f, stderr.into_owned())),
        }
    }
    // Just generated, so warm: the device delivered little of it (other programs' reads on the
    // device can only raise what it delivered). Dropped before each epoch: it delivered it all.
    let (warm, warm_log) = &fractions[0];
    assert!(*warm > 0.5, "warm run: fraction {warm}\n{warm_log}");
    assert!(warm_log.contains("came from the page cache"), "{warm_log}");
    let (dropped, dropped_log) = &fractions[1];
    assert!(
        *dropped < 0.2,
        "dropped run: fraction {dropped}\n{dropped_log}"
    );
    assert!(
        !dropped_log.contains("came from the page cache"),
        "{dropped_log}"
    );
}
