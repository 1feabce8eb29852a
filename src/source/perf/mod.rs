//! The perf backend: `perf_event_open` on `sched:sched_switch` and
//! `sched:sched_waking` on every online CPU, per-CPU ring buffers, and
//! decoding of samples and side-band records into [`crate::event::Event`]s
//! delivered in global time order.
//!
//! Layout: [`sys`] wraps the syscall and ioctls, [`ring`] reads the ring
//! buffers, [`record`] decodes records; [`crate::source::reorder`] merges the CPUs.

mod abilities;
pub(crate) mod filter;
mod grow;
pub(crate) mod nascent;
pub(crate) mod record;
mod release;
pub(crate) mod ring;
pub(crate) mod running;
pub(crate) mod sys;
mod threads;
pub(crate) mod wire;

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod proptests;

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::event::{Event, EventKind, EventSink, Lost, SourceStats};
use crate::kallsyms::Preload;
use crate::plan::{Follow, Stacks, Targets};
use crate::source::reorder::{Reorder, Rounds};
use crate::source::tracepoint::{EventFormat, Tracefs};
use crate::sys::host::{self, online_cpus};
use record::{Decoder, Tracepoint};
use ring::Ring;
use threads::{TaskCpu, TaskEvent, Threads};

/// What to open.
#[derive(Clone, Debug)]
pub(crate) struct PerfConfig {
    /// Ring-buffer data size per CPU, in pages (a power of two).
    pub(crate) mmap_pages: usize,
    /// Which callchains are taken, and whether user stacks are copied.
    pub(crate) stacks: Stacks,
    /// Which threads the kernel records. For chosen threads,
    /// `sched_switch` is a per-task event, which the kernel schedules in
    /// and out with its thread, so other threads' switches cost no sample
    /// and no callchain; switch-ins come from the `time_running` its
    /// samples carry ([`running`], [`SwitchIns`]). `sched_waking` runs in
    /// the waker's context, so it stays per CPU with a filter on the wakee
    /// ([`filter::WakeeFilter`]), kept current from fork and exit records
    /// and, for threads too new for those, from a [`nascent::Forecast`].
    pub(crate) targets: Targets,
    /// A tracepoint filter on `sched_switch`'s `prev_state` (from
    /// `--state`): switch-outs in other states are dropped by the kernel
    /// before their callchain is taken.
    pub(crate) state_filter: Option<String>,
    /// kallsyms, being read: kernel stacks are trimmed with its probe
    /// ranges (read here when `None` and kernel callchains are taken).
    pub(crate) kallsyms: Option<Preload>,
    /// The most per-task events to open (threads × CPUs): past it, chosen
    /// threads are traced with per-CPU events filtered on their ids
    /// ([`threads::Wide`]).
    pub(crate) event_budget: usize,
    /// Whether the rings of chosen threads may start small ([`grow`]),
    /// which shortens the wait of a command started once tracing runs.
    pub(crate) grow_rings: bool,
}

/// Why the perf backend could not be opened. A refused
/// `perf_event_open` ([`sys::OpenError::is_denial`]) is what the tracefs
/// backend can work around; anything else is an error either way.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenFailure {
    #[error(transparent)]
    Syscall(#[from] sys::OpenError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl OpenFailure {
    /// The refused `perf_event_open`, if that is what failed.
    pub(crate) fn denial(&self) -> Option<&sys::OpenError> {
        match self {
            OpenFailure::Syscall(e) if e.is_denial() => Some(e),
            _ => None,
        }
    }
}

/// Where the switch-ins of traced threads come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SwitchIns {
    /// `sched_switch`'s `next_pid` (system-wide), backed up by
    /// context-switch records (see [`crate::event::SwitchIn`]).
    Tracepoint,
    /// Context-switch records: when a `--state` filter keeps the kernel
    /// from sampling every switch, or when per-task events cannot carry
    /// their `time_running` (inherited ones, before Linux 6.12). The
    /// kernel then calls perf on every context switch of the machine.
    Records,
    /// The `time_running` of per-task `sched_switch` events
    /// ([`running`]): nothing at all for other threads' switches.
    Running,
}

/// The `sample_type` requested for both tracepoints.
fn sample_type(config: &PerfConfig, switch_ins: SwitchIns) -> u64 {
    let mut st = sys::SAMPLE_IDENTIFIER
        | sys::SAMPLE_TID
        | sys::SAMPLE_TIME
        | sys::SAMPLE_CPU
        | sys::SAMPLE_RAW;
    if config.stacks.kernel || config.stacks.user {
        st |= sys::SAMPLE_CALLCHAIN;
    }
    if switch_ins == SwitchIns::Running {
        st |= sys::SAMPLE_READ;
    }
    if config.stacks.user_copy().is_some() {
        st |= sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER;
    }
    st
}

