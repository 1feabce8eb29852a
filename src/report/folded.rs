//! The folded report (`-f`): one `;`-joined line per entry followed by its
//! total, identical lines merged, ascending by total. This is what
//! `flamegraph.pl --color=chain` reads. Names are escaped so that each
//! stays one field (see [`super::escape`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use super::{Part, Place, ReportOptions, ResolvedEntry, comm, frame_names};

/// The `;`-joined frames of one entry, without its total.
pub(super) fn line(options: &ReportOptions, e: &ResolvedEntry) -> String {
    let place = Place::Folded;
    let mut fields: Vec<Cow<'_, str>> = vec![comm(&e.target_comm, place)];
    if options.shows_user() {
        fields.extend(frame_names(&e.target_user, Part::User, true, place));
    }
    if options.delimits(&e.target_kernel, &e.target_user) {
        fields.push("-".into());
    }
    if options.shows_kernel() {
        fields.extend(frame_names(&e.target_kernel, Part::Kernel, true, place));
    }
    fields.push("--".into());
    if options.shows_kernel() {
        fields.extend(frame_names(&e.waker_kernel, Part::Kernel, false, place));
    }
    if options.delimits(&e.waker_kernel, &e.waker_user) {
        fields.push("-".into());
    }
    if options.shows_user() {
        fields.extend(frame_names(&e.waker_user, Part::User, false, place));
    }
    // Always the last field, even when empty (no waker).
    fields.push(e.waker_comm(place));
    fields.join(";")
}

/// Writes one line per distinct folded stack, totals of identical lines
/// summed, ascending by total and then by text. Nothing else is written.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let mut merged: HashMap<String, u64> = HashMap::new();
    for e in entries {
        let total = merged.entry(line(options, e)).or_insert(0);
        *total = total.saturating_add(e.total_us);
    }
    let mut lines: Vec<(u64, String)> = merged.into_iter().map(|(l, t)| (t, l)).collect();
    lines.sort();
    for (total, text) in &lines {
        writeln!(out, "{text} {total}")?;
    }
    out.flush()
}
