//! The wall-clock profile (`--wall`): besides blocked waits, a target's
//! waits for a CPU and its time on one, so that each thread's entries add
//! up to its traced wall time.
//!
//! A blocked interval is split at its wakeup: the switch-out to the
//! wakeup stays a blocked wait with its waker, the wakeup to the switch-in
//! is a wait for a CPU, whose pseudo-waker is [`WakeContext::Runnable`].
//! A preempted interval is a wait for a CPU throughout. Each on-CPU sample
//! counts the CPU time it stands for under [`WakeContext::OnCpu`]. Neither
//! share has a chain, and `-m`/`-M` bound blocked waits only.
//!
//! A sample the kernel did not count stands for its event's period. The
//! kernel's timer takes one sample however late it fires, so where a
//! thread's switches are seen as they happen, its sample stands instead
//! for the CPU time its slices took since its previous sample
//! ([`CpuSince`]).

use rustc_hash::FxHashMap;

use super::stacks::{CodeOf, StackRef};
use super::{Aggregator, EntryKey, MAX_LEVELS, OpenInterval, ThreadKey};
use crate::event::{Comm, OnCpu, WakeContext};

/// The CPU time of sampled threads since their last sample, told by their
/// switches. A thread is followed from its first sample until it exits.
///
/// Not under `--state`, whose filter hides switch-outs, nor for the idle
/// task, whose switches some kernels do not report: a missed switch-out
/// would count the wait after it as CPU time.
#[derive(Debug, Default)]
pub(super) struct CpuSince {
    follow: bool,
    threads: FxHashMap<ThreadKey, Slices>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slices {
    /// CPU time of the slices that ended since the last sample; `None`
    /// when one of them began unseen.
    ended_ns: Option<u64>,
    /// The current slice's start, or the last sample if later; `None`
    /// while off CPU or when its switch-in was not seen.
    since: Option<u64>,
}

impl CpuSince {
    /// Follows sampled threads' switches when `follow`.
    pub(super) fn new(follow: bool) -> CpuSince {
        CpuSince {
            follow,
            threads: FxHashMap::default(),
        }
    }

    /// `key` came onto a CPU at `time`.
    pub(super) fn switched_in(&mut self, key: ThreadKey, time: u64) {
        if let Some(t) = self.threads.get_mut(&key) {
            t.since.get_or_insert(time);
        }
    }

    /// `key` left its CPU at `time`.
    pub(super) fn switched_out(&mut self, key: ThreadKey, time: u64) {
        if let Some(t) = self.threads.get_mut(&key) {
            t.ended_ns = match (t.ended_ns, t.since.take()) {
                (Some(ended), Some(since)) => Some(ended + time.saturating_sub(since)),
                _ => None,
            };
        }
    }

    /// `key` is gone: nothing more comes from it.
    pub(super) fn gone(&mut self, key: ThreadKey) {
        self.threads.remove(&key);
    }

    /// Records may have been lost: any switch may have been missed.
    pub(super) fn lost(&mut self) {
        for t in self.threads.values_mut() {
            *t = Slices::default();
        }
    }

    /// The CPU time `key`'s sample at `time` stands for: its slices' since
    /// its last sample when all were seen, else `period_ns`.
    pub(super) fn sampled(&mut self, key: ThreadKey, time: u64, period_ns: u64) -> u64 {
        if !self.follow || key.tid == 0 {
            return period_ns;
        }
        let t = self.threads.entry(key).or_default();
        let ran = match (t.ended_ns, t.since) {
            (Some(ended), Some(since)) => ended + time.saturating_sub(since),
            _ => period_ns,
        };
        *t = Slices {
            ended_ns: Some(0),
            since: Some(time),
        };
        ran
    }
}

/// A share of a target's time that is not a blocked wait.
struct Share {
    tid: u32,
    tgid: u32,
    comm: Comm,
    kernel: StackRef,
    user: StackRef,
    cgroup: u64,
    kind: WakeContext,
    us: u64,
}

impl Aggregator {
    /// Counts the wait for a CPU of target `tid`'s interval `open`, which
    /// ended at `time`: from its wakeup at `woken` on, or all of it when
    /// it was preempted. Returns where its blocked wait ended, `None` when
    /// it had none. A sleep whose wakeup was not seen is a blocked wait
    /// throughout, as without `--wall`.
    pub(super) fn count_runnable(
        &mut self,
        time: u64,
        tid: u32,
        comm: Comm,
        open: &OpenInterval,
        woken: Option<u64>,
    ) -> Option<u64> {
        let from = match (open.slept, woken) {
            (None, _) => open.start,
            (Some(_), Some(at)) => at.clamp(open.start, time),
            (Some(_), None) => return Some(time),
        };
        let us = time.saturating_sub(from) / 1000;
        if us > 0 {
            self.stats.runnable_us = self.stats.runnable_us.saturating_add(us);
            self.add_share(Share {
                tid,
                tgid: open.tgid,
                comm,
                kernel: open.kernel,
                user: open.user,
                cgroup: open.cgroup,
                kind: WakeContext::Runnable,
                us,
            });
        }
        open.slept.map(|_| from)
    }

    /// Counts an on-CPU sample of a target, taken at `time` on `cpu`.
    pub(super) fn on_cpu(&mut self, time: u64, cpu: u32, s: &OnCpu, code: &dyn CodeOf) {
        if !self.wall {
            return;
        }
        let comm = match s.tid {
            0 => Comm::from(format!("swapper/{cpu}").as_str()),
            tid => self.identity.comm_of(tid),
        };
        if !self.identity.samples_target(s, comm) {
            return;
        }
        self.ns_tids.note(s.tid);
        let (kernel, user) = self.intern(s.tgid, time, &s.stack, code);
        let key = ThreadKey::new(s.tid, cpu);
        let ns = match s.counted {
            true => s.cpu_ns,
            false => self.cpu_since.sampled(key, time, s.cpu_ns),
        };
        let us = ns / 1000;
        self.stats.on_cpu_samples += 1;
        self.stats.on_cpu_us = self.stats.on_cpu_us.saturating_add(us);
        self.add_share(Share {
            tid: s.tid,
            tgid: s.tgid,
            comm,
            kernel,
            user,
            cgroup: match self.split_cgroups {
                true => s.cgroup.unwrap_or(0),
                false => 0,
            },
            kind: WakeContext::OnCpu,
            us,
        });
    }

    fn add_share(&mut self, s: Share) {
        let key = EntryKey {
            target_tid: s.tid,
            target_tgid: s.tgid,
            target_comm: s.comm,
            waker_tid: 0,
            waker_tgid: 0,
            waker_comm: Comm::default(),
            waker_context: s.kind,
            target_kernel: s.kernel,
            target_user: s.user,
            waker_kernel: StackRef::Empty,
            waker_user: StackRef::Empty,
            chain: 0,
            cgroup: s.cgroup,
        };
        self.identity.interval(s.tid, s.tgid);
        self.entries
            .add(key, Vec::new(), s.us, &[0; MAX_LEVELS - 1]);
    }
}
