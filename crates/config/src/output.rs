//! Showing a config: the resolved YAML (`dlio config`), one value (`dlio config --query`,
//! DLIO's `dlio_benchmark_query`) and the table of built-in workloads (`dlio workloads`).

use yaml_serde::Value;

use crate::builtin::{builtin_names, builtin_workload};
use crate::error::{ConfigError, Origin};
use crate::load::{load_text, unknown_key};
use crate::schema::Config;
use crate::tree::{self, TIME_KEYS};
use crate::vocab::{Semantics, TimeDistribution};

impl Config {
    /// The resolved config as YAML: every key, in DLIO's section order. Loading the text
    /// back gives the same config.
    pub fn to_yaml(&self) -> String {
        match self.to_tree() {
            Ok(tree) => yaml_serde::to_string(&tree)
                .unwrap_or_else(|e| format!("# the config cannot be shown as YAML: {e}\n")),
            Err(e) => format!("# the config cannot be shown as YAML: {e}\n"),
        }
    }

    /// One value by dotted key (`dataset.num_files_train` → `64`); a section gives its YAML.
    /// Accepts the same spellings as workload files (`data_reader.*`, `dataset.record_length`,
    /// `train.computation_time_stdev`).
    pub fn query(&self, dotted: &str) -> Result<String, ConfigError> {
        let mut value = self.lookup(dotted)?;
        integral_floats(&mut value);
        Ok(render(&value))
    }

    /// One value as DLIO's `dlio_benchmark_query` prints it: Python's `print(value)` of the
    /// value (`True`, `30.0`, `['a', 'b']`, `{'k': 1}`), and `None` for an unset or falsy one
    /// (0, False, an empty string, list or section), as that tool prints `value if value
    /// else None`.
    pub fn query_as_python(&self, dotted: &str) -> Result<String, ConfigError> {
        let mut value = self.lookup(dotted)?;
        // DLIO holds record lengths as integers; here they are f64 (fractional means).
        if tree::canonical(&tree::segments(dotted.trim()))
            .last()
            .is_some_and(|k| k.starts_with("record_length"))
        {
            integral_floats(&mut value);
        }
        Ok(if is_falsy(&value) {
            "None".into()
        } else {
            python_repr(&value, false)
        })
    }

    /// The value at `dotted`, floats as they are.
    fn lookup(&self, dotted: &str) -> Result<Value, ConfigError> {
        let path = tree::canonical(&tree::segments(dotted.trim()));
        if let Some(stdev) = self.legacy_stdev(&path) {
            return Ok(Value::Number(stdev.into()));
        }
        let bad = || unknown_key(Origin::Query, &tree::join(&path), &[]);
        let root = yaml_serde::to_value(self).map_err(|_| bad())?;
        let mut node = &root;
        for seg in &path {
            // An unset section (`storage.storage_options: null`) has every key of its
            // schema unset too: a known key under it is null, not unknown.
            if node.is_null() {
                return if crate::suggest::is_known(&tree::join(&path)) {
                    Ok(Value::Null)
                } else {
                    Err(bad())
                };
            }
            node = node
                .as_mapping()
                .and_then(|m| m.get(seg.as_str()))
                .ok_or_else(bad)?;
        }
        Ok(node.clone())
    }

    fn legacy_stdev(&self, path: &[String]) -> Option<f64> {
        let [section, key] = path else {
            return None;
        };
        let base = key.strip_suffix("_stdev")?;
        TIME_KEYS.iter().find(|(s, k)| s == section && *k == base)?;
        let dist = match base {
            "computation_time" => &self.train.computation_time,
            "eval_time" => &self.evaluation.eval_time,
            "batch_time" => &self.reader.batch_time,
            "open_time" => &self.reader.open_time,
            _ => &self.reader.preprocess_time,
        };
        Some(match *dist {
            TimeDistribution::Normal { stdev, .. } => stdev,
            _ => 0.0,
        })
    }

    fn to_tree(&self) -> Result<Value, yaml_serde::Error> {
        let mut tree = yaml_serde::to_value(self)?;
        integral_floats(&mut tree);
        Ok(tree)
    }
}

/// Writes `146600628.0` as `146600628`: the f64 keys (record_length_bytes, ...) then read
/// as they do in the workload files.
fn integral_floats(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(x) = n.as_f64()
                && x.fract() == 0.0
                && x.abs() < 9.0e15
            {
                *value = Value::Number((x as i64).into());
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(integral_floats),
        Value::Mapping(map) => map.values_mut().for_each(integral_floats),
        _ => {}
    }
}

fn render(node: &Value) -> String {
    match node {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Sequence(items)
            if items
                .iter()
                .all(|i| !matches!(i, Value::Mapping(_) | Value::Sequence(_))) =>
        {
            let parts: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", parts.join(", "))
        }
        other => yaml_serde::to_string(other)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default(),
    }
}

