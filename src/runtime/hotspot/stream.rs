//! HotSpot 17's compressed streams, as read out of a JVM's memory.
//!
//! Owns the byte formats that turn a Java frame's `Method*`, bci or
//! compiled pc into lines and inlined methods:
//!
//! * [`Stream`]: `CompressedReadStream`, UNSIGNED5 as JDK 17 writes it (the
//!   variant before JDK 20): a byte below 192 ends a value, a value takes at
//!   most 5 bytes, and byte `i > 0` adds `b << (6 * i)` to the first byte.
//!   Signed values are zigzagged first (`decode_sign`).
//! * [`line_of`]: a method's compressed line number table
//!   (`CompressedLineNumberReadStream`, `Method::line_number_from_bci`).
//! * [`scope_of_pc`], [`scope_at`], [`scope_chain`]: an nmethod's `PcDesc`
//!   array and the scope descriptors it points into (`ScopeDesc::decode_body`):
//!   the methods inlined at a call site, innermost first, with their bcis.
//!
//! The bytes come from a process that may be hostile or caught mid-write:
//! every function here takes any bytes and any offsets without panicking,
//! reads only the slice it is given, loops a bounded number of times and
//! allocates nothing sized by the bytes. A malformed input gives `None`
//! (or `false`), never a guess past the bytes.

/// UNSIGNED5: each high byte carries 6 bits (`lg_H`).
const LG_H: u32 = 6;
/// UNSIGNED5: bytes below this (`L`, 256 - 64 high codes) end a value.
const L: u8 = 192;
/// UNSIGNED5: a value is bytes 0..=4.
const MAX_I: u32 = 4;

/// Line table escape: a pair of signed UNSIGNED5 deltas follows.
const LINE_ESCAPE: u8 = 0xFF;
/// Line table terminator.
const LINE_END: u8 = 0;
/// Most line table pairs read: a method has fewer than 64 Ki bytecodes, and
/// each pair takes at least one byte anyway.
const MAX_PAIRS: usize = 65_536;

/// `DebugInformationRecorder::serialized_null`: no scope. The scopes
/// stream starts with a 0xFF pad so no real scope is at offset 0.
const SERIALIZED_NULL: i32 = 0;
/// `InvocationEntryBci`, stored as 0 (bcis are written plus one).
const INVOCATION_ENTRY_BCI: i32 = -1;

/// A read position in a `CompressedReadStream`'s bytes. Every read past
/// the end gives `None`, and so does every later one.
pub(super) struct Stream<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Stream<'a> {
    /// A stream over `bytes` starting at byte `pos` (past the end: empty).
    pub(super) fn new(bytes: &'a [u8], pos: usize) -> Stream<'a> {
        Stream { bytes, pos }
    }

    /// One raw byte (`read_byte`).
    pub(super) fn read_byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        // pos < len, so this cannot overflow.
        self.pos += 1;
        Some(b)
    }

    /// One UNSIGNED5 value: 1 to 5 bytes. As in HotSpot, the fifth byte
    /// ends the value whatever it is, and the sum wraps (only forged bytes
    /// make it exceed 32 bits).
    pub(super) fn read_u5(&mut self) -> Option<u32> {
        let b0 = self.read_byte()?;
        let mut sum = u32::from(b0);
        if b0 < L {
            return Some(sum);
        }
        for i in 1..=MAX_I {
            let b = self.read_byte()?;
            // Shift at most 24: 255 << 24 still fits.
            sum = sum.wrapping_add(u32::from(b) << (LG_H * i));
            if b < L {
                break;
            }
        }
        Some(sum)
    }

    /// `read_int`: in JDK 17 an UNSIGNED5 value taken as a `jint` (same
    /// bits; values from 2^31 up are negative).
    pub(super) fn read_int(&mut self) -> Option<i32> {
        self.read_u5().map(|v| v as i32)
    }

    /// `read_signed_int`: UNSIGNED5, then `decode_sign`.
    pub(super) fn read_signed(&mut self) -> Option<i32> {
        let v = self.read_u5()?;
        // v >> 1 < 2^31, and v & 1 is 0 or 1: neither cast wraps.
        Some(((v >> 1) as i32) ^ -((v & 1) as i32))
    }
}

