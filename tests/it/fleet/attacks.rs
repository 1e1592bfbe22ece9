//! Merge and the fleet gate hold against forged and malformed reports: one
//! descriptor is one rank, one node is one host whatever its spelling, a
//! report with duplicate members is refused whole, and a not-counted notice
//! never covers a rank the group counts. Each case starts from two genuine
//! live node reports (util::fleet::Fleet) that merge to an accepted group,
//! and edits one thing.

use crate::util::fleet::{merge_paths, refused, rejected_with, Fleet, Run};
use crate::util::*;
use serde_json::{json, Value};

fn merge_bytes(f: &Fleet, a: &[u8], b: &[u8], format: &str) -> Run {
    let pa = f.dir.path().join("attack-a.json");
    let pb = f.dir.path().join("attack-b.json");
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    merge_paths(&[pa, pb], format)
}

fn merge_edited(
    f: &Fleet,
    edit_a: impl FnOnce(&mut Value),
    edit_b: impl FnOnce(&mut Value),
) -> Run {
    let (mut a, mut b) = (f.node_report("a"), f.node_report("b"));
    edit_a(&mut a);
    edit_b(&mut b);
    merge_bytes(
        f,
        &serde_json::to_vec_pretty(&a).unwrap(),
        &serde_json::to_vec_pretty(&b).unwrap(),
        "json",
    )
}

#[test]
fn the_genuine_pair_merges_accepted() {
    let f = Fleet::new();
    let r = merge_edited(&f, |_| {}, |_| {});
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// Hostnames compare as DNS names: ASCII case and one trailing dot do not
/// make another node.
#[test]
fn one_host_spelled_two_ways_is_one_node() {
    let f = Fleet::new();
    for spelling in ["GPU-NODE-17.", "gpu-node-17.", "Gpu-Node-17"] {
        let r = merge_edited(&f, |_| {}, |b| b["host"] = json!(spelling));
        rejected_with(&r, "KV102");
    }
    // Bytes decide: a look-alike (Cyrillic е) is another name, so another
    // node, and the group of both is accepted.
    let r = merge_edited(&f, |_| {}, |b| b["host"] = json!("gpu-nod\u{435}-17"));
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
}

/// serde would take the last of two equal members; a reader that takes the
/// first would see another report. Refused whole, naming the member.
#[test]
fn a_report_with_a_duplicate_member_is_refused_whole() {
    let f = Fleet::new();
    let a = serde_json::to_string(&f.node_report("a")).unwrap();
    let b = serde_json::to_vec(&f.node_report("b")).unwrap();
    for (what, forged) in [
        ("host", a.replacen("{", "{\"host\":\"gpu-node-99\",", 1)),
        // An escaped spelling of the same key.
        (
            "host",
            a.replacen("{", "{\"ho\\u0073t\":\"gpu-node-99\",", 1),
        ),
        (
            "epoch",
            a.replacen("\"epoch\":", "\"epoch\":9,\"epoch\":", 1),
        ),
        (
            "verdict",
            a.replacen("\"verdict\":", "\"verdict\":\"reject\",\"verdict\":", 1),
        ),
    ] {
        assert_ne!(forged, a);
        let r = merge_bytes(&f, forged.as_bytes(), &b, "json");
        refused(&r, "attack-a.json", what);
        assert!(r.stderr.contains("duplicate"), "{}", r.stderr);
    }
}

/// Bytes that are not exactly one JSON report are refused whole, naming the
/// file: a byte-order mark, trailing garbage, NaN, 1e400, -0 and deep
/// nesting.
#[test]
fn malformed_json_is_refused_whole_naming_the_file() {
    let f = Fleet::new();
    let a = serde_json::to_string(&f.node_report("a")).unwrap();
    let b = serde_json::to_vec(&f.node_report("b")).unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    for forged in [
        format!("\u{feff}{a}"),
        format!("{a}garbage"),
        format!("{a}{a}"),
        a.replacen("\"epoch\":1", "\"epoch\":NaN", 1),
        a.replacen("\"epoch\":1", "\"epoch\":1e400", 1),
        a.replacen("\"epoch\":1", "\"epoch\":-0", 1),
        a.replacen("\"files\":[]", &format!("\"files\":{deep}"), 1),
    ] {
        assert_ne!(forged, a, "the case edits the report");
        let r = merge_bytes(&f, forged.as_bytes(), &b, "json");
        refused(&r, "attack-a.json", "attack-a.json");
    }
}

/// The fleet gate compares hosts by the same rule: two inputs from one host
/// spelled two ways are refused, and this node's input is found whatever
/// its spelling.
#[test]
fn the_fleet_gate_knows_one_host_spelled_two_ways() {
    let f = Fleet::new();
    let mut twice = f.fleet();
    let mut twin = twice["inputs"][0].clone();
    twin["host"] = json!(format!(
        "{}.",
        twin["host"].as_str().unwrap().to_uppercase()
    ));
    twin["report"] = json!("twin.json");
    twice["inputs"].as_array_mut().unwrap().push(twin);
    f.refused(Some(&twice), &[], "two inputs from host");
    let mut dotted = f.fleet();
    for i in dotted["inputs"].as_array_mut().unwrap() {
        let h = i["host"].as_str().unwrap().to_uppercase();
        i["host"] = json!(format!("{h}."));
    }
    let (code, v) = f.import(Some(&dotted), &[]);
    assert_eq!(code, 0, "{v:#}");
}
/// One descriptor file is one rank: a report listing one path for two rank
/// numbers (or a path naming another rank) counts a rank that was never
/// audited.
#[test]
fn a_rank_is_the_rank_its_file_name_names() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            let p = b["groups"][0]["ranks"][0]["path"].clone();
            b["groups"][0]["ranks"][1]["path"] = p;
        },
    );
    let v = rejected_with(&r, "KV101");
    assert!(
        has(&v, "KV101", "rank-2.json"),
        "the rank naming another's file: {v:#}"
    );
    let r = merge_edited(
        &f,
        |a| a["groups"][0]["ranks"][1]["path"] = json!("rank-7.json"),
        |_| {},
    );
    rejected_with(&r, "KV101");
}

