//! How large a CPU's ring is and what it must hold: the wakeup watermark
//! of a ring of so many pages, the largest sample, and whether a ring found
//! that full may have lost one.

use anyhow::{Result, anyhow, bail};

use super::record::Decoder;
use super::{OpenFailure, PerfConfig, ring, sys, wire};
use crate::event::copies::CopyBudget;
use crate::source::tracepoint::EventFormat;
use crate::sys::host;
use crate::unwind::memo::Memo;

/// The most bytes one sample of `sample_type` can take (header included),
/// with callchains of at most `max_stack` frames and `max_contexts` context
/// markers, tracepoint payloads laid out as `formats` say, and copies of
/// `stack_user` bytes of user stack.
pub(crate) fn max_sample_size(
    sample_type: u64,
    formats: &[&EventFormat],
    max_stack: u64,
    max_contexts: u64,
    stack_user: u32,
) -> u64 {
    let mut size = (ring::HEADER_SIZE + wire::fixed_sample_len(sample_type)) as u64;
    if sample_type & sys::SAMPLE_CALLCHAIN != 0 {
        size += 8 + 8 * max_stack.saturating_add(max_contexts);
    }
    if sample_type & sys::SAMPLE_RAW != 0 {
        // The payload's fixed part, plus room for any dynamic field's data
        // (neither sched tracepoint has one today); a u32 size first, the
        // whole padded to 8 bytes.
        let payload = formats
            .iter()
            .map(|f| {
                let fixed = f.fixed_size();
                let dynamic = if f.fields.iter().any(|x| x.is_dynamic()) {
                    4096
                } else {
                    0
                };
                (fixed + dynamic) as u64
            })
            .max()
            .unwrap_or(0);
        size += (4 + payload).div_ceil(8) * 8;
    }
    if sample_type & sys::SAMPLE_REGS_USER != 0 {
        // The ABI word, then the registers.
        size += 8 + 8 * sys::USER_REGS.len() as u64;
    }
    if sample_type & sys::SAMPLE_STACK_USER != 0 {
        // The size, the copy, its dynamic size; a record is at most
        // u16::MAX bytes long, and the kernel shortens the copy to fit.
        size = (size + 16 + u64::from(stack_user)).min(u64::from(u16::MAX));
    }
    size
}

/// [`max_sample_size`] with this kernel's limits on callchains
/// (`perf_event_max_stack` and `perf_event_max_contexts_per_stack`).
pub(super) fn max_sample_size_here(
    sample_type: u64,
    formats: &[&EventFormat],
    stack_user: u32,
) -> u64 {
    max_sample_size(
        sample_type,
        formats,
        host::kernel_sysctl("perf_event_max_stack").unwrap_or(127),
        host::kernel_sysctl("perf_event_max_contexts_per_stack").unwrap_or(8),
        stack_user,
    )
}

/// True when a ring of `data_size` bytes found holding `avail` unread bytes
/// may have lost a record of up to `max_record` bytes since it was last
/// read: its free space fell below that. (The kernel's lost record comes
/// only with the next record that CPU writes, which can be long after.)
pub(crate) fn may_have_lost(data_size: u64, avail: u64, max_record: u64) -> bool {
    data_size.saturating_sub(avail) < max_record
}

/// The bytes a ring of `pages` pages (a power of two) holds before its
/// reader is woken: a quarter of it.
pub(super) fn wakeup_watermark(pages: usize) -> Result<u32> {
    if pages == 0 || !pages.is_power_of_two() {
        bail!("the ring buffer size must be a power of two number of pages (got {pages})");
    }
    let data_bytes = pages
        .checked_mul(host::page_size())
        .ok_or_else(|| anyhow!("{pages} mmap pages is too large"))?;
    Ok(u32::try_from((data_bytes / 4).max(1)).unwrap_or(u32::MAX))
}

/// The decoder of samples of `sample_type` from the two tracepoints of
/// `formats`, with `stack_user` bytes of user stack copies, and the
/// largest such sample: the rings of `config` must hold one.
pub(super) fn decoder(
    config: &PerfConfig,
    sample_type: u64,
    formats: [&EventFormat; 2],
    stack_user: u32,
) -> Result<(Decoder, u64), OpenFailure> {
    let mut decoder = Decoder::new(sample_type, formats[0], formats[1])?;
    if stack_user > 0 {
        decoder.cut_copies_past(CopyBudget::new(super::COPY_BUDGET));
        decoder.recall_from(Memo::new());
    }
    let max_sample = max_sample_size_here(sample_type, &formats, stack_user);
    let ring = (config.mmap_pages as u64).saturating_mul(host::page_size() as u64);
    if ring < max_sample {
        return Err(anyhow!(
            "--mmap-pages {} gives rings of {ring} bytes, smaller than one sample (up to \
             {max_sample} bytes{}): ask for more pages",
            config.mmap_pages,
            match stack_user {
                0 => String::new(),
                n =>
                    format!(", with its {n} bytes of user stack copy; --call-graph fp copies none"),
            }
        )
        .into());
    }
    Ok((decoder, max_sample))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::tracepoint::Tracefs;

    #[test]
    fn a_ring_may_have_lost_a_sample_only_when_it_had_no_room_for_one() {
        // 4096-byte ring, samples of up to 1200 bytes.
        assert!(!may_have_lost(4096, 0, 1200));
        assert!(!may_have_lost(4096, 2896, 1200));
        assert!(may_have_lost(4096, 2897, 1200));
        assert!(may_have_lost(4096, 4096, 1200));
        // A ring smaller than one sample can lose one at any time.
        assert!(may_have_lost(1024, 0, 1200));
        // Inconsistent counts (more unread than the ring holds) count as full.
        assert!(may_have_lost(4096, 5000, 1200));
    }

    #[test]
    fn max_sample_size_without_callchain_or_payload() {
        let st = sys::SAMPLE_IDENTIFIER | sys::SAMPLE_TID | sys::SAMPLE_TIME | sys::SAMPLE_CPU;
        // Header and four words; no callchain, no payload whatever the limits.
        assert_eq!(max_sample_size(st, &[], 127, 8, 0), 8 + 32);
        let t = Tracefs::fixtures();
        let switch = t.event_format("sched", "sched_switch").unwrap();
        // The fixture's payload is 64 bytes: with its u32 size, padded, 72.
        assert_eq!(
            max_sample_size(st | sys::SAMPLE_RAW, &[&switch], 127, 8, 0),
            8 + 32 + 72
        );
        assert_eq!(
            max_sample_size(st | sys::SAMPLE_CALLCHAIN, &[], 127, 8, 0),
            8 + 32 + 8 + 8 * 135
        );
    }
}
