//! Where the code at a process's address is, for telling user stacks
//! apart by the code they run ([`crate::aggregate::CodeOf`]).

use super::ProcessMaps;
use crate::aggregate::{CodeOf, Place};

/// The file mapped at the address then, or the vDSO.
impl CodeOf for ProcessMaps {
    fn place(&self, tgid: u32, time: u64, addr: u64) -> Option<Place> {
        let (m, offset) = self.lookup(tgid, time, addr)?;
        if m.is_vdso() {
            return Some(Place::Vdso {
                offset: addr - m.start,
            });
        }
        Some(Place::File {
            file: m.file?,
            offset,
        })
    }
}
