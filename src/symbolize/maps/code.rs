//! Where the code at a process's address is, for telling user stacks
//! apart by the code they run ([`crate::aggregate::CodeOf`]), and the
//! files that stored stacks run code in ([`CodeFiles`]): a stack keyed by
//! file and offset is named from its files, whatever became of the
//! processes that ran it, so that those processes' maps need not be kept.

use std::collections::{HashMap, HashSet};

use super::{Mapping, Process, ProcessMaps};
use crate::aggregate::{CodeOf, Place};
use crate::sys::open::{FileKey, OpenError, Opened};

/// The file mapped at the address then, or the vDSO.
impl CodeOf for ProcessMaps {
    fn place(&self, tgid: u32, time: u64, addr: u64) -> Option<Place> {
        let (m, offset) = self.lookup(tgid, time, addr)?;
        if m.is_vdso() {
            return Some(Place::Vdso {
                offset: addr - m.start,
            });
        }
        Some(Place::File {
            file: m.file?,
            offset,
        })
    }
}

/// Most files registered: past them, a process with a stored stack in a
/// new file keeps its map instead.
pub(super) const MAX_CODE_FILES: usize = 1 << 16;

/// Most bytes of their paths: traced processes choose them.
const MAX_CODE_PATH_BYTES: usize = 32 << 20;

/// How to open a file that stored stacks run code in: a mapping of it,
/// by the process that first stored such a stack, and that process's
/// root.
#[derive(Clone, Debug)]
struct CodeFile {
    tgid: u32,
    mapping: Mapping,
    root: Option<usize>,
}

/// The files that stored stacks run code in, by device and inode.
#[derive(Clone, Debug, Default)]
pub(super) struct CodeFiles {
    files: HashMap<FileKey, CodeFile>,
    path_bytes: usize,
}

impl ProcessMaps {
    /// Registers the file of `mapping` of `tgid`, which a stored stack runs
    /// code in. False when it cannot be (the registry is full, or the
    /// mapping names no file): the process's own map must then be kept.
    pub(super) fn register_code_file(&mut self, tgid: u32, mapping: &Mapping) -> bool {
        let Some(key) = mapping.file else {
            return mapping.is_vdso();
        };
        let reg = &mut self.code_files;
        if reg.files.contains_key(&key) {
            return true;
        }
        let bytes = mapping.path.len();
        if reg.files.len() >= MAX_CODE_FILES || reg.path_bytes + bytes > MAX_CODE_PATH_BYTES {
            return false;
        }
        let root = self.procs.get(&tgid).and_then(|p| p.root);
        reg.path_bytes += bytes;
        reg.files.insert(
            key,
            CodeFile {
                tgid,
                mapping: mapping.clone(),
                root,
            },
        );
        true
    }

    /// Opens registered file `key`, with its path as mapped; `None` when
    /// it was never registered.
    pub(crate) fn open_code_file(
        &self,
        key: FileKey,
    ) -> Option<(Result<Opened, OpenError>, &Mapping)> {
        let f = self.code_files.files.get(&key)?;
        let alive = self.procs.get(&f.tgid).is_some_and(|p| !p.exited);
        Some((
            self.open_mapped(f.tgid, &f.mapping, f.root, alive),
            &f.mapping,
        ))
    }
}

/// How many processes a map is held for, and why (for `OFFWAKE_TIMING`).
#[derive(Debug, Default)]
pub(crate) struct Census {
    pub(crate) processes: usize,
    pub(crate) exited: usize,
    pub(crate) stored: usize,
    pub(crate) mappings: usize,
    pub(crate) files: usize,
}

impl ProcessMaps {
    pub(crate) fn census(&self) -> Census {
        let mut c = Census {
            processes: self.procs.len(),
            files: self.code_files.files.len(),
            ..Census::default()
        };
        for p in self.procs.values() {
            c.exited += usize::from(p.exited);
            c.stored += usize::from(p.stored);
            c.mappings += p.mappings.len();
        }
        c
    }
}

impl ProcessMaps {
    /// The files that hold `addrs` are registered, for the stack to be
    /// symbolized from them; the mappings of those that cannot be, and of
    /// frames told apart by address (`by_address[i]` for `addrs[i]`: the
    /// stack was stored without knowing their file), are kept instead,
    /// even after the process exits (see [`ProcessMaps::observe_exit`]).
    pub(crate) fn ensure_covers(
        &mut self,
        tgid: u32,
        time: u64,
        addrs: &[u64],
        by_address: &[bool],
    ) {
        self.cover(tgid, time, addrs);
        let Some(p) = self.procs.get(&tgid) else {
            return;
        };
        let held: Vec<(Option<Mapping>, bool)> = addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let m = p.mappings.iter().rev().find(|m| m.contains(time, a));
                (m.cloned(), by_address.get(i).copied().unwrap_or(true))
            })
            .collect();
        let mut stored = false;
        let mut used = Vec::new();
        for (m, by_address) in held {
            stored |= by_address;
            match m {
                Some(m) if by_address || !self.register_code_file(tgid, &m) => {
                    used.push((m.start, m.from));
                    stored = true;
                }
                _ => {}
            }
        }
        if stored && let Some(p) = self.procs.get_mut(&tgid) {
            p.used.extend(used);
            p.stored = true;
        }
    }
}

impl Process {
    /// At its exit: keeps only the mappings that its stored stacks have
    /// frames in. True when its map was known and none is left.
    pub(super) fn keep_used_only(&mut self) -> bool {
        let known = !self.mappings.is_empty();
        let used = std::mem::take(&mut self.used);
        self.mappings.retain(|m| used.contains(&(m.start, m.from)));
        self.mappings.shrink_to_fit();
        self.paths = HashSet::new();
        self.version += 1;
        known && self.mappings.is_empty()
    }
}

impl ProcessMaps {
    /// What symbolizing stacks of processes `tgids` needs, apart from this
    /// history (which tracing goes on changing): their maps, the roots and
    /// the files registered. Never reads /proc (sealed).
    pub(crate) fn snapshot(&self, tgids: impl IntoIterator<Item = u32>) -> ProcessMaps {
        let mut copy = ProcessMaps::new();
        copy.procs = tgids
            .into_iter()
            .filter_map(|t| Some((t, self.procs.get(&t)?.clone())))
            .collect();
        copy.roots.dirs.clone_from(&self.roots.dirs);
        copy.own_root.clone_from(&self.own_root);
        copy.mmap_events = self.mmap_events;
        copy.code_files = self.code_files.clone();
        copy.interpreted = self.interpreted.clone();
        copy.sealed = true;
        copy
    }
}
