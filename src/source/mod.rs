//! The event source of a run, chosen by `--backend`: perf, or the tracefs
//! fallback when `perf_event_open` is denied; or a perf.data recording
//! (`-i`). All deliver the same [`crate::event::Event`]s in global time
//! order; everything after them is shared.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

use crate::cli::Backend;
use crate::event::copies::CopyBudget;
use crate::event::runs::LastRuns;
use crate::event::{EventSink, SourceStats};
use crate::kallsyms::Preload;
use crate::plan::Plan;
use crate::sys::priority::OnDemand;

pub(crate) mod perf;
pub(crate) mod perfdata;
pub(crate) mod probes;
pub(crate) mod reorder;
pub(crate) mod tracefs;
pub(crate) mod tracepoint;

use perf::{PerfBackend, PerfConfig};
use perfdata::RecordedSource;
use tracefs::backend::{TracefsBackend, TracefsConfig};
use tracepoint::Tracefs;

/// An open, recording backend.
pub(crate) enum Source {
    Perf(Box<PerfBackend>),
    Tracefs(Box<TracefsBackend>),
    /// A perf.data file, read to its end.
    Recorded(Box<RecordedSource>),
}

/// What opening a source said besides the source itself.
#[derive(Debug, Default)]
pub(crate) struct OpenNotes {
    /// The one-line notice of an automatic fallback to tracefs.
    pub(crate) fallback: Option<String>,
    /// Why chosen threads are traced with per-CPU events.
    pub(crate) wide: Option<String>,
    /// What `--wall` cannot do with this backend.
    pub(crate) wall: Option<String>,
}

/// The ring size per CPU, in pages, that `plan` asks for or defaults to,
/// for samples that copy this many bytes of user stack (if any).
fn buffer_pages(plan: &Plan, copy: Option<u32>) -> usize {
    plan.buffer_pages.unwrap_or_else(|| {
        crate::plan::sizing::default_mmap_pages(
            crate::sys::host::online_cpus().map_or(1, |c| c.len()),
            crate::sys::host::page_size(),
            copy,
        )
    })
}

impl Source {
    /// Opens the backend `plan` asks for. Under `auto`, a denied
    /// `perf_event_open` (EPERM, EACCES, ENOSYS) falls back to tracefs and
    /// the notes say so and why; any other perf failure is an error.
    /// `kallsyms` is being read when kernel stacks are wanted.
    pub(crate) fn open(
        plan: &Plan,
        tracefs: &Tracefs,
        kallsyms: Option<&Preload>,
    ) -> Result<(Source, OpenNotes)> {
        let perf_config = PerfConfig {
            mmap_pages: buffer_pages(plan, plan.stacks.user_copy()),
            stacks: plan.stacks,
            kallsyms: kallsyms.cloned(),
            targets: plan.recorded(),
            state_filter: plan.recorded_state().map(|s| s.tracepoint_filter()),
            event_budget: plan.event_budget,
            cgroup_ids: plan.cgroup_names.is_some(),
            wall_hz: plan.wall,
        };
        let perf = |p: PerfBackend| {
            let notes = OpenNotes {
                wide: p.wide_note().map(str::to_string),
                ..OpenNotes::default()
            };
            (Source::Perf(Box::new(p)), notes)
        };
        match plan.backend {
            Backend::Perf => Ok(perf(PerfBackend::open(tracefs, &perf_config)?)),
            Backend::Tracefs => Source::open_tracefs(plan, tracefs, kallsyms, None),
            Backend::Auto => match PerfBackend::open(tracefs, &perf_config) {
                Ok(p) => Ok(perf(p)),
                Err(e) => {
                    let Some(denied) = e.denial() else {
                        return Err(e.into());
                    };
                    let why = std::io::Error::from_raw_os_error(denied.errno);
                    let notice = format!(
                        "offwake-perf: perf_event_open was denied ({why}); falling back to \
                         the tracefs backend (--backend tracefs)"
                    );
                    Source::open_tracefs(plan, tracefs, kallsyms, Some(notice)).map_err(|t| {
                        t.context(format!(
                            "perf_event_open was denied ({why}) and the tracefs fallback \
                             failed too"
                        ))
                    })
                }
            },
        }
    }

