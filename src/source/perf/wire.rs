//! Typed views over the records of a perf ring buffer, before any
//! interpretation: the layouts of perf_event_open(2), read bounds-checked
//! into [`Record`]s, with typed errors. Side-band records need no
//! interpretation and come out as what they say; [`super::record`] turns
//! samples into events.
//!
//! Layouts follow perf_event_open(2). A `PERF_RECORD_SAMPLE` holds, in this
//! order and only when the bit is in `sample_type`:
//!
//! ```text
//! u64 id            IDENTIFIER
//! u64 ip            IP
//! u32 pid, tid      TID
//! u64 time          TIME
//! u64 addr          ADDR
//! u64 id            ID
//! u64 stream_id     STREAM_ID
//! u32 cpu, res      CPU
//! u64 period        PERIOD
//! u64 value, running  READ        -- read_format TOTAL_TIME_RUNNING only
//! u64 nr; u64 ips[nr]   CALLCHAIN
//! u32 size; u8 data[size]  RAW    -- the tracepoint payload
//! u64 abi; u64 regs[3]     REGS_USER  -- BP, SP, IP; none when abi is 0
//! u64 size; u8 data[size]; u64 dyn_size   STACK_USER  -- the copy is the
//!                          first dyn_size bytes; size 0 has no dyn_size
//! u64 each          WEIGHT, DATA_SRC, TRANSACTION (REGS_INTR), PHYS_ADDR
//! u64 cgroup        CGROUP
//! ```
//!
//! Other records carry, with `sample_id_all`, a trailer at their very end:
//!
//! ```text
//! u32 pid, tid      TID
//! u64 time          TIME
//! u64 id            ID
//! u64 stream_id     STREAM_ID
//! u32 cpu, res      CPU
//! u64 id            IDENTIFIER   -- last, unlike in a sample
//! ```

use std::sync::Arc;

use anyhow::{Result, ensure};

use super::sys::*;
use crate::bytes::{Cursor, Truncated, u32_at, u64_at};
use crate::event::{Comm, CommChange, EventKind, Exit, Fork, Lost, Mmap, SwitchIn};
use crate::sys::open::FileKey;

/// A record that cannot be read as its header and `sample_type` say.
/// Readers count these as malformed, so they carry numbers, not text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    #[error("record shorter than its header")]
    NoHeader,
    #[error("record header says {said} bytes, record has {len}")]
    Size { said: usize, len: usize },
    #[error("record {0}")]
    Truncated(#[from] Truncated),
    #[error("record too short for its {0}-byte sample_id trailer")]
    NoTrailer(usize),
    #[error("callchain length {0} is absurd")]
    CallchainLength(u64),
    #[error("user stack size {0} is absurd")]
    UserStackSize(u64),
    #[error("user stack copy of {dyn_size} bytes in {size}")]
    UserStackCopy { dyn_size: u64, size: usize },
    #[error("COMM record without a name")]
    NoComm,
}

/// One record, typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    Sample(Sample<'a>),
    /// A fork, exit, comm, mmap, lost or switch-in record: what it says
    /// (it needs no interpretation), and when and where (its trailer).
    /// Lost records say how many were lost before `sid.time`; a switch-in
    /// names the thread that left only in a CPU-wide record (else 0).
    SideBand {
        kind: EventKind,
        sid: SampleId,
    },
    /// A record of no use here (switch-outs, other types).
    Ignored,
}

/// The `sample_id` trailer of a non-sample record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SampleId {
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) time: u64,
    pub(crate) cpu: u32,
    pub(crate) id: Option<u64>,
}

