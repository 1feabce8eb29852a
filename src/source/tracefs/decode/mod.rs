//! Turns the records of an ftrace instance's per-CPU buffers into
//! backend-neutral [`Event`]s.
//!
//! In an ftrace buffer, the `stacktrace` and `userstacktrace` options write
//! a `kernel_stack` and a `user_stack` entry right after the event they
//! belong to, on the same CPU and in the same task's context. The
//! [`Assembler`] keeps each CPU's latest event pending until its stacks have
//! arrived (or the next event shows they never will), then completes it:
//! it trims the tracing machinery off the kernel stack so that stacks match
//! the perf backend's, and finds each thread's process (TGID), which ftrace
//! events do not carry.

use std::collections::HashMap;

use anyhow::Result;

use crate::bytes::u64s;
use crate::event::{Callchain, CgroupMove, Comm, CommChange, Event, EventKind, Fork};
use crate::kallsyms::Preload;
use crate::kallsyms::machinery::ProbeRanges;
use crate::source::probes::kernel_start;
use crate::source::tracepoint::sched::{SchedFields, Tracepoint};
use crate::source::tracepoint::{EventFormat, Field, FieldError};

/// The `ftrace:kernel_stack` and `ftrace:user_stack` entry layouts.
#[derive(Clone, Debug)]
pub(crate) struct StackFormats {
    kernel_id: u64,
    kernel_size: Field,
    kernel_caller: Field,
    user_id: u64,
    user_tgid: Field,
    user_caller: Field,
}

impl StackFormats {
    pub(crate) fn new(kernel: &EventFormat, user: &EventFormat) -> Result<StackFormats> {
        Ok(StackFormats {
            kernel_id: kernel.id as u64,
            kernel_size: kernel.field("size")?.clone(),
            kernel_caller: kernel.field("caller")?.clone(),
            user_id: user.id as u64,
            user_tgid: user.field("tgid")?.clone(),
            user_caller: user.field("caller")?.clone(),
        })
    }
}

/// Layouts of the process events enabled under `-- COMMAND`.
#[derive(Clone, Debug)]
pub(crate) struct ProcessFormats {
    fork_id: u64,
    fork_parent: Field,
    fork_child: Field,
    exec_id: u64,
    exec_filename: Field,
    exec_pid: Field,
    /// `cgroup_attach_task`, when cgroups are told ([`MoveFormat`]).
    moves: Option<MoveFormat>,
}

/// The layout of `cgroup:cgroup_attach_task`: a task moved to another
/// cgroup.
#[derive(Clone, Debug)]
struct MoveFormat {
    id: u64,
    pid: Field,
    root: Field,
    dst_id: Field,
}

impl ProcessFormats {
    pub(crate) fn new(fork: &EventFormat, exec: &EventFormat) -> Result<ProcessFormats> {
        Ok(ProcessFormats {
            fork_id: fork.id as u64,
            fork_parent: fork.field("parent_pid")?.clone(),
            fork_child: fork.field("child_pid")?.clone(),
            exec_id: exec.id as u64,
            exec_filename: exec.field("filename")?.clone(),
            exec_pid: exec.field("pid")?.clone(),
            moves: None,
        })
    }

    /// Also decodes `cgroup:cgroup_attach_task` (`attach`).
    pub(crate) fn with_moves(mut self, attach: &EventFormat) -> Result<ProcessFormats> {
        self.moves = Some(MoveFormat {
            id: attach.id as u64,
            pid: attach.field("pid")?.clone(),
            root: attach.field("dst_root")?.clone(),
            dst_id: attach.field("dst_id")?.clone(),
        });
        Ok(self)
    }
}

/// Where thread → process (TGID) answers come from when no `user_stack`
/// entry carried one.
pub(crate) trait TgidSource {
    /// The TGID of `tid`, if it can be found (in `/proc`, or in tracefs's
    /// `saved_tgids` for threads that are gone).
    fn tgid(&mut self, tid: u32) -> Option<u32>;
}

