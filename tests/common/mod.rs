//! Shared helpers for the integration tests: root gating, building the C
//! workloads, running the tool, and parsing its outputs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Condvar, Mutex, PoisonError};

/// True when the live tests can run. Without root they are skipped, unless
/// `OFFWAKE_REQUIRE_LIVE=1` (set by `.ci/run`), when they fail.
pub fn live() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        return true;
    }
    if std::env::var("OFFWAKE_REQUIRE_LIVE").as_deref() == Ok("1") {
        panic!("this test needs root (OFFWAKE_REQUIRE_LIVE=1 forbids skipping)");
    }
    eprintln!("skipping: needs root (set OFFWAKE_REQUIRE_LIVE=1 to make this a failure)");
    false
}

/// Which suite's tests are running, and how many of them.
struct Turn {
    suite: Option<&'static str>,
    running: usize,
}

static TURN: Mutex<Turn> = Mutex::new(Turn {
    suite: None,
    running: 0,
});
static TURN_CHANGED: Condvar = Condvar::new();

/// Held by a test while it runs: see [`suite`].
pub struct SuiteTurn;

/// Waits until no test of another suite runs, then runs with the tests of
/// `suite` (a module of this binary). Each suite's tests may run at the
/// same time, as each suite was written for, but never beside another
/// suite's: one suite spins a CPU, another counts every record the kernel
/// delivers, a third plants stale ftrace instances that any run removes.
pub fn suite(suite: &'static str) -> SuiteTurn {
    let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    while turn.suite.is_some_and(|s| s != suite) {
        turn = TURN_CHANGED
            .wait(turn)
            .unwrap_or_else(PoisonError::into_inner);
    }
    turn.suite = Some(suite);
    turn.running += 1;
    SuiteTurn
}

impl Drop for SuiteTurn {
    fn drop(&mut self) {
        let mut turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        turn.running -= 1;
        if turn.running == 0 {
            turn.suite = None;
            TURN_CHANGED.notify_all();
        }
    }
}

/// The built tool, without debuginfod servers the environment may name:
/// a test that wants one sets it.
pub fn tool() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_offwake-perf"));
    cmd.env_remove("DEBUGINFOD_URLS");
    cmd
}

static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);

/// The compiler flags of every workload, shared with `tests/vm/run`, which
/// builds them on the host for guests that have no compiler.
const WORKLOAD_FLAGS: &str = include_str!("../workloads/FLAGS");

/// Compiles `tests/workloads/<name>.c` (or `.cpp`, or `.rs`) once per test
/// binary and returns the executable's path. C and C++ get the flags in
/// `tests/workloads/FLAGS` (frame pointers and debug info); a source's own
/// `// FLAGS: ...` line adds to them (and is all a Rust source gets, with
/// `rustc`). With `OFFWAKE_WORKLOADS=DIR` (set inside the test VMs) it
/// returns the prebuilt `DIR/<name>` instead, and fails when that is
/// missing. `tests/vm/run` builds them by the same rules.
pub fn workload(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("OFFWAKE_WORKLOADS") {
        let path = Path::new(&dir).join(name);
        assert!(
            path.is_file(),
            "OFFWAKE_WORKLOADS has no prebuilt {}",
            path.display()
        );
        return path;
    }
    let mut guard = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(p) = map.get(name) {
        return p.clone();
    }
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads");
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
    std::fs::create_dir_all(&out_dir).expect("creating the workload directory");
    let out = out_dir.join(name);
    let (compiler, src, common) = ["c", "cpp", "rs"]
        .iter()
        .map(|ext| src_dir.join(format!("{name}.{ext}")))
        .find(|p| p.exists())
        .map(|src| match src.extension().and_then(|e| e.to_str()) {
            Some("c") => ("cc", src, WORKLOAD_FLAGS),
            Some("cpp") => ("c++", src, WORKLOAD_FLAGS),
            _ => ("rustc", src, "--edition 2021"),
        })
        .unwrap_or_else(|| panic!("no workload source for {name}"));
    let text = std::fs::read_to_string(&src).expect("reading the workload source");
    let own = text
        .lines()
        .find_map(|l| l.strip_prefix("// FLAGS: "))
        .unwrap_or("");
    let status = Command::new(compiler)
        .args(common.split_whitespace())
        .args(own.split_whitespace())
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(status.success(), "compiling {}", src.display());
    map.insert(name.to_string(), out.clone());
    out
}

