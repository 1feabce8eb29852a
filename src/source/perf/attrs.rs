//! What the events are opened with: the sample type, where switch-ins
//! come from (probing the kernel), the attributes every tracepoint event
//! shares, and the scheduler events built from them.

use anyhow::Result;

use super::record::Tracepoint;
use super::threads::TaskEvent;
use super::{PerfConfig, SwitchIns, abilities, sys};
use crate::plan::{Follow, Targets};
use crate::source::tracepoint::Tracefs;

/// The `sample_type` requested for both tracepoints.
pub(super) fn sample_type(config: &PerfConfig, switch_ins: SwitchIns) -> u64 {
    let mut st = sys::SAMPLE_IDENTIFIER
        | sys::SAMPLE_TID
        | sys::SAMPLE_TIME
        | sys::SAMPLE_CPU
        | sys::SAMPLE_RAW;
    if config.stacks.kernel || config.stacks.user {
        st |= sys::SAMPLE_CALLCHAIN;
    }
    if switch_ins == SwitchIns::Running {
        st |= sys::SAMPLE_READ;
    }
    if config.stacks.user_copy().is_some() {
        st |= sys::SAMPLE_REGS_USER | sys::SAMPLE_STACK_USER;
    }
    if config.cgroup_ids {
        st |= sys::SAMPLE_CGROUP;
    }
    st
}

/// Where switch-ins come from, probing what the kernel can do with
/// `probe` (a `sched_switch` event as it would be opened) on the first of
/// `online`. Chosen threads (`per_task`) use the samples' `time_running`
/// when their events are not inherited, or when the kernel samples
/// inherited events with it and counts the exits of the threads that
/// inherit them (then `sched_process_exit`'s id comes too); else, and
/// under `--state`, context-switch records.
pub(super) fn switch_ins_for(
    tracefs: &Tracefs,
    config: &PerfConfig,
    per_task: bool,
    probe: &sys::TracepointAttr,
    online: &[u32],
    probes: &mut sys::Probes,
) -> Result<(SwitchIns, Option<u64>)> {
    // A cgroup's events sample its switch-outs only: their counts tell
    // the switch-ins, unless --state leaves some out.
    if matches!(config.targets, Targets::Cgroups(_)) && config.state_filter.is_none() {
        return Ok((SwitchIns::Running, None));
    }
    if config.state_filter.is_some() || matches!(config.targets, Targets::Cgroups(_)) {
        return Ok((SwitchIns::Records, None));
    }
    if !per_task {
        return Ok((SwitchIns::Tracepoint, None));
    }
    if !probe.inherit {
        return Ok((SwitchIns::Running, None));
    }
    let first_cpu = online.first().copied().unwrap_or(0);
    let exit_id = || Ok(tracefs.event_format("sched", "sched_process_exit")?.id as u64);
    let able = abilities::of(probe, exit_id, first_cpu, probes)?;
    if !able.inherited_reads {
        return Ok((SwitchIns::Records, None));
    }
    let exit_id = exit_id()?;
    Ok(if able.inherited_exits {
        (SwitchIns::Running, Some(exit_id))
    } else {
        (SwitchIns::Records, Some(exit_id))
    })
}

/// The attributes every tracepoint event shares: what its samples carry
/// (as when switch-ins come from the tracepoint, until they are known),
/// which callchains, when the reader wakes, and what its per-task events
/// follow.
pub(super) fn base_attr(config: &PerfConfig, watermark: u32) -> sys::TracepointAttr {
    let follow = config.targets.follow();
    sys::TracepointAttr {
        id: 0,
        sample_type: sample_type(config, SwitchIns::Tracepoint),
        // No user callchain beside a copy, as perf does: stacks are
        // unwound from the copy, and the kernel's walk of user frame
        // pointers costs a busy process a sixth of its throughput.
        exclude_callchain_user: !config.stacks.user || config.stacks.user_copy().is_some(),
        exclude_callchain_kernel: !config.stacks.kernel,
        side_band: sys::SideBand::None,
        context_switch: false,
        wakeup_watermark: watermark,
        // Per-task events of `-p` follow the threads the process
        // creates; `-t` names threads, not what they create.
        inherit: follow != Follow::Nothing,
        inherit_thread: follow == Follow::Threads,
        stack_user: config.stacks.user_copy().unwrap_or(0),
        cpu_clock_ns: 0,
    }
}

/// The on-CPU sampling event of `--wall` (`config.wall_hz`), with the
/// stacks and sample type of `base` and none of its side-band records:
/// `cpu-clock`, which counts a task's CPU time when opened for one.
pub(super) fn clock_event(base: &sys::TracepointAttr, config: &PerfConfig) -> Option<TaskEvent> {
    let hz = u64::from(config.wall_hz?).max(1);
    Some(TaskEvent {
        tp: Tracepoint::Clock,
        what: "cpu-clock",
        attr: sys::TracepointAttr {
            id: 0,
            side_band: sys::SideBand::None,
            context_switch: false,
            cpu_clock_ns: (1_000_000_000 / hz).max(1),
            ..*base
        },
    })
}

/// The events of `sched_switch` (which brings the side-band records) and
/// `sched_waking`, and when switch-ins come from `time_running`, that of
/// `sched_process_exit` (`exit_id`).
pub(super) fn sched_events(
    base: &sys::TracepointAttr,
    [switch_id, waking_id]: [u32; 2],
    exit_id: Option<u64>,
    switch_ins: SwitchIns,
) -> ([TaskEvent; 2], Option<TaskEvent>) {
    let switch_event = TaskEvent {
        tp: Tracepoint::Switch,
        what: "sched:sched_switch",
        attr: sys::TracepointAttr {
            id: switch_id as u64,
            side_band: sys::SideBand::All,
            context_switch: switch_ins != SwitchIns::Running,
            ..*base
        },
    };
    let waking_event = TaskEvent {
        tp: Tracepoint::Waking,
        what: "sched:sched_waking",
        attr: sys::TracepointAttr {
            id: waking_id as u64,
            ..*base
        },
    };
    // Threads created by traced ones tell their last slice with
    // sched_process_exit (see `running`).
    let exit_event = exit_id
        .filter(|_| switch_ins == SwitchIns::Running)
        .map(|id| TaskEvent {
            tp: Tracepoint::Switch,
            what: "sched:sched_process_exit",
            attr: sys::TracepointAttr { id, ..*base },
        });
    ([switch_event, waking_event], exit_event)
}
