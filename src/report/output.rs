//! Where the report goes: stdout, or a file (`-o FILE`) written through a
//! temporary file in the same directory and renamed over FILE at the end,
//! so that FILE never holds half a report, whatever stops the run.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

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
}

impl Output {
    /// Stdout for `None`, else a temporary file beside `path`.
    pub(crate) fn open(path: Option<&Path>) -> Result<Output> {
        let Some(path) = path else {
            return Ok(Output::Stdout { open: true });
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
            path: path.to_path_buf(),
        })
    }

    /// False once stdout is a closed pipe.
    pub(crate) fn is_open(&self) -> bool {
        match self {
            Output::Stdout { open } => *open,
            Output::File { .. } => true,
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
        }
    }

    /// Makes the report visible: a file is flushed and renamed over its
    /// path.
    pub(crate) fn finish(mut self) -> Result<()> {
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
    fn a_missing_directory_is_an_error_naming_the_path() {
        let e = Output::open(Some(Path::new("/nonexistent-dir/x.txt")))
            .err()
            .expect("an error");
        assert!(format!("{e:#}").contains("/nonexistent-dir/x.txt"), "{e:#}");
    }
}
