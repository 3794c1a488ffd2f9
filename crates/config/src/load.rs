//! `load`: command-line words → workload text → key tree → overrides → typed [`Config`].

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::builtin::{builtin_names, builtin_workload};
use crate::de::{DeError, DeErrorKind, NodeDe};
use crate::error::{ConfigError, Origin};
use crate::schema::Config;
use crate::suggest::{is_known, keys_under, suggest};
use crate::tree::{self, ALIASES, IGNORED, STORAGE_LEVEL_OPTIONS, TIME_KEYS};
use crate::vocab::{DataLoaderKind, Framework, Semantics};

/// The `source` of a workload that came from the built-in copies.
pub const BUILTIN_SOURCE: &str = "built-in";

/// What the user asked for on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadArgs {
    /// Every word typed after the subcommand: `workload=X`, overrides (`++workload.a.b=v`,
    /// `workload.a.b=v`, `+workload.a.b=v`, `~workload.a.b`), and `hydra.*` settings.
    pub positional: Vec<String>,
    /// `--config-dir DIR`: workloads are looked up as `DIR/workload/NAME.yaml` first.
    pub config_dir: Option<PathBuf>,
    /// `--strict`: an unknown key is an error instead of a warning (upstream DLIO ignores
    /// unknown keys, so by default they are dropped with a warning naming file, line and the
    /// nearest known key).
    pub strict: bool,
    /// `--semantics` / `DLIO_SEMANTICS`: overrides the workload's `semantics` key, and chooses
    /// which built-in file a name shared by DLIO and MLPerf Storage v3 means.
    pub semantics: Option<Semantics>,
}

/// A loaded workload: the typed config and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The resolved config (not yet validated: see [`Config::validate`]).
    pub config: Config,
    /// The workload name or path as given (`default` when none was).
    pub workload: String,
    /// [`BUILTIN_SOURCE`] for a built-in workload, otherwise the file path read.
    pub source: String,
    /// The override and `hydra.*` arguments as typed, in order (without `workload=X`).
    pub overrides: Vec<String>,
    /// `hydra.run.dir=DIR`, if given: the output folder when `output.folder` is unset.
    pub hydra_run_dir: Option<PathBuf>,
    /// `hydra.output_subdir`: the folder of the run directory that receives `config.yaml`,
    /// `hydra.yaml` and `overrides.yaml`; `.hydra` unless set, `None` for `null` (no files,
    /// as in Hydra).
    pub hydra_output_subdir: Option<String>,
    /// One line per accepted-but-ignored key (each names the key DLIO really reads) and per
    /// unknown key dropped.
    pub warnings: Vec<String>,
    /// The composed workload as Hydra composes it: the file's own keys, with the overrides
    /// applied to them as typed (no defaults filled in, no aliases folded). This is what
    /// Hydra writes, under `workload:`, to `<output_subdir>/config.yaml`.
    pub composed: yaml_serde::Value,
    /// `--strict` was given: what upstream tolerates with a warning (unknown keys, a run
    /// with no training step) is an error.
    pub strict: bool,
}

/// Loads the workload named by `workload=NAME` in `args.positional` (default `default`),
/// applies the overrides and converts the result to a [`Config`].
///
/// `NAME` is looked up as `--config-dir`/workload/NAME.yaml, then among the built-in
/// workloads; a name containing `/` or ending in `.yaml`/`.yml` is a file path.
pub fn load(args: &LoadArgs) -> Result<Loaded, ConfigError> {
    let words = parse_words(&args.positional)?;
    let workload = words.workload.clone().unwrap_or_else(|| "default".into());
    let (label, source, text) = read_workload(
        &workload,
        args.config_dir.as_deref(),
        args.semantics.unwrap_or_default(),
    )?;
    let settings = Settings {
        strict: args.strict,
        semantics: args.semantics,
    };
    let (config, warnings) = resolve(&text, &label, &words.overrides, settings)?;
    let composed = compose(&text, &words.overrides);
    Ok(Loaded {
        config,
        workload,
        source,
        hydra_output_subdir: words.output_subdir(),
        overrides: words.typed,
        hydra_run_dir: words.hydra_run_dir,
        warnings,
        composed,
        strict: args.strict,
    })
}

/// How [`resolve`] treats what the workload cannot say for itself.
#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    strict: bool,
    semantics: Option<Semantics>,
}

/// Loads a workload from YAML text; `name` labels it in messages and in
/// [`Loaded::workload`]/[`Loaded::source`]. `overrides` take the same grammar as in
/// [`load`] (a `workload=` word is rejected).
pub fn load_text(name: &str, yaml: &str, overrides: &[String]) -> Result<Loaded, ConfigError> {
    let words = parse_words(overrides)?;
    if let Some(w) = words.workload {
        return Err(ConfigError::BadOverride {
            arg: format!("workload={w}"),
            reason: "the workload text is given directly here, so `workload=` cannot choose \
                     another one; remove it"
                .into(),
        });
    }
    let (config, warnings) = resolve(yaml, name, &words.overrides, Settings::default())?;
    let composed = compose(yaml, &words.overrides);
    Ok(Loaded {
        hydra_output_subdir: words.output_subdir(),
        config,
        workload: name.to_string(),
        source: name.to_string(),
        overrides: words.typed,
        hydra_run_dir: words.hydra_run_dir,
        warnings,
        composed,
        strict: false,
    })
}

impl Config {
    /// Parses a workload's YAML text with no overrides, dropping the warnings: a shortcut
    /// for tests and tools (use [`load`] or [`load_text`] to see the warnings).
    pub fn from_yaml(yaml: &str) -> Result<Config, ConfigError> {
        resolve(yaml, "<text>", &[], Settings::default()).map(|(config, _)| config)
    }
}

const GRAMMAR: &str = "arguments are `workload=NAME` (a built-in name, or a path ending in \
    .yaml), `++workload.SECTION.KEY=VALUE` (set), `workload.SECTION.KEY=VALUE` (override), \
    `+workload.SECTION.KEY=VALUE` (add a key the workload does not set), \
    `~workload.SECTION.KEY` (remove) and `hydra.run.dir=DIR`";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `key=v`: override.
    Set,
    /// `+key=v`: add; the key must not be set yet.
    Add,
    /// `++key=v`: add or override.
    Force,
    /// `~key`: remove.
    Delete,
}

#[derive(Debug, Clone)]
struct Override {
    arg: String,
    op: Op,
    /// Canonical segments below `workload.`.
    path: Vec<String>,
    /// The segments as typed (`dataset.record_length` stays so): what Hydra's composed
    /// config shows.
    typed_path: Vec<String>,
    value: Value,
}

