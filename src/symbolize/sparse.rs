//! A file's DWARF read by unit: of `.debug_info`, `.debug_line`,
//! `.debug_str` and `.debug_abbrev`, only what the units holding the
//! looked-up addresses need.
//!
//! `.debug_aranges` names the unit of each address. Those units are read
//! whole, with the units it does not list (only their own entries tell
//! their addresses), the units they refer to (`DW_FORM_ref_addr`), their
//! line programs, and the strings that name their functions. Every other unit
//! keeps only its header, so that a walk over the units still finds each
//! one where it was, and reads it as a unit without entries. The sections
//! are anonymous mappings of their full size: bytes never written are zero
//! pages the kernel does not back, so memory holds what was read.
//!
//! A compressed section is expanded as a stream, once per pass, keeping
//! only the ranges wanted. When anything does not fit this reading (no
//! aranges, an unknown unit version or compression), the caller reads the
//! sections whole.

use std::collections::{BTreeSet, HashSet};
use std::io::Read;

use gimli::{AttributeValue, EndianSlice, Reader as _, RunTimeEndian};
use object::{Object, ObjectSection};

use super::dwarf::Bytes;
use super::elf::MAX_EXPANSION;
use super::read::{Allowance, MAX_NAME, Reader as FileReader};
use super::vet::{MAX_DIE_DEPTH, MAX_UNITS};

/// Below this size `.debug_info` is read whole: reading by unit would save
/// little. (ld.so's 640 KiB, for three addresses: 4.1 ms by unit, 5.7 ms
/// whole, where the whole walk and addr2line's setup see every unit.)
const MIN_SPARSE: u64 = 256 << 10;

#[cfg(test)]
thread_local! {
    /// [`MIN_SPARSE`] as this test thread wants it.
    pub(crate) static MIN_SPARSE_IN_TEST: std::cell::Cell<u64> = const { std::cell::Cell::new(MIN_SPARSE) };
}

fn min_sparse() -> u64 {
    #[cfg(test)]
    return MIN_SPARSE_IN_TEST.with(|m| m.get());
    #[cfg(not(test))]
    MIN_SPARSE
}

/// The largest section read by unit (address space reserved, not memory).
const MAX_SECTION: u64 = 4 << 30;
/// How much of a string is read first; a longer one is read again up to
/// [`MAX_NAME`].
const STRING_WINDOW: u64 = 256;

/// The four sections, holding only what the wanted units need.
pub(crate) struct Sparse {
    pub(crate) info: Bytes,
    pub(crate) line: Bytes,
    pub(crate) str: Bytes,
    /// The abbreviation tables of the units read whole; every other
    /// unit has a one-entry table and a childless root (see [`abbrev_of`]),
    /// so that the units without entries cost nothing to set up (glibc's
    /// debug file has 4,126 units, each with a table of its own).
    pub(crate) abbrev: Bytes,
}

/// Where a section's bytes come from.
enum Source {
    /// Stored as is, at this file offset.
    Plain { offset: u64 },
    /// Compressed (`SHF_COMPRESSED`): these bytes, read whole, expand as a
    /// stream, of which only the ranges wanted are kept.
    Packed {
        format: object::CompressionFormat,
        data: std::sync::Arc<[u8]>,
    },
}

/// One section being filled: where its bytes come from, and its mapping.
struct Section {
    source: Source,
    map: memmap2::MmapMut,
}

/// The largest zstd window a packed section may need (more is read whole).
const MAX_ZSTD_WINDOW: u64 = 8 << 20;

