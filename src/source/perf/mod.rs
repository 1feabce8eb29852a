//! The perf backend: `perf_event_open` on `sched:sched_switch` and
//! `sched:sched_waking` on every online CPU, per-CPU ring buffers, and
//! decoding of samples and side-band records into [`crate::event::Event`]s
//! delivered in global time order.
//!
//! Layout: this file is the backend's lifecycle (open, start, read, stop).
//! [`attrs`] decides what the events are opened with; [`sys`] wraps the
//! syscall and ioctls; [`cpus`] opens the per-CPU events
//! and their rings, which [`ring`] reads and [`sizing`] sizes; [`wire`]
//! reads records and [`record`] turns them into events, with switch-ins
//! told by [`running`]; [`threads`], [`filter`] and [`nascent`] attach the
//! chosen threads and keep the wakee filter; [`release`] closes events
//! out of the way; [`watch`] raises a reader that falls behind; [`cuts`]
//! counts the stack copies cut; [`visit`] switches out what runs when
//! tracing stops; [`abilities`] probes the kernel.
//! [`crate::source::reorder`] merges the CPUs.

mod abilities;
mod attrs;
mod cgroups;
mod cpus;
mod cuts;
pub(crate) mod filter;
pub(crate) mod nascent;
pub(crate) mod record;
mod release;
pub(crate) mod ring;
pub(crate) mod running;
mod sizing;
pub(crate) mod sys;
mod threads;
mod visit;
mod watch;
pub(crate) mod wire;

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod proptests;

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::event::copies::CopyBudget;
use crate::event::runs::LastRuns;
use crate::event::{Event, EventSink, SourceStats};
use crate::kallsyms::Preload;
use crate::plan::{Stacks, Targets};
use crate::source::reorder::{Reorder, Rounds};
use crate::source::tracepoint::Tracefs;
use crate::sys::host::{self, online_cpus};
use crate::sys::priority::OnDemand;
use attrs::{base_attr, clock_event, sample_type, sched_events, switch_ins_for};
use cpus::{CpuRing, open_events};
use record::Decoder;
use sizing::wakeup_watermark;
use threads::{TaskCpu, Threads};
use visit::{VISIT_TIMEOUT, visit_cpus};

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
    /// Samples carry their task's cgroup id (`PERF_SAMPLE_CGROUP`).
    pub(crate) cgroup_ids: bool,
    /// `--wall`: the targets' on-CPU samples a second of CPU time.
    pub(crate) wall_hz: Option<u32>,
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

/// Said when `threads` chosen threads on `cpus` CPUs are `events` threads
/// x CPUs, past the event `budget`.
fn wide_note(threads: usize, cpus: usize, events: usize, budget: usize) -> String {
    format!(
        "offwake-perf: {threads} threads on {cpus} CPUs are {events} threads x CPUs, more \
         than --event-budget {budget}: tracing with one sched_switch event per CPU \
         instead of per-task events, which the kernel filters on the threads' ids \
         at every context switch of the machine (and offwake-perf again)"
    )
}

/// Most bytes of user stack copies read and not yet unwound: about 4,000
/// of the default 8 KiB. Past it, stacks are cut ([`cuts`]).
pub(super) const COPY_BUDGET: u64 = 32 << 20;

/// How long (ns) after its time stamp a record is in its ring, at most.
const WRITTEN_WITHIN_NS: u64 = 1_000_000;

