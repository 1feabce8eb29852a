//! One run of the tool, in three steps over its [`Plan`] that follow the
//! data: [`attach()`] opens the source (and starts the command once
//! tracing is active); [`trace`] reads its events and hands them to the
//! [`Stages`] (the processes' maps, the unwinding of user stacks, the
//! aggregation), which run on a thread of their own ([`worker`]), until
//! the duration ends, a signal arrives or the command exits; and
//! [`report()`] symbolizes what was aggregated ([`symbols`]), prints it, and
//! says on stderr how the command ended ([`CommandEnd`]) and what the
//! run's counters call for ([`Summary`]).

use std::io::{self, IsTerminal};
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;

use anyhow::{Context, Result, bail};

use crate::aggregate;
use crate::cli::Cli;
use crate::command;
use crate::kallsyms::Preload;
use crate::plan::{Plan, Targets};
use crate::report::{self, Output, ReportOptions, Span};
use crate::source::Source;
use crate::symbolize::ProcessMaps;
use crate::sys::affinity::KeepOff;
use crate::sys::priority::OnDemand;
use crate::timing;

mod attach;
mod command_end;
mod intervals;
mod progress;
mod settle;
mod signals;
mod stages;
mod summary;
mod symbols;
mod worker;

use attach::{Attached, attach};
use command_end::CommandEnd;
use progress::Progress;
use stages::Stages;
use summary::Summary;
use worker::StageThread;

/// How the run ended, for the caller's exit status.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the command of `-- COMMAND` ended, when it had by the end of
    /// the run.
    pub command: Option<ExitStatus>,
}

impl Outcome {
    /// The exit status the tool should end with: the command's, as `time`
    /// and `strace` give it (128+N when signal N killed it), or 0.
    pub fn exit_code(&self) -> u8 {
        let Some(status) = self.command else {
            return 0;
        };
        match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(255),
            (None, None) => 1,
        }
    }
}

