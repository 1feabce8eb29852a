//! The Java frames of one blocked HotSpot thread, read from its process:
//! the `JavaThread` whose OS thread id is the thread's, its last Java
//! frame (the anchor the JVM sets when it leaves Java), and each frame
//! from there to the call stub that entered Java, then on through the
//! anchors the call stubs saved, one group of frames per entry into Java.
//!
//! An interpreted frame is stepped by its frame pointer and holds its
//! `Method*` and bytecode pointer in fixed slots; a compiled frame or a
//! stub is stepped by its code blob's frame size, found through the code
//! heaps' segment maps, and an nmethod's frames (its inlined methods too)
//! are told by its scope descriptors.
//!
//! Every pointer comes from a process that may forge it: stack pointers
//! must rise within the thread's stack, the walk stops at [`MAX_FRAMES`]
//! frames and the reads' bound, and no buffer is sized by what is read
//! past fixed caps.

use super::stream::{PcDescLayout, Scope, scope_chain, scope_of_pc};
use super::vm::Vm;
use crate::bytes::{u32_at, u64_at};
use crate::runtime::memory::{Counted, Miss};

const MAX_FRAMES: usize = 512;
const MAX_THREADS: u64 = 16384;
const MAX_HEAPS: u64 = 8;
/// Largest stack and frame, and segment-map hops, believed.
const MAX_STACK: u64 = 1 << 30;
const MAX_FRAME_WORDS: u64 = 1 << 16;
const MAX_HOPS: usize = 1024;
/// Largest scope tables read, and inlined scopes per frame.
const MAX_PCS: u64 = 256 << 10;
const MAX_SCOPES: u64 = 1 << 20;
const MAX_INLINED: usize = 64;

/// Where in its method a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pos {
    /// An interpreted frame's bytecode pointer (0 in a native method).
    Bcp(u64),
    /// A compiled frame's bytecode index.
    Bci(i32),
    /// Unknown (a native method's compiled wrapper).
    None,
    /// Not a method's frame but a runtime stub's (a slow path of
    /// compiled code): the frame's `method` is the stub's name.
    Stub,
}

/// One Java frame: its `Method*`, and where it is in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawFrame {
    pub(crate) method: u64,
    pub(crate) pos: Pos,
}

/// The code cache's bounds, the interpreter's code and the call stub's
/// return, as the process has them now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Code {
    pub(crate) low: u64,
    pub(crate) high: u64,
    interpreter: (u64, u64),
    call_stub_return: u64,
}

impl Code {
    pub(crate) fn read(mem: &mut Counted<'_>, vm: &Vm) -> Result<Code, Miss> {
        let queue = mem.word(vm.interpreter_code)?;
        let start = mem.word(queue.wrapping_add(vm.queue_buffer))?;
        let limit = u64::from(read_u32(mem, queue.wrapping_add(vm.queue_limit))?);
        let code = Code {
            low: mem.word(vm.code_low)?,
            high: mem.word(vm.code_high)?,
            interpreter: (start, start.saturating_add(limit)),
            call_stub_return: mem.word(vm.call_stub_return)?,
        };
        if code.low >= code.high {
            return Err(Miss::Unreadable);
        }
        Ok(code)
    }

    pub(crate) fn contains(&self, pc: u64) -> bool {
        (self.low..self.high).contains(&pc)
    }

    fn in_interpreter(&self, pc: u64) -> bool {
        (self.interpreter.0..self.interpreter.1).contains(&pc)
    }
}

/// The frames of one entry into Java, innermost first.
pub(crate) type Group = Vec<RawFrame>;

fn read_u32(mem: &mut Counted<'_>, addr: u64) -> Result<u32, Miss> {
    let mut b = [0u8; 4];
    mem.read(addr, &mut b)?;
    Ok(u32::from_ne_bytes(b))
}

/// The `JavaThread` of OS thread `tid` (in the JVM's PID namespace), not
/// terminated: at `hint` if that is still the thread's, else found in the
/// threads list.
pub(crate) fn java_thread(
    mem: &mut Counted<'_>,
    vm: &Vm,
    tid: u32,
    hint: Option<u64>,
) -> Result<u64, Miss> {
    let is_of = |mem: &mut Counted<'_>, thread: u64| -> Result<bool, Miss> {
        let os = mem.word(thread.wrapping_add(vm.thread_osthread))?;
        Ok(os != 0
            && read_u32(mem, os.wrapping_add(vm.osthread_tid))? == tid
            && read_u32(mem, thread.wrapping_add(vm.thread_terminated))? == vm.not_terminated)
    };
    if let Some(t) = hint
        && is_of(mem, t).unwrap_or(false)
    {
        return Ok(t);
    }
    let list = mem.word(vm.java_thread_list)?;
    let len = u64::from(read_u32(mem, list.wrapping_add(vm.list_length))?);
    if len > MAX_THREADS {
        return Err(Miss::TooLong);
    }
    let threads = mem.word(list.wrapping_add(vm.list_threads))?;
    let mut buf = vec![0u8; len as usize * 8];
    mem.read(threads, &mut buf)?;
    for t in crate::bytes::u64s(&buf) {
        if t != 0 && is_of(mem, t)? {
            return Ok(t);
        }
    }
    Err(Miss::NoThread)
}

