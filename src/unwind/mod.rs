//! DWARF unwinding of the user stacks that samples copy
//! (`--call-graph dwarf`), done while tracing, as events are released in
//! time order: each copy is unwound into return addresses and dropped.
//!
//! Each process gets one framehop unwinder, whose modules follow the
//! process's map as [`ProcessMaps`] tells it at the sample's time (mmap,
//! exec and fork events, else `/proc`). Each file's unwind tables are read
//! once ([`tables`]), through the safe opener and within a budget. A
//! blocked thread whose stack goes on past its copy is unwound on from its
//! memory while it still waits ([`tail`]); a blocked thread whose event
//! copied nothing (tracefs) is read whole, registers included ([`live`]).

pub(crate) mod live;
pub(crate) mod memo;
mod tables;
pub(crate) mod tail;

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Module, Unwinder as _};
use rustc_hash::FxHashMap;

use crate::diag::escape::{Place, escape};
use crate::event::state::reported_state;
use crate::event::{Callchain, ChainCache, Event, EventKind, UserCopy};
use crate::symbolize::read::RunBudget;
use crate::symbolize::{Mapping, ProcessMaps};
use crate::sys::open::FileKey;
use memo::Memo;
use tables::UnwindTables;
use tail::Tails;

/// Most frames one stack unwinds to (a deeper one is cut there).
pub(crate) const MAX_FRAMES: usize = 512;

/// Most bytes of unwind tables read from one file, and from all files of a
/// run: they stay in memory while tracing. (node's `.eh_frame` and its
/// index, `.eh_frame_hdr`, are 3.3 MiB.)
const TABLES_PER_FILE: u64 = 32 << 20;
const TABLES_PER_RUN: u64 = 64 << 20;

/// One process's unwinder and the mappings it holds as modules.
struct Space {
    /// The map version the modules were last brought up to date with.
    version: Option<u64>,
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    /// framehop's rules by address, one cache per process: a cache shared
    /// by a parent and its forked child (same addresses, other modules)
    /// would evict one's rules for the other's at every sample.
    cache: CacheX86_64,
    /// By start address: the mapping each module was made of.
    modules: HashMap<u64, ModuleKey>,
    /// Updates of the modules that may be made now
    /// ([`UPDATES_PER_SECOND`]).
    updates: Rate,
}

/// How often a process's modules are brought up to date with its map, at
/// most, once a burst of [`UPDATE_BURST`] is spent: each update goes
/// through all its mappings, and a process that maps and unmaps files
/// without end changes its map between any two of its samples. Between
/// updates its stacks are unwound with the modules it had.
const UPDATES_PER_SECOND: u64 = 100;
const UPDATE_BURST: u64 = 64;

/// Things allowed `per_second` of trace time, after a burst of `burst`.
pub(crate) struct Rate {
    per_second: u64,
    burst: u64,
    /// What may be done now, in billionths, and up to when in trace time
    /// that was counted.
    credit: u64,
    counted_to: u64,
}

const NS: u64 = 1_000_000_000;

impl Rate {
    /// A full burst, counted from trace time `from`.
    pub(crate) fn new(per_second: u64, burst: u64, from: u64) -> Rate {
        Rate {
            per_second,
            burst,
            credit: burst * NS,
            counted_to: from,
        }
    }

    /// One more allowed at trace time `time`, within the rate.
    pub(crate) fn allow(&mut self, time: u64) -> bool {
        let since = time.saturating_sub(self.counted_to);
        self.counted_to = self.counted_to.max(time);
        self.credit = self
            .credit
            .saturating_add(since.saturating_mul(self.per_second))
            .min(self.burst * NS);
        if self.credit < NS {
            return false;
        }
        self.credit -= NS;
        true
    }
}

/// What makes a module: where a file is mapped, and which file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModuleKey {
    end: u64,
    pgoff: u64,
    file: Option<FileKey>,
}

