//! Pairing of switch-out, wakeup and switch-in events per thread into blocked
//! intervals, target filters, block-time limits, and interning of stacks.
//! Keeps raw addresses: nothing is symbolized here.
//!
//! The rules: a target's interval opens at its switch-out (its
//! stacks interned then), takes the last `sched_waking` of it before its
//! switch-in as its waker, and closes at its switch-in, where its whole
//! microseconds are checked against `-m`/`-M` and summed under its
//! [`EntryKey`]. A switch-in may also be learnt late, from the thread's
//! next switch-out ([`Switch::prev_ran_since`]). Idle
//! tasks are tracked per CPU. A `Lost` record taints every interval that
//! overlaps its window (open at its start, or opened before its end), which
//! is then discarded at its switch-in. Threads that exit, and TIDs that
//! are reused by a fork, lose their pending state. An interrupt's wakeup
//! is no task's (its pseudo-task in the report). With `--chain`, every
//! thread's intervals are paired too, and kept for the chains of the
//! targets' ([`chain`]).

mod cgroups;
mod chain;
mod cut;
mod entries;
mod identity;
mod nspid;
pub(crate) mod quiet;
mod settle;
pub(crate) mod stacks;
mod stats;
pub(crate) mod tasks;
mod wall;

use std::hash::{Hash, Hasher};

use rustc_hash::FxHashMap;

use crate::plan::{Stacks, Targets};
use crate::sys::cgroup::Hierarchy;
use crate::sys::own::OwnTasks;

use crate::event::{
    Callchain, Comm, CommChange, Event, EventKind, Exit, Fork, Ran, RanSince, Switch, SwitchIn,
    WakeContext, Waking,
};

use cgroups::CgroupNames;
pub(crate) use cgroups::CgroupPath;
use chain::{History, Past, Prev, Wakeup, with_wakers};
use entries::Entries;
use identity::Identity;
use nspid::NsTids;
use quiet::QuietTarget;
use stacks::{NoCode, StackInterner};

use crate::event::state::{self, StateFilter};
pub(crate) use chain::{ChainId, Level, MAX_LEVELS, WakerKey};
pub(crate) use identity::TaskLookup;
pub(crate) use settle::{Half, Settled};
pub(crate) use stacks::{Code, CodeOf, Place, StackId, StackRef, StackTable, UserStack};
pub(crate) use stats::Stats;
pub(crate) use tasks::TaskTable;

/// How to aggregate.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) threads: Targets,
    pub(crate) state: Option<StateFilter>,
    /// Intervals shorter than this many microseconds are dropped.
    pub(crate) min_block_us: u64,
    /// Intervals longer than this many microseconds are dropped.
    pub(crate) max_block_us: u64,
    /// Most unique stacks kept (kernel and user together).
    pub(crate) stack_storage_size: usize,
    /// Which stacks are kept.
    pub(crate) stacks: Stacks,
    /// The tool's own tasks: never targets, and counted when they wake
    /// one (`None`: no task is).
    pub(crate) own: Option<OwnTasks>,
    /// Levels of wakeup chains (`--chain`): 1 is the waker only, and
    /// past 1 every thread's intervals are followed.
    pub(crate) chain: u8,
    /// Where the cgroup ids that switch-outs carry are named (`None`: they
    /// carry none that matter).
    pub(crate) cgroup_names: Option<Hierarchy>,
    /// Entries are split by their target's cgroup (`--per-cgroup`, or a
    /// pprof report's label).
    pub(crate) split_cgroups: bool,
    /// A wall-clock profile (`--wall`): on-CPU samples are counted, and
    /// each interval's wait for a CPU is counted apart from its blocked
    /// wait.
    pub(crate) wall: bool,
}

/// What identifies one output entry (bcc's `key_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct EntryKey {
    pub(crate) target_tid: u32,
    pub(crate) target_tgid: u32,
    /// The target's comm at switch-in.
    pub(crate) target_comm: Comm,
    /// 0 with an empty comm when there was no wakeup, or when an
    /// interrupt made it (`waker_context` says which).
    pub(crate) waker_tid: u32,
    pub(crate) waker_tgid: u32,
    pub(crate) waker_comm: Comm,
    pub(crate) waker_context: WakeContext,
    pub(crate) target_kernel: StackRef,
    pub(crate) target_user: StackRef,
    pub(crate) waker_kernel: StackRef,
    pub(crate) waker_user: StackRef,
    /// The levels past the first (`--chain`), in [`Aggregate::chains`].
    pub(crate) chain: ChainId,
    /// The target's cgroup at switch-out, when entries are split by
    /// cgroup (named in [`Aggregate::cgroups`]; 0: none known or asked).
    pub(crate) cgroup: u64,
}

