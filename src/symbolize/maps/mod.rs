//! Per-process memory maps over time: a `/proc/PID/maps` snapshot when a
//! process is first seen, then fork, exec, mmap and exit events, so that a
//! user address can be resolved against the map as it was when sampled, even
//! after the process has exited. Each process's root directory is held open
//! from when it is first seen, so that its files are found inside its own
//! root after it exits, and never through the host's paths.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::debugfile::{BuildIdDirs, build_id};
use super::unread::Unread;
use crate::event::{CommChange, Event, EventKind, Exit, Fork, Mmap};
use crate::sys::open::{Dir, FileKey, OpenError, Opened, Scope, open_magic};
use crate::sys::vma::{Maps, TimeBudget};

/// One executable mapping, valid during `[from, until)` (nanoseconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    /// Exclusive end address.
    pub(crate) end: u64,
    /// File offset of `start`.
    pub(crate) pgoff: u64,
    /// Path as the kernel printed it, without a ` (deleted)` suffix; may be
    /// `[vdso]`. Shared by the mappings of one file in a process.
    pub(crate) path: Arc<str>,
    /// The kernel reported the file as deleted (replaced on disk).
    pub(crate) deleted: bool,
    /// The mapped file's device and inode, when known: a file opened later
    /// by path must be this one.
    pub(crate) file: Option<FileKey>,
    /// The mapped file's GNU build-id, when a recording gave it: a file
    /// with this build-id is the one mapped, wherever it is found.
    pub(crate) build_id: Option<Arc<[u8]>>,
    pub(crate) from: u64,
    pub(crate) until: u64,
}

impl Mapping {
    /// True for the kernel-provided vDSO.
    pub(crate) fn is_vdso(&self) -> bool {
        &*self.path == "[vdso]"
    }

    /// A mapping of `path` as the kernel prints it (a ` (deleted)` suffix
    /// is stripped and remembered), valid from `from` on.
    fn new(start: u64, end: u64, pgoff: u64, path: &str, from: u64) -> Mapping {
        Mapping {
            start,
            end,
            pgoff,
            path: Arc::from(strip_deleted(path)),
            deleted: path.ends_with(" (deleted)"),
            file: None,
            build_id: None,
            from,
            until: u64::MAX,
        }
    }

    /// True when the mapping is in place at `time`.
    fn valid_at(&self, time: u64) -> bool {
        self.from <= time && time < self.until
    }

    fn contains(&self, time: u64, addr: u64) -> bool {
        self.valid_at(time) && self.start <= addr && addr < self.end
    }
}

#[derive(Debug, Default, Clone)]
struct Process {
    /// In the order learnt, which is chronological: later entries are newer.
    mappings: Vec<Mapping>,
    exited: bool,
    /// Time of the last exec seen (0: none): without mmap events, mappings
    /// read from /proc are valid from then on.
    image_since: u64,
    /// Without mmap events: an exec replaced the image and /proc must be
    /// read again.
    stale: bool,
    /// Event time of the last re-read of /proc (rate limit).
    reread_at: Option<u64>,
    /// Its root directory (an index into [`Roots`]), when it was seen alive.
    root: Option<usize>,
    /// When /proc was last read for it (CLOCK_MONOTONIC, as event times):
    /// an exec older than that is already in what was read.
    read_at: u64,
    /// Bumped whenever `mappings` changes, so that a user of the current
    /// map (the unwinder) knows when to look again.
    version: u64,
    /// Its pid in its own namespace and its effective uid, read while it
    /// lived: which perf map is its, and who must own it.
    perf_map: Option<(u32, u32)>,
    /// Its perf map, opened when its exit was seen: read later through
    /// this descriptor, it is what the runtime wrote, even if the file is
    /// removed meanwhile or its name taken by another process.
    held_perf_map: Option<Arc<Opened>>,
    /// The paths of its mappings, each held once: a process that maps one
    /// file again and again holds its path once.
    paths: HashSet<Arc<str>>,
    /// The mappings (start, from) that a stored stack has an address in:
    /// kept when the history is compacted.
    used: HashSet<(u64, u64)>,
    /// `mappings` is compacted ([`ProcessMaps::compact`]) when it grows
    /// to this length (0: [`COMPACT_FIRST`]).
    compact_at: usize,
    /// When it was last compacted, and when /proc was last read for
    /// that (event time).
    compacted_at: u64,
    compact_read_at: Option<u64>,
    /// Executable mappings not followed: the history was full.
    unfollowed: u64,
    /// A record of it came (a fork, comm, mapping or exit): it was traced.
    recorded: bool,
}

