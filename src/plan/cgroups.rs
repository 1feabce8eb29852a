//! The cgroups of `--cgroup`: resolved on this machine when tracing, or,
//! for a recording (`-i`), read as far as they can be without it and then
//! found among the cgroups its own records name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Result, anyhow, bail, ensure};
use rustc_hash::FxHashMap;

use crate::sys::cgroup::{self, Cgroup, Hierarchy, UNIT_SUFFIXES, shown};

/// The cgroups of `--cgroup`, none below another, in the hierarchy that
/// perf's cgroup filter uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CgroupTargets {
    /// For a recording (`-i`), no mount of this machine: empty.
    pub(crate) hierarchy: Hierarchy,
    /// For a recording, their `rel` and the recording's `id` only (`dir`
    /// empty).
    pub(crate) roots: Vec<Cgroup>,
    /// For a recording: the PATHs as given, read as far as they can be
    /// without it; `roots` is empty until [`Plan::use_recorded_cgroups`]
    /// finds them among its cgroups. `None` when tracing.
    pub(crate) recorded: Option<Vec<GivenCgroup>>,
}

/// A recording's cgroup ids (its machine's) and their paths relative to
/// the mount, from its own records.
pub(crate) type CgroupTable = FxHashMap<u64, Arc<str>>;

/// A PATH of `--cgroup` for a recording, read without it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GivenCgroup {
    /// A path relative to the mount, as the kernel writes it (`/a/b`, `/`
    /// for the root).
    Path { given: String, rel: String },
    /// A bare name: the cgroup `/NAME`, else a systemd unit, the last
    /// component of one path.
    Name(String),
}

/// Where cgroup hierarchies are mounted: an absolute PATH under it is
/// taken past it, and past the v2 mount of a hybrid host (`unified`) or a
/// v1 hierarchy with perf_event (`perf_event`, `cpu,perf_event`).
const CGROUP_MOUNTS: &str = "/sys/fs/cgroup";

impl CgroupTargets {
    /// Resolves the paths of `--cgroup`, keeping only the outermost of
    /// nested ones (the kernel's filter takes descendants in).
    pub(super) fn resolve(paths: &[String]) -> Result<CgroupTargets> {
        let hierarchy = Hierarchy::find()?;
        let mut roots: Vec<Cgroup> = Vec::new();
        for path in paths {
            keep_outermost(&mut roots, cgroup::resolve(&hierarchy, path)?);
        }
        Ok(CgroupTargets {
            hierarchy,
            roots,
            recorded: None,
        })
    }

