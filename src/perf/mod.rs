//! The perf backend: `perf_event_open` on `sched:sched_switch` and
//! `sched:sched_waking` on every online CPU, per-CPU ring buffers, and
//! decoding of samples and side-band records into [`crate::event::Event`]s
//! delivered in global time order.
//!
//! Layout: [`sys`] wraps the syscall and ioctls, [`ring`] reads the ring
//! buffers, [`record`] decodes records; [`crate::reorder`] merges the CPUs.

pub mod record;
pub mod ring;
pub mod sys;

#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod proptests;

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};

use crate::event::{Event, EventKind, SourceStats};
use crate::probes::ProbeRanges;
use crate::reorder::{Reorder, Rounds};
use crate::tracefs::Tracefs;
use record::{Decoder, Tracepoint};
use ring::Ring;

/// What to open.
#[derive(Clone, Debug)]
pub struct PerfConfig {
    /// Ring-buffer data size per CPU, in pages (a power of two).
    pub mmap_pages: usize,
    /// Take kernel callchains (false under `-U`).
    pub kernel_callchain: bool,
    /// Take user callchains (false under `-K`).
    pub user_callchain: bool,
}

/// The `sample_type` requested for both tracepoints.
fn sample_type(config: &PerfConfig) -> u64 {
    let mut st = sys::SAMPLE_IDENTIFIER
        | sys::SAMPLE_TID
        | sys::SAMPLE_TIME
        | sys::SAMPLE_CPU
        | sys::SAMPLE_RAW;
    if config.kernel_callchain || config.user_callchain {
        st |= sys::SAMPLE_CALLCHAIN;
    }
    st
}

/// The CPUs listed in a sysfs CPU list such as `0-3,5,7-8`.
pub fn parse_cpu_list(text: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let bad = || anyhow!("bad CPU list entry `{part}` in `{}`", text.trim());
        if let Some((a, b)) = part.split_once('-') {
            let a: u32 = a.trim().parse().map_err(|_| bad())?;
            let b: u32 = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            cpus.extend(a..=b);
        } else {
            cpus.push(part.parse().map_err(|_| bad())?);
        }
    }
    if cpus.is_empty() {
        bail!("empty CPU list `{}`", text.trim());
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The online CPUs, from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse_cpu_list(&text).with_context(|| format!("parsing {path}"))
}

/// One CPU's events and the ring they share.
struct CpuRing {
    cpu: u32,
    /// Time of the last event read from this ring: a loss reported later
    /// happened after it.
    last_time: u64,
    /// Declared before `fds` so it is unmapped before they are closed.
    ring: Ring,
    /// `fds[0]` owns the ring (and carries the side-band records);
    /// the others write into it through `PERF_EVENT_IOC_SET_OUTPUT`.
    fds: Vec<OwnedFd>,
}

/// Open, enabled perf events and their rings.
pub struct PerfBackend {
    cpus: Vec<CpuRing>,
    decoder: Decoder,
    reorder: Reorder,
    stats: SourceStats,
    rounds: Rounds,
    enabled: bool,
    /// kallsyms is read off the attach path; the decoder gets the result
    /// before the first read.
    probes: Option<std::thread::JoinHandle<Result<ProbeRanges>>>,
}

impl PerfBackend {
    /// Opens and enables both tracepoints on every online CPU.
    pub fn open(tracefs: &Tracefs, config: &PerfConfig) -> Result<PerfBackend> {
        if config.mmap_pages == 0 || !config.mmap_pages.is_power_of_two() {
            bail!(
                "the ring buffer size must be a power of two number of pages (got {})",
                config.mmap_pages
            );
        }
        let switch = tracefs.event_format("sched", "sched_switch")?;
        let waking = tracefs.event_format("sched", "sched_waking")?;
        let st = sample_type(config);
        let mut decoder = Decoder::new(st, &switch, &waking)?;
        let data_bytes = config
            .mmap_pages
            .checked_mul(ring::page_size())
            .ok_or_else(|| anyhow!("{} mmap pages is too large", config.mmap_pages))?;
        let watermark = u32::try_from((data_bytes / 4).max(1)).unwrap_or(u32::MAX);
        let base = sys::TracepointAttr {
            id: 0,
            sample_type: st,
            exclude_callchain_user: !config.user_callchain,
            exclude_callchain_kernel: !config.kernel_callchain,
            side_band: false,
            wakeup_watermark: watermark,
        };
        let events = [
            (
                Tracepoint::Switch,
                "sched:sched_switch",
                sys::TracepointAttr {
                    id: switch.id as u64,
                    side_band: true,
                    ..base
                },
            ),
            (
                Tracepoint::Waking,
                "sched:sched_waking",
                sys::TracepointAttr {
                    id: waking.id as u64,
                    ..base
                },
            ),
        ];

        let mut cpus = Vec::new();
        for cpu in online_cpus()? {
            let mut fds = Vec::with_capacity(events.len());
            for (tp, what, attr) in &events {
                let fd = sys::open_tracepoint(attr, what, cpu)?;
                let id = sys::event_id(fd.as_fd())
                    .with_context(|| format!("reading the id of {what} on CPU {cpu}"))?;
                decoder.add_id(id, *tp);
                fds.push(fd);
            }
            let ring = Ring::map(fds[0].as_fd(), config.mmap_pages)
                .with_context(|| format!("mapping the ring buffer of CPU {cpu}"))?;
            for fd in &fds[1..] {
                sys::set_output(fd.as_fd(), fds[0].as_fd())
                    .with_context(|| format!("sharing the ring buffer of CPU {cpu}"))?;
            }
            cpus.push(CpuRing {
                cpu,
                last_time: 0,
                ring,
                fds,
            });
        }

        let mut backend = PerfBackend {
            cpus,
            decoder,
            reorder: Reorder::new(),
            stats: SourceStats::default(),
            rounds: Rounds::default(),
            enabled: false,
            probes: config
                .kernel_callchain
                .then(|| std::thread::spawn(ProbeRanges::load)),
        };
        for c in &backend.cpus {
            for fd in &c.fds {
                sys::enable(fd.as_fd())
                    .with_context(|| format!("enabling the events of CPU {}", c.cpu))?;
            }
        }
        backend.enabled = true;
        Ok(backend)
    }

