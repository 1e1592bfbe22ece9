//! The group header an operator reads first: for every fixture, the root
//! cause it names (code) and the action it gives, from a table; the same
//! header in the table at 80 and 120 columns (no line wider, no trailing
//! space, no word cut); and the merge and command-line cases.

use crate::cli::explain::action;
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// What each fixture's header must say: per group, the headline code
/// (`None`: accepted) and a piece of the action.
fn expected(name: &str) -> Vec<(&'static str, Option<&'static str>, &'static str)> {
    let acc = |e| (e, None, "check this node first: kvcr audit --live ");
    let code = |e, c| (e, Some(c), "");
    let l = "llama3-70b-a";
    match name {
        "accept-nested"
        | "accept-posix-fd"
        | "accept-superseded"
        | "accept-tp1"
        | "accept-tp4"
        | "kv010-stray"
        | "kv107-profile-incarnation"
        | "profile-accept" => {
            vec![acc(l)]
        }
        "accept-tp2pp2" => vec![acc("mixtral-tp2pp2")],
        "accept-two-groups" => vec![acc(l), acc("qwen2-7b-b")],
        "engine-filter" => vec![acc("qwen2-7b-b")],
        "empty" => vec![],
        "kv001-symlink" => vec![code(l, "KV001")],
        "kv002-not-regular" => vec![code(l, "KV002")],
        "kv006-malformed" => vec![code(l, "KV006")],
        "kv007-schema" => vec![code(l, "KV007")],
        "kv008-digest" => vec![code(l, "KV008")],
        "kv009-torn" => vec![code(l, "KV009")],
        "kv101-wrong-rank" => vec![code("bad-world", "KV101"), code(l, "KV101")],
        "kv102-duplicate-rank" => vec![code(l, "KV102")],
        "kv103-missing-rank" | "kv108-no-fallback" => vec![code(l, "KV103")],
        "kv104-geometry" => vec![code(l, "KV104")],
        "kv105-model" => vec![code(l, "KV105")],
        "kv106-gpu-uuid" | "kv106-mig-alias" | "kv106-profile-gpu" => vec![code(l, "KV106")],
        "kv107-tie" => vec![(l, Some("KV107"), "--incarnation 3f2b8c1e-")],
        "kv108-future" | "kv108-max-age" | "kv108-min-epoch" | "kv108-seconds" => {
            vec![code(l, "KV108")]
        }
        "kv110-two-nodes" => vec![code(l, "KV110")],
        "kv111-handle-reuse" | "kv111-posix-fd-reuse" => vec![code(l, "KV111")],
        other => panic!("fixture {other} has no expected headline: add it to this table"),
    }
}

