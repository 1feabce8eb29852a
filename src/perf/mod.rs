//! The perf backend: `perf_event_open` on `sched:sched_switch` and
//! `sched:sched_waking` on every online CPU, per-CPU ring buffers, and
//! decoding of samples and side-band records into [`crate::event::Event`]s
//! delivered in global time order.

use std::time::Duration;

use anyhow::Result;

use crate::event::Event;
use crate::tracefs::Tracefs;

/// What to open.
#[derive(Clone, Debug)]
pub struct PerfConfig {
    /// Ring-buffer data size per CPU, in pages (a power of two).
    pub mmap_pages: usize,
    /// Take kernel callchains (false under `-U`).
    pub kernel_callchain: bool,
    /// Take user callchains (false under `-K`).
    pub user_callchain: bool,
}

/// Counters kept by the backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfStats {
    /// Records the kernel reported lost (`PERF_RECORD_LOST` and
    /// `PERF_RECORD_LOST_SAMPLES`).
    pub lost_records: u64,
    /// Records read and decoded.
    pub records: u64,
    /// Records that could not be decoded (skipped, counted).
    pub malformed: u64,
}

/// Open, enabled perf events and their rings.
pub struct PerfBackend {}

impl PerfBackend {
    /// Opens and enables both tracepoints on every online CPU.
    pub fn open(tracefs: &Tracefs, config: &PerfConfig) -> Result<PerfBackend> {
        let _ = (tracefs, config);
        todo!()
    }

    /// Waits up to `timeout` for data (returns early on EINTR), reads every
    /// ring, and passes to `sink`, in global time order, every event that
    /// can no longer be preceded by one not yet read.
    pub fn poll(&mut self, timeout: Duration, sink: &mut dyn FnMut(Event)) -> Result<()> {
        let _ = (timeout, sink);
        todo!()
    }

    /// Disables the events, drains the rings and flushes every pending
    /// event to `sink` in time order.
    pub fn finish(&mut self, sink: &mut dyn FnMut(Event)) -> Result<()> {
        let _ = sink;
        todo!()
    }

    pub fn stats(&self) -> PerfStats {
        todo!()
    }
}
