//! Interpretation of perf records into [`crate::event::Event`]s: which
//! tracepoint a sample is, its payload's fields, its callchain split and
//! shared, its kernel stack trimmed, and per-task switch-ins told from
//! `time_running`. The bytes are read by [`super::wire`].

use anyhow::Result;
use rustc_hash::FxHashMap;

use super::cuts::StackCuts;
use super::running::RunningClock;
use super::sys::*;
use super::wire::{Record, RecordParser, Sample, WireError};
use crate::bytes::u64s;
use crate::event::copies::{Charge, CopyBudget};
use crate::event::{Callchain, ChainCache, Event, EventKind, OnCpu, Ran, RanSince, UserCopy};
use crate::kallsyms::machinery::ProbeRanges;
use crate::source::probes::kernel_start;
use crate::source::tracepoint::sched::SchedFields;
use crate::source::tracepoint::{EventFormat, FieldError};
use crate::unwind::memo::{Memo, Start};

pub(crate) use crate::source::tracepoint::sched::Tracepoint;

/// A record that could not be made an event. Readers count these as
/// malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("tracepoint payload: {0}")]
    Field(#[from] FieldError),
    #[error("sample of unknown tracepoint (id {id:?}, common_type {common_type})")]
    UnknownTracepoint { id: Option<u64>, common_type: u64 },
    #[error("sched_process_exit sample without its count")]
    ExitWithoutCount,
}

/// Decodes records produced by events opened with one `sample_type`.
#[derive(Clone, Debug)]
pub(crate) struct Decoder {
    parser: RecordParser,
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
    /// When set, the user stack copies kept until unwound: past it,
    /// samples are cut ([`StackCuts`]).
    copies: Option<CopyBudget>,
    cuts: StackCuts,
    /// Entries being put together for a cut or recalled sample's chain.
    scratch: Vec<u8>,
    /// Unwinds to recall instead of copying a sample's stack.
    memo: Option<Memo>,
    /// The frames recalled last.
    frames: Vec<u64>,
    /// The on-CPU sampling events (`--wall`): see [`Clocks`].
    clocks: Clocks,
}

/// The on-CPU sampling events (`--wall`): their period, and which thread
/// each was opened for. A thread created by an attached one inherits its
/// events and may be attached itself too: its samples would then come
/// twice as often, from two events. Only those of the first event a
/// thread's samples came from are kept, until that event's thread exits
/// (its events, and the copies it handed down, are then closed).
///
/// A sample stands for the CPU time its event counted since the stream's
/// previous sample: the growth of its `time_running` where samples carry
/// it (`PERF_SAMPLE_READ`), else the period. The kernel's timer takes one
/// sample however late it fires, so when it fires later than a period (an
/// overloaded hypervisor) the period alone undercounts.
#[derive(Clone, Debug, Default)]
struct Clocks {
    /// Event id → the thread it was opened for (0: a CPU's), and the
    /// nanoseconds of CPU time between its samples.
    opened_for: FxHashMap<u64, (u32, u64)>,
    /// The threads events were opened for.
    openers: rustc_hash::FxHashSet<u32>,
    /// Sampled thread → the thread whose events its samples are kept from.
    kept_from: FxHashMap<u32, u32>,
    /// Each stream's `time_running` at its last sample, by the thread it
    /// samples (0 for a CPU's event); `None` once a loss on its CPU may
    /// have hidden a sample since.
    marks: FxHashMap<u32, Vec<ClockMark>>,
}

/// Where one sampling stream (an event on a CPU) stood at its last sample.
#[derive(Clone, Copy, Debug)]
struct ClockMark {
    cpu: u32,
    id: u64,
    running: Option<u64>,
}

/// [`split_entries`] over a list of entries.
#[cfg(test)]
pub(crate) fn split_callchain(ips: &[u64]) -> Callchain {
    let bytes: Vec<u8> = ips.iter().flat_map(|ip| ip.to_ne_bytes()).collect();
    split_entries(&bytes, &mut ChainCache::new())
}

