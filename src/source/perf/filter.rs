//! The `sched_waking` tracepoint filter of a `-p`/`-t`/`-- COMMAND` run:
//! the kernel keeps a wakeup only when its wakee (`pid`) is a traced
//! thread, and drops the others before it takes a callchain.
//!
//! A wakeup is sampled in the waker's context, which can be any task, so
//! this event cannot be per-task like `sched_switch`. (The tracepoint does
//! name its wakee to perf, which then adds the hit to the wakee's per-task
//! events bound to that CPU, but only to their counts: they write no
//! sample.) It is per CPU, with a filter kept current from the targets'
//! fork and exit records, read every round. Between a thread's creation and
//! that round, the [`super::nascent`] forecast keeps it: the filter also
//! keeps the pids the kernel will allocate next.

use std::collections::BTreeSet;

/// The kernel copies at most a page of filter text.
pub(crate) const MAX_FILTER_LEN: usize = 4000;

/// Which wakees to keep.
#[derive(Clone, Debug, Default)]
pub(crate) struct WakeeFilter {
    tids: BTreeSet<u32>,
    /// Pids not allocated yet, as inclusive ranges (see
    /// [`WakeeFilter::set_nascent`]).
    nascent: Vec<(u32, u32)>,
    /// The text last given to the kernel.
    applied: Option<String>,
}

impl WakeeFilter {
    /// A filter that keeps the wakeups of `tids`.
    pub(crate) fn new(tids: impl IntoIterator<Item = u32>) -> WakeeFilter {
        WakeeFilter {
            tids: tids.into_iter().collect(),
            nascent: Vec::new(),
            applied: None,
        }
    }

    pub(crate) fn add(&mut self, tid: u32) {
        self.tids.insert(tid);
    }

    pub(crate) fn remove(&mut self, tid: u32) {
        self.tids.remove(&tid);
    }

    /// Keeps `tids` instead of the threads kept so far.
    pub(crate) fn set_tids(&mut self, tids: impl IntoIterator<Item = u32>) {
        self.tids = tids.into_iter().collect();
    }

    pub(crate) fn contains(&self, tid: u32) -> bool {
        self.tids.contains(&tid)
    }

    /// Also keeps these pids (inclusive ranges), which no task holds yet:
    /// a thread the targets create gets one of them, and is kept from its
    /// first wakeup on, before its fork record is read.
    pub(crate) fn set_nascent(&mut self, ranges: Vec<(u32, u32)>) {
        self.nascent = ranges;
    }

    /// The filter text if it differs from what the kernel has, marking it
    /// applied.
    pub(crate) fn changed(&mut self) -> Option<String> {
        let text = self.text();
        if self.applied.as_ref() == Some(&text) {
            return None;
        }
        self.applied = Some(text.clone());
        Some(text)
    }

    /// The filter: exact pids and ranges of consecutive ones, merged into
    /// wider ranges (a superset; user space filters again) when the text
    /// would be too long for the kernel, then the nascent ranges.
    pub(crate) fn text(&self) -> String {
        or_else_none(&self.clauses("pid", MAX_FILTER_LEN))
    }

    /// The same set as a `sched_switch` filter, for per-CPU events: a
    /// switch that puts one of the threads off the CPU or on it; with
    /// `state` (a `prev_state` filter), only the switch-outs it keeps
    /// (switch-ins then come from context-switch records).
    pub(crate) fn switch_text(&self, state: Option<&str>) -> String {
        match state {
            Some(state) => {
                let room = MAX_FILTER_LEN.saturating_sub(state.len() + 10);
                format!(
                    "({}) && ({state})",
                    or_else_none(&self.clauses("prev_pid", room))
                )
            }
            None => {
                let room = MAX_FILTER_LEN / 2 - 4;
                let mut both = self.clauses("prev_pid", room);
                both.extend(self.clauses("next_pid", room));
                or_else_none(&both)
            }
        }
    }

    /// The set as clauses on `field`, fitting in `room` bytes once joined.
    fn clauses(&self, field: &str, room: usize) -> Vec<String> {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &t in &self.tids {
            match ranges.last_mut() {
                Some((_, hi)) if hi.checked_add(1) == Some(t) => *hi = t,
                _ => ranges.push((t, t)),
            }
        }
        // A clause is at most `(F >= 4294967295 && F <= 4294967295)` and
        // its ` || `: 30 bytes and the field twice.
        let clause = 30 + 2 * field.len();
        let count = (room / clause).saturating_sub(self.nascent.len()).max(1);
        if ranges.len() > count {
            ranges = widen(&ranges, count);
        }
        ranges.extend_from_slice(&self.nascent);
        render(&ranges, field)
    }
}

