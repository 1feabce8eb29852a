//! One ELF file, parsed once for the addresses wanted: its `PT_LOAD`
//! segments (file offset → virtual address), the names of its function
//! symbols at those addresses (`.symtab`, else `.dynsym` with its
//! MiniDebugInfo, see [`super::minidebug`], and its debug file's; see
//! [`super::symtab`]) and, when present, its DWARF (or that of a separate
//! debug file found by GNU build-id or debuglink in the trusted debug
//! directory, or fetched from debuginfod: see [`super::debugfile`]) for
//! names with inlined frames, loaded by [`super::dwarf`] (by unit where
//! it can be, see [`super::sparse`]).
//!
//! Files come from traced processes and may be hostile: they are read
//! within a byte budget (see [`super::read`]), DWARF units nested deeper
//! than [`super::vet::MAX_DIE_DEPTH`] are not walked (see [`super::vet`]
//! for the rest of what DWARF must be), and an address yields at most
//! [`MAX_INLINE_FRAMES`] names.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable};
use typed_arena::Arena;

use super::debugfile::{DebugDirs, find_debug_file, parse_debug_file};
use super::demangle::{Lang, demangle, demangle_as};
use super::dwarf::{Bytes, Reader, has_dwarf, load_dwarf};
use super::minidebug::mini_debuginfo;
use super::persist::DebugFile;
use super::read::{Allowance, Reader as FileReader, RunBudget, Source};
use super::symtab::{self, Sorted, Table};
use super::vet::Refused;
use crate::sys::open::Opened;

/// Most names one address yields (its inline chain).
pub(crate) const MAX_INLINE_FRAMES: usize = 128;

/// One `PT_LOAD` segment: where its bytes are in the file and in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) offset: u64,
    pub(crate) filesz: u64,
    pub(crate) vaddr: u64,
}

/// The `PT_LOAD` segments of `obj`.
pub(crate) fn load_segments<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>) -> Vec<Segment> {
    obj.segments()
        .map(|s| {
            let (offset, filesz) = s.file_range();
            Segment {
                offset,
                filesz,
                vaddr: s.address(),
            }
        })
        .collect()
}

/// Where a file's address 0 is in a process that maps file offsets
/// `pgoff..pgoff + (end - start)` at `start..end`: through the segment of
/// `segments` most of that range belongs to. (A segment need not start on
/// a page: the mapping then begins with the tail of the one before.)
pub(crate) fn base_avma(segments: &[Segment], start: u64, end: u64, pgoff: u64) -> Option<u64> {
    let file_end = pgoff.checked_add(end.checked_sub(start)?)?;
    let overlap = |s: &Segment| {
        let s_end = s.offset.saturating_add(s.filesz);
        s_end.min(file_end).saturating_sub(s.offset.max(pgoff))
    };
    let seg = segments
        .iter()
        .filter(|s| overlap(s) > 0)
        .max_by_key(|s| overlap(s))?;
    // File offset o is at start + (o - pgoff) in memory, and at
    // vaddr + (o - offset) in the file's own addresses.
    start
        .checked_sub(pgoff)?
        .checked_add(seg.offset)?
        .checked_sub(seg.vaddr)
}

/// A file's function symbols: all of them (an image looked up at any
/// address), or only the names of the addresses asked for.
#[derive(Debug)]
enum Symbols {
    All(Sorted),
    At(HashMap<u64, String>),
}

/// Which addresses a file is parsed for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wanted<'a> {
    /// Any (the vDSO, tests).
    All,
    /// These file offsets: only their symbols' names are read.
    Offsets(&'a [u64]),
}

/// One function of an address's inline chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DwarfFrame {
    /// Demangled.
    pub(crate) name: String,
    /// Its DIE (an inlined subroutine, or the subprogram holding them) in
    /// the unit of the address.
    pub(crate) die: Option<gimli::UnitOffset<usize>>,
}

/// Why a file gave no names.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// Reading it would take more than the bytes it may use.
    #[error("over its {} MiB budget", .0 >> 20)]
    OverBudget(u64),
    #[error(transparent)]
    Bad(#[from] anyhow::Error),
}

