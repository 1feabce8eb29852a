//! Facts about tasks read from `/proc` with the `procfs` crate: a task's
//! process and parent, and a process's start time and state. Every answer
//! is `None` when the task is gone or its file cannot be parsed. Also a
//! process's threads, from `/proc/PID/task`, and every thread's comm.
//!
//! Everything read from `/proc` is untrusted: a thread can vanish between
//! listing and reading, and a comm may hold spaces and `)`. Unreadable or
//! malformed entries are skipped, never fatal.
//!
//! Three readers stay hand-written, where procfs would be wrong:
//! - a task's `stat` for its comm ([`parse_stat`]): procfs makes it a
//!   lossy `String`, where the tracepoints report bytes;
//! - `/proc/PID/maps` ([`crate::symbolize::maps`]): procfs slices a path
//!   that begins with `/SYSV` at fixed offsets, so a file a traced process
//!   names so could panic the tool;
//! - `/proc/self/mounts` ([`crate::source::tracepoint`]): procfs does not decode
//!   `\040`, so a mount point with a space would be misread.
//!
//! [`read_capped`] reads at most so many bytes of a file, in whole lines:
//! the head of a task's `status` here, cgroup files in [`super::cgroup`].

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
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

/// The process (TGID) and parent process (PPid) of task `pid`. The reader
/// of the rings asks this of every pid a forecast saw allocated, so only
/// the head of `/proc/PID/status` is read and parsed ([`parse_owner`]).
pub(crate) fn owner(pid: u32) -> Option<(u32, u32)> {
    let head = read_capped(Path::new(&format!("/proc/{pid}/status")), STATUS_HEAD).ok()?;
    parse_owner(&head)
}

/// How much of `/proc/PID/status` holds its `Tgid` and `PPid` lines: they
/// follow `Name` (a comm of 16 bytes, at most 64 escaped), `Umask` and
/// `State`.
const STATUS_HEAD: u64 = 512;

/// `Tgid` and `PPid` from the head of a `status` file. Only whole lines
/// count, so a number cut by the end of the head is never read short. The
/// kernel escapes a newline in the comm, so a name cannot forge a line.
fn parse_owner(head: &[u8]) -> Option<(u32, u32)> {
    let whole = &head[..head.iter().rposition(|&b| b == b'\n')?];
    let value = |line: &[u8], key: &[u8]| -> Option<u32> {
        let v = line.strip_prefix(key)?;
        std::str::from_utf8(v).ok()?.trim().parse().ok()
    };
    let mut tgid = None;
    for line in whole.split(|&b| b == b'\n') {
        if let Some(t) = value(line, b"Tgid:") {
            tgid = Some(t);
        } else if let Some(p) = value(line, b"PPid:") {
            return Some((tgid?, p));
        }
    }
    None
}

/// When process `pid` started (`starttime`, in clock ticks after boot)
/// and its state letter.
pub(crate) fn start_and_state(pid: u32) -> Option<(u64, char)> {
    let stat = task(pid)?.stat().ok()?;
    Some((stat.starttime, stat.state))
}

/// What no unprivileged process can make one of its own look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Standing {
    /// When the process started (`starttime`, in clock ticks after boot).
    pub(crate) start: u64,
    /// It runs as root (real and effective uid 0).
    pub(crate) root: bool,
    /// It has exited, and waits to be reaped.
    pub(crate) exited: bool,
}

