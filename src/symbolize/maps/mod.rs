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
use std::time::Duration;

use super::debugfile::{BuildIdDirs, build_id};
use super::unread::Unread;
use crate::event::{CommChange, Event, EventKind, Exit, Fork, Mmap};
use crate::sys::open::{Dir, FileKey, Opened, Scope};
use crate::sys::vma::TimeBudget;

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
    /// A stack of it was stored: its map is kept after its exit.
    stored: bool,
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

/// The root directories of the processes seen, each held open once.
#[derive(Debug, Default)]
struct Roots {
    dirs: Vec<Arc<Dir>>,
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
        self.dirs.push(Arc::new(dir));
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
    own_root: Option<Arc<Dir>>,
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
    /// The files stored stacks run code in.
    code_files: code::CodeFiles,
    /// Tracing has ended: every process a stored stack needs was seen,
    /// and one not known now was forgotten on purpose (its pid may be
    /// another process's now), never read again.
    sealed: bool,
    /// What the addresses of interpreted frames stand for.
    pub(crate) interpreted: crate::event::interpreted::Names,
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
            own_root: Dir::open(Path::new("/"), Scope::Root).ok().map(Arc::new),
            early_roots: HashMap::new(),
            held_perf_maps: 0,
            mmap_events: true,
            recorded: false,
            build_ids: HashMap::new(),
            build_id_dirs: BuildIdDirs::default(),
            text_budget: TimeBudget::new(Duration::from_millis(100), 0.02),
            code_files: code::CodeFiles::default(),
            sealed: false,
            interpreted: crate::event::interpreted::Names::new(),
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

    /// Tracing has ended: no process is read from /proc any more.
    pub(crate) fn seal(&mut self) {
        self.sealed = true;
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
    pub(super) fn cover(&mut self, tgid: u32, time: u64, addrs: &[u64]) {
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
        let uncovered = addrs.iter().any(|&a| {
            !crate::event::interpreted::is_frame(a) && self.lookup(tgid, time, a).is_none()
        });
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
        if self.sealed || self.procs.contains_key(&tgid) {
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
            let due = p.mappings.len() < MAX_MAPPINGS
                || time.saturating_sub(p.compacted_at) >= COMPACT_READ_NS;
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

    /// The exit of process `tgid`: its perf map is held open, while fewer
    /// than [`MAX_HELD_PERF_MAPS`] are.
    fn observe_exit(&mut self, tgid: u32) {
        // A process none of whose stacks was stored (another process's
        // stack stands for each of its code paths, see
        // `aggregate::stacks`) is never looked up again: its map goes, so
        // that a run's memory follows the processes alive, not those that
        // came and went. A thread that outlives its leader has its
        // process's map read again from /proc.
        if self
            .procs
            .get(&tgid)
            .is_some_and(|p| !p.stored && p.held_perf_map.is_none())
        {
            self.procs.remove(&tgid);
            return;
        }
        let held = if self.held_perf_maps < MAX_HELD_PERF_MAPS {
            self.open_perf_map(tgid).ok()
        } else {
            None
        };
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        p.exited = true;
        if let Some(file) = held {
            p.held_perf_map = Some(Arc::new(file));
            self.held_perf_maps += 1;
        } else if !self.recorded && p.keep_used_only() {
            // No frame of its stored stacks is in a mapping, and it has no
            // perf map: nothing of it can name them.
            self.procs.remove(&tgid);
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

    /// The processes whose map is known.
    pub(crate) fn known(&self) -> Vec<u32> {
        self.procs.keys().copied().collect()
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

mod bound;
mod code;
mod files;

use bound::{COMPACT_READ_NS, MAX_MAPPINGS, compact_threshold, end_overlapped, read_maps};

#[cfg(test)]
mod tests;
