//! Man pages: `man/kvcr.1` and one page per subcommand, generated from the
//! clap definitions (clap_mangen) with hand-written EXIT STATUS, FILES,
//! ENVIRONMENT, EXAMPLES and SEE ALSO sections; and the shell completions.
//!
//! Both are committed; `cargo xtask man` regenerates them, and
//! `tests/it/cli/man.rs` fails when they drift from what the CLI generates (it
//! calls [`page_drift`] and [`completion_drift`]). The renderer lives in the
//! xtask, not in the library, so clap_mangen is never a dependency of the
//! shipped binary: it never renders roff.

use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use clap_mangen::Man;
use kvcr_audit::exit;
use std::io;
use std::path::{Path, PathBuf};

/// One rendered page: its file name (`kvcr-audit.1`) and its roff text.
pub struct Page {
    pub file_name: String,
    pub text: String,
}

/// Every page, the top-level one first, then the visible subcommands in
/// declaration order.
pub fn pages() -> Vec<Page> {
    let mut cmd = kvcr_audit::command().disable_help_subcommand(true);
    cmd.build();
    let mut out = vec![render(&cmd, None, &cmd)];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        out.push(render(sub, Some(sub.get_name()), &cmd));
    }
    out
}

/// Writes every page into `dir` (created if needed) and removes pages of
/// subcommands that no longer exist. Returns the paths written.
pub fn write_all(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let pages = pages();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = name == "kvcr.1" || (name.starts_with("kvcr-") && name.ends_with(".1"));
        if ours && !pages.iter().any(|p| p.file_name == name) {
            std::fs::remove_file(e.path())?;
        }
    }
    let mut written = Vec::new();
    for p in pages {
        let path = dir.join(&p.file_name);
        std::fs::write(&path, p.text)?;
        written.push(path);
    }
    Ok(written)
}

/// What differs between `dir` and [`pages`]: a page whose text differs or
/// that is missing, and a `*.1` file no command has. One line each, naming
/// the file; empty when `dir` is up to date.
pub fn page_drift(dir: &Path) -> Vec<String> {
    let pages = pages();
    let mut out = Vec::new();
    for p in &pages {
        let path = dir.join(&p.file_name);
        match std::fs::read(&path) {
            Ok(committed) if committed == p.text.as_bytes() => {}
            Ok(_) => out.push(format!("{} drifted from the CLI", path.display())),
            Err(e) => out.push(format!("{}: {e}", path.display())),
        }
    }
    // A page for a subcommand that no longer exists is drift too.
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            let mut extra: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".1") && !pages.iter().any(|p| p.file_name == *n))
                .collect();
            extra.sort();
            for name in extra {
                out.push(format!("{} has no command", dir.join(name).display()));
            }
        }
        Err(e) => out.push(format!("{}: {e}", dir.display())),
    }
    out
}

/// What differs between `dir` and [`completions`]: a script whose bytes
/// differ or that is missing. One line each, naming the file.
pub fn completion_drift(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (name, script) in completions() {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(committed) if committed == script => {}
            Ok(_) => out.push(format!("{} drifted from the CLI", path.display())),
            Err(e) => out.push(format!("{}: {e}", path.display())),
        }
    }
    out
}

/// The shell completion scripts the packages ship, with the file name each
/// shell's system directory expects: bash `kvcr`
/// (/usr/share/bash-completion/completions), zsh `_kvcr`
/// (/usr/share/zsh/vendor-completions), fish `kvcr.fish`
/// (/usr/share/fish/vendor_completions.d). Committed under `completions/`;
/// `tests/it/cli/man.rs` fails when they drift.
pub fn completions() -> Vec<(&'static str, Vec<u8>)> {
    use clap_complete::Shell;
    [
        (Shell::Bash, "kvcr.bash"),
        (Shell::Zsh, "_kvcr"),
        (Shell::Fish, "kvcr.fish"),
    ]
    .into_iter()
    .map(|(shell, name)| {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut kvcr_audit::command(), "kvcr", &mut script);
        (name, script)
    })
    .collect()
}

/// Writes [`completions`] into `dir` (created if needed).
pub fn write_completions(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (name, script) in completions() {
        let path = dir.join(name);
        std::fs::write(&path, script)?;
        written.push(path);
    }
    Ok(written)
}

