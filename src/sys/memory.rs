//! Reading a thread's stack from another process (`process_vm_readv`): a
//! bounded run of bytes, page by page, within the one mapping that holds
//! the stack pointer (from `/proc/TID/maps`), stopping at the first page
//! the process has not mapped readable. Nothing is written, and the
//! process is not stopped.
//!
//! A read can wait on the process itself: a page it serves through
//! userfaultfd, or maps from a FUSE file it serves. So reads are made on a
//! thread of their own ([`GuardedReader`]), and one that does not return
//! in time ends all reading for the run. That thread also reads blocked
//! threads' registers with their stacks ([`super::blocked`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IoSliceMut, Read};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::blocked::{ThreadRead, read_blocked};
use super::host::page_size;
use super::vma::{Maps, Query, TimeBudget};

/// One read asked of a [`GuardedReader`]'s thread.
enum Ask {
    /// [`read_stack`].
    Stack { tid: u32, addr: u64, len: usize },
    /// [`read_blocked`].
    Blocked {
        tgid: u32,
        tid: u32,
        pc: u64,
        len: usize,
    },
    /// Reads of its own (an interpreter's frames): a bounded job.
    Job(Job),
}

/// Work that reads a traced process, made on the reading thread.
type Job = Box<dyn FnOnce() -> Box<dyn std::any::Any + Send> + Send>;

/// What the thread answers.
enum Answer {
    Stack(Vec<u8>),
    Blocked(ThreadRead),
    Job(Box<dyn std::any::Any + Send>),
}

/// Reads [`read_stack`] on a thread of its own, started at the first
/// read, and waits for each at most `wait` while the thread sleeps in it
/// (as long as [`MOST_RUNNABLE`] while it only waits for a CPU, on a busy
/// machine). A read that takes longer is left to its thread (which exits
/// when it returns, if ever: a userfaultfd wait ends when the process
/// does) and no other is made.
pub(crate) struct GuardedReader {
    wait: Duration,
    thread: Option<Helper>,
    stuck: bool,
}

/// The reading thread: where to ask, where it answers, and its id.
struct Helper {
    ask: SyncSender<Ask>,
    answers: Receiver<Answer>,
    tid: u32,
}

/// Most time a read is waited for while its thread is runnable, not
/// sleeping in the read.
const MOST_RUNNABLE: Duration = Duration::from_secs(2);

impl GuardedReader {
    pub(crate) fn new(wait: Duration) -> GuardedReader {
        GuardedReader {
            wait,
            thread: None,
            stuck: false,
        }
    }

    /// Starts the reading thread now, if it is not running; the error
    /// says why it could not be.
    pub(crate) fn start(&mut self) -> Result<(), String> {
        if self.thread.is_none() && !self.stuck {
            self.thread = Some(spawn_reader()?);
        }
        Ok(())
    }

    /// True once a read did not return in time: no other is made.
    pub(crate) fn ended(&self) -> bool {
        self.stuck
    }

    /// [`read_stack`], or `None` once a read did not return in time (or
    /// the thread could not be started).
    pub(crate) fn read(&mut self, tid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
        match self.ask(Ask::Stack { tid, addr, len })? {
            Answer::Stack(bytes) => Some(bytes),
            _ => Some(Vec::new()),
        }
    }

    /// [`read_blocked`], or `None` as [`GuardedReader::read`].
    pub(crate) fn read_blocked(
        &mut self,
        tgid: u32,
        tid: u32,
        pc: u64,
        len: usize,
    ) -> Option<ThreadRead> {
        match self.ask(Ask::Blocked { tgid, tid, pc, len })? {
            Answer::Blocked(read) => Some(read),
            _ => Some(ThreadRead::Unreadable),
        }
    }

