//! `--chain N`: wakeup chains, checked against workloads whose waits are
//! known by design (tests/workloads/chain3.c, chainloop.c, slowwaker.c,
//! napproc.c): which thread each level names, in which stack, where the
//! chain ends, and that every line still counts the target's own time,
//! as the workload measures it.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::common::*;

/// Each workload runs on CPU 0, where its waits are only what it designed
/// while no other of them runs there (two spin at real-time priority, and
/// the recording is system-wide): one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// chain3's threads.
const STAGES: [&str; 3] = ["stage_a", "stage_b", "stage_c"];

/// Part of the tool's warning of records lost, or maybe lost.
const LOST: &str = "that could span a loss";

const INTERRUPTS: [&str; 3] = ["[hardirq]", "[softirq]", "[nmi]"];

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether `frames` hold each of `names`, in that order.
fn in_order(frames: &[String], names: &[&str]) -> bool {
    let mut it = frames.iter();
    names.iter().all(|n| it.any(|f| f == n))
}

/// A workload's own measurement `key=<n>` from its stderr.
fn measured(stderr: &str, key: &str) -> u64 {
    let prefix = format!("{key}=");
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key}= line in:\n{stderr}"))
}

/// Why a run cannot be checked in full, if it cannot: the tool's note of
/// an interval whose end the kernel did not report (see
/// [`with_every_event_reported`]), or what [`chain_hidden`] finds.
fn hidden(stderr: &str, theirs: &str, lines: &[FoldedChain], comms: &[&str]) -> Option<String> {
    stderr
        .lines()
        .find(|l| UNREPORTED.iter().any(|u| l.contains(u)))
        .map(str::to_string)
        .or_else(|| chain_hidden(stderr, theirs, lines, comms))
}

/// What a run's chains of `comms` miss: a level past the first with no
/// waker (every wait the workloads make below the first level is ended by
/// a wakeup, a timer's or a thread's: one missing was hidden by the
/// kernel, and no note says so, the thread being no target); or records
/// lost (a machine too busy for the rings) where they cost the first of
/// `comms` some of the time the workload measured (`theirs`, its stderr),
/// or a level.
fn chain_hidden(
    stderr: &str,
    theirs: &str,
    lines: &[FoldedChain],
    comms: &[&str],
) -> Option<String> {
    let mine = || {
        lines
            .iter()
            .filter(|l| comms.contains(&l.target_comm.as_str()))
    };
    if let Some(l) = mine().find(|l| l.levels[1..].iter().any(|lv| lv.waker_comm.is_empty())) {
        return Some(format!("a level with no wakeup: {l:?}"));
    }
    let lost = stderr.lines().find(|l| l.contains(LOST))?;
    let first: u64 = mine()
        .filter(|l| l.target_comm == comms[0])
        .map(|l| l.total)
        .sum();
    let short = first * 100 < ground_truth(theirs) * 97;
    let marked = mine().any(|l| l.end.as_deref() == Some("[records lost]"));
    (short || marked).then(|| lost.to_string())
}

/// Runs `attempt` up to three times, until `missing` finds no event
/// missing from its result, and returns that result; fails when every
/// attempt misses one.
fn retried<T>(mut attempt: impl FnMut() -> T, missing: impl Fn(&T) -> Option<String>) -> T {
    let mut seen = Vec::new();
    for _ in 0..3 {
        let result = attempt();
        match missing(&result) {
            None => return result,
            Some(why) => {
                eprintln!("retrying: {why}");
                seen.push(why);
            }
        }
    }
    panic!("events were missing in all three attempts: {seen:#?}");
}

