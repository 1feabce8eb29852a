//! offwake-perf: why was a thread blocked, for how long, and who woke it up,
//! measured from the `sched_switch` and `sched_waking` tracepoints without
//! eBPF.
//!
//! Data flows one way, and the modules read in its order:
//! [`source`] (perf, tracefs or a perf.data recording, merged into time
//! order) → [`aggregate`] (pairing) → [`unwind`] → [`runtime`]
//! (interpreted frames) → [`symbolize`] →
//! [`report`]. [`session`] conducts them on the [`plan`] made from the
//! command line ([`cli`]).

pub(crate) mod aggregate;
#[doc(hidden)]
pub mod benchkit;
pub(crate) mod bytes;
pub mod cli;
pub(crate) mod command;
pub mod diag;
pub(crate) mod event;
pub(crate) mod kallsyms;
pub(crate) mod manual;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod runtime;
pub mod session;
pub(crate) mod source;
pub(crate) mod symbolize;
pub(crate) mod sys;
pub mod timing;
pub(crate) mod unwind;

#[cfg(test)]
mod live_gate;
#[cfg(test)]
mod proptest_config;
#[cfg(test)]
mod testing;
