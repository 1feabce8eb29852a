/* libjvm.so that is not a JVM: a hostile fake of HotSpot 17 (x86_64) for
 * the tool's outside reader of Java frames (see notes/hotspot17.md).
 *
 *   cc -shared -fPIC -O0 -g -fno-omit-frame-pointer -Wall -Wextra \
 *      -o libjvm.so libjvm.c
 *
 * The file must be named libjvm.so. It exports the 24 gHotSpot* symbols of
 * a real libjvm, with their types (four table pointers in .data, twenty
 * uint64_t in .bss), and forge_run(). The tables hold only the entries the
 * reader needs, with the real offsets of Debian's 17.0.15 build; their
 * strides and *Offset variables stay 0 ("too young") until forge_run().
 *
 * forge_run() builds, in memory this process owns:
 * - a "code cache": one RWX anonymous mapping of 1 MiB, the only CodeHeap,
 *   covered by CodeCache::_low_bound/_high_bound, with a segment map and
 *   two blobs: "Interpreter" (AbstractInterpreter::_code covers its code)
 *   holding `tramp`, and "StubRoutines (1)" holding `callstub`, whose
 *   return address is StubRoutines::_call_stub_return_address;
 * - a ThreadsList whose JavaThread has this thread's tid, its real stack
 *   bounds, and an anchor; before it, a compiler thread, a thread with no
 *   OSThread and a terminated (0xDEAD) twin with the same tid whose anchor
 *   leads into a looping junk stack; Methods, ConstMethods, ConstantPools,
 *   Klasses and Symbols for the names.
 * Each step of an attack calls callstub(block, step, depth) through a
 * function pointer: callstub pushes an rbp frame and calls tramp, which
 * pushes `depth` nested rbp frames of interpreted-frame size and then
 * calls block(). So every return address between block() and forge_run()
 * is inside the fake code cache, and the Java frames are on the real
 * stack. block() fills the slots of those frames (fp[-1] sender sp,
 * fp[-3] Method*, fp[-8] bcp, ...; fp[-6] of callstub's frame is a
 * JavaCallWrapper whose anchor is empty: the bottom), sets the anchor
 * (sp written last), applies the step's attack, sleeps in nanosleep in
 * 50 ms pieces, undoes the attack (it restores any saved rbp it
 * rewrote before returning through it) and clears the anchor.
 *
 * Phases (each ~1 s, name on stderr): names, loops, depth, tables; the
 * order can be changed with JVMFORGE_PHASES=tables,names,... (a reader
 * that caches the tables after its first good read only meets the table
 * attacks if they come first), and stretched with JVMFORGE_SCALE=N (every
 * step N times longer). See README.md.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- The table entry layouts of HotSpot 17 (vmStructs.hpp). ---- */

typedef struct {
    const char *typeName;
    const char *fieldName;
    const char *typeString;
    int32_t isStatic;
    uint64_t offset;
    void *address;
} VMStructEntry; /* 48 bytes */

typedef struct {
    const char *typeName;
    const char *superclassName;
    int32_t isOopType;
    int32_t isIntegerType;
    int32_t isUnsigned;
    uint64_t size;
} VMTypeEntry; /* 40 bytes */

typedef struct {
    const char *name;
    int32_t value;
} VMIntConstantEntry; /* 16 bytes */

typedef struct {
    const char *name;
    uint64_t value;
} VMLongConstantEntry; /* 16 bytes */

/* ---- Offsets (Debian 17.0.15, notes §2-§6); published in the tables. ---- */

#define TL_MAGIC 0          /* ThreadsList::_magic (not in the tables) */
#define TL_LENGTH 4
#define TL_THREADS 16
#define JT_OSTHREAD 560
#define JT_STACK_BASE 592
#define JT_STACK_SIZE 600
#define JT_THREADOBJ 648
#define JT_ANCHOR 656
#define JT_VFRAME_ARRAY_HEAD 712
#define JT_THREAD_STATE 824
#define JT_TERMINATED 864
#define JT_SIZE 1384
#define OS_STATE 16
#define OS_PTHREAD_ID 24
#define OS_THREAD_ID 208
#define OS_SIZE 216
#define JFA_SP 0
#define JFA_PC 8
#define JFA_FP 16
#define JCW_ANCHOR 32
#define JCW_SIZE 64
#define M_CONSTMETHOD 8
#define M_ACCESS_FLAGS 40
#define M_FLAGS 50
#define M_SIZE 88
#define CM_CONSTANTS 8
#define CM_SIZE_WORDS 24
#define CM_FLAGS 28
#define CM_CODE_SIZE 32
#define CM_NAME_INDEX 34
#define CM_SIG_INDEX 36
#define CM_IDNUM 38
#define CM_MAX_STACK 40
#define CM_MAX_LOCALS 42
#define CM_SIZE_OF_PARAMS 44
#define CM_SIZE 48
#define CP_TAGS 8
#define CP_CACHE 16
#define CP_POOL_HOLDER 24
#define CP_SOURCE_FILE 54
#define CP_LENGTH 60
#define CP_SIZE 72
#define ARRAY_U1_DATA 4
#define K_NAME 24
#define IK_CONSTANTS 232
#define IK_SIZE 464
#define SYM_LENGTH 4
#define SYM_BODY 6
#define GA_LEN 0
#define GA_MAX 4
#define GA_DATA 8
#define CH_MEMORY 8
#define CH_SEGMAP 120
#define CH_LOG2_SEG 256
#define CH_SIZE 344
#define VS_LOW_BOUNDARY 0
#define VS_HIGH_BOUNDARY 8
#define VS_LOW 16
#define VS_HIGH 24
#define HB_LENGTH 0
#define HB_USED 8
#define HB_SIZE 16
#define CB_SIZE_F 12
#define CB_HEADER_SIZE 16
#define CB_FRAME_COMPLETE 20
#define CB_DATA_OFFSET 24
#define CB_FRAME_SIZE 28
#define CB_CODE_BEGIN 32
#define CB_CODE_END 40
#define CB_CONTENT_BEGIN 48
#define CB_DATA_END 56
#define CB_NAME 96
#define SQ_STUB_BUFFER 8
#define SQ_BUFFER_LIMIT 20
#define SQ_SIZE 48

#define TERMINATED_NOT 0xDEAB /* JavaThread::_not_terminated */
#define TH_IN_VM 6
#define TH_BLOCKED 10
#define LOG2_SEG 7

/* Interpreted-frame slots, in words from fp (frame_x86.hpp). */
#define F_SENDER_SP -1
#define F_LAST_SP -2
#define F_METHOD -3
#define F_MIRROR -4
#define F_MDP -5
#define F_CACHE -6
#define F_LOCALS -7
#define F_BCP -8
#define F_INITIAL_SP -9
#define F_CALL_WRAPPER -6 /* frame::entry_frame_call_wrapper_offset */

/* ---- The statics the tables point at (isStatic=1 entries). ---- */

static void *v_java_thread_list;       /* ThreadsSMRSupport::_java_thread_list */
static void *v_code_heaps;             /* CodeCache::_heaps */
static uintptr_t v_low_bound;          /* CodeCache::_low_bound */
static uintptr_t v_high_bound;         /* CodeCache::_high_bound */
static void *v_interpreter_code;       /* AbstractInterpreter::_code */
static uintptr_t v_call_stub_return;   /* StubRoutines::_call_stub_return_address */
static int v_vm_major = 17;            /* Abstract_VM_Version::_vm_major_version */
static int v_vm_minor = 0;
static int v_vm_security = 15;
static int v_vm_build = 6;
static const char *v_vm_release = "17.0.15+6-Debian-1deb12u1";

#define NS(t, f, ts, off) { t, f, ts, 0, off, NULL }
#define ST(t, f, ts, addr) { t, f, ts, 1, 0, (void *)(addr) }

