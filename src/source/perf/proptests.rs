//! Property tests: hostile bytes given to the perf record decoder
//! ([`super::record::Decoder::decode`]) and to the ring reader
//! ([`super::ring::extract_records`]) never panic, never loop, never
//! allocate more than the bytes present, and end in a decoded record or an
//! error (a `corrupt` flag for the ring).
//!
//! Inputs are arbitrary bytes, and valid records built as the kernel lays
//! them out (as the unit tests of `record.rs` and `ring.rs` build them) then
//! mutated: bytes and whole words overwritten with boundary values, cut,
//! lengthened, with a header `size` that lies.
//!
//! Seed, case counts and failure persistence: see
//! [`crate::proptest_config`] (fixed seed, no regression files).

use std::sync::OnceLock;

use proptest::prelude::*;

use super::record::{Decoder, Tracepoint};
use super::ring::{HEADER_SIZE, extract_records};
use super::sizing::max_sample_size;
use super::sys::*;
use super::wire::SUPPORTED_SAMPLE_TYPE;
use crate::event::EventKind;
use crate::proptest_config::config;
use crate::source::tracepoint::{EventFormat, Tracefs};

/// The sched_switch and sched_waking fixtures, read once.
fn formats() -> &'static (EventFormat, EventFormat) {
    static F: OnceLock<(EventFormat, EventFormat)> = OnceLock::new();
    F.get_or_init(|| {
        let t = Tracefs::fixtures();
        (
            t.event_format("sched", "sched_switch")
                .expect("sched_switch fixture"),
            t.event_format("sched", "sched_waking")
                .expect("sched_waking fixture"),
        )
    })
}

/// What the backend asks for system-wide, and what per-task tracing adds.
const SYSTEM_WIDE: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN | SAMPLE_RAW;
const PER_TASK: u64 = SYSTEM_WIDE | SAMPLE_READ;
/// What `--call-graph dwarf` adds.
const DWARF: u64 = SAMPLE_REGS_USER | SAMPLE_STACK_USER;

/// The sample types the backend can ask for, plus one with every bit the
/// decoder walks.
const SAMPLE_TYPES: [u64; 6] = [
    SYSTEM_WIDE,
    SYSTEM_WIDE | DWARF,
    PER_TASK,
    PER_TASK | DWARF,
    SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW,
    SUPPORTED_SAMPLE_TYPE,
];

fn decoder(st: u64) -> Decoder {
    let (sw, wk) = formats();
    let mut d = Decoder::new(st, sw, wk).expect("decoder for the fixtures");
    d.add_id(1001, Tracepoint::Switch);
    d.add_id(1002, Tracepoint::Waking);
    d
}

/// Record types worth aiming at: every one the decoder walks, and others.
const RECORD_TYPES: [u32; 11] = [
    RECORD_SAMPLE,
    RECORD_FORK,
    RECORD_EXIT,
    RECORD_COMM,
    RECORD_MMAP,
    RECORD_MMAP2,
    RECORD_LOST,
    RECORD_LOST_SAMPLES,
    RECORD_SWITCH_CPU_WIDE,
    5,
    0xffff_ffff,
];

fn header(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len());
    r.extend_from_slice(&ty.to_ne_bytes());
    r.extend_from_slice(&misc.to_ne_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
    r.extend_from_slice(body);
    r
}

/// Sets the header's `size` to the record's length (when it fits a u16).
fn fix_size(rec: &mut [u8]) {
    if rec.len() >= 8
        && let Ok(n) = u16::try_from(rec.len())
    {
        rec[6..8].copy_from_slice(&n.to_ne_bytes());
    }
}

/// A payload of `fmt` with its `common_type` set.
fn payload(fmt: &EventFormat, fill: u8) -> Vec<u8> {
    let mut raw = vec![fill; fmt.fixed_size()];
    let ct = fmt.field("common_type").expect("common_type");
    raw[ct.offset..ct.offset + 2].copy_from_slice(&(fmt.id as u16).to_ne_bytes());
    raw
}