impl Hash for EntryKey {
    /// Every field, packed into twelve words: the key is hashed once per
    /// interval, and field by field it took 18 writes, two of them byte
    /// slices.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let pair = |a: u32, b: u32| (u64::from(a) << 32) | u64::from(b);
        state.write_u64(pair(self.target_tid, self.target_tgid));
        state.write_u128(u128::from_ne_bytes(self.target_comm.0));
        state.write_u64(pair(self.waker_tid, self.waker_tgid));
        state.write_u64(pair(self.waker_context as u32, self.chain));
        state.write_u64(self.cgroup);
        state.write_u128(u128::from_ne_bytes(self.waker_comm.0));
        for r in [
            self.target_kernel,
            self.target_user,
            self.waker_kernel,
            self.waker_user,
        ] {
            state.write_u64(r.word());
        }
    }
}

/// One entry and its summed blocked time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) key: EntryKey,
    pub(crate) total_us: u64,
    /// For each level past the first, the microseconds of the target's
    /// blocked time that its wait overlapped.
    pub(crate) overlap_us: [u64; MAX_LEVELS - 1],
}

/// How far before its interval a switch-in told late may be estimated and
/// still end it (see [`Aggregator::close_late`]).
const LATE_SWITCH_IN_SLACK_NS: u64 = 1_000_000;

/// The result of a run.
#[derive(Debug)]
pub(crate) struct Aggregate {
    pub(crate) entries: Vec<Entry>,
    pub(crate) stacks: StackTable,
    /// The levels past the first of the entries' chains, by
    /// [`EntryKey::chain`] (0: none).
    pub(crate) chains: Vec<Vec<Level>>,
    pub(crate) stats: Stats,
    /// The named targets (`-p`, `-t`, `-- COMMAND`) that gave no interval,
    /// in order of id.
    pub(crate) quiet: Vec<QuietTarget>,
    /// Targets whose id in their own PID namespace differs, with it.
    pub(crate) ns_tids: FxHashMap<u32, u32>,
    /// With entries split by cgroup, their cgroups by [`EntryKey::cgroup`]:
    /// paths relative to the mount (an id missing was never named).
    pub(crate) cgroups: Option<FxHashMap<u64, CgroupPath>>,
}

/// Per-thread state key: idle tasks (tid 0) exist once per CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ThreadKey {
    tid: u32,
    /// The CPU for tid 0, else 0.
    cpu: u32,
}

impl ThreadKey {
    fn new(tid: u32, cpu: u32) -> ThreadKey {
        ThreadKey {
            tid,
            cpu: if tid == 0 { cpu } else { 0 },
        }
    }
}

/// A thread that switched out and has not switched back in (or whose
/// switch-in is not known yet): a target, or with chains, any thread.
#[derive(Clone, Copy, Debug)]
struct OpenInterval {
    start: u64,
    tgid: u32,
    /// Counted in the report (else kept for chains only).
    target: bool,
    /// [`EntryKey::cgroup`].
    cgroup: u64,
    kernel: StackRef,
    user: StackRef,
    /// The first and the last wakeup seen while open, with their times.
    first_waker: Option<(u64, Wakeup)>,
    waker: Option<(u64, Wakeup)>,
    /// The state it switched out asleep in (see
    /// [`state::reported_state`]); `None` when preempted. Exactly one
    /// wakeup ends a sleep, since a woken task is not woken again before
    /// it has run. The first one is then the waker even when its
    /// switch-in, learnt late, was estimated a few microseconds before it
    /// (and later ones came while it ran).
    slept: Option<u8>,
    /// Value of `Aggregator::losses` when the interval opened: any later
    /// loss may fall inside it.
    losses_at_start: u64,
}

