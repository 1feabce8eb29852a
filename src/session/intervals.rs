//! Reports every `--interval` seconds, while tracing goes on: the stages
//! cut what was counted at each boundary of event time ([`Cutter`]), and
//! the symbolization thread names and writes each report ([`Reporter`]).
//! Each report is complete on its own: its entries, the stacks they use,
//! and its notes on stderr. On stdout (or a FIFO) the reports follow each
//! other; each `-o FILE` gets one file per report, named with the start
//! of its interval.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};

use crate::aggregate::{Aggregate, Aggregator, Stats};
use crate::diag::diag;
use crate::kallsyms::Preload;
use crate::plan::Plan;
use crate::report::{self, Format, Output, ReportOptions, Span};
use crate::source::Source;
use crate::symbolize::ProcessMaps;
use crate::sys::host::monotonic_ns;

use super::symbols::{self, Stop, SymbolizeThread};
use super::{Outcome, Traced, close};
use crate::timing;

/// What was counted during one interval, with what naming it needs.
pub(super) struct Cut {
    pub(super) aggregate: Aggregate,
    pub(super) maps: ProcessMaps,
    pub(super) span: Span,
}

/// Reports cut and not yet written, at most: past them, a report goes on
/// to the next boundary (its interval is longer), rather than memory
/// growing while symbolization lags.
const MAX_PENDING: usize = 2;

/// A last report this short and empty is not written.
const LEFTOVER: Duration = Duration::from_millis(200);

/// On the stages' thread: cuts a report at each boundary of event time.
pub(super) struct Cutter {
    /// Nanoseconds between boundaries.
    every: u64,
    /// Where the report being counted began, and the next boundary
    /// (CLOCK_MONOTONIC, as event times).
    from: u64,
    next: u64,
    /// CLOCK_MONOTONIC and the wall clock at one moment.
    mono0: u64,
    wall0: SystemTime,
    sink: ReportSink,
}

impl Cutter {
    /// Boundaries every `secs` seconds from now; each cut goes to `sink`.
    pub(super) fn new(secs: u64, sink: ReportSink) -> Cutter {
        let (wall0, mono0) = (SystemTime::now(), monotonic_ns());
        let every = secs.saturating_mul(1_000_000_000);
        Cutter {
            every,
            from: mono0,
            next: mono0.saturating_add(every),
            mono0,
            wall0,
            sink,
        }
    }

    /// True when event time `time` is at or past the next boundary.
    pub(super) fn due(&self, time: u64) -> bool {
        time >= self.next
    }

    /// Cuts a report at each boundary up to `time`, unless
    /// [`MAX_PENDING`] reports wait to be written.
    pub(super) fn cut(&mut self, time: u64, aggregator: &mut Aggregator, maps: &ProcessMaps) {
        while self.due(time) {
            if self.sink.pending() < MAX_PENDING {
                let aggregate = aggregator.cut();
                let maps = maps.snapshot(needing_maps(&aggregate));
                let span = Span {
                    start: self.wall(self.from),
                    duration: Duration::from_nanos(self.next - self.from),
                };
                self.sink.send(Cut {
                    aggregate,
                    maps,
                    span,
                });
                self.from = self.next;
            }
            self.next = self.next.saturating_add(self.every);
        }
    }

    /// The span of the last report: from the last cut to now.
    pub(super) fn remainder(&self) -> Span {
        Span {
            start: self.wall(self.from),
            duration: Duration::from_nanos(monotonic_ns().saturating_sub(self.from)),
        }
    }

    /// The wall-clock time of event time `mono`.
    fn wall(&self, mono: u64) -> SystemTime {
        self.wall0 + Duration::from_nanos(mono.saturating_sub(self.mono0))
    }
}

/// The processes whose own maps (not only their files) name some user
/// stack of `aggregate`.
pub(super) fn needing_maps(aggregate: &Aggregate) -> Vec<u32> {
    let mut tgids: Vec<u32> = aggregate
        .stacks
        .user
        .iter()
        .filter(|s| !s.addrs.is_empty() && s.by_address().contains(&true))
        .map(|s| s.tgid)
        .collect();
    tgids.sort_unstable();
    tgids.dedup();
    tgids
}

