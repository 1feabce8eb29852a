//! Closing perf events off the run's critical path.
//!
//! When the last perf event on a tracepoint is closed, the kernel waits
//! for RCU grace periods before `close` returns (tens of milliseconds each
//! on a small VM), and a process's exit waits for its files to be
//! released. So events are never closed where that wait would show:
//!
//! - during tracing, the events of exited threads are kept, disabled, in a
//!   [`Graveyard`] and closed in batches by a thread of their own (the
//!   capability probes wait there for the end);
//! - at the end, once the report is out, [`close_detached`] forks a
//!   short-lived process that keeps a copy of every descriptor while this
//!   one drops its own (cheaply: the copies keep the events alive) and
//!   exits. The child first does the work left to it ([`child::leave`]),
//!   and releases the events [`LINGER`] later: a run started
//!   meanwhile opens events on tracepoints still in use, so neither its
//!   opens nor this release wait for a grace period (the kernel keeps its
//!   own scheduler hooks for perf a second in the same way).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::mpsc;

use crate::sys::child;

/// How long the holder of a finished run's events keeps them, disabled.
const LINGER: libc::timespec = libc::timespec {
    tv_sec: 1,
    tv_nsec: 0,
};

/// Dead events kept before a batch is handed to the closing thread: a
/// short run closes none of them itself, a long one with many threads
/// coming and going holds few descriptors.
const BATCH: usize = 64;

/// Events that will record nothing more, waiting to be closed.
#[derive(Default)]
pub(crate) struct Graveyard {
    dead: Vec<OwnedFd>,
    closer: Option<mpsc::Sender<Vec<OwnedFd>>>,
}

impl Graveyard {
    /// Keeps `fds` to be closed later.
    pub(crate) fn bury(&mut self, fds: impl IntoIterator<Item = OwnedFd>) {
        self.dead.extend(fds);
        if self.dead.len() >= BATCH {
            let batch = std::mem::take(&mut self.dead);
            self.close_soon(batch);
        }
    }

    /// Has `fds` closed at once, by the closing thread.
    pub(crate) fn close_soon(&mut self, fds: Vec<OwnedFd>) {
        if fds.is_empty() {
            return;
        }
        if let Err(mpsc::SendError(fds)) = self.closer().send(fds) {
            // No closing thread: closed here.
            drop(fds);
        }
    }

    fn closer(&mut self) -> &mpsc::Sender<Vec<OwnedFd>> {
        self.closer.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Vec<OwnedFd>>();
            // Without a thread, the receiver is dropped and each batch is
            // closed by `close_soon` itself.
            let _ = std::thread::Builder::new()
                .name("offwake-close".into())
                .spawn(move || rx.into_iter().for_each(drop));
            tx
        })
    }

    /// The events not yet handed to the closing thread.
    pub(crate) fn take(&mut self) -> Vec<OwnedFd> {
        std::mem::take(&mut self.dead)
    }
}

