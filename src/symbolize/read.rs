//! Reading a file that a traced process controls, within a byte budget.
//!
//! Files are read with `pread` into memory, never mapped: a file truncated
//! while it is parsed gives a read error, not SIGBUS. Every byte read or
//! expanded for a file is charged to its [`Allowance`] before it is
//! allocated: each range read once, and each section loaded at what its
//! header claims, even when several alias the same bytes, so no file can
//! make the tool allocate more than its share. Names are read at most
//! [`MAX_NAME`] bytes long.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use object::ReadRef;
use typed_arena::Arena;

/// Longest name (symbol or string) read; a longer one is unreadable.
pub(crate) const MAX_NAME: usize = 4096;

/// Most bytes one file (a binary, or its debug file) may have read,
/// decompressed or copied.
pub(crate) const FILE_BUDGET: u64 = 128 << 20;
/// Most bytes all files of one run may have read, decompressed or copied:
/// a bound on the time spent reading, not on memory, since each file's
/// data is dropped before the next file is read.
pub(crate) const RUN_BUDGET: u64 = 1 << 30;

/// What a run may still spend on files.
#[derive(Debug)]
pub(crate) struct RunBudget {
    left: u64,
    /// Most one file may use.
    per_file: u64,
}

impl Default for RunBudget {
    fn default() -> RunBudget {
        RunBudget::new(FILE_BUDGET, RUN_BUDGET)
    }
}

impl RunBudget {
    /// A budget of `total` bytes for the run, at most `per_file` a file.
    pub(crate) fn new(per_file: u64, total: u64) -> RunBudget {
        RunBudget {
            left: total,
            per_file,
        }
    }

    /// The allowance of the next file: its share, or what is left.
    pub(crate) fn allowance(&self) -> Allowance {
        Allowance::new(self.per_file.min(self.left))
    }

    /// The allowance of a file read while `other` is still in use (a debug
    /// file, while its binary is parsed).
    pub(crate) fn allowance_besides(&self, other: &Allowance) -> Allowance {
        Allowance::new(
            self.per_file
                .min(self.left.saturating_sub(other.used.get())),
        )
    }

    /// What is left.
    #[cfg(test)]
    pub(crate) fn left(&self) -> u64 {
        self.left
    }

    /// Takes what a file spent.
    pub(crate) fn spend(&mut self, a: &Allowance) {
        self.left = self.left.saturating_sub(a.used.get());
    }
}

/// The bytes one file may still use.
#[derive(Debug)]
pub(crate) struct Allowance {
    limit: u64,
    used: Cell<u64>,
    exceeded: Cell<bool>,
}

impl Allowance {
    pub(crate) fn new(limit: u64) -> Allowance {
        Allowance {
            limit,
            used: Cell::new(0),
            exceeded: Cell::new(false),
        }
    }

    /// Charges `bytes`; false (and remembered) when they do not fit.
    pub(crate) fn charge(&self, bytes: u64) -> bool {
        let used = self.used.get().saturating_add(bytes);
        if used > self.limit {
            self.exceeded.set(true);
            return false;
        }
        self.used.set(used);
        true
    }

    /// True once a charge did not fit.
    pub(crate) fn exceeded(&self) -> bool {
        self.exceeded.get()
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

/// Where the bytes are: an open file, or an image already in memory.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source<'a> {
    File(&'a File),
    Bytes(&'a [u8]),
}

impl Source<'_> {
    /// Fills `buf` from `offset`; false on a short read (e.g. a file
    /// truncated meanwhile).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> bool {
        match self {
            Source::File(f) => f.read_exact_at(buf, offset).is_ok(),
            Source::Bytes(b) => {
                let Ok(start) = usize::try_from(offset) else {
                    return false;
                };
                match b.get(start..).and_then(|rest| rest.get(..buf.len())) {
                    Some(src) => {
                        buf.copy_from_slice(src);
                        true
                    }
                    None => false,
                }
            }
        }
    }
}

/// A budgeted reader of one file, giving `object` the `ReadRef` it parses
/// through. Each range is read once; what was read lives in `arena` until
/// the parse is over.
pub(crate) struct Reader<'a> {
    source: Source<'a>,
    len: u64,
    allowance: &'a Allowance,
    arena: &'a Arena<u8>,
    /// Every range read, by offset and size: found again whole, and
    /// searched for strings inside.
    blocks: RefCell<BTreeMap<(u64, u64), &'a [u8]>>,
    strings: RefCell<HashMap<(u64, u8), &'a [u8]>>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(
        source: Source<'a>,
        len: u64,
        allowance: &'a Allowance,
        arena: &'a Arena<u8>,
    ) -> Reader<'a> {
        Reader {
            source,
            len,
            allowance,
            arena,
            blocks: RefCell::default(),
            strings: RefCell::default(),
        }
    }

    /// Reads `size` bytes at `offset` into a new buffer, charged, not kept
    /// by the reader: for data that outlives the parse.
    pub(crate) fn read_owned(&self, offset: u64, size: u64) -> Option<Arc<[u8]>> {
        if offset.checked_add(size)? > self.len || !self.allowance.charge(size) {
            return None;
        }
        // Zeroed by the allocator (a debug build would fill an iterator's
        // bytes one by one), then moved where it stays.
        let mut buf = vec![0u8; usize::try_from(size).ok()?];
        self.source
            .read_at(&mut buf, offset)
            .then(|| Arc::from(buf))
    }

    pub(crate) fn allowance(&self) -> &'a Allowance {
        self.allowance
    }

    /// A string starting at `start` inside a range already read.
    fn in_block(&self, start: u64, end: u64, delimiter: u8) -> Option<&'a [u8]> {
        let blocks = self.blocks.borrow();
        let (&(at, _), &block) = blocks.range(..=(start, u64::MAX)).next_back()?;
        let from = usize::try_from(start - at).ok()?;
        let within = block.get(from..)?;
        let room = usize::try_from(end - start).unwrap_or(usize::MAX);
        let window = &within[..within.len().min(room).min(MAX_NAME)];
        let n = window.iter().position(|&b| b == delimiter)?;
        Some(&window[..n])
    }
}

