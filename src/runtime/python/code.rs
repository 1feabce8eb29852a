//! Code objects read from a CPython process: the qualified name, the
//! file and the line table that name a frame, and the line of an
//! instruction. Each string and table is checked to be of its type and
//! read within a bound; a longer name is cut.

use std::sync::Arc;

use super::layout::{CODE_READ, Layout};
use super::lines::line_of;
use super::walk::{Counted, Miss};
use crate::bytes::{u32_at, u64_at};

/// The addresses of the types a walk checks objects against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Types {
    pub(crate) code: u64,
    pub(crate) unicode: u64,
    pub(crate) bytes: u64,
}

/// Most characters of a qualified name kept, and of a file name read.
const MAX_NAME: usize = 256;
const MAX_FILE: usize = 1024;
/// Largest line table read; a code object with a larger one has no line.
const MAX_LINETABLE: usize = 64 << 10;

/// What names one code object's frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CodeInfo {
    pub(crate) qualname: Arc<str>,
    /// The file's base name.
    pub(crate) file: Arc<str>,
    first_line: i32,
    linetable: Option<Box<[u8]>>,
    /// Where its bytecode begins in the process.
    code_start: u64,
}

impl CodeInfo {
    /// Bytes held for it.
    pub(crate) fn size(&self) -> usize {
        self.qualname.len() + self.file.len() + self.linetable.as_ref().map_or(0, |t| t.len())
    }

    /// The line of the instruction at `instr`, if the table tells it.
    pub(crate) fn line(&self, instr: u64) -> Option<u32> {
        let table = self.linetable.as_deref()?;
        let units = instr.checked_sub(self.code_start)? / 2;
        line_of(table, self.first_line, u32::try_from(units).ok()?)
    }

    /// The frame's name as reports print it: `qualname (file:line)`.
    pub(crate) fn frame_name(&self, instr: u64) -> String {
        match self.line(instr) {
            Some(line) => format!("{} ({}:{line})", self.qualname, self.file),
            None => format!("{} ({})", self.qualname, self.file),
        }
    }
}

/// Reads the code object at `addr`.
pub(crate) fn read_code(
    mem: &mut Counted<'_>,
    layout: &Layout,
    types: &Types,
    addr: u64,
) -> Result<CodeInfo, Miss> {
    let mut head = [0u8; CODE_READ];
    mem.read(addr, &mut head)?;
    let field = |off: u64| u64_at(&head, off as usize).ok_or(Miss::Unreadable);
    if field(layout.object_type)? != types.code {
        return Err(Miss::Unreadable);
    }
    let qualname = read_str(
        mem,
        layout,
        types,
        field(layout.code_qualname)?,
        MAX_NAME,
        false,
    )?;
    // The end of a long path: its base name.
    let path = read_str(
        mem,
        layout,
        types,
        field(layout.code_filename)?,
        MAX_FILE,
        true,
    )?;
    let file = path.rsplit('/').next().unwrap_or(&path).to_string();
    let first_line = u32_at(&head, layout.code_firstlineno as usize)
        .map(|l| l as i32)
        .ok_or(Miss::Unreadable)?;
    let linetable = read_bytes(mem, layout, types, field(layout.code_linetable)?).ok();
    Ok(CodeInfo {
        qualname: qualname.into(),
        file: file.into(),
        first_line,
        linetable,
        code_start: addr.wrapping_add(layout.code_adaptive),
    })
}

