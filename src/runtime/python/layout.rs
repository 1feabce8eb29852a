//! Where CPython keeps what a frame walk reads: the offsets of the fields
//! of its runtime, interpreter, thread, frame, code and string objects.
//!
//! 3.11 and 3.12 have a table each, taken from their headers
//! (`Include/internal/pycore_*.h`, checked against Debian's 3.11.2 and
//! pyenv's 3.11.7 and 3.12.1 builds). From 3.13 on, the runtime carries
//! the offsets itself: `_PyRuntime` begins with `_Py_DebugOffsets`, read
//! from the file's initialized data, so a new version needs no table.

use crate::bytes::u64_at;

/// The offsets a frame walk needs, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `PY_VERSION_HEX >> 16`: 0x030b for 3.11.
    pub(crate) version: u16,
    /// `_PyRuntimeState.interpreters.head`.
    pub(crate) interpreters_head: u64,
    /// `PyInterpreterState.next`, `.threads.head`.
    pub(crate) interp_next: u64,
    pub(crate) interp_threads_head: u64,
    /// `PyThreadState.next`, `.native_thread_id`.
    pub(crate) thread_next: u64,
    pub(crate) thread_native_id: u64,
    /// Where a thread's current frame is: through `cframe` up to 3.12,
    /// in the thread state from 3.13.
    pub(crate) current_frame: CurrentFrame,
    /// `_PyInterpreterFrame.f_code` (`f_executable` from 3.13).
    pub(crate) frame_code: u64,
    pub(crate) frame_previous: u64,
    /// `prev_instr` up to 3.12 (the last instruction run), `instr_ptr`
    /// from 3.13 (the one running).
    pub(crate) frame_instr: u64,
    pub(crate) frame_owner: u64,
    /// How a frame tells that the evaluation loop was entered there.
    pub(crate) entry: Entry,
    pub(crate) code_filename: u64,
    pub(crate) code_qualname: u64,
    pub(crate) code_linetable: u64,
    pub(crate) code_firstlineno: u64,
    /// Where the bytecode begins in a code object.
    pub(crate) code_adaptive: u64,
    pub(crate) object_type: u64,
    pub(crate) bytes_size: u64,
    pub(crate) bytes_data: u64,
    pub(crate) unicode_length: u64,
    pub(crate) unicode_state: u64,
    /// Where the characters of a compact ASCII string begin, and of a
    /// compact string of other characters.
    pub(crate) unicode_ascii_data: u64,
    pub(crate) unicode_compact_data: u64,
}

/// Where a thread state's current frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CurrentFrame {
    /// `PyThreadState.cframe`, then `_PyCFrame.current_frame` (3.11, 3.12).
    ThroughCFrame { cframe: u64, current: u64 },
    /// `PyThreadState.current_frame` (3.13 on).
    Direct { current: u64 },
}

/// How the frames one run of the evaluation loop executes are told apart
/// from its caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// 3.11: the frame the loop was entered with has `is_entry` set (a
    /// byte at this offset).
    Flag { is_entry: u64 },
    /// 3.12 on: the loop pushes a frame of its own, owned by the C stack,
    /// below the first it runs.
    ShimOwner { owner: u8 },
}

/// `FRAME_OWNED_BY_CSTACK`: the owner of the frame the evaluation loop
/// pushes at the start of each run (3.12 on).
const OWNER_CSTACK: u8 = 3;

/// Size of the frame fields read at once: every offset above is within.
pub(crate) const FRAME_READ: usize = 80;
/// Size of the code object fields read at once.
pub(crate) const CODE_READ: usize = 160;

