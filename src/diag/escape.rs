//! Names from outside the tool (comms, function names, paths) escaped for
//! printing, in the report and in diagnostics alike: a traced process
//! chooses them, so none may add a line, a field or a word that reads as
//! the tool's own. docs/names.md states the rule for users.

use std::borrow::Cow;

use crate::event::Comm;

/// Where a name is printed; each place has separators of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A field of a folded (`-f`) line.
    Folded,
    /// A frame or comm in the default output.
    Text,
    /// Inside double quotes, which [`escape`] adds (NOTE lines on stderr).
    Quoted,
}

/// What an empty name prints as (not in quotes): a field or frame that
/// shows nothing would read as the tool's "no waker".
pub(crate) const EMPTY: &str = "[empty]";

/// `name` as printed at `place`:
/// - everywhere, `\` is `\\`; newline, tab and carriage return are `\n`,
///   `\t`, `\r`; every other control character (C0, DEL, C1), line or
///   paragraph separator, bidirectional-text control and noncharacter
///   (U+FFFE, U+FFFF, ...), and every byte that is not UTF-8, is `\xNN`
///   for each of its bytes; so is whitespace that begins or ends the name.
///   What remains is text XML 1.0 allows;
/// - outside quotes, a name that begins with `-` or `[` has that first
///   character escaped (only the tool writes `--`, `[unknown]`, ...), and
///   an empty name is [`EMPTY`];
/// - [`Place::Text`]: so does a name that begins with `waker:` or
///   `target:` (the labels of a block);
/// - [`Place::Folded`]: `;` is escaped, and so are the `[` of `_[`
///   (flamegraph.pl's `_[k]`, `_[w]` colour annotations) and whitespace
///   followed by nothing but a number up to the end of the name
///   (flamegraph.pl would read a second count);
/// - [`Place::Quoted`]: `"` is escaped, and the quotes are added.
pub(crate) fn escape(name: &[u8], place: Place) -> Cow<'_, str> {
    if place == Place::Quoted {
        return Cow::Owned(format!("\"{}\"", escape_units(&units(name), place)));
    }
    if name.is_empty() {
        return Cow::Borrowed(EMPTY);
    }
    if let Ok(text) = std::str::from_utf8(name)
        && is_plain(text, place)
    {
        return Cow::Borrowed(text);
    }
    Cow::Owned(escape_units(&units(name), place))
}

/// True for a name no rule touches, checked cheaply: most function names
/// are made only of these characters, with spaces inside (not at either
/// end, nor before a number that ends the name).
fn is_plain(text: &str, place: Place) -> bool {
    let bytes = text.as_bytes();
    let ordinary =
        |b: &u8| b.is_ascii_alphanumeric() || b" _.:<>()&*,~/{}#$@!?+=%'|^-]".contains(b);
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    bytes.iter().all(ordinary)
        && *first != b' '
        && *first != b'-'
        && *last != b' '
        && !(bytes.contains(&b' ') && (last.is_ascii_digit() || *last == b'.'))
        && !(place == Place::Text && reads_as_label(bytes))
}

/// True when a frame line would read as a block's `waker:` or `target:`.
fn reads_as_label(name: &[u8]) -> bool {
    name.starts_with(b"waker:") || name.starts_with(b"target:")
}

/// One piece of a name: a character, or a byte that is not UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Char(char),
    Byte(u8),
}

impl Unit {
    fn is(self, c: char) -> bool {
        self == Unit::Char(c)
    }

    fn is_whitespace(self) -> bool {
        matches!(self, Unit::Char(c) if c.is_whitespace())
    }
}

fn units(name: &[u8]) -> Vec<Unit> {
    let mut out = Vec::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.extend(chunk.valid().chars().map(Unit::Char));
        out.extend(chunk.invalid().iter().map(|&b| Unit::Byte(b)));
    }
    out
}

/// Characters escaped wherever they are: controls, those that break or
/// reorder a line for some readers, and noncharacters.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || is_noncharacter(c)
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// Unicode's noncharacters: U+FDD0 to U+FDEF and the last two code points
/// of each plane. XML 1.0 forbids U+FFFE and U+FFFF (an SVG holding one
/// does not open) and discourages the others.
fn is_noncharacter(c: char) -> bool {
    matches!(c, '\u{fdd0}'..='\u{fdef}') || (u32::from(c) & 0xfffe) == 0xfffe
}

