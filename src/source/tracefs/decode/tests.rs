//! Tests of the assembler: ftrace entries and their stack entries, paired,
//! trimmed and completed into events.

use super::*;
use crate::event::{RanSince, Switch, Waking};
use crate::source::tracepoint::Tracefs;

/// The formats of every entry the assembler reads, from the fixtures.
struct Formats {
    switch: EventFormat,
    waking: EventFormat,
    kernel: EventFormat,
    user: EventFormat,
    fork: EventFormat,
    exec: EventFormat,
}

fn formats() -> Formats {
    let t = Tracefs::fixtures();
    Formats {
        switch: t.event_format("sched", "sched_switch").unwrap(),
        waking: t.event_format("sched", "sched_waking").unwrap(),
        kernel: t.event_format("ftrace", "kernel_stack").unwrap(),
        user: t.event_format("ftrace", "user_stack").unwrap(),
        fork: t.event_format("sched", "sched_process_fork").unwrap(),
        exec: t.event_format("sched", "sched_process_exec").unwrap(),
    }
}

// Symbols of the synthetic kallsyms below.
const SWITCH_PROBE: u64 = 0xffffffff81000000; // trace_event_raw_event_sched_switch
const SWITCH_ITER: u64 = 0xffffffff81000100; // __traceiter_sched_switch
const SCHEDULE_INNER: u64 = 0xffffffff81000200; // __schedule
const SCHEDULE: u64 = 0xffffffff81000400; // schedule
const WAKING_PROBE: u64 = 0xffffffff81000500; // trace_event_raw_event_sched_wakeup_template
const WAKING_ITER: u64 = 0xffffffff81000600; // __traceiter_sched_waking
const TTWU: u64 = 0xffffffff81000700; // try_to_wake_up
const WAKE_UP_PROCESS: u64 = 0xffffffff81000900; // wake_up_process
const STACK_SAVER: u64 = 0xffffffff81000a00; // __ftrace_trace_stack
const NANOSLEEP: u64 = 0xffffffff81000b00; // do_nanosleep
const IRQ_ENTRY: u64 = 0xffffffff81000d40; // asm_common_interrupt
const IRQ_EXIT: u64 = 0xffffffff81000e00; // irq_exit_rcu

const KALLSYMS: &str = "\
ffffffff81000000 t trace_event_raw_event_sched_switch
ffffffff81000100 T __traceiter_sched_switch
ffffffff81000200 T __schedule
ffffffff81000400 T schedule
ffffffff81000500 t trace_event_raw_event_sched_wakeup_template
ffffffff81000600 T __traceiter_sched_waking
ffffffff81000700 T try_to_wake_up
ffffffff81000900 T wake_up_process
ffffffff81000a00 T __ftrace_trace_stack
ffffffff81000b00 T do_nanosleep
ffffffff81000c00 T hrtimer_nanosleep
ffffffff81000d00 T __irqentry_text_start
ffffffff81000d40 T asm_common_interrupt
ffffffff81000e00 T __irqentry_text_end
ffffffff81000e00 T irq_exit_rcu
ffffffff82000000 d some_data
";

fn put(raw: &mut Vec<u8>, offset: usize, v: &[u8]) {
    if raw.len() < offset + v.len() {
        raw.resize(offset + v.len(), 0);
    }
    raw[offset..offset + v.len()].copy_from_slice(v);
}

/// Writes an integer field in its own size, native endian.
fn put_int(raw: &mut Vec<u8>, f: &Field, v: i64) {
    let b = v.to_ne_bytes();
    let bytes = match f.size {
        1 => vec![v as u8],
        2 => (v as u16).to_ne_bytes().to_vec(),
        4 => (v as u32).to_ne_bytes().to_vec(),
        8 => b.to_vec(),
        n => panic!("field {} has size {n}", f.name),
    };
    put(raw, f.offset, &bytes);
}

fn put_named(raw: &mut Vec<u8>, fmt: &EventFormat, name: &str, v: i64) {
    put_int(raw, fmt.field(name).unwrap(), v);
}

/// The fixed part of an entry of `fmt`, zeroed, with its common fields.
fn entry(fmt: &EventFormat, common_pid: u32) -> Vec<u8> {
    let size = fmt.fixed_size();
    let mut raw = vec![0u8; size];
    put_named(&mut raw, fmt, "common_type", fmt.id as i64);
    put_named(&mut raw, fmt, "common_pid", common_pid as i64);
    raw
}

