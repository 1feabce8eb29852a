//! Tests of the whole user-space path on real binaries: C, C++ and inlined
//! code compiled on the fly, stripped and truncated files, the vDSO, and the
//! test process itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use object::{Object, ObjectSegment, ObjectSymbol};

use super::*;

/// A pid no process can have (above the kernel's PID_MAX_LIMIT).
const FAKE_TGID: u32 = 0x7fff_0000;
/// Where the synthetic mapping of a test binary starts.
const BASE: u64 = 0x7f00_0000_0000;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "offwake-symbolize-{}-{tag}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating temp dir");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/symbolize")
        .join(name)
}

fn compile(compiler: &str, src: &str, out: &Path, flags: &[&str]) {
    let status = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(fixture(src))
        .status()
        .expect("running the compiler");
    assert!(status.success(), "{compiler} {src} failed");
}

/// `(address, size)` of symbol `name` in the file at `path`.
fn symbol(path: &Path, name: &str) -> (u64, u64) {
    let data = std::fs::read(path).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    obj.symbols()
        .chain(obj.dynamic_symbols())
        .find(|s| s.name() == Ok(name))
        .map(|s| (s.address(), s.size()))
        .unwrap_or_else(|| panic!("{name} not in {}", path.display()))
}

/// The file offset of virtual address `vaddr` in the file at `path`.
fn file_offset(path: &Path, vaddr: u64) -> u64 {
    let data = std::fs::read(path).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    obj.segments()
        .find_map(|s| {
            let (off, size) = s.file_range();
            (s.address() <= vaddr && vaddr < s.address() + size).then(|| vaddr - s.address() + off)
        })
        .expect("address in a PT_LOAD segment")
}

/// A symbolizer where FAKE_TGID maps the whole file at `path` at BASE.
fn symbolizer_for(path: &Path) -> Symbolizer {
    let len = std::fs::metadata(path).expect("stat binary").len();
    let mut maps = ProcessMaps::new();
    maps.add_mapping(
        FAKE_TGID,
        Mapping {
            start: BASE,
            end: BASE + len.next_multiple_of(4096),
            pgoff: 0,
            path: path.to_string_lossy().into(),
            deleted: false,
            file: None,
            build_id: None,
            from: 0,
            until: u64::MAX,
        },
    );
    Symbolizer::new(maps, None).expect("symbolizer")
}

/// The runtime address (under `symbolizer_for`) of `vaddr` in `path`.
fn runtime(path: &Path, vaddr: u64) -> u64 {
    BASE + file_offset(path, vaddr)
}

#[test]
fn c_function_from_dwarf_and_return_address_convention() {
    let dir = TempDir::new("c");
    let bin = dir.path("work");
    compile(
        "cc",
        "work.c",
        &bin,
        &["-g", "-O0", "-fno-omit-frame-pointer"],
    );
    let (addr, size) = symbol(&bin, "work");
    let (main, _) = symbol(&bin, "main");
    assert!(size > 1);
    let mut s = symbolizer_for(&bin);
    let start = runtime(&bin, addr);
    let end = runtime(&bin, addr + size);
    // Frame 0 exact; frame 1 is a return address at the very end of `work`
    // (looked up as end - 1, still `work`).
    assert_eq!(
        s.user(FAKE_TGID, 10, &[start + 1, end]),
        vec!["work".to_string(), "work".to_string()]
    );
    assert_eq!(s.user(FAKE_TGID, 10, &[runtime(&bin, main)]), vec!["main"]);
    // Outside any mapping, or before the mapping is valid: unknown.
    assert_eq!(s.user(FAKE_TGID, 10, &[0x1000]), vec![UNKNOWN]);
    assert_eq!(s.user(FAKE_TGID + 1, 10, &[start]), vec![UNKNOWN]);
    // user_stacks tells those apart from any name, with the file and
    // offset of an address in a file.
    let stack = UserStack {
        tgid: FAKE_TGID,
        time: 10,
        addrs: &[0x1000, start + 1, BASE + 3],
        code: crate::aggregate::Code::default(),
    };
    let header = Symbol::Unresolved {
        module: Some(Arc::from("work")),
        offset: 3,
    };
    assert_eq!(
        s.user_stacks(&[stack], &mut |_, _, _| {}),
        vec![vec![
            Symbol::Unresolved {
                module: None,
                offset: 0x1000
            },
            Symbol::Name("work".into()),
            header,
        ]]
    );
}

#[test]
fn cpp_method_is_demangled_with_parameters() {
    let dir = TempDir::new("cpp");
    let bin = dir.path("widget");
    compile(
        "c++",
        "widget.cpp",
        &bin,
        &["-g", "-O0", "-fno-omit-frame-pointer"],
    );
    let (addr, _) = symbol(&bin, "_ZN2ns6Widget4frobEi");
    let mut s = symbolizer_for(&bin);
    assert_eq!(
        s.user(FAKE_TGID, 0, &[runtime(&bin, addr)]),
        vec!["ns::Widget::frob(int)"]
    );

    // Without DWARF, the symbol table's mangled name is demangled the same.
    let stripped = dir.path("widget.nodebug");
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin)
        .status()
        .expect("running strip");
    assert!(status.success());
    let elf = elf::ElfFile::open(&stripped).expect("parsing stripped copy");
    assert!(!elf.has_dwarf());
    let mut s = symbolizer_for(&stripped);
    let (addr, _) = symbol(&stripped, "_ZN2ns6Widget4frobEi");
    assert_eq!(
        s.user(FAKE_TGID, 0, &[runtime(&stripped, addr) + 2]),
        vec!["ns::Widget::frob(int)"]
    );
}