/// Splits callchain entries, as they are in a record (native-endian
/// u64s), into kernel and user parts, dropping every `PERF_CONTEXT_*`
/// marker (anything `>= PERF_CONTEXT_MAX`). Entries under a hypervisor or
/// guest marker are dropped; entries before any marker are classified by
/// address (upper half = kernel). The chain is shared through `cache` with
/// the samples that had the same entries; each run of frames between two
/// markers is copied at once.
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
            let run = u64s(rest)
                .position(|ip| ip >= CONTEXT_MAX)
                .unwrap_or(rest.len() / 8);
            let (frames, tail) = rest.split_at(run * 8);
            match ctx {
                Ctx::Kernel => kernel.extend(u64s(frames)),
                Ctx::User => user.extend(u64s(frames)),
                Ctx::Other => {}
                Ctx::Unknown => {
                    for ip in u64s(frames) {
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
        Ok(Decoder {
            parser: RecordParser::new(sample_type)?,
            ids: FxHashMap::default(),
            sched: SchedFields::new(switch, waking)?,
            probes: ProbeRanges::default(),
            chains: ChainCache::new(),
            running: RunningClock::new(),
            copies: None,
            cuts: StackCuts::default(),
            scratch: Vec::new(),
            memo: None,
            frames: Vec::new(),
            clocks: Clocks::default(),
        })
    }

    /// Registers the id of an on-CPU sampling event opened for thread
    /// `opened_for` (0: a CPU's), which samples every `period_ns` of CPU
    /// time.
    pub(crate) fn add_clock(&mut self, id: u64, opened_for: u32, period_ns: u64) {
        self.add_id(id, Tracepoint::Clock);
        self.clocks.opened_for.insert(id, (opened_for, period_ns));
        self.clocks.openers.insert(opened_for);
    }

    /// Recalls user stacks unwound before from `memo` rather than copying
    /// them, from now on.
    pub(crate) fn recall_from(&mut self, memo: Memo) {
        self.memo = Some(memo);
    }

    /// The memo stacks are recalled from, if one was set.
    pub(crate) fn memo(&self) -> Option<Memo> {
        self.memo.clone()
    }

    /// Keeps user stack copies within `budget` from now on, cutting the
    /// samples whose copy would pass it.
    pub(crate) fn cut_copies_past(&mut self, budget: CopyBudget) {
        self.copies = Some(budget);
    }

    /// The budget copies are kept within, if one was set.
    pub(crate) fn copy_budget(&self) -> Option<CopyBudget> {
        self.copies.clone()
    }

    /// The stacks cut so far, and the note that says so.
    pub(crate) fn cuts(&self) -> (u64, Option<String>) {
        let budget = self.copies.as_ref().map_or(0, CopyBudget::limit);
        (self.cuts.total(), self.cuts.note(budget))
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
        self.parser.sample_type()
    }

    /// Samples dump the user registers of `mask` (`sample_regs_user`),
    /// not only those this tool asks for.
    pub(crate) fn set_user_regs(&mut self, mask: u64) -> Result<()> {
        self.parser.set_user_regs(mask)
    }

    /// Switch-ins told by per-task events' counts.
    pub(crate) fn running(&mut self) -> &mut RunningClock {
        &mut self.running
    }

    /// Records may have been lost on `cpu`'s ring: what the next samples
    /// there tell since the last is unknown.
    pub(crate) fn lost_on(&mut self, cpu: u32) {
        self.running.forget_cpu(cpu);
        self.clocks.forget_cpu(cpu);
    }

    /// Decodes one whole record (header included), kernel stacks finished
    /// ([`Decoder::finish_stacks`]). `Ok(None)` for record types that carry
    /// nothing we use; `Err` for malformed records.
    pub(crate) fn decode(&mut self, rec: &[u8]) -> Result<Option<Event>, DecodeError> {
        let mut ev = self.decode_unfinished(rec)?;
        if let Some(ev) = &mut ev {
            self.finish_stacks(ev);
        }
        Ok(ev)
    }

    /// Trims a sample's kernel stack as the report shows it: with more
    /// than one tracer attached, callchains start inside the tracepoint's
    /// iterator (trimmed with the ranges of [`Decoder::set_probes`]); and a
    /// wakeup's first frame left is the tracepoint's site inside
    /// `try_to_wake_up`, whose caller is where its stack starts. Apply once
    /// per event, after the probe ranges are set.
    ///
    /// A wakeup's context is settled by its kernel stack
    /// ([`crate::event::Waking::settle`]): an interrupt's loses its user stack, which is
    /// of whatever task the interrupt happened to land on.
    pub(crate) fn finish_stacks(&self, ev: &mut Event) {
        match &mut ev.kind {
            EventKind::Switch(s) => {
                let start = kernel_start(&self.probes, s.stack.kernel(), Tracepoint::Switch);
                s.stack.skip_kernel(start);
            }
            EventKind::Waking(w) => {
                w.settle(self.probes.irq_entry_frame(w.stack.kernel()));
                let start = kernel_start(&self.probes, w.stack.kernel(), Tracepoint::Waking);
                w.stack.skip_kernel(start);
            }
            _ => {}
        }
    }

    /// [`Decoder::decode`] without [`Decoder::finish_stacks`]: a backend
    /// that reads before kallsyms is loaded finishes the stacks later.
    pub(crate) fn decode_unfinished(&mut self, rec: &[u8]) -> Result<Option<Event>, DecodeError> {
        match self.parser.parse(rec)? {
            Record::Sample(s) => self.interpret_sample(s),
            Record::SideBand { kind, sid } => {
                self.note_code_change(&kind, sid.time);
                match &kind {
                    EventKind::Fork(f) => self.clocks.forget(f.tid),
                    EventKind::Exit(e) => self.clocks.forget(e.tid),
                    _ => {}
                }
                Ok(Some(Event {
                    time: sid.time,
                    cpu: sid.cpu,
                    kind,
                }))
            }
            Record::Ignored => Ok(None),
        }
    }

    fn tracepoint_of(&self, s: &Sample<'_>) -> Result<Tracepoint, DecodeError> {
        if let Some(id) = s.id
            && let Some(&tp) = self.ids.get(&id)
        {
            return Ok(tp);
        }
        // Unknown or absent id: the payload's common_type is the tracepoint id.
        let ty = self.sched.common_type(s.raw)?;
        self.sched
            .tracepoint(ty)
            .ok_or(DecodeError::UnknownTracepoint {
                id: s.id,
                common_type: ty,
            })
    }

    /// A sample's event: a tracepoint hit, an on-CPU sample, or a traced
    /// thread's exit; `None` for an on-CPU sample taken twice.
    fn interpret_sample(&mut self, s: Sample<'_>) -> Result<Option<Event>, DecodeError> {
        if let Some(id) = s.id
            && let Some(switch) = self.running.exit_of(id)
        {
            // A traced thread's sched_process_exit: only its count matters.
            let running = s.running.ok_or(DecodeError::ExitWithoutCount)?;
            let since = self.running.exiting(s.tid, s.cpu, switch, s.time, running);
            return Ok(Some(Event {
                time: s.time,
                cpu: s.cpu,
                kind: EventKind::Ran(Ran { tid: s.tid, since }),
            }));
        }
        let tp = self.tracepoint_of(&s)?;
        if tp == Tracepoint::Clock && !self.clocks.keeps(&s) {
            return Ok(None);
        }
        let raw = s.raw;
        let (stack, user_copy) = match s.user_regs {
            Some(regs) if self.recalled(&s, tp, regs) => {
                let frames = std::mem::take(&mut self.frames);
                let chain = self.with_user(s.callchain_bytes, &frames);
                self.frames = frames;
                (chain, None)
            }
            Some([bp, sp, ip]) => match self.charge(s.user_stack.len(), s.tid, s.time) {
                Some(charge) => (
                    split_entries(s.callchain_bytes, &mut self.chains),
                    Some(Box::new(UserCopy {
                        ip,
                        sp,
                        bp,
                        stack: s.user_stack.into(),
                        charge,
                    })),
                ),
                None => (self.cut_chain(s.callchain_bytes, ip), None),
            },
            None => (split_entries(s.callchain_bytes, &mut self.chains), None),
        };
        let kind = match tp {
            Tracepoint::Switch => {
                let mut sw = self.sched.switch(raw, s.pid, stack)?;
                sw.user_copy = user_copy;
                sw.prev_cgroup = s.cgroup;
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
                // Settled in `finish_stacks`, which drops an interrupt's.
                w.user_copy = user_copy;
                EventKind::Waking(w)
            }
            Tracepoint::Clock => {
                let (cpu_ns, counted) = self.clocks.weight_of(&s);
                EventKind::OnCpu(OnCpu {
                    tid: s.tid,
                    tgid: s.pid,
                    stack,
                    user_copy,
                    cpu_ns,
                    counted,
                    cgroup: s.cgroup,
                })
            }
        };
        Ok(Some(Event {
            time: s.time,
            cpu: s.cpu,
            kind,
        }))
    }
}

impl Clocks {
    /// The CPU time on-CPU sample `s` stands for, in nanoseconds (0:
    /// unknown), and whether its event counted it: its stream's growth of
    /// `time_running` since its last sample, or all of it at the stream's
    /// first (the event counted from its thread's creation or its enable);
    /// else the period, which a recording's sample carries.
    fn weight_of(&mut self, s: &Sample<'_>) -> (u64, bool) {
        let opened = s.id.and_then(|id| self.opened_for.get(&id)).copied();
        let period = s.period.or(opened.map(|(_, p)| p)).unwrap_or(0);
        let (Some(running), Some(id), Some((opened_for, _))) = (s.running, s.id, opened) else {
            return (period, false);
        };
        let key = if opened_for == 0 { 0 } else { s.tid };
        let marks = self.marks.entry(key).or_default();
        let last = match marks.iter_mut().find(|m| m.cpu == s.cpu && m.id == id) {
            Some(m) => m.running.replace(running).ok_or(()),
            None => {
                marks.push(ClockMark {
                    cpu: s.cpu,
                    id,
                    running: Some(running),
                });
                Ok(0)
            }
        };
        match last.ok().and_then(|last| running.checked_sub(last)) {
            Some(ran) => (ran, true),
            None => (period, false),
        }
    }

    /// Records may have been lost on `cpu`'s ring: the next sample of
    /// each stream there stands for its period.
    fn forget_cpu(&mut self, cpu: u32) {
        for m in self.marks.values_mut().flatten() {
            if m.cpu == cpu {
                m.running = None;
            }
        }
    }

    /// A new or gone thread `tid`: its samples start afresh, and so do
    /// those kept from its events.
    fn forget(&mut self, tid: u32) {
        if tid != 0 {
            self.marks.remove(&tid);
        }
        self.kept_from.remove(&tid);
        if tid != 0 && self.openers.remove(&tid) {
            self.kept_from.retain(|_, from| *from != tid);
        }
    }

    /// Whether on-CPU sample `s` is kept: the first event a thread's
    /// samples came from keeps them.
    fn keeps(&mut self, s: &Sample<'_>) -> bool {
        // A CPU's event samples each thread once.
        let Some(&(from, _)) = s.id.and_then(|id| self.opened_for.get(&id)) else {
            return true;
        };
        from == 0 || *self.kept_from.entry(s.tid).or_insert(from) == from
    }
}

impl Decoder {
    /// Whether the frames of `s`'s user stack, from `regs` (BP, SP, IP),
    /// were recalled from an earlier walk into `self.frames`. A wakeup's
    /// may be a walk that ran off its copy: nothing reads a waker's stack
    /// further.
    fn recalled(&mut self, s: &Sample<'_>, tp: Tracepoint, [bp, sp, ip]: [u64; 3]) -> bool {
        let Some(memo) = &self.memo else {
            return false;
        };
        let start = Start {
            tgid: s.pid,
            ip,
            sp,
            bp,
        };
        let cut_is_final = tp == Tracepoint::Waking;
        !s.user_stack.is_empty()
            && memo.recall(start, s.time, s.user_stack, cut_is_final, &mut self.frames)
    }

    /// The chain of a sample's kernel frames (`entries`, which hold no
    /// user part) and the user frames `user`.
    fn with_user(&mut self, entries: &[u8], user: &[u64]) -> Callchain {
        self.scratch.clear();
        self.scratch.extend_from_slice(entries);
        self.scratch.extend_from_slice(&CONTEXT_USER.to_ne_bytes());
        for ip in user {
            self.scratch.extend_from_slice(&ip.to_ne_bytes());
        }
        split_entries(&self.scratch, &mut self.chains)
    }

    /// Tells the memo of a side-band record that may change what a
    /// process's stacks unwind to.
    fn note_code_change(&self, kind: &EventKind, time: u64) {
        let Some(memo) = &self.memo else {
            return;
        };
        match kind {
            EventKind::Mmap(m) if m.executable => memo.changed(m.tgid, time),
            EventKind::Comm(c) if c.exec => memo.changed(c.tgid, time),
            EventKind::Exit(e) if e.tid == e.tgid => memo.changed(e.tgid, time),
            _ => {}
        }
    }

    /// The chain of a sample whose copy was cut: its kernel frames, and
    /// its user registers' instruction for the user part when the kernel
    /// took no user callchain (it takes none beside copies).
    fn cut_chain(&mut self, entries: &[u8], ip: u64) -> Callchain {
        let chain = split_entries(entries, &mut self.chains);
        if !chain.user().is_empty() {
            return chain;
        }
        self.with_user(entries, &[ip])
    }

    /// The charge for `tid`'s copy of `bytes` at `time`, or `None` when it
    /// is cut.
    fn charge(&mut self, bytes: usize, tid: u32, time: u64) -> Option<Charge> {
        let Some(budget) = &self.copies else {
            return Some(Charge::default());
        };
        let charge = budget.take(bytes);
        if charge.is_none() {
            self.cuts.cut(tid, time);
        }
        charge
    }
}

#[cfg(test)]
mod tests;