/// The source line of bytecode `bci` from a compressed line number table
/// (the bytes at `ConstMethod + sizeof(ConstMethod) + _code_size`, present
/// when `_flags & _has_linenumber_table`), as `Method::line_number_from_bci`
/// answers: the line of the first pair whose bci is `bci`, else that of
/// the last pair with the greatest bci below `bci` (pairs need not be
/// sorted). `None` when no pair qualifies or the line is negative.
///
/// The caller checks `bci < _code_size` and maps
/// `SynchronizationEntryBCI` (-1) to 0, as HotSpot does. The table ends
/// at its 0 byte, at the end of `table` or after [`MAX_PAIRS`] pairs,
/// whichever comes first; a pair cut short by the end is dropped.
pub(super) fn line_of(table: &[u8], bci: u32) -> Option<u32> {
    let want = i32::try_from(bci).ok()?;
    let mut s = Stream::new(table, 0);
    let (mut at, mut line) = (0i32, 0i32);
    // HotSpot starts with best_bci = 0: pairs at negative bcis never count.
    let (mut best_bci, mut best_line) = (0i32, None);
    for _ in 0..MAX_PAIRS {
        let Some((d_bci, d_line)) = read_pair(&mut s) else {
            break;
        };
        // jint arithmetic: wraps only on forged tables.
        at = at.wrapping_add(d_bci);
        line = line.wrapping_add(d_line);
        if at == want {
            return u32::try_from(line).ok();
        }
        if at < want && at >= best_bci {
            best_bci = at;
            best_line = Some(line);
        }
    }
    u32::try_from(best_line?).ok()
}

/// One `(bci delta, line delta)` pair (`read_pair`); `None` at the
/// terminator or the end of the bytes.
fn read_pair(s: &mut Stream<'_>) -> Option<(i32, i32)> {
    match s.read_byte()? {
        LINE_END => None,
        LINE_ESCAPE => {
            let d_bci = s.read_signed()?;
            Some((d_bci, s.read_signed()?))
        }
        // 5 bits of bci delta, 3 of line delta.
        b => Some((i32::from(b >> 3), i32::from(b & 7))),
    }
}

/// Where the fields of a `PcDesc` are (from the process's vmStructs; in
/// 17: 16 bytes, `_pc_offset` at 0, `_scope_decode_offset` at 4, both
/// `int`).
pub(super) struct PcDescLayout {
    pub(super) size: usize,
    pub(super) pc_offset: usize,
    pub(super) scope_decode_offset: usize,
}

/// The scope decode offset of the `PcDesc` at `pc_offset` (a return pc
/// minus the nmethod's `_code_begin`) in `pcs`, the bytes from
/// `_scopes_pcs_offset` to `_dependencies_offset`: the first entry whose
/// `_pc_offset` is exactly `pc_offset` and whose scope is real (above
/// `serialized_null`, which the sentinels at both ends have), as
/// `find_pc_desc` matches a call's return pc. `None` if there is none, or
/// the layout does not fit its own size.
pub(super) fn scope_of_pc(pcs: &[u8], layout: &PcDescLayout, pc_offset: i32) -> Option<i32> {
    if layout.size == 0 {
        return None;
    }
    // Whole entries only: at most len / size of them.
    pcs.chunks_exact(layout.size)
        .filter(|d| i32_at(d, layout.pc_offset) == Some(pc_offset))
        .filter_map(|d| i32_at(d, layout.scope_decode_offset))
        .find(|&scope| scope > SERIALIZED_NULL)
}

/// The `int` at byte `off` of `bytes` (x86_64: little-endian).
fn i32_at(bytes: &[u8], off: usize) -> Option<i32> {
    let b = bytes.get(off..off.checked_add(4)?)?;
    Some(i32::from_le_bytes(b.try_into().ok()?))
}

