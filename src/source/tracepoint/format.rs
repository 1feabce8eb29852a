//! Parsing of tracefs event `format` files into named fields, and typed reads
//! of those fields out of a raw tracepoint payload.
//!
//! A format file looks like this (tabs between the `;`-separated parts):
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!
//!     field:char prev_comm[16];    offset:8;    size:16;    signed:0;
//!     field:pid_t prev_pid;    offset:24;    size:4;    signed:1;
//!     field:__data_loc char[] filename;    offset:8;    size:4;    signed:0;
//!
//! print fmt: "prev_comm=%s ...", REC->prev_comm, ...
//! ```
//!
//! Field offsets always come from here: nothing else in the crate hard-codes
//! a tracepoint layout.

use anyhow::{Context, Result, anyhow, ensure};

use crate::bytes;

/// One field of a tracepoint payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) name: String,
    /// C type as written, e.g. `pid_t`, `char`, `unsigned short`,
    /// `__data_loc char[]`.
    pub(crate) type_name: String,
    pub(crate) offset: usize,
    pub(crate) size: usize,
    pub(crate) signed: bool,
    /// `Some(n)` for `char prev_comm[16]`-style arrays.
    pub(crate) array_len: Option<usize>,
}

/// A payload field that cannot be read as asked. Decoders count these
/// (a malformed entry) rather than show them, so they carry numbers, not
/// names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FieldError {
    #[error("a field of {size} bytes at offset {offset} lies outside the {len}-byte payload")]
    Outside {
        offset: usize,
        size: usize,
        len: usize,
    },
    #[error("a field of {size} bytes is not an integer of 1, 2, 4 or 8 bytes")]
    NotInteger { size: usize },
    #[error("the field is not a 4-byte __data_loc or __rel_loc field")]
    NotDynamic,
}

impl Field {
    /// Reads an integer field (size 1, 2, 4 or 8, native endian),
    /// sign-extended when the field is signed.
    pub(crate) fn read_i64(&self, raw: &[u8]) -> Result<i64, FieldError> {
        let b = self.bytes(raw)?;
        let v = match (self.size, self.signed) {
            (1, true) => b[0] as i8 as i64,
            (1, false) => b[0] as i64,
            (2, true) => i16::from_ne_bytes([b[0], b[1]]) as i64,
            (2, false) => u16::from_ne_bytes([b[0], b[1]]) as i64,
            (4, true) => bytes::u32_at(b, 0).unwrap_or_default() as i32 as i64,
            (4, false) => bytes::u32_at(b, 0).unwrap_or_default() as i64,
            (8, _) => bytes::u64_at(b, 0).unwrap_or_default() as i64,
            (size, _) => return Err(FieldError::NotInteger { size }),
        };
        Ok(v)
    }

    /// Same as [`Field::read_i64`], as u64 (bit pattern kept).
    pub(crate) fn read_u64(&self, raw: &[u8]) -> Result<u64, FieldError> {
        self.read_i64(raw).map(|v| v as u64)
    }

    /// The field's bytes (for `char[16]` comms and the like).
    pub(crate) fn bytes<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], FieldError> {
        let outside = FieldError::Outside {
            offset: self.offset,
            size: self.size,
            len: raw.len(),
        };
        let end = self.offset.checked_add(self.size).ok_or(outside)?;
        raw.get(self.offset..end).ok_or(outside)
    }

    /// True for `__data_loc` / `__rel_loc` fields, whose payload lives after
    /// the fixed part of the record (see [`Field::dynamic_bytes`]).
    pub(crate) fn is_dynamic(&self) -> bool {
        self.type_name.starts_with("__data_loc") || self.type_name.starts_with("__rel_loc")
    }

    /// For a `__data_loc`/`__rel_loc` field: the bytes it points at. The
    /// field itself is a u32 whose low 16 bits are the offset (from the start
    /// of the payload for `__data_loc`, from the end of the field for
    /// `__rel_loc`) and whose high 16 bits are the length.
    pub(crate) fn dynamic_bytes<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8], FieldError> {
        if !self.is_dynamic() || self.size != 4 {
            return Err(FieldError::NotDynamic);
        }
        let loc = self.read_u64(raw)? as u32;
        let mut off = (loc & 0xffff) as usize;
        let len = (loc >> 16) as usize;
        if self.type_name.starts_with("__rel_loc") {
            off += self.offset + self.size;
        }
        raw.get(off..off + len).ok_or(FieldError::Outside {
            offset: off,
            size: len,
            len: raw.len(),
        })
    }
}

