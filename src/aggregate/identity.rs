//! Who each thread is, for the pairing: its process, comm and kind (from
//! the task table kept current from events, threads that exited, or a
//! lookup), whether it is one of the tool's own tasks or a target, and the
//! tally of switch-outs and intervals per named target.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::event::state::StateFilter;
use crate::event::{Callchain, Comm, CommChange, Exit, Fork, OnCpu, Switch};
use crate::plan::Targets;
use crate::sys::own::OwnTasks;

use super::cgroups::{CgroupNames, CgroupPath};
use super::quiet::{QuietTarget, Tally, TargetKind};
use super::tasks::{KTHREADD_TID, TaskInfo, TaskTable};

/// Looks up a thread the task table does not know (default:
/// [`TaskTable::read_proc_task`]).
pub(crate) type TaskLookup = Box<dyn FnMut(u32) -> Option<TaskInfo> + Send>;

/// What is known of the threads seen, and which of them are targets.
pub(super) struct Identity {
    /// Which threads are targets ([`super::Config::threads`]).
    threads: Targets,
    /// The switch-out states that count ([`super::Config::state`]).
    state: Option<StateFilter>,
    /// The tool's own tasks ([`super::Config::own`]).
    own: Option<OwnTasks>,
    tasks: TaskTable,
    /// Threads that exited during the trace: a dying thread still switches
    /// out and wakes its parent after its exit record.
    exited: FxHashMap<u32, TaskInfo>,
    /// Threads the lookup did not find (not asked again).
    unknown: FxHashSet<u32>,
    lookup: TaskLookup,
    /// Comms seen in events for threads missing from the task table.
    seen_comms: FxHashMap<u32, Comm>,
    /// Target processes under `Targets::Command`.
    command_tgids: FxHashSet<u32>,
    /// Switch-outs and intervals per named target.
    tally: Tally,
    /// The cgroup ids' paths, when switch-outs carry them: this
    /// machine's, or a recording's own.
    pub(super) cgroups: Option<CgroupNames>,
    /// Under `--cgroup`, whether each cgroup id seen is a target's: a
    /// path past what is kept need not be looked up at every switch-out.
    in_targets: FxHashMap<u64, bool>,
}

/// A task as the target filters see it.
#[derive(Clone, Copy)]
struct Task<'a> {
    tid: u32,
    tgid: u32,
    comm: Comm,
    stack: &'a Callchain,
    cgroup: Option<u64>,
}

/// Threads that exited remembered at most; past them the memory starts
/// over (see [`Identity::exit`]).
const MAX_EXITED: usize = 1 << 16;

/// Cgroup ids whose membership is remembered at most; past them the
/// memory starts over.
const MAX_MEMBERSHIPS: usize = 1 << 18;

impl Identity {
    pub(super) fn new(
        threads: Targets,
        state: Option<StateFilter>,
        own: Option<OwnTasks>,
        tasks: TaskTable,
    ) -> Identity {
        Identity {
            threads,
            state,
            own,
            tasks,
            exited: FxHashMap::default(),
            unknown: FxHashSet::default(),
            lookup: Box::new(TaskTable::read_proc_task),
            seen_comms: FxHashMap::default(),
            command_tgids: FxHashSet::default(),
            tally: Tally::default(),
            cgroups: None,
            in_targets: FxHashMap::default(),
        }
    }

    /// Replaces how threads missing from the task table are looked up.
    pub(super) fn set_lookup(&mut self, lookup: TaskLookup) {
        self.lookup = lookup;
    }

    /// Learns what a switch-out tells of the thread leaving (its comm
    /// and process) and tallies it; returns what
    /// [`Identity::tally_key`] says of it.
    pub(super) fn switched_out(&mut self, s: &Switch) -> Option<u32> {
        self.learn_comm(s.prev_tid, s.prev_comm);
        if s.prev_tid != 0
            && let Some(info) = self.tasks.tasks.get_mut(&s.prev_tid)
        {
            info.tgid = s.prev_tgid;
        }
        let named = self.tally_key(s.prev_tid, s.prev_tgid);
        if let Some(target) = named {
            self.tally.switch_out(target);
        }
        named
    }

    /// Tallies an interval counted for thread `tid` of process `tgid`.
    pub(super) fn interval(&mut self, tid: u32, tgid: u32) {
        if let Some(target) = self.tally_key(tid, tgid) {
            self.tally.interval(target);
        }
    }

    /// A new thread: known from now on, and a target under `-- COMMAND`
    /// when its parent's process is.
    pub(super) fn fork(&mut self, f: &Fork) {
        // A new thread starts with its parent's comm.
        let comm = self.comm_of(f.parent_tid);
        self.insert_task(
            f.tid,
            TaskInfo {
                tgid: f.tgid,
                comm,
                kthread: f.parent_tid == KTHREADD_TID,
            },
        );
        self.exited.remove(&f.tid);
        self.unknown.remove(&f.tid);
        if matches!(self.threads, Targets::Command { .. })
            && self.command_tgids.contains(&f.parent_tgid)
        {
            self.command_tgids.insert(f.tgid);
        }
    }

