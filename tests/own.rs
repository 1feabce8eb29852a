//! The tool's own processes: no report holds one of its helpers, this
//! run's or another's, while a process merely named like one is reported
//! like any other; and a run that can make no more threads or processes
//! once tracing started still reports what it traced.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::common::*;

/// The names the tool's helpers give themselves.
const HELPER_NAMES: [&str; 2] = ["offwake-release", "offwake-cleanup"];

/// One run at a time of this module's tests: each takes the others' runs
/// for other runs.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The tool's executable, as `/proc/PID/exe` names it.
fn tool_exe() -> PathBuf {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_offwake-perf")).expect("the tool's path")
}

/// The second and third fields of `/proc/PID/stat`: state and parent.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((state, rest.next()?.parse().ok()?))
}

/// Every helper of this binary seen until it is stopped: processes of its
/// executable under a helper's name, with their parent when first seen.
struct HelperWatch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeMap<u32, u32>>,
}

impl HelperWatch {
    fn start() -> HelperWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let exe = tool_exe();
        let thread = std::thread::spawn(move || {
            let mut seen = BTreeMap::new();
            while !stopped.load(Ordering::Relaxed) {
                for e in std::fs::read_dir("/proc").expect("listing /proc").flatten() {
                    let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok())
                    else {
                        continue;
                    };
                    if seen.contains_key(&pid) {
                        continue;
                    }
                    let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                    if !HELPER_NAMES.contains(&comm.trim_end()) {
                        continue;
                    }
                    if std::fs::read_link(e.path().join("exe")).is_ok_and(|p| p == exe)
                        && let Some((_, parent)) = state_and_parent(pid)
                    {
                        seen.insert(pid, parent);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            seen
        });
        HelperWatch { stop, thread }
    }

    /// Stops watching: the helpers seen, with their parents.
    fn stop(self) -> BTreeMap<u32, u32> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the helper watch")
    }
}

/// Ends a run started with [`start_traced`] with SIGINT: its report.
fn interrupt(run: Running) -> (String, String) {
    // SAFETY: kill takes no pointer; the pid is our child's.
    let rc = unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "SIGINT to the tool");
    run.finish()
}

/// Whole-system runs, each under `backend`: one traces while another
/// (under `other`) starts and ends, a third starts right after that one
/// ended, while its helper still releases its events; both trace until
/// that helper is gone. Neither report holds any helper of the three runs.
fn helpers_of(other: &str, backend: &str) {
    let watch = HelperWatch::start();
    let before = start_traced(&["--backend", backend, "-K", "600"]);
    let ended = tool()
        .args(["--backend", other, "-K", "1"])
        .output()
        .expect("running offwake-perf");
    assert!(
        ended.status.success(),
        "{}",
        String::from_utf8_lossy(&ended.stderr)
    );
    let after = start_traced(&["--backend", backend, "-K", "600"]);
    let tracing = [before.child.id(), after.child.id()];
    // The helpers of the run that ended (the traced runs' own live as
    // long as they do): once they have exited, or are zombies.
    let seen = watch.stop();
    let of_ended: Vec<u32> = seen
        .iter()
        .filter(|(_, parent)| !tracing.contains(parent))
        .map(|(&pid, _)| pid)
        .collect();
    assert!(
        !of_ended.is_empty(),
        "{other}: no helper of the run that ended was seen: {seen:?}"
    );
    wait_for("the helpers of the run that ended to exit", || {
        of_ended
            .iter()
            .all(|&pid| state_and_parent(pid).is_none_or(|(state, _)| state == 'Z'))
    });
    let watch = HelperWatch::start();
    let reports = [interrupt(before), interrupt(after)];
    let helpers: BTreeSet<u32> = seen.keys().chain(watch.stop().keys()).copied().collect();
    for (i, (out, err)) in reports.iter().enumerate() {
        let blocks = parse_default(out);
        assert!(
            blocks.len() > 3,
            "{other} then {backend}, run {i}: too little traced:\n{out}\n{err}"
        );
        let theirs: Vec<&Block> = blocks
            .iter()
            .filter(|b| helpers.contains(&b.target_tid))
            .collect();
        assert!(
            theirs.is_empty(),
            "{other} then {backend}, run {i}: helpers {helpers:?} are targets: {theirs:#?}"
        );
    }
}

#[test]
fn no_report_holds_a_helper_of_this_run_or_another() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    for (other, backend) in [
        ("perf", "perf"),
        ("perf", "tracefs"),
        ("tracefs", "perf"),
        ("tracefs", "tracefs"),
    ] {
        helpers_of(other, backend);
    }
}