/// One CPU's event waiting for its stack entries.
struct Pending {
    time: u64,
    /// `common_pid`: the task whose context the event ran in.
    pid: u32,
    what: PendingKind,
    kernel: Option<Vec<u64>>,
    user: Option<(u32, Vec<u64>)>,
}

enum PendingKind {
    Switch(Vec<u8>),
    Waking(Vec<u8>),
    Fork { parent: u32, child: u32 },
    Exec { pid: u32, comm: Comm },
    Move(CgroupMove),
}

/// Counters of the assembler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AssemblerStats {
    /// Entries of other types (skipped).
    pub(crate) foreign: u64,
    /// Entries that could not be decoded (skipped).
    pub(crate) malformed: u64,
    /// Stack entries with no event before them to belong to.
    pub(crate) orphan_stacks: u64,
}

/// Reassembles events and their stacks, per CPU.
pub(crate) struct Assembler {
    sched: SchedFields,
    stacks: StackFormats,
    process: Option<ProcessFormats>,
    kernel_stacks: bool,
    user_stacks: bool,
    probes: Option<ProbeRanges>,
    /// Where `probes` comes from when not given.
    kallsyms: Option<Preload>,
    pending: HashMap<u32, Pending>,
    /// TGIDs learnt from `user_stack` entries and lookups.
    tgids: HashMap<u32, u32>,
    stats: AssemblerStats,
}

impl Assembler {
    /// `probes` is loaded on first use when None: from
    /// [`Assembler::with_kallsyms`] if given, else from kallsyms.
    pub(crate) fn new(
        sched: SchedFields,
        stacks: StackFormats,
        process: Option<ProcessFormats>,
        kernel_stacks: bool,
        user_stacks: bool,
        probes: Option<ProbeRanges>,
    ) -> Assembler {
        Assembler {
            sched,
            stacks,
            process,
            kernel_stacks,
            user_stacks,
            probes,
            kallsyms: None,
            pending: HashMap::new(),
            tgids: HashMap::new(),
            stats: AssemblerStats::default(),
        }
    }

    pub(crate) fn stats(&self) -> AssemblerStats {
        self.stats
    }

    /// Feeds one entry of CPU `cpu`'s buffer (in buffer order). Completed
    /// events go to `sink`.
    pub(crate) fn push(
        &mut self,
        cpu: u32,
        time: u64,
        raw: &[u8],
        tgids: &mut dyn TgidSource,
        sink: &mut dyn FnMut(Event),
    ) {
        if self.push_inner(cpu, time, raw, tgids, sink).is_err() {
            self.stats.malformed += 1;
        }
    }

    fn push_inner(
        &mut self,
        cpu: u32,
        time: u64,
        raw: &[u8],
        tgids: &mut dyn TgidSource,
        sink: &mut dyn FnMut(Event),
    ) -> Result<(), FieldError> {
        let ty = self.sched.common_type(raw)?;
        let pid = self.sched.common_pid(raw)?;
        if ty == self.stacks.kernel_id || ty == self.stacks.user_id {
            return self.attach_stack(cpu, ty, pid, raw);
        }
        let what = match self.sched.tracepoint(ty) {
            Some(Tracepoint::Switch) => {
                // Checked now so that a malformed entry is not held.
                self.sched.prev_tid(raw)?;
                PendingKind::Switch(raw.to_vec())
            }
            Some(Tracepoint::Waking) => PendingKind::Waking(raw.to_vec()),
            // tracefs has no sampling event.
            Some(Tracepoint::Clock) => return Ok(()),
            None => match &self.process {
                Some(p) if ty == p.fork_id => PendingKind::Fork {
                    parent: p.fork_parent.read_u64(raw)? as u32,
                    child: p.fork_child.read_u64(raw)? as u32,
                },
                Some(p) if ty == p.exec_id => {
                    let path = p.exec_filename.dynamic_bytes(raw)?;
                    let path = &path[..path.iter().position(|&b| b == 0).unwrap_or(path.len())];
                    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
                    PendingKind::Exec {
                        pid: p.exec_pid.read_u64(raw)? as u32,
                        comm: Comm::from_bytes(&base[..base.len().min(15)]),
                    }
                }
                Some(ProcessFormats { moves: Some(m), .. }) if ty == m.id => {
                    PendingKind::Move(CgroupMove {
                        tid: m.pid.read_u64(raw)? as u32,
                        root: m.root.read_u64(raw)? as u32,
                        id: m.dst_id.read_u64(raw)?,
                    })
                }
                _ => {
                    self.stats.foreign += 1;
                    return Ok(());
                }
            },
        };
        // A new event: whatever was pending on this CPU has all it will get.
        self.complete(cpu, tgids, sink);
        self.pending.insert(
            cpu,
            Pending {
                time,
                pid,
                what,
                kernel: None,
                user: None,
            },
        );
        Ok(())
    }

