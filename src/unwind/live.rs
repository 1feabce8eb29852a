//! Blocked stacks read from the thread itself, for events that carry no
//! copy of the user stack (the tracefs backend, whose kernel walks user
//! stacks by frame pointers only). A thread still blocked when its
//! switch-out reaches the unwinder still holds the registers it blocked
//! with and the stack it blocked on: its SP and PC, as the kernel saved
//! them, are read from `/proc` ([`crate::sys::blocked`]), then its stack
//! from SP up, at most [`TAIL_LIMIT`] bytes within the mapping that holds
//! SP, and the stack is unwound as a copy would be. Used only when
//! - the reader has not seen the thread run since the switch-out (checked
//!   before and after the reads),
//! - the PC is the first frame of the switch-out's frame-pointer walk (the
//!   kernel's user IP then): a thread that ran and blocked elsewhere since
//!   has another,
//! - and the thread stayed blocked at that PC, without running, while it
//!   was read (its time on a CPU and its switch count unchanged).
//!
//! What is left, as for [`super::tail`]: a thread that ran in the moments
//! the reader has not read yet and blocked again at the same PC, from
//! other callers, lends the read its new callers.
//!
//! The kernel does not give the frame pointer (BP): it is taken from where
//! the frame-pointer walk found its second frame in the stack read (the
//! kernel's walk starts at BP), or left unknown (an address that cannot be
//! read, so that a frame whose rule needs it ends the unwinding).
//!
//! Bounded as [`super::tail`]'s reads, sharing their limits: one read per
//! blocked switch-out, [`PER_SECOND`] a second of trace (and a burst of
//! [`BURST`]), each waited for at most [`READ_WAIT`] (a read that takes
//! longer ends reading for the run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Rate;
use super::tail::{BURST, PER_SECOND, READ_WAIT, TAIL_LIMIT};
use crate::event::UserCopy;
use crate::event::runs::LastRuns;
use crate::sys::blocked::ThreadRead;
use crate::sys::memory::GuardedReader;

/// Reads thread `tid` of process `tgid`, blocked at `pc`, with up to `len`
/// bytes of its stack; `None` once reading has ended for the run.
pub(crate) type ReadBlocked = dyn FnMut(u32, u32, u64, usize) -> Option<ThreadRead> + Send;

/// What reading blocked threads gave, for the run's timing line and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LiveStats {
    /// Stacks read and unwound.
    pub(crate) read: u64,
    /// Of those, stacks whose frame-pointer walk was kept: it went further.
    pub(crate) kept_fp: u64,
    /// Not used: the thread ran since its switch-out, or while it was
    /// read, or runs.
    pub(crate) ran: u64,
    /// Not used: the thread was blocked at another PC.
    pub(crate) moved: u64,
    /// Not used: the thread was gone, or could not be read.
    pub(crate) unreadable: u64,
    /// Not read, past [`PER_SECOND`].
    pub(crate) skipped: u64,
    /// Time spent waiting for reads.
    pub(crate) read_time: Duration,
    /// The thread whose read did not return in time, ending reading.
    pub(crate) ended_by: Option<u32>,
}

/// Reads the stacks of blocked threads.
pub(crate) struct LiveStacks {
    read: Box<ReadBlocked>,
    /// When the reader last saw each thread running.
    runs: Arc<LastRuns>,
    rate: Rate,
    pub(crate) stats: LiveStats,
    /// Why the thread that reads could not be started, if it could not.
    no_reader: Option<String>,
}

impl LiveStacks {
    /// Stacks read from the traced threads themselves, with `runs` from
    /// the reader.
    pub(crate) fn live(runs: Arc<LastRuns>) -> LiveStacks {
        let mut reader = GuardedReader::new(READ_WAIT);
        // Now, while threads can be made; without one, nothing is read.
        let started = reader.start();
        let mut live = LiveStacks::reading(
            Box::new(move |tgid, tid, pc, len| reader.read_blocked(tgid, tid, pc, len)),
            runs,
        );
        live.no_reader = started.err();
        live
    }

    pub(crate) fn reading(read: Box<ReadBlocked>, runs: Arc<LastRuns>) -> LiveStacks {
        LiveStacks {
            read,
            runs,
            rate: Rate::new(PER_SECOND, BURST, 0),
            stats: LiveStats::default(),
            no_reader: None,
        }
    }

