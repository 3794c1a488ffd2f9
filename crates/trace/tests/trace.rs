//! The trace writer's promises: dftracer's file name and metadata, dftracer 2.x's line format,
//! every event from every thread, and one event per storage call through `Traced`.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dlio_storage::{Extent, PathTable, PosixStorage, ReadRequest, Storage};
use dlio_trace::{FileId, IoOp, PreparedSpan, TraceOptions, Traced, Tracer, ai};
use serde_json::Value;

/// Every record of the trace, one JSON object per line as dftracer 2.x writes them: no array
/// brackets, no separating commas (this also checks that every line is a JSON object).
fn load(path: &Path) -> Vec<Value> {
    let raw = std::fs::read(path).expect("trace file");
    let mut text = String::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .expect("gzip");
    } else {
        text = String::from_utf8(raw).expect("utf-8");
    }
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let record: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("line {} is not one JSON object: {e}: {line}", i + 1));
            assert!(record.is_object(), "line {}: {line}", i + 1);
            record
        })
        .collect()
}

/// The complete events (`ph` 1) but dftracer's own `start` and `end` records.
fn complete_events(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "dftracer")
        .collect()
}

fn count_by_name(events: &[Value]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for e in complete_events(events) {
        *counts
            .entry(e["name"].as_str().unwrap_or("").to_string())
            .or_insert(0) += 1;
    }
    counts
}

fn metadata<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == name)
        .collect()
}

