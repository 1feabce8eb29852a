//! Names kept across runs: what a file's addresses resolved to, stored in
//! the cache directory (see [`CacheDir`]) under the file's device and
//! inode, so that the next run of the same program names its frames
//! without expanding and parsing DWARF again (glibc's debug file costs
//! about 25 ms for a few addresses).
//!
//! A stored file holds for the inputs it was made from and nothing else:
//! this build of the tool, the mapped file and the separate debug file
//! found for it (or none), each by device, inode, size, modification and
//! change time. A file changed since (its change time moves on, and no
//! user can move it back), a debug file installed, fetched or replaced
//! since, or another build of the tool make a stored file be ignored and
//! rewritten. Only results of parses that read everything asked for are
//! kept; a parse that was refused or over its budget leaves nothing.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::{Arc, OnceLock};

use crate::kallsyms::cache::CacheDir;

/// The first bytes of a stored file, naming its format.
const MAGIC: &[u8; 16] = b"offwake-names-v1";
/// The largest stored file read or written.
const MAX_FILE: u64 = 64 << 10;
/// The most addresses kept for one file.
const MAX_ENTRIES: usize = 1024;
/// The most names (frames) kept for one address.
const MAX_NAMES: usize = 64;
/// Stored files kept in the directory; past this, the least recently
/// written go when a new one is written.
const MAX_FILES: usize = 256;
/// The prefix of stored files' names.
const PREFIX: &str = "names-";

/// Which version of a file: device, inode, size, and modification and
/// change times (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp([u64; 5]);

impl Stamp {
    /// The stamp of the open file `fd`.
    pub(crate) fn of(fd: impl AsFd) -> Option<Stamp> {
        let st = nix::sys::stat::fstat(fd).ok()?;
        let ns = |s: i64, n: i64| {
            (s as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(n as u64)
        };
        Some(Stamp([
            st.st_dev,
            st.st_ino,
            st.st_size as u64,
            ns(st.st_mtime, st.st_mtime_nsec),
            ns(st.st_ctime, st.st_ctime_nsec),
        ]))
    }
}

/// This build of the tool: its version and its executable's stamp.
fn tool() -> &'static [u8] {
    static TOOL: OnceLock<Vec<u8>> = OnceLock::new();
    TOOL.get_or_init(|| {
        let mut out = env!("CARGO_PKG_VERSION").as_bytes().to_vec();
        out.push(0);
        let exe = std::fs::File::open("/proc/self/exe").ok();
        if let Some(s) = exe.and_then(Stamp::of) {
            s.0.iter().for_each(|v| out.extend(v.to_le_bytes()));
        }
        out
    })
}

/// What a stored file must begin with to hold for a file of stamp `file`
/// whose debug file has stamp `debug`.
fn header(file: Stamp, debug: Option<Stamp>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let tool = tool();
    out.extend((tool.len() as u32).to_le_bytes());
    out.extend(tool);
    for s in std::iter::once(Some(file)).chain(std::iter::once(debug)) {
        out.push(u8::from(s.is_some()));
        s.unwrap_or(Stamp([0; 5]))
            .0
            .iter()
            .for_each(|v| out.extend(v.to_le_bytes()));
    }
    out
}

/// The names of one file's addresses, as stored and as added in this run.
#[derive(Debug)]
pub(crate) struct Kept {
    name: String,
    header: Vec<u8>,
    /// The debug file's stamp it was made with.
    pub(crate) debug: Option<Stamp>,
    pub(crate) names: BTreeMap<u64, Arc<[String]>>,
    /// Added to since read.
    dirty: bool,
    /// Read from the directory (else new).
    existed: bool,
}

impl Kept {
    /// What `dir` holds for the file of device `dev` and inode `ino`, if it
    /// was made from the same inputs; else nothing yet.
    pub(crate) fn load(
        dir: &CacheDir,
        dev: u64,
        ino: u64,
        file: Stamp,
        debug: Option<Stamp>,
    ) -> Kept {
        let name = format!("{PREFIX}{dev:x}-{ino:x}");
        let header = header(file, debug);
        let bytes = dir.read_small(&name, MAX_FILE);
        let existed = bytes.is_some();
        let names = bytes
            .as_deref()
            .and_then(|b| decode(b, &header))
            .unwrap_or_default();
        Kept {
            name,
            header,
            debug,
            names,
            dirty: false,
            existed,
        }
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

    /// Writes what was added, if anything and if it fits; best effort.
    pub(crate) fn store(&mut self, dir: &CacheDir) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let bytes = encode(&self.header, &self.names);
        if bytes.len() as u64 > MAX_FILE {
            return;
        }
        let _ = dir.write_small(&self.name, &bytes);
    }

    /// True when storing it makes a new file.
    pub(crate) fn is_new(&self) -> bool {
        self.dirty && !self.existed
    }
}

/// Stores what `kept` added, first making room for the new files among the
/// stored ones of earlier runs.
pub(crate) fn store_all<'a>(dir: &CacheDir, kept: impl Iterator<Item = &'a mut Kept>) {
    let mut kept: Vec<&mut Kept> = kept.collect();
    let new = kept.iter().filter(|k| k.is_new()).count();
    if new > 0 {
        dir.prune(PREFIX, MAX_FILES.saturating_sub(new));
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

    fn stamp(v: u64) -> Stamp {
        Stamp([v, 2, 3, 4, 5])
    }

    fn names(list: &[&str]) -> Arc<[String]> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_come_back_only_for_the_same_inputs() {
        let h = header(stamp(1), Some(stamp(9)));
        let mut m = BTreeMap::new();
        m.insert(0x1234, names(&["inner", "outer"]));
        m.insert(0x10, names(&[]));
        m.insert(0x99, names(&["a\tb\nc", "ünïcode"]));
        let bytes = encode(&h, &m);
        assert_eq!(decode(&bytes, &h), Some(m.clone()));
        for other in [
            header(stamp(7), Some(stamp(9))),
            header(stamp(1), Some(stamp(8))),
            header(stamp(1), None),
        ] {
            assert_eq!(decode(&bytes, &other), None);
        }
        // Cut anywhere, or with bytes after it: ignored.
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], &h), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer, &h), None);
    }

    #[test]
    fn claims_past_the_bounds_are_refused() {
        let h = header(stamp(1), None);
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