    /// Runs `job` on the reading thread, or `None` as
    /// [`GuardedReader::read`] (the job must bound its own time: one that
    /// does not return in time ends reading for the run).
    pub(crate) fn run<T: Send + 'static>(
        &mut self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let job: Job = Box::new(move || Box::new(job()) as Box<dyn std::any::Any + Send>);
        match self.ask(Ask::Job(job))? {
            Answer::Job(any) => any.downcast::<T>().ok().map(|b| *b),
            _ => None,
        }
    }

    /// Has the thread answer `ask`, waiting as [`GuardedReader`] says.
    fn ask(&mut self, ask: Ask) -> Option<Answer> {
        if self.stuck {
            return None;
        }
        if self.thread.is_none() {
            self.thread = spawn_reader().ok();
        }
        let wait = self.wait;
        let got = self.thread.as_ref().and_then(|h| {
            h.ask.send(ask).ok()?;
            let asked = Instant::now();
            loop {
                match h.answers.recv_timeout(wait) {
                    Ok(bytes) => return Some(bytes),
                    Err(RecvTimeoutError::Timeout)
                        if asked.elapsed() < MOST_RUNNABLE && runnable(h.tid) => {}
                    Err(_) => return None,
                }
            }
        });
        if got.is_none() {
            self.stuck = true;
            self.thread = None;
        }
        got
    }
}

/// True when thread `tid` of this process waits for a CPU (`R`).
fn runnable(tid: u32) -> bool {
    super::proc::start_and_state(tid).is_some_and(|(_, state)| state == 'R')
}