/// Open, enabled perf events and their rings.
pub(crate) struct PerfBackend {
    cpus: Vec<CpuRing>,
    switch_ins: SwitchIns,
    /// With chosen threads: their events and wakee filter.
    threads: Option<Threads>,
    /// With `--cgroup`: the cgroups' wakee filter.
    cgroups: Option<cgroups::Cgroups>,
    decoder: Decoder,
    reorder: Reorder,
    /// Events released in time order (and seen early by the sink) that
    /// wait for kallsyms, which their kernel stacks are trimmed with.
    held: VecDeque<Event>,
    stats: SourceStats,
    rounds: Rounds,
    /// The most bytes one sample can take: a ring with less free space than
    /// this when read may have lost samples (see [`sizing::may_have_lost`]).
    max_sample: u64,
    enabled: bool,
    /// kallsyms is read off the attach path; the decoder gets its probe
    /// ranges before the first events are released.
    kallsyms: Option<Preload>,
    /// Why chosen threads are traced with per-CPU events, when they are.
    wide_note: Option<String>,
    polls: u64,
    /// A read found a ring more than half full (see [`PerfBackend::fell_behind`]).
    behind: bool,
    /// Under copies, when each thread was last seen running: noted in
    /// `seen` as records are decoded, published once a round.
    last_runs: Option<std::sync::Arc<LastRuns>>,
    seen: crate::event::runs::Seen,
    /// Bytes of user stack each sample copies (0 for none).
    copy_size: u32,
    /// Raises the reader when it falls behind, if it is started.
    watch: Option<watch::Watch>,
    /// Why the rings could not be watched, when they could not.
    unwatched: Option<String>,
}

impl PerfBackend {
    /// Opens and enables both tracepoints on every online CPU.
    pub(crate) fn open(tracefs: &Tracefs, config: &PerfConfig) -> Result<PerfBackend, OpenFailure> {
        let watermark = wakeup_watermark(config.mmap_pages)?;
        let switch = tracefs.event_format("sched", "sched_switch")?;
        let waking = tracefs.event_format("sched", "sched_waking")?;
        // The threads to attach to (`None`: every thread, per CPU).
        let threads = config.targets.threads_now();
        let mut base = base_attr(config, watermark);
        let online = online_cpus()?;
        crate::timing::mark("attach.formats");
        let wide = threads
            .as_ref()
            .map(|tids| tids.len().saturating_mul(online.len()))
            .filter(|&events| events > config.event_budget);
        // Kept until the real events are open.
        let mut probes = sys::Probes::default();
        let (switch_ins, exit_id) = switch_ins_for(
            tracefs,
            config,
            // Per-CPU events for chosen threads (`wide`): as when tracing
            // the whole system.
            threads.is_some() && wide.is_none(),
            &sys::TracepointAttr {
                id: switch.id as u64,
                ..base
            },
            &online,
            &mut probes,
        )?;
        crate::timing::mark("attach.probes");
        let st = sample_type(config, switch_ins);
        base.sample_type = st;
        let (mut decoder, max_sample) =
            sizing::decoder(config, st, [&switch, &waking], base.stack_user)?;
        let (events, exit_event) = sched_events(&base, [switch.id, waking.id], exit_id, switch_ins);
        let clock = clock_event(&base, config);
        let (cpus, cgroups, threads) = open_events(
            config,
            (&online, threads, wide),
            (events, exit_event, clock),
            (switch_ins, st),
            &mut decoder,
        )?;
        crate::timing::mark("attach.open");
        let (threads, tids) = threads.unzip();
        let mut backend = PerfBackend {
            wide_note: wide.map(|events| {
                wide_note(
                    tids.as_ref().map_or(0, Vec::len),
                    online.len(),
                    events,
                    config.event_budget,
                )
            }),
            cpus,
            switch_ins,
            threads,
            cgroups,
            decoder,
            reorder: Reorder::new(),
            held: VecDeque::new(),
            stats: SourceStats::default(),
            rounds: Rounds::default(),
            max_sample,
            enabled: false,
            polls: 0,
            behind: false,
            last_runs: (base.stack_user > 0).then(Default::default),
            seen: Default::default(),
            copy_size: base.stack_user,
            watch: None,
            unwatched: None,
            kallsyms: if config.stacks.kernel {
                Some(config.kallsyms.clone().unwrap_or_else(Preload::spawn))
            } else {
                None
            },
        };
        backend.start(config, tids, &mut probes)?;
        Ok(backend)
    }

