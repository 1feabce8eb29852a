//! Facts about tasks read from `/proc` with the `procfs` crate: a task's
//! process and parent, and a process's start time and state. Every answer
//! is `None` when the task is gone or its file cannot be parsed. Also a
//! process's threads, from `/proc/PID/task`.
//!
//! Three readers stay hand-written, where procfs would be wrong:
//! - a task's `stat` for its comm ([`crate::aggregate::tasks`]): procfs
//!   makes it a lossy `String`, where the tracepoints report bytes;
//! - `/proc/PID/maps` ([`crate::symbolize::maps`]): procfs slices a path
//!   that begins with `/SYSV` at fixed offsets, so a file a traced process
//!   names so could panic the tool;
//! - `/proc/self/mounts` ([`crate::source::tracepoint`]): procfs does not decode
//!   `\040`, so a mount point with a space would be misread.

use std::path::Path;

use procfs::process::Process;

/// The threads of process `pid`, from `/proc/PID/task` (empty when it is
/// gone).
pub(crate) fn threads_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .collect()
}

fn task(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// The process (TGID) of task `tid`: `/proc/TID` resolves for any thread,
/// even one that is not a process leader.
pub(crate) fn tgid(tid: u32) -> Option<u32> {
    tgid_in(task(tid)?)
}

/// [`tgid`] of task `tid` in a directory laid out like `/proc`.
pub(crate) fn tgid_under(root: &Path, tid: u32) -> Option<u32> {
    tgid_in(Process::new_with_root(root.join(tid.to_string())).ok()?)
}

fn tgid_in(p: Process) -> Option<u32> {
    u32::try_from(p.status().ok()?.tgid).ok()
}

/// The process (TGID) and parent process (PPid) of task `pid`.
pub(crate) fn owner(pid: u32) -> Option<(u32, u32)> {
    let status = task(pid)?.status().ok()?;
    Some((
        u32::try_from(status.tgid).ok()?,
        u32::try_from(status.ppid).ok()?,
    ))
}

/// When process `pid` started (`starttime`, in clock ticks after boot)
/// and its state letter.
pub(crate) fn start_and_state(pid: u32) -> Option<(u64, char)> {
    let stat = task(pid)?.stat().ok()?;
    Some((stat.starttime, stat.state))
}

/// Process `pid`'s id in its own PID namespace (the last of `NSpid`)
/// and its effective uid: whose `/tmp/perf-PID.map` it writes, and who
/// must own it.
pub(crate) fn ns_pid_and_euid(pid: u32) -> Option<(u32, u32)> {
    let status = task(pid)?.status().ok()?;
    let ns_pid = match status.nspid.as_deref() {
        Some([.., last]) => u32::try_from(*last).ok()?,
        _ => pid,
    };
    Some((ns_pid, status.euid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::OtherThread;

    #[test]
    fn own_task_facts() {
        let me = std::process::id();
        assert_eq!(tgid(me), Some(me));
        let other = OtherThread::start();
        assert_eq!(tgid(other.tid), Some(me));
        assert_eq!(owner(other.tid).map(|o| o.0), Some(me));
        drop(other);
        assert_eq!(
            owner(me).map(|o| o.1),
            Some(nix::unistd::getppid().as_raw() as u32)
        );
        let (start, state) = start_and_state(me).unwrap();
        assert!(start > 0);
        assert!(matches!(state, 'R' | 'S'), "{state}");
        assert_eq!(tgid(4_194_304), None);
        assert_eq!(start_and_state(4_194_304), None);
    }

    #[test]
    fn a_comm_with_parentheses_and_spaces_does_not_move_the_fields() {
        let stat = format!(
            "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 {}",
            ["0"; 32].join(" ")
        );
        use procfs::FromRead;
        let s = procfs::process::Stat::from_read(stat.as_bytes()).unwrap();
        assert_eq!(
            (s.starttime, s.state, s.comm.as_str()),
            (987654, 'S', "a) b) c")
        );
    }
}
