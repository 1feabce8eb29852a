//! Decoding of ftrace ring-buffer pages (sub-buffers), as read whole from
//! `per_cpu/cpuN/trace_pipe_raw`: the page layout (from `events/header_page`),
//! the record-header encoding (from `events/header_event`), and a pure,
//! allocation-free walk over one page that hands each data record's absolute
//! timestamp and payload to a callback.
//!
//! What a page looks like (facts from the kernel's `kernel/trace/ring_buffer.c`;
//! no code taken from it):
//!
//! * A header: a u64 `timestamp` (the time base of the page) and a `local_t`
//!   `commit` (a C `long`): the number of data bytes used, with two flags in
//!   bits 31 and 30 (`RB_MISSED_EVENTS`: events were lost before this page;
//!   `RB_MISSED_STORED`: their count, an `unsigned long`, is stored right after
//!   the `commit` bytes of data). The data length is `commit` with just those
//!   two bits cleared. The offsets and sizes all come from `header_page`; the
//!   data area can be larger than a 4 KiB page (`buffer_subbuf_size_kb`).
//! * Records, 4-byte aligned, each starting with a native-endian u32 holding a
//!   5-bit `type_len` and a 27-bit `time_delta`, then `array[]` u32 words:
//!   * `1..=data_max_type_len` (28): data, payload `type_len * 4` bytes right
//!     after the header;
//!   * `0`: data, `array[0]` is the record length less the 4-byte header, so
//!     the payload is the `array[0] - 4` bytes from `array[1]` on;
//!   * padding (29): with `time_delta == 0` the rest of the page is empty;
//!     otherwise it is a discarded event (or the filler at the end of a page),
//!     `4 + array[0]` bytes long, never emitted;
//!   * time extend (30): 8 bytes, adds `(array[0] << 27) + time_delta` to the
//!     running time;
//!   * time stamp (31): 8 bytes, an absolute time `(array[0] << 27) +
//!     time_delta` of 59 bits, whose 5 top bits are carried over from the
//!     running time (with a carry when the low part wrapped).
//!
//!   A data record's time is the running time plus its `time_delta`, and
//!   becomes the running time.
//!
//! Everything read from the page is bounds-checked: a record that runs past
//! the data length (or past the slice) ends the page as truncated; nothing
//! here panics on any input.

use anyhow::{Context, Result, anyhow, bail, ensure};

use crate::bytes::{u32_at, u64_at, word_at};

/// `commit` flag: events were lost between the previous page and this one.
const RB_MISSED_EVENTS: u64 = 1 << 31;
/// `commit` flag: the number of lost events is stored after the data.
const RB_MISSED_STORED: u64 = 1 << 30;
/// Where `time_delta` sits in an extended or absolute time.
const TS_SHIFT: u32 = 27;
/// The 5 top bits of a timestamp, which absolute time stamps do not carry.
const TS_MSB: u64 = 0xf8 << 56;
/// Records are aligned to (and sized in multiples of) 4 bytes.
const RB_ALIGNMENT: usize = 4;
/// The largest data area we accept (what libtraceevent's commit mask allows).
const MAX_DATA_SIZE: usize = 1 << 27;
/// The largest page header we accept.
const MAX_DATA_OFFSET: usize = 4096;

/// Layout of a ring-buffer page, from `events/header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageLayout {
    pub(crate) timestamp_offset: usize,
    pub(crate) commit_offset: usize,
    /// 4 or 8 (a C `long`); also the size of the stored missed-events count.
    pub(crate) commit_size: usize,
    pub(crate) data_offset: usize,
    pub(crate) data_size: usize,
}

