//! Symbolization against corrupt binaries. Copies of a real ELF with DWARF
//! (compiled on the fly, as in the parent module) are cut at several
//! offsets, or get deterministic garbage over their section headers,
//! program headers, ELF header fields, `.debug_*`, `.symtab`/`.strtab`
//! contents, or a compressed section's header (a lying uncompressed size);
//! an empty file and non-ELF files join them. Each is mapped into the test
//! process's own, real memory map (snapshotted from `/proc/self/maps`), laid
//! out as the kernel maps an executable's text segment, and one request
//! asks for frames in all of them and in intact code.
//!
//! Checked: nothing panics; frames in intact code (the test binary itself,
//! an intact copy) still resolve; a frame in a corrupt copy is `[unknown]`
//! when nothing usable is left, and the right name when the damage spared
//! another source of names (DWARF or the symbol table), never a wrong one.
//!
//! A property test then writes random bytes and boundary values into the
//! header, the header tables and every section of the same binary (plain
//! and with compressed DWARF), and parses and queries the result; seed and
//! case count as in [`crate::proptest_config`].

use std::sync::OnceLock;

use object::ObjectSection;
use proptest::prelude::*;

use super::*;

/// What a frame in a damaged copy must resolve to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// `[unknown]`: nothing usable is left.
    Unknown,
    /// `work`: a source of names survived.
    Work,
}

struct Variant {
    name: String,
    bytes: Vec<u8>,
    /// The intact file this is a damaged copy of (whose layout the kernel
    /// would have mapped).
    origin: PathBuf,
    expect: Expect,
}

/// Deterministic garbage (xorshift).
fn garbage(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn smear(bytes: &mut [u8], range: std::ops::Range<usize>, seed: u64) {
    let g = garbage(seed, range.len());
    bytes[range].copy_from_slice(&g);
}

/// ELF64 header fields, native endian (the test compiles for this host).
struct Header {
    phoff: usize,
    shoff: usize,
    phentsize: usize,
    phnum: usize,
    shentsize: usize,
    shnum: usize,
}

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_ne_bytes([b[at], b[at + 1]]).into()
}

fn u64_at(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    usize::try_from(u64::from_ne_bytes(w)).expect("offset fits usize")
}

fn elf_header(b: &[u8]) -> Header {
    assert_eq!(&b[..4], b"\x7fELF");
    assert_eq!(b[4], 2, "an ELF64 file");
    Header {
        phoff: u64_at(b, 0x20),
        shoff: u64_at(b, 0x28),
        phentsize: u16_at(b, 0x36),
        phnum: u16_at(b, 0x38),
        shentsize: u16_at(b, 0x3a),
        shnum: u16_at(b, 0x3c),
    }
}

/// File range of section `name`.
fn section(b: &[u8], name: &str) -> std::ops::Range<usize> {
    let obj = object::File::parse(b).expect("parsing binary");
    let s = obj
        .section_by_name(name)
        .unwrap_or_else(|| panic!("no {name} section"));
    let (off, size) = s
        .file_range()
        .unwrap_or_else(|| panic!("{name} has no file data"));
    off as usize..(off + size) as usize
}

/// The mapping the kernel makes for the executable `PT_LOAD` segment of
/// `path` when the file is loaded at `base`, and where `vaddr` then is.
fn text_mapping(path: &Path, file: &Path, base: u64, vaddr: u64) -> (Mapping, u64) {
    const PAGE: u64 = 4096;
    let data = std::fs::read(path).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    let seg = obj
        .segments()
        .find(|s| s.address() <= vaddr && vaddr < s.address() + s.size())
        .expect("address in a segment");
    let (offset, filesz) = seg.file_range();
    let start = base + seg.address() / PAGE * PAGE;
    let end = base + (seg.address() + filesz).next_multiple_of(PAGE);
    let m = Mapping {
        start,
        end,
        pgoff: offset / PAGE * PAGE,
        path: file.to_string_lossy().into(),
        deleted: false,
        file: None,
        build_id: None,
        from: 0,
        until: u64::MAX,
    };
    (m, base + vaddr)
}

