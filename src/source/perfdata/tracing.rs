//! The tracing data a perf.data file carries (its `HEADER_TRACING_DATA`
//! section): the format files of the tracepoints it recorded, as the
//! recording kernel wrote them, so that their payloads are read with the
//! offsets they were written with, whatever kernel reads the file.
//!
//! The layout, as perf writes it: `\x17\x08\x44tracing`, a NUL-ended
//! version, one endianness byte, the size of a `long`, the page size (u32);
//! `header_page` and `header_event`, each a NUL-ended name, a u64 size and
//! that many bytes; the ftrace formats (a u32 count, then a u64 size and
//! the text of each); the event formats (a u32 count of systems, then for
//! each its NUL-ended name, a u32 count and each format as a u64 size and
//! text); then kallsyms and printk formats, which are not read.

use anyhow::{Context, Result, ensure};

use crate::bytes::Cursor;
use crate::source::tracepoint::EventFormat;

const MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// Longest format text read (the kernel's are a few KiB).
const MAX_FORMAT: u64 = 1 << 20;

/// The format files of the events of `system` named in `names`, in that
/// order, from tracing data `data`. `None` for an event it does not hold.
pub(crate) fn event_formats(
    data: &[u8],
    system: &str,
    names: &[&str],
) -> Result<Vec<Option<EventFormat>>> {
    let mut c = Cursor::new(data);
    let magic = c.take(MAGIC.len()).context("tracing data: no magic")?;
    ensure!(magic == MAGIC, "tracing data: bad magic");
    let _version = cstr(&mut c).context("tracing data: version")?;
    let big_endian = c.take(1).context("tracing data: endianness")?[0] != 0;
    ensure!(
        big_endian == cfg!(target_endian = "big"),
        "the tracing data is of another byte order than this machine's"
    );
    let _long_size = c.take(1).context("tracing data: long size")?;
    let _page_size = c.u32().context("tracing data: page size")?;
    for header in ["header_page", "header_event"] {
        let name = cstr(&mut c).with_context(|| format!("tracing data: {header}"))?;
        ensure!(name == header.as_bytes(), "tracing data: no {header}");
        sized(&mut c, u64::MAX).with_context(|| format!("tracing data: {header}"))?;
    }
    let ftrace = c.u32().context("tracing data: ftrace formats")?;
    for _ in 0..ftrace {
        sized(&mut c, MAX_FORMAT).context("tracing data: an ftrace format")?;
    }
    let mut found: Vec<Option<EventFormat>> = names.iter().map(|_| None).collect();
    let systems = c.u32().context("tracing data: event systems")?;
    for _ in 0..systems {
        let sys = cstr(&mut c).context("tracing data: a system's name")?;
        let count = c.u32().context("tracing data: a system's events")?;
        for _ in 0..count {
            let text = sized(&mut c, MAX_FORMAT).context("tracing data: an event format")?;
            if sys != system.as_bytes() {
                continue;
            }
            let Ok(text) = std::str::from_utf8(text) else {
                continue;
            };
            let Some(name) = text.lines().find_map(|l| l.strip_prefix("name: ")) else {
                continue;
            };
            if let Some(i) = names.iter().position(|n| *n == name.trim()) {
                found[i] = Some(EventFormat::parse(text).with_context(|| {
                    format!("tracing data: the format of {system}:{}", names[i])
                })?);
            }
        }
    }
    Ok(found)
}

/// A NUL-ended string (without its NUL), at most 4 KiB.
fn cstr<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8]> {
    let rest = c.rest();
    let end = rest
        .iter()
        .take(4096)
        .position(|&b| b == 0)
        .context("no NUL within 4 KiB")?;
    *c = Cursor::new(&rest[end + 1..]);
    Ok(&rest[..end])
}

/// A u64 size, then that many bytes (at most `max`).
fn sized<'a>(c: &mut Cursor<'a>, max: u64) -> Result<&'a [u8]> {
    let size = c.u64()?;
    ensure!(size <= max, "a size of {size} bytes");
    let size = usize::try_from(size)?;
    Ok(c.take(size)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::tracepoint::Tracefs;

    fn format_text(name: &str) -> String {
        let path = Tracefs::fixtures()
            .root()
            .join("events/sched")
            .join(name)
            .join("format");
        std::fs::read_to_string(path).unwrap()
    }

    /// Tracing data as perf writes it, with `events` in system `sched`.
    fn data(events: &[String]) -> Vec<u8> {
        let mut d = MAGIC.to_vec();
        d.extend_from_slice(b"0.6\0");
        d.push(u8::from(cfg!(target_endian = "big")));
        d.push(8);
        d.extend_from_slice(&4096u32.to_ne_bytes());
        for (name, body) in [("header_page", "page"), ("header_event", "event")] {
            d.extend_from_slice(name.as_bytes());
            d.push(0);
            d.extend_from_slice(&(body.len() as u64).to_ne_bytes());
            d.extend_from_slice(body.as_bytes());
        }
        d.extend_from_slice(&1u32.to_ne_bytes());
        d.extend_from_slice(&5u64.to_ne_bytes());
        d.extend_from_slice(b"ftrac");
        d.extend_from_slice(&2u32.to_ne_bytes());
        for (sys, texts) in [
            ("irq", vec!["name: sched_switch\nID: 9\n".to_string()]),
            ("sched", events.to_vec()),
        ] {
            d.extend_from_slice(sys.as_bytes());
            d.push(0);
            d.extend_from_slice(&(texts.len() as u32).to_ne_bytes());
            for t in texts {
                d.extend_from_slice(&(t.len() as u64).to_ne_bytes());
                d.extend_from_slice(t.as_bytes());
            }
        }
        d.extend_from_slice(&0u32.to_ne_bytes());
        d
    }

    #[test]
    fn finds_the_formats_of_the_named_events_of_the_system() {
        let d = data(&[format_text("sched_waking"), format_text("sched_switch")]);
        let got = event_formats(
            &d,
            "sched",
            &["sched_switch", "sched_waking", "sched_wakeup"],
        )
        .unwrap();
        let want = Tracefs::fixtures()
            .event_format("sched", "sched_switch")
            .unwrap();
        assert_eq!(got[0].as_ref().map(|f| f.id), Some(want.id));
        assert!(got[0].as_ref().unwrap().field("prev_state").is_ok());
        assert!(got[1].as_ref().unwrap().field("pid").is_ok());
        assert!(got[2].is_none());
    }

    #[test]
    fn every_cut_of_the_data_is_an_error_not_a_panic() {
        let d = data(&[format_text("sched_switch")]);
        for len in 0..d.len() - 4 {
            let _ = event_formats(&d[..len], "sched", &["sched_switch"]);
        }
        let mut bad = d.clone();
        bad[0] = 0;
        assert!(event_formats(&bad, "sched", &["sched_switch"]).is_err());
    }
}
