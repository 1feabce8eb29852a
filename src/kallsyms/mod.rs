//! `/proc/kallsyms`: reading it (streamed to a parser thread, or from a
//! per-boot [`cache`]), and splitting its lines into symbols.
//! Shared by the backends' trimming of tracing frames ([`crate::probes`])
//! and by kernel symbolization ([`crate::symbolize`]), which get their
//! tables from one reading on a thread started before tracing
//! ([`Preload`]).

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};

pub(crate) mod cache;

use crate::probes::ProbeRanges;
use crate::symbolize::kernel::KernelSymbols;

/// One line: `ffffffff81000000 T name [module]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Symbol<'a> {
    pub(crate) addr: u64,
    /// The type letter (`t`/`T` text, `w`/`W` weak, `d`, `b`, …).
    pub(crate) kind: &'a str,
    pub(crate) name: &'a str,
    /// The module, for module symbols (without its brackets).
    pub(crate) module: Option<&'a str>,
}

/// Reads `/proc/kallsyms`.
pub(crate) fn read() -> Result<String> {
    std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")
}

/// What the tool needs from kallsyms, built from one reading of it.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// The tracing machinery, trimmed from the top of kernel stacks.
    pub(crate) probes: ProbeRanges,
    /// Kernel text symbols, for symbolization.
    pub(crate) symbols: Arc<KernelSymbols>,
}

impl Tables {
    #[cfg(test)]
    pub(crate) fn from_kallsyms(text: &str) -> Tables {
        let mut b = TablesBuilder::default();
        b.add_lines(text);
        b.finish()
    }

    /// Reads `/proc/kallsyms`, parsing it on another thread while the
    /// kernel formats the rest: the parse costs little more than the read.
    pub(crate) fn read_live() -> Result<Tables> {
        use std::io::Read;
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(8);
        let parser = std::thread::Builder::new()
            .name("offwake-kallsyms".into())
            .spawn(move || {
                let mut b = TablesBuilder::default();
                rx.into_iter().for_each(|chunk| b.add_lines(&chunk));
                b.finish()
            })
            .context("starting a thread")?;
        let read = (|| -> Result<()> {
            let mut file = std::fs::File::open("/proc/kallsyms")?;
            // The kernel gives a page per read, whatever the buffer: lines
            // go to the parser in batches.
            const BATCH: usize = 256 << 10;
            let mut buf = vec![0u8; 64 << 10];
            let mut pending: Vec<u8> = Vec::with_capacity(BATCH + buf.len());
            loop {
                let n = file.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                pending.extend_from_slice(&buf[..n]);
                if pending.len() < BATCH {
                    continue;
                }
                // Whole lines go to the parser; a cut one waits for its end.
                if let Some(i) = pending.iter().rposition(|&b| b == b'\n') {
                    let rest = pending.split_off(i + 1);
                    let lines = std::mem::replace(&mut pending, rest);
                    let _ = tx.send(String::from_utf8_lossy(&lines).into_owned());
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&pending).into_owned());
            Ok(())
        })();
        drop(tx);
        let tables = parser
            .join()
            .map_err(|_| anyhow!("the thread parsing /proc/kallsyms panicked"))?;
        read.context("reading /proc/kallsyms")?;
        Ok(tables)
    }
}

/// [`Tables`] built in one pass over a listing's lines.
#[derive(Default)]
struct TablesBuilder {
    probes: crate::probes::ProbeBuilder,
    symbols: crate::symbolize::kernel::SymbolsBuilder,
}

impl TablesBuilder {
    fn add_lines(&mut self, text: &str) {
        for sym in symbols(text) {
            self.probes.add(&sym);
            self.symbols.add(&sym);
        }
    }

    fn finish(self) -> Tables {
        Tables {
            probes: self.probes.finish(),
            symbols: Arc::new(self.symbols.finish()),
        }
    }
}

/// kallsyms read and parsed once, on a thread started before tracing (the
/// file is slow to read: the kernel formats every line). The backends trim
/// stacks with its probe ranges once it is ready, and the symbolizer
/// resolves kernel frames with its table at the end, without reading the
/// file again on the way from SIGINT to the report. Clones share it.
#[derive(Clone, Debug)]
pub(crate) struct Preload(Arc<PreloadState>);

#[derive(Debug)]
struct PreloadState {
    thread: Mutex<Option<JoinHandle<Result<Tables>>>>,
    done: OnceLock<Result<Arc<Tables>, String>>,
}

