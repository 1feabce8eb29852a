//! Caches for user-space symbolization: each file parsed once (keyed by
//! device and inode, so the same library seen through different paths or
//! process roots is shared), and each unique `(file, address)` resolved once.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::rc::Rc;

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
    files: HashMap<FileId, Option<Rc<ElfFile>>>,
    names: HashMap<(FileId, u64), Rc<[String]>>,
    /// Diagnostics about files that failed to parse, one per file.
    pub failures: Vec<String>,
}

impl FileCache {
    pub fn new() -> FileCache {
        FileCache::default()
    }

    /// The parsed file behind the first of `candidates` that exists.
    pub fn open(&mut self, candidates: &[PathBuf]) -> Option<(FileId, Rc<ElfFile>)> {
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
            let entry = self
                .files
                .entry(id)
                .or_insert_with(|| match ElfFile::open(path) {
                    Ok(f) => Some(Rc::new(f)),
                    Err(e) => {
                        self.failures.push(format!("{e:#}"));
                        None
                    }
                });
            return entry.clone().map(|f| (id, f));
        }
        None
    }

    /// The parsed vDSO of this kernel (read from this process's own vDSO).
    pub fn vdso(&mut self) -> Option<Rc<ElfFile>> {
        self.files
            .entry(FileId::Vdso)
            .or_insert_with(|| super::vdso::load().ok().map(Rc::new))
            .clone()
    }

    /// Names for `vaddr` in `file`, resolved once.
    pub fn names(&mut self, id: FileId, file: &ElfFile, vaddr: u64) -> Rc<[String]> {
        self.names
            .entry((id, vaddr))
            .or_insert_with(|| file.names(vaddr).into())
            .clone()
    }
}
