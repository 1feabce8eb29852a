//! Thin, checked wrappers around `perf_event_open(2)` and its ioctls, with
//! error messages that say what to do.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use anyhow::{Result, anyhow, bail};
use perf_event_open_sys as sys;

use crate::sys::host::kernel_sysctl;
use sys::bindings::{self as b, perf_event_attr};

/// `PERF_SAMPLE_*` bits the decoder knows how to walk.
pub(crate) const SAMPLE_IDENTIFIER: u64 = b::PERF_SAMPLE_IDENTIFIER as u64;
pub(crate) const SAMPLE_IP: u64 = b::PERF_SAMPLE_IP as u64;
pub(crate) const SAMPLE_TID: u64 = b::PERF_SAMPLE_TID as u64;
pub(crate) const SAMPLE_TIME: u64 = b::PERF_SAMPLE_TIME as u64;
pub(crate) const SAMPLE_ADDR: u64 = b::PERF_SAMPLE_ADDR as u64;
pub(crate) const SAMPLE_ID: u64 = b::PERF_SAMPLE_ID as u64;
pub(crate) const SAMPLE_STREAM_ID: u64 = b::PERF_SAMPLE_STREAM_ID as u64;
pub(crate) const SAMPLE_CPU: u64 = b::PERF_SAMPLE_CPU as u64;
pub(crate) const SAMPLE_PERIOD: u64 = b::PERF_SAMPLE_PERIOD as u64;
pub(crate) const SAMPLE_READ: u64 = b::PERF_SAMPLE_READ as u64;
pub(crate) const SAMPLE_CALLCHAIN: u64 = b::PERF_SAMPLE_CALLCHAIN as u64;
pub(crate) const SAMPLE_RAW: u64 = b::PERF_SAMPLE_RAW as u64;
pub(crate) const SAMPLE_REGS_USER: u64 = b::PERF_SAMPLE_REGS_USER as u64;
pub(crate) const SAMPLE_STACK_USER: u64 = b::PERF_SAMPLE_STACK_USER as u64;
pub(crate) const SAMPLE_CGROUP: u64 = b::PERF_SAMPLE_CGROUP as u64;

/// The user registers a sample carries with `SAMPLE_REGS_USER`, in this
/// order (bit order): what unwinding needs on x86_64 (`PERF_REG_X86_BP`,
/// `_SP`, `_IP`).
pub(crate) const USER_REGS: [u32; 3] = [6, 7, 8];
/// [`USER_REGS`] as `sample_regs_user`.
pub(crate) const USER_REGS_MASK: u64 =
    (1 << USER_REGS[0]) | (1 << USER_REGS[1]) | (1 << USER_REGS[2]);

/// Asks samples of `a` for the user registers and `stack_user` bytes of
/// user stack when its `sample_type` has those bits.
fn ask_user_stack(a: &mut perf_event_attr, stack_user: u32) {
    if a.sample_type & SAMPLE_REGS_USER != 0 {
        a.sample_regs_user = USER_REGS_MASK;
    }
    if a.sample_type & SAMPLE_STACK_USER != 0 {
        a.sample_stack_user = stack_user;
    }
}

/// The only `read_format` used: a sample's `READ` part is then two words,
/// the event's count and its `time_running` (see [`crate::source::perf::record`]).
pub(crate) const READ_FORMAT: u64 = b::PERF_FORMAT_TOTAL_TIME_RUNNING as u64;

/// `PERF_RECORD_*` types.
pub(crate) const RECORD_MMAP: u32 = b::PERF_RECORD_MMAP;
pub(crate) const RECORD_LOST: u32 = b::PERF_RECORD_LOST;
pub(crate) const RECORD_COMM: u32 = b::PERF_RECORD_COMM;
pub(crate) const RECORD_EXIT: u32 = b::PERF_RECORD_EXIT;
pub(crate) const RECORD_FORK: u32 = b::PERF_RECORD_FORK;
pub(crate) const RECORD_SAMPLE: u32 = b::PERF_RECORD_SAMPLE;
pub(crate) const RECORD_MMAP2: u32 = b::PERF_RECORD_MMAP2;
pub(crate) const RECORD_LOST_SAMPLES: u32 = b::PERF_RECORD_LOST_SAMPLES;
pub(crate) const RECORD_SWITCH: u32 = b::PERF_RECORD_SWITCH;
pub(crate) const RECORD_SWITCH_CPU_WIDE: u32 = b::PERF_RECORD_SWITCH_CPU_WIDE;