    /// A copy of the stack of thread `tid` of `tgid`, which blocked at
    /// `time` with the frame-pointer walk `fp` (its first frame the PC),
    /// read from the thread if it passes every check.
    pub(crate) fn copy(&mut self, tgid: u32, tid: u32, time: u64, fp: &[u64]) -> Option<UserCopy> {
        let &pc = fp.first()?;
        if self.stats.ended_by.is_some() || self.no_reader.is_some() {
            return None;
        }
        if self.runs.ran_after(tid, time) {
            self.stats.ran += 1;
            return None;
        }
        if !self.rate.allow(time) {
            self.stats.skipped += 1;
            return None;
        }
        let asked = Instant::now();
        let read = (self.read)(tgid, tid, pc, TAIL_LIMIT);
        self.stats.read_time += asked.elapsed();
        let Some(read) = read else {
            self.stats.ended_by = Some(tid);
            return None;
        };
        let (regs, mut stack) = match read {
            ThreadRead::Still { regs, stack } => (regs, stack),
            ThreadRead::Ran => {
                self.stats.ran += 1;
                return None;
            }
            ThreadRead::Moved => {
                self.stats.moved += 1;
                return None;
            }
            ThreadRead::Unreadable => {
                self.stats.unreadable += 1;
                return None;
            }
        };
        if regs.pc != pc {
            self.stats.moved += 1;
            return None;
        }
        // Checked after the reads: what the reader has seen by then counts.
        if self.runs.ran_after(tid, time) {
            self.stats.ran += 1;
            return None;
        }
        stack.truncate(TAIL_LIMIT);
        self.stats.read += 1;
        Some(UserCopy {
            ip: regs.pc,
            sp: regs.sp,
            bp: frame_pointer(&stack, regs.sp, fp).unwrap_or(UNKNOWN_BP),
            stack: stack.into_boxed_slice(),
            charge: Default::default(),
        })
    }

    /// The NOTE that says reading ended, if it did.
    pub(crate) fn note(&self) -> Option<String> {
        if let Some(e) = &self.no_reader {
            return Some(format!(
                "NOTE: user stacks were walked by frame pointers only: the thread that reads \
                 blocked threads' stacks could not be started ({e})."
            ));
        }
        let tid = self.stats.ended_by?;
        Some(format!(
            "NOTE: reading the stack of blocked thread {tid} did not return within {} ms (a \
             process can serve its own memory, through userfaultfd or FUSE): user stacks were \
             walked by frame pointers only from then on.",
            READ_WAIT.as_millis()
        ))
    }
}

/// A frame pointer no stack is at: the unwinding of a frame that needs it
/// fails (0 would end the stack there, as if complete).
const UNKNOWN_BP: u64 = u64::MAX;

