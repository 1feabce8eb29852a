//! Bounds-checked native-endian reads over bytes the kernel or a traced
//! process wrote: the one byte reader of the record and page decoders.
//! Nothing here panics or allocates on bad input.

/// A read past the end of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("truncated: wanted {wanted} bytes at offset {at}, have {have}")]
pub(crate) struct Truncated {
    pub(crate) wanted: usize,
    pub(crate) at: usize,
    pub(crate) have: usize,
}

/// The native-endian u32 at `at` in `b`, if all of it is there.
#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..)?
        .first_chunk::<4>()
        .map(|c| u32::from_ne_bytes(*c))
}

/// The native-endian u64 at `at` in `b`, if all of it is there.
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..)?
        .first_chunk::<8>()
        .map(|c| u64::from_ne_bytes(*c))
}

/// A native `long` of `size` bytes (4 or 8) at `at` in `b`.
#[inline]
pub(crate) fn word_at(b: &[u8], at: usize, size: usize) -> Option<u64> {
    match size {
        4 => u32_at(b, at).map(u64::from),
        8 => u64_at(b, at),
        _ => None,
    }
}

/// The native-endian u64s of `b`; a partial last word is left out.
pub(crate) fn u64s(b: &[u8]) -> impl ExactSizeIterator<Item = u64> + '_ {
    b.chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or_default()))
}

/// Reads a buffer front to back; every read is bounds-checked.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// A cursor at `pos` of `buf` (the end when `pos` is past it).
    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor {
            buf,
            pos: pos.min(buf.len()),
        }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let truncated = Truncated {
            wanted: n,
            at: self.pos,
            have: self.buf.len(),
        };
        let end = self.pos.checked_add(n).ok_or(truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(truncated)?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Truncated> {
        let b = self.take(8)?;
        Ok(u64_at(b, 0).unwrap_or_default())
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Truncated> {
        let b = self.take(4)?;
        Ok(u32_at(b, 0).unwrap_or_default())
    }

    /// Everything not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
}

/// `bytes` as lowercase hexadecimal digits (a build-id's usual spelling).
pub(crate) fn hex_string(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end() {
        let b = [1u8, 0, 0, 0, 2, 0, 0, 0, 3];
        assert_eq!(u32_at(&b, 0), Some(1));
        assert_eq!(u32_at(&b, 4), Some(2));
        assert_eq!(u32_at(&b, 6), None);
        assert_eq!(u32_at(&b, usize::MAX), None);
        assert_eq!(u64_at(&b, 0), Some(0x2_0000_0001));
        assert_eq!(u64_at(&b, 2), None);
        assert_eq!(word_at(&b, 4, 4), Some(2));
        assert_eq!(word_at(&b, 0, 8), Some(0x2_0000_0001));
        assert_eq!(word_at(&b, 0, 2), None);
        assert_eq!(u64s(&b).collect::<Vec<_>>(), vec![0x2_0000_0001]);
    }

    #[test]
    fn a_cursor_says_what_it_lacked_and_stays_put() {
        let b = [7u8, 0, 0, 0, 9];
        let mut c = Cursor::new(&b);
        assert_eq!(c.u32(), Ok(7));
        assert_eq!(
            c.u64(),
            Err(Truncated {
                wanted: 8,
                at: 4,
                have: 5
            })
        );
        assert_eq!(c.take(usize::MAX).unwrap_err().at, 4);
        assert_eq!(c.rest(), &[9]);
        assert_eq!(c.rest(), &[] as &[u8]);
        assert_eq!(Cursor::at(&b, 99).rest(), &[] as &[u8]);
    }
}
