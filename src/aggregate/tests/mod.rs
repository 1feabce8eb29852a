//! Tests of the aggregator: intervals and their wakers, switch-ins told
//! late or by records, losses, comms, targets and stacks.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use super::quiet::TargetKind;
use super::tasks::TaskInfo;
use super::*;
use crate::event::{Lost, Mmap};

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
#[test]
fn notes_count_in_the_singular_and_the_plural() {
    let notes = |stats: Stats| stats.notes(false, "--mmap-pages").join("\n");
    let one = notes(Stats {
        switch_ins_from_backstop: 1,
        switch_in_unseen: 1,
        switch_in_unknown: 1,
        woken_by_self: 1,
        woken_by_self_us: 7,
        ..Stats::default()
    });
    for want in [
        "did not report 1 switch-in; it was taken",
        "leave that interval without",
        "NOTE: 1 interval was dropped: their thread ran again but",
        "NOTE: 1 interval was dropped: their thread ran again, but",
        "ending 1 blocked interval (7 us)",
    ] {
        assert!(one.contains(want), "{want:?} not in:\n{one}");
    }
    let many = notes(Stats {
        switch_ins_from_backstop: 2,
        switch_in_unseen: 3,
        switch_in_unknown: 4,
        woken_by_self: 5,
        woken_by_self_us: 9,
        ..Stats::default()
    });
    for want in [
        "did not report 2 switch-ins; they were taken",
        "leave those intervals without",
        "NOTE: 3 intervals were dropped",
        "NOTE: 4 intervals were dropped",
        "ending 5 blocked intervals (9 us)",
    ] {
        assert!(many.contains(want), "{want:?} not in:\n{many}");
    }
}

#[test]
fn own_tasks_are_never_targets_and_are_named_as_wakers() {
    // 100 (and its thread 101) is the tool; 400 a helper it forked.
    let mut c = config();
    c.threads = Targets::UserThreads;
    c.own = Some(OwnTasks {
        tgid: 100,
        helper: |pid| pid == 400,
    });
    let mut a = agg(c);
    run(
        &mut a,
        &[
            // The tool's threads and its helper block: not targets.
            out(1_000, 0, 100),
            out(1_000, 1, 101),
            back_in(9_000, 0, 100, "app"),
            back_in(9_000, 1, 101, "app"),
            out(10_000, 0, 400),
            back_in(19_000, 0, 400, "helper"),
            // 200 is woken by the helper, then by a thread of the tool,
            // then by 300.
            out(20_000, 1, 200),
            waking(25_000, 0, 400, 200, chain(&[0xe1], &[])),
            back_in(30_000, 1, 200, "waker"),
            out(31_000, 1, 200),
            waking(33_000, 0, 101, 200, chain(&[0xe1], &[])),
            back_in(34_000, 1, 200, "waker"),
            out(40_000, 1, 200),
            waking(41_000, 0, 300, 200, chain(&[0xe1], &[])),
            back_in(42_000, 1, 200, "waker"),
            // A timer interrupt that landed in the tool's thread.
            out(50_000, 1, 200),
            {
                let mut w = waking(52_000, 0, 101, 200, chain(&[0xe1], &[]));
                if let EventKind::Waking(w) = &mut w.kind {
                    w.context = WakeContext::Hardirq;
                }
                w
            },
            back_in(53_000, 1, 200, "waker"),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), vec![200]);
    assert_eq!(r.stats.intervals, 4);
    assert_eq!((r.stats.woken_by_self, r.stats.woken_by_self_us), (2, 13));
    let notes = r.stats.notes(false, "--mmap-pages");
    assert!(
        notes.iter().any(|n| n.starts_with(
            "NOTE: offwake-perf's own threads woke traced threads, ending 2 blocked \
             intervals (13 us)"
        )),
        "{notes:?}"
    );
    // Without own tasks, the same threads are targets and wakers like
    // any other.
    let mut c = config();
    c.threads = Targets::UserThreads;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            back_in(9_000, 0, 100, "app"),
            out(20_000, 1, 200),
            waking(25_000, 0, 400, 200, chain(&[0xe1], &[])),
            back_in(30_000, 1, 200, "waker"),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), vec![100, 200]);
    assert_eq!(r.stats.woken_by_self, 0);
}

#[test]
fn simple_interval_with_waker() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            switch(
                1_000,
                0,
                100,
                S,
                chain(&[0xf1, 0xf2], &[0x401, 0x402]),
                0,
                "swapper/0",
            ),
            waking(5_000, 0, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(11_500, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.total_us, 10);
    assert_eq!(e.key.target_tid, 100);
    assert_eq!(e.key.target_tgid, 100);
    assert_eq!(e.key.target_comm.as_str(), "app");
    assert_eq!(e.key.waker_tid, 200);
    assert_eq!(e.key.waker_tgid, 200);
    assert_eq!(e.key.waker_comm.as_str(), "waker");
    assert_eq!(
        r.stacks.kernel_addrs(e.key.target_kernel),
        Some(&[0xf1u64, 0xf2][..])
    );
    let tu = r.stacks.user_stack(e.key.target_user).unwrap();
    assert_eq!(
        (tu.tgid, tu.time, tu.addrs.clone()),
        (100, 1_000, vec![0x401, 0x402])
    );
    assert_eq!(
        r.stacks.kernel_addrs(e.key.waker_kernel),
        Some(&[0xe1u64][..])
    );
    let wu = r.stacks.user_stack(e.key.waker_user).unwrap();
    assert_eq!(
        (wu.tgid, wu.time, wu.addrs.clone()),
        (200, 5_000, vec![0x501])
    );
    assert_eq!(r.stats.intervals, 1);
}

