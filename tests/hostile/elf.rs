//! Hand-packed x86-64 ELF files for the hostile tests: one `PT_LOAD`
//! segment (file offset 0, address 0) holding nanosleep stubs the victim
//! calls, then whatever sections a case needs. Section data can be real
//! bytes, a hole (a sparse region nothing is written to) or an alias of
//! another section's bytes. Also builds the DWARF of a deep inline chain
//! and a zlib stream of zeros by hand.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// `mov rax,rdi; mov rdi,rsi; mov rsi,rdx; syscall; ret`: called as
/// `long stub(long nr, void *a, void *b)`, it makes system call `nr`.
pub const STUB: [u8; 12] = [
    0x48, 0x89, 0xf8, 0x48, 0x89, 0xf7, 0x48, 0x89, 0xd6, 0x0f, 0x05, 0xc3,
];
/// File offset (and address) of the first stub.
pub const STUB_OFFSET: u64 = 0x800;
/// Distance between stubs.
pub const STUB_STRIDE: u64 = 0x10;
/// The loaded segment: the first page.
pub const CODE_SIZE: u64 = 0x1000;

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHF_ALLOC: u64 = 0x2;
pub const SHF_EXECINSTR: u64 = 0x4;
pub const SHF_COMPRESSED: u64 = 0x800;
const ELFCOMPRESS_ZLIB: u32 = 1;

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// The address of stub `i`.
pub fn stub_addr(i: usize) -> u64 {
    STUB_OFFSET + i as u64 * STUB_STRIDE
}

/// Where a section's bytes come from.
#[derive(Clone, Debug)]
pub enum Body {
    Bytes(Vec<u8>),
    /// This many zero bytes left as a hole in the file.
    Hole(u64),
    /// The same file range as section `n` (as returned by [`Elf::section`]).
    Alias(u32),
}

#[derive(Clone, Debug)]
pub struct Section {
    pub name: String,
    pub kind: u32,
    pub flags: u64,
    pub addr: u64,
    pub body: Body,
    /// Section index of the linked section (string table of a symtab).
    pub link: u32,
    pub info: u32,
    pub entsize: u64,
}

impl Section {
    /// A non-allocated `SHT_PROGBITS` section, as debug sections are.
    pub fn data(name: &str, body: Body) -> Section {
        Section {
            name: name.to_string(),
            kind: SHT_PROGBITS,
            flags: 0,
            addr: 0,
            body,
            link: 0,
            info: 0,
            entsize: 0,
        }
    }
}

/// A function symbol.
#[derive(Clone, Copy, Debug)]
pub struct Sym<'a> {
    pub name: &'a [u8],
    pub addr: u64,
    pub size: u64,
}

impl Sym<'_> {
    /// A symbol named `name` covering stub `i`.
    pub fn stub(i: usize, name: &[u8]) -> Sym<'_> {
        Sym {
            name,
            addr: stub_addr(i),
            size: STUB_STRIDE,
        }
    }
}

/// An ELF file being built: `stubs` stubs in the code page, `.text` (index
/// 1) over them, then the sections added.
pub struct Elf {
    stubs: usize,
    sections: Vec<Section>,
}

impl Elf {
    pub fn new(stubs: usize) -> Elf {
        let text = Section {
            name: ".text".into(),
            kind: SHT_PROGBITS,
            flags: SHF_ALLOC | SHF_EXECINSTR,
            addr: STUB_OFFSET,
            body: Body::Bytes(Vec::new()),
            link: 0,
            info: 0,
            entsize: 0,
        };
        Elf {
            stubs,
            sections: vec![text],
        }
    }

    /// Adds a section; returns its section index.
    pub fn section(&mut self, s: Section) -> u32 {
        self.sections.push(s);
        self.sections.len() as u32
    }

    /// Adds `.strtab` and a `.symtab` of global function symbols in
    /// `.text`; equal names share one string.
    pub fn symbols(&mut self, syms: &[Sym]) {
        let mut strtab = vec![0u8];
        let mut offsets: HashMap<&[u8], u32> = HashMap::new();
        let mut symtab = vec![0u8; 24];
        for s in syms {
            let name = *offsets.entry(s.name).or_insert_with(|| {
                let off = strtab.len() as u32;
                strtab.extend_from_slice(s.name);
                strtab.push(0);
                off
            });
            symtab.extend_from_slice(&elf_sym(name, s.addr, s.size));
        }
        let strtab = self.section(Section {
            kind: SHT_STRTAB,
            ..Section::data(".strtab", Body::Bytes(strtab))
        });
        self.section(Section {
            kind: SHT_SYMTAB,
            link: strtab,
            info: 1,
            entsize: 24,
            ..Section::data(".symtab", Body::Bytes(symtab))
        });
    }

