//! Interning of kernel and user stacks, bounded by `--stack-storage-size`.
//!
//! Kernel stacks are keyed by their addresses, which every process shares.
//! User stacks are keyed by the code they run: each frame by the file it
//! is in and its offset there (or the vDSO's offset), so that one code
//! path in many processes, each at other addresses (ASLR), is one stack.
//! Frames in no file (JIT code, anonymous memory, or a process whose map
//! is unknown) are keyed by process image (a process between two execs)
//! and address, so the same addresses in two images never merge. The
//! first stack stored for a code path stands for all: it is the one
//! symbolized.
//!
//! A [`Callchain`] interned again (the same frames, shared by the backend:
//! see [`Callchain::serial`]) is found by its serial number instead of its
//! addresses, which are then neither hashed nor compared.
//!
//! A stored stack keeps its frames' keys, so that what it runs can be
//! named after its process is gone: the file and offset of each frame in
//! a file ([`StackTable::code`]).

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::event::Callchain;
use crate::event::interpreted::is_frame;
use crate::report::Frame;
use crate::sys::open::FileKey;

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
    /// Already named: frames in [`StackTable::named`] (a run whose stacks
    /// were named as it went, see `settle`).
    Named(StackId),
}

impl StackRef {
    /// The variant and the id in one word (for hashing).
    pub(crate) fn word(self) -> u64 {
        let (kind, id) = match self {
            StackRef::Empty => (0, 0),
            StackRef::Missed => (1, 0),
            StackRef::Kernel(id) => (2, id),
            StackRef::User(id) => (3, id),
            StackRef::Named(id) => (4, id),
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
    /// Its frames' keys (shared with the interner's index).
    keys: Arc<[FrameKey]>,
}

impl UserStack {
    /// For each frame, true when it is in no known file: naming it needs
    /// the process's own map (or perf map), not only the files.
    pub(crate) fn by_address(&self) -> Vec<bool> {
        self.keys
            .iter()
            .map(|k| matches!(k, FrameKey::Address { .. }))
            .collect()
    }
}

/// Where a user frame's code is, as far as the process's map tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Place {
    /// At `offset` in a file.
    File { file: FileKey, offset: u64 },
    /// At `offset` in the kernel's vDSO, the same image in every process.
    Vdso { offset: u64 },
    /// An interpreted frame (see [`crate::event::interpreted`]): its
    /// address is its name's, in every process.
    Interpreted,
}

/// Where the frames of a stored user stack run (see [`StackTable::code`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Code<'a> {
    keys: &'a [FrameKey],
    files: &'a [FileKey],
}

impl Code<'_> {
    /// Where frame `index` runs: `None` for a frame in no known file (or
    /// past the frames).
    pub(crate) fn place(&self, index: usize) -> Option<Place> {
        match *self.keys.get(index)? {
            FrameKey::Code { file, offset } if file == VDSO_FILE => Some(Place::Vdso { offset }),
            FrameKey::Code { file, .. } if file == INTERPRETED_FILE => Some(Place::Interpreted),
            FrameKey::Code { file, offset } => self
                .files
                .get(file as usize)
                .map(|&file| Place::File { file, offset }),
            FrameKey::Address { .. } => None,
        }
    }

    /// True when every one of `frames` frames is placed.
    pub(crate) fn places_all(&self, frames: usize) -> bool {
        (0..frames).all(|i| self.place(i).is_some())
    }
}

/// Tells where user code is: the processes' maps.
pub(crate) trait CodeOf {
    /// Where the code at `addr` in process `tgid` at `time` is, if in a
    /// file (or the vDSO).
    fn place(&self, tgid: u32, time: u64, addr: u64) -> Option<Place>;
}

/// Knows no map: every user frame is keyed by its address.
pub(crate) struct NoCode;

impl CodeOf for NoCode {
    fn place(&self, _: u32, _: u64, _: u64) -> Option<Place> {
        None
    }
}

