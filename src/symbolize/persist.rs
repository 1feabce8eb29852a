//! Names kept across runs: what a file's addresses resolved to, stored in
//! the cache directory (see [`CacheDir`]) under the file's device and
//! inode, so that the next run of the same program names its frames
//! without expanding and parsing DWARF again (glibc's debug file costs
//! about 25 ms for a few addresses).
//!
//! A stored file holds for the inputs it was made from and nothing else:
//! this build of the tool, this boot, and the mapped file and the separate
//! debug file found for it (or none), each by its [`Version`] (device,
//! inode, size, times, and the unique id of its mount, so that a user's
//! own filesystem image, whose times the user chose, cannot pass for a
//! later mount that gets its device number). A file changed since, a
//! debug file installed, fetched or replaced since, another build of the
//! tool or a reboot make a stored file be ignored and rewritten. Where the
//! kernel gives no unique mount id (before Linux 6.8) nothing is kept.
//! Only results of parses that read everything asked for are kept; a
//! parse that was refused or over its budget leaves nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use crate::sys::cache::CacheDir;
use crate::sys::open::{Opened, Version};

/// The first bytes of a stored file, naming its format.
const MAGIC: &[u8; 16] = b"offwake-names-v1";
/// The largest stored file read or written.
const MAX_FILE: u64 = 64 << 10;
/// The most addresses kept for one file.
const MAX_ENTRIES: usize = 1024;
/// The most names (frames) kept for one address.
const MAX_NAMES: usize = 64;
/// Stored files kept in the directory; past this, the least recently
/// used go when new ones are written.
const MAX_FILES: usize = 256;
/// The prefix of stored files' names.
const PREFIX: &str = "names-";

/// The separate debug file a file's names were read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DebugFile {
    /// None was found (or the file has DWARF of its own).
    Absent,
    Found(Version),
    /// One was found whose version is unknown: nothing is kept.
    Unversioned,
}

impl DebugFile {
    /// The debug file `found`, if any.
    pub(crate) fn of(found: Option<&Opened>) -> DebugFile {
        match found {
            None => DebugFile::Absent,
            Some(o) => o.version.map_or(DebugFile::Unversioned, DebugFile::Found),
        }
    }
}

/// This build of the tool and this boot: the tool's version, its
/// executable's device, inode, size and times, and the boot id (mount ids
/// are unique within a boot only). `None` when any is unknown.
fn tool() -> Option<&'static [u8]> {
    static TOOL: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    TOOL.get_or_init(|| {
        let mut out = env!("CARGO_PKG_VERSION").as_bytes().to_vec();
        out.push(0);
        let exe = nix::sys::stat::stat("/proc/self/exe").ok()?;
        for v in [
            exe.st_dev,
            exe.st_ino,
            exe.st_size as u64,
            exe.st_mtime as u64,
            exe.st_mtime_nsec as u64,
            exe.st_ctime as u64,
            exe.st_ctime_nsec as u64,
        ] {
            out.extend(v.to_le_bytes());
        }
        let boot: String = crate::sys::host::kernel_sysctl("random/boot_id")?;
        out.extend(boot.as_bytes());
        Some(out)
    })
    .as_deref()
}

/// What a stored file must begin with to hold for the file of version
/// `file` read with debug file `debug`; `None` when nothing may be kept
/// for them.
fn header(tool: &[u8], file: Version, debug: DebugFile) -> Option<Vec<u8>> {
    let mut out = MAGIC.to_vec();
    out.extend((tool.len() as u32).to_le_bytes());
    out.extend(tool);
    let debug = match debug {
        DebugFile::Absent => None,
        DebugFile::Found(v) => Some(v),
        DebugFile::Unversioned => return None,
    };
    for v in [Some(file), debug] {
        out.push(u8::from(v.is_some()));
        v.unwrap_or(Version([0; 6]))
            .0
            .iter()
            .for_each(|x| out.extend(x.to_le_bytes()));
    }
    Some(out)
}

/// The names of one file's addresses, as stored and as added in this run.
#[derive(Debug)]
pub(crate) struct Kept {
    name: String,
    header: Vec<u8>,
    /// The debug file it was made with.
    pub(crate) debug: DebugFile,
    names: BTreeMap<u64, Arc<[String]>>,
    /// Added to since read.
    dirty: bool,
    /// Read from the directory (else new).
    existed: bool,
    /// Gave names this run.
    used: bool,
}

impl Kept {
    /// What `dir` holds for the file of version `file`, read with debug
    /// file `debug`, if it was made from the same inputs; else nothing yet.
    /// `None` when nothing may be kept for them (a version unknown).
    pub(crate) fn load(dir: &CacheDir, file: Version, debug: DebugFile) -> Option<Kept> {
        let header = header(tool()?, file, debug)?;
        let name = format!("{PREFIX}{:x}-{:x}", file.0[0], file.0[1]);
        let bytes = dir.read_small(&name, MAX_FILE);
        let existed = bytes.is_some();
        let names = bytes
            .as_deref()
            .and_then(|b| decode(b, &header))
            .unwrap_or_default();
        Some(Kept {
            name,
            header,
            debug,
            names,
            dirty: false,
            existed,
            used: false,
        })
    }

    /// The names kept for file offset `off`, if any.
    pub(crate) fn get(&mut self, off: u64) -> Option<Arc<[String]>> {
        let names = self.names.get(&off).cloned();
        self.used |= names.is_some();
        names
    }

    /// Keeps `names` for file offset `off`, within the bounds.
    pub(crate) fn add(&mut self, off: u64, names: &Arc<[String]>) {
        if self.names.len() >= MAX_ENTRIES || names.len() > MAX_NAMES {
            return;
        }
        if self.names.insert(off, Arc::clone(names)).is_none() {
            self.dirty = true;
        }
    }

