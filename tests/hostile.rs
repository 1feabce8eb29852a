//! Attacks on the root tool by an unprivileged process, through the files
//! it gets the tool to symbolize. Each victim runs as `nobody` (or drops to
//! it inside a chroot), maps a file it crafted (built here, see
//! `hostile/elf.rs`) and blocks in pause(2) through a stub in it, so its
//! off-CPU stacks point into that file (`workloads/hostile_victim.c`; a
//! thread of its own wakes it, so the tool symbolizes no other process's
//! files as wakers). The tool then traces it, and must: exit 0 with a
//! report holding the victim's block and an SVG flame graph that is
//! well-formed XML, keep its peak RSS (VmHWM) under 256 MiB, finish within
//! the timeout, and never print (or open) what only root may read. Each case prints one `HOSTILE case=…` measurement line;
//! `tests/hostile/measure.sh` collects them into a table.
//!
//! The cases run one at a time: some need GBs of memory when the tool is
//! not bounded, and all victims share CPU 0.

mod elf;
mod run;

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::common;
use elf::{Body, Elf, GIB, KIB, MIB, Section, Sym};
use run::{
    RSS_LIMIT_MIB, Run, Scratch, chmod, chown_nobody, nobody, run_tool, start_program, start_victim,
};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A name that only root's files hold: it must never be printed.
const HOST_SECRET: &str = "host_secret_fn";

/// Writes `elf` at `path`, owned by `nobody`.
fn victim_file(elf: &Elf, path: &Path) {
    elf.write(path).expect("writing the crafted file");
    chown_nobody(path);
}

/// Writes `elf` at `path`, readable by root only.
fn root_only_file(elf: &Elf, path: &Path) {
    elf.write(path).expect("writing the root-only file");
    chmod(path, 0o600);
}

/// An ELF whose stub `i` is function `names[i]`.
fn named_stubs(names: &[&[u8]]) -> Elf {
    let mut e = Elf::new(names.len());
    let syms: Vec<Sym> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Sym::stub(i, n))
        .collect();
    e.symbols(&syms);
    e
}

fn s(v: impl ToString) -> String {
    v.to_string()
}

/// The common shape: a `nobody` victim named `comm` maps `file` (with
/// `extra` victim options), the tool traces it with `-p PID 2`, and the
/// run must be sound with the victim's block in the report. Returns the
/// run and the victim's target frames.
fn trace_nobody_victim(
    case: &str,
    scratch: &Scratch,
    comm: &str,
    extra: &[String],
    file: &Path,
) -> (Run, Vec<String>) {
    let mut args = vec![s("-n"), s(comm)];
    args.extend_from_slice(extra);
    args.push(file.display().to_string());
    let victim = start_victim(scratch, true, &args);
    let pid = victim.pid().to_string();
    let run = run_tool(case, &["-p", &pid, "2"]);
    drop(victim);
    run.assert_sound();
    let frames = run.target_frames(comm);
    (run, frames)
}

/// Attack 1: A `DW_TAG_subprogram` over the victim's stub nests 30,000
/// `DW_TAG_inlined_subroutine` DIEs: reading its inline chain must not recurse
/// without bound (a stack overflow aborts the tool).
#[test]
fn deep_inline_chain() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("deep_inline_chain");
    let mut e = named_stubs(&[b"deep_fn"]);
    let (abbrev, info) =
        elf::deep_inline_dwarf("deep_fn", elf::STUB_OFFSET, elf::STUB_STRIDE, 30_000);
    e.section(Section::data(".debug_abbrev", Body::Bytes(abbrev)));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    let file = scratch.v().join("deep.so");
    victim_file(&e, &file);
    trace_nobody_victim("deep_inline_chain", &scratch, "hv-deep", &[], &file);
}

/// Attack 2: A 512 MiB ELF (sparse symbol table, section headers at its end)
/// that the victim cuts to one page 50 ms after the tool opens it (inotify):
/// reading a file that shrinks must not crash the tool (SIGBUS through a
/// mapping).
#[test]
fn truncated_on_open() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("truncated_on_open");
    let mut e = Elf::new(1);
    e.sparse_symtab(512 * MIB);
    let file = scratch.v().join("shrinking.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "truncated_on_open",
        &scratch,
        "hv-truncate",
        &[s("-T"), s(50)],
        &file,
    );
}

/// Attack 3: `.debug_info`, `.debug_abbrev`, `.debug_line` and `.debug_str` all
/// alias one 1 GiB hole of a file of about 12 KiB on disk: the tool must not
/// copy (or map in) what a section claims without a bound.
#[test]
fn sparse_dwarf_sections() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("sparse_dwarf_sections");
    let mut e = named_stubs(&[b"sparse_fn"]);
    let info = e.section(Section::data(".debug_info", Body::Hole(GIB)));
    for name in [".debug_abbrev", ".debug_line", ".debug_str"] {
        e.section(Section::data(name, Body::Alias(info)));
    }
    let file = scratch.v().join("sparse.so");
    victim_file(&e, &file);
    trace_nobody_victim("sparse_dwarf_sections", &scratch, "hv-sparse", &[], &file);
}

/// The debug sections gimli loads, eleven of them.
const DEBUG_SECTIONS: [&str; 11] = [
    ".debug_info",
    ".debug_abbrev",
    ".debug_line",
    ".debug_str",
    ".debug_ranges",
    ".debug_aranges",
    ".debug_loc",
    ".debug_rnglists",
    ".debug_loclists",
    ".debug_line_str",
    ".debug_str_offsets",
];

/// Attack 4: Eleven `SHF_COMPRESSED` (zlib) debug sections alias one 276 KB
/// stream that really inflates to 256 MiB: decompression must be bounded.
#[test]
fn compressed_dwarf_bomb() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("compressed_dwarf_bomb");
    let mut e = named_stubs(&[b"bomb_fn"]);
    let size = 256 * MIB;
    let body = elf::compressed(size, &elf::zlib_zeros(size));
    let first = e.section(Section {
        flags: elf::SHF_COMPRESSED,
        ..Section::data(DEBUG_SECTIONS[0], Body::Bytes(body))
    });
    for name in &DEBUG_SECTIONS[1..] {
        e.section(Section {
            flags: elf::SHF_COMPRESSED,
            ..Section::data(name, Body::Alias(first))
        });
    }
    let file = scratch.v().join("bomb.so");
    victim_file(&e, &file);
    trace_nobody_victim("compressed_dwarf_bomb", &scratch, "hv-zbomb", &[], &file);
}

