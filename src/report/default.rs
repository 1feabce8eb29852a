//! The default multi-line report: one block per entry (waker stacks, the
//! `--` separator, target stacks, total), ascending by total. Names are
//! escaped so that each frame stays one line (see [`super::escape`]).

use std::io::{self, Write};

use super::{Part, Place, ReportOptions, ResolvedEntry, comm, frame_names};

/// Renders one entry's block, its trailing blank line included.
pub(super) fn block(options: &ReportOptions, e: &ResolvedEntry) -> String {
    let mut lines: Vec<String> = Vec::new();
    let place = Place::Text;
    let frame = |lines: &mut Vec<String>, name: &str| lines.push(format!("    {name}"));

    lines.push(format!(
        "    {:<16} {} {}",
        "waker:",
        e.waker_comm(place),
        e.waker_tid
    ));
    if options.shows_user() {
        for name in frame_names(&e.waker_user, Part::User, true, place) {
            frame(&mut lines, &name);
        }
    }
    if options.delimits(&e.waker_kernel, &e.waker_user) {
        frame(&mut lines, "-");
    }
    if options.shows_kernel() {
        for name in frame_names(&e.waker_kernel, Part::Kernel, true, place) {
            frame(&mut lines, &name);
        }
    }
    lines.push(format!("    {:<16} {}", "--", "--"));
    if options.shows_kernel() {
        for name in frame_names(&e.target_kernel, Part::Kernel, false, place) {
            frame(&mut lines, &name);
        }
    }
    if options.delimits(&e.target_kernel, &e.target_user) {
        frame(&mut lines, "-");
    }
    if options.shows_user() {
        for name in frame_names(&e.target_user, Part::User, false, place) {
            frame(&mut lines, &name);
        }
    }
    lines.push(format!(
        "    {:<16} {} {}",
        "target:",
        comm(&e.target_comm, place),
        e.target_tid
    ));
    lines.push(format!("        {}", e.total_us));
    lines.push(String::new());

    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Writes the blank line that ends tracing, then every block, ascending by
/// total; equal totals are ordered by their text.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let mut blocks: Vec<(u64, String)> = entries
        .iter()
        .map(|e| (e.total_us, block(options, e)))
        .collect();
    blocks.sort();
    out.write_all(b"\n")?;
    for (_, text) in &blocks {
        out.write_all(text.as_bytes())?;
    }
    out.flush()
}