/// The frame pointer the kernel's walk `fp` started from, found in `stack`
/// (the bytes from `sp` up): the lowest place whose return address slot
/// holds `fp[1]` and whose chain of saved frame pointers leads to the
/// walk's next frames, as far as `stack` holds them.
pub(crate) fn frame_pointer(stack: &[u8], sp: u64, fp: &[u64]) -> Option<u64> {
    let &second = fp.get(1)?;
    let word = |addr: u64| -> Option<u64> {
        addr.checked_add(8)?;
        let at = usize::try_from(addr.checked_sub(sp)?).ok()?;
        let bytes = stack.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(bytes.try_into().ok()?))
    };
    let leads_on = |bp: u64| {
        let mut at = bp;
        for &ret in &fp[2..] {
            let Some(next) = word(at) else {
                return true;
            };
            match next.checked_add(8).and_then(word) {
                Some(w) if w == ret => at = next,
                // Past the bytes read: nothing more to check.
                None => return true,
                Some(_) => return false,
            }
        }
        true
    };
    (0..stack.len().saturating_sub(15))
        .step_by(8)
        .filter_map(|at| sp.checked_add(at as u64))
        .find(|&bp| bp.checked_add(8).and_then(word) == Some(second) && leads_on(bp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventKind, Ran};
    use crate::sys::blocked::Regs;
    use std::sync::Mutex;

    /// The stack of the tests: words from 0x1000 up.
    fn stack_of(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// A reader that answers `answer`, logging what it was asked.
    #[allow(clippy::type_complexity)]
    fn answering(answer: ThreadRead) -> (LiveStacks, Arc<Mutex<Vec<(u32, u32, u64, usize)>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        let live = LiveStacks::reading(
            Box::new(move |tgid, tid, pc, len| {
                seen.lock().unwrap().push((tgid, tid, pc, len));
                Some(answer.clone())
            }),
            Arc::new(LastRuns::default()),
        );
        (live, log)
    }

    fn still(pc: u64, words: &[u64]) -> ThreadRead {
        ThreadRead::Still {
            regs: Regs { sp: 0x1000, pc },
            stack: stack_of(words),
        }
    }

    #[test]
    fn a_still_thread_gives_its_registers_and_stack() {
        let words = [1, 0x1018, 0x77, 0, 0x88];
        let (mut live, log) = answering(still(0x55, &words));
        let copy = live.copy(3, 7, 100, &[0x55, 0x77, 0x88]).expect("read");
        assert_eq!((copy.ip, copy.sp), (0x55, 0x1000));
        assert_eq!(copy.bp, 0x1008, "where the walk's second frame is");
        assert_eq!(&copy.stack[..], &stack_of(&words)[..]);
        assert_eq!(*log.lock().unwrap(), [(3, 7, 0x55, TAIL_LIMIT)]);
        assert_eq!(live.stats.read, 1);
    }

    #[test]
    fn a_thread_that_ran_moved_or_went_is_not_used() {
        for (answer, counted) in [
            (ThreadRead::Ran, 0),
            (ThreadRead::Moved, 1),
            (ThreadRead::Unreadable, 2),
            // Blocked at another PC than the walk's first frame.
            (still(0x56, &[1]), 1),
        ] {
            let (mut live, _) = answering(answer);
            assert!(live.copy(3, 7, 100, &[0x55]).is_none());
            let s = live.stats;
            assert_eq!([s.ran, s.moved, s.unreadable][counted], 1, "{s:?}");
            assert_eq!(s.read, 0);
        }
        // No frame-pointer walk: nothing to check the PC against.
        let (mut live, log) = answering(still(0x55, &[1]));
        assert!(live.copy(3, 7, 100, &[]).is_none());
        assert!(log.lock().unwrap().is_empty());
    }

    #[test]
    fn a_thread_seen_running_since_is_not_read() {
        let (mut live, log) = answering(still(0x55, &[1]));
        let mut seen = Default::default();
        LastRuns::note(
            &mut seen,
            &Event {
                time: 150,
                cpu: 0,
                kind: EventKind::Ran(Ran {
                    tid: 7,
                    since: None,
                }),
            },
        );
        live.runs.publish(&mut seen);
        assert!(live.copy(3, 7, 100, &[0x55]).is_none());
        assert!(log.lock().unwrap().is_empty());
        assert!(live.copy(3, 7, 150, &[0x55]).is_some());
        assert_eq!((live.stats.ran, live.stats.read), (1, 1));
    }

    #[test]
    fn reads_are_bounded_in_rate_and_a_hung_one_ends_reading() {
        let (mut live, _) = answering(still(0x55, &[1]));
        let read = (0..2 * BURST)
            .filter(|_| live.copy(3, 7, 0, &[0x55]).is_some())
            .count() as u64;
        assert_eq!((read, live.stats.skipped), (BURST, BURST));
        let mut hung = LiveStacks::reading(Box::new(|_, _, _, _| None), Default::default());
        assert!(hung.note().is_none());
        assert!(hung.copy(3, 7, 0, &[0x55]).is_none());
        assert_eq!(hung.stats.ended_by, Some(7));
        assert!(hung.note().is_some_and(|n| n.contains("blocked thread 7 ")));
        let mut none = LiveStacks::reading(
            Box::new(|_, _, _, _| panic!("no read without a thread")),
            Default::default(),
        );
        none.no_reader = Some("no pid left".into());
        assert!(none.copy(3, 7, 0, &[0x55]).is_none());
        assert!(none.note().is_some_and(|n| n.contains("(no pid left)")));
    }

    #[test]
    fn the_frame_pointer_is_where_the_walk_began() {
        // A frame at 0x1000 whose return address is the walk's second
        // frame, but whose saved frame pointer leads elsewhere; then the
        // walk's frames at 0x1010 and 0x1030.
        let words = [0x1040, 0x77, 0x1030, 0x77, 9, 9, 0x1050, 0x88, 0, 5];
        let stack = stack_of(&words);
        assert_eq!(
            frame_pointer(&stack, 0x1000, &[0x55, 0x77, 0x88]),
            Some(0x1010)
        );
        // Nothing more to check, or the chain leaves the bytes read.
        assert_eq!(frame_pointer(&stack, 0x1000, &[0x55, 0x77]), Some(0x1000));
        assert_eq!(
            frame_pointer(&stack, 0x1000, &[0x55, 0x77, 0x88, 0x99]),
            Some(0x1010)
        );
        // Nothing holds the second frame, or there is none.
        assert_eq!(frame_pointer(&stack, 0x1000, &[0x55, 0x99]), None);
        assert_eq!(frame_pointer(&stack, 0x1000, &[0x55]), None);
        assert_eq!(frame_pointer(&[], 0x1000, &[0x55, 0x77]), None);
        // At the top of the address space nothing overflows.
        assert_eq!(frame_pointer(&stack, u64::MAX - 8, &[0x55, 0x77]), None);
    }
}