/// Attack 5: 4,000 function symbols all named by one 256 KiB string: names must
/// not be copied without a bound.
#[test]
fn huge_symbol_names() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("huge_symbol_names");
    let name = vec![b'N'; 256 * KIB as usize];
    let syms: Vec<Sym> = (0..4000u64)
        .map(|i| Sym {
            name: &name,
            addr: elf::STUB_OFFSET + i,
            size: 1,
        })
        .collect();
    let mut e = Elf::new(1);
    e.symbols(&syms);
    let file = scratch.v().join("names.so");
    victim_file(&e, &file);
    trace_nobody_victim("huge_symbol_names", &scratch, "hv-names", &[], &file);
}

/// Attack 6: A sparse 6 GiB `.symtab` (268 million empty symbols): the tool
/// must finish within the timeout and the memory limit.
#[test]
fn sparse_huge_symtab() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("sparse_huge_symtab");
    let mut e = Elf::new(1);
    e.sparse_symtab(6 * GIB);
    let file = scratch.v().join("symtab.so");
    victim_file(&e, &file);
    trace_nobody_victim("sparse_huge_symtab", &scratch, "hv-symtab", &[], &file);
}

/// Attack 7: A second after it is ready (the tool has read its map by then), a
/// child of the victim starts swapping the mapped file's path between a FIFO
/// and empty regular files, each a new inode, by rename in a tight loop (on
/// tmpfs, so that a swap takes microseconds); the victim's sleeps rotate
/// through 128 stubs, so many addresses are looked up. Opening the path must
/// never block: the tool finishes within the timeout.
#[test]
fn fifo_swapped_in() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new_on_tmpfs("fifo_swapped_in");
    let names: Vec<Vec<u8>> = (0..128)
        .map(|i| format!("swap_fn_{i}").into_bytes())
        .collect();
    let names: Vec<&[u8]> = names.iter().map(|n| &n[..]).collect();
    let file = scratch.v().join("swap.so");
    victim_file(&named_stubs(&names), &file);
    let extra = [s("-k"), s(128), s("-S"), s(1000)];
    trace_nobody_victim("fifo_swapped_in", &scratch, "hv-fifo", &extra, &file);
}

/// inotify on one file, for IN_OPEN.
struct OpenWatch {
    fd: i32,
}

impl OpenWatch {
    fn new(path: &Path) -> OpenWatch {
        // SAFETY: plain syscalls on a fd we own; the path is a valid C string.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0, "inotify_init1");
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            let wd = libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN);
            assert!(wd >= 0, "inotify_add_watch {}", path.display());
            OpenWatch { fd }
        }
    }

    /// How many opens were seen so far.
    fn opens(&self) -> usize {
        let mut buf = [0u8; 4096];
        let mut n = 0;
        loop {
            // SAFETY: reads into a buffer we own.
            let r = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                return n;
            }
            // Each event is 16 bytes plus its name (none for a file watch).
            n += r as usize / std::mem::size_of::<libc::inotify_event>();
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// Attack 8: The victim's file names `x.debug` in `.gnu_debuglink` and has no
/// symbols; next to it, the victim's own `.debug/x.debug` is a symlink to a
/// root-only ELF (0600 in a 0700 directory) whose symbol is `host_secret_fn`.
/// That name must never be printed, and the tool must not open that file.
#[test]
fn debuglink_symlink_to_root_file() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("debuglink_symlink_to_root_file");
    let secret = scratch.secret_dir().join("secret.debug");
    root_only_file(&named_stubs(&[HOST_SECRET.as_bytes()]), &secret);
    let mut e = Elf::new(1);
    e.section(Section::data(
        ".gnu_debuglink",
        Body::Bytes(elf::debuglink("x.debug")),
    ));
    let file = scratch.v().join("x.so");
    victim_file(&e, &file);
    let dot_debug = scratch.v().join(".debug");
    let link = format!(
        "{}:{}",
        secret.display(),
        dot_debug.join("x.debug").display()
    );
    let watch = OpenWatch::new(&secret);
    let args = [s("-D"), dot_debug.display().to_string(), s("-L"), link];
    let (run, _) = trace_nobody_victim(
        "debuglink_symlink_to_root_file",
        &scratch,
        "hv-debuglink",
        &args,
        &file,
    );
    run.assert_absent(HOST_SECRET);
    assert_eq!(watch.opens(), 0, "the tool opened the root-only debug file");
}

/// Attack 9: A victim chrooted into `<jail>` maps `/x.so` (`jail_fn`). Inside
/// the jail, at the host path of the jail itself (`<jail><jail>`), it plants an
/// absolute symlink to a root-only host directory holding another `x.so`
/// (`host_secret_fn`). The host's name must never be printed; the jail file's
/// must, as the victim still lives.
#[test]
fn chroot_symlink_to_host_dir() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("chroot_symlink_to_host_dir");
    let secret = scratch.secret_dir();
    root_only_file(
        &named_stubs(&[HOST_SECRET.as_bytes()]),
        &secret.join("x.so"),
    );
    let jail = scratch.dir.join("jail");
    std::fs::create_dir(&jail).expect("creating the jail");
    chmod(&jail, 0o755);
    chown_nobody(&jail);
    victim_file(&named_stubs(&[b"jail_fn"]), &jail.join("x.so"));
    // Inside the jail: mkdir each ancestor of <jail>, then the symlink.
    let (uid, gid) = nobody();
    let mut args = vec![
        s("-n"),
        s("hv-jail"),
        s("-r"),
        jail.display().to_string(),
        s("-u"),
        s(uid),
        s("-g"),
        s(gid),
    ];
    let mut ancestors: Vec<&Path> = jail.ancestors().skip(1).collect();
    ancestors.reverse();
    for dir in &ancestors[1..] {
        args.extend([s("-D"), dir.display().to_string()]);
    }
    args.extend([s("-L"), format!("{}:{}", secret.display(), jail.display())]);
    args.push(s("/x.so"));
    let victim = start_victim(&scratch, false, &args);
    let pid = victim.pid().to_string();
    let run = run_tool("chroot_symlink_to_host_dir", &["-p", &pid, "2"]);
    drop(victim);
    run.assert_sound();
    let frames = run.target_frames("hv-jail");
    run.assert_absent(HOST_SECRET);
    assert!(
        common::has(&frames, "jail_fn"),
        "the jail file's jail_fn is missing: {frames:?}"
    );
}

