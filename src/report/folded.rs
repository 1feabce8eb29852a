//! The folded report (`-f`): one `;`-joined line per entry followed by its
//! total, identical lines merged, ascending by total. This is what
//! `flamegraph.pl --color=chain` reads. Names are escaped so that each
//! stays one field (see [`super::escape`]).

use std::collections::HashMap;
use std::io::{self, Write};

use super::{ReportOptions, ResolvedEntry, chain};

/// The `;`-joined frames of one entry, without its total.
pub(super) fn line(options: &ReportOptions, e: &ResolvedEntry) -> String {
    let fields: Vec<_> = chain::fields(options, e)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
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
