//! The cgroups of `--cgroup PATH[,PATH...]`: the hierarchy that perf's
//! cgroup filter and `PERF_SAMPLE_CGROUP` use ([`Hierarchy`]), each PATH
//! resolved as the user wrote it ([`resolve`]), the cgroups and threads at
//! or below one ([`subtree`], [`threads_in`]), and a task's cgroup
//! ([`of_task`], [`is_under`], [`id_of`]).
//!
//! The tool runs as root, and cgroup names and `/proc/PID/cgroup` are
//! written by processes it does not trust (a delegated subtree lets any
//! user name cgroups). So every read and every walk is bounded, a walk
//! never follows a symlink nor leaves the cgroup filesystem, and a name is
//! data: it may hold spaces, colons, newlines or bytes that are not UTF-8.
//! Error messages escape what they quote.

use std::collections::VecDeque;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::proc::read_capped;

use anyhow::{Context, Result, anyhow, bail};

/// Directories a walk visits at most.
const MAX_DIRS: usize = 100_000;
/// Bytes of paths a walk holds at once at most (a name may be 255 bytes
/// and a path 4 KiB): past them it stops, as past [`MAX_DIRS`].
const MAX_WALK_BYTES: usize = 16 << 20;
/// Bytes of paths [`subtree`] returns at most.
const MAX_SUBTREE_BYTES: usize = 16 << 20;
/// Cgroups [`threads_of`] walks at most for their threads files; a bigger
/// subtree (a delegated one may hold any number) has its threads found
/// from `/proc` instead, whose cost is that of the machine's threads.
const MAX_WALKED_FOR_THREADS: usize = 1_000;
/// How deep below the mount a unit name is searched for.
const MAX_UNIT_DEPTH: usize = 32;
/// Bytes of `cgroup.threads`, `cgroup.procs` or `tasks` files that
/// [`threads_in`] reads in all.
const MAX_THREAD_BYTES: u64 = 16 << 20;
/// Bytes of one `/proc/TID/cgroup` read.
const MAX_PROC_CGROUP: u64 = 64 << 10;
/// Bytes of `/proc/self/mountinfo` read.
const MAX_MOUNTINFO: u64 = 16 << 20;
/// The suffixes of the systemd unit names that are searched for.
pub(crate) const UNIT_SUFFIXES: [&str; 6] =
    [".service", ".scope", ".slice", ".socket", ".mount", ".swap"];

/// The cgroup hierarchy perf's cgroup filter and PERF_SAMPLE_CGROUP use: the
/// v1 hierarchy with the perf_event controller when one is mounted, else the
/// cgroup2 mount (perf_event is implicitly on v2 when not bound to v1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// Where it is mounted, e.g. `/sys/fs/cgroup/unified`.
    pub(crate) mount: PathBuf,
    pub(crate) v2: bool,
}

impl Hierarchy {
    /// Found from `/proc/self/mountinfo`; an error saying what to mount
    /// when neither kind is mounted.
    pub(crate) fn find() -> Result<Hierarchy> {
        let path = Path::new("/proc/self/mountinfo");
        let text = read_capped(path, MAX_MOUNTINFO)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_mountinfo(&text).ok_or_else(|| {
            anyhow!(
                "no cgroup hierarchy for --cgroup: neither cgroup2 nor a cgroup v1 \
                 hierarchy with the perf_event controller is mounted; mount one, e.g. \
                 `mount -t cgroup2 none /sys/fs/cgroup` or \
                 `mkdir -p /sys/fs/cgroup/perf_event && \
                 mount -t cgroup -o perf_event none /sys/fs/cgroup/perf_event`"
            )
        })
    }

    /// [`Hierarchy::find`] from the text of a mountinfo file (a `&str`, or
    /// bytes: a mount point need not be UTF-8).
    pub(crate) fn from_mountinfo(text: impl AsRef<[u8]>) -> Option<Hierarchy> {
        from_mountinfo_bytes(text.as_ref())
    }

    /// Its kind, for messages.
    fn kind(&self) -> &'static str {
        if self.v2 {
            "cgroup2"
        } else {
            "cgroup v1 with perf_event"
        }
    }
}

/// The fields of one mountinfo line that matter here, still escaped.
struct MountLine<'a> {
    root: &'a [u8],
    point: &'a [u8],
    fstype: &'a [u8],
    super_opts: &'a [u8],
}

/// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE
/// SUPER_OPTIONS`. Fields hold no raw space (the kernel escapes it), and
/// none of the first six can be a lone `-`.
fn parse_mount_line(line: &[u8]) -> Option<MountLine<'_>> {
    let fields: Vec<&[u8]> = line
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .collect();
    let sep = 6 + fields.iter().skip(6).position(|f| *f == b"-")?;
    Some(MountLine {
        root: fields.get(3)?,
        point: fields.get(4)?,
        fstype: fields.get(sep + 1)?,
        super_opts: fields.get(sep + 3).copied().unwrap_or_default(),
    })
}

/// The best cgroup mount of a mountinfo text: v1 with perf_event over
/// cgroup2, a mount of the hierarchy's root over a bind mount of a part of
/// it, the first line on a tie.
fn from_mountinfo_bytes(text: &[u8]) -> Option<Hierarchy> {
    let mut best: Option<(u8, Hierarchy)> = None;
    for m in text.split(|&b| b == b'\n').filter_map(parse_mount_line) {
        let perf_event = || {
            m.super_opts
                .split(|&b| b == b',')
                .any(|o| o == b"perf_event")
        };
        let rank = match m.fstype {
            b"cgroup" if perf_event() => 2,
            b"cgroup2" => 0,
            _ => continue,
        } + u8::from(m.root == b"/");
        if best.as_ref().is_none_or(|(r, _)| rank > *r) {
            let mount = PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(m.point)));
            best = Some((
                rank,
                Hierarchy {
                    mount,
                    v2: rank < 2,
                },
            ));
        }
    }
    best.map(|(_, h)| h)
}

