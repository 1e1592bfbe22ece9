//! docs/format.md is the project's own contract: every `§N` cited anywhere
//! in the repository must be one of its sections, and nothing may cite a
//! document outside the repository (the old shared `SPEC.md`).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Section numbers declared by headings such as `### §3.2 Digest`, checked
/// for the numbering rules of §0: in order, each subsection under an
/// existing parent, no number twice.
fn sections(format_md: &str) -> Result<BTreeSet<String>, String> {
    let mut seen = BTreeSet::new();
    let mut last: Vec<u32> = Vec::new();
    for line in format_md.lines() {
        let Some(rest) = line.trim_start_matches('#').strip_prefix(" §") else {
            continue;
        };
        if !line.starts_with("##") {
            continue;
        }
        let num = rest.split_whitespace().next().unwrap_or("");
        let parts: Vec<u32> = num
            .split('.')
            .map(|p| p.parse().map_err(|_| format!("bad section number {num:?}")))
            .collect::<Result<_, _>>()?;
        let depth = line.len() - line.trim_start_matches('#').len();
        if depth != parts.len() + 1 {
            return Err(format!(
                "§{num}: heading level {depth} does not match its number"
            ));
        }
        if parts.len() > 1 && !seen.contains(&join(&parts[..parts.len() - 1])) {
            return Err(format!("§{num} has no parent section"));
        }
        if !seen.insert(num.to_string()) {
            return Err(format!("§{num} appears twice"));
        }
        if parts <= last {
            return Err(format!("§{num} is out of order after §{}", join(&last)));
        }
        last = parts;
    }
    if seen.is_empty() {
        return Err("no numbered sections found".into());
    }
    Ok(seen)
}