/// Bytes of user stack a sample of these tests copies (`STACK_USER`), of
/// which the first [`STACK_DYN`] hold the copy.
const STACK_COPY: usize = 64;
const STACK_DYN: usize = 40;

/// A sample body walked in `st` order.
fn sample_body(st: u64, id: u64, ips: &[u64], raw: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    let u64s = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_ne_bytes());
    if st & SAMPLE_IDENTIFIER != 0 {
        u64s(&mut b, id);
    }
    if st & SAMPLE_IP != 0 {
        u64s(&mut b, 0x401000);
    }
    if st & SAMPLE_TID != 0 {
        u64s(&mut b, 7 | (8 << 32));
    }
    if st & SAMPLE_TIME != 0 {
        u64s(&mut b, 123_456);
    }
    if st & SAMPLE_ADDR != 0 {
        u64s(&mut b, 0);
    }
    if st & SAMPLE_ID != 0 {
        u64s(&mut b, id);
    }
    if st & SAMPLE_STREAM_ID != 0 {
        u64s(&mut b, id);
    }
    if st & SAMPLE_CPU != 0 {
        u64s(&mut b, 1);
    }
    if st & SAMPLE_PERIOD != 0 {
        u64s(&mut b, 1);
    }
    if st & SAMPLE_READ != 0 {
        // The count, then time_running.
        u64s(&mut b, 1);
        u64s(&mut b, 100_000);
    }
    if st & SAMPLE_CALLCHAIN != 0 {
        u64s(&mut b, ips.len() as u64);
        for &ip in ips {
            u64s(&mut b, ip);
        }
    }
    let mut data = raw.to_vec();
    while !(4 + data.len()).is_multiple_of(8) {
        data.push(0);
    }
    b.extend_from_slice(&(data.len() as u32).to_ne_bytes());
    b.extend_from_slice(&data);
    if st & SAMPLE_REGS_USER != 0 {
        // PERF_SAMPLE_REGS_ABI_64, then BP, SP, IP.
        for v in [2, 0x7ffc_0000_0100, 0x7ffc_0000_0000, 0x401234] {
            u64s(&mut b, v);
        }
    }
    if st & SAMPLE_STACK_USER != 0 {
        u64s(&mut b, STACK_COPY as u64);
        b.extend((0..STACK_COPY).map(|i| i as u8));
        u64s(&mut b, STACK_DYN as u64);
    }
    b
}

/// The `sample_id` trailer for `st` (pid, tid, time, id…, cpu, identifier).
fn trailer(st: u64) -> Vec<u8> {
    let mut b = Vec::new();
    if st & SAMPLE_TID != 0 {
        b.extend_from_slice(&(10u64 | (11 << 32)).to_ne_bytes());
    }
    if st & SAMPLE_TIME != 0 {
        b.extend_from_slice(&5555u64.to_ne_bytes());
    }
    for bit in [SAMPLE_ID, SAMPLE_STREAM_ID] {
        if st & bit != 0 {
            b.extend_from_slice(&1001u64.to_ne_bytes());
        }
    }
    if st & SAMPLE_CPU != 0 {
        b.extend_from_slice(&1u64.to_ne_bytes());
    }
    if st & SAMPLE_IDENTIFIER != 0 {
        b.extend_from_slice(&1001u64.to_ne_bytes());
    }
    b
}

