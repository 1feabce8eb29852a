//! User-space throughput of the hot path, on one core: ring extraction →
//! record decoding → reordering across CPUs → pairing and stack interning,
//! over a synthetic stream of perf samples shaped like a system-wide trace
//! (sched_switch and sched_waking with 20 kernel and 10 user frames, 400
//! threads, 2 CPUs). Prints events per second.
//!
//! `cargo bench --bench pipeline` (optionally followed by the number of
//! events, default 2 million).

fn main() -> anyhow::Result<()> {
    let events: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    println!("{}", offwake_perf::benchkit::pipeline(events)?);
    Ok(())
}
