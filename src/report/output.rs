//! Where the report goes: stdout, or a file (`-o FILE`) written through a
//! temporary file in the same directory and renamed over FILE at the end,
//! so that FILE never holds half a report, whatever stops the run. A FILE
//! that is a link is followed to the file it names; one that is a FIFO, a
//! device or a socket (`/dev/null`, `>(cmd)`) is written to as it is, as a
//! shell's `>` would, never replaced.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The report's destination.
pub(crate) enum Output {
    /// False once stdout turned out to be a closed pipe (`| head`): the
    /// run goes on and ends as it would have, writing nothing more there.
    Stdout { open: bool },
    File {
        file: BufWriter<File>,
        tmp: PathBuf,
        path: PathBuf,
    },
    /// A FIFO, device or socket, written to directly.
    Special {
        file: BufWriter<File>,
        path: PathBuf,
    },
}

impl Output {
    /// Stdout for `None`; else a temporary file beside the regular file
    /// `path` is or names (through links), or `path` itself when it is a
    /// FIFO, device or socket. A directory is refused.
    pub(crate) fn open(path: Option<&Path>) -> Result<Output> {
        let Some(path) = path else {
            return Ok(Output::Stdout { open: true });
        };
        let shown = path.display();
        let path = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => bail!("-o {shown} is a directory"),
            Ok(m) if !m.is_file() => {
                // No O_CREAT: it is there, and stays what it is.
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .with_context(|| format!("opening {shown}"))?;
                return Ok(Output::Special {
                    file: BufWriter::new(file),
                    path: path.to_path_buf(),
                });
            }
            // The report replaces the file the links lead to, not a link.
            Ok(_) => std::fs::canonicalize(path).with_context(|| format!("resolving {shown}"))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    bail!("-o {shown} is a link to nothing");
                }
                path.to_path_buf()
            }
            Err(e) => return Err(e).with_context(|| format!("-o {shown}")),
        };
        let name = path
            .file_name()
            .with_context(|| format!("{}: not a file name", path.display()))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        // create_new: never an existing file, nor a link planted there.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("creating a temporary file for {}", path.display()))?;
        Ok(Output::File {
            file: BufWriter::new(file),
            tmp,
            path,
        })
    }

    /// The regular file the report goes to, if it goes to one.
    pub(crate) fn regular_path(&self) -> Option<&Path> {
        match self {
            Output::File { path, .. } => Some(path),
            Output::Stdout { .. } | Output::Special { .. } => None,
        }
    }

    /// False once stdout is a closed pipe.
    pub(crate) fn is_open(&self) -> bool {
        match self {
            Output::Stdout { open } => *open,
            Output::File { .. } | Output::Special { .. } => true,
        }
    }

    /// Lets `write` write to the output: a closed stdout only marks the
    /// output closed.
    pub(crate) fn write_with(
        &mut self,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        match self {
            Output::Stdout { open: false } => Ok(()),
            Output::Stdout { open } => {
                let mut out = io::stdout().lock();
                let mut buffered = BufWriter::new(&mut out);
                let written = write(&mut buffered).and_then(|()| buffered.flush());
                drop(buffered);
                match written {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                        *open = false;
                        Ok(())
                    }
                    Err(e) => Err(e).context("writing to stdout"),
                }
            }
            Output::File { file, tmp, .. } => {
                write(file).with_context(|| format!("writing {}", tmp.display()))
            }
            Output::Special { file, path } => {
                write(file).with_context(|| format!("writing {}", path.display()))
            }
        }
    }

    /// Makes the report visible: a file is flushed and renamed over its
    /// path.
    pub(crate) fn finish(mut self) -> Result<()> {
        if let Output::Special { file, path } = &mut self {
            file.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Output::File { file, tmp, path } = &mut self {
            file.flush()
                .and_then(|()| file.get_ref().sync_all())
                .with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&*tmp, &*path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
            // Renamed: nothing left to remove.
            tmp.clear();
        }
        Ok(())
    }
}

impl Drop for Output {
    /// A report never finished leaves no temporary file behind.
    fn drop(&mut self) {
        if let Output::File { tmp, .. } = self
            && !tmp.as_os_str().is_empty()
        {
            let _ = std::fs::remove_file(&*tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("offwake-out-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_file_appears_whole_at_the_end() {
        let dir = scratch("whole");
        let path = dir.join("report.txt");
        std::fs::write(&path, "old report\n").unwrap();
        let mut out = Output::open(Some(&path)).unwrap();
        out.write_with(|w| w.write_all(b"header\n")).unwrap();
        out.write_with(|w| w.write_all(b"body\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old report\n");
        assert_eq!(entries(&dir).len(), 2, "the temporary file beside it");
        out.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "header\nbody\n");
        assert_eq!(entries(&dir), ["report.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unfinished_report_leaves_the_old_file_and_no_temporary() {
        let dir = scratch("unfinished");
        let path = dir.join("report.txt");
        std::fs::write(&path, "old report\n").unwrap();
        let mut out = Output::open(Some(&path)).unwrap();
        out.write_with(|w| w.write_all(b"half")).unwrap();
        drop(out);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old report\n");
        assert_eq!(entries(&dir), ["report.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn special_files_are_written_to_and_links_followed() {
        let dir = scratch("special");
        // A device: written to, and still a device.
        let mut out = Output::open(Some(Path::new("/dev/null"))).unwrap();
        out.write_with(|w| w.write_all(b"report\n")).unwrap();
        out.finish().unwrap();
        use std::os::unix::fs::FileTypeExt;
        let null = std::fs::metadata("/dev/null").unwrap().file_type();
        assert!(null.is_char_device());
        assert_eq!(entries(&dir), Vec::<String>::new());
        // A link to a file: the file gets the report, the link stays.
        let target = dir.join("target.txt");
        std::fs::write(&target, "old\n").unwrap();
        let link = dir.join("link.txt");
        std::os::unix::fs::symlink("target.txt", &link).unwrap();
        let mut out = Output::open(Some(&link)).unwrap();
        out.write_with(|w| w.write_all(b"new\n")).unwrap();
        out.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(entries(&dir), ["link.txt", "target.txt"]);
        // A FIFO, with a reader: written to, and still a FIFO.
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let mut out = Output::open(Some(&fifo)).unwrap();
        out.write_with(|w| w.write_all(b"through\n")).unwrap();
        out.finish().unwrap();
        assert_eq!(reader.join().unwrap(), "through\n");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        // A directory, or a link to nothing: refused before anything.
        let e = Output::open(Some(&dir)).err().expect("an error");
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
        let dangling = dir.join("dangling");
        std::os::unix::fs::symlink("nowhere", &dangling).unwrap();
        let e = Output::open(Some(&dangling)).err().expect("an error");
        assert!(format!("{e:#}").contains("link to nothing"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_path() {
        let e = Output::open(Some(Path::new("/nonexistent-dir/x.txt")))
            .err()
            .expect("an error");
        assert!(format!("{e:#}").contains("/nonexistent-dir/x.txt"), "{e:#}");
    }
}