#[test]
fn newly_stored_user_stacks_are_listed_once() {
    let mut a = agg(config());
    let before = a.user_stacks_stored();
    a.process(&out(1_000, 0, 100));
    let new: Vec<u32> = a.user_stacks_since(before).iter().map(|s| s.tgid).collect();
    assert_eq!(new, vec![100]);
    // The same stack again stores nothing new.
    a.process(&back_in(2_000, 0, 100, "app"));
    let before = a.user_stacks_stored();
    a.process(&out(3_000, 0, 100));
    assert!(a.user_stacks_since(before).is_empty());
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

#[test]
fn switch_in_record_closes_an_unreported_switch_in() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 1, 100),
            waking(5_000, 0, 200, 100, chain(&[0xe1], &[])),
            // sched_switch never reported the switch-in; the context
            // switch record did.
            switch_in_record(21_000, 1, 100),
            out(30_000, 1, 100),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.total_us, 20);
    assert_eq!(e.key.waker_tid, 200);
    assert_eq!(e.key.target_comm.as_str(), "wakee");
    assert_eq!(r.stats.switch_ins_from_backstop, 1);
}

#[test]
fn switch_in_record_after_sched_switch_is_not_counted_twice() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            back_in(11_000, 0, 100, "app"),
            switch_in_record(12_000, 0, 100),
        ],
    );
    let r = a.finish();
    assert_eq!(only(&r).total_us, 10);
    assert_eq!(r.stats.switch_ins_from_backstop, 0);
}

/// `tid` blocks in state D as `comm`, a thread the task table lacks.
fn out_as(time: u64, tid: u32, comm: &str) -> Event {
    let mut e = switch(time, 0, tid, D, chain(&[0xf1], &[0x4001]), 0, "swapper/0");
    if let EventKind::Switch(s) = &mut e.kind {
        s.prev_comm = Comm::from(comm);
    }
    e
}

/// `waker` wakes `wakee`, whose comm the event gives as `comm`.
fn waking_of(time: u64, waker: u32, wakee: u32, comm: &str) -> Event {
    let mut e = waking(time, 0, waker, wakee, chain(&[0xe1], &[]));
    if let EventKind::Waking(w) = &mut e.kind {
        w.wakee_comm = Comm::from(comm);
    }
    e
}

/// A process started after the `/proc` scan but before tracing (no
/// fork record, not in the table) and gone before the report: when its
/// switch-in comes from a context-switch record (the kernel dropped
/// that `sched_switch`, e.g. under a `--state` filter), its comm is
/// the one its own switch-out carried, not empty.
#[test]
fn a_switch_in_record_takes_the_comm_events_gave() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out_as(1_000, 500, "dd"),
            waking_of(5_000, 200, 500, "dd"),
            switch_in_record(21_000, 0, 500),
            out_as(30_000, 500, "dd"),
            switch_in_record(41_000, 0, 500),
        ],
    );
    let r = a.finish();
    assert_eq!(r.entries.len(), 2, "{:#?}", r.entries);
    for e in &r.entries {
        assert_eq!(e.key.target_comm.as_str(), "dd", "{e:#?}");
    }
}

/// The comm a thread was renamed to while it slept (a comm record)
/// is its comm at a switch-in told by a record.
#[test]
fn a_switch_in_record_takes_a_rename_during_the_sleep() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out_as(1_000, 500, "before"),
            ev(
                2_000,
                EventKind::Comm(CommChange {
                    tid: 500,
                    tgid: 500,
                    comm: Comm::from("after"),
                    exec: false,
                }),
            ),
            switch_in_record(21_000, 0, 500),
        ],
    );
    assert_eq!(only(&a.finish()).key.target_comm.as_str(), "after");
}

/// The last slice of a thread the table lacks, told as it stopped
/// being traced, also keeps the comm of its switch-out.
#[test]
fn a_last_slice_takes_the_comm_events_gave() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out_as(1_000, 500, "dd"),
            ev(
                30_000,
                EventKind::Ran(Ran {
                    tid: 500,
                    since: Some(21_000),
                }),
            ),
        ],
    );
    let e = only(&a.finish());
    assert_eq!(e.key.target_comm.as_str(), "dd");
    assert_eq!(e.total_us, 20);
}

/// A comm an event gave wins over what `/proc` says later.
#[test]
fn an_event_comm_wins_over_a_later_proc_lookup() {
    let mut a = Aggregator::new(config(), table()).with_task_lookup(Box::new(|tid| {
        Some(TaskInfo {
            tgid: tid,
            comm: Comm::from("from-proc"),
            kthread: false,
        })
    }));
    run(
        &mut a,
        &[
            out_as(1_000, 500, "dd"),
            // The wakeup asks the lookup about its waker, 1500, and
            // 500's own comm stays the one its switch-out gave.
            waking_of(5_000, 1500, 500, "dd"),
            switch_in_record(21_000, 0, 500),
        ],
    );
    let e = only(&a.finish());
    assert_eq!(e.key.target_comm.as_str(), "dd");
    assert_eq!(e.key.waker_comm.as_str(), "from-proc");
}