    /// Adds an empty `.strtab` and a `.symtab` of `size` bytes (rounded
    /// down to whole symbols), all a hole: zeroed symbols, none a function.
    pub fn sparse_symtab(&mut self, size: u64) {
        let size = size - size % 24;
        let strtab = self.section(Section {
            kind: SHT_STRTAB,
            ..Section::data(".strtab", Body::Bytes(vec![0]))
        });
        self.section(Section {
            kind: SHT_SYMTAB,
            link: strtab,
            info: 1,
            entsize: 24,
            ..Section::data(".symtab", Body::Hole(size))
        });
    }

    /// Writes the file (holes stay sparse). Section headers come last.
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let _ = std::fs::remove_file(path);
        let file = File::create(path)?;
        // Section data after the code page; (offset, size) per section.
        let mut cursor = CODE_SIZE;
        let mut ranges: Vec<(u64, u64)> = vec![(0, 0)];
        for (i, s) in self.sections.iter().enumerate() {
            let range = match &s.body {
                Body::Bytes(b) if i == 0 => {
                    debug_assert!(b.is_empty());
                    (STUB_OFFSET, self.stubs as u64 * STUB_STRIDE)
                }
                Body::Bytes(b) => {
                    cursor = cursor.next_multiple_of(8);
                    file.write_all_at(b, cursor)?;
                    let r = (cursor, b.len() as u64);
                    cursor += b.len() as u64;
                    r
                }
                Body::Hole(n) => {
                    cursor = cursor.next_multiple_of(4096);
                    let r = (cursor, *n);
                    cursor += n;
                    r
                }
                Body::Alias(n) => ranges[*n as usize],
            };
            ranges.push(range);
        }
        // .shstrtab
        let mut shstrtab = vec![0u8];
        let mut names = vec![0u32];
        for s in &self.sections {
            names.push(shstrtab.len() as u32);
            shstrtab.extend_from_slice(s.name.as_bytes());
            shstrtab.push(0);
        }
        let shstrndx = self.sections.len() as u32 + 1;
        names.push(shstrtab.len() as u32);
        shstrtab.extend_from_slice(b".shstrtab\0");
        cursor = cursor.next_multiple_of(8);
        file.write_all_at(&shstrtab, cursor)?;
        let shstr_range = (cursor, shstrtab.len() as u64);
        cursor += shstrtab.len() as u64;
        // Section headers.
        let shoff = cursor.next_multiple_of(8);
        let mut shdrs = vec![0u8; 64];
        for (i, s) in self.sections.iter().enumerate() {
            let (off, size) = ranges[i + 1];
            shdrs.extend_from_slice(&shdr(
                names[i + 1],
                s.kind,
                s.flags,
                s.addr,
                off,
                size,
                s.link,
                s.info,
                s.entsize,
            ));
        }
        shdrs.extend_from_slice(&shdr(
            names[shstrndx as usize],
            SHT_STRTAB,
            0,
            0,
            shstr_range.0,
            shstr_range.1,
            0,
            0,
            0,
        ));
        file.write_all_at(&shdrs, shoff)?;
        // The code page: header, one PT_LOAD, stubs.
        let mut page = vec![0u8; CODE_SIZE as usize];
        let shnum = self.sections.len() as u16 + 2;
        page[..64].copy_from_slice(&ehdr(shoff, shnum, shstrndx as u16));
        page[64..120].copy_from_slice(&phdr());
        for i in 0..self.stubs {
            let at = stub_addr(i) as usize;
            page[at..at + STUB_STRIDE as usize].fill(0xcc);
            page[at..at + STUB.len()].copy_from_slice(&STUB);
        }
        file.write_all_at(&page, 0)?;
        Ok(())
    }
}