pub(crate) const RECORD_MISC_COMM_EXEC: u16 = b::PERF_RECORD_MISC_COMM_EXEC as u16;
pub(crate) const RECORD_MISC_MMAP_BUILD_ID: u16 = b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
pub(crate) const RECORD_MISC_SWITCH_OUT: u16 = b::PERF_RECORD_MISC_SWITCH_OUT as u16;

/// Callchain context markers.
pub(crate) const CONTEXT_KERNEL: u64 = b::PERF_CONTEXT_KERNEL;
pub(crate) const CONTEXT_USER: u64 = b::PERF_CONTEXT_USER;
/// Every value `>=` this is a context marker, never an address.
pub(crate) const CONTEXT_MAX: u64 = b::PERF_CONTEXT_MAX;

const _: () = {
    assert!(CONTEXT_KERNEL == (-128i64) as u64);
    assert!(CONTEXT_USER == (-512i64) as u64);
    assert!(CONTEXT_MAX == (-4095i64) as u64);
};

/// What one tracepoint event should look like.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TracepointAttr {
    /// The tracepoint id from its `format` file.
    pub(crate) id: u64,
    pub(crate) sample_type: u64,
    pub(crate) exclude_callchain_user: bool,
    pub(crate) exclude_callchain_kernel: bool,
    /// Which side-band records to ask for.
    pub(crate) side_band: SideBand,
    /// Ask for context-switch records (see `event::SwitchIn`). They cost
    /// every context switch on the machine a little, even for per-task
    /// events.
    pub(crate) context_switch: bool,
    /// Bytes of unread data that wake `poll`.
    pub(crate) wakeup_watermark: u32,
    /// Per-task events only: threads the task creates get the event too.
    pub(crate) inherit: bool,
    /// With `inherit`: only threads of the task's own process, not the
    /// processes it forks (`inherit_thread`, Linux 5.13).
    pub(crate) inherit_thread: bool,
    /// Bytes of user stack copied per sample (`SAMPLE_STACK_USER`).
    pub(crate) stack_user: u32,
    /// Not a tracepoint but the `cpu-clock` software event, sampling
    /// every this many nanoseconds of CPU time (0: the tracepoint `id`).
    pub(crate) cpu_clock_ns: u64,
}

impl TracepointAttr {
    pub(crate) fn to_attr(self) -> perf_event_attr {
        let mut a = perf_event_attr {
            type_: b::PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<perf_event_attr>() as u32,
            config: self.id,
            sample_type: self.sample_type,
            ..Default::default()
        };
        a.__bindgen_anon_1.sample_period = 1;
        if self.cpu_clock_ns > 0 {
            a.type_ = b::PERF_TYPE_SOFTWARE;
            a.config = b::PERF_COUNT_SW_CPU_CLOCK as u64;
            a.__bindgen_anon_1.sample_period = self.cpu_clock_ns;
        }
        a.set_disabled(1);
        a.set_sample_id_all(1);
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        a.set_watermark(1);
        a.__bindgen_anon_2.wakeup_watermark = self.wakeup_watermark.max(1);
        a.set_exclude_callchain_user(self.exclude_callchain_user as u64);
        a.set_exclude_callchain_kernel(self.exclude_callchain_kernel as u64);
        a.set_inherit(self.inherit as u64);
        a.set_inherit_thread((self.inherit && self.inherit_thread) as u64);
        if self.sample_type & SAMPLE_READ != 0 {
            a.read_format = READ_FORMAT;
        }
        match self.side_band {
            SideBand::None => {}
            SideBand::Tasks => a.set_task(1),
            SideBand::All => ask_side_band(&mut a),
        }
        a.set_context_switch(self.context_switch as u64);
        ask_user_stack(&mut a, self.stack_user);
        a
    }
}

