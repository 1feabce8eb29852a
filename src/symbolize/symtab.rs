//! Function symbols of an ELF file's symbol tables, read by range: every
//! entry's address and size (a few bytes each), but only the names of the
//! symbols that looked-up addresses land in. A large binary's string table
//! (tens of MiB for a compiler) is never read whole.

use std::collections::HashMap;

use object::{ObjectSymbol, ObjectSymbolTable, SymbolKind};

use super::read::Allowance;

/// Which symbol table an entry is from. Within one address, entries of an
/// earlier table win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Table {
    /// The binary's `.symtab`.
    Symtab,
    /// The binary's `.dynsym`.
    Dynsym,
    /// The `.symtab` of the binary's MiniDebugInfo (`.gnu_debugdata`).
    Mini,
    /// The `.symtab` of a separate debug file.
    Debug,
}

/// One function symbol, without its name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    addr: u64,
    size: u64,
    index: u32,
    table: Table,
    global: bool,
}

/// The function symbols of `table` (definitions of text symbols at a
/// nonzero address), each charged to `allowance`; those that do not fit
/// are left out.
pub(crate) fn entries<'data: 'file, 'file, T>(
    table: &'file T,
    which: Table,
    allowance: &Allowance,
) -> Vec<Entry>
where
    T: ObjectSymbolTable<'data>,
{
    // The entry, and its place in [`Index::starts`].
    let cost = (std::mem::size_of::<Entry>() + std::mem::size_of::<u32>()) as u64;
    table
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .take_while(|_| allowance.charge(cost))
        .filter_map(|s| {
            Some(Entry {
                addr: s.address(),
                size: s.size(),
                index: u32::try_from(s.index().0).ok()?,
                table: which,
                global: s.is_global(),
            })
        })
        .collect()
}

impl Entry {
    pub(crate) fn table(&self) -> Table {
        self.table
    }

    /// Its index in its table.
    pub(crate) fn index(&self) -> usize {
        self.index as usize
    }
}

/// The raw (mangled) name of an entry, as its table gives it; `None` when
/// unreadable or empty.
pub(crate) type NameOf<'a> = dyn Fn(&Entry) -> Option<String> + 'a;

/// Entries of one or more tables, sorted by address, best first within
/// an address: sized, then global, then from an earlier table.
#[derive(Debug, Default)]
pub(crate) struct Index {
    entries: Vec<Entry>,
    /// Where each address's run of entries begins.
    starts: Vec<u32>,
}

/// How far back past sized symbols that end before an address a lookup
/// walks (a small symbol nested in, or following, a bigger one).
const WALK_BACK: usize = 8;
/// Most aliases of one address whose names are compared (real files have
/// a few; a hostile one may have millions).
const MAX_ALIASES: usize = 16;

