//! The audit service (`kvcr audit`, `kvcr merge`): reads the inventory,
//! asks the node probe (live), calls the verdict core, and hands the result
//! to a printer. `kvcr import` runs the same audit ([`audit`]) and keeps
//! the descriptors it judged.

use crate::descriptor::Descriptor;
use crate::error::Failure;
use crate::exit;
use crate::node::{self, now_unix_ms, NodeProbe};
use crate::pipeline;
use crate::report::{self, emit, Printer, Verbosity};
use crate::settings::{self, Inventory};
use crate::verdict::{self, Candidate, Context, FileVerdict, Judgement};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

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

/// An audit and the parsed descriptors it judged, by raw path bytes.
pub struct Audited {
    pub run: AuditRun,
    pub descriptors: BTreeMap<Vec<u8>, Descriptor>,
}

/// Refuses an output path (a ready file, a metrics file) inside the
/// inventory: kvcr never writes there, and its own staging file would be
/// read back as a torn write. `what` names the flag. The path's directory is
/// resolved (symlinks followed) and compared with the resolved root
/// component by component, on raw bytes.
pub fn refuse_inside_inventory(inv: &Inventory, path: &Path, what: &str) -> Result<(), Failure> {
    refuse_inside_root(&inv.root()?, path, what)
}

/// [`refuse_inside_inventory`] for an inventory root already resolved.
fn refuse_inside_root(root: &Path, path: &Path, what: &str) -> Result<(), Failure> {
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
        walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_dir())
            .any(|e| {
                e.metadata()
                    .is_ok_and(|m| ids.contains(&(m.dev(), m.ino())))
            })
    });
    if inside_by_identity || resolved.is_some_and(|d| d.starts_with(root)) {
        return Err(Failure::usage(
            format!(
                "{what} {} is inside the inventory {}; kvcr never writes inside the inventory",
                crate::inventory::display_path(path),
                crate::inventory::display_path(root)
            ),
            Some(format!(
                "choose a {what} path outside {}",
                crate::inventory::display_path(root)
            )),
        ));
    }
    Ok(())
}

