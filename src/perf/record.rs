//! Decoding of perf records (as found in the ring buffer) into
//! [`crate::event::Event`]s.
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

use anyhow::{Result, anyhow, bail, ensure};
use rustc_hash::FxHashMap;

use super::running::RunningClock;
use super::sys::*;
use crate::event::{
    Callchain, ChainCache, Comm, CommChange, Event, EventKind, Exit, Fork, Lost, Mmap, Ran,
    RanSince, SwitchIn, UserCopy,
};
use crate::probes::ProbeRanges;
use crate::sys::open::FileKey;
use crate::tracepoint::EventFormat;
use crate::tracepoint::sched::SchedFields;

pub(crate) use crate::tracepoint::sched::Tracepoint;

/// Decodes records produced by events opened with `sample_type`.
#[derive(Clone, Debug)]
pub(crate) struct Decoder {
    sample_type: u64,
    trailer_len: usize,
    /// Where a sample's fixed-size fields are.
    layout: SampleLayout,
    /// Kernel event ids (PERF_EVENT_IOC_ID) → tracepoint: two per CPU, or
    /// per traced thread.
    ids: FxHashMap<u64, Tracepoint>,
    sched: SchedFields,
    /// Tracing machinery to trim off the top of kernel callchains.
    probes: ProbeRanges,
    /// Callchains seen lately: samples with the same chain share it.
    chains: ChainCache,
    /// Per-task events' `time_running`, for switch-ins (`SAMPLE_READ`).
    running: RunningClock,
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
    /// `time_running`, the second word of `READ` ([`READ_FORMAT`]).
    running: Option<usize>,
    /// Bytes before the callchain (or the raw data).
    fixed: usize,
}

/// Every `sample_type` bit the decoder can walk.
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
    | SAMPLE_STACK_USER;

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
            (SAMPLE_PERIOD, None),
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

/// The native-endian u64 at `at` in `b`; 0 past its end.
fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..)
        .and_then(|s| s.first_chunk::<8>())
        .map_or(0, |c| u64::from_ne_bytes(*c))
}

/// The native-endian u32 at `at` in `b`; 0 past its end.
fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..)
        .and_then(|s| s.first_chunk::<4>())
        .map_or(0, |c| u32::from_ne_bytes(*c))
}

/// Little cursor over a record; every read is bounds-checked.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                anyhow!(
                    "record truncated: wanted {n} bytes at offset {}, have {}",
                    self.pos,
                    self.buf.len()
                )
            })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_ne_bytes(b.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_ne_bytes(b.try_into().unwrap()))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
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

/// A decoded `PERF_RECORD_SAMPLE`, before interpretation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sample<'a> {
    pub(crate) id: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) tid: u32,
    pub(crate) time: u64,
    pub(crate) cpu: u32,
    /// The event's `time_running` (`SAMPLE_READ`).
    pub(crate) running: Option<u64>,
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
}

/// Splits raw callchain entries into kernel and user parts, dropping every
/// `PERF_CONTEXT_*` marker (anything `>= PERF_CONTEXT_MAX`). Entries under
/// a hypervisor or guest marker are dropped. Entries before any marker are
/// classified by address (upper half = kernel).
#[cfg(test)]
pub(crate) fn split_callchain(ips: &[u64]) -> Callchain {
    let bytes: Vec<u8> = ips.iter().flat_map(|ip| ip.to_ne_bytes()).collect();
    split_entries(&bytes, &mut ChainCache::new())
}

/// The native-endian u64s of `bytes` (a multiple of 8 long).
fn words(bytes: &[u8]) -> impl ExactSizeIterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
}

/// [`split_callchain`] over the entries as they are in a record
/// (native-endian u64s), the chain shared through `cache` with the samples
/// that had the same entries. Copies each run of frames between two
/// markers at once.
fn split_entries(entries: &[u8], cache: &mut ChainCache) -> Callchain {
    #[derive(Clone, Copy)]
    enum Ctx {
        Unknown,
        Kernel,
        User,
        Other,
    }
    cache.get(entries, |kernel, user| {
        let mut ctx = Ctx::Unknown;
        let mut rest = entries;
        loop {
            let run = words(rest)
                .position(|ip| ip >= CONTEXT_MAX)
                .unwrap_or(rest.len() / 8);
            let (frames, tail) = rest.split_at(run * 8);
            match ctx {
                Ctx::Kernel => kernel.extend(words(frames)),
                Ctx::User => user.extend(words(frames)),
                Ctx::Other => {}
                Ctx::Unknown => {
                    for ip in words(frames) {
                        if ip >> 63 == 1 {
                            kernel.push(ip);
                        } else {
                            user.push(ip);
                        }
                    }
                }
            }
            let Some((marker, tail)) = tail.split_first_chunk::<8>() else {
                break;
            };
            ctx = match u64::from_ne_bytes(*marker) {
                CONTEXT_KERNEL => Ctx::Kernel,
                CONTEXT_USER => Ctx::User,
                _ => Ctx::Other,
            };
            rest = tail;
        }
    })
}

