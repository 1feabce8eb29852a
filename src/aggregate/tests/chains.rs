//! Wakeup chains (`--chain`): the levels past the first, their order,
//! overlaps and ends, and the bounds of the history they come from.

use super::*;
use crate::event::Lost;
use crate::report::ChainEnd;

/// Only thread 100 is a target; with `depth` levels.
fn chained(depth: u8) -> Aggregator {
    let mut c = config();
    c.threads = Targets::Threads([100].into_iter().collect());
    c.chain = depth;
    agg(c)
}

fn irq_waking(time: u64, cpu: u32, landed_in: u32, wakee: u32) -> Event {
    let mut e = waking(time, cpu, landed_in, wakee, chain(&[0xa1, 0xa2], &[]));
    if let EventKind::Waking(w) = &mut e.kind {
        w.context = WakeContext::Hardirq;
    }
    e
}

/// `tid` blocks with a stack of its own (kernel 0xf0+tid, user 0x10000+tid).
fn blocks(time: u64, cpu: u32, tid: u32) -> Event {
    let kernel = 0xf000 + u64::from(tid);
    let user = 0x10000 + u64::from(tid);
    switch(time, cpu, tid, S, chain(&[kernel], &[user]), 0, "swapper")
}

/// `waker` wakes `wakee` from a stack of its own (kernel 0xe0+waker).
fn wakes(time: u64, cpu: u32, waker: u32, wakee: u32) -> Event {
    let kernel = 0xe000 + u64::from(waker);
    waking(time, cpu, waker, wakee, chain(&[kernel], &[0x20000]))
}

/// A (100) waits on B (200), which waits on C (400), which naps until a
/// timer interrupt: A's wait is explained two levels down.
fn pipeline() -> Vec<Event> {
    vec![
        blocks(1_000, 1, 400),
        blocks(2_000, 1, 200),
        blocks(3_000, 0, 100),
        irq_waking(50_000, 1, 300, 400),
        back_in(51_000, 1, 400, "c"),
        wakes(52_000, 1, 400, 200),
        back_in(60_000, 1, 200, "b"),
        wakes(61_000, 1, 200, 100),
        back_in(70_000, 0, 100, "a"),
    ]
}

fn kernel_of(r: &Aggregate, s: StackRef) -> u64 {
    r.stacks.kernel_addrs(s).unwrap()[0]
}

#[test]
fn a_pipeline_is_explained_level_by_level() {
    let mut a = chained(3);
    run(&mut a, &pipeline());
    let r = a.finish();
    let e = only(&r);
    assert_eq!((e.total_us, e.key.waker_tid), (67, 200));
    let levels = &r.chains[e.key.chain as usize];
    assert_eq!(levels.len(), 2, "{levels:?}");
    let Level::Waited {
        kernel,
        user,
        waker,
    } = levels[0]
    else {
        panic!("{levels:?}")
    };
    // Level 2: B's wait, woken by C.
    assert_eq!(kernel_of(&r, kernel), 0xf000 + 200);
    assert_eq!(r.stacks.user_stack(user).unwrap().addrs, [0x10000 + 200]);
    assert_eq!((waker.tid, waker.comm), (400, Comm::from("c")));
    assert_eq!(kernel_of(&r, waker.kernel), 0xe000 + 400);
    // Level 3: C's nap, woken by the timer's interrupt.
    let Level::Waited { kernel, waker, .. } = levels[1] else {
        panic!("{levels:?}")
    };
    assert_eq!(kernel_of(&r, kernel), 0xf000 + 400);
    assert_eq!((waker.tid, waker.context), (0, WakeContext::Hardirq));
    assert_eq!(waker.user, StackRef::Empty);
    // B waited 57 of A's 67 us, C 48.
    assert_eq!(e.overlap_us[..3], [57, 48, 0]);
}