/// The side-band records an event asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideBand {
    None,
    /// FORK and EXIT only: a traced thread's COMM and MMAP2 records come
    /// from its names event ([`open_task_names`]).
    Tasks,
    /// FORK, EXIT, COMM (with exec) and MMAP2.
    All,
}

/// FORK/EXIT/COMM(+exec)/MMAP2 records, of executable mappings only.
fn ask_side_band(a: &mut perf_event_attr) {
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_task(1);
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_mmap_data(0);
}

fn paranoid_level() -> String {
    kernel_sysctl("perf_event_paranoid").unwrap_or_else(|| "unknown".to_string())
}

/// Opens one system-wide-per-CPU tracepoint event (pid = -1).
pub(crate) fn open_tracepoint(
    attr: &TracepointAttr,
    what: &str,
    cpu: u32,
) -> Result<OwnedFd, OpenError> {
    open_attr(&mut attr.to_attr(), -1, Some(cpu)).map_err(|err| open_error(err, what, attr.id, cpu))
}

/// Opens a tracepoint event on `cpu` that samples only while a task of
/// the cgroup whose directory is open as `cgroup`, or of one below it,
/// runs there (`PERF_FLAG_PID_CGROUP`, as `perf -G` opens).
pub(crate) fn open_cgroup_tracepoint(
    attr: &TracepointAttr,
    what: &str,
    cgroup: BorrowedFd<'_>,
    cpu: u32,
) -> Result<OwnedFd, OpenError> {
    let flags = b::PERF_FLAG_FD_CLOEXEC | b::PERF_FLAG_PID_CGROUP;
    open_attr_with(&mut attr.to_attr(), cgroup.as_raw_fd(), Some(cpu), flags)
        .map_err(|err| open_error(err, what, attr.id, cpu))
}

/// Opens a tracepoint event that follows thread `tid` while it runs on
/// `cpu` (and, with `inherit`, the threads it creates). `Ok(None)` when
/// the thread no longer exists.
pub(crate) fn open_task_tracepoint(
    attr: &TracepointAttr,
    what: &str,
    tid: u32,
    cpu: u32,
) -> Result<Option<OwnedFd>, OpenError> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| OpenError {
        errno: libc::EINVAL,
        message: format!("thread id {tid} is too large"),
    })?;
    match open_attr(&mut attr.to_attr(), pid, Some(cpu)) {
        Ok(fd) => Ok(Some(fd)),
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(err) => Err(open_error(err, what, attr.id, cpu)),
    }
}

/// Whether the kernel samples an inherited per-task event with
/// `PERF_SAMPLE_READ` (Linux 6.12; older kernels refuse the pair with
/// EINVAL). Tried on the calling thread, with `attr` made inherited and
/// given `PERF_SAMPLE_READ`; an error other than EINVAL says yes, and
/// leaves the real open to report it. The probe event goes to `keep` (see
/// [`Probes`]).
pub(crate) fn samples_inherited_reads(attr: &TracepointAttr, cpu: u32, keep: &mut Probes) -> bool {
    let attr = TracepointAttr {
        sample_type: attr.sample_type | SAMPLE_READ,
        inherit: true,
        ..*attr
    };
    match open_attr(&mut attr.to_attr(), 0, Some(cpu)) {
        Ok(fd) => {
            keep.0.push(fd);
            true
        }
        Err(err) => err.raw_os_error() != Some(libc::EINVAL),
    }
}

/// Probe events, kept open until the real events are closed at the end of
/// the run ([`super::release`]): closing the last perf event of a
/// tracepoint unregisters perf's probe there, which waits for RCU (40–70
/// ms on the development VM), and a close still waiting when a short run
/// ends holds up its exit.
#[derive(Default)]
pub(crate) struct Probes(Vec<OwnedFd>);