/// A `PERF_RECORD_SAMPLE`, before interpretation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sample<'a> {
    pub(crate) id: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) time: u64,
    pub(crate) cpu: u32,
    /// The event's `time_running` (`SAMPLE_READ`).
    pub(crate) running: Option<u64>,
    /// The event's count since its previous sample (`SAMPLE_PERIOD`).
    pub(crate) period: Option<u64>,
    /// The callchain entries, markers included, as they are in the record
    /// (native-endian u64s), split by `split_entries`.
    pub(crate) callchain_bytes: &'a [u8],
    pub(crate) raw: &'a [u8],
    /// BP, SP and IP in user space (`REGS_USER`, asked for with
    /// [`USER_REGS_MASK`]); `None` when the task has no user context.
    pub(crate) user_regs: Option<[u64; 3]>,
    /// The user stack copied from SP up (`STACK_USER`): the part the
    /// kernel could copy (`dyn_size`).
    pub(crate) user_stack: &'a [u8],
    /// The id of the sampled task's cgroup (`CGROUP`), in the hierarchy
    /// of the perf_event controller.
    pub(crate) cgroup: Option<u64>,
}

/// Reads the records of events opened with one `sample_type`.
#[derive(Clone, Debug)]
pub(crate) struct RecordParser {
    sample_type: u64,
    /// Where BP, SP and IP are in a sample's user registers.
    regs: RegsLayout,
    /// Where a sample's fixed-size fields are.
    layout: SampleLayout,
    /// Bytes of a non-sample record's `sample_id` trailer.
    trailer_len: usize,
}

/// Offsets, in a sample's body, of the fields that come before the
/// callchain (all of them fixed-size), for one `sample_type`.
#[derive(Clone, Copy, Debug, Default)]
struct SampleLayout {
    identifier: Option<usize>,
    id: Option<usize>,
    tid: Option<usize>,
    time: Option<usize>,
    cpu: Option<usize>,
    period: Option<usize>,
    /// `time_running`, the second word of `READ` ([`READ_FORMAT`]).
    running: Option<usize>,
    /// Bytes before the callchain (or the raw data).
    fixed: usize,
}

/// Where BP, SP and IP ([`USER_REGS`]) are among the user registers a
/// sample carries (`sample_regs_user`), and how many it carries: this
/// tool asks for those three; stock perf, recording with `--call-graph
/// dwarf`, for all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegsLayout {
    count: usize,
    at: [usize; 3],
}

impl RegsLayout {
    /// `None` when `mask` lacks one of the three.
    fn new(mask: u64) -> Option<RegsLayout> {
        let mut at = [0; 3];
        for (slot, bit) in at.iter_mut().zip(USER_REGS) {
            if mask & (1 << bit) == 0 {
                return None;
            }
            *slot = (mask & ((1 << bit) - 1)).count_ones() as usize;
        }
        Some(RegsLayout {
            count: mask.count_ones() as usize,
            at,
        })
    }
}

/// Every `sample_type` bit the parser can walk.
pub(crate) const SUPPORTED_SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_READ
    | SAMPLE_CALLCHAIN
    | SAMPLE_RAW
    | SAMPLE_REGS_USER
    | SAMPLE_STACK_USER
    | AFTER_STACK_USER;

/// The `sample_type` bits of fields a sample holds after its user stack
/// (weight, data source, transaction, interrupt registers, addresses,
/// page sizes, cgroup; perf asks for some with `--call-graph dwarf`):
/// only the cgroup is read ([`after_stack_user`]).
const AFTER_STACK_USER: u64 = {
    use perf_event_open_sys::bindings as b;
    (b::PERF_SAMPLE_WEIGHT
        | b::PERF_SAMPLE_DATA_SRC
        | b::PERF_SAMPLE_TRANSACTION
        | b::PERF_SAMPLE_REGS_INTR
        | b::PERF_SAMPLE_PHYS_ADDR
        | b::PERF_SAMPLE_CGROUP
        | b::PERF_SAMPLE_DATA_PAGE_SIZE
        | b::PERF_SAMPLE_CODE_PAGE_SIZE
        | b::PERF_SAMPLE_WEIGHT_STRUCT) as u64
};

