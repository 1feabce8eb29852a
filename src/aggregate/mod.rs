//! Pairing of switch-out, wakeup and switch-in events per thread into blocked
//! intervals, target filters, block-time limits, and interning of stacks.
//! Keeps raw addresses: nothing is symbolized here.

pub mod filter;
pub mod stacks;
pub mod tasks;

use std::collections::{HashMap, HashSet};

use crate::event::{Callchain, Comm, CommChange, Event, EventKind, Exit, Fork, Switch, Waking};

use stacks::StackInterner;
use tasks::KTHREADD_TID;

pub use filter::{StateFilter, ThreadFilter};
pub use stacks::{StackId, StackRef, StackTable, UserStack};
pub use tasks::{TaskInfo, TaskTable};

/// How to aggregate.
#[derive(Clone, Debug)]
pub struct Config {
    pub threads: ThreadFilter,
    pub state: Option<StateFilter>,
    /// Intervals shorter than this many microseconds are dropped.
    pub min_block_us: u64,
    /// Intervals longer than this many microseconds are dropped.
    pub max_block_us: u64,
    /// Most unique stacks kept (kernel and user together).
    pub stack_storage_size: usize,
    /// Keep kernel stacks (false under `-U`).
    pub kernel_stacks: bool,
    /// Keep user stacks (false under `-K`).
    pub user_stacks: bool,
}

/// What identifies one output entry (bcc's `key_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryKey {
    pub target_tid: u32,
    pub target_tgid: u32,
    /// The target's comm at switch-in.
    pub target_comm: Comm,
    /// 0 with an empty comm when there was no wakeup.
    pub waker_tid: u32,
    pub waker_tgid: u32,
    pub waker_comm: Comm,
    pub target_kernel: StackRef,
    pub target_user: StackRef,
    pub waker_kernel: StackRef,
    pub waker_user: StackRef,
}

/// One entry and its summed blocked time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: EntryKey,
    pub total_us: u64,
}

/// Counters for the end-of-run summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Intervals counted into an entry.
    pub intervals: u64,
    /// Intervals dropped by `-m`/`-M`.
    pub out_of_range: u64,
    /// Intervals discarded because a lost record could fall inside them.
    pub discarded_lost: u64,
    /// Lost records seen (sum of `Lost::records`).
    pub lost_records: u64,
    /// Stacks that did not fit in the stack storage.
    pub missed_stacks: u64,
}

/// The result of a run.
#[derive(Debug)]
pub struct Aggregate {
    pub entries: Vec<Entry>,
    pub stacks: StackTable,
    pub stats: Stats,
}

/// Looks up a thread the task table does not know (default:
/// [`TaskTable::read_proc_task`]).
pub type TaskLookup = Box<dyn FnMut(u32) -> Option<TaskInfo> + Send>;

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

/// The last wakeup of an open interval.
#[derive(Clone, Copy, Debug)]
struct Waker {
    tid: u32,
    tgid: u32,
    comm: Comm,
    kernel: StackRef,
    user: StackRef,
}

/// A target thread that switched out and has not switched back in.
#[derive(Clone, Copy, Debug)]
struct OpenInterval {
    start: u64,
    tgid: u32,
    kernel: StackRef,
    user: StackRef,
    waker: Option<Waker>,
    /// Value of `Aggregator::losses` when the interval opened: any later
    /// loss may fall inside it.
    losses_at_start: u64,
}

/// The pairing state machine.
pub struct Aggregator {
    config: Config,
    tasks: TaskTable,
    /// Threads that exited during the trace: a dying thread still switches
    /// out and wakes its parent after its exit record.
    exited: HashMap<u32, TaskInfo>,
    /// Threads the lookup did not find (not asked again).
    unknown: HashSet<u32>,
    lookup: TaskLookup,
    open: HashMap<ThreadKey, OpenInterval>,
    /// Target processes under `ThreadFilter::Command`.
    command_tgids: HashSet<u32>,
    stacks: StackInterner,
    entries: HashMap<EntryKey, u64>,
    stats: Stats,
    /// Number of `Lost` events seen so far.
    losses: u64,
}

