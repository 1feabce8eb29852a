//! The per-thread half of the perf backend, for chosen targets (`-p`, `-t`,
//! `-- COMMAND`): each thread's own `sched_switch` events, the per-CPU
//! `sched_waking` events filtered on the wakees, the forecast of the pids
//! new threads will get, and the duplicates a thread attached twice writes.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::filter::WakeeFilter;
use super::nascent::Nascent;
use super::record::{Decoder, Tracepoint};
use super::release::Graveyard;
use super::ring::Ring;
use super::{CpuRing, OpenFailure, sys};
use crate::event::{Event, EventKind};
use crate::plan::Follow;
use crate::sys::host;

/// A tracepoint, its name and how to open it.
#[derive(Clone, Copy, Debug)]
pub(super) struct TaskEvent {
    pub(super) tp: Tracepoint,
    pub(super) what: &'static str,
    pub(super) attr: sys::TracepointAttr,
}

/// The chosen threads' events and what keeps them current.
pub(super) struct Threads {
    /// Per-task `sched_switch` events, by thread: closed when the thread
    /// exits.
    pub(super) tasks: HashMap<u32, Vec<TaskCpu>>,
    /// How to open a thread's `sched_switch` event.
    switch_event: TaskEvent,
    /// How to open `sched_process_exit` for the threads a traced one
    /// creates (switch-ins told by `time_running`, with threads to follow).
    exit_event: Option<TaskEvent>,
    /// The wakees the per-CPU `sched_waking` events keep.
    wakees: WakeeFilter,
    /// How to open a CPU's `sched_waking` event.
    waking_event: TaskEvent,
    /// The pids the kernel allocates next, kept by the wakee filter while
    /// tasks created by the targets are followed.
    nascent: Option<Nascent>,
    /// What threads created by the traced ones get.
    follow: Follow,
    /// `--state` as a filter on each thread's `sched_switch`.
    state_filter: Option<String>,
    /// How to open a thread's on-CPU sampling event (`--wall`): per task
    /// and inherited as its `sched_switch` is, or in [`Wide`] mode per CPU.
    clock_event: Option<TaskEvent>,
    /// Switch-ins are told by the samples' `time_running`.
    running: bool,
    /// Per CPU ring, the last tracepoint hit or switch read from it, to
    /// drop duplicates.
    last_occurrence: Vec<Option<Occurrence>>,
    /// The events of exited threads and replaced filters, disabled, and
    /// the capability probes.
    pub(super) graveyard: Graveyard,
    /// Past the event budget: no per-task event, but a per-CPU
    /// `sched_switch` filtered on the threads' ids, and the fork and exit
    /// records of every task (see [`Wide`]).
    wide: Option<Wide>,
}

/// Per-CPU `sched_switch` events in place of per-task ones: a constant
/// number of events however many threads there are, for the price of a
/// kernel filter run on every context switch of the machine. The filter
/// is kept current as the wakee filter is, from the fork and exit records
/// that the rings' owners write for every task.
pub(super) struct Wide {
    /// How to open a CPU's `sched_switch` event.
    pub(super) switch_event: TaskEvent,
    /// The processes of `-p`, whose new threads join the filter.
    pub(super) processes: Vec<u32>,
}

/// One attached thread's events on one CPU.
pub(super) struct TaskCpu {
    cpu: u32,
    /// Its `sched_switch` event. With [`super::SwitchIns::Running`] and threads
    /// to follow, nothing inherits it, so that its counts are the
    /// thread's own; else it is the only event, inherited as configured.
    own: OwnedFd,
    /// Its kernel id, with [`super::SwitchIns::Running`].
    own_id: Option<u64>,
    /// With [`super::SwitchIns::Running`] and threads to follow: `sched_switch`
    /// and `sched_process_exit` for the threads it creates, inherited by
    /// them, and filtered out for the thread itself.
    kids: Option<[OwnedFd; 2]>,
    /// Its names event ([`sys::open_task_names`]): the COMM and MMAP2
    /// records of the thread and of every task it creates.
    names: OwnedFd,
    /// Its on-CPU sampling event (`--wall`), inherited as configured.
    clock: Option<OwnedFd>,
}

