//! Stacks deeper than the kernel's copy. A thread that blocked with more
//! stack than the copy holds (node waits in a frame of 12 KiB) loses its
//! outer frames. While it still waits, the rest is in its memory: read
//! from the copy's stack pointer up, within the mapping that holds it and
//! at most [`TAIL_LIMIT`] bytes, and used only when
//! - the kernel's copy is whole (a shorter one stopped at a page it could
//!   not read: there is nothing to check against),
//! - the read begins with the copy's bytes, unchanged,
//! - and the reader has not seen the thread run since the sample.
//!
//! A thread that ran since its sample has usually rewritten the top of its
//! stack, and the reader sees its switches. What is left: a thread that
//! ran in the last moments before the read (records the reader has not
//! read yet) and blocked again with the same bytes at the top (the same
//! function, reached at the same depth from another caller) lends the
//! read its new callers.
//!
//! Bounded whatever the traced process does: one read of at most
//! [`TAIL_LIMIT`] bytes per blocked switch-out whose unwinding ran off its
//! copy, [`PER_SECOND`] a second of trace (and a burst of [`BURST`]),
//! each waited for at most [`READ_WAIT`] (a process can make a read of its
//! memory wait on itself; then reading ends for the run); nothing read is
//! followed as a pointer, only unwound as the copy is.

use std::sync::Arc;
use std::time::Duration;

use super::Rate;
use crate::event::UserCopy;
use crate::event::runs::LastRuns;
use crate::sys::memory::GuardedReader;

/// Most bytes of a thread's stack that its unwinding may read, the
/// copy's included.
pub(crate) const TAIL_LIMIT: usize = 64 << 10;

/// Tails read per second of trace time, at most, once a burst of
/// [`BURST`] is spent.
pub(crate) const PER_SECOND: u64 = 2000;
pub(crate) const BURST: u64 = 500;

/// Longest wait for one read.
pub(crate) const READ_WAIT: Duration = Duration::from_millis(100);

/// Reads up to `len` bytes of thread `tid`'s memory from `addr` up; `None`
/// once reading has ended for the run.
pub(crate) type ReadMemory = dyn FnMut(u32, u64, usize) -> Option<Vec<u8>> + Send;

/// What the tails gave, for the run's timing line and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TailStats {
    /// Tails read and used.
    pub(crate) extended: u64,
    /// Tails read but not used: the thread's stack had changed since its
    /// copy, it had run since, it was gone, or nothing lay past the copy.
    pub(crate) changed: u64,
    /// Tails not read, past [`PER_SECOND`].
    pub(crate) skipped: u64,
    /// The thread whose read did not return in time, ending reading.
    pub(crate) ended_by: Option<u32>,
}

/// Reads the tails of blocked threads' stacks.
pub(crate) struct Tails {
    read: Box<ReadMemory>,
    /// The size of the kernel's whole copies.
    copy_size: usize,
    /// When the reader last saw each thread running.
    runs: Arc<LastRuns>,
    /// Reads that may be made now.
    rate: Rate,
    pub(crate) stats: TailStats,
    /// Why the thread that reads could not be started, if it could not.
    no_reader: Option<String>,
}

impl Tails {
    /// Tails read from the traced threads themselves, whose copies are
    /// `copy_size` bytes whole, with `runs` from the reader.
    pub(crate) fn live(copy_size: usize, runs: Arc<LastRuns>) -> Tails {
        let mut reader = GuardedReader::new(READ_WAIT);
        // Now, while threads can be made; without one, no tail is read.
        let started = reader.start();
        let mut tails = Tails::reading(
            Box::new(move |tid, addr, len| reader.read(tid, addr, len)),
            copy_size,
            runs,
        );
        tails.no_reader = started.err();
        tails
    }

    pub(crate) fn reading(read: Box<ReadMemory>, copy_size: usize, runs: Arc<LastRuns>) -> Tails {
        Tails {
            read,
            copy_size,
            runs,
            rate: Rate::new(PER_SECOND, BURST, 0),
            stats: TailStats::default(),
            no_reader: None,
        }
    }

