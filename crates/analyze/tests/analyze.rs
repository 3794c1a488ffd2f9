//! `dlio analyze` against traces with known answers: a hand-built trace, a trace our
//! tracer writes through `Traced`, and a trace Python DLIO wrote with dftracer.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use dlio_analyze::{
    Analysis, AnalyzeError, AnalyzeOptions, analyze, render_terminal, write_reports,
};
use dlio_storage::{Metered, PosixStorage, Storage};
use dlio_trace::{TraceOptions, Traced, Tracer, ai};

fn run(paths: &[PathBuf]) -> Analysis {
    analyze(paths, &AnalyzeOptions::default()).expect("analysis")
}

fn layer<'a>(a: &'a Analysis, name: &str) -> &'a dlio_analyze::LayerRow {
    a.layers.iter().find(|l| l.layer == name).expect("layer")
}

fn bucket(s: &dlio_analyze::SizeStats, label: &str) -> u64 {
    s.buckets
        .iter()
        .find(|b| b.label == label)
        .map_or(0, |b| b.count)
}

/// Rank 0, times in µs. Compute [1000,2000) and [3000,4000); I/O [1500,2500) (500 µs
/// under compute), [2600,2700), [3100,3200) (100 µs under compute), [5000,5100).
const HAND_BUILT: &str = r#"[
{"id":1,"name":"FH","cat":"dftracer","pid":7,"tid":7,"ph":"M","args":{"name":"/data/a.npz","value":"00000000000000aa"}}
{"id":2,"name":"compute","cat":"compute","pid":7,"tid":7,"ts":1000,"dur":1000,"ph":"X","args":{"epoch":1,"step":1}}
{"id":3,"name":"open64","cat":"POSIX","pid":7,"tid":8,"ts":1400,"dur":0,"ph":"X","args":{"fhash":"00000000000000aa","ret":5}}
{"id":4,"name":"pread64","cat":"POSIX","pid":7,"tid":8,"ts":1500,"dur":1000,"ph":"X","args":{"fhash":"00000000000000aa","count":4096,"offset":0,"ret":4096}},
{"id":5,"name":"pread64","cat":"POSIX","pid":7,"tid":8,"ts":"2600","dur":"100","ph":"X","args":{"fhash":"00000000000000aa","count":"4096","offset":"4096","ret":"4096"}}
{"id":6,"name":"compute","cat":"compute","pid":7,"tid":7,"ts":3000,"dur":1000,"ph":"X","args":{"epoch":1,"step":2}}
{"id":7,"name":"open64","cat":"POSIX","pid":7,"tid":8,"ts":3000,"dur":0,"ph":"X","args":{"fname":"/data/b.npz","ret":6}}
{"id":8,"name":"open64","cat":"POSIX","pid":7,"tid":8,"ts":3050,"dur":0,"ph":"X","args":{"fhash":"00000000000000aa","ret":5}}
{"id":9,"name":"read","cat":"POSIX","pid":7,"tid":8,"ts":3100,"dur":100,"ph":"X","args":{"fname":"/data/b.npz","fd":6,"count":1000,"ret":200}}
{"id":10,"name":"write","cat":"POSIX","pid":7,"tid":8,"ts":5000,"dur":100,"ph":"X","args":{"fname":"/out/c.bin","count":2097152,"ret":2097152}}
{"id":11,"name":"fetch.iter","cat":"dataloader","pid":7,"tid":7,"ts":2000,"dur":1000,"ph":"X","args":{"step":2}}
this line is not json
{"id":12,"name":"compute","cat":"compute","pid":7,"tid":7,"ts":9
]
"#;

fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write trace");
    p
}