    /// Moves a thread that exits to those that exited.
    pub(super) fn exit(&mut self, e: &Exit) {
        if e.tid == 0 {
            return;
        }
        if let Some(info) = self.tasks.tasks.remove(&e.tid) {
            // Each is forgotten at its final switch-out; these are those
            // whose final switch-out was lost.
            if self.exited.len() >= MAX_EXITED {
                self.exited.clear();
            }
            self.exited.insert(e.tid, info);
        }
    }

    /// Threads that exited and are still remembered.
    #[cfg(test)]
    pub(super) fn exited_len(&self) -> usize {
        self.exited.len()
    }

    /// Thread `tid` of process `tgid` switched out for the last time: it
    /// wakes nothing more, so what it was need not be kept (unless it is a
    /// named target, which the report may name as quiet).
    pub(super) fn gone(&mut self, tid: u32, tgid: u32) {
        if self.tally_key(tid, tgid) != Some(tid) {
            self.exited.remove(&tid);
        }
    }

    /// A rename, or an exec; `c.tid` is not 0.
    pub(super) fn comm(&mut self, c: &CommChange) {
        if c.exec {
            self.unknown.remove(&c.tid);
            self.insert_task(
                c.tid,
                TaskInfo {
                    tgid: c.tgid,
                    comm: c.comm,
                    kthread: false,
                },
            );
            if let Targets::Command { root, .. } = self.threads
                && c.tgid == root
            {
                self.command_tgids.insert(root);
            }
        } else {
            self.learn_comm(c.tid, c.comm);
        }
    }

    /// The comm events gave for `tid`, a thread missing from the task
    /// table, if any did.
    pub(super) fn seen_comm(&self, tid: u32) -> Option<Comm> {
        self.seen_comms.get(&tid).copied()
    }

    /// The named targets that gave no interval, in order of id.
    pub(super) fn quiet_targets(&mut self) -> Vec<QuietTarget> {
        let mut named: Vec<(TargetKind, u32)> = match &self.threads {
            Targets::Processes(set) => set.iter().map(|&p| (TargetKind::Process, p)).collect(),
            Targets::Threads(set) => set.iter().map(|&t| (TargetKind::Thread, t)).collect(),
            Targets::Command { root, .. } => vec![(TargetKind::Command, *root)],
            _ => Vec::new(),
        };
        named.sort_unstable_by_key(|&(_, id)| id);
        let mut quiet = Vec::new();
        for (kind, id) in named {
            let counts = self.tally.get(id);
            if counts.intervals == 0 {
                quiet.push(QuietTarget {
                    kind,
                    id,
                    comm: self.comm_of(id),
                    switch_outs: counts.switch_outs,
                });
            }
        }
        quiet
    }

    /// The named target a thread belongs to (what [`Tally`] counts by):
    /// its process under `-p`, itself under `-t`, the command's first
    /// process under `-- COMMAND`; `None` when it is not one, or when no
    /// target was named.
    fn tally_key(&self, tid: u32, tgid: u32) -> Option<u32> {
        match &self.threads {
            Targets::Processes(set) => set.contains(&tgid).then_some(tgid),
            Targets::Threads(set) => set.contains(&tid).then_some(tid),
            Targets::Command { root, .. } => {
                (tid != 0 && self.command_tgids.contains(&tgid)).then_some(*root)
            }
            _ => None,
        }
    }

    /// False when task `tid` of process `tgid` is none of the targets
    /// named (by process, thread or command); true when they are not named.
    pub(super) fn may_target(&self, tid: u32, tgid: u32) -> bool {
        match &self.threads {
            Targets::Processes(_) | Targets::Threads(_) | Targets::Command { .. } => {
                self.tally_key(tid, tgid).is_some()
            }
            _ => true,
        }
    }

    /// What is known of a thread: the table, then threads that exited, then
    /// the lookup (once per thread).
    fn task_info(&mut self, tid: u32) -> Option<TaskInfo> {
        if let Some(info) = self.tasks.tasks.get(&tid) {
            return Some(*info);
        }
        if let Some(info) = self.exited.get(&tid) {
            return Some(*info);
        }
        if self.unknown.contains(&tid) {
            return None;
        }
        match (self.lookup)(tid) {
            Some(mut info) => {
                // A comm an event gave is what the thread was called then;
                // /proc says what it is called now.
                if let Some(&comm) = self.seen_comms.get(&tid) {
                    info.comm = comm;
                }
                self.insert_task(tid, info);
                Some(info)
            }
            None => {
                self.unknown.insert(tid);
                None
            }
        }
    }