/// A mountinfo field with the kernel's octal escapes (`\040` for a space,
/// `\011`, `\012`, `\134`) decoded.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut rest = field;
    loop {
        rest = match rest {
            [
                b'\\',
                a @ b'0'..=b'3',
                b @ b'0'..=b'7',
                c @ b'0'..=b'7',
                tail @ ..,
            ] => {
                out.push((a - b'0') * 64 + (b - b'0') * 8 + (c - b'0'));
                tail
            }
            [b, tail @ ..] => {
                out.push(*b);
                tail
            }
            [] => return out,
        };
    }
}

/// One cgroup named on the command line, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cgroup {
    /// Absolute path of its directory (canonical, inside the mount).
    pub(crate) dir: PathBuf,
    /// Its path relative to the mount, starting with '/', as /proc/PID/cgroup
    /// writes it ("/" for the root cgroup).
    pub(crate) rel: String,
    /// The cgroup id the kernel reports (PERF_SAMPLE_CGROUP): the directory's
    /// inode number on 64-bit kernels.
    pub(crate) id: u64,
}

/// Resolves one PATH of `--cgroup` as the user wrote it:
/// - an absolute path must be a directory inside `h.mount`;
/// - any other is first taken relative to the mount (and must not leave it
///   through `..`);
/// - failing that, a systemd unit name (`nginx.service`, `docker-ID.scope`,
///   `a-b.slice`...) is searched for as a directory of exactly that name,
///   breadth first, at most 100,000 directories and 32 levels deep; it must
///   be the only one.
///
/// Errors name PATH as given and say what was looked for.
pub(crate) fn resolve(h: &Hierarchy, path: &str) -> Result<Cgroup> {
    if path.is_empty() {
        bail!("empty cgroup path");
    }
    let mount = h.mount.canonicalize().with_context(|| {
        format!(
            "cannot resolve the {} mount {}",
            h.kind(),
            shown_path(&h.mount)
        )
    })?;
    if path.starts_with('/') {
        return inside(h, &mount, Path::new(path), path);
    }
    let candidate = mount.join(path);
    match candidate.symlink_metadata() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        _ => return inside(h, &mount, &candidate, path),
    }
    let not_found = format!(
        "cgroup '{}' not found: no directory {}",
        shown(path),
        shown_path(&candidate)
    );
    if path.contains('/') || !UNIT_SUFFIXES.iter().any(|s| path.ends_with(s)) {
        bail!(
            "{not_found} (only names ending in {} are searched for as systemd units)",
            UNIT_SUFFIXES.join(", ")
        );
    }
    let (found, cut) = search_unit(&mount, path);
    match found.as_slice() {
        [] if cut => bail!(
            "{not_found} and no unit named {} in the first {MAX_DIRS} cgroups searched; \
             give its full path",
            shown(path)
        ),
        [] => bail!("{not_found} and no unit named {}", shown(path)),
        [one] => inside(h, &mount, one, path),
        many => {
            let listed: Vec<String> = many
                .iter()
                .take(5)
                .map(|d| {
                    shown_bytes(&rel_of(d.strip_prefix(&mount).unwrap_or(d)).unwrap_or_default())
                })
                .collect();
            let more = many.len().saturating_sub(listed.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            bail!(
                "cgroup '{}' is ambiguous: {} cgroups are named so ({}{more}); \
                 give the full path of the one meant",
                shown(path),
                many.len(),
                listed.join(", ")
            )
        }
    }
}

/// The cgroup at `full` (any path), which must be a directory of the
/// hierarchy mounted at `mount` (canonical).
fn inside(h: &Hierarchy, mount: &Path, full: &Path, given: &str) -> Result<Cgroup> {
    let dir = match full.canonicalize() {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => bail!(
            "cgroup '{}' not found: no directory {}",
            shown(given),
            shown_path(full)
        ),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "cgroup '{}': cannot resolve {}",
                    shown(given),
                    shown_path(full)
                )
            });
        }
    };
    let outside = || {
        anyhow!(
            "cgroup '{}' is not in the {} hierarchy that perf filters by: {} is not a \
             directory under {}",
            shown(given),
            h.kind(),
            shown_path(&dir),
            shown_path(mount)
        )
    };
    let rest = dir.strip_prefix(mount).map_err(|_| outside())?;
    let meta = fs::symlink_metadata(&dir).with_context(|| {
        format!(
            "cgroup '{}': cannot stat {}",
            shown(given),
            shown_path(&dir)
        )
    })?;
    if !meta.is_dir() {
        bail!(
            "cgroup '{}': {} is not a directory",
            shown(given),
            shown_path(&dir)
        );
    }
    // Not another filesystem mounted inside the hierarchy.
    let mount_meta = fs::symlink_metadata(mount)
        .with_context(|| format!("cannot stat {}", shown_path(mount)))?;
    if meta.dev() != mount_meta.dev() {
        return Err(outside());
    }
    let rel = rel_of(rest)
        .and_then(|r| String::from_utf8(r).ok())
        .ok_or_else(|| anyhow!("cgroup '{}': its path is not UTF-8", shown(given)))?;
    Ok(Cgroup {
        id: meta.ino(),
        dir,
        rel,
    })
}

