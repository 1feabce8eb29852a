//! A counter of work done, shown on stderr when the work takes a while.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::diag::diag;

thread_local! {
    /// Set while this thread does work in the background of tracing.
    static SILENT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with no progress shown on this thread: work done while
/// tracing goes on, whose counters would interleave with the run's output.
pub(super) fn silently<T>(f: impl FnOnce() -> T) -> T {
    SILENT.set(true);
    let done = f();
    SILENT.set(false);
    done
}

/// True while this thread works in the background of tracing (see
/// [`silently`]).
pub(super) fn silent() -> bool {
    SILENT.get()
}

/// A `WHAT N/M` counter on stderr, shown only once the work has taken
/// more than a second.
pub(super) struct Progress {
    what: &'static str,
    started: Instant,
    done: usize,
    total: usize,
    shown: bool,
}

impl Progress {
    pub(super) fn new(what: &'static str, total: usize) -> Progress {
        Progress {
            what,
            started: Instant::now(),
            done: 0,
            total,
            shown: false,
        }
    }

    /// What is counted.
    pub(super) fn what(&self) -> &'static str {
        self.what
    }

    pub(super) fn step(&mut self) {
        self.at(self.done + 1, self.total);
    }

    /// `done` of `total` are done (a total of 0: unknown).
    pub(super) fn at(&mut self, done: usize, total: usize) {
        (self.done, self.total) = (done, total);
        if SILENT.get() {
            return;
        }
        if (self.done.is_multiple_of(64) || self.done == self.total || self.shown)
            && self.started.elapsed() > Duration::from_secs(1)
        {
            if self.total == 0 {
                crate::diag::write(format_args!("\roffwake-perf: {} {}", self.done, self.what));
            } else {
                crate::diag::write(format_args!(
                    "\roffwake-perf: {} {}/{}",
                    self.what, self.done, self.total
                ));
            }
            self.shown = true;
        }
    }

    pub(super) fn done(&self) {
        if self.shown {
            diag!("");
        }
    }
}
