//! Kernel symbols from `/proc/kallsyms`: a sorted table of text symbols
//! (module symbols included, without their `[module]` tag; those of BPF
//! programs and trampolines left out) searched by address.

use std::ops::Range;

use anyhow::Result;

use crate::kallsyms;

/// Sorted kernel text symbols, kept compact: one address array and one
/// string holding every name (a kernel has over 100,000 of them), built
/// here or borrowed from a mapped cache file.
#[derive(Debug, Default)]
pub(crate) struct KernelSymbols {
    table: Table,
    /// True when kallsyms listed symbols but every address read 0
    /// (kptr_restrict, or not privileged).
    hidden: bool,
    /// Where the kernel's text begins (`_text`): KASLR moves it each boot.
    text: Option<u64>,
}

/// Where a [`KernelSymbols`]' arrays are: `addrs` sorted, one per symbol;
/// `ends`, where each symbol's name ends in `names` (it starts where the
/// previous one ends). Names are checked as UTF-8 when looked up.
#[derive(Debug)]
enum Table {
    Owned {
        addrs: Vec<u64>,
        ends: Vec<u32>,
        names: String,
    },
    /// In a mapped file, at ranges checked once (see
    /// [`KernelSymbols::mapped`]).
    Mapped {
        map: memmap2::Mmap,
        addrs: Range<usize>,
        ends: Range<usize>,
        names: Range<usize>,
    },
}

impl Default for Table {
    fn default() -> Table {
        Table::Owned {
            addrs: Vec::new(),
            ends: Vec::new(),
            names: String::new(),
        }
    }
}

impl PartialEq for KernelSymbols {
    fn eq(&self, other: &KernelSymbols) -> bool {
        self.addrs() == other.addrs()
            && self.ends() == other.ends()
            && self.names() == other.names()
            && self.hidden == other.hidden
            && self.text == other.text
    }
}

impl Eq for KernelSymbols {}

/// `bytes` as native-endian u64s: `None` unless aligned and whole.
fn as_u64s(bytes: &[u8]) -> Option<&[u64]> {
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<u64>())
        || !bytes.len().is_multiple_of(8)
    {
        return None;
    }
    // SAFETY: the pointer is aligned for u64 and the length a whole number
    // of them (both checked above); any bits are a valid u64; the slice
    // borrows `bytes`, so lives no longer.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u64>(), bytes.len() / 8) })
}

/// `bytes` as native-endian u32s: `None` unless aligned and whole.
fn as_u32s(bytes: &[u8]) -> Option<&[u32]> {
    if !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<u32>())
        || !bytes.len().is_multiple_of(4)
    {
        return None;
    }
    // SAFETY: as in `as_u64s`, for u32.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u32>(), bytes.len() / 4) })
}

/// The bytes of `words`, in native order (to be written out).
pub(crate) fn u64_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: any initialized memory is valid as bytes, u8 needs no
    // alignment, and the length covers exactly the words borrowed.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
}

/// The bytes of `words`, in native order (to be written out).
pub(crate) fn u32_bytes(words: &[u32]) -> &[u8] {
    // SAFETY: as in `u64_bytes`.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), std::mem::size_of_val(words)) }
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
                table: Table::Owned {
                    addrs: self.addrs,
                    ends: self.ends,
                    names: self.names,
                },
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
            table: Table::Owned { addrs, ends, names },
            hidden,
            text,
        }
    }
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

    /// The table in `map` at the given byte ranges, checked once: `None`
    /// unless each range lies in `map`, the arrays are aligned and of one
    /// length, the addresses and name ends are sorted, and the last name
    /// ends within `names`.
    pub(crate) fn mapped(
        map: memmap2::Mmap,
        addrs: Range<usize>,
        ends: Range<usize>,
        names: Range<usize>,
        hidden: bool,
        text: Option<u64>,
    ) -> Option<KernelSymbols> {
        let a = as_u64s(map.get(addrs.clone())?)?;
        let e = as_u32s(map.get(ends.clone())?)?;
        let n = map.get(names.clone())?;
        if a.len() != e.len()
            || !a.is_sorted()
            || !e.is_sorted()
            || e.last().is_some_and(|&end| end as usize > n.len())
        {
            return None;
        }
        Some(KernelSymbols {
            table: Table::Mapped {
                map,
                addrs,
                ends,
                names,
            },
            hidden,
            text,
        })
    }

    fn addrs(&self) -> &[u64] {
        match &self.table {
            Table::Owned { addrs, .. } => addrs,
            Table::Mapped { map, addrs, .. } => {
                map.get(addrs.clone()).and_then(as_u64s).unwrap_or_default()
            }
        }
    }

    fn ends(&self) -> &[u32] {
        match &self.table {
            Table::Owned { ends, .. } => ends,
            Table::Mapped { map, ends, .. } => {
                map.get(ends.clone()).and_then(as_u32s).unwrap_or_default()
            }
        }
    }

    fn names(&self) -> &[u8] {
        match &self.table {
            Table::Owned { names, .. } => names.as_bytes(),
            Table::Mapped { map, names, .. } => map.get(names.clone()).unwrap_or_default(),
        }
    }

    /// The arrays to store (see [`KernelSymbols::mapped`]): addresses,
    /// name ends, names; whether addresses were hidden; `_text`.
    pub(crate) fn parts(&self) -> (&[u64], &[u32], &[u8], bool, Option<u64>) {
        (
            self.addrs(),
            self.ends(),
            self.names(),
            self.hidden,
            self.text,
        )
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
        self.addrs().binary_search(&addr).is_ok()
    }

    /// True when no symbol has a usable address.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.addrs().is_empty()
    }

    fn name(&self, i: usize) -> Option<&str> {
        let ends = self.ends();
        let end = *ends.get(i)? as usize;
        let start = match i.checked_sub(1) {
            Some(prev) => *ends.get(prev)? as usize,
            None => 0,
        };
        std::str::from_utf8(self.names().get(start..end)?).ok()
    }

    /// The symbol with the greatest address `<= addr`.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.addrs().partition_point(|&a| a <= addr);
        self.name(idx.checked_sub(1)?)
    }

    /// The address of symbol `name` (first match), for tests and checks.
    #[cfg(test)]
    pub(crate) fn address_of(&self, name: &str) -> Option<u64> {
        let addrs = self.addrs();
        (0..addrs.len())
            .find(|&i| self.name(i) == Some(name))
            .map(|i| addrs[i])
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
            prop_assert_eq!(k.addrs().to_vec(), least.keys().copied().collect::<Vec<_>>());
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
        assert_eq!(sorted.addrs().len(), 250);
    }
}
