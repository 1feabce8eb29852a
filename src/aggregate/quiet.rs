//! Named targets that gave no interval. Each `-p` process, `-t` thread or
//! `-- COMMAND` is tallied as its switch-outs are read and its intervals
//! counted, so that the end of a run can say which of them has no entry
//! and what that can mean, instead of printing an empty report with no
//! word.

use rustc_hash::FxHashMap;

use crate::diag::escape::{self, Place};
use crate::event::Comm;

/// What the user named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// A `-p` process (all its threads).
    Process,
    /// A `-t` thread.
    Thread,
    /// The `-- COMMAND` and every process it started.
    Command,
}

/// A named target that gave no interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QuietTarget {
    pub(crate) kind: TargetKind,
    /// Its PID (the command's first process) or TID.
    pub(crate) id: u32,
    pub(crate) comm: Comm,
    /// Switch-outs of it that were read, its exit included.
    pub(crate) switch_outs: u64,
}

/// Switch-outs read and intervals counted, per named target.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) switch_outs: u64,
    pub(crate) intervals: u64,
}

/// [`Counts`] by target id (the key the aggregator derives from a thread).
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    counts: FxHashMap<u32, Counts>,
}

impl Tally {
    pub(crate) fn switch_out(&mut self, target: u32) {
        let c = self.counts.entry(target).or_default();
        c.switch_outs = c.switch_outs.saturating_add(1);
    }

    pub(crate) fn interval(&mut self, target: u32) {
        let c = self.counts.entry(target).or_default();
        c.intervals = c.intervals.saturating_add(1);
    }

    pub(crate) fn get(&self, target: u32) -> Counts {
        self.counts.get(&target).copied().unwrap_or_default()
    }
}

/// Most targets one NOTE names; the rest are counted.
const NAMED_PER_NOTE: usize = 8;

/// The NOTE lines (without newlines) for targets that gave no interval:
/// one for those none of whose switch-outs was read, one for those whose
/// switch-outs gave nothing. `state_filter` says whether `--state` was
/// given, which is one more reason for either.
pub(crate) fn notes(quiet: &[QuietTarget], state_filter: bool, recorded: bool) -> Vec<String> {
    let (unseen, unpaired): (Vec<&QuietTarget>, Vec<&QuietTarget>) =
        quiet.iter().partition(|q| q.switch_outs == 0);
    let mut out = Vec::new();
    if !unseen.is_empty() {
        let one = unseen.len() == 1;
        out.push(format!(
            "NOTE: no switch-out of {} was read, so {} no entry: {}{} ran, or stayed blocked, \
             throughout the trace (exiting aside){}, or the kernel did not report {} switches \
             (some kernels hide the scheduler events of certain tasks).",
            names(&unseen),
            if one { "it has" } else { "they have" },
            match (recorded, one) {
                (true, true) => "it is not in the recording, or ",
                (true, false) => "they are not in the recording, or ",
                _ => "",
            },
            if one { "it" } else { "each" },
            if state_filter {
                ", or switched out only in states --state does not select"
            } else {
                ""
            },
            if one { "its" } else { "their" },
        ));
    }
    if !unpaired.is_empty() {
        let switch_outs: u64 = unpaired.iter().map(|q| q.switch_outs).sum();
        out.push(format!(
            "NOTE: {} switched out {switch_outs} time{} but {} no entry: none of {} \
             intervals both began and ended while traced (an exit begins none), or each was \
             dropped ({}-m/-M, or a reason a WARNING or NOTE above gives).",
            names(&unpaired),
            if switch_outs == 1 { "" } else { "s" },
            if unpaired.len() == 1 { "has" } else { "have" },
            if unpaired.len() == 1 { "its" } else { "their" },
            if state_filter { "--state, " } else { "" },
        ));
    }
    out
}