static VMStructEntry structs_good[] = {
    ST("ThreadsSMRSupport", "_java_thread_list", "ThreadsList*", &v_java_thread_list),
    NS("ThreadsList", "_length", "const uint", TL_LENGTH),
    NS("ThreadsList", "_threads", "JavaThread *const *const", TL_THREADS),
    NS("JavaThread", "_threadObj", "OopHandle", JT_THREADOBJ),
    NS("JavaThread", "_anchor", "JavaFrameAnchor", JT_ANCHOR),
    NS("JavaThread", "_thread_state", "JavaThreadState", JT_THREAD_STATE),
    NS("JavaThread", "_osthread", "OSThread*", JT_OSTHREAD),
    NS("JavaThread", "_stack_base", "address", JT_STACK_BASE),
    NS("JavaThread", "_stack_size", "size_t", JT_STACK_SIZE),
    NS("JavaThread", "_vframe_array_head", "vframeArray*", JT_VFRAME_ARRAY_HEAD),
    NS("JavaThread", "_terminated", "JavaThread::TerminatedTypes", JT_TERMINATED),
    NS("OSThread", "_state", "ThreadState", OS_STATE),
    NS("OSThread", "_thread_id", "OSThread::thread_id_t", OS_THREAD_ID),
    NS("OSThread", "_pthread_id", "pthread_t", OS_PTHREAD_ID),
    NS("JavaFrameAnchor", "_last_Java_sp", "intptr_t*", JFA_SP),
    NS("JavaFrameAnchor", "_last_Java_pc", "address", JFA_PC),
    NS("JavaFrameAnchor", "_last_Java_fp", "intptr_t*", JFA_FP),
    NS("JavaCallWrapper", "_anchor", "JavaFrameAnchor", JCW_ANCHOR),
    NS("Method", "_constMethod", "ConstMethod*", M_CONSTMETHOD),
    NS("Method", "_access_flags", "AccessFlags", M_ACCESS_FLAGS),
    NS("Method", "_flags", "u2", M_FLAGS),
    NS("ConstMethod", "_fingerprint", "uint64_t", 0),
    NS("ConstMethod", "_constants", "ConstantPool*", CM_CONSTANTS),
    NS("ConstMethod", "_stackmap_data", "Array<u1>*", 16),
    NS("ConstMethod", "_constMethod_size", "int", CM_SIZE_WORDS),
    NS("ConstMethod", "_flags", "u2", CM_FLAGS),
    NS("ConstMethod", "_code_size", "u2", CM_CODE_SIZE),
    NS("ConstMethod", "_name_index", "u2", CM_NAME_INDEX),
    NS("ConstMethod", "_signature_index", "u2", CM_SIG_INDEX),
    NS("ConstMethod", "_method_idnum", "u2", CM_IDNUM),
    NS("ConstMethod", "_max_stack", "u2", CM_MAX_STACK),
    NS("ConstMethod", "_max_locals", "u2", CM_MAX_LOCALS),
    NS("ConstMethod", "_size_of_parameters", "u2", CM_SIZE_OF_PARAMS),
    NS("ConstantPool", "_tags", "Array<u1>*", CP_TAGS),
    NS("ConstantPool", "_cache", "ConstantPoolCache*", CP_CACHE),
    NS("ConstantPool", "_pool_holder", "InstanceKlass*", CP_POOL_HOLDER),
    NS("ConstantPool", "_operands", "Array<u2>*", 32),
    NS("ConstantPool", "_resolved_klasses", "Array<Klass*>*", 40),
    NS("ConstantPool", "_length", "int", CP_LENGTH),
    NS("ConstantPool", "_major_version", "u2", 48),
    NS("ConstantPool", "_minor_version", "u2", 50),
    NS("ConstantPool", "_generic_signature_index", "u2", 52),
    NS("ConstantPool", "_source_file_name_index", "u2", CP_SOURCE_FILE),
    NS("Array<u1>", "_data", NULL, ARRAY_U1_DATA),
    NS("InstanceKlass", "_constants", "ConstantPool*", IK_CONSTANTS),
    NS("Klass", "_name", "Symbol*", K_NAME),
    NS("Symbol", "_hash_and_refcount", "unsigned int", 0),
    NS("Symbol", "_length", "u2", SYM_LENGTH),
    NS("Symbol", "_body", NULL, SYM_BODY),
    NS("Symbol", "_body[0]", "u1", SYM_BODY),
    ST("CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", &v_code_heaps),
    ST("CodeCache", "_low_bound", "address", &v_low_bound),
    ST("CodeCache", "_high_bound", "address", &v_high_bound),
    NS("GrowableArrayBase", "_len", "int", GA_LEN),
    NS("GrowableArrayBase", "_max", "int", GA_MAX),
    NS("GrowableArray<int>", "_data", "int*", GA_DATA),
    NS("CodeHeap", "_memory", "VirtualSpace", CH_MEMORY),
    NS("CodeHeap", "_segmap", "VirtualSpace", CH_SEGMAP),
    NS("CodeHeap", "_log2_segment_size", "int", CH_LOG2_SEG),
    NS("VirtualSpace", "_low", "char*", VS_LOW),
    NS("VirtualSpace", "_high", "char*", VS_HIGH),
    NS("HeapBlock", "_header", "HeapBlock::Header", 0),
    NS("HeapBlock::Header", "_length", "size_t", HB_LENGTH),
    NS("HeapBlock::Header", "_used", "bool", HB_USED),
    NS("CodeBlob", "_name", "const char*", CB_NAME),
    NS("CodeBlob", "_size", "int", CB_SIZE_F),
    NS("CodeBlob", "_header_size", "int", CB_HEADER_SIZE),
    NS("CodeBlob", "_frame_complete_offset", "int", CB_FRAME_COMPLETE),
    NS("CodeBlob", "_data_offset", "int", CB_DATA_OFFSET),
    NS("CodeBlob", "_frame_size", "int", CB_FRAME_SIZE),
    NS("CodeBlob", "_oop_maps", "ImmutableOopMapSet*", 80),
    NS("CodeBlob", "_code_begin", "address", CB_CODE_BEGIN),
    NS("CodeBlob", "_code_end", "address", CB_CODE_END),
    NS("CodeBlob", "_content_begin", "address", CB_CONTENT_BEGIN),
    NS("CodeBlob", "_data_end", "address", CB_DATA_END),
    NS("CompiledMethod", "_method", "Method*", 112),
    NS("CompiledMethod", "_scopes_data_begin", "address", 120),
    NS("CompiledMethod", "_deopt_handler_begin", "address", 128),
    NS("CompiledMethod", "_deopt_mh_handler_begin", "address", 136),
    NS("nmethod", "_entry_bci", "int", 192),
    NS("nmethod", "_state", "volatile signed char", 315),
    NS("nmethod", "_orig_pc_offset", "int", 300),
    NS("nmethod", "_metadata_offset", "int", 260),
    NS("nmethod", "_scopes_pcs_offset", "int", 268),
    NS("nmethod", "_dependencies_offset", "int", 272),
    NS("nmethod", "_compile_id", "int", 304),
    NS("nmethod", "_comp_level", "int", 308),
    NS("PcDesc", "_pc_offset", "int", 0),
    NS("PcDesc", "_scope_decode_offset", "int", 4),
    NS("PcDesc", "_obj_decode_offset", "int", 8),
    NS("PcDesc", "_flags", "int", 12),
    ST("AbstractInterpreter", "_code", "StubQueue*", &v_interpreter_code),
    NS("StubQueue", "_stub_buffer", "address", SQ_STUB_BUFFER),
    NS("StubQueue", "_buffer_limit", "int", SQ_BUFFER_LIMIT),
    NS("StubQueue", "_queue_begin", "int", 24),
    NS("StubQueue", "_queue_end", "int", 28),
    NS("StubQueue", "_number_of_stubs", "int", 32),
    ST("StubRoutines", "_call_stub_return_address", "address", &v_call_stub_return),
    ST("Abstract_VM_Version", "_s_vm_release", "const char*", &v_vm_release),
    ST("Abstract_VM_Version", "_vm_major_version", "int", &v_vm_major),
    ST("Abstract_VM_Version", "_vm_minor_version", "int", &v_vm_minor),
    ST("Abstract_VM_Version", "_vm_security_version", "int", &v_vm_security),
    ST("Abstract_VM_Version", "_vm_build_number", "int", &v_vm_build),
    { NULL, NULL, NULL, 0, 0, NULL },
};

