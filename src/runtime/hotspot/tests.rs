//! Walks of forged JVM memory: the tables, threads, frames and names
//! a reader follows, and what it refuses.
//!
//! The fake process is laid out as HotSpot 17.0.15 on x86-64 lays out
//! its own (`notes/hotspot17.md`, `notes/hotspot17-ref/`): the tables
//! with their real strides and field offsets, the structures at the
//! offsets those tables give.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::image::Image;
use super::method::{method_key, read_method};
use super::vm::{TABLE_READS, Vm};
use super::walk::{Code, Group, Pos, RawFrame, java_thread, thread_frames};
use super::{Jvms, Process, frame_names};
use crate::runtime::memory::{Counted, Memory, Miss};

// ---------------------------------------------------------------------
// Fake process memory.

/// A process's memory: regions of bytes, the rest unmapped. A read that
/// touches an unmapped byte fails; reads are counted.
#[derive(Default)]
struct Fake {
    regions: BTreeMap<u64, Vec<u8>>,
    reads: usize,
    /// Where [`Fake::alloc`] puts the next region.
    next: u64,
}

/// Where [`Fake::alloc`] starts: metaspace and the C heap.
const METASPACE: u64 = 0x8_0000_0000;

impl Fake {
    /// Writes `bytes` over mapped bytes, or maps them where nothing is.
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let end = addr + bytes.len() as u64;
        if let Some((&start, region)) = self.regions.range_mut(..=addr).next_back() {
            let from = (addr - start) as usize;
            if let Some(dst) = region.get_mut(from..from + bytes.len()) {
                dst.copy_from_slice(bytes);
                return;
            }
            assert!(
                from >= region.len() || start == addr,
                "{addr:#x} straddles {start:#x}"
            );
        }
        if let Some((&next, _)) = self.regions.range(addr + 1..).next() {
            assert!(next >= end, "{addr:#x} overlaps {next:#x}");
        }
        // A region that starts here grows (or is replaced).
        self.regions.insert(addr, bytes.to_vec());
    }

    fn put_u64(&mut self, addr: u64, value: u64) {
        self.put(addr, &value.to_le_bytes());
    }

    fn put_u32(&mut self, addr: u64, value: u32) {
        self.put(addr, &value.to_le_bytes());
    }

    fn put_u16(&mut self, addr: u64, value: u16) {
        self.put(addr, &value.to_le_bytes());
    }

    /// Maps `len` zero bytes at `addr`.
    fn map(&mut self, addr: u64, len: usize) {
        self.put(addr, &vec![0; len]);
    }

    /// Maps `len` zero bytes somewhere, with unmapped bytes after them.
    fn alloc(&mut self, len: usize) -> u64 {
        let at = self.next.max(METASPACE);
        self.map(at, len);
        self.next = at + (len as u64).next_multiple_of(16) + 0x100;
        at
    }

    /// Maps `len` zero bytes from a page's start, the page after them
    /// unmapped.
    fn alloc_pages(&mut self, len: usize) -> u64 {
        let at = self.next.max(METASPACE).next_multiple_of(PAGE as u64);
        self.map(at, len);
        self.next = at + (len.next_multiple_of(PAGE) + PAGE) as u64;
        at
    }
}

impl Memory for Fake {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        let mut done = 0;
        while done < buf.len() {
            let at = addr + done as u64;
            let Some((&start, region)) = self.regions.range(..=at).next_back() else {
                return false;
            };
            let src = region.get((at - start) as usize..).unwrap_or(&[]);
            if src.is_empty() {
                return false;
            }
            let n = src.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
        true
    }
}

// ---------------------------------------------------------------------
// Where things are in the fake process.

/// Where `libjvm.so` is loaded: its file address 0.
const BIAS: u64 = 0x7f00_0000_0000;
/// File address of the first of the 15 exported variables (`Image`'s
/// order), each 8 bytes after the one before.
const SYMBOLS_AT: u64 = 0x136_6800;
/// Pages of the tables (each table ends where its last page does), and
/// of the strings their entries name (libjvm's data).
const STRUCTS_AT: u64 = BIAS + 0x140_0000;
const TYPES_AT: u64 = BIAS + 0x150_0000;
const INTS_AT: u64 = BIAS + 0x160_0000;
const STRINGS_AT: u64 = BIAS + 0x170_0000;
const PAGE: usize = 4096;

// The statics the tables point at.
const JAVA_THREAD_LIST: u64 = BIAS + 0x12f_78e8;
const CODE_CACHE_HEAPS: u64 = BIAS + 0x131_c600;
const CODE_CACHE_LOW_BOUND: u64 = BIAS + 0x131_c620;
const CODE_CACHE_HIGH_BOUND: u64 = BIAS + 0x131_c618;
const ABSTRACT_INTERPRETER_CODE: u64 = BIAS + 0x131_15e8;
const CALL_STUB_RETURN_ADDRESS: u64 = BIAS + 0x134_74d0;
const VM_MAJOR_VERSION: u64 = BIAS + 0x12d_d020;

// Threads.
const THREADS_LIST: u64 = 0x1000_0000;
const THREADS_ARRAY: u64 = 0x1000_1000;
const TID: u32 = 4242;
/// The thread walked, and others.
const THREAD: u64 = 0x1100_0000;
const fn thread_at(i: u64) -> u64 {
    THREAD + 0x1000 * i
}
/// `sizeof(JavaThread)`, near enough: past `_terminated` (+864).
const JAVA_THREAD_SIZE: usize = 0x370;
/// HotSpot's `JavaThread::_not_terminated` and `_thread_terminated`.
const NOT_TERMINATED: u32 = 0xDEAB;
const THREAD_TERMINATED: u32 = 0xDEAD;

// The thread's stack: [STACK_LOW, STACK_BASE).
const STACK_LOW: u64 = 0x2000_0000;
const STACK_SIZE: u64 = 0x10_0000;
const STACK_BASE: u64 = STACK_LOW + STACK_SIZE;

// The code cache: the interpreter, then a code heap of 64-byte segments.
const CODE_LOW: u64 = 0x3000_0000;
const CODE_HIGH: u64 = 0x3100_0000;
const INTERPRETER_LOW: u64 = CODE_LOW;
const INTERPRETER_SIZE: u32 = 0x1_0000;
/// A return address in the interpreter.
const INTERPRETER_PC: u64 = INTERPRETER_LOW + 0x1234;
/// `*StubRoutines::_call_stub_return_address`.
const CALL_STUB_PC: u64 = CODE_LOW + 0x2_0040;
const HEAP_LOW: u64 = 0x3080_0000;
const HEAP_HIGH: u64 = 0x3090_0000;
const LOG2_SEGMENT_SIZE: u32 = 6;
const SEGMENTS: usize = ((HEAP_HIGH - HEAP_LOW) >> LOG2_SEGMENT_SIZE) as usize;
const SEGMAP: u64 = 0x3800_0000;
/// `CodeHeap::free_sentinel`.
const FREE_SENTINEL: u8 = 0xFF;
const STUB_QUEUE: u64 = 0x3f00_0000;
const HEAPS_ARRAY: u64 = 0x3f00_1000;
const HEAPS_DATA: u64 = 0x3f00_2000;
const CODE_HEAP: u64 = 0x3f00_3000;

/// The walk's bound on frames (`walk::MAX_FRAMES`).
const MAX_FRAMES: usize = 512;
/// Reads a walk may make, as `frame_names` allows.
const WALK_READS: usize = 8192;

/// HotSpot 17.0.15's layout, with this fake process's statics.
fn vm17() -> Vm {
    Vm {
        java_thread_list: JAVA_THREAD_LIST,
        code_heaps: CODE_CACHE_HEAPS,
        code_low: CODE_CACHE_LOW_BOUND,
        code_high: CODE_CACHE_HIGH_BOUND,
        interpreter_code: ABSTRACT_INTERPRETER_CODE,
        call_stub_return: CALL_STUB_RETURN_ADDRESS,
        list_length: 4,
        list_threads: 16,
        thread_osthread: 560,
        thread_terminated: 864,
        not_terminated: NOT_TERMINATED,
        osthread_tid: 208,
        thread_anchor: 656,
        thread_stack_base: 592,
        thread_stack_size: 600,
        anchor_sp: 0,
        anchor_pc: 8,
        anchor_fp: 16,
        wrapper_anchor: 32,
        queue_buffer: 8,
        queue_limit: 20,
        array_len: 0,
        array_data: 8,
        heap_memory: 8,
        heap_segmap: 120,
        heap_log2_segment: 256,
        space_low: 16,
        space_high: 24,
        block_used: 8,
        block_size: 16,
        blob_size: 12,
        blob_frame_size: 28,
        blob_code_begin: 32,
        blob_name: 96,
        compiled_method: 112,
        compiled_scopes_data: 120,
        compiled_deopt_handler: 128,
        nmethod_metadata: 260,
        nmethod_pcs: 268,
        nmethod_dependencies: 272,
        nmethod_orig_pc: 300,
        pc_desc_size: 16,
        pc_desc_pc: 0,
        pc_desc_scope: 4,
        method_const: 8,
        const_size: 48,
        const_constants: 8,
        const_name_index: 34,
        const_code_size: 32,
        const_flags: 28,
        const_has_lines: 1,
        pool_size: 72,
        pool_holder: 24,
        pool_length: 60,
        pool_source_file: 54,
        klass_name: 24,
        klass_constants: 232,
        symbol_length: 4,
        symbol_body: 6,
        entry_wrapper: -6,
    }
}

// ---------------------------------------------------------------------
// The tables: gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants.

