//! The one way to open a file that a traced process names: its binaries,
//! libraries and the debug files they point to. The process is untrusted,
//! so a path is resolved inside a directory (the process's root, or a
//! trusted debug directory) with `openat2`, first as `O_PATH` so that
//! nothing but a regular file on a local filesystem is ever really opened,
//! then reopened for reading with `O_NONBLOCK`. Identity (device, inode,
//! size) comes from the opened descriptor, never from the path again.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{Mode, SFlag, fstat};
use nix::sys::statfs::{FUSE_SUPER_MAGIC, fstatfs};

/// Why a file was not opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum OpenError {
    #[error("no such file")]
    Missing,
    #[error("not a regular file")]
    NotRegular,
    /// A FUSE file's server is a process, which could make every read
    /// (and the lookup itself) wait forever.
    #[error("on a FUSE filesystem")]
    Fuse,
    #[error("not the file the process mapped")]
    Replaced,
    /// Owned by someone other than the process that names it.
    #[error("not owned by the process's user")]
    NotOwned,
    /// The process was never seen alive, so its root is unknown.
    #[error("the process's root directory is unknown")]
    NoRoot,
    #[error("{0}")]
    Os(Errno),
}

/// Device and inode: which file a mapping is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileKey {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// A regular file opened for reading.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) file: File,
    pub(crate) key: FileKey,
    pub(crate) size: u64,
    /// Its owner.
    pub(crate) uid: u32,
    /// Which version of the file this is, as opened (see [`Version`]).
    pub(crate) version: Option<Version>,
}

/// Which version of a file, for what is kept across runs about it: device,
/// inode, size, modification and change times (ns), and the unique id of
/// its mount (Linux 6.8 on), which no later mount of the same boot takes.
/// A change time is set by the kernel on any change, and no user can set
/// it back, except on a filesystem whose image or server supplies it (a
/// loop-mounted image a user made); the mount id tells those apart from a
/// later mount that reuses the device number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version(pub(crate) [u64; 6]);

/// The version of the open file `fd`: `None` where the kernel gives no
/// unique mount id.
fn version_of(fd: &impl AsRawFd) -> Option<Version> {
    // SAFETY: `libc::statx` is a plain C struct, for which all zeros is a
    // valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: statx writes one `statx` into `stx`, for the descriptor
    // itself (an empty path, a static C string, with AT_EMPTY_PATH).
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_BASIC_STATS | libc::STATX_MNT_ID_UNIQUE,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_MNT_ID_UNIQUE == 0 {
        return None;
    }
    let ns = |t: libc::statx_timestamp| {
        (t.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(u64::from(t.tv_nsec))
    };
    let dev = libc::makedev(stx.stx_dev_major, stx.stx_dev_minor);
    Some(Version([
        dev,
        stx.stx_ino,
        stx.stx_size,
        ns(stx.stx_mtime),
        ns(stx.stx_ctime),
        stx.stx_mnt_id,
    ]))
}

/// How paths are resolved inside a [`Dir`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// As if the directory were `/`: a process's root. Absolute symlinks
    /// and `..` stay inside it.
    Root,
    /// Only below the directory; a link or `..` out of it fails.
    Beneath,
}

/// A directory that paths are resolved in.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    scope: Scope,
}