/// Named targets that gave no interval are reported, with how many of
/// their switch-outs were read; the others are not.
#[test]
fn named_targets_without_an_interval_are_quiet() {
    let mut c = config();
    c.threads = Targets::Processes([100, 200, 400].into_iter().collect());
    let mut a = agg(c);
    run(
        &mut a,
        &[
            // 101 (of process 100) gives an interval.
            out(1_000, 0, 101),
            back_in(5_000, 0, 101, "app"),
            // 200 switches out twice; neither interval ends.
            out(6_000, 1, 200),
            switch(7_000, 1, 200, S, chain(&[0xf1], &[]), 0, "swapper/1"),
            // 400 is never seen; 500 is not named.
            out(8_000, 0, 500),
            back_in(9_000, 0, 500, "x"),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), [101]);
    assert_eq!(
        r.quiet,
        [
            QuietTarget {
                kind: TargetKind::Process,
                id: 200,
                comm: Comm::from("prev"),
                switch_outs: 2,
            },
            QuietTarget {
                kind: TargetKind::Process,
                id: 400,
                comm: Comm::from("other"),
                switch_outs: 0,
            },
        ]
    );
}

/// A process whose sleep began before tracing, then woke and exited
/// while traced, switched out once (its exit): it is quiet, and that
/// switch-out is counted, so the NOTE does not say none was read.
#[test]
fn an_exit_is_a_switch_out_of_a_quiet_target() {
    let mut c = config();
    c.threads = Targets::Processes([400].into_iter().collect());
    let mut a = agg(c);
    run(
        &mut a,
        &[
            waking(1_000, 0, 200, 400, chain(&[0xe1], &[])),
            back_in(2_000, 0, 400, "other"),
            switch(3_000, 0, 400, 16, chain(&[0xf1], &[]), 0, "swapper/0"),
        ],
    );
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert_eq!(r.quiet.len(), 1);
    assert_eq!(r.quiet[0].switch_outs, 1);
}

/// Under `-- COMMAND` the command and what it started are one target;
/// system-wide there is none.
#[test]
fn the_command_is_one_quiet_target_and_system_wide_has_none() {
    let mut c = config();
    c.threads = Targets::Command {
        root: 1000,
        launcher: 1,
    };
    let mut a = agg(c);
    let exec = ev(
        0,
        EventKind::Comm(CommChange {
            tid: 1000,
            tgid: 1000,
            comm: Comm::from("cmd"),
            exec: true,
        }),
    );
    run(&mut a, &[exec]);
    let r = a.finish();
    assert_eq!(r.quiet.len(), 1);
    assert_eq!(r.quiet[0].kind, TargetKind::Command);
    assert_eq!(r.quiet[0].comm.as_str(), "cmd");

    let mut c = config();
    c.threads = Targets::All;
    assert!(agg(c).finish().quiet.is_empty());
}

#[test]
fn target_comm_is_taken_at_switch_in() {
    let mut a = agg(config());
    run(&mut a, &[out(0, 0, 100), back_in(5_000, 0, 100, "renamed")]);
    assert_eq!(only(&a.finish()).key.target_comm.as_str(), "renamed");
}

#[test]
fn cross_cpu_interval() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            waking(2_000, 1, 200, 100, chain(&[0xe1], &[])),
            back_in(4_000, 1, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.total_us, 3);
    assert_eq!(e.key.waker_tid, 200);
    assert_eq!(e.key.waker_user, StackRef::Empty);
}

#[test]
fn wakeup_before_switch_out_is_ignored() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            waking(500, 1, 200, 100, chain(&[0xe1], &[0x501])),
            out(1_000, 0, 100),
            back_in(4_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.key.waker_tid, 0);
    assert!(e.key.waker_comm.is_empty());
    // The ignored wakeup's stacks were never stored.
    assert_eq!(r.stacks.kernel, vec![vec![0xf1]]);
}

#[test]
fn last_wakeup_wins() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            waking(2_000, 1, 200, 100, chain(&[0xe1], &[])),
            waking(3_000, 1, 400, 100, chain(&[0xe2], &[])),
            back_in(4_000, 1, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.key.waker_tid, 400);
    assert_eq!(e.key.waker_comm.as_str(), "other");
    assert_eq!(
        r.stacks.kernel_addrs(e.key.waker_kernel),
        Some(&[0xe2u64][..])
    );
}

#[test]
fn unknown_waker_is_named_by_its_later_switch() {
    // 777 is in no table and the lookup knows nothing: at the wakeup
    // its comm is unknown; it switches out later as "late".
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            waking(2_000, 1, 777, 100, chain(&[0xe1], &[])),
            back_in(4_000, 1, 100, "app"),
            switch(5_000, 1, 0, PREEMPTED, chain(&[], &[]), 777, "late"),
        ],
    );
    let e = only(&a.finish());
    assert_eq!(e.key.waker_tid, 777);
    assert_eq!(e.key.waker_comm.as_str(), "late");
}