/// A parsed ELF file, ready for lookups.
pub(crate) struct ElfFile {
    segments: Vec<Segment>,
    symbols: Symbols,
    dwarf: Option<addr2line::Context<Reader>>,
    /// Why DWARF (or part of the file) was left out.
    dwarf_refused: Option<Refused>,
    /// The separate debug file looked in, if one was found.
    debug_file: DebugFile,
    /// Everything asked for was read: no allowance ran out.
    whole: bool,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile")
            .field("segments", &self.segments)
            .field(
                "symbols",
                &match &self.symbols {
                    Symbols::All(all) => all.len(),
                    Symbols::At(at) => at.len(),
                },
            )
            .field("dwarf", &self.dwarf.is_some())
            .finish()
    }
}

impl ElfFile {
    /// Opens and parses the ELF file at `path`, a file of our own (tests,
    /// tools): a traced process's files go through [`ElfFile::from_opened`].
    #[cfg(test)]
    pub(crate) fn open(path: &Path) -> Result<ElfFile> {
        use anyhow::{Context as _, bail};
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!("{} is not a regular file", path.display());
        }
        let mut run = RunBudget::default();
        ElfFile::parse_source(
            Source::File(&file),
            meta.len(),
            path.to_str(),
            &DebugDirs::system(),
            &mut run,
            Wanted::All,
        )
        .map_err(anyhow::Error::from)
        .with_context(|| format!("parsing {}", path.display()))
    }

    /// Parses a file that a process mapped, opened safely, for the
    /// addresses `wanted`. `path` is the path the process mapped it at,
    /// for finding its debug file.
    pub(crate) fn from_opened(
        opened: &Opened,
        path: &str,
        debug: &DebugDirs,
        run: &mut RunBudget,
        wanted: Wanted<'_>,
    ) -> Result<ElfFile, ParseError> {
        ElfFile::parse_source(
            Source::File(&opened.file),
            opened.size,
            Some(path),
            debug,
            run,
            wanted,
        )
    }

    /// Parses an ELF image held in memory (the vDSO, tests). `path`, when
    /// known, is used to find a separate debug file by debuglink.
    pub(crate) fn parse(data: &[u8], path: Option<&Path>) -> Result<ElfFile> {
        let mut run = RunBudget::default();
        ElfFile::parse_source(
            Source::Bytes(data),
            data.len() as u64,
            path.and_then(Path::to_str),
            &DebugDirs::system(),
            &mut run,
            Wanted::All,
        )
        .map_err(anyhow::Error::from)
    }

    /// [`ElfFile::parse`] for the file offsets `offsets` only (tests).
    #[cfg(test)]
    pub(crate) fn parse_for(data: &[u8], offsets: &[u64]) -> Result<ElfFile> {
        let mut run = RunBudget::default();
        ElfFile::parse_source(
            Source::Bytes(data),
            data.len() as u64,
            None,
            &DebugDirs::default(),
            &mut run,
            Wanted::Offsets(offsets),
        )
        .map_err(anyhow::Error::from)
    }

    fn parse_source(
        source: Source<'_>,
        len: u64,
        path: Option<&str>,
        debug: &DebugDirs,
        run: &mut RunBudget,
        wanted: Wanted<'_>,
    ) -> Result<ElfFile, ParseError> {
        let allowance = run.allowance();
        let parsed = parse_image(source, len, path, debug, run, &allowance, wanted);
        run.spend(&allowance);
        parsed
    }

    /// True when the file has usable DWARF.
    #[cfg(test)]
    pub(crate) fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The virtual address of file offset `off`, through the `PT_LOAD`
    /// segment holding it.
    pub(crate) fn vaddr_of_offset(&self, off: u64) -> Option<u64> {
        vaddr_of_offset(&self.segments, off)
    }

    /// Names for virtual address `vaddr`, innermost inline first. Empty when
    /// nothing is known.
    pub(crate) fn names(&self, vaddr: u64) -> Vec<String> {
        let from_dwarf = self.dwarf_names(vaddr);
        if !from_dwarf.is_empty() {
            return from_dwarf;
        }
        self.symbol(vaddr)
            .map(|s| vec![demangle(s)])
            .unwrap_or_default()
    }

    /// The DWARF names for `vaddr`, innermost first, one per frame: the
    /// copy of a function that function splitting inlined back into it is
    /// no frame of the code's (`perf script` and bcc show one there), and
    /// is left out; recursion inlined into itself keeps every level.
    fn dwarf_names(&self, vaddr: u64) -> Vec<String> {
        let frames = self.dwarf_frames(vaddr);
        let mut out = Vec::with_capacity(frames.len());
        for (i, frame) in frames.iter().enumerate() {
            let into_itself = frames
                .get(i + 1)
                .is_some_and(|outer| outer.name == frame.name);
            if into_itself && frame.die.is_some_and(|die| self.split_back(vaddr, die)) {
                continue;
            }
            out.push(frame.name.clone());
        }
        out
    }

    /// Every named function DWARF has at `vaddr`, innermost inline first,
    /// as addr2line gives them.
    pub(crate) fn dwarf_frames(&self, vaddr: u64) -> Vec<DwarfFrame> {
        let mut out = Vec::new();
        let Some(ctx) = &self.dwarf else {
            return out;
        };
        // addr2line looks up [vaddr, vaddr + 1), which overflows at the last
        // address (reachable only through a corrupt segment table).
        if vaddr == u64::MAX {
            return out;
        }
        let Ok(mut frames) = ctx.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        // Stop at the first error: a partial chain is still innermost first.
        while out.len() < MAX_INLINE_FRAMES
            && let Ok(Some(frame)) = frames.next()
        {
            let Some(func) = frame.function else {
                continue;
            };
            let Ok(raw) = func.raw_name() else {
                continue;
            };
            if raw.is_empty() {
                continue;
            }
            out.push(DwarfFrame {
                name: demangle_as(&raw, Lang::from_dwarf(func.language)),
                die: frame.dw_die_offset,
            });
        }
        out
    }

    /// Why DWARF that was read was left out, if it was.
    pub(crate) fn dwarf_refused(&self) -> Option<Refused> {
        self.dwarf_refused
    }

    /// True when no allowance ran out while parsing: the names found are
    /// all the file has for the addresses asked.
    pub(crate) fn is_whole(&self) -> bool {
        self.whole && self.dwarf_refused.is_none()
    }

    /// The separate debug file found for this file (and looked in): what
    /// [`super::debugfile::debug_file_of`] tells beforehand.
    pub(crate) fn debug_file(&self) -> DebugFile {
        self.debug_file
    }

    /// True when `die`, in the unit that holds `vaddr`, is the copy of a
    /// function that function splitting inlined back into it (see
    /// [`super::split`]).
    fn split_back(&self, vaddr: u64, die: gimli::UnitOffset<usize>) -> bool {
        let Some(ctx) = &self.dwarf else {
            return false;
        };
        ctx.find_dwarf_and_unit(vaddr)
            .skip_all_loads()
            .is_some_and(|unit| super::split::inlined_back(unit, die))
    }

    /// The raw (mangled) name of the function symbol containing `vaddr`
    /// (of a file parsed for some offsets, only theirs are known).
    pub(crate) fn symbol(&self, vaddr: u64) -> Option<&str> {
        match &self.symbols {
            Symbols::All(all) => all.lookup(vaddr),
            Symbols::At(at) => at.get(&vaddr).map(String::as_str),
        }
    }
}

