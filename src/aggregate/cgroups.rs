//! Cgroup ids as paths: the id a switch-out carries (the perf_event
//! controller's hierarchy) named by its path relative to the mount, for
//! `--cgroup`'s membership test and the reports split by cgroup. A live
//! trace names each id when first asked, by opening the cgroup by its id
//! where the kernel allows it, else from listings of the hierarchy; a
//! recording (`-i`) names its ids by its own records, and never by this
//! machine's. Paths are bytes: a cgroup's name need not be UTF-8.
//!
//! Cgroups are made by processes the tool does not trust (a delegated
//! subtree lets any user make as many as they like, with paths of 4 KiB):
//! the paths kept are bounded in bytes and in number, and no listing of
//! the hierarchy is made when ids can be opened.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::plan::CgroupTable;
use crate::sys::cgroup::{self, ById, ByIdName, Hierarchy};

/// The least time between two listings of the hierarchy, however many
/// unknown ids come; and at least [`LISTING_SHARE`] times as long as the
/// last listing took.
const RELIST_GAP: Duration = Duration::from_millis(100);
const LISTING_SHARE: u32 = 10;

/// Bytes of paths kept at most: a path past them is looked up again each
/// time it is asked for.
const MAX_KEPT_BYTES: usize = 16 << 20;

/// Ids remembered at most, named or not.
const MAX_IDS: usize = 1 << 18;

/// A cgroup's path relative to the mount.
pub(crate) type CgroupPath = Arc<[u8]>;

/// Names of the cgroup ids seen.
pub(crate) struct CgroupNames {
    known: Known,
}

enum Known {
    /// This machine's hierarchy, asked as ids come.
    Live(Live),
    /// A recording's own table: fixed, and all there is.
    Recorded(Arc<CgroupTable>),
}

struct Live {
    hierarchy: Hierarchy,
    /// How ids are named; None: by listings of the hierarchy.
    by_id: Option<ById>,
    /// The ids asked for: their paths, or None for one no cgroup had
    /// when asked (a cgroup created and removed before).
    names: FxHashMap<u64, Option<CgroupPath>>,
    /// Bytes of the paths in `names`, and the most kept
    /// ([`MAX_KEPT_BYTES`]).
    bytes: usize,
    max_bytes: usize,
    /// When the last listing ended, and the least time to the next.
    listed: Option<(Instant, Duration)>,
}

impl CgroupNames {
    /// Names ids of `hierarchy` as they come.
    pub(crate) fn new(hierarchy: Hierarchy) -> CgroupNames {
        CgroupNames {
            known: Known::Live(Live {
                by_id: ById::open(&hierarchy),
                hierarchy,
                names: FxHashMap::default(),
                bytes: 0,
                max_bytes: MAX_KEPT_BYTES,
                listed: None,
            }),
        }
    }

    /// The names a recording gives its ids: no listing of this machine's
    /// hierarchy is ever made, its ids being the recording machine's.
    pub(crate) fn recorded(names: Arc<CgroupTable>) -> CgroupNames {
        CgroupNames {
            known: Known::Recorded(names),
        }
    }

    /// The path of cgroup `id` relative to the mount (`/` for the root),
    /// or `None` when no cgroup has it (the recording does not name it).
    pub(crate) fn name(&mut self, id: u64) -> Option<CgroupPath> {
        match &mut self.known {
            Known::Recorded(names) => names.get(&id).map(|p| CgroupPath::from(Arc::clone(p))),
            Known::Live(live) => live.name(id),
        }
    }
}

impl Live {
    fn name(&mut self, id: u64) -> Option<CgroupPath> {
        if let Some(known) = self.names.get(&id) {
            return known.clone();
        }
        if let Some(by_id) = &self.by_id {
            match by_id.name(id) {
                ByIdName::Path(path) => return Some(self.keep(id, path)),
                ByIdName::Gone => {
                    self.remember_gone(id);
                    return None;
                }
                // Named by listings from now on.
                ByIdName::Unsupported => self.by_id = None,
            }
        }
        self.list(id)
    }

    /// Lists the hierarchy for `id`, unless one was listed too recently;
    /// every cgroup listed is kept, as room allows.
    fn list(&mut self, id: u64) -> Option<CgroupPath> {
        if self.listed.is_some_and(|(at, gap)| at.elapsed() < gap) {
            return None;
        }
        let started = Instant::now();
        let mount = &self.hierarchy.mount;
        let mut found = None;
        for (listed, path) in cgroup::subtree(mount, mount) {
            if listed == id {
                found = Some(self.keep(listed, path));
            } else if !self.names.contains_key(&listed) {
                self.keep(listed, path);
            }
        }
        self.listed = Some((
            Instant::now(),
            RELIST_GAP.max(started.elapsed() * LISTING_SHARE),
        ));
        if found.is_none() {
            self.remember_gone(id);
        }
        found
    }

