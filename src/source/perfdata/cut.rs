//! A perf.data file seen through a header checked and set right before
//! any parser trusts it. The file may be hostile, and its parser
//! allocates what the header's sizes and counts say: so every section
//! must lie inside the file, the feature sections may not add up to more
//! than the file, the attributes must be few, and the records are walked
//! once, header by header, before they are read. A file cut short (copied
//! while perf wrote it, a full disk, perf killed before it wrote its
//! header) says its data runs past its end, or is empty, and has lost the
//! feature sections written after the data: its data is ended at its last
//! whole record and the missing features are left out. A record too short
//! to be one, or running past the data, ends the data there. Records that
//! carry more than their header says (AUX trace data) or that expand
//! (compressed records, `perf record -z`) are refused. The walk reads the
//! cgroup records on its way ([`super::cgroups`]). A file that is not a
//! perf.data is told apart first, in words that quote none of it.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use anyhow::{Result, bail, ensure};

use super::cgroups::{CgroupRecords, RECORD_CGROUP};

/// Bytes of the file header (`struct perf_file_header`): magic, its own
/// size, the size of an attribute entry, the attrs, data and event-types
/// sections (offset and size each), then 256 feature bits.
const HEADER: usize = 104;
const ATTR_SIZE_AT: usize = 16;
const ATTRS_AT: usize = 24;
const DATA_AT: usize = 40;
const EVENT_TYPES_AT: usize = 56;
const FEATURES_AT: usize = 72;

/// Most attributes (events) a file may have: `perf record` of the two
/// tracepoints writes three.
pub(super) const MAX_ATTRS: u64 = 256;

/// perf's magic, as a little-endian machine writes it; a big-endian one
/// writes it reversed.
const MAGIC: &[u8; 8] = b"PERFILE2";
const MAGIC_REVERSED: &[u8; 8] = b"2ELIFREP";

/// Why a file is no perf.data this tool reads. Its words follow the
/// file's name, and quote nothing of the file: it may be any file the
/// user can name, secrets included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NotPerfData {
    Empty,
    /// Its first bytes are not perf's magic.
    Other,
    /// perf's magic (or the start of it), then less than a whole header.
    HeaderCut,
    /// A perf.data of a big-endian machine.
    BigEndian,
}

impl std::fmt::Display for NotPerfData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotPerfData::Empty => "is an empty file, not a perf.data file",
            NotPerfData::Other => "is not a perf.data file",
            NotPerfData::HeaderCut => {
                "is cut short: it ends inside its perf.data header, before any record"
            }
            NotPerfData::BigEndian => {
                "is a perf.data file of a big-endian machine, which this tool does not read"
            }
        })
    }
}

/// What `file`, of `len` bytes, is not, if it is not a perf.data whose
/// whole header is there.
pub(super) fn identify(file: &File, len: u64) -> io::Result<Option<NotPerfData>> {
    if len == 0 {
        return Ok(Some(NotPerfData::Empty));
    }
    let mut start = [0u8; 8];
    let have = usize::try_from(len).map_or(start.len(), |l| l.min(start.len()));
    file.read_exact_at(&mut start[..have], 0)?;
    let start = &start[..have];
    Ok(if start == &MAGIC[..] {
        (len < HEADER as u64).then_some(NotPerfData::HeaderCut)
    } else if start == &MAGIC_REVERSED[..] {
        Some(NotPerfData::BigEndian)
    } else if MAGIC.starts_with(start) {
        Some(NotPerfData::HeaderCut)
    } else {
        Some(NotPerfData::Other)
    })
}

/// Feature bit of the event descriptions (`HEADER_EVENT_DESC`).
const EVENT_DESC: usize = 12;

/// Record types refused: AUX trace data follows its record unannounced by
/// the record's size; compressed records expand without bound.
const RECORD_AUXTRACE: u32 = 71;
const RECORD_COMPRESSED: u32 = 81;
const RECORD_COMPRESSED2: u32 = 83;

