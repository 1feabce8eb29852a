//! Visiting each CPU in turn, so that whatever runs on it is switched out
//! once.

use std::time::Duration;

/// How long [`super::PerfBackend::finish`] waits for [`visit_cpus`].
pub(super) const VISIT_TIMEOUT: Duration = Duration::from_millis(200);

/// Runs a thread on each of `cpus` in turn, at the highest real-time
/// priority where that is allowed, so that whatever runs on each is
/// switched out once:
/// per-task events sample that switch-out, which tells when each traced
/// thread that was running had switched in ([`super::running`]). Each
/// visit costs the thread it preempts a few microseconds. Returns whether
/// every CPU was visited within `within` (a CPU busy with real-time work
/// may not let a normal thread in: the visits then go on, unwaited for).
pub(crate) fn visit_cpus(cpus: &[u32], within: Duration) -> bool {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;

    let cpus = cpus.to_vec();
    let (done, visited) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("offwake-visit".to_string())
        .spawn(move || {
            for cpu in cpus {
                let mut set = CpuSet::new();
                if set.set(cpu as usize).is_ok() {
                    // Returns once this thread runs on `cpu`.
                    let _ = sched_setaffinity(Pid::from_raw(0), &set);
                }
            }
            let _ = done.send(());
        });
    // Raised before it first runs, where that is allowed.
    if let Ok(thread) = &spawned {
        crate::sys::priority::raise_spawned(thread, top_priority());
    }
    spawned.is_ok() && visited.recv_timeout(within).is_ok()
}

/// `SCHED_FIFO`'s highest priority.
fn top_priority() -> libc::c_int {
    // SAFETY: plain syscall with no pointer arguments.
    unsafe { libc::sched_get_priority_max(libc::SCHED_FIFO) }.max(1)
}