/// Polls `ready` every 10 ms until it holds, failing with `what` after
/// 30 s. For tests that must not race a process's start-up, however slow the
/// machine (the kernel-matrix VMs emulate their CPUs).
pub fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The pids whose parent is `pid`, from `/proc/*/stat`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("listing /proc").flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // The parent is the second field after the parenthesised comm.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// How many threads process `pid` has now (0 once it is gone).
pub fn thread_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// Asserts that `total_us` of blocked time counts all of `n` sleeps of
/// `ms` each. A sleep's interval off the CPU runs from its switch-out to
/// its switch-in, and its timer was armed a moment before that switch-out
/// (longer when something interrupts the thread in between, on a busy
/// machine): so it can be a little shorter than the length slept, and
/// 97% of it is asked for. One sleep missing would leave far less.
pub fn assert_slept(what: &str, total_us: u64, n: u64, ms: u64, context: &str) {
    assert!(
        total_us * 100 >= n * ms * 1000 * 97,
        "{what}: {total_us} us is less than 97% of {n} x {ms} ms\n{context}"
    );
}

/// `ms` milliseconds, stretched `OFFWAKE_TEST_SLOWDOWN` times (a whole
/// number; 1 when unset), which the emulated test VMs set (tests/vm/run).
/// Each blocked interval has a fixed cost outside any tracer's view, from
/// the workload's clock reading to the switch and back (the system call's
/// entry and return): a few microseconds here, but hundreds on an emulated
/// CPU, too large a share of a 10 ms sleep for a ground-truth comparison.
/// Workloads whose intervals are compared with their own measurement take
/// their lengths from here.
pub fn slowed(ms: u64) -> u64 {
    let factor = std::env::var("OFFWAKE_TEST_SLOWDOWN")
        .ok()
        .map(|v| {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("OFFWAKE_TEST_SLOWDOWN={v:?} is not a whole number"))
        })
        .unwrap_or(1);
    ms * factor.max(1)
}

/// Asserts `got` is within [lo, hi] × `expected`.
pub fn assert_ratio(what: &str, got: u64, expected: u64, lo: f64, hi: f64) {
    let ratio = got as f64 / expected as f64;
    assert!(
        ratio >= lo && ratio <= hi,
        "{what}: measured {got} us vs expected {expected} us (ratio {ratio:.4}, allowed {lo}..{hi})"
    );
}

/// The ground truth a workload prints on stderr as `blocked_us=<n>`.
pub fn ground_truth(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("blocked_us="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no blocked_us= line in:\n{stderr}"))
}

/// Starts the tool with `args` and returns once it has printed its header
/// (tracing is active). Only for the default (non-folded) output.
pub struct Running {
    pub child: Child,
    reader: BufReader<std::process::ChildStdout>,
    pub header: String,
}

pub fn start_traced(args: &[&str]) -> Running {
    let mut child = tool()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting offwake-perf");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    let mut header = String::new();
    reader.read_line(&mut header).expect("reading the header");
    if header.is_empty() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("offwake-perf printed no header; stderr:\n{err}");
    }
    Running {
        child,
        reader,
        header,
    }
}

impl Running {
    /// Waits for the tool to finish; returns (rest of stdout, stderr).
    pub fn finish(mut self) -> (String, String) {
        let mut out = String::new();
        self.reader
            .read_to_string(&mut out)
            .expect("reading stdout");
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).expect("reading stderr");
        }
        let status = self.child.wait().expect("waiting for offwake-perf");
        assert!(status.success(), "offwake-perf failed: {status}\n{err}");
        (out, err)
    }
}

/// A workload started with `go` as its last argument: it waits for a byte
/// on stdin before doing its measured work.
pub struct Gated {
    pub child: Child,
}

pub fn start_gated(path: &Path, args: &[&str]) -> Gated {
    start_gated_env(path, args, &[])
}