#[test]
fn inlined_function_expands_innermost_first() {
    let dir = TempDir::new("inline");
    let bin = dir.path("inline");
    compile("cc", "inline.c", &bin, &["-g", "-O2"]);
    let (addr, size) = symbol(&bin, "outer");
    let mut s = symbolizer_for(&bin);
    let expected = vec!["inner".to_string(), "outer".to_string()];
    let found = (addr..addr + size)
        .map(|a| s.user(FAKE_TGID, 0, &[runtime(&bin, a)]))
        .any(|names| names == expected);
    assert!(found, "no address of outer() resolved to [inner, outer]");
    // The first instruction of outer is outer's own.
    assert_eq!(s.user(FAKE_TGID, 0, &[runtime(&bin, addr)]), vec!["outer"]);
}

/// The DWARF function names at `vaddr` in `elf`, every inline copy kept.
fn raw_inline_chain(elf: &elf::ElfFile, vaddr: u64) -> Vec<String> {
    elf.dwarf_frames(vaddr)
        .into_iter()
        .map(|f| f.name)
        .collect()
}

/// Compiles `fixture` and checks that inside `function` (an ELF symbol:
/// the function, or one it was inlined into) some address has `name`
/// inlined into `name` in raw DWARF (else the fixture no longer shows what
/// it is for), and that the symbolizer prints it there once. Two stack
/// entries in the same function stay two frames.
fn assert_split_back_is_one_frame(
    compiler: &str,
    fixture: &str,
    flags: &[&str],
    function: &str,
    name: &str,
) {
    let dir = TempDir::new("split");
    let bin = dir.path("split");
    compile(compiler, fixture, &bin, flags);
    let (addr, size) = symbol(&bin, function);
    let elf = elf::ElfFile::open(&bin).expect("parsing the fixture");
    let split: Vec<u64> = (addr..addr + size)
        .filter(|&a| raw_inline_chain(&elf, a).starts_with(&[name.to_string(), name.to_string()]))
        .collect();
    assert!(
        !split.is_empty(),
        "{fixture}: the compiler did not inline {name} into itself anywhere; the fixture \
         no longer shows what it is for"
    );
    let mut s = symbolizer_for(&bin);
    for &a in &split {
        let names = s.user(FAKE_TGID, 0, &[runtime(&bin, a)]);
        assert_eq!(
            names.first().map(String::as_str),
            Some(name),
            "at {a:#x}: {names:?}"
        );
        assert_ne!(
            names.get(1).map(String::as_str),
            Some(name),
            "at {a:#x}: {names:?}"
        );
    }
    let inside = runtime(&bin, split[0]);
    let twice = s.user(FAKE_TGID, 0, &[inside, inside + 1]);
    assert_eq!(twice.iter().filter(|n| *n == name).count(), 2, "{twice:?}");
}

/// Compiles `fixture` and checks that the address of `container` (an ELF
/// symbol) with the most levels of `name` inlined into itself (at least
/// two, else the fixture no longer shows what it is for) keeps them all.
fn assert_inlined_recursion_is_kept(fixture: &str, flags: &[&str], container: &str, name: &str) {
    let dir = TempDir::new("recurse");
    let bin = dir.path("recurse");
    compile("cc", fixture, &bin, flags);
    let (addr, size) = symbol(&bin, container);
    let elf = elf::ElfFile::open(&bin).expect("parsing the fixture");
    let deepest = (addr..addr + size)
        .map(|a| (a, raw_inline_chain(&elf, a)))
        .max_by_key(|(_, chain)| chain.iter().filter(|n| *n == name).count())
        .expect("the container has addresses");
    let levels = deepest.1.iter().filter(|n| *n == name).count();
    assert!(
        levels >= 2,
        "{fixture}: the compiler did not inline {name} into itself; the fixture no longer \
         shows what it is for: {:?}",
        deepest.1
    );
    let mut s = symbolizer_for(&bin);
    assert_eq!(s.user(FAKE_TGID, 0, &[runtime(&bin, deepest.0)]), deepest.1);
}

/// GCC's function splitting leaves DWARF saying that split_read() is
/// inlined into split_read(), called from its own declaration, over part
/// of its code: such an address is one frame, printed once, as `perf
/// script` and bcc print it.
#[test]
fn a_function_split_and_inlined_back_is_one_frame() {
    assert_split_back_is_one_frame("cc", "split.c", &["-g", "-O2"], "split_read", "split_read");
}

/// Under LTO the copy refers to its function in another unit
/// (`DW_FORM_ref_addr`).
#[test]
fn a_function_split_and_inlined_back_under_lto_is_one_frame() {
    assert_split_back_is_one_frame(
        "cc",
        "split.c",
        &["-g", "-O2", "-flto"],
        "main",
        "split_read",
    );
}

/// The same for a member function defined apart from its declaration,
/// whose DIE has only the declaration attributes that differ (the rest
/// come from the declaration).
#[test]
fn a_member_function_split_and_inlined_back_is_one_frame() {
    assert_split_back_is_one_frame(
        "c++",
        "member_split.cpp",
        &["-g", "-O2"],
        "main",
        "Source::fetch(int, void*, unsigned long)",
    );
}

/// Recursion that GCC inlined: descend() inlined into descend(), called
/// from its body, a few levels deep. Every level is a frame of the code's.
#[test]
fn recursion_inlined_into_itself_keeps_every_level() {
    assert_inlined_recursion_is_kept("recurse.c", &["-g", "-O2"], "climb", "descend");
}

/// Recursion whose call is at the line and column of the declaration,
/// but in another file (`#line`): the file tells it from a split.
#[test]
fn recursion_called_at_the_declaration_line_of_another_file_is_kept() {
    assert_inlined_recursion_is_kept(
        "recurse.c",
        &["-g", "-O2", "-DCALL_ELSEWHERE"],
        "climb",
        "descend",
    );
}

