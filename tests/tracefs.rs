//! End-to-end tests of the tracefs backend (root): the automatic fallback
//! when `perf_event_open` is denied by a seccomp filter, `--backend perf`
//! refusing to fall back, the ftrace instance's cleanup (normal end, SIGINT,
//! SIGTERM, SIGKILL, an abort on a failed allocation, and instances left
//! behind removed by the next run of either backend), with the top-level
//! tracing settings left as they were, and the cap on the buffer's size.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

const TRACEFS: &str = "/sys/kernel/tracing";

/// Every run of the tool removes stale instances, so the tests here run one
/// at a time: otherwise one test's run could remove another's stale
/// instance before that test's own run does.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes sure tracefs is mounted (the tool mounts it too, but the tests
/// look at it before the first run).
fn tracefs() -> PathBuf {
    let root = Path::new(TRACEFS);
    if !root.join("events").is_dir() {
        let status = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .expect("running mount");
        assert!(status.success(), "mounting tracefs");
    }
    root.to_path_buf()
}

/// The top-level `events/sched/*/enable` values.
fn top_level_sched_enables() -> BTreeMap<String, String> {
    let dir = tracefs().join("events/sched");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir)
        .expect("listing events/sched")
        .flatten()
    {
        let enable = e.path().join("enable");
        if let Ok(v) = std::fs::read_to_string(&enable) {
            out.insert(e.file_name().to_string_lossy().into_owned(), v);
        }
    }
    assert!(out.contains_key("sched_switch"), "{out:?}");
    out
}

/// Our instances (`offwake-perf.<pid>.<start>`) that belong to `pid`.
fn instances_of(pid: u32) -> Vec<String> {
    let prefix = format!("offwake-perf.{pid}.");
    std::fs::read_dir(tracefs().join("instances"))
        .expect("listing instances")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Under a seccomp filter that makes `perf_event_open` fail with EPERM, the
/// default backend falls back to tracefs, says so in one line, and still
/// measures the sleep loop right; afterwards no instance of that run
/// remains and the top-level settings are unchanged.
#[test]
fn auto_falls_back_to_tracefs_when_perf_is_denied() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let before = top_level_sched_enables();
    let noperf = workload("noperf");
    let sleeploop = workload("sleeploop");
    let (n, ms) = (20u64, 50u64);
    let (pid, out) = with_every_event_reported(
        || {
            let child = Command::new(&noperf)
                .arg(env!("CARGO_BIN_EXE_offwake-perf"))
                .args(["-f", "--"])
                .arg(&sleeploop)
                .args([n.to_string(), ms.to_string()])
                // See live.rs: CPU 1's idle exits are not reported on the test VM.
                .env("OFFWAKE_PIN_CPU", "0")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("starting noperf");
            let pid = child.id();
            (pid, child.wait_with_output().expect("waiting"))
        },
        |(_, out)| String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed: {stderr}");
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("falling back"))
        .collect();
    assert_eq!(
        notices,
        vec![
            "offwake-perf: perf_event_open was denied (Operation not permitted (os error 1)); \
             falling back to the tracefs backend (--backend tracefs)"
        ],
        "stderr:\n{stderr}"
    );
    let lines = parse_folded(&stdout);
    let sleeps: Vec<&Folded> = lines
        .iter()
        .filter(|l| has(&l.target, "sleep_once") && has(&l.target, "do_nanosleep"))
        .collect();
    assert!(
        !sleeps.is_empty(),
        "no sleep_once stack in:\n{stdout}\n{stderr}"
    );
    let total: u64 = sleeps.iter().map(|l| l.total).sum();
    // How much longer than their length the sleeps last depends on the
    // load, which the workload's own measurement below bounds.
    assert_slept(
        "tracefs",
        total,
        n,
        ms,
        &format!("stdout:\n{stdout}\nstderr:\n{stderr}"),
    );
    assert_ratio(
        "sleep total vs the workload's own measurement",
        total,
        ground_truth(&stderr),
        0.98,
        1.02,
    );
    assert!(
        sleeps.iter().any(|l| has(&l.waker, "hrtimer_wakeup")),
        "{sleeps:?}"
    );
    // noperf execs the tool: same pid.
    assert_eq!(instances_of(pid), Vec::<String>::new());
    assert_eq!(top_level_sched_enables(), before);
}

