//! `--call-graph dwarf` against the real kernel (root): programs built
//! without frame pointers, whose blocked and waking functions only DWARF
//! unwinding finds, checked against what they are known to do.

use crate::common::*;

/// The three functions `dwarfchain` blocks under, outermost first.
const TARGET_CHAIN: [&str; 3] = ["chain_outer", "chain_middle", "chain_inner"];
/// The two functions it wakes under, innermost first.
const WAKER_CHAIN: [&str; 2] = ["wake_inner", "wake_outer"];

/// True when `frames` has a frame matching each of `names`, in this order
/// (the first match of each).
fn in_order_by(frames: &[String], names: &[&str], matches: impl Fn(&str, &str) -> bool) -> bool {
    let pos: Vec<Option<usize>> = names
        .iter()
        .map(|n| frames.iter().position(|f| matches(f, n)))
        .collect();
    pos.iter().all(Option::is_some) && pos.windows(2).all(|w| w[0] < w[1])
}

/// [`in_order_by`] with names matched whole.
fn in_order(frames: &[String], names: &[&str]) -> bool {
    in_order_by(frames, names, |f, n| f == n)
}

/// Runs `dwarfchain K MS` pinned to CPU 0 under `-f CALL_GRAPH -- ...`,
/// retried while the kernel hides an event; returns its folded lines, the
/// workload's own measurement and the tool's stderr.
fn traced_chain(call_graph: &[&str], k: u64, ms: u64) -> (Vec<Folded>, u64, String) {
    let exe = workload("dwarfchain");
    let (k, ms) = (k.to_string(), slowed(ms).to_string());
    let out = with_every_event_reported(
        || {
            let mut args = vec!["-f"];
            args.extend_from_slice(call_graph);
            args.extend(["--", exe.to_str().unwrap(), &k, &ms]);
            run_env(&[("OFFWAKE_PIN_CPU", "0")], &args)
        },
        |o| String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    (parse_folded(&stdout), ground_truth(&err), err)
}

/// The reader's blocks in `read`: its target stack holds `vfs_read`.
fn reads(lines: &[Folded]) -> Vec<&Folded> {
    lines
        .iter()
        .filter(|l| l.target_comm == "blocked" && has(&l.target, "vfs_read"))
        .collect()
}

#[test]
fn dwarf_finds_the_functions_a_frame_pointer_walk_loses() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let (k, ms) = (10, 20);
    let (lines, truth, err) = traced_chain(&["--call-graph", "dwarf"], k, ms);
    let reads = reads(&lines);
    assert!(!reads.is_empty(), "no read blocks:\n{err}");
    let mut woken = 0;
    for l in &reads {
        // Folded target: outermost first, so the chain reads in call order,
        // and glibc's read and the kernel follow it.
        assert!(in_order(&l.target, &TARGET_CHAIN), "{l:?}");
        assert!(
            in_order(&l.target, &["blocked_main", "chain_inner", "vfs_read"]),
            "{l:?}"
        );
        if l.waker_comm == "waker" {
            woken += l.total;
            // Folded waker: innermost first.
            assert!(
                in_order(
                    &l.waker,
                    &["vfs_write", "wake_inner", "wake_outer", "waker_main"]
                ),
                "{l:?}"
            );
        }
    }
    let total: u64 = reads.iter().map(|l| l.total).sum();
    assert_ratio("read total vs the workload's own", total, truth, 0.97, 1.03);
    // Nearly all of it was ended by the waker's write.
    assert!(
        woken * 100 >= total * 97,
        "{woken} of {total} us woken by the writer:\n{err}"
    );
}

#[test]
fn frame_pointers_lose_them() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let (lines, _, err) = traced_chain(&["--call-graph", "fp"], 5, 20);
    let reads = reads(&lines);
    assert!(!reads.is_empty(), "no read blocks:\n{err}");
    for l in &reads {
        for f in TARGET_CHAIN.iter().chain(&WAKER_CHAIN) {
            assert!(
                !has(&l.target, f) && !has(&l.waker, f),
                "{f} found by fp: {l:?}"
            );
        }
    }
}

