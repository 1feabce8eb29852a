//! The integration tests: the built tool run against real workloads, one
//! module per suite, linked once. A suite's tests run beside each other
//! but never beside another suite's ([`common::suite`]); select one with
//! its module path, e.g. `cargo test --test integration live::`.

mod common;

mod cgroups;
mod chains;
mod cli;
mod dwarf;
mod exit_status;
mod filters;
mod formats;
mod hostile;
mod java;
mod layout;
mod live;
mod loss;
mod names;
mod own;
mod python;
mod recorded;
mod sources;
mod tracefs;
mod wakers;
mod wall;
