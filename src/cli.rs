//! The command line: bcc `offwaketime`'s options plus what perf users expect,
//! parsed with clap, then checked for conflicts between values that clap
//! cannot see (`-m` over `-M`, a tracefs buffer too large). Usage errors
//! exit with status 2, as clap gives them.

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, ValueEnum};

pub(crate) const EXAMPLES: &str = "\
examples:
    offwake-perf                  # trace off-CPU + waker stacks until Ctrl-C
    offwake-perf 5                # trace for 5 seconds only
    offwake-perf -f 5             # 5 seconds, folded output (for flamegraph.pl)
    offwake-perf -m 1000          # only blocks longer than 1000 us
    offwake-perf -M 9000          # only blocks shorter than 9000 us
    offwake-perf -p 185           # only threads of process 185
    offwake-perf -p 185,186 10    # processes 185 and 186, for 10 seconds
    offwake-perf -t 188           # only thread 188
    offwake-perf -u               # only user threads (no kernel threads)
    offwake-perf -k               # only kernel threads
    offwake-perf -U               # show user-space stacks only
    offwake-perf -K               # show kernel stacks only
    offwake-perf --state 2        # only uninterruptible (D) sleeps
    offwake-perf -f -- make -j2   # run a command and trace it and its children
    offwake-perf --chain 3 -p 185 10            # who woke the waker, 3 levels
    offwake-perf --cgroup nginx.service 10      # a service's (or container's) cgroup
    offwake-perf -f --per-cgroup 10             # the whole system, split by cgroup
    offwake-perf --call-graph dwarf,32768 -p 185   # deeper user stacks (node)
    offwake-perf -o offwake.svg 10              # an off-wake flame graph
    offwake-perf -o offwake.pb.gz -p 185 10     # pprof, for Pyroscope or Parca
    offwake-perf -o offwake.json -- make -j2    # speedscope
    offwake-perf -i perf.data -o offwake.svg    # a recording of stock perf (see README)
    offwake-perf -f 10 | flamegraph.pl --color=chain --countname=us > offwake.svg

man page and shell completions:
    offwake-perf --generate man|complete-bash|complete-zsh|complete-fish";

/// Both forms of the command line, shown by --help and every usage error.
/// clap's own usage is built from the arguments given: after a refused
/// `-i FILE DURATION`, it is that invalid command line.
const USAGE: &str = "offwake-perf [OPTIONS] [DURATION] [-- <COMMAND>...]\n       \
                     offwake-perf -i <FILE> [OPTIONS]";

/// Where events come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// perf_event_open, falling back to tracefs when it is denied.
    Auto,
    /// perf_event_open only.
    Perf,
    /// A private tracefs (ftrace) instance.
    Tracefs,
}

/// How user stacks are walked (`--call-graph`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallGraph {
    /// The kernel follows frame pointers.
    Fp,
    /// The kernel copies this many bytes of user stack per sample, which
    /// are unwound with DWARF call frame information.
    Dwarf { size: u32 },
}

/// Bytes of user stack copied per sample under `dwarf` without a size,
/// as perf copies.
pub(crate) const DEFAULT_DWARF_SIZE: u32 = 8192;

/// How user stacks are walked when `--call-graph` does not say, in every
/// mode: DWARF from a copy of this size (see `bench/README.md`).
pub(crate) const DEFAULT_CALL_GRAPH: CallGraph = CallGraph::Dwarf { size: 4096 };

/// Largest copy the kernel takes (`sample_stack_user` must stay under
/// 65535 and be a multiple of 8).
pub(crate) const MAX_DWARF_SIZE: u32 = 65528;