/// `dwarfchain 20 50`, gated and pinned to CPU 0, traced by
/// `offwake-perf ARGS` in the default format from before its release
/// until it exits (a second: its map, read when its first event is
/// unwound, must still be there, whatever else the machine runs): the reader's blocks in `read` as folded levels (target
/// outermost first, waker innermost first), the workload's own measurement
/// and the tool's stderr.
fn traced_gated(args: &[&str]) -> (Vec<FoldedChain>, u64, String) {
    let mut w = start_gated_env(
        &workload("dwarfchain"),
        &["20", &slowed(50).to_string()],
        &[("OFFWAKE_PIN_CPU", "0")],
    );
    let pid = w.pid().to_string();
    let tracer = start_traced(&with_pid(args, &pid));
    w.go();
    let truth = ground_truth(&w.finish());
    // SAFETY: kill with the pid of a child of this process, not yet
    // waited for, and a valid signal.
    let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "interrupting offwake-perf");
    let (out, err) = tracer.finish();
    let reads = parse_default_chains(&out)
        .iter()
        .map(TextChain::folded)
        .filter(|c| c.target_comm == "blocked" && has(&c.levels[0].blocked, "vfs_read"))
        .collect();
    (reads, truth, err)
}

/// `dwarfchain K MS`, gated and pinned to CPU 0, traced with `args`
/// (`PID` standing for its pid) until the tool's duration ends, as often
/// as [`with_every_event_reported`] needs: the reader's blocks in `read`
/// (default output), the workload's own measurement and the tool's stderr.
fn dwarfchain_reads(k: u64, ms: u64, args: &[&str]) -> (Vec<Block>, u64, String) {
    let (blocks, truth, err) = with_every_event_reported(
        || {
            let mut w = start_gated_env(
                &workload("dwarfchain"),
                &[&k.to_string(), &ms.to_string()],
                &[("OFFWAKE_PIN_CPU", "0")],
            );
            let pid = w.pid().to_string();
            let tracer = start_traced(&with_pid(args, &pid));
            w.go();
            let truth = ground_truth(&w.finish());
            let (out, err) = tracer.finish();
            (parse_default(&out), truth, err)
        },
        |(_, _, err)| err.clone(),
    );
    let reads = blocks
        .into_iter()
        .filter(|b| b.target_comm == "blocked" && has(&b.target, "vfs_read"))
        .collect();
    (reads, truth, err)
}

/// `args` with `PID` replaced by `pid`.
fn with_pid<'a>(args: &[&'a str], pid: &'a str) -> Vec<&'a str> {
    args.iter()
        .map(|&a| if a == "PID" { pid } else { a })
        .collect()
}

/// At least 95% of the reader's time in `read` carries its three functions
/// in order; and, when `waker`, 95% of the time the writer ended carries
/// the writer's two. Each share is of what the tool reported, which must
/// be at least half the workload's own measurement `truth`, so that the
/// checks can fail (the VM's kernel hides some events, which durations
/// are tested against elsewhere).
fn assert_whole_stacks(reads: &[FoldedChain], truth: u64, waker: bool, context: &str) {
    let sum = |pick: &dyn Fn(&Level) -> bool| -> u64 {
        reads
            .iter()
            .filter(|c| pick(&c.levels[0]))
            .map(|c| c.total)
            .sum()
    };
    let total = sum(&|_| true);
    let framed = sum(&|l| in_order(&l.blocked, &TARGET_CHAIN));
    assert!(
        total * 2 >= truth,
        "{total} of {truth} us reported:\n{context}"
    );
    assert!(
        framed * 100 >= total * 95,
        "{framed} of {total} us under the reader's functions:\n{context}"
    );
    if waker {
        let woken = sum(&|l| l.waker_comm == "waker");
        let framed = sum(&|l| l.waker_comm == "waker" && in_order(&l.waker, &WAKER_CHAIN));
        assert!(
            woken * 2 >= total,
            "{woken} of {total} us woken by the writer:\n{context}"
        );
        assert!(
            framed * 100 >= woken * 95,
            "{framed} of {woken} us under the writer's functions:\n{context}"
        );
    }
}

/// With no `--call-graph`, the whole system and `--chain` of a process
/// unwind both halves by DWARF, as `-p` and `-- COMMAND` do (above).
/// (`--cgroup` opens per-CPU events with the same samples as the whole
/// system; its default is checked with the plan's.)
#[test]
fn every_mode_finds_them_by_default() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for args in [&["--backend", "perf"][..], &["--chain", "2", "-p", "PID"]] {
        let (reads, truth, err) = traced_gated(args);
        let context = format!("{args:?}: {reads:#?}\n{err}");
        assert_whole_stacks(&reads, truth, true, &context);
    }
}