/// The directories below `mount` named `name`, breadth first, and whether
/// the search stopped at its bound before the end.
fn search_unit(mount: &Path, name: &str) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let cut = walk(
        mount,
        MAX_UNIT_DEPTH,
        MAX_DIRS,
        Order::Breadth,
        |dir, _, depth| {
            if depth > 0
                && dir
                    .file_name()
                    .is_some_and(|n| n.as_bytes() == name.as_bytes())
            {
                found.push(dir.to_path_buf());
            }
            true
        },
    );
    (found, cut)
}

/// Every cgroup at or below `root` (a directory), with its id and path
/// relative to `mount` (bytes: a name need not be UTF-8): depth first (a
/// directory before its children, in name order), never following
/// symlinks, at most 100,000 of them and [`MAX_SUBTREE_BYTES`] of paths.
/// Directories that vanish while walked are skipped.
pub(crate) fn subtree(mount: &Path, root: &Path) -> Vec<(u64, Vec<u8>)> {
    let (Ok(mount), Ok(root)) = (mount.canonicalize(), root.canonicalize()) else {
        return Vec::new();
    };
    if !root.starts_with(&mount) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut bytes = 0;
    walk(&root, usize::MAX, MAX_DIRS, Order::Depth, |dir, meta, _| {
        if let Some(rel) = dir.strip_prefix(&mount).ok().and_then(rel_of) {
            bytes += rel.len();
            if bytes > MAX_SUBTREE_BYTES {
                return false;
            }
            out.push((meta.ino(), rel));
        }
        true
    });
    out
}

/// The threads (TIDs) in the cgroups `roots` and every cgroup below them:
/// read from the cgroups' own files ([`threads_in`]) when they are few,
/// else found from `/proc` ([`threads_from_proc`]), whose cost does not
/// grow with the number of cgroups. Sorted, without duplicates.
pub(crate) fn threads_of(h: &Hierarchy, roots: &[Cgroup]) -> Vec<u32> {
    let small = |r: &Cgroup| descendants(&r.dir).is_none_or(|n| n < MAX_WALKED_FOR_THREADS as u64);
    let walked = roots.iter().all(small).then(|| {
        roots.iter().try_fold(Vec::new(), |mut all, r| {
            all.extend(threads_in(h, &r.dir, MAX_WALKED_FOR_THREADS)?);
            Some(all)
        })
    });
    let mut tids = walked.flatten().unwrap_or_else(|| {
        let rels: Vec<&[u8]> = roots.iter().map(|r| r.rel.as_bytes()).collect();
        threads_from_proc(Path::new("/proc"), h.v2, &rels)
    });
    tids.sort_unstable();
    tids.dedup();
    tids
}

/// How many cgroups are below the v2 cgroup at `dir`, from its
/// `cgroup.stat` (None on v1, which has none).
fn descendants(dir: &Path) -> Option<u64> {
    let text = read_capped(&dir.join("cgroup.stat"), 64 << 10).ok()?;
    text.split(|&b| b == b'\n').find_map(|line| {
        let n = line.strip_prefix(b"nr_descendants ")?;
        std::str::from_utf8(n).ok()?.trim().parse().ok()
    })
}

/// The threads in `root` and every cgroup below it: `cgroup.threads`
/// on v2 (else `cgroup.procs` and each process's `/proc/PID/task`), `tasks`
/// on v1. At most 16 MiB of those files are read in all; lines that are not
/// a TID are skipped. None when there are more than `max_dirs` cgroups.
pub(crate) fn threads_in(h: &Hierarchy, root: &Path, max_dirs: usize) -> Option<Vec<u32>> {
    let mut budget = MAX_THREAD_BYTES;
    let mut out = Vec::new();
    let cut = walk(root, usize::MAX, max_dirs, Order::Depth, |dir, _, _| {
        let file = if h.v2 { "cgroup.threads" } else { "tasks" };
        if let Some(text) = read_budgeted(&dir.join(file), &mut budget) {
            out.extend(ids(&text));
        } else if h.v2
            && let Some(text) = read_budgeted(&dir.join("cgroup.procs"), &mut budget)
        {
            for pid in ids(&text) {
                out.push(pid);
                out.extend(super::proc::threads_of(pid));
            }
        }
        budget > 0
    });
    (!cut).then_some(out)
}

/// The threads under `proc` (laid out like `/proc`: `PID/task/TID/cgroup`)
/// whose cgroup (see [`parse_proc_cgroup`]) is one of `rels` or below one.
/// One small read per thread of the machine; a thread whose file is
/// doubtful is left out.
pub(crate) fn threads_from_proc(proc: &Path, v2: bool, rels: &[&[u8]]) -> Vec<u32> {
    let mut out = Vec::new();
    for pid in super::proc::numeric_entries(proc) {
        let task = proc.join(pid.to_string()).join("task");
        for tid in super::proc::numeric_entries(&task) {
            let file = task.join(tid.to_string()).join("cgroup");
            let Ok(text) = read_capped(&file, MAX_PROC_CGROUP) else {
                continue;
            };
            if pick_path(v2, &text).is_some_and(|rel| rels.iter().any(|r| is_under(rel, r))) {
                out.push(tid);
            }
        }
    }
    out
}