/// The non-static fields the reader needs, at 17.0.15's offsets
/// (`vmstructs-17.0.15.txt`).
const FIELDS17: [(&str, &str, u64); 51] = [
    ("ThreadsList", "_length", 4),
    ("ThreadsList", "_threads", 16),
    ("JavaThread", "_osthread", 560),
    ("JavaThread", "_terminated", 864),
    ("OSThread", "_thread_id", 208),
    ("JavaThread", "_anchor", 656),
    ("JavaThread", "_stack_base", 592),
    ("JavaThread", "_stack_size", 600),
    ("JavaFrameAnchor", "_last_Java_sp", 0),
    ("JavaFrameAnchor", "_last_Java_pc", 8),
    ("JavaFrameAnchor", "_last_Java_fp", 16),
    ("JavaCallWrapper", "_anchor", 32),
    ("StubQueue", "_stub_buffer", 8),
    ("StubQueue", "_buffer_limit", 20),
    ("GrowableArrayBase", "_len", 0),
    ("GrowableArray<int>", "_data", 8),
    ("CodeHeap", "_memory", 8),
    ("CodeHeap", "_segmap", 120),
    ("CodeHeap", "_log2_segment_size", 256),
    ("VirtualSpace", "_low", 16),
    ("VirtualSpace", "_high", 24),
    ("HeapBlock::Header", "_used", 8),
    ("CodeBlob", "_size", 12),
    ("CodeBlob", "_frame_size", 28),
    ("CodeBlob", "_code_begin", 32),
    ("CodeBlob", "_name", 96),
    ("CompiledMethod", "_method", 112),
    ("CompiledMethod", "_scopes_data_begin", 120),
    ("CompiledMethod", "_deopt_handler_begin", 128),
    ("nmethod", "_metadata_offset", 260),
    ("nmethod", "_scopes_pcs_offset", 268),
    ("nmethod", "_dependencies_offset", 272),
    ("nmethod", "_orig_pc_offset", 300),
    ("PcDesc", "_pc_offset", 0),
    ("PcDesc", "_scope_decode_offset", 4),
    ("Method", "_constMethod", 8),
    ("ConstMethod", "_constants", 8),
    ("ConstMethod", "_name_index", 34),
    ("ConstMethod", "_code_size", 32),
    ("ConstMethod", "_flags", 28),
    ("ConstantPool", "_pool_holder", 24),
    ("ConstantPool", "_length", 60),
    ("ConstantPool", "_source_file_name_index", 54),
    ("Klass", "_name", 24),
    ("InstanceKlass", "_constants", 232),
    ("Symbol", "_length", 4),
    ("Symbol", "_body", 6),
    ("JavaThread", "_thread_state", 824),
    ("Method", "_access_flags", 40),
    ("ConstMethod", "_max_stack", 40),
    ("ConstantPool", "_tags", 8),
];

/// The static fields the reader needs, where this process has them.
const STATICS17: [(&str, &str, u64); 7] = [
    ("ThreadsSMRSupport", "_java_thread_list", JAVA_THREAD_LIST),
    ("CodeCache", "_heaps", CODE_CACHE_HEAPS),
    ("CodeCache", "_low_bound", CODE_CACHE_LOW_BOUND),
    ("CodeCache", "_high_bound", CODE_CACHE_HIGH_BOUND),
    ("AbstractInterpreter", "_code", ABSTRACT_INTERPRETER_CODE),
    (
        "StubRoutines",
        "_call_stub_return_address",
        CALL_STUB_RETURN_ADDRESS,
    ),
    ("Abstract_VM_Version", "_vm_major_version", VM_MAJOR_VERSION),
];

const TYPES17: [(&str, u64); 4] = [
    ("HeapBlock", 16),
    ("PcDesc", 16),
    ("ConstMethod", 48),
    ("ConstantPool", 72),
];

const INTS17: [(&str, i32); 5] = [
    ("JavaThread::_not_terminated", 57003),
    ("frame::interpreter_frame_sender_sp_offset", -1),
    ("frame::interpreter_frame_last_sp_offset", -2),
    ("frame::entry_frame_call_wrapper_offset", -6),
    ("ConstMethod::_has_linenumber_table", 1),
];

/// One `VMStructEntry`: type, field, and the static's address or the
/// field's offset.
#[derive(Clone, Copy)]
struct StructEntry {
    ty: &'static str,
    field: &'static str,
    is_static: bool,
    value: u64,
}

