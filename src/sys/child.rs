//! What a child forked from this multithreaded process does before it
//! does its own work: close every descriptor of the parent it does not
//! need, with async-signal-safe calls only (the ftrace instance's guardian
//! and the holder of released perf events).

use std::os::fd::RawFd;

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
