//! The recorded source (`-i FILE`): a perf.data written by stock
//! `perf record` of `sched:sched_switch` and `sched:sched_waking` with
//! callchains. mstange's `linux-perf-data` reads the file's header,
//! attributes and feature sections and hands its records over in time
//! order; each record's bytes then go through the live perf backend's own
//! decoder, so a recording is paired, filtered and symbolized as a live
//! trace of the whole system is.
//!
//! Its errors never quote the file: a file that is not a perf.data may
//! be any file the user can name, so what it is not is said in words.

mod cgroups;
mod cut;
mod events;
mod tracing;

use std::collections::HashMap;
use std::io::BufReader;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use linux_perf_data::{
    DsoKey, Endianness, Feature, PerfFile, PerfFileReader, PerfFileRecord, PerfRecordIter,
};

use self::cgroups::CgroupRecords;
use self::cut::{DataCut, Repair, View};
use crate::diag::counted;
use crate::diag::escape::{Place, escape};
use crate::event::Span;
use crate::event::{EventKind, EventSink, SourceStats};
use crate::kallsyms::Preload;
use crate::plan::{CgroupTable, CgroupUse};
use crate::source::perf::record::Decoder;
use crate::source::perf::sys::{RECORD_SAMPLE, SAMPLE_CGROUP, SAMPLE_STACK_USER};
use crate::source::tracepoint::sched::SchedFields;
use crate::source::tracepoint::{EventFormat, Tracefs};

/// The `perf record` command whose file this source reads.
pub(crate) const RECORD_COMMAND: &str =
    "perf record -e sched:sched_switch -e sched:sched_waking -a -g --buildid-all -- sleep 10";

/// Records decoded per [`RecordedSource::read`], between checks for a
/// signal.
const BATCH: usize = 4096;

/// An open recording, read in batches.
pub(crate) struct RecordedSource {
    path: PathBuf,
    file: PerfFile,
    records: PerfRecordIter<BufReader<View>>,
    /// The decoders of the file's record layouts: the two tracepoints'
    /// samples, and the side-band records perf's other events carry.
    decoders: Vec<Decoder>,
    /// The decoder of each attribute (event), by its index.
    decoder_of: Vec<usize>,
    /// The attributes of the two tracepoints: samples of other events
    /// (recorded along) are skipped.
    sched_attrs: [usize; 2],
    /// With `--wall`, the attributes whose samples of CPU time are read.
    clock_attrs: Vec<usize>,
    /// `--wall` was asked for, and the file samples no CPU time.
    wall_unsampled: bool,
    /// Samples of other events skipped.
    other_samples: u64,
    /// The times of the first and the last record (perf's clock), for how
    /// long the recording ran.
    times: Option<(u64, u64)>,
    /// Time of the last record of each CPU, where a loss on it begins.
    last_time: HashMap<u32, u64>,
    stats: SourceStats,
    done: bool,
    /// Why the file could not be read to its end.
    cut_short: Option<String>,
    /// What of the file's header had to be set right to read it.
    repair: Repair,
    /// Where the kernel's text was (`_text`), as the file's kernel mmap
    /// record says.
    kernel_text: Option<u64>,
    /// The record being decoded, header and body (reused).
    bytes: Vec<u8>,
    /// The cgroups its records name, until taken.
    cgroups: CgroupRecords,
    /// Its `sched_switch` samples carry their task's cgroup id.
    cgroup_ids: bool,
    /// What the cgroups taken lacked.
    cgroup_note: Option<String>,
}

