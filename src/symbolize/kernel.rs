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
/// a time (the listing need not be kept). The kernel lists its own symbols
/// in address order: while they come sorted, the table is built in place
/// and `finish` has nothing to do; otherwise it sorts.
#[derive(Default)]
pub(crate) struct SymbolsBuilder {
    addrs: Vec<u64>,
    ends: Vec<u32>,
    names: String,
    /// Set once an address came lower than the one before it: `addrs` is
    /// then in listing order, and may repeat addresses.
    unsorted: bool,
    /// Text symbols seen, with or without an address.
    seen: usize,
    text: Option<u64>,
}

impl SymbolsBuilder {
    /// With room for `symbols` symbols and `name_bytes` of names.
    pub(crate) fn with_capacity(symbols: usize, name_bytes: usize) -> SymbolsBuilder {
        SymbolsBuilder {
            addrs: Vec::with_capacity(symbols),
            ends: Vec::with_capacity(symbols),
            names: String::with_capacity(name_bytes),
            ..SymbolsBuilder::default()
        }
    }

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
        let Some(end) = self
            .names
            .len()
            .checked_add(sym.name.len())
            .and_then(|e| u32::try_from(e).ok())
        else {
            // Over 4 GiB of names: no kernel has that many.
            return;
        };
        match self.addrs.last() {
            // Another name at the same address (an alias): the least in
            // name order is kept, so results are deterministic.
            Some(&last) if last == sym.addr && !self.unsorted => {
                let start = self.start(self.ends.len() - 1);
                if self.names.get(start..).is_some_and(|n| sym.name < n) {
                    self.names.truncate(start);
                    self.names.push_str(sym.name);
                    if let Some(e) = self.ends.last_mut() {
                        *e = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
                    }
                }
                return;
            }
            Some(&last) if last > sym.addr => self.unsorted = true,
            _ => {}
        }
        self.names.push_str(sym.name);
        self.addrs.push(sym.addr);
        self.ends.push(end);
    }

    /// Where name `i` starts in `names`.
    fn start(&self, i: usize) -> usize {
        i.checked_sub(1)
            .and_then(|p| self.ends.get(p))
            .map_or(0, |&e| e as usize)
    }

    pub(crate) fn finish(self) -> KernelSymbols {
        let hidden = self.seen > 0 && self.addrs.is_empty();
        let text = self.text;
        if !self.unsorted {
            return KernelSymbols {
                addrs: self.addrs,
                ends: self.ends,
                names: self.names,
                hidden,
                text,
            };
        }
        let name = |i: usize| {
            let end = self.ends.get(i).map_or(0, |&e| e as usize);
            self.names.get(self.start(i)..end).unwrap_or_default()
        };
        let mut order: Vec<usize> = (0..self.addrs.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            self.addrs[a]
                .cmp(&self.addrs[b])
                .then_with(|| name(a).cmp(name(b)))
        });
        // The least name of each address is kept.
        order.dedup_by_key(|i| self.addrs[*i]);
        let mut names = String::with_capacity(self.names.len());
        let mut ends = Vec::with_capacity(order.len());
        let mut addrs = Vec::with_capacity(order.len());
        for &i in &order {
            names.push_str(name(i));
            addrs.push(self.addrs[i]);
            ends.push(u32::try_from(names.len()).unwrap_or(u32::MAX));
        }
        KernelSymbols {
            addrs,
            ends,
            names,
            hidden,
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

#[cfg(test)]
mod builder_tests {
    use super::*;
    use crate::proptest_config::config;
    use proptest::prelude::*;

    /// Text symbols in any order, from few addresses and names so that
    /// aliases are common.
    fn listing() -> impl Strategy<Value = Vec<(u64, String)>> {
        proptest::collection::vec((0u64..40, "[a-d]{1,3}"), 0..200)
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn the_table_keeps_the_least_name_of_each_address(syms in listing()) {
            let mut b = SymbolsBuilder::default();
            for (addr, name) in &syms {
                b.add(&kallsyms::Symbol { addr: *addr, kind: "t", name, module: None });
            }
            let k = b.finish();
            let mut least = std::collections::BTreeMap::<u64, &str>::new();
            for (addr, name) in syms.iter().filter(|(a, _)| *a != 0) {
                let e = least.entry(*addr).or_insert(name);
                *e = (*e).min(name.as_str());
            }
            prop_assert_eq!(k.addrs.clone(), least.keys().copied().collect::<Vec<_>>());
            for (i, name) in least.values().enumerate() {
                prop_assert_eq!(k.name(i), Some(*name));
            }
        }
    }

    #[test]
    fn sorted_and_shuffled_listings_give_one_table() {
        let lines: Vec<String> = (0..500u64)
            .map(|i| format!("{:016x} T f{}\n", 0xffffffff81000000 + i / 2 * 16, 499 - i))
            .collect();
        let sorted = KernelSymbols::parse(&lines.concat());
        let mut shuffled = lines.clone();
        shuffled.reverse();
        shuffled.swap(3, 200);
        assert_eq!(KernelSymbols::parse(&shuffled.concat()), sorted);
        // The least of two aliases: f498 over f499.
        assert_eq!(sorted.lookup(0xffffffff81000000), Some("f498"));
        assert_eq!(sorted.addrs.len(), 250);
    }
}
