//! Running one hostile case: a scratch directory under /tmp, the victim
//! (as `nobody`, or chrooted), the tool under a timeout and a memory cap
//! (writing an SVG flame graph beside its report, read back as XML), and
//! the one-line measurement every case prints.
#![allow(dead_code)]

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common;

/// The limit every case asserts on the tool's peak RSS.
pub const RSS_LIMIT_MIB: f64 = 256.0;

/// uid and gid of `nobody`.
pub fn nobody() -> (u32, u32) {
    let name = CString::new("nobody").unwrap();
    // SAFETY: a valid C string; the result is read at once, before any
    // other getpw* call.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "no user nobody");
    // SAFETY: non-null, points to libc's static passwd entry.
    unsafe { ((*pw).pw_uid, (*pw).pw_gid) }
}

/// Makes `path` (not following a symlink) owned by `nobody`.
pub fn chown_nobody(path: &Path) {
    let (uid, gid) = nobody();
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// `/tmp/offwake-hostile-<pid>-<case>` (or under `/dev/shm`), removed when
/// dropped (kept with
/// `OFFWAKE_HOSTILE_KEEP=1`, to look into). Holds `v/`, the victim's own
/// directory (owned by `nobody`), and the victim program.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(case: &str) -> Scratch {
        Scratch::new_in(Path::new("/tmp"), case)
    }

    /// On a tmpfs (`/dev/shm` when it is one, else `/tmp`): where renames
    /// take microseconds, not the milliseconds of a busy disk.
    pub fn new_on_tmpfs(case: &str) -> Scratch {
        let shm = Path::new("/dev/shm");
        let c = std::ffi::CString::new("/dev/shm").unwrap();
        // SAFETY: statfs is plain data; a valid C string.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        let tmpfs =
            unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0 && st.f_type == libc::TMPFS_MAGIC;
        Scratch::new_in(if tmpfs { shm } else { Path::new("/tmp") }, case)
    }

    fn new_in(base: &Path, case: &str) -> Scratch {
        let dir = base.join(format!("offwake-hostile-{}-{case}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("v")).expect("creating the scratch directory");
        chmod(&dir, 0o755);
        chmod(&dir.join("v"), 0o755);
        chown_nobody(&dir.join("v"));
        let victim = dir.join("hostile_victim");
        std::fs::copy(common::workload("hostile_victim"), &victim).expect("copying the victim");
        chmod(&victim, 0o755);
        Scratch { dir }
    }

    /// The victim's directory (owned by `nobody`).
    pub fn v(&self) -> PathBuf {
        self.dir.join("v")
    }

    pub fn victim_exe(&self) -> PathBuf {
        self.dir.join("hostile_victim")
    }

    /// A directory only root can enter (0700), created on first use.
    pub fn secret_dir(&self) -> PathBuf {
        let d = self.dir.join("secret");
        std::fs::create_dir_all(&d).expect("creating the secret directory");
        chmod(&d, 0o700);
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("OFFWAKE_HOSTILE_KEEP").is_some() {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running victim, killed when dropped.
pub struct Victim {
    child: Child,
}

/// Starts the victim program with `args` (run as `nobody` through setpriv
/// when `as_nobody`, else as root: for `-r`, which drops by itself) and
/// waits for its `ready`.
pub fn start_victim(scratch: &Scratch, as_nobody: bool, args: &[String]) -> Victim {
    start_program(&scratch.victim_exe(), as_nobody, args)
}

/// Starts program `exe` with `args` (as `nobody` when `as_nobody`) and
/// waits for its `ready`.
pub fn start_program(exe: &Path, as_nobody: bool, args: &[String]) -> Victim {
    let mut cmd = if as_nobody {
        let (uid, gid) = nobody();
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            .arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let mut child = cmd
        .args(args)
        .env("OFFWAKE_PIN_CPU", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the victim");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut victim = Victim { child };
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(line) if line == "ready\n" => victim,
        other => {
            let status = victim.child.try_wait();
            panic!("the victim did not get ready: {other:?}, status {status:?}");
        }
    }
}

impl Victim {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the tool's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exit(i32),
    Signal(i32),
    /// Killed after the timeout.
    Timeout,
    /// Killed when its RSS passed the cap.
    RssCap,
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Exit(c) => write!(f, "exit {c}"),
            End::Signal(s) => {
                let name = match *s {
                    libc::SIGABRT => "SIGABRT",
                    libc::SIGBUS => "SIGBUS",
                    libc::SIGSEGV => "SIGSEGV",
                    libc::SIGKILL => "SIGKILL",
                    _ => "",
                };
                write!(f, "signal {s} {name}")
            }
            End::Timeout => write!(f, "timeout"),
            End::RssCap => write!(f, "rss-cap"),
        }
    }
}

/// One run of the tool.
#[derive(Debug)]
pub struct Run {
    pub case: String,
    pub end: End,
    pub peak_rss_mib: f64,
    pub wall: Duration,
    pub stdout: String,
    pub stderr: String,
    /// The flame graph written to a file as well, if any.
    pub svg: Option<String>,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The tool: `OFFWAKE_HOSTILE_BIN` if set (e.g. a release build), else the
/// binary cargo built for the tests.
fn tool_path() -> PathBuf {
    std::env::var_os("OFFWAKE_HOSTILE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_offwake-perf")))
}

/// Whether `pid` runs `tool` (has exec'd it).
fn execed(pid: u32, tool: &std::path::Path) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == tool)
}