/// Counters for the run's notes and for measuring.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UnwindStats {
    /// Stacks unwound.
    pub(crate) stacks: u64,
    /// Frames they gave, and frames taken from the frame-pointer chain
    /// past where DWARF unwinding stopped.
    pub(crate) frames: u64,
    pub(crate) fp_frames: u64,
    /// Time spent unwinding (modules included).
    pub(crate) time: Duration,
    /// Files whose unwind tables could not be read.
    pub(crate) unreadable_files: u64,
    /// Stacks unwound with a process's modules as they were, its map
    /// having changed too often to follow each change.
    pub(crate) late_updates: u64,
}

/// Unwinds the user stack copies of released events.
pub(crate) struct Unwinder {
    spaces: FxHashMap<u32, Space>,
    /// Unwind tables by file; `None` for a file that gave none.
    tables: HashMap<FileKey, Option<Arc<UnwindTables>>>,
    run: RunBudget,
    chains: ChainCache,
    /// Entries of the chain being built, as [`ChainCache`] keys them.
    entries: Vec<u8>,
    stats: UnwindStats,
    /// The paths of the first files whose tables could not be read.
    unreadable: Vec<String>,
    /// Reads the rest of a blocked thread's stack, when tracing live.
    tails: Option<Tails>,
    /// Where walks are remembered for the reader to recall.
    memo: Option<Memo>,
    /// The words the last walk read.
    reads: Vec<(u16, u64)>,
    /// Reads the stacks of blocked threads whose events copied none.
    live: Option<live::LiveStacks>,
}

/// Most paths a note names.
const NOTE_PATHS: usize = 3;

impl Default for Unwinder {
    fn default() -> Unwinder {
        Unwinder::new()
    }
}

impl Unwinder {
    pub(crate) fn new() -> Unwinder {
        Unwinder {
            spaces: FxHashMap::default(),
            tables: HashMap::new(),
            run: RunBudget::new(TABLES_PER_FILE, TABLES_PER_RUN),
            chains: ChainCache::new(),
            entries: Vec::new(),
            stats: UnwindStats::default(),
            unreadable: Vec::new(),
            tails: None,
            memo: None,
            reads: Vec::new(),
            live: None,
        }
    }

    /// Unwinds the stacks of blocked threads whose events copied none,
    /// read from the threads with `live`.
    pub(crate) fn with_live(mut self, live: live::LiveStacks) -> Unwinder {
        self.live = Some(live);
        self
    }

    /// What reading blocked threads gave, if they were read.
    pub(crate) fn live_stats(&self) -> Option<live::LiveStats> {
        self.live.as_ref().map(|l| l.stats)
    }

    /// Remembers each walk in `memo`, for the reader to recall.
    pub(crate) fn with_memo(mut self, memo: Memo) -> Unwinder {
        self.memo = Some(memo);
        self
    }

    /// Unwinds a blocked thread's stack on past its copy with `tails`.
    pub(crate) fn with_tails(mut self, tails: Tails) -> Unwinder {
        self.tails = Some(tails);
        self
    }

    /// What the tails of stacks gave, if they were read.
    pub(crate) fn tail_stats(&self) -> Option<tail::TailStats> {
        self.tails.as_ref().map(|t| t.stats)
    }

    pub(crate) fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// How often the reader recalled walks, if they were remembered.
    pub(crate) fn memo_stats(&self) -> Option<memo::MemoStats> {
        self.memo.as_ref().map(Memo::stats)
    }

