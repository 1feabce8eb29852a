//! Global time ordering of events that arrive per CPU: a reorder window
//! flushed in rounds, as `perf` does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::os::fd::BorrowedFd;
use std::time::Duration;

use anyhow::{Result, anyhow};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::event::Event;
use crate::sys::host::monotonic_ns;

/// A buffered event and its arrival number (ties keep arrival order).
struct Pending {
    time: u64,
    seq: u64,
    event: Event,
}

/// The rounds both backends read in. The time is taken at the start of
/// each round; after every CPU's buffer has been read, the events stamped
/// at or before the start of the *previous* round are released (anything
/// stamped before a round started has been fully written by the time the
/// next round reads).
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    prev_start: Option<u64>,
    released_upto: u64,
}

impl Rounds {
    /// Starts a round: waits up to `timeout` for one of `fds`, or `wake`,
    /// to be readable and returns the round's start time, or None when a
    /// signal interrupted the wait (no round: the caller checks why).
    pub(crate) fn wait<'fd>(
        &mut self,
        fds: impl IntoIterator<Item = BorrowedFd<'fd>>,
        wake: Option<BorrowedFd<'fd>>,
        timeout: Duration,
        what: &str,
    ) -> Result<Option<u64>> {
        let start = monotonic_ns();
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds: Vec<PollFd<'_>> = fds
            .into_iter()
            .chain(wake)
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) => Ok(Some(start)),
            Err(Errno::EINTR) => Ok(None),
            Err(e) => Err(anyhow!("poll on {what}: {e}")),
        }
    }

    /// Ends the round that started at `start` (its buffers read): returns
    /// the time up to which events may now be released, if any.
    pub(crate) fn end(&mut self, start: u64) -> Option<u64> {
        let upto = self.prev_start.replace(start)?;
        self.released_upto = upto;
        Some(upto)
    }

    /// Events up to this time have been released: nothing older may be
    /// pushed any more (a loss window is moved up to it).
    pub(crate) fn released_upto(&self) -> u64 {
        self.released_upto
    }
}

/// Buffers events from all CPUs and releases them in timestamp order once no
/// earlier event can still arrive.
///
/// Each CPU's events arrive almost sorted, so they are queued per CPU (an
/// out-of-order one is inserted in place) and released by merging the
/// queues through a small heap of their heads: each event is moved twice,
/// whatever the size of the window.
#[derive(Default)]
pub(crate) struct Reorder {
    queues: Vec<VecDeque<Pending>>,
    /// (time, seq, queue) of each queue's first event; entries whose event
    /// is no longer first are skipped when they come up.
    heads: BinaryHeap<Reverse<(u64, u64, usize)>>,
    next_seq: u64,
    len: usize,
}

/// CPUs above this share the last queue (it stays sorted regardless).
const MAX_QUEUES: usize = 8192;

impl Reorder {
    pub(crate) fn new() -> Reorder {
        Reorder::default()
    }

