//! The kernel's symbol tables kept on disk between runs, so that a run
//! need not read all of `/proc/kallsyms` (tens of milliseconds: the kernel
//! formats every line).
//!
//! The file is valid for one boot, one kernel build and one set of loaded
//! modules: its key holds the boot id, the kernel's build-id, the module
//! list and this tool's version, and the first lines of the live kallsyms
//! must agree with it too. It lives in `$XDG_CACHE_HOME/offwake-perf/`
//! (else `~/.cache/offwake-perf/`), is written through a temporary file
//! renamed into place, mode 0600, and is used only when neither it nor any
//! directory above it could have been written by another user. It is
//! mapped, not read: the symbol arrays are used where they lie, checked
//! once (checksum, bounds, order).
//!
//! Symbols of BPF programs and ftrace trampolines come and go without a
//! module changing, so they are left out: a frame in one resolves, as
//! without kallsyms, to the symbol below it.
//!
//! The directory also holds small files of other facts about the boot
//! ([`CacheDir::read_small`], [`CacheDir::write_small`]; see
//! `crate::source::perf::abilities`), checked and written the same way.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::Tables;
use crate::bytes::{u32_at, u64_at};
use crate::kallsyms::machinery::ProbeRanges;
use crate::kallsyms::table::{self, KernelSymbols};
use crate::sys::cache::CacheDir;

const FILE: &str = "kallsyms";
/// The format's name and version: bumped whenever the file's layout or
/// what the tables hold changes.
const MAGIC: &[u8; 16] = b"offwake-ksyms-v2";
/// Larger than any kernel's table (about 5 MB for 120,000 symbols).
const MAX_FILE: u64 = 64 << 20;
/// How much of the live kallsyms may be read to compare with the cache.
const HEAD: usize = 64 << 10;
/// How many of its first text symbols are compared.
const HEAD_SYMBOLS: usize = 32;

/// What the cached tables must have been made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key(String);

impl Key {
    /// This boot, kernel and module list; `None` without a boot id.
    pub(crate) fn current() -> Option<Key> {
        let boot: String = crate::sys::host::kernel_sysctl("random/boot_id")?;
        let build_id = std::fs::read("/sys/kernel/notes")
            .ok()
            .and_then(|n| build_id(&n))
            .unwrap_or_default();
        // Absent without module support; any other failure leaves the
        // module list unknown, and no key.
        let modules = match std::fs::read_to_string("/proc/modules") {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(_) => return None,
        };
        Some(Key::new(&boot, &build_id, &modules))
    }

    fn new(boot: &str, build_id: &str, modules: &str) -> Key {
        let mut key = format!(
            "offwake-perf {}\nboot {boot}\nbuild-id {build_id}\n",
            env!("CARGO_PKG_VERSION")
        );
        // Name, size and address: use counts change all the time.
        for line in modules.lines() {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if let (Some(name), Some(size), Some(addr)) = (f.first(), f.get(1), f.get(5)) {
                key.push_str(&format!("module {name} {size} {addr}\n"));
            }
        }
        Key(key)
    }
}

/// The GNU build-id in the kernel's notes, in hex.
fn build_id(notes: &[u8]) -> Option<String> {
    use object::NativeEndian;
    use object::elf::{FileHeader64, NT_GNU_BUILD_ID};
    use object::read::elf::NoteIterator;
    let mut it = NoteIterator::<FileHeader64<NativeEndian>>::new(NativeEndian, 4, notes).ok()?;
    while let Ok(Some(note)) = it.next() {
        if note.name() == b"GNU" && note.n_type(NativeEndian) == NT_GNU_BUILD_ID {
            return Some(crate::bytes::hex_string(note.desc()));
        }
    }
    None
}

/// The tables stored for `key`, if any and whole.
pub(crate) fn load(dir: &CacheDir, key: &Key) -> Option<Tables> {
    let file = dir.open_own(FILE, MAX_FILE)?;
    // SAFETY: the mapping is only read, and the file does not change
    // under it: it is this user's, mode 0600 in a directory no other
    // user can write (checked above and on the way), and is replaced
    // only by renaming a new file over it, never written in place.
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.ok()?;
    decode(map, key)
}

