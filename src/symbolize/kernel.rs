//! Kernel symbols from `/proc/kallsyms`: a sorted table of text symbols
//! (module symbols included, without their `[module]` tag; those of BPF
//! programs and trampolines left out) searched by address.

use anyhow::Result;

use crate::kallsyms;

/// Sorted kernel text symbols, kept compact: one address array and one
/// string holding every name (a kernel has over 100,000 of them).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct KernelSymbols {
    /// Sorted, one per symbol.
    addrs: Vec<u64>,
    /// Where each symbol's name ends in `names` (it starts where the
    /// previous one ends).
    ends: Vec<u32>,
    names: String,
    /// True when kallsyms listed symbols but every address read 0
    /// (kptr_restrict, or not privileged).
    hidden: bool,
    /// Where the kernel's text begins (`_text`): KASLR moves it each boot.
    text: Option<u64>,
}

/// Whether symbols of `module` come and go while the kernel runs: BPF
/// programs (`[bpf]`) and trampolines (`[__builtin__ftrace]`, …). They are
/// left out, so that tables kept for a boot (see
/// [`crate::kallsyms::cache`]) never name one that is gone.
fn dynamic(module: Option<&str>) -> bool {
    module.is_some_and(|m| m == "bpf" || m.starts_with("__builtin__"))
}

/// A [`KernelSymbols`] built from the symbols of a kallsyms listing, one at
/// a time (the listing need not be kept).
#[derive(Default)]
pub(crate) struct SymbolsBuilder {
    /// Address, and where the name is in `arena`.
    syms: Vec<(u64, u32, u32)>,
    arena: String,
    /// Text symbols seen, with or without an address.
    seen: usize,
    text: Option<u64>,
}

impl SymbolsBuilder {
    pub(crate) fn add(&mut self, sym: &kallsyms::Symbol<'_>) {
        if sym.name == "_text" && sym.module.is_none() && sym.addr != 0 {
            self.text = Some(sym.addr);
        }
        // The optional `[module]` field is dropped.
        if !matches!(sym.kind, "t" | "T" | "w" | "W") || dynamic(sym.module) {
            return;
        }
        self.seen += 1;
        if sym.addr == 0 {
            return;
        }
        let (Ok(start), Ok(len)) = (
            u32::try_from(self.arena.len()),
            u32::try_from(sym.name.len()),
        ) else {
            // Over 4 GiB of names: no kernel has that many.
            return;
        };
        self.arena.push_str(sym.name);
        self.syms.push((sym.addr, start, len));
    }

    pub(crate) fn finish(self) -> KernelSymbols {
        let SymbolsBuilder {
            mut syms,
            arena,
            seen,
            text,
        } = self;
        let name = |&(_, start, len): &(u64, u32, u32)| {
            arena
                .get(start as usize..start as usize + len as usize)
                .unwrap_or_default()
        };
        // Mostly sorted already: the kernel lists its own symbols in
        // address order.
        syms.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| name(a).cmp(name(b))));
        // Several names can share an address (aliases); keep the first in
        // name order, so results are deterministic.
        syms.dedup_by_key(|s| s.0);
        let mut names = String::with_capacity(arena.len());
        let mut ends = Vec::with_capacity(syms.len());
        let mut addrs = Vec::with_capacity(syms.len());
        for s in &syms {
            names.push_str(name(s));
            addrs.push(s.0);
            ends.push(u32::try_from(names.len()).unwrap_or(u32::MAX));
        }
        KernelSymbols {
            addrs,
            ends,
            names,
            hidden: seen > 0 && syms.is_empty(),
            text,
        }
    }
}

/// The parts of a [`KernelSymbols`], as stored in a cache.
pub(crate) struct Parts {
    pub(crate) addrs: Vec<u64>,
    pub(crate) ends: Vec<u32>,
    pub(crate) names: String,
    pub(crate) hidden: bool,
    pub(crate) text: Option<u64>,
}

impl KernelSymbols {
    /// Reads and parses `/proc/kallsyms`.
    pub(crate) fn load() -> Result<KernelSymbols> {
        Ok(KernelSymbols::parse(&kallsyms::read()?))
    }

    /// Parses kallsyms text. Malformed lines are skipped.
    pub(crate) fn parse(text: &str) -> KernelSymbols {
        let mut b = SymbolsBuilder::default();
        kallsyms::symbols(text).for_each(|sym| b.add(&sym));
        b.finish()
    }

    /// The table from stored parts, checked: `None` unless the addresses
    /// are sorted and every name lies, in order, within `names` (whole
    /// UTF-8 characters).
    pub(crate) fn from_parts(p: Parts) -> Option<KernelSymbols> {
        if p.addrs.len() != p.ends.len()
            || !p.addrs.is_sorted()
            || !p.ends.is_sorted()
            || p.ends.last().is_some_and(|&e| e as usize > p.names.len())
            || !p.ends.iter().all(|&e| p.names.is_char_boundary(e as usize))
        {
            return None;
        }
        Some(KernelSymbols {
            addrs: p.addrs,
            ends: p.ends,
            names: p.names,
            hidden: p.hidden,
            text: p.text,
        })
    }

    /// The parts to store (see [`KernelSymbols::from_parts`]).
    pub(crate) fn parts(&self) -> (&[u64], &[u32], &str, bool, Option<u64>) {
        (&self.addrs, &self.ends, &self.names, self.hidden, self.text)
    }

    /// The address of `_text`, where the kernel's text begins.
    pub(crate) fn text(&self) -> Option<u64> {
        self.text
    }

    /// True when every address was 0: nothing can be resolved.
    pub(crate) fn addresses_hidden(&self) -> bool {
        self.hidden
    }

    /// Whether a symbol starts exactly at `addr`.
    pub(crate) fn has_address(&self, addr: u64) -> bool {
        self.addrs.binary_search(&addr).is_ok()
    }

    /// True when no symbol has a usable address.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    fn name(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        let start = match i.checked_sub(1) {
            Some(prev) => *self.ends.get(prev)? as usize,
            None => 0,
        };
        self.names.get(start..end)
    }

    /// The symbol with the greatest address `<= addr`.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.addrs.partition_point(|&a| a <= addr);
        self.name(idx.checked_sub(1)?)
    }

    /// The address of symbol `name` (first match), for tests and checks.
    #[cfg(test)]
    pub(crate) fn address_of(&self, name: &str) -> Option<u64> {
        (0..self.addrs.len())
            .find(|&i| self.name(i) == Some(name))
            .map(|i| self.addrs[i])
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