/// Attack 10: A victim, started by the tool (`-f -- COMMAND`), chroots into
/// `<jail>`, maps `<secret>/x.so` there (`jail_fn`) and exits before the
/// tool symbolizes. The host has a root-only file at that same absolute path
/// (`host_secret_fn`): its name must never be printed (the jail's names or
/// `[unknown]` are both right).
#[test]
fn chroot_exited_host_path() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("chroot_exited_host_path");
    let host_file = scratch.secret_dir().join("x.so");
    root_only_file(&named_stubs(&[HOST_SECRET.as_bytes()]), &host_file);
    let jail = scratch.dir.join("jail");
    let jail_file = jail.join(host_file.strip_prefix("/").unwrap());
    std::fs::create_dir_all(jail_file.parent().unwrap()).expect("creating the jail");
    victim_file(&named_stubs(&[b"jail_fn"]), &jail_file);
    let exe = scratch.victim_exe();
    let (uid, gid) = nobody();
    let (uid, gid) = (s(uid), s(gid));
    let run = run_tool(
        "chroot_exited_host_path",
        &[
            "-f",
            "--",
            exe.to_str().unwrap(),
            "-q",
            "-n",
            "hv-jail-exit",
            "-r",
            jail.to_str().unwrap(),
            "-u",
            &uid,
            "-g",
            &gid,
            "-c",
            "100",
            host_file.to_str().unwrap(),
        ],
    );
    run.assert_sound();
    run.assert_absent(HOST_SECRET);
    let lines = common::parse_folded(&run.stdout);
    assert!(
        lines.iter().any(|l| l.target_comm == "hv-jail-exit"),
        "no line of hv-jail-exit:\n{}",
        run.stdout
    );
}

/// Attack 11: Symbols named with `;`, `--`, spaces and a newline: in `-f`
/// output every line must stay exactly one entry (`comm;frames;--;frames;comm
/// N`), no forged field or line; the default output must keep its layout.
#[test]
fn symbol_names_forge_output() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("symbol_names_forge_output");
    let file = scratch.v().join("names.so");
    victim_file(
        &named_stubs(&[
            b"semi;FORGED_FIELD;--;x",
            b"nl\nFORGED_LINE;x 1",
            b"with space 42",
        ]),
        &file,
    );
    let args = [
        s("-n"),
        s("hv-odd-names"),
        s("-k"),
        s(3),
        file.display().to_string(),
    ];
    let victim = start_victim(&scratch, true, &args);
    let pid = victim.pid().to_string();
    let folded = run_tool("symbol_names_forge_output", &["-f", "-p", &pid, "2"]);
    let default = run_tool("symbol_names_forge_output_default", &["-p", &pid, "2"]);
    drop(victim);
    folded.assert_sound();
    let mut seen = false;
    for line in folded.stdout.lines() {
        assert!(
            !line.starts_with("FORGED"),
            "a forged line in -f output: {line:?}"
        );
        let (stack, total) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("a line of -f output without a total: {line:?}"));
        assert!(total.parse::<u64>().is_ok(), "bad total in {line:?}");
        let fields: Vec<&str> = stack.split(';').collect();
        assert_eq!(
            fields.iter().filter(|f| **f == "--").count(),
            1,
            "not exactly one -- in {line:?}"
        );
        assert!(
            !fields.contains(&"FORGED_FIELD"),
            "a forged field in {line:?}"
        );
        seen |= fields[0] == "hv-odd-names";
    }
    assert!(seen, "no line of hv-odd-names:\n{}", folded.stdout);
    default.assert_sound();
    default.target_frames("hv-odd-names");
    assert!(
        !default.stdout.lines().any(|l| l.starts_with("FORGED")),
        "a forged line in the default output:\n{}",
        default.stdout
    );
}

