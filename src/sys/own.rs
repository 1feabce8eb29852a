//! The tool's own tasks: this process's threads (its process id), the
//! helper processes it forks, and those other runs forked (a helper still
//! releasing the events of a run that just ended). They are never
//! targets, and the report says so when one of this process's wakes a
//! traced thread, so that the tool's work is not taken for the traced
//! program's.
//!
//! A run records each helper it forks in a registry only root can write
//! ([`REGISTRY`]): a file named by the helper's pid that holds its start
//! time. Another run takes a process for a helper when its file is there
//! and the process still started then and runs as root: a name can be
//! forged, a start time and root cannot, and a pid used again is another
//! process.

use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use rustc_hash::{FxHashMap, FxHashSet};

use super::cache::CacheDir;
use super::proc::Standing;

/// A task's name as the kernel gives it: up to 16 bytes, NUL-padded.
pub(crate) type Comm = [u8; 16];

/// The most helpers remembered (a run forks a few: the ftrace instance's
/// guardian, the holder of released events).
const MAX_HELPERS: usize = 32;

/// The helper pids, written once each, read from any thread without a lock.
struct Registry {
    slots: [AtomicU32; MAX_HELPERS],
    count: AtomicUsize,
}

impl Registry {
    const fn new() -> Registry {
        Registry {
            slots: [const { AtomicU32::new(0) }; MAX_HELPERS],
            count: AtomicUsize::new(0),
        }
    }

    fn add(&self, pid: u32) {
        let i = self.count.fetch_add(1, Ordering::AcqRel);
        match self.slots.get(i) {
            Some(slot) => slot.store(pid, Ordering::Release),
            None => self.count.store(MAX_HELPERS, Ordering::Release),
        }
    }

    fn filled(&self) -> &[AtomicU32] {
        &self.slots[..self.count.load(Ordering::Acquire).min(MAX_HELPERS)]
    }