/// One user frame as stacks are told apart: by code, or by address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FrameKey {
    /// At `offset` in file number `file` (see [`StackInterner::files`];
    /// the vDSO is [`VDSO_FILE`]).
    Code { file: u32, offset: u64 },
    /// At `addr` in process image `image` (see [`StackInterner::images`]).
    Address { image: u32, addr: u64 },
}

/// The file number of the vDSO, and of interpreted frames.
const VDSO_FILE: u32 = u32::MAX;
const INTERPRETED_FILE: u32 = u32::MAX - 1;

/// Most files numbered: traced processes choose how many files they map.
const MAX_FILES: usize = 1 << 20;

/// All interned stacks.
#[derive(Clone, Debug, Default)]
pub(crate) struct StackTable {
    /// Innermost first.
    pub(crate) kernel: Vec<Vec<u64>>,
    pub(crate) user: Vec<UserStack>,
    /// The files user code was found in, by number.
    files: Vec<FileKey>,
    /// Stacks already named, by [`StackRef::Named`].
    pub(crate) named: Vec<Arc<[Frame]>>,
}

impl StackTable {
    /// A table of named stacks only.
    pub(crate) fn of_named(named: Vec<Arc<[Frame]>>) -> StackTable {
        StackTable {
            named,
            ..StackTable::default()
        }
    }