    /// The NOTE lines of the unwinding: files whose unwind tables could
    /// not be read, and reading past copies that ended.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.unreadable_note()
            .into_iter()
            .chain(self.late_note())
            .chain(self.tails.as_ref().and_then(Tails::note))
            .chain(self.live.as_ref().and_then(live::LiveStacks::note))
            .collect()
    }

    /// The NOTE line on stacks unwound with a map not brought up to date.
    fn late_note(&self) -> Option<String> {
        let n = self.stats.late_updates;
        (n > 0).then(|| {
            format!(
                "NOTE: {n} user stacks were unwound with their process's memory map as last \
                 followed: it changed more than {UPDATES_PER_SECOND} times a second \
                 (frames in code mapped since may be missing)."
            )
        })
    }

    /// The NOTE line that says which files' code was walked by frame
    /// pointers only, when some were (their paths quoted: traced processes
    /// choose them).
    fn unreadable_note(&self) -> Option<String> {
        let n = self.stats.unreadable_files;
        if n == 0 {
            return None;
        }
        let shown: Vec<String> = self
            .unreadable
            .iter()
            .map(|p| escape(p.as_bytes(), Place::Quoted).into_owned())
            .collect();
        let more = n.saturating_sub(shown.len() as u64);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "NOTE: user stacks were walked by frame pointers only through {n} file(s) whose \
             unwind tables could not be read (over the budget, or cut short): {}{more}.",
            shown.join(", ")
        ))
    }

    /// Reads the unwind tables of the processes `maps` knows already (the
    /// targets of `-p`), before their first stacks come: a stack read from
    /// a waiting thread must reach the unwinder before the thread wakes.
    pub(crate) fn prepare(&mut self, maps: &ProcessMaps) {
        for tgid in maps.known() {
            self.update_space(tgid, 0, maps);
        }
    }

    /// Replaces the user part of `event`'s stack by the unwinding of its
    /// user stack copy, and drops the copy. Events without one pass
    /// unchanged. `maps` must have seen every event before this one.
    pub(crate) fn unwind(&mut self, event: &mut Event, maps: &mut ProcessMaps) {
        // Only a thread that blocked keeps its stack still while it waits.
        let (tgid, blocked, stack, copy) = match &mut event.kind {
            EventKind::Switch(s) => (
                s.prev_tgid,
                reported_state(s.prev_state).map(|_| s.prev_tid),
                &mut s.stack,
                &mut s.user_copy,
            ),
            EventKind::Waking(w) => (w.waker_tgid, None, &mut w.stack, &mut w.user_copy),
            // A running thread's stack is its copy only.
            EventKind::OnCpu(s) => (s.tgid, None, &mut s.stack, &mut s.user_copy),
            // Nothing of a process is unwound after its exit (events come
            // in time order); a reused pid starts afresh.
            EventKind::Exit(e) if e.tid == e.tgid => {
                self.spaces.remove(&e.tgid);
                return;
            }
            _ => return,
        };
        let started = Instant::now();
        let from_thread = copy.is_none();
        let Some(copy) = copy.take().or_else(|| {
            let (tid, live) = (blocked?, self.live.as_mut()?);
            live.copy(tgid, tid, event.time, stack.user()).map(Box::new)
        }) else {
            return;
        };
        maps.ensure_known(tgid, event.time);
        let current = self.update_space(tgid, event.time, maps);
        let Some(space) = self.spaces.get_mut(&tgid) else {
            return;
        };
        let mut walked = walk_guarded(space, &copy, &mut self.reads);
        if let (Some(memo), true) = (&self.memo, current && walked.repeatable) {
            // What the reader recalls replaces the whole user stack: only
            // a walk that took nothing from elsewhere is kept.
            if walked.complete || stack.user().is_empty() {
                let start = memo::Start {
                    tgid,
                    ip: copy.ip,
                    sp: copy.sp,
                    bp: copy.bp,
                };
                let ran_out_at = walked.read_past_end.then_some(copy.stack.len());
                memo.remember(start, event.time, &self.reads, &walked.frames, ran_out_at);
            }
        }
        if let (Some(tid), Some(tails)) = (blocked, self.tails.as_mut())
            && walked.ran_out
            && let Some(longer) = tails.longer(tid, event.time, &copy)
        {
            walked = walk_guarded(space, &longer, &mut self.reads);
        }
        let Walk {
            mut frames,
            complete,
            ..
        } = walked;
        let dwarf_frames = frames.len();
        let joined = !complete && extend_from_fp(&mut frames, stack.user());
        // A stack read from the thread replaces the kernel's frame-pointer
        // walk unless it stopped short of it.
        if from_thread && !complete && !joined && frames.len() <= stack.user().len() {
            if let Some(l) = self.live.as_mut() {
                l.stats.kept_fp += 1;
            }
            self.stats.time += started.elapsed();
            return;
        }
        self.stats.stacks += 1;
        self.stats.frames += dwarf_frames as u64;
        self.stats.fp_frames += (frames.len() - dwarf_frames) as u64;
        *stack = self.chain(stack.kernel(), &frames);
        self.stats.time += started.elapsed();
    }

    /// The chain of these parts, shared with earlier equal ones.
    fn chain(&mut self, kernel: &[u64], user: &[u64]) -> Callchain {
        self.entries.clear();
        for ip in kernel {
            self.entries.extend_from_slice(&ip.to_ne_bytes());
        }
        // A separator no address can be: kernel and user parts stay apart.
        self.entries.extend_from_slice(&u64::MAX.to_ne_bytes());
        for ip in user {
            self.entries.extend_from_slice(&ip.to_ne_bytes());
        }
        self.chains.get(&self.entries, |k, u| {
            k.extend_from_slice(kernel);
            u.extend_from_slice(user);
        })
    }

    /// Brings `tgid`'s modules up to what its map holds at `time`. False
    /// when they are not (the map is unknown, or changes too often).
    fn update_space(&mut self, tgid: u32, time: u64, maps: &ProcessMaps) -> bool {
        let version = maps.version(tgid);
        let space = self.spaces.entry(tgid).or_insert_with(|| Space {
            version: None,
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            modules: HashMap::new(),
            updates: Rate::new(UPDATES_PER_SECOND, UPDATE_BURST, time),
        });
        if space.version == version && version.is_some() {
            return true;
        }
        if !space.updates.allow(time) {
            self.stats.late_updates += 1;
            return false;
        }
        space.version = version;
        let wanted: Vec<&Mapping> = maps
            .mapped_at(tgid, time)
            .into_iter()
            .filter(|m| !m.is_vdso())
            .collect();
        let key = |m: &Mapping| ModuleKey {
            end: m.end,
            pgoff: m.pgoff,
            file: m.file,
        };
        // Modules whose mapping is gone or changed go.
        let by_start: FxHashMap<u64, ModuleKey> =
            wanted.iter().map(|m| (m.start, key(m))).collect();
        space.modules.retain(|start, k| {
            let kept = by_start.get(start) == Some(k);
            if !kept {
                space.unwinder.remove_module(*start);
            }
            kept
        });
        for m in wanted {
            if space.modules.contains_key(&m.start) {
                continue;
            }
            // Recorded even when it gives no module: not tried again
            // while the mapping stays.
            space.modules.insert(m.start, key(m));
            let Some(tables) = tables_of(
                &mut self.tables,
                &mut self.run,
                &mut self.stats,
                &mut self.unreadable,
                maps,
                tgid,
                m,
            ) else {
                continue;
            };
            let Some(base) = tables.base_avma(m.start, m.end, m.pgoff) else {
                continue;
            };
            space.unwinder.add_module(Module::new(
                m.path.to_string(),
                m.start..m.end,
                base,
                tables.section_info(),
            ));
        }
        version.is_some()
    }
}

