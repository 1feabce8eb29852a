//! Symbolization, after tracing, once per unique address: kernel addresses
//! through kallsyms, user addresses through each process's memory map as it
//! was at the time of the sample, ELF symbols and DWARF (with inlined
//! frames), JIT code through perf maps, and Rust/C++ demangling. User
//! addresses are resolved file by file, each file's data released before
//! the next is read.
//!
//! Kernel symbols come from [`crate::kallsyms`]. Submodules: [`maps`] (map
//! history, and opening a mapped file safely), [`read`] (reading a file
//! within a byte budget), [`elf`] (one parsed ELF file: segments, symbols,
//! DWARF), [`symtab`] (symbol tables read by range), [`minidebug`]
//! (MiniDebugInfo), [`debugfile`] (finding separate debug files),
//! [`debuginfod`] (fetching them), [`dwarf`] (DWARF loaded for addr2line),
//! [`sparse`] (DWARF read by unit), [`vet`] (the shape DWARF must have),
//! [`split`] (the inlined copy function splitting leaves), [`perfmap`] (JIT
//! code), [`demangle`], [`cache`] (files opened once, addresses resolved
//! once), [`persist`] (names kept across runs) and [`vdso`].

pub(crate) mod cache;
mod debugfile;
pub(crate) mod debuginfod;
pub(crate) mod demangle;
mod dwarf;
pub(crate) mod elf;
pub(crate) mod maps;
mod minidebug;
pub(crate) mod perfmap;
mod persist;
pub(crate) mod read;
mod sparse;
mod split;
mod symtab;
mod unread;
pub(crate) mod vdso;
mod vet;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::Result;

use crate::aggregate::{Code, Place as CodePlace};
use crate::kallsyms::Preload;
use crate::kallsyms::table::KernelSymbols;
use crate::sys::open::{FileKey, OpenError};
use cache::{FileCache, FileId};
pub(crate) use maps::{Mapping, ProcessMaps};
use unread::Unread;

/// The name printed for a frame that cannot be resolved.
#[cfg(test)]
pub(crate) const UNKNOWN: &str = "[unknown]";

/// `frames` with [`UNKNOWN`] for each `None`.
#[cfg(test)]
fn or_unknown(frames: Vec<Option<String>>) -> Vec<String> {
    frames
        .into_iter()
        .map(|f| f.unwrap_or_else(|| UNKNOWN.to_string()))
        .collect()
}

/// One user stack to symbolize: its process, when it was sampled, and its
/// addresses, innermost first.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserStack<'a> {
    pub(crate) tgid: u32,
    pub(crate) time: u64,
    pub(crate) addrs: &'a [u64],
    /// Where each frame runs, when that was known as it was stored (see
    /// [`crate::aggregate::StackTable::code`]): such a frame is named from
    /// its file, without the process's map.
    pub(crate) code: Code<'a>,
}

impl UserStack<'_> {
    /// True when some frame must be placed through the process's map.
    fn needs_map(&self) -> bool {
        !self.code.places_all(self.addrs.len())
    }
}

/// What a user address resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Symbol {
    /// A function name, demangled (shared by every frame at its address:
    /// a name is held once however many stacks have it).
    Name(Arc<str>),
    /// Nothing named it. `module` is the base name of the file it is in,
    /// when it is in one, and `offset` its offset in that file (else the
    /// address itself).
    Unresolved {
        module: Option<Arc<str>>,
        offset: u64,
    },
}

impl Symbol {
    fn in_module(module: Arc<str>, offset: u64) -> Symbol {
        Symbol::Unresolved {
            module: Some(module),
            offset,
        }
    }

    fn nowhere(addr: u64) -> Symbol {
        Symbol::Unresolved {
            module: None,
            offset: addr,
        }
    }
}

/// Where a user address is.
enum Place {
    /// At a file offset of a file, with the file's base name.
    File(FileId, u64, Arc<str>),
    Nowhere,
    /// An interpreted frame, by its name.
    Interpreted(Arc<str>),
}

/// A mapping's file, and its base name (what `--module-offsets` prints).
type InFile = (FileId, Arc<str>);

/// The last component of a mapped path.
fn base_name(path: &str) -> Arc<str> {
    Arc::from(path.rsplit('/').next().unwrap_or(path))
}

