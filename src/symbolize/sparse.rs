//! A file's DWARF read by unit: of `.debug_info`, `.debug_line` and
//! `.debug_str`, only what the units holding the looked-up addresses need.
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
//! When anything does not fit this reading (no aranges, compressed
//! sections, an unknown unit version), the caller reads the sections whole.

use std::collections::{BTreeSet, HashSet};

use gimli::{AttributeValue, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};

use super::elf::{Bytes, MAX_DIE_DEPTH, MAX_UNITS};
use super::read::{Allowance, MAX_NAME, Reader as FileReader};

/// Below this size `.debug_info` is read whole: reading by unit would save
/// little.
const MIN_SPARSE: u64 = 1 << 20;

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

/// The three sections, holding only what the wanted units need.
pub(crate) struct Sparse {
    pub(crate) info: Bytes,
    pub(crate) line: Bytes,
    pub(crate) str: Bytes,
}

/// One section being filled: where it is in the file, and its mapping.
struct Section {
    offset: u64,
    map: memmap2::MmapMut,
}

impl Section {
    /// An empty mapping for section `name` of `obj`, if uncompressed and
    /// within the file.
    fn of<'a>(
        obj: &object::File<'a, &'a FileReader<'a>>,
        name: &str,
        file_len: u64,
    ) -> Option<Section> {
        let section = obj.section_by_name(name)?;
        let range = section.compressed_file_range().ok()?;
        if range.format != object::CompressionFormat::None
            || range.offset.checked_add(range.compressed_size)? > file_len
        {
            return None;
        }
        // A claim beyond what a mapping can reserve is read whole, and
        // found over the budget there.
        if range.compressed_size > MAX_SECTION {
            return None;
        }
        let size = usize::try_from(range.compressed_size).ok()?;
        Some(Section {
            offset: range.offset,
            map: memmap2::MmapMut::map_anon(size.max(1)).ok()?,
        })
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Reads `[at, at + len)` of the section (clipped to its end) from the
    /// file, charged; false when it does not fit or cannot be read.
    fn fill(&mut self, reader: &FileReader<'_>, at: u64, len: u64) -> bool {
        let end = at.saturating_add(len).min(self.len());
        if at >= end {
            return at == end;
        }
        let Some(bytes) = reader.read_owned(self.offset + at, end - at) else {
            return false;
        };
        self.map[at as usize..end as usize].copy_from_slice(&bytes);
        true
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

/// One unit of `.debug_info`: its offset and total length.
#[derive(Clone, Copy)]
struct Unit {
    offset: u64,
    len: u64,
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
    let mut info = Section::of(obj, ".debug_info", file_len)?;
    if info.len() < min_sparse() {
        return None;
    }
    let mut line = Section::of(obj, ".debug_line", file_len)?;
    let mut strs = Section::of(obj, ".debug_str", file_len)?;
    let aranges = other(gimli::SectionId::DebugAranges)?;
    let abbrev = other(gimli::SectionId::DebugAbbrev)?;
    let str_offsets = other(gimli::SectionId::DebugStrOffsets);

    let (wanted, listed) = units_of(&aranges, endian, vaddrs)?;
    let units = headers(&mut info, reader, endian)?;
    let unit_at = |offset: u64| -> Option<Unit> {
        let i = units
            .partition_point(|u| u.offset <= offset)
            .checked_sub(1)?;
        let u = units[i];
        (offset < u.offset + u.len).then_some(u)
    };

    // The units holding the addresses, and those the aranges do not list,
    // whose addresses only their own entries tell.
    let mut todo: Vec<Unit> = wanted
        .iter()
        .map(|&o| unit_at(o).filter(|u| u.offset == o))
        .collect::<Option<_>>()?;
    todo.extend(units.iter().filter(|u| !listed.contains(&u.offset)));
    let mut read: HashSet<u64> = HashSet::new();
    let mut lines: BTreeSet<u64> = BTreeSet::new();
    let mut names: BTreeSet<u64> = BTreeSet::new();
    while let Some(unit) = todo.pop() {
        if !read.insert(unit.offset) {
            continue;
        }
        if !info.fill(reader, unit.offset, unit.len) {
            return None;
        }
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
            if !read.contains(&u.offset) {
                todo.push(u);
            }
        }
    }

    for &at in &lines {
        let len = initial_length(&line, reader, endian, at)?;
        if !line.fill(reader, at, len) {
            return None;
        }
    }
    read_strings(&mut strs, reader, &names)?;
    Some(Sparse {
        info: info.done()?,
        line: line.done()?,
        str: strs.done()?,
    })
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

/// Walks the unit headers of `.debug_info`, reading only their first bytes
/// into `info`; the units in order. `None` for a unit this reading does not
/// know.
fn headers(
    info: &mut Section,
    reader: &FileReader<'_>,
    endian: RunTimeEndian,
) -> Option<Vec<Unit>> {
    let mut units = Vec::new();
    let mut at = 0u64;
    while at < info.len() {
        if units.len() >= MAX_UNITS {
            return None;
        }
        // Initial length, version, unit type: at most 40 bytes of header.
        let head = reader.read_owned(info.offset + at, (info.len() - at).min(40))?;
        let u32_at = |i: usize| -> Option<u32> {
            let b: [u8; 4] = head.get(i..i + 4)?.try_into().ok()?;
            Some(if endian == RunTimeEndian::Little {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            })
        };
        let u16_at = |i: usize| -> Option<u16> {
            let b: [u8; 2] = head.get(i..i + 2)?.try_into().ok()?;
            Some(if endian == RunTimeEndian::Little {
                u16::from_le_bytes(b)
            } else {
                u16::from_be_bytes(b)
            })
        };
        let (len, start, offset_size) = match u32_at(0)? {
            0xffff_ffff => {
                let lo = u64::from(u32_at(4)?);
                let hi = u64::from(u32_at(8)?);
                let len = if endian == RunTimeEndian::Little {
                    lo | hi << 32
                } else {
                    hi | lo << 32
                };
                (len, 12u64, 8u64)
            }
            l if l >= 0xffff_fff0 => return None,
            l => (u64::from(l), 4, 4),
        };
        let version = u16_at(start as usize)?;
        let header = match version {
            2..=4 => start + 2 + offset_size + 1,
            5 => {
                let kind = *head.get(start as usize + 2)?;
                let base = start + 2 + 1 + 1 + offset_size;
                match kind {
                    // DW_UT_compile, DW_UT_partial
                    1 | 3 => base,
                    // DW_UT_skeleton, DW_UT_split_compile
                    4 | 5 => base + 8,
                    // DW_UT_type, DW_UT_split_type
                    2 | 6 => base + 8 + offset_size,
                    _ => return None,
                }
            }
            _ => return None,
        };
        let total = start.checked_add(len)?;
        if header > total || at.checked_add(total)? > info.len() {
            return None;
        }
        let end = at as usize + header as usize;
        info.map[at as usize..end].copy_from_slice(head.get(..header as usize)?);
        units.push(Unit {
            offset: at,
            len: total,
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

/// The length (initial length field included) of the line program at
/// `at`, read from the file.
fn initial_length(
    line: &Section,
    reader: &FileReader<'_>,
    endian: RunTimeEndian,
    at: u64,
) -> Option<u64> {
    let head = reader.read_owned(line.offset + at, (line.len().checked_sub(at)?).min(12))?;
    let word = |i: usize| -> Option<u32> {
        let b: [u8; 4] = head.get(i..i + 4)?.try_into().ok()?;
        Some(if endian == RunTimeEndian::Little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    match word(0)? {
        0xffff_ffff => {
            let (lo, hi) = (u64::from(word(4)?), u64::from(word(8)?));
            let len = if endian == RunTimeEndian::Little {
                lo | hi << 32
            } else {
                hi | lo << 32
            };
            len.checked_add(12)
        }
        l if l >= 0xffff_fff0 => None,
        l => Some(u64::from(l) + 4),
    }
}

/// Reads the strings at `offsets` of `.debug_str`: a short window each
/// (merged where they meet), then up to [`MAX_NAME`] for any not yet ended.
fn read_strings(
    strs: &mut Section,
    reader: &FileReader<'_>,
    offsets: &BTreeSet<u64>,
) -> Option<()> {
    let mut windows: Vec<(u64, u64)> = Vec::new();
    for &at in offsets {
        let end = at.saturating_add(STRING_WINDOW);
        match windows.last_mut() {
            Some(last) if at <= last.1 => last.1 = last.1.max(end),
            _ => windows.push((at, end)),
        }
    }
    for (at, end) in &windows {
        if !strs.fill(reader, *at, end - at) {
            return None;
        }
    }
    for &at in offsets {
        let bytes = strs.bytes();
        let Some(from) = usize::try_from(at).ok().filter(|&a| a < bytes.len()) else {
            continue;
        };
        let window = &bytes[from..bytes.len().min(from + STRING_WINDOW as usize)];
        if !window.contains(&0) && !strs.fill(reader, at, MAX_NAME as u64 + 1) {
            return None;
        }
    }
    Some(())
}