/// The pipe-wakeup workload (`pipewake K MS go`), gated, pinned to CPU 0:
/// this project's VM kernel never reports a switch out of CPU 1's idle
/// task, to ftrace or perf. perf's context-switch records make up for it;
/// ftrace has nothing that could, so under tracefs a reader woken on an
/// idle CPU 1 loses that interval (counted and reported by the tool).
pub fn start_pipewake_pinned(k: u64, ms: u64) -> Gated {
    start_gated_env(
        &workload("pipewake"),
        &[&k.to_string(), &ms.to_string()],
        &[("OFFWAKE_PIN_CPU", "0")],
    )
}

/// [`start_gated`] with extra environment variables.
pub fn start_gated_env(path: &Path, args: &[&str], env: &[(&str, &str)]) -> Gated {
    let child = Command::new(path)
        .args(args)
        .envs(env.iter().copied())
        .arg("go")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the workload");
    Gated { child }
}

impl Gated {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn go(&mut self) {
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(b"g").expect("releasing the workload");
        stdin.flush().expect("flushing");
    }

    /// Waits for exit and returns its stderr.
    pub fn finish(self) -> String {
        let out = self.child.wait_with_output().expect("waiting for workload");
        assert!(out.status.success(), "workload failed: {:?}", out.status);
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// Parts of the tool's `NOTE:` lines for intervals whose end the kernel did
/// not report: dropped for a switch-in never reported, or counted with an
/// empty waker for a wakeup never reported.
pub const UNREPORTED: [&str; 2] = ["never reported the switch-in", "no wakeup was read"];

/// Runs `attempt` (a whole traced run) up to three times, until the tool's
/// stderr, which `stderr` picks out of the result, has none of the
/// [`UNREPORTED`] notes, and returns that run. The test VM's kernel reports
/// no scheduler event that happens while a thread of the VM's own init
/// process runs (`tokio-rt-worker`), such as a timer waking the workload
/// and the switch to it, nor any from CPU 1's idle task: the tool
/// drops or counts such an interval, which is right, but the workload's
/// total then falls short, or its waker is missing, for a reason outside
/// the tool. A run without the notes is checked in full; when every attempt
/// has one, the test fails.
pub fn with_every_event_reported<T>(
    mut attempt: impl FnMut() -> T,
    stderr: impl Fn(&T) -> String,
) -> T {
    let mut notes = Vec::new();
    for _ in 0..3 {
        let result = attempt();
        let err = stderr(&result);
        match err
            .lines()
            .find(|l| UNREPORTED.iter().any(|u| l.contains(u)))
        {
            None => return result,
            Some(note) => {
                eprintln!("retrying: the kernel hid an event: {note}");
                notes.push(note.to_owned());
            }
        }
    }
    panic!("the kernel hid events in all three attempts: {notes:?}");
}

/// Runs the tool with extra environment variables (inherited by a
/// `-- COMMAND`).
pub fn run_env(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = tool();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("running offwake-perf")
}

pub fn run(args: &[&str]) -> Output {
    tool().args(args).output().expect("running offwake-perf")
}

/// One line of folded output, split into its two sides.
#[derive(Debug, Clone)]
pub struct Folded {
    pub target_comm: String,
    /// Target frames, outermost first (user then kernel).
    pub target: Vec<String>,
    /// Waker frames, innermost first (kernel then user).
    pub waker: Vec<String>,
    pub waker_comm: String,
    pub total: u64,
}

pub fn parse_folded(text: &str) -> Vec<Folded> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (stack, total) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no total in folded line {line:?}"));
            let total: u64 = total
                .parse()
                .unwrap_or_else(|_| panic!("bad total in folded line {line:?}"));
            let fields: Vec<&str> = stack.split(';').collect();
            let sep = fields
                .iter()
                .position(|f| *f == "--")
                .unwrap_or_else(|| panic!("no -- in folded line {line:?}"));
            assert!(fields.len() >= 3, "short folded line {line:?}");
            for (i, f) in fields.iter().enumerate() {
                if i != fields.len() - 1 {
                    assert!(!f.is_empty(), "empty field in folded line {line:?}");
                }
            }
            Folded {
                target_comm: fields[0].to_string(),
                target: fields[1..sep].iter().map(|s| s.to_string()).collect(),
                waker: fields[sep + 1..fields.len() - 1]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                waker_comm: fields[fields.len() - 1].to_string(),
                total,
            }
        })
        .collect()
}

