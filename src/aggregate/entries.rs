//! The entries counted so far and the chains they refer to, bounded.
//!
//! Keys hold thread ids, so threads that wake each other at random make
//! as many entries (and with `--chain`, chains) as pairs (and sequences)
//! of threads. When either table reaches its cap, every entry and chain is
//! merged by process once (thread ids become their process's id), and
//! later intervals are counted that way: the folded report, which shows no
//! ids, is unchanged. Past a cap even then (a machine that starts short
//! processes all day: each is a new pid), they are merged by command once
//! (every id becomes 0). Past the cap even then, a new chain is replaced
//! by the marker [`ChainEnd::NotKept`], and an interval that would make a
//! new entry is counted without its stacks (printed as missed, as bcc
//! prints stacks that did not fit), in a reserve of an eighth of the cap;
//! past that, it is dropped. All are counted for the end-of-run warnings.

use rustc_hash::FxHashMap;

use crate::report::ChainEnd;

use super::chain::{ChainId, ChainTable, Level, MAX_LEVELS, with_wakers};
use super::{Entry, EntryKey, StackRef};

/// Most distinct entries kept, and chains, at `--chain 1`; with N levels,
/// an Nth of it: every level of an entry is a part of its report.
pub(crate) const MAX_ENTRIES: usize = 1 << 16;

/// What an entry sums.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sums {
    pub(crate) total_us: u64,
    pub(crate) overlap_us: [u64; MAX_LEVELS - 1],
}

impl Sums {
    fn add(&mut self, total_us: u64, overlap_us: &[u64; MAX_LEVELS - 1]) {
        self.total_us = self.total_us.saturating_add(total_us);
        for (sum, us) in self.overlap_us.iter_mut().zip(overlap_us) {
            *sum = sum.saturating_add(*us);
        }
    }
}

/// What the bounds cost a run, for its WARNING and NOTE lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounded {
    /// Entries were merged by process, at these caps on distinct entries
    /// and chains (the later losses are past them too).
    pub(crate) merged: Option<(usize, usize)>,
    /// Then by command, at the same caps.
    pub(crate) by_command: bool,
    /// Intervals not counted: their entry would have been a new one past
    /// the cap, even merged by command; and their microseconds.
    pub(crate) dropped: u64,
    pub(crate) dropped_us: u64,
    /// Intervals counted without their stacks (each printed as missed):
    /// their entry would have been a new one past the cap, even merged by
    /// command; and their microseconds.
    pub(crate) stripped: u64,
    pub(crate) stripped_us: u64,
    /// Intervals counted with [`ChainEnd::NotKept`] in place of a chain
    /// that would have been a new one past the cap, even merged by
    /// command.
    pub(crate) chains_not_kept: u64,
}

/// How far the entries were merged to stay within the caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Merged {
    /// Not: keys name threads.
    No,
    /// Keys and chains name processes, not threads.
    ByProcess,
    /// Keys and chains name no thread or process: each id is 0. Each short
    /// process of a busy machine is a new pid; commands are few.
    ByCommand,
}

/// The entries and chains, each at most its cap.
#[derive(Debug)]
pub(crate) struct Entries {
    entries: FxHashMap<EntryKey, Sums>,
    chains: ChainTable,
    max_entries: usize,
    max_chains: usize,
    /// How far keys and chains were merged.
    merged: Merged,
    pub(crate) bounded: Bounded,
}

impl Entries {
    /// The entries of chains of `levels` levels, the first included.
    pub(crate) fn for_levels(levels: usize) -> Entries {
        let cap = MAX_ENTRIES / levels.max(1);
        Entries::new(cap, cap)
    }

    pub(crate) fn new(max_entries: usize, max_chains: usize) -> Entries {
        Entries {
            entries: FxHashMap::default(),
            chains: ChainTable::default(),
            max_entries,
            max_chains,
            merged: Merged::No,
            bounded: Bounded::default(),
        }
    }