    fn attach_stack(&mut self, cpu: u32, ty: u64, pid: u32, raw: &[u8]) -> Result<(), FieldError> {
        let Some(p) = self.pending.get_mut(&cpu) else {
            self.stats.orphan_stacks += 1;
            return Ok(());
        };
        let f = &self.stacks;
        if ty == f.kernel_id {
            if p.kernel.is_some() || p.pid != pid {
                self.stats.orphan_stacks += 1;
                return Ok(());
            }
            let declared = f.kernel_size.read_u64(raw)? as usize;
            let frames = words(raw, f.kernel_caller.offset, declared);
            p.kernel = Some(frames);
        } else {
            if p.user.is_some() || p.pid != pid {
                self.stats.orphan_stacks += 1;
                return Ok(());
            }
            let tgid = f.user_tgid.read_u64(raw)? as u32;
            let slots = f.user_caller.array_len.unwrap_or(f.user_caller.size / 8);
            let frames = words(raw, f.user_caller.offset, slots);
            p.user = Some((tgid, frames));
        }
        Ok(())
    }

    /// Completes CPU `cpu`'s pending event with the stacks it has.
    fn complete(&mut self, cpu: u32, tgids: &mut dyn TgidSource, sink: &mut dyn FnMut(Event)) {
        if let Some(p) = self.pending.remove(&cpu) {
            match self.build(cpu, p, tgids) {
                Ok(ev) => sink(ev),
                Err(_) => self.stats.malformed += 1,
            }
        }
    }