/// Which units are escaped, for what they are or where they stand.
fn escaped(units: &[Unit], place: Place) -> Vec<bool> {
    let mut out: Vec<bool> = units
        .iter()
        .map(|&u| match u {
            Unit::Byte(_) => true,
            Unit::Char(c) => {
                c == '\\'
                    || is_hidden(c)
                    || (place == Place::Folded && c == ';')
                    || (place == Place::Quoted && c == '"')
            }
        })
        .collect();
    let (Some(&first), Some(&last)) = (units.first(), units.last()) else {
        return out;
    };
    let n = units.len();
    if first.is_whitespace() {
        out[0] = true;
    }
    if last.is_whitespace() {
        out[n - 1] = true;
    }
    if place != Place::Quoted && (first.is('-') || first.is('[')) {
        out[0] = true;
    }
    if place == Place::Text {
        let prefix: String = units
            .iter()
            .take(7)
            .map_while(|u| match u {
                Unit::Char(c) => Some(*c),
                Unit::Byte(_) => None,
            })
            .collect();
        if reads_as_label(prefix.as_bytes()) {
            out[0] = true;
        }
    }
    if place == Place::Folded {
        for i in 1..n {
            if units[i].is('[') && units[i - 1].is('_') {
                out[i] = true;
            }
        }
        // A trailing number (digits, then dots and digits) and the
        // whitespace just before it.
        let number = units
            .iter()
            .rev()
            .take_while(|u| matches!(u, Unit::Char(c) if c.is_numeric() || *c == '.'))
            .count();
        let start = n - number;
        if number > 0
            && start > 0
            && matches!(units[start], Unit::Char(c) if c.is_numeric())
            && units[start - 1].is_whitespace()
        {
            out[start - 1] = true;
        }
    }
    out
}

fn escape_units(units: &[Unit], place: Place) -> String {
    let marks = escaped(units, place);
    let mut out = String::with_capacity(units.len() + 8);
    for (&u, &mark) in units.iter().zip(&marks) {
        match u {
            Unit::Char(c) if !mark => out.push(c),
            Unit::Char('\\') => out.push_str("\\\\"),
            Unit::Char('\n') => out.push_str("\\n"),
            Unit::Char('\t') => out.push_str("\\t"),
            Unit::Char('\r') => out.push_str("\\r"),
            Unit::Char(c) => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    push_hex(&mut out, b);
                }
            }
            Unit::Byte(b) => push_hex(&mut out, b),
        }
    }
    out
}

fn push_hex(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\x");
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}

/// The name printed for a thread nothing named, or a frame nothing
/// resolved.
pub(crate) const UNKNOWN: &str = "[unknown]";

