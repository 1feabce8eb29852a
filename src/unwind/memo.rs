//! Unwinds remembered by what they read, so that a stack unwound once is
//! not copied or unwound again.
//!
//! DWARF unwinding is a function of the registers (IP, SP, BP), of the
//! process's code and of the stack words the rules read. The unwinder
//! records the words each walk read; the reader, before copying a
//! sample's stack out of the ring, compares the words at those places in
//! the sample with the remembered ones, and when all match takes the
//! remembered frames instead of a copy. A thread that blocks again and
//! again at the same place (the common case) then costs what a
//! frame-pointer sample costs.
//!
//! Entries are per process: one process's stack can only recall its own
//! unwinds (what a process writes on its stack it could forge anyway).
//! A process's entries go when its code may have changed: at an
//! executable mapping, an exec or its exit, as the reader reads them;
//! a walk of a sample older than that is not remembered.

use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// Most entries kept in all; past it, all are forgotten.
const MAX_ENTRIES: usize = 16 * 1024;
/// Most entries of one process; past it, its own are forgotten.
const MAX_PER_PROCESS: u32 = 4 * 1024;
/// Most words one entry compares: a walk that read more is not kept.
const MAX_WORDS: usize = 256;
/// Most processes whose changes are remembered; past it, all are
/// forgotten.
const MAX_PROCESSES: usize = 64 * 1024;

/// Where a walk started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Start {
    pub(crate) tgid: u32,
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
}

/// One remembered walk: the words it read and the frames it gave.
#[derive(Debug)]
struct Entry {
    /// Byte offsets from the stack pointer of the words read, in order.
    at: Box<[u16]>,
    words: Box<[u64]>,
    frames: Box<[u64]>,
    /// The copy's length, when the walk ran off its end: it is recalled
    /// only for a copy of that length (and only where no longer read of
    /// the thread could follow, see [`Memo::recall`]).
    ran_out_at: Option<usize>,
}

impl Entry {
    /// The stack copy `stack` (from the stack pointer up) holds the words
    /// this walk read.
    fn matches(&self, stack: &[u8]) -> bool {
        if self.ran_out_at.is_some_and(|len| len != stack.len()) {
            return false;
        }
        self.at.iter().zip(self.words.iter()).all(|(&at, &word)| {
            let at = usize::from(at);
            stack
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
                == Some(word)
        })
    }
}

#[derive(Debug, Default)]
struct Process {
    entries: u32,
    /// Unwinds of samples before this time are not remembered: the
    /// process's code may have changed then.
    changed_at: u64,
}

/// Counters for measuring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoStats {
    /// Samples whose frames were recalled.
    pub(crate) hits: u64,
    /// Samples looked up and not found (or whose words differed).
    pub(crate) misses: u64,
    /// Walks remembered.
    pub(crate) kept: u64,
}

#[derive(Debug, Default)]
struct Table {
    entries: FxHashMap<Start, Entry>,
    processes: FxHashMap<u32, Process>,
    stats: MemoStats,
}

impl Table {
    fn forget_process(&mut self, tgid: u32) {
        if self.processes.get(&tgid).is_some_and(|p| p.entries > 0) {
            self.entries.retain(|k, _| k.tgid != tgid);
        }
    }
}

/// The remembered walks, shared by the reader (which recalls) and the
/// unwinder (which remembers).
#[derive(Clone, Debug, Default)]
pub(crate) struct Memo(Arc<Mutex<Table>>);