/// Resolves addresses to bare function names.
pub(crate) struct Symbolizer {
    maps: ProcessMaps,
    /// `None` until the first kernel lookup.
    kernel: Option<Arc<KernelSymbols>>,
    /// Where kernel symbols come from when read before tracing.
    preload: Option<Preload>,
    files: FileCache,
    /// The file each mapping opened to, with its base name, by process,
    /// start and since when (`None`: it could not be opened).
    opened: HashMap<(u32, u64, u64), Option<InFile>>,
    /// The same, of files stored stacks were placed in, by device and
    /// inode.
    opened_code: HashMap<FileKey, Option<InFile>>,
    /// Polled before each file is opened: once true, no more are.
    stop: Option<Box<dyn Fn() -> bool + Send>>,
    /// Set when `stop` cut symbolization short.
    stopped: bool,
    /// JIT code's names from perf maps, by process and address (`None`:
    /// looked for, not found).
    jit: HashMap<(u32, u64), Option<Arc<str>>>,
    /// What reading perf maps met, for NOTE lines.
    perf_map_notes: Vec<String>,
    /// Servers to fetch missing debug files from (`DEBUGINFOD_URLS`).
    debuginfod: Option<debuginfod::Config>,
    warnings: Vec<String>,
    /// Added to kernel addresses before lookup ([`Symbolizer::relocate_kernel`]).
    kernel_shift: u64,
}

