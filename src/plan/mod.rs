//! What a run does, decided once from the command line: which threads are
//! targets, which stacks are taken and how, what is filtered and how the
//! report looks. Every stage reads its part of the [`Plan`]; none reads
//! the command line.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::cli::{Backend, CallGraph, Cli, DEFAULT_CALL_GRAPH};
use crate::event::state::StateFilter;
use crate::report::{Format, ReportOptions, StackMode};
use crate::sys::cgroup::Hierarchy;
use crate::sys::proc;
use crate::sys::proc::threads_of;

mod cgroups;
pub(crate) mod sizing;

pub(crate) use cgroups::{CgroupTable, CgroupTargets, CgroupUse, is_cgroup_rel};

/// Which threads are targets (`-p`, `-t`, `-u`, `-k`, `-- COMMAND`, or
/// every thread). The backends derive what the kernel can drop from it;
/// the aggregator decides with it which intervals count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Targets {
    All,
    /// `-u`: threads without PF_KTHREAD.
    UserThreads,
    /// `-k`: threads with PF_KTHREAD, idle tasks included.
    KernelThreads,
    /// `-p`: the threads of these processes (TGIDs), and the threads they
    /// start.
    Processes(BTreeSet<u32>),
    /// `-t`: these threads only.
    Threads(BTreeSet<u32>),
    /// `-- COMMAND`: the process `root` from its exec on, and every process
    /// it (transitively) starts. It inherits its events from `launcher`,
    /// the thread of this process that starts it, to which the kernel
    /// attaches them (see `command`); `root` is 0 until it is started.
    Command {
        root: u32,
        launcher: u32,
    },
    /// `--cgroup`: the threads of these cgroups and their descendants.
    Cgroups(CgroupTargets),
}

/// What the tasks created by traced threads get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Follow {
    /// Nothing (`-t`, or the whole system, where nothing needs following).
    Nothing,
    /// The events, when they are threads of the same process (`-p`).
    Threads,
    /// The events, threads and processes alike (`-- COMMAND`).
    Everything,
}

impl Targets {
    /// What the kernel should do with tasks the traced threads create.
    pub(crate) fn follow(&self) -> Follow {
        match self {
            Targets::Processes(_) => Follow::Threads,
            Targets::Command { .. } => Follow::Everything,
            _ => Follow::Nothing,
        }
    }

    /// The processes of `-p`, whose threads are listed again after
    /// attaching.
    pub(crate) fn processes(&self) -> Vec<u32> {
        match self {
            Targets::Processes(pids) => pids.iter().copied().collect(),
            _ => Vec::new(),
        }
    }

    /// The threads the kernel should record, as they are now, sorted:
    /// the named threads, the threads of the named processes, or the
    /// command's launcher. `None` when the whole system is recorded.
    pub(crate) fn threads_now(&self) -> Option<Vec<u32>> {
        match self {
            Targets::Threads(tids) => Some(tids.iter().copied().collect()),
            Targets::Command { launcher, .. } => Some(vec![*launcher]),
            Targets::Processes(pids) => {
                let mut v: Vec<u32> = Vec::new();
                for &pid in pids {
                    v.push(pid);
                    v.extend(threads_of(pid));
                }
                v.sort_unstable();
                v.dedup();
                Some(v)
            }
            Targets::All | Targets::UserThreads | Targets::KernelThreads | Targets::Cgroups(_) => {
                None
            }
        }
    }
}

/// Which stacks are taken, and how user stacks are walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stacks {
    /// False under `-U`.
    pub(crate) kernel: bool,
    /// False under `-K`.
    pub(crate) user: bool,
    pub(crate) call_graph: CallGraph,
    /// The user asked for `call_graph` (else it is the default for the
    /// targets, which the tracefs backend may lower to `fp`).
    pub(crate) call_graph_asked: bool,
}

impl Stacks {
    /// Both kernel and user stacks, walked by frame pointers.
    #[cfg(test)]
    pub(crate) fn both_fp() -> Stacks {
        Stacks {
            kernel: true,
            user: true,
            call_graph: CallGraph::Fp,
            call_graph_asked: false,
        }
    }

    /// The bytes of user stack each sample copies: under `dwarf`, unless
    /// no user stack is wanted (`-K`).
    pub(crate) fn user_copy(&self) -> Option<u32> {
        match self.call_graph {
            CallGraph::Dwarf { size } if self.user => Some(size),
            _ => None,
        }
    }

