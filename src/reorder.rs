//! Global time ordering of events that arrive per CPU: a reorder window
//! flushed in rounds, as `perf` does.

use crate::event::Event;

/// Buffers events from all CPUs and releases them in timestamp order once no
/// earlier event can still arrive.
#[derive(Default)]
pub struct Reorder {}

impl Reorder {
    pub fn new() -> Reorder {
        Reorder {}
    }

    pub fn push(&mut self, event: Event) {
        let _ = event;
        todo!()
    }

    /// Releases, in time order, every buffered event with `time <= upto`.
    pub fn flush_upto(&mut self, upto: u64, sink: &mut dyn FnMut(Event)) {
        let _ = (upto, sink);
        todo!()
    }

    /// Releases everything, in time order.
    pub fn flush_all(&mut self, sink: &mut dyn FnMut(Event)) {
        self.flush_upto(u64::MAX, sink)
    }
}