impl Layout {
    /// The table of 3.`minor`, for the versions that have one.
    pub(crate) fn of_minor(minor: u8) -> Option<Layout> {
        let common = Layout {
            version: 0x0300 | u16::from(minor),
            interpreters_head: 40,
            interp_next: 0,
            interp_threads_head: 16,
            thread_next: 8,
            thread_native_id: 160,
            current_frame: CurrentFrame::ThroughCFrame {
                cframe: 56,
                current: 8,
            },
            frame_code: 32,
            frame_previous: 48,
            frame_instr: 56,
            frame_owner: 69,
            entry: Entry::Flag { is_entry: 68 },
            code_filename: 112,
            code_qualname: 128,
            code_linetable: 136,
            code_firstlineno: 72,
            code_adaptive: 184,
            object_type: 8,
            bytes_size: 16,
            bytes_data: 32,
            unicode_length: 16,
            unicode_state: 32,
            unicode_ascii_data: 48,
            unicode_compact_data: 72,
        };
        match minor {
            11 => Some(common),
            12 => Some(Layout {
                interp_threads_head: 72,
                thread_native_id: 144,
                current_frame: CurrentFrame::ThroughCFrame {
                    cframe: 56,
                    current: 0,
                },
                frame_code: 0,
                frame_previous: 8,
                frame_instr: 56,
                frame_owner: 70,
                entry: Entry::ShimOwner {
                    owner: OWNER_CSTACK,
                },
                code_firstlineno: 68,
                code_adaptive: 192,
                unicode_ascii_data: 40,
                unicode_compact_data: 56,
                ..common
            }),
            _ => None,
        }
    }

    /// The layout `_Py_DebugOffsets` gives (3.13 on): `debug` is the
    /// start of `_PyRuntime`. `None` when it does not begin with the
    /// cookie, is of a version before 3.13, or is cut short.
    pub(crate) fn from_debug_offsets(debug: &[u8]) -> Option<Layout> {
        if debug.get(..8)? != b"xdebugpy" {
            return None;
        }
        let version = u16::try_from(u64_at(debug, 8)? >> 16).ok()?;
        // Later versions lay the offsets out otherwise; a free-threaded
        // build lays out its objects otherwise.
        if version != 0x030d || u64_at(debug, 16)? != 0 {
            return None;
        }
        let at = |index: usize| u64_at(debug, index * 8);
        // Word indices in 3.13's struct: the cookie (0), version (1),
        // free_threaded (2), then each group, beginning with its size.
        let runtime = 3;
        let interp = runtime + 3;
        let thread = interp + 13;
        let frame = thread + 9;
        let code = frame + 6;
        let object = code + 10;
        let type_ = object + 2;
        let tuple = type_ + 4;
        let list = tuple + 3;
        let dict = list + 3;
        let float = dict + 3;
        let long = float + 2;
        let bytes = long + 3;
        let unicode = bytes + 3;
        let ascii_size = at(unicode + 3)?;
        Some(Layout {
            version,
            interpreters_head: at(runtime + 2)?,
            interp_next: at(interp + 2)?,
            interp_threads_head: at(interp + 3)?,
            thread_next: at(thread + 2)?,
            thread_native_id: at(thread + 6)?,
            current_frame: CurrentFrame::Direct {
                current: at(thread + 4)?,
            },
            frame_code: at(frame + 2)?,
            frame_previous: at(frame + 1)?,
            frame_instr: at(frame + 3)?,
            frame_owner: at(frame + 5)?,
            entry: Entry::ShimOwner {
                owner: OWNER_CSTACK,
            },
            code_filename: at(code + 1)?,
            code_qualname: at(code + 3)?,
            code_linetable: at(code + 4)?,
            code_firstlineno: at(code + 5)?,
            code_adaptive: at(code + 9)?,
            object_type: at(object + 1)?,
            bytes_size: at(bytes + 1)?,
            bytes_data: at(bytes + 2)?,
            unicode_length: at(unicode + 2)?,
            unicode_state: at(unicode + 1)?,
            unicode_ascii_data: ascii_size,
            // A compact string of other characters has two more words
            // (its UTF-8 length and pointer) before its characters.
            unicode_compact_data: ascii_size.checked_add(16)?,
        })
        .filter(Layout::fits)
    }

    /// Bytes of `_Py_DebugOffsets` that [`Layout::from_debug_offsets`]
    /// reads.
    pub(crate) const DEBUG_OFFSETS_LEN: usize = 8 * 80;