/// Reads and parses every entry. Descriptors become candidates, with their
/// allocations and handles when `opts` keeps them (what import needs);
/// everything else becomes a file-level verdict. Both lists are in walk
/// order, however many threads read (`crate::pipeline`).
pub fn collect(
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
    let collected = pipeline::collect(root, opts, &mut tick).map_err(|e| {
        let hint = crate::error::is_denied(&e).then(|| crate::error::access_hint(root));
        let kind = if hint.is_some() {
            crate::error::Kind::PermissionDenied
        } else {
            crate::error::Kind::CannotRun
        };
        Failure::usage(e.to_string(), hint).of_kind(kind)
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (cands, files) = collected?;
    refuse_denied(root, &cands, &files)?;
    Ok((cands, files))
}

/// Permission denied anywhere in the walk (a directory that cannot be
/// listed or opened, a descriptor that cannot be opened or read) means this
/// user cannot audit the inventory: exit 2 naming the first such entry by
/// path and counting the others, never a verdict (docs/format.md §6).
fn refuse_denied(root: &Path, cands: &[Candidate], files: &[FileVerdict]) -> Result<(), Failure> {
    let denied = cands
        .iter()
        .flat_map(|c| &c.findings)
        .chain(files.iter().flat_map(|f| &f.findings))
        .filter(|f| f.subject == crate::finding::Subject::Access)
        .min_by(|a, b| a.path.cmp(&b.path));
    let Some(f) = denied else {
        return Ok(());
    };
    // Entries, not findings: one entry can be refused twice (listed by its
    // parent, then looked up beneath the root), and is counted once.
    let count = cands
        .iter()
        .flat_map(|c| &c.findings)
        .chain(files.iter().flat_map(|f| &f.findings))
        .filter(|f| f.subject == crate::finding::Subject::Access)
        .map(|f| f.path.as_deref())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Err(Failure::usage(
        format!(
            "cannot audit {}: {}: {}{}; this user cannot read the whole inventory, so there is no \
             verdict",
            root.display(),
            f.path.as_deref().unwrap_or("."),
            crate::report::render(&f.message),
            if count > 1 {
                format!(" (and {} more entries refused)", count - 1)
            } else {
                String::new()
            }
        ),
        Some(crate::error::access_hint(root)),
    )
    .of_kind(crate::error::Kind::PermissionDenied))
}

/// Audits an inventory. `probe` is `Some` in live mode; `strict` makes a
/// live fact that could not be read reject its rank. With
/// `keep_allocations` the descriptors judged come back with every
/// allocation and handle (import plans from these very bytes, never from a
/// second read); without, that map is empty and only the verdict's summary
/// was kept.
pub fn audit(
    inv: &Inventory,
    probe: Option<&dyn NodeProbe>,
    progress: bool,
    keep_allocations: bool,
    strict: bool,
) -> Result<Audited, Failure> {
    let mut expect = inv.expect.clone();
    expect.strict = strict && probe.is_some();
    let root = inv.root()?;
    let opts = pipeline::Options {
        threads: inv.threads,
        keep_allocations,
        producer_uid: inv.producer_uid,
    };
    let (cands, files) = collect(&root, progress, &opts)?;
    check_names(inv, &cands)?;
    // Keyed by raw path bytes: two paths that print alike stay two entries.
    let descriptors: BTreeMap<Vec<u8>, Descriptor> = if keep_allocations {
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
            flags: repeat_flags(inv),
            merged: None,
        },
    );
    let mut meta = report::json::Meta::new(probe.is_some(), now_ms, judgement.exit_status());
    // In live mode the hostname the descriptors were checked against (so a
    // fleet of facts files matches itself), else uname's.
    meta.host = Some(
        facts
            .as_ref()
            .and_then(|f| f.hostname.known().cloned())
            .unwrap_or_else(node::hostname),
    );
    meta.strict = expect.strict;
    meta.boot_id = facts.as_ref().and_then(|f| f.boot_id.known().copied());
    meta.node_facts_source = probe.map(|_| node::facts_source(inv.node_facts.as_deref()));
    let profile = expect.profile.as_ref();
    meta.options = report::json::Options {
        engine: expect.engine.clone(),
        profile: inv.profile_path.as_ref().map(|p| p.display().to_string()),
        profile_source: inv.profile_path.as_ref().map(|_| {
            if inv.profile_from_env {
                "env"
            } else {
                "flag"
            }
        }),
        min_epoch: expect.min_epoch(profile),
        max_age_s: expect.max_age_s(profile),
        local_ranks: expect.local_ranks(profile),
        incarnation: expect.incarnation(profile),
    };
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
    Ok(Audited { run, descriptors })
}

/// The flags a suggested command repeats after `ROOT --engine ID`.
fn repeat_flags(inv: &Inventory) -> Vec<String> {
    let e = &inv.expect;
    let mut f = Vec::new();
    if let Some(p) = &inv.profile_path {
        f.extend(["--profile".to_string(), p.display().to_string()]);
    }
    if let Some(n) = e.min_epoch {
        f.extend(["--min-epoch".to_string(), n.to_string()]);
    }
    if let Some(s) = e.max_age_s {
        f.extend(["--max-age".to_string(), s.to_string()]);
    }
    if let Some(l) = &e.local_ranks {
        f.extend(["--local-ranks".to_string(), l.to_string()]);
    }
    if let Some(i) = e.incarnation {
        f.extend(["--incarnation".to_string(), i.to_string()]);
    }
    f
}

/// `--engine` and `--incarnation` must name something the inventory has:
/// a typo is a usage error listing what is there, not a missing group.
fn check_names(inv: &Inventory, cands: &[Candidate]) -> Result<(), Failure> {
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
    let engine = inv.expect.engine.as_deref();
    if let Some(e) = engine {
        // A profile's group must exist: its absence is a rejection (KV103).
        if inv.profile_path.is_none() && !engines.contains(e) {
            return Err(Failure::usage(
                format!("--engine {e}: no descriptor of that group in the inventory"),
                Some(format!(
                    "groups present: {}",
                    list(engines.iter().map(|s| s.to_string()).collect())
                )),
            ));
        }
    }
    if let Some(i) = inv.expect.incarnation {
        let incs: std::collections::BTreeSet<uuid::Uuid> = cands
            .iter()
            .filter(|c| {
                engine.is_none() || c.descriptor.as_ref().map(|d| d.engine_id.as_str()) == engine
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

/// Prints an audit run in the chosen format (`took`: how long the audit
/// took, for the Prometheus text).
pub fn print_audit(
    out: &mut dyn Write,
    p: &Printer,
    run: &AuditRun,
    took: Option<std::time::Duration>,
) -> io::Result<()> {
    if p.verbosity == Verbosity::Quiet {
        return Ok(());
    }
    match p.format {
        report::Format::Json => {
            // Written through the wire layer merge and the gate read.
            let doc =
                report::wire::printed(&run.root, &run.meta, run.merge.as_ref(), &run.judgement);
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
                profile_from_env: run
                    .meta
                    .options
                    .profile
                    .as_deref()
                    .filter(|_| run.meta.options.profile_source == Some("env")),
            },
            &run.judgement,
            run.now_ms,
        ),
        report::Format::Prometheus => out.write_all(prometheus_text(run, took).as_bytes()),
    }
}

/// `kvcr audit`, from its command line. With `--textfile`, a run that
/// cannot happen (exit 2 from the settings or the audit: no inventory, a bad
/// profile, no node probe) still replaces the file, with
/// `kvcr_audit_success 0` (docs/format.md §9.5): a textfile collector must
/// never go on exporting an earlier run's verdict. A `--textfile` that cannot
/// be used at all (inside the inventory, no such directory) is refused first
/// and nothing is written.
pub fn run_args(args: &crate::cli::AuditArgs) -> Result<i32, Failure> {
    let textfile = args
        .textfile
        .as_deref()
        .map(|t| textfile_target(t, args.inventory.root.as_deref()))
        .transpose()?;
    let judged = settings::Audit::resolve(args).and_then(|a| {
        let started = std::time::Instant::now();
        let run = judge(&a)?;
        Ok((a, run, started.elapsed()))
    });
    let (a, run, took) = match judged {
        Ok(x) => x,
        Err(f) => {
            if let Some((dir, name)) = &textfile {
                let text = report::prometheus::render_failure(&report::prometheus::Meta {
                    now_unix_ms: now_unix_ms(),
                    live: args.live,
                    duration: None,
                    exit_status: f.status,
                });
                if let Err(e) = crate::writer::write_atomic(dir, name, text.as_bytes(), 0o644, None)
                {
                    eprintln!(
                        "kvcr: warning: cannot write kvcr_audit_success 0 to the --textfile: {}",
                        crate::text::terminal(&e.to_string())
                    );
                }
            }
            return Err(f);
        }
    };
    let p = &a.printer;
    let status = run.judgement.exit_status();
    if let Some((dir, name)) = &textfile {
        // A judgement that says the audit could not run (exit 2) carries no
        // verdict a monitor may show: the same text as a failed run.
        let text = if status == exit::USAGE {
            report::prometheus::render_failure(&report::prometheus::Meta {
                now_unix_ms: run.now_ms,
                live: run.live,
                duration: Some(took),
                exit_status: status,
            })
        } else {
            prometheus_text(&run, Some(took))
        };
        crate::writer::write_atomic(dir, name, text.as_bytes(), 0o644, None).map_err(|e| {
            Failure::new(
                exit::USAGE,
                format!(
                    "{:#}",
                    anyhow::Error::new(e).context("cannot write the --textfile metrics")
                ),
            )
        })?;
    }
    emit(|out| print_audit(out, p, &run, Some(took)))?;
    Ok(status)
}

/// [`node::probe`], its notes printed on stderr (`kvcr: note: …`): the
/// one place a command (or the library API) takes the node probe.
pub(crate) fn probe_node(facts: Option<&Path>) -> Result<Box<dyn NodeProbe>, String> {
    let (probe, notes) = node::probe(facts)?;
    for n in notes {
        print_note(&n);
    }
    Ok(probe)
}

/// Prints `kvcr: note: {note}` on stderr, once per process: a note the
/// dispatcher already gave (the `KVCR_PROC_ROOT` hook, announced by every
/// command that reads files) is not repeated when the node probe returns it
/// again.
pub(crate) fn print_note(note: &str) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    if !printed.iter().any(|p| p == note) {
        eprintln!("kvcr: note: {note}");
        printed.push(note.to_string());
    }
}

/// The audit of `kvcr audit`: the node probe (live) and the judgement.
fn judge(a: &settings::Audit) -> Result<AuditRun, Failure> {
    let facts = a.inventory.node_facts.as_deref();
    let probe = a
        .live
        .then(|| probe_node(facts))
        .transpose()
        .map_err(|e| Failure::usage(e, None))?;
    Ok(audit(
        &a.inventory,
        probe.as_deref(),
        a.printer.progress,
        false,
        a.strict,
    )?
    .run)
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
/// the inventory `root` (kvcr never writes there) or one without a file
/// name. Checked before the settings, so that a run that then fails can
/// still write `kvcr_audit_success 0` there.
fn textfile_target(
    path: &Path,
    root: Option<&Path>,
) -> Result<(PathBuf, std::ffi::OsString), Failure> {
    let bad = |why: String| {
        Failure::usage(
            format!("--textfile {}: {why}", path.display()),
            Some(
                "name a file in node-exporter's textfile directory, such as \
             /var/lib/prometheus/node-exporter/kvcr.prom"
                    .to_string(),
            ),
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
                "exists and is not a regular file (a symlink, a directory or a device); kvcr \
                 replaces only a regular file"
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
    match root.map(crate::inventory::resolve_root) {
        // The same check as --ready-file: by resolved path and by the
        // (device, inode) of the directory and its ancestors (a bind-mount
        // alias too).
        Some(Ok(root)) => refuse_inside_root(&root, path, "--textfile")?,
        // A root that does not resolve (missing, not a directory, not
        // searchable) holds no directory this process can reach, and the
        // textfile's directory did resolve; the audit then fails on the root
        // and writes `kvcr_audit_success 0`. Refused all the same when its
        // directory lies lexically below that root.
        Some(Err(_)) => {
            let abs = std::path::absolute(root.unwrap_or(Path::new("."))).ok();
            if abs.is_some_and(|r| dir.starts_with(r)) {
                return Err(bad("lies inside the inventory root".to_string()));
            }
        }
        None => {}
    }
    Ok((dir, name))
}

/// The most bytes one merge input may have (docs/format.md §10).
const MAX_MERGE_INPUT: u64 = 64 << 20;

/// Merge inputs: each path as given, a directory as its `*.json` entries
/// (regular files, not entered recursively) in byte order of their names.
fn merge_inputs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for path in paths {
        let shown = crate::text::terminal(&path.display().to_string()).into_owned();
        let Ok(meta) = std::fs::metadata(path) else {
            out.push(path.clone());
            continue;
        };
        if !meta.is_dir() {
            out.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path)
            .map_err(|e| Failure::usage(format!("cannot read directory {shown}: {e}"), None))?;
        let mut found: Vec<PathBuf> = Vec::new();
        for e in entries {
            let e =
                e.map_err(|e| Failure::usage(format!("cannot read directory {shown}: {e}"), None))?;
            let name = e.file_name();
            let is_json = name.as_encoded_bytes().ends_with(b".json")
                && !name.as_encoded_bytes().starts_with(b".");
            if is_json && e.file_type().is_ok_and(|t| t.is_file()) {
                found.push(e.path());
            }
        }
        if found.is_empty() {
            return Err(Failure::usage(
                format!("directory {shown} holds no report (no regular *.json file)"),
                Some("merge takes reports written by `kvcr audit --format json`".to_string()),
            ));
        }
        found.sort_by(|a, b| {
            a.as_os_str()
                .as_encoded_bytes()
                .cmp(b.as_os_str().as_encoded_bytes())
        });
        out.extend(found);
    }
    Ok(out)
}

/// `kvcr merge REPORT.json…|DIR`: per-node reports judged as one fleet.
pub fn run_merge(paths: &[PathBuf], p: &Printer) -> Result<i32, Failure> {
    let mut reports = Vec::new();
    for path in merge_inputs(paths)? {
        let name = path.display().to_string();
        let shown = crate::text::terminal(&name).into_owned();
        // A merge input is an audit report: bounded like a fleet report,
        // and read straight into the typed wire layer (no JSON value tree).
        let file = crate::input::open_regular(&path, MAX_MERGE_INPUT)
            .map_err(|e| Failure::usage(format!("cannot read {shown}: {e}"), None))?;
        let r = crate::merge::read_report(&name, file).map_err(|e| {
            Failure::usage(
                e,
                Some("merge takes reports written by `kvcr audit --format json`".to_string()),
            )
        })?;
        reports.push((name, r));
    }
    let live = reports.iter().all(|(_, r)| crate::merge::proves_live(r));
    let names: Vec<String> = reports.iter().map(|(n, _)| n.clone()).collect();
    // Dated no earlier than its newest input (within the clock slack).
    let now_ms = crate::merge::merged_at(&reports, now_unix_ms());
    let oldest = crate::merge::oldest_input_age_ms(&reports, now_ms);
    // What the printers need of each input; the reports themselves are
    // consumed by the merge.
    let inputs: Vec<report::json::MergeInput> = reports
        .iter()
        .map(|(n, r)| report::json::MergeInput {
            report: n.clone(),
            host: r.host.clone(),
            boot_id: report::wire::uuid(r.boot_id.as_deref()),
            live: r.live,
            generated_unix_ms: Some(r.generated_unix_ms),
        })
        .collect();
    let roots: Vec<String> = reports.iter().map(|(_, r)| r.root.clone()).collect();
    let mut judgement = crate::merge::merge(reports, now_ms);
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
                inputs
                    .iter()
                    .zip(roots)
                    .map(|(i, root)| report::headline::MergeInput {
                        report: i.report.clone(),
                        host: i.host.clone(),
                        root: Some(root),
                        live: i.live && i.boot_id.is_some(),
                    })
                    .collect(),
            ),
        },
    );
    let meta = report::json::Meta::new(live, now_ms, judgement.exit_status());
    let run = AuditRun {
        meta,
        merge: Some(report::json::MergeMeta {
            reports: names.clone(),
            all_inputs_live: live,
            oldest_input_age_ms: oldest,
            inputs,
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
    emit(|out| print_audit(out, p, &run, None))?;
    Ok(status)
}