fn switch_raw(f: &Formats, prev: u32, prev_comm: &str, state: i64, next: u32) -> Vec<u8> {
    let fmt = &f.switch;
    let mut raw = entry(fmt, prev);
    put(
        &mut raw,
        fmt.field("prev_comm").unwrap().offset,
        prev_comm.as_bytes(),
    );
    put_named(&mut raw, fmt, "prev_pid", prev as i64);
    put_named(&mut raw, fmt, "prev_state", state);
    put(&mut raw, fmt.field("next_comm").unwrap().offset, b"next\0");
    put_named(&mut raw, fmt, "next_pid", next as i64);
    raw
}

fn waking_raw(f: &Formats, waker: u32, wakee: u32, wakee_comm: &str) -> Vec<u8> {
    let fmt = &f.waking;
    let mut raw = entry(fmt, waker);
    put(
        &mut raw,
        fmt.field("comm").unwrap().offset,
        wakee_comm.as_bytes(),
    );
    put_named(&mut raw, fmt, "pid", wakee as i64);
    raw
}

/// A `kernel_stack` entry as the kernel writes it: `size` frames, however
/// many the format's `caller[8]` says.
fn kernel_raw(f: &Formats, pid: u32, frames: &[u64]) -> Vec<u8> {
    let fmt = &f.kernel;
    let mut raw = entry(fmt, pid);
    put_named(&mut raw, fmt, "size", frames.len() as i64);
    let caller = fmt.field("caller").unwrap().offset;
    raw.truncate(caller);
    for (i, a) in frames.iter().enumerate() {
        put(&mut raw, caller + 8 * i, &a.to_ne_bytes());
    }
    raw
}

/// A `user_stack` entry: a fixed array of slots, 0 after the last frame.
fn user_raw(f: &Formats, pid: u32, tgid: u32, frames: &[u64]) -> Vec<u8> {
    let fmt = &f.user;
    let mut raw = entry(fmt, pid);
    put_named(&mut raw, fmt, "tgid", tgid as i64);
    let caller = fmt.field("caller").unwrap();
    assert!(frames.len() * 8 <= caller.size);
    for (i, a) in frames.iter().enumerate() {
        put(&mut raw, caller.offset + 8 * i, &a.to_ne_bytes());
    }
    raw
}

/// Appends `s` after the fixed part and points the `__data_loc` field
/// `name` at it.
fn put_data_loc(raw: &mut Vec<u8>, fmt: &EventFormat, name: &str, s: &[u8]) {
    let off = raw.len();
    raw.extend_from_slice(s);
    let loc = ((s.len() as u32) << 16) | off as u32;
    put(raw, fmt.field(name).unwrap().offset, &loc.to_ne_bytes());
}

fn fork_raw(f: &Formats, parent: u32, child: u32) -> Vec<u8> {
    let fmt = &f.fork;
    let mut raw = entry(fmt, parent);
    put_named(&mut raw, fmt, "parent_pid", parent as i64);
    put_named(&mut raw, fmt, "child_pid", child as i64);
    put_data_loc(&mut raw, fmt, "parent_comm", b"parent\0");
    put_data_loc(&mut raw, fmt, "child_comm", b"parent\0");
    raw
}

fn exec_raw(f: &Formats, pid: u32, filename: &[u8]) -> Vec<u8> {
    let fmt = &f.exec;
    let mut raw = entry(fmt, pid);
    put_named(&mut raw, fmt, "pid", pid as i64);
    put_named(&mut raw, fmt, "old_pid", pid as i64);
    put_data_loc(&mut raw, fmt, "filename", filename);
    raw
}

/// A TgidSource answering from a map and counting the questions.
#[derive(Default)]
struct MapTgids {
    map: HashMap<u32, u32>,
    asked: HashMap<u32, usize>,
}

impl MapTgids {
    fn with(pairs: &[(u32, u32)]) -> MapTgids {
        MapTgids {
            map: pairs.iter().copied().collect(),
            asked: HashMap::new(),
        }
    }

    fn asked(&self, tid: u32) -> usize {
        self.asked.get(&tid).copied().unwrap_or(0)
    }
}

impl TgidSource for MapTgids {
    fn tgid(&mut self, tid: u32) -> Option<u32> {
        *self.asked.entry(tid).or_default() += 1;
        self.map.get(&tid).copied()
    }
}

/// An assembler, its TgidSource and the events it completed.
struct Run {
    asm: Assembler,
    tgids: MapTgids,
    out: Vec<Event>,
}

