//! Per-process memory maps over time: a `/proc/PID/maps` snapshot when a
//! process is first seen, then fork, exec, mmap and exit events, so that a
//! user address can be resolved against the map as it was when sampled, even
//! after the process has exited.

use crate::event::Event;

/// The memory-map history of every process seen.
#[derive(Debug, Default)]
pub struct ProcessMaps {}

impl ProcessMaps {
    pub fn new() -> ProcessMaps {
        ProcessMaps {}
    }

    /// Makes sure `tgid` has a map: if it has none yet, snapshots
    /// `/proc/<tgid>/maps` as of `time`. Cheap when already known.
    pub fn ensure_known(&mut self, tgid: u32, time: u64) {
        let _ = (tgid, time);
        todo!()
    }

    /// Applies a fork (child copies its parent's map), exec (map cleared),
    /// mmap or exit event. Other events are ignored.
    pub fn observe(&mut self, event: &Event) {
        let _ = event;
        todo!()
    }
}
