//! Pairing of switch-out, wakeup and switch-in events per thread into blocked
//! intervals, target filters, block-time limits, and interning of stacks.
//! Keeps raw addresses: nothing is symbolized here.

pub mod filter;
pub mod stacks;
pub mod tasks;

use crate::event::{Comm, Event};

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

/// The pairing state machine.
pub struct Aggregator {}

impl Aggregator {
    pub fn new(config: Config, tasks: TaskTable) -> Aggregator {
        let _ = (config, tasks);
        todo!()
    }

    /// Feeds one event; events must come in global time order.
    pub fn process(&mut self, event: &Event) {
        let _ = event;
        todo!()
    }

    pub fn finish(self) -> Aggregate {
        todo!()
    }
}
