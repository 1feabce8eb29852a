//! Stacks deeper than the kernel's copy. A thread that blocked with more
//! stack than the copy holds (node waits in a frame of 12 KiB) loses its
//! outer frames. While it still waits, the rest is in its memory: read
//! from the copy's stack pointer up, as far as [`TAIL_LIMIT`] and its
//! readable pages go, and used only when the bytes the copy holds are
//! still there unchanged. A thread that ran since has rewritten them, so
//! it can never lend a later stack's frames to an earlier wait.
//!
//! Bounded whatever the traced process does: one read of at most
//! [`TAIL_LIMIT`] bytes per blocked switch-out whose unwinding ran off its
//! copy, at most [`PER_SECOND`] per second of trace, each waited for at
//! most [`READ_WAIT`] (a process can make a read of its memory wait on
//! itself; then reading ends for the run); nothing read is followed as a
//! pointer, only unwound as the copy is.

use std::time::Duration;

use crate::event::UserCopy;
use crate::sys::memory::GuardedReader;

/// Most bytes of a thread's stack that its unwinding may read, the
/// copy's included.
pub(crate) const TAIL_LIMIT: usize = 64 << 10;

/// Most tails read per second of trace time.
pub(crate) const PER_SECOND: u64 = 2000;

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
    /// copy, it was gone, or nothing lay past the copy.
    pub(crate) changed: u64,
    /// Tails not read, past [`PER_SECOND`].
    pub(crate) skipped: u64,
    /// The thread whose read did not return in time, ending reading.
    pub(crate) ended_by: Option<u32>,
}

/// Reads the tails of blocked threads' stacks.
pub(crate) struct Tails {
    read: Box<ReadMemory>,
    /// The second of trace time being counted, and the reads in it.
    second: u64,
    reads: u64,
    pub(crate) stats: TailStats,
}

impl Tails {
    /// Tails read from the traced threads themselves.
    pub(crate) fn live() -> Tails {
        let mut reader = GuardedReader::new(READ_WAIT);
        Tails::reading(Box::new(move |tid, addr, len| reader.read(tid, addr, len)))
    }

    pub(crate) fn reading(read: Box<ReadMemory>) -> Tails {
        Tails {
            read,
            second: 0,
            reads: 0,
            stats: TailStats::default(),
        }
    }

    /// `copy` of thread `tid`'s stack (taken as it blocked at `time`)
    /// continued from its memory, if the thread's memory still holds the
    /// copy's bytes and more.
    pub(crate) fn longer(&mut self, tid: u32, time: u64, copy: &UserCopy) -> Option<UserCopy> {
        if copy.stack.len() >= TAIL_LIMIT || self.stats.ended_by.is_some() {
            return None;
        }
        let second = time / 1_000_000_000;
        if second != self.second {
            self.second = second;
            self.reads = 0;
        }
        if self.reads >= PER_SECOND {
            self.stats.skipped += 1;
            return None;
        }
        self.reads += 1;
        let Some(mut bytes) = (self.read)(tid, copy.sp, TAIL_LIMIT) else {
            self.stats.ended_by = Some(tid);
            return None;
        };
        bytes.truncate(TAIL_LIMIT);
        let n = copy.stack.len();
        if bytes.len() <= n || bytes[..n] != copy.stack[..] {
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
    use std::sync::{Arc, Mutex};

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

    /// Tails over `memory` (from 0x1000 up), logging each read.
    fn over(memory: Vec<u8>) -> (Tails, Log) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let tails = Tails::reading(Box::new(move |tid, addr, len| {
            seen.lock().unwrap().push((tid, addr, len));
            let from = (addr - 0x1000) as usize;
            Some(memory.iter().skip(from).take(len).copied().collect())
        }));
        (tails, log)
    }

    #[test]
    fn an_unchanged_stack_is_continued_from_memory() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, log) = over(memory.clone());
        let longer = tails.longer(7, 0, &copy(&memory[..10])).expect("continued");
        assert_eq!(&longer.stack[..], &memory[..]);
        assert_eq!((longer.ip, longer.sp, longer.bp), (1, 0x1000, 2));
        assert_eq!(*log.lock().unwrap(), [(7, 0x1000, TAIL_LIMIT)]);
        assert_eq!(tails.stats.extended, 1);
    }

    #[test]
    fn a_stack_that_changed_or_ends_at_the_copy_is_not_continued() {
        let memory: Vec<u8> = (0..100u8).collect();
        let (mut tails, _) = over(memory.clone());
        let mut changed = memory[..10].to_vec();
        changed[9] ^= 1;
        assert!(tails.longer(7, 0, &copy(&changed)).is_none());
        // The copy is all the memory holds.
        assert!(tails.longer(7, 0, &copy(&memory)).is_none());
        // The thread is gone: nothing is read.
        let (mut gone, _) = over(Vec::new());
        assert!(gone.longer(7, 0, &copy(&memory[..10])).is_none());
        assert_eq!(tails.stats.changed, 2);
    }

    #[test]
    fn reads_are_bounded_in_size_and_per_second() {
        let memory = vec![5u8; 2 * TAIL_LIMIT];
        let (mut tails, log) = over(memory.clone());
        let longer = tails.longer(7, 0, &copy(&memory[..8])).expect("continued");
        assert_eq!(longer.stack.len(), TAIL_LIMIT);
        // A copy as large as the limit is not continued.
        assert!(tails.longer(7, 0, &copy(&memory[..TAIL_LIMIT])).is_none());
        for _ in 1..PER_SECOND {
            assert!(tails.longer(7, 5, &copy(&memory[..8])).is_some());
        }
        assert!(tails.longer(7, 999_999_999, &copy(&memory[..8])).is_none());
        assert_eq!(tails.stats.skipped, 1);
        // The next second reads again.
        assert!(
            tails
                .longer(7, 1_000_000_000, &copy(&memory[..8]))
                .is_some()
        );
        assert_eq!(log.lock().unwrap().len() as u64, PER_SECOND + 1);
    }

    #[test]
    fn a_read_that_never_returns_ends_reading_and_says_so() {
        let reads = Arc::new(Mutex::new(0));
        let counted = reads.clone();
        let mut tails = Tails::reading(Box::new(move |_, _, _| {
            *counted.lock().unwrap() += 1;
            None
        }));
        assert!(tails.note().is_none());
        assert!(tails.longer(7, 0, &copy(&[1, 2])).is_none());
        assert!(tails.longer(8, 0, &copy(&[1, 2])).is_none());
        assert_eq!(*reads.lock().unwrap(), 1, "no read after the one that hung");
        assert_eq!(tails.stats.ended_by, Some(7));
        assert!(tails.note().is_some_and(|n| n.contains("thread 7 ")));
    }
}
