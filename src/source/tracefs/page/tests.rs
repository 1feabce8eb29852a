//! Tests of the header layouts and the page walk: the fixture headers,
//! pages built byte by byte, and malformed or truncated input.

use super::*;

const HEADER_PAGE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tracefs/events/header_page"
));
const HEADER_EVENT: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tracefs/events/header_event"
));

fn layout() -> PageLayout {
    PageLayout::parse(HEADER_PAGE).unwrap()
}

fn header() -> HeaderLayout {
    HeaderLayout::parse(HEADER_EVENT).unwrap()
}

/// Inverse of `split_header`.
fn encode_header(type_len: u32, delta: u32) -> u32 {
    assert!(type_len < 32 && delta < (1 << 27));
    if cfg!(target_endian = "big") {
        (type_len << 27) | delta
    } else {
        type_len | (delta << 5)
    }
}

/// Builds a page the way the kernel lays it out.
struct PageBuilder {
    layout: PageLayout,
    timestamp: u64,
    data: Vec<u8>,
    commit: Option<u64>,
    flags: u64,
    missed_count: Option<u64>,
}

impl PageBuilder {
    fn new(timestamp: u64) -> PageBuilder {
        PageBuilder::with_layout(layout(), timestamp)
    }

    fn with_layout(layout: PageLayout, timestamp: u64) -> PageBuilder {
        PageBuilder {
            layout,
            timestamp,
            data: Vec::new(),
            commit: None,
            flags: 0,
            missed_count: None,
        }
    }

    fn word(&mut self, w: u32) -> &mut Self {
        self.data.extend_from_slice(&w.to_ne_bytes());
        self
    }

    fn header(&mut self, type_len: u32, delta: u32) -> &mut Self {
        self.word(encode_header(type_len, delta))
    }

    /// A data record with its length in type_len (payload a multiple of
    /// 4, 4..=112 bytes).
    fn small(&mut self, delta: u32, payload: &[u8]) -> &mut Self {
        assert!(payload.len().is_multiple_of(4) && (4..=112).contains(&payload.len()));
        self.header(payload.len() as u32 / 4, delta);
        self.data.extend_from_slice(payload);
        self
    }

    /// A data record with its length in array[0].
    fn long(&mut self, delta: u32, payload: &[u8]) -> &mut Self {
        assert!(payload.len().is_multiple_of(4));
        self.header(0, delta);
        self.word(payload.len() as u32 + 4);
        self.data.extend_from_slice(payload);
        self
    }

    fn extend(&mut self, delta: u64) -> &mut Self {
        self.header(30, (delta & ((1 << 27) - 1)) as u32);
        self.word((delta >> 27) as u32)
    }

    /// An absolute time stamp of `abs`'s low 59 bits.
    fn stamp(&mut self, abs: u64) -> &mut Self {
        self.header(31, (abs & ((1 << 27) - 1)) as u32);
        self.word(((abs >> 27) & 0xffff_ffff) as u32)
    }

    /// A padding (discarded event) of `total` bytes, header included.
    fn padding(&mut self, delta: u32, total: usize) -> &mut Self {
        assert!(delta != 0 && total >= 8 && total.is_multiple_of(4));
        self.header(29, delta);
        self.word(total as u32 - 4);
        self.data.resize(self.data.len() + total - 8, 0xee);
        self
    }

    fn null_padding(&mut self) -> &mut Self {
        self.header(29, 0)
    }

    fn garbage(&mut self, n: usize) -> &mut Self {
        self.data.resize(self.data.len() + n, 0xab);
        self
    }

    fn commit(&mut self, c: u64) -> &mut Self {
        self.commit = Some(c);
        self
    }

    fn lost(&mut self, count: Option<u64>) -> &mut Self {
        self.flags |= RB_MISSED_EVENTS;
        if let Some(c) = count {
            self.flags |= RB_MISSED_STORED;
            self.missed_count = Some(c);
        }
        self
    }

