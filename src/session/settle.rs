//! Naming a run's stacks as it goes, without `--interval`: when the stack
//! storage or the entries are nearly full, the stages cut what was
//! counted, and the symbolization thread names its stacks and folds its
//! entries into the run's, merged by what they print ([`Settled`]). The
//! report at the end is of every cut and the rest. So a long run of a
//! busy machine keeps every stack, in memory that follows the distinct
//! named stacks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Result;

use crate::aggregate::{Aggregate, Aggregator, Settled};
use crate::diag::diag;
use crate::kallsyms::Preload;
use crate::plan::Plan;
use crate::report::ResolvedEntry;
use crate::symbolize::ProcessMaps;

use super::intervals::needing_maps;
use super::progress;
use super::symbols::{self, Naming, StackNames, SymbolizeThread};

/// Cuts sent and not yet folded, at most: past them, stacks that do not
/// fit are missed (and counted), rather than memory growing while naming
/// lags.
const MAX_PENDING: usize = 2;

/// Most distinct WARNING and NOTE lines of naming kept from the cuts.
const MAX_NOTES: usize = 32;

/// What the cuts so far came to.
struct Folded {
    settled: Settled,
    /// What naming them met, each line once, said at the end of the run.
    notes: Vec<String>,
}

impl Folded {
    fn note(&mut self, lines: Vec<String>) {
        for line in lines {
            if self.notes.len() < MAX_NOTES && !self.notes.contains(&line) {
                self.notes.push(line);
            }
        }
    }
}

/// On the stages' thread: cuts what was counted when it nearly fills its
/// storage, for the symbolization thread to fold in.
pub(super) struct Settler {
    folded: Arc<Mutex<Folded>>,
    thread: SymbolizeThread,
    /// Cuts sent and not yet folded in.
    pending: Arc<AtomicUsize>,
    /// Cuts sent.
    sent: usize,
    kallsyms: Option<Preload>,
    module_offsets: bool,
}

impl Settler {
    /// For a run of `plan` traced live without `--interval` (a recording
    /// tells where its kernel's text was only as it is read).
    pub(super) fn for_run(
        plan: &Plan,
        kallsyms: &Option<Preload>,
        thread: &SymbolizeThread,
    ) -> Option<Settler> {
        if plan.interval.is_some() || plan.input.is_some() {
            return None;
        }
        Some(Settler {
            folded: Arc::new(Mutex::new(Folded {
                settled: Settled::new(usize::from(plan.chain)),
                notes: Vec::new(),
            })),
            thread: thread.clone(),
            pending: Arc::new(AtomicUsize::new(0)),
            sent: 0,
            kallsyms: kallsyms.clone(),
            module_offsets: plan.module_offsets,
        })
    }

    /// Cuts what `aggregator` counted and has it named and folded in,
    /// unless [`MAX_PENDING`] cuts wait.
    pub(super) fn settle(&mut self, aggregator: &mut Aggregator, maps: &ProcessMaps) {
        if self.pending.load(Ordering::Acquire) >= MAX_PENDING {
            return;
        }
        let cut = aggregator.cut();
        let maps = maps.snapshot(needing_maps(&cut));
        let (folded, pending) = (Arc::clone(&self.folded), Arc::clone(&self.pending));
        let (kallsyms, module_offsets) = (self.kallsyms.clone(), self.module_offsets);
        pending.fetch_add(1, Ordering::AcqRel);
        self.sent += 1;
        self.thread.run(Box::new(move || {
            let stop = Box::new(super::signals::signalled_from_now());
            let names = progress::silently(|| {
                let naming = Naming {
                    maps,
                    kallsyms,
                    kernel_text: None,
                    module_offsets,
                };
                symbols::name_stacks(&cut, naming, stop)
            });
            let mut names = names.unwrap_or_else(|e| {
                diag!("offwake-perf: stacks could not be named: {e:#}");
                StackNames::default()
            });
            let mut folded = folded.lock().unwrap_or_else(PoisonError::into_inner);
            folded.note(std::mem::take(&mut names.warnings));
            folded.settled.fold(cut, &|r, half| names.get(r, half));
            drop((folded, names));
            // What naming took (files' symbols and DWARF) goes back to the
            // system until the next cut.
            // SAFETY: malloc_trim only releases free heap memory; it takes
            // no pointer and is safe to call from any thread.
            unsafe {
                libc::malloc_trim(0);
            }
            pending.fetch_sub(1, Ordering::AcqRel);
        }));
    }
}

/// The run's result and, when `named`, its printable entries: `last` is
/// what was counted since the last cut (all of it without one), folded in
/// after every cut before it.
pub(super) fn last_report(
    settler: Option<Settler>,
    thread: &SymbolizeThread,
    last: Aggregate,
    naming: Naming,
    named: bool,
) -> Result<(Arc<Aggregate>, Option<Vec<ResolvedEntry>>)> {
    let Some(settler) = settler.filter(|s| s.sent > 0) else {
        let last = Arc::new(last);
        if !named {
            return Ok((last, None));
        }
        let entries = symbols::symbolize_apart(thread, &last, naming)?;
        return Ok((last, Some(entries)));
    };
    let folded = settler.folded;
    // After every cut before it: jobs run in order.
    let (result, entries) = thread.wait_for(move |stop| {
        let mut names = symbols::name_stacks(&last, naming, stop)?;
        let mut folded = folded.lock().unwrap_or_else(PoisonError::into_inner);
        folded.note(std::mem::take(&mut names.warnings));
        // Each warning carries its own "WARNING:" prefix.
        for line in &folded.notes {
            diag!("{line}");
        }
        let mut all = std::mem::replace(&mut folded.settled, Settled::new(0));
        drop(folded);
        all.fold(last, &|r, half| names.get(r, half));
        if crate::timing::enabled() {
            diag!(
                "offwake-perf: {} cuts named as the run went ({} stacks)",
                all.folded() - 1,
                all.named_len()
            );
        }
        let result = all.into_aggregate();
        let entries = named.then(|| symbols::resolved_entries(&result, &StackNames::default()));
        Ok((result, entries))
    })?;
    Ok((Arc::new(result), entries))
}
