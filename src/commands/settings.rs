//! Parse → resolve → run. The command line (clap's types, [`super::args`]),
//! the environment and the deployment profile become one settings value
//! per command here, before any work starts; the commands and the library
//! below them see only these values (uv's `GlobalSettings::resolve`). This
//! is the one place that reads kvcr's environment variables.

// The one place that reads kvcr's environment and asks whether stdout and
// stderr are terminals (clippy.toml: disallowed-methods).
#![allow(clippy::disallowed_methods)]

use super::args::{InventoryArgs, OutputArgs};
use super::profile::ProfileArgs;
use crate::format::failure::Failure;
use crate::format::profile::Profile;
use crate::print::Printer;
use crate::rules::Expectations;
use crate::service::audit::{check_engine, Inventory, ProfileSource};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The whole environment the command was started with, for the readers
/// whose producers are configured by their own variables (`kvcr gms`:
/// GMS's, docs/format.md §14.1); the library takes it as an option.
pub fn environment() -> std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> {
    std::env::vars_os().collect()
}

/// Whether stderr is a terminal (progress is drawn only there unless forced).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// A variable of the environment, as the command was started with it.
pub fn env_os(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

/// A variable of kvcr's environment as a path; unset or empty is `None`.
pub fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A variable of kvcr's environment as text; unset, empty or not UTF-8
/// is `None`.
pub fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The environment variable naming a facts file that describes the node
/// in place of this one (docs/live.md).
pub const NODE_FACTS_ENV: &str = "KVCR_NODE_FACTS";

/// The environment variable that sets the number of reading threads.
pub const THREADS_ENV: &str = "KVCR_THREADS";

/// Installs the `KVCR_PROC_ROOT` test hook (docs/live.md) as this
/// process's `/proc`, before any command opens a file; the library never
/// reads it.
pub fn install_proc_root() {
    let value = std::env::var_os(crate::io::procfs::ROOT_ENV);
    crate::io::procfs::ProcFs::install_hook(value.as_deref());
}

/// `KVCR_NODE_FACTS` when set and not empty.
pub fn node_facts_from_env() -> Option<PathBuf> {
    std::env::var_os(NODE_FACTS_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// `KVCR_THREADS` when it is a positive integer, else the default
/// ([`crate::io::pipeline::threads`]).
pub fn threads_from_env() -> usize {
    crate::io::pipeline::threads(
        std::env::var(THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok()),
    )
}

/// The environment variable that declares the producer's user when
/// `--producer-user` is not given (docs/format.md §2.4).
pub const PRODUCER_USER_ENV: &str = "KVCR_PRODUCER_USER";

/// `--producer-user`, else `$KVCR_PRODUCER_USER`, as a uid. An empty
/// variable declares none (an EnvironmentFile's `KVCR_PRODUCER_USER=`); a
/// value that names no user is exit 2 naming the variable, so a value from
/// the environment is never mistaken for one given on the command line.
fn producer_uid(flag: Option<u32>) -> Result<Option<u32>, Failure> {
    if flag.is_some() {
        return Ok(flag);
    }
    let Some(v) = std::env::var_os(PRODUCER_USER_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let hint = || {
        Some(format!(
            "set {PRODUCER_USER_ENV} (in /etc/default/kvcr for the packaged units) to the \
             producer's user name or uid, or leave it empty to declare none"
        ))
    };
    let s = v.to_str().ok_or_else(|| {
        Failure::usage(
            format!("{PRODUCER_USER_ENV}={v:?}: not UTF-8, so it names no user"),
            hint(),
        )
    })?;
    crate::io::inventory::parse_user(s)
        .map(Some)
        .map_err(|e| Failure::usage(format!("{PRODUCER_USER_ENV}={s:?}: {e}"), hint()))
}

/// The inventory `kvcr audit` and `kvcr import` judge: the profile loaded
/// and checked against `--engine`.
pub fn inventory(a: &InventoryArgs) -> Result<Inventory, Failure> {
    let profile = a
        .profile
        .as_deref()
        .map(|p| load_profile(p, a.profile_from_env))
        .transpose()?;
    check_engine(profile.as_ref(), a.engine.as_ref())?;
    Ok(Inventory {
        root: a.root.clone(),
        profile_path: a.profile.clone(),
        profile_source: a.profile.as_ref().map(|_| {
            if a.profile_from_env {
                ProfileSource::Env
            } else {
                ProfileSource::Flag
            }
        }),
        expect: Expectations {
            engine: a.engine.clone(),
            profile,
            min_epoch: a.min_epoch,
            max_age_s: a.max_age,
            local_ranks: a.local_ranks.clone(),
            incarnation: a.incarnation,
            strict: false,
        },
        threads: threads_from_env(),
        node_facts: node_facts_from_env(),
        producer_uid: producer_uid(a.producer_user)?,
    })
}

/// `kvcr profile`: the root, `--engine`, `--incarnation` and
/// `--producer-user`; no profile.
pub fn inventory_for_profile(a: &ProfileArgs) -> Result<Inventory, Failure> {
    let mut inv = Inventory {
        root: a.root.clone(),
        threads: threads_from_env(),
        node_facts: node_facts_from_env(),
        producer_uid: producer_uid(a.producer_user)?,
        ..Inventory::default()
    };
    inv.expect.engine = a.engine.clone();
    inv.expect.incarnation = a.incarnation;
    Ok(inv)
}

/// `--profile FILE` (or `$KVCR_PROFILE`): a profile named only by the
/// environment says so in every message.
pub fn load_profile(path: &Path, from_env: bool) -> Result<Profile, Failure> {
    let shown = if from_env {
        format!("{} (from $KVCR_PROFILE)", path.display())
    } else {
        path.display().to_string()
    };
    crate::service::audit::load_profile(path, &shown)
}

/// Every output decision, from the flags and the terminal and environment:
/// colour (`NO_COLOR`, `TERM`), progress, and the table's width (the
/// terminal's, or `COLUMNS` for a pipe or a file).
pub fn printer(o: &OutputArgs) -> Printer {
    let stdout_tty = std::io::stdout().is_terminal();
    Printer::decide(
        o.format,
        o.color,
        o.quiet,
        o.verbose,
        &|k| std::env::var(k).ok(),
        stdout_tty,
        std::io::stderr().is_terminal(),
    )
    .with_width(if stdout_tty {
        terminal_width()
    } else {
        columns_env(std::env::var("COLUMNS").ok().as_deref())
    })
}

/// `COLUMNS` for output that is not a terminal: a table written to a pipe
/// or a file wraps only when asked to (COLUMNS=80 kvcr audit ... | less).
fn columns_env(v: Option<&str>) -> Option<u16> {
    v.and_then(|s| s.trim().parse::<u16>().ok())
        .filter(|&c| c >= 20)
}

/// Columns of the terminal on stdout; `None` when it cannot be told.
fn terminal_width() -> Option<u16> {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|w| w.ws_col)
        .filter(|&c| c > 0)
}
