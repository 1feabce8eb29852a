//! `/proc/kallsyms`: reading it (streamed to a parser thread, or from a
//! per-boot [`cache`]), and splitting its lines into symbols.
//! Shared by the backends' trimming of tracing frames ([`crate::source::probes`])
//! and by kernel symbolization ([`crate::symbolize`]), which get their
//! tables from one reading on a thread started before tracing
//! ([`Preload`]).

use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow};

pub(crate) mod cache;
pub(crate) mod machinery;
pub(crate) mod table;

use machinery::ProbeRanges;
use table::KernelSymbols;

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
        let file = std::fs::File::open("/proc/kallsyms").context("opening /proc/kallsyms")?;
        let builder = TablesBuilder::with_capacity(EXPECTED_SYMBOLS, EXPECTED_NAME_BYTES);
        read_streamed(file, BATCH, builder).context("reading /proc/kallsyms")
    }
}

/// How many bytes of whole lines go to the parser at a time: small enough
/// that the last batch is parsed at once, and that a batch stays in cache.
const BATCH: usize = 64 << 10;
/// Batches read ahead of the parser before the reader waits for it.
const AHEAD: usize = 4;
/// Text symbols and name bytes reserved for a live reading (a distribution
/// kernel has about 120,000 and 3 MB; more only grow the tables).
const EXPECTED_SYMBOLS: usize = 1 << 17;
const EXPECTED_NAME_BYTES: usize = 4 << 20;