fn ehdr(shoff: u64, shnum: u16, shstrndx: u16) -> [u8; 64] {
    let mut h = [0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // ELFCLASS64
    h[5] = 1; // little endian
    h[6] = 1; // EV_CURRENT
    h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    h[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    h[40..48].copy_from_slice(&shoff.to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    h[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
    h[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    h[60..62].copy_from_slice(&shnum.to_le_bytes());
    h[62..64].copy_from_slice(&shstrndx.to_le_bytes());
    h
}

/// PT_LOAD, R+X, the code page at offset 0 and address 0.
fn phdr() -> [u8; 56] {
    let mut p = [0u8; 56];
    p[..4].copy_from_slice(&1u32.to_le_bytes());
    p[4..8].copy_from_slice(&5u32.to_le_bytes()); // PF_R | PF_X
    p[32..40].copy_from_slice(&CODE_SIZE.to_le_bytes()); // p_filesz
    p[40..48].copy_from_slice(&CODE_SIZE.to_le_bytes()); // p_memsz
    p[48..56].copy_from_slice(&0x1000u64.to_le_bytes()); // p_align
    p
}

#[allow(clippy::too_many_arguments)]
fn shdr(
    name: u32,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    entsize: u64,
) -> [u8; 64] {
    let mut s = [0u8; 64];
    s[..4].copy_from_slice(&name.to_le_bytes());
    s[4..8].copy_from_slice(&kind.to_le_bytes());
    s[8..16].copy_from_slice(&flags.to_le_bytes());
    s[16..24].copy_from_slice(&addr.to_le_bytes());
    s[24..32].copy_from_slice(&offset.to_le_bytes());
    s[32..40].copy_from_slice(&size.to_le_bytes());
    s[40..44].copy_from_slice(&link.to_le_bytes());
    s[44..48].copy_from_slice(&info.to_le_bytes());
    s[48..56].copy_from_slice(&1u64.to_le_bytes()); // sh_addralign
    s[56..64].copy_from_slice(&entsize.to_le_bytes());
    s
}

/// A global function symbol in section 1 (`.text`).
fn elf_sym(name: u32, addr: u64, size: u64) -> [u8; 24] {
    let mut s = [0u8; 24];
    s[..4].copy_from_slice(&name.to_le_bytes());
    s[4] = 0x12; // STB_GLOBAL, STT_FUNC
    s[6..8].copy_from_slice(&1u16.to_le_bytes());
    s[8..16].copy_from_slice(&addr.to_le_bytes());
    s[16..24].copy_from_slice(&size.to_le_bytes());
    s
}

/// `.gnu_debuglink` contents: the name, padding to 4, a CRC.
pub fn debuglink(name: &str) -> Vec<u8> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    b.resize(b.len().next_multiple_of(4), 0);
    b.extend_from_slice(&0u32.to_le_bytes());
    b
}

pub fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `.debug_abbrev` and `.debug_info` (DWARF 4) of one unit over
/// `[low, low + len)` holding subprogram `name` over the same range, in
/// which `depth` `DW_TAG_inlined_subroutine` DIEs without attributes nest
/// one inside the other.
pub fn deep_inline_dwarf(name: &str, low: u64, len: u64, depth: usize) -> (Vec<u8>, Vec<u8>) {
    const DW_TAG_COMPILE_UNIT: u64 = 0x11;
    const DW_TAG_SUBPROGRAM: u64 = 0x2e;
    const DW_TAG_INLINED_SUBROUTINE: u64 = 0x1d;
    const DW_AT_NAME: u64 = 0x03;
    const DW_AT_LOW_PC: u64 = 0x11;
    const DW_AT_HIGH_PC: u64 = 0x12;
    const DW_FORM_ADDR: u64 = 0x01;
    const DW_FORM_STRING: u64 = 0x08;
    const DW_FORM_UDATA: u64 = 0x0f;
    let mut abbrev = Vec::new();
    let range = [(DW_AT_LOW_PC, DW_FORM_ADDR), (DW_AT_HIGH_PC, DW_FORM_UDATA)];
    let name_attr = [(DW_AT_NAME, DW_FORM_STRING)];
    // (code, tag, [(attribute, form)])
    type Decl = (u64, u64, Vec<(u64, u64)>);
    let decls: [Decl; 3] = [
        (1, DW_TAG_COMPILE_UNIT, range.to_vec()),
        (2, DW_TAG_SUBPROGRAM, [&name_attr[..], &range].concat()),
        (3, DW_TAG_INLINED_SUBROUTINE, Vec::new()),
    ];
    for (code, tag, attrs) in decls {
        uleb(&mut abbrev, code);
        uleb(&mut abbrev, tag);
        abbrev.push(1); // DW_CHILDREN_yes
        for (at, form) in attrs {
            uleb(&mut abbrev, at);
            uleb(&mut abbrev, form);
        }
        abbrev.extend_from_slice(&[0, 0]);
    }
    abbrev.push(0);

    let mut dies = Vec::new();
    dies.push(1);
    dies.extend_from_slice(&low.to_le_bytes());
    uleb(&mut dies, len);
    dies.push(2);
    dies.extend_from_slice(name.as_bytes());
    dies.push(0);
    dies.extend_from_slice(&low.to_le_bytes());
    uleb(&mut dies, len);
    dies.extend(std::iter::repeat_n(3u8, depth));
    // Null entries end the children of every inlined DIE, the
    // subprogram and the unit.
    dies.extend(std::iter::repeat_n(0u8, depth + 2));

    let mut info = Vec::new();
    let unit_len = 2 + 4 + 1 + dies.len();
    info.extend_from_slice(&(unit_len as u32).to_le_bytes());
    info.extend_from_slice(&4u16.to_le_bytes()); // version
    info.extend_from_slice(&0u32.to_le_bytes()); // abbrev offset
    info.push(8); // address size
    info.extend_from_slice(&dies);
    (abbrev, info)
}

/// Writes bits least significant first, as deflate does.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn new() -> Bits {
        Bits {
            out: Vec::new(),
            acc: 0,
            n: 0,
        }
    }

    /// The low `n` bits of `v`, least significant first.
    fn put(&mut self, v: u64, n: u32) {
        self.acc |= v << self.n;
        self.n += n;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code of `n` bits, most significant first.
    fn code(&mut self, code: u64, n: u32) {
        for i in (0..n).rev() {
            self.put((code >> i) & 1, 1);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.out
    }
}

/// A zlib stream that inflates to `size` zero bytes: one dynamic-Huffman
/// block whose only symbols are literal 0 (code `10`), end of block (`11`)
/// and length 258 (`0`) at distance 1 (`0`), so 258 zeros cost 2 bits. A
/// literal after every 16 matches keeps the ratio near 970:1, under the
/// 1032:1 that deflate can reach at most.
pub fn zlib_zeros(size: u64) -> Vec<u8> {
    let mut b = Bits::new();
    b.put(1, 1); // BFINAL
    b.put(2, 2); // dynamic Huffman
    b.put(286 - 257, 5); // HLIT
    b.put(2 - 1, 5); // HDIST
    b.put(18 - 4, 4); // HCLEN: code lengths up to symbol 1 in the order below
    // Code-length code lengths, in the order 16 17 18 0 8 7 9 6 10 5 11 4 12
    // 3 13 2 14 1: symbol 18 gets 1 bit, symbols 1 and 2 get 2 bits.
    let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1];
    for sym in order {
        let len = match sym {
            18 => 1,
            1 | 2 => 2,
            _ => 0,
        };
        b.put(len, 3);
    }
    // Canonical codes of the code-length code: 18 → 0, 1 → 10, 2 → 11.
    let length = |b: &mut Bits, len: u64| match len {
        1 => b.code(0b10, 2),
        2 => b.code(0b11, 2),
        _ => unreachable!(),
    };
    let zeros = |b: &mut Bits, mut n: u64| {
        while n > 0 {
            let run = n.min(138);
            assert!(run >= 11, "a run of zeros too short for symbol 18");
            b.code(0, 1);
            b.put(run - 11, 7);
            n -= run;
        }
    };
    // Literal/length lengths: 0 → 2, 1..=255 → 0, 256 → 2, 257..=284 → 0,
    // 285 → 1; then distance lengths: 0 → 1, 1 → 1.
    length(&mut b, 2);
    zeros(&mut b, 255);
    length(&mut b, 2);
    zeros(&mut b, 28);
    length(&mut b, 1);
    length(&mut b, 1);
    length(&mut b, 1);
    // Canonical literal/length codes: 285 → 0, 0 → 10, 256 → 11; distance
    // 0 → 0.
    let literal = |b: &mut Bits| b.code(0b10, 2);
    let mut left = size;
    if left > 0 {
        literal(&mut b);
        left -= 1;
    }
    let mut matches = 0u64;
    while left >= 258 {
        b.code(0, 1);
        b.code(0, 1);
        left -= 258;
        matches += 1;
        if matches.is_multiple_of(16) && left > 0 {
            literal(&mut b);
            left -= 1;
        }
    }
    for _ in 0..left {
        literal(&mut b);
    }
    b.code(0b11, 2);
    let mut out = vec![0x78, 0x9c];
    out.extend_from_slice(&b.finish());
    // Adler-32 of zeros: a stays 1, b adds 1 per byte.
    let adler = ((size % 65521) << 16) | 1;
    out.extend_from_slice(&(adler as u32).to_be_bytes());
    out
}

/// An `Elf64_Chdr` (zlib, `size` bytes inflated) followed by `stream`.
pub fn compressed(size: u64, stream: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + stream.len());
    b.extend_from_slice(&ELFCOMPRESS_ZLIB.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&size.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(stream);
    b
}
