//! Reports cut from a run that goes on (`--interval`), and the last one:
//! what was counted since the last cut, with the stacks it uses.

use rustc_hash::FxHashSet;

use super::entries::Entries;
use super::{Aggregate, Aggregator, Comm, EntryKey, StackTable, with_wakers};

impl Aggregator {
    /// The report of what was counted since the last cut (or the start):
    /// its entries, the stacks they use and its counters. Counting goes on
    /// afresh; intervals still open are counted in the report of their
    /// end.
    ///
    /// The stack storage starts afresh too, so that a long run's memory
    /// follows the stacks of one interval: the report takes the stacks
    /// stored so far, and those of intervals still open (or kept for
    /// chains) are stored again.
    pub(crate) fn cut(&mut self) -> Aggregate {
        let entries = std::mem::replace(&mut self.entries, Entries::for_levels(self.depth));
        let mut report = self.report(entries);
        let old = self.stacks.renew();
        let stacks = &mut self.stacks;
        let mut carry = |r| stacks.carry(&old, r);
        for open in self.open.values_mut() {
            open.kernel = carry(open.kernel);
            open.user = carry(open.user);
            for (_, w) in open.first_waker.iter_mut().chain(open.waker.iter_mut()) {
                w.map_stacks(&mut carry);
            }
        }
        if let Some(h) = self.history.as_mut() {
            h.map_stacks(&mut carry);
        }
        report.stacks = old;
        self.stored_at_cut = self.stacks.len();
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