/// The pairing state machine.
pub(crate) struct Aggregator {
    /// [`Config::min_block_us`] and [`Config::max_block_us`].
    min_block_us: u64,
    max_block_us: u64,
    /// Which stacks are kept ([`Config::stacks`]).
    kept: Stacks,
    /// Who the threads are, and which are targets.
    identity: Identity,
    open: FxHashMap<ThreadKey, OpenInterval>,
    stacks: StackInterner,
    /// The entries and the chains they refer to.
    entries: Entries,
    /// `--chain`, and with more than one level, every thread's recent
    /// intervals and the chains seen.
    depth: usize,
    /// [`Config::split_cgroups`].
    split_cgroups: bool,
    /// [`Config::wall`].
    wall: bool,
    /// With `wall`, the CPU time of sampled threads since their last sample.
    cpu_since: wall::CpuSince,
    /// The targets' ids in their own PID namespaces.
    ns_tids: NsTids,
    history: Option<History>,
    stats: Stats,
    /// Number of `Lost` events seen so far.
    losses: u64,
    /// End of the latest loss window: an interval opening before it may
    /// span the loss.
    lost_until: u64,
    /// Stacks that did not fit, as of the last report.
    missed_reported: u64,
    /// Stacks stored just after the last cut (those of open intervals).
    stored_at_cut: usize,
}

impl Aggregator {
    pub(crate) fn new(config: Config, tasks: TaskTable) -> Aggregator {
        let Config {
            threads,
            state,
            min_block_us,
            max_block_us,
            stack_storage_size,
            stacks,
            own,
            chain,
            cgroup_names,
            split_cgroups,
            wall,
        } = config;
        let cpu_since = wall::CpuSince::new(wall && state.is_none());
        let mut identity = Identity::new(threads, state, own, tasks);
        identity.cgroups = cgroup_names.map(CgroupNames::new);
        Aggregator {
            min_block_us,
            max_block_us,
            kept: stacks,
            identity,
            open: FxHashMap::default(),
            stacks: StackInterner::new(stack_storage_size),
            entries: Entries::for_levels(usize::from(chain)),
            depth: usize::from(chain),
            split_cgroups,
            wall,
            cpu_since,
            ns_tids: NsTids::new(),
            history: (chain > 1).then(History::default),
            stats: Stats::default(),
            losses: 0,
            lost_until: 0,
            missed_reported: 0,
            stored_at_cut: 0,
        }
    }

    /// Replaces how threads missing from the task table are looked up
    /// (tests use this to stay away from `/proc`).
    pub(crate) fn with_task_lookup(mut self, lookup: TaskLookup) -> Aggregator {
        self.identity.set_lookup(lookup);
        // What stands in for /proc stands in for its namespaces too.
        self.ns_tids.set_lookup(Box::new(|_| None));
        self
    }

    /// Feeds one event; events must come in global time order. User
    /// stacks are told apart by address.
    pub(crate) fn process(&mut self, event: &Event) {
        self.process_with(event, &NoCode);
    }

    /// Feeds one event, user stacks told apart by the code `code` says
    /// their frames run.
    pub(crate) fn process_with(&mut self, event: &Event, code: &dyn CodeOf) {
        match &event.kind {
            EventKind::Switch(s) => self.on_switch(event.time, event.cpu, s, code),
            EventKind::SwitchIn(s) => self.on_switch_in(event.time, event.cpu, s),
            EventKind::Ran(r) => self.on_ran(event.time, r),
            EventKind::Waking(w) => self.on_waking(event.time, event.cpu, w, code),
            EventKind::OnCpu(s) => self.on_cpu(event.time, event.cpu, s, code),
            EventKind::Fork(f) => self.on_fork(f),
            EventKind::Exit(e) => self.on_exit(event.time, e),
            EventKind::Comm(c) => self.on_comm(c),
            // Switch-outs carry their cgroup already.
            EventKind::Mmap(_) | EventKind::CgroupMove(_) => {}
            EventKind::Lost(l) => {
                self.cpu_since.lost();
                self.stats.lost_records = self.stats.lost_records.saturating_add(l.records);
                self.losses += 1;
                self.lost_until = self.lost_until.max(l.until);
            }
        }
    }

