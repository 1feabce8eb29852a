//! The tool's cache directory (`$XDG_CACHE_HOME/offwake-perf/`, else
//! `~/.cache/offwake-perf/`), opened only when neither it nor any
//! directory above it could have been written by another user, and its
//! small files, each written through a temporary file renamed into place,
//! mode 0600. The kernel's symbol tables (`crate::kallsyms::cache`), the
//! symbolizer's names and the perf backend's kernel facts live in it.

use std::ffi::{CStr, CString, OsStr};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstat, mkdirat};

/// The cache directory, opened and checked.
#[derive(Debug)]
pub(crate) struct CacheDir(OwnedFd);

impl CacheDir {
    /// `$XDG_CACHE_HOME/offwake-perf`, else `$HOME/.cache/offwake-perf`,
    /// created (mode 0700) when missing; `None` when neither variable is
    /// set to an absolute path or the directory is not safe to use.
    pub(crate) fn open() -> Option<CacheDir> {
        // Relative paths are ignored, as the XDG specification asks.
        let var = |name| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        // Only `offwake-perf`, and `.cache` under $HOME, are created: a
        // mistyped variable makes no directories elsewhere.
        let (base, creatable) = match (var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(x), _) => (x, 1),
            (None, Some(h)) => (h.join(".cache"), 2),
            (None, None) => return None,
        };
        let root = openat(
            nix::fcntl::AT_FDCWD,
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        CacheDir::open_under(root, &base.join("offwake-perf"), creatable).ok()
    }

    /// The directory `dir` itself (mode 0700, this user's), for tests.
    #[cfg(test)]
    pub(crate) fn at(dir: &Path) -> Result<CacheDir> {
        let fd = openat(
            nix::fcntl::AT_FDCWD,
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .context("opening the directory")?;
        trusted(&fd)?;
        Ok(CacheDir(fd))
    }

    /// `path` (absolute, or relative to `root`) under the trusted directory
    /// `root`: every directory on the way must belong to root or to this
    /// user, be writable by no one else and not be on a FUSE filesystem
    /// (whose server, a process, says what it likes and may never answer).
    /// The last `creatable` components are created (mode 0700) if missing.
    pub(crate) fn open_under(root: OwnedFd, path: &Path, creatable: usize) -> Result<CacheDir> {
        let mut dir = root;
        trusted(&dir).context("the starting directory")?;
        let count = path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count();
        let mut seen = 0;
        for component in path.components() {
            let name: &OsStr = match component {
                Component::RootDir | Component::CurDir => continue,
                Component::Normal(name) => name,
                Component::ParentDir | Component::Prefix(_) => {
                    bail!("{} has a `..`", path.display())
                }
            };
            seen += 1;
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let next = match openat(&dir, name, flags, Mode::empty()) {
                Err(Errno::ENOENT) if seen + creatable > count => {
                    match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(e).context("creating the cache directory"),
                    }
                    openat(&dir, name, flags, Mode::empty())
                }
                other => other,
            }
            .with_context(|| format!("opening {}", name.to_string_lossy()))?;
            trusted(&next).with_context(|| name.to_string_lossy().into_owned())?;
            dir = next;
        }
        Ok(CacheDir(dir))
    }

