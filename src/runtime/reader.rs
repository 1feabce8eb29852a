//! When an interpreter's frames are read, and the reading: a switch-out
//! (blocked or preempted) of a CPython or HotSpot process whose native
//! stack runs the interpreter has its thread's frames read from the
//! process (on the reading thread of [`GuardedReader`], each read
//! bounded) and spliced in. The thread is found by its id in its own PID
//! namespace, which the runtime records.
//!
//! A read is used only when the thread did not run from its switch-out to
//! the end of the read: a thread that ran has other frames. It is made
//! twice over:
//! - early ([`Interpreted::read_early`], from [`super::early`]), as soon
//!   as the reader has seen the thread wait 1 ms; used if, once every
//!   record up to the read's end has been read, none shows the thread
//!   running in between ([`LastRuns::ran_between`]), or, while some are
//!   not yet read, if the reader has not seen it run since its switch-out;
//! - else when the switch-out reaches the stages; used if the reader has
//!   not seen the thread run by the end of the read.
//!
//! What is left, as for [`crate::unwind::tail`]: a thread that ran in the
//! last moments before a read whose records are not all read yet, and
//! switched out again, lends the read its new frames.
//!
//! Reads are limited to [`PER_SECOND`] a second of trace.
//!
//! A stack word can be any value: one that falls where interpreted frames
//! stand ([`is_frame`]) is replaced before splicing ([`strip_forged`]),
//! so that no process prints another's Python frames.
//!
//! Stacks that keep the interpreter's native frames are counted by why:
//! the thread ran before it could be read (a wait shorter than the
//! tool's delay), it could not be read (or past the limits below), or
//! the stack is a waker's (a running thread, whose frames are not still).
//!
//! A traced process sets what a read costs (how many threads and frames
//! it has, or forges): besides the bounds of each walk, walks take at
//! most [`SHARE`] of the time (after a burst of [`TIME_BURST`]), since the
//! stages wait for each.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::hotspot::{self, Jvms, may_hold_jvm};
use super::memory::{Memory, Miss};
use super::python::{self, Codes, may_hold_python};
use crate::event::interpreted::{Names, is_frame};
use crate::event::runs::{LastRuns, Off};
use crate::event::{Callchain, Event, EventKind};
use crate::symbolize::maps::ProcessMaps;
use crate::symbolize::read::RunBudget;
use crate::sys::host::monotonic_ns;
use crate::sys::memory::GuardedReader;
use crate::sys::open::FileKey;
use crate::sys::vma::TimeBudget;
use crate::unwind::Rate;

/// Reads made per second of trace, at most, after a burst of [`BURST`].
const PER_SECOND: u64 = 2000;
const BURST: u64 = 500;
/// Longest wait for one thread's frames.
const READ_WAIT: Duration = Duration::from_millis(100);
/// The share of time walks may take, and the burst before it counts.
const SHARE: f64 = 0.05;
const TIME_BURST: Duration = Duration::from_millis(100);
/// Bytes of interpreter files read in a run, and of one.
const PER_FILE: u64 = 64 << 20;
const PER_RUN: u64 = 256 << 20;
/// Most processes, interpreter files and threads' namespace ids
/// remembered; past it, all are forgotten.
const MAX_PROCESSES: usize = 1 << 16;
const MAX_IMAGES: usize = 1 << 12;
/// Early reads kept for the stages, at most, and how long (ns of trace)
/// before the latest one's switch-out.
const MAX_EARLY: usize = 4096;
const EARLY_KEPT_NS: u64 = 2_000_000_000;
/// Bytes of names the early reads kept may take, and what a name takes
/// besides its text.
const MAX_EARLY_BYTES: usize = 16 << 20;
const NAME_OVERHEAD: usize = 32;
/// How long (ns of trace) a JVM's thread that is no Java thread is not
/// read early again.
const NOT_JAVA_NS: u64 = 1_000_000_000;