impl PageLayout {
    /// Parses the text of `events/header_page`, e.g.
    ///
    /// ```text
    ///     field: u64 timestamp;    offset:0;    size:8;    signed:0;
    ///     field: local_t commit;    offset:8;    size:8;    signed:1;
    ///     field: int overwrite;    offset:8;    size:1;    signed:1;
    ///     field: char data;    offset:16;    size:4080;    signed:0;
    /// ```
    ///
    /// Needs the `timestamp`, `commit` and `data` fields (others are
    /// ignored) and errors on absurd values: a timestamp that is not 8 bytes,
    /// a commit that is not 4 or 8, header fields overlapping each other or
    /// the data, an empty, unaligned or huge data area.
    pub(crate) fn parse(text: &str) -> Result<PageLayout> {
        let mut timestamp = None;
        let mut commit = None;
        let mut data = None;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.starts_with("field") {
                continue;
            }
            let field = crate::source::tracepoint::format::parse_field(line)
                .with_context(|| format!("header_page line {}", i + 1))?;
            let (name, offset, size) = (field.name.as_str(), field.offset, field.size);
            let slot = match name {
                "timestamp" => &mut timestamp,
                "commit" => &mut commit,
                "data" => &mut data,
                _ => continue,
            };
            ensure!(
                slot.is_none(),
                "header_page line {}: field `{name}` given twice",
                i + 1
            );
            *slot = Some((offset, size));
        }
        let (timestamp_offset, timestamp_size) =
            timestamp.ok_or_else(|| anyhow!("header_page has no `timestamp` field"))?;
        let (commit_offset, commit_size) =
            commit.ok_or_else(|| anyhow!("header_page has no `commit` field"))?;
        let (data_offset, data_size) =
            data.ok_or_else(|| anyhow!("header_page has no `data` field"))?;

        ensure!(
            timestamp_size == 8,
            "header_page: timestamp has size {timestamp_size}, expected 8"
        );
        ensure!(
            commit_size == 4 || commit_size == 8,
            "header_page: commit has size {commit_size}, expected 4 or 8"
        );
        ensure!(
            data_offset <= MAX_DATA_OFFSET && data_offset.is_multiple_of(RB_ALIGNMENT),
            "header_page: data offset {data_offset} is not a plausible header size"
        );
        // Both offsets are now bounded by `data_offset`, so no overflow below.
        ensure!(
            timestamp_offset
                .checked_add(8)
                .is_some_and(|end| end <= data_offset),
            "header_page: timestamp (offset {timestamp_offset}) overlaps the data at {data_offset}"
        );
        ensure!(
            commit_offset
                .checked_add(commit_size)
                .is_some_and(|end| end <= data_offset),
            "header_page: commit (offset {commit_offset}, size {commit_size}) overlaps the data at {data_offset}"
        );
        ensure!(
            timestamp_offset + 8 <= commit_offset
                || commit_offset + commit_size <= timestamp_offset,
            "header_page: timestamp (offset {timestamp_offset}) and commit (offset {commit_offset}) overlap"
        );
        ensure!(
            data_size > 0 && data_size.is_multiple_of(RB_ALIGNMENT) && data_size <= MAX_DATA_SIZE,
            "header_page: data size {data_size} is not a plausible sub-buffer size"
        );
        Ok(PageLayout {
            timestamp_offset,
            commit_offset,
            commit_size,
            data_offset,
            data_size,
        })
    }

    /// data_offset + data_size: the size of one page as read from
    /// `trace_pipe_raw`.
    pub(crate) fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }
}

/// The record-header encoding, from `events/header_event`: the `type_len`
/// values of the special records, and the largest `type_len` of a data
/// record whose length is in `type_len` (0 means the length is in
/// `array[0]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeaderLayout {
    pub(crate) padding: u32,
    pub(crate) time_extend: u32,
    pub(crate) time_stamp: u32,
    pub(crate) data_max_type_len: u32,
}