    /// `path` as the name of `id`, kept while room is left.
    fn keep(&mut self, id: u64, path: Vec<u8>) -> CgroupPath {
        let path = CgroupPath::from(path);
        if self.names.len() < MAX_IDS && self.bytes + path.len() <= self.max_bytes {
            self.bytes += path.len();
            self.names.insert(id, Some(Arc::clone(&path)));
        }
        path
    }

    /// Remembers that no cgroup has `id`, so that it is not asked again;
    /// when the table is full, the ids already so remembered are
    /// forgotten to make room.
    fn remember_gone(&mut self, id: u64) {
        if self.names.len() >= MAX_IDS {
            self.names.retain(|_, p| p.is_some());
        }
        if self.names.len() < MAX_IDS {
            self.names.insert(id, None);
        }
    }
}

impl super::Aggregator {
    /// Names cgroup ids by a recording's own `names` (`-i`) in place of
    /// any listing of this machine's hierarchy.
    pub(crate) fn with_recorded_cgroups(mut self, names: Arc<CgroupTable>) -> super::Aggregator {
        self.identity.cgroups = Some(CgroupNames::recorded(names));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    /// A fake hierarchy in a fresh directory (which exports no kernfs
    /// handles, so ids are named by listings), removed on drop.
    struct Fake(PathBuf);

    impl Fake {
        fn new(dirs: &[&[u8]]) -> Fake {
            // One directory per fake: tests run at once in one process.
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let root =
                std::env::temp_dir().join(format!("offwake-cgnames-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            for d in dirs {
                std::fs::create_dir_all(root.join(OsStr::from_bytes(&d[1..]))).unwrap();
            }
            Fake(root)
        }
        fn id(&self, rel: &[u8]) -> u64 {
            let path = self.0.join(OsStr::from_bytes(&rel[1..]));
            std::fs::symlink_metadata(path).unwrap().ino()
        }
        fn names(&self) -> CgroupNames {
            CgroupNames::new(Hierarchy {
                mount: self.0.clone(),
                v2: true,
            })
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn live(names: &mut CgroupNames) -> &mut Live {
        match &mut names.known {
            Known::Live(live) => live,
            Known::Recorded(_) => panic!("a recording's names"),
        }
    }

    #[test]
    fn names_keep_the_bytes_of_a_path() {
        let dirs: [&[u8]; 4] = [b"/a/v\xff", b"/a/v\xfe", "/a/v\u{FFFD}".as_bytes(), b"/b"];
        let fake = Fake::new(&dirs);
        let mut names = fake.names();
        for rel in dirs {
            assert_eq!(names.name(fake.id(rel)).as_deref(), Some(rel), "{rel:?}");
        }
        assert_eq!(names.name(fake.id(b"/")).as_deref(), Some(&b"/"[..]));
        assert_eq!(names.name(u64::MAX), None);
    }

    #[test]
    fn the_bytes_of_paths_kept_are_bounded() {
        let long = "x".repeat(200);
        let dirs: Vec<Vec<u8>> = (0..40)
            .map(|i| format!("/{long}/{i}-{long}").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = dirs.iter().map(Vec::as_slice).collect();
        let fake = Fake::new(&refs);
        let mut names = fake.names();
        live(&mut names).max_bytes = 4_000;
        // The first listing names what it can keep; the id asked for is
        // named either way.
        let last = dirs.last().unwrap();
        assert_eq!(names.name(fake.id(last)).as_deref(), Some(last.as_slice()));
        let l = live(&mut names);
        assert!(
            l.bytes <= 4_000 && l.bytes > 3_000,
            "{} bytes kept",
            l.bytes
        );
        let kept: usize = l.names.values().flatten().map(|p| p.len()).sum();
        assert_eq!(kept, l.bytes);
    }

    #[test]
    fn a_recording_s_table_names_its_ids_and_nothing_else() {
        let table: CgroupTable = [(7, Arc::from("/a")), (1, Arc::from("/"))]
            .into_iter()
            .collect();
        let mut names = CgroupNames::recorded(Arc::new(table));
        assert_eq!(names.name(7).as_deref(), Some(&b"/a"[..]));
        assert_eq!(names.name(1).as_deref(), Some(&b"/"[..]));
        // This machine's root cgroup's id, say: not the recording's.
        let here = Hierarchy::find()
            .ok()
            .and_then(|h| cgroup::id_of(&h, "/"))
            .unwrap_or(1234);
        if here != 1 && here != 7 {
            assert_eq!(names.name(here), None);
        }
        assert_eq!(names.name(99), None);
    }
}