/// How the interpreters' frames went, for the notes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Switch-outs' stacks given their Python frames.
    pub(crate) spliced: u64,
    /// Of them, by a read made as soon as the reader saw the switch-out.
    pub(crate) early: u64,
    /// Switch-outs' stacks not: the thread ran before it was read.
    pub(crate) ran: u64,
    /// Switch-outs' stacks not: the frames could not be read, or past the
    /// limits.
    pub(crate) unread: u64,
    /// Wakers' stacks in the evaluation loop.
    pub(crate) wakers: u64,
    /// Frames whose name could not be kept (past the names' cap).
    pub(crate) not_kept: u64,
    /// Walks made, and the time they took.
    pub(crate) walks: u64,
    pub(crate) walk_time: Duration,
}

/// A runtime whose frames are read: its file, and where it is loaded.
#[derive(Clone, Debug, PartialEq)]
enum Runtime {
    Python(python::Process),
    Jvm(hotspot::Process),
}

/// A runtime's file, read.
#[derive(Clone, Debug)]
enum Image {
    Python(Arc<python::Image>),
    Jvm(Arc<hotspot::Image>),
}

/// Reads interpreters' frames into the stacks of threads off CPU.
pub(crate) struct Interpreted {
    names: Names,
    runs: Arc<LastRuns>,
    reader: GuardedReader,
    images: HashMap<FileKey, Option<Image>>,
    /// By process, as of its map's version: `None` runs no interpreter.
    processes: HashMap<u32, (Option<u64>, Option<Runtime>)>,
    /// Lent to the reading thread for each read.
    codes: Option<Codes>,
    jvms: Option<Jvms>,
    /// Each thread's id in its own PID namespace.
    ns_tids: HashMap<u32, u32>,
    budget: RunBudget,
    rate: Rate,
    time: TimeBudget,
    /// Reads made as soon as the reader saw a switch-out, by thread and
    /// switch-out time.
    early: HashMap<(u32, u64), EarlyRead>,
    early_bytes: usize,
    found_any: bool,
    /// Threads of JVMs that are no Java threads, and when one was found.
    not_java: HashMap<u32, u64>,
    /// Python's, and Java's.
    pub(crate) counts: Counts,
    pub(crate) java: Counts,
}

/// A read made as soon as the reader saw a switch-out.
struct EarlyRead {
    /// The runtime read, as found in the process's map then.
    runtime: Runtime,
    /// When the read ended (`CLOCK_MONOTONIC`, as events are stamped).
    read_end: u64,
    groups: Result<Vec<Vec<String>>, Miss>,
    /// What its names take, about.
    bytes: usize,
}

impl Interpreted {
    /// Splicing names kept in `names`, with `runs` from the source.
    pub(crate) fn new(names: Names, runs: Arc<LastRuns>) -> Interpreted {
        Interpreted {
            names,
            runs,
            reader: GuardedReader::new(READ_WAIT),
            images: HashMap::new(),
            processes: HashMap::new(),
            codes: Some(Codes::default()),
            jvms: Some(Jvms::default()),
            ns_tids: HashMap::new(),
            budget: RunBudget::new(PER_FILE, PER_RUN),
            rate: Rate::new(PER_SECOND, BURST, 0),
            time: TimeBudget::new(TIME_BURST, SHARE),
            early: HashMap::new(),
            early_bytes: 0,
            found_any: false,
            not_java: HashMap::new(),
            counts: Counts::default(),
            java: Counts::default(),
        }
    }