/// The fleet gate asks the same question of a merged report's ranks.
#[test]
fn the_fleet_gate_refuses_a_rank_read_from_another_ranks_file() {
    let f = Fleet::new();
    let mut forged = f.fleet();
    let p = forged["groups"][0]["ranks"][0]["path"].clone();
    forged["groups"][0]["ranks"][1]["path"] = p;
    f.refused(Some(&forged), &[], "a file not named rank-1.json");
}
/// A not-counted notice is about a descriptor outside the current
/// incarnation: one naming a rank the group counts is a contradiction, and
/// the group is rejected.
#[test]
fn a_not_counted_notice_never_covers_a_counted_rank() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        |a| {
            let p = a["groups"][0]["ranks"][0]["path"].clone();
            a["groups"][0]["findings"] = json!([{
                "code": "KV106", "name": "gpu", "severity": "notice",
                "message": "superseded; not counted", "path": p, "counted": false,
            }]);
        },
        |_| {},
    );
    rejected_with(&r, "KV106");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A rank created after its own report was written (beyond the clock
/// slack) is dated in the future: the audit's rule (§5.4) holds in merge.
#[test]
fn a_rank_created_after_its_report_was_written_is_future_dated() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            let t = b["generated_unix_ms"].as_u64().unwrap() + 86_400_000;
            b["groups"][0]["ranks"][0]["created_unix_ms"] = json!(t);
        },
    );
    let v = rejected_with(&r, "KV108");
    assert!(has(&v, "KV108", "rank-2.json"), "{v:#}");
    // Ahead of the merge's clock too, with the report dated to match.
    let r = merge_edited(
        &f,
        |_| {},
        |b| b["groups"][0]["ranks"][1]["created_unix_ms"] = json!(now_ms() + 86_400_000),
    );
    rejected_with(&r, "KV108");
}

/// One GPU is its 16 UUID bytes, whatever its prefix (GPU-/MIG-).
#[test]
fn one_gpu_spelled_two_ways_on_two_nodes_is_one_gpu() {
    let f = Fleet::new();
    let a = f.node_report("a");
    let gpu = a["groups"][0]["ranks"][0]["gpu_uuid"]
        .as_str()
        .unwrap()
        .to_string();
    // Uppercase is no descriptor's spelling (§3): refused whole.
    let r = merge_edited(
        &f,
        |_| {},
        |b| b["groups"][0]["ranks"][0]["gpu_uuid"] = json!(gpu.to_uppercase()),
    );
    refused(&r, "attack-b.json", "groups[0].ranks[0].gpu_uuid");
    // A MIG- spelling of the same 16 bytes is the same device.
    let r = merge_edited(
        &f,
        |_| {},
        |b| b["groups"][0]["ranks"][0]["gpu_uuid"] = json!(gpu.replacen("GPU-", "MIG-", 1)),
    );
    rejected_with(&r, "KV106");
}

/// An input that claims to be live but names no boot id cannot be matched
/// to a boot: the merged report does not call all its inputs live.
#[test]
fn a_live_claim_without_a_boot_id_is_not_live() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            b.as_object_mut().unwrap().remove("boot_id");
        },
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["all_inputs_live"], false, "{v:#}");
    f.refused(Some(&v), &[], "not built only from live reports");
}

