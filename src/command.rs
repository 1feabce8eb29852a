//! `-- COMMAND`: starting the command held just before its `exec`, so that
//! tracing can be attached to its process (and everything it starts)
//! before its first instruction runs.
//!
//! The child is forked by `std::process::Command`, whose `spawn` returns
//! only once `exec` succeeded or failed. A `pre_exec` hook in the child
//! writes the child's pid to one pipe and waits for a byte on another;
//! `spawn` runs on a helper thread meanwhile. [`Held::release`] sends the
//! byte and returns the running [`Child`]; dropping a [`Held`] instead
//! closes the pipe and the child exits without running the command.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow, bail};

/// A forked command waiting to `exec`.
pub(crate) struct Held {
    pid: u32,
    go: File,
    spawner: JoinHandle<io::Result<Child>>,
    program: String,
}

/// Forks `argv`, stopping the child before `exec`.
pub(crate) fn spawn_held(argv: &[OsString]) -> Result<Held> {
    let (program, args) = argv.split_first().context("no command given after --")?;
    let (pid_r, pid_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let (pid_fd, go_fd) = (pid_w.as_raw_fd(), go_r.as_raw_fd());
    let (parent_pid_fd, parent_go_fd) = (pid_r.as_raw_fd(), go_w.as_raw_fd());
    // SAFETY: the hook runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: it calls close, getpid, write and
    // read on descriptors inherited from us (all close-on-exec), and
    // allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            // The parent's ends: without this the child would hold the
            // write end it reads from, and never see the parent give up.
            libc::close(parent_pid_fd);
            libc::close(parent_go_fd);
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_fd, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(io::Error::last_os_error());
            }
            let mut byte = 0u8;
            loop {
                match libc::read(go_fd, (&raw mut byte).cast(), 1) {
                    1 => return Ok(()),
                    0 => return Err(io::Error::other("offwake-perf did not start tracing")),
                    _ => {
                        let err = io::Error::last_os_error();
                        if err.kind() != io::ErrorKind::Interrupted {
                            return Err(err);
                        }
                    }
                }
            }
        });
    }
    // The child's ends stay open here until the fork is over (spawn
    // returns), then close so that the parent sees EOF if the child dies.
    let spawner = std::thread::spawn(move || {
        let spawned = cmd.spawn();
        drop(pid_w);
        drop(go_r);
        spawned
    });
    let program = program.to_string_lossy().into_owned();
    let mut pid = [0u8; 4];
    if let Err(e) = File::from(pid_r).read_exact(&mut pid) {
        // No pid: the fork itself failed; the spawner says why.
        return Err(match spawner.join() {
            Ok(Err(spawn_err)) => anyhow!(spawn_err),
            _ => anyhow!(e),
        })
        .with_context(|| format!("starting {program}"));
    }
    let pid = i32::from_ne_bytes(pid);
    if pid <= 0 {
        bail!("starting {program}: the child reported pid {pid}");
    }
    Ok(Held {
        pid: pid as u32,
        go: File::from(go_w),
        spawner,
        program,
    })
}

impl Held {
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Lets the command `exec`, and returns it once it has.
    pub(crate) fn release(self) -> Result<Child> {
        let Held {
            mut go,
            spawner,
            program,
            ..
        } = self;
        // A failed write means the child is gone; spawn then says why.
        let _ = go.write_all(b"g");
        drop(go);
        spawner
            .join()
            .map_err(|_| anyhow!("the thread starting {program} panicked"))?
            .with_context(|| format!("starting {program}"))
    }
}

/// A descriptor that becomes readable when `child` exits, so that its end
/// is seen at once by a poll; `None` where the kernel has no pidfds (before
/// 5.3): its end is then seen on the next round.
pub(crate) fn exit_watch(child: &Child) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(child.id()).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; the pid is our unreaped child's, so it names that process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: the kernel has just returned this descriptor, owned by no one
    // else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating a pipe")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_command_runs_only_when_released() {
        let dir = std::env::temp_dir().join(format!("offwake-held-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let argv: Vec<OsString> = ["sh", "-c", "echo ran > \"$0\""]
            .iter()
            .map(OsString::from)
            .chain([dir.clone().into_os_string()])
            .collect();
        let held = spawn_held(&argv).unwrap();
        let pid = held.pid();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!dir.exists(), "the command ran before release");
        let mut child = held.release().unwrap();
        assert_eq!(child.id(), pid);
        assert!(child.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(&dir).unwrap(), "ran\n");
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn exit_watch_is_readable_once_the_command_exits() {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let held = spawn_held(&["sleep".into(), "0.2".into()]).unwrap();
        let mut child = held.release().unwrap();
        let watch = exit_watch(&child).expect("pidfd_open");
        let mut fds = [PollFd::new(watch.as_fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut fds, PollTimeout::from(10u8)).unwrap(), 0);
        let started = std::time::Instant::now();
        assert_eq!(poll(&mut fds, PollTimeout::from(5000u16)).unwrap(), 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(4));
        assert!(child.try_wait().unwrap().is_some_and(|s| s.success()));
    }

    #[test]
    fn dropped_command_never_runs() {
        let held = spawn_held(&[OsString::from("true")]).unwrap();
        drop(held);
    }

    #[test]
    fn missing_program_is_an_error_on_release() {
        let held = spawn_held(&[OsString::from("/nonexistent/offwake-test")]).unwrap();
        let err = format!("{:#}", held.release().unwrap_err());
        assert!(err.contains("/nonexistent/offwake-test"), "{err}");
    }
}
