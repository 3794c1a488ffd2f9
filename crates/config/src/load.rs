//! `load`: command-line words → workload text → key tree → overrides → typed [`Config`].

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::builtin::{builtin_workload, builtin_workloads};
use crate::de::{DeError, DeErrorKind, NodeDe};
use crate::error::{ConfigError, Origin};
use crate::schema::Config;
use crate::suggest::{is_known, keys_under, suggest};
use crate::tree::{self, ALIASES, IGNORED, TIME_KEYS};
use crate::vocab::{DataLoaderKind, Framework};

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
    /// One line per accepted-but-ignored key (each names the key DLIO really reads).
    pub warnings: Vec<String>,
}

/// Loads the workload named by `workload=NAME` in `args.positional` (default `default`),
/// applies the overrides and converts the result to a [`Config`].
///
/// `NAME` is looked up as `--config-dir`/workload/NAME.yaml, then among the built-in
/// workloads; a name containing `/` or ending in `.yaml`/`.yml` is a file path.
pub fn load(args: &LoadArgs) -> Result<Loaded, ConfigError> {
    let words = parse_words(&args.positional)?;
    let workload = words.workload.clone().unwrap_or_else(|| "default".into());
    let (label, source, text) = read_workload(&workload, args.config_dir.as_deref())?;
    let (config, warnings) = resolve(&text, &label, &words.overrides)?;
    Ok(Loaded {
        config,
        workload,
        source,
        overrides: words.typed,
        hydra_run_dir: words.hydra_run_dir,
        warnings,
    })
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
    let (config, warnings) = resolve(yaml, name, &words.overrides)?;
    Ok(Loaded {
        config,
        workload: name.to_string(),
        source: name.to_string(),
        overrides: words.typed,
        hydra_run_dir: words.hydra_run_dir,
        warnings,
    })
}

impl Config {
    /// Parses a workload's YAML text with no overrides, dropping the warnings: a shortcut
    /// for tests and tools (use [`load`] or [`load_text`] to see the warnings).
    pub fn from_yaml(yaml: &str) -> Result<Config, ConfigError> {
        resolve(yaml, "<text>", &[]).map(|(config, _)| config)
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
    value: Value,
}

#[derive(Debug, Default)]
struct Words {
    workload: Option<String>,
    overrides: Vec<Override>,
    typed: Vec<String>,
    hydra_run_dir: Option<PathBuf>,
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
            // Other Hydra settings (output_subdir, job_logging, ...) steer Hydra itself and
            // have no counterpart here.
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
    match yaml_serde::from_str::<yaml_serde::Value>(text) {
        Ok(v) => tree::from_yaml(v, "").unwrap_or_else(|_| Value::String(text.to_string())),
        Err(_) => Value::String(text.to_string()),
    }
}

fn read_workload(
    name: &str,
    config_dir: Option<&Path>,
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
    match builtin_workload(name) {
        Some(w) => Ok((
            format!("{name}.yaml (built-in)"),
            BUILTIN_SOURCE.to_string(),
            w.yaml.to_string(),
        )),
        None => Err(ConfigError::UnknownWorkload {
            name: name.to_string(),
            searched,
            available: builtin_workloads()
                .iter()
                .map(|w| w.name.to_string())
                .collect(),
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
    fold_aliases(&mut root, &ctx)?;
    let mut implicit_means: Vec<Vec<String>> = Vec::new();
    for o in overrides {
        apply(&mut root, o, &mut implicit_means)?;
    }
    drop_implicit_means(&mut root, &implicit_means);
    let mut warnings = Vec::new();
    for (key, message) in IGNORED {
        let path = tree::segments(key);
        if tree::remove(&mut root, &path).is_some() {
            warnings.push(format!("{}: `{key}` {message}", ctx.origin(&path)));
        }
    }
    fold_stdev_siblings(&mut root, &ctx)?;
    let devices = ["profiling".to_string(), "iostat_devices".to_string()];
    if let Some(Value::Object(profiling)) = root.get_mut(&devices[0])
        && let Some(v @ Value::String(_)) = profiling.get_mut(&devices[1])
    {
        *v = Value::Array(vec![v.take()]);
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
    trim_trailing_slashes(&mut config.dataset.data_folder);
    trim_trailing_slashes(&mut config.checkpoint.checkpoint_folder);
    Ok((config, warnings))
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