#[test]
fn no_waker_gives_empty_waker() {
    let mut a = agg(config());
    run(&mut a, &[out(0, 0, 100), back_in(7_000, 0, 100, "app")]);
    let r = a.finish();
    // A sleep (S) no wakeup was reported for: counted for the NOTE.
    assert_eq!(r.stats.wakeup_unseen, [1, 0, 0, 0, 0, 0, 0, 0]);
    let e = only(&r);
    assert_eq!(e.total_us, 7);
    assert_eq!(
        (e.key.waker_tid, e.key.waker_tgid, e.key.waker_comm),
        (0, 0, Comm::default())
    );
    assert_eq!(e.key.waker_kernel, StackRef::Empty);
    assert_eq!(e.key.waker_user, StackRef::Empty);
}

/// The NOTE on sleeps without a wakeup, from the note lines of `r`.
fn wakeup_note(r: &Aggregate) -> Option<String> {
    let notes = r.stats.notes(false, "--mmap-pages");
    let mut found = notes
        .into_iter()
        .filter(|n| n.contains("no wakeup was read"));
    let note = found.next();
    assert_eq!(found.next(), None, "one such NOTE");
    note
}

#[test]
fn the_no_waker_note_names_the_states_and_counts_right() {
    const IDLE: u64 = 128; // TASK_REPORT_IDLE
    let sleeps = |states: &[u64]| {
        let mut a = agg(config());
        let mut events = Vec::new();
        for (i, &state) in states.iter().enumerate() {
            let t = i as u64 * 10_000;
            events.push(switch(t, 0, 100, state, chain(&[0xf1], &[]), 0, "swapper"));
            events.push(back_in(t + 5_000, 0, 100, "app"));
        }
        run(&mut a, &events);
        a.finish()
    };
    let r = sleeps(&[S]);
    // The empty waker itself is bcc's: no comm, pid 0.
    let e = only(&r);
    assert_eq!((e.key.waker_tid, e.key.waker_comm), (0, Comm::default()));
    assert_eq!(
        wakeup_note(&r).unwrap(),
        "NOTE: no wakeup was read for 1 interval in interruptible sleep (S), so it has \
         an empty waker (some kernels skip sched_waking in a CPU's idle task, or while \
         certain tasks run; with -p, see the README on threads created during tracing)."
    );
    let note = wakeup_note(&sleeps(&[S, S])).unwrap();
    assert!(
        note.starts_with(
            "NOTE: no wakeup was read for 2 intervals in interruptible sleep (S), so \
             they have an empty waker ("
        ),
        "{note}"
    );
    let note = wakeup_note(&sleeps(&[IDLE, S, D, S, PREEMPTED])).unwrap();
    assert!(
        note.starts_with(
            "NOTE: no wakeup was read for 2 intervals in interruptible sleep (S), 1 in \
             uninterruptible sleep (D) and 1 in idle (I), so they have an empty waker ("
        ),
        "{note}"
    );
    // A preempted interval has an empty waker by nature: no NOTE.
    assert_eq!(wakeup_note(&sleeps(&[PREEMPTED])), None);
}

#[test]
fn idle_waker_is_swapper_of_its_cpu() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            waking(1_000, 3, 0, 100, chain(&[0xe1], &[])),
            back_in(7_000, 3, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.key.waker_tid, 0);
    assert_eq!(e.key.waker_comm.as_str(), "swapper/3");
    assert_eq!(r.stats.wakeup_unseen, [0; 8]);
}

#[test]
fn idle_tasks_are_tracked_per_cpu() {
    let mut c = config();
    c.threads = Targets::All;
    let mut a = agg(c);
    let idle_out = |time, cpu| switch(time, cpu, 0, PREEMPTED, chain(&[0xa1], &[]), 400, "other");
    let idle_in = |time, cpu| {
        let comm = if cpu == 0 { "swapper/0" } else { "swapper/1" };
        switch(time, cpu, 400, S, chain(&[0xf1], &[]), 0, comm)
    };
    run(
        &mut a,
        &[
            idle_out(1_000, 0), // idle/0 leaves at 1us
            idle_out(3_000, 1), // idle/1 leaves at 3us
            idle_in(10_000, 1), // idle/1 back: 7us
            idle_in(21_000, 0), // idle/0 back: 20us
        ],
    );
    let r = a.finish();
    let mut idle: Vec<u64> = r
        .entries
        .iter()
        .filter(|e| e.key.target_tid == 0)
        .map(|e| e.total_us)
        .collect();
    idle.sort();
    // Mixed up, they would give 9 (1..10) and 18 (3..21), or one entry.
    assert_eq!(idle, vec![7, 20]);
}

const DEAD: u64 = 16; // EXIT_DEAD

fn exit(time: u64, tid: u32) -> Event {
    ev(
        time,
        EventKind::Exit(Exit {
            tgid: tgid_of(tid),
            tid,
        }),
    )
}