    fn build(&self) -> Vec<u8> {
        let l = &self.layout;
        let mut page = vec![0u8; l.page_size()];
        page[l.timestamp_offset..l.timestamp_offset + 8]
            .copy_from_slice(&self.timestamp.to_ne_bytes());
        let len = self.commit.unwrap_or(self.data.len() as u64);
        let commit = len | self.flags;
        match l.commit_size {
            4 => page[l.commit_offset..l.commit_offset + 4]
                .copy_from_slice(&(commit as u32).to_ne_bytes()),
            _ => page[l.commit_offset..l.commit_offset + 8].copy_from_slice(&commit.to_ne_bytes()),
        }
        let n = self.data.len().min(l.data_size);
        page[l.data_offset..l.data_offset + n].copy_from_slice(&self.data[..n]);
        let at = l.data_offset + len as usize;
        if let Some(c) = self.missed_count
            && at + l.commit_size <= page.len()
        {
            match l.commit_size {
                4 => page[at..at + 4].copy_from_slice(&(c as u32).to_ne_bytes()),
                _ => page[at..at + 8].copy_from_slice(&c.to_ne_bytes()),
            }
        }
        page
    }
}

fn decode(page: &[u8]) -> (PageInfo, Vec<(u64, Vec<u8>)>) {
    decode_with(page, &layout(), &header())
}