#[derive(Debug, Default)]
struct Words {
    workload: Option<String>,
    overrides: Vec<Override>,
    typed: Vec<String>,
    hydra_run_dir: Option<PathBuf>,
    hydra_output_subdir: Option<Option<String>>,
}

impl Words {
    fn output_subdir(&self) -> Option<String> {
        match &self.hydra_output_subdir {
            None => Some(".hydra".into()),
            Some(dir) => dir.clone(),
        }
    }
}

fn parse_words(positional: &[String]) -> Result<Words, ConfigError> {
    let mut words = Words::default();
    for arg in positional {
        let bad = |reason: String| ConfigError::BadOverride {
            arg: arg.clone(),
            reason,
        };
        if let Some(name) = arg.strip_prefix("workload=") {
            if name.is_empty() {
                return Err(bad(
                    "give a workload name, e.g. `workload=unet3d_h100`".into()
                ));
            }
            if let Some(first) = &words.workload {
                return Err(bad(format!(
                    "the workload is already `{first}`; give `workload=` once"
                )));
            }
            words.workload = Some(name.to_string());
            continue;
        }
        let (op, rest) = if let Some(r) = arg.strip_prefix("++") {
            (Op::Force, r)
        } else if let Some(r) = arg.strip_prefix('+') {
            (Op::Add, r)
        } else if let Some(r) = arg.strip_prefix('~') {
            (Op::Delete, r)
        } else {
            (Op::Set, arg.as_str())
        };
        let (key, value) = match rest.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None if op == Op::Delete => (rest, None),
            None => return Err(bad(format!("it is not KEY=VALUE; {GRAMMAR}"))),
        };
        if key == "hydra" || key.starts_with("hydra.") || key.starts_with("hydra/") {
            if key == "hydra.run.dir" {
                match value.map(unquote) {
                    Some(dir) if !dir.is_empty() => words.hydra_run_dir = Some(PathBuf::from(dir)),
                    _ => return Err(bad("give a directory: `hydra.run.dir=DIR`".into())),
                }
            }
            if key == "hydra.output_subdir" {
                let dir = value.map(unquote).unwrap_or_default();
                words.hydra_output_subdir = Some(match dir {
                    "" | "null" | "None" | "~" => None,
                    d if Path::new(d).is_absolute() || d.split('/').any(|p| p == "..") => {
                        return Err(bad(
                            "hydra.output_subdir is a folder inside the run directory; give a \
                             relative name such as `dlio_config` (or `null` for none)"
                                .into(),
                        ));
                    }
                    d => Some(d.to_string()),
                });
            }
            // Other Hydra settings (job_logging, sweep, ...) steer Hydra itself and have no
            // counterpart here; they are recorded in `hydra.yaml`.
            words.typed.push(arg.clone());
            continue;
        }
        let Some(dotted) = key.strip_prefix("workload.") else {
            let hint = if is_known(&tree::join(&tree::canonical(&tree::segments(key)))) {
                format!(
                    "workload settings live under `workload.`: did you mean `{}workload.{key}{}`?",
                    match op {
                        Op::Force => "++",
                        Op::Add => "+",
                        Op::Delete => "~",
                        Op::Set => "",
                    },
                    value.map(|v| format!("={v}")).unwrap_or_default()
                )
            } else {
                format!("the key must start with `workload.` or `hydra.`; {GRAMMAR}")
            };
            return Err(bad(hint));
        };
        let segments = tree::segments(dotted);
        if segments.iter().any(String::is_empty) {
            return Err(bad(format!(
                "`{key}` has an empty part; write keys as `workload.section.key`"
            )));
        }
        words.overrides.push(Override {
            arg: arg.clone(),
            op,
            path: tree::canonical(&segments),
            typed_path: segments,
            value: value.map(parse_value).unwrap_or(Value::Null),
        });
        words.typed.push(arg.clone());
    }
    Ok(words)
}

fn unquote(text: &str) -> &str {
    let t = text.trim();
    for q in ['"', '\''] {
        if let Some(inner) = t.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    t
}

/// An override value, read as YAML (so `True`, `1e-3`, `null`, `[1024,128]`, `{}` and quoted
/// strings mean what they mean in a workload file). Text that is not valid YAML is taken as
/// a plain string, as Hydra takes unquoted text; an empty value is the empty string.
fn parse_value(text: &str) -> Value {
    if text.is_empty() {
        return Value::String(String::new());
    }
    // Hydra's dictionaries need no space after the colon (`{type:uniform,min:0}`), YAML's
    // flow mappings do (it reads `type:uniform` as one key).
    let spaced = hydra_dict_as_yaml(text);
    let text = spaced.as_deref().unwrap_or(text);
    match yaml_serde::from_str::<yaml_serde::Value>(text) {
        Ok(v) => tree::from_yaml(v, "").unwrap_or_else(|_| Value::String(text.to_string())),
        Err(_) => Value::String(text.to_string()),
    }
}

/// `text` with a space after the colon that ends each key of a Hydra dictionary, where it has
/// none (outside quotes), when `text` is a dictionary (`{...}`); `None` when nothing changes.
/// Only the key's colon: a value keeps its own (`{endpoint:http://host:9000}`).
fn hydra_dict_as_yaml(text: &str) -> Option<String> {
    let t = text.trim();
    if !(t.starts_with('{') && t.ends_with('}')) {
        return None;
    }
    let mut out = String::with_capacity(t.len() + 8);
    let mut quote: Option<char> = None;
    let mut open: Vec<char> = Vec::new();
    let mut in_key = false;
    let mut changed = false;
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '{' | '[' => {
                open.push(c);
                in_key = c == '{';
            }
            '}' | ']' => {
                open.pop();
                in_key = false;
            }
            ',' => in_key = open.last() == Some(&'{'),
            ':' if in_key => {
                in_key = false;
                if chars.peek().is_some_and(|n| !n.is_whitespace()) {
                    out.push(' ');
                    changed = true;
                }
            }
            _ => {}
        }
    }
    changed.then_some(out)
}

fn read_workload(
    name: &str,
    config_dir: Option<&Path>,
    semantics: Semantics,
) -> Result<(String, String, String), ConfigError> {
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    if name.contains('/') || name.ends_with(".yaml") || name.ends_with(".yml") {
        let text = read(Path::new(name))?;
        return Ok((name.to_string(), name.to_string(), text));
    }
    let searched = config_dir.map(|dir| dir.join("workload").join(format!("{name}.yaml")));
    if let Some(path) = &searched
        && path.is_file()
    {
        let text = read(path)?;
        let shown = path.display().to_string();
        return Ok((shown.clone(), shown, text));
    }
    match builtin_workload(name, semantics) {
        Some(w) => Ok((
            format!("{name}.yaml (built-in, {})", w.origin.label()),
            BUILTIN_SOURCE.to_string(),
            w.yaml.to_string(),
        )),
        None => Err(ConfigError::UnknownWorkload {
            name: name.to_string(),
            searched,
            available: builtin_names().iter().map(|n| n.to_string()).collect(),
        }),
    }
}