/// Every damaged copy of `bin` (DWARF, uncompressed) and of `binz` (the
/// same with compressed DWARF sections).
fn variants(bin: &Path, binz: &Path) -> Vec<Variant> {
    let data = std::fs::read(bin).expect("reading binary");
    let dataz = std::fs::read(binz).expect("reading binary");
    let h = elf_header(&data);
    let mut out = Vec::new();
    let mut add = |name: &str, bytes: Vec<u8>, origin: &Path, expect| {
        out.push(Variant {
            name: name.to_string(),
            bytes,
            origin: origin.to_path_buf(),
            expect,
        })
    };

    // Not ELF at all.
    add("empty", Vec::new(), bin, Expect::Unknown);
    add(
        "text",
        b"#!/bin/sh\necho not an ELF file\n".repeat(200),
        bin,
        Expect::Unknown,
    );
    let mut magic = b"\x7fELF".to_vec();
    magic.extend(garbage(1, 16 * 1024));
    add("magic then garbage", magic, bin, Expect::Unknown);

    // Cut short: everything from the ELF header to just before the end.
    // The section headers come last, so every cut loses (some of) them.
    assert!(
        h.shoff + h.shnum * h.shentsize == data.len(),
        "section headers last"
    );
    for cut in [
        4,
        63,
        64,
        h.phoff + h.phnum * h.phentsize - 1,
        data.len() / 4,
        data.len() / 2,
        h.shoff,
        h.shoff + h.shentsize * h.shnum / 2,
        data.len() - 1,
    ] {
        add(
            &format!("cut at {cut}"),
            data[..cut].to_vec(),
            bin,
            Expect::Unknown,
        );
    }

    // Garbage over the header tables.
    let mut b = data.clone();
    smear(&mut b, h.shoff..h.shoff + h.shnum * h.shentsize, 2);
    add("garbage section headers", b, bin, Expect::Unknown);
    let mut b = data.clone();
    smear(&mut b, h.phoff..h.phoff + h.phnum * h.phentsize, 3);
    add("garbage program headers", b, bin, Expect::Unknown);

    // ELF header fields that lie.
    let mut b = data.clone();
    b[0x3c..0x3e].copy_from_slice(&u16::MAX.to_ne_bytes());
    add("e_shnum 65535", b, bin, Expect::Unknown);
    let mut b = data.clone();
    b[0x28..0x30].copy_from_slice(&(u64::MAX - 8).to_ne_bytes());
    add("e_shoff near 2^64", b, bin, Expect::Unknown);
    let mut b = data.clone();
    b[0x38..0x3a].copy_from_slice(&u16::MAX.to_ne_bytes());
    add("e_phnum 65535", b, bin, Expect::Unknown);

    // Section contents: with one source of names left, the frame
    // resolves through it.
    let mut b = data.clone();
    smear(&mut b, section(&data, ".debug_info"), 4);
    add("garbage .debug_info", b, bin, Expect::Work);
    let mut b = data.clone();
    let obj = object::File::parse(&*data).expect("parsing binary");
    let debug: Vec<_> = obj
        .sections()
        .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug_")))
        .filter_map(|s| s.file_range())
        .collect();
    assert!(debug.len() >= 3, "{debug:?}");
    for (i, (off, size)) in debug.into_iter().enumerate() {
        smear(&mut b, off as usize..(off + size) as usize, 5 + i as u64);
    }
    add("garbage in every .debug_*", b, bin, Expect::Work);
    let mut b = data.clone();
    smear(&mut b, section(&data, ".symtab"), 10);
    add("garbage .symtab", b, bin, Expect::Work);
    let mut b = data.clone();
    smear(&mut b, section(&data, ".symtab"), 11);
    smear(&mut b, section(&data, ".strtab"), 12);
    add("garbage .symtab and .strtab", b, bin, Expect::Work);
    // Neither left (.dynsym has no `work` without -rdynamic).
    let mut b = data.clone();
    smear(&mut b, section(&data, ".symtab"), 13);
    smear(&mut b, section(&data, ".debug_info"), 14);
    add("garbage .symtab and .debug_info", b, bin, Expect::Unknown);

    // Compressed DWARF: a compression header (Elf64_Chdr: ch_type u32,
    // reserved u32, ch_size u64, ch_addralign u64) that lies, or garbage
    // after it. The symbol table still names the frame.
    let info = section(&dataz, ".debug_info");
    for (what, ch_size) in [
        ("1 TiB", 1u64 << 40),
        ("8 GiB", 1 << 33),
        ("2^64-1", u64::MAX),
        ("0", 0),
    ] {
        let mut b = dataz.clone();
        b[info.start + 8..info.start + 16].copy_from_slice(&ch_size.to_ne_bytes());
        add(
            &format!("compressed .debug_info claiming {what}"),
            b,
            binz,
            Expect::Work,
        );
    }
    let mut b = dataz.clone();
    b[info.start..info.start + 4].copy_from_slice(&77u32.to_ne_bytes());
    add("unknown compression type", b, binz, Expect::Work);
    let mut b = dataz.clone();
    smear(&mut b, info.start + 24..info.end, 15);
    add("garbage compressed .debug_info", b, binz, Expect::Work);
    out
}

