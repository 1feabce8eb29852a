//! Property tests: hostile input given to the tracefs parsers and decoders
//! never panics, never loops and never allocates more than it was given;
//! what cannot be made sense of is an error (or, inside a page, a
//! `truncated` page or a `malformed` count).
//!
//! Covered: the `format` parser ([`crate::source::tracepoint::format`]) and the typed field
//! views built from it ([`crate::source::tracepoint::sched`]), the `header_page` /
//! `header_event` parsers and the ring-buffer page decoder
//! ([`super::page`]), and the stack assembler ([`super::decode`]). Inputs
//! are arbitrary text and bytes, and the real fixtures under
//! `tests/fixtures/tracefs/events/` (and pages and entries built the way the
//! kernel lays them out) with mutations: lines dropped, duplicated or
//! swapped, numbers replaced by boundary values, text cut, bytes and words
//! overwritten, commits and lengths that lie.
//!
//! Seed, case counts and failure persistence: see
//! [`crate::proptest_config`] (fixed seed, no regression files).

use std::sync::OnceLock;

use proptest::prelude::*;

use super::decode::{Assembler, ProcessFormats, StackFormats, TgidSource};
use super::page::{HeaderLayout, PageLayout, decode_page};
use crate::event::{Event, EventKind};
use crate::kallsyms::machinery::ProbeRanges;
use crate::proptest_config::config;
use crate::source::tracepoint::sched::SchedFields;
use crate::source::tracepoint::{EventFormat, Field};

macro_rules! fixture {
    ($path:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/tracefs/events/",
            $path
        ))
    };
}

const SWITCH: &str = fixture!("sched/sched_switch/format");
const WAKING: &str = fixture!("sched/sched_waking/format");
const FORK: &str = fixture!("sched/sched_process_fork/format");
const EXEC: &str = fixture!("sched/sched_process_exec/format");
const KERNEL_STACK: &str = fixture!("ftrace/kernel_stack/format");
const USER_STACK: &str = fixture!("ftrace/user_stack/format");
const HEADER_PAGE: &str = fixture!("header_page");
const HEADER_EVENT: &str = fixture!("header_event");

/// Every event format fixture, in the order of [`Formats`]' fields.
const FORMAT_TEXTS: [&str; 6] = [SWITCH, WAKING, FORK, EXEC, KERNEL_STACK, USER_STACK];

/// The parsed fixtures.
struct Formats {
    all: [EventFormat; 6],
}

impl Formats {
    fn switch(&self) -> &EventFormat {
        &self.all[0]
    }
    fn waking(&self) -> &EventFormat {
        &self.all[1]
    }
    fn fork(&self) -> &EventFormat {
        &self.all[2]
    }
    fn exec(&self) -> &EventFormat {
        &self.all[3]
    }
    fn kernel(&self) -> &EventFormat {
        &self.all[4]
    }
    fn user(&self) -> &EventFormat {
        &self.all[5]
    }
}

fn formats() -> &'static Formats {
    static F: OnceLock<Formats> = OnceLock::new();
    F.get_or_init(|| Formats {
        all: FORMAT_TEXTS.map(|t| EventFormat::parse(t).expect("fixture parses")),
    })
}

fn layout() -> PageLayout {
    PageLayout::parse(HEADER_PAGE).expect("header_page fixture parses")
}

fn header() -> HeaderLayout {
    HeaderLayout::parse(HEADER_EVENT).expect("header_event fixture parses")
}

// ---------------------------------------------------------------------
// Text mutations.

/// Numbers that make parsers and the code after them trip.
const EVIL_NUMBERS: &[&str] = &[
    "0",
    "1",
    "3",
    "-1",
    "4",
    "8",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "0x10",
    "",
    " ",
    "1e3",
    "+5",
];