    /// The paths of `--cgroup` for a recording: checked, and found in it
    /// once it is open ([`CgroupTargets::find_recorded`]).
    pub(super) fn given(paths: &[String]) -> Result<CgroupTargets> {
        Ok(CgroupTargets {
            hierarchy: Hierarchy {
                mount: PathBuf::new(),
                v2: true,
            },
            roots: Vec::new(),
            recorded: Some(
                paths
                    .iter()
                    .map(|p| GivenCgroup::read(p))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Finds the PATHs given for a recording among the cgroups it names
    /// (`names`, of the recording `file`), keeping only the outermost of
    /// nested ones.
    pub(super) fn find_recorded(&mut self, names: &CgroupTable, file: &Path) -> Result<()> {
        let Some(given) = &self.recorded else {
            return Ok(());
        };
        // Each path once, with the least of its ids (a cgroup removed and
        // made again while recording has two).
        let mut paths: BTreeMap<&str, u64> = BTreeMap::new();
        for (&id, path) in names {
            let least = paths.entry(path).or_insert(id);
            *least = (*least).min(id);
        }
        let mut roots = Vec::new();
        for g in given {
            let (rel, id) = g.find(&paths, file)?;
            keep_outermost(
                &mut roots,
                Cgroup {
                    dir: PathBuf::new(),
                    rel,
                    id,
                },
            );
        }
        self.roots = roots;
        Ok(())
    }

    /// True when `rel`, a cgroup path relative to the mount (a `&str` or
    /// bytes), is one of the roots or below one.
    pub(crate) fn holds(&self, rel: impl AsRef<[u8]>) -> bool {
        let rel = rel.as_ref();
        self.roots.iter().any(|r| cgroup::is_under(rel, &r.rel))
    }
}

/// Adds `cg` to `roots` unless it is at or below one of them, and drops
/// those below it.
fn keep_outermost(roots: &mut Vec<Cgroup>, cg: Cgroup) {
    if !roots.iter().any(|r| cgroup::is_under(&cg.rel, &r.rel)) {
        roots.retain(|r| !cgroup::is_under(&r.rel, &cg.rel));
        roots.push(cg);
    }
}

/// True when `rel` is a cgroup's path relative to its mount as the kernel
/// writes it: `/`, or `/` and names joined by `/`, none empty, `.` or
/// `..`.
pub(crate) fn is_cgroup_rel(rel: &str) -> bool {
    rel == "/"
        || rel
            .strip_prefix('/')
            .is_some_and(|r| r.split('/').all(|c| !c.is_empty() && c != "." && c != ".."))
}

impl GivenCgroup {
    /// A PATH of `--cgroup` for a recording: a path relative to the mount
    /// (`/a/b` or `a/b`), an absolute one under a cgroup mount of
    /// [`CGROUP_MOUNTS`] (taken past it), or a bare name. A trailing `/`
    /// is dropped; an empty, `.` or `..` component is an error.
    fn read(given: &str) -> Result<GivenCgroup> {
        ensure!(!given.is_empty(), "empty cgroup path");
        let rel = match past_mount(given) {
            Some(rest) => rest.to_string(),
            None if given.starts_with('/') => given.to_string(),
            None if !given.contains('/') && given != "." && given != ".." => {
                return Ok(GivenCgroup::Name(given.to_string()));
            }
            None => format!("/{given}"),
        };
        // One trailing '/' goes; a second is an empty component.
        let rel = match rel.strip_suffix('/') {
            Some(r) if !r.ends_with('/') => r,
            _ => &rel,
        };
        let rel = if rel.is_empty() { "/" } else { rel };
        ensure!(
            is_cgroup_rel(rel),
            "cgroup '{}': a cgroup path has no empty, '.' or '..' component",
            shown(given)
        );
        Ok(GivenCgroup::Path {
            given: given.to_string(),
            rel: rel.to_string(),
        })
    }

    /// Its path and id among a recording's `paths` (each with its id); an
    /// error, naming `file`, when it is not one of them or, a unit,
    /// names several.
    fn find(&self, paths: &BTreeMap<&str, u64>, file: &Path) -> Result<(String, u64)> {
        let (given, top) = match self {
            GivenCgroup::Path { given, rel } => (given, rel.clone()),
            GivenCgroup::Name(name) => (name, format!("/{name}")),
        };
        if let Some(&id) = paths.get(top.as_str()) {
            return Ok((top, id));
        }
        let not_found = format!(
            "cgroup '{}' not found in {}: it names no cgroup {}",
            shown(given),
            file.display(),
            shown(&top)
        );
        let GivenCgroup::Name(name) = self else {
            bail!("{not_found}");
        };
        if !UNIT_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            bail!(
                "{not_found} (only names ending in {} are searched for as systemd units)",
                UNIT_SUFFIXES.join(", ")
            );
        }
        let found: Vec<(&str, u64)> = paths
            .iter()
            .filter(|(p, _)| p.rsplit('/').next() == Some(name.as_str()))
            .map(|(p, id)| (*p, *id))
            .collect();
        match found.as_slice() {
            [] => bail!("{not_found} and no unit named {}", shown(name)),
            [(path, id)] => Ok((path.to_string(), *id)),
            many => {
                let listed: Vec<String> = many.iter().take(5).map(|(p, _)| shown(p)).collect();
                let more = match many.len() - listed.len() {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                Err(anyhow!(
                    "cgroup '{}' is ambiguous: {} cgroups of {} are named so ({}{more}); give \
                     the full path of the one meant",
                    shown(name),
                    many.len(),
                    file.display(),
                    listed.join(", ")
                ))
            }
        }
    }
}

/// `given` past the cgroup mount it names, when it names one (see
/// [`CGROUP_MOUNTS`]): empty or a path from `/`.
fn past_mount(given: &str) -> Option<&str> {
    let rest = given.strip_prefix(CGROUP_MOUNTS)?;
    let Some(inner) = rest.strip_prefix('/') else {
        return rest.is_empty().then_some(rest);
    };
    let first = inner.split('/').next().unwrap_or_default();
    if first == "unified" || first.split(',').any(|c| c == "perf_event") {
        Some(&inner[first.len()..])
    } else {
        Some(rest)
    }
}

/// What a recording's cgroups are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CgroupUse {
    /// Nothing.
    None,
    /// A pprof report's labels, which go without.
    Labels,
    /// This option, which cannot go without.
    Needed(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(given: &str) -> Result<GivenCgroup> {
        GivenCgroup::read(given)
    }

    fn rel(given: &str) -> String {
        match read(given).unwrap() {
            GivenCgroup::Path { rel, .. } => rel,
            GivenCgroup::Name(n) => panic!("{given}: a name, {n}"),
        }
    }

    #[test]
    fn a_recording_s_cgroup_paths_are_read_without_it() {
        for (given, want) in [
            ("/a/b", "/a/b"),
            ("a/b", "/a/b"),
            ("a/b/", "/a/b"),
            ("/a/b/", "/a/b"),
            ("a/", "/a"),
            ("/", "/"),
            (
                "/sys/fs/cgroup/unified/system.slice/x.service",
                "/system.slice/x.service",
            ),
            ("/sys/fs/cgroup/unified", "/"),
            ("/sys/fs/cgroup/unified/", "/"),
            ("/sys/fs/cgroup/system.slice", "/system.slice"),
            ("/sys/fs/cgroup", "/"),
            ("/sys/fs/cgroup/perf_event/k8s/pod", "/k8s/pod"),
            ("/sys/fs/cgroup/cpu,perf_event/k8s", "/k8s"),
            // Not under the mount: a cgroup path of its own.
            ("/sys/fs/cgroupx/a", "/sys/fs/cgroupx/a"),
            ("/odd name\n/x", "/odd name\n/x"),
        ] {
            assert_eq!(rel(given), want, "{given}");
        }
        for name in ["nginx.service", "offwake-rec-1", "a b"] {
            assert_eq!(read(name).unwrap(), GivenCgroup::Name(name.into()));
        }
        for bad in [
            "", "/a//b", "a/../b", "/..", "..", ".", "./a", "/a/./b", "//", "a//",
        ] {
            let e = format!("{:#}", read(bad).unwrap_err());
            assert!(
                e == "empty cgroup path" || e.contains("no empty, '.' or '..' component"),
                "{bad}: {e}"
            );
        }
        let e = format!("{:#}", read("/x/\n\n/../y\n").unwrap_err());
        assert!(!e.contains('\n') && e.contains("cgroup '/x/\\n"), "{e}");
    }

    /// The targets of `--cgroup GIVEN` found among `names`, by path.
    fn found(given: &[&str], names: &[(u64, &str)]) -> Result<Vec<(String, u64)>> {
        let given: Vec<String> = given.iter().map(|g| g.to_string()).collect();
        let mut targets = CgroupTargets::given(&given)?;
        let table: CgroupTable = names.iter().map(|&(id, p)| (id, Arc::from(p))).collect();
        targets.find_recorded(&table, Path::new("rec.data"))?;
        Ok(targets.roots.into_iter().map(|r| (r.rel, r.id)).collect())
    }

    const RECORDED: [(u64, &str); 8] = [
        (1, "/"),
        (10, "/system.slice"),
        (11, "/system.slice/nginx.service"),
        (12, "/user.slice/user-1000.slice/app.slice/x.scope"),
        (13, "/a/dup.service"),
        (14, "/b/dup.service"),
        (15, "/offwake-rec-1"),
        (16, "/offwake-rec-1/inner"),
    ];

    #[test]
    fn a_recording_s_cgroups_are_found_by_path_or_unit() {
        let one = |given: &str| found(&[given], &RECORDED);
        let ok = |given: &str, rel: &str, id: u64| {
            assert_eq!(one(given).unwrap(), [(rel.to_string(), id)], "{given}");
        };
        ok("offwake-rec-1", "/offwake-rec-1", 15);
        ok("/offwake-rec-1/", "/offwake-rec-1", 15);
        ok(
            "/sys/fs/cgroup/unified/offwake-rec-1/inner",
            "/offwake-rec-1/inner",
            16,
        );
        ok("nginx.service", "/system.slice/nginx.service", 11);
        ok(
            "x.scope",
            "/user.slice/user-1000.slice/app.slice/x.scope",
            12,
        );
        ok(
            "system.slice/nginx.service",
            "/system.slice/nginx.service",
            11,
        );
        ok("/", "/", 1);
        // The outermost of nested ones.
        assert_eq!(
            found(
                &["offwake-rec-1/inner", "offwake-rec-1", "nginx.service"],
                &RECORDED
            )
            .unwrap(),
            [
                ("/offwake-rec-1".to_string(), 15),
                ("/system.slice/nginx.service".to_string(), 11)
            ]
        );
        // A path made again while recording has the least of its ids.
        assert_eq!(
            found(&["a"], &[(30, "/a"), (20, "/a")]).unwrap(),
            [("/a".to_string(), 20)]
        );
    }

    #[test]
    fn what_a_recording_lacks_or_names_twice_is_said() {
        let err = |given: &str| format!("{:#}", found(&[given], &RECORDED).unwrap_err());
        assert_eq!(
            err("/nope/x"),
            "cgroup '/nope/x' not found in rec.data: it names no cgroup /nope/x"
        );
        assert_eq!(
            err("/sys/fs/cgroup/unified/gone"),
            "cgroup '/sys/fs/cgroup/unified/gone' not found in rec.data: it names no cgroup /gone"
        );
        let e = err("inner");
        assert!(
            e.starts_with("cgroup 'inner' not found in rec.data: it names no cgroup /inner (only names ending in .service"),
            "{e}"
        );
        assert_eq!(
            err("gone.service"),
            "cgroup 'gone.service' not found in rec.data: it names no cgroup /gone.service and no unit named gone.service"
        );
        assert_eq!(
            err("dup.service"),
            "cgroup 'dup.service' is ambiguous: 2 cgroups of rec.data are named so \
             (/a/dup.service, /b/dup.service); give the full path of the one meant"
        );
        assert_eq!(found(&["a/dup.service"], &RECORDED).unwrap()[0].1, 13);
        // Many, of hostile names: five listed, escaped.
        let many: Vec<(u64, String)> = (0..8)
            .map(|i| (100 + i, format!("/p{i}\n/d.scope")))
            .collect();
        let many: Vec<(u64, &str)> = many.iter().map(|(id, p)| (*id, p.as_str())).collect();
        let e = format!("{:#}", found(&["d.scope"], &many).unwrap_err());
        assert!(e.contains("8 cgroups") && e.contains(" and 3 more)"), "{e}");
        assert!(!e.contains('\n') && e.contains("/p0\\n/d.scope"), "{e}");
    }
}