    /// False when `event` switches out a thread whose stack will not be
    /// kept: not one of the named targets, and no chain is followed. Its
    /// user stack need not be unwound.
    pub(crate) fn may_keep_stack(&self, event: &Event) -> bool {
        match &event.kind {
            // A task's last switch-out (X, Z) ends no interval.
            EventKind::Switch(s) => {
                !s.is_final()
                    && (self.history.is_some() || self.identity.may_target(s.prev_tid, s.prev_tgid))
            }
            EventKind::OnCpu(s) => self.wall && self.identity.may_target(s.tid, s.tgid),
            _ => true,
        }
    }

    /// True when the stack storage or the entries are nearly full, and
    /// cutting what was counted would free room: a quarter of the storage
    /// was filled since the last cut.
    pub(crate) fn nearly_full(&self) -> bool {
        let (stored, capacity) = (self.stacks.len(), self.stacks.capacity());
        let new = stored.saturating_sub(self.stored_at_cut);
        (stored >= capacity - capacity / 8 && new >= (capacity / 4).max(1))
            || self.entries.nearly_full()
    }

    /// Number of unique user stacks stored so far.
    pub(crate) fn user_stacks_stored(&self) -> usize {
        self.stacks.user_len()
    }

    /// The user stacks stored since there were `from` of them: the caller
    /// snapshots those processes' memory maps while they still live.
    pub(crate) fn user_stacks_since(&self, from: usize) -> &[UserStack] {
        self.stacks.user_since(from)
    }

    fn intern(
        &mut self,
        tgid: u32,
        time: u64,
        stack: &Callchain,
        code: &dyn CodeOf,
    ) -> (StackRef, StackRef) {
        let kernel = if self.kept.kernel {
            self.stacks.intern_kernel_chain(stack)
        } else {
            StackRef::Empty
        };
        let user = if self.kept.user {
            self.stacks.intern_user_chain(tgid, time, stack, code)
        } else {
            StackRef::Empty
        };
        (kernel, user)
    }

    fn on_switch(&mut self, time: u64, cpu: u32, s: &Switch, code: &dyn CodeOf) {
        // Switch-in of next.
        let next_key = ThreadKey::new(s.next_tid, cpu);
        self.cpu_since.switched_in(next_key, time);
        if let Some(open) = self.open.remove(&next_key) {
            self.close(time, false, s.next_tid, s.next_comm, open);
        }
        self.identity.learn_comm(s.next_tid, s.next_comm);

        // Switch-out of prev.
        let named = self.identity.switched_out(s);
        // A task leaving as X or Z (its final switch) never comes back:
        // keep no state, and store no stack, for an interval that cannot end.
        let target = !s.is_final() && self.identity.is_target(s, named);
        if target {
            self.ns_tids.note(s.prev_tid);
        } else if s.is_final() {
            self.identity.gone(s.prev_tid, s.prev_tgid);
            self.ns_tids.forget(s.prev_tid);
        }
        // With chains, any thread's wait may be a level of a target's.
        let kept = target || (self.history.is_some() && !s.is_final() && s.prev_tid != 0);
        let opened = if kept {
            let (kernel, user) = self.intern(s.prev_tgid, time, &s.stack, code);
            Some(OpenInterval {
                start: time,
                tgid: s.prev_tgid,
                target,
                cgroup: if self.split_cgroups {
                    s.prev_cgroup.unwrap_or(0)
                } else {
                    0
                },
                kernel,
                user,
                first_waker: None,
                waker: None,
                slept: state::reported_state(s.prev_state),
                // Opening inside a loss window: tainted from the start.
                losses_at_start: if time < self.lost_until {
                    self.losses.wrapping_sub(1)
                } else {
                    self.losses
                },
            })
        } else {
            None
        };
        let prev_key = ThreadKey::new(s.prev_tid, cpu);
        match s.is_final() {
            true => self.cpu_since.gone(prev_key),
            false => self.cpu_since.switched_out(prev_key, time),
        }
        let was_open = match opened {
            Some(interval) => self.open.insert(prev_key, interval),
            None => self.open.remove(&prev_key),
        };
        if let Some(was) = was_open {
            // It ran, so it came back in: when, only this switch-out may
            // say.
            match s.prev_ran_since {
                RanSince::NotTold if was.target => self.stats.switch_in_unseen += 1,
                RanSince::Unknown if was.target => self.stats.switch_in_unknown += 1,
                RanSince::NotTold | RanSince::Unknown => {}
                RanSince::At(since) => self.close_late(time, since, s.prev_tid, s.prev_comm, was),
            }
        }
    }