fn decode_with(
    page: &[u8],
    layout: &PageLayout,
    header: &HeaderLayout,
) -> (PageInfo, Vec<(u64, Vec<u8>)>) {
    let mut out = Vec::new();
    let info = decode_page(page, layout, header, &mut |t, p| out.push((t, p.to_vec()))).unwrap();
    assert_eq!(info.records, out.len());
    (info, out)
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

#[test]
fn fixture_header_page() {
    let l = layout();
    assert_eq!(
        l,
        PageLayout {
            timestamp_offset: 0,
            commit_offset: 8,
            commit_size: 8,
            data_offset: 16,
            data_size: 4080,
        }
    );
    assert_eq!(l.page_size(), 4096);
}

#[test]
fn fixture_header_event() {
    assert_eq!(
        header(),
        HeaderLayout {
            padding: 29,
            time_extend: 30,
            time_stamp: 31,
            data_max_type_len: 28,
        }
    );
}

#[test]
fn larger_subbuffer_and_32_bit_commit() {
    let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
                    \tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\
                    \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
                    \tfield: char data;\toffset:12;\tsize:16372;\tsigned:0;\n";
    let l = PageLayout::parse(text).unwrap();
    assert_eq!(
        (l.commit_size, l.data_offset, l.page_size()),
        (4, 12, 16384)
    );
    let big = bytes(9000, 1);
    let page = PageBuilder::with_layout(l, 1000)
        .small(3, &[1, 2, 3, 4])
        .long(4, &big)
        .lost(Some(77))
        .build();
    let (info, recs) = decode_with(&page, &l, &header());
    assert_eq!(info.missed, Missed::Count(77));
    assert!(!info.truncated);
    assert_eq!(recs, vec![(1003, vec![1, 2, 3, 4]), (1007, big)]);
}

#[test]
fn small_data_records() {
    let p28 = bytes(112, 7);
    let page = PageBuilder::new(1_000_000)
        .small(0, &[1, 0, 0, 0])
        .small(5, &bytes(8, 20))
        .small((1 << 27) - 1, &p28)
        .build();
    let (info, recs) = decode(&page);
    assert_eq!(
        info,
        PageInfo {
            timestamp: 1_000_000,
            missed: Missed::None,
            records: 3,
            truncated: false,
        }
    );
    assert_eq!(recs[0], (1_000_000, vec![1, 0, 0, 0]));
    assert_eq!(recs[1], (1_000_005, bytes(8, 20)));
    assert_eq!(recs[2], (1_000_005 + (1 << 27) - 1, p28));
}

#[test]
fn long_data_records() {
    let big = bytes(200, 3);
    let page = PageBuilder::new(50)
        .long(2, &big)
        // What 8-byte-aligned architectures write for small events.
        .long(3, &[9, 9, 9, 9, 8, 8, 8, 8])
        // Empty payload: array[0] == 4.
        .long(0, &[])
        .small(1, &[5, 5, 5, 5])
        .build();
    let (info, recs) = decode(&page);
    assert!(!info.truncated);
    assert_eq!(
        recs,
        vec![
            (52, big),
            (55, vec![9, 9, 9, 9, 8, 8, 8, 8]),
            (55, vec![]),
            (56, vec![5, 5, 5, 5]),
        ]
    );
}

#[test]
fn time_extend_adds_to_running_time() {
    let ext = (1u64 << 40) + 12345;
    let page = PageBuilder::new(1000)
        .small(10, &[1, 1, 1, 1])
        .extend(ext)
        .small(3, &[2, 2, 2, 2])
        .extend(5)
        .long(0, &[3, 3, 3, 3])
        .build();
    let (info, recs) = decode(&page);
    assert_eq!(info.records, 3);
    assert_eq!(recs[0].0, 1010);
    assert_eq!(recs[1].0, 1010 + ext + 3);
    assert_eq!(recs[2].0, 1010 + ext + 3 + 5);
}

#[test]
fn absolute_time_stamp_replaces_running_time() {
    let abs = (1u64 << 58) + (7 << 27) + 99;
    let page = PageBuilder::new(1000)
        .small(10, &[1, 1, 1, 1])
        .stamp(abs)
        .small(0, &[2, 2, 2, 2])
        .small(7, &[3, 3, 3, 3])
        .build();
    let (_, recs) = decode(&page);
    let times: Vec<u64> = recs.iter().map(|r| r.0).collect();
    assert_eq!(times, vec![1010, abs, abs + 7]);
}

#[test]
fn absolute_time_stamp_takes_top_bits_from_running_time() {
    // A clock with some of the 5 top bits set.
    let msb = 0x28u64 << 56;
    let base = msb | 1_000;
    let page = PageBuilder::new(base)
        .stamp(5_000)
        .small(1, &[1, 1, 1, 1])
        .build();
    let (_, recs) = decode(&page);
    assert_eq!(recs[0].0, msb | 5_001);

    // The low 59 bits wrapped since the running time: carry into the top.
    let low = (1u64 << 59) - 10;
    let page = PageBuilder::new((1 << 59) | low)
        .stamp(5)
        .small(0, &[1, 1, 1, 1])
        .build();
    let (_, recs) = decode(&page);
    assert_eq!(recs[0].0, (2 << 59) | 5);

    // All top bits set and wrapping: no overflow panic, wraps around.
    let page = PageBuilder::new(u64::MAX - 3)
        .stamp(5)
        .small(0, &[1, 1, 1, 1])
        .build();
    let (_, recs) = decode(&page);
    assert_eq!(recs[0].0, 5);

    // No top bits: the stamp is taken as is.
    assert_eq!(absolute_time(123, 1 << 58), 123);
}

#[test]
fn discarded_events_are_skipped_and_their_delta_counted() {
    let page = PageBuilder::new(100)
        .small(5, &[1, 1, 1, 1])
        .padding(10, 16)
        .small(3, &[2, 2, 2, 2])
        // delta 1 is what the kernel forces for a delta of 0: not added.
        .padding(1, 8)
        .small(2, &[3, 3, 3, 3])
        .padding(4, 120)
        .build();
    let (info, recs) = decode(&page);
    assert!(!info.truncated);
    assert_eq!(
        recs,
        vec![
            (105, vec![1, 1, 1, 1]),
            (118, vec![2, 2, 2, 2]),
            (120, vec![3, 3, 3, 3]),
        ]
    );
}

#[test]
fn null_padding_ends_the_page() {
    let page = PageBuilder::new(100)
        .small(5, &[1, 1, 1, 1])
        .null_padding()
        .garbage(64)
        .build();
    let (info, recs) = decode(&page);
    assert_eq!(recs, vec![(105, vec![1, 1, 1, 1])]);
    assert!(!info.truncated);
    // Also when it is the last word of the data.
    let page = PageBuilder::new(100)
        .small(5, &[1, 1, 1, 1])
        .null_padding()
        .build();
    let (info, _) = decode(&page);
    assert_eq!((info.records, info.truncated), (1, false));
}

#[test]
fn missed_events() {
    let mut b = PageBuilder::new(7);
    b.small(1, &[1, 1, 1, 1]);
    assert_eq!(decode(&b.build()).0.missed, Missed::None);

    let mut unknown = PageBuilder::new(7);
    unknown.small(1, &[1, 1, 1, 1]).lost(None);
    let (info, recs) = decode(&unknown.build());
    assert_eq!(info.missed, Missed::Unknown);
    assert_eq!(recs.len(), 1);

    let mut counted = PageBuilder::new(7);
    counted.small(1, &[1, 1, 1, 1]).lost(Some(1234));
    let (info, recs) = decode(&counted.build());
    assert_eq!(info.missed, Missed::Count(1234));
    assert_eq!(recs, vec![(8, vec![1, 1, 1, 1])]);
    assert!(!info.truncated);

    // STORED claimed, but no room for the count after a full page.
    let mut full = PageBuilder::new(7);
    full.small(1, &[1, 1, 1, 1]).padding(1, 4080 - 8).lost(None);
    full.flags |= RB_MISSED_STORED;
    let (info, recs) = decode(&full.build());
    assert_eq!(info.missed, Missed::Unknown);
    assert_eq!((recs.len(), info.truncated), (1, false));

    // STORED without EVENTS (never written by the kernel): no loss.
    let mut odd = PageBuilder::new(7);
    odd.small(1, &[1, 1, 1, 1]);
    odd.flags |= RB_MISSED_STORED;
    let (info, recs) = decode(&odd.build());
    assert_eq!((info.missed, recs.len()), (Missed::None, 1));
}

#[test]
fn impossible_commit_is_a_truncated_empty_page() {
    // Data length one past the data area.
    let page = PageBuilder::new(7)
        .small(1, &[1, 1, 1, 1])
        .commit(4081)
        .build();
    let (info, recs) = decode(&page);
    assert!(recs.is_empty());
    assert!(info.truncated);
    assert_eq!(info.timestamp, 7);

    // Bits above the flags set in a 64-bit commit.
    let page = PageBuilder::new(7)
        .small(1, &[1, 1, 1, 1])
        .commit((1 << 32) | 8)
        .lost(Some(3))
        .build();
    let (info, recs) = decode(&page);
    assert!(recs.is_empty() && info.truncated);
    assert_eq!(info.missed, Missed::Unknown);

    // Exactly the data area is fine.
    let page = PageBuilder::new(7)
        .small(1, &[1, 1, 1, 1])
        .padding(1, 4080 - 8)
        .build();
    let (info, recs) = decode(&page);
    assert_eq!((recs.len(), info.truncated), (1, false));
}

#[test]
fn record_running_past_commit_truncates() {
    // A small record whose type_len says 40 bytes, with only 20 committed.
    let mut b = PageBuilder::new(100);
    b.small(5, &[1, 1, 1, 1]).header(10, 1).garbage(16);
    let (info, recs) = decode(&b.build());
    assert_eq!(recs, vec![(105, vec![1, 1, 1, 1])]);
    assert!(info.truncated);

    // A long record whose array[0] runs past the commit.
    let mut b = PageBuilder::new(100);
    b.small(5, &[1, 1, 1, 1]).header(0, 1).word(4000).garbage(8);
    let (info, recs) = decode(&b.build());
    assert_eq!((recs.len(), info.truncated), (1, true));

    // A padding running past the commit.
    let mut b = PageBuilder::new(100);
    b.small(5, &[1, 1, 1, 1]).header(29, 3).word(64);
    let (info, recs) = decode(&b.build());
    assert_eq!((recs.len(), info.truncated), (1, true));

    // A time extend cut in half.
    let mut b = PageBuilder::new(100);
    b.small(5, &[1, 1, 1, 1]).header(30, 3);
    let (info, recs) = decode(&b.build());
    assert_eq!((recs.len(), info.truncated), (1, true));

    // A commit that is not a multiple of 4.
    let page = PageBuilder::new(100)
        .small(5, &[1, 1, 1, 1])
        .small(5, &[1, 1, 1, 1])
        .commit(10)
        .build();
    let (info, recs) = decode(&page);
    assert_eq!((recs.len(), info.truncated), (1, true));
}

#[test]
fn nonsensical_lengths_truncate() {
    for a0 in [0u32, 3, 6, 13] {
        let mut b = PageBuilder::new(100);
        b.small(5, &[1, 1, 1, 1]).header(0, 1).word(a0).garbage(32);
        let (info, recs) = decode(&b.build());
        assert_eq!(
            (recs.len(), info.truncated),
            (1, true),
            "type_len 0, a0 {a0}"
        );

        let mut b = PageBuilder::new(100);
        b.small(5, &[1, 1, 1, 1]).header(29, 1).word(a0).garbage(32);
        let (info, recs) = decode(&b.build());
        assert_eq!((recs.len(), info.truncated), (1, true), "padding, a0 {a0}");
    }
}

#[test]
fn undefined_record_type_truncates() {
    let h = HeaderLayout {
        padding: 29,
        time_extend: 30,
        time_stamp: 31,
        data_max_type_len: 20,
    };
    let mut b = PageBuilder::new(100);
    b.small(5, &[1, 1, 1, 1]).header(25, 1).garbage(100);
    let (info, recs) = decode_with(&b.build(), &layout(), &h);
    assert_eq!((recs.len(), info.truncated), (1, true));
}

#[test]
fn short_pages() {
    let l = layout();
    let h = header();
    let mut sink = |_: u64, _: &[u8]| panic!("no record expected");
    for n in [0, 1, 8, 15] {
        let err = decode_page(&vec![0u8; n], &l, &h, &mut sink).unwrap_err();
        assert!(err.to_string().contains("shorter than"), "{err}");
    }
    // A header and no data: an empty page.
    let info = decode_page(&[0u8; 16], &l, &h, &mut sink).unwrap();
    assert_eq!((info.records, info.truncated), (0, false));

    // A slice shorter than the committed data: truncated.
    let page = PageBuilder::new(1)
        .small(1, &[1, 1, 1, 1])
        .small(1, &[2, 2, 2, 2])
        .build();
    let (info, recs) = decode(&page[..16 + 8]);
    assert_eq!((recs.len(), info.truncated), (1, true));
}

#[test]
fn layout_fields_outside_the_page_are_errors_not_panics() {
    let l = PageLayout {
        timestamp_offset: 100,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
        data_size: 4080,
    };
    let mut sink = |_: u64, _: &[u8]| {};
    assert!(decode_page(&[0u8; 64], &l, &header(), &mut sink).is_err());
    let l = PageLayout {
        commit_size: 3,
        ..layout()
    };
    assert!(decode_page(&[0u8; 4096], &l, &header(), &mut sink).is_err());
}

/// A page with one of everything, its count of data records, and the
/// length of its committed data.
fn busy_page() -> (Vec<u8>, usize, usize) {
    let mut b = PageBuilder::new((0x10u64 << 56) | 12345);
    b.small(1, &bytes(16, 1))
        .extend(1 << 35)
        .long(2, &bytes(300, 2))
        .padding(9, 24)
        .stamp(777 << 20)
        .small(3, &bytes(112, 3))
        .padding(1, 12)
        .long(0, &bytes(8, 4))
        .small(4, &bytes(4, 5))
        .lost(Some(42));
    let len = b.data.len();
    (b.build(), 5, len)
}

#[test]
fn every_truncation_of_a_page_decodes_without_panic() {
    let (page, n, len) = busy_page();
    let (full, recs) = decode(&page);
    assert_eq!((full.records, full.truncated), (n, false));
    assert_eq!(full.missed, Missed::Count(42));
    let l = layout();
    let h = header();
    for cut in 0..=page.len() {
        let mut got = Vec::new();
        let r = decode_page(&page[..cut], &l, &h, &mut |t, p| got.push((t, p.to_vec())));
        if cut < l.data_offset {
            assert!(r.is_err(), "cut {cut}");
            continue;
        }
        let info = r.unwrap();
        assert_eq!(info.records, got.len());
        // Whatever was delivered is a prefix of the full decode.
        assert_eq!(got[..], recs[..got.len()], "cut {cut}");
        if cut < l.data_offset + len {
            assert!(info.truncated, "cut {cut}");
        } else {
            assert_eq!(info.records, n, "cut {cut}");
            assert!(!info.truncated, "cut {cut}");
        }
    }
}

#[test]
fn every_commit_length_and_garbled_bytes_decode_without_panic() {
    let (page, _, len) = busy_page();
    let l = layout();
    let h = header();
    let mut sink = |_: u64, _: &[u8]| {};
    // Every commit value up to past the data area.
    for c in 0..=(len as u64 + 16) {
        let mut p = page.clone();
        p[8..16].copy_from_slice(&(c | RB_MISSED_EVENTS | RB_MISSED_STORED).to_ne_bytes());
        decode_page(&p, &l, &h, &mut sink).unwrap();
    }
    // Deterministic pseudo-random corruption of header and data words.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let mut p = page.clone();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = 16 + (x as usize % (len + 8));
            p[at] = (x >> 32) as u8;
        }
        let info = decode_page(&p, &l, &h, &mut sink).unwrap();
        assert!(info.records <= len / 4);
    }
}