impl HeaderLayout {
    /// Parses the text of `events/header_event`:
    ///
    /// ```text
    /// # compressed entry header
    ///     type_len    :    5 bits
    ///     time_delta  :   27 bits
    ///     array       :   32 bits
    ///
    ///     padding     : type == 29
    ///     time_extend : type == 30
    ///     time_stamp : type == 31
    ///     data max type_len  == 28
    /// ```
    ///
    /// Errors unless `type_len` is 5 bits and `time_delta` 27 bits (the only
    /// encoding we decode; kernels before 2.6.31 had another), and unless
    /// the special types are distinct 5-bit values above the data range.
    pub(crate) fn parse(text: &str) -> Result<HeaderLayout> {
        let HeaderEventLines {
            type_len_bits,
            time_delta_bits,
            array_bits,
            padding,
            time_extend,
            time_stamp,
            data_max,
        } = HeaderEventLines::read(text)?;

        let type_len_bits =
            type_len_bits.ok_or_else(|| anyhow!("header_event has no `type_len` line"))?;
        let time_delta_bits =
            time_delta_bits.ok_or_else(|| anyhow!("header_event has no `time_delta` line"))?;
        ensure!(
            type_len_bits == 5 && time_delta_bits == 27,
            "header_event: record header has a {type_len_bits}-bit type_len and a \
             {time_delta_bits}-bit time_delta; only 5 and 27 are supported"
        );
        if let Some(a) = array_bits {
            ensure!(
                a == 32,
                "header_event: array words of {a} bits, expected 32"
            );
        }
        let padding = padding.ok_or_else(|| anyhow!("header_event has no `padding` line"))?;
        let time_extend =
            time_extend.ok_or_else(|| anyhow!("header_event has no `time_extend` line"))?;
        let time_stamp =
            time_stamp.ok_or_else(|| anyhow!("header_event has no `time_stamp` line"))?;
        let data_max_type_len =
            data_max.ok_or_else(|| anyhow!("header_event has no `data max type_len` line"))?;
        ensure!(
            (1..32).contains(&data_max_type_len),
            "header_event: data max type_len {data_max_type_len} is not in 1..32"
        );
        for (what, v) in [
            ("padding", padding),
            ("time_extend", time_extend),
            ("time_stamp", time_stamp),
        ] {
            ensure!(
                v > data_max_type_len && v < 32,
                "header_event: {what} type {v} is not between data max type_len \
                 {data_max_type_len} and 32"
            );
        }
        ensure!(
            padding != time_extend && padding != time_stamp && time_extend != time_stamp,
            "header_event: padding ({padding}), time_extend ({time_extend}) and \
             time_stamp ({time_stamp}) are not distinct"
        );
        Ok(HeaderLayout {
            padding,
            time_extend,
            time_stamp,
            data_max_type_len,
        })
    }
}

/// The values the lines of `events/header_event` give, before they are
/// checked against each other.
#[derive(Default)]
struct HeaderEventLines {
    type_len_bits: Option<u32>,
    time_delta_bits: Option<u32>,
    array_bits: Option<u32>,
    padding: Option<u32>,
    time_extend: Option<u32>,
    time_stamp: Option<u32>,
    data_max: Option<u32>,
}

impl HeaderEventLines {
    /// Reads each known line of `events/header_event`; errors on a line
    /// that does not read or that describes the pre-2.6.31 encoding.
    fn read(text: &str) -> Result<HeaderEventLines> {
        let mut out = HeaderEventLines::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let ctx = || format!("header_event line {}: `{line}`", i + 1);
            if let Some(rest) = line.strip_prefix("data max type_len") {
                let v = rest
                    .trim()
                    .strip_prefix("==")
                    .ok_or_else(|| anyhow!("expected `== N`"))
                    .and_then(|n| parse_u32(n.trim()))
                    .with_context(ctx)?;
                out.data_max = Some(v);
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                // Unknown line without a `key: value` shape: not ours.
                continue;
            };
            let slot = match key.trim() {
                "type_len" => &mut out.type_len_bits,
                "time_delta" => &mut out.time_delta_bits,
                "array" => &mut out.array_bits,
                "padding" => &mut out.padding,
                "time_extend" => &mut out.time_extend,
                "time_stamp" => &mut out.time_stamp,
                // `type` and `len` are the pre-2.6.31 encoding.
                "type" | "len" => bail!(
                    "header_event describes the old ring-buffer record encoding \
                     (`{}`), which is not supported",
                    line
                ),
                _ => continue,
            };
            *slot = Some(parse_header_value(value.trim()).with_context(ctx)?);
        }
        Ok(out)
    }
}

