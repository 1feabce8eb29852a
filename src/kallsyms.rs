//! `/proc/kallsyms`: reading it, and splitting its lines into symbols.
//! Shared by the backends' trimming of tracing frames ([`crate::probes`])
//! and by kernel symbolization ([`crate::symbolize`]).

use anyhow::{Context, Result};

/// One line: `ffffffff81000000 T name [module]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub addr: u64,
    /// The type letter (`t`/`T` text, `w`/`W` weak, `d`, `b`, …).
    pub kind: &'a str,
    pub name: &'a str,
    /// The module, for module symbols (without its brackets).
    pub module: Option<&'a str>,
}

/// Reads `/proc/kallsyms`.
pub fn read() -> Result<String> {
    std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")
}

/// The symbols of a kallsyms listing, in listing order; malformed lines are
/// skipped.
pub fn symbols(text: &str) -> impl Iterator<Item = Symbol<'_>> {
    text.lines().filter_map(|line| {
        let mut parts = line.split_ascii_whitespace();
        let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
        let kind = parts.next()?;
        let name = parts.next()?;
        let module = parts
            .next()
            .map(|m| m.trim_start_matches('[').trim_end_matches(']'));
        Some(Symbol {
            addr,
            kind,
            name,
            module,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let text = "ffffffff81000000 T _stext\n\
                    garbage\n\
                    zz T bad_address\n\
                    ffffffffc0000000 t helper\t[kvm]\n\
                    0000000000000000 D hidden\n";
        let v: Vec<Symbol> = symbols(text).collect();
        assert_eq!(
            v,
            vec![
                Symbol {
                    addr: 0xffffffff81000000,
                    kind: "T",
                    name: "_stext",
                    module: None
                },
                Symbol {
                    addr: 0xffffffffc0000000,
                    kind: "t",
                    name: "helper",
                    module: Some("kvm")
                },
                Symbol {
                    addr: 0,
                    kind: "D",
                    name: "hidden",
                    module: None
                },
            ]
        );
    }
}