/// The most bytes one sample of `sample_type` can take (header included),
/// with callchains of at most `max_stack` frames and `max_contexts` context
/// markers, tracepoint payloads laid out as `formats` say, and copies of
/// `stack_user` bytes of user stack.
pub(crate) fn max_sample_size(
    sample_type: u64,
    formats: &[&EventFormat],
    max_stack: u64,
    max_contexts: u64,
    stack_user: u32,
) -> u64 {
    let mut size = (ring::HEADER_SIZE + wire::fixed_sample_len(sample_type)) as u64;
    if sample_type & sys::SAMPLE_CALLCHAIN != 0 {
        size += 8 + 8 * max_stack.saturating_add(max_contexts);
    }
    if sample_type & sys::SAMPLE_RAW != 0 {
        // The payload's fixed part, plus room for any dynamic field's data
        // (neither sched tracepoint has one today); a u32 size first, the
        // whole padded to 8 bytes.
        let payload = formats
            .iter()
            .map(|f| {
                let fixed = f.fixed_size();
                let dynamic = if f.fields.iter().any(|x| x.is_dynamic()) {
                    4096
                } else {
                    0
                };
                (fixed + dynamic) as u64
            })
            .max()
            .unwrap_or(0);
        size += (4 + payload).div_ceil(8) * 8;
    }
    if sample_type & sys::SAMPLE_REGS_USER != 0 {
        // The ABI word, then the registers.
        size += 8 + 8 * sys::USER_REGS.len() as u64;
    }
    if sample_type & sys::SAMPLE_STACK_USER != 0 {
        // The size, the copy, its dynamic size; a record is at most
        // u16::MAX bytes long, and the kernel shortens the copy to fit.
        size = (size + 16 + u64::from(stack_user)).min(u64::from(u16::MAX));
    }
    size
}

/// True when a ring of `data_size` bytes found holding `avail` unread bytes
/// may have lost a record of up to `max_record` bytes since it was last
/// read: its free space fell below that. (The kernel's lost record comes
/// only with the next record that CPU writes, which can be long after.)
pub(crate) fn may_have_lost(data_size: u64, avail: u64, max_record: u64) -> bool {
    data_size.saturating_sub(avail) < max_record
}

/// The bytes a ring of `pages` pages (a power of two) holds before its
/// reader is woken: a quarter of it.
fn wakeup_watermark(pages: usize) -> Result<u32> {
    if pages == 0 || !pages.is_power_of_two() {
        bail!("the ring buffer size must be a power of two number of pages (got {pages})");
    }
    let data_bytes = pages
        .checked_mul(host::page_size())
        .ok_or_else(|| anyhow!("{pages} mmap pages is too large"))?;
    Ok(u32::try_from((data_bytes / 4).max(1)).unwrap_or(u32::MAX))
}

/// Where switch-ins come from, probing what the kernel can do with
/// `probe` (a `sched_switch` event as it would be opened) on the first of
/// `online`. Chosen threads (`per_task`) use the samples' `time_running`
/// when their events are not inherited, or when the kernel samples
/// inherited events with it and counts the exits of the threads that
/// inherit them (then `sched_process_exit`'s id comes too); else, and
/// under `--state`, context-switch records.
fn switch_ins_for(
    tracefs: &Tracefs,
    config: &PerfConfig,
    per_task: bool,
    probe: &sys::TracepointAttr,
    online: &[u32],
    probes: &mut sys::Probes,
) -> Result<(SwitchIns, Option<u64>)> {
    if config.state_filter.is_some() {
        return Ok((SwitchIns::Records, None));
    }
    if !per_task {
        return Ok((SwitchIns::Tracepoint, None));
    }
    if !probe.inherit {
        return Ok((SwitchIns::Running, None));
    }
    let first_cpu = online.first().copied().unwrap_or(0);
    let exit_id = || Ok(tracefs.event_format("sched", "sched_process_exit")?.id as u64);
    let able = abilities::of(probe, exit_id, first_cpu, probes)?;
    if !able.inherited_reads {
        return Ok((SwitchIns::Records, None));
    }
    let exit_id = exit_id()?;
    Ok(if able.inherited_exits {
        (SwitchIns::Running, Some(exit_id))
    } else {
        (SwitchIns::Records, Some(exit_id))
    })
}