    pub(crate) fn mode(&self) -> StackMode {
        match (self.kernel, self.user) {
            (false, _) => StackMode::UserOnly,
            (_, false) => StackMode::KernelOnly,
            _ => StackMode::Both,
        }
    }
}

/// Everything a run needs to know, checked.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// For `-- COMMAND`, [`Targets::Command`] once its launcher runs
    /// ([`Plan::command_launching`]); until then, every thread.
    pub(crate) targets: Targets,
    pub(crate) stacks: Stacks,
    pub(crate) state: Option<StateFilter>,
    /// Intervals shorter than this many microseconds are dropped.
    pub(crate) min_block_us: u64,
    /// Intervals longer than this many microseconds are dropped.
    pub(crate) max_block_us: u64,
    /// Most unique stacks kept (kernel and user together).
    pub(crate) stack_storage_size: usize,
    /// Levels of wakeup chains (`--chain`, 1: the waker only).
    pub(crate) chain: u8,
    /// `--wall`: on-CPU samples a second of CPU time (`None`: no
    /// wall-clock profile).
    pub(crate) wall: Option<u32>,
    pub(crate) backend: Backend,
    /// Per-CPU ring size in pages (`None`: the default for the stacks).
    pub(crate) buffer_pages: Option<usize>,
    /// The most per-task perf events for chosen threads (`--event-budget`).
    pub(crate) event_budget: usize,
    /// Seconds to trace (`None`: until a signal, or the command's exit).
    pub(crate) duration: Option<u64>,
    /// Seconds between reports (`--interval`); `None`: one at the end.
    pub(crate) interval: Option<u64>,
    /// The command to start and trace (empty: none).
    pub(crate) command: Vec<OsString>,
    /// `--module-offsets`: unresolved user frames in files are named by
    /// their offsets (symbolization keeps what this needs).
    pub(crate) module_offsets: bool,
    /// Where the report goes, each at most once (files, or stdout), and
    /// how it looks there.
    pub(crate) outputs: Vec<Destination>,
    /// The perf.data to read instead of tracing (`-i`).
    pub(crate) input: Option<PathBuf>,
    /// `--per-cgroup`: entries are split by cgroup.
    pub(crate) per_cgroup: bool,
    /// Where cgroup ids are named, when entries carry their cgroup
    /// (`--cgroup`, `--per-cgroup`, or a pprof report's labels); `None`
    /// for a recording, which names its own.
    pub(crate) cgroup_names: Option<Hierarchy>,
    /// A recording's cgroups, named by its own records, when they are
    /// needed or wanted ([`Plan::use_recorded_cgroups`]).
    pub(crate) recorded_cgroups: Option<Arc<CgroupTable>>,
}

/// One place the report is written to, and how it looks there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Destination {
    /// `None`: stdout.
    pub(crate) path: Option<PathBuf>,
    pub(crate) options: ReportOptions,
}

impl Plan {
    /// Decides the run from `cli`, after checking that every named PID
    /// and TID exists and that `--state` can match.
    pub(crate) fn from_cli(cli: &Cli) -> Result<Plan> {
        let targets = targets(cli)?;
        let state = cli.state.map(StateFilter::from_user).transpose()?;
        // A recording's stacks are what it holds.
        let default_graph = if cli.input.is_some() {
            CallGraph::Fp
        } else {
            DEFAULT_CALL_GRAPH
        };
        let stacks = Stacks {
            kernel: !cli.user_stacks_only,
            user: !cli.kernel_stacks_only,
            call_graph: cli.call_graph.unwrap_or(default_graph),
            call_graph_asked: cli.call_graph.is_some(),
        };
        let report = |format| ReportOptions {
            format,
            per_cgroup: cli.per_cgroup,
            wall: cli.wall.is_some(),
            delimited: cli.delimited,
            stacks: stacks.mode(),
        };
        let outputs: Vec<Destination> = destinations(cli)
            .into_iter()
            .map(|(path, format)| Destination {
                path,
                options: report(format),
            })
            .collect();
        let cgroup_names = match &targets {
            // A recording's ids are not this machine's.
            _ if cli.input.is_some() => None,
            Targets::Cgroups(c) => Some(c.hierarchy.clone()),
            _ if cli.per_cgroup => Some(Hierarchy::find()?),
            // pprof's labels are a bonus: without a cgroup mount, none.
            _ if writes_pprof(&outputs) => Hierarchy::find().ok(),
            _ => None,
        };
        Ok(Plan {
            targets,
            stacks,
            state,
            min_block_us: cli.min_block_time,
            max_block_us: cli.max_block_time,
            stack_storage_size: cli.stack_storage_size,
            chain: cli.chain,
            wall: cli.wall,
            backend: cli.backend,
            buffer_pages: cli.mmap_pages,
            event_budget: cli.event_budget,
            duration: cli.duration,
            interval: cli.interval,
            command: cli.command.clone(),
            module_offsets: cli.module_offsets,
            outputs,
            input: cli.input.clone(),
            per_cgroup: cli.per_cgroup,
            cgroup_names,
            recorded_cgroups: None,
        })
    }

