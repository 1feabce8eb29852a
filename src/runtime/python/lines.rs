//! CPython's location table (`co_linetable`, 3.11 and later).
//!
//! Owns one question: on which source line is the instruction at a given
//! code unit of a code object? It is answered from two fields of the code
//! object, `co_firstlineno` and the `co_linetable` bytes, both read out of
//! the profiled process, so the bytes are treated as hostile: no panic, no
//! allocation, time linear in the table's length.
//!
//! The format is CPython's `Objects/locations.md`, the same in 3.11, 3.12
//! and 3.13. The table is a run of entries, each covering 1 to 8 code units
//! in order. An entry starts with a byte with bit 7 set (bits 3..=6: the
//! code, bits 0..=2: code units - 1), followed by body bytes with bit 7
//! clear. Every entry but "no location" carries a start-line delta, added
//! to a running line that starts at `co_firstlineno`:
//!
//! | code    | form        | line delta        | body                    |
//! |---------|-------------|-------------------|-------------------------|
//! | 0..=9   | short       | 0                 | 1 byte (columns)        |
//! | 10..=12 | one line    | code - 10         | 2 bytes (columns)       |
//! | 13      | no columns  | signed varint     | that varint             |
//! | 14      | long        | signed varint     | it + 3 varints (end line delta, column + 1, end column + 1) |
//! | 15      | no location | none: line kept   | empty                   |
//!
//! Varints are 6-bit chunks, lowest first, bit 6 set on all but the last;
//! a signed varint holds `|d| << 1`, with bit 0 set when `d` is negative.
//!
//! As in CPython's own lookup (`_PyCode_CheckLineNumber`), an entry ends
//! where the next byte with bit 7 set begins, and "no location" entries
//! leave the running line alone. This decoder is stricter than CPython's on
//! the entries it reads (those up to the one holding the instruction): a
//! body of the wrong size, a varint running past its entry or longer than
//! [`MAX_VARINT_CHUNKS`], or a line outside `1..=u32::MAX` means the table
//! is not what it should be (a torn or misaddressed read), and gives no
//! line rather than a wrong one. The one real line below 1 is a module's
//! first instruction (its `RESUME`), which CPython puts on line 0, one
//! before `co_firstlineno`: not a source line either.

/// Bit 7: this byte starts an entry.
const ENTRY_START: u8 = 0x80;
/// Codes of the entry forms (bits 3..=6 of an entry's first byte).
const ONE_LINE_0: u8 = 10;
const ONE_LINE_2: u8 = 12;
const NO_COLUMNS: u8 = 13;
const LONG_FORM: u8 = 14;
const NO_LOCATION: u8 = 15;
/// Varint chunks: 6 value bits, and bit 6 when another chunk follows.
const CHUNK_BITS: u8 = 0x3f;
const CHUNK_MORE: u8 = 0x40;
/// Longest varint accepted: 10 chunks hold 60 bits, far more than any line
/// or column CPython writes (it reads them as 32-bit ints).
const MAX_VARINT_CHUNKS: usize = 10;

/// The source line of the instruction at code unit `index` (2-byte units
/// from the start of the code object's bytecode) of a code object whose
/// `co_firstlineno` is `first_line` and whose `co_linetable` is `table`.
/// `None` when the table gives that instruction no line, or is malformed,
/// or ends before it.
pub(crate) fn line_of(table: &[u8], first_line: i32, index: u32) -> Option<u32> {
    let index = u64::from(index);
    let mut line = i64::from(first_line);
    // One past the last code unit covered by the entries read so far.
    let mut end: u64 = 0;
    let mut rest = table;
    while let Some((&first, after)) = rest.split_first() {
        if first & ENTRY_START == 0 {
            // Only possible for the table's first byte: later entries are
            // found by looking for this bit.
            return None;
        }
        let body_len = after.iter().take_while(|&&b| b & ENTRY_START == 0).count();
        let (body, next) = after.split_at(body_len);
        let code = (first >> 3) & 0x0f;
        // Deltas of every entry before `index` count, whatever its form.
        line = line.checked_add(line_delta(code, body)?)?;
        end = end.saturating_add(u64::from(first & 0x07) + 1);
        if index < end {
            if code == NO_LOCATION {
                return None;
            }
            return u32::try_from(line).ok().filter(|&l| l >= 1);
        }
        rest = next;
    }
    None
}