impl Section {
    /// An empty mapping for section `name` of `obj`, if it is within the
    /// file and expands (when compressed) within [`MAX_EXPANSION`].
    fn of<'a>(
        obj: &object::File<'a, &'a FileReader<'a>>,
        reader: &'a FileReader<'a>,
        name: &str,
        file_len: u64,
    ) -> Option<Section> {
        let section = obj.section_by_name(name)?;
        let range = section.compressed_file_range().ok()?;
        if range.offset.checked_add(range.compressed_size)? > file_len {
            return None;
        }
        let (source, size) = match range.format {
            object::CompressionFormat::None => (
                Source::Plain {
                    offset: range.offset,
                },
                range.compressed_size,
            ),
            format @ (object::CompressionFormat::Zlib | object::CompressionFormat::Zstandard) => {
                if range.uncompressed_size > range.compressed_size.saturating_mul(MAX_EXPANSION) {
                    return None;
                }
                let data = reader.read_owned(range.offset, range.compressed_size)?;
                (Source::Packed { format, data }, range.uncompressed_size)
            }
            _ => return None,
        };
        // A claim beyond what a mapping can reserve is read whole, and
        // found over the budget there.
        if size > MAX_SECTION {
            return None;
        }
        let size = usize::try_from(size).ok()?;
        Some(Section {
            source,
            map: memmap2::MmapMut::map_anon(size.max(1)).ok()?,
        })
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// A front-to-back reading of the section.
    fn walk<'s, 'r>(&'s mut self, reader: &'s FileReader<'r>) -> Option<Walk<'s, 'r>> {
        let stream: Option<Box<dyn Read + 's>> = match &self.source {
            Source::Plain { .. } => None,
            Source::Packed { format, data } => Some(match format {
                object::CompressionFormat::Zlib => {
                    Box::new(flate2::read::ZlibDecoder::new(&data[..]))
                }
                _ => Box::new(
                    ruzstd::decoding::StreamingDecoder::new_with_max_window_size(
                        &data[..],
                        MAX_ZSTD_WINDOW,
                    )
                    .ok()?,
                ),
            }),
        };
        let offset = match self.source {
            Source::Plain { offset } => offset,
            Source::Packed { .. } => 0,
        };
        Some(Walk {
            map: &mut self.map,
            reader,
            offset,
            stream,
            at: 0,
        })
    }

    /// Reads the ranges `ranges` (offset, length; clipped to the section)
    /// into the mapping, in one front-to-back pass; false when one cannot
    /// be read or does not fit the budget.
    fn fill(
        &mut self,
        reader: &FileReader<'_>,
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> bool {
        let len = self.len();
        let mut ranges: Vec<(u64, u64)> = ranges
            .into_iter()
            .map(|(at, n)| (at.min(len), at.saturating_add(n).min(len)))
            .filter(|(a, b)| a < b)
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let Some(mut walk) = self.walk(reader) else {
            return false;
        };
        merged.into_iter().all(|(a, b)| walk.keep(a, b - a))
    }

    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn done(self) -> Option<Bytes> {
        Some(Bytes::Map(std::sync::Arc::new(
            self.map.make_read_only().ok()?,
        )))
    }
}

/// A reading of one section, front to back, into its mapping: read in
/// place when stored as is, expanded as a stream when compressed.
struct Walk<'s, 'r> {
    map: &'s mut memmap2::MmapMut,
    reader: &'s FileReader<'r>,
    /// File offset of a stored section.
    offset: u64,
    stream: Option<Box<dyn Read + 's>>,
    /// Where the stream is.
    at: u64,
}

impl Walk<'_, '_> {
    /// Reads the next `n` bytes; where they are.
    fn next(&mut self, n: u64) -> Option<u64> {
        let from = self.at;
        self.keep(from, n).then_some(from)
    }

    /// Reads `[at, at + len)` into the mapping, charged; `at` may not be
    /// before the end of the last range read. False when it cannot be
    /// read or does not fit the budget.
    fn keep(&mut self, at: u64, len: u64) -> bool {
        let Some(end) = at.checked_add(len).filter(|&e| e <= self.map.len() as u64) else {
            return false;
        };
        if at < self.at {
            return false;
        }
        let (from, to) = (at as usize, end as usize);
        match &mut self.stream {
            None => {
                let Some(bytes) = self.reader.read_owned(self.offset + at, len) else {
                    return false;
                };
                self.map[from..to].copy_from_slice(&bytes);
            }
            Some(stream) => {
                let skip = at - self.at;
                let skipped = std::io::copy(&mut stream.take(skip), &mut std::io::sink());
                if skipped.ok() != Some(skip)
                    || !self.reader.allowance().charge(len)
                    || stream.read_exact(&mut self.map[from..to]).is_err()
                {
                    return false;
                }
            }
        }
        self.at = end;
        true
    }