/// Reads a crafted file back with `object`.
fn parse_back(path: &Path, check: impl FnOnce(&object::File<'_>)) {
    let data = std::fs::read(path).expect("reading back");
    let obj = object::File::parse(&*data).expect("a readable ELF");
    check(&obj);
}

/// The generator writes what the cases claim: stubs, symbols, holes,
/// aliases and a zlib stream that inflates to zeros at under 1032:1.
#[test]
fn generator_writes_what_cases_claim() {
    let _suite = common::suite(module_path!());
    use object::{Object, ObjectSection, ObjectSymbol};
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("offwake-hostile-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // Stubs and symbols.
    let path = dir.join("stubs.so");
    named_stubs(&[b"a;b", b"c"]).write(&path).unwrap();
    let data = std::fs::read(&path).unwrap();
    let at = elf::stub_addr(1) as usize;
    assert_eq!(&data[at..at + elf::STUB.len()], &elf::STUB);
    parse_back(&path, |obj| {
        let names: Vec<(String, u64)> = obj
            .symbols()
            .map(|s| (s.name().unwrap().to_string(), s.address()))
            .collect();
        assert_eq!(
            names,
            [
                ("a;b".to_string(), elf::stub_addr(0)),
                ("c".to_string(), elf::stub_addr(1))
            ]
        );
    });

    // A 1 GiB hole aliased: little on disk.
    let path = dir.join("sparse.so");
    let mut e = Elf::new(1);
    let info = e.section(Section::data(".debug_info", Body::Hole(GIB)));
    e.section(Section::data(".debug_str", Body::Alias(info)));
    e.write(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert!(
        meta.len() > GIB && meta.blocks() * 512 <= 64 * KIB,
        "{meta:?}"
    );
    parse_back(&path, |obj| {
        let a = obj.section_by_name(".debug_info").unwrap().file_range();
        let b = obj.section_by_name(".debug_str").unwrap().file_range();
        assert_eq!(a, b);
        assert_eq!(a.unwrap().1, GIB);
    });

    // zlib: inflates to exactly `size` zeros; the full-size stream keeps
    // the ratio under deflate's maximum.
    let size = 3 * MIB + 7;
    let path = dir.join("z.so");
    let mut e = Elf::new(1);
    e.section(Section {
        flags: elf::SHF_COMPRESSED,
        ..Section::data(
            ".debug_info",
            Body::Bytes(elf::compressed(size, &elf::zlib_zeros(size))),
        )
    });
    e.write(&path).unwrap();
    parse_back(&path, |obj| {
        let c = obj
            .section_by_name(".debug_info")
            .unwrap()
            .compressed_data()
            .unwrap();
        let d = c.decompress().expect("inflates");
        assert_eq!(d.len() as u64, size);
        assert!(d.iter().all(|&b| b == 0));
    });
    let big = elf::zlib_zeros(256 * MIB).len() as u64;
    assert!(
        big * 1032 > 256 * MIB && big < 300 * KIB,
        "256 MiB stream is {big} bytes"
    );

    // The deep inline chain: addr2line finds the subprogram over the stub.
    let (abbrev, info) = elf::deep_inline_dwarf("deep_fn", elf::STUB_OFFSET, 16, 50);
    let path = dir.join("deep.so");
    let mut e = Elf::new(1);
    e.section(Section::data(".debug_abbrev", Body::Bytes(abbrev)));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    e.write(&path).unwrap();
    parse_back(&path, |obj| {
        let dwarf = gimli::Dwarf::load(|id| {
            let data = obj
                .section_by_name(id.name())
                .map(|s| s.data().unwrap())
                .unwrap_or(&[]);
            Ok::<_, gimli::Error>(gimli::EndianSlice::new(data, gimli::LittleEndian))
        })
        .unwrap();
        let ctx = addr2line::Context::from_dwarf(dwarf).unwrap();
        let mut frames = ctx
            .find_frames(elf::STUB_OFFSET + 3)
            .skip_all_loads()
            .unwrap();
        let f = frames.next().unwrap().expect("a frame");
        let name = f.function.unwrap().raw_name().unwrap().into_owned();
        assert_eq!(name, "deep_fn");
    });

    // Debuglink.
    let path = dir.join("link.so");
    let mut e = Elf::new(1);
    e.section(Section::data(
        ".gnu_debuglink",
        Body::Bytes(elf::debuglink("x.debug")),
    ));
    e.write(&path).unwrap();
    parse_back(&path, |obj| {
        let (name, _) = obj.gnu_debuglink().unwrap().unwrap();
        assert_eq!(name, b"x.debug");
    });

    std::fs::remove_dir_all(&dir).unwrap();
}

/// `n` DWARF 4 unit headers, each followed by `die`.
fn units(n: u64, die: &[u8]) -> Vec<u8> {
    let mut info = Vec::new();
    for _ in 0..n {
        let len = 2 + 4 + 1 + die.len();
        info.extend_from_slice(&(len as u32).to_le_bytes());
        info.extend_from_slice(&4u16.to_le_bytes());
        info.extend_from_slice(&0u32.to_le_bytes());
        info.push(8);
        info.extend_from_slice(die);
    }
    info
}

/// An abbreviation table of `m` codes, each a childless compile unit.
fn many_abbrevs(m: u64) -> Vec<u8> {
    let mut abbrev = Vec::new();
    for code in 1..=m {
        elf::uleb(&mut abbrev, code);
        abbrev.extend_from_slice(&[0x11, 0, 0, 0]);
    }
    abbrev.push(0);
    abbrev
}

/// Attack 12: 4,000 units whose `DW_AT_ranges` all name one list of 4,000
/// ranges (68 KB of DWARF): addr2line builds the list once per unit.
#[test]
fn units_share_one_range_list() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("units_share_one_range_list");
    let mut e = named_stubs(&[b"ranges_fn"]);
    // Code 1: a childless compile unit with DW_AT_ranges (sec_offset).
    let abbrev = vec![1, 0x11, 0, 0x55, 0x17, 0, 0, 0];
    let info = units(4000, &[1, 0, 0, 0, 0]);
    let mut ranges = Vec::new();
    for i in 0..4000u64 {
        ranges.extend_from_slice(&(0x10000 + i * 2).to_le_bytes());
        ranges.extend_from_slice(&(0x10000 + i * 2 + 1).to_le_bytes());
    }
    ranges.extend_from_slice(&[0u8; 16]);
    e.section(Section::data(".debug_abbrev", Body::Bytes(abbrev)));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    e.section(Section::data(".debug_ranges", Body::Bytes(ranges)));
    let file = scratch.v().join("ranges.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "units_share_one_range_list",
        &scratch,
        "hv-ranges",
        &[],
        &file,
    );
}

/// Attack 13: 4,000 units sharing one abbreviation table of 4,000 codes
/// (36 KB of DWARF): parsed once per unit, the tables multiply.
#[test]
fn units_share_one_abbreviation_table() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("units_share_one_abbreviation_table");
    let mut e = named_stubs(&[b"abbrev_fn"]);
    e.section(Section::data(
        ".debug_abbrev",
        Body::Bytes(many_abbrevs(4000)),
    ));
    e.section(Section::data(".debug_info", Body::Bytes(units(4000, &[1]))));
    let file = scratch.v().join("abbrev.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "units_share_one_abbreviation_table",
        &scratch,
        "hv-abbrev",
        &[],
        &file,
    );
}

/// Attack 14: 1,000 units without ranges whose `DW_AT_stmt_list` all name
/// one line program of 100,000 one-byte rows (116 KB of DWARF): addr2line
/// runs it once per unit to find the unit's addresses.
#[test]
fn units_share_one_line_program() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("units_share_one_line_program");
    let mut e = named_stubs(&[b"lines_fn"]);
    // A childless compile unit with DW_AT_stmt_list (sec_offset).
    let abbrev = vec![1, 0x11, 0, 0x10, 0x17, 0, 0, 0];
    let info = units(1000, &[1, 0, 0, 0, 0]);
    let mut hdr = vec![1, 1, 1, 0xfb, 14, 13];
    hdr.extend_from_slice(&[0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
    hdr.push(0); // no include directories
    hdr.extend_from_slice(b"a.c\0\0\0\0");
    hdr.push(0); // end of the file names
    let mut prog = vec![0, 9, 2]; // DW_LNE_set_address
    prog.extend_from_slice(&0x10000u64.to_le_bytes());
    // Special opcode 32: address + 1, a row each.
    prog.extend(std::iter::repeat_n(32u8, 100_000));
    prog.extend_from_slice(&[0, 1, 1]); // DW_LNE_end_sequence
    let mut line = Vec::new();
    line.extend_from_slice(&((2 + 4 + hdr.len() + prog.len()) as u32).to_le_bytes());
    line.extend_from_slice(&4u16.to_le_bytes());
    line.extend_from_slice(&(hdr.len() as u32).to_le_bytes());
    line.extend_from_slice(&hdr);
    line.extend_from_slice(&prog);
    e.section(Section::data(".debug_abbrev", Body::Bytes(abbrev)));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    e.section(Section::data(".debug_line", Body::Bytes(line)));
    let file = scratch.v().join("lines.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "units_share_one_line_program",
        &scratch,
        "hv-lines",
        &[],
        &file,
    );
}

/// Attack 15: 10,000 DWARF 5 type units (which addr2line skips) sharing an
/// abbreviation table of 100,000 codes (933 KB of DWARF): any walk that
/// parses the table once per unit takes minutes.
#[test]
fn type_units_share_a_huge_abbreviation_table() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("type_units_share_a_huge_abbreviation_table");
    let mut e = named_stubs(&[b"tu_fn"]);
    let mut info = Vec::new();
    for _ in 0..10_000 {
        info.extend_from_slice(&21u32.to_le_bytes());
        info.extend_from_slice(&5u16.to_le_bytes());
        info.push(2); // DW_UT_type
        info.push(8);
        info.extend_from_slice(&0u32.to_le_bytes());
        info.extend_from_slice(&0x1234u64.to_le_bytes());
        info.extend_from_slice(&24u32.to_le_bytes());
        info.push(1);
    }
    e.section(Section::data(
        ".debug_abbrev",
        Body::Bytes(many_abbrevs(100_000)),
    ));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    let file = scratch.v().join("tu.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "type_units_share_a_huge_abbreviation_table",
        &scratch,
        "hv-tu",
        &[],
        &file,
    );
}

/// A file with one valid unit and a zlib `.debug_str` that really inflates
/// to `mib` MiB, from a stream of about `mib` KiB.
fn compressed_str_file(path: &Path, mib: u64) {
    let mut e = named_stubs(&[b"zstr_fn"]);
    let (abbrev, info) = elf::deep_inline_dwarf("zstr_fn", elf::STUB_OFFSET, elf::STUB_STRIDE, 1);
    e.section(Section::data(".debug_abbrev", Body::Bytes(abbrev)));
    e.section(Section::data(".debug_info", Body::Bytes(info)));
    let size = mib * MIB;
    e.section(Section {
        flags: elf::SHF_COMPRESSED,
        ..Section::data(
            ".debug_str",
            Body::Bytes(elf::compressed(size, &elf::zlib_zeros(size))),
        )
    });
    victim_file(&e, path);
}

/// Attack 16: one file whose `.debug_str` inflates to 63 MiB, which the
/// per-file budget (128 MiB, a decompressed section charged twice: the
/// decompressor's buffer and the one kept) just admits.
#[test]
fn compressed_section_just_under_the_budget() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("compressed_section_just_under_the_budget");
    let file = scratch.v().join("z.so");
    compressed_str_file(&file, 63);
    trace_nobody_victim(
        "compressed_section_just_under_the_budget",
        &scratch,
        "hv-z1",
        &[],
        &file,
    );
}