impl Index {
    pub(crate) fn new(mut entries: Vec<Entry>) -> Index {
        entries.sort_unstable_by(|a, b| {
            a.addr
                .cmp(&b.addr)
                .then_with(|| (b.size != 0).cmp(&(a.size != 0)))
                .then_with(|| b.global.cmp(&a.global))
                .then_with(|| a.table.cmp(&b.table))
                .then_with(|| a.index.cmp(&b.index))
        });
        // Entries are counted in u32 (a table holds fewer).
        entries.truncate(u32::MAX as usize);
        let starts = (0..entries.len())
            .filter(|&i| i == 0 || entries[i].addr != entries[i - 1].addr)
            .map(|i| i as u32)
            .collect();
        Index { entries, starts }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries equally good for the symbol containing `vaddr`: the
    /// best of its address and those ranked the same (aliases).
    fn containing(&self, vaddr: u64) -> &[Entry] {
        let n = self
            .starts
            .partition_point(|&i| self.entries[i as usize].addr <= vaddr);
        for &start in self.starts[..n].iter().rev().take(WALK_BACK) {
            let start = start as usize;
            let best = self.entries[start];
            if best.size == 0 || vaddr - best.addr < best.size {
                let same = self.entries[start..]
                    .iter()
                    .take(MAX_ALIASES)
                    .take_while(|e| {
                        e.addr == best.addr
                            && (e.size != 0) == (best.size != 0)
                            && e.global == best.global
                            && e.table == best.table
                    })
                    .count();
                return &self.entries[start..start + same];
            }
        }
        &[]
    }

    /// The raw name of the symbol containing each of `vaddrs` (of aliases,
    /// the least name), reading only those names; each kept name is
    /// charged to `allowance`.
    pub(crate) fn names_at(
        &self,
        vaddrs: impl IntoIterator<Item = u64>,
        name_of: &NameOf<'_>,
        allowance: &Allowance,
    ) -> HashMap<u64, String> {
        let mut read: HashMap<(Table, u32), Option<String>> = HashMap::new();
        let mut out = HashMap::new();
        for vaddr in vaddrs {
            let mut best: Option<String> = None;
            for e in self.containing(vaddr) {
                let name = read
                    .entry((e.table, e.index))
                    .or_insert_with(|| {
                        name_of(e).filter(|n| !n.is_empty() && allowance.charge(n.len() as u64))
                    })
                    .clone();
                if let Some(name) = name
                    && best.as_ref().is_none_or(|b| name < *b)
                {
                    best = Some(name);
                }
            }
            if let Some(name) = best {
                out.insert(vaddr, name);
            }
        }
        out
    }

    /// Every symbol with its name, for looking up any address later
    /// ([`Sorted::lookup`]).
    pub(crate) fn all(&self, name_of: &NameOf<'_>, allowance: &Allowance) -> Sorted {
        let addrs = self.starts.iter().map(|&i| self.entries[i as usize].addr);
        let names = self.names_at(addrs, name_of, allowance);
        let symbols = self
            .starts
            .iter()
            .filter_map(|&i| {
                let e = self.entries[i as usize];
                let name = names.get(&e.addr)?.clone();
                Some((e.addr, e.size, name))
            })
            .collect();
        Sorted { symbols }
    }
}

/// Every function symbol of a file, named, by address.
#[derive(Debug, Default)]
pub(crate) struct Sorted {
    symbols: Vec<(u64, u64, String)>,
}

impl Sorted {
    pub(crate) fn len(&self) -> usize {
        self.symbols.len()
    }

    /// The raw name of the symbol containing `vaddr`.
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<&str> {
        let n = self.symbols.partition_point(|s| s.0 <= vaddr);
        self.symbols[..n]
            .iter()
            .rev()
            .take(WALK_BACK)
            .find(|(addr, size, _)| *size == 0 || vaddr - addr < *size)
            .map(|(_, _, name)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: u64, size: u64, index: u32, global: bool) -> Entry {
        Entry {
            addr,
            size,
            index,
            table: Table::Symtab,
            global,
        }
    }

    #[test]
    fn only_the_names_looked_up_are_read() {
        let names = ["", "big", "nested", "alias_b", "alias_a", "local", "open"];
        let index = Index::new(vec![
            entry(0x1000, 0x100, 1, true),
            entry(0x1010, 0x10, 2, true),
            entry(0x2000, 0x10, 3, true),
            entry(0x2000, 0x10, 4, true),
            entry(0x2000, 0x10, 5, false),
            entry(0x3000, 0, 6, true),
        ]);
        let asked = std::cell::RefCell::new(Vec::new());
        let name_of = |e: &Entry| {
            asked.borrow_mut().push(e.index());
            Some(names[e.index()].to_string())
        };
        let allowance = Allowance::new(1 << 20);
        let got = index.names_at(
            [0x1050, 0x1018, 0x2004, 0x3fff, 0x500],
            &name_of,
            &allowance,
        );
        assert_eq!(got[&0x1050], "big", "past the nested symbol's end");
        assert_eq!(got[&0x1018], "nested");
        assert_eq!(got[&0x2004], "alias_a", "the least of equal aliases");
        assert_eq!(got[&0x3fff], "open", "an unsized symbol runs on");
        assert!(!got.contains_key(&0x500));
        let mut asked = asked.into_inner();
        asked.sort_unstable();
        assert_eq!(asked, vec![1, 2, 3, 4, 6], "the local alias was not read");
    }

    #[test]
    fn sorted_table_matches_lookups() {
        let names = ["", "a", "b"];
        let index = Index::new(vec![entry(0x10, 0x10, 1, true), entry(0x40, 0, 2, true)]);
        let name_of = |e: &Entry| Some(names[e.index()].to_string());
        let all = index.all(&name_of, &Allowance::new(1 << 20));
        assert_eq!(all.len(), 2);
        assert_eq!(all.lookup(0x18), Some("a"));
        assert_eq!(all.lookup(0x20), None);
        assert_eq!(all.lookup(0x99), Some("b"));
        assert_eq!(all.lookup(0x5), None);
    }
}