fn join(parts: &[u32]) -> String {
    parts
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// Problems in one file's text: references to missing sections, to SPEC,
/// and to docs/*.md files that do not exist.
fn problems(name: &str, text: &str, known: &BTreeSet<String>, root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", n + 1);
        for bad in ["SPEC.md", "SPEC §", "SPEC:", "/work/shared"] {
            if line.contains(bad) {
                out.push(format!(
                    "{at}: cites {bad:?}, a document outside the repository; \
                     cite docs/format.md §N"
                ));
            }
        }
        for (i, _) in line.match_indices('§') {
            let num: String = line[i + '§'.len_utf8()..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let num = num.trim_end_matches('.');
            if num.is_empty() {
                out.push(format!("{at}: a bare § without a section number"));
            } else if !known.contains(num) {
                out.push(format!("{at}: §{num} is not a section of docs/format.md"));
            }
        }
        for (i, _) in line.match_indices("docs/") {
            let doc: String = line[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                .collect();
            if doc.ends_with(".md") && !root.join(&doc).is_file() {
                out.push(format!("{at}: {doc} does not exist"));
            }
        }
    }
    out
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if !p.ends_with("target") {
                files_under(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

#[test]
fn every_reference_names_an_existing_section_and_nothing_cites_spec() {
    let root = Path::new(ROOT);
    let format_md = fs::read_to_string(root.join("docs/format.md")).unwrap();
    let known = sections(&format_md).unwrap();
    // The sections other files cite most must exist (a renumbering would
    // break every man page and explain text at once).
    for s in [
        "3", "3.1", "3.2", "3.5", "5", "5.3", "6", "8", "8.9", "9.5", "11",
    ] {
        assert!(known.contains(s), "§{s} missing from docs/format.md");
    }
    let mut files = vec![root.join("README.md")];
    for d in [
        "src",
        "docs",
        "man",
        "schemas",
        "examples",
        "benches",
        "scripts",
        "fuzz/fuzz_targets",
        "tests",
        "packaging",
        "crates",
        "xtask",
    ] {
        files_under(&root.join(d), &mut files);
    }
    let this = root.join(file!());
    let mut all = Vec::new();
    let mut scanned = 0;
    for f in files.iter().filter(|f| **f != this) {
        let Ok(text) = fs::read_to_string(f) else {
            continue;
        };
        scanned += 1;
        let name = f.strip_prefix(root).unwrap().display().to_string();
        all.extend(problems(&name, &text, &known, root));
    }
    assert!(scanned > 50, "only {scanned} files scanned");
    assert!(all.is_empty(), "{}", all.join("\n"));
}

#[test]
fn the_checker_catches_what_it_guards_against() {
    let known = sections("## §1 A\n### §1.1 B\n## §2 C\n").unwrap();
    let root = Path::new(ROOT);
    let ok = problems("x", "see docs/format.md §1.1 and §2.", &known, root);
    assert!(ok.is_empty(), "{ok:?}");
    assert_eq!(problems("x", "see §1.2", &known, root).len(), 1);
    assert_eq!(problems("x", "(SPEC §1)", &known, root).len(), 1);
    assert_eq!(problems("x", "is SPEC.md", &known, root).len(), 1);
    assert_eq!(
        problems("x", "see docs/nonexistent.md", &known, root).len(),
        1
    );
    assert!(
        sections("## §1 A\n### §2.1 B\n").is_err(),
        "orphan subsection"
    );
    assert!(sections("## §2 A\n## §1 B\n").is_err(), "out of order");
    assert!(sections("## §1 A\n## §1 B\n").is_err(), "twice");
    assert!(sections("## §1 A\n## §1.1 B\n").is_err(), "level mismatch");
}

/// Issue #31 §4: the synopsis of docs/format.md §7 lists, for every
/// subcommand `kvcr SUB --help` shows, each of its flags (long and short
/// form) and each value a flag with a fixed set of values takes.
#[test]
fn section_7_synopsis_lists_every_flag_of_every_subcommand() {
    let format_md = fs::read_to_string(Path::new(ROOT).join("docs/format.md")).unwrap();
    let sec = format_md.split("\n## §7 ").nth(1).expect("§7");
    let block = sec.split("```\n").nth(1).expect("§7's synopsis block");
    // One entry per `kvcr SUB` line, with its indented continuation lines.
    let mut synopsis: Vec<(String, String)> = Vec::new();
    for l in block.lines() {
        if let Some(rest) = l.strip_prefix("kvcr ") {
            let sub = rest.split_whitespace().next().unwrap_or("").to_string();
            synopsis.push((sub, format!(" {rest} ")));
        } else if let Some((_, text)) = synopsis.last_mut() {
            text.push_str(l);
            text.push(' ');
        }
    }
    let mut missing = Vec::new();
    let cmd = kvcr_audit::command();
    let mut checked = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let Some((_, text)) = synopsis.iter().find(|(n, _)| n == sub.get_name()) else {
            missing.push(format!("kvcr {} has no synopsis line", sub.get_name()));
            continue;
        };
        let has = |flag: &str| {
            [" ", "[", "|"].iter().any(|pre| {
                [" ", "]", "|"]
                    .iter()
                    .any(|post| text.contains(&format!("{pre}{flag}{post}")))
            })
        };
        for a in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if a.get_id() == "help" || a.is_positional() {
                continue;
            }
            checked += 1;
            if let Some(l) = a.get_long() {
                if !has(&format!("--{l}")) {
                    missing.push(format!("kvcr {}: --{l}", sub.get_name()));
                }
            }
            if let Some(s) = a.get_short() {
                if !has(&format!("-{s}")) {
                    missing.push(format!("kvcr {}: -{s}", sub.get_name()));
                }
            }
            let values = if a.get_action().takes_values() {
                a.get_possible_values()
            } else {
                Vec::new()
            };
            for v in values.iter().filter(|v| !v.is_hide_set()) {
                if !text.contains(v.get_name()) {
                    missing.push(format!(
                        "kvcr {}: --{} {}",
                        sub.get_name(),
                        a.get_long().unwrap_or("?"),
                        v.get_name()
                    ));
                }
            }
        }
    }
    assert!(checked > 40, "only {checked} flags checked");
    assert!(missing.is_empty(), "§7 lacks:\n{}", missing.join("\n"));
}
