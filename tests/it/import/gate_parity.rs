//! One order of answers (docs/format.md §13.3, §8.9): on every shipped
//! fixture, the library's readiness gate (`kvcr_audit::api::gate`) gives the
//! answer `kvcr import --dry-run --format json` gives: the same plan when
//! the group is accepted, the same usage error, or the same first refusal
//! (with the same audit and rejecting files) when it is refused.
//!
//! Each fixture is asked with its own profile (none for most: a usage error
//! first), then with a complete profile for each of its groups, a profile
//! that requires content, and a local part without a fleet report, on the
//! node `fixtures/live/node-match.json` describes and on one whose facts
//! cannot be read (`node-unknown.json`).
//!
//! The library reads no environment (its facts file is the `node_facts`
//! option), so it is called in this process; the command is run as a child.

use crate::util::testkit::without_clock;
use crate::util::{fixtures_live, kvcr, repo};
use kvcr_audit::api::{self, Error, GateOptions, Profile};
use kvcr_audit::rankset::RankSet;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the library's gate adds to a refusal whose GPUs were not checked
/// (src/import/gate/readiness.rs).
const GPUS_HINT: &str = "; the GPUs could not be listed in this process (no GPU driver answered): \
    give this node's facts, the GPUs the engine sees included, as a facts file with the \
    node_facts option (node_facts=FILE; the format is in docs/live.md)";

/// One question, asked of both.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    root: PathBuf,
    profile: Option<PathBuf>,
    engine: Option<String>,
    local_ranks: Option<String>,
}

/// Every descriptor-looking JSON file below `dir`, by path.
fn descriptors(dir: &Path, out: &mut BTreeMap<PathBuf, Value>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            descriptors(&p, out);
        } else if meta.is_file() {
            if let Some(v) = std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|v| v["engine_id"].is_string() && v["world_size"].is_u64())
            {
                out.insert(p, v);
            }
        }
    }
}

/// A profile declaring everything import needs, from the first descriptor
/// of `engine` (its GPUs by rank from the descriptors that name them).
fn profile_of(files: &BTreeMap<PathBuf, Value>, engine: &str, require_content: bool) -> Value {
    let mine: Vec<&Value> = files
        .values()
        .filter(|v| v["engine_id"] == engine)
        .collect();
    let first = mine[0];
    let ws = first["world_size"].as_u64().unwrap();
    let gpus: Vec<Value> = (0..ws)
        .map(|r| {
            mine.iter()
                .find(|v| v["rank"] == r && v["gpu_uuid"].is_string())
                .map(|v| v["gpu_uuid"].clone())
                .unwrap_or_else(|| json!(format!("GPU-00000000-0000-4000-8000-{r:012}")))
        })
        .collect();
    json!({
        "schema": "kvcr.profile/v1",
        "engine_id": engine,
        "world_size": ws,
        "tp": first["tp"], "pp": first["pp"],
        "model": first["model"], "geometry": first["geometry"],
        "gpus": gpus,
        "require_content": require_content,
    })
}

