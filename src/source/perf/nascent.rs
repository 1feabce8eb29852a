//! The pids the kernel will hand out next, so that a thread a traced
//! process creates is a kept wakee from its first wakeup on, before its fork
//! record has been read (see [`super::filter::WakeeFilter::set_nascent`]).
//!
//! The kernel allocates pids cyclically: after the last one allocated
//! (`/proc/sys/kernel/ns_last_pid`), the next free one, wrapping to
//! [`FIRST_AFTER_WRAP`] at `pid_max`. The forecast is the next
//! [`NASCENT_PIDS`] free pids. Pids in use are left out (after a wrap
//! they are old processes, not new ones). Once the kernel has allocated
//! some of them, the forecast is made again ([`Forecast::due`], at most
//! every [`refresh_period`]), and the caller sorts the pids allocated
//! meanwhile ([`Forecast::allocated`]) by their `/proc/PID/status`
//! ([`crate::sys::proc::owner`]): a traced process's new thread becomes a kept wakee for
//! good, another task leaves the filter, and a pid `/proc` does not show
//! (a task still being created, or gone already) stays one more period.
//! So a task created on the machine by someone else passes the filter for
//! about one period.

use std::path::Path;
use std::time::{Duration, Instant};

use super::filter::WakeeFilter;
use crate::sys::host::kernel_sysctl;

/// How many future pids the filter keeps.
pub(crate) const NASCENT_PIDS: usize = 64;

/// At most this many filter clauses go to the forecast (its pids are
/// consecutive unless pids in use split them).
pub(crate) const MAX_NASCENT_RANGES: usize = 16;

/// The lowest pid the kernel reuses after wrapping around (`RESERVED_PIDS`).
pub(crate) const FIRST_AFTER_WRAP: u32 = 300;

/// The least time between two forecasts, unless half of one is used: each
/// new forecast replaces the `sched_waking` events, a few system calls per
/// CPU, so the period grows with the CPU count (10 ms, or 1 ms per CPU).
pub(crate) fn refresh_period(cpus: usize) -> Duration {
    Duration::from_millis(cpus.max(10) as u64)
}

/// The next free pids, in the order the kernel will allocate them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Forecast {
    /// `ns_last_pid` when the forecast was made.
    last: u32,
    /// Pids allocated before this forecast whose task could not be told
    /// yet: kept for this period too.
    recent: Vec<u32>,
    /// Free pids after `last`, in allocation order.
    pids: Vec<u32>,
    made: Instant,
}

impl Forecast {
    /// The [`NASCENT_PIDS`] free pids after `last`, under `pid_max`, as far
    /// as [`MAX_NASCENT_RANGES`] ranges reach; `in_use` says whether a
    /// pid is taken.
    #[cfg(test)]
    pub(crate) fn new(last: u32, pid_max: u32, in_use: impl Fn(u32) -> bool) -> Forecast {
        Forecast::with_recent(last, pid_max, in_use, Vec::new(), Instant::now())
    }

    fn with_recent(
        last: u32,
        pid_max: u32,
        in_use: impl Fn(u32) -> bool,
        recent: Vec<u32>,
        made: Instant,
    ) -> Forecast {
        let mut pids = Vec::with_capacity(NASCENT_PIDS);
        let mut ranges = runs(&recent);
        let mut p = last;
        // Bounded: a machine with every pid taken has nothing to forecast.
        for _ in 0..pid_max {
            p = if p.saturating_add(1) >= pid_max {
                FIRST_AFTER_WRAP
            } else {
                p + 1
            };
            if p == last || pids.len() == NASCENT_PIDS {
                break;
            }
            if in_use(p) {
                continue;
            }
            if pids.last().and_then(|&l: &u32| l.checked_add(1)) != Some(p) {
                if ranges >= MAX_NASCENT_RANGES {
                    break;
                }
                ranges += 1;
            }
            pids.push(p);
        }
        Forecast {
            last,
            recent,
            pids,
            made,
        }
    }

    /// Reads `/proc/sys/kernel/ns_last_pid` and `pid_max` and checks
    /// `/proc/PID` for pids in use. `None` when the files cannot be read.
    pub(crate) fn from_proc() -> Option<Forecast> {
        let last = last_pid()?;
        let pid_max = kernel_sysctl("pid_max")?;
        Some(Forecast::settled(
            last,
            pid_max,
            in_use,
            last_pid,
            Vec::new(),
            Instant::now(),
        ))
    }