#[test]
fn spans_and_io_calls_become_dftracer_events_in_valid_chrome_trace_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 1, 4)).expect("tracer");
    assert_eq!(
        tracer.path(),
        Some(dir.path().join("trace-1-of-4.pfw.gz").as_path())
    );
    {
        let _compute = tracer.span(ai::COMPUTE).epoch(2).step(7);
        std::thread::sleep(Duration::from_millis(2));
    }
    let file = tracer.file(Path::new("/data/train/img_1.npz"));
    let start = Instant::now();
    tracer.io(
        IoOp::Read,
        file,
        Some(4096),
        Some(65536),
        start,
        Duration::from_nanos(12_345),
    );
    tracer.io_failed(IoOp::Open, file, None, start, Duration::from_micros(3));
    let summary = tracer.finish().expect("finish").expect("enabled");
    assert_eq!((summary.events, summary.metadata_events >= 4), (3, true));
    assert_eq!(
        tracer.finish().expect("again").expect("enabled"),
        summary,
        "finish is idempotent"
    );

    let events = load(&summary.path);
    let x = complete_events(&events);
    assert_eq!(x.len(), 3);

    let compute = x
        .iter()
        .find(|e| e["cat"] == "compute")
        .expect("compute span");
    assert_eq!(compute["name"], "compute");
    assert_eq!(
        (&compute["args"]["epoch"], &compute["args"]["step"]),
        (&Value::from(2), &Value::from(7))
    );
    assert!(
        compute["dur"].as_u64().expect("dur in whole microseconds") >= 2000,
        "dur is in microseconds"
    );
    assert_eq!(compute["type"], 6, "an application span");

    let read = x.iter().find(|e| e["name"] == "pread").expect("read event");
    assert_eq!(read["cat"], "POSIX");
    assert_eq!(read["args"]["count"], 65536);
    assert_eq!(read["args"]["ret"], 65536);
    assert_eq!(read["args"]["offset"], 4096);
    let (ts, dur) = (read["ts"].as_u64().unwrap(), read["dur"].as_u64().unwrap());
    assert!(
        (12..=13).contains(&dur),
        "12.345 us, in whole microseconds: {dur}"
    );
    assert!(ts > 1_600_000_000_000_000, "microseconds since the epoch");
    assert_eq!(read["type"], 3, "an I/O call");
    let fhash = read["args"]["fhash"].as_str().expect("fhash").to_string();
    assert_eq!(fhash.len(), 16);
    assert_eq!(fhash, format!("{:016x}", file.hash()));

    let failed = x.iter().find(|e| e["name"] == "open").expect("failed open");
    assert_eq!(failed["args"]["ret"], -1);

    let fh = metadata(&events, "FH");
    assert_eq!(fh.len(), 1, "one FH per distinct file");
    assert_eq!(
        (
            fh[0]["args"]["name"].as_str(),
            fh[0]["args"]["value"].as_str()
        ),
        (Some("/data/train/img_1.npz"), Some(fhash.as_str()))
    );
    assert_eq!(metadata(&events, "HH").len(), 1);
    let pr: Vec<(String, String)> = metadata(&events, "PR")
        .iter()
        .map(|e| {
            (
                e["args"]["name"].as_str().unwrap_or("").into(),
                e["args"]["value"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        pr,
        vec![("rank".into(), "1".into()), ("size".into(), "4".into())]
    );
    let hh = metadata(&events, "HH")[0]["args"]["value"].clone();
    assert!(
        x.iter().all(|e| e["args"]["hhash"] == hh),
        "every event names its host"
    );
    assert!(x.iter().all(|e| e["pid"] == std::process::id()));
    assert_eq!(metadata(&events, "CM")[0]["args"]["value"], "US");
    let bounds: Vec<_> = events
        .iter()
        .filter(|e| e["cat"] == "dftracer" && e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(bounds, ["start", "end"]);
    let (first, last) = (&events[4], &events[events.len() - 1]);
    assert_eq!(
        (&first["name"], &last["name"]),
        (&"start".into(), &"end".into())
    );
    assert!(last["ts"].as_u64() >= x.iter().map(|e| e["ts"].as_u64().unwrap()).max());
}

#[test]
fn ranks_sharing_a_process_each_get_a_pid_of_their_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pids = Vec::new();
    for rank in 0..2 {
        let mut opts = TraceOptions::new(dir.path(), rank, 2);
        opts.shares_process = true;
        let tracer = Tracer::create(&opts).expect("tracer");
        drop(tracer.span(ai::COMPUTE).epoch(1).step(1));
        let summary = tracer.finish().expect("finish").expect("enabled");
        let events = load(&summary.path);
        assert!(events.iter().all(|e| e["pid"] == events[0]["pid"]));
        let start = events.iter().find(|e| e["name"] == "start").unwrap();
        assert_eq!(start["args"]["os_pid"], std::process::id());
        pids.push(events[0]["pid"].as_u64().unwrap());
    }
    assert_eq!(
        pids,
        [
            u64::from(dlio_trace::RANK_PID_BASE),
            u64::from(dlio_trace::RANK_PID_BASE) + 1
        ]
    );
}

#[test]
fn every_event_of_every_thread_reaches_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = TraceOptions::new(dir.path(), 0, 1);
    opts.compress = false;
    let tracer = Tracer::create(&opts).expect("tracer");
    assert!(tracer.path().expect("path").ends_with("trace-0-of-1.pfw"));
    const THREADS: usize = 4;
    const PER_THREAD: usize = 5_001; // more than two thread buffers, not a multiple
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let tracer = tracer.clone();
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    let _item = tracer
                        .span(ai::DATA_ITEM)
                        .arg("image_idx", (t * PER_THREAD + i) as i64);
                }
            });
        }
    });
    // Threads that are still alive keep buffers too: the main thread's partial buffer.
    for _ in 0..10 {
        let _fetch = tracer.span(ai::FETCH_ITER);
    }
    let summary = tracer.finish().expect("finish").expect("enabled");
    assert_eq!(summary.events, (THREADS * PER_THREAD + 10) as u64);
    let events = load(&summary.path);
    let counts = count_by_name(&events);
    assert_eq!(counts.get("item"), Some(&(THREADS * PER_THREAD)));
    assert_eq!(counts.get("fetch.iter"), Some(&10));
    let mut idx: Vec<i64> = complete_events(&events)
        .iter()
        .filter_map(|e| e["args"]["image_idx"].as_i64())
        .collect();
    idx.sort_unstable();
    assert_eq!(
        idx,
        (0..(THREADS * PER_THREAD) as i64).collect::<Vec<_>>(),
        "no event lost or duplicated"
    );
    let tids: std::collections::HashSet<i64> = complete_events(&events)
        .iter()
        .filter_map(|e| e["tid"].as_i64())
        .collect();
    assert_eq!(tids.len(), THREADS + 1);
    assert_eq!(metadata(&events, "thread_name").len(), THREADS + 1);
}

