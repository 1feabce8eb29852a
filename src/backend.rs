//! The event source of a run, chosen by `--backend`: perf, or the tracefs
//! fallback when `perf_event_open` is denied. Both deliver the same
//! [`Event`]s in global time order; everything after them is shared.

use std::time::Duration;

use anyhow::{Result, bail};

use crate::cli::{Backend, CallGraph};
use crate::event::{EventSink, SourceStats};
use crate::kallsyms::Preload;
use crate::perf::sys::open_error_of;
use crate::perf::{Follow, PerfBackend, PerfConfig, Targets};
use crate::tracefs::backend::{TracefsBackend, TracefsConfig};
use crate::tracefs::instance::KernelFilter;
use crate::tracepoint::Tracefs;

/// What either backend needs to know.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// Per-CPU buffer size in pages (`None`: the default for the call
    /// graph the backend uses).
    pub buffer_pages: Option<usize>,
    pub kernel_stacks: bool,
    pub user_stacks: bool,
    /// How user stacks are walked.
    pub call_graph: CallGraph,
    /// The user asked for `call_graph` (else it is the default for the
    /// targets, which the tracefs backend may lower to `fp`).
    pub call_graph_asked: bool,
    /// Threads the kernel should keep.
    pub filter: KernelFilter,
    /// The processes of `-p` (their threads are in `filter`).
    pub processes: Vec<u32>,
    /// `--state` as a `sched_switch` tracepoint filter (used by the perf
    /// backend, whose switch-ins do not depend on that event).
    pub state_filter: Option<String>,
    /// Record process creation and exec (`-- COMMAND`).
    pub follow_processes: bool,
    /// kallsyms, being read (when kernel stacks are wanted).
    pub kallsyms: Option<Preload>,
}

/// An open, recording backend.
pub enum Source {
    Perf(Box<PerfBackend>),
    Tracefs(Box<TracefsBackend>),
}

/// What opening a source said besides the source itself.
#[derive(Debug, Default)]
pub struct OpenNotes {
    /// The one-line notice of an automatic fallback to tracefs.
    pub fallback: Option<String>,
    /// The one-line notice of a default `dwarf` call graph lowered to
    /// `fp` (the tracefs backend copies no user stacks).
    pub call_graph: Option<String>,
}

/// The ring size per CPU, in pages, that `config` asks for or defaults to,
/// for samples that do or do not copy user stacks.
fn buffer_pages(config: &SourceConfig, copies_stacks: bool) -> usize {
    config.buffer_pages.unwrap_or_else(|| {
        crate::cli::default_mmap_pages(
            crate::sys::host::online_cpus().map_or(1, |c| c.len()),
            crate::sys::host::page_size(),
            copies_stacks,
        )
    })
}

