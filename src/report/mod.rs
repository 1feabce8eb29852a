//! The report: bcc's header, default multi-line blocks (with `-d`
//! delimiters) and folded lines, byte for byte, and the same entries as an
//! off-wake flame graph, speedscope JSON or pprof, to stdout or a file
//! ([`Output`]). Every name from outside the tool goes through [`escape`].

mod chain;
mod default;
mod flame;
mod folded;
mod output;
mod pprof;
mod speedscope;

use std::borrow::Cow;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

pub(crate) use crate::diag::escape::{Place, UNKNOWN, comm, escape};
pub(crate) use crate::event::Span;
use crate::event::{Comm, WakeContext};
pub(crate) use output::Output;

/// Which stacks are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StackMode {
    Both,
    /// `-U`
    UserOnly,
    /// `-K`
    KernelOnly,
}

/// What the report is written as (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// bcc's multi-line blocks.
    Text,
    /// One `;`-joined line per entry (`-f`).
    Folded,
    /// An off-wake flame graph, as `flamegraph.pl --color=chain` draws it.
    Svg,
    /// speedscope's JSON file format.
    Speedscope,
    /// Gzipped pprof `profile.proto`.
    Pprof,
}

impl Format {
    /// The format of a report written to `path` (`None`: stdout): the one
    /// asked for with `--format`; else the one its extension implies
    /// (`.svg`, `.json` for speedscope, `.pb.gz` or `.pprof`); else text,
    /// or folded under `-f`.
    pub(crate) fn choose(asked: Option<Format>, folded: bool, path: Option<&Path>) -> Format {
        if let Some(format) = asked {
            return format;
        }
        let name = path
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if name.ends_with(".svg") {
            Format::Svg
        } else if name.ends_with(".json") {
            Format::Speedscope
        } else if name.ends_with(".pb.gz") || name.ends_with(".pprof") {
            Format::Pprof
        } else if folded {
            Format::Folded
        } else {
            Format::Text
        }
    }

    /// True for the formats that are not text a terminal can show.
    pub(crate) fn is_binary(self) -> bool {
        self == Format::Pprof
    }
}

impl StackMode {
    /// The stacks shown, as the header names them.
    fn shown(self) -> &'static str {
        match self {
            StackMode::Both => "user + kernel",
            StackMode::UserOnly => "user",
            StackMode::KernelOnly => "kernel",
        }
    }
}

/// Output options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReportOptions {
    pub(crate) format: Format,
    pub(crate) delimited: bool,
    pub(crate) stacks: StackMode,
    /// `--per-cgroup`: each entry's cgroup is its root frame, or a line of
    /// its block.
    pub(crate) per_cgroup: bool,
    /// `--wall`: the entries are a wall-clock profile, blocked waits, waits
    /// for a CPU and time on one (the formats that can say so, say so).
    pub(crate) wall: bool,
}

/// A symbolized stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Frames {
    /// Frames, innermost first (may be empty), shared by every entry
    /// with this stack.
    Names(Arc<[Frame]>),
    /// The stack did not fit in the stack storage.
    Missed,
}

/// One frame of a stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Frame {
    /// A function name, as a file or the kernel gave it (printed escaped);
    /// shared by the stacks that have it (see [`Frame::shared`]).
    Name(Arc<str>),
    /// Nothing resolved the address: printed `[unknown]`.
    Unknown,
    /// Nothing resolved the address, which is at `offset` in a file whose
    /// base name is `module`: printed `MODULE+0xOFFSET`, the module escaped.
    InFile { module: Arc<str>, offset: u64 },
}

impl From<Vec<Frame>> for Frames {
    fn from(frames: Vec<Frame>) -> Frames {
        Frames::Names(frames.into())
    }
}

impl From<Option<String>> for Frame {
    fn from(name: Option<String>) -> Frame {
        name.map_or(Frame::Unknown, |n| Frame::Name(n.into()))
    }
}

impl Frame {
    /// The frame, its name the one in `names` that reads the same (added
    /// there if new): a name is then held once however many stacks have
    /// it.
    pub(crate) fn shared(self, names: &mut NameSet) -> Frame {
        match self {
            Frame::Name(name) => Frame::Name(names.share(name)),
            other => other,
        }
    }
}

/// Names held once each (see [`Frame::shared`]).
#[derive(Debug, Default)]
pub(crate) struct NameSet {
    held: std::collections::HashSet<Arc<str>>,
    /// Names given, by address, with the one held for each: a name shared
    /// by many frames is compared once, not once per frame. Each given
    /// name is kept with its address, so that no other takes it.
    given: std::collections::HashMap<usize, (Arc<str>, Arc<str>)>,
}

impl NameSet {
    /// The name in the set that reads as `name`, added if new.
    pub(crate) fn share(&mut self, name: Arc<str>) -> Arc<str> {
        let at = Arc::as_ptr(&name).cast::<u8>() as usize;
        if let Some((_, held)) = self.given.get(&at) {
            return Arc::clone(held);
        }
        let held = match self.held.get(&name) {
            Some(held) => Arc::clone(held),
            None => {
                self.held.insert(Arc::clone(&name));
                Arc::clone(&name)
            }
        };
        self.given.insert(at, (name, Arc::clone(&held)));
        held
    }

