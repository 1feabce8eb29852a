//! Parsing of tracefs event `format` files into named fields, and typed reads
//! of those fields out of a raw tracepoint payload.

use anyhow::Result;

/// One field of a tracepoint payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// C type as written, e.g. `pid_t`, `char`, `unsigned short`.
    pub type_name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `Some(n)` for `char prev_comm[16]`-style arrays.
    pub array_len: Option<usize>,
}

impl Field {
    /// Reads an integer field (size 1, 2, 4 or 8, native endian),
    /// sign-extended when the field is signed.
    pub fn read_i64(&self, raw: &[u8]) -> Result<i64> {
        let _ = raw;
        todo!()
    }

    /// Same as [`Field::read_i64`], as u64 (bit pattern kept).
    pub fn read_u64(&self, raw: &[u8]) -> Result<u64> {
        self.read_i64(raw).map(|v| v as u64)
    }

    /// The field's bytes (for `char[16]` comms and the like).
    pub fn bytes<'a>(&self, raw: &'a [u8]) -> Result<&'a [u8]> {
        let _ = raw;
        todo!()
    }
}

/// A parsed `format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u32,
    /// Common fields first, then the event's own, in file order.
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl EventFormat {
    pub fn parse(text: &str) -> Result<EventFormat> {
        let _ = text;
        todo!()
    }

    /// The named field, or an error naming the event and field.
    pub fn field(&self, name: &str) -> Result<&Field> {
        let _ = name;
        todo!()
    }

    /// For `sched_switch`: the `(bit, letter)` pairs of `prev_state` found in
    /// the `__print_flags(...)` of the print fmt, e.g. `(1,"S")…(0x80,"I")`.
    /// Empty when the print fmt has none.
    pub fn state_flags(&self) -> Vec<(u64, String)> {
        todo!()
    }
}
