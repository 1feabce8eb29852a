//! The caps on entries and chains: threads that wake each other at random
//! make an entry per pair of threads, and with `--chain` a chain per
//! interval, until the caps merge them by process.

use super::*;

/// The storm's process, and its threads `PID + 1 ..= PID + threads`.
const PID: u32 = 7000;

/// The cap on entries, and on chains, as the tool applies it: at
/// `--chain 8`, an eighth.
const CAP: usize = 1 << 16;
const CAP_8: usize = CAP / 8;

/// `threads` threads of one process pass one token `hops` times, each to
/// a thread picked at random (each blocks as soon as it has passed it), on
/// one CPU. Returns the events and the microseconds of the intervals that
/// end in them (every one but each thread's last), and how many.
fn storm(threads: u32, hops: u32) -> (Vec<Event>, u64, u64) {
    storm_of(threads, hops, |_| PID)
}

/// [`storm`], thread `tid` of process `tgid(tid)`.
fn storm_of(threads: u32, hops: u32, tgid: impl Fn(u32) -> u32) -> (Vec<Event>, u64, u64) {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let tid = |i: u64| PID + 1 + u32::try_from(i).unwrap();
    let mut events = Vec::new();
    let mut blocked_at: FxHashMap<u32, u64> = FxHashMap::default();
    let mut total_us = 0;
    let mut intervals = 0;
    let mut time = 1_000_000;
    let mut running = tid(0);
    for _ in 0..hops {
        let mut next = tid(random() % u64::from(threads));
        if next == running {
            next = tid((u64::from(next - PID)) % u64::from(threads));
        }
        time += 2_000;
        let wake = |at, waker: u32, wakee: u32| Event {
            time: at,
            cpu: 0,
            kind: EventKind::Waking(Waking {
                waker_tid: waker,
                waker_tgid: tgid(waker),
                wakee_tid: wakee,
                wakee_comm: Comm::from("storm"),
                stack: chain(&[0xe1], &[0x5001]),
                user_copy: None,
                context: WakeContext::Task,
            }),
        };
        events.push(wake(time, running, next));
        let mut s = switch(
            time + 500,
            0,
            running,
            S,
            chain(&[0xf1], &[0x4001]),
            next,
            "storm",
        );
        if let EventKind::Switch(s) = &mut s.kind {
            s.prev_tgid = tgid(running);
            s.prev_comm = Comm::from("storm");
        }
        events.push(s);
        if let Some(at) = blocked_at.remove(&next) {
            total_us += (time + 500 - at) / 1000;
            intervals += 1;
        }
        blocked_at.insert(running, time + 500);
        running = next;
    }
    (events, total_us, intervals)
}

fn storm_config(chain: u8) -> Config {
    Config {
        threads: Targets::Processes([PID].into_iter().collect()),
        chain,
        ..config()
    }
}

fn storm_agg(chain: u8) -> Aggregator {
    let mut tasks = TaskTable::default();
    tasks.tasks.insert(PID, task(PID, "storm", false));
    Aggregator::new(storm_config(chain), tasks).with_task_lookup(Box::new(|tid| {
        (tid > PID).then(|| task(PID, "storm", false))
    }))
}

fn notes(r: &Aggregate) -> String {
    r.stats.notes(false, "--mmap-pages").join("\n")
}

#[test]
fn a_storm_of_thread_pairs_is_merged_by_process_at_the_cap() {
    // 400 threads: 159,600 pairs, some 90,000 met in 150,000 hops.
    let (events, total_us, intervals) = storm(400, 150_000);
    let mut a = storm_agg(1);
    run(&mut a, &events);
    let r = a.finish();
    assert!(r.entries.len() <= CAP, "{} entries", r.entries.len());
    // Merged all at once: no entry names a thread any more.
    assert!(
        r.entries
            .iter()
            .all(|e| (e.key.target_tid, e.key.waker_tid) == (PID, PID)),
        "{:?}",
        r.entries.iter().find(|e| e.key.target_tid != PID)
    );
    // Not a microsecond lost.
    assert_eq!(r.entries.iter().map(|e| e.total_us).sum::<u64>(), total_us);
    assert_eq!(r.stats.intervals, intervals);
    let notes = notes(&r);
    assert!(notes.contains("merged by process"), "{notes}");
    assert!(!notes.contains("not counted"), "{notes}");
}

#[test]
fn a_storm_of_chains_is_merged_by_process_at_the_cap() {
    // With --chain 8 almost every interval's chain is a new one.
    let (events, total_us, intervals) = storm(400, 20_000);
    let mut a = storm_agg(8);
    run(&mut a, &events);
    let r = a.finish();
    assert!(r.chains.len() <= CAP_8 + 1, "{} chains", r.chains.len());
    assert!(r.entries.len() <= CAP_8, "{} entries", r.entries.len());
    for levels in &r.chains {
        for level in levels {
            if let Level::Waited { waker, .. } = level {
                assert_eq!(waker.tid, PID, "{levels:?}");
            }
        }
    }
    assert_eq!(r.entries.iter().map(|e| e.total_us).sum::<u64>(), total_us);
    assert_eq!(r.stats.intervals, intervals);
    let notes = notes(&r);
    assert!(notes.contains("merged by process"), "{notes}");
}

#[test]
fn a_few_threads_keep_their_ids() {
    let (events, total_us, intervals) = storm(20, 5_000);
    let mut a = storm_agg(8);
    run(&mut a, &events);
    let r = a.finish();
    assert!(r.entries.iter().any(|e| e.key.target_tid != PID));
    assert_eq!(r.entries.iter().map(|e| e.total_us).sum::<u64>(), total_us);
    assert_eq!(r.stats.intervals, intervals);
    assert!(!notes(&r).contains("merged by process"));
}

/// Each thread its own process, as on a machine that starts short
/// processes all day: merged by process, the entries still pass the cap,
/// and are merged by command, every interval counted.
#[test]
fn a_storm_of_processes_is_merged_by_command_at_the_cap() {
    let (events, total_us, intervals) = storm_of(400, 150_000, |tid| tid);
    let config = Config {
        threads: Targets::All,
        ..config()
    };
    let mut a = Aggregator::new(config, TaskTable::default())
        .with_task_lookup(Box::new(|tid| Some(task(tid, "storm", false))));
    // One program: every process's user frames are in its one file.
    struct OneFile;
    impl CodeOf for OneFile {
        fn place(&self, _: u32, _: u64, addr: u64) -> Option<Place> {
            Some(Place::File {
                file: crate::sys::open::FileKey { dev: 8, ino: 2 },
                offset: addr,
            })
        }
    }
    for e in &events {
        a.process_with(e, &OneFile);
    }
    let r = a.finish();
    assert!(r.entries.len() <= CAP, "{} entries", r.entries.len());
    assert!(
        r.entries.iter().all(|e| (
            e.key.target_tid,
            e.key.target_tgid,
            e.key.waker_tid,
            e.key.waker_tgid
        ) == (0, 0, 0, 0)),
        "{:?}",
        r.entries.first()
    );
    assert_eq!(r.entries.iter().map(|e| e.total_us).sum::<u64>(), total_us);
    assert_eq!(r.stats.intervals, intervals);
    let notes = notes(&r);
    assert!(notes.contains("merged by command"), "{notes}");
    assert!(!notes.contains("not counted"), "{notes}");
}
