//! How the command of `-- COMMAND` ended: seen to exit during tracing,
//! taken as tracing stops, or, after a signal, waited for a moment while
//! the report is made.

use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crate::diag::diag;

/// How long after a signal ended tracing a command still running may take
/// to exit and give its status.
const COMMAND_GRACE: Duration = Duration::from_millis(500);

/// The command's status as tracing stopped.
pub(super) struct CommandEnd {
    /// The command's status, when it ended or was taken as tracing ended.
    status: Option<ExitStatus>,
    /// After a signal, how long the command may take to give its status.
    grace_until: Option<Instant>,
}

impl CommandEnd {
    /// As tracing stops: `status`, if the command was seen to exit, and
    /// whether a signal ended tracing (`signalled`).
    pub(super) fn as_tracing_stops(
        child: Option<&mut Child>,
        mut status: Option<ExitStatus>,
        signalled: bool,
    ) -> CommandEnd {
        // A signal that ended tracing (Ctrl-C reaches the command too) gives
        // the command a moment to clean up and exit, for its status.
        let grace_until = signalled.then(|| Instant::now() + COMMAND_GRACE);
        // Without a signal, a command still running when tracing stops is left
        // running, however long the report then takes: its state is taken now.
        // After a signal its status is waited for while the report is made.
        if grace_until.is_none() && status.is_none() {
            status = command_status_after_tracing(child, None);
        }
        CommandEnd {
            status,
            grace_until,
        }
    }

    /// How the command ended, said on stderr when it failed.
    pub(super) fn status(self, child: Option<&mut Child>) -> Option<ExitStatus> {
        let command = match (self.status, self.grace_until) {
            (None, Some(until)) => command_status_after_tracing(child, Some(until)),
            // Known, or taken when tracing stopped.
            (status, _) => status,
        };
        if let Some(status) = command
            && !status.success()
        {
            diag!("offwake-perf: the command exited with {status}");
        }
        command
    }
}

/// How the command ended, when tracing stopped first (duration or signal),
/// waiting until `until` (if given) for it to exit: `None`, after saying
/// so, when it still runs (it is left running).
fn command_status_after_tracing(
    child: Option<&mut Child>,
    until: Option<Instant>,
) -> Option<ExitStatus> {
    let child = child?;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if until.is_some_and(|u| Instant::now() < u) => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                diag!(
                    "offwake-perf: tracing ended; the command (pid {}) is still running",
                    child.id()
                );
                return None;
            }
        }
    }
}
