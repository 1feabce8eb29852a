//! What is known about each thread: its process, comm and whether it is a
//! kernel thread, seeded from `/proc` (read by `crate::sys::proc`) and kept
//! current from fork, comm and exit events.

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::event::Comm;
use crate::sys::proc;

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

impl TaskInfo {
    fn of(tgid: u32, stat: proc::Stat<'_>) -> TaskInfo {
        TaskInfo {
            tgid,
            comm: Comm::from_bytes(stat.comm),
            kthread: stat.kthread,
        }
    }
}

/// Threads by TID.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskTable {
    pub(crate) tasks: FxHashMap<u32, TaskInfo>,
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
        proc::each_thread_under(root, |tgid, tid, stat| {
            table.tasks.insert(tid, TaskInfo::of(tgid, stat));
        });
        table
    }

    /// One thread, read from `/proc/TID/stat` (None if it is gone).
    /// Its TGID comes from `/proc/TID/status`.
    pub(crate) fn read_proc_task(tid: u32) -> Option<TaskInfo> {
        Self::read_task_in(Path::new("/proc"), tid)
    }

    /// [`TaskTable::read_proc_task`] over any directory laid out like `/proc`.
    pub(crate) fn read_task_in(root: &Path, tid: u32) -> Option<TaskInfo> {
        proc::thread_under(root, tid, TaskInfo::of)
    }

    #[cfg(test)]
    pub(crate) fn get(&self, tid: u32) -> Option<&TaskInfo> {
        self.tasks.get(&tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
