//! When each thread was seen on a CPU, as far as the reader has read the
//! rings: shared with the unwinder, which reads a waiting thread's stack
//! past its copy, or whole under tracefs, and must not do so for a thread
//! that ran since its sample (see [`crate::unwind::tail`] and
//! [`crate::unwind::live`]), and with the interpreters' reader, which
//! reads a thread's frames as soon as the reader decodes its switch-out
//! and uses them only if the thread did not run from its switch-out to the
//! end of the read ([`LastRuns::ran_between`]). The reader notes what it
//! decodes and publishes once a round, under one lock; it also hands the
//! switch-outs of the round to an [`Early`] hook, when one is set.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{Event, EventKind};

/// Threads past which old entries are dropped.
const MOST_THREADS: usize = 1 << 16;

/// Entries older than this (ns) before the newest are dropped first: a
/// sample the unwinder checks is never that far behind the reader.
const KEEP_NS: u64 = 10_000_000_000;

/// Rounds of each thread's runs kept, for [`LastRuns::ran_between`].
const ROUNDS_KEPT: usize = 4;

/// How long (ns) a thread must have waited, as far as the reader has
/// read, for its switch-out to be handed on: a read costs the tool some
/// 100 us, and most waits shorter than this end before it is made.
const MIN_WAIT_NS: u64 = 1_000_000;

/// Switch-outs waiting to be handed on, at most.
const MOST_PENDING: usize = 4096;

/// A thread's switch-out, as the reader decoded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Off {
    pub(crate) tid: u32,
    pub(crate) tgid: u32,
    pub(crate) time: u64,
}

/// Where the switch-outs of chosen processes go as soon as a round has
/// read them: to the interpreters' reader.
#[derive(Debug)]
pub(crate) struct Early {
    /// The processes whose switch-outs are handed on.
    pub(crate) tgids: FxHashSet<u32>,
    pub(crate) requests: SyncSender<Off>,
    /// Switch-outs not yet [`MIN_WAIT_NS`] old when last seen.
    pub(crate) pending: VecDeque<Off>,
}

/// What one round of the reader saw: each thread's first and last time
/// seen running, and the switch-outs (while an [`Early`] hook is set).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    runs: FxHashMap<u32, (u64, u64)>,
    offs: Vec<Off>,
    want_offs: bool,
}

/// One thread's runs: the latest time seen, the first and last of each of
/// its recent rounds, and the latest time of the rounds no longer kept.
#[derive(Clone, Copy, Debug, Default)]
struct Runs {
    last: u64,
    rounds: [(u64, u64); ROUNDS_KEPT],
    len: usize,
    next: usize,
    dropped_upto: u64,
}

impl Runs {
    fn add(&mut self, (first, last): (u64, u64)) {
        self.last = self.last.max(last);
        if self.len == ROUNDS_KEPT {
            self.dropped_upto = self.dropped_upto.max(self.rounds[self.next].1);
        } else {
            self.len += 1;
        }
        self.rounds[self.next] = (first, last);
        self.next = (self.next + 1) % ROUNDS_KEPT;
    }
}

#[derive(Debug, Default)]
struct Inner {
    threads: FxHashMap<u32, Runs>,
    /// Every record stamped up to this time has been read.
    complete_upto: u64,
    /// Threads whose runs up to this time may have been dropped.
    forgotten_upto: u64,
}

/// When each thread was seen running: switched in, or out.
#[derive(Debug, Default)]
pub(crate) struct LastRuns {
    inner: Mutex<Inner>,
    early: Mutex<Option<Early>>,
    /// Whether `early` holds a hook, read once a round without its lock.
    early_set: AtomicBool,
}

