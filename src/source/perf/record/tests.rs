//! Tests of record decoding: samples and side-band records built byte by
//! byte, decoded against the fixture formats.

use super::*;
use crate::benchkit::{header, sample_body};
use crate::event::{Exit, Fork, Lost, Mmap, SwitchIn};
use crate::source::perf::wire::SampleId;
use crate::source::tracepoint::{Field, Tracefs};
use crate::sys::open::FileKey;

const ST: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN | SAMPLE_RAW;

fn formats() -> (EventFormat, EventFormat) {
    let t = Tracefs::fixtures();
    (
        t.event_format("sched", "sched_switch").unwrap(),
        t.event_format("sched", "sched_waking").unwrap(),
    )
}

fn decoder(st: u64) -> Decoder {
    let (sw, wk) = formats();
    let mut d = Decoder::new(st, &sw, &wk).unwrap();
    d.add_id(1001, Tracepoint::Switch);
    d.add_id(1002, Tracepoint::Waking);
    d
}

fn put_field(raw: &mut [u8], f: &Field, v: &[u8]) {
    raw[f.offset..f.offset + v.len()].copy_from_slice(v);
}

/// A sched_switch payload built from the fixture's offsets.
fn switch_raw(sw: &EventFormat) -> Vec<u8> {
    let size = sw.fixed_size();
    let mut raw = vec![0u8; size];
    put_field(
        &mut raw,
        sw.field("common_type").unwrap(),
        &(sw.id as u16).to_ne_bytes(),
    );
    put_field(&mut raw, sw.field("prev_comm").unwrap(), b"sleep\0");
    put_field(
        &mut raw,
        sw.field("prev_pid").unwrap(),
        &4242i32.to_ne_bytes(),
    );
    put_field(
        &mut raw,
        sw.field("prev_state").unwrap(),
        &1i64.to_ne_bytes(),
    );
    put_field(&mut raw, sw.field("next_comm").unwrap(), b"swapper/1\0");
    put_field(&mut raw, sw.field("next_pid").unwrap(), &0i32.to_ne_bytes());
    raw
}

fn waking_raw(wk: &EventFormat) -> Vec<u8> {
    let size = wk.fixed_size();
    let mut raw = vec![0u8; size];
    put_field(
        &mut raw,
        wk.field("common_type").unwrap(),
        &(wk.id as u16).to_ne_bytes(),
    );
    put_field(&mut raw, wk.field("comm").unwrap(), b"worker\0");
    put_field(&mut raw, wk.field("pid").unwrap(), &777i32.to_ne_bytes());
    raw
}

fn trailer(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&pid.to_ne_bytes());
    b.extend_from_slice(&tid.to_ne_bytes());
    b.extend_from_slice(&time.to_ne_bytes());
    b.extend_from_slice(&cpu.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&id.to_ne_bytes());
    b
}

const K: u64 = CONTEXT_KERNEL;
const U: u64 = CONTEXT_USER;

/// A per-task switch-out sample (sample_type ST | READ) of thread 4242
/// by event `id` on `cpu` at `time`, whose time_running is `running`.
fn read_switch(id: u64, cpu: u32, time: u64, running: u64, state: i64) -> Vec<u8> {
    let (sw, _) = formats();
    let mut raw = switch_raw(&sw);
    put_field(
        &mut raw,
        sw.field("prev_state").unwrap(),
        &state.to_ne_bytes(),
    );
    let plain = sample_body(id, 4242, 4242, time, cpu, &[], &raw);
    // READ (count, time_running) goes right before the callchain.
    let at = 8 + 8 + 8 + 8;
    let mut body = plain[..at].to_vec();
    body.extend_from_slice(&1u64.to_ne_bytes());
    body.extend_from_slice(&running.to_ne_bytes());
    body.extend_from_slice(&plain[at..]);
    header(RECORD_SAMPLE, 1, &body)
}

fn ran_since(d: &mut Decoder, rec: &[u8]) -> RanSince {
    match d.decode(rec).unwrap().unwrap().kind {
        EventKind::Switch(s) => s.prev_ran_since,
        other => panic!("{other:?}"),
    }
}

/// A per-task switch-out: event id, cpu, time, time_running, prev_state.
type ReadSwitch = (u64, u32, u64, u64, i64);

/// Decodes per-task switch-outs in turn and checks the switch-in each
/// tells (0: it cannot).
fn expect_since(d: &mut Decoder, samples: &[(ReadSwitch, u64)]) {
    for &((id, cpu, time, running, state), want) in samples {
        let want = match want {
            0 => RanSince::Unknown,
            t => RanSince::At(t),
        };
        let got = ran_since(d, &read_switch(id, cpu, time, running, state));
        assert_eq!(got, want, "sample of event {id} at {time}");
    }
}