/// The positive numbers, one per line, of `text`.
fn ids(text: &[u8]) -> impl Iterator<Item = u32> + '_ {
    text.split(|&b| b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok()?.trim().parse::<u32>().ok())
        .filter(|&id| id != 0)
}

/// File `path`, read within what is left of `budget` (then lessened).
fn read_budgeted(path: &Path, budget: &mut u64) -> Option<Vec<u8>> {
    let text = read_capped(path, *budget).ok()?;
    *budget = budget.saturating_sub(text.len() as u64);
    Some(text)
}

/// The number `/proc/PID/cgroup` (and the kernel's cgroup events) give
/// hierarchy `h`: 0 for v2, else that of the line listing `perf_event`.
pub(crate) fn hierarchy_number(h: &Hierarchy) -> Option<u32> {
    if h.v2 {
        return Some(0);
    }
    let text = read_capped(Path::new("/proc/self/cgroup"), MAX_PROC_CGROUP).ok()?;
    text.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.splitn(3, |&b| b == b':');
        let (number, controllers) = (fields.next()?, fields.next()?);
        controllers
            .split(|&b| b == b',')
            .any(|c| c == b"perf_event")
            .then(|| std::str::from_utf8(number).ok()?.parse().ok())
            .flatten()
    })
}

/// The path (relative to the mount, "/..." form) of task `tid`'s cgroup in
/// hierarchy `h`, from `/proc/TID/cgroup` (read up to 64 KiB): see
/// [`parse_proc_cgroup`]. None when the task is gone, or its line is
/// missing or doubtful.
pub(crate) fn of_task(h: &Hierarchy, tid: u32) -> Option<Vec<u8>> {
    let text = read_capped(Path::new(&format!("/proc/{tid}/cgroup")), MAX_PROC_CGROUP).ok()?;
    parse_proc_cgroup(h.v2, &text)
}

/// The cgroup path in the text of a `/proc/PID/cgroup` file: that of the
/// `0::PATH` line on v2, of the line whose controller list holds
/// `perf_event` on v1. Lines are `ID:CONTROLLERS:PATH`; a cgroup name may
/// hold a newline, which splits its line and can forge another. So the
/// answer is None when any line is not of that form, when two lines match,
/// or (v2) when the match is not the last line, as the kernel writes it;
/// and when the path does not start with '/' or climbs out of this cgroup
/// namespace's root (`/../..`). A name with a newline and then text that
/// passes for a whole line of another hierarchy still goes undetected.
/// `text` is a `&str` or the file's bytes; so is the path (a name need not
/// be UTF-8).
pub(crate) fn parse_proc_cgroup(h_v2: bool, text: impl AsRef<[u8]>) -> Option<Vec<u8>> {
    pick_path(h_v2, text.as_ref()).map(<[u8]>::to_vec)
}

fn pick_path(v2: bool, text: &[u8]) -> Option<&[u8]> {
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut found = None;
    for (i, line) in lines.iter().enumerate() {
        let mut fields = line.splitn(3, |&b| b == b':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        if id.is_empty() || !id.iter().all(u8::is_ascii_digit) || !path.starts_with(b"/") {
            return None;
        }
        let matches = if v2 {
            id == b"0" && controllers.is_empty()
        } else {
            controllers
                .split(|&b| b == b',')
                .any(|c| c == b"perf_event")
        };
        if matches {
            if found.is_some() {
                return None;
            }
            found = Some((i, path));
        }
    }
    let (i, path) = found?;
    if v2 && i + 1 != lines.len() {
        return None;
    }
    valid_rel(path).then_some(path)
}

/// Whether `rel` starts with '/' and has no `..` component.
fn valid_rel(rel: &[u8]) -> bool {
    rel.starts_with(b"/") && !rel.split(|&b| b == b'/').any(|c| c == b"..")
}

/// Whether `rel` (a "/..." path) is `ancestor` or below it, by path
/// components: "/a/b" is under "/a", "/ab" is not; everything is under "/".
/// Either is a `&str` or bytes.
pub(crate) fn is_under(rel: impl AsRef<[u8]>, ancestor: impl AsRef<[u8]>) -> bool {
    let (rel, ancestor) = (rel.as_ref(), ancestor.as_ref());
    if !rel.starts_with(b"/") || !ancestor.starts_with(b"/") {
        return false;
    }
    let end = ancestor
        .iter()
        .rposition(|&b| b != b'/')
        .map_or(0, |i| i + 1);
    match rel.strip_prefix(&ancestor[..end]) {
        Some(rest) => rest.is_empty() || rest.starts_with(b"/"),
        None => false,
    }
}

/// The id of the cgroup at `rel` (a "/..." path, a `&str` or bytes) in
/// `h`; None when it is gone, or `rel` is not such a path or has a `..`.
pub(crate) fn id_of(h: &Hierarchy, rel: impl AsRef<[u8]>) -> Option<u64> {
    let rel = rel.as_ref();
    if !valid_rel(rel) {
        return None;
    }
    let inner = std::ffi::OsStr::from_bytes(&rel[1..]);
    let meta = fs::symlink_metadata(h.mount.join(inner)).ok()?;
    meta.is_dir().then(|| meta.ino())
}

/// `rest` (relative to a mount) in "/..." form, as bytes; None when a
/// component is not a plain name.
fn rel_of(rest: &Path) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for c in rest.components() {
        let Component::Normal(name) = c else {
            return None;
        };
        out.push(b'/');
        out.extend_from_slice(name.as_bytes());
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Depth,
    Breadth,
}