    /// This process's threads and the helpers remembered.
    fn tasks_now(&self) -> Vec<u32> {
        let mut pids = super::proc::threads_of(std::process::id());
        pids.extend(self.filled().iter().map(|s| s.load(Ordering::Acquire)));
        pids.retain(|&p| p != 0);
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    fn contains(&self, pid: u32) -> bool {
        pid != 0
            && self
                .filled()
                .iter()
                .any(|slot| slot.load(Ordering::Acquire) == pid)
    }
}

static HELPERS: Registry = Registry::new();

/// Remembers `pid`, a process this one forked, as one of its own, and
/// records it for other runs.
pub(crate) fn add_helper(pid: u32) {
    HELPERS.add(pid);
    if let Some(dir) = registry() {
        register(dir, pid);
    }
}

/// True when `pid` is a helper this process forked.
pub(crate) fn is_helper(pid: u32) -> bool {
    HELPERS.contains(pid)
}

/// The pids of the tasks that are the tool's own now: this process's
/// threads, its helpers, and the helpers other runs left.
pub(crate) fn tasks_now() -> Vec<u32> {
    let mut pids = HELPERS.tasks_now();
    if let Some(dir) = registry() {
        pids.extend(registered_now(dir, super::proc::standing).into_keys());
        pids.sort_unstable();
        pids.dedup();
    }
    pids
}

/// Where runs record their helpers (see the module's documentation).
const REGISTRY: &str = "/run/offwake-perf";

/// The prefix of a helper's file in the registry, before its pid.
const PREFIX: &str = "helper.";

/// Most files of the registry looked at once: a run leaves one or two,
/// removed by the next run once their process is gone.
const MAX_REGISTERED: usize = 1024;

/// The registry, created if missing; `None` when this process is not
/// root's (only root's files are trusted there) or it cannot be used.
/// Unit tests leave the host's alone.
fn registry() -> Option<&'static CacheDir> {
    static DIR: OnceLock<Option<CacheDir>> = OnceLock::new();
    DIR.get_or_init(|| {
        if cfg!(test) || !nix::unistd::geteuid().is_root() {
            return None;
        }
        let root = nix::fcntl::openat(
            nix::fcntl::AT_FDCWD,
            "/",
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        CacheDir::open_under(root, Path::new(REGISTRY), 1).ok()
    })
    .as_ref()
}

/// Records helper `pid`, just forked, in `dir`; best effort.
fn register(dir: &CacheDir, pid: u32) {
    if let Some(s) = super::proc::standing(pid) {
        let _ = dir.write_small(
            &format!("{PREFIX}{pid}"),
            format!("{}\n", s.start).as_bytes(),
        );
    }
}

/// How a process is now (`None` once it is gone).
type ProcessNow = fn(u32) -> Option<Standing>;

/// True when `now` is how the helper that started at `start` is.
fn still(now: Standing, start: u64) -> bool {
    now.start == start && now.root
}

/// The start time of helper `pid` if `dir` records it and the process is
/// still the one recorded.
fn registered(dir: &CacheDir, pid: u32, now: ProcessNow) -> Option<u64> {
    let bytes = dir.read_small(&format!("{PREFIX}{pid}"), 32)?;
    let start: u64 = std::str::from_utf8(&bytes).ok()?.trim().parse().ok()?;
    now(pid).is_some_and(|n| still(n, start)).then_some(start)
}

/// The helpers `dir` records that are still the processes recorded and
/// have not exited, with their start times; the files of the others are
/// removed.
fn registered_now(dir: &CacheDir, now: ProcessNow) -> FxHashMap<u32, u64> {
    let mut alive = FxHashMap::default();
    for name in dir.names_with(PREFIX, MAX_REGISTERED) {
        let pid = name[PREFIX.len()..].parse::<u32>().ok();
        let live = pid.filter(|&pid| now(pid).is_some_and(|n| !n.exited));
        match live.and_then(|pid| Some((pid, registered(dir, pid, now)?))) {
            Some((pid, start)) => {
                alive.insert(pid, start);
            }
            None => dir.remove(&name),
        }
    }
    alive
}

/// Most processes remembered as not helpers though named like the tool's
/// tasks, before they are forgotten (and looked up again).
const MAX_NOT_HELPERS: usize = 4096;

/// The helpers other runs forked, found in the registry: those alive when
/// this run started, then any process named like the tool's tasks
/// (`offwake-…`, or this process's name: a helper has it until it names
/// itself), looked up once under each name.
#[derive(Clone, Debug)]
pub(crate) struct OtherHelpers {
    /// Helpers found, by pid, with their start times.
    found: FxHashMap<u32, u64>,
    /// This process's name.
    own_comm: Comm,
    /// Processes, with the name they had, found not to be helpers.
    not: FxHashSet<(u32, Comm)>,
    /// The start time of `pid` when the registry records it as a helper.
    lookup: fn(u32) -> Option<u64>,
    /// How a process is now.
    now: ProcessNow,
}

impl OtherHelpers {
    /// The helpers the host's registry records now; none without one.
    pub(crate) fn of_registry() -> OtherHelpers {
        let found = registry()
            .map(|dir| registered_now(dir, super::proc::standing))
            .unwrap_or_default();
        let own_comm = std::fs::read("/proc/self/comm")
            .map(|c| {
                let name = c.strip_suffix(b"\n").unwrap_or(&c);
                let mut comm = Comm::default();
                let n = name.len().min(comm.len() - 1);
                comm[..n].copy_from_slice(&name[..n]);
                comm
            })
            .unwrap_or_default();
        OtherHelpers::new(
            found,
            own_comm,
            |pid| registered(registry()?, pid, super::proc::standing),
            super::proc::standing,
        )
    }

    /// No helper of another run.
    #[cfg(test)]
    pub(crate) fn none() -> OtherHelpers {
        OtherHelpers::new(FxHashMap::default(), Comm::default(), |_| None, |_| None)
    }