fn render(cmd: &clap::Command, sub: Option<&str>, top: &clap::Command) -> Page {
    let version = top.get_version().unwrap_or_default();
    // The man page names the version only: the long form's commit and date
    // would make the committed pages drift on every commit.
    let man = Man::new(cmd.clone().long_version(None))
        .source(format!("kvcr {version}"))
        .manual("kvcr manual");
    let mut buf: Vec<u8> = Vec::new();
    // Writing into a Vec cannot fail.
    let w = &mut buf;
    man.render_title(w).unwrap();
    man.render_name_section(w).unwrap();
    synopsis(cmd, sub).to_writer(w).unwrap();
    man.render_description_section(w).unwrap();
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w).unwrap();
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(w).unwrap();
    }
    let mut r = Roff::new();
    exit_status(&mut r, sub);
    files(&mut r, sub);
    environment(&mut r, sub);
    examples(&mut r, sub);
    see_also(&mut r, sub, top);
    r.to_writer(w).unwrap();
    if cmd.get_version().is_some() {
        man.render_version_section(w).unwrap();
    }
    Page {
        file_name: man.get_filename(),
        text: String::from_utf8(buf).expect("roff is UTF-8"),
    }
}

/// SYNOPSIS with each option's value name (`[--profile FILE]`), which
/// clap_mangen's own synopsis leaves out.
fn synopsis(cmd: &clap::Command, sub: Option<&str>) -> Roff {
    let mut line: Vec<Inline> = vec![bold(match sub {
        Some(s) => format!("kvcr {s}"),
        None => "kvcr".to_string(),
    })];
    let mut positionals = Vec::new();
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let values: Vec<String> = a
            .get_value_names()
            .map(|v| v.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        if a.is_positional() {
            let name = values
                .first()
                .cloned()
                .unwrap_or_else(|| a.get_id().to_string());
            let many = matches!(a.get_action(), clap::ArgAction::Append);
            let dots = if many { "..." } else { "" };
            positionals.push(if a.is_required_set() {
                vec![italic(format!("{name}{dots}"))]
            } else {
                vec![roman("["), italic(format!("{name}{dots}")), roman("]")]
            });
            continue;
        }
        let mut names = Vec::new();
        if let Some(c) = a.get_short() {
            names.push(format!("-{c}"));
        }
        if let Some(l) = a.get_long() {
            names.push(format!("--{l}"));
        }
        line.push(roman(" ["));
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                line.push(roman("|"));
            }
            line.push(bold(n.clone()));
        }
        let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
        if takes_value {
            let v = values.first().cloned().unwrap_or_else(|| "VALUE".into());
            line.push(roman(" "));
            line.push(italic(v));
        }
        line.push(roman("]"));
    }
    for p in positionals {
        line.push(roman(" "));
        line.extend(p);
    }
    if cmd.has_subcommands() {
        line.push(roman(" "));
        line.push(italic("COMMAND"));
    }
    let mut r = Roff::new();
    r.control("SH", ["SYNOPSIS"]);
    r.text(line);
    r
}

/// A tagged paragraph: `.TP` with a bold tag, then the body.
fn item(r: &mut Roff, tag: impl Into<Inline>, body: &str) {
    r.control("TP", []);
    r.text([tag.into()]);
    r.text([roman(body)]);
}

