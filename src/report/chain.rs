//! One entry as an off-wake chain: the fields of its folded line, from the
//! root (the target's comm) to the leaf (the waker's comm), each marked as
//! a target frame, a waker frame or a delimiter. The folded line, the flame
//! graph, speedscope and pprof are all drawn from these fields, so they
//! hold the same frames.

use std::borrow::Cow;

use super::{Part, Place, ReportOptions, ResolvedEntry, comm, frame_names};

/// Which part of the chain a field is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// The blocked thread: its comm and stacks, below `--`.
    Target,
    /// `--` between the sides, or `-` between a side's kernel and user
    /// stacks (`-d`).
    Delimiter,
    /// The thread that woke it: its stacks and comm, above `--`.
    Waker,
}

/// The suffix that marks a waker frame where one list holds both sides,
/// as flamegraph.pl marks them for its chain palette.
pub(super) const WAKER_MARK: &str = "_[w]";

/// The fields of `e`'s folded line, escaped for it, root first: target
/// comm, target user (outermost first), target kernel, `--`, waker kernel
/// (innermost first), waker user, waker comm. The last field is empty when
/// there was no waker.
pub(super) fn fields<'a>(
    options: &ReportOptions,
    e: &'a ResolvedEntry,
) -> Vec<(Cow<'a, str>, Side)> {
    let place = Place::Folded;
    let mut fields: Vec<(Cow<'a, str>, Side)> = vec![(comm(&e.target_comm, place), Side::Target)];
    let mut push = |names: Vec<Cow<'a, str>>, side: Side| {
        fields.extend(names.into_iter().map(|n| (n, side)));
    };
    if options.shows_user() {
        push(
            frame_names(&e.target_user, Part::User, true, place),
            Side::Target,
        );
    }
    if options.delimits(&e.target_kernel, &e.target_user) {
        push(vec!["-".into()], Side::Delimiter);
    }
    if options.shows_kernel() {
        push(
            frame_names(&e.target_kernel, Part::Kernel, true, place),
            Side::Target,
        );
    }
    push(vec!["--".into()], Side::Delimiter);
    if options.shows_kernel() {
        push(
            frame_names(&e.waker_kernel, Part::Kernel, false, place),
            Side::Waker,
        );
    }
    if options.delimits(&e.waker_kernel, &e.waker_user) {
        push(vec!["-".into()], Side::Delimiter);
    }
    if options.shows_user() {
        push(
            frame_names(&e.waker_user, Part::User, false, place),
            Side::Waker,
        );
    }
    // Always the last field, even when empty (no waker).
    push(vec![e.waker_comm(place)], Side::Waker);
    fields
}

/// The frames of `e` for the formats that draw them (flame graph,
/// speedscope, pprof), root first: the folded line's fields with waker
/// frames marked [`WAKER_MARK`], and without the empty last field of an
/// entry that had no waker.
pub(super) fn frames(options: &ReportOptions, e: &ResolvedEntry) -> Vec<(String, Side)> {
    let mut fields = fields(options, e);
    if fields.last().is_some_and(|(name, _)| name.is_empty()) {
        fields.pop();
    }
    fields
        .into_iter()
        .map(|(name, side)| match side {
            Side::Waker => (format!("{name}{WAKER_MARK}"), side),
            _ => (name.into_owned(), side),
        })
        .collect()
}