impl Probes {
    /// Takes over `other`'s events.
    pub(crate) fn append(&mut self, mut other: Probes) {
        self.0.append(&mut other.0);
    }

    /// The probes' events, to be closed by the caller.
    pub(crate) fn into_fds(self) -> Vec<OwnedFd> {
        self.0
    }
}

/// Whether a per-task `sched_process_exit` event (tracepoint `exit_id`)
/// sees the exits of the threads that inherit it. On Debian's 6.1 and 6.12
/// kernels such an event sees no exit at all (a system-wide one does); 6.18
/// counts them. Tried with a counting event on the calling thread,
/// inherited by one thread that exits at once. An open that fails says
/// yes, and leaves the real open to report the failure.
pub(crate) fn counts_inherited_exits(exit_id: u64, keep: &mut Probes) -> bool {
    use std::os::fd::AsFd;
    let mut a = perf_event_attr {
        type_: b::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: exit_id,
        ..Default::default()
    };
    a.set_inherit(1);
    let fd = match open_attr(&mut a, 0, None) {
        Ok(fd) => fd,
        Err(_) => return true,
    };
    let count = || {
        let mut buf = [0u8; 8];
        match nix::unistd::read(fd.as_fd(), &mut buf) {
            Ok(8) => u64::from_ne_bytes(buf),
            _ => 0,
        }
    };
    if std::thread::Builder::new()
        .name("exit-probe".into())
        .spawn(|| {})
        .map(|t| t.join())
        .is_err()
    {
        return true;
    }
    // The join can return before the thread's count is added to its
    // parent's, which happens late in its exit: look once more.
    let seen = count() > 0 || {
        std::thread::sleep(std::time::Duration::from_millis(2));
        count() > 0
    };
    // Threads the caller creates from now on need not count anything.
    let _ = disable(fd.as_fd());
    keep.0.push(fd);
    seen
}

/// Opens a software dummy event on `cpu`: it never samples, and owns the
/// CPU's ring buffer that the other events write into; with `side_band`,
/// it also writes the CPU's fork, exit, comm and mmap records (and its
/// context switches with `context_switch`), for every task.
pub(crate) fn open_ring_owner(
    sample_type: u64,
    stack_user: u32,
    wakeup_watermark: u32,
    cpu: u32,
    side_band: bool,
    context_switch: bool,
) -> Result<OwnedFd, OpenError> {
    let mut a = perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_DUMMY as u64,
        sample_type,
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = wakeup_watermark.max(1);
    if side_band {
        ask_side_band(&mut a);
    }
    a.set_context_switch(context_switch as u64);
    ask_user_stack(&mut a, stack_user);
    open_attr(&mut a, -1, Some(cpu)).map_err(|err| OpenError {
        errno: err.raw_os_error().unwrap_or(0),
        message: format!("perf_event_open of the ring buffer of CPU {cpu} failed: {err}"),
    })
}

/// The attributes of a thread's names event ([`open_task_names`]), whose
/// records carry the `sample_id` fields of `sample_type`.
fn names_attr(sample_type: u64) -> perf_event_attr {
    let mut a = perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_DUMMY as u64,
        // Only what `sample_id` holds: it never samples, and the reads and
        // user registers would be refused, or checked, for nothing.
        sample_type: sample_type
            & (SAMPLE_IDENTIFIER
                | SAMPLE_TID
                | SAMPLE_TIME
                | SAMPLE_ID
                | SAMPLE_STREAM_ID
                | SAMPLE_CPU),
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_mmap_data(0);
    // Every task the thread creates gets it, processes too, and what they
    // create in turn.
    a.set_inherit(1);
    a
}