impl Aggregator {
    pub fn new(config: Config, tasks: TaskTable) -> Aggregator {
        let stacks = StackInterner::new(config.stack_storage_size);
        Aggregator {
            config,
            tasks,
            exited: HashMap::new(),
            unknown: HashSet::new(),
            lookup: Box::new(TaskTable::read_proc_task),
            open: HashMap::new(),
            command_tgids: HashSet::new(),
            stacks,
            entries: HashMap::new(),
            stats: Stats::default(),
            losses: 0,
        }
    }

    /// Replaces how threads missing from the task table are looked up
    /// (tests use this to stay away from `/proc`).
    pub fn with_task_lookup(mut self, lookup: TaskLookup) -> Aggregator {
        self.lookup = lookup;
        self
    }

    /// Feeds one event; events must come in global time order.
    pub fn process(&mut self, event: &Event) {
        match &event.kind {
            EventKind::Switch(s) => self.on_switch(event.time, event.cpu, s),
            EventKind::Waking(w) => self.on_waking(event.time, event.cpu, w),
            EventKind::Fork(f) => self.on_fork(f),
            EventKind::Exit(e) => self.on_exit(e),
            EventKind::Comm(c) => self.on_comm(c),
            EventKind::Mmap(_) => {}
            EventKind::Lost(l) => {
                self.stats.lost_records = self.stats.lost_records.saturating_add(l.records);
                self.losses += 1;
            }
        }
    }

