//! Interning of kernel and user stacks, bounded by `--stack-storage-size`.

/// Index into a [`StackTable`].
pub type StackId = u32;

/// A stack as an entry refers to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StackRef {
    /// No frames (kernel thread's user stack, or not collected).
    Empty,
    /// Did not fit in the stack storage: printed as a placeholder.
    Missed,
    Kernel(StackId),
    User(StackId),
}

/// A user stack and what is needed to symbolize it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserStack {
    pub tgid: u32,
    /// Time of the first sample with this stack (maps are looked up as of then).
    pub time: u64,
    /// Innermost first.
    pub addrs: Vec<u64>,
}

/// All interned stacks.
#[derive(Clone, Debug, Default)]
pub struct StackTable {
    /// Innermost first.
    pub kernel: Vec<Vec<u64>>,
    pub user: Vec<UserStack>,
}
