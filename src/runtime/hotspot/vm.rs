//! Where a HotSpot JVM keeps what a frame walk reads, as the JVM itself
//! says in its tables (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`): read once per process, from the process.
//!
//! The tables are the process's to forge: each is read for at most
//! [`MAX_ENTRIES`] entries of a stride of at most [`MAX_STRIDE`] bytes,
//! names are compared as at most [`MAX_NAME`] bytes, and a table that
//! lacks any entry the walk needs, or that says another major version
//! than 17 or another frame layout, is refused as a whole.

use std::collections::HashMap;

use super::image::{Image, SYMBOLS, Sym};
use crate::bytes::u64_at;
use crate::runtime::memory::{Counted, Miss};

const MAX_ENTRIES: usize = 4096;
const MAX_STRIDE: u64 = 256;
const MAX_NAME: usize = 80;
/// Reads made to read the tables.
pub(super) const TABLE_READS: usize = 3 * MAX_ENTRIES + 4096;

/// The offsets, sizes, addresses and constants a walk uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Vm {
    // Statics: where the variable is in the process.
    pub(super) java_thread_list: u64,
    pub(super) code_heaps: u64,
    pub(super) code_low: u64,
    pub(super) code_high: u64,
    pub(super) interpreter_code: u64,
    pub(super) call_stub_return: u64,
    // Threads.
    pub(super) list_length: u64,
    pub(super) list_threads: u64,
    pub(super) thread_osthread: u64,
    pub(super) thread_terminated: u64,
    /// What `thread_terminated` holds in a thread that lives.
    pub(super) not_terminated: u32,
    pub(super) osthread_tid: u64,
    pub(super) thread_anchor: u64,
    pub(super) thread_stack_base: u64,
    pub(super) thread_stack_size: u64,
    pub(super) anchor_sp: u64,
    pub(super) anchor_pc: u64,
    pub(super) anchor_fp: u64,
    pub(super) wrapper_anchor: u64,
    // The code cache.
    pub(super) queue_buffer: u64,
    pub(super) queue_limit: u64,
    pub(super) array_len: u64,
    pub(super) array_data: u64,
    pub(super) heap_memory: u64,
    pub(super) heap_segmap: u64,
    pub(super) heap_log2_segment: u64,
    pub(super) space_low: u64,
    pub(super) space_high: u64,
    pub(super) block_used: u64,
    pub(super) block_size: u64,
    pub(super) blob_size: u64,
    pub(super) blob_frame_size: u64,
    pub(super) blob_code_begin: u64,
    pub(super) blob_name: u64,
    pub(super) compiled_method: u64,
    pub(super) compiled_scopes_data: u64,
    pub(super) compiled_deopt_handler: u64,
    pub(super) nmethod_metadata: u64,
    pub(super) nmethod_pcs: u64,
    pub(super) nmethod_dependencies: u64,
    pub(super) nmethod_orig_pc: u64,
    pub(super) pc_desc_size: u64,
    pub(super) pc_desc_pc: u64,
    pub(super) pc_desc_scope: u64,
    // Methods and their names.
    pub(super) method_const: u64,
    pub(super) const_size: u64,
    pub(super) const_constants: u64,
    pub(super) const_name_index: u64,
    pub(super) const_code_size: u64,
    pub(super) const_flags: u64,
    pub(super) const_has_lines: u64,
    pub(super) pool_size: u64,
    pub(super) pool_holder: u64,
    pub(super) pool_length: u64,
    pub(super) pool_source_file: u64,
    pub(super) klass_name: u64,
    pub(super) klass_constants: u64,
    pub(super) symbol_length: u64,
    pub(super) symbol_body: u64,
    // Frames, in words from fp.
    pub(super) entry_wrapper: i64,
}

/// A struct field: `(type, field)`, and whether it is static.
type Field = (&'static str, &'static str);

/// The fields read, by where they go.
const STATICS: [Field; 7] = [
    ("ThreadsSMRSupport", "_java_thread_list"),
    ("CodeCache", "_heaps"),
    ("CodeCache", "_low_bound"),
    ("CodeCache", "_high_bound"),
    ("AbstractInterpreter", "_code"),
    ("StubRoutines", "_call_stub_return_address"),
    ("Abstract_VM_Version", "_vm_major_version"),
];