/// Python's truth value of the value (`if value:`).
fn is_falsy(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Sequence(items) => items.is_empty(),
        Value::Mapping(map) => map.is_empty(),
        Value::Tagged(t) => is_falsy(&t.value),
    }
}

/// Python's `str()` of the value, or its `repr()` inside a list or dict (`nested`).
fn python_repr(value: &Value, nested: bool) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(x)) => python_float(x),
            _ => n.to_string(),
        },
        Value::String(s) if nested => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::String(s) => s.clone(),
        Value::Sequence(items) => {
            let parts: Vec<String> = items.iter().map(|i| python_repr(i, true)).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Mapping(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", python_repr(k, true), python_repr(v, true)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Tagged(t) => python_repr(&t.value, nested),
    }
}

/// Python's `repr(float)`: the shortest digits that read back, `.0` on integral values,
/// exponent form below 1e-4 and from 1e16 with at least two exponent digits (`1e-05`).
fn python_float(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Rust writes the shortest digits too (`1e-5`, `1.5e16`); Python pads the exponent.
        let text = format!("{x:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    // `{:?}` is the shortest round-trip form and keeps `.0` on integral values.
    format!("{x:?}")
}

/// One line of `dlio workloads`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRow {
    /// Workload name.
    pub name: String,
    /// `dataset.format`, or `-` for checkpoint-only workloads.
    pub format: String,
    /// Train/eval file counts (`168/0`).
    pub files: String,
    /// Sample size (`139.8 MiB ±65.2 MiB`).
    pub record: String,
    /// `reader.batch_size`.
    pub batch: String,
    /// `train.computation_time`, or what a checkpoint-only workload does instead.
    pub compute: String,
    /// Where the file comes from (DLIO, DLIO paper, MLPerf Storage v3).
    pub origin: String,
}

impl WorkloadRow {
    /// The header line's cells.
    pub const HEADER: [&'static str; 7] = [
        "WORKLOAD",
        "FROM",
        "FORMAT",
        "FILES TRAIN/EVAL",
        "RECORD",
        "BATCH",
        "COMPUTE PER STEP",
    ];

    /// The cells, in [`WorkloadRow::HEADER`] order.
    pub fn cells(&self) -> [&str; 7] {
        [
            &self.name,
            &self.origin,
            &self.format,
            &self.files,
            &self.record,
            &self.batch,
            &self.compute,
        ]
    }
}

/// The `dlio workloads` line of the built-in workload `name` (as the default semantics
/// resolve it).
pub fn workload_row(name: &str) -> Result<WorkloadRow, ConfigError> {
    let workload = builtin_workload(name, Semantics::default()).ok_or_else(|| {
        ConfigError::UnknownWorkload {
            name: name.to_string(),
            searched: None,
            available: builtin_names().iter().map(|n| n.to_string()).collect(),
        }
    })?;
    let config = load_text(&format!("{name}.yaml (built-in)"), workload.yaml, &[])?.config;
    let mut row = row(name, &config);
    row.origin = workload.origin.label().to_string();
    Ok(row)
}

fn row(name: &str, c: &Config) -> WorkloadRow {
    if c.checkpoint_only() {
        let p = &c.model.parallelism;
        return WorkloadRow {
            name: name.to_string(),
            format: "-".into(),
            files: "-".into(),
            record: "-".into(),
            batch: "-".into(),
            compute: format!(
                "checkpoint only: {} layers, TP{} PP{} ZeRO{}, write {} / read {}",
                c.model.num_layers,
                p.tensor,
                p.pipeline,
                p.zero_stage,
                c.checkpoint.num_checkpoints_write,
                c.checkpoint.num_checkpoints_read
            ),
            origin: String::new(),
        };
    }
    let d = &c.dataset;
    let mut record = human_bytes(d.record_length_bytes);
    if d.record_length_bytes_stdev > 0.0 {
        record.push_str(&format!(" ±{}", human_bytes(d.record_length_bytes_stdev)));
    }
    if d.num_samples_per_file > 1 {
        record.push_str(&format!(" ×{}/file", d.num_samples_per_file));
    }
    WorkloadRow {
        name: name.to_string(),
        format: d.format.name().to_string(),
        files: format!("{}/{}", d.num_files_train, d.num_files_eval),
        record,
        batch: c.reader.batch_size.to_string(),
        compute: describe_time(&c.train.computation_time),
        origin: String::new(),
    }
}