/// Calls `visit(dir, its metadata, depth)` for `root` (depth 0) and the
/// directories below it, down to `max_depth`, in `order` (children in name
/// order), until it returns false. Never follows a symlink nor enters
/// another filesystem; skips directories that vanish; visits at most
/// `max_dirs` (itself at most [`MAX_DIRS`]) and holds at most
/// [`MAX_WALK_BYTES`] of paths. Returns whether a bound cut the walk short.
fn walk(
    root: &Path,
    max_depth: usize,
    max_dirs: usize,
    order: Order,
    mut visit: impl FnMut(&Path, &Metadata, usize) -> bool,
) -> bool {
    let Ok(meta) = fs::symlink_metadata(root) else {
        return false;
    };
    let max_dirs = max_dirs.min(MAX_DIRS);
    let dev = meta.dev();
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
    let mut held = root.as_os_str().len();
    let mut seen = 0;
    let mut cut = false;
    loop {
        let next = match order {
            Order::Depth => queue.pop_back(),
            Order::Breadth => queue.pop_front(),
        };
        let Some((dir, depth)) = next else {
            return cut;
        };
        held -= dir.as_os_str().len();
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() || meta.dev() != dev {
            continue;
        }
        seen += 1;
        if !visit(&dir, &meta, depth) {
            return cut;
        }
        if depth >= max_depth {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        // Room left, counting what is queued, keeps the queue bounded too.
        let room = max_dirs.saturating_sub(seen + queue.len());
        let mut children = Vec::new();
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let path = e.path();
                if children.len() == room || held + path.as_os_str().len() > MAX_WALK_BYTES {
                    cut = true;
                    break;
                }
                held += path.as_os_str().len();
                children.push(path);
            }
        }
        children.sort();
        if order == Order::Depth {
            children.reverse();
        }
        queue.extend(children.into_iter().map(|c| (c, depth + 1)));
    }
}

/// `s` with control characters, quotes and backslashes escaped.
pub(crate) fn shown(s: &str) -> String {
    s.escape_debug().to_string()
}