/// The cgroup id of a sample whose cursor `c` is past its user stack:
/// after the one-word fields before it. `None` when interrupt registers
/// come first, whose count the sample does not give.
fn after_stack_user(sample_type: u64, c: &mut Cursor<'_>) -> Result<Option<u64>, WireError> {
    use perf_event_open_sys::bindings as b;
    if sample_type & b::PERF_SAMPLE_REGS_INTR as u64 != 0 {
        return Ok(None);
    }
    let words = [
        b::PERF_SAMPLE_WEIGHT | b::PERF_SAMPLE_WEIGHT_STRUCT,
        b::PERF_SAMPLE_DATA_SRC,
        b::PERF_SAMPLE_TRANSACTION,
        b::PERF_SAMPLE_PHYS_ADDR,
    ];
    for bits in words {
        if sample_type & bits as u64 != 0 {
            c.u64()?;
        }
    }
    Ok(Some(c.u64()?))
}

/// Bytes of a sample body of `sample_type` before its callchain (or its
/// raw data): the one-word fields it has.
pub(crate) fn fixed_sample_len(sample_type: u64) -> usize {
    SampleLayout::new(sample_type).fixed
}

impl SampleLayout {
    fn new(sample_type: u64) -> SampleLayout {
        let mut l = SampleLayout::default();
        for (bit, at) in [
            (SAMPLE_IDENTIFIER, Some(&mut l.identifier)),
            (SAMPLE_IP, None),
            (SAMPLE_TID, Some(&mut l.tid)),
            (SAMPLE_TIME, Some(&mut l.time)),
            (SAMPLE_ADDR, None),
            (SAMPLE_ID, Some(&mut l.id)),
            (SAMPLE_STREAM_ID, None),
            (SAMPLE_CPU, Some(&mut l.cpu)),
            (SAMPLE_PERIOD, Some(&mut l.period)),
        ] {
            if sample_type & bit != 0 {
                if let Some(at) = at {
                    *at = Some(l.fixed);
                }
                l.fixed += 8;
            }
        }
        // Last before the callchain: the event's count, then its
        // time_running (the only read_format asked for).
        if sample_type & SAMPLE_READ != 0 {
            l.running = Some(l.fixed + 8);
            l.fixed += 16;
        }
        l
    }
}

impl RecordParser {
    /// A parser for `sample_type`, which must have TID, TIME and CPU (and
    /// RAW, for tracepoints' payloads) and nothing the parser cannot walk.
    pub(crate) fn new(sample_type: u64) -> Result<RecordParser> {
        ensure!(
            sample_type & !SUPPORTED_SAMPLE_TYPE == 0,
            "sample_type {sample_type:#x} has bits the decoder cannot walk"
        );
        let needed = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU;
        ensure!(
            sample_type & needed == needed,
            "sample_type {sample_type:#x} lacks TID, TIME or CPU"
        );
        let trailer_len = [
            SAMPLE_TID,
            SAMPLE_TIME,
            SAMPLE_ID,
            SAMPLE_STREAM_ID,
            SAMPLE_CPU,
            SAMPLE_IDENTIFIER,
        ]
        .iter()
        .filter(|&&bit| sample_type & bit != 0)
        .count()
            * 8;
        Ok(RecordParser {
            sample_type,
            regs: RegsLayout::new(USER_REGS_MASK).unwrap_or(RegsLayout {
                count: 3,
                at: [0, 1, 2],
            }),
            layout: SampleLayout::new(sample_type),
            trailer_len,
        })
    }

    pub(crate) fn sample_type(&self) -> u64 {
        self.sample_type
    }

    /// Reads user registers dumped with `mask` (`sample_regs_user`), which
    /// must hold BP, SP and IP; by default, samples carry only those.
    pub(crate) fn set_user_regs(&mut self, mask: u64) -> Result<()> {
        self.regs = RegsLayout::new(mask).ok_or_else(|| {
            anyhow::anyhow!("sample_regs_user {mask:#x} lacks BP, SP or IP, which unwinding needs")
        })?;
        Ok(())
    }

