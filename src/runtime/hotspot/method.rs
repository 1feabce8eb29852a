//! Names of Java methods, read from a JVM's metadata: `Method` →
//! `ConstMethod` → `ConstantPool` → its holder class's name, the method's
//! name and the source file's, each a `Symbol`; and the line of a
//! bytecode index, from the method's compressed line number table.
//!
//! A method's name is read once and kept with what it was read from (its
//! `ConstMethod`, constant pool and holder), so that a `Method*` reused by
//! another method after its class was unloaded is read again.

use super::stream::line_of;
use super::vm::Vm;
use super::walk::Pos;
use crate::bytes::u32_at;
use crate::runtime::memory::{Counted, Miss};

/// Longest name or line table read.
const MAX_SYMBOL: usize = 1024;
const MAX_LINES: usize = 4096;

/// What a `Method*` was, when its name was read.
pub(crate) type MethodKey = [u64; 3];

/// A method's name and what its lines need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MethodInfo {
    /// `package.Class.method`.
    pub(crate) name: String,
    /// Its class's source file, if the class says.
    pub(crate) file: Option<String>,
    /// Where its bytecodes are.
    code_start: u64,
    code_size: u64,
    /// Its compressed line number table, if it has one.
    lines: Option<Vec<u8>>,
}

impl MethodInfo {
    /// Bytes kept for it.
    pub(crate) fn size(&self) -> usize {
        let file = self.file.as_ref().map_or(0, String::len);
        self.name.len() + file + self.lines.as_ref().map_or(0, Vec::len) + 64
    }

    /// The frame's name: `package.Class.method (File.java:line)`, the line
    /// (or the file) left out where it is unknown.
    pub(crate) fn frame_name(&self, pos: Pos) -> String {
        let bci = match pos {
            Pos::Bcp(bcp) => bcp
                .checked_sub(self.code_start)
                .filter(|&b| b < self.code_size)
                .map(|b| b as u32),
            // A method's entry (-1) is at its first line, as HotSpot says.
            Pos::Bci(-1) => Some(0),
            Pos::Bci(bci) => u32::try_from(bci)
                .ok()
                .filter(|&b| u64::from(b) < self.code_size),
            Pos::None | Pos::Stub => None,
        };
        let line = bci.and_then(|b| line_of(self.lines.as_deref()?, b));
        match (&self.file, line) {
            (Some(file), Some(line)) => format!("{} ({file}:{line})", self.name),
            (Some(file), None) => format!("{} ({file})", self.name),
            (None, _) => self.name.clone(),
        }
    }
}

/// The key method `method` has now: its `ConstMethod`, constant pool and
/// holder class.
pub(crate) fn method_key(mem: &mut Counted<'_>, vm: &Vm, method: u64) -> Result<MethodKey, Miss> {
    if method == 0 || !method.is_multiple_of(8) {
        return Err(Miss::Unreadable);
    }
    let cm = mem.word(method.wrapping_add(vm.method_const))?;
    let cp = mem.word(cm.wrapping_add(vm.const_constants))?;
    let holder = mem.word(cp.wrapping_add(vm.pool_holder))?;
    Ok([cm, cp, holder])
}

