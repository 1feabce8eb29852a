//! The `offwake-perf` binary: parses the command line and runs a session.
//! Usage errors exit with 2 (clap), other failures with 1, and a closed
//! stdout ends the program quietly. After `-- COMMAND`, a run that ends
//! with the command exits with the command's status.

use std::process::ExitCode;

use offwake_perf::cli::Cli;
use offwake_perf::session;

fn main() -> ExitCode {
    let cli = Cli::parse_and_check();
    match session::run(&cli) {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(e) => {
            offwake_perf::diag::line(format_args!("offwake-perf: error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}