/// Reads a listing from `listing` in batches of whole lines that a parser
/// thread adds to `builder` while the rest is read. The batch buffers go
/// back to the reader once parsed: at most [`AHEAD`] + 2 of them exist, and
/// their pages are touched once, not once per batch. Without a thread (no
/// pid left), the listing is read whole, then parsed.
fn read_streamed(
    mut listing: impl std::io::Read,
    batch: usize,
    builder: TablesBuilder,
) -> Result<Tables> {
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(AHEAD);
    let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    // The builder goes to the parser once it runs, so that it stays here
    // when it cannot be started.
    let (builder_tx, builder_rx) = std::sync::mpsc::sync_channel::<TablesBuilder>(1);
    let spawned = std::thread::Builder::new()
        .name("offwake-kallsyms".into())
        .spawn(move || {
            let mut builder = builder_rx.recv().ok()?;
            for lines in full_rx {
                builder.add_bytes(&lines);
                // The reader may be gone (a read failed): then dropped.
                let _ = empty_tx.send(lines);
            }
            Some(builder.finish())
        });
    let Ok(parser) = spawned else {
        return read_whole(listing, builder);
    };
    if let Err(std::sync::mpsc::SendError(builder)) = builder_tx.send(builder) {
        return read_whole(listing, builder);
    }
    let read = (|| -> Result<()> {
        let batch = batch.max(1);
        let mut buf = vec![0u8; batch];
        let mut filled = 0;
        loop {
            if filled == buf.len() {
                // Whole lines go to the parser; a cut one starts the next
                // buffer. A line longer than the buffer makes it grow.
                let Some(cut) = buf.iter().rposition(|&b| b == b'\n').map(|i| i + 1) else {
                    buf.resize(buf.len() * 2, 0);
                    continue;
                };
                let mut next = empty_rx.try_recv().unwrap_or_default();
                next.resize(batch.max(buf.len() - cut), 0);
                next[..buf.len() - cut].copy_from_slice(&buf[cut..]);
                filled = buf.len() - cut;
                buf.truncate(cut);
                if full_tx.send(std::mem::replace(&mut buf, next)).is_err() {
                    // The parser is gone: its join says why.
                    return Ok(());
                }
                // The cut line may fill the new buffer.
                continue;
            }
            match listing.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        buf.truncate(filled);
        let _ = full_tx.send(buf);
        Ok(())
    })();
    drop(full_tx);
    let tables = parser
        .join()
        .ok()
        .flatten()
        .ok_or_else(|| anyhow!("the thread parsing kallsyms failed"))?;
    read?;
    Ok(tables)
}

/// Reads `listing` whole, then adds it to `builder`.
fn read_whole(mut listing: impl std::io::Read, mut builder: TablesBuilder) -> Result<Tables> {
    let mut all = Vec::new();
    listing.read_to_end(&mut all)?;
    builder.add_bytes(&all);
    Ok(builder.finish())
}

/// [`Tables`] built in one pass over a listing's lines.
#[derive(Default)]
struct TablesBuilder {
    probes: machinery::ProbeBuilder,
    symbols: table::SymbolsBuilder,
}

impl TablesBuilder {
    /// With room for `symbols` text symbols and `name_bytes` of their
    /// names.
    fn with_capacity(symbols: usize, name_bytes: usize) -> TablesBuilder {
        TablesBuilder {
            probes: Default::default(),
            symbols: table::SymbolsBuilder::with_capacity(symbols, name_bytes),
        }
    }

    fn add_lines(&mut self, text: &str) {
        for sym in symbols(text) {
            self.probes.add(&sym);
            self.symbols.add(&sym);
        }
    }

    /// Whole lines of a listing: kallsyms is ASCII, so a batch is checked
    /// once; in one that is not UTF-8, each line that is counts.
    fn add_bytes(&mut self, lines: &[u8]) {
        match std::str::from_utf8(lines) {
            Ok(text) => self.add_lines(text),
            Err(_) => lines
                .split(|&b| b == b'\n')
                .filter_map(|line| std::str::from_utf8(line).ok())
                .for_each(|line| self.add_lines(line)),
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

struct PreloadState {
    thread: Mutex<Option<JoinHandle<Result<Loaded>>>>,
    /// No thread could be started: [`Preload::wait`] loads them.
    inline: bool,
    done: OnceLock<Result<Arc<Tables>, String>>,
    /// The cache a cold reading has yet to write (see
    /// [`Preload::pending_store`]).
    store: Mutex<Option<cache::Store>>,
}

impl std::fmt::Debug for PreloadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreloadState")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// The tables, and the cache to write when they were read live.
type Loaded = (Tables, Option<cache::Store>);

/// Loads the tables: from the cache when it holds this boot's, else from
/// kallsyms, with the cache to write for the next run.
fn load() -> Result<Loaded> {
    let key = cache::Key::current();
    let dir = key
        .as_ref()
        .and_then(|_| crate::sys::cache::CacheDir::open());
    if let (Some(key), Some(dir)) = (&key, &dir)
        && let Some(tables) = cache::load(dir, key)
        && cache::head_agrees(&tables)
    {
        crate::timing::mark("kallsyms.cached");
        return Ok((tables, None));
    }
    let tables = Tables::read_live()?;
    crate::timing::mark("kallsyms.read");
    // A module loaded or removed while kallsyms was read would leave
    // tables that match neither list: not stored. A cache that cannot be
    // written costs the next run time, nothing else.
    let store = match (&key, &dir) {
        (Some(key), Some(dir))
            if !tables.symbols.addresses_hidden()
                && cache::Key::current().as_ref() == Some(key) =>
        {
            cache::prepare(dir, key, &tables).ok()
        }
        _ => None,
    };
    Ok((tables, store))
}

impl Preload {
    /// Starts loading the tables on a thread: from the cache (see
    /// [`cache`]) when it holds this boot's, else from kallsyms. At normal
    /// priority: a short run waits for them. Storing them for the next run
    /// is left to the end of this one ([`Preload::pending_store`]). Without
    /// a thread (no pid left), they are loaded by the first
    /// [`Preload::wait`].
    pub(crate) fn spawn() -> Preload {
        let thread = std::thread::Builder::new()
            .name("offwake-preload".into())
            .spawn(load)
            .ok();
        Preload(Arc::new(PreloadState {
            inline: thread.is_none(),
            thread: Mutex::new(thread),
            done: OnceLock::new(),
            store: Mutex::new(None),
        }))
    }

    /// The writing of the cache a cold reading left, once, as work for
    /// the end of the run (see [`crate::sys::child::leave`]); `None` when
    /// there is nothing to write, or the tables are still being read.
    pub(crate) fn pending_store(&self) -> Option<crate::sys::child::Job> {
        if !self.is_ready() {
            return None;
        }
        self.wait().ok()?;
        let store = self.0.store.lock().ok()?.take()?;
        Some(crate::sys::child::Job {
            keep: vec![store.dir_fd()],
            run: Box::new(move || {
                // Nothing to tell: the next run reads kallsyms instead.
                let _ = store.write();
            }),
        })
    }

    /// True when [`Preload::wait`] would not wait for the thread.
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
            let loaded = match thread {
                Some(t) => Some(t.join()),
                None if self.0.inline => Some(Ok(load())),
                None => None,
            };
            match loaded {
                Some(Ok(Ok((tables, store)))) => {
                    if let Ok(mut pending) = self.0.store.lock() {
                        *pending = store;
                    }
                    Ok(Arc::new(tables))
                }
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
    Lines { text, at: 0 }
}

/// The lines of a listing, each split by [`canonical`] when it has the
/// kernel's own layout, else by [`symbol`].
struct Lines<'a> {
    text: &'a str,
    /// Where the next line starts.
    at: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = Symbol<'a>;

    fn next(&mut self) -> Option<Symbol<'a>> {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() {
            let start = self.at;
            if let Some((sym, next)) = canonical(self.text, start) {
                self.at = next;
                return Some(sym);
            }
            let end = bytes
                .get(start..)
                .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
                .map_or(bytes.len(), |i| start + i);
            self.at = end + 1;
            if let Some(sym) = self.text.get(start..end).and_then(symbol) {
                return Some(sym);
            }
        }
        None
    }
}

/// The digit of each hexadecimal character, 16 for any other byte.
const HEX: [u8; 256] = {
    let mut t = [16u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The line at `start` of `text` when it is laid out as the kernel
/// writes it, `ADDR K NAME` or `ADDR K NAME\t[MODULE]` (16 hex digits, one
/// letter, single blanks), with where the next line starts; `None` for
/// anything else, which [`symbol`] then splits. What it accepts, it splits
/// as [`symbol`] would, in one pass over the bytes.
fn canonical(text: &str, start: usize) -> Option<(Symbol<'_>, usize)> {
    let line = text.as_bytes().get(start..)?;
    let (digits, rest) = line.split_first_chunk::<16>()?;
    let mut addr = 0u64;
    for &c in digits {
        let d = HEX[usize::from(c)];
        if d > 15 {
            return None;
        }
        addr = addr << 4 | u64::from(d);
    }
    let [b' ', kind, b' ', ..] = *rest else {
        return None;
    };
    if !kind.is_ascii_alphabetic() {
        return None;
    }
    let name_at = 19;
    let ends_field = |b: u8| matches!(b, b'\n' | b'\t' | b' ' | b'\r');
    let name_end = line
        .get(name_at..)?
        .iter()
        .position(|&b| ends_field(b))
        .map_or(line.len(), |i| name_at + i);
    if name_end == name_at {
        return None;
    }
    let (module, next) = match line.get(name_end) {
        None => (None, line.len()),
        Some(b'\n') => (None, name_end + 1),
        Some(b'\t') => {
            // `\t[MODULE]`, then the line's end.
            if line.get(name_end + 1) != Some(&b'[') {
                return None;
            }
            let from = name_end + 2;
            let len = line
                .get(from..)?
                .iter()
                .position(|&b| ends_field(b) || b == b'[' || b == b']')?;
            let close = from + len;
            if len == 0 || line.get(close) != Some(&b']') {
                return None;
            }
            match line.get(close + 1) {
                None => (Some(from..close), close + 1),
                Some(b'\n') => (Some(from..close), close + 2),
                Some(_) => return None,
            }
        }
        Some(_) => return None,
    };
    let at = |r: std::ops::Range<usize>| text.get(start + r.start..start + r.end);
    Some((
        Symbol {
            addr,
            kind: at(17..18)?,
            name: at(name_at..name_end)?,
            module: match module {
                Some(r) => Some(at(r)?),
                None => None,
            },
        },
        start + next,
    ))
}

/// One line, `ADDR KIND NAME` and perhaps `\t[MODULE]`, in any layout:
/// fields are split at runs of blanks, and a fourth loses its brackets.
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
    fn without_a_thread_the_first_wait_loads() {
        let p = Preload(Arc::new(PreloadState {
            thread: Mutex::new(None),
            inline: true,
            done: OnceLock::new(),
            store: Mutex::new(None),
        }));
        assert!(p.is_ready());
        let tables = p.wait().expect("reading /proc/kallsyms");
        assert!(tables.symbols.text().is_some());
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

#[cfg(test)]
mod parse_tests {
    use super::*;
    use crate::proptest_config::config;
    use proptest::prelude::*;

    /// What the listing splits into with [`symbol`] alone, line by line.
    fn reference(text: &str) -> Vec<Symbol<'_>> {
        text.split('\n').filter_map(symbol).collect()
    }

    /// A listing whose lines are kernel-like, with parts cut, doubled or
    /// replaced by bytes that end or confuse a field.
    fn listing() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => Just("ffffffff81000000".to_string()),
            2 => "[0-9a-fA-FxX]{0,18}",
            4 => Just(" ".to_string()),
            2 => "[ \t\r\n]{1,3}",
            4 => "[tTwWdDbBAU?]{1,2}",
            4 => "[a-z_.$0-9]{1,12}",
            2 => Just("\t[".to_string()),
            2 => "[\\[\\]]{1,2}",
            1 => "[é€\u{0}]",
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
    }

    /// Lines laid out as the kernel writes them, each part now and then
    /// replaced by a near miss.
    fn kernel_lines() -> impl Strategy<Value = String> {
        let addr =
            prop_oneof![8 => "[0-9a-f]{16}", 1 => "[0-9a-fA-F]{15,17}", 1 => "[0-9a-gx ]{16}"];
        let blank = prop_oneof![8 => Just(" "), 1 => Just("  "), 1 => Just("\t")];
        let kind = prop_oneof![8 => "[tTwWdb]", 1 => "[tT?]{0,2}"];
        let name = prop_oneof![8 => "[a-z_.$0-9]{1,20}", 1 => "[a-z \r\\[\\]é]{0,4}"];
        let module = prop_oneof![
            6 => Just(String::new()),
            3 => "\t\\[[a-z_]{1,8}\\]",
            1 => "[\t ]{0,2}[\\[\\]]{0,2}[a-z\\[\\] ]{0,4}[\\[\\]\r]{0,2}",
        ];
        let end = prop_oneof![9 => Just("\n"), 1 => Just("\r\n"), 1 => Just("")];
        let line = (addr, blank.clone(), kind, blank, name, module, end)
            .prop_map(|(a, b1, k, b2, n, m, e)| format!("{a}{b1}{k}{b2}{n}{m}{e}"));
        proptest::collection::vec(line, 0..30).prop_map(|l| l.concat())
    }

    proptest! {
        #![proptest_config(config(2048))]

        #[test]
        fn kernel_like_lines_split_as_line_by_line(text in kernel_lines()) {
            prop_assert_eq!(symbols(&text).collect::<Vec<_>>(), reference(&text));
        }

        #[test]
        fn any_listing_splits_as_line_by_line(text in listing()) {
            prop_assert_eq!(symbols(&text).collect::<Vec<_>>(), reference(&text));
        }

        #[test]
        fn any_text_splits_as_line_by_line(text in any::<String>()) {
            prop_assert_eq!(symbols(&text).collect::<Vec<_>>(), reference(&text));
        }
    }

    #[test]
    fn kernel_lines_take_the_fast_way_and_odd_ones_the_general() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffffc0000000 t helper\t[kvm]\n\
                    ffffffffc0000000 t x\t[[kvm]]\n\
                    ffffffffc0000000 t y\t[]\n\
                    ffffffffc0000000 t z\t[a]b] extra\n\
                    \x20ffffffff81000010 T indented\n\
                    ffffffff81000020  T two_blanks\r\n\
                    FFFFFFFF81000030 t upper\n\
                    ffffffff8100004 t fifteen_digits\n\
                    ffffffff810000400 t seventeen_digits\n\
                    ffffffff81000050 T\n\
                    ffffffff81000060 TT long_kind\n\
                    ffffffff81000070 t last_without_newline";
        assert!(canonical(text, 0).is_some());
        let v: Vec<_> = symbols(text)
            .map(|s| (s.addr, s.kind, s.name, s.module))
            .collect();
        assert_eq!(
            v,
            [
                (0xffffffff81000000, "T", "_text", None),
                (0xffffffffc0000000, "t", "helper", Some("kvm")),
                (0xffffffffc0000000, "t", "x", Some("kvm")),
                (0xffffffffc0000000, "t", "y", Some("")),
                (0xffffffffc0000000, "t", "z", Some("a]b")),
                (0xffffffff81000010, "T", "indented", None),
                (0xffffffff81000020, "T", "two_blanks", None),
                (0xffffffff81000030, "t", "upper", None),
                (0xffffffff8100004, "t", "fifteen_digits", None),
                (0xffffffff81000060, "TT", "long_kind", None),
                (0xffffffff81000070, "t", "last_without_newline", None),
            ]
        );
        assert_eq!(
            v,
            reference(text)
                .iter()
                .map(|s| (s.addr, s.kind, s.name, s.module))
                .collect::<Vec<_>>()
        );
    }

    /// A reader giving at most `step` bytes per read, and an interruption
    /// now and then.
    struct Trickle<'a> {
        rest: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads += 1;
            if self.reads.is_multiple_of(5) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = self.step.min(buf.len()).min(self.rest.len());
            buf[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    fn streamed(text: &str, step: usize, batch: usize) -> Tables {
        let reader = Trickle {
            rest: text.as_bytes(),
            step,
            reads: 0,
        };
        read_streamed(reader, batch, TablesBuilder::default()).unwrap()
    }

    #[test]
    fn recycled_batches_of_any_size_parse_as_the_whole() {
        // Lines of every length, a few unsorted, modules and aliases.
        let mut text = String::new();
        for i in 0..3000u64 {
            let addr = 0xffffffff81000000 + (i / 3) * 0x40 + if i % 97 == 0 { 0 } else { i % 3 };
            text.push_str(&format!(
                "{addr:016x} {} sym_{}_{}\n",
                ["t", "T", "d"][i as usize % 3],
                i,
                "x".repeat((i % 50) as usize)
            ));
            if i % 500 == 0 {
                text.push_str(&format!("ffffffffc0001{i:03x} t modsym_{i}\t[mod{i}]\n"));
            }
            if i % 700 == 0 {
                text.push_str("garbage line\n");
            }
        }
        let whole = Tables::from_kallsyms(&text);
        assert!(whole.symbols.lookup(0xffffffff81000040).is_some());
        for (step, batch) in [
            (4096, 65536),
            (4096, 4096),
            (100, 333),
            (7, 1),
            (1 << 20, 64),
        ] {
            let s = streamed(&text, step, batch);
            assert_eq!(s.symbols, whole.symbols, "step {step}, batch {batch}");
            assert_eq!(s.probes.parts(), whole.probes.parts());
        }
        // As read without a parser thread.
        let reader = Trickle {
            rest: text.as_bytes(),
            step: 100,
            reads: 0,
        };
        let alone = read_whole(reader, TablesBuilder::default()).unwrap();
        assert_eq!(alone.symbols, whole.symbols);
        assert_eq!(alone.probes.parts(), whole.probes.parts());
        // Without a last newline, and with bytes that are not UTF-8 (their
        // line alone is lost).
        let cut = &text[..text.len() - 1];
        assert_eq!(
            streamed(cut, 4096, 1000).symbols,
            Tables::from_kallsyms(cut).symbols
        );
        let mut bad = text.clone().into_bytes();
        let at = bad.iter().position(|&b| b == b'\n').unwrap() + 5;
        bad[at] = 0xff;
        let tables = read_streamed(&bad[..], 4096, TablesBuilder::default()).unwrap();
        let second_line_gone = format!(
            "{}\n{}",
            &text[..at - 5],
            &text[text[at..].find('\n').unwrap() + at + 1..]
        );
        assert_eq!(
            tables.symbols,
            Tables::from_kallsyms(&second_line_gone).symbols
        );
    }

    #[test]
    fn a_failed_read_is_an_error() {
        struct Failing;
        impl std::io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::PermissionDenied.into())
            }
        }
        assert!(read_streamed(Failing, 4096, TablesBuilder::default()).is_err());
        assert!(read_whole(Failing, TablesBuilder::default()).is_err());
    }
}