/// Current RSS and peak RSS (VmHWM) of `pid` in KiB; 0 when unreadable
/// (a zombie has none).
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Reads all of `r` on a thread; the result comes on the returned channel.
fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// Runs the tool with `args`, its report to stdout and, as a flame graph,
/// to a file (`-o - -o FILE.svg` first), and measures it (peak RSS as
/// VmHWM, polled every 5 ms, and wall time): killed after
/// `OFFWAKE_HOSTILE_TIMEOUT` seconds (default 60), or once its RSS passes
/// `OFFWAKE_HOSTILE_RSS_CAP_MIB` (default 1024: the case fails anyway,
/// and the machine is spared). Prints the measurement line
/// `HOSTILE case=… end=… peak_rss_mib=… wall_s=…`, and with
/// `OFFWAKE_HOSTILE_SHOW=1` what the tool printed.
pub fn run_tool(case: &str, args: &[&str]) -> Run {
    let timeout = Duration::from_secs(env_u64("OFFWAKE_HOSTILE_TIMEOUT", 60));
    let cap_kib = env_u64("OFFWAKE_HOSTILE_RSS_CAP_MIB", 1024) * 1024;
    let started = Instant::now();
    let tool = std::fs::canonicalize(tool_path()).expect("the tool's path");
    let svg_path =
        std::env::temp_dir().join(format!("offwake-hostile-{}-{case}.svg", std::process::id()));
    let _ = std::fs::remove_file(&svg_path);
    let mut child = Command::new(&tool)
        .args(["-o", "-", "-o"])
        .arg(&svg_path)
        .args(args)
        // Its counters (unwinding among them) on stderr.
        .env("OFFWAKE_TIMING", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting offwake-perf");
    let pid = child.id();
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let mut peak_kib = 0;
    let mut killed: Option<End> = None;
    let end = loop {
        // The peak, polled: wait4's ru_maxrss would include the RSS of this
        // test process, which the child inherits (posix_spawn shares our
        // memory until exec, whose high-water mark exec carries over).
        // Before its exec, the child shares this process's memory (and
        // high-water mark): only the tool's own is counted.
        let (rss, hwm) = if execed(pid, &tool) {
            rss_kib(pid)
        } else {
            (0, 0)
        };
        peak_kib = peak_kib.max(hwm);
        if let Some(status) = child.try_wait().expect("waiting for offwake-perf") {
            break match (status.code(), status.signal()) {
                (Some(code), _) => End::Exit(code),
                (None, Some(signal)) => End::Signal(signal),
                (None, None) => unreachable!("neither exited nor signalled: {status}"),
            };
        }
        if killed.is_none() {
            if started.elapsed() > timeout {
                killed = Some(End::Timeout);
            } else if rss > cap_kib {
                killed = Some(End::RssCap);
            }
            if killed.is_some() {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let wall = started.elapsed();
    let end = killed.unwrap_or(end);
    // A `-- COMMAND` child could keep the pipes open: wait a bounded time.
    let text = |rx: mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(Duration::from_secs(10))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let svg = std::fs::read(&svg_path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let _ = std::fs::remove_file(&svg_path);
    let run = Run {
        case: case.to_string(),
        end,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        wall,
        stdout: text(stdout),
        stderr: text(stderr),
        svg,
    };
    eprintln!(
        "HOSTILE case={} end={} peak_rss_mib={:.1} wall_s={:.2}",
        run.case,
        run.end.to_string().replace(' ', "_"),
        run.peak_rss_mib,
        run.wall.as_secs_f64()
    );
    if std::env::var_os("OFFWAKE_HOSTILE_SHOW").is_some() {
        eprintln!("--- stdout\n{}--- stderr\n{}---", run.stdout, run.stderr);
    }
    run
}

impl Run {
    /// The last lines of stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// What every case requires: exit status 0, the peak RSS under
    /// [`RSS_LIMIT_MIB`], and each SVG it wrote (the file, and stdout under
    /// `--format svg`) well-formed XML.
    pub fn assert_sound(&self) {
        assert_eq!(
            self.end,
            End::Exit(0),
            "{}: the tool must exit 0, ended with {} after {:.1} s; stderr:\n{}",
            self.case,
            self.end,
            self.wall.as_secs_f64(),
            self.stderr_tail()
        );
        assert!(
            self.peak_rss_mib < RSS_LIMIT_MIB,
            "{}: peak RSS {:.1} MiB, limit {RSS_LIMIT_MIB} MiB",
            self.case,
            self.peak_rss_mib
        );
        self.svg_frames();
        if self.stdout.starts_with("<?xml") {
            self.frames_of_svg("stdout", &self.stdout);
        }
    }

    /// The frame names of the SVG written to a file; fails when there is
    /// none, or when it is not well-formed XML.
    pub fn svg_frames(&self) -> Vec<String> {
        let svg = self
            .svg
            .as_deref()
            .unwrap_or_else(|| panic!("{}: no SVG was written", self.case));
        self.frames_of_svg("the SVG file", svg)
    }

    /// The frame names of `svg`, read as XML; fails when it is not
    /// well-formed.
    pub fn frames_of_svg(&self, what: &str, svg: &str) -> Vec<String> {
        common::svg_frames(svg)
            .unwrap_or_else(|e| panic!("{}: {what} is not well-formed XML: {e}", self.case))
    }

    /// The counters of the tool's `unwound N user stacks ... K files'
    /// unwind tables unreadable` line: (N, K).
    pub fn unwinding(&self) -> (u64, u64) {
        let line = self
            .stderr
            .lines()
            .find(|l| l.starts_with("offwake-perf: unwound "))
            .unwrap_or_else(|| panic!("{}: no unwinding line:\n{}", self.case, self.stderr));
        let num = |s: &str| -> u64 {
            s.parse()
                .unwrap_or_else(|_| panic!("{}: bad unwinding line {line:?}", self.case))
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let unreadable = words
            .iter()
            .position(|w| *w == "files'")
            .and_then(|i| i.checked_sub(1))
            .map(|i| num(words[i]))
            .unwrap_or_else(|| panic!("{}: bad unwinding line {line:?}", self.case));
        (num(words[2]), unreadable)
    }

    /// The blocks of the default output (after the header line).
    pub fn blocks(&self) -> Vec<common::Block> {
        let (_header, report) = self
            .stdout
            .split_once('\n')
            .unwrap_or_else(|| panic!("{}: no header in {:?}", self.case, self.stdout));
        common::parse_default(report)
    }

    /// The target frames of `comm`'s blocks in the default output; fails
    /// when it has none.
    pub fn target_frames(&self, comm: &str) -> Vec<String> {
        let frames: Vec<String> = self
            .blocks()
            .into_iter()
            .filter(|b| b.target_comm == comm)
            .flat_map(|b| b.target)
            .collect();
        assert!(
            !frames.is_empty(),
            "{}: no block of {comm} in the report:\n{}",
            self.case,
            self.stdout
        );
        frames
    }

    /// Asserts `needle` appears nowhere in what the tool printed.
    pub fn assert_absent(&self, needle: &str) {
        for (what, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let found: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
            assert!(
                found.is_empty(),
                "{}: {needle:?} appears on {what}, e.g. in:\n{}",
                self.case,
                found[..found.len().min(3)].join("\n")
            );
        }
    }
}