/// `offwake-perf ARGS -f -- WORKLOAD WARGS` with every thread on CPU 0,
/// retried while the kernel hides an event of the chains of `comms`:
/// (stdout, stderr), the workload's stderr in the latter.
fn folded_run(args: &[&str], name: &str, wargs: &[u64], comms: &[&str]) -> (String, String) {
    let exe = workload(name);
    let wargs: Vec<String> = wargs.iter().map(u64::to_string).collect();
    retried(
        || {
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["-f", "--", exe.to_str().unwrap()]);
            all.extend(wargs.iter().map(String::as_str));
            let out = run_env(&[("OFFWAKE_PIN_CPU", "0")], &all);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert!(out.status.success(), "{}: {stderr}", out.status);
            (stdout, stderr)
        },
        |(out, err)| hidden(err, err, &parse_chains(out), comms),
    )
}

/// `name` gated, traced by `offwake-perf ARGS -p PID` in the default
/// format once it is `ready` (given its pid), until it exits, retried as
/// [`folded_run`] is: (the chains, the tool's stdout after the header and
/// stderr, the workload's stderr).
fn gated_text_run(
    args: &[&str],
    name: &str,
    wargs: &[u64],
    comms: &[&str],
    ready: impl Fn(u32),
) -> (Vec<TextChain>, String, String) {
    let wargs: Vec<String> = wargs.iter().map(u64::to_string).collect();
    let wargs: Vec<&str> = wargs.iter().map(String::as_str).collect();
    let (chains, out, err, theirs) = retried(
        || {
            let mut w = start_gated_env(&workload(name), &wargs, &[("OFFWAKE_PIN_CPU", "0")]);
            ready(w.pid());
            let pid = w.pid().to_string();
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["-p", &pid]);
            let tracer = start_traced(&all);
            w.go();
            let theirs = w.finish();
            // SAFETY: kill with the pid of a child of this process, not
            // yet waited for, and a valid signal.
            let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
            assert_eq!(rc, 0, "interrupting offwake-perf");
            let (out, err) = tracer.finish();
            (parse_default_chains(&out), out, err, theirs)
        },
        |(chains, _, err, theirs)| {
            let lines: Vec<FoldedChain> = chains.iter().map(TextChain::folded).collect();
            hidden(err, theirs, &lines, comms)
        },
    );
    (chains, format!("{out}\n{err}"), theirs)
}

/// The lines of `comm` blocked in `func`.
fn waits<'a>(lines: &'a [FoldedChain], comm: &str, func: &str) -> Vec<&'a FoldedChain> {
    lines
        .iter()
        .filter(|l| l.target_comm == comm && has(&l.levels[0].blocked, func))
        .collect()
}

fn sum(lines: &[&FoldedChain]) -> u64 {
    lines.iter().map(|l| l.total).sum()
}

/// A level woken by an interrupt: its comm, its timer's kernel stack,
/// and none of the user frames of the task it landed in.
fn by_timer(level: &Level) -> bool {
    INTERRUPTS.contains(&level.waker_comm.as_str())
        && has(&level.waker, "hrtimer_wakeup")
        && !level.waker.iter().any(|f| f.ends_with("_main"))
}

/// chain3's levels: stage_a's read woken by stage_b's write; stage_b's
/// futex wait woken by stage_c's release; stage_c's nap woken by its
/// timer. Blocked frames outermost first, waker frames innermost first.
fn pipeline_level(k: usize, level: &Level) -> bool {
    let (b, w) = (&level.blocked, &level.waker);
    match k {
        1 => {
            in_order(b, &["a_main", "a_wait", "vfs_read", "schedule"])
                && level.waker_comm == "stage_b"
                && in_order(w, &["vfs_write", "b_poke", "b_main"])
        }
        2 => {
            in_order(b, &["b_main", "b_wait", "futex_wait", "schedule"])
                && level.waker_comm == "stage_c"
                && in_order(w, &["futex_wake", "c_release", "c_main"])
        }
        3 => in_order(b, &["c_main", "c_nap", "do_nanosleep", "schedule"]) && by_timer(level),
        _ => false,
    }
}

