//! Kernel symbols from `/proc/kallsyms`: a sorted table of text symbols
//! (module symbols included, without their `[module]` tag) searched by
//! address.

use anyhow::Result;

use crate::kallsyms;

/// Sorted kernel text symbols.
#[derive(Debug, Default)]
pub(crate) struct KernelSymbols {
    /// `(address, name)`, sorted by address.
    syms: Vec<(u64, String)>,
    /// True when kallsyms listed symbols but every address read 0
    /// (kptr_restrict, or not privileged).
    hidden: bool,
    /// Where the kernel's text begins (`_text`): KASLR moves it each boot.
    text: Option<u64>,
}

impl KernelSymbols {
    /// Reads and parses `/proc/kallsyms`.
    pub(crate) fn load() -> Result<KernelSymbols> {
        Ok(KernelSymbols::parse(&kallsyms::read()?))
    }

    /// Parses kallsyms text. Malformed lines are skipped.
    pub(crate) fn parse(text: &str) -> KernelSymbols {
        let mut syms = Vec::new();
        let mut seen = 0usize;
        let mut nonzero = 0usize;
        let mut start = None;
        // The optional `[module]` field is dropped.
        for sym in kallsyms::symbols(text) {
            if sym.name == "_text" && sym.module.is_none() && sym.addr != 0 {
                start = Some(sym.addr);
            }
            if !matches!(sym.kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let (addr, name) = (sym.addr, sym.name);
            seen += 1;
            if addr != 0 {
                nonzero += 1;
                syms.push((addr, name.to_string()));
            }
        }
        syms.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        // Several names can share an address (aliases); keep the first in
        // name order, so results are deterministic.
        syms.dedup_by(|b, a| a.0 == b.0);
        KernelSymbols {
            syms,
            hidden: seen > 0 && nonzero == 0,
            text: start,
        }
    }

    /// The address of `_text`, where the kernel's text begins.
    pub(crate) fn text(&self) -> Option<u64> {
        self.text
    }

    /// True when every address was 0: nothing can be resolved.
    pub(crate) fn addresses_hidden(&self) -> bool {
        self.hidden
    }

    /// True when no symbol has a usable address.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The symbol with the greatest address `<= addr`.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.syms.partition_point(|(a, _)| *a <= addr);
        let (_, name) = self.syms.get(idx.checked_sub(1)?)?;
        Some(name)
    }

    /// The address of symbol `name` (first match), for tests and checks.
    #[cfg(test)]
    pub(crate) fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|(_, n)| n == name).map(|(a, _)| *a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81001000 t helper_local
ffffffff81002000 D some_data
ffffffff81003000 W weak_fn
ffffffff81004000 T schedule
garbage line
ffffffffc0100000 t nf_hook_thing\t[nf_conntrack]
ffffffffc0100100 T nf_other\t[nf_conntrack]
";

    #[test]
    fn parses_text_symbols_and_modules() {
        let k = KernelSymbols::parse(SAMPLE);
        assert!(!k.addresses_hidden());
        assert_eq!(k.lookup(0xffffffff81000010), Some("_stext"));
        assert_eq!(k.lookup(0xffffffff81001fff), Some("helper_local"));
        // Data symbols are not text: the address belongs to helper_local.
        assert_eq!(k.lookup(0xffffffff81002010), Some("helper_local"));
        assert_eq!(k.lookup(0xffffffff81003004), Some("weak_fn"));
        assert_eq!(k.lookup(0xffffffff81004000), Some("schedule"));
        assert_eq!(k.lookup(0xffffffffc0100050), Some("nf_hook_thing"));
        assert_eq!(k.lookup(0xffffffffc0100100), Some("nf_other"));
        assert_eq!(k.lookup(0x1000), None);
        assert_eq!(k.address_of("schedule"), Some(0xffffffff81004000));
    }

    #[test]
    fn zeroed_addresses_are_detected() {
        let k = KernelSymbols::parse(
            "0000000000000000 T _stext\n0000000000000000 T schedule\n0000000000000000 t x\t[m]\n",
        );
        assert!(k.addresses_hidden());
        assert!(k.is_empty());
        assert_eq!(k.lookup(0xffffffff81004000), None);
        assert!(!KernelSymbols::parse("").addresses_hidden());
    }

    #[test]
    fn live_kallsyms_resolves_schedule() {
        let k = KernelSymbols::load().expect("reading /proc/kallsyms");
        if k.addresses_hidden() {
            // Not privileged: nothing to check against.
            return;
        }
        let addr = k.address_of("schedule").expect("schedule in kallsyms");
        assert_eq!(k.lookup(addr + 4), Some("schedule"));
    }
}