impl Process {
    /// `mapping`, its path shared with the process's other mappings of it.
    fn push(&mut self, mut mapping: Mapping) {
        match self.paths.get(&mapping.path) {
            Some(path) => mapping.path = path.clone(),
            None => {
                self.paths.insert(mapping.path.clone());
            }
        }
        self.mappings.push(mapping);
        self.version += 1;
    }
}

/// Most mappings one process's history holds. Without munmap records, a
/// process that maps files at new addresses again and again would grow it
/// without end, and each sample's unwinding would go through all of it.
const MAX_MAPPINGS: usize = 4096;

/// The length at which a history is first compacted; then at twice what
/// compacting left, so that compacting costs a constant per mapping.
const COMPACT_FIRST: usize = 256;

/// Most bytes of `/proc/PID/maps` read at once: a process chooses how many
/// mappings it has and how long their paths are.
const MAX_MAPS_TEXT: u64 = 8 << 20;

/// The root directories of the processes seen, each held open once.
#[derive(Debug, Default)]
struct Roots {
    dirs: Vec<Dir>,
    /// By the directory's identity and its mount namespace.
    index: HashMap<(FileKey, u64), usize>,
    /// True when the processes are from a recording: a process of that
    /// pid now is another, whose root is never taken.
    recorded: bool,
}

/// Most distinct process roots held open; processes beyond are resolved
/// only while they live.
const MAX_ROOTS: usize = 256;

impl Roots {
    /// Opens the root of live process `tgid`; `None` when it is gone.
    fn capture(&mut self, tgid: u32) -> Option<usize> {
        if self.recorded {
            return None;
        }
        let dir = Dir::open(Path::new(&format!("/proc/{tgid}/root")), Scope::Root).ok()?;
        let key = dir.key().ok()?;
        let ns = std::fs::metadata(format!("/proc/{tgid}/ns/mnt"))
            .map(|m| m.ino())
            .unwrap_or(0);
        if let Some(&i) = self.index.get(&(key, ns)) {
            return Some(i);
        }
        if self.dirs.len() >= MAX_ROOTS {
            return None;
        }
        self.dirs.push(dir);
        self.index.insert((key, ns), self.dirs.len() - 1);
        Some(self.dirs.len() - 1)
    }
}

/// The memory-map history of every process seen.
#[derive(Debug)]
pub(crate) struct ProcessMaps {
    procs: HashMap<u32, Process>,
    roots: Roots,
    /// This tool's own root.
    own_root: Option<Dir>,
    /// Roots taken before the process's first event (see
    /// [`ProcessMaps::hold_own_root_for`]).
    early_roots: HashMap<u32, usize>,
    /// Perf maps held open for processes that exited (at most
    /// [`MAX_HELD_PERF_MAPS`]).
    held_perf_maps: usize,
    /// False when the backend delivers no mmap events (tracefs): maps are
    /// then re-read from /proc after an exec, and when a stack's address is
    /// not covered by what is known.
    mmap_events: bool,
    /// The processes are from a recording (`-i`): nothing of them is read
    /// from /proc, whose pids are other processes now; their files are
    /// found by the paths, device and inode the recording gave, or by
    /// build-id.
    recorded: bool,
    /// Build-ids of mapped files by path, as a recording listed them.
    build_ids: HashMap<String, Arc<[u8]>>,
    /// Where a recording's files are looked for by build-id.
    build_id_dirs: BuildIdDirs,
    /// The time that reading maps as text to compact a history may take.
    text_budget: TimeBudget,
}

impl Default for ProcessMaps {
    fn default() -> ProcessMaps {
        ProcessMaps::new()
    }
}

/// Most perf maps of exited processes held open.
const MAX_HELD_PERF_MAPS: usize = 256;

/// Least event time between two re-reads of one process's /proc maps.
const REREAD_INTERVAL_NS: u64 = 100_000_000;