impl Run {
    fn with(f: &Formats, process: bool, kernel: bool, user: bool, tgids: MapTgids) -> Run {
        let sched = SchedFields::new(&f.switch, &f.waking).unwrap();
        let stacks = StackFormats::new(&f.kernel, &f.user).unwrap();
        let process = process.then(|| ProcessFormats::new(&f.fork, &f.exec).unwrap());
        let probes = ProbeRanges::from_kallsyms(KALLSYMS);
        assert!(!probes.is_empty());
        Run {
            asm: Assembler::new(sched, stacks, process, kernel, user, Some(probes)),
            tgids,
            out: Vec::new(),
        }
    }

    fn new(f: &Formats) -> Run {
        Run::with(f, false, true, true, MapTgids::default())
    }

    fn push(&mut self, cpu: u32, time: u64, raw: &[u8]) {
        let out = &mut self.out;
        self.asm
            .push(cpu, time, raw, &mut self.tgids, &mut |ev| out.push(ev));
    }

    fn flush(&mut self, upto: u64) {
        let out = &mut self.out;
        self.asm
            .flush(upto, &mut self.tgids, &mut |ev| out.push(ev));
    }

    fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.out)
    }

    fn stats(&self) -> AssemblerStats {
        self.asm.stats()
    }
}

fn switch_of(ev: &Event) -> &Switch {
    match &ev.kind {
        EventKind::Switch(s) => s,
        other => panic!("not a switch: {other:?}"),
    }
}

fn waking_of(ev: &Event) -> &Waking {
    match &ev.kind {
        EventKind::Waking(w) => w,
        other => panic!("not a waking: {other:?}"),
    }
}

#[test]
fn switch_with_both_stacks() {
    let f = formats();
    let mut r = Run::new(&f);
    r.push(2, 1000, &switch_raw(&f, 4243, "sleep", 1, 0));
    r.push(
        2,
        1001,
        &kernel_raw(
            &f,
            4243,
            &[
                SWITCH_PROBE + 0x40,
                SWITCH_ITER + 0x20,
                SCHEDULE_INNER + 0x123,
                SCHEDULE + 0x50,
                NANOSLEEP + 0x30,
            ],
        ),
    );
    r.push(
        2,
        1002,
        &user_raw(&f, 4243, 4242, &[0x401000, 0x402000, 0, 0x403000]),
    );
    // Still waiting: the next entry could be more of it.
    assert!(r.take().is_empty());
    assert_eq!(r.asm.pending_time(2), Some(1000));
    r.flush(1000);
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].time, out[0].cpu), (1000, 2));
    assert_eq!(
        *switch_of(&out[0]),
        Switch {
            prev_tid: 4243,
            prev_tgid: 4242,
            prev_comm: Comm::from("sleep"),
            prev_state: 1,
            next_tid: 0,
            next_comm: Comm::from("next"),
            stack: Callchain::new(
                &[SCHEDULE_INNER + 0x122, SCHEDULE + 0x50, NANOSLEEP + 0x30],
                &[0x401000, 0x402000],
            ),
            user_copy: None,
            prev_ran_since: RanSince::NotTold,
            prev_cgroup: None,
        }
    );
    assert_eq!(r.asm.pending_time(2), None);
    assert_eq!(r.stats(), AssemblerStats::default());
    // The user_stack's tgid was used: the source was never asked.
    assert!(r.tgids.asked.is_empty());
}

#[test]
fn kernel_stack_longer_than_the_format_array() {
    let f = formats();
    let mut r = Run::new(&f);
    let deep: Vec<u64> = (0..20).map(|i| NANOSLEEP + 0x10 + i).collect();
    let mut frames = vec![SWITCH_PROBE + 0x10, SCHEDULE_INNER + 0x20];
    frames.extend(&deep);
    let kraw = kernel_raw(&f, 7, &frames);
    assert!(kraw.len() > f.kernel.field("caller").unwrap().offset + 64);
    r.push(0, 10, &switch_raw(&f, 7, "deep", 2, 8));
    r.push(0, 11, &kraw);
    r.flush(u64::MAX);
    let out = r.take();
    let mut want = vec![SCHEDULE_INNER + 0x1f];
    want.extend(&deep);
    assert_eq!(switch_of(&out[0]).stack.kernel(), want);
    assert!(switch_of(&out[0]).stack.user().is_empty());

    // `size` bounds the frames read, even when more bytes follow.
    let mut r = Run::new(&f);
    let mut kraw = kernel_raw(&f, 7, &[SCHEDULE_INNER + 0x20, SCHEDULE + 1, NANOSLEEP]);
    put_named(&mut kraw, &f.kernel, "size", 2);
    r.push(0, 10, &switch_raw(&f, 7, "deep", 2, 8));
    r.push(0, 11, &kraw);
    r.flush(u64::MAX);
    assert_eq!(
        switch_of(&r.take()[0]).stack.kernel(),
        vec![SCHEDULE_INNER + 0x1f, SCHEDULE + 1]
    );

    // A `size` larger than the entry stops at the entry's end.
    let mut r = Run::new(&f);
    let mut kraw = kernel_raw(&f, 7, &[SCHEDULE_INNER + 0x20, SCHEDULE + 1]);
    put_named(&mut kraw, &f.kernel, "size", 1000);
    r.push(0, 10, &switch_raw(&f, 7, "deep", 2, 8));
    r.push(0, 11, &kraw);
    r.flush(u64::MAX);
    assert_eq!(
        switch_of(&r.take()[0]).stack.kernel(),
        vec![SCHEDULE_INNER + 0x1f, SCHEDULE + 1]
    );
    assert_eq!(r.stats(), AssemblerStats::default());
}

