//! The tracefs backend's `--cgroup`: ftrace cannot filter events by
//! cgroup, so every thread is recorded and each switch-out is given the
//! cgroup its thread is in, read from `/proc/TID/cgroup` when the thread
//! is first seen and again once a second while it keeps switching (which
//! sees a thread moved from one cgroup to another within a second), and
//! after its exec; the kernel's `cgroup_attach_task` event tells a move at
//! once. A task created during tracing starts in its parent's
//! cgroup, from the process-creation events recorded for this, which is
//! kept for a task gone before it could be read. A thread whose cgroup is
//! not known at all is counted, and the report says so.

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::event::{Event, EventKind};
use crate::sys::cgroup::{self, Hierarchy};

/// How long a thread's cgroup is taken as read.
const FRESH: Duration = Duration::from_secs(1);

/// Most threads remembered; past it the memory starts over (each is read
/// again when next seen).
const MAX_THREADS: usize = 1 << 18;

/// What is known of a thread's cgroup.
#[derive(Clone, Copy, Debug)]
struct Known {
    id: Option<u64>,
    when: Instant,
    /// Not read from `/proc` since it may have changed: its parent's at
    /// its creation, or what it was before its exec (a container's first
    /// process moves, then execs). Read again at its next switch-out, and
    /// kept only if that fails (the task is gone).
    stale: bool,
}

/// The cgroups of the threads seen, as recently read.
pub(crate) struct TaskCgroups {
    hierarchy: Hierarchy,
    /// Per thread: its cgroup id (`None`: none could be read), when, and
    /// whether it is to be read again ([`Known::stale`]).
    read: FxHashMap<u32, Known>,
    /// Switch-outs whose thread's cgroup could not be read.
    unread: u64,
    /// The hierarchy's number in `/proc/PID/cgroup`, which moves name.
    root: Option<u32>,
}

impl TaskCgroups {
    pub(crate) fn new(hierarchy: Hierarchy) -> TaskCgroups {
        TaskCgroups {
            root: cgroup::hierarchy_number(&hierarchy),
            hierarchy,
            read: FxHashMap::default(),
            unread: 0,
        }
    }

    /// Gives a switch-out the cgroup of the thread leaving; a task created
    /// starts in its parent's cgroup (read now, while the parent likely
    /// lives, for a child that may be gone before the next round).
    pub(crate) fn tag(&mut self, ev: &mut Event) {
        match &mut ev.kind {
            EventKind::Switch(s) if s.prev_tid != 0 => {
                s.prev_cgroup = self.of(s.prev_tid, s.prev_tgid);
                if s.prev_cgroup.is_none() {
                    self.unread += 1;
                }
            }
            EventKind::Fork(f) => {
                let parent = self.of(f.parent_tid, f.parent_tgid);
                if parent.is_some() && !self.read.contains_key(&f.tid) {
                    self.remember(f.tid, parent, true);
                }
            }
            // A process moved into a cgroup often then execs (a service's
            // or a container's first process): read it again.
            EventKind::Comm(c) if c.exec => {
                if let Some(k) = self.read.get_mut(&c.tid) {
                    k.stale = true;
                }
            }
            EventKind::CgroupMove(m) if Some(m.root) == self.root => {
                self.remember(m.tid, Some(m.id), false);
            }
            _ => {}
        }
    }

    /// The cgroup id of thread `tid` of process `tgid`: the thread's, or
    /// its process's when the thread is gone.
    fn of(&mut self, tid: u32, tgid: u32) -> Option<u64> {
        let known = self.read.get(&tid).copied();
        if let Some(k) = known
            && !k.stale
            && k.when.elapsed() < FRESH
        {
            return k.id;
        }
        let h = &self.hierarchy;
        let read = cgroup::of_task(h, tid).and_then(|rel| cgroup::id_of(h, &rel));
        if read.is_some() {
            self.remember(tid, read, false);
            return read;
        }
        // Gone (events are tagged a round after they happen, so often
        // after the thread's exit): the cgroup it was last known in, else
        // its process's. Either is kept for FRESH, so that a file that
        // cannot be read is not read again at every switch.
        if let Some(id) = known.and_then(|k| k.id) {
            self.remember(tid, Some(id), false);
            return Some(id);
        }
        let id = (tgid != 0 && tgid != tid)
            .then(|| cgroup::id_of(h, &cgroup::of_task(h, tgid)?))
            .flatten();
        // A thread not read is not asked again before FRESH either: it is
        // gone, or its cgroup is.
        self.remember(tid, id, false);
        id
    }

    fn remember(&mut self, tid: u32, id: Option<u64>, stale: bool) {
        if self.read.len() >= MAX_THREADS {
            self.read.clear();
        }
        let when = Instant::now();
        self.read.insert(tid, Known { id, when, stale });
    }

    /// What the report should say of the switch-outs left without a
    /// cgroup.
    pub(crate) fn note(&self) -> Option<String> {
        (self.unread > 0).then(|| {
            format!(
                "NOTE: the tracefs backend reads each thread's cgroup from /proc: {} of \
                 threads gone before it could be read are counted for no cgroup \
                 (--cgroup leaves them out)",
                crate::diag::counted(self.unread, "switch-out", "switch-outs")
            )
        })
    }
}