/// A parsed `format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventFormat {
    pub(crate) name: String,
    pub(crate) id: u32,
    /// Common fields first, then the event's own, in file order.
    pub(crate) fields: Vec<Field>,
    pub(crate) print_fmt: String,
}

impl EventFormat {
    pub(crate) fn parse(text: &str) -> Result<EventFormat> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print_fmt = None;

        for (lineno, line) in text.lines().enumerate() {
            let lineno = lineno + 1;
            let t = line.trim();
            if t.is_empty() || t == "format:" {
                continue;
            }
            if let Some(rest) = t.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = t.strip_prefix("ID:") {
                let v = rest.trim();
                id = Some(
                    v.parse::<u32>()
                        .with_context(|| format!("line {lineno}: bad event ID `{v}`"))?,
                );
            } else if let Some(rest) = t.strip_prefix("print fmt:") {
                print_fmt = Some(rest.trim().to_string());
            } else if t.starts_with("field:") || t.starts_with("field ") {
                let f = parse_field(t).with_context(|| format!("line {lineno}: `{t}`"))?;
                fields.push(f);
            }
            // Anything else (future additions to the format) is ignored.
        }

        let name = name.ok_or_else(|| anyhow!("format has no `name:` line"))?;
        let id = id.ok_or_else(|| anyhow!("format of `{name}` has no `ID:` line"))?;
        ensure!(!fields.is_empty(), "format of `{name}` has no fields");
        Ok(EventFormat {
            name,
            id,
            fields,
            print_fmt: print_fmt.unwrap_or_default(),
        })
    }

    /// Bytes from the start of the payload to the end of its last field
    /// (dynamic fields' data, which follows, not included).
    pub(crate) fn fixed_size(&self) -> usize {
        self.fields
            .iter()
            .map(|f| f.offset + f.size)
            .max()
            .unwrap_or(0)
    }

    /// The named field, or an error naming the event and field.
    pub(crate) fn field(&self, name: &str) -> Result<&Field> {
        self.fields.iter().find(|f| f.name == name).ok_or_else(|| {
            anyhow!(
                "tracepoint `{}` has no field `{}` (its fields: {})",
                self.name,
                name,
                self.fields
                    .iter()
                    .map(|f| f.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// For `sched_switch`: the `(bit, letter)` pairs of `prev_state` found in
    /// the `__print_flags(...)` of the print fmt, e.g. `(1,"S")…(0x80,"I")`.
    /// Empty when the print fmt has none.
    #[cfg(test)]
    pub(crate) fn state_flags(&self) -> Vec<(u64, String)> {
        parse_print_flags(&self.print_fmt)
    }
}

/// Parses `field:<decl>; offset:N; size:N; signed:N;` (event formats and
/// `events/header_page` share this line syntax).
pub(crate) fn parse_field(line: &str) -> Result<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for part in line.split(';') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (key, value) = part
            .split_once(':')
            .ok_or_else(|| anyhow!("part `{part}` is not `key:value`"))?;
        let value = value.trim();
        match key.trim() {
            "field" | "field special" => decl = Some(value),
            "offset" => offset = Some(parse_usize(value, "offset")?),
            "size" => size = Some(parse_usize(value, "size")?),
            "signed" => signed = Some(parse_usize(value, "signed")? != 0),
            _ => {} // unknown attribute: ignore
        }
    }
    let decl = decl.ok_or_else(|| anyhow!("no field declaration"))?;
    let offset = offset.ok_or_else(|| anyhow!("no offset"))?;
    let size = size.ok_or_else(|| anyhow!("no size"))?;
    let signed = signed.unwrap_or(false);

    // decl: `<type words> <name>` or `<type words> <name>[<len>]`.
    let decl = decl.trim();
    let split = decl
        .rfind(|c: char| c.is_whitespace())
        .ok_or_else(|| anyhow!("declaration `{decl}` has no type"))?;
    let type_name = decl[..split].trim().to_string();
    let mut name = decl[split..].trim();
    let mut array_len = None;
    if let Some(open) = name.find('[') {
        ensure!(
            name.ends_with(']'),
            "declaration `{decl}`: unterminated `[`"
        );
        let len = &name[open + 1..name.len() - 1];
        // Symbolic lengths (`[TASK_COMM_LEN]`) leave array_len unknown; the
        // size still bounds the field.
        array_len = parse_number(len).map(|n| n as usize);
        name = &name[..open];
    }
    ensure!(
        !name.is_empty() && !type_name.is_empty(),
        "declaration `{decl}` lacks a type or a name"
    );
    Ok(Field {
        name: name.to_string(),
        type_name,
        offset,
        size,
        signed,
        array_len,
    })
}

fn parse_usize(s: &str, what: &str) -> Result<usize> {
    s.parse::<usize>()
        .map_err(|_| anyhow!("{what} `{s}` is not a number"))
}

/// Decimal or `0x` hexadecimal.
fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Collects the `{ value, "name" }` pairs inside the first `__print_flags(`
/// of a print fmt, stopping at its closing parenthesis.
#[cfg(test)]
fn parse_print_flags(print_fmt: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let Some(start) = print_fmt.find("__print_flags(") else {
        return out;
    };
    let body = &print_fmt[start + "__print_flags(".len()..];
    // Find the matching close paren, skipping string literals.
    let bytes = body.as_bytes();
    let mut depth = 1usize;
    let mut in_str = false;
    let mut end = bytes.len();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    let body = &body[..end];

    let mut rest = body;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let pair = &after[..close];
        rest = &after[close + 1..];
        let Some((num, name)) = pair.split_once(',') else {
            continue;
        };
        let Some(value) = parse_number(num) else {
            continue;
        };
        let name = name.trim();
        let Some(name) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else {
            continue;
        };
        out.push((value, name.to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str =
        include_str!("../../../tests/fixtures/tracefs/events/sched/sched_switch/format");
    const WAKING: &str =
        include_str!("../../../tests/fixtures/tracefs/events/sched/sched_waking/format");
    const EXEC: &str =
        include_str!("../../../tests/fixtures/tracefs/events/sched/sched_process_exec/format");

    #[test]
    fn parses_real_sched_switch() {
        let f = EventFormat::parse(SWITCH).unwrap();
        assert_eq!(f.name, "sched_switch");
        assert!(f.id > 0);
        assert_eq!(f.fields[0].name, "common_type");
        assert_eq!(f.fields[0].type_name, "unsigned short");
        assert_eq!(f.fields[0].size, 2);

        let comm = f.field("prev_comm").unwrap();
        assert_eq!(comm.offset, 8);
        assert_eq!(comm.size, 16);
        assert_eq!(comm.array_len, Some(16));
        assert_eq!(comm.type_name, "char");

        let pid = f.field("prev_pid").unwrap();
        assert_eq!((pid.offset, pid.size, pid.signed), (24, 4, true));
        assert_eq!(pid.type_name, "pid_t");
        assert_eq!(pid.array_len, None);

        let state = f.field("prev_state").unwrap();
        assert_eq!((state.offset, state.size, state.signed), (32, 8, true));
        assert_eq!(state.type_name, "long");

        let next_comm = f.field("next_comm").unwrap();
        assert_eq!((next_comm.offset, next_comm.size), (40, 16));
        let next_pid = f.field("next_pid").unwrap();
        assert_eq!((next_pid.offset, next_pid.size), (56, 4));
        assert!(f.print_fmt.starts_with("\"prev_comm=%s"));
    }

    #[test]
    fn parses_real_sched_waking() {
        let f = EventFormat::parse(WAKING).unwrap();
        assert_eq!(f.name, "sched_waking");
        let pid = f.field("pid").unwrap();
        assert_eq!((pid.offset, pid.size, pid.signed), (24, 4, true));
        let comm = f.field("comm").unwrap();
        assert_eq!((comm.offset, comm.size), (8, 16));
        assert!(f.state_flags().is_empty());
    }

    #[test]
    fn state_flags_of_sched_switch() {
        let f = EventFormat::parse(SWITCH).unwrap();
        let flags = f.state_flags();
        let letters: Vec<&str> = flags.iter().map(|(_, s)| s.as_str()).collect();
        assert_eq!(letters, ["S", "D", "T", "t", "X", "Z", "P", "I"]);
        assert_eq!(flags[0], (1, "S".to_string()));
        assert_eq!(flags[1], (2, "D".to_string()));
        assert_eq!(flags[7], (0x80, "I".to_string()));
    }

    #[test]
    fn data_loc_field() {
        let f = EventFormat::parse(EXEC).unwrap();
        let fname = f.field("filename").unwrap();
        assert_eq!(fname.type_name, "__data_loc char[]");
        assert_eq!((fname.offset, fname.size), (8, 4));
        assert!(fname.is_dynamic());
        assert_eq!(fname.array_len, None);

        // Build a payload: fixed part 20 bytes, then "/bin/sh\0".
        let mut raw = vec![0u8; 20];
        let s = b"/bin/sh\0";
        let loc: u32 = ((s.len() as u32) << 16) | 20;
        raw[8..12].copy_from_slice(&loc.to_ne_bytes());
        raw.extend_from_slice(s);
        assert_eq!(fname.dynamic_bytes(&raw).unwrap(), s);
        // Pointing past the end is an error.
        let loc: u32 = (100u32 << 16) | 20;
        raw[8..12].copy_from_slice(&loc.to_ne_bytes());
        assert!(fname.dynamic_bytes(&raw).is_err());
    }

    #[test]
    fn field_reads_are_bounds_checked_and_sign_extended() {
        let f = EventFormat::parse(SWITCH).unwrap();
        let mut raw = vec![0u8; 64];
        raw[24..28].copy_from_slice(&(-1i32).to_ne_bytes());
        raw[32..40].copy_from_slice(&0x80i64.to_ne_bytes());
        raw[8..13].copy_from_slice(b"hello");
        let pid = f.field("prev_pid").unwrap();
        assert_eq!(pid.read_i64(&raw).unwrap(), -1);
        assert_eq!(pid.read_u64(&raw).unwrap(), u64::MAX);
        assert_eq!(f.field("prev_state").unwrap().read_u64(&raw).unwrap(), 0x80);
        assert_eq!(f.field("common_type").unwrap().read_i64(&raw).unwrap(), 0);
        assert_eq!(
            &f.field("prev_comm").unwrap().bytes(&raw).unwrap()[..5],
            b"hello"
        );
        // char[16] is not an integer.
        assert!(f.field("prev_comm").unwrap().read_i64(&raw).is_err());
        // Truncated payload.
        assert!(f.field("next_pid").unwrap().read_i64(&raw[..58]).is_err());
        assert!(f.field("next_comm").unwrap().bytes(&raw[..50]).is_err());
        // Unsigned 1-byte field is not sign-extended.
        raw[2] = 0xff;
        assert_eq!(
            f.field("common_flags").unwrap().read_i64(&raw).unwrap(),
            255
        );
    }

    #[test]
    fn missing_field_error_names_event_and_field() {
        let f = EventFormat::parse(WAKING).unwrap();
        let err = f.field("prev_pid").unwrap_err().to_string();
        assert!(err.contains("sched_waking"), "{err}");
        assert!(err.contains("prev_pid"), "{err}");
    }

    #[test]
    fn malformed_formats_are_errors() {
        assert!(EventFormat::parse("").is_err());
        assert!(EventFormat::parse("name: x\nformat:\n").is_err()); // no ID
        assert!(EventFormat::parse("name: x\nID: abc\n").is_err());
        assert!(EventFormat::parse("name: x\nID: 3\nformat:\n").is_err()); // no fields
        let bad_offset = "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:z;\tsize:4;\tsigned:1;\n";
        assert!(EventFormat::parse(bad_offset).is_err());
        let no_size = "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:0;\tsigned:1;\n";
        assert!(EventFormat::parse(no_size).is_err());
        let no_type = "name: x\nID: 3\nformat:\n\tfield:a;\toffset:0;\tsize:4;\tsigned:1;\n";
        assert!(EventFormat::parse(no_type).is_err());
        let bad_array =
            "name: x\nID: 3\nformat:\n\tfield:char a[16;\toffset:0;\tsize:16;\tsigned:0;\n";
        assert!(EventFormat::parse(bad_array).is_err());
        // Garbage without panicking.
        for s in [
            "\0\0\0",
            "field:",
            "field:;;;",
            "ID:\nname:",
            "print fmt: __print_flags({",
        ] {
            let _ = EventFormat::parse(s);
        }
    }

    #[test]
    fn symbolic_array_len_and_garbled_flags() {
        let text = "name: x\nID: 3\nformat:\n\tfield:char comm[TASK_COMM_LEN];\toffset:8;\tsize:16;\tsigned:0;\n\nprint fmt: \"%s\", __print_flags(REC->x, \"|\", { 1, \"A\" }, { zz, \"B\" }, { 0x4, C }, { 8, \"D\" }), { 16, \"E\" }\n";
        let f = EventFormat::parse(text).unwrap();
        let c = f.field("comm").unwrap();
        assert_eq!((c.array_len, c.size), (None, 16));
        assert_eq!(
            f.state_flags(),
            vec![(1, "A".to_string()), (8, "D".to_string())]
        );
        let unterminated = EventFormat {
            print_fmt: "__print_flags(x, { 2, \"Q\" }, { 4".into(),
            ..f.clone()
        };
        assert_eq!(unterminated.state_flags(), vec![(2, "Q".to_string())]);
    }
}
