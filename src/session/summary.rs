//! What a run says on stderr once its report is out: the notes its
//! counters call for, and how many records and intervals it counted.

use crate::aggregate::{self, Aggregate};
use crate::diag::diag;
use crate::event::SourceStats;
use crate::plan::Plan;

/// What reading the events leaves to say at the end of the run.
pub(super) struct Summary {
    pub(super) source_stats: SourceStats,
    /// Warnings the source has about what it read.
    pub(super) source_notes: Vec<String>,
    pub(super) switch_ins_from_records: bool,
    /// Files whose unwind tables could not be read.
    pub(super) unwind_note: Option<String>,
}

impl Summary {
    /// Says, on stderr, the notes of the run on `plan` that gave `result`,
    /// then its counts.
    pub(super) fn print(self, result: &Aggregate, plan: &Plan) {
        let Summary {
            source_stats,
            source_notes,
            switch_ins_from_records,
            unwind_note,
        } = self;
        let stats = result.stats;
        let larger_buffer = match plan.input {
            Some(_) => "buffer when recording (perf record -m PAGES)",
            None => "--mmap-pages",
        };
        let notes = stats
            .notes(switch_ins_from_records, larger_buffer)
            .into_iter()
            .chain(aggregate::quiet::notes(
                &result.quiet,
                plan.state.is_some(),
                plan.input.is_some(),
            ))
            .chain(unwind_note)
            .chain(source_notes);
        for note in notes {
            diag!("{note}");
        }
        diag!(
            "offwake-perf: {} records read, {} lost; {} intervals counted, {} discarded \
             for a possible loss, {} outside -m/-M",
            source_stats.records,
            stats.lost_records,
            stats.intervals,
            stats.discarded_lost,
            stats.out_of_range
        );
        if source_stats.malformed > 0 {
            diag!(
                "WARNING: {} malformed records skipped",
                source_stats.malformed
            );
        }
    }
}