/// The virtual address of file offset `off`, through the `PT_LOAD`
/// segment holding it.
fn vaddr_of_offset(segments: &[Segment], off: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| s.offset <= off && off - s.offset < s.filesz)
        .map(|s| (off - s.offset).wrapping_add(s.vaddr))
}

/// Parses the image behind `source` within `allowance` for the addresses
/// `wanted`, with its separate debug file (with an allowance of its own)
/// when it has no DWARF.
fn parse_image(
    source: Source<'_>,
    len: u64,
    path: Option<&str>,
    debug: &DebugDirs,
    run: &mut RunBudget,
    allowance: &Allowance,
    wanted: Wanted<'_>,
) -> Result<ElfFile, ParseError> {
    let arena = Arena::new();
    let reader = FileReader::new(source, len, allowance, &arena);
    let obj = parse_elf(&reader, allowance)?;
    let segments = load_segments(&obj);
    if matches!(wanted, Wanted::All) {
        read_string_tables(&obj);
    }
    let (mut entries, own_symtab) = own_entries(&obj, allowance);

    // A separate debug file, for a binary without DWARF: its DWARF and,
    // when the binary has no `.symtab`, its symbols.
    let found = (!has_dwarf(&obj))
        .then(|| find_debug_file(&obj, path, debug))
        .flatten();
    let debug_file = DebugFile::of(found.as_ref().map(|(file, _)| file));
    let dbg_allowance = run.allowance_besides(allowance);
    let dbg_arena = Arena::new();
    let dbg_reader = found.as_ref().map(|(file, _)| {
        FileReader::new(
            Source::File(&file.file),
            file.size,
            &dbg_allowance,
            &dbg_arena,
        )
    });
    let dbg = dbg_reader
        .as_ref()
        .zip(found.as_ref())
        .and_then(|(r, found)| parse_debug_file(&obj, r, found));

    let vaddrs = wanted_vaddrs(wanted, &segments);
    // A debug file's symbols join those of a binary without `.symtab`.
    if !own_symtab && let Some(d) = &dbg {
        entries.extend(symtab_entries(d, Table::Debug, &dbg_allowance));
    }

    // MiniDebugInfo: the symbols a stripped binary keeps beside its
    // `.dynsym`, in an xz-compressed ELF image of their own.
    let mini_image = if own_symtab {
        None
    } else {
        mini_debuginfo(&obj, &reader)
    };
    let mini = mini_image
        .as_deref()
        .and_then(|image| object::File::parse(image).ok());
    if let Some(m) = &mini {
        entries.extend(symtab_entries(m, Table::Mini, allowance));
    }

    let index = symtab::Index::new(entries);
    // Names before DWARF, which may use up what is left of the allowance.
    let symbols = read_names(
        &index,
        vaddrs.as_deref(),
        &obj,
        dbg.as_ref(),
        mini.as_ref(),
        allowance,
    );

    let dbg = dbg.as_ref().zip(dbg_reader.as_ref());
    let (dwarf, over_budget) = own_or_debug_dwarf(&obj, &reader, dbg, vaddrs.as_deref());
    run.spend(&dbg_allowance);
    let whole = !allowance.exceeded() && !dbg_allowance.exceeded();

    let dwarf_refused = match dwarf {
        Some(Err(refused)) => Some(refused),
        _ => over_budget.then_some(Refused::Budget),
    };
    let dwarf = dwarf.and_then(Result::ok);
    if index.is_empty() && dwarf.is_none() && allowance.exceeded() {
        return Err(ParseError::OverBudget(allowance.limit()));
    }
    Ok(ElfFile {
        segments,
        symbols,
        dwarf,
        dwarf_refused,
        debug_file,
        whole,
    })
}

