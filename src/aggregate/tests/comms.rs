//! The comms of targets and wakers, from events, the task table, threads
//! that exited and the lookup.

use super::*;

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
fn a_thread_is_forgotten_at_its_final_switch_out() {
    let mut a = agg(Config {
        threads: Targets::All,
        ..config()
    });
    let exit = |time, tid| ev(time, EventKind::Exit(Exit { tgid: tid, tid }));
    let last = |time, tid| {
        let stack = chain(&[0xf1], &[]);
        switch(time, 1, tid, Switch::DEAD_STATES, stack, 0, "swapper")
    };
    // Known threads (in the task table) that exit.
    run(&mut a, &[exit(1_000, 400), exit(1_500, 300)]);
    assert_eq!(a.identity.exited_len(), 2);
    run(&mut a, &[last(2_000, 400)]);
    assert_eq!(a.identity.exited_len(), 1);
    // A named target is kept: the report may name it as quiet.
    let mut a = agg(config());
    run(&mut a, &[exit(1_000, 400), last(2_000, 400)]);
    assert_eq!(a.identity.exited_len(), 1);
}