#[derive(Clone, Debug)]
enum TextEdit {
    DropLine(usize),
    DupLine(usize),
    SwapLines(usize, usize),
    /// Replace the n-th run of digits with a boundary value.
    Number(usize, &'static str),
    /// Insert a string at a char position.
    Insert(usize, String),
    /// Remove a run of chars.
    Remove(usize, usize),
    /// Keep the first n chars.
    Cut(usize),
}

fn text_edit() -> impl Strategy<Value = TextEdit> {
    let snippet = prop_oneof![
        Just(";".to_string()),
        Just(":".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("field:".to_string()),
        Just("__data_loc ".to_string()),
        Just("__rel_loc ".to_string()),
        Just("__print_flags(".to_string()),
        Just("{ ".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("é".to_string()),
        any::<String>(),
    ];
    prop_oneof![
        1 => any::<usize>().prop_map(TextEdit::DropLine),
        1 => any::<usize>().prop_map(TextEdit::DupLine),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| TextEdit::SwapLines(a, b)),
        4 => (any::<usize>(), proptest::sample::select(EVIL_NUMBERS))
            .prop_map(|(n, v)| TextEdit::Number(n, v)),
        2 => (any::<usize>(), snippet).prop_map(|(at, s)| TextEdit::Insert(at, s)),
        1 => (any::<usize>(), 1usize..8).prop_map(|(at, n)| TextEdit::Remove(at, n)),
        1 => any::<usize>().prop_map(TextEdit::Cut),
    ]
}

fn edit(text: &str, e: &TextEdit) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    let n = lines.len();
    let chars: Vec<char> = text.chars().collect();
    let c = chars.len();
    match e {
        TextEdit::DropLine(i) => {
            lines.remove(i % n);
            lines.join("\n")
        }
        TextEdit::DupLine(i) => {
            lines.insert(i % n, lines[i % n]);
            lines.join("\n")
        }
        TextEdit::SwapLines(a, b) => {
            lines.swap(a % n, b % n);
            lines.join("\n")
        }
        TextEdit::Number(k, v) => {
            // Runs of ASCII digits, as char ranges.
            let mut runs = Vec::new();
            let mut i = 0;
            while i < c {
                if chars[i].is_ascii_digit() {
                    let start = i;
                    while i < c && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                    runs.push((start, i));
                } else {
                    i += 1;
                }
            }
            if runs.is_empty() {
                return text.to_string();
            }
            let (s, e) = runs[k % runs.len()];
            let mut out: String = chars[..s].iter().collect();
            out.push_str(v);
            out.extend(&chars[e..]);
            out
        }
        TextEdit::Insert(at, s) => {
            let at = at % (c + 1);
            let mut out: String = chars[..at].iter().collect();
            out.push_str(s);
            out.extend(&chars[at..]);
            out
        }
        TextEdit::Remove(at, len) => {
            let at = at % (c + 1);
            let end = (at + len).min(c);
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        TextEdit::Cut(at) => chars[..at % (c + 1)].iter().collect(),
    }
}

fn mutated(text: &str, edits: &[TextEdit]) -> String {
    edits.iter().fold(text.to_string(), |t, e| edit(&t, e))
}

// ---------------------------------------------------------------------
// Typed reads out of payloads.

/// Every read a field offers, on `raw`; checks what comes back lies
/// inside `raw`.
fn read_everything(f: &Field, raw: &[u8]) {
    let _ = f.read_i64(raw);
    let _ = f.read_u64(raw);
    if let Ok(b) = f.bytes(raw) {
        assert_eq!(b.len(), f.size);
    }
    if let Ok(b) = f.dynamic_bytes(raw) {
        assert!(b.len() <= raw.len());
    }
    let _ = f.is_dynamic();
}

/// Everything one can do with a parsed format.
fn use_format(fmt: &EventFormat, raws: &[&[u8]]) {
    assert!(!fmt.fields.is_empty());
    let _ = fmt.state_flags();
    for f in &fmt.fields {
        let _ = fmt.field(&f.name);
        for raw in raws {
            read_everything(f, raw);
        }
    }
}

/// A zeroed payload of `fmt`'s fixed size with `common_type` and
/// `common_pid` set, then `fill` written over the named fields.
fn entry(fmt: &EventFormat, pid: u32, fill: &[(&str, i64)]) -> Vec<u8> {
    let mut raw = vec![0u8; fmt.fixed_size()];
    let mut put = |name: &str, v: i64| {
        let f = fmt.field(name).expect("fixture field");
        let b = v.to_ne_bytes();
        let bytes: &[u8] = if cfg!(target_endian = "big") {
            &b[8 - f.size..]
        } else {
            &b[..f.size]
        };
        raw[f.offset..f.offset + f.size].copy_from_slice(bytes);
    };
    put("common_type", fmt.id as i64);
    put("common_pid", pid as i64);
    for &(name, v) in fill {
        put(name, v);
    }
    raw
}

/// Appends `s` and points the `__data_loc` field `name` at it.
fn data_loc(raw: &mut Vec<u8>, fmt: &EventFormat, name: &str, s: &[u8]) {
    let f = fmt.field(name).expect("fixture field");
    let loc = ((s.len() as u32) << 16) | raw.len() as u32;
    raw.extend_from_slice(s);
    raw[f.offset..f.offset + 4].copy_from_slice(&loc.to_ne_bytes());
}

/// A valid entry of one of the six kinds, by `kind`.
fn valid_entry(kind: u8, pid: u32, frames: &[u64], name: &[u8]) -> Vec<u8> {
    let f = formats();
    let frames_at = |fmt: &EventFormat, raw: &mut Vec<u8>| {
        let caller = fmt.field("caller").expect("caller field");
        raw.truncate(caller.offset);
        for a in frames {
            raw.extend_from_slice(&a.to_ne_bytes());
        }
        if raw.len() < caller.offset + caller.size {
            raw.resize(caller.offset + caller.size, 0);
        }
    };
    match kind % 6 {
        0 => entry(
            f.switch(),
            pid,
            &[("prev_pid", pid as i64), ("prev_state", 1), ("next_pid", 0)],
        ),
        1 => entry(f.waking(), pid, &[("pid", 77)]),
        2 => {
            let mut raw = entry(
                f.fork(),
                pid,
                &[("parent_pid", pid as i64), ("child_pid", 99)],
            );
            data_loc(&mut raw, f.fork(), "parent_comm", b"parent\0");
            data_loc(&mut raw, f.fork(), "child_comm", b"child\0");
            raw
        }
        3 => {
            let mut raw = entry(f.exec(), pid, &[("pid", pid as i64), ("old_pid", 1)]);
            data_loc(&mut raw, f.exec(), "filename", name);
            raw
        }
        4 => {
            let mut raw = entry(f.kernel(), pid, &[("size", frames.len() as i64)]);
            frames_at(f.kernel(), &mut raw);
            raw
        }
        _ => {
            let mut raw = entry(f.user(), pid, &[("tgid", pid as i64)]);
            frames_at(f.user(), &mut raw);
            raw
        }
    }
}

#[derive(Clone, Debug)]
enum ByteEdit {
    Byte(usize, u8),
    /// A 4-byte word (most fields are 4 bytes).
    Word(usize, u32),
    Cut(usize),
    Grow(Vec<u8>),
}

fn evil_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(u32::MAX),
        Just(0xffff),
        Just(0xffff_0000),
        Just(0x7fff_ffff),
        Just(0x8000_0000),
        any::<u32>(),
    ]
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        1 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| ByteEdit::Byte(a, b)),
        2 => (any::<usize>(), evil_u32()).prop_map(|(a, w)| ByteEdit::Word(a, w)),
        1 => any::<usize>().prop_map(ByteEdit::Cut),
        1 => proptest::collection::vec(any::<u8>(), 1..32).prop_map(ByteEdit::Grow),
    ]
}

