//! This process's own tasks: its threads (its process id) and the helper
//! processes it forks. They are never targets, and the report says so
//! when one of them wakes a traced thread, so that the tool's work is not
//! taken for the traced program's.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// The most helpers remembered (a run forks a few: the ftrace instance's
/// guardian, the holder of released events).
const MAX_HELPERS: usize = 32;

/// The helper pids, written once each, read from any thread without a lock.
struct Registry {
    slots: [AtomicU32; MAX_HELPERS],
    count: AtomicUsize,
}

impl Registry {
    const fn new() -> Registry {
        Registry {
            slots: [const { AtomicU32::new(0) }; MAX_HELPERS],
            count: AtomicUsize::new(0),
        }
    }

    fn add(&self, pid: u32) {
        let i = self.count.fetch_add(1, Ordering::AcqRel);
        match self.slots.get(i) {
            Some(slot) => slot.store(pid, Ordering::Release),
            None => self.count.store(MAX_HELPERS, Ordering::Release),
        }
    }

    fn filled(&self) -> &[AtomicU32] {
        &self.slots[..self.count.load(Ordering::Acquire).min(MAX_HELPERS)]
    }

    /// This process's threads and the helpers remembered.
    fn tasks_now(&self) -> Vec<u32> {
        let mut pids = super::proc::threads_of(std::process::id());
        pids.extend(self.filled().iter().map(|s| s.load(Ordering::Acquire)));
        pids.retain(|&p| p != 0);
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn contains(&self, pid: u32) -> bool {
        pid != 0
            && self
                .filled()
                .iter()
                .any(|slot| slot.load(Ordering::Acquire) == pid)
    }
}

static HELPERS: Registry = Registry::new();

/// Remembers `pid`, a process this one forked, as one of its own.
pub(crate) fn add_helper(pid: u32) {
    HELPERS.add(pid);
}

/// True when `pid` is a helper this process forked.
pub(crate) fn is_helper(pid: u32) -> bool {
    HELPERS.contains(pid)
}

/// The pids of the tasks that are this process's own now: its threads
/// and its helpers.
pub(crate) fn tasks_now() -> Vec<u32> {
    HELPERS.tasks_now()
}

/// Which tasks are the tool's own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnTasks {
    /// This process: every thread with this process id.
    pub(crate) tgid: u32,
    /// Whether a process id is one of its helpers.
    pub(crate) helper: fn(u32) -> bool,
}

impl OwnTasks {
    /// This process and the helpers it forks.
    pub(crate) fn of_this_process() -> OwnTasks {
        OwnTasks {
            tgid: std::process::id(),
            helper: is_helper,
        }
    }

    /// True when the task `tid` of process `tgid` is one of them.
    pub(crate) fn contains(&self, tid: u32, tgid: u32) -> bool {
        tid != 0 && (tgid == self.tgid || (self.helper)(tgid) || (self.helper)(tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_and_helpers_are_own_tasks() {
        let own = OwnTasks {
            tgid: 100,
            helper: |pid| pid == 300,
        };
        assert!(own.contains(100, 100));
        assert!(own.contains(101, 100));
        assert!(own.contains(300, 300));
        assert!(!own.contains(200, 200));
        // The idle tasks are no one's.
        assert!(!own.contains(0, 0));
        assert!(!OwnTasks { tgid: 0, ..own }.contains(0, 0));
    }

    #[test]
    fn helpers_are_remembered() {
        // A registry of its own: the tests of other modules fork helpers.
        let helpers = Registry::new();
        let pid = u32::MAX - 7;
        assert!(!helpers.contains(pid));
        helpers.add(pid);
        assert!(helpers.contains(pid));
        assert!(!helpers.contains(0));
        for p in 1..=MAX_HELPERS as u32 + 2 {
            helpers.add(p);
        }
        assert!(helpers.contains(pid) && helpers.contains(1));
        assert_eq!(helpers.filled().len(), MAX_HELPERS);
        let now = helpers.tasks_now();
        assert!(
            now.contains(&pid) && now.contains(&std::process::id()),
            "{now:?}"
        );
        let now = tasks_now();
        assert!(now.contains(&std::process::id()), "{now:?}");
    }
}