#[test]
fn traced_storage_records_one_event_per_storage_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let tracer = Tracer::create(&TraceOptions::new(dir.path().join("out"), 0, 1)).expect("tracer");
    let storage = Traced::new(PosixStorage::new(), tracer.clone());
    storage.create_dir_all(&data).expect("mkdir");
    let path = data.join("f.bin");
    let mut w = storage.create(&path).expect("create");
    w.write_all(&[1u8; 3000]).expect("write");
    w.write_all(&[2u8; 1000]).expect("write");
    w.sync().expect("fsync");
    assert_eq!(w.commit().expect("commit"), 4000);
    assert_eq!(storage.size(&path).expect("stat"), Some(4000));
    assert_eq!(storage.list(&data).expect("list").len(), 1);
    {
        let mut r = storage.open(&path).expect("open");
        let mut buf = [0u8; 1000];
        r.read_exact_at(&mut buf, 3000).expect("read");
        assert_eq!(buf[0], 2);
        let (mut a, mut b) = ([0u8; 100], [0u8; 200]);
        let mut reqs = [
            ReadRequest {
                offset: 0,
                buf: &mut a,
            },
            ReadRequest {
                offset: 100,
                buf: &mut b,
            },
        ];
        r.read_batch(&mut reqs).expect("batch");
        assert!(
            r.read_exact_at(&mut buf, 3500).is_err(),
            "reading past the end fails"
        );
    }
    assert!(storage.open(&data.join("missing")).is_err());
    storage.remove_file(&path).expect("unlink");
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let counts = count_by_name(&events);
    let expect = [
        ("mkdir", 1),
        ("open", 3), // create, open, failed open
        ("write", 2),
        ("fsync", 1),
        ("close", 2), // commit, drop of the read handle
        ("stat", 1),
        ("opendir", 1),
        ("pread", 4), // read_exact_at, 2 batch requests, failed read
        ("unlink", 1),
    ];
    for (name, n) in expect {
        assert_eq!(counts.get(name).copied().unwrap_or(0), n, "{name} events");
    }
    assert_eq!(
        counts.values().sum::<usize>(),
        expect.iter().map(|e| e.1).sum::<usize>()
    );
    let preads: Vec<(i64, i64)> = complete_events(&events)
        .iter()
        .filter(|e| e["name"] == "pread" && e["args"]["ret"] != -1)
        .map(|e| {
            (
                e["args"]["offset"].as_i64().unwrap_or(-1),
                e["args"]["count"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(preads, vec![(3000, 1000), (0, 100), (100, 200)]);
    let writes: Vec<(i64, i64)> = complete_events(&events)
        .iter()
        .filter(|e| e["name"] == "write")
        .map(|e| {
            (
                e["args"]["offset"].as_i64().unwrap_or(-1),
                e["args"]["count"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(writes, vec![(0, 3000), (3000, 1000)]);
    let fh: Vec<&str> = metadata(&events, "FH")
        .iter()
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(fh.contains(&path.to_string_lossy().as_ref()));
}

#[test]
fn a_disabled_tracer_records_nothing() {
    let tracer = Tracer::disabled();
    assert!(!tracer.is_enabled());
    {
        let _s = tracer.span(ai::COMPUTE).step(1);
    }
    let file = tracer.file(Path::new("/x"));
    assert_eq!(file, FileId::NONE);
    tracer.io(
        IoOp::Read,
        file,
        Some(0),
        Some(1),
        Instant::now(),
        Duration::ZERO,
    );
    assert_eq!(tracer.finish().expect("finish"), None);
    assert_eq!(tracer.path(), None);
}

#[test]
fn a_rank_outside_the_rank_count_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Tracer::create(&TraceOptions::new(dir.path(), 4, 4)).expect_err("rank 4 of 4");
    assert!(
        err.to_string()
            .contains("rank 4 is out of range for 4 ranks"),
        "{err}"
    );
}

#[test]
fn an_unwritable_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").expect("write");
    let err =
        Tracer::create(&TraceOptions::new(blocker.join("sub"), 0, 1)).expect_err("not a folder");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot create trace file") && msg.contains("trace-0-of-1.pfw.gz"),
        "{msg}"
    );
}

#[test]
fn the_trace_appears_only_when_finished_and_the_spill_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = TraceOptions::new(dir.path(), 0, 1);
    let tracer = Tracer::create(&opts).expect("tracer");
    let file = tracer.file(Path::new("/data/train/img_0.npy"));
    // More events than one thread buffer holds, so some reach the spill during the run.
    for i in 0..5000u64 {
        let start = tracer.stamp();
        tracer.io_between(IoOp::Read, file, Some(i * 4096), Some(4096), start, start);
    }
    // The writer holds full buffers (and packs them into the spill beyond its memory
    // budget); nothing is under the trace's own name until it is complete.
    let spill = opts.spill_path();
    std::thread::sleep(Duration::from_millis(50));
    assert!(spill.exists(), "the spill file is created with the tracer");
    assert!(
        !opts.path().exists(),
        "no trace under the final name before it is complete"
    );
    let summary = tracer.finish().expect("finish").expect("enabled");
    assert!(!spill.exists(), "the spill is removed");
    let events = load(&opts.path());
    let reads: Vec<_> = complete_events(&events)
        .into_iter()
        .filter(|e| e["name"] == "pread")
        .collect();
    assert_eq!(reads.len(), 5000);
    assert_eq!(summary.events, 5000);
    // Offsets and sizes survive the packing, in order.
    for (i, e) in reads.iter().enumerate() {
        assert_eq!(e["args"]["offset"], (i as u64 * 4096));
        assert_eq!(e["args"]["count"], 4096);
        assert_eq!(e["dur"].as_f64(), Some(0.0));
    }
    let names = metadata(&events, "FH");
    assert_eq!(names.len(), 1);
    assert_eq!(names[0]["args"]["name"], "/data/train/img_0.npy");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, vec![opts.file_name()]);
}

#[test]
fn a_handle_closed_on_another_thread_still_records_its_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer");
    let storage = Traced::new(PosixStorage::new(), tracer.clone());
    let sample = dir.path().join("sample.bin");
    std::fs::write(&sample, [1u8; 512]).expect("sample");
    let mut handle = storage.open(&sample).expect("open");
    // A thread that never traced anything reads and closes the handle.
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        handle.read_exact_at(&mut buf, 0).expect("read");
        drop(handle);
    })
    .join()
    .expect("thread");
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let counts = count_by_name(&events);
    assert_eq!(counts.get("open"), Some(&1));
    assert_eq!(counts.get("pread"), Some(&1));
    assert_eq!(counts.get("close"), Some(&1));
}

