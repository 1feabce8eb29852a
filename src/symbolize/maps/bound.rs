//! The bounds of a process's map history: perf records no munmap, so a
//! process that maps files at new addresses again and again would grow it
//! without end. Its paths are held once, and the history is compacted to
//! what is mapped and what stored stacks use, up to [`MAX_MAPPINGS`].

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::{Mapping, Process, ProcessMaps, parse_maps};
use crate::sys::vma::Maps;

/// Most mappings one process's history holds. Without munmap records, a
/// process that maps files at new addresses again and again would grow it
/// without end, and each sample's unwinding would go through all of it.
pub(super) const MAX_MAPPINGS: usize = 4096;

/// The length at which a history is first compacted; then at twice what
/// compacting left, so that compacting costs a constant per mapping.
pub(super) const COMPACT_FIRST: usize = 256;

/// Least event time between two reads of a process's maps to compact its
/// history; a full history is compacted again at most that often.
pub(super) const COMPACT_READ_NS: u64 = 10_000_000;

/// Most bytes of `/proc/PID/maps` read at once: a process chooses how many
/// mappings it has and how long their paths are.
pub(super) const MAX_MAPS_TEXT: u64 = 8 << 20;

impl ProcessMaps {
    /// Makes room in `tgid`'s history: ends the mappings that `/proc` no
    /// longer shows (while the process lives), then drops the ended ones
    /// that no stored stack has an address in. The next compaction is due
    /// at twice what is left.
    pub(super) fn compact(&mut self, tgid: u32, time: u64) {
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        // Asking for its maps holds up its own mmap calls a little: at
        // most every 10 ms of trace.
        let read = !self.recorded
            && !p.exited
            && p.compact_read_at
                .is_none_or(|t| time.saturating_sub(t) >= COMPACT_READ_NS);
        if read {
            p.compact_read_at = Some(time);
        }
        let shown = if read {
            self.executable_now(tgid)
        } else {
            None
        };
        let Some(p) = self.procs.get_mut(&tgid) else {
            return;
        };
        if let Some((now, past)) = shown {
            // Gone: nothing executable is mapped anywhere in its range any
            // more (the kernel merges and splits what was mapped apart).
            for m in &mut p.mappings {
                if m.until == u64::MAX
                    && m.end <= past
                    && !m.is_vdso()
                    && !overlaps(&now, m.start, m.end)
                {
                    m.until = time.max(m.from);
                }
            }
        }
        let before = p.mappings.len();
        let used = &p.used;
        p.mappings
            .retain(|m| m.until == u64::MAX || used.contains(&(m.start, m.from)));
        if p.mappings.len() != before {
            p.version += 1;
        }
        p.paths.retain(|path| Arc::strong_count(path) > 1);
        p.compact_at = (2 * p.mappings.len()).clamp(COMPACT_FIRST, MAX_MAPPINGS);
        p.compacted_at = time;
    }

    /// The ranges of the executable file mappings `tgid` has now, in
    /// address order, and the address below which that is all of them:
    /// asked of the kernel, else read as text within
    /// [`ProcessMaps::text_budget`].
    fn executable_now(&mut self, tgid: u32) -> Option<(Vec<(u64, u64)>, u64)> {
        if let Some(files) = Maps::open(tgid)?.executable_files(MAX_MAPPINGS + 1) {
            let past = match files.get(MAX_MAPPINGS) {
                Some(v) => v.start,
                None => u64::MAX,
            };
            return Some((files.iter().map(|v| (v.start, v.end)).collect(), past));
        }
        let started = Instant::now();
        if !self.text_budget.allowed(started) {
            return None;
        }
        let shown = read_maps(tgid).map(|text| parse_maps(&text, 0));
        self.text_budget.charge(started.elapsed());
        let shown = shown?;
        // Lines come in address order; a capped read tells nothing of
        // what lies past its last line.
        let past = shown.last().map_or(0, |m| m.end);
        Some((shown.iter().map(|m| (m.start, m.end)).collect(), past))
    }

    /// The NOTE on processes whose mappings were not all followed.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut full: Vec<(u32, u64)> = self
            .procs
            .iter()
            .filter(|(_, p)| p.unfollowed > 0)
            .map(|(&tgid, p)| (tgid, p.unfollowed))
            .collect();
        if full.is_empty() {
            return Vec::new();
        }
        full.sort_unstable();
        let total: u64 = full.iter().map(|&(_, n)| n).sum();
        let shown: Vec<String> = full
            .iter()
            .take(3)
            .map(|(tgid, n)| format!("PID {tgid} ({n})"))
            .collect();
        let more = if full.len() > shown.len() {
            format!(" and {} more", full.len() - shown.len())
        } else {
            String::new()
        };
        vec![format!(
            "NOTE: {total} executable mappings were not followed, their process's map \
             history being full ({MAX_MAPPINGS} mappings not known to be gone): {}{more}; \
             frames in them print as [unknown].",
            shown.join(", ")
        )]
    }
}

/// True when one of `ranges` (in address order, apart) meets
/// `[start, end)`.
fn overlaps(ranges: &[(u64, u64)], start: u64, end: u64) -> bool {
    // The first range that ends past `start`.
    let i = ranges.partition_point(|&(_, e)| e <= start);
    ranges.get(i).is_some_and(|&(s, _)| s < end)
}

/// The length at which `p`'s history is compacted next.
pub(super) fn compact_threshold(p: &Process) -> usize {
    if p.compact_at == 0 {
        COMPACT_FIRST
    } else {
        p.compact_at
    }
}

/// `/proc/PID/maps`, up to [`MAX_MAPS_TEXT`] bytes (whole lines).
pub(super) fn read_maps(tgid: u32) -> Option<String> {
    let path = format!("/proc/{tgid}/maps");
    let bytes = crate::sys::proc::read_capped(Path::new(&path), MAX_MAPS_TEXT).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Ends, at `time`, the mappings in place that `[start, end)` overlaps: a
/// new mapping replaces whatever was mapped there. What they held outside
/// it stays mapped: it is returned, as mappings from `time` on.
pub(super) fn end_overlapped(
    mappings: &mut [Mapping],
    start: u64,
    end: u64,
    time: u64,
) -> Vec<Mapping> {
    let mut left = Vec::new();
    for m in mappings {
        if m.until != u64::MAX || m.end <= start || end <= m.start || m.from > time {
            continue;
        }
        m.until = time;
        if m.start < start {
            left.push(Mapping {
                end: start,
                from: time,
                until: u64::MAX,
                ..m.clone()
            });
        }
        if end < m.end {
            left.push(Mapping {
                start: end,
                pgoff: m.pgoff.wrapping_add(end - m.start),
                from: time,
                until: u64::MAX,
                ..m.clone()
            });
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::overlaps;

    #[test]
    fn a_range_overlaps_only_what_it_meets() {
        let r = [(0x1000, 0x2000), (0x5000, 0x8000)];
        // Merged or split by the kernel: still met, so kept.
        assert!(overlaps(&r, 0x1800, 0x1900));
        assert!(overlaps(&r, 0x4000, 0x6000));
        assert!(overlaps(&r, 0x0, 0x9000));
        // Gone.
        assert!(!overlaps(&r, 0x2000, 0x5000));
        assert!(!overlaps(&r, 0x8000, 0x9000));
        assert!(!overlaps(&r, 0x0, 0x1000));
        assert!(!overlaps(&[], 0x0, 0x1000));
    }
}