#[cfg(target_endian = "little")]
#[test]
fn record_header_bit_layout_on_little_endian() {
    // type_len 2 in the low 5 bits, time_delta 3 above them.
    let w: u32 = 2 | (3 << 5);
    let mut page = vec![0u8; 4096];
    page[0..8].copy_from_slice(&10u64.to_le_bytes());
    page[8..16].copy_from_slice(&12u64.to_le_bytes());
    page[16..20].copy_from_slice(&w.to_le_bytes());
    page[20..28].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let (info, recs) = decode(&page);
    assert_eq!(recs, vec![(13, vec![1, 2, 3, 4, 5, 6, 7, 8])]);
    assert!(!info.truncated);
}

#[test]
fn malformed_header_page() {
    let ok_lines = [
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;",
        "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;",
        "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;",
    ];
    let with = |i: usize, line: &str| {
        let mut v = ok_lines.to_vec();
        v[i] = line;
        v.join("\n")
    };
    let bad = [
        // missing fields
        ok_lines[..2].join("\n"),
        ok_lines[1..].join("\n"),
        [ok_lines[0], ok_lines[2]].join("\n"),
        String::new(),
        // unparsable numbers / parts
        with(2, "\tfield: char data;\toffset:x;\tsize:4080;"),
        with(2, "\tfield: char data;\toffset:16;\tsize:-1;"),
        with(2, "\tfield: char data;\toffset:16;"),
        with(1, "\tfield: local_t commit;\toffset 8;\tsize:8;"),
        with(1, "\tfield: commit;\toffset:8;\tsize:8;"),
        // absurd values
        with(0, "\tfield: u64 timestamp;\toffset:0;\tsize:4;"),
        with(1, "\tfield: local_t commit;\toffset:8;\tsize:3;"),
        with(1, "\tfield: local_t commit;\toffset:4;\tsize:8;"),
        with(1, "\tfield: local_t commit;\toffset:12;\tsize:8;"),
        with(
            0,
            "\tfield: u64 timestamp;\toffset:18446744073709551615;\tsize:8;",
        ),
        with(2, "\tfield: char data;\toffset:16;\tsize:0;"),
        with(2, "\tfield: char data;\toffset:16;\tsize:4082;"),
        with(2, "\tfield: char data;\toffset:16;\tsize:999999999999;"),
        with(2, "\tfield: char data;\toffset:14;\tsize:4080;"),
        with(2, "\tfield: char data;\toffset:99999;\tsize:4080;"),
        // duplicate
        [ok_lines.join("\n").as_str(), ok_lines[2]].join("\n"),
    ];
    for text in bad {
        assert!(PageLayout::parse(&text).is_err(), "accepted:\n{text}");
    }
    assert!(PageLayout::parse(&ok_lines.join("\n")).is_ok());
}

