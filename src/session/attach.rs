//! Opening a run's source: a live backend on the plan's targets, with the
//! command started once tracing is active, or a recording.

use std::path::Path;
use std::process::Child;

use anyhow::Result;

use crate::aggregate::TaskTable;
use crate::command;
use crate::diag::diag;
use crate::kallsyms::Preload;
use crate::plan::{Plan, Targets};
use crate::source::Source;
use crate::source::perfdata::RecordedSource;
use crate::source::tracepoint::Tracefs;
use crate::symbolize::ProcessMaps;
use crate::timing;

use super::signals;

/// Tracing is active: what [`attach`] made.
pub(super) struct Attached {
    pub(super) plan: Plan,
    pub(super) source: Source,
    /// The command of `-- COMMAND`, running.
    pub(super) child: Option<Child>,
    /// The thread that started it, whose events it inherits. It stays
    /// until the report is out: a command still running then may have
    /// asked for a signal when its parent thread exits (`PR_SET_PDEATHSIG`).
    pub(super) launched: Option<command::Launched>,
    /// What was known about threads before the first event.
    pub(super) tasks: TaskTable,
    pub(super) maps: ProcessMaps,
    /// kallsyms, being read, when kernel stacks are wanted.
    pub(super) kallsyms: Option<Preload>,
}

/// Opens the source on the plan's targets and, once tracing is active,
/// lets the command (if any) run.
pub(super) fn attach(mut plan: Plan) -> Result<Attached> {
    if let Some(input) = plan.input.clone() {
        return attach_recorded(plan, &input);
    }
    let tracefs = Tracefs::open()?;
    timing::mark("attach.tracefs");
    // Whatever the backend: one listing of `instances/`.
    let stale = crate::source::tracefs::instance::remove_stale(&tracefs);
    if !stale.is_empty() {
        diag!(
            "offwake-perf: removed {} ftrace instance(s) left behind by earlier runs that \
             were killed: {}",
            stale.len(),
            stale.join(", ")
        );
    }
    timing::mark("attach.stale");
    // The command's launcher is the thread tracing is attached to: the
    // command it starts once tracing runs inherits its events.
    let launcher = if plan.command.is_empty() {
        None
    } else {
        let launcher = command::Launcher::spawn(&plan.command)?;
        plan.command_launching(launcher.tid());
        Some(launcher)
    };
    timing::mark("attach.fork");
    // Kernel symbols take longest to come: started at once.
    let kallsyms = plan.stacks.kernel.then(Preload::spawn);
    let mut maps = ProcessMaps::new();
    if let Targets::Processes(pids) = &plan.targets {
        for &pid in pids {
            maps.ensure_known(pid, 0);
        }
    }
    signals::install()?;
    timing::mark("attach.maps");
    let (mut source, notes) = Source::open(&plan, &tracefs, kallsyms.as_ref())?;
    timing::mark("attach");
    if let Some(at) = timing::since_launch() {
        // Said at once: scripts wait for this line to start their load.
        diag!(
            "offwake-perf: tracing active {:.3} ms after launch ({} backend)",
            at.as_secs_f64() * 1e3,
            source.name()
        );
    }
    maps.set_mmap_events(source.delivers_mmaps());
    for notice in [&notes.fallback, &notes.wide, &notes.wall]
        .into_iter()
        .flatten()
    {
        diag!("{notice}");
    }
    // Tracing is active from here on.
    let (child, launched) = match launcher.map(command::Launcher::release).transpose()? {
        Some((child, launched)) => {
            plan.command_started(child.id());
            // Its wakeups were kept from its creation only where the
            // kernel's next pids could be forecast (not in a PID namespace
            // other than the initial one): from now on, in any case.
            if let Err(e) = source.follow_now(child.id()) {
                diag!("offwake-perf: warning: {e:#}");
            }
            // Started by this process, the command began in its root,
            // which is known even if it is gone before its first event.
            maps.hold_own_root_for(child.id());
            (Some(child), Some(launched))
        }
        None => (None, None),
    };
    timing::mark("trace.exec");
    // What is known about threads before their first event is read: once
    // tracing is active, since it takes a while on a busy host.
    let tasks = TaskTable::scan_proc();
    timing::mark("trace.tasks");
    Ok(Attached {
        plan,
        source,
        child,
        launched,
        tasks,
        maps,
        kallsyms,
    })
}

/// Opens the recording `input` in place of a live source. Its processes
/// are known from its records only: nothing of them is read from /proc.
fn attach_recorded(mut plan: Plan, input: &Path) -> Result<Attached> {
    let kallsyms = plan.stacks.kernel.then(Preload::spawn);
    signals::install()?;
    let mut source = RecordedSource::open(input, kallsyms.as_ref(), plan.wall.is_some())?;
    // Its cgroups are named by its own records, before any is read.
    let names = source.cgroup_names(plan.recorded_cgroup_use())?;
    plan.use_recorded_cgroups(names)?;
    if plan.stacks.kernel
        && let Some(warning) = source.other_kernel()
    {
        diag!("{warning}");
    }
    let maps = ProcessMaps::recorded(source.build_ids());
    Ok(Attached {
        plan,
        source: Source::Recorded(Box::new(source)),
        child: None,
        launched: None,
        tasks: TaskTable::default(),
        maps,
        kallsyms,
    })
}
