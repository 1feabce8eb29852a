//! The kernel's tracing machinery (`trace_event_raw_event_*`,
//! `__traceiter_*`, …) and its interrupt entry code, as address ranges
//! from kallsyms: what the backends trim from the top of kernel stacks
//! (`crate::source::probes`), and how they tell an interrupt's stack.

use anyhow::Result;

use crate::kallsyms;

/// Address ranges of the functions between a tracepoint and the stack
/// walker (`trace_event_raw_event_*`, `__traceiter_*`, …): ftrace's stack
/// entries begin inside them, perf's callchains do not.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProbeRanges {
    ranges: Vec<(u64, u64)>,
    /// `__irqentry_text_start..__irqentry_text_end`: the interrupt entry
    /// code, in every stack of an interrupt's work (softirqs run on its
    /// exit included).
    irq_entry: Option<(u64, u64)>,
}

/// [`ProbeRanges`] built from the symbols of a kallsyms listing, in
/// listing order: each machinery text symbol runs up to the next higher
/// symbol address (another name at the same address is an alias; the
/// listing is in address order within the kernel image; module symbols are
/// never machinery).
#[derive(Default)]
pub(crate) struct ProbeBuilder {
    ranges: Vec<Range>,
    open: Option<u64>,
    irq_start: Option<u64>,
    irq_end: Option<u64>,
}

impl ProbeBuilder {
    pub(crate) fn add(&mut self, sym: &kallsyms::Symbol<'_>) {
        let addr = sym.addr;
        match sym.name {
            "__irqentry_text_start" if sym.module.is_none() => self.irq_start = Some(addr),
            "__irqentry_text_end" if sym.module.is_none() => self.irq_end = Some(addr),
            _ => {}
        }
        match self.open {
            Some(start) if addr > start => {
                self.ranges.push((start, addr));
                self.open = None;
            }
            // Another name of the same function (an alias): it does not
            // end the range.
            Some(start) if addr == start => {}
            _ => self.open = None,
        }
        let text_symbol = matches!(sym.kind, "t" | "T");
        // Every prefix starts with `_`, `t`, `f` or `e`: most names are
        // ruled out by their first letter.
        let may_be_machinery =
            matches!(sym.name.as_bytes().first(), Some(b'_' | b't' | b'f' | b'e'));
        if text_symbol
            && may_be_machinery
            && addr != 0
            && sym.module.is_none()
            && PROBE_PREFIXES.iter().any(|p| sym.name.starts_with(p))
        {
            self.open = Some(addr);
        }
    }

    pub(crate) fn finish(mut self) -> ProbeRanges {
        self.ranges.sort_unstable();
        ProbeRanges {
            ranges: self.ranges,
            irq_entry: self.irq_start.zip(self.irq_end).filter(|(s, e)| s < e),
        }
    }
}

