//! The stages ([`super::stages`]) on a thread of their own: the thread that
//! reads the rings hands its events over in batches and goes back to
//! reading, so that unwinding and aggregation never hold it up. The queue
//! between them is bounded; when it is full the reader holds as many
//! batches again, and waits for the stages only past that (its stack
//! copies are bounded apart, see [`crate::event::copies`], and all cut
//! while the stages are far behind).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};

use super::stages::{Staged, Stages};
use crate::event::copies::CopyBudget;
use crate::event::{Event, EventKind, EventSink};
use crate::sys::priority;

/// Events handed over at once.
const BATCH: usize = 256;

/// Bytes of paths (of mmap records, up to 4 KiB each: the traced process
/// chooses them) handed over at once, at most: with the queue's bound in
/// batches, what is queued stays within some 32 MiB of paths.
const BATCH_PATHS: usize = 32 << 10;

/// Batches queued at most: about 130,000 events, some 50 MiB with their
/// callchains (copies are bounded apart). Under a load that takes every
/// CPU, the stages can fall a second behind the reader: a shorter queue
/// would hold the reader up, and the kernel would lose records meanwhile.
const QUEUED: usize = 512;

/// Batches the reader keeps while the queue is full, rather than wait: the
/// stages' thread can stop for half a second on CPUs that thousands of
/// threads keep busy. Past them it waits.
const HELD: usize = QUEUED;

/// Batches queued past which the reader cuts every stack copy (see
/// [`CopyBudget::squeeze`]), so that the stages, left with aggregation
/// only, catch up before the queue is full: about 32,000 events. Their
/// thread runs at real-time priority meanwhile: on CPUs that thousands of
/// threads keep busy it can otherwise stop for tens of milliseconds at a
/// time, and with copies cut its work is short.
const SQUEEZE_PAST: usize = QUEUED / 4;

/// What the stages' thread is sent: its stages first, then batches, and
/// the time the reader has read up to (for `--interval`).
enum Message {
    Start(Box<Stages>),
    Batch(Vec<Event>),
    Reached(u64),
}

/// The reader's side: an [`EventSink`] that queues events for the stages'
/// thread.
pub(super) struct StageThread {
    /// The thread's priority, raised with the reader's and while the
    /// copies are squeezed (see [`crate::sys::priority`]).
    pub(super) priority: Arc<priority::Helper>,
    /// Whether the copies are squeezed.
    squeezed: bool,
    batch: Vec<Event>,
    /// Bytes of paths in `batch`.
    batch_paths: usize,
    queue: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<Option<Staged>>>,
    /// Batches not yet taken by the stages, held ones included.
    queued: Arc<AtomicUsize>,
    /// Batches that found the queue full, oldest first.
    held: VecDeque<Vec<Event>>,
    /// The reader's budget of copies, squeezed while `queued` is long.
    copies: Option<CopyBudget>,
}

impl StageThread {
    /// Starts the thread, idle until [`StageThread::start`]: it is made
    /// before tracing starts, so that a run that cannot make it ends
    /// before anything is traced.
    pub(super) fn spawn() -> Result<StageThread> {
        let (queue, messages) = sync_channel::<Message>(QUEUED);
        let queued = Arc::new(AtomicUsize::new(0));
        let taken = queued.clone();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("offwake-stages".to_string())
            .spawn(move || {
                let _ = tid_tx.send(nix::unistd::gettid().as_raw());
                let Ok(Message::Start(mut stages)) = messages.recv() else {
                    return None;
                };
                stages.prepare();
                for message in messages {
                    match message {
                        Message::Batch(batch) => {
                            taken.fetch_sub(1, Ordering::Relaxed);
                            for event in batch {
                                stages.process(event);
                            }
                        }
                        Message::Reached(time) => stages.reached(time),
                        Message::Start(_) => {}
                    }
                }
                Some(stages.finish())
            })
            .context("starting the thread that unwinds and aggregates")?;
        let tid = tid_rx
            .recv()
            .context("starting the thread that unwinds and aggregates")?;
        Ok(StageThread {
            priority: Arc::new(priority::Helper::new(tid)),
            batch: Vec::with_capacity(BATCH),
            batch_paths: 0,
            queue: Some(queue),
            thread: Some(thread),
            queued,
            held: VecDeque::new(),
            copies: None,
            squeezed: false,
        })
    }

    /// Squeezes the reader's budget of `copies`, if it has one, while the
    /// stages are far behind.
    pub(super) fn squeeze(&mut self, copies: Option<CopyBudget>) {
        self.copies = copies;
    }

    /// Gives the thread the stages the events go through.
    pub(super) fn start(&mut self, stages: Stages) {
        self.send(Message::Start(Box::new(stages)));
    }

    fn send(&mut self, message: Message) {
        if let Some(queue) = &self.queue
            && queue.send(message).is_err()
        {
            // The thread is gone (it panicked): `finish` says so.
            self.queue = None;
        }
    }

    /// Hands over the events taken so far, and the batches held.
    pub(super) fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            self.batch_paths = 0;
            let queued = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
            if let Some(copies) = &self.copies {
                let squeezed = queued > SQUEEZE_PAST;
                copies.squeeze(squeezed);
                if squeezed != self.squeezed {
                    self.squeezed = squeezed;
                    self.priority.behind(squeezed);
                }
            }
            self.held.push_back(batch);
        }
        self.hand_over(false);
    }

    /// Queues the held batches, in order, while there is room, waiting for
    /// room only while more than [`HELD`] are held; with `all`, waiting
    /// for room for every one.
    fn hand_over(&mut self, all: bool) {
        while let Some(batch) = self.held.pop_front() {
            let Some(queue) = &self.queue else {
                self.held.clear();
                return;
            };
            let sent = if all || self.held.len() >= HELD {
                queue.send(Message::Batch(batch)).map_err(|_| None)
            } else {
                queue.try_send(Message::Batch(batch)).map_err(|e| match e {
                    TrySendError::Full(Message::Batch(batch)) => Some(batch),
                    _ => None,
                })
            };
            match sent {
                Ok(()) => {}
                Err(Some(batch)) => {
                    self.held.push_front(batch);
                    return;
                }
                Err(None) => {
                    // The thread is gone (it panicked): `finish` says so.
                    self.queue = None;
                }
            }
        }
    }

    /// Says that no event older than `time` is still to come, when the
    /// queue has room: the reports due by then are cut even while no
    /// event comes.
    pub(super) fn reached(&mut self, time: u64) {
        if self.held.is_empty()
            && let Some(queue) = &self.queue
        {
            let _ = queue.try_send(Message::Reached(time));
        }
    }

    /// Hands over the last events and waits for the stages to be done.
    pub(super) fn finish(mut self) -> Result<Staged> {
        self.flush();
        self.hand_over(true);
        // While the thread is alive: its id is not another's yet.
        self.priority.lower();
        self.queue = None;
        let thread = self.thread.take().context("the stages ended twice")?;
        thread
            .join()
            .ok()
            .flatten()
            .ok_or_else(|| anyhow!("the thread that unwinds and aggregates failed"))
    }
}

impl Drop for StageThread {
    /// Its priority back while the thread lives (the queue, dropped after
    /// this, ends it), also when the run ends early.
    fn drop(&mut self) {
        self.priority.lower();
    }
}

impl EventSink for StageThread {
    fn event(&mut self, event: Event) {
        if let EventKind::Mmap(m) = &event.kind {
            self.batch_paths += m.path.len();
        }
        self.batch.push(event);
        if self.batch.len() >= BATCH || self.batch_paths >= BATCH_PATHS {
            self.flush();
        }
    }
}