    /// Reads one whole record, header included.
    pub(crate) fn parse<'a>(&self, rec: &'a [u8]) -> Result<Record<'a>, WireError> {
        let (Some(ty), Some(misc), Some(size)) = (
            u32_at(rec, 0),
            rec.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]])),
            rec.get(6..8)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]) as usize),
        ) else {
            return Err(WireError::NoHeader);
        };
        if size != rec.len() {
            return Err(WireError::Size {
                said: size,
                len: rec.len(),
            });
        }
        let body = &rec[8..];
        match ty {
            RECORD_SAMPLE => self.parse_sample(body).map(Record::Sample),
            RECORD_FORK | RECORD_EXIT | RECORD_COMM | RECORD_MMAP | RECORD_MMAP2 | RECORD_LOST
            | RECORD_LOST_SAMPLES => self.parse_side_band(ty, misc, body),
            // Only switch-ins are of use; switch-outs come from sched_switch.
            RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE if misc & RECORD_MISC_SWITCH_OUT != 0 => {
                Ok(Record::Ignored)
            }
            RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE => self.parse_side_band(ty, misc, body),
            _ => Ok(Record::Ignored),
        }
    }

    /// Walks a sample body in `sample_type` order.
    pub(crate) fn parse_sample<'a>(&self, body: &'a [u8]) -> Result<Sample<'a>, WireError> {
        let l = &self.layout;
        if body.len() < l.fixed {
            return Err(WireError::Truncated(Truncated {
                wanted: l.fixed,
                at: 0,
                have: body.len(),
            }));
        }
        let mut s = Sample {
            // IDENTIFIER and ID are the same value; IDENTIFIER comes first.
            id: l
                .identifier
                .or(l.id)
                .map(|at| u64_at(body, at).unwrap_or_default()),
            ..Sample::default()
        };
        if let Some(at) = l.tid {
            s.pid = u32_at(body, at).unwrap_or_default();
            s.tid = u32_at(body, at + 4).unwrap_or_default();
        }
        if let Some(at) = l.time {
            s.time = u64_at(body, at).unwrap_or_default();
        }
        if let Some(at) = l.cpu {
            s.cpu = u32_at(body, at).unwrap_or_default();
        }
        s.running = l.running.map(|at| u64_at(body, at).unwrap_or_default());
        s.period = l.period.map(|at| u64_at(body, at).unwrap_or_default());
        let mut c = Cursor::at(body, l.fixed);
        if self.sample_type & SAMPLE_CALLCHAIN != 0 {
            let nr = c.u64()?;
            let bytes = usize::try_from(nr)
                .ok()
                .and_then(|n| n.checked_mul(8))
                .ok_or(WireError::CallchainLength(nr))?;
            s.callchain_bytes = c.take(bytes)?;
        }
        if self.sample_type & SAMPLE_RAW != 0 {
            let n = c.u32()? as usize;
            s.raw = c.take(n)?;
        }
        if self.sample_type & SAMPLE_REGS_USER != 0 && c.u64()? != 0 {
            let regs = c.take(self.regs.count * 8)?;
            let [bp, sp, ip] = self
                .regs
                .at
                .map(|i| u64_at(regs, i * 8).unwrap_or_default());
            s.user_regs = Some([bp, sp, ip]);
        }
        if self.sample_type & SAMPLE_STACK_USER != 0 {
            let size = c.u64()?;
            if size != 0 {
                let size = usize::try_from(size).map_err(|_| WireError::UserStackSize(size))?;
                let copy = c.take(size)?;
                let dyn_size = c.u64()?;
                if dyn_size > size as u64 {
                    return Err(WireError::UserStackCopy { dyn_size, size });
                }
                s.user_stack = &copy[..dyn_size as usize];
            }
        }
        if self.sample_type & SAMPLE_CGROUP != 0 {
            s.cgroup = after_stack_user(self.sample_type, &mut c)?;
        }
        Ok(s)
    }

    /// Parses the `sample_id` trailer at the end of `body`.
    pub(crate) fn parse_trailer(&self, body: &[u8]) -> Result<SampleId, WireError> {
        if body.len() < self.trailer_len {
            return Err(WireError::NoTrailer(self.trailer_len));
        }
        let st = self.sample_type;
        let mut c = Cursor::new(&body[body.len() - self.trailer_len..]);
        let mut t = SampleId::default();
        if st & SAMPLE_TID != 0 {
            t.pid = c.u32()?;
            t.tid = c.u32()?;
        }
        if st & SAMPLE_TIME != 0 {
            t.time = c.u64()?;
        }
        if st & SAMPLE_ID != 0 {
            t.id = Some(c.u64()?);
        }
        if st & SAMPLE_STREAM_ID != 0 {
            c.u64()?;
        }
        if st & SAMPLE_CPU != 0 {
            t.cpu = c.u32()?;
            c.u32()?;
        }
        if st & SAMPLE_IDENTIFIER != 0 {
            t.id = Some(c.u64()?);
        }
        Ok(t)
    }

    fn parse_side_band<'a>(
        &self,
        ty: u32,
        misc: u16,
        body: &'a [u8],
    ) -> Result<Record<'a>, WireError> {
        let sid = self.parse_trailer(body)?;
        let mut c = Cursor::new(&body[..body.len() - self.trailer_len]);
        let kind = match ty {
            RECORD_FORK | RECORD_EXIT => {
                let [tgid, parent_tgid, tid, parent_tid] = [c.u32()?, c.u32()?, c.u32()?, c.u32()?];
                let _time = c.u64()?;
                if ty == RECORD_FORK {
                    EventKind::Fork(Fork {
                        parent_tgid,
                        parent_tid,
                        tgid,
                        tid,
                    })
                } else {
                    EventKind::Exit(Exit { tgid, tid })
                }
            }
            RECORD_COMM => {
                let [tgid, tid] = [c.u32()?, c.u32()?];
                let name = c.rest();
                if name.is_empty() {
                    return Err(WireError::NoComm);
                }
                EventKind::Comm(CommChange {
                    tgid,
                    tid,
                    comm: Comm::from_bytes(name),
                    exec: misc & RECORD_MISC_COMM_EXEC != 0,
                })
            }
            RECORD_MMAP | RECORD_MMAP2 => EventKind::Mmap(mmap(ty, misc, &mut c)?),
            RECORD_LOST | RECORD_LOST_SAMPLES => {
                if ty == RECORD_LOST {
                    let _id = c.u64()?;
                }
                // The window's start is known only to the ring reader,
                // which moves the event's time back to it.
                EventKind::Lost(Lost {
                    records: c.u64()?,
                    until: sid.time,
                })
            }
            RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE => {
                // The incoming thread is the sample_id's. A CPU-wide record
                // also names the one that left (next_prev_pid and _tid); a
                // per-task one does not.
                let prev_tid = if ty == RECORD_SWITCH_CPU_WIDE {
                    let _prev_pid = c.u32()?;
                    c.u32()?
                } else {
                    0
                };
                EventKind::SwitchIn(SwitchIn {
                    tid: sid.tid,
                    tgid: sid.pid,
                    prev_tid,
                })
            }
            _ => return Ok(Record::Ignored),
        };
        Ok(Record::SideBand { kind, sid })
    }
}