/// `PID 1 "systemd", TID 7 "worker" and 3 more`: each comm quoted and
/// escaped ([`crate::diag::escape`]), so that a traced process can neither
/// write a line of its own into the NOTE nor make its name read as
/// another target.
fn names(targets: &[&QuietTarget]) -> String {
    let mut parts: Vec<String> = targets
        .iter()
        .take(NAMED_PER_NOTE)
        .map(|q| {
            let comm = escape::comm(&q.comm, Place::Quoted);
            match q.kind {
                TargetKind::Process => format!("PID {} {comm}", q.id),
                TargetKind::Thread => format!("TID {} {comm}", q.id),
                TargetKind::Command => format!("the command (PID {} {comm})", q.id),
            }
        })
        .collect();
    let rest = targets.len().saturating_sub(NAMED_PER_NOTE);
    if rest > 0 {
        parts.push(format!("{rest} more"));
    }
    match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n => {
            let last = parts.remove(n - 1);
            format!("{} and {last}", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(kind: TargetKind, id: u32, comm: &str, switch_outs: u64) -> QuietTarget {
        QuietTarget {
            kind,
            id,
            comm: Comm::from(comm),
            switch_outs,
        }
    }

    #[test]
    fn nothing_quiet_gives_no_note() {
        assert!(notes(&[], false, false).is_empty());
    }

    #[test]
    fn a_process_never_seen_is_named_with_what_it_can_mean() {
        let n = notes(&[q(TargetKind::Process, 1, "systemd", 0)], false, false);
        assert_eq!(
            n,
            [
                "NOTE: no switch-out of PID 1 \"systemd\" was read, so it has no entry: it ran, \
                 or stayed blocked, throughout the trace (exiting aside), or the kernel did not \
                 report its switches (some kernels hide the scheduler events of certain tasks)."
            ]
        );
    }

    #[test]
    fn a_target_of_a_recording_may_not_be_in_it() {
        let n = notes(&[q(TargetKind::Process, 9, "[unknown]", 0)], false, true);
        assert!(
            n[0].contains("it is not in the recording, or it ran"),
            "{n:?}"
        );
    }

    #[test]
    fn switch_outs_without_an_interval_get_their_own_note() {
        let n = notes(
            &[
                q(TargetKind::Thread, 7, "worker", 0),
                q(TargetKind::Command, 90, "make", 3),
            ],
            true,
            false,
        );
        assert_eq!(n.len(), 2);
        assert_eq!(
            n[0],
            "NOTE: no switch-out of TID 7 \"worker\" was read, so it has no entry: it ran, or \
             stayed blocked, throughout the trace (exiting aside), or switched out only in \
             states --state does not select, or the kernel did not report its switches (some \
             kernels hide the scheduler events of certain tasks)."
        );
        assert_eq!(
            n[1],
            "NOTE: the command (PID 90 \"make\") switched out 3 times but has no entry: none \
             of its intervals both began and ended while traced (an exit begins none), or \
             each was dropped (--state, -m/-M, or a reason a WARNING or NOTE above gives)."
        );
    }

    #[test]
    fn many_targets_are_named_up_to_a_limit() {
        let many: Vec<QuietTarget> = (1..=11)
            .map(|i| q(TargetKind::Process, i, "p", 0))
            .collect();
        let n = notes(&many, false, false);
        assert_eq!(n.len(), 1);
        assert!(
            n[0].contains(
                "PID 7 \"p\", PID 8 \"p\" and 3 more was read, so they have no entry: each ran"
            ),
            "{}",
            n[0]
        );
        assert!(!n[0].contains("PID 9 "), "{}", n[0]);
    }

    #[test]
    fn a_comm_can_forge_neither_a_line_nor_a_target() {
        let n = notes(
            &[
                q(TargetKind::Process, 5, "x\nNOTE: forged", 0),
                q(TargetKind::Process, 6, "a\", PID 1 \"b", 0),
                q(TargetKind::Thread, 7, "\x1b[2K\u{85}\u{202e}", 0),
                QuietTarget {
                    kind: TargetKind::Thread,
                    id: 8,
                    comm: Comm::from_bytes(b"\xff\\"),
                    switch_outs: 0,
                },
                QuietTarget {
                    kind: TargetKind::Thread,
                    id: 9,
                    comm: Comm::UNKNOWN,
                    switch_outs: 0,
                },
            ],
            false,
            false,
        );
        assert_eq!(n.len(), 1);
        assert!(!n[0].chars().any(char::is_control), "{}", n[0]);
        assert!(
            n[0].contains(
                r#"PID 5 "x\nNOTE: forged", PID 6 "a\x22, PID 1 \x22b", TID 7 "\x1b[2K\xc2\x85\xe2\x80\xae", TID 8 "\xff\\" and TID 9 [unknown] was read"#
            ),
            "{}",
            n[0]
        );
    }

    #[test]
    fn the_tally_counts_per_target() {
        let mut t = Tally::default();
        t.switch_out(5);
        t.switch_out(5);
        t.interval(5);
        assert_eq!(t.get(5).switch_outs, 2);
        assert_eq!(t.get(5).intervals, 1);
        assert_eq!(t.get(6).switch_outs, 0);
    }
}