/// The DWARF of `obj` (read through `reader`) or, when it has none, of
/// its debug file `dbg`, loaded for `vaddrs` (see [`load_dwarf`]); and
/// true when the allowance of the file looked in ran out.
fn own_or_debug_dwarf<'a, 'b>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
    dbg: Option<(&object::File<'b, &'b FileReader<'b>>, &'b FileReader<'b>)>,
    vaddrs: Option<&[u64]>,
) -> (Option<Result<addr2line::Context<Reader>, Refused>>, bool) {
    if has_dwarf(obj) {
        let dwarf = load_dwarf(obj, reader, vaddrs);
        return (dwarf, reader.allowance().exceeded());
    }
    let Some((dbg, r)) = dbg else {
        return (None, false);
    };
    let dwarf = if has_dwarf(dbg) {
        load_dwarf(dbg, r, vaddrs)
    } else {
        None
    };
    (dwarf, r.allowance().exceeded())
}

/// The ELF file `reader` reads; over budget when it did not parse for
/// want of `allowance`.
fn parse_elf<'a>(
    reader: &'a FileReader<'a>,
    allowance: &Allowance,
) -> Result<object::File<'a, &'a FileReader<'a>>, ParseError> {
    let obj = match object::File::parse(reader) {
        Ok(obj) => obj,
        Err(_) if allowance.exceeded() => return Err(ParseError::OverBudget(allowance.limit())),
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context("not a readable object file")
                .into());
        }
    };
    if !matches!(obj.format(), object::BinaryFormat::Elf) {
        return Err(anyhow::anyhow!("not an ELF file").into());
    }
    Ok(obj)
}

/// Reads each string table of `obj` whole once, for when every name will
/// be read: names are then found in memory rather than by one read each.
fn read_string_tables<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>) {
    for name in [".strtab", ".dynstr"] {
        if let Some(s) = obj.section_by_name(name) {
            let _ = s.data();
        }
    }
}

/// The function symbols of `obj`'s own tables, charged to `allowance`:
/// those of its `.symtab`, else of its `.dynsym`; true when they are its
/// `.symtab`'s.
fn own_entries<'a, R: object::ReadRef<'a>>(
    obj: &object::File<'a, R>,
    allowance: &Allowance,
) -> (Vec<symtab::Entry>, bool) {
    let code = symtab::code_sections(obj);
    let entries = obj
        .symbol_table()
        .map(|t| symtab::entries(&t, Table::Symtab, &code, allowance))
        .unwrap_or_default();
    if !entries.is_empty() {
        return (entries, true);
    }
    let entries = obj
        .dynamic_symbol_table()
        .map(|t| symtab::entries(&t, Table::Dynsym, &code, allowance))
        .unwrap_or_default();
    (entries, false)
}