impl RecordedSource {
    /// Opens `path`, checks that it holds both tracepoints with callchains
    /// (else the error gives the `perf record` command that does), and
    /// reads their formats from the file, or from this machine's tracefs
    /// when the file has none. Kernel stacks are trimmed with `kallsyms`.
    /// With `wall`, its samples of CPU time are read too.
    pub(crate) fn open(
        path: &Path,
        kallsyms: Option<&Preload>,
        wall: bool,
    ) -> Result<RecordedSource> {
        let (file, records, repair, cgroups) = parse_file(path)?;
        let (switch, waking) = formats(&file, path)?;
        let attrs = file.event_attributes();
        let sched_attrs = events::sched_attrs(attrs, &switch, &waking, path)?;
        events::check_sampling(attrs, sched_attrs, path)?;
        let cgroup_ids =
            attrs[sched_attrs[0]].attributes().sample_format.bits() & SAMPLE_CGROUP != 0;
        // Without kallsyms (its reading failed, which symbolization says),
        // kernel stacks are not trimmed of tracing machinery.
        let probes = kallsyms
            .and_then(|k| k.wait().ok())
            .map(|t| t.probes.clone());
        let clocks = match wall {
            true => events::clock_attrs(attrs),
            false => Vec::new(),
        };
        let (decoders, decoder_of) = events::decoders(
            attrs,
            (sched_attrs, &clocks),
            (&switch, &waking),
            probes.as_ref(),
            path,
        )?;
        Ok(RecordedSource {
            path: path.to_path_buf(),
            file,
            records,
            decoders,
            decoder_of,
            last_time: HashMap::new(),
            stats: SourceStats::default(),
            done: false,
            cut_short: None,
            repair,
            kernel_text: None,
            bytes: Vec::new(),
            sched_attrs,
            clock_attrs: clocks.iter().map(|&(at, _)| at).collect(),
            wall_unsampled: wall && clocks.is_empty(),
            other_samples: 0,
            times: None,
            cgroups,
            cgroup_ids,
            cgroup_note: None,
        })
    }

    /// The names of the cgroup ids its samples carry, from its own
    /// cgroup records (`perf record --all-cgroups`), taken once, for
    /// `usage`: when an option cannot go without them, a recording that
    /// lacks them is an error that says how to record them; a pprof
    /// report's labels go without.
    pub(crate) fn cgroup_names(&mut self, usage: CgroupUse) -> Result<Option<CgroupTable>> {
        let records = std::mem::take(&mut self.cgroups);
        let needed_by = match usage {
            CgroupUse::None => return Ok(None),
            CgroupUse::Labels => None,
            CgroupUse::Needed(option) => Some(option),
        };
        let (names, note) = cgroups::names_for(records, self.cgroup_ids, needed_by, &self.path)?;
        self.cgroup_note = note;
        Ok(names)
    }

    /// The strings of a feature section that holds one (`OSRELEASE`) or a
    /// list (`CMDLINE`): a u32 count for a list, then for each string its
    /// u32 length and its bytes, NUL-padded. Read here, within the section,
    /// rather than by a parser that reserves what the counts say.
    fn strings(&self, feature: Feature) -> Option<Vec<String>> {
        let data = self.file.feature_section_data(feature)?;
        let mut c = crate::bytes::Cursor::new(data);
        let count = if feature == Feature::CMDLINE {
            c.u32().ok()?
        } else {
            1
        };
        let mut out = Vec::new();
        for _ in 0..count {
            let len = c.u32().ok()? as usize;
            let bytes = c.take(len).ok()?;
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            out.push(String::from_utf8_lossy(&bytes[..end]).into_owned());
        }
        Some(out)
    }

    /// The build-ids the file lists for the user-space files it saw, by
    /// path.
    pub(crate) fn build_ids(&self) -> HashMap<String, Arc<[u8]>> {
        let Ok(ids) = self.file.build_ids() else {
            return HashMap::new();
        };
        ids.into_iter()
            .filter(|(key, _)| matches!(key, DsoKey::User { .. }))
            .filter_map(|(_, info)| {
                let path = String::from_utf8(info.path).ok()?;
                Some((path, Arc::from(info.build_id)))
            })
            .collect()
    }

