//! The fallback backend: recording into a private ftrace instance
//! ([`backend`]: [`instance`] sets it up, [`guardian`] removes it if we
//! die, [`page`] decodes its buffer pages, [`decode`] turns entries into
//! events, [`cgroups`] tells their threads' cgroups). Finding tracefs and
//! reading formats is [`crate::source::tracepoint`]'s.

pub(crate) mod backend;
pub(crate) mod cgroups;
pub(crate) mod decode;
pub(crate) mod guardian;
pub(crate) mod instance;
pub(crate) mod page;

#[cfg(test)]
mod proptests;
