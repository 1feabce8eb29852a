//! Python functions on blocked stacks: real CPython interpreters run
//! `pyqueue.py` (a consumer waiting on `queue.Queue.get` in its own
//! function, a producer napping in its own), and the tool's blocked
//! stacks must carry each side's function for nearly all of what the
//! program measured of its own waits, with `-- COMMAND`, `-p PID` and the
//! whole system. Debian's `python3.11` must be there (`.ci/run` installs
//! it); pyenv's builds of 3.11 to 3.13 are tried where present.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The workload, from the source tree.
fn program() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/pyqueue.py")
}

/// The interpreters to test: Debian's, and pyenv's 3.11 and later.
fn interpreters() -> Vec<PathBuf> {
    let debian = PathBuf::from("/usr/bin/python3.11");
    assert!(
        debian.exists(),
        "Debian's python3.11 is missing (.ci/run installs it)"
    );
    let mut found = vec![debian];
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.pyenv"));
    let mut pyenv: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let minor = name
                .strip_prefix("3.")
                .and_then(|r| r.split('.').next())
                .and_then(|m| m.parse::<u32>().ok());
            minor.is_some_and(|m| (11..=13).contains(&m))
        })
        .map(|e| e.path().join("bin/python3"))
        .filter(|p| p.exists())
        .collect();
    pyenv.sort();
    if pyenv.is_empty() {
        eprintln!("no pyenv build of 3.11 to 3.13 here: Debian's python3.11 only");
    }
    found.extend(pyenv);
    found
}

/// The number a workload printed as `name=` in `stderr`.
fn field(stderr: &str, name: &str) -> u64 {
    stderr
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{stderr}"))
}

/// The program's own measurement: (consumer, producer) microseconds.
fn measured(stderr: &str) -> (u64, u64) {
    (field(stderr, "consumer_us="), field(stderr, "producer_us="))
}

/// Of `blocks`, the blocked time whose target stack has a frame of
/// `function`, as the tool names Python frames (`name (file:line)`).
fn carried(blocks: &[Block], function: &str) -> u64 {
    let prefix = format!("{function} (pyqueue.py:");
    blocks
        .iter()
        .filter(|b| b.target.iter().any(|f| f.starts_with(&prefix)))
        .map(|b| b.total)
        .sum()
}

/// Checks that each side's function carries at least 90% of its own
/// measured waits, and no more than it measured.
fn assert_carried(blocks: &[Block], truth: (u64, u64), context: &str) {
    for (function, truth) in [("consume_items", truth.0), ("produce_items", truth.1)] {
        let got = carried(blocks, function);
        let share = got as f64 / truth.max(1) as f64;
        assert!(
            (0.9..=1.03).contains(&share),
            "{function}: {got} us of {truth} us measured ({share:.3}) carry it\n{context}"
        );
    }
    // At the line of the program that waits.
    let source = std::fs::read_to_string(program()).expect("reading pyqueue.py");
    let line = source
        .lines()
        .position(|l| l.trim() == "item = q.get()")
        .expect("the consumer's q.get() line")
        + 1;
    let at_line = format!("consume_items (pyqueue.py:{line})");
    assert!(
        blocks.iter().any(|b| b.target.contains(&at_line)),
        "no frame reads {at_line}\n{context}"
    );
    // Nested as the program calls them, with Queue.get between.
    let nested = blocks.iter().any(|b| {
        let at = |prefix: &str| b.target.iter().position(|f| f.starts_with(prefix));
        matches!(
            (at("Queue.get ("), at("consume_items (pyqueue.py:"), at("main (pyqueue.py:")),
            (Some(get), Some(consume), Some(main)) if get < consume && consume < main
        )
    });
    assert!(
        nested,
        "no stack reads main > consume_items > Queue.get\n{context}"
    );
}