/// Summarize blocked time by off-CPU stack and waker stack, without eBPF.
#[derive(Debug, Parser)]
#[command(
    name = "offwake-perf",
    version,
    about = "Summarize blocked time by off-CPU stack + waker stack, without eBPF",
    long_about = "Summarize blocked time by off-CPU stack + waker stack, without eBPF.\n\n\
        Reads the sched:sched_switch and sched:sched_waking tracepoints with \
        callchains through perf_event_open(2), pairs them per thread and prints \
        what bcc's offwaketime prints. Needs root (or CAP_PERFMON and tracefs access).\n\n\
        offwake-perf's own threads are never traced as targets; where one of them \
        wakes a traced thread, the report names it as the waker and a NOTE counts it. \
        A wakeup made by an interrupt is named [hardirq], [softirq] or [nmi], never \
        the task the interrupt landed in.",
    after_help = EXAMPLES,
    after_long_help = EXAMPLES,
    override_usage = USAGE
)]
pub struct Cli {
    /// Whole seconds to trace, at most 4294967295 (default: until Ctrl-C or
    /// SIGTERM).
    #[arg(value_name = "DURATION", value_parser = seconds)]
    pub(crate) duration: Option<u64>,

    /// Trace only threads of these processes (comma-separated PIDs).
    #[arg(short = 'p', long = "pid", value_name = "PIDS", value_delimiter = ',', value_parser = positive_id,
          conflicts_with_all = ["tid", "user_threads_only", "kernel_threads_only"])]
    pub(crate) pid: Option<Vec<u32>>,

    /// Trace only these threads (comma-separated TIDs).
    #[arg(short = 't', long = "tid", value_name = "TIDS", value_delimiter = ',', value_parser = positive_id,
          conflicts_with_all = ["user_threads_only", "kernel_threads_only"])]
    pub(crate) tid: Option<Vec<u32>>,

    /// Trace user threads only (no kernel threads).
    #[arg(short = 'u', long, conflicts_with = "kernel_threads_only")]
    pub(crate) user_threads_only: bool,

    /// Trace kernel threads only (no user threads).
    #[arg(short = 'k', long)]
    pub(crate) kernel_threads_only: bool,

    /// Show user-space stacks only (no kernel stacks).
    #[arg(short = 'U', long, conflicts_with = "kernel_stacks_only")]
    pub(crate) user_stacks_only: bool,

    /// Show kernel stacks only (no user-space stacks).
    #[arg(short = 'K', long)]
    pub(crate) kernel_stacks_only: bool,

    /// Insert a "-" between the kernel and user parts of each stack.
    #[arg(short = 'd', long)]
    pub(crate) delimited: bool,

    /// Folded output, one line per entry (input for flamegraph.pl).
    #[arg(short = 'f', long, conflicts_with = "format")]
    pub(crate) folded: bool,

    /// Report format. Without it, -o's extension chooses: .svg (an
    /// off-wake flame graph), .json (speedscope), .pb.gz or .pprof
    /// (pprof); else text (folded with -f).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub(crate) format: Option<crate::report::Format>,

    /// Drop blocks shorter than this many microseconds.
    #[arg(short = 'm', long = "min-block-time", value_name = "US", default_value_t = 1,
          value_parser = nonzero)]
    pub(crate) min_block_time: u64,

    /// Drop blocks longer than this many microseconds.
    #[arg(short = 'M', long = "max-block-time", value_name = "US", default_value_t = u64::MAX,
          value_parser = nonzero)]
    pub(crate) max_block_time: u64,

    /// Only blocks whose task state at switch-out shares a bit with N
    /// (1 S, 2 D, 4 T, 8 t, 16 X, 32 Z, 64 P, 128 I); 0 selects preempted
    /// (runnable) switch-outs.
    #[arg(long, value_name = "N", value_parser = state_bits)]
    pub(crate) state: Option<u64>,

    /// Follow wakeup chains N levels deep (1 to 8): after who woke each
    /// blocked thread, what its waker was itself waiting on meanwhile,
    /// and who woke that, and so on. 1 is offwaketime's output. Past 1,
    /// every thread's scheduler events are recorded (wakers need not be
    /// targets).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = chain_depth)]
    pub(crate) chain: u8,

    /// A wall-clock profile: besides blocked time, the targets' time on
    /// a CPU (stacks sampled HZ times a second of CPU time, default 199)
    /// and their waits for one, so that each thread's entries add up to
    /// its traced wall time. Waits for a CPU end in the frame [runnable],
    /// CPU time in [on-cpu]; -m, -M and --state bound blocked waits only.
    #[arg(long, value_name = "HZ", num_args = 0..=1, require_equals = true,
          default_missing_value = "199", value_parser = wall_hz)]
    pub(crate) wall: Option<u32>,

    /// Trace only threads of these cgroups and their descendants
    /// (comma-separated), filtered in the kernel as `perf -G` does: paths
    /// under the cgroup mount that holds perf's controller (the v2 mount,
    /// `/sys/fs/cgroup/unified` on a hybrid host), absolute cgroup
    /// directories, or systemd unit names (`nginx.service`).
    #[arg(long, value_name = "PATHS", value_delimiter = ',', value_parser = cgroup_path,
          conflicts_with_all = ["pid", "tid", "user_threads_only", "kernel_threads_only", "command"])]
    pub(crate) cgroup: Option<Vec<String>>,

    /// Split the report by cgroup: each entry's cgroup path (relative to
    /// the cgroup mount) becomes the root frame of its stack, or a line of
    /// its text block.
    #[arg(long)]
    pub(crate) per_cgroup: bool,

    /// Most unique stacks kept; stacks beyond this print as placeholders.
    #[arg(long, value_name = "N", default_value_t = 131072, value_parser = nonzero_usize)]
    pub(crate) stack_storage_size: usize,

    /// Report every N seconds, each report complete on its own: on stdout
    /// one after the other; each -o FILE gets one file per interval, named
    /// with the interval's start time (UTC) before its extension, e.g.
    /// offwake.20261128T220102Z.pb.gz. With a DURATION, the last report
    /// is of the remainder.
    #[arg(long, value_name = "N", value_parser = interval_seconds, conflicts_with = "input")]
    pub(crate) interval: Option<u64>,

    /// Write the report to FILE instead of stdout (`-` is stdout). It is
    /// written to a temporary file beside FILE and renamed over it at the
    /// end, so FILE never holds half a report. Its extension chooses the
    /// format when --format is absent. Repeat it to write one trace in
    /// several formats.
    #[arg(short = 'o', long, value_name = "FILE", action = clap::ArgAction::Append)]
    pub(crate) output: Vec<std::path::PathBuf>,

    /// Print a user frame that nothing names as MODULE+0xOFFSET (the file's
    /// base name and the offset in that file) instead of [unknown].
    #[arg(long)]
    pub(crate) module_offsets: bool,

    /// Event source.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub(crate) backend: Backend,

    /// Ring-buffer size per CPU, in pages (a power of two; default: 32 MiB
    /// shared by the CPUs, at least 512 KiB and at most 4 MiB each; under
    /// --call-graph dwarf, that times the copy's size in 2 KiB, rounded up,
    /// 4 times at most).
    #[arg(long, value_name = "N", value_parser = power_of_two)]
    pub(crate) mmap_pages: Option<usize>,

    /// How many threads x CPUs -p, -t and -- COMMAND may trace with
    /// per-task events (two to four per thread and CPU). Past it, one
    /// sched_switch event per CPU, filtered on the threads' ids by the
    /// kernel at every context switch of the machine.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_EVENT_BUDGET,
          conflicts_with = "input")]
    pub(crate) event_budget: usize,

    /// How user stacks are walked: `fp` (frame pointers, as bcc), or
    /// `dwarf[,SIZE]`: SIZE bytes of user stack (a multiple of 8, at most
    /// 65528; 8192 when not given, as in perf) copied with each sample and
    /// unwound with the binaries' DWARF unwind tables while tracing.
    /// Default, in every mode: dwarf,4096. The tracefs backend copies no
    /// stack: there dwarf walks by frame pointers, except a blocked
    /// thread's stack, read from the thread and unwound while it still
    /// waits (SIZE unused).
    #[arg(long, value_name = "fp|dwarf[,SIZE]", value_parser = call_graph,
          conflicts_with = "kernel_stacks_only")]
    pub(crate) call_graph: Option<CallGraph>,

    /// Read a perf.data that stock perf recorded of the two tracepoints
    /// with callchains, instead of tracing (`perf record -e
    /// sched:sched_switch -e sched:sched_waking -a -g --buildid-all`).
    #[arg(short = 'i', long, value_name = "FILE",
          conflicts_with_all = ["duration", "command", "backend", "mmap_pages", "call_graph"])]
    pub(crate) input: Option<std::path::PathBuf>,

    /// Start COMMAND with tracing already active, trace it and every process
    /// it starts, and stop when it exits; then exit with its status (128+N
    /// if signal N killed it).
    #[arg(last = true, value_name = "COMMAND",
          conflicts_with_all = ["pid", "tid", "user_threads_only", "kernel_threads_only"])]
    pub(crate) command: Vec<OsString>,

    /// Print the man page or a shell's completion script, and exit.
    #[arg(long, value_name = "WHAT", value_enum, hide = true, exclusive = true)]
    pub(crate) generate: Option<Generate>,
}