    fn is_kthread(&mut self, tid: u32, tgid: u32, stack: &Callchain) -> bool {
        if tid == 0 {
            return true;
        }
        match self.task_info(tid) {
            Some(info) => info.kthread,
            // Unknown to /proc too: a kernel thread is its own process and
            // never has user frames.
            None => tid == tgid && stack.user().is_empty(),
        }
    }

    /// True when task `tid` of process `tgid` is this process's or one of
    /// its helpers.
    pub(super) fn is_own(&self, tid: u32, tgid: u32) -> bool {
        self.own.as_ref().is_some_and(|own| own.contains(tid, tgid))
    }

    /// `named` is what [`Identity::tally_key`] said of that thread. The
    /// tool's own tasks never are, other runs' helpers included.
    pub(super) fn is_target(&mut self, s: &Switch, named: Option<u32>) -> bool {
        let task = Task {
            tid: s.prev_tid,
            tgid: s.prev_tgid,
            comm: s.prev_comm,
            stack: &s.stack,
            cgroup: s.prev_cgroup,
        };
        self.selects(task, named) && self.state.is_none_or(|state| state.matches(s.prev_state))
    }

    /// Whether the thread an on-CPU sample ran in, named `comm`, is a
    /// target (`--state` selects intervals, not samples).
    pub(super) fn samples_target(&mut self, s: &OnCpu, comm: Comm) -> bool {
        let named = self.tally_key(s.tid, s.tgid);
        let task = Task {
            tid: s.tid,
            tgid: s.tgid,
            comm,
            stack: &s.stack,
            cgroup: s.cgroup,
        };
        self.selects(task, named)
    }

    /// Whether the targets hold `t`, whatever its state.
    fn selects(&mut self, t: Task<'_>, named: Option<u32>) -> bool {
        if self
            .own
            .as_mut()
            .is_some_and(|own| own.holds(t.tid, t.tgid, t.comm.0))
        {
            return false;
        }
        match &self.threads {
            Targets::All => true,
            Targets::UserThreads => !self.is_kthread(t.tid, t.tgid, t.stack),
            Targets::KernelThreads => self.is_kthread(t.tid, t.tgid, t.stack),
            Targets::Processes(_) | Targets::Threads(_) | Targets::Command { .. } => {
                named.is_some()
            }
            Targets::Cgroups(targets) => t.cgroup.is_some_and(|id| {
                if let Some(&held) = self.in_targets.get(&id) {
                    return held;
                }
                // An id not named now (gone, or a listing not due yet)
                // is asked again.
                let Some(path) = self.cgroups.as_mut().and_then(|c| c.name(id)) else {
                    return false;
                };
                let held = targets.holds(&path);
                if self.in_targets.len() >= MAX_MEMBERSHIPS {
                    self.in_targets.clear();
                }
                self.in_targets.insert(id, held);
                held
            }),
        }
    }

    /// The paths of cgroups `ids`, for the report: those a listing of the
    /// hierarchy found, or the recording names (none when cgroups are not
    /// named).
    pub(super) fn cgroup_paths(
        &mut self,
        ids: impl IntoIterator<Item = u64>,
    ) -> FxHashMap<u64, CgroupPath> {
        let Some(names) = self.cgroups.as_mut() else {
            return FxHashMap::default();
        };
        ids.into_iter()
            .filter_map(|id| Some((id, names.name(id)?)))
            .collect()
    }

    /// Records the comm an event gave for `tid`: in the task table when
    /// the thread is there, else with the comms seen for threads it lacks.
    pub(super) fn learn_comm(&mut self, tid: u32, comm: Comm) {
        if tid == 0 {
            return;
        }
        match self.tasks.tasks.get_mut(&tid) {
            Some(info) => info.comm = comm,
            None => {
                self.seen_comms.insert(tid, comm);
            }
        }
    }

    /// Adds `tid` to the task table; what it says of the comm is now the
    /// latest, so an older one seen in events is forgotten.
    fn insert_task(&mut self, tid: u32, info: TaskInfo) {
        self.tasks.tasks.insert(tid, info);
        self.seen_comms.remove(&tid);
    }

    /// A thread's latest comm, for a switch-in or a wakeup whose event
    /// does not carry it: from the events that did (switches, wakeups,
    /// comm records) or the table, then a thread that exited, then
    /// `/proc`, and [`Comm::UNKNOWN`] when nothing knows it. Never empty
    /// for a thread seen in an event, even one missing from the table (started
    /// between the `/proc` scan and the start of tracing) and gone before
    /// the report.
    pub(super) fn comm_of(&mut self, tid: u32) -> Comm {
        if let Some(info) = self.tasks.tasks.get(&tid) {
            return info.comm;
        }
        if let Some(&comm) = self.seen_comms.get(&tid) {
            return comm;
        }
        self.task_info(tid)
            .map(|info| info.comm)
            .unwrap_or(Comm::UNKNOWN)
    }
}
