//! Where a tracepoint's kernel stack starts: past the tracing machinery
//! (`crate::kallsyms::machinery`) and, for `sched_waking`, past the
//! tracepoint's own site. Which machinery frames a stack starts in depends
//! on the backend and on how many tracers are attached (with more than
//! one, the kernel calls them through `__traceiter_*`), so both backends
//! trim them to start at the traced function itself.

use crate::kallsyms::machinery::ProbeRanges;
use crate::source::tracepoint::sched::Tracepoint;

/// How many leading frames of a kernel stack sampled at `tp` are not the
/// traced code's, for both backends: those in the machinery and, for
/// `sched_waking`, the tracepoint's own site inside `try_to_wake_up` (a
/// waker's stack starts at its caller).
pub(crate) fn kernel_start(probes: &ProbeRanges, frames: &[u64], tp: Tracepoint) -> usize {
    let machinery = probes.leading(frames);
    match tp {
        Tracepoint::Switch => machinery,
        Tracepoint::Waking => (machinery + 1).min(frames.len()),
        // A sample's stack starts where the timer interrupted it.
        Tracepoint::Clock => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kallsyms::machinery::tests::KALLSYMS;

    #[test]
    fn stacks_start_after_the_machinery_and_a_wakings_own_site() {
        use Tracepoint::{Switch, Waking};
        let p = ProbeRanges::from_kallsyms(KALLSYMS);
        let frames = [
            0xffffffff81000110, // trace_event_raw_event_sched_switch
            0xffffffff81000220, // __traceiter_sched_switch
            0xffffffff810002a0, // __schedule (or try_to_wake_up's site)
            0xffffffff81000510, // __ftrace_trace_stack, further down
            0xffffffff81000410, // schedule
        ];
        // Only the leading machinery; a waking's site goes too.
        assert_eq!(kernel_start(&p, &frames, Switch), 2);
        assert_eq!(kernel_start(&p, &frames, Waking), 3);
        // Nothing to trim.
        let frames = [0xffffffff810002a0, 0xffffffff81000110];
        assert_eq!(kernel_start(&p, &frames, Switch), 0);
        assert_eq!(kernel_start(&p, &frames, Waking), 1);
        // All machinery, or nothing at all: never past the end.
        let frames = [0xffffffff81000110, 0xffffffff81000510];
        assert_eq!(kernel_start(&p, &frames, Switch), 2);
        assert_eq!(kernel_start(&p, &frames, Waking), 2);
        assert_eq!(kernel_start(&p, &[], Waking), 0);
        // No ranges: only a waking's site.
        let frames = [0xffffffff81000110];
        assert_eq!(kernel_start(&ProbeRanges::default(), &frames, Switch), 0);
        assert_eq!(kernel_start(&ProbeRanges::default(), &frames, Waking), 1);
    }
}