/// The value of a `key: N bits` or `key: type == N` line of
/// `events/header_event`.
fn parse_header_value(value: &str) -> Result<u32> {
    if let Some(bits) = value.strip_suffix("bits") {
        parse_u32(bits.trim())
    } else if let Some(t) = value.strip_prefix("type") {
        t.trim()
            .strip_prefix("==")
            .ok_or_else(|| anyhow!("expected `type == N`"))
            .and_then(|n| parse_u32(n.trim()))
    } else {
        Err(anyhow!("expected `N bits` or `type == N`"))
    }
}

fn parse_u32(s: &str) -> Result<u32> {
    s.parse::<u32>()
        .map_err(|_| anyhow!("`{s}` is not a number"))
}

/// What a page says about events lost before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missed {
    None,
    /// Events were lost; the kernel had no room on the page for their count.
    Unknown,
    Count(u64),
}

/// Summary of one decoded page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageInfo {
    /// The page header's timestamp.
    pub(crate) timestamp: u64,
    pub(crate) missed: Missed,
    /// Data records passed to the sink.
    pub(crate) records: usize,
    /// True when the page ended in a record that did not fit (or the commit
    /// was impossible): the rest of the page was skipped.
    pub(crate) truncated: bool,
}

/// Decodes one page: calls `sink(time, payload)` for each data record, in
/// page order, with its absolute timestamp (same clock as the page header's,
/// i.e. the instance's trace_clock) and its payload (the tracepoint/ftrace
/// entry bytes, starting with `common_type`).
///
/// Never panics on any input. A page shorter than the header is an error.
/// Corrupt content is not an error but ends the page with
/// `truncated: true`, after the records decoded so far:
/// * a commit (data length) larger than the layout's data area delivers no
///   record at all (nothing on such a page can be trusted), with
///   `missed` from the flags but never a count;
/// * a record that runs past the data length, or past the end of `page`
///   when the slice is shorter than the data length says;
/// * a record of a type the header layout does not define, or a
///   `type_len 0` or padding record whose `array[0]` is not a multiple of 4
///   of at least 4.
///
/// Discarded events (padding with a non-zero `time_delta`) are skipped; like
/// the kernel's own page validator (`rb_read_data_buffer`), their
/// `time_delta` is added to the running time unless it is 1, the value the
/// kernel forces when the discarded event's delta was 0 and the one it uses
/// for the filler at the end of a page.
pub(crate) fn decode_page(
    page: &[u8],
    layout: &PageLayout,
    header: &HeaderLayout,
    sink: &mut dyn FnMut(u64, &[u8]),
) -> Result<PageInfo> {
    ensure!(
        page.len() >= layout.data_offset,
        "ring-buffer page of {} bytes is shorter than its {}-byte header",
        page.len(),
        layout.data_offset
    );
    let timestamp = u64_at(page, layout.timestamp_offset).ok_or_else(|| {
        anyhow!(
            "page layout puts the timestamp (offset {}) outside a {}-byte page",
            layout.timestamp_offset,
            page.len()
        )
    })?;
    let commit = word_at(page, layout.commit_offset, layout.commit_size).ok_or_else(|| {
        anyhow!(
            "page layout puts the commit (offset {}, size {}) outside a {}-byte page \
             or gives it a size other than 4 or 8",
            layout.commit_offset,
            layout.commit_size,
            page.len()
        )
    })?;

    let lost = commit & RB_MISSED_EVENTS != 0;
    let stored = commit & RB_MISSED_STORED != 0;
    let len = commit & !(RB_MISSED_EVENTS | RB_MISSED_STORED);
    let mut info = PageInfo {
        timestamp,
        missed: if lost { Missed::Unknown } else { Missed::None },
        records: 0,
        truncated: false,
    };
    let len = match usize::try_from(len) {
        Ok(len) if len <= layout.data_size => len,
        _ => {
            info.truncated = true;
            return Ok(info);
        }
    };

    // `page.len() >= data_offset` was checked above.
    let data = &page[layout.data_offset..];
    if lost && stored {
        let fits = len
            .checked_add(layout.commit_size)
            .is_some_and(|end| end <= layout.data_size);
        if fits && let Some(count) = word_at(data, len, layout.commit_size) {
            info.missed = Missed::Count(count);
        }
    }

    let avail = len.min(data.len());
    let (records, end) = decode_records(&data[..avail], timestamp, header, sink);
    info.records = records;
    info.truncated = match end {
        End::Truncated => true,
        End::Empty => false,
        // Records ended at the end of the slice, short of the data length.
        End::Done => avail < len,
    };
    Ok(info)
}

