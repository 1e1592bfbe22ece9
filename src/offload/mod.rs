//! `kvcr offload`: the read-only checker of the disk offload tiers vLLM,
//! llm-d, LMCache and SGLang leave on a node (docs/format.md §15). One vertical
//! folder, lowest layer first: the names ([`grammar`]) and the namespace
//! digest ([`canon`]), what the walk found ([`scan`]), the rules
//! ([`judge`]), the printers ([`mod@print`]), and the walk ([`walk`]), the one
//! part that touches the system. [`run`] ties them: the command line, the
//! library and the Python package all call it.

pub mod canon;
mod family;
pub mod grammar;
pub mod judge;
pub mod nested;
pub mod print;
pub mod scan;
mod set;
mod tally;
pub mod walk;

pub use judge::{Choice, Geometry, Options, Run};

use crate::format::failure::Failure;
use std::ffi::OsString;
use std::sync::atomic::AtomicU64;

/// Walks and judges. `env` is how the caller's environment is read (the
/// library reads none itself); `progress` counts entries as they are read;
/// `now_s` is the time staging ages are measured from.
pub fn run(
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
    progress: Option<&AtomicU64>,
    now_s: i64,
) -> Result<Run, Failure> {
    let mut looked = Vec::new();
    let paths = if options.paths.is_empty() {
        looked = walk::defaults(env);
        looked
            .iter()
            .filter(|l| l.present)
            .map(|l| l.path.clone())
            .collect()
    } else {
        options.paths.clone()
    };
    let scan = walk::walk(
        &paths,
        options.producer,
        &options.sglang_models,
        options.threads.max(1),
        progress,
    )?;
    let entries = scan.entries;
    let without_noatime = scan.without_noatime;
    let sets = judge::judge(scan, options.producer, &options.geometry, now_s);
    Ok(Run {
        options: options.clone(),
        looked,
        sets,
        entries,
        without_noatime,
    })
}
