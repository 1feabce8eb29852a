//! offwake-perf: why was a thread blocked, for how long, and who woke it up,
//! measured from the `sched_switch` and `sched_waking` tracepoints without
//! eBPF.
//!
//! Data flows one way:
//! backend ([`perf`] | [`tracefs`]) → [`reorder`] → [`aggregate`] →
//! [`symbolize`] → [`report`]; [`session`] runs them on the [`plan`] made
//! from the command line ([`cli`]).

pub(crate) mod aggregate;
pub(crate) mod backend;
#[doc(hidden)]
pub mod benchkit;
pub(crate) mod bytes;
pub mod cli;
pub(crate) mod command;
pub mod diag;
pub(crate) mod event;
pub(crate) mod kallsyms;
pub(crate) mod perf;
pub(crate) mod perfdata;
pub(crate) mod plan;
pub(crate) mod probes;
pub(crate) mod reorder;
pub(crate) mod report;
pub mod session;
pub(crate) mod symbolize;
pub(crate) mod sys;
pub mod timing;
pub(crate) mod tracefs;
pub(crate) mod tracepoint;
pub(crate) mod unwind;

#[cfg(test)]
mod live_gate;
#[cfg(test)]
mod proptest_config;
#[cfg(test)]
mod testing;