    /// Closes `open` at `since`, a switch-in learnt at `time`, if it can
    /// have ended that interval.
    ///
    /// Such a switch-in comes early by the time the thread's previous
    /// switch-out spent between its sample and the switch itself (see
    /// `perf::running`): usually a few microseconds, 10 µs seen here. One
    /// at most [`LATE_SWITCH_IN_SLACK_NS`] before the interval began
    /// closes it where it began: the interval was shorter than that error.
    fn close_late(&mut self, time: u64, since: u64, tid: u32, comm: Comm, open: OpenInterval) {
        if since.saturating_add(LATE_SWITCH_IN_SLACK_NS) < open.start || since > time {
            self.stats.switch_in_unknown += u64::from(open.target);
        } else {
            self.close(since.max(open.start), true, tid, comm, open);
        }
    }

    /// A thread's last slice, told as it stopped being traced.
    fn on_ran(&mut self, time: u64, r: &Ran) {
        let Some(open) = self.open.remove(&ThreadKey::new(r.tid, 0)) else {
            return;
        };
        let comm = self.identity.comm_of(r.tid);
        match r.since {
            Some(since) => self.close_late(time, since, r.tid, comm, open),
            None => self.stats.switch_in_unknown += u64::from(open.target),
        }
    }

    /// A switch-in that `sched_switch` did not report (the kernel skipped
    /// it, or a `--state` filter dropped that switch): closes the interval
    /// like a `next_pid` would, with the latest comm known.
    fn on_switch_in(&mut self, time: u64, cpu: u32, s: &SwitchIn) {
        let key = ThreadKey::new(s.tid, cpu);
        self.cpu_since.switched_in(key, time);
        if let Some(open) = self.open.remove(&key) {
            let comm = if s.tid == 0 {
                Comm::from(format!("swapper/{cpu}").as_str())
            } else {
                self.identity.comm_of(s.tid)
            };
            self.stats.switch_ins_from_backstop += u64::from(open.target);
            self.close(time, false, s.tid, comm, open);
        }
    }

    fn close(&mut self, time: u64, late: bool, tid: u32, comm: Comm, open: OpenInterval) {
        let tainted = open.losses_at_start != self.losses;
        // The last wakeup before the switch-in (with one learnt late, the
        // only wakeup of a sleep: see `OpenInterval::slept`).
        let wakeup = if late && open.slept.is_some() {
            open.first_waker
        } else {
            [open.waker, open.first_waker]
                .into_iter()
                .flatten()
                .find(|&(at, _)| at <= time)
        };
        if let Some(history) = &mut self.history {
            history.push(
                tid,
                Past {
                    start: open.start,
                    end: time,
                    kernel: open.kernel,
                    user: open.user,
                    preempted: open.slept.is_none(),
                    tainted,
                    wakeup: wakeup.map(|(_, w)| w),
                },
            );
        }
        if open.target {
            self.count(time, tid, comm, &open, wakeup);
        }
    }