/// Attack 17: four victims, each with its own file like attack 16's: the
/// files of one run together stay within the run's budget.
#[test]
fn many_files_each_under_the_budget() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("many_files_each_under_the_budget");
    let mut victims = Vec::new();
    let mut pids = Vec::new();
    for i in 0..4 {
        let file = scratch.v().join(format!("z{i}.so"));
        compressed_str_file(&file, 60);
        let args = vec![s("-n"), format!("hv-many{i}"), file.display().to_string()];
        let v = start_victim(&scratch, true, &args);
        pids.push(v.pid().to_string());
        victims.push(v);
    }
    let run = run_tool(
        "many_files_each_under_the_budget",
        &["-p", &pids.join(","), "2"],
    );
    drop(victims);
    run.assert_sound();
    for i in 0..4 {
        run.target_frames(&format!("hv-many{i}"));
    }
}

/// Attack 18: 4,000,000 function symbols (a 92 MiB `.symtab`) all named by
/// one one-byte string: what is kept per symbol outweighs what is read.
#[test]
fn many_symbols_sharing_one_name() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("many_symbols_sharing_one_name");
    let mut e = Elf::new(1);
    e.symbols(&vec![Sym::stub(0, b"x"); 4_000_000]);
    let file = scratch.v().join("syms.so");
    victim_file(&e, &file);
    trace_nobody_victim(
        "many_symbols_sharing_one_name",
        &scratch,
        "hv-syms",
        &[],
        &file,
    );
}

/// Attack 19: unwind tables (read under `-p`'s default `--call-graph
/// dwarf`) that claim a 1 GiB hole: `.eh_frame` and `.eh_frame_hdr` alias
/// it. They must stay within the budget; the victim's frame is still named.
#[test]
fn unwind_tables_over_the_budget() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("unwind_tables_over_the_budget");
    let mut e = named_stubs(&[b"unwound_fn"]);
    let frame = e.section(Section::data(".eh_frame", Body::Hole(GIB)));
    e.section(Section::data(".eh_frame_hdr", Body::Alias(frame)));
    let file = scratch.v().join("ehbig.so");
    victim_file(&e, &file);
    let (run, frames) = trace_nobody_victim(
        "unwind_tables_over_the_budget",
        &scratch,
        "hv-ehbig",
        &[],
        &file,
    );
    assert!(frames.iter().any(|f| f == "unwound_fn"), "{frames:?}");
    // The victim's stacks were unwound, and its tables refused, with a
    // note that says so.
    let (stacks, unreadable) = run.unwinding();
    assert!(stacks >= 1 && unreadable >= 1, "{}", run.stderr);
    assert!(
        run.stderr.lines().any(|l| l.starts_with(
            "NOTE: user stacks were walked by frame \
             pointers only through 1 file(s)"
        ) && l.contains("ehbig.so")),
        "{}",
        run.stderr
    );
}

