//! A watch on the rings for a reader that falls behind. The reader can
//! tell it is late only once it runs, and under a storm of runnable
//! threads that is after the kernel lost records. This thread runs at
//! real-time priority and sleeps in `poll` on the rings, so the kernel
//! wakes it with the reader each time another quarter of a ring is
//! written; finding one more than half full, it raises the reader
//! ([`OnDemand`]) and ends. It is woken by data only, a few hundred times
//! a second in a storm, and stops with the backend.
//!
//! A wakeup of a ring is taken by the first poller to look (the kernel
//! clears it as it reports it), so the watch passes each one it takes on
//! to the reader, which polls [`Watch::forwarded`] with the rings.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::ring::Gauge;
use crate::sys::priority::{self, OnDemand};

/// The watching thread, how to stop it, and how it wakes the reader.
pub(super) struct Watch {
    stop: Arc<EventFd>,
    forward: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Starts watching `rings` (a descriptor to poll and a gauge for each)
    /// on behalf of `reader`. Without real-time priority for itself the
    /// watch would be as late as the reader: it then ends at once.
    pub(super) fn spawn(
        rings: Vec<(BorrowedFd<'_>, Gauge)>,
        reader: Arc<OnDemand>,
    ) -> Result<Watch> {
        let eventfd = || {
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map(Arc::new)
                .context("making the watch's eventfd")
        };
        let (stop, forward) = (eventfd()?, eventfd()?);
        let rings = rings
            .into_iter()
            .map(|(fd, gauge)| Ok((fd.try_clone_to_owned()?, gauge)))
            .collect::<std::io::Result<Vec<(OwnedFd, Gauge)>>>()
            .context("sharing the rings with the watch")?;
        let (woken, forwards) = (stop.clone(), forward.clone());
        let thread = std::thread::Builder::new()
            .name("offwake-watch".to_string())
            .spawn(move || {
                // Kept until the thread ends.
                let Ok(_raised) = priority::raise(0) else {
                    return;
                };
                watch(&rings, &woken, &forwards, &reader);
            })
            .context("starting the thread that watches the rings")?;
        Ok(Watch {
            stop,
            forward,
            thread: Some(thread),
        })
    }

    /// Readable when the watch took a wakeup of the rings: the reader
    /// polls it with them.
    pub(super) fn forwarded(&self) -> BorrowedFd<'_> {
        self.forward.as_fd()
    }

    /// Takes the wakeups passed on, once the reader is awake.
    pub(super) fn clear(&self) {
        let _ = self.forward.read();
    }

    /// Stops the thread and waits for it: its copies of the descriptors
    /// and mappings are gone when this returns.
    pub(super) fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.stop.write(1);
            let _ = thread.join();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sleeps until the kernel wakes the rings' pollers or `stop` is
/// written, passing each wakeup on to `forward`; raises `reader` when a
/// ring is more than half full.
fn watch(rings: &[(OwnedFd, Gauge)], stop: &EventFd, forward: &EventFd, reader: &OnDemand) {
    let mut fds: Vec<PollFd<'_>> = rings
        .iter()
        .map(|(fd, _)| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
        .collect();
    fds.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
    loop {
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        let mut woken = false;
        for pfd in &fds {
            let revents = pfd.revents().unwrap_or(PollFlags::empty());
            // Stopped, or events closing (which would wake it at once,
            // forever).
            if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
                let _ = forward.write(1);
                return;
            }
            woken |= revents.contains(PollFlags::POLLIN);
        }
        if fds
            .last()
            .and_then(PollFd::revents)
            .is_some_and(|r| !r.is_empty())
        {
            return;
        }
        if woken {
            let _ = forward.write(1);
        }
        if rings.iter().any(|(_, gauge)| gauge.over_half()) {
            reader.behind();
            return;
        }
    }
}