#[test]
fn an_interrupts_wakeup_has_no_user_stack() {
    use crate::event::WakeContext;
    let f = formats();
    // A wakeup of `flags` whose kernel stack ends in `outer`, and whose
    // user stack (ftrace's, of the current task) is task 100's.
    let wake = |flags: i64, outer: u64| {
        let mut r = Run::with(&f, false, true, true, MapTgids::with(&[(100, 90)]));
        let mut raw = waking_raw(&f, 100, 200, "worker");
        put_named(&mut raw, &f.waking, "common_flags", flags);
        r.push(0, 500, &raw);
        let kernel = [TTWU + 0x44, WAKE_UP_PROCESS + 0x10, outer];
        r.push(0, 501, &kernel_raw(&f, 100, &kernel));
        r.push(0, 502, &user_raw(&f, 100, 90, &[0x7f0000001000]));
        r.flush(u64::MAX);
        waking_of(&r.take()[0]).clone()
    };
    // A task's own wakeup, and a softirq it ran itself: kept.
    for flags in [0, 0x01, 0x10] {
        let w = wake(flags, NANOSLEEP);
        assert_eq!(w.context, WakeContext::Task, "flags {flags:#x}");
        assert_eq!(w.stack.user(), [0x7f0000001000], "flags {flags:#x}");
    }
    // After an interrupt, back in the task (no interrupt flag): kept.
    let w = wake(0, IRQ_ENTRY + 4);
    assert_eq!(w.context, WakeContext::Task);
    assert_eq!(w.stack.user(), [0x7f0000001000]);
    // Hard interrupt, NMI, and a softirq run on an interrupt's exit:
    // the user stack is the interrupted task's, and goes.
    for (flags, outer, context) in [
        (0x08, NANOSLEEP, WakeContext::Hardirq),
        (0x09, IRQ_ENTRY + 4, WakeContext::Hardirq),
        (0x40, NANOSLEEP, WakeContext::Nmi),
        (0x10, IRQ_ENTRY + 4, WakeContext::Softirq),
    ] {
        let w = wake(flags, outer);
        assert_eq!(w.context, context, "flags {flags:#x}");
        assert!(w.stack.user().is_empty(), "flags {flags:#x}");
        assert_eq!(w.stack.kernel(), [WAKE_UP_PROCESS + 0x10, outer]);
    }
    // irq_exit_rcu is past the entry code's end.
    assert_eq!(wake(0x10, IRQ_EXIT + 4).context, WakeContext::Task);
}

#[test]
fn waking_drops_the_try_to_wake_up_site() {
    let f = formats();
    let mut r = Run::with(&f, false, true, true, MapTgids::with(&[(100, 90)]));
    r.push(1, 500, &waking_raw(&f, 100, 200, "worker"));
    r.push(
        1,
        501,
        &kernel_raw(
            &f,
            100,
            &[
                STACK_SAVER + 0x10,
                WAKING_PROBE + 0x30,
                WAKING_ITER + 0x8,
                TTWU + 0x44,
                WAKE_UP_PROCESS + 0x10,
                NANOSLEEP + 0x99,
            ],
        ),
    );
    r.push(1, 502, &user_raw(&f, 100, 90, &[0x7f0000001000]));
    r.flush(500);
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].time, out[0].cpu), (500, 1));
    assert_eq!(
        *waking_of(&out[0]),
        Waking {
            waker_tid: 100,
            waker_tgid: 90,
            wakee_tid: 200,
            wakee_comm: Comm::from("worker"),
            stack: Callchain::new(
                &[WAKE_UP_PROCESS + 0x10, NANOSLEEP + 0x99],
                &[0x7f0000001000],
            ),
            user_copy: None,
            context: crate::event::WakeContext::Task,
        }
    );

    // Only the tracepoint's site left after trimming: nothing remains.
    r.push(1, 600, &waking_raw(&f, 100, 201, "w2"));
    r.push(1, 601, &kernel_raw(&f, 100, &[WAKING_PROBE + 1, TTWU + 2]));
    r.flush(u64::MAX);
    let out = r.take();
    assert!(waking_of(&out[0]).stack.kernel().is_empty());
    assert_eq!(r.stats(), AssemblerStats::default());
}