fn exit_status(r: &mut Roff, sub: Option<&str>) {
    let ok = match sub {
        Some("audit") | Some("merge") => {
            "Every group in scope was accepted, or the inventory is empty (nothing retained)."
        }
        Some("examine") => "The descriptor passes every check it can pass on its own.",
        Some("import") => {
            "The import was done: a trial imported every rank and released it, or --hold held \
             the group until SIGINT or SIGTERM and released it; --dry-run printed the plan \
             and nothing would refuse the real import before its first GPU call."
        }
        Some("explain") | Some("completions") | Some("schema") => "The text was printed.",
        Some("seal") => {
            "Every file was sealed, or already carried its digest (with --reseal-edited: or was \
             resealed, and the output says what was overridden)."
        }
        Some("profile") => {
            "The group was accepted by the live, strict audit and its profile printed."
        }
        Some("digest") => "The digest was printed.",
        Some("gms") => {
            "Every GMS artifact is ok (notices allowed), or none was found where kvcr looked."
        }
        Some("pools") => {
            "No pool file, pool directory or G3 file is rejected (notices allowed), or the \
             directory holds no pool file (what a clean stop leaves)."
        }
        Some("offload") => {
            "No offload set was rejected (notices allowed), or none was found where kvcr looked."
        }
        _ => {
            "Every group in scope was accepted (audit, merge); the import was done (import); \
             the text was printed (explain, completions, schema)."
        }
    };
    let usage = match sub {
        Some("explain") => "Usage error: an unknown finding code or option.",
        Some("completions") | Some("schema") => "Usage error: an unknown argument or option.",
        Some("merge") => {
            "Usage error, or the run could not happen: a report cannot be read or is not a \
             kvcr audit report."
        }
        Some("seal") | Some("digest") => {
            "Usage error, or the run could not happen: a file does not exist or cannot be \
             read, or writing failed (a read-only directory, a full disk); nothing was left \
             half-written."
        }
        Some("examine") => {
            "Usage error, or the file cannot be read as a regular file (missing, a symlink, a \
             directory or a device)."
        }
        Some("gms") => {
            "Usage error, or the run could not happen: a PATH does not exist, is a symlink, \
             cannot be read (run as root or as the artifact's owner), or is a file that is no \
             GMS artifact."
        }
        Some("pools") => {
            "Usage error, or the run could not happen: no PATH (KVCR has no default pool \
             directory), a PATH that does not exist, is a symlink, cannot be read, or is a file \
             not named kvcr-<pool id>-<32 hex>."
        }
        Some("offload") => {
            "Usage error, or the run could not happen: a PATH does not exist, is a symlink or \
             is not a directory, or a directory below it could not be listed whole (kvcr \
             never gives a partial verdict)."
        }
        Some("import") => {
            "Usage error, or the run could not happen: the root is missing, no deployment \
             profile (--profile or $KVCR_PROFILE) or one without world_size, tp, pp, model, \
             geometry and gpus, a bad or existing --ready-file, or no CUDA driver (or only \
             the CUDA toolkit's stub libcuda) for an accepted group. --dry-run exits 2 \
             where the real import would (no profile, no driver), like zpool import -n."
        }
        _ => {
            "Usage error, or the run could not happen: the root is missing, the profile is bad, \
             no CUDA driver (or only the CUDA toolkit's stub libcuda) for an import that is not \
             a dry run, or the report could not be written."
        }
    };
    let rejected = match sub {
        Some("examine") => {
            "The descriptor fails a check of its own (malformed, not v1, digest, rank, \
             sizes, a repeated handle)."
        }
        Some("import") => {
            "The group was rejected (a rejecting file-level finding, or no descriptor, \
             counts too), a --local-ranks part lacks a fresh --fleet-report proving the \
             whole group, or a live fact could not be checked. Nothing was imported. \
             --dry-run exits 1 where the real import would."
        }
        Some("seal") | Some("digest") => {
            "A file was refused, naming its code: a symlink (KV001), not a regular file \
             (KV002), over 1 MiB (KV004), not strict JSON (KV006), or (seal) not a valid \
             descriptor apart from its digest (KV007) or carrying a digest that does not match \
             its content (KV008, without --reseal-edited). No file was written."
        }
        Some("profile") => {
            "The group was rejected by the live, strict audit (or only a local part of it \
             is here, or no descriptor was found); nothing was printed on stdout, and \
             stderr says why."
        }
        Some("gms") => {
            "A GMS artifact was rejected: a finding in both reads (docs/format.md §14.6); \
             recovery metadata that GMS would start FRESH."
        }
        Some("pools") => {
            "A pool file, a pool directory or a G3 file was rejected: a rejecting finding in \
             both reads (docs/format.md §16.6), such as a handback digest KVCR would refuse."
        }
        Some("offload") => {
            "An offload set was rejected: a reject finding of docs/format.md §15.4 (an \
             unverifiable or mismatched namespace, an incomplete or damaged block, a symlink \
             or special file)."
        }
        _ => {
            "At least one group was rejected, or a file-level finding rejects (a symlink, a \
             torn write, a malformed descriptor); import: or no descriptor was found. Nothing \
             was imported."
        }
    };
    let all: [(i32, &str); 7] = [
        (exit::OK, ok),
        (exit::REJECTED, rejected),
        (exit::USAGE, usage),
        (
            exit::IMPORT_FAILED,
            "The import failed on the GPU and everything it took was released.",
        ),
        (
            exit::RELEASE_FAILED,
            "The import failed and releasing what it took also failed: the report lists what \
             remains.",
        ),
        (
            exit::INTERNAL,
            "An internal error: kvcr broke one of its own invariants (a bug to report, not a \
             usage error); nothing was imported or written.",
        ),
        (
            exit::INTERRUPTED,
            "Interrupted by SIGINT or SIGTERM; everything taken was released first.",
        ),
    ];
    let wanted: &[i32] = match sub {
        Some("audit") | Some("merge") | Some("seal") | Some("digest") | Some("examine")
        | Some("gms") | Some("pools") | Some("offload") => &[exit::OK, exit::REJECTED, exit::USAGE],
        Some("explain") | Some("completions") | Some("schema") => &[exit::OK, exit::USAGE],
        _ => &[
            exit::OK,
            exit::REJECTED,
            exit::USAGE,
            exit::IMPORT_FAILED,
            exit::RELEASE_FAILED,
            exit::INTERNAL,
            exit::INTERRUPTED,
        ],
    };
    r.control("SH", ["EXIT STATUS"]);
    for (code, text) in all.iter().filter(|(c, _)| wanted.contains(c)) {
        item(r, bold(code.to_string()), text);
    }
    if matches!(sub, None | Some("audit") | Some("merge")) {
        r.control("PP", []);
        r.text([roman(
            "A closed output pipe (kvcr audit | head -1) ends the run quietly with the status \
             the run decided; -q prints nothing and keeps the status. Scripts depend on these \
             numbers; they never change meaning.",
        )]);
    }
}

