//! The audit report (`--format json`, docs/format.md §9) re-declared as structs that
//! reject unknown fields, so any change to the format breaks this test on
//! purpose: a member added, removed, renamed or retyped must be a decision,
//! reflected here, in schemas/report.schema.json and in docs/json.md.
//!
//! Every committed expected.json and a set of fresh runs (every fixture,
//! `-v`, live mode, `--local-ranks`, `kvcr merge`) must deserialise, and
//! serialising back must give the same document: nothing is dropped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Report {
    schema: Schema,
    kvcr_version: String,
    generated_unix_ms: u64,
    host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot_id: Option<uuid::Uuid>,
    live: bool,
    strict: bool,
    node_facts_source: Option<String>,
    options: Options,
    exit_status: i32,
    root: String,
    cause: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reports: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    all_inputs_live: Option<bool>,
    /// Present (possibly null) exactly when `reports` is.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "serde_with_null"
    )]
    oldest_input_age_ms: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inputs: Option<Vec<Input>>,
    groups: Vec<Group>,
    files: Vec<File>,
    summary: Summary,
}

/// `Option<Option<T>>` that tells a missing member from a null one.
mod serde_with_null {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    pub fn serialize<S: Serializer, T: Serialize>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        v.as_ref().unwrap().serialize(s)
    }
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Options {
    engine: Option<String>,
    profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    profile_source: Option<String>,
    min_epoch: Option<u64>,
    max_age_s: Option<u64>,
    local_ranks: Option<String>,
    incarnation: Option<uuid::Uuid>,
}

/// `kvcr merge` only: one input report.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Input {
    report: String,
    host: Option<String>,
    boot_id: Option<String>,
    live: bool,
    generated_unix_ms: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
enum Schema {
    #[serde(rename = "kvcr.audit-report/v1")]
    V1,
}

#[derive(Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Accept,
    Reject,
}

#[derive(Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Severity {
    Notice,
    Reject,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Group {
    engine_id: String,
    incarnation: Option<uuid::Uuid>,
    epoch: Option<u64>,
    world_size: Option<u64>,
    tp: Option<u64>,
    pp: Option<u64>,
    model: Option<Model>,
    geometry: Option<Geometry>,
    local_ranks: Option<String>,
    verdict: Verdict,
    cause: String,
    action: String,
    cause_code: Option<String>,
    findings: Vec<Finding>,
    ranks: Vec<Rank>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Model {
    name: String,
    revision: String,
    quantization: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Geometry {
    num_layers: u64,
    kv_heads_per_rank: u64,
    head_size: u64,
    block_size: u64,
    num_blocks: u64,
    dtype: Dtype,
    use_mla: bool,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
enum Dtype {
    Float16,
    Bfloat16,
    Float32,
    #[serde(rename = "float8_e4m3")]
    Float8E4m3,
    #[serde(rename = "float8_e5m2")]
    Float8E5m2,
    Int8,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Rank {
    rank: u64,
    path: String,
    gpu_uuid: Option<String>,
    verdict: Verdict,
    findings: Vec<Finding>,
    not_checked: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    report: Option<String>,
    incarnation: Option<uuid::Uuid>,
    epoch: Option<u64>,
    created_unix_ms: Option<u64>,
    age_ms: Option<u64>,
    owner_pid: Option<i32>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    path: String,
    findings: Vec<Finding>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Finding {
    code: String,
    name: String,
    severity: Severity,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    found: Option<String>,
    /// Present (false) only on a notice outside the current incarnation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counted: Option<bool>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Summary {
    groups: u64,
    accepted: u64,
    rejected: u64,
    descriptors: u64,
    files_rejected: u64,
    notices: u64,
    not_checked: u64,
}

/// Deserialises strictly, checks the invariants a reader may rely on, and
/// checks that nothing was dropped on the way.
fn check(name: &str, doc: &Value) -> Result<(), String> {
    let r: Report = serde_json::from_value(doc.clone()).map_err(|e| format!("{name}: {e}"))?;
    let back = serde_json::to_value(&r).unwrap();
    if &back != doc {
        return Err(format!("{name}: re-serialised report differs"));
    }
    let s = &r.summary;
    let accepted = r
        .groups
        .iter()
        .filter(|g| g.verdict == Verdict::Accept)
        .count() as u64;
    if (s.groups, s.accepted, s.rejected) != (r.groups.len() as u64, accepted, s.groups - accepted)
    {
        return Err(format!("{name}: summary disagrees with the groups"));
    }
    for f in r.groups.iter().flat_map(|g| &g.findings).chain(
        r.groups
            .iter()
            .flat_map(|g| &g.ranks)
            .flat_map(|x| &x.findings),
    ) {
        let code =
            kvcr_audit::finding::Code::parse(&f.code).ok_or(format!("{name}: code {}", f.code))?;
        if code.name() != f.name {
            return Err(format!("{name}: {} named {}", f.code, f.name));
        }
    }
    // An empty inventory (no group, no rejecting file) is exit 0 too, and
    // the top-level cause starts with the word that says which.
    let all_accept = s.accepted == s.groups && s.files_rejected == 0;
    if (r.exit_status == 0) != all_accept {
        return Err(format!(
            "{name}: exit_status {} disagrees with the verdicts",
            r.exit_status
        ));
    }
    let word = if r.groups.is_empty() && s.files_rejected == 0 {
        "empty: "
    } else if all_accept {
        "accepted: "
    } else {
        "rejected: "
    };
    if !r.cause.starts_with(word) {
        return Err(format!(
            "{name}: cause {:?} does not start with {word:?}",
            r.cause
        ));
    }
    if r.reports.is_some() != r.all_inputs_live.is_some()
        || r.reports.is_some() != r.oldest_input_age_ms.is_some()
    {
        return Err(format!("{name}: merge members come together"));
    }
    for g in &r.groups {
        if (g.verdict == Verdict::Reject) != g.cause_code.is_some() {
            return Err(format!(
                "{name}: cause_code is set exactly on rejected groups"
            ));
        }
        if g.action.replace("<ROOT>", "").contains("ROOT") {
            return Err(format!("{name}: a suggested command says ROOT"));
        }
        if g.verdict == Verdict::Accept && g.ranks.iter().any(|x| x.verdict == Verdict::Reject) {
            return Err(format!(
                "{name}: accepted group {} with a rejected rank",
                g.engine_id
            ));
        }
    }
    Ok(())
}

fn check_all(reports: &[(String, Value)]) {
    let failures: Vec<String> = reports
        .iter()
        .filter_map(|(n, d)| check(n, d).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_committed_expected_report_matches_the_declared_format() {
    check_all(&crate::util::samples::expected_reports());
}

#[test]
fn fresh_reports_match_the_declared_format() {
    check_all(&crate::util::samples::fresh_reports());
}

#[test]
fn an_unknown_member_anywhere_is_refused() {
    let (name, good) = crate::util::samples::expected_reports().swap_remove(0);
    check(&name, &good).unwrap();
    let mut doc = good.clone();
    doc["summary"]["new"] = Value::from(1);
    assert!(check("summary.new", &doc).is_err());
    let mut doc = good;
    doc["groups"][0]["ranks"][0]["new"] = Value::from(1);
    assert!(check("ranks[0].new", &doc).is_err());
}