#[test]
fn a_hand_built_trace_gives_exact_times_buckets_and_file_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = write_file(dir.path(), "trace-0-of-1.pfw", HAND_BUILT);
    let a = run(std::slice::from_ref(&p));

    assert_eq!((a.events, a.metadata_events, a.ranks), (10, 1, 1));
    assert_eq!(a.job_time_s, 0.0041, "1000 µs to 5100 µs");
    let t = &a.time;
    assert_eq!(t.compute_s, 0.002);
    assert_eq!(t.io_s, 0.0013);
    assert_eq!(t.io_overlapped_s, 0.0006);
    assert!((t.io_unoverlapped_s - 0.0007).abs() < 1e-12);
    assert!((t.io_overlapped_pct - 600.0 / 13.0).abs() < 1e-9);
    assert_eq!(t.fetch_s, 0.001);
    assert_eq!((a.counts.compute, a.counts.fetch), (2, 1));

    let reader = layer(&a, "reader POSIX");
    assert_eq!(
        (reader.ops, reader.bytes),
        (7, 4096 * 2 + 200 + 2_097_152),
        "3 opens, 3 reads, 1 write"
    );
    assert_eq!(layer(&a, "compute").ops, 2);

    let r = &a.transfer_sizes.read;
    assert_eq!(
        (r.ops, r.bytes, r.min, r.max, r.median),
        (3, 8392, 200, 4096, 4096)
    );
    assert_eq!((bucket(r, "100_1K"), bucket(r, "1K_10K")), (1, 2));
    assert_eq!(r.buckets.iter().map(|b| b.count).sum::<u64>(), 3);
    let w = &a.transfer_sizes.write;
    assert_eq!((w.ops, bucket(w, "1M_4M")), (1, 1));

    // a.npz: first read has no predecessor, the second starts where it ended.
    // b.npz: read through fd 6, opened just before (offset 0), first access.
    let acc = &a.access;
    assert_eq!(
        (acc.reads, acc.sequential_reads, acc.consecutive_reads),
        (3, 1, 1)
    );

    let row = |path: &str| {
        a.files
            .top
            .iter()
            .find(|f| f.path == path)
            .cloned()
            .expect(path)
    };
    assert_eq!(
        (
            row("/data/a.npz").opens,
            row("/data/a.npz").reads,
            row("/data/a.npz").bytes_read
        ),
        (2, 2, 8192)
    );
    assert_eq!(
        (
            row("/data/b.npz").opens,
            row("/data/b.npz").reads,
            row("/data/b.npz").bytes_read
        ),
        (1, 1, 200)
    );
    assert_eq!(
        (row("/out/c.bin").writes, row("/out/c.bin").bytes_written),
        (1, 2_097_152)
    );
    assert_eq!(
        (a.files.files, a.files.files_read, a.files.files_written),
        (3, 2, 1)
    );
    assert_eq!(a.files.top[0].path, "/data/a.npz", "most read first");

    assert_eq!(a.corrupt.count, 2);
    let lines: Vec<(u64, bool)> = a
        .corrupt
        .examples
        .iter()
        .map(|c| (c.line, c.file == p))
        .collect();
    assert_eq!(
        lines,
        vec![(13, true), (14, true)],
        "corrupt lines are reported with file and line"
    );
    assert!(
        a.corrupt.examples[1].reason.contains("truncated"),
        "{:?}",
        a.corrupt.examples[1]
    );
    let text = render_terminal(&a);
    assert!(text.contains("trace-0-of-1.pfw:13"), "{text}");
}

#[test]
fn ranks_are_taken_from_file_names_and_their_skew_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = |ts: u64, dur: u64| {
        format!(
            "[\n{{\"name\":\"pread\",\"cat\":\"POSIX\",\"pid\":1,\"tid\":1,\"ts\":{ts},\"dur\":{dur},\"ph\":\"X\",\"args\":{{\"fhash\":\"01\",\"offset\":0,\"ret\":100}}}}\n"
        )
    };
    write_file(dir.path(), "trace-0-of-2.pfw", &one(1000, 100));
    write_file(dir.path(), "trace-1-of-2.pfw", &one(1000, 300));
    let a = run(&[dir.path().to_path_buf()]);
    assert_eq!(a.ranks, 2);
    assert_eq!(
        a.per_rank.iter().map(|r| r.rank).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!((a.skew.fastest_rank, a.skew.slowest_rank), (0, 1));
    assert_eq!(a.skew.io_max_over_mean, 1.5);
    assert_eq!(
        a.time.io_s, 0.0002,
        "mean over ranks of each rank's I/O union"
    );
}