impl ProcessMaps {
    pub(crate) fn new() -> ProcessMaps {
        ProcessMaps {
            procs: HashMap::new(),
            roots: Roots::default(),
            own_root: Dir::open(Path::new("/"), Scope::Root).ok(),
            early_roots: HashMap::new(),
            held_perf_maps: 0,
            mmap_events: true,
            recorded: false,
            build_ids: HashMap::new(),
            build_id_dirs: BuildIdDirs::default(),
            text_budget: TimeBudget::new(Duration::from_millis(100), 0.02),
        }
    }

    /// Maps for the processes of a recording: learnt from its mmap, fork,
    /// exec and exit records only, and `build_ids` (by path) for its files.
    pub(crate) fn recorded(build_ids: HashMap<String, Arc<[u8]>>) -> ProcessMaps {
        let mut maps = ProcessMaps::new();
        maps.recorded = true;
        maps.roots.recorded = true;
        maps.build_ids = build_ids;
        maps.build_id_dirs = BuildIdDirs::system();
        maps
    }

    /// Says whether the backend delivers mmap events (the tracefs backend
    /// does not).
    pub(crate) fn set_mmap_events(&mut self, delivered: bool) {
        self.mmap_events = delivered;
    }

    /// Makes sure `tgid`'s map can resolve `addrs`, sampled at `time`, as
    /// far as can be known: snapshots an unknown process (as
    /// [`ProcessMaps::ensure_known`]); without mmap events, also re-reads
    /// /proc after an exec, or when an address is not covered (a library
    /// loaded since the last read), at most every 100 ms of event time.
    /// The mappings that hold `addrs` are kept from then on, for the
    /// stack to be symbolized.
    pub(crate) fn ensure_covers(&mut self, tgid: u32, time: u64, addrs: &[u64]) {
        self.cover(tgid, time, addrs);
        let Some(p) = self.procs.get(&tgid) else {
            return;
        };
        let used: Vec<(u64, u64)> = addrs
            .iter()
            .filter_map(|&a| p.mappings.iter().rev().find(|m| m.contains(time, a)))
            .map(|m| (m.start, m.from))
            .collect();
        if let Some(p) = self.procs.get_mut(&tgid) {
            p.used.extend(used);
        }
    }

    fn cover(&mut self, tgid: u32, time: u64, addrs: &[u64]) {
        if !self.procs.contains_key(&tgid) {
            self.snapshot_if_unknown(tgid, 0);
            return;
        }
        if self.mmap_events {
            return;
        }
        let Some(p) = self.procs.get(&tgid) else {
            return;
        };
        if p.exited {
            return;
        }
        let due = p
            .reread_at
            .is_none_or(|t| time.saturating_sub(t) >= REREAD_INTERVAL_NS);
        let uncovered = addrs.iter().any(|&a| self.lookup(tgid, time, a).is_none());
        if p.stale || (uncovered && due) {
            self.reread(tgid, time);
        }
    }

    /// Adds what /proc shows now and was not known, valid from the last
    /// exec; marks the process gone when it cannot be read.
    fn reread(&mut self, tgid: u32, time: u64) {
        let text = read_maps(tgid);
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        p.stale = false;
        p.reread_at = Some(time);
        p.read_at = crate::sys::host::monotonic_ns();
        // A zombie's map reads empty: it is gone too.
        let Some(text) = text.filter(|t| !t.is_empty()) else {
            p.exited = true;
            return;
        };
        for m in parse_maps(&text, p.image_since) {
            let known = p.mappings.iter().any(|k| {
                k.until == u64::MAX
                    && (k.start, k.end, k.pgoff, &k.path) == (m.start, m.end, m.pgoff, &m.path)
            });
            if !known && p.mappings.len() < MAX_MAPPINGS {
                p.push(m);
            }
        }
    }

    /// Takes this process's root as that of `tgid`, for when it is first
    /// seen: a command this process started, which began in its root and
    /// may be gone by then.
    pub(crate) fn hold_own_root_for(&mut self, tgid: u32) {
        if let Some(root) = self.roots.capture(std::process::id()) {
            self.early_roots.insert(tgid, root);
        }
    }

    /// Makes sure `tgid` has a map: if it has none yet, snapshots
    /// `/proc/<tgid>/maps` as of `time`. Cheap when already known.
    ///
    /// The snapshot is taken as valid since the beginning of time: it is the
    /// best guess for samples older than the first event seen for `tgid`. A
    /// process that cannot be read (gone already) gets an empty history, so
    /// its addresses resolve to `[unknown]` without re-reading `/proc`.
    pub(crate) fn ensure_known(&mut self, tgid: u32, time: u64) {
        let _ = time;
        self.snapshot_if_unknown(tgid, 0);
    }