/// Opens the names event of thread `tid` on `cpu`: a software dummy event
/// that never samples and writes the COMM (renames, execs) and executable
/// MMAP2 records of the thread and of every task it creates from now on,
/// the processes it starts included, which its other events do not follow:
/// a waker one of them started is then named as it was when it woke, and
/// its stacks are placed in its own mappings. `Ok(None)` when the thread
/// no longer exists.
pub(crate) fn open_task_names(
    sample_type: u64,
    tid: u32,
    cpu: u32,
) -> Result<Option<OwnedFd>, OpenError> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| OpenError {
        errno: libc::EINVAL,
        message: format!("thread id {tid} is too large"),
    })?;
    match open_attr(&mut names_attr(sample_type), pid, Some(cpu)) {
        Ok(fd) => Ok(Some(fd)),
        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(err) => Err(OpenError {
            errno: err.raw_os_error().unwrap_or(0),
            message: format!(
                "perf_event_open of the names event of thread {tid} on CPU {cpu} failed: {err}"
            ),
        }),
    }
}

/// Opens `a` for `pid` (0: the calling thread, -1: every task) on `cpu`
/// (`None`: wherever the task runs).
fn open_attr(a: &mut perf_event_attr, pid: libc::pid_t, cpu: Option<u32>) -> io::Result<OwnedFd> {
    open_attr_with(a, pid, cpu, b::PERF_FLAG_FD_CLOEXEC)
}

