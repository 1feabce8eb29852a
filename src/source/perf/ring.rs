//! Per-CPU perf ring buffers: the mapping, and reading records out of it
//! following the protocol documented in perf_event_open(2):
//!
//! 1. read `data_head` with acquire ordering (pairs with the kernel's
//!    write barrier after it wrote the records);
//! 2. read the records between `data_tail` and `data_head` (positions grow
//!    forever; the offset into the data area is `pos % data_size`), copying
//!    any record that wraps around the end of the area into a scratch buffer;
//! 3. store the new `data_tail` with release ordering so the kernel may
//!    reuse the space only after we are done reading it.
//!
//! Step 2 is [`extract_records`], a pure function over a byte slice so that
//! it can be tested on synthetic buffers.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Result, anyhow, bail};
use memmap2::{MmapOptions, MmapRaw};
use perf_event_open_sys::bindings::perf_event_mmap_page;

use crate::sys::host::page_size;

/// Size of `struct perf_event_header`.
pub(crate) const HEADER_SIZE: usize = 8;

/// What [`extract_records`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extracted {
    /// The tail to store back: every byte before it has been consumed.
    pub(crate) new_tail: u64,
    /// Bytes between tail and head when read: the fullest the ring has been
    /// since the previous read (only the reader frees space).
    pub(crate) avail: u64,
    /// Records handed to the callback.
    pub(crate) records: u64,
    /// True when the ring content was inconsistent (a record size of 0,
    /// smaller than a header or larger than what is available, or more
    /// unread data than the ring holds). Everything up to `head` was then
    /// dropped: there is no way to find the next record boundary.
    pub(crate) corrupt: bool,
}