    fn snapshot_if_unknown(&mut self, tgid: u32, from: u64) {
        if self.procs.contains_key(&tgid) {
            return;
        }
        if self.recorded {
            // Known from the recording's records only.
            self.procs.insert(tgid, Process::default());
            return;
        }
        // The root first: maps read after it are of a process that had it.
        let early = self.early_roots.remove(&tgid);
        let root = self.roots.capture(tgid).or(early);
        // A zombie's map reads empty, as a kernel thread's: neither has
        // user frames to place.
        let proc = match read_maps(tgid).filter(|t| !t.is_empty()) {
            Some(text) => {
                let mut p = Process {
                    image_since: from,
                    root,
                    read_at: crate::sys::host::monotonic_ns(),
                    perf_map: crate::sys::proc::ns_pid_and_euid(tgid),
                    ..Process::default()
                };
                for m in parse_maps(&text, from) {
                    if p.mappings.len() < MAX_MAPPINGS {
                        p.push(m);
                    } else {
                        p.unfollowed += 1;
                    }
                }
                p
            }
            None => Process {
                exited: true,
                root,
                ..Process::default()
            },
        };
        self.procs.insert(tgid, proc);
    }

    /// Applies a fork (child copies its parent's map), exec (map cleared),
    /// mmap or exit event. Other events are ignored.
    pub(crate) fn observe(&mut self, event: &Event) {
        let time = event.time;
        match &event.kind {
            EventKind::Fork(f) if f.tgid != f.parent_tgid => self.observe_fork(f, time),
            EventKind::Comm(c) if c.exec => self.observe_exec(c.tgid, time),
            EventKind::Mmap(m) => self.observe_mmap(m, time),
            EventKind::Exit(e) if e.tid == e.tgid => self.observe_exit(e.tgid),
            _ => {}
        }
        if let EventKind::Fork(Fork { tgid, .. })
        | EventKind::Comm(CommChange { tgid, .. })
        | EventKind::Mmap(Mmap { tgid, .. })
        | EventKind::Exit(Exit { tgid, .. }) = &event.kind
            && let Some(p) = self.procs.get_mut(tgid)
        {
            p.recorded = true;
        }
    }

