//! What a run says on stderr once its report is out: the notes its
//! counters call for, and how many records and intervals it counted.

use crate::aggregate::quiet::QuietTarget;
use crate::aggregate::{self, Aggregate};
use crate::diag::{counted, diag};
use crate::event::SourceStats;
use crate::plan::Plan;

/// What reading the events leaves to say at the end of the run.
pub(super) struct Summary {
    pub(super) source_stats: SourceStats,
    /// Warnings the source has about what it read.
    pub(super) source_notes: Vec<String>,
    pub(super) switch_ins_from_records: bool,
    /// What the unwinding could not do.
    pub(super) unwind_notes: Vec<String>,
    /// When the reader's priority was raised, or why it could not be.
    pub(super) priority_note: Option<String>,
}

impl Summary {
    /// Says, on stderr, the notes of the run on `plan` that gave `result`,
    /// then its counts.
    pub(super) fn print(self, result: &Aggregate, plan: &Plan) {
        let larger_buffer = match plan.input {
            Some(_) => "buffer when recording (perf record -m PAGES)",
            None => "--mmap-pages",
        };
        let notes = result
            .stats
            .notes(self.switch_ins_from_records, larger_buffer);
        self.say(notes, &result.stats, &result.quiet, plan);
        if crate::timing::enabled() {
            diag!(
                "offwake-perf: stacks stored: {} kernel, {} user, {} named; {} entries",
                result.stacks.kernel.len(),
                result.stacks.user.len(),
                result.stacks.named.len(),
                result.entries.len()
            );
        }
    }

    /// As [`Summary::print`], for a run whose reports (`--interval`) said
    /// their own counters' notes: the rest, then the run's `total` counts.
    pub(super) fn print_totals(self, total: &aggregate::Stats, quiet: &[QuietTarget], plan: &Plan) {
        self.say(Vec::new(), total, quiet, plan);
    }

    /// Says `stats_notes`, then the other notes, then the counts.
    fn say(
        self,
        stats_notes: Vec<String>,
        stats: &aggregate::Stats,
        quiet: &[QuietTarget],
        plan: &Plan,
    ) {
        let Summary {
            source_stats,
            source_notes,
            switch_ins_from_records: _,
            unwind_notes,
            priority_note,
        } = self;
        let notes = stats_notes
            .into_iter()
            .chain(aggregate::quiet::notes(
                quiet,
                plan.state.is_some(),
                plan.input.is_some(),
            ))
            .chain(unwind_notes)
            .chain(source_notes)
            .chain(priority_note);
        for note in notes {
            diag!("{note}");
        }
        diag!("{}", counts_line(&source_stats, stats));
        if source_stats.malformed > 0 {
            diag!(
                "WARNING: {} skipped",
                counted(
                    source_stats.malformed,
                    "malformed record",
                    "malformed records"
                )
            );
        }
    }
}

/// The run's last line: records read and lost, intervals counted and set
/// aside. Scripts read it, so its words stay put; only the plurals follow
/// the counts.
fn counts_line(source: &SourceStats, stats: &aggregate::Stats) -> String {
    let mut line = format!(
        "offwake-perf: {} read, {} lost; {} counted, {} discarded for a possible loss, \
         {} outside -m/-M",
        counted(source.records, "record", "records"),
        stats.lost_records,
        counted(stats.intervals, "interval", "intervals"),
        stats.discarded_lost,
        stats.out_of_range
    );
    // A wall-clock profile's other shares.
    if stats.on_cpu_samples > 0 || stats.runnable_us > 0 {
        line.push_str(&format!(
            "; {} ({} us on-CPU), {} us waiting for a CPU",
            counted(stats.on_cpu_samples, "on-CPU sample", "on-CPU samples"),
            stats.on_cpu_us,
            stats.runnable_us
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_line_keeps_its_words_and_gets_plurals_right() {
        let mut source = SourceStats {
            records: 20,
            ..SourceStats::default()
        };
        let mut stats = aggregate::Stats {
            intervals: 1,
            ..aggregate::Stats::default()
        };
        assert_eq!(
            counts_line(&source, &stats),
            "offwake-perf: 20 records read, 0 lost; 1 interval counted, 0 discarded \
             for a possible loss, 0 outside -m/-M"
        );
        source.records = 1;
        stats.intervals = 0;
        stats.lost_records = 3;
        assert_eq!(
            counts_line(&source, &stats),
            "offwake-perf: 1 record read, 3 lost; 0 intervals counted, 0 discarded \
             for a possible loss, 0 outside -m/-M"
        );
        stats.on_cpu_samples = 1;
        stats.on_cpu_us = 5025;
        stats.runnable_us = 7;
        assert!(
            counts_line(&source, &stats)
                .ends_with("-m/-M; 1 on-CPU sample (5025 us on-CPU), 7 us waiting for a CPU"),
            "{}",
            counts_line(&source, &stats)
        );
    }
}