const FIELDS: [Field; 51] = [
    ("ThreadsList", "_length"),
    ("ThreadsList", "_threads"),
    ("JavaThread", "_osthread"),
    ("JavaThread", "_terminated"),
    ("OSThread", "_thread_id"),
    ("JavaThread", "_anchor"),
    ("JavaThread", "_stack_base"),
    ("JavaThread", "_stack_size"),
    ("JavaFrameAnchor", "_last_Java_sp"),
    ("JavaFrameAnchor", "_last_Java_pc"),
    ("JavaFrameAnchor", "_last_Java_fp"),
    ("JavaCallWrapper", "_anchor"),
    ("StubQueue", "_stub_buffer"),
    ("StubQueue", "_buffer_limit"),
    ("GrowableArrayBase", "_len"),
    ("GrowableArray<int>", "_data"),
    ("CodeHeap", "_memory"),
    ("CodeHeap", "_segmap"),
    ("CodeHeap", "_log2_segment_size"),
    ("VirtualSpace", "_low"),
    ("VirtualSpace", "_high"),
    ("HeapBlock::Header", "_used"),
    ("CodeBlob", "_size"),
    ("CodeBlob", "_frame_size"),
    ("CodeBlob", "_code_begin"),
    ("CodeBlob", "_name"),
    ("CompiledMethod", "_method"),
    ("CompiledMethod", "_scopes_data_begin"),
    ("CompiledMethod", "_deopt_handler_begin"),
    ("nmethod", "_metadata_offset"),
    ("nmethod", "_scopes_pcs_offset"),
    ("nmethod", "_dependencies_offset"),
    ("nmethod", "_orig_pc_offset"),
    ("PcDesc", "_pc_offset"),
    ("PcDesc", "_scope_decode_offset"),
    ("Method", "_constMethod"),
    ("ConstMethod", "_constants"),
    ("ConstMethod", "_name_index"),
    ("ConstMethod", "_code_size"),
    ("ConstMethod", "_flags"),
    ("ConstantPool", "_pool_holder"),
    ("ConstantPool", "_length"),
    ("ConstantPool", "_source_file_name_index"),
    ("Klass", "_name"),
    ("InstanceKlass", "_constants"),
    ("Symbol", "_length"),
    ("Symbol", "_body"),
    // Read for their presence: the walk relies on what they say of the
    // layout (see `Vm::read`).
    ("JavaThread", "_thread_state"),
    ("Method", "_access_flags"),
    ("ConstMethod", "_max_stack"),
    ("ConstantPool", "_tags"),
];

const TYPES: [&str; 4] = ["HeapBlock", "PcDesc", "ConstMethod", "ConstantPool"];

const INTS: [&str; 5] = [
    "JavaThread::_not_terminated",
    "frame::interpreter_frame_sender_sp_offset",
    "frame::interpreter_frame_last_sp_offset",
    "frame::entry_frame_call_wrapper_offset",
    "ConstMethod::_has_linenumber_table",
];

/// What one table's entries hold, and where.
struct Table {
    at: u64,
    stride: u64,
    /// Offsets of the fields read in each entry.
    fields: Vec<u64>,
}