    /// The next forecast from `/proc`, keeping `unknown`.
    pub(crate) fn next_from_proc(
        &self,
        last: u32,
        unknown: Vec<u32>,
        now: Instant,
    ) -> Option<Forecast> {
        let pid_max = kernel_sysctl("pid_max")?;
        Some(self.next(last, pid_max, in_use, last_pid, unknown, now))
    }

    /// The forecast after `last`, made while the kernel may be allocating
    /// pids: a pid allocated after `last` was read is in use by the time
    /// it is looked at, yet it is a new task, not an old one. So
    /// `ns_last_pid` is read again (`now_last`) after each look, and the
    /// pids from `last` to it are kept whatever `in_use` says; they are
    /// sorted out with the next forecast. Looked at again (a few times at
    /// most) while pids keep being allocated.
    fn settled(
        last: u32,
        pid_max: u32,
        in_use: impl Fn(u32) -> bool,
        now_last: impl Fn() -> Option<u32>,
        recent: Vec<u32>,
        made: Instant,
    ) -> Forecast {
        let mut upto = last;
        let mut forecast;
        let mut looks = 0;
        loop {
            let allocated = |p: u32| cyclic_between(last, p, upto);
            forecast = Forecast::with_recent(
                last,
                pid_max,
                |p| !allocated(p) && in_use(p),
                recent.clone(),
                made,
            );
            looks += 1;
            match now_last() {
                Some(now) if now != upto && looks < 4 => upto = now,
                _ => return forecast,
            }
        }
    }

    /// True when `pid` was kept from before because `/proc` did not show
    /// its task (it is not kept a second time).
    pub(crate) fn was_unknown(&self, pid: u32) -> bool {
        self.recent.contains(&pid)
    }

    /// The pids of this forecast the kernel has allocated, going from
    /// `self.last` to `last` (a prefix of `pids`).
    fn used(&self, last: u32) -> &[u32] {
        let n = self
            .pids
            .iter()
            .take_while(|&&p| cyclic_between(self.last, p, last))
            .count();
        &self.pids[..n]
    }

    /// Whether to forecast again, `ns_last_pid` being `last` at `now`:
    /// when the kernel has allocated pids (half of the forecast, or any
    /// once `period` has passed), or when pids kept from before have been
    /// kept for a period.
    pub(crate) fn due(&self, last: u32, now: Instant, period: Duration) -> bool {
        let aged = now.saturating_duration_since(self.made) >= period;
        if last == self.last {
            return aged && !self.recent.is_empty();
        }
        let used = self.used(last).len();
        used * 2 >= self.pids.len() || aged
    }

    /// The pids to sort out before the next forecast: those of this one
    /// the kernel has allocated (`ns_last_pid` being `last`), and those
    /// kept from before.
    pub(crate) fn allocated(&self, last: u32) -> Vec<u32> {
        self.recent.iter().chain(self.used(last)).copied().collect()
    }

    /// The forecast after `last`, also keeping `unknown` (allocated pids
    /// whose task could not be told yet); `now_last` reads `ns_last_pid`
    /// (see [`Forecast::settled`]).
    pub(crate) fn next(
        &self,
        last: u32,
        pid_max: u32,
        in_use: impl Fn(u32) -> bool,
        now_last: impl Fn() -> Option<u32>,
        unknown: Vec<u32>,
        now: Instant,
    ) -> Forecast {
        Forecast::settled(last, pid_max, in_use, now_last, unknown, now)
    }

    /// The kept pids as sorted, disjoint inclusive ranges.
    pub(crate) fn ranges(&self) -> Vec<(u32, u32)> {
        let mut sorted: Vec<u32> = self.recent.iter().chain(&self.pids).copied().collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for p in sorted {
            match ranges.last_mut() {
                Some((_, hi)) if hi.checked_add(1) == Some(p) => *hi = p,
                _ => ranges.push((p, p)),
            }
        }
        ranges
    }
}

/// Whether `p` comes after `from` and no later than `to` in the kernel's
/// cyclic allocation order (never, when `from == to`).
fn cyclic_between(from: u32, p: u32, to: u32) -> bool {
    if from <= to {
        from < p && p <= to
    } else {
        p > from || p <= to
    }
}

/// Number of runs of consecutive pids in `pids` (in allocation order).
fn runs(pids: &[u32]) -> usize {
    pids.windows(2)
        .filter(|w| w[0].checked_add(1) != Some(w[1]))
        .count()
        + usize::from(!pids.is_empty())
}

fn in_use(p: u32) -> bool {
    // Threads are not listed in /proc, but /proc/TID resolves.
    Path::new(&format!("/proc/{p}")).exists()
}

