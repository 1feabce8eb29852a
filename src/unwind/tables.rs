//! The unwind tables of one ELF file: `.eh_frame` with its `.eh_frame_hdr`
//! index (else `.debug_frame`), the section addresses their pointers are
//! relative to, and the `PT_LOAD` segments that place the file in memory.
//! Read through the budgeted reader, like every file a traced process names.

use std::ops::Range;
use std::sync::Arc;

use framehop::ExplicitModuleSectionInfo;
use object::{Object, ObjectSection};

use crate::symbolize::elf::{Segment, base_avma, load_segments, section_bytes};
use crate::symbolize::read::{Reader, RunBudget, parse_opened};
use crate::sys::open::Opened;

/// A section's address range and bytes.
#[derive(Clone, Debug)]
struct Section {
    svma: Range<u64>,
    data: Arc<[u8]>,
}

/// What framehop needs of a file, read once and shared by every process
/// that maps it.
#[derive(Debug)]
pub(crate) struct UnwindTables {
    segments: Vec<Segment>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    eh_frame: Option<Section>,
    eh_frame_hdr: Option<Section>,
    /// Only read when there is no `.eh_frame`.
    debug_frame: Option<Arc<[u8]>>,
}

impl UnwindTables {
    /// Reads the tables of `opened`; `None` when it is no readable ELF
    /// file, or its `.eh_frame` could not be read (over what `run` has
    /// left, or cut short).
    pub(crate) fn read(opened: &Opened, run: &mut RunBudget) -> Option<UnwindTables> {
        parse_opened(opened, run, Self::parse)
    }

    fn parse<'a>(reader: &'a Reader<'a>) -> Option<UnwindTables> {
        let obj = object::File::parse(reader).ok()?;
        if !matches!(obj.format(), object::BinaryFormat::Elf) {
            return None;
        }
        let range = |name: &str| {
            let s = obj.section_by_name(name)?;
            Some(s.address()..s.address().checked_add(s.size())?)
        };
        let section = |name: &str| {
            Some(Section {
                svma: range(name)?,
                data: section_bytes(&obj, reader, name)?,
            })
        };
        let eh_frame = section(".eh_frame");
        let present = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
        if eh_frame.is_none() && present(".eh_frame") {
            // There, but over the budget or unreadable: say so rather than
            // walk its code by frame pointers as if it had no tables.
            return None;
        }
        let eh_frame_hdr = eh_frame.as_ref().and_then(|_| section(".eh_frame_hdr"));
        let debug_frame = match eh_frame {
            Some(_) => None,
            None => section_bytes(&obj, reader, ".debug_frame"),
        };
        Some(UnwindTables {
            segments: load_segments(&obj),
            text: range(".text"),
            got: range(".got"),
            eh_frame,
            eh_frame_hdr,
            debug_frame,
        })
    }

    /// Where the file's address 0 is in a process that maps file offsets
    /// `pgoff..pgoff + (end - start)` at `start..end`: through the segment
    /// most of that range belongs to. (A segment need not start on a page:
    /// the mapping then begins with the tail of the one before.)
    pub(crate) fn base_avma(&self, start: u64, end: u64, pgoff: u64) -> Option<u64> {
        base_avma(&self.segments, start, end, pgoff)
    }

    /// The tables as framehop takes them (the bytes are shared, not
    /// copied).
    pub(crate) fn section_info(&self) -> ExplicitModuleSectionInfo<Arc<[u8]>> {
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|s| s.svma.clone()),
            eh_frame: self.eh_frame.as_ref().map(|s| s.data.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|s| s.data.clone()),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_segments(segments: &[(u64, u64, u64)]) -> UnwindTables {
        UnwindTables {
            segments: segments
                .iter()
                .map(|&(offset, filesz, vaddr)| Segment {
                    offset,
                    filesz,
                    vaddr,
                })
                .collect(),
            text: None,
            got: None,
            eh_frame: None,
            eh_frame_hdr: None,
            debug_frame: None,
        }
    }

    #[test]
    fn the_base_comes_from_the_segment_the_mapping_holds() {
        // As GNU ld lays out a PIE: segments start on pages.
        let t = with_segments(&[(0, 0x1000, 0), (0x1000, 0x2000, 0x1000)]);
        assert_eq!(
            t.base_avma(0x5000_1000, 0x5000_3000, 0x1000),
            Some(0x5000_0000)
        );
        // As lld lays out a Rust binary: the executable segment starts
        // mid-page, after the read-only one, and one page further on in
        // memory than in the file. Its mapping starts at the page below.
        let t = with_segments(&[(0, 0x30b73c, 0), (0x30b740, 0x87fe70, 0x30c740)]);
        let start = 0x5618_bc71_a000;
        let base = t.base_avma(start, start + 0x881000, 0x30b000).unwrap();
        assert_eq!(base + 0x30c740, start + 0x740, "the segment's first byte");
        // A non-PIE executable, at its own addresses.
        let t = with_segments(&[(0, 0x1000, 0x400000), (0x1000, 0x800, 0x401000)]);
        assert_eq!(t.base_avma(0x401000, 0x402000, 0x1000), Some(0));
        // No segment in the range, or a range that makes no sense.
        assert_eq!(t.base_avma(0x401000, 0x402000, 0x9000), None);
        assert_eq!(t.base_avma(0x402000, 0x401000, 0x1000), None);
    }
}