impl Vm {
    /// Reads the tables of the JVM whose `libjvm.so` (`image`) is loaded
    /// `bias` up in the process `mem` reads.
    pub(crate) fn read(mem: &mut Counted<'_>, image: &Image, bias: u64) -> Result<Vm, Miss> {
        let sym = |i: usize| image.symbols[i].wrapping_add(bias);
        let table = |mem: &mut Counted<'_>, first: Sym, fields: usize| -> Result<Table, Miss> {
            let first = first as usize;
            let at = mem.word(sym(first))?;
            let stride = mem.word(sym(first + 1))?;
            let mut offs = Vec::with_capacity(fields);
            for i in 0..fields {
                offs.push(mem.word(sym(first + 2 + i))?);
            }
            if at == 0
                || stride == 0
                || stride > MAX_STRIDE
                || offs.iter().any(|&o| o.saturating_add(8) > stride)
            {
                return Err(Miss::Unreadable);
            }
            Ok(Table {
                at,
                stride,
                fields: offs,
            })
        };
        debug_assert_eq!(SYMBOLS.len(), 15);
        let structs = table(mem, Sym::Structs, 5)?;
        let types = table(mem, Sym::Types, 2)?;
        let ints = table(mem, Sym::Ints, 2)?;
        let mut names = Names::default();
        let mut fields: HashMap<Field, u64> = HashMap::new();
        let mut statics: HashMap<Field, u64> = HashMap::new();
        each_entry(mem, &structs, |mem, e| {
            let [ty, field, is_static, offset, address] = [0, 1, 2, 3, 4].map(|i| e[i]);
            if ty == 0 {
                return Ok(false);
            }
            let Some(ty) = names.wanted(mem, ty, |n| {
                FIELDS.iter().chain(&STATICS).any(|(t, _)| *t == n)
            })?
            else {
                return Ok(true);
            };
            let Some(field) = names.wanted(mem, field, |n| {
                FIELDS.iter().chain(&STATICS).any(|f| *f == (ty, n))
            })?
            else {
                return Ok(true);
            };
            let Some(key) = FIELDS.iter().chain(&STATICS).find(|f| **f == (ty, field)) else {
                return Ok(true);
            };
            match is_static as u32 {
                0 => fields.insert(*key, offset),
                _ => statics.insert(*key, address),
            };
            Ok(true)
        })?;
        let mut sizes: HashMap<&'static str, u64> = HashMap::new();
        each_entry(mem, &types, |mem, e| {
            if e[0] == 0 {
                return Ok(false);
            }
            if let Some(ty) = names.wanted(mem, e[0], |n| TYPES.contains(&n))? {
                sizes.insert(ty, e[1]);
            }
            Ok(true)
        })?;
        let mut constants: HashMap<&'static str, i64> = HashMap::new();
        each_entry(mem, &ints, |mem, e| {
            if e[0] == 0 {
                return Ok(false);
            }
            if let Some(name) = names.wanted(mem, e[0], |n| INTS.contains(&n))? {
                // The value is a 32-bit int.
                constants.insert(name, i64::from(e[1] as u32 as i32));
            }
            Ok(true)
        })?;
        let found = Found {
            fields,
            statics,
            sizes,
            constants,
        };
        Vm::build(mem, &found)
    }

    /// Checks what the tables said, and puts it in place.
    fn build(mem: &mut Counted<'_>, found: &Found) -> Result<Vm, Miss> {
        let missing = Miss::Unreadable;
        let f = |ty, name| found.field(ty, name);
        let s = |ty, name| found.address(ty, name);
        let size = |ty| found.size(ty);
        let int = |name| found.int(name);
        for (ty, name) in FIELDS {
            f(ty, name)?;
        }
        // The frame layout the walk assumes (the method and bytecode slots
        // are not in the tables): HotSpot 17's on x86-64.
        let mut major = [0u8; 4];
        mem.read(s("Abstract_VM_Version", "_vm_major_version")?, &mut major)?;
        if u32::from_ne_bytes(major) != 17
            || int("frame::interpreter_frame_sender_sp_offset")? != -1
            || int("frame::interpreter_frame_last_sp_offset")? != -2
        {
            return Err(missing);
        }
        let entry_wrapper = int("frame::entry_frame_call_wrapper_offset")?;
        if !(-16..0).contains(&entry_wrapper) {
            return Err(missing);
        }
        let has_lines = int("ConstMethod::_has_linenumber_table")?;
        Ok(Vm {
            java_thread_list: s("ThreadsSMRSupport", "_java_thread_list")?,
            code_heaps: s("CodeCache", "_heaps")?,
            code_low: s("CodeCache", "_low_bound")?,
            code_high: s("CodeCache", "_high_bound")?,
            interpreter_code: s("AbstractInterpreter", "_code")?,
            call_stub_return: s("StubRoutines", "_call_stub_return_address")?,
            list_length: f("ThreadsList", "_length")?,
            list_threads: f("ThreadsList", "_threads")?,
            thread_osthread: f("JavaThread", "_osthread")?,
            thread_terminated: f("JavaThread", "_terminated")?,
            not_terminated: u32::try_from(int("JavaThread::_not_terminated")?)
                .map_err(|_| missing)?,
            osthread_tid: f("OSThread", "_thread_id")?,
            thread_anchor: f("JavaThread", "_anchor")?,
            thread_stack_base: f("JavaThread", "_stack_base")?,
            thread_stack_size: f("JavaThread", "_stack_size")?,
            anchor_sp: f("JavaFrameAnchor", "_last_Java_sp")?,
            anchor_pc: f("JavaFrameAnchor", "_last_Java_pc")?,
            anchor_fp: f("JavaFrameAnchor", "_last_Java_fp")?,
            wrapper_anchor: f("JavaCallWrapper", "_anchor")?,
            queue_buffer: f("StubQueue", "_stub_buffer")?,
            queue_limit: f("StubQueue", "_buffer_limit")?,
            array_len: f("GrowableArrayBase", "_len")?,
            array_data: f("GrowableArray<int>", "_data")?,
            heap_memory: f("CodeHeap", "_memory")?,
            heap_segmap: f("CodeHeap", "_segmap")?,
            heap_log2_segment: f("CodeHeap", "_log2_segment_size")?,
            space_low: f("VirtualSpace", "_low")?,
            space_high: f("VirtualSpace", "_high")?,
            block_used: f("HeapBlock::Header", "_used")?,
            block_size: size("HeapBlock")?,
            blob_size: f("CodeBlob", "_size")?,
            blob_frame_size: f("CodeBlob", "_frame_size")?,
            blob_code_begin: f("CodeBlob", "_code_begin")?,
            blob_name: f("CodeBlob", "_name")?,
            compiled_method: f("CompiledMethod", "_method")?,
            compiled_scopes_data: f("CompiledMethod", "_scopes_data_begin")?,
            compiled_deopt_handler: f("CompiledMethod", "_deopt_handler_begin")?,
            nmethod_metadata: f("nmethod", "_metadata_offset")?,
            nmethod_pcs: f("nmethod", "_scopes_pcs_offset")?,
            nmethod_dependencies: f("nmethod", "_dependencies_offset")?,
            nmethod_orig_pc: f("nmethod", "_orig_pc_offset")?,
            pc_desc_size: size("PcDesc")?,
            pc_desc_pc: f("PcDesc", "_pc_offset")?,
            pc_desc_scope: f("PcDesc", "_scope_decode_offset")?,
            method_const: f("Method", "_constMethod")?,
            const_size: size("ConstMethod")?,
            const_constants: f("ConstMethod", "_constants")?,
            const_name_index: f("ConstMethod", "_name_index")?,
            const_code_size: f("ConstMethod", "_code_size")?,
            const_flags: f("ConstMethod", "_flags")?,
            const_has_lines: u64::try_from(has_lines).map_err(|_| missing)?,
            pool_size: size("ConstantPool")?,
            pool_holder: f("ConstantPool", "_pool_holder")?,
            pool_length: f("ConstantPool", "_length")?,
            pool_source_file: f("ConstantPool", "_source_file_name_index")?,
            klass_name: f("Klass", "_name")?,
            klass_constants: f("InstanceKlass", "_constants")?,
            symbol_length: f("Symbol", "_length")?,
            symbol_body: f("Symbol", "_body")?,
            entry_wrapper,
        })
    }
}

