//! SIGINT and SIGTERM during a run: the first ends tracing (the report is
//! still made), a second SIGINT aborts at once, and any of them cuts
//! symbolization short.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use anyhow::{Context, Result};

/// Set by SIGINT/SIGTERM: stop tracing and print the report.
static STOP: AtomicBool = AtomicBool::new(false);
/// SIGINTs received; the second one aborts.
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
/// SIGINTs and SIGTERMs received: one during symbolization cuts it short.
static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// Said on stderr when a second SIGINT aborts the run.
const ABORTED: &[u8] =
    b"offwake-perf: aborted by a second SIGINT (Ctrl-C): the report is missing or cut short\n";

/// The status of a run aborted by a second SIGINT: 128 + SIGINT, as a
/// shell gives a command that SIGINT killed.
const ABORTED_STATUS: i32 = 128 + libc::SIGINT;

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
    if sig == libc::SIGINT && INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
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
