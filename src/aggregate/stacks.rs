//! Interning of kernel and user stacks, bounded by `--stack-storage-size`.
//!
//! Kernel stacks are keyed by their addresses. User stacks are keyed by
//! process, exec generation of that process and addresses, so that the same
//! addresses in two different images (before and after an exec) never merge.
//!
//! A [`Callchain`] interned again (the same frames, shared by the backend:
//! see [`Callchain::serial`]) is found by its serial number instead of its
//! addresses, which are then neither hashed nor compared.

use std::hash::{BuildHasher, Hash};

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::event::Callchain;

/// Index into a [`StackTable`].
pub(crate) type StackId = u32;

/// A stack as an entry refers to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum StackRef {
    /// No frames (kernel thread's user stack, or not collected).
    Empty,
    /// Did not fit in the stack storage: printed as a placeholder.
    Missed,
    Kernel(StackId),
    User(StackId),
}

impl StackRef {
    /// The variant and the id in one word (for hashing).
    pub(crate) fn word(self) -> u64 {
        let (kind, id) = match self {
            StackRef::Empty => (0, 0),
            StackRef::Missed => (1, 0),
            StackRef::Kernel(id) => (2, id),
            StackRef::User(id) => (3, id),
        };
        (kind << 32) | u64::from(id)
    }
}

/// A user stack and what is needed to symbolize it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UserStack {
    pub(crate) tgid: u32,
    /// Time of the first sample with this stack (maps are looked up as of then).
    pub(crate) time: u64,
    /// Innermost first.
    pub(crate) addrs: Vec<u64>,
}

/// All interned stacks.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackTable {
    /// Innermost first.
    pub(crate) kernel: Vec<Vec<u64>>,
    pub(crate) user: Vec<UserStack>,
}

impl StackTable {
    /// The addresses of a kernel stack (innermost first), if `r` is one.
    #[cfg(test)]
    pub(crate) fn kernel_addrs(&self, r: StackRef) -> Option<&[u64]> {
        match r {
            StackRef::Kernel(id) => self.kernel.get(id as usize).map(Vec::as_slice),
            _ => None,
        }
    }

    /// A user stack, if `r` is one.
    #[cfg(test)]
    pub(crate) fn user_stack(&self, r: StackRef) -> Option<&UserStack> {
        match r {
            StackRef::User(id) => self.user.get(id as usize),
            _ => None,
        }
    }
}

/// Most entries in each of the serial-number memos.
const MEMO_MAX: usize = 1 << 14;

/// Remembers `key -> id`, making room first when `memo` is full.
fn remember<K: std::hash::Hash + Eq>(memo: &mut FxHashMap<K, StackId>, key: K, id: StackId) {
    if memo.len() >= MEMO_MAX {
        memo.clear();
    }
    memo.insert(key, id);
}

/// Builds a [`StackTable`], at most `capacity` unique stacks in all.
#[derive(Debug)]
pub(crate) struct StackInterner {
    capacity: usize,
    table: StackTable,
    kernel_ids: FxHashMap<Vec<u64>, StackId>,
    /// User stacks by (process, exec generation, hash of the addresses):
    /// a lookup hashes the addresses in place, allocating nothing, and
    /// compares them with the stored stack. The rare stack whose hash
    /// collides with another's goes to `user_collisions`.
    user_ids: FxHashMap<(u32, u32, u64), StackId>,
    user_collisions: FxHashMap<(u32, u32, Vec<u64>), StackId>,
    /// Exec generation per process.
    generations: FxHashMap<u32, u32>,
    /// Kernel stacks by (serial, frames skipped) of the callchains they
    /// were interned from, and user stacks by (serial, process, exec
    /// generation). Serials are never reused, so an entry stays true; each
    /// map is emptied when it reaches [`MEMO_MAX`].
    kernel_memo: FxHashMap<(u64, u32), StackId>,
    user_memo: FxHashMap<(u64, u32, u32), StackId>,
    /// Stacks that did not fit (one per attempt).
    pub(crate) missed: u64,
}

impl StackInterner {
    pub(crate) fn new(capacity: usize) -> StackInterner {
        StackInterner {
            capacity,
            table: StackTable::default(),
            kernel_ids: FxHashMap::default(),
            user_ids: FxHashMap::default(),
            user_collisions: FxHashMap::default(),
            generations: FxHashMap::default(),
            kernel_memo: FxHashMap::default(),
            user_memo: FxHashMap::default(),
            missed: 0,
        }
    }