/// [`open_attr`] with these `flags`.
fn open_attr_with(
    a: &mut perf_event_attr,
    pid: libc::pid_t,
    cpu: Option<u32>,
    flags: u32,
) -> io::Result<OwnedFd> {
    let cpu = match cpu {
        Some(c) => {
            libc::c_int::try_from(c).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?
        }
        None => -1,
    };
    // SAFETY: `a` is a fully initialised perf_event_attr that lives across
    // the call; the kernel may write its expected size back into it.
    let fd = unsafe { sys::perf_event_open(a, pid, cpu, -1, flags as libc::c_ulong) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A failed `perf_event_open`, with the errno so that callers can tell a
/// denial (which the tracefs backend can work around) from other failures.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct OpenError {
    pub(crate) errno: i32,
    pub(crate) message: String,
}

impl OpenError {
    /// True when the syscall was refused rather than unable: EPERM or
    /// EACCES (paranoia level, capabilities, an LSM, a seccomp filter that
    /// returns EPERM) or ENOSYS (no perf events, or a seccomp filter that
    /// pretends so).
    pub(crate) fn is_denial(&self) -> bool {
        matches!(self.errno, libc::EPERM | libc::EACCES | libc::ENOSYS)
    }
}

fn open_error(err: io::Error, what: &str, id: u64, cpu: u32) -> OpenError {
    let errno = err.raw_os_error().unwrap_or(0);
    let message = open_error_message(&err, what, id, cpu);
    OpenError { errno, message }
}

fn open_error_message(err: &io::Error, what: &str, id: u64, cpu: u32) -> String {
    let base = match id {
        0 => format!("perf_event_open of {what} on CPU {cpu} failed: {err}"),
        _ => format!("perf_event_open of {what} (tracepoint id {id}) on CPU {cpu} failed: {err}"),
    };
    match err.raw_os_error().unwrap_or(0) {
        libc::EACCES | libc::EPERM if nix::unistd::geteuid().is_root() => format!(
            "{base}. We are root, so something refuses the call itself: a seccomp filter \
             (container runtimes), a security module (SELinux, AppArmor, lockdown) or a \
             kernel patch (kernel.perf_event_paranoid is {}). `--backend tracefs`, or the \
             default `--backend auto`, records the same events through ftrace instead",
            paranoid_level()
        ),
        libc::EACCES | libc::EPERM => format!(
            "{base}. Sampling tracepoints with raw data on every CPU needs root or \
             CAP_PERFMON (CAP_SYS_ADMIN on kernels before 5.8), or \
             kernel.perf_event_paranoid set to -1 (it is {}): run as root, or \
             `sysctl kernel.perf_event_paranoid=-1`",
            paranoid_level()
        ),
        libc::ENOENT => format!(
            "{base}. The kernel does not know this tracepoint id for perf: is it built \
             with CONFIG_PERF_EVENTS and the scheduler tracepoints?"
        ),
        libc::ENODEV => format!(
            "{base}. CPU {cpu} is not usable (offline?) or the kernel cannot sample \
             tracepoints on it"
        ),
        libc::ENOSYS => format!(
            "{base}. This kernel has no perf_event_open (CONFIG_PERF_EVENTS is off, or a \
             seccomp filter blocks it); `--backend tracefs` works without it"
        ),
        libc::EINVAL | libc::E2BIG | libc::EOPNOTSUPP => format!(
            "{base}. The kernel rejected the event's attributes (use_clockid needs \
             Linux 4.1, comm_exec 3.16, sample_id_all and identifiers 3.12)"
        ),
        libc::EMFILE | libc::ENFILE => format!(
            "{base}. Too many open files: two descriptors per CPU are needed; raise the \
             limit with `ulimit -n`"
        ),
        libc::EBUSY => format!("{base}. Another user holds the PMU exclusively"),
        _ => base,
    }
}

fn ioctl_result(ret: libc::c_int, what: &str) -> Result<()> {
    if ret < 0 {
        Err(anyhow!("{what}: {}", io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

/// The kernel's id for an event (what `PERF_SAMPLE_IDENTIFIER` reports).
pub(crate) fn event_id(fd: BorrowedFd<'_>) -> Result<u64> {
    let mut id = 0u64;
    // SAFETY: `id` is a valid u64 for the kernel to write into.
    let ret = unsafe { sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    ioctl_result(ret, "PERF_EVENT_IOC_ID")?;
    Ok(id)
}

/// Sets a tracepoint filter (ftrace's filter syntax, e.g.
/// `prev_state & 2`): the kernel drops samples that do not match before
/// it takes their callchain.
pub(crate) fn set_filter(fd: BorrowedFd<'_>, filter: &str) -> Result<()> {
    let text = std::ffi::CString::new(filter)
        .map_err(|_| anyhow!("tracepoint filter `{filter}` contains a NUL byte"))?;
    // SAFETY: `text` is a NUL-terminated string that outlives the call; the
    // kernel only reads it.
    let ret = unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), text.as_ptr() as *mut _) };
    ioctl_result(ret, &format!("PERF_EVENT_IOC_SET_FILTER `{filter}`"))
}

/// Sends `fd`'s records into the ring buffer mapped on `target`.
pub(crate) fn set_output(fd: BorrowedFd<'_>, target: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: plain ioctl on two perf descriptors we own.
    let ret = unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    ioctl_result(ret, "PERF_EVENT_IOC_SET_OUTPUT")
}

pub(crate) fn enable(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: plain ioctl on a perf descriptor we own.
    let ret = unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    ioctl_result(ret, "PERF_EVENT_IOC_ENABLE")
}

pub(crate) fn disable(fd: BorrowedFd<'_>) -> Result<()> {
    // SAFETY: plain ioctl on a perf descriptor we own.
    let ret = unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
    ioctl_result(ret, "PERF_EVENT_IOC_DISABLE")
}

/// The `time_running` of an event opened with [`READ_FORMAT`], read now.
pub(crate) fn read_running(fd: BorrowedFd<'_>) -> Result<u64> {
    // READ_FORMAT: the count, then time_running.
    let mut buf = [0u8; 16];
    let n = nix::unistd::read(fd, &mut buf)
        .map_err(|e| anyhow!("reading a perf event's count: {e}"))?;
    if n != buf.len() {
        bail!("reading a perf event's count: {n} bytes, wanted 16");
    }
    let running: [u8; 8] = buf[8..].try_into()?;
    Ok(u64::from_ne_bytes(running))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_bits() {
        let t = TracepointAttr {
            id: 372,
            sample_type: SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_RAW | SAMPLE_IDENTIFIER,
            exclude_callchain_user: true,
            exclude_callchain_kernel: false,
            side_band: SideBand::All,
            context_switch: true,
            wakeup_watermark: 4096,
            inherit: false,
            inherit_thread: true,
            stack_user: 0,
            cpu_clock_ns: 0,
        };
        let a = t.to_attr();
        assert_eq!((a.sample_regs_user, a.sample_stack_user), (0, 0));
        let dwarf = TracepointAttr {
            sample_type: t.sample_type | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
            stack_user: 8192,
            cpu_clock_ns: 0,
            ..t
        }
        .to_attr();
        assert_eq!(dwarf.sample_regs_user, 0b1_1100_0000);
        assert_eq!(dwarf.sample_stack_user, 8192);
        assert_eq!(a.type_, b::PERF_TYPE_TRACEPOINT);
        assert_eq!(a.config, 372);
        // SAFETY: both union members are plain u64/u32 values; reading one
        // that was written as the other only reinterprets the same bits.
        assert_eq!(unsafe { a.__bindgen_anon_1.sample_period }, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { a.__bindgen_anon_2.wakeup_watermark }, 4096);
        assert_eq!(a.disabled(), 1);
        assert_eq!(a.sample_id_all(), 1);
        assert_eq!(a.use_clockid(), 1);
        assert_eq!(a.clockid, libc::CLOCK_MONOTONIC);
        assert_eq!(a.watermark(), 1);
        assert_eq!(a.exclude_callchain_user(), 1);
        assert_eq!(a.exclude_callchain_kernel(), 0);
        assert_eq!(
            (a.comm(), a.comm_exec(), a.task(), a.mmap(), a.mmap2()),
            (1, 1, 1, 1, 1)
        );
        assert_eq!(a.mmap_data(), 0);
        assert_eq!((a.inherit(), a.inherit_thread()), (0, 0));
        let inherited = TracepointAttr { inherit: true, ..t }.to_attr();
        assert_eq!((inherited.inherit(), inherited.inherit_thread()), (1, 1));
        let plain = TracepointAttr {
            side_band: SideBand::None,
            ..t
        }
        .to_attr();
        assert_eq!(
            (plain.comm(), plain.task(), plain.mmap(), plain.mmap2()),
            (0, 0, 0, 0)
        );
        let tasks = TracepointAttr {
            side_band: SideBand::Tasks,
            ..t
        }
        .to_attr();
        assert_eq!(
            (tasks.comm(), tasks.task(), tasks.mmap(), tasks.mmap2()),
            (0, 1, 0, 0)
        );
        // Context-switch records are asked for on their own.
        assert_eq!((a.context_switch(), plain.context_switch()), (1, 1));
        let quiet = TracepointAttr {
            context_switch: false,
            ..t
        }
        .to_attr();
        assert_eq!((quiet.context_switch(), quiet.comm()), (0, 1));
        // A read_format only with PERF_SAMPLE_READ.
        assert_eq!(a.read_format, 0);
        let reads = TracepointAttr {
            sample_type: t.sample_type | SAMPLE_READ,
            ..t
        }
        .to_attr();
        assert_eq!(reads.read_format, READ_FORMAT);
    }

    /// A thread's names event: COMM and executable MMAP2 records only,
    /// inherited by the processes it starts, with the `sample_id` of the
    /// ring's other events and nothing they sample.
    #[test]
    fn names_attr_bits() {
        let id = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU;
        let a = names_attr(
            id | SAMPLE_RAW | SAMPLE_CALLCHAIN | SAMPLE_READ | SAMPLE_REGS_USER | SAMPLE_STACK_USER,
        );
        assert_eq!(a.sample_type, id);
        assert_eq!(
            (a.type_, a.config),
            (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_DUMMY as u64)
        );
        assert_eq!(
            (
                a.comm(),
                a.comm_exec(),
                a.mmap(),
                a.mmap2(),
                a.mmap_data(),
                a.task()
            ),
            (1, 1, 1, 1, 0, 0)
        );
        assert_eq!((a.inherit(), a.inherit_thread()), (1, 0));
        assert_eq!(
            (a.disabled(), a.sample_id_all(), a.use_clockid()),
            (1, 1, 1)
        );
        assert_eq!(a.clockid, libc::CLOCK_MONOTONIC);
        assert_eq!((a.read_format, a.sample_regs_user), (0, 0));
    }
}
