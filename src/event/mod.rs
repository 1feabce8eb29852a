//! Backend-neutral events: the one vocabulary every backend (perf, tracefs)
//! emits and everything downstream (aggregate, symbolize) consumes.
//!
//! Events are delivered in global timestamp order (see [`crate::source::reorder`]).
//! Times are nanoseconds of `CLOCK_MONOTONIC`, shared by all CPUs.

pub(crate) mod copies;
pub(crate) mod interpreted;
pub(crate) mod runs;
pub(crate) mod state;

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashSet;

/// A task's `comm`: up to 16 bytes, NUL-padded, exactly as the kernel keeps it.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Comm(pub(crate) [u8; 16]);

impl Comm {
    /// The comm of a thread nothing named: it reads `[unknown]`, but a
    /// byte after its NUL sets it apart from any comm a task can have
    /// ([`Comm::from_bytes`] zero-fills), `[unknown]` included.
    pub(crate) const UNKNOWN: Comm = Comm(*b"[unknown]\0\0\0\0\0\0\x01");

    /// Builds a comm from raw bytes, stopping at the first NUL and keeping at
    /// most 16 bytes.
    pub(crate) fn from_bytes(raw: &[u8]) -> Comm {
        let mut out = [0u8; 16];
        let len = raw
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.len())
            .min(16);
        out[..len].copy_from_slice(&raw[..len]);
        Comm(out)
    }

    /// The bytes before the first NUL.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(16);
        &self.0[..len]
    }

    /// The comm as text (invalid UTF-8 replaced).
    pub(crate) fn as_str(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(self.as_bytes())
    }

    /// True for the empty comm (used for "no waker").
    pub(crate) fn is_empty(&self) -> bool {
        self.0[0] == 0
    }
}

impl From<&str> for Comm {
    fn from(s: &str) -> Comm {
        Comm::from_bytes(s.as_bytes())
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// A sampled callchain split into its kernel and user parts.
///
/// Both parts are innermost frame first, with every `PERF_CONTEXT_*` marker
/// removed. Entry 0 of each part is the exact instruction pointer; later
/// entries are return addresses.
///
/// The frames are shared and never change: cloning a callchain, or taking
/// frames off the top of its kernel part ([`Callchain::skip_kernel`]),
/// copies no frame, and a backend that sees the same chain again shares one
/// copy of it ([`ChainCache`]). Equality, hashing and `Debug` look at the
/// two parts only.
///
/// The sharing is counted with `Arc`: events are read on one thread and
/// unwound and aggregated on another.
#[derive(Clone, Default)]
pub(crate) struct Callchain {
    /// The frames' serial number ([`Callchain::serial`]), the kernel
    /// frames, then the user frames; `None` when both parts are empty.
    frames: Option<Arc<[u64]>>,
    /// The kernel part is `frames[kernel_start..user_start]`, the user part
    /// `frames[user_start..]`. Frames past `u32::MAX` in all would be cut;
    /// the kernel produces at most 65535 (`perf_event_max_stack`).
    kernel_start: u32,
    user_start: u32,
}

/// The next [`Callchain::serial`]: serials are never reused.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

impl Callchain {
    /// A callchain of these parts, not shared with any other.
    pub(crate) fn new(kernel: &[u64], user: &[u64]) -> Callchain {
        if kernel.is_empty() && user.is_empty() {
            return Callchain::default();
        }
        let cap = u32::MAX as usize - 1;
        let kernel = &kernel[..kernel.len().min(cap)];
        let user = &user[..user.len().min(cap - kernel.len())];
        let mut frames = Vec::with_capacity(1 + kernel.len() + user.len());
        frames.push(NEXT_SERIAL.fetch_add(1, Ordering::Relaxed));
        frames.extend_from_slice(kernel);
        frames.extend_from_slice(user);
        Callchain {
            frames: Some(Arc::from(frames)),
            kernel_start: 1,
            user_start: 1 + kernel.len() as u32,
        }
    }

    /// What identifies this chain's frames for the whole run: its clones,
    /// and the chains a [`ChainCache`] hands out for the same entries,
    /// share them. Chains with the same serial have the same user part,
    /// and the same kernel part when the same number of frames was skipped
    /// off it ([`Callchain::kernel_skipped`]). `None` without frames.
    pub(crate) fn serial(&self) -> Option<u64> {
        self.frames.as_ref().and_then(|f| f.first().copied())
    }

    /// How many frames [`Callchain::skip_kernel`] took off the kernel part.
    pub(crate) fn kernel_skipped(&self) -> u32 {
        self.kernel_start.saturating_sub(1)
    }

    /// The kernel frames, innermost first.
    pub(crate) fn kernel(&self) -> &[u64] {
        match &self.frames {
            Some(f) => f
                .get(self.kernel_start as usize..self.user_start as usize)
                .unwrap_or(&[]),
            None => &[],
        }
    }

    /// The user frames, innermost first.
    pub(crate) fn user(&self) -> &[u64] {
        match &self.frames {
            Some(f) => f.get(self.user_start as usize..).unwrap_or(&[]),
            None => &[],
        }
    }

    /// True when both parts are empty.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.kernel().is_empty() && self.user().is_empty()
    }

    /// Takes up to `n` frames off the top (the innermost end) of the kernel
    /// part.
    pub(crate) fn skip_kernel(&mut self, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.kernel_start = self.kernel_start.saturating_add(n).min(self.user_start);
    }
}

impl PartialEq for Callchain {
    fn eq(&self, other: &Callchain) -> bool {
        self.kernel() == other.kernel() && self.user() == other.user()
    }
}

impl Eq for Callchain {}

impl Hash for Callchain {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.kernel().hash(state);
        self.user().hash(state);
    }
}

