//! `kvcr offload [PATH]...`: the read-only checker of the disk offload
//! tiers vLLM, llm-d, LMCache and SGLang leave on a node (docs/format.md §15): its
//! arguments resolved into [`crate::offload::Options`], the walk and the
//! rules (`crate::offload::run`), one print, and the progress spinner.

use crate::format::failure::Failure;
use crate::io::output::{emit, to_stderr};
use crate::offload::{Choice, Geometry, Options};
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The formats `kvcr offload` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OffloadFormat {
    Table,
    Json,
    Prometheus,
}

/// When the spinner is drawn on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressWhen {
    /// Only when stderr is a terminal.
    Auto,
    Always,
    Never,
}

/// `--producer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProducerArg {
    Auto,
    Vllm,
    Llmd,
    Lmcache,
    LmcacheMp,
    Sglang,
}

#[derive(Args, Debug, Clone)]
pub struct OffloadArgs {
    /// Offload roots as the engine is configured with them (vLLM's root_dir,
    /// llm-d's shared_storage_path, LMCache's local_disk, gds_path or
    /// base_path, SGLang's storage directory), or one namespace directory
    /// below one (default: llm-d's and SGLang's
    /// default roots).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Which producer's layout to read (auto: recognised by shape and content).
    #[arg(long, value_enum, default_value_t = ProducerArg::Auto)]
    pub producer: ProducerArg,
    /// Output format (json: one kvcr.offload-report/v1 document on stdout).
    #[arg(long, value_enum, default_value_t = OffloadFormat::Table)]
    pub format: OffloadFormat,
    /// Threads for rank directories and a root's statx calls (default: the CPUs, at most 16).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// When to draw a spinner on stderr (never in the JSON or Prometheus output).
    #[arg(long, value_enum, default_value_t = ProgressWhen::Auto)]
    pub progress: ProgressWhen,
    /// Name up to N incomplete or damaged blocks per set in the table.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub list: usize,
    /// vLLM: the bytes of one file, the row the worker logs as `row=` in
    /// "Registering full CPU offload region".
    #[arg(long, value_name = "BYTES")]
    pub kv_bytes_per_chunk: Option<u64>,
    /// llm-d: the bytes one GPU block occupies on one rank across its group's
    /// KV tensors (tensors × stride(0) × element size), as N for every group
    /// or G=N for group G; repeatable.
    #[arg(long, value_name = "[G=]BYTES", value_parser = parse_bpb)]
    pub bytes_per_block: Vec<(Option<u32>, u64)>,
    /// LMCache (local disk and multiprocess): the bytes of one rank's full
    /// chunk (kv × layers × chunk_size × heads per rank × head_dim × itemsize).
    #[arg(long, value_name = "BYTES")]
    pub chunk_bytes: Option<u64>,
    /// SGLang: the bytes of one rank's KV page file on one pipeline stage
    /// (2 × layers × page_size × KV heads per rank × head_dim × itemsize;
    /// MLA: layers × page_size × (kv_lora_rank + qk_rope_head_dim) ×
    /// itemsize).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub page_bytes: Option<u64>,
    /// SGLang: the served model name its files are keyed on
    /// (--served-model-name, else --model-path, with "-<tag>" where the
    /// host pool has a storage-format tag); repeatable. Without it, names
    /// whose model could end in _<digits> are reported as ambiguous.
    #[arg(long = "model", value_name = "NAME")]
    pub models: Vec<std::ffi::OsString>,
}

