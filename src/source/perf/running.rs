//! Switch-ins of traced threads, told by the `time_running` each per-task
//! `sched_switch` sample carries (`PERF_SAMPLE_READ`) instead of by
//! context-switch records, which cost every switch on the machine.
//!
//! A per-task event counts only while its thread is on the event's CPU,
//! and it samples every switch-out there. So the growth of its count since
//! its last sample is the slice the sample ends: the thread switched in
//! that long before it. Each `(thread, CPU, event)` is followed apart.
//!
//! The last slice of a thread ends in its exit, not a switch-out. A thread
//! that inherited its events tells it with an inherited
//! `sched_process_exit` event, which counts the same time. A thread the
//! tool attached has events nothing inherits, whose final counts are read
//! when its exit is reported ([`RunningClock::set_finals`]).
//!
//! A per-CPU event bound to a cgroup (`--cgroup`) works the same way for
//! all of the cgroup's threads at once ([`RunningClock::share`]).
//!
//! Unknown switch-ins: the first slice of a thread that was running when
//! its event was enabled (the count began at the enable), and the next
//! slice on a CPU whose ring may have lost records. A sample reads the
//! count a few microseconds before its switch, so the next switch-in is
//! told that much early.

use rustc_hash::{FxHashMap, FxHashSet};

/// Where one event's `time_running` stood at its last sample.
#[derive(Clone, Copy, Debug)]
struct Mark {
    cpu: u32,
    id: u64,
    /// `None` once a loss on `cpu` may have hidden a sample since.
    running: Option<u64>,
}

/// The `time_running` of every per-task event, per thread.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunningClock {
    marks: FxHashMap<u32, Vec<Mark>>,
    /// Attached (not inherited) events: by id, a time no earlier than
    /// their enable. A first sample whose slice began by then may have
    /// begun before the event could count it.
    enabled: FxHashMap<u64, u64>,
    /// `sched_process_exit` events: by id, the `sched_switch` event whose
    /// count theirs equals (same thread, CPU and creation).
    exits: FxHashMap<u64, u64>,
    /// Final counts of attached threads that exited, by thread and CPU,
    /// with the event's id, until that CPU's exit record is read.
    finals: FxHashMap<(u32, u32), (u64, u64)>,
    /// Per-CPU events bound to a cgroup, which count while any of its
    /// threads runs on their CPU: followed per `(CPU, event)` whatever
    /// the thread ([`RunningClock::share`]).
    shared: FxHashSet<u64>,
}

/// The thread key of the events in [`RunningClock::shared`].
const SHARED: u32 = u32::MAX;

impl RunningClock {
    pub(crate) fn new() -> RunningClock {
        RunningClock::default()
    }

    /// Notes that the attached event `id` was enabled no later than `at`.
    pub(crate) fn enabled(&mut self, id: u64, at: u64) {
        let t = self.enabled.entry(id).or_insert(at);
        *t = (*t).max(at);
    }

    /// Notes that event `id` is a per-CPU event bound to a cgroup: it
    /// samples every switch-out of the cgroup's threads on its CPU and
    /// counts only while one of them runs there, so the growth of its
    /// count since its last sample is the slice the sample ends, whichever
    /// thread ran the one before.
    pub(crate) fn share(&mut self, id: u64) {
        self.shared.insert(id);
    }

    /// When `tid` switched in on `cpu`, for a switch-out of it sampled at
    /// `time` by event `id` with `running` as that event's `time_running`;
    /// `None` when that cannot be known (see the module doc).
    pub(crate) fn switched_in(
        &mut self,
        tid: u32,
        cpu: u32,
        id: u64,
        time: u64,
        running: u64,
    ) -> Option<u64> {
        let key = if self.shared.contains(&id) {
            SHARED
        } else {
            tid
        };
        let marks = self.marks.entry(key).or_default();
        let (last, first) = match marks.iter_mut().find(|m| m.cpu == cpu && m.id == id) {
            Some(m) => (m.running.replace(running), false),
            None => {
                marks.push(Mark {
                    cpu,
                    id,
                    running: Some(running),
                });
                (Some(0), true)
            }
        };
        let since = time.checked_sub(running.checked_sub(last?)?)?;
        match self.enabled.get(&id) {
            Some(&enabled) if first && since <= enabled => None,
            _ => Some(since),
        }
    }

    /// Notes that the `sched_process_exit` event `exit` counts as the
    /// `sched_switch` event `switch` does.
    pub(crate) fn exit_alias(&mut self, exit: u64, switch: u64) {
        self.exits.insert(exit, switch);
    }

    /// The `sched_switch` event that the `sched_process_exit` event `id`
    /// counts as, if `id` is one.
    pub(crate) fn exit_of(&self, id: u64) -> Option<u64> {
        self.exits.get(&id).copied()
    }

    /// When `tid` switched in for the slice it was running as it exited,
    /// from its `sched_process_exit` sample (by the event `exit_of` gave).
    pub(crate) fn exiting(
        &mut self,
        tid: u32,
        cpu: u32,
        switch: u64,
        time: u64,
        running: u64,
    ) -> Option<u64> {
        let since = self.switched_in(tid, cpu, switch, time, running);
        self.forget_thread(tid);
        since
    }

    /// The counts of an attached thread's events, read after it exited:
    /// `(cpu, event id, time_running)`.
    pub(crate) fn set_finals(
        &mut self,
        tid: u32,
        finals: impl IntoIterator<Item = (u32, u64, u64)>,
    ) {
        for (cpu, id, running) in finals {
            self.finals.insert((tid, cpu), (id, running));
        }
    }

