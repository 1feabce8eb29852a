//! Java methods on blocked stacks: OpenJDK 17 runs `JQueue.java` (a
//! consumer waiting on `BlockingQueue.take` in its own method, a producer
//! napping with `Thread.sleep` in its own), with the JVM's default flags
//! and with every method compiled first (`-Xcomp`), and the tool's blocked
//! stacks must carry each side's method for nearly all of what the program
//! measured of its own waits, under `-- COMMAND` and `-p PID`, in every
//! format. `.ci/run` installs `openjdk-17-jdk-headless`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::*;

/// The workload's class, compiled once with `javac`.
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/JQueue.java");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("java");
        std::fs::create_dir_all(&dir).expect("a class directory");
        let status = std::process::Command::new("javac")
            .arg("-d")
            .arg(&dir)
            .arg(&source)
            .status()
            .expect("running javac (.ci/run installs openjdk-17-jdk-headless)");
        assert!(status.success(), "compiling JQueue.java");
        dir
    })
}

/// How the program runs: what `java` runs under, and its flags.
#[derive(Clone, Copy, Debug)]
struct Jvm<'a> {
    wrapper: &'a [&'a str],
    flags: &'a [&'a str],
}

const DEFAULT: Jvm = Jvm {
    wrapper: &[],
    flags: &[],
};

/// `java` as `jvm` says, running `JQueue N NAP`, pinned to CPU 0 by
/// `taskset`.
fn command(jvm: Jvm, n: &str, nap: &str) -> Vec<String> {
    let mut c: Vec<String> = jvm.wrapper.iter().map(|a| a.to_string()).collect();
    c.extend(["taskset", "-c", "0", "java", "-XX:+UseSerialGC"].map(String::from));
    c.extend(jvm.flags.iter().map(|f| f.to_string()));
    c.extend(["-cp", classes().to_str().unwrap(), "JQueue", n, nap].map(String::from));
    c
}

/// The program's own measurement: (consumer, producer) microseconds.
fn measured(stderr: &str) -> (u64, u64) {
    let field = |name: &str| -> u64 {
        stderr
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{stderr}"))
    };
    (field("consumer_us="), field("producer_us="))
}

/// The line of `JQueue.java` that reads `code`, as the tool names its
/// frame in `method` (`Class.method (File:line)`).
fn frame_at(method: &str, code: &str) -> String {
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/JQueue.java"),
    )
    .expect("reading JQueue.java");
    let line = source
        .lines()
        .position(|l| l.trim() == code)
        .unwrap_or_else(|| panic!("no line {code:?} in JQueue.java"))
        + 1;
    format!("JQueue.{method} (JQueue.java:{line})")
}

/// Of `blocks`, the blocked time whose target stack has the frame
/// `frame`.
fn carried(blocks: &[Block], frame: &str) -> u64 {
    blocks
        .iter()
        .filter(|b| b.target.iter().any(|f| f == frame))
        .map(|b| b.total)
        .sum()
}

/// Checks that each side's method, at the line that waits, carries at
/// least 90% of its own measured waits and no more than it measured,
/// nested as the program calls them.
fn assert_carried(blocks: &[Block], truth: (u64, u64), context: &str) {
    let sides = [
        ("consumeItems", "int item = q.take();", truth.0),
        ("produceItems", "Thread.sleep(nap);", truth.1),
    ];
    for (method, code, truth) in sides {
        let frame = frame_at(method, code);
        let got = carried(blocks, &frame);
        let share = got as f64 / truth.max(1) as f64;
        assert!(
            (0.9..=1.03).contains(&share),
            "{frame}: {got} us of {truth} us measured ({share:.3}) carry it\n{context}"
        );
    }
    let nested = blocks.iter().any(|b| {
        let at = |prefix: &str| b.target.iter().position(|f| f.starts_with(prefix));
        matches!(
            (
                at("java.util.concurrent.LinkedBlockingQueue.take ("),
                at("JQueue.consumeItems ("),
                at("JQueue.main (")
            ),
            (Some(take), Some(consume), Some(main)) if take < consume && consume < main
        )
    });
    assert!(
        nested,
        "no stack reads main > consumeItems > LinkedBlockingQueue.take\n{context}"
    );
}

