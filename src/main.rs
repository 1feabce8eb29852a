//! The `offwake-perf` binary: parses the command line and runs a session.
//! Usage errors exit with 2 (clap), other failures with 1, and a closed
//! stdout ends the program quietly.

use std::process::ExitCode;

use offwake_perf::cli::Cli;
use offwake_perf::session::{self, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse_and_check();
    match session::run(&cli) {
        Ok(Outcome::Done) | Ok(Outcome::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("offwake-perf: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