    /// Counts an interval of `us` microseconds under `key` (its `chain`
    /// ignored) with the chain `levels`, which overlapped it by
    /// `overlap_us`. Past every merge, an interval that would make a new
    /// entry is counted without its stacks (see [`Bounded::stripped`]), in
    /// a reserve of an eighth of the cap. False when even that did not fit
    /// and it was dropped (see [`Bounded::dropped`]).
    pub(crate) fn add(
        &mut self,
        key: EntryKey,
        levels: Vec<Level>,
        us: u64,
        overlap_us: &[u64; MAX_LEVELS - 1],
    ) -> bool {
        let (mut key, mut levels) = (key, levels);
        let mut stripped = false;
        loop {
            // Merged levels are built anew; the last merge takes `levels`.
            let merged;
            let (merged_key, chain_levels) = match self.merged {
                Merged::No => (key, &levels),
                Merged::ByProcess => {
                    merged = by_process(levels.clone());
                    (key.by_process(), &merged)
                }
                Merged::ByCommand => {
                    merged = by_command(std::mem::take(&mut levels));
                    (key.by_command(), &merged)
                }
            };
            // Past every merge, a chain that does not fit is a marker.
            let chain = match self.chains.id(chain_levels) {
                Some(id) => Some((id, *overlap_us)),
                None if self.chains.len() < self.max_chains => {
                    Some((self.chains.intern(chain_levels.clone()), *overlap_us))
                }
                None if self.merged == Merged::ByCommand => {
                    self.bounded.chains_not_kept += 1;
                    let id = self.chains.intern(vec![Level::End(ChainEnd::NotKept)]);
                    Some((id, [0; MAX_LEVELS - 1]))
                }
                None => None,
            };
            if let Some((chain, overlap_us)) = chain {
                let key = EntryKey {
                    chain,
                    ..merged_key
                };
                if let Some(sums) = self.entries.get_mut(&key) {
                    sums.add(us, &overlap_us);
                    return true;
                }
                let room = match stripped {
                    false => self.max_entries,
                    true => self.max_entries + self.max_entries / 8,
                };
                if self.entries.len() < room {
                    self.entries.entry(key).or_default().add(us, &overlap_us);
                    return true;
                }
            }
            match self.merged {
                Merged::No => self.merge(Merged::ByProcess),
                Merged::ByProcess => self.merge(Merged::ByCommand),
                Merged::ByCommand if !stripped && key.has_stacks() => {
                    stripped = true;
                    self.bounded.stripped += 1;
                    self.bounded.stripped_us = self.bounded.stripped_us.saturating_add(us);
                    key = key.without_stacks();
                    levels = Vec::new();
                }
                Merged::ByCommand => {
                    if stripped {
                        self.bounded.stripped -= 1;
                        self.bounded.stripped_us = self.bounded.stripped_us.saturating_sub(us);
                    }
                    self.bounded.dropped += 1;
                    self.bounded.dropped_us = self.bounded.dropped_us.saturating_add(us);
                    return false;
                }
            }
        }
    }

    /// Merges every entry and chain by process, or by command, once.
    fn merge(&mut self, how: Merged) {
        self.bounded.merged = Some((self.max_entries, self.max_chains));
        self.merged = how;
        match how {
            Merged::No => {}
            Merged::ByProcess => self.rekey(by_process, EntryKey::by_process),
            Merged::ByCommand => {
                self.bounded.by_command = true;
                self.rekey(by_command, EntryKey::by_command);
            }
        }
    }

    /// Rewrites every chain's levels with `level` and every key with
    /// `key`, summing what then reads the same.
    pub(crate) fn rekey(
        &mut self,
        level: impl Fn(Vec<Level>) -> Vec<Level>,
        key: impl Fn(EntryKey) -> EntryKey,
    ) {
        let mut chains = ChainTable::default();
        let ids: Vec<ChainId> = std::mem::take(&mut self.chains)
            .into_chains()
            .into_iter()
            .map(|levels| chains.intern(level(levels)))
            .collect();
        self.chains = chains;
        let mut entries = FxHashMap::default();
        for (k, sums) in std::mem::take(&mut self.entries) {
            let k = EntryKey {
                chain: ids.get(k.chain as usize).copied().unwrap_or(0),
                ..key(k)
            };
            entries
                .entry(k)
                .or_insert_with(Sums::default)
                .add(sums.total_us, &sums.overlap_us);
        }
        self.entries = entries;
    }