    /// Splices the Python frames of `event`'s thread into its user stack,
    /// if it is a switch-out of a CPython process in its evaluation loop
    /// and the frames can be read (see the module); forgets what exits,
    /// forks and execs make stale.
    pub(crate) fn splice(&mut self, event: &mut Event, maps: &mut ProcessMaps) {
        let (tgid, tid, off_cpu, stack) = match &mut event.kind {
            EventKind::Switch(s) => (s.prev_tgid, s.prev_tid, true, &mut s.stack),
            EventKind::Waking(w) => (w.waker_tgid, w.waker_tid, false, &mut w.stack),
            EventKind::Exit(e) => {
                self.ns_tids.remove(&e.tid);
                if e.tid == e.tgid {
                    self.forget(e.tgid);
                }
                return;
            }
            // Another program, or a new process: its objects are elsewhere.
            EventKind::Comm(c) if c.exec => {
                self.forget(c.tgid);
                return;
            }
            EventKind::Fork(f) if f.tid == f.tgid => {
                self.forget(f.tgid);
                return;
            }
            _ => return,
        };
        if stack.user().is_empty() || tgid == 0 {
            return;
        }
        // A waker's stack is only counted: its process is looked for only
        // when a switch-out of it was.
        let process = if off_cpu {
            self.process(tgid, event.time, maps)
        } else {
            self.processes.get(&tgid).and_then(|(_, p)| p.clone())
        };
        let Some(runtime) = process else {
            return;
        };
        let runs_code = match &runtime {
            Runtime::Python(p) => stack.user().iter().any(|&a| p.in_eval(a)),
            // Before its first read, a JVM's code cache is not known.
            Runtime::Jvm(_) => match self.code_cache(tgid) {
                Some((lo, hi)) => stack.user().iter().any(|&a| (lo..hi).contains(&a)),
                None => off_cpu,
            },
        };
        if !runs_code {
            return;
        }
        let java = matches!(runtime, Runtime::Jvm(_));
        if !off_cpu {
            self.counts_of(java).wakers += 1;
            return;
        }
        if self.use_early(stack, &runtime, tgid, tid, event.time) {
            return;
        }
        if self.runs.ran_after(tid, event.time) {
            self.counts_of(java).ran += 1;
            return;
        }
        let Some(groups) = self.walk(&runtime, tgid, tid, event.time) else {
            self.counts_of(java).unread += 1;
            return;
        };
        // Read after the read: what the reader saw meanwhile counts.
        if groups.is_ok() && self.runs.ran_after(tid, event.time) {
            self.counts_of(java).ran += 1;
            return;
        }
        self.use_read(stack, &runtime, tgid, groups);
    }

    /// Uses the early read of thread `tid`'s switch-out at `time` into
    /// `stack`, if there is one that named frames of the same runtime:
    /// spliced if the thread did not run from its switch-out to the end of
    /// that read, counted as ran if it did. False when there is none, and
    /// the thread is read now.
    fn use_early(
        &mut self,
        stack: &mut Callchain,
        runtime: &Runtime,
        tgid: u32,
        tid: u32,
        time: u64,
    ) -> bool {
        let Some(early) = self.early.remove(&(tid, time)) else {
            return false;
        };
        self.early_bytes -= early.bytes;
        if early.runtime != *runtime || early.groups.is_err() {
            return false;
        }
        let java = matches!(runtime, Runtime::Jvm(_));
        let ran = match self.runs.ran_between(tid, time, early.read_end) {
            Some(ran) => ran,
            // Not every record up to the read's end is read yet: what the
            // reader has seen counts, as for a read made now.
            None => self.runs.ran_after(tid, time),
        };
        if ran {
            self.counts_of(java).ran += 1;
            return true;
        }
        let before = self.counts_of(java).spliced;
        self.use_read(stack, runtime, tgid, early.groups);
        let counts = self.counts_of(java);
        counts.early += counts.spliced - before;
        true
    }

    /// Reads thread `tid`'s frame names, within the rate and time budgets
    /// (`None` past them), counting the walk and its time.
    fn walk(
        &mut self,
        runtime: &Runtime,
        tgid: u32,
        tid: u32,
        time: u64,
    ) -> Option<Result<Vec<Vec<String>>, Miss>> {
        let started = Instant::now();
        if !self.time.allowed(started) || !self.rate.allow(time) {
            return None;
        }
        let groups = match self.ns_tid(tid) {
            Some(ns_tid) => self.read(runtime, tgid, ns_tid),
            None => Err(Miss::Unreadable),
        };
        let took = started.elapsed();
        self.time.charge(took);
        let counts = self.counts_of(matches!(runtime, Runtime::Jvm(_)));
        counts.walks += 1;
        counts.walk_time += took;
        Some(groups)
    }

