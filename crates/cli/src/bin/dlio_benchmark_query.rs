//! `dlio_benchmark_query`: DLIO's config query tool; behaves exactly like `dlio query`.

use std::process::ExitCode;

fn main() -> ExitCode {
    dlio::main_with(
        std::env::args_os().collect(),
        dlio::Entry::DlioBenchmarkQuery,
    )
}