/// The whole pipeline, cut at `depth` levels (at most 3, where the timer
/// ends it), with no marker.
fn is_pipeline(c: &FoldedChain, depth: usize) -> bool {
    c.levels.len() == depth.min(3)
        && c.end.is_none()
        && c.levels
            .iter()
            .enumerate()
            .all(|(i, l)| pipeline_level(i + 1, l))
}

/// Asserts that `got` us are within 3% of the workload's own measurement
/// `expected`, saying what the tool printed when not.
fn assert_near(what: &str, got: u64, expected: u64, context: &str) {
    let ratio = got as f64 / expected as f64;
    assert!(
        (0.97..=1.03).contains(&ratio),
        "{what}: {got} us vs {expected} us measured (ratio {ratio:.4}):\n{context}"
    );
}

/// Asserts that the lines `pick` keeps of `lines` hold at least 97% of
/// `expected` us: the workload's own measurement of the time whose chain
/// it knows (not 0, so that the check can fail).
fn assert_explained(
    what: &str,
    lines: &[&FoldedChain],
    pick: impl Fn(&FoldedChain) -> bool,
    expected: u64,
    context: &str,
) {
    let got: u64 = lines.iter().filter(|l| pick(l)).map(|l| l.total).sum();
    assert!(expected > 0, "{what}: no time to explain\n{context}");
    assert!(
        got * 100 >= expected * 97,
        "{what}: {got} us carry the chain, of {expected} us that should:\n{context}"
    );
}

/// stage_a's waits in a `--chain depth` report of chain3, which printed
/// `stderr`: they total the workload's own measurement; all but those of
/// rounds in which b or c was preempted (the workload counts them) carry
/// the whole pipeline; and no line carries a level that is not the
/// pipeline's.
fn check_pipeline(lines: &[FoldedChain], depth: usize, stderr: &str, context: &str) {
    assert_eq!(measured(stderr, "fifo"), 1, "not SCHED_FIFO: {context}");
    let a = waits(lines, "stage_a", "a_wait");
    let truth = ground_truth(stderr);
    assert_near("stage_a's waits", sum(&a), truth, context);
    let expected = if depth == 1 {
        truth
    } else {
        measured(stderr, "clean_us")
    };
    let whole = |l: &FoldedChain| is_pipeline(l, depth);
    assert_explained("stage_a", &a, whole, expected, context);
    for l in &a {
        assert!(l.levels.len() <= depth.min(3), "{l:#?}\n{context}");
        for (i, level) in l.levels.iter().enumerate().skip(1) {
            assert!(pipeline_level(i + 1, level), "level {}: {l:#?}", i + 1);
        }
    }
}

/// stage_b's and stage_c's own waits in the same report: each explained
/// one level less deep than stage_a's (b's but in rounds in which c was
/// preempted), and as long as they measured.
fn check_lower_stages(lines: &[FoldedChain], depth: usize, stderr: &str, context: &str) {
    for (comm, func, key, clean, levels) in [
        ("stage_b", "b_wait", "b_blocked_us", "b_clean_us", 2usize),
        ("stage_c", "c_nap", "c_blocked_us", "c_blocked_us", 1),
    ] {
        let mine = waits(lines, comm, func);
        assert_near(comm, sum(&mine), measured(stderr, key), context);
        let first = 4 - levels;
        let whole = |l: &FoldedChain| {
            l.levels.len() == levels.min(depth)
                && l.end.is_none()
                && l.levels
                    .iter()
                    .enumerate()
                    .all(|(i, level)| pipeline_level(first + i, level))
        };
        assert_explained(comm, &mine, whole, measured(stderr, clean), context);
    }
}

/// Nothing follows an interrupt's wakeup in any line: no level, and no
/// marker.
fn check_interrupts_end_chains(lines: &[FoldedChain], context: &str) {
    for l in lines {
        let (last, before) = l.levels.split_last().expect("a line with no level");
        for level in before {
            assert!(
                !INTERRUPTS.contains(&level.waker_comm.as_str()),
                "a chain goes on past an interrupt: {l:#?}\n{context}"
            );
        }
        if INTERRUPTS.contains(&last.waker_comm.as_str()) {
            assert!(l.end.is_none(), "a marker after an interrupt: {l:#?}");
        }
    }
}