/// The body of a `PERF_RECORD_MMAP` or `PERF_RECORD_MMAP2` of type `ty`.
fn mmap(ty: u32, misc: u16, c: &mut Cursor<'_>) -> Result<Mmap, WireError> {
    let [tgid, tid] = [c.u32()?, c.u32()?];
    let [start, len, pgoff] = [c.u64()?, c.u64()?, c.u64()?];
    let (mut file, mut build_id) = (None, None);
    let executable = if ty == RECORD_MMAP2 {
        // maj, min, ino, ino_generation; or, when the record says so (perf
        // record --buildid-mmap), the build-id's size, 3 reserved bytes and
        // the build-id in those 24 bytes.
        let ids = c.take(24)?;
        if misc & RECORD_MISC_MMAP_BUILD_ID != 0 {
            let size = usize::from(ids[0]).min(20);
            build_id = (size > 0).then(|| Arc::from(&ids[4..4 + size]));
        } else {
            let [maj, min] = [0, 4].map(|at| u32_at(ids, at).unwrap_or_default());
            let ino = u64_at(ids, 8).unwrap_or_default();
            file = (ino != 0).then(|| FileKey {
                dev: libc::makedev(maj, min),
                ino,
            });
        }
        let prot = c.u32()?;
        let _flags = c.u32()?;
        prot & libc::PROT_EXEC as u32 != 0
    } else {
        // Without mmap_data, PERF_RECORD_MMAP is only emitted for
        // executable mappings.
        true
    };
    let name = c.rest();
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    Ok(Mmap {
        tgid,
        tid,
        start,
        len,
        pgoff,
        path: String::from_utf8_lossy(name).into_owned(),
        executable,
        file,
        build_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_registers_are_found_in_any_dump_that_holds_them() {
        assert_eq!(
            RegsLayout::new(USER_REGS_MASK),
            Some(RegsLayout {
                count: 3,
                at: [0, 1, 2]
            })
        );
        // Stock perf's --call-graph dwarf on x86_64: every register.
        assert_eq!(
            RegsLayout::new(0xff0fff),
            Some(RegsLayout {
                count: 20,
                at: [6, 7, 8]
            })
        );
        assert_eq!(RegsLayout::new(0xff0fff & !(1 << 7)), None);
        let mut p = RecordParser::new(SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW).unwrap();
        assert!(p.set_user_regs(1 << 6).is_err());
        assert!(p.set_user_regs(0xff0fff).is_ok());
    }

    #[test]
    fn the_cgroup_is_read_past_the_words_before_it() {
        use perf_event_open_sys::bindings as b;
        let words = |ws: &[u64]| ws.iter().flat_map(|w| w.to_ne_bytes()).collect::<Vec<u8>>();
        let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW | SAMPLE_STACK_USER;
        let parse = |st: u64, body: &[u8]| {
            let cgroup = RecordParser::new(st).unwrap().parse_sample(body)?.cgroup;
            Ok::<_, WireError>(cgroup)
        };
        // pid/tid, time, cpu, 4 raw bytes (with their size, one word), an
        // empty user stack, then the cgroup.
        let head = [7 | (8 << 32), 100, 1, 4, 0];
        let body = words(&[&head[..], &[4242]].concat());
        let p = RecordParser::new(st | SAMPLE_CGROUP).unwrap();
        let s = p.parse_sample(&body).unwrap();
        assert_eq!((s.tid, s.time, s.cgroup), (8, 100, Some(4242)));
        // Weight and physical address come between.
        let between =
            st | SAMPLE_CGROUP | b::PERF_SAMPLE_WEIGHT as u64 | b::PERF_SAMPLE_PHYS_ADDR as u64;
        let body = words(&[&head[..], &[1, 2, 99]].concat());
        assert_eq!(parse(between, &body).unwrap(), Some(99));
        // Interrupt registers of unknown count: no cgroup, no error.
        let intr = between | b::PERF_SAMPLE_REGS_INTR as u64;
        assert_eq!(parse(intr, &body).unwrap(), None);
        // A sample cut before its cgroup is malformed; without the bit, no
        // cgroup is read.
        assert!(parse(between, &body[..body.len() - 8]).is_err());
        assert_eq!(parse(st, &body).unwrap(), None);
    }

    #[test]
    fn fields_after_the_user_stack_need_no_walking() {
        let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;
        assert!(RecordParser::new(st | AFTER_STACK_USER).is_ok());
        // A branch stack comes before the user registers: refused.
        assert!(RecordParser::new(st | (1 << 11)).is_err());
    }
}
