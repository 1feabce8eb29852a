//! Caches for user-space symbolization: each file parsed once (keyed by
//! device and inode, so the same library seen through different paths or
//! process roots is shared), and each unique `(file, address)` resolved once.
//! Also the account of files that gave no names, for the NOTE lines.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::elf::{DebugDirs, ElfFile, ParseError, Refused};
use super::read::RunBudget;
use crate::report::{Place, escape};
use crate::sys::open::{OpenError, Opened};

/// Identity of a parsed image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FileId {
    Inode {
        dev: u64,
        ino: u64,
    },
    /// The vDSO of the running kernel.
    Vdso,
}

/// Parsed files and resolved names.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    /// `None` records a file that could not be parsed (never retried).
    files: HashMap<FileId, Option<ElfFile>>,
    /// Keyed by file offset, which identifies an address within a file.
    names: HashMap<(FileId, u64), Arc<[String]>>,
    /// Diagnostics about files that failed to parse, one per file.
    pub(crate) failures: Vec<String>,
    /// Files that gave no names, by why, with their paths.
    skipped: BTreeMap<String, Vec<String>>,
    run: RunBudget,
    /// Opened on first use.
    debug: Option<DebugDirs>,
}

impl FileCache {
    pub(crate) fn new() -> FileCache {
        FileCache::default()
    }

    /// Parses (once) the file a process mapped at `path`, opened safely;
    /// `None` when it could not be opened.
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
        if !self.files.contains_key(&id) {
            let debug = self.debug.get_or_insert_with(DebugDirs::system);
            let parsed = match ElfFile::from_opened(&opened, path, debug, &mut self.run) {
                Ok(f) => {
                    match f.dwarf_refused() {
                        Some(Refused::Deep) => {
                            let why = format!(
                                "DWARF nested deeper than {} levels",
                                super::elf::MAX_DIE_DEPTH
                            );
                            self.skip(&why, path);
                        }
                        Some(Refused::Shared) => {
                            self.skip("DWARF units too many or sharing tables", path);
                        }
                        Some(Refused::Budget) => self.skip("DWARF over its budget", path),
                        None => {}
                    }
                    Some(f)
                }
                Err(ParseError::OverBudget(limit)) => {
                    self.skip(&format!("over its {} MiB budget", limit >> 20), path);
                    None
                }
                Err(ParseError::Bad(e)) => {
                    self.failures.push(format!("{path:?}: {e:#}"));
                    self.skip("not a readable ELF file", path);
                    None
                }
            };
            self.files.insert(id, parsed);
        }
        Some(id)
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

    /// The parsed vDSO of this kernel (read from this process's own vDSO).
    pub(crate) fn vdso(&mut self) -> FileId {
        self.files
            .entry(FileId::Vdso)
            .or_insert_with(|| super::vdso::load().ok());
        FileId::Vdso
    }

    /// Names for file offset `off` of file `id`, resolved once; empty when
    /// unknown.
    pub(crate) fn names(&mut self, id: FileId, off: u64) -> Arc<[String]> {
        if let Some(names) = self.names.get(&(id, off)) {
            return names.clone();
        }
        let names: Arc<[String]> = match self.files.get(&id) {
            Some(Some(file)) => match file.vaddr_of_offset(off) {
                Some(vaddr) => file.names(vaddr).into(),
                None => Arc::from(Vec::new()),
            },
            _ => Arc::from(Vec::new()),
        };
        self.names.insert((id, off), names.clone());
        names
    }
}