/// `--backend perf` never falls back: it fails and explains why.
#[test]
fn perf_backend_does_not_fall_back() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let noperf = workload("noperf");
    let out = Command::new(&noperf)
        .arg(env!("CARGO_BIN_EXE_offwake-perf"))
        .args(["--backend", "perf", "1"])
        .output()
        .expect("running noperf");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("perf_event_open"), "{stderr}");
    assert!(stderr.contains("Operation not permitted"), "{stderr}");
    assert!(stderr.contains("--backend tracefs"), "{stderr}");
    assert!(!stderr.contains("falling back"), "{stderr}");
    assert!(out.stdout.is_empty());
}

/// Runs the tracefs backend until `signal` (or its duration) ends it, and
/// checks the report came out and the instance is gone.
fn run_and_end_with(signal: Option<libc::c_int>) {
    let before = top_level_sched_enables();
    let args: &[&str] = if signal.is_some() {
        &["--backend", "tracefs"]
    } else {
        &["--backend", "tracefs", "1"]
    };
    // Blocking of its own on CPU 0, so that the report has entries on an
    // idle machine too.
    let mut activity = start_pipewake_pinned(20, 10);
    let tracer = start_traced(args);
    let pid = tracer.child.id();
    // The instance exists while tracing.
    assert_eq!(instances_of(pid).len(), 1, "no instance while tracing");
    activity.go();
    if let Some(sig) = signal {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
    }
    let (out, err) = tracer.finish();
    activity.finish();
    assert!(err.contains("records read"), "no summary: {err}");
    assert!(
        !parse_default(&out).is_empty(),
        "empty report: {out}\n{err}"
    );
    assert_eq!(
        instances_of(pid),
        Vec::<String>::new(),
        "instance left behind"
    );
    assert_eq!(top_level_sched_enables(), before);
}

#[test]
fn instance_removed_at_normal_end() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    run_and_end_with(None);
}

#[test]
fn instance_removed_on_sigint() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    run_and_end_with(Some(libc::SIGINT));
}

#[test]
fn instance_removed_on_sigterm() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    run_and_end_with(Some(libc::SIGTERM));
}

/// How long the instance of a run that died may outlive it: its guardian
/// removes it as soon as the run's files are closed.
const CLEANUP_WAIT: Duration = Duration::from_secs(2);

/// Waits up to [`CLEANUP_WAIT`] for `pid`'s instances to go. Fails, after
/// removing them (they may record system-wide), when some remain.
fn assert_no_instance_left(pid: u32, what: &str) {
    let until = Instant::now() + CLEANUP_WAIT;
    let left = loop {
        let left = instances_of(pid);
        if left.is_empty() || Instant::now() >= until {
            break left;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    for name in &left {
        let _ = std::fs::remove_dir(tracefs().join("instances").join(name));
    }
    assert!(
        left.is_empty(),
        "{what}: instance(s) {left:?} still there {CLEANUP_WAIT:?} after the run died"
    );
}

/// Sends `signal` to `pid`, unless disarmed, when dropped: a test that fails
/// midway must not leave a tracer or a workload running.
struct SignalOnDrop {
    pid: Option<u32>,
    signal: libc::c_int,
}

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as libc::pid_t, self.signal) };
        }
    }
}

/// Waits up to `limit` for `child` to exit; SIGKILLs it after that.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("waiting") {
            return Some(status);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A run killed with SIGKILL cannot clean up: its guardian removes the
/// instance.
#[test]
fn sigkilled_run_leaves_no_instance() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let before = top_level_sched_enables();
    let mut tracer = start_traced(&["--backend", "tracefs"]);
    let pid = tracer.child.id();
    assert_eq!(instances_of(pid).len(), 1, "no instance while tracing");
    tracer.child.kill().expect("SIGKILL");
    tracer.child.wait().expect("reaping");
    assert_no_instance_left(pid, "SIGKILL");
    assert_eq!(top_level_sched_enables(), before);
}

