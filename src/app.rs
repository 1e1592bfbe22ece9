//! Orchestration: arguments in, exit status out. Reads the inventory, asks
//! the node probe (live), calls the verdict core and hands the result to a
//! printer.

use crate::cli::{AuditArgs, Cli, Command, ExplainArgs, InventoryArgs};
use crate::descriptor::Descriptor;
use crate::exit;
use crate::finding::Code;
use crate::inventory;
use crate::node::{self, NodeProbe};
use crate::pipeline;
use crate::profile::{parse_profile, Profile};
use crate::report::{self, explain, Printer, Verbosity};
use crate::verdict::{self, Candidate, Context, Expectations, FileVerdict, Judgement};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A run that could not happen, with the exit status it maps to and a hint
/// telling the operator what to do.
#[derive(Debug)]
pub struct Failure {
    pub status: i32,
    pub message: String,
    pub hint: Option<String>,
}

impl Failure {
    pub fn usage(message: impl Into<String>, hint: impl Into<Option<String>>) -> Failure {
        Failure {
            status: exit::USAGE,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

/// The result of auditing an inventory, before printing.
pub struct AuditRun {
    pub root: String,
    /// Report metadata (docs/format.md §9.4): host, boot id, options...
    pub meta: report::json::Meta,
    /// Set by `kvcr merge`: the reports merged.
    pub merge: Option<report::json::MergeMeta>,
    pub live: bool,
    /// `--strict`: a fact not checked rejected its rank.
    pub strict: bool,
    /// Live mode: the facts the audit was judged on.
    pub node: Option<node::NodeFacts>,
    pub now_ms: u64,
    pub judgement: Judgement,
}

impl AuditRun {
    /// Live facts that could not be read, over every rank in scope.
    pub fn not_checked(&self) -> usize {
        self.judgement
            .groups
            .iter()
            .flat_map(|g| &g.ranks)
            .map(|r| r.not_checked.len())
            .sum()
    }
}

/// This node's name from uname(2).
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn load_profile(path: &Path) -> Result<Profile, Failure> {
    // A profile is small; 1 MiB like a descriptor.
    let bytes = crate::input::read_regular(path, 1 << 20).map_err(|e| {
        Failure::usage(format!("cannot read profile {}: {e}", path.display()), None)
    })?;
    parse_profile(&bytes).map_err(|e| {
        Failure::usage(
            format!("bad profile {}: {e}", path.display()),
            Some("see docs/format.md §4 / README 'Deployment profile' for the format".to_string()),
        )
    })
}

/// Builds the operator's expectations from the profile and the flags.
pub fn expectations(args: &InventoryArgs) -> Result<Expectations, Failure> {
    let profile = args.profile.as_deref().map(load_profile).transpose()?;
    if let (Some(p), Some(e)) = (&profile, &args.engine) {
        if p.engine_id != *e {
            return Err(Failure::usage(
                format!(
                    "--engine {e:?} differs from the profile's engine_id {:?}",
                    p.engine_id
                ),
                Some("drop --engine, or use the profile written for that group".to_string()),
            ));
        }
    }
    if let Some(Err(e)) = profile
        .as_ref()
        .and_then(|p| p.local_ranks.as_deref())
        .map(crate::rankset::RankSet::parse)
    {
        return Err(Failure::usage(
            format!("bad profile: local_ranks: {e}"),
            Some("write ranks as 0-7 or 0-3,8-11".to_string()),
        ));
    }
    Ok(Expectations {
        engine: args.engine.clone(),
        profile,
        min_epoch: args.min_epoch,
        max_age_s: args.max_age,
        local_ranks: args.local_ranks.clone(),
        incarnation: args.incarnation,
        strict: false,
    })
}

pub(crate) fn root_of(args: &InventoryArgs) -> Result<PathBuf, Failure> {
    let root = args.root.clone().ok_or_else(|| {
        Failure::usage(
            "no inventory root given",
            Some("pass ROOT or set KVCR_INVENTORY".to_string()),
        )
    })?;
    inventory::resolve_root(&root).map_err(|e| Failure::usage(e.to_string(), None))
}

/// Refuses an output path (a ready file, a metrics file) inside the
/// inventory: kvcr never writes there, and its own staging file would be
/// read back as a torn write. `what` names the flag. The path's directory is
/// resolved (symlinks followed) and compared with the resolved root
/// component by component, on raw bytes.
pub(crate) fn refuse_inside_inventory(
    args: &InventoryArgs,
    path: &Path,
    what: &str,
) -> Result<(), Failure> {
    let root = root_of(args)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A directory that does not exist yet cannot be inside the inventory
    // unless an ancestor is: resolve the deepest existing ancestor.
    let mut probe = dir.as_path();
    let resolved = loop {
        match std::fs::canonicalize(probe) {
            Ok(p) => break Some(p),
            Err(_) => match probe.parent() {
                Some(up) if !up.as_os_str().is_empty() => probe = up,
                _ => break std::env::current_dir().ok(),
            },
        }
    };
    // By identity too: the directory (or an ancestor of it) may be one of
    // the inventory's directories seen through another path, such as a
    // bind mount of the inventory elsewhere. Compared as (device, inode).
    let inside_by_identity = resolved.as_deref().is_some_and(|d| {
        use std::os::unix::fs::MetadataExt;
        let mut ids = std::collections::HashSet::new();
        for a in d.ancestors() {
            if let Ok(m) = std::fs::metadata(a) {
                ids.insert((m.dev(), m.ino()));
            }
        }
        walkdir::WalkDir::new(&root)
            .follow_links(false)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_dir())
            .any(|e| {
                e.metadata()
                    .is_ok_and(|m| ids.contains(&(m.dev(), m.ino())))
            })
    });
    if inside_by_identity || resolved.is_some_and(|d| d.starts_with(&root)) {
        return Err(Failure::usage(
            format!(
                "{what} {} is inside the inventory {}; kvcr never writes inside the inventory",
                inventory::display_path(path),
                inventory::display_path(&root)
            ),
            Some(format!(
                "choose a {what} path outside {}",
                inventory::display_path(&root)
            )),
        ));
    }
    Ok(())
}

/// Reads and parses every entry. Descriptors become candidates, with their
/// allocations and handles (what import needs); everything else becomes a
/// file-level verdict. Both lists are in walk order, however many threads
/// read ([`crate::pipeline`], `KVCR_THREADS`).
pub fn collect(root: &Path, progress: bool) -> Result<(Vec<Candidate>, Vec<FileVerdict>), Failure> {
    collect_with(root, progress, &pipeline::Options::from_env(true))
}

/// [`collect`] with explicit options; the audit keeps only the allocation
/// summary the verdict needs (`keep_allocations: false`).
pub fn collect_with(
    root: &Path,
    progress: bool,
    opts: &pipeline::Options,
) -> Result<(Vec<Candidate>, Vec<FileVerdict>), Failure> {
    // Drawn only once the read has taken 200 ms: a spinner that flashes
    // for a four-file inventory is noise.
    let bar = progress.then(|| {
        let b =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        b.set_style(indicatif::ProgressStyle::default_spinner());
        b.set_message("reading descriptors");
        b
    });
    let started = std::time::Instant::now();
    let mut shown = false;
    let mut tick = || {
        if let Some(b) = &bar {
            if !shown && started.elapsed() >= std::time::Duration::from_millis(200) {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                shown = true;
            }
            b.inc(1);
        }
    };
    let collected =
        pipeline::collect(root, opts, &mut tick).map_err(|e| Failure::usage(e.to_string(), None));
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    collected
}

/// Audits an inventory. `probe` is `Some` in live mode.
/// Audits an inventory. `probe` is `Some` in live mode; `strict` makes a
/// live fact that could not be read reject its rank.
pub fn audit(
    args: &InventoryArgs,
    probe: Option<&dyn NodeProbe>,
    progress: bool,
    strict: bool,
) -> Result<AuditRun, Failure> {
    audit_keeping(args, probe, progress, false, strict).map(|(run, _)| run)
}

/// [`audit`] that also returns the parsed descriptors it judged, by raw path bytes.
/// With `keep_allocations` they carry every allocation and handle (import
/// plans from these very bytes, never from a second read); without, the
/// list is empty and only the verdict's summary was kept.
pub fn audit_keeping(
    args: &InventoryArgs,
    probe: Option<&dyn NodeProbe>,
    progress: bool,
    keep_allocations: bool,
    strict: bool,
) -> Result<(AuditRun, BTreeMap<Vec<u8>, Descriptor>), Failure> {
    let mut expect = expectations(args)?;
    expect.strict = strict && probe.is_some();
    let root = root_of(args)?;
    let (cands, files) = collect_with(
        &root,
        progress,
        &pipeline::Options::from_env(keep_allocations),
    )?;
    check_names(args, &cands)?;
    // Keyed by raw path bytes: two paths that print alike stay two entries.
    let kept: BTreeMap<Vec<u8>, Descriptor> = if keep_allocations {
        cands
            .iter()
            .filter_map(|c| c.descriptor.clone().map(|d| (c.raw_path.clone(), d)))
            .collect()
    } else {
        BTreeMap::new()
    };
    let now_ms = now_unix_ms();
    let facts = probe.map(|p| {
        let pids = cands
            .iter()
            .filter_map(|c| c.descriptor.as_ref())
            .flat_map(|d| [d.owner.pid, d.writer.pid]);
        node::gather(p, pids)
    });
    let ctx = Context {
        now_unix_ms: now_ms,
        node: facts.as_ref(),
        expect: &expect,
    };
    let mut judgement = verdict::judge(cands, files, &ctx);
    report::headline::fill(
        &mut judgement,
        &report::headline::Invocation {
            root: Some(root.display().to_string()),
            live: probe.is_some(),
            flags: repeat_flags(args),
            merged: None,
        },
    );
    let mut meta = report::json::Meta::new(probe.is_some(), now_ms);
    // In live mode the hostname the descriptors were checked against (so a
    // fleet of facts files matches itself), else uname's.
    meta.host = Some(
        facts
            .as_ref()
            .and_then(|f| f.hostname.known().cloned())
            .unwrap_or_else(hostname),
    );
    meta.strict = expect.strict;
    meta.boot_id = facts.as_ref().and_then(|f| f.boot_id.known().copied());
    meta.node_facts_source = probe.map(|_| node::facts_source());
    meta.options = report::json::Options {
        engine: args.engine.clone(),
        profile: args.profile.as_ref().map(|p| p.display().to_string()),
        min_epoch: expect
            .min_epoch
            .or(expect.profile.as_ref().and_then(|p| p.min_epoch)),
        max_age_s: expect
            .max_age_s
            .or(expect.profile.as_ref().and_then(|p| p.max_age_s)),
        local_ranks: expect
            .local_ranks
            .as_ref()
            .map(|l| l.to_string())
            .or(expect.profile.as_ref().and_then(|p| p.local_ranks.clone())),
        incarnation: expect
            .incarnation
            .or(expect.profile.as_ref().and_then(|p| p.incarnation)),
    };
    meta.exit_status = judgement.exit_status();
    let run = AuditRun {
        root: root.display().to_string(),
        meta,
        merge: None,
        live: probe.is_some(),
        strict: expect.strict,
        node: facts,
        now_ms,
        judgement,
    };
    Ok((run, kept))
}

/// The flags a suggested command repeats after `ROOT --engine ID`.
fn repeat_flags(args: &InventoryArgs) -> Vec<String> {
    let mut f = Vec::new();
    if let Some(p) = &args.profile {
        f.extend(["--profile".to_string(), p.display().to_string()]);
    }
    if let Some(n) = args.min_epoch {
        f.extend(["--min-epoch".to_string(), n.to_string()]);
    }
    if let Some(s) = args.max_age {
        f.extend(["--max-age".to_string(), s.to_string()]);
    }
    if let Some(l) = &args.local_ranks {
        f.extend(["--local-ranks".to_string(), l.to_string()]);
    }
    if let Some(i) = args.incarnation {
        f.extend(["--incarnation".to_string(), i.to_string()]);
    }
    f
}

/// `--engine` and `--incarnation` must name something the inventory has:
/// a typo is a usage error listing what is there, not a missing group.
fn check_names(args: &InventoryArgs, cands: &[Candidate]) -> Result<(), Failure> {
    let engines: std::collections::BTreeSet<&str> = cands
        .iter()
        .filter_map(|c| {
            c.descriptor
                .as_ref()
                .map(|d| d.engine_id.as_str())
                .or(c.ident.engine_id.as_deref())
        })
        .collect();
    let list = |names: Vec<String>| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    if let Some(e) = &args.engine {
        // A profile's group must exist: its absence is a rejection (KV103).
        if args.profile.is_none() && !engines.contains(e.as_str()) {
            return Err(Failure::usage(
                format!("--engine {e}: no descriptor of that group in the inventory"),
                Some(format!(
                    "groups present: {}",
                    list(engines.iter().map(|s| s.to_string()).collect())
                )),
            ));
        }
    }
    if let Some(i) = args.incarnation {
        let incs: std::collections::BTreeSet<uuid::Uuid> = cands
            .iter()
            .filter(|c| {
                args.engine.is_none()
                    || c.descriptor.as_ref().map(|d| d.engine_id.as_str()) == args.engine.as_deref()
            })
            .filter_map(|c| c.descriptor.as_ref().map(|d| d.incarnation))
            .collect();
        if !incs.contains(&i) {
            return Err(Failure::usage(
                format!("--incarnation {i}: no descriptor has that incarnation"),
                Some(format!(
                    "incarnations present: {}",
                    list(incs.iter().map(|u| u.to_string()).collect())
                )),
            ));
        }
    }
    Ok(())
}

/// Prints an audit run in the chosen format.
pub fn print_audit(out: &mut dyn Write, p: &Printer, run: &AuditRun) -> io::Result<()> {
    if p.verbosity == Verbosity::Quiet {
        return Ok(());
    }
    match p.format {
        report::Format::Json => {
            let mut doc = report::json::AuditReport::new(&run.root, &run.meta, &run.judgement);
            doc.merge = run.merge.as_ref();
            report::json::write(out, &doc)
        }
        report::Format::Table => report::table::write(
            out,
            p,
            &report::table::Header {
                root: &run.root,
                live: run.live,
                strict: run.strict,
                not_checked: run.not_checked(),
                merged: run.merge.is_some(),
            },
            &run.judgement,
            run.now_ms,
        ),
        report::Format::Prometheus => out.write_all(prometheus_text(run, None).as_bytes()),
    }
}

fn cmd_audit(a: &AuditArgs) -> Result<i32, Failure> {
    let p = Printer::from_env(
        a.output.format,
        a.output.color,
        a.output.quiet,
        a.output.verbose,
    );
    let probe = a
        .live
        .then(node::real_probe)
        .transpose()
        .map_err(|e| Failure::usage(e, None))?;
    let textfile = a
        .textfile
        .as_deref()
        .map(|t| textfile_target(t, &a.inventory))
        .transpose()?;
    let started = std::time::Instant::now();
    let run = audit(&a.inventory, probe.as_deref(), p.progress, a.strict)?;
    let took = started.elapsed();
    let status = run.judgement.exit_status();
    if let Some((dir, name)) = &textfile {
        let text = prometheus_text(&run, Some(took));
        crate::writer::write_atomic(dir, name, text.as_bytes(), 0o644, None).map_err(|e| {
            Failure {
                status: exit::USAGE,
                message: format!(
                    "{:#}",
                    anyhow::Error::new(e).context("cannot write the --textfile metrics")
                ),
                hint: None,
            }
        })?;
    }
    if p.format == report::Format::Prometheus {
        if p.verbosity != Verbosity::Quiet {
            emit(|out| out.write_all(prometheus_text(&run, Some(took)).as_bytes()))?;
        }
    } else {
        emit(|out| print_audit(out, &p, &run))?;
    }
    Ok(status)
}

/// The Prometheus exposition of an audit run (docs/format.md §9.5).
fn prometheus_text(run: &AuditRun, took: Option<std::time::Duration>) -> String {
    report::prometheus::render(
        &run.judgement,
        &report::prometheus::Meta {
            now_unix_ms: run.now_ms,
            live: run.live,
            duration: took,
            exit_status: run.judgement.exit_status(),
        },
    )
}

/// `--textfile PATH`: its directory and file name, refusing a PATH inside
/// the inventory (kvcr never writes there) or one without a file name.
fn textfile_target(
    path: &Path,
    inv: &InventoryArgs,
) -> Result<(PathBuf, std::ffi::OsString), Failure> {
    let bad = |why: String| {
        Failure::usage(
            format!("--textfile {}: {why}", path.display()),
            Some("name a file in node-exporter's textfile directory, such as /var/lib/prometheus/node-exporter/kvcr.prom".to_string()),
        )
    };
    let name = path
        .file_name()
        .ok_or_else(|| bad("names no file".to_string()))?
        .to_os_string();
    // The write renames over PATH: only ever over a regular file, never over
    // a symlink (such as /dev/stdout) or a device.
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(bad(
                "exists and is not a regular file (a symlink, a directory or a device); kvcr replaces only a regular file"
                    .to_string(),
            ));
        }
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| bad(format!("its directory cannot be used: {e}")))?;
    // The same check as --ready-file: by resolved path and by the (device,
    // inode) of the directory and its ancestors (a bind-mount alias too).
    refuse_inside_inventory(inv, path, "--textfile")?;
    Ok((dir, name))
}

