//! A perf.data file seen through a header that matches what the file
//! still holds. A file cut short (copied while perf wrote it, a full disk,
//! perf killed before it wrote its header) says its data runs past the end
//! of the file, or is empty, and its feature sections (written after the
//! data) are gone; read as it is, no record of it could be read. This view
//! shrinks the data section to what is there and drops the missing feature
//! sections, so the records that are whole are read.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

/// Bytes of the file header (`struct perf_file_header`): magic, its own
/// size, the attribute size, the attrs, data and event-types sections
/// (offset and size each), then 256 feature bits.
const HEADER: usize = 104;
const DATA_AT: usize = 40;
const FEATURES_AT: usize = 72;

/// The file, read through a header of [`HEADER`] bytes that may differ
/// from the one on disk.
#[derive(Debug)]
pub(super) struct View {
    file: File,
    /// The header read in place of the file's; `None` when it is right.
    header: Option<[u8; HEADER]>,
    pos: u64,
    len: u64,
}

/// What the view changed, to be said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Repair {
    /// The header was right.
    None,
    /// The data section was shrunk (or, empty, grown) to what the file holds.
    Data,
    /// As `Data`, and the feature sections (event names, tracepoint formats,
    /// build-ids) were missing and are left out.
    DataAndFeatures,
}

impl View {
    /// The view of `file`, and what it repaired. A file too short for its
    /// header is left as it is (the reader says what is wrong with it).
    pub(super) fn new(file: File) -> io::Result<(View, Repair)> {
        let len = file.metadata()?.len();
        let mut header = [0u8; HEADER];
        let mut view = View {
            file,
            header: None,
            pos: 0,
            len,
        };
        if view.file.read_exact_at(&mut header, 0).is_err() || &header[..8] != b"PERFILE2" {
            return Ok((view, Repair::None));
        }
        let word = |h: &[u8; HEADER], at: usize| {
            u64::from_le_bytes(h[at..at + 8].try_into().unwrap_or_default())
        };
        let data_at = word(&header, DATA_AT);
        let data_size = word(&header, DATA_AT + 8);
        let data_end = data_at.saturating_add(data_size);
        let features: u32 = header[FEATURES_AT..].iter().map(|b| b.count_ones()).sum();
        let mut repair = Repair::None;
        if data_at < len && (data_size == 0 || data_end > len) {
            let whole = view.whole_records(data_at)?;
            header[DATA_AT + 8..DATA_AT + 16].copy_from_slice(&whole.to_le_bytes());
            repair = Repair::Data;
        }
        if features > 0 && !view.features_present(data_end, features) {
            header[FEATURES_AT..].fill(0);
            repair = Repair::DataAndFeatures;
        }
        if repair != Repair::None {
            view.header = Some(header);
        }
        Ok((view, repair))
    }

    /// Bytes of whole records from `at` to the end of the file: the
    /// records' headers are walked (each says its size) until one would
    /// run past the end, or is too short to be a record.
    fn whole_records(&self, at: u64) -> io::Result<u64> {
        let mut reader = io::BufReader::with_capacity(1 << 20, &self.file);
        reader.seek(SeekFrom::Start(at))?;
        let mut pos = at;
        let mut header = [0u8; 8];
        loop {
            if pos.saturating_add(8) > self.len || reader.read_exact(&mut header).is_err() {
                break;
            }
            let size = u64::from(u16::from_le_bytes([header[6], header[7]]));
            if size < 8 || pos + size > self.len {
                break;
            }
            reader.seek_relative(size as i64 - 8)?;
            pos += size;
        }
        Ok(pos - at)
    }

    /// True when the table of `count` feature sections at `at`, and every
    /// section it points to, lie inside the file.
    fn features_present(&self, at: u64, count: u32) -> bool {
        let table = u64::from(count) * 16;
        if at.saturating_add(table) > self.len {
            return false;
        }
        let mut entries = vec![0u8; table as usize];
        if self.file.read_exact_at(&mut entries, at).is_err() {
            return false;
        }
        entries.chunks_exact(16).all(|e| {
            let offset = u64::from_le_bytes(e[..8].try_into().unwrap_or_default());
            let size = u64::from_le_bytes(e[8..].try_into().unwrap_or_default());
            offset.saturating_add(size) <= self.len
        })
    }
}