#[test]
fn stacks_attach_to_the_same_cpus_event() {
    let f = formats();
    let mut r = Run::new(&f);
    r.push(0, 100, &switch_raw(&f, 10, "ten", 1, 0));
    r.push(1, 101, &waking_raw(&f, 20, 30, "thirty"));
    r.push(1, 102, &kernel_raw(&f, 20, &[TTWU + 1, NANOSLEEP + 1]));
    r.push(
        0,
        103,
        &kernel_raw(&f, 10, &[SCHEDULE_INNER + 5, SCHEDULE + 6]),
    );
    r.push(0, 104, &user_raw(&f, 10, 10, &[0x1000]));
    r.push(1, 105, &user_raw(&f, 20, 20, &[0x2000, 0x2001]));
    assert!(r.take().is_empty());
    r.flush(u64::MAX);
    let mut out = r.take();
    out.sort_by_key(|e| e.cpu);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].cpu, 0);
    let s = switch_of(&out[0]);
    assert_eq!(s.prev_tid, 10);
    assert_eq!(s.stack.kernel(), vec![SCHEDULE_INNER + 4, SCHEDULE + 6]);
    assert_eq!(s.stack.user(), vec![0x1000]);
    assert_eq!(out[1].cpu, 1);
    let w = waking_of(&out[1]);
    assert_eq!((w.waker_tid, w.wakee_tid), (20, 30));
    assert_eq!(w.stack.kernel(), vec![NANOSLEEP + 1]);
    assert_eq!(w.stack.user(), vec![0x2000, 0x2001]);
    assert_eq!(r.stats(), AssemblerStats::default());
}

#[test]
fn orphan_stacks_are_counted_not_attached() {
    let f = formats();
    let mut r = Run::new(&f);
    // No event pending anywhere yet.
    r.push(0, 1, &kernel_raw(&f, 10, &[NANOSLEEP]));
    r.push(0, 2, &user_raw(&f, 10, 10, &[0x1]));
    assert_eq!(r.stats().orphan_stacks, 2);

    r.push(0, 10, &switch_raw(&f, 10, "ten", 1, 0));
    // Another task's stacks.
    r.push(0, 11, &kernel_raw(&f, 11, &[SCHEDULE + 0x11]));
    r.push(0, 12, &user_raw(&f, 11, 11, &[0x11]));
    assert_eq!(r.stats().orphan_stacks, 4);
    // Its own, then second copies.
    r.push(0, 13, &kernel_raw(&f, 10, &[SCHEDULE + 0x10]));
    r.push(0, 14, &kernel_raw(&f, 10, &[SCHEDULE + 0x99]));
    r.push(0, 15, &user_raw(&f, 10, 10, &[0x10]));
    r.push(0, 16, &user_raw(&f, 10, 10, &[0x99]));
    assert_eq!(r.stats().orphan_stacks, 6);
    // A CPU with nothing pending.
    r.push(3, 17, &kernel_raw(&f, 10, &[SCHEDULE + 0x33]));
    assert_eq!(r.stats().orphan_stacks, 7);

    r.flush(u64::MAX);
    let out = r.take();
    assert_eq!(out.len(), 1);
    let s = switch_of(&out[0]);
    assert_eq!(s.stack.kernel(), vec![SCHEDULE + 0xf]);
    assert_eq!(s.stack.user(), vec![0x10]);
    // Completed: later stacks have nothing to belong to.
    r.push(0, 18, &kernel_raw(&f, 10, &[SCHEDULE + 0x10]));
    assert_eq!(
        r.stats(),
        AssemblerStats {
            orphan_stacks: 8,
            ..Default::default()
        }
    );
    r.flush(u64::MAX);
    assert!(r.take().is_empty());
}