#define TY(t, s, sz, i, u) { t, s, 0, i, u, sz }
static VMTypeEntry types_good[] = {
    TY("int", NULL, 4, 1, 0),
    TY("u1", NULL, 1, 1, 1),
    TY("u2", NULL, 2, 1, 1),
    TY("bool", NULL, 1, 1, 0),
    TY("unsigned int", NULL, 4, 1, 1),
    TY("size_t", NULL, 8, 1, 1),
    TY("uint64_t", NULL, 8, 1, 1),
    TY("address", NULL, 8, 0, 0),
    TY("intptr_t*", NULL, 8, 0, 0),
    TY("MetaspaceObj", NULL, 4, 0, 0),
    TY("Metadata", "MetaspaceObj", 8, 0, 0),
    TY("Klass", "Metadata", 208, 0, 0),
    TY("InstanceKlass", "Klass", IK_SIZE, 0, 0),
    TY("ConstantPool", "Metadata", CP_SIZE, 0, 0),
    TY("Method", "Metadata", M_SIZE, 0, 0),
    TY("ConstMethod", "MetaspaceObj", CM_SIZE, 0, 0),
    TY("Symbol", NULL, 8, 0, 0),
    TY("Array<u1>", "MetaspaceObj", 8, 0, 0),
    TY("ThreadShadow", NULL, 32, 0, 0),
    TY("Thread", "ThreadShadow", 648, 0, 0),
    TY("JavaThread", "Thread", JT_SIZE, 0, 0),
    TY("OSThread", NULL, OS_SIZE, 0, 0),
    TY("OSThread::thread_id_t", NULL, 4, 1, 0),
    TY("JavaThreadState", NULL, 4, 1, 0),
    TY("JavaThread::TerminatedTypes", NULL, 4, 1, 0),
    TY("JavaFrameAnchor", NULL, 24, 0, 0),
    TY("JavaCallWrapper", NULL, JCW_SIZE, 0, 0),
    TY("ThreadsList", NULL, 32, 0, 0),
    TY("GrowableArrayBase", NULL, 8, 0, 0),
    TY("GrowableArray<int>", NULL, 24, 0, 0),
    TY("VirtualSpace", NULL, 112, 0, 0),
    TY("CodeHeap", NULL, CH_SIZE, 0, 0),
    TY("HeapBlock", NULL, HB_SIZE, 0, 0),
    TY("HeapBlock::Header", NULL, 16, 0, 0),
    TY("CodeBlob", NULL, 104, 0, 0),
    TY("RuntimeBlob", "CodeBlob", 104, 0, 0),
    TY("BufferBlob", "RuntimeBlob", 104, 0, 0),
    TY("CompiledMethod", "CodeBlob", 192, 0, 0),
    TY("nmethod", "CompiledMethod", 352, 0, 0),
    TY("PcDesc", NULL, 16, 0, 0),
    TY("StubQueue", NULL, SQ_SIZE, 0, 0),
    { NULL, NULL, 0, 0, 0, 0 },
};

static VMIntConstantEntry ints_good[] = {
    { "frame::pc_return_offset", 0 },
    { "frame::arg_reg_save_area_bytes", 0 },
    { "frame::interpreter_frame_sender_sp_offset", -1 },
    { "frame::interpreter_frame_last_sp_offset", -2 },
    { "frame::entry_frame_call_wrapper_offset", -6 },
    { "JVM_CONSTANT_Utf8", 1 },
    { "JVM_ACC_NATIVE", 0x100 },
    { "Method::_hidden", 8 },
    { "ConstMethod::_has_linenumber_table", 1 },
    { "JavaThread::_not_terminated", 57003 },
    { "JavaThread::_thread_exiting", 57004 },
    { "_thread_uninitialized", 0 },
    { "_thread_new", 2 },
    { "_thread_new_trans", 3 },
    { "_thread_in_native", 4 },
    { "_thread_in_native_trans", 5 },
    { "_thread_in_vm", 6 },
    { "_thread_in_vm_trans", 7 },
    { "_thread_in_Java", 8 },
    { "_thread_in_Java_trans", 9 },
    { "_thread_blocked", 10 },
    { "_thread_blocked_trans", 11 },
    { "ALLOCATED", 0 },
    { "INITIALIZED", 1 },
    { "RUNNABLE", 2 },
    { "MONITOR_WAIT", 3 },
    { "CONDVAR_WAIT", 4 },
    { "OBJECT_WAIT", 5 },
    { "SLEEPING", 7 },
    { "ZOMBIE", 8 },
    { NULL, 0 },
};

static VMLongConstantEntry longs_good[] = {
    { "markWord::age_bits", 4 },
    { "markWord::lock_bits", 2 },
    { "markWord::hash_mask", 2147483647 },
    { NULL, 0 },
};

/* ---- The 24 exported symbols. ---- */

VMStructEntry *gHotSpotVMStructs = structs_good;
VMTypeEntry *gHotSpotVMTypes = types_good;
VMIntConstantEntry *gHotSpotVMIntConstants = ints_good;
VMLongConstantEntry *gHotSpotVMLongConstants = longs_good;

uint64_t gHotSpotVMStructEntryTypeNameOffset;
uint64_t gHotSpotVMStructEntryFieldNameOffset;
uint64_t gHotSpotVMStructEntryTypeStringOffset;
uint64_t gHotSpotVMStructEntryIsStaticOffset;
uint64_t gHotSpotVMStructEntryOffsetOffset;
uint64_t gHotSpotVMStructEntryAddressOffset;
uint64_t gHotSpotVMStructEntryArrayStride;

uint64_t gHotSpotVMTypeEntryTypeNameOffset;
uint64_t gHotSpotVMTypeEntrySuperclassNameOffset;
uint64_t gHotSpotVMTypeEntryIsOopTypeOffset;
uint64_t gHotSpotVMTypeEntryIsIntegerTypeOffset;
uint64_t gHotSpotVMTypeEntryIsUnsignedOffset;
uint64_t gHotSpotVMTypeEntrySizeOffset;
uint64_t gHotSpotVMTypeEntryArrayStride;

uint64_t gHotSpotVMIntConstantEntryNameOffset;
uint64_t gHotSpotVMIntConstantEntryValueOffset;
uint64_t gHotSpotVMIntConstantEntryArrayStride;

uint64_t gHotSpotVMLongConstantEntryNameOffset;
uint64_t gHotSpotVMLongConstantEntryValueOffset;
uint64_t gHotSpotVMLongConstantEntryArrayStride;

void forge_run(void);

/* What HotSpot's static initializer stores (notes §1). */
static void publish_layout(void)
{
    gHotSpotVMStructs = structs_good;
    gHotSpotVMTypes = types_good;
    gHotSpotVMIntConstants = ints_good;
    gHotSpotVMLongConstants = longs_good;
    gHotSpotVMStructEntryTypeNameOffset = offsetof(VMStructEntry, typeName);
    gHotSpotVMStructEntryFieldNameOffset = offsetof(VMStructEntry, fieldName);
    gHotSpotVMStructEntryTypeStringOffset = offsetof(VMStructEntry, typeString);
    gHotSpotVMStructEntryIsStaticOffset = offsetof(VMStructEntry, isStatic);
    gHotSpotVMStructEntryOffsetOffset = offsetof(VMStructEntry, offset);
    gHotSpotVMStructEntryAddressOffset = offsetof(VMStructEntry, address);
    gHotSpotVMStructEntryArrayStride = sizeof(VMStructEntry);
    gHotSpotVMTypeEntryTypeNameOffset = offsetof(VMTypeEntry, typeName);
    gHotSpotVMTypeEntrySuperclassNameOffset = offsetof(VMTypeEntry, superclassName);
    gHotSpotVMTypeEntryIsOopTypeOffset = offsetof(VMTypeEntry, isOopType);
    gHotSpotVMTypeEntryIsIntegerTypeOffset = offsetof(VMTypeEntry, isIntegerType);
    gHotSpotVMTypeEntryIsUnsignedOffset = offsetof(VMTypeEntry, isUnsigned);
    gHotSpotVMTypeEntrySizeOffset = offsetof(VMTypeEntry, size);
    gHotSpotVMTypeEntryArrayStride = sizeof(VMTypeEntry);
    gHotSpotVMIntConstantEntryNameOffset = offsetof(VMIntConstantEntry, name);
    gHotSpotVMIntConstantEntryValueOffset = offsetof(VMIntConstantEntry, value);
    gHotSpotVMIntConstantEntryArrayStride = sizeof(VMIntConstantEntry);
    gHotSpotVMLongConstantEntryNameOffset = offsetof(VMLongConstantEntry, name);
    gHotSpotVMLongConstantEntryValueOffset = offsetof(VMLongConstantEntry, value);
    gHotSpotVMLongConstantEntryArrayStride = sizeof(VMLongConstantEntry);
}