/// What the tables held of what the walk uses.
struct Found {
    fields: HashMap<Field, u64>,
    statics: HashMap<Field, u64>,
    sizes: HashMap<&'static str, u64>,
    constants: HashMap<&'static str, i64>,
}

impl Found {
    /// A field's offset: past 4 KiB it is no field of these structures.
    fn field(&self, ty: &'static str, name: &'static str) -> Result<u64, Miss> {
        let offset = self.fields.get(&(ty, name)).copied();
        offset.filter(|&o| o < 4096).ok_or(Miss::Unreadable)
    }

    /// A static variable's address.
    fn address(&self, ty: &'static str, name: &'static str) -> Result<u64, Miss> {
        let at = self.statics.get(&(ty, name)).copied();
        at.filter(|&a| a != 0).ok_or(Miss::Unreadable)
    }

    fn size(&self, ty: &str) -> Result<u64, Miss> {
        let size = self.sizes.get(ty).copied();
        size.filter(|&n| n > 0 && n < 4096).ok_or(Miss::Unreadable)
    }

    fn int(&self, name: &str) -> Result<i64, Miss> {
        self.constants.get(name).copied().ok_or(Miss::Unreadable)
    }
}

/// Calls `each` with the fields of each entry of `table` (as words; the
/// caller narrows them) until it returns false, for at most
/// [`MAX_ENTRIES`] entries: a table with no end is refused. Entries are
/// read as many at a time as lie whole in one page.
fn each_entry(
    mem: &mut Counted<'_>,
    table: &Table,
    mut each: impl FnMut(&mut Counted<'_>, &[u64]) -> Result<bool, Miss>,
) -> Result<(), Miss> {
    let stride = table.stride as usize;
    let mut chunk = vec![0u8; PAGE.max(stride)];
    let (mut from, mut len) = (0u64, 0usize);
    let mut words = vec![0u64; table.fields.len()];
    for i in 0..MAX_ENTRIES as u64 {
        let at = table
            .at
            .checked_add(i * table.stride)
            .ok_or(Miss::Unreadable)?;
        if at < from || at.saturating_add(table.stride) > from.saturating_add(len as u64) {
            let in_page = PAGE - (at % PAGE as u64) as usize;
            len = (in_page / stride).max(1) * stride;
            mem.read(at, &mut chunk[..len])?;
            from = at;
        }
        let entry = &chunk[(at - from) as usize..][..stride];
        for (w, &off) in words.iter_mut().zip(&table.fields) {
            *w = u64_at(entry, off as usize).ok_or(Miss::Unreadable)?;
        }
        if !each(mem, &words)? {
            return Ok(());
        }
    }
    Err(Miss::TooLong)
}

/// Reads are cut at page boundaries, past which memory may be unmapped.
const PAGE: usize = 4096;

/// Names read from the process, by address: the tables point at the
/// same string for every field of a type.
#[derive(Default)]
struct Names {
    read: HashMap<u64, Option<&'static str>>,
}

impl Names {
    /// The name at `addr`, if `wanted` says it is one of the names the
    /// walk uses (which are `'static`), read at most [`MAX_NAME`] bytes.
    fn wanted(
        &mut self,
        mem: &mut Counted<'_>,
        addr: u64,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Option<&'static str>, Miss> {
        if let Some(&known) = self.read.get(&addr) {
            return Ok(known.filter(|n| wanted(n)));
        }
        let name = c_string(mem, addr)?;
        let known = KNOWN.iter().copied().find(|k| Some(*k) == name.as_deref());
        if self.read.len() < MAX_ENTRIES {
            self.read.insert(addr, known);
        }
        Ok(known.filter(|n| wanted(n)))
    }
}

/// Every name the walk looks up, as `'static` strings.
static KNOWN: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let mut v: Vec<&'static str> = Vec::new();
    for (t, f) in FIELDS.iter().chain(&STATICS) {
        v.push(t);
        v.push(f);
    }
    v.extend(TYPES);
    v.extend(INTS);
    v.sort_unstable();
    v.dedup();
    v
});

/// The NUL-terminated string at `addr`, if it ends within [`MAX_NAME`]
/// bytes (`None` for a longer one: no name the walk uses is that long).
/// Read up to a page boundary at a time, so that a string near the end
/// of a mapping is read.
fn c_string(mem: &mut Counted<'_>, addr: u64) -> Result<Option<String>, Miss> {
    let mut out = Vec::new();
    let mut piece = [0u8; MAX_NAME + 1];
    while out.len() <= MAX_NAME {
        let at = addr.checked_add(out.len() as u64).ok_or(Miss::Unreadable)?;
        let in_page = PAGE - (at % PAGE as u64) as usize;
        let len = in_page.min(MAX_NAME + 1 - out.len());
        mem.read(at, &mut piece[..len])?;
        if let Some(end) = piece[..len].iter().position(|&b| b == 0) {
            out.extend_from_slice(&piece[..end]);
            return Ok(String::from_utf8(out).ok());
        }
        out.extend_from_slice(&piece[..len]);
    }
    Ok(None)
}