/// What `--generate` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Generate {
    /// The man page, in roff.
    Man,
    /// bash's completion script.
    CompleteBash,
    /// zsh's completion script.
    CompleteZsh,
    /// fish's completion script.
    CompleteFish,
}

/// The default `--event-budget`: per-task events for up to 512 threads ×
/// CPUs (256 threads on 2 CPUs, 8 on 64). Attaching them costs about
/// 0.1 ms per thread and CPU on an idle machine, and seconds when the
/// threads keep the CPUs busy, while per-CPU events attach in milliseconds
/// whatever the count but cost other threads' switches a filter each
/// (bench/scale measures both).
pub(crate) const DEFAULT_EVENT_BUDGET: usize = 512;

impl Cli {
    /// Parses and applies the cross-option rules that clap cannot express,
    /// for tests (the tool's own parse, with the host's rules, is
    /// `session::parse_args`).
    #[cfg(test)]
    pub(crate) fn try_parse_from_checked<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let cli = Cli::try_parse_from(args)?;
        cli.check_rules()?;
        Ok(cli)
    }

    /// The cross-option rules that clap cannot express.
    pub(crate) fn check_rules(&self) -> Result<(), clap::Error> {
        if let Some(twice) = repeated_output(&self.output) {
            return Err(Cli::command().error(
                ErrorKind::ArgumentConflict,
                format!("-o {twice} names a place another -o names too"),
            ));
        }
        if self.min_block_time > self.max_block_time {
            return Err(Cli::command().error(
                ErrorKind::ArgumentConflict,
                format!(
                    "--min-block-time ({}) must not be greater than --max-block-time ({})",
                    self.min_block_time, self.max_block_time
                ),
            ));
        }
        Ok(())
    }
}