/// Knows where every key came from, to word messages.
struct Context<'a> {
    label: &'a str,
    text: &'a str,
    overrides: &'a [Override],
}

impl Context<'_> {
    /// The override that set `path` (or a key above or below it), else the file and line.
    fn origin(&self, path: &[String]) -> Origin {
        if !path.is_empty() {
            let related = self.overrides.iter().rev().find(|o| {
                let n = o.path.len().min(path.len());
                o.path[..n] == path[..n]
            });
            if let Some(o) = related {
                return Origin::Override { arg: o.arg.clone() };
            }
        }
        self.file_origin(path)
    }

    fn file_origin(&self, path: &[String]) -> Origin {
        let mut probe = path.to_vec();
        let mut line = None;
        while !probe.is_empty() && line.is_none() {
            line = tree::locate(self.text, &probe).map(|(line, _)| line);
            probe.pop();
        }
        Origin::File {
            file: self.label.to_string(),
            line,
        }
    }

    fn convert(&self, e: DeError) -> ConfigError {
        let key = e.path.clone().unwrap_or_default();
        let segments: Vec<String> = tree::segments(&key)
            .into_iter()
            .map(|s| s.split('[').next().unwrap_or_default().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let origin = self.origin(&segments);
        match e.kind {
            DeErrorKind::Expected { expected, got } => ConfigError::InvalidValue {
                origin,
                key,
                expected,
                got,
            },
            DeErrorKind::UnknownVariant { got, allowed } => ConfigError::InvalidValue {
                origin,
                key,
                expected: format!("one of {}", allowed.join(", ")),
                got: format!("`{got}`"),
            },
            DeErrorKind::Message(message) => ConfigError::BadValue {
                origin,
                key,
                message,
            },
            DeErrorKind::UnknownKey { known } => unknown_key(origin, &key, &known),
        }
    }
}

/// The error for an unknown key, with a suggestion or the list of keys allowed there.
pub(crate) fn unknown_key(origin: Origin, key: &str, known: &[String]) -> ConfigError {
    let suggestion = suggest(key);
    let hint = match &suggestion {
        Some(s) => format!("did you mean `{s}`?"),
        None => {
            let parent = key.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
            let known: Vec<String> = if known.is_empty() {
                keys_under(parent).iter().map(|s| s.to_string()).collect()
            } else {
                known.to_vec()
            };
            let place = if parent.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in `{parent}`")
            };
            format!(
                "remove it or fix its spelling; the keys allowed {place} are: {}",
                known.join(", ")
            )
        }
    };
    ConfigError::UnknownKey {
        origin,
        key: key.to_string(),
        suggestion,
        hint,
    }
}

/// Text → typed config, with the warnings for ignored keys.
fn resolve(
    text: &str,
    label: &str,
    overrides: &[Override],
    settings: Settings,
) -> Result<(Config, Vec<String>), ConfigError> {
    let ctx = Context {
        label,
        text,
        overrides,
    };
    let mut yaml: yaml_serde::Value = if text.trim().is_empty() {
        yaml_serde::Value::Null
    } else {
        yaml_serde::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            ConfigError::Yaml {
                file: label.to_string(),
                line,
                column,
                message: strip_position(&e.to_string()),
            }
        })?
    };
    // Anchors are resolved by the parser; `<<: *base` merge keys are applied here.
    yaml.apply_merge().map_err(|e| ConfigError::Structure {
        origin: ctx.file_origin(&[]),
        message: format!("a YAML merge key (`<<`) cannot be applied: {e}"),
    })?;
    let mut root = tree::from_yaml(yaml, "").map_err(|message| ConfigError::Structure {
        origin: ctx.file_origin(&[]),
        message,
    })?;
    if root.is_null() {
        root = Value::Object(Map::new());
    }
    if !root.is_object() {
        return Err(ConfigError::Structure {
            origin: ctx.file_origin(&[]),
            message: "a workload must be a mapping of sections (`model:`, `dataset:`, \
                      `reader:`, ...), not a single value or a list"
                .into(),
        });
    }
    let mut warnings = Vec::new();
    model_name_shorthand(&mut root, &ctx, &mut warnings);
    fold_aliases(&mut root, &ctx)?;
    storage_type_shorthand(&mut root, &ctx, &mut warnings);
    let mut implicit_means: Vec<Vec<String>> = Vec::new();
    for o in overrides {
        apply(&mut root, o, &mut implicit_means)?;
    }
    drop_implicit_means(&mut root, &implicit_means);
    model_name_shorthand(&mut root, &ctx, &mut warnings);
    if let Some(semantics) = settings.semantics
        && let Value::Object(map) = &mut root
    {
        map.insert("semantics".into(), Value::String(semantics.as_str().into()));
    }
    for (key, message) in IGNORED {
        let path = tree::segments(key);
        if tree::remove(&mut root, &path).is_some() {
            warnings.push(format!("{}: `{key}` {message}", ctx.origin(&path)));
        }
    }
    fold_stdev_siblings(&mut root, &ctx)?;
    lower_storage_level_options(&mut root, &ctx)?;
    drop_unknown_keys(&mut root, &ctx, settings.strict, &mut warnings)?;
    interpolate(&mut root, &ctx, &mut warnings)?;
    promote_storage_library(&mut root);
    let devices = ["profiling".to_string(), "iostat_devices".to_string()];
    if let Some(Value::Object(profiling)) = root.get_mut(&devices[0])
        && let Some(v @ Value::String(_)) = profiling.get_mut(&devices[1])
    {
        *v = Value::Array(vec![v.take()]);
    }
    // DLIO's `data_loader_sampler: none` is its enum's NONE, which no code path acts on:
    // the loader's own sampler (iterative for tensorflow, index otherwise), as when unset.
    if let Some(Value::Object(reader)) = root.get_mut("reader")
        && let Some(v @ Value::String(_)) = reader.get_mut("data_loader_sampler")
        && v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("none"))
    {
        *v = Value::Null;
    }
    let loader_given =
        tree::get(&root, &["reader".into(), "data_loader".into()]).is_some_and(|v| !v.is_null());
    let mut config = Config::deserialize(NodeDe::root(&root)).map_err(|e| ctx.convert(e))?;
    if !loader_given {
        config.reader.data_loader = match config.framework {
            Framework::Tensorflow => DataLoaderKind::Tensorflow,
            Framework::Pytorch => DataLoaderKind::Pytorch,
        };
    }
    // The tf.data loader needs a reader: DLIO (upstream and the fork) raises read_threads 0
    // to 1 with a warning; reading on the step loop's thread would measure no overlap.
    if config.reader.data_loader == DataLoaderKind::Tensorflow && config.reader.read_threads == 0 {
        config.reader.read_threads = 1;
        let path = ["reader", "read_threads"].map(String::from);
        warnings.push(format!(
            "{}: `reader.read_threads` is 0, which the tensorflow data loader does not take; \
             1 is used, as DLIO does",
            ctx.origin(&path)
        ));
    }
    trim_trailing_slashes(&mut config.dataset.data_folder);
    trim_trailing_slashes(&mut config.checkpoint.checkpoint_folder);
    apply_uri_scheme(&mut config, &ctx, &mut warnings)?;
    apply_column_selection(&mut config, &ctx)?;
    apply_fork_storage_options(&mut config, &ctx, &mut warnings)?;
    Ok((config, warnings))
}