fn cmd_merge(a: &crate::cli::MergeArgs) -> Result<i32, Failure> {
    let p = Printer::from_env(
        a.output.format,
        a.output.color,
        a.output.quiet,
        a.output.verbose,
    );
    let mut reports = Vec::new();
    for path in &a.reports {
        let name = path.display().to_string();
        // A merge input is an audit report: bounded like a fleet report.
        let bytes = crate::input::read_regular(path, 64 << 20)
            .map_err(|e| Failure::usage(format!("cannot read {name}: {e}"), None))?;
        let r = crate::merge::read_report(&name, &bytes).map_err(|e| {
            Failure::usage(
                e,
                Some("merge takes reports written by `kvcr audit --format json`".to_string()),
            )
        })?;
        reports.push((name, r));
    }
    let live = reports.iter().all(|(_, r)| r.live);
    let names: Vec<String> = reports.iter().map(|(n, _)| n.clone()).collect();
    let mut judgement = crate::merge::merge(&reports);
    // Ages against the merge's clock (the core is pure; it has none).
    let now_ms = now_unix_ms();
    for r in judgement.groups.iter_mut().flat_map(|g| g.ranks.iter_mut()) {
        r.age_ms = r.created_unix_ms.and_then(|c| now_ms.checked_sub(c));
    }
    report::headline::fill(
        &mut judgement,
        &report::headline::Invocation {
            root: None,
            live,
            flags: Vec::new(),
            merged: Some(
                reports
                    .iter()
                    .map(|(n, r)| report::headline::MergeInput {
                        report: n.clone(),
                        host: r.host.clone(),
                        root: r.root.clone(),
                    })
                    .collect(),
            ),
        },
    );
    let oldest = reports
        .iter()
        .map(|(_, r)| r.generated_unix_ms.map(|g| now_ms.saturating_sub(g)))
        .collect::<Option<Vec<u64>>>()
        .and_then(|ages| ages.into_iter().max());
    let mut meta = report::json::Meta::new(live, now_ms);
    meta.exit_status = judgement.exit_status();
    let run = AuditRun {
        meta,
        merge: Some(report::json::MergeMeta {
            reports: names.clone(),
            all_inputs_live: live,
            oldest_input_age_ms: oldest,
            inputs: reports
                .iter()
                .map(|(n, r)| report::json::MergeInput {
                    report: n.clone(),
                    host: r.host.clone(),
                    boot_id: r.boot_id,
                    live: r.live,
                    generated_unix_ms: r.generated_unix_ms,
                })
                .collect(),
        }),
        root: format!(
            "merged from {} report{}",
            names.len(),
            if names.len() == 1 { "" } else { "s" }
        ),
        live,
        strict: false,
        node: None,
        now_ms,
        judgement,
    };
    let status = run.judgement.exit_status();
    emit(|out| print_audit(out, &p, &run))?;
    Ok(status)
}