#[test]
fn per_task_switch_outs_tell_when_their_slice_began() {
    let mut d = decoder(ST | SAMPLE_READ);
    // An inherited event: its count began with the thread.
    expect_since(
        &mut d,
        &[
            ((9, 0, 10_000, 2_000, 1), 8_000),
            ((9, 0, 50_000, 2_500, 1), 49_500),
        ],
    );
    // A loss on CPU 0: the next slice there is unknown.
    d.running().forget_cpu(0);
    expect_since(
        &mut d,
        &[
            ((9, 0, 90_000, 4_000, 1), 0),
            ((9, 0, 99_000, 4_100, 1), 98_900),
        ],
    );
    // An attached event enabled at 1000, while its thread ran.
    d.running().enabled(11, 1_000);
    expect_since(
        &mut d,
        &[((11, 1, 1_500, 600, 1), 0), ((11, 1, 9_000, 700, 1), 8_900)],
    );
    // The final switch-out (X) still tells; the thread is then
    // forgotten, so a later sample of that tid starts afresh.
    expect_since(
        &mut d,
        &[
            ((9, 0, 120_000, 4_200, 16), 119_900),
            ((9, 0, 130_000, 50, 1), 129_950),
        ],
    );
    // Samples without READ say nothing.
    let mut plain = decoder(ST);
    let (sw, _) = formats();
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1001, 4242, 4242, 123_456, 1, &[], &switch_raw(&sw)),
    );
    assert_eq!(ran_since(&mut plain, &rec), RanSince::NotTold);
}

/// A switch-out sample (sample_type ST | REGS_USER | STACK_USER)
/// whose user parts are `regs` (the ABI word, then BP, SP, IP when it
/// is not 0) and `stack` (size, copy and dyn_size when size is not 0).
fn dwarf_switch(regs: &[u64], stack: Option<(&[u8], u64)>) -> Vec<u8> {
    dwarf_switch_with(&[U, 0x401000], regs, stack)
}

/// [`dwarf_switch`] with these callchain entries.
fn dwarf_switch_with(chain: &[u64], regs: &[u64], stack: Option<(&[u8], u64)>) -> Vec<u8> {
    let (sw, _) = formats();
    let mut body = sample_body(1001, 4242, 4242, 9, 0, chain, &switch_raw(&sw));
    for r in regs {
        body.extend_from_slice(&r.to_ne_bytes());
    }
    match stack {
        Some((copy, dyn_size)) => {
            body.extend_from_slice(&(copy.len() as u64).to_ne_bytes());
            body.extend_from_slice(copy);
            body.extend_from_slice(&dyn_size.to_ne_bytes());
        }
        None => body.extend_from_slice(&0u64.to_ne_bytes()),
    }
    header(RECORD_SAMPLE, 1, &body)
}

fn user_copy_of(d: &mut Decoder, rec: &[u8]) -> Result<Option<Box<UserCopy>>> {
    match d.decode(rec)?.map(|e| e.kind) {
        Some(EventKind::Switch(s)) => Ok(s.user_copy),
        other => panic!("{other:?}"),
    }
}

/// Past the budget of copies, a sample keeps its user frame-pointer frames,
/// or without them (the live kernel takes none beside a copy) its sampled
/// instruction, and loses its copy; dropping a copy gives its bytes back.
#[test]
fn copies_past_the_budget_are_cut_and_counted() {
    let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
    d.cut_copies_past(crate::event::copies::CopyBudget::new(100));
    let stack: Vec<u8> = (0..64).collect();
    let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], Some((&stack, 64)));
    let first = user_copy_of(&mut d, &rec)
        .unwrap()
        .expect("within the budget");
    // 64 more bytes would pass 100: cut, the fp chain kept.
    let Some(EventKind::Switch(s)) = d.decode(&rec).unwrap().map(|e| e.kind) else {
        panic!()
    };
    assert!(s.user_copy.is_none());
    assert_eq!(s.stack.user(), [0x401000]);
    let (cut, note) = d.cuts();
    assert_eq!(cut, 1);
    assert!(note.unwrap().contains("thread 4242 (1 over 0.000 s)"));
    // Kernel frames only: the user registers' ip is the user part.
    let kernel_only = dwarf_switch_with(
        &[K, 0xffff_ffff_8100_0000],
        &[2, 0xb0, 0x5000, 0x401234],
        Some((&stack, 64)),
    );
    let Some(EventKind::Switch(s)) = d.decode(&kernel_only).unwrap().map(|e| e.kind) else {
        panic!()
    };
    assert!(s.user_copy.is_none());
    assert_eq!(s.stack.kernel(), [0xffff_ffff_8100_0000]);
    assert_eq!(s.stack.user(), [0x401234]);
    assert_eq!(d.cuts().0, 2);
    drop(first);
    assert!(user_copy_of(&mut d, &rec).unwrap().is_some(), "given back");
    assert_eq!(d.cuts().0, 2);
}

#[test]
fn decodes_user_registers_and_the_stack_copied() {
    let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
    let stack: Vec<u8> = (0..64).collect();
    // The kernel copied 40 of the 64 bytes it made room for.
    let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], Some((&stack, 40)));
    let copy = user_copy_of(&mut d, &rec).unwrap().expect("a copy");
    assert_eq!((copy.bp, copy.sp, copy.ip), (0xb0, 0x5000, 0x401234));
    assert_eq!(&copy.stack[..], &stack[..40]);
    // All of it.
    let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], Some((&stack, 64)));
    assert_eq!(user_copy_of(&mut d, &rec).unwrap().unwrap().stack.len(), 64);
    // Registers but nothing copied (size 0, and no dyn_size after it).
    let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], None);
    assert!(
        user_copy_of(&mut d, &rec)
            .unwrap()
            .unwrap()
            .stack
            .is_empty()
    );
    // No user context (a kernel thread): ABI 0, no registers, no copy.
    let rec = dwarf_switch(&[0], None);
    assert_eq!(user_copy_of(&mut d, &rec).unwrap(), None);
    // The fp chain is still there for what the copy cannot reach.
    let Some(EventKind::Switch(s)) = d.decode(&rec).unwrap().map(|e| e.kind) else {
        panic!()
    };
    assert_eq!(s.stack.user(), [0x401000]);
}

