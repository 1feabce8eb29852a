//! Reads made as soon as the reader has seen a switch-out: the reader
//! hands each round's last switch-outs of interpreter processes
//! ([`crate::event::runs::Early`]) to a thread of their own, which reads
//! the waiting thread's frames at once ([`Interpreted::read_early`]). The
//! stages reach a switch-out tens of milliseconds after it; a wait shorter
//! than that still gets its frames this way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rustc_hash::FxHashSet;

use super::reader::Interpreted;
use crate::event::runs::{Early, LastRuns};

/// Switch-outs waiting for their read, at most; past it the reader drops
/// them (their stacks are read late, if at all).
const QUEUED: usize = 1024;

/// The interpreters' reader, shared by the stages and the early reads.
pub(crate) type Shared = Arc<Mutex<Interpreted>>;

/// Locks `shared`, also after a panic of another holder.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, Interpreted> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The thread that makes the early reads.
pub(crate) struct EarlyReads {
    runs: Arc<LastRuns>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EarlyReads {
    /// Starts reading the switch-outs the reader hands on through `runs`
    /// with `shared`, once it has found an interpreter; `None` when the
    /// thread cannot start (reads are then late only).
    pub(crate) fn start(shared: Shared, runs: Arc<LastRuns>) -> Option<EarlyReads> {
        let (requests, offs) = sync_channel(QUEUED);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let reading = shared.clone();
        let thread = std::thread::Builder::new()
            .name("offwake-early".into())
            .spawn(move || {
                for off in offs {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    lock(&reading).read_early(off);
                }
            })
            .ok()?;
        // The processes found so far; later ones are added as found.
        let tgids: FxHashSet<u32> = lock(&shared).runtime_tgids().collect();
        runs.set_early(Some(Early {
            tgids,
            requests,
            pending: Default::default(),
        }));
        Some(EarlyReads {
            runs,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the reads and waits for the thread.
    pub(crate) fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the hook closes the queue, which ends the thread.
        self.runs.set_early(None);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for EarlyReads {
    fn drop(&mut self) {
        self.end();
    }
}
