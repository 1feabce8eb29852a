//! Our private ftrace instance: its name (which says whose it is), its
//! creation and configuration (clock, buffer size, stack options, pid and
//! event filters, events), its removal (by us, or by its [`guardian`] if we
//! die first), and the removal of instances left behind by earlier runs.
//!
//! [`guardian`]: super::guardian
//!
//! Nothing here touches the top-level trace buffer or its settings: every
//! write goes below `instances/<ours>/`.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::guardian::{self, Guardian};
use crate::diag::diag;
use crate::plan::{Follow, Stacks};
use crate::source::tracepoint::Tracefs;
use crate::sys::proc;

/// Prefix of our instances' names: `offwake-perf.<pid>.<start time>`.
pub(crate) const NAME_PREFIX: &str = "offwake-perf.";

/// The clock we ask for: `ktime_get_mono_fast_ns`, the clock perf's
/// `use_clockid = CLOCK_MONOTONIC` uses, shared by all CPUs.
pub(crate) const CLOCK: &str = "mono";

/// Who owns an instance: a process, told apart from a later process that
/// reuses its PID by its start time (clock ticks since boot, field 22 of
/// `/proc/PID/stat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) pid: u32,
    pub(crate) start_time: u64,
}

impl Owner {
    /// This process.
    pub(crate) fn current() -> Result<Owner> {
        let pid = std::process::id();
        let (start_time, _) = proc::start_and_state(pid)
            .context("reading this process's start time from /proc/self/stat")?;
        Ok(Owner { pid, start_time })
    }

    /// The instance name for this owner.
    pub(crate) fn instance_name(&self) -> String {
        format!("{NAME_PREFIX}{}.{}", self.pid, self.start_time)
    }

    /// The owner an instance name records, or None when the name is not one
    /// of ours.
    pub(crate) fn from_instance_name(name: &str) -> Option<Owner> {
        let rest = name.strip_prefix(NAME_PREFIX)?;
        let (pid, start) = rest.split_once('.')?;
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(pid) || !all_digits(start) {
            return None;
        }
        Some(Owner {
            pid: pid.parse().ok()?,
            start_time: start.parse().ok()?,
        })
    }

    /// True while the owning process runs: same PID, same start time, and
    /// not a zombie (a process that has exited but not been reaped yet).
    pub(crate) fn is_alive(&self) -> bool {
        matches!(
            proc::start_and_state(self.pid),
            Some((start, state)) if start == self.start_time && !matches!(state, 'Z' | 'X' | 'x')
        )
    }
}

/// How to set the instance up.
#[derive(Clone, Debug)]
pub(crate) struct InstanceConfig {
    /// Per-CPU buffer size in KiB.
    pub(crate) buffer_kb: usize,
    pub(crate) stacks: Stacks,
    /// The threads the kernel should keep (`None`: every thread). Without
    /// following, through each event's `filter` file (`prev_pid`/
    /// `next_pid` for `sched_switch`, `pid` for `sched_waking`). With it,
    /// these threads and every task they create from now on, through
    /// `set_event_pid` with the `event-fork` option (the kernel keeps the
    /// list current as threads come and go): `sched_switch` is kept when
    /// either side is listed, `sched_waking` when the wakee is.
    pub(crate) threads: Option<Vec<u32>>,
    pub(crate) follow: Follow,
    /// Events to enable besides `sched_switch` and `sched_waking`, as
    /// (system, name).
    pub(crate) extra_events: Vec<(String, String)>,
    /// Wake the reader at the first entry in a CPU's buffer, rather than
    /// once a quarter of it is used.
    pub(crate) wake_at_once: bool,
}

/// A live instance; removed (events off, directory gone) on drop.
pub(crate) struct Instance {
    dir: PathBuf,
    enabled_events: Vec<PathBuf>,
    removed: bool,
    /// Removes the instance should this process die first; dropped (told
    /// we are done) after the instance is removed.
    _guardian: Guardian,
}

