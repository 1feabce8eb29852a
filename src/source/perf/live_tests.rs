//! Live smoke test of the perf backend against the running kernel. Needs
//! root; without it the test returns early, unless `OFFWAKE_REQUIRE_LIVE=1`
//! makes that a failure.

use std::time::{Duration, Instant};

use super::*;
use crate::diag::diag;
use crate::event::{EventKind, Switch};
use crate::live_gate::live_allowed;

/// The whole system, with frame-pointer stacks and rings of `pages`.
fn system_wide_fp(pages: usize) -> PerfConfig {
    PerfConfig {
        mmap_pages: pages,
        stacks: Stacks::both_fp(),
        targets: Targets::All,
        state_filter: None,
        kallsyms: None,
        event_budget: crate::cli::DEFAULT_EVENT_BUDGET,
        cgroup_ids: false,
        wall_hz: None,
    }
}

#[test]
fn live_sleep_is_seen() {
    if !live_allowed("live_sleep_is_seen") {
        return;
    }
    let tracefs = Tracefs::open().expect("tracefs");
    let config = system_wide_fp(64);
    let mut backend = PerfBackend::open(&tracefs, &config).expect("open perf backend");

    let mut events = Vec::new();
    let mut child = std::process::Command::new("sleep")
        .arg("0.05")
        .spawn()
        .expect("spawn sleep");
    let child_pid = child.id();

    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        backend
            .poll(Duration::from_millis(50), None, &mut |e| events.push(e))
            .unwrap();
    }
    child.wait().unwrap();
    backend.finish(&mut |e| events.push(e)).unwrap();
    let stats = backend.stats();
    assert!(
        stats.records > 0,
        "no records read: {} events, stats {stats:?}",
        events.len()
    );
    assert!(
        events.windows(2).all(|w| w[0].time <= w[1].time),
        "event times must be non-decreasing"
    );

    let child_switches: Vec<&Switch> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Switch(s) if s.prev_tid == child_pid => Some(s),
            _ => None,
        })
        .collect();
    assert!(
        !child_switches.is_empty(),
        "no sched_switch with prev_tid = sleep's pid {child_pid}"
    );
    assert!(
        child_switches.iter().any(|s| !s.stack.kernel().is_empty()),
        "the sleep child's switches have no kernel stack"
    );
    assert!(child_switches.iter().all(|s| s.prev_tgid == child_pid));

    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Waking(_))),
        "no sched_waking events"
    );
    // Not asserted: on some machines the wakeup of the child is not traced
    // at all (e.g. when it happens while a task hidden from tracing runs).
    if !events.iter().any(|e| match &e.kind {
        EventKind::Waking(w) => w.wakee_tid == child_pid,
        _ => false,
    }) {
        diag!("live: note: no sched_waking of the sleep child was seen");
    }
    assert!(
        events.iter().any(|e| match &e.kind {
            EventKind::Fork(f) => f.tid == child_pid,
            EventKind::Comm(c) => c.tid == child_pid && c.exec,
            _ => false,
        }),
        "neither a fork nor an exec of the sleep child"
    );
    let now = crate::sys::host::monotonic_ns();
    assert!(
        events
            .iter()
            .all(|e| e.time <= now && e.time > now - 10_000_000_000)
    );
}

/// A reader that does not read: the watch finds its ring more than half
/// full and raises it to real-time priority, which the reader gives up
/// when its `OnDemand` goes.
#[test]
fn the_watch_raises_a_reader_that_falls_behind() {
    if !live_allowed("the_watch_raises_a_reader_that_falls_behind") {
        return;
    }
    // On a thread of its own: its policy changes.
    std::thread::spawn(|| {
        let tracefs = Tracefs::open().expect("tracefs");
        let config = system_wide_fp(1);
        let mut backend = PerfBackend::open(&tracefs, &config).expect("open perf backend");
        let priority = std::sync::Arc::new(OnDemand::for_this_thread());
        backend.watch(&priority);
        assert!(backend.notes().is_empty(), "{:?}", backend.notes());
        let start = Instant::now();
        // Switches of this thread fill the ring, which nothing reads.
        while priority.note(0).is_none() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let note = priority.note(0).expect("the watch raised the reader");
        assert!(
            note.contains("the reader ran at real-time priority"),
            "{note}"
        );
        // SAFETY: sched_getscheduler takes no pointer.
        let policy = || unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
        assert_eq!(policy(), libc::SCHED_FIFO);
        backend.finish(&mut |_| {}).expect("finish");
        drop(priority);
        assert_eq!(policy(), libc::SCHED_OTHER);
    })
    .join()
    .expect("test thread");
}