/// `pyqueue.py 10 NAP` under `python`, as `-- COMMAND` (`python` run by
/// `wrapper`, if any) with `args` before it, pinned to CPU 0.
fn traced_command(
    python: &Path,
    args: &[&str],
    wrapper: &[&str],
) -> (Vec<Block>, (u64, u64), String) {
    let nap = format!("{:.3}", slowed(100) as f64 / 1000.0);
    let out = with_every_event_reported(
        || {
            let program = program();
            let mut all = args.to_vec();
            // Folded: the text blocks of another namespace's threads have
            // lines of their own (`ns tid:`).
            all.extend(["-f", "--"]);
            all.extend(wrapper);
            all.extend([
                python.to_str().unwrap(),
                program.to_str().unwrap(),
                "10",
                &nap,
            ]);
            run_env(&[("OFFWAKE_PIN_CPU", "0")], &all)
        },
        |o| String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let blocks = folded_blocks(&String::from_utf8_lossy(&out.stdout));
    (blocks, measured(&err), err)
}

/// `pyqueue.py` under `python`, gated and pinned to CPU 0, traced with
/// `args` (`PID` standing for its pid) until it ends.
fn traced_running(python: &Path, args: &[&str]) -> (Vec<Block>, (u64, u64), String) {
    let nap = format!("{:.3}", slowed(100) as f64 / 1000.0);
    // The notes of events the kernel hid are of any thread on the
    // machine here: the program's own totals are checked instead.
    let mut w = start_gated_env(
        python,
        &[program().to_str().unwrap(), "10", &nap],
        &[("OFFWAKE_PIN_CPU", "0")],
    );
    let pid = w.pid().to_string();
    let args: Vec<&str> = args
        .iter()
        .map(|&a| if a == "PID" { pid.as_str() } else { a })
        .collect();
    let tracer = start_traced(&args);
    if args.is_empty() {
        // Whole-system, the first stacks of every process on the machine
        // come at once (their maps and unwind tables read for each): a
        // wait that ends before the stages reach it keeps its native
        // frames (and is counted in a NOTE). Measure past that start.
        std::thread::sleep(std::time::Duration::from_millis(slowed(500)));
    }
    w.go();
    let truth = measured(&w.finish());
    // SAFETY: kill with the pid of a child of this process, not yet
    // waited for, and a valid signal.
    let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "interrupting offwake-perf");
    let (out, err) = tracer.finish();
    (parse_default(&out), truth, err)
}