#[test]
fn a_trace_written_by_traced_storage_and_spans_round_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = dir.path().join("out");
    let tracer = Tracer::create(&TraceOptions::new(&out, 0, 1)).expect("tracer");
    let metered = Metered::new(PosixStorage::new());
    let counters = metered.counters().clone();
    let storage = Traced::new(metered, tracer.clone());
    storage.create_dir_all(&data).expect("mkdir");
    const FILES: usize = 6;
    const LEN: usize = 10_000;
    for i in 0..FILES {
        let mut w = storage
            .create(&data.join(format!("f{i}.bin")))
            .expect("create");
        w.write_all(&vec![i as u8; LEN]).expect("write");
        w.commit().expect("commit");
    }
    let before = counters.snapshot();
    let train = tracer.span(ai::PIPELINE_TRAIN);
    let mut buf = vec![0u8; LEN / 2];
    for epoch in 1..=2u64 {
        for step in 1..=3u64 {
            let wait = Instant::now();
            for s in 0..2 {
                let _item = tracer.span(ai::DATA_ITEM).epoch(epoch).arg("image_idx", s);
                let idx = ((step - 1) * 2 + s as u64) as usize % FILES;
                let mut h = storage
                    .open(&data.join(format!("f{idx}.bin")))
                    .expect("open");
                h.read_exact_at(&mut buf, 0).expect("read");
                h.read_exact_at(&mut buf, (LEN / 2) as u64).expect("read");
            }
            tracer.complete(
                ai::FETCH_ITER,
                wait,
                Instant::now(),
                &[("epoch", epoch as i64), ("step", step as i64)],
            );
            let _c = tracer.span(ai::COMPUTE).epoch(epoch).step(step);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    drop(train);
    let read = counters.snapshot() - before;
    let summary = tracer.finish().expect("finish").expect("enabled");

    let a = run(std::slice::from_ref(&out));
    assert_eq!(a.corrupt.count, 0);
    assert_eq!(a.events, summary.events);
    assert_eq!(
        (a.counts.compute, a.counts.fetch, a.counts.items),
        (6, 6, 12)
    );
    assert_eq!(
        a.transfer_sizes.read.bytes, read.bytes_read,
        "bytes read equal the storage counters"
    );
    assert_eq!(a.transfer_sizes.read.ops, read.read_requests);
    assert_eq!(a.transfer_sizes.write.bytes, (FILES * LEN) as u64);
    assert_eq!(a.transfer_sizes.read.median, (LEN / 2) as u64);
    assert_eq!(
        (a.access.reads, a.access.consecutive_reads),
        (24, 12),
        "the second half of each file follows the first"
    );
    let opens: u64 = a.files.top.iter().map(|f| f.opens).sum();
    assert_eq!(opens, read.opens + FILES as u64, "reads plus creates");
    assert!(
        a.time.compute_s >= 0.006,
        "six 1 ms steps: {}",
        a.time.compute_s
    );
    assert!(a.time.io_s > 0.0 && a.time.io_s < a.job_time_s);
    assert_eq!(layer(&a, "train").ops, 1);
    assert!(
        a.files
            .top
            .iter()
            .all(|f| f.path.starts_with(data.to_str().expect("utf-8")))
    );
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-0-of-1.pfw.gz")
}

#[test]
fn a_python_dlio_trace_from_dftracer_matches_what_that_run_printed() {
    let a = run(&[sample()]);
    assert_eq!(a.corrupt.count, 0);
    assert_eq!(a.ranks, 1);
    // The run printed 2 epochs x 4 steps of 2 samples.
    assert_eq!(a.counts.compute, 8, "TorchFramework.compute: one per step");
    assert_eq!(
        a.counts.items, 16,
        "TorchDataset.__getitem__: one per sample"
    );
    // DLIO's `dlp.iter` logs an iteration when the next one is requested; the loop breaks
    // after the last step, so each epoch logs 3 of its 4 waits.
    assert_eq!(a.counts.fetch, 6);
    assert_eq!(a.files.files_read, 8);
    assert_eq!(
        a.files.by_open_count,
        vec![dlio_analyze::OpenCount { opens: 2, files: 8 }]
    );
    assert!(
        a.files
            .top
            .iter()
            .all(|f| f.path.starts_with("/tmp/dft/data/train/img_"))
    );
    assert_eq!(a.transfer_sizes.read.ops, 144);
    assert!(
        a.access.reads == 144 && a.access.sequential_reads > 0,
        "offsets come from lseek64/read on the fd"
    );
}

#[test]
fn empty_foreign_and_missing_inputs_give_clear_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = write_file(dir.path(), "empty.pfw", "");
    let err = analyze(&[empty], &AnalyzeOptions::default()).expect_err("empty");
    assert!(
        matches!(err, AnalyzeError::NoEvents { .. })
            && err.to_string().contains("empty.pfw is empty"),
        "{err}"
    );

    let foreign = write_file(dir.path(), "notes.pfw", "hello\nworld\n");
    let err = analyze(&[foreign], &AnalyzeOptions::default()).expect_err("foreign");
    let msg = err.to_string();
    assert!(
        msg.contains("is not a dftracer trace: none of its 2 lines is a trace event (line 1:"),
        "{msg}"
    );

    let nothing = tempfile::tempdir().expect("tempdir");
    let err = analyze(&[nothing.path().to_path_buf()], &AnalyzeOptions::default())
        .expect_err("no traces");
    assert!(
        err.to_string().contains("no trace files (*.pfw, *.pfw.gz)"),
        "{err}"
    );

    let err = analyze(
        &[dir.path().join("missing.pfw")],
        &AnalyzeOptions::default(),
    )
    .expect_err("missing");
    assert!(err.to_string().contains("missing.pfw"), "{err}");
}