/// The start-line delta of an entry with code `code` and body `body`, or
/// `None` when the body is not exactly what that form holds.
fn line_delta(code: u8, body: &[u8]) -> Option<i64> {
    match code {
        NO_LOCATION => body.is_empty().then_some(0),
        LONG_FORM => {
            let (delta, mut rest) = signed_varint(body)?;
            // End-line delta, column + 1, end column + 1: checked, unused.
            for _ in 0..3 {
                rest = varint(rest)?.1;
            }
            rest.is_empty().then_some(delta)
        }
        NO_COLUMNS => {
            let (delta, rest) = signed_varint(body)?;
            rest.is_empty().then_some(delta)
        }
        ONE_LINE_0..=ONE_LINE_2 => (body.len() == 2).then_some(i64::from(code - ONE_LINE_0)),
        // Short forms (0..=9): same line, one byte of columns.
        _ => (body.len() == 1).then_some(0),
    }
}

/// An unsigned varint at the start of `bytes`, and the bytes after it;
/// `None` when it runs past `bytes` or is longer than [`MAX_VARINT_CHUNKS`].
fn varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, &chunk) in bytes.iter().enumerate().take(MAX_VARINT_CHUNKS) {
        // i < 10, so the shift is at most 54.
        value |= u64::from(chunk & CHUNK_BITS) << (6 * i);
        if chunk & CHUNK_MORE == 0 {
            return Some((value, bytes.get(i + 1..)?));
        }
    }
    None
}

