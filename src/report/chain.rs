//! One entry as an off-wake chain: the fields of its folded line, from the
//! root (the target's comm) to the leaf (the waker's comm), each marked as
//! a target frame, a waker frame or a delimiter. The folded line, the flame
//! graph, speedscope and pprof are all drawn from these fields, so they
//! hold the same frames.

use std::borrow::Cow;

use super::{Frames, Part, Place, ReportOptions, ResolvedEntry, ResolvedLevel, comm, frame_names};

/// Which part of the chain a field is in, and at which level (1 is the
/// target's wait and its waker; `--chain` adds the levels past it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    /// A blocked thread: the target's comm and stacks, or at a further
    /// level, its waker's blocked stacks (or the marker that ends it).
    Target(u8),
    /// `--` between the sides and the levels, or `-` between a side's
    /// kernel and user stacks (`-d`).
    Delimiter,
    /// The thread that woke it: its stacks and comm.
    Waker(u8),
}

/// The suffix that marks a waker frame where one list holds both sides,
/// as flamegraph.pl marks them for its chain palette.
pub(super) const WAKER_MARK: &str = "_[w]";

type Fields<'a> = Vec<(Cow<'a, str>, Side)>;

/// The fields of `e`'s folded line, escaped for it, root first: the
/// target's cgroup under `--per-cgroup`, target comm, target user (outermost first), target kernel, `--`, waker kernel
/// (innermost first), waker user, waker comm; then for each further level,
/// `--`, that waker's blocked user and kernel stacks (outermost first), and
/// its own waker as above, or `--` and the marker that ends the chain. The
/// last field is empty when the last level had no waker.
pub(super) fn fields<'a>(options: &ReportOptions, e: &'a ResolvedEntry) -> Fields<'a> {
    let place = Place::Folded;
    let mut fields: Fields<'a> = Vec::new();
    if let Some(cgroup) = e.cgroup.as_ref().filter(|_| options.per_cgroup) {
        fields.push((cgroup.shown(place), Side::Target(1)));
    }
    fields.push((comm(&e.target_comm, place), Side::Target(1)));
    blocked(&mut fields, options, &e.target_kernel, &e.target_user, 1);
    waker(
        &mut fields,
        options,
        (&e.waker_kernel, &e.waker_user),
        e.waker_comm(place),
        1,
    );
    for (level, step) in (2u8..).zip(&e.chain) {
        fields.push(("--".into(), Side::Delimiter));
        match step {
            ResolvedLevel::Waited {
                kernel,
                user,
                waker: w,
                ..
            } => {
                blocked(&mut fields, options, kernel, user, level);
                waker(
                    &mut fields,
                    options,
                    (&w.kernel, &w.user),
                    w.name(place),
                    level,
                );
            }
            ResolvedLevel::End(end) => fields.push((end.marker().into(), Side::Target(level))),
        }
    }
    fields
}

/// A blocked stack: user (outermost first), `-`, kernel.
fn blocked<'a>(
    fields: &mut Fields<'a>,
    options: &ReportOptions,
    kernel: &'a Frames,
    user: &'a Frames,
    level: u8,
) {
    let place = Place::Folded;
    let side = Side::Target(level);
    if options.shows_user() {
        let names = frame_names(user, Part::User, true, place);
        fields.extend(names.into_iter().map(|n| (n, side)));
    }
    if options.delimits(kernel, user) {
        fields.push(("-".into(), Side::Delimiter));
    }
    if options.shows_kernel() {
        let names = frame_names(kernel, Part::Kernel, true, place);
        fields.extend(names.into_iter().map(|n| (n, side)));
    }
}

/// `--`, then a waker: kernel (innermost first), `-`, user, name (always
/// a field, even when empty).
fn waker<'a>(
    fields: &mut Fields<'a>,
    options: &ReportOptions,
    (kernel, user): (&'a Frames, &'a Frames),
    name: Cow<'a, str>,
    level: u8,
) {
    let place = Place::Folded;
    let side = Side::Waker(level);
    fields.push(("--".into(), Side::Delimiter));
    if options.shows_kernel() {
        let names = frame_names(kernel, Part::Kernel, false, place);
        fields.extend(names.into_iter().map(|n| (n, side)));
    }
    if options.delimits(kernel, user) {
        fields.push(("-".into(), Side::Delimiter));
    }
    if options.shows_user() {
        let names = frame_names(user, Part::User, false, place);
        fields.extend(names.into_iter().map(|n| (n, side)));
    }
    fields.push((name, side));
}

/// The frames of `e` for the formats that draw them (flame graph,
/// speedscope, pprof), root first: the folded line's fields with waker
/// frames marked [`WAKER_MARK`], those of a level past the first prefixed
/// with it (`[2] `), and without the empty last field of a level that had
/// no waker.
pub(super) fn frames(options: &ReportOptions, e: &ResolvedEntry) -> Vec<(String, Side)> {
    let mut fields = fields(options, e);
    if fields.last().is_some_and(|(name, _)| name.is_empty()) {
        fields.pop();
    }
    let prefix = |level: u8| match level {
        1 => String::new(),
        n => format!("[{n}] "),
    };
    fields
        .into_iter()
        .map(|(name, side)| match side {
            Side::Waker(n) => (format!("{}{name}{WAKER_MARK}", prefix(n)), side),
            Side::Target(n) => (format!("{}{name}", prefix(n)), side),
            Side::Delimiter => (name.into_owned(), side),
        })
        .collect()
}
