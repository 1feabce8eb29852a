//! Where the tool's busy threads run once they are real-time: off the
//! CPUs the traced threads are allowed, when their affinity leaves any.
//!
//! A real-time thread is woken on the CPU it last ran on, even when that
//! CPU runs a traced thread and another is idle (a normal thread is woken
//! on the idle one). Once the reader falls behind and is raised with the
//! stages' thread (see [`crate::sys::priority`]), the kernel's wakeups
//! would then keep both on a pinned workload's CPU, ahead of it: a
//! pinned `perf bench sched pipe` under `dwarf` ran a sixth slower in the
//! runs that raised them. So while raised they run on the CPUs no target
//! may use, if there are any; targets that may run anywhere leave them
//! where they were.
//!
//! Only the targets' own affinity counts (the processes of `-p`, the
//! threads of `-t`, the command's first process): a process they start
//! and pin elsewhere is not looked for.

use std::time::{Duration, Instant};

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// How often the targets' affinity is looked at.
const PERIOD: Duration = Duration::from_millis(100);

/// Past this many targets, their affinity is not looked at: the tool's
/// threads stay where they may run.
const MOST_TARGETS: usize = 64;

/// The tool's threads to place, and the targets they keep off.
pub(crate) struct KeepOff {
    targets: Vec<u32>,
    ours: Vec<Pid>,
    /// The CPUs the tool was allowed when it started.
    base: CpuSet,
    /// What `ours` are set to now, when set.
    applied: Option<CpuSet>,
    next: Instant,
}

impl KeepOff {
    /// Keeps `ours` (thread ids of this process) off the CPUs of
    /// `targets`, if there are few enough to look at.
    pub(crate) fn new(targets: Vec<u32>, ours: Vec<libc::pid_t>) -> Option<KeepOff> {
        if targets.is_empty() || targets.len() > MOST_TARGETS {
            return None;
        }
        Some(KeepOff {
            targets,
            ours: ours.into_iter().map(Pid::from_raw).collect(),
            base: sched_getaffinity(Pid::from_raw(0)).ok()?,
            applied: None,
            next: Instant::now(),
        })
    }

    /// Looks at the targets' affinity when due, and moves the tool's
    /// threads where it changed what they may use.
    pub(crate) fn tick(&mut self) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + PERIOD;
        let theirs: Vec<CpuSet> = self
            .targets
            .iter()
            .filter_map(|&t| sched_getaffinity(Pid::from_raw(i32::try_from(t).ok()?)).ok())
            .collect();
        let allowed = off(&self.base, &theirs);
        if self.applied.is_some_and(|a| a == allowed) {
            return;
        }
        for &tid in &self.ours {
            // A thread that cannot be moved stays where it was.
            let _ = sched_setaffinity(tid, &allowed);
        }
        self.applied = Some(allowed);
    }
}

/// The CPUs of `base` that none of `theirs` allows; `base` itself when
/// that leaves none, or when no target's affinity could be read.
fn off(base: &CpuSet, theirs: &[CpuSet]) -> CpuSet {
    if theirs.is_empty() {
        return *base;
    }
    let mut allowed = CpuSet::new();
    let mut any = false;
    for cpu in 0..CpuSet::count() {
        let ours = base.is_set(cpu).unwrap_or(false);
        let taken = theirs.iter().any(|t| t.is_set(cpu).unwrap_or(false));
        if ours && !taken && allowed.set(cpu).is_ok() {
            any = true;
        }
    }
    if any { allowed } else { *base }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        let mut s = CpuSet::new();
        for &c in cpus {
            s.set(c).unwrap();
        }
        s
    }

    #[test]
    fn the_tools_threads_go_where_no_target_may_run() {
        let base = set(&[0, 1, 2, 3]);
        // One target pinned to CPU 0, another to 0 and 2.
        assert_eq!(off(&base, &[set(&[0]), set(&[0, 2])]), set(&[1, 3]));
        // Targets that may run anywhere leave the tool where it was.
        assert_eq!(off(&base, &[set(&[0]), set(&[0, 1, 2, 3])]), base);
        // So do targets whose affinity could not be read.
        assert_eq!(off(&base, &[]), base);
        // Only CPUs the tool itself was allowed.
        assert_eq!(off(&set(&[0, 1]), &[set(&[1])]), set(&[0]));
        assert_eq!(off(&set(&[1]), &[set(&[1])]), set(&[1]));
    }
}
