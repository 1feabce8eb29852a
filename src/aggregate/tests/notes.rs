//! The WARNING and NOTE lines of the end-of-run summary.

use super::*;

#[test]
fn notes_count_in_the_singular_and_the_plural() {
    let notes = |stats: Stats| stats.notes(false, "--mmap-pages").join("\n");
    let one = notes(Stats {
        switch_ins_from_backstop: 1,
        switch_in_unseen: 1,
        switch_in_unknown: 1,
        woken_by_self: 1,
        woken_by_self_us: 7,
        ..Stats::default()
    });
    for want in [
        "did not report 1 switch-in; it was taken",
        "leave that interval without",
        "NOTE: 1 interval was dropped: their thread ran again but",
        "NOTE: 1 interval was dropped: their thread ran again, but",
        "ending 1 blocked interval (7 us)",
    ] {
        assert!(one.contains(want), "{want:?} not in:\n{one}");
    }
    let many = notes(Stats {
        switch_ins_from_backstop: 2,
        switch_in_unseen: 3,
        switch_in_unknown: 4,
        woken_by_self: 5,
        woken_by_self_us: 9,
        ..Stats::default()
    });
    for want in [
        "did not report 2 switch-ins; they were taken",
        "leave those intervals without",
        "NOTE: 3 intervals were dropped",
        "NOTE: 4 intervals were dropped",
        "ending 5 blocked intervals (9 us)",
    ] {
        assert!(many.contains(want), "{want:?} not in:\n{many}");
    }
}

/// The NOTE on sleeps without a wakeup, from the note lines of `r`.
fn wakeup_note(r: &Aggregate) -> Option<String> {
    let notes = r.stats.notes(false, "--mmap-pages");
    let mut found = notes
        .into_iter()
        .filter(|n| n.contains("no wakeup was read"));
    let note = found.next();
    assert_eq!(found.next(), None, "one such NOTE");
    note
}

#[test]
fn the_no_waker_note_names_the_states_and_counts_right() {
    const IDLE: u64 = 128; // TASK_REPORT_IDLE
    let sleeps = |states: &[u64]| {
        let mut a = agg(config());
        let mut events = Vec::new();
        for (i, &state) in states.iter().enumerate() {
            let t = i as u64 * 10_000;
            events.push(switch(t, 0, 100, state, chain(&[0xf1], &[]), 0, "swapper"));
            events.push(back_in(t + 5_000, 0, 100, "app"));
        }
        run(&mut a, &events);
        a.finish()
    };
    let r = sleeps(&[S]);
    // The empty waker itself is bcc's: no comm, pid 0.
    let e = only(&r);
    assert_eq!((e.key.waker_tid, e.key.waker_comm), (0, Comm::default()));
    assert_eq!(
        wakeup_note(&r).unwrap(),
        "NOTE: no wakeup was read for 1 interval in interruptible sleep (S), so it has \
         an empty waker (some kernels skip sched_waking in a CPU's idle task, or while \
         certain tasks run; with -p, see the README on threads created during tracing)."
    );
    let note = wakeup_note(&sleeps(&[S, S])).unwrap();
    assert!(
        note.starts_with(
            "NOTE: no wakeup was read for 2 intervals in interruptible sleep (S), so \
             they have an empty waker ("
        ),
        "{note}"
    );
    let note = wakeup_note(&sleeps(&[IDLE, S, D, S, PREEMPTED])).unwrap();
    assert!(
        note.starts_with(
            "NOTE: no wakeup was read for 2 intervals in interruptible sleep (S), 1 in \
             uninterruptible sleep (D) and 1 in idle (I), so they have an empty waker ("
        ),
        "{note}"
    );
    // A preempted interval has an empty waker by nature: no NOTE.
    assert_eq!(wakeup_note(&sleeps(&[PREEMPTED])), None);
}

#[test]
fn a_loss_only_suspected_says_so_and_chains_count_their_unseen_wakeups() {
    let notes = |stats: Stats| stats.notes(false, "--mmap-pages").join("\n");
    let suspected = notes(Stats {
        discarded_lost: 1,
        chain_wakeup_unseen: 1,
        ..Stats::default()
    });
    for want in [
        "WARNING: a ring was read too full to tell whether records were lost; 1 interval \
         that could span a loss was discarded.",
        "NOTE: 1 chain reaches a waker's sleep no wakeup was read for, so it ends",
    ] {
        assert!(suspected.contains(want), "{want:?} not in:\n{suspected}");
    }
    let lost = notes(Stats {
        lost_records: 3,
        discarded_lost: 2,
        chain_wakeup_unseen: 4,
        ..Stats::default()
    });
    for want in [
        "WARNING: 3 records lost; 2 intervals that could span a loss were discarded.",
        "NOTE: 4 chains reach a waker's sleep no wakeup was read for, so they end",
    ] {
        assert!(lost.contains(want), "{want:?} not in:\n{lost}");
    }
}

#[test]
fn the_caps_say_what_they_merged_and_lost() {
    use super::entries::Bounded;
    let notes = |bounded: Bounded| {
        Stats {
            bounded,
            ..Stats::default()
        }
        .notes(false, "--mmap-pages")
        .join("\n")
    };
    assert_eq!(notes(Bounded::default()), "");
    let merged = Bounded {
        merged: Some((100, 50)),
        ..Bounded::default()
    };
    let text = notes(merged);
    assert!(
        text.starts_with(
            "NOTE: more than 100 distinct entries or 50 chains: every entry was merged by process"
        ),
        "{text}"
    );
    assert!(!text.contains("WARNING"), "{text}");
    let one = notes(Bounded {
        dropped: 1,
        dropped_us: 7,
        stripped: 1,
        stripped_us: 4,
        chains_not_kept: 1,
        ..merged
    });
    for want in [
        "WARNING: 1 interval (7 us) was not counted: more than 100 distinct entries",
        "WARNING: 1 interval (4 us) was counted without its stacks (printed as [Missed User Stack] and [Missed Kernel Stack]): more than 100 distinct entries",
        "WARNING: 1 interval's chain was not kept past the first waker (printed as [chain not kept]): more than 50 distinct chains",
    ] {
        assert!(one.contains(want), "{want:?} not in:\n{one}");
    }
    let many = notes(Bounded {
        dropped: 2,
        dropped_us: 9,
        stripped: 5,
        stripped_us: 11,
        chains_not_kept: 3,
        ..merged
    });
    for want in [
        "WARNING: 2 intervals (9 us) were not counted",
        "WARNING: 5 intervals (11 us) were counted without their stacks",
        "WARNING: 3 intervals' chains were not kept",
    ] {
        assert!(many.contains(want), "{want:?} not in:\n{many}");
    }
}