/// Closes `fds` without waiting for the kernel to release their events: a
/// forked child keeps copies of them, this process closes its own, and the
/// child releases the events [`LINGER`] after this process has let go.
/// Where `fork` fails they are simply closed here.
pub(crate) fn close_detached(fds: Vec<OwnedFd>) {
    if fds.is_empty() {
        return;
    }
    let Ok((gone_r, gone_w)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else {
        return drop(fds);
    };
    let jobs = child::take_left();
    let mut keep: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    keep.push(gone_r.as_raw_fd());
    keep.extend(jobs.iter().flat_map(|j| j.keep.iter().copied()));
    keep.sort_unstable();
    keep.dedup();
    let wait_fd = gone_r.as_raw_fd();
    // At most 65536 descriptors closed one by one, whatever the limit was
    // raised to.
    let max_fd = child::open_files_limit().min(1 << 16);
    // SAFETY: in the child only plain system calls are made (setsid,
    // chdir, prctl, sched_setscheduler, close_range or close, read,
    // nanosleep, _exit), on memory prepared before the fork (`keep`, not
    // reallocated), and the jobs, which promise the same, as a
    // multithreaded parent requires: nothing allocates or takes a lock.
    // Signals stay blocked there for good (a SIGKILL still ends it, which
    // releases the events at once).
    let (pid, _) = unsafe { child::fork_signals_blocked() };
    if pid == 0 {
        // SAFETY: this is the child just forked, and `keep` is sorted.
        unsafe { hold_then_exit(&keep, &jobs, wait_fd, max_fd) };
    }
    match pid {
        -1 => {
            drop(fds);
            jobs.iter().for_each(|j| (j.run)());
        }
        _ => {
            drop(fds);
            drop(gone_r);
            // The child sees end-of-file and exits: the last reference to
            // each event is now its own.
            drop(gone_w);
        }
    }
}

/// In the forked child, named `offwake-release`, with every signal
/// blocked: leaves the parent's session and working directory, closes
/// every descriptor but `keep` (so that no pipe or output file of the
/// parent stays open), runs `jobs`, waits for `wait_fd` to reach
/// end-of-file, then [`LINGER`], and exits, which releases the events.
///
/// # Safety
/// Only to be called in a child just forked, with `keep` sorted and
/// holding the jobs' descriptors.
unsafe fn hold_then_exit(keep: &[RawFd], jobs: &[child::Job], wait_fd: RawFd, max_fd: u32) -> ! {
    // SAFETY: setsid, chdir and prctl are plain syscalls; the strings are
    // static C strings. Failures leave the child as it was, harmlessly.
    unsafe {
        libc::setsid();
        libc::chdir(c"/".as_ptr());
        // Not another tracer to `ps` (and bench/run): it records nothing.
        libc::prctl(libc::PR_SET_NAME, c"offwake-release".as_ptr());
    }
    // SAFETY: this is the forked child, which never returns to the
    // parent's values; `keep` is sorted.
    unsafe { child::close_all_but(keep, max_fd) };
    // The jobs (writing a cache) are for the next run: they take only a
    // CPU that nothing else wants, and leave this process's exit alone.
    let idle = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads one sched_param for this process.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) };
    jobs.iter().for_each(|j| (j.run)());
    let mut byte = 0u8;
    // The parent never writes: the read ends at end-of-file (or an error).
    // SAFETY: reads into a local byte from a descriptor this child owns.
    while unsafe { libc::read(wait_fd, (&raw mut byte).cast(), 1) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    let mut left = LINGER;
    // SAFETY: nanosleep reads `left` and writes what remains of it when a
    // signal interrupts the sleep.
    while unsafe { libc::nanosleep(&left, &mut left) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    // SAFETY: _exit ends the child without running the parent's handlers.
    unsafe { libc::_exit(0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A pipe: the write end to hand over, and a check that every copy of
    /// it is closed (the read end then reaches end-of-file).
    fn pipe() -> (OwnedFd, impl FnOnce()) {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let closed = move || {
            let mut buf = Vec::new();
            std::fs::File::from(r).read_to_end(&mut buf).unwrap();
            assert!(buf.is_empty());
        };
        (w, closed)
    }

    #[test]
    fn detached_descriptors_are_all_closed_in_the_end() {
        let (ws, checks): (Vec<_>, Vec<_>) = (0..5).map(|_| pipe()).unzip();
        close_detached(ws);
        // Returns once the holder, too, has let go.
        checks.into_iter().for_each(|c| c());
    }

    #[test]
    fn the_holder_keeps_nothing_else_open() {
        let (event, _) = pipe();
        let (other, other_closed) = pipe();
        // `other` is open here when the holder is forked, and must not be
        // held by it: its read end sees end-of-file once we close ours,
        // whether or not the holder has exited.
        close_detached(vec![event]);
        drop(other);
        other_closed();
    }

    #[test]
    fn the_holder_does_the_work_left_to_it() {
        let (event, _) = pipe();
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let w = std::sync::Arc::new(w);
        let job_w = std::sync::Arc::clone(&w);
        child::leave(child::Job {
            keep: vec![w.as_raw_fd()],
            run: Box::new(move || {
                // SAFETY: writes a static byte to a descriptor the job owns.
                unsafe { libc::write(job_w.as_raw_fd(), c"x".as_ptr().cast(), 1) };
            }),
        });
        close_detached(vec![event]);
        drop(w);
        // The job ran once, in the holder (another test's holder may have
        // taken it: it runs there all the same), which closes its copy.
        let mut got = Vec::new();
        std::fs::File::from(r).read_to_end(&mut got).unwrap();
        assert_eq!(got, b"x");
    }

    #[test]
    fn a_graveyard_closes_in_batches() {
        let mut g = Graveyard::default();
        let (ws, checks): (Vec<_>, Vec<_>) = (0..BATCH).map(|_| pipe()).unzip();
        let mut ws = ws.into_iter();
        g.bury(ws.by_ref().take(BATCH - 1));
        assert_eq!(g.dead.len(), BATCH - 1);
        g.bury(ws);
        assert!(g.dead.is_empty());
        // The closing thread closes the batch.
        checks.into_iter().for_each(|c| c());
        let (w, _) = pipe();
        g.bury([w]);
        assert_eq!(g.take().len(), 1);
    }
}