#[test]
fn a_stack_copy_that_lies_about_its_size_is_an_error() {
    let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
    let stack = [7u8; 16];
    // More copied than room was made for.
    let rec = dwarf_switch(&[2, 1, 2, 3], Some((&stack, 17)));
    assert!(user_copy_of(&mut d, &rec).is_err());
    // Cut inside the registers, the copy, or before dyn_size.
    let whole = dwarf_switch(&[2, 1, 2, 3], Some((&stack, 16)));
    for cut in [8, 16, 40, 48] {
        let mut rec = whole[..whole.len() - cut].to_vec();
        let n = rec.len() as u16;
        rec[6..8].copy_from_slice(&n.to_ne_bytes());
        assert!(user_copy_of(&mut d, &rec).is_err(), "cut {cut}");
    }
}

/// Probe ranges whose interrupt entry code holds 0xffffffff81000130.
fn irq_entry_probes() -> crate::kallsyms::machinery::ProbeRanges {
    crate::kallsyms::machinery::ProbeRanges::from_kallsyms(
        "ffffffff81000100 T __irqentry_text_start\n\
         ffffffff81000120 T asm_common_interrupt\n\
         ffffffff81000140 T __irqentry_text_end\n",
    )
}

#[test]
fn an_interrupts_wakeup_has_no_user_stack() {
    let (_, wk) = formats();
    let st = ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER;
    let waking = |flags: u8| {
        let mut raw = waking_raw(&wk);
        put_field(&mut raw, wk.field("common_flags").unwrap(), &[flags]);
        let ips = [K, 0xffffffff813a89c4, 0xffffffff81000130, U, 0x401000];
        let mut body = sample_body(1002, 50, 51, 9, 0, &ips, &raw);
        for r in [2u64, 1, 0x5000, 0x401000] {
            body.extend_from_slice(&r.to_ne_bytes());
        }
        body.extend_from_slice(&8u64.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&8u64.to_ne_bytes());
        header(RECORD_SAMPLE, 1, &body)
    };
    let mut d = decoder(st);
    use crate::event::WakeContext;
    let decode = |d: &mut Decoder, rec: &[u8]| match d.decode(rec).unwrap().unwrap().kind {
        EventKind::Waking(w) => w,
        other => panic!("{other:?}"),
    };
    // Process context (softirq served there included): kept.
    for flags in [0, 0x01, 0x10] {
        let w = decode(&mut d, &waking(flags));
        assert!(w.user_copy.is_some(), "flags {flags:#x}");
        assert_eq!(w.stack.user(), [0x401000]);
        assert_eq!(w.context, WakeContext::Task);
    }
    // Hard interrupt or NMI: the user stack is the interrupted task's.
    for (flags, context) in [
        (0x08, WakeContext::Hardirq),
        (0x09, WakeContext::Hardirq),
        (0x40, WakeContext::Nmi),
    ] {
        let w = decode(&mut d, &waking(flags));
        assert_eq!(w.context, context);
        assert!(w.user_copy.is_none(), "flags {flags:#x}");
        assert!(w.stack.user().is_empty());
        assert_eq!(w.stack.kernel(), [0xffffffff81000130], "kernel part kept");
    }
    // A softirq run on an interrupt's exit: its stack passes the
    // interrupt entry code.
    d.set_probes(irq_entry_probes());
    let w = decode(&mut d, &waking(0x10));
    assert_eq!(w.context, WakeContext::Softirq);
    assert!(w.user_copy.is_none());
    assert!(w.stack.user().is_empty());
    // Back in the task after an interrupt (no interrupt flag), its
    // stack passes the entry code too: kept.
    let w = decode(&mut d, &waking(0));
    assert_eq!(w.context, WakeContext::Task);
    assert_eq!(w.stack.user(), [0x401000]);
    // Frame pointers (no copy) alike: the user frames go.
    let mut fp = decoder(ST);
    for (flags, user) in [(0x08, &[][..]), (0x40, &[]), (0, &[0x401000])] {
        let mut rec = waking(flags);
        // Drop the user regs and stack words (4 + 1 + 1 + 1 words).
        rec.truncate(rec.len() - 7 * 8);
        let n = rec.len() as u16;
        rec[6..8].copy_from_slice(&n.to_ne_bytes());
        assert_eq!(decode(&mut fp, &rec).stack.user(), user, "flags {flags:#x}");
    }
}

#[test]
fn decodes_switch_sample() {
    let (sw, _) = formats();
    let mut d = decoder(ST);
    let ips = [
        K,
        0xffffffff81000010,
        0xffffffff81000020,
        U,
        0x401000,
        0x402000,
    ];
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1001, 4242, 4242, 123_456, 1, &ips, &switch_raw(&sw)),
    );
    let ev = d.decode(&rec).unwrap().unwrap();
    assert_eq!(ev.time, 123_456);
    assert_eq!(ev.cpu, 1);
    let EventKind::Switch(s) = ev.kind else {
        panic!("{:?}", ev.kind)
    };
    assert_eq!(s.prev_tid, 4242);
    assert_eq!(s.prev_tgid, 4242);
    assert_eq!(s.prev_comm.as_str(), "sleep");
    assert_eq!(s.prev_state, 1);
    assert_eq!(s.next_tid, 0);
    assert_eq!(s.next_comm.as_str(), "swapper/1");
    assert_eq!(
        s.stack.kernel(),
        vec![0xffffffff81000010, 0xffffffff81000020]
    );
    assert_eq!(s.stack.user(), vec![0x401000, 0x402000]);
}

