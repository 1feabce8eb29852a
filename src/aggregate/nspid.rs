//! Targets' thread ids in their own PID namespace: every id the tool
//! prints is one of the namespace it runs in, and a thread in a container
//! has another there (the last of `NSpid` in `/proc/TID/status`), which the
//! report adds where it differs.

use rustc_hash::FxHashMap;

/// Looks up a thread's id in its own PID namespace (default: `/proc`).
pub(crate) type NsLookup = Box<dyn FnMut(u32) -> Option<u32> + Send>;

/// The innermost ids of the targets seen, each read once.
pub(super) struct NsTids {
    /// Per thread: its innermost id, or 0 when it is the same or unknown.
    read: FxHashMap<u32, u32>,
    lookup: NsLookup,
}

impl NsTids {
    pub(super) fn new() -> NsTids {
        NsTids {
            read: FxHashMap::default(),
            lookup: Box::new(|tid| crate::sys::proc::ns_pid_and_euid(tid).map(|(ns, _)| ns)),
        }
    }

    pub(super) fn set_lookup(&mut self, lookup: NsLookup) {
        self.lookup = lookup;
    }

    /// Reads the innermost id of `tid`, a target, unless known.
    pub(super) fn note(&mut self, tid: u32) {
        if tid == 0 || self.read.contains_key(&tid) {
            return;
        }
        let ns = (self.lookup)(tid).filter(|&ns| ns != tid).unwrap_or(0);
        self.read.insert(tid, ns);
    }

    /// Thread `tid` is gone: unless its id differed (the report prints
    /// it), it need not be kept.
    pub(super) fn forget(&mut self, tid: u32) {
        if self.read.get(&tid) == Some(&0) {
            self.read.remove(&tid);
        }
    }

    /// The threads whose innermost id differs, with it.
    pub(super) fn differing(&self) -> FxHashMap<u32, u32> {
        self.read
            .iter()
            .filter(|&(_, &ns)| ns != 0)
            .map(|(&tid, &ns)| (tid, ns))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_is_looked_up_once_and_only_differences_are_kept() {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = asked.clone();
        let mut ns = NsTids::new();
        ns.set_lookup(Box::new(move |tid| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match tid {
                100 => Some(7),
                200 => Some(200),
                _ => None,
            }
        }));
        for tid in [100, 100, 200, 300, 0] {
            ns.note(tid);
        }
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!(ns.differing(), FxHashMap::from_iter([(100, 7)]));
        // Gone threads are forgotten, but for an id the report prints.
        for tid in [100, 200, 300] {
            ns.forget(tid);
        }
        assert_eq!(ns.read.len(), 1);
        assert_eq!(ns.differing(), FxHashMap::from_iter([(100, 7)]));
    }
}