/// One CPU's events and the ring they share.
struct CpuRing {
    cpu: u32,
    /// Time of the last event read from this ring: a loss reported later
    /// happened after it.
    last_time: u64,
    /// Declared before `fds` so it is unmapped before they are closed.
    ring: Ring,
    /// `fds[0]` owns the ring (and carries the side-band records);
    /// the others write into it through `PERF_EVENT_IOC_SET_OUTPUT`.
    fds: Vec<OwnedFd>,
    /// The small ring this CPU's events started with, once `ring` is the
    /// large one they move to ([`grow`]): read until the end, since events
    /// write into it until they move, and those opened before the swap
    /// stay.
    first: Option<FirstRing>,
}

/// A CPU's first ring, after it grew.
struct FirstRing {
    last_time: u64,
    /// Declared before `owner` so it is unmapped before it is closed.
    ring: Ring,
    owner: OwnedFd,
}

/// The large rings to grow into, once tracing runs ([`grow`]).
struct GrowPlan {
    pages: usize,
    sample_type: u64,
    stack_user: u32,
    watermark: u32,
}

impl GrowPlan {
    /// A dummy event on `cpu` that owns a large ring, or anchors an event
    /// to one (see [`grow`]).
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

/// How long [`PerfBackend::finish`] waits for [`visit_cpus`].
const VISIT_TIMEOUT: Duration = Duration::from_millis(200);

/// Runs a thread on each of `cpus` in turn, at the highest real-time
/// priority where that is allowed, so that whatever runs on each is
/// switched out once:
/// per-task events sample that switch-out, which tells when each traced
/// thread that was running had switched in ([`running`]). Each visit costs
/// the thread it preempts a few microseconds. Returns whether every CPU was
/// visited within `within` (a CPU busy with real-time work may not let a
/// normal thread in: the visits then go on, unwaited for).
pub(crate) fn visit_cpus(cpus: &[u32], within: Duration) -> bool {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;

    let cpus = cpus.to_vec();
    let (done, visited) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("offwake-visit".to_string())
        .spawn(move || {
            // SAFETY: plain syscall with no pointer arguments.
            let top = unsafe { libc::sched_get_priority_max(libc::SCHED_FIFO) };
            let param = libc::sched_param {
                sched_priority: top.max(1),
            };
            // SAFETY: sched_setscheduler on the calling thread (pid 0)
            // with a valid sched_param that outlives the call; failing
            // (no CAP_SYS_NICE) leaves the thread as it was.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
            for cpu in cpus {
                let mut set = CpuSet::new();
                if set.set(cpu as usize).is_ok() {
                    // Returns once this thread runs on `cpu`.
                    let _ = sched_setaffinity(Pid::from_raw(0), &set);
                }
            }
            let _ = done.send(());
        });
    spawned.is_ok() && visited.recv_timeout(within).is_ok()
}

/// Open, enabled perf events and their rings.
pub(crate) struct PerfBackend {
    cpus: Vec<CpuRing>,
    switch_ins: SwitchIns,
    /// With chosen threads: their events and wakee filter.
    threads: Option<Threads>,
    decoder: Decoder,
    reorder: Reorder,
    /// Events released in time order (and seen early by the sink) that
    /// wait for kallsyms, which their kernel stacks are trimmed with.
    held: VecDeque<Event>,
    stats: SourceStats,
    rounds: Rounds,
    /// The most bytes one sample can take: a ring with less free space than
    /// this when read may have lost samples (see [`may_have_lost`]).
    max_sample: u64,
    enabled: bool,
    /// kallsyms is read off the attach path; the decoder gets its probe
    /// ranges before the first events are released.
    kallsyms: Option<Preload>,
    /// Why chosen threads are traced with per-CPU events, when they are.
    wide_note: Option<String>,
    /// The rings to grow into, from the second round on.
    grow_plan: Option<GrowPlan>,
    growth: Option<grow::Growth>,
    polls: u64,
}

impl PerfBackend {
    /// Opens and enables both tracepoints on every online CPU.
    pub(crate) fn open(tracefs: &Tracefs, config: &PerfConfig) -> Result<PerfBackend, OpenFailure> {
        let watermark = wakeup_watermark(config.mmap_pages)?;
        let switch = tracefs.event_format("sched", "sched_switch")?;
        let waking = tracefs.event_format("sched", "sched_waking")?;
        // The threads to attach to (`None`: every thread, per CPU).
        let threads = config.targets.threads_now();
        let follow = config.targets.follow();
        let mut base = sys::TracepointAttr {
            id: 0,
            sample_type: sample_type(config, SwitchIns::Tracepoint),
            exclude_callchain_user: !config.stacks.user,
            exclude_callchain_kernel: !config.stacks.kernel,
            side_band: false,
            context_switch: false,
            wakeup_watermark: watermark,
            // Per-task events of `-p` follow the threads the process
            // creates; `-t` names threads, not what they create.
            inherit: follow != Follow::Nothing,
            inherit_thread: follow == Follow::Threads,
            stack_user: config.stacks.user_copy().unwrap_or(0),
        };
        let online = online_cpus()?;
        crate::timing::mark("attach.formats");
        let wide = threads
            .as_ref()
            .map(|tids| tids.len().saturating_mul(online.len()))
            .filter(|&events| events > config.event_budget);
        // Kept until the real events are open.
        let mut probes = sys::Probes::default();
        let (switch_ins, exit_id) = match wide {
            // As when tracing the whole system.
            Some(_) if config.state_filter.is_some() => (SwitchIns::Records, None),
            Some(_) => (SwitchIns::Tracepoint, None),
            None => switch_ins_for(
                tracefs,
                config,
                threads.is_some(),
                &sys::TracepointAttr {
                    id: switch.id as u64,
                    ..base
                },
                &online,
                &mut probes,
            )?,
        };
        crate::timing::mark("attach.probes");
        let st = sample_type(config, switch_ins);
        base.sample_type = st;
        let mut decoder = Decoder::new(st, &switch, &waking)?;
        let switch_event = TaskEvent {
            tp: Tracepoint::Switch,
            what: "sched:sched_switch",
            attr: sys::TracepointAttr {
                id: switch.id as u64,
                side_band: true,
                context_switch: switch_ins != SwitchIns::Running,
                ..base
            },
        };
        let waking_event = TaskEvent {
            tp: Tracepoint::Waking,
            what: "sched:sched_waking",
            attr: sys::TracepointAttr {
                id: waking.id as u64,
                ..base
            },
        };
        let mut grow_plan = None;
        let (cpus, threads) = match threads {
            None => (
                Self::open_per_cpu(&online, &[switch_event, waking_event], config, &mut decoder)?,
                None,
            ),
            Some(tids) => {
                // Threads created by traced ones tell their last slice with
                // sched_process_exit (see `running`).
                let exit_event = exit_id
                    .filter(|_| switch_ins == SwitchIns::Running)
                    .map(|id| TaskEvent {
                        tp: Tracepoint::Switch,
                        what: "sched:sched_process_exit",
                        attr: sys::TracepointAttr { id, ..base },
                    });
                // A few per-task events (and the rings' other one) are
                // quick to move to larger rings: the rings start small.
                let events = tids.len().saturating_mul(online.len()).saturating_mul(3);
                let first_pages =
                    grow::start_pages(config.mmap_pages, base.stack_user).filter(|_| {
                        config.grow_rings
                            && wide.is_none()
                            && events + online.len() <= grow::MAX_MOVED
                    });
                let wide = wide.map(|_| threads::Wide {
                    switch_event: TaskEvent {
                        attr: sys::TracepointAttr {
                            side_band: false,
                            context_switch: false,
                            inherit: false,
                            inherit_thread: false,
                            ..switch_event.attr
                        },
                        ..switch_event
                    },
                    processes: config.targets.processes(),
                });
                let mut threads = Threads::new(
                    &tids,
                    [switch_event, waking_event],
                    exit_event,
                    follow,
                    config.state_filter.clone(),
                    switch_ins == SwitchIns::Running,
                    wide,
                );
                if first_pages.is_some() {
                    grow_plan = Some(GrowPlan {
                        pages: config.mmap_pages,
                        sample_type: st,
                        stack_user: base.stack_user,
                        watermark,
                    });
                }
                let pages = first_pages.unwrap_or(config.mmap_pages);
                let cpus = threads.open_rings(
                    &online,
                    st,
                    wakeup_watermark(pages)?,
                    pages,
                    switch_ins == SwitchIns::Records,
                )?;
                (cpus, Some((threads, tids)))
            }
        };
        crate::timing::mark("attach.open");
        let (threads, tids) = threads.unzip();
        let mut backend = PerfBackend {
            wide_note: wide.map(|events| {
                format!(
                    "offwake-perf: {} threads on {} CPUs are {events} threads x CPUs, more \
                     than --event-budget {}: tracing with one sched_switch event per CPU \
                     instead of per-task events, which the kernel filters on the threads' ids \
                     at every context switch of the machine (and offwake-perf again)",
                    tids.as_ref().map_or(0, Vec::len),
                    online.len(),
                    config.event_budget
                )
            }),
            cpus,
            switch_ins,
            threads,
            decoder,
            reorder: Reorder::new(),
            held: VecDeque::new(),
            stats: SourceStats::default(),
            rounds: Rounds::default(),
            max_sample: max_sample_size(
                st,
                &[&switch, &waking],
                host::kernel_sysctl("perf_event_max_stack").unwrap_or(127),
                host::kernel_sysctl("perf_event_max_contexts_per_stack").unwrap_or(8),
                base.stack_user,
            ),
            enabled: false,
            grow_plan,
            growth: None,
            polls: 0,
            kallsyms: if config.stacks.kernel {
                Some(config.kallsyms.clone().unwrap_or_else(Preload::spawn))
            } else {
                None
            },
        };
        backend.enable()?;
        crate::timing::mark("attach.enable");
        if let (Some(t), Some(tids)) = (backend.threads.as_mut(), tids) {
            let processes = config.targets.processes();
            t.attach_threads(&backend.cpus, &mut backend.decoder, &tids, &processes)?;
            t.update_wakee_filter(&mut backend.cpus)?;
            // Closed with the real events at the end: closing them now
            // could still be waiting for RCU when a short run exits, and
            // its exit would wait too.
            t.graveyard.bury(probes.into_fds());
        }
        Ok(backend)
    }