#[test]
fn decodes_waking_sample_and_drops_ttwu_frame() {
    let (_, wk) = formats();
    let mut d = decoder(ST);
    let ttwu = 0xffffffff813a89c4;
    let ips = [
        K,
        ttwu,
        0xffffffff81465339,
        0xffffffff81000130,
        U,
        0x7f00_0000_1000,
    ];
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1002, 100, 101, 99, 0, &ips, &waking_raw(&wk)),
    );
    let ev = d.decode(&rec).unwrap().unwrap();
    let EventKind::Waking(w) = ev.kind else {
        panic!()
    };
    assert_eq!((w.waker_tgid, w.waker_tid, w.wakee_tid), (100, 101, 777));
    assert_eq!(w.wakee_comm.as_str(), "worker");
    assert_eq!(
        w.stack.kernel(),
        vec![0xffffffff81465339, 0xffffffff81000130]
    );
    assert_eq!(w.stack.user(), vec![0x7f00_0000_1000]);
}

#[test]
fn unknown_identifier_falls_back_on_common_type() {
    let (sw, wk) = formats();
    let mut d = decoder(ST);
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(5, 1, 1, 1, 0, &[], &switch_raw(&sw)),
    );
    assert!(matches!(
        d.decode(&rec).unwrap().unwrap().kind,
        EventKind::Switch(_)
    ));
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(5, 1, 1, 1, 0, &[], &waking_raw(&wk)),
    );
    assert!(matches!(
        d.decode(&rec).unwrap().unwrap().kind,
        EventKind::Waking(_)
    ));
    // Neither: malformed.
    let mut raw = waking_raw(&wk);
    raw[0] = 0xee;
    raw[1] = 0xee;
    let rec = header(RECORD_SAMPLE, 1, &sample_body(5, 1, 1, 1, 0, &[], &raw));
    assert!(d.decode(&rec).is_err());
}

#[test]
fn without_callchain_sample_type() {
    let (sw, wk) = formats();
    let st = ST & !SAMPLE_CALLCHAIN;
    let mut d = Decoder::new(st, &sw, &wk).unwrap();
    d.add_id(1, Tracepoint::Switch);
    let mut body = sample_body(1, 9, 9, 5, 3, &[], &switch_raw(&sw));
    body.drain(32..40); // remove the `nr` word
    let ev = d.decode(&header(RECORD_SAMPLE, 0, &body)).unwrap().unwrap();
    assert_eq!((ev.time, ev.cpu), (5, 3));
    let EventKind::Switch(s) = ev.kind else {
        panic!()
    };
    assert_eq!(s.prev_tid, 4242);
    assert_eq!(s.stack, Callchain::default());
}

#[test]
fn callchain_splitting() {
    let hv = (-32i64) as u64;
    let guest = (-2048i64) as u64;
    let guest_kernel = (-2176i64) as u64;
    let c = split_callchain(&[K, 1, 2, U, 3, hv, 4, K, 5, guest, guest_kernel, 6, U, 7]);
    assert_eq!(c.kernel(), vec![1, 2, 5]);
    assert_eq!(c.user(), vec![3, 7]);
    // Anything >= PERF_CONTEXT_MAX is a marker, even unknown ones.
    let c = split_callchain(&[K, CONTEXT_MAX, 8, (-1i64) as u64, 9]);
    assert!(c.kernel().is_empty() && c.user().is_empty());
    // No marker: classified by address.
    let c = split_callchain(&[0xffffffff81000000, 0x1000]);
    assert_eq!(c.kernel(), vec![0xffffffff81000000]);
    assert_eq!(c.user(), vec![0x1000]);
    assert_eq!(split_callchain(&[]), Callchain::default());
    // A waking sample with no kernel part keeps its user part intact.
    let (_, wk) = formats();
    let mut d = decoder(ST);
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1002, 1, 1, 1, 0, &[U, 0x10], &waking_raw(&wk)),
    );
    let EventKind::Waking(w) = d.decode(&rec).unwrap().unwrap().kind else {
        panic!()
    };
    assert!(w.stack.kernel().is_empty());
    assert_eq!(w.stack.user(), vec![0x10]);
}

#[test]
fn context_switch_records() {
    let mut d = decoder(ST);
    // Switch-in of 11 (pid 10) on CPU 1; the thread that left was 0.
    let mut b = Vec::new();
    for v in [0u32, 0] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(&trailer(10, 11, 7777, 1, 1001));
    let ev = d
        .decode(&header(RECORD_SWITCH_CPU_WIDE, 0, &b))
        .unwrap()
        .unwrap();
    assert_eq!((ev.time, ev.cpu), (7777, 1));
    assert_eq!(
        ev.kind,
        EventKind::SwitchIn(SwitchIn {
            tid: 11,
            tgid: 10,
            prev_tid: 0
        })
    );
    // Switch-outs are skipped: sched_switch reports them.
    let out = d
        .decode(&header(RECORD_SWITCH_CPU_WIDE, RECORD_MISC_SWITCH_OUT, &b))
        .unwrap();
    assert!(out.is_none());
    // Truncated body: an error, not a panic.
    assert!(
        d.decode(&header(RECORD_SWITCH_CPU_WIDE, 0, &b[..6]))
            .is_err()
    );
}