/// The fork's reader and client options in `storage.storage_options`: `footer_cap` becomes
/// `dataset.parquet.footer_read_size` (when that is not set) and `coalesce_rgs` dlio's own
/// coalescing; the in-flight limits say they have no effect; decoding and simulated I/O are
/// refused (dlio decodes nothing, and a run without I/O measures nothing of the storage), and
/// full-URI object keys too (the S3 client dlio uses cannot send a key with the empty path
/// segment of `s3://`).
fn apply_fork_storage_options(
    config: &mut Config,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let Some(options) = config.storage.storage_options.clone() else {
        return Ok(());
    };
    let at = |key: &str| ctx.origin(&["storage", "storage_options", key].map(String::from));
    if let Some(cap) = options.footer_cap
        && config.dataset.parquet.footer_read_size == 0
    {
        config.dataset.parquet.footer_read_size = cap;
    }
    if let Some(n) = options.coalesce_rgs {
        config.dataset.parquet.coalesce_row_groups = n.max(1);
    }
    for (key, set) in [
        ("footer_batch_size", options.footer_batch_size.is_some()),
        ("max_outstanding", options.max_outstanding.is_some()),
        ("prefetch_workers", options.prefetch_workers.is_some()),
    ] {
        if set {
            warnings.push(format!(
                "{}: `storage.storage_options.{key}` has no effect in dlio: a reader thread \
                 reads a file's footer when it opens it and fetches a row group's ranges in \
                 turn; reader.read_threads and storage.io_depth set the requests in flight",
                at(key)
            ));
        }
    }
    let refuse = |key: &str, message: String, fix: &str| ConfigError::Invalid {
        key: format!("storage.storage_options.{key}"),
        message: format!("{}: {message}", at(key)),
        fix: fix.into(),
    };
    if let Some(decode) = options.decode.as_deref()
        && !decode.eq_ignore_ascii_case("raw")
    {
        return Err(refuse(
            "decode",
            format!("is `{decode}`; dlio reads a row group's bytes and decodes nothing."),
            "remove the key, or set it to raw",
        ));
    }
    if let Some(output) = options.decode_output.as_deref()
        && !output.eq_ignore_ascii_case("none")
    {
        return Err(refuse(
            "decode_output",
            format!("is `{output}`; dlio decodes nothing, so there is no output to make."),
            "remove the key, or set it to none",
        ));
    }
    if options.use_full_object_uri == Some(true) {
        return Err(refuse(
            "use_full_object_uri",
            "asks for object keys that are whole URIs (`s3://bucket/key`); dlio's S3 client \
             cannot send a key with an empty path segment."
                .into(),
            "remove the key (or set it to false): objects are then read by their keys, as \
             the fork's s3dlio client reads them",
        ));
    }
    if options.simulate_io == Some(true) || options.sim_log_secs.is_some() {
        return Err(refuse(
            "simulate_io",
            "asks for a run without I/O, which measures nothing of the storage.".into(),
            "remove simulate_io and sim_log_secs; for a run without I/O use \
             dataset.format: synthetic",
        ));
    }
    Ok(())
}

/// `storage.storage_options.columns`, the fork's parquet column selection (a list of names;
/// null reads every column), becomes the `read` flags of `dataset.parquet.columns`, so that
/// the reader has one selection to follow. A name that is not a column is an error.
fn apply_column_selection(config: &mut Config, ctx: &Context<'_>) -> Result<(), ConfigError> {
    let Some(names) = config
        .storage
        .storage_options
        .as_ref()
        .and_then(|o| o.columns.clone())
    else {
        return Ok(());
    };
    let path = ["storage", "storage_options", "columns"].map(String::from);
    let columns = &mut config.dataset.parquet.columns;
    let known: Vec<&str> = if columns.is_empty() {
        vec!["data"]
    } else {
        columns.iter().map(|c| c.name.as_str()).collect()
    };
    if let Some(missing) = names.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(ConfigError::Invalid {
            key: "storage.storage_options.columns".into(),
            message: format!(
                "{}: names column `{missing}`, which the parquet files do not have (their \
                 columns: {}).",
                ctx.origin(&path),
                known.join(", ")
            ),
            fix: "list only names of dataset.parquet.columns, or remove the key to read the \
                  columns marked read: true"
                .into(),
        });
    }
    if names.is_empty() {
        return Err(ConfigError::Invalid {
            key: "storage.storage_options.columns".into(),
            message: format!(
                "{}: is an empty list; nothing would be read.",
                ctx.origin(&path)
            ),
            fix: "list the columns to read, or set it to null to read them all".into(),
        });
    }
    for column in columns.iter_mut() {
        column.read = names.contains(&column.name);
    }
    Ok(())
}

