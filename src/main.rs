//! The `offwake-perf` binary: parses the command line and runs a session.
//! Usage errors exit with 2 (clap), other failures with 1. After
//! `-- COMMAND`, a run that ends with the command exits with the command's
//! status. A closed stdout or stderr only stops the writing there.

use std::process::ExitCode;

use offwake_perf::session;

fn main() -> ExitCode {
    offwake_perf::timing::start();
    let cli = session::parse_args();
    match session::run(&cli) {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(e) => {
            offwake_perf::diag::line(format_args!("offwake-perf: error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}
