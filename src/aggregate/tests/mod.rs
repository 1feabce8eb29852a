//! Tests of the aggregator, by topic, and the events and tables they
//! share.

mod bounds;
mod chains;
mod comms;
mod cuts;
mod notes;
mod pairing;
mod stored_stacks;
mod switch_ins;
mod targets;
mod wall;

use super::tasks::TaskInfo;
use super::*;

const S: u64 = 1; // TASK_INTERRUPTIBLE
const D: u64 = 2; // TASK_UNINTERRUPTIBLE
const PREEMPTED: u64 = 256;

fn config() -> Config {
    // Idle intervals (from `back_in`) are not targets unless a test
    // asks for them.
    let tids = [100, 101, 200, 300, 400, 500, 1000, 1001, 1500, 2000, 3000];
    Config {
        threads: Targets::Threads(tids.into_iter().collect()),
        state: None,
        min_block_us: 1,
        max_block_us: u64::MAX,
        stack_storage_size: 16384,
        own: None,
        stacks: Stacks::both_fp(),
        chain: 1,
        cgroup_names: None,
        split_cgroups: false,
        wall: false,
    }
}

fn task(tgid: u32, comm: &str, kthread: bool) -> TaskInfo {
    TaskInfo {
        tgid,
        comm: Comm::from(comm),
        kthread,
    }
}

/// A table with: 100/101 "app" (threads of 100), 200 "waker",
/// 300 "kworker/0:1" (kernel thread), 400 "other".
fn table() -> TaskTable {
    let mut t = TaskTable::default();
    t.tasks.insert(100, task(100, "app", false));
    t.tasks.insert(101, task(100, "app", false));
    t.tasks.insert(200, task(200, "waker", false));
    t.tasks.insert(300, task(300, "kworker/0:1", true));
    t.tasks.insert(400, task(400, "other", false));
    t
}

fn no_lookup() -> TaskLookup {
    Box::new(|_| None)
}

fn agg(config: Config) -> Aggregator {
    Aggregator::new(config, table()).with_task_lookup(no_lookup())
}

fn chain(kernel: &[u64], user: &[u64]) -> Callchain {
    Callchain::new(kernel, user)
}

fn tgid_of(tid: u32) -> u32 {
    match tid {
        101 => 100,
        1001 => 1000,
        t => t,
    }
}

/// `prev` leaves CPU `cpu` in `state` with stack `stack`; `next` enters.
fn switch(
    time: u64,
    cpu: u32,
    prev: u32,
    state: u64,
    stack: Callchain,
    next: u32,
    next_comm: &str,
) -> Event {
    Event {
        time,
        cpu,
        kind: EventKind::Switch(Switch {
            prev_tid: prev,
            prev_tgid: tgid_of(prev),
            prev_comm: Comm::from("prev"),
            prev_state: state,
            next_tid: next,
            next_comm: Comm::from(next_comm),
            stack,
            user_copy: None,
            prev_ran_since: RanSince::NotTold,
            prev_cgroup: None,
        }),
    }
}

/// `tid` blocks (state S) with a fixed stack; idle comes in.
fn out(time: u64, cpu: u32, tid: u32) -> Event {
    switch(time, cpu, tid, S, chain(&[0xf1], &[0x4001]), 0, "swapper")
}

/// `tid` leaves in `state`, having switched in at `since` as the perf
/// backend tells per-task switch-ins (`Unknown` when it cannot).
fn ran_out(time: u64, cpu: u32, tid: u32, state: u64, since: RanSince) -> Event {
    let mut e = switch(
        time,
        cpu,
        tid,
        state,
        chain(&[0xf1], &[0x4001]),
        0,
        "swapper",
    );
    if let EventKind::Switch(s) = &mut e.kind {
        s.prev_ran_since = since;
    }
    e
}

/// `tid` comes back in; idle leaves (preempted, no stack).
fn back_in(time: u64, cpu: u32, tid: u32, comm: &str) -> Event {
    switch(time, cpu, 0, PREEMPTED, chain(&[], &[]), tid, comm)
}

fn waking(time: u64, cpu: u32, waker: u32, wakee: u32, stack: Callchain) -> Event {
    Event {
        time,
        cpu,
        kind: EventKind::Waking(Waking {
            waker_tid: waker,
            waker_tgid: tgid_of(waker),
            wakee_tid: wakee,
            wakee_comm: Comm::from("wakee"),
            stack,
            user_copy: None,
            context: crate::event::WakeContext::Task,
        }),
    }
}

fn ev(time: u64, kind: EventKind) -> Event {
    Event { time, cpu: 0, kind }
}

fn run(a: &mut Aggregator, events: &[Event]) {
    for e in events {
        a.process(e);
    }
}

fn sorted(entries: &[Entry]) -> Vec<Entry> {
    let mut v = entries.to_vec();
    v.sort_by_key(|e| e.key);
    v
}

fn only(result: &Aggregate) -> Entry {
    assert_eq!(result.entries.len(), 1, "{:#?}", result.entries);
    result.entries[0]
}

/// Target tids of the counted entries.
fn target_tids(result: &Aggregate) -> Vec<u32> {
    let mut v: Vec<u32> = result.entries.iter().map(|e| e.key.target_tid).collect();
    v.sort();
    v.dedup();
    v
}

fn switch_in_record(time: u64, cpu: u32, tid: u32) -> Event {
    Event {
        time,
        cpu,
        kind: EventKind::SwitchIn(SwitchIn {
            tid,
            tgid: tgid_of(tid),
            prev_tid: 0,
        }),
    }
}
