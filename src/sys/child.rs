//! What a child forked from this multithreaded process does before it
//! does its own work: close every descriptor of the parent it does not
//! need, with async-signal-safe calls only, and the fork itself (for the
//! ftrace instance's guardian and the holder of released perf events);
//! and the work a run leaves to the child forked at its end ([`leave`]).

use std::os::fd::RawFd;
use std::sync::Mutex;

/// Work to be done after the report, off the way to this process's exit:
/// in the holder of released perf events, forked then, else by whoever
/// ends the run (see [`take_left`]).
pub(crate) struct Job {
    /// The descriptors `run` uses: kept open in the child.
    pub(crate) keep: Vec<RawFd>,
    /// Runs in a child forked from this multithreaded process: only
    /// async-signal-safe calls (no allocation, no lock) on memory prepared
    /// before the fork. Never dropped there.
    pub(crate) run: Box<dyn Fn() + Send>,
}

static LEFT: Mutex<Vec<Job>> = Mutex::new(Vec::new());

/// Leaves `job` to the next child forked at the end of the run.
pub(crate) fn leave(job: Job) {
    match LEFT.lock() {
        Ok(mut left) => left.push(job),
        // Poisoned: done here.
        Err(_) => (job.run)(),
    }
}

/// The jobs left and not yet taken: by the child about to be forked, or,
/// when none was, to be run by the caller.
pub(crate) fn take_left() -> Vec<Job> {
    LEFT.lock()
        .map(|mut left| std::mem::take(&mut *left))
        .unwrap_or_default()
}

/// The most descriptors closed one by one where `close_range` is missing
/// (Linux before 5.9).
const MAX_FDS_CLOSED: u32 = 1 << 20;

/// The soft limit on open files, for closing descriptors one by one: read
/// in the parent, before the fork.
pub(crate) fn open_files_limit() -> u32 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return MAX_FDS_CLOSED;
    }
    u32::try_from(lim.rlim_cur).map_or(MAX_FDS_CLOSED, |n| n.min(MAX_FDS_CLOSED))
}

/// Closes every descriptor except those in `keep` (sorted): with
/// `close_range` over the gaps, else one by one below `max_fd`.
///
/// # Safety
///
/// Async-signal-safe, and allocates nothing; closes descriptors that Rust
/// values in the parent may own, so only for a forked child, which never
/// returns to them.
pub(crate) unsafe fn close_all_but(keep: &[RawFd], max_fd: u32) {
    let mut from: libc::c_uint = 0;
    let mut ranged = true;
    for &fd in keep {
        let Ok(fd) = libc::c_uint::try_from(fd) else {
            continue;
        };
        // SAFETY: close_range takes plain integers.
        if fd > from && unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) } != 0 {
            ranged = false;
        }
        from = fd.saturating_add(1);
    }
    // SAFETY: as above.
    if unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) } != 0 {
        ranged = false;
    }
    if ranged {
        return;
    }
    for fd in 0..max_fd {
        let Ok(fd) = RawFd::try_from(fd) else { break };
        if keep.binary_search(&fd).is_err() {
            // SAFETY: closes a descriptor number this child may or may not
            // have; EBADF is harmless.
            unsafe { libc::close(fd) };
        }
    }
}

/// Forks with every signal blocked across the fork: the parent's handlers
/// must never run in the child, which keeps them blocked (a SIGKILL still
/// ends it). The parent gets its signal mask back, and remembers the
/// child as one of its own tasks ([`super::own`]). Returns what `fork`
/// returned, and the mask the parent had.
///
/// # Safety
///
/// The child, this process being multithreaded, may only make
/// async-signal-safe calls on memory prepared before the fork (nothing
/// that allocates or takes a lock), and must end with `_exit`.
pub(crate) unsafe fn fork_signals_blocked() -> (libc::pid_t, libc::sigset_t) {
    // SAFETY: sigset_t is plain data that sigfillset fills in;
    // pthread_sigmask reads `all` and writes the old mask into `old`.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    // SAFETY: the caller keeps the child to what a multithreaded parent
    // allows.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        let forked = std::io::Error::last_os_error();
        // SAFETY: restores the mask read above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        // The caller reads fork's error after this.
        if pid < 0 {
            // SAFETY: errno is this thread's; restoring it is plain data.
            unsafe { *libc::__errno_location() = forked.raw_os_error().unwrap_or(0) };
        } else {
            super::own::add_helper(pid as u32);
        }
    }
    (pid, old)
}