/// The unwind tables of the file `m` of `tgid` maps, read once per file.
fn tables_of(
    tables: &mut HashMap<FileKey, Option<Arc<UnwindTables>>>,
    run: &mut RunBudget,
    stats: &mut UnwindStats,
    unreadable: &mut Vec<String>,
    maps: &ProcessMaps,
    tgid: u32,
    m: &Mapping,
) -> Option<Arc<UnwindTables>> {
    if let Some(known) = m.file.and_then(|key| tables.get(&key)) {
        return known.clone();
    }
    let opened = maps.open_file(tgid, m).ok()?;
    tables
        .entry(opened.key)
        .or_insert_with(|| {
            let read = UnwindTables::read(&opened, run).map(Arc::new);
            if read.is_none() {
                stats.unreadable_files += 1;
                if unreadable.len() < NOTE_PATHS {
                    unreadable.push(m.path.to_string());
                }
            }
            read
        })
        .clone()
}

/// What unwinding a copy gave.
#[derive(Debug, Default)]
struct Walk {
    /// The IP, then return addresses.
    frames: Vec<u64>,
    /// The unwinder reached the stack's end (or the cap), rather than
    /// stopping where it could not go on.
    complete: bool,
    /// It stopped for a word past the end of the copy.
    ran_out: bool,
    /// It asked for a word past the end of the copy (and stopped there,
    /// or went on without it).
    read_past_end: bool,
    /// Every word it read was in the copy, at an offset a [`Memo`] keeps,
    /// or past its end: the walk is a function of the registers, of
    /// `reads` and of where the copy ends.
    repeatable: bool,
}

