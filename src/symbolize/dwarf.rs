//! A file's DWARF, loaded into an addr2line context: the bytes gimli reads
//! ([`Bytes`], through [`Reader`]), each section read once within the
//! file's allowance (by unit where [`super::sparse`] can, location lists
//! and macros never), and vetted (see [`super::vet`]) before addr2line
//! builds from it.

use std::collections::HashMap;
use std::sync::Arc;

use object::{Object, ObjectSection};

use super::elf::section_data;
use super::read::Reader as FileReader;
use super::vet::{Refused, vet};

/// DWARF reader owning its bytes, so a parsed file outlives its reads.
pub(crate) type Reader = gimli::EndianReader<gimli::RunTimeEndian, Bytes>;

/// The bytes of a DWARF section: read whole, or read by unit into an
/// anonymous mapping (see [`super::sparse`]).
#[derive(Clone, Debug)]
pub(crate) enum Bytes {
    Heap(Arc<[u8]>),
    /// Decompressed, kept in the buffer the decompressor filled.
    Vec(Arc<Vec<u8>>),
    Map(Arc<memmap2::Mmap>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Heap(b) => b,
            Bytes::Vec(v) => v,
            Bytes::Map(m) => m,
        }
    }
}

// SAFETY: the bytes are behind an `Arc` (a heap slice, a vector never
// changed once shared, or a private anonymous mapping never remapped or
// unmapped while referenced), so they stay where they are however a
// `Bytes` is moved or cloned.
unsafe impl stable_deref_trait::StableDeref for Bytes {}
// SAFETY: as above; a clone refers to the same bytes.
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

/// True when `obj` carries a non-empty `.debug_info`.
pub(super) fn has_dwarf<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>) -> bool {
    obj.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// Loads the DWARF sections of `obj` (read, decompressed and copied within
/// the file's allowance) into an addr2line context. `None` when they do
/// not fit, or do not parse; [`Refused`] when their shape would make
/// addr2line recurse too deep or build too much.
pub(super) fn load_dwarf<'a>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
    vaddrs: Option<&[u64]>,
) -> Option<Result<addr2line::Context<Reader>, Refused>> {
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let allowance = reader.allowance();
    // Each section read once, whether by the sparse reading or for gimli.
    let read: std::cell::RefCell<HashMap<gimli::SectionId, Option<Bytes>>> = Default::default();
    let whole = |id: gimli::SectionId| -> Option<Bytes> {
        read.borrow_mut()
            .entry(id)
            .or_insert_with(|| section_data(obj, reader, id.name()))
            .clone()
    };
    let sparse = vaddrs.and_then(|v| super::sparse::load(obj, reader, v, endian, &whole));
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let bytes = match (&sparse, id) {
            // Variables' locations and macros name nothing: never inflated
            // (glibc's location lists are 1.4 MiB).
            (
                _,
                gimli::SectionId::DebugLoc
                | gimli::SectionId::DebugLocLists
                | gimli::SectionId::DebugMacinfo
                | gimli::SectionId::DebugMacro,
            ) => None,
            (Some(s), gimli::SectionId::DebugInfo) => Some(s.info.clone()),
            (Some(s), gimli::SectionId::DebugLine) => Some(s.line.clone()),
            (Some(s), gimli::SectionId::DebugStr) => Some(s.str.clone()),
            (Some(s), gimli::SectionId::DebugAbbrev) => Some(s.abbrev.clone()),
            _ => whole(id),
        };
        if bytes.is_none() && allowance.exceeded() {
            return Err(gimli::Error::Io);
        }
        let bytes = bytes.unwrap_or_else(|| Bytes::Heap(Arc::from(&[][..])));
        Ok(gimli::EndianReader::new(bytes, endian))
    };
    let mut dwarf = gimli::Dwarf::load(load).ok()?;
    // Each abbreviation table parsed once, for the walk below and for
    // addr2line (which parses every unit's), and shared by the units that
    // use it.
    dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::All);
    if let Err(refused) = vet(&dwarf, allowance) {
        return Some(Err(refused));
    }
    addr2line::Context::from_dwarf(dwarf).ok().map(Ok)
}
