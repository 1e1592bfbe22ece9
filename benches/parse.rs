//! Micro-benchmark of the per-descriptor CPU work of an audit, on the
//! descriptor of the audit benchmark (8 ranks, 16 fabric allocations,
//! about 5 KB): strict JSON reading, the docs/format.md §3.2 digest, and the whole parse
//! with and without keeping the allocations (one parser: the last two rows
//! include the first ones).
//!
//! Run: cargo bench --bench parse   (prints ns per descriptor and MB/s)
//!
//! Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall
//! time, so other work on the machine disturbs them less. For instruction
//! counts that no other load disturbs:
//! KVCR_BENCH_ITERS=100 valgrind --tool=callgrind target/release/deps/parse-*

use kvcr_testkit as testkit;

use kvcr_audit::descriptor::{canon, json, parse_descriptor_with};
use std::hint::black_box;
use testkit::Desc;

/// This thread's CPU time in ns.
fn cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0, "clock_gettime");
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// Fastest of 7 rounds of `iters` calls, in CPU ns per call (the least
/// disturbed by other work on the machine).
fn time(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<u128> = (0..7)
        .map(|_| {
            let t = cpu_ns();
            for _ in 0..iters {
                f();
            }
            cpu_ns() - t
        })
        .collect();
    rounds.sort();
    rounds[0] as f64 / f64::from(iters)
}

fn main() {
    let mut d = Desc::new("bench-00042", 3, 8, 1);
    d.group = 42;
    d.allocations = 16;
    let bytes = d.bytes();
    let n = bytes.len() as f64;
    // KVCR_BENCH_ITERS: fewer rounds, e.g. under callgrind.
    let iters = std::env::var("KVCR_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // KVCR_BENCH_ONLY: run only the rows whose name contains this.
    let only = std::env::var("KVCR_BENCH_ONLY").unwrap_or_default();
    let v = json::parse(&bytes).expect("valid");
    let canonical = canon::canonical_bytes(&v, Some("digest"));
    type Row<'a> = (&'a str, Box<dyn FnMut() + 'a>);
    let rows: Vec<Row> = vec![
        (
            "sha256 of the canonical form",
            Box::new(|| {
                use sha2::Digest;
                black_box(sha2::Sha256::digest(black_box(&canonical)));
            }),
        ),
        (
            "json::parse",
            Box::new(|| {
                black_box(json::parse(black_box(&bytes)).ok());
            }),
        ),
        (
            "canon::digest_without",
            Box::new(|| {
                black_box(canon::digest_without(black_box(&v), "digest"));
            }),
        ),
        (
            "parse_descriptor (summary)",
            Box::new(|| {
                black_box(parse_descriptor_with(black_box(&bytes), false));
            }),
        ),
        (
            "parse_descriptor (full)",
            Box::new(|| {
                black_box(parse_descriptor_with(black_box(&bytes), true));
            }),
        ),
    ];
    println!("descriptor: {} bytes", bytes.len());
    for (name, mut f) in rows {
        if !name.contains(only.as_str()) {
            continue;
        }
        let ns = time(iters, &mut f);
        println!(
            "{name:32} {ns:8.0} ns/descriptor  {:7.0} MB/s",
            n / ns * 1e3
        );
    }
}
