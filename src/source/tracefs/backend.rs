//! The tracefs backend: for hosts that deny `perf_event_open`. It records
//! `sched_switch` and `sched_waking`, with kernel and user stacks, in a
//! private ftrace instance, reads the per-CPU `trace_pipe_raw` pages, and
//! delivers the same [`Event`]s as the perf backend, in global time order.

use super::cgroups::TaskCgroups;
use crate::sys::cgroup::Hierarchy;
use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::decode::{Assembler, ProcessFormats, StackFormats, TgidSource};
use super::instance::{Instance, InstanceConfig, Owner};
use super::page::{self, HeaderLayout, Missed, PageLayout};
use crate::event::runs::LastRuns;
use crate::event::{Event, EventKind, EventSink, Lost, SourceStats};
use crate::kallsyms::Preload;
use crate::plan::sizing::{max_buffer_pages, too_many_pages};
use crate::plan::{Follow, Stacks, Targets};
use crate::source::reorder::{Reorder, Rounds};
use crate::source::tracepoint::Tracefs;
use crate::source::tracepoint::sched::SchedFields;

/// What to record.
#[derive(Clone, Debug)]
pub(crate) struct TracefsConfig {
    /// Per-CPU buffer size, in pages.
    pub(crate) buffer_pages: usize,
    pub(crate) stacks: Stacks,
    /// Which threads the kernel keeps. Under `-- COMMAND`, process
    /// creation and exec are recorded too, to follow the processes its
    /// command starts.
    pub(crate) targets: Targets,
    /// Record process creation and exec even when every thread is kept
    /// (a command traced with every thread, for `--chain`): the targets
    /// are the command's processes.
    pub(crate) process_events: bool,
    /// kallsyms, being read (for trimming kernel stacks).
    pub(crate) kallsyms: Option<Preload>,
    /// Switch-outs carry their thread's cgroup in this hierarchy.
    pub(crate) cgroups: Option<Hierarchy>,
    /// Blocked threads' stacks are to be read from the threads
    /// ([`crate::unwind::live`]): when each thread last ran is published,
    /// and rounds are short, for switch-outs to reach the unwinder while
    /// their threads still wait.
    pub(crate) live_stacks: bool,
}

/// One CPU's `trace_pipe_raw`.
struct CpuReader {
    cpu: u32,
    file: File,
    /// Time of the last entry read: a gap reported later came after it.
    last_time: u64,
}

/// A running instance and its readers.
pub(crate) struct TracefsBackend {
    /// Declared before `instance`: the readers must be closed before the
    /// instance can be removed.
    readers: Vec<CpuReader>,
    instance: Option<Instance>,
    layout: PageLayout,
    header: HeaderLayout,
    assembler: Assembler,
    tgids: ProcTgids,
    reorder: Reorder,
    stats: SourceStats,
    rounds: Rounds,
    page: Vec<u8>,
    cgroups: Option<TaskCgroups>,
    /// When each thread was last seen running, published once a round
    /// (with [`TracefsConfig::live_stacks`]), and what this round saw.
    last_runs: Option<Arc<LastRuns>>,
    seen: crate::event::runs::Seen,
    /// When the last round read, under [`LIVE_ROUND`]'s pace.
    last_read: Option<Instant>,
}

/// When blocked stacks are read from the threads, the kernel wakes the
/// reader at a CPU's first entry, and events read are released within two
/// rounds at most this far apart: a switch-out reaches the unwinder 5 to
/// 10 ms after it happened, while most waits of a few tens of milliseconds
/// still last. Rounds are never closer: a busy machine is read every 5 ms.
const LIVE_ROUND: Duration = Duration::from_millis(5);
/// How long a round waits for data otherwise.
const ROUND: Duration = Duration::from_millis(100);