/// The first `-o` that names the same place as an earlier one: stdout
/// (`-`) twice, or one file by two paths (links and `..` resolved).
fn repeated_output(outputs: &[std::path::PathBuf]) -> Option<String> {
    use std::path::{Path, PathBuf};
    let place = |p: &Path| -> Option<PathBuf> {
        if p.as_os_str() == "-" {
            return None;
        }
        std::fs::canonicalize(p).ok().or_else(|| {
            // Not there yet: its directory, resolved, and its name.
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
        })
    };
    let mut seen: Vec<Option<PathBuf>> = Vec::new();
    for p in outputs {
        let here = place(p).or_else(|| (p.as_os_str() != "-").then(|| p.clone()));
        if seen.contains(&here) {
            return Some(p.display().to_string());
        }
        seen.push(here);
    }
    None
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("'{s}' must be positive"));
    }
    t.parse::<u64>()
        .map_err(|_| format!("'{s}' is not a non-negative integer"))
}

/// The longest DURATION, in seconds (136 years): far from where a deadline
/// on the monotonic clock overflows, whatever the uptime.
pub(crate) const MAX_DURATION: u64 = u32::MAX as u64;

/// DURATION: a non-zero whole number of seconds, at most [`MAX_DURATION`].
/// `--interval`'s whole seconds, at least 1 and at most a day.
fn interval_seconds(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(v) if (1..=86_400).contains(&v) => Ok(v),
        _ => Err(format!(
            "--interval is whole seconds from 1 to 86400: '{s}' is not"
        )),
    }
}

fn seconds(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let too_large = || {
        format!(
            "'{s}' is too large: DURATION is at most {MAX_DURATION} seconds \
             (without it, tracing lasts until Ctrl-C or SIGTERM)"
        )
    };
    match t.parse::<u64>() {
        Ok(0) => Err("must be non-zero".to_string()),
        Ok(v) if v > MAX_DURATION => Err(too_large()),
        Ok(v) => Ok(v),
        Err(_) if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => Err(too_large()),
        Err(_) => Err(format!(
            "DURATION is whole seconds: '{s}' is not a whole number of seconds"
        )),
    }
}

