//! Repository tasks for kvcr, run as `cargo xtask TASK` (the alias in
//! `.cargo/config.toml`, `cargo run --package xtask --`):
//!
//! - `man [DIR]`: renders the man pages and the shell completions from the
//!   CLI's clap definitions ([`man`]) into `man/` and `completions/` at the
//!   top of the repository, or into `DIR` and `DIR/completions`.
//! - `man --check`: writes nothing; lists every page or completion that
//!   differs from what the CLI generates and exits 1 if there is one.
//!
//! A workspace member that is never shipped (`publish = false`); kvcr lists
//! it as a dev-dependency only, so that `tests/it/cli/man.rs` checks the
//! committed files against the same renderer.

// A development tool, not the shipped crate: it prints its results and reads
// its own files by path, so the rules of clippy.toml and Cargo.toml [lints]
// for the crate do not apply here.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

pub mod man;

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The top of the repository (this crate lives in `xtask/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ has a parent")
        .to_path_buf()
}

/// Where `man [DIR]` writes: the pages into `DIR` (default `man/`), the
/// completions into `DIR/completions` (default `completions/`).
pub fn man_dirs(out: Option<&Path>) -> (PathBuf, PathBuf) {
    match out {
        Some(d) => (d.to_path_buf(), d.join("completions")),
        None => (repo_root().join("man"), repo_root().join("completions")),
    }
}

/// `man [DIR]`: writes every page (removing pages of subcommands that no
/// longer exist) and every completion script. Returns the paths written, or
/// the directory that could not be written and why.
pub fn write_man(out: Option<&Path>) -> Result<Vec<PathBuf>, (PathBuf, io::Error)> {
    let (pages, completions) = man_dirs(out);
    let mut written = man::write_all(&pages).map_err(|e| (pages.clone(), e))?;
    written.extend(man::write_completions(&completions).map_err(|e| (completions.clone(), e))?);
    Ok(written)
}

/// Every page or completion under [`man_dirs`]`(out)` that differs from
/// what the CLI generates, one line each; empty when they are up to date.
pub fn man_drift(out: Option<&Path>) -> Vec<String> {
    let (pages, completions) = man_dirs(out);
    let mut drift = man::page_drift(&pages);
    drift.extend(man::completion_drift(&completions));
    drift
}

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Task {
    /// `man [DIR]`.
    Man(Option<PathBuf>),
    /// `man --check [DIR]`.
    ManCheck(Option<PathBuf>),
}

/// How to call it, printed with a usage error.
pub const USAGE: &str = "usage: cargo xtask man [--check] [DIR]";

/// Reads the arguments after the program name: one task and its operands,
/// nothing else. The error names what was not understood.
pub fn parse(args: &[OsString]) -> Result<Task, String> {
    let Some((task, rest)) = args.split_first() else {
        return Err("no task given".into());
    };
    if task.to_str() != Some("man") {
        return Err(format!("unknown task {task:?}"));
    }
    let mut check = false;
    let mut dir = None;
    for a in rest {
        if a == "--check" && !check {
            check = true;
        } else if a.to_string_lossy().starts_with('-') {
            return Err(format!("man: unexpected option {a:?}"));
        } else if dir.is_none() {
            dir = Some(PathBuf::from(a));
        } else {
            return Err(format!("man: more than one DIR ({dir:?}, {a:?})"));
        }
    }
    Ok(if check {
        Task::ManCheck(dir)
    } else {
        Task::Man(dir)
    })
}