    /// Splices what a read of `runtime`'s frames gave into `stack`, or
    /// counts why not.
    fn use_read(
        &mut self,
        stack: &mut Callchain,
        runtime: &Runtime,
        tgid: u32,
        read: Result<Vec<Vec<String>>, Miss>,
    ) {
        let java = matches!(runtime, Runtime::Jvm(_));
        match read {
            Ok(groups) if !groups.is_empty() => self.put(stack, runtime, tgid, &groups),
            // A JVM's thread that is no Java thread, or not in Java.
            Err(Miss::NoThread | Miss::NotWaiting) if java => {}
            _ => self.counts_of(java).unread += 1,
        }
    }

    /// Reads the frames of thread `off.tid`, which the reader has just
    /// seen switch out, if its process runs an interpreter and the thread
    /// was not seen running since; [`Interpreted::splice`] uses the read
    /// when the switch-out reaches it, if the thread did not run from its
    /// switch-out to the end of the read. Waits shorter than the stages'
    /// delay get their frames this way.
    pub(crate) fn read_early(&mut self, off: Off) {
        let Some((_, Some(runtime))) = self.processes.get(&off.tgid).cloned() else {
            return;
        };
        let java = matches!(runtime, Runtime::Jvm(_));
        let not_java = self.not_java.get(&off.tid);
        if java && not_java.is_some_and(|&t| off.time.saturating_sub(t) < NOT_JAVA_NS) {
            return;
        }
        if self.runs.ran_after(off.tid, off.time) {
            return;
        }
        let Some(groups) = self.walk(&runtime, off.tgid, off.tid, off.time) else {
            return;
        };
        let read_end = monotonic_ns();
        if java && matches!(groups, Err(Miss::NoThread)) {
            if self.not_java.len() >= MAX_PROCESSES {
                self.not_java.clear();
            }
            self.not_java.insert(off.tid, off.time);
        }
        let bytes = groups.as_ref().map_or(0, |g| {
            g.iter()
                .flatten()
                .map(|n| n.len() + NAME_OVERHEAD)
                .sum::<usize>()
        });
        self.make_room(off.time, bytes);
        let read = EarlyRead {
            runtime,
            read_end,
            groups,
            bytes,
        };
        self.early_bytes += bytes;
        if let Some(old) = self.early.insert((off.tid, off.time), read) {
            self.early_bytes -= old.bytes;
        }
    }

    /// Makes room for an early read of `bytes` at `time`: reads the stages
    /// never asked for (their stack ran no interpreted code) go, the old
    /// ones first.
    fn make_room(&mut self, time: u64, bytes: usize) {
        let full =
            |i: &Interpreted| i.early.len() >= MAX_EARLY || i.early_bytes + bytes > MAX_EARLY_BYTES;
        if !full(self) {
            return;
        }
        let keep_from = time.saturating_sub(EARLY_KEPT_NS);
        self.early.retain(|&(_, time), _| time >= keep_from);
        self.early_bytes = self.early.values().map(|r| r.bytes).sum();
        if full(self) {
            self.early.clear();
            self.early_bytes = 0;
        }
    }

    /// Whether an interpreter was found in some process.
    pub(crate) fn found_any(&self) -> bool {
        self.found_any
    }

