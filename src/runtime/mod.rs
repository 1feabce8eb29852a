//! Frames of interpreted code: what a runtime (CPython) was running in a
//! blocked thread, read from the thread's process while it waits, and
//! spliced into its native stack in place of the interpreter's frames.
//!
//! A spliced frame travels with the native ones as an address no code
//! can have, standing for a name kept in [`crate::event::interpreted`];
//! stacks are interned and named by it. [`python`] reads CPython;
//! [`reader`] decides when a read may be made and makes it; [`early`]
//! makes reads as soon as the reader sees a switch-out.

pub(crate) mod early;
pub(crate) mod hotspot;
pub(crate) mod memory;
pub(crate) mod python;
pub(crate) mod reader;
