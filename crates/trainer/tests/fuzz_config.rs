//! Fuzzing the config loader, the override parser and what a run derives from a config before
//! any I/O: every built-in workload file, mutated (lines deleted, duplicated, re-valued, keys
//! inserted, bytes flipped, text cut), and random overrides of every key those files use. A
//! config that loads and validates then goes through the run's pure set-up: the time
//! distributions (with draws), the checkpoint plan, the training plan and its trim, the first
//! epoch's plan and batch, the layout. Whatever the input, each step returns a value or an
//! error; a panic, or a case that runs longer than 30 s (a hang), fails the test.
//!
//! The suite runs a fixed budget; `DLIO_FUZZ_CASES=N` runs N cases per property instead
//! (`bench/fuzz.sh` runs 10^5), and `DLIO_FUZZ_SEED=N` another seed than the suite's. An input
//! that kills the process (out of memory, say) leaves proptest nothing to report: run the test
//! binary with `DLIO_FUZZ_PRINT=1 ... --nocapture` under `ulimit -v` and read the last case.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::Duration;

use dlio_config::{LoadArgs, Semantics, builtin_workloads, load, load_text, yaml::Value};
use dlio_loader::TimeSampler;
use dlio_plan::EpochPlan;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, FileFailurePersistence, RngSeed};
use rand::SeedableRng;

/// Values that have broken parsers before: out-of-range, non-finite, wrong-typed, odd YAML.
const TOKENS: &[&str] = &[
    "0",
    "-1",
    "1",
    "-0",
    "1e300",
    "-1e300",
    "1e20",
    "1.8e19",
    ".nan",
    ".inf",
    "-.inf",
    "nan",
    "18446744073709551615",
    "18446744073709551616",
    "4294967296",
    "4294967297",
    "-9223372036854775809",
    "[]",
    "{}",
    "[0]",
    "[0, 0]",
    "[-1]",
    "[1e300]",
    "null",
    "~",
    "True",
    "False",
    "true",
    "yes",
    "''",
    "'x'",
    "\"\"",
    "x",
    "../../evil",
    "/",
    "{type: gamma, shape: 1e300, scale: 1e300}",
    "{type: uniform, min: 1, max: 0}",
    "{type: normal, mean: 1, stdev: -1}",
    "{type: poisson, lam: 1e300}",
    "{type: exponential, scale: 0}",
    "{type: nope}",
    "[a, [b, {c: d}]]",
    "{a: {b: {c: 1}}}",
    "&x 1",
    "*x",
    "!!binary aGk=",
    "|\n  x",
    "- 1",
    "0x10",
    "0o7",
    "1_000",
    "+5",
    "1:2",
    "s3://bucket/key",
    "\t",
    "é",
    "💥",
];

fn cases(default: u32) -> u32 {
    std::env::var("DLIO_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Fixed seed by default, so the suite is reproducible; `DLIO_FUZZ_SEED=N` explores others.
/// The seed and the command that reruns the property are printed first (shown when it fails).
fn runner(default: u32, test: &str) -> RunnerConfig {
    let seed = std::env::var("DLIO_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    eprintln!(
        "{test}: seed {seed}, {} cases; rerun: DLIO_FUZZ_SEED={seed} cargo test -p dlio-trainer \
         --test fuzz_config -- --exact {test}",
        cases(default)
    );
    RunnerConfig {
        cases: cases(default),
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        rng_seed: RngSeed::Fixed(seed),
        ..RunnerConfig::default()
    }
}

/// The built-in workload texts.
fn texts() -> Vec<&'static str> {
    builtin_workloads().map(|w| w.yaml).collect()
}

/// Every dotted key path the built-in workloads use, plus a few they do not.
fn key_paths() -> Vec<String> {
    fn walk(prefix: &str, value: &Value, out: &mut BTreeSet<String>) {
        if let Value::Mapping(map) = value {
            for (k, v) in map {
                if let Some(k) = k.as_str() {
                    let path = if prefix.is_empty() {
                        k.to_string()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    out.insert(path.clone());
                    walk(&path, v, out);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for text in texts() {
        if let Ok(value) = yaml_serde::from_str::<Value>(text) {
            walk("", &value, &mut out);
        }
    }
    for extra in [
        "train.computation_time.type",
        "reader.preprocess_time",
        "nope.nope",
        "dataset",
    ] {
        out.insert(extra.to_string());
    }
    out.into_iter().collect()
}

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    ReplaceValue(usize, usize),
    InsertKey(usize, usize, usize),
    FlipByte(usize, u8),
    Cut(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(l, t)| Mutation::ReplaceValue(l, t)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(l, k, t)| Mutation::InsertKey(l, k, t)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::FlipByte(at, b)),
        any::<usize>().prop_map(Mutation::Cut),
    ]
}

fn apply(text: &str, mutations: &[Mutation], keys: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in mutations {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match *m {
            Mutation::DeleteLine(l) => {
                lines.remove(l % n);
            }
            Mutation::DuplicateLine(l) => {
                let line = lines[l % n].clone();
                lines.insert(l % n, line);
            }
            Mutation::ReplaceValue(l, t) => {
                let line = &mut lines[l % n];
                if let Some(colon) = line.find(':') {
                    line.truncate(colon + 1);
                    line.push(' ');
                    line.push_str(TOKENS[t % TOKENS.len()]);
                }
            }
            Mutation::InsertKey(l, k, t) => {
                let key = &keys[k % keys.len()];
                let depth = key.matches('.').count();
                let leaf = key.rsplit('.').next().unwrap_or(key);
                let line = format!("{}{leaf}: {}", "  ".repeat(depth), TOKENS[t % TOKENS.len()]);
                lines.insert(l % (n + 1), line);
            }
            Mutation::FlipByte(at, b) => {
                let mut bytes = lines.join("\n").into_bytes();
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= b.max(1);
                }
                lines = String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect();
            }
            Mutation::Cut(at) => {
                let joined = lines.join("\n");
                let mut end = at % (joined.len() + 1);
                while !joined.is_char_boundary(end) {
                    end -= 1;
                }
                lines = joined[..end].lines().map(str::to_string).collect();
            }
        }
    }
    lines.join("\n")
}

/// Loads, validates and round-trips a config, then sets up what a run would; any outcome but
/// a panic is fine.
/// How long one case may take: loading and planning one config is milliseconds, even in a
/// debug build on a busy machine; a case still running after this has hung.
const CASE_DEADLINE: Duration = Duration::from_secs(30);

/// Runs `case` on a thread of its own and fails the test, naming `what`, if it panics or
/// does not finish within [`CASE_DEADLINE`] (a hang otherwise stalls the suite).
fn within_deadline(what: String, case: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        case();
        let _ = done.send(());
    });
    match finished.recv_timeout(CASE_DEADLINE) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("a case did not finish within {CASE_DEADLINE:?}: {what}")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("a case panicked: {what}"),
    }
}