#[test]
fn events_complete_on_the_next_event_or_flush() {
    let f = formats();
    let mut r = Run::new(&f);
    r.push(0, 100, &switch_raw(&f, 10, "ten", 1, 11));
    assert!(r.take().is_empty());
    assert_eq!(r.asm.pending_time(0), Some(100));
    assert_eq!(r.asm.pending_time(1), None);
    // The next event on the same CPU completes it, stackless.
    r.push(0, 200, &waking_raw(&f, 11, 12, "twelve"));
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].time, 100);
    assert_eq!(switch_of(&out[0]).stack, Callchain::default());
    assert_eq!(r.asm.pending_time(0), Some(200));
    // Another CPU's event does not.
    r.push(1, 150, &waking_raw(&f, 13, 14, "fourteen"));
    assert!(r.take().is_empty());
    assert_eq!(r.asm.pending_time(1), Some(150));

    r.flush(149);
    assert!(r.take().is_empty());
    assert_eq!(r.asm.pending_time(0), Some(200));
    assert_eq!(r.asm.pending_time(1), Some(150));
    r.flush(150);
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].time, out[0].cpu), (150, 1));
    assert_eq!(r.asm.pending_time(1), None);
    assert_eq!(r.asm.pending_time(0), Some(200));
    r.flush(199);
    assert!(r.take().is_empty());
    r.flush(200);
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].time, out[0].cpu), (200, 0));
    assert_eq!(r.asm.pending_time(0), None);
    r.flush(u64::MAX);
    assert!(r.take().is_empty());
}

#[test]
fn tgid_resolution_order() {
    let f = formats();
    let mut r = Run::with(
        &f,
        false,
        true,
        true,
        MapTgids::with(&[(300, 30), (100, 1), (500, 50)]),
    );
    let mut next_time = 0;
    let mut switch = |r: &mut Run, tid: u32, user_tgid: Option<u32>| -> u32 {
        next_time += 10;
        r.push(0, next_time, &switch_raw(&f, tid, "t", 1, 0));
        if let Some(t) = user_tgid {
            r.push(0, next_time + 1, &user_raw(&f, tid, t, &[0x1]));
        }
        r.flush(u64::MAX);
        let out = r.take();
        assert_eq!(out.len(), 1);
        let s = switch_of(&out[0]);
        assert_eq!(s.prev_tid, tid);
        s.prev_tgid
    };

    // user_stack's tgid first, even where the source would answer.
    assert_eq!(switch(&mut r, 100, Some(10)), 10);
    assert_eq!(r.tgids.asked(100), 0);
    // … and remembered for the thread's later events.
    assert_eq!(switch(&mut r, 100, None), 10);
    assert_eq!(r.tgids.asked(100), 0);
    r.push(0, 1000, &waking_raw(&f, 100, 300, "x"));
    r.flush(u64::MAX);
    assert_eq!(waking_of(&r.take()[0]).waker_tgid, 10);
    assert_eq!(r.tgids.asked(100), 0);

    // Then the source, asked once per thread.
    assert_eq!(switch(&mut r, 300, None), 30);
    assert_eq!(switch(&mut r, 300, None), 30);
    r.push(0, 2000, &waking_raw(&f, 300, 100, "x"));
    r.flush(u64::MAX);
    assert_eq!(waking_of(&r.take()[0]).waker_tgid, 30);
    assert_eq!(r.tgids.asked(300), 1);
    // A later user_stack overrides the source's answer.
    assert_eq!(switch(&mut r, 300, Some(31)), 31);
    assert_eq!(switch(&mut r, 300, None), 31);
    assert_eq!(r.tgids.asked(300), 1);

    // Unknown to both: the thread itself, also asked once.
    assert_eq!(switch(&mut r, 400, None), 400);
    assert_eq!(switch(&mut r, 400, None), 400);
    assert_eq!(r.tgids.asked(400), 1);

    // A user_stack tgid of 0 is no answer.
    assert_eq!(switch(&mut r, 500, Some(0)), 50);

    // The idle task: 0, without asking, whatever the stacks say.
    assert_eq!(switch(&mut r, 0, None), 0);
    assert_eq!(switch(&mut r, 0, Some(0)), 0);
    r.push(0, 3000, &waking_raw(&f, 0, 300, "x"));
    r.flush(u64::MAX);
    let w = r.take();
    assert_eq!(
        (waking_of(&w[0]).waker_tid, waking_of(&w[0]).waker_tgid),
        (0, 0)
    );
    assert_eq!(r.tgids.asked(0), 0);
    assert_eq!(r.stats(), AssemblerStats::default());
}