    /// The bytes read so far at `[at, at + len)`, to parse.
    fn slice(
        &self,
        at: u64,
        len: u64,
        endian: RunTimeEndian,
    ) -> Option<EndianSlice<'_, RunTimeEndian>> {
        let bytes = self
            .map
            .get(usize::try_from(at).ok()?..usize::try_from(at.checked_add(len)?).ok()?)?;
        Some(EndianSlice::new(bytes, endian))
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }
}

/// One unit of `.debug_info`: its offset and total length.
#[derive(Clone, Copy)]
struct Unit {
    offset: u64,
    len: u64,
    /// Read whole by the walk over the headers.
    kept: bool,
}

/// The sections for `vaddrs`, or `None` when they must be read whole.
/// `other` gives the bytes of a section read whole (`.debug_aranges`,
/// `.debug_abbrev`, `.debug_str_offsets`).
pub(crate) fn load<'a>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
    vaddrs: &[u64],
    endian: RunTimeEndian,
    other: &dyn Fn(gimli::SectionId) -> Option<Bytes>,
) -> Option<Sparse> {
    use object::ReadRef;
    let file_len = reader.len().ok()?;
    let mut info = Section::of(obj, reader, ".debug_info", file_len)?;
    if info.len() < min_sparse() {
        return None;
    }
    let mut line = Section::of(obj, reader, ".debug_line", file_len)?;
    let mut strs = Section::of(obj, reader, ".debug_str", file_len)?;
    let aranges = other(gimli::SectionId::DebugAranges)?;
    let abbrev = other(gimli::SectionId::DebugAbbrev)?;
    let str_offsets = other(gimli::SectionId::DebugStrOffsets);

    let (wanted, listed) = units_of(&aranges, endian, vaddrs)?;
    // One pass: every unit's header, and whole the units holding the
    // addresses and those the aranges do not list (only their own entries
    // tell their addresses).
    let keep = |offset: u64| wanted.contains(&offset) || !listed.contains(&offset);
    let units = headers(&mut info, reader, endian, &keep)?;
    let unit_at = |offset: u64| -> Option<Unit> {
        let i = units
            .partition_point(|u| u.offset <= offset)
            .checked_sub(1)?;
        let u = units[i];
        (offset < u.offset + u.len).then_some(u)
    };
    if wanted
        .iter()
        .any(|&o| unit_at(o).is_none_or(|u| u.offset != o))
    {
        return None;
    }

    // Then the units those refer to, a pass per round.
    let mut read: HashSet<u64> = units.iter().filter(|u| u.kept).map(|u| u.offset).collect();
    let mut to_scan: Vec<Unit> = units.iter().filter(|u| u.kept).copied().collect();
    let mut lines: BTreeSet<u64> = BTreeSet::new();
    let mut names: BTreeSet<u64> = BTreeSet::new();
    while !to_scan.is_empty() {
        let mut next: Vec<Unit> = Vec::new();
        for unit in &to_scan {
            let refs = scan(
                info.bytes(),
                &abbrev,
                str_offsets.as_deref(),
                endian,
                unit.offset,
                &mut lines,
                &mut names,
                reader.allowance(),
            )?;
            for target in refs {
                let u = unit_at(target)?;
                if read.insert(u.offset) {
                    next.push(u);
                }
            }
        }
        if !info.fill(reader, next.iter().map(|u| (u.offset, u.len))) {
            return None;
        }
        to_scan = next;
    }

    read_programs(&mut line, reader, &lines, endian)?;
    read_strings(&mut strs, reader, &names)?;
    // The remade `.debug_abbrev` is a copy of the section's size.
    if !reader.allowance().charge(abbrev.len() as u64) {
        return None;
    }
    let abbrev = abbrev_of(&mut info.map, &abbrev, endian, &units, &read)?;
    Some(Sparse {
        info: info.done()?,
        line: line.done()?,
        str: strs.done()?,
        abbrev,
    })
}