#[test]
fn an_untyped_label_in_code_names_what_follows_it() {
    let dir = TempDir::new("label");
    let bin = dir.path("label");
    compile("cc", "label.c", &bin, &["-g", "-O0"]);
    let data = std::fs::read(&bin).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok("asm_entry"))
        .expect("asm_entry");
    assert_eq!(
        (sym.kind(), sym.size()),
        (object::SymbolKind::Unknown, 0),
        "asm_entry is an untyped label"
    );
    let (addr, _) = symbol(&bin, "asm_entry");
    let mut s = symbolizer_for(&bin);
    // Inside the call, and the return address after it.
    assert_eq!(
        s.user(FAKE_TGID, 0, &[runtime(&bin, addr + 1)]),
        vec!["asm_entry"]
    );
    let (work, _) = symbol(&bin, "work_in_c");
    let names = s.user(
        FAKE_TGID,
        0,
        &[runtime(&bin, work), runtime(&bin, addr + 5)],
    );
    assert_eq!(names, vec!["work_in_c", "asm_entry"]);
}

/// Whether the file at `path`, opened as a traced process's would be,
/// has a version (see [`crate::sys::open::Version`]).
fn versioned(path: &Path) -> bool {
    let dir = crate::sys::open::Dir::open(path.parent().unwrap(), crate::sys::open::Scope::Root)
        .expect("opening the file's directory");
    dir.open_file(path.file_name().unwrap().to_str().unwrap())
        .expect("opening the file")
        .version
        .is_some()
}

/// A directory `name` in `dir`, mode 0700, for a cache.
fn private_dir(dir: &TempDir, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.path(name);
    std::fs::create_dir(&path).expect("creating the cache directory");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    path
}

/// One run's symbolization of `addrs` of `bin`, each a stack of its own,
/// keeping names in `cache` (and looking for debug files in `debug`):
/// the names, and how many files were parsed.
fn kept_run(
    bin: &Path,
    addrs: &[u64],
    cache: &Path,
    debug: Option<&Path>,
) -> (Vec<Vec<Symbol>>, usize) {
    let mut s = symbolizer_for(bin);
    s.files
        .keep_names_in(crate::sys::cache::CacheDir::at(cache).expect("cache dir"));
    if let Some(debug) = debug {
        s.files.set_debug_dirs(debugfile::DebugDirs::at(debug));
    }
    let stacks: Vec<UserStack<'_>> = addrs
        .iter()
        .map(|a| UserStack {
            tgid: FAKE_TGID,
            time: 0,
            addrs: std::slice::from_ref(a),
            code: crate::aggregate::Code::default(),
        })
        .collect();
    let names = s.user_stacks(&stacks, &mut |_, _, _| {});
    (names, s.files.parses)
}

/// Whether some of `names` is `inner` inlined into `outer`.
fn has_inlined(names: &[Vec<Symbol>]) -> bool {
    let inlined = [Symbol::Name("inner".into()), Symbol::Name("outer".into())];
    names.iter().any(|n| n[..] == inlined)
}

#[test]
fn names_are_kept_for_the_next_run_of_the_same_file() {
    let dir = TempDir::new("kept");
    let bin = dir.path("inline");
    compile("cc", "inline.c", &bin, &["-g", "-O2"]);
    let cache = private_dir(&dir, "cache");
    let (addr, size) = symbol(&bin, "outer");
    let addrs: Vec<u64> = (addr..addr + size).map(|a| runtime(&bin, a)).collect();
    let run = || kept_run(&bin, &addrs, &cache, None);
    let (first, parses) = run();
    assert_eq!(parses, 1, "parsed once per stack's file");
    assert!(has_inlined(&first), "DWARF's inlined frames: {first:?}");
    let stored: Vec<_> = std::fs::read_dir(&cache)
        .expect("listing the cache")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("names-"))
        .collect();
    assert_eq!(
        stored.len(),
        usize::from(versioned(&bin)),
        "one file for the binary"
    );
    let (second, parses) = run();
    assert_eq!(second, first);
    if !versioned(&bin) {
        // No unique mount id (before Linux 6.8): nothing is kept.
        assert_eq!(parses, 1, "parsed again where nothing may be kept");
        return;
    }
    assert_eq!(parses, 0, "the same file is not parsed again");

    // A file changed since (here only its times) is parsed again.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let data = std::fs::read(&bin).expect("reading binary");
    std::fs::write(&bin, &data).expect("rewriting binary");
    let (third, parses) = run();
    assert_eq!(third, first);
    assert_eq!(parses, 1, "a changed file is parsed again");

    // What a parse over its budget found is not kept: the next run, with
    // room, may find more.
    let other = private_dir(&dir, "cache-small");
    let mut s = symbolizer_for(&bin);
    s.files
        .keep_names_in(crate::sys::cache::CacheDir::at(&other).expect("cache dir"));
    s.files
        .set_run_budget(read::RunBudget::new(8 << 10, 1 << 30));
    s.user(FAKE_TGID, 0, &addrs[..1]);
    assert_eq!(s.files.parses, 1);
    assert_eq!(
        std::fs::read_dir(&other).expect("listing").count(),
        0,
        "nothing kept from a parse over its budget"
    );
}

#[test]
fn kept_names_give_way_to_a_debug_file_installed_since() {
    let dir = TempDir::new("kept-debug");
    let full = dir.path("inline.full");
    compile("cc", "inline.c", &full, &["-g", "-O2"]);
    let bin = dir.path("inline");
    binutil(
        "objcopy",
        &["--strip-debug".as_ref(), full.as_os_str(), bin.as_os_str()],
    );
    let data = std::fs::read(&bin).expect("reading binary");
    let id = crate::bytes::hex_string(
        object::File::parse(&*data)
            .expect("parsing binary")
            .build_id()
            .expect("notes")
            .expect("a build-id"),
    );
    let debug = dir.path("debug");
    std::fs::create_dir_all(debug.join(".build-id").join(&id[..2])).expect("mkdir");
    let cache = private_dir(&dir, "cache");
    let (addr, size) = symbol(&bin, "outer");
    let addrs: Vec<u64> = (addr..addr + size).map(|a| runtime(&bin, a)).collect();
    let run = || {
        let (names, parses) = kept_run(&bin, &addrs, &cache, Some(&debug));
        (has_inlined(&names), parses)
    };
    assert_eq!(run(), (false, 1), "the symbol table alone");
    if !versioned(&bin) {
        // No unique mount id (before Linux 6.8): nothing is kept.
        assert_eq!(run(), (false, 1), "parsed again where nothing may be kept");
        return;
    }
    assert_eq!(run(), (false, 0), "kept");
    binutil(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            full.as_os_str(),
            debug
                .join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..]))
                .as_os_str(),
        ],
    );
    assert_eq!(run(), (true, 1), "the debug file's DWARF");
    assert_eq!(run(), (true, 0), "kept again");
}

