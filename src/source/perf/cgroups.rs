//! The perf backend's `--cgroup` half: per-CPU `sched_switch` events bound
//! to each cgroup (`PERF_FLAG_PID_CGROUP`, as `perf -G` opens them), and
//! per-CPU `sched_waking` events filtered on the cgroups' threads.
//!
//! The kernel samples a cgroup-bound event only while a task of that
//! cgroup, or of one below it, runs on the CPU: `sched_switch` fires in
//! the context of the task leaving, so its samples are the cgroup's
//! switch-outs. The event counts only while the cgroup runs there, so the
//! `time_running` each sample carries tells when the thread it samples
//! switched in ([`super::running`]); under `--state`, which leaves some
//! switch-outs unsampled, context-switch records do (the kernel writes a
//! switch-in record once the incoming task's cgroup is current), at a
//! cost to every context switch of the machine. The side-band records
//! (fork, exit, comm, mmap) are the cgroup's too. A thread moved into the cgroup is
//! sampled from its next switch on, and a removed cgroup's events simply
//! sample nothing more.
//!
//! A wakeup is sampled in the waker's context, which can be any task, so
//! `sched_waking` cannot be bound to the cgroup: it is per CPU with a
//! filter on the wakee, kept current from the cgroups' switch-outs, forks
//! and exits, from a listing of their threads every second, and from the
//! forecast of the next pids ([`super::nascent`]). The listing is made
//! on a thread of its own ([`Lister`]), off the reader's path: however
//! many cgroups a delegated subtree holds, the reader never waits for it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use rustc_hash::FxHashSet;

use anyhow::Context;

use super::cpus::CpuRing;
use super::filter::WakeeFilter;
use super::nascent::Nascent;
use super::record::{Decoder, Tracepoint};
use super::release::Graveyard;
use super::ring::Ring;
use super::threads::{TaskEvent, open_filtered};
use super::{OpenFailure, PerfConfig, sys};
use crate::event::{Event, EventKind};
use crate::plan::CgroupTargets;
use crate::sys::cgroup;

/// How often the cgroups' threads are listed again, for the threads
/// moved into them (whose wakeups the filter then keeps) and out.
const RELIST: Duration = Duration::from_secs(1);

/// The cgroups' events and what keeps their wakee filter current.
pub(super) struct Cgroups {
    targets: CgroupTargets,
    wakees: WakeeFilter,
    /// How to open a CPU's `sched_waking` event.
    waking_event: TaskEvent,
    /// When the last listing was asked for.
    listed: Instant,
    /// Lists the threads when asked; None until its thread is started.
    lister: Option<Lister>,
    /// A listing asked for and not yet taken in.
    pending: bool,
    /// Threads learnt from the rings since that listing was asked for,
    /// which it may have missed.
    noted: FxHashSet<u32>,
    /// The pids the kernel allocates next: a task created in a cgroup is
    /// kept from its first wakeup on, before its fork record is read.
    nascent: Option<Nascent>,
    /// Replaced wakee filters, disabled, to close off the critical path.
    pub(super) graveyard: Graveyard,
    /// The kernel ids of the cgroup-bound `sched_switch` events.
    pub(super) switch_ids: Vec<u64>,
}