fn apply_bytes(b: &mut Vec<u8>, e: &ByteEdit) {
    let len = b.len();
    match e {
        ByteEdit::Byte(at, v) if len > 0 => b[at % len] = *v,
        ByteEdit::Word(at, w) if len > 0 => {
            let at = (at % len) & !3;
            let n = (len - at).min(4);
            b[at..at + n].copy_from_slice(&w.to_ne_bytes()[..n]);
        }
        ByteEdit::Cut(at) => b.truncate(at % (len + 1)),
        ByteEdit::Grow(more) => b.extend_from_slice(more),
        _ => {}
    }
}

// ---------------------------------------------------------------------
// Format parsing.

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_text_is_a_format_or_an_error(text in any::<String>()) {
        if let Ok(fmt) = EventFormat::parse(&text) {
            use_format(&fmt, &[&[], &[0xff; 64]]);
        }
        let _ = crate::source::tracepoint::format::parse_field(&text);
    }

    #[test]
    fn format_shaped_text_is_a_format_or_an_error(
        text in "(name: [a-z_]{0,8}\n)?(ID: [0-9]{0,12}\n)?(format:\n)?\
                 (\tfield(:| special:)[a-z_ ]{0,12}( [a-z_]{0,8}(\\[[0-9A-Z_x]{0,12}\\]?)?)?;\
                 (\toffset:[0-9]{0,21};)?(\tsize:[0-9]{0,21};)?(\tsigned:[0-9]{0,3};)?\n){0,6}\
                 (print fmt: .{0,40}(__print_flags\\(.{0,20}(\\{ ?[0-9x]{0,4}, ?\"[A-Z]{0,2}\" ?\\},? ?){0,4}\\)?)?)?",
        raw in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        if let Ok(fmt) = EventFormat::parse(&text) {
            use_format(&fmt, &[&raw]);
        }
    }

    #[test]
    fn mutated_fixtures_are_formats_or_errors(
        which in 0usize..FORMAT_TEXTS.len(),
        edits in proptest::collection::vec(text_edit(), 1..5),
        raw in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        let text = mutated(FORMAT_TEXTS[which], &edits);
        let Ok(fmt) = EventFormat::parse(&text) else {
            return Ok(());
        };
        use_format(&fmt, &[&raw, &[], &[0u8; 4096]]);
    }

    #[test]
    fn sched_fields_from_mutated_formats_never_panic(
        edit_switch in any::<bool>(),
        edits in proptest::collection::vec(text_edit(), 1..4),
        raw in proptest::collection::vec(any::<u8>(), 0..96),
        cut in any::<usize>(),
    ) {
        let f = formats();
        let (sw, wk) = if edit_switch {
            (EventFormat::parse(&mutated(SWITCH, &edits)), Ok(f.waking().clone()))
        } else {
            (Ok(f.switch().clone()), EventFormat::parse(&mutated(WAKING, &edits)))
        };
        let (Ok(sw), Ok(wk)) = (sw, wk) else {
            return Ok(());
        };
        let Ok(sched) = SchedFields::new(&sw, &wk) else {
            return Ok(());
        };
        // Payloads laid out by the real formats, cut anywhere, and noise.
        let real_switch = valid_entry(0, 5, &[], b"");
        let real_waking = valid_entry(1, 5, &[], b"");
        for p in [
            &raw[..],
            &real_switch[..],
            &real_switch[..cut % (real_switch.len() + 1)],
            &real_waking[..],
            &real_waking[..cut % (real_waking.len() + 1)],
        ] {
            if let Ok(ty) = sched.common_type(p) {
                let _ = sched.tracepoint(ty);
            }
            let _ = sched.common_pid(p);
            let _ = sched.prev_tid(p);
            let _ = sched.switch(p, 1, Default::default());
            let _ = sched.waking(p, 1, 1, Default::default());
        }
    }

    #[test]
    fn arbitrary_fields_read_inside_the_payload_or_fail(
        offset in prop_oneof![0usize..80, any::<usize>(), Just(usize::MAX), Just(usize::MAX - 3)],
        size in prop_oneof![0usize..10, any::<usize>(), Just(usize::MAX)],
        signed in any::<bool>(),
        type_name in proptest::sample::select(
            &["int", "__data_loc char[]", "__rel_loc char[]", "char", "__rel_loc", "long"][..]),
        raw in proptest::collection::vec(any::<u8>(), 0..80),
        loc in evil_u32(),
        loc_at in any::<usize>(),
    ) {
        let f = Field {
            name: "f".into(),
            type_name: type_name.into(),
            offset,
            size,
            signed,
            array_len: None,
        };
        read_everything(&f, &raw);
        // The same with a lying __data_loc word at the field's place.
        let mut raw = raw;
        if raw.len() >= 4 {
            let at = loc_at % (raw.len() - 3);
            raw[at..at + 4].copy_from_slice(&loc.to_ne_bytes());
            let f = Field { offset: at, size: 4, ..f };
            read_everything(&f, &raw);
        }
    }
}