/// The head of one scope descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Scope {
    /// Decode offset of the calling scope (the one this was inlined
    /// into); 0 for the outermost, the nmethod's own method.
    pub(super) sender: i32,
    /// Index into the nmethod's metadata: the method is
    /// `metadata_at(index)`, 0 meaning null, else
    /// `((Method**)(nmethod + _metadata_offset))[index - 1]`.
    pub(super) method_index: i32,
    /// The bci in that method: -1 (`InvocationEntryBci`) at method entry.
    /// HotSpot writes nothing below -1, but forged bytes may hold anything.
    pub(super) bci: i32,
}

/// The scope descriptor at `decode_offset` in `scopes` (the bytes from
/// `_scopes_data_begin`), decoded as `ScopeDesc::decode_body`: sender
/// offset, method index, bci + 1, each an UNSIGNED5 int. (The locals,
/// expressions and monitors offsets after them are not read.) `None` for
/// `serialized_null` or a negative offset, a descriptor cut off by the end
/// of `scopes`, or a negative sender or method index, which HotSpot never
/// writes.
pub(super) fn scope_at(scopes: &[u8], decode_offset: i32) -> Option<Scope> {
    if decode_offset <= SERIALIZED_NULL {
        return None;
    }
    let mut s = Stream::new(scopes, usize::try_from(decode_offset).ok()?);
    let sender = s.read_int()?;
    let method_index = s.read_int()?;
    // read_bci: written as bci - InvocationEntryBci.
    let bci = s.read_int()?.wrapping_add(INVOCATION_ENTRY_BCI);
    (sender >= 0 && method_index >= 0).then_some(Scope {
        sender,
        method_index,
        bci,
    })
}