impl TracefsBackend {
    /// Creates our instance and starts recording.
    pub(crate) fn open(tracefs: &Tracefs, config: &TracefsConfig) -> Result<TracefsBackend> {
        let buffer_kb = buffer_kb(config.buffer_pages, crate::sys::host::page_size())?;
        let events = tracefs.root().join("events");
        let read = |name: &str| -> Result<String> {
            let path = events.join(name);
            crate::source::tracepoint::read_file(&path)
                .with_context(|| format!("reading {}", path.display()))
        };
        let layout = PageLayout::parse(&read("header_page")?).context("parsing header_page")?;
        let header = HeaderLayout::parse(&read("header_event")?).context("parsing header_event")?;
        let sched = SchedFields::new(
            &tracefs.event_format("sched", "sched_switch")?,
            &tracefs.event_format("sched", "sched_waking")?,
        )?;
        let stacks = StackFormats::new(
            &tracefs.event_format("ftrace", "kernel_stack")?,
            &tracefs.event_format("ftrace", "user_stack")?,
        )?;
        let mut extra_events = Vec::new();
        let follow = config.targets.follow();
        let process = if follow == Follow::Everything || config.process_events {
            for name in ["sched_process_fork", "sched_process_exec"] {
                extra_events.push(("sched".to_string(), name.to_string()));
            }
            let formats = ProcessFormats::new(
                &tracefs.event_format("sched", "sched_process_fork")?,
                &tracefs.event_format("sched", "sched_process_exec")?,
            )?;
            // Moves between cgroups, where the kernel tells them.
            let attach = config
                .cgroups
                .as_ref()
                .and_then(|_| tracefs.event_format("cgroup", "cgroup_attach_task").ok());
            Some(match attach {
                Some(a) => {
                    extra_events.push(("cgroup".to_string(), "cgroup_attach_task".to_string()));
                    formats.with_moves(&a)?
                }
                None => formats,
            })
        } else {
            None
        };
        let assembler = Assembler::new(
            sched,
            stacks,
            process,
            config.stacks.kernel,
            config.stacks.user,
            None,
        )
        .with_kallsyms(config.kallsyms.clone());

        let owner = Owner::current()?;
        let instance = Instance::create(
            tracefs,
            &owner.instance_name(),
            &InstanceConfig {
                buffer_kb,
                stacks: config.stacks,
                threads: config.targets.threads_now(),
                follow,
                extra_events,
                wake_at_once: config.live_stacks,
            },
        )?;

        let mut readers = Vec::new();
        for cpu in crate::sys::host::online_cpus()? {
            let path = instance
                .dir()
                .join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
            let file = File::options()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            readers.push(CpuReader {
                cpu,
                file,
                last_time: 0,
            });
        }
        Ok(TracefsBackend {
            readers,
            instance: Some(instance),
            page: vec![0u8; layout.page_size()],
            layout,
            header,
            assembler,
            tgids: ProcTgids::new(tracefs.root().join("saved_tgids")),
            reorder: Reorder::new(),
            stats: SourceStats::default(),
            rounds: Rounds::default(),
            cgroups: config.cgroups.clone().map(TaskCgroups::new),
            last_runs: config.live_stacks.then(Default::default),
            seen: Default::default(),
            last_read: None,
        })
    }

    /// When each thread was last seen running, when blocked stacks are to
    /// be read from the threads.
    pub(crate) fn live_stacks(&self) -> Option<Arc<LastRuns>> {
        self.last_runs.clone()
    }

    /// The longest a round should wait for data: short while events read
    /// wait to be released, when blocked stacks are read from the threads.
    pub(crate) fn round_period(&self) -> Duration {
        let waiting = !self.reorder.is_empty() || !self.assembler.is_idle();
        if self.last_runs.is_some() && waiting {
            LIVE_ROUND
        } else {
            ROUND
        }
    }

    /// Waits up to `timeout` for data (returns early on EINTR), reads every
    /// CPU's pages, and passes to `sink`, in global time order, every event
    /// that can no longer be preceded by one not yet read (the same rounds
    /// as the perf backend).
    pub(crate) fn poll(
        &mut self,
        timeout: Duration,
        wake: Option<BorrowedFd<'_>>,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        let mut timeout = timeout;
        if self.last_runs.is_some()
            && let Some(last) = self.last_read
        {
            // Paced: the rest of LIVE_ROUND, watching only `wake`.
            let rest = LIVE_ROUND.saturating_sub(last.elapsed()).min(timeout);
            if !rest.is_zero() {
                let none = std::iter::empty();
                if self.rounds.wait(none, wake, rest, "the pace")?.is_none() {
                    return Ok(());
                }
                timeout = timeout.saturating_sub(rest);
            }
        }
        let fds = self.readers.iter().map(|r| r.file.as_fd());
        let Some(mut start) = self.rounds.wait(fds, wake, timeout, "trace_pipe_raw")? else {
            return Ok(());
        };
        if self.last_runs.is_some() {
            // The round starts as it reads, not as it began to wait: what
            // was stamped before is written by the next round's read, and
            // a switch-out reaches the unwinder a wait sooner.
            start = crate::sys::host::monotonic_ns();
            self.last_read = Some(Instant::now());
        }
        self.tgids.new_round();
        self.read_all();
        self.publish_runs();
        if let Some(upto) = self.rounds.end(start) {
            self.release(upto, sink);
        }
        Ok(())
    }

