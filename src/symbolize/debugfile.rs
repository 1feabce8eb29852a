//! Finding a file's separate debug file, only in the trusted debug
//! directory: by GNU build-id, else by `.gnu_debuglink` (then proven by
//! build-id or CRC), or among the files debuginfod fetched into its
//! cache. Also a recording's files, found by build-id in perf's build-id
//! cache or the debug directory when their path no longer holds them.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use object::Object;
use typed_arena::Arena;

use super::dwarf::has_dwarf;
use super::persist::DebugFile;
use super::read::{Allowance, Reader as FileReader, Source};
use crate::bytes::hex_string;
use crate::sys::open::{Dir, Opened, Scope};

/// Where separate debug files are looked for: root's, never a traced
/// process's.
const DEBUG_DIR: &str = "/usr/lib/debug";

/// Where debug files are found: the trusted debug directory, opened once,
/// and the debuginfod cache for the build-ids fetched into it.
#[derive(Debug, Default)]
pub(crate) struct DebugDirs {
    dir: Option<Dir>,
    fetched: Option<(Dir, HashSet<String>)>,
}

impl DebugDirs {
    pub(crate) fn system() -> DebugDirs {
        DebugDirs {
            dir: Dir::open(Path::new(DEBUG_DIR), Scope::Beneath).ok(),
            fetched: None,
        }
    }

    /// Another directory standing in for the system's (tests).
    #[cfg(test)]
    pub(crate) fn at(dir: &Path) -> DebugDirs {
        DebugDirs {
            dir: Dir::open(dir, Scope::Beneath).ok(),
            fetched: None,
        }
    }

    /// Adds the debug files of build-ids `found` (hex), fetched into the
    /// debuginfod cache `cache`.
    pub(crate) fn add_fetched(&mut self, cache: &Path, found: HashSet<String>) {
        if let Ok(dir) = Dir::open(cache, Scope::Beneath) {
            self.fetched = Some((dir, found));
        }
    }

    fn open(&self, rel: &str) -> Option<Opened> {
        self.dir.as_ref()?.open_file(rel).ok()
    }

    /// The debug file of build-id `hex`: in the debug directory, else
    /// fetched.
    fn by_build_id(&self, hex: &str) -> Option<Opened> {
        if hex.len() < 2 {
            return None;
        }
        self.open(&format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..]))
            .or_else(|| {
                let (dir, found) = self.fetched.as_ref()?;
                if !found.contains(hex) {
                    return None;
                }
                dir.open_file(&super::debuginfod::cached_name(hex)).ok()
            })
    }
}

/// Where a recording's files are found by build-id when their path no
/// longer holds them: perf's build-id cache of this user
/// (`~/.debug/.build-id/xx/rest/elf`, which perf record fills), then the
/// debug directory (`.build-id/xx/rest.debug`). A file found there is
/// used only when its own build-id is the one looked for.
#[derive(Debug, Default)]
pub(crate) struct BuildIdDirs {
    perf_cache: Option<Dir>,
    debug: Option<Dir>,
}

impl BuildIdDirs {
    pub(crate) fn system() -> BuildIdDirs {
        let me = nix::unistd::geteuid();
        // Where perf puts it ($HOME, else the user's home), and only a
        // cache this user owns and no one else may write.
        let home = std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                nix::unistd::User::from_uid(me)
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            });
        let perf_cache = home
            .map(|home| home.join(".debug"))
            .filter(|dir| {
                use std::os::unix::fs::{MetadataExt, PermissionsExt};
                std::fs::symlink_metadata(dir).is_ok_and(|m| {
                    m.is_dir() && m.uid() == me.as_raw() && m.permissions().mode() & 0o022 == 0
                })
            })
            .and_then(|dir| Dir::open(&dir, Scope::Beneath).ok());
        BuildIdDirs {
            perf_cache,
            debug: Dir::open(Path::new(DEBUG_DIR), Scope::Beneath).ok(),
        }
    }

    /// The file whose build-id is `id`.
    pub(crate) fn open(&self, id: &[u8]) -> Option<Opened> {
        let hex = hex_string(id);
        if hex.len() < 3 {
            return None;
        }
        let (head, rest) = hex.split_at(2);
        let candidates = [
            (&self.perf_cache, format!(".build-id/{head}/{rest}/elf")),
            (&self.debug, format!(".build-id/{head}/{rest}.debug")),
        ];
        candidates.into_iter().find_map(|(dir, rel)| {
            let opened = dir.as_ref()?.open_file(&rel).ok()?;
            (build_id(&opened).as_deref() == Some(id)).then_some(opened)
        })
    }
}

/// The GNU build-id of the ELF file `opened`; only its headers and notes
/// are read.
pub(crate) fn build_id(opened: &Opened) -> Option<Vec<u8>> {
    let allowance = Allowance::new(4 << 20);
    let arena = Arena::new();
    let reader = FileReader::new(Source::File(&opened.file), opened.size, &allowance, &arena);
    let obj = object::File::parse(&reader).ok()?;
    obj.build_id().ok()?.map(<[u8]>::to_vec)
}

