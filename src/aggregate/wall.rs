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

use super::stacks::{CodeOf, StackRef};
use super::{Aggregator, EntryKey, MAX_LEVELS, OpenInterval};
use crate::event::{Comm, OnCpu, WakeContext};

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
        let us = s.period_ns / 1000;
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
