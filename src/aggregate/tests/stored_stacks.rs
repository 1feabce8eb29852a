//! Which stacks are stored, and what does not fit.

use super::*;
use crate::event::Mmap;

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