    /// A new process `f.tgid`: it inherits its parent's mappings and root.
    fn observe_fork(&mut self, f: &Fork, time: u64) {
        self.snapshot_if_unknown(f.parent_tgid, 0);
        let inherited: Vec<Mapping> = self
            .procs
            .get(&f.parent_tgid)
            .map(|p| {
                p.mappings
                    .iter()
                    .filter(|m| m.valid_at(time))
                    .map(|m| Mapping {
                        // The child exists from the fork on.
                        from: time,
                        ..m.clone()
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The child starts in its parent's root.
        let root = self.procs.get(&f.parent_tgid).and_then(|p| p.root);
        match self.procs.get_mut(&f.tgid) {
            // A reused pid: the old process's history ends here.
            Some(child) if child.exited => {
                end_all(&mut child.mappings, time);
                child.mappings.extend(inherited);
                child.exited = false;
                child.root = root;
                child.version += 1;
            }
            // Already known (snapshotted): keep what we have.
            Some(_) => {}
            None => {
                let paths = inherited.iter().map(|m| m.path.clone()).collect();
                self.procs.insert(
                    f.tgid,
                    Process {
                        mappings: inherited,
                        paths,
                        root,
                        ..Process::default()
                    },
                );
            }
        }
    }

    /// An exec by `tgid` at `time`: its old image's mappings end.
    fn observe_exec(&mut self, tgid: u32, time: u64) {
        match self.procs.get_mut(&tgid) {
            // /proc was read after this exec (events are read late):
            // what it showed is the new image already.
            Some(p) if p.read_at > time => p.image_since = time,
            Some(p) => {
                // It may have changed root before the exec, and its
                // effective uid with it.
                if let Some(root) = self.roots.capture(tgid) {
                    p.root = Some(root);
                }
                if !self.recorded
                    && let Some(ids) = crate::sys::proc::ns_pid_and_euid(tgid)
                {
                    p.perf_map = Some(ids);
                }
                end_all(&mut p.mappings, time);
                p.image_since = time;
                p.version += 1;
                // The new image's mappings come as mmap events, or
                // else from /proc once the loader is done.
                p.stale = !self.mmap_events;
            }
            // Never seen before: whatever /proc shows now is the new
            // image, valid from the exec on.
            None => self.snapshot_if_unknown(tgid, time),
        }
    }

    /// A new mapping: kept when it is executable and of a file (or the
    /// vDSO).
    fn observe_mmap(&mut self, m: &Mmap, time: u64) {
        if !m.executable || !wanted_path(&m.path) {
            return;
        }
        self.snapshot_if_unknown(m.tgid, 0);
        let end = m.start.saturating_add(m.len);
        let mut mapping = Mapping::new(m.start, end, m.pgoff, &m.path, time);
        mapping.file = m.file;
        mapping.build_id = m
            .build_id
            .clone()
            .or_else(|| self.build_ids.get(&*mapping.path).cloned());
        if let Some(p) = self.procs.get_mut(&m.tgid) {
            if p.root.is_none() {
                p.root = self.roots.capture(m.tgid);
            }
            // A full history is compacted again at most every 100 ms.
            let due = p.mappings.len() < MAX_MAPPINGS
                || time.saturating_sub(p.compacted_at) >= REREAD_INTERVAL_NS;
            if p.mappings.len() >= compact_threshold(p) && due {
                self.compact(m.tgid, time);
            }
        }
        let Some(p) = self.procs.get_mut(&m.tgid) else {
            return;
        };
        if p.mappings.len() >= MAX_MAPPINGS {
            p.unfollowed += 1;
            return;
        }
        for rest in end_overlapped(&mut p.mappings, mapping.start, mapping.end, time) {
            p.push(rest);
        }
        p.push(mapping);
    }

    /// Makes room in `tgid`'s history: ends the mappings that `/proc` no
    /// longer shows (while the process lives), then drops the ended ones
    /// that no stored stack has an address in. The next compaction is due
    /// at twice what is left.
    fn compact(&mut self, tgid: u32, time: u64) {
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        // Reading its maps holds up its own mmap calls a little: at most
        // every 100 ms of trace.
        let read = !self.recorded
            && !p.exited
            && p.compact_read_at
                .is_none_or(|t| time.saturating_sub(t) >= REREAD_INTERVAL_NS);
        if read {
            p.compact_read_at = Some(time);
        }
        let shown = if read {
            self.executable_now(tgid)
        } else {
            None
        };
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        if let Some((now, past)) = shown {
            for m in &mut p.mappings {
                if m.until == u64::MAX
                    && m.end <= past
                    && !m.is_vdso()
                    && !now.contains(&(m.start, m.end, m.pgoff))
                {
                    m.until = time.max(m.from);
                }
            }
        }
        let before = p.mappings.len();
        let used = &p.used;
        p.mappings
            .retain(|m| m.until == u64::MAX || used.contains(&(m.start, m.from)));
        if p.mappings.len() != before {
            p.version += 1;
        }
        p.paths.retain(|path| Arc::strong_count(path) > 1);
        p.compact_at = (2 * p.mappings.len()).clamp(COMPACT_FIRST, MAX_MAPPINGS);
        p.compacted_at = time;
    }

    /// The exit of process `tgid`: its perf map is held open, while fewer
    /// than [`MAX_HELD_PERF_MAPS`] are.
    fn observe_exit(&mut self, tgid: u32) {
        let held = if self.held_perf_maps < MAX_HELD_PERF_MAPS {
            self.open_perf_map(tgid).ok()
        } else {
            None
        };
        if let Some(p) = self.procs.get_mut(&tgid) {
            p.exited = true;
            if let Some(file) = held {
                p.held_perf_map = Some(Arc::new(file));
                self.held_perf_maps += 1;
            }
        }
    }

    /// Adds a mapping valid from `from` on, as an mmap event would; for
    /// tests and for callers that build maps by hand.
    /// Its files are found in this tool's own root.
    #[cfg(test)]
    pub(crate) fn add_mapping(&mut self, tgid: u32, mapping: Mapping) {
        let p = self.procs.entry(tgid).or_default();
        if p.root.is_none() {
            p.root = self.roots.capture(std::process::id());
        }
        p.mappings.push(mapping);
        p.version += 1;
    }

    /// The executable file mappings `tgid` has now, as (start, end,
    /// offset), and the address below which that is all of them: asked of
    /// the kernel, else read as text within [`ProcessMaps::text_budget`].
    fn executable_now(&mut self, tgid: u32) -> Option<(HashSet<Span>, u64)> {
        if let Some(files) = Maps::open(tgid)?.executable_files(MAX_MAPPINGS + 1) {
            let past = match files.get(MAX_MAPPINGS) {
                Some(v) => v.start,
                None => u64::MAX,
            };
            return Some((
                files.iter().map(|v| (v.start, v.end, v.pgoff)).collect(),
                past,
            ));
        }
        let started = Instant::now();
        if !self.text_budget.allowed(started) {
            return None;
        }
        let shown = read_maps(tgid).map(|text| parse_maps(&text, 0));
        self.text_budget.charge(started.elapsed());
        let shown = shown?;
        // Lines come in address order; a capped read tells nothing of
        // what lies past its last line.
        let past = shown.last().map_or(0, |m| m.end);
        Some((
            shown.iter().map(|m| (m.start, m.end, m.pgoff)).collect(),
            past,
        ))
    }

    /// The NOTE on processes whose mappings were not all followed.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut full: Vec<(u32, u64)> = self
            .procs
            .iter()
            .filter(|(_, p)| p.unfollowed > 0)
            .map(|(&tgid, p)| (tgid, p.unfollowed))
            .collect();
        if full.is_empty() {
            return Vec::new();
        }
        full.sort_unstable();
        let total: u64 = full.iter().map(|&(_, n)| n).sum();
        let shown: Vec<String> = full
            .iter()
            .take(3)
            .map(|(tgid, n)| format!("PID {tgid} ({n})"))
            .collect();
        let more = if full.len() > shown.len() {
            format!(" and {} more", full.len() - shown.len())
        } else {
            String::new()
        };
        vec![format!(
            "NOTE: {total} executable mappings were not followed, their process already \
             holding {MAX_MAPPINGS} in place: {}{more}; frames in them print as [unknown].",
            shown.join(", ")
        )]
    }

    /// A number that changes whenever `tgid`'s map does; `None` for a
    /// process without a history.
    pub(crate) fn version(&self, tgid: u32) -> Option<u64> {
        self.procs.get(&tgid).map(|p| p.version)
    }

    /// The mappings of `tgid` in use at `time`: of those valid then, the
    /// newest wherever several overlap. In address order.
    pub(crate) fn mapped_at(&self, tgid: u32, time: u64) -> Vec<&Mapping> {
        let Some(p) = self.procs.get(&tgid) else {
            return Vec::new();
        };
        // By start address; none of them overlap.
        let mut chosen: std::collections::BTreeMap<u64, &Mapping> = Default::default();
        for m in p.mappings.iter().rev() {
            if !m.valid_at(time) || m.start >= m.end {
                continue;
            }
            let below = chosen.range(..m.end).next_back();
            if below.is_none_or(|(_, c)| c.end <= m.start) {
                chosen.insert(m.start, m);
            }
        }
        chosen.into_values().collect()
    }

    /// Why nothing of the map of process `tgid` at `time` is known, when
    /// nothing is: it exited before `/proc` could be read (or read again,
    /// after an exec), and no record told its mappings.
    pub(crate) fn unread(&self, tgid: u32, time: u64) -> Option<Unread> {
        let p = self.procs.get(&tgid).filter(|_| !self.recorded)?;
        if !p.exited || p.mappings.iter().any(|m| m.valid_at(time)) {
            return None;
        }
        Some(if !self.mmap_events {
            Unread::NoRecords
        } else if p.recorded {
            Unread::BeforeTracing
        } else {
            Unread::Untraced
        })
    }

    /// True once `tgid`'s exit has been seen (or it could not be read).
    pub(crate) fn has_exited(&self, tgid: u32) -> bool {
        self.procs.get(&tgid).is_some_and(|p| p.exited)
    }

    /// True when `tgid` has a history (possibly empty).
    #[cfg(test)]
    pub(crate) fn is_known(&self, tgid: u32) -> bool {
        self.procs.contains_key(&tgid)
    }

    /// The newest mapping of `tgid` valid at `time` that contains `addr`,
    /// with the file offset of `addr`.
    pub(crate) fn lookup(&self, tgid: u32, time: u64, addr: u64) -> Option<(&Mapping, u64)> {
        let p = self.procs.get(&tgid)?;
        let m = p.mappings.iter().rev().find(|m| m.contains(time, addr))?;
        Some((m, (addr - m.start).wrapping_add(m.pgoff)))
    }

    /// Opens the perf map of `tgid` (`/tmp/perf-PID.map` with its pid in
    /// its own namespace) inside the root it had, if its owner is the
    /// process's effective uid: a map it planted as a link to a file it
    /// does not own is refused. For a process whose exit was seen, the map
    /// as opened then.
    pub(crate) fn open_perf_map(&self, tgid: u32) -> Result<Opened, OpenError> {
        let p = self.procs.get(&tgid).ok_or(OpenError::NoRoot)?;
        if let Some(held) = &p.held_perf_map {
            return held.try_clone();
        }
        let (ns_pid, euid) = p.perf_map.ok_or(OpenError::NoRoot)?;
        let root = p
            .root
            .and_then(|i| self.roots.dirs.get(i))
            .ok_or(OpenError::NoRoot)?;
        let opened = root.open_file(&format!("/tmp/perf-{ns_pid}.map"))?;
        if opened.uid != euid {
            return Err(OpenError::NotOwned);
        }
        Ok(opened)
    }

    /// Opens the file of `mapping` of `tgid` for reading, as safely as a
    /// file a hostile process names must be: while the mapping is current
    /// and the process lives, the very file mapped (through
    /// `/proc/PID/map_files/`); else its path inside the root the process
    /// had, checked to be the file that was mapped. Never the host's file
    /// of that path for a process whose root is elsewhere.
    ///
    /// A file not found in the process's root (mapped before it changed
    /// root), or of a process never seen alive (gone before its first
    /// event was read), is looked for in this tool's root, and taken only
    /// when proven the mapped one (same device and inode).
    pub(crate) fn open_file(&self, tgid: u32, mapping: &Mapping) -> Result<Opened, OpenError> {
        if self.recorded {
            return self.open_recorded(mapping);
        }
        let alive = !self.has_exited(tgid);
        if alive && mapping.until == u64::MAX {
            let path = format!(
                "/proc/{tgid}/map_files/{:x}-{:x}",
                mapping.start, mapping.end
            );
            // The link names the file mapped at that range now: the inode
            // only tells a mapping since replaced there (btrfs and overlayfs
            // report another device to `stat` than in memory maps).
            if let Ok(opened) = open_magic(Path::new(&path)) {
                match mapping.file {
                    Some(key) if opened.key.ino != key.ino => {}
                    _ => return Ok(opened),
                }
            }
        }
        if mapping.deleted {
            return Err(OpenError::Replaced);
        }
        let known = self
            .procs
            .get(&tgid)
            .and_then(|p| p.root)
            .and_then(|i| self.roots.dirs.get(i));
        let in_root = |root: &Dir| -> Result<Opened, OpenError> {
            let opened = root.open_file(&mapping.path)?;
            if let Some(key) = mapping.file {
                opened.check_is(key)?;
            }
            Ok(opened)
        };
        let found = match known {
            Some(root) => in_root(root),
            None => Err(OpenError::NoRoot),
        };
        match (found, mapping.file, &self.own_root) {
            (Ok(opened), _, _) => Ok(opened),
            // Mapped before a chroot, or never seen alive: the file may be
            // the tool's own of that path, and is taken only when its
            // device and inode prove it the mapped one.
            (Err(_), Some(_), Some(own)) => in_root(own),
            (Err(e), _, _) => Err(e),
        }
    }
}

impl ProcessMaps {
    /// Opens the file of a recording's `mapping`: at its path in this
    /// tool's root when that is the file mapped (the same build-id when the
    /// recording gives one, else the same device and inode); else by its
    /// build-id, from perf's build-id cache or the debug directory. A file
    /// that merely has the path is never used.
    fn open_recorded(&self, mapping: &Mapping) -> Result<Opened, OpenError> {
        let own = self.own_root.as_ref().ok_or(OpenError::NoRoot)?;
        let at_path = own.open_file(&mapping.path);
        let wanted_id = mapping.build_id.as_deref();
        if let Ok(opened) = &at_path {
            // A recorded build-id decides: a file rewritten in place keeps
            // its device and inode.
            let proven = match wanted_id {
                Some(id) => build_id(opened).as_deref() == Some(id),
                None => mapping.file.is_some_and(|k| opened.check_is(k).is_ok()),
            };
            if proven {
                return at_path;
            }
        }
        if let Some(found) = wanted_id.and_then(|id| self.build_id_dirs.open(id)) {
            return Ok(found);
        }
        match at_path {
            Ok(_) => Err(OpenError::Replaced),
            Err(e) => Err(e),
        }
    }
}

/// A mapping's start, end and file offset.
type Span = (u64, u64, u64);

/// The length at which `p`'s history is compacted next.
fn compact_threshold(p: &Process) -> usize {
    if p.compact_at == 0 {
        COMPACT_FIRST
    } else {
        p.compact_at
    }
}

/// `/proc/PID/maps`, up to [`MAX_MAPS_TEXT`] bytes (whole lines).
fn read_maps(tgid: u32) -> Option<String> {
    let path = format!("/proc/{tgid}/maps");
    let bytes = crate::sys::proc::read_capped(Path::new(&path), MAX_MAPS_TEXT).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Ends, at `time`, the mappings in place that `[start, end)` overlaps: a
/// new mapping replaces whatever was mapped there. What they held outside
/// it stays mapped: it is returned, as mappings from `time` on.
fn end_overlapped(mappings: &mut [Mapping], start: u64, end: u64, time: u64) -> Vec<Mapping> {
    let mut left = Vec::new();
    for m in mappings {
        if m.until != u64::MAX || m.end <= start || end <= m.start || m.from > time {
            continue;
        }
        m.until = time;
        if m.start < start {
            left.push(Mapping {
                end: start,
                from: time,
                until: u64::MAX,
                ..m.clone()
            });
        }
        if end < m.end {
            left.push(Mapping {
                start: end,
                pgoff: m.pgoff.wrapping_add(end - m.start),
                from: time,
                until: u64::MAX,
                ..m.clone()
            });
        }
    }
    left
}

fn end_all(mappings: &mut [Mapping], time: u64) {
    for m in mappings {
        if m.until > time {
            m.until = time;
        }
    }
}

fn wanted_path(path: &str) -> bool {
    (path.starts_with('/') && !path.starts_with("//")) || path == "[vdso]"
}

fn strip_deleted(path: &str) -> &str {
    path.strip_suffix(" (deleted)").unwrap_or(path)
}

/// Parses `/proc/PID/maps` text, keeping executable file-backed mappings and
/// `[vdso]`, valid from `from` on. Malformed lines are skipped.
pub(crate) fn parse_maps(text: &str, from: u64) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| parse_maps_line(line, from))
        .collect()
}

/// Parses one line: `start-end perms offset dev inode path`.
pub(crate) fn parse_maps_line(line: &str, from: u64) -> Option<Mapping> {
    let mut rest = line;
    let mut fields = [""; 5];
    for f in &mut fields {
        rest = rest.trim_start_matches(' ');
        let end = rest.find(' ').unwrap_or(rest.len());
        *f = &rest[..end];
        rest = &rest[end..];
    }
    let [range, perms, offset, dev, inode] = fields;
    // The path is the rest of the line after the padding, spaces included.
    let path = rest.trim_start_matches(' ');
    if !perms.contains('x') || !wanted_path(path) {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let pgoff = u64::from_str_radix(offset, 16).ok()?;
    if end <= start {
        return None;
    }
    let mut mapping = Mapping::new(start, end, pgoff, path, from);
    mapping.file = parse_file_key(dev, inode);
    Some(mapping)
}

/// The device (`MAJOR:MINOR` in hex) and inode (decimal) of a maps line;
/// `None` for inode 0 (no file).
fn parse_file_key(dev: &str, inode: &str) -> Option<FileKey> {
    let (major, minor) = dev.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    let ino = inode.parse().ok().filter(|&i| i != 0)?;
    Some(FileKey {
        dev: libc::makedev(major, minor),
        ino,
    })
}

#[cfg(test)]
mod tests;
