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
mod tests;