    /// Writes what was added, if anything and if it fits; else marks a
    /// file that gave names as recently used. Best effort.
    fn store(&mut self, dir: &CacheDir) {
        if !self.dirty {
            if self.used && self.existed {
                dir.touch(&self.name);
            }
            return;
        }
        self.dirty = false;
        let bytes = encode(&self.header, &self.names);
        if bytes.len() as u64 > MAX_FILE {
            return;
        }
        if dir.write_small(&self.name, &bytes).is_ok() {
            self.existed = true;
        }
    }

    /// True when storing it makes a new file.
    fn is_new(&self) -> bool {
        self.dirty && !self.existed
    }
}

/// Stores what `kept` added: at most [`MAX_FILES`] new files, for which
/// the least recently used of earlier runs make room first.
pub(crate) fn store_all<'a>(dir: &CacheDir, kept: impl Iterator<Item = &'a mut Kept>) {
    let mut kept: Vec<&mut Kept> = kept.collect();
    let mut new = 0;
    for k in &mut kept {
        if k.is_new() {
            if new == MAX_FILES {
                k.dirty = false;
            } else {
                new += 1;
            }
        }
    }
    if new > 0 {
        dir.prune(PREFIX, MAX_FILES - new);
    }
    for k in &mut kept {
        k.store(dir);
    }
}

/// `header`, then per address: its offset (u64), its number of names
/// (u16), and each name's length (u16) and bytes.
fn encode(header: &[u8], names: &BTreeMap<u64, Arc<[String]>>) -> Vec<u8> {
    let mut out = header.to_vec();
    out.extend((names.len() as u32).to_le_bytes());
    for (off, list) in names {
        out.extend(off.to_le_bytes());
        out.extend((list.len() as u16).to_le_bytes());
        for n in list.iter() {
            let n = &n.as_bytes()[..n.len().min(u16::MAX as usize)];
            out.extend((n.len() as u16).to_le_bytes());
            out.extend(n);
        }
    }
    out
}

/// The names in `bytes` if it begins with `header` and is whole.
fn decode(bytes: &[u8], header: &[u8]) -> Option<BTreeMap<u64, Arc<[String]>>> {
    let mut rest = bytes.strip_prefix(header)?;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (a, b) = rest.split_at_checked(n)?;
        rest = b;
        Some(a)
    };
    let count = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
    if count > MAX_ENTRIES {
        return None;
    }
    let mut out = BTreeMap::new();
    for _ in 0..count {
        let off = u64::from_le_bytes(take(8)?.try_into().ok()?);
        let n = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
        if n > MAX_NAMES {
            return None;
        }
        let mut list = Vec::with_capacity(n);
        for _ in 0..n {
            let len = u16::from_le_bytes(take(2)?.try_into().ok()?) as usize;
            list.push(String::from_utf8(take(len)?.to_vec()).ok()?);
        }
        out.insert(off, Arc::from(list));
    }
    rest.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(v: u64) -> Version {
        Version([v, 2, 3, 4, 5, 6])
    }

    fn names(list: &[&str]) -> Arc<[String]> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const TOOL: &[u8] = b"0.1.0\0build and boot";

    #[test]
    fn names_come_back_only_for_the_same_inputs() {
        let h = header(TOOL, version(1), DebugFile::Found(version(9))).unwrap();
        let mut m = BTreeMap::new();
        m.insert(0x1234, names(&["inner", "outer"]));
        m.insert(0x10, names(&[]));
        m.insert(0x99, names(&["a\tb\nc", "ünïcode"]));
        let bytes = encode(&h, &m);
        assert_eq!(decode(&bytes, &h), Some(m.clone()));
        for other in [
            header(TOOL, version(7), DebugFile::Found(version(9))),
            header(TOOL, version(1), DebugFile::Found(version(8))),
            header(TOOL, version(1), DebugFile::Absent),
            header(
                b"0.1.0\0another boot",
                version(1),
                DebugFile::Found(version(9)),
            ),
        ] {
            assert_eq!(decode(&bytes, &other.unwrap()), None);
        }
        assert_eq!(header(TOOL, version(1), DebugFile::Unversioned), None);
        // Cut anywhere, or with bytes after it: ignored.
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], &h), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer, &h), None);
    }

    #[test]
    fn one_run_writes_at_most_the_files_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("offwake-persist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let cache = CacheDir::at(&dir).unwrap();
        let mut kept: Vec<Kept> = (0..MAX_FILES as u64 + 40)
            .map(|i| {
                let mut k = Kept::load(&cache, version(i), DebugFile::Absent).unwrap();
                k.add(0x10, &names(&["f"]));
                k
            })
            .collect();
        store_all(&cache, kept.iter_mut());
        let count = || std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(count(), MAX_FILES);
        // What one file kept comes back for the same inputs.
        let mut again = Kept::load(&cache, version(3), DebugFile::Absent).unwrap();
        assert_eq!(again.get(0x10), Some(names(&["f"])));
        assert_eq!(again.get(0x11), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn claims_past_the_bounds_are_refused() {
        let h = header(TOOL, version(1), DebugFile::Absent).unwrap();
        let mut bytes = h.clone();
        bytes.extend((MAX_ENTRIES as u32 + 1).to_le_bytes());
        assert_eq!(decode(&bytes, &h), None);
        let mut bytes = h.clone();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(u16::MAX.to_le_bytes());
        assert_eq!(decode(&bytes, &h), None);
        // Invalid UTF-8.
        let mut bytes = h.clone();
        bytes.extend(1u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(1u16.to_le_bytes());
        bytes.extend(1u16.to_le_bytes());
        bytes.push(0xff);
        assert_eq!(decode(&bytes, &h), None);
    }
}