    /// `tid`'s exit, read from `cpu`'s ring at `time` (after everything it
    /// wrote there before): when it switched in for its last slice, if that
    /// ran on `cpu` and its final count ([`RunningClock::set_finals`]) is
    /// known. Its state for `cpu` is dropped.
    pub(crate) fn exited(&mut self, tid: u32, cpu: u32, time: u64) -> Option<u64> {
        let (id, running) = self.finals.remove(&(tid, cpu))?;
        // No growth since the last switch-out there: the slice ran elsewhere.
        let since = self
            .switched_in(tid, cpu, id, time, running)
            .filter(|&since| since < time);
        if let Some(marks) = self.marks.get_mut(&tid) {
            marks.retain(|m| m.cpu != cpu || m.id != id);
            if marks.is_empty() {
                self.marks.remove(&tid);
            }
        }
        since
    }

    /// Records may have been lost on `cpu`'s ring: the next slice there of
    /// every thread followed so far is unknown.
    pub(crate) fn forget_cpu(&mut self, cpu: u32) {
        for m in self.marks.values_mut().flatten() {
            if m.cpu == cpu {
                m.running = None;
            }
        }
    }

    /// `tid` exited: nothing more comes from its events.
    pub(crate) fn forget_thread(&mut self, tid: u32) {
        self.marks.remove(&tid);
    }

    /// Threads followed (for tests and memory bounds).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.marks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slice_is_the_growth_since_the_last_sample() {
        let mut c = RunningClock::new();
        // An inherited event (no enable noted): its count starts at the
        // thread's birth, so the first slice is whole.
        assert_eq!(c.switched_in(7, 0, 100, 1_000, 300), Some(700));
        assert_eq!(c.switched_in(7, 0, 100, 5_000, 500), Some(4_800));
        // Another CPU has its own count.
        assert_eq!(c.switched_in(7, 1, 100, 9_000, 50), Some(8_950));
        assert_eq!(c.switched_in(7, 0, 100, 9_500, 600), Some(9_400));
        // So does another event of the same thread on the same CPU (a
        // thread attached twice).
        assert_eq!(c.switched_in(7, 0, 200, 9_500, 40), Some(9_460));
        // And another thread.
        assert_eq!(c.switched_in(8, 0, 100, 9_600, 10), Some(9_590));
        assert_eq!(c.threads(), 2);
    }

    #[test]
    fn impossible_counts_are_unknown() {
        let mut c = RunningClock::new();
        // More running time than there was time.
        assert_eq!(c.switched_in(7, 0, 1, 100, 500), None);
        // A count that went backwards.
        assert_eq!(c.switched_in(7, 0, 1, 1_000, 400), None);
        // Back on track from the last count.
        assert_eq!(c.switched_in(7, 0, 1, 2_000, 450), Some(1_950));
    }

    #[test]
    fn a_first_slice_that_began_before_its_attached_event_is_unknown() {
        let mut c = RunningClock::new();
        c.enabled(300, 1_000);
        // Running when its event was enabled at about 1000: the count
        // started at the enable.
        assert_eq!(c.switched_in(7, 0, 300, 1_500, 520), None);
        // Its next slices are whole.
        assert_eq!(c.switched_in(7, 0, 300, 3_000, 620), Some(2_900));
        // A thread that switched in after the enable is known at once.
        assert_eq!(c.switched_in(8, 0, 300, 1_500, 100), Some(1_400));
    }

    #[test]
    fn an_inherited_thread_tells_its_last_slice_with_its_exit_event() {
        let mut c = RunningClock::new();
        c.exit_alias(51, 50);
        assert_eq!(c.exit_of(51), Some(50));
        assert_eq!(c.exit_of(50), None);
        assert_eq!(c.switched_in(7, 1, 50, 1_000, 300), Some(700));
        // Exiting at 9000 with 800 counted on CPU 1: in since 8500.
        assert_eq!(c.exiting(7, 1, 50, 9_000, 800), Some(8_500));
        assert_eq!(c.threads(), 0);
    }

    #[test]
    fn an_attached_thread_tells_its_last_slice_with_its_final_counts() {
        let mut c = RunningClock::new();
        c.enabled(60, 0);
        c.enabled(61, 0);
        assert_eq!(c.switched_in(7, 0, 60, 1_000, 300), Some(700));
        assert_eq!(c.switched_in(7, 1, 61, 2_000, 100), Some(1_900));
        // Its last slice ran on CPU 0: 200 more there, none on CPU 1.
        c.set_finals(7, [(0, 60, 500), (1, 61, 100)]);
        assert_eq!(c.exited(7, 1, 9_000), None);
        assert_eq!(c.exited(7, 0, 9_000), Some(8_800));
        assert_eq!(c.threads(), 0);
        // Each CPU's exit is told once.
        assert_eq!(c.exited(7, 0, 9_000), None);
    }

    #[test]
    fn losses_and_exits_forget() {
        let mut c = RunningClock::new();
        assert_eq!(c.switched_in(7, 0, 1, 1_000, 100), Some(900));
        assert_eq!(c.switched_in(7, 1, 1, 1_000, 100), Some(900));
        c.forget_cpu(0);
        // A sample may have been lost on CPU 0: the growth may span two
        // slices.
        assert_eq!(c.switched_in(7, 0, 1, 5_000, 300), None);
        assert_eq!(c.switched_in(7, 0, 1, 6_000, 400), Some(5_900));
        // CPU 1 lost nothing.
        assert_eq!(c.switched_in(7, 1, 1, 5_000, 200), Some(4_900));
        c.forget_thread(7);
        assert_eq!(c.threads(), 0);
    }
}
