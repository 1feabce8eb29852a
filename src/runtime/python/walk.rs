//! The frame chain of one CPython thread, read from its process: the
//! thread state whose `native_thread_id` is the thread's, its current
//! frame, and each frame's code object and instruction, grouped by the
//! run of the evaluation loop that executes them.
//!
//! Every pointer comes from a process that may forge them: each read is
//! bounded, the walk stops at [`MAX_FRAMES`] frames, [`MAX_THREADS`]
//! thread states, [`MAX_INTERPRETERS`] interpreters and [`MAX_READS`]
//! reads, a frame seen twice ends the chain, and nothing is allocated by
//! a size read from the process.

use super::layout::{CODE_READ, CurrentFrame, Entry, FRAME_READ, Layout};
use crate::bytes::u64_at;
pub(crate) use crate::runtime::memory::{Counted, Memory, Miss};

const MAX_FRAMES: usize = 256;
const MAX_THREADS: usize = 2048;
const MAX_INTERPRETERS: usize = 16;

/// One Python frame: its code object and where it is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawFrame {
    pub(crate) code: u64,
    /// The instruction's address (see [`Layout::frame_instr`]).
    pub(crate) instr: u64,
    /// What the code object points to now (see [`CodeKey`]).
    pub(crate) key: CodeKey,
}

/// A code object's qualified name, file name and line table pointers
/// and first line, as read with the frame: a code object cached at the
/// same address is the same one only if they are unchanged (freed
/// objects' addresses are reused).
pub(crate) type CodeKey = [u64; 4];

/// The [`CodeKey`] of the code object whose first bytes are `head`.
pub(crate) fn code_key(layout: &Layout, head: &[u8]) -> Option<CodeKey> {
    let at = |off: u64| u64_at(head, off as usize);
    Some([
        at(layout.code_qualname)?,
        at(layout.code_filename)?,
        at(layout.code_linetable)?,
        u64::from(crate::bytes::u32_at(
            head,
            layout.code_firstlineno as usize,
        )?),
    ])
}

/// The frames of one run of the evaluation loop, innermost first.
pub(crate) type Group = Vec<RawFrame>;

/// Where a thread's state was found: the state, and the head of the
/// interpreters' list it was found from.
pub(crate) type Found = (u64, u64);

/// The thread state of thread `tid`, from the runtime at `runtime`: at
/// `hint` if the interpreters' list begins where it did and the state
/// there is still the thread's, else found in the interpreters' lists.
fn thread_state(
    mem: &mut Counted<'_>,
    layout: &Layout,
    runtime: u64,
    tid: u32,
    hint: Option<Found>,
    passed: &mut Vec<(u32, Found)>,
) -> Result<Found, Miss> {
    let span = (layout.thread_next.max(layout.thread_native_id) + 8) as usize;
    let mut buf = vec![0u8; span];
    let head = mem.word(runtime.wrapping_add(layout.interpreters_head))?;
    if let Some((tstate, from)) = hint
        && from == head
        && mem.read(tstate, &mut buf).is_ok()
        && u64_at(&buf, layout.thread_native_id as usize) == Some(u64::from(tid))
    {
        return Ok((tstate, head));
    }
    let mut interp = head;
    let mut threads = 0;
    for _ in 0..MAX_INTERPRETERS {
        if interp == 0 {
            return Err(Miss::NoThread);
        }
        let mut tstate = mem.word(interp.wrapping_add(layout.interp_threads_head))?;
        while tstate != 0 {
            threads += 1;
            if threads > MAX_THREADS {
                return Err(Miss::TooLong);
            }
            mem.read(tstate, &mut buf)?;
            let native = u64_at(&buf, layout.thread_native_id as usize);
            if native == Some(u64::from(tid)) {
                return Ok((tstate, head));
            }
            if let Some(other) = native.and_then(|n| u32::try_from(n).ok()) {
                passed.push((other, (tstate, head)));
            }
            tstate = u64_at(&buf, layout.thread_next as usize).ok_or(Miss::Unreadable)?;
        }
        interp = mem.word(interp.wrapping_add(layout.interp_next))?;
    }
    Err(Miss::TooLong)
}