impl Dir {
    /// Opens `path` (absolute, resolved normally: it is ours, e.g.
    /// `/proc/PID/root` or `/usr/lib/debug`) as a directory to resolve in.
    pub(crate) fn open(path: &Path, scope: Scope) -> Result<Dir, OpenError> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        Ok(Dir { fd, scope })
    }

    /// The directory's own identity.
    pub(crate) fn key(&self) -> Result<FileKey, OpenError> {
        let st = fstat(&self.fd).map_err(os)?;
        Ok(key_of(&st))
    }

    /// Opens `path` (absolute or relative: both are taken from this
    /// directory) as a regular file.
    pub(crate) fn open_file(&self, path: &str) -> Result<Opened, OpenError> {
        let rel = path.trim_start_matches('/');
        if rel.is_empty() || rel.as_bytes().contains(&0) {
            return Err(OpenError::Missing);
        }
        let resolve = ResolveFlag::RESOLVE_NO_MAGICLINKS
            | match self.scope {
                Scope::Root => ResolveFlag::RESOLVE_IN_ROOT,
                Scope::Beneath => ResolveFlag::RESOLVE_BENEATH,
            };
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(resolve);
        let fd = match openat2(&self.fd, rel, how) {
            Ok(fd) => fd,
            // Before Linux 5.6 there is no openat2. The path is then
            // resolved without containment; callers that open a file a
            // process mapped compare its identity, which is what keeps a
            // planted link from naming another file.
            Err(Errno::ENOSYS) => openat(
                &self.fd,
                rel,
                OFlag::O_PATH | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(os)?,
            Err(e) => return Err(os(e)),
        };
        reopen(fd)
    }
}

/// Opens a magic link that names exactly one file, such as
/// `/proc/PID/map_files/START-END`, as a regular file.
pub(crate) fn open_magic(path: &Path) -> Result<Opened, OpenError> {
    let fd = nix::fcntl::open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty()).map_err(os)?;
    reopen(fd)
}

