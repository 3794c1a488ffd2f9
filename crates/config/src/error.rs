//! `ConfigError`: every way a workload can be rejected, each message naming where the bad
//! value came from (file and line, or the override argument) and how to fix it.

use std::fmt;
use std::path::PathBuf;

/// Where a key's value came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A workload file; `line` (1-based) when the key could be found in the text.
    File {
        /// The file as shown to the user (`unet3d.yaml`, `built-in workload unet3d_a100.yaml`).
        file: String,
        /// 1-based line of the key.
        line: Option<usize>,
    },
    /// A command-line override, exactly as typed.
    Override {
        /// The argument, e.g. `++workload.reader.batch_size=seven`.
        arg: String,
    },
    /// A key asked for with [`Config::query`](crate::Config::query).
    Query,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File {
                file,
                line: Some(line),
            } => write!(f, "workload file {file}, line {line}"),
            Origin::File { file, line: None } => write!(f, "workload file {file}"),
            Origin::Override { arg } => write!(f, "override `{arg}`"),
            Origin::Query => write!(f, "query"),
        }
    }
}

/// Why a workload could not be loaded, resolved or validated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The workload file could not be read.
    #[error("cannot read workload file {}: {source}; check the path (`workload=path/to/file.yaml`)", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },

    /// `workload=NAME` names neither a file in `--config-dir` nor a built-in workload.
    #[error(
        "unknown workload `{name}`{searched}; the built-in workloads are: {}. \
         Give one of them, a file path (`workload=path/to/file.yaml`), or a \
         `--config-dir DIR` holding DIR/workload/{name}.yaml",
        available.join(", "),
        searched = searched.as_ref().map(|p| format!(" (not found as {})", p.display())).unwrap_or_default()
    )]
    UnknownWorkload {
        /// The name given.
        name: String,
        /// The file looked for in `--config-dir`, if one was given.
        searched: Option<PathBuf>,
        /// The built-in workload names.
        available: Vec<String>,
    },

    /// The YAML text does not parse.
    #[error(
        "workload file {file}{}: invalid YAML: {message}; {}",
        yaml_position(*line, *column),
        yaml_fix(message)
    )]
    Yaml {
        /// The file.
        file: String,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// The parser's message.
        message: String,
    },

    /// The YAML parses but is not a mapping of string keys where one is needed.
    #[error("{origin}: {message}")]
    Structure {
        /// Where.
        origin: Origin,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// A key that is not in DLIO's schema.
    #[error("{origin}: unknown key `{key}`; {hint}")]
    UnknownKey {
        /// Where the key was given.
        origin: Origin,
        /// The dotted key.
        key: String,
        /// The closest known key, if any.
        suggestion: Option<String>,
        /// "did you mean ...?" or the keys allowed at that level.
        hint: String,
    },

    /// A value of the wrong type or out of range.
    #[error("{origin}: `{key}` must be {expected}, got {got}")]
    InvalidValue {
        /// Where the value was given.
        origin: Origin,
        /// The dotted key.
        key: String,
        /// What the key takes.
        expected: String,
        /// What was given.
        got: String,
    },

    /// A value that could not be interpreted for another reason.
    #[error("{origin}: `{key}` {message}")]
    BadValue {
        /// Where the value was given.
        origin: Origin,
        /// The dotted key.
        key: String,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// Two spellings of one key (`record_length` and `record_length_bytes`, `reader` and
    /// `data_reader`) are both given.
    #[error(
        "{origin}: both `{key}` and `{alias}` are given{detail}; they are two names of one \
         setting, keep only `{key}`"
    )]
    ConflictingKeys {
        /// Where.
        origin: Origin,
        /// The current name.
        key: String,
        /// The other name.
        alias: String,
        /// ", with different values (a and b)" or empty.
        detail: String,
    },

    /// A command-line argument that is not a valid override.
    #[error("invalid argument `{arg}`: {reason}")]
    BadOverride {
        /// The argument as typed.
        arg: String,
        /// What is wrong and the grammar that is accepted.
        reason: String,
    },

    /// A setting that DLIO's validation (or ours) rejects.
    #[error("`{key}`: {message} Fix: {fix}")]
    Invalid {
        /// The key at fault.
        key: String,
        /// What is wrong.
        message: String,
        /// How to fix it.
        fix: String,
    },
}

/// ", line L, column C", or nothing when the parser knows no position.
fn yaml_position(line: usize, column: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(", line {line}, column {column}")
    }
}

/// How to fix what the YAML parser reported.
fn yaml_fix(message: &str) -> &'static str {
    if message.contains("duplicate") {
        "a key may appear only once in a mapping: remove one of them"
    } else if message.contains("more than one document") {
        "a workload file is one YAML document: remove the `---` line and what follows it, or \
         split the file in two"
    } else if message.contains("as u128") || message.contains("as i128") {
        "the number is larger than any setting takes (at most 18446744073709551615): use a \
         smaller one"
    } else {
        "fix the syntax there (indentation, a missing `:` or an unclosed bracket)"
    }
}