impl fmt::Debug for Callchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Callchain")
            .field("kernel", &self.kernel())
            .field("user", &self.user())
            .finish()
    }
}

/// Fewest chains a [`ChainCache`] keeps before it looks for unused ones.
const CHAIN_CACHE_MIN: usize = 4096;

/// The callchains a backend has built recently, by the record entries
/// they were built from, so that a sample with the same entries shares
/// their frames: a lookup hashes and compares the entries as they are in
/// the record, and allocates nothing when the chain is known.
///
/// Chains that no event holds any more are dropped whenever the cache has
/// doubled since the last such sweep, so it stays about the size of what is
/// in flight plus the chains seen lately.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChainCache {
    chains: FxHashSet<Cached>,
    /// Size at which the next sweep happens.
    sweep_at: usize,
    /// The parts of a chain being built.
    kernel: Vec<u64>,
    user: Vec<u64>,
}

/// A chain and the entries it was built from, which it is looked up by.
#[derive(Clone, Debug)]
struct Cached {
    entries: Box<[u8]>,
    chain: Callchain,
}

impl Borrow<[u8]> for Cached {
    fn borrow(&self) -> &[u8] {
        &self.entries
    }
}

impl PartialEq for Cached {
    fn eq(&self, other: &Cached) -> bool {
        self.entries == other.entries
    }
}

impl Eq for Cached {}

impl Hash for Cached {
    /// As the entries alone, so that they find it.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.entries.hash(state);
    }
}

impl ChainCache {
    pub(crate) fn new() -> ChainCache {
        ChainCache::default()
    }

    /// The callchain of the record entries `entries`: the one built from
    /// equal entries before, if it is still kept; else the one whose kernel
    /// and user parts (each innermost first) `split` writes into the two
    /// empty vectors it is given.
    pub(crate) fn get(
        &mut self,
        entries: &[u8],
        split: impl FnOnce(&mut Vec<u64>, &mut Vec<u64>),
    ) -> Callchain {
        if entries.is_empty() {
            return Callchain::default();
        }
        if let Some(c) = self.chains.get(entries) {
            return c.chain.clone();
        }
        self.kernel.clear();
        self.user.clear();
        split(&mut self.kernel, &mut self.user);
        let chain = Callchain::new(&self.kernel, &self.user);
        if chain.frames.is_none() {
            return chain;
        }
        if self.chains.len() >= self.sweep_at {
            self.chains.retain(|c| {
                c.chain
                    .frames
                    .as_ref()
                    .is_some_and(|f| Arc::strong_count(f) > 1)
            });
            self.sweep_at = (2 * self.chains.len()).max(CHAIN_CACHE_MIN);
        }
        self.chains.insert(Cached {
            entries: entries.into(),
            chain: chain.clone(),
        });
        chain
    }

