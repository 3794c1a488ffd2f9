//! `dlio`: the command-line front of the dlio workspace.
//!
//! The binary parses arguments, dispatches a subcommand and maps errors to exit codes; all the
//! work happens in the library crates. Started under DLIO's name (`dlio_benchmark`: the binary
//! of src/bin, or a copy or symlink of this one) it is `dlio run`, so scripts written for
//! Python DLIO and MLPerf Storage's wrapper work unchanged.

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<_> = std::env::args_os().collect();
    let entry = dlio::Entry::from_program_name(argv.first().map(|a| a.as_os_str()));
    dlio::main_with(argv, entry)
}