impl Preload {
    /// Starts loading the tables on a thread: from the cache (see
    /// [`cache`]) when it holds this boot's, else from kallsyms, then
    /// stored there. At normal priority: a short run waits for them.
    pub(crate) fn spawn() -> Preload {
        let thread = std::thread::spawn(|| {
            let key = cache::Key::current();
            let dir = key.as_ref().and_then(|_| cache::CacheDir::open());
            if let (Some(key), Some(dir)) = (&key, &dir)
                && let Some(tables) = dir.load(key)
                && cache::head_agrees(&tables)
            {
                crate::timing::mark("kallsyms.cached");
                return Ok(tables);
            }
            let tables = Tables::read_live()?;
            crate::timing::mark("kallsyms.read");
            // A module loaded or removed while kallsyms was read would
            // leave tables that match neither list: not stored.
            if let (Some(key), Some(dir)) = (&key, &dir)
                && !tables.symbols.addresses_hidden()
                && cache::Key::current().as_ref() == Some(key)
            {
                // A cache that cannot be written costs the next run time,
                // nothing else.
                let _ = dir.store(key, &tables);
                crate::timing::mark("kallsyms.stored");
            }
            Ok(tables)
        });
        Preload(Arc::new(PreloadState {
            thread: Mutex::new(Some(thread)),
            done: OnceLock::new(),
        }))
    }

    /// True when [`Preload::wait`] would not block.
    pub(crate) fn is_ready(&self) -> bool {
        self.0.done.get().is_some()
            || self
                .0
                .thread
                .lock()
                .map_or(true, |t| t.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// The tables, once read (waits for the thread).
    pub(crate) fn wait(&self) -> Result<Arc<Tables>> {
        let done = self.0.done.get_or_init(|| {
            let thread = self.0.thread.lock().ok().and_then(|mut t| t.take());
            match thread.map(JoinHandle::join) {
                Some(Ok(Ok(tables))) => Ok(Arc::new(tables)),
                Some(Ok(Err(e))) => Err(format!("{e:#}")),
                Some(Err(_)) => Err("the thread reading /proc/kallsyms panicked".to_string()),
                None => Err("/proc/kallsyms was not read".to_string()),
            }
        });
        done.clone().map_err(|e| anyhow!(e))
    }
}

/// The symbols of a kallsyms listing, in listing order; malformed lines are
/// skipped.
pub(crate) fn symbols(text: &str) -> impl Iterator<Item = Symbol<'_>> {
    text.split('\n').filter_map(symbol)
}

/// One line, `ADDR KIND NAME` and perhaps `\t[MODULE]`, split by hand: a
/// kernel has over 100,000 of them, and a cold run waits for their parse.
fn symbol(line: &str) -> Option<Symbol<'_>> {
    let blank = |b: u8| b == b' ' || b == b'\t' || b == b'\r';
    let bytes = line.as_bytes();
    let mut at = 0;
    // The next field: from `at`, past blanks, to the next blank.
    let mut field = || -> Option<&str> {
        while bytes.get(at).copied().is_some_and(blank) {
            at += 1;
        }
        let start = at;
        while bytes.get(at).is_some_and(|&b| !blank(b)) {
            at += 1;
        }
        (at > start).then(|| line.get(start..at)).flatten()
    };
    let addr = hex(field()?)?;
    let kind = field()?;
    let name = field()?;
    let module = field().map(|m| m.trim_start_matches('[').trim_end_matches(']'));
    Some(Symbol {
        addr,
        kind,
        name,
        module,
    })
}

/// A hexadecimal number of at most 16 digits.
fn hex(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.bytes().try_fold(0u64, |acc, b| {
        let digit = (b as char).to_digit(16)?;
        Some(acc << 4 | u64::from(digit))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_reads_once_and_shares() {
        let p = Preload::spawn();
        let q = p.clone();
        let a = p.wait().expect("reading /proc/kallsyms");
        assert!(q.is_ready());
        let b = q.wait().expect("the same tables");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_streamed_reading_parses_as_a_whole_one() {
        let whole = Tables::from_kallsyms(&read().unwrap());
        let streamed = Tables::read_live().unwrap();
        assert_eq!(streamed.symbols, whole.symbols);
        assert_eq!(streamed.probes.parts(), whole.probes.parts());
        assert!(whole.symbols.text().is_some());
    }

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
