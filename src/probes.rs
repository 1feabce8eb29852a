//! The kernel's tracing machinery (`trace_event_raw_event_*`,
//! `__traceiter_*`, …) as address ranges from kallsyms, and its removal from
//! the top of kernel stacks. Which of these frames a tracepoint's stack
//! starts in depends on the backend and on how many tracers are attached
//! (with more than one, the kernel calls them through `__traceiter_*`), so
//! both backends trim them to start at the traced function itself.

use anyhow::{Context, Result};

/// Address ranges of the functions between a tracepoint and the stack
/// walker (`trace_event_raw_event_*`, `__traceiter_*`, …): ftrace's stack
/// entries begin inside them, perf's callchains do not.
#[derive(Clone, Debug, Default)]
pub struct ProbeRanges {
    ranges: Vec<(u64, u64)>,
}

/// Name prefixes of the tracing machinery that can head a stack entry.
const PROBE_PREFIXES: &[&str] = &[
    "trace_event_",
    "__traceiter_",
    "trace_buffer_",
    "__ftrace_trace_stack",
    "ftrace_trace_",
    "__trace_stack",
    "event_triggers_",
];

impl ProbeRanges {
    /// Reads `/proc/kallsyms`.
    pub fn load() -> Result<ProbeRanges> {
        let text = std::fs::read_to_string("/proc/kallsyms").context("reading /proc/kallsyms")?;
        Ok(ProbeRanges::from_kallsyms(&text))
    }

    /// The machinery's ranges in a kallsyms listing: each such text symbol
    /// runs up to the next symbol's address (the listing is in address
    /// order within the kernel image; module symbols are never machinery).
    pub fn from_kallsyms(text: &str) -> ProbeRanges {
        let mut ranges = Vec::new();
        let mut open: Option<u64> = None;
        for line in text.lines() {
            let mut parts = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if let Some(start) = open.take()
                && addr > start
            {
                ranges.push((start, addr));
            }
            let text_symbol = matches!(kind, "t" | "T");
            if text_symbol
                && addr != 0
                && parts.next().is_none()
                && PROBE_PREFIXES.iter().any(|p| name.starts_with(p))
            {
                open = Some(addr);
            }
        }
        ranges.sort_unstable();
        ProbeRanges { ranges }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Removes the leading frames that lie in the machinery.
    pub fn trim(&self, frames: &mut Vec<u64>) {
        let skip = frames.iter().take_while(|&&a| self.contains(a)).count();
        frames.drain(..skip);
    }

    fn contains(&self, addr: u64) -> bool {
        let i = self.ranges.partition_point(|&(start, _)| start <= addr);
        i > 0 && addr < self.ranges[i - 1].1
    }
}
