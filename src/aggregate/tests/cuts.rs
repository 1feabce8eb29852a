//! Reports cut from a run that goes on (`--interval`), and cuts named and
//! folded in as it goes ([`Settled`]).

use super::*;
use crate::report::Frame;

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

/// Names every stack by its kind and half, as if its frames were those of
/// one function: stacks that differ only in addresses print the same.
fn by_kind(r: StackRef, half: Half) -> Option<std::sync::Arc<[Frame]>> {
    let name = match r {
        StackRef::Kernel(_) => format!("kernel {half:?}"),
        StackRef::User(_) => "user".to_string(),
        _ => return None,
    };
    Some(vec![Frame::Name(name.into())].into())
}

#[test]
fn cuts_whose_stacks_print_the_same_are_one_entry() {
    let mut a = agg(config());
    let mut settled = Settled::new(1);
    for (i, leaf) in [0x401u64, 0x402, 0x403].into_iter().enumerate() {
        let t = 10_000_000 * (i as u64 + 1);
        run(
            &mut a,
            &[
                switch(t, 0, 100, S, chain(&[0xf0 + leaf], &[leaf]), 0, "swapper"),
                waking(t + 500_000, 0, 200, 100, chain(&[0xe1], &[0x501])),
                back_in(t + 1_000_000, 0, 100, "app"),
            ],
        );
        settled.fold(a.cut(), &by_kind);
    }
    settled.fold(a.finish(), &by_kind);
    assert_eq!(settled.folded(), 4);
    let all = settled.into_aggregate();
    let e = only(&all);
    assert_eq!((e.total_us, all.stats.intervals), (3_000, 3));
    // Each half's kernel stack is named apart, the user stacks once.
    let name = |r: StackRef| match r {
        StackRef::Named(id) => all.stacks.named[id as usize][0].clone(),
        other => panic!("not named: {other:?}"),
    };
    assert_eq!(
        name(e.key.target_kernel),
        Frame::Name("kernel Blocked".into())
    );
    assert_eq!(name(e.key.waker_kernel), Frame::Name("kernel Waker".into()));
    assert_eq!(e.key.target_user, e.key.waker_user);
    assert_eq!(all.stacks.named.len(), 3);
    assert!(all.stacks.kernel.is_empty() && all.stacks.user.is_empty());
}

#[test]
fn a_stack_left_unnamed_is_missed() {
    let mut a = agg(config());
    run(&mut a, &[out(1_000, 0, 100), back_in(3_000, 0, 100, "app")]);
    let mut settled = Settled::new(1);
    settled.fold(a.finish(), &|_, _| None);
    let e = only(&settled.into_aggregate());
    assert_eq!(
        (e.key.target_kernel, e.key.target_user),
        (StackRef::Missed, StackRef::Missed)
    );
    assert_eq!(e.total_us, 2);
}

#[test]
fn a_storage_is_nearly_full_until_a_cut_frees_it() {
    let mut a = agg(Config {
        stack_storage_size: 8,
        ..config()
    });
    // Each interval stores a kernel and a user stack of its own.
    for i in 0..4u64 {
        let t = 1_000 * (i + 1);
        run(
            &mut a,
            &[
                switch(
                    t,
                    0,
                    100,
                    S,
                    chain(&[0xf00 + i], &[0x400 + i]),
                    0,
                    "swapper",
                ),
                back_in(t + 500, 0, 100, "app"),
            ],
        );
        assert_eq!(a.nearly_full(), i == 3, "after {} intervals", i + 1);
    }
    let cut = a.cut();
    assert_eq!(cut.stacks.kernel.len() + cut.stacks.user.len(), 8);
    assert!(!a.nearly_full());
}

#[test]
fn a_name_in_many_named_stacks_is_held_once() {
    let mut a = agg(config());
    run(
        &mut a,
        &[
            switch(1_000, 0, 100, S, chain(&[0xf1], &[0x401]), 0, "swapper"),
            back_in(2_000, 0, 100, "app"),
            switch(3_000, 0, 101, S, chain(&[0xf1], &[0x402]), 0, "swapper"),
            back_in(4_000, 0, 101, "app"),
        ],
    );
    let mut settled = Settled::new(1);
    // Each cut's naming makes names of its own.
    settled.fold(a.finish(), &|r, _| {
        let leaf = if r.word() & 1 == 0 { "f" } else { "g" };
        Some(vec![Frame::Name(leaf.into()), Frame::Name("main".into())].into())
    });
    let all = settled.into_aggregate();
    let mains: Vec<&Frame> = all.stacks.named.iter().map(|s| &s[1]).collect();
    assert!(mains.len() >= 2, "{:?}", all.stacks.named);
    let ptr = |f: &Frame| match f {
        Frame::Name(n) => std::sync::Arc::as_ptr(n),
        other => panic!("{other:?}"),
    };
    assert!(
        mains
            .windows(2)
            .all(|w| std::ptr::addr_eq(ptr(w[0]), ptr(w[1])))
    );
}
