//! bcc-compatible output: the header, the default multi-line blocks (with
//! `-d` delimiters) and the folded format, byte for byte.

use std::io::{self, Write};

/// Which stacks are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackMode {
    Both,
    /// `-U`
    UserOnly,
    /// `-K`
    KernelOnly,
}

/// Output options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportOptions {
    pub folded: bool,
    pub delimited: bool,
    pub stacks: StackMode,
}

/// A symbolized stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Frames {
    /// Function names, innermost first (may be empty).
    Names(Vec<String>),
    /// The stack did not fit in the stack storage.
    Missed,
}

/// One entry, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedEntry {
    pub target_comm: String,
    pub target_tid: u32,
    /// Empty with tid 0 when there was no wakeup.
    pub waker_comm: String,
    pub waker_tid: u32,
    pub target_kernel: Frames,
    pub target_user: Frames,
    pub waker_kernel: Frames,
    pub waker_user: Frames,
    pub total_us: u64,
}

/// The header line (with its newline) printed at start, or "" for folded
/// output. `duration` is the traced seconds, None until Ctrl-C.
pub fn header(options: &ReportOptions, duration: Option<u64>) -> String {
    let _ = (options, duration);
    todo!()
}

/// Writes the report: the blank line after tracing (not folded), then the
/// entries in ascending order of total (folded: identical lines merged).
pub fn write_report(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let _ = (out, options, entries);
    todo!()
}