impl Decoder {
    /// A decoder for samples of `sample_type` from the two tracepoints
    /// described by `switch` and `waking`.
    pub(crate) fn new(
        sample_type: u64,
        switch: &EventFormat,
        waking: &EventFormat,
    ) -> Result<Decoder> {
        ensure!(
            sample_type & !SUPPORTED_SAMPLE_TYPE == 0,
            "sample_type {sample_type:#x} has bits the decoder cannot walk"
        );
        let needed = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW;
        ensure!(
            sample_type & needed == needed,
            "sample_type {sample_type:#x} lacks TID, TIME, CPU or RAW"
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
        Ok(Decoder {
            sample_type,
            trailer_len,
            layout: SampleLayout::new(sample_type),
            ids: FxHashMap::default(),
            sched: SchedFields::new(switch, waking)?,
            probes: ProbeRanges::default(),
            chains: ChainCache::new(),
            running: RunningClock::new(),
        })
    }

    /// Sets the machinery ranges (from kallsyms) that kernel callchains are
    /// trimmed of. Until set, nothing is trimmed.
    pub(crate) fn set_probes(&mut self, probes: ProbeRanges) {
        self.probes = probes;
    }

    /// Registers the kernel id (`PERF_EVENT_IOC_ID`) of an opened event
    /// (the first registration of an id holds).
    pub(crate) fn add_id(&mut self, id: u64, tp: Tracepoint) {
        self.ids.entry(id).or_insert(tp);
    }

    pub(crate) fn sample_type(&self) -> u64 {
        self.sample_type
    }

    /// Switch-ins told by per-task events' counts.
    pub(crate) fn running(&mut self) -> &mut RunningClock {
        &mut self.running
    }

    /// Decodes one whole record (header included), kernel stacks finished
    /// ([`Decoder::finish_stacks`]). `Ok(None)` for record types that carry
    /// nothing we use; `Err` for malformed records.
    pub(crate) fn decode(&mut self, rec: &[u8]) -> Result<Option<Event>> {
        let mut ev = self.decode_unfinished(rec)?;
        if let Some(ev) = &mut ev {
            self.finish_stacks(ev);
        }
        Ok(ev)
    }

    /// Trims a sample's kernel stack as the contract wants it: with more
    /// than one tracer attached, callchains start inside the tracepoint's
    /// iterator (trimmed with the ranges of [`Decoder::set_probes`]); and a
    /// wakeup's first frame left is the tracepoint's site inside
    /// `try_to_wake_up`, whose caller is where its stack starts. Apply once
    /// per event, after the probe ranges are set.
    ///
    /// With user stacks copied, an interrupt's wakeup (its kernel stack
    /// passes the interrupt entry) loses its user stack, which is of
    /// whatever task the interrupt happened to land on.
    pub(crate) fn finish_stacks(&self, ev: &mut Event) {
        match &mut ev.kind {
            EventKind::Switch(s) => {
                let start = self
                    .probes
                    .kernel_start(s.stack.kernel(), Tracepoint::Switch);
                s.stack.skip_kernel(start);
            }
            EventKind::Waking(w) => {
                if w.user_copy.is_some() && self.probes.interrupted(w.stack.kernel()) {
                    w.drop_user_stack();
                }
                let start = self
                    .probes
                    .kernel_start(w.stack.kernel(), Tracepoint::Waking);
                w.stack.skip_kernel(start);
            }
            _ => {}
        }
    }

    /// [`Decoder::decode`] without [`Decoder::finish_stacks`]: a backend
    /// that reads before kallsyms is loaded finishes the stacks later.
    pub(crate) fn decode_unfinished(&mut self, rec: &[u8]) -> Result<Option<Event>> {
        ensure!(rec.len() >= 8, "record shorter than its header");
        let ty = u32::from_ne_bytes(rec[0..4].try_into().unwrap());
        let misc = u16::from_ne_bytes(rec[4..6].try_into().unwrap());
        let size = u16::from_ne_bytes(rec[6..8].try_into().unwrap()) as usize;
        ensure!(
            size == rec.len(),
            "record header says {size} bytes, record has {}",
            rec.len()
        );
        let body = &rec[8..];
        match ty {
            RECORD_SAMPLE => self.decode_sample(body).map(Some),
            RECORD_FORK | RECORD_EXIT | RECORD_COMM | RECORD_MMAP | RECORD_MMAP2 | RECORD_LOST
            | RECORD_LOST_SAMPLES => self.decode_side_band(ty, misc, body).map(Some),
            // Only switch-ins are of use; switch-outs come from sched_switch.
            RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE if misc & RECORD_MISC_SWITCH_OUT != 0 => {
                Ok(None)
            }
            RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE => {
                self.decode_side_band(ty, misc, body).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Walks a sample body in `sample_type` order.
    pub(crate) fn parse_sample<'a>(&self, body: &'a [u8]) -> Result<Sample<'a>> {
        let l = &self.layout;
        ensure!(
            body.len() >= l.fixed,
            "record truncated: wanted {} bytes of fixed sample fields, have {}",
            l.fixed,
            body.len()
        );
        let mut s = Sample {
            // IDENTIFIER and ID are the same value; IDENTIFIER comes first.
            id: l.identifier.or(l.id).map(|at| u64_at(body, at)),
            ..Sample::default()
        };
        if let Some(at) = l.tid {
            s.pid = u32_at(body, at);
            s.tid = u32_at(body, at + 4);
        }
        if let Some(at) = l.time {
            s.time = u64_at(body, at);
        }
        if let Some(at) = l.cpu {
            s.cpu = u32_at(body, at);
        }
        s.running = l.running.map(|at| u64_at(body, at));
        let mut c = Cursor {
            buf: body,
            pos: l.fixed,
        };
        if self.sample_type & SAMPLE_CALLCHAIN != 0 {
            let nr = c.u64()?;
            let bytes = usize::try_from(nr)
                .ok()
                .and_then(|n| n.checked_mul(8))
                .ok_or_else(|| anyhow!("callchain length {nr} is absurd"))?;
            s.callchain_bytes = c.take(bytes)?;
        }
        if self.sample_type & SAMPLE_RAW != 0 {
            let n = c.u32()? as usize;
            s.raw = c.take(n)?;
        }
        if self.sample_type & SAMPLE_REGS_USER != 0 && c.u64()? != 0 {
            let [bp, sp, ip] = [c.u64()?, c.u64()?, c.u64()?];
            s.user_regs = Some([bp, sp, ip]);
        }
        if self.sample_type & SAMPLE_STACK_USER != 0 {
            let size = c.u64()?;
            if size != 0 {
                let size = usize::try_from(size)
                    .map_err(|_| anyhow!("user stack size {size} is absurd"))?;
                let copy = c.take(size)?;
                let dyn_size = c.u64()?;
                ensure!(
                    dyn_size <= size as u64,
                    "user stack copy of {dyn_size} bytes in {size}"
                );
                s.user_stack = &copy[..dyn_size as usize];
            }
        }
        Ok(s)
    }

    fn tracepoint_of(&self, s: &Sample<'_>) -> Result<Tracepoint> {
        if let Some(id) = s.id
            && let Some(&tp) = self.ids.get(&id)
        {
            return Ok(tp);
        }
        // Unknown or absent id: the payload's common_type is the tracepoint id.
        let ty = self.sched.common_type(s.raw)?;
        self.sched.tracepoint(ty).ok_or_else(|| {
            anyhow!(
                "sample of unknown tracepoint (id {:?}, common_type {ty})",
                s.id
            )
        })
    }

    fn decode_sample(&mut self, body: &[u8]) -> Result<Event> {
        let s = self.parse_sample(body)?;
        if let Some(id) = s.id
            && let Some(switch) = self.running.exit_of(id)
        {
            // A traced thread's sched_process_exit: only its count matters.
            let running = s
                .running
                .ok_or_else(|| anyhow!("sched_process_exit sample without its count"))?;
            let since = self.running.exiting(s.tid, s.cpu, switch, s.time, running);
            return Ok(Event {
                time: s.time,
                cpu: s.cpu,
                kind: EventKind::Ran(Ran { tid: s.tid, since }),
            });
        }
        let tp = self.tracepoint_of(&s)?;
        let raw = s.raw;
        let stack = split_entries(s.callchain_bytes, &mut self.chains);
        let user_copy = s.user_regs.map(|[bp, sp, ip]| {
            Box::new(UserCopy {
                ip,
                sp,
                bp,
                stack: s.user_stack.into(),
            })
        });
        let kind = match tp {
            Tracepoint::Switch => {
                let mut sw = self.sched.switch(raw, s.pid, stack)?;
                sw.user_copy = user_copy;
                if let (Some(running), Some(id)) = (s.running, s.id) {
                    sw.prev_ran_since = self
                        .running
                        .switched_in(sw.prev_tid, s.cpu, id, s.time, running)
                        .map_or(RanSince::Unknown, RanSince::At);
                    if sw.is_final() {
                        self.running.forget_thread(sw.prev_tid);
                    }
                }
                EventKind::Switch(sw)
            }
            Tracepoint::Waking => {
                let mut w = self.sched.waking(raw, s.tid, s.pid, stack)?;
                w.user_copy = user_copy;
                // Told by the flags here; a softirq run on an interrupt's
                // exit, by its kernel stack in `finish_stacks`.
                if w.user_copy.is_some() && self.sched.in_hardirq(raw) {
                    w.drop_user_stack();
                }
                EventKind::Waking(w)
            }
        };
        Ok(Event {
            time: s.time,
            cpu: s.cpu,
            kind,
        })
    }

    /// Parses the `sample_id` trailer at the end of `body`.
    pub(crate) fn parse_trailer(&self, body: &[u8]) -> Result<SampleId> {
        ensure!(
            body.len() >= self.trailer_len,
            "record too short for its {}-byte sample_id trailer",
            self.trailer_len
        );
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

    fn decode_side_band(&self, ty: u32, misc: u16, body: &[u8]) -> Result<Event> {
        let trailer = self.parse_trailer(body)?;
        let mut c = Cursor::new(&body[..body.len() - self.trailer_len]);
        let kind = match ty {
            RECORD_FORK | RECORD_EXIT => {
                let pid = c.u32()?;
                let ppid = c.u32()?;
                let tid = c.u32()?;
                let ptid = c.u32()?;
                let _time = c.u64()?;
                if ty == RECORD_FORK {
                    EventKind::Fork(Fork {
                        parent_tgid: ppid,
                        parent_tid: ptid,
                        tgid: pid,
                        tid,
                    })
                } else {
                    EventKind::Exit(Exit { tgid: pid, tid })
                }
            }
            RECORD_COMM => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let name = c.rest();
                ensure!(!name.is_empty(), "COMM record without a name");
                EventKind::Comm(CommChange {
                    tgid: pid,
                    tid,
                    comm: Comm::from_bytes(name),
                    exec: misc & RECORD_MISC_COMM_EXEC != 0,
                })
            }
            RECORD_MMAP | RECORD_MMAP2 => {
                let pid = c.u32()?;
                let tid = c.u32()?;
                let start = c.u64()?;
                let len = c.u64()?;
                let pgoff = c.u64()?;
                let (executable, file) = if ty == RECORD_MMAP2 {
                    // maj, min, ino, ino_generation (the build id instead
                    // when the record says so; never asked for here).
                    let maj = c.u32()?;
                    let min = c.u32()?;
                    let ino = c.u64()?;
                    c.take(8)?;
                    let prot = c.u32()?;
                    let _flags = c.u32()?;
                    let file =
                        (misc & RECORD_MISC_MMAP_BUILD_ID == 0 && ino != 0).then(|| FileKey {
                            dev: libc::makedev(maj, min),
                            ino,
                        });
                    (prot & libc::PROT_EXEC as u32 != 0, file)
                } else {
                    // Without mmap_data, PERF_RECORD_MMAP is only emitted for
                    // executable mappings.
                    (true, None)
                };
                let name = c.rest();
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                EventKind::Mmap(Mmap {
                    tgid: pid,
                    tid,
                    start,
                    len,
                    pgoff,
                    path: String::from_utf8_lossy(name).into_owned(),
                    executable,
                    file,
                })
            }
            RECORD_LOST => {
                let _id = c.u64()?;
                let lost = c.u64()?;
                // The window's start is known only to the ring reader,
                // which moves the event's time back to it.
                EventKind::Lost(Lost {
                    records: lost,
                    until: trailer.time,
                })
            }
            RECORD_LOST_SAMPLES => {
                let lost = c.u64()?;
                EventKind::Lost(Lost {
                    records: lost,
                    until: trailer.time,
                })
            }
            RECORD_SWITCH => {
                // A per-task event's switch: the thread is the sample_id's,
                // the one it replaced is not said.
                EventKind::SwitchIn(SwitchIn {
                    tid: trailer.tid,
                    tgid: trailer.pid,
                    prev_tid: 0,
                })
            }
            RECORD_SWITCH_CPU_WIDE => {
                // next_prev_pid, next_prev_tid: for a switch-in, the thread
                // that left. The incoming thread is the sample_id's.
                let _prev_pid = c.u32()?;
                let prev_tid = c.u32()?;
                EventKind::SwitchIn(SwitchIn {
                    tid: trailer.tid,
                    tgid: trailer.pid,
                    prev_tid,
                })
            }
            _ => bail!("record type {ty} is not side-band"),
        };
        Ok(Event {
            time: trailer.time,
            cpu: trailer.cpu,
            kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracepoint::{Field, Tracefs};

    const ST: u64 =
        SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN | SAMPLE_RAW;

    fn formats() -> (EventFormat, EventFormat) {
        let t = Tracefs::fixtures();
        (
            t.event_format("sched", "sched_switch").unwrap(),
            t.event_format("sched", "sched_waking").unwrap(),
        )
    }

    fn decoder(st: u64) -> Decoder {
        let (sw, wk) = formats();
        let mut d = Decoder::new(st, &sw, &wk).unwrap();
        d.add_id(1001, Tracepoint::Switch);
        d.add_id(1002, Tracepoint::Waking);
        d
    }

    fn header(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn put_field(raw: &mut [u8], f: &Field, v: &[u8]) {
        raw[f.offset..f.offset + v.len()].copy_from_slice(v);
    }

    /// A sched_switch payload built from the fixture's offsets.
    fn switch_raw(sw: &EventFormat) -> Vec<u8> {
        let size = sw.fixed_size();
        let mut raw = vec![0u8; size];
        put_field(
            &mut raw,
            sw.field("common_type").unwrap(),
            &(sw.id as u16).to_ne_bytes(),
        );
        put_field(&mut raw, sw.field("prev_comm").unwrap(), b"sleep\0");
        put_field(
            &mut raw,
            sw.field("prev_pid").unwrap(),
            &4242i32.to_ne_bytes(),
        );
        put_field(
            &mut raw,
            sw.field("prev_state").unwrap(),
            &1i64.to_ne_bytes(),
        );
        put_field(&mut raw, sw.field("next_comm").unwrap(), b"swapper/1\0");
        put_field(&mut raw, sw.field("next_pid").unwrap(), &0i32.to_ne_bytes());
        raw
    }

    fn waking_raw(wk: &EventFormat) -> Vec<u8> {
        let size = wk.fixed_size();
        let mut raw = vec![0u8; size];
        put_field(
            &mut raw,
            wk.field("common_type").unwrap(),
            &(wk.id as u16).to_ne_bytes(),
        );
        put_field(&mut raw, wk.field("comm").unwrap(), b"worker\0");
        put_field(&mut raw, wk.field("pid").unwrap(), &777i32.to_ne_bytes());
        raw
    }

    /// Sample body for sample_type ST.
    fn sample_body(
        id: u64,
        pid: u32,
        tid: u32,
        time: u64,
        cpu: u32,
        ips: &[u64],
        raw: &[u8],
    ) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&id.to_ne_bytes());
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&(ips.len() as u64).to_ne_bytes());
        for ip in ips {
            b.extend_from_slice(&ip.to_ne_bytes());
        }
        // RAW: u32 size + data, padded so the record is 8-byte aligned (the
        // kernel counts the padding in size).
        let mut data = raw.to_vec();
        while !(4 + data.len()).is_multiple_of(8) {
            data.push(0);
        }
        b.extend_from_slice(&(data.len() as u32).to_ne_bytes());
        b.extend_from_slice(&data);
        b
    }

    fn trailer(pid: u32, tid: u32, time: u64, cpu: u32, id: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&time.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&id.to_ne_bytes());
        b
    }

    const K: u64 = CONTEXT_KERNEL;
    const U: u64 = CONTEXT_USER;

    /// A per-task switch-out sample (sample_type ST | READ) of thread 4242
    /// by event `id` on `cpu` at `time`, whose time_running is `running`.
    fn read_switch(id: u64, cpu: u32, time: u64, running: u64, state: i64) -> Vec<u8> {
        let (sw, _) = formats();
        let mut raw = switch_raw(&sw);
        put_field(
            &mut raw,
            sw.field("prev_state").unwrap(),
            &state.to_ne_bytes(),
        );
        let plain = sample_body(id, 4242, 4242, time, cpu, &[], &raw);
        // READ (count, time_running) goes right before the callchain.
        let at = 8 + 8 + 8 + 8;
        let mut body = plain[..at].to_vec();
        body.extend_from_slice(&1u64.to_ne_bytes());
        body.extend_from_slice(&running.to_ne_bytes());
        body.extend_from_slice(&plain[at..]);
        header(RECORD_SAMPLE, 1, &body)
    }

    fn ran_since(d: &mut Decoder, rec: &[u8]) -> RanSince {
        match d.decode(rec).unwrap().unwrap().kind {
            EventKind::Switch(s) => s.prev_ran_since,
            other => panic!("{other:?}"),
        }
    }

    /// A per-task switch-out: event id, cpu, time, time_running, prev_state.
    type ReadSwitch = (u64, u32, u64, u64, i64);

    /// Decodes per-task switch-outs in turn and checks the switch-in each
    /// tells (0: it cannot).
    fn expect_since(d: &mut Decoder, samples: &[(ReadSwitch, u64)]) {
        for &((id, cpu, time, running, state), want) in samples {
            let want = match want {
                0 => RanSince::Unknown,
                t => RanSince::At(t),
            };
            let got = ran_since(d, &read_switch(id, cpu, time, running, state));
            assert_eq!(got, want, "sample of event {id} at {time}");
        }
    }

    #[test]
    fn per_task_switch_outs_tell_when_their_slice_began() {
        let mut d = decoder(ST | SAMPLE_READ);
        // An inherited event: its count began with the thread.
        expect_since(
            &mut d,
            &[
                ((9, 0, 10_000, 2_000, 1), 8_000),
                ((9, 0, 50_000, 2_500, 1), 49_500),
            ],
        );
        // A loss on CPU 0: the next slice there is unknown.
        d.running().forget_cpu(0);
        expect_since(
            &mut d,
            &[
                ((9, 0, 90_000, 4_000, 1), 0),
                ((9, 0, 99_000, 4_100, 1), 98_900),
            ],
        );
        // An attached event enabled at 1000, while its thread ran.
        d.running().enabled(11, 1_000);
        expect_since(
            &mut d,
            &[((11, 1, 1_500, 600, 1), 0), ((11, 1, 9_000, 700, 1), 8_900)],
        );
        // The final switch-out (X) still tells; the thread is then
        // forgotten, so a later sample of that tid starts afresh.
        expect_since(
            &mut d,
            &[
                ((9, 0, 120_000, 4_200, 16), 119_900),
                ((9, 0, 130_000, 50, 1), 129_950),
            ],
        );
        // Samples without READ say nothing.
        let mut plain = decoder(ST);
        let (sw, _) = formats();
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(1001, 4242, 4242, 123_456, 1, &[], &switch_raw(&sw)),
        );
        assert_eq!(ran_since(&mut plain, &rec), RanSince::NotTold);
    }

    /// A switch-out sample (sample_type ST | REGS_USER | STACK_USER)
    /// whose user parts are `regs` (the ABI word, then BP, SP, IP when it
    /// is not 0) and `stack` (size, copy and dyn_size when size is not 0).
    fn dwarf_switch(regs: &[u64], stack: Option<(&[u8], u64)>) -> Vec<u8> {
        let (sw, _) = formats();
        let mut body = sample_body(1001, 4242, 4242, 9, 0, &[U, 0x401000], &switch_raw(&sw));
        for r in regs {
            body.extend_from_slice(&r.to_ne_bytes());
        }
        match stack {
            Some((copy, dyn_size)) => {
                body.extend_from_slice(&(copy.len() as u64).to_ne_bytes());
                body.extend_from_slice(copy);
                body.extend_from_slice(&dyn_size.to_ne_bytes());
            }
            None => body.extend_from_slice(&0u64.to_ne_bytes()),
        }
        header(RECORD_SAMPLE, 1, &body)
    }

    fn user_copy_of(d: &mut Decoder, rec: &[u8]) -> Result<Option<Box<UserCopy>>> {
        match d.decode(rec)?.map(|e| e.kind) {
            Some(EventKind::Switch(s)) => Ok(s.user_copy),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn decodes_user_registers_and_the_stack_copied() {
        let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
        let stack: Vec<u8> = (0..64).collect();
        // The kernel copied 40 of the 64 bytes it made room for.
        let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], Some((&stack, 40)));
        let copy = user_copy_of(&mut d, &rec).unwrap().expect("a copy");
        assert_eq!((copy.bp, copy.sp, copy.ip), (0xb0, 0x5000, 0x401234));
        assert_eq!(&copy.stack[..], &stack[..40]);
        // All of it.
        let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], Some((&stack, 64)));
        assert_eq!(user_copy_of(&mut d, &rec).unwrap().unwrap().stack.len(), 64);
        // Registers but nothing copied (size 0, and no dyn_size after it).
        let rec = dwarf_switch(&[2, 0xb0, 0x5000, 0x401234], None);
        assert!(
            user_copy_of(&mut d, &rec)
                .unwrap()
                .unwrap()
                .stack
                .is_empty()
        );
        // No user context (a kernel thread): ABI 0, no registers, no copy.
        let rec = dwarf_switch(&[0], None);
        assert_eq!(user_copy_of(&mut d, &rec).unwrap(), None);
        // The fp chain is still there for what the copy cannot reach.
        let Some(EventKind::Switch(s)) = d.decode(&rec).unwrap().map(|e| e.kind) else {
            panic!()
        };
        assert_eq!(s.stack.user(), [0x401000]);
    }

    #[test]
    fn a_stack_copy_that_lies_about_its_size_is_an_error() {
        let mut d = decoder(ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER);
        let stack = [7u8; 16];
        // More copied than room was made for.
        let rec = dwarf_switch(&[2, 1, 2, 3], Some((&stack, 17)));
        assert!(user_copy_of(&mut d, &rec).is_err());
        // Cut inside the registers, the copy, or before dyn_size.
        let whole = dwarf_switch(&[2, 1, 2, 3], Some((&stack, 16)));
        for cut in [8, 16, 40, 48] {
            let mut rec = whole[..whole.len() - cut].to_vec();
            let n = rec.len() as u16;
            rec[6..8].copy_from_slice(&n.to_ne_bytes());
            assert!(user_copy_of(&mut d, &rec).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn an_interrupts_wakeup_has_no_user_stack_under_dwarf() {
        let (_, wk) = formats();
        let st = ST | SAMPLE_REGS_USER | SAMPLE_STACK_USER;
        let waking = |flags: u8| {
            let mut raw = waking_raw(&wk);
            put_field(&mut raw, wk.field("common_flags").unwrap(), &[flags]);
            let ips = [K, 0xffffffff813a89c4, 0xffffffff81000130, U, 0x401000];
            let mut body = sample_body(1002, 50, 51, 9, 0, &ips, &raw);
            for r in [2u64, 1, 0x5000, 0x401000] {
                body.extend_from_slice(&r.to_ne_bytes());
            }
            body.extend_from_slice(&8u64.to_ne_bytes());
            body.extend_from_slice(&[0; 8]);
            body.extend_from_slice(&8u64.to_ne_bytes());
            header(RECORD_SAMPLE, 1, &body)
        };
        let mut d = decoder(st);
        let decode = |d: &mut Decoder, rec: &[u8]| match d.decode(rec).unwrap().unwrap().kind {
            EventKind::Waking(w) => w,
            other => panic!("{other:?}"),
        };
        // Process context (softirq served there included): kept.
        for flags in [0, 0x01, 0x10] {
            let w = decode(&mut d, &waking(flags));
            assert!(w.user_copy.is_some(), "flags {flags:#x}");
            assert_eq!(w.stack.user(), [0x401000]);
        }
        // Hard interrupt or NMI: the user stack is the interrupted task's.
        for flags in [0x08, 0x09, 0x40] {
            let w = decode(&mut d, &waking(flags));
            assert!(w.user_copy.is_none(), "flags {flags:#x}");
            assert!(w.stack.user().is_empty());
            assert_eq!(w.stack.kernel(), [0xffffffff81000130], "kernel part kept");
        }
        // A softirq run on an interrupt's exit: its stack passes the
        // interrupt entry code.
        d.set_probes(crate::probes::ProbeRanges::from_kallsyms(
            "ffffffff81000100 T __irqentry_text_start\n\
             ffffffff81000120 T asm_common_interrupt\n\
             ffffffff81000140 T __irqentry_text_end\n",
        ));
        let w = decode(&mut d, &waking(0x10));
        assert!(w.user_copy.is_none());
        assert!(w.stack.user().is_empty());
        // Without copies (fp), the stack is left as bcc leaves it.
        let mut fp = decoder(ST);
        let mut rec = waking(0x08);
        // Drop the user regs and stack words (4 + 1 + 1 + 1 words).
        rec.truncate(rec.len() - 7 * 8);
        let n = rec.len() as u16;
        rec[6..8].copy_from_slice(&n.to_ne_bytes());
        assert_eq!(decode(&mut fp, &rec).stack.user(), [0x401000]);
    }

    #[test]
    fn decodes_switch_sample() {
        let (sw, _) = formats();
        let mut d = decoder(ST);
        let ips = [
            K,
            0xffffffff81000010,
            0xffffffff81000020,
            U,
            0x401000,
            0x402000,
        ];
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(1001, 4242, 4242, 123_456, 1, &ips, &switch_raw(&sw)),
        );
        let ev = d.decode(&rec).unwrap().unwrap();
        assert_eq!(ev.time, 123_456);
        assert_eq!(ev.cpu, 1);
        let EventKind::Switch(s) = ev.kind else {
            panic!("{:?}", ev.kind)
        };
        assert_eq!(s.prev_tid, 4242);
        assert_eq!(s.prev_tgid, 4242);
        assert_eq!(s.prev_comm.as_str(), "sleep");
        assert_eq!(s.prev_state, 1);
        assert_eq!(s.next_tid, 0);
        assert_eq!(s.next_comm.as_str(), "swapper/1");
        assert_eq!(
            s.stack.kernel(),
            vec![0xffffffff81000010, 0xffffffff81000020]
        );
        assert_eq!(s.stack.user(), vec![0x401000, 0x402000]);
    }

    #[test]
    fn decodes_waking_sample_and_drops_ttwu_frame() {
        let (_, wk) = formats();
        let mut d = decoder(ST);
        let ttwu = 0xffffffff813a89c4;
        let ips = [
            K,
            ttwu,
            0xffffffff81465339,
            0xffffffff81000130,
            U,
            0x7f00_0000_1000,
        ];
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(1002, 100, 101, 99, 0, &ips, &waking_raw(&wk)),
        );
        let ev = d.decode(&rec).unwrap().unwrap();
        let EventKind::Waking(w) = ev.kind else {
            panic!()
        };
        assert_eq!((w.waker_tgid, w.waker_tid, w.wakee_tid), (100, 101, 777));
        assert_eq!(w.wakee_comm.as_str(), "worker");
        assert_eq!(
            w.stack.kernel(),
            vec![0xffffffff81465339, 0xffffffff81000130]
        );
        assert_eq!(w.stack.user(), vec![0x7f00_0000_1000]);
    }

    #[test]
    fn unknown_identifier_falls_back_on_common_type() {
        let (sw, wk) = formats();
        let mut d = decoder(ST);
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(5, 1, 1, 1, 0, &[], &switch_raw(&sw)),
        );
        assert!(matches!(
            d.decode(&rec).unwrap().unwrap().kind,
            EventKind::Switch(_)
        ));
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(5, 1, 1, 1, 0, &[], &waking_raw(&wk)),
        );
        assert!(matches!(
            d.decode(&rec).unwrap().unwrap().kind,
            EventKind::Waking(_)
        ));
        // Neither: malformed.
        let mut raw = waking_raw(&wk);
        raw[0] = 0xee;
        raw[1] = 0xee;
        let rec = header(RECORD_SAMPLE, 1, &sample_body(5, 1, 1, 1, 0, &[], &raw));
        assert!(d.decode(&rec).is_err());
    }

    #[test]
    fn without_callchain_sample_type() {
        let (sw, wk) = formats();
        let st = ST & !SAMPLE_CALLCHAIN;
        let mut d = Decoder::new(st, &sw, &wk).unwrap();
        d.add_id(1, Tracepoint::Switch);
        let mut body = sample_body(1, 9, 9, 5, 3, &[], &switch_raw(&sw));
        body.drain(32..40); // remove the `nr` word
        let ev = d.decode(&header(RECORD_SAMPLE, 0, &body)).unwrap().unwrap();
        assert_eq!((ev.time, ev.cpu), (5, 3));
        let EventKind::Switch(s) = ev.kind else {
            panic!()
        };
        assert_eq!(s.prev_tid, 4242);
        assert_eq!(s.stack, Callchain::default());
    }

    #[test]
    fn callchain_splitting() {
        let hv = (-32i64) as u64;
        let guest = (-2048i64) as u64;
        let guest_kernel = (-2176i64) as u64;
        let c = split_callchain(&[K, 1, 2, U, 3, hv, 4, K, 5, guest, guest_kernel, 6, U, 7]);
        assert_eq!(c.kernel(), vec![1, 2, 5]);
        assert_eq!(c.user(), vec![3, 7]);
        // Anything >= PERF_CONTEXT_MAX is a marker, even unknown ones.
        let c = split_callchain(&[K, CONTEXT_MAX, 8, (-1i64) as u64, 9]);
        assert!(c.kernel().is_empty() && c.user().is_empty());
        // No marker: classified by address.
        let c = split_callchain(&[0xffffffff81000000, 0x1000]);
        assert_eq!(c.kernel(), vec![0xffffffff81000000]);
        assert_eq!(c.user(), vec![0x1000]);
        assert_eq!(split_callchain(&[]), Callchain::default());
        // A waking sample with no kernel part keeps its user part intact.
        let (_, wk) = formats();
        let mut d = decoder(ST);
        let rec = header(
            RECORD_SAMPLE,
            1,
            &sample_body(1002, 1, 1, 1, 0, &[U, 0x10], &waking_raw(&wk)),
        );
        let EventKind::Waking(w) = d.decode(&rec).unwrap().unwrap().kind else {
            panic!()
        };
        assert!(w.stack.kernel().is_empty());
        assert_eq!(w.stack.user(), vec![0x10]);
    }

    #[test]
    fn context_switch_records() {
        let mut d = decoder(ST);
        // Switch-in of 11 (pid 10) on CPU 1; the thread that left was 0.
        let mut b = Vec::new();
        for v in [0u32, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&trailer(10, 11, 7777, 1, 1001));
        let ev = d
            .decode(&header(RECORD_SWITCH_CPU_WIDE, 0, &b))
            .unwrap()
            .unwrap();
        assert_eq!((ev.time, ev.cpu), (7777, 1));
        assert_eq!(
            ev.kind,
            EventKind::SwitchIn(SwitchIn {
                tid: 11,
                tgid: 10,
                prev_tid: 0
            })
        );
        // Switch-outs are skipped: sched_switch reports them.
        let out = d
            .decode(&header(RECORD_SWITCH_CPU_WIDE, RECORD_MISC_SWITCH_OUT, &b))
            .unwrap();
        assert!(out.is_none());
        // Truncated body: an error, not a panic.
        assert!(
            d.decode(&header(RECORD_SWITCH_CPU_WIDE, 0, &b[..6]))
                .is_err()
        );
    }

    #[test]
    fn per_task_switch_records() {
        let mut d = decoder(ST);
        // A per-task PERF_RECORD_SWITCH has only the sample_id trailer.
        let b = trailer(10, 11, 8888, 0, 1001);
        let ev = d.decode(&header(RECORD_SWITCH, 0, &b)).unwrap().unwrap();
        assert_eq!((ev.time, ev.cpu), (8888, 0));
        assert_eq!(
            ev.kind,
            EventKind::SwitchIn(SwitchIn {
                tid: 11,
                tgid: 10,
                prev_tid: 0
            })
        );
        let out = d
            .decode(&header(RECORD_SWITCH, RECORD_MISC_SWITCH_OUT, &b))
            .unwrap();
        assert!(out.is_none());
        assert!(d.decode(&header(RECORD_SWITCH, 0, &b[..8])).is_err());
    }

    #[test]
    fn side_band_records_use_trailer() {
        let mut d = decoder(ST);
        let tr = trailer(10, 11, 5555, 1, 1001);

        // FORK: pid, ppid, tid, ptid, time
        let mut b = Vec::new();
        for v in [200u32, 100, 201, 101] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&5554u64.to_ne_bytes());
        b.extend_from_slice(&tr);
        let ev = d.decode(&header(RECORD_FORK, 0, &b)).unwrap().unwrap();
        assert_eq!((ev.time, ev.cpu), (5555, 1));
        assert_eq!(
            ev.kind,
            EventKind::Fork(Fork {
                parent_tgid: 100,
                parent_tid: 101,
                tgid: 200,
                tid: 201
            })
        );
        let ev = d.decode(&header(RECORD_EXIT, 0, &b)).unwrap().unwrap();
        assert_eq!(
            ev.kind,
            EventKind::Exit(Exit {
                tgid: 200,
                tid: 201
            })
        );

        // COMM with exec flag; name padded to 8 bytes.
        let mut b = Vec::new();
        b.extend_from_slice(&300u32.to_ne_bytes());
        b.extend_from_slice(&300u32.to_ne_bytes());
        b.extend_from_slice(b"sleep\0\0\0");
        b.extend_from_slice(&tr);
        let ev = d
            .decode(&header(RECORD_COMM, RECORD_MISC_COMM_EXEC, &b))
            .unwrap()
            .unwrap();
        let EventKind::Comm(c) = ev.kind else {
            panic!()
        };
        assert_eq!((c.tgid, c.tid, c.exec), (300, 300, true));
        assert_eq!(c.comm.as_str(), "sleep");
        let ev = d.decode(&header(RECORD_COMM, 0, &b)).unwrap().unwrap();
        let EventKind::Comm(c) = ev.kind else {
            panic!()
        };
        assert!(!c.exec);

        // MMAP2
        let mut b = Vec::new();
        b.extend_from_slice(&300u32.to_ne_bytes());
        b.extend_from_slice(&301u32.to_ne_bytes());
        for v in [0x5555_0000u64, 0x2000, 0x1000] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&8u32.to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&4242u64.to_ne_bytes());
        b.extend_from_slice(&[0u8; 8]);
        b.extend_from_slice(&((libc::PROT_READ | libc::PROT_EXEC) as u32).to_ne_bytes());
        b.extend_from_slice(&(libc::MAP_PRIVATE as u32).to_ne_bytes());
        b.extend_from_slice(b"/usr/bin/sleep\0\0");
        b.extend_from_slice(&tr);
        let ev = d.decode(&header(RECORD_MMAP2, 2, &b)).unwrap().unwrap();
        assert_eq!(ev.time, 5555);
        assert_eq!(
            ev.kind,
            EventKind::Mmap(Mmap {
                tgid: 300,
                tid: 301,
                start: 0x5555_0000,
                len: 0x2000,
                pgoff: 0x1000,
                path: "/usr/bin/sleep".into(),
                executable: true,
                file: Some(FileKey {
                    dev: libc::makedev(8, 1),
                    ino: 4242,
                }),
            })
        );
        // Non-executable MMAP2.
        let prot_at = 8 + 24 + 24;
        b[prot_at..prot_at + 4].copy_from_slice(&(libc::PROT_READ as u32).to_ne_bytes());
        let EventKind::Mmap(m) = d
            .decode(&header(RECORD_MMAP2, 2, &b))
            .unwrap()
            .unwrap()
            .kind
        else {
            panic!()
        };
        assert!(!m.executable);

        // Old-style MMAP: always executable.
        let mut b = Vec::new();
        b.extend_from_slice(&300u32.to_ne_bytes());
        b.extend_from_slice(&300u32.to_ne_bytes());
        for v in [0x1000u64, 0x1000, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(b"[vdso]\0\0");
        b.extend_from_slice(&tr);
        let EventKind::Mmap(m) = d.decode(&header(RECORD_MMAP, 2, &b)).unwrap().unwrap().kind
        else {
            panic!()
        };
        assert_eq!(m.path, "[vdso]");
        assert!(m.executable);
    }

    #[test]
    fn lost_records() {
        let mut d = decoder(ST);
        let tr = trailer(0, 0, 777, 3, 1001);
        let mut b = Vec::new();
        b.extend_from_slice(&1001u64.to_ne_bytes());
        b.extend_from_slice(&42u64.to_ne_bytes());
        b.extend_from_slice(&tr);
        let ev = d.decode(&header(RECORD_LOST, 0, &b)).unwrap().unwrap();
        assert_eq!((ev.time, ev.cpu), (777, 3));
        assert_eq!(
            ev.kind,
            EventKind::Lost(Lost {
                records: 42,
                until: 777
            })
        );

        let mut b = Vec::new();
        b.extend_from_slice(&7u64.to_ne_bytes());
        b.extend_from_slice(&tr);
        let ev = d
            .decode(&header(RECORD_LOST_SAMPLES, 0, &b))
            .unwrap()
            .unwrap();
        assert_eq!(
            ev.kind,
            EventKind::Lost(Lost {
                records: 7,
                until: 777
            })
        );
    }

    #[test]
    fn trailer_layout_without_identifier() {
        // TID|TIME|ID|CPU: pid,tid, time, id, cpu,res.
        let (sw, wk) = formats();
        let st = SAMPLE_TID | SAMPLE_TIME | SAMPLE_ID | SAMPLE_CPU | SAMPLE_RAW;
        let d = Decoder::new(st, &sw, &wk).unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&[0xab; 16]); // some record body
        for v in [5u32, 6] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&1234u64.to_ne_bytes());
        b.extend_from_slice(&99u64.to_ne_bytes());
        b.extend_from_slice(&2u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        let t = d.parse_trailer(&b).unwrap();
        assert_eq!(
            t,
            SampleId {
                pid: 5,
                tid: 6,
                time: 1234,
                cpu: 2,
                id: Some(99)
            }
        );
    }

    #[test]
    fn unknown_records_are_skipped() {
        let mut d = decoder(ST);
        let throttle = header(5, 0, &[0u8; 24 + 32]);
        assert_eq!(d.decode(&throttle).unwrap(), None);
        assert_eq!(d.decode(&header(0xffff, 0, &[])).unwrap(), None);
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let (sw, wk) = formats();
        let mut d = decoder(ST);
        let ips = [K, 0xffffffff81000010, U, 0x401000];
        let full = header(
            RECORD_SAMPLE,
            1,
            &sample_body(1001, 1, 1, 1, 0, &ips, &switch_raw(&sw)),
        );
        assert!(d.decode(&full).is_ok());
        for cut in 0..full.len() {
            let mut r = full[..cut].to_vec();
            // Keep the header consistent with the cut length when possible,
            // so the body walk (not just the size check) is exercised.
            if r.len() >= 8 {
                let n = r.len() as u16;
                r[6..8].copy_from_slice(&n.to_ne_bytes());
            }
            assert!(d.decode(&r).is_err(), "cut at {cut}");
        }
        // Absurd callchain length.
        let mut body = sample_body(1001, 1, 1, 1, 0, &[], &switch_raw(&sw));
        body[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(d.decode(&header(RECORD_SAMPLE, 0, &body)).is_err());
        // RAW payload shorter than the fields.
        let body = sample_body(1002, 1, 1, 1, 0, &[], &waking_raw(&wk)[..20]);
        assert!(d.decode(&header(RECORD_SAMPLE, 0, &body)).is_err());
        // Side-band records too short for their trailer or body.
        for ty in [
            RECORD_FORK,
            RECORD_EXIT,
            RECORD_COMM,
            RECORD_MMAP,
            RECORD_MMAP2,
            RECORD_LOST,
            RECORD_LOST_SAMPLES,
        ] {
            assert!(d.decode(&header(ty, 0, &[0u8; 8])).is_err(), "type {ty}");
            assert!(d.decode(&header(ty, 0, &[0u8; 32])).is_err(), "type {ty}");
        }
        // Header size disagreeing with the slice.
        let mut r = full.clone();
        r[6..8].copy_from_slice(&8u16.to_ne_bytes());
        assert!(d.decode(&r).is_err());
    }

    #[test]
    fn decoder_rejects_bad_sample_types() {
        let (sw, wk) = formats();
        // PERF_SAMPLE_BRANCH_STACK: not walked.
        assert!(Decoder::new(ST | (1 << 11), &sw, &wk).is_err());
        assert!(Decoder::new(SAMPLE_TID | SAMPLE_TIME, &sw, &wk).is_err());
        assert!(Decoder::new(ST, &sw, &sw).is_err());
        assert!(Decoder::new(ST, &wk, &sw).is_err()); // fields missing
    }
}