/// A frame walk's state: the frame's stack pointer (unextended), frame
/// pointer and pc.
#[derive(Clone, Copy, Debug)]
struct Regs {
    sp: u64,
    fp: u64,
    pc: u64,
}

/// Thread `thread`'s Java frames, by entry into Java, innermost first.
pub(crate) fn thread_frames(
    mem: &mut Counted<'_>,
    vm: &Vm,
    code: &Code,
    thread: u64,
) -> Result<Vec<Group>, Miss> {
    let base = mem.word(thread.wrapping_add(vm.thread_stack_base))?;
    let size = mem.word(thread.wrapping_add(vm.thread_stack_size))?;
    if size == 0 || size > MAX_STACK || base < size {
        return Err(Miss::Unreadable);
    }
    let stack = (base - size, base);
    let Some(mut regs) = anchor(mem, vm, thread.wrapping_add(vm.thread_anchor))? else {
        // Not in Java, or in it (running): nothing to read.
        return Err(Miss::NotWaiting);
    };
    let mut groups = vec![Group::new()];
    let mut frames = 0;
    loop {
        frames += 1;
        if frames > MAX_FRAMES {
            return Err(Miss::TooLong);
        }
        let in_stack = |a: u64| a.is_multiple_of(8) && (stack.0..stack.1).contains(&a);
        if !in_stack(regs.sp) {
            return Err(Miss::Unreadable);
        }
        let group = groups.last_mut().ok_or(Miss::Unreadable)?;
        let next = if code.in_interpreter(regs.pc) {
            interpreted(mem, regs, group, in_stack)?
        } else if regs.pc == code.call_stub_return {
            // Java was entered here: from the anchor the call saved on.
            if !in_stack(regs.fp) || regs.fp < regs.sp {
                return Err(Miss::Unreadable);
            }
            let wrapper = mem.word(regs.fp.wrapping_add_signed(vm.entry_wrapper * 8))?;
            // An entry into Java holds a Java frame.
            if group.is_empty() {
                return Err(Miss::Unreadable);
            }
            match anchor(mem, vm, wrapper.wrapping_add(vm.wrapper_anchor))? {
                None => return Ok(groups),
                Some(saved) => {
                    groups.push(Group::new());
                    saved
                }
            }
        } else if code.contains(regs.pc) {
            compiled(mem, vm, regs, group)?
        } else {
            return Err(Miss::Unreadable);
        };
        if next.sp <= regs.sp {
            return Err(Miss::Unreadable);
        }
        regs = next;
    }
}

/// The last Java frame an anchor at `at` holds, if set: its pc, when not
/// saved, is the return address below its stack pointer.
fn anchor(mem: &mut Counted<'_>, vm: &Vm, at: u64) -> Result<Option<Regs>, Miss> {
    let sp = mem.word(at.wrapping_add(vm.anchor_sp))?;
    if sp == 0 {
        return Ok(None);
    }
    let fp = mem.word(at.wrapping_add(vm.anchor_fp))?;
    let mut pc = mem.word(at.wrapping_add(vm.anchor_pc))?;
    if pc == 0 {
        pc = mem.word(sp.wrapping_sub(8))?;
    }
    Ok(Some(Regs { sp, fp, pc }))
}

/// An interpreted frame (x86-64, HotSpot 17): `Method*` at fp[-3], the
/// bytecode pointer at fp[-8], the caller's stack pointer at fp[-1], its
/// frame pointer at fp[0] and the return address at fp[1].
fn interpreted(
    mem: &mut Counted<'_>,
    regs: Regs,
    group: &mut Group,
    in_stack: impl Fn(u64) -> bool,
) -> Result<Regs, Miss> {
    let low = regs.fp.wrapping_sub(8 * 8);
    if !in_stack(regs.fp) || !in_stack(low) || regs.fp < regs.sp {
        return Err(Miss::Unreadable);
    }
    let mut buf = [0u8; 11 * 8];
    mem.read(low, &mut buf)?;
    // Word i is fp[i - 8].
    let at = |slot: i64| u64_at(&buf, ((slot + 8) * 8) as usize).unwrap_or(0);
    group.push(RawFrame {
        method: at(-3),
        pos: Pos::Bcp(at(-8)),
    });
    Ok(Regs {
        sp: at(-1),
        fp: at(0),
        pc: at(1),
    })
}

