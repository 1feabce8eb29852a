//! A run's entries merged by the names they print, as the run goes.
//!
//! Without `--interval`, the stack storage and the entries would fill on
//! a busy machine: every preemption lands at another instruction, so a
//! long run keeps finding new stacks. When either is nearly full, the
//! session cuts what was counted ([`Aggregator::cut`](super::Aggregator)),
//! names its stacks, and folds its entries in here, each stack now one of
//! [`StackTable::named`]: stacks that differ only in addresses within the
//! same functions become one. The report at the end is of them all, so
//! memory follows the distinct named stacks, not how long the run was.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::cgroups::CgroupPath;
use super::chain::{Level, WakerKey};
use super::entries::Entries;
use super::quiet::QuietTarget;
use super::{Aggregate, EntryKey, StackId, StackRef, StackTable, Stats};
use crate::report::{Frame, NameSet};

/// Which half of an entry a stack is on: kernel stacks are named apart
/// for wakers (their innermost frame is a return address).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Half {
    Blocked,
    Waker,
}

/// The entries of every cut so far, their stacks named.
#[derive(Debug)]
pub(crate) struct Settled {
    entries: Entries,
    named: NamedStacks,
    stats: Stats,
    quiet: Vec<QuietTarget>,
    ns_tids: FxHashMap<u32, u32>,
    cgroups: Option<FxHashMap<u64, CgroupPath>>,
    /// Cuts folded in.
    folded: usize,
}

impl Settled {
    /// Nothing yet, for chains of `levels` levels (see
    /// [`Entries::for_levels`]).
    pub(crate) fn new(levels: usize) -> Settled {
        Settled {
            entries: Entries::for_levels(levels),
            named: NamedStacks::default(),
            stats: Stats::default(),
            quiet: Vec::new(),
            ns_tids: FxHashMap::default(),
            cgroups: None,
            folded: 0,
        }
    }

    /// Cuts folded in so far.
    pub(crate) fn folded(&self) -> usize {
        self.folded
    }

    /// Distinct named stacks so far.
    pub(crate) fn named_len(&self) -> usize {
        self.named.stacks.len()
    }

    /// Folds in `cut`, whose stored stacks `name` names (`None`: not
    /// named, printed as missed). Its entries are summed with those that
    /// print the same; its counters are added; its quiet targets, which
    /// are the run's so far, replace the last.
    pub(crate) fn fold(
        &mut self,
        cut: Aggregate,
        name: &dyn Fn(StackRef, Half) -> Option<Arc<[Frame]>>,
    ) {
        let Aggregate {
            entries,
            stacks: _,
            chains,
            stats,
            quiet,
            ns_tids,
            cgroups,
        } = cut;
        self.folded += 1;
        self.stats.add(&stats);
        self.quiet = quiet;
        self.ns_tids.extend(ns_tids);
        if let Some(c) = cgroups {
            self.cgroups
                .get_or_insert_with(FxHashMap::default)
                .extend(c);
        }
        // A stack is named once per cut, however many entries use it.
        let mut renamed: FxHashMap<(u64, Half), StackRef> = FxHashMap::default();
        let mut rename = |r: StackRef, half: Half| -> StackRef {
            match r {
                StackRef::Empty | StackRef::Missed | StackRef::Named(_) => r,
                StackRef::Kernel(_) | StackRef::User(_) => {
                    let half = if matches!(r, StackRef::User(_)) {
                        Half::Blocked
                    } else {
                        half
                    };
                    *renamed
                        .entry((r.word(), half))
                        .or_insert_with(|| match name(r, half) {
                            Some(frames) => self.named.intern(&frames, &mut self.stats),
                            None => StackRef::Missed,
                        })
                }
            }
        };
        for e in entries {
            let k = e.key;
            let key = EntryKey {
                target_kernel: rename(k.target_kernel, Half::Blocked),
                target_user: rename(k.target_user, Half::Blocked),
                waker_kernel: rename(k.waker_kernel, Half::Waker),
                waker_user: rename(k.waker_user, Half::Waker),
                ..k
            };
            let levels = chains
                .get(k.chain as usize)
                .map(|levels| {
                    levels
                        .iter()
                        .map(|&level| match level {
                            Level::Waited {
                                kernel,
                                user,
                                waker,
                            } => Level::Waited {
                                kernel: rename(kernel, Half::Blocked),
                                user: rename(user, Half::Blocked),
                                waker: WakerKey {
                                    kernel: rename(waker.kernel, Half::Waker),
                                    user: rename(waker.user, Half::Waker),
                                    ..waker
                                },
                            },
                            Level::End(_) => level,
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.entries.add(key, levels, e.total_us, &e.overlap_us);
        }
        // The cut's own names go with it.
        self.named.names.forget_given();
    }

    /// The run's result: every cut's entries, their stacks named.
    pub(crate) fn into_aggregate(self) -> Aggregate {
        let mut stats = self.stats;
        stats.add(&Stats {
            bounded: self.entries.bounded,
            ..Stats::default()
        });
        let (entries, chains) = self.entries.into_parts();
        Aggregate {
            entries,
            stacks: StackTable::of_named(self.named.stacks),
            chains,
            stats,
            quiet: self.quiet,
            ns_tids: self.ns_tids,
            cgroups: self.cgroups,
        }
    }
}

/// Most distinct named stacks, and most frames in all: past either, a
/// new one is missed (and counted as a stack that did not fit). Typical
/// stacks have a few dozen frames; a name is held once however many
/// frames have it.
const MAX_NAMED: usize = 1 << 18;
const MAX_NAMED_FRAMES: usize = 1 << 22;

/// Each distinct named stack once, by [`StackRef::Named`].
#[derive(Debug, Default)]
struct NamedStacks {
    stacks: Vec<Arc<[Frame]>>,
    ids: FxHashMap<Arc<[Frame]>, StackId>,
    frames: usize,
    /// Their names, each held once.
    names: NameSet,
}

impl NamedStacks {
    /// `frames` as a named stack, stored once.
    fn intern(&mut self, frames: &Arc<[Frame]>, stats: &mut Stats) -> StackRef {
        if let Some(&id) = self.ids.get(frames) {
            return StackRef::Named(id);
        }
        let id = StackId::try_from(self.stacks.len()).ok();
        let Some(id) = id.filter(|_| {
            self.stacks.len() < MAX_NAMED && self.frames + frames.len() <= MAX_NAMED_FRAMES
        }) else {
            stats.missed_stacks += 1;
            return StackRef::Missed;
        };
        let names = &mut self.names;
        let frames: Arc<[Frame]> = frames.iter().map(|f| f.clone().shared(names)).collect();
        self.frames += frames.len();
        self.stacks.push(Arc::clone(&frames));
        self.ids.insert(frames, id);
        StackRef::Named(id)
    }
}
