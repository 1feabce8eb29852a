//! Wakeup chains (`--chain N`): a bounded history of every thread's recent
//! blocked intervals, and the walk from a target's waker back through what
//! that waker was itself waiting on, and who woke it, level by level.
//!
//! The rule: level 2 of a target T's interval, ended by W's wakeup at t,
//! is W's own blocked interval (a sleep, not a preemption) that ended last
//! before t, when it overlaps T's interval; level 3 applies the rule to
//! W's waker against W's interval, and so on. Which interval ended last
//! before a wakeup is noted at the wakeup ([`Prev`]), so that W's later
//! waits never take its place; preemptions between it and that sleep are
//! stepped over.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::hash::BuildHasher;

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::event::{Comm, WakeContext};
use crate::report::ChainEnd;

use super::StackRef;

/// The most levels, the first included (`--chain` at most).
pub(crate) const MAX_LEVELS: usize = 8;

/// Intervals kept per thread: a waker's wait is looked up when the
/// target's wait ends, after the waker may have waited again.
const KEPT_PER_THREAD: usize = 8;

/// How long an interval is kept after it ended, in nanoseconds: a level
/// older than this reads [`ChainEnd::NotTraced`].
pub(crate) const KEPT_NS: u64 = 30_000_000_000;

/// How often (in event time) intervals past [`KEPT_NS`] are dropped.
const SWEEP_NS: u64 = 1_000_000_000;

/// How long the intervals of a thread that exited are kept: its last
/// wakeups (of the thread that reaps it) are soon followed.
const EXITED_NS: u64 = 1_000_000_000;

/// Who made a wakeup, as an entry shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct WakerKey {
    /// 0 with an empty comm when there was no wakeup, or when an
    /// interrupt made it (`context` says which).
    pub(crate) tid: u32,
    pub(crate) tgid: u32,
    pub(crate) comm: Comm,
    pub(crate) context: WakeContext,
    pub(crate) kernel: StackRef,
    pub(crate) user: StackRef,
}

impl WakerKey {
    /// No wakeup was read.
    pub(crate) const NONE: WakerKey = WakerKey {
        tid: 0,
        tgid: 0,
        comm: Comm([0; 16]),
        context: WakeContext::Task,
        kernel: StackRef::Empty,
        user: StackRef::Empty,
    };

    /// True for a task whose own waits a chain can follow: not an
    /// interrupt, not an idle task, not the absence of a wakeup.
    fn is_task(&self) -> bool {
        self.context == WakeContext::Task && self.tid != 0
    }
}

/// One level past the first: what the waker of the level above was
/// doing while that level waited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Level {
    /// It was blocked here, and this woke it.
    Waited {
        kernel: StackRef,
        user: StackRef,
        waker: WakerKey,
    },
    /// The chain ends here, for this reason.
    End(ChainEnd),
}

/// `levels` with `f` applied to the waker of each.
pub(crate) fn with_wakers(levels: Vec<Level>, f: impl Fn(&mut WakerKey)) -> Vec<Level> {
    levels
        .into_iter()
        .map(|mut level| {
            if let Level::Waited { waker, .. } = &mut level {
                f(waker);
            }
            level
        })
        .collect()
}

/// The interval of a waker that ended last before its wakeup, as noted at
/// the wakeup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prev {
    /// None is known: the waker ran since before tracing began, or its
    /// switch-in was not reported.
    Unknown,
    /// Interval `seq` of that thread, which ended at `end`.
    Interval { seq: u64, end: u64 },
}

/// A wakeup, as the interval it ended keeps it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wakeup {
    pub(crate) key: WakerKey,
    /// The waker's interval that ended last before it.
    pub(crate) prev: Prev,
}

/// A blocked interval of any thread, kept for the chains through it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Past {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) kernel: StackRef,
    pub(crate) user: StackRef,
    /// Preempted (runnable), not asleep.
    pub(crate) preempted: bool,
    /// A lost record may fall inside it.
    pub(crate) tainted: bool,
    /// `None` when no wakeup ended it.
    pub(crate) wakeup: Option<Wakeup>,
}