#[test]
fn per_task_switch_records() {
    let mut d = decoder(ST);
    // A per-task PERF_RECORD_SWITCH has only the sample_id trailer.
    let b = trailer(10, 11, 8888, 0, 1001);
    let ev = d.decode(&header(RECORD_SWITCH, 0, &b)).unwrap().unwrap();
    assert_eq!((ev.time, ev.cpu), (8888, 0));
    assert_eq!(
        ev.kind,
        EventKind::SwitchIn(SwitchIn {
            tid: 11,
            tgid: 10,
            prev_tid: 0
        })
    );
    let out = d
        .decode(&header(RECORD_SWITCH, RECORD_MISC_SWITCH_OUT, &b))
        .unwrap();
    assert!(out.is_none());
    assert!(d.decode(&header(RECORD_SWITCH, 0, &b[..8])).is_err());
}

#[test]
fn side_band_records_use_trailer() {
    let mut d = decoder(ST);
    let tr = trailer(10, 11, 5555, 1, 1001);

    // FORK: pid, ppid, tid, ptid, time
    let mut b = Vec::new();
    for v in [200u32, 100, 201, 101] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(&5554u64.to_ne_bytes());
    b.extend_from_slice(&tr);
    let ev = d.decode(&header(RECORD_FORK, 0, &b)).unwrap().unwrap();
    assert_eq!((ev.time, ev.cpu), (5555, 1));
    assert_eq!(
        ev.kind,
        EventKind::Fork(Fork {
            parent_tgid: 100,
            parent_tid: 101,
            tgid: 200,
            tid: 201
        })
    );
    let ev = d.decode(&header(RECORD_EXIT, 0, &b)).unwrap().unwrap();
    assert_eq!(
        ev.kind,
        EventKind::Exit(Exit {
            tgid: 200,
            tid: 201
        })
    );

    // COMM with exec flag; name padded to 8 bytes.
    let mut b = Vec::new();
    b.extend_from_slice(&300u32.to_ne_bytes());
    b.extend_from_slice(&300u32.to_ne_bytes());
    b.extend_from_slice(b"sleep\0\0\0");
    b.extend_from_slice(&tr);
    let ev = d
        .decode(&header(RECORD_COMM, RECORD_MISC_COMM_EXEC, &b))
        .unwrap()
        .unwrap();
    let EventKind::Comm(c) = ev.kind else {
        panic!()
    };
    assert_eq!((c.tgid, c.tid, c.exec), (300, 300, true));
    assert_eq!(c.comm.as_str(), "sleep");
    let ev = d.decode(&header(RECORD_COMM, 0, &b)).unwrap().unwrap();
    let EventKind::Comm(c) = ev.kind else {
        panic!()
    };
    assert!(!c.exec);

    // MMAP2
    let mut b = Vec::new();
    b.extend_from_slice(&300u32.to_ne_bytes());
    b.extend_from_slice(&301u32.to_ne_bytes());
    for v in [0x5555_0000u64, 0x2000, 0x1000] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(&8u32.to_ne_bytes());
    b.extend_from_slice(&1u32.to_ne_bytes());
    b.extend_from_slice(&4242u64.to_ne_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b.extend_from_slice(&((libc::PROT_READ | libc::PROT_EXEC) as u32).to_ne_bytes());
    b.extend_from_slice(&(libc::MAP_PRIVATE as u32).to_ne_bytes());
    b.extend_from_slice(b"/usr/bin/sleep\0\0");
    b.extend_from_slice(&tr);
    let ev = d.decode(&header(RECORD_MMAP2, 2, &b)).unwrap().unwrap();
    assert_eq!(ev.time, 5555);
    assert_eq!(
        ev.kind,
        EventKind::Mmap(Mmap {
            tgid: 300,
            tid: 301,
            start: 0x5555_0000,
            len: 0x2000,
            pgoff: 0x1000,
            path: "/usr/bin/sleep".into(),
            executable: true,
            file: Some(FileKey {
                dev: libc::makedev(8, 1),
                ino: 4242,
            }),
            build_id: None,
        })
    );
    // With a build-id in place of device and inode (--buildid-mmap).
    let mut with_id = b.clone();
    with_id[8 + 24..8 + 24 + 24].copy_from_slice(&{
        let mut ids = [0u8; 24];
        ids[0] = 20;
        for (i, x) in ids[4..].iter_mut().enumerate() {
            *x = i as u8 + 1;
        }
        ids
    });
    let misc = 2 | RECORD_MISC_MMAP_BUILD_ID;
    let EventKind::Mmap(m) = d
        .decode(&header(RECORD_MMAP2, misc, &with_id))
        .unwrap()
        .unwrap()
        .kind
    else {
        panic!()
    };
    assert_eq!(m.file, None);
    assert_eq!(
        m.build_id.as_deref(),
        Some(&(1..=20).collect::<Vec<u8>>()[..])
    );
    // Non-executable MMAP2.
    let prot_at = 8 + 24 + 24;
    b[prot_at..prot_at + 4].copy_from_slice(&(libc::PROT_READ as u32).to_ne_bytes());
    let EventKind::Mmap(m) = d
        .decode(&header(RECORD_MMAP2, 2, &b))
        .unwrap()
        .unwrap()
        .kind
    else {
        panic!()
    };
    assert!(!m.executable);

    // Old-style MMAP: always executable.
    let mut b = Vec::new();
    b.extend_from_slice(&300u32.to_ne_bytes());
    b.extend_from_slice(&300u32.to_ne_bytes());
    for v in [0x1000u64, 0x1000, 0] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(b"[vdso]\0\0");
    b.extend_from_slice(&tr);
    let EventKind::Mmap(m) = d.decode(&header(RECORD_MMAP, 2, &b)).unwrap().unwrap().kind else {
        panic!()
    };
    assert_eq!(m.path, "[vdso]");
    assert!(m.executable);
}

#[test]
fn lost_records() {
    let mut d = decoder(ST);
    let tr = trailer(0, 0, 777, 3, 1001);
    let mut b = Vec::new();
    b.extend_from_slice(&1001u64.to_ne_bytes());
    b.extend_from_slice(&42u64.to_ne_bytes());
    b.extend_from_slice(&tr);
    let ev = d.decode(&header(RECORD_LOST, 0, &b)).unwrap().unwrap();
    assert_eq!((ev.time, ev.cpu), (777, 3));
    assert_eq!(
        ev.kind,
        EventKind::Lost(Lost {
            records: 42,
            until: 777
        })
    );

    let mut b = Vec::new();
    b.extend_from_slice(&7u64.to_ne_bytes());
    b.extend_from_slice(&tr);
    let ev = d
        .decode(&header(RECORD_LOST_SAMPLES, 0, &b))
        .unwrap()
        .unwrap();
    assert_eq!(
        ev.kind,
        EventKind::Lost(Lost {
            records: 7,
            until: 777
        })
    );
}

#[test]
fn trailer_layout_without_identifier() {
    // TID|TIME|ID|CPU: pid,tid, time, id, cpu,res.
    let (sw, wk) = formats();
    let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_CPU | SAMPLE_RAW;
    let d = Decoder::new(st, &sw, &wk).unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&[0xab; 16]); // some record body
    for v in [5u32, 6] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(&1234u64.to_ne_bytes());
    b.extend_from_slice(&99u64.to_ne_bytes());
    b.extend_from_slice(&2u32.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    let t = d.parser.parse_trailer(&b).unwrap();
    assert_eq!(
        t,
        SampleId {
            pid: 5,
            tid: 6,
            time: 1234,
            cpu: 2,
            id: Some(99)
        }
    );
}

#[test]
fn unknown_records_are_skipped() {
    let mut d = decoder(ST);
    let throttle = header(5, 0, &[0u8; 24 + 32]);
    assert_eq!(d.decode(&throttle).unwrap(), None);
    assert_eq!(d.decode(&header(0xffff, 0, &[])).unwrap(), None);
}

#[test]
fn truncated_records_are_errors_not_panics() {
    let (sw, wk) = formats();
    let mut d = decoder(ST);
    let ips = [K, 0xffffffff81000010, U, 0x401000];
    let full = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1001, 1, 1, 1, 0, &ips, &switch_raw(&sw)),
    );
    assert!(d.decode(&full).is_ok());
    for cut in 0..full.len() {
        let mut r = full[..cut].to_vec();
        // Keep the header consistent with the cut length when possible,
        // so the body walk (not just the size check) is exercised.
        if r.len() >= 8 {
            let n = r.len() as u16;
            r[6..8].copy_from_slice(&n.to_ne_bytes());
        }
        assert!(d.decode(&r).is_err(), "cut at {cut}");
    }
    // Absurd callchain length.
    let mut body = sample_body(1001, 1, 1, 1, 0, &[], &switch_raw(&sw));
    body[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
    assert!(d.decode(&header(RECORD_SAMPLE, 0, &body)).is_err());
    // RAW payload shorter than the fields.
    let body = sample_body(1002, 1, 1, 1, 0, &[], &waking_raw(&wk)[..20]);
    assert!(d.decode(&header(RECORD_SAMPLE, 0, &body)).is_err());
    // Side-band records too short for their trailer or body.
    for ty in [
        RECORD_FORK,
        RECORD_EXIT,
        RECORD_COMM,
        RECORD_MMAP,
        RECORD_MMAP2,
        RECORD_LOST,
        RECORD_LOST_SAMPLES,
    ] {
        assert!(d.decode(&header(ty, 0, &[0u8; 8])).is_err(), "type {ty}");
        assert!(d.decode(&header(ty, 0, &[0u8; 32])).is_err(), "type {ty}");
    }
    // Header size disagreeing with the slice.
    let mut r = full.clone();
    r[6..8].copy_from_slice(&8u16.to_ne_bytes());
    assert!(d.decode(&r).is_err());
}