    /// `copy` of thread `tid`'s stack (taken as it blocked at `time`)
    /// continued from its memory, if the thread's memory still holds the
    /// copy's bytes and more, and it was not seen running since.
    pub(crate) fn longer(&mut self, tid: u32, time: u64, copy: &UserCopy) -> Option<UserCopy> {
        let n = copy.stack.len();
        if n != self.copy_size
            || n >= TAIL_LIMIT
            || self.stats.ended_by.is_some()
            || self.no_reader.is_some()
        {
            return None;
        }
        // A thread seen running since has rewritten its stack: nothing
        // read now would be used.
        if self.runs.ran_after(tid, time) {
            self.stats.changed += 1;
            return None;
        }
        if !self.rate.allow(time) {
            self.stats.skipped += 1;
            return None;
        }
        let Some(mut bytes) = (self.read)(tid, copy.sp, TAIL_LIMIT) else {
            self.stats.ended_by = Some(tid);
            return None;
        };
        bytes.truncate(TAIL_LIMIT);
        // Checked after the read: what the reader has seen by then counts.
        if bytes.len() <= n || bytes[..n] != copy.stack[..] || self.runs.ran_after(tid, time) {
            self.stats.changed += 1;
            return None;
        }
        self.stats.extended += 1;
        Some(UserCopy {
            ip: copy.ip,
            sp: copy.sp,
            bp: copy.bp,
            stack: bytes.into_boxed_slice(),
            charge: Default::default(),
        })
    }