    /// Chains kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.chains.len()
    }
}

/// `sched:sched_switch`, sampled in the context of the task leaving the CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Switch {
    /// Thread leaving the CPU (`prev_pid`); 0 is this CPU's idle task.
    pub(crate) prev_tid: u32,
    /// Process of `prev_tid` (the sample's pid); 0 for idle.
    pub(crate) prev_tgid: u32,
    pub(crate) prev_comm: Comm,
    /// `prev_state` exactly as the tracepoint reports it: one report bit
    /// (S=1 … I=128), the preempted marker (`TASK_REPORT_MAX`, 256 on
    /// current kernels) or 0.
    pub(crate) prev_state: u64,
    /// Thread entering the CPU (`next_pid`); 0 is this CPU's idle task.
    pub(crate) next_tid: u32,
    pub(crate) next_comm: Comm,
    /// Callchain of the switch-out (the blocked stack of `prev_tid`).
    pub(crate) stack: Callchain,
    /// `prev_tid`'s user registers and stack, copied for DWARF unwinding
    /// (`--call-graph dwarf`); unwound into `stack` before aggregation.
    pub(crate) user_copy: Option<Box<UserCopy>>,
    /// When `prev_tid` had switched in, for the slice this switch-out
    /// ends, as far as the backend tells it with the switch-out.
    pub(crate) prev_ran_since: RanSince,
    /// The id of `prev_tid`'s cgroup at the switch, when the backend
    /// tells it (the perf_event controller's hierarchy).
    pub(crate) prev_cgroup: Option<u64>,
}

/// When a switched-out thread had switched in, as its switch-out tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RanSince {
    /// The backend does not tell it here: a `next_pid`, or a switch-in
    /// record, does.
    NotTold,
    /// The backend tells switch-ins with switch-outs (see
    /// `perf::running`), and could not tell this one.
    Unknown,
    /// At this time.
    At(u64),
}

impl Switch {
    /// `prev_state` bits of a task leaving for the last time (X, Z).
    pub(crate) const DEAD_STATES: u64 = 16 | 32;

    /// Whether this is `prev_tid`'s final switch-out: it never comes back.
    pub(crate) fn is_final(&self) -> bool {
        self.prev_state & Switch::DEAD_STATES != 0
    }
}

/// `sched:sched_waking`, sampled in the context of the waker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Waking {
    /// The task running when the wakeup happened (the waker); 0 is idle.
    pub(crate) waker_tid: u32,
    pub(crate) waker_tgid: u32,
    /// The task being woken (the tracepoint's `pid` field).
    pub(crate) wakee_tid: u32,
    pub(crate) wakee_comm: Comm,
    /// The waker's callchain. Its kernel part begins at the *caller* of
    /// `try_to_wake_up`: backends drop the tracepoint's own site.
    pub(crate) stack: Callchain,
    /// The waker's user registers and stack, as for [`Switch::user_copy`].
    pub(crate) user_copy: Option<Box<UserCopy>>,
    /// Whether a task or an interrupt made the wakeup.
    pub(crate) context: WakeContext,
}

/// The context a wakeup was made in. An interrupt's wakeup is made on
/// behalf of no task: `waker_tid` is whichever task it landed in.
///
/// In a wall-clock profile (`--wall`), an entry whose time was not spent
/// waiting for a wakeup has a pseudo-waker too: [`WakeContext::Runnable`]
/// for a wait for a CPU, [`WakeContext::OnCpu`] for time on one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum WakeContext {
    /// A task, a softirq it ran itself (`local_bh_enable`, ksoftirqd)
    /// included.
    #[default]
    Task,
    /// A hard interrupt handler.
    Hardirq,
    /// A softirq run on an interrupt's exit. (Until [`Waking::settle`],
    /// any softirq, or an entry without flags: the flags do not tell.)
    Softirq,
    /// A non-maskable interrupt.
    Nmi,
    /// Not a wakeup: the thread was runnable and waited for a CPU.
    Runnable,
    /// Not a wakeup: the thread ran (on-CPU samples).
    OnCpu,
}