#[test]
fn stripped_binary_falls_back_to_dynsym() {
    let dir = TempDir::new("strip");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0", "-rdynamic"]);
    let (addr, _) = symbol(&bin, "work");
    let stripped = dir.path("work.stripped");
    let status = Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin)
        .status()
        .expect("running strip");
    assert!(status.success());
    let mut s = symbolizer_for(&stripped);
    // -rdynamic exports `work` in .dynsym, which survives strip.
    assert_eq!(
        s.user(FAKE_TGID, 0, &[runtime(&stripped, addr) + 1]),
        vec!["work"]
    );
}

#[test]
fn mini_debuginfo_names_what_strip_removed() {
    let dir = TempDir::new("minidebuginfo");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O1"]);
    let (work, _) = symbol(&bin, "work");
    let (main, _) = symbol(&bin, "main");
    let at = |a| runtime(&bin, a) + 1;
    let (work_at, main_at) = (at(work), at(main));
    let stripped = dir.path("work.stripped");
    std::fs::copy(&bin, &stripped).expect("copying the binary");
    binutil("strip", &[stripped.as_os_str()]);
    assert_eq!(
        symbolizer_for(&stripped).user(FAKE_TGID, 0, &[work_at, main_at]),
        vec![UNKNOWN, UNKNOWN],
        "stripped, nothing names them"
    );
    let mini = dir.path("work.mini");
    std::fs::copy(&bin, &mini).expect("copying the binary");
    binutil(
        fixture("minidebuginfo.sh").to_str().unwrap(),
        &[mini.as_os_str()],
    );
    let obj_data = std::fs::read(&mini).unwrap();
    let obj = object::File::parse(&*obj_data).unwrap();
    assert!(obj.section_by_name(".gnu_debugdata").is_some());
    assert!(obj.symbol_table().is_none(), "no .symtab of its own");
    assert_eq!(
        symbolizer_for(&mini).user(FAKE_TGID, 0, &[work_at, main_at]),
        vec!["work", "main"]
    );

    // A .gnu_debugdata that is not xz, or cut short, names nothing and
    // breaks nothing.
    for (tag, cut) in [("junk", 0usize), ("cut", 40)] {
        let bad = dir.path(&format!("work.{tag}"));
        let mut data = obj_data.clone();
        let section = obj.section_by_name(".gnu_debugdata").unwrap();
        let (off, size) = object::ObjectSection::file_range(&section).unwrap();
        let (off, size) = (off as usize, size as usize);
        data[off + cut..off + size].fill(0x5a);
        std::fs::write(&bad, &data).unwrap();
        assert_eq!(
            symbolizer_for(&bad).user(FAKE_TGID, 0, &[work_at]),
            vec![UNKNOWN],
            "{tag}"
        );
    }
}

#[test]
fn truncated_files_give_unknown() {
    let dir = TempDir::new("trunc");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let (addr, _) = symbol(&bin, "work");
    let at = runtime(&bin, addr);
    let data = std::fs::read(&bin).expect("reading binary");

    let tiny = dir.path("tiny");
    std::fs::write(&tiny, &data[..100]).expect("writing truncated copy");
    let mut s = symbolizer_for(&tiny);
    assert_eq!(s.user(FAKE_TGID, 0, &[at, at + 4]), vec![UNKNOWN, UNKNOWN]);

    // Cut in the middle: headers may parse, sections do not; any answer
    // is fine as long as it is one name per address and nothing panics.
    for cut in [data.len() / 4, data.len() / 2, data.len() - 64] {
        let part = dir.path(&format!("part{cut}"));
        std::fs::write(&part, &data[..cut]).expect("writing truncated copy");
        let mut s = symbolizer_for(&part);
        assert_eq!(s.user(FAKE_TGID, 0, &[at, at + 4]).len(), 2);
    }

    // Garbage that is not ELF at all.
    let junk = dir.path("junk");
    std::fs::write(&junk, vec![0xa5u8; 8192]).expect("writing junk");
    let mut s = symbolizer_for(&junk);
    assert_eq!(s.user(FAKE_TGID, 0, &[BASE + 16]), vec![UNKNOWN]);
}