fn files(r: &mut Roff, sub: Option<&str>) {
    if !matches!(sub, None | Some("audit") | Some("import")) {
        return;
    }
    r.control("SH", ["FILES"]);
    item(
        r,
        italic("ROOT"),
        "The retained inventory: the ROOT argument, else $KVCR_INVENTORY. It is resolved once \
         and shown in the report; nothing beneath it is ever followed through a symlink. The \
         directory tree is organisation only: a group's identity comes from the descriptors' \
         content.",
    );
    item(
        r,
        italic("ROOT/.../rank-<R>.json"),
        "A descriptor (kvcr.retained-rank/v1; kvcr schema descriptor prints its JSON Schema), \
         one per rank, at any depth up to 8 below the root. R is decimal with no sign and no \
         leading zeros and must equal the rank inside. Files over 1 MiB are rejected unread.",
    );
    item(
        r,
        italic("ROOT/.../.<name>.tmp"),
        "A staging leftover: owners write .rank-3.json.<random>.tmp, then rename. A leftover is \
         a torn write (KV009) and is never opened.",
    );
    item(
        r,
        roman("any other file"),
        "Stray (KV010): reported as a notice, never fatal.",
    );
    item(
        r,
        italic("FILE"),
        "The deployment profile given with --profile (kvcr.profile/v1; kvcr schema profile \
         prints its JSON Schema).",
    );
    if sub == Some("import") {
        item(
            r,
            italic("/var/log/kvcr/import.jsonl"),
            "The import log ($KVCR_IMPORT_LOG): one JSON line per import and hold, never a dry \
             run, appended and fsynced; created 0600 with its directory (0700) if missing. The \
             same record goes to the journal when /run/systemd/journal/socket exists. A log that \
             cannot be written is a warning.",
        );
        item(
            r,
            italic("PATH"),
            "The --ready-file: written atomically (a temporary file, then rename) only after \
             every rank is imported; removed on release.",
        );
    }
    item(
        r,
        italic("/proc/sys/kernel/random/boot_id"),
        "This node's boot id, read in live mode (audit --live; import always runs live).",
    );
    item(
        r,
        italic("/proc/<pid>/stat"),
        "Field 22 (start time) of the owner and writer processes, read in live mode.",
    );
    item(
        r,
        italic("/proc/driver/nvidia/gpus/*/information"),
        "The GPUs on this node, read in live mode when the CUDA driver cannot list them. kvcr \
         never writes into the inventory.",
    );
}