#[test]
fn stamped_and_instant_timed_events_share_one_timeline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer");
    let file = tracer.file(Path::new("/data/a.npy"));
    std::thread::sleep(Duration::from_millis(30));
    // The same 20 ms interval, timed with Instants and with the trace's stamps.
    let (i0, s0) = (Instant::now(), tracer.stamp());
    std::thread::sleep(Duration::from_millis(20));
    let (i1, s1) = (Instant::now(), tracer.stamp());
    tracer.complete(ai::COMPUTE, i0, i1, &[("step", 1)]);
    tracer.io_between(IoOp::Read, file, Some(0), Some(1), s0, s1);
    std::thread::sleep(Duration::from_millis(30));
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let find = |name: &str| {
        complete_events(&events)
            .into_iter()
            .find(|e| e["name"] == name)
            .map(|e| {
                (
                    e["ts"].as_f64().expect("ts"),
                    e["dur"].as_f64().expect("dur"),
                )
            })
            .expect("event")
    };
    let (compute_ts, compute_dur) = find("compute");
    let (read_ts, read_dur) = find("pread");
    assert!(
        (compute_ts - read_ts).abs() < 200.0,
        "{compute_ts} vs {read_ts} µs"
    );
    assert!(
        (compute_dur - read_dur).abs() < 200.0,
        "{compute_dur} vs {read_dur} µs"
    );
    assert!((19_000.0..40_000.0).contains(&read_dur), "{read_dur} µs");
}

#[test]
fn an_instant_and_a_stamp_taken_together_are_one_moment_in_the_trace() {
    // Steps are cut where a compute span (timed with Instants) ends, and a reader's refill
    // (stamped) begins microseconds later: an offset between the two clocks' bases moves
    // reads into the wrong step. The clocks' bases were once 20 µs apart.
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer");
    let file = tracer.file(Path::new("/data/a.npy"));
    const PAIRS: i64 = 21;
    for k in 0..PAIRS {
        let (at, stamp) = (Instant::now(), tracer.stamp());
        tracer.complete(ai::COMPUTE, at, at, &[("step", k)]);
        tracer.io_between(IoOp::Read, file, Some(k as u64), Some(1), stamp, stamp);
        std::thread::sleep(Duration::from_millis(1));
    }
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let ts_of = |name: &str, key: &str, k: i64| {
        complete_events(&events)
            .into_iter()
            .find(|e| e["name"] == name && e["args"][key].as_i64() == Some(k))
            .and_then(|e| e["ts"].as_f64())
            .unwrap_or_else(|| panic!("no {name} event with {key} {k}"))
    };
    let mut apart: Vec<f64> = (0..PAIRS)
        .map(|k| (ts_of("compute", "step", k) - ts_of("pread", "offset", k)).abs())
        .collect();
    apart.sort_by(f64::total_cmp);
    // The median pair: one preempted pair on a busy machine does not move it; the trace's
    // microsecond timestamps round each side by up to 1 µs.
    let median = apart[apart.len() / 2];
    assert!(
        median <= 3.0,
        "an Instant and a stamp taken together lie {median} µs apart: {apart:?}"
    );
}

