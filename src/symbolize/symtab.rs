//! Function symbols of an ELF file's symbol tables, read by range: every
//! entry's address and size (a few bytes each), but only the names of the
//! symbols that looked-up addresses land in. A large binary's string table
//! (tens of MiB for a compiler) is never read whole.

use std::collections::{HashMap, HashSet};

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, SectionFlags, SymbolKind, SymbolSection,
};

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
    /// An untyped label in code (`STT_NOTYPE`, such as ld.so's
    /// `_dl_start_user`), not a function.
    label: bool,
}

/// The indices of `obj`'s sections that hold code (`SHF_EXECINSTR`; a
/// separate debug file keeps its sections' flags).
pub(crate) fn code_sections<'data>(obj: &impl Object<'data>) -> HashSet<usize> {
    obj.sections()
        .filter(|s| {
            matches!(s.flags(), SectionFlags::Elf { sh_flags, .. }
                if sh_flags.contains(object::elf::SHF_EXECINSTR))
        })
        .map(|s| s.index().0)
        .collect()
}

/// The function symbols of `table` (definitions of text symbols at a
/// nonzero address, and of untyped labels in `code`, the sections that
/// hold code), each charged to `allowance`; those that do not fit are
/// left out.
pub(crate) fn entries<'data: 'file, 'file, T>(
    table: &'file T,
    which: Table,
    code: &HashSet<usize>,
    allowance: &Allowance,
) -> Vec<Entry>
where
    T: ObjectSymbolTable<'data>,
{
    // The entry, and its place in [`Index::starts`].
    let cost = (std::mem::size_of::<Entry>() + std::mem::size_of::<u32>()) as u64;
    let in_code =
        |s: &T::Symbol| matches!(s.section(), SymbolSection::Section(i) if code.contains(&i.0));
    table
        .symbols()
        .filter_map(|s| {
            let label = match s.kind() {
                SymbolKind::Text => false,
                // Untyped: STT_NOTYPE (object excludes mapping symbols
                // such as `$x` from its definitions).
                SymbolKind::Unknown if in_code(&s) => true,
                _ => return None,
            };
            (s.is_definition() && s.address() != 0).then_some((s, label))
        })
        .take_while(|_| allowance.charge(cost))
        .filter_map(|(s, label)| {
            Some(Entry {
                addr: s.address(),
                size: s.size(),
                index: u32::try_from(s.index().0).ok()?,
                table: which,
                global: s.is_global(),
                label,
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
/// an address: sized, then functions before labels, then global, then
/// from an earlier table.
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
                .then_with(|| a.label.cmp(&b.label))
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
    /// best of its address and those ranked the same (aliases). A sized
    /// symbol holds its range; an unsized one only what follows it up to
    /// the next symbol, and not what a sized symbol around it holds (a
    /// label inside a function).
    fn containing(&self, vaddr: u64) -> &[Entry] {
        let n = self
            .starts
            .partition_point(|&i| self.entries[i as usize].addr <= vaddr);
        let run = |start: usize| {
            let best = self.entries[start];
            let same = self.entries[start..]
                .iter()
                .take(MAX_ALIASES)
                .take_while(|e| {
                    e.addr == best.addr
                        && (e.size != 0) == (best.size != 0)
                        && e.label == best.label
                        && e.global == best.global
                        && e.table == best.table
                })
                .count();
            &self.entries[start..start + same]
        };
        let starts = self.starts[..n].iter().rev().take(WALK_BACK);
        let mut open = None;
        for (k, &start) in starts.enumerate() {
            let start = start as usize;
            let best = self.entries[start];
            if best.size == 0 {
                if k == 0 {
                    open = Some(start);
                }
            } else if vaddr - best.addr < best.size {
                return run(start);
            }
        }
        open.map_or(&[], run)
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

    /// The raw name of the symbol containing `vaddr`, as
    /// [`Index::names_at`] finds it.
    pub(crate) fn lookup(&self, vaddr: u64) -> Option<&str> {
        let n = self.symbols.partition_point(|s| s.0 <= vaddr);
        let mut near = self.symbols[..n].iter().rev().take(WALK_BACK);
        let nearest = near.next()?;
        std::iter::once(nearest)
            .chain(near)
            .find(|(addr, size, _)| *size != 0 && vaddr - addr < *size)
            .or((nearest.1 == 0).then_some(nearest))
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
            label: false,
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

    fn label(addr: u64, index: u32) -> Entry {
        Entry {
            label: true,
            ..entry(addr, 0, index, false)
        }
    }

    #[test]
    fn labels_name_only_what_no_function_holds() {
        let names = [
            "",
            "func",
            "inner_label",
            "entry_label",
            "after",
            "late_label",
            "alias",
        ];
        let entries = vec![
            entry(0x1000, 0x100, 1, true),
            label(0x1040, 2),
            label(0x2000, 3),
            entry(0x2100, 0x10, 4, true),
            label(0x1800, 5),
            label(0x3000, 6),
            entry(0x3000, 0, 1, false),
        ];
        let index = Index::new(entries);
        let name_of = |e: &Entry| Some(names[e.index()].to_string());
        let allowance = Allowance::new(1 << 20);
        let got = index.names_at(
            [0x1080, 0x1900, 0x2050, 0x2180, 0x3010],
            &name_of,
            &allowance,
        );
        assert_eq!(got[&0x1080], "func", "a label inside a function");
        assert_eq!(got[&0x1900], "late_label", "a label past a function's end");
        assert_eq!(got[&0x2050], "entry_label", "runs on to the next symbol");
        assert!(
            !got.contains_key(&0x2180),
            "a label before a function that has ended names nothing past it"
        );
        assert_eq!(
            got[&0x3010], "func",
            "a function before a label at one address"
        );
        let all = index.all(&name_of, &allowance);
        for (vaddr, name) in &got {
            assert_eq!(all.lookup(*vaddr), Some(name.as_str()), "{vaddr:#x}");
        }
        assert_eq!(all.lookup(0x2180), None);
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
