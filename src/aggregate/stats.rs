//! The counters of a run's pairing, and the WARNING and NOTE lines they
//! call for at its end.

use crate::diag::counted;
use crate::event::state;

use super::entries::Bounded;

/// Counters for the end-of-run summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Intervals counted into an entry.
    pub(crate) intervals: u64,
    /// Intervals dropped by `-m`/`-M`.
    pub(crate) out_of_range: u64,
    /// Intervals discarded because a lost record could fall inside them.
    pub(crate) discarded_lost: u64,
    /// Lost records seen (sum of `Lost::records`).
    pub(crate) lost_records: u64,
    /// Stacks that did not fit in the stack storage.
    pub(crate) missed_stacks: u64,
    /// Intervals closed by a context-switch record because `sched_switch`
    /// did not report the switch-in (see [`crate::event::SwitchIn`]).
    pub(crate) switch_ins_from_backstop: u64,
    /// Intervals dropped because their thread switched out again without
    /// a switch-in ever being reported (the kernel skipped it; no backstop).
    pub(crate) switch_in_unseen: u64,
    /// Intervals dropped because their thread switched out again, and the
    /// backend, which tells switch-ins with switch-outs, could not say
    /// when it had switched in (see `perf::running`).
    pub(crate) switch_in_unknown: u64,
    /// Intervals of a sleep (a reported state, not preemption) counted
    /// with an empty waker: no wakeup was read for them. By the state the
    /// thread switched out in, as the position of its report bit (S 0 …
    /// I 7, see [`state::reported_state`]).
    pub(crate) wakeup_unseen: [u64; 8],
    /// Intervals whose chain (`--chain`) ends in a waker's sleep no
    /// wakeup was read for.
    pub(crate) chain_wakeup_unseen: u64,
    /// Intervals counted whose waker is one of the tool's own tasks (not
    /// an interrupt that landed in one), and their microseconds.
    pub(crate) woken_by_self: u64,
    pub(crate) woken_by_self_us: u64,
    /// What the caps on entries and chains cost.
    pub(crate) bounded: Bounded,
    /// `--wall`: on-CPU samples of targets counted, the microseconds they
    /// stand for, and the microseconds of the targets' waits for a CPU.
    pub(crate) on_cpu_samples: u64,
    pub(crate) on_cpu_us: u64,
    pub(crate) runnable_us: u64,
}

impl Stats {
    /// Adds the counts of a later report of the same run (`--interval`):
    /// the run's totals.
    pub(crate) fn add(&mut self, later: &Stats) {
        self.intervals += later.intervals;
        self.out_of_range += later.out_of_range;
        self.discarded_lost += later.discarded_lost;
        self.lost_records += later.lost_records;
        self.missed_stacks += later.missed_stacks;
        self.switch_ins_from_backstop += later.switch_ins_from_backstop;
        self.switch_in_unseen += later.switch_in_unseen;
        self.switch_in_unknown += later.switch_in_unknown;
        for (a, b) in self.wakeup_unseen.iter_mut().zip(later.wakeup_unseen) {
            *a += b;
        }
        self.chain_wakeup_unseen += later.chain_wakeup_unseen;
        self.woken_by_self += later.woken_by_self;
        self.woken_by_self_us += later.woken_by_self_us;
        self.on_cpu_samples += later.on_cpu_samples;
        self.on_cpu_us += later.on_cpu_us;
        self.runnable_us += later.runnable_us;
        let (a, b) = (&mut self.bounded, later.bounded);
        a.merged = a.merged.or(b.merged);
        a.by_command |= b.by_command;
        a.dropped += b.dropped;
        a.dropped_us += b.dropped_us;
        a.stripped += b.stripped;
        a.stripped_us += b.stripped_us;
        a.chains_not_kept += b.chains_not_kept;
    }