/// Every thread's recent intervals, at most [`KEPT_PER_THREAD`] each and
/// none older than [`KEPT_NS`], nor kept past [`EXITED_NS`] after their
/// thread exited.
#[derive(Debug, Default)]
pub(crate) struct History {
    /// By thread (idle tasks are never kept), oldest first, each with its
    /// sequence number.
    threads: FxHashMap<u32, VecDeque<(u64, Past)>>,
    /// Threads that exited, and when.
    exited: FxHashMap<u32, u64>,
    next_seq: u64,
    swept_at: u64,
}

impl Wakeup {
    /// Its stacks, each passed through `f`.
    pub(crate) fn map_stacks(&mut self, f: &mut impl FnMut(StackRef) -> StackRef) {
        self.key.kernel = f(self.key.kernel);
        self.key.user = f(self.key.user);
    }
}

impl History {
    /// Every kept interval's stacks, passed through `f`.
    pub(crate) fn map_stacks(&mut self, f: &mut impl FnMut(StackRef) -> StackRef) {
        for (_, past) in self.threads.values_mut().flatten() {
            past.kernel = f(past.kernel);
            past.user = f(past.user);
            if let Some(w) = past.wakeup.as_mut() {
                w.map_stacks(f);
            }
        }
    }

    /// Keeps an interval of thread `tid` that ended at `past.end`.
    pub(crate) fn push(&mut self, tid: u32, past: Past) {
        if tid == 0 {
            return;
        }
        if past.end >= self.swept_at.saturating_add(SWEEP_NS) {
            self.sweep(past.end);
        }
        let ring = self.threads.entry(tid).or_default();
        if ring.len() == KEPT_PER_THREAD {
            ring.pop_front();
        }
        self.next_seq += 1;
        ring.push_back((self.next_seq, past));
    }

    /// What a wakeup by `tid` notes of it: its last interval.
    pub(crate) fn last(&self, tid: u32) -> Prev {
        match self.threads.get(&tid).and_then(VecDeque::back) {
            Some(&(seq, ref past)) => Prev::Interval { seq, end: past.end },
            None => Prev::Unknown,
        }
    }

    /// Forgets a thread: its TID now names a new one.
    pub(crate) fn forget(&mut self, tid: u32) {
        self.threads.remove(&tid);
        self.exited.remove(&tid);
    }

    /// Thread `tid` exited at `time`: its intervals go soon.
    pub(crate) fn exit(&mut self, tid: u32, time: u64) {
        if self.threads.contains_key(&tid) {
            self.exited.insert(tid, time);
        }
    }

    /// The last sleep of thread `tid` up to its interval `seq` (the one
    /// noted at its wakeup), when it ended after `since`; else why there is
    /// none: it ran from `since` on ([`ChainEnd::Running`]), or was only
    /// preempted ([`ChainEnd::Runnable`]), or what it did is not known.
    fn sleep_up_to(&self, tid: u32, seq: u64, since: u64) -> Result<Past, ChainEnd> {
        let ring = self.threads.get(&tid).ok_or(ChainEnd::NotTraced)?;
        let mut kept = ring.iter().rev().skip_while(|(s, _)| *s > seq).peekable();
        // The noted interval itself must still be kept: else some of the
        // thread's intervals after what is kept are missing.
        if kept.peek().is_none_or(|(s, _)| *s != seq) {
            return Err(ChainEnd::NotTraced);
        }
        let mut preempted = false;
        for (_, past) in kept {
            if past.end <= since {
                return Err(if preempted {
                    ChainEnd::Runnable
                } else {
                    ChainEnd::Running
                });
            }
            if past.tainted {
                return Err(ChainEnd::Lost);
            }
            if !past.preempted {
                return Ok(*past);
            }
            if past.start <= since {
                // Preempted since before `since`: no sleep after it.
                return Err(ChainEnd::Runnable);
            }
            preempted = true;
        }
        Err(ChainEnd::NotTraced)
    }

    /// Drops the intervals that ended more than [`KEPT_NS`] before `now`,
    /// and those of threads that exited more than [`EXITED_NS`] before.
    fn sweep(&mut self, now: u64) {
        self.swept_at = now;
        let gone = now.saturating_sub(EXITED_NS);
        let threads = &mut self.threads;
        self.exited.retain(|tid, &mut at| {
            if at < gone {
                threads.remove(tid);
            }
            at >= gone
        });
        let oldest = now.saturating_sub(KEPT_NS);
        self.threads.retain(|_, ring| {
            while ring.front().is_some_and(|(_, p)| p.end < oldest) {
                ring.pop_front();
            }
            !ring.is_empty()
        });
    }