impl TaskCpu {
    pub(super) fn fds(&self) -> impl Iterator<Item = &OwnedFd> {
        std::iter::once(&self.own)
            .chain(self.kids.iter().flatten())
            .chain(std::iter::once(&self.names))
            .chain(self.clock.iter())
    }

    pub(super) fn into_fds(self) -> impl Iterator<Item = OwnedFd> {
        std::iter::once(self.own)
            .chain(self.kids.into_iter().flatten())
            .chain(std::iter::once(self.names))
            .chain(self.clock)
    }
}

/// What identifies one tracepoint hit or switch record: a thread attached
/// twice (see `PerfBackend::attach_chosen`) writes two copies of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Occurrence {
    time: u64,
    what: Occurred,
    /// The two threads it names (the second 0 for a switch-in record).
    tids: (u32, u32),
}

/// The kind of an [`Occurrence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Occurred {
    Switch,
    Waking,
    SwitchIn,
}

fn occurrence(ev: &Event) -> Option<Occurrence> {
    let (what, tids) = match &ev.kind {
        EventKind::Switch(s) => (Occurred::Switch, (s.prev_tid, s.next_tid)),
        EventKind::Waking(w) => (Occurred::Waking, (w.waker_tid, w.wakee_tid)),
        EventKind::SwitchIn(s) => (Occurred::SwitchIn, (s.tid, 0)),
        _ => return None,
    };
    Some(Occurrence {
        time: ev.time,
        what,
        tids,
    })
}

/// Opens and enables a per-CPU `event` on `cpu` (`sched_waking`, or
/// `sched_switch` in [`Wide`] mode) that keeps what `filter` names and
/// writes into `owner`'s ring.
///
/// Opening a tracepoint event and setting its filter take the kernel's
/// `event_mutex`, which a traced task's fork takes too, to inherit its
/// events. Preempted while holding it (by that very task, on a CPU they
/// share), the tool would make the fork wait for it: so the calling
/// thread runs at real-time priority meanwhile, when it may.
pub(super) fn open_filtered(
    event: &TaskEvent,
    cpu: u32,
    owner: &OwnedFd,
    filter: &str,
) -> Result<OwnedFd, OpenFailure> {
    let _unpreempted = crate::sys::priority::raise_briefly();
    let TaskEvent { what, attr, .. } = event;
    let fd = sys::open_tracepoint(attr, what, cpu)?;
    sys::set_output(fd.as_fd(), owner.as_fd())
        .with_context(|| format!("sharing the ring buffer of CPU {cpu}"))?;
    sys::set_filter(fd.as_fd(), filter)
        .with_context(|| format!("filtering {what} on CPU {cpu}"))?;
    sys::enable(fd.as_fd()).with_context(|| format!("enabling {what} on CPU {cpu}"))?;
    Ok(fd)
}

/// Opens and enables the on-CPU sampling event `clock` on `cpu`, for
/// every task, writing into `owner`'s ring, and registers it with
/// `decoder` as opened for thread `tid` (0: the CPU's).
pub(super) fn open_clock(
    clock: &TaskEvent,
    cpu: u32,
    owner: &OwnedFd,
    decoder: &mut Decoder,
    tid: u32,
) -> Result<OwnedFd, OpenFailure> {
    let fd = sys::open_tracepoint(&clock.attr, clock.what, cpu)?;
    sys::set_output(fd.as_fd(), owner.as_fd())
        .with_context(|| format!("sharing the ring buffer of CPU {cpu}"))?;
    let id = sys::event_id(fd.as_fd())
        .with_context(|| format!("reading the id of {} on CPU {cpu}", clock.what))?;
    decoder.add_clock(id, tid, clock.attr.cpu_clock_ns);
    sys::enable(fd.as_fd()).with_context(|| format!("enabling {} on CPU {cpu}", clock.what))?;
    Ok(fd)
}