    fn open_tracefs(
        plan: &Plan,
        tracefs: &Tracefs,
        kallsyms: Option<&Preload>,
        fallback: Option<String>,
    ) -> Result<(Source, OpenNotes)> {
        let backend = TracefsBackend::open(
            tracefs,
            &TracefsConfig {
                buffer_pages: buffer_pages(plan, None),
                stacks: plan.stacks,
                targets: plan.recorded(),
                // A command's processes are followed, and a new task's
                // cgroup is its parent's.
                process_events: matches!(plan.targets, crate::plan::Targets::Command { .. })
                    || plan.cgroup_names.is_some(),
                kallsyms: kallsyms.cloned(),
                cgroups: plan.cgroup_names.clone(),
                // ftrace copies no user stack: under `dwarf`, blocked
                // threads' stacks are read from the threads themselves.
                // A recording's threads are not there to read.
                live_stacks: plan.stacks.user_copy().is_some() && plan.input.is_none(),
            },
        )?;
        Ok((
            Source::Tracefs(Box::new(backend)),
            OpenNotes {
                fallback,
                wide: None,
                wall: plan.wall.map(|_| {
                    "offwake-perf: the tracefs backend cannot sample: --wall splits each \
                     wait into its blocked part and its wait for a CPU, with no on-CPU time"
                        .to_string()
                }),
            },
        ))
    }

