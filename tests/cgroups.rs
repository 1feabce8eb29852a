//! `--cgroup` and `--per-cgroup` against real cgroups: a sleeper of known
//! blocked time in a fresh cgroup beside an identical decoy outside it,
//! nested cgroups, a thread moved in during the trace, a cgroup removed
//! during it, a path that does not exist, a systemd unit by its name, and
//! a target in a PID namespace of its own.
//! The sleepers are pinned to CPU 0, where this project's VM kernel
//! reports every scheduler event.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// Where perf's cgroup filter works on the test machines: the v2 mount
/// (a hybrid host's `unified`, else `/sys/fs/cgroup` itself).
fn v2_mount() -> PathBuf {
    let hybrid = Path::new("/sys/fs/cgroup/unified");
    if hybrid.join("cgroup.procs").exists() {
        hybrid.to_path_buf()
    } else {
        PathBuf::from("/sys/fs/cgroup")
    }
}

/// A cgroup made for one test, with the cgroups below it, removed (its
/// processes killed) when dropped.
struct TestCgroup {
    dir: PathBuf,
    /// Its path relative to the mount, as `--cgroup` takes it.
    name: String,
}

impl TestCgroup {
    fn new(tag: &str) -> TestCgroup {
        let name = format!("offwake-test-{tag}-{}", std::process::id());
        let dir = v2_mount().join(&name);
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        TestCgroup { dir, name }
    }

    /// A cgroup below this one.
    fn child(&self, name: impl AsRef<std::ffi::OsStr>) -> PathBuf {
        let dir = self.dir.join(name.as_ref());
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        dir
    }
}

/// Moves process `pid` into the cgroup at `dir`.
fn move_into(dir: &Path, pid: u32) {
    std::fs::write(dir.join("cgroup.procs"), pid.to_string())
        .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", dir.display()));
}

/// Removes `dir` and the cgroups below it, deepest first, once their
/// processes are gone.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..100 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        remove_tree(&self.dir);
    }
}

/// The tool on `backend`, tracing `cg` for `seconds`, once it is tracing.
fn trace_cgroup(backend: &str, cg: &TestCgroup, seconds: &str) -> Running {
    start_traced(&[
        "--backend",
        backend,
        "--call-graph",
        "fp",
        "--cgroup",
        &cg.name,
        seconds,
    ])
}

/// `sleeploop N MS`, gated, pinned to CPU 0.
fn sleeper(n: u64, ms: u64) -> Gated {
    start_gated_env(
        &workload("sleeploop"),
        &[&n.to_string(), &ms.to_string()],
        &[("OFFWAKE_PIN_CPU", "0")],
    )
}

/// The blocks of process `pid` in a text report.
fn blocks_of(blocks: &[Block], pid: u32) -> Vec<&Block> {
    blocks.iter().filter(|b| b.target_tid == pid).collect()
}

/// The blocked time of `blocks` in `sleep_once`.
fn slept(blocks: &[&Block]) -> u64 {
    blocks
        .iter()
        .filter(|b| has(&b.target, "sleep_once"))
        .map(|b| b.total)
        .sum()
}

#[test]
fn a_cgroups_sleeper_is_all_that_is_traced() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    sleeper_and_decoy("perf");
}

#[test]
fn a_cgroups_sleeper_is_all_that_is_traced_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    sleeper_and_decoy("tracefs");
}