    pub fn finish(mut self) -> Aggregate {
        self.stats.missed_stacks = self.stacks.missed;
        Aggregate {
            entries: self
                .entries
                .into_iter()
                .map(|(key, total_us)| Entry { key, total_us })
                .collect(),
            stacks: self.stacks.into_table(),
            stats: self.stats,
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
            Some(info) => {
                self.tasks.tasks.insert(tid, info);
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
            None => tid == tgid && stack.user.is_empty(),
        }
    }

    fn is_target(&mut self, s: &Switch) -> bool {
        let selected = match &self.config.threads {
            ThreadFilter::All => true,
            ThreadFilter::Tgids(set) => set.contains(&s.prev_tgid),
            ThreadFilter::Tids(set) => set.contains(&s.prev_tid),
            ThreadFilter::UserThreads => !self.is_kthread(s.prev_tid, s.prev_tgid, &s.stack),
            ThreadFilter::KernelThreads => self.is_kthread(s.prev_tid, s.prev_tgid, &s.stack),
            ThreadFilter::Command { .. } => {
                s.prev_tid != 0 && self.command_tgids.contains(&s.prev_tgid)
            }
        };
        selected
            && self
                .config
                .state
                .is_none_or(|state| state.matches(s.prev_state))
    }

    fn intern(&mut self, tgid: u32, time: u64, stack: &Callchain) -> (StackRef, StackRef) {
        let kernel = if self.config.kernel_stacks {
            self.stacks.intern_kernel(&stack.kernel)
        } else {
            StackRef::Empty
        };
        let user = if self.config.user_stacks {
            self.stacks.intern_user(tgid, time, &stack.user)
        } else {
            StackRef::Empty
        };
        (kernel, user)
    }

    fn learn_comm(&mut self, tid: u32, comm: Comm) {
        if tid == 0 {
            return;
        }
        if let Some(info) = self.tasks.tasks.get_mut(&tid) {
            info.comm = comm;
        }
    }

    fn on_switch(&mut self, time: u64, cpu: u32, s: &Switch) {
        // Switch-in of next.
        let next_key = ThreadKey::new(s.next_tid, cpu);
        if let Some(open) = self.open.remove(&next_key) {
            self.close(time, s.next_tid, s.next_comm, open);
        }
        self.learn_comm(s.next_tid, s.next_comm);

        // Switch-out of prev.
        if s.prev_tid != 0
            && let Some(info) = self.tasks.tasks.get_mut(&s.prev_tid)
        {
            info.comm = s.prev_comm;
            info.tgid = s.prev_tgid;
        }
        let prev_key = ThreadKey::new(s.prev_tid, cpu);
        self.open.remove(&prev_key);
        if self.is_target(s) {
            let (kernel, user) = self.intern(s.prev_tgid, time, &s.stack);
            self.open.insert(
                prev_key,
                OpenInterval {
                    start: time,
                    tgid: s.prev_tgid,
                    kernel,
                    user,
                    waker: None,
                    losses_at_start: self.losses,
                },
            );
        }
    }

    fn close(&mut self, time: u64, tid: u32, comm: Comm, open: OpenInterval) {
        if open.losses_at_start != self.losses {
            self.stats.discarded_lost += 1;
            return;
        }
        let us = time.saturating_sub(open.start) / 1000;
        if us < self.config.min_block_us || us > self.config.max_block_us {
            self.stats.out_of_range += 1;
            return;
        }
        let waker = open.waker.unwrap_or(Waker {
            tid: 0,
            tgid: 0,
            comm: Comm::default(),
            kernel: StackRef::Empty,
            user: StackRef::Empty,
        });
        let key = EntryKey {
            target_tid: tid,
            target_tgid: open.tgid,
            target_comm: comm,
            waker_tid: waker.tid,
            waker_tgid: waker.tgid,
            waker_comm: waker.comm,
            target_kernel: open.kernel,
            target_user: open.user,
            waker_kernel: waker.kernel,
            waker_user: waker.user,
        };
        let total = self.entries.entry(key).or_insert(0);
        *total = total.saturating_add(us);
        self.stats.intervals += 1;
    }

    fn on_waking(&mut self, time: u64, cpu: u32, w: &Waking) {
        if w.wakee_tid == 0 {
            return;
        }
        self.learn_comm(w.wakee_tid, w.wakee_comm);
        let key = ThreadKey::new(w.wakee_tid, cpu);
        if !self.open.contains_key(&key) {
            return;
        }
        let comm = if w.waker_tid == 0 {
            Comm::from(format!("swapper/{cpu}").as_str())
        } else {
            self.task_info(w.waker_tid)
                .map(|info| info.comm)
                .unwrap_or_else(|| Comm::from("[unknown]"))
        };
        let (kernel, user) = self.intern(w.waker_tgid, time, &w.stack);
        if let Some(open) = self.open.get_mut(&key) {
            open.waker = Some(Waker {
                tid: w.waker_tid,
                tgid: w.waker_tgid,
                comm,
                kernel,
                user,
            });
        }
    }

    fn on_fork(&mut self, f: &Fork) {
        let comm = self
            .tasks
            .tasks
            .get(&f.parent_tid)
            .or_else(|| self.exited.get(&f.parent_tid))
            .map(|p| p.comm)
            .unwrap_or_default();
        self.tasks.tasks.insert(
            f.tid,
            TaskInfo {
                tgid: f.tgid,
                comm,
                kthread: f.parent_tid == KTHREADD_TID,
            },
        );
        self.exited.remove(&f.tid);
        self.unknown.remove(&f.tid);
        // A reused TID starts with no history.
        self.open.remove(&ThreadKey::new(f.tid, 0));
        if matches!(self.config.threads, ThreadFilter::Command { .. })
            && self.command_tgids.contains(&f.parent_tgid)
        {
            self.command_tgids.insert(f.tgid);
        }
    }

    fn on_exit(&mut self, e: &Exit) {
        if e.tid == 0 {
            return;
        }
        self.open.remove(&ThreadKey::new(e.tid, 0));
        if let Some(info) = self.tasks.tasks.remove(&e.tid) {
            self.exited.insert(e.tid, info);
        }
    }

    fn on_comm(&mut self, c: &CommChange) {
        if c.tid == 0 {
            return;
        }
        if c.exec {
            self.stacks.bump_generation(c.tgid);
            self.unknown.remove(&c.tid);
            self.tasks.tasks.insert(
                c.tid,
                TaskInfo {
                    tgid: c.tgid,
                    comm: c.comm,
                    kthread: false,
                },
            );
            if let ThreadFilter::Command { root } = self.config.threads
                && c.tgid == root
            {
                self.command_tgids.insert(root);
            }
        } else {
            self.learn_comm(c.tid, c.comm);
        }
    }
}