/// The Python frames thread `tid` runs, by run of the evaluation loop,
/// innermost first: the first group is the one the innermost
/// `_PyEval_EvalFrameDefault` executes. Frames whose code is not a code
/// object (`code_type` is `PyCode_Type`'s address) are left out.
/// `tstate_at` is where the thread's state was last found, and is set to
/// where it is; `passed` gets where the other threads' states were, as
/// the list was walked to find it.
pub(crate) fn thread_frames(
    mem: &mut Counted<'_>,
    layout: &Layout,
    runtime: u64,
    code_type: u64,
    tid: u32,
    tstate_at: &mut Option<Found>,
    passed: &mut Vec<(u32, Found)>,
) -> Result<Vec<Group>, Miss> {
    let found = thread_state(mem, layout, runtime, tid, *tstate_at, passed)?;
    *tstate_at = Some(found);
    let tstate = found.0;
    let mut frame = match layout.current_frame {
        CurrentFrame::ThroughCFrame { cframe, current } => {
            let cframe = mem.word(tstate.wrapping_add(cframe))?;
            mem.word(cframe.wrapping_add(current))?
        }
        CurrentFrame::Direct { current } => mem.word(tstate.wrapping_add(current))?,
    };
    let mut groups: Vec<Group> = vec![Vec::new()];
    let mut seen: Vec<u64> = Vec::new();
    let mut buf = [0u8; FRAME_READ];
    let mut head = [0u8; CODE_READ];
    while frame != 0 {
        if seen.len() >= MAX_FRAMES || seen.contains(&frame) {
            return Err(Miss::TooLong);
        }
        seen.push(frame);
        mem.read(frame, &mut buf)?;
        let field = |off: u64| u64_at(&buf, off as usize).ok_or(Miss::Unreadable);
        let code = field(layout.frame_code)?;
        let instr = field(layout.frame_instr)?;
        let previous = field(layout.frame_previous)?;
        let owner = buf.get(layout.frame_owner as usize).copied();
        let shim = matches!(layout.entry, Entry::ShimOwner { owner: o } if owner == Some(o));
        if shim {
            // Below the first frame of a run of the loop: what follows
            // belongs to the run that called it.
            if groups.last().is_some_and(|g| !g.is_empty()) {
                groups.push(Vec::new());
            }
        } else {
            mem.read(code, &mut head)?;
            if u64_at(&head, layout.object_type as usize) == Some(code_type)
                && let Some(key) = code_key(layout, &head)
                && let Some(g) = groups.last_mut()
            {
                g.push(RawFrame { code, instr, key });
            }
            if let Entry::Flag { is_entry } = layout.entry
                && buf.get(is_entry as usize).is_some_and(|&b| b != 0)
            {
                groups.push(Vec::new());
            }
        }
        frame = previous;
    }
    groups.retain(|g| !g.is_empty());
    Ok(groups)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Memory made of regions.
    #[derive(Default)]
    pub(crate) struct Fake {
        pub(crate) regions: BTreeMap<u64, Vec<u8>>,
        pub(crate) reads: usize,
    }

    impl Fake {
        pub(crate) fn put(&mut self, addr: u64, bytes: &[u8]) {
            self.regions.insert(addr, bytes.to_vec());
        }

        pub(crate) fn put_words(&mut self, addr: u64, words: &[(u64, u64)], len: usize) {
            let mut b = vec![0u8; len];
            for &(off, w) in words {
                b[off as usize..off as usize + 8].copy_from_slice(&w.to_ne_bytes());
            }
            self.put(addr, &b);
        }
    }

    impl Memory for Fake {
        fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            self.reads += 1;
            let Some((&start, region)) = self.regions.range(..=addr).next_back() else {
                return false;
            };
            let from = (addr - start) as usize;
            match region.get(from..from + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    true
                }
                None => false,
            }
        }
    }

    /// [`thread_frames`] through a fresh read count.
    fn walk(
        m: &mut Fake,
        l: &Layout,
        runtime: u64,
        tid: u32,
        at: &mut Option<Found>,
    ) -> Result<Vec<Group>, Miss> {
        thread_frames(
            &mut Counted::new(m),
            l,
            runtime,
            CODE_TYPE,
            tid,
            at,
            &mut Vec::new(),
        )
    }

    pub(crate) const RUNTIME: u64 = 0x1000;
    pub(crate) const INTERP: u64 = 0x2000;
    pub(crate) const CODE_TYPE: u64 = 0x9000;

    /// A 3.12 process whose thread `tid` (behind one other thread) runs
    /// `frames` (innermost first; `None` is an entry shim).
    pub(crate) fn process_3_12(tid: u32, frames: &[Option<u64>]) -> (Fake, Layout) {
        let l = Layout::of_minor(12).unwrap();
        let mut m = Fake::default();
        m.put_words(RUNTIME, &[(l.interpreters_head, INTERP)], 64);
        m.put_words(INTERP, &[(l.interp_threads_head, 0x3000)], 128);
        let span = 168;
        m.put_words(
            0x3000,
            &[(l.thread_next, 0x3400), (l.thread_native_id, 7)],
            span,
        );
        m.put_words(
            0x3400,
            &[
                (l.thread_next, 0),
                (l.thread_native_id, u64::from(tid)),
                (56, 0x3800),
            ],
            span,
        );
        let first = 0x5000;
        m.put_words(0x3800, &[(0, first)], 16);
        for (i, f) in frames.iter().enumerate() {
            let at = first + 0x100 * i as u64;
            let previous = if i + 1 < frames.len() { at + 0x100 } else { 0 };
            let mut b = vec![0u8; FRAME_READ];
            let code = f.unwrap_or(0);
            b[0..8].copy_from_slice(&code.to_ne_bytes());
            b[8..16].copy_from_slice(&previous.to_ne_bytes());
            b[56..64].copy_from_slice(&(code + 200 + 2 * i as u64).to_ne_bytes());
            b[70] = if f.is_none() { 3 } else { 0 };
            m.put(at, &b);
            if let Some(code) = f {
                m.put_words(*code, &[(8, CODE_TYPE)], CODE_READ);
            }
        }
        (m, l)
    }

    #[test]
    fn frames_are_grouped_by_run_of_the_loop() {
        let (mut m, l) = process_3_12(42, &[Some(0xa000), Some(0xa100), None, Some(0xa200), None]);
        let groups = walk(&mut m, &l, RUNTIME, 42, &mut None).expect("walked");
        let codes: Vec<Vec<u64>> = groups
            .iter()
            .map(|g| g.iter().map(|f| f.code).collect())
            .collect();
        assert_eq!(codes, [vec![0xa000, 0xa100], vec![0xa200]]);
        assert_eq!(groups[0][1].instr, 0xa100 + 202);
    }

    #[test]
    fn a_thread_state_is_found_again_where_it_was() {
        let (mut m, l) = process_3_12(42, &[Some(0xa000)]);
        let mut at = None;
        walk(&mut m, &l, RUNTIME, 42, &mut at).unwrap();
        assert_eq!(at, Some((0x3400, INTERP)));
        // The thread passed on the way is noted where it was.
        let mut passed = Vec::new();
        let mut none = None;
        thread_frames(
            &mut Counted::new(&mut m),
            &l,
            RUNTIME,
            CODE_TYPE,
            42,
            &mut none,
            &mut passed,
        )
        .unwrap();
        assert_eq!(passed, [(7, (0x3000, INTERP))]);
        // Found at once: the list is not walked (its head is gone).
        m.put_words(INTERP, &[(l.interp_threads_head, 0)], 128);
        let groups = walk(&mut m, &l, RUNTIME, 42, &mut at);
        assert_eq!(groups.map(|g| g.len()), Ok(1));
        // The interpreters' list begins elsewhere now: walked again.
        m.put_words(RUNTIME, &[(l.interpreters_head, 0x7000)], 64);
        m.put_words(0x7000, &[(l.interp_threads_head, 0)], 128);
        assert_eq!(walk(&mut m, &l, RUNTIME, 42, &mut at), Err(Miss::NoThread));
        m.put_words(RUNTIME, &[(l.interpreters_head, INTERP)], 64);
        m.put_words(INTERP, &[(l.interp_threads_head, 0x3000)], 128);
        // Another thread's now: looked for in the list, and not found.
        m.put_words(0x3400, &[(l.thread_native_id, 43), (56, 0x3800)], 168);
        assert_eq!(walk(&mut m, &l, RUNTIME, 42, &mut at), Err(Miss::NoThread));
    }

    #[test]
    fn another_thread_or_a_bad_pointer_gives_nothing() {
        let (mut m, l) = process_3_12(42, &[Some(0xa000)]);
        assert_eq!(
            walk(&mut m, &l, RUNTIME, 43, &mut None),
            Err(Miss::NoThread)
        );
        assert_eq!(
            walk(&mut m, &l, 0x7777, 42, &mut None),
            Err(Miss::Unreadable)
        );
    }

    #[test]
    fn a_frame_that_is_no_code_object_is_left_out() {
        let (mut m, l) = process_3_12(42, &[Some(0xa000), Some(0xa100)]);
        m.put_words(0xa100, &[(8, 0x1234)], CODE_READ);
        let groups = walk(&mut m, &l, RUNTIME, 42, &mut None).expect("walked");
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].len(), 1);
    }

    #[test]
    fn a_cyclic_chain_or_thread_list_ends() {
        let (mut m, l) = process_3_12(42, &[Some(0xa000), Some(0xa100)]);
        // The second frame's previous is the first.
        let mut b = m.regions[&0x5100].clone();
        b[8..16].copy_from_slice(&0x5000u64.to_ne_bytes());
        m.put(0x5100, &b);
        assert_eq!(walk(&mut m, &l, RUNTIME, 42, &mut None), Err(Miss::TooLong));
        // A thread list that loops on itself, without the thread.
        let (mut m, l) = process_3_12(42, &[Some(0xa000)]);
        m.put_words(
            0x3000,
            &[(l.thread_next, 0x3000), (l.thread_native_id, 7)],
            168,
        );
        m.put_words(INTERP, &[(l.interp_threads_head, 0x3000)], 128);
        assert_eq!(walk(&mut m, &l, RUNTIME, 42, &mut None), Err(Miss::TooLong));
        assert!(m.reads <= 4096 + 1);
    }
}