/// A compiled frame or a stub: stepped by its blob's frame size, whose
/// top two words are the return address and the caller's frame pointer.
fn compiled(mem: &mut Counted<'_>, vm: &Vm, regs: Regs, group: &mut Group) -> Result<Regs, Miss> {
    let blob = find_blob(mem, vm, regs.pc)?;
    let span = [
        vm.blob_size,
        vm.blob_frame_size,
        vm.blob_code_begin,
        vm.blob_name,
        vm.compiled_method,
        vm.compiled_scopes_data,
        vm.compiled_deopt_handler,
        vm.nmethod_metadata,
        vm.nmethod_pcs,
        vm.nmethod_dependencies,
        vm.nmethod_orig_pc,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
        + 8;
    let mut head = vec![0u8; span as usize];
    mem.read(blob, &mut head)?;
    let int = |off: u64| u32_at(&head, off as usize).map(|v| v as i32);
    let word = |off: u64| u64_at(&head, off as usize);
    let size = int(vm.blob_size).ok_or(Miss::Unreadable)?;
    if regs.pc >= blob.saturating_add(u64::try_from(size).map_err(|_| Miss::Unreadable)?) {
        return Err(Miss::Unreadable);
    }
    let words = int(vm.blob_frame_size).ok_or(Miss::Unreadable)?;
    let words = u64::try_from(words).map_err(|_| Miss::Unreadable)?;
    if words == 0 || words > MAX_FRAME_WORDS {
        // A stub without a frame of its own: it cannot be stepped.
        return Err(Miss::Unreadable);
    }
    let name = mem.word(blob.wrapping_add(vm.blob_name))?;
    match blob_kind(mem, name)? {
        Kind::Nmethod => {
            let mut pc = regs.pc;
            // A return patched for deoptimization: the pc it replaced.
            if Some(pc) == word(vm.compiled_deopt_handler) {
                let orig = int(vm.nmethod_orig_pc).ok_or(Miss::Unreadable)?;
                pc = mem.word(regs.sp.wrapping_add_signed(i64::from(orig)))?;
            }
            nmethod_frames(mem, vm, blob, &head, pc, group)?;
        }
        Kind::Native => group.push(RawFrame {
            method: word(vm.compiled_method).ok_or(Miss::Unreadable)?,
            pos: Pos::None,
        }),
        Kind::Stub => group.push(RawFrame {
            method: name,
            pos: Pos::Stub,
        }),
    }
    let caller_sp = regs.sp.checked_add(words * 8).ok_or(Miss::Unreadable)?;
    let mut top = [0u8; 16];
    mem.read(caller_sp.wrapping_sub(16), &mut top)?;
    Ok(Regs {
        sp: caller_sp,
        fp: u64_at(&top, 0).unwrap_or(0),
        pc: u64_at(&top, 8).unwrap_or(0),
    })
}

/// What a code blob runs, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Compiled Java.
    Nmethod,
    /// The compiled wrapper of a native method.
    Native,
    /// Anything else with a frame: runtime stubs, safepoint blobs, named
    /// as they are.
    Stub,
}

fn blob_kind(mem: &mut Counted<'_>, name: u64) -> Result<Kind, Miss> {
    let mut b = [0u8; 15];
    // "native nmethod\0" is the longest name told apart.
    let n = if mem.read(name, &mut b).is_ok() {
        15
    } else {
        mem.read(name, &mut b[..8])?;
        8
    };
    let text = &b[..n];
    Ok(if text.starts_with(b"nmethod\0") {
        Kind::Nmethod
    } else if text == b"native nmethod\0" {
        Kind::Native
    } else {
        Kind::Stub
    })
}