    /// Enables every CPU's events.
    fn enable(&mut self) -> Result<()> {
        for c in &self.cpus {
            for fd in &c.fds {
                sys::enable(fd.as_fd())
                    .with_context(|| format!("enabling the events of CPU {}", c.cpu))?;
            }
        }
        self.enabled = true;
        Ok(())
    }

    /// One event per tracepoint on each of the `online` CPUs, sharing the
    /// CPU's ring; the side-band records come with `sched_switch`.
    fn open_per_cpu(
        online: &[u32],
        events: &[TaskEvent],
        config: &PerfConfig,
        decoder: &mut Decoder,
    ) -> Result<Vec<CpuRing>, OpenFailure> {
        let mut cpus = Vec::new();
        for &cpu in online {
            let mut fds = Vec::with_capacity(events.len());
            for TaskEvent { tp, what, attr } in events {
                let fd = sys::open_tracepoint(attr, what, cpu)?;
                let id = sys::event_id(fd.as_fd())
                    .with_context(|| format!("reading the id of {what} on CPU {cpu}"))?;
                decoder.add_id(id, *tp);
                if *tp == Tracepoint::Switch
                    && let Some(filter) = &config.state_filter
                {
                    sys::set_filter(fd.as_fd(), filter)
                        .with_context(|| format!("filtering {what} on CPU {cpu}"))?;
                }
                fds.push(fd);
            }
            let ring = Ring::map(fds[0].as_fd(), config.mmap_pages)
                .with_context(|| format!("mapping the ring buffer of CPU {cpu}"))?;
            for fd in &fds[1..] {
                sys::set_output(fd.as_fd(), fds[0].as_fd())
                    .with_context(|| format!("sharing the ring buffer of CPU {cpu}"))?;
            }
            cpus.push(CpuRing {
                cpu,
                last_time: 0,
                ring,
                fds,
                first: None,
            });
        }
        Ok(cpus)
    }

