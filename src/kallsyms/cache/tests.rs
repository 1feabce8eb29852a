//! Tests of the kallsyms cache: encoding and checking the file, and the
//! trust checks on its directory.

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