#[test]
fn a_prepared_span_is_recorded_as_complete_records_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer");
    let item = PreparedSpan::new(ai::DATA_ITEM, ["epoch", "image_idx"]);
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(5));
    let end = Instant::now();
    tracer.complete_prepared(&item, start, end - start, [3, 12345]);
    tracer.complete(
        ai::DATA_ITEM,
        start,
        end,
        &[("epoch", 3), ("image_idx", 12345)],
    );
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let items: Vec<_> = complete_events(&events)
        .into_iter()
        .filter(|e| e["name"] == "item")
        .collect();
    assert_eq!(items.len(), 2, "{items:?}");
    for e in &items {
        assert_eq!(e["cat"], "data");
        assert_eq!(e["args"]["epoch"], 3);
        assert_eq!(e["args"]["image_idx"], 12345);
        let dur = e["dur"].as_f64().expect("dur");
        assert!((4_000.0..50_000.0).contains(&dur), "{dur} µs");
    }
    assert_eq!(items[0]["ts"], items[1]["ts"]);
    assert_eq!(items[0]["dur"], items[1]["dur"]);
}

#[test]
fn files_named_ahead_of_the_run_get_one_name_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tracer = Tracer::create(&TraceOptions::new(dir.path(), 0, 1)).expect("tracer");
    let storage = Traced::new(PosixStorage::new(), tracer.clone());
    let paths: Vec<_> = (0..3)
        .map(|i| {
            let p = dir.path().join(format!("img_{i}.bin"));
            std::fs::write(&p, [i as u8; 64]).expect("sample");
            p
        })
        .collect();
    let table = Arc::new(PathTable::new(&paths[..2]));
    let empty = Arc::new(PathTable::default());
    tracer.name_files(&[Arc::clone(&table), empty]);
    // Two threads open every file: the table's through the table (named ahead), the first
    // one also through a copy of its path, and two files not in the table (named at their
    // first open).
    let other = dir.path().join("other.bin");
    std::fs::write(&other, [9u8; 64]).expect("other");
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let opened = [&table[0], &table[1], paths[0].as_path(), &paths[2], &other];
                for p in opened {
                    let mut buf = [0u8; 64];
                    storage
                        .open(p)
                        .expect("open")
                        .read_exact_at(&mut buf, 0)
                        .expect("read");
                }
            });
        }
    });
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let fh = metadata(&events, "FH");
    let mut named: Vec<String> = fh
        .iter()
        .map(|e| e["args"]["name"].as_str().expect("name").to_string())
        .collect();
    named.sort();
    let mut expected: Vec<String> = paths
        .iter()
        .chain([&other])
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    expected.sort();
    assert_eq!(named, expected, "every file exactly once");
    // Each name maps to the hash its reads carry.
    for e in &fh {
        let name = e["args"]["name"].as_str().expect("name");
        let hash = e["args"]["value"].as_str().expect("hash");
        let reads = events
            .iter()
            .filter(|r| r["name"] == "pread" && r["args"]["fhash"] == hash)
            .count();
        let expected_reads = if name == paths[0].to_string_lossy() {
            4
        } else {
            2
        };
        assert_eq!(reads, expected_reads, "{name}");
    }
    assert_eq!(count_by_name(&events).get("pread"), Some(&10));
}