/// Every string a report carries, with every dangerous character class,
/// reaches no output raw: table, JSON and prometheus.
#[test]
fn dangerous_characters_in_any_report_string_never_reach_any_output() {
    let f = Fleet::new();
    let evil = "x\u{1b}[31m\u{7}\r\n\u{8}\u{202e}\u{2066}\u{2028}\u{2029}\u{9b}\u{feff}\u{200b}y";
    let edit = |v: &mut Value| {
        v["node_facts_source"] = json!(evil);
        v["options"]["engine"] = json!(evil);
        v["options"]["local_ranks"] = json!(evil);
        v["options"]["incarnation"] = json!(evil);
        let g = &mut v["groups"][0];
        if g["model"].is_object() {
            for (_, m) in g["model"].as_object_mut().unwrap() {
                if m.is_string() {
                    *m = json!(format!("m{evil}"));
                }
            }
        }
        g["findings"] = json!([{"code": evil, "name": evil, "severity": "reject",
            "message": evil, "path": evil, "expected": evil, "found": evil}]);
        for r in g["ranks"].as_array_mut().unwrap() {
            r["not_checked"] = json!([evil]);
        }
    };
    for format in ["table", "json", "prometheus"] {
        let (mut a, b) = (f.node_report("a"), f.node_report("b"));
        edit(&mut a);
        let pa = f.dir.path().join("evil\u{1b}]0;t\u{7}\u{202e}.json");
        let pb = f.dir.path().join("plain-b.json");
        std::fs::write(&pa, serde_json::to_vec(&a).unwrap()).unwrap();
        std::fs::write(&pb, serde_json::to_vec(&b).unwrap()).unwrap();
        let r = merge_paths(&[pa, pb], format);
        assert!(
            r.code == 1 || r.code == 2,
            "{format}: {}\n{}",
            r.stdout,
            r.stderr
        );
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            let bad: Vec<char> = text
                .chars()
                .filter(|&c| {
                    (c.is_control() && c != '\n')
                        || matches!(
                            c,
                            '\u{202e}'
                                | '\u{2066}'
                                | '\u{2028}'
                                | '\u{2029}'
                                | '\u{feff}'
                                | '\u{200b}'
                        )
                })
                .collect();
            assert!(bad.is_empty(), "{format} {what} carries {bad:?}:\n{text}");
        }
    }
}

/// The fleet gate asks the same of a merged report's ranks.
#[test]
fn the_fleet_gate_refuses_a_rank_created_after_the_report() {
    let f = Fleet::new();
    let mut forged = f.fleet();
    let t = forged["generated_unix_ms"].as_u64().unwrap() + 86_400_000;
    forged["groups"][0]["ranks"][1]["created_unix_ms"] = json!(t);
    f.refused(Some(&forged), &[], "after the report was written");
}

/// The import gate reads a fleet report through the same strict layer as
/// merge: duplicate members and bytes that are not exactly one report are
/// refused, never imported.
#[test]
fn the_fleet_gate_refuses_what_merge_refuses_to_read() {
    let f = Fleet::new();
    let genuine = serde_json::to_string(&f.fleet()).unwrap();
    let import = |bytes: &str| {
        let p = f.dir.path().join("raw-fleet.json");
        std::fs::write(&p, bytes).unwrap();
        let out = kvcr()
            .arg("import")
            .arg(f.dir.path().join("a"))
            .args(["--local-ranks", "0-1", "--format", "json"])
            .arg("--fleet-report")
            .arg(&p)
            .env("KVCR_NODE_FACTS", f.dir.path().join("facts-a.json"))
            .env("KVCR_PROFILE", f.dir.path().join("profile.json"))
            .env("KVCR_IMPORT_BACKEND", "sim")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = import(&genuine);
    assert_eq!(code, 0, "set-up: the genuine fleet report imports: {out}");
    for forged in [
        genuine.replacen("{", "{\"generated_unix_ms\":1,", 1),
        genuine.replacen("\"verdict\":", "\"verdict\":\"reject\",\"verdict\":", 1),
        format!("\u{feff}{genuine}"),
        format!("{genuine}{{}}"),
        genuine.replacen("\"epoch\":1", "\"epoch\":-0", 1),
    ] {
        assert_ne!(forged, genuine);
        let (code, out) = import(&forged);
        assert_ne!(code, 0, "imported a malformed fleet report: {out}");
        assert!(!out.contains("\"imported\""), "{out}");
        assert!(out.contains("raw-fleet.json"), "names the file: {out}");
    }
}

/// A group split across reports whose shapes or lifetimes differ is not one
/// group, even when the union of their ranks covers 0..world_size-1: each
/// report edited consistently (group and ranks) still disagrees with the
/// other.
#[test]
fn a_union_of_ranks_from_another_shape_or_lifetime_is_rejected() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            b["groups"][0]["world_size"] = json!(8);
            b["groups"][0]["tp"] = json!(8);
        },
    );
    rejected_with(&r, "KV104");
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            let inc = crate::util::testkit::INCARNATION_B;
            b["groups"][0]["incarnation"] = json!(inc);
            for r in b["groups"][0]["ranks"].as_array_mut().unwrap() {
                r["incarnation"] = json!(inc);
            }
        },
    );
    rejected_with(&r, "KV107");
    let r = merge_edited(
        &f,
        |_| {},
        |b| {
            b["groups"][0]["epoch"] = json!(2);
            for r in b["groups"][0]["ranks"].as_array_mut().unwrap() {
                r["epoch"] = json!(2);
            }
        },
    );
    rejected_with(&r, "KV107");
}