/// The folded parser on literal lines (no root needed): every level,
/// markers, an empty waker, and what is no chain.
#[test]
fn parse_chain_reads_every_level() {
    let line = "A;main;a_wait;read;schedule;--;pipe_write;b_poke;main;B;--;\
                main;b_wait;futex_wait;schedule;--;futex_wake;c_unlock;main;C;--;\
                main;c_nap;do_nanosleep;schedule;--;hrtimer_wakeup;[hardirq] 12345";
    let c = parse_chain(line);
    assert_eq!(c.target_comm, "A");
    assert_eq!(c.total, 12345);
    assert_eq!(c.end, None);
    let comms: Vec<&str> = c.levels.iter().map(|l| l.waker_comm.as_str()).collect();
    assert_eq!(comms, ["B", "C", "[hardirq]"]);
    assert_eq!(c.levels[0].blocked, ["main", "a_wait", "read", "schedule"]);
    assert_eq!(c.levels[0].waker, ["pipe_write", "b_poke", "main"]);
    assert_eq!(
        c.levels[1].blocked,
        ["main", "b_wait", "futex_wait", "schedule"]
    );
    assert_eq!(c.levels[2].waker, ["hrtimer_wakeup"]);

    let c = parse_chain("T;t_wait;--;w_poke;W;--;[running] 7");
    assert_eq!((c.levels.len(), c.end.as_deref()), (1, Some("[running]")));
    let c = parse_chain("T;t_wait;--;w_poke;W;--;w_wait;--;t_send;T;--;[no wait traced] 7");
    assert_eq!(c.levels.len(), 2);
    assert_eq!(c.end.as_deref(), Some("[no wait traced]"));
    let c = parse_chain("T;main;--; 40");
    assert_eq!(c.levels[0].waker_comm, "");
    assert!(c.levels[0].waker.is_empty() && c.end.is_none());
    // A blocked stack with no waker after it is no marker.
    assert!(std::panic::catch_unwind(|| parse_chain("T;t;--;w;W;--;w_wait 7")).is_err());
    assert!(std::panic::catch_unwind(|| parse_chain("T;t;--;;--;x;--;y;Z 7")).is_err());
}

/// The text parser on a literal block with a full level and a marker.
#[test]
fn parse_default_chains_reads_every_level() {
    let text = "\n    waker:           B 12
    main
    b_poke
    --               --
    a_wait
    main
    target:          A 11
        100
    [2] waker:       C 13
    main
    c_release
    --               --
    b_wait
    main
    [2] target:      B 12
        90
    [running]
    [3] target:      C 13

";
    let chains = parse_default_chains(text);
    assert_eq!(chains.len(), 1);
    let c = &chains[0];
    assert_eq!((c.block.target_tid, c.block.waker_tid), (11, 12));
    assert_eq!(c.levels.len(), 1);
    let l = &c.levels[0];
    assert_eq!((l.k, l.waker_tid, l.target_tid, l.overlap), (2, 13, 12, 90));
    assert_eq!(c.end, Some(("[running]".to_string(), "C".to_string(), 13)));
    let f = c.folded();
    assert_eq!(f.levels[1].blocked, ["main", "b_wait"]);
    assert_eq!(f.levels[1].waker, ["c_release", "main"]);
    assert_eq!(f.end.as_deref(), Some("[running]"));
}

/// A text block's levels link up: level k's target is level k-1's waker,
/// and no wait overlaps more of the target's time than there is.
fn check_text_links(c: &TextChain) {
    let mut waker = (c.block.waker_comm.as_str(), c.block.waker_tid);
    for l in &c.levels {
        assert_eq!((l.target_comm.as_str(), l.target_tid), waker, "{c:#?}");
        assert!(l.overlap <= c.block.total, "{c:#?}");
        waker = (l.waker_comm.as_str(), l.waker_tid);
    }
    if let Some((_, comm, tid)) = &c.end {
        assert_eq!((comm.as_str(), *tid), waker, "{c:#?}");
    }
}

