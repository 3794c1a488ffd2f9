//! The interposer in real programs: small C programs (`tests/programs/*.c`, built here with
//! the system's C compiler) run with `libdlio_interpose.so` preloaded and `DLIO_TRACE_DIR`
//! set, as `dlio trace` runs them; their traces are read back and every event checked
//! against what the program did: the call, the file, the bytes asked and moved, the offset
//! and, for a read that waits 300 ms, the duration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The library cargo built beside this test's binary (target/<profile>/). `cargo test` does
/// not build a `cdylib` for integration tests: `cargo build -p dlio-interpose` does (and
/// scripts/test.sh runs it first). A library older than any of the crate's sources fails the
/// test rather than testing old code.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("libdlio_interpose.so");
    let built = std::fs::metadata(&lib)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}: run cargo build -p dlio-interpose", lib.display()));
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&sources).unwrap() {
        let path = entry.unwrap().path();
        let changed = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert!(
            changed <= built,
            "{} is older than {}: run cargo build -p dlio-interpose",
            lib.display(),
            path.display()
        );
    }
    lib
}

/// `tests/programs/NAME.c` built into `dir`.
fn build(dir: &Path, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("the C compiler (cc) runs");
    assert!(
        out.status.success(),
        "cc {}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `program args` traced into `traces`; fails the test unless it exits 0.
fn run_traced(program: &Path, args: &[&Path], traces: &Path) {
    std::fs::create_dir_all(traces).unwrap();
    let out = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", library())
        .env("DLIO_TRACE_DIR", traces)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed ({}): {}",
        program.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every trace file in `traces`, each parsed into its events. A file still named
/// `.partial` fails the test: each process ended, so each trace must be complete.
fn traces(dir: &Path) -> Vec<Vec<Value>> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!name.ends_with(".partial"), "{name} was left incomplete");
        let text = std::fs::read_to_string(&path).unwrap();
        // A JSON array, one event per line.
        let events: Vec<Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        all.push(events);
    }
    all
}

/// The events on `file` (by its file name), in the order they were recorded.
fn on_file<'a>(events: &'a [Value], file: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["args"]["fname"]
                .as_str()
                .is_some_and(|f| Path::new(f).file_name().is_some_and(|n| n == file))
        })
        .collect()
}

