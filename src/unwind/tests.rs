use std::hint::black_box;

use std::time::{Duration, Instant};

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
fn a_walk_is_remembered_and_recalled_by_the_words_it_read() {
    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let memo = Memo::new();
    let mut unwinder = Unwinder::new().with_memo(memo.clone());
    let copy = outer_frame();
    let (ip, sp, bp, stack) = (copy.ip, copy.sp, copy.bp, copy.stack.clone());
    let mut ev = switch_with(copy, me);
    unwinder.unwind(&mut ev, &mut maps);
    let user = switch_of(&ev).stack.user().to_vec();
    assert!(user.len() > 3, "{user:x?}");
    let start = memo::Start {
        tgid: me,
        ip,
        sp,
        bp,
    };
    let mut recalled = Vec::new();
    assert!(memo.recall(start, 1, &stack, false, &mut recalled));
    assert_eq!(recalled, user, "the same frames as the walk");
    // A return address changed: the walk is not recalled.
    let mut changed = stack.to_vec();
    let at = (0..changed.len() - 8)
        .step_by(8)
        .find(|&i| user[1..].contains(&u64::from_ne_bytes(changed[i..i + 8].try_into().unwrap())))
        .expect("a return address in the copy");
    changed[at] ^= 0x40;
    assert!(!memo.recall(start, 1, &changed, false, &mut recalled));
    // Nor once the process maps new code.
    memo.changed(me, 2);
    assert!(!memo.recall(start, 3, &stack, false, &mut recalled));
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

/// Where [`block_in_read`] blocked: its IP, SP and BP, once stored.
static BLOCKED_AT: [std::sync::atomic::AtomicU64; 3] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 3];

/// Stores its registers in [`BLOCKED_AT`] and, in the same instructions,
/// blocks in `read(fd)`: while it waits, its stack from SP up is exactly
/// what the kernel would copy at its switch-out.
#[inline(never)]
fn block_in_read(fd: i32) -> i64 {
    let mut byte = 0u8;
    let ret: i64;
    // SAFETY: writes three words into `BLOCKED_AT` (atomics, so shared
    // writes are sound) and makes a read(2) of one byte into `byte`, which
    // outlives the call; rcx and r11 are clobbered by `syscall`.
    unsafe {
        std::arch::asm!(
            "lea {tmp}, [rip + 2f]",
            "mov [{at}], {tmp}",
            "mov [{at} + 8], rsp",
            "mov [{at} + 16], rbp",
            "syscall",
            "2:",
            at = in(reg) BLOCKED_AT.as_ptr(),
            tmp = out(reg) _,
            inlateout("rax") libc::SYS_read => ret,
            in("rdi") fd,
            in("rsi") &raw mut byte,
            in("rdx") 1,
            lateout("rcx") _,
            lateout("r11") _,
        );
    }
    black_box(byte);
    ret
}

/// A frame of a kilobyte: more than the test's copy holds.
#[inline(never)]
fn waits_in_the_middle(fd: i32) -> i64 {
    let mut pad = [0u8; 1024];
    black_box(&mut pad);
    black_box(block_in_read(black_box(fd))) + i64::from(black_box(pad)[0])
}

#[inline(never)]
fn waits_deep_down(fd: i32) -> i64 {
    black_box(waits_in_the_middle(black_box(fd)))
}

/// A thread blocked in `read`, its stack copied as the kernel would but
/// only 64 bytes of it: unwinding stops in its first frame; reading the
/// rest from the waiting thread reaches its callers.
#[test]
fn a_waiting_threads_stack_is_unwound_past_its_copy() {
    use std::sync::atomic::Ordering;
    let (r, w) = std::io::pipe().expect("pipe");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&r);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tid_tx.send(nix::unistd::gettid().as_raw() as u32);
        waits_deep_down(fd)
    });
    let tid = tid_rx.recv().expect("the waiter's id");
    // Blocked once its registers are stored and it sleeps.
    let stat = format!("/proc/self/task/{tid}/stat");
    let asleep = || {
        std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('S')))
            .unwrap_or(false)
    };
    let start = Instant::now();
    while BLOCKED_AT[1].load(Ordering::SeqCst) == 0 || !asleep() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the waiter never blocked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let [ip, sp, bp] = BLOCKED_AT.each_ref().map(|a| a.load(Ordering::SeqCst));
    let stack = crate::sys::memory::read_upward(tid, sp, 64);
    assert_eq!(stack.len(), 64);
    let copy = UserCopy {
        ip,
        sp,
        bp,
        stack: stack.into(),
        charge: Default::default(),
    };

    let me = std::process::id();
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut unwound = |unwinder: &mut Unwinder| {
        let mut ev = switch_with(copy.clone(), me);
        if let EventKind::Switch(s) = &mut ev.kind {
            s.prev_tid = tid;
        }
        unwinder.unwind(&mut ev, &mut maps);
        switch_of(&ev).stack.user().to_vec()
    };
    let short = unwound(&mut Unwinder::new());
    let mut reading = Unwinder::new().with_tails(Tails::live(64, Default::default()));
    let long = unwound(&mut reading);
    std::io::Write::write_all(&mut &w, b"x").expect("waking the waiter");
    assert_eq!(waiter.join().expect("the waiter"), 1);
    drop(r);
    let mut symbolizer = Symbolizer::new(maps, None).expect("symbolizer");
    let (short, long) = (
        symbolizer.user(me, 1, &short),
        symbolizer.user(me, 1, &long),
    );

    let has = |names: &[String], f: &str| names.iter().any(|n| n.ends_with(f));
    assert!(has(&short, "block_in_read"), "{short:#?}");
    assert!(
        !has(&short, "waits_deep_down"),
        "the copy alone: {short:#?}"
    );
    let at = |f: &str| {
        long.iter()
            .position(|n| n.ends_with(f))
            .unwrap_or_else(|| panic!("{f} not in {long:#?}"))
    };
    assert!(at("block_in_read") < at("waits_in_the_middle"));
    assert!(at("waits_in_the_middle") < at("waits_deep_down"));
    let stats = reading.tail_stats().expect("tails read");
    assert_eq!((stats.extended, stats.changed), (1, 0));
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
            .map(|m| m.path.to_string())
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