/// `from` copied to `to` as an owner writes an inventory (directories
/// 0700, files 0600; symlinks stay symlinks to the same target).
fn private_copy(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type().unwrap();
        if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if t.is_dir() {
            private_copy(&src, &dst);
        } else if t.is_file() {
            std::fs::copy(&src, &dst).unwrap();
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// The cases for every fixture, as checked out (`private` false) or in a
/// private copy; profiles and copies are written under `tmp`.
fn cases(tmp: &Path, private: bool) -> Vec<Case> {
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("inventory").is_dir())
        .collect();
    dirs.sort();
    let tag = if private { "private" } else { "checkout" };
    let tmp = tmp.join(tag);
    std::fs::create_dir(&tmp).unwrap();
    for dir in dirs {
        let fixture = dir.file_name().unwrap().to_string_lossy().to_string();
        let mut root = dir.join("inventory");
        if private {
            let copy = tmp.join(format!("{fixture}-inventory"));
            private_copy(&root, &copy);
            root = copy;
        }
        let fixture = format!("{fixture} ({tag})");
        let own = dir.join("profile.json");
        out.push(Case {
            name: format!("{fixture} (its own profile, if any)"),
            root: root.clone(),
            profile: own.is_file().then_some(own),
            engine: None,
            local_ranks: None,
        });
        let mut files = BTreeMap::new();
        descriptors(&root, &mut files);
        let mut engines: Vec<String> = files
            .values()
            .filter_map(|v| v["engine_id"].as_str().map(str::to_string))
            .collect();
        engines.sort();
        engines.dedup();
        let several = engines.len() > 1;
        for e in &engines {
            for (what, require_content, local) in [
                ("complete", false, None),
                ("require_content", true, None),
                ("local part 0", false, Some("0")),
            ] {
                let name = format!("{fixture} {e:?} {what}");
                let p = tmp.join(format!("{}.json", out.len()));
                let text = serde_json::to_vec_pretty(&profile_of(&files, e, require_content));
                std::fs::write(&p, text.unwrap()).unwrap();
                out.push(Case {
                    name,
                    root: root.clone(),
                    profile: Some(p),
                    engine: several.then(|| e.clone()),
                    local_ranks: local.map(str::to_string),
                });
            }
        }
    }
    out
}

/// `kvcr import --dry-run --format json` on `c`: (exit status, document).
fn dry_run(c: &Case, facts: &Path) -> (i32, Value) {
    let mut cmd = kvcr();
    cmd.args(["import", "--dry-run", "--format", "json"])
        .arg(&c.root)
        .env("KVCR_NODE_FACTS", facts)
        // The simulated backend answers the driver (a node with one).
        .env("KVCR_IMPORT_BACKEND", "sim");
    if let Some(p) = &c.profile {
        cmd.arg("--profile").arg(p);
    }
    if let Some(e) = &c.engine {
        cmd.args(["--engine", e]);
    }
    if let Some(r) = &c.local_ranks {
        cmd.args(["--local-ranks", r]);
    }
    let out = cmd.output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: not one JSON document ({e}): {}",
            c.name,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

/// The library's answers to `cases` with the facts file `facts` (its
/// `node_facts` option): each case's `api::gate` answer as `{"plan"}`,
/// `{"usage"}` or `{"refused"}`.
fn library(cases: &[Case], facts: &Path) -> Vec<Value> {
    let json = |t: &str| serde_json::from_str::<Value>(t).unwrap();
    let out: Vec<Value> = cases
        .iter()
        .map(|c| {
            let o = GateOptions {
                profile: c.profile.clone().map(Profile::Path),
                engine: c.engine.clone(),
                local_ranks: c.local_ranks.as_deref().map(|r| RankSet::parse(r).unwrap()),
                node_facts: Some(facts.to_path_buf()),
                ..GateOptions::default()
            };
            match api::gate(&c.root, &o) {
                Ok(plan) => json!({ "plan": json(plan.as_json()) }),
                Err(Error::Usage { message, .. }) => json!({ "usage": message }),
                Err(Error::Refused { report, .. }) => {
                    json!({ "refused": json(report.as_json()) })
                }
                Err(other) => json!({ "other": format!("{other:?}") }),
            }
        })
        .collect();
    // The library names the facts file by its option, the command by its
    // variable, and its gate says how to give the GPUs when it could not
    // list them (the command checks its driver there instead, §8.9);
    // nothing else may differ.
    let text = serde_json::to_string(&out).unwrap();
    let hinted = text.matches(GPUS_HINT).count();
    let text = text.replace(GPUS_HINT, "");
    let gpus_unknown = std::fs::read_to_string(facts)
        .unwrap()
        .contains("\"gpus\": null");
    assert_eq!(
        hinted > 0,
        gpus_unknown,
        "the GPU hint where the GPUs are not known"
    );
    let text = text.replace("node_facts=", "KVCR_NODE_FACTS=");
    serde_json::from_str(&text).unwrap()
}

/// Compares one case's answers; `Err` says how they differ.
fn same_answer(dry: &(i32, Value), lib: &Value, no_profile: bool) -> Result<String, String> {
    let (status, d) = (dry.0, &without_clock(dry.1.clone()));
    let lib = &without_clock(lib.clone());
    let refusals = d["refusals"].as_array().cloned().unwrap_or_default();
    let first = refusals.first();
    if let Some(plan) = lib.get("plan") {
        if status != 0 || !refusals.is_empty() || d["result"] != "planned" {
            return Err(format!("the library accepted, the dry run exited {status}"));
        }
        if *plan != d["plan"] {
            return Err("the plans differ".into());
        }
        return Ok("accepted".into());
    }
    if let Some(message) = lib.get("usage") {
        if status != 2 {
            return Err(format!(
                "the library's usage error {message}, the dry run exited {status}"
            ));
        }
        // No profile: the dry run lists it first; anything else is its
        // error document, with the same message. A dry run goes on past a
        // missing profile, so it may meet a second usage error (several
        // groups) the real import and the gate never reach: both exit 2.
        let want = match first {
            Some(r) if r["gate"] == "profile" => &r["message"],
            _ => &d["message"],
        };
        let past_the_profile = d["schema"] == "kvcr.error/v1"
            && no_profile
            && message
                .as_str()
                .is_some_and(|m| m.starts_with("no deployment profile"));
        if message != want && !past_the_profile {
            return Err(format!("usage error {message} against {want}"));
        }
        return Ok("usage".into());
    }
    let Some(r) = lib.get("refused") else {
        return Err(format!("the library answered {lib}"));
    };
    if status != 1 || r["exit_status"] != 1 || r["mode"] != "gate" || r["result"] != "rejected" {
        return Err(format!(
            "refused by the library, the dry run exited {status}"
        ));
    }
    for k in ["engine_id", "incarnation", "epoch", "files"] {
        if r.get(k) != d.get(k) {
            return Err(format!("{k}: {:?} against {:?}", r.get(k), d.get(k)));
        }
    }
    let lib_refusals = r["refusals"].as_array().cloned().unwrap_or_default();
    match (lib_refusals.as_slice(), first) {
        // Refused at a gate: the first refusal the dry run lists, alone.
        ([one], Some(want)) if one == want => Ok(format!("refused: {}", one["gate"])),
        // Refused by the audit: the same group audit, no refusal.
        ([], None) if r.get("audit") == d.get("audit") => Ok("refused by the audit".into()),
        _ => Err(format!(
            "refusals {lib_refusals:?} against {refusals:?}; audit {} against {}",
            r["audit"], d["audit"]
        )),
    }
}

#[test]
fn the_library_gate_answers_what_the_dry_run_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let checkout = cases(tmp.path(), false);
    let private = cases(tmp.path(), true);
    let mut failures = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (cases, facts) in [
        (&checkout, "node-match.json"),
        (&private, "node-match.json"),
        (&private, "node-unknown.json"),
    ] {
        let facts = fixtures_live(facts);
        let lib = library(cases, &facts);
        for (c, l) in cases.iter().zip(&lib) {
            match same_answer(&dry_run(c, &facts), l, c.profile.is_none()) {
                Ok(kind) => *kinds.entry(kind).or_default() += 1,
                Err(e) => failures.push(format!("{} on {}: {e}", c.name, facts.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every kind of answer was compared, more than once: each gate's refusal
    // as well as the audit's, a plan and a usage error.
    for kind in [
        "accepted",
        "usage",
        "refused by the audit",
        "refused: \"fleet-report\"",
        "refused: \"content\"",
        "refused: \"not-checked\"",
    ] {
        assert!(
            kinds.get(kind).copied().unwrap_or(0) > 1,
            "{kind}: {kinds:?}"
        );
    }
}