    /// Stops recording, drains the buffers, flushes every pending event to
    /// `sink` in time order, and removes the instance.
    pub(crate) fn finish(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        let disabled = match self.instance.as_mut() {
            Some(i) => i.disable(),
            None => Ok(()),
        };
        self.tgids.new_round();
        self.read_all();
        self.publish_runs();
        self.account_unflagged_losses();
        self.release(u64::MAX, sink);
        self.readers.clear();
        let removed = match self.instance.take() {
            Some(i) => i.remove(),
            None => Ok(()),
        };
        disabled.and(removed)
    }

    /// Warnings about what was read, for the end of the run.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.cgroups.iter().filter_map(TaskCgroups::note).collect()
    }

    pub(crate) fn stats(&self) -> SourceStats {
        let mut s = self.stats;
        s.malformed += self.assembler.stats().malformed;
        s
    }

    fn release(&mut self, upto: u64, sink: &mut dyn EventSink) {
        let TracefsBackend {
            assembler,
            tgids,
            reorder,
            cgroups,
            ..
        } = self;
        assembler.flush(upto, tgids, &mut |ev| reorder.push(ev));
        reorder.flush_upto(upto, &mut |mut ev| {
            if let Some(c) = cgroups.as_mut() {
                c.tag(&mut ev);
            }
            sink.early(&mut ev);
            sink.event(ev)
        });
    }

    /// Makes the runs this round saw known to the unwinder.
    fn publish_runs(&mut self) {
        if let Some(runs) = &self.last_runs {
            runs.publish(&mut self.seen);
        }
    }

    /// Reads every CPU's available pages.
    fn read_all(&mut self) {
        let TracefsBackend {
            readers,
            layout,
            header,
            assembler,
            tgids,
            reorder,
            stats,
            rounds,
            page,
            last_runs,
            seen,
            ..
        } = self;
        // Bounded work per round: a CPU that keeps writing cannot keep us
        // here forever.
        let max_pages = 4096;
        for r in readers.iter_mut() {
            for _ in 0..max_pages {
                let n = match r.file.read(page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => {
                        stats.malformed += 1;
                        break;
                    }
                };
                let gap_start = r.last_time;
                let cpu = r.cpu;
                let last_time = &mut r.last_time;
                let decoded = page::decode_page(&page[..n], layout, header, &mut |time, raw| {
                    stats.records += 1;
                    *last_time = time;
                    if last_runs.is_some()
                        && let Some((prev, next)) = assembler.switch_tids(raw)
                    {
                        LastRuns::note_ran(seen, prev, time);
                        LastRuns::note_ran(seen, next, time);
                    }
                    assembler.push(cpu, time, raw, tgids, &mut |ev| reorder.push(ev));
                });
                match decoded {
                    Ok(info) => {
                        if info.truncated {
                            stats.malformed += 1;
                        }
                        let lost = match info.missed {
                            Missed::None => 0,
                            // At least one entry; the kernel had no room to
                            // say how many (the total comes from the CPU's
                            // stats at the end).
                            Missed::Unknown => 1,
                            Missed::Count(n) => n.max(1),
                        };
                        if lost > 0 {
                            stats.lost_records += lost;
                            let until = info.timestamp.max(gap_start);
                            reorder.push(Event {
                                time: gap_start.max(rounds.released_upto()).min(until),
                                cpu,
                                kind: EventKind::Lost(Lost {
                                    records: lost,
                                    until,
                                }),
                            });
                        }
                    }
                    Err(_) => stats.malformed += 1,
                }
            }
        }
    }

    /// At the end: if a CPU's own counters show more entries lost than the
    /// pages flagged, the difference is reported as lost at that CPU's last
    /// entry (conservatively tainting whatever is still open there).
    fn account_unflagged_losses(&mut self) {
        let Some(instance) = self.instance.as_ref() else {
            return;
        };
        let mut kernel_total = 0u64;
        let mut last = HashMap::new();
        for r in &self.readers {
            let path = instance.dir().join(format!("per_cpu/cpu{}/stats", r.cpu));
            if let Ok(text) = std::fs::read_to_string(&path) {
                kernel_total += cpu_losses(&text);
            }
            last.insert(r.cpu, r.last_time);
        }
        if kernel_total > self.stats.lost_records {
            let extra = kernel_total - self.stats.lost_records;
            self.stats.lost_records = kernel_total;
            let (&cpu, &time) = last.iter().max_by_key(|(_, t)| **t).unwrap_or((&0, &0));
            self.reorder.push(Event {
                time: time.max(self.rounds.released_upto()),
                cpu,
                kind: EventKind::Lost(Lost {
                    records: extra,
                    until: u64::MAX,
                }),
            });
        }
    }
}

