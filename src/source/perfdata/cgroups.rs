//! A recording's cgroups (`perf record --all-cgroups`): its samples carry
//! the id of the sampled task's cgroup (`PERF_SAMPLE_CGROUP`), and its
//! `PERF_RECORD_CGROUP` records name the ids: perf writes one for every
//! cgroup that exists when it starts, the kernel one for every cgroup
//! created while it records. The records are read as the view walks them
//! ([`super::cut`]), before the first event is: so `--cgroup` is resolved
//! against the recording's paths, and a cgroup is named before its first
//! switch-out. The ids are the recording machine's: nothing of this
//! machine's hierarchy names them.
//!
//! The paths are the file's data: bounded in length and number, each a
//! path of plain names from `/`, in UTF-8, and escaped wherever printed.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};

use crate::diag::counted;
use crate::plan::{CgroupTable, is_cgroup_rel};

/// `PERF_RECORD_CGROUP`: `u64 id`, the path NUL-terminated and padded
/// to 8 bytes, then the sample_id trailer.
pub(super) const RECORD_CGROUP: u32 = 19;

/// The longest path taken (the kernel's `PATH_MAX`).
const MAX_PATH: usize = 4096;

/// The most cgroups named.
const MAX_CGROUPS: usize = 1_000_000;

/// The most bytes of paths kept, in all.
const MAX_BYTES: usize = 64 << 20;

/// The `perf record` command whose file names its cgroups.
pub(crate) const RECORD_CGROUPS_COMMAND: &str = "perf record -e sched:sched_switch -e \
     sched:sched_waking -a -g --buildid-all --all-cgroups -- sleep 10";

/// The cgroups a recording names, as its records were walked.
#[derive(Debug, Default)]
pub(super) struct CgroupRecords {
    names: CgroupTable,
    /// Records that name no cgroup (cut short, with no NUL within
    /// [`MAX_PATH`] bytes, or a path that is not a cgroup's): skipped.
    malformed: u64,
    /// Cgroups past [`MAX_CGROUPS`] or [`MAX_BYTES`]: left unnamed.
    past_bound: u64,
    bytes: usize,
}

impl CgroupRecords {
    /// Takes in the body of one `PERF_RECORD_CGROUP` (what follows its
    /// 8-byte header). An id named twice keeps its first path.
    pub(super) fn add(&mut self, body: &[u8]) {
        let Some((id, path)) = parse(body) else {
            self.malformed += 1;
            return;
        };
        if self.names.contains_key(&id) {
            return;
        }
        if self.names.len() >= MAX_CGROUPS || self.bytes + path.len() > MAX_BYTES {
            self.past_bound += 1;
            return;
        }
        self.bytes += path.len();
        self.names.insert(id, Arc::from(path));
    }
}

/// The id and path of the body of a `PERF_RECORD_CGROUP`; `None` when it
/// is cut short, when no NUL ends the path within [`MAX_PATH`] bytes, or
/// when the path is not UTF-8 or not a cgroup's ([`is_cgroup_rel`]).
pub(super) fn parse(body: &[u8]) -> Option<(u64, &str)> {
    let (id, rest) = body.split_first_chunk::<8>()?;
    let window = &rest[..rest.len().min(MAX_PATH + 1)];
    let end = window.iter().position(|&b| b == 0)?;
    let path = std::str::from_utf8(&window[..end]).ok()?;
    is_cgroup_rel(path).then_some((u64::from_le_bytes(*id), path))
}