/// The sleeper in a fresh cgroup, an identical decoy outside it: the
/// report holds the sleeper's whole blocked time, as it measured it, and
/// nothing of the decoy or of any other task.
fn sleeper_and_decoy(backend: &str) {
    let cg = TestCgroup::new(&format!("pair-{backend}"));
    let (n, ms) = (20, slowed(50));
    let (out, err, truth, pid, decoy_pid) = with_every_event_reported(
        || {
            let mut inside = sleeper(n, ms);
            let mut decoy = sleeper(n, ms);
            move_into(&cg.dir, inside.pid());
            let seconds = (n * ms / 1000 + 2).to_string();
            let tracer = trace_cgroup(backend, &cg, &seconds);
            inside.go();
            decoy.go();
            let pids = (inside.pid(), decoy.pid());
            let truth = ground_truth(&inside.finish());
            decoy.finish();
            let (out, err) = tracer.finish();
            (out, err, truth, pids.0, pids.1)
        },
        |r| r.1.clone(),
    );
    let blocks = parse_default(&out);
    let context = format!("{out}\n{err}");
    let others: Vec<&Block> = blocks.iter().filter(|b| b.target_tid != pid).collect();
    assert!(
        others.is_empty(),
        "{backend}: tasks outside the cgroup (decoy {decoy_pid}) were traced: {others:#?}\n{err}"
    );
    let total = slept(&blocks_of(&blocks, pid));
    assert_slept(backend, total, n, ms, &context);
    assert_ratio("the cgroup's sleeper", total, truth, 0.97, 1.03);
}

/// `--cgroup` of a parent takes in the cgroups below it, and
/// `--per-cgroup` names each entry's own cgroup at the root of its line.
#[test]
fn nested_cgroups_are_traced_and_named_with_per_cgroup() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let cg = TestCgroup::new("nested");
    let inner = cg.child("inner");
    let (n, ms) = (10, slowed(50));
    let mut w = sleeper(n, ms);
    move_into(&inner, w.pid());
    let seconds = (n * ms / 1000 + 2).to_string();
    let tracer = tool()
        .args([
            "--call-graph",
            "fp",
            "-f",
            "--per-cgroup",
            "--cgroup",
            &cg.name,
            &seconds,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting offwake-perf");
    // -f prints no header: give tracing a moment to start.
    std::thread::sleep(Duration::from_millis(500));
    w.go();
    let truth = ground_truth(&w.finish());
    let out = tracer.wait_with_output().expect("waiting for offwake-perf");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let root = format!("/{}/inner", cg.name);
    let mut total = 0;
    for line in stdout.lines() {
        let (first, rest) = line.split_once(';').unwrap_or(("", ""));
        assert_eq!(first, root, "not the sleeper's cgroup: {line}\n{stderr}");
        let lines = parse_folded(rest);
        let l = &lines[0];
        assert_eq!(l.target_comm, "sleeploop", "{line}");
        if has(&l.target, "sleep_once") {
            total += l.total;
        }
    }
    assert_slept("nested", total, n, ms, &format!("{stdout}\n{stderr}"));
    assert_ratio("the inner cgroup's sleeper", total, truth, 0.97, 1.03);
}

/// Cgroups whose names are not UTF-8 (`v\xff`, `v\xfe`) print their
/// bytes as `\xNN`, apart from each other and from a name holding a real
/// U+FFFD.
#[test]
fn cgroup_names_that_are_not_utf8_print_their_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let cg = TestCgroup::new("bytes");
    let names: [&[u8]; 3] = [b"v\xff", b"v\xfe", "v\u{FFFD}".as_bytes()];
    let (n, ms) = (10, slowed(50));
    let mut sleepers: Vec<Gated> = names
        .iter()
        .map(|name| {
            let dir = cg.child(std::ffi::OsStr::from_bytes(name));
            let w = sleeper(n, ms);
            move_into(&dir, w.pid());
            w
        })
        .collect();
    let seconds = (n * ms / 1000 + 2).to_string();
    let tracer = start_traced(&[
        "--call-graph",
        "fp",
        "--per-cgroup",
        "--cgroup",
        &cg.name,
        &seconds,
    ]);
    for w in &mut sleepers {
        w.go();
    }
    let pids: Vec<u32> = sleepers.iter().map(Gated::pid).collect();
    for w in sleepers {
        w.finish();
    }
    let (out, err) = tracer.finish();
    for (pid, shown) in pids.iter().zip(["v\\xff", "v\\xfe", "v\u{FFFD}"]) {
        let target = format!("    target:          sleeploop {pid}\n");
        let cgroup = format!("    cgroup:          /{}/{shown}\n", cg.name);
        let blocks: Vec<&str> = out.split("\n\n").filter(|b| b.contains(&target)).collect();
        assert!(!blocks.is_empty(), "no block of {pid}:\n{out}\n{err}");
        for b in blocks {
            assert!(b.contains(&cgroup), "not in {cgroup:?}:\n{b}\n{err}");
        }
    }
}

