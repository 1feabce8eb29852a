//! OS calls and facts that more than one stage needs: the one way to open
//! a file that a traced process names ([`open`]); the page size, CPUs,
//! clock and sysctls ([`host`]); facts from `/proc` ([`proc`]); what a
//! forked child closes first ([`child`]); which tasks are this process's
//! own ([`own`]); the cgroups of `--cgroup`, and which cgroup a task is in
//! ([`cgroup`]); the reader's real-time priority ([`priority`]) and where
//! the tool's threads run ([`affinity`]); bounded reads of a traced
//! thread's stack ([`memory`]), and of a blocked thread's registers
//! ([`blocked`]).

pub(crate) mod affinity;
pub(crate) mod blocked;
pub(crate) mod cache;
pub(crate) mod cgroup;
pub(crate) mod child;
pub(crate) mod host;
pub(crate) mod memory;
pub(crate) mod open;
pub(crate) mod own;
pub(crate) mod priority;
pub(crate) mod proc;
pub(crate) mod vma;
