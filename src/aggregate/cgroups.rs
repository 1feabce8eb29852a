//! Cgroup ids as paths: the id a switch-out carries (the perf_event
//! controller's hierarchy) named by its path relative to the mount, for
//! `--cgroup`'s membership test and the reports split by cgroup. A live
//! trace lists this machine's hierarchy; a recording (`-i`) names its
//! ids by its own records, and never by this machine's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::plan::CgroupTable;
use crate::sys::cgroup::{self, Hierarchy};

/// The least time between two listings of the hierarchy, however many
/// unknown ids come.
const RELIST_GAP: Duration = Duration::from_millis(100);

/// Names of the cgroup ids seen.
pub(crate) struct CgroupNames {
    known: Known,
}

enum Known {
    /// From listings of the hierarchy: at start, and again for an id
    /// created since (each unknown id asks once).
    Listed {
        hierarchy: Hierarchy,
        names: FxHashMap<u64, Arc<str>>,
        /// Ids a listing did not find (a cgroup created and removed
        /// between two listings): not asked again.
        missed: FxHashSet<u64>,
        listed: Option<Instant>,
    },
    /// A recording's own table: fixed, and all there is.
    Recorded(Arc<CgroupTable>),
}

impl CgroupNames {
    /// Lists the cgroups of `hierarchy` now.
    pub(crate) fn new(hierarchy: Hierarchy) -> CgroupNames {
        let mut names = CgroupNames {
            known: Known::Listed {
                hierarchy,
                names: FxHashMap::default(),
                missed: FxHashSet::default(),
                listed: None,
            },
        };
        names.relist();
        names
    }

    /// The names a recording gives its ids: no listing of this machine's
    /// hierarchy is ever made, its ids being the recording machine's.
    pub(crate) fn recorded(names: Arc<CgroupTable>) -> CgroupNames {
        CgroupNames {
            known: Known::Recorded(names),
        }
    }

    fn relist(&mut self) {
        let Known::Listed {
            hierarchy,
            names,
            listed,
            ..
        } = &mut self.known
        else {
            return;
        };
        let mount = &hierarchy.mount;
        for (id, rel) in cgroup::subtree(mount, mount) {
            names.entry(id).or_insert_with(|| rel.into());
        }
        *listed = Some(Instant::now());
    }

    /// The path of cgroup `id` relative to the mount (`/` for the root),
    /// or `None` when no listing found it (the recording does not name
    /// it).
    pub(crate) fn name(&mut self, id: u64) -> Option<Arc<str>> {
        let (names, missed, listed) = match &mut self.known {
            Known::Recorded(names) => return names.get(&id).cloned(),
            Known::Listed {
                names,
                missed,
                listed,
                ..
            } => (names, missed, listed),
        };
        if let Some(name) = names.get(&id) {
            return Some(Arc::clone(name));
        }
        if missed.contains(&id) || listed.is_some_and(|t| t.elapsed() < RELIST_GAP) {
            return None;
        }
        self.relist();
        let Known::Listed { names, missed, .. } = &mut self.known else {
            return None;
        };
        let found = names.get(&id).cloned();
        if found.is_none() {
            missed.insert(id);
        }
        found
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

    #[test]
    fn a_recording_s_table_names_its_ids_and_nothing_else() {
        let table: CgroupTable = [(7, Arc::from("/a")), (1, Arc::from("/"))]
            .into_iter()
            .collect();
        let mut names = CgroupNames::recorded(Arc::new(table));
        assert_eq!(names.name(7).as_deref(), Some("/a"));
        assert_eq!(names.name(1).as_deref(), Some("/"));
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