    /// The WARNING and NOTE lines (without newlines) these counts call
    /// for. `switch_ins_from_records` says the source takes switch-ins
    /// from context-switch records by design, so that their count is no
    /// news; `larger_buffer` is how to get larger ring buffers from it
    /// (the option, or for a recording, perf record's).
    pub(crate) fn notes(&self, switch_ins_from_records: bool, larger_buffer: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.missed_stacks > 0 {
            out.push(format!(
                "WARNING: {} stack traces lost and could not be displayed. \
                 Consider increasing --stack-storage-size.",
                self.missed_stacks
            ));
        }
        out.extend(self.bounded.notes());
        if self.lost_records > 0 || self.discarded_lost > 0 {
            // A ring read too full to tell loses nothing the kernel counts.
            let lost = match self.lost_records {
                0 => "a ring was read too full to tell whether records were lost".to_string(),
                n => counted(n, "record lost", "records lost"),
            };
            out.push(format!(
                "WARNING: {lost}; {} that could span a loss {} discarded. Consider a \
                 larger {larger_buffer}.",
                counted(self.discarded_lost, "interval", "intervals"),
                if self.discarded_lost == 1 {
                    "was"
                } else {
                    "were"
                },
            ));
        }
        if self.switch_ins_from_backstop > 0 && !switch_ins_from_records {
            let n = self.switch_ins_from_backstop;
            let (they_were, those) = if n == 1 {
                ("it was", "that interval")
            } else {
                ("they were", "those intervals")
            };
            out.push(format!(
                "NOTE: the kernel's sched_switch did not report {}; {they_were} taken from \
                 perf context-switch records. Wakeups the kernel did not report either leave \
                 {those} without a waker.",
                counted(n, "switch-in", "switch-ins")
            ));
        }
        if self.switch_in_unseen > 0 {
            out.push(format!(
                "NOTE: {} dropped: their thread ran again but the kernel never reported the \
                 switch-in that ended them (some kernels skip sched_switch when a CPU leaves \
                 its idle task, or while certain tasks run).",
                counted(self.switch_in_unseen, "interval was", "intervals were")
            ));
        }
        if let Some(note) = self.wakeup_unseen_note() {
            out.push(note);
        }
        if self.chain_wakeup_unseen > 0 {
            let n = self.chain_wakeup_unseen;
            out.push(format!(
                "NOTE: {} a waker's sleep no wakeup was read for, so {} with an empty \
                 waker (some kernels skip sched_waking in a CPU's idle task, or while \
                 certain tasks run).",
                counted(n, "chain reaches", "chains reach"),
                if n == 1 { "it ends" } else { "they end" }
            ));
        }
        if self.woken_by_self > 0 {
            out.push(format!(
                "NOTE: offwake-perf's own threads woke traced threads, ending {} ({} us): \
                 those entries are the tracer's doing, not the traced program's.",
                counted(self.woken_by_self, "blocked interval", "blocked intervals"),
                self.woken_by_self_us
            ));
        }
        if self.switch_in_unknown > 0 {
            out.push(format!(
                "NOTE: {} dropped: their thread ran again, but when it had switched in \
                 could not be told (it was already running when tracing began, or records \
                 may have been lost).",
                counted(self.switch_in_unknown, "interval was", "intervals were")
            ));
        }
        out
    }

    /// The NOTE on sleeps no wakeup was read for, by the state each
    /// thread slept in, e.g. "no wakeup was read for 5 intervals in
    /// interruptible sleep (S) and 1 in idle (I), so they have an empty
    /// waker".
    fn wakeup_unseen_note(&self) -> Option<String> {
        let counts: Vec<String> = (0u8..)
            .zip(self.wakeup_unseen)
            .filter(|&(_, n)| n > 0)
            .enumerate()
            .map(|(i, (state, n))| {
                let name = state::state_name(state);
                match (i, n) {
                    (0, 1) => format!("1 interval in {name}"),
                    (0, n) => format!("{n} intervals in {name}"),
                    (_, n) => format!("{n} in {name}"),
                }
            })
            .collect();
        let (last, rest) = counts.split_last()?;
        let listed = match rest {
            [] => last.clone(),
            _ => format!("{} and {last}", rest.join(", ")),
        };
        let they = if self.wakeup_unseen.iter().sum::<u64>() == 1 {
            "it has"
        } else {
            "they have"
        };
        Some(format!(
            "NOTE: no wakeup was read for {listed}, so {they} an empty waker (some \
             kernels skip sched_waking in a CPU's idle task, or while certain tasks run; \
             with -p, see the README on threads created during tracing)."
        ))
    }
}

impl Bounded {
    /// The WARNING and NOTE lines of what the caps cost.
    fn notes(&self) -> Vec<String> {
        let Some((max_entries, max_chains)) = self.merged else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.dropped > 0 {
            out.push(format!(
                "WARNING: {} ({} us) {} not counted: more than {max_entries} distinct \
                 entries, even with threads merged by command.",
                counted(self.dropped, "interval", "intervals"),
                self.dropped_us,
                if self.dropped == 1 { "was" } else { "were" },
            ));
        }
        if self.stripped > 0 {
            out.push(format!(
                "WARNING: {} ({} us) {} counted without {} stacks (printed as [Missed User \
                 Stack] and [Missed Kernel Stack]): more than {max_entries} distinct entries, \
                 even with threads merged by command.",
                counted(self.stripped, "interval", "intervals"),
                self.stripped_us,
                if self.stripped == 1 { "was" } else { "were" },
                if self.stripped == 1 { "its" } else { "their" },
            ));
        }
        if self.chains_not_kept > 0 {
            out.push(format!(
                "WARNING: {} not kept past the first waker (printed as [chain not \
                 kept]): more than {max_chains} distinct chains, even with threads merged \
                 by command.",
                counted(
                    self.chains_not_kept,
                    "interval's chain was",
                    "intervals' chains were"
                ),
            ));
        }
        out.push(if self.by_command {
            format!(
                "NOTE: more than {max_entries} distinct entries or {max_chains} chains, even \
                 with threads merged by process: every entry was merged by command, thread \
                 and process ids printing as 0. Folded stacks and flame graphs show no ids, \
                 and are the same; trace fewer processes (-p) to tell them apart."
            )
        } else {
            format!(
                "NOTE: more than {max_entries} distinct entries or {max_chains} chains: every \
                 entry was merged by process, thread ids printing as their process's id. \
                 Folded stacks and flame graphs show no ids, and are the same; trace fewer \
                 threads (-t) to tell threads apart."
            )
        });
        out
    }
}