/// The thread of a [`GuardedReader`]: it reads what it is asked, one at a
/// time, until its caller goes.
fn spawn_reader() -> Result<Helper, String> {
    let (ask, asked) = sync_channel::<Ask>(1);
    let (answer, answers) = sync_channel(1);
    let (tid_tx, tid_rx) = sync_channel(1);
    std::thread::Builder::new()
        .name("offwake-stacks".to_string())
        .spawn(move || {
            let _ = tid_tx.send(nix::unistd::gettid().as_raw() as u32);
            let mut stacks = Stacks::default();
            for a in asked {
                let read = match a {
                    Ask::Stack { tid, addr, len } => {
                        Answer::Stack(read_stack(&mut stacks, tid, addr, len))
                    }
                    Ask::Blocked { tgid, tid, pc, len } => {
                        Answer::Blocked(read_blocked(&mut stacks, tgid, tid, pc, len))
                    }
                    Ask::Job(job) => Answer::Job(job()),
                };
                if answer.send(read).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let tid = tid_rx
        .recv()
        .map_err(|_| "the thread ended at once".to_string())?;
    Ok(Helper { ask, answers, tid })
}

/// Most threads whose stack mappings are remembered.
const STACKS_KEPT: usize = 4096;

/// Stack mappings remembered per thread: a thread may switch between
/// stacks of its own (coroutines, signal stacks).
const RANGES_PER_THREAD: usize = 4;

/// The time that reading `/proc/TID/maps` as text (where the kernel cannot
/// be asked for one mapping) may take: a process chooses how many
/// mappings it has, how long their paths are (which the kernel takes
/// milliseconds a line to print), and how often its threads change stacks.
const MAPS_BURST: Duration = Duration::from_millis(100);
const MAPS_SHARE: f64 = 0.02;

/// Most bytes of one thread's maps read as text to find its stack.
const MAPS_BYTES: u64 = 1 << 20;

/// By thread, the mappings its stack pointer was last found in (newest
/// first): a thread's stacks stay where they are, so each is looked up
/// once, and looking up takes a bounded share of time.
pub(crate) struct Stacks {
    threads: HashMap<u32, Vec<(u64, u64)>>,
    budget: TimeBudget,
    /// Whether the kernel may be asked for one mapping.
    query: bool,
    /// Maps read as text so far.
    text_reads: u64,
}

impl Default for Stacks {
    fn default() -> Stacks {
        Stacks {
            threads: HashMap::new(),
            budget: TimeBudget::new(MAPS_BURST, MAPS_SHARE),
            query: true,
            text_reads: 0,
        }
    }
}

impl Stacks {
    /// The range of thread `tid`'s mapping that holds `sp`: remembered, or
    /// looked up.
    fn holding(&mut self, tid: u32, sp: u64) -> Option<(u64, u64)> {
        let known = self.threads.get(&tid).and_then(|ranges| {
            ranges
                .iter()
                .copied()
                .find(|&(start, end)| start <= sp && sp < end)
        });
        if known.is_some() {
            return known;
        }
        let found = self.look_up(tid, sp)?;
        if self.threads.len() >= STACKS_KEPT {
            self.threads.clear();
        }
        let ranges = self.threads.entry(tid).or_default();
        ranges.insert(0, found);
        ranges.truncate(RANGES_PER_THREAD);
        Some(found)
    }

    /// Asks the kernel; else reads the text, while the budget allows.
    fn look_up(&mut self, tid: u32, sp: u64) -> Option<(u64, u64)> {
        if self.query {
            match Maps::open(tid)?.holding(sp) {
                Query::Found(v) => return Some((v.start, v.end)),
                Query::None => return None,
                Query::Unsupported => self.query = false,
            }
        }
        let started = Instant::now();
        if !self.budget.allowed(started) {
            return None;
        }
        self.text_reads += 1;
        let found = mapping_holding(tid, sp);
        self.budget.charge(started.elapsed());
        found
    }
}

/// Up to `len` bytes of thread `tid`'s stack from `sp` up, within the
/// mapping that holds `sp`; none when no mapping holds it (or it could
/// not be looked up within the budget).
pub(crate) fn read_stack(stacks: &mut Stacks, tid: u32, sp: u64, len: usize) -> Vec<u8> {
    let Some((_, end)) = stacks.holding(tid, sp) else {
        return Vec::new();
    };
    let room = usize::try_from(end - sp).unwrap_or(usize::MAX);
    read_upward(tid, sp, len.min(room))
}

/// The range of the mapping of thread `tid` that holds `addr`, from
/// `/proc/TID/maps`, whose lines come in address order: only each line's
/// range is read, and reading stops past `addr` or after [`MAPS_BYTES`].
fn mapping_holding(tid: u32, addr: u64) -> Option<(u64, u64)> {
    let file = std::fs::File::open(format!("/proc/{tid}/maps")).ok()?;
    let mut lines = BufReader::new(file.take(MAPS_BYTES));
    let mut line = Vec::new();
    loop {
        line.clear();
        if lines.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let (start, end) = range_of(&line)?;
        if start > addr {
            return None;
        }
        if addr < end {
            return Some((start, end));
        }
    }
}

/// The `START-END` range that begins a maps line.
fn range_of(line: &[u8]) -> Option<(u64, u64)> {
    let field = line.split(|&b| b == b' ').next()?;
    let (start, end) = std::str::from_utf8(field).ok()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    (start < end).then_some((start, end))
}

/// Up to `len` bytes of thread `tid`'s memory from `addr` up: fewer when a
/// page on the way is not mapped readable, none when the thread is gone
/// or may not be read.
pub(crate) fn read_upward(tid: u32, addr: u64, len: usize) -> Vec<u8> {
    let Ok(pid) = i32::try_from(tid) else {
        return Vec::new();
    };
    let remote = pieces(addr, len, page_size() as u64);
    let mut buf = vec![0u8; remote.iter().map(|r| r.len).sum()];
    // The kernel transfers whole iovec elements up to the first one it
    // cannot read: one element per page makes that the first unreadable
    // page.
    let read = process_vm_readv(
        Pid::from_raw(pid),
        &mut [IoSliceMut::new(&mut buf)],
        &remote,
    )
    .unwrap_or(0);
    buf.truncate(read);
    buf
}

/// `addr..addr + len` cut at page boundaries, within the address space.
fn pieces(addr: u64, len: usize, page: u64) -> Vec<RemoteIoVec> {
    let page = page.max(1);
    let end = addr.saturating_add(len as u64);
    let mut at = addr;
    let mut out = Vec::new();
    while at < end {
        let next = (at / page).saturating_add(1).saturating_mul(page).min(end);
        if next <= at {
            break;
        }
        out.push(RemoteIoVec {
            base: at as usize,
            len: (next - at) as usize,
        });
        at = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_cut_at_page_boundaries() {
        let cuts = |addr, len| {
            pieces(addr, len, 4096)
                .iter()
                .map(|r| (r.base as u64, r.len))
                .collect::<Vec<_>>()
        };
        assert_eq!(cuts(0x1ff0, 0x20), [(0x1ff0, 0x10), (0x2000, 0x10)]);
        assert_eq!(cuts(0x2000, 0x2000), [(0x2000, 0x1000), (0x3000, 0x1000)]);
        assert_eq!(cuts(0x2000, 0), []);
        // At the top of the address space the range stops there.
        assert_eq!(cuts(u64::MAX - 8, 64), [(u64::MAX - 8, 8)]);
    }

    /// A fresh private anonymous mapping of `pages` pages, readable and
    /// writable, which the caller unmaps.
    fn anonymous(pages: usize) -> *mut libc::c_void {
        // SAFETY: a new mapping chosen by the kernel; nothing else refers
        // to it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page_size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        map
    }

    #[test]
    fn a_maps_line_gives_its_range_only() {
        assert_eq!(
            range_of(b"7f00-7f10 rw-p 00000000 00:00 0   [stack]\n"),
            Some((0x7f00, 0x7f10))
        );
        for bad in [&b"7f10-7f00 r--p"[..], b"zz-10 r--p", b"", b"7f00 r--p"] {
            assert_eq!(range_of(bad), None);
        }
    }

    /// Two readable mappings side by side: a read from the lower one
    /// stops at its end, never reaching into the next.
    #[test]
    fn a_stack_read_stays_in_its_mapping() {
        let page = page_size();
        // Split by mprotect into two mappings (the third page read-only).
        let map = anonymous(3);
        let base = map as u64;
        // SAFETY: inside the mapping made above.
        unsafe {
            std::ptr::write_bytes(map as *mut u8, 1, 3 * page);
            let third = (base + 2 * page as u64) as *mut libc::c_void;
            assert_eq!(libc::mprotect(third, page, libc::PROT_READ), 0);
        }
        let me = std::process::id();
        let mut stacks = Stacks::default();
        let got = read_stack(&mut stacks, me, base + 8, 3 * page);
        assert_eq!(got.len(), 2 * page - 8, "up to the mapping's end");
        // Known now: found again without maps.
        assert_eq!(
            stacks.threads.get(&me).map(Vec::as_slice),
            Some(&[(base, base + 2 * page as u64)][..])
        );
        assert_eq!(read_stack(&mut stacks, me, base + 16, 8).len(), 8);
        // An address no mapping holds gives nothing.
        assert!(read_stack(&mut stacks, me, 8, 64).is_empty());
        // SAFETY: the mapping made above, not used after this.
        unsafe { libc::munmap(map, 3 * page) };
    }

    /// A thread that switches among more stacks than are remembered for
    /// it gets them looked up again, and where that means reading its
    /// maps as text, only while the time budget allows.
    #[test]
    fn stacks_are_looked_up_within_a_budget() {
        let page = page_size();
        let stacks_n = RANGES_PER_THREAD + 1;
        // Every other page readable: each its own mapping.
        let map = anonymous(2 * stacks_n);
        let base = map as u64;
        for i in 0..stacks_n {
            // SAFETY: a page of the mapping made above.
            let odd = unsafe { map.cast::<u8>().add((2 * i + 1) * page) };
            // SAFETY: as above; the page is not used after this.
            assert_eq!(
                unsafe { libc::mprotect(odd.cast(), page, libc::PROT_NONE) },
                0
            );
        }
        let me = std::process::id();
        let sp = |i: usize| base + (2 * (i % stacks_n) * page) as u64 + 8;
        for query in [true, false] {
            let mut stacks = Stacks {
                query,
                ..Stacks::default()
            };
            for i in 0..4 * stacks_n {
                assert_eq!(
                    stacks.holding(me, sp(i)),
                    Some((sp(i) - 8, sp(i) - 8 + page as u64))
                );
            }
            // Spent: nothing more is read as text.
            stacks.budget.charge(MAPS_BURST * 100);
            let reads = stacks.text_reads;
            let found = (0..4 * stacks_n)
                .filter(|&i| stacks.holding(me, sp(i)).is_some())
                .count();
            if query && stacks.query {
                assert_eq!((reads, found), (0, 4 * stacks_n));
            } else {
                assert_eq!(stacks.text_reads, reads);
                assert!(reads > 0);
                // The stacks remembered are still found.
                assert_eq!(found, 4 * RANGES_PER_THREAD);
            }
        }
        // SAFETY: the mapping made above, not used after this.
        unsafe { libc::munmap(map, 2 * stacks_n * page) };
    }

    #[test]
    fn a_read_stops_at_the_first_unreadable_page() {
        let page = page_size();
        // Two pages, the second made unreadable.
        let map = anonymous(2);
        let base = map as u64;
        // SAFETY: the first page is ours and writable; the second is
        // inside the same mapping.
        unsafe {
            std::ptr::write_bytes(map as *mut u8, 7, page);
            assert_eq!(
                libc::mprotect((base + page as u64) as *mut libc::c_void, page, 0),
                0
            );
        }
        let me = std::process::id();
        let got = read_upward(me, base + 16, 3 * page);
        assert_eq!(got.len(), page - 16, "up to the unreadable page");
        assert!(got.iter().all(|&b| b == 7));
        assert!(read_upward(me, base + page as u64, 64).is_empty());
        assert!(read_upward(u32::MAX, base, 64).is_empty(), "no such task");
        let mut guarded = GuardedReader::new(Duration::from_secs(5));
        assert_eq!(guarded.read(me, base + 16, 3 * page), Some(got));
        assert_eq!(
            mapping_holding(me, base + 16),
            Some((base, base + page as u64))
        );
        // SAFETY: the mapping made above, not used after this.
        unsafe { libc::munmap(map, 2 * page) };
    }

    /// `struct uffdio_api` and `struct uffdio_register` of
    /// `<linux/userfaultfd.h>`, which libc lacks, and their ioctls.
    #[repr(C)]
    struct UffdioApi {
        api: u64,
        features: u64,
        ioctls: u64,
    }
    #[repr(C)]
    struct UffdioRegister {
        start: u64,
        len: u64,
        mode: u64,
        ioctls: u64,
    }
    const UFFD_API: u64 = 0xaa;
    const UFFDIO_API: u64 = 0xc018_aa3f;
    const UFFDIO_REGISTER: u64 = 0xc020_aa00;
    const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;

    /// A page served through userfaultfd, which nobody serves: the read
    /// waits on it, the reader gives up on it and on every later read, and
    /// the waiting thread is freed when the userfaultfd is closed.
    #[test]
    fn a_read_that_waits_on_the_process_ends_reading() {
        if !crate::live_gate::live_allowed("a_read_that_waits_on_the_process_ends_reading") {
            return;
        }
        let page = page_size();
        // SAFETY: raw system calls and ioctls on a userfaultfd and a fresh
        // private anonymous mapping that nothing else uses, with structs
        // laid out as the kernel's.
        unsafe {
            let uffd = libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) as i32;
            assert!(
                uffd >= 0,
                "userfaultfd: {}",
                std::io::Error::last_os_error()
            );
            let mut api = UffdioApi {
                api: UFFD_API,
                features: 0,
                ioctls: 0,
            };
            assert_eq!(libc::ioctl(uffd, UFFDIO_API as _, &mut api), 0);
            let map = anonymous(1);
            let mut reg = UffdioRegister {
                start: map as u64,
                len: page as u64,
                mode: UFFDIO_REGISTER_MODE_MISSING,
                ioctls: 0,
            };
            assert_eq!(libc::ioctl(uffd, UFFDIO_REGISTER as _, &mut reg), 0);

            let me = std::process::id();
            let mut guarded = GuardedReader::new(Duration::from_millis(50));
            let start = std::time::Instant::now();
            assert_eq!(guarded.read(me, map as u64, 64), None);
            assert!(start.elapsed() < Duration::from_secs(2));
            // Even a read that would return is not made any more.
            let word = 7u64;
            assert_eq!(guarded.read(me, &raw const word as u64, 8), None);
            libc::close(uffd);
            libc::munmap(map, page);
        }
    }
}