impl LastRuns {
    /// Notes in `seen` what `event` says of threads running at its time.
    pub(crate) fn note(seen: &mut Seen, event: &Event) {
        let mut ran = |tid: u32| LastRuns::note_ran(seen, tid, event.time);
        match &event.kind {
            EventKind::Switch(s) => {
                ran(s.prev_tid);
                ran(s.next_tid);
                if s.prev_tid != 0 && seen.want_offs {
                    seen.offs.push(Off {
                        tid: s.prev_tid,
                        tgid: s.prev_tgid,
                        time: event.time,
                    });
                }
            }
            EventKind::SwitchIn(s) => ran(s.tid),
            EventKind::Ran(r) => ran(r.tid),
            _ => {}
        }
    }

    /// Notes in `seen` that thread `tid` was running at `time`.
    pub(crate) fn note_ran(seen: &mut Seen, tid: u32, time: u64) {
        let t = seen.runs.entry(tid).or_insert((time, time));
        *t = (t.0.min(time), t.1.max(time));
    }

    /// Makes what `seen` holds known, and empties it. The switch-outs of
    /// the [`Early`] hook's processes that are their thread's last time
    /// seen this round (it did not run after them) wait to be handed on
    /// ([`LastRuns::round_read`]).
    pub(crate) fn publish(&self, seen: &mut Seen) {
        self.keep_offs(seen);
        seen.want_offs = self.early_set.load(Ordering::Relaxed);
        if seen.runs.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut newest = 0;
        for (tid, round) in seen.runs.drain() {
            let t = inner.threads.entry(tid).or_default();
            t.add(round);
            newest = newest.max(t.last);
        }
        if inner.threads.len() > MOST_THREADS {
            let cutoff = newest.saturating_sub(KEEP_NS);
            inner.threads.retain(|_, t| t.last >= cutoff);
            inner.forgotten_upto = inner.forgotten_upto.max(cutoff);
            if inner.threads.len() > MOST_THREADS {
                inner.threads.clear();
                inner.forgotten_upto = newest;
            }
        }
    }

    fn keep_offs(&self, seen: &mut Seen) {
        if seen.offs.is_empty() {
            return;
        }
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = early.as_mut() {
            for off in &seen.offs {
                let last = seen.runs.get(&off.tid).map(|r| r.1);
                if last == Some(off.time) && e.tgids.contains(&off.tgid) {
                    if e.pending.len() >= MOST_PENDING {
                        e.pending.pop_front();
                    }
                    e.pending.push_back(*off);
                }
            }
        }
        seen.offs.clear();
    }

    /// A round has read and published every record stamped up to
    /// `complete`, and it is `now`: the waiting switch-outs at least
    /// [`MIN_WAIT_NS`] old are handed on, unless their thread ran since.
    pub(crate) fn round_read(&self, complete: u64, now: u64) {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.complete_upto = inner.complete_upto.max(complete);
        let Some(e) = early.as_mut() else {
            return;
        };
        let requests = &e.requests;
        e.pending.retain(|off| {
            if inner
                .threads
                .get(&off.tid)
                .is_some_and(|t| t.last > off.time)
            {
                return false;
            }
            if off.time.saturating_add(MIN_WAIT_NS) > now {
                return true;
            }
            // A full queue drops it: the late read stays.
            let _ = requests.try_send(*off);
            false
        });
    }

    /// True when thread `tid` was seen running after `time`.
    pub(crate) fn ran_after(&self, tid: u32, time: u64) -> bool {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.threads.get(&tid).is_some_and(|t| t.last > time)
    }

