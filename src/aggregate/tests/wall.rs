//! The wall-clock profile: waits split at their wakeup, preempted waits,
//! on-CPU samples, and what bounds apply to which share.

use super::*;
use crate::event::{OnCpu, WakeContext};

fn wall() -> Config {
    Config {
        wall: true,
        ..config()
    }
}

fn sample(time: u64, tid: u32, cpu_ns: u64) -> Event {
    Event {
        time,
        cpu: 0,
        kind: EventKind::OnCpu(OnCpu {
            tid,
            tgid: tgid_of(tid),
            stack: chain(&[], &[0x4100]),
            user_copy: None,
            cpu_ns,
            counted: true,
            cgroup: None,
        }),
    }
}

/// The entries' microseconds by their pseudo-waker (`Task` for blocked
/// waits), for target `tid`.
fn shares(r: &Aggregate, tid: u32) -> Vec<(WakeContext, u64)> {
    let mut v: Vec<(WakeContext, u64)> = r
        .entries
        .iter()
        .filter(|e| e.key.target_tid == tid)
        .map(|e| (e.key.waker_context, e.total_us))
        .collect();
    v.sort();
    v
}

#[test]
fn a_wait_is_split_at_its_wakeup() {
    let mut a = agg(wall());
    run(
        &mut a,
        &[
            out(1_000_000, 0, 100),
            waking(4_000_000, 0, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(4_750_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    assert_eq!(
        shares(&r, 100),
        [(WakeContext::Task, 3_000), (WakeContext::Runnable, 750)]
    );
    let runnable = r
        .entries
        .iter()
        .find(|e| e.key.waker_context == WakeContext::Runnable)
        .unwrap();
    // The wait for a CPU keeps where the thread waited, and no waker.
    assert_eq!(
        r.stacks.kernel_addrs(runnable.key.target_kernel),
        Some(&[0xf1u64][..])
    );
    assert_eq!(
        (runnable.key.waker_tid, runnable.key.waker_kernel),
        (0, StackRef::Empty)
    );
    // Without --wall, one blocked wait of the whole interval.
    let mut plain = agg(config());
    run(
        &mut plain,
        &[
            out(1_000_000, 0, 100),
            waking(4_000_000, 0, 200, 100, chain(&[0xe1], &[0x501])),
            back_in(4_750_000, 0, 100, "app"),
        ],
    );
    assert_eq!(shares(&plain.finish(), 100), [(WakeContext::Task, 3_750)]);
}

#[test]
fn a_preempted_wait_is_a_wait_for_a_cpu_and_bounds_apply_to_blocked_waits() {
    let mut a = agg(Config {
        min_block_us: 2_000,
        max_block_us: 5_000,
        ..wall()
    });
    let stack = || chain(&[0xf1], &[0x4001]);
    run(
        &mut a,
        &[
            // Preempted for 10 ms: past -M, and counted all the same.
            switch(0, 0, 100, PREEMPTED, stack(), 0, "swapper"),
            back_in(10_000_000, 0, 100, "app"),
            // Blocked 1 ms (under -m), then 3 ms runnable: the runnable
            // part stays.
            out(11_000_000, 0, 100),
            waking(12_000_000, 0, 200, 100, chain(&[0xe1], &[])),
            back_in(15_000_000, 0, 100, "app"),
            // Asleep with no wakeup seen: blocked throughout.
            out(16_000_000, 0, 100),
            back_in(20_000_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    assert_eq!(
        shares(&r, 100),
        [(WakeContext::Task, 4_000), (WakeContext::Runnable, 13_000)]
    );
    assert_eq!(r.stats.out_of_range, 1);
}

#[test]
fn on_cpu_samples_count_their_period_for_targets_only() {
    let mut a = agg(wall());
    run(
        &mut a,
        &[
            sample(1_000, 100, 5_025_125),
            sample(2_000, 100, 5_025_125),
            sample(3_000, 4242, 5_025_125),
        ],
    );
    let r = a.finish();
    assert_eq!((r.stats.on_cpu_samples, r.stats.on_cpu_us), (2, 10_050));
    assert_eq!(shares(&r, 100), [(WakeContext::OnCpu, 10_050)]);
    let e = only(&r);
    assert_eq!(
        r.stacks.user_stack(e.key.target_user).unwrap().addrs,
        [0x4100]
    );
    assert_eq!(e.key.target_kernel, StackRef::Empty);
    assert_eq!(e.key.target_comm.as_str(), "app");
    // Without --wall, a stray sample counts nothing.
    let mut plain = agg(config());
    run(&mut plain, &[sample(1_000, 100, 5_025_125)]);
    assert!(plain.finish().entries.is_empty());
}

#[test]
fn every_share_adds_up_to_the_wall_time_between_switches() {
    // Runs 0–2 ms (sampled once), blocks 2–7 ms, waits for the CPU 7–9
    // ms, runs 9–10 ms, is preempted 10–12 ms and runs again.
    let mut a = agg(wall());
    run(
        &mut a,
        &[
            sample(1_000_000, 100, 2_000_000),
            out(2_000_000, 0, 100),
            waking(7_000_000, 0, 200, 100, chain(&[0xe1], &[])),
            back_in(9_000_000, 0, 100, "app"),
            sample(10_000_000, 100, 1_000_000),
            switch(10_000_000, 0, 100, PREEMPTED, chain(&[0xf1], &[]), 0, "x"),
            back_in(12_000_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    let total: u64 = shares(&r, 100).iter().map(|&(_, us)| us).sum();
    assert_eq!(total, 12_000);
    assert_eq!(
        shares(&r, 100),
        [
            (WakeContext::Task, 5_000),
            (WakeContext::Runnable, 2_000),
            (WakeContext::Runnable, 2_000),
            (WakeContext::OnCpu, 3_000),
        ]
    );
}

#[test]
fn lost_records_discard_both_shares_and_idle_is_not_split() {
    let all = || {
        agg(Config {
            threads: Targets::All,
            ..wall()
        })
    };
    let mut a = all();
    run(
        &mut a,
        &[
            out(1_000_000, 0, 100),
            ev(
                2_000_000,
                EventKind::Lost(crate::event::Lost {
                    records: 1,
                    until: 2_500_000,
                }),
            ),
            waking(3_000_000, 0, 200, 100, chain(&[0xe1], &[])),
            back_in(4_000_000, 0, 100, "app"),
        ],
    );
    let r = a.finish();
    assert!(shares(&r, 100).is_empty(), "{:?}", shares(&r, 100));
    assert_eq!(r.stats.discarded_lost, 1);
    // The idle task's intervals stay whole: it never waits for a CPU.
    let mut a = all();
    run(
        &mut a,
        &[back_in(1_000_000, 0, 100, "app"), out(3_000_000, 0, 100)],
    );
    let r = a.finish();
    assert_eq!(shares(&r, 0), [(WakeContext::Task, 2_000)]);
    // An idle task's samples are its CPU's.
    let mut a = all();
    run(&mut a, &[sample(500, 0, 1_000_000)]);
    assert_eq!(only(&a.finish()).key.target_comm.as_str(), "swapper/0");
}

/// [`sample`] whose CPU time the kernel did not count: it says only the
/// event's period.
fn uncounted(time: u64, tid: u32, period_ns: u64) -> Event {
    let mut e = sample(time, tid, period_ns);
    if let EventKind::OnCpu(s) = &mut e.kind {
        s.counted = false;
    }
    e
}

#[test]
fn a_sample_not_counted_stands_for_the_cpu_time_of_the_slices_seen_since_the_last() {
    const P: u64 = 1_000_000;
    let events = [
        // The first sample: the period.
        uncounted(P, 100, P),
        // A timer firing 2.5 periods late: the CPU time since.
        uncounted(4 * P + P / 2, 100, P),
        // Out at 5, in at 10 (from sched_switch), sampled at 11: 1.5.
        out(5 * P, 0, 100),
        back_in(10 * P, 0, 100, "app"),
        uncounted(11 * P, 100, P),
        // Out at 12, in unseen: the period.
        out(12 * P, 0, 100),
        uncounted(20 * P, 100, P),
        // Out at 21, in at 30 (a context-switch record), sampled at 33.
        out(21 * P, 0, 100),
        ev(
            30 * P,
            EventKind::SwitchIn(crate::event::SwitchIn {
                tid: 100,
                tgid: tgid_of(100),
                prev_tid: 0,
            }),
        ),
        uncounted(33 * P, 100, P),
    ];
    let on_cpu = |config: Config, events: &[Event]| {
        let mut a = agg(config);
        run(&mut a, events);
        a.finish().stats.on_cpu_us
    };
    assert_eq!(
        on_cpu(wall(), &events),
        1_000 + 3_500 + 1_500 + 1_000 + 4_000
    );
    // A loss: the next sample stands for its period.
    let mut lossy = events[..5].to_vec();
    lossy.insert(
        4,
        ev(
            10 * P + 1,
            EventKind::Lost(crate::event::Lost {
                records: 1,
                until: 10 * P + 2,
            }),
        ),
    );
    assert_eq!(on_cpu(wall(), &lossy), 1_000 + 3_500 + 1_000);
    // --state hides switch-outs: every sample stands for its period.
    let state = Config {
        state: Some(crate::event::state::StateFilter::from_user(2).unwrap()),
        ..wall()
    };
    assert_eq!(on_cpu(state, &events), 5 * 1_000);
    // The idle task's switches are not followed.
    let idle = [uncounted(P, 0, P), uncounted(4 * P, 0, P)];
    let all = Config {
        threads: Targets::All,
        ..wall()
    };
    assert_eq!(on_cpu(all, &idle), 2_000);
}