/// Where the reports go.
enum Destination {
    /// Stdout, or a FIFO or device: the reports follow each other.
    Stream(Output, ReportOptions),
    /// A regular file: one file per report, beside it.
    Files(PathBuf, ReportOptions),
}

/// On the symbolization thread: names and writes each report.
pub(super) struct Reporter {
    destinations: Vec<Destination>,
    kallsyms: Option<Preload>,
    module_offsets: bool,
    /// How to say that records were lost (see [`Stats::notes`]).
    switch_ins_from_records: bool,
    /// Reports written so far.
    written: usize,
    /// The run's counts, every report's added.
    pub(super) total: Stats,
}

impl Reporter {
    /// Reports to `outputs`, as opened for the run: a regular file is
    /// given up (no report is ever written to it) for one file per report.
    pub(super) fn new(
        outputs: Vec<(Output, ReportOptions)>,
        kallsyms: Option<Preload>,
        module_offsets: bool,
    ) -> Reporter {
        let destinations = outputs
            .into_iter()
            .map(|(output, options)| match output.regular_path() {
                Some(path) => Destination::Files(path.to_path_buf(), options),
                None => Destination::Stream(output, options),
            })
            .collect();
        Reporter {
            destinations,
            kallsyms,
            module_offsets,
            switch_ins_from_records: false,
            written: 0,
            total: Stats::default(),
        }
    }

    /// Says whether the source takes switch-ins from context-switch
    /// records by design (see [`Stats::notes`]).
    pub(super) fn set_switch_ins_from_records(&mut self, by_design: bool) {
        self.switch_ins_from_records = by_design;
    }

    /// Names and writes the report of `cut`, then says its notes on
    /// stderr; `stop` cuts the naming short.
    pub(super) fn write(&mut self, cut: Cut, stop: Stop) -> Result<()> {
        let Cut {
            aggregate,
            maps,
            span,
        } = cut;
        self.total.add(&aggregate.stats);
        let naming = symbols::Naming {
            maps,
            kallsyms: self.kallsyms.clone(),
            kernel_text: None,
            module_offsets: self.module_offsets,
        };
        let entries = symbols::symbolize_entries(&aggregate, naming, stop)?;
        let secs = span.duration.as_secs_f64().round() as u64;
        let first = self.written == 0;
        let write = |w: &mut dyn std::io::Write, options: &ReportOptions, first: bool| {
            if !first && options.format == Format::Folded {
                w.write_all(b"\n")?;
            }
            w.write_all(report::header(options, Some(secs.max(1)), false).as_bytes())?;
            report::write_report(w, options, &entries, span)
        };
        // One destination that fails (a full disk) does not keep the
        // report from the others.
        let mut failed = None;
        for d in &mut self.destinations {
            let done = match d {
                Destination::Stream(output, options) => {
                    output.write_with(|w| write(w, options, first))
                }
                Destination::Files(path, options) => Output::open(Some(&stamped(path, span.start)))
                    .and_then(|mut output| {
                        output.write_with(|w| write(w, options, true))?;
                        output.finish()
                    }),
            };
            if let Err(e) = done {
                failed.get_or_insert(e);
            }
        }
        self.written += 1;
        for note in aggregate
            .stats
            .notes(self.switch_ins_from_records, "--mmap-pages")
        {
            diag!("{note}");
        }
        failed.map_or(Ok(()), Err)
    }

    /// Ends the streams the reports went to.
    pub(super) fn finish(&mut self) -> Result<()> {
        for d in std::mem::take(&mut self.destinations) {
            if let Destination::Stream(output, _) = d {
                output.finish()?;
            }
        }
        Ok(())
    }
}

/// A reporter the stages' thread and the end of the run share.
pub(super) type Shared = Arc<Mutex<Reporter>>;

/// With `--interval`, a [`Reporter`] to share, which takes `outputs`
/// (see [`Reporter::new`]).
pub(super) fn shared(
    plan: &Plan,
    outputs: &mut Vec<(Output, ReportOptions)>,
    kallsyms: &Option<Preload>,
    source: &Source,
) -> Option<Shared> {
    plan.interval?;
    let outputs = std::mem::take(outputs);
    let mut r = Reporter::new(outputs, kallsyms.clone(), plan.module_offsets);
    r.set_switch_ins_from_records(source.switch_ins_from_records());
    Some(Arc::new(Mutex::new(r)))
}