#[test]
fn decoder_rejects_bad_sample_types() {
    let (sw, wk) = formats();
    // PERF_SAMPLE_BRANCH_STACK: not walked.
    assert!(Decoder::new(ST | (1 << 11), &sw, &wk).is_err());
    assert!(Decoder::new(SAMPLE_TID | SAMPLE_TIME, &sw, &wk).is_err());
    assert!(Decoder::new(ST, &sw, &sw).is_err());
    assert!(Decoder::new(ST, &wk, &sw).is_err()); // fields missing
}

/// An interrupt's kernel stack is its own up to the interrupt entry code:
/// the frames past it are the interrupted task's.
#[test]
fn an_interrupts_kernel_stack_ends_at_the_interrupt_entry() {
    let (_, wk) = formats();
    let mut raw = waking_raw(&wk);
    put_field(&mut raw, wk.field("common_flags").unwrap(), &[0x08]);
    let ips = [
        K,
        0xffffffff813a89c4,
        0xffffffff81000130,
        0xffffffff81000500,
        U,
        0x401000,
    ];
    let rec = header(
        RECORD_SAMPLE,
        1,
        &sample_body(1002, 50, 51, 9, 0, &ips, &raw),
    );
    let mut d = decoder(ST);
    d.set_probes(irq_entry_probes());
    let EventKind::Waking(w) = d.decode(&rec).unwrap().unwrap().kind else {
        panic!("not a wakeup")
    };
    assert_eq!(w.stack.kernel(), [0xffffffff81000130]);
    assert!(w.stack.user().is_empty());
}

