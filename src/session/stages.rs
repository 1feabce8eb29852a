//! What each event goes through once its place in time is known: the
//! processes' maps, the unwinding of user stacks, then the aggregation.

use std::sync::{Arc, Mutex};

use super::intervals::Cutter;
use super::settle::Settler;
use crate::aggregate::{self, Aggregator, TaskTable};
use crate::diag::diag;
use crate::event::runs::LastRuns;
use crate::event::{Event, EventKind};
use crate::plan::Plan;
use crate::runtime::early::{self, EarlyReads, Shared};
use crate::runtime::reader::{Interpreted, strip_forged};
use crate::source::Source;
use crate::symbolize::ProcessMaps;
use crate::timing;
use crate::unwind::Unwinder;
use crate::unwind::live::LiveStacks;
use crate::unwind::tail::Tails;

/// The aggregator of a run on `plan`, knowing `tasks` before the first
/// event.
pub(super) fn aggregator(plan: &Plan, tasks: TaskTable) -> Aggregator {
    let mut aggregator = Aggregator::new(
        aggregate::Config {
            threads: plan.targets.clone(),
            state: plan.state,
            min_block_us: plan.min_block_us,
            max_block_us: plan.max_block_us,
            stack_storage_size: plan.stack_storage_size,
            stacks: plan.stacks,
            chain: plan.chain,
            cgroup_names: plan.cgroup_names.clone(),
            split_cgroups: plan.split_cgroups(),
            wall: plan.wall.is_some(),
            // A recording's pids are not this machine's now.
            own: plan
                .input
                .is_none()
                .then(crate::sys::own::OwnTasks::of_this_process),
        },
        tasks,
    );
    if plan.input.is_some() {
        // A recording's threads are not this machine's threads now.
        aggregator = aggregator.with_task_lookup(Box::new(|_| None));
    }
    if let Some(names) = &plan.recorded_cgroups {
        // Nor its cgroups: it names them itself.
        aggregator = aggregator.with_recorded_cgroups(std::sync::Arc::clone(names));
    }
    aggregator
}

/// The unwinder of `source`'s user stack copies, if its samples carry
/// them. Tracing live, it reads on past a copy into the stack of a thread
/// that still waits; under tracefs, which copies none, it reads the whole
/// stack of a thread that still waits.
pub(super) fn unwinder(source: &Source) -> Option<Unwinder> {
    if let Some(runs) = source.thread_stacks() {
        return Some(Unwinder::new().with_live(LiveStacks::live(runs)));
    }
    if !source.copies_user_stacks() {
        return None;
    }
    let mut unwinder = Unwinder::new();
    if let Some(memo) = source.memo() {
        unwinder = unwinder.with_memo(memo);
    }
    Some(match source.live_stacks() {
        Some((copy_size, runs)) => unwinder.with_tails(Tails::live(copy_size, runs)),
        None => unwinder,
    })
}

/// What a run does with the events, in time order: the processes' maps,
/// the unwinding of user stacks, then the aggregation.
pub(super) struct Stages {
    /// False under `-K`: no user stack is kept, no map is needed.
    keep_user: bool,
    maps: ProcessMaps,
    /// When samples copy user stacks.
    unwinder: Option<Unwinder>,
    /// Tracing live: what reads interpreters' frames, and the thread that
    /// reads them as soon as the reader sees a switch-out.
    interpreted: Option<Shared>,
    early: Option<EarlyReads>,
    /// Where the reader says when threads ran, until the early reads
    /// start (with the first interpreter found).
    early_runs: Option<Arc<LastRuns>>,
    aggregator: Aggregator,
    /// With `--interval`: where reports are cut.
    cutter: Option<Cutter>,
    /// Without: what cuts and names what was counted when the storage
    /// nearly fills.
    settler: Option<Settler>,
}

/// What the stages leave once every event went through them.
pub(super) struct Staged {
    pub(super) maps: ProcessMaps,
    pub(super) aggregator: Aggregator,
    pub(super) cutter: Option<Cutter>,
    pub(super) settler: Option<Settler>,
    /// The notes of the unwinding (see [`Unwinder::notes`]).
    pub(super) unwind_notes: Vec<String>,
}

impl Stages {
    /// The stages into `aggregator`, keeping user stacks if `keep_user`,
    /// and unwinding them with `unwinder` (when samples copy user stacks).
    pub(super) fn new(
        keep_user: bool,
        maps: ProcessMaps,
        unwinder: Option<Unwinder>,
        aggregator: Aggregator,
    ) -> Stages {
        Stages {
            keep_user,
            maps,
            unwinder,
            interpreted: None,
            early: None,
            early_runs: None,
            aggregator,
            cutter: None,
            settler: None,
        }
    }

    /// Reads interpreters' frames into blocked stacks, tracing live (a
    /// recording's processes are gone) with user stacks unwound by DWARF
    /// (a frame-pointer walk rarely reaches the interpreter's loop, and
    /// only unwinding reads every process's map): `source` tells when a
    /// thread ran.
    pub(super) fn interpret(&mut self, source: &Source) {
        if self.unwinder.is_none() {
            return;
        }
        let runs = source
            .thread_stacks()
            .or_else(|| source.live_stacks().map(|(_, runs)| runs));
        let Some(runs) = runs else {
            return;
        };
        let shared = Arc::new(Mutex::new(Interpreted::new(
            self.maps.interpreted.clone(),
            runs.clone(),
        )));
        self.early_runs = Some(runs);
        self.interpreted = Some(shared);
    }

    /// Cuts a report at each of `cutter`'s boundaries.
    pub(super) fn cut_with(&mut self, cutter: Cutter) {
        self.cutter = Some(cutter);
    }