    /// Whether thread `tid` ran after `from` and up to `to`: `None` when
    /// that is not known (no round has read every record up to `to`, or no longer
    /// holds what it saw after `from`).
    pub(crate) fn ran_between(&self, tid: u32, from: u64, to: u64) -> Option<bool> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if to > inner.complete_upto || from > to {
            return None;
        }
        let Some(t) = inner.threads.get(&tid) else {
            return (from >= inner.forgotten_upto).then_some(false);
        };
        if t.dropped_upto > from {
            return None;
        }
        let mut unknown = false;
        for &(first, last) in &t.rounds[..t.len] {
            if last <= from || first > to {
                continue;
            }
            if first > from || last <= to {
                return Some(true);
            }
            // Seen at or before `from` and after `to` in one round: when in
            // between is not known.
            unknown = true;
        }
        (!unknown).then_some(false)
    }

    /// Sets the hook that takes the switch-outs of chosen processes.
    pub(crate) fn set_early(&self, early: Option<Early>) {
        self.early_set.store(early.is_some(), Ordering::Relaxed);
        *self.early.lock().unwrap_or_else(|e| e.into_inner()) = early;
    }

    /// Hands on the switch-outs of process `tgid` from now on, or not.
    pub(crate) fn early_for(&self, tgid: u32, on: bool) {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = early.as_mut() {
            match on {
                true if e.tgids.len() < MOST_THREADS => e.tgids.insert(tgid),
                true => false,
                false => e.tgids.remove(&tgid),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Comm, RanSince, Switch, SwitchIn};

    fn switch(time: u64, prev: u32, next: u32) -> Event {
        Event {
            time,
            cpu: 0,
            kind: EventKind::Switch(Switch {
                prev_tid: prev,
                prev_tgid: prev,
                prev_comm: Comm::from("a"),
                prev_state: 1,
                next_tid: next,
                next_comm: Comm::from("b"),
                stack: Default::default(),
                user_copy: None,
                prev_ran_since: RanSince::NotTold,
                prev_cgroup: None,
            }),
        }
    }

    #[test]
    fn a_thread_ran_after_a_time_once_seen_switching_later() {
        let runs = LastRuns::default();
        let mut seen = Seen::default();
        LastRuns::note(&mut seen, &switch(100, 7, 8));
        runs.publish(&mut seen);
        assert!(seen.runs.is_empty() && seen.offs.is_empty());
        // Its own switch-out is not running after it.
        assert!(!runs.ran_after(7, 100));
        assert!(runs.ran_after(7, 99));
        assert!(runs.ran_after(8, 50), "switched in at 100");
        assert!(!runs.ran_after(9, 0), "never seen");
        let switched_in = Event {
            time: 300,
            cpu: 1,
            kind: EventKind::SwitchIn(SwitchIn {
                tid: 7,
                tgid: 7,
                prev_tid: 0,
            }),
        };
        LastRuns::note(&mut seen, &switched_in);
        LastRuns::note(&mut seen, &switch(200, 7, 8));
        runs.publish(&mut seen);
        assert!(runs.ran_after(7, 250), "the latest time is kept");
    }

    #[test]
    fn old_entries_go_past_the_most_threads() {
        let runs = LastRuns::default();
        let mut seen = Seen::default();
        for tid in 0..MOST_THREADS as u32 {
            LastRuns::note_ran(&mut seen, tid, 1);
        }
        LastRuns::note_ran(&mut seen, u32::MAX, KEEP_NS + 10);
        runs.publish(&mut seen);
        runs.round_read(KEEP_NS + 20, KEEP_NS + 20);
        assert!(!runs.ran_after(0, 0), "an old entry went");
        assert!(runs.ran_after(u32::MAX, KEEP_NS));
        // What went may have run: not known before the cutoff.
        assert_eq!(runs.ran_between(0, 0, 5), None);
        assert_eq!(runs.ran_between(0, 10, 15), Some(false));
    }

    /// Rounds of `(tid, time)` runs, each published and complete up to
    /// its last time.
    fn rounds(rounds: &[&[(u32, u64)]]) -> LastRuns {
        let runs = LastRuns::default();
        for round in rounds {
            let mut seen = Seen::default();
            for &(tid, time) in *round {
                LastRuns::note_ran(&mut seen, tid, time);
            }
            runs.publish(&mut seen);
            let last = round.iter().map(|r| r.1).max().unwrap_or(0);
            runs.round_read(last, last);
        }
        runs
    }

    #[test]
    fn a_run_between_two_times_is_told_apart_from_one_after() {
        // Out at 100; in at 300, out at 310; in at 500.
        let runs = rounds(&[&[(7, 100)], &[(7, 300), (7, 310)], &[(7, 500)]]);
        assert_eq!(runs.ran_between(7, 100, 250), Some(false));
        assert_eq!(runs.ran_between(7, 100, 299), Some(false));
        assert_eq!(runs.ran_between(7, 100, 300), Some(true));
        assert_eq!(runs.ran_between(7, 100, 400), Some(true));
        assert_eq!(runs.ran_between(7, 310, 450), Some(false));
        assert_eq!(runs.ran_between(7, 310, 500), Some(true));
        // Past what the reader has read: not known.
        assert_eq!(runs.ran_between(7, 500, 501), None);
        assert_eq!(runs.ran_between(9, 100, 400), Some(false), "never seen");
        // A round that saw it before and after: when in between is not
        // known.
        assert_eq!(runs.ran_between(7, 305, 306), None);
        assert_eq!(runs.ran_between(7, 400, 300), None);
    }

    #[test]
    fn runs_of_rounds_no_longer_kept_are_not_known() {
        let all: Vec<[(u32, u64); 1]> = (1..=ROUNDS_KEPT as u64 + 2)
            .map(|i| [(7, i * 100)])
            .collect();
        let rounds_of: Vec<&[(u32, u64)]> = all.iter().map(|r| &r[..]).collect();
        let runs = rounds(&rounds_of);
        // Rounds at 100 and 200 went: after 150, a run may be unknown.
        assert_eq!(runs.ran_between(7, 150, 160), None);
        assert_eq!(runs.ran_between(7, 200, 250), Some(false));
        assert_eq!(runs.ran_between(7, 200, 300), Some(true));
    }

    #[test]
    fn a_rounds_last_switch_outs_of_chosen_processes_are_handed_on() {
        let runs = LastRuns::default();
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        runs.set_early(Some(Early {
            tgids: FxHashSet::default(),
            requests: tx,
            pending: VecDeque::new(),
        }));
        runs.early_for(7, true);
        runs.early_for(8, true);
        runs.early_for(8, false);
        let mut seen = Seen::default();
        // Switch-outs are noted from the round after the hook is seen.
        LastRuns::note(&mut seen, &switch(50, 7, 9));
        assert!(seen.offs.is_empty());
        runs.publish(&mut seen);
        // 7 out at 100, in at 150 (as 9 leaves), out at 200; 8 out at 120.
        LastRuns::note(&mut seen, &switch(100, 7, 9));
        LastRuns::note(&mut seen, &switch(120, 8, 9));
        LastRuns::note(&mut seen, &switch(150, 9, 7));
        LastRuns::note(&mut seen, &switch(200, 7, 9));
        // 9 out at 250, then seen running again at 260.
        LastRuns::note(&mut seen, &switch(250, 9, 0));
        LastRuns::note_ran(&mut seen, 9, 260);
        runs.early_for(9, true);
        runs.publish(&mut seen);
        // Not yet waiting long enough.
        runs.round_read(150, 200 + MIN_WAIT_NS - 1);
        assert_eq!(rx.try_iter().count(), 0);
        runs.round_read(150, 200 + MIN_WAIT_NS);
        let handed: Vec<Off> = rx.try_iter().collect();
        assert_eq!(
            handed,
            [Off {
                tid: 7,
                tgid: 7,
                time: 200
            }]
        );
        // 7 out at 300 waits to be handed on; it runs at 350 meanwhile.
        LastRuns::note(&mut seen, &switch(300, 7, 9));
        runs.publish(&mut seen);
        LastRuns::note_ran(&mut seen, 7, 350);
        runs.publish(&mut seen);
        runs.round_read(300, 300 + 2 * MIN_WAIT_NS);
        assert_eq!(rx.try_iter().count(), 0, "it ran before its read");
    }
}
