//! Monitoring that cannot go stale (issue #21 items 9 and 10): the textfile
//! a failed audit leaves, the "facts not checked" metrics, the shipped
//! defaults of the timer's service, and the shipped Prometheus alert rules
//! checked against the metrics kvcr writes.

use crate::util::fleet::private;
use crate::util::{fixtures_live, kvcr, repo};
use prometheus_parse::{Scrape, Value as PValue};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("valid exposition format")
}

/// The value of the one sample of `metric` whose labels include `labels`.
fn get(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let hits: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == metric)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match x.value {
            PValue::Gauge(v) => v,
            ref o => panic!("{metric} is not a gauge: {o:?}"),
        })
        .collect();
    assert!(hits.len() <= 1, "{metric} {labels:?}: {hits:?}");
    hits.first().copied()
}

fn metrics(s: &Scrape) -> BTreeSet<String> {
    s.samples.iter().map(|x| x.metric.clone()).collect()
}

/// accept-tp4 copied with owner-private modes: accepted live under
/// fixtures/live/node-match.json.
fn private_tp4() -> tempfile::TempDir {
    let inv = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(repo().join("fixtures/accept-tp4/inventory")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), inv.path().join(e.file_name())).unwrap();
    }
    private(inv.path());
    inv
}

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A textfile written by an accepted live run, then one run that cannot
/// happen: the file must say `kvcr_audit_success 0`, with a fresh timestamp,
/// exit status 2 and no group left from the earlier run.
fn replaced_by_failure(args: &[&str], env: &[(&str, PathBuf)], live: bool) {
    let inv = private_tp4();
    let out_dir = tempfile::tempdir().unwrap();
    let prom = out_dir.path().join("kvcr.prom");
    let ok = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--live", "--quiet", "--textfile"])
        .arg(&prom)
        .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let before = parse(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(get(&before, "kvcr_audit_success", &[]), Some(1.0));
    assert_eq!(
        get(
            &before,
            "kvcr_group_accepted",
            &[("engine_id", "llama3-70b-a")]
        ),
        Some(1.0)
    );
    let t0 = now_s();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut c = kvcr();
    c.arg("audit").arg("--textfile").arg(&prom);
    for a in args {
        c.arg(a.replace("INV", inv.path().to_str().unwrap()));
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains("kvcr: error:"), "{args:?}: {stderr}");
    let text = std::fs::read_to_string(&prom).unwrap();
    let s = parse(&text);
    assert_eq!(get(&s, "kvcr_audit_success", &[]), Some(0.0), "{text}");
    assert_eq!(get(&s, "kvcr_audit_exit_status", &[]), Some(2.0), "{text}");
    assert_eq!(
        get(&s, "kvcr_audit_live", &[]),
        Some(if live { 1.0 } else { 0.0 })
    );
    let ts = get(&s, "kvcr_audit_timestamp_seconds", &[]).expect("a timestamp");
    assert!(ts >= t0 && ts <= now_s() + 1.0, "{ts} vs {t0}");
    assert!(get(&s, "kvcr_build_info", &[]).is_some());
    // Nothing from the earlier run, no verdict of any kind.
    for m in metrics(&s) {
        assert!(
            !m.starts_with("kvcr_group") && m != "kvcr_groups" && m != "kvcr_findings",
            "{args:?}: a failed run exports {m}:\n{text}"
        );
    }
    for sample in &s.samples {
        assert!(
            s.docs.contains_key(&sample.metric),
            "no HELP for {}",
            sample.metric
        );
    }
    // Written atomically: no staging file left beside it, mode 0644.
    assert_eq!(dir_names(out_dir.path()), ["kvcr.prom"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&prom).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[test]
fn a_missing_inventory_replaces_the_textfile_with_success_0() {
    replaced_by_failure(&["/nonexistent/kvcr-inventory"], &[], false);
    replaced_by_failure(&["/nonexistent/kvcr-inventory", "--live"], &[], true);
}

#[test]
fn an_inventory_that_is_a_file_replaces_the_textfile_with_success_0() {
    replaced_by_failure(&["INV/rank-0.json"], &[], false);
}

#[test]
fn a_bad_profile_replaces_the_textfile_with_success_0() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("profile.json");
    std::fs::write(&bad, b"{\"schema\": \"kvcr.profile/v1\"").unwrap();
    let bad = bad.to_str().unwrap().to_string();
    replaced_by_failure(&["INV", "--profile", &bad], &[], false);
    replaced_by_failure(
        &["INV", "--profile", "/nonexistent/profile.json"],
        &[],
        false,
    );
    // From the environment, as the unit's EnvironmentFile would set it.
    replaced_by_failure(&["INV"], &[("KVCR_PROFILE", PathBuf::from(&bad))], false);
}

#[test]
fn an_unknown_engine_or_unreadable_node_facts_replace_the_textfile() {
    replaced_by_failure(&["INV", "--engine", "no-such-group"], &[], false);
    replaced_by_failure(
        &["INV", "--live"],
        &[("KVCR_NODE_FACTS", PathBuf::from("/nonexistent/facts.json"))],
        true,
    );
}

#[test]
fn no_root_at_all_replaces_the_textfile() {
    // Neither ROOT nor KVCR_INVENTORY (test_env removes it).
    replaced_by_failure(&[], &[], false);
}

#[test]
fn an_unusable_textfile_is_refused_and_nothing_is_written() {
    let inv = private_tp4();
    // Inside a missing inventory's path, a directory that does not exist.
    let out = kvcr()
        .arg("audit")
        .arg("/nonexistent/inv")
        .args(["--textfile", "/nonexistent/inv/kvcr.prom"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--textfile /nonexistent/inv/kvcr.prom"),
        "{out:?}"
    );
    // Inside an existing inventory: refused even when the run would fail
    // for another reason (a bad profile), and the inventory is untouched.
    let before = crate::util::testkit::snapshot(inv.path());
    let out = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--profile", "/nonexistent/profile.json", "--textfile"])
        .arg(inv.path().join("kvcr.prom"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("inside the inventory"));
    assert_eq!(crate::util::testkit::snapshot(inv.path()), before);
}

/// `kvcr_audit_facts_not_checked` and `kvcr_group_facts_not_checked` agree
/// with the JSON report's `not_checked`, and are absent offline (nothing was
/// checked, so "0 not checked" would be a lie).
#[test]
fn facts_not_checked_are_exported_in_live_mode() {
    let inv = private_tp4();
    for (facts, want) in [("node-unknown.json", None), ("node-match.json", Some(0))] {
        let run = |format: &str| {
            kvcr()
                .arg("audit")
                .arg(inv.path())
                .args(["--live", "--format", format])
                .env("KVCR_NODE_FACTS", fixtures_live(facts))
                .output()
                .unwrap()
        };
        let report: Value = serde_json::from_slice(&run("json").stdout).unwrap();
        let n = report["summary"]["not_checked"].as_u64().unwrap();
        if let Some(w) = want {
            assert_eq!(n, w, "{facts}");
        } else {
            assert!(n > 0, "{facts}: {report}");
        }
        let s = parse(&String::from_utf8(run("prometheus").stdout).unwrap());
        assert_eq!(
            get(&s, "kvcr_audit_facts_not_checked", &[]),
            Some(n as f64),
            "{facts}"
        );
        let per_rank: u64 = report["groups"][0]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["not_checked"].as_array().map_or(0, |a| a.len() as u64))
            .sum();
        assert_eq!(
            get(
                &s,
                "kvcr_group_facts_not_checked",
                &[("engine_id", "llama3-70b-a")]
            ),
            Some(per_rank as f64),
            "{facts}"
        );
    }
    let out = kvcr()
        .arg("audit")
        .arg(inv.path())
        .args(["--format", "prometheus"])
        .output()
        .unwrap();
    let s = parse(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(get(&s, "kvcr_audit_live", &[]), Some(0.0));
    assert_eq!(get(&s, "kvcr_audit_facts_not_checked", &[]), None);
    assert_eq!(get(&s, "kvcr_group_facts_not_checked", &[]), None);
}

/// KEY=VALUE lines of the shipped EnvironmentFile.
fn shipped_defaults() -> Vec<(String, String)> {
    std::fs::read_to_string(repo().join("packaging/default/kvcr"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.trim().to_string(), v.trim().trim_matches('"').to_string())
        })
        .collect()
}

/// The timer's service run word for word as systemd would with the shipped
/// /etc/default/kvcr: the audit is live, so an owner that is gone shows the
/// group rejected, not accepted as an offline audit would.
#[test]
fn the_shipped_defaults_audit_live_so_a_dead_owner_is_rejected() {
    let defaults = shipped_defaults();
    let args = &defaults
        .iter()
        .find(|(k, _)| k == "KVCR_AUDIT_ARGS")
        .expect("KVCR_AUDIT_ARGS")
        .1;
    assert!(
        args.split_whitespace().any(|w| w == "--live"),
        "KVCR_AUDIT_ARGS={args}"
    );
    let unit =
        std::fs::read_to_string(repo().join("packaging/systemd/kvcr-audit-textfile.service"))
            .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let inv = private_tp4();
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("kvcr.prom");
    let mut words: Vec<String> = Vec::new();
    for w in exec.split_whitespace() {
        match w {
            "${KVCR_TEXTFILE}" => words.push(prom.display().to_string()),
            "$KVCR_AUDIT_ARGS" => words.extend(args.split_whitespace().map(str::to_string)),
            w => words.push(w.to_string()),
        }
    }
    assert_eq!(words[0], "/usr/bin/kvcr");
    // The owner alive (its pid and start time in the facts): accepted.
    // Then the same node without that process: rejected, KV108.
    let facts: Value =
        serde_json::from_slice(&std::fs::read(fixtures_live("node-match.json")).unwrap()).unwrap();
    let mut dead = facts.clone();
    dead["processes"] = serde_json::json!({});
    let dead_path = dir.path().join("facts-dead-owner.json");
    std::fs::write(&dead_path, serde_json::to_vec(&dead).unwrap()).unwrap();
    for (facts, status, accepted) in [
        (fixtures_live("node-match.json"), 0, 1.0),
        (dead_path.clone(), 1, 0.0),
    ] {
        let out = kvcr()
            .args(&words[1..])
            .env("KVCR_INVENTORY", inv.path())
            .env("KVCR_NODE_FACTS", &facts)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(status),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&prom).unwrap();
        let s = parse(&text);
        assert_eq!(get(&s, "kvcr_audit_live", &[]), Some(1.0), "{text}");
        assert_eq!(
            get(&s, "kvcr_group_accepted", &[("engine_id", "llama3-70b-a")]),
            Some(accepted),
            "{text}"
        );
        if status == 1 {
            assert!(
                get(
                    &s,
                    "kvcr_group_findings",
                    &[("engine_id", "llama3-70b-a"), ("code", "KV108")]
                )
                .is_some(),
                "{text}"
            );
        }
    }
}

const RULES: &str = "packaging/prometheus/kvcr-alerts.yml";

/// Every metric family kvcr can write: the HELP lines of an accepted live
/// run, a rejected offline run, and a run that could not happen.
fn families_kvcr_writes() -> BTreeSet<String> {
    let inv = private_tp4();
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("kvcr.prom");
    let mut all = BTreeSet::new();
    let runs: [(&[&str], PathBuf); 3] = [
        (&["--live"], inv.path().to_path_buf()),
        (&[], repo().join("fixtures/kv104-geometry/inventory")),
        (&[], PathBuf::from("/nonexistent/kvcr-inventory")),
    ];
    for (args, root) in runs {
        kvcr()
            .arg("audit")
            .arg(&root)
            .args(args)
            .arg("--textfile")
            .arg(&prom)
            .env("KVCR_NODE_FACTS", fixtures_live("node-match.json"))
            .output()
            .unwrap();
        let s = parse(&std::fs::read_to_string(&prom).unwrap());
        all.extend(s.docs.keys().cloned());
    }
    all
}

/// The `kvcr_…` names in an expression (PromQL identifiers).
fn kvcr_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"kvcr_") && (i == 0 || !ident(b[i - 1])) {
            let end = (i..b.len()).find(|&j| !ident(b[j])).unwrap_or(b.len());
            out.insert(text[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn the_alert_rules_name_only_metrics_kvcr_writes() {
    let rules = std::fs::read_to_string(repo().join(RULES)).unwrap();
    let exprs: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .collect();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    assert_eq!(
        alerts,
        [
            "KvcrAuditStale",
            "KvcrAuditFailing",
            "KvcrGroupRejected",
            "KvcrFactsNotChecked",
            "KvcrAuditNotLive"
        ]
    );
    assert_eq!(exprs.len(), alerts.len());
    let written = families_kvcr_writes();
    let mut named = BTreeSet::new();
    for e in &exprs {
        let names = kvcr_names(e);
        assert!(!names.is_empty(), "{e} names no kvcr metric");
        named.extend(names);
    }
    let missing: Vec<&String> = named.difference(&written).collect();
    assert!(
        missing.is_empty(),
        "the rules name {missing:?}, which kvcr never writes ({written:?})"
    );
    // And the check can fail: a name kvcr does not write is caught.
    assert!(!written.contains("kvcr_audit_succes"));
    assert_eq!(
        kvcr_names("time() - kvcr_audit_timestamp_seconds > 600 and xkvcr_no"),
        BTreeSet::from(["kvcr_audit_timestamp_seconds".to_string()])
    );
}

/// `promtool check rules` and `promtool test rules` where promtool is
/// installed (`.ci/run` installs it and runs both itself too).
#[test]
fn promtool_checks_and_tests_the_alert_rules() {
    let have = std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        crate::util::missing(
            "needs promtool (Debian: apt-get install prometheus; .ci/run installs it)",
        );
        return;
    }
    let dir = repo().join("packaging/prometheus");
    for args in [
        ["check", "rules", "kvcr-alerts.yml"],
        ["test", "rules", "kvcr-alerts.test.yml"],
    ] {
        let out = std::process::Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A broken rule file is refused, so the pass above means something.
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yml");
    std::fs::write(
        &bad,
        "groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: kvcr_audit_success ==\n",
    )
    .unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
}
