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
//! directory above it could have been written by another user.
//!
//! Symbols of BPF programs and ftrace trampolines come and go without a
//! module changing, so they are left out: a frame in one resolves, as
//! without kallsyms, to the symbol below it.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat, mkdirat};

use super::Tables;
use crate::bytes::Cursor;
use crate::probes::ProbeRanges;
use crate::symbolize::kernel::{KernelSymbols, Parts};

const FILE: &str = "kallsyms";
/// The format's name and version: bumped whenever the file's layout or
/// what the tables hold changes.
const MAGIC: &[u8; 16] = b"offwake-ksyms-v1";
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
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
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
        Some(Key::new(boot.trim(), &build_id, &modules))
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
            return Some(note.desc().iter().map(|b| format!("{b:02x}")).collect());
        }
    }
    None
}

/// The cache directory, opened and checked.
#[derive(Debug)]
pub(crate) struct CacheDir(OwnedFd);

impl CacheDir {
    /// `$XDG_CACHE_HOME/offwake-perf`, else `$HOME/.cache/offwake-perf`,
    /// created (mode 0700) when missing; `None` when neither variable is
    /// set to an absolute path or the directory is not safe to use.
    pub(crate) fn open() -> Option<CacheDir> {
        // Relative paths are ignored, as the XDG specification asks.
        let var = |name| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        // Only `offwake-perf`, and `.cache` under $HOME, are created: a
        // mistyped variable makes no directories elsewhere.
        let (base, creatable) = match (var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(x), _) => (x, 1),
            (None, Some(h)) => (h.join(".cache"), 2),
            (None, None) => return None,
        };
        let root = openat(
            nix::fcntl::AT_FDCWD,
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        CacheDir::open_under(root, &base.join("offwake-perf"), creatable).ok()
    }

