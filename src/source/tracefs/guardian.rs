//! The guardian of our ftrace instance: a tiny child process that removes
//! the instance when offwake-perf dies without doing so itself (SIGKILL,
//! an abort on a failed allocation, a panic while panicking).
//!
//! It is forked as soon as the instance's directory exists, before any of
//! the instance's files is opened, and blocks reading a pipe whose write end
//! only offwake-perf holds (close-on-exec). However offwake-perf ends, the
//! kernel closes that end; the guardian then removes the directory, which
//! also turns the instance's events off. On a normal end offwake-perf has
//! removed it already and the guardian just exits.
//!
//! The fork happens in a process that may run other threads, so the child
//! only makes async-signal-safe system calls on data prepared before the
//! fork, and allocates nothing.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::sys::child;

/// The guardian's name in `ps` and in traces (at most 15 bytes).
const NAME: &std::ffi::CStr = c"offwake-cleanup";
/// How long the guardian retries a busy instance: the files of a process
/// that died are closed right after the pipe, so this is rarely needed.
const BUSY_RETRIES: u32 = 1000;
const BUSY_PAUSE: Duration = Duration::from_millis(2);
/// How long offwake-perf waits to reap the guardian after a normal end.
const REAP_WAIT: Duration = Duration::from_millis(50);

/// What the guardian needs, made before the instance's directory (so that
/// nothing is allocated between making it and guarding it) and the fork.
pub(crate) struct Prepared {
    dir: CString,
    tracing_on: CString,
    events_enable: CString,
    max_fd: u32,
}

impl Prepared {
    /// Prepares the guardian of the instance directory `dir`.
    pub(crate) fn new(dir: &Path) -> Result<Prepared> {
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .with_context(|| format!("{} contains a NUL byte", p.display()))
        };
        Ok(Prepared {
            dir: c(dir)?,
            tracing_on: c(&dir.join("tracing_on"))?,
            events_enable: c(&dir.join("events/enable"))?,
            max_fd: child::open_files_limit(),
        })
    }

    /// Forks the guardian; the directory must exist by now.
    pub(crate) fn spawn(self) -> Result<Guardian> {
        let mut fds: [RawFd; 2] = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which has room
        // for them.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error())
                .context("making the pipe of the ftrace instance's guardian");
        }
        // SAFETY: pipe2 succeeded: both descriptors are new and ours.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Signals stay blocked across the fork, until the child ignores
        // them: a Ctrl-C at that moment must not kill it.
        // SAFETY: the child runs only `guard`, which makes async-signal-safe
        // calls on data made before the fork and never returns.
        let (pid, old) = unsafe { child::fork_signals_blocked() };
        if pid == 0 {
            // SAFETY: we are the freshly forked child.
            unsafe { guard(read_end.as_raw_fd(), &self, &old) };
        }
        let forked = io::Error::last_os_error();
        if pid < 0 {
            return Err(forked).context(
                "forking the process that removes the ftrace instance should offwake-perf die",
            );
        }
        drop(read_end);
        Ok(Guardian {
            pid,
            pipe: Some(write_end),
        })
    }
}

/// A running guardian. Dropping it tells the guardian offwake-perf is done
/// with the instance: remove the instance first.
pub(crate) struct Guardian {
    pid: libc::pid_t,
    pipe: Option<OwnedFd>,
}

impl Guardian {
    #[cfg(test)]
    fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // End of file for the guardian: it finds the instance gone and
        // exits. Reaped if that is quick; otherwise it is left to exit on
        // its own (and to whoever reaps offwake-perf's children after it).
        self.pipe = None;
        let until = Instant::now() + REAP_WAIT;
        loop {
            let mut status = 0;
            // SAFETY: waitpid on our own child, with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            let interrupted =
                r == -1 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted;
            if (r != 0 && !interrupted) || Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// The guardian's whole life, in the forked child.
///
/// # Safety
///
/// Only to be called in a child just forked, with every signal blocked;
/// `read_fd` is the pipe's read end, `mask` the signal mask to restore.
/// Makes only async-signal-safe calls and allocates nothing.
unsafe fn guard(read_fd: RawFd, paths: &Prepared, mask: &libc::sigset_t) -> ! {
    // SAFETY: plain system calls on descriptors we own, on NUL-terminated
    // paths made before the fork, and on stack data.
    unsafe {
        // Its own session: the signals a terminal or a supervisor sends to
        // offwake-perf's process group do not reach it; the rest it ignores.
        libc::setsid();
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut ignore.sa_mask);
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::sigaction(sig, &ignore, std::ptr::null_mut());
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_NAME, NAME.as_ptr());
        child::close_all_but(&[read_fd], paths.max_fd);
        // Keeps no directory (or its mount) busy.
        libc::chdir(c"/".as_ptr());

        let mut byte = 0u8;
        loop {
            let n = libc::read(read_fd, (&raw mut byte).cast(), 1);
            if n == 0 || (n < 0 && errno() != libc::EINTR) {
                break;
            }
        }

        let mut failed = remove(&paths.dir);
        if failed == 0 {
            libc::_exit(0);
        }
        // Still there: stop recording and turn its events off at once, in
        // case the removal keeps failing.
        write_zero(&paths.tracing_on);
        write_zero(&paths.events_enable);
        // Busy while the dead process's trace_pipe_raw files are being
        // closed.
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: BUSY_PAUSE.as_nanos() as libc::c_long,
        };
        for _ in 0..BUSY_RETRIES {
            if failed != libc::EBUSY {
                break;
            }
            libc::nanosleep(&pause, std::ptr::null_mut());
            failed = remove(&paths.dir);
            if failed == 0 {
                libc::_exit(0);
            }
        }
        libc::_exit(1)
    }
}

