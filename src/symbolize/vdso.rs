//! The vDSO image of the running kernel, copied from this process's own
//! vDSO: every 64-bit process of a kernel maps the same image, so it
//! resolves `[vdso]` frames of any traced process.

use anyhow::{Context, Result, bail};

use super::elf::ElfFile;
use super::maps::parse_maps;

/// Copies and parses this process's vDSO.
pub(crate) fn load() -> Result<ElfFile> {
    let text = std::fs::read_to_string("/proc/self/maps").context("reading /proc/self/maps")?;
    let Some(m) = parse_maps(&text, 0).into_iter().find(|m| m.is_vdso()) else {
        bail!("no [vdso] in /proc/self/maps");
    };
    // SAFETY: getauxval only reads the auxiliary vector; it has no
    // preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base != m.start {
        bail!(
            "AT_SYSINFO_EHDR {base:#x} is not the [vdso] mapping at {:#x}",
            m.start
        );
    }
    let len = usize::try_from(m.end - m.start).context("vdso size")?;
    // SAFETY: the kernel maps the vDSO readable at AT_SYSINFO_EHDR for the
    // whole life of the process, and /proc/self/maps reports `len` readable
    // bytes there; the bytes are copied out at once.
    let bytes = unsafe { std::slice::from_raw_parts(base as usize as *const u8, len) }.to_vec();
    ElfFile::parse(&bytes, None).context("parsing the vDSO")
}