/// A valid record of one of the kinds the decoder handles (chosen by
/// `kind`), for sample type `st`.
fn valid_record(st: u64, kind: u8, ips: &[u64], name: &[u8]) -> Vec<u8> {
    let (sw, wk) = formats();
    let side = |fixed: &[u8]| {
        let mut b = fixed.to_vec();
        b.extend_from_slice(&trailer(st));
        b
    };
    let mut name = name.to_vec();
    name.push(0);
    while !name.len().is_multiple_of(8) {
        name.push(0);
    }
    match kind % 9 {
        0 => header(
            RECORD_SAMPLE,
            1,
            &sample_body(st, 1001, ips, &payload(sw, 0x41)),
        ),
        1 => header(
            RECORD_SAMPLE,
            1,
            &sample_body(st, 1002, ips, &payload(wk, 0x42)),
        ),
        // Unknown id: the payload's common_type decides.
        2 => header(RECORD_SAMPLE, 1, &sample_body(st, 7, ips, &payload(sw, 0))),
        3 => header(RECORD_FORK, 0, &side(&[1u8; 24])),
        4 => header(RECORD_EXIT, 0, &side(&[2u8; 24])),
        5 => {
            let mut b = vec![3u8; 8];
            b.extend_from_slice(&name);
            header(RECORD_COMM, RECORD_MISC_COMM_EXEC, &side(&b))
        }
        6 => {
            let mut b = vec![4u8; 8 + 24 + 24];
            b.extend_from_slice(&(libc::PROT_EXEC as u32).to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&name);
            header(RECORD_MMAP2, 2, &side(&b))
        }
        7 => header(RECORD_LOST, 0, &side(&[5u8; 16])),
        _ => header(RECORD_SWITCH_CPU_WIDE, 0, &side(&[6u8; 8])),
    }
}

/// Values that make length fields lie.
fn evil_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(7),
        Just(8),
        Just(u64::from(u16::MAX)),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX),
        Just(u64::MAX / 8 + 1),
        Just(1 << 61),
        Just(CONTEXT_KERNEL),
        Just(CONTEXT_USER),
        Just(CONTEXT_MAX),
        any::<u64>(),
        0u64..4096,
    ]
}

/// One change to a record.
#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite byte `at % len`.
    Byte(usize, u8),
    /// Overwrite the 8-byte word at `(at % len) & !7` (or what is left of it).
    Word(usize, u64),
    /// Overwrite the 4-byte word at `(at % len) & !3`.
    Half(usize, u32),
    /// Keep the first `at % (len + 1)` bytes.
    Cut(usize),
    /// Append bytes.
    Grow(Vec<u8>),
    /// Put a lying value in the header's `size`.
    Size(u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Byte(a, b)),
        (any::<usize>(), evil_u64()).prop_map(|(a, v)| Mutation::Word(a, v)),
        (any::<usize>(), evil_u64()).prop_map(|(a, v)| Mutation::Half(a, v as u32)),
        any::<usize>().prop_map(Mutation::Cut),
        proptest::collection::vec(any::<u8>(), 1..24).prop_map(Mutation::Grow),
        prop_oneof![
            Just(0u16),
            Just(1),
            Just(7),
            Just(8),
            Just(u16::MAX),
            any::<u16>()
        ]
        .prop_map(Mutation::Size),
    ]
}

fn apply(rec: &mut Vec<u8>, m: &Mutation) {
    let len = rec.len();
    match *m {
        Mutation::Byte(at, b) if len > 0 => rec[at % len] = b,
        Mutation::Word(at, v) if len > 0 => {
            let at = (at % len) & !7;
            let n = (len - at).min(8);
            rec[at..at + n].copy_from_slice(&v.to_ne_bytes()[..n]);
        }
        Mutation::Half(at, v) if len > 0 => {
            let at = (at % len) & !3;
            let n = (len - at).min(4);
            rec[at..at + n].copy_from_slice(&v.to_ne_bytes()[..n]);
        }
        Mutation::Cut(at) => rec.truncate(at % (len + 1)),
        Mutation::Grow(ref b) => rec.extend_from_slice(b),
        Mutation::Size(s) if len >= 8 => rec[6..8].copy_from_slice(&s.to_ne_bytes()),
        _ => {}
    }
}

fn callchain() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(
        prop_oneof![
            Just(CONTEXT_KERNEL),
            Just(CONTEXT_USER),
            0xffff_ffff_8100_0000u64..0xffff_ffff_8200_0000,
            0x40_0000u64..0x50_0000,
            any::<u64>(),
        ],
        0..12,
    )
}