/// One block of the default output.
#[derive(Debug, Clone)]
pub struct Block {
    pub waker_comm: String,
    pub waker_tid: u32,
    /// Waker frames as printed (outermost first).
    pub waker: Vec<String>,
    /// Target frames as printed (innermost first).
    pub target: Vec<String>,
    pub target_comm: String,
    pub target_tid: u32,
    pub total: u64,
}

fn label(line: &str, name: &str) -> Option<(String, u32)> {
    let rest = line.strip_prefix(&format!("    {name:<16} "))?;
    let (comm, tid) = rest.rsplit_once(' ')?;
    Some((comm.to_string(), tid.parse().ok()?))
}

/// Parses the default multi-line output (after the header), checking its
/// layout strictly as it goes.
pub fn parse_default(text: &str) -> Vec<Block> {
    let mut lines = text.lines().peekable();
    assert_eq!(
        lines.next(),
        Some(""),
        "report must start with a blank line"
    );
    let mut blocks = Vec::new();
    while let Some(first) = lines.next() {
        let (waker_comm, waker_tid) = label(first, "waker:")
            .unwrap_or_else(|| panic!("expected a waker: line, got {first:?}"));
        let mut waker = Vec::new();
        loop {
            let l = lines.next().expect("unterminated block");
            if l == format!("    {:<16} {}", "--", "--") {
                break;
            }
            waker.push(
                l.strip_prefix("    ")
                    .unwrap_or_else(|| panic!("bad frame line {l:?}"))
                    .to_string(),
            );
        }
        let mut target = Vec::new();
        let (target_comm, target_tid) = loop {
            let l = lines.next().expect("unterminated block");
            if let Some(t) = label(l, "target:") {
                break t;
            }
            target.push(
                l.strip_prefix("    ")
                    .unwrap_or_else(|| panic!("bad frame line {l:?}"))
                    .to_string(),
            );
        };
        let total_line = lines.next().expect("missing total");
        let total = total_line
            .strip_prefix("        ")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("bad total line {total_line:?}"));
        assert_eq!(lines.next(), Some(""), "block must end with a blank line");
        blocks.push(Block {
            waker_comm,
            waker_tid,
            waker,
            target,
            target_comm,
            target_tid,
            total,
        });
    }
    blocks
}

pub fn has(frames: &[String], name: &str) -> bool {
    frames.iter().any(|f| f == name)
}

/// Reads an SVG flame graph back with an XML parser that refuses what XML
/// 1.0 forbids, as a browser does: the name of each frame, as its `<title>`
/// holds it before ` (N us, P%)`. An error when it is not well-formed.
pub fn svg_frames(svg: &str) -> Result<Vec<String>, String> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(svg, options).map_err(|e| e.to_string())?;
    doc.descendants()
        .filter(|n| n.has_tag_name("title"))
        .map(|t| {
            let title = t.text().unwrap_or("");
            title
                .rsplit_once(" (")
                .map(|(name, _)| name.to_string())
                .ok_or_else(|| format!("a title without its counts: {title:?}"))
        })
        .collect()
}

/// The frames that end a `--chain` chain in place of a level's blocked
/// stack.
pub const MARKERS: [&str; 6] = [
    "[running]",
    "[runnable]",
    "[no wait traced]",
    "[loop]",
    "[records lost]",
    "[chain not kept]",
];

/// One level of a wakeup chain: a thread's blocked stack and the stack of
/// the thread that woke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// Blocked frames, outermost first (user then kernel). Level 1's
    /// exclude the target's comm.
    pub blocked: Vec<String>,
    /// Waker frames, innermost first (kernel then user).
    pub waker: Vec<String>,
    /// Empty when no wakeup was seen.
    pub waker_comm: String,
}

/// One folded line of `--chain N`, split at each `--`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedChain {
    pub target_comm: String,
    /// Level 1 (today's line) first.
    pub levels: Vec<Level>,
    /// The marker that stands for the next level's blocked stack, if the
    /// chain ends with one.
    pub end: Option<String>,
    pub total: u64,
}

