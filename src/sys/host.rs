//! Facts about the running system that more than one stage needs: the
//! page size, the online CPUs, the monotonic clock every event is stamped
//! with, and kernel sysctls.

use anyhow::{Context, Result, anyhow, bail};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::{SysconfVar, sysconf};

/// The memory page size (4096 where it cannot be read).
pub(crate) fn page_size() -> usize {
    match sysconf(SysconfVar::PAGE_SIZE) {
        Ok(Some(p)) if p > 0 => p as usize,
        _ => 4096,
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock every event uses.
pub(crate) fn monotonic_ns() -> u64 {
    // CLOCK_MONOTONIC always exists; an error would leave 0.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |ts| {
        ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
    })
}

/// `secs` after the epoch as UTC date and time; `None` when the year
/// does not fit.
pub(crate) fn utc(secs: i64) -> Option<libc::tm> {
    let t: libc::time_t = secs;
    // SAFETY: `tm` is plain data (integers and a pointer, which may be
    // null); gmtime_r reads one time_t and fills the one tm, both of which
    // outlive the call, and returns null when the year does not fit.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::gmtime_r(&t, &mut tm).is_null() {
            return None;
        }
        Some(tm)
    }
}

/// `secs` after the epoch as a compact UTC time, `20261128T220102Z`.
pub(crate) fn utc_stamp(secs: i64) -> String {
    let Some(tm) = utc(secs) else {
        return "00000000T000000Z".to_string();
    };
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// The CPUs listed in a sysfs CPU list such as `0-3,5,7-8`.
pub(crate) fn parse_cpu_list(text: &str) -> Result<Vec<u32>> {
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
pub(crate) fn online_cpus() -> Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    parse_cpu_list(&text).with_context(|| format!("parsing {path}"))
}

/// `/proc/sys/kernel/NAME`, trimmed and parsed; `None` when it cannot be
/// read or parsed.
pub(crate) fn kernel_sysctl<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
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
    }

    #[test]
    fn the_clock_and_the_page_size_are_the_systems() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} then {b}");
        // SAFETY: sysconf has no preconditions.
        let libc_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        assert_eq!(page_size(), libc_page);
        assert!(!online_cpus().unwrap().is_empty());
    }
}