impl Cgroups {
    /// Opens, on each of `online`, one `switch_event` per cgroup (with the
    /// `--state` filter, if any) and one `waking_event` kept for their
    /// threads, all into one ring that the first cgroup's event owns. Each
    /// cgroup's event brings its side-band records (and, under `--state`,
    /// its context-switch records).
    pub(super) fn open(
        targets: &CgroupTargets,
        online: &[u32],
        ([switch_event, waking_event], clock): (&[TaskEvent; 2], Option<&TaskEvent>),
        config: &PerfConfig,
        decoder: &mut Decoder,
    ) -> Result<(Cgroups, Vec<CpuRing>), OpenFailure> {
        let (pages, state_filter) = (config.mmap_pages, config.state_filter.as_deref());
        let dirs = targets
            .roots
            .iter()
            .map(|r| {
                std::fs::File::open(&r.dir)
                    .map(OwnedFd::from)
                    .with_context(|| format!("opening cgroup {}", r.dir.display()))
            })
            .collect::<anyhow::Result<Vec<OwnedFd>>>()?;
        let mut wakees = WakeeFilter::new(cgroup::threads_of(&targets.hierarchy, &targets.roots));
        let nascent = Nascent::start(&mut wakees);
        let filter = wakees.text();
        let mut cpus = Vec::with_capacity(online.len());
        let mut switch_ids = Vec::new();
        for &cpu in online {
            let mut fds = Vec::with_capacity(dirs.len() + 1);
            for (dir, root) in dirs.iter().zip(&targets.roots) {
                // `event` of this cgroup on this CPU, and its id.
                let open = |TaskEvent { what, attr, .. }: &TaskEvent| {
                    let fd = sys::open_cgroup_tracepoint(attr, what, dir.as_fd(), cpu)
                        .map_err(|e| unbound(e, &root.dir, &targets.hierarchy.mount))?;
                    let id = sys::event_id(fd.as_fd())
                        .with_context(|| format!("reading the id of {what} on CPU {cpu}"))?;
                    Ok::<_, OpenFailure>((fd, id))
                };
                let (fd, id) = open(switch_event)?;
                decoder.add_id(id, switch_event.tp);
                switch_ids.push(id);
                if let Some(state) = state_filter {
                    sys::set_filter(fd.as_fd(), state)
                        .with_context(|| format!("filtering {} on CPU {cpu}", switch_event.what))?;
                }
                fds.push(fd);
                // The cgroup's CPU time (`--wall`), sampled as perf -G does.
                if let Some(clock) = clock {
                    let (fd, id) = open(clock)?;
                    decoder.add_clock(id, 0, clock.attr.cpu_clock_ns);
                    fds.push(fd);
                }
            }
            let ring = Ring::map(fds[0].as_fd(), pages)
                .with_context(|| format!("mapping the ring buffer of CPU {cpu}"))?;
            for fd in &fds[1..] {
                sys::set_output(fd.as_fd(), fds[0].as_fd())
                    .with_context(|| format!("sharing the ring buffer of CPU {cpu}"))?;
            }
            // Enabled at once, as the replacements will be: a wakeup
            // before the switch events are enabled pairs with nothing.
            let waking = open_filtered(waking_event, cpu, &fds[0], &filter)?;
            let id = sys::event_id(waking.as_fd())
                .with_context(|| format!("reading the id of {} on CPU {cpu}", waking_event.what))?;
            decoder.add_id(id, Tracepoint::Waking);
            fds.push(waking);
            cpus.push(CpuRing::new(cpu, ring, fds));
        }
        wakees.changed();
        let cgroups = Cgroups {
            targets: targets.clone(),
            wakees,
            waking_event: *waking_event,
            listed: Instant::now(),
            lister: None,
            pending: false,
            noted: FxHashSet::default(),
            nascent,
            graveyard: Graveyard::default(),
            switch_ids,
        };
        Ok((cgroups, cpus))
    }