/// A sample whose stack holds the words an earlier walk read takes that
/// walk's frames instead of a copy; one whose words differ is copied.
#[test]
fn remembered_walks_replace_copies() {
    use crate::unwind::memo::{Memo, Start};
    let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
    let memo = Memo::new();
    d.recall_from(memo.clone());
    let stack: Vec<u8> = (0..64).collect();
    let word = u64::from_ne_bytes(stack[8..16].try_into().unwrap());
    let start = Start {
        tgid: 4242,
        ip: 0x401234,
        sp: 0x5000,
        bp: 0xb0,
    };
    let regs = [2, 0xb0, 0x5000, 0x401234];
    let kernel = [K, 0xffff_ffff_8100_0000];
    assert!(
        user_copy_of(
            &mut d,
            &dwarf_switch_with(&kernel, &regs, Some((&stack, 64)))
        )
        .unwrap()
        .is_some(),
        "nothing remembered yet"
    );
    memo.remember(start, 0, &[(8, word)], &[0x401234, 0x402000], None);
    let rec = dwarf_switch_with(&kernel, &regs, Some((&stack, 64)));
    let Some(EventKind::Switch(s)) = d.decode(&rec).unwrap().map(|e| e.kind) else {
        panic!()
    };
    assert!(s.user_copy.is_none());
    assert_eq!(s.stack.kernel(), [0xffff_ffff_8100_0000]);
    assert_eq!(s.stack.user(), [0x401234, 0x402000]);
    // The word read differs, or was not copied (dyn_size): copied.
    let mut other = stack.clone();
    other[9] ^= 1;
    let rec = dwarf_switch_with(&kernel, &regs, Some((&other, 64)));
    assert!(user_copy_of(&mut d, &rec).unwrap().is_some());
    let rec = dwarf_switch_with(&kernel, &regs, Some((&stack, 8)));
    assert!(user_copy_of(&mut d, &rec).unwrap().is_some());
    let s = memo.stats();
    assert_eq!((s.hits, s.misses), (1, 3));
}

/// A walk that ran off its copy is recalled for a wakeup, whose stack
/// nothing reads further, and not for a switch-out, whose thread may
/// still be read on.
#[test]
fn walks_cut_by_their_copy_are_recalled_for_wakeups_only() {
    use crate::unwind::memo::{Memo, Start};
    let (_, wk) = formats();
    let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
    let memo = Memo::new();
    d.recall_from(memo.clone());
    let (regs, stack) = ([2u64, 1, 0x5000, 0x401000], [0u8; 8]);
    let mut body = sample_body(
        1002,
        50,
        51,
        9,
        0,
        &[K, 0xffffffff81000130],
        &waking_raw(&wk),
    );
    for r in regs {
        body.extend_from_slice(&r.to_ne_bytes());
    }
    body.extend_from_slice(&8u64.to_ne_bytes());
    body.extend_from_slice(&stack);
    body.extend_from_slice(&8u64.to_ne_bytes());
    let waking = header(RECORD_SAMPLE, 1, &body);
    for tgid in [50, 4242] {
        let start = Start {
            tgid,
            ip: 0x401000,
            sp: 0x5000,
            bp: 1,
        };
        memo.remember(start, 0, &[(0, 0)], &[0x401000, 0x402000], Some(8));
    }
    let Some(EventKind::Waking(w)) = d.decode(&waking).unwrap().map(|e| e.kind) else {
        panic!()
    };
    assert!(w.user_copy.is_none());
    assert_eq!(w.stack.user(), [0x401000, 0x402000]);
    let switch = dwarf_switch_with(&[K, 0xffff_ffff_8100_0000], &regs, Some((&stack, 8)));
    assert!(user_copy_of(&mut d, &switch).unwrap().is_some());
}

/// A `cpu-clock` sample (its RAW part holds 4 zero bytes, as the kernel
/// writes for an event without a payload) of thread `tid` by event `id`.
fn clock_sample(id: u64, tid: u32, time: u64) -> Vec<u8> {
    let ips = [K, 0xffff_ffff_8100_0010, U, 0x401000, 0x402000];
    header(
        RECORD_SAMPLE,
        1,
        &sample_body(id, 50, tid, time, 0, &ips, &[0; 4]),
    )
}