// ---------------------------------------------------------------------
// header_page, header_event and pages.

/// Builds a page the way the kernel lays it out (as `page.rs`'s own
/// tests do), and knows what decoding it must give.
struct Page {
    layout: PageLayout,
    data: Vec<u8>,
}

/// One thing written on a page.
#[derive(Clone, Debug)]
enum Op {
    /// Data, length in type_len (1..=28 words).
    Small(u32, u8),
    /// Data, length in array[0] (0.. words).
    Long(u32, u8),
    /// Time extend.
    Extend(u64),
    /// Absolute time stamp.
    Stamp(u64),
    /// Discarded event of n extra words (delta != 0).
    Padding(u32, u8),
    /// Null padding: the rest of the page is empty.
    End,
    /// A raw record header of any type_len, then raw words.
    Raw(u32, u32, Vec<u32>),
}

fn op() -> impl Strategy<Value = Op> {
    let delta = prop_oneof![Just(0u32), Just(1), 0u32..1000, 0u32..(1 << 27)];
    prop_oneof![
        4 => (delta.clone(), 1u8..=28).prop_map(|(d, n)| Op::Small(d, n)),
        2 => (delta.clone(), 0u8..40).prop_map(|(d, n)| Op::Long(d, n)),
        1 => (0u64..(1 << 40)).prop_map(Op::Extend),
        1 => prop_oneof![any::<u64>(), 0u64..1000].prop_map(Op::Stamp),
        1 => (1u32..(1 << 27), 0u8..8).prop_map(|(d, n)| Op::Padding(d, n)),
        1 => Just(Op::End),
        1 => (0u32..32, delta, proptest::collection::vec(evil_u32(), 0..4))
            .prop_map(|(t, d, w)| Op::Raw(t, d, w)),
    ]
}

