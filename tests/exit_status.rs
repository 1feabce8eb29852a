//! How a run ends: the exit status after `-- COMMAND` (the command's), the
//! header that says what ends tracing, and a closed stderr, which must
//! neither crash the tool nor change its status.

use std::process::{ExitStatus, Stdio};

use crate::common::*;

/// The writing end of a pipe whose reading end is already closed: every
/// write to it fails with EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("creating a pipe");
    drop(reader);
    Stdio::from(writer)
}

/// Runs the tool with `args`, its stdout discarded and its stderr a
/// [`closed_pipe`].
fn run_with_closed_stderr(args: &[&str]) -> ExitStatus {
    tool()
        .args(args)
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .status()
        .expect("running offwake-perf")
}

/// The error path (a PID that does not exist) writes its message to a
/// closed stderr and still exits 1, not 101 (a panic).
#[test]
fn an_error_on_a_closed_stderr_keeps_its_status() {
    let _suite = suite(module_path!());
    let status = run_with_closed_stderr(&["-p", "2147483646", "1"]);
    assert_eq!(status.code(), Some(1), "{status}");
}

/// A traced run prints its summary to a closed stderr, under both
/// backends, and exits with the command's status.
#[test]
fn a_traced_run_on_a_closed_stderr_keeps_its_status() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for backend in ["perf", "tracefs"] {
        for (script, code) in [("sleep 0.2", 0), ("sleep 0.2; exit 4", 4)] {
            let status =
                run_with_closed_stderr(&["--backend", backend, "-f", "--", "sh", "-c", script]);
            assert_eq!(status.code(), Some(code), "{backend}, {script}: {status}");
        }
    }
}

/// `-- COMMAND` ends with the command's exit code, or 128+N when signal N
/// killed it; the header says the command's exit ends tracing.
#[test]
fn the_command_status_is_the_tool_status() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for (script, code) in [
        ("exit 0", 0),
        ("exit 3", 3),
        ("exit 255", 255),
        ("kill -KILL $$", 128 + 9),
        ("kill -TERM $$", 128 + 15),
    ] {
        let out = run(&["--", "sh", "-c", script]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{script}: {stderr}");
        assert!(
            stdout.starts_with(
                "Tracing blocked time (us) by user + kernel off-CPU and waker stack \
                 until the command exits.\n"
            ),
            "{script}: {stdout}"
        );
        assert!(!stdout.contains("Ctrl-C"), "{stdout}");
    }
}

/// With a duration too, the header names both ends, and a command that
/// outlives the duration leaves the tool's own status (0).
#[test]
fn a_command_outliving_the_duration_leaves_status_zero() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let out = run(&["1", "--", "sh", "-c", "sleep 3; exit 7"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.starts_with(
            "Tracing blocked time (us) by user + kernel off-CPU and waker stack \
             for 1 secs, or until the command exits.\n"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("is still running"), "{stderr}");
}

/// A failure of the tool itself keeps the tool's code, whatever the
/// command would have done.
#[test]
fn a_command_that_cannot_start_is_the_tool_failing() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let out = run(&["--", "/nonexistent/offwake-exit-test"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/offwake-exit-test"),
        "{stderr}"
    );
}

/// When nobody reads the report (stdout closed before the header), tracing
/// stops but the tool still ends as the command does.
#[test]
fn a_closed_stdout_still_gives_the_command_status() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let status = tool()
        .args(["--", "sh", "-c", "sleep 0.2; exit 6"])
        .stdout(closed_pipe())
        .stderr(Stdio::null())
        .status()
        .expect("running offwake-perf");
    assert_eq!(status.code(), Some(6), "{status}");
}

/// A closed stdout does not make the run wait for the command: the
/// duration still ends it, as with an open stdout (status 0, the command
/// left running).
#[test]
fn a_closed_stdout_keeps_the_duration() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let started = std::time::Instant::now();
    let status = tool()
        .args(["1", "--", "sh", "-c", "sleep 4; exit 9"])
        .stdout(closed_pipe())
        .stderr(Stdio::null())
        .status()
        .expect("running offwake-perf");
    let took = started.elapsed();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(
        took < std::time::Duration::from_secs(3),
        "the run waited {took:?} for the command instead of ending after 1 s"
    );
}

/// A closed stdout leaves stderr alone: the summary is still written.
#[test]
fn a_closed_stdout_keeps_the_summary_on_stderr() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    let out = tool()
        .args(["--", "sh", "-c", "sleep 0.2"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("running offwake-perf");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(" records read, "), "no summary:\n{stderr}");
}

