//! Kernel-side filtering (root): with `-p`/`-t` the kernel records nothing
//! for other threads, and `--state` drops other switch-outs before their
//! callchain is taken. Checked through the records the tool reports having
//! read, against a busy bystander that would produce hundreds of them.

use std::io::Write;
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};

use crate::common::*;

/// These tests count what the kernel delivers, and a `-p` run also keeps
/// tasks created while it runs for a moment (the forecast of new pids):
/// they run one at a time, so that one test's workloads are not another's.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("starting sleep"),
        )
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Traces `args` for its duration while a pipe workload (a wakeup and two
/// switches every 2 ms) runs; returns the tool's stderr.
fn with_bystander(args: &[&str]) -> String {
    let mut bystander = Command::new(workload("pipewake"))
        .args(["1000", "2"])
        .env("OFFWAKE_PIN_CPU", "0")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting the bystander");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let tracer = start_traced(args);
    let (_, err) = tracer.finish();
    let _ = bystander.kill();
    let _ = bystander.wait();
    err
}

fn sleeping_pid_reads_nothing(backend: &str) {
    let target = Sleeper::start();
    let pid = target.0.id().to_string();
    // Traced with -p of the sleeping process: its thread never runs.
    let filtered = with_bystander(&["--backend", backend, "-p", &pid, "2"]);
    // The same bystander traced system-wide: this is what the kernel would
    // deliver without the filter (so the check above can fail).
    let everything = with_bystander(&["--backend", backend, "2"]);
    let (f, e) = (records_read(&filtered), records_read(&everything));
    assert!(
        e >= 300,
        "system-wide run read only {e} records:\n{everything}"
    );
    // Besides the sleeper's own few, the kernel keeps tasks created on the
    // machine during the run for a moment (the forecast of new pids, which
    // lets traced processes' new threads be wakees from their start): a
    // hundredth of the unfiltered count leaves room for those.
    let bound = (e / 100).max(4);
    assert!(
        f <= bound,
        "-p of a sleeping process read {f} records, more than {bound} (system-wide: {e}):\n{filtered}"
    );
    // The empty report is not left without a word.
    assert!(
        filtered.contains(&format!(
            "NOTE: no switch-out of PID {pid} \"sleep\" was read, so it has no entry"
        )),
        "no NOTE on the silent target:\n{filtered}"
    );
}

#[test]
fn pid_filter_reads_nothing_for_other_threads() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    sleeping_pid_reads_nothing("perf");
}

#[test]
fn pid_filter_reads_nothing_for_other_threads_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    sleeping_pid_reads_nothing("tracefs");
}

/// `--state 2` (D): the pipe reader and the writer sleep in S, so the
/// kernel drops all their switch-outs; the same workload traced with
/// `--state 1` (S) at the same time reads a quarter more records (two of
/// every eight or so are those switch-outs). (Both take switch-ins from
/// context-switch records: without `--state`, per-task runs take them from
/// the switch-outs, which then cannot be filtered, and read other records.)
/// The workload's threads exist before
/// tracing starts: the kernel does not carry a filter into the events that
/// threads created later inherit (they are filtered in user space). They
/// wait for both runs to be tracing, and both runs end after the workload
/// does, so that each sees all of its work (two runs that each trace a
/// second of it, started one after the other, see different parts of it).
#[test]
fn state_filter_drops_switch_outs_in_the_kernel() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let mut w = Command::new(workload("pipewake"))
        .args(["400", "5", "ready"])
        .env("OFFWAKE_PIN_CPU", "0")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting the workload");
    // The main thread, the reader and the writer.
    wait_for("the workload's threads", || thread_count(w.id()) >= 3);
    let pid = w.id().to_string();
    // Frame pointers, as the shares above were measured with: the copies
    // of --call-graph dwarf slow the workload down (in emulated test VMs
    // so much that records the runs share weigh more).
    let run = |state| {
        start_traced(&[
            "--backend",
            "perf",
            "--call-graph",
            "fp",
            "--state",
            state,
            "-p",
            &pid,
        ])
    };
    let (all, d_only) = (run("1"), run("2"));
    let mut go = w.stdin.take().expect("piped stdin");
    go.write_all(b"g").expect("releasing the workload");
    drop(go);
    assert!(w.wait().expect("waiting for the workload").success());
    for tracer in [&all, &d_only] {
        // SAFETY: kill with the pid of a child of this process, not yet
        // waited for, and a valid signal.
        let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
        assert_eq!(rc, 0, "interrupting offwake-perf");
    }
    let (all_out, all_err) = all.finish();
    let (d_out, d_err) = d_only.finish();
    assert!(
        parse_default(&all_out)
            .iter()
            .any(|b| b.target_comm == "reader"),
        "no reader block in S:\n{all_out}"
    );
    assert!(
        parse_default(&d_out)
            .iter()
            .all(|b| b.target_comm != "reader"),
        "reader slept in S, not D:\n{d_out}"
    );
    // Nothing of the workload's is in D: the run says why it shows nothing
    // of it; the S run shows it, and says nothing of the kind.
    assert!(
        d_err.contains(&format!("no switch-out of PID {pid} \"pipewake\" was read"))
            && d_err.contains("only in states --state does not select"),
        "no NOTE on the target with nothing in D:\n{d_err}"
    );
    assert!(!all_err.contains("so it has no entry"), "{all_err}");
    let (a, d) = (records_read(&all_err), records_read(&d_err));
    assert!(
        a >= 400,
        "the --state 1 run read only {a} records\n{all_err}"
    );
    assert!(
        d * 100 <= a * 85,
        "--state 2 read {d} records, --state 1 {a}: the kernel did not drop S switch-outs\n{d_err}"
    );
}

