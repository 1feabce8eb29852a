//! The shape a file's DWARF must have before addr2line builds from it:
//! DIEs nested no deeper than [`MAX_DIE_DEPTH`], at most [`MAX_UNITS`]
//! units, and no line program or range list named by many units or DIEs
//! (addr2line builds one per naming), each naming charged to the file's
//! allowance. DWARF of another shape is [`Refused`].

use std::collections::HashMap;

use super::dwarf::Reader;
use super::read::Allowance;

/// Deepest DIE nesting walked. addr2line recurses once per nested inlined
/// function; real code stays far below this.
pub(crate) const MAX_DIE_DEPTH: usize = 256;

/// Why DWARF that was read is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// DIEs nested deeper than [`MAX_DIE_DEPTH`]: addr2line recurses
    /// once per level.
    Deep,
    /// More than [`MAX_UNITS`] units, or a line program or range list
    /// named by more than [`MAX_SHARING`] units or DIEs: addr2line builds
    /// those once per naming, so sharing multiplies them.
    Shared,
    /// The DWARF, or what addr2line would build from it, is over the
    /// file's budget (or other parts of the file were left out for it).
    Budget,
}

/// Most units a file's DWARF may have.
pub(crate) const MAX_UNITS: usize = 100_000;

/// Most units that may share one line program or range list (compilers
/// give each unit its own; dwz shares a few with partial units).
const MAX_SHARING: u32 = 16;

/// What addr2line keeps per range of a range list, and per byte of a
/// line program (a row is at most a few bytes), charged before it runs.
const RANGE_COST: u64 = 32;
const LINE_BYTE_COST: u64 = 8;

/// Per table (range list: true, line program: false, by offset): times
/// named, and what one naming costs.
type Namings = HashMap<(bool, usize), (u32, u64)>;

/// Checks the shape of `dwarf` before addr2line sees it, in one walk over
/// every DIE without recursion: nesting depth, number of units, and the
/// range lists and line programs that addr2line would build once per DIE
/// or unit naming them. Each naming is charged to `allowance`, and no
/// table may be named more than [`MAX_SHARING`] times. A unit that does
/// not parse stops the walk of that unit only (addr2line then finds it
/// unreadable too).
pub(super) fn vet(dwarf: &gimli::Dwarf<Reader>, allowance: &Allowance) -> Result<(), Refused> {
    let mut named = Namings::new();
    let mut units = 0usize;
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        units += 1;
        if units > MAX_UNITS {
            return Err(Refused::Shared);
        }
        vet_unit(dwarf, &header, &mut named, allowance)?;
    }
    Ok(())
}

/// [`vet`]'s walk over the DIEs of one unit, `header`: their depth, and
/// the tables its root and the DIEs with `DW_AT_ranges` name, counted in
/// `named`. Stops at the first DIE that does not parse.
fn vet_unit(
    dwarf: &gimli::Dwarf<Reader>,
    header: &gimli::UnitHeader<Reader>,
    named: &mut Namings,
    allowance: &Allowance,
) -> Result<(), Refused> {
    let encoding = header.encoding();
    let Ok(abbrevs) = dwarf.abbreviations(header) else {
        return Ok(());
    };
    let Ok(mut entries) = header.entries_raw(&abbrevs, None) else {
        return Ok(());
    };
    let mut root = true;
    let mut base = None;
    while !entries.is_empty() {
        if entries.next_depth() > MAX_DIE_DEPTH as isize {
            return Err(Refused::Deep);
        }
        let abbrev = match entries.read_abbreviation() {
            // A unit without entries (one not read, see
            // [`super::sparse`]): nothing to check.
            Ok(None) if root => break,
            // The end of a list of children.
            Ok(None) => continue,
            Ok(Some(abbrev)) => abbrev,
            Err(_) => break,
        };
        let wanted = root
            || abbrev
                .attributes()
                .iter()
                .any(|a| a.name() == gimli::DW_AT_ranges);
        if !wanted {
            if entries.skip_attributes(abbrev.attributes()).is_err() {
                break;
            }
            continue;
        }
        let tables = tables_named(dwarf, encoding, &mut entries, abbrev, root, &mut base);
        let childless_root = root && !abbrev.has_children();
        root = false;
        for table in tables {
            charge_naming(dwarf, encoding, named, table, allowance)?;
        }
        // A root without children is the whole unit (what follows
        // is padding, or the zeros of a unit not read).
        if childless_root {
            break;
        }
    }
    Ok(())
}

