//! What is known about each thread: its process, comm and whether it is a
//! kernel thread, seeded from `/proc` and kept current from fork, comm and
//! exit events.
//!
//! Everything read from `/proc` is untrusted: a thread can vanish between
//! listing and reading, and a comm may hold spaces and `)`. Unreadable or
//! malformed entries are skipped, never fatal.

use std::fs;
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::event::Comm;

/// `PF_KTHREAD` in the `flags` field of `/proc/.../stat`.
pub(crate) const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_WQ_WORKER`: a workqueue worker thread.
pub(crate) const PF_WQ_WORKER: u64 = 0x0000_0020;

/// TID of `kthreadd`, the parent of every kernel thread.
pub(crate) const KTHREADD_TID: u32 = 2;

/// One thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskInfo {
    pub(crate) tgid: u32,
    pub(crate) comm: Comm,
    /// PF_KTHREAD.
    pub(crate) kthread: bool,
}

/// Threads by TID.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskTable {
    pub(crate) tasks: FxHashMap<u32, TaskInfo>,
}

/// What one `stat` file says: the comm and whether PF_KTHREAD is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatInfo {
    pub(crate) comm: Comm,
    pub(crate) kthread: bool,
}

/// Parses the contents of a `/proc/.../stat` file.
///
/// The comm is the text between the first `(` and the LAST `)` (a comm may
/// itself contain `)` and spaces); `flags` is the 7th field after it (the 9th
/// overall). Returns None when the text is malformed.
pub(crate) fn parse_stat(raw: &[u8]) -> Option<StatInfo> {
    let open = raw.iter().position(|&b| b == b'(')?;
    let close = raw.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let rest = std::str::from_utf8(&raw[close + 1..]).ok()?;
    // state ppid pgrp session tty_nr tpgid flags
    let flags: u64 = rest.split_ascii_whitespace().nth(6)?.parse().ok()?;
    let mut name = &raw[open + 1..close];
    // /proc names a workqueue worker `kworker/u8:1-writeback` (or `+` while
    // it runs a work item): its comm, as tracepoints and bpftrace report
    // it, is the part before.
    if flags & PF_WQ_WORKER != 0
        && name.starts_with(b"kworker/")
        && let Some(end) = name.iter().position(|&b| b == b'-' || b == b'+')
    {
        name = &name[..end];
    }
    Some(StatInfo {
        comm: Comm::from_bytes(name),
        kthread: flags & PF_KTHREAD != 0,
    })
}

fn numeric_entries(dir: &Path) -> Vec<u32> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    read.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

impl TaskTable {
    /// Every thread of every process in `/proc` (`/proc/PID/task/TID/stat`).
    ///
    /// Threads that vanish while scanning, or whose files cannot be parsed,
    /// are skipped.
    pub(crate) fn scan_proc() -> TaskTable {
        Self::scan_dir(Path::new("/proc"))
    }

    /// [`TaskTable::scan_proc`] over any directory laid out like `/proc`.
    pub(crate) fn scan_dir(root: &Path) -> TaskTable {
        let mut table = TaskTable::default();
        for pid in numeric_entries(root) {
            let task_dir = root.join(pid.to_string()).join("task");
            for tid in numeric_entries(&task_dir) {
                let stat_path = task_dir.join(tid.to_string()).join("stat");
                let Ok(raw) = fs::read(&stat_path) else {
                    continue;
                };
                if let Some(stat) = parse_stat(&raw) {
                    table.tasks.insert(
                        tid,
                        TaskInfo {
                            tgid: pid,
                            comm: stat.comm,
                            kthread: stat.kthread,
                        },
                    );
                }
            }
        }
        table
    }

    /// One thread, read from `/proc/TID/stat` (None if it is gone).
    /// Its TGID comes from `/proc/TID/status`.
    pub(crate) fn read_proc_task(tid: u32) -> Option<TaskInfo> {
        Self::read_task_in(Path::new("/proc"), tid)
    }

    /// [`TaskTable::read_proc_task`] over any directory laid out like `/proc`.
    pub(crate) fn read_task_in(root: &Path, tid: u32) -> Option<TaskInfo> {
        let dir = root.join(tid.to_string());
        let stat = parse_stat(&fs::read(dir.join("stat")).ok()?)?;
        let tgid = crate::sys::proc::tgid_under(root, tid)?;
        Some(TaskInfo {
            tgid,
            comm: stat.comm,
            kthread: stat.kthread,
        })
    }

    #[cfg(test)]
    pub(crate) fn get(&self, tid: u32) -> Option<&TaskInfo> {
        self.tasks.get(&tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_parens_and_spaces_in_comm() {
        let raw = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm.as_str(), "a) b (c)");
        assert!(!s.kthread);
    }

    #[test]
    fn workqueue_workers_have_their_comm_without_the_work_description() {
        // flags 0x04208060: PF_KTHREAD | PF_WQ_WORKER | ...
        let raw = b"57 (kworker/u8:1-writeback) I 2 0 0 0 -1 69238880 0 0 0 0";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm.as_str(), "kworker/u8:1");
        assert!(s.kthread);
        let busy = b"57 (kworker/0:1H+kblockd) R 2 0 0 0 -1 69238880 0 0 0 0";
        assert_eq!(parse_stat(busy).unwrap().comm.as_str(), "kworker/0:1H");
        // Not a worker (no PF_WQ_WORKER): the name is the comm.
        let plain = b"99 (kworker/x-y) S 1 0 0 0 -1 4194560 0 0 0 0";
        assert_eq!(parse_stat(plain).unwrap().comm.as_str(), "kworker/x-y");
    }

    #[test]
    fn stat_kthread_flag() {
        let raw = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0\n";
        let s = parse_stat(raw).unwrap();
        assert_eq!(s.comm.as_str(), "kthreadd");
        assert!(s.kthread);
    }

    #[test]
    fn stat_malformed() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2"), None);
        assert_eq!(parse_stat(b"1 x) S 1 2 3 4 5 6"), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2 3 4 5 notanumber"), None);
    }

    #[test]
    fn scan_fake_proc_tree() {
        let dir = std::env::temp_dir().join(format!("offwake-tasks-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let t = dir.join("10/task/11");
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("stat"), b"11 (worker (1)) S 1 10 10 0 -1 64 0 0").unwrap();
        let k = dir.join("2/task/2");
        fs::create_dir_all(&k).unwrap();
        fs::write(k.join("stat"), b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0").unwrap();
        let bad = dir.join("12/task/12");
        fs::create_dir_all(&bad).unwrap();
        fs::write(bad.join("stat"), b"garbage").unwrap();
        fs::create_dir_all(dir.join("self")).unwrap();
        let table = TaskTable::scan_dir(&dir);
        assert_eq!(table.tasks.len(), 2);
        assert_eq!(
            table.get(11),
            Some(&TaskInfo {
                tgid: 10,
                comm: Comm::from("worker (1)"),
                kthread: false
            })
        );
        assert!(table.get(2).unwrap().kthread);

        fs::write(dir.join("2/stat"), b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0").unwrap();
        // A whole status file, as the kernel writes it, saying Tgid 2.
        let own = fs::read_to_string("/proc/self/status").unwrap();
        let status: String = own
            .lines()
            .map(|l| {
                if l.starts_with("Tgid:") {
                    "Tgid:\t2".to_string()
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect();
        fs::write(dir.join("2/status"), status).unwrap();
        assert_eq!(
            TaskTable::read_task_in(&dir, 2),
            Some(TaskInfo {
                tgid: 2,
                comm: Comm::from("kthreadd"),
                kthread: true
            })
        );
        assert_eq!(TaskTable::read_task_in(&dir, 99), None);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn scan_real_proc_finds_self() {
        let table = TaskTable::scan_proc();
        let me = std::process::id();
        let info = table.get(me).expect("own thread in /proc");
        assert_eq!(info.tgid, me);
        assert!(!info.kthread);
        let direct = TaskTable::read_proc_task(me).expect("own /proc entry");
        assert_eq!(direct.tgid, me);
    }
}