fn cmd_explain(a: &ExplainArgs) -> Result<i32, Failure> {
    let text = match &a.code {
        None => explain::render_list(),
        Some(c) => match Code::parse(c) {
            Some(code) => explain::render(code),
            None => {
                return Err(Failure::usage(
                    format!("unknown finding code {:?}", report::sanitize::terminal(c)),
                    Some("run `kvcr explain` to list every code".to_string()),
                ))
            }
        },
    };
    emit(|out| out.write_all(text.as_bytes()))?;
    Ok(exit::OK)
}

/// `kvcr completions SHELL`: the script clap_complete generates from the CLI.
fn cmd_completions(a: &crate::cli::CompletionsArgs) -> Result<i32, Failure> {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "kvcr", &mut script);
    emit(|out| out.write_all(&script))?;
    Ok(exit::OK)
}

/// `kvcr schema WHICH`: the committed JSON Schema, byte for byte.
fn cmd_schema(a: &crate::cli::SchemaArgs) -> Result<i32, Failure> {
    emit(|out| out.write_all(a.which.text().as_bytes()))?;
    Ok(exit::OK)
}

/// `kvcr seal FILE…`: check every file, then write them (docs/format.md §3.5, §6.1).
fn cmd_seal(a: &crate::cli::SealArgs) -> Result<i32, Failure> {
    use crate::writer;
    let mut plans = Vec::new();
    let mut worst = exit::OK;
    // One file named twice (or under two names) is sealed once.
    let mut seen = std::collections::HashSet::new();
    for path in &a.files {
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::MetadataExt;
            if !seen.insert((m.dev(), m.ino())) {
                continue;
            }
        }
        match writer::check_file(path) {
            Ok(p) => plans.push(p),
            Err(e) => {
                worst = worst.max(e.exit_status());
                let msg =
                    anyhow::Error::new(e).context(format!("refusing to seal {}", path.display()));
                let _ = writeln!(
                    io::stderr(),
                    "kvcr: error: {}",
                    report::sanitize::terminal(&format!("{msg:#}"))
                );
            }
        }
    }
    if worst != exit::OK {
        let _ = writeln!(io::stderr(), "kvcr: no file was written");
        return Ok(worst);
    }
    let mut lines = String::new();
    for p in &plans {
        let wrote = match writer::apply(p) {
            Ok(w) => w,
            Err(e) => {
                // Say what was already written before this failure.
                if !a.quiet && !lines.is_empty() {
                    emit(|out| out.write_all(lines.as_bytes()))?;
                }
                let done = lines.lines().count();
                return Err(Failure {
                    status: e.exit_status(),
                    message: format!(
                        "{:#}; {}",
                        anyhow::Error::new(e).context(format!("sealing {}", p.path.display())),
                        if done == 0 {
                            "no file was written".to_string()
                        } else {
                            format!("{done} file(s) listed above were already sealed")
                        }
                    ),
                    hint: None,
                });
            }
        };
        let verb = if wrote { "sealed" } else { "already sealed" };
        lines.push_str(&format!(
            "{verb} {}\n",
            report::sanitize::terminal(&p.path.display().to_string())
        ));
    }
    if !a.quiet {
        emit(|out| out.write_all(lines.as_bytes()))?;
    }
    Ok(exit::OK)
}