    /// The processes found running an interpreter.
    pub(crate) fn runtime_tgids(&self) -> impl Iterator<Item = u32> + '_ {
        self.processes
            .iter()
            .filter(|(_, (_, r))| r.is_some())
            .map(|(&tgid, _)| tgid)
    }

    /// Splices `groups`, the names read of `runtime`'s frames, into
    /// `stack`.
    fn put(&mut self, stack: &mut Callchain, runtime: &Runtime, tgid: u32, groups: &[Vec<String>]) {
        let java = matches!(runtime, Runtime::Jvm(_));
        let groups: Vec<Vec<u64>> = groups
            .iter()
            .map(|g| g.iter().map(|n| self.address(n, java)).collect())
            .collect();
        let (user, spliced) = match runtime {
            Runtime::Python(p) => python::splice(stack.user(), p, &groups),
            Runtime::Jvm(_) => match self.code_cache(tgid) {
                Some(code) => hotspot::splice(stack.user(), code, &groups),
                None => (stack.user().to_vec(), 0),
            },
        };
        if spliced == 0 {
            self.counts_of(java).unread += 1;
            return;
        }
        self.counts_of(java).spliced += 1;
        *stack = Callchain::new(stack.kernel(), &user);
    }

    /// JVM `tgid`'s code cache, once a read found it.
    fn code_cache(&self, tgid: u32) -> Option<(u64, u64)> {
        self.jvms.as_ref().and_then(|j| j.code_cache(tgid))
    }

    fn counts_of(&mut self, java: bool) -> &mut Counts {
        match java {
            true => &mut self.java,
            false => &mut self.counts,
        }
    }

    /// The address that stands for `name`, counting a name not kept.
    fn address(&mut self, name: &str, java: bool) -> u64 {
        let addr = self.names.address(name);
        if self.names.name(addr).as_deref() != Some(name) {
            self.counts_of(java).not_kept += 1;
        }
        addr
    }

    /// Thread `tid`'s id in its own PID namespace, as CPython records it.
    fn ns_tid(&mut self, tid: u32) -> Option<u32> {
        if let Some(&ns) = self.ns_tids.get(&tid) {
            return Some(ns);
        }
        let (ns, _) = crate::sys::proc::ns_pid_and_euid(tid)?;
        if self.ns_tids.len() >= MAX_PROCESSES {
            self.ns_tids.clear();
        }
        self.ns_tids.insert(tid, ns);
        Some(ns)
    }

    /// Reads thread `tid`'s frame names on the reading thread (a read that
    /// did not return, or could not be made, is unreadable).
    fn read(&mut self, runtime: &Runtime, tgid: u32, tid: u32) -> Result<Vec<Vec<String>>, Miss> {
        match runtime {
            Runtime::Python(process) => {
                let mut codes = self.codes.take().ok_or(Miss::Unreadable)?;
                let process = process.clone();
                let (named, codes) = self
                    .reader
                    .run(move || {
                        let mut mem = ProcessMemory { pid: tgid };
                        let named = python::frame_names(&mut mem, &process, &mut codes, tgid, tid);
                        (named, codes)
                    })
                    .ok_or(Miss::Unreadable)?;
                self.codes = Some(codes);
                named
            }
            Runtime::Jvm(process) => {
                let mut jvms = self.jvms.take().ok_or(Miss::Unreadable)?;
                let process = process.clone();
                let (named, jvms) = self
                    .reader
                    .run(move || {
                        let mut mem = ProcessMemory { pid: tgid };
                        let named = hotspot::frame_names(&mut mem, &process, &mut jvms, tgid, tid);
                        (named, jvms)
                    })
                    .ok_or(Miss::Unreadable)?;
                self.jvms = Some(jvms);
                named
            }
        }
    }

    /// The interpreter process `tgid` runs at `time`, if any: found once
    /// per version of its map.
    fn process(&mut self, tgid: u32, time: u64, maps: &mut ProcessMaps) -> Option<Runtime> {
        maps.ensure_known(tgid, time);
        let version = maps.version(tgid);
        if let Some((v, p)) = self.processes.get(&tgid)
            && *v == version
        {
            return p.clone();
        }
        // Its map changed (a library loaded): the interpreter, and its
        // code objects, stay.
        let found = self.find(tgid, time, maps);
        if self.processes.len() >= MAX_PROCESSES {
            for &tgid in self.processes.keys() {
                self.runs.early_for(tgid, false);
            }
            self.processes.clear();
        }
        self.runs.early_for(tgid, found.is_some());
        self.found_any |= found.is_some();
        self.processes.insert(tgid, (version, found.clone()));
        found
    }

    fn find(&mut self, tgid: u32, time: u64, maps: &ProcessMaps) -> Option<Runtime> {
        for m in maps.mapped_at(tgid, time) {
            let (python, jvm) = (may_hold_python(&m.path), may_hold_jvm(&m.path));
            if !python && !jvm {
                continue;
            }
            let image = match m.file.and_then(|k| self.images.get(&k)) {
                Some(known) => known.clone(),
                None => {
                    let Ok(opened) = maps.open_file(tgid, m) else {
                        continue;
                    };
                    let image = match python {
                        true => python::Image::read(&opened, &mut self.budget)
                            .map(|i| Image::Python(Arc::new(i))),
                        false => hotspot::Image::read(&opened, &mut self.budget)
                            .map(|i| Image::Jvm(Arc::new(i))),
                    };
                    if self.images.len() >= MAX_IMAGES {
                        self.images.clear();
                    }
                    self.images.insert(opened.key, image.clone());
                    image
                }
            };
            match image {
                Some(Image::Python(image)) => {
                    if let Some(bias) = image.base(m.start, m.end, m.pgoff) {
                        return Some(Runtime::Python(python::Process::new(image, bias)));
                    }
                }
                Some(Image::Jvm(image)) => {
                    if let Some(bias) = image.base(m.start, m.end, m.pgoff) {
                        return Some(Runtime::Jvm(hotspot::Process::new(image, bias)));
                    }
                }
                None => {}
            }
        }
        None
    }

    /// Forgets process `tgid` (it exited).
    fn forget(&mut self, tgid: u32) {
        self.processes.remove(&tgid);
        self.runs.early_for(tgid, false);
        if let Some(c) = self.codes.as_mut() {
            c.forget(tgid);
        }
        if let Some(j) = self.jvms.as_mut() {
            j.forget(tgid);
        }
    }

    /// The NOTEs on stacks that kept the interpreters' native frames.
    pub(crate) fn notes(&self) -> Vec<String> {
        let ended = if self.reader.ended() {
            format!(
                " A read of a traced process's memory did not return within {} ms (a \
                 process can serve its own memory, through userfaultfd or FUSE), or the \
                 thread that reads could not be started: none was made from then on.",
                READ_WAIT.as_millis()
            )
        } else {
            String::new()
        };
        [
            (
                &self.counts,
                "Python",
                "the interpreter's native frames",
                "functions",
            ),
            (&self.java, "Java", "the JVM's code-cache frames", "methods"),
        ]
        .into_iter()
        .filter_map(|(c, lang, native, what)| note(c, lang, native, what, &ended))
        .collect()
    }
}