/// Removes `dir`: 0 when it is gone (removed now, or already), else the
/// error number.
///
/// # Safety
///
/// Async-signal-safe; `dir` is a valid C string.
unsafe fn remove(dir: &CString) -> libc::c_int {
    // SAFETY: rmdir reads a NUL-terminated path.
    match unsafe { libc::rmdir(dir.as_ptr()) } {
        0 => 0,
        _ => match errno() {
            libc::ENOENT => 0,
            e => e,
        },
    }
}

/// Writes `0` to a tracefs control file, ignoring failure.
///
/// # Safety
///
/// Async-signal-safe; `path` is a valid C string.
unsafe fn write_zero(path: &CString) {
    // SAFETY: open, write and close on a path and a descriptor we own.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

fn errno() -> libc::c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Read;
    use std::path::PathBuf;

    /// A fresh empty directory standing in for an instance.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("offwake-guard-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    fn gone_within(dir: &Path, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while dir.exists() {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// State letter of a process, or None once it is gone (reaped).
    fn state(pid: libc::pid_t) -> Option<char> {
        crate::sys::proc::start_and_state(pid as u32).map(|(_, state)| state)
    }

    #[test]
    fn removes_the_directory_when_its_owner_lets_go() {
        let dir = scratch("owner-gone");
        let g = Prepared::new(&dir).unwrap().spawn().unwrap();
        let pid = g.pid();
        // The guardian ignores the signals a process group gets on Ctrl-C
        // or from a supervisor.
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: kill has no memory-safety preconditions.
            assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(dir.exists());
        assert!(matches!(state(pid), Some('S' | 'R')), "{:?}", state(pid));
        // Closing the pipe without removing the directory is what a death
        // looks like to the guardian.
        drop(g);
        assert!(
            gone_within(&dir, Duration::from_secs(2)),
            "{}",
            dir.display()
        );
    }

    #[test]
    fn exits_and_is_reaped_after_a_normal_end() {
        let dir = scratch("normal-end");
        let g = Prepared::new(&dir).unwrap().spawn().unwrap();
        let pid = g.pid();
        std::fs::remove_dir(&dir).unwrap();
        let start = Instant::now();
        drop(g);
        assert!(start.elapsed() <= REAP_WAIT + Duration::from_millis(20));
        // Reaped by the drop, or exiting very soon after.
        let until = Instant::now() + Duration::from_secs(2);
        while matches!(state(pid), Some('S' | 'R')) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!matches!(state(pid), Some('S' | 'R')), "{:?}", state(pid));
    }

    #[test]
    fn holds_none_of_our_descriptors() {
        let dir = scratch("descriptors");
        let (mut r, w) = std::io::pipe().unwrap();
        let g = Prepared::new(&dir).unwrap().spawn().unwrap();
        // The guardian closed its copy of `w`: end of file once ours goes.
        drop(w);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            tx.send(r.read_to_end(&mut buf).map(|_| buf.len()).ok())
        });
        let got = rx.recv_timeout(Duration::from_secs(2));
        drop(g);
        assert_eq!(got, Ok(Some(0)), "the guardian still holds the pipe");
        assert!(gone_within(&dir, Duration::from_secs(2)));
    }

    /// Unmounts a test's mount when dropped.
    struct Unmount(PathBuf);

    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }

    #[test]
    fn turns_tracing_off_and_retries_while_busy() {
        if !crate::live_gate::live_allowed("turns_tracing_off_and_retries_while_busy") {
            return;
        }
        let dir = scratch("busy");
        // A mount point cannot be removed (EBUSY), as an instance whose
        // files are still open cannot.
        nix::mount::mount(
            Some("tmpfs"),
            &dir,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .unwrap();
        let mounted = Unmount(dir.clone());
        std::fs::write(dir.join("tracing_on"), "1").unwrap();
        std::fs::create_dir(dir.join("events")).unwrap();
        std::fs::write(dir.join("events/enable"), "1").unwrap();
        drop(Prepared::new(&dir).unwrap().spawn().unwrap());
        let off = || {
            ["tracing_on", "events/enable"]
                .iter()
                .all(|f| std::fs::read_to_string(dir.join(f)).is_ok_and(|v| v == "0"))
        };
        let until = Instant::now() + Duration::from_secs(2);
        while !off() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(off(), "tracing left on");
        assert!(dir.exists());
        drop(mounted);
        assert!(gone_within(&dir, Duration::from_secs(2)), "not retried");
    }
}
