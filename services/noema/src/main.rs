//! `noema`: run Noema (all-in-one or one service per process), migrate, inspect config.

use std::io::Write;
use std::process::ExitCode;

/// Requests allocate and free many short-lived buffers on every worker thread; mimalloc's
/// thread-local free lists serve them with far less CPU than glibc's arenas. The crate's
/// `override` feature (workspace manifest) routes C's malloc, SQLite's, to it as well.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match noema::registry::builtin() {
        Ok(registry) => noema::cli::run(registry),
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "error: {err}");
            ExitCode::FAILURE
        }
    }
}