/// A thread created during a `-p` run is a kept wakee from its first wakeup
/// on: each of 40 new threads blocks once, for 1 ms from its creation, so
/// the per-CPU `sched_waking` filter must keep it before its fork record is
/// read (it keeps the pids the kernel allocates next). Without that, the
/// waker of nearly every newborn's nap is missing.
#[test]
fn new_threads_have_wakers_from_their_first_wakeup() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    trace_newborn_naps(&[]);
}

/// Traces `spawnsleep` (40 new threads, each napping 1 ms from its
/// creation) with `-p` and `extra` options; checks that the naps add up to
/// the workload's and nearly all have their timer waker; returns the
/// report and stderr.
fn trace_newborn_naps(extra: &[&str]) -> (String, String) {
    let mut w = start_gated_env(
        &workload("spawnsleep"),
        &["40", &slowed(1).to_string()],
        &[("OFFWAKE_PIN_CPU", "0")],
    );
    let pid = w.pid().to_string();
    let mut args = vec!["--backend", "perf"];
    args.extend_from_slice(extra);
    args.extend(["-p", &pid, "2"]);
    let tracer = start_traced(&args);
    w.go();
    let truth = ground_truth(&w.finish());
    let (out, err) = tracer.finish();
    let naps: Vec<Block> = parse_default(&out)
        .into_iter()
        .filter(|b| b.target_comm == "newborn" && has(&b.target, "nap"))
        .collect();
    let woken: u64 = naps
        .iter()
        .filter(|b| has(&b.waker, "hrtimer_wakeup"))
        .map(|b| b.total)
        .sum();
    let all: u64 = naps.iter().map(|b| b.total).sum();
    let ratio = all as f64 / truth as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "newborn naps traced: {all} us of the workload's {truth} us ({ratio:.3})\n{out}\n{err}"
    );
    assert!(
        woken * 100 >= all * 95,
        "only {woken} of {all} us of newborn naps have their timer waker\n{out}\n{err}"
    );
    (out, err)
}

/// Past `--event-budget`, `-p` traces with per-CPU events filtered on the
/// threads' ids: the same naps, with their wakers, as per-task events give,
/// newborn threads included (they join the filters from the fork records
/// that every task's creation now writes), and stderr says so.
#[test]
fn past_the_event_budget_per_cpu_events_trace_the_same_threads() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let (out, err) = trace_newborn_naps(&["--event-budget", "0"]);
    assert!(
        err.contains("more than --event-budget 0: tracing with one sched_switch event per CPU"),
        "no notice of per-CPU events:\n{err}"
    );
    // Nothing of other processes is reported.
    assert!(
        parse_default(&out)
            .iter()
            .all(|b| b.target_comm == "newborn" || b.target_comm == "spawnsleep"),
        "blocks of other threads:\n{out}"
    );
}

/// Tracing the whole system, the tool's own threads are never targets
/// (as wakers they stay): none of the threads it had while it ran, its
/// main thread included, which blocks every round, heads an entry.
#[test]
fn the_tools_own_threads_are_never_targets() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    for backend in ["perf", "tracefs"] {
        let tracer = start_traced(&["--backend", backend, "-K", "1"]);
        let pid = tracer.child.id();
        let mut own = std::collections::BTreeSet::from([pid]);
        let until = std::time::Instant::now() + std::time::Duration::from_millis(900);
        while std::time::Instant::now() < until {
            if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                own.extend(
                    dir.flatten()
                        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()),
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (out, err) = tracer.finish();
        let blocks = parse_default(&out);
        assert!(
            blocks.len() > 3,
            "{backend}: too little traced:\n{out}\n{err}"
        );
        let mine: Vec<&Block> = blocks
            .iter()
            .filter(|b| own.contains(&b.target_tid))
            .collect();
        assert!(
            mine.is_empty(),
            "{backend}: the tool's own threads {own:?} are targets: {mine:#?}"
        );
    }
}
