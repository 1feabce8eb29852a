//! Another process's mappings asked of the kernel one at a time
//! (`PROCMAP_QUERY` on `/proc/PID/maps`, Linux 6.11), without the text of
//! that file: its paths are the process's choice, and a few thousand
//! lines with deep paths take the kernel seconds to print. Older kernels
//! answer [`Query::Unsupported`], and callers read the text within a
//! budget instead.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A share of time for work whose cost a traced process sets (reading the
/// text of its maps): at most `burst`, then `share` of the time since.
#[derive(Debug)]
pub(crate) struct TimeBudget {
    credit: f64,
    burst: f64,
    share: f64,
    counted: Instant,
}

impl TimeBudget {
    pub(crate) fn new(burst: Duration, share: f64) -> TimeBudget {
        TimeBudget {
            credit: burst.as_secs_f64(),
            burst: burst.as_secs_f64(),
            share,
            counted: Instant::now(),
        }
    }

    /// Whether there is time left at `now`.
    pub(crate) fn allowed(&mut self, now: Instant) -> bool {
        let since = now.saturating_duration_since(self.counted).as_secs_f64();
        self.counted = self.counted.max(now);
        self.credit = (self.credit + since * self.share).min(self.burst);
        self.credit > 0.0
    }

    /// Takes `spent` off what is left.
    pub(crate) fn charge(&mut self, spent: Duration) {
        self.credit -= spent.as_secs_f64();
    }
}

/// `struct procmap_query` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = 0xC068_6611;
/// The mapping that covers the address, or else the next one above it.
const COVERING_OR_NEXT_VMA: u64 = 0x10;
const FILE_BACKED_VMA: u64 = 0x20;
/// In `query_flags`, only such mappings; in `vma_flags`, what one is.
pub(crate) const VMA_EXECUTABLE: u64 = 0x04;

/// One mapping: its range and the file offset of its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vma {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) flags: u64,
}

/// What the kernel answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Query {
    Found(Vma),
    /// No such mapping (or the process is gone).
    None,
    /// The kernel has no `PROCMAP_QUERY`.
    Unsupported,
}

/// An open `/proc/PID/maps` to ask.
pub(crate) struct Maps(File);

impl Maps {
    pub(crate) fn open(pid: u32) -> Option<Maps> {
        File::open(format!("/proc/{pid}/maps")).ok().map(Maps)
    }

    fn ask(&self, addr: u64, flags: u64) -> Query {
        let mut q = ProcmapQuery {
            size: std::mem::size_of::<ProcmapQuery>() as u64,
            query_flags: flags,
            query_addr: addr,
            ..ProcmapQuery::default()
        };
        // SAFETY: the ioctl reads and writes one `procmap_query`, which
        // outlives the call; no name or build-id buffer is given.
        let r = unsafe { libc::ioctl(self.0.as_raw_fd(), PROCMAP_QUERY, &mut q) };
        if r == 0 {
            return Query::Found(Vma {
                start: q.vma_start,
                end: q.vma_end,
                pgoff: q.vma_offset,
                flags: q.vma_flags,
            });
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOTTY | libc::EINVAL | libc::ENOSYS) => Query::Unsupported,
            _ => Query::None,
        }
    }

    /// The mapping that holds `addr`.
    pub(crate) fn holding(&self, addr: u64) -> Query {
        match self.ask(addr, 0) {
            Query::Found(v) if v.start <= addr && addr < v.end => Query::Found(v),
            Query::Found(_) => Query::None,
            other => other,
        }
    }

    /// The executable file mappings, in address order, at most `most`;
    /// `None` where the kernel cannot say.
    pub(crate) fn executable_files(&self, most: usize) -> Option<Vec<Vma>> {
        let mut out = Vec::new();
        let mut at = 0u64;
        while out.len() < most {
            match self.ask(at, COVERING_OR_NEXT_VMA | FILE_BACKED_VMA | VMA_EXECUTABLE) {
                Query::Found(v) if v.end > at => {
                    at = v.end;
                    out.push(v);
                }
                Query::Found(_) | Query::None => break,
                Query::Unsupported => return None,
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_budget_allows_its_burst_then_its_share() {
        let t0 = Instant::now();
        let mut b = TimeBudget::new(Duration::from_millis(100), 0.02);
        b.counted = t0;
        assert!(b.allowed(t0));
        b.charge(Duration::from_millis(150));
        assert!(!b.allowed(t0));
        // 50 ms owed: 2.5 s of 2% pays it back.
        assert!(!b.allowed(t0 + Duration::from_millis(2400)));
        assert!(b.allowed(t0 + Duration::from_millis(2600)));
        // Never more than the burst, however long it waits.
        assert!(b.allowed(t0 + Duration::from_secs(1000)));
        b.charge(Duration::from_millis(101));
        assert!(!b.allowed(t0 + Duration::from_secs(1000)));
    }

    /// Asked of this process: the mapping of a local variable's stack, and
    /// this program's own code among the executable files.
    #[test]
    fn finds_own_mappings_or_says_unsupported() {
        let me = std::process::id();
        let maps = Maps::open(me).expect("own maps");
        let word = 7u64;
        let addr = &raw const word as u64;
        let code = finds_own_mappings_or_says_unsupported as *const () as u64;
        match maps.holding(addr) {
            Query::Unsupported => {
                assert_eq!(maps.executable_files(8), None);
                return;
            }
            Query::Found(v) => assert!(v.start <= addr && addr < v.end, "{v:?}"),
            Query::None => panic!("no mapping holds the stack"),
        }
        assert_eq!(maps.holding(8), Query::None);
        let files = maps.executable_files(4096).expect("supported");
        assert!(files.iter().all(|v| v.flags & VMA_EXECUTABLE != 0));
        assert!(files.windows(2).all(|w| w[0].end <= w[1].start));
        assert!(files.iter().any(|v| v.start <= code && code < v.end));
        assert_eq!(maps.executable_files(1).map(|f| f.len()), Some(1));
    }
}