    /// Counts a target's interval that ended at `time`, if it may be.
    fn count(
        &mut self,
        time: u64,
        tid: u32,
        comm: Comm,
        open: &OpenInterval,
        wakeup: Option<(u64, Wakeup)>,
    ) {
        if open.losses_at_start != self.losses {
            self.stats.discarded_lost += 1;
            return;
        }
        // A wall-clock profile counts the wait for a CPU apart: what is
        // left is the blocked wait, up to its wakeup.
        let time = match self.wall && tid != 0 {
            true => match self.count_runnable(time, tid, comm, open, wakeup.map(|(at, _)| at)) {
                Some(end) => end,
                None => return,
            },
            false => time,
        };
        let wakeup = wakeup.map(|(_, w)| w);
        let us = time.saturating_sub(open.start) / 1000;
        if us < self.min_block_us || us > self.max_block_us {
            self.stats.out_of_range += 1;
            return;
        }
        if wakeup.is_none()
            && let Some(state) = open.slept
            && let Some(n) = self.stats.wakeup_unseen.get_mut(usize::from(state))
        {
            *n += 1;
        }
        let wakeup = wakeup.unwrap_or(Wakeup {
            key: WakerKey::NONE,
            prev: Prev::Unknown,
        });
        let (levels, overlap_ns) = match &self.history {
            Some(history) => {
                let walk = history.walk(tid, (open.start, time), wakeup, self.depth);
                self.stats.chain_wakeup_unseen += u64::from(walk.unwoken);
                (walk.levels, walk.overlaps)
            }
            None => (Vec::new(), [0; MAX_LEVELS - 1]),
        };
        let waker = wakeup.key;
        let key = EntryKey {
            target_tid: tid,
            target_tgid: open.tgid,
            target_comm: comm,
            waker_tid: waker.tid,
            waker_tgid: waker.tgid,
            waker_comm: waker.comm,
            waker_context: waker.context,
            target_kernel: open.kernel,
            target_user: open.user,
            waker_kernel: waker.kernel,
            waker_user: waker.user,
            chain: 0,
            cgroup: open.cgroup,
        };
        self.identity.interval(tid, open.tgid);
        if !self
            .entries
            .add(key, levels, us, &overlap_ns.map(|ns| ns / 1000))
        {
            return;
        }
        if waker.context == WakeContext::Task && self.identity.is_own(waker.tid, waker.tgid) {
            self.stats.woken_by_self += 1;
            self.stats.woken_by_self_us = self.stats.woken_by_self_us.saturating_add(us);
        }
        self.stats.intervals += 1;
    }

    fn on_waking(&mut self, time: u64, cpu: u32, w: &Waking, code: &dyn CodeOf) {
        if w.wakee_tid == 0 {
            return;
        }
        self.identity.learn_comm(w.wakee_tid, w.wakee_comm);
        let key = ThreadKey::new(w.wakee_tid, cpu);
        if !self.open.contains_key(&key) {
            return;
        }
        let waker = if w.context != WakeContext::Task {
            // An interrupt's: no task's, least of all the one it landed in
            // (whose user stack the source left out).
            let (kernel, _) = self.intern(0, time, &w.stack, code);
            Wakeup {
                key: WakerKey {
                    kernel,
                    context: w.context,
                    ..WakerKey::NONE
                },
                prev: Prev::Unknown,
            }
        } else {
            let comm = if w.waker_tid == 0 {
                Comm::from(format!("swapper/{cpu}").as_str())
            } else {
                self.identity.comm_of(w.waker_tid)
            };
            let (kernel, user) = self.intern(w.waker_tgid, time, &w.stack, code);
            // The waker runs: its last interval ended, unless its
            // switch-in was never reported (it still looks blocked).
            let prev = match &self.history {
                Some(history) if !self.open.contains_key(&ThreadKey::new(w.waker_tid, cpu)) => {
                    history.last(w.waker_tid)
                }
                _ => Prev::Unknown,
            };
            Wakeup {
                key: WakerKey {
                    tid: w.waker_tid,
                    tgid: w.waker_tgid,
                    comm,
                    context: WakeContext::Task,
                    kernel,
                    user,
                },
                prev,
            }
        };
        if let Some(open) = self.open.get_mut(&key) {
            let waker = Some((time, waker));
            if open.first_waker.is_none() {
                open.first_waker = waker;
            }
            open.waker = waker;
        }
    }

    fn on_fork(&mut self, f: &Fork) {
        self.identity.fork(f);
        // A reused TID starts with no history.
        self.open.remove(&ThreadKey::new(f.tid, 0));
        if let Some(history) = &mut self.history {
            history.forget(f.tid);
        }
    }

    fn on_exit(&mut self, time: u64, e: &Exit) {
        // An open interval stays: the thread still switches out for the
        // last time, and that switch-out may tell when it last switched in
        // (`Switch::prev_ran_since`); it then leaves no state.
        self.identity.exit(e);
        self.cpu_since.gone(ThreadKey::new(e.tid, 0));
        if e.tid == e.tgid {
            self.stacks.forget_process(e.tgid);
        }
        if let Some(history) = &mut self.history {
            history.exit(e.tid, time);
        }
    }

    fn on_comm(&mut self, c: &CommChange) {
        if c.tid == 0 {
            return;
        }
        if c.exec {
            self.stacks.new_image(c.tgid);
        }
        self.identity.comm(c);
    }
}

#[cfg(test)]
mod tests;