/// A cgroup path that does not exist stops the run before tracing, with
/// exit status 1 and its name.
#[test]
fn a_cgroup_that_does_not_exist_is_refused_before_tracing() {
    let _suite = suite(module_path!());
    let name = format!("offwake-no-such-cgroup-{}", std::process::id());
    let out = tool()
        .args(["--cgroup", &name, "1"])
        .output()
        .expect("running offwake-perf");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&name), "{stderr}");
    assert!(out.stdout.is_empty(), "tracing started: {:?}", out.stdout);
}

#[test]
fn a_thread_moved_in_is_traced_from_then_on() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    moved_in("perf");
}

#[test]
fn a_thread_moved_in_is_traced_from_then_on_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    moved_in("tracefs");
}

/// A sleeper moved into the (empty) traced cgroup halfway through its
/// sleeps: about the second half of its blocked time is reported, and none
/// of the first. Then the cgroup is removed, which ends nothing: the run
/// lasts its time and reports.
fn moved_in(backend: &str) {
    let cg = TestCgroup::new(&format!("move-{backend}"));
    let (n, ms) = (40, slowed(50));
    let mut w = sleeper(n, ms);
    let pid = w.pid();
    let seconds = (n * ms / 1000 + 3).to_string();
    let tracer = trace_cgroup(backend, &cg, &seconds);
    w.go();
    std::thread::sleep(Duration::from_millis(n * ms / 2));
    move_into(&cg.dir, pid);
    let truth = ground_truth(&w.finish());
    remove_tree(&cg.dir);
    assert!(!cg.dir.exists(), "the cgroup was not removed");
    let (out, err) = tracer.finish();
    let total = slept(&blocks_of(&parse_default(&out), pid));
    // Half of it, give or take the start-up and a round's delay.
    assert!(
        total * 10 >= truth * 3 && total * 10 <= truth * 7,
        "{backend}: {total} us of {truth} us traced after the move at half time\n{out}\n{err}"
    );
}

/// A systemd transient unit, named by its unit name.
#[test]
fn a_systemd_unit_is_found_by_its_name() {
    let _suite = suite(module_path!());
    if !Path::new("/run/systemd/system").exists() {
        eprintln!("skipping: systemd is not running here (no /run/systemd/system)");
        return;
    }
    if !live() {
        return;
    }
    let unit = format!("offwake-test-{}.scope", std::process::id());
    let (n, ms) = (10, slowed(50));
    let mut w = Command::new("systemd-run")
        .args(["--scope", "--unit", &unit, "--quiet", "--"])
        .arg(workload("sleeploop"))
        .args([&n.to_string(), &ms.to_string(), "go"])
        .env("OFFWAKE_PIN_CPU", "0")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting systemd-run");
    let pid = w.id();
    wait_for("the unit's cgroup", || {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(&unit))
    });
    let seconds = (n * ms / 1000 + 2).to_string();
    let tracer = start_traced(&["--call-graph", "fp", "--cgroup", &unit, &seconds]);
    use std::io::Write;
    w.stdin
        .take()
        .expect("piped stdin")
        .write_all(b"g")
        .expect("releasing the workload");
    let out = w.wait_with_output().expect("waiting for the unit");
    let truth = ground_truth(&String::from_utf8_lossy(&out.stderr));
    let (report, err) = tracer.finish();
    let total = slept(&blocks_of(&parse_default(&report), pid));
    assert_ratio("the unit's sleeper", total, truth, 0.97, 1.03);
    assert!(err.contains("records read"), "{err}");
}

