//! Caches for user-space symbolization: each file opened once (keyed by
//! device and inode, so the same library seen through different paths or
//! process roots is shared), parsed for all its addresses at once and
//! released, and each unique `(file, address)` resolved once.
//! Also the account of files that gave no names, for the NOTE lines.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::debugfile::DebugDirs;
use super::elf::{ElfFile, ParseError, Wanted};
use super::persist::Kept;
use super::read::RunBudget;
use super::vet::Refused;
use crate::diag::escape::{Place, escape};
use crate::sys::cache::CacheDir;
use crate::sys::open::{OpenError, Opened};

/// Identity of a parsed image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum FileId {
    Inode {
        dev: u64,
        ino: u64,
    },
    /// The vDSO of the running kernel.
    Vdso,
}

/// Files opened for symbolization, and the names resolved in them.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    /// Each file as first opened, with the path it was mapped at: parsed
    /// when its addresses are resolved, then dropped.
    opened: HashMap<FileId, (Opened, String)>,
    /// Files that could not be parsed (never retried).
    bad: HashSet<FileId>,
    /// Keyed by file offset, which identifies an address within a file.
    names: HashMap<(FileId, u64), Arc<[String]>>,
    /// Diagnostics about files that failed to parse, one per file.
    pub(crate) failures: Vec<String>,
    /// Files that gave no names, by why, with their paths.
    skipped: BTreeMap<String, Vec<String>>,
    run: RunBudget,
    /// Opened on first use.
    debug: Option<DebugDirs>,
    /// Where names are kept across runs: `None` until first wanted, then
    /// the directory if it can be used.
    persist_dir: Option<Option<CacheDir>>,
    /// Names kept across runs, by file, as read this run.
    kept: HashMap<FileId, Option<Kept>>,
    /// Files parsed (tests).
    #[cfg(test)]
    pub(crate) parses: usize,
}

impl FileCache {
    /// Names are kept across runs in the cache directory (not in unit
    /// tests, unless `FileCache::keep_names_in` says where).
    pub(crate) fn new() -> FileCache {
        FileCache::default()
    }

    /// Looks for debug files in `debug` (tests).
    #[cfg(test)]
    pub(crate) fn set_debug_dirs(&mut self, debug: DebugDirs) {
        self.debug = Some(debug);
    }

    /// Keeps names across runs in `dir` (tests).
    #[cfg(test)]
    pub(crate) fn keep_names_in(&mut self, dir: CacheDir) {
        self.persist_dir = Some(Some(dir));
    }

    /// The names kept from earlier runs for file `id`, read once; `None`
    /// when there is no cache directory, or the file is not opened.
    fn kept(&mut self, id: FileId) -> Option<&mut Kept> {
        if !matches!(id, FileId::Inode { .. }) {
            return None;
        }
        if !self.kept.contains_key(&id) {
            let dir = self
                .persist_dir
                .get_or_insert_with(|| if cfg!(test) { None } else { CacheDir::open() })
                .as_ref();
            let debug = self.debug.get_or_insert_with(DebugDirs::system);
            // The headers read to find the debug file are the run's too.
            let allowance = self.run.allowance();
            let kept = dir
                .zip(self.opened.get(&id))
                .filter(|_| allowance.limit() > 0)
                .and_then(|(dir, (opened, path))| {
                    let version = opened.version?;
                    let debug = super::debugfile::debug_file_of(opened, path, debug, &allowance)?;
                    Kept::load(dir, version, debug)
                });
            self.run.spend(&allowance);
            self.kept.insert(id, kept);
        }
        self.kept.get_mut(&id)?.as_mut()
    }

    /// Writes the names added this run to the cache directory.
    pub(crate) fn store_kept(&mut self) {
        let Some(Some(dir)) = &self.persist_dir else {
            return;
        };
        super::persist::store_all(dir, self.kept.values_mut().flatten());
    }