    pub(crate) fn push(&mut self, event: Event) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let (time, cpu) = (event.time, (event.cpu as usize).min(MAX_QUEUES - 1));
        if cpu >= self.queues.len() {
            self.queues.resize_with(cpu + 1, VecDeque::new);
        }
        let q = &mut self.queues[cpu];
        let p = Pending { time, seq, event };
        match q.back() {
            Some(last) if last.time <= time => q.push_back(p),
            Some(_) => {
                let i = q.partition_point(|x| x.time <= time);
                q.insert(i, p);
                if i == 0 {
                    self.heads.push(Reverse((time, seq, cpu)));
                }
            }
            None => {
                q.push_back(p);
                self.heads.push(Reverse((time, seq, cpu)));
            }
        }
        self.len += 1;
    }

    /// Releases, in time order, every buffered event with `time <= upto`.
    /// Events with equal times come out in the order they were pushed.
    pub(crate) fn flush_upto(&mut self, upto: u64, sink: &mut dyn FnMut(Event)) {
        while let Some(&Reverse((time, seq, cpu))) = self.heads.peek() {
            if time > upto {
                break;
            }
            self.heads.pop();
            let q = &mut self.queues[cpu];
            if q.front().is_none_or(|p| p.seq != seq) {
                continue;
            }
            // Release this queue's events for as long as they come before
            // every other queue's first one (a CPU's events often come in
            // runs); the heap only hears of the first one that does not.
            while let Some(p) = q.pop_front() {
                self.len -= 1;
                sink(p.event);
                let Some(next) = q.front() else {
                    break;
                };
                let head = (next.time, next.seq, cpu);
                if next.time > upto || self.heads.peek().is_some_and(|&Reverse(h)| h < head) {
                    self.heads.push(Reverse(head));
                    break;
                }
            }
        }
    }

    /// Releases everything, in time order.
    pub(crate) fn flush_all(&mut self, sink: &mut dyn FnMut(Event)) {
        self.flush_upto(u64::MAX, sink)
    }

    /// Number of buffered events.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when no event is buffered.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Exit};

    fn ev(time: u64, cpu: u32, tid: u32) -> Event {
        Event {
            time,
            cpu,
            kind: EventKind::Exit(Exit { tgid: tid, tid }),
        }
    }

    fn key(e: &Event) -> (u64, u32, u32) {
        match e.kind {
            EventKind::Exit(x) => (e.time, e.cpu, x.tid),
            _ => unreachable!(),
        }
    }

    #[test]
    fn interleaved_cpus_come_out_in_time_order() {
        let mut r = Reorder::new();
        // CPU 0 and CPU 1 each deliver in their own order, read one ring at
        // a time.
        for (t, tid) in [(10, 1), (30, 2), (50, 3), (70, 4)] {
            r.push(ev(t, 0, tid));
        }
        for (t, tid) in [(20, 11), (30, 12), (40, 13), (80, 14)] {
            r.push(ev(t, 1, tid));
        }
        let mut out = Vec::new();
        r.flush_upto(40, &mut |e| out.push(key(&e)));
        assert_eq!(
            out,
            vec![
                (10, 0, 1),
                (20, 1, 11),
                (30, 0, 2),
                (30, 1, 12),
                (40, 1, 13)
            ]
        );
        assert_eq!(r.len(), 3);

        // A late event from CPU 1 that is still after the flushed horizon.
        r.push(ev(45, 1, 15));
        out.clear();
        r.flush_upto(60, &mut |e| out.push(key(&e)));
        assert_eq!(out, vec![(45, 1, 15), (50, 0, 3)]);

        out.clear();
        r.flush_all(&mut |e| out.push(key(&e)));
        assert_eq!(out, vec![(70, 0, 4), (80, 1, 14)]);
        assert!(r.is_empty());
    }

    #[test]
    fn ties_keep_arrival_order() {
        let mut r = Reorder::new();
        for tid in 0..100u32 {
            r.push(ev(5, tid % 2, tid));
        }
        r.push(ev(1, 0, 1000));
        let mut out = Vec::new();
        r.flush_all(&mut |e| out.push(key(&e).2));
        let mut expected = vec![1000];
        expected.extend(0..100);
        assert_eq!(out, expected);
    }

    #[test]
    fn out_of_order_within_a_cpu_is_sorted() {
        let mut r = Reorder::new();
        for (t, tid) in [(10, 1), (30, 2), (20, 3), (5, 4), (30, 5), (40, 6)] {
            r.push(ev(t, 0, tid));
        }
        r.push(ev(25, 1, 7));
        r.push(ev(u64::MAX, u32::MAX, 8));
        let mut out = Vec::new();
        r.flush_upto(30, &mut |e| out.push(key(&e).2));
        assert_eq!(out, vec![4, 1, 3, 7, 2, 5]);
        assert_eq!(r.len(), 2);
        out.clear();
        r.flush_all(&mut |e| out.push(key(&e).2));
        assert_eq!(out, vec![6, 8]);
        assert!(r.is_empty());
    }

    #[test]
    fn matches_a_stable_sort_of_what_is_released() {
        // xorshift: the same pseudo-random pushes and flushes every run.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..50 {
            let mut r = Reorder::new();
            let mut pending: Vec<(u64, u32)> = Vec::new(); // (time, tid)
            let mut out = Vec::new();
            let mut want = Vec::new();
            let (mut flushed, mut tid) = (0u64, 0u32);
            let cpus = 1 + next(4) as u32;
            let mut clocks = vec![0u64; cpus as usize];
            for _ in 0..300 {
                if next(8) == 0 {
                    flushed += next(40);
                    r.flush_upto(flushed, &mut |e| out.push(key(&e).2));
                    // The model: a stable sort by time of the released.
                    pending.sort_by_key(|&(t, _)| t);
                    let keep = pending.split_off(pending.partition_point(|&(t, _)| t <= flushed));
                    want.extend(pending.iter().map(|&(_, t)| t));
                    pending = keep;
                } else {
                    // Mostly in order per CPU, sometimes a bit back, never
                    // before what was released.
                    let cpu = next(u64::from(cpus)) as usize;
                    clocks[cpu] += next(10);
                    let t = (clocks[cpu].saturating_sub(next(3) * next(6))).max(flushed + 1);
                    r.push(ev(t, cpu as u32, tid));
                    pending.push((t, tid));
                    tid += 1;
                }
            }
            r.flush_all(&mut |e| out.push(key(&e).2));
            pending.sort_by_key(|&(t, _)| t);
            want.extend(pending.iter().map(|&(_, t)| t));
            assert_eq!(out, want);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn flush_upto_is_inclusive_and_empty_is_fine() {
        let mut r = Reorder::new();
        let mut n = 0;
        r.flush_all(&mut |_| n += 1);
        assert_eq!(n, 0);
        r.push(ev(7, 0, 0));
        r.flush_upto(6, &mut |_| n += 1);
        assert_eq!(n, 0);
        r.flush_upto(7, &mut |_| n += 1);
        assert_eq!(n, 1);
    }
}