/// A process in a PID namespace of its own is named by the tool's
/// namespace's id, as every id is, and its text block adds its id there.
#[test]
fn a_target_in_another_pid_namespace_shows_its_id_there() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let (n, ms) = (5, slowed(50));
    let mut w = Command::new("unshare")
        .args(["--pid", "--fork", "--"])
        .arg(workload("sleeploop"))
        .args([&n.to_string(), &ms.to_string(), "go"])
        .env("OFFWAKE_PIN_CPU", "0")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting unshare");
    let mut inner = 0;
    wait_for("the namespace's first process", || {
        inner = children_of(w.id()).first().copied().unwrap_or(0);
        inner != 0
    });
    let pid = inner.to_string();
    let tracer = start_traced(&["--call-graph", "fp", "-p", &pid, "2"]);
    use std::io::Write;
    w.stdin
        .take()
        .expect("piped stdin")
        .write_all(b"g")
        .expect("releasing the workload");
    assert!(w.wait().expect("waiting for unshare").success());
    let (out, err) = tracer.finish();
    let target = format!("    target:          sleeploop {pid}\n");
    let blocks: Vec<&str> = out.split("\n\n").filter(|b| b.contains(&target)).collect();
    assert!(!blocks.is_empty(), "no block of {pid}:\n{out}\n{err}");
    for b in blocks {
        assert!(
            b.contains(&format!("{target}    ns tid:          1\n")),
            "the namespace's id is missing:\n{b}"
        );
    }
}

#[test]
fn processes_started_in_a_cgroup_are_traced() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    started_inside("perf");
}

#[test]
fn processes_started_in_a_cgroup_are_traced_tracefs() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    started_inside("tracefs");
}

/// A shell in the cgroup starts a sleeper ten times, each a process that
/// lives 50 ms and is gone before the tool reads its next round: each is
/// traced whole (under tracefs, from the cgroup it was created in).
fn started_inside(backend: &str) {
    let cg = TestCgroup::new(&format!("spawn-{backend}"));
    let n = 10u64;
    let (report, err, truth) =
        with_every_event_reported(|| start_inside_once(backend, &cg, n), |r| r.1.clone());
    let blocks = parse_default(&report);
    let sleeps: Vec<&Block> = blocks
        .iter()
        // By the kernel frame: under tracefs, the user frames of a process
        // gone before its map was read are unknown.
        .filter(|b| b.target_comm == "sleeploop" && has(&b.target, "do_nanosleep"))
        .collect();
    let mut pids: Vec<u32> = sleeps.iter().map(|b| b.target_tid).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(
        pids.len() as u64,
        n,
        "{backend}: not every process:\n{report}\n{err}"
    );
    let total: u64 = sleeps.iter().map(|b| b.total).sum();
    assert_ratio("the processes' sleeps", total, truth, 0.97, 1.03);
}

/// One run of [`started_inside`]: the report, the tool's stderr, and the
/// processes' own measured blocked time.
fn start_inside_once(backend: &str, cg: &TestCgroup, n: u64) -> (String, String, u64) {
    use std::io::Write;
    let ms = slowed(50);
    // Pinned from the start, with every process it starts: this VM's
    // kernel hides the scheduler events of CPU 1's idle task.
    let mut sh = Command::new("taskset")
        .args([
            "-c",
            "0",
            "sh",
            "-c",
            "read go; i=0; while [ $i -lt \"$1\" ]; do \"$0\" 1 \"$2\"; i=$((i+1)); done",
        ])
        .arg(workload("sleeploop"))
        .args([n.to_string(), ms.to_string()])
        .env("OFFWAKE_PIN_CPU", "0")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting sh");
    move_into(&cg.dir, sh.id());
    let seconds = (n * ms / 1000 + 3).to_string();
    let tracer = trace_cgroup(backend, cg, &seconds);
    sh.stdin
        .take()
        .expect("piped stdin")
        .write_all(b"g\n")
        .expect("releasing the shell");
    let out = sh.wait_with_output().expect("waiting for sh");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let truth: u64 = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("blocked_us=")?.trim().parse::<u64>().ok())
        .sum();
    let (report, err) = tracer.finish();
    (report, err, truth)
}