    fn new(
        found: FxHashMap<u32, u64>,
        own_comm: Comm,
        lookup: fn(u32) -> Option<u64>,
        now: ProcessNow,
    ) -> OtherHelpers {
        OtherHelpers {
            found,
            own_comm,
            not: FxHashSet::default(),
            lookup,
            now,
        }
    }

    /// True when process `pid`, named `comm` in an event, is a helper.
    fn contains(&mut self, pid: u32, comm: Comm) -> bool {
        if let Some(&start) = self.found.get(&pid) {
            match (self.now)(pid) {
                // Its pid is another process's now.
                Some(now) if !still(now, start) => {
                    self.found.remove(&pid);
                }
                // Still the helper, or gone (an event of its past).
                _ => return true,
            }
        }
        let named_so = comm.starts_with(b"offwake-") || (comm == self.own_comm && comm[0] != 0);
        if !named_so || self.not.contains(&(pid, comm)) {
            return false;
        }
        match (self.lookup)(pid) {
            Some(start) => {
                self.found.insert(pid, start);
                true
            }
            None => {
                if self.not.len() >= MAX_NOT_HELPERS {
                    self.not.clear();
                }
                self.not.insert((pid, comm));
                false
            }
        }
    }
}

/// Which tasks are the tool's own.
#[derive(Clone, Debug)]
pub(crate) struct OwnTasks {
    /// This process: every thread with this process id.
    pub(crate) tgid: u32,
    /// Whether a process id is one of its helpers.
    pub(crate) helper: fn(u32) -> bool,
    /// The helpers of other runs.
    pub(crate) others: OtherHelpers,
}

impl OwnTasks {
    /// This process, the helpers it forks, and other runs' helpers.
    pub(crate) fn of_this_process() -> OwnTasks {
        OwnTasks {
            tgid: std::process::id(),
            helper: is_helper,
            others: OtherHelpers::of_registry(),
        }
    }

    /// True when the task `tid` of process `tgid` is this process's or
    /// one of its helpers.
    pub(crate) fn contains(&self, tid: u32, tgid: u32) -> bool {
        tid != 0 && (tgid == self.tgid || (self.helper)(tgid) || (self.helper)(tid))
    }