/// Attack 20: an `.eh_frame_hdr` whose search table claims 2^31 - 1
/// entries, over 64 KiB of `.eh_frame` made of records that point at
/// themselves: the unwinder must neither read out of bounds, loop, nor
/// panic.
#[test]
fn eh_frame_hdr_claims_two_billion_entries() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("eh_frame_hdr_claims_two_billion_entries");
    let mut e = named_stubs(&[b"lying_fn"]);
    // version 1; eh_frame_ptr pcrel|sdata4; fde_count udata4; table
    // datarel|sdata4; then eh_frame_ptr, fde_count and one entry whose
    // initial location is the stub.
    let mut hdr = vec![1u8, 0x1b, 0x03, 0x3b];
    hdr.extend_from_slice(&0i32.to_le_bytes());
    hdr.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    hdr.extend_from_slice(&(elf::stub_addr(0) as i32).to_le_bytes());
    hdr.extend_from_slice(&0i32.to_le_bytes());
    // Each record: length 12, then a CIE pointer back to its own start,
    // then garbage instructions.
    let mut frame = Vec::new();
    while frame.len() < 64 * KIB as usize {
        frame.extend_from_slice(&12u32.to_le_bytes());
        frame.extend_from_slice(&4u32.to_le_bytes());
        frame.extend_from_slice(&[0x0c, 0x07, 0x08, 0x90, 0x01, 0x00, 0x2f, 0xff]);
    }
    e.section(Section::data(".eh_frame_hdr", Body::Bytes(hdr)));
    e.section(Section::data(".eh_frame", Body::Bytes(frame)));
    let file = scratch.v().join("ehlies.so");
    victim_file(&e, &file);
    let (run, frames) = trace_nobody_victim(
        "eh_frame_hdr_claims_two_billion_entries",
        &scratch,
        "hv-ehlies",
        &[],
        &file,
    );
    assert!(frames.iter().any(|f| f == "lying_fn"), "{frames:?}");
    // The tables were read (they fit the budget) and the stacks unwound.
    let (stacks, unreadable) = run.unwinding();
    assert!(stacks >= 1 && unreadable == 0, "{}", run.stderr);
}

/// The SVG reader of these cases refuses what XML 1.0 forbids, so that a
/// flame graph a browser would refuse fails them.
#[test]
fn svg_reader_refuses_characters_xml_forbids() {
    let _suite = common::suite(module_path!());
    let svg = |name: &str| format!("<svg><g><title>{name} (5 us, 100%)</title></g></svg>");
    assert_eq!(
        common::svg_frames(&svg("a &lt; \\xef")),
        Ok(vec![s("a < \\xef")])
    );
    for bad in ["\u{fffe}", "\u{ffff}", "\u{1}", "&#xFFFE;", "&#xFFFF;"] {
        assert!(common::svg_frames(&svg(bad)).is_err(), "{bad:?} accepted");
    }
}

/// Attack 21: the victim's comm, its waker thread's comm and the name of
/// its function hold U+FFFE and U+FFFF (which XML 1.0 forbids, even as
/// character references), C0 controls and markup. Every report stays
/// well-formed, the SVG file beside the text and the SVG on stdout
/// (`--format svg`), and shows each name escaped, as the text does.
#[test]
fn names_xml_forbids() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("names_xml_forbids");
    let file = scratch.v().join("xml.so");
    victim_file(
        &named_stubs(&[b"fn\xef\xbf\xbe\xef\xbf\xbf\x01\x1f<&\"]]>'"]),
        &file,
    );
    let args = [
        s("-n"),
        s("hv-\u{fffe}\u{ffff}<&\""),
        s("-N"),
        s("hc\u{ffff}\x01]]>\u{fffe}"),
        file.display().to_string(),
    ];
    // As printed: the comms, and the function's name.
    let target = r#"hv-\xef\xbf\xbe\xef\xbf\xbf<&""#;
    let waker = r"hc\xef\xbf\xbf\x01]]>\xef\xbf\xbe";
    let function = r#"fn\xef\xbf\xbe\xef\xbf\xbf\x01\x1f<&"]]>'"#;
    let victim = start_victim(&scratch, true, &args);
    let pid = victim.pid().to_string();
    let text = run_tool("names_xml_forbids", &["-p", &pid, "2"]);
    let svg = run_tool(
        "names_xml_forbids_svg",
        &["--format", "svg", "-p", &pid, "2"],
    );
    drop(victim);
    text.assert_sound();
    svg.assert_sound();
    let frames = text.target_frames(target);
    assert!(common::has(&frames, function), "{frames:?}");
    assert!(
        text.blocks()
            .iter()
            .any(|b| b.target_comm == target && b.waker_comm == waker),
        "no block of {target} woken by {waker}:\n{}",
        text.stdout
    );
    let drawn = [
        ("the SVG file", text.svg_frames()),
        ("the SVG file of --format svg", svg.svg_frames()),
        (
            "the SVG on stdout",
            svg.frames_of_svg("stdout", &svg.stdout),
        ),
    ];
    for (what, frames) in drawn {
        for name in [target, waker, function] {
            assert!(
                common::has(&frames, name),
                "{what}: no {name:?} in {frames:?}"
            );
        }
    }
}

