//! What is known about each thread: its process, comm and whether it is a
//! kernel thread, seeded from `/proc` and kept current from fork, comm and
//! exit events.

use std::collections::HashMap;

use crate::event::Comm;

/// One thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    pub tgid: u32,
    pub comm: Comm,
    /// PF_KTHREAD.
    pub kthread: bool,
}

/// Threads by TID.
#[derive(Clone, Debug, Default)]
pub struct TaskTable {
    pub tasks: HashMap<u32, TaskInfo>,
}

impl TaskTable {
    /// Every thread of every process in `/proc` (`/proc/PID/task/TID/stat`).
    pub fn scan_proc() -> TaskTable {
        todo!()
    }

    /// One thread, read from `/proc/TID/stat` (None if it is gone).
    pub fn read_proc_task(tid: u32) -> Option<TaskInfo> {
        let _ = tid;
        todo!()
    }
}