/// The forecast of a wakee filter, with the `ns_last_pid` it is checked
/// against every round.
pub(crate) struct Nascent {
    forecast: Forecast,
    last_pid: LastPid,
}

impl Nascent {
    /// Starts a forecast, and has `wakees` keep its pids. `None` when
    /// `/proc` cannot tell the last pid (another PID namespace).
    pub(crate) fn start(wakees: &mut WakeeFilter) -> Option<Nascent> {
        let forecast = Forecast::from_proc()?;
        let last_pid = LastPid::open()?;
        wakees.set_nascent(forecast.ranges());
        Some(Nascent { forecast, last_pid })
    }

    /// Forecasts the next pids again when [`Forecast::due`], first sorting
    /// out the pids the kernel allocated since the last forecast: a new
    /// thread of a kept process (with `children`, a child of one too)
    /// becomes a kept wakee, other tasks leave the filter, and a pid
    /// `/proc` does not show yet stays one more period.
    pub(crate) fn refresh(&mut self, wakees: &mut WakeeFilter, children: bool, ncpus: usize) {
        let now = Instant::now();
        let Some(last) = self.last_pid.read() else {
            return;
        };
        let forecast = &mut self.forecast;
        if !forecast.due(last, now, refresh_period(ncpus)) {
            return;
        }
        let mut unknown = Vec::new();
        for pid in forecast.allocated(last) {
            // Its fork record, read already, made it a kept wakee.
            if wakees.contains(pid) {
                continue;
            }
            match crate::sys::proc::owner(pid) {
                Some((tgid, parent))
                    if wakees.contains(tgid) || (children && wakees.contains(parent)) =>
                {
                    wakees.add(pid);
                }
                Some(_) => {}
                // Being created (or gone already): looked at once more.
                None if !forecast.was_unknown(pid) => unknown.push(pid),
                None => {}
            }
        }
        if let Some(f) = forecast.next_from_proc(last, unknown, now) {
            wakees.set_nascent(f.ranges());
            *forecast = f;
        }
    }
}

/// `ns_last_pid` now, if readable.
pub(crate) fn last_pid() -> Option<u32> {
    kernel_sysctl("ns_last_pid")
}

/// `ns_last_pid`, kept open: each read is one `pread` (the forecast looks
/// at it every round, and opening it cost four more system calls).
pub(crate) struct LastPid(std::fs::File);

impl LastPid {
    pub(crate) fn open() -> Option<LastPid> {
        std::fs::File::open("/proc/sys/kernel/ns_last_pid")
            .ok()
            .map(LastPid)
    }