/// The three tables as a JVM publishes them, and the variables that
/// describe them (the 15 of `image::SYMBOLS`, in order).
struct Tables {
    structs: Vec<StructEntry>,
    types: Vec<(&'static str, u64)>,
    ints: Vec<(&'static str, i32)>,
    /// `VMStructEntry`'s layout: stride, then the offsets of typeName,
    /// fieldName, isStatic, offset, address.
    struct_layout: [u64; 6],
    /// `VMTypeEntry`'s: stride, typeName, size.
    type_layout: [u64; 3],
    /// `VMIntConstantEntry`'s: stride, name, value.
    int_layout: [u64; 3],
    /// Whether each table ends with an empty entry.
    terminated: bool,
    /// `Abstract_VM_Version::_vm_major_version`.
    major: u32,
}

/// The entries of 17.0.15's tables the reader reads, among others it
/// must pass over.
fn tables17() -> Tables {
    let field = |(ty, field, value)| StructEntry {
        ty,
        field,
        is_static: false,
        value,
    };
    let stat = |(ty, field, value)| StructEntry {
        ty,
        field,
        is_static: true,
        value,
    };
    let mut structs = vec![
        field(("EpsilonHeap", "_space", 312)),
        field(("JavaThread", "_vframe_array_head", 712)),
        stat(("HeapRegion", "GrainBytes", BIAS + 0x132_9730)),
    ];
    structs.extend(FIELDS17.map(field));
    structs.extend(STATICS17.map(stat));
    let mut types = vec![("CodeBlob", 104)];
    types.extend(TYPES17);
    let mut ints = vec![("JavaThread::_thread_exiting", 57004)];
    ints.extend(INTS17);
    Tables {
        structs,
        types,
        ints,
        struct_layout: [48, 0, 8, 24, 32, 40],
        type_layout: [40, 0, 32],
        int_layout: [16, 0, 8],
        terminated: true,
        major: 17,
    }
}

/// The names of the entries, each once, as a compiler lays out string
/// literals: every entry of a type points at the same string.
#[derive(Default)]
struct Strings {
    bytes: Vec<u8>,
    at: HashMap<&'static str, u64>,
}

impl Strings {
    fn of(&mut self, s: &'static str) -> u64 {
        *self.at.entry(s).or_insert_with(|| {
            let at = STRINGS_AT + self.bytes.len() as u64;
            self.bytes.extend(s.as_bytes());
            self.bytes.push(0);
            at
        })
    }
}

/// An entry of `stride` bytes, its unread bytes junk (padding included).
fn entry(stride: u64, fields: &[(u64, u64, usize)]) -> Vec<u8> {
    let mut e = vec![0xA5; stride as usize];
    for &(off, value, size) in fields {
        e[off as usize..off as usize + size].copy_from_slice(&value.to_le_bytes()[..size]);
    }
    e
}

/// Maps `bytes` so that they end where a page ends, in the pages from
/// `pages` on: the reader must not read past them.
fn put_page_end(m: &mut Fake, pages: u64, bytes: &[u8]) -> u64 {
    let at = pages + (bytes.len().next_multiple_of(PAGE) - bytes.len()) as u64;
    m.put(at, bytes);
    at
}

impl Tables {
    /// Maps the tables; returns where the struct, type and int tables are.
    fn install(&self, m: &mut Fake) -> [u64; 3] {
        let mut strings = Strings::default();
        let [stride, ty, field, is_static, offset, address] = self.struct_layout;
        let mut structs = Vec::new();
        for e in &self.structs {
            let (off, addr) = match e.is_static {
                true => (0xA5A5, e.value),
                false => (e.value, 0xA5A5),
            };
            structs.extend(entry(
                stride,
                &[
                    (ty, strings.of(e.ty), 8),
                    (field, strings.of(e.field), 8),
                    (is_static, u64::from(e.is_static), 4),
                    (offset, off, 8),
                    (address, addr, 8),
                ],
            ));
        }
        let [t_stride, t_name, t_size] = self.type_layout;
        let mut types = Vec::new();
        for &(name, size) in &self.types {
            types.extend(entry(
                t_stride,
                &[(t_name, strings.of(name), 8), (t_size, size, 8)],
            ));
        }
        let [i_stride, i_name, i_value] = self.int_layout;
        let mut ints = Vec::new();
        for &(name, value) in &self.ints {
            let value = u64::from(value as u32);
            ints.extend(entry(
                i_stride,
                &[(i_name, strings.of(name), 8), (i_value, value, 4)],
            ));
        }
        if self.terminated {
            structs.extend(vec![0; stride as usize]);
            types.extend(vec![0; t_stride as usize]);
            ints.extend(vec![0; i_stride as usize]);
        }
        let at = [
            put_page_end(m, STRUCTS_AT, &structs),
            put_page_end(m, TYPES_AT, &types),
            put_page_end(m, INTS_AT, &ints),
        ];
        let len = strings.bytes.len().next_multiple_of(PAGE);
        strings.bytes.resize(len, 0);
        m.put(STRINGS_AT, &strings.bytes);
        let vars: [&[u64]; 6] = [
            &at[..1],
            &self.struct_layout,
            &at[1..2],
            &self.type_layout,
            &at[2..],
            &self.int_layout,
        ];
        for (k, v) in vars.concat().into_iter().enumerate() {
            m.put_u64(BIAS + SYMBOLS_AT + 8 * k as u64, v);
        }
        m.put_u32(VM_MAJOR_VERSION, self.major);
        at
    }

    /// Reads them back as the reader does, within `limit` reads.
    fn read(&self, limit: usize) -> (Result<Vm, Miss>, usize) {
        let mut m = Fake::default();
        self.install(&mut m);
        read_tables(&mut m, limit)
    }

    fn without_field(mut self, ty: &str, field: &str) -> Tables {
        self.structs.retain(|e| (e.ty, e.field) != (ty, field));
        self
    }

    fn with_int(mut self, name: &str, value: i32) -> Tables {
        for e in &mut self.ints {
            if e.0 == name {
                e.1 = value;
            }
        }
        self
    }
}

fn image() -> Image {
    Image::with_symbols(std::array::from_fn(|i| SYMBOLS_AT + 8 * i as u64))
}

/// `Vm::read` of the tables in `m`, and the reads it made.
fn read_tables(m: &mut Fake, limit: usize) -> (Result<Vm, Miss>, usize) {
    let before = m.reads;
    let vm = Vm::read(&mut Counted::with_limit(m, limit), &image(), BIAS);
    (vm, m.reads - before)
}

#[test]
fn the_tables_give_hotspot_17s_layout() {
    let (vm, reads) = tables17().read(TABLE_READS);
    assert_eq!(vm, Ok(vm17()));
    // An entry and its names once each, and the variables.
    let entries = FIELDS17.len() + STATICS17.len() + TYPES17.len() + INTS17.len();
    assert!(reads < 3 * entries + 60, "{reads} reads");
}

#[test]
fn tables_missing_an_entry_are_refused() {
    for (ty, field, _) in FIELDS17 {
        let tables = tables17().without_field(ty, field);
        assert_eq!(
            tables.read(TABLE_READS).0,
            Err(Miss::Unreadable),
            "{ty}::{field}"
        );
    }
    for (ty, field, _) in STATICS17 {
        let tables = tables17().without_field(ty, field);
        assert!(tables.read(TABLE_READS).0.is_err(), "{ty}::{field}");
    }
    for (name, _) in TYPES17 {
        let mut tables = tables17();
        tables.types.retain(|t| t.0 != name);
        assert!(tables.read(TABLE_READS).0.is_err(), "{name}");
    }
    for (name, _) in INTS17 {
        let mut tables = tables17();
        tables.ints.retain(|t| t.0 != name);
        assert!(tables.read(TABLE_READS).0.is_err(), "{name}");
    }
    // A field said to be static is missing as a field; a static said to
    // be a field, as a static.
    let mut tables = tables17();
    tables
        .structs
        .iter_mut()
        .for_each(|e| e.is_static = !e.is_static);
    assert!(tables.read(TABLE_READS).0.is_err());
    // A field past any structure's size.
    let mut tables = tables17();
    tables.structs[3].value = 5000;
    assert!(tables.read(TABLE_READS).0.is_err());
}

#[test]
fn another_version_or_frame_layout_is_refused() {
    for major in [16, 18, 0] {
        let mut tables = tables17();
        tables.major = major;
        assert!(tables.read(TABLE_READS).0.is_err(), "{major}");
    }
    let bad = [
        ("frame::interpreter_frame_sender_sp_offset", 0),
        ("frame::interpreter_frame_sender_sp_offset", -2),
        ("frame::interpreter_frame_last_sp_offset", -1),
        ("frame::entry_frame_call_wrapper_offset", 0),
        ("frame::entry_frame_call_wrapper_offset", -17),
        ("frame::entry_frame_call_wrapper_offset", 6),
        ("JavaThread::_not_terminated", -1),
        ("ConstMethod::_has_linenumber_table", -1),
    ];
    for (name, value) in bad {
        let tables = tables17().with_int(name, value);
        assert!(tables.read(TABLE_READS).0.is_err(), "{name} = {value}");
    }
    // Sizes of 0 or past 4 KiB.
    for size in [0, 4096, u64::MAX] {
        let mut tables = tables17();
        tables.types.iter_mut().for_each(|t| t.1 = size);
        assert!(tables.read(TABLE_READS).0.is_err(), "{size}");
    }
}

/// JDK 17's tables whose structs run on for 4,100 entries, none empty,
/// each naming the same unwanted type and field.
fn endless_tables() -> Tables {
    let mut tables = tables17();
    let filler = StructEntry {
        ty: "Foo",
        field: "_bar",
        is_static: false,
        value: 8,
    };
    tables.structs.resize(4100, filler);
    tables.terminated = false;
    tables
}

#[test]
fn a_table_without_end_is_refused_within_its_reads() {
    // 4100 entries, none empty: read for 4096 of them, no more.
    let tables = endless_tables();
    assert_eq!(tables.read(TABLE_READS).0, Err(Miss::TooLong));
    // A short one that runs into unmapped memory.
    let mut tables = tables17();
    tables.terminated = false;
    assert_eq!(tables.read(TABLE_READS).0, Err(Miss::Unreadable));
    // The bound on reads holds whatever the tables say.
    for limit in [0, 1, 10, 50] {
        let (vm, reads) = tables17().read(limit);
        assert_eq!(vm, Err(Miss::TooLong));
        assert!(reads <= limit, "{reads} > {limit}");
    }
}

#[test]
fn strides_and_field_offsets_must_fit() {
    // Variable `k` of the 15 (`image::SYMBOLS`' order) says `value`; the
    // entries are where the real layout puts them.
    let refused = |k: u64, value: u64| {
        let mut m = Fake::default();
        tables17().install(&mut m);
        m.put_u64(BIAS + SYMBOLS_AT + 8 * k, value);
        read_tables(&mut m, TABLE_READS).0 == Err(Miss::Unreadable)
    };
    assert!(!refused(1, 48));
    // Strides of 0 or past 256 bytes (structs, types, ints).
    for k in [1, 8, 12] {
        for stride in [0, 257, u64::MAX] {
            assert!(refused(k, stride), "{k}: {stride}");
        }
    }
    // A field whose 8 bytes do not fit the stride: a struct's address at
    // 41 of 48, its type name anywhere, a type's size at 33 of 40, an
    // int's value at 9 of 16.
    assert!(refused(6, 41));
    assert!(refused(2, u64::MAX));
    assert!(refused(10, 33));
    assert!(refused(14, 9));
    // A table at 0: not filled in yet.
    for k in [0, 7, 11] {
        assert!(refused(k, 0), "{k}");
    }
}

#[test]
fn a_name_running_into_unmapped_memory_is_refused() {
    // The first entry's type name: the last bytes of a page, the next
    // page unmapped.
    let name_at_page_end = |name: &[u8]| {
        let mut m = Fake::default();
        let [structs, _, _] = tables17().install(&mut m);
        let page = m.alloc_pages(PAGE);
        let at = page + (PAGE - name.len()) as u64;
        m.put(at, name);
        m.put_u64(structs, at);
        read_tables(&mut m, TABLE_READS).0
    };
    assert_eq!(name_at_page_end(b"EpsilonHeap\0"), Ok(vm17()));
    assert_eq!(name_at_page_end(b"JavaThread"), Err(Miss::Unreadable));
    // A name longer than any the reader wants is no name of its: passed
    // over (the entry was a filler).
    let mut m = Fake::default();
    let [structs, _, _] = tables17().install(&mut m);
    let long = m.alloc_pages(PAGE);
    m.put(long, &[b'x'; PAGE]);
    m.put_u64(structs, long);
    assert_eq!(read_tables(&mut m, TABLE_READS).0, Ok(vm17()));
}

#[test]
fn tables_are_read_a_page_at_a_time() {
    // 4100 entries, none empty, each naming the same unwanted strings:
    // a read per page of entries.
    let tables = endless_tables();
    let (vm, reads) = tables.read(TABLE_READS);
    assert_eq!(vm, Err(Miss::TooLong));
    let pages = 4096 * 48 / PAGE;
    assert!(reads <= 2 * pages + 100, "{reads} reads");
    // Strides that do not divide a page: an entry across two pages is
    // read whole.
    let mut tables = tables17();
    tables.struct_layout[0] = 56;
    tables.type_layout[0] = 248;
    let (vm, _) = tables.read(TABLE_READS);
    assert_eq!(vm, Ok(vm17()));
}

// ---------------------------------------------------------------------
// Threads.

/// A live `JavaThread` of OS thread `tid` at `thread`, its `OSThread`
/// after it, on the stack [STACK_LOW, STACK_BASE), out of Java.
fn put_thread(m: &mut Fake, thread: u64, tid: u32) {
    let v = vm17();
    let osthread = thread + 0x800;
    m.map(thread, JAVA_THREAD_SIZE);
    m.map(osthread, 0x100);
    m.put_u32(osthread + v.osthread_tid, tid);
    m.put_u64(thread + v.thread_osthread, osthread);
    m.put_u32(thread + v.thread_terminated, NOT_TERMINATED);
    m.put_u64(thread + v.thread_stack_base, STACK_BASE);
    m.put_u64(thread + v.thread_stack_size, STACK_SIZE);
}

/// `ThreadsSMRSupport::_java_thread_list`: a `ThreadsList` of `threads`.
fn put_threads_list(m: &mut Fake, threads: &[u64]) {
    let v = vm17();
    m.put_u64(JAVA_THREAD_LIST, THREADS_LIST);
    m.map(THREADS_LIST, 0x20);
    m.put_u32(THREADS_LIST, 0x544C_5354); // _magic, 'TLST'
    m.put_u32(THREADS_LIST + v.list_length, threads.len() as u32);
    m.put_u64(THREADS_LIST + v.list_threads, THREADS_ARRAY);
    let words: Vec<u8> = threads.iter().flat_map(|t| t.to_le_bytes()).collect();
    m.put(THREADS_ARRAY, &words);
}

fn find_thread(m: &mut Fake, hint: Option<u64>) -> Result<u64, Miss> {
    java_thread(&mut Counted::with_limit(m, WALK_READS), &vm17(), TID, hint)
}

#[test]
fn a_thread_is_found_by_its_os_thread_id() {
    let mut m = Fake::default();
    put_thread(&mut m, thread_at(0), 7);
    put_thread(&mut m, thread_at(1), TID);
    put_thread(&mut m, thread_at(2), 9);
    put_threads_list(&mut m, &[thread_at(0), 0, thread_at(1), thread_at(2)]);
    assert_eq!(find_thread(&mut m, None), Ok(thread_at(1)));
    // Nobody's: none found.
    put_threads_list(&mut m, &[thread_at(0), thread_at(2)]);
    assert_eq!(find_thread(&mut m, None), Err(Miss::NoThread));
    put_threads_list(&mut m, &[]);
    assert_eq!(find_thread(&mut m, None), Err(Miss::NoThread));
}

#[test]
fn terminated_threads_and_threads_without_os_thread_are_passed_over() {
    let v = vm17();
    let mut m = Fake::default();
    // A terminated twin with the same tid, and one whose OSThread is gone.
    put_thread(&mut m, thread_at(0), TID);
    m.put_u32(thread_at(0) + v.thread_terminated, THREAD_TERMINATED);
    put_thread(&mut m, thread_at(1), TID);
    m.put_u64(thread_at(1) + v.thread_osthread, 0);
    put_thread(&mut m, thread_at(2), TID);
    put_threads_list(&mut m, &[thread_at(0), thread_at(1), thread_at(2)]);
    assert_eq!(find_thread(&mut m, None), Ok(thread_at(2)));
    // Not a hint either.
    assert_eq!(find_thread(&mut m, Some(thread_at(0))), Ok(thread_at(2)));
    assert_eq!(find_thread(&mut m, Some(thread_at(1))), Ok(thread_at(2)));
}

#[test]
fn a_hint_is_taken_while_it_holds() {
    let mut m = Fake::default();
    put_thread(&mut m, thread_at(0), 7);
    put_thread(&mut m, thread_at(1), TID);
    put_threads_list(&mut m, &[thread_at(0), thread_at(1)]);
    // Another thread's now, or unmapped: found in the list.
    assert_eq!(find_thread(&mut m, Some(thread_at(0))), Ok(thread_at(1)));
    assert_eq!(find_thread(&mut m, Some(0x1)), Ok(thread_at(1)));
    assert_eq!(find_thread(&mut m, Some(0xdead_0000)), Ok(thread_at(1)));
    // Still the thread's: the list is not read.
    m.put_u64(JAVA_THREAD_LIST, 0);
    let before = m.reads;
    assert_eq!(find_thread(&mut m, Some(thread_at(1))), Ok(thread_at(1)));
    assert!(m.reads - before <= 3);
    assert_eq!(find_thread(&mut m, None), Err(Miss::Unreadable));
}

#[test]
fn a_threads_list_past_its_bound_is_refused() {
    let v = vm17();
    let mut m = Fake::default();
    put_thread(&mut m, thread_at(0), TID);
    put_threads_list(&mut m, &[thread_at(0)]);
    for len in [16_385, u32::MAX] {
        m.put_u32(THREADS_LIST + v.list_length, len);
        assert_eq!(find_thread(&mut m, None), Err(Miss::TooLong), "{len}");
    }
    // Longer than its array: a read past it fails.
    m.put_u32(THREADS_LIST + v.list_length, 16_384);
    assert_eq!(find_thread(&mut m, None), Err(Miss::Unreadable));
}

// ---------------------------------------------------------------------
// The code cache and the stack.

/// The code cache's statics: its bounds, the interpreter's `StubQueue`,
/// the call stub's return, and one `CodeHeap` whose segments are free.
fn put_code_cache(m: &mut Fake) {
    let v = vm17();
    m.put_u64(CODE_CACHE_LOW_BOUND, CODE_LOW);
    m.put_u64(CODE_CACHE_HIGH_BOUND, CODE_HIGH);
    m.put_u64(ABSTRACT_INTERPRETER_CODE, STUB_QUEUE);
    m.map(STUB_QUEUE, 0x20);
    m.put_u64(STUB_QUEUE + v.queue_buffer, INTERPRETER_LOW);
    m.put_u32(STUB_QUEUE + v.queue_limit, INTERPRETER_SIZE);
    m.put_u64(CALL_STUB_RETURN_ADDRESS, CALL_STUB_PC);
    // CodeCache::_heaps: a GrowableArray<CodeHeap*> of one.
    m.put_u64(CODE_CACHE_HEAPS, HEAPS_ARRAY);
    m.map(HEAPS_ARRAY, 0x10);
    m.put_u32(HEAPS_ARRAY + v.array_len, 1);
    m.put_u64(HEAPS_ARRAY + v.array_data, HEAPS_DATA);
    m.put_u64(HEAPS_DATA, CODE_HEAP);
    m.map(CODE_HEAP, 0x108);
    m.put_u64(CODE_HEAP + v.heap_memory + v.space_low, HEAP_LOW);
    m.put_u64(CODE_HEAP + v.heap_memory + v.space_high, HEAP_HIGH);
    m.put_u64(CODE_HEAP + v.heap_segmap + v.space_low, SEGMAP);
    m.put_u32(CODE_HEAP + v.heap_log2_segment, LOG2_SEGMENT_SIZE);
    m.put(SEGMAP, &[FREE_SENTINEL; SEGMENTS]);
    m.map(HEAP_LOW, (HEAP_HIGH - HEAP_LOW) as usize);
}

/// A JVM whose thread `TID` (at `THREAD`) is out of Java: its code
/// cache, its stack, and the threads list.
fn jvm() -> Fake {
    let mut m = Fake::default();
    put_code_cache(&mut m);
    put_blob_names(&mut m);
    m.map(STACK_LOW, STACK_SIZE as usize);
    put_thread(&mut m, THREAD, TID);
    put_threads_list(&mut m, &[THREAD]);
    m
}

/// Sets a `JavaFrameAnchor` at `at`.
fn put_anchor(m: &mut Fake, at: u64, (sp, fp, pc): (u64, u64, u64)) {
    let v = vm17();
    m.put_u64(at + v.anchor_sp, sp);
    m.put_u64(at + v.anchor_fp, fp);
    m.put_u64(at + v.anchor_pc, pc);
}

/// Sets `THREAD`'s last Java frame: (sp, fp, pc).
fn put_last_frame(m: &mut Fake, regs: (u64, u64, u64)) {
    put_anchor(m, THREAD + vm17().thread_anchor, regs);
}

/// Frame `i`'s stack and frame pointer, in a stack of frames of 16
/// words whose slots (fp[-8] to fp[2]) do not overlap.
const fn sp_of(i: u64) -> u64 {
    STACK_LOW + 0x1000 + i * 0x80
}
const fn fp_of(i: u64) -> u64 {
    sp_of(i) + 0x48
}

/// An interpreted frame at `fp` (x86-64 slots, in words from fp).
struct Interpreted {
    method: u64,
    bcp: u64,
    sender_sp: u64,
    link: u64,
    return_pc: u64,
}

fn put_interpreted(m: &mut Fake, fp: u64, f: &Interpreted) {
    let slot = |i: i64| fp.wrapping_add_signed(8 * i);
    m.put_u64(slot(-8), f.bcp); // interpreter_frame_bcp_offset
    m.put_u64(slot(-3), f.method); // interpreter_frame_method_offset
    m.put_u64(slot(-1), f.sender_sp); // interpreter_frame_sender_sp_offset
    m.put_u64(slot(0), f.link); // link_offset
    m.put_u64(slot(1), f.return_pc); // return_addr_offset
}

/// Interpreted frames `first..first + methods.len()` (frame `i` at
/// `sp_of(i)`), each called by the next; the last returns to
/// `return_pc` with frame pointer `fp_of` of the frame after it.
fn put_chain(m: &mut Fake, first: u64, methods: &[u64], return_pc: u64) {
    let last = first + methods.len() as u64 - 1;
    for (i, &method) in (first..).zip(methods) {
        let frame = Interpreted {
            method,
            bcp: bcp_of(method),
            sender_sp: sp_of(i + 1),
            link: fp_of(i + 1),
            return_pc: if i == last { return_pc } else { INTERPRETER_PC },
        };
        put_interpreted(m, fp_of(i), &frame);
    }
}

/// A bytecode pointer for `method`'s frame, as the walk hands it on.
const fn bcp_of(method: u64) -> u64 {
    method + 0x1_0000_0007
}

/// The call stub's frame at `fp`: its `JavaCallWrapper` at
/// fp[entry_frame_call_wrapper_offset], with the anchor it saved.
fn put_call_stub(m: &mut Fake, fp: u64, saved: (u64, u64, u64)) {
    let v = vm17();
    let wrapper = m.alloc(0x40);
    put_anchor(m, wrapper + v.wrapper_anchor, saved);
    m.put_u64(fp.wrapping_add_signed(8 * v.entry_wrapper), wrapper);
}

/// Method pointers for the frames of a walk.
const fn method(i: u64) -> u64 {
    0x9_0000_0000 + i * 0x40
}

fn interpreted_frames(methods: &[u64]) -> Vec<RawFrame> {
    methods
        .iter()
        .map(|&m| RawFrame {
            method: m,
            pos: Pos::Bcp(bcp_of(m)),
        })
        .collect()
}

/// `THREAD`'s frames, as `frame_names` walks them.
fn walk(m: &mut Fake) -> Result<Vec<Group>, Miss> {
    let vm = vm17();
    let mut mem = Counted::with_limit(m, WALK_READS);
    let code = Code::read(&mut mem, &vm)?;
    thread_frames(&mut mem, &vm, &code, THREAD)
}

#[test]
fn interpreted_frames_down_to_the_call_stub_are_one_group() {
    let mut m = jvm();
    let methods = [method(0), method(1), method(2)];
    put_chain(&mut m, 0, &methods, CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(3), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    assert_eq!(walk(&mut m), Ok(vec![interpreted_frames(&methods)]));
}

#[test]
fn an_entry_frame_with_a_saved_anchor_starts_another_group() {
    let mut m = jvm();
    put_chain(&mut m, 0, &[method(0), method(1)], CALL_STUB_PC);
    // Java called native code that called Java: the call stub at frame
    // 2 saved the anchor of frame 4 (frame 3 is native).
    put_call_stub(&mut m, fp_of(2), (sp_of(4), fp_of(4), INTERPRETER_PC));
    put_chain(&mut m, 4, &[method(4)], CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(5), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    let want = vec![
        interpreted_frames(&[method(0), method(1)]),
        interpreted_frames(&[method(4)]),
    ];
    assert_eq!(walk(&mut m), Ok(want));
    // A saved anchor below the call stub: the stack would not rise.
    put_call_stub(&mut m, fp_of(2), (sp_of(1), fp_of(1), INTERPRETER_PC));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

#[test]
fn frames_that_do_not_rise_are_refused() {
    let mut m = jvm();
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    // A frame that links to itself, its sender sp past it.
    let frame = |sender_sp, link| Interpreted {
        method: method(0),
        bcp: bcp_of(method(0)),
        sender_sp,
        link,
        return_pc: INTERPRETER_PC,
    };
    put_interpreted(&mut m, fp_of(0), &frame(sp_of(1), fp_of(0)));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // Its sender sp its own, or below it.
    for sender_sp in [sp_of(0), sp_of(0) - 8, 0] {
        put_interpreted(&mut m, fp_of(0), &frame(sender_sp, fp_of(0)));
        assert_eq!(walk(&mut m), Err(Miss::Unreadable), "{sender_sp:#x}");
    }
    // Two frames that call each other.
    put_interpreted(&mut m, fp_of(0), &frame(sp_of(1), fp_of(1)));
    put_interpreted(&mut m, fp_of(1), &frame(sp_of(0), fp_of(0)));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // A frame pointer below its stack pointer.
    put_interpreted(&mut m, fp_of(1), &frame(sp_of(2), sp_of(1) - 0x10));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

#[test]
fn walks_stop_at_max_frames() {
    let mut m = jvm();
    let methods: Vec<u64> = (0..600).map(method).collect();
    put_chain(&mut m, 0, &methods, CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(600), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    assert_eq!(walk(&mut m), Err(Miss::TooLong));
    // Just under: MAX_FRAMES steps, the call stub's among them.
    let n = MAX_FRAMES as u64 - 1;
    put_chain(&mut m, 0, &methods[..n as usize], CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(n), (0, 0, 0));
    let groups = walk(&mut m).expect("walked");
    assert_eq!(groups[0].len(), MAX_FRAMES - 1);
    // One more Java frame: past the bound.
    let n = MAX_FRAMES as u64;
    put_chain(&mut m, 0, &methods[..n as usize], CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(n), (0, 0, 0));
    assert_eq!(walk(&mut m), Err(Miss::TooLong));
}

#[test]
fn a_thread_without_last_java_frame_has_none() {
    let mut m = jvm();
    put_last_frame(&mut m, (0, fp_of(0), INTERPRETER_PC));
    assert_eq!(walk(&mut m), Err(Miss::NotWaiting));
}

#[test]
fn an_anchor_without_pc_returns_to_the_word_below_its_sp() {
    let mut m = jvm();
    put_chain(&mut m, 0, &[method(0)], CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(1), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), fp_of(0), 0));
    m.put_u64(sp_of(0) - 8, INTERPRETER_PC);
    assert_eq!(walk(&mut m), Ok(vec![interpreted_frames(&[method(0)])]));
    // A word there that is no code.
    m.put_u64(sp_of(0) - 8, 0x1234);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

#[test]
fn pointers_outside_the_stack_are_refused() {
    let v = vm17();
    let mut m = jvm();
    put_chain(&mut m, 0, &[method(0)], CALL_STUB_PC);
    put_call_stub(&mut m, fp_of(1), (0, 0, 0));
    for (sp, fp) in [
        (STACK_BASE, fp_of(0)),
        (STACK_LOW - 8, fp_of(0)),
        (sp_of(0) + 1, fp_of(0)),
        (sp_of(0), STACK_BASE + 0x40),
        (sp_of(0), STACK_LOW + 0x20),
    ] {
        put_last_frame(&mut m, (sp, fp, INTERPRETER_PC));
        assert_eq!(walk(&mut m), Err(Miss::Unreadable), "{sp:#x} {fp:#x}");
    }
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    assert!(walk(&mut m).is_ok());
    // A stack of 1 GiB holding the frames is believed; past that, or of
    // no size, or wrapping below 0, not.
    let stack = |m: &mut Fake, base: u64, size: u64| {
        m.put_u64(THREAD + v.thread_stack_base, base);
        m.put_u64(THREAD + v.thread_stack_size, size);
        walk(m)
    };
    let gib = 1 << 30;
    assert!(stack(&mut m, STACK_LOW + gib, gib).is_ok());
    let past = stack(&mut m, STACK_LOW + gib + 8, gib + 8);
    assert_eq!(past, Err(Miss::Unreadable));
    for (base, size) in [(STACK_BASE, 0), (0x1000, 0x2000)] {
        let walked = stack(&mut m, base, size);
        assert_eq!(walked, Err(Miss::Unreadable), "{base:#x} {size:#x}");
    }
}

#[test]
fn interpreted_frame_pointers_are_believed_only_in_the_stack_above_sp() {
    // A frame that looks whole at `fp`, called from the call stub.
    let frame_at = |m: &mut Fake, fp: u64, sender_sp: u64, stub_fp: u64| {
        let frame = Interpreted {
            method: method(0),
            bcp: bcp_of(method(0)),
            sender_sp,
            link: stub_fp,
            return_pc: CALL_STUB_PC,
        };
        put_interpreted(m, fp, &frame);
        put_call_stub(m, stub_fp, (0, 0, 0));
        put_last_frame(m, (sp_of(0), fp, INTERPRETER_PC));
    };
    let mut m = jvm();
    frame_at(&mut m, fp_of(0), sp_of(1), fp_of(1));
    assert!(walk(&mut m).is_ok());
    // Outside the stack.
    let fp = m.alloc(0x100) + 0x80;
    frame_at(&mut m, fp, sp_of(1), fp_of(1));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // At its base, the words above it mapped.
    m.map(STACK_BASE, 0x20);
    frame_at(&mut m, STACK_BASE, STACK_BASE - 0x100, STACK_BASE - 0x80);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // In the stack, but below sp.
    frame_at(&mut m, fp_of(0), sp_of(1), fp_of(1));
    put_last_frame(&mut m, (fp_of(0) + 8, fp_of(0), INTERPRETER_PC));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

#[test]
fn call_stub_frame_pointers_are_believed_only_in_the_stack_above_sp() {
    // Frame 0 returns to the call stub, whose fp is `stub_fp`.
    let returning_to = |m: &mut Fake, sender_sp: u64, stub_fp: u64| {
        let frame = Interpreted {
            method: method(0),
            bcp: bcp_of(method(0)),
            sender_sp,
            link: stub_fp,
            return_pc: CALL_STUB_PC,
        };
        put_interpreted(m, fp_of(0), &frame);
        put_call_stub(m, stub_fp, (0, 0, 0));
        put_last_frame(m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    };
    let mut m = jvm();
    returning_to(&mut m, sp_of(2), fp_of(2));
    assert!(walk(&mut m).is_ok());
    // Outside the stack, its wrapper slot readable.
    let stub_fp = m.alloc(0x100) + 0x80;
    returning_to(&mut m, sp_of(2), stub_fp);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // In it, below its sp.
    returning_to(&mut m, sp_of(2), fp_of(1));
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

// ---------------------------------------------------------------------
// Compiled frames.

/// `CodeHeap::mark_segmap_as_used` (JDK 17): segment `i` of a block
/// holds `i`, counting 1 to 254 again past 254.
fn put_segmap(m: &mut Fake, first: usize, segments: usize) {
    let mut map = Vec::with_capacity(segments);
    let mut i = 0u8;
    for _ in 0..segments {
        map.push(i);
        i = if i == FREE_SENTINEL - 1 { 1 } else { i + 1 };
    }
    m.put(SEGMAP + first as u64, &map);
}

/// A used `HeapBlock` at segment `first` holding `blob` (its bytes);
/// returns where the blob is.
fn put_blob(m: &mut Fake, first: usize, blob: &[u8]) -> u64 {
    let v = vm17();
    let block = HEAP_LOW + ((first as u64) << LOG2_SEGMENT_SIZE);
    let segments = (v.block_size as usize + blob.len()).div_ceil(1 << LOG2_SEGMENT_SIZE);
    put_segmap(m, first, segments);
    m.put_u64(block, segments as u64); // HeapBlock::Header::_length
    m.put(block + v.block_used, &[1]);
    m.put(block + v.block_size, blob);
    block + v.block_size
}

/// `CodeBlob::_name`s: string literals in libjvm.
const NMETHOD_NAME: u64 = BIAS + 0xf0_0000;
const NATIVE_NMETHOD_NAME: u64 = NMETHOD_NAME + 0x10;
const STUB_NAME: u64 = NMETHOD_NAME + 0x20;

fn put_blob_names(m: &mut Fake) {
    let mut names = vec![0u8; PAGE];
    names[..7].copy_from_slice(b"nmethod");
    names[0x10..0x1e].copy_from_slice(b"native nmethod");
    names[0x20..0x3e].copy_from_slice(b"_complete_monitor_locking_Java");
    m.put(NMETHOD_NAME, &names);
}

// Where an nmethod's parts are, from its start.
const NM_CODE: u64 = 0x200;
const NM_SCOPES: u64 = 0x400;
const NM_PCS: u64 = 0x600;
const NM_METADATA: u64 = 0x700;
const NM_SIZE: usize = 0x800;
/// `nmethod::_orig_pc_offset`: from the frame's sp.
const NM_ORIG_PC: i32 = 8;

/// A compiled method's code blob.
struct Nmethod {
    /// "nmethod", "native nmethod", or a stub's name.
    name: u64,
    method: u64,
    frame_words: i32,
    /// `PcDesc`s: (pc offset from the code's begin, scope decode offset).
    pcs: Vec<(i32, i32)>,
    scopes: Vec<u8>,
    metadata: Vec<u64>,
}

/// The nmethod's bytes, were it at `blob`.
fn nmethod_bytes(blob: u64, n: &Nmethod) -> Vec<u8> {
    let v = vm17();
    let mut b = vec![0u8; NM_SIZE];
    let mut put = |off: u64, bytes: &[u8]| {
        b[off as usize..off as usize + bytes.len()].copy_from_slice(bytes);
    };
    put(v.blob_size, &(NM_SIZE as i32).to_le_bytes());
    put(v.blob_frame_size, &n.frame_words.to_le_bytes());
    put(v.blob_code_begin, &(blob + NM_CODE).to_le_bytes());
    put(v.blob_name, &n.name.to_le_bytes());
    put(v.compiled_method, &n.method.to_le_bytes());
    put(v.compiled_scopes_data, &(blob + NM_SCOPES).to_le_bytes());
    put(
        v.compiled_deopt_handler,
        &(blob + NM_CODE + 0x1f0).to_le_bytes(),
    );
    put(v.nmethod_metadata, &(NM_METADATA as i32).to_le_bytes());
    put(v.nmethod_pcs, &(NM_PCS as i32).to_le_bytes());
    let pcs_end = NM_PCS + 16 * n.pcs.len() as u64;
    put(v.nmethod_dependencies, &(pcs_end as i32).to_le_bytes());
    put(v.nmethod_orig_pc, &NM_ORIG_PC.to_le_bytes());
    put(NM_SCOPES, &n.scopes);
    for (i, &(pc, scope)) in n.pcs.iter().enumerate() {
        let at = NM_PCS + 16 * i as u64;
        put(at, &pc.to_le_bytes()); // PcDesc::_pc_offset
        put(at + 4, &scope.to_le_bytes()); // PcDesc::_scope_decode_offset
    }
    for (i, &method) in n.metadata.iter().enumerate() {
        put(NM_METADATA + 8 * i as u64, &method.to_le_bytes());
    }
    b
}

/// UNSIGNED5 as JDK 17's `CompressedWriteStream::write_int` writes it.
fn put_u5(out: &mut Vec<u8>, value: u32) {
    let mut sum = value;
    for i in 0..5 {
        if sum < 192 || i == 4 {
            out.push(sum as u8);
            return;
        }
        sum -= 192;
        out.push(192 + (sum % 64) as u8);
        sum >>= 6;
    }
}

/// Scope descriptors as `DebugInformationRecorder::describe_scope`
/// writes them, outermost first: (method index, bci). Returns the
/// stream and the innermost's decode offset.
fn scopes(chain: &[(u32, i32)]) -> (Vec<u8>, i32) {
    // The stream starts with a pad byte: no scope is at serialized_null.
    let mut out = vec![0xFF];
    let mut sender = 0;
    for &(method_index, bci) in chain {
        let at = out.len() as i32;
        put_u5(&mut out, sender as u32);
        put_u5(&mut out, method_index);
        put_u5(&mut out, (bci + 1) as u32);
        // Locals, expressions, monitors: none.
        out.extend([0, 0, 0]);
        sender = at;
    }
    (out, sender)
}

/// The return pc's offset in the nmethods built here.
const CALL_RETURN: i32 = 0x44;

/// An nmethod of `method(10)` that inlined `method(11)` at bci 7, which
/// inlined `method(12)` at bci 300, which calls out at bci 12.
fn inlining_nmethod() -> Nmethod {
    let (scopes, inner) = scopes(&[(1, 7), (2, 300), (3, 12)]);
    Nmethod {
        name: NMETHOD_NAME,
        method: method(10),
        frame_words: 6,
        pcs: vec![(-1, 0), (0x20, 0), (CALL_RETURN, inner), (0x1f0, 0)],
        scopes,
        metadata: vec![method(10), method(11), method(12)],
    }
}

/// The frames of [`inlining_nmethod`], innermost first.
fn inlined_frames() -> Vec<RawFrame> {
    [(12, 12), (11, 300), (10, 7)]
        .map(|(m, bci)| RawFrame {
            method: method(m),
            pos: Pos::Bci(bci),
        })
        .to_vec()
}

/// A compiled frame at `sp_of(0)` running `n` (at segment 40), called by
/// an interpreted frame (`method(1)`) called from the call stub.
fn compiled_thread(n: &Nmethod, pc_offset: u64) -> (Fake, u64) {
    compiled_thread_at(n, pc_offset, 40)
}

/// [`compiled_thread`], its blob at segment `first`.
fn compiled_thread_at(n: &Nmethod, pc_offset: u64, first: u64) -> (Fake, u64) {
    let mut m = jvm();
    let blob = HEAP_LOW + (first << LOG2_SEGMENT_SIZE) + vm17().block_size;
    assert_eq!(
        put_blob(&mut m, first as usize, &nmethod_bytes(blob, n)),
        blob
    );
    let caller_sp = sp_of(0) + 8 * n.frame_words as u64;
    // The words below its caller's sp: the return address and the
    // caller's frame pointer.
    let caller_fp = caller_sp + 0x48;
    m.put_u64(caller_sp - 8, INTERPRETER_PC);
    m.put_u64(caller_sp - 16, caller_fp);
    let caller = Interpreted {
        method: method(1),
        bcp: bcp_of(method(1)),
        sender_sp: sp_of(4),
        link: fp_of(4),
        return_pc: CALL_STUB_PC,
    };
    put_interpreted(&mut m, caller_fp, &caller);
    put_call_stub(&mut m, fp_of(4), (0, 0, 0));
    // The anchor's fp is stale: a compiled frame does not set it.
    put_last_frame(&mut m, (sp_of(0), 0xdead_beef, blob + NM_CODE + pc_offset));
    (m, blob)
}

#[test]
fn a_compiled_frame_yields_its_inlined_scopes_innermost_first() {
    let n = inlining_nmethod();
    let (mut m, _) = compiled_thread(&n, CALL_RETURN as u64);
    let mut want = inlined_frames();
    want.extend(interpreted_frames(&[method(1)]));
    assert_eq!(walk(&mut m), Ok(vec![want]));
}

#[test]
fn a_compiled_frame_without_its_scope_is_its_method() {
    let own = RawFrame {
        method: method(10),
        pos: Pos::None,
    };
    // A pc with no PcDesc, or one with no scope: the nmethod's method.
    for pc in [0x30, 0x20] {
        let (mut m, _) = compiled_thread(&inlining_nmethod(), pc);
        let groups = walk(&mut m).expect("walked");
        assert_eq!(groups[0][0], own, "{pc:#x}");
        assert_eq!(groups[0].len(), 2);
    }
    // A scope whose sender is past it: the chain is not believed.
    let mut n = inlining_nmethod();
    let (mut bytes, _) = scopes(&[(1, 7)]);
    let looping = bytes.len() as i32;
    put_u5(&mut bytes, looping as u32 + 1);
    bytes.extend([1, 5, 0, 0, 0]);
    n.scopes = bytes;
    n.pcs[2].1 = looping;
    let (mut m, _) = compiled_thread(&n, CALL_RETURN as u64);
    assert_eq!(walk(&mut m).expect("walked")[0][0], own);
}

#[test]
fn a_deoptimized_return_is_named_by_the_pc_it_replaced() {
    let (mut m, blob) = compiled_thread(&inlining_nmethod(), 0x1f0);
    let orig = sp_of(0).wrapping_add_signed(i64::from(NM_ORIG_PC));
    m.put_u64(orig, blob + NM_CODE + CALL_RETURN as u64);
    let mut want = inlined_frames();
    want.extend(interpreted_frames(&[method(1)]));
    assert_eq!(walk(&mut m), Ok(vec![want]));
}

#[test]
fn a_native_wrapper_is_its_method_and_a_stub_is_nothing() {
    let v = vm17();
    let mut n = inlining_nmethod();
    n.name = NATIVE_NMETHOD_NAME;
    n.pcs.clear();
    let (mut m, _) = compiled_thread(&n, CALL_RETURN as u64);
    let native = RawFrame {
        method: method(10),
        pos: Pos::None,
    };
    let mut want = vec![native];
    want.extend(interpreted_frames(&[method(1)]));
    assert_eq!(walk(&mut m), Ok(vec![want]));
    // A runtime stub: stepped over, a frame named by the stub.
    n.name = STUB_NAME;
    let (mut m, blob) = compiled_thread(&n, CALL_RETURN as u64);
    let stub = RawFrame {
        method: STUB_NAME,
        pos: Pos::Stub,
    };
    let mut want = vec![stub];
    want.extend(interpreted_frames(&[method(1)]));
    assert_eq!(walk(&mut m), Ok(vec![want]));
    // "nmethod" with only its 8 bytes mapped; a name not mapped at all.
    let short = m.alloc(8);
    m.put(short, b"nmethod\0");
    m.put_u64(blob + v.blob_name, short);
    assert_eq!(walk(&mut m).expect("walked")[0][0], native);
    m.put_u64(blob + v.blob_name, 0xdead_0000);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // A blob without a frame of its own cannot be stepped.
    n.frame_words = 0;
    let (mut m, _) = compiled_thread(&n, 0x30);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

#[test]
fn segment_maps_that_lead_nowhere_are_refused() {
    let v = vm17();
    let (mut m, blob) = compiled_thread(&inlining_nmethod(), CALL_RETURN as u64);
    let pc_segment = (blob + NM_CODE + CALL_RETURN as u64 - HEAP_LOW) >> LOG2_SEGMENT_SIZE;
    assert!(walk(&mut m).is_ok());
    // A hop past segment 0.
    m.put(SEGMAP + pc_segment, &[pc_segment as u8 + 1]);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // Into a free segment.
    m.put(SEGMAP + pc_segment, &[FREE_SENTINEL]);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // Hops of one, more than the walk takes (1024), to a block start.
    m.put(SEGMAP, &[1; 2000]);
    m.put(SEGMAP, &[0]);
    let far = HEAP_LOW + (1999 << LOG2_SEGMENT_SIZE) + 8;
    put_last_frame(&mut m, (sp_of(0), 0, far));
    let before = m.reads;
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    assert!(m.reads - before < 1100, "{} reads", m.reads - before);
    // A block that is not in use.
    let (mut m, blob) = compiled_thread(&inlining_nmethod(), CALL_RETURN as u64);
    let block = blob - v.block_size;
    m.put(block + v.block_used, &[0]);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // A pc past its blob's `_size` (its block holds more segments).
    m.put(block + v.block_used, &[1]);
    m.put_u32(blob + v.blob_size, NM_CODE as u32);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
    // Segment sizes the walk does not believe (the blob at segment 0,
    // where any size would find it).
    let (mut m, _) = compiled_thread_at(&inlining_nmethod(), CALL_RETURN as u64, 0);
    assert!(walk(&mut m).is_ok());
    for log2 in [3, 17, 40] {
        m.put_u32(CODE_HEAP + v.heap_log2_segment, log2);
        assert_eq!(walk(&mut m), Err(Miss::Unreadable), "{log2}");
    }
}

#[test]
fn a_long_block_is_found_back_through_its_hops() {
    // A blob of 600 segments: the map counts 0..=254, then 1..=254 again.
    let mut m = jvm();
    let n = Nmethod {
        name: NATIVE_NMETHOD_NAME,
        method: method(3),
        frame_words: 4,
        pcs: Vec::new(),
        scopes: Vec::new(),
        metadata: Vec::new(),
    };
    let v = vm17();
    let blob = HEAP_LOW + (100 << LOG2_SEGMENT_SIZE) + v.block_size;
    let size = 600 << LOG2_SEGMENT_SIZE;
    let mut bytes = nmethod_bytes(blob, &n);
    bytes.resize(size, 0);
    let at = v.blob_size as usize;
    bytes[at..at + 4].copy_from_slice(&(size as u32).to_le_bytes());
    assert_eq!(put_blob(&mut m, 100, &bytes), blob);
    let pc = blob + (550 << LOG2_SEGMENT_SIZE);
    let caller_sp = sp_of(0) + 32;
    m.put_u64(caller_sp - 8, CALL_STUB_PC);
    m.put_u64(caller_sp - 16, fp_of(1));
    put_call_stub(&mut m, fp_of(1), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), 0, pc));
    let want = RawFrame {
        method: method(3),
        pos: Pos::None,
    };
    assert_eq!(walk(&mut m), Ok(vec![vec![want]]));
    // The free sentinel 255 segments past the block's start: free, not a
    // hop back to it.
    let at = blob + (255 << LOG2_SEGMENT_SIZE);
    put_last_frame(&mut m, (sp_of(0), 0, at));
    assert_eq!(walk(&mut m), Ok(vec![vec![want]]));
    m.put(SEGMAP + 100 + 255, &[FREE_SENTINEL]);
    assert_eq!(walk(&mut m), Err(Miss::Unreadable));
}

// ---------------------------------------------------------------------
// Methods and their names.

/// A `Symbol` of `length` (u2) whose body is `body`, with junk in its
/// hash and refcount.
fn put_symbol_of_length(m: &mut Fake, body: &[u8], length: u16) -> u64 {
    let v = vm17();
    let at = m.alloc(v.symbol_body as usize + body.len());
    m.put_u32(at, 0x0001_7a3c);
    m.put_u16(at + v.symbol_length, length);
    m.put(at + v.symbol_body, body);
    at
}

fn put_symbol(m: &mut Fake, body: &[u8]) -> u64 {
    put_symbol_of_length(m, body, body.len() as u16)
}

/// A Java method, as HotSpot 17 lays it out in metaspace.
struct JavaMethod<'a> {
    class: &'a [u8],
    name: &'a [u8],
    file: Option<&'a [u8]>,
    code_size: u16,
    /// (bci, line) pairs in class file order, if it has a line table.
    lines: Option<&'a [(i32, i32)]>,
}

/// Where a method's metadata is.
struct Placed {
    method: u64,
    const_method: u64,
    pool: u64,
    holder: u64,
}

/// Constant pool slots of the method's name and source file, its
/// length, and the slots mapped (more: metaspace goes on past a pool).
const NAME_INDEX: u16 = 3;
const SOURCE_FILE_INDEX: u16 = 5;
const POOL_LENGTH: u32 = 7;
const POOL_SLOTS_MAPPED: u64 = 16;

fn put_method(m: &mut Fake, spec: &JavaMethod<'_>) -> Placed {
    let v = vm17();
    let name = put_symbol(m, spec.name);
    let class = put_symbol(m, spec.class);
    // ConstantPool, then its slots.
    let pool = m.alloc((v.pool_size + 8 * POOL_SLOTS_MAPPED) as usize);
    m.put_u32(pool + v.pool_length, POOL_LENGTH);
    let slot = |i: u16| pool + v.pool_size + 8 * u64::from(i);
    m.put_u64(slot(NAME_INDEX), name);
    if let Some(file) = spec.file {
        let file = put_symbol(m, file);
        m.put_u64(slot(SOURCE_FILE_INDEX), file);
        m.put_u16(pool + v.pool_source_file, SOURCE_FILE_INDEX);
    }
    let holder = m.alloc(0x100);
    m.put_u64(holder + v.klass_name, class);
    m.put_u64(holder + v.klass_constants, pool);
    m.put_u64(pool + v.pool_holder, holder);
    // ConstMethod, its bytecodes, its line table, and a little more
    // (less than the 4 KiB the reader tries first).
    let code = u64::from(spec.code_size);
    let table = spec.lines.map(line_table).unwrap_or_default();
    let const_method = m.alloc(v.const_size as usize + code as usize + table.len() + 300);
    m.put_u64(const_method + v.const_constants, pool);
    m.put_u16(const_method + v.const_name_index, NAME_INDEX);
    m.put_u16(const_method + v.const_code_size, spec.code_size);
    if spec.lines.is_some() {
        m.put_u16(const_method + v.const_flags, 0x1 | 0x40);
        m.put(const_method + v.const_size + code, &table);
    }
    let method = m.alloc(0x58);
    m.put_u64(method + v.method_const, const_method);
    Placed {
        method,
        const_method,
        pool,
        holder,
    }
}

/// A compressed line number table (`CompressedLineNumberWriteStream`).
fn line_table(pairs: &[(i32, i32)]) -> Vec<u8> {
    let signed = |out: &mut Vec<u8>, v: i32| put_u5(out, ((v << 1) ^ (v >> 31)) as u32);
    let mut out = Vec::new();
    let (mut bci, mut line) = (0, 0);
    for &(b, l) in pairs {
        let (db, dl) = (b - bci, l - line);
        (bci, line) = (b, l);
        if (0..32).contains(&db) && (0..8).contains(&dl) && (db, dl) != (31, 7) {
            out.push((db << 3 | dl) as u8);
        } else {
            out.push(0xFF);
            signed(&mut out, db);
            signed(&mut out, dl);
        }
    }
    out.push(0);
    out
}

const TAKE: JavaMethod<'static> = JavaMethod {
    class: b"java/util/concurrent/LinkedBlockingQueue",
    name: b"take",
    file: Some(b"LinkedBlockingQueue.java"),
    code_size: 60,
    lines: Some(&[(0, 430), (5, 431), (9, 433), (20, 435), (40, 440)]),
};

/// The name of the frame of `method` at `pos`, as `frame_names` reads it.
fn name(m: &mut Fake, method: u64, pos: Pos) -> Result<String, Miss> {
    let vm = vm17();
    let mut mem = Counted::with_limit(m, WALK_READS);
    let key = method_key(&mut mem, &vm, method)?;
    Ok(read_method(&mut mem, &vm, key)?.frame_name(pos))
}

/// Where `placed`'s bytecode `bci` is.
fn bcp(placed: &Placed, bci: u64) -> Pos {
    Pos::Bcp(placed.const_method + vm17().const_size + bci)
}

#[test]
fn a_method_is_named_with_its_class_file_and_line() {
    let mut m = Fake::default();
    let take = put_method(&mut m, &TAKE);
    let named = |m: &mut Fake, pos| name(m, take.method, pos).expect("named");
    let full = "java.util.concurrent.LinkedBlockingQueue.take";
    assert_eq!(
        named(&mut m, bcp(&take, 22)),
        format!("{full} (LinkedBlockingQueue.java:435)")
    );
    assert_eq!(
        named(&mut m, bcp(&take, 0)),
        format!("{full} (LinkedBlockingQueue.java:430)")
    );
    assert_eq!(
        named(&mut m, Pos::Bci(9)),
        format!("{full} (LinkedBlockingQueue.java:433)")
    );
    // Outside its code, or nowhere: no line.
    for pos in [bcp(&take, 60), Pos::Bcp(1), Pos::None, Pos::Bci(-5)] {
        assert_eq!(
            named(&mut m, pos),
            format!("{full} (LinkedBlockingQueue.java)")
        );
    }
}

#[test]
fn a_native_method_and_a_method_without_source_have_no_line() {
    let mut m = Fake::default();
    let park = JavaMethod {
        class: b"jdk/internal/misc/Unsafe",
        name: b"park",
        file: Some(b"Unsafe.java"),
        code_size: 0,
        lines: None,
    };
    let park = put_method(&mut m, &park);
    assert_eq!(
        name(&mut m, park.method, Pos::Bcp(0)),
        Ok("jdk.internal.misc.Unsafe.park (Unsafe.java)".to_string())
    );
    let generated = JavaMethod {
        file: None,
        lines: None,
        ..TAKE
    };
    let generated = put_method(&mut m, &generated);
    let pos = bcp(&generated, 5);
    let named = name(&mut m, generated.method, pos).expect("named");
    assert_eq!(named, "java.util.concurrent.LinkedBlockingQueue.take");
}

#[test]
fn a_hidden_class_loses_its_address() {
    let mut m = Fake::default();
    let lambda = JavaMethod {
        class: b"Foo$$Lambda$1+0x0000000800c01200",
        name: b"run",
        file: None,
        code_size: 8,
        lines: None,
    };
    let lambda = put_method(&mut m, &lambda);
    let named = name(&mut m, lambda.method, Pos::None);
    assert_eq!(named, Ok("Foo$$Lambda$1.run".to_string()));
}

#[test]
fn a_method_whose_metadata_disagrees_is_refused() {
    let v = vm17();
    let mut m = Fake::default();
    let take = put_method(&mut m, &TAKE);
    assert!(name(&mut m, take.method, Pos::None).is_ok());
    // The holder's pool is another.
    m.put_u64(take.holder + v.klass_constants, take.pool + 8);
    assert_eq!(name(&mut m, take.method, Pos::None), Err(Miss::Unreadable));
    m.put_u64(take.holder + v.klass_constants, take.pool);
    // Names past the pool (a Symbol* in the slot after it), or at its
    // slot 0.
    let past = POOL_LENGTH as u16 + 1;
    let symbol = put_symbol(&mut m, b"forged");
    m.put_u64(take.pool + v.pool_size + 8 * u64::from(past), symbol);
    for index in [past, POOL_LENGTH as u16, 0xffff, 0] {
        m.put_u16(take.const_method + v.const_name_index, index);
        assert_eq!(name(&mut m, take.method, Pos::None), Err(Miss::Unreadable));
    }
    m.put_u16(take.const_method + v.const_name_index, NAME_INDEX);
    m.put_u16(take.pool + v.pool_source_file, past);
    assert_eq!(name(&mut m, take.method, Pos::None), Err(Miss::Unreadable));
    m.put_u16(take.pool + v.pool_source_file, SOURCE_FILE_INDEX);
    assert!(name(&mut m, take.method, Pos::None).is_ok());
    // Pointers that are 0 or not 8-aligned.
    for method in [0, take.method + 4] {
        assert_eq!(name(&mut m, method, Pos::None), Err(Miss::Unreadable));
    }
    m.put_u64(take.method + v.method_const, take.const_method + 2);
    assert_eq!(name(&mut m, take.method, Pos::None), Err(Miss::Unreadable));
}

#[test]
fn symbols_are_cut_and_made_text() {
    let mut m = Fake::default();
    let take = put_method(&mut m, &TAKE);
    let v = vm17();
    // 65535 bytes long, only the 1024 read mapped.
    let long = put_symbol_of_length(&mut m, &[b'a'; 1024], u16::MAX);
    m.put_u64(take.holder + v.klass_name, long);
    let named = name(&mut m, take.method, Pos::None).expect("named");
    assert_eq!(
        named,
        format!("{}.take (LinkedBlockingQueue.java)", "a".repeat(1024))
    );
    // Bytes that are not UTF-8.
    let odd = put_symbol(&mut m, b"p/Caf\xe9\xff");
    m.put_u64(take.holder + v.klass_name, odd);
    let named = name(&mut m, take.method, Pos::None).expect("named");
    assert_eq!(
        named,
        "p.Caf\u{FFFD}\u{FFFD}.take (LinkedBlockingQueue.java)"
    );
}

// ---------------------------------------------------------------------
// The whole read.

/// A JVM whose tables are published, and whose thread is blocked in
/// `Unsafe.park` (native, interpreted) called from `take` at bci 22.
fn blocked_jvm() -> Fake {
    let mut m = jvm();
    tables17().install(&mut m);
    let park = JavaMethod {
        class: b"jdk/internal/misc/Unsafe",
        name: b"park",
        file: Some(b"Unsafe.java"),
        code_size: 0,
        lines: None,
    };
    let park = put_method(&mut m, &park);
    let take = put_method(&mut m, &TAKE);
    put_chain(&mut m, 0, &[park.method, take.method], CALL_STUB_PC);
    m.put_u64(fp_of(0) - 64, 0); // park is native: no bcp
    m.put_u64(fp_of(1) - 64, bcp_value(&take, 22));
    put_call_stub(&mut m, fp_of(2), (0, 0, 0));
    put_last_frame(&mut m, (sp_of(0), fp_of(0), INTERPRETER_PC));
    m
}

fn bcp_value(placed: &Placed, bci: u64) -> u64 {
    placed.const_method + vm17().const_size + bci
}

fn process() -> Process {
    Process::new(Arc::new(image()), BIAS)
}

#[test]
fn frame_names_reads_a_blocked_thread() {
    let mut m = blocked_jvm();
    let mut jvms = Jvms::default();
    // A thread of the process that is no Java thread: none, but the
    // code cache is known from then on.
    let other = frame_names(&mut m, &process(), &mut jvms, 100, TID + 1);
    assert_eq!(other, Err(Miss::NoThread));
    assert_eq!(jvms.code_cache(100), Some((CODE_LOW, CODE_HIGH)));
    assert_eq!(jvms.code_cache(101), None);
    let named = frame_names(&mut m, &process(), &mut jvms, 100, TID);
    let want = vec![vec![
        "jdk.internal.misc.Unsafe.park (Unsafe.java)".to_string(),
        "java.util.concurrent.LinkedBlockingQueue.take (LinkedBlockingQueue.java:435)".to_string(),
    ]];
    assert_eq!(named, Ok(want));
    jvms.forget(100);
    assert_eq!(jvms.code_cache(100), None);
}

#[test]
fn a_second_read_reuses_the_layout_and_the_names() {
    let mut m = blocked_jvm();
    let mut jvms = Jvms::default();
    let first = frame_names(&mut m, &process(), &mut jvms, 100, TID);
    let first_reads = m.reads;
    m.reads = 0;
    let second = frame_names(&mut m, &process(), &mut jvms, 100, TID);
    assert_eq!(first, second);
    // Code bounds, the thread, 3 frames, and each method's key.
    assert!(m.reads <= 30, "{} reads", m.reads);
    assert!(first_reads > 100, "{first_reads} reads");
    // Forgotten: read again, tables and all.
    jvms.forget(100);
    m.reads = 0;
    assert_eq!(frame_names(&mut m, &process(), &mut jvms, 100, TID), first);
    assert_eq!(m.reads, first_reads);
}

#[test]
fn a_jvm_whose_tables_are_refused_is_left_alone_a_while() {
    let mut m = blocked_jvm();
    m.put_u32(VM_MAJOR_VERSION, 16);
    let mut jvms = Jvms::default();
    let named = frame_names(&mut m, &process(), &mut jvms, 100, TID);
    assert_eq!(named, Err(Miss::Unreadable));
    m.put_u32(VM_MAJOR_VERSION, 17);
    m.reads = 0;
    let named = frame_names(&mut m, &process(), &mut jvms, 100, TID);
    assert_eq!(named, Err(Miss::Unreadable));
    assert_eq!(m.reads, 0);
}

#[test]
fn a_method_pointer_reused_by_another_method_is_read_again() {
    let v = vm17();
    let mut m = blocked_jvm();
    let mut jvms = Jvms::default();
    assert!(frame_names(&mut m, &process(), &mut jvms, 100, TID).is_ok());
    // The class of `take` was unloaded; its Method* now another's.
    let main_loop = put_method(
        &mut m,
        &JavaMethod {
            class: b"app/Main",
            name: b"loop",
            file: Some(b"Main.java"),
            code_size: 60,
            lines: Some(&[(0, 7), (22, 9)]),
        },
    );
    let take_method = method_at_frame(&mut m, 1);
    m.put_u64(take_method + v.method_const, main_loop.const_method);
    m.put_u64(fp_of(1) - 64, bcp_value(&main_loop, 22));
    let named = frame_names(&mut m, &process(), &mut jvms, 100, TID).expect("read");
    assert_eq!(named[0][1], "app.Main.loop (Main.java:9)");
}

#[test]
fn a_runtime_stub_is_named_by_its_blob() {
    let mut n = inlining_nmethod();
    n.name = STUB_NAME;
    let (mut m, blob) = compiled_thread(&n, CALL_RETURN as u64);
    tables17().install(&mut m);
    // The interpreted caller runs `take` at bci 22.
    let take = put_method(&mut m, &TAKE);
    let caller_fp = sp_of(0) + 8 * n.frame_words as u64 + 0x48;
    m.put_u64(caller_fp - 24, take.method);
    m.put_u64(caller_fp - 64, bcp_value(&take, 22));
    let names = |m: &mut Fake| frame_names(m, &process(), &mut Jvms::default(), 100, TID);
    let take = "java.util.concurrent.LinkedBlockingQueue.take (LinkedBlockingQueue.java:435)";
    let want = vec![vec![
        "_complete_monitor_locking_Java".to_string(),
        take.to_string(),
    ]];
    assert_eq!(names(&mut m), Ok(want));
    // A name of no end is cut at 64 bytes; one at a page's end is read
    // to it (the kind's 8 bytes fit); bytes that are not UTF-8 replaced.
    let page = m.alloc_pages(PAGE);
    m.put(page, &[b'x'; PAGE]);
    let tail = b"Stub\xffTail";
    let at_end = page + (PAGE - tail.len()) as u64;
    m.put(at_end, tail);
    for (at, want) in [
        (page, "x".repeat(64)),
        (at_end, "Stub\u{FFFD}Tail".to_string()),
    ] {
        m.put_u64(blob + vm17().blob_name, at);
        assert_eq!(names(&mut m).map(|g| g[0][0].clone()), Ok(want));
    }
}

/// The `Method*` in frame `i`'s slot.
fn method_at_frame(m: &mut Fake, i: u64) -> u64 {
    let mut b = [0; 8];
    assert!(m.read(fp_of(i) - 24, &mut b));
    u64::from_le_bytes(b)
}