#[test]
fn segment_mapping_an_offset_to_the_last_address_is_not_looked_up_in_dwarf() {
    // A corrupt PT_LOAD whose p_vaddr puts `work` at u64::MAX: addr2line
    // looks up [addr, addr + 1), which overflowed (a panic in debug builds).
    let dir = TempDir::new("vaddr-max");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let (addr, _) = symbol(&bin, "work");
    let off = file_offset(&bin, addr);
    let mut data = std::fs::read(&bin).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    let index = obj
        .segments()
        .position(|s| {
            let (o, n) = s.file_range();
            o <= off && off < o + n
        })
        .expect("work in a segment");
    let seg_offset = obj.segments().nth(index).expect("segment").file_range().0;
    drop(obj);
    // Elf64_Phdr: p_type u32, p_flags u32, p_offset u64, p_vaddr u64, …;
    // the segments are listed in program-header order.
    let phoff = u64::from_ne_bytes(data[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let phentsize = u16::from_ne_bytes([data[0x36], data[0x37]]) as usize;
    let loads: Vec<usize> = (0..u16::from_ne_bytes([data[0x38], data[0x39]]) as usize)
        .map(|i| phoff + i * phentsize)
        .filter(|&at| data[at..at + 4] == 1u32.to_ne_bytes()) // PT_LOAD
        .collect();
    let vaddr_at = loads[index] + 16;
    let lying = u64::MAX - (off - seg_offset);
    data[vaddr_at..vaddr_at + 8].copy_from_slice(&lying.to_ne_bytes());
    let bad = dir.path("work.vaddr-max");
    std::fs::write(&bad, &data).expect("writing corrupt copy");

    // One name (the symbol table's guess, DWARF being skipped) and no panic.
    let mut s = symbolizer_for(&bad);
    assert_eq!(s.user(FAKE_TGID, 0, &[BASE + off]).len(), 1);
    let elf = elf::ElfFile::open(&bad).expect("still parses");
    assert_eq!(elf.vaddr_of_offset(off), Some(u64::MAX));
    assert!(elf.has_dwarf());
    assert!(elf.names(u64::MAX).len() <= 1);
}

/// Peak resident set size of this process, in KiB.
fn max_rss_kib() -> i64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for getrusage to fill.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    assert_eq!(rc, 0, "getrusage");
    u.ru_maxrss
}

#[test]
fn compressed_section_claiming_gigabytes_is_not_decompressed() {
    // A .debug_info whose compression header (Elf64_Chdr: ch_type u32,
    // reserved u32, ch_size u64, …) claims 2 GiB: decompressing it
    // allocated, and zlib filled, all of that before finding out it lied.
    let dir = TempDir::new("chsize");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0", "-gz=zlib"]);
    let (addr, _) = symbol(&bin, "work");
    let at = runtime(&bin, addr);
    let mut data = std::fs::read(&bin).expect("reading binary");
    let obj = object::File::parse(&*data).expect("parsing binary");
    let (info, _) = object::ObjectSection::file_range(
        &obj.section_by_name(".debug_info").expect(".debug_info"),
    )
    .expect("in the file");
    drop(obj);
    let info = info as usize;
    assert_eq!(data[info..info + 4], 1u32.to_ne_bytes(), "ELFCOMPRESS_ZLIB");
    data[info + 8..info + 16].copy_from_slice(&(2u64 << 30).to_ne_bytes());
    let bad = dir.path("work.lying-chsize");
    std::fs::write(&bad, &data).expect("writing corrupt copy");

    let before = max_rss_kib();
    let mut s = symbolizer_for(&bad);
    // DWARF unusable: the symbol table still names the frame.
    assert_eq!(s.user(FAKE_TGID, 0, &[at + 1]), vec!["work"]);
    let grown_mib = (max_rss_kib() - before) / 1024;
    assert!(grown_mib < 1024, "peak RSS grew by {grown_mib} MiB");

    // Honest compressed DWARF is still read: inlined frames come from it.
    let inline = dir.path("inline");
    compile("cc", "inline.c", &inline, &["-g", "-O2", "-gz=zlib"]);
    let (addr, size) = symbol(&inline, "outer");
    let mut s = symbolizer_for(&inline);
    let expected = vec!["inner".to_string(), "outer".to_string()];
    assert!(
        (addr..addr + size).any(|a| s.user(FAKE_TGID, 0, &[runtime(&inline, a)]) == expected),
        "no address of outer() resolved to [inner, outer]"
    );
}

#[inline(never)]
fn live_probe_target() -> u64 {
    std::hint::black_box(42)
}

#[test]
fn a_big_file_does_not_starve_the_small_ones() {
    // This test binary (tens of MiB) and a small one, in one process, with
    // a run budget the big one alone would use up.
    let dir = TempDir::new("starve");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let (work, _) = symbol(&bin, "work");
    let big = std::env::current_exe().expect("own path");
    let big_len = std::fs::metadata(&big).expect("stat").len();
    assert!(big_len > 8 << 20, "the test binary is {big_len} bytes");
    let files = [
        (&big, BASE, big_len),
        (&bin, 2 * BASE, std::fs::metadata(&bin).unwrap().len()),
    ];
    let small_at = 2 * BASE + file_offset(&bin, work) + 1;
    let addrs = [BASE + 0x1000, small_at];
    // What each file spends alone; then a budget that holds the big one's
    // spending and only half the small one's.
    let per_file = 4 << 20;
    let spent = |i: usize| {
        let mut maps = ProcessMaps::new();
        let (path, start, len) = files[i];
        maps.add_mapping(FAKE_TGID, mapping_of(path, start, len));
        let mut s = Symbolizer::new(maps, None).expect("symbolizer");
        s.files
            .set_run_budget(read::RunBudget::new(per_file, 1 << 30));
        s.user(FAKE_TGID, 0, &addrs);
        (1 << 30) - s.files.run_budget_left()
    };
    let (big_spent, small_spent) = (spent(0), spent(1));
    assert!(
        small_spent > 0 && big_spent > small_spent,
        "{big_spent} {small_spent}"
    );
    let mut maps = ProcessMaps::new();
    for (path, start, len) in files {
        maps.add_mapping(FAKE_TGID, mapping_of(path, start, len));
    }
    let mut s = Symbolizer::new(maps, None).expect("symbolizer");
    s.files
        .set_run_budget(read::RunBudget::new(per_file, big_spent + small_spent / 2));
    let names = s.user(FAKE_TGID, 0, &addrs);
    assert_eq!(names[1], "work", "{names:?}");
}

/// A mapping of the whole file at `path` at `start`.
fn mapping_of(path: &Path, start: u64, len: u64) -> Mapping {
    Mapping {
        start,
        end: start + len.next_multiple_of(4096),
        pgoff: 0,
        path: path.to_string_lossy().into(),
        deleted: false,
        file: None,
        build_id: None,
        from: 0,
        until: u64::MAX,
    }
}

#[test]
fn dwarf_read_by_unit_names_as_dwarf_read_whole() {
    // Sixty units, each with functions and an inlined helper.
    let dir = TempDir::new("by-unit");
    let mut sources = Vec::new();
    for i in 0..60 {
        let src = dir.path(&format!("u{i}.c"));
        let mut text = format!(
            "static inline int helper{i}(int x) {{ return x * {i} + (x >> 3); }}\n\
             __attribute__((noinline)) int outer{i}(int x) {{ return helper{i}(x) + {i}; }}\n\
             __attribute__((noinline)) int plain{i}(int x) {{ return x ^ {i}; }}\n"
        );
        // Bulk, so that each unit weighs what a real one does.
        for j in 0..40 {
            text += &format!(
                "struct s{i}_{j} {{ int a{j}; long b{j}; char c{j}[{j} + 1]; }};\n\
                 int bulk{i}_{j}(struct s{i}_{j} *s) {{ return s->a{j} + (int)s->b{j} + s->c{j}[0]; }}\n"
            );
        }
        std::fs::write(&src, text).unwrap();
        sources.push(src);
    }
    let main = dir.path("main.c");
    std::fs::write(&main, "int main(void) { return 0; }\n").unwrap();
    sources.push(main);
    // Stored as is, and compressed (read as a stream).
    for (name, flags) in [
        ("units", &["-g", "-O2"][..]),
        ("units-z", &["-g", "-O2", "-gz=zlib"]),
    ] {
        by_unit_matches_whole(&dir, name, flags, &sources);
    }
}

/// Builds `sources` into `name` with `flags` and compares the names of
/// some of its addresses, DWARF read by unit and read whole.
fn by_unit_matches_whole(dir: &TempDir, name: &str, flags: &[&str], sources: &[PathBuf]) {
    let bin = dir.path(name);
    let status = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .args(sources)
        .status()
        .expect("running cc");
    assert!(status.success());
    let picks: Vec<u64> = (0..60)
        .step_by(7)
        .flat_map(|i| {
            let (outer, size) = symbol(&bin, &format!("outer{i}"));
            let (plain, _) = symbol(&bin, &format!("plain{i}"));
            (outer..outer + size).chain([plain])
        })
        .collect();
    let offsets: Vec<u64> = picks.iter().map(|&v| file_offset(&bin, v)).collect();
    let dir_fd = crate::sys::open::Dir::open(&dir.path(""), crate::sys::open::Scope::Root)
        .expect("opening the directory");
    let opened = dir_fd.open_file(name).expect("opening the binary");
    let parse = |wanted| {
        let mut run = read::RunBudget::new(read::FILE_BUDGET, 1 << 40);
        let elf = elf::ElfFile::from_opened(
            &opened,
            name,
            &debugfile::DebugDirs::system(),
            &mut run,
            wanted,
        )
        .expect("parsing the binary");
        assert!(elf.has_dwarf() && elf.dwarf_refused().is_none());
        (elf, (1 << 40) - run.left())
    };
    let (whole, whole_cost) = parse(elf::Wanted::All);
    // Read by unit, however small the file.
    sparse::MIN_SPARSE_IN_TEST.with(|m| m.set(0));
    let (by_unit, by_unit_cost) = parse(elf::Wanted::Offsets(&offsets));
    sparse::MIN_SPARSE_IN_TEST.with(|m| m.set(u64::MAX));
    let mut inlined = 0;
    for &vaddr in &picks {
        let names = by_unit.names(vaddr);
        assert!(!names.is_empty(), "{vaddr:#x} unnamed");
        assert_eq!(names, whole.names(vaddr), "at {vaddr:#x}");
        inlined += usize::from(names.len() > 1);
    }
    assert!(inlined > 0, "no inlined frame among the addresses");
    // 9 of 61 units, with their line programs and names.
    assert!(
        by_unit_cost * 2 < whole_cost,
        "read by unit: {by_unit_cost} bytes; whole: {whole_cost}"
    );

    // DWARF over the file's budget: the symbols, read first, still name
    // every address.
    let mut run = read::RunBudget::new(whole_cost / 3, 1 << 40);
    let elf = elf::ElfFile::from_opened(
        &opened,
        "/units",
        &debugfile::DebugDirs::system(),
        &mut run,
        elf::Wanted::Offsets(&offsets),
    )
    .expect("parsing the binary");
    assert_eq!(elf.dwarf_refused(), Some(vet::Refused::Budget));
    for &vaddr in &picks {
        let names = elf.names(vaddr);
        assert_eq!(names.len(), 1, "at {vaddr:#x}: {names:?}");
        assert_eq!(
            Some(names[0].as_str()),
            whole.names(vaddr).last().map(String::as_str)
        );
    }
}

#[test]
fn own_process_resolves_rust_function() {
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut s = Symbolizer::new(maps, None).expect("symbolizer");
    let f = live_probe_target as fn() -> u64 as usize as u64;
    assert_eq!(live_probe_target(), 42);
    let names = s.user(me, 1, &[f]);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with("live_probe_target"), "{names:?}");
    assert!(!names[0].contains("::h"), "{names:?}");
}

