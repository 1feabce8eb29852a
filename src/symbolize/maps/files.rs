//! Opening the files a process mapped, and its perf map, as safely as
//! files a hostile process names must be opened.

use super::{Mapping, ProcessMaps, build_id};
use crate::sys::open::{Dir, OpenError, Opened, open_magic};
use std::path::Path;

impl ProcessMaps {
    /// Opens the perf map of `tgid` (`/tmp/perf-PID.map` with its pid in
    /// its own namespace) inside the root it had, if its owner is the
    /// process's effective uid: a map it planted as a link to a file it
    /// does not own is refused. For a process whose exit was seen, the map
    /// as opened then.
    pub(crate) fn open_perf_map(&self, tgid: u32) -> Result<Opened, OpenError> {
        let p = self.procs.get(&tgid).ok_or(OpenError::NoRoot)?;
        if let Some(held) = &p.held_perf_map {
            return held.try_clone();
        }
        let (ns_pid, euid) = p.perf_map.ok_or(OpenError::NoRoot)?;
        let root = p
            .root
            .and_then(|i| self.roots.dirs.get(i))
            .ok_or(OpenError::NoRoot)?;
        let opened = root.open_file(&format!("/tmp/perf-{ns_pid}.map"))?;
        if opened.uid != euid {
            return Err(OpenError::NotOwned);
        }
        Ok(opened)
    }

    /// Opens the file of `mapping` of `tgid` for reading, as safely as a
    /// file a hostile process names must be: while the mapping is current
    /// and the process lives, the very file mapped (through
    /// `/proc/PID/map_files/`); else its path inside the root the process
    /// had, checked to be the file that was mapped. Never the host's file
    /// of that path for a process whose root is elsewhere.
    ///
    /// A file not found in the process's root (mapped before it changed
    /// root), or of a process never seen alive (gone before its first
    /// event was read), is looked for in this tool's root, and taken only
    /// when proven the mapped one (same device and inode).
    pub(crate) fn open_file(&self, tgid: u32, mapping: &Mapping) -> Result<Opened, OpenError> {
        let root = self.procs.get(&tgid).and_then(|p| p.root);
        self.open_mapped(tgid, mapping, root, !self.has_exited(tgid))
    }

    /// [`ProcessMaps::open_file`] with the process's root `root` (an index
    /// into its roots), and whether it is `alive`.
    pub(super) fn open_mapped(
        &self,
        tgid: u32,
        mapping: &Mapping,
        root: Option<usize>,
        alive: bool,
    ) -> Result<Opened, OpenError> {
        if self.recorded {
            return self.open_recorded(mapping);
        }
        if alive && mapping.until == u64::MAX {
            let path = format!(
                "/proc/{tgid}/map_files/{:x}-{:x}",
                mapping.start, mapping.end
            );
            // The link names the file mapped at that range now: the inode
            // only tells a mapping since replaced there (btrfs and overlayfs
            // report another device to `stat` than in memory maps).
            if let Ok(opened) = open_magic(Path::new(&path)) {
                match mapping.file {
                    Some(key) if opened.key.ino != key.ino => {}
                    _ => return Ok(opened),
                }
            }
        }
        if mapping.deleted {
            return Err(OpenError::Replaced);
        }
        let known = root.and_then(|i| self.roots.dirs.get(i));
        let in_root = |root: &Dir| -> Result<Opened, OpenError> {
            let opened = root.open_file(&mapping.path)?;
            if let Some(key) = mapping.file {
                opened.check_is(key)?;
            }
            Ok(opened)
        };
        let found = match known {
            Some(root) => in_root(root),
            None => Err(OpenError::NoRoot),
        };
        match (found, mapping.file, &self.own_root) {
            (Ok(opened), _, _) => Ok(opened),
            // Mapped before a chroot, or never seen alive: the file may be
            // the tool's own of that path, and is taken only when its
            // device and inode prove it the mapped one.
            (Err(_), Some(_), Some(own)) => in_root(own),
            (Err(e), _, _) => Err(e),
        }
    }
}

impl ProcessMaps {
    /// Opens the file of a recording's `mapping`: at its path in this
    /// tool's root when that is the file mapped (the same build-id when the
    /// recording gives one, else the same device and inode); else by its
    /// build-id, from perf's build-id cache or the debug directory. A file
    /// that merely has the path is never used.
    fn open_recorded(&self, mapping: &Mapping) -> Result<Opened, OpenError> {
        let own = self.own_root.as_ref().ok_or(OpenError::NoRoot)?;
        let at_path = own.open_file(&mapping.path);
        let wanted_id = mapping.build_id.as_deref();
        if let Ok(opened) = &at_path {
            // A recorded build-id decides: a file rewritten in place keeps
            // its device and inode.
            let proven = match wanted_id {
                Some(id) => build_id(opened).as_deref() == Some(id),
                None => mapping.file.is_some_and(|k| opened.check_is(k).is_ok()),
            };
            if proven {
                return at_path;
            }
        }
        if let Some(found) = wanted_id.and_then(|id| self.build_id_dirs.open(id)) {
            return Ok(found);
        }
        match at_path {
            Ok(_) => Err(OpenError::Replaced),
            Err(e) => Err(e),
        }
    }
}