/// Decodes and checks what came out against the bytes that went in.
fn check_decode(d: &mut Decoder, rec: &[u8]) {
    let Ok(Some(ev)) = d.decode(rec) else {
        return;
    };
    // Nothing decoded can be bigger than the record it came from.
    let frames = match &ev.kind {
        EventKind::Switch(s) => s.stack.kernel().len() + s.stack.user().len(),
        EventKind::Waking(w) => w.stack.kernel().len() + w.stack.user().len(),
        _ => 0,
    };
    assert!(
        frames * 8 <= rec.len(),
        "{frames} frames from {} bytes",
        rec.len()
    );
    let copy = match &ev.kind {
        EventKind::Switch(s) => s.user_copy.as_ref(),
        EventKind::Waking(w) => w.user_copy.as_ref(),
        _ => None,
    };
    if let Some(c) = copy {
        assert!(
            c.stack.len() + 32 <= rec.len(),
            "stack copy bigger than its record"
        );
    }
    if let EventKind::Mmap(m) = &ev.kind {
        assert!(m.path.len() <= rec.len() * 3, "path longer than its record");
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_never_panic(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut d = decoder(st);
        check_decode(&mut d, &bytes);
    }

    #[test]
    fn arbitrary_bodies_behind_a_consistent_header_never_panic(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        ty in proptest::sample::select(&RECORD_TYPES[..]),
        misc in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut d = decoder(st);
        check_decode(&mut d, &header(ty, misc, &body));
    }

    #[test]
    fn lying_header_size_is_an_error(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        kind in any::<u8>(),
        ips in callchain(),
        size in any::<u16>(),
    ) {
        let mut d = decoder(st);
        let mut rec = valid_record(st, kind, &ips, b"sleep");
        prop_assume!(usize::from(size) != rec.len());
        rec[6..8].copy_from_slice(&size.to_ne_bytes());
        prop_assert!(d.decode(&rec).is_err());
    }

    #[test]
    fn mutated_valid_records_never_panic(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        kind in any::<u8>(),
        ips in callchain(),
        name in proptest::collection::vec(1u8..=255, 0..40),
        mutations in proptest::collection::vec(mutation(), 1..6),
        keep_size_honest in any::<bool>(),
    ) {
        let mut d = decoder(st);
        let mut rec = valid_record(st, kind, &ips, &name);
        // The unmutated record decodes.
        prop_assert!(d.decode(&rec).is_ok(), "{:?}", d.decode(&rec));
        for m in &mutations {
            apply(&mut rec, m);
        }
        if keep_size_honest {
            fix_size(&mut rec);
        }
        check_decode(&mut d, &rec);
    }

    #[test]
    fn huge_callchain_and_raw_lengths_are_errors(
        // The sample types with a callchain.
        st in proptest::sample::select(&[SAMPLE_TYPES[0], SAMPLE_TYPES[1], SAMPLE_TYPES[3]][..]),
        nr in evil_u64(),
        raw_len in prop_oneof![Just(u32::MAX), Just(u32::MAX - 3), any::<u32>()],
        lie_in_nr in any::<bool>(),
    ) {
        let mut d = decoder(st);
        let (sw, _) = formats();
        let ips = [CONTEXT_KERNEL, 0xffff_ffff_8100_0000];
        let mut body = sample_body(st, 1001, &ips, &payload(sw, 0));
        let nr_at = 8 * words_before_callchain(st);
        let raw_at = nr_at + 8 + 8 * ips.len();
        let after_nr = (body.len() - nr_at - 8) as u64;
        let rec_err = if lie_in_nr {
            body[nr_at..nr_at + 8].copy_from_slice(&nr.to_ne_bytes());
            // More entries than bytes left: the chain cannot be walked.
            nr.checked_mul(8).is_none_or(|n| n > after_nr)
        } else {
            let honest = u32::from_ne_bytes(body[raw_at..raw_at + 4].try_into().expect("4 bytes"));
            body[raw_at..raw_at + 4].copy_from_slice(&raw_len.to_ne_bytes());
            raw_len > honest
        };
        let rec = header(RECORD_SAMPLE, 1, &body);
        if rec_err {
            prop_assert!(d.decode(&rec).is_err());
        } else {
            // A shorter chain (or raw) leaves the rest misread, which may
            // or may not make sense: only no panic is asked of it.
            check_decode(&mut d, &rec);
        }
    }
}

proptest! {
    // Each case walks every cut of nine records (a few thousand decodes).
    #![proptest_config(config(24))]

    #[test]
    fn every_cut_of_every_valid_record_is_handled(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        ips in callchain(),
        name in proptest::collection::vec(1u8..=255, 0..24),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut d = decoder(st);
        for kind in 0..9 {
            let full = valid_record(st, kind, &ips, &name);
            for cut in 0..=full.len() {
                let mut r = full[..cut].to_vec();
                fix_size(&mut r);
                check_decode(&mut d, &r);
                // The same cut followed by stray bytes.
                r.extend_from_slice(&tail);
                fix_size(&mut r);
                check_decode(&mut d, &r);
            }
        }
    }
}

/// How many u64 words of a sample body come before its callchain.
fn words_before_callchain(st: u64) -> usize {
    [
        SAMPLE_IDENTIFIER,
        SAMPLE_IP,
        SAMPLE_TID,
        SAMPLE_TIME,
        SAMPLE_ADDR,
        SAMPLE_ID,
        SAMPLE_STREAM_ID,
        SAMPLE_CPU,
        SAMPLE_PERIOD,
    ]
    .iter()
    .filter(|&&bit| st & bit != 0)
    .count()
        // READ: the count and time_running.
        + if st & SAMPLE_READ != 0 { 2 } else { 0 }
}

/// Writes `bytes` into the ring at position `pos`, wrapping.
fn put(ring: &mut [u8], pos: u64, bytes: &[u8]) {
    let n = ring.len() as u64;
    for (i, b) in bytes.iter().enumerate() {
        ring[((pos + i as u64) % n) as usize] = *b;
    }
}

fn ring_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(8),
        1usize..64,
        Just(64),
        Just(256),
        Just(4096)
    ]
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn ring_of_arbitrary_bytes_never_panics_or_spins(
        size in ring_size(),
        seed in proptest::collection::vec(any::<u8>(), 1..64),
        tail in prop_oneof![any::<u64>(), Just(u64::MAX - 16), 0u64..10_000],
        ahead in prop_oneof![0u64..600, any::<u64>(), Just(u64::MAX)],
    ) {
        let data: Vec<u8> = (0..size).map(|i| seed[i % seed.len()] ^ (i as u8)).collect();
        let head = tail.wrapping_add(ahead);
        let mut scratch = Vec::new();
        let mut n = 0u64;
        let mut bytes = 0u64;
        let ex = extract_records(&data, tail, head, &mut scratch, &mut |r| {
            assert!(r.len() >= HEADER_SIZE);
            assert_eq!(usize::from(u16::from_ne_bytes([r[6], r[7]])), r.len());
            n += 1;
            bytes += r.len() as u64;
        });
        prop_assert_eq!(ex.records, n);
        // Whatever happened, everything up to head is consumed.
        prop_assert_eq!(ex.new_tail, head);
        prop_assert!(bytes <= ahead && bytes <= size as u64);
        prop_assert!(scratch.len() <= usize::from(u16::MAX));
        if ahead > size as u64 {
            prop_assert!(ex.corrupt && n == 0);
        }
    }

    #[test]
    fn ring_of_valid_records_round_trips_and_survives_corruption(
        size_log in 5u32..10,
        sizes in proptest::collection::vec(1u16..40, 0..24),
        tail in prop_oneof![any::<u64>(), 0u64..10_000],
        corrupt in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        misalign in 0u64..8,
    ) {
        let size = 1usize << size_log;
        let mut ring = vec![0u8; size];
        let tail = tail.wrapping_add(misalign);
        let mut pos = tail;
        let mut written = Vec::new();
        for (i, s) in sizes.iter().enumerate() {
            let len = usize::from(*s) * 8;
            if pos.wrapping_sub(tail) + len as u64 > size as u64 {
                break;
            }
            let mut r = vec![i as u8; len];
            r[0..4].copy_from_slice(&9u32.to_ne_bytes());
            r[4..6].copy_from_slice(&0u16.to_ne_bytes());
            r[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
            put(&mut ring, pos, &r);
            written.push(r);
            pos = pos.wrapping_add(len as u64);
        }
        let head = pos;
        let mut scratch = Vec::new();
        let mut got = Vec::new();
        let ex = extract_records(&ring, tail, head, &mut scratch, &mut |r| got.push(r.to_vec()));
        prop_assert!(!ex.corrupt);
        prop_assert_eq!(ex.new_tail, head);
        prop_assert_eq!(&got, &written);

        // Now damage some bytes: never a panic, never a record past head.
        for (at, b) in &corrupt {
            ring[at % size] = *b;
        }
        let avail = head.wrapping_sub(tail);
        let mut total = 0u64;
        let ex = extract_records(&ring, tail, head, &mut scratch, &mut |r| total += r.len() as u64);
        prop_assert!(total <= avail);
        prop_assert_eq!(ex.new_tail, head);
        prop_assert!(ex.records <= avail / HEADER_SIZE as u64);
    }

    #[test]
    fn ring_then_decoder_never_panics(
        st in proptest::sample::select(&SAMPLE_TYPES[..]),
        kinds in proptest::collection::vec(any::<u8>(), 1..6),
        ips in callchain(),
        mutations in proptest::collection::vec(mutation(), 0..4),
        tail in 0u64..100_000,
    ) {
        let mut d = decoder(st);
        let mut stream = Vec::new();
        for k in &kinds {
            stream.extend_from_slice(&valid_record(st, *k, &ips, b"a.out"));
        }
        for m in &mutations {
            // Size and cut mutations on the whole stream move record
            // boundaries: exactly what a damaged ring looks like.
            apply(&mut stream, m);
        }
        let size = stream.len().next_power_of_two().max(8);
        let mut ring = vec![0u8; size];
        put(&mut ring, tail, &stream);
        let head = tail + stream.len() as u64;
        let mut scratch = Vec::new();
        let mut decoded = 0u64;
        let ex = extract_records(&ring, tail, head, &mut scratch, &mut |r| {
            check_decode(&mut d, r);
            decoded += 1;
        });
        prop_assert_eq!(ex.records, decoded);
        prop_assert_eq!(ex.new_tail, head);
    }
}

/// The bound on a sample's size the ring reader uses to tell a ring that
/// may have lost samples is exactly the size of the largest sample the
/// decoder reads: every word it walks, a full callchain, the larger payload.
#[test]
fn max_sample_size_is_the_largest_sample() {
    let (sw, wk) = formats();
    let (max_stack, contexts) = (127u64, 8u64);
    let ips: Vec<u64> = (0..max_stack + contexts).collect();
    for st in SAMPLE_TYPES {
        let bound = max_sample_size(st, &[sw, wk], max_stack, contexts, STACK_COPY as u32);
        let chain: &[u64] = if st & SAMPLE_CALLCHAIN != 0 {
            &ips
        } else {
            &[]
        };
        let switch = valid_record(st, 0, chain, b"");
        let waking = valid_record(st, 1, chain, b"");
        assert_eq!(switch.len() as u64, bound, "sample type {st:#x}");
        assert!(waking.len() as u64 <= bound, "sample type {st:#x}");
        let mut d = decoder(st);
        assert!(d.decode(&switch).is_ok_and(|e| e.is_some()));
    }
}