#[test]
fn own_vdso_resolves() {
    let me = std::process::id();
    let text = std::fs::read_to_string("/proc/self/maps").expect("reading own maps");
    let Some(vdso) = maps::parse_maps(&text, 0).into_iter().find(|m| m.is_vdso()) else {
        return; // No vDSO on this system: nothing to check.
    };
    let len = usize::try_from(vdso.end - vdso.start).expect("vdso size");
    // SAFETY: /proc/self/maps says `len` readable bytes start there, and the
    // vDSO stays mapped for the life of the process.
    let image = unsafe { std::slice::from_raw_parts(vdso.start as usize as *const u8, len) };
    let obj = object::File::parse(image).expect("parsing vdso");
    let Some(sym) = obj
        .dynamic_symbols()
        .find(|s| s.name().is_ok_and(|n| n.ends_with("clock_gettime")))
    else {
        return;
    };
    let seg = obj
        .segments()
        .find(|s| s.address() <= sym.address() && sym.address() < s.address() + s.size())
        .expect("symbol in a segment");
    let addr = vdso.start + sym.address() - seg.address() + seg.file_range().0;
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut s = Symbolizer::new(maps, None).expect("symbolizer");
    let names = s.user(me, 0, &[addr + 1]);
    assert_eq!(names.len(), 1);
    assert!(names[0].ends_with("clock_gettime"), "{names:?}");
}

