//! When each thread was last seen on a CPU, as far as the reader has read
//! the rings: shared with the unwinder, which reads a waiting thread's
//! stack past its copy, or whole under tracefs, and must not do so for a
//! thread that ran since its sample (see [`crate::unwind::tail`] and
//! [`crate::unwind::live`]). The reader notes what it decodes
//! and publishes once a round, under one lock.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::{Event, EventKind};

/// Threads past which old entries are dropped.
const MOST_THREADS: usize = 1 << 16;

/// Entries older than this (ns) before the newest are dropped first: a
/// sample the unwinder checks is never that far behind the reader.
const KEEP_NS: u64 = 10_000_000_000;

/// The last time each thread was seen running: switched in, or out.
#[derive(Debug, Default)]
pub(crate) struct LastRuns(Mutex<FxHashMap<u32, u64>>);

impl LastRuns {
    /// Notes in `seen` what `event` says of threads running at its time.
    pub(crate) fn note(seen: &mut FxHashMap<u32, u64>, event: &Event) {
        let mut ran = |tid: u32| LastRuns::note_ran(seen, tid, event.time);
        match &event.kind {
            EventKind::Switch(s) => {
                ran(s.prev_tid);
                ran(s.next_tid);
            }
            EventKind::SwitchIn(s) => ran(s.tid),
            EventKind::Ran(r) => ran(r.tid),
            _ => {}
        }
    }

    /// Notes in `seen` that thread `tid` was running at `time`.
    pub(crate) fn note_ran(seen: &mut FxHashMap<u32, u64>, tid: u32, time: u64) {
        let t = seen.entry(tid).or_insert(time);
        *t = (*t).max(time);
    }

    /// Makes what `seen` holds known, and empties it.
    pub(crate) fn publish(&self, seen: &mut FxHashMap<u32, u64>) {
        if seen.is_empty() {
            return;
        }
        let mut runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut newest = 0;
        for (tid, time) in seen.drain() {
            let t = runs.entry(tid).or_insert(time);
            *t = (*t).max(time);
            newest = newest.max(*t);
        }
        if runs.len() > MOST_THREADS {
            let cutoff = newest.saturating_sub(KEEP_NS);
            runs.retain(|_, &mut t| t >= cutoff);
            if runs.len() > MOST_THREADS {
                runs.clear();
            }
        }
    }

    /// True when thread `tid` was seen running after `time`.
    pub(crate) fn ran_after(&self, tid: u32, time: u64) -> bool {
        let runs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        runs.get(&tid).is_some_and(|&t| t > time)
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
        let mut seen = FxHashMap::default();
        LastRuns::note(&mut seen, &switch(100, 7, 8));
        runs.publish(&mut seen);
        assert!(seen.is_empty());
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
        let mut seen = FxHashMap::default();
        for tid in 0..MOST_THREADS as u32 {
            seen.insert(tid, 1);
        }
        seen.insert(u32::MAX, KEEP_NS + 10);
        runs.publish(&mut seen);
        assert!(!runs.ran_after(0, 0), "an old entry went");
        assert!(runs.ran_after(u32::MAX, KEEP_NS));
    }
}