    /// `path` (absolute, or relative to `root`) under the trusted directory
    /// `root`: every directory on the way must belong to root or to this
    /// user, be writable by no one else and not be on a FUSE filesystem
    /// (whose server, a process, says what it likes and may never answer).
    /// The last `creatable` components are created (mode 0700) if missing.
    fn open_under(root: OwnedFd, path: &Path, creatable: usize) -> Result<CacheDir> {
        let mut dir = root;
        trusted(&dir).context("the starting directory")?;
        let count = path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        let mut seen = 0;
        for component in path.components() {
            let name: &OsStr = match component {
                Component::RootDir | Component::CurDir => continue,
                Component::Normal(name) => name,
                Component::ParentDir | Component::Prefix(_) => {
                    bail!("{} has a `..`", path.display())
                }
            };
            seen += 1;
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let next = match openat(&dir, name, flags, Mode::empty()) {
                Err(Errno::ENOENT) if seen + creatable > count => {
                    match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(e).context("creating the cache directory"),
                    }
                    openat(&dir, name, flags, Mode::empty())
                }
                other => other,
            }
            .with_context(|| format!("opening {}", name.to_string_lossy()))?;
            trusted(&next).with_context(|| name.to_string_lossy().into_owned())?;
            dir = next;
        }
        Ok(CacheDir(dir))
    }

    /// The tables stored for `key`, if any and whole.
    pub(crate) fn load(&self, key: &Key) -> Option<Tables> {
        let file = openat(
            &self.0,
            FILE,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let st = fstat(&file).ok()?;
        let me = nix::unistd::geteuid().as_raw();
        let regular = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
        if !regular || st.st_uid != me || st.st_mode & 0o077 != 0 || st.st_size as u64 > MAX_FILE {
            return None;
        }
        let mut bytes = Vec::with_capacity(st.st_size as usize);
        std::fs::File::from(file)
            .take(MAX_FILE)
            .read_to_end(&mut bytes)
            .ok()?;
        decode(&bytes, key)
    }

    /// Stores `tables` for `key`, replacing what was there at once.
    pub(crate) fn store(&self, key: &Key, tables: &Tables) -> Result<()> {
        let bytes = encode(key, tables);
        let tmp = format!(".{FILE}.{}.tmp", std::process::id());
        // One left by a run killed while writing, whose pid this is now.
        let _ = nix::unistd::unlinkat(
            &self.0,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        let file = openat(
            &self.0,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .context("creating the kallsyms cache")?;
        let written = std::fs::File::from(file).write_all(&bytes);
        let renamed = written
            .map_err(anyhow::Error::from)
            .and_then(|()| Ok(nix::fcntl::renameat(&self.0, tmp.as_str(), &self.0, FILE)?));
        if renamed.is_err() {
            let _ = nix::unistd::unlinkat(
                &self.0,
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        renamed.context("writing the kallsyms cache")
    }
}

/// A directory this user may rely on: owned by root or by this user, and
/// writable by no other, or root's and sticky (as `/tmp` is: no one else
/// can then replace what this user made in it).
fn trusted(dir: &impl AsFd) -> Result<()> {
    let st = fstat(dir.as_fd())?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me {
        bail!("owned by another user (uid {})", st.st_uid);
    }
    if nix::sys::statfs::fstatfs(dir.as_fd())?.filesystem_type()
        == nix::sys::statfs::FUSE_SUPER_MAGIC
    {
        bail!("on a FUSE filesystem");
    }
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    if st.st_mode & 0o022 != 0 && !(sticky && st.st_uid == 0) {
        bail!("writable by others (mode {:o})", st.st_mode & 0o7777);
    }
    Ok(())
}

fn encode(key: &Key, tables: &Tables) -> Vec<u8> {
    let (ranges, irq) = tables.probes.parts();
    let (addrs, ends, names, hidden, text) = tables.symbols.parts();
    let mut b = Vec::with_capacity(64 + key.0.len() + addrs.len() * 12 + names.len());
    b.extend_from_slice(MAGIC);
    let len = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_ne_bytes();
    b.extend_from_slice(&len(key.0.len()));
    b.extend_from_slice(key.0.as_bytes());
    b.extend_from_slice(&text.unwrap_or(0).to_ne_bytes());
    b.push(u8::from(hidden));
    // The interrupt entry range, when there is one, comes last.
    b.extend_from_slice(&len(ranges.len() + usize::from(irq.is_some())));
    for (s, e) in ranges.iter().chain(irq.iter()) {
        b.extend_from_slice(&s.to_ne_bytes());
        b.extend_from_slice(&e.to_ne_bytes());
    }
    b.push(u8::from(irq.is_some()));
    b.extend_from_slice(&len(addrs.len()));
    addrs
        .iter()
        .for_each(|a| b.extend_from_slice(&a.to_ne_bytes()));
    ends.iter()
        .for_each(|e| b.extend_from_slice(&e.to_ne_bytes()));
    b.extend_from_slice(&len(names.len()));
    b.extend_from_slice(names.as_bytes());
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_ne_bytes());
    b
}

/// The tables in `bytes`, when they were stored for `key` and are whole.
fn decode(bytes: &[u8], key: &Key) -> Option<Tables> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32fast::hash(body) != u32::from_ne_bytes(*crc) {
        return None;
    }
    let mut c = Cursor::new(body);
    let count = |c: &mut Cursor<'_>| c.u32().ok().map(|n| n as usize);
    if c.take(MAGIC.len()).ok()? != MAGIC {
        return None;
    }
    let key_len = count(&mut c)?;
    if c.take(key_len).ok()? != key.0.as_bytes() {
        return None;
    }
    let text = Some(c.u64().ok()?).filter(|&t| t != 0);
    let hidden = c.take(1).ok()? != [0];
    let n_ranges = count(&mut c)?;
    // Each count is checked against the bytes left before anything is
    // allocated for it.
    let pairs = c.take(n_ranges.checked_mul(16)?).ok()?;
    let mut ranges: Vec<(u64, u64)> = pairs
        .chunks_exact(16)
        .map(|p| {
            let mut p = Cursor::new(p);
            (p.u64().unwrap_or(0), p.u64().unwrap_or(0))
        })
        .collect();
    let has_irq = c.take(1).ok()? != [0];
    // The interrupt entry range, when stored, follows the others.
    let irq = if has_irq { ranges.pop() } else { None };
    let n = count(&mut c)?;
    let addrs = c.take(n.checked_mul(8)?).ok()?;
    let ends = c.take(n.checked_mul(4)?).ok()?;
    let names_len = count(&mut c)?;
    let names = std::str::from_utf8(c.take(names_len).ok()?).ok()?;
    if !c.rest().is_empty() {
        return None;
    }
    let symbols = KernelSymbols::from_parts(Parts {
        addrs: crate::bytes::u64s(addrs).collect(),
        ends: ends
            .chunks_exact(4)
            .map(|e| crate::bytes::u32_at(e, 0).unwrap_or(0))
            .collect(),
        names: names.to_string(),
        hidden,
        text,
    })?;
    Some(Tables {
        probes: ProbeRanges::from_parts(ranges, irq)?,
        symbols: std::sync::Arc::new(symbols),
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
    let mut head = Vec::with_capacity(HEAD);
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

    #[test]
    fn hostile_counts_are_refused_without_allocating() {
        // A valid checksum over a body that claims 4 billion symbols.
        let mut b = MAGIC.to_vec();
        let k = key();
        b.extend_from_slice(&(k.0.len() as u32).to_ne_bytes());
        b.extend_from_slice(k.0.as_bytes());
        b.extend_from_slice(&0u64.to_ne_bytes());
        b.push(0);
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.push(0);
        b.extend_from_slice(&u32::MAX.to_ne_bytes());
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_ne_bytes());
        assert!(decode(&b, &k).is_none());
    }

    #[test]
    fn stored_file_is_private_and_read_back() {
        use std::os::unix::fs::MetadataExt;
        let (dir, root) = scratch("store");
        let cache = CacheDir::open_under(root, Path::new("a/offwake-perf"), 2).unwrap();
        let tables = Tables::from_kallsyms(KALLSYMS);
        assert!(cache.load(&key()).is_none());
        cache.store(&key(), &tables).unwrap();
        let file = dir.join("a/offwake-perf/kallsyms");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(dir.join("a")).unwrap().mode() & 0o777,
            0o700
        );
        let back = cache.load(&key()).expect("cached");
        assert_eq!(back.symbols, tables.symbols);
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
        cache
            .store(&key(), &Tables::from_kallsyms(KALLSYMS))
            .unwrap();
        let file = dir.join("c/kallsyms");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(cache.load(&key()).is_none());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(cache.load(&key()).is_some());
        // A link in place of the file is not followed.
        std::fs::rename(&file, dir.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(dir.join("elsewhere"), &file).unwrap();
        assert!(cache.load(&key()).is_none());
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
}