/// `-p` of a process that exits while tracing goes on: its stacks were
/// unwound as they came, and its files are named after it is gone.
#[test]
fn a_process_gone_before_tracing_ends_is_unwound_and_named() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    // No --call-graph: dwarf is the default for -p.
    let (reads, truth, err) = dwarfchain_reads(5, slowed(20), &["-p", "PID", "2"]);
    assert!(!reads.is_empty(), "no read blocks:\n{err}");
    for b in &reads {
        // Default output: target innermost first.
        let mut outermost_first = b.target.clone();
        outermost_first.reverse();
        assert!(in_order(&outermost_first, &TARGET_CHAIN), "{b:?}");
        if b.waker_comm == "waker" {
            // Waker outermost first.
            assert!(in_order(&b.waker, &["wake_outer", "wake_inner"]), "{b:?}");
        }
    }
    let total: u64 = reads.iter().map(|b| b.total).sum();
    assert_ratio("read total vs the workload's own", total, truth, 0.97, 1.03);
}

/// Rust built as release builds are (no frame pointers), unwound through
/// std's frames to the thread's start.
#[test]
fn rust_without_frame_pointers_unwinds_through_std() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let exe = workload("rustchain");
    let ms = slowed(20).to_string();
    let out = with_every_event_reported(
        || {
            run_env(
                &[("OFFWAKE_PIN_CPU", "0")],
                &["-f", "--", exe.to_str().unwrap(), "5", &ms],
            )
        },
        |o| String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let lines = parse_folded(&String::from_utf8_lossy(&out.stdout));
    let reads: Vec<&Folded> = lines
        .iter()
        .filter(|l| l.target_comm == "rblocked" && has(&l.target, "unix_stream_recvmsg"))
        .collect();
    assert!(!reads.is_empty(), "no socket reads:\n{err}");
    // std's own names by suffix (their paths move between Rust releases);
    // none of glibc's, which need its debug files, which a test machine
    // may not have.
    let ends = |f: &str, n: &str| f.ends_with(n);
    for l in &reads {
        let target = [
            "::thread_start",
            "__rust_begin_short_backtrace",
            "rustchain::rust_outer",
            "rustchain::rust_inner",
            "as std::io::Read>::read",
            "unix_stream_recvmsg",
        ];
        assert!(in_order_by(&l.target, &target, ends), "{l:?}");
        if l.waker_comm == "rwaker" {
            let waker = [
                "unix_stream_sendmsg",
                "rustchain::rust_poke",
                "__rust_begin_short_backtrace",
                "::thread_start",
            ];
            assert!(in_order_by(&l.waker, &waker, ends), "{l:?}");
        }
    }
    let total: u64 = reads.iter().map(|l| l.total).sum();
    assert_ratio(
        "read total vs the workload's own",
        total,
        ground_truth(&err),
        0.97,
        1.03,
    );
}

/// Under tracefs, `dwarf` (the default of `-p`) reads a blocked thread's
/// stack from the thread when its switch-out reaches the unwinder: asked
/// for, it is accepted, and no notice lowers the default to fp.
#[test]
fn tracefs_accepts_dwarf_and_keeps_the_default() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for args in [&["--call-graph", "dwarf"][..], &[]] {
        let mut all = vec!["--backend", "tracefs"];
        all.extend_from_slice(args);
        all.extend(["-f", "--", "true"]);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(!err.contains("frame pointers only"), "{args:?}: {err}");
    }
}

/// `dwarfchain` under `--backend tracefs -p PID` with the default call
/// graph: its reader waits 50 ms at a time, long enough for each
/// switch-out to reach the unwinder while the reader still waits, so its
/// stack is read from the thread and unwound through the functions a
/// frame-pointer walk loses. (The waker's stack stays a frame-pointer
/// walk: nothing is asserted of it.)
#[test]
fn tracefs_unwinds_a_waiting_threads_stack_from_the_thread() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let (k, ms) = (20u64, slowed(50));
    let duration = (k * ms / 1000 + 3).to_string();
    let (reads, truth, err) =
        dwarfchain_reads(k, ms, &["--backend", "tracefs", "-p", "PID", &duration]);
    assert!(!reads.is_empty(), "no read blocks:\n{err}");
    let total: u64 = reads.iter().map(|b| b.total).sum();
    // Default output: target innermost first.
    let chained: u64 = reads
        .iter()
        .filter(|b| {
            let mut outermost_first = b.target.clone();
            outermost_first.reverse();
            in_order(&outermost_first, &TARGET_CHAIN)
        })
        .map(|b| b.total)
        .sum();
    eprintln!("tracefs: {chained} of {total} us of reads under the chain");
    assert!(
        chained * 100 >= total * 95,
        "{chained} of {total} us under {TARGET_CHAIN:?}:\n{reads:#?}\n{err}"
    );
    assert_ratio("read total vs the workload's own", total, truth, 0.97, 1.03);
}