/// [`clock_sample`] on `cpu` with `time_running` (sample_type ST | READ).
fn read_clock_sample(id: u64, tid: u32, cpu: u32, time: u64, running: u64) -> Vec<u8> {
    let ips = [K, 0xffff_ffff_8100_0010, U, 0x401000];
    let plain = sample_body(id, 50, tid, time, cpu, &ips, &[0; 4]);
    let at = 8 + 8 + 8 + 8;
    let mut body = plain[..at].to_vec();
    body.extend_from_slice(&running.to_ne_bytes());
    body.extend_from_slice(&running.to_ne_bytes());
    body.extend_from_slice(&plain[at..]);
    header(RECORD_SAMPLE, 1, &body)
}

/// A thread's exit record, as event 1001 writes it.
fn exit_record(tid: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [50u32, 1, tid, 1] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    b.extend_from_slice(&1u64.to_ne_bytes());
    b.extend_from_slice(&trailer(50, tid, 1, 0, 1001));
    header(RECORD_EXIT, 0, &b)
}

#[test]
fn clock_samples_are_on_cpu_samples_kept_from_one_event_per_thread() {
    let mut d = decoder(ST);
    // Thread 51 attached (event 7), and thread 52 attached (event 8)
    // after inheriting 51's events.
    d.add_clock(7, 51, 5_025_125);
    d.add_clock(8, 52, 5_025_125);
    let mut kept = |rec: Vec<u8>| d.decode(&rec).unwrap();
    let ev = kept(clock_sample(7, 51, 10)).expect("an on-CPU sample");
    let EventKind::OnCpu(s) = ev.kind else {
        panic!("{ev:?}")
    };
    assert_eq!(
        (s.tid, s.tgid, s.cpu_ns, s.counted),
        (51, 50, 5_025_125, false)
    );
    assert_eq!(s.stack.kernel(), [0xffff_ffff_8100_0010]);
    assert_eq!(s.stack.user(), [0x401000, 0x402000]);
    // 52's first sample came through 51's event: its own event's are
    // dropped, not counted twice.
    assert!(kept(clock_sample(7, 52, 20)).is_some());
    assert!(kept(clock_sample(8, 52, 30)).is_none());
    assert!(kept(clock_sample(7, 52, 40)).is_some());
    // 51 exits, and with it the copy 52 inherited: 52's own event counts.
    assert!(matches!(
        kept(exit_record(51)).map(|e| e.kind),
        Some(EventKind::Exit(_))
    ));
    assert!(kept(clock_sample(8, 52, 50)).is_some());
    assert!(kept(clock_sample(7, 52, 60)).is_none());
}

#[test]
fn an_on_cpu_sample_stands_for_the_cpu_time_its_stream_counted_since_the_last() {
    let mut d = decoder(ST | SAMPLE_READ);
    d.add_clock(7, 51, 1_000_000);
    d.add_clock(9, 0, 1_000_000);
    let mut weight = |rec: Vec<u8>| match d.decode(&rec).unwrap().map(|e| e.kind) {
        Some(EventKind::OnCpu(s)) => (s.cpu_ns, s.counted),
        other => panic!("{other:?}"),
    };
    // A thread's event on CPU 0: all it counted, then its growth, however
    // late the timer fired (3.5 periods between two samples).
    assert_eq!(
        weight(read_clock_sample(7, 51, 0, 10, 1_000_100)),
        (1_000_100, true)
    );
    assert_eq!(
        weight(read_clock_sample(7, 51, 0, 20, 4_500_100)),
        (3_500_000, true)
    );
    // Its event on CPU 1 is a stream of its own.
    assert_eq!(
        weight(read_clock_sample(7, 51, 1, 30, 1_200_000)),
        (1_200_000, true)
    );
    // A CPU's event: one stream whatever thread it samples.
    assert_eq!(
        weight(read_clock_sample(9, 51, 1, 40, 1_000_000)),
        (1_000_000, true)
    );
    assert_eq!(
        weight(read_clock_sample(9, 52, 1, 50, 2_000_000)),
        (1_000_000, true)
    );
    // A loss on CPU 0: the next sample there stands for the period.
    d.lost_on(0);
    let mut weight = |rec: Vec<u8>| match d.decode(&rec).unwrap().map(|e| e.kind) {
        Some(EventKind::OnCpu(s)) => (s.cpu_ns, s.counted),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        weight(read_clock_sample(7, 51, 0, 60, 9_000_000)),
        (1_000_000, false)
    );
    assert_eq!(
        weight(read_clock_sample(7, 51, 0, 70, 10_000_000)),
        (1_000_000, true)
    );
    // A count that went back (never from the kernel): the period.
    assert_eq!(
        weight(read_clock_sample(7, 51, 0, 80, 5)),
        (1_000_000, false)
    );
    // The thread exits: a new thread with its id starts afresh.
    assert!(d.decode(&exit_record(51)).unwrap().is_some());
    let Some(EventKind::OnCpu(s)) = d
        .decode(&read_clock_sample(7, 51, 0, 90, 700_000))
        .unwrap()
        .map(|e| e.kind)
    else {
        panic!()
    };
    assert_eq!((s.cpu_ns, s.counted), (700_000, true));
}