    /// Waits up to `timeout` for data (returns early on EINTR), reads every
    /// ring, and passes to `sink`, in global time order, every event that
    /// can no longer be preceded by one not yet read (see [`Rounds`]).
    pub(crate) fn poll(
        &mut self,
        timeout: Duration,
        wake: Option<BorrowedFd<'_>>,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        self.polls += 1;
        if self.polls == 2 {
            // From the second round: a run over after one (`-- true`)
            // costs nothing; under a storm, the first ring's watermark
            // ends the first round early.
            self.start_growth();
        }
        let fds = self.cpus.iter().flat_map(|c| {
            std::iter::once(c.fds[0].as_fd()).chain(c.first.as_ref().map(|f| f.owner.as_fd()))
        });
        let growing = self.growth.as_ref().and_then(grow::Growth::ready_fd);
        let Some(start) =
            self.rounds
                .wait(fds.chain(growing), wake, timeout, "the perf ring buffers")?
        else {
            return Ok(());
        };
        self.read_all();
        self.grow_rings();
        if let Some(t) = self.threads.as_mut() {
            t.refresh_forecast(self.cpus.len());
            t.update_wakee_filter(&mut self.cpus)?;
        }
        if let Some(upto) = self.rounds.end(start) {
            let held = &mut self.held;
            self.reorder.flush_upto(upto, &mut |mut ev| {
                sink.early(&mut ev);
                held.push_back(ev);
            });
        }
        // Kernel stacks are trimmed with kallsyms' ranges: until it is
        // loaded, released events wait, their user stacks already unwound.
        if self.kallsyms.as_ref().is_none_or(Preload::is_ready) {
            self.join_probes();
            self.pass_held(sink);
        }
        Ok(())
    }