/// Parses one folded line of `--chain N`: `Tcomm;T frames;--;W frames;
/// Wcomm`, then per further level `;--;` blocked frames `;--;` waker
/// frames `;Xcomm`, or `;--;[marker]` at the end.
pub fn parse_chain(line: &str) -> FoldedChain {
    let (stack, total) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("no total in folded line {line:?}"));
    let total = total
        .parse()
        .unwrap_or_else(|_| panic!("bad total in folded line {line:?}"));
    let fields: Vec<&str> = stack.split(';').collect();
    for (i, f) in fields.iter().enumerate() {
        assert!(
            !f.is_empty() || i == fields.len() - 1,
            "empty field in folded line {line:?}"
        );
    }
    let parts: Vec<Vec<String>> = fields
        .split(|f| *f == "--")
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect();
    assert!(parts.len() >= 2, "no -- in folded line {line:?}");
    let target_comm = parts[0][0].clone();
    let mut levels = Vec::new();
    let mut end = None;
    let mut blocked = parts[0][1..].to_vec();
    let mut rest = parts[1..].iter();
    while let Some(waker) = rest.next() {
        let (comm, frames) = waker
            .split_last()
            .unwrap_or_else(|| panic!("a waker without its comm in {line:?}"));
        levels.push(Level {
            blocked: std::mem::take(&mut blocked),
            waker: frames.to_vec(),
            waker_comm: comm.clone(),
        });
        let Some(next) = rest.next() else { break };
        assert!(!comm.is_empty(), "a level after an empty waker in {line:?}");
        if rest.len() == 0 {
            // Nothing follows: this is a marker, not a blocked stack.
            assert!(
                next.len() == 1 && MARKERS.contains(&next[0].as_str()),
                "a level without its waker in {line:?}"
            );
            end = Some(next[0].clone());
        } else {
            blocked = next.clone();
        }
    }
    FoldedChain {
        target_comm,
        levels,
        end,
        total,
    }
}

pub fn parse_chains(text: &str) -> Vec<FoldedChain> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(parse_chain)
        .collect()
}

/// A level past the first of a text block: who woke the thread one level
/// up (`[k] waker:`) and how it was blocked (`[k] target:`).
#[derive(Debug, Clone)]
pub struct TextLevel {
    pub k: usize,
    pub waker_comm: String,
    pub waker_tid: u32,
    /// Waker frames as printed (outermost first).
    pub waker: Vec<String>,
    /// Blocked frames as printed (innermost first).
    pub blocked: Vec<String>,
    pub target_comm: String,
    pub target_tid: u32,
    /// Microseconds of the level-1 target's time this wait overlapped.
    pub overlap: u64,
}

/// One block of the default output under `--chain N`.
#[derive(Debug, Clone)]
pub struct TextChain {
    /// Level 1, as without chains.
    pub block: Block,
    pub levels: Vec<TextLevel>,
    /// The marker that ends the chain, and the thread whose wait it
    /// stands for.
    pub end: Option<(String, String, u32)>,
}

impl TextChain {
    /// The same chain in the folded line's order and fields.
    pub fn folded(&self) -> FoldedChain {
        let rev = |v: &[String]| v.iter().rev().cloned().collect::<Vec<_>>();
        let b = &self.block;
        let mut levels = vec![Level {
            blocked: rev(&b.target),
            waker: rev(&b.waker),
            waker_comm: b.waker_comm.clone(),
        }];
        levels.extend(self.levels.iter().map(|l| Level {
            blocked: rev(&l.blocked),
            waker: rev(&l.waker),
            waker_comm: l.waker_comm.clone(),
        }));
        FoldedChain {
            target_comm: b.target_comm.clone(),
            levels,
            end: self.end.as_ref().map(|e| e.0.clone()),
            total: b.total,
        }
    }
}

/// Frame lines up to the line `until` accepts, which is returned too.
fn frames_until<'a, T>(
    lines: &mut impl Iterator<Item = &'a str>,
    mut until: impl FnMut(&str) -> Option<T>,
) -> (Vec<String>, T) {
    let mut frames = Vec::new();
    loop {
        let l = lines.next().expect("unterminated block");
        if let Some(t) = until(l) {
            return (frames, t);
        }
        let frame = l
            .strip_prefix("    ")
            .unwrap_or_else(|| panic!("bad frame line {l:?}"));
        frames.push(frame.to_string());
    }
}

