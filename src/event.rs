//! Backend-neutral events: the one vocabulary every backend (perf, tracefs)
//! emits and everything downstream (aggregate, symbolize) consumes.
//!
//! Events are delivered in global timestamp order (see [`crate::reorder`]).
//! Times are nanoseconds of `CLOCK_MONOTONIC`, shared by all CPUs.

use std::borrow::Cow;
use std::fmt;

/// A task's `comm`: up to 16 bytes, NUL-padded, exactly as the kernel keeps it.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Comm(pub [u8; 16]);

impl Comm {
    /// Builds a comm from raw bytes, stopping at the first NUL and keeping at
    /// most 16 bytes.
    pub fn from_bytes(raw: &[u8]) -> Comm {
        let mut out = [0u8; 16];
        let len = raw
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.len())
            .min(16);
        out[..len].copy_from_slice(&raw[..len]);
        Comm(out)
    }

    /// The bytes before the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(16);
        &self.0[..len]
    }

    /// The comm as text (invalid UTF-8 replaced).
    pub fn as_str(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }

    /// True for the empty comm (used for "no waker").
    pub fn is_empty(&self) -> bool {
        self.0[0] == 0
    }
}

impl From<&str> for Comm {
    fn from(s: &str) -> Comm {
        Comm::from_bytes(s.as_bytes())
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// A sampled callchain split into its kernel and user parts.
///
/// Both parts are innermost frame first, with every `PERF_CONTEXT_*` marker
/// removed. Entry 0 of each part is the exact instruction pointer; later
/// entries are return addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Callchain {
    pub kernel: Vec<u64>,
    pub user: Vec<u64>,
}

/// `sched:sched_switch`, sampled in the context of the task leaving the CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Thread leaving the CPU (`prev_pid`); 0 is this CPU's idle task.
    pub prev_tid: u32,
    /// Process of `prev_tid` (the sample's pid); 0 for idle.
    pub prev_tgid: u32,
    pub prev_comm: Comm,
    /// `prev_state` exactly as the tracepoint reports it: one report bit
    /// (S=1 … I=128), the preempted marker (`TASK_REPORT_MAX`, 256 on
    /// current kernels) or 0.
    pub prev_state: u64,
    /// Thread entering the CPU (`next_pid`); 0 is this CPU's idle task.
    pub next_tid: u32,
    pub next_comm: Comm,
    /// Callchain of the switch-out (the blocked stack of `prev_tid`).
    pub stack: Callchain,
}

/// `sched:sched_waking`, sampled in the context of the waker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waking {
    /// The task running when the wakeup happened (the waker); 0 is idle.
    pub waker_tid: u32,
    pub waker_tgid: u32,
    /// The task being woken (the tracepoint's `pid` field).
    pub wakee_tid: u32,
    pub wakee_comm: Comm,
    /// The waker's callchain. Its kernel part begins at the *caller* of
    /// `try_to_wake_up`: backends drop the tracepoint's own site.
    pub stack: Callchain,
}

/// A new task (process or thread). `tgid == parent_tgid` for a new thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fork {
    pub parent_tgid: u32,
    pub parent_tid: u32,
    pub tgid: u32,
    pub tid: u32,
}

/// A task exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    pub tgid: u32,
    pub tid: u32,
}

/// A task's comm changed: `exec` is true when it changed because of execve
/// (the process's memory map was replaced too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommChange {
    pub tgid: u32,
    pub tid: u32,
    pub comm: Comm,
    pub exec: bool,
}

/// A file (or anonymous region) mapped into a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mmap {
    pub tgid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Path as the kernel printed it (may be `[vdso]`, `//anon`, …).
    pub path: String,
    /// True when the mapping is executable.
    pub executable: bool,
}

/// A thread came onto a CPU, from perf's context-switch record (emitted in
/// `finish_task_switch`, in the incoming thread's context). It backs up the
/// `next_pid` side of `sched_switch`, which some kernels do not report for
/// every switch (seen: switches out of the idle task on one CPU of a VM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchIn {
    pub tid: u32,
    pub tgid: u32,
    /// The thread that left the CPU (0 for idle).
    pub prev_tid: u32,
}

/// Records the kernel could not deliver (ring full, or samples dropped), or
/// may not have: `records` is 0 when a backend found a ring too full to be
/// sure (perf writes its own lost record only with that CPU's next record,
/// which can come long after intervals the loss falls inside were closed).
///
/// The loss happened somewhere between the event's `time` (the last record
/// delivered by that CPU before the gap) and `until` (the first one after
/// it, or the moment the ring had room again): every interval that overlaps
/// that window may be wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lost {
    pub records: u64,
    /// End of the window, `>=` the event's time.
    pub until: u64,
}

/// Counters kept by a backend while reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Records the kernel reported lost.
    pub lost_records: u64,
    /// Records read and decoded (record types we do not use are read and
    /// skipped, and counted here too).
    pub records: u64,
    /// Records that could not be decoded (skipped, counted), plus buffer
    /// inconsistencies (each one drops the rest of that read).
    pub malformed: u64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    Switch(Switch),
    SwitchIn(SwitchIn),
    Waking(Waking),
    Fork(Fork),
    Exit(Exit),
    Comm(CommChange),
    Mmap(Mmap),
    Lost(Lost),
}

/// One event: when, where, what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Nanoseconds, `CLOCK_MONOTONIC`.
    pub time: u64,
    /// CPU whose ring buffer delivered the event.
    pub cpu: u32,
    pub kind: EventKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_stops_at_nul_and_truncates() {
        assert_eq!(Comm::from_bytes(b"abc\0def").as_str(), "abc");
        assert_eq!(
            Comm::from_bytes(b"0123456789abcdefXYZ").as_str(),
            "0123456789abcdef"
        );
        assert!(Comm::default().is_empty());
        assert_eq!(Comm::from("swapper/1").to_string(), "swapper/1");
    }
}