fn environment(r: &mut Roff, sub: Option<&str>) {
    if matches!(
        sub,
        Some("explain")
            | Some("completions")
            | Some("schema")
            | Some("pools")
            | Some("seal")
            | Some("digest")
            | Some("examine")
    ) {
        return;
    }
    r.control("SH", ["ENVIRONMENT"]);
    if sub == Some("offload") {
        item(
            r,
            bold("SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR"),
            "With no PATH: SGLang's storage directory (default /tmp/hicache); llm-d's default \
             /tmp/shared-kv is looked at too (docs/format.md §15.1).",
        );
    }
    if sub == Some("gms") {
        item(
            r,
            bold("GMS_KV_LEASE_SHM_DIR, GMS_KV_LEASE_SHM_PATH"),
            "With no PATH: the lease rings' directory (default /dev/shm) and an explicit ring, \
             as GMS reads them; GMS_<ENGINE>_KV_LEASE_SHM_DIR and _PATH for vllm, sglang and \
             trtllm first (docs/format.md §14.1).",
        );
        item(
            r,
            bold("FAILOVER_LOCK_PATH"),
            "With no PATH: the failover lock (default /shared/failover.lock) whose \
             .vllm-writers and .writers directories hold the writer cohorts.",
        );
        item(
            r,
            bold("DYN_KV_RECOVERY_PATH, GMS_SOCKET_DIR"),
            "With no PATH: the recovery metadata, else kv-recovery.mmap in GMS_SOCKET_DIR, \
             else in /tmp.",
        );
        item(
            r,
            bold("GMS_KV_INDEX_PATH"),
            "With no PATH: a block index of a superseded format, and its .gen.",
        );
        return;
    }
    if sub != Some("merge") {
        item(
            r,
            bold("KVCR_INVENTORY"),
            "The inventory root when no ROOT argument is given.",
        );
        item(
            r,
            bold("KVCR_PROFILE"),
            "The deployment profile (kvcr.profile/v1) when --profile is not given, for audit and \
             import alike. Import requires one (docs/format.md §8.9); the packaged \
             /etc/default/kvcr names it for kvcr-hold.service.",
        );
    }
    item(
        r,
        bold("NO_COLOR"),
        "When set and not empty, no colour (unless --color always).",
    );
    item(
        r,
        bold("TERM"),
        "TERM=dumb: no colour and no progress bar. Colour and progress also need a terminal; \
         JSON output is never coloured. Tables wrap to the terminal's width, and do not wrap \
         on a pipe or in a file unless COLUMNS is set. The progress spinner appears only when \
         reading takes longer than 200 ms.",
    );
    item(
        r,
        bold("COLUMNS"),
        "The table width for output that is not a terminal (COLUMNS=80 kvcr audit ... | less); \
         ignored on a terminal, which reports its own width.",
    );
    if sub != Some("merge") {
        item(
            r,
            bold("CUDA_VISIBLE_DEVICES"),
            "Limits the GPUs the CUDA driver shows kvcr. In live mode a descriptor's GPU that is \
             on the node but hidden by it is rejected as not visible (KV106); import plans each \
             rank on a visible GPU by UUID, never by ordinal.",
        );
        if sub == Some("import") {
            item(
                r,
                bold("KVCR_IMPORT_LOG"),
                "The import log file (default /var/log/kvcr/import.jsonl); never inside the \
                 inventory (exit 2).",
            );
        }
        item(
            r,
            bold("KVCR_THREADS"),
            "Threads that read and parse descriptors (default: the CPUs available; 1 reads \
             sequentially). The output does not depend on it.",
        );
        item(
            r,
            bold("KVCR_NODE_FACTS"),
            "A test and demo hook, not for production: names a JSON file that describes a node \
             (boot id, hostname, processes, GPUs); live mode then reads that file instead of \
             this node.",
        );
    }
}

/// One EXAMPLES entry: what it does, the command line, and the exit status
/// it has on a healthy node (rendered as "(exit N)"; `tests/it/cli/examples_run.rs`
/// runs every example of the committed pages and checks that status).
pub struct Example {
    pub what: &'static str,
    pub cmd: &'static str,
    pub status: i32,
}

fn ex(what: &'static str, cmd: &'static str, status: i32) -> Example {
    Example { what, cmd, status }
}