    /// Every key.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &EntryKey> {
        self.entries.keys()
    }

    /// Distinct entries so far.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when entries or chains fill seven eighths of their caps.
    pub(crate) fn nearly_full(&self) -> bool {
        let near = |n: usize, cap: usize| n >= cap - cap / 8;
        near(self.entries.len(), self.max_entries) || near(self.chains.len(), self.max_chains)
    }

    /// The entries, and the chains by [`EntryKey::chain`].
    pub(crate) fn into_parts(self) -> (Vec<Entry>, Vec<Vec<Level>>) {
        let entries = self
            .entries
            .into_iter()
            .map(|(key, sums)| Entry {
                key,
                total_us: sums.total_us,
                overlap_us: sums.overlap_us,
            })
            .collect();
        (entries, self.chains.into_chains())
    }
}

/// `levels` with each waker's thread id replaced by its process's.
fn by_process(levels: Vec<Level>) -> Vec<Level> {
    with_wakers(levels, |waker| waker.tid = waker.tgid)
}

/// `levels` with each waker's ids 0.
fn by_command(levels: Vec<Level>) -> Vec<Level> {
    with_wakers(levels, |waker| {
        waker.tid = 0;
        waker.tgid = 0;
    })
}

impl EntryKey {
    /// The key with each thread id replaced by its process's.
    fn by_process(self) -> EntryKey {
        EntryKey {
            target_tid: self.target_tgid,
            waker_tid: self.waker_tgid,
            ..self
        }
    }

    /// True when some stack of the key was stored.
    fn has_stacks(&self) -> bool {
        [
            self.target_kernel,
            self.target_user,
            self.waker_kernel,
            self.waker_user,
        ]
        .iter()
        .any(|r| !matches!(r, StackRef::Empty | StackRef::Missed))
    }

    /// The key with each stored stack printed as missed.
    fn without_stacks(self) -> EntryKey {
        let missed = |r: StackRef| match r {
            StackRef::Empty => r,
            _ => StackRef::Missed,
        };
        EntryKey {
            target_kernel: missed(self.target_kernel),
            target_user: missed(self.target_user),
            waker_kernel: missed(self.waker_kernel),
            waker_user: missed(self.waker_user),
            ..self
        }
    }