impl WakeContext {
    /// The pseudo-task an interrupt's wakeup is attributed to, as the
    /// report names it; `None` for a task.
    pub(crate) fn pseudo_task(self) -> Option<&'static str> {
        match self {
            WakeContext::Task => None,
            WakeContext::Hardirq => Some("[hardirq]"),
            WakeContext::Softirq => Some("[softirq]"),
            WakeContext::Nmi => Some("[nmi]"),
            WakeContext::Runnable => Some("[runnable]"),
            WakeContext::OnCpu => Some("[on-cpu]"),
        }
    }

    /// The context a trace entry's `common_flags` give (`TRACE_FLAG_*`:
    /// 0x08 hard interrupt, 0x10 serving a softirq, 0x40 NMI).
    pub(crate) fn from_trace_flags(flags: u64) -> WakeContext {
        if flags & 0x40 != 0 {
            WakeContext::Nmi
        } else if flags & 0x08 != 0 {
            WakeContext::Hardirq
        } else if flags & 0x10 != 0 {
            WakeContext::Softirq
        } else {
            WakeContext::Task
        }
    }
}

/// A thread's user registers and the top of its user stack, copied by the
/// kernel with a sample (`PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER`):
/// what a DWARF unwinder needs, and nothing kept past unwinding.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct UserCopy {
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
    /// The bytes from `sp` up, as many as the kernel could copy.
    pub(crate) stack: Box<[u8]>,
    /// What the bytes hold of the reader's budget, until dropped.
    pub(crate) charge: copies::Charge,
}

impl fmt::Debug for UserCopy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UserCopy {{ ip: {:#x}, sp: {:#x}, bp: {:#x}, {} stack bytes }}",
            self.ip,
            self.sp,
            self.bp,
            self.stack.len()
        )
    }
}

impl Waking {
    /// Settles [`Waking::context`] with what the kernel stack says,
    /// `irq_entry`: the position in it of the interrupt entry code, if it
    /// passes there. A softirq is an interrupt's only then. An interrupt's
    /// wakeup then loses its user stack, copy and frames, whatever the
    /// call graph mode, and its kernel frames past the entry: they are the
    /// interrupted task's, not its own.
    pub(crate) fn settle(&mut self, irq_entry: Option<usize>) {
        if self.context == WakeContext::Softirq && irq_entry.is_none() {
            self.context = WakeContext::Task;
        }
        if self.context != WakeContext::Task {
            self.user_copy = None;
            let kernel = self.stack.kernel();
            let own = irq_entry.map_or(kernel.len(), |i| kernel.len().min(i + 1));
            self.stack = Callchain::new(&kernel[..own], &[]);
        }
    }
}

/// An on-CPU sample of a thread (a `cpu-clock` event, `--wall`), taken in
/// its context while it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OnCpu {
    pub(crate) tid: u32,
    pub(crate) tgid: u32,
    /// Where it ran: the kernel part is empty when it ran in user mode.
    pub(crate) stack: Callchain,
    /// As for [`Switch::user_copy`].
    pub(crate) user_copy: Option<Box<UserCopy>>,
    /// The CPU time this sample stands for, in nanoseconds: what its event
    /// counted since its previous sample when `counted`, else the event's
    /// period (which a timer firing late undercounts).
    pub(crate) cpu_ns: u64,
    pub(crate) counted: bool,
    /// The thread's cgroup, as for [`Switch::prev_cgroup`].
    pub(crate) cgroup: Option<u64>,
}

/// A new task (process or thread). `tgid == parent_tgid` for a new thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fork {
    pub(crate) parent_tgid: u32,
    pub(crate) parent_tid: u32,
    pub(crate) tgid: u32,
    pub(crate) tid: u32,
}

/// A task exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exit {
    pub(crate) tgid: u32,
    pub(crate) tid: u32,
}

/// A task's comm changed: `exec` is true when it changed because of execve
/// (the process's memory map was replaced too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommChange {
    pub(crate) tgid: u32,
    pub(crate) tid: u32,
    pub(crate) comm: Comm,
    pub(crate) exec: bool,
}

/// A task moved to another cgroup (told by the tracefs backend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CgroupMove {
    pub(crate) tid: u32,
    /// The hierarchy's id, as `/proc/PID/cgroup` numbers it (0: v2).
    pub(crate) root: u32,
    /// The cgroup's id.
    pub(crate) id: u64,
}