#[test]
fn disabled_stack_kinds_stay_empty() {
    let f = formats();
    let kernel = [SCHEDULE_INNER + 0x10, NANOSLEEP + 0x10];
    let user = [0x4000, 0x5000];
    for (k, u) in [(false, true), (true, false), (false, false)] {
        let mut r = Run::with(&f, false, k, u, MapTgids::default());
        r.push(0, 1, &switch_raw(&f, 42, "x", 1, 0));
        r.push(0, 2, &kernel_raw(&f, 42, &kernel));
        r.push(0, 3, &user_raw(&f, 42, 41, &user));
        r.push(0, 4, &waking_raw(&f, 42, 43, "y"));
        r.push(0, 5, &kernel_raw(&f, 42, &[TTWU + 1, WAKE_UP_PROCESS + 1]));
        r.push(0, 6, &user_raw(&f, 42, 41, &user));
        r.flush(u64::MAX);
        let out = r.take();
        assert_eq!(out.len(), 2);
        let s = switch_of(&out[0]);
        let w = waking_of(&out[1]);
        if k {
            assert_eq!(
                s.stack.kernel(),
                vec![SCHEDULE_INNER + 0xf, NANOSLEEP + 0x10]
            );
            assert_eq!(w.stack.kernel(), vec![WAKE_UP_PROCESS + 1]);
        } else {
            assert!(s.stack.kernel().is_empty());
            assert!(w.stack.kernel().is_empty());
        }
        if u {
            assert_eq!(s.stack.user(), user);
            assert_eq!(w.stack.user(), user);
        } else {
            assert!(s.stack.user().is_empty());
            assert!(w.stack.user().is_empty());
        }
        // The user_stack's tgid still counts.
        assert_eq!((s.prev_tgid, w.waker_tgid), (41, 41));
        assert_eq!(r.stats(), AssemblerStats::default());
    }
}

#[test]
fn fork_and_exec() {
    let f = formats();
    let mut r = Run::with(
        &f,
        true,
        true,
        true,
        MapTgids::with(&[(100, 100), (101, 100)]),
    );
    // A new thread of process 100, with stacks that must not be orphans.
    r.push(0, 10, &fork_raw(&f, 100, 101));
    r.push(0, 11, &kernel_raw(&f, 100, &[NANOSLEEP]));
    r.push(0, 12, &user_raw(&f, 100, 100, &[0x1]));
    // It execs: it leads a process of its own now.
    r.push(
        1,
        20,
        &exec_raw(&f, 101, b"/usr/local/bin/a-very-long-program-name\0"),
    );
    r.push(1, 21, &kernel_raw(&f, 101, &[NANOSLEEP]));
    r.flush(u64::MAX);
    let mut out = r.take();
    out.sort_by_key(|e| e.time);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].time, out[0].cpu), (10, 0));
    assert_eq!(
        out[0].kind,
        EventKind::Fork(Fork {
            parent_tgid: 100,
            parent_tid: 100,
            tgid: 100,
            tid: 101,
        })
    );
    assert_eq!(r.tgids.asked(101), 1);
    assert_eq!((out[1].time, out[1].cpu), (20, 1));
    let EventKind::Comm(c) = &out[1].kind else {
        panic!("not a comm: {:?}", out[1].kind);
    };
    assert_eq!(
        *c,
        CommChange {
            tgid: 101,
            tid: 101,
            comm: Comm::from("a-very-long-pro"),
            exec: true,
        }
    );
    assert_eq!(c.comm.as_bytes().len(), 15);
    // Later events of the thread: its own process, without asking.
    r.push(1, 30, &switch_raw(&f, 101, "a-very-long-pro", 1, 0));
    r.flush(u64::MAX);
    assert_eq!(switch_of(&r.take()[0]).prev_tgid, 101);
    assert_eq!(r.tgids.asked(101), 1);

    // A bare name, and one without a NUL.
    r.push(0, 40, &exec_raw(&f, 102, b"sh\0"));
    r.push(0, 41, &exec_raw(&f, 103, b"/bin/true"));
    r.flush(u64::MAX);
    let names: Vec<String> = r
        .take()
        .iter()
        .map(|e| match &e.kind {
            EventKind::Comm(c) => c.comm.to_string(),
            other => panic!("not a comm: {other:?}"),
        })
        .collect();
    assert_eq!(names, ["sh", "true"]);
    assert_eq!(r.stats(), AssemblerStats::default());

    // Without ProcessFormats they are foreign.
    let mut r = Run::new(&f);
    r.push(0, 10, &fork_raw(&f, 100, 101));
    r.push(0, 11, &exec_raw(&f, 101, b"/bin/sh\0"));
    r.flush(u64::MAX);
    assert!(r.take().is_empty());
    assert_eq!(r.stats().foreign, 2);
    assert_eq!(r.stats().malformed, 0);
}