/// Parses `std::env::args_os()` with every usage rule, the host's
/// included, exiting with status 2 on a usage error.
pub fn parse_args() -> Cli {
    // The host's rule first, then the others, as one parse did them.
    let checked = Cli::try_parse_from(std::env::args_os()).and_then(|cli| {
        crate::plan::sizing::check_host(&cli)?;
        cli.check_rules()?;
        Ok(cli)
    });
    match checked {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

/// Runs the whole job described by `cli`: attach, trace, report.
pub fn run(cli: &Cli) -> Result<Outcome> {
    if let Some(what) = cli.generate {
        crate::manual::write(what, &mut io::stdout().lock())?;
        return Ok(Outcome { command: None });
    }
    let plan = Plan::from_cli(cli)?;
    for d in &plan.outputs {
        if d.path.is_none() && d.options.format.is_binary() && io::stdout().is_terminal() {
            bail!(
                "pprof output is binary: write it to a file with -o FILE.pb.gz, or redirect stdout"
            );
        }
    }
    // Before anything starts: a FILE that cannot be written stops the run
    // before a command is started or an event opened.
    let outputs = plan
        .outputs
        .iter()
        .map(|d| Ok((Output::open(d.path.as_deref())?, d.options)))
        .collect::<Result<Vec<_>>>()?;
    // Before tracing starts, as everything the run needs to trace and
    // report: no thread may be left to make later.
    let sink = StageThread::spawn()?;
    let symbolizer = symbols::SymbolizeThread::spawn()?;
    let attached = attach(plan)?;
    let traced = trace(attached, sink, outputs, &symbolizer)?;
    report(traced, &symbolizer)
}

/// Tracing has stopped: what [`trace`] gathered.
struct Traced {
    /// Stopped; closed once the report is out (see [`Source::close`]).
    source: Source,
    plan: Plan,
    child: Option<Child>,
    launched: Option<command::Launched>,
    /// The command's status as tracing ended.
    command_end: CommandEnd,
    result: aggregate::Aggregate,
    maps: ProcessMaps,
    kallsyms: Option<Preload>,
    /// Where a recording's kernel text was.
    kernel_text: Option<u64>,
    /// When the trace ran.
    span: Span,
    /// What the source and the unwinder said of what they read.
    summary: Summary,
    /// Where the report goes, and how it looks there.
    outputs: Vec<(Output, ReportOptions)>,
    /// With `--interval`: what wrote the reports so far, and the
    /// boundaries they were cut at (the last report is the remainder).
    intervals: Option<(intervals::Shared, Option<intervals::Cutter>)>,
    /// Without it: what named the cuts made so far, if any.
    settler: Option<settle::Settler>,
}

/// Writes the header, then reads events until the duration ends, a signal
/// arrives or the command exits, and drains the source.
fn trace(
    attached: Attached,
    mut sink: StageThread,
    mut outputs: Vec<(Output, ReportOptions)>,
    symbolizer: &symbols::SymbolizeThread,
) -> Result<Traced> {
    let Attached {
        plan,
        mut source,
        mut child,
        launched,
        tasks,
        maps,
        kallsyms,
    } = attached;
    // With --interval, the reports take the outputs, each with its header.
    let reporter = intervals::shared(&plan, &mut outputs, &kallsyms, &source);
    write_headers(&mut outputs, &plan, child.is_some())?;
    let aggregator = stages::aggregator(&plan, tasks);
    let mut stages = Stages::new(
        plan.stacks.user,
        maps,
        stages::unwinder(&source),
        aggregator,
    );
    stages.interpret(&source);
    if let (Some(secs), Some(r)) = (plan.interval, &reporter) {
        stages.cut_with(intervals::Cutter::new(
            secs,
            intervals::ReportSink::new(r, symbolizer),
        ));
    }
    stages.settle_with(settle::Settler::for_run(&plan, &kallsyms, symbolizer));
    sink.start(stages);
    sink.squeeze(source.copy_budget());
    // Raised when the reader falls behind, until the rings are drained.
    let priority = Arc::new(OnDemand::for_this_thread());
    priority.with_helper(sink.priority.clone());
    source.watch(&priority);
    let (child_status, span) =
        read_events(&plan, &mut source, child.as_mut(), &mut sink, &priority)?;
    let command_end =
        CommandEnd::as_tracing_stops(child.as_mut(), child_status, signals::stop_requested());
    timing::mark("trace");
    source.finish(&mut sink)?;
    let priority_note = priority.note(source.stats().lost_records);
    drop(priority);
    timing::mark("drain.finish");
    // The unwind tables are of no more use: their memory goes before
    // symbolization's.
    let stages::Staged {
        mut maps,
        aggregator,
        cutter,
        settler,
        unwind_notes,
    } = sink.finish()?;
    maps.seal();
    let summary = Summary {
        source_stats: source.stats(),
        source_notes: source.notes(),
        switch_ins_from_records: source.switch_ins_from_records(),
        unwind_notes,
        priority_note,
    };
    let kernel_text = source.recorded_kernel_text();
    timing::mark("drain");
    Ok(Traced {
        source,
        plan,
        child,
        launched,
        command_end,
        result: aggregator.finish(),
        maps,
        kallsyms,
        summary,
        span,
        kernel_text,
        outputs,
        intervals: reporter.map(|r| (r, cutter)),
        settler,
    })
}

/// Writes each output's header, if its format has one.
fn write_headers(
    outputs: &mut [(Output, ReportOptions)],
    plan: &Plan,
    with_command: bool,
) -> Result<()> {
    for (output, options) in outputs {
        let header = match &plan.input {
            Some(input) => report::header_recorded(options, input),
            None => report::header(options, plan.duration, with_command),
        };
        if !header.is_empty() {
            output.write_with(|w| w.write_all(header.as_bytes()))?;
        }
    }
    Ok(())
}

/// Reads events into `sink` until the duration ends, a signal arrives,
/// the source is exhausted or the command exits, raising the reader's
/// `priority` if it falls behind: the command's status if it did, and
/// when the trace ran.
fn read_events(
    plan: &Plan,
    source: &mut Source,
    mut child: Option<&mut Child>,
    sink: &mut StageThread,
    priority: &OnDemand,
) -> Result<(Option<ExitStatus>, Span)> {
    // A deadline past what the clock can hold is none (the command line
    // keeps DURATION far below that).
    let deadline = plan
        .duration
        .and_then(|s| Instant::now().checked_add(Duration::from_secs(s)));
    let mut child_status = None;
    // The command's end wakes the loop at once.
    let exit_watch = child.as_deref().and_then(command::exit_watch);
    // Once real-time, the reader and the stages keep off the CPUs of
    // pinned targets.
    let ours = vec![nix::unistd::gettid().as_raw(), sink.priority.tid()];
    let mut keep_off = live_targets(plan, child.as_deref()).and_then(|t| KeepOff::new(t, ours));
    // Reading a large recording takes a while: say how far it is.
    let mut reading = Progress::new("records read", 0);
    let (started, began) = (SystemTime::now(), Instant::now());
    loop {
        if signals::stop_requested() || source.is_exhausted() {
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(c) = child.as_deref_mut()
            && let Some(status) = c.try_wait().context("waiting for the command")?
        {
            child_status = Some(status);
            timing::mark("trace.reaped");
            break;
        }
        let mut timeout = source.round_period();
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        source.poll(timeout, exit_watch.as_ref().map(|fd| fd.as_fd()), sink)?;
        sink.flush();
        if plan.interval.is_some() {
            sink.reached(source.read_up_to());
        }
        if source.fell_behind() {
            priority.behind();
        }
        if priority.is_raised()
            && let Some(k) = keep_off.as_mut()
        {
            k.tick();
        }
        if plan.input.is_some() {
            reading.at(source.stats().records as usize, 0);
        }
    }
    reading.done();
    let span = source.recorded_span().unwrap_or(Span {
        start: started,
        duration: began.elapsed(),
    });
    Ok((child_status, span))
}

/// The processes or threads traced live whose affinity the tool's threads
/// keep off (see [`KeepOff`]): `-p`'s, `-t`'s or the command's.
fn live_targets(plan: &Plan, child: Option<&Child>) -> Option<Vec<u32>> {
    if plan.input.is_some() {
        return None;
    }
    match (&plan.targets, child) {
        (_, Some(c)) => Some(vec![c.id()]),
        (Targets::Processes(ids) | Targets::Threads(ids), None) => {
            Some(ids.iter().copied().collect())
        }
        _ => None,
    }
}

/// Symbolizes (on `symbolizer`) and writes the report, then the command's status and the
/// run's warnings and notes on stderr.
fn report(traced: Traced, symbolizer: &symbols::SymbolizeThread) -> Result<Outcome> {
    if traced.intervals.is_some() {
        return intervals::last_report(traced, symbolizer);
    }
    let Traced {
        source,
        plan,
        mut child,
        launched,
        command_end,
        result,
        maps,
        kallsyms,
        summary,
        kernel_text,
        span,
        mut outputs,
        intervals: _,
        settler,
    } = traced;
    let kallsyms_cache = kallsyms.clone();
    let naming = symbols::Naming::new(&plan, maps, kallsyms, kernel_text);
    let named = outputs.iter().any(|(output, _)| output.is_open());
    let (result, entries) = settle::last_report(settler, symbolizer, result, naming, named)?;
    if let Some(entries) = entries {
        timing::mark("symbolize");
        for (output, options) in &mut outputs {
            output
                .write_with(|w| report::write_report(w, options, &entries, span))
                .context("writing the report")?;
        }
    }
    outputs
        .into_iter()
        .try_for_each(|(output, _)| output.finish())?;
    timing::mark("write");
    let command = command_end.status(child.as_mut());
    summary.print(&result, &plan);
    timing::print();
    close(source, kallsyms_cache.as_ref());
    drop(launched);
    Ok(Outcome { command })
}

/// Ends the run's work: the kallsyms cache left to write, then the
/// source, then the jobs left for the end.
fn close(source: Source, kallsyms: Option<&Preload>) {
    // The kallsyms cache a cold run has to write is written by the holder
    // of the perf events, forked last, while this process exits; without
    // one (other sources), here.
    if let Some(job) = kallsyms.and_then(Preload::pending_store) {
        crate::sys::child::leave(job);
    }
    // Last: the holder of the events is forked when this process has no
    // more work to do (no page of it is then copied on write).
    source.close();
    crate::sys::child::take_left()
        .iter()
        .for_each(|job| (job.run)());
}