fn nonzero(s: &str) -> Result<u64, String> {
    match parse_u64(s)? {
        0 => Err("must be non-zero".to_string()),
        v => Ok(v),
    }
}

/// One `--cgroup` path: not empty.
fn cgroup_path(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err("a cgroup path cannot be empty".to_string());
    }
    Ok(s.to_string())
}

/// The highest `--wall` rate: past it, sampling costs more than a few per
/// cent of a CPU, and kernels throttle it (`perf_event_max_sample_rate`).
const MAX_WALL_HZ: u64 = 10_000;

/// `--wall`'s samples per second of CPU time.
fn wall_hz(s: &str) -> Result<u32, String> {
    match parse_u64(s)? {
        n @ 1..=MAX_WALL_HZ => Ok(n as u32),
        _ => Err(format!("must be from 1 to {MAX_WALL_HZ} samples a second")),
    }
}

/// The deepest `--chain`.
pub(crate) const MAX_CHAIN: u8 = 8;

fn chain_depth(s: &str) -> Result<u8, String> {
    match parse_u64(s)? {
        n @ 1..=8 => Ok(n as u8),
        _ => Err(format!("must be from 1 to {MAX_CHAIN}")),
    }
}

fn nonzero_usize(s: &str) -> Result<usize, String> {
    let v = nonzero(s)?;
    usize::try_from(v).map_err(|_| format!("'{s}' is too large"))
}

fn power_of_two(s: &str) -> Result<usize, String> {
    let v = nonzero_usize(s)?;
    if !v.is_power_of_two() {
        return Err(format!(
            "{v} is not a power of two (try {})",
            v.next_power_of_two()
        ));
    }
    Ok(v)
}

