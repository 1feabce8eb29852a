//! Target filters: which threads' intervals count (`-p`, `-t`, `-u`, `-k`,
//! `-- COMMAND`) and the `--state` filter over the reported task state.

use std::collections::HashSet;

use anyhow::Result;

/// Which threads are targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThreadFilter {
    All,
    /// `-p`: threads whose process (TGID) is in the set.
    Tgids(HashSet<u32>),
    /// `-t`: these threads.
    Tids(HashSet<u32>),
    /// `-u`: threads without PF_KTHREAD.
    UserThreads,
    /// `-k`: threads with PF_KTHREAD, idle tasks included.
    KernelThreads,
    /// `-- COMMAND`: the process `root` from its exec on, and every process
    /// it (transitively) forks.
    Command {
        root: u32,
    },
}

/// `--state N`, mapped onto the bits the tracepoint reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateFilter {
    /// 0 selects preempted/running intervals; otherwise a mask of reported
    /// bits, any of which selects.
    pub reported_mask: u64,
}

impl StateFilter {
    /// Maps the user's `--state N` to reported bits, or explains why N can
    /// never match.
    pub fn from_user(n: u64) -> Result<StateFilter> {
        let _ = n;
        todo!()
    }

    pub fn matches(&self, prev_state: u64) -> bool {
        let _ = prev_state;
        todo!()
    }
}