/// The build-id (hex) of the ELF file `opened` when nothing at hand names
/// its functions fully: it has no DWARF and no `.symtab`, and no debug
/// file for it is in the debug directory. Only its headers are read.
pub(crate) fn wants_debug_file(opened: &Opened, debug: &DebugDirs) -> Option<String> {
    with_headers(opened, &Allowance::new(4 << 20), |obj| {
        if has_dwarf(obj) || obj.section_by_name(".symtab").is_some() {
            return None;
        }
        let id = hex_string(obj.build_id().ok()??);
        (debug.by_build_id(&id).is_none() && id.len() >= 2).then_some(id)
    })
}

/// `f` of the ELF file `opened`, parsed for its headers, section and
/// program tables and notes only (a small read, within `allowance`);
/// `None` when it does not parse.
fn with_headers<T>(
    opened: &Opened,
    allowance: &Allowance,
    f: impl for<'a> FnOnce(&object::File<'a, &'a FileReader<'a>>) -> Option<T>,
) -> Option<T> {
    let arena = Arena::new();
    let reader = FileReader::new(Source::File(&opened.file), opened.size, allowance, &arena);
    f(&object::File::parse(&reader).ok()?)
}

/// The separate debug file that parsing the file `opened` (mapped at
/// `path`) would look in ([`DebugFile::Absent`] when there is none, or the
/// file has DWARF of its own), read within `allowance`; `None` when the
/// file cannot be read.
pub(crate) fn debug_file_of(
    opened: &Opened,
    path: &str,
    debug: &DebugDirs,
    allowance: &Allowance,
) -> Option<DebugFile> {
    with_headers(opened, allowance, |obj| {
        if has_dwarf(obj) {
            return Some(DebugFile::Absent);
        }
        let found = find_debug_file(obj, Some(path), debug);
        Some(DebugFile::of(found.as_ref().map(|(file, _)| file)))
    })
}

/// How a separate debug file was found, which says how it must match.
pub(super) enum Found {
    /// By the binary's build-id: it must carry the same.
    BuildId,
    /// By `.gnu_debuglink`: it must carry the binary's build-id, or, when
    /// the binary has none, have the CRC the link gives.
    Link { crc: u32 },
}

/// The debug file `found` for `bin`, parsed through `reader`, when it is
/// `bin`'s by the rule it was found by.
pub(super) fn parse_debug_file<'a, 'b, R: object::ReadRef<'a>>(
    bin: &object::File<'a, R>,
    reader: &'b FileReader<'b>,
    (file, how): &(Opened, Found),
) -> Option<object::File<'b, &'b FileReader<'b>>> {
    object::File::parse(reader)
        .ok()
        .filter(|dbg| is_debug_file_of(bin, dbg, how, file))
}

/// True when `dbg` is the debug file of `bin`, by the rule of `found`.
fn is_debug_file_of<'a, 'b, R: object::ReadRef<'a>, S: object::ReadRef<'b>>(
    bin: &object::File<'a, R>,
    dbg: &object::File<'b, S>,
    found: &Found,
    file: &Opened,
) -> bool {
    match (bin.build_id(), dbg.build_id(), found) {
        (Ok(Some(a)), Ok(Some(b)), _) => a == b,
        (Ok(None), _, Found::Link { crc }) => crc_of(&file.file, file.size) == Some(*crc),
        _ => false,
    }
}

/// The CRC-32 of a whole file no bigger than a file's budget.
fn crc_of(file: &File, size: u64) -> Option<u32> {
    use std::os::unix::fs::FileExt;
    if size > super::read::FILE_BUDGET {
        return None;
    }
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < size {
        let n = usize::try_from((size - at).min(buf.len() as u64)).ok()?;
        file.read_exact_at(&mut buf[..n], at).ok()?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Some(hasher.finalize())
}

/// A separate debug file, only in the trusted debug directory: by GNU
/// build-id (`.build-id/xx/rest.debug`), else by `.gnu_debuglink` under
/// the directory's copy of the binary's directory. Never next to the
/// binary, where the process that owns it could plant a link.
pub(super) fn find_debug_file<'a, R: object::ReadRef<'a>>(
    obj: &object::File<'a, R>,
    path: Option<&str>,
    debug: &DebugDirs,
) -> Option<(Opened, Found)> {
    if let Ok(Some(id)) = obj.build_id()
        && let Some(file) = debug.by_build_id(&hex_string(id))
    {
        return Some((file, Found::BuildId));
    }
    let (name, crc) = obj.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    if name.is_empty() || name.contains('/') || name == ".." || name == "." {
        return None;
    }
    let dir = Path::new(path?).parent()?.to_str()?;
    let file = debug.open(&format!("{}/{name}", dir.trim_start_matches('/')))?;
    Some((file, Found::Link { crc }))
}