/// Every format of one trace carries the Python frames: the text
/// report's total under `consume_items` is the pprof's (decoded by pprof-format),
/// and the SVG and speedscope files name the function.
fn assert_every_format_carries_them(python: &Path) {
    let dir = std::env::temp_dir().join(format!("offwake-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = |ext: &str| dir.join(format!("r.{ext}"));
    let (text, svg, json, pprof) = (path("txt"), path("svg"), path("json"), path("pb.gz"));
    let nap = format!("{:.3}", slowed(50) as f64 / 1000.0);
    let mut args = vec!["-o", text.to_str().unwrap()];
    for p in [&svg, &json, &pprof] {
        args.extend(["-o", p.to_str().unwrap()]);
    }
    let program = program();
    args.extend([
        "--",
        python.to_str().unwrap(),
        program.to_str().unwrap(),
        "4",
        &nap,
    ]);
    let out = run_env(&[("OFFWAKE_PIN_CPU", "0")], &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let read = |p: &Path| std::fs::read_to_string(p).expect("a report file");
    let name = "consume_items (pyqueue.py:";
    let text = read(&text);
    let body = text.split_once('\n').map_or("", |(_, rest)| rest);
    let in_text: u64 = parse_default(body)
        .iter()
        .filter(|b| b.target.iter().any(|f| f.starts_with(name)))
        .map(|b| b.total)
        .sum();
    assert!(in_text > 0, "no block carries {name}\n{err}");
    assert!(read(&svg).contains(name), "the SVG lacks {name}");
    assert!(
        read(&json).contains(name),
        "the speedscope file lacks {name}"
    );
    let in_pprof = pprof_total_with(&pprof, |f| f.starts_with(name));
    assert_eq!(in_pprof, in_text, "pprof against text under {name}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One test, so that no two traced interpreters share CPU 0 at once.
#[test]
fn python_functions_are_named_on_blocked_stacks() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for python in interpreters() {
        let (blocks, truth, err) = traced_command(&python, &[], &[]);
        assert_carried(
            &blocks,
            truth,
            &format!("{}: {blocks:#?}\n{err}", python.display()),
        );
    }
    // Under tracefs, the blocked half is unwound from the waiting thread.
    let debian = Path::new("/usr/bin/python3.11");
    let (blocks, truth, err) = traced_command(debian, &["--backend", "tracefs"], &[]);
    assert_carried(&blocks, truth, &format!("tracefs: {blocks:#?}\n{err}"));
    // In a PID namespace of its own, where CPython knows its threads by
    // other ids.
    let unshare = ["unshare", "--pid", "--fork", "--mount-proc"];
    let (blocks, truth, err) = traced_command(debian, &[], &unshare);
    assert_carried(
        &blocks,
        truth,
        &format!("PID namespace: {blocks:#?}\n{err}"),
    );
    // A running interpreter: Debian's, under -p and whole-system.
    let python = Path::new("/usr/bin/python3.11");
    for args in [&["-p", "PID"][..], &[]] {
        let (blocks, truth, err) = traced_running(python, args);
        // Whole system: only the workload's process counts.
        let blocks: Vec<Block> = blocks
            .into_iter()
            .filter(|b| b.target.iter().any(|f| f.contains("(pyqueue.py:")))
            .collect();
        assert_carried(&blocks, truth, &format!("{args:?}: {blocks:#?}\n{err}"));
    }
    assert_every_format_carries_them(python);
}

/// Waits shorter than the stages' delay get their functions from a read
/// made as soon as the reader saw their switch-out, and a read never goes
/// to a wait the thread left before it: `pynaps.py`'s ten threads wait
/// 5 ms on a futex in `short_nap` and 15 ms in nanosleep in `long_nap`, by
/// turns. The long naps end before the stages reach them, yet most of
/// their time carries `long_nap`; no futex wait carries `long_nap`, no
/// nanosleep `short_nap` (a read made after the thread moved on), and
/// neither function carries more than its thread measured.
#[test]
fn short_waits_have_their_functions_and_never_anothers() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/pynaps.py");
    let (short, long) = (slowed(5).to_string(), slowed(15).to_string());
    let out = run_env(
        &[("OFFWAKE_PIN_CPU", "0")],
        &[
            "-f",
            "--",
            "/usr/bin/python3.11",
            program.to_str().unwrap(),
            "10",
            "40",
            &short,
            &long,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let blocks = folded_blocks(&String::from_utf8_lossy(&out.stdout));
    let has = |b: &Block, prefix: &str| b.target.iter().any(|f| f.starts_with(prefix));
    let mut carried = [0u64; 2];
    for b in &blocks {
        let (futex, sleep) = (has(b, "futex_wait"), has(b, "do_nanosleep"));
        for (i, (function, own)) in [
            ("short_nap (pynaps.py:", futex),
            ("long_nap (pynaps.py:", sleep),
        ]
        .into_iter()
        .enumerate()
        {
            if has(b, function) {
                assert!(own, "{function} on another wait's stack: {b:#?}\n{err}");
                carried[i] += b.total;
            }
        }
    }
    let context = format!("{blocks:#?}\n{err}");
    let (short_us, long_us) = (field(&err, "short_us="), field(&err, "long_us="));
    assert!(carried[0] <= short_us * 103 / 100, "short: {context}");
    assert_ratio(
        &format!("long naps under long_nap ({context})"),
        carried[1],
        long_us,
        0.3,
        1.03,
    );
}
