//! Symbolization, after tracing, once per unique address: kernel addresses
//! through kallsyms, user addresses through each process's memory map as it
//! was at the time of the sample, ELF symbols and DWARF (with inlined
//! frames), and Rust/C++ demangling.

pub mod maps;

use anyhow::Result;

pub use maps::ProcessMaps;

/// Resolves addresses to bare function names.
pub struct Symbolizer {}

impl Symbolizer {
    /// Takes the map history recorded during tracing. Kernel symbols are
    /// loaded from `/proc/kallsyms` on first use.
    pub fn new(maps: ProcessMaps) -> Result<Symbolizer> {
        let _ = maps;
        todo!()
    }

    /// Names for a kernel stack, innermost first (one name per address;
    /// `[unknown]` when unresolvable). `addrs[0]` is an exact instruction
    /// pointer, later entries return addresses.
    pub fn kernel(&mut self, addrs: &[u64]) -> Vec<String> {
        let _ = addrs;
        todo!()
    }

    /// Names for a user stack of process `tgid` sampled at `time`, innermost
    /// first. An address inside inlined code yields several names (innermost
    /// inline first); an unresolvable one yields `[unknown]`.
    pub fn user(&mut self, tgid: u32, time: u64, addrs: &[u64]) -> Vec<String> {
        let _ = (tgid, time, addrs);
        todo!()
    }

    /// Warnings to print once at the end (e.g. kptr_restrict hid kernel
    /// addresses).
    pub fn warnings(&self) -> Vec<String> {
        todo!()
    }
}