fn encode_header(type_len: u32, delta: u32) -> u32 {
    if cfg!(target_endian = "big") {
        (type_len << 27) | delta
    } else {
        type_len | (delta << 5)
    }
}

impl Page {
    fn new(layout: PageLayout) -> Page {
        Page {
            layout,
            data: Vec::new(),
        }
    }

    fn word(&mut self, w: u32) {
        self.data.extend_from_slice(&w.to_ne_bytes());
    }

    fn op(&mut self, op: &Op) {
        match *op {
            Op::Small(d, n) => {
                self.word(encode_header(u32::from(n), d));
                self.data.resize(self.data.len() + 4 * usize::from(n), n);
            }
            Op::Long(d, n) => {
                self.word(encode_header(0, d));
                self.word(4 * u32::from(n) + 4);
                self.data.resize(self.data.len() + 4 * usize::from(n), n);
            }
            Op::Extend(t) => {
                self.word(encode_header(30, (t & ((1 << 27) - 1)) as u32));
                self.word((t >> 27) as u32);
            }
            Op::Stamp(t) => {
                self.word(encode_header(31, (t & ((1 << 27) - 1)) as u32));
                self.word((t >> 27) as u32);
            }
            Op::Padding(d, n) => {
                self.word(encode_header(29, d));
                self.word(4 * u32::from(n) + 4);
                self.data.resize(self.data.len() + 4 * usize::from(n), 0xee);
            }
            Op::End => self.word(encode_header(29, 0)),
            Op::Raw(t, d, ref words) => {
                self.word(encode_header(t, d));
                for &w in words {
                    self.word(w);
                }
            }
        }
    }