/// The pipeline with `--chain 3`, and again with `--chain 1`, under perf:
/// stage_a's waits carry b's futex wait and c's nap, b's carry c's nap,
/// c's carry its timer; each run's totals are the workload's own.
#[test]
fn a_pipeline_is_explained_three_levels_down() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let (k, ms) = (20, slowed(20));
    let (out, err) = folded_run(&["--chain", "3"], "chain3", &[k, ms], &STAGES);
    let lines = parse_chains(&out);
    let context = format!("{out}\n{err}");
    check_pipeline(&lines, 3, &err, &context);
    check_lower_stages(&lines, 3, &err, &context);
    check_interrupts_end_chains(&lines, &context);

    let (out, err) = folded_run(&["--chain", "1"], "chain3", &[k, ms], &STAGES);
    let lines = parse_chains(&out);
    check_pipeline(&lines, 1, &err, &format!("{out}\n{err}"));
    assert!(lines.iter().all(|l| l.levels.len() == 1 && l.end.is_none()));
}

/// The same pipeline built as distributions build (optimized, no frame
/// pointers) and calling glibc, traced with the default call graph: each
/// level still carries its own functions, which glibc's wrappers hide from
/// a frame-pointer walk.
#[test]
fn a_libc_pipeline_is_explained_three_levels_down() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let (k, ms) = (20, slowed(20));
    let (out, err) = folded_run(&["--chain", "3"], "chain3libc", &[k, ms], &STAGES);
    let lines = parse_chains(&out);
    let context = format!("{out}\n{err}");
    check_pipeline(&lines, 3, &err, &context);
    check_lower_stages(&lines, 3, &err, &context);
}

/// With levels to spare (`--chain 8`), the chain still ends at the timer
/// that woke stage_c: no line goes past an interrupt.
#[test]
fn an_interrupt_ends_a_chain() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let (out, err) = folded_run(&["--chain", "8"], "chain3", &[20, slowed(20)], &STAGES);
    let lines = parse_chains(&out);
    let context = format!("{out}\n{err}");
    check_pipeline(&lines, 8, &err, &context);
    check_lower_stages(&lines, 8, &err, &context);
    check_interrupts_end_chains(&lines, &context);
}

/// The pipeline under the tracefs backend, traced with `-p`, in the
/// default format: the same levels, each naming the thread the level
/// above was woken by, with overlaps no longer than the target's time,
/// and (b and c blocked all through a's waits) nearly all of it.
#[test]
fn a_pipeline_is_explained_three_levels_down_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let args = ["--backend", "tracefs", "--chain", "3"];
    let (chains, context, theirs) =
        gated_text_run(&args, "chain3", &[20, slowed(20)], &STAGES, |_| ());
    chains.iter().for_each(check_text_links);
    let lines: Vec<FoldedChain> = chains.iter().map(TextChain::folded).collect();
    check_pipeline(&lines, 3, &theirs, &context);
    check_lower_stages(&lines, 3, &theirs, &context);
    let whole: Vec<&TextChain> = chains
        .iter()
        .filter(|c| c.block.target_comm == "stage_a" && is_pipeline(&c.folded(), 3))
        .collect();
    let total: u64 = whole.iter().map(|c| c.block.total).sum();
    for k in 0..2 {
        let overlap: u64 = whole.iter().map(|c| c.levels[k].overlap).sum();
        assert!(
            overlap * 100 >= total * 95,
            "level {}: {overlap} of {total} us overlapped:\n{context}",
            k + 2
        );
    }
}