/// Reads `size` bytes starting at ring position `pos` into `out`, wrapping
/// around the end of `data`.
fn copy_wrapped(data: &[u8], pos: u64, out: &mut [u8]) {
    let len = data.len();
    let start = (pos % len as u64) as usize;
    let first = out.len().min(len - start);
    out[..first].copy_from_slice(&data[start..start + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

/// Hands every complete record between `tail` and `head` in the ring data
/// area `data` to `f`, whole and contiguous (records that wrap around the end
/// of `data` are copied into `scratch` first). Never panics and never loops
/// forever, whatever the bytes.
pub(crate) fn extract_records(
    data: &[u8],
    tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    f: &mut dyn FnMut(&[u8]),
) -> Extracted {
    extract_releasing(data, tail, head, scratch, f, u64::MAX, &mut |_| {})
}

/// [`extract_records`] that also calls `release` with the position past
/// the records handed to `f` whenever `every` more bytes of them have
/// been: the kernel may then write there again, while the rest is read.
fn extract_releasing(
    data: &[u8],
    tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    f: &mut dyn FnMut(&[u8]),
    every: u64,
    release: &mut dyn FnMut(u64),
) -> Extracted {
    let mut released = tail;
    let mut out = Extracted {
        new_tail: tail,
        ..Default::default()
    };
    let size = data.len() as u64;
    let avail = head.wrapping_sub(tail);
    out.avail = avail;
    if avail == 0 {
        return out;
    }
    if size == 0 || avail > size {
        // The kernel never lets head run more than a buffer ahead of tail.
        out.new_tail = head;
        out.corrupt = true;
        return out;
    }

    let mut pos = tail;
    while pos != head {
        let left = head.wrapping_sub(pos);
        if left < HEADER_SIZE as u64 {
            out.corrupt = true;
            break;
        }
        let mut hdr = [0u8; HEADER_SIZE];
        copy_wrapped(data, pos, &mut hdr);
        let rec_size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
        if rec_size < HEADER_SIZE as u64 || rec_size > left {
            out.corrupt = true;
            break;
        }
        let start = (pos % size) as usize;
        let rec_size_us = rec_size as usize;
        if start + rec_size_us <= data.len() {
            f(&data[start..start + rec_size_us]);
        } else {
            scratch.clear();
            scratch.resize(rec_size_us, 0);
            copy_wrapped(data, pos, scratch);
            f(scratch);
        }
        out.records += 1;
        pos = pos.wrapping_add(rec_size);
        if pos.wrapping_sub(released) >= every {
            release(pos);
            released = pos;
        }
    }
    out.new_tail = if out.corrupt { head } else { pos };
    out
}

/// How full a ring is, read from its control page by a thread other than
/// its reader.
pub(crate) struct Gauge {
    map: Arc<MmapRaw>,
    data_size: u64,
}

impl Gauge {
    /// True when more than half of the ring holds records not yet read.
    pub(crate) fn over_half(&self) -> bool {
        let meta = self.map.as_mut_ptr() as *mut perf_event_mmap_page;
        // SAFETY: data_head and data_tail are aligned u64s inside the
        // mapped control page, which `map` keeps mapped; the kernel writes
        // the head and the reader the tail, so both are only loaded,
        // atomically (AtomicU64 has the layout of u64).
        let (head, tail) = unsafe {
            (
                AtomicU64::from_ptr(&raw mut (*meta).data_head).load(Ordering::Acquire),
                AtomicU64::from_ptr(&raw mut (*meta).data_tail).load(Ordering::Relaxed),
            )
        };
        over_half(head.wrapping_sub(tail), self.data_size)
    }
}

/// True when `unread` bytes are more than half of a ring of `data_size`:
/// its reader, woken at a quarter, came late.
pub(crate) fn over_half(unread: u64, data_size: u64) -> bool {
    unread > data_size / 2
}

/// One mapped ring buffer: a metadata page followed by `2^n` data pages.
pub(crate) struct Ring {
    /// Shared with the kernel: only touched through `&mut self`, or
    /// atomically on the control page (also by [`Gauge`]s).
    map: Arc<MmapRaw>,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

impl Ring {
    /// Maps the ring of perf event `fd` with `data_pages` data pages (a
    /// power of two).
    pub(crate) fn map(fd: BorrowedFd<'_>, data_pages: usize) -> Result<Ring> {
        if data_pages == 0 || !data_pages.is_power_of_two() {
            bail!("mmap pages must be a power of two (got {data_pages})");
        }
        let page = page_size();
        let map_len = (1 + data_pages)
            .checked_mul(page)
            .ok_or_else(|| anyhow!("{data_pages} mmap pages is too large"))?;
        let map = MmapOptions::new()
            .len(map_len)
            .map_raw(fd.as_raw_fd())
            .map_err(|err| {
                let hint = match err.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::ENOMEM) => {
                        " (over the locked-memory budget: lower the mmap pages, or raise \
                         kernel.perf_event_mlock_kb / `ulimit -l`)"
                    }
                    _ => "",
                };
                anyhow!("mmap of a {map_len}-byte perf ring buffer failed: {err}{hint}")
            })?;
        let mut ring = Ring {
            map: Arc::new(map),
            data_offset: page,
            data_size: data_pages * page,
            scratch: Vec::new(),
        };
        // Kernels since 4.1 describe the data area in the control page.
        // SAFETY: `meta()` points at the control page at the start of our
        // live mapping; these two fields are plain u64s the kernel writes
        // once at mmap time, read volatile because the page is shared.
        let (off, sz) = unsafe {
            let meta = ring.meta();
            (
                std::ptr::read_volatile(&raw const (*meta).data_offset),
                std::ptr::read_volatile(&raw const (*meta).data_size),
            )
        };
        if sz != 0 {
            if off as usize + sz as usize > ring.map.len() || !sz.is_power_of_two() {
                bail!("perf control page describes an impossible data area ({off}+{sz})");
            }
            ring.data_offset = off as usize;
            ring.data_size = sz as usize;
        }
        Ok(ring)
    }

    pub(crate) fn data_size(&self) -> usize {
        self.data_size
    }

    /// A gauge of how full this ring is, for another thread; it keeps the
    /// mapping alive.
    pub(crate) fn gauge(&self) -> Gauge {
        Gauge {
            map: self.map.clone(),
            data_size: self.data_size as u64,
        }
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.map.as_mut_ptr() as *mut perf_event_mmap_page
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 inside the mapped control page,
        // written by the kernel; AtomicU64 has the same layout as u64.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.meta()).data_head) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`; only we write data_tail.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.meta()).data_tail) }
    }

    /// Reads every record available now, handing each to `f`.
    pub(crate) fn read(&mut self, f: &mut dyn FnMut(&[u8])) -> Extracted {
        let head = self.head().load(Ordering::Acquire);
        let tail = self.tail().load(Ordering::Relaxed);
        if head == tail {
            return Extracted {
                new_tail: tail,
                ..Default::default()
            };
        }
        // SAFETY: the data area lies inside the mapping. The kernel does not
        // write the bytes between tail and head until we advance data_tail,
        // and we only look at those bytes, each before data_tail passes it.
        let data = unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(self.data_offset), self.data_size)
        };
        // Space is given back to the kernel an eighth of the ring at a time:
        // reading a full ring of large records (user stack copies) takes
        // long enough for the kernel to lose records meanwhile otherwise.
        let every = (self.data_size as u64 / 8).max(1);
        let mut scratch = std::mem::take(&mut self.scratch);
        let tail_at = self.tail();
        let out = extract_releasing(data, tail, head, &mut scratch, f, every, &mut |pos| {
            tail_at.store(pos, Ordering::Release)
        });
        tail_at.store(out.new_tail, Ordering::Release);
        self.scratch = scratch;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `size` bytes (>= 8) of type `ty`, body bytes = `fill`.
    fn record(ty: u32, size: u16, fill: u8) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        r.resize(size as usize, fill);
        r
    }

    /// Writes `bytes` into the ring at position `pos`, wrapping.
    fn put(ring: &mut [u8], pos: u64, bytes: &[u8]) {
        let n = ring.len() as u64;
        for (i, b) in bytes.iter().enumerate() {
            ring[((pos + i as u64) % n) as usize] = *b;
        }
    }

    #[test]
    fn space_is_released_as_records_are_read() {
        let mut data = vec![0u8; 256];
        let mut pos = 0u64;
        for i in 0..10u8 {
            put(&mut data, pos, &record(9, 24, i));
            pos += 24;
        }
        let released = std::cell::RefCell::new(Vec::new());
        let mut seen = 0;
        let out = extract_releasing(
            &data,
            0,
            pos,
            &mut Vec::new(),
            &mut |r| {
                // Nothing from the record being read on is given back.
                assert!(released.borrow().last().is_none_or(|&p| p <= seen * 24));
                seen += 1;
                assert_eq!(r.len(), 24);
            },
            64,
            &mut |p| released.borrow_mut().push(p),
        );
        let released = released.into_inner();
        // After each record that takes the unreleased run to 64 bytes.
        assert_eq!(released, [72, 144, 216]);
        assert_eq!((out.records, out.new_tail), (10, 240));
    }

    fn collect(data: &[u8], tail: u64, head: u64) -> (Vec<Vec<u8>>, Extracted) {
        let mut scratch = Vec::new();
        let mut recs = Vec::new();
        let ex = extract_records(data, tail, head, &mut scratch, &mut |r| {
            recs.push(r.to_vec())
        });
        (recs, ex)
    }

    #[test]
    fn several_records_without_wrap() {
        let mut ring = vec![0u8; 64];
        let a = record(9, 16, 0xaa);
        let b = record(1, 24, 0xbb);
        put(&mut ring, 0, &a);
        put(&mut ring, 16, &b);
        let (recs, ex) = collect(&ring, 0, 40);
        assert_eq!(recs, vec![a, b]);
        assert_eq!(
            ex,
            Extracted {
                new_tail: 40,
                avail: 40,
                records: 2,
                corrupt: false
            }
        );
        // Nothing new.
        let (recs, ex) = collect(&ring, 40, 40);
        assert!(recs.is_empty());
        assert_eq!(ex.new_tail, 40);
        assert_eq!(ex.avail, 0);
    }

    #[test]
    fn record_body_wraps() {
        let mut ring = vec![0u8; 64];
        // Positions keep growing past the ring size: start at 1000 (= 40 mod 64).
        let tail = 1000u64;
        let a = record(9, 16, 0x11); // 40..56
        let b = record(9, 32, 0x22); // 56..64 then 0..24: header intact, body wraps
        put(&mut ring, tail, &a);
        put(&mut ring, tail + 16, &b);
        let (recs, ex) = collect(&ring, tail, tail + 48);
        assert_eq!(recs, vec![a, b]);
        assert_eq!(ex.new_tail, tail + 48);
        assert!(!ex.corrupt);
    }

    #[test]
    fn record_header_wraps() {
        // 8-byte-aligned records never split a header in a real ring, but
        // the reader must not depend on that.
        let mut ring = vec![0u8; 64];
        let tail = 60u64;
        let a = record(9, 20, 0x33); // header at 60..64 + 0..4
        put(&mut ring, tail, &a);
        let b = record(1, 8, 0);
        put(&mut ring, tail + 20, &b);
        let (recs, ex) = collect(&ring, tail, tail + 28);
        assert_eq!(recs, vec![a, b]);
        assert_eq!(ex.new_tail, 88);
    }

    #[test]
    fn whole_ring_full() {
        let mut ring = vec![0u8; 32];
        let a = record(9, 32, 0x44);
        put(&mut ring, 16, &a);
        let (recs, ex) = collect(&ring, 16, 48);
        assert_eq!(recs, vec![a]);
        assert_eq!(ex.new_tail, 48);
    }

    #[test]
    fn corrupt_sizes_stop_safely() {
        let mut ring = vec![0u8; 64];
        let good = record(9, 16, 1);
        put(&mut ring, 0, &good);
        // size 0 after a good record
        put(&mut ring, 16, &[9, 0, 0, 0, 0, 0, 0, 0]);
        let (recs, ex) = collect(&ring, 0, 48);
        assert_eq!(recs, vec![good.clone()]);
        assert!(ex.corrupt);
        assert_eq!(ex.new_tail, 48);
        assert_eq!(ex.records, 1);

        // size smaller than a header
        put(&mut ring, 16, &record(9, 8, 0)[..6]);
        put(&mut ring, 22, &4u16.to_ne_bytes());
        let (_, ex) = collect(&ring, 0, 48);
        assert!(ex.corrupt);

        // size larger than the buffer / than what is available
        put(&mut ring, 16, &[9, 0, 0, 0, 0, 0, 0xff, 0xff]);
        let (recs, ex) = collect(&ring, 0, 48);
        assert_eq!(recs.len(), 1);
        assert!(ex.corrupt);
        assert_eq!(ex.new_tail, 48);

        // head too far ahead of tail
        let (recs, ex) = collect(&ring, 0, 65);
        assert!(recs.is_empty());
        assert!(ex.corrupt);
        assert_eq!(ex.new_tail, 65);

        // a few stray bytes after the last record
        let (recs, ex) = collect(&ring, 0, 20);
        assert_eq!(recs.len(), 1);
        assert!(ex.corrupt);
        assert_eq!(ex.new_tail, 20);

        // empty data area
        let (recs, ex) = collect(&[], 0, 8);
        assert!(recs.is_empty() && ex.corrupt);
    }

    #[test]
    fn garbage_never_panics_or_hangs() {
        // Deterministic pseudo-random rings and positions.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let len = [0usize, 8, 24, 64, 256][(next() % 5) as usize];
            let ring: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let tail = next() % 10_000;
            let head = tail.wrapping_add(next() % 300);
            let mut scratch = Vec::new();
            let mut n = 0u64;
            let ex = extract_records(&ring, tail, head, &mut scratch, &mut |r| {
                assert!(r.len() >= HEADER_SIZE);
                n += 1;
            });
            assert_eq!(ex.records, n);
            assert_eq!(ex.new_tail, head);
        }
    }
}