fn case_args(dir: &Path) -> Vec<String> {
    let case: Value =
        serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    case["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn all_fixtures() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 30, "{dirs:?}");
    dirs
}

fn run_in(dir: &Path, args: &[String], extra: &[&str], columns: Option<u16>) -> (i32, String) {
    let mut c = kvcr();
    c.current_dir(dir)
        .arg("audit")
        .arg("inventory")
        .args(args)
        .args(extra);
    if let Some(w) = columns {
        c.env("COLUMNS", w.to_string());
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn every_fixture_names_its_root_cause_and_its_action() {
    let mut failures = Vec::new();
    for dir in all_fixtures() {
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let args = case_args(&dir);
        let (_, json) = run_in(&dir, &args, &["--format", "json"], None);
        let v: Value = serde_json::from_str(&json).unwrap();
        let groups = v["groups"].as_array().unwrap();
        let want = expected(&name);
        if groups.len() != want.len() {
            failures.push(format!(
                "{name}: {} groups, expected {}",
                groups.len(),
                want.len()
            ));
            continue;
        }
        let root = std::fs::canonicalize(dir.join("inventory")).unwrap();
        for (g, (engine, code, part)) in groups.iter().zip(want) {
            let got_code = g["cause_code"].as_str();
            let act = g["action"].as_str().unwrap();
            let cause = g["cause"].as_str().unwrap();
            if g["engine_id"] != engine || got_code != code {
                failures.push(format!(
                    "{name}/{engine}: headline {got_code:?}, expected {code:?}: {cause}"
                ));
                continue;
            }
            if let Some(c) = code {
                let c = kvcr_audit::finding::Code::parse(c).unwrap();
                if !cause.contains(&format!("({c})")) {
                    failures.push(format!("{name}: the cause does not name {c}: {cause}"));
                }
                // The code's own safe step, unless a more specific one applies.
                if part.is_empty() && !act.starts_with(&action(c)) {
                    failures.push(format!("{name}: action is not {c}'s: {act}"));
                }
                if !act.ends_with(&format!("see `kvcr explain {c}`")) {
                    failures.push(format!("{name}: action does not point at explain: {act}"));
                }
            }
            if !act.contains(part) {
                failures.push(format!("{name}: action lacks {part:?}: {act}"));
            }
            // Suggested commands carry the real root, never a placeholder.
            if act.contains("ROOT")
                || (act.contains("kvcr audit") && !act.contains(&*root.to_string_lossy()))
            {
                failures.push(format!(
                    "{name}: suggested command without the real root: {act}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_issue_13_cases_are_not_sent_the_wrong_way() {
    let f = fixtures();
    let head = |name: &str, extra: &[&str]| {
        let (code, out) = run_in(&f.join(name), &[], extra, Some(200));
        (code, out)
    };
    let (_, dup) = head("kv102-duplicate-rank", &[]);
    assert!(!dup.contains("check CUDA_VISIBLE_DEVICES"), "{dup}");
    assert!(dup.contains("this also explains KV106, KV111"), "{dup}");
    let (_, mal) = head("kv006-malformed", &[]);
    assert!(!mal.contains("restore the missing rank"), "{mal}");
    let (_, wrong) = head("kv101-wrong-rank", &[]);
    assert!(!wrong.contains("also claimed by rank 0"), "{wrong}");
    // The tie: each lifetime's owner and time; no rank reads "accept ok".
    let (_, tie) = head("kv107-tie", &[]);
    assert!(
        tie.contains("(owner pid 4242, created 2025-11-30 00:00:00 UTC)"),
        "{tie}"
    );
    assert!(!tie.lines().any(|l| l.contains(" accept ")), "{tie}");
    assert!(
        tie.contains("KV107 tied with incarnation 9a7e6d5c…"),
        "{tie}"
    );
    assert_eq!(tie.matches("REJECT ").count(), 4, "{tie}");
    // --local-ranks beyond world_size: a flag to fix, not files to rename.
    let (code, lr) = head("accept-tp4", &["--local-ranks", "0-7"]);
    assert_eq!(code, 1);
    assert!(!lr.contains("do not rename files"), "{lr}");
    assert!(lr.contains("in --local-ranks"), "{lr}");
    // An --engine typo: exit 2 naming the groups present, no table.
    let out = kvcr()
        .current_dir(f.join("accept-two-groups"))
        .args(["audit", "inventory", "--engine", "llama3-70b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("groups present: llama3-70b-a, qwen2-7b-b"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    // An empty inventory is nothing retained: exit 0, and it says so first.
    let (code, empty) = head("empty", &[]);
    assert_eq!(code, 0);
    assert!(
        empty.lines().nth(1).unwrap().starts_with("empty: "),
        "{empty}"
    );
}

#[test]
fn incarnation_flag_pins_a_lifetime_and_overrides_the_profile() {
    let dir = fixtures().join("kv107-tie");
    let pin = |inc: &str| {
        let (code, v) = audit_json(&dir.join("inventory"), &["--incarnation", inc]);
        (code, v)
    };
    let (code, v) = pin("9a7e6d5c-4b3a-4f2e-8d1c-0b9a8f7e6d51");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        v["groups"][0]["incarnation"],
        "9a7e6d5c-4b3a-4f2e-8d1c-0b9a8f7e6d51"
    );
    assert_eq!(
        v["options"]["incarnation"],
        "9a7e6d5c-4b3a-4f2e-8d1c-0b9a8f7e6d51"
    );
    // Not in the inventory: a usage error listing those that are.
    let out = kvcr()
        .arg("audit")
        .arg(dir.join("inventory"))
        .args(["--incarnation", "00000000-0000-4000-8000-000000000000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90"));
    // The flag wins over the profile's pin.
    let p = fixtures().join("kv107-profile-incarnation");
    let profile: Value =
        serde_json::from_slice(&std::fs::read(p.join("profile.json")).unwrap()).unwrap();
    let pinned = profile["incarnation"].as_str().unwrap();
    let other = [
        "3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90",
        "9a7e6d5c-4b3a-4f2e-8d1c-0b9a8f7e6d51",
    ]
    .into_iter()
    .find(|u| *u != pinned)
    .unwrap();
    let (_, v) = audit_json(
        &p.join("inventory"),
        &[
            "--profile",
            p.join("profile.json").to_str().unwrap(),
            "--incarnation",
            other,
        ],
    );
    assert_eq!(v["groups"][0]["incarnation"], other, "{v:#}");
}

/// Every line of a table at `w` columns: no wider (unless one long word
/// is), no trailing space.
fn check_width(name: &str, text: &str, w: usize, failures: &mut Vec<String>) {
    for line in text.lines() {
        let n = line.chars().count();
        let longest = line
            .split_whitespace()
            .map(|x| x.chars().count())
            .max()
            .unwrap_or(0);
        if n > w && longest + 10 < n {
            failures.push(format!("{name}@{w}: {n} columns: {line:?}"));
        }
        if line.ends_with(' ') {
            failures.push(format!("{name}@{w}: trailing space: {line:?}"));
        }
    }
}

#[test]
fn every_fixture_fits_80_and_120_columns() {
    let mut failures = Vec::new();
    for dir in all_fixtures() {
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let args = case_args(&dir);
        let (_, wide) = run_in(&dir, &args, &[], Some(1000));
        let wide_words: std::collections::BTreeSet<String> =
            wide.split_whitespace().map(str::to_string).collect();
        for w in [80u16, 120] {
            let (_, text) = run_in(&dir, &args, &[], Some(w));
            check_width(&name, &text, w.into(), &mut failures);
            for word in text.split_whitespace() {
                if !wide_words.contains(word) {
                    failures.push(format!("{name}@{w}: {word:?} is a cut word"));
                }
            }
            // Constant columns live in the header.
            let header = text
                .lines()
                .find(|l| l.trim_start().starts_with("rank "))
                .unwrap_or("");
            if !name.starts_with("kv107-tie") && header.contains("incarnation") {
                failures.push(format!("{name}@{w}: constant incarnation column: {header}"));
            }
            if header.contains("  age") {
                failures.push(format!("{name}@{w}: constant age column: {header}"));
            }
        }
        // Piped with no COLUMNS: one line per row, still no trailing space.
        let (_, piped) = run_in(&dir, &args, &[], None);
        if piped.lines().any(|l| l.ends_with(' ')) {
            failures.push(format!("{name}: trailing space when piped"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn missing_ranks_stay_one_row_per_run() {
    let t = tempfile::tempdir().unwrap();
    let d = crate::util::testkit::Desc::new("big", 0, 4096, 1);
    crate::util::testkit::put(t.path(), "rank-0.json", &d.bytes());
    let out = kvcr()
        .env("COLUMNS", "80")
        .arg("audit")
        .arg(t.path())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("MISSING")).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].trim_start().starts_with("1-4095"), "{text}");
}

fn write_report(dir: &Path, ranks: std::ops::Range<u64>, local: &str, host: &str) -> PathBuf {
    let first = ranks.start;
    let inv = dir.join(format!("inv-{host}-{local}-{first}"));
    for rank in ranks {
        let d = crate::util::testkit::Desc::new("fleet-a", rank, 4, 1);
        crate::util::testkit::put(&inv, &format!("rank-{rank}.json"), &d.bytes());
    }
    // `local` empty: audited without --local-ranks.
    let args: &[&str] = if local.is_empty() {
        &[]
    } else {
        &["--local-ranks", local]
    };
    let (_, mut v) = audit_json(&inv, args);
    v["host"] = Value::String(host.into());
    let p = dir.join(format!("{host}-{local}-{first}.json"));
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    p
}

fn merge_json(paths: &[&Path]) -> (i32, Value, String) {
    let out = kvcr()
        .arg("merge")
        .args(paths)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let table = kvcr()
        .env("COLUMNS", "80")
        .arg("merge")
        .args(paths)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8(table.stdout).unwrap(),
    )
}

#[test]
fn merge_headlines() {
    let t = tempfile::tempdir().unwrap();
    let a = write_report(t.path(), 0..2, "0-1", "node-a");
    let b = write_report(t.path(), 2..4, "2-3", "node-b");
    // Complete: accepted, offline inputs said so; the gate would refuse an
    // import from offline reports, so the advice is a live audit per node
    // (issue #21 item 3), never the import.
    let (code, v, table) = merge_json(&[&a, &b]);
    assert_eq!(code, 0, "{v:#}");
    let g = &v["groups"][0];
    assert!(g["cause_code"].is_null());
    assert_eq!(v["all_inputs_live"], false);
    assert!(v["oldest_input_age_ms"].is_u64(), "{v:#}");
    assert!(
        g["ranks"][0]["age_ms"].is_u64(),
        "merged ranks carry ages: {v:#}"
    );
    assert!(g["ranks"][0]["created_unix_ms"].is_u64());
    assert!(g["cause"]
        .as_str()
        .unwrap()
        .contains("not every input was live"));
    let act = g["action"].as_str().unwrap();
    assert!(
        act.contains("on node-a (report ")
            && act.contains("kvcr audit --live ")
            && act.contains("--local-ranks 0-1"),
        "{act}"
    );
    assert!(!act.contains("kvcr import"), "{act}");
    assert!(!act.contains("ROOT"), "{act}");
    assert!(table.contains("merged from 2 reports"), "{table}");
    // Merged tables show ages (the descriptors' created time is carried).
    assert!(table.contains("age "), "{table}");
    // Two reports from one host: the inputs are wrong, not the files.
    let b_same = write_report(t.path(), 2..4, "2-3", "NODE-A");
    let (code, v, _) = merge_json(&[&a, &b_same]);
    assert_eq!(code, 1);
    let g = &v["groups"][0];
    assert_eq!(g["cause_code"], "KV102", "{v:#}");
    let act = g["action"].as_str().unwrap();
    assert!(
        act.starts_with("pass one report per node to kvcr merge"),
        "{act}"
    );
    assert!(!act.contains("remove the other descriptor"), "{act}");
    // One report: grammar.
    let (_, _, table) = merge_json(&[&a]);
    assert!(table.contains("merged from 1 report "), "{table}");
    // A rank missing across the fleet.
    let (code, v, _) = merge_json(&[&b]);
    assert_eq!(code, 1);
    assert_eq!(v["groups"][0]["cause_code"], "KV103", "{v:#}");
}

#[test]
fn suggested_commands_quote_the_root_for_a_shell_and_escape_it_for_a_terminal() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("it's my\u{1b}[31m inv");
    for rank in 0..2 {
        let d = crate::util::testkit::Desc::new("quote-a", rank, 2, 1);
        crate::util::testkit::put(&root, &format!("rank-{rank}.json"), &d.bytes());
    }
    let (code, v) = audit_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    let act = v["groups"][0]["action"].as_str().unwrap();
    let resolved = std::fs::canonicalize(&root).unwrap();
    let quoted = format!(
        "'{}'",
        resolved.display().to_string().replace('\'', r"'\''")
    );
    assert!(
        act.contains(&format!("kvcr audit --live {quoted} --engine quote-a")),
        "{act}"
    );
    // The table never passes the escape byte to the terminal.
    let out = kvcr()
        .env("COLUMNS", "300")
        .arg("audit")
        .arg(&root)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("kvcr audit --live '"), "{text}");
}

#[test]
fn local_ranks_beyond_the_group_point_at_the_request_not_the_files() {
    // The action is chosen by what the finding is about (the operator's
    // --local-ranks), whatever its message says.
    let root = fixtures().join("accept-tp4/inventory");
    let (code, v) = audit_json(&root, &["--local-ranks", "2-5"]);
    assert_eq!(code, 1, "{v:#}");
    let g = &v["groups"][0];
    assert_eq!(g["cause_code"], "KV101", "{v:#}");
    let act = g["action"].as_str().unwrap();
    assert!(
        act.starts_with("name only ranks below world_size 4 in --local-ranks"),
        "{act}"
    );
    assert!(act.contains("; this inventory holds ranks 0-3"), "{act}");
    // A KV101 about a file (a rank-name mismatch) keeps the code's own action.
    let (_, v) = audit_json(&fixtures().join("kv101-wrong-rank/inventory"), &[]);
    let act = v["groups"][0]["action"].as_str().unwrap_or_default();
    assert!(!act.contains("--local-ranks"), "{act}");
}

/// Reports written without --local-ranks (issue #31 §3): each node's
/// audit rejects the group for the ranks the other node holds (KV103),
/// while every rank row of the merge is accepted. The action follows from
/// that cause: audit every node again naming its own ranks, then merge;
/// never KV103's "start the engine with an empty cache".
#[test]
fn a_merge_of_reports_without_local_ranks_points_at_local_ranks() {
    let t = tempfile::tempdir().unwrap();
    let a = write_report(t.path(), 0..2, "", "node-a");
    let b = write_report(t.path(), 2..4, "", "node-b");
    let (code, v, table) = merge_json(&[&a, &b]);
    assert_eq!(code, 1, "{v:#}");
    let g = &v["groups"][0];
    assert!(
        g["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verdict"] == "accept"),
        "{v:#}"
    );
    assert_eq!(g["cause_code"], "KV103", "{v:#}");
    let cause = g["cause"].as_str().unwrap();
    assert!(cause.contains("without --local-ranks"), "{cause}");
    let act = g["action"].as_str().unwrap();
    assert!(!act.contains("empty cache"), "{act}");
    for (host, ranks) in [("node-a", "0-1"), ("node-b", "2-3")] {
        assert!(
            act.contains(&format!("on {host} (report "))
                && act.contains(&format!(
                    "--local-ranks {ranks} --format json > {host}.json"
                )),
            "{host}: {act}"
        );
    }
    assert!(act.contains("kvcr audit --live "), "{act}");
    assert!(
        act.contains("then kvcr merge every node's report again"),
        "{act}"
    );
    assert!(!act.contains("kvcr import"), "{act}");
    let words = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("audit every node again"), "{table}");
    // One node with --local-ranks, one without: the one without rejects,
    // and the action names both nodes' ranks (the merge needs every
    // node's report, each new).
    let a = write_report(t.path(), 0..2, "0-1", "node-a");
    let (code, v, _) = merge_json(&[&a, &b]);
    assert_eq!(code, 1, "{v:#}");
    let act = v["groups"][0]["action"].as_str().unwrap();
    assert!(
        act.contains("--local-ranks 0-1") && act.contains("--local-ranks 2-3"),
        "{act}"
    );
    // A node audited with --local-ranks that rejects for its own reason
    // keeps that reason's action.
    let mut bad = serde_json::from_slice::<Value>(&std::fs::read(&a).unwrap()).unwrap();
    bad["groups"][0]["verdict"] = "reject".into();
    bad["groups"][0]["findings"] = serde_json::json!([{"code": "KV103", "name": "missing-rank",
        "severity": "reject", "message": "rank 1 missing"}]);
    let bad_path = t.path().join("bad.json");
    std::fs::write(&bad_path, bad.to_string()).unwrap();
    let b = write_report(t.path(), 2..4, "2-3", "node-b");
    let (code, v, _) = merge_json(&[&bad_path, &b]);
    assert_eq!(code, 1, "{v:#}");
    let act = v["groups"][0]["action"].as_str().unwrap();
    assert!(
        act.starts_with(&action(kvcr_audit::finding::Code::KV103)),
        "{act}"
    );
}

/// An accepted group's action says what each command does (issue #31
/// §3): a trial import proves the group can be imported and releases it,
/// handing nothing over; a hold keeps the memory while the engine imports
/// the handles itself from the import plan.
#[test]
fn an_accepted_action_says_what_a_trial_proves_and_what_hands_memory_over() {
    let t = tempfile::tempdir().unwrap();
    let (code, v) = audit_json(&fixtures().join("accept-tp4/inventory"), &[]);
    assert_eq!(code, 0, "{v:#}");
    let act = v["groups"][0]["action"].as_str().unwrap();
    assert!(
        act.contains("a trial proves the group can be reused"),
        "{act}"
    );
    assert!(act.contains("nothing is handed over"), "{act}");
    assert!(act.contains("--hold --ready-file PATH"), "{act}");
    assert!(
        act.contains("the engine imports the handles itself from the import plan"),
        "{act}"
    );
    assert!(!act.contains("to reuse the cache: kvcr import"), "{act}");
    // After a merge: the same, for each node's ranks.
    let a = write_report(t.path(), 0..2, "0-1", "node-a");
    let b = write_report(t.path(), 2..4, "2-3", "node-b");
    let mut live = Vec::new();
    for p in [&a, &b] {
        let mut v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["live"] = true.into();
        v["boot_id"] = crate::util::testkit::BOOT_ID.into();
        let q = p.with_extension("live.json");
        std::fs::write(&q, v.to_string()).unwrap();
        live.push(q);
    }
    let (code, v, _) = merge_json(&[&live[0], &live[1]]);
    assert_eq!(code, 0, "{v:#}");
    let act = v["groups"][0]["action"].as_str().unwrap();
    assert!(act.contains("on node-a: kvcr import"), "{act}");
    assert!(
        act.contains("a trial proves each node's ranks can be reused")
            && act.contains("each node's engine imports the handles itself"),
        "{act}"
    );
}