    /// The value now, if readable.
    pub(crate) fn read(&self) -> Option<u32> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 16];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_pid_kept_open_reads_what_a_fresh_open_reads() {
        let kept = LastPid::open().expect("ns_last_pid");
        let (a, b) = (
            kept.read().expect("a number"),
            last_pid().expect("a number"),
        );
        // Other tasks may be created in between, never destroyed pids.
        assert!(b >= a || a - b > 1000, "{a} then {b}");
        std::process::Command::new("true")
            .status()
            .expect("running true");
        assert_ne!(kept.read(), Some(a), "a new process took a pid");
    }

    #[test]
    fn the_next_free_pids_in_allocation_order() {
        let f = Forecast::new(1000, 32768, |p| p == 1003 || p == 1004);
        assert_eq!(f.pids.len(), NASCENT_PIDS);
        assert_eq!(&f.pids[..3], &[1001, 1002, 1005]);
        assert_eq!(f.ranges(), vec![(1001, 1002), (1005, 1066)]);
    }

    #[test]
    fn wraps_to_the_first_reusable_pid() {
        let f = Forecast::new(32760, 32768, |p| p == 301);
        assert_eq!(
            &f.pids[..8],
            &[32761, 32762, 32763, 32764, 32765, 32766, 32767, 300]
        );
        assert_eq!(f.pids[8], 302);
        assert_eq!(f.ranges()[0], (300, 300));
        assert_eq!(f.ranges().last(), Some(&(32761, 32767)));
    }

    #[test]
    fn fragmented_pids_stop_at_the_range_budget() {
        // Every other pid is in use: each free one is its own range.
        let f = Forecast::new(1000, 32768, |p| p % 2 == 0);
        assert_eq!(f.pids.len(), MAX_NASCENT_RANGES);
        assert_eq!(f.ranges().len(), MAX_NASCENT_RANGES);
    }

    #[test]
    fn a_full_pid_space_forecasts_nothing() {
        let f = Forecast::new(500, 1000, |_| true);
        assert!(f.pids.is_empty());
        assert!(f.ranges().is_empty());
        let p = refresh_period(2);
        let later = f.made + p;
        assert!(!f.due(500, later, p));
        assert!(f.due(501, later, p));
    }

    #[test]
    fn due_when_half_is_used_or_some_after_a_period() {
        let p = refresh_period(2);
        let f = Forecast::new(1000, 32768, |_| false);
        let soon = f.made + p / 2;
        let later = f.made + p;
        assert!(!f.due(1000, later, p), "nothing allocated");
        assert!(!f.due(1031, soon, p), "31 of 64 used");
        assert!(f.due(1032, soon, p), "32 of 64 used");
        assert!(f.due(1001, later, p), "one used, a period later");
        assert!(f.due(5000, soon, p));
        // Around the wrap.
        let f = Forecast::new(32750, 32768, |_| false);
        let soon = f.made;
        assert!(!f.due(32767, soon, p), "17 of 64 used");
        assert!(!f.due(313, soon, p), "17 + 14 of 64 used");
        assert!(f.due(314, soon, p), "17 + 15 of 64 used");
    }

    #[test]
    fn unknown_pids_stay_one_more_period() {
        let p = refresh_period(2);
        let f = Forecast::new(1000, 32768, |_| false);
        // 1001 and 1002 were allocated; /proc did not show 1002 yet (a
        // task being created), and 1001 was told and left.
        let t1 = f.made + p;
        assert_eq!(f.allocated(1002), vec![1001, 1002]);
        let g = f.next(1002, 32768, |p| p <= 1002, || Some(1002), vec![1002], t1);
        assert_eq!(g.ranges(), vec![(1002, 1066)]);
        assert_eq!(g.pids.len(), NASCENT_PIDS);
        // A period later with nothing allocated, it is sorted out again.
        assert!(!g.due(1002, t1 + p / 2, p));
        assert!(g.due(1002, t1 + p, p));
        assert_eq!(g.allocated(1002), vec![1002]);
        let h = g.next(
            1002,
            32768,
            |p| p <= 1002,
            || Some(1002),
            Vec::new(),
            t1 + p,
        );
        assert_eq!(h.ranges(), vec![(1003, 1066)]);
        assert!(!h.due(1002, t1 + 10 * p, p));
    }

    #[test]
    fn pids_allocated_while_looking_are_new_tasks_not_old_ones() {
        // ns_last_pid was 1000; 1001 and 1002 were allocated before
        // /proc was looked at, so they are in use, as is an old 1005.
        let reads = std::cell::Cell::new(0);
        let now_last = || {
            reads.set(reads.get() + 1);
            Some(1002)
        };
        let busy = |p: u32| matches!(p, 1001 | 1002 | 1005);
        let f = Forecast::settled(1000, 32768, busy, now_last, Vec::new(), Instant::now());
        assert_eq!(&f.pids[..5], &[1001, 1002, 1003, 1004, 1006]);
        assert_eq!(reads.get(), 2, "looked again once ns_last_pid moved");
        // Sorted out with the next forecast, as any allocated pid.
        assert_eq!(f.allocated(1002), vec![1001, 1002]);

        // Pids allocated during every look: it gives up after four.
        let last = std::cell::Cell::new(1000);
        let racing = || {
            last.set(last.get() + 1);
            Some(last.get())
        };
        let f = Forecast::settled(
            1000,
            32768,
            |p| p <= last.get(),
            racing,
            Vec::new(),
            Instant::now(),
        );
        assert_eq!(last.get(), 1004);
        assert_eq!(&f.pids[..3], &[1001, 1002, 1003]);

        // Nothing allocated meanwhile: one look, in-use pids are old.
        let f = Forecast::settled(
            1000,
            32768,
            |p| p == 1001,
            || Some(1000),
            Vec::new(),
            Instant::now(),
        );
        assert_eq!(f.pids[0], 1002);
        // Around the wrap.
        let f = Forecast::settled(
            32766,
            32768,
            |p| p == 32767 || p == 300,
            || Some(300),
            Vec::new(),
            Instant::now(),
        );
        assert_eq!(&f.pids[..3], &[32767, 300, 301]);
    }

    #[test]
    fn periods_grow_with_the_cpu_count() {
        assert_eq!(refresh_period(2), Duration::from_millis(10));
        assert_eq!(refresh_period(64), Duration::from_millis(64));
    }
}