/// `storage.storage_options.uri_scheme`: the fork's object layer also serves local paths
/// (`file://`, and `direct://` with O_DIRECT) through s3dlio. dlio reads those with its local
/// engines, so the storage type becomes `local_fs` or `direct_fs`, with `storage_root` as the
/// directory. `s3` is the default; Azure Blob (`az`) and GCS (`gs`) are not S3 API services
/// and are refused.
fn apply_uri_scheme(
    config: &mut Config,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    use crate::schema::StorageType;
    let Some(options) = config.storage.storage_options.as_mut() else {
        return Ok(());
    };
    let Some(raw) = options.uri_scheme.clone() else {
        return Ok(());
    };
    let scheme = raw.trim().trim_end_matches([':', '/']).to_ascii_lowercase();
    let path = ["storage", "storage_options", "uri_scheme"].map(String::from);
    let invalid = |message: String, fix: &str| ConfigError::Invalid {
        key: "storage.storage_options.uri_scheme".into(),
        message: format!("{}: {message}", ctx.origin(&path)),
        fix: fix.into(),
    };
    let object = config.storage.storage_type == StorageType::S3;
    let local = match scheme.as_str() {
        "s3" if object => return Ok(()),
        "s3" => {
            return Err(invalid(
                format!(
                    "is `{raw}` but storage.storage_type is {}; the s3 scheme needs an object \
                     store.",
                    config.storage.storage_type.as_str()
                ),
                "set ++workload.storage.storage_type=s3, or remove the uri_scheme",
            ));
        }
        "file" => StorageType::LocalFs,
        "direct" => StorageType::DirectFs,
        "az" | "gs" => {
            return Err(invalid(
                format!(
                    "is `{raw}`: {} is not an S3 API service, and dlio's object engine speaks \
                     only the S3 API.",
                    if scheme == "az" {
                        "Azure Blob Storage"
                    } else {
                        "Google Cloud Storage"
                    }
                ),
                "reach the bucket through an S3-compatible gateway (GCS: its XML API \
                 endpoint https://storage.googleapis.com with HMAC keys) with uri_scheme s3",
            ));
        }
        _ => {
            return Err(invalid(
                format!("is `{raw}`, which is none of s3, file, direct."),
                "set it to s3 (object storage), file (local files) or direct (local files \
                 with O_DIRECT)",
            ));
        }
    };
    let root = config.storage.storage_root.trim();
    let root = root
        .strip_prefix("file://")
        .or_else(|| root.strip_prefix("direct://"))
        .unwrap_or(root)
        .to_string();
    if config.storage.storage_type != local {
        warnings.push(format!(
            "{}: uri_scheme `{raw}` names local files under storage_root `{root}`; they are \
             read with dlio's {} engine (storage_type {})",
            ctx.origin(&path),
            if local == StorageType::DirectFs {
                "O_DIRECT"
            } else {
                "local"
            },
            local.as_str()
        ));
    }
    config.storage.storage_type = local;
    config.storage.storage_root = root;
    Ok(())
}

/// yaml_serde appends " at line L column C" to its messages; the error shows them apart.
fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => {
            let (head, tail) = message.split_at(i);
            // Keep what follows the position (", while parsing a block mapping ...").
            match tail.find(", ") {
                Some(j) => format!("{head}{}", strip_position(&tail[j..])),
                None => head.to_string(),
            }
        }
        None => message.to_string(),
    }
}

fn trim_trailing_slashes(path: &mut String) {
    let trimmed = path.trim_end_matches('/');
    if !trimmed.is_empty() && trimmed.len() != path.len() {
        *path = trimmed.to_string();
    }
}

/// Renames the other spellings of a key to its name, rejecting files that give both with
/// different values.
fn fold_aliases(root: &mut Value, ctx: &Context<'_>) -> Result<(), ConfigError> {
    for (parent, other, name) in ALIASES {
        let parent_path: Vec<String> = if parent.is_empty() {
            Vec::new()
        } else {
            tree::segments(parent)
        };
        let Some(Value::Object(section)) = tree_get_mut(root, &parent_path) else {
            continue;
        };
        let Some(value) = section.remove(*other) else {
            continue;
        };
        match section.get(*name) {
            Some(existing) if *existing != value => {
                let mut path = parent_path.clone();
                path.push(other.to_string());
                let detail = if value.is_object() {
                    String::new()
                } else {
                    format!(", with different values ({existing} and {value})")
                };
                return Err(ConfigError::ConflictingKeys {
                    origin: ctx.file_origin(&path),
                    key: prefixed(parent, name),
                    alias: prefixed(parent, other),
                    detail,
                });
            }
            Some(_) => {}
            None => {
                section.insert(name.to_string(), value);
            }
        }
    }
    Ok(())
}

fn prefixed(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn tree_get_mut<'a>(root: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut node = root;
    for seg in path {
        node = node.as_object_mut()?.get_mut(seg)?;
    }
    Some(node)
}

fn is_time_key(path: &[String]) -> bool {
    path.len() == 2
        && TIME_KEYS
            .iter()
            .any(|(s, k)| path[0] == *s && path[1] == *k)
}

/// Applies one override to the tree, with Hydra's meaning of `=`, `+`, `++` and `~`.
fn apply(
    root: &mut Value,
    o: &Override,
    implicit_means: &mut Vec<Vec<String>>,
) -> Result<(), ConfigError> {
    let dotted = tree::join(&o.path);
    let present = tree::get(root, &o.path).is_some();
    let origin = || Origin::Override { arg: o.arg.clone() };
    match o.op {
        Op::Delete => {
            if present {
                tree::remove(root, &o.path);
                implicit_means.retain(|p| !p.starts_with(&o.path));
            } else if !is_known(&dotted) && !is_distribution_param(&o.path) {
                return Err(unknown_key(origin(), &dotted, &[]));
            }
            return Ok(());
        }
        Op::Add if present => {
            return Err(ConfigError::BadOverride {
                arg: o.arg.clone(),
                reason: format!(
                    "`+` adds a key the workload does not set, but `{dotted}` is already set \
                     (in the workload or by an earlier override); use `++workload.{dotted}=...` \
                     to replace it"
                ),
            });
        }
        Op::Set | Op::Add | Op::Force => {}
    }
    let Some((last, parents)) = o.path.split_last() else {
        return Ok(());
    };
    let mut node = root;
    for (i, seg) in parents.iter().enumerate() {
        let prefix = &o.path[..=i];
        let Some(map) = node.as_object_mut() else {
            return Ok(());
        };
        let entry = map.entry(seg.clone()).or_insert(Value::Null);
        match entry {
            Value::Object(_) => {}
            Value::Null => *entry = Value::Object(Map::new()),
            // `++workload.train.computation_time.type=uniform` on `computation_time: 0.6`:
            // the number becomes the mean of a distribution mapping, and is dropped again if
            // the resulting type has no mean.
            Value::Number(_) if is_time_key(prefix) => {
                let mean = entry.take();
                let mut map = Map::new();
                map.insert("mean".into(), mean);
                *entry = Value::Object(map);
                implicit_means.push(prefix.to_vec());
            }
            other => {
                let shown = tree::join(prefix);
                return Err(ConfigError::BadOverride {
                    arg: o.arg.clone(),
                    reason: format!(
                        "`{shown}` holds a value ({other}), not a section, so `{dotted}` cannot \
                         be set below it; set `workload.{shown}` itself"
                    ),
                });
            }
        }
        node = entry;
    }
    if let Value::Object(map) = node {
        map.insert(last.clone(), o.value.clone());
    }
    // An explicit mean, or a replaced distribution, is no longer implicit.
    implicit_means.retain(|p| {
        let replaced = p.starts_with(&o.path);
        let explicit_mean = o.path.len() == p.len() + 1 && o.path.starts_with(p) && last == "mean";
        !replaced && !explicit_mean
    });
    Ok(())
}

