//! The file that holds a CPython interpreter (libpython, or an executable
//! with the interpreter linked in): the symbols a frame walk starts from,
//! its version and layout, read once per file from its dynamic symbol
//! table and initialized data, through the budgeted reader every file a
//! traced process names goes through.

use object::{Object, ObjectSection, ObjectSymbol};

use super::layout::Layout;
use crate::symbolize::elf::{Segment, base_avma, load_segments};
use crate::symbolize::read::{Reader, RunBudget, parse_opened};
use crate::sys::open::Opened;

/// What a walk needs of the interpreter's file, at the file's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) layout: Layout,
    /// `_PyRuntime`.
    pub(crate) runtime: u64,
    /// `PyCode_Type`, `PyUnicode_Type`, `PyBytes_Type`.
    pub(crate) code_type: u64,
    pub(crate) unicode_type: u64,
    pub(crate) bytes_type: u64,
    /// `_PyEval_EvalFrameDefault`: each call runs a group of frames.
    pub(crate) eval: std::ops::Range<u64>,
    segments: Vec<Segment>,
}

/// Whether a mapped file's name says it may hold an interpreter:
/// `libpython3.*` or `python3*`.
pub(crate) fn may_hold_python(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("libpython3.") || name.starts_with("python3")
}

impl Image {
    /// Reads `opened`; `None` when it holds no supported interpreter.
    pub(crate) fn read(opened: &Opened, run: &mut RunBudget) -> Option<Image> {
        parse_opened(opened, run, Self::parse)
    }

    fn parse<'a>(reader: &'a Reader<'a>) -> Option<Image> {
        let obj = object::File::parse(reader).ok()?;
        if !matches!(obj.format(), object::BinaryFormat::Elf) || !obj.is_64() {
            return None;
        }
        let mut wanted: [(&str, Option<(u64, u64)>); 6] = [
            ("_PyRuntime", None),
            ("PyCode_Type", None),
            ("PyUnicode_Type", None),
            ("PyBytes_Type", None),
            ("_PyEval_EvalFrameDefault", None),
            ("Py_Version", None),
        ];
        for sym in obj.dynamic_symbols() {
            let Ok(name) = sym.name() else { continue };
            if let Some(w) = wanted.iter_mut().find(|(n, _)| *n == name) {
                w.1 = Some((sym.address(), sym.size()));
            }
        }
        let [runtime, code, unicode, bytes, eval, version] = wanted.map(|(_, v)| v);
        let (runtime, _) = runtime?;
        let read_at = |addr: u64, len: usize| -> Option<std::sync::Arc<[u8]>> {
            let section = obj
                .sections()
                .find(|s| s.address() <= addr && addr < s.address().saturating_add(s.size()))?;
            let (offset, size) = section.file_range()?;
            let within = addr - section.address();
            if within.checked_add(len as u64)? > size {
                return None;
            }
            reader.read_owned(offset.checked_add(within)?, len as u64)
        };
        let (version_at, _) = version?;
        let hex = crate::bytes::u32_at(&read_at(version_at, 4)?, 0)?;
        let layout = match (hex >> 24, (hex >> 16) & 0xff) {
            (3, minor @ (11 | 12)) => Layout::of_minor(minor as u8)?,
            (3, _) => Layout::from_debug_offsets(&read_at(runtime, Layout::DEBUG_OFFSETS_LEN)?)?,
            _ => return None,
        };
        let (eval_at, eval_size) = eval?;
        Some(Image {
            layout,
            runtime,
            code_type: code?.0,
            unicode_type: unicode?.0,
            bytes_type: bytes?.0,
            eval: eval_at..eval_at.checked_add(eval_size.max(1))?,
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
    /// An image of 3.12 whose evaluation loop is at `eval`.
    pub(crate) fn with_eval(eval: std::ops::Range<u64>) -> Image {
        Image {
            layout: Layout::of_minor(12).expect("a table"),
            runtime: 0x1000,
            code_type: 0x2000,
            unicode_type: 0x3000,
            bytes_type: 0x4000,
            eval,
            segments: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_may_hold_an_interpreter() {
        assert!(may_hold_python(
            "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"
        ));
        assert!(may_hold_python("/usr/bin/python3.11"));
        assert!(may_hold_python("python3"));
        assert!(!may_hold_python("/usr/lib/libc.so.6"));
        assert!(!may_hold_python("/opt/python3/lib/libfoo.so"));
        assert!(!may_hold_python("/usr/bin/python2.7"));
    }
}
