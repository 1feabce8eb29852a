//! Turning the aggregated entries into printable ones: every stack that
//! an entry uses is symbolized once, on a thread of its own that a signal
//! cuts short.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::aggregate::{self, Half, Level, StackRef, StackTable};
use crate::diag::diag;
use crate::kallsyms::Preload;
use crate::plan::Plan;
use crate::report::{
    CgroupName, Frame, Frames, NameSet, ResolvedEntry, ResolvedLevel, ResolvedWaker,
};
use crate::symbolize::{ProcessMaps, Symbol, Symbolizer, UserStack};
use crate::timing;

use super::progress::Progress;
use super::signals;

/// How long symbolization, told to stop, may take to come back before the
/// run ends without a report (a read that never returns).
const SYMBOLIZE_GRACE: Duration = Duration::from_secs(2);

/// What symbolization gives back.
type Symbolized = Result<Vec<ResolvedEntry>>;

/// A job for [`SymbolizeThread`].
pub(super) type Job = Box<dyn FnOnce() + Send>;

/// The thread symbolization runs on, made idle before tracing starts: a
/// run during which no thread can be made (every pid taken) still
/// symbolizes and reports what it traced. It runs its jobs in order: the
/// reports of `--interval`, then the last one.
#[derive(Clone)]
pub(super) struct SymbolizeThread {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl SymbolizeThread {
    /// Starts the thread, idle until it is given a job.
    pub(super) fn spawn() -> Result<SymbolizeThread> {
        let (jobs, job) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("symbolize".into())
            // As much stack as the main thread: DWARF is walked recursively
            // (to a bounded depth).
            .stack_size(8 << 20)
            .spawn(move || {
                // Ends when every sender is gone (the run ended).
                for job in job {
                    job();
                }
            })
            .context("starting the symbolization thread")?;
        Ok(SymbolizeThread { jobs })
    }

    /// Runs `job` on the thread, after the jobs given before; on this one
    /// if the thread is gone.
    pub(super) fn run(&self, job: Job) {
        if let Err(std::sync::mpsc::SendError(job)) = self.jobs.send(job) {
            job();
        }
    }

    /// Runs `job` on the thread and waits for what it gives, so that
    /// SIGINT or SIGTERM ends the run promptly whatever a traced process's
    /// files do: `job` is given a `stop` that says when a signal came (it
    /// then opens no more files), and if it still has not come back after
    /// [`SYMBOLIZE_GRACE`], the run ends without a report.
    pub(super) fn wait_for<T: Send + 'static>(
        &self,
        job: impl FnOnce(Stop) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let signalled = signals::signalled_from_now();
        let (tx, rx) = std::sync::mpsc::channel::<Result<T>>();
        self.run(Box::new(move || {
            let _ = tx.send(job(Box::new(signalled)));
        }));
        let mut stop_seen: Option<Instant> = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(done) => return done,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("symbolization failed")
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            }
            if signalled() && stop_seen.get_or_insert_with(Instant::now).elapsed() > SYMBOLIZE_GRACE
            {
                bail!(
                    "interrupted: symbolization did not stop within {} s (a read of a traced \
                     process's file did not return); no report",
                    SYMBOLIZE_GRACE.as_secs()
                );
            }
        }
    }
}

/// Says when symbolization should open no more files.
pub(super) type Stop = Box<dyn Fn() -> bool + Send>;

/// How the last stacks are named.
pub(super) struct Naming {
    pub(super) maps: ProcessMaps,
    pub(super) kallsyms: Option<Preload>,
    /// Where a recording's kernel text is now (see
    /// [`symbolize_entries`]).
    pub(super) kernel_text: Option<u64>,
    pub(super) module_offsets: bool,
}

impl Naming {
    /// As `plan` asks, with the maps, kernel symbols and (for a recording)
    /// kernel text the run ends with.
    pub(super) fn new(
        plan: &Plan,
        maps: ProcessMaps,
        kallsyms: Option<Preload>,
        kernel_text: Option<u64>,
    ) -> Naming {
        Naming {
            maps,
            kallsyms,
            kernel_text: kernel_text.filter(|_| plan.stacks.kernel),
            module_offsets: plan.module_offsets,
        }
    }
}

/// Symbolizes on `thread` (see [`SymbolizeThread::wait_for`]).
pub(super) fn symbolize_apart(
    thread: &SymbolizeThread,
    result: &Arc<aggregate::Aggregate>,
    naming: Naming,
) -> Symbolized {
    let result = Arc::clone(result);
    thread.wait_for(move |stop| symbolize_entries(&result, naming, stop))
}

/// Symbolizes every stack that some entry uses, once, then builds the
/// printable entries. Shows progress on stderr when it takes a while.
/// Once `stop` says so, no more files are opened. A recording's kernel
/// addresses are moved to where this kernel's text is (`kernel_text`).
pub(super) fn symbolize_entries(
    result: &aggregate::Aggregate,
    naming: Naming,
    stop: Stop,
) -> Result<Vec<ResolvedEntry>> {
    let names = name_stacks(result, naming, stop)?;
    for w in &names.warnings {
        diag!("{w}");
    }
    Ok(resolved_entries(result, &names))
}