    /// The warning for a file recorded on another kernel release than
    /// this machine's, whose kallsyms name its kernel frames.
    pub(crate) fn other_kernel(&self) -> Option<String> {
        let recorded = self.strings(Feature::OSRELEASE)?.into_iter().next()?;
        let here = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        (recorded != here).then(|| {
            format!(
                "WARNING: {} was recorded on Linux {}, and kernel frames are named from this \
                 machine's /proc/kallsyms (Linux {here}): they may be wrong",
                self.path.display(),
                escape(recorded.as_bytes(), Place::Quoted)
            )
        })
    }

    /// True when the samples carry user stack copies to unwind (recorded
    /// with `--call-graph dwarf`).
    pub(crate) fn copies_user_stacks(&self) -> bool {
        self.decoders
            .iter()
            .any(|d| d.sample_type() & SAMPLE_STACK_USER != 0)
    }

    /// When the recording ran: as long as its records span, ending when
    /// the file was last written (perf writes it as recording ends).
    pub(crate) fn span(&self) -> Option<Span> {
        let (first, last) = self.times?;
        let duration = std::time::Duration::from_nanos(last - first);
        let written = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()?;
        Some(Span {
            start: written.checked_sub(duration)?,
            duration,
        })
    }

    /// Where the kernel's text was when recorded, as far as read.
    pub(crate) fn kernel_text(&self) -> Option<u64> {
        self.kernel_text
    }

    /// True once every record was read (or the rest could not be).
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Reads up to [`BATCH`] records into `sink`, in time order. A panic
    /// of the parser on a malformed file ends the reading, with what was
    /// read before it.
    pub(crate) fn read(&mut self, sink: &mut dyn EventSink) {
        if let Err(e) = contained(|| self.read_batch(sink)) {
            self.cut_short = Some(format!("{e:#}"));
            self.done = true;
        }
    }

