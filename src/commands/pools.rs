//! `kvcr pools [PATH]...`: the read-only checker of NVIDIA KVCR's pool
//! files (docs/format.md §16): its arguments resolved into
//! [`crate::pools::rules::Options`], the run (`crate::pools::run`) and the
//! one print (`crate::pools::report`).

use crate::format::failure::Failure;
use crate::io::output::emit;
use crate::pools::format::{DEFAULT_JOURNAL_BYTES, DEFAULT_PAGE_SIZE};
use crate::pools::rules::Options;
use clap::Args;
use std::path::PathBuf;

/// The formats `kvcr pools` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PoolsFormat {
    Table,
    Json,
    Prometheus,
}

fn identity(s: &str) -> Result<(u64, u64), String> {
    let (d, i) = s
        .split_once(':')
        .ok_or("expected ST_DEV:ST_INO (decimal)")?;
    Ok((
        d.parse()
            .map_err(|_| format!("{d:?} is not a decimal st_dev"))?,
        i.parse()
            .map_err(|_| format!("{i:?} is not a decimal st_ino"))?,
    ))
}

#[derive(Args, Debug, Clone)]
pub struct PoolsArgs {
    /// Pool directories (the service's --pool-dir) or pool files
    /// (kvcr-pool_<i>-<generation>). KVCR has no default directory.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Also say who holds each pool (/proc/locks, /proc/net/unix): live,
    /// leaked, orphan, or not checked and why.
    #[arg(long)]
    pub live: bool,
    /// The service's --socket-path (ties the listening service to its pools).
    #[arg(long, value_name = "PATH")]
    pub socket_path: Option<PathBuf>,
    /// The service's --guard-count: pool_0 … pool_{N-1} are expected.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub guard_count: Option<u64>,
    /// The service's --pool-sizes-gb (GiB, comma-separated, each rounded down to the page).
    #[arg(long, value_name = "GB,...")]
    pub pool_sizes_gb: Option<String>,
    /// KVCR's journal_bytes (its service CLI always uses 104857600).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_JOURNAL_BYTES)]
    pub journal_bytes: u64,
    /// The claimant's pool_layouts as NAME:BLOCK_BYTES,... (vLLM: one pool
    /// with an empty name, ":<row bytes>").
    #[arg(long, value_name = "NAME:BYTES,...")]
    pub pool_layouts: Option<String>,
    /// The service's --compatibility-digest (checks a handback region's digest).
    #[arg(long, value_name = "STRING")]
    pub compatibility_digest: Option<String>,
    /// The writing host's page size (mmap.PAGESIZE).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_PAGE_SIZE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub page_size: u64,
    /// G3Options.paths, in the primary's order (comma-separated or repeated).
    #[arg(long, value_name = "PATH", value_delimiter = ',')]
    pub g3_paths: Vec<PathBuf>,
    /// G3Options.capacity_bytes_per_file.
    #[arg(long, value_name = "BYTES")]
    pub capacity_bytes_per_file: Option<u64>,
    /// The original file's (st_dev, st_ino), to check a copy's handback digest.
    #[arg(long, value_name = "ST_DEV:ST_INO", value_parser = identity)]
    pub identity: Option<(u64, u64)>,
    /// Milliseconds between the two reads (0 to 60000).
    #[arg(long, value_name = "MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub interval_ms: u64,
    /// Output format (json: one kvcr.pools-report/v1 document on stdout).
    #[arg(long, value_enum, default_value_t = PoolsFormat::Table)]
    pub format: PoolsFormat,
}

/// The options a command line asks for.
pub fn options(a: &PoolsArgs) -> Result<Options, Failure> {
    crate::pools::resolve(
        &a.paths,
        &crate::pools::Asked {
            live: a.live,
            socket_path: a.socket_path.clone(),
            guard_count: a.guard_count,
            pool_sizes_gb: a.pool_sizes_gb.clone(),
            journal_bytes: Some(a.journal_bytes),
            pool_layouts: a.pool_layouts.clone(),
            compatibility_digest: a.compatibility_digest.clone(),
            page_size: Some(a.page_size),
            g3_paths: a.g3_paths.clone(),
            capacity_bytes_per_file: a.capacity_bytes_per_file,
            identity: a.identity,
            interval_ms: Some(a.interval_ms),
        },
    )
}

/// Runs `kvcr pools` and prints its report; returns the exit status.
pub fn run(a: &PoolsArgs) -> Result<i32, Failure> {
    let o = options(a)?;
    let run = crate::pools::run(&o, &|ms| {
        std::thread::sleep(std::time::Duration::from_millis(ms))
    })?;
    let status = run.exit_status();
    match a.format {
        PoolsFormat::Table => {
            let text = crate::pools::print::table(&run);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
        PoolsFormat::Prometheus => {
            let text = crate::pools::print::prometheus(&run);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
        PoolsFormat::Json => {
            let doc = crate::pools::print::document(
                &run,
                crate::io::node::now_unix_ms(),
                &crate::io::node::hostname(),
            );
            emit(|out| crate::format::json::write(out, &doc))?;
        }
    }
    Ok(status)
}