#[test]
fn traced_storage_records_one_event_per_range_of_a_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.bin");
    std::fs::write(&path, [3u8; 5000]).expect("write");
    let tracer = Tracer::create(&TraceOptions::new(dir.path().join("out"), 0, 1)).expect("tracer");
    let storage = Traced::new(PosixStorage::new(), tracer.clone());
    {
        let mut r = storage.open(&path).expect("open");
        let mut window = [0u8; 4096];
        let ranges = [
            Extent::new(4096, 904),
            Extent::new(0, 2048),
            Extent::new(2048, 2048),
        ];
        r.read_stream(&mut window, 2048, &mut ranges.into_iter(), &mut |_, _| {
            Ok(())
        })
        .expect("stream");
        let past_end = Extent::new(4096, 1000);
        assert!(
            r.read_stream(
                &mut window,
                2048,
                &mut [past_end].into_iter(),
                &mut |_, _| { Ok(()) }
            )
            .is_err(),
            "a range past the end fails"
        );
    }
    let summary = tracer.finish().expect("finish").expect("enabled");
    let events = load(&summary.path);
    let preads: Vec<(i64, i64, i64)> = complete_events(&events)
        .iter()
        .filter(|e| e["name"] == "pread")
        .map(|e| {
            (
                e["args"]["offset"].as_i64().unwrap_or(-1),
                e["args"]["count"].as_i64().unwrap_or(-1),
                e["args"]["ret"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    let failed: Vec<_> = preads.iter().filter(|p| p.2 == -1).collect();
    let done: Vec<(i64, i64)> = preads
        .iter()
        .filter(|p| p.2 != -1)
        .map(|p| (p.0, p.1))
        .collect();
    assert_eq!(done, vec![(4096, 904), (0, 2048), (2048, 2048)]);
    assert_eq!(failed.len(), 1, "{preads:?}");
    assert_eq!(failed[0].0, 4096, "{preads:?}");
}

/// The same reads through `Metered` over `Traced` and through `metered_and_traced` (whose
/// traced handles count their reads themselves) count the same, and trace the same.
#[test]
fn reads_counted_by_the_traced_handles_count_as_metered_does() {
    use dlio_storage::{IoCounters, Metered};
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data.bin");
    std::fs::write(
        &data,
        (0..=255u8).cycle().take(64 << 10).collect::<Vec<u8>>(),
    )
    .expect("data");
    let run = |storage: &dyn Storage| {
        for _ in 0..3 {
            let mut h = storage.open(&data).expect("open");
            let mut buf = vec![0u8; 4096];
            h.read_exact_at(&mut buf, 8192).expect("read_exact_at");
            assert_eq!(buf[0], 0);
            assert_eq!(h.read_at(&mut buf, (64 << 10) - 100).expect("read_at"), 100);
            let (mut a, mut b) = (vec![0u8; 1000], vec![0u8; 3000]);
            h.read_batch(&mut [
                ReadRequest {
                    offset: 0,
                    buf: &mut a,
                },
                ReadRequest {
                    offset: 5000,
                    buf: &mut b,
                },
            ])
            .expect("batch");
            let mut window = vec![0u8; 2 * 4096];
            let mut ranges = (0..4u64).map(|i| Extent::new(i * 4096, 4096));
            let mut seen = 0;
            h.read_stream(&mut window, 4096, &mut ranges, &mut |_, bytes| {
                seen += bytes.len();
                Ok(())
            })
            .expect("stream");
            assert_eq!(seen, 4 * 4096);
            // A failed read counts nothing.
            assert!(h.read_exact_at(&mut buf, (64 << 10) - 10).is_err());
        }
    };
    let layered = Arc::new(IoCounters::default());
    let tracer_a = Tracer::create(&TraceOptions::new(dir.path().join("a"), 0, 1)).expect("a");
    run(&Metered::with_counters(
        Traced::new(PosixStorage::new(), tracer_a.clone()),
        Arc::clone(&layered),
    ));
    let inside = Arc::new(IoCounters::default());
    let tracer_b = Tracer::create(&TraceOptions::new(dir.path().join("b"), 0, 1)).expect("b");
    run(&dlio_trace::metered_and_traced(
        PosixStorage::new(),
        tracer_b.clone(),
        Arc::clone(&inside),
    ));
    let (a, b) = (layered.snapshot(), inside.snapshot());
    assert_eq!(a, b);
    assert_eq!((b.opens, b.read_requests), (3, 3 * (1 + 1 + 2 + 4)));
    assert_eq!(b.bytes_read, 3 * (4096 + 100 + 4000 + 4 * 4096));
    let (la, lb) = (layered.read_latency(), inside.read_latency());
    assert_eq!(la.count(), lb.count());
    assert_eq!(lb.count(), 3 * (1 + 1 + 1 + 4));
    assert!(lb.min_ns() > 0 && lb.max_ns() < 1_000_000_000, "{lb:?}");
    // And the traces hold the same events.
    let a = count_by_name(&load(&tracer_a.finish().expect("a").expect("on").path));
    let b = count_by_name(&load(&tracer_b.finish().expect("b").expect("on").path));
    assert_eq!(a, b);
    assert_eq!(b.get("pread"), Some(&(3 * (1 + 1 + 2 + 4 + 1))));
}