impl Read for View {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match (&self.header, usize::try_from(self.pos)) {
            (Some(header), Ok(pos)) if pos < HEADER => {
                let n = buf.len().min(HEADER - pos);
                buf[..n].copy_from_slice(&header[pos..pos + n]);
                n
            }
            _ => self.file.read_at(buf, self.pos)?,
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
            "offwake-cut-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        std::fs::write(&path, bytes).unwrap();
        let f = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    /// A header whose data section is at 200 for `size` bytes, with one
    /// feature whose table follows the data.
    fn header(size: u64) -> Vec<u8> {
        let mut h = vec![0u8; HEADER];
        h[..8].copy_from_slice(b"PERFILE2");
        h[DATA_AT..DATA_AT + 8].copy_from_slice(&200u64.to_le_bytes());
        h[DATA_AT + 8..DATA_AT + 16].copy_from_slice(&size.to_le_bytes());
        h[FEATURES_AT] = 0b10;
        h
    }

    /// `n` records of 16 bytes each.
    fn records(n: usize) -> Vec<u8> {
        let mut r = Vec::new();
        for i in 0..n {
            r.extend_from_slice(&9u32.to_le_bytes());
            r.extend_from_slice(&0u16.to_le_bytes());
            r.extend_from_slice(&16u16.to_le_bytes());
            r.extend_from_slice(&(i as u64).to_le_bytes());
        }
        r
    }

    fn read_all(mut v: View) -> Vec<u8> {
        let mut out = Vec::new();
        v.read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn a_whole_file_reads_as_it_is() {
        let mut bytes = header(100);
        bytes.resize(300, 7);
        // The feature table: one section, at 316, of 4 bytes.
        bytes.extend_from_slice(&316u64.to_le_bytes());
        bytes.extend_from_slice(&4u64.to_le_bytes());
        bytes.extend_from_slice(b"feat");
        let (v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair, Repair::None);
        assert_eq!(read_all(v), bytes);
        // Its feature section cut off.
        let (v, repair) = View::new(file_of(&bytes[..318])).unwrap();
        assert_eq!(repair, Repair::DataAndFeatures);
        assert_eq!(read_all(v)[FEATURES_AT..HEADER], [0u8; 32]);
    }

    #[test]
    fn a_cut_file_keeps_its_whole_records_and_no_features() {
        let mut bytes = header(160);
        bytes.resize(200, 0);
        bytes.extend_from_slice(&records(10));
        // Cut in the middle of the fourth record.
        bytes.truncate(200 + 3 * 16 + 5);
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair, Repair::DataAndFeatures);
        let mut h = [0u8; HEADER];
        v.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_le_bytes(h[48..56].try_into().unwrap()), 48);
        assert!(h[FEATURES_AT..].iter().all(|&b| b == 0));
        v.seek(SeekFrom::Start(200)).unwrap();
        let mut rest = Vec::new();
        v.read_to_end(&mut rest).unwrap();
        assert_eq!(rest[..48], records(3));
    }

    #[test]
    fn a_record_too_short_to_be_one_ends_the_data() {
        let mut bytes = header(0);
        bytes[FEATURES_AT] = 0;
        bytes.resize(200, 0);
        bytes.extend_from_slice(&records(2));
        bytes.extend_from_slice(&[0u8; 24]);
        let (mut v, _) = View::new(file_of(&bytes)).unwrap();
        let mut h = [0u8; HEADER];
        v.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_le_bytes(h[48..56].try_into().unwrap()), 32);
    }

    #[test]
    fn an_unfinished_header_gets_the_records_that_follow_it() {
        let mut bytes = header(0);
        bytes[FEATURES_AT] = 0;
        bytes.resize(200, 0);
        bytes.extend_from_slice(&records(4));
        let (mut v, repair) = View::new(file_of(&bytes)).unwrap();
        assert_eq!(repair, Repair::Data);
        let mut h = [0u8; HEADER];
        v.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_le_bytes(h[48..56].try_into().unwrap()), 64);
    }

    #[test]
    fn short_or_foreign_files_are_left_alone() {
        for bytes in [&b"PERF"[..], &[0u8; 200][..]] {
            let (v, repair) = View::new(file_of(bytes)).unwrap();
            assert_eq!(repair, Repair::None);
            assert_eq!(read_all(v), bytes);
        }
    }
}