    /// Every field a walk reads within what it reads at once (offsets
    /// from a file: any value).
    fn fits(&self) -> bool {
        let within = |fields: &[(u64, u64)], read: usize| {
            fields
                .iter()
                .all(|&(off, len)| off.checked_add(len).is_some_and(|end| end <= read as u64))
        };
        let frame = [
            (self.frame_code, 8),
            (self.frame_previous, 8),
            (self.frame_instr, 8),
            (self.frame_owner, 1),
        ];
        let code = [
            (self.code_filename, 8),
            (self.code_qualname, 8),
            (self.code_linetable, 8),
            (self.code_firstlineno, 4),
            (self.object_type, 8),
        ];
        within(&frame, FRAME_READ)
            && within(&code, CODE_READ)
            && self.unicode_state < 36
            && self.unicode_length < 32
            && self.code_adaptive < 1 << 12
            && [
                self.interpreters_head,
                self.interp_next,
                self.interp_threads_head,
                self.thread_next,
                self.thread_native_id,
                self.bytes_size,
                self.bytes_data,
                self.unicode_length,
                self.unicode_state,
                self.unicode_ascii_data,
            ]
            .iter()
            .all(|&off| off < 1 << 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_what_is_read() {
        for minor in [11, 12] {
            assert!(
                Layout::of_minor(minor).is_some_and(|l| l.fits()),
                "3.{minor}"
            );
        }
        assert_eq!(Layout::of_minor(10), None);
        assert_eq!(Layout::of_minor(13), None);
    }

    /// 3.13.0's `_Py_DebugOffsets` as its build here lays it out
    /// (`offsetof` against its headers), by word index.
    fn debug_3_13() -> Vec<u8> {
        let mut words = vec![0u64; 80];
        words[1] = 0x030d00f0;
        for (i, v) in [
            (5, 632),  // runtime: interpreters_head
            (8, 7264), // interpreter: next
            (9, 7344), // interpreter: threads_head
            (21, 8),   // thread: next
            (23, 72),  // thread: current_frame
            (25, 160), // thread: native_thread_id
            (29, 8),   // frame: previous
            (30, 0),   // frame: executable
            (31, 56),  // frame: instr_ptr
            (33, 70),  // frame: owner
            (35, 112), // code: filename
            (37, 128), // code: qualname
            (38, 136), // code: linetable
            (39, 68),  // code: firstlineno
            (43, 200), // code: co_code_adaptive
            (45, 8),   // object: ob_type
            (65, 16),  // bytes: ob_size
            (66, 32),  // bytes: ob_sval
            (68, 32),  // unicode: state
            (69, 16),  // unicode: length
            (70, 40),  // unicode: asciiobject_size
        ] {
            words[i] = v;
        }
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        bytes[..8].copy_from_slice(b"xdebugpy");
        bytes
    }

    fn put(d: &mut [u8], i: usize, v: u64) {
        d[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }

    #[test]
    fn debug_offsets_of_3_13_are_read() {
        let d = debug_3_13();
        let l = Layout::from_debug_offsets(&d).expect("read");
        assert_eq!(l.version, 0x030d);
        assert_eq!(l.interpreters_head, 632);
        assert_eq!((l.interp_next, l.interp_threads_head), (7264, 7344));
        assert_eq!((l.thread_next, l.thread_native_id), (8, 160));
        assert_eq!(l.current_frame, CurrentFrame::Direct { current: 72 });
        assert_eq!((l.frame_previous, l.frame_code), (8, 0));
        assert_eq!((l.frame_instr, l.frame_owner), (56, 70));
        assert_eq!((l.code_filename, l.code_qualname), (112, 128));
        assert_eq!((l.code_linetable, l.code_firstlineno), (136, 68));
        assert_eq!(l.code_adaptive, 200);
        assert_eq!((l.unicode_state, l.unicode_length), (32, 16));
        assert_eq!((l.unicode_ascii_data, l.unicode_compact_data), (40, 56));
        // Not the cookie, an older version, cut short: none.
        let mut bad = d.clone();
        bad[0] = b'y';
        assert_eq!(Layout::from_debug_offsets(&bad), None);
        for version in [0x030c00f0u64, 0x030e00f0] {
            let mut other = d.clone();
            put(&mut other, 1, version);
            assert_eq!(Layout::from_debug_offsets(&other), None);
        }
        let mut free_threaded = d.clone();
        put(&mut free_threaded, 2, 1);
        assert_eq!(Layout::from_debug_offsets(&free_threaded), None);
        assert_eq!(Layout::from_debug_offsets(&d[..100]), None);
        // Offsets past what is read at once: refused.
        let mut far = d.clone();
        put(&mut far, 33, 4096);
        assert_eq!(Layout::from_debug_offsets(&far), None);
    }
}