/// Ctrl-C (SIGINT to the process group) reaches the command too: one that
/// traps it and exits gives its status, whether stdout is open or not.
#[test]
fn ctrl_c_gives_the_status_of_a_command_that_exits_on_it() {
    let _suite = suite(module_path!());
    use std::os::unix::process::CommandExt;
    if !live() {
        return;
    }
    for closed_stdout in [false, true] {
        let stdout = if closed_stdout {
            closed_pipe()
        } else {
            Stdio::null()
        };
        let mut tool = tool()
            .args(["--", "sh", "-c", "trap 'exit 5' INT; sleep 5 & wait"])
            .process_group(0)
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("starting offwake-perf");
        // Signal the shell once it waits for its sleep (in sigsuspend for
        // dash and busybox, wait4 for others): its trap is set by then.
        let tool_pid = tool.id();
        wait_for("the command to wait for its sleep", || {
            children_of(tool_pid).into_iter().any(|sh| {
                !children_of(sh).is_empty()
                    && std::fs::read_to_string(format!("/proc/{sh}/wchan"))
                        .is_ok_and(|w| w.starts_with("sigsuspend") || w.starts_with("do_wait"))
            })
        });
        let group = i32::try_from(tool_pid).expect("pid fits");
        // SAFETY: kill with the process group of our own child and a valid
        // signal.
        let rc = unsafe { libc::kill(-group, libc::SIGINT) };
        assert_eq!(rc, 0);
        let status = tool.wait().expect("waiting for offwake-perf");
        assert_eq!(
            status.code(),
            Some(5),
            "closed stdout: {closed_stdout}: {status}"
        );
    }
}

/// A pipe that is full: a write to its writing end waits until the
/// reading end, returned too, is read.
fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let (reader, mut writer) = std::io::pipe().expect("creating a pipe");
    let fd = writer.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns, with flags read
    // from it and written back.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL");
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) },
        0
    );
    let chunk = [b'x'; 4096];
    loop {
        match writer.write(&chunk) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling a pipe: {e}"),
        }
    }
    // Blocking again, as a stdout is: the tool's writes wait.
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }, 0);
    (reader, writer)
}

/// A child killed and reaped when dropped, also when a test fails.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `pid` has SIGINT pending, for the process or its main thread.
fn sigint_pending(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let bit = 1u64 << (libc::SIGINT - 1);
    status.lines().any(|l| {
        l.strip_prefix("ShdPnd:")
            .or_else(|| l.strip_prefix("SigPnd:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & bit != 0)
    })
}

/// A second SIGINT aborts at once with status 130 and says so on stderr,
/// unless it comes as soon after the first as `timeout -s INT`'s second
/// (to the command's process group): that one is the same interrupt. The
/// tool is held writing its header to a full stdout, so the first SIGINT,
/// which only ends tracing, cannot let it finish first.
#[test]
fn a_second_sigint_aborts_with_130_and_says_so() {
    let _suite = suite(module_path!());
    if !live() {
        return;
    }
    for person in [false, true] {
        interrupt_twice(person);
    }
}

/// Sends the held tool two SIGINTs, a person's Ctrl-C apart or at once,
/// and checks what it did.
fn interrupt_twice(person: bool) {
    let (reader, writer) = full_pipe();
    let mut tool = Reaped(
        tool()
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting offwake-perf"),
    );
    let tool = &mut tool.0;
    let pid = tool.id();
    wait_for("the tool to wait on its full stdout", || {
        std::fs::read_to_string(format!("/proc/{pid}/wchan"))
            .is_ok_and(|w| w.contains("pipe_write"))
    });
    let target = i32::try_from(pid).expect("pid fits");
    for i in 0..2 {
        if i == 1 && person {
            std::thread::sleep(std::time::Duration::from_millis(400));
        }
        // SAFETY: kill with the pid of our own child and a valid signal.
        assert_eq!(unsafe { libc::kill(target, libc::SIGINT) }, 0);
        // Taken before the next (two pending SIGINTs would be one), and
        // at once as `timeout` sends it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while sigint_pending(pid) {
            assert!(std::time::Instant::now() < deadline, "the SIGINT not taken");
            std::thread::yield_now();
        }
    }
    if !person {
        // Still held on its stdout, not aborted; let it write.
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(tool.try_wait().expect("waiting").is_none(), "it ended");
        drop(reader);
        let status = tool.wait().expect("waiting for offwake-perf");
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut tool.stderr.take().expect("piped"), &mut stderr)
            .expect("reading stderr");
        assert_ne!(status.code(), Some(130), "{status}\n{stderr}");
        assert!(!stderr.contains("aborted"), "{stderr}");
        return;
    }
    let mut ended = None;
    wait_for("the tool to end", || {
        ended = tool.try_wait().expect("waiting for offwake-perf");
        ended.is_some()
    });
    let status = ended.expect("ended");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tool.stderr.take().expect("piped"), &mut stderr)
        .expect("reading stderr");
    drop(reader);
    assert_eq!(status.code(), Some(130), "{status}\n{stderr}");
    assert!(
        stderr.contains("offwake-perf: aborted by a second SIGINT (Ctrl-C)"),
        "{stderr}"
    );
}
