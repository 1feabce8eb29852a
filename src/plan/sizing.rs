//! Sizes decided from the host before tracing: the default ring size per
//! CPU, and the tracefs backend's largest buffer, checked with the other
//! usage rules (a refusal is a usage error, as clap's are).

use clap::CommandFactory;
use clap::error::ErrorKind;

use crate::cli::{Backend, Cli};

/// The default ring size per CPU, in pages: 32 MiB shared by `cpus`
/// CPUs, clamped to 512 KiB ..= 4 MiB per CPU, rounded down to a power of
/// two pages. (On 2 CPUs with 4 KiB pages: 1024 pages, 4 MiB, which
/// holds a 10 s system-wide `perf bench sched pipe` storm without loss.)
///
/// When samples carry a copy of the user stack (`dwarf`), all of it is
/// larger by one for every 2 KiB of copy, 4 times at most (8 KiB copies:
/// 128 MiB shared, 2 ..= 16 MiB each), so that the rings hold about as
/// much time of a storm whatever the copy.
pub(crate) fn default_mmap_pages(cpus: usize, page_size: usize, copy: Option<u32>) -> usize {
    const MIB: usize = 1024 * 1024;
    let scale = copy.map_or(1, |bytes| (bytes as usize).div_ceil(2048).clamp(1, 4));
    let per_cpu = (scale * 32 * MIB / cpus.max(1)).clamp(scale * MIB / 2, scale * 4 * MIB);
    let pages = (per_cpu / page_size.max(1)).max(1);
    1 << pages.ilog2()
}

/// The largest per-CPU buffer we ask for, in bytes: as large as a perf ring
/// buffer gets (the kernel keeps a perf ring's page pointers in one
/// max-order allocation, 4 MiB: 2^18 pages of 4 KiB). The kernel would
/// give tracefs as much as the machine has.
pub(crate) const MAX_BUFFER_BYTES: usize = 1 << 30;

/// The most pages `--mmap-pages` may ask of the tracefs buffer.
pub(crate) fn max_buffer_pages(page_size: usize) -> usize {
    (MAX_BUFFER_BYTES / page_size.max(1)).max(1)
}

/// Says that `pages` is above `max`.
pub(crate) fn too_many_pages(pages: usize, max: usize) -> String {
    format!(
        "--mmap-pages ({pages}) must not be greater than {max} with the tracefs backend \
         ({} GiB per CPU, the largest perf ring buffer)",
        MAX_BUFFER_BYTES >> 30
    )
}

/// The usage rules that depend on the host (its page size): a refusal is a
/// usage error.
pub(crate) fn check_host(cli: &Cli) -> Result<(), clap::Error> {
    let Some(pages) = cli.mmap_pages else {
        return Ok(());
    };
    let page_size = crate::sys::host::page_size();
    // A ring (and its control page) larger than an address space.
    if pages
        .checked_add(1)
        .and_then(|p| p.checked_mul(page_size))
        .is_none_or(|bytes| bytes > isize::MAX as usize)
    {
        return Err(Cli::command().error(
            ErrorKind::ValueValidation,
            format!(
                "--mmap-pages ({pages}) is too large: {pages} pages of {page_size} bytes \
                 exceed the address space"
            ),
        ));
    }
    if cli.backend == Backend::Tracefs {
        let max = max_buffer_pages(page_size);
        if pages > max {
            return Err(
                Cli::command().error(ErrorKind::ArgumentConflict, too_many_pages(pages, max))
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut v = vec!["offwake-perf"];
        v.extend_from_slice(args);
        let cli = Cli::try_parse_from(v)?;
        check_host(&cli)?;
        cli.check_rules()?;
        Ok(cli)
    }

    #[test]
    fn tracefs_buffer_capped_before_tracing() {
        let max = max_buffer_pages(crate::sys::host::page_size());
        let max = max.to_string();
        assert!(parse(&["--backend", "tracefs", "--mmap-pages", &max]).is_ok());
        let over = (2 * max.parse::<usize>().unwrap()).to_string();
        let err = parse(&["--backend", "tracefs", "--mmap-pages", &over]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        assert!(
            err.to_string().contains(&format!("--mmap-pages ({over})")),
            "{err}"
        );
        // The perf backend's bound is the kernel's; auto tries perf first
        // (and checks again before falling back).
        assert!(parse(&["--backend", "perf", "--mmap-pages", &over]).is_ok());
        assert!(parse(&["--mmap-pages", &over]).is_ok());
    }

    #[test]
    fn a_ring_larger_than_memory_is_refused_before_tracing() {
        let huge = (1usize << (usize::BITS - 1)).to_string();
        for backend in ["auto", "perf", "tracefs"] {
            let err = parse(&["--backend", backend, "--mmap-pages", &huge]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{backend}");
            assert!(err.to_string().contains("is too large"), "{err}");
        }
    }

    #[test]
    fn default_ring_size_follows_cpus_and_page_size() {
        assert_eq!(default_mmap_pages(2, 4096, None), 1024);
        assert_eq!(default_mmap_pages(1, 4096, None), 1024);
        assert_eq!(default_mmap_pages(16, 4096, None), 512);
        assert_eq!(default_mmap_pages(64, 4096, None), 128);
        assert_eq!(default_mmap_pages(1024, 4096, None), 128);
        assert_eq!(default_mmap_pages(2, 65536, None), 64);
        assert_eq!(default_mmap_pages(24, 4096, None), 256);
        assert!(default_mmap_pages(0, 0, None).is_power_of_two());
        assert_eq!(default_mmap_pages(2, 4096, Some(8192)), 4096);
        assert_eq!(default_mmap_pages(2, 4096, Some(65528)), 4096);
        assert_eq!(default_mmap_pages(64, 4096, Some(8192)), 512);
        assert_eq!(default_mmap_pages(1024, 4096, Some(8192)), 512);
        assert_eq!(default_mmap_pages(2, 4096, Some(4096)), 2048);
        assert_eq!(default_mmap_pages(2, 4096, Some(2048)), 1024);
        assert_eq!(default_mmap_pages(2, 4096, Some(512)), 1024);
    }
}
