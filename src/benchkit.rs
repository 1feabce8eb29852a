//! The user-space hot path, run over a synthetic stream for the
//! `pipeline` benchmark: ring extraction → record decoding → reordering
//! across CPUs → pairing and stack interning. The stream is shaped like a
//! system-wide trace (sched_switch and sched_waking with 20 kernel and 10
//! user frames, 400 threads, 2 CPUs).

use std::time::Instant;

use anyhow::{Context, Result};

use crate::aggregate::{Aggregator, Config, TaskTable};
use crate::event::Event;
use crate::plan::{Stacks, Targets};
use crate::source::perf::record::{Decoder, Tracepoint};
use crate::source::perf::ring::extract_records;
use crate::source::perf::sys::{
    CONTEXT_KERNEL, CONTEXT_USER, RECORD_SAMPLE, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IDENTIFIER,
    SAMPLE_RAW, SAMPLE_TID, SAMPLE_TIME,
};
use crate::source::reorder::Reorder;
use crate::source::tracepoint::{EventFormat, Tracefs};

const ST: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN | SAMPLE_RAW;
const CPUS: u32 = 2;
const THREADS: u32 = 400;

fn put(raw: &mut [u8], f: &EventFormat, name: &str, bytes: &[u8]) {
    if let Ok(field) = f.field(name) {
        raw[field.offset..field.offset + bytes.len()].copy_from_slice(bytes);
    }
}

fn payload(f: &EventFormat) -> Vec<u8> {
    let size = f.fixed_size();
    // The u32 size and the payload end on an 8-byte boundary.
    let mut raw = vec![0u8; (size + 4).next_multiple_of(8) - 4];
    put(&mut raw, f, "common_type", &(f.id as u16).to_ne_bytes());
    raw
}

fn callchain(seed: u32) -> Vec<u64> {
    let mut ips = vec![CONTEXT_KERNEL];
    ips.extend((0..20).map(|i| 0xffff_ffff_8100_0000 + u64::from(seed % 7) * 0x100 + i * 16));
    ips.push(CONTEXT_USER);
    ips.extend((0..10).map(|i| 0x5555_0000_0000 + u64::from(seed % 5) * 0x100 + i * 16));
    ips
}

/// A whole record of type `ty` around `body`.
pub(crate) fn header(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&ty.to_ne_bytes());
    r.extend_from_slice(&misc.to_ne_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
    r.extend_from_slice(body);
    r
}

/// A sample body for sample_type `ST`.
pub(crate) fn sample_body(
    id: u64,
    pid: u32,
    tid: u32,
    time: u64,
    cpu: u32,
    ips: &[u64],
    raw: &[u8],
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&id.to_ne_bytes());
    b.extend_from_slice(&pid.to_ne_bytes());
    b.extend_from_slice(&tid.to_ne_bytes());
    b.extend_from_slice(&time.to_ne_bytes());
    b.extend_from_slice(&cpu.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&(ips.len() as u64).to_ne_bytes());
    for ip in ips {
        b.extend_from_slice(&ip.to_ne_bytes());
    }
    // RAW: u32 size + data, padded so the record is 8-byte aligned (the
    // kernel counts the padding in size).
    let mut data = raw.to_vec();
    while !(4 + data.len()).is_multiple_of(8) {
        data.push(0);
    }
    b.extend_from_slice(&(data.len() as u32).to_ne_bytes());
    b.extend_from_slice(&data);
    b
}

fn record(id: u64, tid: u32, time: u64, cpu: u32, ips: &[u64], raw: &[u8]) -> Vec<u8> {
    header(
        RECORD_SAMPLE,
        0,
        &sample_body(id, tid, tid, time, cpu, ips, raw),
    )
}

