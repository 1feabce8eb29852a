//! Reports cut from a run that goes on (`--interval`).

use super::*;

#[test]
fn an_interval_is_counted_in_the_report_of_its_end() {
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
            back_in(11_000, 0, 100, "app"),
            // Opened before the cut, closed after it.
            out(20_000, 0, 100),
        ],
    );
    let first = a.cut();
    assert_eq!(only(&first).total_us, 10);
    // The report holds the stacks its entries use.
    let e = only(&first);
    assert_eq!(
        first.stacks.kernel_addrs(e.key.target_kernel),
        Some(&[0xf1u64, 0xf2][..])
    );
    assert!(first.stacks.user_stack(e.key.target_user).is_some());
    // Its stacks, and the one of the interval still open.
    assert_eq!(first.stacks.kernel.len(), 2);
    run(
        &mut a,
        &[
            waking(25_000, 0, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(50_000, 0, 100, "app"),
        ],
    );
    let second = a.cut();
    let e = only(&second);
    assert_eq!(e.total_us, 30);
    assert_eq!(e.key.waker_tid, 200);
    assert_eq!(second.stats.intervals, 1);
    // The storage started afresh: the open interval's stack was stored
    // again, with the waker's, and nothing of the first report.
    let t = &second.stacks;
    assert_eq!(t.kernel_addrs(e.key.target_kernel), Some(&[0xf1u64][..]));
    assert_eq!(t.kernel_addrs(e.key.waker_kernel), Some(&[0xe1u64][..]));
    assert_eq!(
        t.user_stack(e.key.target_user).map(|u| u.addrs.clone()),
        Some(vec![0x4001])
    );
    assert_eq!((t.kernel.len(), t.user.len()), (2, 2));
    let empty = a.finish();
    assert!(empty.entries.is_empty());
    assert_eq!(empty.stats.intervals, 0);
}

#[test]
fn a_reports_counts_are_its_own_and_add_up() {
    let mut a = agg(config());
    run(&mut a, &[out(1_000, 0, 100), back_in(3_000, 0, 100, "app")]);
    let first = a.cut();
    run(
        &mut a,
        &[
            out(4_000, 0, 100),
            back_in(6_000, 0, 100, "app"),
            out(7_000, 0, 100),
            back_in(9_000, 0, 100, "app"),
        ],
    );
    let second = a.finish();
    assert_eq!((first.stats.intervals, second.stats.intervals), (1, 2));
    let mut total = first.stats;
    total.add(&second.stats);
    assert_eq!(total.intervals, 3);
    assert_eq!(total.wakeup_unseen, [3, 0, 0, 0, 0, 0, 0, 0]);
}