/// Stores `tables` for `key`, replacing what was there at once.
#[cfg(test)]
pub(crate) fn store(dir: &CacheDir, key: &Key, tables: &Tables) -> Result<()> {
    prepare(dir, key, tables)?
        .write()
        .context("writing the kallsyms cache")
}

/// What storing `tables` for `key` takes, prepared so that
/// [`Store::write`] need not allocate.
pub(crate) fn prepare(dir: &CacheDir, key: &Key, tables: &Tables) -> Result<Store> {
    let dir = dir
        .fd()
        .try_clone_to_owned()
        .context("duplicating a descriptor")?;
    let tmp = CString::new(format!(".{FILE}.{}.tmp", std::process::id()))
        .context("naming the cache's temporary file")?;
    Ok(Store {
        dir,
        tmp,
        head: head(key, tables),
        symbols: Arc::clone(&tables.symbols),
    })
}

/// Tables ready to be written to the cache directory.
pub(crate) struct Store {
    dir: OwnedFd,
    /// The temporary file's name, renamed to [`FILE`] once written.
    tmp: CString,
    /// The file up to the symbol arrays (see [`head`]).
    head: Vec<u8>,
    symbols: Arc<KernelSymbols>,
}

impl Store {
    /// The descriptor [`Store::write`] uses.
    pub(crate) fn dir_fd(&self) -> std::os::fd::RawFd {
        self.dir.as_raw_fd()
    }