    /// Passes the held events on, their kernel stacks finished.
    fn pass_held(&mut self, sink: &mut dyn EventSink) {
        for mut ev in self.held.drain(..) {
            self.decoder.finish_stacks(&mut ev);
            sink.event(ev);
        }
    }

    /// Disables the events, drains the rings and flushes every pending
    /// event to `sink` in time order.
    pub(crate) fn finish(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        let mut first_err = None;
        if self.enabled && self.switch_ins == SwitchIns::Running {
            // A traced thread that is running now switched in at a time
            // its next switch-out would tell: make that happen while the
            // events still sample.
            let cpus: Vec<u32> = self.cpus.iter().map(|c| c.cpu).collect();
            visit_cpus(&cpus, VISIT_TIMEOUT);
        }
        if self.enabled {
            for c in &self.cpus {
                for fd in &c.fds {
                    if let Err(e) = sys::disable(fd.as_fd()) {
                        first_err.get_or_insert(e.context(format!("disabling CPU {}", c.cpu)));
                    }
                }
            }
            let tasks = self.threads.iter().flat_map(|t| &t.tasks);
            for (tid, cpus) in tasks {
                for fd in cpus.iter().flat_map(TaskCpu::fds) {
                    if let Err(e) = sys::disable(fd.as_fd()) {
                        first_err.get_or_insert(e.context(format!("disabling thread {tid}")));
                    }
                }
            }
            self.enabled = false;
        }
        self.read_all();
        let held = &mut self.held;
        self.reorder.flush_all(&mut |mut ev| {
            sink.early(&mut ev);
            held.push_back(ev);
        });
        self.join_probes();
        self.pass_held(sink);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(crate) fn stats(&self) -> SourceStats {
        self.stats
    }

    /// The data size of each CPU's ring, the large one once grown.
    #[cfg(test)]
    fn ring_sizes(&self) -> Vec<usize> {
        self.cpus.iter().map(|c| c.ring.data_size()).collect()
    }

    /// `sched_switch` events read from the rings the CPUs have now (the
    /// large ones once grown).
    #[cfg(test)]
    fn switches_in_current_rings(&self) -> u64 {
        self.cpus.iter().map(|c| c.ring.switches).sum()
    }

    /// True until the rings have grown, and the events moved.
    #[cfg(test)]
    fn growing(&self) -> bool {
        self.grow_plan.is_some() || self.growth.is_some()
    }

    /// Said on stderr when chosen threads are traced with per-CPU events.
    pub(crate) fn wide_note(&self) -> Option<&str> {
        self.wide_note.as_deref()
    }

    /// Closes every event without waiting for the kernel to release them
    /// (see [`release`]); the rings are unmapped first, so that nothing of
    /// this process holds them any more.
    pub(crate) fn close_detached(mut self) {
        let mut fds = Vec::new();
        for CpuRing {
            ring,
            fds: own,
            first,
            ..
        } in std::mem::take(&mut self.cpus)
        {
            drop(ring);
            fds.extend(own);
            if let Some(FirstRing { ring, owner, .. }) = first {
                drop(ring);
                fds.push(owner);
            }
        }
        if let Some(mut t) = self.threads.take() {
            fds.extend(t.graveyard.take());
            fds.extend(
                t.tasks
                    .drain()
                    .flat_map(|(_, cpus)| cpus)
                    .flat_map(TaskCpu::into_fds),
            );
        }
        release::close_detached(fds);
    }

    /// How long a round may wait for data: per-task runs read often, so
    /// that a thread created during tracing joins the wakee filter, and the
    /// forecast of new pids is sorted out ([`nascent::refresh_period`]),
    /// within about that time (an idle round costs one `poll`).
    pub(crate) fn round_period(&self) -> Duration {
        if self.threads.is_some() {
            Duration::from_millis(10)
        } else {
            Duration::from_millis(100)
        }
    }

    /// See [`crate::source::Source::follow_now`].
    pub(crate) fn follow_now(&mut self, tid: u32) -> Result<()> {
        if let Some(t) = self.threads.as_mut() {
            t.add_wakee(&mut self.cpus, tid)
                .with_context(|| format!("keeping the wakeups of thread {tid}"))?;
        }
        Ok(())
    }

    /// See [`crate::source::Source::copies_user_stacks`].
    pub(crate) fn copies_user_stacks(&self) -> bool {
        self.decoder.sample_type() & sys::SAMPLE_STACK_USER != 0
    }

    /// See [`crate::source::Source::switch_ins_from_records`].
    pub(crate) fn switch_ins_from_records(&self) -> bool {
        self.switch_ins == SwitchIns::Records
    }

    /// Waits for kallsyms (read on a thread since attach), which kernel
    /// stacks are trimmed with when events are released. Rounds never wait
    /// for it (they release nothing until it is there), so that the first
    /// rounds, which may bring new threads for the wakee filter, are not
    /// held up; only [`PerfBackend::finish`] waits.
    fn join_probes(&mut self) {
        if let Some(kallsyms) = self.kallsyms.take() {
            // Without kallsyms nothing is trimmed (stacks may then start
            // in the tracing machinery, which symbolizes as such).
            if let Ok(tables) = kallsyms.wait() {
                self.decoder.set_probes(tables.probes.clone());
            }
        }
    }

    /// Forks the process that maps the large rings and moves the events
    /// to them ([`grow`]); without it, the first rings stay, and stderr
    /// says why.
    fn start_growth(&mut self) {
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
    fn grow_rings(&mut self) {
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

    /// Reads every ring, decoding into the reorder buffer.
    fn read_all(&mut self) {
        let PerfBackend {
            cpus,
            threads,
            decoder,
            reorder,
            stats,
            rounds,
            max_sample,
            ..
        } = self;
        for (i, c) in cpus.iter_mut().enumerate() {
            let cpu = c.cpu;
            let mut read = |ring: &mut Ring, last_time: &mut u64| {
                #[cfg(test)]
                let mut switches = 0;
                let ex = ring.read(&mut |rec| match decoder.decode_unfinished(rec) {
                    Ok(Some(mut ev)) => {
                        stats.records += 1;
                        #[cfg(test)]
                        if matches!(ev.kind, EventKind::Switch(_)) {
                            switches += 1;
                        }
                        if let Some(t) = threads.as_mut()
                            && !t.keep(i, cpu, &ev, decoder, &mut |e| reorder.push(e))
                        {
                            return;
                        }
                        if let EventKind::Lost(l) = ev.kind {
                            decoder.running().forget_cpu(cpu);
                            stats.lost_records += l.records;
                            // The records were lost after the last one this ring
                            // delivered (never before what was already passed on).
                            ev.time = (*last_time).max(rounds.released_upto()).min(l.until);
                        } else {
                            *last_time = ev.time;
                        }
                        reorder.push(ev);
                    }
                    Ok(None) => stats.records += 1,
                    Err(_) => stats.malformed += 1,
                });
                #[cfg(test)]
                {
                    ring.switches += switches;
                }
                if ex.corrupt {
                    stats.malformed += 1;
                }
                if may_have_lost(ring.data_size() as u64, ex.avail, *max_sample) {
                    // Samples may have been lost after the last record read,
                    // up to now that the ring has room again. The kernel says
                    // so (or not) only with this CPU's next record, and by then
                    // intervals the loss could fall inside may have been counted:
                    // the window is passed on now, counting no record. (Samples
                    // are the largest records intervals depend on; a longer
                    // mmap record lost meanwhile costs symbols, not durations.)
                    let until = host::monotonic_ns();
                    decoder.running().forget_cpu(cpu);
                    reorder.push(Event {
                        time: (*last_time).max(rounds.released_upto()).min(until),
                        cpu,
                        kind: EventKind::Lost(Lost { records: 0, until }),
                    });
                }
            };
            // The first ring's records are older than the large one's,
            // event by event.
            if let Some(f) = c.first.as_mut() {
                read(&mut f.ring, &mut f.last_time);
            }
            read(&mut c.ring, &mut c.last_time);
        }
    }
}

impl Drop for PerfBackend {
    fn drop(&mut self) {
        if self.enabled {
            for fd in self.cpus.iter().flat_map(|c| &c.fds).chain(
                self.threads
                    .iter()
                    .flat_map(|t| t.tasks.values().flatten().flat_map(TaskCpu::fds)),
            ) {
                let _ = sys::disable(fd.as_fd());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_may_have_lost_a_sample_only_when_it_had_no_room_for_one() {
        // 4096-byte ring, samples of up to 1200 bytes.
        assert!(!may_have_lost(4096, 0, 1200));
        assert!(!may_have_lost(4096, 2896, 1200));
        assert!(may_have_lost(4096, 2897, 1200));
        assert!(may_have_lost(4096, 4096, 1200));
        // A ring smaller than one sample can lose one at any time.
        assert!(may_have_lost(1024, 0, 1200));
        // Inconsistent counts (more unread than the ring holds) count as full.
        assert!(may_have_lost(4096, 5000, 1200));
    }

    #[test]
    fn max_sample_size_without_callchain_or_payload() {
        let st = sys::SAMPLE_IDENTIFIER | sys::SAMPLE_TID | sys::SAMPLE_TIME | sys::SAMPLE_CPU;
        // Header and four words; no callchain, no payload whatever the limits.
        assert_eq!(max_sample_size(st, &[], 127, 8, 0), 8 + 32);
        let t = Tracefs::fixtures();
        let switch = t.event_format("sched", "sched_switch").unwrap();
        // The fixture's payload is 64 bytes: with its u32 size, padded, 72.
        assert_eq!(
            max_sample_size(st | sys::SAMPLE_RAW, &[&switch], 127, 8, 0),
            8 + 32 + 72
        );
        assert_eq!(
            max_sample_size(st | sys::SAMPLE_CALLCHAIN, &[], 127, 8, 0),
            8 + 32 + 8 + 8 * 135
        );
    }

    #[test]
    fn sample_type_follows_callchain_config() {
        let c = PerfConfig {
            mmap_pages: 8,
            stacks: Stacks {
                kernel: false,
                user: false,
                ..Stacks::both_fp()
            },
            targets: Targets::All,
            state_filter: None,
            kallsyms: None,
            event_budget: crate::cli::DEFAULT_EVENT_BUDGET,
            grow_rings: true,
        };
        assert_eq!(
            sample_type(&c, SwitchIns::Tracepoint) & sys::SAMPLE_CALLCHAIN,
            0
        );
        let c = PerfConfig {
            stacks: Stacks {
                kernel: true,
                ..c.stacks
            },
            ..c
        };
        let st = sample_type(&c, SwitchIns::Tracepoint);
        assert_ne!(st & sys::SAMPLE_CALLCHAIN, 0);
        assert_eq!(st & sys::SAMPLE_READ, 0);
        // Per-task switch-ins come with the samples' time_running.
        let st = sample_type(&c, SwitchIns::Running);
        assert_eq!(st & sys::SAMPLE_READ, sys::SAMPLE_READ);
    }

    #[test]
    fn an_open_failure_keeps_its_whole_chain_and_says_if_it_was_refused() {
        let other = OpenFailure::from(anyhow!("root cause").context("mapping CPU 0's ring"));
        assert!(other.denial().is_none());
        let e = anyhow::Error::from(other);
        assert_eq!(format!("{e:#}"), "mapping CPU 0's ring: root cause");
        let refused = OpenFailure::from(sys::OpenError {
            errno: libc::EACCES,
            message: "perf_event_open failed".into(),
        });
        assert_eq!(refused.denial().map(|d| d.errno), Some(libc::EACCES));
        let unable = OpenFailure::from(sys::OpenError {
            errno: libc::EINVAL,
            message: "perf_event_open failed".into(),
        });
        assert!(unable.denial().is_none());
    }

    #[test]
    fn non_power_of_two_pages_is_an_error() {
        let t = Tracefs::fixtures();
        for pages in [0, 3, 12] {
            let c = PerfConfig {
                mmap_pages: pages,
                stacks: Stacks::both_fp(),
                targets: Targets::All,
                state_filter: None,
                kallsyms: None,
                event_budget: crate::cli::DEFAULT_EVENT_BUDGET,
                grow_rings: true,
            };
            let err = PerfBackend::open(&t, &c)
                .err()
                .expect("must fail")
                .to_string();
            assert!(err.contains("power of two"), "{err}");
        }
    }
}
