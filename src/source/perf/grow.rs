//! Ring buffers that start small and grow once tracing runs.
//!
//! The kernel clears every page of a perf ring when it is first mapped:
//! the 16 MiB per CPU that `dwarf` stack copies want take milliseconds
//! each, longer than opening all the events, and a command started under
//! the tool waits for them. So its events write into small rings at first
//! ([`START_BYTES`] per CPU), and from the second round a forked process,
//! `offwake-grow`, maps the full-size ones (in its own address space, so
//! that this process's memory map is not locked while the kernel clears
//! them). Once this process has mapped them too, the per-CPU events are
//! replaced by new ones writing into them, and the child moves the
//! per-task events to them with `PERF_EVENT_IOC_SET_OUTPUT`. Each move
//! waits for an RCU grace period in the kernel while it holds the locks
//! of the event it moves to and of the moved event's context, so each
//! event moves to an anchor of its own, a dummy event that writes into the
//! large ring, and the moves are made by the child, never by this
//! process. The per-task events are those of the command's launcher
//! (`crate::command`), which the command inherits: the context whose lock
//! a move holds is the launcher's, which no traced task needs to fork or
//! exit. Records go to whichever ring their event writes to at that
//! moment: both rings are read to the end of the run.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use anyhow::{Context, Result};
use nix::fcntl::OFlag;

use super::ring::Ring;
use crate::sys::child;
use crate::sys::host::page_size;

/// Each CPU's first ring: cleared in about a millisecond, and room for
/// about 500 `dwarf` samples of the default 8 KiB stack copy until the
/// large rings take over (in 0.1 to 0.2 s; a switch storm from the start
/// can overflow it meanwhile).
pub(super) const START_BYTES: usize = 4 << 20;

/// The fewest samples of the largest size a first ring must hold: a larger
/// stack copy makes it larger, and past the full size the rings do not
/// grow (`--call-graph dwarf,65528` samples are 64 KiB each).
const START_SAMPLES: usize = 256;

/// Room in a sample for what is not the stack copy: the callchain (at most
/// 127 entries of the kernel's default limit, then user ones), the raw
/// tracepoint data and the header fields.
const SAMPLE_OVERHEAD: usize = 4 << 10;

/// The most events moved: past it, rings get their full size at once
/// (attaching that many events takes longer than clearing the rings).
pub(super) const MAX_MOVED: usize = 64;

/// What the child writes once it has mapped the new rings.
const MAPPED: u8 = b'm';
/// What this process writes once it has mapped them too.
const GO: u8 = b'g';

/// An event to move.
pub(super) struct Move<'a> {
    pub(super) event: BorrowedFd<'a>,
    /// The index of its CPU's ring (and new owner).
    pub(super) ring: usize,
}

/// The pages each CPU's ring starts with, when a ring of `pages` pages is
/// worth growing into; `stack_user` is the bytes of stack each sample
/// copies.
pub(super) fn start_pages(pages: usize, stack_user: u32) -> Option<usize> {
    let sample = (stack_user as usize).saturating_add(SAMPLE_OVERHEAD);
    let bytes = START_BYTES.max(sample.saturating_mul(START_SAMPLES));
    let start = (bytes / page_size()).max(1).next_power_of_two();
    (pages > start).then_some(start)
}

/// A growth under way.
pub(super) struct Growth {
    pid: libc::pid_t,
    /// Readable once the child has mapped the new rings (or failed).
    ready: Option<OwnedFd>,
    /// Written [`GO`] once this process has mapped them too.
    go: Option<OwnedFd>,
    /// The new rings' owners, one per CPU in ring order, until mapped here.
    owners: Vec<OwnedFd>,
    /// One per event moved, until the moves are over.
    anchors: Vec<OwnedFd>,
    pages: usize,
}

/// Where a [`Growth`] is.
pub(super) enum Step {
    /// The child is still mapping the new rings.
    Waiting,
    /// The new rings, mapped here, with their owners: the events move to
    /// them once [`Growth::go`] is called.
    Mapped(Vec<(OwnedFd, Ring)>),
    /// The child failed, or mapping the rings here did: the events stay.
    Failed(String),
    /// The events are being moved, or have been.
    Moving,
}