fn is_distribution_param(path: &[String]) -> bool {
    path.len() == 3 && is_time_key(&path[..2])
}

fn drop_implicit_means(root: &mut Value, implicit_means: &[Vec<String>]) {
    for path in implicit_means {
        if let Some(Value::Object(map)) = tree_get_mut(root, path) {
            let kind = map
                .get("type")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase);
            if kind.is_some_and(|k| k != "normal") {
                map.remove("mean");
            }
        }
    }
}

/// Folds `computation_time_stdev` and friends into their time value, as DLIO does.
fn fold_stdev_siblings(root: &mut Value, ctx: &Context<'_>) -> Result<(), ConfigError> {
    for (section, key) in TIME_KEYS {
        let sibling = vec![section.to_string(), format!("{key}_stdev")];
        let Some(stdev) = tree::remove(root, &sibling) else {
            continue;
        };
        let Some(Value::Object(map)) = tree_get_mut(root, &[section.to_string()]) else {
            continue;
        };
        let main = map.entry(key.to_string()).or_insert(Value::Null);
        match main {
            Value::Null | Value::Number(_) => {
                let mean = if main.is_null() {
                    Value::from(0)
                } else {
                    main.take()
                };
                let mut dist = Map::new();
                dist.insert("mean".into(), mean);
                dist.insert("stdev".into(), stdev);
                *main = Value::Object(dist);
            }
            Value::Object(dist) => match dist.get("stdev") {
                Some(existing) if *existing != stdev => {
                    return Err(ConfigError::ConflictingKeys {
                        origin: ctx.origin(&sibling),
                        key: format!("{section}.{key}.stdev"),
                        alias: tree::join(&sibling),
                        detail: format!(", with different values ({existing} and {stdev})"),
                    });
                }
                _ => {
                    dist.insert("stdev".into(), stdev);
                }
            },
            // A string or list: the typed conversion reports it on the main key.
            _ => {}
        }
    }
    Ok(())
}

/// `model: resnet50` (a name instead of a section, as some MLPerf Storage example files write
/// it) is read as `model: {name: resnet50}`, with a warning: upstream DLIO looks keys up in the
/// string and so ignores it.
fn model_name_shorthand(root: &mut Value, ctx: &Context<'_>, warnings: &mut Vec<String>) {
    let Some(model) = root.get_mut("model") else {
        return;
    };
    if let Value::String(name) = model {
        let name = std::mem::take(name);
        warnings.push(format!(
            "{}: `model: {name}` is a name, not a section; it is read as `model.name: {name}` \
             (upstream DLIO ignores a string `model` and names the run `default`)",
            ctx.file_origin(&["model".to_string()])
        ));
        let mut map = Map::new();
        map.insert("name".into(), Value::String(name));
        *model = Value::Object(map);
    }
}

/// Drops every key the schema does not know, with one warning each naming where it was set
/// and the nearest known key, as upstream DLIO tolerates unknown keys; under `strict` the
/// first one is an error instead.
fn drop_unknown_keys(
    root: &mut Value,
    ctx: &Context<'_>,
    strict: bool,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    let mut unknown = Vec::new();
    find_unknown(root, &mut Vec::new(), &mut unknown);
    for (path, index) in unknown {
        let dotted = tree::join(&path);
        let origin = ctx.origin(&path);
        if strict {
            return Err(unknown_key(origin, &dotted, &[]));
        }
        let hint = match (fork_ignores(&dotted), suggest(&dotted)) {
            (Some(note), _) => note.to_string(),
            (None, Some(s)) => format!("did you mean `{s}`?"),
            (None, None) => {
                let parent = dotted.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
                format!(
                    "the keys known {} are: {}",
                    if parent.is_empty() {
                        "at the top level".to_string()
                    } else {
                        format!("in `{parent}`")
                    },
                    keys_under(parent).join(", ")
                )
            }
        };
        warnings.push(format!(
            "{origin}: unknown key `{dotted}` is ignored ({hint}); upstream DLIO ignores it too, \
             `--strict` makes it an error"
        ));
        remove_at(root, &path, index);
    }
    Ok(())
}

/// What to say of an unknown key that MLPerf Storage's example files set but its DLIO fork
/// never reads either, so that the warning points at what does work.
fn fork_ignores(dotted: &str) -> Option<&'static str> {
    let last = dotted.rsplit('.').next().unwrap_or(dotted);
    match last {
        "endpoint_uris" | "load_balance_strategy" | "use_mpi_endpoint_distribution" => Some(
            "the MLPerf fork never reads it either; to spread ranks over endpoints, set the \
             environment variable S3_ENDPOINT_URIS=url1,url2,... (rank i uses entry i mod N)",
        ),
        "storage_type" | "storage_root" | "storage_library" | "storage_options" | "protocol"
            if dotted.starts_with("reader.") || dotted == "storage.protocol" =>
        {
            Some(
                "the MLPerf fork never reads it either; storage is described by \
                 storage.storage_type, storage_root, storage_library and storage_options",
            )
        }
        _ => None,
    }
}

/// Collects the paths of unknown keys (with the list index for keys inside list entries, such
/// as `dataset.parquet.columns[3].nmae`). Time values and their distribution parameters are
/// checked where they are parsed.
fn find_unknown(node: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<usize>)>) {
    let Value::Object(map) = node else {
        return;
    };
    for (key, value) in map {
        path.push(key.clone());
        let dotted = tree::join(path);
        if !is_known(&dotted) {
            out.push((path.clone(), None));
        } else if !is_time_key(path) {
            match value {
                Value::Object(_) => find_unknown(value, path, out),
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        let mut inner = Vec::new();
                        find_unknown(item, path, &mut inner);
                        out.extend(inner.into_iter().map(|(p, _)| (p, Some(i))));
                    }
                }
                _ => {}
            }
        }
        path.pop();
    }
}

