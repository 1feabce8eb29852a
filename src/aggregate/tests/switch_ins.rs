//! Switch-ins that `sched_switch` did not report: told by a
//! context-switch record, or late, by the next switch-out.

use super::*;

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