/// An abbreviation table of one entry, code 1: a `DW_TAG_compile_unit`
/// without children or attributes; then the table's end.
const EMPTY_ROOT_TABLE: [u8; 6] = [1, 0x11, 0, 0, 0, 0];

/// `.debug_abbrev` with only the tables of the units in `read`, each from
/// its offset to the next offset any unit's header names (tables are laid
/// one after another). The other units, whose entries were not read, get
/// [`EMPTY_ROOT_TABLE`] in place of theirs, and a root entry of it in
/// `info`: gimli looks for a unit's root past any number of null entries,
/// so a unit left all zeros is read to its end, byte by byte, when it is
/// set up (the length of `.debug_info` in all).
fn abbrev_of(
    info: &mut [u8],
    abbrev: &[u8],
    endian: RunTimeEndian,
    units: &[Unit],
    read: &HashSet<u64>,
) -> Option<Bytes> {
    // Per unit: its table's offset, where its first entry is, and its end.
    let mut placed: Vec<(u64, u64, u64)> = Vec::with_capacity(units.len());
    {
        let info = gimli::DebugInfo::new(&*info, endian);
        for u in units {
            let header = info
                .header_from_offset(gimli::DebugInfoOffset(usize::try_from(u.offset).ok()?))
                .ok()?;
            let first = u.offset.checked_add(header.header_size() as u64)?;
            placed.push((
                header.debug_abbrev_offset().0 as u64,
                first,
                u.offset + u.len,
            ));
        }
    }
    // Each table's offset, and whether a unit read whole uses it.
    let mut tables: Vec<(u64, bool)> = units
        .iter()
        .zip(&placed)
        .map(|(u, p)| (p.0, read.contains(&u.offset)))
        .collect();
    tables.sort_unstable();
    tables.dedup_by(|later, first| {
        let same = later.0 == first.0;
        if same {
            first.1 |= later.1;
        }
        same
    });
    let mut out = vec![0u8; abbrev.len()];
    let mut emptied: HashSet<u64> = HashSet::new();
    for (i, &(start, kept)) in tables.iter().enumerate() {
        let end = tables.get(i + 1).map_or(abbrev.len() as u64, |t| t.0);
        let range = usize::try_from(start).ok()?..usize::try_from(end).ok()?;
        let Some(dest) = out.get_mut(range.clone()) else {
            continue;
        };
        if kept {
            dest.copy_from_slice(abbrev.get(range)?);
        } else if dest.len() >= EMPTY_ROOT_TABLE.len() {
            dest[..EMPTY_ROOT_TABLE.len()].copy_from_slice(&EMPTY_ROOT_TABLE);
            emptied.insert(start);
        }
    }
    for (u, &(table, first, end)) in units.iter().zip(&placed) {
        if !read.contains(&u.offset) && emptied.contains(&table) && first < end {
            *info.get_mut(usize::try_from(first).ok()?)? = 1;
        }
    }
    Some(Bytes::Heap(out.into()))
}

/// The units (by offset) holding `vaddrs`, as `.debug_aranges` says, and
/// every unit it lists. An address it does not cover is in no unit it
/// lists.
fn units_of(
    aranges: &[u8],
    endian: RunTimeEndian,
    vaddrs: &[u64],
) -> Option<(BTreeSet<u64>, HashSet<u64>)> {
    let aranges = gimli::DebugAranges::new(aranges, endian);
    let mut ranges: Vec<(u64, u64, u64)> = Vec::new();
    let mut listed = HashSet::new();
    let mut headers = aranges.headers();
    while let Ok(Some(header)) = headers.next() {
        let unit = header.debug_info_offset().0 as u64;
        listed.insert(unit);
        let mut entries = header.entries();
        while let Ok(Some(entry)) = entries.next() {
            let r = entry.range();
            if r.end > r.begin {
                ranges.push((r.begin, r.end, unit));
            }
        }
        if ranges.len() > 4 * MAX_UNITS {
            return None;
        }
    }
    ranges.sort_unstable();
    let mut out = BTreeSet::new();
    for &vaddr in vaddrs {
        let n = ranges.partition_point(|r| r.0 <= vaddr);
        // Ranges do not overlap in sane files; look a few back anyway.
        let unit = ranges[..n].iter().rev().take(8).find(|r| vaddr < r.1);
        out.extend(unit.map(|r| r.2));
    }
    Some((out, listed))
}