#[test]
fn a_truncated_gzip_trace_keeps_what_it_could_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(sample()).expect("sample");
    let cut = dir.path().join("trace-0-of-1.pfw.gz");
    std::fs::File::create(&cut)
        .and_then(|mut f| f.write_all(&bytes[..bytes.len() * 2 / 3]))
        .expect("write");
    let a = run(std::slice::from_ref(&cut));
    assert!(a.events > 100 && a.events < 567, "{}", a.events);
    assert!(a.corrupt.count >= 1);
    assert!(a.corrupt.examples.iter().all(|c| c.file == cut));
}

#[test]
fn reports_are_written_and_the_html_shows_four_plots_in_headless_chromium() {
    let a = run(&[sample()]);
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_reports(&a, dir.path()).expect("reports");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.json).expect("json")).expect("valid JSON");
    assert_eq!(json["counts"]["compute"], 8);
    for png in &files.pngs {
        let img = image::open(png).expect("PNG");
        assert_eq!((img.width(), img.height()), (900, 420), "{}", png.display());
    }
    let html = std::fs::read_to_string(&files.html).expect("html");
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(!html.contains("<script"), "self-contained, no scripts");

    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("no chromium binary: bash scripts/test.sh installs it (Debian: apt-get install chromium)");
    let profile = tempfile::tempdir().expect("profile");
    let base = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let url = format!("file://{}", files.html.display());
    let mut dump = Command::new(chromium);
    base(&mut dump);
    let out = dump.arg("--dump-dom").arg(&url).output().expect("chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        dom.matches("<svg").count(),
        4,
        "the rendered page has the four plots"
    );
    let console_errors: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(
        console_errors.is_empty(),
        "console messages: {console_errors:?}"
    );

    let shot = dir.path().join("shot.png");
    let mut cmd = Command::new(chromium);
    base(&mut cmd);
    let status = cmd
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1000,2400")
        .arg(&url)
        .output()
        .expect("chromium");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let img = image::open(&shot).expect("screenshot").to_rgb8();
    assert_eq!((img.width(), img.height()), (1000, 2400));
    // The plots draw in colour: count blue (compute/read) pixels in the screenshot.
    let blue = img.pixels().filter(|p| p.0 == [31, 119, 180]).count();
    assert!(
        blue > 2000,
        "the plots are visible ({blue} plot-blue pixels)"
    );
}