    /// Cuts and names what was counted whenever the storage nearly
    /// fills, with `settler`.
    pub(super) fn settle_with(&mut self, settler: Option<Settler>) {
        self.settler = settler;
    }

    /// Event time has reached `time`: the reports due are cut, and what
    /// was counted is named if the storage nearly fills.
    pub(super) fn reached(&mut self, time: u64) {
        if let Some(c) = self.cutter.as_mut()
            && c.due(time)
        {
            c.cut(time, &mut self.aggregator, &self.maps);
        }
        if let Some(s) = self.settler.as_mut()
            && self.aggregator.nearly_full()
        {
            s.settle(&mut self.aggregator, &self.maps);
        }
    }

    /// Ends the unwinding, saying how it went when timing is on. The
    /// unwind tables go with it.
    pub(super) fn finish(mut self) -> Staged {
        if let Some(e) = self.early.take() {
            e.stop();
        }
        let interpreted = self.interpreted.take();
        let interpreted = interpreted.as_ref().map(early::lock);
        if let Some(u) = &self.unwinder
            && timing::enabled()
        {
            let st = u.stats();
            diag!(
                "offwake-perf: unwound {} user stacks in {:.3} ms ({:.2} us each): {} frames \
                 by DWARF, {} more by frame pointers; {} files' unwind tables unreadable",
                st.stacks,
                st.time.as_secs_f64() * 1e3,
                st.time.as_secs_f64() * 1e6 / st.stacks.max(1) as f64,
                st.frames,
                st.fp_frames,
                st.unreadable_files
            );
            if let Some(t) = u.tail_stats() {
                diag!(
                    "offwake-perf: stacks continued past their copy from the waiting thread: \
                     {}; not continued, the stack had changed: {}; not read, past the rate: {}",
                    t.extended,
                    t.changed,
                    t.skipped
                );
            }
            if let Some(l) = u.live_stats() {
                diag!(
                    "offwake-perf: blocked stacks read from their threads: {} in {:.3} ms ({} \
                     of them kept their frame-pointer walk, which went further); not used, the \
                     thread ran: {}, it waited elsewhere: {}, unreadable: {}; not read, past \
                     the rate: {}",
                    l.read,
                    l.read_time.as_secs_f64() * 1e3,
                    l.kept_fp,
                    l.ran,
                    l.moved,
                    l.unreadable,
                    l.skipped
                );
            }
            if let Some(i) = &interpreted {
                for (lang, c) in [("Python", i.counts), ("Java", i.java)] {
                    diag!(
                        "offwake-perf: {lang} frames read {} times in {:.3} ms ({:.1} us each); \
                         {} stacks given them, {} by a read made as the reader saw the switch-out",
                        c.walks,
                        c.walk_time.as_secs_f64() * 1e3,
                        c.walk_time.as_secs_f64() * 1e6 / c.walks.max(1) as f64,
                        c.spliced,
                        c.early
                    );
                }
            }
            let c = self.maps.census();
            diag!(
                "offwake-perf: maps held of {} processes ({} exited, {} with a stack that \
                 needs them), {} mappings; {} files registered",
                c.processes,
                c.exited,
                c.stored,
                c.mappings,
                c.files
            );
            if let Some(m) = u.memo_stats() {
                diag!(
                    "offwake-perf: user stacks recalled from an earlier walk instead of copied: \
                     {} of {}; walks remembered: {}",
                    m.hits,
                    m.hits + m.misses,
                    m.kept
                );
            }
        }
        let mut unwind_notes: Vec<String> = self
            .unwinder
            .as_ref()
            .map(Unwinder::notes)
            .unwrap_or_default();
        unwind_notes.extend(interpreted.iter().flat_map(|i| i.notes()));
        drop(interpreted);
        Staged {
            unwind_notes,
            maps: self.maps,
            aggregator: self.aggregator,
            cutter: self.cutter,
            settler: self.settler,
        }
    }

    /// Readies the stages before the first event: the unwind tables of
    /// the processes known at the start.
    pub(super) fn prepare(&mut self) {
        if let Some(u) = self.unwinder.as_mut() {
            u.prepare(&self.maps);
        }
    }

    /// Takes one event through every stage.
    pub(super) fn process(&mut self, mut event: Event) {
        self.reached(event.time);
        if !self.keep_user {
            self.aggregator.process(&event);
            return;
        }
        // Fork, exec, mmap and exit; other events are ignored.
        self.maps.observe(&event);
        if let Some(u) = self.unwinder.as_mut()
            && self.aggregator.may_keep_stack(&event)
        {
            u.unwind(&mut event, &mut self.maps);
        }
        strip_forged(&mut event);
        if let Some(i) = self.interpreted.as_ref()
            && (matches!(
                event.kind,
                EventKind::Exit(_) | EventKind::Comm(_) | EventKind::Fork(_)
            ) || self.aggregator.may_keep_stack(&event))
        {
            let mut interpreted = early::lock(i);
            interpreted.splice(&mut event, &mut self.maps);
            let found = self.early_runs.is_some() && interpreted.found_any();
            drop(interpreted);
            if found && let Some(runs) = self.early_runs.take() {
                self.early = EarlyReads::start(i.clone(), runs);
            }
        }
        let stored = self.aggregator.user_stacks_stored();
        self.aggregator.process_with(&event, &self.maps);
        // Only processes whose user stacks were stored need their memory
        // map, snapshotted from /proc the first time, while they live.
        for stack in self.aggregator.user_stacks_since(stored) {
            self.maps
                .ensure_covers(stack.tgid, stack.time, &stack.addrs, &stack.by_address());
        }
    }
}