    /// What a recording's cgroups are for: `--cgroup` and `--per-cgroup`
    /// need them, a pprof report labels entries with them.
    pub(crate) fn recorded_cgroup_use(&self) -> CgroupUse {
        if self.input.is_none() {
            CgroupUse::None
        } else if matches!(self.targets, Targets::Cgroups(_)) {
            CgroupUse::Needed("--cgroup")
        } else if self.per_cgroup {
            CgroupUse::Needed("--per-cgroup")
        } else if writes_pprof(&self.outputs) {
            CgroupUse::Labels
        } else {
            CgroupUse::None
        }
    }

    /// Names cgroups by the recording's own `names` (`None`: it has
    /// none), among which the PATHs of `--cgroup` are found: an error
    /// says which is not there, or is ambiguous.
    pub(crate) fn use_recorded_cgroups(&mut self, names: Option<CgroupTable>) -> Result<()> {
        let Some(names) = names else {
            return Ok(());
        };
        if let Targets::Cgroups(targets) = &mut self.targets {
            let file = self.input.as_deref().unwrap_or(Path::new("the recording"));
            targets.find_recorded(&names, file)?;
        }
        self.recorded_cgroups = Some(Arc::new(names));
        Ok(())
    }

    /// The threads whose scheduler events the source records: the
    /// targets, or every thread when chains are followed (a waker need
    /// not be a target, and its own waits and wakers are needed).
    pub(crate) fn recorded(&self) -> Targets {
        if self.chain > 1 {
            Targets::All
        } else {
            self.targets.clone()
        }
    }

    /// The `--state` filter the source may apply to switch-outs: none
    /// when chains are followed, since a waker's waits count whatever
    /// their state.
    pub(crate) fn recorded_state(&self) -> Option<StateFilter> {
        self.state.filter(|_| self.chain == 1)
    }

    /// Entries are split by cgroup: asked for, or for a pprof report's
    /// `cgroup` label (when cgroups can be named).
    pub(crate) fn split_cgroups(&self) -> bool {
        (self.cgroup_names.is_some() || self.recorded_cgroups.is_some())
            && (self.per_cgroup || writes_pprof(&self.outputs))
    }

    /// The command is about to be started by the thread `launcher`.
    pub(crate) fn command_launching(&mut self, launcher: u32) {
        self.targets = Targets::Command { root: 0, launcher };
    }

    /// The command, started, is process `root`.
    pub(crate) fn command_started(&mut self, root: u32) {
        if let Targets::Command { launcher, .. } = self.targets {
            self.targets = Targets::Command { root, launcher };
        }
    }
}

/// True when one of `outputs` is pprof, whose samples carry a `cgroup`
/// label.
fn writes_pprof(outputs: &[Destination]) -> bool {
    outputs.iter().any(|d| d.options.format == Format::Pprof)
}

/// Where the report goes (`-o`, repeated; stdout without it), with the
/// format each asks for (the command line names each place once).
fn destinations(cli: &Cli) -> Vec<(Option<PathBuf>, Format)> {
    let paths: Vec<Option<&Path>> = if cli.output.is_empty() {
        vec![None]
    } else {
        cli.output
            .iter()
            .map(|p| (p.as_os_str() != "-").then_some(p.as_path()))
            .collect()
    };
    paths
        .into_iter()
        .map(|path| {
            let format = Format::choose(cli.format, cli.folded, path);
            (path.map(Path::to_path_buf), format)
        })
        .collect()
}