#[test]
fn kernel_frames_one_name_each() {
    let mut s = Symbolizer::new(ProcessMaps::new(), None).expect("symbolizer");
    let k = crate::kallsyms::table::KernelSymbols::load().expect("reading kallsyms");
    let names = if let Some(addr) = k.address_of("schedule") {
        // Frame 0 exact; frame 1 a return address just past `schedule`'s
        // first byte.
        let names = s.kernel(&[addr, addr + 1, 0x10]);
        assert_eq!(names[..2], ["schedule", "schedule"]);
        // As a return address, schedule's first byte belongs to the
        // function before it.
        let r = s.kernel_returns(&[addr + 1, addr]);
        assert_eq!(r[0], "schedule");
        assert_ne!(r[1], "schedule");
        names
    } else {
        let names = s.kernel(&[0xffff_ffff_8100_0000, 0x10]);
        assert!(s.warnings().iter().any(|w| w.contains("kptr_restrict")));
        names
    };
    assert_eq!(names.last().map(String::as_str), Some(UNKNOWN));
}

/// A recording made at another boot, when KASLR put the kernel's text
/// elsewhere: its addresses are moved to where the text is now.
#[test]
fn a_recordings_kernel_addresses_follow_the_text() {
    let k = crate::kallsyms::table::KernelSymbols::load().expect("reading kallsyms");
    let (Some(text), Some(addr)) = (k.text(), k.address_of("schedule")) else {
        // kptr_restrict hides the addresses: nothing to move.
        return;
    };
    let elsewhere = 0x2a00_0000u64;
    let mut s = Symbolizer::new(ProcessMaps::new(), None).expect("symbolizer");
    s.relocate_kernel(text.wrapping_add(elsewhere));
    assert_eq!(s.kernel(&[addr.wrapping_add(elsewhere)]), ["schedule"]);
    assert!(s.warnings().iter().any(|w| w.contains("another boot")));
    let mut same = Symbolizer::new(ProcessMaps::new(), None).expect("symbolizer");
    same.relocate_kernel(text);
    assert_eq!(same.kernel(&[addr]), ["schedule"]);
    assert!(same.warnings().is_empty());
}

#[test]
fn symbolizer_can_move_between_threads() {
    fn is_send<T: Send>() {}
    is_send::<Symbolizer>();
}

#[test]
fn own_process_resolves_shared_library_function() {
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut s = Symbolizer::new(maps, None).expect("symbolizer");
    // libc's getpid, resolved by the dynamic linker: a shared object mapped
    // with a non-zero file offset, usually known only through .dynsym.
    let f = libc::getpid as unsafe extern "C" fn() -> libc::pid_t as usize as u64;
    let names = s.user(me, 0, &[f]);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with("getpid"), "{names:?}");
}

mod corrupt;

/// Runs a binutils tool, asserting success.
fn binutil(tool: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(tool).args(args).status().expect(tool);
    assert!(status.success(), "{tool} {args:?} failed");
}

/// Whether `bin`, parsed as if mapped at `/bin/work`, finds DWARF in the
/// debug directory `debug`.
fn finds_dwarf(bin: &Path, debug: &Path) -> bool {
    let dir = crate::sys::open::Dir::open(bin.parent().unwrap(), crate::sys::open::Scope::Root)
        .expect("opening the binary's directory");
    let opened = dir
        .open_file(bin.file_name().unwrap().to_str().unwrap())
        .expect("opening the binary");
    let elf = elf::ElfFile::from_opened(
        &opened,
        "/bin/work",
        &debugfile::DebugDirs::at(debug),
        &mut read::RunBudget::default(),
        elf::Wanted::All,
    )
    .expect("parsing the binary");
    elf.has_dwarf()
}

#[test]
fn debug_files_come_only_from_the_debug_directory_and_must_match() {
    let dir = TempDir::new("debuglink");
    let debug = dir.path("debug");
    std::fs::create_dir_all(debug.join("bin")).unwrap();
    std::fs::create_dir_all(dir.path("bin/.debug")).unwrap();
    // With a build-id and without one (then the debuglink's CRC decides).
    for (name, flags) in [
        ("work", &["-g", "-O0"][..]),
        ("work-noid", &["-g", "-O0", "-Wl,--build-id=none"][..]),
    ] {
        let full = dir.path(&format!("{name}.full"));
        compile("cc", "work.c", &full, flags);
        let dbg = debug.join("bin").join(format!("{name}.debug"));
        binutil(
            "objcopy",
            &[
                "--only-keep-debug".as_ref(),
                full.as_os_str(),
                dbg.as_os_str(),
            ],
        );
        let bin = dir.path(&format!("bin/{name}"));
        binutil(
            "objcopy",
            &[
                "--strip-debug".as_ref(),
                format!("--add-gnu-debuglink={}", dbg.display()).as_ref(),
                full.as_os_str(),
                bin.as_os_str(),
            ],
        );
        assert!(
            finds_dwarf(&bin, &debug),
            "{name}: the debuglink under the debug directory"
        );
        // The same name next to the binary, planted by whoever owns its
        // directory, is not looked at.
        let empty = dir.path("empty");
        std::fs::create_dir_all(&empty).unwrap();
        std::os::unix::fs::symlink(&dbg, dir.path(&format!("bin/.debug/{name}.debug"))).unwrap();
        assert!(
            !finds_dwarf(&bin, &empty),
            "{name}: .debug next to the binary"
        );
    }
    // A debug file of another build under the right name is refused: by
    // build-id, and by CRC where there is no build-id.
    let other = dir.path("other.full");
    compile("cc", "work.c", &other, &["-g", "-O1"]);
    binutil(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            other.as_os_str(),
            debug.join("bin/work.debug").as_os_str(),
        ],
    );
    assert!(
        !finds_dwarf(&dir.path("bin/work"), &debug),
        "another build's debug file"
    );
    let other = dir.path("other-noid.full");
    compile(
        "cc",
        "work.c",
        &other,
        &["-g", "-O1", "-Wl,--build-id=none"],
    );
    binutil(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            other.as_os_str(),
            debug.join("bin/work-noid.debug").as_os_str(),
        ],
    );
    assert!(
        !finds_dwarf(&dir.path("bin/work-noid"), &debug),
        "a debug file with another CRC"
    );
    // A link inside the debug directory that leads out of it is not followed.
    std::fs::remove_file(debug.join("bin/work.debug")).unwrap();
    std::fs::rename(dir.path("work.full"), dir.path("outside.debug")).unwrap();
    std::os::unix::fs::symlink("../../outside.debug", debug.join("bin/work.debug")).unwrap();
    assert!(
        !finds_dwarf(&dir.path("bin/work"), &debug),
        "a link out of the debug directory"
    );
}

