//! Writes the benchmark inventory of issue #6: GROUPS rank groups of 8 TP
//! ranks, each descriptor with 16 allocations carrying 64-byte fabric
//! handles, sealed with real digests (about 5 KB a file).
//!
//! Usage: cargo run --release --example gen-bench -- DIR GROUPS [RANKS]
//!
//! Layout: DIR/g<NNNNN>/rank-<R>.json, one directory per group, so the walk
//! sees what a node with many engines would hold. Groups differ in
//! engine_id and GPU UUIDs; every group is accepted by `kvcr audit`.

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
use testkit::{seal, to_bytes, Desc};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args.len() > 3 {
        eprintln!("usage: gen-bench DIR GROUPS [RANKS]");
        std::process::exit(2);
    }
    let dir = PathBuf::from(&args[0]);
    let groups: u32 = args[1].parse().expect("GROUPS: a number");
    let ranks: u64 = args
        .get(2)
        .map_or(8, |r| r.parse().expect("RANKS: a number"));
    std::fs::create_dir_all(&dir).expect("create DIR");
    let width = groups.saturating_sub(1).to_string().len().max(5);
    let mut files = 0u64;
    let mut bytes = 0u64;
    for g in 0..groups {
        let sub = dir.join(format!("g{g:0width$}"));
        std::fs::create_dir_all(&sub).expect("mkdir");
        for rank in 0..ranks {
            let mut d = Desc::new(&format!("bench-{g:0width$}"), rank, ranks, 1);
            d.group = g;
            d.allocations = 16;
            d.handle_kind = "fabric";
            // Spread epochs and incarnations a little, as a real node would.
            d.epoch = 1 + u64::from(g % 7);
            let mut v = d.value();
            seal(&mut v);
            let b = to_bytes(&v);
            bytes += b.len() as u64;
            files += 1;
            let p = sub.join(format!("rank-{rank}.json"));
            std::fs::write(&p, &b).expect("write");
            // Owners write descriptors 0600 (docs/format.md §2.4, KV003 live).
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
    }
    eprintln!(
        "gen-bench: {files} descriptors in {groups} groups, {:.1} MB, under {}",
        bytes as f64 / 1e6,
        dir.display()
    );
}