/// A process whose map changes between any two of its samples gets its
/// modules brought up to date at a bounded rate, not at every sample.
#[test]
fn module_updates_are_bounded_in_rate() {
    let mut space = Space {
        version: None,
        unwinder: UnwinderX86_64::new(),
        cache: CacheX86_64::new(),
        modules: HashMap::new(),
        updates: Rate::new(UPDATES_PER_SECOND, UPDATE_BURST, 0),
    };
    let burst = (0..10 * UPDATE_BURST)
        .filter(|_| space.updates.allow(0))
        .count() as u64;
    assert_eq!(burst, UPDATE_BURST);
    // Over the next second, a sample every 10 us: that many more.
    let more = (1..=100_000u64)
        .filter(|i| space.updates.allow(i * 10_000))
        .count() as u64;
    assert_eq!(more, UPDATES_PER_SECOND);
}

#[inline(never)]
fn live_inner(fd: i32) -> isize {
    let mut byte = 0u8;
    // SAFETY: a read(2) of one byte into `byte`, which outlives the call.
    let n = unsafe { libc::read(fd, (&raw mut byte).cast(), 1) };
    black_box(byte);
    black_box(n)
}

#[inline(never)]
fn live_outer(fd: i32) -> isize {
    black_box(live_inner(black_box(fd)))
}

/// A thread blocked in glibc's `read`, whose switch-out copied nothing
/// and walked one frame: its stack is read from the thread and unwound to
/// its callers; with another PC than the thread's, it is not.
#[test]
fn a_blocked_thread_without_a_copy_is_read_from_the_thread() {
    use crate::sys::blocked::{Syscall, parse_syscall};
    let (r, w) = std::io::pipe().expect("pipe");
    let fd = std::os::fd::AsRawFd::as_raw_fd(&r);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = tid_tx.send(nix::unistd::gettid().as_raw() as u32);
        live_outer(fd)
    });
    let tid = tid_rx.recv().expect("the waiter's id");
    let me = std::process::id();
    let file = format!("/proc/{me}/task/{tid}/syscall");
    let start = Instant::now();
    let pc = loop {
        let text = std::fs::read(&file).unwrap_or_default();
        // Blocked in read(2), number 0.
        if let (true, Syscall::Blocked(regs)) = (text.starts_with(b"0 "), parse_syscall(&text)) {
            break regs.pc;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "never blocked");
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut maps = ProcessMaps::new();
    maps.ensure_known(me, 0);
    let mut unwinder = Unwinder::new().with_live(live::LiveStacks::live(Default::default()));
    let mut unwound = |first: u64| {
        let mut ev = switch_with(copy_of(0, &[]), me);
        if let EventKind::Switch(s) = &mut ev.kind {
            s.prev_tid = tid;
            s.user_copy = None;
            s.stack = Callchain::new(&[0xffffffff81000000], &[first]);
        }
        unwinder.unwind(&mut ev, &mut maps);
        switch_of(&ev).stack.user().to_vec()
    };
    let read = unwound(pc);
    assert_eq!(unwound(pc ^ 1), [pc ^ 1], "another PC: the walk is kept");
    std::io::Write::write_all(&mut &w, b"x").expect("waking the waiter");
    assert_eq!(waiter.join().expect("the waiter"), 1);
    let stats = unwinder.live_stats().expect("live reads");
    assert_eq!((stats.read, stats.moved), (1, 1), "{stats:?}");
    let names = Symbolizer::new(maps, None)
        .expect("symbolizer")
        .user(me, 1, &read);
    let at = |f: &str| {
        names
            .iter()
            .position(|n| n.ends_with(f))
            .unwrap_or_else(|| panic!("{f} not in {names:#?}"))
    };
    assert_eq!(read[0], pc);
    assert!(at("live_inner") < at("live_outer"), "{names:#?}");
}
