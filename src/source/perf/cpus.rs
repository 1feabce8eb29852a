//! Each CPU's ring and the events that write into it: opening them (one
//! event per tracepoint on every CPU, or those of cgroups or of chosen
//! threads), and reading every ring into the reorder buffer.

use std::os::fd::{AsFd, OwnedFd};

use anyhow::Context;

use super::record::{Decoder, Tracepoint};
use super::ring::Ring;
use super::sizing::may_have_lost;
use super::sizing::wakeup_watermark;
use super::threads::{self, TaskEvent, Threads};
use super::{OpenFailure, PerfBackend, PerfConfig, SwitchIns, cgroups, sys};
use crate::event::runs::LastRuns;
use crate::event::{Event, EventKind, Lost};
use crate::plan::Targets;
use crate::sys::host;

/// One CPU's events and the ring they share.
pub(super) struct CpuRing {
    pub(super) cpu: u32,
    /// Time of the last event read from this ring: a loss reported later
    /// happened after it.
    pub(super) last_time: u64,
    /// Declared before `fds` so it is unmapped before they are closed.
    pub(super) ring: Ring,
    /// `fds[0]` owns the ring (and carries the side-band records);
    /// the others write into it through `PERF_EVENT_IOC_SET_OUTPUT`.
    pub(super) fds: Vec<OwnedFd>,
}

impl CpuRing {
    /// CPU `cpu`'s `ring`, which `fds[0]` owns, nothing read from it yet.
    pub(super) fn new(cpu: u32, ring: Ring, fds: Vec<OwnedFd>) -> CpuRing {
        CpuRing {
            cpu,
            last_time: 0,
            ring,
            fds,
        }
    }
}

/// The events of the chosen threads `tids`, yet to open: per task, or,
/// when `wide` (their number past the event budget), per CPU filtered on
/// their ids.
fn chosen_threads(
    tids: &[u32],
    [switch_event, waking_event]: [TaskEvent; 2],
    exit_event: Option<TaskEvent>,
    switch_ins: SwitchIns,
    wide: Option<usize>,
    config: &PerfConfig,
) -> Threads {
    let wide = wide.map(|_| threads::Wide {
        switch_event: TaskEvent {
            attr: sys::TracepointAttr {
                side_band: sys::SideBand::None,
                context_switch: false,
                inherit: false,
                inherit_thread: false,
                ..switch_event.attr
            },
            ..switch_event
        },
        processes: config.targets.processes(),
    });
    Threads::new(
        tids,
        [switch_event, waking_event],
        exit_event,
        config.targets.follow(),
        config.state_filter.clone(),
        switch_ins == SwitchIns::Running,
        wide,
    )
}

/// What [`open_events`] opened: every CPU's ring and events, and the
/// state of `--cgroup`'s or of the chosen threads (with their ids).
pub(super) type Opened = (
    Vec<CpuRing>,
    Option<cgroups::Cgroups>,
    Option<(Threads, Vec<u32>)>,
);

/// Opens the events on the `online` CPUs: for the cgroups of
/// `config.targets`, for the chosen threads (`threads`, per CPU when
/// `wide`), or for every thread. `events` are both tracepoints', the
/// exit event of threads to follow, and `--wall`'s sampling event;
/// switch-ins come as `switch_ins` says, and samples are of `sample_type`.
pub(super) fn open_events(
    config: &PerfConfig,
    (online, threads, wide): (&[u32], Option<Vec<u32>>, Option<usize>),
    (events, exit_event, clock): ([TaskEvent; 2], Option<TaskEvent>, Option<TaskEvent>),
    (switch_ins, sample_type): (SwitchIns, u64),
    decoder: &mut Decoder,
) -> Result<Opened, OpenFailure> {
    Ok(match (threads, &config.targets) {
        (None, Targets::Cgroups(targets)) => {
            let (c, cpus) = cgroups::Cgroups::open(
                targets,
                online,
                (&events, clock.as_ref()),
                config,
                decoder,
            )?;
            (cpus, Some(c), None)
        }
        (None, _) => {
            let all: Vec<TaskEvent> = events.iter().copied().chain(clock).collect();
            let cpus = PerfBackend::open_per_cpu(online, &all, config, decoder)?;
            (cpus, None, None)
        }
        (Some(tids), _) => {
            let pages = config.mmap_pages;
            let mut threads = chosen_threads(&tids, events, exit_event, switch_ins, wide, config);
            let cpus = threads.open_rings(
                online,
                (sample_type, wakeup_watermark(pages)?, pages),
                switch_ins == SwitchIns::Records,
                clock,
                decoder,
            )?;
            (cpus, None, Some((threads, tids)))
        }
    })
}

impl PerfBackend {
    /// One event per tracepoint on each of the `online` CPUs, sharing the
    /// CPU's ring; the side-band records come with `sched_switch`.
    pub(super) fn open_per_cpu(
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
                match tp {
                    Tracepoint::Clock => decoder.add_clock(id, 0, attr.cpu_clock_ns),
                    _ => decoder.add_id(id, *tp),
                }
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
            cpus.push(CpuRing::new(cpu, ring, fds));
        }
        Ok(cpus)
    }

    /// Reads every ring, decoding into the reorder buffer.
    pub(super) fn read_all(&mut self) {
        let PerfBackend {
            cpus,
            threads,
            cgroups,
            decoder,
            reorder,
            stats,
            rounds,
            max_sample,
            behind,
            last_runs,
            seen,
            ..
        } = self;
        for (i, c) in cpus.iter_mut().enumerate() {
            let cpu = c.cpu;
            let mut read = |ring: &mut Ring, last_time: &mut u64| {
                let ex = ring.read(&mut |rec| match decoder.decode_unfinished(rec) {
                    Ok(Some(mut ev)) => {
                        stats.records += 1;
                        if let Some(t) = threads.as_mut()
                            && !t.keep(i, cpu, &ev, decoder, &mut |e| reorder.push(e))
                        {
                            return;
                        }
                        if let Some(c) = cgroups.as_mut() {
                            c.note(&ev);
                        }
                        if last_runs.is_some() {
                            LastRuns::note(seen, &ev);
                        }
                        if let EventKind::Lost(l) = ev.kind {
                            decoder.lost_on(cpu);
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
                if ex.corrupt {
                    stats.malformed += 1;
                }
                *behind |= super::ring::over_half(ex.avail, ring.data_size() as u64);
                if may_have_lost(ring.data_size() as u64, ex.avail, *max_sample) {
                    // Samples may have been lost after the last record read,
                    // up to now that the ring has room again. The kernel says
                    // so (or not) only with this CPU's next record, and by then
                    // intervals the loss could fall inside may have been counted:
                    // the window is passed on now, counting no record. (Samples
                    // are the largest records intervals depend on; a longer
                    // mmap record lost meanwhile costs symbols, not durations.)
                    let until = host::monotonic_ns();
                    decoder.lost_on(cpu);
                    reorder.push(Event {
                        time: (*last_time).max(rounds.released_upto()).min(until),
                        cpu,
                        kind: EventKind::Lost(Lost { records: 0, until }),
                    });
                }
            };
            read(&mut c.ring, &mut c.last_time);
        }
    }
}
