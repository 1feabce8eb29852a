//! The file that holds a HotSpot JVM (`libjvm.so`): where it exports the
//! tables that describe its own structures (`gHotSpotVMStructs` and the
//! rest), read once per file from its dynamic symbol table through the
//! budgeted reader every file a traced process names goes through.

use object::{Object, ObjectSymbol};

use crate::symbolize::elf::{Segment, base_avma, load_segments};
use crate::symbolize::read::{Reader, RunBudget, parse_opened};
use crate::sys::open::Opened;

/// The exported variables a reader starts from, at the file's addresses:
/// three pointers to tables, and for each table the stride of its entries
/// and where each field is in one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) symbols: [u64; SYMBOLS.len()],
    segments: Vec<Segment>,
}

/// The symbols, in the order of [`Image::symbols`] ([`Sym`]).
pub(super) const SYMBOLS: [&str; 15] = [
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
];

/// Indexes into [`Image::symbols`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Sym {
    Structs = 0,
    Types = 7,
    Ints = 11,
}

/// Whether a mapped file's name says it may be a JVM: `libjvm.so`.
pub(crate) fn may_hold_jvm(path: &str) -> bool {
    path.rsplit('/').next() == Some("libjvm.so")
}

impl Image {
    /// Reads `opened`; `None` when it exports no tables.
    pub(crate) fn read(opened: &Opened, run: &mut RunBudget) -> Option<Image> {
        parse_opened(opened, run, Self::parse)
    }

    fn parse<'a>(reader: &'a Reader<'a>) -> Option<Image> {
        let obj = object::File::parse(reader).ok()?;
        if !matches!(obj.format(), object::BinaryFormat::Elf)
            || !obj.is_64()
            || obj.architecture() != object::Architecture::X86_64
        {
            return None;
        }
        let mut found = [None; SYMBOLS.len()];
        for sym in obj.dynamic_symbols() {
            let Ok(name) = sym.name() else { continue };
            if let Some(i) = SYMBOLS.iter().position(|&n| n == name) {
                found[i] = Some(sym.address());
            }
        }
        let mut symbols = [0; SYMBOLS.len()];
        for (slot, addr) in symbols.iter_mut().zip(found) {
            *slot = addr.filter(|&a| a != 0)?;
        }
        Some(Image {
            symbols,
            segments: load_segments(&obj),
        })
    }

    /// Where the file's address 0 is in a process that maps it at
    /// `start..end` from file offset `pgoff`.
    pub(crate) fn base(&self, start: u64, end: u64, pgoff: u64) -> Option<u64> {
        base_avma(&self.segments, start, end, pgoff)
    }
}

#[cfg(test)]
impl Image {
    /// An image whose tables' symbols are at `symbols` (file addresses).
    pub(crate) fn with_symbols(symbols: [u64; SYMBOLS.len()]) -> Image {
        Image {
            symbols,
            segments: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::read::Source;

    #[test]
    fn only_libjvm_may_hold_a_jvm() {
        assert!(may_hold_jvm(
            "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"
        ));
        assert!(may_hold_jvm("libjvm.so"));
        assert!(!may_hold_jvm("/usr/lib/libjvm.so.1"));
        assert!(!may_hold_jvm("/usr/lib/jvm/libjava.so"));
    }

    #[test]
    fn the_installed_jvm_exports_its_tables() {
        let path = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
        let Ok(bytes) = std::fs::read(path) else {
            // .ci/run installs it; elsewhere, a machine without Java.
            assert!(
                std::env::var_os("OFFWAKE_REQUIRE_LIVE").is_none(),
                "no OpenJDK 17 here: {path}"
            );
            return;
        };
        let allowance = RunBudget::new(1 << 30, 1 << 30).allowance();
        let arena = typed_arena::Arena::new();
        let reader = Reader::new(
            Source::Bytes(&bytes),
            bytes.len() as u64,
            &allowance,
            &arena,
        );
        let image = Image::parse(&reader).expect("the tables' symbols");
        assert!(image.symbols.iter().all(|&a| a != 0));
    }
}