    /// [`OwnTasks::contains`], or the task, named `comm`, is another
    /// run's helper (a helper's only thread is its process).
    pub(crate) fn holds(&mut self, tid: u32, tgid: u32, comm: Comm) -> bool {
        self.contains(tid, tgid) || (tid != 0 && self.others.contains(tid, comm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_and_helpers_are_own_tasks() {
        let own = OwnTasks {
            tgid: 100,
            helper: |pid| pid == 300,
            others: OtherHelpers::none(),
        };
        assert!(own.contains(100, 100));
        assert!(own.contains(101, 100));
        assert!(own.contains(300, 300));
        assert!(!own.contains(200, 200));
        // The idle tasks are no one's.
        assert!(!own.contains(0, 0));
        assert!(!OwnTasks { tgid: 0, ..own }.contains(0, 0));
    }

    fn alive(start: u64, root: bool) -> Standing {
        Standing {
            start,
            root,
            exited: false,
        }
    }

    fn comm(name: &str) -> Comm {
        let mut c = Comm::default();
        c[..name.len()].copy_from_slice(name.as_bytes());
        c
    }

    #[test]
    fn other_runs_helpers_are_own_tasks_while_their_pid_is_theirs() {
        use std::sync::atomic::AtomicU64;
        // Pid 500 is a helper that started at 7, found as this run
        // started; 600 a helper the registry gives when asked, 700 a
        // process named like one that it does not know.
        static NOW_500: AtomicU64 = AtomicU64::new(7);
        static LOOKUPS: AtomicUsize = AtomicUsize::new(0);
        let mut others = OtherHelpers::new(
            FxHashMap::from_iter([(500, 7)]),
            comm("tool"),
            |pid| {
                LOOKUPS.fetch_add(1, Ordering::Relaxed);
                (pid == 600).then_some(9)
            },
            |pid| match pid {
                // 0: gone.
                500 => Some(alive(NOW_500.load(Ordering::Relaxed), true)).filter(|n| n.start != 0),
                600 => Some(alive(9, true)),
                _ => None,
            },
        );
        let mut own = OwnTasks {
            tgid: 100,
            helper: |_| false,
            others: others.clone(),
        };
        // Whatever its name, as found; a waker is this process's only.
        assert!(own.holds(500, 500, comm("anything")));
        assert!(!own.contains(500, 500));
        assert!(own.holds(101, 100, comm("offwake-perf")));
        // Looked up once by name, then known.
        assert!(own.holds(600, 600, comm("offwake-release")));
        assert!(own.holds(600, 600, comm("offwake-release")));
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 1);
        // A name is not enough; other names are not looked up at all.
        assert!(!own.holds(700, 700, comm("offwake-release")));
        assert!(!own.holds(700, 700, comm("offwake-release")));
        assert!(!own.holds(800, 800, comm("bash")));
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 2);
        // A helper keeps its parent's name until it names itself.
        assert!(!own.holds(900, 900, comm("tool")));
        assert_eq!(LOOKUPS.load(Ordering::Relaxed), 3);
        // Gone, it stays a helper (its events come later); its pid taken
        // by another process, that one is not.
        NOW_500.store(0, Ordering::Relaxed);
        assert!(others.contains(500, comm("x")));
        NOW_500.store(1234, Ordering::Relaxed);
        assert!(!others.contains(500, comm("offwake-release")));
        assert!(!others.contains(500, comm("offwake-release")));
    }

    #[test]
    fn the_registry_keeps_the_helpers_still_alive() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("offwake-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        let dir = CacheDir::at(&path).unwrap();
        // 10 is the helper recorded; 11 has started again since, 12 runs
        // as another user, 13 is gone, 16 has exited; 14's file is not a
        // start time.
        let now: ProcessNow = |pid| match pid {
            10 => Some(alive(5, true)),
            11 => Some(alive(6, true)),
            12 => Some(alive(5, false)),
            16 => Some(Standing {
                exited: true,
                ..alive(5, true)
            }),
            _ => None,
        };
        for pid in [10, 11, 12, 13, 16] {
            dir.write_small(&format!("{PREFIX}{pid}"), b"5\n").unwrap();
        }
        dir.write_small(&format!("{PREFIX}14"), b"x").unwrap();
        dir.write_small("other", b"5").unwrap();
        assert_eq!(registered(&dir, 10, now), Some(5));
        assert_eq!(registered(&dir, 11, now), None);
        assert_eq!(registered(&dir, 15, now), None);
        // An exited helper's events may still come; its file goes once
        // a run starts.
        assert_eq!(registered(&dir, 16, now), Some(5));
        let alive = registered_now(&dir, now);
        assert_eq!(alive, FxHashMap::from_iter([(10, 5)]));
        let mut left: Vec<String> = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["helper.10", "other"]);
        // This process, recorded as a helper, is one if it runs as root.
        let me = std::process::id();
        register(&dir, me);
        let root = nix::unistd::geteuid().is_root();
        assert_eq!(
            registered(&dir, me, super::super::proc::standing).is_some(),
            root
        );
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn helpers_are_remembered() {
        // A registry of its own: the tests of other modules fork helpers.
        let helpers = Registry::new();
        let pid = u32::MAX - 7;
        assert!(!helpers.contains(pid));
        helpers.add(pid);
        assert!(helpers.contains(pid));
        assert!(!helpers.contains(0));
        for p in 1..=MAX_HELPERS as u32 + 2 {
            helpers.add(p);
        }
        assert!(helpers.contains(pid) && helpers.contains(1));
        assert_eq!(helpers.filled().len(), MAX_HELPERS);
        let now = helpers.tasks_now();
        assert!(
            now.contains(&pid) && now.contains(&std::process::id()),
            "{now:?}"
        );
        let now = tasks_now();
        assert!(now.contains(&std::process::id()), "{now:?}");
    }
}
