//! The `dlio` and `dlio_benchmark` programs: argument parsing, the run driver, progress and
//! logging. This is the only crate that uses `anyhow`; it turns the libraries' typed errors
//! into messages with context and exit codes.

#![deny(missing_docs)]

mod args;
mod capacity;
mod cluster;
#[cfg(feature = "mpi")]
mod collective;
mod dataset;
mod device_check;
mod engine_settings;
mod files;
mod iostat;
mod limits;
mod log;
mod postprocess;
mod progress;
mod python_dist;
mod run;
mod run_checks;
mod trace_program;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use args::Entry;
pub use cluster::Cluster;
#[cfg(feature = "mpi")]
pub use collective::CollectiveStorage;

/// The version `--version` prints and `summary.json` records.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (`-dirty` when tracked files differed from it;
/// "unknown" outside a git checkout), set by build.rs.
pub const COMMIT: &str = env!("DLIO_COMMIT");

/// `--version`'s text: the version and the commit.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("DLIO_COMMIT"),
    ")"
);

/// Exit code for an interrupted run (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The `storage_options` keys that hold S3 credentials.
const CREDENTIAL_KEYS: [&str; 2] = ["access_key_id", "secret_access_key"];

/// The config as YAML with S3 credentials replaced by `<redacted>`: credentials never appear in
/// outputs or logs.
pub fn redact_credentials(yaml: &str) -> String {
    yaml.lines()
        .map(|line| {
            let key = line.trim_start();
            for secret in CREDENTIAL_KEYS {
                if let Some(value) = key.strip_prefix(secret).and_then(|k| k.strip_prefix(':'))
                    && !value.ends_with("null")
                {
                    let indent = &line[..line.len() - key.len()];
                    return format!("{indent}{secret}: <redacted>\n");
                }
            }
            format!("{line}\n")
        })
        .collect()
}

/// A command-line override with its value replaced by `<redacted>` if it sets an S3 credential
/// (`...storage_options.secret_access_key=...`, or a `storage_options={...}` dict that holds
/// one), so `.hydra/overrides.yaml` never holds a credential.
pub(crate) fn redact_override(text: &str) -> String {
    let mentions_credential = CREDENTIAL_KEYS.iter().any(|secret| text.contains(secret));
    match text.split_once('=') {
        Some((key, _)) if mentions_credential => format!("{key}=<redacted>"),
        _ => text.to_owned(),
    }
}

/// Runs the program with `argv` (including the program name) and returns its exit code.
pub fn main_with(argv: Vec<OsString>, entry: Entry) -> ExitCode {
    // Loading a workload checks `dataset.format` and `storage.io_engine` against the formats
    // and engines there are.
    dlio_format::register_format_names();
    dlio_config::register_engine_names(dlio_storage::engine_names());
    limits::raise_open_file_limit();
    // Before any thread starts: they inherit it.
    dlio_loader::precise_timers();
    let argv = args::normalise(argv, entry);
    let cli = match args::Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match args::dispatch(cli, entry) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            // An unknown key only fails under --strict: a usage error, as for a bad flag.
            let usage = e.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<dlio_config::ConfigError>(),
                    Some(dlio_config::ConfigError::UnknownKey { .. })
                )
            });
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_override;

    #[test]
    fn overrides_that_set_credentials_lose_their_value() {
        assert_eq!(
            redact_override("++workload.storage.storage_options.secret_access_key=s3cr=t"),
            "++workload.storage.storage_options.secret_access_key=<redacted>"
        );
        assert_eq!(
            redact_override("workload.storage.storage_options.access_key_id=AKIA1"),
            "workload.storage.storage_options.access_key_id=<redacted>"
        );
        assert_eq!(
            redact_override("++workload.storage.storage_options={secret_access_key: x, region: y}"),
            "++workload.storage.storage_options=<redacted>"
        );
        assert_eq!(
            redact_override("++workload.storage.storage_options.region=eu-west-1"),
            "++workload.storage.storage_options.region=eu-west-1"
        );
    }
}