/// The `time_running` each of an attached thread's own events ended with
/// (those [`super::SwitchIns::Running`] gave an id), as `(cpu, id, running)`.
fn final_counts(cpus: &[TaskCpu]) -> Vec<(u32, u64, u64)> {
    cpus.iter()
        .filter_map(|t| {
            let id = t.own_id?;
            let running = sys::read_running(t.own.as_fd()).ok()?;
            Some((t.cpu, id, running))
        })
        .collect()
}

/// Keeps the per-task events and the wakee filter current: a thread
/// created by a traced one is a wakee to keep (if `follow` says so); an
/// exited thread's events can record nothing more, so they are disabled
/// (with the copies its children inherited) and buried.
fn track_targets(
    kind: &EventKind,
    follow: Follow,
    tasks: &mut HashMap<u32, Vec<TaskCpu>>,
    wakees: &mut WakeeFilter,
    graveyard: &mut Graveyard,
) {
    match kind {
        EventKind::Fork(f) => {
            let followed = match follow {
                Follow::Nothing => false,
                Follow::Threads => f.tgid == f.parent_tgid,
                Follow::Everything => true,
            };
            if followed {
                wakees.add(f.tid);
            }
        }
        EventKind::Exit(e) => {
            if let Some(cpus) = tasks.remove(&e.tid) {
                let fds: Vec<OwnedFd> = cpus.into_iter().flat_map(TaskCpu::into_fds).collect();
                for fd in &fds {
                    let _ = sys::disable(fd.as_fd());
                }
                graveyard.bury(fds);
            }
            wakees.remove(e.tid);
        }
        _ => {}
    }
}

/// Raises the soft limit on open files to cover `wanted` more descriptors
/// (up to the hard limit), and explains when even that is too low.
fn raise_fd_limit(wanted: usize) -> Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("reading RLIMIT_NOFILE")?;
    let need = (wanted as u64).saturating_add(64);
    if need <= soft {
        return Ok(());
    }
    if need > hard {
        bail!(
            "tracing these threads needs about {need} open files (one per thread, CPU and \
             tracepoint) but the hard limit is {hard}: raise it (`ulimit -Hn`), or trace \
             fewer threads or the whole system"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, need, hard).context("raising RLIMIT_NOFILE")
}

impl Threads {
    /// Nothing attached yet: `tids` are the first wakees. Threads get the
    /// `sched_switch` event (and the `sched_process_exit` one, for those a
    /// traced thread creates), CPUs the `sched_waking` one.
    pub(super) fn new(
        tids: &[u32],
        [switch_event, waking_event]: [TaskEvent; 2],
        exit_event: Option<TaskEvent>,
        follow: Follow,
        state_filter: Option<String>,
        running: bool,
        wide: Option<Wide>,
    ) -> Threads {
        Threads {
            wide,
            tasks: HashMap::new(),
            switch_event,
            exit_event,
            wakees: WakeeFilter::new(tids.iter().copied()),
            waking_event,
            nascent: None,
            follow,
            state_filter,
            clock_event: None,
            running,
            last_occurrence: Vec::new(),
            graveyard: Graveyard::default(),
        }
    }

    /// The rings of the `online` CPUs, each owned by a dummy event, with a
    /// `sched_waking` event filtered on the wakees writing into it (the
    /// threads' own events are attached later; in [`Wide`] mode, a filtered
    /// `sched_switch` event joins them, and the owner writes every task's
    /// side-band records, and its switches with `context_switch`). Starts
    /// the forecast of new pids when tasks the targets create are followed.
    pub(super) fn open_rings(
        &mut self,
        online: &[u32],
        (sample_type, watermark, pages): (u64, u32, usize),
        context_switch: bool,
        clock: Option<TaskEvent>,
        decoder: &mut Decoder,
    ) -> Result<Vec<CpuRing>, OpenFailure> {
        self.clock_event = clock;
        if self.follow != Follow::Nothing {
            self.nascent = Nascent::start(&mut self.wakees);
        }
        self.last_occurrence = vec![None; online.len()];
        let text = self.wakees.changed().unwrap_or_default();
        let switch_text = self.wakees.switch_text(self.state_filter.as_deref());
        let stack_user = self.waking_event.attr.stack_user;
        let wide = self.wide.is_some();
        let mut cpus = Vec::new();
        for &cpu in online {
            let owner = sys::open_ring_owner(
                sample_type,
                stack_user,
                watermark,
                cpu,
                wide,
                wide && context_switch,
            )?;
            let ring = Ring::map(owner.as_fd(), pages)
                .with_context(|| format!("mapping the ring buffer of CPU {cpu}"))?;
            let waking = open_filtered(&self.waking_event, cpu, &owner, &text)?;
            let mut fds = vec![owner, waking];
            if let Some(w) = &self.wide {
                fds.push(open_filtered(&w.switch_event, cpu, &fds[0], &switch_text)?);
                // Every task's CPU time is sampled: the targets' are kept.
                if let Some(clock) = &self.clock_event {
                    fds.push(open_clock(clock, cpu, &fds[0], decoder, 0)?);
                }
            }
            cpus.push(CpuRing::new(cpu, ring, fds));
        }
        Ok(cpus)
    }