    /// Writes the file: through the temporary file, mode 0600, renamed
    /// into place. Async-signal-safe (plain system calls on memory this
    /// value holds; no allocation, no lock), so that a child forked from
    /// this multithreaded process may do it.
    pub(crate) fn write(&self) -> std::io::Result<()> {
        let (dir, tmp) = (self.dir.as_raw_fd(), self.tmp.as_ptr());
        let unlink = || {
            // SAFETY: unlinkat reads a C string this value holds.
            unsafe { libc::unlinkat(dir, tmp, 0) }
        };
        // One left by a run killed while writing, whose pid this is now.
        unlink();
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: openat reads a C string this value holds.
        let fd = unsafe { libc::openat(dir, tmp, flags, 0o600 as libc::c_uint) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened, and is owned by nothing else.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let written = write_tables(&self.head, &self.symbols, &mut file);
        drop(file);
        // SAFETY: renameat reads C strings this value holds or static ones.
        let renamed = written.and_then(|()| {
            match unsafe { libc::renameat(dir, tmp, dir, FILE_C.as_ptr()) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
        if renamed.is_err() {
            unlink();
        }
        renamed
    }
}

/// The file: `head` (see [`head`]), then the arrays of `symbols` and the
/// checksum. Allocates nothing.
fn write_tables(head: &[u8], symbols: &KernelSymbols, out: &mut impl Write) -> std::io::Result<()> {
    let (addrs, ends, names, _, _) = symbols.parts();
    let ends = table::u32_bytes(ends);
    let pieces = [
        head,
        table::u64_bytes(addrs),
        ends,
        &[0; 8][..padding(ends.len())],
        names,
    ];
    let mut crc = crc32fast::Hasher::new();
    for piece in pieces {
        crc.update(piece);
        out.write_all(piece)?;
    }
    out.write_all(&crc.finalize().to_ne_bytes())
}

/// [`FILE`], for system calls.
const FILE_C: &std::ffi::CStr = c"kallsyms";

// The file, all in native byte order, every array at an offset aligned
// for its elements (the mapping starts on a page):
//
//   0  MAGIC
//  16  u32 key length, u32 probe ranges, u32 symbols, u32 name bytes
//  32  u64 `_text` (0: unknown)
//  40  u8 hidden, u8 whether the last range is the interrupt entry's,
//      six zero bytes
//  48  the key, zero-padded to a multiple of 8
//      probe ranges: u64 start, u64 end each
//      symbol addresses: u64 each
//      name ends: u32 each, zero-padded to a multiple of 8
//      names
//      u32 CRC-32 of everything before it

/// Where the key starts.
const KEY_AT: usize = 48;

/// The zero bytes after `len` bytes that reach a multiple of 8.
fn padding(len: usize) -> usize {
    len.wrapping_neg() % 8
}

/// The file up to the symbol addresses.
fn head(key: &Key, tables: &Tables) -> Vec<u8> {
    let (ranges, irq) = tables.probes.parts();
    let (addrs, _, names, hidden, text) = tables.symbols.parts();
    let n_ranges = ranges.len() + usize::from(irq.is_some());
    let mut b = Vec::with_capacity(KEY_AT + key.0.len() + 8 + n_ranges * 16);
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_ne_bytes();
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&len(key.0.len()));
    b.extend_from_slice(&len(n_ranges));
    b.extend_from_slice(&len(addrs.len()));
    b.extend_from_slice(&len(names.len()));
    b.extend_from_slice(&text.unwrap_or(0).to_ne_bytes());
    b.extend_from_slice(&[u8::from(hidden), u8::from(irq.is_some()), 0, 0, 0, 0, 0, 0]);
    debug_assert_eq!(b.len(), KEY_AT);
    b.extend_from_slice(key.0.as_bytes());
    b.resize(b.len() + padding(key.0.len()), 0);
    // The interrupt entry range, when there is one, comes last.
    for (s, e) in ranges.iter().chain(irq.iter()) {
        b.extend_from_slice(&s.to_ne_bytes());
        b.extend_from_slice(&e.to_ne_bytes());
    }
    b
}

/// The tables in `map`, when they were stored for `key` and are whole;
/// the symbol arrays stay in the mapping.
fn decode(map: memmap2::Mmap, key: &Key) -> Option<Tables> {
    let (body, crc) = map.split_last_chunk::<4>()?;
    if body.get(..MAGIC.len())? != MAGIC || crc32fast::hash(body) != u32::from_ne_bytes(*crc) {
        return None;
    }
    let count = |at: usize| u32_at(body, at).map(|n| n as usize);
    let (key_len, n_ranges, n, names_len) = (count(16)?, count(20)?, count(24)?, count(28)?);
    let text = Some(u64_at(body, 32)?).filter(|&t| t != 0);
    let hidden = *body.get(40)? != 0;
    let has_irq = *body.get(41)? != 0;
    // Each part's end is checked against the file before anything is
    // allocated for it.
    let mut at = KEY_AT;
    let mut part = |len: Option<usize>, pad: bool| -> Option<std::ops::Range<usize>> {
        let start = at;
        let end = start.checked_add(len?)?;
        at = end.checked_add(if pad { padding(end) } else { 0 })?;
        (at <= body.len()).then_some(start..end)
    };
    let key_at = part(Some(key_len), true)?;
    let ranges_at = part(n_ranges.checked_mul(16), false)?;
    let addrs = part(n.checked_mul(8), false)?;
    let ends = part(n.checked_mul(4), true)?;
    let names = part(Some(names_len), false)?;
    if at != body.len() || body.get(key_at)? != key.0.as_bytes() {
        return None;
    }
    let mut ranges: Vec<(u64, u64)> = body
        .get(ranges_at)?
        .chunks_exact(16)
        .map(|p| (u64_at(p, 0).unwrap_or(0), u64_at(p, 8).unwrap_or(0)))
        .collect();
    // The interrupt entry range, when stored, follows the others.
    let irq = if has_irq { ranges.pop() } else { None };
    let probes = ProbeRanges::from_parts(ranges, irq)?;
    let symbols = KernelSymbols::mapped(map, addrs, ends, names, hidden, text)?;
    Some(Tables {
        probes,
        symbols: Arc::new(symbols),
    })
}

/// Whether the first lines of the live kallsyms agree with `tables`: the
/// first text symbols there (at least one, at most [`HEAD_SYMBOLS`], in
/// at most [`HEAD`] bytes: kernels built with all symbols list hundreds of
/// per-CPU ones first) are at addresses the tables have, and `_text` is
/// where they say. Cheap: the kernel formats only what is read.
pub(crate) fn head_agrees(tables: &Tables) -> bool {
    std::fs::File::open("/proc/kallsyms").is_ok_and(|f| agrees(tables, f))
}

/// [`head_agrees`] with the listing read from `file`.
fn agrees(tables: &Tables, mut file: impl Read) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let mut checked = 0;
    let mut from = 0;
    while head.len() < HEAD && checked < HEAD_SYMBOLS {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) => return false,
        };
        head.extend_from_slice(&buf[..n]);
        // The whole lines not looked at yet.
        let Some(end) = head.iter().rposition(|&b| b == b'\n') else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&head[from..=end]) else {
            return false;
        };
        for sym in super::symbols(text) {
            if sym.name == "_text"
                && sym.module.is_none()
                && tables.symbols.text() != Some(sym.addr)
            {
                return false;
            }
            if !matches!(sym.kind, "t" | "T" | "w" | "W") {
                continue;
            }
            if sym.addr == 0 || !tables.symbols.has_address(sym.addr) {
                return false;
            }
            checked += 1;
        }
        from = end + 1;
    }
    checked > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    use std::path::{Path, PathBuf};

    const KALLSYMS: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T _stext