/// Reads the method whose key is `key`.
pub(crate) fn read_method(
    mem: &mut Counted<'_>,
    vm: &Vm,
    key: MethodKey,
) -> Result<MethodInfo, Miss> {
    let [cm, cp, holder] = key;
    if [cm, cp, holder]
        .iter()
        .any(|&p| p == 0 || !p.is_multiple_of(8))
    {
        return Err(Miss::Unreadable);
    }
    // The class's constant pool is this one.
    if mem.word(holder.wrapping_add(vm.klass_constants))? != cp {
        return Err(Miss::Unreadable);
    }
    let mut head = vec![0u8; vm.const_size as usize];
    mem.read(cm, &mut head)?;
    let u16_of = |b: &[u8], off: u64| -> Result<u64, Miss> {
        let at = off as usize;
        b.get(at..at + 2)
            .map(|s| u64::from(u16::from_ne_bytes([s[0], s[1]])))
            .ok_or(Miss::Unreadable)
    };
    let name_index = u16_of(&head, vm.const_name_index)?;
    let code_size = u16_of(&head, vm.const_code_size)?;
    let flags = u16_of(&head, vm.const_flags)?;
    let mut pool = vec![0u8; vm.pool_size as usize];
    mem.read(cp, &mut pool)?;
    let length = u32_at(&pool, vm.pool_length as usize).ok_or(Miss::Unreadable)?;
    let source = u16_of(&pool, vm.pool_source_file)?;
    let entry = |mem: &mut Counted<'_>, i: u64| -> Result<u64, Miss> {
        if i == 0 || i >= u64::from(length) {
            return Err(Miss::Unreadable);
        }
        mem.word(cp.wrapping_add(vm.pool_size).wrapping_add(i * 8))
    };
    let at = entry(mem, name_index)?;
    let method_name = symbol(mem, vm, at)?;
    let at = mem.word(holder.wrapping_add(vm.klass_name))?;
    let class = symbol(mem, vm, at)?;
    let file = match source {
        0 => None,
        i => {
            let at = entry(mem, i)?;
            Some(symbol(mem, vm, at)?)
        }
    };
    let code_start = cm.wrapping_add(vm.const_size);
    let lines = if flags & vm.const_has_lines != 0 {
        line_table(mem, code_start.wrapping_add(code_size))
    } else {
        None
    };
    Ok(MethodInfo {
        name: format!("{}.{method_name}", class_name(&class)),
        file,
        code_start,
        code_size,
        lines,
    })
}

/// The name of a runtime stub (`CodeBlob::_name`, at `at`), as a frame
/// (`_complete_monitor_locking_Java`); at most [`MAX_STUB_NAME`] bytes.
pub(crate) fn stub_name(mem: &mut Counted<'_>, at: u64) -> Result<String, Miss> {
    let mut buf = [0u8; MAX_STUB_NAME];
    // Up to the page's end, past which memory may be unmapped.
    let len = MAX_STUB_NAME.min(4096 - (at % 4096) as usize);
    mem.read(at, &mut buf[..len])?;
    let end = buf[..len].iter().position(|&b| b == 0).unwrap_or(len);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

const MAX_STUB_NAME: usize = 64;

/// A class's internal name as Java writes it: `java.util.Map$Entry`;
/// a hidden class (a lambda's) without the address that makes its name
/// unique (`Main$$Lambda$14+0x0000000801001200`).
fn class_name(internal: &str) -> String {
    let name = match internal.rfind("+0x") {
        Some(at) if internal[at + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => &internal[..at],
        _ => internal,
    };
    name.replace('/', ".")
}

/// The text of a `Symbol` (modified UTF-8, read as UTF-8), at most
/// [`MAX_SYMBOL`] bytes of it.
fn symbol(mem: &mut Counted<'_>, vm: &Vm, sym: u64) -> Result<String, Miss> {
    if sym == 0 {
        return Err(Miss::Unreadable);
    }
    let mut len = [0u8; 2];
    mem.read(sym.wrapping_add(vm.symbol_length), &mut len)?;
    let len = usize::from(u16::from_ne_bytes(len)).min(MAX_SYMBOL);
    let mut body = vec![0u8; len];
    mem.read(sym.wrapping_add(vm.symbol_body), &mut body)?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The line number table at `at`: read whole if it fits [`MAX_LINES`],
/// else as much as can be (it ends with a 0 byte).
fn line_table(mem: &mut Counted<'_>, at: u64) -> Option<Vec<u8>> {
    for len in [MAX_LINES, 256, 32] {
        let mut table = vec![0u8; len];
        if mem.read(at, &mut table).is_ok() {
            return Some(table);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_as_java_writes_them() {
        assert_eq!(
            class_name("java/util/concurrent/LinkedBlockingQueue"),
            "java.util.concurrent.LinkedBlockingQueue"
        );
        assert_eq!(
            class_name("JQueue$$Lambda$14+0x0000000801001200"),
            "JQueue$$Lambda$14"
        );
        assert_eq!(class_name("a/B+0xzz"), "a.B+0xzz");
    }
}