    fn read_batch(&mut self, sink: &mut dyn EventSink) {
        for _ in 0..BATCH {
            let record = match self.records.next_record(&mut self.file) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    self.done = true;
                    return;
                }
                Err(e) => {
                    self.cut_short = Some(in_words(&e));
                    self.done = true;
                    return;
                }
            };
            let PerfFileRecord::EventRecord { attr_index, record } = record else {
                continue;
            };
            if record.record_type.0 == RECORD_SAMPLE
                && !self.sched_attrs.contains(&attr_index)
                && !self.clock_attrs.contains(&attr_index)
            {
                self.other_samples += 1;
                continue;
            }
            let Some(decoder) = self
                .decoder_of
                .get(attr_index)
                .and_then(|&i| self.decoders.get_mut(i))
            else {
                self.stats.malformed += 1;
                continue;
            };
            // The record as the kernel wrote it: its header, then its body.
            let body = record.data.as_slice();
            let Ok(size) = u16::try_from(body.len() + 8) else {
                self.stats.malformed += 1;
                continue;
            };
            let bytes = &mut self.bytes;
            bytes.clear();
            bytes.extend_from_slice(&record.record_type.0.to_ne_bytes());
            bytes.extend_from_slice(&record.misc.to_ne_bytes());
            bytes.extend_from_slice(&size.to_ne_bytes());
            bytes.extend_from_slice(&body);
            self.stats.records += 1;
            match decoder.decode(bytes) {
                Ok(Some(mut ev)) => {
                    if let EventKind::Mmap(m) = &ev.kind
                        && m.path.starts_with("[kernel.kallsyms]")
                    {
                        // perf gives the kernel's map the address of _text
                        // as its offset.
                        self.kernel_text = Some(m.pgoff);
                    }
                    if let EventKind::Lost(l) = ev.kind {
                        self.stats.lost_records += l.records;
                        ev.time = self
                            .last_time
                            .get(&ev.cpu)
                            .copied()
                            .unwrap_or(0)
                            .min(l.until);
                    } else {
                        self.last_time.insert(ev.cpu, ev.time);
                        // perf writes the records it synthesizes at time 0.
                        if ev.time > 0 {
                            let (first, last) = self.times.get_or_insert((ev.time, ev.time));
                            (*first, *last) = ((*first).min(ev.time), (*last).max(ev.time));
                        }
                    }
                    sink.early(&mut ev);
                    sink.event(ev);
                }
                Ok(None) => {}
                Err(_) => self.stats.malformed += 1,
            }
        }
    }

    pub(crate) fn stats(&self) -> SourceStats {
        self.stats
    }

    /// Warnings for the end of the run: a file that ended before its
    /// records did, or a read a signal stopped.
    pub(crate) fn notes(&self) -> Vec<String> {
        let shown = self.path.display();
        let read = counted(self.stats.records, "record", "records");
        let mut notes: Vec<String> = self.cgroup_note.iter().cloned().collect();
        if let Some(cmdline) = self.strings(Feature::CMDLINE)
            && !recorded_system_wide(&cmdline.iter().map(String::as_str).collect::<Vec<_>>())
        {
            notes.push(format!(
                "WARNING: {shown} was not recorded system-wide ({}): a thread's switch-in is \
                 a sched_switch in the context of the thread it replaces, which only perf \
                 record -a records, so most intervals could not be paired",
                escape(cmdline.join(" ").as_bytes(), Place::Quoted)
            ));
        }
        if self.wall_unsampled {
            notes.push(format!(
                "NOTE: {shown} has no cpu-clock samples with callchains: --wall splits each \
                 wait at its wakeup, with no on-CPU time (record one with -e \
                 cpu-clock/freq=199/ besides the tracepoints)"
            ));
        }
        if self.other_samples > 0 {
            notes.push(format!(
                "NOTE: {} of other events recorded in {shown} {} skipped",
                counted(self.other_samples, "sample", "samples"),
                if self.other_samples == 1 {
                    "was"
                } else {
                    "were"
                }
            ));
        }
        match self.repair.data {
            None => {}
            Some(DataCut::Unfinished) => notes.push(format!(
                "WARNING: {shown} is unfinished: its header does not say where its records \
                 end (perf was stopped before it wrote it); they were read to the end of the \
                 file"
            )),
            Some(DataCut::CutShort) => notes.push(format!(
                "WARNING: {shown} is cut short: its records were read up to the last whole one"
            )),
            Some(DataCut::BadRecord(at)) => notes.push(format!(
                "WARNING: {shown} has a malformed record at byte {at}: the records after it \
                 were not read"
            )),
        }
        if self.repair.features {
            notes.push(format!(
                "WARNING: the sections after the records of {shown} (event names, tracepoint \
                 formats, build-ids) are missing or malformed, so this machine's tracepoint \
                 formats were used"
            ));
        }
        notes.extend(match &self.cut_short {
            Some(why) => vec![format!(
                "WARNING: {shown} ends before its last record ({why}): the report holds the \
                 {read} before that"
            )],
            None if !self.done => vec![format!(
                "WARNING: reading {shown} was interrupted: the report holds its first {read}"
            )],
            None => Vec::new(),
        });
        notes
    }
}

/// A perf.data file's header parsed, its records to read, what of its
/// header was set right, and the cgroups its records name.
type Parsed = (
    PerfFile,
    PerfRecordIter<BufReader<View>>,
    Repair,
    CgroupRecords,
);

/// Opens `path` without blocking on a FIFO or device, checks that it is
/// a regular perf.data file of this machine's byte order, and parses its
/// header, with what of it had to be set right to read it and the
/// cgroups its records name.
fn parse_file(path: &Path) -> Result<Parsed> {
    // A FIFO or device could block the open, or be read forever.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    let shown = path.display();
    if !meta.is_file() {
        bail!("{shown}: not a regular file");
    }
    if let Some(not) = cut::identify(&f, meta.len()).with_context(|| format!("reading {shown}"))? {
        bail!("{shown} {not}");
    }
    let (mut view, repair) = View::new(f).with_context(|| format!("{shown} cannot be read"))?;
    let cgroups = view.take_cgroups();
    let PerfFileReader {
        perf_file: file,
        record_iter: records,
    } = contained(|| PerfFileReader::parse_file(BufReader::new(view)))
        .and_then(|r| r.map_err(|e| anyhow::anyhow!(in_words(&e))))
        .with_context(|| format!("{shown} is a malformed perf.data file"))?;
    if file.endian() != native_endian() {
        bail!("{shown} was recorded on a machine of another byte order");
    }
    Ok((file, records, repair, cgroups))
}