#[inline(never)]
fn intact_target() -> u64 {
    std::hint::black_box(7)
}

#[test]
fn corrupt_binaries_give_unknown_and_spare_the_other_frames() {
    let dir = TempDir::new("corrupt");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let binz = dir.path("workz");
    compile("cc", "work.c", &binz, &["-g", "-O0", "-gz=zlib"]);
    let variants = variants(&bin, &binz);

    // This process's real map, then the files mapped into it where
    // nothing else is (newer mappings win a lookup anyway).
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let region = 0x5000_0000_0000u64;
    let (work, _) = symbol(&bin, "work");
    let (main, _) = symbol(&bin, "main");
    let (m, intact_work) = text_mapping(&bin, &bin, region, work);
    maps.add_mapping(me, m);
    let (_, intact_main) = text_mapping(&bin, &bin, region, main);
    let mut frames = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let file = dir.path(&format!("variant{i}"));
        std::fs::write(&file, &v.bytes).expect("writing variant");
        let (work, _) = symbol(&v.origin, "work");
        let base = region + (i as u64 + 1) * 0x1000_0000;
        let (m, at) = text_mapping(&v.origin, &file, base, work);
        maps.add_mapping(me, m);
        frames.push((v, at));
    }

    let mut s = Symbolizer::new(maps, None).expect("symbolizer");
    let own = intact_target as fn() -> u64 as usize as u64;
    assert_eq!(intact_target(), 7);
    // Frame 0 is the test binary itself; then each damaged copy, followed
    // by a frame in the intact copy. Return addresses (every frame but the
    // first) are looked up one byte back: +2 stays inside the function.
    let mut addrs = vec![own];
    for (_, at) in &frames {
        addrs.push(at + 2);
        addrs.push(intact_main + 2);
    }
    addrs.push(intact_work + 2);
    let names = s.user(me, 1, &addrs);

    // -O0: no inlining, so one name per frame.
    assert_eq!(names.len(), addrs.len(), "{names:?}");
    assert!(names[0].ends_with("intact_target"), "{}", names[0]);
    let mut wrong = Vec::new();
    for (i, (v, _)) in frames.iter().enumerate() {
        let got = &names[1 + 2 * i];
        let want = match v.expect {
            Expect::Unknown => UNKNOWN,
            Expect::Work => "work",
        };
        if got != want {
            wrong.push(format!("{}: {got} (expected {want})", v.name));
        }
        assert_eq!(names[2 + 2 * i], "main", "after {}", v.name);
    }
    assert_eq!(names.last().map(String::as_str), Some("work"));
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The files that could not be parsed are reported, once each.
    let unparsable = s.files.failures.len();
    assert!(unparsable >= 3, "{:#?}", s.files.failures);
    assert!(unparsable <= variants.len(), "{:#?}", s.files.failures);
}