/// `kvcr digest FILE`: the canonical digest, one line.
fn cmd_digest(a: &crate::cli::DigestArgs) -> Result<i32, Failure> {
    match crate::writer::digest_file(&a.file) {
        Ok(d) => {
            emit(|out| writeln!(out, "{d}"))?;
            Ok(exit::OK)
        }
        Err(e) => Err(Failure {
            status: e.exit_status(),
            message: e.to_string(),
            hint: None,
        }),
    }
}

/// Writes to stdout; a closed pipe (`kvcr audit | head -1`) ends quietly.
pub fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    let stdout = io::stdout();
    let mut lock = io::BufWriter::new(stdout.lock());
    let r = f(&mut lock).and_then(|_| lock.flush());
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure {
            status: exit::USAGE,
            message: format!("cannot write the report: {e}"),
            hint: None,
        }),
    }
}

/// Runs a parsed command line and returns the exit status.
pub fn run(cli: Cli) -> i32 {
    let r = match &cli.command {
        Command::Audit(a) => cmd_audit(a),
        Command::Import(a) => crate::import::cli::run(a),
        Command::Explain(a) => cmd_explain(a),
        Command::Merge(a) => cmd_merge(a),
        Command::Examine(a) => crate::examine::run(a),
        Command::Completions(a) => cmd_completions(a),
        Command::Schema(a) => cmd_schema(a),
        Command::Seal(a) => cmd_seal(a),
        Command::Digest(a) => cmd_digest(a),
    };
    match r {
        Ok(status) => status,
        Err(f) => {
            let mut err = io::stderr().lock();
            let _ = writeln!(
                err,
                "kvcr: error: {}",
                report::sanitize::terminal(&f.message)
            );
            if let Some(h) = f.hint {
                let _ = writeln!(err, "  hint: {h}");
            }
            f.status
        }
    }
}