/// The EXAMPLES of a page (`None`: kvcr.1).
pub fn examples_of(sub: Option<&str>) -> Vec<Example> {
    match sub {
        None => {
            vec![
            ex(
                "Audit a retained inventory; 0 only when every group is usable",
                "kvcr audit /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "The same in live mode, as one JSON document for a script",
                "kvcr audit --live --format json /var/lib/kvcr/inventory | jq '.groups[] | \
                 {engine_id, verdict}'",
                0,
            ),
            ex(
                "Print the import plan for one group without any CUDA call",
                "kvcr import --profile /etc/kvcr/profile.json --dry-run /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "Write the node's Prometheus metrics for node-exporter's textfile collector",
                "kvcr audit --live -q --textfile /var/lib/prometheus/node-exporter/kvcr.prom \
                 /var/lib/kvcr/inventory",
                0,
            ),
            ex("What a finding means and the safe next step", "kvcr explain KV104", 0),
        ]
        }
        Some("audit") => vec![
            ex(
                "Audit an inventory shipped in the source tree; rank 2 is missing",
                "kvcr audit fixtures/kv103-missing-rank/inventory",
                1,
            ),
            ex(
                "Check against this node too, showing every check per rank",
                "KVCR_INVENTORY=/var/lib/kvcr/inventory kvcr audit --live -v",
                0,
            ),
            ex(
                "Check one group against its deployment profile",
                "kvcr audit --profile /etc/kvcr/profile.json --engine llama3-70b-a \
                 /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "Only the exit status",
                "kvcr audit -q --live /var/lib/kvcr/inventory && echo usable",
                0,
            ),
            ex(
                "A report for CI; status 1 fails the job, 2 means the audit could not run",
                "kvcr audit --format json fixtures/accept-tp4/inventory > report.json",
                0,
            ),
            ex(
                "The metrics file the packaged timer writes every minute; a run that cannot happen \
                 writes kvcr_audit_success 0",
                "kvcr audit --live -q --textfile /var/lib/prometheus/node-exporter/kvcr.prom \
                 /var/lib/kvcr/inventory",
                0,
            ),
        ],
        Some("import") => vec![
            ex(
                "Print the plan (rank, GPU, allocations) without any CUDA call",
                "kvcr import --profile /etc/kvcr/profile.json --dry-run /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "Trial import: import every rank, verify, release everything",
                "kvcr import --profile /etc/kvcr/profile.json /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "The profile from the environment, as the packaged kvcr-hold.service reads it",
                "KVCR_PROFILE=/etc/kvcr/profile.json kvcr import --engine llama3-70b-a \
                 /var/lib/kvcr/inventory",
                0,
            ),
            ex(
                "Hold the group until SIGINT or SIGTERM (0 once released); a ready file tells when \
                 it is held",
                "kvcr import --profile /etc/kvcr/profile.json --hold --ready-file \
                 /run/kvcr/ready.json /var/lib/kvcr/inventory",
                0,
            ),
        ],
        Some("explain") => vec![
            ex("List every finding code", "kvcr explain", 0),
            ex(
                "One code, by code or by name",
                "kvcr explain KV108; kvcr explain geometry",
                0,
            ),
        ],
        Some("profile") => vec![ex(
            "Bootstrap the profile import requires from an accepted group, to review before use",
            "kvcr profile /var/lib/kvcr/inventory --engine llama3-70b-a",
            0,
        )],
        Some("merge") => vec![ex(
            "Merge the live reports of a group that spans two nodes",
            "kvcr merge node-a.json node-b.json",
            0,
        )],
        Some("examine") => vec![
            ex(
                "One descriptor's fields, digest, sizes and own findings",
                "kvcr examine /var/lib/kvcr/inventory/rank-3.json",
                0,
            ),
            ex(
                "The same as JSON, for a script",
                "kvcr examine --format json /var/lib/kvcr/inventory/rank-3.json",
                0,
            ),
        ],
        Some("completions") => vec![
            ex("Bash, for this shell", "source <(kvcr completions bash)", 0),
            ex("Zsh", "kvcr completions zsh > ~/.zfunc/_kvcr", 0),
            ex(
                "Fish",
                "kvcr completions fish > ~/.config/fish/completions/kvcr.fish",
                0,
            ),
        ],
        Some("schema") => vec![
            ex(
                "Save the report schema for a validator in CI",
                "kvcr schema report > kvcr-audit-report.schema.json",
                0,
            ),
            ex(
                "The descriptor schema, for any JSON Schema validator (check-jsonschema \
                 --schemafile descriptor.schema.json rank-0.json)",
                "kvcr schema descriptor > descriptor.schema.json",
                0,
            ),
        ],
        Some("seal") => vec![
            ex(
                "Seal a descriptor written without its digest, then audit",
                "kvcr seal inventory/rank-1.json && kvcr audit inventory",
                0,
            ),
            ex(
                "A descriptor edited after sealing is refused (KV008, both digests named); once \
                 the edit is checked, seal it as it is now",
                "kvcr seal --reseal-edited inventory/rank-1.json",
                0,
            ),
            ex(
                "Seal every descriptor of a fixture inventory in CI",
                "find fixtures/accept-tp4 -name 'rank-*.json' -type f -exec kvcr seal -q {} +",
                0,
            ),
        ],
        Some("gms") => vec![
            ex(
                "Look where GMS puts its artifacts, from its own variables (0: every one is ok, \
                 or none is found)",
                "kvcr gms",
                0,
            ),
            ex(
                "The same, lease owners checked against this node's processes, as one JSON \
                 document",
                "kvcr gms --live --format json",
                0,
            ),
            ex(
                "Every GMS artifact in one directory (its files by content, not by name)",
                "kvcr gms /run/kvcr/",
                0,
            ),
        ],
        Some("pools") => vec![
            ex(
                "Every pool file of a service's --pool-dir, with who holds each",
                "kvcr pools /dev/shm/kvcr --live",
                0,
            ),
            ex(
                "Check the handback digests against the service's and the claimant's terms",
                "kvcr pools /dev/shm/kvcr --pool-sizes-gb 64 --compatibility-digest \"$D\" \
                 --pool-layouts :2097152",
                0,
            ),
            ex(
                "One JSON document for a monitor",
                "kvcr pools /dev/shm/kvcr --live --format json",
                0,
            ),
        ],
        Some("offload") => vec![
            ex(
                "What an incomplete block means, what kvcr checked and the safe next step",
                "kvcr explain KV303",
                0,
            ),
            ex(
                "The JSON Schema of what kvcr offload --format json writes",
                "kvcr schema offload-report",
                0,
            ),
        ],
        Some("digest") => vec![ex(
            "Compare a descriptor's digest with the one it carries",
            "kvcr digest rank-0.json; jq -r .digest rank-0.json",
            0,
        )],
        Some(_) => vec![],
    }
}