/// The targets from `-p`/`-t`/`-u`/`-k`, after checking that every named
/// PID and TID exists (when tracing: a recording's need not exist now).
fn targets(cli: &Cli) -> Result<Targets> {
    let tracing = cli.input.is_none();
    if let Some(pids) = &cli.pid {
        for &pid in pids.iter().filter(|_| tracing) {
            let tgid = proc::tgid(pid)
                .ok_or_else(|| anyhow::anyhow!("no process with PID {pid} exists"))?;
            if tgid != pid {
                bail!(
                    "{pid} is a thread of process {tgid}, not a process; use -t {pid} or -p {tgid}"
                );
            }
        }
        return Ok(Targets::Processes(pids.iter().copied().collect()));
    }
    if let Some(paths) = &cli.cgroup {
        // A recording's cgroups need not exist here: found in it once open.
        return Ok(Targets::Cgroups(if tracing {
            CgroupTargets::resolve(paths)?
        } else {
            CgroupTargets::given(paths)?
        }));
    }
    if let Some(tids) = &cli.tid {
        for &tid in tids.iter().filter(|_| tracing) {
            // /proc/TID resolves for any thread, even one that is not a
            // process leader.
            if !Path::new("/proc").join(tid.to_string()).exists() {
                bail!("no thread with TID {tid} exists");
            }
        }
        return Ok(Targets::Threads(tids.iter().copied().collect()));
    }
    Ok(if cli.user_threads_only {
        Targets::UserThreads
    } else if cli.kernel_threads_only {
        Targets::KernelThreads
    } else {
        Targets::All
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::OtherThread;

    fn plan(args: &[&str]) -> Result<Plan> {
        let cli = Cli::try_parse_from_checked(
            std::iter::once("offwake-perf").chain(args.iter().copied()),
        )?;
        Plan::from_cli(&cli)
    }

    #[test]
    fn every_mode_defaults_to_dwarf() {
        let me = std::process::id().to_string();
        let modes: [&[&str]; 8] = [
            &["-p", &me],
            &["-t", &me],
            &["--", "true"],
            &[],
            &["-u"],
            &["-k"],
            &["--chain", "3", "-p", &me],
            &["--cgroup", "/"],
        ];
        for args in modes {
            let Ok(p) = plan(args) else {
                // No cgroup v2 mount here.
                continue;
            };
            assert_eq!(p.stacks.call_graph, DEFAULT_CALL_GRAPH, "{args:?}");
            assert!(!p.stacks.call_graph_asked);
        }
        let asked = plan(&["--call-graph", "fp"]).unwrap().stacks;
        assert_eq!(
            (asked.call_graph, asked.call_graph_asked),
            (CallGraph::Fp, true)
        );
        let asked = plan(&["--call-graph", "dwarf"]).unwrap().stacks.call_graph;
        assert_eq!(asked, CallGraph::Dwarf { size: 8192 }, "perf's size");
    }

    #[test]
    fn kernel_only_stacks_copy_no_user_stack() {
        let me = std::process::id().to_string();
        let p = plan(&["-K", "-p", &me]).unwrap();
        assert_eq!(p.stacks.user_copy(), None);
        assert_eq!(p.outputs[0].options.stacks, StackMode::KernelOnly);
        let p = plan(&["-p", &me]).unwrap();
        assert_eq!(p.stacks.user_copy(), Some(4096));
        assert_eq!(
            plan(&["-U"]).unwrap().outputs[0].options.stacks,
            StackMode::UserOnly
        );
    }

    #[test]
    fn a_thread_named_as_a_process_is_refused_with_the_fix() {
        let me = std::process::id();
        let other = OtherThread::start();
        let err = format!("{:#}", plan(&["-p", &other.tid.to_string()]).unwrap_err());
        assert!(
            err.contains(&format!("use -t {} or -p {me}", other.tid)),
            "{err}"
        );
        let err = format!("{:#}", plan(&["-p", "4194304"]).unwrap_err());
        assert!(err.contains("no process with PID 4194304"), "{err}");
        assert_eq!(
            plan(&["-p", &me.to_string()]).unwrap().targets,
            Targets::Processes(BTreeSet::from([me]))
        );
    }

    #[test]
    fn the_threads_of_named_processes_are_listed_with_them() {
        let me = std::process::id();
        let other = OtherThread::start();
        let listed = Targets::Processes(BTreeSet::from([me]))
            .threads_now()
            .unwrap();
        assert!(
            listed.contains(&me) && listed.contains(&other.tid),
            "{listed:?}"
        );
        assert!(listed.windows(2).all(|w| w[0] < w[1]), "{listed:?}");
        assert_eq!(Targets::All.threads_now(), None);
        assert_eq!(
            Targets::Command {
                root: 7,
                launcher: 3
            }
            .threads_now(),
            Some(vec![3])
        );
    }

    fn formats(args: &[&str]) -> Vec<(Option<String>, Format)> {
        plan(args)
            .unwrap()
            .outputs
            .into_iter()
            .map(|d| (d.path.map(|p| p.display().to_string()), d.options.format))
            .collect()
    }

    #[test]
    fn the_format_follows_the_extension_unless_asked() {
        let one = |args: &[&str]| formats(args)[0].1;
        assert_eq!(one(&[]), Format::Text);
        assert_eq!(one(&["-f"]), Format::Folded);
        assert_eq!(one(&["-o", "x.svg"]), Format::Svg);
        assert_eq!(one(&["-o", "X.SVG"]), Format::Svg);
        assert_eq!(one(&["-o", "x.json"]), Format::Speedscope);
        assert_eq!(one(&["-o", "x.pb.gz"]), Format::Pprof);
        assert_eq!(one(&["-o", "x.pprof"]), Format::Pprof);
        assert_eq!(one(&["-o", "x.gz"]), Format::Text);
        assert_eq!(one(&["-f", "-o", "x.txt"]), Format::Folded);
        assert_eq!(one(&["-f", "-o", "x.svg"]), Format::Svg);
        assert_eq!(one(&["--format", "pprof", "-o", "x.svg"]), Format::Pprof);
        assert_eq!(one(&["--format", "svg"]), Format::Svg);
        assert_eq!(formats(&["-o", "-"]), [(None, Format::Text)]);
    }

    #[test]
    fn one_trace_can_go_to_several_places() {
        assert_eq!(
            formats(&["-f", "-o", "a.folded", "-o", "a.svg", "-o", "-"]),
            [
                (Some("a.folded".to_string()), Format::Folded),
                (Some("a.svg".to_string()), Format::Svg),
                (None, Format::Folded),
            ]
        );
    }

    #[test]
    fn chains_record_every_thread_whatever_the_targets() {
        let me = std::process::id().to_string();
        let one = plan(&["-p", &me, "--state", "2"]).unwrap();
        assert_eq!(one.recorded(), one.targets);
        assert!(one.recorded_state().is_some());
        assert!(matches!(one.stacks.call_graph, CallGraph::Dwarf { .. }));
        let three = plan(&["-p", &me, "--state", "2", "--chain", "3"]).unwrap();
        assert_eq!(three.recorded(), Targets::All);
        assert_eq!(three.targets, one.targets);
        assert!(three.recorded_state().is_none() && three.state.is_some());
        // Recording the whole system copies stacks as well.
        assert_eq!(three.stacks.call_graph, one.stacks.call_graph);
        for bad in ["0", "9", "x"] {
            assert!(Cli::try_parse_from_checked(["offwake-perf", "--chain", bad]).is_err());
        }
    }

    #[test]
    fn a_recording_s_cgroups_are_named_by_it_alone() {
        let me = std::process::id().to_string();
        let mut p = plan(&["-i", "rec.data", "--cgroup", "nowhere-here-1,x.service"]).unwrap();
        assert_eq!(p.cgroup_names, None);
        assert_eq!(p.recorded_cgroup_use(), CgroupUse::Needed("--cgroup"));
        assert!(!p.split_cgroups());
        let table: CgroupTable = [
            (5, Arc::from("/nowhere-here-1")),
            (6, Arc::from("/s/x.service")),
        ]
        .into_iter()
        .collect();
        p.use_recorded_cgroups(Some(table)).unwrap();
        let Targets::Cgroups(t) = &p.targets else {
            panic!("{:?}", p.targets);
        };
        assert!(t.holds("/nowhere-here-1/a") && t.holds("/s/x.service") && !t.holds("/s"));
        assert!(p.recorded_cgroups.is_some() && !p.split_cgroups());
        let p = plan(&["-i", "rec.data", "--per-cgroup"]).unwrap();
        assert_eq!(p.recorded_cgroup_use(), CgroupUse::Needed("--per-cgroup"));
        assert_eq!(p.cgroup_names, None);
        let mut p = plan(&["-i", "rec.data", "-o", "x.pb.gz"]).unwrap();
        assert_eq!(p.recorded_cgroup_use(), CgroupUse::Labels);
        assert_eq!(p.cgroup_names, None);
        p.use_recorded_cgroups(None).unwrap();
        assert!(!p.split_cgroups());
        p.use_recorded_cgroups(Some(CgroupTable::default()))
            .unwrap();
        assert!(p.split_cgroups());
        let p = plan(&["-i", "rec.data", "-f"]).unwrap();
        assert_eq!(p.recorded_cgroup_use(), CgroupUse::None);
        assert_eq!(
            plan(&["-p", &me]).unwrap().recorded_cgroup_use(),
            CgroupUse::None
        );
        // Read without the recording, a PATH is checked all the same.
        assert!(plan(&["-i", "rec.data", "--cgroup", "a/../b"]).is_err());
    }
}