    /// The page bytes, with `commit` (data length and flags) and a missed
    /// count after the data.
    fn build(&self, timestamp: u64, commit: u64, missed: u64) -> Vec<u8> {
        let l = &self.layout;
        let mut page = vec![0u8; l.page_size()];
        page[l.timestamp_offset..l.timestamp_offset + 8].copy_from_slice(&timestamp.to_ne_bytes());
        let cb = commit.to_ne_bytes();
        let cb: &[u8] = match (l.commit_size, cfg!(target_endian = "big")) {
            (4, false) => &cb[..4],
            (4, true) => &cb[4..],
            _ => &cb,
        };
        page[l.commit_offset..l.commit_offset + l.commit_size].copy_from_slice(cb);
        let n = self.data.len().min(l.data_size);
        page[l.data_offset..l.data_offset + n].copy_from_slice(&self.data[..n]);
        let at = l.data_offset + n;
        let mb = missed.to_ne_bytes();
        let m = (page.len() - at).min(l.commit_size);
        page[at..at + m].copy_from_slice(&mb[..m]);
        page
    }
}

/// Decodes and checks what any decode must satisfy.
fn check_page(page: &[u8], l: &PageLayout, h: &HeaderLayout) -> Option<Vec<(u64, Vec<u8>)>> {
    let mut got = Vec::new();
    let r = decode_page(page, l, h, &mut |t, p| got.push((t, p.to_vec())));
    let Ok(info) = r else {
        assert!(page.len() < l.page_size(), "a whole page is never an error");
        return None;
    };
    assert_eq!(info.records, got.len());
    let data = page.len().saturating_sub(l.data_offset).min(l.data_size);
    // Each record takes at least 8 bytes (header + a word).
    assert!(
        info.records <= data / 8,
        "{} records from {data} bytes",
        info.records
    );
    let mut payload = 0;
    for (_, p) in &got {
        assert!(p.len().is_multiple_of(4));
        payload += p.len();
    }
    assert!(payload <= data);
    Some(got)
}

