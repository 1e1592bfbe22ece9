//! Build metadata for `kvcr --version` (long form): the git commit, the
//! build date and the CUDA header version the driver bindings use.
//!
//! - Commit: `git rev-parse HEAD` when this directory is the top of a git
//!   checkout; `unknown` otherwise (a crate tarball, an export).
//!   `KVCR_BUILD_COMMIT` overrides it (for packagers building from a tarball).
//! - Date: `SOURCE_DATE_EPOCH` (reproducible builds), else now; UTC, as
//!   YYYY-MM-DD.
//! - CUDA headers: the `cuda-NNNNN` feature cudarc is built with, read from
//!   Cargo.toml (`cuda-12080` is CUDA 12.8).

// A build script reads cargo's environment and its own files by path: the
// rules of clippy.toml are the crate's, not the build's.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn commit(dir: &Path) -> String {
    if let Ok(c) = std::env::var("KVCR_BUILD_COMMIT") {
        if !c.is_empty() {
            return c;
        }
    }
    // Only this crate's own checkout counts, not a repository it sits in.
    let top = git(dir, &["rev-parse", "--show-toplevel"]).map(PathBuf::from);
    let ours = top
        .and_then(|t| t.canonicalize().ok())
        .is_some_and(|t| Some(t) == dir.canonicalize().ok());
    if !ours {
        return "unknown".to_string();
    }
    // Rebuild when HEAD moves: HEAD itself, the branch it names, packed refs.
    for (arg, rel) in [("--git-dir", "HEAD"), ("--git-common-dir", "packed-refs")] {
        if let Some(d) = git(dir, &["rev-parse", arg]) {
            let p = dir.join(d).join(rel);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    if let (Some(common), Some(branch)) = (
        git(dir, &["rev-parse", "--git-common-dir"]),
        git(dir, &["symbolic-ref", "-q", "HEAD"]),
    ) {
        let p = dir.join(common).join(branch);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    git(dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string())
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn build_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    let (y, m, d) = civil(secs.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `cuda-12080` in the cudarc dependency line → "CUDA 12.8 headers".
fn cuda_headers(manifest: &str) -> String {
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("cudarc"))
        .unwrap_or("");
    let Some(i) = line.find("\"cuda-") else {
        return "CUDA headers unknown".to_string();
    };
    let digits: String = line[i + 6..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    match digits.parse::<u32>() {
        Ok(n) if digits.len() == 5 => {
            let (major, minor) = (n / 1000, (n % 1000) / 10);
            format!("CUDA {major}.{minor} headers")
        }
        _ => "CUDA headers unknown".to_string(),
    }
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=KVCR_BUILD_COMMIT");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    println!("cargo:rustc-env=KVCR_GIT_COMMIT={}", commit(&dir));
    println!("cargo:rustc-env=KVCR_BUILD_DATE={}", build_date());
    println!(
        "cargo:rustc-env=KVCR_CUDA_HEADERS={}",
        cuda_headers(&manifest)
    );
}
