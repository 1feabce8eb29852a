//! HotSpot (OpenJDK 17 on x86-64): the Java frames of a blocked thread,
//! read from its JVM with the layout the JVM itself publishes, named.
//!
//! [`image`] finds the published tables in `libjvm.so`, [`vm`] reads
//! them, [`walk`] reads a thread's frames, [`method`] names them with
//! [`stream`]'s decoders.

mod image;
mod method;
mod stream;
#[cfg(test)]
mod tests;
mod vm;
mod walk;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use image::{Image, may_hold_jvm};
use method::{MethodInfo, MethodKey, method_key, read_method, stub_name};
use vm::Vm;
use walk::{Code, java_thread, thread_frames};

use crate::runtime::memory::{Counted, Memory, Miss};

/// A JVM process: its `libjvm.so`, and where it is loaded.
#[derive(Clone, Debug)]
pub(crate) struct Process {
    image: Arc<Image>,
    bias: u64,
}

/// The same file, read once, loaded at the same place.
impl PartialEq for Process {
    fn eq(&self, other: &Process) -> bool {
        Arc::ptr_eq(&self.image, &other.image) && self.bias == other.bias
    }
}

impl Process {
    pub(crate) fn new(image: Arc<Image>, bias: u64) -> Process {
        Process { image, bias }
    }
}

/// Most methods, and bytes of their names and tables, kept; past either,
/// all are forgotten.
const MAX_METHODS: usize = 1 << 16;
const MAX_METHOD_BYTES: usize = 32 << 20;
/// Reads of one walk, the names' included, and bytes.
const MAX_READS: usize = 8192;
const MAX_BYTES: usize = 8 << 20;
/// How long a JVM whose tables could not be read is left alone.
const RETRY_TABLES: Duration = Duration::from_secs(1);

/// What is known of each JVM: its layout (`None`: refused), the methods
/// named, and where its threads were.
#[derive(Debug, Default)]
pub(crate) struct Jvms {
    /// A JVM whose tables could not be read is tried again after
    /// [`RETRY_TABLES`] (a young one fills them as it loads).
    vms: HashMap<u32, Result<Arc<Vm>, Instant>>,
    /// Each JVM's code cache, as its last read found it.
    code: HashMap<u32, (u64, u64)>,
    methods: HashMap<(u32, u64), (MethodKey, Arc<MethodInfo>)>,
    bytes: usize,
    threads: HashMap<(u32, u32), u64>,
}

impl Jvms {
    /// Forgets process `tgid` (it exited or ran exec).
    pub(crate) fn forget(&mut self, tgid: u32) {
        self.vms.remove(&tgid);
        self.code.remove(&tgid);
        self.methods.retain(|&(t, _), _| t != tgid);
        self.threads.retain(|&(t, _), _| t != tgid);
        self.bytes = self.methods.values().map(|(_, m)| m.size()).sum();
    }

    /// Process `tgid`'s code cache, once a read found it.
    pub(crate) fn code_cache(&self, tgid: u32) -> Option<(u64, u64)> {
        self.code.get(&tgid).copied()
    }

    fn keep(&mut self, at: (u32, u64), key: MethodKey, info: Arc<MethodInfo>) {
        if self.methods.len() >= MAX_METHODS || self.bytes + info.size() > MAX_METHOD_BYTES {
            self.methods.clear();
            self.bytes = 0;
        }
        self.bytes += info.size();
        if let Some((_, old)) = self.methods.insert(at, (key, info)) {
            self.bytes = self.bytes.saturating_sub(old.size());
        }
    }
}

/// Names of frames by entry into Java, innermost first.
pub(crate) type Named = Vec<Vec<String>>;