/// A signed varint (magnitude shifted left once, bit 0 the sign) at the
/// start of `bytes`, and the bytes after it.
fn signed_varint(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let (raw, rest) = varint(bytes)?;
    // At most 59 bits of magnitude: always fits.
    let magnitude = i64::try_from(raw >> 1).ok()?;
    let value = if raw & 1 == 1 { -magnitude } else { magnitude };
    Some((value, rest))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::proptest_config::config;

    /// One code object as a real interpreter compiled it: `lines` is the
    /// line of each code unit from `co_lines()`, as runs `LINE*COUNT`
    /// (`-` = no line).
    struct Fixture {
        name: &'static str,
        first_line: i32,
        table: &'static str,
        lines: &'static str,
    }

    fn unhex(hex: &str) -> Vec<u8> {
        assert!(hex.len().is_multiple_of(2), "odd hex length");
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn expand(runs: &str) -> Vec<Option<u32>> {
        let mut out = Vec::new();
        for run in runs.split(' ') {
            let (line, count) = run.split_once('*').expect("LINE*COUNT");
            let line = (line != "-").then(|| line.parse().expect("line"));
            let count: usize = count.parse().expect("count");
            out.extend(std::iter::repeat_n(line, count));
        }
        out
    }

    fn check(version: &str, fixtures: &[Fixture]) {
        for f in fixtures {
            let table = unhex(f.table);
            // CPython puts a module's first instruction (its RESUME) on line
            // 0, one before `co_firstlineno`: not a source line, so `None`.
            let want: Vec<_> = expand(f.lines)
                .into_iter()
                .map(|l| l.filter(|&l| l >= 1))
                .collect();
            for (i, &line) in want.iter().enumerate() {
                let i = u32::try_from(i).expect("small");
                assert_eq!(
                    line_of(&table, f.first_line, i),
                    line,
                    "{version} {}: code unit {i}",
                    f.name
                );
            }
            let units = u32::try_from(want.len()).expect("small");
            for past in [units, units + 1, units + 1000, u32::MAX] {
                assert_eq!(
                    line_of(&table, f.first_line, past),
                    None,
                    "{version} {}",
                    f.name
                );
            }
        }
    }

    #[test]
    fn cpython_3_11() {
        check("3.11", PY311);
    }

    #[test]
    fn cpython_3_12() {
        check("3.12", PY312);
    }

    #[test]
    fn cpython_3_13() {
        check("3.13", PY313);
    }

    /// Encoders for hand-made tables, written from the format description
    /// rather than from the decoder.
    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 64 {
            out.push(0x40 | (v & 0x3f) as u8);
            v >>= 6;
        }
        out.push(v as u8);
    }

    fn put_signed(out: &mut Vec<u8>, d: i64) {
        let v = if d < 0 {
            (d.unsigned_abs() << 1) | 1
        } else {
            (d as u64) << 1
        };
        put_varint(out, v);
    }

    fn head(code: u8, units: u8) -> u8 {
        0x80 | (code << 3) | (units - 1)
    }

    #[test]
    fn varint_examples_from_the_docs() {
        assert_eq!(varint(&[0x3f]), Some((63, &[][..])));
        assert_eq!(varint(&[0x48, 0x03, 0x7f]), Some((200, &[0x7f][..])));
        let mut v = Vec::new();
        put_varint(&mut v, 200);
        assert_eq!(v, [0x48, 0x03]);
        assert_eq!(signed_varint(&[0x05]), Some((-2, &[][..])));
        assert_eq!(signed_varint(&[0x04]), Some((2, &[][..])));
    }

    #[test]
    fn no_location_keeps_the_running_line() {
        // +3 (no columns, 2 units), no location (1 unit), short form (1
        // unit), one-line +2 (1 unit).
        let table = [
            head(NO_COLUMNS, 2),
            0x06,
            head(NO_LOCATION, 1),
            head(0, 1),
            0x00,
            head(12, 1),
            0x00,
            0x01,
        ];
        let lines: Vec<_> = (0..6).map(|i| line_of(&table, 10, i)).collect();
        assert_eq!(lines, [Some(13), Some(13), None, Some(13), Some(15), None]);
    }

    #[test]
    fn long_deltas_both_ways() {
        let mut table = vec![head(LONG_FORM, 1)];
        put_signed(&mut table, 5000);
        table.extend([0x00, 0x01, 0x01]);
        table.push(head(NO_COLUMNS, 1));
        put_signed(&mut table, -4990);
        assert_eq!(line_of(&table, 1, 0), Some(5001));
        assert_eq!(line_of(&table, 1, 1), Some(11));
    }

    #[test]
    fn lines_out_of_range_are_none() {
        // Below 1, including a negative first line.
        assert_eq!(line_of(&[head(NO_COLUMNS, 1), 0x03], 1, 0), None);
        assert_eq!(line_of(&[head(0, 1), 0x00], 0, 0), None);
        assert_eq!(line_of(&[head(0, 1), 0x00], -7, 0), None);
        // A negative first line brought back above 0 by a delta is fine.
        assert_eq!(line_of(&[head(NO_COLUMNS, 1), 0x10], -7, 0), Some(1));
        // Beyond u32.
        let mut table = vec![head(NO_COLUMNS, 1)];
        put_signed(&mut table, 1 << 40);
        assert_eq!(line_of(&table, i32::MAX, 0), None);
        // i64 overflow of the running line over many huge deltas.
        let mut table = Vec::new();
        for _ in 0..20 {
            table.push(head(NO_COLUMNS, 1));
            put_signed(&mut table, (1 << 59) - 1);
        }
        assert_eq!(line_of(&table, i32::MAX, 19), None);
    }

    #[test]
    fn malformed_tables_are_none() {
        // Empty, or not starting an entry.
        assert_eq!(line_of(&[], 1, 0), None);
        assert_eq!(line_of(&[0x00, head(0, 1), 0x00], 1, 0), None);
        // Varint running into the next entry, or off the end.
        assert_eq!(
            line_of(&[head(NO_COLUMNS, 1), 0x42, head(0, 1), 0x00], 1, 0),
            None
        );
        assert_eq!(line_of(&[head(NO_COLUMNS, 1), 0x42], 1, 0), None);
        // Varint of 11 chunks (10 is the most accepted).
        let mut table = vec![head(NO_COLUMNS, 1)];
        table.extend([0x40; 10]);
        table.push(0x00);
        assert_eq!(line_of(&table, 1, 0), None);
        table.remove(1);
        assert_eq!(line_of(&table, 1, 0), Some(1));
        // Bodies of the wrong size.
        assert_eq!(line_of(&[head(0, 1)], 1, 0), None);
        assert_eq!(line_of(&[head(0, 1), 0x00, 0x00], 1, 0), None);
        assert_eq!(line_of(&[head(11, 1), 0x00], 1, 0), None);
        assert_eq!(line_of(&[head(NO_LOCATION, 1), 0x00], 1, 0), None);
        assert_eq!(line_of(&[head(NO_COLUMNS, 1), 0x00, 0x00], 1, 0), None);
        assert_eq!(line_of(&[head(LONG_FORM, 1), 0x00, 0x00, 0x00], 1, 0), None);
        assert_eq!(
            line_of(&[head(LONG_FORM, 1), 0x00, 0x00, 0x00, 0x00, 0x00], 1, 0),
            None
        );
        // A bad entry before `index` spoils it; one after it does not.
        assert_eq!(line_of(&[head(0, 1), head(0, 1), 0x00], 1, 1), None);
        assert_eq!(line_of(&[head(0, 1), 0x00, head(0, 1)], 1, 0), Some(1));
    }

    /// One entry of a generated well-formed table.
    #[derive(Debug, Clone)]
    enum Entry {
        Short(u8),
        OneLine(u8),
        NoColumns(i64),
        Long(i64, u64, u64, u64),
        NoLocation,
    }

    fn entry() -> impl Strategy<Value = (Entry, u8)> {
        let kind = prop_oneof![
            (0u8..10).prop_map(Entry::Short),
            (0u8..3).prop_map(Entry::OneLine),
            (-3000i64..3000).prop_map(Entry::NoColumns),
            (-3000i64..3000, 0u64..5000, 0u64..300, 0u64..300)
                .prop_map(|(d, e, c, ec)| Entry::Long(d, e, c, ec)),
            Just(Entry::NoLocation),
        ];
        (kind, 1u8..=8)
    }

    /// Encodes `entries`, and the line of each code unit they cover.
    fn encode(entries: &[(Entry, u8)], first_line: i32) -> (Vec<u8>, Vec<Option<u32>>) {
        let (mut table, mut lines) = (Vec::new(), Vec::new());
        let mut line = i64::from(first_line);
        for (e, units) in entries {
            let known = match *e {
                Entry::Short(code) => {
                    table.extend([head(code, *units), 0x25]);
                    true
                }
                Entry::OneLine(d) => {
                    table.extend([head(ONE_LINE_0 + d, *units), 0x04, 0x7f]);
                    line += i64::from(d);
                    true
                }
                Entry::NoColumns(d) => {
                    table.push(head(NO_COLUMNS, *units));
                    put_signed(&mut table, d);
                    line += d;
                    true
                }
                Entry::Long(d, end, col, end_col) => {
                    table.push(head(LONG_FORM, *units));
                    put_signed(&mut table, d);
                    for v in [end, col, end_col] {
                        put_varint(&mut table, v);
                    }
                    line += d;
                    true
                }
                Entry::NoLocation => {
                    table.push(head(NO_LOCATION, *units));
                    false
                }
            };
            let at = known
                .then(|| u32::try_from(line).ok().filter(|&l| l >= 1))
                .flatten();
            lines.extend(std::iter::repeat_n(at, usize::from(*units)));
        }
        (table, lines)
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn arbitrary_bytes_never_panic(
            table in proptest::collection::vec(any::<u8>(), 0..300),
            first_line in any::<i32>(),
            index in prop_oneof![0u32..2500, any::<u32>()],
        ) {
            let line = line_of(&table, first_line, index);
            if let Some(l) = line {
                prop_assert!(l >= 1);
                // Bytes after the entry that answered change nothing.
                let mut longer = table.clone();
                longer.extend_from_slice(&table);
                prop_assert_eq!(line_of(&longer, first_line, index), line);
            }
        }

        #[test]
        fn well_formed_tables_decode_to_their_lines(
            entries in proptest::collection::vec(entry(), 0..60),
            first_line in -100i32..100_000,
        ) {
            let (table, lines) = encode(&entries, first_line);
            for (i, &want) in lines.iter().enumerate() {
                let i = u32::try_from(i).expect("small");
                prop_assert_eq!(line_of(&table, first_line, i), want, "code unit {}", i);
            }
            let units = u32::try_from(lines.len()).expect("small");
            prop_assert_eq!(line_of(&table, first_line, units), None);
        }
    }

    // Fixtures, printed by a script run with each interpreter: from one
    // compiled source, the functions `loop` (for/while, continue),
    // `handler` (try/except/finally: entries with no location), `multi`
    // (a call and a list comprehension over many lines, lines going back),
    // its `<lambda>`, `backwards` (a chained call split over lines, `with`,
    // a `<genexpr>` in its own code object), `gaps` (jumps of +301 and
    // -400 lines: multi-chunk varints), `wide` (columns past 127: long
    // form), `columns` (columns 0..=79: every short form, codes 0..=9),
    // `agen` (async generator), the `<module>` itself (line 0, and
    // long jumps between functions), and `far` (`co_firstlineno` 5001,
    // compiled after 5000 blank lines); then `loop` and `handler` again
    // under `-X no_debug_ranges`, where every located entry is of the
    // no-columns form (code 13). Together they use every code, 0..=15.

    /// CPython 3.11.7 (Debian's 3.11.2 gives the same tables).
    #[rustfmt::skip]
    const PY311: &[Fixture] = &[
        Fixture {
            name: "loop",
            first_line: 2,
            table: "8000d80c0d8045d80d0ff000040515f0000405158801d80b0c88718935f000030915d80c119051894a88458845e00c14d80a0f90238a2b882bd8080d9021890b8805f003000b1090238a2b882be00b10804c",
            lines: "2*1 3*2 4*4 5*5 6*6 8*1 9*6 10*5 9*6 11*2",
        },
        Fixture {
            name: "handler",
            first_line: 13,
            table: "8000f002060511d80f10887189738c73f00a000d1188018801f8f509000d179d08d00b21f00002050ef00002050ef00002050edd080d886189088c088808d8080df8f8f8f8f00502050ef8f8f8f8f008000d1188018808880888088808",
            lines: "13*1 14*1 15*9 20*3 -*1 16*16 17*15 18*1 -*4 16*1 -*4 20*6",
        },
        Fixture {
            name: "multi",
            first_line: 22,
            table: "8000dd0d10d80809d80809f002030d0af000030d0af007070e06f100070e06f400070e068046f010040c06f000040c06e511169076911d941df005040c06f100040c06f400040c06f000040506",
            lines: "22*1 23*6 24*1 25*1 26*2 23*9 31*2 33*14 31*9",
        },
        Fixture {
            name: "<lambda>",
            first_line: 26,
            table: "8000d80c0dd80e0ff103010d10f003000101",
            lines: "26*1 27*1 28*1 27*2 26*1",
        },
        Fixture {
            name: "backwards",
            first_line: 37,
            table: "8000d80c0d8f458a45d8080de00809f107040d06f400040d06f40800070bf00900050af50a000a0e886189178c17f00002051a9041dd1013f00001141af00001141a9871f00001141af10001141af40001141af10001111af40001111a8805f00302051af00002051af00002051af10002051af40002051af00002051af00002051af00002051af00002051af00002051af00002051af8f8f8f00002051af00002051af00002051af00002051af006000c119035893dd00418",
            lines: "37*1 38*12 39*1 41*1 38*7 42*5 38*1 43*16 44*25 43*16 -*3 43*4 46*5",
        },
        Fixture {
            name: "<genexpr>",
            first_line: 44,
            table: "e800e8008000f00001141af00001141a9821d81718f00301141a9041f00001141af00001141af00001141af00001141af00001141af00001141a",
            lines: "44*6 45*1 44*8",
        },
        Fixture {
            name: "gaps",
            first_line: 48,
            table: "8000d808098801882189048c048041f05a0900090a8801882189048c048041d80b0c8831d80809f0620c00090af1650c53060c06f40053060c06f00053060506",
            lines: "48*1 49*11 350*11 351*2 352*1 753*1 351*8",
        },
        Fixture {
            name: "wide",
            first_line: 756,
            table: "8000f00200095303f0000056035703f100000957038041f000005d035e03f700005d036403f200005d036403f100005d036603f400005d036603f0000069036a03f7000069037003f2000069037003f1000069037203f4000069037203f100005d037203f0000075037603f7000075037c03f2000075037c03f1000075037e03f4000075037e03f100005d037e03f0000041044204f100005d034204f0000059035a03d80b0c8048",
            lines: "756*1 757*70 758*2",
        },
        Fixture {
            name: "columns",
            first_line: 760,
            table: "8000d808098801882189048c0488718871901189748c74890b90619061980191649464d1081a98519851987199549c54d10821a041a041a061a144a444d10828a831a831a851a934ac34d1082fb021b021b041b124b424d10836b811b811b831b914bc14d1083dc001c001c021c104c404d10844c071c071c811c174c474d1084bc861c861d05051c964cc64d108528041d80b0c8048",
            lines: "760*1 761*131 762*2",
        },
        Fixture {
            name: "agen",
            first_line: 764,
            table: "e800e8008000d81315f000010510f000010510f000010510f000010510f000010510f000010510f0000105108861d80e0f88078807880788078807f00300141690329032",
            lines: "764*3 765*9 766*6 765*3",
        },
        Fixture {
            name: "far",
            first_line: 5001,
            table: "8000d80b0c88718935804c",
            lines: "5001*1 5002*5",
        },
        Fixture {
            name: "<module>",
            first_line: 1,
            table: "f003010101f004090111f000090111f000090111f016070111f000070111f000070111f0120d0106f0000d0106f0000d0106f01e090119f000090119f000090119f016420b0106f000420b0106f000420b0106f0481602010df00002010df00002010df00802010df00002010df00002010df008020110f000020110f000020110f000020110f000020110",
            lines: "0*1 2*3 13*3 22*3 37*3 48*3 756*3 760*3 764*5",
        },
        Fixture {
            name: "loop (no_debug_ranges)",
            first_line: 2,
            table: "e800e802e800e802e800e800e800e802e800e900e800e802e800e900e800e800e804e802e800ea00e800e802e800e900e800e803e800ea00e800e804e800",
            lines: "2*1 3*2 4*4 5*5 6*6 8*1 9*6 10*5 9*6 11*2",
        },
        Fixture {
            name: "handler (no_debug_ranges)",
            first_line: 13,
            table: "e800e802e802e800e900ec00e80ae800e800f8ed09ed00e800e800e800e800ed02e800e900ec00e800e802f8f8f8f8e805f8f8f8f8e808e800e800e800e800e800",
            lines: "13*1 14*1 15*9 20*3 -*1 16*16 17*15 18*1 -*4 16*1 -*4 20*6",
        },
    ];

    /// CPython 3.12.1.
    #[rustfmt::skip]
    const PY312: &[Fixture] = &[
        Fixture {
            name: "loop",
            first_line: 2,
            table: "8000d80c0d8045d80d0ff2000405158801d80b0c88718a35d80c119051894a8945e00c14f009040515f00a000b1090238a2bd8080d9021890b8805f003000b1090238b2be00b10804c",
            lines: "2*1 3*2 4*5 5*5 6*6 8*1 4*1 9*5 10*5 9*6 11*2",
        },
        Fixture {
            name: "handler",
            first_line: 13,
            table: "8000f002060511d90f108b73f00a000d118901f8f409000d179c08d00b21f20002050edc080d88618c08d8080dfbf00502050efbf008000d118901fa",
            lines: "13*1 14*1 15*6 20*3 -*1 16*14 17*11 18*1 -*4 16*1 -*4 20*3 -*3",
        },
        Fixture {
            name: "multi",
            first_line: 22,
            table: "8000dc0d10d80809d80809f102030d0af407070e068046f4140012179076931df605040c06e00c0dd90b0cf20500090af203040c06f000040506f9f200040c06",
            lines: "22*1 23*5 24*1 25*1 26*2 23*6 33*10 31*7 33*1 34*2 32*3 31*4 -*2 31*3",
        },
        Fixture {
            name: "<lambda>",
            first_line: 26,
            table: "8000d80c0dd80e0ff103010d10f003000101",
            lines: "26*1 27*1 28*1 27*2 26*1",
        },
        Fixture {
            name: "backwards",
            first_line: 37,
            table: "8000d80c0d8f458945d8080de00809f307040d06f70800070b8164f00900050af40a000a0e88618b17f00002051a9041dc1013f10001141a9871f40001141af30001111a8805f70302051af006000c119035893dd00418f70702051af006000c119035893dd00418fa",
            lines: "37*1 38*11 39*1 41*1 38*4 42*10 38*1 43*12 44*18 43*8 46*5 43*8 46*5 -*3",
        },
        Fixture {
            name: "<genexpr>",
            first_line: 44,
            table: "e800f88000f20001141a9821d91718f403001516f10001141af9",
            lines: "44*1 -*1 44*5 45*2 44*7 -*2",
        },
        Fixture {
            name: "gaps",
            first_line: 48,
            table: "8000d9080988218b048041f15a0900090a88218b048041d90b0cd80809f0620c00090af3650c53060c06f00053060506",
            lines: "48*1 49*8 350*8 351*2 352*1 753*1 351*5",
        },
        Fixture {
            name: "wide",
            first_line: 756,
            table: "8000f00200095303f0000056035703f100000957038041f000005d035e03f700005d036403f100005d036403f300005d036603f0000069036a03f7000069037003f1000069037003f3000069037203f100005d037203f0000075037603f7000075037c03f1000075037c03f3000075037e03f100005d037e03f0000041044204f100005d034204f0000059035a03d80b0c8048",
            lines: "756*1 757*58 758*2",
        },
        Fixture {
            name: "columns",
            first_line: 760,
            table: "8000d9080988218b04897190118b74890b916198019364d1081a995198719b54d10821a141a061a344d10828a931a851ab34d1082fb121b041b324d10836b911b831bb14d1083dc101c021c304d10844c171c811c374d1084bc961d05051cb64d108528041d80b0c8048",
            lines: "760*1 761*98 762*2",
        },
        Fixture {
            name: "agen",
            first_line: 764,
            table: "e800f88000d81315f700010510f0000105108861d80e0f8c07f003010510f89132f9",
            lines: "764*1 -*1 764*1 765*11 766*6 765*1 -*1 765*2 -*2",
        },
        Fixture {
            name: "far",
            first_line: 5001,
            table: "8000d80b0c88718935804c",
            lines: "5001*1 5002*5",
        },
        Fixture {
            name: "<module>",
            first_line: 1,
            table: "f003010101f204090111f216070111f2120d0106f21e090119f216420b0106f2481602010df20802010df308020110",
            lines: "0*1 2*3 13*3 22*3 37*3 48*3 756*3 760*3 764*4",
        },
        Fixture {
            name: "loop (no_debug_ranges)",
            first_line: 2,
            table: "e800e802e800e802ea00e800e802e800ea00e802e800e900e900e804e809e80ae800ea00e802e800e900e800e803e800eb00e804e800",
            lines: "2*1 3*2 4*5 5*5 6*6 8*1 4*1 9*5 10*5 9*6 11*2",
        },
        Fixture {
            name: "handler (no_debug_ranges)",
            first_line: 13,
            table: "e800e802e902eb00e80ae900f8ec09ec00e800ea00ec02e800ec00e802fbe805fbe808e900fa",
            lines: "13*1 14*1 15*6 20*3 -*1 16*14 17*11 18*1 -*4 16*1 -*4 20*3 -*3",
        },
    ];

    /// CPython 3.13.0.
    #[rustfmt::skip]
    const PY313: &[Fixture] = &[
        Fixture {
            name: "loop",
            first_line: 2,
            table: "8000d80c0d8045db0d0f8801d80b0c88718f35d80c11894a8a45e10c14f109000e10f00a000b1090238b2bd8080d9021890b8805f003000b1090238d2be00b10804c",
            lines: "2*1 3*2 4*5 5*10 6*6 8*2 4*2 9*6 10*5 9*8 11*2",
        },
        Fixture {
            name: "handler",
            first_line: 13,
            table: "8000f002060511d90f108b73f00a000d118901f8f409000d179c08d00b21f30002050edc080d88618c08d8080dfbf00502050efbf008000d118901fa",
            lines: "13*1 14*1 15*6 20*3 -*1 16*15 17*11 18*1 -*4 16*1 -*4 20*3 -*3",
        },
        Fixture {
            name: "multi",
            first_line: 22,
            table: "8000dc0d10d80809d80809f102030d0af107070e068046f4140012179076941df305040c06e1111e8841dc0b0cf70500090ad9111ef105040c06f000040506f9f200040c06",
            lines: "22*1 23*5 24*1 25*1 26*2 23*3 33*11 31*4 33*3 34*5 32*8 33*2 31*3 -*2 31*3",
        },
        Fixture {
            name: "<lambda>",
            first_line: 26,
            table: "8000d80c0dd80e0ff203010d10",
            lines: "26*1 27*1 28*1 27*3",
        },
        Fixture {
            name: "backwards",
            first_line: 37,
            table: "8000d80c0d8f458945d8080de00809f307040d06f70800070b8164f00900050af40a000a0e88618c179041dc1013f10001141a9971f30001141af30001111a8805f703000a11f006000c11893dd00418f707000a118c17f006000c119035893dd00418fa",
            lines: "37*1 38*11 39*1 41*1 38*4 42*10 38*1 43*12 44*18 43*8 46*4 43*13 46*5 -*3",
        },
        Fixture {
            name: "<genexpr>",
            first_line: 44,
            table: "e9008000f00001141a99719821dc1718f70300151691419a71f9",
            lines: "44*7 45*5 44*13 -*2",
        },
        Fixture {
            name: "gaps",
            first_line: 48,
            table: "8000d9080988218b048041f15a0900090a88218b048041d90b0cd80809f0620c00090af3650c53060c06f00053060506",
            lines: "48*1 49*8 350*8 351*2 352*1 753*1 351*5",
        },
        Fixture {
            name: "wide",
            first_line: 756,
            table: "8000f00200095303f0000056035703f100000957038041f700005d036403f100005d036403f300005d036603f0000069036a03f7000069037003f1000069037003f3000069037203f100005d037203f0000075037603f7000075037c03f1000075037c03f3000075037e03f100005d037e03f0000041044204f100005d034204f0000059035a03d80b0c8048",
            lines: "756*1 757*57 758*2",
        },
        Fixture {
            name: "columns",
            first_line: 760,
            table: "8000d9080988218b04897190118b74890b916198019364d1081a995198719b54d10821a141a061a344d10828a931a851ab34d1082fb121b041b324d10836b911b831bb14d1083dc101c021c304d10844c171c811c374d1084bc961d05051cb64d108528041d80b0c8048",
            lines: "760*1 761*98 762*2",
        },
        Fixture {
            name: "agen",
            first_line: 764,
            table: "e9008000d91315f7000105108861d80e0f8d07f1030105109132f9",
            lines: "764*3 765*11 766*7 765*4 -*2",
        },
        Fixture {
            name: "far",
            first_line: 5001,
            table: "8000d80b0c88718935804c",
            lines: "5001*1 5002*5",
        },
        Fixture {
            name: "<module>",
            first_line: 1,
            table: "f003010101f204090111f216070111f2120d0106f21e090119f216420b0106f2481602010df20802010df308020110",
            lines: "0*1 2*3 13*3 22*3 37*3 48*3 756*3 760*3 764*4",
        },
        Fixture {
            name: "loop (no_debug_ranges)",
            first_line: 2,
            table: "e800e802e800eb02e800e802e800ef00e802e900ea00e904e909e80ae800eb00e802e800e900e800e803e800ed00e804e800",
            lines: "2*1 3*2 4*5 5*10 6*6 8*2 4*2 9*6 10*5 9*8 11*2",
        },
        Fixture {
            name: "handler (no_debug_ranges)",
            first_line: 13,
            table: "e800e802e902eb00e80ae900f8ec09ec00e800eb00ec02e800ec00e802fbe805fbe808e900fa",
            lines: "13*1 14*1 15*6 20*3 -*1 16*15 17*11 18*1 -*4 16*1 -*4 20*3 -*3",
        },
    ];
}