/// A rank of an accepted fleet group carries no finding at all: a forged
/// notice on a rank, or a not-counted one, does not pass the gate.
#[test]
fn the_fleet_gate_refuses_a_rank_with_any_finding() {
    let f = Fleet::new();
    for (severity, counted) in [("notice", false), ("notice", true), ("reject", true)] {
        f.must_refuse("a finding on a rank", |v| {
            v["groups"][0]["ranks"][0]["findings"] = json!([{"code": "KV010", "name": "stray",
                "severity": severity, "message": "m", "path": "rank-0.json", "counted": counted}]);
        });
    }
}

/// Merge and the fleet gate judge a group-level notice by one rule
/// (rules::fleet::judged): only a known code, spelled as kvcr spells it,
/// may be a notice. The gate read only the severity, the path and
/// `counted`, so a fleet report whose accepted group carried a notice of
/// an unknown code ("KV999", or "kv108") imported, where merge rejects the
/// same notice in a node report as KV007.
#[test]
fn merge_and_the_fleet_gate_judge_a_notice_of_an_unknown_code_alike() {
    let f = Fleet::new();
    for code in ["KV999", "kv108"] {
        let notice = json!([{"code": code, "name": "stale", "severity": "notice",
            "message": "superseded; not counted", "path": "old/rank-0.json", "counted": false}]);
        let r = merge_edited(&f, |a| a["groups"][0]["findings"] = notice.clone(), |_| {});
        rejected_with(&r, "KV007");
        f.must_refuse(&format!("a notice of code {code}"), |v| {
            v["groups"][0]["findings"] = notice.clone();
        });
        let mut forged = f.fleet();
        forged["groups"][0]["findings"] = notice.clone();
        f.refused(Some(&forged), &[], &format!("carries finding {code}"));
    }
    // A known code stays a notice for both.
    let notice = json!([{"code": "KV108", "name": "stale", "severity": "notice",
        "message": "superseded; not counted", "path": "old/rank-0.json", "counted": false}]);
    let r = merge_edited(&f, |a| a["groups"][0]["findings"] = notice.clone(), |_| {});
    assert_eq!(r.code, 0, "{}", r.stdout);
    let mut fleet = f.fleet();
    fleet["groups"][0]["findings"] = notice;
    assert_eq!(f.import(Some(&fleet), &[]).0, 0);
}

/// A rank is dated against its own report (docs/format.md §10.3), by merge
/// and the fleet gate alike (rules::fleet::judge_ranks). The gate compared
/// a merged rank's `created_unix_ms` with the merged report's own time, so
/// a rank created after its node's report was written (which merge rejects
/// as KV108) passed when the merge was written later still.
#[test]
fn the_fleet_gate_dates_a_rank_by_its_own_input_as_merge_does() {
    let f = Fleet::new();
    let now = now_ms();
    // Node a's report written 250 s ago, its rank 0 created 100 s from now:
    // 350 s after its report, beyond the 300 s slack; the merged report
    // dated 200 s from now (within the slack of the gate's clock).
    let forge = |v: &mut Value| {
        v["inputs"][0]["generated_unix_ms"] = json!(now - 250_000);
        v["groups"][0]["ranks"][0]["created_unix_ms"] = json!(now + 100_000);
        v["generated_unix_ms"] = json!(now + 200_000);
    };
    let mut forged = f.fleet();
    forge(&mut forged);
    f.refused(Some(&forged), &[], "after the report was written");
    // Merge rejects the same rank in node a's report.
    let r = merge_edited(
        &f,
        |a| {
            a["generated_unix_ms"] = json!(now - 250_000);
            a["groups"][0]["ranks"][0]["created_unix_ms"] = json!(now + 100_000);
        },
        |_| {},
    );
    rejected_with(&r, "KV108");
    // Within the slack of its input, the same rank imports.
    let mut fleet = f.fleet();
    forge(&mut fleet);
    fleet["inputs"][0]["generated_unix_ms"] = json!(now - 150_000);
    assert_eq!(f.import(Some(&fleet), &[]).0, 0, "{fleet:#}");
}