    /// Enables the events; with chosen threads (`tids`), then attaches
    /// their per-task events, gives the kernel their wakee filter, and
    /// keeps the `probes` to close with the real events.
    fn start(
        &mut self,
        config: &PerfConfig,
        tids: Option<Vec<u32>>,
        probes: &mut sys::Probes,
    ) -> Result<(), OpenFailure> {
        self.enable()?;
        crate::timing::mark("attach.enable");
        if let Some(c) = &self.cgroups
            && self.switch_ins == SwitchIns::Running
        {
            let now = crate::sys::host::monotonic_ns();
            for &id in &c.switch_ids {
                self.decoder.running().share(id);
                self.decoder.running().enabled(id, now);
            }
        }
        if let Some(tids) = tids {
            self.attach_chosen(&tids, &config.targets.processes())?;
        }
        if let Some(t) = self.threads.as_mut() {
            t.update_wakee_filter(&mut self.cpus)?;
            // Closed with the real events at the end: closing them now
            // could still be waiting for RCU when a short run exits, and
            // its exit would wait too.
            t.graveyard.bury(std::mem::take(probes).into_fds());
        }
        Ok(())
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
        let fds = self.cpus.iter().map(|c| c.fds[0].as_fd());
        let forwarded = self.watch.as_ref().map(watch::Watch::forwarded);
        let Some(start) =
            self.rounds
                .wait(fds.chain(forwarded), wake, timeout, "the perf ring buffers")?
        else {
            return Ok(());
        };
        if let Some(w) = &self.watch {
            w.clear();
        }
        self.read_all();
        if let Some(runs) = &self.last_runs {
            runs.publish(&mut self.seen);
            // A record is written with preemption off, in microseconds:
            // one stamped a millisecond before the round started has been
            // read.
            runs.round_read(
                start.saturating_sub(WRITTEN_WITHIN_NS),
                host::monotonic_ns(),
            );
        }
        let released = self.rounds.end(start);
        if let Some(t) = self.threads.as_mut() {
            t.refresh_forecast(self.cpus.len());
            t.update_wakee_filter(&mut self.cpus)?;
        }
        if let Some(c) = self.cgroups.as_mut() {
            c.update(&mut self.cpus)?;
        }
        if let Some(upto) = released {
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
            if let Err(e) = self.disable_reading() {
                first_err.get_or_insert(e);
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
        if let Some(mut w) = self.watch.take() {
            w.stop();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Disables every event, reading the rings meanwhile: disabling an
    /// inherited event disables each thread's copy of it in turn, which
    /// takes a quarter of a second for thousands of busy threads, and they
    /// write on until then. The disabling runs on a thread of its own,
    /// real-time from its start, on copies of the descriptors; without
    /// either (out of descriptors or threads), here.
    fn disable_reading(&mut self) -> Result<()> {
        let copies: Option<Vec<(String, std::os::fd::OwnedFd)>> = self
            .event_fds()
            .into_iter()
            .map(|(what, fd)| Some((what, fd.try_clone_to_owned().ok()?)))
            .collect();
        let Some(copies) = copies else {
            return disable_all(&self.event_fds());
        };
        let (done, disabled) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("offwake-disable".to_string())
            .spawn(move || {
                let fds: Vec<_> = copies
                    .iter()
                    .map(|(w, fd)| (w.clone(), fd.as_fd()))
                    .collect();
                let _ = done.send(disable_all(&fds));
            });
        let Ok(thread) = spawned else {
            return disable_all(&self.event_fds());
        };
        // The lowest real-time priority, as the reader's when raised: it
        // may take a quarter of a second, which no real-time work of the
        // machine's should wait for.
        crate::sys::priority::raise_spawned(&thread, 1);
        loop {
            match disabled.recv_timeout(Duration::from_millis(2)) {
                Ok(result) => return result,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => self.read_all(),
                // It died before it was done.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return disable_all(&self.event_fds());
                }
            }
        }
    }

    /// Every event's descriptor, with whose it is.
    fn event_fds(&self) -> Vec<(String, BorrowedFd<'_>)> {
        let mut fds = Vec::new();
        for c in &self.cpus {
            fds.extend(
                c.fds
                    .iter()
                    .map(|fd| (format!("CPU {}", c.cpu), fd.as_fd())),
            );
        }
        for (tid, cpus) in self.threads.iter().flat_map(|t| &t.tasks) {
            let what = format!("thread {tid}");
            fds.extend(
                cpus.iter()
                    .flat_map(TaskCpu::fds)
                    .map(|fd| (what.clone(), fd.as_fd())),
            );
        }
        fds
    }

    pub(crate) fn stats(&self) -> SourceStats {
        self.stats
    }

    /// The notes on what was read: the stacks cut, if any were.
    pub(crate) fn notes(&self) -> Vec<String> {
        let unwatched = self.unwatched.as_ref().map(|e| {
            format!(
                "NOTE: the kernel's buffers were not watched ({e}): the reader's priority \
                 was raised only once it found a buffer filling."
            )
        });
        self.decoder.cuts().1.into_iter().chain(unwatched).collect()
    }

    /// Said on stderr when chosen threads are traced with per-CPU events.
    pub(crate) fn wide_note(&self) -> Option<&str> {
        self.wide_note.as_deref()
    }

    /// Closes every event without waiting for the kernel to release them
    /// (see [`release`]); the rings are unmapped first, so that nothing of
    /// this process holds them any more.
    pub(crate) fn close_detached(mut self) {
        // Its copies of the descriptors and mappings go first.
        self.watch = None;
        let mut fds = Vec::new();
        for CpuRing { ring, fds: own, .. } in std::mem::take(&mut self.cpus) {
            drop(ring);
            fds.extend(own);
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
        if let Some(mut c) = self.cgroups.take() {
            fds.extend(c.graveyard.take());
        }
        release::close_detached(fds);
    }

    /// How long a round may wait for data: runs of chosen threads or
    /// cgroups read often, so that a thread created during tracing joins
    /// the wakee filter, and the forecast of new pids is sorted out
    /// ([`nascent::refresh_period`]),
    /// within about that time (an idle round costs one `poll`). The whole
    /// system's are read within 20 ms too: a process's stacks are unwound
    /// with its map, read from `/proc` when its first event is handed on
    /// if it was mapped before tracing, and a short-lived one must still be
    /// there.
    pub(crate) fn round_period(&self) -> Duration {
        if self.threads.is_some() || self.cgroups.is_some() {
            Duration::from_millis(10)
        } else {
            Duration::from_millis(20)
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

    /// See [`crate::source::Source::copy_budget`].
    pub(crate) fn copy_budget(&self) -> Option<CopyBudget> {
        self.decoder.copy_budget()
    }

    /// See [`crate::source::Source::memo`].
    pub(crate) fn memo(&self) -> Option<crate::unwind::memo::Memo> {
        self.decoder.memo()
    }

    /// Starts a watch on the rings that raises the reader's `priority`
    /// when it falls behind ([`watch`]). Tracing runs already: without a
    /// watch (no thread or descriptor left), the reader raises itself when
    /// it finds a ring filling, and a note says so.
    pub(crate) fn watch(&mut self, priority: &std::sync::Arc<OnDemand>) {
        let rings = self
            .cpus
            .iter()
            .map(|c| (c.fds[0].as_fd(), c.ring.gauge()))
            .collect();
        match watch::Watch::spawn(rings, priority.clone()) {
            Ok(w) => self.watch = Some(w),
            Err(e) => self.unwatched = Some(format!("{e:#}")),
        }
    }

    /// True once a read found a ring more than half full: the reader,
    /// woken at a quarter, came late.
    pub(crate) fn fell_behind(&self) -> bool {
        self.behind
    }

    /// See [`crate::source::Source::live_stacks`].
    pub(crate) fn live_stacks(&self) -> Option<(usize, std::sync::Arc<LastRuns>)> {
        let runs = self.last_runs.clone()?;
        Some((self.copy_size as usize, runs))
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

/// Disables each of `fds`; the first failure, after trying them all.
fn disable_all(fds: &[(String, BorrowedFd<'_>)]) -> Result<()> {
    let mut first_err = None;
    for (what, fd) in fds {
        if let Err(e) = sys::disable(*fd) {
            first_err.get_or_insert(e.context(format!("disabling {what}")));
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use anyhow::anyhow;

    use super::*;

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
            cgroup_ids: false,
            wall_hz: None,
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
                cgroup_ids: false,
                wall_hz: None,
            };
            let err = PerfBackend::open(&t, &c)
                .err()
                .expect("must fail")
                .to_string();
            assert!(err.contains("power of two"), "{err}");
        }
    }
}