impl<'a> ReadRef<'a> for &'a Reader<'a> {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        if let Some(&bytes) = self.blocks.borrow().get(&(offset, size)) {
            return Ok(bytes);
        }
        let end = offset.checked_add(size).ok_or(())?;
        if end > self.len || !self.allowance.charge(size) {
            return Err(());
        }
        let n = usize::try_from(size).map_err(|_| ())?;
        let buf = self.arena.alloc_extend(std::iter::repeat_n(0u8, n));
        if !self.source.read_at(buf, offset) {
            return Err(());
        }
        let buf: &'a [u8] = buf;
        self.blocks.borrow_mut().insert((offset, size), buf);
        Ok(buf)
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        if range.start >= range.end || range.end > self.len {
            return Err(());
        }
        if let Some(s) = self.in_block(range.start, range.end, delimiter) {
            return Ok(s);
        }
        if let Some(&s) = self.strings.borrow().get(&(range.start, delimiter))
            && (s.len() as u64) < range.end - range.start
        {
            return Ok(s);
        }
        let room = usize::try_from(range.end - range.start).unwrap_or(usize::MAX);
        let n = room.min(MAX_NAME);
        if !self.allowance.charge(n as u64) {
            return Err(());
        }
        let mut buf = vec![0u8; n];
        if !self.source.read_at(&mut buf, range.start) {
            // Near the end of the file: read what there is.
            let avail = usize::try_from(self.len - range.start).map_err(|_| ())?;
            buf.truncate(avail.min(n));
            if !self.source.read_at(&mut buf, range.start) {
                return Err(());
            }
        }
        let len = buf.iter().position(|&b| b == delimiter).ok_or(())?;
        let s: &'a [u8] = self.arena.alloc_extend(buf[..len].iter().copied());
        self.strings
            .borrow_mut()
            .insert((range.start, delimiter), s);
        Ok(s)
    }
}

/// Parses the file `opened` with `parse`, through a reader that charges
/// what it reads to `run`.
pub(crate) fn parse_opened<T>(
    opened: &crate::sys::open::Opened,
    run: &mut RunBudget,
    parse: impl for<'r> FnOnce(&'r Reader<'r>) -> Option<T>,
) -> Option<T> {
    let allowance = run.allowance();
    let arena = Arena::new();
    let reader = Reader::new(Source::File(&opened.file), opened.size, &allowance, &arena);
    let parsed = parse(&reader);
    run.spend(&allowance);
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_charged_once_per_range() {
        let data: Vec<u8> = (0..=255).collect();
        let (allowance, arena) = (Allowance::new(100), Arena::new());
        let r = &Reader::new(Source::Bytes(&data), 256, &allowance, &arena);
        {
            assert_eq!(r.read_bytes_at(10, 4), Ok(&data[10..14]));
            assert_eq!(r.read_bytes_at(10, 4), Ok(&data[10..14]));
            assert_eq!(r.allowance().used.get(), 4);
            // Past the end, and over the allowance, fail.
            assert_eq!(r.read_bytes_at(250, 10), Err(()));
            assert_eq!(r.read_bytes_at(0, 97), Err(()));
            assert!(r.allowance().exceeded());
            assert_eq!(r.read_bytes_at(0, 96).map(|b| b.len()), Ok(96));
        }
    }

    #[test]
    fn aliased_claims_are_each_charged() {
        let data = vec![7u8; 64];
        let (allowance, arena) = (Allowance::new(100), Arena::new());
        let r = Reader::new(Source::Bytes(&data), 64, &allowance, &arena);
        assert!(r.read_owned(0, 64).is_some());
        assert!(r.read_owned(0, 64).is_none(), "the second copy is over");
    }

    #[test]
    fn strings_are_found_in_blocks_and_bounded() {
        let mut data = b"\0main\0helper\0".to_vec();
        data.extend(std::iter::repeat_n(b'x', MAX_NAME + 10));
        data.push(0);
        let len = data.len() as u64;
        let (allowance, arena) = (Allowance::new(1 << 20), Arena::new());
        let r = &Reader::new(Source::Bytes(&data), len, &allowance, &arena);
        {
            assert_eq!(r.read_bytes_at_until(1..len, 0), Ok(&b"main"[..]));
            r.read_bytes_at(0, 13).unwrap();
            let used = r.allowance().used.get();
            assert_eq!(r.read_bytes_at_until(6..len, 0), Ok(&b"helper"[..]));
            assert_eq!(r.allowance().used.get(), used, "found in the block");
            assert_eq!(r.read_bytes_at_until(13..len, 0), Err(()), "too long");
            // A string cut by the end of its range is not a string.
            assert_eq!(r.read_bytes_at_until(1..3, 0), Err(()));
        }
    }

    #[test]
    fn a_truncated_file_is_a_read_error() {
        let path = std::env::temp_dir().join(format!("offwake-read-{}", std::process::id()));
        std::fs::write(&path, [1u8; 4096]).unwrap();
        let file = File::open(&path).unwrap();
        let allowance = Allowance::new(1 << 20);
        let arena = Arena::new();
        let r = Reader::new(Source::File(&file), 4096, &allowance, &arena);
        std::fs::write(&path, b"").unwrap();
        assert_eq!((&r).read_bytes_at(0, 4096), Err(()));
        assert!(r.read_owned(0, 16).is_none());
        std::fs::remove_file(&path).unwrap();
    }
}
