//! `kvcr seal FILE…` and `kvcr digest FILE` (docs/format.md §3.5, §6.1):
//! the commands over [`crate::api::writer`]'s checks and atomic writes.

use crate::api::writer;
use crate::format::exit;
use crate::format::failure::Failure;
use crate::io::output::emit;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct SealArgs {
    /// Descriptor files to seal (rank-<R>.json).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Print nothing on success; refusals (and what --reseal-edited
    /// overrode) still go to stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Also seal a file whose digest does not match its content (edited or
    /// damaged after sealing: KV008), as it is now; without this flag such a
    /// file is refused. Say so only after checking what changed.
    #[arg(long)]
    pub reseal_edited: bool,
}

#[derive(Args, Debug, Clone)]
pub struct DigestArgs {
    /// The descriptor (or any JSON object) file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `kvcr seal FILE…`: check every file, then write them (docs/format.md §3.5,
/// §6.1). A file whose digest does not match its content is refused (KV008)
/// unless `--reseal-edited`, and then each line says what was overridden.
pub fn seal(args: &SealArgs) -> Result<i32, Failure> {
    let (files, quiet) = (&args.files, args.quiet);
    let options = writer::SealOptions {
        reseal_edited: args.reseal_edited,
    };
    let mut plans = Vec::new();
    let mut worst = exit::OK;
    // One file named twice (or under two names) is sealed once.
    let mut seen = std::collections::HashSet::new();
    for path in files {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::MetadataExt;
            if !seen.insert((m.dev(), m.ino())) {
                continue;
            }
        }
        match writer::check_file_with(path, options) {
            Ok(p) => plans.push(p),
            Err(e) => {
                worst = worst.max(e.exit_status());
                let msg = chain(&format!("refusing to seal {}", path.display()), &e);
                crate::io::output::err_line(&format!(
                    "kvcr: error: {}",
                    crate::format::text::terminal(&msg)
                ));
            }
        }
    }
    if worst != exit::OK {
        crate::io::output::err_line("kvcr: no file was written");
        return Ok(worst);
    }
    let mut lines = String::new();
    for (done, p) in plans.iter().enumerate() {
        let wrote = match writer::apply(p) {
            Ok(w) => w,
            Err(e) => {
                // Say what was already written before this failure.
                if !quiet && !lines.is_empty() {
                    emit(|out| out.write_all(lines.as_bytes()))?;
                }
                return Err(Failure::new(
                    e.exit_status(),
                    format!(
                        "{}; {}",
                        chain(&format!("sealing {}", p.path.display()), &e),
                        if done == 0 {
                            "no file was written".to_string()
                        } else {
                            format!("{done} file(s) listed above were already sealed")
                        }
                    ),
                ));
            }
        };
        let shown = p.path.display().to_string();
        match p.overridden() {
            // What --reseal-edited overrode is said even with --quiet.
            Some(what) if quiet => {
                crate::io::output::err_line(&format!(
                    "kvcr: warning: resealed {}, overriding {}",
                    crate::format::text::terminal(&shown),
                    crate::format::text::terminal(what)
                ));
            }
            Some(what) => lines.push_str(&format!(
                "resealed {}, overriding {}\n",
                crate::format::text::terminal(&shown),
                crate::format::text::terminal(what)
            )),
            None => {
                let verb = if wrote { "sealed" } else { "already sealed" };
                lines.push_str(&format!(
                    "{verb} {}\n",
                    crate::format::text::terminal(&shown)
                ));
            }
        }
    }
    if !quiet {
        emit(|out| out.write_all(lines.as_bytes()))?;
    }
    Ok(exit::OK)
}

/// `kvcr digest FILE`: the canonical digest, one line.
pub fn digest(file: &Path) -> Result<i32, Failure> {
    match writer::digest_file(file) {
        Ok(d) => {
            emit(|out| writeln!(out, "{d}"))?;
            Ok(exit::OK)
        }
        Err(e) => Err(Failure::new(e.exit_status(), e.to_string())),
    }
}

/// `context: error: its source: …`, the error and every source below it
/// after the context, joined by ": ".
fn chain(context: &str, e: &dyn std::error::Error) -> String {
    let mut out = format!("{context}: {e}");
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