    /// Unique stacks stored so far, kernel and user together.
    pub(crate) fn len(&self) -> usize {
        self.table.kernel.len() + self.table.user.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn has_room(&mut self) -> bool {
        if self.len() < self.capacity {
            true
        } else {
            self.missed += 1;
            false
        }
    }

    /// Interns a kernel stack (innermost first).
    pub(crate) fn intern_kernel(&mut self, addrs: &[u64]) -> StackRef {
        if addrs.is_empty() {
            return StackRef::Empty;
        }
        if let Some(&id) = self.kernel_ids.get(addrs) {
            return StackRef::Kernel(id);
        }
        if !self.has_room() {
            return StackRef::Missed;
        }
        let Ok(id) = StackId::try_from(self.table.kernel.len()) else {
            self.missed += 1;
            return StackRef::Missed;
        };
        self.table.kernel.push(addrs.to_vec());
        self.kernel_ids.insert(addrs.to_vec(), id);
        StackRef::Kernel(id)
    }

    /// Interns a user stack (innermost first) of process `tgid`, sampled at
    /// `time`.
    pub(crate) fn intern_user(&mut self, tgid: u32, time: u64, addrs: &[u64]) -> StackRef {
        if addrs.is_empty() {
            return StackRef::Empty;
        }
        let generation = self.generations.get(&tgid).copied().unwrap_or(0);
        let key = (tgid, generation, FxBuildHasher.hash_one(addrs));
        let primary = self.user_ids.get(&key).copied();
        if let Some(id) = primary {
            if self.table.user[id as usize].addrs == addrs {
                return StackRef::User(id);
            }
            if let Some(&id) = self
                .user_collisions
                .get(&(tgid, generation, addrs.to_vec()))
            {
                return StackRef::User(id);
            }
        }
        if !self.has_room() {
            return StackRef::Missed;
        }
        let Ok(id) = StackId::try_from(self.table.user.len()) else {
            self.missed += 1;
            return StackRef::Missed;
        };
        self.table.user.push(UserStack {
            tgid,
            time,
            addrs: addrs.to_vec(),
        });
        if primary.is_some() {
            self.user_collisions
                .insert((tgid, generation, addrs.to_vec()), id);
        } else {
            self.user_ids.insert(key, id);
        }
        StackRef::User(id)
    }

    /// [`StackInterner::intern_kernel`] of the kernel part of `chain`.
    pub(crate) fn intern_kernel_chain(&mut self, chain: &Callchain) -> StackRef {
        let Some(serial) = chain.serial() else {
            return self.intern_kernel(chain.kernel());
        };
        let key = (serial, chain.kernel_skipped());
        if let Some(&id) = self.kernel_memo.get(&key) {
            return StackRef::Kernel(id);
        }
        let r = self.intern_kernel(chain.kernel());
        if let StackRef::Kernel(id) = r {
            remember(&mut self.kernel_memo, key, id);
        }
        r
    }

    /// [`StackInterner::intern_user`] of the user part of `chain`.
    pub(crate) fn intern_user_chain(
        &mut self,
        tgid: u32,
        time: u64,
        chain: &Callchain,
    ) -> StackRef {
        let Some(serial) = chain.serial() else {
            return self.intern_user(tgid, time, chain.user());
        };
        let generation = self.generations.get(&tgid).copied().unwrap_or(0);
        let key = (serial, tgid, generation);
        if let Some(&id) = self.user_memo.get(&key) {
            return StackRef::User(id);
        }
        let r = self.intern_user(tgid, time, chain.user());
        if let StackRef::User(id) = r {
            remember(&mut self.user_memo, key, id);
        }
        r
    }

    /// User stacks stored so far; stack ids below this are taken.
    pub(crate) fn user_len(&self) -> usize {
        self.table.user.len()
    }

    /// The user stacks stored since there were `from` of them.
    pub(crate) fn user_since(&self, from: usize) -> &[UserStack] {
        self.table.user.get(from..).unwrap_or(&[])
    }

    /// Process `tgid` replaced its image (exec): its later user stacks are
    /// new stacks even at the same addresses.
    pub(crate) fn bump_generation(&mut self, tgid: u32) {
        let g = self.generations.entry(tgid).or_insert(0);
        *g = g.wrapping_add(1);
    }

    pub(crate) fn into_table(self) -> StackTable {
        self.table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_stacks_use_no_storage() {
        let mut s = StackInterner::new(1);
        assert_eq!(s.intern_kernel(&[]), StackRef::Empty);
        assert_eq!(s.intern_user(5, 0, &[]), StackRef::Empty);
        assert!(s.is_empty());
        assert_eq!(s.missed, 0);
    }

    #[test]
    fn dedup_kernel_and_user() {
        let mut s = StackInterner::new(10);
        let a = s.intern_kernel(&[1, 2, 3]);
        let b = s.intern_kernel(&[1, 2, 3]);
        let c = s.intern_kernel(&[1, 2]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let u1 = s.intern_user(7, 100, &[1, 2, 3]);
        let u2 = s.intern_user(7, 200, &[1, 2, 3]);
        let u3 = s.intern_user(8, 300, &[1, 2, 3]);
        assert_eq!(u1, u2);
        assert_ne!(u1, u3);
        assert_eq!(s.len(), 4);
        let t = s.into_table();
        assert_eq!(t.kernel_addrs(a), Some(&[1u64, 2, 3][..]));
        let us = t.user_stack(u1).unwrap();
        assert_eq!((us.tgid, us.time), (7, 100));
        assert_eq!(t.user_stack(u3).unwrap().time, 300);
        assert_eq!(t.user_stack(a), None);
    }

    #[test]
    fn exec_generation_separates_user_stacks() {
        let mut s = StackInterner::new(10);
        let before = s.intern_user(7, 1, &[0x400000]);
        s.bump_generation(7);
        let after = s.intern_user(7, 2, &[0x400000]);
        assert_ne!(before, after);
        assert_eq!(s.intern_user(7, 3, &[0x400000]), after);
        // Kernel stacks are unaffected.
        let k = s.intern_kernel(&[0x400000]);
        assert!(matches!(k, StackRef::Kernel(_)));
    }

    #[test]
    fn overflow_is_missed_and_counted() {
        let mut s = StackInterner::new(2);
        let a = s.intern_kernel(&[1]);
        let b = s.intern_user(1, 0, &[2]);
        assert_eq!(s.intern_kernel(&[3]), StackRef::Missed);
        assert_eq!(s.intern_user(1, 0, &[4]), StackRef::Missed);
        assert_eq!(s.missed, 2);
        // Known stacks still resolve when storage is full.
        assert_eq!(s.intern_kernel(&[1]), a);
        assert_eq!(s.intern_user(1, 9, &[2]), b);
        assert_eq!(s.missed, 2);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn chains_intern_as_their_frames_do() {
        let mut s = StackInterner::new(10);
        let c = Callchain::new(&[1, 2, 3], &[7, 8]);
        let k = s.intern_kernel_chain(&c);
        assert_eq!(k, s.intern_kernel(&[1, 2, 3]));
        // Again, by serial: the same stacks.
        assert_eq!(s.intern_kernel_chain(&c.clone()), k);
        let u = s.intern_user_chain(5, 100, &c);
        assert_eq!(s.intern_user_chain(5, 200, &c), u);
        assert_eq!(s.intern_user(5, 300, &[7, 8]), u);
        // Frames skipped: another kernel stack, the same user one.
        let mut d = c.clone();
        d.skip_kernel(1);
        let k2 = s.intern_kernel_chain(&d);
        assert_ne!(k2, k);
        assert_eq!(k2, s.intern_kernel(&[2, 3]));
        assert_eq!(s.intern_user_chain(5, 0, &d), u);
        // Another process, or the same after exec: another user stack.
        assert_ne!(s.intern_user_chain(6, 0, &c), u);
        s.bump_generation(5);
        let after = s.intern_user_chain(5, 400, &c);
        assert_ne!(after, u);
        assert_eq!(s.intern_user_chain(5, 500, &c), after);
        // Without frames: empty.
        let e = Callchain::default();
        assert_eq!(s.intern_kernel_chain(&e), StackRef::Empty);
        assert_eq!(s.intern_user_chain(5, 0, &e), StackRef::Empty);
        let t = s.into_table();
        assert_eq!(t.user_stack(u).unwrap().time, 100);
        assert_eq!(t.user_stack(after).unwrap().time, 400);
    }

    #[test]
    fn chains_that_did_not_fit_are_missed_every_time() {
        let mut s = StackInterner::new(1);
        let a = Callchain::new(&[1], &[2]);
        let k = s.intern_kernel_chain(&a);
        assert!(matches!(k, StackRef::Kernel(_)));
        assert_eq!(s.intern_user_chain(1, 0, &a), StackRef::Missed);
        assert_eq!(s.intern_user_chain(1, 0, &a), StackRef::Missed);
        assert_eq!(s.missed, 2);
        assert_eq!(s.intern_kernel_chain(&a), k);
        assert_eq!(s.missed, 2);
    }

    #[test]
    fn a_full_memo_starts_over() {
        let mut s = StackInterner::new(MEMO_MAX + 10);
        let chains: Vec<Callchain> = (0..MEMO_MAX as u64 + 5)
            .map(|i| Callchain::new(&[i], &[]))
            .collect();
        let first: Vec<StackRef> = chains.iter().map(|c| s.intern_kernel_chain(c)).collect();
        assert!(s.kernel_memo.len() <= MEMO_MAX);
        let again: Vec<StackRef> = chains.iter().map(|c| s.intern_kernel_chain(c)).collect();
        assert_eq!(first, again);
        assert_eq!(s.len(), MEMO_MAX + 5);
    }
}