    /// Learns from an event read from the cgroups' rings: every switch-out
    /// sampled is a thread of theirs, a fork there brings a new one (the
    /// child starts in its parent's cgroup), an exit ends one.
    pub(super) fn note(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Switch(s) if s.prev_tid != 0 => {
                if s.is_final() {
                    self.wakees.remove(s.prev_tid);
                } else {
                    self.add(s.prev_tid);
                }
            }
            EventKind::Fork(f) => self.add(f.tid),
            EventKind::Exit(e) => self.wakees.remove(e.tid),
            _ => {}
        }
    }

    fn add(&mut self, tid: u32) {
        self.wakees.add(tid);
        if self.pending {
            self.noted.insert(tid);
        }
    }

    /// Takes in the cgroups' threads as last listed and asks for the next
    /// listing when due, then gives the CPUs a new wakee filter if it
    /// changed (a perf event takes one filter in its life, so the event is
    /// replaced).
    pub(super) fn update(&mut self, cpus: &mut [CpuRing]) -> Result<(), OpenFailure> {
        match self.lister.as_ref().map(|l| l.listed.try_recv()) {
            Some(Ok(tids)) => {
                self.pending = false;
                let noted = std::mem::take(&mut self.noted);
                self.wakees.set_tids(tids.into_iter().chain(noted));
            }
            // Its thread is gone: started again at the next listing.
            Some(Err(TryRecvError::Disconnected)) => {
                self.lister = None;
                self.pending = false;
                self.noted.clear();
            }
            _ => {}
        }
        if !self.pending && self.listed.elapsed() >= RELIST {
            self.listed = Instant::now();
            if self.lister.is_none() {
                // Tried again at the next listing when it cannot start.
                self.lister = Lister::start(&self.targets);
            }
            self.pending = self.lister.as_ref().is_some_and(Lister::ask);
        }
        if let Some(n) = self.nascent.as_mut() {
            n.refresh(&mut self.wakees, true, cpus.len());
        }
        let Some(text) = self.wakees.changed() else {
            return Ok(());
        };
        for c in cpus {
            let Some(last) = c.fds.len().checked_sub(1) else {
                continue;
            };
            let new = open_filtered(&self.waking_event, c.cpu, &c.fds[0], &text)?;
            let old = std::mem::replace(&mut c.fds[last], new);
            let _ = sys::disable(old.as_fd());
            self.graveyard.bury([old]);
        }
        Ok(())
    }
}

/// Why an event could not be bound to the cgroup at `dir`, under `mount`:
/// ENOENT means the kernel keeps no perf state for it.
fn unbound(e: sys::OpenError, dir: &Path, mount: &Path) -> OpenFailure {
    if e.errno != libc::ENOENT {
        return e.into();
    }
    OpenFailure::Other(anyhow::anyhow!(
        "perf cannot filter by cgroup {}: the kernel keeps no perf_event state for it. On \
         cgroup v2, kernels before 6.18 or so keep it only once a controller is enabled in \
         the root's cgroup.subtree_control, as systemd does (for example: echo +pids > \
         {}/cgroup.subtree_control); or use --backend tracefs",
        cgroup::shown(&dir.display().to_string()),
        cgroup::shown(&mount.display().to_string())
    ))
}

/// A thread that lists the cgroups' threads each time it is asked, and
/// ends when this is dropped.
struct Lister {
    ask: Sender<()>,
    listed: Receiver<Vec<u32>>,
}

impl Lister {
    /// None when the thread cannot be started.
    fn start(targets: &CgroupTargets) -> Option<Lister> {
        let (ask, asked) = mpsc::channel::<()>();
        let (answer, listed) = mpsc::channel();
        let (hierarchy, roots) = (targets.hierarchy.clone(), targets.roots.clone());
        std::thread::Builder::new()
            .name("offwake-cglist".to_string())
            .spawn(move || {
                for () in asked {
                    if answer.send(cgroup::threads_of(&hierarchy, &roots)).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Lister { ask, listed })
    }

    /// Asks for a listing; false when the thread is gone.
    fn ask(&self) -> bool {
        self.ask.send(()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_the_kernel_keeps_no_state_for_is_explained() {
        let refused = |errno| sys::OpenError {
            errno,
            message: "perf_event_open failed".to_string(),
        };
        let dir = Path::new("/sys/fs/cgroup/app");
        let mount = Path::new("/sys/fs/cgroup");
        let e = unbound(refused(libc::ENOENT), dir, mount).to_string();
        assert!(
            e.contains("cgroup /sys/fs/cgroup/app")
                && e.contains("echo +pids > /sys/fs/cgroup/cgroup.subtree_control")
                && e.contains("--backend tracefs"),
            "{e}"
        );
        // Anything else is the open's own error, a denial still one.
        let denied = unbound(refused(libc::EACCES), dir, mount);
        assert!(denied.denial().is_some(), "{denied}");
    }
}
