//! The folded report (`-f`): one `;`-joined line per entry followed by its
//! total, identical lines merged, ascending by total. This is what
//! `flamegraph.pl --color=chain` reads. Names are escaped so that each
//! stays one field (see [`super::escape`]).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
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
///
/// Lines are merged by a 128-bit keyed hash of their text, and only the
/// lines of one total are held at a time: with `--chain`, every line at
/// once would take many times the memory of the entries.
pub(super) fn write(
    out: &mut dyn Write,
    options: &ReportOptions,
    entries: &[ResolvedEntry],
) -> io::Result<()> {
    let keys = (RandomState::new(), RandomState::new());
    // By the hash of its text: a line's total, and an entry that prints it.
    let mut merged: HashMap<(u64, u64), (u64, usize)> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        let text = line(options, e);
        let hash = (keys.0.hash_one(&text), keys.1.hash_one(&text));
        let (total, _) = merged.entry(hash).or_insert((0, i));
        *total = total.saturating_add(e.total_us);
    }
    let mut lines: Vec<(u64, usize)> = merged.into_values().collect();
    lines.sort_unstable();
    for same in lines.chunk_by(|a, b| a.0 == b.0) {
        let mut texts: Vec<String> = same
            .iter()
            .map(|&(_, i)| line(options, &entries[i]))
            .collect();
        texts.sort_unstable();
        for text in &texts {
            writeln!(out, "{text} {}", same[0].0)?;
        }
    }
    out.flush()
}