/// A file (or anonymous region) mapped into a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mmap {
    pub(crate) tgid: u32,
    pub(crate) tid: u32,
    pub(crate) start: u64,
    pub(crate) len: u64,
    /// File offset of `start`.
    pub(crate) pgoff: u64,
    /// Path as the kernel printed it (may be `[vdso]`, `//anon`, …).
    pub(crate) path: String,
    /// True when the mapping is executable.
    pub(crate) executable: bool,
    /// The mapped file's device and inode, when the record gives them.
    pub(crate) file: Option<crate::sys::open::FileKey>,
    /// The mapped file's build-id, when the record gives it instead.
    pub(crate) build_id: Option<std::sync::Arc<[u8]>>,
}

/// A thread came onto a CPU, from perf's context-switch record (emitted in
/// `finish_task_switch`, in the incoming thread's context). It backs up the
/// `next_pid` side of `sched_switch`, which some kernels do not report for
/// every switch (seen: switches out of the idle task on one CPU of a VM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SwitchIn {
    pub(crate) tid: u32,
    pub(crate) tgid: u32,
    /// The thread that left the CPU (0 for idle).
    pub(crate) prev_tid: u32,
}

/// A traced thread stopped being traced while it ran (it exited): the
/// switch-in that began its last slice, which no switch-out will tell (see
/// `perf::running`). `since` is `None` when it could not be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ran {
    pub(crate) tid: u32,
    pub(crate) since: Option<u64>,
}

/// Records the kernel could not deliver (ring full, or samples dropped), or
/// may not have: `records` is 0 when a backend found a ring too full to be
/// sure (perf writes its own lost record only with that CPU's next record,
/// which can come long after intervals the loss falls inside were closed).
///
/// The loss happened somewhere between the event's `time` (the last record
/// delivered by that CPU before the gap) and `until` (the first one after
/// it, or the moment the ring had room again): every interval that overlaps
/// that window may be wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lost {
    pub(crate) records: u64,
    /// End of the window, `>=` the event's time.
    pub(crate) until: u64,
}

/// Counters kept by a backend while reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SourceStats {
    /// Records the kernel reported lost.
    pub(crate) lost_records: u64,
    /// Records read and decoded (record types we do not use are read and
    /// skipped, and counted here too).
    pub(crate) records: u64,
    /// Records that could not be decoded (skipped, counted), plus buffer
    /// inconsistencies (each one drops the rest of that read).
    pub(crate) malformed: u64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    Switch(Switch),
    SwitchIn(SwitchIn),
    Ran(Ran),
    Waking(Waking),
    OnCpu(OnCpu),
    Fork(Fork),
    Exit(Exit),
    Comm(CommChange),
    Mmap(Mmap),
    Lost(Lost),
    CgroupMove(CgroupMove),
}

/// Where a backend delivers its events, in global time order.
pub(crate) trait EventSink {
    /// Sees each event as soon as its place in time is known, before the
    /// backend finishes its kernel stack (which may wait for kallsyms):
    /// for work that must not wait, such as unwinding user stack copies.
    fn early(&mut self, _event: &mut Event) {}

    /// Takes each event, finished, after [`EventSink::early`] saw it.
    fn event(&mut self, event: Event);
}

/// A closure takes the finished events and has nothing to do early.
impl<F: FnMut(Event)> EventSink for F {
    fn event(&mut self, event: Event) {
        self(event)
    }
}

/// One event: when, where, what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// Nanoseconds, `CLOCK_MONOTONIC`.
    pub(crate) time: u64,
    /// CPU whose ring buffer delivered the event.
    pub(crate) cpu: u32,
    pub(crate) kind: EventKind,
}

