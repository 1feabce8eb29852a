//! Recognizes the inlined copy that GCC's function splitting leaves in
//! DWARF, so that it is not printed as a frame of its own.
//!
//! Function splitting (`-fipa-split`, on at -O2) outlines part of a
//! function and may inline it back. DWARF then shows the function inlined
//! into itself, with the call site set to the function's own declaration:
//! glibc's `read` (read.c:24:1) and `mmap64` (mmap64.c:46:1) at their
//! syscall look like that. Recursion that the compiler inlined is called
//! from the function's body instead, and each of its levels is a frame.
//! Two rare shapes of recursion are indistinguishable from a split and
//! lose their inlined levels: a recursive inline function defined by a
//! macro (call and declaration both at the expansion), and one written on
//! a single line and built without column information.
//!
//! Every read here is bounded: one DIE for the call, one for the function
//! and one for its declaration, each found by offset; a reference to
//! another unit scans at most [`MAX_UNITS_SCANNED`] unit headers. Anything
//! unreadable answers "not split", which keeps the frame.

use gimli::Reader as _;
use gimli::constants::*;
use gimli::{AttributeValue, DebuggingInformationEntry, UnitOffset};

use super::dwarf::Reader;

/// The attributes of a call site, and of a declaration: file, line, column.
const CALL: [gimli::DwAt; 3] = [DW_AT_call_file, DW_AT_call_line, DW_AT_call_column];
const DECL: [gimli::DwAt; 3] = [DW_AT_decl_file, DW_AT_decl_line, DW_AT_decl_column];

/// Most unit headers scanned to find the unit of a cross-unit reference:
/// a crafted `.debug_info` of tiny units cannot make each lookup long.
const MAX_UNITS_SCANNED: usize = 1 << 16;

/// Where something is in the source: its file as a path, line and column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Site {
    file: Option<Vec<u8>>,
    line: Option<u64>,
    column: Option<u64>,
}

impl Site {
    fn is_complete(&self) -> bool {
        self.file.is_some() && self.line.is_some() && self.column.is_some()
    }

    /// Takes from `other` what this site lacks.
    fn fill_from(&mut self, other: Site) {
        self.file = self.file.take().or(other.file);
        self.line = self.line.or(other.line);
        self.column = self.column.or(other.column);
    }
}

/// True when the DIE at `die` in `unit` is an inlined copy of a function
/// whose call site (file, line, column) is that function's declaration.
pub(crate) fn inlined_back(unit: gimli::UnitRef<'_, Reader>, die: UnitOffset<usize>) -> bool {
    let Ok(inlined) = unit.entry(die) else {
        return false;
    };
    if inlined.tag() != DW_TAG_inlined_subroutine {
        return false;
    }
    let call = site(unit, &inlined, CALL);
    if call.line.is_none_or(|line| line == 0) {
        return false;
    }
    let Some(origin) = inlined.attr_value(DW_AT_abstract_origin) else {
        return false;
    };
    declaration(unit, origin).is_some_and(|decl| decl == call)
}

/// The declaration site of the function `origin` refers to. GCC gives a
/// definition that has a separate declaration (`DW_AT_specification`)
/// only the attributes that differ from it: the rest come from there.
fn declaration(unit: gimli::UnitRef<'_, Reader>, origin: AttributeValue<Reader>) -> Option<Site> {
    with_entry(unit, origin, |unit, function| {
        let mut decl = site(unit, function, DECL);
        if !decl.is_complete()
            && let Some(spec) = function.attr_value(DW_AT_specification)
            && let Some(from_spec) =
                with_entry(unit, spec, |unit, declared| site(unit, declared, DECL))
        {
            decl.fill_from(from_spec);
        }
        decl
    })
}

/// Runs `f` on the DIE a reference points to: in `unit`, or in another
/// unit of the same `.debug_info` (`DW_FORM_ref_addr`, as LTO writes).
fn with_entry<T>(
    unit: gimli::UnitRef<'_, Reader>,
    reference: AttributeValue<Reader>,
    f: impl FnOnce(gimli::UnitRef<'_, Reader>, &DebuggingInformationEntry<Reader>) -> T,
) -> Option<T> {
    match reference {
        AttributeValue::UnitRef(offset) => {
            let entry = unit.entry(offset).ok()?;
            Some(f(unit, &entry))
        }
        AttributeValue::DebugInfoRef(target) => {
            let dwarf = unit.dwarf;
            let mut headers = dwarf.units();
            let mut scanned = 0;
            while scanned < MAX_UNITS_SCANNED
                && let Ok(Some(header)) = headers.next()
            {
                scanned += 1;
                let start = header.offset().0;
                let end = start.saturating_add(header.length_including_self());
                if target.0 < start || target.0 >= end {
                    continue;
                }
                let offset = target.to_unit_offset(&header)?;
                let other = dwarf.unit(header).ok()?;
                let other = gimli::UnitRef::new(dwarf, &other);
                let entry = other.entry(offset).ok()?;
                return Some(f(other, &entry));
            }
            None
        }
        _ => None,
    }
}

/// The site that the three attributes `at` (file, line, column) of
/// `entry` give; the file as a path, so that sites from two units compare.
fn site(
    unit: gimli::UnitRef<'_, Reader>,
    entry: &DebuggingInformationEntry<Reader>,
    at: [gimli::DwAt; 3],
) -> Site {
    let file = match entry.attr_value(at[0]) {
        Some(AttributeValue::FileIndex(index)) => file_path(unit, index),
        Some(other) => other.udata_value().and_then(|index| file_path(unit, index)),
        None => None,
    };
    let number = |name| entry.attr_value(name).and_then(|v| v.udata_value());
    Site {
        file,
        line: number(at[1]),
        column: number(at[2]),
    }
}

/// The path of file `index` of `unit`'s line program: its directory and
/// its name, as written there.
fn file_path(unit: gimli::UnitRef<'_, Reader>, index: u64) -> Option<Vec<u8>> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let file = header.file(index)?;
    let mut path = Vec::new();
    if let Some(dir) = file.directory(header)
        && let Ok(dir) = unit.attr_string(dir)
        && let Ok(dir) = dir.to_slice()
    {
        path.extend_from_slice(&dir);
        path.push(b'/');
    }
    let name = unit.attr_string(file.path_name()).ok()?;
    path.extend_from_slice(&name.to_slice().ok()?);
    Some(path)
}