/// Attack: 40,000 cgroups with 3.8 KB paths, made by `nobody` in a
/// subtree delegated to it, a sleeper in the last of them. Traced by that
/// subtree (`--cgroup`, `--per-cgroup`), the tool must neither keep every
/// path nor walk the whole subtree (it took a gigabyte and minutes): the
/// run is sound, and the sleeper's cgroup is named in full.
#[test]
fn many_long_cgroups() {
    use std::os::unix::process::CommandExt;
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let hybrid = Path::new("/sys/fs/cgroup/unified");
    let mount = if hybrid.join("cgroup.procs").exists() {
        hybrid
    } else {
        Path::new("/sys/fs/cgroup")
    };
    let name = format!("offwake-hostile-cgroups-{}", std::process::id());
    let top = Made(mount.join(&name));
    std::fs::create_dir(&top.0).expect("creating the delegated cgroup");
    for file in [
        "",
        "cgroup.procs",
        "cgroup.subtree_control",
        "cgroup.threads",
    ] {
        chown_nobody(&top.0.join(file));
    }
    let (uid, gid) = nobody();
    let made = std::process::Command::new(common::workload("manycgroups"))
        .arg(&top.0)
        .arg("40000")
        .uid(uid)
        .gid(gid)
        .status()
        .expect("running manycgroups");
    assert!(made.success(), "manycgroups as nobody: {made}");
    let long = |tag: &str, i: u32| {
        let head = format!("{tag}{i}-");
        format!("{head}{}", "x".repeat(250 - head.len()))
    };
    let mut rel: String = (0..14).map(|d| format!("/{}", long("level", d))).collect();
    rel.push('/');
    rel.push_str(&long("wide", 39_999));
    let mut sleeper = common::start_gated_env(
        &common::workload("sleeploop"),
        &["100", "50"],
        &[("OFFWAKE_PIN_CPU", "0")],
    );
    std::fs::write(
        top.0.join(&rel[1..]).join("cgroup.procs"),
        sleeper.pid().to_string(),
    )
    .expect("moving the sleeper into the last cgroup");
    sleeper.go();
    let run = run_tool(
        "many_long_cgroups",
        &["--per-cgroup", "--cgroup", &name, "2"],
    );
    let _ = sleeper.child.kill();
    let _ = sleeper.child.wait();
    run.assert_sound();
    // A sleeper's few records a second: none is lost unless the reader
    // stops for seconds.
    assert!(
        run.stderr.contains(" records read, 0 lost;"),
        "records lost:\n{}",
        run.stderr_tail()
    );
    let named = format!("    cgroup:          /{name}{rel}\n");
    assert!(
        run.stdout.contains(&named),
        "the sleeper's cgroup is not named in full:\n{}",
        run.stderr_tail()
    );
}

/// The cgroups [`many_long_cgroups`] made below this one, and it, removed
/// on drop.
struct Made(std::path::PathBuf);

impl Drop for Made {
    fn drop(&mut self) {
        let _ = std::process::Command::new(common::workload("manycgroups"))
            .arg(&self.0)
            .args(["40000", "rm"])
            .status();
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A file of one page at the end of 15 directories of 250 characters
/// (a path of some 3.8 KB), made by `nobody` in its directory, and a copy
/// of workload `program` beside it, runnable by `nobody`.
fn deep_file_and(scratch: &Scratch, program: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let mut dir = scratch.v();
    for i in 0..15 {
        dir.push(format!("{i:02}{}", "d".repeat(248)));
        std::fs::create_dir(&dir).expect("creating a deep directory");
        chown_nobody(&dir);
    }
    let file = dir.join("f");
    std::fs::write(&file, vec![0xc3u8; 4096]).expect("writing the mapped file");
    chown_nobody(&file);
    let exe = scratch.dir.join(program);
    std::fs::copy(common::workload(program), &exe).expect("copying the workload");
    chmod(&exe, 0o755);
    (file, exe)
}

/// A process that maps a file at a new address and unmaps it, again and
/// again (perf records each map, never an unmap): the tool's history of
/// its map, and the unwinding that follows it, stay bounded.
#[test]
fn executable_mmap_storm() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("mmap_storm");
    let (file, exe) = deep_file_and(&scratch, "mmapstorm");
    let victim = start_program(&exe, true, &[s(file.display())]);
    // Unbounded, 8 s of this took minutes and gigabytes.
    let run = run_tool("mmap_storm", &["-p", &victim.pid().to_string(), "8"]);
    drop(victim);
    run.assert_sound();
}

/// A thread whose deep stacks alternate between two mappings, in a process
/// whose maps take the kernel long to print: finding the mapping that
/// holds a stack, to read on past its copy, costs a bounded share of time.
#[test]
fn deep_stacks_on_two_mappings() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("two_stacks");
    let (file, exe) = deep_file_and(&scratch, "twostacks");
    let victim = start_program(&exe, true, &[s(file.display()), s(1000)]);
    // Unbounded, 8 s of this took over a minute.
    let run = run_tool("two_stacks", &["-p", &victim.pid().to_string(), "8"]);
    drop(victim);
    run.assert_sound();
}