impl Growth {
    /// Forks the child that maps the rings of `owners` (`pages` data pages
    /// each), then, once told to, moves each of `moves` to its new ring, in
    /// order, through an anchor of `anchors` (the one of the same index, on
    /// the same CPU).
    pub(super) fn start(
        owners: Vec<OwnedFd>,
        anchors: Vec<OwnedFd>,
        moves: &[Move<'_>],
        pages: usize,
    ) -> Result<Growth> {
        let map_len = (1 + pages)
            .checked_mul(page_size())
            .context("the ring size overflows")?;
        let (ready_r, ready_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .context("making the pipes of offwake-grow")?;
        let (go_r, go_w) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).context("making the pipes of offwake-grow")?;
        let owner_fds: Vec<RawFd> = owners.iter().map(AsRawFd::as_raw_fd).collect();
        // (anchor, owner) and (event, anchor).
        let mut anchored: Vec<FdPair> = Vec::with_capacity(moves.len());
        let mut pairs: Vec<FdPair> = Vec::with_capacity(moves.len());
        for (m, anchor) in moves.iter().zip(&anchors) {
            let Some(&owner) = owner_fds.get(m.ring) else {
                continue;
            };
            anchored.push((anchor.as_raw_fd(), owner));
            pairs.push((m.event.as_raw_fd(), anchor.as_raw_fd()));
        }
        let mut keep: Vec<RawFd> = owner_fds.clone();
        keep.extend(anchored.iter().map(|p| p.0));
        keep.extend(pairs.iter().map(|p| p.0));
        keep.extend([ready_w.as_raw_fd(), go_r.as_raw_fd()]);
        keep.sort_unstable();
        keep.dedup();
        let plan = ChildPlan {
            keep: &keep,
            max_fd: child::open_files_limit().min(1 << 16),
            owners: &owner_fds,
            map_len,
            anchored: &anchored,
            moves: &pairs,
            ready: ready_w.as_raw_fd(),
            go: go_r.as_raw_fd(),
        };
        // SAFETY: the child runs only `grow_then_exit`, which makes plain
        // system calls on memory prepared above and never returns.
        let (pid, _) = unsafe { child::fork_signals_blocked() };
        if pid == 0 {
            // SAFETY: this is the child just forked; `keep` is sorted.
            unsafe { grow_then_exit(&plan) };
        }
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("forking offwake-grow");
        }
        Ok(Growth {
            pid,
            ready: Some(ready_r),
            go: Some(go_w),
            owners,
            anchors,
            pages,
        })
    }

    /// What to poll while the child maps the rings.
    pub(super) fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ready.as_ref().map(AsFd::as_fd)
    }

    /// Where the growth is; maps the new rings here once the child has.
    pub(super) fn step(&mut self) -> Step {
        let Some(ready) = &self.ready else {
            return Step::Moving;
        };
        let mut byte = 0u8;
        // SAFETY: reads one byte into a local from a descriptor we own.
        let n = unsafe { libc::read(ready.as_raw_fd(), (&raw mut byte).cast(), 1) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Step::Waiting,
                _ => self.fail(format!("reading from offwake-grow: {err}")),
            };
        }
        self.ready = None;
        if n == 0 || byte != MAPPED {
            return self.fail("offwake-grow could not map the rings".to_string());
        }
        let mut rings = Vec::with_capacity(self.owners.len());
        for owner in std::mem::take(&mut self.owners) {
            match Ring::map(owner.as_fd(), self.pages) {
                Ok(ring) => rings.push((owner, ring)),
                Err(e) => return self.fail(format!("{e:#}")),
            }
        }
        Step::Mapped(rings)
    }

    fn fail(&mut self, why: String) -> Step {
        // The child sees end-of-file instead of GO, and moves nothing.
        self.go = None;
        self.ready = None;
        self.owners.clear();
        Step::Failed(why)
    }

    /// Lets the child move the events, the new rings being mapped here.
    pub(super) fn go(&mut self) {
        if let Some(go) = self.go.take() {
            let byte = GO;
            // SAFETY: writes one byte from a local to a pipe we own.
            unsafe { libc::write(go.as_raw_fd(), (&raw const byte).cast(), 1) };
        }
    }

    /// True once the child has moved every event and exited (reaped).
    pub(super) fn done(&mut self) -> bool {
        if self.go.is_some() || self.ready.is_some() {
            return false;
        }
        let mut status = 0;
        // SAFETY: waits, without blocking, for our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r != 0 {
            self.anchors.clear();
        }
        r != 0
    }
}