    /// `perf`, `tracefs` or `perf.data`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Source::Perf(_) => "perf",
            Source::Tracefs(_) => "tracefs",
            Source::Recorded(_) => "perf.data",
        }
    }

    /// True once a recording was read to its end; a live source never is.
    pub(crate) fn is_exhausted(&self) -> bool {
        match self {
            Source::Recorded(r) => r.is_done(),
            _ => false,
        }
    }

    /// Keeps the wakeups of `tid`, a task just created by a traced one
    /// (the command), from now on rather than from the next round. The
    /// tracefs backend follows new tasks in the kernel already.
    pub(crate) fn follow_now(&mut self, tid: u32) -> Result<()> {
        match self {
            Source::Perf(p) => p.follow_now(tid),
            Source::Tracefs(_) | Source::Recorded(_) => Ok(()),
        }
    }

    /// The budget of stack copies read and not yet unwound, if copies are
    /// taken (perf, `dwarf`).
    pub(crate) fn copy_budget(&self) -> Option<CopyBudget> {
        match self {
            Source::Perf(p) => p.copy_budget(),
            Source::Tracefs(_) | Source::Recorded(_) => None,
        }
    }

    /// Where user stacks unwound once are remembered for the reader to
    /// recall instead of copying them again (perf, `dwarf`).
    pub(crate) fn memo(&self) -> Option<crate::unwind::memo::Memo> {
        match self {
            Source::Perf(p) => p.memo(),
            Source::Tracefs(_) | Source::Recorded(_) => None,
        }
    }

    /// Has a thread watch the kernel's buffers and raise the reader's
    /// `priority` as soon as they fill faster than they are read (perf).
    pub(crate) fn watch(&mut self, priority: &std::sync::Arc<OnDemand>) {
        if let Source::Perf(p) = self {
            p.watch(priority);
        }
    }

    /// True once a read found the kernel's buffers filling faster than
    /// they are read (perf: a ring more than half full).
    pub(crate) fn fell_behind(&self) -> bool {
        match self {
            Source::Perf(p) => p.fell_behind(),
            Source::Tracefs(_) | Source::Recorded(_) => false,
        }
    }

    /// When tracing live with user stack copies: the copies' size, and
    /// when each thread was last seen running (for reading a waiting
    /// thread's stack past its copy, [`crate::unwind::tail`]).
    pub(crate) fn live_stacks(&self) -> Option<(usize, Arc<LastRuns>)> {
        match self {
            Source::Perf(p) => p.live_stacks(),
            Source::Tracefs(_) | Source::Recorded(_) => None,
        }
    }

    /// When tracing live under tracefs with `dwarf`: when each thread was
    /// last seen running, for reading blocked threads' stacks from the
    /// threads ([`crate::unwind::live`]).
    pub(crate) fn thread_stacks(&self) -> Option<Arc<LastRuns>> {
        match self {
            Source::Tracefs(t) => t.live_stacks(),
            Source::Perf(_) | Source::Recorded(_) => None,
        }
    }

    /// True when samples carry user stack copies to unwind
    /// ([`crate::event::UserCopy`]).
    pub(crate) fn copies_user_stacks(&self) -> bool {
        match self {
            Source::Perf(p) => p.copies_user_stacks(),
            Source::Tracefs(_) => false,
            Source::Recorded(r) => r.copies_user_stacks(),
        }
    }

    /// True when the source reports mmap, fork and exit events as they
    /// happen (perf); the tracefs backend does not.
    pub(crate) fn delivers_mmaps(&self) -> bool {
        matches!(self, Source::Perf(_) | Source::Recorded(_))
    }

    /// True when switch-ins are expected to come from context-switch
    /// records rather than from `sched_switch` (per-task events, or a
    /// `--state` filter on `sched_switch`), so that their count is no news.
    pub(crate) fn switch_ins_from_records(&self) -> bool {
        match self {
            Source::Perf(p) => p.switch_ins_from_records(),
            Source::Tracefs(_) | Source::Recorded(_) => false,
        }
    }

    /// The longest a round should wait for data.
    pub(crate) fn round_period(&self) -> Duration {
        match self {
            Source::Perf(p) => p.round_period(),
            Source::Tracefs(t) => t.round_period(),
            Source::Recorded(_) => Duration::ZERO,
        }
    }

    /// The event time that every event older than has been read, or will
    /// not come: now, less a few rounds of reading.
    pub(crate) fn read_up_to(&self) -> u64 {
        let slack = u64::try_from(self.round_period().as_nanos()).unwrap_or(u64::MAX);
        crate::sys::host::monotonic_ns().saturating_sub(slack.saturating_mul(4))
    }

    /// Reads what the source has, waiting up to `timeout` for it, or until
    /// `wake` is readable.
    pub(crate) fn poll(
        &mut self,
        timeout: Duration,
        wake: Option<BorrowedFd<'_>>,
        sink: &mut dyn EventSink,
    ) -> Result<()> {
        match self {
            Source::Perf(p) => p.poll(timeout, wake, sink),
            Source::Tracefs(t) => t.poll(timeout, wake, sink),
            Source::Recorded(r) => {
                r.read(sink);
                Ok(())
            }
        }
    }

    pub(crate) fn finish(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        match self {
            Source::Perf(p) => p.finish(sink),
            Source::Tracefs(t) => t.finish(sink),
            // What was read is the run (a signal may stop it early).
            Source::Recorded(_) => Ok(()),
        }
    }

    /// Closes the source. A perf source's events are released in the
    /// background: the kernel's wait on the last ones is not this run's.
    pub(crate) fn close(self) {
        match self {
            Source::Perf(p) => p.close_detached(),
            Source::Tracefs(_) | Source::Recorded(_) => {}
        }
    }

    /// When a recording ran; `None` when live.
    pub(crate) fn recorded_span(&self) -> Option<crate::event::Span> {
        match self {
            Source::Recorded(r) => r.span(),
            _ => None,
        }
    }

    /// Where a recording's kernel text was (`_text`); `None` when live.
    pub(crate) fn recorded_kernel_text(&self) -> Option<u64> {
        match self {
            Source::Recorded(r) => r.kernel_text(),
            _ => None,
        }
    }

    /// Warnings about what was read, for the end of the run.
    pub(crate) fn notes(&self) -> Vec<String> {
        match self {
            Source::Recorded(r) => r.notes(),
            Source::Tracefs(t) => t.notes(),
            Source::Perf(p) => p.notes(),
        }
    }

    pub(crate) fn stats(&self) -> SourceStats {
        match self {
            Source::Perf(p) => p.stats(),
            Source::Tracefs(t) => t.stats(),
            Source::Recorded(r) => r.stats(),
        }
    }
}
