//! This process's own tasks: its threads (its process id) and the helper
//! processes it forks. They are never targets, and the report says so
//! when one of them wakes a traced thread, so that the tool's work is not
//! taken for the traced program's.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// The most helpers remembered (a run forks at most a few: the ftrace
/// instance's guardian, the ring grower, the holder of released events).
const MAX_HELPERS: usize = 8;

static HELPERS: [AtomicU32; MAX_HELPERS] = [const { AtomicU32::new(0) }; MAX_HELPERS];
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Remembers `pid`, a process this one forked, as one of its own.
pub(crate) fn add_helper(pid: u32) {
    let i = COUNT.fetch_add(1, Ordering::AcqRel);
    match HELPERS.get(i) {
        Some(slot) => slot.store(pid, Ordering::Release),
        None => {
            COUNT.store(MAX_HELPERS, Ordering::Release);
        }
    }
}

/// True when `pid` is a helper this process forked.
pub(crate) fn is_helper(pid: u32) -> bool {
    let n = COUNT.load(Ordering::Acquire).min(MAX_HELPERS);
    pid != 0
        && HELPERS[..n]
            .iter()
            .any(|slot| slot.load(Ordering::Acquire) == pid)
}

/// The pids of the tasks that are this process's own now: its threads
/// and its helpers.
pub(crate) fn tasks_now() -> Vec<u32> {
    let mut pids = super::proc::threads_of(std::process::id());
    let n = COUNT.load(Ordering::Acquire).min(MAX_HELPERS);
    pids.extend(HELPERS[..n].iter().map(|slot| slot.load(Ordering::Acquire)));
    pids.retain(|&p| p != 0);
    pids.sort_unstable();
    pids.dedup();
    pids
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
        let pid = u32::MAX - 7;
        assert!(!is_helper(pid));
        add_helper(pid);
        assert!(is_helper(pid));
        assert!(!is_helper(0));
        let now = tasks_now();
        assert!(
            now.contains(&pid) && now.contains(&std::process::id()),
            "{now:?}"
        );
    }
}
