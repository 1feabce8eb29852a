//! Names for JIT code from a process's perf map, `/tmp/perf-PID.map`: the
//! text file runtimes write for perf (node `--perf-basic-prof`, Java's
//! perf-map-agent, Python 3.12+ `-X perf`, LuaJIT, .NET), one line per
//! piece of code: `START SIZE name`, START and SIZE in hex.
//!
//! The process writes the file, so it is read as hostile: streamed within
//! a byte bound, keeping only the lines that name an address looked up, a
//! name at most [`MAX_NAME`] bytes; a malformed line is skipped and counted.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};

use super::read::MAX_NAME;
use crate::sys::open::Opened;

/// Most bytes of one perf map read: a runtime that has compiled code for
/// days writes a few hundred MiB; what lies beyond is not read.
pub(crate) const MAX_MAP_BYTES: u64 = 512 << 20;

/// What reading one perf map found.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// The name of each address asked for that a line covers (the last
    /// such line: code freed and compiled again is listed again later).
    pub(crate) names: HashMap<u64, String>,
    /// Lines that are not `START SIZE name`.
    pub(crate) malformed: u64,
    /// The file was longer than [`MAX_MAP_BYTES`].
    pub(crate) cut: bool,
}

/// Reads the perf map `file` for the addresses `wanted`.
pub(crate) fn read(file: &Opened, wanted: &BTreeSet<u64>) -> Found {
    let limited = FromStart {
        file: &file.file,
        at: 0,
    }
    .take(MAX_MAP_BYTES);
    let mut found = Found {
        cut: file.size > MAX_MAP_BYTES,
        ..Found::default()
    };
    scan(
        BufReader::with_capacity(64 << 10, limited),
        wanted,
        &mut found,
    );
    found
}

/// Reads a file from its start with `pread`, whatever its descriptor's
/// offset (a held map is read again through shared descriptors).
struct FromStart<'a> {
    file: &'a std::fs::File,
    at: u64,
}

impl Read for FromStart<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Reads lines from `input` into `found`.
fn scan(mut input: impl BufRead, wanted: &BTreeSet<u64>, found: &mut Found) {
    // A line, at most this long (more is malformed): two 64-bit hex
    // numbers with `0x`, two spaces and a name.
    const MAX_LINE: usize = MAX_NAME + 2 * 18 + 2;
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let Ok(n) = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        else {
            return;
        };
        if n == 0 {
            return;
        }
        if line.last() != Some(&b'\n') && n > MAX_LINE {
            // Too long: skip to its end.
            found.malformed += 1;
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match (&mut input).take(1 << 16).read_until(b'\n', &mut rest) {
                    Ok(0) | Err(_) => return,
                    Ok(_) if rest.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            continue;
        }
        let Some((start, size, name)) = parse_line(text) else {
            found.malformed += 1;
            continue;
        };
        let end = start.saturating_add(size);
        for &addr in wanted.range(start..end) {
            found
                .names
                .insert(addr, String::from_utf8_lossy(name).into_owned());
        }
    }
}

/// `START SIZE name`: two hex numbers (`0x` allowed) and a non-empty name,
/// which may hold spaces.
fn parse_line(line: &[u8]) -> Option<(u64, u64, &[u8])> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next()?;
    if name.is_empty() || size == 0 {
        return None;
    }
    Some((start, size, name))
}

fn hex(field: &[u8]) -> Option<u64> {
    let digits = field
        .strip_prefix(b"0x")
        .or_else(|| field.strip_prefix(b"0X"))
        .unwrap_or(field);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &[u8], wanted: &[u64]) -> Found {
        let wanted: BTreeSet<u64> = wanted.iter().copied().collect();
        let mut found = Found::default();
        scan(text, &wanted, &mut found);
        found
    }

    #[test]
    fn lines_name_the_addresses_they_cover() {
        let text = b"3ef414c0 398 LazyCompile:~work /app/x.js:3\n\
                     0x7f0000001000 0x10 Lfoo;bar\n\
                     7f0000002000 20 first\r\n\
                     7f0000002000 20 second\n";
        let f = found(
            text,
            &[
                0x3ef414c0,
                0x3ef41857,
                0x3ef41858,
                0x7f000000100f,
                0x7f0000002010,
            ],
        );
        assert_eq!(f.names[&0x3ef414c0], "LazyCompile:~work /app/x.js:3");
        assert_eq!(f.names[&0x3ef41857], "LazyCompile:~work /app/x.js:3");
        assert!(!f.names.contains_key(&0x3ef41858), "past the end");
        assert_eq!(f.names[&0x7f000000100f], "Lfoo;bar");
        assert_eq!(f.names[&0x7f0000002010], "second", "the later line wins");
        assert_eq!(f.malformed, 0);
    }

    #[test]
    fn malformed_lines_are_counted_and_skipped() {
        let mut text = b"zz 10 bad\n10 0 empty\n10 10\n\n10 10 ok\n".to_vec();
        text.extend(b"20 10 ");
        text.extend(vec![b'x'; MAX_NAME * 3]);
        text.extend(b"\n30 10 after\n11111111111111111 1 wide\n40 10 \xff\xfe\n");
        let f = found(&text, &[0x10, 0x20, 0x30, 0x40]);
        assert_eq!(f.names[&0x10], "ok");
        assert!(!f.names.contains_key(&0x20), "a name too long");
        assert_eq!(f.names[&0x30], "after", "read on after a long line");
        assert_eq!(f.names[&0x40], "\u{fffd}\u{fffd}");
        assert_eq!(f.malformed, 5);
    }

    #[test]
    fn a_last_line_without_newline_counts() {
        let f = found(b"10 10 end", &[0x12]);
        assert_eq!(f.names[&0x12], "end");
    }
}