/// [`walk`], in `space`: framehop parses tables a traced process controls,
/// and a panic in it costs this one stack, not the run.
fn walk_guarded(space: &mut Space, copy: &UserCopy, reads: &mut Vec<(u16, u64)>) -> Walk {
    catch_unwind(AssertUnwindSafe(|| {
        walk(&space.unwinder, &mut space.cache, copy, reads)
    }))
    .unwrap_or_default()
}

/// Unwinds `copy`, noting in `reads` each word read (its byte offset from
/// the stack pointer, and the word).
fn walk(
    unwinder: &UnwinderX86_64<Arc<[u8]>>,
    cache: &mut CacheX86_64,
    copy: &UserCopy,
    reads: &mut Vec<(u16, u64)>,
) -> Walk {
    let end = copy.sp.saturating_add(copy.stack.len() as u64);
    let mut past_end = false;
    let mut read_past_end = false;
    let mut repeatable = true;
    reads.clear();
    let mut read_stack = |addr: u64| {
        let word = read_word(copy, addr);
        past_end = word.is_err() && addr >= end;
        read_past_end |= past_end;
        match (word, u16::try_from(addr.wrapping_sub(copy.sp))) {
            (Ok(w), Ok(at)) => reads.push((at, w)),
            // Past the end: the walk then depends on where the copy ends.
            (Err(()), _) if past_end => {}
            _ => repeatable = false,
        }
        word
    };
    let regs = UnwindRegsX86_64::new(copy.ip, copy.sp, copy.bp);
    let mut iter = unwinder.iter_frames(copy.ip, regs, cache, &mut read_stack);
    let mut frames = Vec::new();
    let complete = loop {
        match iter.next() {
            Ok(Some(frame)) if frames.len() < MAX_FRAMES => frames.push(frame.address()),
            // The stack's end, or the cap.
            Ok(_) => break true,
            Err(_) => break false,
        }
    };
    Walk {
        frames,
        complete,
        ran_out: !complete && past_end,
        read_past_end,
        repeatable,
    }
}

/// The word at `addr` in the copied stack.
fn read_word(copy: &UserCopy, addr: u64) -> Result<u64, ()> {
    let at = usize::try_from(addr.checked_sub(copy.sp).ok_or(())?).map_err(|_| ())?;
    let end = at.checked_add(8).ok_or(())?;
    let bytes = copy.stack.get(at..end).ok_or(())?;
    Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
}

/// Where DWARF unwinding stopped early (the copy ended, or a frame had no
/// rule), the frame-pointer chain's frames past the last unwound frame,
/// when that chain holds it: code built with frame pointers can lead it
/// past the end of the copy. True when the two were joined so.
fn extend_from_fp(frames: &mut Vec<u64>, fp: &[u64]) -> bool {
    let Some(&last) = frames.last() else {
        frames.extend(fp.iter().take(MAX_FRAMES));
        return false;
    };
    let Some(at) = fp.iter().position(|&a| a == last) else {
        return false;
    };
    let room = MAX_FRAMES.saturating_sub(frames.len());
    frames.extend(fp[at + 1..].iter().take(room));
    true
}

#[cfg(test)]
mod tests;