    /// The NOTE that says reading ended, if it did.
    pub(crate) fn note(&self) -> Option<String> {
        if let Some(e) = &self.no_reader {
            return Some(format!(
                "NOTE: no stack was read past the kernel's copy: the thread that reads them \
                 could not be started ({e})."
            ));
        }
        let tid = self.stats.ended_by?;
        Some(format!(
            "NOTE: reading the stack of thread {tid} past the kernel's copy did not return \
             within {} ms (a process can serve its own memory, through userfaultfd or FUSE): \
             no stack was read past its copy from then on.",
            READ_WAIT.as_millis()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn copy(stack: &[u8]) -> UserCopy {
        UserCopy {
            ip: 1,
            sp: 0x1000,
            bp: 2,
            stack: stack.into(),
            charge: Default::default(),
        }
    }

    /// The reads made: thread, address, length.
    type Log = Arc<Mutex<Vec<(u32, u64, usize)>>>;

    /// Tails over `memory` (from 0x1000 up) for whole copies of
    /// `copy_size` bytes, logging each read, and the runs they check.
    fn over(memory: Vec<u8>, copy_size: usize) -> (Tails, Log, Arc<LastRuns>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let runs = Arc::new(LastRuns::default());
        let tails = Tails::reading(
            Box::new(move |tid, addr, len| {
                seen.lock().unwrap().push((tid, addr, len));
                let from = (addr - 0x1000) as usize;
                Some(memory.iter().skip(from).take(len).copied().collect())
            }),
            copy_size,
            runs.clone(),
        );
        (tails, log, runs)
    }

    #[test]
    fn an_unchanged_stack_is_continued_from_memory() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, log, _) = over(memory.clone(), 10);
        let longer = tails.longer(7, 0, &copy(&memory[..10])).expect("continued");
        assert_eq!(&longer.stack[..], &memory[..]);
        assert_eq!((longer.ip, longer.sp, longer.bp), (1, 0x1000, 2));
        assert_eq!(*log.lock().unwrap(), [(7, 0x1000, TAIL_LIMIT)]);
        assert_eq!(tails.stats.extended, 1);
    }

    #[test]
    fn a_stack_that_changed_or_ends_at_the_copy_is_not_continued() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, _, _) = over(memory.clone(), 10);
        let mut changed = memory[..10].to_vec();
        changed[9] ^= 1;
        assert!(tails.longer(7, 0, &copy(&changed)).is_none());
        // The thread is gone: nothing is read.
        let (mut gone, _, _) = over(Vec::new(), 10);
        assert!(gone.longer(7, 0, &copy(&memory[..10])).is_none());
        // The copy is all the memory holds.
        let (mut all, _, _) = over(memory.clone(), 100);
        assert!(all.longer(7, 0, &copy(&memory)).is_none());
        assert_eq!((tails.stats.changed, all.stats.changed), (1, 1));
    }

    /// A copy the kernel could not make whole (an empty one, where the
    /// page at the stack pointer was not there) has nothing to check the
    /// memory against: it is not continued, and nothing is read.
    #[test]
    fn a_copy_short_of_its_size_is_not_continued() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, log, _) = over(memory.clone(), 16);
        assert!(tails.longer(7, 0, &copy(&[])).is_none());
        assert!(tails.longer(7, 0, &copy(&memory[..8])).is_none());
        assert!(log.lock().unwrap().is_empty());
        assert!(tails.longer(7, 0, &copy(&memory[..16])).is_some());
    }

    /// A thread the reader saw running after its sample may have blocked
    /// again, from other callers, with the same bytes at the top.
    #[test]
    fn a_thread_seen_running_since_its_sample_is_not_continued() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, _, runs) = over(memory.clone(), 10);
        let mut seen = Default::default();
        LastRuns::note(
            &mut seen,
            &crate::event::Event {
                time: 50,
                cpu: 0,
                kind: crate::event::EventKind::Ran(crate::event::Ran {
                    tid: 7,
                    since: None,
                }),
            },
        );
        runs.publish(&mut seen);
        assert!(tails.longer(7, 40, &copy(&memory[..10])).is_none());
        assert!(tails.longer(7, 50, &copy(&memory[..10])).is_some());
        assert_eq!((tails.stats.changed, tails.stats.extended), (1, 1));
    }

    #[test]
    fn reads_are_bounded_in_size_and_rate() {
        let memory = vec![5u8; 2 * TAIL_LIMIT];
        let (mut tails, log, _) = over(memory.clone(), 8);
        let longer = tails.longer(7, 0, &copy(&memory[..8])).expect("continued");
        assert_eq!(longer.stack.len(), TAIL_LIMIT);
        // The burst, all at once.
        for _ in 1..BURST {
            assert!(tails.longer(7, 0, &copy(&memory[..8])).is_some());
        }
        assert!(tails.longer(7, 0, &copy(&memory[..8])).is_none());
        assert_eq!(tails.stats.skipped, 1);
        // Then PER_SECOND a second: over the next second, that many more.
        let step = super::super::NS / PER_SECOND;
        let more = (1..=2 * PER_SECOND)
            .filter(|i| tails.longer(7, i * step / 2, &copy(&memory[..8])).is_some())
            .count() as u64;
        assert_eq!(more, PER_SECOND);
        assert_eq!(log.lock().unwrap().len() as u64, BURST + PER_SECOND);
        // A copy as large as the limit is not continued.
        let (mut whole, _, _) = over(memory.clone(), TAIL_LIMIT);
        assert!(whole.longer(7, 0, &copy(&memory[..TAIL_LIMIT])).is_none());
    }

    #[test]
    fn a_read_that_never_returns_ends_reading_and_says_so() {
        let reads = Arc::new(Mutex::new(0));
        let counted = reads.clone();
        let mut tails = Tails::reading(
            Box::new(move |_, _, _| {
                *counted.lock().unwrap() += 1;
                None
            }),
            2,
            Default::default(),
        );
        assert!(tails.note().is_none());
        assert!(tails.longer(7, 0, &copy(&[1, 2])).is_none());
        assert!(tails.longer(8, 0, &copy(&[1, 2])).is_none());
        assert_eq!(*reads.lock().unwrap(), 1, "no read after the one that hung");
        assert_eq!(tails.stats.ended_by, Some(7));
        assert!(tails.note().is_some_and(|n| n.contains("thread 7 ")));
    }

    #[test]
    fn without_a_reading_thread_nothing_is_read_and_the_note_says_why() {
        let mut tails = Tails::reading(
            Box::new(|_, _, _| panic!("no read without a thread")),
            2,
            Default::default(),
        );
        tails.no_reader = Some("no pid left".into());
        assert!(tails.longer(7, 0, &copy(&[1, 2])).is_none());
        assert!(
            tails
                .note()
                .is_some_and(|n| n.contains("could not be started (no pid left)"))
        );
    }
}