#[test]
fn malformed_and_foreign_entries() {
    let f = formats();
    let mut r = Run::new(&f);
    r.push(0, 1, &[]);
    r.push(0, 2, &[0x01]);
    r.push(0, 3, &switch_raw(&f, 1, "x", 1, 0)[..6]);
    assert_eq!(r.stats().malformed, 3);
    // Cut before prev_pid: refused at once, nothing held.
    r.push(0, 4, &switch_raw(&f, 1, "x", 1, 0)[..20]);
    assert_eq!(r.stats().malformed, 4);
    assert_eq!(r.asm.pending_time(0), None);
    // Unknown type.
    let mut raw = switch_raw(&f, 1, "x", 1, 0);
    put_named(&mut raw, &f.switch, "common_type", 999);
    r.push(0, 5, &raw);
    assert_eq!(r.stats().foreign, 1);
    assert_eq!(r.asm.pending_time(0), None);
    // Stack entries too short to say their size or tgid.
    r.push(0, 6, &switch_raw(&f, 1, "x", 1, 0));
    r.push(0, 7, &kernel_raw(&f, 1, &[NANOSLEEP])[..10]);
    r.push(0, 8, &user_raw(&f, 1, 1, &[0x1])[..10]);
    assert_eq!(r.stats().malformed, 6);
    r.flush(u64::MAX);
    let out = r.take();
    assert_eq!(out.len(), 1);
    assert_eq!(switch_of(&out[0]).stack, Callchain::default());
    // A waking cut short is found out when it completes.
    r.push(0, 9, &waking_raw(&f, 1, 2, "y")[..20]);
    r.flush(u64::MAX);
    assert!(r.take().is_empty());
    assert_eq!(
        r.stats(),
        AssemblerStats {
            foreign: 1,
            malformed: 7,
            orphan_stacks: 0
        }
    );
}

#[test]
fn truncated_entries_never_panic() {
    let f = formats();
    let events = [
        switch_raw(&f, 5, "x", 1, 6),
        waking_raw(&f, 5, 6, "y"),
        fork_raw(&f, 5, 6),
        exec_raw(&f, 5, b"/bin/sh\0"),
    ];
    let stacks = [
        kernel_raw(&f, 5, &(1..=12).map(|i| NANOSLEEP + i).collect::<Vec<_>>()),
        user_raw(&f, 5, 5, &[0x1, 0x2, 0x3]),
    ];
    for full in &events {
        for len in 0..=full.len() {
            let mut r = Run::with(&f, true, true, true, MapTgids::default());
            r.push(0, 1, &full[..len]);
            r.push(0, 2, &stacks[0]);
            r.push(0, 3, &stacks[1]);
            r.flush(u64::MAX);
            let s = r.stats();
            // Either an event or a malformed entry; its stacks either
            // attached or orphans.
            assert_eq!(r.take().len() as u64 + s.malformed, 1, "len {len}");
            assert!(s.orphan_stacks == 0 || s.orphan_stacks == 2, "len {len}");
            assert_eq!(s.foreign, 0);
        }
    }
    for full in &stacks {
        for len in 0..=full.len() {
            let mut r = Run::with(&f, true, true, true, MapTgids::default());
            r.push(0, 1, &events[0]);
            r.push(0, 2, &full[..len]);
            r.flush(u64::MAX);
            let s = r.stats();
            assert_eq!(r.take().len(), 1, "len {len}");
            assert!(s.malformed + s.orphan_stacks <= 1, "len {len}");
        }
    }
    // Truncation of the dynamic part of exec.
    let full = exec_raw(&f, 5, b"/bin/sh\0");
    let fixed = f.exec.field("old_pid").unwrap();
    for len in fixed.offset + fixed.size..full.len() {
        let mut r = Run::with(&f, true, true, true, MapTgids::default());
        r.push(0, 1, &full[..len]);
        r.flush(u64::MAX);
        assert!(r.take().is_empty());
        assert_eq!(r.stats().malformed, 1);
    }
}