/// A program of no run, named as the helpers are (its file's name), is
/// traced like any other, whichever name it takes.
#[test]
fn a_process_merely_named_like_a_helper_is_reported() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("own-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("making a directory");
    for backend in ["perf", "tracefs"] {
        let tracer = start_traced(&["--backend", backend, "-K", "600"]);
        let mut fakes = Vec::new();
        for name in HELPER_NAMES {
            let fake = dir.join(name);
            std::fs::copy(workload("sleeploop"), &fake).expect("copying the workload");
            let run = Command::new(&fake)
                .args(["10", "20"])
                .env("OFFWAKE_PIN_CPU", "0")
                .stderr(Stdio::null())
                .spawn()
                .expect("starting the workload");
            fakes.push(run);
        }
        let pids: Vec<u32> = fakes.iter().map(std::process::Child::id).collect();
        for mut f in fakes {
            assert!(f.wait().expect("waiting for the workload").success());
        }
        let (out, err) = interrupt(tracer);
        let blocks = parse_default(&out);
        for (pid, name) in pids.iter().zip(HELPER_NAMES) {
            let slept: u64 = blocks
                .iter()
                .filter(|b| b.target_tid == *pid && b.target_comm == name)
                .map(|b| b.total)
                .sum();
            assert!(
                slept > 0,
                "{backend}: {name} {pid} slept {slept} us:\n{out}\n{err}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pids cgroup made for one test, removed when dropped.
struct PidsCgroup(PathBuf);

impl PidsCgroup {
    /// In the v1 pids hierarchy, else in the v2 one with the pids
    /// controller enabled for it.
    fn new() -> PidsCgroup {
        let name = format!("offwake-test-pids-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let parent = if v1.join("cgroup.procs").exists() {
            v1.to_path_buf()
        } else {
            let v2 = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
                .iter()
                .map(PathBuf::from)
                .find(|p| {
                    std::fs::read_to_string(p.join("cgroup.controllers"))
                        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
                })
                .expect("no cgroup hierarchy with the pids controller");
            let control = v2.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "pids") {
                std::fs::write(&control, "+pids").expect("enabling the pids controller");
            }
            v2
        };
        let dir = parent.join(name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        PidsCgroup(dir)
    }

    fn write(&self, file: &str, value: &str) {
        std::fs::write(self.0.join(file), value)
            .unwrap_or_else(|e| panic!("writing {value} to {file}: {e}"));
    }

    /// How many forks its limit refused.
    fn refused(&self) -> u64 {
        std::fs::read_to_string(self.0.join("pids.events"))
            .expect("reading pids.events")
            .lines()
            .find_map(|l| l.strip_prefix("max ")?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("pids.max"), "max");
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Once tracing runs, the tool's pids cgroup lets no task be made in it
/// any more (every pid taken, as far as the tool can tell): threads and
/// the holder of the events cannot be started. The run still ends with
/// status 0 and its report.
#[test]
fn a_run_that_can_make_no_more_tasks_still_reports() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let _serial = serial();
    let cgroup = PidsCgroup::new();
    let mut target = Command::new(workload("sleeploop"))
        .args(["100", "20"])
        .env("OFFWAKE_PIN_CPU", "0")
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the workload");
    let pid = target.id().to_string();
    // The shell moves itself into the cgroup, then becomes the tool.
    let mut run = Command::new("sh")
        .args([
            "-c",
            "echo $$ > \"$1/cgroup.procs\" && exec \"$2\" -p \"$3\" 2",
            "sh",
        ])
        .arg(&cgroup.0)
        .arg(env!("CARGO_BIN_EXE_offwake-perf"))
        .arg(&pid)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting offwake-perf");
    let mut stdout = std::io::BufReader::new(run.stdout.take().expect("piped stdout"));
    let mut header = String::new();
    stdout.read_line(&mut header).expect("reading the header");
    assert!(!header.is_empty(), "no header: the run did not start");
    // Tracing runs: from now on no task can be made in the cgroup.
    cgroup.write("pids.max", "1");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).expect("reading the report");
    let mut err = String::new();
    if let Some(mut e) = run.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).expect("reading stderr");
    }
    let status = run.wait().expect("waiting for offwake-perf");
    let _ = target.kill();
    let _ = target.wait();
    assert!(status.success(), "{status}: {header}{out}\n{err}");
    assert!(
        cgroup.refused() > 0,
        "the tool made no task once limited:\n{err}"
    );
    let slept: u64 = parse_default(&out)
        .iter()
        .filter(|b| b.target_tid.to_string() == pid && has(&b.target, "sleep_once"))
        .map(|b| b.total)
        .sum();
    assert!(slept > 0, "no sleep of the target reported:\n{out}\n{err}");
}
