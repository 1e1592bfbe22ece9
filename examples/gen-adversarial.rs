//! Writes the adversarial inventories of `benches/adversarial.sh`:
//!
//! - `copies DIR N`: N copies of one sealed rank-0 descriptor, one per
//!   directory (every copy claims rank 0, its GPU and its handles: the
//!   input that once made KV102/KV106 findings quadratic);
//! - `wide DIR N`: N one-rank groups each declaring world_size 4096 (the
//!   input that once printed one MISSING row per absent rank).
//!
//! Usage: cargo run --release --example gen-adversarial -- copies|wide DIR N

// A program of the project's tests and benchmarks, not the shipped crate: it
// prints its results, reads its own files by path and, where it drives the
// driver or the kernel, calls them directly; the crate's rules (Cargo.toml
// [lints], clippy.toml) hold for src/ alone.
#![allow(
    unsafe_code,
    clippy::undocumented_unsafe_blocks,
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr
)]

use kvcr_testkit as testkit;

use std::path::PathBuf;
use testkit::{put, Desc};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, dir, n] = &args[..] else {
        eprintln!("usage: gen-adversarial copies|wide DIR N");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let n: u32 = n.parse().expect("N: a number");
    match mode.as_str() {
        "copies" => {
            let b = Desc::new("adv-copies", 0, 1, 1).bytes();
            for i in 0..n {
                put(&dir, &format!("c{i:06}/rank-0.json"), &b);
            }
        }
        "wide" => {
            for i in 0..n {
                let mut d = Desc::new(&format!("wide-{i:06}"), 0, 4096, 1);
                d.group = i;
                put(&dir, &format!("g{i:06}/rank-0.json"), &d.bytes());
            }
        }
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}