#[test]
fn malformed_header_event() {
    let replace = |from: &str, to: &str| {
        assert!(HEADER_EVENT.contains(from));
        HEADER_EVENT.replace(from, to)
    };
    let old_format = "\ttype        :    2 bits\n\tlen         :    3 bits\n\
                          \ttime_delta  :   27 bits\n\tarray       :   32 bits\n\n\
                          \tpadding     : type == 0\n\ttime_extend : type == 1\n\
                          \tdata        : type == 3\n";
    let bad = [
        replace("5 bits", "6 bits"),
        replace("27 bits", "26 bits"),
        replace("32 bits", "64 bits"),
        replace("\ttype_len    :    5 bits\n", ""),
        replace("\ttime_delta  :   27 bits\n", ""),
        replace("\tpadding     : type == 29\n", ""),
        replace("\ttime_extend : type == 30\n", ""),
        replace("\ttime_stamp : type == 31\n", ""),
        replace("\tdata max type_len  == 28\n", ""),
        replace("type == 29", "type == twenty-nine"),
        replace("type == 29", "type = 29"),
        replace("5 bits", "five bits"),
        replace("type == 29", "type == 30"),
        replace("type == 31", "type == 32"),
        replace("type == 29", "type == 12"),
        replace("== 28", "== 0"),
        replace("== 28", "== x"),
        old_format.to_string(),
        String::new(),
    ];
    for text in bad {
        assert!(HeaderLayout::parse(&text).is_err(), "accepted:\n{text}");
    }
}