#[test]
fn corrupt_files_parse_or_fail_without_panic() {
    // The same damaged copies straight through ElfFile: parse or an error,
    // and lookups on whatever parsed never panic.
    let dir = TempDir::new("corrupt-parse");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let binz = dir.path("workz");
    compile("cc", "work.c", &binz, &["-g", "-O0", "-gz=zlib"]);
    let (work, size) = symbol(&bin, "work");
    for v in variants(&bin, &binz) {
        let Ok(elf) = elf::ElfFile::parse(&v.bytes, None) else {
            continue;
        };
        for off in [0, 1, 64, 4096, u64::MAX / 2, u64::MAX] {
            if let Some(vaddr) = elf.vaddr_of_offset(off) {
                elf.names(vaddr);
            }
        }
        for vaddr in [0, work, work + size - 1, u64::MAX] {
            let names = elf.names(vaddr);
            assert!(names.len() <= 8, "{}: {names:?}", v.name);
        }
    }
}

/// A real ELF with DWARF (compressed when `compressed`), compiled once.
fn work_binary(compressed: bool) -> &'static [u8] {
    static PLAIN: OnceLock<Vec<u8>> = OnceLock::new();
    static COMPRESSED: OnceLock<Vec<u8>> = OnceLock::new();
    let cell = if compressed { &COMPRESSED } else { &PLAIN };
    cell.get_or_init(|| {
        let dir = TempDir::new("corrupt-prop");
        let bin = dir.path("work");
        let mut flags = vec!["-g", "-O0"];
        if compressed {
            flags.push("-gz=zlib");
        }
        compile("cc", "work.c", &bin, &flags);
        std::fs::read(&bin).expect("reading binary")
    })
}

/// The regions of an ELF file worth damaging: its header, both header
/// tables and every section's contents.
fn regions(data: &[u8]) -> Vec<std::ops::Range<usize>> {
    let h = elf_header(data);
    let mut out = vec![
        0..64,
        h.phoff..h.phoff + h.phnum * h.phentsize,
        h.shoff..h.shoff + h.shnum * h.shentsize,
    ];
    let obj = object::File::parse(data).expect("parsing binary");
    out.extend(
        obj.sections()
            .filter_map(|s| s.file_range())
            .filter(|&(_, size)| size > 0)
            .map(|(off, size)| off as usize..(off + size) as usize),
    );
    out
}

/// One write into a region: (region index, offset, bytes).
fn damage() -> impl Strategy<Value = (usize, usize, Vec<u8>)> {
    let value = prop_oneof![
        proptest::collection::vec(any::<u8>(), 1..24),
        prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(u64::MAX / 2),
            Just(1 << 32),
            Just(0xffff),
            Just(0x7fff_ffff),
            any::<u64>(),
        ]
        .prop_map(|v| v.to_ne_bytes().to_vec()),
        (0u16..=u16::MAX).prop_map(|v| v.to_ne_bytes().to_vec()),
    ];
    (any::<usize>(), any::<usize>(), value)
}

/// `original` with `writes` (region, offset, bytes) applied, each into
/// one of its regions, and cut at `cut` if given.
fn damaged(original: &[u8], writes: &[(usize, usize, Vec<u8>)], cut: Option<usize>) -> Vec<u8> {
    let regions = regions(original);
    let mut data = original.to_vec();
    for (r, at, bytes) in writes {
        let region = &regions[r % regions.len()];
        let at = region.start + at % region.len();
        let n = bytes.len().min(data.len() - at);
        data[at..at + n].copy_from_slice(&bytes[..n]);
    }
    if let Some(cut) = cut {
        data.truncate(cut % (data.len() + 1));
    }
    data
}