/// The `dlio workloads` table: a header and one aligned line per built-in workload.
pub fn workload_table() -> Result<String, ConfigError> {
    let names = builtin_names();
    let mut rows = Vec::with_capacity(names.len());
    for name in names {
        rows.push(workload_row(name)?);
    }
    let mut widths = WorkloadRow::HEADER.map(str::len);
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r.cells()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 7]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&" ".repeat(w - cell.chars().count() + 2));
            }
        }
        out.push('\n');
        out
    };
    let mut table = line(WorkloadRow::HEADER);
    for r in &rows {
        table.push_str(&line(r.cells()));
    }
    Ok(table)
}

fn describe_time(t: &TimeDistribution) -> String {
    match *t {
        TimeDistribution::Constant { value } => format!("{value} s"),
        TimeDistribution::Normal { mean, stdev } => format!("{mean}±{stdev} s"),
        TimeDistribution::Uniform { min, max } => format!("uniform {min}..{max} s"),
        TimeDistribution::Gamma { shape, scale } => {
            format!("gamma(shape {shape}, scale {scale}) s")
        }
        TimeDistribution::Exponential { scale } => format!("exponential(scale {scale}) s"),
        TimeDistribution::Poisson { lam } => format!("poisson({lam}) s"),
        TimeDistribution::Quantiles { ref values } => format!(
            "quantiles {}..{} s (mean {:.6})",
            values.first().copied().unwrap_or(0.0),
            values.last().copied().unwrap_or(0.0),
            crate::vocab::quantiles_mean(values)
        ),
        TimeDistribution::Empirical { ref values } => format!(
            "{} measured times {}..{} s (mean {:.6})",
            values.len(),
            values.iter().copied().fold(f64::INFINITY, f64::min),
            values.iter().copied().fold(0.0, f64::max),
            t.mean()
        ),
    }
}

fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `value` as block YAML in the style Hydra writes its run files in, with every string that
/// a YAML 1.1 reader (PyYAML, which mlpstorage uses) would take for something else quoted:
/// `off`, `yes`, `null`, `1e5`, `12:30`, ... stay strings when read back. Mapping order is
/// kept.
pub fn to_hydra_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Mapping(map) if !map.is_empty() => emit_mapping(map, 0, &mut out),
        Value::Sequence(items) if !items.is_empty() => emit_sequence(items, 0, &mut out),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn emit_mapping(map: &yaml_serde::Mapping, indent: usize, out: &mut String) {
    for (key, value) in map {
        out.push_str(&" ".repeat(indent));
        out.push_str(&scalar(key));
        out.push(':');
        emit_child(value, indent, out);
    }
}

fn emit_sequence(items: &[Value], indent: usize, out: &mut String) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        match item {
            Value::Mapping(map) if !map.is_empty() => {
                // The first key on the dash's line, the rest under it (`- name: x`).
                let mut first = true;
                for (key, value) in map {
                    if first {
                        out.push(' ');
                        first = false;
                    } else {
                        out.push_str(&" ".repeat(indent + 2));
                    }
                    out.push_str(&scalar(key));
                    out.push(':');
                    emit_child(value, indent + 2, out);
                }
            }
            other => emit_child(other, indent, out),
        }
    }
}

/// What follows `key:` (or `-`): a nested block on the next lines, or ` scalar`.
fn emit_child(value: &Value, indent: usize, out: &mut String) {
    match value {
        Value::Mapping(map) if !map.is_empty() => {
            out.push('\n');
            emit_mapping(map, indent + 2, out);
        }
        // Hydra (PyYAML) writes a list under a key at the key's own indentation.
        Value::Sequence(items) if !items.is_empty() => {
            out.push('\n');
            emit_sequence(items, indent, out);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => if *b { "true" } else { "false" }.into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote_if_needed(s),
        Value::Sequence(_) => "[]".into(),
        Value::Mapping(_) => "{}".into(),
        Value::Tagged(t) => scalar(&t.value),
    }
}

/// `text` plain when every YAML 1.1 reader reads it back as this string, else quoted.
fn quote_if_needed(text: &str) -> String {
    const NOT_STRINGS: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
        ".inf", ".Inf", ".INF", "-.inf", "+.inf", ".nan", ".NaN", ".NAN", "<<", "=",
    ];
    let first = text.chars().next();
    let plain = !text.is_empty()
        && !NOT_STRINGS.contains(&text)
        && !first.is_some_and(|c| {
            c.is_ascii_digit() || c.is_whitespace() || "-+.!&*?|>'\"%@`[]{},#:".contains(c)
        })
        && !text.ends_with(char::is_whitespace)
        && !text.ends_with(':')
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.contains(['\n', '\r', '\t'])
        && !text.chars().any(char::is_control);
    if plain {
        return text.to_string();
    }
    if text.chars().any(char::is_control) {
        // Double quotes, the only YAML style with escapes.
        return serde_json::to_string(text).unwrap_or_else(|_| format!("'{text}'"));
    }
    format!("'{}'", text.replace('\'', "''"))
}
