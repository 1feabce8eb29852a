//! The backend's side of growing its rings ([`super::grow`]): the plan of
//! the large rings, starting the growth once tracing runs, and swapping
//! each CPU's ring for its large one.

use std::os::fd::{AsFd, OwnedFd};

use anyhow::Result;

use super::cpus::FirstRing;
use super::{PerfBackend, PerfConfig, grow, sys};

/// The large rings to grow into, once tracing runs ([`super::grow`]).
pub(super) struct GrowPlan {
    pages: usize,
    sample_type: u64,
    stack_user: u32,
    watermark: u32,
}

impl GrowPlan {
    /// A dummy event on `cpu` that owns a large ring, or anchors an event
    /// to one (see [`super::grow`]).
    fn owner(&self, cpu: u32) -> Result<OwnedFd, sys::OpenError> {
        sys::open_ring_owner(
            self.sample_type,
            self.stack_user,
            self.watermark,
            cpu,
            false,
            false,
        )
    }
}

/// The pages each CPU's ring starts with, for `threads` chosen threads on
/// `cpus` CPUs whose events share `base`, and when the rings are to grow,
/// the plan of the large ones. Per-CPU events for chosen threads (`wide`)
/// keep their rings.
pub(super) fn first_rings(
    config: &PerfConfig,
    base: &sys::TracepointAttr,
    wide: bool,
    threads: usize,
    cpus: usize,
) -> (usize, Option<GrowPlan>) {
    // A few per-task events (and the rings' other one) are
    // quick to move to larger rings: the rings start small.
    let events = threads.saturating_mul(cpus).saturating_mul(3);
    let first_pages = grow::start_pages(config.mmap_pages, base.stack_user)
        .filter(|_| config.grow_rings && !wide && events + cpus <= grow::MAX_MOVED);
    let plan = first_pages.map(|_| GrowPlan {
        pages: config.mmap_pages,
        sample_type: base.sample_type,
        stack_user: base.stack_user,
        watermark: base.wakeup_watermark,
    });
    (first_pages.unwrap_or(config.mmap_pages), plan)
}

impl PerfBackend {
    /// Forks the process that maps the large rings and moves the events
    /// to them ([`super::grow`]); without it, the first rings stay, and stderr
    /// says why.
    pub(super) fn start_growth(&mut self) {
        let Some(plan) = self.grow_plan.take() else {
            return;
        };
        let started = (|| -> Result<grow::Growth> {
            let mut owners = Vec::with_capacity(self.cpus.len());
            for c in &self.cpus {
                owners.push(plan.owner(c.cpu)?);
            }
            // Per-task events move; the per-CPU ones are replaced instead
            // (see `grow_rings`): a move holds the lock of the event's
            // context through a grace period, and the trace loop must not
            // wait on that of a CPU when it replaces a filtered event.
            let mut moves: Vec<grow::Move<'_>> = Vec::new();
            let mut anchors = Vec::new();
            if let Some(t) = &self.threads {
                for (cpu, fd) in t.fds_to_move() {
                    let Some(ring) = self.cpus.iter().position(|c| c.cpu == cpu) else {
                        continue;
                    };
                    anchors.push(plan.owner(cpu)?);
                    moves.push(grow::Move {
                        event: fd.as_fd(),
                        ring,
                    });
                }
            }
            grow::Growth::start(owners, anchors, &moves, plan.pages)
        })();
        match started {
            Ok(g) => self.growth = Some(g),
            Err(e) => self.keep_first_rings(&format!("{e:#}")),
        }
    }

    /// Takes the large rings once they are mapped, and lets the events
    /// move to them; forgets the growth once it is over.
    pub(super) fn grow_rings(&mut self) {
        let Some(g) = self.growth.as_mut() else {
            return;
        };
        match g.step() {
            grow::Step::Waiting => {}
            grow::Step::Mapped(rings) => {
                for (c, (owner, ring)) in self.cpus.iter_mut().zip(rings) {
                    c.first = Some(FirstRing {
                        last_time: c.last_time,
                        ring: std::mem::replace(&mut c.ring, ring),
                        owner: std::mem::replace(&mut c.fds[0], owner),
                    });
                }
                if let Some(t) = self.threads.as_mut()
                    && let Err(e) = t.reopen_filtered(&mut self.cpus)
                {
                    // The old ones stay, writing into the first rings.
                    crate::diag::diag!(
                        "offwake-perf: warning: the wakeup events stay in the first rings: {e:#}"
                    );
                }
                g.go();
                crate::timing::mark("rings.mapped");
            }
            grow::Step::Failed(why) => self.keep_first_rings(&why),
            grow::Step::Moving => {
                if g.done() {
                    crate::timing::mark("rings.moved");
                    self.growth = None;
                }
            }
        }
    }

    fn keep_first_rings(&mut self, why: &str) {
        let kib = self.cpus.first().map_or(0, |c| c.ring.data_size() >> 10);
        crate::diag::diag!(
            "offwake-perf: warning: the ring buffers stay at {kib} KiB per CPU, where records \
             are more likely to be lost: growing them failed: {why}"
        );
    }
}