/// Under tracefs, `-- COMMAND` with `--chain 2` counts the command's
/// waits as `--chain 1` does, and follows their wakers (kernel stacks
/// only, `-K`: what is checked here is which waits are counted).
#[test]
fn a_command_is_traced_with_chains_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let args = ["--backend", "tracefs", "--chain", "2", "-K"];
    let (out, err) = folded_run(&args, "chain3", &[10, slowed(20)], &STAGES);
    let context = format!("{out}\n{err}");
    let lines = parse_chains(&out);
    let a = waits(&lines, "stage_a", "anon_pipe_read");
    assert_near("stage_a's waits", sum(&a), ground_truth(&err), &context);
    let pipeline = |l: &FoldedChain| {
        let [one, two] = &l.levels[..] else {
            return false;
        };
        in_order(&one.blocked, &["vfs_read", "anon_pipe_read", "schedule"])
            && one.waker_comm == "stage_b"
            && in_order(&one.waker, &["anon_pipe_write", "vfs_write"])
            && in_order(&two.blocked, &["futex_wait", "schedule"])
            && two.waker_comm == "stage_c"
            && has(&two.waker, "futex_wake")
            && l.end.is_none()
    };
    let clean = measured(&err, "clean_us");
    assert_explained("stage_a", &a, pipeline, clean, &context);
}