/// A plausible `header_page` text for the layout given.
fn header_page_text(
    ts: usize,
    commit: usize,
    commit_size: usize,
    data: usize,
    size: usize,
) -> String {
    format!(
        "\tfield: u64 timestamp;\toffset:{ts};\tsize:8;\tsigned:0;\n\
         \tfield: local_t commit;\toffset:{commit};\tsize:{commit_size};\tsigned:1;\n\
         \tfield: int overwrite;\toffset:{commit};\tsize:1;\tsigned:1;\n\
         \tfield: char data;\toffset:{data};\tsize:{size};\tsigned:0;\n"
    )
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn header_texts_parse_or_fail(
        which in any::<bool>(),
        edits in proptest::collection::vec(text_edit(), 0..5),
        noise in any::<String>(),
    ) {
        let base = if which { HEADER_PAGE } else { HEADER_EVENT };
        for text in [mutated(base, &edits), noise] {
            if let Ok(l) = PageLayout::parse(&text) {
                // A layout that parsed describes a page one can allocate
                // and decode.
                prop_assert!(l.page_size() <= (1 << 27) + 4096);
                // (At most 64 KiB of it: a shorter slice is a case too.)
                check_page(&vec![0xa5; l.page_size().min(1 << 16)], &l, &header());
            }
            if let Ok(h) = HeaderLayout::parse(&text) {
                check_page(&vec![0x5a; 4096], &layout(), &h);
            }
        }
    }

    #[test]
    fn arbitrary_pages_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        commit in prop_oneof![any::<u64>(), 0u64..600, Just(u64::MAX)],
        lost in 0u64..4,
        full in any::<bool>(),
    ) {
        let l = layout();
        let h = header();
        // Arbitrary bytes as they are (usually a short page) …
        check_page(&bytes, &l, &h);
        // … and as the start of a whole page with a chosen commit.
        if full {
            let mut page = bytes.clone();
            page.resize(l.page_size(), 0);
            if page.len() >= 16 {
                page[8..16].copy_from_slice(&(commit | (lost << 30)).to_ne_bytes());
            }
            check_page(&page, &l, &h);
        }
    }

    #[test]
    fn built_pages_decode_exactly_then_survive_damage(
        ops in proptest::collection::vec(op(), 0..40),
        timestamp in prop_oneof![any::<u64>(), 0u64..1_000_000],
        commit_lie in prop_oneof![Just(None), (0u64..5000).prop_map(Some), any::<u64>().prop_map(Some)],
        missed in 0u64..4,
        damage in proptest::collection::vec(byte_edit(), 0..4),
    ) {
        let l = layout();
        let h = header();
        let mut b = Page::new(l);
        for o in &ops {
            b.op(o);
        }
        let honest = b.data.len().min(l.data_size) as u64;
        let page = b.build(timestamp, honest | (missed << 30), 1234);
        let got = check_page(&page, &l, &h).expect("a whole page decodes");
        // Without raw records, time stamps or a too-long page, decoding
        // gives back exactly what was written.
        let plain = ops.iter().all(|o| !matches!(o, Op::Raw(..) | Op::Stamp(_)));
        if plain && b.data.len() <= l.data_size {
            let mut want = Vec::new();
            let mut t = timestamp;
            for o in &ops {
                match *o {
                    Op::Small(d, n) => {
                        t = t.wrapping_add(d.into());
                        want.push((t, vec![n; 4 * usize::from(n)]));
                    }
                    Op::Long(d, n) => {
                        t = t.wrapping_add(d.into());
                        want.push((t, vec![n; 4 * usize::from(n)]));
                    }
                    Op::Extend(x) => t = t.wrapping_add(x),
                    Op::Padding(d, _) if d != 1 => t = t.wrapping_add(d.into()),
                    Op::Padding(..) => {}
                    Op::End => break,
                    Op::Raw(..) | Op::Stamp(_) => unreachable!(),
                }
            }
            prop_assert_eq!(&got, &want);
        }

        // Lies and damage: anything goes but a panic.
        let mut page = page;
        if let Some(c) = commit_lie {
            page[8..16].copy_from_slice(&c.to_ne_bytes());
        }
        for d in &damage {
            apply_bytes(&mut page, d);
        }
        check_page(&page, &l, &h);
    }

    #[test]
    fn any_layout_and_header_encoding_never_panic(
        ts in prop_oneof![0usize..64, any::<usize>()],
        commit in prop_oneof![0usize..64, any::<usize>()],
        commit_size in prop_oneof![Just(4usize), Just(8), any::<usize>()],
        data_offset in prop_oneof![0usize..64, any::<usize>()],
        data_size in prop_oneof![0usize..8192, any::<usize>()],
        padding in 0u32..40,
        time_extend in 0u32..40,
        time_stamp in 0u32..40,
        data_max_type_len in prop_oneof![0u32..40, any::<u32>()],
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        // The decoder takes its layouts as plain structs: it must hold up
        // even on ones the parsers would refuse.
        let l = PageLayout {
            timestamp_offset: ts,
            commit_offset: commit,
            commit_size,
            data_offset,
            data_size,
        };
        let h = HeaderLayout {
            padding,
            time_extend,
            time_stamp,
            data_max_type_len,
        };
        let mut n = 0usize;
        if let Ok(info) = decode_page(&bytes, &l, &h, &mut |_, _| n += 1) {
            prop_assert_eq!(info.records, n);
            prop_assert!(n <= bytes.len() / 8);
        }
        // And on a parsed layout of that shape, when it parses.
        let text = header_page_text(ts % 64, commit % 64, commit_size, data_offset % 64, data_size);
        if let Ok(l) = PageLayout::parse(&text) {
            let mut page = bytes;
            page.resize(l.page_size(), 0);
            check_page(&page, &l, &header());
        }
    }
}

// ---------------------------------------------------------------------
// The assembler.

/// Answers every other thread.
struct OddTgids;

impl TgidSource for OddTgids {
    fn tgid(&mut self, tid: u32) -> Option<u32> {
        (tid % 2 == 1).then_some(tid.wrapping_add(1000))
    }
}

fn assembler(f: &[EventFormat; 6], kernel: bool, user: bool) -> Option<Assembler> {
    let sched = SchedFields::new(&f[0], &f[1]).ok()?;
    let process = ProcessFormats::new(&f[2], &f[3]).ok();
    let stacks = StackFormats::new(&f[4], &f[5]).ok()?;
    // An empty ProbeRanges: nothing trimmed, and kallsyms never read.
    Some(Assembler::new(
        sched,
        stacks,
        process,
        kernel,
        user,
        Some(ProbeRanges::default()),
    ))
}

