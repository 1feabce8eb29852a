//! MiniDebugInfo: the function symbols a stripped binary keeps beside its
//! `.dynsym`, in an xz-compressed ELF image of their own in
//! `.gnu_debugdata`, expanded within the file's allowance and a cap of
//! its own.

use object::{Object, ObjectSection};

use super::read::{Allowance, Reader as FileReader};

/// Most bytes a MiniDebugInfo image may expand to: real ones hold a symbol
/// table and its strings, a few MiB at most.
const MAX_MINI_IMAGE: u64 = 32 << 20;

/// The ELF image inside `.gnu_debugdata` (xz-compressed), read and
/// expanded within the file's allowance and [`MAX_MINI_IMAGE`]; `None`
/// when there is none or it does not expand.
pub(super) fn mini_debuginfo<'a>(
    obj: &object::File<'a, &'a FileReader<'a>>,
    reader: &'a FileReader<'a>,
) -> Option<Vec<u8>> {
    let section = obj.section_by_name(".gnu_debugdata")?;
    let (offset, size) = section.file_range()?;
    let packed = reader.read_owned(offset, size)?;
    let allowance = reader.allowance();
    let mut out = Bounded {
        bytes: Vec::new(),
        limit: MAX_MINI_IMAGE,
        allowance,
    };
    lzma_rs::xz_decompress(&mut &packed[..], &mut out).ok()?;
    Some(out.bytes)
}

/// A buffer that refuses to grow past its limit or its file's allowance,
/// so that a lying stream stops expanding at once.
struct Bounded<'a> {
    bytes: Vec<u8>,
    limit: u64,
    allowance: &'a Allowance,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let len = buf.len() as u64;
        if self.bytes.len() as u64 + len > self.limit || !self.allowance.charge(len) {
            return Err(std::io::Error::other("MiniDebugInfo over its budget"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