    /// Waits up to `timeout` for data (returns early on EINTR), reads every
    /// ring, and passes to `sink`, in global time order, every event that
    /// can no longer be preceded by one not yet read (see [`Rounds`]).
    pub fn poll(&mut self, timeout: Duration, sink: &mut dyn FnMut(Event)) -> Result<()> {
        let fds = self.cpus.iter().map(|c| c.fds[0].as_fd());
        let Some(start) = self.rounds.wait(fds, timeout, "the perf ring buffers")? else {
            return Ok(());
        };
        self.read_all();
        if let Some(upto) = self.rounds.end(start) {
            self.reorder.flush_upto(upto, sink);
        }
        Ok(())
    }

    /// Disables the events, drains the rings and flushes every pending
    /// event to `sink` in time order.
    pub fn finish(&mut self, sink: &mut dyn FnMut(Event)) -> Result<()> {
        let mut first_err = None;
        if self.enabled {
            for c in &self.cpus {
                for fd in &c.fds {
                    if let Err(e) = sys::disable(fd.as_fd()) {
                        first_err.get_or_insert(e.context(format!("disabling CPU {}", c.cpu)));
                    }
                }
            }
            self.enabled = false;
        }
        self.read_all();
        self.reorder.flush_all(sink);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn stats(&self) -> SourceStats {
        self.stats
    }

    /// Reads every ring, decoding into the reorder buffer.
    fn read_all(&mut self) {
        if let Some(loader) = self.probes.take() {
            // Without kallsyms nothing is trimmed (stacks may then start
            // in the tracing machinery, which symbolizes as such).
            if let Ok(Ok(probes)) = loader.join() {
                self.decoder.set_probes(probes);
            }
        }
        let PerfBackend {
            cpus,
            decoder,
            reorder,
            stats,
            rounds,
            ..
        } = self;
        for c in cpus.iter_mut() {
            let last_time = &mut c.last_time;
            let ex = c.ring.read(&mut |rec| match decoder.decode(rec) {
                Ok(Some(mut ev)) => {
                    stats.records += 1;
                    if let EventKind::Lost(l) = ev.kind {
                        stats.lost_records += l.records;
                        // The records were lost after the last one this ring
                        // delivered (never before what was already passed on).
                        ev.time = (*last_time).max(rounds.released_upto()).min(l.until);
                    } else {
                        *last_time = ev.time;
                    }
                    reorder.push(ev);
                }
                Ok(None) => stats.records += 1,
                Err(_) => stats.malformed += 1,
            });
            if ex.corrupt {
                stats.malformed += 1;
            }
        }
    }
}

impl Drop for PerfBackend {
    fn drop(&mut self) {
        if self.enabled {
            for c in &self.cpus {
                for fd in &c.fds {
                    let _ = sys::disable(fd.as_fd());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8\n").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(parse_cpu_list("0\n").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("2,0-1").unwrap(), vec![0, 1, 2]);
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("\n").is_err());
        assert!(parse_cpu_list("a-b").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("1,x").is_err());
        assert!(!online_cpus().unwrap().is_empty());
    }

    #[test]
    fn sample_type_follows_callchain_config() {
        let c = PerfConfig {
            mmap_pages: 8,
            kernel_callchain: false,
            user_callchain: false,
        };
        assert_eq!(sample_type(&c) & sys::SAMPLE_CALLCHAIN, 0);
        let c = PerfConfig {
            kernel_callchain: true,
            ..c
        };
        assert_ne!(sample_type(&c) & sys::SAMPLE_CALLCHAIN, 0);
    }

    #[test]
    fn non_power_of_two_pages_is_an_error() {
        let t = Tracefs::fixtures();
        for pages in [0, 3, 12] {
            let c = PerfConfig {
                mmap_pages: pages,
                kernel_callchain: true,
                user_callchain: true,
            };
            let err = PerfBackend::open(&t, &c)
                .err()
                .expect("must fail")
                .to_string();
            assert!(err.contains("power of two"), "{err}");
        }
    }
}