/// A run that aborts on a failed allocation (no destructor runs) leaves no
/// instance either. Its address space is limited while it traces, below
/// what it already uses, then a storm of wakeups makes it allocate: the
/// first allocation the heap cannot serve from memory it has aborts.
#[test]
fn run_aborted_on_allocation_failure_leaves_no_instance() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let before = top_level_sched_enables();
    let mut storm = start_pipewake_pinned(10_000_000, 0);
    let mut stop_storm = SignalOnDrop {
        pid: Some(storm.pid()),
        signal: libc::SIGKILL,
    };
    let storm_pid = storm.pid().to_string();
    // -U: no kallsyms thread, whose memory use depends on timing.
    let mut tracer = start_traced(&["-U", "--backend", "tracefs", "-p", &storm_pid]);
    let pid = tracer.child.id();
    assert_eq!(instances_of(pid).len(), 1, "no instance while tracing");
    let limit = libc::rlimit {
        rlim_cur: 1 << 20,
        rlim_max: 1 << 20,
    };
    // SAFETY: prlimit reads `limit` and, with a null old-limit pointer,
    // writes nothing.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_AS,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    storm.go();
    let status = wait_at_most(&mut tracer.child, Duration::from_secs(20));
    stop_storm.pid = None;
    let _ = storm.child.kill();
    let _ = storm.child.wait();
    let mut err = String::new();
    if let Some(mut e) = tracer.child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let status = status.unwrap_or_else(|| {
        assert_no_instance_left(pid, "killed after 20 s");
        panic!("offwake-perf did not abort within 20 s; stderr:\n{err}")
    });
    assert_no_instance_left(pid, "abort on a failed allocation");
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status}\n{err}");
    // A heap allocation, or the signal stack of a thread that started on
    // a cached stack: the Rust runtime aborts on either.
    assert!(
        err.contains("memory allocation of")
            || err.contains("failed to allocate an alternative stack"),
        "{err}"
    );
    assert_eq!(top_level_sched_enables(), before);
}

/// Removes a directory when dropped (a test's instance, should it fail).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Instances whose owner is gone (here made by hand, as a run killed
/// together with its guardian leaves them) are removed by the next run of
/// either backend, which says so; a live run's instance is left alone.
#[test]
fn every_run_removes_stale_instances_only() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let bystander = start_traced(&["--backend", "tracefs"]);
    let bystander_pid = bystander.child.id();
    let mut interrupt = SignalOnDrop {
        pid: Some(bystander_pid),
        signal: libc::SIGINT,
    };
    assert_eq!(instances_of(bystander_pid).len(), 1);

    // The default backend (perf here), then tracefs.
    let backends: [&[&str]; 2] = [&[], &["--backend", "tracefs"]];
    for (i, backend) in backends.into_iter().enumerate() {
        // Above the kernel's PID_MAX_LIMIT (2^22): no process has this pid.
        let name = format!("offwake-perf.{}.{i}", 1u32 << 23);
        let stale = RemoveOnDrop(tracefs().join("instances").join(&name));
        std::fs::create_dir(&stale.0).expect("making a stale instance");
        let mut args = backend.to_vec();
        args.extend(["-f", "--", "true"]);
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        if backend.is_empty() {
            assert!(!stderr.contains("falling back"), "{stderr}");
        }
        assert!(
            stderr.contains("left behind by earlier runs") && stderr.contains(&name),
            "{backend:?}: no cleanup notice for {name}: {stderr}"
        );
        assert!(!stale.0.exists(), "{backend:?}: {name} is still there");
    }

    // The bystander still has its instance while it runs…
    assert_eq!(instances_of(bystander_pid).len(), 1);
    interrupt.pid = None;
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(bystander_pid as libc::pid_t, libc::SIGINT) };
    let (_, err) = bystander.finish();
    assert!(err.contains("records read"), "{err}");
    // …and removes it itself.
    assert_eq!(instances_of(bystander_pid), Vec::<String>::new());
}