/// `b` as [`shown`], with each byte that is not UTF-8 as `\xNN`.
pub(crate) fn shown_bytes(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.utf8_chunks() {
        out.push_str(&shown(chunk.valid()));
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

fn shown_path(p: &Path) -> String {
    shown_bytes(p.as_os_str().as_bytes())
}

mod by_id;

pub(crate) use by_id::{ById, ByIdName};

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A fresh directory under the temporary directory, removed on drop;
    /// `mnt` in it is a fake cgroup mount.
    struct Tmp(PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let p =
                std::env::temp_dir().join(format!("offwake-cgroup-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(p.join("mnt")).unwrap();
            Tmp(p.canonicalize().unwrap())
        }
        fn dirs(&self, rels: &[&str]) -> &Tmp {
            for r in rels {
                fs::create_dir_all(self.0.join(r)).unwrap();
            }
            self
        }
        fn hier(&self) -> Hierarchy {
            Hierarchy {
                mount: self.0.join("mnt"),
                v2: true,
            }
        }
        fn ino(&self, rel: &str) -> u64 {
            fs::symlink_metadata(self.0.join(rel)).unwrap().ino()
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn err(h: &Hierarchy, path: &str) -> String {
        format!("{:#}", resolve(h, path).unwrap_err())
    }

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw
";

    fn mount(h: Option<Hierarchy>) -> Option<(String, bool)> {
        h.map(|h| (h.mount.to_string_lossy().into_owned(), h.v2))
    }

    #[test]
    fn mountinfo_picks_perf_events_hierarchy() {
        let got = |t: &str| mount(Hierarchy::from_mountinfo(t));
        assert_eq!(got(HYBRID), Some(("/sys/fs/cgroup/unified".into(), true)));
        let pure =
            "25 31 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(got(pure), Some(("/sys/fs/cgroup".into(), true)));
        // v1 perf_event wins over cgroup2, wherever it is listed.
        let v1 = format!(
            "{HYBRID}50 31 0:40 / /sys/fs/cgroup/cpu,perf_event rw shared:9 - cgroup cgroup rw,cpu,perf_event"
        );
        assert_eq!(
            got(&v1),
            Some(("/sys/fs/cgroup/cpu,perf_event".into(), false))
        );
        let named = "50 31 0:40 / /x rw - cgroup cgroup rw,name=perf_event\n";
        assert_eq!(got(named), None);
        // The hierarchy's root over a bind mount of a part of it.
        let bind = "60 1 0:38 /sub /mnt/sub rw - cgroup2 cgroup2 rw\n61 1 0:38 / /mnt/all rw - cgroup2 cgroup2 rw\n";
        assert_eq!(got(bind), Some(("/mnt/all".into(), true)));
    }

    #[test]
    fn mountinfo_mount_points_are_unescaped() {
        let t = "41 31 0:38 / /mnt/my\\040cg\\134x\\011y\\012z\\0 rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount(Hierarchy::from_mountinfo(t)),
            Some(("/mnt/my cg\\x\ty\nz\\0".into(), true))
        );
        for none in [
            "",
            "\n\n",
            "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
            "a - b\n-\n",
        ] {
            assert_eq!(Hierarchy::from_mountinfo(none), None, "{none:?}");
        }
    }

    #[test]
    fn resolves_relative_and_absolute_paths() {
        let t = Tmp::new("paths");
        t.dirs(&["mnt/system.slice/nginx.service"]);
        let h = t.hier();
        let dir = t.0.join("mnt/system.slice/nginx.service");
        let want = Cgroup {
            dir: dir.clone(),
            rel: "/system.slice/nginx.service".into(),
            id: t.ino("mnt/system.slice/nginx.service"),
        };
        for path in [
            "system.slice/nginx.service",
            "system.slice/nginx.service/",
            "system.slice/../system.slice/nginx.service",
            "nginx.service",
            dir.to_str().unwrap(),
        ] {
            assert_eq!(resolve(&h, path).unwrap(), want, "{path}");
        }
        let root = resolve(&h, h.mount.to_str().unwrap()).unwrap();
        assert_eq!((root.rel.as_str(), root.id), ("/", t.ino("mnt")));
    }

    #[test]
    fn paths_outside_the_mount_are_refused() {
        let t = Tmp::new("outside");
        t.dirs(&["mnt/a", "outside/hidden.service"]);
        fs::write(t.0.join("mnt/cgroup.procs"), "").unwrap();
        symlink(t.0.join("outside"), t.0.join("mnt/link")).unwrap();
        let h = t.hier();
        let outside = t.0.join("outside");
        let e = err(&h, outside.to_str().unwrap());
        assert!(e.contains("is not in the cgroup2 hierarchy"), "{e}");
        assert!(
            e.contains(&format!("not a directory under {}", h.mount.display())),
            "{e}"
        );
        for escape in ["../outside", "a/../../outside", "link"] {
            let e = err(&h, escape);
            assert!(
                e.contains("is not in the cgroup2 hierarchy"),
                "{escape}: {e}"
            );
        }
        assert!(err(&h, "/").contains("is not in the"));
        assert!(err(&h, "cgroup.procs").contains("is not a directory"));
        // The search does not follow the link.
        assert!(err(&h, "hidden.service").contains("not found"));
        assert!(err(&h, "").contains("empty"));
    }

    #[test]
    fn units_are_found_by_search() {
        let t = Tmp::new("units");
        t.dirs(&[
            "mnt/system.slice/foo.service",
            "mnt/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope",
            "mnt/system.slice/a.slice/a-b.slice",
        ]);
        let h = t.hier();
        for (unit, rel) in [
            ("foo.service", "/system.slice/foo.service"),
            (
                "x.scope",
                "/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope",
            ),
            ("a-b.slice", "/system.slice/a.slice/a-b.slice"),
            ("user-1000.slice", "/user.slice/user-1000.slice"),
        ] {
            assert_eq!(resolve(&h, unit).unwrap().rel, rel);
        }
    }

    #[test]
    fn an_ambiguous_unit_lists_where_it_is() {
        let t = Tmp::new("ambiguous");
        t.dirs(&[
            "mnt/a/dup.service",
            "mnt/b/dup.service",
            "mnt/c/d/dup.service",
        ]);
        let h = t.hier();
        let e = err(&h, "dup.service");
        assert!(e.contains("'dup.service' is ambiguous: 3 cgroups"), "{e}");
        assert!(
            e.contains("(/a/dup.service, /b/dup.service, /c/d/dup.service)"),
            "{e}"
        );
        assert!(e.contains("full path"), "{e}");
        t.dirs(&[
            "mnt/e/dup.service",
            "mnt/f/dup.service",
            "mnt/g/dup.service",
            "mnt/h/dup.service",
        ]);
        let e = err(&h, "dup.service");
        assert!(e.contains("7 cgroups") && e.contains(" and 2 more)"), "{e}");
        assert_eq!(
            resolve(&h, "c/d/dup.service").unwrap().rel,
            "/c/d/dup.service"
        );
    }

    #[test]
    fn what_is_not_found_is_named() {
        let t = Tmp::new("missing");
        let h = t.hier();
        let m = h.mount.display();
        let e = err(&h, "foo");
        assert!(
            e.starts_with(&format!("cgroup 'foo' not found: no directory {m}/foo (")),
            "{e}"
        );
        let e = err(&h, "nope.service");
        assert_eq!(
            e,
            format!(
                "cgroup 'nope.service' not found: no directory {m}/nope.service and no unit named nope.service"
            )
        );
        assert!(
            err(&h, "/no/such/dir")
                .contains("cgroup '/no/such/dir' not found: no directory /no/such/dir")
        );
        // A name from outside cannot add a line to the message.
        let e = err(&h, "bad\nname'.scope");
        assert!(
            !e.contains('\n') && e.contains("bad\\nname\\'.scope"),
            "{e}"
        );
    }

    #[test]
    fn subtree_lists_every_cgroup_depth_first() {
        let t = Tmp::new("subtree");
        t.dirs(&["mnt/a/c", "mnt/a/b", "mnt/d", "outside"]);
        fs::write(t.0.join("mnt/a/cgroup.procs"), "").unwrap();
        symlink("../d", t.0.join("mnt/a/ln")).unwrap();
        let mnt = t.0.join("mnt");
        let want: Vec<(u64, Vec<u8>)> = ["", "/a", "/a/b", "/a/c", "/d"]
            .iter()
            .map(|r| {
                (
                    t.ino(&format!("mnt{r}")),
                    if r.is_empty() {
                        b"/".to_vec()
                    } else {
                        r.as_bytes().to_vec()
                    },
                )
            })
            .collect();
        assert_eq!(subtree(&mnt, &mnt), want);
        assert_eq!(subtree(&mnt, &mnt.join("a")), want[1..4]);
        assert_eq!(subtree(&mnt, &t.0.join("outside")), []);
        assert_eq!(subtree(&mnt, &mnt.join("gone")), []);
    }

    #[test]
    fn threads_are_read_from_every_cgroup_below() {
        let t = Tmp::new("threads");
        t.dirs(&["mnt/a/b", "mnt/p"]);
        let m = t.0.join("mnt");
        fs::write(m.join("cgroup.threads"), "1\n2\nx\n\n2\n").unwrap();
        fs::write(
            m.join("a/b/cgroup.threads"),
            "3\n 4 \n0\n-1\n99999999999\n5",
        )
        .unwrap();
        let me = std::process::id();
        fs::write(m.join("p/cgroup.procs"), format!("{me}\n")).unwrap();
        fs::write(m.join("tasks"), "7\n8\n").unwrap();
        let mut v2 = threads_in(&t.hier(), &m, 100).unwrap();
        assert!(v2.contains(&me), "{v2:?}");
        v2.retain(|&t| t < 10);
        v2.sort_unstable();
        assert_eq!(v2, [1, 2, 2, 3, 4, 5]);
        let v1 = Hierarchy {
            v2: false,
            ..t.hier()
        };
        assert_eq!(threads_in(&v1, &m, 100).unwrap(), [7, 8]);
        assert!(threads_in(&v1, &m.join("gone"), 100).unwrap().is_empty());
        // More cgroups than it may walk: no answer, never a partial one.
        assert_eq!(threads_in(&v1, &m, 3), None);
        assert_eq!(threads_in(&v1, &m, 4).map(|t| t.len()), Some(2));
    }

    #[test]
    fn threads_are_found_from_proc_by_their_cgroup() {
        let t = Tmp::new("proc");
        let proc = t.0.join("proc");
        let task = |pid: u32, tid: u32, text: &[u8]| {
            let dir = proc.join(format!("{pid}/task/{tid}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("cgroup"), text).unwrap();
        };
        task(10, 10, b"0::/a/b\n");
        task(10, 11, b"0::/ab\n");
        task(20, 20, b"1:cpu:/\n0::/a\xff/x\n");
        task(20, 21, b"0::/a\xfe\n");
        // A name with a newline forging a second line: doubtful.
        task(30, 30, b"0::/x\n0::/a\n");
        task(40, 40, b"0::/\n");
        fs::create_dir_all(proc.join("self/task/1")).unwrap();
        let rels: [&[u8]; 2] = [b"/a", b"/a\xff"];
        let mut got = threads_from_proc(&proc, true, &rels);
        got.sort_unstable();
        assert_eq!(got, [10, 20]);
        assert_eq!(threads_from_proc(&proc, true, &[b"/"]).len(), 5);
        assert!(threads_from_proc(&t.0.join("gone"), true, &rels).is_empty());
    }

    #[test]
    fn names_that_are_not_utf8_are_shown_by_their_bytes() {
        assert_eq!(shown_bytes(b"/a\xff'\n\xfe"), "/a\\xff\\'\\n\\xfe");
        assert_eq!(shown_bytes("/v\u{FFFD}".as_bytes()), "/v\u{FFFD}");
        assert!(is_under(b"/a\xff/b", b"/a\xff"));
        assert!(!is_under(b"/a\xfe/b", b"/a\xff"));
    }

    #[test]
    fn proc_cgroup_lines() {
        let text = |p: Option<Vec<u8>>| p.map(|p| String::from_utf8(p).unwrap());
        let v2 = |t: &str| text(parse_proc_cgroup(true, t));
        let v1 = |t: &str| text(parse_proc_cgroup(false, t));
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/24c1\n1:cpu:/\n0::/a.slice/b c\n";
        assert_eq!(v2(hybrid).as_deref(), Some("/a.slice/b c"));
        assert_eq!(v1(hybrid), None);
        assert_eq!(v2("0::/\n").as_deref(), Some("/"));
        assert_eq!(
            v2("0::/evil name: x:y\n").as_deref(),
            Some("/evil name: x:y")
        );
        let perf = "5:cpu,perf_event:/k8s/pod 1:x\n3:name=perf_event:/n\n0::/\n";
        assert_eq!(v1(perf).as_deref(), Some("/k8s/pod 1:x"));
        assert_eq!(v1("1:perf_event:/a\n").as_deref(), Some("/a"));
        for doubtful in [
            "4:memory:/x\n0::/target\n0::/real\n", // a v1 name forged a v2 line
            "0::/x\n0::/target\n",                 // a v2 name forged a second line
            "0::/x\nrest of its name\n",           // a v2 name with a newline
            "1:cpu:/\n",                           // no v2 line
            "0::/../../outside\n",                 // outside this cgroup namespace
            "0::relative\n",
            "x::/a\n",
            "",
        ] {
            assert_eq!(v2(doubtful), None, "{doubtful:?}");
        }
        assert_eq!(v1("2:perf_event:/x\n2:perf_event:/t\n0::/\n"), None);
        assert_eq!(v1("2:perf_event:/x\nrest\n0::/\n"), None);
        // A name need not be UTF-8: its bytes are kept.
        assert_eq!(
            parse_proc_cgroup(true, b"0::/a\xff\n").as_deref(),
            Some(&b"/a\xff"[..])
        );
    }

    #[test]
    fn is_under_goes_by_components() {
        for (rel, anc, under) in [
            ("/a/b", "/a", true),
            ("/a", "/a", true),
            ("/a", "/a/", true),
            ("/a/b/c", "/a/b", true),
            ("/x", "/", true),
            ("/", "/", true),
            ("/ab", "/a", false),
            ("/a", "/a/b", false),
            ("/", "/a", false),
            ("a", "/", false),
            ("/a", "", false),
            ("/a", "a", false),
        ] {
            assert_eq!(is_under(rel, anc), under, "{rel} under {anc}");
        }
    }

    #[test]
    fn ids_are_inode_numbers() {
        let t = Tmp::new("ids");
        t.dirs(&["mnt/a/b", "outside"]);
        fs::write(t.0.join("mnt/f"), "").unwrap();
        let h = t.hier();
        assert_eq!(id_of(&h, "/a/b"), Some(t.ino("mnt/a/b")));
        assert_eq!(id_of(&h, "/"), Some(t.ino("mnt")));
        for none in ["/../outside", "a", "/gone", "/f", ""] {
            assert_eq!(id_of(&h, none), None, "{none}");
        }
    }

    #[test]
    fn live_hierarchy_and_own_cgroup() {
        let text = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let Some(want) = Hierarchy::from_mountinfo(&text) else {
            assert!(Hierarchy::find().is_err());
            return;
        };
        let h = Hierarchy::find().unwrap();
        assert_eq!(h, want);
        assert!(h.mount.is_dir(), "{h:?}");
        let unified = text
            .lines()
            .any(|l| l.contains(" /sys/fs/cgroup/unified ") && l.contains(" - cgroup2 "));
        if !text.contains("perf_event") && unified {
            assert_eq!(
                h,
                Hierarchy {
                    mount: "/sys/fs/cgroup/unified".into(),
                    v2: true
                }
            );
        }
        let mine = of_task(&h, std::process::id()).expect("this process's cgroup");
        assert!(mine.starts_with(b"/"), "{mine:?}");
        assert_eq!(of_task(&h, 4_194_304), None);
    }

    #[test]
    fn live_cgroups_are_named_by_their_id() {
        if !crate::live_gate::live_allowed("live_cgroups_are_named_by_their_id") {
            return;
        }
        let h = Hierarchy::find().unwrap();
        let by_id = ById::open(&h).expect("cgroups opened by id as root");
        let name = format!("offwake-cgid-{}", std::process::id());
        let made = Made {
            top: h.mount.join(&name),
            child: None,
        };
        let odd = made.top.join(std::ffi::OsStr::from_bytes(b"v\xff"));
        fs::create_dir_all(&odd).unwrap();
        let ino = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
        let (top_id, odd_id) = (ino(&made.top), ino(&odd));
        assert_eq!(
            by_id.name(top_id),
            ByIdName::Path(format!("/{name}").into_bytes())
        );
        let mut want = format!("/{name}/").into_bytes();
        want.extend_from_slice(b"v\xff");
        assert_eq!(by_id.name(odd_id), ByIdName::Path(want));
        fs::remove_dir(&odd).unwrap();
        assert_eq!(by_id.name(odd_id), ByIdName::Gone);
        drop(made);
        assert_eq!(by_id.name(top_id), ByIdName::Gone);
    }

    /// A cgroup made by a live test, and the process put in it: killed and
    /// removed on drop.
    struct Made {
        top: PathBuf,
        child: Option<std::process::Child>,
    }

    impl Drop for Made {
        fn drop(&mut self) {
            if let Some(mut c) = self.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            // The cgroup may still count the reaped child for a moment.
            for _ in 0..100 {
                let _ = fs::remove_dir(self.top.join("child"));
                if fs::remove_dir(&self.top).is_ok() || !self.top.exists() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }

    #[test]
    fn live_cgroup_is_resolved_walked_and_holds_a_process() {
        if !crate::live_gate::live_allowed("live_cgroup_is_resolved_walked_and_holds_a_process") {
            return;
        }
        let h = Hierarchy::find().unwrap();
        let name = format!("offwake-cgtest-{}", std::process::id());
        let mut made = Made {
            top: h.mount.join(&name),
            child: None,
        };
        fs::create_dir_all(made.top.join("child")).unwrap();
        let cg = resolve(&h, &name).unwrap();
        let ino = |p: &Path| fs::symlink_metadata(p).unwrap().ino();
        assert_eq!(
            (cg.rel.clone(), cg.id),
            (format!("/{name}"), ino(&made.top))
        );
        assert_eq!(resolve(&h, made.top.to_str().unwrap()).unwrap(), cg);
        let child = (
            ino(&made.top.join("child")),
            format!("/{name}/child").into_bytes(),
        );
        assert_eq!(
            subtree(&h.mount, &cg.dir),
            [(cg.id, cg.rel.clone().into_bytes()), child]
        );
        assert_eq!(id_of(&h, &cg.rel), Some(cg.id));
        assert!(threads_of(&h, std::slice::from_ref(&cg)).is_empty());
        let sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = sleeper.id();
        made.child = Some(sleeper);
        fs::write(cg.dir.join("cgroup.procs"), pid.to_string()).unwrap();
        assert_eq!(threads_of(&h, std::slice::from_ref(&cg)), [pid]);
        let rels = [cg.rel.as_bytes()];
        assert_eq!(threads_from_proc(Path::new("/proc"), h.v2, &rels), [pid]);
        assert_eq!(of_task(&h, pid), Some(cg.rel.clone().into_bytes()));
        let top = made.top.clone();
        drop(made);
        assert!(!top.exists(), "{top:?} not removed");
    }
}