#[derive(Clone, Debug)]
enum Entry {
    Valid {
        kind: u8,
        pid: u32,
        frames: Vec<u64>,
        edits: Vec<ByteEdit>,
    },
    Noise(Vec<u8>),
}

fn entry_strategy() -> impl Strategy<Value = Entry> {
    prop_oneof![
        4 => (
            any::<u8>(),
            0u32..4,
            proptest::collection::vec(prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()], 0..12),
            proptest::collection::vec(byte_edit(), 0..3),
        )
            .prop_map(|(kind, pid, frames, edits)| Entry::Valid { kind, pid, frames, edits }),
        1 => proptest::collection::vec(any::<u8>(), 0..96).prop_map(Entry::Noise),
    ]
}

/// Pushes `entries` (cpu, time, entry) through `asm`, flushing now and
/// then; returns the events completed.
fn run(asm: &mut Assembler, entries: &[(u32, u64, Entry)], flush_every: usize) -> Vec<Event> {
    let mut out = Vec::new();
    let mut tgids = OddTgids;
    for (i, (cpu, time, e)) in entries.iter().enumerate() {
        let raw = match e {
            Entry::Valid {
                kind,
                pid,
                frames,
                edits,
            } => {
                let mut raw = valid_entry(*kind, *pid, frames, b"/usr/bin/true\0");
                for d in edits {
                    apply_bytes(&mut raw, d);
                }
                raw
            }
            Entry::Noise(b) => b.clone(),
        };
        asm.push(*cpu, *time, &raw, &mut tgids, &mut |ev| out.push(ev));
        if flush_every > 0 && i % flush_every == 0 {
            asm.flush(*time, &mut tgids, &mut |ev| out.push(ev));
        }
    }
    asm.flush(u64::MAX, &mut tgids, &mut |ev| out.push(ev));
    out
}

fn check_events(events: &[Event], pushed: usize) {
    assert!(events.len() <= pushed);
    for ev in events {
        let frames = match &ev.kind {
            EventKind::Switch(s) => s.stack.kernel().len() + s.stack.user().len(),
            EventKind::Waking(w) => w.stack.kernel().len() + w.stack.user().len(),
            _ => 0,
        };
        // At most one kernel_stack and one user_stack entry's worth.
        assert!(frames <= 2 * 64, "{frames} frames");
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn assembler_survives_hostile_entries(
        entries in proptest::collection::vec(
            (0u32..3, prop_oneof![0u64..100, any::<u64>()], entry_strategy()),
            0..24,
        ),
        kernel in any::<bool>(),
        user in any::<bool>(),
        flush_every in 0usize..5,
    ) {
        let f = formats();
        let mut asm = assembler(&f.all, kernel, user).expect("fixture formats");
        let events = run(&mut asm, &entries, flush_every);
        check_events(&events, entries.len());
        let s = asm.stats();
        prop_assert!(s.malformed + s.foreign + s.orphan_stacks + events.len() as u64
            <= 2 * entries.len() as u64);
    }

    #[test]
    fn assembler_on_lying_formats_never_panics(
        which in 0usize..FORMAT_TEXTS.len(),
        edits in proptest::collection::vec(text_edit(), 1..4),
        entries in proptest::collection::vec((0u32..2, 0u64..100, entry_strategy()), 0..16),
    ) {
        // The formats say one thing, the entries (laid out by the real
        // formats) another.
        let f = formats();
        let mut all = f.all.clone();
        let Ok(fmt) = EventFormat::parse(&mutated(FORMAT_TEXTS[which], &edits)) else {
            return Ok(());
        };
        all[which] = fmt;
        let Some(mut asm) = assembler(&all, true, true) else {
            return Ok(());
        };
        let events = run(&mut asm, &entries, 3);
        prop_assert!(events.len() <= entries.len());
    }
}