/// The characters of the compact string at `addr`, at most `max` of them:
/// its first ones, or its last ones if `tail`.
fn read_str(
    mem: &mut Counted<'_>,
    layout: &Layout,
    types: &Types,
    addr: u64,
    max: usize,
    tail: bool,
) -> Result<String, Miss> {
    // Every string header field read is within its first 40 bytes.
    let mut head = [0u8; 40];
    mem.read(addr, &mut head)?;
    if u64_at(&head, layout.object_type as usize) != Some(types.unicode) {
        return Err(Miss::Unreadable);
    }
    let length = u64_at(&head, layout.unicode_length as usize).ok_or(Miss::Unreadable)?;
    let state = u32_at(&head, layout.unicode_state as usize).ok_or(Miss::Unreadable)?;
    let kind = ((state >> 2) & 7) as usize;
    let compact = (state >> 5) & 1 == 1;
    let ascii = (state >> 6) & 1 == 1;
    if !compact || !matches!(kind, 1 | 2 | 4) {
        return Err(Miss::Unreadable);
    }
    let length = usize::try_from(length).map_err(|_| Miss::Unreadable)?;
    let chars = length.min(max);
    let skipped = if tail { (length - chars) as u64 } else { 0 };
    let data = addr
        .wrapping_add(if ascii {
            layout.unicode_ascii_data
        } else {
            layout.unicode_compact_data
        })
        .wrapping_add(skipped.wrapping_mul(kind as u64));
    let mut raw = vec![0u8; chars * kind];
    mem.read(data, &mut raw)?;
    Ok(match kind {
        1 => raw.iter().map(|&b| char::from(b)).collect(),
        2 => raw
            .chunks_exact(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .map(|u| char::from_u32(u32::from(u)).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
        _ => raw
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
    })
}

/// The bytes of the bytes object at `addr`, if there are at most
/// [`MAX_LINETABLE`].
fn read_bytes(
    mem: &mut Counted<'_>,
    layout: &Layout,
    types: &Types,
    addr: u64,
) -> Result<Box<[u8]>, Miss> {
    let mut head = [0u8; 24];
    mem.read(addr, &mut head)?;
    if u64_at(&head, layout.object_type as usize) != Some(types.bytes) {
        return Err(Miss::Unreadable);
    }
    let size = u64_at(&head, layout.bytes_size as usize).ok_or(Miss::Unreadable)?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s <= MAX_LINETABLE)
        .ok_or(Miss::TooLong)?;
    let mut data = vec![0u8; size];
    mem.read(addr.wrapping_add(layout.bytes_data), &mut data)?;
    Ok(data.into_boxed_slice())
}

#[cfg(test)]
mod tests {
    use super::super::walk::tests::Fake;
    use super::*;

    const TYPES: Types = Types {
        code: 0x9000,
        unicode: 0x9100,
        bytes: 0x9200,
    };

    /// A compact string of `text` at `addr` in 3.12's layout.
    fn put_str(m: &mut Fake, l: &Layout, addr: u64, text: &str, claimed: Option<u64>) {
        let chars: Vec<char> = text.chars().collect();
        let ascii = text.is_ascii();
        let kind: u32 = match chars.iter().map(|&c| c as u32).max().unwrap_or(0) {
            0..=0xff => 1,
            0x100..=0xffff => 2,
            _ => 4,
        };
        let data = if ascii {
            l.unicode_ascii_data
        } else {
            l.unicode_compact_data
        } as usize;
        let mut b = vec![0u8; data + chars.len() * kind as usize + 4];
        b[8..16].copy_from_slice(&TYPES.unicode.to_ne_bytes());
        let length = claimed.unwrap_or(chars.len() as u64);
        b[16..24].copy_from_slice(&length.to_ne_bytes());
        let state = (kind << 2) | (1 << 5) | (u32::from(ascii) << 6);
        b[32..36].copy_from_slice(&state.to_ne_bytes());
        for (i, &c) in chars.iter().enumerate() {
            let at = data + i * kind as usize;
            let v = c as u32;
            b[at..at + kind as usize].copy_from_slice(&v.to_ne_bytes()[..kind as usize]);
        }
        m.put(addr, &b);
    }

    /// A 3.12 code object at 0xc000 named `qualname`, in `file`, with a
    /// line table `table` and first line `first`.
    fn code_object(qualname: &str, file: &str, table: &[u8], first: u32) -> (Fake, Layout) {
        let l = Layout::of_minor(12).unwrap();
        let mut m = Fake::default();
        let mut c = vec![0u8; CODE_READ];
        let mut word =
            |off: u64, v: u64| c[off as usize..off as usize + 8].copy_from_slice(&v.to_ne_bytes());
        word(l.object_type, TYPES.code);
        word(l.code_qualname, 0xd000);
        word(l.code_filename, 0x10000);
        word(l.code_linetable, 0xe000);
        let at = l.code_firstlineno as usize;
        c[at..at + 4].copy_from_slice(&first.to_ne_bytes());
        m.put(0xc000, &c);
        put_str(&mut m, &l, 0xd000, qualname, None);
        put_str(&mut m, &l, 0x10000, file, None);
        let mut b = vec![0u8; l.bytes_data as usize + table.len()];
        b[8..16].copy_from_slice(&TYPES.bytes.to_ne_bytes());
        b[16..24].copy_from_slice(&(table.len() as u64).to_ne_bytes());
        b[l.bytes_data as usize..].copy_from_slice(table);
        m.put(0xe000, &b);
        (m, l)
    }

    #[test]
    fn a_code_object_names_its_frames() {
        // One entry: no column, line delta +2, 3 code units long.
        let table = [0x80 | (13 << 3) | 2, 4];
        let (mut m, l) = code_object("Worker.consume", "/srv/app/queue_é.py", &table, 10);
        let mut mem = Counted::new(&mut m);
        let info = read_code(&mut mem, &l, &TYPES, 0xc000).expect("read");
        assert_eq!(&*info.qualname, "Worker.consume");
        assert_eq!(&*info.file, "queue_é.py");
        let at = |unit: u64| 0xc000 + l.code_adaptive + 2 * unit;
        assert_eq!(info.frame_name(at(1)), "Worker.consume (queue_é.py:12)");
        // Past the table: no line.
        assert_eq!(info.frame_name(at(9)), "Worker.consume (queue_é.py)");
    }

    #[test]
    fn wide_characters_are_read_and_long_names_cut() {
        let (mut m, l) = code_object("λ.☃", "x.py", &[], 1);
        let info = read_code(&mut Counted::new(&mut m), &l, &TYPES, 0xc000).unwrap();
        assert_eq!(&*info.qualname, "λ.☃");
        let long = "n".repeat(5000);
        let deep = format!("/{}/deep.py", "d/".repeat(3000));
        let (mut m, l) = code_object(&long, &deep, &[], 1);
        let info = read_code(&mut Counted::new(&mut m), &l, &TYPES, 0xc000).unwrap();
        assert_eq!(info.qualname.len(), MAX_NAME);
        assert_eq!(&*info.file, "deep.py", "the base name of a long path");
    }

    #[test]
    fn objects_of_other_types_or_claiming_too_much_are_refused() {
        let (mut m, l) = code_object("f", "x.py", &[], 1);
        let not_code = Types { code: 0x1, ..TYPES };
        assert!(read_code(&mut Counted::new(&mut m), &l, &not_code, 0xc000).is_err());
        let not_str = Types {
            unicode: 0x1,
            ..TYPES
        };
        assert!(read_code(&mut Counted::new(&mut m), &l, &not_str, 0xc000).is_err());
        // A string that claims more characters than are there: only what
        // the cap allows is read, and it is not there.
        put_str(&mut m, &l, 0xd000, "f", Some(1 << 40));
        assert!(read_code(&mut Counted::new(&mut m), &l, &TYPES, 0xc000).is_err());
        // A line table larger than the cap: the frame keeps its name, with
        // no line.
        let (mut m, l) = code_object("f", "x.py", &[], 1);
        let mut b = m.regions[&0xe000].clone();
        b[16..24].copy_from_slice(&(1u64 << 30).to_ne_bytes());
        m.put(0xe000, &b);
        let info = read_code(&mut Counted::new(&mut m), &l, &TYPES, 0xc000).unwrap();
        assert_eq!(info.frame_name(0xc000 + l.code_adaptive), "f (x.py)");
    }
}