/// `--bytes-per-block N` or `G=N`.
pub fn parse_bpb(s: &str) -> Result<(Option<u32>, u64), String> {
    let (g, n) = match s.split_once('=') {
        Some((g, n)) => (
            Some(
                g.parse::<u32>()
                    .map_err(|_| format!("group {g:?} is not a group id (0, 1, ...)"))?,
            ),
            n,
        ),
        None => (None, s),
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{n:?} is not a byte count"))?;
    if n == 0 {
        return Err("a block's bytes cannot be 0".into());
    }
    Ok((g, n))
}

/// The options a command line asks for.
pub fn options(a: &OffloadArgs) -> Options {
    let threads = a.threads.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get().min(16))
            .unwrap_or(1)
    });
    Options {
        paths: a.paths.clone(),
        producer: match a.producer {
            ProducerArg::Auto => Choice::Auto,
            ProducerArg::Vllm => Choice::Vllm,
            ProducerArg::Llmd => Choice::Llmd,
            ProducerArg::Lmcache => Choice::Lmcache,
            ProducerArg::LmcacheMp => Choice::LmcacheMp,
            ProducerArg::Sglang => Choice::Sglang,
        },
        geometry: Geometry {
            kv_bytes_per_chunk: a.kv_bytes_per_chunk,
            bytes_per_block: a
                .bytes_per_block
                .iter()
                .copied()
                .collect::<BTreeMap<_, _>>(),
            chunk_bytes: a.chunk_bytes,
            page_bytes: a.page_bytes,
        },
        threads,
        sglang_models: a
            .models
            .iter()
            .map(|m| std::os::unix::ffi::OsStrExt::as_bytes(m.as_os_str()).to_vec())
            .collect(),
    }
}

/// Draws to stderr whether or not it is a terminal (`--progress always`).
#[derive(Debug)]
struct ForcedStderr;

impl indicatif::TermLike for ForcedStderr {
    fn width(&self) -> u16 {
        80
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        to_stderr(|w| writeln!(w, "{s}"));
        Ok(())
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        to_stderr(|w| write!(w, "{s}"));
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        to_stderr(|w| write!(w, "\r"));
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `kvcr offload` and prints its report; returns the exit status.
pub fn run(a: &OffloadArgs) -> Result<i32, Failure> {
    let opts = options(a);
    let draw = match a.progress {
        ProgressWhen::Never => false,
        ProgressWhen::Always => true,
        ProgressWhen::Auto => super::settings::stderr_is_terminal(),
    };
    let counter = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let now_s = (crate::io::node::now_unix_ms() / 1000) as i64;
    let env = |k: &str| super::settings::env_os(k);
    let result = std::thread::scope(|s| {
        if draw {
            s.spawn(|| spinner(&counter, &done, a.progress == ProgressWhen::Always));
        }
        let r = crate::offload::run(&opts, &env, Some(&counter), now_s);
        done.store(true, Ordering::SeqCst);
        r
    });
    let run = result?;
    let status = run.exit_status();
    match a.format {
        OffloadFormat::Table => {
            let text = crate::offload::print::table(&run, a.list);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
        OffloadFormat::Json => {
            let doc = crate::offload::print::document(
                &run,
                crate::io::node::now_unix_ms(),
                &crate::io::node::hostname(),
            );
            emit(|out| crate::format::json::write(out, &doc))?;
        }
        OffloadFormat::Prometheus => {
            let text = crate::offload::print::prometheus(&run);
            emit(|out| out.write_all(text.as_bytes()))?;
        }
    }
    Ok(status)
}

/// The spinner: shown once the walk has taken 200 ms (`forced`: from the
/// start), counting entries; cleared when the walk ends.
fn spinner(counter: &AtomicU64, done: &AtomicBool, forced: bool) {
    let target = if forced {
        indicatif::ProgressDrawTarget::term_like(Box::new(ForcedStderr))
    } else {
        indicatif::ProgressDrawTarget::stderr()
    };
    let started = std::time::Instant::now();
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut target = Some(target);
    while !done.load(Ordering::SeqCst) {
        if bar.is_none() && (forced || started.elapsed() >= std::time::Duration::from_millis(200)) {
            if let Some(t) = target.take() {
                let b = indicatif::ProgressBar::with_draw_target(None, t);
                b.set_style(indicatif::ProgressStyle::default_spinner());
                b.set_message("reading offload directories");
                bar = Some(b);
            }
        }
        if let Some(b) = &bar {
            b.set_position(counter.load(Ordering::Relaxed));
            b.set_message(format!(
                "reading offload directories: {} entries",
                counter.load(Ordering::Relaxed)
            ));
            b.tick();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}