/// The code blob that holds `pc`: its heap's segment map leads back to
/// the start of the block that holds it.
fn find_blob(mem: &mut Counted<'_>, vm: &Vm, pc: u64) -> Result<u64, Miss> {
    let heaps = mem.word(vm.code_heaps)?;
    let len = u64::from(read_u32(mem, heaps.wrapping_add(vm.array_len))?);
    let data = mem.word(heaps.wrapping_add(vm.array_data))?;
    for i in 0..len.min(MAX_HEAPS) {
        let heap = mem.word(data.wrapping_add(i * 8))?;
        let memory = heap.wrapping_add(vm.heap_memory);
        let low = mem.word(memory.wrapping_add(vm.space_low))?;
        let high = mem.word(memory.wrapping_add(vm.space_high))?;
        if !(low..high).contains(&pc) {
            continue;
        }
        let segmap = mem.word(heap.wrapping_add(vm.heap_segmap).wrapping_add(vm.space_low))?;
        let log2 = read_u32(mem, heap.wrapping_add(vm.heap_log2_segment))?;
        if !(4..=16).contains(&log2) {
            return Err(Miss::Unreadable);
        }
        let mut seg = (pc - low) >> log2;
        let mut hops = 0;
        loop {
            // The map's bytes before `seg`, in one read.
            let from = seg.saturating_sub(255);
            let mut chunk = [0u8; 256];
            let n = (seg - from + 1) as usize;
            mem.read(segmap.wrapping_add(from), &mut chunk[..n])?;
            let hop = u64::from(chunk[n - 1]);
            if hop == 0xff {
                return Err(Miss::Unreadable);
            }
            if hop == 0 {
                break;
            }
            hops += 1;
            if hops > MAX_HOPS || hop > seg {
                return Err(Miss::Unreadable);
            }
            seg -= hop;
        }
        let block = low + (seg << log2);
        let mut used = [0u8; 1];
        mem.read(block.wrapping_add(vm.block_used), &mut used)?;
        if used[0] == 0 {
            return Err(Miss::Unreadable);
        }
        return block.checked_add(vm.block_size).ok_or(Miss::Unreadable);
    }
    Err(Miss::Unreadable)
}

/// The frames an nmethod's code at `pc` stands for, innermost first: its
/// scope descriptors say which methods were inlined there, and where.
/// Without one, its own method.
fn nmethod_frames(
    mem: &mut Counted<'_>,
    vm: &Vm,
    blob: u64,
    head: &[u8],
    pc: u64,
    group: &mut Group,
) -> Result<(), Miss> {
    let int = |off: u64| u32_at(head, off as usize).map(|v| u64::from(v as i32 as u32));
    let word = |off: u64| u64_at(head, off as usize).ok_or(Miss::Unreadable);
    let own = word(vm.compiled_method)?;
    let code_begin = word(vm.blob_code_begin)?;
    let (Some(pcs), Some(deps), Some(meta)) = (
        int(vm.nmethod_pcs),
        int(vm.nmethod_dependencies),
        int(vm.nmethod_metadata),
    ) else {
        return Err(Miss::Unreadable);
    };
    let scopes_begin = word(vm.compiled_scopes_data)?;
    let pcs_begin = blob.wrapping_add(pcs);
    let pcs_len = deps.saturating_sub(pcs);
    let scopes_len = pcs_begin.saturating_sub(scopes_begin);
    let offset = i32::try_from(pc.wrapping_sub(code_begin)).ok();
    let layout = PcDescLayout {
        size: vm.pc_desc_size as usize,
        pc_offset: vm.pc_desc_pc as usize,
        scope_decode_offset: vm.pc_desc_scope as usize,
    };
    let mut scopes = Vec::new();
    if let Some(offset) = offset
        && pcs_len <= MAX_PCS
        && scopes_len <= MAX_SCOPES
    {
        let mut table = vec![0u8; pcs_len as usize];
        mem.read(pcs_begin, &mut table)?;
        if let Some(decode) = scope_of_pc(&table, &layout, offset) {
            // A chain's scopes lie below the innermost one's offset, whose
            // three numbers take at most 15 bytes.
            let needed = u64::try_from(decode).unwrap_or(0).saturating_add(15);
            let mut data = vec![0u8; scopes_len.min(needed) as usize];
            mem.read(scopes_begin, &mut data)?;
            if !scope_chain(&data, decode, &mut scopes, MAX_INLINED) {
                scopes.clear();
            }
        }
    }
    if scopes.is_empty() {
        group.push(RawFrame {
            method: own,
            pos: Pos::None,
        });
        return Ok(());
    }
    for Scope {
        method_index, bci, ..
    } in scopes
    {
        let method = match method_index {
            i if i <= 0 => own,
            i => mem.word(
                blob.wrapping_add(meta)
                    .wrapping_add((i as u64 - 1).wrapping_mul(8)),
            )?,
        };
        group.push(RawFrame {
            method,
            pos: Pos::Bci(bci),
        });
    }
    Ok(())
}
