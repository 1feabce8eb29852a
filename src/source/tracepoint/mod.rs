//! Tracepoints as tracefs describes them, for both sources: finding (or
//! mounting) tracefs, reading event ids and `format` files ([`format`]),
//! and reading the sched tracepoints' fields ([`sched`]).

pub(crate) mod format;
pub(crate) mod sched;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

pub(crate) use format::{EventFormat, Field, FieldError};

/// Where tracefs is mounted on current systems, and where we mount it.
pub(crate) const DEFAULT_MOUNT: &str = "/sys/kernel/tracing";
/// The legacy place: tracefs auto-mounted under debugfs.
pub(crate) const DEBUGFS_MOUNT: &str = "/sys/kernel/debug/tracing";

/// A located tracefs mount.
#[derive(Clone, Debug)]
pub(crate) struct Tracefs {
    root: PathBuf,
}

impl Tracefs {
    /// Finds tracefs through the mount table (`/proc/self/mounts`), then the
    /// usual places (`/sys/kernel/tracing`, `/sys/kernel/debug/tracing`).
    /// When none is mounted and we are root, mounts it at
    /// `/sys/kernel/tracing`; otherwise fails with a message that says what
    /// to do.
    pub(crate) fn open() -> Result<Tracefs> {
        let mut unreadable: Vec<PathBuf> = Vec::new();
        let mut check = |p: &Path| -> bool {
            match probe(p) {
                Probe::Tracefs => true,
                Probe::Unreadable => {
                    if !unreadable.iter().any(|u| u == p) {
                        unreadable.push(p.to_path_buf());
                    }
                    false
                }
                Probe::Absent => false,
            }
        };
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
            for mp in tracefs_mount_points(&mounts) {
                if check(&mp) {
                    return Ok(Tracefs::at(mp));
                }
            }
        }
        for candidate in [DEFAULT_MOUNT, DEBUGFS_MOUNT] {
            // Touching the debugfs path automounts tracefs on kernels that
            // do so; `events/` is only present in a mounted tracefs.
            if check(Path::new(candidate)) {
                return Ok(Tracefs::at(candidate));
            }
        }
        if let Some(p) = unreadable.first() {
            bail!(
                "tracefs at {} is not accessible (permission denied): run offwake-perf as root",
                p.display()
            );
        }

        if !nix::unistd::geteuid().is_root() {
            bail!(
                "tracefs is not mounted (no `tracefs` in /proc/self/mounts, nothing at {DEFAULT_MOUNT} \
                 or {DEBUGFS_MOUNT}); mount it as root with \
                 `mount -t tracefs nodev {DEFAULT_MOUNT}`, or run offwake-perf as root \
                 so that it mounts it itself"
            );
        }

        nix::mount::mount(
            Some("nodev"),
            DEFAULT_MOUNT,
            Some("tracefs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .map_err(|e| {
            anyhow!(
                "tracefs is not mounted and mounting it at {DEFAULT_MOUNT} failed: {e} \
                 (is the kernel built with CONFIG_TRACING? does {DEFAULT_MOUNT} exist?); \
                 try `mount -t tracefs nodev {DEFAULT_MOUNT}`"
            )
        })?;
        if !looks_like_tracefs(Path::new(DEFAULT_MOUNT)) {
            bail!("mounted tracefs at {DEFAULT_MOUNT}, but it has no `events` directory");
        }
        Ok(Tracefs::at(DEFAULT_MOUNT))
    }

    /// The fixture tree under `tests/fixtures/tracefs`: this kernel's
    /// format files, for unit tests.
    #[cfg(test)]
    pub(crate) fn fixtures() -> Tracefs {
        Tracefs::at(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/tracefs"
        ))
    }

    /// A tracefs rooted at `root` (tests use a directory of fixtures).
    pub(crate) fn at(root: impl Into<PathBuf>) -> Tracefs {
        Tracefs { root: root.into() }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Reads and parses `events/<system>/<name>/format` (which includes the id).
    pub(crate) fn event_format(&self, system: &str, name: &str) -> Result<EventFormat> {
        let path = self
            .root
            .join("events")
            .join(system)
            .join(name)
            .join("format");
        let text = match read_file(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                bail!(
                    "the kernel lacks the tracepoint {system}:{name} ({} does not exist; \
                     is the kernel built with the scheduler tracepoints, CONFIG_TRACEPOINTS \
                     and CONFIG_EVENT_TRACING?)",
                    path.display()
                )
            }
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                bail!(
                    "cannot read {}: permission denied; run as root (tracefs is usually \
                     readable by root only)",
                    path.display()
                )
            }
            Err(e) => {
                return Err(e).with_context(|| format!("reading {}", path.display()));
            }
        };
        let fmt =
            EventFormat::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
        if fmt.name != name {
            bail!(
                "{} describes event `{}`, expected `{name}`",
                path.display(),
                fmt.name
            );
        }
        Ok(fmt)
    }
}

