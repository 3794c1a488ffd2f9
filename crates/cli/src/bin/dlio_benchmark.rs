//! `dlio_benchmark`: DLIO's entry point name; behaves exactly like `dlio run`.

use std::process::ExitCode;

fn main() -> ExitCode {
    dlio::main_with(std::env::args_os().collect(), dlio::Entry::DlioBenchmark)
}