/// The names of the stored stacks that some entry of `result` uses (see
/// [`symbolize_entries`]), and what naming met.
pub(super) fn name_stacks(
    result: &aggregate::Aggregate,
    naming: Naming,
    stop: Stop,
) -> Result<StackNames> {
    let Naming {
        maps,
        kallsyms,
        kernel_text,
        module_offsets,
    } = naming;
    let mut symbolizer = Symbolizer::new(maps, kallsyms)?;
    symbolizer.stop_when(stop);
    if let Some(text) = kernel_text {
        symbolizer.relocate_kernel(text);
    }
    let table: &StackTable = &result.stacks;
    let used = StacksUsed::by(result);
    // Each name once, however many stacks have it.
    let mut shared = NameSet::default();
    let (target_kernel, waker_kernel) = kernel_names(
        &mut symbolizer,
        table,
        [used.target_kernel, used.waker_kernel],
        &mut shared,
    );
    let user = user_names(
        &mut symbolizer,
        table,
        used.user,
        module_offsets,
        &mut shared,
    );
    Ok(StackNames {
        target_kernel,
        waker_kernel,
        user,
        warnings: symbolizer.warnings(),
    })
}

/// The frames of stored stacks, as [`name_stacks`] named them.
#[derive(Default)]
pub(super) struct StackNames {
    /// Kernel stacks of blocked threads, and of wakers (named apart: a
    /// waker's innermost frame is a return address).
    target_kernel: Names,
    waker_kernel: Names,
    user: Names,
    /// What naming met, for WARNING and NOTE lines (each with its prefix).
    pub(super) warnings: Vec<String>,
}

impl StackNames {
    /// The frames of stored stack `r` on `half` of an entry.
    pub(super) fn get(&self, r: StackRef, half: Half) -> Option<Arc<[Frame]>> {
        match (r, half) {
            (StackRef::Kernel(id), Half::Blocked) => self.target_kernel.get(&id).cloned(),
            (StackRef::Kernel(id), Half::Waker) => self.waker_kernel.get(&id).cloned(),
            (StackRef::User(id), _) => self.user.get(&id).cloned(),
            _ => None,
        }
    }
}

/// The frames of each stack symbolized, by its id in the [`StackTable`].
type Names = HashMap<u32, Arc<[Frame]>>;

/// The ids of the stacks that some entry uses.
struct StacksUsed {
    target_kernel: HashSet<u32>,
    waker_kernel: HashSet<u32>,
    user: HashSet<u32>,
}

impl StacksUsed {
    fn by(result: &aggregate::Aggregate) -> StacksUsed {
        // Target kernel stacks start at an exact IP; waker kernel stacks start at
        // a return address (into the caller of try_to_wake_up). A kernel stack
        // used in both roles is resolved both ways.
        let mut target_kernel: HashSet<u32> = HashSet::new();
        let mut waker_kernel: HashSet<u32> = HashSet::new();
        let mut user: HashSet<u32> = HashSet::new();
        let mut used = |blocked: [StackRef; 2], waker: [StackRef; 2]| {
            for (r, role) in [
                (blocked[0], &mut target_kernel),
                (waker[0], &mut waker_kernel),
            ] {
                if let StackRef::Kernel(id) = r {
                    role.insert(id);
                }
            }
            for r in [blocked[1], waker[1]] {
                if let StackRef::User(id) = r {
                    user.insert(id);
                }
            }
        };
        for e in &result.entries {
            let k = &e.key;
            used(
                [k.target_kernel, k.target_user],
                [k.waker_kernel, k.waker_user],
            );
        }
        for level in result.chains.iter().flatten() {
            if let Level::Waited {
                kernel,
                user,
                waker,
            } = *level
            {
                used([kernel, user], [waker.kernel, waker.user]);
            }
        }
        StacksUsed {
            target_kernel,
            waker_kernel,
            user,
        }
    }
}

/// The ids of `set`, in order.
fn sorted(set: HashSet<u32>) -> Vec<u32> {
    let mut v: Vec<u32> = set.into_iter().collect();
    v.sort_unstable();
    v
}

fn frames_of(names: Vec<Option<String>>, shared: &mut NameSet) -> Arc<[Frame]> {
    names
        .into_iter()
        .map(|n| Frame::from(n).shared(shared))
        .collect()
}

/// Symbolizes the kernel stacks of targets and of wakers, with one
/// progress counter for both.
fn kernel_names(
    symbolizer: &mut Symbolizer,
    table: &StackTable,
    [target_kernel, waker_kernel]: [HashSet<u32>; 2],
    shared: &mut NameSet,
) -> (Names, Names) {
    let total = target_kernel.len() + waker_kernel.len();
    let mut progress = Progress::new("symbolizing kernel stacks", total);
    let mut target_kernel_names: Names = HashMap::new();
    for id in sorted(target_kernel) {
        if let Some(addrs) = table.kernel.get(id as usize) {
            target_kernel_names.insert(id, frames_of(symbolizer.kernel_frames(addrs), shared));
        }
        progress.step();
    }
    let mut waker_kernel_names: Names = HashMap::new();
    for id in sorted(waker_kernel) {
        if let Some(addrs) = table.kernel.get(id as usize) {
            waker_kernel_names.insert(
                id,
                frames_of(symbolizer.kernel_return_frames(addrs), shared),
            );
        }
        progress.step();
    }
    progress.done();
    mark("symbolize.kernel");
    (target_kernel_names, waker_kernel_names)
}