    /// Completes every pending event stamped at or before `upto` (their
    /// stacks, written microseconds after them, are in by now).
    pub(crate) fn flush(
        &mut self,
        upto: u64,
        tgids: &mut dyn TgidSource,
        sink: &mut dyn FnMut(Event),
    ) {
        let mut cpus: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.time <= upto)
            .map(|(&c, _)| c)
            .collect();
        cpus.sort_unstable();
        for cpu in cpus {
            self.complete(cpu, tgids, sink);
        }
    }

    /// The threads a `sched_switch` entry switches out and in; `None` for
    /// any other entry.
    pub(crate) fn switch_tids(&self, raw: &[u8]) -> Option<(u32, u32)> {
        let ty = self.sched.common_type(raw).ok()?;
        (self.sched.tracepoint(ty)? == Tracepoint::Switch)
            .then(|| self.sched.switch_tids(raw).ok())
            .flatten()
    }

    /// True when no event waits for its stacks.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// The time of CPU `cpu`'s pending event, if any.
    #[cfg(test)]
    pub(crate) fn pending_time(&self, cpu: u32) -> Option<u64> {
        self.pending.get(&cpu).map(|p| p.time)
    }

    fn tgid_of(&mut self, tid: u32, tgids: &mut dyn TgidSource) -> u32 {
        if tid == 0 {
            return 0;
        }
        if let Some(&t) = self.tgids.get(&tid) {
            return t;
        }
        // Unknown everywhere: a thread that is its own process (kernel
        // threads always are).
        let t = tgids.tgid(tid).unwrap_or(tid);
        self.tgids.insert(tid, t);
        t
    }

    fn build(
        &mut self,
        cpu: u32,
        p: Pending,
        tgids: &mut dyn TgidSource,
    ) -> Result<Event, FieldError> {
        let (user_tgid, user) = match p.user {
            Some((tgid, frames)) if self.user_stacks => (Some(tgid), frames),
            Some((tgid, _)) => (Some(tgid), Vec::new()),
            None => (None, Vec::new()),
        };
        if let Some(t) = user_tgid
            && p.pid != 0
            && t != 0
        {
            self.tgids.insert(p.pid, t);
        }
        let kernel = match p.kernel {
            Some(frames) if self.kernel_stacks => frames,
            _ => Vec::new(),
        };
        let kind = match p.what {
            PendingKind::Switch(raw) => {
                let prev_tid = self.sched.prev_tid(&raw)?;
                let prev_tgid = self.tgid_of(prev_tid, tgids);
                let mut kernel = self.trim_kernel(kernel, Tracepoint::Switch);
                // ftrace's first entry is a return address into __schedule;
                // perf's is an address inside it. One byte back is inside
                // the call instruction, which symbolizes the same way and
                // can never fall into the next function.
                if let Some(first) = kernel.first_mut() {
                    *first = first.saturating_sub(1);
                }
                let stack = Callchain::new(&kernel, &user);
                EventKind::Switch(self.sched.switch(&raw, prev_tgid, stack)?)
            }
            PendingKind::Waking(raw) => {
                let kernel = self.trim_kernel(kernel, Tracepoint::Waking);
                let irq_entry = self.probes().irq_entry_frame(&kernel);
                let waker_tgid = self.tgid_of(p.pid, tgids);
                let stack = Callchain::new(&kernel, &user);
                let mut w = self.sched.waking(&raw, p.pid, waker_tgid, stack)?;
                // ftrace's user stack is the current task's: an interrupt's
                // wakeup has none of its own.
                w.settle(irq_entry);
                EventKind::Waking(w)
            }
            PendingKind::Fork { parent, child } => {
                let parent_tgid = self.tgid_of(parent, tgids);
                // A new thread shares its parent's process; /proc tells.
                let tgid = self.tgid_of(child, tgids);
                EventKind::Fork(Fork {
                    parent_tgid,
                    parent_tid: parent,
                    tgid,
                    tid: child,
                })
            }
            PendingKind::Exec { pid, comm } => {
                // After execve the thread leads its process.
                self.tgids.insert(pid, pid);
                EventKind::Comm(CommChange {
                    tgid: pid,
                    tid: pid,
                    comm,
                    exec: true,
                })
            }
            PendingKind::Move(m) => EventKind::CgroupMove(m),
        };
        Ok(Event {
            time: p.time,
            cpu,
            kind,
        })
    }

    /// Takes the tracing machinery's ranges from `kallsyms` when first
    /// needed.
    pub(crate) fn with_kallsyms(mut self, kallsyms: Option<Preload>) -> Assembler {
        self.kallsyms = kallsyms;
        self
    }

    /// Drops the leading frames that are not the traced code's
    /// ([`kernel_start`]).
    fn trim_kernel(&mut self, mut frames: Vec<u64>, tp: Tracepoint) -> Vec<u64> {
        if frames.is_empty() {
            return frames;
        }
        let start = kernel_start(self.probes(), &frames, tp);
        frames.drain(..start);
        frames
    }

    /// The machinery's ranges, read when first needed.
    fn probes(&mut self) -> &ProbeRanges {
        let kallsyms = &self.kallsyms;
        self.probes.get_or_insert_with(|| match kallsyms {
            Some(k) => k.wait().map(|t| t.probes.clone()).unwrap_or_default(),
            None => ProbeRanges::load().unwrap_or_default(),
        })
    }
}

/// Up to `max` native-endian u64 words starting at `offset`, stopping at
/// the end of `raw` and at the first 0 or all-ones word (end markers).
fn words(raw: &[u8], offset: usize, max: usize) -> Vec<u64> {
    let Some(bytes) = raw.get(offset..) else {
        return Vec::new();
    };
    u64s(bytes)
        .take(max)
        .take_while(|&w| w != 0 && w != u64::MAX)
        .collect()
}

#[cfg(test)]
mod tests;
