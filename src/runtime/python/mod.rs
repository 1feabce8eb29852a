//! CPython 3.11 and later: where a process keeps its interpreter state,
//! and the frame chain of one of its threads, named.
//!
//! [`image`] reads the interpreter's file, [`layout`] says where the
//! fields are, [`walk`] reads a thread's frames, [`code`] names them with
//! [`lines`].

mod code;
mod image;
mod layout;
mod lines;
pub(crate) mod walk;

use std::collections::HashMap;
use std::sync::Arc;

use code::{CodeInfo, Types, read_code};
pub(crate) use image::{Image, may_hold_python};
use walk::{Counted, Memory, Miss, thread_frames};

/// A CPython process: its interpreter's file, and where it is loaded.
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

    /// True when `addr` is in `_PyEval_EvalFrameDefault`.
    pub(crate) fn in_eval(&self, addr: u64) -> bool {
        addr.checked_sub(self.bias)
            .is_some_and(|a| self.image.eval.contains(&a))
    }

    fn types(&self) -> Types {
        Types {
            code: self.image.code_type.wrapping_add(self.bias),
            unicode: self.image.unicode_type.wrapping_add(self.bias),
            bytes: self.image.bytes_type.wrapping_add(self.bias),
        }
    }
}

/// Most code objects kept, and bytes of their names and line tables;
/// past either, all are forgotten.
const MAX_CODES: usize = 1 << 16;
const MAX_CODE_BYTES: usize = 32 << 20;

/// Code objects read, by process and address, for the process's life
/// (each checked against what its frame points to, see
/// [`walk::CodeKey`]), and where each thread's state was last found.
#[derive(Debug, Default)]
pub(crate) struct Codes {
    known: HashMap<(u32, u64), (walk::CodeKey, Arc<CodeInfo>)>,
    bytes: usize,
    threads: HashMap<(u32, u32), walk::Found>,
}

impl Codes {
    /// Forgets process `tgid`'s code objects (it exited or ran exec), and
    /// where its threads' states were.
    pub(crate) fn forget(&mut self, tgid: u32) {
        self.known.retain(|&(t, _), _| t != tgid);
        self.threads.retain(|&(t, _), _| t != tgid);
        self.bytes = self.known.values().map(|(_, c)| c.size()).sum();
    }

    fn keep(&mut self, at: (u32, u64), key: walk::CodeKey, info: Arc<CodeInfo>) {
        if self.known.len() >= MAX_CODES || self.bytes + info.size() > MAX_CODE_BYTES {
            self.known.clear();
            self.bytes = 0;
        }
        self.bytes += info.size();
        if let Some((_, old)) = self.known.insert(at, (key, info)) {
            self.bytes = self.bytes.saturating_sub(old.size());
        }
    }
}

/// The names of thread `tid`'s Python frames, by run of the evaluation
/// loop, innermost first (see [`walk::thread_frames`]), read through
/// `mem` from process `tgid`, described by `process`.
pub(crate) fn frame_names(
    mem: &mut dyn Memory,
    process: &Process,
    codes: &mut Codes,
    tgid: u32,
    tid: u32,
) -> Result<Vec<Vec<String>>, Miss> {
    let layout = &process.image.layout;
    let types = process.types();
    let runtime = process.image.runtime.wrapping_add(process.bias);
    let mut mem = Counted::new(mem);
    let mut tstate = codes.threads.get(&(tgid, tid)).copied();
    // The threads a walk passes to find this one are found for later.
    let mut passed = Vec::new();
    let walked = thread_frames(
        &mut mem,
        layout,
        runtime,
        types.code,
        tid,
        &mut tstate,
        &mut passed,
    );
    for (other, at) in tstate.map(|at| (tid, at)).into_iter().chain(passed) {
        if codes.threads.len() >= MAX_CODES {
            codes.threads.clear();
        }
        codes.threads.insert((tgid, other), at);
    }
    let groups = walked?;
    let mut named = Vec::with_capacity(groups.len());
    for group in groups {
        let mut names = Vec::with_capacity(group.len());
        for frame in group {
            let info = match codes.known.get(&(tgid, frame.code)) {
                Some((key, info)) if *key == frame.key => Arc::clone(info),
                _ => {
                    let info = Arc::new(read_code(&mut mem, layout, &types, frame.code)?);
                    codes.keep((tgid, frame.code), frame.key, Arc::clone(&info));
                    info
                }
            };
            names.push(info.frame_name(frame.instr));
        }
        named.push(names);
    }
    Ok(named)
}

/// `native` (innermost first) with each frame in `_PyEval_EvalFrameDefault`
/// replaced by the frames its run executes (`groups`, innermost first, as
/// `name` makes them addresses); a run of the loop beyond the native
/// frames (a stack cut short) is left out, and an evaluation frame beyond
/// the runs is kept.
pub(crate) fn splice(native: &[u64], process: &Process, groups: &[Vec<u64>]) -> (Vec<u64>, usize) {
    let mut out = Vec::with_capacity(native.len() + groups.iter().map(Vec::len).sum::<usize>());
    let mut next = groups.iter();
    let mut spliced = 0;
    for &addr in native {
        if process.in_eval(addr)
            && let Some(group) = next.next()
        {
            out.extend_from_slice(group);
            spliced += 1;
        } else {
            out.push(addr);
        }
    }
    (out, spliced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_evaluation_frame_gives_way_to_its_run_of_the_loop() {
        // The loop at 0x5000..0x6000 of a file loaded 0x10000 up.
        let process = Process::new(Arc::new(Image::with_eval(0x5000..0x6000)), 0x10000);
        let (inner, outer) = (0x15010, 0x15800);
        let native = [0x1, inner, 0x2, outer, 0x3];
        let groups = [vec![10, 11], vec![20]];
        let (out, n) = splice(&native, &process, &groups);
        assert_eq!((out, n), (vec![0x1, 10, 11, 0x2, 20, 0x3], 2));
        // More runs than evaluation frames (a stack cut short): the outer
        // runs are left out; fewer: the outer frames stay native.
        let (out, n) = splice(&native[..2], &process, &groups);
        assert_eq!((out, n), (vec![0x1, 10, 11], 1));
        let (out, n) = splice(&native, &process, &groups[..1]);
        assert_eq!((out, n), (vec![0x1, 10, 11, 0x2, outer, 0x3], 1));
        // An address below the load address is in no loop.
        assert!(!process.in_eval(0x5010));
    }
}
