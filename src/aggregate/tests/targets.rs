//! Which threads are targets (`-p`, `-t`, `-- COMMAND`, kernel or user
//! threads, `--state`), the tool's own tasks, and quiet named targets.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use super::*;
use crate::aggregate::quiet::TargetKind;

#[test]
fn own_tasks_are_never_targets_and_are_named_as_wakers() {
    // 100 (and its thread 101) is the tool; 400 a helper it forked.
    let mut c = config();
    c.threads = Targets::UserThreads;
    c.own = Some(OwnTasks {
        tgid: 100,
        helper: |pid| pid == 400,
        others: crate::sys::own::OtherHelpers::none(),
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
