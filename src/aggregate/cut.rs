//! Reports cut from a run that goes on (`--interval`), and the last one:
//! what was counted since the last cut, with the stacks it uses.

use rustc_hash::FxHashSet;

use super::entries::Entries;
use super::{Aggregate, Aggregator, Comm, EntryKey, Level, StackTable, with_wakers};

impl Aggregator {
    /// The report of what was counted since the last cut (or the start):
    /// its entries, the stacks they use and its counters. Counting goes on
    /// afresh; intervals still open are counted in the report of their
    /// end.
    pub(crate) fn cut(&mut self) -> Aggregate {
        let entries = std::mem::replace(&mut self.entries, Entries::for_levels(self.depth));
        let mut report = self.report(entries);
        let keys = report.entries.iter().flat_map(|e| {
            let k = &e.key;
            [k.target_kernel, k.target_user, k.waker_kernel, k.waker_user]
        });
        let levels = report
            .chains
            .iter()
            .flatten()
            .flat_map(|level| match *level {
                Level::Waited {
                    kernel,
                    user,
                    waker,
                } => vec![kernel, user, waker.kernel, waker.user],
                _ => Vec::new(),
            });
        report.stacks = self.stacks.table_for(keys.chain(levels));
        report
    }

    pub(crate) fn finish(mut self) -> Aggregate {
        let entries = std::mem::replace(&mut self.entries, Entries::for_levels(0));
        let mut report = self.report(entries);
        report.stacks = self.stacks.into_table();
        report
    }

    /// The report of `entries` and the counters since the last one, its
    /// stacks left to the caller.
    fn report(&mut self, mut entries: Entries) -> Aggregate {
        let mut stats = std::mem::take(&mut self.stats);
        stats.missed_stacks = self.stacks.missed - self.missed_reported;
        self.missed_reported = self.stacks.missed;
        let quiet = self.identity.quiet_targets();
        let ids: FxHashSet<u64> = entries.keys().map(|k| k.cgroup).collect();
        let cgroups = self
            .identity
            .cgroup_paths(ids.into_iter().filter(|&id| id != 0));
        // A waker that had not been seen when it woke (running since before
        // tracing, gone before /proc could say) may have shown its comm
        // later, in its own switches.
        let identity = &self.identity;
        // (Ids merged by command are 0: no thread of theirs to ask.)
        let named = |comm: Comm, tid: u32| match identity.seen_comm(tid) {
            Some(seen) if comm == Comm::UNKNOWN && tid != 0 => seen,
            _ => comm,
        };
        entries.rekey(
            |levels| with_wakers(levels, |waker| waker.comm = named(waker.comm, waker.tid)),
            |key| EntryKey {
                waker_comm: named(key.waker_comm, key.waker_tid),
                ..key
            },
        );
        stats.bounded = entries.bounded;
        let (entries, chains) = entries.into_parts();
        Aggregate {
            entries,
            stacks: StackTable::default(),
            chains,
            stats,
            quiet,
            cgroups: self.split_cgroups.then_some(cgroups),
            ns_tids: self.ns_tids.differing(),
        }
    }
}