    /// Takes the file a process mapped at `path`, opened safely, for
    /// [`FileCache::resolve`]; `None` when it could not be opened.
    pub(crate) fn open(&mut self, opened: Result<Opened, OpenError>, path: &str) -> Option<FileId> {
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                self.skip(&format!("not opened: {e}"), path);
                return None;
            }
        };
        let id = FileId::Inode {
            dev: opened.key.dev,
            ino: opened.key.ino,
        };
        self.opened
            .entry(id)
            .or_insert_with(|| (opened, path.to_string()));
        Some(id)
    }

    /// The build-ids (hex) of the files among `ids` that have no symbols
    /// or debug file at hand, and the cache's debug directories.
    pub(crate) fn wanting_debug_files(&mut self, ids: impl Iterator<Item = FileId>) -> Vec<String> {
        let debug = self.debug.get_or_insert_with(DebugDirs::system);
        let mut out: Vec<String> = ids
            .filter_map(|id| self.opened.get(&id))
            .filter_map(|(opened, _)| super::debugfile::wants_debug_file(opened, debug))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Debug files of build-ids `found` are in the debuginfod cache `cache`.
    pub(crate) fn add_fetched(&mut self, cache: &std::path::Path, found: HashSet<String>) {
        self.debug
            .get_or_insert_with(DebugDirs::system)
            .add_fetched(cache, found);
    }

    /// Replaces the run's reading budget (tests).
    #[cfg(test)]
    pub(crate) fn set_run_budget(&mut self, run: RunBudget) {
        self.run = run;
    }

    /// What the run may still read (tests).
    #[cfg(test)]
    pub(crate) fn run_budget_left(&self) -> u64 {
        self.run.left()
    }

    /// The size of file `id` as opened (0 when not opened).
    pub(crate) fn size(&self, id: FileId) -> u64 {
        self.opened.get(&id).map_or(0, |(o, _)| o.size)
    }

    /// True when the names of `off` in `id` are known.
    pub(crate) fn has(&self, id: FileId, off: u64) -> bool {
        self.names.contains_key(&(id, off))
    }

    /// Resolves the file offsets `offsets` of file `id`: parses the file
    /// for them, keeps their names, and drops what was parsed.
    pub(crate) fn resolve(&mut self, id: FileId, offsets: &[u64]) {
        // What earlier runs resolved in this very file needs no parsing.
        let mut missing = offsets.to_vec();
        if !self.bad.contains(&id)
            && let Some(kept) = self.kept(id)
        {
            let found: Vec<(u64, Arc<[String]>)> = offsets
                .iter()
                .filter_map(|&off| Some((off, kept.get(off)?)))
                .collect();
            let known: HashSet<u64> = found.iter().map(|(off, _)| *off).collect();
            missing.retain(|off| !known.contains(off));
            for (off, names) in found {
                self.names.insert((id, off), names);
            }
        }
        if missing.is_empty() {
            return;
        }
        let parsed = match id {
            FileId::Vdso => super::vdso::load().ok(),
            FileId::Inode { .. } if self.bad.contains(&id) => None,
            FileId::Inode { .. } => self.parse(id, &missing),
        };
        // Kept for later runs: what a parse that read all it was asked
        // found, with the debug file the kept names were made with.
        let keep = parsed
            .as_ref()
            .filter(|f| f.is_whole())
            .map(|f| f.debug_file());
        for &off in &missing {
            let names: Arc<[String]> = match &parsed {
                Some(file) => match file.vaddr_of_offset(off) {
                    Some(vaddr) => file.names(vaddr).into(),
                    None => Arc::from(Vec::new()),
                },
                None => Arc::from(Vec::new()),
            };
            if let Some(debug) = keep
                && let Some(Some(kept)) = self.kept.get_mut(&id)
                && kept.debug == debug
            {
                kept.add(off, &names);
            }
            self.names.insert((id, off), names);
        }
    }

    /// Parses opened file `id` for `offsets`; `None` (and noted) when it
    /// gives no names.
    fn parse(&mut self, id: FileId, offsets: &[u64]) -> Option<ElfFile> {
        #[cfg(test)]
        {
            self.parses += 1;
        }
        let (opened, path) = self.opened.get(&id)?;
        let path = path.clone();
        let debug = self.debug.get_or_insert_with(DebugDirs::system);
        let parsed = ElfFile::from_opened(
            opened,
            &path,
            debug,
            &mut self.run,
            Wanted::Offsets(offsets),
        );
        match parsed {
            Ok(f) => {
                match f.dwarf_refused() {
                    Some(Refused::Deep) => {
                        let why = format!(
                            "DWARF nested deeper than {} levels",
                            super::vet::MAX_DIE_DEPTH
                        );
                        self.skip(&why, &path);
                    }
                    Some(Refused::Shared) => {
                        self.skip("DWARF units too many or sharing tables", &path);
                    }
                    Some(Refused::Budget) => self.skip("DWARF over its budget", &path),
                    None => {}
                }
                Some(f)
            }
            Err(ParseError::OverBudget(limit)) => {
                self.skip(&format!("over its {} MiB budget", limit >> 20), &path);
                self.bad.insert(id);
                None
            }
            Err(ParseError::Bad(e)) => {
                self.failures.push(format!("{path:?}: {e:#}"));
                self.skip("not a readable ELF file", &path);
                self.bad.insert(id);
                None
            }
        }
    }

    fn skip(&mut self, why: &str, path: &str) {
        let paths = self.skipped.entry(why.to_string()).or_default();
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_string());
        }
    }

    /// One NOTE line per reason some files gave no names, with up to three
    /// of their paths (quoted: they come from traced processes).
    pub(crate) fn notes(&self) -> Vec<String> {
        self.skipped
            .iter()
            .map(|(why, paths)| {
                let shown: Vec<String> = paths
                    .iter()
                    .take(3)
                    .map(|p| escape(p.as_bytes(), Place::Quoted).into_owned())
                    .collect();
                let more = paths.len().saturating_sub(3);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "NOTE: frames print as [unknown] where a file was skipped ({why}): {}{more}.",
                    shown.join(", ")
                )
            })
            .collect()
    }

    /// Names for file offset `off` of file `id`, once resolved; empty
    /// when unknown.
    pub(crate) fn names(&self, id: FileId, off: u64) -> Arc<[String]> {
        self.names
            .get(&(id, off))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}