    /// File `name` of the directory, opened if it is a regular file of
    /// this user's, mode 0600 (no access for others), at most `max`
    /// bytes long.
    pub(crate) fn open_own(&self, name: &str, max: u64) -> Option<OwnedFd> {
        let file = openat(
            &self.0,
            name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let st = fstat(&file).ok()?;
        let me = nix::unistd::geteuid().as_raw();
        let regular = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG;
        if !regular || st.st_uid != me || st.st_mode & 0o077 != 0 || st.st_size as u64 > max {
            return None;
        }
        Some(file)
    }

    /// A small file of the cache (at most `max` bytes), checked as the
    /// tables' file is.
    pub(crate) fn read_small(&self, name: &str, max: u64) -> Option<Vec<u8>> {
        let file = self.open_own(name, max)?;
        let mut bytes = Vec::new();
        std::fs::File::from(file)
            .take(max)
            .read_to_end(&mut bytes)
            .ok()?;
        Some(bytes)
    }

    /// Marks file `name` as written now (its modification time, which
    /// [`CacheDir::prune`] goes by); best effort.
    pub(crate) fn touch(&self, name: &str) {
        let now = nix::sys::time::TimeSpec::UTIME_NOW;
        let _ = nix::sys::stat::utimensat(
            &self.0,
            name,
            &now,
            &now,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        );
    }

    /// Removes the files whose names begin with `prefix`, least recently
    /// written first, until at most `keep` are left; best effort.
    pub(crate) fn prune(&self, prefix: &str, keep: usize) {
        let names = self.names(|n| n.to_bytes().starts_with(prefix.as_bytes()), usize::MAX);
        if names.len() <= keep {
            return;
        }
        let mut dated: Vec<(i64, i64, CString)> = names
            .into_iter()
            .filter_map(|n| {
                let st = nix::sys::stat::fstatat(
                    &self.0,
                    n.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .ok()?;
                Some((st.st_mtime, st.st_mtime_nsec, n))
            })
            .collect();
        dated.sort_unstable();
        let excess = dated.len().saturating_sub(keep);
        for (_, _, name) in dated.into_iter().take(excess) {
            let _ = nix::unistd::unlinkat(
                &self.0,
                name.as_c_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }

    /// The names of at most `max` files that begin with `prefix`.
    pub(crate) fn names_with(&self, prefix: &str, max: usize) -> Vec<String> {
        self.names(|n| n.to_str().is_ok_and(|n| n.starts_with(prefix)), max)
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect()
    }

    /// The names of at most `max` files of the directory that `keep`
    /// keeps; none when it cannot be read.
    fn names(&self, mut keep: impl FnMut(&CStr) -> bool, max: usize) -> Vec<CString> {
        let Ok(mut dir) = nix::dir::Dir::openat(
            &self.0,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        dir.iter()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_owned())
            .filter(|n| keep(n))
            .take(max)
            .collect()
    }

    /// Removes file `name`; best effort.
    pub(crate) fn remove(&self, name: &str) {
        let _ = nix::unistd::unlinkat(&self.0, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
    }

    /// Replaces small file `name` with `bytes` at once: written to a
    /// temporary file, mode 0600, renamed into place.
    pub(crate) fn write_small(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        // One left by a run killed while writing, whose pid this is now.
        let _ = nix::unistd::unlinkat(
            &self.0,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        let fd = openat(
            &self.0,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .with_context(|| format!("creating {tmp} in the cache directory"))?;
        let written = std::fs::File::from(fd)
            .write_all(bytes)
            .context("writing it")
            .and_then(|()| {
                nix::fcntl::renameat(&self.0, tmp.as_str(), &self.0, name)
                    .with_context(|| format!("renaming it to {name}"))
            });
        if written.is_err() {
            let _ = nix::unistd::unlinkat(
                &self.0,
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        written
    }

    /// The directory's descriptor.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// A directory this user may rely on: owned by root or by this user, and
/// writable by no other, or root's and sticky (as `/tmp` is: no one else
/// can then replace what this user made in it).
fn trusted(dir: &impl AsFd) -> Result<()> {
    let st = fstat(dir.as_fd())?;
    let me = nix::unistd::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me {
        bail!("owned by another user (uid {})", st.st_uid);
    }
    if nix::sys::statfs::fstatfs(dir.as_fd())?.filesystem_type()
        == nix::sys::statfs::FUSE_SUPER_MAGIC
    {
        bail!("on a FUSE filesystem");
    }
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    if st.st_mode & 0o022 != 0 && !(sticky && st.st_uid == 0) {
        bail!("writable by others (mode {:o})", st.st_mode & 0o7777);
    }
    Ok(())
}