    /// Whether a record read from ring `ring` (of CPU `cpu`) is news, and
    /// what it changes: a duplicate of the last one is dropped; an exit
    /// closes the thread's events and may tell its last slice, which is
    /// passed to `push`; a fork may add a wakee.
    pub(super) fn keep(
        &mut self,
        ring: usize,
        cpu: u32,
        ev: &Event,
        decoder: &mut Decoder,
        push: &mut dyn FnMut(Event),
    ) -> bool {
        let this = occurrence(ev);
        if let Some(last) = self.last_occurrence.get_mut(ring) {
            if this.is_some() && this == *last {
                return false;
            }
            *last = this;
        }
        if let EventKind::Exit(e) = &ev.kind {
            // An attached thread's last slice, if it ran on this CPU, is in
            // its final counts.
            if let Some(cpus) = self.tasks.get(&e.tid) {
                decoder.running().set_finals(e.tid, final_counts(cpus));
            }
            if let Some(since) = decoder.running().exited(e.tid, cpu, ev.time) {
                push(Event {
                    time: ev.time,
                    cpu: ev.cpu,
                    kind: EventKind::Ran(crate::event::Ran {
                        tid: e.tid,
                        since: Some(since),
                    }),
                });
            }
        }
        let follow = match (&self.wide, &ev.kind) {
            // Every task's forks are read: only those of the processes join.
            (Some(w), EventKind::Fork(f)) if !w.processes.contains(&f.tgid) => Follow::Nothing,
            _ => self.follow,
        };
        track_targets(
            &ev.kind,
            follow,
            &mut self.tasks,
            &mut self.wakees,
            &mut self.graveyard,
        );
        true
    }

    /// Forecasts the next pids again when due (see [`Nascent::refresh`]).
    pub(super) fn refresh_forecast(&mut self, ncpus: usize) {
        if let Some(n) = self.nascent.as_mut() {
            n.refresh(&mut self.wakees, self.follow == Follow::Everything, ncpus);
        }
    }

    /// Keeps the wakeups of `tid` from now on, without waiting for the
    /// record of its creation (or the forecast, which has none in a PID
    /// namespace other than the initial one).
    pub(super) fn add_wakee(&mut self, cpus: &mut [CpuRing], tid: u32) -> Result<(), OpenFailure> {
        if self.wakees.contains(tid) {
            return Ok(());
        }
        self.wakees.add(tid);
        self.update_wakee_filter(cpus)
    }

    /// Gives the kernel the current `sched_waking` filter if it changed.
    ///
    /// The kernel takes a perf event's filter only once, so the events are
    /// replaced: the new ones are enabled before the old ones are closed,
    /// and the wakeups both recorded meanwhile are dropped as duplicates.
    pub(super) fn update_wakee_filter(&mut self, cpus: &mut [CpuRing]) -> Result<(), OpenFailure> {
        let Some(text) = self.wakees.changed() else {
            return Ok(());
        };
        self.replace_filtered(cpus, text)
    }

