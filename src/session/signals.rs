//! SIGINT and SIGTERM during a run: the first ends tracing (the report is
//! still made), a second SIGINT aborts at once, and any of them cuts
//! symbolization short. A SIGINT within [`SAME_INTERRUPT_NS`] of the first
//! is the same interrupt: `timeout -s INT` sends it to the command and
//! then to its process group, and the kernel delivers it twice when the
//! first was taken in between.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use anyhow::{Context, Result};

use crate::sys::host::monotonic_ns;

/// Set by SIGINT/SIGTERM: stop tracing and print the report.
static STOP: AtomicBool = AtomicBool::new(false);
/// When the first SIGINT came (`CLOCK_MONOTONIC` ns, 0 before it); a
/// later one aborts.
static FIRST_INTERRUPT: AtomicU64 = AtomicU64::new(0);

/// SIGINTs this soon after the first are the same interrupt: a person's
/// second Ctrl-C comes later.
const SAME_INTERRUPT_NS: u64 = 200_000_000;
/// SIGINTs and SIGTERMs received: one during symbolization cuts it short.
static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// Said on stderr when a second SIGINT aborts the run.
const ABORTED: &[u8] =
    b"offwake-perf: aborted by a second SIGINT (Ctrl-C): the report is missing or cut short\n";

/// The status of a run aborted by a second SIGINT: 128 + SIGINT, as a
/// shell gives a command that SIGINT killed.
const ABORTED_STATUS: i32 = 128 + libc::SIGINT;

/// Whether a SIGINT at `now` aborts, the first having come at `first`.
fn aborts(first: u64, now: u64) -> bool {
    first != 0 && now.saturating_sub(first) >= SAME_INTERRUPT_NS
}

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
    // clock_gettime(2) is async-signal-safe; 0 stands for no SIGINT yet.
    let now = monotonic_ns().max(1);
    let first = match sig {
        libc::SIGINT => FIRST_INTERRUPT
            .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst)
            .err()
            .unwrap_or(0),
        _ => 0,
    };
    if aborts(first, now) {
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the message
        // is static, and its pointer and length are its own. A failed
        // write (a closed stderr) changes nothing: the run aborts at once.
        unsafe {
            libc::write(libc::STDERR_FILENO, ABORTED.as_ptr().cast(), ABORTED.len());
            libc::_exit(ABORTED_STATUS);
        }
    }
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler of SIGINT and SIGTERM.
pub(super) fn install() -> Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    // No SA_RESTART: poll() must return EINTR so the loop sees the flag.
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only touches atomics and calls write and
        // _exit, all async-signal-safe.
        unsafe { sigaction(sig, &action) }
            .with_context(|| format!("installing a handler for {sig}"))?;
    }
    Ok(())
}

/// Whether a signal has asked tracing to stop.
pub(super) fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// A test of whether a signal has arrived since this call.
pub(super) fn signalled_from_now() -> impl Fn() -> bool + Send + Copy + 'static {
    let before = SIGNALS.load(Ordering::SeqCst);
    move || SIGNALS.load(Ordering::SeqCst) > before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_sigint_aborts_unless_it_is_the_first_sent_again() {
        assert!(!aborts(0, 5), "the first");
        assert!(
            !aborts(1_000, 1_000 + SAME_INTERRUPT_NS - 1),
            "timeout's second"
        );
        assert!(aborts(1_000, 1_000 + SAME_INTERRUPT_NS));
        assert!(aborts(1, u64::MAX));
    }
}