/// A thread's name as printed at `place`.
pub(crate) fn comm(comm: &Comm, place: Place) -> Cow<'_, str> {
    if *comm == Comm::UNKNOWN {
        Cow::Borrowed(UNKNOWN)
    } else {
        escape(comm.as_bytes(), place)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(name: &str) -> String {
        escape(name.as_bytes(), Place::Folded).into_owned()
    }

    fn text(name: &str) -> String {
        escape(name.as_bytes(), Place::Text).into_owned()
    }

    fn quoted(name: &str) -> String {
        escape(name.as_bytes(), Place::Quoted).into_owned()
    }

    #[test]
    fn ordinary_names_are_borrowed_unchanged() {
        for name in [
            "main",
            "__x64_sys_nanosleep",
            "kworker/0:1",
            "swapper/1",
            "std::io::default_read_to_string::<std::fs::File>::{closure#0}",
            "<alloc::string::String as core::fmt::Write>::write_fmt",
            "kallsyms_expand_symbol.constprop.0",
        ] {
            for place in [Place::Folded, Place::Text] {
                assert!(
                    matches!(escape(name.as_bytes(), place), Cow::Borrowed(n) if n == name),
                    "{name:?} at {place:?}"
                );
            }
        }
    }

    #[test]
    fn names_with_spaces_brackets_and_dashes_inside_stay() {
        for name in [
            "foo(int, char const*)",
            "(anonymous namespace)::run",
            "std::__cxx11::basic_string<char>::_M_create[abi:cxx11]",
            "kworker/u8:1-events",
            "a - b -- c",
            "x 12 y",
            "operator[]",
        ] {
            assert_eq!(folded(name), name);
            assert_eq!(text(name), name);
        }
    }

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(text("a\nb"), r"a\nb");
        assert_eq!(text("a\tb\rc"), r"a\tb\rc");
        assert_eq!(text("\x1b[31mred"), r"\x1b[31mred");
        assert_eq!(text("a\0b\x7f"), r"a\x00b\x7f");
        // C1 controls, each byte of their UTF-8.
        assert_eq!(text("a\u{85}b\u{9b}"), r"a\xc2\x85b\xc2\x9b");
        // Line separators and bidirectional overrides.
        assert_eq!(text("a\u{2028}b"), r"a\xe2\x80\xa8b");
        assert_eq!(text("a\u{202e}b"), r"a\xe2\x80\xaeb");
        assert_eq!(folded("a\nb"), r"a\nb");
        // Other characters outside ASCII stay.
        assert_eq!(text("café ünï"), "café ünï");
    }

    #[test]
    fn noncharacters_become_visible_escapes() {
        assert_eq!(text("a\u{fffe}b\u{ffff}"), r"a\xef\xbf\xbeb\xef\xbf\xbf");
        assert_eq!(folded("\u{fdd0}\u{fdef}"), r"\xef\xb7\x90\xef\xb7\xaf");
        assert_eq!(
            text("\u{1fffe}\u{10ffff}"),
            r"\xf0\x9f\xbf\xbe\xf4\x8f\xbf\xbf"
        );
        assert_eq!(quoted("\u{ffff}"), r#""\xef\xbf\xbf""#);
        // Their neighbours stay.
        for c in ['\u{fdcf}', '\u{fdf0}', '\u{fffd}', '\u{1fffd}', '\u{20000}'] {
            assert_eq!(text(&format!("a{c}")), format!("a{c}"));
        }
    }

    /// XML 1.0's Char, less the characters it discourages (DEL, C1 but
    /// U+85, noncharacters).
    fn is_xml_char(c: char) -> bool {
        let allowed = matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}')
            || c >= '\u{10000}';
        let discouraged = matches!(c, '\u{7f}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{fdd0}'..='\u{fdef}')
            || (u32::from(c) & 0xfffe) == 0xfffe;
        allowed && !discouraged
    }

    /// Whatever a name holds, its escaped form is text that XML 1.0
    /// allows (and does not discourage), as an SVG needs.
    #[test]
    fn every_character_escapes_to_text_xml_allows() {
        assert!(!is_xml_char('\u{fffe}') && !is_xml_char('\0') && is_xml_char('\u{fffd}'));
        let all: Vec<char> = (0..=0x10_ffff).filter_map(char::from_u32).collect();
        for place in [Place::Folded, Place::Text, Place::Quoted] {
            // In names of 4096 characters each, so that it runs fast.
            for chunk in all.chunks(4096) {
                let name: String = chunk.iter().collect();
                let e = escape(name.as_bytes(), place);
                let bad = e.chars().find(|&c| !is_xml_char(c));
                assert_eq!(bad, None, "at {place:?}");
            }
            let e = escape(b"\xef\xbf\xbe\xff\x00", place);
            assert!(e.chars().all(is_xml_char), "{e:?}");
        }
    }

    #[test]
    fn a_backslash_is_escaped_so_that_escapes_are_unambiguous() {
        assert_eq!(text(r"a\nb"), r"a\\nb");
        assert_eq!(text("a\nb"), r"a\nb");
        assert_eq!(folded(r"\x3b"), r"\\x3b");
        assert_eq!(folded(";"), r"\x3b");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_escaped_not_replaced() {
        assert_eq!(escape(b"a\xffb\xc3", Place::Text), r"a\xffb\xc3");
        assert_eq!(escape(b"\xe9t\xe9", Place::Folded), r"\xe9t\xe9");
        assert_eq!(escape(b"\xff", Place::Quoted), r#""\xff""#);
    }

    #[test]
    fn folded_escapes_the_separator_only_there() {
        assert_eq!(folded("ev;il c\nFAKE;9"), r"ev\x3bil c\nFAKE\x3b9");
        assert_eq!(text("ev;il c\nFAKE;9"), r"ev;il c\nFAKE;9");
        // The real 15-byte comm a process can set.
        assert_eq!(folded("ev;il c\nFAKE;99"), r"ev\x3bil c\nFAKE\x3b99");
    }

    #[test]
    fn whitespace_at_either_end_is_escaped() {
        assert_eq!(text(" x "), r"\x20x\x20");
        assert_eq!(folded("  x  "), r"\x20 x \x20");
        assert_eq!(folded("\u{a0}x"), r"\xc2\xa0x");
        assert_eq!(folded(" "), r"\x20");
        assert_eq!(text("        123"), r"\x20       123");
    }

    #[test]
    fn folded_escapes_whitespace_before_a_trailing_number() {
        assert_eq!(folded("x 123"), r"x\x20123");
        assert_eq!(folded("x 1.5"), r"x\x201.5");
        assert_eq!(folded("wk;r\nFAKE;-- 99"), r"wk\x3br\nFAKE\x3b--\x2099");
        // Any whitespace and any digits, as flamegraph.pl's \s and \d.
        assert_eq!(folded("x\u{3000}\u{663}"), "x\\xe3\\x80\\x80\u{663}");
        // Not a count: no whitespace before it, or more than a number.
        assert_eq!(folded("x123"), "x123");
        assert_eq!(folded("x 1 a"), "x 1 a");
        assert_eq!(folded("x .5"), "x .5");
        assert_eq!(folded("x 1 2"), r"x 1\x202");
        // The default output keeps the count on a line of its own.
        assert_eq!(text("x 123"), "x 123");
    }

    #[test]
    fn folded_escapes_flamegraph_annotations() {
        assert_eq!(folded("evil_[w]"), r"evil_\x5bw]");
        assert_eq!(folded("f_[k]"), r"f_\x5bk]");
        assert_eq!(text("evil_[w]"), "evil_[w]");
        assert_eq!(folded("a[abi:cxx11]"), "a[abi:cxx11]");
    }

    #[test]
    fn names_that_read_as_the_tools_words_are_marked() {
        for place in [Place::Folded, Place::Text] {
            let e = |n: &str| escape(n.as_bytes(), place).into_owned();
            assert_eq!(e("--"), r"\x2d-");
            assert_eq!(e("-"), r"\x2d");
            assert_eq!(e("[-]"), r"\x5b-]");
            assert_eq!(e("[unknown]"), r"\x5bunknown]");
            assert_eq!(e("[Missed User Stack]"), r"\x5bMissed User Stack]");
            assert_eq!(e("[empty]"), r"\x5bempty]");
            assert_eq!(e("--               --"), r"\x2d-               --");
            assert_eq!(e(""), EMPTY);
        }
        assert_eq!(text("waker:           x 1"), r"\x77aker:           x 1");
        assert_eq!(text("target: x 1"), r"\x74arget: x 1");
        assert_eq!(folded("target:x"), "target:x");
    }

    #[test]
    fn quoted_names_escape_quotes_and_keep_the_rest() {
        assert_eq!(quoted("sleep"), r#""sleep""#);
        assert_eq!(quoted(r#"a", TID 9 "b"#), r#""a\x22, TID 9 \x22b""#);
        assert_eq!(quoted("a\nNOTE: x"), r#""a\nNOTE: x""#);
        assert_eq!(quoted(""), r#""""#);
        assert_eq!(quoted("--"), r#""--""#);
        assert_eq!(quoted("a;b"), r#""a;b""#);
    }

    /// Whatever the name, its escaped form is one field of one line, and
    /// different names never print alike.
    #[test]
    fn escaped_names_stay_one_field_and_distinct() {
        let names: Vec<Vec<u8>> = vec![
            b"ev;il c\nFAKE;9".to_vec(),
            b"a;b c\td\r\x1b[0m".to_vec(),
            b"x \\x20".to_vec(),
            b"x\\ ".to_vec(),
            b"x  ".to_vec(),
            b"\xff\xfe".to_vec(),
            "\u{ff}\u{fe}".as_bytes().to_vec(),
            b"--".to_vec(),
            b"\\x2d-".to_vec(),
            b"-".to_vec(),
            b"".to_vec(),
            b"[empty]".to_vec(),
            b"_[w] 7".to_vec(),
            "\u{fffe}".as_bytes().to_vec(),
            b"\\xef\\xbf\\xbe".to_vec(),
        ];
        for place in [Place::Folded, Place::Text, Place::Quoted] {
            let mut seen = std::collections::HashSet::new();
            for name in &names {
                let e = escape(name, place);
                assert!(!e.chars().any(is_hidden), "{e:?}");
                assert_eq!(e.trim(), e, "{e:?}");
                if place == Place::Folded {
                    assert!(!e.contains(';'), "{e:?}");
                }
                assert!(
                    seen.insert(e.clone().into_owned()),
                    "{name:?} at {place:?}: {e}"
                );
            }
        }
    }
}