/// Symbolizes the user stacks `user`, file by file, with a progress
/// counter for each step.
fn user_names(
    symbolizer: &mut Symbolizer,
    table: &StackTable,
    user: HashSet<u32>,
    module_offsets: bool,
    shared: &mut NameSet,
) -> Names {
    let stored: Vec<(u32, &aggregate::UserStack)> = sorted(user)
        .into_iter()
        .filter_map(|id| Some((id, table.user.get(id as usize)?)))
        .collect();
    let (user_ids, stacks): (Vec<u32>, Vec<UserStack<'_>>) = stored
        .iter()
        .map(|&(id, s)| {
            let stack = UserStack {
                tgid: s.tgid,
                time: s.time,
                addrs: &s.addrs,
                code: table.code(s),
            };
            (id, stack)
        })
        .unzip();
    let mut progress = Progress::new("reading files", 0);
    let resolved = symbolizer.user_stacks(&stacks, &mut |what, done, total| {
        if what != progress.what() {
            // A new step: end the line of the last one.
            progress.done();
            progress = Progress::new(what, total);
        }
        progress.at(done, total);
    });
    progress.done();
    mark("symbolize.user");
    user_ids
        .into_iter()
        .zip(resolved)
        .map(|(id, symbols)| {
            let frames = symbols
                .into_iter()
                .map(|s| user_frame(s, module_offsets).shared(shared))
                .collect();
            (id, frames)
        })
        .collect()
}

/// The printable entries, each stack given its names.
pub(super) fn resolved_entries(
    result: &aggregate::Aggregate,
    names: &StackNames,
) -> Vec<ResolvedEntry> {
    // Parts hidden by -U/-K were never stored (StackRef::Empty), and the
    // report omits them anyway.
    let frames = |r: StackRef, half: Half| -> Frames {
        let named = match r {
            StackRef::Empty => None,
            StackRef::Missed => return Frames::Missed,
            StackRef::Named(id) => result.stacks.named.get(id as usize).cloned(),
            StackRef::Kernel(_) | StackRef::User(_) => names.get(r, half),
        };
        Frames::Names(named.unwrap_or_else(|| Arc::new([])))
    };
    let chain = |e: &aggregate::Entry| -> Vec<ResolvedLevel> {
        let levels = result.chains.get(e.key.chain as usize);
        levels
            .into_iter()
            .flatten()
            .zip(e.overlap_us)
            .map(|(level, overlap_us)| match *level {
                Level::Waited {
                    kernel,
                    user,
                    waker,
                } => ResolvedLevel::Waited {
                    kernel: frames(kernel, Half::Blocked),
                    user: frames(user, Half::Blocked),
                    waker: ResolvedWaker {
                        comm: waker.comm,
                        tid: waker.tid,
                        context: waker.context,
                        kernel: frames(waker.kernel, Half::Waker),
                        user: frames(waker.user, Half::Waker),
                    },
                    overlap_us,
                },
                Level::End(end) => ResolvedLevel::End(end),
            })
            .collect()
    };
    result
        .entries
        .iter()
        .map(|e| ResolvedEntry {
            target_comm: e.key.target_comm,
            target_tid: e.key.target_tid,
            waker_comm: e.key.waker_comm,
            waker_tid: e.key.waker_tid,
            waker_context: e.key.waker_context,
            target_kernel: frames(e.key.target_kernel, Half::Blocked),
            target_user: frames(e.key.target_user, Half::Blocked),
            waker_kernel: frames(e.key.waker_kernel, Half::Waker),
            waker_user: frames(e.key.waker_user, Half::Waker),
            total_us: e.total_us,
            chain: chain(e),
            target_ns_tid: result.ns_tids.get(&e.key.target_tid).copied(),
            cgroup: result.cgroups.as_ref().map(|names| {
                names
                    .get(&e.key.cgroup)
                    .map_or(CgroupName::Unknown, |p| CgroupName::Path(Arc::clone(p)))
            }),
        })
        .collect()
}

/// Marks a step of the run's timing, unless naming goes on in the
/// background of tracing (its steps are not the run's).
fn mark(step: &'static str) {
    if !super::progress::silent() {
        timing::mark(step);
    }
}

/// How a user address's [`Symbol`] prints: its name, else `MODULE+0xOFF`
/// with `--module-offsets` when it is in a file, else `[unknown]`.
fn user_frame(symbol: Symbol, module_offsets: bool) -> Frame {
    match symbol {
        Symbol::Name(name) => Frame::Name(name),
        Symbol::Unresolved {
            module: Some(module),
            offset,
        } if module_offsets => Frame::InFile { module, offset },
        Symbol::Unresolved { .. } => Frame::Unknown,
    }
}