/// Walks the unit headers of `.debug_info` front to back, reading each
/// header into `info`, and each unit `keep` names whole; the units in
/// order. `None` for a unit this reading does not know.
fn headers(
    info: &mut Section,
    reader: &FileReader<'_>,
    endian: RunTimeEndian,
    keep: &dyn Fn(u64) -> bool,
) -> Option<Vec<Unit>> {
    let mut walk = info.walk(reader)?;
    let mut units = Vec::new();
    let mut at = 0u64;
    while at < walk.len() {
        if units.len() >= MAX_UNITS {
            return None;
        }
        // From the unit's start, past the end of the last unit read: the
        // initial length (4 bytes, or 12 for 64-bit DWARF).
        if !walk.keep(at, 4) {
            return None;
        }
        if walk.slice(at, 4, endian)?.read_u32().ok()? == 0xffff_ffff {
            walk.next(8)?;
        }
        let start = walk.at - at;
        let (len, format) = walk.slice(at, start, endian)?.read_initial_length().ok()?;
        let offset_size = u64::from(format.word_size());
        let i = walk.next(2)?;
        let rest = match walk.slice(i, 2, endian)?.read_u16().ok()? {
            2..=4 => offset_size + 1,
            5 => {
                let i = walk.next(1)?;
                match gimli::DwUt(walk.slice(i, 1, endian)?.read_u8().ok()?) {
                    gimli::DW_UT_compile | gimli::DW_UT_partial => 1 + offset_size,
                    gimli::DW_UT_skeleton | gimli::DW_UT_split_compile => 1 + offset_size + 8,
                    gimli::DW_UT_type | gimli::DW_UT_split_type => {
                        1 + offset_size + 8 + offset_size
                    }
                    _ => return None,
                }
            }
            _ => return None,
        };
        let total = start.checked_add(u64::try_from(len).ok()?)?;
        let header = walk.at - at + rest;
        if header > total || at.checked_add(total)? > walk.len() {
            return None;
        }
        walk.next(rest)?;
        let kept = keep(at);
        if kept {
            walk.next(total - header)?;
        }
        units.push(Unit {
            offset: at,
            len: total,
            kept,
        });
        at += total;
    }
    Some(units)
}

/// Reads the DIEs of the unit at `offset` (already in `info`): records its
/// line program and the strings naming its functions, and returns the
/// `.debug_info` offsets it refers to in other units. `None` when it does
/// not parse or nests too deep.
#[allow(clippy::too_many_arguments)]
fn scan(
    info: &[u8],
    abbrev: &[u8],
    str_offsets: Option<&[u8]>,
    endian: RunTimeEndian,
    offset: u64,
    lines: &mut BTreeSet<u64>,
    names: &mut BTreeSet<u64>,
    allowance: &Allowance,
) -> Option<Vec<u64>> {
    // What keeping one offset found costs (a set or list entry).
    const KEPT: u64 = 48;
    let debug_info = gimli::DebugInfo::new(info, endian);
    let header = debug_info
        .header_from_offset(gimli::DebugInfoOffset(usize::try_from(offset).ok()?))
        .ok()?;
    let abbrevs = header
        .abbreviations(&gimli::DebugAbbrev::new(abbrev, endian))
        .ok()?;
    let format = header.format();
    let mut entries = header.entries_raw(&abbrevs, None).ok()?;
    let mut refs = Vec::new();
    let mut str_base: Option<u64> = None;
    let mut indexed: Vec<u64> = Vec::new();
    while !entries.is_empty() {
        if entries.next_depth() > MAX_DIE_DEPTH as isize {
            return None;
        }
        let Some(abbrev) = entries.read_abbreviation().ok()? else {
            continue;
        };
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec).ok()?;
            let kept = matches!(
                attr.value(),
                AttributeValue::DebugInfoRef(_)
                    | AttributeValue::DebugLineRef(_)
                    | AttributeValue::DebugStrRef(_)
                    | AttributeValue::DebugStrOffsetsIndex(_)
            );
            if kept && !allowance.charge(KEPT) {
                return None;
            }
            let naming = matches!(
                attr.name(),
                gimli::DW_AT_name | gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name
            );
            match attr.value() {
                AttributeValue::DebugInfoRef(o) => refs.push(o.0 as u64),
                AttributeValue::DebugLineRef(o) if attr.name() == gimli::DW_AT_stmt_list => {
                    lines.insert(o.0 as u64);
                }
                AttributeValue::DebugStrOffsetsBase(b) => str_base = Some(b.0 as u64),
                AttributeValue::DebugStrRef(o) if naming => {
                    names.insert(o.0 as u64);
                }
                AttributeValue::DebugStrOffsetsIndex(i) if naming => indexed.push(i.0 as u64),
                _ => {}
            }
        }
    }
    if !indexed.is_empty() {
        let table = EndianSlice::new(str_offsets?, endian);
        let base = str_base?;
        let size = u64::from(format.word_size());
        for i in indexed {
            use gimli::Reader as _;
            let mut at = table;
            at.skip(usize::try_from(base.checked_add(i.checked_mul(size)?)?).ok()?)
                .ok()?;
            names.insert(at.read_offset(format).ok()? as u64);
        }
    }
    Some(refs)
}