/// Per CPU, rounds of about 64 KiB of whole records: thread A wakes
/// thread B, then A switches out (blocked) to B, which runs. The CPUs
/// run at the same time, as in a real trace: their timestamps
/// interleave (offset so that none are equal), so each round releases
/// about what it read and the reorder window stays small.
fn rings(events: usize, sw: &EventFormat, wk: &EventFormat) -> Result<Vec<Vec<Vec<u8>>>> {
    let chunk = 64 * 1024;
    let mut rings: Vec<Vec<Vec<u8>>> = vec![vec![Vec::new()]; CPUS as usize];
    let per_cpu = events / CPUS as usize;
    for (cpu, ring) in rings.iter_mut().enumerate() {
        let cpu = cpu as u32;
        let mut time = 1_000_000 + u64::from(cpu) * 700;
        for i in 0..per_cpu / 2 {
            let a = 1000 + cpu * THREADS + (i as u32 % THREADS);
            let b = 1000 + cpu * THREADS + ((i as u32 + 1) % THREADS);
            time += 1_500;
            let mut w = payload(wk);
            put(&mut w, wk, "comm", b"worker\0");
            put(&mut w, wk, "pid", &(b as i32).to_ne_bytes());
            if ring.last().is_some_and(|r| r.len() >= chunk) {
                ring.push(Vec::new());
            }
            let round = ring.last_mut().context("one round at least")?;
            round.extend(record(2, a, time, cpu, &callchain(a), &w));
            time += 500;
            let mut s = payload(sw);
            put(&mut s, sw, "prev_comm", b"worker\0");
            put(&mut s, sw, "prev_pid", &(a as i32).to_ne_bytes());
            put(&mut s, sw, "prev_state", &1i64.to_ne_bytes());
            put(&mut s, sw, "next_comm", b"worker\0");
            put(&mut s, sw, "next_pid", &(b as i32).to_ne_bytes());
            round.extend(record(1, a, time, cpu, &callchain(a + 1), &s));
        }
    }
    Ok(rings)
}

/// The aggregation of a system-wide trace of both stacks.
fn config() -> Config {
    Config {
        threads: Targets::All,
        state: None,
        min_block_us: 1,
        max_block_us: u64::MAX,
        stack_storage_size: 16384,
        own: None,
        chain: 1,
        cgroup_names: None,
        split_cgroups: false,
        wall: false,
        stacks: Stacks {
            kernel: true,
            user: true,
            call_graph: crate::cli::CallGraph::Fp,
            call_graph_asked: false,
        },
    }
}

/// Runs `events` synthetic events through the pipeline and says how fast.
pub fn pipeline(events: usize) -> Result<String> {
    let t = Tracefs::at(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tracefs"
    ));
    let sw = t.event_format("sched", "sched_switch")?;
    let wk = t.event_format("sched", "sched_waking")?;
    let mut decoder = Decoder::new(ST, &sw, &wk)?;
    decoder.add_id(1, Tracepoint::Switch);
    decoder.add_id(2, Tracepoint::Waking);
    let rings = rings(events, &sw, &wk)?;
    let bytes: usize = rings.iter().flatten().map(Vec::len).sum();

    // The synthetic threads are looked up nowhere (not in this machine's
    // /proc, where a real task may hold one of their tids).
    let mut aggregator =
        Aggregator::new(config(), TaskTable::default()).with_task_lookup(Box::new(|_| None));
    let mut reorder = Reorder::new();
    let mut scratch = Vec::new();
    let mut decoded = 0u64;
    let mut sink = |e: Event| aggregator.process(&e);

    let started = Instant::now();
    let rounds = rings.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..rounds {
        let mut round_end = u64::MAX;
        for ring in &rings {
            let Some(data) = ring.get(round) else {
                continue;
            };
            let mut last = 0;
            extract_records(data, 0, data.len() as u64, &mut scratch, &mut |rec| {
                if let Ok(Some(ev)) = decoder.decode(rec) {
                    decoded += 1;
                    last = ev.time;
                    reorder.push(ev);
                }
            });
            round_end = round_end.min(last);
        }
        reorder.flush_upto(round_end, &mut sink);
    }
    reorder.flush_all(&mut sink);
    let elapsed = started.elapsed().as_secs_f64();
    let result = aggregator.finish();
    Ok(format!(
        "pipeline: {decoded} events ({} MiB) in {elapsed:.3} s: {:.0} events/s on one core; \
         {} intervals, {} entries",
        bytes >> 20,
        decoded as f64 / elapsed,
        result.stats.intervals,
        result.entries.len()
    ))
}