#[test]
fn depth_bounds_the_levels_and_an_interrupt_ends_the_chain() {
    for (depth, levels) in [(1, 0), (2, 1), (3, 2), (8, 2)] {
        let mut a = chained(depth);
        run(&mut a, &pipeline());
        let r = a.finish();
        let e = only(&r);
        assert_eq!(e.total_us, 67, "the count stays the target's");
        assert_eq!(r.chains[e.key.chain as usize].len(), levels, "{depth}");
        assert_eq!(r.stats.intervals, 1, "only the target's are counted");
    }
}

#[test]
fn the_wait_noted_at_the_wakeup_is_the_level_not_a_later_one() {
    let mut events = pipeline();
    // B blocks again after waking A, and is woken by D (500), all before
    // A is back on a CPU.
    let back = events.pop().unwrap();
    events.extend([
        blocks(62_000, 1, 200),
        wakes(63_000, 1, 500, 200),
        back_in(64_000, 1, 200, "b"),
        back,
    ]);
    let mut a = chained(2);
    run(&mut a, &events);
    let r = a.finish();
    let e = only(&r);
    let Level::Waited { waker, .. } = r.chains[e.key.chain as usize][0] else {
        panic!()
    };
    assert_eq!(waker.tid, 400);
}

fn ends(depth: u8, events: &[Event]) -> Vec<Level> {
    let mut a = chained(depth);
    run(&mut a, events);
    let r = a.finish();
    let e = only(&r);
    r.chains[e.key.chain as usize].clone()
}

