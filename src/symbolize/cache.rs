//! Caches for user-space symbolization: each file parsed once (keyed by
//! device and inode, so the same library seen through different paths or
//! process roots is shared), and each unique `(file, address)` resolved once.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::elf::ElfFile;

/// Identity of a parsed image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileId {
    Inode {
        dev: u64,
        ino: u64,
    },
    /// The vDSO of the running kernel.
    Vdso,
}

/// Parsed files and resolved names.
#[derive(Debug, Default)]
pub struct FileCache {
    /// `None` records a file that could not be parsed (never retried).
    files: HashMap<FileId, Option<ElfFile>>,
    /// Keyed by file offset, which identifies an address within a file.
    names: HashMap<(FileId, u64), Arc<[String]>>,
    /// Diagnostics about files that failed to parse, one per file.
    pub failures: Vec<String>,
}

impl FileCache {
    pub fn new() -> FileCache {
        FileCache::default()
    }

    /// Parses (once) the file behind the first of `candidates` that exists;
    /// `None` when none does.
    pub fn open(&mut self, candidates: &[PathBuf]) -> Option<FileId> {
        for path in candidates {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let id = FileId::Inode {
                dev: meta.dev(),
                ino: meta.ino(),
            };
            if !self.files.contains_key(&id) {
                let parsed = match ElfFile::open(path) {
                    Ok(f) => Some(f),
                    Err(e) => {
                        self.failures.push(format!("{e:#}"));
                        None
                    }
                };
                self.files.insert(id, parsed);
            }
            return Some(id);
        }
        None
    }

    /// The parsed vDSO of this kernel (read from this process's own vDSO).
    pub fn vdso(&mut self) -> FileId {
        self.files
            .entry(FileId::Vdso)
            .or_insert_with(|| super::vdso::load().ok());
        FileId::Vdso
    }

    /// Names for file offset `off` of file `id`, resolved once; empty when
    /// unknown.
    pub fn names(&mut self, id: FileId, off: u64) -> Arc<[String]> {
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
