//! The `sched_switch` and `sched_waking` payloads: their fields located
//! through the format files, and the decoding of a raw payload into the
//! backend-neutral [`Switch`] and [`Waking`]. Both backends use this; they
//! differ only in where the payload, the thread ids and the stacks come from.

use anyhow::Result;

use super::{EventFormat, Field, FieldError};
use crate::event::{Callchain, Comm, RanSince, Switch, WakeContext, Waking};

/// Which of the two tracepoints a payload belongs to; or, for the perf
/// backend, the on-CPU sampling event (`--wall`), which has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tracepoint {
    Switch,
    Waking,
    /// `cpu-clock`: a sample of whatever ran.
    Clock,
}

/// The fields of both tracepoints that we read.
#[derive(Clone, Debug)]
pub(crate) struct SchedFields {
    switch_id: u64,
    waking_id: u64,
    common_type: Field,
    common_pid: Field,
    /// Absent from some formats; then only the kernel stack tells an
    /// interrupt's entry.
    common_flags: Option<Field>,
    prev_comm: Field,
    prev_pid: Field,
    prev_state: Field,
    next_comm: Field,
    next_pid: Field,
    waking_comm: Field,
    waking_pid: Field,
}

impl SchedFields {
    /// Locates the fields in the two format files; fails when one is missing
    /// or both events share an id.
    pub(crate) fn new(switch: &EventFormat, waking: &EventFormat) -> Result<SchedFields> {
        anyhow::ensure!(
            switch.id != waking.id,
            "sched_switch and sched_waking share the id {}",
            switch.id
        );
        Ok(SchedFields {
            switch_id: switch.id as u64,
            waking_id: waking.id as u64,
            common_type: switch.field("common_type")?.clone(),
            common_pid: switch.field("common_pid")?.clone(),
            common_flags: waking.field("common_flags").ok().cloned(),
            prev_comm: switch.field("prev_comm")?.clone(),
            prev_pid: switch.field("prev_pid")?.clone(),
            prev_state: switch.field("prev_state")?.clone(),
            next_comm: switch.field("next_comm")?.clone(),
            next_pid: switch.field("next_pid")?.clone(),
            waking_comm: waking.field("comm")?.clone(),
            waking_pid: waking.field("pid")?.clone(),
        })
    }

    /// The payload's `common_type` (the event id).
    pub(crate) fn common_type(&self, raw: &[u8]) -> Result<u64, FieldError> {
        self.common_type.read_u64(raw)
    }

    /// The payload's `common_pid`: the task whose context the entry was
    /// written in. Every trace entry starts with the same common fields.
    pub(crate) fn common_pid(&self, raw: &[u8]) -> Result<u32, FieldError> {
        Ok(self.common_pid.read_u64(raw)? as u32)
    }

    /// The context the entry was written in, from its `common_flags`, to
    /// be settled by its kernel stack ([`Waking::settle`]). Without flags,
    /// the stack alone tells: [`WakeContext::Softirq`] until settled.
    fn context(&self, raw: &[u8]) -> WakeContext {
        match self.common_flags.as_ref().map(|f| f.read_u64(raw)) {
            Some(Ok(flags)) => WakeContext::from_trace_flags(flags),
            _ => WakeContext::Softirq,
        }
    }

    /// Which tracepoint an event id is, if either.
    pub(crate) fn tracepoint(&self, id: u64) -> Option<Tracepoint> {
        if id == self.switch_id {
            Some(Tracepoint::Switch)
        } else if id == self.waking_id {
            Some(Tracepoint::Waking)
        } else {
            None
        }
    }

    /// A `sched_switch` payload; `prev_tgid` and the stack come from the
    /// backend.
    pub(crate) fn switch(
        &self,
        raw: &[u8],
        prev_tgid: u32,
        stack: Callchain,
    ) -> Result<Switch, FieldError> {
        Ok(Switch {
            prev_tid: self.prev_pid.read_u64(raw)? as u32,
            prev_tgid,
            prev_comm: Comm::from_bytes(self.prev_comm.bytes(raw)?),
            prev_state: self.prev_state.read_u64(raw)?,
            next_tid: self.next_pid.read_u64(raw)? as u32,
            next_comm: Comm::from_bytes(self.next_comm.bytes(raw)?),
            stack,
            user_copy: None,
            prev_ran_since: RanSince::NotTold,
            prev_cgroup: None,
        })
    }

    /// The `prev_pid` of a `sched_switch` payload.
    pub(crate) fn prev_tid(&self, raw: &[u8]) -> Result<u32, FieldError> {
        Ok(self.prev_pid.read_u64(raw)? as u32)
    }

    /// The `prev_pid` and `next_pid` of a `sched_switch` payload: the two
    /// threads on the CPU at its time.
    pub(crate) fn switch_tids(&self, raw: &[u8]) -> Result<(u32, u32), FieldError> {
        Ok((self.prev_tid(raw)?, self.next_pid.read_u64(raw)? as u32))
    }

    /// A `sched_waking` payload, sampled in the waker's context. The stack's
    /// kernel part must already start at the caller of `try_to_wake_up`.
    pub(crate) fn waking(
        &self,
        raw: &[u8],
        waker_tid: u32,
        waker_tgid: u32,
        stack: Callchain,
    ) -> Result<Waking, FieldError> {
        Ok(Waking {
            waker_tid,
            waker_tgid,
            wakee_tid: self.waking_pid.read_u64(raw)? as u32,
            wakee_comm: Comm::from_bytes(self.waking_comm.bytes(raw)?),
            stack,
            user_copy: None,
            context: self.context(raw),
        })
    }
}