/// Removes the key at `path`; with `index`, the key lies in entry `index` of the list at the
/// path's first `n - 1` segments.
fn remove_at(root: &mut Value, path: &[String], index: Option<usize>) {
    let Some(index) = index else {
        tree::remove(root, path);
        return;
    };
    let Some((leaf, list_path)) = path.split_last() else {
        return;
    };
    if let Some(Value::Array(items)) = tree_get_mut(root, list_path)
        && let Some(Value::Object(entry)) = items.get_mut(index)
    {
        entry.remove(leaf);
    }
}

/// Resolves OmegaConf interpolations in string values, as Hydra does when the config is read:
/// `${section.key}` (a key of the workload, also spelled `${workload.section.key}`),
/// `${oc.env:NAME}` / `${oc.env:NAME,default}`, and `${NAME}` for an environment variable when
/// no key has that name. A value that is exactly one interpolation takes the referenced
/// value's type.
fn interpolate(
    root: &mut Value,
    ctx: &Context<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    // References may chain (`a: ${b}`, `b: ${c}`); a cycle stops at the round limit.
    for _ in 0..8 {
        let mut pending = Vec::new();
        collect_interpolated(root, &mut Vec::new(), &mut pending);
        if pending.is_empty() {
            return Ok(());
        }
        let snapshot = root.clone();
        for (path, text) in pending {
            let resolved = match resolve_interpolations(&text, &snapshot) {
                Ok(v) => v,
                // `access_key_id: ${AWS_ACCESS_KEY_ID}` with the variable unset: the value is
                // unset too, as when the key is absent (credentials then come from the
                // environment or are missing, which the S3 engine reports).
                Err(Unresolved::Environment(name)) => {
                    warnings.push(format!(
                        "{}: `{}` reads the environment variable {name}, which is not set; the \
                         key is left unset",
                        ctx.origin(&path),
                        tree::join(&path)
                    ));
                    tree::remove(root, &path);
                    continue;
                }
                Err(Unresolved::Bad(message)) => {
                    return Err(ConfigError::BadValue {
                        origin: ctx.origin(&path),
                        key: tree::join(&path),
                        message,
                    });
                }
            };
            if let Some(slot) = tree_get_mut(root, &path) {
                *slot = resolved;
            }
        }
    }
    let mut pending = Vec::new();
    collect_interpolated(root, &mut Vec::new(), &mut pending);
    match pending.into_iter().next() {
        Some((path, text)) => Err(ConfigError::BadValue {
            origin: ctx.origin(&path),
            key: tree::join(&path),
            message: format!("`{text}` refers to itself through other keys; give a value instead"),
        }),
        None => Ok(()),
    }
}

