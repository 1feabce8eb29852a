use std::hint::black_box;

use super::*;
use crate::event::{Comm, RanSince, Switch};
use crate::symbolize::Symbolizer;
use crate::symbolize::maps::parse_maps;

fn copy_of(sp: u64, words: &[u64]) -> UserCopy {
    UserCopy {
        ip: 0x1000,
        sp,
        bp: 0,
        stack: words.iter().flat_map(|w| w.to_ne_bytes()).collect(),
        charge: Default::default(),
    }
}

#[test]
fn stack_words_are_read_only_inside_the_copy() {
    let c = copy_of(0x7000, &[11, 22]);
    assert_eq!(read_word(&c, 0x7000), Ok(11));
    assert_eq!(read_word(&c, 0x7008), Ok(22));
    // Unaligned but inside.
    assert!(read_word(&c, 0x7004).is_ok());
    for outside in [0x6ff8, 0x7009, 0x7010, 0, u64::MAX] {
        assert_eq!(read_word(&c, outside), Err(()), "{outside:#x}");
    }
    let short = UserCopy {
        stack: vec![1, 2, 3].into(),
        ..c
    };
    assert_eq!(read_word(&short, 0x7000), Err(()));
}

#[test]
fn the_frame_pointer_chain_continues_where_dwarf_stopped() {
    let fp = [0x10, 0x20, 0x30, 0x40];
    // DWARF stopped at a frame the fp chain holds: its tail follows.
    let mut frames = vec![0x10, 0x21, 0x30];
    extend_from_fp(&mut frames, &fp);
    assert_eq!(frames, [0x10, 0x21, 0x30, 0x40]);
    // At a frame it does not hold: nothing is added.
    let mut frames = vec![0x10, 0x99];
    extend_from_fp(&mut frames, &fp);
    assert_eq!(frames, [0x10, 0x99]);
    // Nothing unwound: the fp chain as it is.
    let mut frames = Vec::new();
    extend_from_fp(&mut frames, &fp);
    assert_eq!(frames, fp);
    // Never past the cap.
    let long: Vec<u64> = (1..=2 * MAX_FRAMES as u64).collect();
    let mut frames = vec![1];
    extend_from_fp(&mut frames, &long);
    assert_eq!(frames.len(), MAX_FRAMES);
}

/// This thread's registers and the top of its stack, as the kernel would
/// copy them in a sample taken here.
#[inline(never)]
fn capture() -> UserCopy {
    let (sp, bp, ip): (u64, u64, u64);
    // SAFETY: reads three registers into outputs; touches no memory.
    unsafe {
        std::arch::asm!(
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            "lea {ip}, [rip]",
            sp = out(reg) sp,
            bp = out(reg) bp,
            ip = out(reg) ip,
        );
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("own maps");
    let top = maps
        .lines()
        .filter_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        })
        .find(|&(a, b)| a <= sp && sp < b)
        .expect("the stack's mapping")
        .1;
    let n = (top - sp).min(8192) as usize;
    // SAFETY: `sp..sp + n` lies inside this thread's stack mapping, which
    // is readable and outlives the copy.
    let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, n) }.into();
    UserCopy {
        ip,
        sp,
        bp,
        stack,
        charge: Default::default(),
    }
}

#[inline(never)]
fn middle_frame() -> UserCopy {
    black_box(capture())
}

#[inline(never)]
fn outer_frame() -> UserCopy {
    black_box(middle_frame())
}

/// The switch of an event made by [`switch_with`].
fn switch_of(ev: &Event) -> &Switch {
    match &ev.kind {
        EventKind::Switch(s) => s,
        other => panic!("{other:?}"),
    }
}

fn switch_with(copy: UserCopy, tgid: u32) -> Event {
    Event {
        time: 1,
        cpu: 0,
        kind: EventKind::Switch(Switch {
            prev_tid: tgid,
            prev_tgid: tgid,
            prev_comm: Comm::from("me"),
            prev_state: 1,
            next_tid: 0,
            next_comm: Comm::from("swapper/0"),
            stack: Callchain::new(&[0xffffffff81000000], &[]),
            user_copy: Some(Box::new(copy)),
            prev_ran_since: RanSince::NotTold,
            prev_cgroup: None,
        }),
    }
}