/// The [`Standing`] of process `pid`.
pub(crate) fn standing(pid: u32) -> Option<Standing> {
    let p = task(pid)?;
    let status = p.status().ok()?;
    let stat = p.stat().ok()?;
    Some(Standing {
        start: stat.starttime,
        root: status.ruid == 0 && status.euid == 0,
        exited: matches!(stat.state, 'Z' | 'X'),
    })
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

/// `PF_KTHREAD` in the `flags` field of `/proc/.../stat`.
const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_WQ_WORKER`: a workqueue worker thread.
const PF_WQ_WORKER: u64 = 0x0000_0020;

/// What one `stat` file says of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat<'a> {
    /// Its comm, as the tracepoints report it.
    pub(crate) comm: &'a [u8],
    /// PF_KTHREAD.
    pub(crate) kthread: bool,
}

/// Parses the contents of a `/proc/.../stat` file.
///
/// The comm is the text between the first `(` and the LAST `)` (a comm may
/// itself contain `)` and spaces); `flags` is the 7th field after it (the 9th
/// overall). Returns None when the text is malformed.
pub(crate) fn parse_stat(raw: &[u8]) -> Option<Stat<'_>> {
    let open = raw.iter().position(|&b| b == b'(')?;
    let close = raw.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    // state ppid pgrp session tty_nr tpgid flags
    let flags: u64 = rest.split_ascii_whitespace().nth(6)?.parse().ok()?;
    let mut comm = &raw[open + 1..close];
    // /proc names a workqueue worker `kworker/u8:1-writeback` (or `+` while
    // it runs a work item): its comm, as tracepoints and bpftrace report
    // it, is the part before.
    if flags & PF_WQ_WORKER != 0
        && comm.starts_with(b"kworker/")
        && let Some(end) = comm.iter().position(|&b| b == b'-' || b == b'+')
    {
        comm = &comm[..end];
    }
    Some(Stat {
        comm,
        kthread: flags & PF_KTHREAD != 0,
    })
}

/// The entries of `dir` named by a number.
pub(crate) fn numeric_entries(dir: &Path) -> Vec<u32> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// Calls `f(tgid, tid, stat)` for every thread of every process under
/// `root`, a directory laid out like `/proc` (`PID/task/TID/stat`).
/// Threads that vanish meanwhile, or whose files cannot be parsed, are
/// skipped.
pub(crate) fn each_thread_under(root: &Path, mut f: impl FnMut(u32, u32, Stat<'_>)) {
    for pid in numeric_entries(root) {
        let task_dir = root.join(pid.to_string()).join("task");
        for tid in numeric_entries(&task_dir) {
            let Ok(raw) = std::fs::read(task_dir.join(tid.to_string()).join("stat")) else {
                continue;
            };
            if let Some(stat) = parse_stat(&raw) {
                f(pid, tid, stat);
            }
        }
    }
}

/// `f(tgid, stat)` of thread `tid` under `root` (laid out like `/proc`):
/// its `TID/stat`, and its process from `TID/status`; `None` when it is
/// gone.
pub(crate) fn thread_under<T>(
    root: &Path,
    tid: u32,
    f: impl FnOnce(u32, Stat<'_>) -> T,
) -> Option<T> {
    let raw = std::fs::read(root.join(tid.to_string()).join("stat")).ok()?;
    let stat = parse_stat(&raw)?;
    let tgid = tgid_under(root, tid)?;
    Some(f(tgid, stat))
}

/// Up to `cap` bytes of file `path` and, when it holds more, only the
/// lines that end within them. Opened without following a symlink and
/// without blocking.
pub(crate) fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let mut buf = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > cap {
        buf.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
        let end = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        buf.truncate(end);
    }
    Ok(buf)
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
    fn the_owner_comes_from_whole_lines_of_the_status_head() {
        let status = b"Name:\tTgid:\\t7\\nPPid:\\t8\nUmask:\t0022\nState:\tS (sleeping)\n\
                       Tgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t17\nTracerPid:\t0\n";
        assert_eq!(parse_owner(status), Some((4242, 17)));
        // The PPid line cut short, or missing: no answer, never a wrong one.
        let cut = status.iter().position(|&b| b == b'7').unwrap();
        let at = status.windows(6).position(|w| w == b"PPid:\t").unwrap();
        assert_eq!(parse_owner(&status[..at + 7]), None);
        assert_eq!(parse_owner(&status[..cut]), None);
        assert_eq!(parse_owner(b"PPid:\t1\nTgid:\t2\n"), None);
        assert_eq!(parse_owner(b""), None);
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

    #[test]
    fn stat_with_parens_and_spaces_in_comm() {
        let raw = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm, b"a) b (c)");
        assert!(!s.kthread);
    }

    #[test]
    fn workqueue_workers_have_their_comm_without_the_work_description() {
        // flags 0x04208060: PF_KTHREAD | PF_WQ_WORKER | ...
        let raw = b"57 (kworker/u8:1-writeback) I 2 0 0 0 -1 69238880 0 0 0 0";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm, b"kworker/u8:1");
        assert!(s.kthread);
        let busy = b"57 (kworker/0:1H+kblockd) R 2 0 0 0 -1 69238880 0 0 0 0";
        assert_eq!(parse_stat(busy).unwrap().comm, b"kworker/0:1H");
        // Not a worker (no PF_WQ_WORKER): the name is the comm.
        let plain = b"99 (kworker/x-y) S 1 0 0 0 -1 4194560 0 0 0 0";
        assert_eq!(parse_stat(plain).unwrap().comm, b"kworker/x-y");
    }

    #[test]
    fn stat_kthread_flag() {
        let raw = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0\n";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm, b"kthreadd");
        assert!(s.kthread);
    }

    #[test]
    fn stat_malformed() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2"), None);
        assert_eq!(parse_stat(b"1 x) S 1 2 3 4 5 6"), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2 3 4 5 notanumber"), None);
    }
}