/// Attack: 2,000 threads of `nobody` wake each other at random, 50 tokens
/// going round (`workloads/wakestorm.c`, on CPU 0), traced with
/// `--chain 8`: every pair of threads is an entry, and every interval a
/// chain of its own. The tool must exit 0 in bounded memory (twice the
/// other cases' limit: the victim has 2,000 threads), with at most the cap
/// on entries at eight levels (65,536 / 8), and when it counted more
/// intervals than that cap could keep apart, say that it merged them.
#[test]
fn wake_storm_of_chains() {
    const CAP_AT_8: usize = (1 << 16) / 8;
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("wake_storm_of_chains");
    let exe = scratch.dir.join("wakestorm");
    std::fs::copy(common::workload("wakestorm"), &exe).expect("copying wakestorm");
    chmod(&exe, 0o755);
    let victim = start_program(
        Path::new("taskset"),
        true,
        &[
            s("-c"),
            s(0),
            exe.display().to_string(),
            s(2000),
            s(50),
            s(60),
        ],
    );
    let pid = victim.pid().to_string();
    let run = run_tool("wake_storm_of_chains", &["--chain", "8", "-p", &pid, "5"]);
    drop(victim);
    assert_eq!(run.end, run::End::Exit(0), "{}", run.stderr);
    assert!(
        run.peak_rss_mib < 2.0 * RSS_LIMIT_MIB,
        "peak RSS {:.1} MiB, limit {} MiB",
        run.peak_rss_mib,
        2.0 * RSS_LIMIT_MIB
    );
    run.svg_frames();
    // One `waker:` line each (further levels' are `[2] waker:` and on).
    let entries = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("    waker:"))
        .count();
    assert!(entries <= CAP_AT_8, "{entries} entries");
    let counted: usize = run
        .stderr
        .lines()
        .find_map(|l| {
            let (before, _) = l.split_once(" intervals counted")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no intervals counted in:\n{}", run.stderr));
    if counted > 2 * CAP_AT_8 {
        assert!(
            run.stderr.contains("every entry was merged by process"),
            "{counted} intervals, and no NOTE of the merge:\n{}",
            run.stderr
        );
    }
}

/// Attack: a CPython process (Debian's python3.11, as `nobody`) names its
/// functions and files to forge report lines, then points its runtime at
/// forged interpreters: a thread list that loops without the thread, a
/// frame chain that loops, and one of 10,000 frames
/// (`workloads/pyforge.py`). The tool must stay sound, print the names
/// escaped as one frame each, splice no forged frame, and count the
/// forged states as stacks whose frames could not be read.
#[test]
fn python_forges_names_and_runtime() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("python_forges_names_and_runtime");
    let script = scratch.v().join("pyforge.py");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/pyforge.py");
    std::fs::copy(&source, &script).expect("copying pyforge.py");
    chmod(&script, 0o644);
    let victim = start_program(
        Path::new("/usr/bin/python3.11"),
        true,
        &[script.display().to_string()],
    );
    let pid = victim.pid().to_string();
    let run = run_tool("python_forges_names_and_runtime", &["-p", &pid, "5"]);
    drop(victim);
    run.assert_sound();
    let frames = run.target_frames("python3.11");
    let evil = frames
        .iter()
        .filter(|f| f.starts_with("x;y\\n    target:"))
        .count();
    assert!(evil > 0, "the forged name is not one frame: {frames:?}");
    assert!(
        !run.stdout
            .lines()
            .any(|l| l.contains("target:") && l.contains("evil 1") && !l.contains("\\n")),
        "a forged line in the report:\n{}",
        run.stdout
    );
    // The forged chains name no frame: the program blocks in sleeper only
    // while its runtime is forged.
    assert!(
        !frames.iter().any(|f| f.starts_with("sleeper (pyforge.py:")),
        "a frame of a forged chain was spliced: {frames:?}"
    );
    let (unread, note) = unread_stacks(&run, "Python");
    assert!(
        unread >= 3,
        "the three forged states were not all refused: {note}"
    );
}

/// The count of `lang`'s stacks that could not be read, from the NOTE
/// that counts them, and the NOTE.
fn unread_stacks(run: &Run, lang: &str) -> (u64, String) {
    let note = run
        .stderr
        .lines()
        .find(|l| l.contains(&format!("stacks of {lang} processes")))
        .unwrap_or_else(|| panic!("no NOTE on unread {lang} stacks:\n{}", run.stderr));
    let unread = note
        .split(", ")
        .find_map(|part| part.strip_suffix(" could not be read"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of unread stacks in {note:?}"));
    (unread, note.to_string())
}

/// `workloads/jvmforge` built in `scratch`: a program that loads its own
/// `libjvm.so`, which publishes forged HotSpot tables and structures.
fn build_jvmforge(scratch: &Scratch) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/jvmforge");
    let dir = scratch.dir.join("jvmforge");
    std::fs::create_dir_all(&dir).expect("a build directory");
    chmod(&dir, 0o755);
    let cc = |args: &[&str]| {
        let status = std::process::Command::new("cc")
            .args(["-O0", "-g", "-fno-omit-frame-pointer"])
            .args(args)
            .current_dir(&dir)
            .status()
            .expect("running cc");
        assert!(status.success(), "building jvmforge: cc {args:?}");
    };
    let lib = src.join("libjvm.c");
    let main = src.join("main.c");
    cc(&["-shared", "-fPIC", "-o", "libjvm.so", lib.to_str().unwrap()]);
    cc(&[
        "-o",
        "jvmforge",
        main.to_str().unwrap(),
        "-L.",
        "-ljvm",
        "-Wl,-rpath,$ORIGIN",
    ]);
    for f in ["libjvm.so", "jvmforge"] {
        chmod(&dir.join(f), 0o755);
    }
    dir.join("jvmforge")
}

#[test]
fn java_forges_names_and_structures() {
    let _suite = common::suite(module_path!());
    if !common::live() {
        return;
    }
    let _one = one_at_a_time();
    let scratch = Scratch::new("java_forges_names_and_structures");
    let exe = build_jvmforge(&scratch);
    // The forged tables first: a layout once read is kept for the process.
    let victim = start_program(
        Path::new("/usr/bin/env"),
        true,
        &[
            "JVMFORGE_PHASES=tables,names,loops,depth".to_string(),
            exe.display().to_string(),
        ],
    );
    let pid = victim.pid().to_string();
    let run = run_tool("java_forges_names_and_structures", &["-p", &pid, "6"]);
    drop(victim);
    run.assert_sound();
    let frames = run.target_frames("jvmforge");
    // A name that forges report lines is one frame, escaped.
    assert!(
        frames.iter().any(|f| f.starts_with("x;y\\n    target:")),
        "the forged name is not one frame: {frames:?}"
    );
    for evil in ["evil 1", "evil 2", "evil 3"] {
        assert!(
            !run.stdout
                .lines()
                .any(|l| l.contains("target:") && l.contains(evil) && !l.contains("\\n")),
            "a forged line in the report:\n{}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains('\x1b'), "a raw escape in the report");
    // Loops and cycles are refused, and deep chains cut: none of their
    // frames is spliced.
    for refused in [
        "jvmforge.LoopFp",
        "jvmforge.LoopSegmap",
        "jvmforge.LoopHeap",
        "jvmforge.Lines.endless",
        "jvmforge.Deep.recurse",
    ] {
        assert!(
            !frames.iter().any(|f| f.starts_with(refused)),
            "a frame of a refused walk was spliced ({refused}): {frames:?}"
        );
    }
    let (unread, note) = unread_stacks(&run, "Java");
    assert!(
        unread >= 4,
        "the forged states were not all refused: {note}"
    );
}