/// Parses the default output (after the header) under `--chain N`,
/// checking its layout strictly as it goes.
pub fn parse_default_chains(text: &str) -> Vec<TextChain> {
    let mut lines = text.lines().peekable();
    assert_eq!(
        lines.next(),
        Some(""),
        "report must start with a blank line"
    );
    let sep = format!("    {:<16} {}", "--", "--");
    let mut chains = Vec::new();
    while let Some(first) = lines.next() {
        let (waker_comm, waker_tid) = label(first, "waker:")
            .unwrap_or_else(|| panic!("expected a waker: line, got {first:?}"));
        let (waker, ()) = frames_until(&mut lines, |l| (l == sep).then_some(()));
        let (target, (target_comm, target_tid)) = frames_until(&mut lines, |l| label(l, "target:"));
        let total = overlap_line(lines.next());
        let block = Block {
            waker_comm,
            waker_tid,
            waker,
            target,
            target_comm,
            target_tid,
            total,
        };
        let mut chain = TextChain {
            block,
            levels: Vec::new(),
            end: None,
        };
        loop {
            let l = lines.next().expect("block must end with a blank line");
            if l.is_empty() {
                break;
            }
            text_level(l, &mut lines, &mut chain, &sep);
        }
        chains.push(chain);
    }
    chains
}

/// `        <us>`: a total or an overlap.
fn overlap_line(line: Option<&str>) -> u64 {
    line.and_then(|l| l.strip_prefix("        "))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("bad microseconds line {line:?}"))
}

/// Reads level `chain.levels.len() + 2` of a text block, whose first line
/// is `first`: a `[k] waker:` part or a marker.
fn text_level<'a>(
    first: &str,
    lines: &mut impl Iterator<Item = &'a str>,
    chain: &mut TextChain,
    sep: &str,
) {
    assert!(
        chain.end.is_none(),
        "a line after the chain's marker: {first:?}"
    );
    let k = chain.levels.len() + 2;
    let (waker_label, target_label) = (format!("[{k}] waker:"), format!("[{k}] target:"));
    if let Some(marker) = first.strip_prefix("    ").filter(|m| MARKERS.contains(m)) {
        let l = lines.next().expect("a marker without its target");
        let (comm, tid) =
            label(l, &target_label).unwrap_or_else(|| panic!("expected {target_label}, got {l:?}"));
        chain.end = Some((marker.to_string(), comm, tid));
        return;
    }
    let (waker_comm, waker_tid) = label(first, &waker_label)
        .unwrap_or_else(|| panic!("expected {waker_label}, got {first:?}"));
    let (waker, ()) = frames_until(lines, |l| (l == sep).then_some(()));
    let (blocked, (target_comm, target_tid)) = frames_until(lines, |l| label(l, &target_label));
    let overlap = overlap_line(lines.next());
    chain.levels.push(TextLevel {
        k,
        waker_comm,
        waker_tid,
        waker,
        blocked,
        target_comm,
        target_tid,
        overlap,
    });
}

/// The "N records read" of the tool's summary line (N may be 1, "record").
pub fn records_read(stderr: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("offwake-perf: ")?;
            rest.split_once(" record")?.0.parse().ok()
        })
        .unwrap_or_else(|| panic!("no summary line in:\n{stderr}"))
}

/// The total of the pprof profile `pprof` (decoded by pprof-format, with
/// `tests/js/decode-pprof.mjs`) over its samples with a frame that
/// `frame` selects.
pub fn pprof_total_with(pprof: &Path, frame: impl Fn(&str) -> bool) -> u64 {
    let decoded = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js/decode-pprof.mjs"))
        .arg(pprof)
        .output()
        .expect("running node");
    assert!(decoded.status.success(), "{decoded:?}");
    let decoded: serde_json::Value = serde_json::from_slice(&decoded.stdout).expect("JSON");
    decoded["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter(|s| {
            let frames = s["frames"].as_array().expect("frames");
            frames.iter().any(|f| f.as_str().is_some_and(&frame))
        })
        .map(|s| s["values"][0].as_u64().expect("a value"))
        .sum()
}

/// The folded report `text` as blocks of the text report's shape (target
/// innermost first; no thread ids).
pub fn folded_blocks(text: &str) -> Vec<Block> {
    parse_folded(text)
        .into_iter()
        .map(|f| Block {
            waker_comm: f.waker_comm,
            waker_tid: 0,
            waker: f.waker,
            target: f.target.into_iter().rev().collect(),
            target_comm: f.target_comm,
            target_tid: 0,
            total: f.total,
        })
        .collect()
}