impl Instance {
    /// Creates `instances/<name>`, starts its guardian and sets it up; the
    /// events are enabled last. On failure the half-made instance is
    /// removed.
    pub(crate) fn create(
        tracefs: &Tracefs,
        name: &str,
        config: &InstanceConfig,
    ) -> Result<Instance> {
        let instances = tracefs.root().join("instances");
        let dir = instances.join(name);
        let guardian = guardian::Prepared::new(&dir)?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => bail!(
                "{} does not exist: this kernel's tracefs has no instances (Linux 3.17 or \
                 later is needed)",
                instances.display()
            ),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("creating the ftrace instance {}", dir.display()));
            }
        }
        // Before any of its files is opened: the guardian must hold none.
        let guardian = match guardian.spawn() {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let mut instance = Instance {
            dir,
            enabled_events: Vec::new(),
            removed: false,
            _guardian: guardian,
        };
        instance.configure(config)?;
        Ok(instance)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn configure(&mut self, config: &InstanceConfig) -> Result<()> {
        // Nothing is recorded until the events are enabled at the end; a new
        // instance starts with tracing on and every event off.
        match self.write("trace_clock", CLOCK) {
            Ok(()) => {}
            Err(e) => {
                let available =
                    std::fs::read_to_string(self.dir.join("trace_clock")).unwrap_or_default();
                return Err(e.context(format!(
                    "this kernel has no `{CLOCK}` trace clock (it offers: {}); it is \
                     needed to order events across CPUs",
                    available.trim()
                )));
            }
        }
        self.write("buffer_size_kb", &config.buffer_kb.to_string())?;
        // Overwrite mode: when the reader falls behind, the oldest unread
        // page is dropped and the next page read says so ("missed events").
        self.write("options/overwrite", "1")?;
        self.write("options/stacktrace", bool01(config.stacks.kernel))?;
        self.write("options/userstacktrace", bool01(config.stacks.user))?;
        // Lets `saved_tgids` name the process of a thread that has exited.
        self.write("options/record-tgid", "1")?;
        // Wake the reader once a quarter of a CPU's buffer is used, or at
        // once.
        self.write(
            "buffer_percent",
            if config.wake_at_once { "0" } else { "25" },
        )?;

        let switch = self.dir.join("events/sched/sched_switch");
        let waking = self.dir.join("events/sched/sched_waking");
        match &config.threads {
            None => {
                // This tool's own tasks are not traced, unless the other
                // side of a switch or the wakee is (ftrace keeps a switch
                // when either side is traced, and a wakeup made by an
                // ignored task when its wakee is traced). Best effort:
                // kernels before 5.8 have no such list, and tasks the tool
                // starts later are left out when the report is made.
                let own = crate::sys::own::tasks_now()
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" ");
                let _ = self.write("set_event_notrace_pid", &own);
            }
            Some(tids) if config.follow == Follow::Nothing => {
                let (sw, wk) = tid_filters(tids);
                write_file(&switch.join("filter"), &sw)?;
                write_file(&waking.join("filter"), &wk)?;
            }
            Some(pids) => {
                self.write("options/event-fork", "1")?;
                let list = pids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" ");
                self.write("set_event_pid", &list)?;
            }
        }

        let mut events = vec![switch, waking];
        for (system, name) in &config.extra_events {
            events.push(self.dir.join("events").join(system).join(name));
        }
        for event in events {
            write_file(&event.join("enable"), "1")?;
            self.enabled_events.push(event);
        }
        self.write("tracing_on", "1")?;
        Ok(())
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        write_file(&self.dir.join(file), value)
    }

    /// Stops recording: tracing off, then every event we enabled off.
    pub(crate) fn disable(&mut self) -> Result<()> {
        let mut first = self.write("tracing_on", "0").err();
        for event in std::mem::take(&mut self.enabled_events) {
            if let Err(e) = write_file(&event.join("enable"), "0") {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Disables the events and removes the instance. Every reader of its
    /// files must be closed first (the kernel refuses with EBUSY otherwise).
    pub(crate) fn remove(mut self) -> Result<()> {
        self.remove_inner()
    }

    fn remove_inner(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        let disabled = self.disable();
        std::fs::remove_dir(&self.dir)
            .with_context(|| format!("removing the ftrace instance {}", self.dir.display()))?;
        self.removed = true;
        disabled
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = self.remove_inner() {
            diag!("offwake-perf: {e:#}");
        }
    }
}

fn bool01(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// Writes a tracefs control file, with the file and value in the error.
fn write_file(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing `{value}` to {}", path.display()))
}

/// The `filter` expressions that keep only `tids`: (sched_switch,
/// sched_waking).
pub(crate) fn tid_filters(tids: &[u32]) -> (String, String) {
    let switch = tids
        .iter()
        .map(|t| format!("prev_pid == {t} || next_pid == {t}"))
        .collect::<Vec<_>>()
        .join(" || ");
    let waking = tids
        .iter()
        .map(|t| format!("pid == {t}"))
        .collect::<Vec<_>>()
        .join(" || ");
    (switch, waking)
}

/// Removes the instances that earlier runs left behind (killed, with their
/// guardian, before they could clean up): those named as ours whose owner
/// is no longer running. Returns the names removed. One that is busy (its
/// guardian is at it, or a process of another PID namespace reads it) or
/// already gone (its guardian or another run removed it) is left quietly;
/// any other failure is reported on stderr.
pub(crate) fn remove_stale(tracefs: &Tracefs) -> Vec<String> {
    let dir = tracefs.root().join("instances");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(owner) = Owner::from_instance_name(name) else {
            continue;
        };
        if owner.is_alive() {
            continue;
        }
        match std::fs::remove_dir(entry.path()) {
            Ok(()) => removed.push(name.to_string()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOENT)) => {}
            Err(e) => diag!(
                "offwake-perf: cannot remove the stale ftrace instance {}: {e}",
                entry.path().display()
            ),
        }
    }
    removed.sort();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_not_ours() {
        let o = Owner {
            pid: 4242,
            start_time: 987654,
        };
        let name = o.instance_name();
        assert_eq!(name, "offwake-perf.4242.987654");
        assert_eq!(Owner::from_instance_name(&name), Some(o));
        for foreign in [
            "offwake-perf",
            "offwake-perf.",
            "offwake-perf.12",
            "offwake-perf.12.",
            "offwake-perf..5",
            "offwake-perf.12.x",
            "offwake-perf.-1.5",
            "offwake-perf.12.5.6",
            "offwake-perf.99999999999.5",
            "perf.12.5",
            "bpftrace",
        ] {
            assert_eq!(Owner::from_instance_name(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn this_process_owns_its_instances_while_it_lives() {
        let me = Owner::current().unwrap();
        assert!(me.is_alive());
        assert_eq!(me.pid, std::process::id());
    }

    #[test]
    fn stale_detection() {
        let me = Owner::current().unwrap();
        // Same PID, other start time: a process that reused our PID's
        // number is not the owner.
        let reused = Owner {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!reused.is_alive());
        // A PID above pid_max never runs.
        let gone = Owner {
            pid: 1 << 23,
            start_time: 1,
        };
        assert!(!gone.is_alive());
    }

    #[test]
    fn remove_stale_only_touches_dead_owners_instances() {
        let root = std::env::temp_dir().join(format!("offwake-stale-{}", std::process::id()));
        let inst = root.join("instances");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&inst).unwrap();
        let me = Owner::current().unwrap();
        let dead = Owner {
            pid: 1 << 23,
            start_time: 7,
        };
        let reused = Owner {
            start_time: me.start_time + 1,
            ..me
        };
        for name in [
            me.instance_name(),
            dead.instance_name(),
            reused.instance_name(),
            "someone-else".to_string(),
            "offwake-perf.notours".to_string(),
        ] {
            std::fs::create_dir(inst.join(name)).unwrap();
        }
        let removed = remove_stale(&Tracefs::at(&root));
        let mut expect = vec![dead.instance_name(), reused.instance_name()];
        expect.sort();
        assert_eq!(removed, expect);
        let mut left: Vec<String> = std::fs::read_dir(&inst)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut want = vec![
            me.instance_name(),
            "offwake-perf.notours".to_string(),
            "someone-else".to_string(),
        ];
        want.sort();
        assert_eq!(left, want);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn filters_name_every_thread() {
        let (sw, wk) = tid_filters(&[10, 20]);
        assert_eq!(
            sw,
            "prev_pid == 10 || next_pid == 10 || prev_pid == 20 || next_pid == 20"
        );
        assert_eq!(wk, "pid == 10 || pid == 20");
    }
}
