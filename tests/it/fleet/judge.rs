//! `kvcr merge` is a judge, not a reader (issue #19, docs/format.md §10):
//! reports are read through the typed wire layer, strictly, every field a
//! descriptor has obeys the descriptor's rule, each rank is judged by its
//! own data, future-dated inputs are findings, and every string a report
//! carries is escaped on every output. Each case starts from two genuine
//! live node reports (util::fleet::Fleet) that merge to an accepted group,
//! and edits one thing.

use crate::util::fleet::{merge_paths, refused, rejected_with, Fleet, Run};
use crate::util::testkit::INCARNATION_B;
use serde_json::{json, Value};
use std::path::PathBuf;

/// One edit of a report, and the field its error must name.
type Edit = Box<dyn Fn(&mut Value)>;

fn write(f: &Fleet, name: &str, v: &Value) -> PathBuf {
    let p = f.dir.path().join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

/// Merges node a's report (edited by `edit_a`) with node b's (edited by
/// `edit_b`).
fn merge_edited(
    f: &Fleet,
    format: &str,
    edit_a: impl FnOnce(&mut Value),
    edit_b: impl FnOnce(&mut Value),
) -> Run {
    let (mut a, mut b) = (f.node_report("a"), f.node_report("b"));
    edit_a(&mut a);
    edit_b(&mut b);
    let pa = write(f, "edited-a.json", &a);
    let pb = write(f, "edited-b.json", &b);
    merge_paths(&[pa, pb], format)
}

#[test]
fn genuine_reports_merge_accepted() {
    let f = Fleet::new();
    let r = merge_edited(&f, "json", |_| {}, |_| {});
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert_eq!(r.json()["groups"][0]["verdict"], "accept");
}

#[test]
fn group_fields_edited_to_agree_do_not_hide_the_ranks_lifetime() {
    let f = Fleet::new();
    // Node b's ranks carry another incarnation and epoch; its group fields
    // were edited to agree with node a's.
    let r = merge_edited(
        &f,
        "json",
        |_| {},
        |b| {
            for r in b["groups"][0]["ranks"].as_array_mut().unwrap() {
                r["incarnation"] = json!(INCARNATION_B);
                r["epoch"] = json!(7);
            }
        },
    );
    let v = rejected_with(&r, "KV107");
    let ranks = v["groups"][0]["ranks"].as_array().unwrap();
    for r in ranks
        .iter()
        .filter(|r| r["report"].as_str().unwrap().contains("edited-b"))
    {
        assert_eq!(r["verdict"], "reject", "{r:#}");
        assert_eq!(
            r["incarnation"], INCARNATION_B,
            "shows the rank's own: {r:#}"
        );
    }
    // And the table says so too.
    let t = merge_edited(
        &f,
        "table",
        |_| {},
        |b| {
            for r in b["groups"][0]["ranks"].as_array_mut().unwrap() {
                r["incarnation"] = json!(INCARNATION_B);
            }
        },
    );
    assert_eq!(t.code, 1, "{}", t.stdout);
    assert!(t.stdout.contains("KV107"), "{}", t.stdout);
}

#[test]
fn one_rank_whose_epoch_differs_from_its_group_is_rejected() {
    let f = Fleet::new();
    let r = merge_edited(
        &f,
        "json",
        |a| a["groups"][0]["ranks"][1]["epoch"] = json!(2),
        |_| {},
    );
    let v = rejected_with(&r, "KV107");
    let bad: Vec<&Value> = v["groups"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "reject")
        .collect();
    assert_eq!(bad.len(), 1, "{v:#}");
    assert_eq!(bad[0]["rank"], 1);
    assert_eq!(bad[0]["epoch"], 2);
}

#[test]
fn a_rank_without_its_own_lifetime_is_rejected() {
    for field in ["incarnation", "epoch"] {
        let f = Fleet::new();
        let r = merge_edited(
            &f,
            "json",
            |a| a["groups"][0]["ranks"][0][field] = Value::Null,
            |_| {},
        );
        rejected_with(&r, "KV107");
    }
}

#[test]
fn group_fields_that_disagree_with_every_rank_are_rejected() {
    // Both nodes' group fields edited alike: the ranks still say otherwise.
    let f = Fleet::new();
    let edit = |v: &mut Value| {
        v["groups"][0]["incarnation"] = json!(INCARNATION_B);
        v["groups"][0]["epoch"] = json!(9);
    };
    let r = merge_edited(&f, "json", edit, edit);
    let v = rejected_with(&r, "KV107");
    assert!(v["groups"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["verdict"] == "reject"));
}

/// Every descriptor rule applies to the same field read from a report.
#[test]
fn report_fields_obey_the_descriptor_rules() {
    let f = Fleet::new();
    let long = "e".repeat(200);
    let cases: Vec<(&str, Edit)> = vec![
        (
            "groups[0].engine_id",
            Box::new(|v| v["groups"][0]["engine_id"] = json!("")),
        ),
        (
            "groups[0].engine_id",
            Box::new(|v| v["groups"][0]["engine_id"] = json!("llama 3")),
        ),
        (
            "groups[0].engine_id",
            Box::new(move |v| v["groups"][0]["engine_id"] = json!(long.clone())),
        ),
        (
            "groups[0].engine_id",
            Box::new(|v| v["groups"][0]["engine_id"] = json!("llama\u{1b}[2J")),
        ),
        (
            "groups[0].engine_id",
            Box::new(|v| v["groups"][0]["engine_id"] = json!("llama3-70b-a\u{202e}")),
        ),
        (
            "groups[0].incarnation",
            Box::new(|v| {
                v["groups"][0]["incarnation"] = json!("00000000-0000-0000-0000-000000000000")
            }),
        ),
        (
            "groups[0].ranks[0].incarnation",
            Box::new(|v| {
                v["groups"][0]["ranks"][0]["incarnation"] =
                    json!("00000000-0000-0000-0000-000000000000")
            }),
        ),
        (
            "groups[0].incarnation",
            Box::new(|v| {
                v["groups"][0]["incarnation"] = json!("3F2B8C1E-7D4A-4B6E-9C2F-1A5D8E7B4C90")
            }),
        ),
        (
            "groups[0].incarnation",
            Box::new(|v| {
                v["groups"][0]["incarnation"] = json!("{3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90}")
            }),
        ),
        (
            "groups[0].ranks[1].incarnation",
            Box::new(|v| {
                v["groups"][0]["ranks"][1]["incarnation"] =
                    json!("urn:uuid:3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90")
            }),
        ),
        (
            "boot_id",
            Box::new(|v| v["boot_id"] = json!("6C1D0E52-3A1F-4D5E-9B7A-2F4C8E1D9A30")),
        ),
        (
            "groups[0].epoch",
            Box::new(|v| v["groups"][0]["epoch"] = json!(0)),
        ),
        (
            "groups[0].epoch",
            Box::new(|v| v["groups"][0]["epoch"] = json!(9223372036854775808u64)),
        ),
        (
            "groups[0].ranks[0].epoch",
            Box::new(|v| v["groups"][0]["ranks"][0]["epoch"] = json!(0)),
        ),
        (
            "groups[0].world_size",
            Box::new(|v| v["groups"][0]["world_size"] = json!(0)),
        ),
        (
            "groups[0].world_size",
            Box::new(|v| v["groups"][0]["world_size"] = json!(5000)),
        ),
        (
            "groups[0].tp",
            Box::new(|v| v["groups"][0]["tp"] = json!(0)),
        ),
        (
            "groups[0].geometry",
            Box::new(|v| {
                let g = &mut v["groups"][0]["geometry"];
                g["num_layers"] = json!(4294967296u64);
                g["kv_heads_per_rank"] = json!(4294967296u64);
                g["num_blocks"] = json!(9223372036854775807u64);
            }),
        ),
        (
            "groups[0].geometry.head_size",
            Box::new(|v| v["groups"][0]["geometry"]["head_size"] = json!(0)),
        ),
        (
            "groups[0].geometry.num_blocks",
            Box::new(|v| v["groups"][0]["geometry"]["num_blocks"] = json!(0)),
        ),
        (
            "groups[0].model.name",
            Box::new(|v| v["groups"][0]["model"]["name"] = json!("")),
        ),
        (
            "groups[0].model.revision",
            Box::new(|v| v["groups"][0]["model"]["revision"] = json!("r".repeat(65))),
        ),
        (
            "groups[0].ranks[0].gpu_uuid",
            Box::new(|v| {
                v["groups"][0]["ranks"][0]["gpu_uuid"] =
                    json!("GPU-00000000-0000-0000-0000-000000000000")
            }),
        ),
        (
            "groups[0].ranks[0].gpu_uuid",
            Box::new(|v| {
                v["groups"][0]["ranks"][0]["gpu_uuid"] =
                    json!("gpu-6a1f0c2e-0000-4000-8000-000000000000")
            }),
        ),
        (
            "groups[0].ranks[0].owner_pid",
            Box::new(|v| v["groups"][0]["ranks"][0]["owner_pid"] = json!(0)),
        ),
        (
            "groups[0].local_ranks",
            Box::new(|v| v["groups"][0]["local_ranks"] = json!("0-x")),
        ),
        ("host", Box::new(|v| v["host"] = json!("h".repeat(254)))),
    ];
    for (field, edit) in cases {
        let r = merge_edited(&f, "json", |a| edit(a), |_| {});
        refused(&r, "edited-a.json", field);
        // Escaped: the error never carries a raw control character.
        assert!(
            !r.stderr.contains('\u{1b}') && !r.stderr.contains('\u{202e}'),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn tp_times_pp_not_world_size_rejects() {
    // A rule between fields (KV101), as in the audit: a finding, not a
    // schema error. Both nodes say tp 3: they agree, and are still wrong.
    let f = Fleet::new();
    let edit = |v: &mut Value| v["groups"][0]["tp"] = json!(3);
    let r = merge_edited(&f, "json", edit, edit);
    rejected_with(&r, "KV101");
}

#[test]
fn unknown_members_wrong_types_and_huge_numbers_are_errors_naming_the_field() {
    let f = Fleet::new();
    let cases: Vec<(&str, Edit)> = vec![
        ("surprise", Box::new(|v| v["surprise"] = json!(1))),
        (
            "groups[0]",
            Box::new(|v| v["groups"][0]["trusted"] = json!(true)),
        ),
        (
            "groups[0].ranks[0]",
            Box::new(|v| v["groups"][0]["ranks"][0]["ok"] = json!(true)),
        ),
        ("options", Box::new(|v| v["options"]["force"] = json!(true))),
        (
            "groups[0].geometry",
            Box::new(|v| v["groups"][0]["geometry"]["extra"] = json!(1)),
        ),
        (
            "groups[0].epoch",
            Box::new(|v| v["groups"][0]["epoch"] = json!("1")),
        ),
        (
            "groups[0].epoch",
            Box::new(|v| v["groups"][0]["epoch"] = json!(1.0)),
        ),
        (
            "groups[0].epoch",
            Box::new(|v| v["groups"][0]["epoch"] = json!(-1)),
        ),
        (
            "groups[0].ranks[0].rank",
            Box::new(|v| v["groups"][0]["ranks"][0]["rank"] = json!(0.5)),
        ),
        (
            "groups[0].ranks[0].rank",
            Box::new(|v| {
                v["groups"][0]["ranks"][0]["rank"] =
                    serde_json::from_str("18446744073709551616").unwrap()
            }),
        ),
        ("live", Box::new(|v| v["live"] = json!("true"))),
        (
            "groups[0].verdict",
            Box::new(|v| v["groups"][0]["verdict"] = json!("ACCEPT")),
        ),
        (
            "groups[0].ranks[0].findings",
            Box::new(|v| v["groups"][0]["ranks"][0]["findings"] = json!({})),
        ),
        ("groups", Box::new(|v| v["groups"] = json!(null))),
        (
            "generated_unix_ms",
            Box::new(|v| {
                v.as_object_mut()
                    .unwrap()
                    .remove("generated_unix_ms")
                    .map(drop)
                    .unwrap_or(())
            }),
        ),
        (
            "groups[0].geometry.dtype",
            Box::new(|v| v["groups"][0]["geometry"]["dtype"] = json!("float64")),
        ),
        (
            "files",
            Box::new(|v| v["files"] = json!([{"path": "x", "findings": [], "more": [[[[[]]]]]}])),
        ),
    ];
    for (field, edit) in cases {
        let r = merge_edited(&f, "json", |a| edit(a), |_| {});
        refused(&r, "edited-a.json", field);
    }
}

#[test]
fn nested_garbage_is_an_error_not_a_crash() {
    let f = Fleet::new();
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let text = f.node_report("a").to_string();
    let text = text.replacen("\"files\":[]", &format!("\"files\":{deep}"), 1);
    let p = f.dir.path().join("deep.json");
    std::fs::write(&p, text).unwrap();
    let r = merge_paths(&[p], "json");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("deep.json"), "{}", r.stderr);
}

#[test]
fn a_merged_report_fed_back_is_a_clear_error() {
    let f = Fleet::new();
    let p = f.dir.path().join("fleet.json");
    let a = write(&f, "node-a-again.json", &f.node_report("a"));
    let r = merge_paths(&[p, a], "json");
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stderr.contains("fleet.json") && r.stderr.contains("merged report"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("KV110"), "{}", r.stderr);
}

#[test]
fn a_directory_of_reports_merges_like_its_files() {
    let f = Fleet::new();
    let d = f.dir.path().join("reports");
    std::fs::create_dir(&d).unwrap();
    for n in ["a", "b"] {
        std::fs::copy(
            f.dir.path().join(format!("node-{n}.json")),
            d.join(format!("node-{n}.json")),
        )
        .unwrap();
    }
    std::fs::write(d.join("README.txt"), "not a report").unwrap();
    let r = merge_paths(std::slice::from_ref(&d), "json");
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["reports"].as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "accept");
    // An empty directory is a usage error naming it.
    let e = f.dir.path().join("empty");
    std::fs::create_dir(&e).unwrap();
    let r = merge_paths(&[e], "json");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("empty"), "{}", r.stderr);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_future_dated_input_is_a_finding_not_a_fresh_report() {
    let f = Fleet::new();
    let ahead = now_ms() + 3_600_000;
    let r = merge_edited(
        &f,
        "json",
        |a| a["generated_unix_ms"] = json!(ahead),
        |_| {},
    );
    let v = rejected_with(&r, "KV108");
    assert_eq!(v["oldest_input_age_ms"], Value::Null, "age unproven: {v:#}");
    assert!(
        v["groups"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["code"] == "KV108"
                && x["message"].as_str().unwrap().contains("edited-a.json")),
        "{v:#}"
    );
    // The gate refuses it too.
    let fleet = r.json();
    f.refused(Some(&fleet), &[], "rejects group");
}

#[test]
fn an_input_ahead_within_the_slack_dates_the_merge_no_earlier() {
    let f = Fleet::new();
    let ahead = now_ms() + 120_000;
    let r = merge_edited(
        &f,
        "json",
        |a| a["generated_unix_ms"] = json!(ahead),
        |_| {},
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let v = r.json();
    assert!(v["generated_unix_ms"].as_u64().unwrap() >= ahead, "{v:#}");
    assert!(v["oldest_input_age_ms"].as_u64().is_some());
}

/// Characters a terminal or a scraper would act on, in every string member
/// a report carries that is free text (engine_id, UUIDs and numbers are
/// refused above): no output format prints one raw.
#[test]
fn control_and_bidi_characters_in_report_strings_never_reach_any_output() {
    let f = Fleet::new();
    let evil = "x\u{1b}]0;owned\u{7}\r\u{202e}\u{2028}\u{9b}y";
    let edit = |v: &mut Value| {
        v["host"] = json!(format!("gpu-node-17{evil}"));
        v["root"] = json!(format!("/inv{evil}"));
        v["kvcr_version"] = json!(evil);
        v["options"]["profile"] = json!(evil);
        let g = &mut v["groups"][0];
        g["cause"] = json!(evil);
        g["action"] = json!(evil);
        g["findings"] = json!([{"code": "KV108", "name": "stale", "severity": "notice",
            "message": evil, "path": evil, "expected": evil, "found": evil, "counted": false}]);
        for r in g["ranks"].as_array_mut().unwrap() {
            r["path"] = json!(format!("rank{evil}.json"));
            r["not_checked"] = json!([evil]);
            r["findings"] =
                json!([{"code": "KV999", "name": evil, "severity": "notice", "message": evil}]);
        }
        v["files"] = json!([{"path": evil, "findings": [{
            "code": "KV010", "name": "stray", "severity": "notice", "message": evil, "path": evil,
        }]}]);
    };
    for format in ["table", "json", "prometheus"] {
        let r = merge_edited(&f, format, edit, |_| {});
        assert_eq!(r.code, 1, "{format}: {}\n{}", r.stdout, r.stderr);
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            let bad: Vec<char> = text
                .chars()
                .filter(|&c| (c.is_control() && c != '\n') || matches!(c, '\u{202e}' | '\u{2028}'))
                .collect();
            assert!(bad.is_empty(), "{format} {what} carries {bad:?}:\n{text}");
        }
    }
}

/// The gate and merge read one layer: what merge refuses to read, the gate
/// refuses too, and a fleet report whose rank drifted from its group is
/// refused by both.
#[test]
fn gate_and_merge_agree_on_the_same_inputs() {
    let f = Fleet::new();
    let base = f.fleet();
    // Read strictly by both.
    let mut unknown = base.clone();
    unknown["groups"][0]["ranks"][0]["trusted"] = json!(true);
    f.refused(Some(&unknown), &[], "groups[0].ranks[0]");
    let mut nil = base.clone();
    nil["groups"][0]["incarnation"] = json!("00000000-0000-0000-0000-000000000000");
    f.refused(Some(&nil), &[], "groups[0].incarnation");
    // A rank's own epoch differs from its group's.
    f.must_refuse("a rank's epoch drifts", |v| {
        v["groups"][0]["ranks"][0]["epoch"] = json!(2)
    });
    let r = merge_edited(
        &f,
        "json",
        |a| a["groups"][0]["ranks"][0]["epoch"] = json!(2),
        |_| {},
    );
    rejected_with(&r, "KV107");
    // A stale-notice marked counted on a group is a rejection for both.
    f.must_refuse("a counted notice", |v| {
        v["groups"][0]["findings"] = json!([{"code": "KV108", "name": "stale", "severity": "notice",
            "message": "m", "path": "rank-9.json"}]);
    });
    let r = merge_edited(
        &f,
        "json",
        |a| {
            a["groups"][0]["findings"] = json!([{
                "code": "KV108", "name": "stale", "severity": "notice",
                "message": "m", "path": "rank-9.json",
            }]);
        },
        |_| {},
    );
    rejected_with(&r, "KV108");
    // Marked not counted, it stays a notice for both.
    let notice = json!([{"code": "KV108", "name": "stale", "severity": "notice",
        "message": "superseded; not counted", "path": "rank-9.json", "counted": false}]);
    let r = merge_edited(
        &f,
        "json",
        |a| a["groups"][0]["findings"] = notice.clone(),
        |_| {},
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let (code, v) = f.import(Some(&r.json()), &[]);
    assert_eq!(code, 0, "{v:#}");
}

/// Advice after a merge (issue #21 item 3): never an import the gate would
/// refuse; name the node to audit again, live, and the command to run there.
#[test]
fn merge_advice_never_suggests_an_import_the_gate_refuses() {
    let f = Fleet::new();
    // Genuine, all live: the advice is the import, node by node.
    let v = f.fleet();
    let action = v["groups"][0]["action"].as_str().unwrap();
    assert!(action.contains("on gpu-node-17: kvcr import"), "{action}");
    assert!(action.contains("on gpu-node-18: kvcr import"), "{action}");
    // Node b's report offline: accepted, but the gate refuses it, so the
    // advice is to audit node b again with --live, on node b.
    let r = merge_edited(
        &f,
        "json",
        |_| {},
        |b| {
            b["live"] = json!(false);
            b.as_object_mut().unwrap().remove("boot_id");
            b["node_facts_source"] = Value::Null;
        },
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let merged = r.json();
    let action = merged["groups"][0]["action"].as_str().unwrap();
    assert!(!action.contains("kvcr import"), "{action}");
    assert!(
        action.contains("on gpu-node-18 (report") && action.contains("kvcr audit --live"),
        "{action}"
    );
    assert!(action.contains("--local-ranks 2-3"), "{action}");
    assert!(
        !action.contains("gpu-node-17"),
        "node a needs nothing: {action}"
    );
    f.refused(Some(&merged), &[], "not built only from live reports");
    // A rank with a fact not checked: audit that node again with --strict.
    let r = merge_edited(
        &f,
        "json",
        |a| a["groups"][0]["ranks"][0]["not_checked"] = json!(["owner: cannot read /proc"]),
        |_| {},
    );
    assert_eq!(r.code, 0, "{}", r.stdout);
    let merged = r.json();
    let action = merged["groups"][0]["action"].as_str().unwrap();
    assert!(!action.contains("kvcr import"), "{action}");
    assert!(
        action.contains("on gpu-node-17") && action.contains("--strict"),
        "{action}"
    );
    f.refused(Some(&merged), &[], "facts not checked");
}