    /// Threads with intervals kept (for tests and the cost figures).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.threads.len()
    }

    /// The levels past the first of an interval of thread `tid` from
    /// `start` to `end`, woken by `wakeup`, at most `depth - 1` of them.
    pub(crate) fn walk(
        &self,
        tid: u32,
        (start, end): (u64, u64),
        wakeup: Wakeup,
        depth: usize,
    ) -> Walk {
        let mut levels = Vec::new();
        let mut overlaps = [0u64; MAX_LEVELS - 1];
        let mut unwoken = false;
        let mut seen = vec![tid];
        let mut above = (start, end);
        let mut wakeup = wakeup;
        while levels.len() + 1 < depth.min(MAX_LEVELS) && wakeup.key.is_task() {
            let waker = wakeup.key.tid;
            let past = match wakeup.prev {
                _ if seen.contains(&waker) => Err(ChainEnd::Loop),
                Prev::Interval { end, .. } if end <= above.0 => Err(ChainEnd::Running),
                Prev::Interval { seq, .. } => self.sleep_up_to(waker, seq, above.0),
                Prev::Unknown => Err(ChainEnd::NotTraced),
            };
            let past = match past {
                Ok(past) => past,
                Err(reason) => {
                    levels.push(Level::End(reason));
                    break;
                }
            };
            overlaps[levels.len()] = past.end.min(end).saturating_sub(past.start.max(start));
            // A sleep ends in a wakeup: the kernel did not report this one.
            unwoken = past.wakeup.is_none();
            let next = past.wakeup.unwrap_or(Wakeup {
                key: WakerKey::NONE,
                prev: Prev::Unknown,
            });
            levels.push(Level::Waited {
                kernel: past.kernel,
                user: past.user,
                waker: next.key,
            });
            seen.push(waker);
            above = (past.start, past.end);
            wakeup = next;
        }
        Walk {
            levels,
            overlaps,
            unwoken,
        }
    }
}

/// A target's interval's chain past its first level.
#[derive(Debug)]
pub(crate) struct Walk {
    pub(crate) levels: Vec<Level>,
    /// Level by level, the nanoseconds of the target's interval that
    /// level's wait overlapped.
    pub(crate) overlaps: [u64; MAX_LEVELS - 1],
    /// The last level is a sleep no wakeup was read for.
    pub(crate) unwoken: bool,
}

/// Identifies a chain of levels in a [`ChainTable`]; 0 is no level.
pub(crate) type ChainId = u32;

/// The distinct chains of levels, each stored once: looked up by the hash
/// of its levels, compared with the stored chain. The rare chain whose
/// hash collides with another's goes to `collisions`.
#[derive(Debug)]
pub(crate) struct ChainTable {
    chains: Vec<Vec<Level>>,
    ids: FxHashMap<u64, ChainId>,
    collisions: FxHashMap<Vec<Level>, ChainId>,
}

impl Default for ChainTable {
    fn default() -> ChainTable {
        ChainTable {
            chains: vec![Vec::new()],
            ids: FxHashMap::default(),
            collisions: FxHashMap::default(),
        }
    }
}

impl ChainTable {
    /// The id of `levels`, if stored.
    pub(crate) fn id(&self, levels: &[Level]) -> Option<ChainId> {
        if levels.is_empty() {
            return Some(0);
        }
        let id = *self.ids.get(&FxBuildHasher.hash_one(levels))?;
        if self.chains.get(id as usize).is_some_and(|c| c == levels) {
            return Some(id);
        }
        self.collisions.get(levels).copied()
    }

    pub(crate) fn intern(&mut self, levels: Vec<Level>) -> ChainId {
        if let Some(id) = self.id(&levels) {
            return id;
        }
        let id = ChainId::try_from(self.chains.len()).unwrap_or(ChainId::MAX);
        match self.ids.entry(FxBuildHasher.hash_one(&levels[..])) {
            Entry::Vacant(slot) => {
                slot.insert(id);
            }
            Entry::Occupied(_) => {
                self.collisions.insert(levels.clone(), id);
            }
        }
        self.chains.push(levels);
        id
    }

    /// Chains stored, the empty one included.
    pub(crate) fn len(&self) -> usize {
        self.chains.len()
    }

    /// The chains, by id.
    pub(crate) fn into_chains(self) -> Vec<Vec<Level>> {
        self.chains
    }
}
