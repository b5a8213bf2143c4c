//! `noema-example`: the `noema` command line with the example service registered.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    match noema_example_service::registry() {
        Ok(registry) => noema::cli::run(registry),
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "error: {err}");
            ExitCode::FAILURE
        }
    }
}
