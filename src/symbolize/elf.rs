//! One ELF file, parsed once: its `PT_LOAD` segments (file offset → virtual
//! address), a sorted function-symbol table (`.symtab`, else `.dynsym`) and,
//! when present, its DWARF (or that of a separate debug file found by GNU
//! build-id or debuglink) for names with inlined frames.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use super::demangle::{Lang, demangle, demangle_as};

/// DWARF reader owning its bytes, so a parsed file outlives its mmap.
pub(crate) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

#[derive(Debug, Clone, Copy)]
struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

#[derive(Debug, Clone)]
struct Sym {
    addr: u64,
    size: u64,
    name: String,
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

/// A parsed ELF file, ready for lookups.
pub struct ElfFile {
    segments: Vec<Segment>,
    /// Sorted by address, one entry per address.
    symbols: Vec<Sym>,
    dwarf: Option<addr2line::Context<Reader>>,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile")
            .field("segments", &self.segments)
            .field("symbols", &self.symbols.len())
            .field("dwarf", &self.dwarf.is_some())
            .finish()
    }
}

/// Maps a file read-only.
fn map_file(path: &Path) -> Result<memmap2::Mmap> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: the mapping is private and read-only, and lives only while this
    // file is parsed (everything kept is copied out). Another process
    // truncating the file meanwhile could fault; every symbolizer working on
    // mapped files shares that risk, and binaries in use are not truncated.
    let map = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("mapping {}", path.display()))?;
    Ok(map)
}

impl ElfFile {
    /// Opens and parses the ELF file at `path`.
    pub fn open(path: &Path) -> Result<ElfFile> {
        let map = map_file(path)?;
        ElfFile::parse(&map, Some(path)).with_context(|| format!("parsing {}", path.display()))
    }

    /// Parses an ELF image held in memory (a file, or the vDSO). `path`, when
    /// known, is used to find a separate debug file by debuglink.
    pub fn parse(data: &[u8], path: Option<&Path>) -> Result<ElfFile> {
        let obj = object::File::parse(data).context("not a readable object file")?;
        if !matches!(obj.format(), object::BinaryFormat::Elf) {
            bail!("not an ELF file");
        }
        let segments = obj
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                Segment {
                    offset,
                    filesz,
                    vaddr: s.address(),
                }
            })
            .collect();
        let mut symbols = function_symbols(&obj);

        let mut dwarf = None;
        if has_dwarf(&obj) {
            dwarf = load_dwarf(&obj).ok();
        } else if let Some(debug_path) = find_debug_file(&obj, path) {
            // A separate debug file: its DWARF and, when the binary is
            // stripped, its symbol table.
            if let Ok(map) = map_file(&debug_path)
                && let Ok(dbg) = object::File::parse(&*map)
            {
                if has_dwarf(&dbg) {
                    dwarf = load_dwarf(&dbg).ok();
                }
                if symbols.is_empty() {
                    symbols = function_symbols(&dbg);
                }
            }
        }
        Ok(ElfFile {
            segments,
            symbols,
            dwarf,
        })
    }

    /// True when the file has usable DWARF.
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The virtual address of file offset `off`, through the `PT_LOAD`
    /// segment holding it.
    pub fn vaddr_of_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.offset <= off && off - s.offset < s.filesz)
            .map(|s| (off - s.offset).wrapping_add(s.vaddr))
    }

    /// Names for virtual address `vaddr`, innermost inline first. Empty when
    /// nothing is known.
    pub fn names(&self, vaddr: u64) -> Vec<String> {
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
        while let Ok(Some(frame)) = frames.next() {
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

    /// The raw (mangled) name of the function symbol containing `vaddr`.
    pub fn symbol(&self, vaddr: u64) -> Option<&str> {
        let idx = self.symbols.partition_point(|s| s.addr <= vaddr);
        // Walk back a little past sized symbols that end before `vaddr`
        // (a small symbol nested in or following a bigger one).
        for s in self.symbols[..idx].iter().rev().take(8) {
            if s.size == 0 || vaddr - s.addr < s.size {
                return Some(&s.name);
            }
        }
        None
    }
}

/// True when `obj` carries a non-empty `.debug_info`.
fn has_dwarf(obj: &object::File<'_>) -> bool {
    obj.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// Function symbols of `.symtab`, else of `.dynsym`, sorted, one per
/// address (preferring sized, then global, names).
fn function_symbols(obj: &object::File<'_>) -> Vec<Sym> {
    let mut syms = collect_symbols(obj.symbols());
    if syms.is_empty() {
        syms = collect_symbols(obj.dynamic_symbols());
    }
    syms
}

fn collect_symbols<'data, 'file, S, I>(iter: I) -> Vec<Sym>
where
    'data: 'file,
    S: ObjectSymbol<'data>,
    I: Iterator<Item = S>,
{
    let mut syms: Vec<(Sym, bool)> = iter
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            if name.is_empty() {
                return None;
            }
            Some((
                Sym {
                    addr: s.address(),
                    size: s.size(),
                    name: name.to_string(),
                },
                s.is_global(),
            ))
        })
        .collect();
    // Best first within an address: sized, then global, then by name.
    syms.sort_unstable_by(|(a, ag), (b, bg)| {
        a.addr
            .cmp(&b.addr)
            .then_with(|| (b.size != 0).cmp(&(a.size != 0)))
            .then_with(|| bg.cmp(ag))
            .then_with(|| a.name.cmp(&b.name))
    });
    syms.dedup_by(|b, a| a.0.addr == b.0.addr);
    syms.into_iter().map(|(s, _)| s).collect()
}

/// The most deflate expands its input. A compressed section claiming more
/// lies (real DWARF compresses far less, with zstd too), and decompressing
/// it would first allocate, and fill, whatever size it claims.
const MAX_EXPANSION: u64 = 1032;

/// Loads the DWARF sections of `obj` (decompressed, copied out) into an
/// addr2line context.
fn load_dwarf(obj: &object::File<'_>) -> Result<addr2line::Context<Reader>> {
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let bytes: Arc<[u8]> = obj
            .section_by_name(id.name())
            .and_then(|s| s.compressed_data().ok())
            .filter(|c| c.uncompressed_size <= (c.data.len() as u64).saturating_mul(MAX_EXPANSION))
            .and_then(|c| c.decompress().ok())
            .map(|d| Arc::from(&*d))
            .unwrap_or_else(|| Arc::from(&[][..]));
        Ok(gimli::EndianArcSlice::new(bytes, endian))
    };
    let dwarf = gimli::Dwarf::load(load).context("loading DWARF sections")?;
    addr2line::Context::from_dwarf(dwarf).context("indexing DWARF")
}

/// A separate debug file: `/usr/lib/debug/.build-id/xx/rest.debug` by GNU
/// build-id, else by `.gnu_debuglink` next to the binary or under
/// `/usr/lib/debug`.
fn find_debug_file(obj: &object::File<'_>, path: Option<&Path>) -> Option<PathBuf> {
    if let Ok(Some(id)) = obj.build_id()
        && id.len() >= 2
    {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let p = PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &hex[..2],
            &hex[2..]
        ));
        if p.is_file() {
            return Some(p);
        }
    }
    let (name, _crc) = obj.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let dir = path?.parent()?;
    let mut candidates = vec![dir.join(".debug").join(name)];
    if let Ok(rel) = dir.strip_prefix("/") {
        candidates.push(Path::new("/usr/lib/debug").join(rel).join(name));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file() && Some(p.as_path()) != path)
}