/// Reads a whole tracefs file with one large buffer. Some of them (e.g.
/// `events/header_page`) are produced in one piece per read call: read in
/// small chunks, as `std::fs::read_to_string` does for files that report
/// size 0, they end after the first chunk.
pub(crate) fn read_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))
}

fn looks_like_tracefs(p: &Path) -> bool {
    p.join("events").is_dir()
}

enum Probe {
    Tracefs,
    Unreadable,
    Absent,
}

fn probe(p: &Path) -> Probe {
    match std::fs::metadata(p.join("events")) {
        Ok(m) if m.is_dir() => Probe::Tracefs,
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Probe::Unreadable,
        _ => Probe::Absent,
    }
}

/// Mount points of every `tracefs` line in a `/proc/self/mounts` text, in
/// order, with the kernel's octal escapes (`\040` for a space…) decoded.
pub(crate) fn tracefs_mount_points(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let _source = it.next()?;
            let mount_point = it.next()?;
            let fstype = it.next()?;
            (fstype == "tracefs").then(|| PathBuf::from(unescape_mount_field(mount_point)))
        })
        .collect()
}

fn unescape_mount_field(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if v <= 255 {
                out.push(v as u8);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_table_parsing() {
        let mounts = "sysfs /sys sysfs rw,nosuid 0 0\n\
                      nodev /sys/kernel/tracing tracefs rw,relatime 0 0\n\
                      debugfs /sys/kernel/debug debugfs rw 0 0\n\
                      tracefs /mnt/my\\040trace tracefs rw 0 0\n\
                      garbage\n";
        assert_eq!(
            tracefs_mount_points(mounts),
            vec![
                PathBuf::from("/sys/kernel/tracing"),
                PathBuf::from("/mnt/my trace")
            ]
        );
        assert!(tracefs_mount_points("proc /proc proc rw 0 0\n").is_empty());
        assert_eq!(unescape_mount_field("a\\134b\\"), "a\\b\\");
    }

    #[test]
    fn event_format_from_fixtures() {
        let t = Tracefs::fixtures();
        let sw = t.event_format("sched", "sched_switch").unwrap();
        assert_eq!(sw.name, "sched_switch");
        let wk = t.event_format("sched", "sched_waking").unwrap();
        assert_eq!(wk.name, "sched_waking");
        assert_ne!(sw.id, wk.id);
    }

    #[test]
    fn missing_event_says_kernel_lacks_tracepoint() {
        let err = Tracefs::fixtures()
            .event_format("sched", "no_such_event")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("lacks the tracepoint sched:no_such_event"),
            "{err}"
        );
    }

    #[test]
    fn open_finds_a_tracefs_when_root() {
        // Only meaningful where tracefs exists or can be mounted.
        if !crate::live_gate::live_allowed("open_finds_a_tracefs_when_root") {
            return;
        }
        let t = Tracefs::open().unwrap();
        assert!(t.root().join("events").is_dir());
        let sw = t.event_format("sched", "sched_switch").unwrap();
        sw.field("prev_pid").unwrap();
    }
}