/// Checks that the `O_PATH` descriptor is a regular file on a filesystem
/// that cannot stall a read, then opens that same file for reading.
fn reopen(path_fd: OwnedFd) -> Result<Opened, OpenError> {
    let st = fstat(&path_fd).map_err(os)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(OpenError::NotRegular);
    }
    if fstatfs(&path_fd).map_err(os)?.filesystem_type() == FUSE_SUPER_MAGIC {
        return Err(OpenError::Fuse);
    }
    // Through our own descriptor: the same inode, whatever the path is now.
    let proc_path = CString::new(format!("/proc/self/fd/{}", path_fd.as_raw_fd()))
        .map_err(|_| OpenError::Missing)?;
    let fd = nix::fcntl::open(
        proc_path.as_c_str(),
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(os)?;
    let st2 = fstat(&fd).map_err(os)?;
    let key = key_of(&st2);
    if key != key_of(&st) {
        return Err(OpenError::Replaced);
    }
    let size = u64::try_from(st2.st_size).unwrap_or(0);
    // The version the size above is of: a file changed in between has none.
    let version = version_of(&fd).filter(|v| {
        v.0[..3] == [key.dev, key.ino, size]
            && v.0[4]
                == (st2.st_ctime as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(st2.st_ctime_nsec as u64)
    });
    Ok(Opened {
        file: File::from(fd),
        key,
        size,
        uid: st2.st_uid,
        version,
    })
}

impl Opened {
    /// Another descriptor of the same open file (its offset shared).
    pub(crate) fn try_clone(&self) -> Result<Opened, OpenError> {
        Ok(Opened {
            file: self
                .file
                .try_clone()
                .map_err(|e| OpenError::Os(Errno::from_raw(e.raw_os_error().unwrap_or(0))))?,
            key: self.key,
            size: self.size,
            uid: self.uid,
            version: self.version,
        })
    }

    /// Checks that this is the file a process mapped: the device and inode
    /// it had. Both must match: an inode number alone is easy to meet
    /// again on another filesystem. (Overlayfs, and btrfs subvolumes,
    /// report another device to `stat` than in memory maps; their files
    /// are then found only through `/proc/PID/map_files/`, while the
    /// process lives.)
    pub(crate) fn check_is(&self, mapped: FileKey) -> Result<(), OpenError> {
        if self.key == mapped {
            Ok(())
        } else {
            Err(OpenError::Replaced)
        }
    }
}

fn key_of(st: &nix::sys::stat::FileStat) -> FileKey {
    FileKey {
        dev: st.st_dev,
        ino: st.st_ino,
    }
}

fn os(e: Errno) -> OpenError {
    match e {
        Errno::ENOENT | Errno::ENOTDIR => OpenError::Missing,
        e => OpenError::Os(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};
    use std::path::PathBuf;

    use super::*;

    struct Temp(PathBuf);

    impl Temp {
        fn new(tag: &str) -> Temp {
            let dir =
                std::env::temp_dir().join(format!("offwake-open-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("root/lib")).unwrap();
            std::fs::create_dir_all(dir.join("outside")).unwrap();
            std::fs::write(dir.join("root/lib/a.so"), b"inside").unwrap();
            std::fs::write(dir.join("outside/secret"), b"outside").unwrap();
            Temp(dir)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn read(o: Opened) -> String {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut &o.file, &mut s).unwrap();
        s
    }

    #[test]
    fn links_and_dotdot_stay_inside_a_root() {
        let t = Temp::new("root");
        let outside = t.0.join("outside/secret");
        symlink(&outside, t.0.join("root/abs")).unwrap();
        symlink("../../outside/secret", t.0.join("root/lib/rel")).unwrap();
        symlink("/lib/a.so", t.0.join("root/inner")).unwrap();
        let root = Dir::open(&t.0.join("root"), Scope::Root).unwrap();
        assert_eq!(read(root.open_file("/lib/a.so").unwrap()), "inside");
        // An absolute link is taken from the root, as the process sees it.
        assert_eq!(read(root.open_file("/inner").unwrap()), "inside");
        for escape in [
            "/abs",
            "/lib/rel",
            "/../outside/secret",
            "lib/../../outside/secret",
        ] {
            assert_eq!(
                root.open_file(escape).err(),
                Some(OpenError::Missing),
                "{escape}"
            );
        }
    }

    #[test]
    fn nothing_leaves_a_beneath_directory() {
        let t = Temp::new("beneath");
        symlink("../outside/secret", t.0.join("root/up")).unwrap();
        symlink("lib/a.so", t.0.join("root/down")).unwrap();
        let dir = Dir::open(&t.0.join("root"), Scope::Beneath).unwrap();
        assert_eq!(read(dir.open_file("down").unwrap()), "inside");
        assert!(dir.open_file("up").is_err());
        assert!(dir.open_file("../outside/secret").is_err());
    }

    #[test]
    fn only_regular_files_are_opened_and_fifos_do_not_block() {
        let t = Temp::new("kinds");
        let fifo = t.0.join("root/fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        symlink("/dev/null", t.0.join("root/null")).unwrap();
        let root = Dir::open(&t.0.join("root"), Scope::Root).unwrap();
        assert_eq!(root.open_file("fifo").err(), Some(OpenError::NotRegular));
        assert_eq!(root.open_file("lib").err(), Some(OpenError::NotRegular));
        // Resolved inside the root: no /dev there.
        assert_eq!(root.open_file("null").err(), Some(OpenError::Missing));
        let own = Dir::open(Path::new("/"), Scope::Root).unwrap();
        assert_eq!(
            own.open_file("/dev/null").err(),
            Some(OpenError::NotRegular)
        );
        assert_eq!(own.open_file("").err(), Some(OpenError::Missing));
    }

    #[test]
    fn magic_links_are_refused_in_paths_but_open_when_named() {
        let own = Dir::open(Path::new("/"), Scope::Root).unwrap();
        assert!(own.open_file("/proc/self/exe").is_err());
        let exe = open_magic(Path::new("/proc/self/exe")).unwrap();
        let meta = std::fs::metadata(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(
            exe.key,
            FileKey {
                dev: meta.dev(),
                ino: meta.ino()
            }
        );
        assert_eq!(exe.size, meta.len());
        assert_eq!(exe.check_is(exe.key), Ok(()));
        let other = FileKey {
            dev: exe.key.dev,
            ino: exe.key.ino + 1,
        };
        assert_eq!(exe.check_is(other), Err(OpenError::Replaced));
        // The same inode number on another device is another file.
        let elsewhere = FileKey {
            dev: exe.key.dev + 1,
            ino: exe.key.ino,
        };
        assert_eq!(exe.check_is(elsewhere), Err(OpenError::Replaced));
    }
}