impl Source {
    /// Opens the backend `choice` asks for. Under `auto`, a denied
    /// `perf_event_open` (EPERM, EACCES, ENOSYS) falls back to tracefs and
    /// the notes say so and why; any other perf failure is an error.
    pub fn open(
        choice: Backend,
        tracefs: &Tracefs,
        config: &SourceConfig,
    ) -> Result<(Source, OpenNotes)> {
        // Without user stacks (-K) nothing is copied, whatever the default.
        let user_stack_copy = match config.call_graph {
            CallGraph::Dwarf { size } if config.user_stacks => Some(size),
            _ => None,
        };
        let perf_config = PerfConfig {
            mmap_pages: buffer_pages(config, user_stack_copy.is_some()),
            kernel_callchain: config.kernel_stacks,
            kallsyms: config.kallsyms.clone(),
            user_callchain: config.user_stacks,
            user_stack_copy,
            targets: match &config.filter {
                KernelFilter::None => Targets::All,
                KernelFilter::Tids(tids) => Targets::Threads {
                    tids: tids.clone(),
                    processes: Vec::new(),
                    follow: Follow::Nothing,
                },
                KernelFilter::Pids(tids) => Targets::Threads {
                    tids: tids.clone(),
                    processes: config.processes.clone(),
                    follow: if config.follow_processes {
                        Follow::Everything
                    } else {
                        Follow::Threads
                    },
                },
            },
            state_filter: config.state_filter.clone(),
        };
        match choice {
            Backend::Perf => Ok((
                Source::Perf(Box::new(PerfBackend::open(tracefs, &perf_config)?)),
                OpenNotes::default(),
            )),
            Backend::Tracefs => Source::open_tracefs(tracefs, config, None),
            Backend::Auto => match PerfBackend::open(tracefs, &perf_config) {
                Ok(p) => Ok((Source::Perf(Box::new(p)), OpenNotes::default())),
                Err(e) => {
                    let Some(denied) = open_error_of(&e).filter(|o| o.is_denial()) else {
                        return Err(e);
                    };
                    let why = std::io::Error::from_raw_os_error(denied.errno);
                    let notice = format!(
                        "offwake-perf: perf_event_open was denied ({why}); falling back to \
                         the tracefs backend (--backend tracefs)"
                    );
                    Source::open_tracefs(tracefs, config, Some(notice)).map_err(|t| {
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
        tracefs: &Tracefs,
        config: &SourceConfig,
        fallback: Option<String>,
    ) -> Result<(Source, OpenNotes)> {
        let mut call_graph = None;
        if config.user_stacks && config.call_graph != CallGraph::Fp {
            if config.call_graph_asked {
                bail!(
                    "the tracefs backend cannot copy user stacks, which --call-graph dwarf \
                     needs: use the perf backend, or --call-graph fp"
                );
            }
            call_graph = Some(
                "offwake-perf: the tracefs backend walks user stacks by frame pointers only \
                 (--call-graph fp)"
                    .to_string(),
            );
        }
        let backend = TracefsBackend::open(
            tracefs,
            &TracefsConfig {
                buffer_pages: buffer_pages(config, false),
                kernel_stacks: config.kernel_stacks,
                user_stacks: config.user_stacks,
                filter: config.filter.clone(),
                follow_processes: config.follow_processes,
                kallsyms: config.kallsyms.clone(),
            },
        )?;
        Ok((
            Source::Tracefs(Box::new(backend)),
            OpenNotes {
                fallback,
                call_graph,
            },
        ))
    }

    /// `perf` or `tracefs`.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Perf(_) => "perf",
            Source::Tracefs(_) => "tracefs",
        }
    }

    /// True when samples carry user stack copies to unwind
    /// ([`crate::event::UserCopy`]).
    pub fn copies_user_stacks(&self) -> bool {
        match self {
            Source::Perf(p) => p.copies_user_stacks(),
            Source::Tracefs(_) => false,
        }
    }

    /// True when the source reports mmap, fork and exit events as they
    /// happen (perf); the tracefs backend does not.
    pub fn delivers_mmaps(&self) -> bool {
        matches!(self, Source::Perf(_))
    }

    /// True when switch-ins are expected to come from context-switch
    /// records rather than from `sched_switch` (per-task events, or a
    /// `--state` filter on `sched_switch`), so that their count is no news.
    pub fn switch_ins_from_records(&self) -> bool {
        match self {
            Source::Perf(p) => p.switch_ins_from_records(),
            Source::Tracefs(_) => false,
        }
    }

    /// The longest a round should wait for data.
    pub fn round_period(&self) -> Duration {
        match self {
            Source::Perf(p) => p.round_period(),
            Source::Tracefs(_) => Duration::from_millis(100),
        }
    }

    pub fn poll(&mut self, timeout: Duration, sink: &mut dyn EventSink) -> Result<()> {
        match self {
            Source::Perf(p) => p.poll(timeout, sink),
            Source::Tracefs(t) => t.poll(timeout, sink),
        }
    }

    pub fn finish(&mut self, sink: &mut dyn EventSink) -> Result<()> {
        match self {
            Source::Perf(p) => p.finish(sink),
            Source::Tracefs(t) => t.finish(sink),
        }
    }

    pub fn stats(&self) -> SourceStats {
        match self {
            Source::Perf(p) => p.stats(),
            Source::Tracefs(t) => t.stats(),
        }
    }
}
