//! How long each phase of a run took, printed on stderr at its end when
//! `OFFWAKE_TIMING` is set: attach, trace, drain, symbolize and write,
//! plus the steps within a phase (named `phase.step`) that explain it.
//! Times are taken from the start of `main`.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::diag::diag;

struct Timeline {
    launch: Instant,
    /// Each mark: what had just finished, and when.
    marks: Mutex<Vec<(&'static str, Duration)>>,
}

static TIMELINE: OnceLock<Option<Timeline>> = OnceLock::new();

fn timeline() -> Option<&'static Timeline> {
    TIMELINE
        .get_or_init(|| {
            std::env::var_os("OFFWAKE_TIMING").map(|_| Timeline {
                launch: Instant::now(),
                marks: Mutex::new(Vec::with_capacity(32)),
            })
        })
        .as_ref()
}

/// Starts the clock (call first thing in `main`).
pub fn start() {
    let _ = timeline();
}

/// Whether timings are being taken.
pub(crate) fn enabled() -> bool {
    timeline().is_some()
}

/// Time since launch, when timings are being taken.
pub(crate) fn since_launch() -> Option<Duration> {
    timeline().map(|t| t.launch.elapsed())
}

/// Records that `what` (a phase, or `phase.step`) has just finished.
pub(crate) fn mark(what: &'static str) {
    if let Some(t) = timeline() {
        let at = t.launch.elapsed();
        if let Ok(mut marks) = t.marks.lock() {
            marks.push((what, at));
        }
    }
}

/// Prints the phases and their steps, each with its own duration.
pub(crate) fn print() {
    let Some(t) = timeline() else { return };
    let marks = match t.marks.lock() {
        Ok(m) => m.clone(),
        Err(_) => return,
    };
    let total = t.launch.elapsed();
    for line in lines(&marks, total) {
        diag!("{line}");
    }
}

/// The report: one line for the phases, then one for each phase's steps,
/// each step timed from the one before it in its phase. The steps of work
/// on other threads, under a name that is no phase, are given with the
/// time since launch at which each ended.
fn lines(marks: &[(&'static str, Duration)], total: Duration) -> Vec<String> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let is_phase = |name: &str| marks.iter().any(|(w, _)| *w == name);
    let mut phases = Vec::new();
    let mut steps: Vec<(&str, Vec<String>, Duration)> = Vec::new();
    let mut last_phase = Duration::ZERO;
    for &(what, at) in marks {
        let Some((phase, step)) = what.split_once('.') else {
            phases.push(format!("{what} {:.2}", ms(at.saturating_sub(last_phase))));
            last_phase = at;
            continue;
        };
        let i = match steps.iter().position(|(p, ..)| *p == phase) {
            Some(i) => i,
            None => {
                steps.push((phase, Vec::new(), last_phase));
                steps.len() - 1
            }
        };
        let (_, items, since) = &mut steps[i];
        let shown = if is_phase(phase) {
            at.saturating_sub(*since)
        } else {
            at
        };
        items.push(format!("{step} {:.2}", ms(shown)));
        *since = at;
    }
    let mut out = vec![format!(
        "offwake-perf: timing (ms): {}; exit {:.2} after launch",
        phases.join(", "),
        ms(total)
    )];
    for (phase, items, _) in steps {
        let how = if is_phase(phase) { "" } else { " after launch" };
        out.push(format!(
            "offwake-perf: timing of {phase} (ms{how}): {}",
            items.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_take_the_time_since_the_last_phase_and_steps_since_the_last_mark() {
        let ms = Duration::from_millis;
        let marks = [
            ("attach.tracefs", ms(1)),
            ("kallsyms.cached", ms(3)),
            ("attach.open", ms(4)),
            ("attach", ms(5)),
            ("trace", ms(15)),
            ("symbolize.kernel", ms(17)),
            ("symbolize", ms(20)),
        ];
        assert_eq!(
            lines(&marks, ms(21)),
            [
                "offwake-perf: timing (ms): attach 5.00, trace 10.00, symbolize 5.00; \
                 exit 21.00 after launch",
                "offwake-perf: timing of attach (ms): tracefs 1.00, open 3.00",
                "offwake-perf: timing of kallsyms (ms after launch): cached 3.00",
                "offwake-perf: timing of symbolize (ms): kernel 2.00",
            ]
        );
    }
}