    fn replace_filtered(&mut self, cpus: &mut [CpuRing], text: String) -> Result<(), OpenFailure> {
        let switch_text = self.wakees.switch_text(self.state_filter.as_deref());
        for c in cpus {
            let new = open_filtered(&self.waking_event, c.cpu, &c.fds[0], &text)?;
            let mut old = vec![std::mem::replace(&mut c.fds[1], new)];
            if let Some(w) = &self.wide
                && c.fds.len() > 2
            {
                let new = open_filtered(&w.switch_event, c.cpu, &c.fds[0], &switch_text)?;
                old.push(std::mem::replace(&mut c.fds[2], new));
            }
            for fd in &old {
                let _ = sys::disable(fd.as_fd());
            }
            self.graveyard.bury(old);
        }
        Ok(())
    }

    /// Attaches per-task events to `tids` from the first, for `slice` at
    /// most (one thread at least): how many were taken. Under per-CPU
    /// filters (`wide`) the threads join the filters instead, at once.
    pub(super) fn attach_some(
        &mut self,
        cpus: &[CpuRing],
        decoder: &mut Decoder,
        tids: &[u32],
        slice: Duration,
    ) -> Result<usize, OpenFailure> {
        if self.wide.is_some() {
            for &tid in tids {
                self.wakees.add(tid);
            }
            return Ok(tids.len());
        }
        // The names event, one or three tracepoint events, and the
        // sampling one.
        let per_cpu =
            if self.exit_event.is_some() { 4 } else { 2 } + usize::from(self.clock_event.is_some());
        raise_fd_limit((self.tasks.len() + tids.len()) * cpus.len() * per_cpu)?;
        let started = Instant::now();
        let mut taken = 0;
        for &tid in tids {
            self.wakees.add(tid);
            self.attach(cpus, decoder, tid)?;
            taken += 1;
            if started.elapsed() >= slice {
                break;
            }
        }
        Ok(taken)
    }

    /// The threads of `processes` that are not attached yet (under
    /// per-CPU filters: not in them yet).
    pub(super) fn unattached(&self, processes: &[u32]) -> Vec<u32> {
        let mut new = Vec::new();
        for &pid in processes {
            for tid in crate::sys::proc::threads_of(pid) {
                let known = match self.wide {
                    Some(_) => self.wakees.contains(tid),
                    None => self.tasks.contains_key(&tid),
                };
                if !known {
                    new.push(tid);
                }
            }
        }
        new
    }

    /// True once a thread has events of its own.
    pub(super) fn any_attached(&self) -> bool {
        self.wide.is_some() || !self.tasks.is_empty()
    }

    /// Opens and enables `tid`'s events on every CPU (see [`TaskCpu`]). A
    /// thread that is already gone is skipped.
    fn attach(
        &mut self,
        rings: &[CpuRing],
        decoder: &mut Decoder,
        tid: u32,
    ) -> Result<(), OpenFailure> {
        let mut cpus = Vec::with_capacity(rings.len());
        let TaskEvent { what, attr, .. } = &self.switch_event;
        // Comms and mappings come from the names event, which follows
        // more tasks than these do.
        let attr = &sys::TracepointAttr {
            side_band: sys::SideBand::Tasks,
            ..*attr
        };
        // With an exit event, the thread's own events are inherited by
        // nothing (they would add up the counts of the threads that did).
        let own_attr = match &self.exit_event {
            Some(_) => sys::TracepointAttr {
                inherit: false,
                side_band: sys::SideBand::None,
                ..*attr
            },
            None => *attr,
        };
        let names_sample_type = self.waking_event.attr.sample_type;
        for c in rings {
            let open = |attr: &sys::TracepointAttr, what: &str, filter: Option<String>| {
                let Some(fd) = sys::open_task_tracepoint(attr, what, tid, c.cpu)? else {
                    return Ok(None);
                };
                sys::set_output(fd.as_fd(), c.fds[0].as_fd())
                    .with_context(|| format!("sharing the ring buffer of CPU {}", c.cpu))?;
                if let Some(filter) = filter {
                    sys::set_filter(fd.as_fd(), &filter)
                        .with_context(|| format!("filtering {what} of thread {tid}"))?;
                }
                Ok::<_, OpenFailure>(Some(fd))
            };
            let Some(own) = open(&own_attr, what, self.state_filter.clone())? else {
                return Ok(());
            };
            let kids = match &self.exit_event {
                Some(TaskEvent {
                    what: exit_what,
                    attr: exit_attr,
                    ..
                }) => {
                    let Some(switch) = open(attr, what, Some(format!("prev_pid != {tid}")))? else {
                        return Ok(());
                    };
                    let Some(exit) = open(exit_attr, exit_what, Some(format!("pid != {tid}")))?
                    else {
                        return Ok(());
                    };
                    Some([switch, exit])
                }
                None => None,
            };
            let Some(names) = sys::open_task_names(names_sample_type, tid, c.cpu)? else {
                return Ok(());
            };
            sys::set_output(names.as_fd(), c.fds[0].as_fd())
                .with_context(|| format!("sharing the ring buffer of CPU {}", c.cpu))?;
            let clock = match &self.clock_event {
                Some(clock) => match open(&clock.attr, clock.what, None)? {
                    Some(fd) => Some(fd),
                    None => return Ok(()),
                },
                None => None,
            };
            cpus.push(TaskCpu {
                cpu: c.cpu,
                own,
                own_id: None,
                kids,
                names,
                clock,
            });
        }
        self.enable(&mut cpus, decoder, tid)?;
        self.tasks.insert(tid, cpus);
        Ok(())
    }

