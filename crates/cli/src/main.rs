//! `dlio`: the command-line front of the dlio workspace.
//!
//! The binary parses arguments, dispatches a subcommand and maps errors to exit codes; all the
//! work happens in the library crates. `dlio_benchmark` (src/bin) is the same program started
//! as `dlio run`, so scripts written for Python DLIO work unchanged.

use std::process::ExitCode;

fn main() -> ExitCode {
    dlio::main_with(std::env::args_os().collect(), dlio::Entry::Dlio)
}