fn examples(r: &mut Roff, sub: Option<&str>) {
    let ex = examples_of(sub);
    if ex.is_empty() {
        return;
    }
    r.control("SH", ["EXAMPLES"]);
    for e in ex {
        r.control("PP", []);
        r.text([roman(format!("{} (exit {}):", e.what, e.status))]);
        r.control("RS", ["4"]);
        r.control("nf", []);
        r.text([bold(e.cmd)]);
        r.control("fi", []);
        r.control("RE", []);
    }
}

fn see_also(r: &mut Roff, sub: Option<&str>, top: &clap::Command) {
    let mut refs: Vec<String> = Vec::new();
    if sub.is_some() {
        refs.push("kvcr(1)".to_string());
    }
    for s in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        if Some(s.get_name()) != sub {
            refs.push(format!("kvcr-{}(1)", s.get_name()));
        }
    }
    r.control("SH", ["SEE ALSO"]);
    r.text([roman(refs.join(", "))]);
    r.control("PP", []);
    r.text([roman(
        "docs/format.md in the source tree (/usr/share/doc/kvcr-audit/format.md from the Debian \
         package) is the contract: formats, digest, finding codes, exit statuses and rules, by \
         section; the help texts cite its sections, such as docs/format.md §3.2; docs/json.md \
         documents the JSON report field by field; kvcr schema prints the JSON Schemas.",
    )]);
    r.control("PP", []);
    r.text([roman(
        "kvcr is packaged as kvcr-audit (the Debian package, the Rust crate kvcr_audit and the \
         Python distribution kvcr-audit, imported as kvcr_audit): the Python package named kvcr \
         is NVIDIA's KV Cache Runner, which installs beside it (docs/python.md).",
    )]);
}