/// Merges `ranges` (sorted, disjoint) into `count` ranges covering them,
/// splitting only at the `count - 1` widest gaps.
fn widen(ranges: &[(u32, u32)], count: usize) -> Vec<(u32, u32)> {
    let mut gaps: Vec<(u32, usize)> = ranges
        .windows(2)
        .enumerate()
        .map(|(i, w)| (w[1].0 - w[0].1, i))
        .collect();
    gaps.sort_unstable_by(|a, b| b.cmp(a));
    let mut cuts: Vec<usize> = gaps
        .iter()
        .take(count.saturating_sub(1))
        .map(|g| g.1)
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::with_capacity(count);
    let mut start = 0;
    for cut in cuts.into_iter().chain([ranges.len() - 1]) {
        out.push((ranges[start].0, ranges[cut].1));
        start = cut + 1;
    }
    out
}

fn render(ranges: &[(u32, u32)], field: &str) -> Vec<String> {
    ranges
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                format!("{field} == {lo}")
            } else {
                format!("({field} >= {lo} && {field} <= {hi})")
            }
        })
        .collect()
}

/// `clauses` joined, or a filter that keeps nothing when there is none
/// (every target exited).
fn or_else_none(clauses: &[String]) -> String {
    if clauses.is_empty() {
        return "common_pid < 0".to_string();
    }
    clauses.join(" || ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_pids_and_ranges() {
        let f = WakeeFilter::new([7, 3, 4, 5, 10]);
        assert_eq!(f.text(), "(pid >= 3 && pid <= 5) || pid == 7 || pid == 10");
        assert_eq!(WakeeFilter::new([]).text(), "common_pid < 0");
    }

    #[test]
    fn changed_reports_each_text_once() {
        let mut f = WakeeFilter::new([1]);
        assert_eq!(f.changed().as_deref(), Some("pid == 1"));
        assert_eq!(f.changed(), None);
        f.add(9);
        assert_eq!(f.changed().as_deref(), Some("pid == 1 || pid == 9"));
    }

    #[test]
    fn nascent_ranges_follow_the_tids_and_take_their_room() {
        let mut f = WakeeFilter::new([5]);
        f.set_nascent(vec![(300, 300), (1001, 1064)]);
        assert_eq!(
            f.text(),
            "pid == 5 || pid == 300 || (pid >= 1001 && pid <= 1064)"
        );
        assert_eq!(f.changed().as_deref(), Some(f.text().as_str()));
        f.set_nascent(vec![(300, 300), (1001, 1064)]);
        assert_eq!(f.changed(), None, "same forecast, same text");
        let tids: Vec<u32> = (0..2000).map(|i| 100_000 + i * 3).collect();
        let mut f = WakeeFilter::new(tids);
        f.set_nascent((0..16).map(|i| (2 * i + 400, 2 * i + 400)).collect());
        let text = f.text();
        assert!(text.len() <= MAX_FILTER_LEN, "{}", text.len());
        assert!(text.ends_with("pid == 428 || pid == 430"), "{text}");
    }

    #[test]
    fn long_lists_become_wider_ranges_that_still_cover_every_tid() {
        let tids: Vec<u32> = (0..2000).map(|i| 100_000 + i * 3).collect();
        let f = WakeeFilter::new(tids.iter().copied());
        let text = f.text();
        assert!(text.len() <= MAX_FILTER_LEN, "{}", text.len());
        // Every tid is inside some clause.
        let ranges: Vec<(u32, u32)> = text
            .split(" || ")
            .filter_map(|c| {
                if let Some(n) = c.strip_prefix("pid == ") {
                    let n = n.parse().ok()?;
                    Some((n, n))
                } else {
                    let c = c.strip_prefix("(pid >= ")?.strip_suffix(')')?;
                    let (lo, hi) = c.split_once(" && pid <= ")?;
                    Some((lo.parse().ok()?, hi.parse().ok()?))
                }
            })
            .collect();
        for t in tids {
            assert!(ranges.iter().any(|&(lo, hi)| lo <= t && t <= hi), "{t}");
        }
    }

    #[test]
    fn switch_filters_keep_the_threads_going_off_and_on_a_cpu() {
        let f = WakeeFilter::new([3, 4, 9]);
        assert_eq!(
            f.switch_text(None),
            "(prev_pid >= 3 && prev_pid <= 4) || prev_pid == 9 || \
             (next_pid >= 3 && next_pid <= 4) || next_pid == 9"
        );
        assert_eq!(
            f.switch_text(Some("prev_state & 2")),
            "((prev_pid >= 3 && prev_pid <= 4) || prev_pid == 9) && (prev_state & 2)"
        );
        let tids: Vec<u32> = (0..3000).map(|i| 100_000 + i * 7).collect();
        let f = WakeeFilter::new(tids);
        for state in [None, Some("prev_state & 1")] {
            let text = f.switch_text(state);
            assert!(text.len() <= MAX_FILTER_LEN, "{}", text.len());
        }
        assert_eq!(WakeeFilter::new([]).switch_text(None), "common_pid < 0");
    }
}
