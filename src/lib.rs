//! offwake-perf: why was a thread blocked, for how long, and who woke it up,
//! measured from the `sched_switch` and `sched_waking` tracepoints without
//! eBPF.
//!
//! Data flows one way:
//! backend ([`perf`] | [`tracefs`]) → [`reorder`] → [`aggregate`] →
//! [`symbolize`] → [`report`]; [`session`] wires them together for the CLI
//! defined in [`cli`].

pub mod aggregate;
pub mod backend;
#[doc(hidden)]
pub mod benchkit;
pub mod cli;
pub mod command;
pub mod diag;
pub mod event;
pub mod kallsyms;
pub mod perf;
pub(crate) mod plan;
pub mod probes;
pub mod reorder;
pub mod report;
pub mod session;
pub mod symbolize;
pub mod sys;
pub mod tracefs;
pub mod tracepoint;
pub(crate) mod unwind;

#[cfg(test)]
mod live_gate;
#[cfg(test)]
mod proptest_config;
