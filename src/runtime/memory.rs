//! Reads of a traced process's memory by a runtime's frame walk: each
//! one bounded in size by its buffer, and a walk's reads bounded in number.

/// Reads a traced process's memory.
pub(crate) trait Memory {
    /// Fills `buf` from `addr`; false unless all of it was read.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;
}

/// Reads of one walk by default, and bytes.
const MAX_READS: usize = 4096;
const MAX_BYTES: usize = 64 << 20;

/// Why no frames were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    /// A read failed (the thread or process went, or a pointer was bad).
    Unreadable,
    /// No thread state of this thread (it runs no interpreted code).
    NoThread,
    /// The thread's state has no frames to read now (it is not waiting
    /// from interpreted code).
    NotWaiting,
    /// Past a bound.
    TooLong,
}

/// Memory read with a count of reads.
pub(crate) struct Counted<'a> {
    mem: &'a mut dyn Memory,
    reads: usize,
    max: usize,
    bytes: usize,
    max_bytes: usize,
}

impl<'a> Counted<'a> {
    /// At most [`MAX_READS`] reads.
    pub(crate) fn new(mem: &'a mut dyn Memory) -> Counted<'a> {
        Counted::with_limit(mem, MAX_READS)
    }

    /// At most `max` reads (and [`MAX_BYTES`] bytes).
    pub(crate) fn with_limit(mem: &'a mut dyn Memory, max: usize) -> Counted<'a> {
        Counted {
            mem,
            reads: 0,
            max,
            bytes: 0,
            max_bytes: MAX_BYTES,
        }
    }

    /// At most `max_bytes` bytes read in all.
    pub(crate) fn with_bytes(self, max_bytes: usize) -> Counted<'a> {
        Counted { max_bytes, ..self }
    }

    pub(crate) fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), Miss> {
        if self.reads >= self.max || self.bytes.saturating_add(buf.len()) > self.max_bytes {
            return Err(Miss::TooLong);
        }
        self.reads += 1;
        self.bytes += buf.len();
        if addr == 0 || !self.mem.read(addr, buf) {
            return Err(Miss::Unreadable);
        }
        Ok(())
    }

    pub(crate) fn word(&mut self, addr: u64) -> Result<u64, Miss> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}
