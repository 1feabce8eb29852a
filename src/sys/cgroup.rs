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
                    shown(&rel_of(d.strip_prefix(&mount).unwrap_or(d), true).unwrap_or_default())
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
    let rel = rel_of(rest, false)
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
    let cut = walk(mount, MAX_UNIT_DEPTH, Order::Breadth, |dir, _, depth| {
        if depth > 0
            && dir
                .file_name()
                .is_some_and(|n| n.as_bytes() == name.as_bytes())
        {
            found.push(dir.to_path_buf());
        }
        true
    });
    (found, cut)
}

/// Every cgroup at or below `root` (a directory), with its id and path
/// relative to `mount`: depth first (a directory before its children, in
/// name order), never following symlinks, at most 100,000 of them.
/// Directories that vanish while walked are skipped; a name that is not
/// UTF-8 is shown with U+FFFD, its id stays exact.
pub(crate) fn subtree(mount: &Path, root: &Path) -> Vec<(u64, String)> {
    let (Ok(mount), Ok(root)) = (mount.canonicalize(), root.canonicalize()) else {
        return Vec::new();
    };
    if !root.starts_with(&mount) {
        return Vec::new();
    }
    let mut out = Vec::new();
    walk(&root, usize::MAX, Order::Depth, |dir, meta, _| {
        if let Some(rel) = dir.strip_prefix(&mount).ok().and_then(|r| rel_of(r, true)) {
            out.push((meta.ino(), rel));
        }
        true
    });
    out
}

/// The threads (TIDs) in `root` and every cgroup below it: `cgroup.threads`
/// on v2 (else `cgroup.procs` and each process's `/proc/PID/task`), `tasks`
/// on v1. At most 16 MiB of those files are read in all; lines that are not
/// a TID are skipped. Sorted, without duplicates.
pub(crate) fn threads_in(h: &Hierarchy, root: &Path) -> Vec<u32> {
    let mut budget = MAX_THREAD_BYTES;
    let mut out = Vec::new();
    walk(root, usize::MAX, Order::Depth, |dir, _, _| {
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
    out.sort_unstable();
    out.dedup();
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
/// missing, doubtful or not UTF-8.
pub(crate) fn of_task(h: &Hierarchy, tid: u32) -> Option<String> {
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
/// namespace's root (`/../..`), or is not UTF-8. A name with a newline and
/// then text that passes for a whole line of another hierarchy still goes
/// undetected. `text` is a `&str` or the file's bytes.
pub(crate) fn parse_proc_cgroup(h_v2: bool, text: impl AsRef<[u8]>) -> Option<String> {
    let path = pick_path(h_v2, text.as_ref())?;
    String::from_utf8(path.to_vec()).ok()
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
pub(crate) fn is_under(rel: &str, ancestor: &str) -> bool {
    if !rel.starts_with('/') || !ancestor.starts_with('/') {
        return false;
    }
    let ancestor = ancestor.trim_end_matches('/');
    match rel.strip_prefix(ancestor) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// The id of the cgroup at `rel` (a "/..." path) in `h`; None when it is
/// gone, or `rel` is not such a path or has a `..`.
pub(crate) fn id_of(h: &Hierarchy, rel: &str) -> Option<u64> {
    if !valid_rel(rel.as_bytes()) {
        return None;
    }
    let meta = fs::symlink_metadata(h.mount.join(rel.trim_start_matches('/'))).ok()?;
    meta.is_dir().then(|| meta.ino())
}

/// `rest` (relative to a mount) in "/..." form; None when a component is
/// not a plain name, or (unless `lossy`) not UTF-8.
fn rel_of(rest: &Path, lossy: bool) -> Option<String> {
    let mut out = String::new();
    for c in rest.components() {
        let Component::Normal(name) = c else {
            return None;
        };
        out.push('/');
        match name.to_str() {
            Some(s) => out.push_str(s),
            None if lossy => out.push_str(&name.to_string_lossy()),
            None => return None,
        }
    }
    if out.is_empty() {
        out.push('/');
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
/// [`MAX_DIRS`]. Returns whether that bound cut the walk short.
fn walk(
    root: &Path,
    max_depth: usize,
    order: Order,
    mut visit: impl FnMut(&Path, &Metadata, usize) -> bool,
) -> bool {
    let Ok(meta) = fs::symlink_metadata(root) else {
        return false;
    };
    let dev = meta.dev();
    let mut queue = VecDeque::from([(root.to_path_buf(), 0usize)]);
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
        let room = MAX_DIRS.saturating_sub(seen + queue.len());
        let mut children = Vec::new();
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if children.len() == room {
                    cut = true;
                    break;
                }
                children.push(e.path());
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

fn shown_path(p: &Path) -> String {
    shown(&p.to_string_lossy())
}

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
        let want: Vec<(u64, String)> = ["", "/a", "/a/b", "/a/c", "/d"]
            .iter()
            .map(|r| {
                (
                    t.ino(&format!("mnt{r}")),
                    if r.is_empty() {
                        "/".into()
                    } else {
                        r.to_string()
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
        let mut v2 = threads_in(&t.hier(), &m);
        assert!(v2.contains(&me), "{v2:?}");
        v2.retain(|&t| t < 10);
        assert_eq!(v2, [1, 2, 3, 4, 5]);
        let v1 = Hierarchy {
            v2: false,
            ..t.hier()
        };
        assert_eq!(threads_in(&v1, &m), [7, 8]);
        assert!(threads_in(&v1, &m.join("gone")).is_empty());
    }

    #[test]
    fn proc_cgroup_lines() {
        let v2 = |t: &str| parse_proc_cgroup(true, t);
        let v1 = |t: &str| parse_proc_cgroup(false, t);
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
        assert_eq!(parse_proc_cgroup(true, b"0::/a\xff\n"), None);
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
        assert!(mine.starts_with('/'), "{mine}");
        assert_eq!(of_task(&h, 4_194_304), None);
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
        let child = (ino(&made.top.join("child")), format!("/{name}/child"));
        assert_eq!(subtree(&h.mount, &cg.dir), [(cg.id, cg.rel.clone()), child]);
        assert_eq!(id_of(&h, &cg.rel), Some(cg.id));
        assert!(threads_in(&h, &cg.dir).is_empty());
        let sleeper = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = sleeper.id();
        made.child = Some(sleeper);
        fs::write(cg.dir.join("cgroup.procs"), pid.to_string()).unwrap();
        assert_eq!(threads_in(&h, &cg.dir), [pid]);
        assert_eq!(of_task(&h, pid), Some(cg.rel.clone()));
        let top = made.top.clone();
        drop(made);
        assert!(!top.exists(), "{top:?} not removed");
    }
}