/// (name, offset, count, ret) of each transfer event.
fn transfers(events: &[&Value]) -> Vec<(String, i64, i64, i64)> {
    events
        .iter()
        .filter(|e| e["args"].get("count").is_some())
        .map(|e| {
            let a = &e["args"];
            (
                e["name"].as_str().unwrap().to_string(),
                a["offset"].as_i64().unwrap(),
                a["count"].as_i64().unwrap(),
                a["ret"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn names(events: &[&Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn t(name: &str, offset: i64, count: i64, ret: i64) -> (String, i64, i64, i64) {
    (name.to_string(), offset, count, ret)
}

#[test]
fn each_hooked_call_records_its_file_bytes_offset_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "calls");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let trace_dir = dir.path().join("traces");
    run_traced(&exe, &[&work], &trace_dir);
    let all = traces(&trace_dir);
    // The program and the child that fed the FIFO.
    assert_eq!(all.len(), 2, "{all:?}");
    let main = all
        .iter()
        .find(|events| !on_file(events, "data.bin").is_empty())
        .expect("the program's trace");

    let data = on_file(main, "data.bin");
    let absolute = work.join("data.bin");
    assert!(
        data.iter()
            .all(|e| e["args"]["fname"] == absolute.to_string_lossy().as_ref()),
        "absolute paths"
    );
    assert_eq!(
        transfers(&data),
        vec![
            t("write", 0, 10000, 10000),
            t("read", 0, 100, 100),
            t("read", 100, 200, 200),
            t("read", 5000, 50, 50),
            t("pread", 9000, 70, 70),
            t("read", 5050, 10, 10),
            t("readv", 5060, 70, 70),
            t("preadv", 1, 70, 70),
            t("preadv2", 2, 70, 70),
            t("preadv2", 5130, 70, 70),
            t("read", 5200, 10000, 4800),
            t("mmap", 0, 10000, 0),
            t("fread", 0, 123, 123),
            t("fread", 123, 70, 70),
        ]
    );
    assert_eq!(
        names(&data),
        [
            "open", "write", "close", "open", "read", "read", "lseek", "read", "pread", "read",
            "readv", "preadv", "preadv2", "preadv2", "read", "fstat", "mmap", "close", "stat",
            "fopen", "fread", "fread", "fclose",
        ]
    );
    let stat = data.iter().find(|e| e["name"] == "stat").unwrap();
    assert_eq!(stat["args"]["size"], 10000);
    let fstat = data.iter().find(|e| e["name"] == "fstat").unwrap();
    assert_eq!(fstat["args"]["size"], 10000);
    let lseek = data.iter().find(|e| e["name"] == "lseek").unwrap();
    assert_eq!(lseek["args"]["ret"], 5000);

    let out = on_file(main, "out.bin");
    assert_eq!(
        transfers(&out),
        vec![t("pwrite", 4096, 10, 10), t("writev", 0, 8, 8)]
    );

    // The FIFO's open waited for the writer's 300 ms sleep; every event lasts >= 0 and
    // starts after the previous one of its thread.
    let fifo = on_file(main, "slow.fifo");
    let open = fifo.iter().find(|e| e["name"] == "open").unwrap();
    let waited = open["dur"].as_f64().unwrap();
    assert!(waited >= 250_000.0, "the FIFO open took {waited} us");
    assert_eq!(transfers(&fifo), vec![t("read", 0, 5, 5)]);
    let mut last = 0.0;
    for e in main {
        let ts = e["ts"].as_f64().unwrap();
        assert!(e["dur"].as_f64().unwrap() >= 0.0 && ts >= last, "{e}");
        last = ts;
    }
    // The failed open is recorded with its result; the close of a descriptor never opened is
    // not an event (and errno was libc's: the program checked it).
    let missing = on_file(main, "file");
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0]["args"]["ret"], -1);
}

#[test]
fn threads_forks_and_execs_each_record_their_own_reads() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "processes");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let trace_dir = dir.path().join("traces");
    let cat = PathBuf::from("/bin/cat");
    run_traced(&exe, &[&work, &cat], &trace_dir);
    let all = traces(&trace_dir);
    // The program, its forked child, and cat (the child's image after exec).
    assert_eq!(all.len(), 3, "{} traces", all.len());
    let read_bytes = |events: &Vec<Value>, file: &str| -> i64 {
        transfers(&on_file(events, file))
            .iter()
            .filter(|(name, ..)| name == "read")
            .map(|(.., ret)| ret)
            .sum()
    };
    let parent = all
        .iter()
        .find(|e| read_bytes(e, "t0.bin") > 0)
        .expect("the parent's trace");
    let mut tids = BTreeMap::new();
    for i in 0..4 {
        let file = format!("t{i}.bin");
        assert_eq!(read_bytes(parent, &file), 1000 * (i + 1), "{file}");
        let events = on_file(parent, &file);
        let reads: Vec<_> = events.iter().filter(|e| e["name"] == "read").collect();
        tids.insert(reads[0]["tid"].as_i64().unwrap(), file.clone());
        // One thread read each file.
        assert!(reads.iter().all(|e| e["tid"] == reads[0]["tid"]), "{file}");
    }
    assert_eq!(tids.len(), 4, "four threads: {tids:?}");
    let pid = parent[0]["pid"].clone();
    assert!(parent.iter().all(|e| e["pid"] == pid));

    let child = all
        .iter()
        .find(|e| read_bytes(e, "child.bin") > 0)
        .expect("the child's trace");
    assert_eq!(read_bytes(child, "child.bin"), 777);
    assert_ne!(child[0]["pid"], pid, "the child has a pid of its own");
    assert_eq!(
        read_bytes(parent, "child.bin"),
        0,
        "the parent never read child.bin"
    );
    let exec = all
        .iter()
        .find(|e| read_bytes(e, "exec.bin") > 0)
        .expect("cat's trace");
    assert!(
        !std::ptr::eq(exec, child),
        "cat's trace is a file of its own"
    );
    assert_eq!(read_bytes(exec, "exec.bin"), 555);
    assert_eq!(exec[0]["pid"], child[0]["pid"], "exec keeps the pid");
}

#[test]
fn children_forked_while_other_threads_trace_are_never_left_holding_a_lock() {
    // 200 forks while four threads make traced preads all along, so that the tracer's locks
    // are often waited for when a fork copies them. A child left with a lock held (a handover
    // to a waiter the child does not have) hangs in its first traced call: the program kills
    // it after 10 s and exits 5.
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "fork_under_load");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let trace_dir = dir.path().join("traces");
    run_traced(&exe, &[&work, Path::new("200")], &trace_dir);
    let all = traces(&trace_dir);
    // The program and each child, every child's read of data.bin in its own trace.
    assert_eq!(all.len(), 201, "{} traces", all.len());
    let children = all
        .iter()
        .filter(|events| {
            let reads = transfers(&on_file(events, "data.bin"));
            reads.len() == 1 && reads[0] == t("pread", 0, 4096, 4096)
        })
        .count();
    assert_eq!(children, 200);
}

/// Runs closes_others in `mode` and returns its trace's events.
fn closes_others(mode: &str) -> (tempfile::TempDir, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "closes_others");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("input.bin"), b"12345").unwrap();
    std::fs::write(work.join("a.bin"), b"a").unwrap();
    let trace_dir = dir.path().join("traces");
    run_traced(&exe, &[&work, Path::new(mode)], &trace_dir);
    // The program's own file holds what it wrote and nothing of the trace.
    let after = std::fs::read(work.join("after.bin")).unwrap();
    assert!(
        after == b"abcd",
        "{mode}: the trace was written into the program's file: {}",
        String::from_utf8_lossy(&after)
    );
    let mut all = traces(&trace_dir);
    assert_eq!(all.len(), 1, "{mode}");
    (dir, all.remove(0))
}

#[test]
fn a_program_that_closes_descriptors_it_did_not_open_keeps_a_whole_trace() {
    for mode in ["loop", "range", "dup2"] {
        let (_dir, events) = closes_others(mode);
        // Every read of input.bin is there, at the right offsets, and the write after the
        // closes too.
        assert_eq!(
            transfers(&on_file(&events, "input.bin")),
            vec![t("read", 0, 2, 2), t("read", 2, 3, 3)],
            "{mode}"
        );
        assert_eq!(
            transfers(&on_file(&events, "after.bin")),
            vec![t("write", 0, 4, 4)],
            "{mode}"
        );
    }
}

#[test]
fn a_descriptor_closed_past_libc_is_not_taken_for_its_file_again() {
    let (_dir, events) = closes_others("stale");
    // a.bin was read once, then closed with the raw system call; the pipe that may reuse its
    // number is not a.bin.
    assert_eq!(
        transfers(&on_file(&events, "a.bin")),
        vec![t("read", 0, 1, 1)]
    );
    assert_eq!(
        transfers(&on_file(&events, "input.bin")),
        vec![t("read", 0, 2, 2), t("read", 2, 3, 3)]
    );
}