/// The tracefs buffer is capped as a perf ring buffer is (1 GiB per CPU):
/// `--mmap-pages 1048576` (8 GiB on two CPUs) is refused at once, before
/// any instance is made.
#[test]
fn oversized_tracefs_buffer_is_refused() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let started = Instant::now();
    let mut child = tool()
        .args(["--backend", "tracefs", "--mmap-pages", "1048576", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting offwake-perf");
    let pid = child.id();
    let mut seen = Vec::new();
    let status = loop {
        seen.extend(instances_of(pid));
        if let Some(status) = child.try_wait().expect("waiting") {
            break Some(status);
        }
        if !seen.is_empty() || started.elapsed() > Duration::from_secs(10) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = started.elapsed();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(seen.is_empty(), "an instance was made: {seen:?}\n{err}");
    let status = status.expect("still running after 10 s");
    assert_eq!(status.code(), Some(2), "{status}\n{err}");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let max = (1usize << 30) / page;
    assert!(
        err.contains("--mmap-pages (1048576)") && err.contains(&max.to_string()),
        "{err}"
    );
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

/// Parity: one pipe-wakeup workload traced by both backends at once gives
/// the same reader entries (same frames, same waker) and totals within 2%.
/// Both walk user stacks by frame pointers, not by their default for `-p`
/// (DWARF).
#[test]
fn both_backends_agree_on_the_same_workload() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let (k, ms) = (20u64, 30u64);
    let (truth, (perf_out, perf_err), (tracefs_out, tracefs_err)) = with_every_event_reported(
        || {
            let mut w = start_pipewake_pinned(k, ms);
            let pid = w.pid().to_string();
            let perf = start_traced(&["--backend", "perf", "--call-graph", "fp", "-p", &pid, "3"]);
            let tracefs = start_traced(&[
                "--backend",
                "tracefs",
                "--call-graph",
                "fp",
                "-p",
                &pid,
                "3",
            ]);
            w.go();
            let truth = ground_truth(&w.finish());
            (truth, perf.finish(), tracefs.finish())
        },
        |(_, (_, perf_err), (_, tracefs_err))| format!("{perf_err}{tracefs_err}"),
    );
    let reader = |out: &str| -> BTreeMap<(Vec<String>, Vec<String>, String), u64> {
        let mut m = BTreeMap::new();
        for b in parse_default(out) {
            if b.target_comm == "reader" && has(&b.target, "reader_wait") {
                *m.entry((b.target, b.waker, b.waker_comm)).or_default() += b.total;
            }
        }
        m
    };
    let p = reader(&perf_out);
    let t = reader(&tracefs_out);
    assert!(
        !p.is_empty(),
        "perf saw no reader entry:\n{perf_out}\n{perf_err}"
    );
    let keys = |m: &BTreeMap<_, u64>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&p),
        keys(&t),
        "different entries\nperf:\n{perf_out}\ntracefs:\n{tracefs_out}"
    );
    let total_p: u64 = p.values().sum();
    let total_t: u64 = t.values().sum();
    eprintln!("parity: perf {total_p} us, tracefs {total_t} us, workload {truth} us");
    assert_ratio("tracefs vs perf", total_t, total_p, 0.98, 1.02);
    assert_ratio("tracefs vs the workload", total_t, truth, 0.98, 1.02);
    assert!(tracefs_err.contains("records read"), "{tracefs_err}");
}

/// A command too short for the tracefs backend to read its memory map
/// while it lives (it reads `/proc` a round after the events) either has
/// its user frames named, or a NOTE says why they print `[unknown]`.
#[test]
fn a_short_commands_unknown_frames_are_explained() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let exe = workload("pipewake");
    let out = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "--backend",
            "tracefs",
            "-f",
            "--",
            exe.to_str().unwrap(),
            "3",
            "5",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed: {stderr}");
    let reads: Vec<Folded> = parse_folded(&stdout)
        .into_iter()
        .filter(|l| l.target_comm == "reader" && has(&l.target, "vfs_read"))
        .collect();
    assert!(!reads.is_empty(), "no reads:\n{stdout}\n{stderr}");
    let named = reads.iter().all(|l| has(&l.target, "reader_wait"));
    let noted = stderr.contains("[unknown]: it exited before its memory map could be read");
    assert!(
        named || noted,
        "unknown user frames and no note saying why:\n{stdout}\n{stderr}"
    );
}