/// When the trace ran, for the formats that say so (pprof).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: std::time::SystemTime,
    pub(crate) duration: std::time::Duration,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            start: std::time::UNIX_EPOCH,
            duration: std::time::Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comm_stops_at_nul_and_truncates() {
        assert_eq!(Comm::from_bytes(b"abc\0def").as_str(), "abc");
        assert_eq!(
            Comm::from_bytes(b"0123456789abcdefXYZ").as_str(),
            "0123456789abcdef"
        );
        assert!(Comm::default().is_empty());
        assert_eq!(Comm::from("swapper/1").to_string(), "swapper/1");
    }

    #[test]
    fn the_unknown_comm_is_no_comm_a_task_can_have() {
        assert_eq!(Comm::UNKNOWN.as_str(), "[unknown]");
        assert_ne!(Comm::UNKNOWN, Comm::from("[unknown]"));
        assert_ne!(Comm::UNKNOWN, Comm::from_bytes(&Comm::UNKNOWN.0));
    }

    fn shared(a: &Callchain, b: &Callchain) -> bool {
        match (&a.frames, &b.frames) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    #[test]
    fn callchain_parts_and_skipping() {
        let mut c = Callchain::new(&[1, 2, 3], &[4, 5]);
        assert_eq!(c.kernel(), [1, 2, 3]);
        assert_eq!(c.user(), [4, 5]);
        let serial = c.serial();
        assert_eq!(c.kernel_skipped(), 0);
        c.skip_kernel(1);
        assert_eq!(c.kernel(), [2, 3]);
        assert_eq!(c, Callchain::new(&[2, 3], &[4, 5]));
        assert_eq!((c.serial(), c.kernel_skipped()), (serial, 1));
        assert_ne!(Callchain::new(&[2, 3], &[4, 5]).serial(), serial);
        c.skip_kernel(5);
        assert!(c.kernel().is_empty());
        assert_eq!(c.user(), [4, 5]);
        assert!(!c.is_empty());
        assert_eq!(format!("{c:?}"), "Callchain { kernel: [], user: [4, 5] }");

        let mut e = Callchain::new(&[], &[]);
        assert!(e.is_empty());
        assert_eq!(e.serial(), None);
        assert_eq!(e, Callchain::default());
        e.skip_kernel(1);
        assert!(e.kernel().is_empty() && e.user().is_empty());
        let u = Callchain::new(&[], &[7]);
        assert_eq!((u.kernel(), u.user()), (&[][..], &[7][..]));
        let k = Callchain::new(&[7], &[]);
        assert_eq!((k.kernel(), k.user()), (&[7][..], &[][..]));
        assert_ne!(u, k);
    }

    /// Looks `kernel` and `user` up by their bytes, with `tag` appended.
    fn get(cache: &mut ChainCache, kernel: &[u64], user: &[u64], tag: u8) -> Callchain {
        let mut entries: Vec<u8> = kernel
            .iter()
            .chain(user)
            .flat_map(|a| a.to_ne_bytes())
            .collect();
        entries.push(tag);
        cache.get(&entries, |k, u| {
            k.extend_from_slice(kernel);
            u.extend_from_slice(user);
        })
    }

    #[test]
    fn cache_shares_chains_of_equal_entries() {
        let mut cache = ChainCache::new();
        let a = get(&mut cache, &[1, 2], &[3], 0);
        let b = get(&mut cache, &[1, 2], &[3], 0);
        assert!(shared(&a, &b));
        assert_eq!(a.serial(), b.serial());
        assert_eq!(a, Callchain::new(&[1, 2], &[3]));
        // Other entries (here, the same frames split elsewhere): another
        // chain.
        let c = get(&mut cache, &[1], &[2, 3], 1);
        assert!(!shared(&a, &c));
        assert_eq!((c.kernel(), c.user()), (&[1][..], &[2, 3][..]));
        // Skipping frames of one event leaves the others' alone.
        let mut d = get(&mut cache, &[1, 2], &[3], 0);
        d.skip_kernel(1);
        assert_eq!(d.kernel(), [2]);
        assert_eq!(get(&mut cache, &[1, 2], &[3], 0).kernel(), [1, 2]);
        // Nothing to keep for chains without frames.
        assert_eq!(get(&mut cache, &[], &[], 2), Callchain::default());
        assert_eq!(cache.get(&[], |_, _| panic!()), Callchain::default());
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn cache_drops_chains_nothing_holds() {
        let mut cache = ChainCache::new();
        let held = get(&mut cache, &[1], &[1], 0);
        for i in 0..10 * CHAIN_CACHE_MIN as u64 {
            get(&mut cache, &[i + 2], &[], 0);
        }
        assert!(cache.len() <= 2 * CHAIN_CACHE_MIN, "{}", cache.len());
        // The chain still held was kept, and is still shared.
        assert!(shared(&held, &get(&mut cache, &[1], &[1], 0)));
    }
}
