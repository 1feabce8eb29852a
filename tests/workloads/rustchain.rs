// FLAGS: -C opt-level=2 -g -C force-frame-pointers=no
//! rustchain K MS [go]: a Rust program built as release builds are, without
//! frame pointers. Thread "rblocked" reads a Unix socket K times under
//! rust_outer() -> rust_inner() -> std's Read; thread "rwaker" sleeps MS
//! milliseconds, then writes a byte under rust_poke(), K times. Prints the
//! reader's time inside read as "blocked_us=<n>" on stderr. With
//! OFFWAKE_PIN_CPU=N it runs on CPU N only.

use std::hint::black_box;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

extern "C" {
    fn sched_setaffinity(pid: i32, size: usize, mask: *const u64) -> i32;
}

#[inline(never)]
fn rust_inner(s: &mut UnixStream) -> usize {
    let mut b = [0u8; 1];
    black_box(s.read(&mut b).expect("read"))
}

#[inline(never)]
fn rust_outer(s: &mut UnixStream) -> usize {
    black_box(rust_inner(s))
}

#[inline(never)]
fn rust_poke(s: &mut UnixStream) -> usize {
    black_box(s.write(b"x").expect("write"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: rustchain K MS [go]");
        std::process::exit(2);
    }
    if let Some(cpu) = std::env::var("OFFWAKE_PIN_CPU").ok().and_then(|c| c.parse::<u32>().ok()) {
        let mask: u64 = 1 << cpu;
        // SAFETY: the mask lives across the call, which reads 8 bytes of it.
        unsafe { sched_setaffinity(0, 8, &mask) };
    }
    let rounds: u32 = args[1].parse().expect("K");
    let ms: u64 = args[2].parse().expect("MS");
    if args.get(3).map(String::as_str) == Some("go") {
        let mut b = [0u8; 1];
        let _ = std::io::stdin().read(&mut b);
    }
    let (mut a, mut b) = UnixStream::pair().expect("socket pair");
    let reader = std::thread::Builder::new()
        .name("rblocked".into())
        .spawn(move || {
            let mut blocked = Duration::ZERO;
            for _ in 0..rounds {
                let t0 = Instant::now();
                rust_outer(&mut a);
                blocked += t0.elapsed();
            }
            blocked
        })
        .expect("reader thread");
    let writer = std::thread::Builder::new()
        .name("rwaker".into())
        .spawn(move || {
            for _ in 0..rounds {
                std::thread::sleep(Duration::from_millis(ms));
                rust_poke(&mut b);
            }
        })
        .expect("writer thread");
    let blocked = reader.join().expect("reader");
    writer.join().expect("writer");
    eprintln!("blocked_us={}", blocked.as_micros());
}