/// The names of thread `tid`'s Java frames, read through `mem` from
/// process `tgid` (whose code cache [`Jvms::code_cache`] tells from then
/// on).
pub(crate) fn frame_names(
    mem: &mut dyn Memory,
    process: &Process,
    jvms: &mut Jvms,
    tgid: u32,
    tid: u32,
) -> Result<Named, Miss> {
    let vm = match jvms.vms.get(&tgid) {
        Some(Ok(vm)) => Arc::clone(vm),
        Some(Err(at)) if at.elapsed() < RETRY_TABLES => return Err(Miss::Unreadable),
        _ => {
            let mut tables = Counted::with_limit(mem, vm::TABLE_READS);
            let vm = Vm::read(&mut tables, &process.image, process.bias)
                .map(Arc::new)
                .map_err(|_| Instant::now());
            if jvms.vms.len() >= MAX_METHODS {
                jvms.vms.clear();
            }
            jvms.vms.insert(tgid, vm.clone());
            vm.map_err(|_| Miss::Unreadable)?
        }
    };
    let mut mem = Counted::with_limit(mem, MAX_READS).with_bytes(MAX_BYTES);
    let code = Code::read(&mut mem, &vm)?;
    if jvms.code.len() >= MAX_METHODS {
        jvms.code.clear();
    }
    jvms.code.insert(tgid, (code.low, code.high));
    let hint = jvms.threads.get(&(tgid, tid)).copied();
    let thread = java_thread(&mut mem, &vm, tid, hint)?;
    if jvms.threads.len() >= MAX_METHODS {
        jvms.threads.clear();
    }
    jvms.threads.insert((tgid, tid), thread);
    let groups = thread_frames(&mut mem, &vm, &code, thread)?;
    let mut named = Vec::with_capacity(groups.len());
    for group in groups {
        let mut names = Vec::with_capacity(group.len());
        for frame in group {
            if frame.pos == walk::Pos::Stub {
                names.push(stub_name(&mut mem, frame.method)?);
                continue;
            }
            let key = method_key(&mut mem, &vm, frame.method)?;
            let info = match jvms.methods.get(&(tgid, frame.method)) {
                Some((known, info)) if *known == key => Arc::clone(info),
                _ => {
                    let info = Arc::new(read_method(&mut mem, &vm, key)?);
                    jvms.keep((tgid, frame.method), key, Arc::clone(&info));
                    info
                }
            };
            names.push(info.frame_name(frame.pos));
        }
        named.push(names);
    }
    Ok(named)
}

/// `native` (innermost first) with each run of frames in the code cache
/// (`code`) replaced by the Java frames of the next entry into Java
/// (`groups`, innermost first); runs past the groups are kept. A native
/// stack with no frame there stopped before Java (unwinding the JVM's
/// runtime stubs, which have no unwind tables): the Java frames, its
/// callers, follow it.
pub(crate) fn splice(native: &[u64], code: (u64, u64), groups: &[Vec<u64>]) -> (Vec<u64>, usize) {
    let mut out = Vec::with_capacity(native.len() + groups.iter().map(Vec::len).sum::<usize>());
    let mut next = groups.iter();
    let mut spliced = 0;
    let mut in_run = false;
    let mut kept_run = false;
    for &addr in native {
        let in_code = (code.0..code.1).contains(&addr);
        if !in_code {
            in_run = false;
            out.push(addr);
            continue;
        }
        if !in_run {
            in_run = true;
            kept_run = match next.next() {
                Some(group) => {
                    out.extend_from_slice(group);
                    spliced += 1;
                    false
                }
                None => true,
            };
        }
        if kept_run {
            out.push(addr);
        }
    }
    if spliced == 0 {
        for group in groups {
            out.extend_from_slice(group);
            spliced += 1;
        }
    }
    (out, spliced)
}

#[cfg(test)]
mod splicing {
    use super::*;

    #[test]
    fn each_run_in_the_code_cache_gives_way_to_an_entry_into_java() {
        let code = (0x7000, 0x8000);
        let native = [0x1, 0x7010, 0x7020, 0x2, 0x7030, 0x3, 0x7040, 0x4];
        let groups = [vec![10, 11, 12], vec![20]];
        let (out, n) = splice(&native, code, &groups);
        assert_eq!(out, [0x1, 10, 11, 12, 0x2, 20, 0x3, 0x7040, 0x4]);
        assert_eq!(n, 2);
        // No groups: the native frames stay.
        assert_eq!(splice(&native, code, &[]), (native.to_vec(), 0));
        // No frame in the code cache: the Java frames follow.
        assert_eq!(
            splice(&[0x1, 0x2], code, &groups),
            (vec![0x1, 0x2, 10, 11, 12, 20], 2)
        );
    }
}