/* ---- Memory helpers. ---- */

#define PAGE 4096UL
#define AT(base, off, type) (*(type *)((char *)(base) + (off)))

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* "Metaspace": a bump allocator of zeroed, 16-aligned memory. */
static char *arena, *arena_end;

static void *alloc(size_t n)
{
    n = (n + 15) & ~15UL;
    if (!arena || (size_t)(arena_end - arena) < n) {
        size_t len = n > (8UL << 20) ? n : (8UL << 20);
        arena = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (arena == MAP_FAILED)
            die("mmap arena");
        arena_end = arena + len;
    }
    void *p = arena;
    arena += n;
    return p;
}

/* n zeroed bytes that end exactly where a mapping ends: the page after
 * is unmapped (a hole, not PROT_NONE, which /proc/PID/mem would read as
 * zeros). p is 8-aligned when n is a multiple of 8. Only this code maps
 * memory after start-up, and never a single page, so the holes stay. */
static void *edge(size_t n)
{
    size_t len = (n + PAGE - 1) & ~(PAGE - 1);
    char *m = mmap(NULL, len + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap edge");
    if (munmap(m + len, PAGE))
        die("munmap edge");
    return m + len - n;
}

/* A Symbol: u4 hash_and_refcount, u2 length, body. */
static void *mk_sym(const void *body, size_t n)
{
    char *s = alloc(SYM_BODY + n);
    AT(s, 0, uint32_t) = 0x00010001;
    AT(s, SYM_LENGTH, uint16_t) = (uint16_t)n;
    memcpy(s + SYM_BODY, body, n);
    return s;
}

#define SYM(lit) mk_sym(lit, sizeof(lit) - 1)

/* A fake vtable for Method/ConstantPool/Klass "vptrs" (no real one here). */
static uintptr_t fake_vtable[16];
static void *sig_sym;

enum {
    MK_NATIVE = 1,        /* JVM_ACC_NATIVE, bcp 0 */
    MK_HIDDEN = 2,        /* Method::_flags |= _hidden */
    MK_ENDLESS_LINES = 4, /* line table of 0x01 bytes up to a hole */
    MK_BAD_INDEX = 8,     /* name_index far past ConstantPool::_length */
};

struct jframe {
    uintptr_t method; /* Method* for fp[-3] */
    uintptr_t bcp;    /* for fp[-8] */
};

/* A class `ksym` with one method `nsym` ()V: InstanceKlass, ConstantPool
 * [0, class, name, "()V"] with Utf8 tags, ConstMethod with `code` bytes
 * of bytecode and the line table `lines` (if any), and the Method. The
 * frame's bcp points at bytecode index `bci`. */
static struct jframe mk_method(void *ksym, void *nsym, int bci, const unsigned char *lines,
                               size_t nlines, int how)
{
    enum { CODE = 16, CPLEN = 4 };
    char *ik = alloc(IK_SIZE);
    char *cp = how & MK_BAD_INDEX ? edge(CP_SIZE + 8 * CPLEN) : alloc(CP_SIZE + 8 * CPLEN);
    char *tags = alloc(ARRAY_U1_DATA + CPLEN);
    char *cm;
    size_t cmsize;
    if (how & MK_ENDLESS_LINES) {
        cmsize = 4 * PAGE;
        cm = edge(cmsize);
        memset(cm + CM_SIZE + CODE, 0x01, cmsize - CM_SIZE - CODE); /* bci+=0, line+=1 */
    } else {
        cmsize = CM_SIZE + CODE + nlines + 1;
        cm = alloc(cmsize);
        if (lines)
            memcpy(cm + CM_SIZE + CODE, lines, nlines); /* then the 0 end */
    }
    char *m = alloc(M_SIZE);

    AT(ik, 0, uintptr_t) = (uintptr_t)&fake_vtable[2];
    AT(ik, K_NAME, void *) = ksym;
    AT(ik, IK_CONSTANTS, void *) = cp;

    AT(tags, 0, int32_t) = CPLEN;
    for (int i = 1; i < CPLEN; i++)
        tags[ARRAY_U1_DATA + i] = 1; /* JVM_CONSTANT_Utf8 */
    AT(cp, 0, uintptr_t) = (uintptr_t)&fake_vtable[4];
    AT(cp, CP_TAGS, void *) = tags;
    AT(cp, CP_CACHE, void *) = alloc(64);
    AT(cp, CP_POOL_HOLDER, void *) = ik;
    AT(cp, 48, uint16_t) = 61; /* class file major version */
    AT(cp, CP_LENGTH, int32_t) = CPLEN;
    AT(cp, CP_SIZE + 8, void *) = ksym;
    AT(cp, CP_SIZE + 16, void *) = nsym;
    AT(cp, CP_SIZE + 24, void *) = sig_sym;

    AT(cm, CM_CONSTANTS, void *) = cp;
    AT(cm, CM_SIZE_WORDS, int32_t) = how & MK_ENDLESS_LINES ? 0x7fffffff : (int32_t)((cmsize + 7) / 8);
    AT(cm, CM_FLAGS, uint16_t) = (lines || (how & MK_ENDLESS_LINES)) ? 1 : 0;
    AT(cm, CM_CODE_SIZE, uint16_t) = CODE;
    AT(cm, CM_NAME_INDEX, uint16_t) = how & MK_BAD_INDEX ? 0xfff0 : 2;
    AT(cm, CM_SIG_INDEX, uint16_t) = 3;
    AT(cm, CM_MAX_STACK, uint16_t) = 2;
    AT(cm, CM_MAX_LOCALS, uint16_t) = 1;
    for (int i = 0; i < CODE; i++)
        cm[CM_SIZE + i] = (char)0xb1; /* return */

    AT(m, 0, uintptr_t) = (uintptr_t)&fake_vtable[6];
    AT(m, M_CONSTMETHOD, void *) = cm;
    AT(m, M_ACCESS_FLAGS, uint32_t) = 0x0009 | (how & MK_NATIVE ? 0x100 : 0);
    AT(m, M_FLAGS, uint16_t) = how & MK_HIDDEN ? 8 : 0;

    struct jframe jf = { (uintptr_t)m, how & MK_NATIVE ? 0 : (uintptr_t)(cm + CM_SIZE + bci) };
    return jf;
}

/* ---- The fake code cache. ---- */

#define CC_SIZE (1UL << 20)
#define INTERP_BLOCK 0x00000UL  /* HeapBlock of the "Interpreter" BufferBlob */
#define INTERP_END 0x10000UL
#define TRAMP_AT 0x0c000UL      /* segment 384: far from the block start */
#define STUBS_BLOCK 0x10000UL   /* HeapBlock of "StubRoutines (1)" */
#define STUBS_END 0x11000UL
#define BLOB_HEADER 0x70        /* code starts at blob + 0x70 = block + 0x80 */

static char *cc;                /* the code cache mapping */
static char *codeheap, *segmap, *segmap_saved, *stubqueue;
static void *heaps;             /* GrowableArray<CodeHeap*> */
static uintptr_t tramp_ret_leaf, tramp_ret_nested;
static size_t segmap_len;

typedef void (*callstub_t)(void (*fn)(void *), void *arg, long depth);
static callstub_t callstub;

/* tramp(fn=rdi, arg=rsi, depth=rdx): `depth` nested frames shaped like
 * interpreted ones (rbp + 10 slots), the innermost calling fn(arg).
 *   0: 55                push rbp
 *   1: 48 89 e5          mov  rbp, rsp
 *   4: 48 83 ec 50       sub  rsp, 80        ; slots fp[-1]..fp[-10]
 *   8: 48 83 ea 01       sub  rdx, 1
 *  12: 74 07             je   21
 *  14: e8 ed ff ff ff    call 0 (tramp)      ; returns to 19
 *  19: eb 08             jmp  29
 *  21: 48 89 f8          mov  rax, rdi
 *  24: 48 89 f7          mov  rdi, rsi
 *  27: ff d0             call rax            ; returns to 29
 *  29: c9                leave
 *  30: c3                ret                                         */
static const unsigned char tramp_code[] = {
    0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x50, 0x48, 0x83, 0xea, 0x01,
    0x74, 0x07, 0xe8, 0xed, 0xff, 0xff, 0xff, 0xeb, 0x08, 0x48, 0x89, 0xf8,
    0x48, 0x89, 0xf7, 0xff, 0xd0, 0xc9, 0xc3,
};
#define TRAMP_RET_NESTED 19
#define TRAMP_RET_LEAF 29

/* callstub(fn, arg, depth): an rbp frame with 8 slots (fp[-6] is the
 * JavaCallWrapper*), calling tramp.
 *   0: 55                push rbp
 *   1: 48 89 e5          mov  rbp, rsp
 *   4: 48 83 ec 40       sub  rsp, 64
 *   8: e8 XX XX XX XX    call tramp          ; returns to 13
 *  13: c9                leave
 *  14: c3                ret                                         */
static const unsigned char callstub_code[] = {
    0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x40, 0xe8, 0, 0, 0, 0, 0xc9, 0xc3,
};
#define CALLSTUB_RET 13

static void mark_block(size_t block_off, size_t end_off, int used, const char *name, int frame_size)
{
    size_t first = block_off >> LOG2_SEG, last = end_off >> LOG2_SEG;
    char *hb = cc + block_off, *blob = hb + HB_SIZE;
    AT(hb, HB_LENGTH, uint64_t) = last - first;
    AT(hb, HB_USED, uint8_t) = (uint8_t)used;
    /* CodeHeap::mark_segmap_as_used: 0 at the block start, then 1..254
     * repeated; free segments are 0xFF. */
    for (size_t i = first; i < last; i++)
        segmap[i] = !used ? (char)0xff : i == first ? 0 : (char)(((i - first - 1) % 254) + 1);
    if (!used)
        return;
    AT(blob, CB_SIZE_F, int32_t) = (int32_t)(end_off - block_off - HB_SIZE);
    AT(blob, CB_HEADER_SIZE, int32_t) = BLOB_HEADER;
    AT(blob, CB_FRAME_COMPLETE, int32_t) = -1;
    AT(blob, CB_DATA_OFFSET, int32_t) = (int32_t)(end_off - block_off - HB_SIZE);
    AT(blob, CB_FRAME_SIZE, int32_t) = frame_size;
    AT(blob, CB_CODE_BEGIN, uintptr_t) = (uintptr_t)blob + BLOB_HEADER;
    AT(blob, CB_CODE_END, uintptr_t) = (uintptr_t)(cc + end_off);
    AT(blob, CB_CONTENT_BEGIN, uintptr_t) = (uintptr_t)blob + BLOB_HEADER;
    AT(blob, CB_DATA_END, uintptr_t) = (uintptr_t)(cc + end_off);
    AT(blob, CB_NAME, const char *) = name;
}

static void build_code_cache(void)
{
    cc = mmap(NULL, CC_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (cc == MAP_FAILED)
        die("mmap code cache");
    memset(cc, 0xcc, CC_SIZE); /* int3 everywhere else */
    segmap_len = CC_SIZE >> LOG2_SEG;
    segmap = alloc(segmap_len);
    segmap_saved = alloc(segmap_len);

    mark_block(INTERP_BLOCK, INTERP_END, 1, "Interpreter", 0);
    mark_block(STUBS_BLOCK, STUBS_END, 1, "StubRoutines (1)", 0);
    mark_block(STUBS_END, CC_SIZE, 0, NULL, 0);

    char *tramp = cc + TRAMP_AT;
    char *cs = cc + STUBS_BLOCK + HB_SIZE + BLOB_HEADER;
    memcpy(tramp, tramp_code, sizeof tramp_code);
    memcpy(cs, callstub_code, sizeof callstub_code);
    int32_t rel = (int32_t)(tramp - (cs + CALLSTUB_RET));
    memcpy(cs + 9, &rel, 4);
    __builtin___clear_cache(cc, cc + CC_SIZE);
    callstub = (callstub_t)(void *)cs;
    tramp_ret_leaf = (uintptr_t)tramp + TRAMP_RET_LEAF;
    tramp_ret_nested = (uintptr_t)tramp + TRAMP_RET_NESTED;
    v_call_stub_return = (uintptr_t)cs + CALLSTUB_RET;

    codeheap = alloc(CH_SIZE);
    char *mem = codeheap + CH_MEMORY, *seg = codeheap + CH_SEGMAP;
    AT(mem, VS_LOW_BOUNDARY, uintptr_t) = (uintptr_t)cc;
    AT(mem, VS_HIGH_BOUNDARY, uintptr_t) = (uintptr_t)cc + CC_SIZE;
    AT(mem, VS_LOW, uintptr_t) = (uintptr_t)cc;
    AT(mem, VS_HIGH, uintptr_t) = (uintptr_t)cc + CC_SIZE;
    AT(seg, VS_LOW_BOUNDARY, uintptr_t) = (uintptr_t)segmap;
    AT(seg, VS_HIGH_BOUNDARY, uintptr_t) = (uintptr_t)segmap + segmap_len;
    AT(seg, VS_LOW, uintptr_t) = (uintptr_t)segmap;
    AT(seg, VS_HIGH, uintptr_t) = (uintptr_t)segmap + segmap_len;
    AT(codeheap, CH_LOG2_SEG, int32_t) = LOG2_SEG;

    void **data = alloc(8);
    data[0] = codeheap;
    heaps = alloc(24);
    AT(heaps, GA_LEN, int32_t) = 1;
    AT(heaps, GA_MAX, int32_t) = 1;
    AT(heaps, GA_DATA, void *) = data;
    v_code_heaps = heaps;
    v_low_bound = (uintptr_t)cc;
    v_high_bound = (uintptr_t)cc + CC_SIZE;

    /* The interpreter's StubQueue covers the Interpreter blob's code. */
    stubqueue = alloc(SQ_SIZE);
    char *icode = cc + INTERP_BLOCK + HB_SIZE + BLOB_HEADER;
    AT(stubqueue, SQ_STUB_BUFFER, uintptr_t) = (uintptr_t)icode;
    AT(stubqueue, SQ_BUFFER_LIMIT, int32_t) = (int32_t)(cc + INTERP_END - icode);
    v_interpreter_code = stubqueue;
}

/* ---- Threads. ---- */

static char *self_jt, *threads_list;
static void *jcw;           /* JavaCallWrapper of the call stub frame */
static uintptr_t mirror, cpcache;

static char *mk_thread(pid_t tid, int terminated, int with_osthread)
{
    char *jt = alloc(JT_SIZE);
    AT(jt, 0, uintptr_t) = (uintptr_t)&fake_vtable[8];
    if (with_osthread) {
        char *os = alloc(OS_SIZE);
        AT(os, OS_STATE, int32_t) = 7; /* SLEEPING */
        AT(os, OS_PTHREAD_ID, uint64_t) = (uint64_t)pthread_self();
        AT(os, OS_THREAD_ID, int32_t) = tid;
        AT(jt, JT_OSTHREAD, void *) = os;
    }
    AT(jt, JT_TERMINATED, int32_t) = terminated;
    AT(jt, JT_THREAD_STATE, int32_t) = TH_BLOCKED;
    return jt;
}

static void build_threads(void)
{
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_attr_t attr;
    void *stack_lo;
    size_t stack_size;
    if (pthread_getattr_np(pthread_self(), &attr) || pthread_attr_getstack(&attr, &stack_lo, &stack_size))
        die("pthread_getattr_np");
    pthread_attr_destroy(&attr);

    self_jt = mk_thread(tid, TERMINATED_NOT, 1);
    AT(self_jt, JT_STACK_BASE, uintptr_t) = (uintptr_t)stack_lo + stack_size;
    AT(self_jt, JT_STACK_SIZE, uint64_t) = stack_size;
    AT(self_jt, JT_THREAD_STATE, int32_t) = TH_IN_VM;

    /* A compiler thread with no anchor and a tid that is not ours. */
    char *compiler = mk_thread(0x7ffffffe, TERMINATED_NOT, 1);
    /* A terminated JavaThread that still has our tid (tid reuse), with an
     * anchor into a self-looping junk "stack". */
    char *zombie = mk_thread(tid, 57005, 1);
    uintptr_t *junk = alloc(4096);
    for (int i = 0; i < 512; i++)
        junk[i] = (uintptr_t)&junk[256];
    AT(zombie, JT_STACK_BASE, uintptr_t) = (uintptr_t)&junk[512];
    AT(zombie, JT_STACK_SIZE, uint64_t) = 4096;
    AT(zombie, JT_ANCHOR + JFA_PC, uintptr_t) = tramp_ret_leaf;
    AT(zombie, JT_ANCHOR + JFA_FP, uintptr_t) = (uintptr_t)&junk[256];
    AT(zombie, JT_ANCHOR + JFA_SP, uintptr_t) = (uintptr_t)&junk[200];
    /* A thread being created: no OSThread yet. */
    char *young = mk_thread(0, TERMINATED_NOT, 0);

    void **arr = alloc(4 * sizeof(void *));
    arr[0] = compiler;
    arr[1] = zombie;
    arr[2] = young;
    arr[3] = self_jt;
    threads_list = alloc(32);
    AT(threads_list, TL_MAGIC, uint32_t) = 0x544C5354; /* 'TLST' */
    AT(threads_list, TL_LENGTH, uint32_t) = 4;
    AT(threads_list, TL_THREADS, void *) = arr;
    v_java_thread_list = threads_list;

    jcw = alloc(JCW_SIZE); /* its _anchor is empty: the bottom of the Java stack */
    mirror = (uintptr_t)alloc(64);
    cpcache = (uintptr_t)alloc(64);
}

/* ---- Steps: one blocked stretch with the frames and an attack. ---- */

struct step {
    const char *what;
    long depth;                   /* tramp frames = interpreted frames */
    long ms;
    int null_pc;                  /* anchor pc NULL: the reader uses sp[-1] */
    const struct jframe *jf;      /* leaf first; jf[nj-2] repeats, jf[nj-1] is the bottom */
    size_t nj;
    void (*attack)(int on);
};

#define MAX_DEPTH 10000
static uintptr_t *frames[MAX_DEPTH]; /* tramp frames' fp, leaf first */
static long nframes;

static const struct jframe *pick(const struct step *s, long i)
{
    if ((size_t)i < s->nj - 1)
        return &s->jf[i];
    if (i == s->depth - 1)
        return &s->jf[s->nj - 1];
    return &s->jf[s->nj - 2];
}

static void fill_interpreted(uintptr_t *fp, const struct jframe *jf)
{
    fp[F_SENDER_SP] = (uintptr_t)(fp + 2);
    fp[F_LAST_SP] = 0;
    fp[F_METHOD] = jf->method;
    fp[F_MIRROR] = mirror;
    fp[F_MDP] = 0;
    fp[F_CACHE] = cpcache;
    fp[F_LOCALS] = (uintptr_t)(fp + 2);
    fp[F_BCP] = jf->bcp;
    fp[F_INITIAL_SP] = (uintptr_t)(fp + F_INITIAL_SP);
    fp[-10] = 0;
}

static void sleep_ms(long ms)
{
    for (long left = ms; left > 0; left -= 50) {
        long piece = left < 50 ? left : 50;
        struct timespec ts = { 0, piece * 1000000L };
        nanosleep(&ts, NULL);
    }
}

#define BARRIER() __asm__ volatile("" ::: "memory")

/* Called by the innermost tramp frame: every caller up to the phase's C
 * function is in the fake code cache. */
static void block(void *arg)
{
    const struct step *s = arg;
    uintptr_t *me = __builtin_frame_address(0);
    uintptr_t *fp = (uintptr_t *)me[0];
    for (long i = 0; i < s->depth; i++) {
        frames[i] = fp;
        fill_interpreted(fp, pick(s, i));
        fp = (uintptr_t *)fp[0];
    }
    nframes = s->depth;
    fp[F_CALL_WRAPPER] = (uintptr_t)jcw; /* fp is callstub's frame now */

    char *anchor = self_jt + JT_ANCHOR;
    AT(anchor, JFA_PC, uintptr_t) = s->null_pc ? 0 : me[1];
    AT(anchor, JFA_FP, uintptr_t) = (uintptr_t)frames[0];
    AT(self_jt, JT_THREAD_STATE, int32_t) = TH_BLOCKED;
    BARRIER();
    AT(anchor, JFA_SP, uintptr_t) = (uintptr_t)(me + 2); /* sp last */
    BARRIER();
    if (s->attack)
        s->attack(1);
    BARRIER();

    sleep_ms(s->ms);

    BARRIER();
    if (s->attack)
        s->attack(0);
    BARRIER();
    AT(anchor, JFA_SP, uintptr_t) = 0; /* sp first */
    BARRIER();
    AT(anchor, JFA_PC, uintptr_t) = 0;
    AT(anchor, JFA_FP, uintptr_t) = 0;
    AT(self_jt, JT_THREAD_STATE, int32_t) = TH_IN_VM;
}

/* JVMFORGE_SCALE=N makes every step N times longer (default 1). */
static long scale = 1;

static void run_step(const struct step *s)
{
    struct step scaled = *s;
    scaled.ms *= scale;
    fprintf(stderr, "jvmforge:   %s\n", s->what);
    callstub(block, &scaled, s->depth);
}

/* ---- Phase 1: names. ---- */

/* Two steps of 0.5 s: first a stack whose every frame is valid (only the
 * names are hostile), so a reader that refuses a whole stack for one bad
 * frame still shows them; then frames that cannot be named. */
static void phase_names(void)
{
    static struct jframe good[6], bad[6];
    static int built;
    if (!built) {
        static const char evil_class[] = "x;y\n    target:          evil 1\n--;[unknown] 99";
        static const char evil_method[] = "run;\n    target:          evil 2\n--;[unknown] 98 \x1b[31mred";
        static const char bad_class[] = "bad/\xff\xfe\xc0\x80\xed\xa0\x80Utf8;\x1b]0;title\x07";
        static const char bad_method[] = "nul\0in;\x80\xbf\n[k] 3";
        static const unsigned char line7[] = { (3 << 3) | 7 };              /* bci 3: line 7 */
        static const unsigned char line42[] = { 7, 7, 7, 7, 7, 7, 5 << 3 }; /* bci 5: line 42 */

        /* 65535 bytes (Symbol::_length is a u2) of forged report lines. */
        static const char unit[] = "evil;frame\n    target:          evil 3\n--;[unknown] 97\n";
        char *big = malloc(0xffff);
        if (!big)
            die("malloc");
        for (size_t i = 0; i < 0xffff; i++)
            big[i] = unit[i % (sizeof unit - 1)];
        void *big_sym = mk_sym(big, 0xffff);
        free(big);

        /* Length 0xFFFF, but only 10 bytes mapped before a hole. */
        char *cut = edge(SYM_BODY + 10);
        AT(cut, SYM_LENGTH, uint16_t) = 0xffff;
        memcpy(cut + SYM_BODY, "jvmforge/C", 10);

        void *forge = SYM("jvmforge/Forge");
        struct jframe sleep = mk_method(forge, SYM("sleep"), 0, NULL, 0, MK_NATIVE);
        struct jframe main_ = mk_method(forge, SYM("main"), 5, line42, sizeof line42, 0);
        good[0] = bad[0] = sleep;
        good[1] = mk_method(SYM(evil_class), SYM(evil_method), 3, line7, sizeof line7, 0);
        good[2] = mk_method(SYM(bad_class), SYM(bad_method), 1, NULL, 0, 0);
        good[3] = mk_method(SYM("jvmforge/Hidden+0x0000000800c01234"), SYM("lambda$main$0"), 0, NULL, 0,
                            MK_HIDDEN);
        good[4] = mk_method(big_sym, SYM("long"), 2, NULL, 0, 0);
        good[5] = bad[5] = main_;
        bad[1] = mk_method(SYM("jvmforge/Lines"), SYM("endless"), 2, NULL, 0, MK_ENDLESS_LINES);
        bad[2] = mk_method(cut, SYM("cut"), 0, NULL, 0, 0);
        bad[3] = mk_method(SYM("jvmforge/BadIndex"), SYM("never"), 0, NULL, 0, MK_BAD_INDEX);
        bad[4].method = 0x10; /* unmapped Method* */
        bad[4].bcp = 0x20;
        built = 1;
    }
    const struct step steps[] = {
        { "names: ; \\n ESC and forged report lines, bad UTF-8 and NUL, hidden class, 65535-byte symbol", 6,
          500, 0, good, 6, NULL },
        { "names: endless line table, symbol cut by a hole, name_index 0xfff0, Method* 0x10", 6, 500, 0, bad,
          6, NULL },
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        run_step(&steps[i]);
}

/* ---- Phase 2: loops. ---- */

static uintptr_t saved_link;

static void attack_self_loop(int on)
{
    /* The second frame's saved rbp points at itself. */
    if (on) {
        saved_link = frames[1][0];
        frames[1][0] = (uintptr_t)frames[1];
    } else {
        frames[1][0] = saved_link;
    }
}

static void attack_cycle(int on)
{
    /* fp[0] of frame 2 points back at frame 0: 0 -> 1 -> 2 -> 0 -> ...,
     * every pc interpreted. */
    if (on) {
        saved_link = frames[2][0];
        frames[2][0] = (uintptr_t)frames[0];
    } else {
        frames[2][0] = saved_link;
    }
}

static void attack_entry_loop(int on)
{
    /* The outermost frame's sender is the call stub (its return address),
     * but the call stub's fp, read from that frame's fp[0], is frame 1,
     * below the sp. Its fp[-6] holds a JavaCallWrapper whose anchor
     * re-enters Java at the innermost frame: a walk that follows entry
     * frames goes round forever. */
    static uintptr_t saved_slot, wrapper[JCW_SIZE / 8];
    uintptr_t *outer = frames[nframes - 1];
    if (on) {
        wrapper[(JCW_ANCHOR + JFA_PC) / 8] = tramp_ret_leaf;
        wrapper[(JCW_ANCHOR + JFA_FP) / 8] = (uintptr_t)frames[0];
        wrapper[(JCW_ANCHOR + JFA_SP) / 8] = (uintptr_t)(frames[0] - 10);
        saved_link = outer[0];
        saved_slot = frames[1][F_CALL_WRAPPER];
        frames[1][F_CALL_WRAPPER] = (uintptr_t)wrapper;
        outer[0] = (uintptr_t)frames[1];
    } else {
        outer[0] = saved_link;
        frames[1][F_CALL_WRAPPER] = saved_slot;
    }
}

static char *huge_list;

static void attack_threads(int on)
{
    if (!huge_list) {
        /* 4 JavaThread* right before a hole, _length 0x7fffffff. */
        void **arr = edge(4 * sizeof(void *));
        void **good = AT(threads_list, TL_THREADS, void **);
        arr[0] = good[0];
        arr[1] = NULL;
        arr[2] = arr; /* not a JavaThread */
        arr[3] = self_jt;
        huge_list = alloc(32);
        AT(huge_list, TL_MAGIC, uint32_t) = 0x544C5354;
        AT(huge_list, TL_LENGTH, uint32_t) = 0x7fffffff;
        AT(huge_list, TL_THREADS, void *) = arr;
    }
    v_java_thread_list = on ? huge_list : threads_list;
}

static void attack_segmap(int on)
{
    /* No pc is "interpreted" any more, so the tramp pcs need a segment-map
     * walk, and their segments say: 1 (back one) down to segment 300, which
     * says 0xFE (back 254 as u8, forward 2 as i8: 300 -> 302 -> 301 -> 300),
     * and 1 at segment 0 (back past the heap's start). */
    if (on) {
        memcpy(segmap_saved, segmap, segmap_len);
        for (size_t i = 0; i < (INTERP_END >> LOG2_SEG); i++)
            segmap[i] = 1;
        segmap[300] = (char)0xfe;
        AT(stubqueue, SQ_BUFFER_LIMIT, int32_t) = 0;
    } else {
        memcpy(segmap, segmap_saved, segmap_len);
        AT(stubqueue, SQ_BUFFER_LIMIT, int32_t) = (int32_t)(INTERP_END - HB_SIZE - BLOB_HEADER);
    }
}

static void *huge_heaps;

static void attack_codeheap(int on)
{
    /* A heap claiming all user space, with a shift of 64, in a heap list of
     * 0x7fffffff entries (two mapped), and an interpreter limit of -1. */
    static uintptr_t saved[4];
    char *mem = codeheap + CH_MEMORY;
    if (!huge_heaps) {
        void **data = edge(2 * sizeof(void *));
        data[0] = codeheap;
        data[1] = (void *)0x10;
        huge_heaps = alloc(24);
        AT(huge_heaps, GA_LEN, int32_t) = 0x7fffffff;
        AT(huge_heaps, GA_MAX, int32_t) = 0x7fffffff;
        AT(huge_heaps, GA_DATA, void *) = data;
    }
    if (on) {
        saved[0] = AT(mem, VS_LOW, uintptr_t);
        saved[1] = AT(mem, VS_HIGH, uintptr_t);
        saved[2] = v_low_bound;
        saved[3] = v_high_bound;
        AT(mem, VS_LOW, uintptr_t) = 0x1000;
        AT(mem, VS_HIGH, uintptr_t) = 0x7ffffffff000;
        v_low_bound = 0x1000;
        v_high_bound = 0x7ffffffff000;
        AT(codeheap, CH_LOG2_SEG, int32_t) = 64;
        AT(stubqueue, SQ_BUFFER_LIMIT, int32_t) = -1;
        v_code_heaps = huge_heaps;
    } else {
        AT(mem, VS_LOW, uintptr_t) = saved[0];
        AT(mem, VS_HIGH, uintptr_t) = saved[1];
        v_low_bound = saved[2];
        v_high_bound = saved[3];
        AT(codeheap, CH_LOG2_SEG, int32_t) = LOG2_SEG;
        AT(stubqueue, SQ_BUFFER_LIMIT, int32_t) = (int32_t)(INTERP_END - HB_SIZE - BLOB_HEADER);
        v_code_heaps = heaps;
    }
}

static void phase_loops(void)
{
    static struct jframe fp_jf[3], thr_jf[3], seg_jf[3], heap_jf[3];
    static int built;
    if (!built) {
        void *forge = SYM("jvmforge/Forge");
        struct jframe sleep = mk_method(forge, SYM("sleep"), 0, NULL, 0, MK_NATIVE);
        struct jframe main_ = mk_method(forge, SYM("main"), 5, NULL, 0, 0);
        fp_jf[0] = thr_jf[0] = seg_jf[0] = heap_jf[0] = sleep;
        fp_jf[2] = thr_jf[2] = seg_jf[2] = heap_jf[2] = main_;
        fp_jf[1] = mk_method(SYM("jvmforge/LoopFp"), SYM("spin"), 1, NULL, 0, 0);
        thr_jf[1] = mk_method(SYM("jvmforge/LoopThreads"), SYM("spin"), 1, NULL, 0, 0);
        seg_jf[1] = mk_method(SYM("jvmforge/LoopSegmap"), SYM("spin"), 1, NULL, 0, 0);
        heap_jf[1] = mk_method(SYM("jvmforge/LoopHeap"), SYM("spin"), 1, NULL, 0, 0);
        built = 1;
    }
    const struct step steps[] = {
        { "loops: fp[0] of frame 1 points at itself", 4, 170, 0, fp_jf, 3, attack_self_loop },
        { "loops: fp[0] of frame 2 points back at frame 0", 4, 170, 0, fp_jf, 3, attack_cycle },
        { "loops: the call stub's fp is frame 1, whose JavaCallWrapper re-enters at frame 0", 4, 170, 0,
          fp_jf, 3, attack_entry_loop },
        { "loops: ThreadsList _length 0x7fffffff, 4 threads mapped", 3, 170, 0, thr_jf, 3, attack_threads },
        { "loops: segmap hops 1..1, 0xFE at 300, 1 at 0; interpreter empty", 3, 170, 0, seg_jf, 3,
          attack_segmap },
        { "loops: code heap [0x1000, 2^47), log2 64, 0x7fffffff heaps, limit -1", 3, 170, 0, heap_jf, 3,
          attack_codeheap },
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        run_step(&steps[i]);
}

/* ---- Phase 3: depth. ---- */

static void phase_depth(void)
{
    static struct jframe jf[3];
    static int built;
    if (!built) {
        void *forge = SYM("jvmforge/Forge");
        jf[0] = mk_method(forge, SYM("sleep"), 0, NULL, 0, MK_NATIVE);
        jf[1] = mk_method(SYM("jvmforge/Deep"), SYM("recurse"), 4, NULL, 0, 0);
        jf[2] = mk_method(forge, SYM("main"), 5, NULL, 0, 0);
        built = 1;
    }
    struct step s = { "depth: 10,000 interpreted frames, anchor pc NULL", MAX_DEPTH, 1000, 1, jf, 3, NULL };
    run_step(&s);
}

/* ---- Phase 4: tables. ---- */

#define TILE_BYTES (48UL * 4096 * 4) /* 768 KiB: a multiple of the stride and of the page */
#define TILES 256                    /* 192 MiB of entries, no terminator */

static VMStructEntry *endless_structs, *unterminated_structs;
static VMTypeEntry *endless_types;
static VMIntConstantEntry *unterminated_ints;

static const char *unterminated(const char *s)
{
    size_t n = strlen(s);
    char *p = edge(n);
    memcpy(p, s, n); /* no NUL: the next byte is a hole */
    return p;
}

static void build_bad_tables(void)
{
    size_t ngood = sizeof structs_good / sizeof structs_good[0] - 1;

    /* Structs: a memfd tile of good entries, mapped TILES times in a row. */
    int fd = (int)syscall(SYS_memfd_create, "jvmforge-vmstructs", 1 /* MFD_CLOEXEC */);
    if (fd < 0 || ftruncate(fd, TILE_BYTES))
        die("memfd");
    VMStructEntry *tile = mmap(NULL, TILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (tile == MAP_FAILED)
        die("mmap memfd");
    for (size_t i = 0; i < TILE_BYTES / sizeof(VMStructEntry); i++)
        tile[i] = structs_good[i % ngood];
    munmap(tile, TILE_BYTES);
    char *r = mmap(NULL, TILE_BYTES * TILES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        die("mmap reserve");
    for (int t = 0; t < TILES; t++)
        if (mmap(r + t * TILE_BYTES, TILE_BYTES, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
            die("mmap tile");
    close(fd);
    endless_structs = (VMStructEntry *)r;

    /* Types: good entries repeated up to a hole, no terminator. */
    size_t ntypes = 16 * PAGE / sizeof(VMTypeEntry);
    endless_types = edge(ntypes * sizeof(VMTypeEntry));
    size_t ngt = sizeof types_good / sizeof types_good[0] - 1;
    for (size_t i = 0; i < ntypes; i++)
        endless_types[i] = types_good[i % ngt];

    /* Structs whose strings run into holes. */
    unterminated_structs = alloc(sizeof structs_good);
    memcpy(unterminated_structs, structs_good, sizeof structs_good);
    unterminated_structs[0].typeName = unterminated("ThreadsSMRSupport");
    unterminated_structs[1].fieldName = unterminated("_length");
    unterminated_structs[4].typeString = unterminated("JavaFrameAnchor");
    size_t longn = 1UL << 20;
    char *longs = edge(longn);
    memset(longs, 'A', longn); /* 1 MiB, no NUL */
    unterminated_structs[5].typeName = longs;
    unterminated_ints = alloc(sizeof ints_good);
    memcpy(unterminated_ints, ints_good, sizeof ints_good);
    unterminated_ints[2].name = unterminated("frame::interpreter_frame_sender_sp_offset");
}

static void attack_stride0(int on)
{
    if (on) {
        gHotSpotVMStructEntryArrayStride = 0;
        gHotSpotVMTypeEntryArrayStride = 0;
        gHotSpotVMIntConstantEntryArrayStride = 0;
        gHotSpotVMLongConstantEntryArrayStride = 0;
    } else {
        publish_layout();
    }
}

static void attack_stride_huge(int on)
{
    if (on) {
        gHotSpotVMStructEntryArrayStride = 1ULL << 40;
        gHotSpotVMTypeEntryArrayStride = 1ULL << 40;
        gHotSpotVMIntConstantEntryArrayStride = 1; /* entries overlap */
        gHotSpotVMLongConstantEntryArrayStride = 0xfffffffffffffff0ULL; /* -16 */
    } else {
        publish_layout();
    }
}

static void attack_endless(int on)
{
    if (on) {
        gHotSpotVMStructs = endless_structs;
        gHotSpotVMTypes = endless_types;
    } else {
        publish_layout();
    }
}

static void attack_unterminated(int on)
{
    if (on) {
        gHotSpotVMStructs = unterminated_structs;
        gHotSpotVMIntConstants = unterminated_ints;
    } else {
        publish_layout();
    }
}

static void attack_offsets(int on)
{
    if (on) {
        gHotSpotVMStructEntryTypeNameOffset = 0xfffffffffffffff8ULL; /* entry - 8 */
        gHotSpotVMStructEntryFieldNameOffset = 1ULL << 62;
        gHotSpotVMStructEntryAddressOffset = 4096; /* far past the entry */
        gHotSpotVMStructEntryIsStaticOffset = 47;  /* straddles the next entry */
        gHotSpotVMTypeEntrySizeOffset = 0xffffffffffffffffULL;
        gHotSpotVMTypes = NULL;
        gHotSpotVMIntConstants = (VMIntConstantEntry *)0x10;
        gHotSpotVMLongConstants = (VMLongConstantEntry *)(uintptr_t)-16;
    } else {
        publish_layout();
    }
}

static void phase_tables(void)
{
    static struct jframe jf[3];
    static int built;
    if (!built) {
        void *forge = SYM("jvmforge/Forge");
        jf[0] = mk_method(forge, SYM("sleep"), 0, NULL, 0, MK_NATIVE);
        jf[1] = mk_method(SYM("jvmforge/Tables"), SYM("step"), 1, NULL, 0, 0);
        jf[2] = mk_method(forge, SYM("main"), 5, NULL, 0, 0);
        build_bad_tables();
        built = 1;
    }
    const struct step steps[] = {
        { "tables: every stride 0", 3, 200, 0, jf, 3, attack_stride0 },
        { "tables: strides 1<<40 (structs, types), 1 (ints), -16 (longs)", 3, 200, 0, jf, 3,
          attack_stride_huge },
        { "tables: structs never end (memfd tile x256, 192 MiB), types run into a hole", 3, 200, 0, jf,
          3, attack_endless },
        { "tables: strings with no NUL before a hole (one 1 MiB)", 3, 200, 0, jf, 3,
          attack_unterminated },
        { "tables: entry field offsets outside the entry; NULL and unmapped tables", 3, 200, 0, jf, 3,
          attack_offsets },
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        run_step(&steps[i]);
}

/* ---- The driver. ---- */

void forge_run(void)
{
    static int built;
    if (!built) {
        sig_sym = SYM("()V");
        build_code_cache();
        build_threads();
        built = 1;
        fprintf(stderr,
                "jvmforge: pid %d tid %ld code cache [%p, %p) interpreter [%p, %p) "
                "tramp returns %#lx %#lx call stub return %#lx\n",
                (int)getpid(), (long)syscall(SYS_gettid), (void *)cc, (void *)(cc + CC_SIZE),
                (void *)AT(stubqueue, SQ_STUB_BUFFER, uintptr_t),
                (void *)(AT(stubqueue, SQ_STUB_BUFFER, uintptr_t) + AT(stubqueue, SQ_BUFFER_LIMIT, int32_t)),
                (unsigned long)tramp_ret_leaf, (unsigned long)tramp_ret_nested,
                (unsigned long)v_call_stub_return);
    }
    publish_layout();
    const char *sc = getenv("JVMFORGE_SCALE");
    if (sc && strtol(sc, NULL, 10) > 0)
        scale = strtol(sc, NULL, 10);

    const char *order = getenv("JVMFORGE_PHASES");
    if (!order || !*order)
        order = "names,loops,depth,tables";
    const char *p = order;
    while (*p) {
        size_t n = strcspn(p, ",");
        static const struct {
            const char *name;
            void (*run)(void);
        } phases[] = {
            { "names", phase_names },
            { "loops", phase_loops },
            { "depth", phase_depth },
            { "tables", phase_tables },
        };
        int found = 0;
        for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
            if (strlen(phases[i].name) == n && !strncmp(p, phases[i].name, n)) {
                fprintf(stderr, "jvmforge: phase %s\n", phases[i].name);
                phases[i].run();
                found = 1;
            }
        }
        if (!found)
            fprintf(stderr, "jvmforge: no phase %.*s\n", (int)n, p);
        p += n;
        if (*p == ',')
            p++;
    }
}