/// The address to look up for frame `index`: the exact instruction pointer
/// for frame 0, and `addr - 1` for return addresses, so that a call ending a
/// function resolves to the caller's function, not the next one.
fn probe(index: usize, addr: u64) -> u64 {
    if index == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

impl Symbolizer {
    /// Takes the map history recorded during tracing. Kernel symbols come
    /// from `preload` if given, or are loaded from `/proc/kallsyms` on
    /// first use.
    pub(crate) fn new(maps: ProcessMaps, preload: Option<Preload>) -> Result<Symbolizer> {
        Ok(Symbolizer {
            maps,
            kernel: None,
            preload,
            files: FileCache::new(),
            opened: HashMap::new(),
            opened_code: HashMap::new(),
            stop: None,
            stopped: false,
            jit: HashMap::new(),
            perf_map_notes: Vec::new(),
            debuginfod: debuginfod::Config::from_env(),
            warnings: Vec::new(),
            kernel_shift: 0,
        })
    }

    /// Kernel addresses were recorded with the kernel's text at
    /// `recorded_text` (a recording's `_text`): when this kernel's text is
    /// elsewhere (KASLR placed it anew at another boot), they are moved by
    /// the difference before they are looked up, and a warning says so.
    pub(crate) fn relocate_kernel(&mut self, recorded_text: u64) {
        let Some(here) = self.kernel_symbols().text() else {
            return;
        };
        if here == recorded_text {
            return;
        }
        self.kernel_shift = here.wrapping_sub(recorded_text);
        self.warnings.push(format!(
            "WARNING: the kernel's text was at {recorded_text:#x} when recorded and is at \
             {here:#x} now (another boot): kernel addresses were moved by the difference; \
             frames in modules may be wrong"
        ));
    }

    /// Makes symbolization poll `stop` before each file it opens, and open
    /// no more once it says so (their frames print as `[unknown]`).
    pub(crate) fn stop_when(&mut self, stop: impl Fn() -> bool + Send + 'static) {
        self.stop = Some(Box::new(stop));
    }

    fn kernel_symbols(&mut self) -> &KernelSymbols {
        let warnings = &mut self.warnings;
        let preload = &self.preload;
        let load = || match preload {
            Some(p) => p.wait().map(|t| Arc::clone(&t.symbols)),
            None => KernelSymbols::load().map(Arc::new),
        };
        self.kernel.get_or_insert_with(|| match load() {
            Ok(k) => {
                if k.addresses_hidden() {
                    warnings.push(
                        "WARNING: every address in /proc/kallsyms reads 0, so kernel frames \
                         print as [unknown]. Run as root, or lower \
                         /proc/sys/kernel/kptr_restrict (e.g. `sysctl kernel.kptr_restrict=0`)."
                            .to_string(),
                    );
                }
                k
            }
            Err(e) => {
                warnings.push(format!("WARNING: kernel frames print as [unknown]: {e:#}"));
                Arc::default()
            }
        })
    }

    /// Names for a kernel stack, innermost first, one per address (`None`
    /// where unresolvable). `addrs[0]` is an exact instruction pointer,
    /// later entries return addresses.
    pub(crate) fn kernel_frames(&mut self, addrs: &[u64]) -> Vec<Option<String>> {
        self.kernel_names(addrs, 0)
    }

    /// [`Symbolizer::kernel_frames`] for a stack whose every entry is a
    /// return address, `addrs[0]` included (a waker's stack, whose
    /// tracepoint site was dropped, begins at the return address into the
    /// caller of `try_to_wake_up`).
    pub(crate) fn kernel_return_frames(&mut self, addrs: &[u64]) -> Vec<Option<String>> {
        self.kernel_names(addrs, 1)
    }

    /// [`Symbolizer::kernel_frames`] with `[unknown]` for an unresolvable
    /// address.
    #[cfg(test)]
    pub(crate) fn kernel(&mut self, addrs: &[u64]) -> Vec<String> {
        or_unknown(self.kernel_frames(addrs))
    }

    /// [`Symbolizer::kernel_return_frames`] with `[unknown]` for an
    /// unresolvable address.
    #[cfg(test)]
    pub(crate) fn kernel_returns(&mut self, addrs: &[u64]) -> Vec<String> {
        or_unknown(self.kernel_return_frames(addrs))
    }

    /// Kernel names for `addrs`, whose entry `i` is probed as frame
    /// `i + first_index` (see [`probe`]).
    fn kernel_names(&mut self, addrs: &[u64], first_index: usize) -> Vec<Option<String>> {
        let shift = self.kernel_shift;
        let k = self.kernel_symbols();
        addrs
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                k.lookup(probe(i + first_index, a.wrapping_add(shift)))
                    .map(str::to_string)
            })
            .collect()
    }

    /// [`Symbolizer::user_stacks`] of one stack, with `[unknown]` for an
    /// unresolvable address.
    #[cfg(test)]
    pub(crate) fn user(&mut self, tgid: u32, time: u64, addrs: &[u64]) -> Vec<String> {
        let stack = UserStack {
            tgid,
            time,
            addrs,
            code: Code::default(),
        };
        self.user_stacks(&[stack], &mut |_, _, _| {})
            .remove(0)
            .into_iter()
            .map(|s| match s {
                Symbol::Name(name) => name.to_string(),
                Symbol::Unresolved { .. } => UNKNOWN.to_string(),
            })
            .collect()
    }

    /// Names for user stacks, each innermost first. An address inside
    /// inlined code yields several names (innermost inline first); an
    /// unresolvable one yields [`Symbol::Unresolved`], so that it cannot be
    /// taken for a function a file names `[unknown]`.
    ///
    /// Every address is first placed in its file; then each file is parsed
    /// once for all of its addresses and released before the next, so that
    /// memory holds one file's data at a time. Before that, debug files
    /// that files without symbols lack are fetched from debuginfod servers
    /// when `DEBUGINFOD_URLS` names some. `progress` is told what it is
    /// doing, and how far it is, `(step, done, total)`.
    pub(crate) fn user_stacks(
        &mut self,
        stacks: &[UserStack<'_>],
        progress: &mut dyn FnMut(&'static str, usize, usize),
    ) -> Vec<Vec<Symbol>> {
        let mut wanted: BTreeMap<FileId, BTreeSet<u64>> = BTreeMap::new();
        let mut jit: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        // Per reason, the processes and how many stacks of each.
        let mut unmapped: BTreeMap<Unread, BTreeMap<u32, u64>> = BTreeMap::new();
        for stack in stacks {
            if stack.needs_map() {
                self.maps.ensure_known(stack.tgid, stack.time);
            }
            if let Some(why) = self
                .maps
                .unread(stack.tgid, stack.time)
                .filter(|_| stack.needs_map())
                && !stack.addrs.is_empty()
            {
                *unmapped
                    .entry(why)
                    .or_default()
                    .entry(stack.tgid)
                    .or_default() += 1;
            }
            for (i, &addr) in stack.addrs.iter().enumerate() {
                let probed = probe(i, addr);
                match self.place_frame(stack, i, addr) {
                    Place::File(id, off, _) if !self.files.has(id, off) => {
                        wanted.entry(id).or_default().insert(off);
                    }
                    Place::File(..) => {}
                    Place::Nowhere if !self.jit.contains_key(&(stack.tgid, probed)) => {
                        jit.entry(stack.tgid).or_default().insert(probed);
                    }
                    Place::Nowhere | Place::Interpreted(_) => {}
                }
            }
        }
        for (why, processes) in unmapped {
            let stacks = processes.values().sum();
            let note = unread::note(why, stacks, processes.len() as u64);
            self.warnings.push(note);
        }
        if let Some(config) = self.debuginfod.clone() {
            let ids = self.files.wanting_debug_files(wanted.keys().copied());
            if !ids.is_empty() {
                self.fetch_debug_files(&config, &ids, progress);
            }
        }
        // Smallest first: should the run's reading budget run out, the
        // fewest files go unnamed.
        let mut wanted: Vec<(FileId, BTreeSet<u64>)> = wanted.into_iter().collect();
        wanted.sort_by_key(|(id, _)| (self.files.size(*id), *id));
        let total = wanted.len();
        for (done, (id, offsets)) in wanted.into_iter().enumerate() {
            progress("reading files", done, total);
            if self.should_stop() {
                break;
            }
            let offsets: Vec<u64> = offsets.into_iter().collect();
            self.files.resolve(id, &offsets);
        }
        self.files.store_kept();
        progress("reading files", total, total);
        for (tgid, addrs) in jit {
            if self.should_stop() {
                break;
            }
            self.read_perf_map(tgid, &addrs);
        }
        // Each offset's names once, shared by every frame there.
        let mut shared: HashMap<(FileId, u64), Arc<[Arc<str>]>> = HashMap::new();
        stacks
            .iter()
            .map(|stack| self.named_frames(stack, &mut shared))
            .collect()
    }

    /// The frames of `stack`, each named from what was read: an offset's
    /// names are taken from `shared`, made there the first time.
    fn named_frames(
        &mut self,
        stack: &UserStack<'_>,
        shared: &mut HashMap<(FileId, u64), Arc<[Arc<str>]>>,
    ) -> Vec<Symbol> {
        let mut out = Vec::with_capacity(stack.addrs.len());
        for (i, &addr) in stack.addrs.iter().enumerate() {
            let probed = probe(i, addr);
            let (names, unresolved) = match self.place_frame(stack, i, addr) {
                // An unresolved frame shows the address as sampled, as perf
                // does.
                Place::File(id, off, module) => (
                    Arc::clone(shared.entry((id, off)).or_insert_with(|| {
                        let names = self.files.names(id, off);
                        names.iter().map(|n| Arc::from(n.as_str())).collect()
                    })),
                    Symbol::in_module(module, off + (addr - probed)),
                ),
                Place::Nowhere => {
                    let name = self.jit.get(&(stack.tgid, probed)).cloned().flatten();
                    (Arc::from(Vec::from_iter(name)), Symbol::nowhere(addr))
                }
                Place::Interpreted(name) => (Arc::from(vec![name]), Symbol::nowhere(addr)),
            };
            if names.is_empty() {
                out.push(unresolved);
            } else {
                out.extend(names.iter().cloned().map(Symbol::Name));
            }
        }
        out
    }

    /// Fetches the debug files of build-ids `ids` into the debuginfod
    /// cache, for the files to find.
    fn fetch_debug_files(
        &mut self,
        config: &debuginfod::Config,
        ids: &[String],
        progress: &mut dyn FnMut(&'static str, usize, usize),
    ) {
        let stop = self.stop.as_deref();
        let stop = || stop.is_some_and(|s| s());
        let fetched = debuginfod::fetch(config, ids, &stop, &mut |done, total| {
            progress("fetching debug files", done, total)
        });
        if fetched.timed_out > 0 {
            self.warnings.push(format!(
                "NOTE: {} of {} debug files were still being fetched from debuginfod when \
                 its timeout (DEBUGINFOD_TIMEOUT) or a signal ended the wait.",
                fetched.timed_out,
                ids.len()
            ));
        }
        if let Some(first) = fetched.errors.first() {
            self.warnings.push(format!(
                "NOTE: {} debug files could not be fetched from debuginfod (first: {first}).",
                fetched.errors.len()
            ));
        }
        self.files.add_fetched(&config.cache, fetched.found);
    }

    /// Names JIT code at `addrs` (in no mapped file) of process `tgid`
    /// from its perf map, if it has one.
    fn read_perf_map(&mut self, tgid: u32, addrs: &BTreeSet<u64>) {
        let found = match self.maps.open_perf_map(tgid) {
            Ok(file) => perfmap::read(&file, addrs),
            Err(OpenError::Missing | OpenError::NoRoot) => perfmap::Found::default(),
            Err(e) => {
                self.perf_map_notes
                    .push(format!("PID {tgid}'s perf map was not read: {e}"));
                perfmap::Found::default()
            }
        };
        if found.malformed > 0 {
            self.perf_map_notes.push(format!(
                "{} malformed lines of PID {tgid}'s perf map were skipped",
                found.malformed
            ));
        }
        if found.cut {
            self.perf_map_notes.push(format!(
                "PID {tgid}'s perf map was read up to its first {} MiB",
                perfmap::MAX_MAP_BYTES >> 20
            ));
        }
        for &addr in addrs {
            let name = found.names.get(&addr).map(|n| Arc::from(n.as_str()));
            self.jit.insert((tgid, addr), name);
        }
    }

    /// True once `stop` said so (then it is not asked again).
    fn should_stop(&mut self) -> bool {
        if !self.stopped && self.stop.as_ref().is_some_and(|stop| stop()) {
            self.stopped = true;
        }
        self.stopped
    }

    /// Where frame `index` of `stack`, at `addr`, is (as [`probe`] adjusts
    /// it): from where it was stored when that was known, else from the
    /// process's map.
    fn place_frame(&mut self, stack: &UserStack<'_>, index: usize, addr: u64) -> Place {
        let probed = probe(index, addr);
        let back = addr - probed;
        if let Some(name) = self.maps.interpreted.name(addr) {
            return Place::Interpreted(name);
        }
        let in_code = match stack.code.place(index) {
            Some(CodePlace::Vdso { offset }) => Some((FileId::Vdso, offset, Arc::from("[vdso]"))),
            Some(CodePlace::Interpreted) => None,
            Some(CodePlace::File { file, offset }) => self
                .open_code(file)
                .map(|(id, module)| (id, offset, module)),
            None => None,
        };
        match in_code {
            Some((id, offset, module)) => Place::File(id, offset.wrapping_sub(back), module),
            None => self.place(stack.tgid, stack.time, probed),
        }
    }

    /// The registered file `key` (see [`ProcessMaps::open_code_file`]),
    /// opened once; `None` when it is not registered or cannot be opened.
    fn open_code(&mut self, key: FileKey) -> Option<InFile> {
        if let Some(found) = self.opened_code.get(&key) {
            return found.clone();
        }
        // Asked before any file is opened: a signal stops the opening.
        if self.should_stop() {
            return None;
        }
        let (opened, mapping) = self.maps.open_code_file(key)?;
        let module = base_name(&mapping.path);
        let found = self
            .files
            .open(opened, &mapping.path)
            .map(|id| (id, module));
        self.opened_code.insert(key, found.clone());
        found
    }

    /// Where an (already adjusted) user address is: a file offset in a
    /// mapped file (opened once per mapping), or nowhere known.
    fn place(&mut self, tgid: u32, time: u64, addr: u64) -> Place {
        // Asked before any file is opened: a signal stops the opening.
        let stop = self.should_stop();
        let Some((mapping, off)) = self.maps.lookup(tgid, time, addr) else {
            return Place::Nowhere;
        };
        let key = (tgid, mapping.start, mapping.from);
        let found = match self.opened.get(&key) {
            Some(found) => found.clone(),
            None => {
                let found = if mapping.is_vdso() {
                    Some((FileId::Vdso, base_name(&mapping.path)))
                } else {
                    if stop {
                        return Place::Nowhere;
                    }
                    let opened = self.maps.open_file(tgid, mapping);
                    self.files
                        .open(opened, &mapping.path)
                        .map(|id| (id, base_name(&mapping.path)))
                };
                self.opened.insert(key, found.clone());
                found
            }
        };
        match found {
            Some((id, module)) => Place::File(id, off, module),
            None => Place::Nowhere,
        }
    }

    /// Warnings and notes to print once at the end (e.g. kptr_restrict hid
    /// kernel addresses, files that gave no names).
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut out = self.warnings.clone();
        out.extend(self.maps.notes());
        out.extend(self.files.notes());
        out.extend(self.perf_map_notes.iter().map(|n| format!("NOTE: {n}.")));
        if self.stopped {
            out.push(
                "NOTE: symbolization was interrupted; frames of files not yet read print as \
                 [unknown]."
                    .to_string(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
