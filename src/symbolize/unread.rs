//! Why a process's user stacks print `[unknown]` when nothing of its
//! memory map is known, and the note that says so.

use crate::diag::counted;

/// Why nothing was known of a process's memory map when it was sampled:
/// it exited before `/proc` could be read, and no record told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Unread {
    /// The backend records no mappings (tracefs): they are read from
    /// `/proc` while a process lives.
    NoRecords,
    /// A traced process: the mappings it made while traced are recorded,
    /// not those it had before tracing began.
    BeforeTracing,
    /// A process that was not traced (a waker of the traced threads that
    /// they did not start): no record of it came at all.
    Untraced,
}

/// The note for `stacks` user stacks of `processes` processes that print
/// `[unknown]` for `why`.
pub(crate) fn note(why: Unread, stacks: u64, processes: u64) -> String {
    let one = processes == 1;
    let pick = |single: &'static str, many: &'static str| if one { single } else { many };
    let (it, its) = (pick("it", "they"), pick("its", "their"));
    let reason = match why {
        Unread::NoRecords => format!(
            "{it} exited before {its} memory map could be read (the tracefs backend reads \
             maps from /proc while a process lives)"
        ),
        Unread::BeforeTracing => format!(
            "{it} exited before {its} memory map could be read, and the mappings {it} had \
             made before tracing began were never recorded (the perf backend records those \
             made while it traces)"
        ),
        Unread::Untraced => format!(
            "{} that nothing traced: no record told {its} memory map, and {it} exited \
             before /proc could be read (the perf backend records the maps of the traced \
             processes and of those they start, and reads other wakers' maps from /proc \
             while they live)",
            pick("it was a waker", "they were wakers"),
        ),
    };
    format!(
        "NOTE: {} of {} {} [unknown]: {reason}.",
        counted(stacks, "user stack", "user stacks"),
        counted(processes, "process", "processes"),
        if stacks == 1 { "prints" } else { "print" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracefs_reads_maps_while_a_process_lives() {
        assert_eq!(
            note(Unread::NoRecords, 1, 1),
            "NOTE: 1 user stack of 1 process prints [unknown]: it exited before its memory \
             map could be read (the tracefs backend reads maps from /proc while a process \
             lives)."
        );
        assert_eq!(
            note(Unread::NoRecords, 3, 2),
            "NOTE: 3 user stacks of 2 processes print [unknown]: they exited before their \
             memory map could be read (the tracefs backend reads maps from /proc while a \
             process lives)."
        );
    }

    #[test]
    fn a_traced_process_lacks_the_mappings_from_before_tracing() {
        assert_eq!(
            note(Unread::BeforeTracing, 2, 1),
            "NOTE: 2 user stacks of 1 process print [unknown]: it exited before its memory \
             map could be read, and the mappings it had made before tracing began were never \
             recorded (the perf backend records those made while it traces)."
        );
    }

    /// A waker that was not traced is not said to have had its maps
    /// recorded.
    #[test]
    fn an_untraced_waker_had_nothing_recorded() {
        let one = note(Unread::Untraced, 1, 1);
        assert_eq!(
            one,
            "NOTE: 1 user stack of 1 process prints [unknown]: it was a waker that nothing \
             traced: no record told its memory map, and it exited before /proc could be read \
             (the perf backend records the maps of the traced processes and of those they \
             start, and reads other wakers' maps from /proc while they live)."
        );
        let many = note(Unread::Untraced, 17, 17);
        assert_eq!(
            many,
            "NOTE: 17 user stacks of 17 processes print [unknown]: they were wakers that \
             nothing traced: no record told their memory map, and they exited before /proc \
             could be read (the perf backend records the maps of the traced processes and of \
             those they start, and reads other wakers' maps from /proc while they live)."
        );
        for n in [one, many] {
            assert!(!n.contains("tracefs"), "{n}");
            assert!(!n.contains("records them"), "{n}");
        }
    }
}