/// Where the stages send each cut: its report is written on the
/// symbolization thread, after those before it.
pub(super) struct ReportSink {
    reporter: Shared,
    thread: SymbolizeThread,
    /// Reports sent and not yet written.
    pending: Arc<AtomicUsize>,
}

impl ReportSink {
    pub(super) fn new(reporter: &Shared, thread: &SymbolizeThread) -> ReportSink {
        ReportSink {
            reporter: Arc::clone(reporter),
            thread: thread.clone(),
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    fn send(&self, cut: Cut) {
        let (reporter, pending) = (Arc::clone(&self.reporter), Arc::clone(&self.pending));
        pending.fetch_add(1, Ordering::AcqRel);
        self.thread.run(Box::new(move || {
            let stop = super::signals::signalled_from_now();
            let mut r = reporter.lock().unwrap_or_else(PoisonError::into_inner);
            if let Err(e) = super::progress::silently(|| r.write(cut, Box::new(stop))) {
                diag!("offwake-perf: a report was not written: {e:#}");
            }
            drop(r);
            // What naming the report took (files' symbols and DWARF) is
            // given back to the system until the next report.
            // SAFETY: malloc_trim only releases free heap memory; it takes
            // no pointer and is safe to call from any thread.
            unsafe {
                libc::malloc_trim(0);
            }
            pending.fetch_sub(1, Ordering::AcqRel);
        }));
    }
}

/// With `--interval`: the report of the remainder, after those before it,
/// then the command's status and the run's notes and counts.
pub(super) fn last_report(traced: Traced, symbolizer: &SymbolizeThread) -> Result<Outcome> {
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
        span,
        intervals,
        ..
    } = traced;
    let Some((reporter, cutter)) = intervals else {
        bail!("no report was cut");
    };
    let span = cutter.map_or(span, |c| c.remainder());
    let quiet = result.quiet.clone();
    let cut = Cut {
        aggregate: result,
        maps,
        span,
    };
    let shared = Arc::clone(&reporter);
    let written = symbolizer.wait_for(move |stop| {
        let mut r = shared.lock().unwrap_or_else(PoisonError::into_inner);
        // A DURATION that is a multiple of the interval leaves only the
        // moment tracing took to stop: no report of its own.
        if cut.aggregate.entries.is_empty() && cut.span.duration < LEFTOVER {
            r.total.add(&cut.aggregate.stats);
        } else {
            r.write(cut, stop)?;
        }
        r.finish()
    });
    timing::mark("write");
    let command = command_end.status(child.as_mut());
    let total = reporter
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .total;
    summary.print_totals(&total, &quiet, &plan);
    timing::print();
    close(source, kallsyms.as_ref());
    drop(launched);
    written?;
    Ok(Outcome { command })
}

/// `path` with `start` (UTC, to the second) before its extension, the
/// part of its name from the first dot on: `offwake.pb.gz` becomes
/// `offwake.20261128T220102Z.pb.gz`.
pub(super) fn stamped(path: &Path, start: SystemTime) -> PathBuf {
    let secs = start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0));
    let stamp = format!(".{}", crate::sys::host::utc_stamp(secs));
    let name = path.file_name().map(OsStrExt::as_bytes).unwrap_or_default();
    // A leading dot (a hidden file) is not an extension's.
    let at = name
        .iter()
        .skip(1)
        .position(|&b| b == b'.')
        .map_or(name.len(), |i| i + 1);
    let mut named = name[..at].to_vec();
    named.extend_from_slice(stamp.as_bytes());
    named.extend_from_slice(&name[at..]);
    path.with_file_name(std::ffi::OsStr::from_bytes(&named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_goes_before_the_extension() {
        // 2026-11-28 22:01:02 UTC.
        let t = UNIX_EPOCH + Duration::from_secs(1_795_903_262);
        let s = |p: &str| stamped(Path::new(p), t).to_string_lossy().into_owned();
        assert_eq!(s("/d/offwake.pb.gz"), "/d/offwake.20261128T220102Z.pb.gz");
        assert_eq!(s("out.folded"), "out.20261128T220102Z.folded");
        assert_eq!(s("report"), "report.20261128T220102Z");
        assert_eq!(s(".hidden"), ".hidden.20261128T220102Z");
        assert_eq!(s("/d/.x.svg"), "/d/.x.20261128T220102Z.svg");
    }
}
