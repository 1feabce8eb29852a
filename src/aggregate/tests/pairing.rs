//! Intervals and their wakers: what opens, closes and sums them, idle
//! threads per CPU, lost records and the block-time limits.

use super::*;
use crate::event::Lost;

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

/// An interrupt's wakeup is no task's: the pseudo-task of its context,
/// with its kernel stack and no user stack, whichever task it landed in.
#[test]
fn interrupt_wakers_are_no_task() {
    for context in [WakeContext::Hardirq, WakeContext::Softirq, WakeContext::Nmi] {
        let mut a = agg(config());
        let mut wake = waking(5_000, 0, 400, 100, chain(&[0xe1, 0xe2], &[]));
        if let EventKind::Waking(w) = &mut wake.kind {
            w.context = context;
        }
        run(
            &mut a,
            &[out(1_000, 0, 100), wake, back_in(9_000, 0, 100, "app")],
        );
        let r = a.finish();
        let e = only(&r);
        assert_eq!(
            (e.key.waker_tid, e.key.waker_tgid, e.key.waker_comm),
            (0, 0, Comm::default())
        );
        assert_eq!(e.key.waker_context, context);
        assert_eq!(e.key.waker_user, StackRef::Empty);
        assert_eq!(
            r.stacks.kernel_addrs(e.key.waker_kernel),
            Some(&[0xe1, 0xe2][..])
        );
        assert_eq!(e.total_us, 8);
    }
}
