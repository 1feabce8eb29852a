//! Helpers for unit tests that need a second thread of this process.

use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

/// A thread of this process that waits until it is dropped: a TID that is
/// not the process's own.
pub(crate) struct OtherThread {
    pub(crate) tid: u32,
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl OtherThread {
    pub(crate) fn start() -> OtherThread {
        let (stop, stopped) = channel::<()>();
        let (ready, tid) = channel();
        let handle = std::thread::spawn(move || {
            let _ = ready.send(nix::unistd::gettid().as_raw() as u32);
            let _ = stopped.recv();
        });
        OtherThread {
            tid: tid.recv().expect("the other thread starts"),
            stop: Some(stop),
            handle: Some(handle),
        }
    }
}

impl Drop for OtherThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