fn collect_interpolated(
    node: &Value,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, String)>,
) {
    match node {
        Value::String(s) if s.contains("${") => out.push((path.clone(), s.clone())),
        Value::Object(map) => {
            for (key, value) in map {
                path.push(key.clone());
                collect_interpolated(value, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Why an interpolation has no value.
enum Unresolved {
    /// `${NAME}` where NAME is no key and no set environment variable: a variable the user
    /// has not exported.
    Environment(String),
    /// Anything else: the message says what and how to fix it.
    Bad(String),
}

impl From<String> for Unresolved {
    fn from(message: String) -> Self {
        Unresolved::Bad(message)
    }
}

fn resolve_interpolations(text: &str, root: &Value) -> Result<Value, Unresolved> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else {
            return Err(Unresolved::Bad(format!(
                "`{text}` opens an interpolation `${{` that is never closed; add the `}}` or \
                 quote the text differently"
            )));
        };
        let inner = rest[start + 2..start + len].trim();
        let value = lookup_interpolation(inner, root)?;
        if start == 0 && len + 1 == rest.len() && out.is_empty() {
            return Ok(value);
        }
        out.push_str(&rest[..start]);
        match value {
            Value::String(s) => out.push_str(&s),
            Value::Null => out.push_str("None"),
            other => out.push_str(&other.to_string()),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

fn lookup_interpolation(inner: &str, root: &Value) -> Result<Value, Unresolved> {
    let env = |name: &str, default: Option<&str>| -> Result<Value, String> {
        match std::env::var(name) {
            Ok(v) => Ok(Value::String(v)),
            Err(_) => match default {
                Some(d) => Ok(Value::String(unquote(d).to_string())),
                None => Err(format!(
                    "`${{{inner}}}` reads the environment variable {name}, which is not set; \
                     export {name} or give the value in the workload"
                )),
            },
        }
    };
    if let Some(spec) = inner
        .strip_prefix("oc.env:")
        .or_else(|| inner.strip_prefix("env:"))
    {
        let (name, default) = match spec.split_once(',') {
            Some((n, d)) => (n.trim(), Some(d.trim())),
            None => (spec.trim(), None),
        };
        return Ok(env(name, default)?);
    }
    let key = inner.strip_prefix("workload.").unwrap_or(inner);
    let path = tree::canonical(&tree::segments(key));
    if let Some(found) = tree::get(root, &path) {
        return match found {
            Value::Object(_) | Value::Array(_) => Err(Unresolved::Bad(format!(
                "`${{{inner}}}` refers to a section, not a value; refer to one of its keys"
            ))),
            v => Ok(v.clone()),
        };
    }
    if !key.contains('.') {
        return match std::env::var_os(key) {
            Some(_) => Ok(env(key, None)?),
            None => Err(Unresolved::Environment(key.to_string())),
        };
    }
    Err(Unresolved::Bad(format!(
        "`${{{inner}}}` refers to `{key}`, which is not a key of the workload; set it, or \
         replace the interpolation with a value"
    )))
}

/// `storage_type: s3dlio` and `storage_type: object` (in some of MLPerf Storage's example
/// files; the fork itself rejects both) name a client and a family, not a storage type: they
/// are read as `s3` with that client, or as `local_fs` when the root is a `file://` URI.
fn storage_type_shorthand(root: &mut Value, ctx: &Context<'_>, warnings: &mut Vec<String>) {
    let Some(Value::Object(storage)) = root.get_mut("storage") else {
        return;
    };
    let Some(Value::String(kind)) = storage.get("storage_type").cloned() else {
        return;
    };
    let library = match kind.to_ascii_lowercase().as_str() {
        "s3dlio" => Some("s3dlio"),
        "object" => None,
        _ => return,
    };
    let local_root = match storage.get("storage_root") {
        Some(Value::String(r)) => r.strip_prefix("file://").map(str::to_string),
        _ => None,
    };
    let meaning = match &local_root {
        Some(path) => {
            storage.insert("storage_root".into(), Value::String(path.clone()));
            "local_fs (the root is a file:// URI)".to_string()
        }
        None => {
            if let Some(library) = library
                && !storage.contains_key("storage_library")
            {
                storage.insert("storage_library".into(), Value::String(library.into()));
            }
            format!(
                "s3{}",
                library
                    .map(|l| format!(" with storage_library {l}"))
                    .unwrap_or_default()
            )
        }
    };
    let local = local_root.is_some();
    storage.insert(
        "storage_type".into(),
        Value::String(if local { "local_fs" } else { "s3" }.into()),
    );
    warnings.push(format!(
        "{}: `storage.storage_type: {kind}` is not a storage type (MLPerf Storage's DLIO fork \
         rejects it); it is read as {meaning}",
        ctx.file_origin(&["storage".to_string(), "storage_type".to_string()])
    ));
}

/// The fork reads `storage.storage_library` into `storage_options.storage_library`; both
/// spellings end up in the latter (the options section is made if missing). The
/// `DLIO_STORAGE_LIBRARY` environment variable fills it when neither is given.
/// Moves [`STORAGE_LEVEL_OPTIONS`] from `storage` into `storage.storage_options`.
fn lower_storage_level_options(root: &mut Value, ctx: &Context<'_>) -> Result<(), ConfigError> {
    let Some(Value::Object(storage)) = root.get_mut("storage") else {
        return Ok(());
    };
    for key in STORAGE_LEVEL_OPTIONS {
        let Some(value) = storage.remove(*key).filter(|v| !v.is_null()) else {
            continue;
        };
        let options = storage
            .entry("storage_options")
            .or_insert_with(|| Value::Object(Map::new()));
        if options.is_null() {
            *options = Value::Object(Map::new());
        }
        let Value::Object(options) = options else {
            continue;
        };
        match options.get(*key) {
            Some(existing) if !existing.is_null() && loosely(existing) != loosely(&value) => {
                return Err(ConfigError::ConflictingKeys {
                    origin: ctx.file_origin(&["storage".to_string(), key.to_string()]),
                    key: format!("storage.storage_options.{key}"),
                    alias: format!("storage.{key}"),
                    detail: format!(", with different values ({existing} and {value})"),
                });
            }
            _ => {
                options.insert(key.to_string(), value);
            }
        }
    }
    Ok(())
}

/// A scalar as text, lower case: the fork reads these options as the strings "true"/"false".
fn loosely(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_ascii_lowercase(),
        other => other.to_string().to_ascii_lowercase(),
    }
}

fn promote_storage_library(root: &mut Value) {
    let Some(Value::Object(storage)) = root.get_mut("storage") else {
        return;
    };
    let top = storage.remove("storage_library").filter(|v| !v.is_null());
    let in_options = storage
        .get("storage_options")
        .and_then(|o| o.get("storage_library"))
        .is_some_and(|v| !v.is_null());
    if in_options {
        return;
    }
    let library = top.or_else(|| {
        std::env::var("DLIO_STORAGE_LIBRARY")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(Value::String)
    });
    let Some(library) = library else {
        return;
    };
    let options = storage
        .entry("storage_options")
        .or_insert_with(|| Value::Object(Map::new()));
    if options.is_null() {
        *options = Value::Object(Map::new());
    }
    if let Value::Object(options) = options {
        options.insert("storage_library".into(), library);
    }
}

/// The composed workload of Hydra: the file's keys with the overrides applied as typed.
/// Errors cannot occur here: [`resolve`] has accepted the same text and overrides.
fn compose(text: &str, overrides: &[Override]) -> yaml_serde::Value {
    use yaml_serde::{Mapping, Value as Y};
    let mut root: Y = if text.trim().is_empty() {
        Y::Mapping(Mapping::new())
    } else {
        yaml_serde::from_str(text).unwrap_or_else(|_| Y::Mapping(Mapping::new()))
    };
    let _ = root.apply_merge();
    if !root.is_mapping() {
        root = Y::Mapping(Mapping::new());
    }
    for o in overrides {
        let Some((leaf, parents)) = o.typed_path.split_last() else {
            continue;
        };
        let Some(map) = compose_parent(&mut root, parents) else {
            continue;
        };
        let key = Y::String(leaf.clone());
        match o.op {
            Op::Delete => {
                map.remove(&key);
            }
            Op::Set | Op::Add | Op::Force => {
                map.insert(key, json_to_yaml(&o.value));
            }
        }
    }
    root
}

/// The mapping at `parents`, made where missing; `None` when a value (not a mapping) is in the
/// way.
fn compose_parent<'a>(
    root: &'a mut yaml_serde::Value,
    parents: &[String],
) -> Option<&'a mut yaml_serde::Mapping> {
    use yaml_serde::{Mapping, Value as Y};
    let mut map = root.as_mapping_mut()?;
    for seg in parents {
        let key = Y::String(seg.clone());
        let entry = map.entry(key).or_insert_with(|| Y::Mapping(Mapping::new()));
        if entry.is_null() {
            *entry = Y::Mapping(Mapping::new());
        }
        map = entry.as_mapping_mut()?;
    }
    Some(map)
}

fn json_to_yaml(value: &Value) -> yaml_serde::Value {
    use yaml_serde::Value as Y;
    match value {
        Value::Null => Y::Null,
        Value::Bool(b) => Y::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Y::Number(u.into()),
            (_, Some(i), _) => Y::Number(i.into()),
            (_, _, Some(f)) => Y::Number(f.into()),
            _ => Y::Null,
        },
        Value::String(s) => Y::String(s.clone()),
        Value::Array(items) => Y::Sequence(items.iter().map(json_to_yaml).collect()),
        Value::Object(map) => Y::Mapping(
            map.iter()
                .map(|(k, v)| (Y::String(k.clone()), json_to_yaml(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod hydra_dict_tests {
    use super::hydra_dict_as_yaml;

    #[test]
    fn only_the_keys_colons_get_a_space() {
        assert_eq!(
            hydra_dict_as_yaml("{type:uniform,min:0,max:1e300}").as_deref(),
            Some("{type: uniform,min: 0,max: 1e300}")
        );
        assert_eq!(
            hydra_dict_as_yaml("{endpoint:http://host:9000,tags:[a:b]}").as_deref(),
            Some("{endpoint: http://host:9000,tags: [a:b]}")
        );
        assert_eq!(
            hydra_dict_as_yaml("{a:{b:'x:y'}}").as_deref(),
            Some("{a: {b: 'x:y'}}")
        );
        assert_eq!(hydra_dict_as_yaml("{type: normal, mean: 1}"), None);
        assert_eq!(hydra_dict_as_yaml("s3://bucket"), None);
    }
}