#[test]
fn a_stop_request_opens_no_more_files_and_says_so() {
    let dir = TempDir::new("stop");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let (addr, _) = symbol(&bin, "work");
    let at = runtime(&bin, addr);

    let mut s = symbolizer_for(&bin);
    assert_eq!(s.user(FAKE_TGID, 10, &[at]), vec!["work"]);
    assert!(!s.warnings().iter().any(|w| w.contains("interrupted")));

    let mut s = symbolizer_for(&bin);
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    s.stop_when(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        true
    });
    assert_eq!(s.user(FAKE_TGID, 10, &[at, at + 1]), vec![UNKNOWN, UNKNOWN]);
    assert_eq!(asked.load(Ordering::Relaxed), 1, "asked once, then stopped");
    let warnings = s.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("symbolization was interrupted")),
        "{warnings:?}"
    );
}

#[test]
fn a_file_that_is_not_the_mapped_one_is_not_read() {
    let dir = TempDir::new("replaced");
    let bin = dir.path("work");
    compile("cc", "work.c", &bin, &["-g", "-O0"]);
    let (addr, _) = symbol(&bin, "work");
    let at = runtime(&bin, addr);
    let len = std::fs::metadata(&bin).unwrap().len();
    let mapping = |file| Mapping {
        start: BASE,
        end: BASE + len.next_multiple_of(4096),
        pgoff: 0,
        path: bin.to_string_lossy().into(),
        deleted: false,
        file,
        build_id: None,
        from: 0,
        until: u64::MAX,
    };
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&bin).unwrap();
    let right = crate::sys::open::FileKey {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let wrong = crate::sys::open::FileKey {
        ino: right.ino + 1,
        ..right
    };
    for (key, want) in [(right, "work"), (wrong, UNKNOWN)] {
        let mut maps = ProcessMaps::new();
        maps.add_mapping(FAKE_TGID, mapping(Some(key)));
        let mut s = Symbolizer::new(maps, None).unwrap();
        assert_eq!(s.user(FAKE_TGID, 10, &[at]), vec![want]);
        if want == UNKNOWN {
            let warnings = s.warnings();
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("not the file the process mapped")),
                "{warnings:?}"
            );
        }
    }
}

/// The note for the stack of process `tgid` sampled at 10, when `maps`
/// knows nothing of its map then: every user frame is unknown.
fn unread_note(maps: ProcessMaps, tgid: u32) -> String {
    let mut s = Symbolizer::new(maps, None).unwrap();
    let gone = UserStack {
        tgid,
        time: 10,
        addrs: &[0x401000, 0x401100],
        code: crate::aggregate::Code::default(),
    };
    let names = s.user_stacks(&[gone], &mut |_, _, _| {});
    assert!(
        names[0]
            .iter()
            .all(|n| matches!(n, Symbol::Unresolved { module: None, .. }))
    );
    let notes = s.warnings();
    assert_eq!(notes.len(), 1, "{notes:?}");
    notes[0].clone()
}

/// A process gone before its map was read has every user frame unknown,
/// and a note says why: under tracefs, which reads maps from /proc only.
#[test]
fn stacks_of_a_process_whose_map_was_never_read_are_noted() {
    let mut maps = ProcessMaps::new();
    maps.set_mmap_events(false);
    let note = unread_note(maps, FAKE_TGID + 7);
    assert_eq!(note, unread::note(Unread::NoRecords, 1, 1));
    assert!(
        note.contains("[unknown]: it exited before its memory map"),
        "{note}"
    );
}

/// Under perf, a process of which no record came was not traced: the note
/// says so, and does not claim that its maps were recorded.
#[test]
fn stacks_of_an_untraced_process_gone_are_noted_as_such() {
    let note = unread_note(ProcessMaps::new(), FAKE_TGID + 7);
    assert_eq!(note, unread::note(Unread::Untraced, 1, 1));
}

/// Under perf, a traced process (its exit was recorded) that exited before
/// /proc was read lacks the mappings it made before tracing began.
#[test]
fn stacks_of_a_traced_process_gone_are_noted_as_such() {
    let tgid = FAKE_TGID + 7;
    let mut maps = ProcessMaps::new();
    // Read first (gone already), as when its stack was stored.
    maps.ensure_covers(tgid, 0, &[0x1000], &[true]);
    maps.observe(&crate::event::Event {
        time: 20,
        cpu: 0,
        kind: crate::event::EventKind::Exit(crate::event::Exit { tgid, tid: tgid }),
    });
    let note = unread_note(maps, tgid);
    assert_eq!(note, unread::note(Unread::BeforeTracing, 1, 1));
}