/// The function symbols of the `.symtab` of `obj` (a debug file, or a
/// MiniDebugInfo image), as those of table `which`, charged to
/// `allowance`.
fn symtab_entries<'a, R: object::ReadRef<'a>>(
    obj: &object::File<'a, R>,
    which: Table,
    allowance: &Allowance,
) -> Vec<symtab::Entry> {
    let Some(t) = obj.symbol_table() else {
        return Vec::new();
    };
    let code = symtab::code_sections(obj);
    symtab::entries(&t, which, &code, allowance)
}

/// The virtual addresses of the file offsets `wanted`, through the
/// `PT_LOAD` `segments`; `None` when all are wanted.
fn wanted_vaddrs(wanted: Wanted<'_>, segments: &[Segment]) -> Option<Vec<u64>> {
    match wanted {
        Wanted::All => None,
        Wanted::Offsets(offsets) => Some(
            offsets
                .iter()
                .filter_map(|&off| vaddr_of_offset(segments, off))
                .collect(),
        ),
    }
}

/// The names of `index`'s symbols at `vaddrs` (of all of them when
/// `None`), each read from the table it is in (of the image `obj`, its
/// debug file `dbg` or its MiniDebugInfo `mini`) and charged to
/// `allowance`.
fn read_names<'data>(
    index: &symtab::Index,
    vaddrs: Option<&[u64]>,
    obj: &impl Object<'data>,
    dbg: Option<&impl Object<'data>>,
    mini: Option<&impl Object<'data>>,
    allowance: &Allowance,
) -> Symbols {
    let name_of = |e: &symtab::Entry| -> Option<String> {
        let at = object::SymbolIndex(e.index());
        match e.table() {
            Table::Symtab => name_at(obj.symbol_table()?, at),
            Table::Dynsym => name_at(obj.dynamic_symbol_table()?, at),
            Table::Debug => name_at(dbg?.symbol_table()?, at),
            Table::Mini => name_at(mini?.symbol_table()?, at),
        }
    };
    match vaddrs {
        None => Symbols::All(index.all(&name_of, allowance)),
        Some(vaddrs) => Symbols::At(index.names_at(vaddrs.iter().copied(), &name_of, allowance)),
    }
}

/// The name of symbol `at` of `table`.
fn name_at<'data, T: ObjectSymbolTable<'data>>(
    table: T,
    at: object::SymbolIndex,
) -> Option<String> {
    Some(table.symbol_by_index(at).ok()?.name().ok()?.to_string())
}

/// The most deflate expands its input. A compressed section claiming more
/// lies (real DWARF compresses far less, with zstd too), and decompressing
/// it would first allocate, and fill, whatever size it claims.
pub(crate) const MAX_EXPANSION: u64 = 1032;

/// The bytes of section `name`, decompressed: each charged as the section
/// header claims before it is allocated (compressed, then expanded twice:
/// once by the decompressor, once in the buffer kept).
pub(crate) fn section_bytes<'a>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
    name: &str,
) -> Option<Arc<[u8]>> {
    match section_data(obj, reader, name)? {
        Bytes::Heap(b) => Some(b),
        other => Some(Arc::from(&*other)),
    }
}

/// [`section_bytes`] without copying what was decompressed.
pub(super) fn section_data<'a>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
    name: &str,
) -> Option<Bytes> {
    let section = obj.section_by_name(name)?;
    let range = section.compressed_file_range().ok()?;
    let raw = reader.read_owned(range.offset, range.compressed_size)?;
    if range.format == object::CompressionFormat::None {
        return Some(Bytes::Heap(raw));
    }
    if range.uncompressed_size > range.compressed_size.saturating_mul(MAX_EXPANSION)
        || !reader
            .allowance()
            .charge(range.uncompressed_size.saturating_mul(2))
    {
        return None;
    }
    let compressed = object::CompressedData {
        format: range.format,
        data: &raw,
        uncompressed_size: range.uncompressed_size,
    };
    match compressed.decompress().ok()? {
        std::borrow::Cow::Owned(v) => Some(Bytes::Vec(Arc::new(v))),
        std::borrow::Cow::Borrowed(b) => Some(Bytes::Heap(Arc::from(b))),
    }
}