#[test]
fn thread_exit_leaves_its_interval_to_the_final_switch_out() {
    // The final switch-out cannot say when the thread switched in:
    // the interval is dropped as unknown, and no state is left.
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 101),
            exit(1_000, 101),
            ran_out(9_000, 0, 101, DEAD, RanSince::Unknown),
            back_in(20_000, 0, 101, "app"),
        ],
    );
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert_eq!(
        (
            r.stats.intervals,
            r.stats.switch_in_unknown,
            r.stats.switch_in_unseen
        ),
        (0, 1, 0)
    );

    // It does say: the thread's last interval is counted.
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 101),
            waking(4_000, 1, 200, 101, chain(&[0xe1], &[])),
            exit(6_000, 101),
            ran_out(9_000, 0, 101, DEAD, RanSince::At(5_000)),
            back_in(20_000, 0, 101, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(
        (e.key.target_tid, e.key.waker_tid, e.total_us),
        (101, 200, 5)
    );
}

#[test]
fn a_switch_in_told_late_takes_the_wakeup_before_it() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            waking(2_000, 1, 200, 100, chain(&[0xe1], &[])),
            // Running since 3000, going to sleep: woken before it could.
            waking(5_000, 1, 400, 100, chain(&[0xe2], &[])),
            ran_out(8_000, 0, 100, PREEMPTED, RanSince::At(3_000)),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!((e.key.waker_tid, e.total_us), (200, 2));
    assert_eq!(e.key.target_comm.as_str(), "prev");
    assert_eq!(
        r.stacks.kernel_addrs(e.key.waker_kernel),
        Some(&[0xe1u64][..])
    );
    assert_eq!(r.stats.switch_in_unseen, 0);
}

#[test]
fn a_sleep_told_late_takes_its_wakeup_even_after_the_estimated_switch_in() {
    // Woken at 3000, switched in right after; the switch-in, estimated
    // from the next switch-out, came out a little early.
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(1_000, 0, 100),
            waking(3_000, 1, 200, 100, chain(&[0xe1], &[])),
            ran_out(8_000, 0, 100, S, RanSince::At(2_990)),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!((e.key.waker_tid, e.total_us), (200, 1));
}

#[test]
fn a_switch_in_told_late_after_no_wakeup_has_no_waker() {
    // Preempted at 1000, back at 3000, woken (while going to sleep)
    // only after that.
    let mut a = agg(config());
    run(
        &mut a,
        &[
            ran_out(1_000, 0, 100, PREEMPTED, RanSince::Unknown),
            waking(5_000, 1, 400, 100, chain(&[0xe2], &[])),
            ran_out(8_000, 0, 100, S, RanSince::At(3_000)),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!((e.key.waker_tid, e.total_us), (0, 2));
    // Preempted: no wakeup was due, so none went unreported.
    assert_eq!(r.stats.wakeup_unseen, [0; 8]);
}

#[test]
fn a_switch_in_told_late_outside_its_interval_is_dropped() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(5_000_000, 0, 100),
            // Too long before the switch-out it would end the interval
            // of to be its estimate's error.
            ran_out(8_000_000, 0, 100, S, RanSince::At(3_999_999)),
            // After the switch-out that tells it.
            ran_out(20_000_000, 0, 100, S, RanSince::At(21_000_000)),
        ],
    );
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert_eq!((r.stats.switch_in_unknown, r.stats.intervals), (2, 0));
}

#[test]
fn a_switch_in_told_late_just_before_its_interval_ends_it_where_it_began() {
    // Out at 5 ms; the next switch-out's count says it switched in
    // 10 us before that: a short slice estimated early.
    let mut c = config();
    c.min_block_us = 0;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            ran_out(5_000_000, 0, 100, PREEMPTED, RanSince::Unknown),
            ran_out(8_000_000, 0, 100, S, RanSince::At(4_990_000)),
        ],
    );
    let r = a.finish();
    assert_eq!(r.stats.switch_in_unknown, 0);
    assert_eq!((only(&r).total_us, r.stats.intervals), (0, 1));
}

#[test]
fn exited_thread_still_names_itself_as_waker() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            ev(
                1_000,
                EventKind::Exit(Exit {
                    tgid: 400,
                    tid: 400,
                }),
            ),
            waking(2_000, 1, 400, 100, chain(&[0xe1], &[])),
            back_in(9_000, 0, 100, "app"),
        ],
    );
    assert_eq!(only(&a.finish()).key.waker_comm.as_str(), "other");
}

#[test]
fn final_switch_of_a_dead_task_keeps_nothing() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            switch(0, 0, 101, 32, chain(&[0xf1], &[0x4001]), 0, "swapper"),
            back_in(9_000, 0, 101, "app"),
        ],
    );
    assert!(a.open.is_empty() || a.open.keys().all(|k| k.tid == 0));
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert!(r.stacks.kernel.is_empty() && r.stacks.user.is_empty());
}

#[test]
fn reused_tid_after_fork_starts_clean() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 500), // unknown thread, final switch-out
            ev(
                1_000,
                EventKind::Fork(Fork {
                    parent_tgid: 400,
                    parent_tid: 400,
                    tgid: 500,
                    tid: 500,
                }),
            ),
            back_in(9_000, 0, 500, "child"),
        ],
    );
    assert!(a.finish().entries.is_empty());
}