/// The tables that the DIE whose attributes `entries` is at (of
/// abbreviation `abbrev`) names, its attributes read: the line program
/// of a unit's `root` (`DW_AT_stmt_list`) and its range list
/// (`DW_AT_ranges`). A root's `DW_AT_rnglists_base` is kept in `base`,
/// for the range lists named by index.
fn tables_named(
    dwarf: &gimli::Dwarf<Reader>,
    encoding: gimli::Encoding,
    entries: &mut gimli::EntriesRaw<'_, Reader>,
    abbrev: &gimli::Abbreviation,
    root: bool,
    base: &mut Option<gimli::DebugRngListsBase<usize>>,
) -> Vec<(bool, usize)> {
    let mut tables = Vec::new();
    let mut ranges = None;
    for spec in abbrev.attributes() {
        let Ok(attr) = entries.read_attribute(*spec) else {
            break;
        };
        match (attr.name(), attr.value()) {
            (gimli::DW_AT_stmt_list, gimli::AttributeValue::DebugLineRef(o)) if root => {
                tables.push((false, o.0));
            }
            (gimli::DW_AT_rnglists_base, gimli::AttributeValue::DebugRngListsBase(b)) => {
                *base = Some(b);
            }
            (gimli::DW_AT_ranges, value) => ranges = Some(value),
            _ => {}
        }
    }
    let offset = match ranges {
        Some(gimli::AttributeValue::RangeListsRef(o)) => Some(o.0),
        Some(gimli::AttributeValue::SecOffset(o)) => Some(o),
        Some(gimli::AttributeValue::DebugRngListsIndex(i)) => (*base)
            .and_then(|b| dwarf.ranges.get_offset(encoding, b, i).ok())
            .map(|o| o.0),
        _ => None,
    };
    tables.extend(offset.map(|o| (true, o)));
    tables
}

/// Counts one more naming of `table` in `named`, refused past
/// [`MAX_SHARING`], and charges what it costs: worked out (and charged)
/// the first time, charged again each time after.
fn charge_naming(
    dwarf: &gimli::Dwarf<Reader>,
    encoding: gimli::Encoding,
    named: &mut Namings,
    table: (bool, usize),
    allowance: &Allowance,
) -> Result<(), Refused> {
    let entry = named.entry(table).or_insert((0, u64::MAX));
    entry.0 += 1;
    if entry.0 > MAX_SHARING {
        return Err(Refused::Shared);
    }
    if entry.1 == u64::MAX {
        entry.1 = match table {
            (true, o) => range_list_cost(dwarf, encoding, o, allowance)?,
            (false, o) => line_program_cost(dwarf, o, allowance)?,
        };
    } else if !allowance.charge(entry.1) {
        return Err(Refused::Budget);
    }
    Ok(())
}

/// Charges the line program at `offset` by its length; returns what it
/// costs each time it is named again.
fn line_program_cost(
    dwarf: &gimli::Dwarf<Reader>,
    offset: usize,
    allowance: &Allowance,
) -> Result<u64, Refused> {
    use gimli::{Reader as _, Section as _};
    let mut input = dwarf.debug_line.reader().clone();
    let length = input
        .skip(offset)
        .and_then(|()| input.read_initial_length())
        .map_or(0, |(len, _)| len as u64);
    let cost = length.saturating_mul(LINE_BYTE_COST);
    if !allowance.charge(cost) {
        return Err(Refused::Budget);
    }
    Ok(cost)
}

/// Charges the ranges of the list at `offset` one by one (so a long list
/// costs no more walking than the budget allows); returns what the list
/// costs each time it is named again.
fn range_list_cost(
    dwarf: &gimli::Dwarf<Reader>,
    encoding: gimli::Encoding,
    offset: usize,
    allowance: &Allowance,
) -> Result<u64, Refused> {
    let Ok(mut list) = dwarf
        .ranges
        .raw_ranges(gimli::RangeListsOffset(offset), encoding)
    else {
        return Ok(0);
    };
    let mut cost = 0u64;
    while let Ok(Some(_)) = list.next() {
        if !allowance.charge(RANGE_COST) {
            return Err(Refused::Budget);
        }
        cost += RANGE_COST;
    }
    Ok(cost)
}