ffffffff81000100 t trace_event_raw_event_sched_switch
ffffffff81000200 T __schedule
ffffffff81000300 T __irqentry_text_start
ffffffff81000380 T __irqentry_text_end
ffffffff81000400 T schedule
ffffffffc0001000 t mod_function\t[mymod]
";

    fn key() -> Key {
        Key::new(
            "boot-1",
            "abcd",
            "mymod 16384 0 - Live 0xffffffffc0001000\n",
        )
    }

    /// `dir`, opened to start a walk from.
    fn reopen(dir: &Path) -> OwnedFd {
        openat(
            nix::fcntl::AT_FDCWD,
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    /// A fresh directory, trusted as a root would be.
    fn scratch(tag: &str) -> (PathBuf, OwnedFd) {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("offwake-ksyms-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let fd = reopen(&dir);
        (dir, fd)
    }

    fn encode(key: &Key, tables: &Tables) -> Vec<u8> {
        let mut b = Vec::new();
        write_tables(&head(key, tables), &tables.symbols, &mut b).unwrap();
        b
    }

    /// `bytes` in a mapping of their own, as a file's would be.
    fn mapped(bytes: &[u8]) -> Option<memmap2::Mmap> {
        let mut map = memmap2::MmapMut::map_anon(bytes.len()).ok()?;
        map.copy_from_slice(bytes);
        map.make_read_only().ok()
    }

    fn decode(bytes: &[u8], key: &Key) -> Option<Tables> {
        super::decode(mapped(bytes)?, key)
    }

    #[test]
    fn tables_come_back_as_they_were_stored() {
        let tables = Tables::from_kallsyms(KALLSYMS);
        let bytes = encode(&key(), &tables);
        let back = decode(&bytes, &key()).expect("decoded");
        assert_eq!(back.symbols, tables.symbols);
        assert_eq!(back.probes.parts(), tables.probes.parts());
        assert_eq!(
            back.symbols.lookup(0xffffffffc0001010),
            Some("mod_function")
        );
        assert!(back.probes.parts().1.is_some());
    }

    #[test]
    fn another_key_or_any_damage_is_refused() {
        let tables = Tables::from_kallsyms(KALLSYMS);
        let bytes = encode(&key(), &tables);
        let other = Key::new(
            "boot-2",
            "abcd",
            "mymod 16384 0 - Live 0xffffffffc0001000\n",
        );
        assert!(decode(&bytes, &other).is_none());
        let moved = Key::new(
            "boot-1",
            "abcd",
            "mymod 16384 0 - Live 0xffffffffc0002000\n",
        );
        assert!(decode(&bytes, &moved).is_none());
        // A module's use count is not part of the key.
        let used = Key::new(
            "boot-1",
            "abcd",
            "mymod 16384 3 - Live 0xffffffffc0001000\n",
        );
        assert!(decode(&bytes, &used).is_some());
        for cut in [0, 1, 20, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut], &key()).is_none(), "cut at {cut}");
        }
        for at in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad, &key()).is_none(), "flipped byte {at}");
        }
    }

    /// `bytes` with the u32 at `at` set to `value` and the checksum
    /// made right again: damage only the checks past the CRC can see.
    fn patched(bytes: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[at..at + value.len()].copy_from_slice(value);
        let body = b.len() - 4;
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_ne_bytes());
        b
    }

    #[test]
    fn hostile_counts_are_refused_without_allocating() {
        let bytes = encode(&key(), &Tables::from_kallsyms(KALLSYMS));
        assert!(decode(&patched(&bytes, 0, &[]), &key()).is_some());
        // Key length, ranges, symbols, name bytes: each claiming 4 billion,
        // or one more or less than there is.
        for at in [16, 20, 24, 28] {
            let n = u32_at(&bytes, at).unwrap();
            for bad in [u32::MAX, n + 1, n.wrapping_sub(1)] {
                let b = patched(&bytes, at, &bad.to_ne_bytes());
                assert!(decode(&b, &key()).is_none(), "{bad} at {at}");
            }
        }
    }

    #[test]
    fn unsorted_or_overrunning_arrays_are_refused() {
        let tables = Tables::from_kallsyms(KALLSYMS);
        let bytes = encode(&key(), &tables);
        let (addrs, ends, _, _, _) = tables.symbols.parts();
        let n_ranges = u32_at(&bytes, 20).unwrap() as usize;
        let addrs_at = KEY_AT + key().0.len() + padding(key().0.len()) + n_ranges * 16;
        assert_eq!(u64_at(&bytes, addrs_at), Some(addrs[0]));
        // The first address moved past the second.
        let b = patched(&bytes, addrs_at, &(addrs[1] + 1).to_ne_bytes());
        assert!(decode(&b, &key()).is_none());
        // The last name ending past the names.
        let last_end = addrs_at + addrs.len() * 8 + (ends.len() - 1) * 4;
        assert_eq!(u32_at(&bytes, last_end), ends.last().copied());
        let b = patched(&bytes, last_end, &u32::MAX.to_ne_bytes());
        assert!(decode(&b, &key()).is_none());
        // A name that is not UTF-8 is no name, the others still are.
        let names_at = bytes.len() - 4 - tables.symbols.parts().2.len();
        let b = patched(&bytes, names_at, &[0xff]);
        let back = decode(&b, &key()).expect("still whole");
        assert_eq!(back.symbols.lookup(addrs[0]), None);
        assert_eq!(
            back.symbols.lookup(0xffffffffc0001010),
            Some("mod_function")
        );
    }

    #[test]
    fn pruning_removes_the_oldest_of_a_prefix_only() {
        let (dir, _) = scratch("prune");
        let cache = CacheDir::at(&dir).unwrap();
        for i in 0..5 {
            cache.write_small(&format!("names-{i}"), b"x").unwrap();
            // Distinct modification times, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i);
            std::fs::File::options()
                .write(true)
                .open(dir.join(format!("names-{i}")))
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        cache.write_small("kallsyms-other", b"y").unwrap();
        cache.prune("names-", 3);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["kallsyms-other", "names-2", "names-3", "names-4"]);
        cache.prune("names-", 3);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            4,
            "nothing past the bound"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stored_file_is_private_and_read_back() {
        use std::os::unix::fs::MetadataExt;
        let (dir, root) = scratch("store");
        let cache = CacheDir::open_under(root, Path::new("a/offwake-perf"), 2).unwrap();
        let tables = Tables::from_kallsyms(KALLSYMS);
        assert!(load(&cache, &key()).is_none());
        store(&cache, &key(), &tables).unwrap();
        let file = dir.join("a/offwake-perf/kallsyms");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.join("a")).unwrap().mode() & 0o777,
            0o700
        );
        let back = load(&cache, &key()).expect("cached");
        assert_eq!(back.symbols, tables.symbols);
        assert_eq!(back.symbols.lookup(0xffffffff81000210), Some("__schedule"));
        // Cut short on disk: refused.
        let whole = std::fs::read(&file).unwrap();
        std::fs::write(&file, &whole[..whole.len() - 9]).unwrap();
        assert!(load(&cache, &key()).is_none());
        std::fs::write(&file, &whole).unwrap();
        // No temporary file is left behind.
        assert_eq!(
            std::fs::read_dir(dir.join("a/offwake-perf"))
                .unwrap()
                .count(),
            1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_prepared_early_is_written_later_and_read_back() {
        let (dir, root) = scratch("prepared");
        let cache = CacheDir::open_under(root, Path::new("c"), 1).unwrap();
        let tables = Tables::from_kallsyms(KALLSYMS);
        let store = prepare(&cache, &key(), &tables).unwrap();
        let expected = Tables::from_kallsyms(KALLSYMS);
        drop(tables);
        drop(cache);
        // Only the store's own descriptor is left to write with.
        store.write().unwrap();
        let cache = CacheDir::open_under(reopen(&dir), Path::new("c"), 0).unwrap();
        let back = load(&cache, &key()).expect("stored");
        assert_eq!(back.symbols, expected.symbols);
        assert_eq!(back.probes.parts(), expected.probes.parts());
        // Written again over the first: still one file.
        store.write().unwrap();
        assert_eq!(std::fs::read_dir(dir.join("c")).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_last_directories_are_created() {
        let (dir, root) = scratch("create");
        assert!(CacheDir::open_under(root, Path::new("x/y/offwake-perf"), 2).is_err());
        assert!(!dir.join("x").exists());
        std::fs::create_dir(dir.join("x")).unwrap();
        assert!(CacheDir::open_under(reopen(&dir), Path::new("x/y/offwake-perf"), 2).is_ok());
        assert!(dir.join("x/y/offwake-perf").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_or_directory_others_could_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, root) = scratch("perm");
        let cache = CacheDir::open_under(root, Path::new("c"), 1).unwrap();
        store(&cache, &key(), &Tables::from_kallsyms(KALLSYMS)).unwrap();
        let file = dir.join("c/kallsyms");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(load(&cache, &key()).is_none());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load(&cache, &key()).is_some());
        // A link in place of the file is not followed.
        std::fs::rename(&file, dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &file).unwrap();
        assert!(load(&cache, &key()).is_none());
        // A directory on the way that others may write is refused.
        std::fs::set_permissions(dir.join("c"), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(CacheDir::open_under(reopen(&dir), Path::new("c"), 1).is_err());
        // As is a link on the way.
        std::os::unix::fs::symlink(dir.join("c"), dir.join("d")).unwrap();
        std::fs::set_permissions(dir.join("c"), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(CacheDir::open_under(reopen(&dir), Path::new("d"), 1).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_live_head_agrees_with_a_live_reading_only() {
        let live = Tables::from_kallsyms(&crate::kallsyms::read().unwrap());
        if live.symbols.addresses_hidden() {
            return;
        }
        assert!(head_agrees(&live));
        assert!(!head_agrees(&Tables::from_kallsyms(KALLSYMS)));
    }

    #[test]
    fn the_head_is_compared_past_a_long_run_of_per_cpu_symbols() {
        let tables = Tables::from_kallsyms(KALLSYMS);
        let per_cpu: String = (0..500)
            .map(|i| format!("{:016x} A percpu_{i}\n", i * 8))
            .collect();
        let live = format!("{per_cpu}{KALLSYMS}");
        assert!(agrees(&tables, live.as_bytes()));
        // A text symbol moved (another boot's KASLR), or `_text` elsewhere.
        let moved = live.replace(
            "ffffffff81000200 T __schedule",
            "ffffffff81000210 T __schedule",
        );
        assert!(!agrees(&tables, moved.as_bytes()));
        let text = live.replace("ffffffff81000000 T _text", "ffffffff80000000 T _text");
        assert!(!agrees(&tables, text.as_bytes()));
        // Nothing but per-CPU symbols in the bytes read: not agreed.
        assert!(!agrees(&tables, per_cpu.as_bytes()));
    }

    #[test]
    fn the_kernel_build_id_is_read() {
        let notes = std::fs::read("/sys/kernel/notes").unwrap();
        let id = build_id(&notes).expect("a GNU build-id note");
        assert_eq!(id.len(), 40, "{id}");
    }

    #[test]
    fn small_files_are_replaced_whole_and_read_only_if_private() {
        use std::os::unix::fs::PermissionsExt;
        let (path, fd) = scratch("small");
        let dir = CacheDir::open_under(fd, Path::new(""), 0).unwrap();
        assert_eq!(dir.read_small("facts", 64), None, "nothing written yet");
        dir.write_small("facts", b"first\n").unwrap();
        dir.write_small("facts", b"second\n").unwrap();
        assert_eq!(
            dir.read_small("facts", 64).as_deref(),
            Some(&b"second\n"[..])
        );
        let file = path.join("facts");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // No temporary file is left.
        let names: Vec<_> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["facts"]);
        // Larger than asked: not read.
        assert_eq!(dir.read_small("facts", 3), None);
        // Readable by others: not trusted.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(dir.read_small("facts", 64), None);
        // A link, even to a private file: not followed.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&file, path.join("link")).unwrap();
        assert_eq!(dir.read_small("link", 64), None);
        std::fs::remove_dir_all(&path).unwrap();
    }
}