#[test]
fn lost_record_taints_open_intervals() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            out(0, 1, 400),
            ev(
                1_000,
                EventKind::Lost(Lost {
                    records: 3,
                    until: 1_500,
                }),
            ),
            out(2_000, 2, 200), // opens after the loss: counted
            back_in(9_000, 0, 100, "app"),
            back_in(9_000, 1, 400, "other"),
            back_in(9_000, 2, 200, "waker"),
            ev(
                9_500,
                EventKind::Lost(Lost {
                    records: 2,
                    until: 9_500,
                }),
            ),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), vec![200]);
    assert_eq!(only(&r).total_us, 7);
    assert_eq!(r.stats.lost_records, 5);
    assert_eq!(r.stats.discarded_lost, 2);
    assert_eq!(r.stats.intervals, 1);
}

#[test]
fn switch_out_without_a_reported_switch_in_drops_and_counts() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            // The switch-in that ended this interval was never reported:
            // 100 switches out again.
            out(5_000, 1, 100),
            back_in(9_000, 1, 100, "app"),
        ],
    );
    let r = a.finish();
    assert_eq!(r.stats.switch_in_unseen, 1);
    // Only the second interval (5_000..9_000) is counted.
    assert_eq!(r.stats.intervals, 1);
    assert_eq!(only(&r).total_us, 4);
}

#[test]
fn intervals_inside_a_loss_window_are_discarded() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            // The loss happened between 1_000 and 5_000.
            ev(
                1_000,
                EventKind::Lost(Lost {
                    records: 1,
                    until: 5_000,
                }),
            ),
            out(2_000, 0, 100), // opens and closes inside the window
            back_in(3_000, 0, 100, "app"),
            out(4_000, 1, 400), // opens inside, closes after
            back_in(8_000, 1, 400, "other"),
            out(5_000, 0, 200), // opens at the window's end: clean
            back_in(7_000, 0, 200, "waker"),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), vec![200]);
    assert_eq!(r.stats.discarded_lost, 2);
    assert_eq!(r.stats.intervals, 1);
}

#[test]
fn min_and_max_block_time() {
    let mut c = config();
    c.min_block_us = 5;
    c.max_block_us = 10;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            out(0, 0, 100),
            back_in(4_999, 0, 100, "app"), // 4us: dropped
            out(10_000, 0, 100),
            back_in(15_000, 0, 100, "app"), // 5us: kept
            out(20_000, 0, 100),
            back_in(30_999, 0, 100, "app"), // 10us: kept
            out(40_000, 0, 100),
            back_in(51_000, 0, 100, "app"), // 11us: dropped
        ],
    );
    let r = a.finish();
    assert_eq!(only(&r).total_us, 15);
    assert_eq!(r.stats.intervals, 2);
    assert_eq!(r.stats.out_of_range, 2);
}

#[test]
fn microseconds_by_integer_division() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            back_in(1_999, 0, 100, "app"), // 1us
            out(10_000, 0, 100),
            back_in(10_999, 0, 100, "app"), // 0us: below the default min 1
        ],
    );
    let r = a.finish();
    assert_eq!(only(&r).total_us, 1);
    assert_eq!(r.stats.out_of_range, 1);
}