/// How a walk over the records of a page ended.
enum End {
    /// At the data length.
    Done,
    /// At a null padding: the rest of the page is empty.
    Empty,
    /// At a record that does not fit or makes no sense.
    Truncated,
}

/// Walks the records of `data` (exactly the committed data bytes), starting
/// from the page time `time`. Returns the number of data records delivered.
#[inline]
fn decode_records(
    data: &[u8],
    mut time: u64,
    h: &HeaderLayout,
    sink: &mut dyn FnMut(u64, &[u8]),
) -> (usize, End) {
    let mut off = 0usize;
    let mut records = 0usize;
    while off < data.len() {
        let Some(word) = u32_at(data, off) else {
            return (records, End::Truncated);
        };
        let (type_len, delta) = split_header(word);
        if type_len <= h.data_max_type_len {
            let (start, end) = if type_len == 0 {
                let Some(len) = u32_at(data, off + 4).and_then(array_len) else {
                    return (records, End::Truncated);
                };
                (off + 8, (off + 4).checked_add(len))
            } else {
                (off + 4, Some(off + 4 + type_len as usize * 4))
            };
            let Some(payload) = end.and_then(|end| data.get(start..end)) else {
                return (records, End::Truncated);
            };
            time = time.wrapping_add(delta as u64);
            sink(time, payload);
            records += 1;
            off = start + payload.len();
        } else if type_len == h.padding {
            if delta == 0 {
                return (records, End::Empty);
            }
            let end = u32_at(data, off + 4)
                .and_then(array_len)
                .and_then(|len| (off + 4).checked_add(len))
                .filter(|&end| end <= data.len());
            let Some(end) = end else {
                return (records, End::Truncated);
            };
            if delta != 1 {
                time = time.wrapping_add(delta as u64);
            }
            off = end;
        } else if type_len == h.time_extend {
            let Some(hi) = u32_at(data, off + 4) else {
                return (records, End::Truncated);
            };
            time = time.wrapping_add(extended_time(hi, delta));
            off += 8;
        } else if type_len == h.time_stamp {
            let Some(hi) = u32_at(data, off + 4) else {
                return (records, End::Truncated);
            };
            time = absolute_time(extended_time(hi, delta), time);
            off += 8;
        } else {
            return (records, End::Truncated);
        }
    }
    (records, End::Done)
}

/// `array[0]` of a `type_len 0` data record or of a padding: the record
/// length less its 4-byte header, which covers at least `array[0]` itself
/// and keeps records 4-byte aligned.
#[inline]
fn array_len(a0: u32) -> Option<usize> {
    let len = a0 as usize;
    (len >= 4 && len.is_multiple_of(RB_ALIGNMENT)).then_some(len)
}

/// `(high << 27) + low`: the value of a time extend or time stamp record.
#[inline]
fn extended_time(high: u32, low: u32) -> u64 {
    ((high as u64) << TS_SHIFT) + low as u64
}

/// An absolute time stamp lacks the 5 top bits of the clock: take them from
/// the running time, and carry into them when the low 59 bits wrapped since.
#[inline]
fn absolute_time(abs: u64, running: u64) -> u64 {
    let msb = running & TS_MSB;
    if msb == 0 {
        return abs;
    }
    let t = abs | msb;
    if t < running {
        t.wrapping_add(1 << 59)
    } else {
        t
    }
}

/// Splits a record header into (type_len, time_delta). The kernel declares
/// them as C bitfields `type_len:5, time_delta:27` in a u32, which puts
/// `type_len` in the low bits on little-endian machines and in the high bits
/// on big-endian ones.
#[inline]
fn split_header(word: u32) -> (u32, u32) {
    if cfg!(target_endian = "big") {
        (word >> 27, word & ((1 << 27) - 1))
    } else {
        (word & 0x1f, word >> 5)
    }
}

#[cfg(test)]
mod tests;