    /// Forgets the names given so far (the names held stay).
    pub(crate) fn forget_given(&mut self) {
        self.given.clear();
    }
}

/// Why a wakeup chain ends before its last level, as the marker frame in
/// place of the next level's blocked stack says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ChainEnd {
    /// The waker's last wait ended before the wait above began: it ran
    /// from then until it woke.
    Running,
    /// The waker did not sleep during the wait above, but was preempted:
    /// it waited for a CPU, not for a wakeup.
    Runnable,
    /// No earlier wait of the waker is known: it ran since before tracing
    /// began, its switch-in was not reported, or the wait is no longer
    /// kept.
    NotTraced,
    /// The waker is already in the chain.
    Loop,
    /// Records were lost during the waker's wait.
    Lost,
    /// Too many distinct chains were seen: this one was not kept.
    NotKept,
}

impl ChainEnd {
    /// The marker frame (names that begin with `[` are escaped, so no
    /// traced process can print one).
    pub(crate) fn marker(self) -> &'static str {
        match self {
            ChainEnd::Running => "[running]",
            ChainEnd::Runnable => "[runnable]",
            ChainEnd::NotTraced => "[no wait traced]",
            ChainEnd::Loop => "[loop]",
            ChainEnd::Lost => "[records lost]",
            ChainEnd::NotKept => "[chain not kept]",
        }
    }
}

/// One entry, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedEntry {
    /// [`Comm::UNKNOWN`] prints as `[unknown]`.
    pub(crate) target_comm: Comm,
    pub(crate) target_tid: u32,
    /// Empty with tid 0 when there was no wakeup, or when an interrupt
    /// made it (`waker_context`).
    pub(crate) waker_comm: Comm,
    pub(crate) waker_tid: u32,
    /// An interrupt's wakeup is printed as its pseudo-task (`[hardirq]`).
    pub(crate) waker_context: WakeContext,
    pub(crate) target_kernel: Frames,
    pub(crate) target_user: Frames,
    pub(crate) waker_kernel: Frames,
    pub(crate) waker_user: Frames,
    pub(crate) total_us: u64,
    /// The levels past the first (`--chain`), in order.
    pub(crate) chain: Vec<ResolvedLevel>,
    /// The target's cgroup, when entries are split by cgroup.
    pub(crate) cgroup: Option<CgroupName>,
    /// The target's id in its own PID namespace, where it differs.
    pub(crate) target_ns_tid: Option<u32>,
}

/// The cgroup of an entry's target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CgroupName {
    /// Its path relative to the mount (`/` for the root), as bytes: a
    /// name need not be UTF-8.
    Path(Arc<[u8]>),
    /// Not known: the thread's cgroup could not be read, or was created
    /// and removed between two listings of the hierarchy.
    Unknown,
}

impl CgroupName {
    /// As printed at `place` (a path always starts with `/`, so none can
    /// read as the marker of an unknown one).
    pub(crate) fn shown(&self, place: Place) -> Cow<'_, str> {
        match self {
            CgroupName::Path(path) => escape(path, place),
            CgroupName::Unknown => Cow::Borrowed("[unknown cgroup]"),
        }
    }
}

/// A level past the first of an entry's wakeup chain, ready to print:
/// what the waker of the level above was doing meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResolvedLevel {
    /// It was blocked here, `overlap_us` of the target's blocked time,
    /// and `waker` woke it.
    Waited {
        kernel: Frames,
        user: Frames,
        waker: ResolvedWaker,
        overlap_us: u64,
    },
    /// The chain ends here, for this reason.
    End(ChainEnd),
}

/// Who ended a wait of a chain's level, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedWaker {
    /// Empty with tid 0 when there was no wakeup, or when an interrupt
    /// made it (`context`).
    pub(crate) comm: Comm,
    pub(crate) tid: u32,
    pub(crate) context: WakeContext,
    pub(crate) kernel: Frames,
    pub(crate) user: Frames,
}

/// The header line (with its newline) printed at start, or "" for any
/// format but text. `duration` is the traced seconds, None until Ctrl-C; `command`
/// is true when a command was started, whose exit also ends tracing.
pub(crate) fn header(options: &ReportOptions, duration: Option<u64>, command: bool) -> String {
    if options.format != Format::Text {
        return String::new();
    }
    let what = options.stacks.shown();
    let tail = match (duration, command) {
        (Some(secs), false) => format!(" for {secs} secs."),
        (Some(secs), true) => format!(" for {secs} secs, or until the command exits."),
        (None, false) => "... Hit Ctrl-C to end.".to_string(),
        (None, true) => " until the command exits.".to_string(),
    };
    format!("Tracing blocked time (us) by {what} off-CPU and waker stack{tail}\n")
}