    /// Where each frame of `stack` runs, innermost first.
    pub(crate) fn code<'a>(&'a self, stack: &'a UserStack) -> Code<'a> {
        Code {
            keys: &stack.keys,
            files: &self.files,
        }
    }

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
    /// User stacks by their frames' keys.
    user_ids: FxHashMap<Arc<[FrameKey]>, StackId>,
    /// File numbers of the files user code was found in.
    files: FxHashMap<FileKey, u32>,
    /// The image each live process runs: a number new at its first stack
    /// and at each exec, forgotten at its exit (a reused pid is another
    /// image).
    images: FxHashMap<u32, u32>,
    next_image: u32,
    /// The keys of the stack being interned.
    keys: Vec<FrameKey>,
    /// Kernel stacks by (serial, frames skipped) of the callchains they
    /// were interned from, and user stacks by (serial, image). Serials
    /// and images are never reused, so an entry stays true; each map is
    /// emptied when it reaches [`MEMO_MAX`].
    kernel_memo: FxHashMap<(u64, u32), StackId>,
    user_memo: FxHashMap<(u64, u32), StackId>,
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
            files: FxHashMap::default(),
            images: FxHashMap::default(),
            next_image: 0,
            keys: Vec::new(),
            kernel_memo: FxHashMap::default(),
            user_memo: FxHashMap::default(),
            missed: 0,
        }
    }

    /// Unique stacks stored so far, kernel and user together.
    pub(crate) fn len(&self) -> usize {
        self.table.kernel.len() + self.table.user.len()
    }

    /// Most unique stacks stored.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
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
    /// The user stack `addrs` of process `tgid` at `time`, told apart by
    /// the code `code` says its frames run.
    pub(crate) fn intern_user(
        &mut self,
        tgid: u32,
        time: u64,
        addrs: &[u64],
        code: &dyn CodeOf,
    ) -> StackRef {
        if addrs.is_empty() {
            return StackRef::Empty;
        }
        let image = self.image(tgid);
        self.intern_user_in(image, tgid, time, addrs, code)
    }

    /// [`StackInterner::intern_user`] of a stack with frames, process
    /// `tgid` running image `image`.
    fn intern_user_in(
        &mut self,
        image: u32,
        tgid: u32,
        time: u64,
        addrs: &[u64],
        code: &dyn CodeOf,
    ) -> StackRef {
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        for &addr in addrs {
            if is_frame(addr) {
                keys.push(FrameKey::Code {
                    file: INTERPRETED_FILE,
                    offset: addr,
                });
                continue;
            }
            let key = match code.place(tgid, time, addr) {
                Some(Place::File { file, offset }) => match self.file_number(file) {
                    Some(file) => FrameKey::Code { file, offset },
                    None => FrameKey::Address { image, addr },
                },
                Some(Place::Vdso { offset }) => FrameKey::Code {
                    file: VDSO_FILE,
                    offset,
                },
                // Interpreted frames are keyed above; maps place none.
                Some(Place::Interpreted) | None => FrameKey::Address { image, addr },
            };
            keys.push(key);
        }
        let r = self.intern_keys(tgid, time, addrs, &keys);
        self.keys = keys;
        r
    }

    fn intern_keys(&mut self, tgid: u32, time: u64, addrs: &[u64], keys: &[FrameKey]) -> StackRef {
        if let Some(&id) = self.user_ids.get(keys) {
            return StackRef::User(id);
        }
        if !self.has_room() {
            return StackRef::Missed;
        }
        let Ok(id) = StackId::try_from(self.table.user.len()) else {
            self.missed += 1;
            return StackRef::Missed;
        };
        let keys: Arc<[FrameKey]> = keys.into();
        self.table.user.push(UserStack {
            tgid,
            time,
            addrs: addrs.to_vec(),
            keys: Arc::clone(&keys),
        });
        self.user_ids.insert(keys, id);
        StackRef::User(id)
    }

    /// The number of `file`, if files can still be numbered (at most
    /// [`MAX_FILES`]: past them, frames in new files are keyed by address).
    fn file_number(&mut self, file: FileKey) -> Option<u32> {
        if let Some(&n) = self.files.get(&file) {
            return Some(n);
        }
        let n = u32::try_from(self.files.len())
            .ok()
            .filter(|&n| (n as usize) < MAX_FILES)?;
        self.files.insert(file, n);
        self.table.files.push(file);
        Some(n)
    }

    /// The image process `tgid` runs now.
    fn image(&mut self, tgid: u32) -> u32 {
        let next = &mut self.next_image;
        *self.images.entry(tgid).or_insert_with(|| {
            let n = *next;
            *next = next.wrapping_add(1);
            n
        })
    }

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
        code: &dyn CodeOf,
    ) -> StackRef {
        let Some(serial) = chain.serial() else {
            return self.intern_user(tgid, time, chain.user(), code);
        };
        if chain.user().is_empty() {
            return StackRef::Empty;
        }
        let image = self.image(tgid);
        let key = (serial, image);
        if let Some(&id) = self.user_memo.get(&key) {
            return StackRef::User(id);
        }
        let r = self.intern_user_in(image, tgid, time, chain.user(), code);
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

    /// Process `tgid` replaced its image (exec): its later frames in no
    /// file are new frames even at the same addresses.
    pub(crate) fn new_image(&mut self, tgid: u32) {
        self.images.remove(&tgid);
    }

    /// Process `tgid` exited: a process that reuses its pid runs another
    /// image.
    pub(crate) fn forget_process(&mut self, tgid: u32) {
        self.images.remove(&tgid);
    }

    /// Starts an empty storage, keeping the files' numbers: the stacks
    /// stored so far go, as the table returned, and those still needed
    /// come back through [`StackInterner::carry`].
    pub(crate) fn renew(&mut self) -> StackTable {
        self.kernel_ids.clear();
        self.user_ids.clear();
        self.kernel_memo.clear();
        self.user_memo.clear();
        let files = self.table.files.clone();
        std::mem::replace(
            &mut self.table,
            StackTable {
                files,
                ..StackTable::default()
            },
        )
    }

    /// Stack `r` of table `old` (see [`StackInterner::renew`]), stored
    /// again here.
    pub(crate) fn carry(&mut self, old: &StackTable, r: StackRef) -> StackRef {
        match r {
            StackRef::Kernel(id) => match old.kernel.get(id as usize) {
                Some(addrs) => self.intern_kernel(addrs),
                None => StackRef::Missed,
            },
            StackRef::User(id) => match old.user.get(id as usize) {
                Some(s) => {
                    let keys = Arc::clone(&s.keys);
                    self.intern_keys(s.tgid, s.time, &s.addrs, &keys)
                }
                None => StackRef::Missed,
            },
            StackRef::Empty | StackRef::Missed | StackRef::Named(_) => r,
        }
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
        assert_eq!(s.intern_user(5, 0, &[], &NoCode), StackRef::Empty);
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
        let u1 = s.intern_user(7, 100, &[1, 2, 3], &NoCode);
        let u2 = s.intern_user(7, 200, &[1, 2, 3], &NoCode);
        let u3 = s.intern_user(8, 300, &[1, 2, 3], &NoCode);
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
        let before = s.intern_user(7, 1, &[0x400000], &NoCode);
        s.new_image(7);
        let after = s.intern_user(7, 2, &[0x400000], &NoCode);
        assert_ne!(before, after);
        assert_eq!(s.intern_user(7, 3, &[0x400000], &NoCode), after);
        // Kernel stacks are unaffected.
        let k = s.intern_kernel(&[0x400000]);
        assert!(matches!(k, StackRef::Kernel(_)));
    }

    /// Files mapped by processes: (tgid, start, end, file's inode, offset
    /// of start in the file); the vDSO is inode 0.
    struct Maps(Vec<(u32, u64, u64, u64, u64)>);

    impl CodeOf for Maps {
        fn place(&self, tgid: u32, _: u64, addr: u64) -> Option<Place> {
            let &(_, start, _, ino, pgoff) = self
                .0
                .iter()
                .find(|&&(t, start, end, _, _)| t == tgid && (start..end).contains(&addr))?;
            Some(if ino == 0 {
                Place::Vdso {
                    offset: addr - start,
                }
            } else {
                Place::File {
                    file: FileKey { dev: 8, ino },
                    offset: addr - start + pgoff,
                }
            })
        }
    }

    #[test]
    fn one_code_path_in_many_processes_is_one_stack() {
        // libc (inode 2) and the program (inode 3) at other addresses in
        // each process, and the vDSO.
        let maps = Maps(vec![
            (10, 0x1000, 0x2000, 2, 0),
            (10, 0x5000, 0x6000, 3, 0x1000),
            (10, 0x9000, 0xa000, 0, 0),
            (11, 0x3000, 0x4000, 2, 0),
            (11, 0x7000, 0x8000, 3, 0x1000),
            (11, 0xb000, 0xc000, 0, 0),
        ]);
        let mut s = StackInterner::new(10);
        let a = s.intern_user(10, 1, &[0x1010, 0x5020, 0x9030], &maps);
        let b = s.intern_user(11, 2, &[0x3010, 0x7020, 0xb030], &maps);
        assert_eq!(a, b);
        // Another offset: another stack.
        let c = s.intern_user(11, 3, &[0x3018, 0x7020, 0xb030], &maps);
        assert_ne!(a, c);
        assert_eq!(s.len(), 2);
        // The first one stored stands for the code path.
        let t = s.into_table();
        let us = t.user_stack(a).unwrap();
        assert_eq!((us.tgid, us.time), (10, 1));
        assert_eq!(us.addrs, [0x1010, 0x5020, 0x9030]);
        // It keeps where its frames run, to be named from the files.
        assert_eq!(us.by_address(), [false; 3]);
        let lib = |ino, offset| {
            Some(Place::File {
                file: FileKey { dev: 8, ino },
                offset,
            })
        };
        let code = t.code(us);
        assert_eq!(
            [code.place(0), code.place(1), code.place(2), code.place(3)],
            [
                lib(2, 0x10),
                lib(3, 0x1020),
                Some(Place::Vdso { offset: 0x30 }),
                None
            ]
        );
        assert!(code.places_all(3));
    }

    #[test]
    fn a_frame_in_no_file_is_told_by_address() {
        let maps = Maps(vec![(10, 0x1000, 0x2000, 2, 0)]);
        let mut s = StackInterner::new(10);
        let a = s.intern_user(10, 0, &[0x9000, 0x1010], &maps);
        let t = s.into_table();
        let us = t.user_stack(a).unwrap();
        assert_eq!(us.by_address(), [true, false]);
        let code = t.code(us);
        assert_eq!(code.place(0), None);
        assert!(code.place(1).is_some());
        assert!(!code.places_all(2));
    }

    #[test]
    fn frames_in_no_file_stay_with_their_process_image() {
        let maps = Maps(vec![(10, 0x1000, 0x2000, 2, 0), (11, 0x1000, 0x2000, 2, 0)]);
        let mut s = StackInterner::new(10);
        // 0x9000 is in no file (JIT code, say): the same address in two
        // processes is not the same code.
        let a = s.intern_user(10, 0, &[0x9000, 0x1010], &maps);
        let b = s.intern_user(11, 0, &[0x9000, 0x1010], &maps);
        assert_ne!(a, b);
        assert_eq!(s.intern_user(10, 1, &[0x9000, 0x1010], &maps), a);
        // An exec, or a pid reused after an exit: another image.
        s.new_image(10);
        let after_exec = s.intern_user(10, 2, &[0x9000, 0x1010], &maps);
        assert_ne!(after_exec, a);
        s.forget_process(10);
        let reused = s.intern_user(10, 3, &[0x9000, 0x1010], &maps);
        assert_ne!(reused, after_exec);
        // Frames in files only: the same code whatever the image.
        let f = s.intern_user(10, 4, &[0x1010], &maps);
        s.forget_process(10);
        assert_eq!(s.intern_user(10, 5, &[0x1010], &maps), f);
    }

    #[test]
    fn overflow_is_missed_and_counted() {
        let mut s = StackInterner::new(2);
        let a = s.intern_kernel(&[1]);
        let b = s.intern_user(1, 0, &[2], &NoCode);
        assert_eq!(s.intern_kernel(&[3]), StackRef::Missed);
        assert_eq!(s.intern_user(1, 0, &[4], &NoCode), StackRef::Missed);
        assert_eq!(s.missed, 2);
        // Known stacks still resolve when storage is full.
        assert_eq!(s.intern_kernel(&[1]), a);
        assert_eq!(s.intern_user(1, 9, &[2], &NoCode), b);
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
        let u = s.intern_user_chain(5, 100, &c, &NoCode);
        assert_eq!(s.intern_user_chain(5, 200, &c, &NoCode), u);
        assert_eq!(s.intern_user(5, 300, &[7, 8], &NoCode), u);
        // Frames skipped: another kernel stack, the same user one.
        let mut d = c.clone();
        d.skip_kernel(1);
        let k2 = s.intern_kernel_chain(&d);
        assert_ne!(k2, k);
        assert_eq!(k2, s.intern_kernel(&[2, 3]));
        assert_eq!(s.intern_user_chain(5, 0, &d, &NoCode), u);
        // Another process, or the same after exec: another user stack.
        assert_ne!(s.intern_user_chain(6, 0, &c, &NoCode), u);
        s.new_image(5);
        let after = s.intern_user_chain(5, 400, &c, &NoCode);
        assert_ne!(after, u);
        assert_eq!(s.intern_user_chain(5, 500, &c, &NoCode), after);
        // Without frames: empty.
        let e = Callchain::default();
        assert_eq!(s.intern_kernel_chain(&e), StackRef::Empty);
        assert_eq!(s.intern_user_chain(5, 0, &e, &NoCode), StackRef::Empty);
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
        assert_eq!(s.intern_user_chain(1, 0, &a, &NoCode), StackRef::Missed);
        assert_eq!(s.intern_user_chain(1, 0, &a, &NoCode), StackRef::Missed);
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