    /// Registers the ids of thread `tid`'s events opened on `cpus` with
    /// `decoder`, as they need it, and enables them.
    fn enable(&self, cpus: &mut [TaskCpu], decoder: &mut Decoder, tid: u32) -> Result<()> {
        let running = self.running;
        for c in cpus {
            let id = |fd: &OwnedFd| {
                sys::event_id(fd.as_fd())
                    .with_context(|| format!("reading the id of an event of thread {tid}"))
            };
            if let Some(clock) = &c.clock {
                let period = self.clock_event.map_or(0, |e| e.attr.cpu_clock_ns);
                decoder.add_clock(id(clock)?, tid, period);
            }
            if running {
                c.own_id = Some(id(&c.own)?);
                if let Some([switch, exit]) = &c.kids {
                    let (switch, exit) = (id(switch)?, id(exit)?);
                    decoder.running().exit_alias(exit, switch);
                }
            }
            for fd in c.fds() {
                sys::enable(fd.as_fd())
                    .with_context(|| format!("enabling the events of thread {tid}"))?;
            }
            if let Some(id) = c.own_id {
                decoder.running().enabled(id, host::monotonic_ns());
            }
        }
        Ok(())
    }
}

impl super::PerfBackend {
    /// Attaches per-task events to `tids`, then lists the threads of
    /// `processes` again (until no new one appears) so that a thread
    /// created while attaching is not missed. A thread created by one that
    /// was already attached inherits the events and may be attached a
    /// second time here: its duplicate records are dropped when read.
    ///
    /// The rings are read between slices of the attach: the threads
    /// attached first write into them meanwhile, and a busy process's
    /// attach takes long enough to fill them.
    pub(super) fn attach_chosen(
        &mut self,
        tids: &[u32],
        processes: &[u32],
    ) -> Result<(), OpenFailure> {
        const SLICE: Duration = Duration::from_millis(2);
        let mut todo = tids.to_vec();
        for _ in 0..=16 {
            let mut rest = &todo[..];
            while !rest.is_empty() {
                let Some(t) = self.threads.as_mut() else {
                    return Ok(());
                };
                let taken = t.attach_some(&self.cpus, &mut self.decoder, rest, SLICE)?;
                rest = &rest[taken.max(1).min(rest.len())..];
                self.read_all();
            }
            let Some(t) = self.threads.as_ref() else {
                return Ok(());
            };
            todo = t.unattached(processes);
            if todo.is_empty() {
                break;
            }
        }
        match &self.threads {
            Some(t) if !t.any_attached() => {
                Err(anyhow!("none of the threads to trace exists any more").into())
            }
            _ => Ok(()),
        }
    }
}