fn nap() -> String {
    slowed(100).to_string()
}

/// The program as `jvm` says, traced as `-- COMMAND` with `args` before
/// it.
fn traced_command(args: &[&str], jvm: Jvm) -> (Vec<Block>, (u64, u64), String) {
    // A JVM's own threads' waits whose wakeup the kernel hid are theirs
    // (not retried, unlike with `with_every_event_reported`): the
    // program's two sides are checked against their own measurements.
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend(["-f", "--"].map(String::from));
    all.extend(command(jvm, "10", &nap()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = run_env(&[], &all);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let blocks = folded_blocks(&String::from_utf8_lossy(&out.stdout));
    (blocks, measured(&err), err)
}

/// The program, gated, traced with `-p PID` until it ends.
fn traced_running() -> (Vec<Block>, (u64, u64), String) {
    let command = command(DEFAULT, "10", &nap());
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let mut w = start_gated_env(Path::new(&command[0]), &args, &[]);
    let pid = w.pid().to_string();
    // The JVM is up once it has started its threads.
    wait_for("the JVM's threads", || thread_count(w.pid()) > 8);
    let tracer = start_traced(&["-p", &pid]);
    w.go();
    let truth = measured(&w.finish());
    // SAFETY: kill with the pid of a child of this process, not yet
    // waited for, and a valid signal.
    let rc = unsafe { libc::kill(tracer.child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "interrupting offwake-perf");
    let (out, err) = tracer.finish();
    (parse_default(&out), truth, err)
}

/// Every format of one trace carries the Java frames: the text report's
/// total under `consumeItems` is the pprof's (decoded by pprof-format),
/// and the SVG and speedscope files name the method.
fn assert_every_format_carries_them() {
    let dir = std::env::temp_dir().join(format!("offwake-java-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = |ext: &str| dir.join(format!("r.{ext}"));
    let (text, svg, json, pprof) = (path("txt"), path("svg"), path("json"), path("pb.gz"));
    let mut args: Vec<String> = Vec::new();
    for p in [&text, &svg, &json, &pprof] {
        args.extend(["-o".to_string(), p.display().to_string()]);
    }
    args.push("--".into());
    args.extend(command(DEFAULT, "4", &slowed(50).to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_env(&[], &args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let read = |p: &Path| std::fs::read_to_string(p).expect("a report file");
    let name = frame_at("consumeItems", "int item = q.take();");
    let name = name.as_str();
    let text = read(&text);
    let body = text.split_once('\n').map_or("", |(_, rest)| rest);
    let in_text = carried(&parse_default(body), name);
    assert!(in_text > 0, "no block carries {name}\n{err}");
    assert!(read(&svg).contains(name), "the SVG lacks {name}");
    assert!(
        read(&json).contains(name),
        "the speedscope file lacks {name}"
    );
    let in_pprof = pprof_total_with(&pprof, |f| f == name);
    assert_eq!(in_pprof, in_text, "pprof against text under {name}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One test, so that no two traced JVMs share CPU 0 at once.
#[test]
fn java_methods_are_named_on_blocked_stacks() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let compiled = Jvm {
        flags: &["-Xcomp"],
        ..DEFAULT
    };
    // In a PID namespace of its own, where the JVM knows its threads by
    // other ids.
    let namespaced = Jvm {
        wrapper: &["unshare", "--pid", "--fork", "--mount-proc"],
        ..DEFAULT
    };
    let runs: [(&[&str], Jvm); 4] = [
        (&[], DEFAULT),
        (&[], compiled),
        (&["--backend", "tracefs"], DEFAULT),
        (&[], namespaced),
    ];
    for (args, jvm) in runs {
        let (blocks, truth, err) = traced_command(args, jvm);
        let context = format!("{args:?} {jvm:?}: {blocks:#?}\n{err}");
        assert_carried(&blocks, truth, &context);
    }
    let (blocks, truth, err) = traced_running();
    let blocks: Vec<Block> = blocks
        .into_iter()
        .filter(|b| b.target_comm != "offwake-perf")
        .collect();
    assert_carried(&blocks, truth, &format!("-p: {blocks:#?}\n{err}"));
    assert_every_format_carries_them();
}