/// Appends to `out` the scopes of the chain starting at `decode_offset`,
/// innermost first, following each `sender` to the outermost (sender 0).
/// True when the chain was read whole: every scope decoded, the outermost
/// reached, and at most `max` scopes.
///
/// HotSpot writes a scope after its sender (`describe_scope` goes from
/// the outermost in; a shared copy is an older, identical chunk), so each
/// sender must be below the offset that names it: a chain that does not
/// go down is forged or torn, and refused. That bounds the walk by the
/// offset; `max` bounds it further. On `false`, `out` keeps the scopes
/// read before the fault (not the one whose sender was refused).
pub(super) fn scope_chain(
    scopes: &[u8],
    decode_offset: i32,
    out: &mut Vec<Scope>,
    max: usize,
) -> bool {
    let mut offset = decode_offset;
    for _ in 0..max {
        let Some(scope) = scope_at(scopes, offset) else {
            return false;
        };
        if scope.sender >= offset {
            return false;
        }
        out.push(scope);
        if scope.sender == SERIALIZED_NULL {
            return true;
        }
        offset = scope.sender;
    }
    false
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::proptest_config::config;

    /// UNSIGNED5 as `CompressedWriteStream::write_int_mb` writes it.
    fn put_u5(out: &mut Vec<u8>, value: u32) {
        let mut sum = value;
        for i in 0..=MAX_I {
            if sum < u32::from(L) || i == MAX_I {
                out.push(u8::try_from(sum).expect("the last byte is a byte"));
                return;
            }
            sum -= u32::from(L);
            out.push(L + u8::try_from(sum % 64).expect("6 bits"));
            sum >>= LG_H;
        }
    }

    /// `encode_sign`, then UNSIGNED5.
    fn put_signed(out: &mut Vec<u8>, value: i32) {
        put_u5(out, ((value << 1) ^ (value >> 31)) as u32);
    }

    fn u5(value: u32) -> Vec<u8> {
        let mut out = Vec::new();
        put_u5(&mut out, value);
        out
    }

    /// A line table as `CompressedLineNumberWriteStream::write_pair` and
    /// `write_terminator` write it, from `(bci, line)` pairs in class file
    /// order.
    fn line_table(pairs: &[(i32, i32)]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut bci, mut line) = (0, 0);
        for &(b, l) in pairs {
            let (db, dl) = (b - bci, l - line);
            (bci, line) = (b, l);
            if (db, dl) == (0, 0) {
                continue;
            }
            if (0..32).contains(&db) && (0..8).contains(&dl) && (db, dl) != (31, 7) {
                out.push(u8::try_from(db << 3 | dl).expect("5 + 3 bits"));
            } else {
                out.push(LINE_ESCAPE);
                put_signed(&mut out, db);
                put_signed(&mut out, dl);
            }
        }
        out.push(LINE_END);
        out
    }

    /// `Method::line_number_from_bci` over the pairs themselves.
    fn reference_line(pairs: &[(i32, i32)], bci: i32) -> Option<u32> {
        if let Some(&(_, l)) = pairs.iter().find(|p| p.0 == bci) {
            return u32::try_from(l).ok();
        }
        let (mut best_bci, mut best_line) = (0, None);
        for &(b, l) in pairs {
            if b < bci && b >= best_bci {
                (best_bci, best_line) = (b, Some(l));
            }
        }
        u32::try_from(best_line?).ok()
    }

    /// Appends one scope as `describe_scope` writes it; returns its
    /// offset. A scopes stream starts with a 0xFF pad byte.
    fn put_scope(out: &mut Vec<u8>, sender: i32, method: i32, bci: i32) -> i32 {
        let at = i32::try_from(out.len()).expect("small");
        put_u5(out, sender as u32);
        put_u5(out, method as u32);
        put_u5(out, (bci + 1) as u32);
        // Locals, expressions, monitors: none.
        out.extend([0, 0, 0]);
        at
    }

    /// A chain of `(method, bci)` scopes, outermost first, each inlined in
    /// the one before; returns the bytes and the innermost's offset.
    fn nested(scopes: &[(i32, i32)]) -> (Vec<u8>, i32) {
        let mut out = vec![0xFF];
        let mut sender = 0;
        for &(method, bci) in scopes {
            sender = put_scope(&mut out, sender, method, bci);
        }
        (out, sender)
    }

    /// `PcDesc`s as HotSpot 17 lays them out: 16 bytes each.
    fn pc_descs(entries: &[(i32, i32)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(pc, scope) in entries {
            out.extend(pc.to_le_bytes());
            out.extend(scope.to_le_bytes());
            out.extend([0; 8]);
        }
        out
    }

    const LAYOUT: PcDescLayout = PcDescLayout {
        size: 16,
        pc_offset: 0,
        scope_decode_offset: 4,
    };

    #[test]
    fn u5_encodings() {
        assert_eq!(u5(0), [0]);
        assert_eq!(u5(191), [191]);
        assert_eq!(u5(192), [192, 0]);
        // 12345 - 192 = 12153 = 189 * 64 + 57: high byte 192 + 57, then 189.
        assert_eq!(u5(12345), [249, 189]);
        assert_eq!(u5(12_479), [255, 191]);
        assert_eq!(u5(12_480).len(), 3);
        assert_eq!(u5(u32::MAX).len(), 5);
    }

    #[test]
    fn u5_round_trips() {
        let values = [
            0,
            1,
            191,
            192,
            255,
            12345,
            12_479, // 255 + 191 * 64: the largest 2-byte value
            12_480, // the smallest 3-byte one
            1 << 24,
            i32::MAX as u32,
            u32::MAX - 1,
            u32::MAX,
        ];
        let mut bytes = Vec::new();
        for v in values {
            put_u5(&mut bytes, v);
        }
        let mut s = Stream::new(&bytes, 0);
        for v in values {
            assert_eq!(s.read_u5(), Some(v), "{v}");
        }
        assert_eq!(s.read_u5(), None);
        assert_eq!(s.read_byte(), None);
    }

    #[test]
    fn read_int_keeps_the_bits() {
        let bytes = [u5(7), u5(u32::MAX), u5(1 << 31)].concat();
        let mut s = Stream::new(&bytes, 0);
        assert_eq!(s.read_int(), Some(7));
        assert_eq!(s.read_int(), Some(-1));
        assert_eq!(s.read_int(), Some(i32::MIN));
        assert_eq!(s.read_int(), None);
    }

    #[test]
    fn signed_round_trips() {
        let values = [
            0,
            1,
            -1,
            2,
            -2,
            95,
            -96,
            96,
            12345,
            -12345,
            i32::MAX,
            i32::MIN,
        ];
        let mut bytes = Vec::new();
        for v in values {
            put_signed(&mut bytes, v);
        }
        // Small magnitudes take one byte: zigzag puts the sign in bit 0.
        assert_eq!(&bytes[..5], [0, 2, 1, 4, 3]);
        let mut s = Stream::new(&bytes, 0);
        for v in values {
            assert_eq!(s.read_signed(), Some(v), "{v}");
        }
        assert_eq!(s.read_signed(), None);
    }

    #[test]
    fn reads_stop_at_the_end() {
        // A high byte, then nothing: the value is cut short.
        let mut s = Stream::new(&[200], 0);
        assert_eq!(s.read_u5(), None);
        assert_eq!(s.read_u5(), None);
        // Four high bytes, then any fifth ends the value.
        let mut s = Stream::new(&[255, 255, 255, 255, 255, 7], 0);
        assert_eq!(
            s.read_u5(),
            Some(255u32.wrapping_mul(1 + 64 + 4096 + 262_144 + 16_777_216))
        );
        assert_eq!(s.read_byte(), Some(7));
        // Starting past the end.
        assert_eq!(Stream::new(&[1, 2], 2).read_byte(), None);
        assert_eq!(Stream::new(&[1, 2], usize::MAX).read_u5(), None);
        assert_eq!(Stream::new(&[], 0).read_signed(), None);
    }

    #[test]
    fn short_line_pairs() {
        // javac's order: (bci 0, line 5), (4, 6), (9, 8), (12, 8).
        let pairs = [(0, 5), (4, 6), (9, 8), (12, 8)];
        let table = line_table(&pairs);
        assert_eq!(table, [5, 4 << 3 | 1, 5 << 3 | 2, 3 << 3, 0]);
        for (bci, want) in [(0, 5), (3, 5), (4, 6), (8, 6), (9, 8), (12, 8), (400, 8)] {
            assert_eq!(line_of(&table, bci), Some(want), "bci {bci}");
        }
    }

    #[test]
    fn escaped_line_pairs() {
        // Line 1000 (delta > 7), a bci jump of 40 (> 31), and (31, 7),
        // whose one-byte form would be the escape itself.
        let pairs = [(0, 1000), (40, 1001), (71, 1008)];
        let table = line_table(&pairs);
        assert_eq!(table[0], LINE_ESCAPE);
        assert_eq!(table.iter().filter(|&&b| b == LINE_ESCAPE).count(), 3);
        assert_eq!(line_of(&table, 0), Some(1000));
        assert_eq!(line_of(&table, 39), Some(1000));
        assert_eq!(line_of(&table, 40), Some(1001));
        assert_eq!(line_of(&table, 70), Some(1001));
        assert_eq!(line_of(&table, 71), Some(1008));
    }

    #[test]
    fn unsorted_line_pairs() {
        // A loop's condition placed after its body: bcis go back (negative
        // deltas), lines go back too.
        let pairs = [(0, 10), (20, 14), (5, 12), (30, 11), (5, 13)];
        let table = line_table(&pairs);
        for bci in 0..40 {
            assert_eq!(line_of(&table, bci), reference_line(&pairs, bci as i32));
        }
        // The first exact match wins; ties below go to the later pair.
        assert_eq!(line_of(&table, 5), Some(12));
        assert_eq!(line_of(&table, 6), Some(13));
        assert_eq!(line_of(&table, 19), Some(13));
        assert_eq!(line_of(&table, 25), Some(14));
    }

    #[test]
    fn line_table_edges() {
        // Empty, or just the terminator: no line.
        assert_eq!(line_of(&[], 0), None);
        assert_eq!(line_of(&[LINE_END], 0), None);
        // No pair at or below the bci.
        let table = line_table(&[(8, 3)]);
        assert_eq!(line_of(&table, 7), None);
        assert_eq!(line_of(&table, 8), Some(3));
        // No terminator: the pairs present still answer.
        let mut open = line_table(&[(0, 5), (4, 6)]);
        open.pop();
        assert_eq!(line_of(&open, 5), Some(6));
        // Bytes after the terminator are not pairs.
        let mut more = line_table(&[(0, 5)]);
        more.extend(line_table(&[(3, 9)]));
        assert_eq!(line_of(&more, 3), Some(5));
        // An escape cut short: the pair is dropped.
        assert_eq!(line_of(&[5, LINE_ESCAPE, 8], 3), Some(5));
        // A negative line is no line; a pair at a negative bci never counts.
        let mut neg = vec![LINE_ESCAPE];
        put_signed(&mut neg, 2);
        put_signed(&mut neg, -3);
        assert_eq!(line_of(&neg, 2), None);
        let mut below = vec![LINE_ESCAPE];
        put_signed(&mut below, -4);
        put_signed(&mut below, 6);
        assert_eq!(line_of(&below, 1), None);
        // A bci no jint holds.
        assert_eq!(line_of(&table, u32::MAX), None);
    }

    #[test]
    fn line_pairs_are_bounded() {
        // 100_000 pairs (bci +1 each), no terminator: only MAX_PAIRS read.
        let table = vec![1 << 3; 100_000];
        assert_eq!(line_of(&table, 70_000), Some(0));
        let mut forged = vec![1 << 3 | 1; 100_000];
        forged.push(LINE_END);
        // Pair n is at bci n, line n: bcis past the cap are never reached.
        assert_eq!(line_of(&forged, 65_000), Some(65_000));
        assert_eq!(line_of(&forged, 90_000), Some(65_536));
    }

    #[test]
    fn pc_desc_search() {
        // Sentinels at both ends (pc -1 and past the code, scope 0), as
        // HotSpot lays them out, and the last one repeated as padding.
        let pcs = pc_descs(&[
            (-1, 0),
            (0x20, 0),
            (0x34, 17),
            (0x50, 40),
            (0x91, 0),
            (0x91, 0),
        ]);
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, 0x34), Some(17));
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, 0x50), Some(40));
        // Exact matches only.
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, 0x33), None);
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, 0x35), None);
        // No scope there.
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, 0x20), None);
        assert_eq!(scope_of_pc(&pcs, &LAYOUT, -1), None);
        // A partial last entry is not read.
        assert_eq!(scope_of_pc(&pcs[..16 * 3 - 1], &LAYOUT, 0x34), None);
        assert_eq!(scope_of_pc(&[], &LAYOUT, 0), None);
        // Layouts that do not fit: no answer, no panic.
        for (size, pc, scope) in [
            (0, 0, 4),
            (16, 13, 4),
            (16, 0, 13),
            (4, 0, 4),
            (8, usize::MAX, 4),
        ] {
            let layout = PcDescLayout {
                size,
                pc_offset: pc,
                scope_decode_offset: scope,
            };
            assert_eq!(
                scope_of_pc(&pcs, &layout, 0x34),
                None,
                "{size} {pc} {scope}"
            );
        }
        // Another layout: 12-byte entries, scope first.
        let odd = PcDescLayout {
            size: 12,
            pc_offset: 8,
            scope_decode_offset: 0,
        };
        let bytes = [[9, 0, 0, 0], [0; 4], [0x34, 0, 0, 0]].concat();
        assert_eq!(scope_of_pc(&bytes, &odd, 0x34), Some(9));
    }

    #[test]
    fn one_scope() {
        let mut bytes = vec![0xFF];
        // Outermost, method 3, entry bci (-1, written as 0).
        let first = put_scope(&mut bytes, 0, 3, -1);
        let second = put_scope(&mut bytes, first, 1, 200);
        let want = Scope {
            sender: 0,
            method_index: 3,
            bci: -1,
        };
        assert_eq!(bytes[first as usize..][..6], [0, 3, 0, 0, 0, 0]);
        assert_eq!(scope_at(&bytes, first), Some(want));
        assert_eq!(scope_at(&bytes, second).map(|s| s.bci), Some(200));
        // serialized_null and offsets outside the bytes.
        assert_eq!(scope_at(&bytes, 0), None);
        assert_eq!(scope_at(&bytes, -5), None);
        assert_eq!(scope_at(&bytes, i32::MAX), None);
        // Cut short: 201 takes two bytes.
        assert_eq!(scope_at(&bytes[..second as usize + 3], second), None);
        assert!(scope_at(&bytes[..second as usize + 4], second).is_some());
        // A negative sender or method index (5-byte values).
        let mut bad = vec![0xFF];
        put_scope(&mut bad, -1, 1, 1);
        assert_eq!(scope_at(&bad, 1), None);
        let mut bad = vec![0xFF];
        put_scope(&mut bad, 0, i32::MIN, 1);
        assert_eq!(scope_at(&bad, 1), None);
    }

    #[test]
    fn chains_innermost_first() {
        // a() inlines b() at bci 7, which inlines c() at bci 12; c is at 30.
        let (bytes, inner) = nested(&[(1, 7), (2, 12), (3, 30)]);
        let mut out = Vec::new();
        assert!(scope_chain(&bytes, inner, &mut out, 8));
        let got: Vec<_> = out.iter().map(|s| (s.method_index, s.bci)).collect();
        assert_eq!(got, [(3, 30), (2, 12), (1, 7)]);
        // Appends: a second chain goes after the first.
        assert!(scope_chain(&bytes, out[1].sender, &mut out, 8));
        assert_eq!(out.len(), 4);
        assert_eq!(out[3].method_index, 1);
        // Exactly max scopes is whole; one fewer is not.
        assert!(scope_chain(&bytes, inner, &mut Vec::new(), 3));
        let mut out = Vec::new();
        assert!(!scope_chain(&bytes, inner, &mut out, 2));
        assert_eq!(out.len(), 2);
        assert!(!scope_chain(&bytes, inner, &mut Vec::new(), 0));
        // No scope at all.
        assert!(!scope_chain(&bytes, 0, &mut Vec::new(), 8));
    }

    #[test]
    fn chains_must_go_down() {
        // A scope naming itself.
        let mut bytes = vec![0xFF];
        put_scope(&mut bytes, 1, 1, 0);
        let mut out = Vec::new();
        assert!(!scope_chain(&bytes, 1, &mut out, 1000));
        assert!(out.is_empty());

        // The scope at 1 names the later one at 8, which names 1.
        let mut bytes = vec![0xFF];
        assert_eq!(put_scope(&mut bytes, 8, 1, 0), 1);
        bytes.push(0xFF);
        assert_eq!(put_scope(&mut bytes, 1, 2, 0), 8);
        let mut out = Vec::new();
        assert!(!scope_chain(&bytes, 8, &mut out, 1000));
        assert_eq!(out.len(), 1, "the scope at 8 is kept, its sender refused");
        assert!(!scope_chain(&bytes, 1, &mut Vec::new(), 1000));

        // A sender that goes down into bytes that are no scope.
        let mut bytes = vec![0xFF, 0xFF, 0xFF];
        let at = put_scope(&mut bytes, 1, 2, 0);
        let mut out = Vec::new();
        assert!(!scope_chain(&bytes[..at as usize + 6], at, &mut out, 1000));
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn long_chains_stop_at_max() {
        // 500 nested scopes, each inlined in the one before.
        let list: Vec<_> = (1..=500).map(|m| (m, 1)).collect();
        let (bytes, inner) = nested(&list);
        let mut out = Vec::new();
        assert!(scope_chain(&bytes, inner, &mut out, 500));
        assert_eq!(out.len(), 500);
        assert_eq!(out[0].method_index, 500);
        assert_eq!(out[499].method_index, 1);
        let mut out = Vec::new();
        assert!(!scope_chain(&bytes, inner, &mut out, 64));
        assert_eq!(out.len(), 64);
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn u5_round_trip(v in any::<u32>()) {
            let bytes = u5(v);
            prop_assert!(bytes.len() <= 5);
            let mut s = Stream::new(&bytes, 0);
            prop_assert_eq!(s.read_u5(), Some(v));
            prop_assert_eq!(s.read_byte(), None);
            let mut s = Stream::new(&bytes, 0);
            prop_assert_eq!(s.read_int(), Some(v as i32));
        }

        #[test]
        fn signed_round_trip(v in any::<i32>()) {
            let mut bytes = Vec::new();
            put_signed(&mut bytes, v);
            prop_assert_eq!(Stream::new(&bytes, 0).read_signed(), Some(v));
        }

        #[test]
        fn line_tables_decode_to_their_lines(
            pairs in proptest::collection::vec((0i32..3000, 1i32..70_000), 0..40),
            probes in proptest::collection::vec(0u32..3100, 0..20),
        ) {
            let table = line_table(&pairs);
            let bcis = pairs.iter().map(|p| p.0 as u32).chain(probes);
            for bci in bcis {
                prop_assert_eq!(
                    line_of(&table, bci),
                    reference_line(&pairs, bci as i32),
                    "bci {}", bci
                );
            }
        }

        #[test]
        fn scope_chains_decode_to_their_scopes(
            links in proptest::collection::vec((0i32..100_000, -1i32..70_000, 0usize..4), 1..20),
        ) {
            // Each link after `filler` unrelated scopes, as other pcs' are.
            let mut bytes = vec![0xFF];
            let mut sender = 0;
            for &(method, bci, filler) in &links {
                for _ in 0..filler {
                    put_scope(&mut bytes, 0, 1, 2);
                }
                sender = put_scope(&mut bytes, sender, method, bci);
            }
            let mut out = Vec::new();
            prop_assert!(scope_chain(&bytes, sender, &mut out, links.len()));
            let got: Vec<_> = out.iter().map(|s| (s.method_index, s.bci)).collect();
            let want: Vec<_> = links.iter().rev().map(|&(m, b, _)| (m, b)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            pos in prop_oneof![0usize..420, any::<usize>()],
            offset in prop_oneof![-2i32..420, any::<i32>()],
            bci in prop_oneof![0u32..2000, any::<u32>()],
            size in 0usize..40,
            field_a in prop_oneof![0usize..48, any::<usize>()],
            field_b in 0usize..48,
            max in 0usize..64,
        ) {
            // Every read takes a byte or ends the stream for good.
            let mut s = Stream::new(&bytes, pos);
            for _ in 0..=bytes.len() {
                let _ = (s.read_u5(), s.read_signed(), s.read_int());
            }
            prop_assert_eq!(s.read_byte(), None);

            let _ = line_of(&bytes, bci);

            let layout = PcDescLayout { size, pc_offset: field_a, scope_decode_offset: field_b };
            if let Some(scope) = scope_of_pc(&bytes, &layout, offset) {
                prop_assert!(scope > 0);
            }

            if let Some(scope) = scope_at(&bytes, offset) {
                prop_assert!(offset > 0 && scope.sender >= 0 && scope.method_index >= 0);
            }

            let mut out = Vec::new();
            let whole = scope_chain(&bytes, offset, &mut out, max);
            prop_assert!(out.len() <= max);
            // Senders go strictly down; a whole chain ends at the outermost.
            let mut above = offset;
            for s in &out {
                prop_assert!(s.sender < above);
                above = s.sender;
            }
            if whole {
                prop_assert_eq!(out.last().map(|s| s.sender), Some(0));
            }
        }
    }
}