fn exercise(loaded: Result<dlio_config::Loaded, dlio_config::ConfigError>, world: u32) {
    let Ok(loaded) = loaded else { return };
    let config = &loaded.config;
    let yaml = config.to_yaml();
    let _ = load_text("round trip", &yaml, &[]);
    if config.validate(world).is_err() {
        return;
    }
    let _ = config.object_read_window();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    for (key, time) in [
        ("train.computation_time", &config.train.computation_time),
        ("evaluation.eval_time", &config.evaluation.eval_time),
        ("reader.preprocess_time", &config.reader.preprocess_time),
    ] {
        if let Ok(mut sampler) = TimeSampler::new(key, time) {
            for _ in 0..4 {
                let _ = sampler.draw(&mut rng);
            }
        }
    }
    let _ = dlio_trainer::CheckpointSetup::from_config(config, world);
    let _ = dlio_trainer::nominal_layout(config).sample_bytes();
    let _ = dlio_trainer::sample_out_bytes(config);
    let files = config.dataset.num_files_train;
    let spec = dlio_trainer::train_plan_spec(config, world, files, 1);
    if spec.validate().is_err() {
        return;
    }
    let _ = dlio_plan::trim(&spec);
    if let Ok(plan) = EpochPlan::new(&spec, 1, world - 1)
        && plan.steps() > 0
    {
        let _ = plan.batch(0).take(8).count();
        let _ = plan.batch(plan.steps() - 1).take(8).count();
    }
}

#[test]
fn mutated_workload_files_load_or_fail_cleanly() {
    let texts = texts();
    let keys = key_paths();
    proptest!(runner(1500, "mutated_workload_files_load_or_fail_cleanly"), |(
        which in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
        world in 1u32..9,
    )| {
        let text = apply(texts[which % texts.len()], &mutations, &keys);
        if std::env::var_os("DLIO_FUZZ_PRINT").is_some() {
            eprintln!("case: world {world} {text:?}");
        }
        let what = format!("world {world} {text:?}");
        within_deadline(what, move || exercise(load_text("fuzzed.yaml", &text, &[]), world));
    });
}

#[test]
fn random_overrides_load_or_fail_cleanly() {
    let keys = key_paths();
    let prefixes = [
        "++workload.",
        "+workload.",
        "workload.",
        "~workload.",
        "++",
        "hydra.",
    ];
    proptest!(runner(1500, "random_overrides_load_or_fail_cleanly"), |(
        workload in any::<usize>(),
        words in proptest::collection::vec(
            (any::<usize>(), any::<usize>(), any::<usize>(), any::<bool>()), 1..5),
        world in 1u32..9,
        upstream in any::<bool>(),
    )| {
        let names: Vec<_> = builtin_workloads().map(|w| w.name).collect();
        let mut positional = vec![format!("workload={}", names[workload % names.len()])];
        for (p, k, t, with_value) in words {
            let prefix = prefixes[p % prefixes.len()];
            let key = &keys[k % keys.len()];
            positional.push(if with_value {
                format!("{prefix}{key}={}", TOKENS[t % TOKENS.len()])
            } else {
                format!("{prefix}{key}")
            });
        }
        let args = LoadArgs {
            positional,
            config_dir: None,
            strict: false,
            semantics: Some(if upstream { Semantics::Upstream } else { Semantics::Mlperf }),
        };
        if std::env::var_os("DLIO_FUZZ_PRINT").is_some() {
            eprintln!("case: world {world} {:?}", args.positional);
        }
        let what = format!("world {world} {:?}", args.positional);
        within_deadline(what, move || exercise(load(&args), world));
    });
}