impl Memo {
    pub(crate) fn new() -> Memo {
        Memo::default()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // A panic elsewhere leaves the table whole: every change is one
        // map operation.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The frames of the walk from `start` at `time` over `stack`, if one
    /// that read the same words was remembered; one that ran off its copy
    /// only when `cut_is_final` (a waker's stack: no read of the thread
    /// would take it further).
    pub(crate) fn recall(
        &self,
        start: Start,
        time: u64,
        stack: &[u8],
        cut_is_final: bool,
        out: &mut Vec<u64>,
    ) -> bool {
        let mut t = self.table();
        let found = match t.entries.get(&start) {
            Some(e)
                if (cut_is_final || e.ran_out_at.is_none())
                    && e.matches(stack)
                    && t.processes
                        .get(&start.tgid)
                        .is_some_and(|p| p.changed_at <= time) =>
            {
                out.clear();
                out.extend_from_slice(&e.frames);
                true
            }
            _ => false,
        };
        if found {
            t.stats.hits += 1;
        } else {
            t.stats.misses += 1;
        }
        found
    }

    /// Forgets `tgid`'s walks: its code may have changed at `time` (or it
    /// exited then: a walk of its older samples, made later, must not be
    /// recalled by a process that reuses its pid).
    pub(crate) fn changed(&self, tgid: u32, time: u64) {
        let mut t = self.table();
        t.forget_process(tgid);
        if t.processes.len() >= MAX_PROCESSES {
            t.entries.clear();
            t.processes.clear();
        }
        let p = t.processes.entry(tgid).or_default();
        p.entries = 0;
        p.changed_at = p.changed_at.max(time);
    }

    /// Remembers that the walk from `start` of a sample at `time` read
    /// `reads` (byte offset from the stack pointer, word) and gave
    /// `frames`, running off the end of its copy of `ran_out_at` bytes if
    /// that is set.
    pub(crate) fn remember(
        &self,
        start: Start,
        time: u64,
        reads: &[(u16, u64)],
        frames: &[u64],
        ran_out_at: Option<usize>,
    ) {
        if reads.len() > MAX_WORDS {
            return;
        }
        let mut t = self.table();
        let changed_at = t.processes.get(&start.tgid).map_or(0, |p| p.changed_at);
        if time < changed_at {
            return;
        }
        if t.entries.len() >= MAX_ENTRIES {
            t.entries.clear();
            t.processes.values_mut().for_each(|p| p.entries = 0);
        }
        if t.processes.get(&start.tgid).map_or(0, |p| p.entries) >= MAX_PER_PROCESS {
            t.forget_process(start.tgid);
            if let Some(p) = t.processes.get_mut(&start.tgid) {
                p.entries = 0;
            }
        }
        let entry = Entry {
            at: reads.iter().map(|r| r.0).collect(),
            words: reads.iter().map(|r| r.1).collect(),
            frames: frames.into(),
            ran_out_at,
        };
        if t.entries.insert(start, entry).is_none() {
            t.processes.entry(start.tgid).or_default().entries += 1;
        }
        t.stats.kept += 1;
    }

    pub(crate) fn stats(&self) -> MemoStats {
        self.table().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(tgid: u32) -> Start {
        Start {
            tgid,
            ip: 0x1000,
            sp: 0x7000,
            bp: 0,
        }
    }

    fn stack(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn a_walk_is_recalled_only_where_the_words_it_read_are_the_same() {
        let memo = Memo::new();
        memo.remember(
            start(1),
            10,
            &[(8, 0xaa), (24, 0xbb)],
            &[0x1000, 0x2000],
            None,
        );
        let mut out = Vec::new();
        // Other words may differ.
        assert!(memo.recall(start(1), 20, &stack(&[7, 0xaa, 9, 0xbb]), false, &mut out));
        assert_eq!(out, [0x1000, 0x2000]);
        assert!(!memo.recall(start(1), 20, &stack(&[7, 0xaa, 9, 0xbc]), false, &mut out));
        // A copy too short to hold a word read.
        assert!(!memo.recall(start(1), 20, &stack(&[7, 0xaa, 9]), false, &mut out));
        // Another process, or another start.
        assert!(!memo.recall(start(2), 20, &stack(&[7, 0xaa, 9, 0xbb]), false, &mut out));
        let other = Start {
            sp: 0x7008,
            ..start(1)
        };
        assert!(!memo.recall(other, 20, &stack(&[7, 0xaa, 9, 0xbb]), false, &mut out));
        let s = memo.stats();
        assert_eq!((s.hits, s.misses, s.kept), (1, 4, 1));
    }

    #[test]
    fn a_change_of_code_forgets_the_process_and_refuses_older_walks() {
        let memo = Memo::new();
        let words = stack(&[1, 2]);
        let reads = [(0, 1), (8, 2)];
        memo.remember(start(1), 10, &reads, &[1], None);
        memo.remember(start(2), 10, &reads, &[2], None);
        memo.changed(1, 50);
        let mut out = Vec::new();
        assert!(!memo.recall(start(1), 60, &words, false, &mut out));
        assert!(
            memo.recall(start(2), 60, &words, false, &mut out),
            "others stay"
        );
        // A walk of a sample from before the change comes late: not kept.
        memo.remember(start(1), 40, &reads, &[1], None);
        assert!(!memo.recall(start(1), 60, &words, false, &mut out));
        memo.remember(start(1), 55, &reads, &[3], None);
        assert!(memo.recall(start(1), 60, &words, false, &mut out));
        assert_eq!(out, [3]);
        // A sample from before the change does not take a later walk.
        assert!(!memo.recall(start(1), 45, &words, false, &mut out));
        // Exited (its pid reused): its late walks are not kept either.
        memo.changed(1, 70);
        memo.remember(start(1), 60, &reads, &[3], None);
        assert!(!memo.recall(start(1), 80, &words, false, &mut out));
    }

    #[test]
    fn a_walk_that_ran_off_its_copy_is_recalled_for_wakers_of_that_length() {
        let memo = Memo::new();
        let words = stack(&[1, 2]);
        memo.remember(start(1), 1, &[(0, 1), (8, 2)], &[7], Some(16));
        let mut out = Vec::new();
        assert!(
            !memo.recall(start(1), 2, &words, false, &mut out),
            "a blocked thread's"
        );
        assert!(memo.recall(start(1), 2, &words, true, &mut out));
        assert_eq!(out, [7]);
        let longer = stack(&[1, 2, 3]);
        assert!(
            !memo.recall(start(1), 2, &longer, true, &mut out),
            "a longer copy"
        );
    }

    #[test]
    fn entries_are_bounded_in_all_and_per_process() {
        let memo = Memo::new();
        let reads = [(0, 1)];
        for i in 0..u64::from(MAX_PER_PROCESS) + 10 {
            let s = Start { ip: i, ..start(1) };
            memo.remember(s, 1, &reads, &[i], None);
        }
        assert!(memo.table().entries.len() <= MAX_PER_PROCESS as usize);
        for p in 2..(2 + 2 * (MAX_ENTRIES as u32 / MAX_PER_PROCESS) + 2) {
            for i in 0..u64::from(MAX_PER_PROCESS) {
                memo.remember(Start { ip: i, ..start(p) }, 1, &reads, &[i], None);
            }
        }
        let t = memo.table();
        assert!(t.entries.len() <= MAX_ENTRIES);
        let counted: u32 = t.processes.values().map(|p| p.entries).sum();
        assert_eq!(counted as usize, t.entries.len());
        drop(t);
        let too_many: Vec<(u16, u64)> = (0..=MAX_WORDS as u16).map(|i| (i * 8, 0)).collect();
        let before = memo.stats().kept;
        memo.remember(start(99), 1, &too_many, &[1], None);
        assert_eq!(memo.stats().kept, before);
    }
}