/// `start..end` of a function, as addresses.
pub(crate) type Range = (u64, u64);

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
    /// Reads `/proc/kallsyms` (see also [`kallsyms::Preload`]).
    pub(crate) fn load() -> Result<ProbeRanges> {
        Ok(ProbeRanges::from_kallsyms(&kallsyms::read()?))
    }

    /// The machinery's ranges in a kallsyms listing (see [`ProbeBuilder`]).
    pub(crate) fn from_kallsyms(text: &str) -> ProbeRanges {
        let mut b = ProbeBuilder::default();
        kallsyms::symbols(text).for_each(|sym| b.add(&sym));
        b.finish()
    }

    /// The ranges and the interrupt entry code, as stored in a cache.
    pub(crate) fn parts(&self) -> (&[Range], Option<Range>) {
        (&self.ranges, self.irq_entry)
    }

    /// Ranges from stored parts, checked: `None` unless they are sorted and
    /// each is a non-empty range.
    pub(crate) fn from_parts(
        ranges: Vec<(u64, u64)>,
        irq_entry: Option<(u64, u64)>,
    ) -> Option<ProbeRanges> {
        let sound = |&(s, e): &(u64, u64)| s < e;
        (ranges.is_sorted() && ranges.iter().all(sound) && irq_entry.iter().all(sound))
            .then_some(ProbeRanges { ranges, irq_entry })
    }

    /// Where `kernel` (a kernel stack, innermost first) enters an
    /// interrupt: the position of its innermost frame in the interrupt
    /// entry code, past which the frames are the interrupted context's.
    /// `None` when it runs on behalf of no interrupt.
    pub(crate) fn irq_entry_frame(&self, kernel: &[u64]) -> Option<usize> {
        let (start, end) = self.irq_entry?;
        kernel.iter().position(|&a| start <= a && a < end)
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many of the leading frames lie in the machinery.
    pub(crate) fn leading(&self, frames: &[u64]) -> usize {
        frames.iter().take_while(|&&a| self.contains(a)).count()
    }

    fn contains(&self, addr: u64) -> bool {
        let i = self.ranges.partition_point(|&(start, _)| start <= addr);
        i > 0 && addr < self.ranges[i - 1].1
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A listing with machinery, data and module symbols (also the
    /// trimming tests').
    pub(crate) const KALLSYMS: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _text
ffffffff81000100 t trace_event_raw_event_sched_switch
ffffffff81000200 T __traceiter_sched_switch
ffffffff81000280 T __schedule
ffffffff81000400 T schedule
ffffffff81000500 T __ftrace_trace_stack
ffffffff81000600 T do_nanosleep
ffffffff82000000 d trace_event_fields_sched_switch
ffffffff82000100 D trace_event_type_funcs_sched_switch
ffffffff82000200 b trace_buffer_bss
ffffffff82000300 d some_data
ffffffffc0001000 t trace_event_raw_event_mod_event\t[mymod]
ffffffffc0001100 t __traceiter_mod_event\t[mymod]
ffffffffc0001200 t mod_function\t[mymod]
";

    #[test]
    fn machinery_ranges_end_at_the_next_symbol() {
        let p = ProbeRanges::from_kallsyms(KALLSYMS);
        assert_eq!(
            p.ranges,
            vec![
                (0xffffffff81000100, 0xffffffff81000200),
                (0xffffffff81000200, 0xffffffff81000280),
                (0xffffffff81000500, 0xffffffff81000600),
            ]
        );
        assert!(!p.is_empty());
        assert!(!p.contains(0xffffffff810000ff));
        assert!(p.contains(0xffffffff81000100));
        assert!(p.contains(0xffffffff8100027f));
        assert!(!p.contains(0xffffffff81000280));
        assert!(!p.contains(0xffffffff81000400));
        assert!(p.contains(0xffffffff810005ff));
        assert!(!p.contains(0xffffffff81000600));
    }

    #[test]
    fn data_symbols_are_not_machinery_but_end_a_range() {
        // Data symbols carry the prefixes too (trace_event_fields_*, …).
        let text = "\
ffffffff81000000 T __traceiter_sched_waking
ffffffff81000040 d trace_event_fields_sched_waking
ffffffff81000080 D trace_event_type_funcs_sched_waking
ffffffff810000c0 b trace_buffer_something
ffffffff81000100 B trace_event_bss
ffffffff81000140 T try_to_wake_up
";
        let p = ProbeRanges::from_kallsyms(text);
        assert_eq!(p.ranges, vec![(0xffffffff81000000, 0xffffffff81000040)]);
        assert!(!p.contains(0xffffffff81000040));
        assert!(!p.contains(0xffffffff810000c0));
        assert!(!p.contains(0xffffffff81000100));
    }

    #[test]
    fn module_symbols_are_ignored() {
        let text = "\
ffffffffc0001000 t trace_event_raw_event_mod_event\t[mymod]
ffffffffc0001100 t __traceiter_mod_event\t[mymod]
ffffffffc0001200 t mod_function\t[mymod]
";
        let p = ProbeRanges::from_kallsyms(text);
        assert!(p.is_empty());
        assert!(!p.contains(0xffffffffc0001000));
        assert!(!p.contains(0xffffffffc0001100));
        // Also as part of a full listing.
        let p = ProbeRanges::from_kallsyms(KALLSYMS);
        assert!(!p.contains(0xffffffffc0001000));
        assert!(!p.contains(0xffffffffc0001150));
    }

    #[test]
    fn zero_addresses_give_no_ranges() {
        // What an unprivileged reader sees under kptr_restrict.
        let text = "\
0000000000000000 T _text
0000000000000000 t trace_event_raw_event_sched_switch
0000000000000000 T __traceiter_sched_switch
0000000000000000 T __schedule
";
        let p = ProbeRanges::from_kallsyms(text);
        assert!(p.is_empty());
        let frames = [0, 0x10, 0xffffffff81000100];
        assert_eq!(p.leading(&frames), 0);
    }

    #[test]
    fn aliases_at_the_same_address_do_not_end_a_range() {
        let text = "\
ffffffff81000100 t trace_event_raw_event_sched_switch
ffffffff81000100 t other_name_of_the_same_function
ffffffff81000200 T __schedule
ffffffff81000300 T schedule
ffffffff81000300 T __traceiter_alias_of_schedule_for_test
ffffffff81000400 T do_nanosleep
";
        let p = ProbeRanges::from_kallsyms(text);
        assert!(p.contains(0xffffffff81000100));
        assert!(p.contains(0xffffffff810001ff));
        assert!(!p.contains(0xffffffff81000200));
        // A machinery name on a function that also has another name.
        assert!(p.contains(0xffffffff81000300));
        assert!(!p.contains(0xffffffff81000400));
    }

    #[test]
    fn last_symbol_and_garbage_lines() {
        // The range of the last symbol has no end: none is made. Lines that
        // are not `ADDRESS TYPE NAME` are skipped.
        let text = "\
garbage
ffffffff8100zzzz T trace_event_raw_event_bad_address
ffffffff81000000 T
\n
ffffffff81000100 T trace_event_raw_event_last
";
        assert!(ProbeRanges::from_kallsyms(text).is_empty());
        assert!(ProbeRanges::from_kallsyms("").is_empty());
        assert!(ProbeRanges::default().is_empty());
    }

    #[test]
    fn interrupt_entry_code_marks_an_interrupts_stack() {
        let p = ProbeRanges::from_kallsyms(
            "ffffffff81000300 T __irqentry_text_start\n\
             ffffffff81000d40 T asm_common_interrupt\n\
             ffffffff81000f70 T __irqentry_text_end\n\
             ffffffff81001000 T do_syscall_64\n",
        );
        let entered = [0xffffffff81001010, 0xffffffff81000d50, 0xffffffff81001010];
        assert_eq!(p.irq_entry_frame(&entered), Some(1));
        assert_eq!(
            p.irq_entry_frame(&[0xffffffff81001010, 0xffffffff81000f70]),
            None
        );
        assert_eq!(
            ProbeRanges::default().irq_entry_frame(&[0xffffffff81000d50]),
            None
        );
    }
}