proptest! {
    #![proptest_config(crate::proptest_config::config(192))]

    #[test]
    fn random_damage_to_a_real_elf_never_panics(
        compressed in any::<bool>(),
        writes in proptest::collection::vec(damage(), 1..6),
        cut in proptest::option::weighted(0.2, any::<usize>()),
    ) {
        let original = work_binary(compressed);
        let data = damaged(original, &writes, cut);
        let Ok(elf) = elf::ElfFile::parse(&data, None) else {
            return Ok(());
        };
        let (work, size) = {
            let obj = object::File::parse(original).expect("parsing binary");
            let s = obj.symbols().find(|s| s.name() == Ok("work")).expect("work");
            (s.address(), s.size())
        };
        for off in [0, 0x1000, 0x1100, u64::MAX] {
            if let Some(vaddr) = elf.vaddr_of_offset(off) {
                prop_assert!(elf.names(vaddr).len() <= 16);
            }
        }
        for vaddr in [0, work, work + size / 2, work + size, u64::MAX - 1, u64::MAX] {
            prop_assert!(elf.names(vaddr).len() <= 16);
        }
    }
}

proptest! {
    #![proptest_config(crate::proptest_config::config(192))]

    /// The same damage, parsed for a few addresses, with DWARF read by
    /// unit (see `sparse.rs`) however small the file.
    #[test]
    fn random_damage_read_by_unit_never_panics(
        writes in proptest::collection::vec(damage(), 1..6),
        cut in proptest::option::weighted(0.2, any::<usize>()),
    ) {
        let original = work_binary(false);
        let data = damaged(original, &writes, cut);
        let offsets = [0x1000u64, 0x1100, 0x1180, u64::MAX];
        sparse::MIN_SPARSE_IN_TEST.with(|m| m.set(0));
        let parsed = elf::ElfFile::parse_for(&data, &offsets);
        sparse::MIN_SPARSE_IN_TEST.with(|m| m.set(u64::MAX));
        let Ok(elf) = parsed else {
            return Ok(());
        };
        for off in offsets {
            if let Some(vaddr) = elf.vaddr_of_offset(off) {
                prop_assert!(elf.names(vaddr).len() <= 16);
            }
        }
    }
}

/// One rewrite of a section header: (section, what its offset becomes,
/// what its size becomes, whether it claims to be compressed).
fn claim() -> impl Strategy<Value = (usize, usize, u64, bool)> {
    let size = prop_oneof![
        Just(0u64),
        Just(24),
        Just(1 << 20),
        Just(1 << 30),
        Just(u64::MAX / 2),
        Just(u64::MAX),
        any::<u64>(),
    ];
    (any::<usize>(), any::<usize>(), size, any::<bool>())
}

proptest! {
    #![proptest_config(crate::proptest_config::config(128))]

    /// Section headers that alias each other's bytes, claim sizes up to
    /// the whole address space, or claim compression over plain bytes:
    /// parsing and lookups end, without a panic, and an address never
    /// yields more names than the inline limit.
    #[test]
    fn lying_section_headers_never_panic(
        compressed in any::<bool>(),
        claims in proptest::collection::vec(claim(), 1..8),
    ) {
        let original = work_binary(compressed);
        let h = elf_header(original);
        let mut data = original.to_vec();
        let offsets: Vec<usize> = (0..h.shnum)
            .map(|i| u64_at(original, h.shoff + i * h.shentsize + 0x18))
            .collect();
        for (section, alias, size, compress) in &claims {
            let at = h.shoff + (section % h.shnum) * h.shentsize;
            let offset = offsets[alias % offsets.len()] as u64;
            data[at + 0x18..at + 0x20].copy_from_slice(&offset.to_ne_bytes());
            data[at + 0x20..at + 0x28].copy_from_slice(&size.to_ne_bytes());
            let mut flags = u64_at(&data, at + 0x08) as u64;
            if *compress {
                flags |= 0x800; // SHF_COMPRESSED
            }
            data[at + 0x08..at + 0x10].copy_from_slice(&flags.to_ne_bytes());
        }
        let Ok(elf) = elf::ElfFile::parse(&data, None) else {
            return Ok(());
        };
        for vaddr in [0, 0x1000, 0x1139, 0x1150, u64::MAX] {
            prop_assert!(elf.names(vaddr).len() <= elf::MAX_INLINE_FRAMES);
        }
    }
}