/// Reads the line programs at `offsets` of `.debug_line` in one pass
/// (a compressed section is expanded once): each program's initial
/// length, then the rest of it, clipped to the section. Programs may
/// overlap, as a hostile file's do: what is read already is not read
/// again. `None` when an offset is past the section's end, or a program
/// cannot be read.
fn read_programs(
    line: &mut Section,
    reader: &FileReader<'_>,
    offsets: &BTreeSet<u64>,
    endian: RunTimeEndian,
) -> Option<()> {
    let mut walk = line.walk(reader)?;
    let len = walk.len();
    // Reads `[from, to)`, less what was read already.
    let read = |walk: &mut Walk<'_, '_>, from: u64, to: u64| -> Option<()> {
        let from = from.max(walk.at);
        (to <= from || walk.keep(from, to - from)).then_some(())
    };
    for &at in offsets {
        if at >= len {
            return None;
        }
        // The initial length: 4 bytes, or 12 for 64-bit DWARF.
        read(&mut walk, at, at.saturating_add(12).min(len))?;
        let total = initial_length(&walk.map[..], endian, at)?;
        read(&mut walk, at, at.saturating_add(total).min(len))?;
    }
    Some(())
}

/// The length (initial length field included) of the line program at
/// `at` of `line`.
fn initial_length(line: &[u8], endian: RunTimeEndian, at: u64) -> Option<u64> {
    let bytes = line.get(usize::try_from(at).ok()?..)?;
    let (len, format) = EndianSlice::new(bytes, endian).read_initial_length().ok()?;
    u64::try_from(len)
        .ok()?
        .checked_add(u64::from(format.initial_length_size()))
}

/// Reads the strings at `offsets` of `.debug_str`: a short window each,
/// then up to [`MAX_NAME`] for any not ended within it.
fn read_strings(
    strs: &mut Section,
    reader: &FileReader<'_>,
    offsets: &BTreeSet<u64>,
) -> Option<()> {
    if !strs.fill(reader, offsets.iter().map(|&at| (at, STRING_WINDOW))) {
        return None;
    }
    let bytes = strs.bytes();
    let long: Vec<(u64, u64)> = offsets
        .iter()
        .filter(|&&at| {
            let Some(from) = usize::try_from(at).ok().filter(|&a| a < bytes.len()) else {
                return false;
            };
            let window = &bytes[from..bytes.len().min(from + STRING_WINDOW as usize)];
            !window.contains(&0)
        })
        .map(|&at| (at, MAX_NAME as u64 + 1))
        .collect();
    strs.fill(reader, long).then_some(())
}