/// The per-CPU `buffer_size_kb` for `pages` pages of `page_size` bytes, or
/// the error that says the buffer would be too large.
pub(crate) fn buffer_kb(pages: usize, page_size: usize) -> Result<usize> {
    let max = max_buffer_pages(page_size);
    if pages > max {
        bail!("{}", too_many_pages(pages, max));
    }
    Ok((pages * page_size / 1024).max(1))
}

/// Entries a CPU lost, from its `per_cpu/cpuN/stats`: `overrun` (pages
/// overwritten before they were read) plus `dropped events`.
pub(crate) fn cpu_losses(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

/// TGIDs from `/proc/TID/status`, then from tracefs's `saved_tgids` (which
/// `record-tgid` fills, and which remembers threads that are gone), read
/// at most once per round.
struct ProcTgids {
    saved_path: PathBuf,
    saved: HashMap<u32, u32>,
    round: u64,
    saved_read_round: Option<u64>,
}

impl ProcTgids {
    fn new(saved_path: PathBuf) -> ProcTgids {
        ProcTgids {
            saved_path,
            saved: HashMap::new(),
            round: 0,
            saved_read_round: None,
        }
    }

    fn new_round(&mut self) {
        self.round += 1;
    }
}

impl TgidSource for ProcTgids {
    fn tgid(&mut self, tid: u32) -> Option<u32> {
        if let Some(t) = crate::sys::proc::tgid(tid) {
            return Some(t);
        }
        if let Some(&t) = self.saved.get(&tid) {
            return Some(t);
        }
        if self.saved_read_round != Some(self.round) {
            self.saved_read_round = Some(self.round);
            if let Ok(text) = std::fs::read_to_string(&self.saved_path) {
                self.saved.extend(parse_saved_tgids(&text));
            }
        }
        self.saved.get(&tid).copied()
    }
}

/// `saved_tgids`: one `PID TGID` pair per line.
pub(crate) fn parse_saved_tgids(text: &str) -> impl Iterator<Item = (u32, u32)> + '_ {
    text.lines().filter_map(|l| {
        let mut it = l.split_ascii_whitespace();
        let pid = it.next()?.parse().ok()?;
        let tgid = it.next()?.parse().ok()?;
        (tgid != 0).then_some((pid, tgid))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_capped_as_a_perf_ring() {
        assert_eq!(max_buffer_pages(4096), 262_144);
        assert_eq!(max_buffer_pages(65536), 16_384);
        assert_eq!(buffer_kb(1024, 4096).unwrap(), 4096);
        assert_eq!(buffer_kb(262_144, 4096).unwrap(), 1 << 20);
        assert_eq!(buffer_kb(1, 512).unwrap(), 1);
        let err = buffer_kb(1 << 20, 4096).unwrap_err().to_string();
        assert_eq!(
            err,
            "--mmap-pages (1048576) must not be greater than 262144 with the tracefs \
             backend (1 GiB per CPU, the largest perf ring buffer)"
        );
        // No overflow on absurd sizes.
        assert!(buffer_kb(usize::MAX, 4096).is_err());
    }

    #[test]
    fn cpu_stats_losses() {
        let text = "entries: 130\noverrun: 7\ncommit overrun: 0\nbytes: 11672\n\
                    oldest event ts:  1534.069615\nnow ts:  1534.376151\n\
                    dropped events: 2\nread events: 0\n";
        assert_eq!(cpu_losses(text), 9);
        assert_eq!(cpu_losses("garbage"), 0);
    }

    #[test]
    fn saved_tgids_lines() {
        let v: Vec<_> = parse_saved_tgids("1 1\n4243 4242\nbad\n5 0\n7 x\n").collect();
        assert_eq!(v, vec![(1, 1), (4243, 4242)]);
    }
}