/// Two descriptors: what moves, and where to.
type FdPair = (RawFd, RawFd);

/// What the child is given, prepared before the fork.
struct ChildPlan<'a> {
    /// Every descriptor the child keeps, sorted.
    keep: &'a [RawFd],
    max_fd: u32,
    owners: &'a [RawFd],
    map_len: usize,
    /// Each anchor with the owner whose ring it writes into.
    anchored: &'a [FdPair],
    /// Each event with the anchor it moves to, in order.
    moves: &'a [FdPair],
    ready: RawFd,
    go: RawFd,
}

/// In the forked child, `offwake-grow`: closes every descriptor but the
/// plan's, maps each new ring (the kernel allocates and clears it now),
/// says so, waits for [`GO`], attaches the anchors, moves the events to
/// them one after another, and exits. On end-of-file instead of GO (the
/// parent exited, or could not map the rings), nothing moves. Its mappings
/// go with it; the parent's keep the rings.
///
/// # Safety
/// Only to be called in a child just forked, with `plan.keep` sorted.
unsafe fn grow_then_exit(plan: &ChildPlan<'_>) -> ! {
    // SAFETY: plain syscalls on integers and static C strings; the
    // descriptors closed belong to values this child never returns to.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"offwake-grow".as_ptr());
        // Background work: neither the traced command nor the trace loop
        // should wait for it.
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        child::close_all_but(plan.keep, plan.max_fd);
    }
    for &owner in plan.owners {
        // SAFETY: maps a perf ring of `map_len` bytes at an address the
        // kernel picks; the child never touches it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                plan.map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                owner,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            // SAFETY: ends the child; the parent sees end-of-file.
            unsafe { libc::_exit(1) };
        }
    }
    let mut byte = MAPPED;
    // SAFETY: writes, then reads, one byte of a local through pipes this
    // child owns.
    unsafe {
        libc::write(plan.ready, (&raw const byte).cast(), 1);
        byte = 0;
        while libc::read(plan.go, (&raw mut byte).cast(), 1) < 0
            && *libc::__errno_location() == libc::EINTR
        {}
    }
    if byte != GO {
        // SAFETY: ends the child.
        unsafe { libc::_exit(0) };
    }
    for &(anchor, owner) in plan.anchored {
        // SAFETY: as below; an anchor has no ring yet, so this does not
        // wait. One that fails leaves its event where it is.
        unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(anchor, owner) };
    }
    // Back at normal priority: a move holds the lock of the launcher's
    // events, which the tracer takes too when it stops them.
    // SAFETY: plain syscall on integers.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 0) };
    for &(event, anchor) in plan.moves {
        // SAFETY: PERF_EVENT_IOC_SET_OUTPUT takes two descriptors this
        // process holds; a failure leaves the event where it was.
        unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(event, anchor) };
    }
    // SAFETY: ends the child.
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_rings_hold_enough_of_the_largest_samples() {
        let mib = |n: usize| (n << 20) / page_size();
        // The dwarf default: 16 MiB rings start at 4 MiB.
        assert_eq!(start_pages(mib(16), 8192), Some(mib(4)));
        // Frame pointers only: the same start.
        assert_eq!(start_pages(mib(16), 0), Some(mib(4)));
        // Twice the copy: twice the start.
        assert_eq!(start_pages(mib(16), 16384), Some(mib(8)));
        // 64 KiB copies would need more than the full ring: no growth.
        assert_eq!(start_pages(mib(16), 65528), None);
        // A ring no larger than the start does not grow.
        assert_eq!(start_pages(mib(4), 8192), None);
    }
}
