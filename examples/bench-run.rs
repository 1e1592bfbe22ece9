//! Runs a command N times, stdout discarded, and prints one line per run:
//! wall seconds, peak RSS in KiB (the child's `ru_maxrss` from `wait4`), the
//! exit status, and the CPU seconds it used (user + system, its children
//! included). Used by `benches/bench.py` (see docs/bench.md).
//!
//! A measuring process must be small: on Linux a child's `ru_maxrss`
//! includes the high-water mark of the memory it was spawned from, so a
//! Python driver spawning kvcr directly would report its own 40+ MiB.
//!
//! Usage: cargo run --release --example bench-run -- [-n N] -- CMD [ARGS...]

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

use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut n = 1usize;
    if args.first().map(String::as_str) == Some("-n") && args.len() > 1 {
        n = args[1].parse().expect("-n N: a number");
        args.drain(..2);
    }
    if args.first().map(String::as_str) == Some("--") {
        args.remove(0);
    }
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: bench-run [-n N] -- CMD [ARGS...]");
        std::process::exit(2);
    };
    for _ in 0..n {
        let t = Instant::now();
        // Reaped below by wait4, which also returns its rusage.
        #[allow(clippy::zombie_processes)]
        let child = Command::new(cmd)
            .args(rest)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
        let pid = child.id() as libc::pid_t;
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain data; wait4 fills it for our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        let wall = t.elapsed().as_secs_f64();
        assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let cpu = secs(ru.ru_utime) + secs(ru.ru_stime);
        println!("{wall:.6} {} {code} {cpu:.6}", ru.ru_maxrss);
    }
}