#[test]
fn sums_per_key_and_splits_by_key() {
    let mut a = agg(config());
    let w = |t| waking(t, 1, 200, 100, chain(&[0xe1], &[]));
    run(
        &mut a,
        &[
            out(0, 0, 100),
            w(1_000),
            back_in(3_000, 0, 100, "app"),
            out(10_000, 0, 100),
            w(11_000),
            back_in(15_000, 0, 100, "app"),
            // Same target, other waker: its own entry.
            out(20_000, 0, 100),
            waking(21_000, 1, 400, 100, chain(&[0xe1], &[])),
            back_in(30_000, 0, 100, "app"),
            // Other target stack: its own entry.
            switch(40_000, 0, 100, S, chain(&[0xf9], &[0x4001]), 0, "swapper"),
            w(41_000),
            back_in(42_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    let totals: Vec<(u32, u64)> = sorted(&r.entries)
        .iter()
        .map(|e| (e.key.waker_tid, e.total_us))
        .collect();
    assert_eq!(r.entries.len(), 3);
    let mut by_total: Vec<u64> = totals.iter().map(|t| t.1).collect();
    by_total.sort();
    assert_eq!(by_total, vec![2, 8, 10]);
    assert!(totals.contains(&(200, 8)));
    assert!(totals.contains(&(400, 10)));
    assert_eq!(r.stats.intervals, 4);
}

fn state_run(state: u64) -> Vec<u32> {
    let mut c = config();
    c.state = Some(StateFilter::from_user(state).unwrap());
    let mut a = agg(c);
    run(
        &mut a,
        &[
            switch(0, 0, 100, S, chain(&[0xf1], &[]), 0, "swapper"),
            switch(0, 1, 200, D, chain(&[0xf1], &[]), 0, "swapper"),
            switch(0, 2, 400, PREEMPTED, chain(&[0xf1], &[]), 0, "swapper"),
            switch(0, 3, 101, 0, chain(&[0xf1], &[]), 0, "swapper"),
            back_in(5_000, 0, 100, "app"),
            back_in(5_000, 1, 200, "waker"),
            back_in(5_000, 2, 400, "other"),
            back_in(5_000, 3, 101, "app"),
        ],
    );
    target_tids(&a.finish())
}

#[test]
fn state_filter_selects_intervals() {
    assert_eq!(state_run(0), vec![101, 400]);
    assert_eq!(state_run(1), vec![100]);
    assert_eq!(state_run(2), vec![200]);
    assert_eq!(state_run(1 | 2), vec![100, 200]);
    assert_eq!(state_run(4096), vec![200]);
}

/// Every thread of the table (and idle) blocks for 5us.
fn filter_run(threads: Targets) -> Vec<u32> {
    let mut c = config();
    c.threads = threads;
    let mut a = agg(c);
    let tids = [100, 101, 200, 300];
    let mut events = Vec::new();
    for (cpu, &tid) in tids.iter().enumerate() {
        events.push(out(0, cpu as u32, tid));
    }
    events.push(switch(
        0,
        9,
        0,
        PREEMPTED,
        chain(&[0xa1], &[]),
        400,
        "other",
    ));
    for (cpu, &tid) in tids.iter().enumerate() {
        events.push(back_in(5_000, cpu as u32, tid, "x"));
    }
    events.push(switch(
        5_000,
        9,
        400,
        S,
        chain(&[0xf1], &[]),
        0,
        "swapper/9",
    ));
    run(&mut a, &events);
    target_tids(&a.finish())
}

#[test]
fn thread_filters() {
    assert_eq!(filter_run(Targets::All), vec![0, 100, 101, 200, 300]);
    assert_eq!(
        filter_run(Targets::Processes(BTreeSet::from([100]))),
        vec![100, 101]
    );
    assert_eq!(
        filter_run(Targets::Threads(BTreeSet::from([101, 300]))),
        vec![101, 300]
    );
    assert_eq!(filter_run(Targets::UserThreads), vec![100, 101, 200]);
    assert_eq!(filter_run(Targets::KernelThreads), vec![0, 300]);
}

#[test]
fn kthread_lookup_once_for_unknown_threads() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    let lookup: TaskLookup = Box::new(move |tid| {
        seen.lock().unwrap().push(tid);
        (tid == 700).then(|| task(700, "kworker/u8:2", true))
    });
    let mut c = config();
    c.threads = Targets::KernelThreads;
    let mut a = Aggregator::new(c, table()).with_task_lookup(lookup);
    run(
        &mut a,
        &[
            switch(0, 0, 700, S, chain(&[0xf1], &[]), 0, "swapper"),
            switch(0, 1, 800, S, chain(&[0xf1], &[0x4001]), 0, "swapper"),
            back_in(5_000, 0, 700, "kworker/u8:2"),
            back_in(5_000, 1, 800, "user"),
            switch(6_000, 0, 700, S, chain(&[0xf1], &[]), 0, "swapper"),
            switch(6_000, 1, 800, S, chain(&[0xf1], &[0x4001]), 0, "swapper"),
            back_in(9_000, 0, 700, "kworker/u8:2"),
            back_in(9_000, 1, 800, "user"),
        ],
    );
    let r = a.finish();
    // Idle (cpu 0, 5us..6us) is a kernel thread too.
    assert_eq!(target_tids(&r), vec![0, 700]);
    let kworker = r.entries.iter().find(|e| e.key.target_tid == 700).unwrap();
    assert_eq!(kworker.total_us, 8);
    assert_eq!(*calls.lock().unwrap(), vec![700, 800]);
}

#[test]
fn kthreadd_children_are_kernel_threads() {
    let mut c = config();
    c.threads = Targets::KernelThreads;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            ev(
                0,
                EventKind::Fork(Fork {
                    parent_tgid: 2,
                    parent_tid: 2,
                    tgid: 900,
                    tid: 900,
                }),
            ),
            ev(
                0,
                EventKind::Fork(Fork {
                    parent_tgid: 100,
                    parent_tid: 100,
                    tgid: 901,
                    tid: 901,
                }),
            ),
            // Both look like kernel threads by their stacks.
            switch(1_000, 0, 900, S, chain(&[0xf1], &[]), 0, "swapper"),
            switch(1_000, 1, 901, S, chain(&[0xf1], &[]), 0, "swapper"),
            back_in(5_000, 0, 900, "kworker"),
            back_in(5_000, 1, 901, "app"),
        ],
    );
    assert_eq!(target_tids(&a.finish()), vec![900]);
}