/// `perf record` of the pipeline, read back with `-i FILE --chain 3`:
/// the same three levels for stage_a as a live trace gives.
#[test]
fn a_recorded_pipeline_is_explained_three_levels_down() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let dir = std::env::temp_dir().join(format!("offwake-chains-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the directory");
    let data = dir.join("perf.data");
    let exe = workload("chain3");
    let file = data.to_str().unwrap();
    let (recorded, out, err) = retried(
        || {
            let recorded = perf_record(&data, &exe, &[20, slowed(20)]);
            let out = run(&["-f", "--chain", "3", "-i", file]);
            let (status, out, err) = (out.status, text(&out.stdout), text(&out.stderr));
            assert!(status.success(), "{status}: {err}");
            (recorded, out, err)
        },
        |(recorded, out, err)| {
            // The notes are of the whole system's threads: only the
            // workload's events, and its chains, tell.
            if !recording_is_whole(&data, &STAGES) {
                return Some("the recording lacks an event of the workload's".to_string());
            }
            chain_hidden(err, recorded, &parse_chains(out), &STAGES)
        },
    );
    let lines = parse_chains(&out);
    let context = format!("{out}\n{err}");
    check_pipeline(&lines, 3, &recorded, &context);
    check_lower_stages(&lines, 3, &recorded, &context);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether the recording `file` holds every scheduler event of the
/// threads named `comms`: each one's switch-outs and switch-ins alternate,
/// and a wakeup comes between a sleep and the switch-in that ends it. The
/// test VM's kernel reports no scheduler event while a thread of its init
/// process runs (see [`with_every_event_reported`]), which the notes on a
/// recording of the whole system cannot single out (CPU 1's threads have
/// them too).
fn recording_is_whole(file: &Path, comms: &[&str]) -> bool {
    let out = Command::new("perf")
        .args(["script", "-F", "trace", "-i"])
        .arg(file)
        .output()
        .expect("running perf script");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Per thread: on the CPU (None), or off it and whether woken since.
    let mut off: HashMap<u32, Option<bool>> = HashMap::new();
    for line in text(&out.stdout).lines() {
        let Some((prev, next)) = line.split_once(" ==> ") else {
            // sched_waking's fields: the thread woken.
            if let Some(tid) = thread(line, "", comms)
                && let Some(Some(woken)) = off.get_mut(&tid)
            {
                *woken = true;
            }
            continue;
        };
        if let Some(tid) = thread(prev, "prev_", comms) {
            // A preempted thread needs no wakeup to run again.
            let preempted = prev
                .split_whitespace()
                .any(|f| f.starts_with("prev_state=R"));
            if matches!(off.insert(tid, Some(preempted)), Some(Some(_))) {
                return false;
            }
        }
        if let Some(tid) = thread(next, "next_", comms)
            && off.insert(tid, None).is_some_and(|o| o != Some(true))
        {
            return false;
        }
    }
    true
}

/// The pid in `perf script -F trace` fields that begin with `tag`
/// (`prev_`, `next_`, or none for sched_waking's), if their comm is one
/// of `comms`.
fn thread(side: &str, tag: &str, comms: &[&str]) -> Option<u32> {
    let field = |key: &str| {
        let key = format!("{tag}{key}=");
        side.split_whitespace()
            .find_map(|f| f.strip_prefix(key.as_str()))
    };
    comms.contains(&field("comm")?).then_some(())?;
    field("pid")?.parse().ok()
}

/// Stock `perf record` of the whole system while `exe ARGS` runs on CPU
/// 0; returns its stderr, which holds the workload's.
fn perf_record(file: &Path, exe: &Path, args: &[u64]) -> String {
    let out = Command::new("perf")
        .args([
            "record",
            "-q",
            "-m",
            "1024",
            "-e",
            "sched:sched_switch",
            "-e",
        ])
        .args(["sched:sched_waking", "-a", "-g", "-o"])
        .arg(file)
        .arg("--")
        .arg(exe)
        .args(args.iter().map(u64::to_string))
        .env("OFFWAKE_PIN_CPU", "0")
        .output()
        .expect("running perf record (apt-get install linux-perf)");
    let err = text(&out.stderr);
    assert!(
        out.status.success(),
        "perf record failed: {}\n{err}",
        out.status
    );
    err
}

/// loop_a's wait woken by loop_b's write (level 1), loop_b's wait woken
/// by loop_a's write (level 2).
fn ping_pong(c: &FoldedChain) -> bool {
    let [one, two] = &c.levels[..] else {
        return false;
    };
    in_order(&one.blocked, &["a_main", "a_wait", "vfs_read"])
        && one.waker_comm == "loop_b"
        && in_order(&one.waker, &["vfs_write", "b_send", "b_main"])
        && in_order(&two.blocked, &["b_main", "b_wait", "vfs_read"])
        && two.waker_comm == "loop_a"
        && in_order(&two.waker, &["vfs_write", "a_send", "a_main"])
}

/// Two threads that wake each other, a FIFO hog between every switch so
/// that their waits overlap both ways: loop_a's wait is loop_b's, which
/// loop_a itself ended, and the chain ends in `[loop]` where loop_a would
/// come again. With `--chain 2` it stops at loop_b, with no marker.
#[test]
fn a_chain_that_comes_back_ends_in_a_loop() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    for (depth, end) in [("4", Some("[loop]")), ("2", None)] {
        let (out, err) = folded_run(
            &["--chain", depth],
            "chainloop",
            // Under a second of real-time spinning even when slowed, as
            // the kernel throttles real-time tasks past 0.95 s a second.
            &[25, slowed(2)],
            &["loop_a"],
        );
        let context = format!("--chain {depth}:\n{out}\n{err}");
        assert_eq!(measured(&err, "fifo"), 1, "not SCHED_FIFO: {context}");
        let lines = parse_chains(&out);
        let a = waits(&lines, "loop_a", "a_wait");
        let total = sum(&a);
        assert_near("loop_a's waits", total, ground_truth(&err), &context);
        let looped: Vec<&FoldedChain> = a
            .iter()
            .copied()
            .filter(|l| ping_pong(l) && l.end.as_deref() == end)
            .collect();
        assert!(
            sum(&looped) * 10 >= total * 9,
            "{} of {total} us end as expected: {context}",
            sum(&looped)
        );
        assert!(a.iter().all(|l| l.levels.len() <= 2), "{context}");
    }
}