/// The header line of a report read from a recording (`-i`), or "" for
/// any format but text.
pub(crate) fn header_recorded(options: &ReportOptions, path: &Path) -> String {
    if options.format != Format::Text {
        return String::new();
    }
    let what = options.stacks.shown();
    let path = escape(path.as_os_str().as_encoded_bytes(), Place::Text);
    format!("Reading blocked time (us) by {what} off-CPU and waker stack from {path}.\n")
}

/// Writes the report: for text, the blank line after tracing, then the
/// entries in ascending order of total (folded: identical lines merged);
/// the other formats whole.
pub(crate) fn write_report(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
    span: Span,
) -> io::Result<()> {
    match options.format {
        Format::Text => default::write(out, options, entries),
        Format::Folded => folded::write(out, options, entries),
        Format::Svg => flame::write(out, options, entries),
        Format::Speedscope => speedscope::write(out, options, entries),
        Format::Pprof => pprof::write(out, options, entries, span),
    }
}

impl ReportOptions {
    fn shows_user(&self) -> bool {
        self.stacks != StackMode::KernelOnly
    }

    fn shows_kernel(&self) -> bool {
        self.stacks != StackMode::UserOnly
    }

    /// The `-` delimiter goes between a side's two stacks only with `-d`
    /// and when both of them are shown and exist.
    fn delimits(&self, kernel: &Frames, user: &Frames) -> bool {
        self.delimited
            && self.shows_kernel()
            && self.shows_user()
            && kernel.exists()
            && user.exists()
    }
}

/// What an entry's time was, in a wall-clock profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Blocked,
    Runnable,
    OnCpu,
}

impl Kind {
    /// Every kind, in the order the formats list them.
    pub(crate) const ALL: [Kind; 3] = [Kind::OnCpu, Kind::Runnable, Kind::Blocked];

    /// The kind's name, as labels and profiles give it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Blocked => "blocked",
            Kind::Runnable => "runnable",
            Kind::OnCpu => "on-cpu",
        }
    }
}

impl ResolvedEntry {
    /// What the entry's time was.
    pub(crate) fn kind(&self) -> Kind {
        match self.waker_context {
            WakeContext::OnCpu => Kind::OnCpu,
            WakeContext::Runnable => Kind::Runnable,
            _ => Kind::Blocked,
        }
    }

    /// False for an interval no wakeup was read for.
    fn has_waker(&self) -> bool {
        has_waker(&self.waker_comm, self.waker_tid, self.waker_context)
    }

    /// The waker's comm as printed at `place` (an interrupt's pseudo-task
    /// for an interrupt's wakeup); nothing without a waker.
    fn waker_comm(&self, place: Place) -> Cow<'_, str> {
        waker_name(&self.waker_comm, self.waker_tid, self.waker_context, place)
    }
}

impl ResolvedWaker {
    /// As [`ResolvedEntry::waker_comm`].
    fn name(&self, place: Place) -> Cow<'_, str> {
        waker_name(&self.comm, self.tid, self.context, place)
    }
}

/// False for an interval no wakeup was read for.
fn has_waker(comm: &Comm, tid: u32, context: WakeContext) -> bool {
    tid != 0 || !comm.is_empty() || context != WakeContext::Task
}

/// A waker's name as printed at `place`: an interrupt's pseudo-task, the
/// comm of a task, or nothing without a waker.
fn waker_name(name: &Comm, tid: u32, context: WakeContext, place: Place) -> Cow<'_, str> {
    if let Some(pseudo) = context.pseudo_task() {
        Cow::Borrowed(pseudo)
    } else if has_waker(name, tid, context) {
        comm(name, place)
    } else {
        Cow::Borrowed("")
    }
}

impl Frames {
    /// A stack "exists" when it has frames or was missed.
    pub(crate) fn exists(&self) -> bool {
        match self {
            Frames::Names(names) => !names.is_empty(),
            Frames::Missed => true,
        }
    }
}

/// Which part of a stack, for the missed-stack placeholder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    User,
    Kernel,
}

impl Part {
    fn missed(self) -> &'static str {
        match self {
            Part::User => "[Missed User Stack]",
            Part::Kernel => "[Missed Kernel Stack]",
        }
    }
}

/// The names of a stack as printed at `place`, in the requested order
/// (`outermost_first` reverses the stored innermost-first order); a missed
/// stack is its placeholder.
fn frame_names(
    frames: &Frames,
    part: Part,
    outermost_first: bool,
    place: Place,
) -> Vec<Cow<'_, str>> {
    match frames {
        Frames::Names(names) => {
            let it = names.iter().map(|frame| match frame {
                Frame::Name(name) => escape(name.as_bytes(), place),
                Frame::Unknown => Cow::Borrowed(UNKNOWN),
                Frame::InFile { module, offset } => {
                    Cow::Owned(format!("{}+{offset:#x}", escape(module.as_bytes(), place)))
                }
            });
            if outermost_first {
                it.rev().collect()
            } else {
                it.collect()
            }
        }
        Frames::Missed => vec![Cow::Borrowed(part.missed())],
    }
}

#[cfg(test)]
mod tests;