/// The file, read through a header of [`HEADER`] bytes that may differ
/// from the one on disk.
#[derive(Debug)]
pub(super) struct View {
    file: File,
    /// The header read in place of the file's.
    header: [u8; HEADER],
    /// When the records were ended early: the feature table, which a
    /// parser looks for right after them, is read from where it is
    /// (`(at in the view, at in the file, length)`).
    table: Option<(u64, u64, u64)>,
    pos: u64,
    len: u64,
    /// The cgroups its records name, as walked.
    cgroups: CgroupRecords,
}

/// How the records were ended early, to be said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DataCut {
    /// The header gave no size (perf was stopped before it wrote it).
    Unfinished,
    /// The records ran past the end of the file.
    CutShort,
    /// The record at this offset of the file was not one.
    BadRecord(u64),
}

/// What the view changed, to be said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Repair {
    pub(super) data: Option<DataCut>,
    /// The feature sections (event names, tracepoint formats, build-ids)
    /// were missing or malformed, and are left out.
    pub(super) features: bool,
}

fn word(h: &[u8], at: usize) -> u64 {
    h.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn half(h: &[u8], at: usize) -> u32 {
    h.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

impl View {
    /// The checked view of `file`, a perf.data ([`identify`]), and what
    /// it repaired; an error for a file whose header cannot be made safe
    /// to parse, or whose records are of a kind refused.
    pub(super) fn new(file: File) -> Result<(View, Repair)> {
        let len = file.metadata()?.len();
        let mut header = [0u8; HEADER];
        file.read_exact_at(&mut header, 0)?;
        ensure!(&header[..8] == MAGIC, "not a perf.data file");
        let mut view = View {
            file,
            header,
            table: None,
            pos: 0,
            len,
            cgroups: CgroupRecords::default(),
        };
        view.check_attrs(&header)?;
        // Not needed, and parsed with counts from the file: left out.
        header[EVENT_TYPES_AT..EVENT_TYPES_AT + 16].fill(0);
        let mut repair = Repair::default();
        let data_at = word(&header, DATA_AT);
        let data_size = word(&header, DATA_AT + 8);
        let data_end = data_at.saturating_add(data_size);
        ensure!(
            data_at >= HEADER as u64,
            "malformed header: its records begin inside it"
        );
        if data_at < len {
            let limit = if data_size == 0 {
                len
            } else {
                data_end.min(len)
            };
            let mut cgroups = CgroupRecords::default();
            let (whole, bad) = view.walk_records(data_at, limit, &mut cgroups)?;
            view.cgroups = cgroups;
            if whole != data_size {
                repair.data = Some(match bad {
                    Some(at) => DataCut::BadRecord(at),
                    None if data_size == 0 => DataCut::Unfinished,
                    None => DataCut::CutShort,
                });
                header[DATA_AT + 8..DATA_AT + 16].copy_from_slice(&whole.to_le_bytes());
            }
        }
        let features: u32 = header[FEATURES_AT..].iter().map(|b| b.count_ones()).sum();
        if features > 0 {
            match view.feature_sections(data_end, features) {
                Some(sections) => {
                    let records_end = data_at.saturating_add(word(&header, DATA_AT + 8));
                    if records_end != data_end {
                        view.table = Some((records_end, data_end, u64::from(features) * 16));
                    }
                    if has_feature(&header, EVENT_DESC) {
                        // Sections are listed in the order of their bits.
                        let index = (0..EVENT_DESC).filter(|&b| has_feature(&header, b)).count();
                        let (at, size) = sections[index];
                        view.check_event_desc(at, size)?;
                    }
                }
                None => {
                    header[FEATURES_AT..].fill(0);
                    repair.features = true;
                }
            }
        }
        view.header = header;
        Ok((view, repair))
    }

    /// The attributes: an entry size a parser can divide by, at most
    /// [`MAX_ATTRS`] of them, inside the file, each with its ids inside
    /// the file.
    fn check_attrs(&self, header: &[u8; HEADER]) -> Result<()> {
        let entry = word(header, ATTR_SIZE_AT);
        let (at, size) = (word(header, ATTRS_AT), word(header, ATTRS_AT + 8));
        // Not the header's values: see `NotPerfData`.
        ensure!(
            (80..=4096).contains(&entry),
            "malformed header: its attribute entries are of no size perf writes"
        );
        ensure!(
            size % entry == 0 && size / entry <= MAX_ATTRS,
            "malformed header: its attributes are not a whole number of entries, or more \
             than {MAX_ATTRS}"
        );
        ensure!(
            at.saturating_add(size) <= self.len,
            "its event attributes run past its end: it is cut short, or its header is \
             malformed"
        );
        let mut attrs = vec![0u8; size as usize];
        self.file.read_exact_at(&mut attrs, at)?;
        for a in attrs.chunks_exact(entry as usize) {
            // Each entry ends with the section of its ids.
            let ids = &a[a.len() - 16..];
            let (ids_at, ids_size) = (word(ids, 0), word(ids, 8));
            ensure!(
                ids_at.saturating_add(ids_size) <= self.len,
                "malformed header: the ids of an attribute lie outside the file"
            );
        }
        Ok(())
    }

    /// The cgroups its records name, taken (once) from the view.
    pub(super) fn take_cgroups(&mut self) -> CgroupRecords {
        std::mem::take(&mut self.cgroups)
    }

    /// Walks the records in `[at, limit)` by their headers: the bytes of
    /// whole records from `at`, and where a record that is not one was
    /// found, if one was. Refuses AUX trace and compressed records; reads
    /// the cgroup records into `cgroups`.
    fn walk_records(
        &self,
        at: u64,
        limit: u64,
        cgroups: &mut CgroupRecords,
    ) -> Result<(u64, Option<u64>)> {
        let mut reader = io::BufReader::with_capacity(1 << 20, &self.file);
        reader.seek(SeekFrom::Start(at))?;
        let mut pos = at;
        let mut header = [0u8; 8];
        let mut body = Vec::new();
        while pos.saturating_add(8) <= limit {
            reader.read_exact(&mut header)?;
            let ty = half(&header, 0);
            let size = u64::from(u16::from_le_bytes([header[6], header[7]]));
            if size < 8 {
                return Ok((pos - at, Some(pos)));
            }
            if pos + size > limit {
                // Cut off by the end of the file (or of the data).
                break;
            }
            match ty {
                RECORD_AUXTRACE => {
                    bail!("it holds AUX trace data (a recording of Intel PT or similar)")
                }
                RECORD_COMPRESSED | RECORD_COMPRESSED2 => bail!(
                    "its records are compressed (perf record -z), which are not read: they \
                     could expand without bound; record without -z"
                ),
                RECORD_CGROUP => {
                    // At most 64 KiB, as its size says.
                    body.resize(size as usize - 8, 0);
                    reader.read_exact(&mut body)?;
                    cgroups.add(&body);
                    pos += size;
                    continue;
                }
                _ => {}
            }
            reader.seek_relative(size as i64 - 8)?;
            pos += size;
        }
        Ok((pos - at, None))
    }

    /// The `(offset, size)` of each of `count` feature sections, from the
    /// table at `at`: `None` when the table or a section lies outside the
    /// file, or when the sections add up to more than the file (a parser
    /// holds each in memory: overlapping sections would multiply it).
    fn feature_sections(&self, at: u64, count: u32) -> Option<Vec<(u64, u64)>> {
        let table = u64::from(count) * 16;
        if at.saturating_add(table) > self.len {
            return None;
        }
        let mut entries = vec![0u8; table as usize];
        self.file.read_exact_at(&mut entries, at).ok()?;
        let sections: Vec<(u64, u64)> = entries
            .chunks_exact(16)
            .map(|e| (word(e, 0), word(e, 8)))
            .collect();
        let inside = sections
            .iter()
            .all(|&(offset, size)| offset.saturating_add(size) <= self.len);
        let total = sections
            .iter()
            .try_fold(0u64, |sum, &(_, size)| sum.checked_add(size));
        (inside && total.is_some_and(|t| t <= self.len)).then_some(sections)
    }

    /// The event descriptions: each count and length inside the section,
    /// so that a parser that reserves what they say reserves no more than
    /// the section holds.
    fn check_event_desc(&self, at: u64, size: u64) -> Result<()> {
        let mut d = vec![0u8; size as usize];
        self.file.read_exact_at(&mut d, at)?;
        let bad = || anyhow::anyhow!("malformed event descriptions");
        let (nr, attr_size) = (half(&d, 0), u64::from(half(&d, 4)));
        ensure!(u64::from(nr) <= MAX_ATTRS, bad());
        let mut pos: u64 = 8;
        for _ in 0..nr {
            pos = pos.checked_add(attr_size).ok_or_else(bad)?;
            let nr_ids = u64::from(half(&d, pos as usize));
            let name_len = u64::from(half(&d, pos as usize + 4));
            pos = pos
                .checked_add(8)
                .and_then(|p| p.checked_add(name_len))
                .and_then(|p| p.checked_add(nr_ids.checked_mul(8)?))
                .ok_or_else(bad)?;
            ensure!(pos <= size, bad());
        }
        Ok(())
    }
}

fn has_feature(header: &[u8; HEADER], bit: usize) -> bool {
    header[FEATURES_AT + bit / 8] & (1 << (bit % 8)) != 0
}

impl Read for View {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match usize::try_from(self.pos) {
            Ok(pos) if pos < HEADER => {
                let n = buf.len().min(HEADER - pos);
                buf[..n].copy_from_slice(&self.header[pos..pos + n]);
                n
            }
            _ => match self.table {
                Some((at, from, len)) if (at..at + len).contains(&self.pos) => {
                    let n = buf.len().min((at + len - self.pos) as usize);
                    self.file.read_at(&mut buf[..n], from + (self.pos - at))?
                }
                _ => self.file.read_at(buf, self.pos)?,
            },
        };
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for View {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(bytes: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!(
            "offwake-cut-{}-{}-{:x}",
            std::process::id(),
            bytes.len(),
            bytes
                .iter()
                .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        ));
        std::fs::write(&path, bytes).unwrap();
        let f = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    /// A header with one attribute entry of 144 bytes at 104 (its ids
    /// empty), records at 248 for `size` bytes, and one feature whose
    /// table follows the records.
    fn header(size: u64) -> Vec<u8> {
        let mut h = vec![0u8; HEADER];
        h[..8].copy_from_slice(b"PERFILE2");
        h[ATTR_SIZE_AT..ATTR_SIZE_AT + 8].copy_from_slice(&144u64.to_le_bytes());
        h[ATTRS_AT..ATTRS_AT + 8].copy_from_slice(&104u64.to_le_bytes());
        h[ATTRS_AT + 8..ATTRS_AT + 16].copy_from_slice(&144u64.to_le_bytes());
        h[DATA_AT..DATA_AT + 8].copy_from_slice(&248u64.to_le_bytes());
        h[DATA_AT + 8..DATA_AT + 16].copy_from_slice(&size.to_le_bytes());
        h[FEATURES_AT] = 0b10;
        h.resize(248, 0);
        h
    }

    /// `n` records of 16 bytes each, of type `ty`.
    fn records_of(n: usize, ty: u32) -> Vec<u8> {
        let mut r = Vec::new();
        for i in 0..n {
            r.extend_from_slice(&ty.to_le_bytes());
            r.extend_from_slice(&0u16.to_le_bytes());
            r.extend_from_slice(&16u16.to_le_bytes());
            r.extend_from_slice(&(i as u64).to_le_bytes());
        }
        r
    }

    fn records(n: usize) -> Vec<u8> {
        records_of(n, 9)
    }

    fn read_all(mut v: View) -> Vec<u8> {
        let mut out = Vec::new();
        v.read_to_end(&mut out).unwrap();
        out
    }

    fn data_size(v: &mut View) -> u64 {
        let mut h = [0u8; HEADER];
        v.seek(SeekFrom::Start(0)).unwrap();
        v.read_exact(&mut h).unwrap();
        word(&h, DATA_AT + 8)
    }

    /// A whole file: records, then the feature table (one section, at its
    /// end, of 4 bytes) and the section.
    fn whole() -> Vec<u8> {
        let mut bytes = header(160);
        bytes.extend_from_slice(&records(10));
        let table_end = bytes.len() as u64 + 16;
        bytes.extend_from_slice(&table_end.to_le_bytes());
        bytes.extend_from_slice(&4u64.to_le_bytes());
        bytes.extend_from_slice(b"feat");
        bytes
    }

    #[test]
    fn a_whole_file_reads_as_it_is_but_for_its_event_types() {
        let mut bytes = whole();
        let (v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair, Repair::default());
        bytes[EVENT_TYPES_AT..EVENT_TYPES_AT + 16].fill(0);
        assert_eq!(read_all(v), bytes);
    }

    #[test]
    fn a_cut_file_keeps_its_whole_records_and_no_features() {
        let bytes = whole();
        // Cut in the middle of the fourth record.
        let (mut v, repair) = View::new(file_of(&bytes[..248 + 3 * 16 + 5])).unwrap();
        assert_eq!(
            repair,
            Repair {
                data: Some(DataCut::CutShort),
                features: true
            }
        );
        assert_eq!(data_size(&mut v), 48);
        let mut h = [0u8; HEADER];
        v.seek(SeekFrom::Start(0)).unwrap();
        v.read_exact(&mut h).unwrap();
        assert!(h[FEATURES_AT..].iter().all(|&b| b == 0));
        // Only the feature section cut off.
        let (_, repair) = View::new(file_of(&bytes[..bytes.len() - 2])).unwrap();
        assert_eq!(
            repair,
            Repair {
                data: None,
                features: true
            }
        );
    }

    #[test]
    fn a_record_too_short_to_be_one_ends_the_data() {
        let mut bytes = header(0);
        bytes[FEATURES_AT] = 0;
        bytes.extend_from_slice(&records(2));
        bytes.extend_from_slice(&[0u8; 24]);
        bytes.extend_from_slice(&records(2));
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair.data, Some(DataCut::BadRecord(248 + 32)));
        assert_eq!(data_size(&mut v), 32);
    }

    #[test]
    fn a_bad_record_in_a_whole_file_keeps_its_features() {
        let mut bytes = whole();
        // The third record's size: 4.
        bytes[248 + 2 * 16 + 6..248 + 2 * 16 + 8].copy_from_slice(&4u16.to_le_bytes());
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(
            repair,
            Repair {
                data: Some(DataCut::BadRecord(248 + 32)),
                features: false
            }
        );
        assert_eq!(data_size(&mut v), 32);
        // The feature table is where the records now end.
        let mut table = [0u8; 16];
        v.seek(SeekFrom::Start(248 + 32)).unwrap();
        v.read_exact(&mut table).unwrap();
        assert_eq!(word(&table, 8), 4);
        let at = word(&table, 0);
        let mut feat = [0u8; 4];
        v.seek(SeekFrom::Start(at)).unwrap();
        v.read_exact(&mut feat).unwrap();
        assert_eq!(&feat, b"feat");
    }

    #[test]
    fn an_unfinished_header_gets_the_records_that_follow_it() {
        let mut bytes = header(0);
        bytes[FEATURES_AT] = 0;
        bytes.extend_from_slice(&records(4));
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair.data, Some(DataCut::Unfinished));
        assert_eq!(data_size(&mut v), 64);
    }

    #[test]
    fn short_or_foreign_files_are_told_apart() {
        let what = |bytes: &[u8]| identify(&file_of(bytes), bytes.len() as u64).unwrap();
        assert_eq!(what(b""), Some(NotPerfData::Empty));
        assert_eq!(
            what(b"root:*:19000:0:99999:7:::\n"),
            Some(NotPerfData::Other)
        );
        assert_eq!(what(&[0u8; 200]), Some(NotPerfData::Other));
        assert_eq!(what(b"PERF"), Some(NotPerfData::HeaderCut));
        assert_eq!(what(b"PERFILE2garbage"), Some(NotPerfData::HeaderCut));
        assert_eq!(what(&whole()[..HEADER - 1]), Some(NotPerfData::HeaderCut));
        let mut reversed = whole();
        reversed[..8].copy_from_slice(MAGIC_REVERSED);
        assert_eq!(what(&reversed), Some(NotPerfData::BigEndian));
        assert_eq!(what(&whole()), None);
        assert_eq!(what(&whole()[..HEADER]), None);
        // Should one get this far, it is refused all the same.
        assert!(View::new(file_of(&[0u8; 200])).is_err());
    }

    #[test]
    fn headers_a_parser_would_trust_to_its_ruin_are_refused() {
        let set = |at: usize, v: u64| {
            let mut b = whole();
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            b
        };
        for (what, bytes) in [
            ("entry size 0", set(ATTR_SIZE_AT, 0)),
            ("entry size huge", set(ATTR_SIZE_AT, u64::MAX - 15)),
            ("attrs past the end", set(ATTRS_AT + 8, 1 << 40)),
            ("too many attrs", set(ATTRS_AT + 8, 144 * 1000)),
            ("ids past the end", {
                let mut b = whole();
                b[104 + 144 - 8..104 + 144].copy_from_slice(&(1u64 << 40).to_le_bytes());
                b
            }),
        ] {
            assert!(View::new(file_of(&bytes)).is_err(), "{what}");
        }
        // Two feature sections, each inside the file, that add up to more
        // than the file (a parser would hold both): dropped.
        let mut b = header(160);
        b[FEATURES_AT] = 0b110;
        b.extend_from_slice(&records(10));
        let n = b.len() as u64 + 32;
        for _ in 0..2 {
            b.extend_from_slice(&0u64.to_le_bytes());
            b.extend_from_slice(&(n * 2 / 3).to_le_bytes());
        }
        let (_, repair) = View::new(file_of(&b)).unwrap();
        assert!(repair.features);
    }

    #[test]
    fn aux_trace_and_compressed_records_are_refused() {
        for ty in [RECORD_AUXTRACE, RECORD_COMPRESSED, RECORD_COMPRESSED2] {
            let mut bytes = header(32);
            bytes[FEATURES_AT] = 0;
            bytes.extend_from_slice(&records(1));
            bytes.extend_from_slice(&records_of(1, ty));
            let err = View::new(file_of(&bytes)).expect_err("refused");
            assert!(format!("{err:#}").contains("AUX") || format!("{err:#}").contains("-z"));
        }
    }

    /// A `PERF_RECORD_CGROUP` naming `id` as `path`, with an 8-byte
    /// sample_id trailer.
    fn cgroup_record(id: u64, path: &[u8]) -> Vec<u8> {
        let mut body = id.to_le_bytes().to_vec();
        body.extend_from_slice(path);
        body.push(0);
        body.resize(body.len().next_multiple_of(8) + 8, 0);
        let mut r = RECORD_CGROUP.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&(body.len() as u16 + 8).to_le_bytes());
        r.extend(body);
        r
    }

    #[test]
    fn cgroup_records_are_read_as_the_records_are_walked() {
        let mut data = cgroup_record(1, b"/");
        data.extend(records(2));
        data.extend(cgroup_record(77, b"/a/b.service"));
        data.extend(cgroup_record(78, b"/a/../x"));
        data.extend(records(1));
        let cut = cgroup_record(79, b"/late");
        let mut bytes = header((data.len() + cut.len()) as u64);
        bytes[FEATURES_AT] = 0;
        bytes.extend(&data);
        bytes.extend(&cut[..cut.len() - 4]);
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair.data, Some(DataCut::CutShort));
        let path = std::path::Path::new("f");
        let (names, note) =
            super::super::cgroups::names_for(v.take_cgroups(), true, None, path).unwrap();
        let mut names: Vec<(u64, String)> = names
            .unwrap()
            .into_iter()
            .map(|(id, p)| (id, p.to_string()))
            .collect();
        names.sort();
        assert_eq!(names, [(1, "/".into()), (77, "/a/b.service".into())]);
        assert!(note.unwrap().contains("1 record that names no cgroup"));
        // The rest of the file reads as before.
        assert_eq!(data_size(&mut v), data.len() as u64);
    }
}
