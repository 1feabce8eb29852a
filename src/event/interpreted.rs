//! Frames of interpreted code in stacks: an address no code can have
//! stands for each, and [`Names`] keeps the name it stands for (see
//! `runtime`, which splices them in).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The addresses that stand for interpreted frames: between user and
/// kernel addresses, where no x86-64 address can be (4- or 5-level
/// paging).
const BASE: u64 = 0x4000_0000_0000_0000;
const SPAN: u64 = 1 << 32;

/// True when `addr` stands for an interpreted frame.
pub(crate) fn is_frame(addr: u64) -> bool {
    (BASE..BASE + SPAN).contains(&addr)
}

/// Most distinct names kept, and bytes of them; past either, a new name
/// is [`NOT_KEPT`].
const MAX_NAMES: usize = 1 << 16;
const MAX_BYTES: usize = 8 << 20;
/// What a frame whose name could not be kept prints.
const NOT_KEPT: &str = "[interpreted frame not kept]";

#[derive(Debug, Default)]
struct Table {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
    bytes: usize,
}

/// The names interpreted frames stand for, shared by the stages that
/// splice them and the symbolization that prints them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Names(Arc<Mutex<Table>>);

impl Names {
    pub(crate) fn new() -> Names {
        let names = Names::default();
        names.address(NOT_KEPT);
        names
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Every change is one push and one insert: a panic leaves it whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address that stands for `name`.
    pub(crate) fn address(&self, name: &str) -> u64 {
        let mut t = self.table();
        if let Some(&id) = t.ids.get(name) {
            return BASE + u64::from(id);
        }
        if t.names.len() >= MAX_NAMES || t.bytes + name.len() > MAX_BYTES {
            return BASE;
        }
        let id = t.names.len() as u32;
        let name: Arc<str> = Arc::from(name);
        t.bytes += name.len();
        t.names.push(Arc::clone(&name));
        t.ids.insert(name, id);
        BASE + u64::from(id)
    }

    /// The name `addr` stands for, if it stands for one.
    pub(crate) fn name(&self, addr: u64) -> Option<Arc<str>> {
        if !is_frame(addr) {
            return None;
        }
        let t = self.table();
        t.names.get((addr - BASE) as usize).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_one_address_that_no_code_has() {
        let names = Names::new();
        let a = names.address("consume (prog.py:12)");
        assert_eq!(names.address("consume (prog.py:12)"), a);
        assert_ne!(names.address("produce (prog.py:20)"), a);
        assert!(is_frame(a));
        assert_eq!(names.name(a).as_deref(), Some("consume (prog.py:12)"));
        for user_or_kernel in [
            0x7fff_ffff_f000,
            0x00ff_ffff_ffff_f000,
            0xffff_ffff_8100_0000,
        ] {
            assert!(!is_frame(user_or_kernel));
            assert_eq!(names.name(user_or_kernel), None);
        }
    }

    #[test]
    fn past_the_cap_a_name_is_not_kept() {
        let names = Names::new();
        let big = "x".repeat(MAX_BYTES / 2);
        names.address(&big);
        let other = names.address(&"y".repeat(MAX_BYTES / 2));
        assert_eq!(names.name(other).as_deref(), Some(NOT_KEPT));
    }
}