/// True when the `perf record` command line `cmdline` traced every CPU:
/// `--all-cpus`, or `-a` alone or among short options that take no value
/// (`-ag`). (perf record with no command, pid or tid is system-wide too;
/// such a file only gets a needless warning.)
fn recorded_system_wide(cmdline: &[&str]) -> bool {
    /// perf record's short options that take no value.
    const FLAGS: &str = "agqvsnRidTPNBWX";
    cmdline
        .iter()
        .take_while(|a| **a != "--")
        .any(|a| match a.strip_prefix('-') {
            Some(short) if !short.starts_with('-') => {
                short.contains('a') && short.chars().all(|c| FLAGS.contains(c))
            }
            _ => *a == "--all-cpus",
        })
}

/// Runs `f`, a call into the perf.data parser, with a panic of it (on a
/// malformed file) made an error rather than the end of the run.
fn contained<T>(f: impl FnOnce() -> T) -> Result<T> {
    let hook = std::panic::take_hook();
    // The parser's panic is reported as an error, not printed.
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    // Not the panic's message, which may quote what the parser read.
    result.map_err(|_| anyhow::anyhow!("the perf.data parser failed on it"))
}

/// What an error of the perf.data parser says is wrong with the file, in
/// words that quote none of it (its magic, say, or its values).
fn in_words(e: &linux_perf_data::Error) -> String {
    use linux_perf_data::{Error, ReadError};
    match e {
        Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "it is cut short".to_string()
        }
        // The system's own words (EIO, say), never the file's.
        Error::IoError(io) => match io.raw_os_error() {
            Some(code) => format!(
                "it cannot be read: {}",
                std::io::Error::from_raw_os_error(code)
            ),
            None => format!("it cannot be read: {}", io.kind()),
        },
        Error::UnrecognizedMagicValue(_) => "it is not a perf.data file".to_string(),
        Error::Read(part) => match part {
            ReadError::PerfHeader => "its header is cut short or malformed",
            ReadError::AttrsSection | ReadError::PerfEventAttr => {
                "its event attributes are cut short or malformed"
            }
            ReadError::PerfEventHeader | ReadError::PerfEventData => {
                "a record is cut short or malformed"
            }
            _ => "one of its sections is cut short or malformed",
        }
        .to_string(),
        Error::NoAttributes => "it describes no events".to_string(),
        Error::InconsistentAttributeSizes(..) => {
            "its event attributes disagree on their size".to_string()
        }
        Error::NoIdentifierDespiteMultiEvent(_)
        | Error::InconsistentSampleIdAllWithMultiEvent(_) => {
            "its events' records cannot be told apart".to_string()
        }
        Error::InvalidPerfEventSize => "a record is shorter than its own header".to_string(),
        _ => "one of its sections is malformed".to_string(),
    }
}

fn native_endian() -> Endianness {
    if cfg!(target_endian = "big") {
        Endianness::BigEndian
    } else {
        Endianness::LittleEndian
    }
}