#[test]
fn unwinds_its_own_stack_through_its_callers() {
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut unwinder = Unwinder::new();
    let mut ev = switch_with(outer_frame(), me);
    unwinder.unwind(&mut ev, &mut maps);
    let s = switch_of(&ev);
    assert!(s.user_copy.is_none(), "the copy is dropped");
    assert_eq!(s.stack.kernel(), [0xffffffff81000000], "kernel part kept");
    let user = s.stack.user().to_vec();
    let names = Symbolizer::new(maps, None)
        .expect("symbolizer")
        .user(me, 1, &user);
    let at = |f: &str| {
        names
            .iter()
            .position(|n| n.ends_with(f))
            .unwrap_or_else(|| panic!("{f} not in {names:#?}"))
    };
    let (c, m, o) = (
        at("unwind::tests::capture"),
        at("unwind::tests::middle_frame"),
        at("unwind::tests::outer_frame"),
    );
    assert!(c < m && m < o, "{names:#?}");
    // And on through the test harness, in std.
    assert!(names[o..].iter().any(|n| n.contains("std::")), "{names:#?}");
    let st = unwinder.stats();
    assert_eq!(st.stacks, 1);
    assert_eq!(st.frames, user.len() as u64 - st.fp_frames);
}

#[test]
fn a_copy_of_garbage_gives_a_short_stack_not_a_panic() {
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut unwinder = Unwinder::new();
    let real = capture();
    let garbage: Vec<u64> = (0..1024u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    for (ip, sp) in [
        (real.ip, real.sp),
        (0, 0),
        (u64::MAX, u64::MAX - 4),
        (real.ip, 8),
    ] {
        let mut copy = copy_of(sp, &garbage);
        copy.ip = ip;
        let mut ev = switch_with(copy, me);
        unwinder.unwind(&mut ev, &mut maps);
        let s = switch_of(&ev);
        assert!(s.stack.user().len() <= MAX_FRAMES);
        assert_eq!(s.stack.user().first(), Some(&ip), "starts at the IP");
    }
}

#[test]
fn equal_stacks_share_one_chain() {
    let mut u = Unwinder::new();
    let a = u.chain(&[1, 2], &[3]);
    let b = u.chain(&[1, 2], &[3]);
    let c = u.chain(&[1], &[2, 3]);
    assert_eq!(a.serial(), b.serial());
    assert_ne!(a.serial(), c.serial(), "the parts stay apart");
    assert_eq!((c.kernel(), c.user()), (&[1][..], &[2, 3][..]));
}

#[test]
fn the_map_in_use_prefers_the_newest_of_overlapping_mappings() {
    let mut maps = ProcessMaps::new();
    let text = "1000-3000 r-xp 00000000 08:01 10 /old\n\
                5000-6000 r-xp 00000000 08:01 11 /other\n";
    for m in parse_maps(text, 0) {
        maps.add_mapping(7, m);
    }
    let v1 = maps.version(7);
    let newer = parse_maps("2000-4000 r-xp 00000000 08:01 12 /new\n", 10);
    maps.add_mapping(7, newer.into_iter().next().unwrap());
    assert_ne!(maps.version(7), v1);
    let paths = |t| -> Vec<String> {
        maps.mapped_at(7, t)
            .iter()
            .map(|m| m.path.clone())
            .collect()
    };
    assert_eq!(paths(5), ["/old", "/other"]);
    assert_eq!(paths(10), ["/new", "/other"]);
}

mod props {
    use proptest::prelude::*;

    use super::*;

    thread_local! {
        static STATE: std::cell::RefCell<(ProcessMaps, Unwinder)> = {
            let mut maps = ProcessMaps::new();
            maps.ensure_known(std::process::id(), 0);
            std::cell::RefCell::new((maps, Unwinder::new()))
        };
    }

    /// Values near `real` (code or stack), or anywhere.
    fn near(real: u64) -> impl Strategy<Value = u64> {
        prop_oneof![
            (0u64..4096).prop_map(move |d| real.wrapping_add(d)),
            (0u64..4096).prop_map(move |d| real.wrapping_sub(d)),
            any::<u64>(),
        ]
    }

    proptest! {
        #![proptest_config(crate::proptest_config::config(256))]

        /// Garbage copies and registers against this process's real
        /// modules: never a panic, never more than the cap, always the IP
        /// first.
        #[test]
        fn garbage_copies_never_panic(
            ip in near(capture as fn() -> UserCopy as usize as u64),
            sp_delta in 0u64..64,
            bp in any::<u64>(),
            words in proptest::collection::vec(near(capture as fn() -> UserCopy as usize as u64), 0..512),
            cut in 0usize..8,
        ) {
            let me = std::process::id();
            let mut copy = copy_of(0x7ff0_0000_0000 + sp_delta * 8, &words);
            let len = copy.stack.len().saturating_sub(cut);
            copy.stack = copy.stack[..len].into();
            copy.ip = ip;
            copy.bp = bp;
            let mut ev = switch_with(copy, me);
            // One unwinder for all cases: its tables are read once.
            STATE.with_borrow_mut(|(maps, unwinder)| unwinder.unwind(&mut ev, maps));
            let s = switch_of(&ev);
            prop_assert!(s.stack.user().len() <= MAX_FRAMES);
            prop_assert_eq!(s.stack.user().first(), Some(&ip));
        }
    }
}