/// The NOTE on `lang`'s stacks that kept their `native` frames, if any.
fn note(c: &Counts, lang: &str, native: &str, what: &str, ended: &str) -> Option<String> {
    let Counts {
        spliced,
        ran,
        unread,
        wakers,
        not_kept,
        ..
    } = *c;
    if ran + unread + wakers + not_kept == 0 {
        return None;
    }
    let not_kept = if not_kept > 0 {
        format!(
            " {not_kept} {lang} frames print as [interpreted frame not kept]: the names \
             kept for them reached their cap."
        )
    } else {
        String::new()
    };
    Some(format!(
        "NOTE: {} stacks of {lang} processes show {native}, not the {lang} {what} \
         ({spliced} off-CPU stacks have them): {ran} threads ran again before their \
         frames could be read, {unread} could not be read, and {wakers} are wakers' \
         stacks, which are not read.{ended}{not_kept}",
        ran + unread + wakers
    ))
}

/// A process's memory, read with `process_vm_readv`.
struct ProcessMemory {
    pid: u32,
}

impl Memory for ProcessMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        let len = buf.len();
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        let remote = [RemoteIoVec {
            base: addr as usize,
            len,
        }];
        let mut local = [std::io::IoSliceMut::new(buf)];
        process_vm_readv(Pid::from_raw(pid), &mut local, &remote) == Ok(len)
    }
}

