//! Cgroups named by their id, without listing the hierarchy.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use super::{Hierarchy, rel_of};

/// Names cgroups by their id without listing the hierarchy: the kernel
/// opens a cgroup directory from a file handle holding its id
/// (`open_by_handle_at`, as cgroup2 exports them), and the path of the
/// open directory is read back from `/proc/self/fd`. Each name costs a
/// few system calls, whatever the number of cgroups. Needs
/// `CAP_DAC_READ_SEARCH`, and a hierarchy that exports handles.
pub(crate) struct ById {
    mount: fs::File,
    /// The mount's canonical path, which every path read starts with.
    prefix: PathBuf,
}

/// What [`ById::name`] found of an id.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ByIdName {
    /// Its path relative to the mount ("/" for the root), as bytes.
    Path(Vec<u8>),
    /// No cgroup has it now (removed, or never one), or its path is
    /// longer than the kernel writes out.
    Gone,
    /// Cgroups cannot be opened by id here: they are to be listed.
    Unsupported,
}

/// `FILEID_KERNFS`: a kernfs file handle, 8 bytes of node id.
const FILEID_KERNFS: libc::c_int = 0xfe;

/// A file handle of type [`FILEID_KERNFS`], laid out as `struct
/// file_handle` with its 8 bytes.
#[repr(C)]
struct KernfsHandle {
    handle_bytes: libc::c_uint,
    handle_type: libc::c_int,
    id: u64,
}

impl ById {
    /// For hierarchy `h`; None when its root cannot be opened by its id
    /// (a filesystem that exports no handles refuses every one alike).
    pub(crate) fn open(h: &Hierarchy) -> Option<ById> {
        let prefix = h.mount.canonicalize().ok()?;
        let mount = fs::File::open(&prefix).ok()?;
        let root = mount.metadata().ok()?.ino();
        let by_id = ById { mount, prefix };
        (by_id.name(root) == ByIdName::Path(b"/".to_vec())).then_some(by_id)
    }

    /// The cgroup whose id is `id`.
    pub(crate) fn name(&self, id: u64) -> ByIdName {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let mut handle = KernfsHandle {
            handle_bytes: 8,
            handle_type: FILEID_KERNFS,
            id,
        };
        // SAFETY: `handle` is a `struct file_handle` followed by the
        // `handle_bytes` (8) bytes it declares, alive for the call; the
        // mount's fd is open.
        let fd = unsafe {
            libc::open_by_handle_at(
                self.mount.as_raw_fd(),
                (&raw mut handle).cast::<libc::file_handle>(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::ESTALE | libc::ENOENT | libc::ENOTDIR) => ByIdName::Gone,
                _ => ByIdName::Unsupported,
            };
        }
        // SAFETY: open_by_handle_at returned this fd, owned by no one else.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let Ok(path) = fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
            return ByIdName::Gone;
        };
        let Some(rel) = path.strip_prefix(&self.prefix).ok().and_then(rel_of) else {
            return ByIdName::Gone;
        };
        // A directory removed meanwhile reads as "PATH (deleted)"; a name
        // may end so too, and then still leads to the directory.
        if rel.ends_with(b" (deleted)")
            && fs::symlink_metadata(&path).map_or(true, |m| m.ino() != id)
        {
            return ByIdName::Gone;
        }
        ByIdName::Path(rel)
    }
}