    /// The key with every thread and process id 0.
    fn by_command(self) -> EntryKey {
        EntryKey {
            target_tid: 0,
            target_tgid: 0,
            waker_tid: 0,
            waker_tgid: 0,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{StackRef, WakerKey};
    use crate::event::{Comm, WakeContext};

    fn key(target: u32, waker: u32) -> EntryKey {
        EntryKey {
            target_tid: target,
            target_tgid: target / 100 * 100,
            target_comm: Comm::from("t"),
            waker_tid: waker,
            waker_tgid: waker / 100 * 100,
            waker_comm: Comm::from("w"),
            waker_context: WakeContext::Task,
            target_kernel: StackRef::Empty,
            target_user: StackRef::Empty,
            waker_kernel: StackRef::Empty,
            waker_user: StackRef::Empty,
            chain: 0,
            cgroup: 0,
        }
    }

    /// A chain of one level, woken by thread `waker` of process `waker / 100 * 100`.
    fn woken_by(waker: u32) -> Vec<Level> {
        vec![Level::Waited {
            kernel: StackRef::Empty,
            user: StackRef::Empty,
            waker: WakerKey {
                tid: waker,
                tgid: waker / 100 * 100,
                comm: Comm::from("w"),
                ..WakerKey::NONE
            },
        }]
    }

    const NO_OVERLAP: [u64; MAX_LEVELS - 1] = [0; MAX_LEVELS - 1];

    fn total(e: Entries) -> u64 {
        e.into_parts().0.iter().map(|e| e.total_us).sum()
    }

    #[test]
    fn entries_past_the_cap_merge_every_entry_by_process() {
        let mut e = Entries::new(3, 100);
        for (t, w) in [(101, 201), (102, 201), (101, 202)] {
            assert!(e.add(key(t, w), Vec::new(), 10, &NO_OVERLAP));
        }
        assert_eq!(e.bounded.merged, None);
        // A fourth: all four are one entry of process 100 woken by 200.
        assert!(e.add(key(103, 203), Vec::new(), 10, &NO_OVERLAP));
        assert!(e.bounded.merged.is_some());
        assert_eq!(e.len(), 1);
        let k = *e.keys().next().unwrap();
        assert_eq!((k.target_tid, k.waker_tid), (100, 200));
        // Later threads too.
        assert!(e.add(key(104, 204), Vec::new(), 10, &NO_OVERLAP));
        assert_eq!(e.len(), 1);
        assert_eq!(e.bounded.dropped, 0);
        assert_eq!(total(e), 50);
    }

    /// [`key`] of commands `t` and `w`.
    fn named(target: u32, waker: u32, t: &str, w: &str) -> EntryKey {
        EntryKey {
            target_comm: Comm::from(t),
            waker_comm: Comm::from(w),
            ..key(target, waker)
        }
    }

    #[test]
    fn past_every_merge_an_interval_is_counted_without_its_stacks() {
        let mut e = Entries::new(8, 100);
        let with = |stack: u32, tid: u32, t: &str| EntryKey {
            target_user: StackRef::User(stack),
            ..named(tid, 900, t, "w")
        };
        for n in 0..8 {
            assert!(e.add(with(n, 100 + n, "a"), Vec::new(), 10, &NO_OVERLAP));
        }
        // A ninth stack, even merged by command: counted without its stacks,
        // in the reserve (an eighth of 8).
        assert!(e.add(with(8, 200, "a"), Vec::new(), 5, &NO_OVERLAP));
        assert!(e.bounded.by_command);
        let b = e.bounded;
        assert_eq!((b.stripped, b.stripped_us, b.dropped), (1, 5, 0));
        assert!(e.add(with(9, 201, "a"), Vec::new(), 6, &NO_OVERLAP));
        assert_eq!(e.len(), 9);
        // Past the reserve: dropped.
        assert!(!e.add(with(10, 202, "b"), Vec::new(), 7, &NO_OVERLAP));
        let b = e.bounded;
        assert_eq!(
            (b.stripped, b.stripped_us, b.dropped, b.dropped_us),
            (2, 11, 1, 7)
        );
        let (entries, _) = e.into_parts();
        let missed = entries
            .iter()
            .find(|e| e.key.target_user == StackRef::Missed)
            .map(|e| e.total_us);
        assert_eq!(missed, Some(11));
    }

    #[test]
    fn entries_past_the_cap_merge_by_process_then_by_command() {
        let mut e = Entries::new(2, 100);
        assert!(e.add(named(101, 201, "a", "w"), Vec::new(), 10, &NO_OVERLAP));
        assert!(e.add(named(301, 401, "a", "w"), Vec::new(), 10, &NO_OVERLAP));
        // Merged by process, still three processes' pairs: merged by
        // command, one entry.
        assert!(e.add(named(501, 601, "a", "w"), Vec::new(), 10, &NO_OVERLAP));
        assert!(e.bounded.merged.is_some() && e.bounded.by_command);
        assert_eq!(e.len(), 1);
        let k = *e.keys().next().unwrap();
        assert_eq!(
            (k.target_tid, k.target_tgid, k.waker_tid, k.waker_tgid),
            (0, 0, 0, 0)
        );
        assert_eq!(e.bounded.dropped, 0);
        assert_eq!(total(e), 30);
    }

    #[test]
    fn entries_past_the_cap_when_merged_by_command_are_dropped_and_counted() {
        let mut e = Entries::new(2, 100);
        assert!(e.add(named(101, 201, "a", "w"), Vec::new(), 10, &NO_OVERLAP));
        assert!(e.add(named(301, 401, "b", "w"), Vec::new(), 10, &NO_OVERLAP));
        assert!(!e.add(named(501, 601, "c", "w"), Vec::new(), 10, &NO_OVERLAP));
        // Merged, and still three commands' pairs: the third did not fit.
        assert!(e.bounded.by_command);
        assert_eq!(e.len(), 2);
        assert_eq!((e.bounded.dropped, e.bounded.dropped_us), (1, 10));
        // A known pair still counts, whatever its ids.
        assert!(e.add(named(102, 202, "a", "w"), Vec::new(), 5, &NO_OVERLAP));
        assert!(!e.add(named(701, 801, "d", "w"), Vec::new(), 7, &NO_OVERLAP));
        assert_eq!((e.bounded.dropped, e.bounded.dropped_us), (2, 17));
        assert_eq!(total(e), 25);
    }

    /// A chain of one level, woken by thread `waker` of command `comm`.
    fn woken_by_named(waker: u32, comm: &str) -> Vec<Level> {
        with_wakers(woken_by(waker), |w| w.comm = Comm::from(comm))
    }

    #[test]
    fn chains_past_the_cap_merge_by_process_then_by_command_then_are_not_kept() {
        // The empty chain and two more.
        let mut e = Entries::new(100, 3);
        let overlap = [4; MAX_LEVELS - 1];
        assert!(e.add(key(101, 201), woken_by_named(301, "a"), 10, &overlap));
        assert!(e.add(key(101, 201), woken_by_named(302, "a"), 10, &overlap));
        assert_eq!(e.bounded.merged, None);
        assert!(e.add(key(101, 201), woken_by_named(303, "a"), 10, &overlap));
        assert!(e.bounded.merged.is_some() && !e.bounded.by_command);
        assert_eq!(e.len(), 1);
        // Merged by process, they are one chain: another process's waker
        // still fits; a third's merges them by command.
        assert!(e.add(key(101, 201), woken_by_named(401, "b"), 10, &overlap));
        assert!(e.add(key(101, 201), woken_by_named(501, "b"), 10, &overlap));
        assert!(e.bounded.by_command);
        assert_eq!(e.bounded.chains_not_kept, 0);
        // A third command's chain does not fit: not kept, still counted.
        assert!(e.add(key(102, 202), woken_by_named(502, "c"), 10, &overlap));
        assert_eq!(e.bounded.chains_not_kept, 1);
        let (entries, chains) = e.into_parts();
        assert_eq!(entries.len(), 3);
        for entry in &entries {
            match chains[entry.key.chain as usize][..] {
                [Level::Waited { waker, .. }] if waker.comm == Comm::from("a") => {
                    assert_eq!(waker.tid, 0);
                    assert_eq!((entry.total_us, entry.overlap_us[0]), (30, 12));
                }
                [Level::Waited { waker, .. }] => {
                    assert_eq!((waker.tid, waker.comm), (0, Comm::from("b")));
                    assert_eq!((entry.total_us, entry.overlap_us[0]), (20, 8));
                }
                [Level::End(ChainEnd::NotKept)] => {
                    assert_eq!((entry.total_us, entry.overlap_us[0]), (10, 0));
                }
                ref other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_chain_is_stored_once_and_found_by_content() {
        let mut t = ChainTable::default();
        let a = t.intern(woken_by(301));
        assert_eq!(t.intern(woken_by(301)), a);
        assert_eq!(t.id(&woken_by(301)), Some(a));
        assert_eq!(t.id(&woken_by(302)), None);
        assert_eq!(t.id(&[]), Some(0));
        assert_eq!(t.intern(Vec::new()), 0);
        let b = t.intern(woken_by(302));
        assert_ne!(a, b);
        assert_eq!(t.len(), 3);
        assert_eq!(t.into_chains()[b as usize], woken_by(302));
    }
}