/// What a run asks of a recording's cgroups: `needed_by` names the
/// option that cannot go without them (`--cgroup`, `--per-cgroup`), else
/// they are only a pprof report's labels, and go without a word when the
/// recording has none. `ids`: its `sched_switch` samples carry cgroup ids.
/// The names, if any, and a warning of the records that named none.
pub(super) fn names_for(
    records: CgroupRecords,
    ids: bool,
    needed_by: Option<&str>,
    path: &Path,
) -> Result<(Option<CgroupTable>, Option<String>)> {
    let shown = path.display();
    if !ids {
        if let Some(option) = needed_by {
            bail!(
                "{shown} has no cgroup ids, which {option} needs: its sched:sched_switch \
                 samples were recorded without them (perf record --all-cgroups); record it \
                 with:\n    {RECORD_CGROUPS_COMMAND}"
            );
        }
        return Ok((None, None));
    }
    if records.names.is_empty() {
        if let Some(option) = needed_by {
            let skipped = match records.malformed {
                0 => String::new(),
                n => format!(
                    " ({} skipped)",
                    counted(n, "malformed one", "malformed ones")
                ),
            };
            bail!(
                "{shown} does not name its cgroups, which {option} needs: its samples carry \
                 cgroup ids, but it has no PERF_RECORD_CGROUP record{skipped}; record it \
                 with:\n    {RECORD_CGROUPS_COMMAND}"
            );
        }
        return Ok((None, None));
    }
    let mut unnamed = Vec::new();
    if records.malformed > 0 {
        unnamed.push(format!(
            "{} skipped",
            counted(
                records.malformed,
                "record that names no cgroup was",
                "records that name no cgroup were"
            )
        ));
    }
    if records.past_bound > 0 {
        unnamed.push(format!(
            "{} past the first {MAX_CGROUPS} (or {} MiB of paths) left unnamed",
            counted(records.past_bound, "cgroup was", "cgroups were"),
            MAX_BYTES >> 20
        ));
    }
    let note = (!unnamed.is_empty()).then(|| {
        format!(
            "WARNING: {shown}: {}; their threads' samples show an unknown cgroup",
            unnamed.join(", and ")
        )
    });
    Ok((Some(records.names), note))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of a `PERF_RECORD_CGROUP` as the kernel writes it: `id`,
    /// `path` with its NUL, padded to 8 bytes, then a trailer.
    fn body(id: u64, path: &[u8]) -> Vec<u8> {
        let mut b = id.to_le_bytes().to_vec();
        b.extend_from_slice(path);
        b.push(0);
        b.resize(b.len().next_multiple_of(8), 0);
        b.extend_from_slice(&[0xAA; 24]);
        b
    }

    #[test]
    fn a_cgroup_record_names_its_id() {
        assert_eq!(parse(&body(1, b"/")), Some((1, "/")));
        assert_eq!(
            parse(&body(4242, b"/system.slice/a b;c.service")),
            Some((4242, "/system.slice/a b;c.service"))
        );
        // Exactly filling its 8 bytes, the NUL in the next word.
        assert_eq!(parse(&body(7, b"/abcdef")), Some((7, "/abcdef")));
    }

    #[test]
    fn a_cut_short_or_unterminated_record_names_nothing() {
        let good = body(9, b"/a/b");
        assert_eq!(parse(&good[..7]), None);
        assert_eq!(parse(&good[..8]), None);
        // Cut inside the path: no NUL.
        assert_eq!(parse(&good[..11]), None);
        let mut no_nul = 9u64.to_le_bytes().to_vec();
        no_nul.extend_from_slice(b"/a/b/c/d");
        assert_eq!(parse(&no_nul), None);
    }

    #[test]
    fn a_path_that_is_no_cgroup_s_is_refused() {
        for bad in [
            &b""[..],
            b"relative",
            b"/a//b",
            b"/a/",
            b"/a/../../etc",
            b"/./a",
            b"/a\xffb",
            b"/\xc3",
        ] {
            assert_eq!(parse(&body(3, bad)), None, "{bad:?}");
        }
        // Names are data: control characters and quotes stay, to be
        // escaped where printed.
        assert_eq!(
            parse(&body(3, b"/evil\n0::/x\x1b[2J'\"")),
            Some((3, "/evil\n0::/x\x1b[2J'\""))
        );
    }

    #[test]
    fn a_huge_path_is_refused_and_the_table_is_bounded() {
        let mut long = vec![b'/'];
        long.extend(std::iter::repeat_n(b'x', MAX_PATH - 1));
        assert_eq!(parse(&body(5, &long)).map(|(_, p)| p.len()), Some(MAX_PATH));
        long.push(b'x');
        assert_eq!(parse(&body(5, &long)), None);
        // A NUL far past the bound is not looked for.
        let mut far = 5u64.to_le_bytes().to_vec();
        far.push(b'/');
        far.extend(std::iter::repeat_n(b'y', 60_000));
        far.push(0);
        assert_eq!(parse(&far), None);

        let mut r = CgroupRecords::default();
        r.add(&body(1, b"/a"));
        r.add(&body(1, b"/b"));
        r.add(&body(2, b"/a\xff"));
        r.add(&[1, 2, 3]);
        assert_eq!(r.names.len(), 1);
        assert_eq!(r.names[&1].as_ref(), "/a");
        assert_eq!(r.malformed, 2);
        r.bytes = MAX_BYTES - MAX_PATH - 1;
        r.add(&body(3, &long[..MAX_PATH]));
        r.add(&body(4, &long[..MAX_PATH]));
        r.add(&body(5, b"/z"));
        assert_eq!((r.names.len(), r.past_bound), (2, 2));
        for id in 6..(MAX_CGROUPS as u64 + 10) {
            r.names.insert(id, Arc::from("/n"));
        }
        r.bytes = 0;
        r.add(&body(1 << 40, b"/late"));
        assert_eq!(r.past_bound, 3);
        assert!(!r.names.contains_key(&(1 << 40)));
    }

    fn err(records: CgroupRecords, ids: bool, option: &str) -> String {
        let path = Path::new("/tmp/rec.data");
        format!(
            "{:#}",
            names_for(records, ids, Some(option), path).unwrap_err()
        )
    }

    #[test]
    fn a_recording_without_cgroup_ids_is_refused_with_the_command() {
        let e = err(CgroupRecords::default(), false, "--cgroup");
        assert!(
            e.starts_with("/tmp/rec.data has no cgroup ids, which --cgroup needs"),
            "{e}"
        );
        assert!(
            e.ends_with(&format!("\n    {RECORD_CGROUPS_COMMAND}")),
            "{e}"
        );
        let e = err(CgroupRecords::default(), false, "--per-cgroup");
        assert!(e.contains("which --per-cgroup needs"), "{e}");
        // pprof's labels go without.
        let path = Path::new("/tmp/rec.data");
        let (names, note) = names_for(CgroupRecords::default(), false, None, path).unwrap();
        assert!(names.is_none() && note.is_none());
    }

    #[test]
    fn a_recording_that_names_no_cgroup_is_refused() {
        let mut r = CgroupRecords::default();
        r.add(b"short");
        let e = err(r, true, "--per-cgroup");
        assert!(
            e.starts_with(
                "/tmp/rec.data does not name its cgroups, which --per-cgroup needs: its samples \
                 carry cgroup ids, but it has no PERF_RECORD_CGROUP record (1 malformed one \
                 skipped)"
            ),
            "{e}"
        );
        let path = Path::new("/tmp/rec.data");
        let (names, _) = names_for(CgroupRecords::default(), true, None, path).unwrap();
        assert!(names.is_none());
        let mut r = CgroupRecords::default();
        r.add(&body(8, b"/x"));
        r.add(b"bad");
        let (names, note) = names_for(r, true, Some("--cgroup"), path).unwrap();
        assert_eq!(names.unwrap()[&8].as_ref(), "/x");
        let note = note.unwrap();
        assert!(
            note.contains(": 1 record that names no cgroup was skipped;"),
            "{note}"
        );
    }

    #[test]
    fn the_cgroups_command_is_the_record_command_with_all_cgroups() {
        assert_eq!(
            RECORD_CGROUPS_COMMAND,
            super::super::RECORD_COMMAND.replace(" -- ", " --all-cgroups -- ")
        );
    }
}