#[test]
fn command_targets_root_from_exec_and_its_children() {
    let mut c = config();
    c.threads = Targets::Command {
        root: 1000,
        launcher: 1,
    };
    let mut a = agg(c);
    let fork = |t, parent: u32, child: u32, tgid: u32| {
        ev(
            t,
            EventKind::Fork(Fork {
                parent_tgid: tgid_of(parent),
                parent_tid: parent,
                tgid,
                tid: child,
            }),
        )
    };
    run(
        &mut a,
        &[
            // Before exec: the launcher's own wait is not counted, nor
            // what it forks.
            out(0, 0, 1000),
            fork(100, 1000, 1500, 1500),
            back_in(5_000, 0, 1000, "launcher"),
            ev(
                6_000,
                EventKind::Comm(CommChange {
                    tgid: 1000,
                    tid: 1000,
                    comm: Comm::from("cmd"),
                    exec: true,
                }),
            ),
            out(7_000, 0, 1000),
            back_in(9_000, 0, 1000, "cmd"), // 2us
            fork(10_000, 1000, 1001, 1000), // a thread of cmd
            fork(10_000, 1000, 2000, 2000), // a child process
            fork(11_000, 2000, 3000, 3000), // a grandchild
            out(12_000, 1, 1001),
            out(12_000, 2, 2000),
            out(12_000, 3, 3000),
            out(12_000, 4, 1500),
            out(12_000, 5, 400),
            back_in(20_000, 1, 1001, "cmd"),
            back_in(21_000, 2, 2000, "child"),
            back_in(22_000, 3, 3000, "grandchild"),
            back_in(23_000, 4, 1500, "early"),
            back_in(24_000, 5, 400, "other"),
        ],
    );
    let r = a.finish();
    assert_eq!(target_tids(&r), vec![1000, 1001, 2000, 3000]);
    let root = r.entries.iter().find(|e| e.key.target_tid == 1000).unwrap();
    assert_eq!(root.total_us, 2);
    assert_eq!(root.key.target_comm.as_str(), "cmd");
}

#[test]
fn stack_storage_overflow_is_missed_and_counted() {
    let mut c = config();
    c.stack_storage_size = 3;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            // Target: 2 stacks stored.
            switch(0, 0, 100, S, chain(&[0xf1], &[0x4001]), 0, "swapper"),
            // Waker: kernel stored (3rd), user does not fit.
            waking(1_000, 1, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(5_000, 0, 100, "app"),
            // Both of 101's stacks are new: missed. The next kernel
            // stack is already known.
            switch(6_000, 0, 101, S, chain(&[0xf7], &[0x4007]), 0, "swapper"),
            waking(7_000, 1, 200, 101, chain(&[0xe1], &[])),
            back_in(9_000, 0, 101, "app"),
        ],
    );
    let r = a.finish();
    assert_eq!(r.stats.missed_stacks, 3);
    assert_eq!(r.stacks.kernel.len() + r.stacks.user.len(), 3);
    let e100 = r.entries.iter().find(|e| e.key.target_tid == 100).unwrap();
    assert!(matches!(e100.key.target_kernel, StackRef::Kernel(_)));
    assert!(matches!(e100.key.target_user, StackRef::User(_)));
    assert!(matches!(e100.key.waker_kernel, StackRef::Kernel(_)));
    assert_eq!(e100.key.waker_user, StackRef::Missed);
    let e101 = r.entries.iter().find(|e| e.key.target_tid == 101).unwrap();
    assert_eq!(e101.key.target_kernel, StackRef::Missed);
    assert_eq!(e101.key.target_user, StackRef::Missed);
    assert_eq!(e101.key.waker_kernel, e100.key.waker_kernel);
    assert_eq!(e101.key.waker_user, StackRef::Empty);
}

#[test]
fn stack_kinds_not_kept_are_empty() {
    let mut c = config();
    c.stacks.user = false;
    let mut a = agg(c);
    run(
        &mut a,
        &[
            out(0, 0, 100),
            waking(1_000, 1, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(5_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert_eq!(e.key.target_user, StackRef::Empty);
    assert_eq!(e.key.waker_user, StackRef::Empty);
    assert!(r.stacks.user.is_empty());
    assert_eq!(r.stacks.kernel.len(), 2);

    let mut c = config();
    c.stacks.kernel = false;
    let mut a = agg(c);
    run(&mut a, &[out(0, 0, 100), back_in(5_000, 0, 100, "app")]);
    let r = a.finish();
    assert_eq!(only(&r).key.target_kernel, StackRef::Empty);
    assert!(r.stacks.kernel.is_empty());
}

#[test]
fn exec_separates_user_stacks_of_a_process() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            out(0, 0, 100),
            back_in(5_000, 0, 100, "app"),
            ev(
                6_000,
                EventKind::Comm(CommChange {
                    tgid: 100,
                    tid: 100,
                    comm: Comm::from("app2"),
                    exec: true,
                }),
            ),
            ev(
                6_500,
                EventKind::Mmap(Mmap {
                    tgid: 100,
                    tid: 100,
                    start: 0x400000,
                    len: 0x1000,
                    pgoff: 0,
                    path: "/bin/app2".into(),
                    executable: true,
                    file: None,
                    build_id: None,
                }),
            ),
            out(7_000, 0, 100),
            back_in(12_000, 0, 100, "app2"),
        ],
    );
    let r = a.finish();
    assert_eq!(r.entries.len(), 2);
    assert_eq!(r.stacks.user.len(), 2);
    assert_eq!(r.stacks.kernel.len(), 1);
    let times: Vec<u64> = r.stacks.user.iter().map(|u| u.time).collect();
    assert_eq!(times, vec![0, 7_000]);
}

#[test]
fn intervals_open_at_either_edge_are_not_counted() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            back_in(5_000, 0, 100, "app"), // began before tracing
            out(6_000, 1, 200),            // never ends
        ],
    );
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert_eq!(r.stats.intervals, 0);
}
