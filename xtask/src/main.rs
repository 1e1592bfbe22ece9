//! `cargo xtask TASK`: see the library's documentation (xtask/src/lib.rs).

// A development tool, not the shipped crate: it prints its results and reads
// its own files by path, so the rules of clippy.toml and Cargo.toml [lints]
// for the crate do not apply here.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::process::ExitCode;
use xtask::Task;

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    match xtask::parse(&args) {
        Ok(Task::Man(dir)) => match xtask::write_man(dir.as_deref()) {
            Ok(paths) => {
                // A closed stdout (`| head`) ends the listing, not the task.
                let mut out = std::io::stdout().lock();
                for p in paths {
                    if writeln!(out, "{}", p.display()).is_err() {
                        break;
                    }
                }
                ExitCode::SUCCESS
            }
            Err((dir, e)) => {
                eprintln!("xtask man: {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        },
        Ok(Task::ManCheck(dir)) => {
            let drift = xtask::man_drift(dir.as_deref());
            if drift.is_empty() {
                ExitCode::SUCCESS
            } else {
                for d in &drift {
                    eprintln!("xtask man --check: {d}");
                }
                eprintln!("regenerate with: cargo xtask man");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("xtask: {e}\n{}", xtask::USAGE);
            ExitCode::from(2)
        }
    }
}
