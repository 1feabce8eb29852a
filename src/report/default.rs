//! The default multi-line report: one block per entry (waker stacks, the
//! `--` separator, target stacks, total), ascending by total; with
//! `--chain`, each further level follows in the same shape, its labels
//! numbered (`[2] waker:`). Names are escaped so that each frame stays
//! one line, and none reads as a label (see [`super::escape`]).

use std::borrow::Cow;
use std::io::{self, Write};

use super::{Frames, Part, Place, ReportOptions, ResolvedEntry, ResolvedLevel, comm, frame_names};

/// One level's wait as a block shows it: the waker's name, tid and
/// stacks, then the blocked thread's.
struct Wait<'a> {
    waker: (Cow<'a, str>, u32),
    waker_stacks: (&'a Frames, &'a Frames),
    blocked: (Cow<'a, str>, u32),
    blocked_stacks: (&'a Frames, &'a Frames),
    us: u64,
}

/// Renders one entry's block, its trailing blank line included.
pub(super) fn block(options: &ReportOptions, e: &ResolvedEntry) -> String {
    let mut lines: Vec<String> = Vec::new();
    let place = Place::Text;
    wait(
        &mut lines,
        options,
        "",
        Wait {
            waker: (e.waker_comm(place), e.waker_tid),
            waker_stacks: (&e.waker_kernel, &e.waker_user),
            blocked: (comm(&e.target_comm, place), e.target_tid),
            blocked_stacks: (&e.target_kernel, &e.target_user),
            us: e.total_us,
        },
    );
    // After the `target:` line, before the total.
    let at = lines.len().saturating_sub(1);
    if let Some(cgroup) = e.cgroup.as_ref().filter(|_| options.per_cgroup) {
        lines.insert(at, format!("    {:<16} {}", "cgroup:", cgroup.shown(place)));
    }
    if let Some(ns) = e.target_ns_tid {
        lines.insert(at, format!("    {:<16} {ns}", "ns tid:"));
    }
    let mut thread = (e.waker_comm(place), e.waker_tid);
    for (level, step) in (2u8..).zip(&e.chain) {
        let label = format!("[{level}] ");
        match step {
            ResolvedLevel::Waited {
                kernel,
                user,
                waker,
                overlap_us,
            } => {
                let next = (waker.name(place), waker.tid);
                wait(
                    &mut lines,
                    options,
                    &label,
                    Wait {
                        waker: next.clone(),
                        waker_stacks: (&waker.kernel, &waker.user),
                        blocked: thread,
                        blocked_stacks: (kernel, user),
                        us: *overlap_us,
                    },
                );
                thread = next;
            }
            ResolvedLevel::End(end) => {
                lines.push(format!("    {}", end.marker()));
                let target = format!("{label}target:");
                lines.push(format!("    {target:<16} {} {}", thread.0, thread.1));
            }
        }
    }
    lines.push(String::new());

    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The lines of one level: `waker:`, its stacks (outermost first), `--`,
/// the blocked stacks (innermost first), `target:` and the microseconds;
/// labels prefixed with `label`.
fn wait(lines: &mut Vec<String>, options: &ReportOptions, label: &str, w: Wait<'_>) {
    let place = Place::Text;
    let frames = |lines: &mut Vec<String>, names: Vec<Cow<'_, str>>| {
        lines.extend(names.into_iter().map(|name| format!("    {name}")));
    };
    let waker = format!("{label}waker:");
    lines.push(format!("    {waker:<16} {} {}", w.waker.0, w.waker.1));
    let (kernel, user) = w.waker_stacks;
    if options.shows_user() {
        frames(lines, frame_names(user, Part::User, true, place));
    }
    if options.delimits(kernel, user) {
        lines.push("    -".to_string());
    }
    if options.shows_kernel() {
        frames(lines, frame_names(kernel, Part::Kernel, true, place));
    }
    lines.push(format!("    {:<16} {}", "--", "--"));
    let (kernel, user) = w.blocked_stacks;
    if options.shows_kernel() {
        frames(lines, frame_names(kernel, Part::Kernel, false, place));
    }
    if options.delimits(kernel, user) {
        lines.push("    -".to_string());
    }
    if options.shows_user() {
        frames(lines, frame_names(user, Part::User, false, place));
    }
    let target = format!("{label}target:");
    lines.push(format!("    {target:<16} {} {}", w.blocked.0, w.blocked.1));
    lines.push(format!("        {}", w.us));
}

/// Writes the blank line that ends tracing, then every block, ascending by
/// total; equal totals are ordered by their text. Only the blocks of one
/// total are rendered at a time: with `--chain`, all of them at once
/// would take many times the memory of the entries.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let mut order: Vec<&ResolvedEntry> = entries.iter().collect();
    order.sort_by_key(|e| e.total_us);
    out.write_all(b"\n")?;
    for same in order.chunk_by(|a, b| a.total_us == b.total_us) {
        let mut blocks: Vec<String> = same.iter().map(|e| block(options, e)).collect();
        blocks.sort();
        for text in &blocks {
            out.write_all(text.as_bytes())?;
        }
    }
    out.flush()
}