/// The formats of the two tracepoints: from the file's tracing data, else
/// from this machine's tracefs (right only for a file recorded on this
/// kernel). Either has every field the decoder reads.
fn formats(file: &PerfFile, path: &Path) -> Result<(EventFormat, EventFormat)> {
    if let Some(data) = file.feature_section_data(Feature::TRACING_DATA) {
        // The outermost message only, which says what part was malformed:
        // the inner ones may quote the format text.
        let found = tracing::event_formats(data, "sched", &["sched_switch", "sched_waking"])
            .map_err(|e| anyhow::anyhow!("reading the tracing data of {}: {e}", path.display()))?;
        if let [Some(switch), Some(waking)] = <[_; 2]>::try_from(found).unwrap_or([None, None]) {
            // Said without the fields the formats have, which are the file's.
            SchedFields::new(&switch, &waking).map_err(|_| {
                anyhow::anyhow!(
                    "{}: its formats of sched_switch and sched_waking lack a field this tool \
                     reads",
                    path.display()
                )
            })?;
            return Ok((switch, waking));
        }
    }
    let tracefs = Tracefs::open().with_context(|| {
        format!(
            "{} has no tracepoint formats, and this machine's cannot be read",
            path.display()
        )
    })?;
    let (switch, waking) = (
        tracefs.event_format("sched", "sched_switch")?,
        tracefs.event_format("sched", "sched_waking")?,
    );
    SchedFields::new(&switch, &waking).context("this machine's tracepoint formats")?;
    Ok((switch, waking))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_command_records_what_the_source_needs() {
        for needed in ["sched:sched_switch", "sched:sched_waking", " -a ", " -g "] {
            assert!(RECORD_COMMAND.contains(needed), "{needed}");
        }
    }

    #[test]
    fn system_wide_recordings_are_told_by_their_command_line() {
        let wide = [
            "perf record -e x -a -g -- sleep 1",
            "perf record -ag -- sleep 1",
            "perf record --all-cpus -g sleep 1",
        ];
        for c in wide {
            let args: Vec<&str> = c.split(' ').collect();
            assert!(recorded_system_wide(&args), "{c}");
        }
        let narrow = [
            "perf record -e x -g -- sleep -a",
            "perf record -p 5 -g",
            "perf record -e sched:sched_switch -g -- sleep 1",
        ];
        for c in narrow {
            let args: Vec<&str> = c.split(' ').collect();
            assert!(!recorded_system_wide(&args), "{c}");
        }
    }

    #[test]
    fn a_file_that_is_not_perf_data_is_an_error_naming_it() {
        let path = std::env::temp_dir().join(format!("offwake-notperf-{}", std::process::id()));
        let content = b"secret: not a perf.data file at all, but long enough to be read";
        let shown = path.display().to_string();
        for (bytes, says) in [
            (&content[..], "is not a perf.data file"),
            (&content[..3], "is not a perf.data file"),
            (b"", "is an empty file, not a perf.data file"),
            (
                b"PERFILE2\x68\0\0\0secret",
                "is cut short: it ends inside its perf.data header",
            ),
        ] {
            std::fs::write(&path, bytes).unwrap();
            let err = format!(
                "{:#}",
                RecordedSource::open(&path, None, false)
                    .err()
                    .expect("an error")
            );
            assert!(err.starts_with(&format!("{shown} {says}")), "{err}");
            assert!(
                !err.contains("secret") && !err.contains("[115, 101"),
                "{err}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn parser_errors_are_said_without_the_file_s_values() {
        use linux_perf_data::{Error, ReadError};
        let eof = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        let eio = std::io::Error::from_raw_os_error(libc::EIO);
        let eio_says = format!(
            "it cannot be read: {}",
            std::io::Error::from_raw_os_error(libc::EIO)
        );
        for (e, says) in [
            (
                Error::UnrecognizedMagicValue(*b"root:*:1"),
                "it is not a perf.data file",
            ),
            (Error::IoError(eof), "it is cut short"),
            (Error::IoError(eio), eio_says.as_str()),
            (
                Error::Read(ReadError::PerfHeader),
                "its header is cut short or malformed",
            ),
            (
                Error::Read(ReadError::PerfEventAttr),
                "its event attributes are cut short or malformed",
            ),
            (
                Error::InconsistentAttributeSizes(987654, 123456),
                "its event attributes disagree on their size",
            ),
            (Error::StringUtf8, "one of its sections is malformed"),
        ] {
            assert_eq!(in_words(&e), says, "{e:?}");
        }
    }
}