/// Replaces each user frame of `event` that falls where interpreted
/// frames stand (a stack word a process wrote there) by one that names
/// nothing, before any is spliced in.
pub(crate) fn strip_forged(event: &mut Event) {
    let stack = match &mut event.kind {
        EventKind::Switch(s) => &mut s.stack,
        EventKind::Waking(w) => &mut w.stack,
        EventKind::OnCpu(s) => &mut s.stack,
        _ => return,
    };
    if !stack.user().iter().any(|&a| is_frame(a)) {
        return;
    }
    let user: Vec<u64> = stack
        .user()
        .iter()
        .map(|&a| if is_frame(a) { FORGED } else { a })
        .collect();
    *stack = Callchain::new(stack.kernel(), &user);
}

/// What a forged frame becomes: no code and no interpreted frame is
/// there, so it prints as an unknown frame.
const FORGED: u64 = 0x3fff_ffff_ffff_f000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Comm, RanSince, Switch};

    #[test]
    fn a_stack_word_where_interpreted_frames_stand_names_nothing() {
        let names = Names::new();
        let forged = names.address("secret (other.py:1)");
        let mut event = Event {
            time: 1,
            cpu: 0,
            kind: EventKind::Switch(Switch {
                prev_tid: 7,
                prev_tgid: 7,
                prev_comm: Comm::from("p"),
                prev_state: 1,
                next_tid: 8,
                next_comm: Comm::from("q"),
                stack: Callchain::new(&[0xffff_ffff_8100_0000], &[0x401000, forged, 0x402000]),
                user_copy: None,
                prev_ran_since: RanSince::NotTold,
                prev_cgroup: None,
            }),
        };
        strip_forged(&mut event);
        let EventKind::Switch(s) = &event.kind else {
            unreachable!()
        };
        assert_eq!(s.stack.user(), [0x401000, FORGED, 0x402000]);
        assert_eq!(s.stack.kernel(), [0xffff_ffff_8100_0000]);
        assert!(!is_frame(FORGED));
    }

    /// Early reads the stages never take are dropped by age, then all,
    /// so that they never hold more than their bounds.
    #[test]
    fn early_reads_never_asked_for_are_dropped() {
        let mut i = Interpreted::new(Names::new(), Arc::new(LastRuns::default()));
        let image = Arc::new(python::Image::with_eval(0..1));
        let runtime = Runtime::Python(python::Process::new(image, 0));
        let name = "f".repeat(1 << 16);
        let big = MAX_EARLY_BYTES / 4;
        let read = |runtime: &Runtime| EarlyRead {
            runtime: runtime.clone(),
            read_end: 0,
            groups: Ok(vec![vec![name.clone()]]),
            bytes: big,
        };
        for t in 0..3 {
            i.make_room(t, big);
            i.early.insert((7, t), read(&runtime));
            i.early_bytes += big;
        }
        // The fourth fits; a fifth, two seconds on, drops the old ones.
        i.make_room(3, big);
        assert_eq!(i.early.len(), 3, "room left");
        i.early.insert((7, 3), read(&runtime));
        i.early_bytes += big;
        let later = 3 + EARLY_KEPT_NS;
        i.make_room(later, big);
        assert_eq!(i.early.len(), 1);
        assert_eq!(i.early_bytes, big);
        // Recent ones over the bound: all go.
        for t in 1..5 {
            i.early.insert((8, later + t), read(&runtime));
            i.early_bytes += big;
        }
        i.make_room(later + 5, big);
        assert!(i.early.is_empty());
        assert_eq!(i.early_bytes, 0);
    }
}