/// A waker that never blocked while the waiter waited (it computed, at a
/// higher real-time priority than anything else on the CPU but the waiter
/// it wakes): the waiter's chain ends in `[running]`. Rounds in which the
/// worker was preempted all the same (the workload counts them) may end
/// in `[runnable]`; nothing else may.
#[test]
fn a_waker_that_kept_running_ends_a_chain_in_running() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    let (out, err) = folded_run(
        &["--chain", "3"],
        "slowwaker",
        // Under a second of real-time computing even when slowed.
        &[10, slowed(10)],
        &["waiter"],
    );
    let context = format!("{out}\n{err}");
    assert_eq!(measured(&err, "fifo"), 1, "not SCHED_FIFO: {context}");
    let lines = parse_chains(&out);
    let t = waits(&lines, "waiter", "t_wait");
    let total = sum(&t);
    assert_near("waiter's waits", total, ground_truth(&err), &context);
    let ended = |marker: &str| -> u64 {
        t.iter()
            .filter(|l| {
                let [one] = &l.levels[..] else { return false };
                one.waker_comm == "worker"
                    && in_order(&one.waker, &["vfs_write", "w_poke", "w_main"])
                    && l.end.as_deref() == Some(marker)
            })
            .map(|l| l.total)
            .sum()
    };
    let (running, runnable) = (ended("[running]"), ended("[runnable]"));
    assert_eq!(running + runnable, total, "{context}");
    let clean = measured(&err, "clean_us");
    assert!(
        clean > 0,
        "the worker was preempted in every round: {context}"
    );
    assert!(
        running * 100 >= clean * 97,
        "{running} us end in [running], of {clean} us of rounds the worker ran through:\n{context}"
    );
}

/// listener's wait woken by its child, the napper: a process `-p` does
/// not name, which chains follow all the same.
fn from_outside(c: &FoldedChain, depth: usize) -> bool {
    let one = &c.levels[0];
    let first = in_order(&one.blocked, &["listener_main", "l_wait", "vfs_read"])
        && one.waker_comm == "napper"
        && in_order(&one.waker, &["vfs_write", "n_poke", "napper_main"]);
    match &c.levels[1..] {
        [] => depth == 1 && first,
        [two] => {
            depth == 2
                && first
                && in_order(&two.blocked, &["napper_main", "n_nap", "do_nanosleep"])
                && by_timer(two)
        }
        _ => false,
    }
}

/// `-p` of the listener only, whose waits its child process ends after
/// napping: with `--chain 2` level 2 is the child's nap, woken by its
/// timer; with `--chain 1` the same waits total the same (each run its
/// workload's measurement). The child is never a target, and each text
/// block's levels link up.
#[test]
fn a_waker_outside_the_targets_is_followed() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _alone = alone();
    for depth in [2, 1] {
        let args = ["--backend", "perf", "--chain", &depth.to_string()];
        let forked = |pid| wait_for("the napper", || !children_of(pid).is_empty());
        let (chains, tool, theirs) =
            gated_text_run(&args, "napproc", &[20, slowed(20)], &["listener"], forked);
        let context = format!("--chain {depth}:\n{tool}\n{theirs}");
        chains.iter().for_each(check_text_links);
        assert!(
            chains.iter().all(|c| c.block.target_comm != "napper"),
            "the child is a target: {context}"
        );
        let lines: Vec<FoldedChain> = chains.iter().map(TextChain::folded).collect();
        let l = waits(&lines, "listener", "l_wait");
        let truth = ground_truth(&theirs);
        assert_near("listener's waits", sum(&l), truth, &context);
        assert_eq!(measured(&theirs, "fifo"), 1, "not SCHED_FIFO: {context}");
        // A napper preempted between its nap and its write (the workload
        // counts such rounds) ends its level in [runnable].
        let expected = if depth == 1 {
            truth
        } else {
            measured(&theirs, "clean_us")
        };
        let whole = |c: &FoldedChain| from_outside(c, depth) && c.end.is_none();
        assert_explained("listener", &l, whole, expected, &context);
    }
}
