//! `dlio_postprocessor`: DLIO's report writer; behaves exactly like `dlio postprocess`.

use std::process::ExitCode;

fn main() -> ExitCode {
    dlio::main_with(
        std::env::args_os().collect(),
        dlio::Entry::DlioPostprocessor,
    )
}
