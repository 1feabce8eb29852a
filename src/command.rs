//! `-- COMMAND`: starting the command from a thread of this process, the
//! launcher, once tracing is attached to that thread, so that the command
//! inherits the thread's events from its first instruction.
//!
//! The events are never changed while the command runs: the kernel swaps
//! the contexts of a parent and its child at a context switch, so the
//! launcher's events end up in a context of the command, whose forks and
//! exits would wait for any change that holds its lock. The launcher
//! starts the command when [`Launcher::release`] tells it to, then stays,
//! idle, until the [`Launched`] it gives back is dropped: events whose
//! task has exited are inherited by nothing new.

use std::ffi::OsString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};

/// The launcher thread's name (its comm).
pub(crate) const LAUNCHER_NAME: &str = "offwake-launch";

/// The launcher, waiting to start the command.
pub(crate) struct Launcher {
    tid: u32,
    go: mpsc::Sender<()>,
    started: mpsc::Receiver<std::io::Result<Child>>,
    stay: mpsc::Sender<()>,
    thread: JoinHandle<()>,
    program: String,
}

/// The launcher after it started the command: it stays until this is
/// dropped.
pub(crate) struct Launched {
    stay: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Launcher {
    /// Starts the launcher thread for `argv`; `argv` runs only once
    /// [`Launcher::release`] is called.
    pub(crate) fn spawn(argv: &[OsString]) -> Result<Launcher> {
        let (program, args) = argv.split_first().context("no command given after --")?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        let (tid_tx, tid_rx) = mpsc::channel::<u32>();
        let (go, go_rx) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel();
        let (stay, stay_rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(LAUNCHER_NAME.to_string())
            .spawn(move || {
                let tid = nix::unistd::gettid().as_raw() as u32;
                if tid_tx.send(tid).is_err() || go_rx.recv().is_err() {
                    return;
                }
                if started_tx.send(cmd.spawn()).is_ok() {
                    // Until every sender is dropped: `Launched`'s.
                    let _ = stay_rx.recv();
                }
            })
            .context("starting the thread that starts the command")?;
        let tid = tid_rx
            .recv()
            .map_err(|_| anyhow!("the thread that starts the command ended at once"))?;
        Ok(Launcher {
            tid,
            go,
            started,
            stay,
            thread,
            program: program.to_string_lossy().into_owned(),
        })
    }

    /// The launcher thread, to attach tracing to.
    pub(crate) fn tid(&self) -> u32 {
        self.tid
    }

    /// Starts the command, and returns it once it has `exec`ed, with the
    /// launcher that stays meanwhile.
    pub(crate) fn release(self) -> Result<(Child, Launched)> {
        let Launcher {
            tid: _,
            go,
            started,
            stay,
            thread,
            program,
        } = self;
        let launched = Launched {
            stay: Some(stay),
            thread: Some(thread),
        };
        let _ = go.send(());
        let child = started
            .recv()
            .map_err(|_| anyhow!("the thread starting {program} ended"))?
            .with_context(|| format!("starting {program}"))?;
        Ok((child, launched))
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        drop(self.stay.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_runs_only_when_released() {
        let dir = std::env::temp_dir().join(format!("offwake-held-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let argv: Vec<OsString> = ["sh", "-c", "echo ran > \"$0\""]
            .iter()
            .map(OsString::from)
            .chain([dir.clone().into_os_string()])
            .collect();
        let launcher = Launcher::spawn(&argv).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!dir.exists(), "the command ran before release");
        let (mut child, launched) = launcher.release().unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(&dir).unwrap(), "ran\n");
        drop(launched);
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn the_command_is_the_launchers_child_and_it_stays_until_dropped() {
        let launcher = Launcher::spawn(&["sleep".into(), "0.2".into()]).unwrap();
        let tid = launcher.tid();
        let comm = std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap();
        assert_eq!(comm.trim_end(), LAUNCHER_NAME);
        let (mut child, launched) = launcher.release().unwrap();
        // Forked by the launcher thread: its parent is this process.
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let ppid = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        assert_eq!(ppid, std::process::id().to_string());
        assert!(child.wait().unwrap().success());
        assert!(std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
        drop(launched);
        assert!(!std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
    }

    #[test]
    fn exit_watch_is_readable_once_the_command_exits() {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let launcher = Launcher::spawn(&["sleep".into(), "0.2".into()]).unwrap();
        let (mut child, _launched) = launcher.release().unwrap();
        let watch = exit_watch(&child).expect("pidfd_open");
        let mut fds = [PollFd::new(watch.as_fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut fds, PollTimeout::from(10u8)).unwrap(), 0);
        let started = std::time::Instant::now();
        assert_eq!(poll(&mut fds, PollTimeout::from(5000u16)).unwrap(), 1);
        assert!(started.elapsed() < std::time::Duration::from_secs(4));
        assert!(child.try_wait().unwrap().is_some_and(|s| s.success()));
    }

    #[test]
    fn dropped_launcher_never_runs_the_command() {
        let launcher = Launcher::spawn(&[OsString::from("true")]).unwrap();
        let tid = launcher.tid();
        drop(launcher);
        // Its thread ends without starting anything.
        let task = std::path::PathBuf::from(format!("/proc/self/task/{tid}"));
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while task.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!task.exists(), "the launcher thread stayed");
    }

    #[test]
    fn missing_program_is_an_error_on_release() {
        let launcher = Launcher::spawn(&[OsString::from("/nonexistent/offwake-test")]).unwrap();
        let Err(err) = launcher.release() else {
            panic!("a missing program started");
        };
        let err = format!("{err:#}");
        assert!(err.contains("/nonexistent/offwake-test"), "{err}");
    }
}