#[test]
fn a_waker_that_ran_through_the_wait_ends_it_running() {
    let levels = ends(
        3,
        &[
            blocks(1_000, 1, 200),
            wakes(1_500, 1, 400, 200),
            back_in(2_000, 1, 200, "b"),
            // A blocks after B's last wait ended; B runs and wakes it.
            blocks(3_000, 0, 100),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    assert_eq!(levels, [Level::End(ChainEnd::Running)]);
}

#[test]
fn a_waker_with_no_wait_seen_ends_it_untraced() {
    let levels = ends(
        3,
        &[
            blocks(3_000, 0, 100),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    assert_eq!(levels, [Level::End(ChainEnd::NotTraced)]);
}

#[test]
fn a_preempted_waker_ends_it_runnable() {
    let levels = ends(
        3,
        &[
            switch(2_000, 1, 200, PREEMPTED, chain(&[0xf1], &[]), 0, "x"),
            blocks(3_000, 0, 100),
            back_in(30_000, 1, 200, "b"),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    assert_eq!(levels, [Level::End(ChainEnd::Runnable)]);
}

#[test]
fn a_preemption_after_the_wakers_sleep_is_stepped_over() {
    let levels = ends(
        3,
        &[
            blocks(2_000, 1, 200),
            blocks(3_000, 0, 100),
            wakes(20_000, 1, 400, 200),
            back_in(21_000, 1, 200, "b"),
            // B, woken, is preempted for a while before it wakes A.
            switch(25_000, 1, 200, PREEMPTED, chain(&[0xf1], &[]), 0, "x"),
            back_in(30_000, 1, 200, "b"),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    assert!(
        matches!(levels[..], [Level::Waited { waker, .. }, Level::End(ChainEnd::NotTraced)] if waker.tid == 400),
        "{levels:?}"
    );
}

#[test]
fn a_loss_in_the_wakers_wait_ends_it_lost() {
    let levels = ends(
        3,
        &[
            blocks(1_000, 1, 200),
            ev(
                1_500,
                EventKind::Lost(Lost {
                    records: 1,
                    until: 1_600,
                }),
            ),
            blocks(3_000, 0, 100),
            wakes(20_000, 1, 400, 200),
            back_in(21_000, 1, 200, "b"),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    assert_eq!(levels, [Level::End(ChainEnd::Lost)]);
}

#[test]
fn a_thread_met_again_ends_it_in_a_loop() {
    // A (100) and B (200) wake each other, each waiting in the run queue
    // while the other has already blocked again.
    let mut a = chained(4);
    run(
        &mut a,
        &[
            blocks(1_000, 0, 100),
            wakes(2_000, 1, 200, 100),
            blocks(3_000, 1, 200),
            back_in(4_000, 0, 100, "a"),
            wakes(5_000, 0, 100, 200),
            blocks(6_000, 0, 100),
            back_in(7_000, 1, 200, "b"),
            wakes(8_000, 1, 200, 100),
            back_in(9_000, 0, 100, "a"),
        ],
    );
    let r = a.finish();
    let levels: Vec<&Vec<Level>> = r
        .entries
        .iter()
        .map(|e| &r.chains[e.key.chain as usize])
        .collect();
    // A's second wait: level 2 is B's wait from 3 to 7 us (woken by A
    // at 5), which A's first wait, from 1 to 4 us, overlapped: A again.
    assert!(
        levels.iter().any(|l| matches!(
            l[..],
            [Level::Waited { waker, .. }, Level::End(ChainEnd::Loop)] if waker.tid == 100
        )),
        "{levels:?}"
    );
}

#[test]
fn chains_follow_threads_that_are_not_targets_without_counting_them() {
    let mut a = chained(2);
    run(
        &mut a,
        &[
            // 200 is no target: its unseen switch-in is no news.
            blocks(1_000, 1, 200),
            blocks(2_000, 1, 200),
        ],
    );
    let r = a.finish();
    assert!(r.entries.is_empty());
    assert_eq!(r.stats, Stats::default());
}

#[test]
fn the_history_keeps_a_few_recent_waits_per_thread() {
    let mut a = chained(2);
    let mut events = Vec::new();
    // Thread 200 waits 20 times, 1 us each; an old thread 400 once.
    events.push(blocks(0, 1, 400));
    events.push(back_in(500, 1, 400, "old"));
    for i in 0..20u64 {
        events.push(blocks(1_000 + i * 2_000, 1, 200));
        events.push(back_in(2_000 + i * 2_000, 1, 200, "b"));
    }
    run(&mut a, &events);
    let history = a.history.as_ref().unwrap();
    assert_eq!(history.threads(), 2);
    assert!(matches!(
        history.last(200),
        chain::Prev::Interval { end: 40_000, .. }
    ));
    // Long after, a wait of another thread drops the old ones.
    run(
        &mut a,
        &[
            blocks(chain::KEPT_NS + 50_000, 0, 300),
            back_in(chain::KEPT_NS + 60_000, 0, 300, "k"),
        ],
    );
    let history = a.history.as_ref().unwrap();
    assert_eq!(history.threads(), 1);
    assert_eq!(history.last(200), chain::Prev::Unknown);
}

#[test]
fn a_wakers_sleep_with_no_wakeup_read_is_counted() {
    let mut a = chained(3);
    run(
        &mut a,
        &[
            blocks(2_000, 1, 200),
            blocks(3_000, 0, 100),
            // The kernel reported no wakeup of B.
            back_in(21_000, 1, 200, "b"),
            wakes(40_000, 1, 200, 100),
            back_in(41_000, 0, 100, "a"),
        ],
    );
    let r = a.finish();
    let e = only(&r);
    assert!(
        matches!(r.chains[e.key.chain as usize][..], [Level::Waited { waker, .. }] if waker == WakerKey::NONE)
    );
    assert_eq!(r.stats.chain_wakeup_unseen, 1);
}

#[test]
fn the_waits_of_a_thread_that_exited_go_soon_after() {
    let mut a = chained(2);
    run(
        &mut a,
        &[
            blocks(0, 1, 200),
            back_in(500, 1, 200, "b"),
            blocks(1_000, 1, 400),
            back_in(1_500, 1, 400, "c"),
            ev(
                2_000,
                EventKind::Exit(Exit {
                    tgid: 200,
                    tid: 200,
                }),
            ),
        ],
    );
    // A second later, the next sweep drops the thread that exited only.
    run(
        &mut a,
        &[
            blocks(1_100_000_000, 0, 300),
            back_in(1_100_000_500, 0, 300, "k"),
        ],
    );
    let history = a.history.as_ref().unwrap();
    assert_eq!(history.last(200), chain::Prev::Unknown);
    assert!(matches!(
        history.last(400),
        chain::Prev::Interval { end: 1_500, .. }
    ));
}