/// `--call-graph fp|dwarf[,SIZE]`, spelt as perf spells it.
fn call_graph(s: &str) -> Result<CallGraph, String> {
    let (mode, size) = match s.split_once(',') {
        Some((mode, size)) => (mode, Some(size)),
        None => (s, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(CallGraph::Fp),
        ("fp", Some(_)) => Err("fp takes no size".to_string()),
        ("dwarf", None) => Ok(CallGraph::Dwarf {
            size: DEFAULT_DWARF_SIZE,
        }),
        ("dwarf", Some(size)) => {
            let n = nonzero(size)?;
            if n % 8 != 0 || n > MAX_DWARF_SIZE as u64 {
                return Err(format!(
                    "the stack size must be a multiple of 8 and at most {MAX_DWARF_SIZE} \
                     (got {n})"
                ));
            }
            Ok(CallGraph::Dwarf { size: n as u32 })
        }
        _ => Err(format!("'{s}' is not fp or dwarf[,SIZE]")),
    }
}

/// `--state N`: refused here, as a usage error, when N can never match.
fn state_bits(s: &str) -> Result<u64, String> {
    let n = parse_u64(s)?;
    crate::event::state::StateFilter::from_user(n).map_err(|e| format!("{e:#}"))?;
    Ok(n)
}

/// One positive process or thread id (`-p`/`-t` take comma-separated lists
/// of them, of any length).
fn positive_id(s: &str) -> Result<u32, String> {
    let part = s.trim();
    if part.is_empty() {
        return Err("empty entry in the list; expected e.g. 123,456".to_string());
    }
    let v = nonzero(part)?;
    match u32::try_from(v) {
        Ok(id) if id <= i32::MAX as u32 => Ok(id),
        _ => Err(format!("'{part}' is not a valid id")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut v = vec!["offwake-perf"];
        v.extend_from_slice(args);
        Cli::try_parse_from_checked(v)
    }

    fn err_kind(args: &[&str]) -> ErrorKind {
        parse(args).expect_err("should be rejected").kind()
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.duration, None);
        assert_eq!(c.min_block_time, 1);
        assert_eq!(c.max_block_time, u64::MAX);
        assert_eq!(c.stack_storage_size, 131072);
        assert_eq!(c.backend, Backend::Auto);
        assert_eq!(c.mmap_pages, None);
        assert!(c.command.is_empty());
    }

    #[test]
    fn wall_takes_an_optional_rate_that_never_eats_the_duration() {
        let cli = parse(&["--wall", "10"]).unwrap();
        assert_eq!((cli.wall, cli.duration), (Some(199), Some(10)));
        assert_eq!(parse(&["--wall=999", "5"]).unwrap().wall, Some(999));
        assert_eq!(parse(&["5"]).unwrap().wall, None);
        for bad in ["0", "10001", "x", "-1"] {
            let e = parse(&[&format!("--wall={bad}")]).unwrap_err().to_string();
            assert!(
                e.contains("samples a second") || e.contains("integer") || e.contains("positive"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn interval_is_whole_seconds_of_a_live_trace() {
        assert_eq!(parse(&["--interval", "5", "20"]).unwrap().interval, Some(5));
        assert_eq!(parse(&["5"]).unwrap().interval, None);
        for bad in ["0", "1.5", "x", "86401"] {
            let e = parse(&["--interval", bad]).unwrap_err().to_string();
            assert!(e.contains("--interval is whole seconds"), "{bad}: {e}");
        }
        assert!(parse(&["--interval", "5", "-i", "perf.data"]).is_err());
    }

    #[test]
    fn pid_lists_of_any_length() {
        let c = parse(&["-p", "1,2,3,4,5,6,7,8,9,10", "5"]).unwrap();
        assert_eq!(c.pid.unwrap(), (1..=10).collect::<Vec<u32>>());
        assert_eq!(c.duration, Some(5));
        let c = parse(&["--tid", "42"]).unwrap();
        assert_eq!(c.tid.unwrap(), vec![42]);
    }

    #[test]
    fn bad_lists_are_rejected() {
        for bad in ["1,,2", "abc", "0", "1,2,", "99999999999"] {
            assert_eq!(err_kind(&["-p", bad]), ErrorKind::ValueValidation, "{bad}");
        }
        // A negative number reads as an unknown flag; still a usage error.
        assert!(parse(&["-p", "-3"]).is_err());
    }

    #[test]
    fn exclusive_groups() {
        for args in [
            &["-p", "1", "-t", "2"][..],
            &["-p", "1", "-u"],
            &["-t", "1", "-k"],
            &["-u", "-k"],
            &["-U", "-K"],
            &["-p", "1", "--", "true"],
        ] {
            assert_eq!(err_kind(args), ErrorKind::ArgumentConflict, "{args:?}");
        }
    }

    #[test]
    fn numbers_must_be_positive_and_nonzero() {
        assert_eq!(err_kind(&["0"]), ErrorKind::ValueValidation);
        assert_eq!(err_kind(&["-m", "0"]), ErrorKind::ValueValidation);
        assert_eq!(err_kind(&["-M", "0"]), ErrorKind::ValueValidation);
        assert_eq!(
            err_kind(&["--stack-storage-size", "0"]),
            ErrorKind::ValueValidation
        );
        assert_eq!(err_kind(&["-m", "-5"]), ErrorKind::UnknownArgument);
        assert_eq!(err_kind(&["--state", "-1"]), ErrorKind::UnknownArgument);
        assert_eq!(err_kind(&["--mmap-pages", "3"]), ErrorKind::ValueValidation);
    }

    #[test]
    fn a_duration_is_a_number() {
        assert_eq!(err_kind(&["x"]), ErrorKind::ValueValidation);
    }

    #[test]
    fn call_graph_is_spelt_as_in_perf() {
        assert_eq!(parse(&[]).unwrap().call_graph, None);
        let cg = |a: &str| parse(&["--call-graph", a]).map(|c| c.call_graph.unwrap());
        assert_eq!(cg("fp").unwrap(), CallGraph::Fp);
        assert_eq!(cg("dwarf").unwrap(), CallGraph::Dwarf { size: 8192 });
        assert_eq!(cg("dwarf,16384").unwrap(), CallGraph::Dwarf { size: 16384 });
        assert_eq!(cg("dwarf,65528").unwrap(), CallGraph::Dwarf { size: 65528 });
        for bad in [
            "dwarf,65536",
            "dwarf,100",
            "dwarf,0",
            "dwarf,",
            "fp,8",
            "lbr",
            "",
        ] {
            let e = cg(bad).expect_err(bad);
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{bad}");
        }
        assert_eq!(
            err_kind(&["-K", "--call-graph", "dwarf"]),
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn min_not_above_max() {
        assert_eq!(
            err_kind(&["-m", "10", "-M", "5"]),
            ErrorKind::ArgumentConflict
        );
        assert!(parse(&["-m", "5", "-M", "5"]).is_ok());
    }

    #[test]
    fn folded_and_format_exclude_each_other() {
        assert_eq!(
            err_kind(&["-f", "--format", "svg"]),
            ErrorKind::ArgumentConflict
        );
        assert_eq!(err_kind(&["--format", "png"]), ErrorKind::InvalidValue);
        assert_eq!(parse(&["-o", "a", "-o", "b"]).unwrap().output.len(), 2);
    }

    #[test]
    fn one_place_is_written_once() {
        for args in [
            &["-o", "a.svg", "-o", "a.svg"][..],
            &["-o", "a.svg", "-o", "./a.svg"],
            &["-o", "-", "-o", "-"],
            &["-o", "/tmp/x.json", "-o", "/tmp/../tmp/x.json"],
        ] {
            assert_eq!(err_kind(args), ErrorKind::ArgumentConflict, "{args:?}");
        }
        assert!(parse(&["-o", "a.svg", "-o", "-", "-o", "b/a.svg"]).is_ok());
    }

    #[test]
    fn duration_is_whole_seconds() {
        assert_eq!(parse(&["7"]).unwrap().duration, Some(7));
        for bad in ["1.5", "2s", "abc", "1e3"] {
            let e = parse(&[bad]).expect_err(bad);
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{bad}");
            assert!(
                e.to_string().contains(&format!(
                    "DURATION is whole seconds: '{bad}' is not a whole number of seconds"
                )),
                "{e}"
            );
        }
        for big in ["99999999999999999999", "18446744073709551615", "4294967296"] {
            let e = parse(&[big]).expect_err(big);
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{big}");
            assert!(e.to_string().contains("is too large"), "{e}");
        }
        assert_eq!(parse(&["4294967295"]).unwrap().duration, Some(MAX_DURATION));
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Whole seconds to trace"), "{help}");
        assert!(help.contains(&format!("at most {MAX_DURATION} ")), "{help}");
    }

    #[test]
    fn help_says_the_tools_own_threads_are_no_targets() {
        let help = Cli::command().render_long_help().to_string();
        assert!(
            help.contains("offwake-perf's own threads are never traced as targets"),
            "{help}"
        );
    }

    /// The usage shown with an error is a valid command line, in both
    /// forms, whatever arguments were refused.
    #[test]
    fn usage_shows_both_valid_forms() {
        let usage = "Usage: offwake-perf [OPTIONS] [DURATION] [-- <COMMAND>...]\n       \
                     offwake-perf -i <FILE> [OPTIONS]\n";
        for args in [
            &["-i", "perf.data", "2"][..],
            &["-i", "perf.data", "--", "true"],
            &["-p", "1", "--", "true"],
        ] {
            let e = parse(args).expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::ArgumentConflict, "{args:?}");
            let shown = e.render().to_string();
            assert!(shown.contains(usage), "{args:?}: {shown}");
            assert!(!shown.contains("--input <FILE> [DURATION]"), "{shown}");
        }
        // Each form, filled in, parses.
        assert!(parse(&["-f", "5", "--", "true"]).is_ok());
        assert!(parse(&["-i", "perf.data", "-f"]).is_ok());
        let help = Cli::command().render_help().to_string();
        assert!(help.contains(usage), "{help}");
    }

    #[test]
    fn command_after_double_dash() {
        let c = parse(&["-f", "--", "sleep", "-x", "1"]).unwrap();
        assert!(c.folded);
        assert_eq!(c.command, vec!["sleep", "-x", "1"]);
        let c = parse(&["3", "--", "true"]).unwrap();
        assert_eq!(c.duration, Some(3));
    }
}
