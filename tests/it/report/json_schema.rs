//! The JSON Schemas `kvcr schema` prints (schemas/*.json) against what kvcr
//! really reads and writes: every fixture descriptor kvcr accepts, every
//! profile, every committed and every fresh report must validate; descriptor
//! and profile mutations kvcr rejects as schema errors must fail the schema
//! too, and variants kvcr accepts must pass it.

use crate::util::testkit::{seal, to_bytes, Desc};
use crate::util::{kvcr, repo};
use kvcr_audit::descriptor::parse_descriptor;
use kvcr_audit::finding::Code;
use kvcr_audit::schema::Kind;
use serde_json::{json, Value};

fn schema(k: Kind) -> Value {
    serde_json::from_str(k.text()).unwrap()
}

fn validator(k: Kind) -> jsonschema::Validator {
    jsonschema::draft202012::new(&schema(k)).unwrap_or_else(|e| panic!("{k:?}: {e}"))
}

/// Every validation error, one line each; empty when valid.
fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn schemas_are_valid_draft_2020_12() {
    for k in Kind::ALL {
        jsonschema::meta::validate(&schema(k)).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        validator(k);
    }
}

#[test]
fn kvcr_schema_prints_the_committed_files() {
    for (arg, file) in [
        ("report", "report.schema.json"),
        ("descriptor", "descriptor.schema.json"),
        ("profile", "profile.schema.json"),
        ("import-report", "import-report.schema.json"),
        ("ready", "ready.schema.json"),
        ("gms-report", "gms-report.schema.json"),
        ("offload-report", "offload-report.schema.json"),
    ] {
        let out = kvcr().args(["schema", arg]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let committed = std::fs::read(repo().join("schemas").join(file)).unwrap();
        assert_eq!(out.stdout, committed, "kvcr schema {arg}");
        assert!(out.stderr.is_empty());
    }
    let out = kvcr().args(["schema", "nonsense"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn shared_definitions_agree() {
    let d = schema(Kind::Descriptor);
    let p = schema(Kind::Profile);
    let r = schema(Kind::Report);
    for def in [
        "engine_id",
        "uuid",
        "gpu_uuid",
        "model",
        "geometry",
        "dimension",
    ] {
        assert_eq!(d["$defs"][def], p["$defs"][def], "profile $defs.{def}");
    }
    for def in ["model", "geometry", "dimension"] {
        assert_eq!(d["$defs"][def], r["$defs"][def], "report $defs.{def}");
    }
}

/// Each report schema lists exactly its family's codes (the GMS reader's
/// KV2xx never appear in an audit report, nor KV0xx/KV1xx in a GMS report),
/// each with its name.
#[test]
fn report_schemas_pair_every_code_with_its_name() {
    use kvcr_audit::finding::Family;
    for (kind, family) in [
        (Kind::Report, Family::Inventory),
        (Kind::GmsReport, Family::Gms),
        (Kind::OffloadReport, Family::Offload),
    ] {
        let r = schema(kind);
        let pairs: Vec<(String, String)> = r["$defs"]["finding"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let s = |k: &str| p["properties"][k]["const"].as_str().unwrap().to_string();
                (s("code"), s("name"))
            })
            .collect();
        let want: Vec<(String, String)> = Code::ALL
            .iter()
            .filter(|c| c.family() == family)
            .map(|c| (c.as_str().to_string(), c.name().to_string()))
            .collect();
        assert_eq!(pairs, want, "{kind:?}");
    }
}

/// Regular files named rank-<R>.json below every fixture inventory.
fn fixture_descriptors() -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(repo().join("fixtures")).follow_links(false) {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy();
        let in_inventory = e.path().components().any(|c| c.as_os_str() == "inventory");
        if e.file_type().is_file()
            && in_inventory
            && name.starts_with("rank-")
            && name.ends_with(".json")
        {
            out.push(e.into_path());
        }
    }
    out.sort();
    out
}

fn kvcr_codes(bytes: &[u8]) -> Vec<Code> {
    parse_descriptor(bytes)
        .findings
        .iter()
        .map(|f| f.code)
        .collect()
}

#[test]
fn every_fixture_descriptor_kvcr_accepts_validates() {
    let v = validator(Kind::Descriptor);
    let (mut valid, mut invalid) = (0, 0);
    let mut failures = Vec::new();
    for path in fixture_descriptors() {
        let bytes = std::fs::read(&path).unwrap();
        let codes = kvcr_codes(&bytes);
        if codes.contains(&Code::KV006) {
            continue; // not JSON at all
        }
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        let errs = errors(&v, &doc);
        if codes.contains(&Code::KV007) {
            invalid += 1;
            if errs.is_empty() {
                failures.push(format!(
                    "{}: kvcr says KV007, the schema accepts it",
                    path.display()
                ));
            }
        } else {
            valid += 1;
            if !errs.is_empty() {
                failures.push(format!("{}: {}", path.display(), errs.join("; ")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(valid >= 40, "only {valid} valid fixture descriptors");
    assert!(invalid >= 1, "no KV007 fixture descriptor");
}

/// Sets (`Some`) or removes (`None`) the member at a dotted path; numeric
/// segments index arrays.
fn edit(doc: &mut Value, path: &str, to: Option<Value>) {
    let (parent, last) = match path.rsplit_once('.') {
        Some((p, l)) => (Some(p), l),
        None => (None, path),
    };
    let mut cur = doc;
    if let Some(p) = parent {
        for seg in p.split('.') {
            cur = match seg.parse::<usize>() {
                Ok(i) => &mut cur[i],
                Err(_) => &mut cur[seg],
            };
        }
    }
    match (last.parse::<usize>(), to) {
        (Ok(i), Some(v)) => cur[i] = v,
        (Ok(i), None) => {
            cur.as_array_mut().unwrap().remove(i);
        }
        (Err(_), Some(v)) => cur[last] = v,
        (Err(_), None) => {
            cur.as_object_mut().unwrap().remove(last);
        }
    }
}

const I63_MAX: u64 = i64::MAX as u64;
const NIL: &str = "00000000-0000-0000-0000-000000000000";

/// (path, new value or removal) pairs kvcr rejects as KV007.
fn descriptor_schema_errors() -> Vec<(&'static str, Option<Value>)> {
    let long = |n: usize| Value::String("a".repeat(n));
    vec![
        ("schema", Some(json!("kvcr.retained-rank/v2"))),
        ("engine_id", None),
        ("engine_id", Some(json!(""))),
        ("engine_id", Some(json!("has space"))),
        ("engine_id", Some(long(129))),
        ("extra", Some(json!(1))),
        (
            "incarnation",
            Some(json!("3F2B8C1E-7D4A-4B6E-9C2F-1A5D8E7B4C90")),
        ),
        ("incarnation", Some(json!(NIL))),
        (
            "incarnation",
            Some(json!("3f2b8c1e7d4a4b6e9c2f1a5d8e7b4c90")),
        ),
        ("epoch", Some(json!(0))),
        ("epoch", Some(json!(I63_MAX + 1))),
        ("epoch", Some(json!("1"))),
        ("epoch", Some(json!(1.5))),
        ("rank", Some(json!(-1))),
        ("world_size", Some(json!(0))),
        ("world_size", Some(json!(4097))),
        ("tp", Some(json!(0))),
        ("pp", None),
        ("node.hostname", Some(json!(""))),
        ("node.hostname", Some(long(254))),
        ("node.boot_id", Some(json!(NIL))),
        ("node.extra", Some(json!(true))),
        (
            "gpu_uuid",
            Some(json!("GPU-6A1F0C2E-0000-4000-8000-000000000000")),
        ),
        (
            "gpu_uuid",
            Some(json!("gpu-6a1f0c2e-0000-4000-8000-000000000000")),
        ),
        (
            "gpu_uuid",
            Some(json!("6a1f0c2e-0000-4000-8000-000000000000")),
        ),
        ("gpu_uuid", Some(json!(format!("MIG-{NIL}")))),
        ("model.name", Some(json!(""))),
        ("model.revision", Some(long(65))),
        ("model.quantization", Some(json!(""))),
        ("model.quantization", None),
        ("geometry.num_layers", Some(json!(0))),
        ("geometry.head_size", Some(json!((1u64 << 32) + 1))),
        ("geometry.num_blocks", Some(json!(0))),
        ("geometry.dtype", Some(json!("fp16"))),
        ("geometry.use_mla", Some(json!("no"))),
        ("owner.pid", Some(json!(0))),
        ("owner.pid", Some(json!(1u64 << 31))),
        ("owner.start_ticks", Some(json!(-1))),
        ("writer.quiesced", None),
        ("allocations", Some(json!([]))),
        ("allocations.0.id", Some(json!(""))),
        ("allocations.0.size_bytes", Some(json!(0))),
        ("allocations.0.handle.kind", Some(json!("dmabuf"))),
        ("allocations.0.handle.hex", Some(json!("ab".repeat(63)))),
        ("allocations.0.handle.hex", Some(json!("zz".repeat(64)))),
        ("allocations.0.handle.fd", Some(json!(3))),
        (
            "allocations.0.handle",
            Some(json!({"kind": "posix_fd", "fd": -1})),
        ),
        (
            "allocations.0.handle",
            Some(json!({"kind": "posix_fd", "hex": "00"})),
        ),
        ("allocations.0.extra", Some(json!(null))),
        ("created_unix_ms", Some(json!(-1))),
        ("digest", Some(json!(format!("sha256:{}", "AB".repeat(32))))),
        ("digest", Some(json!(format!("md5:{}", "ab".repeat(16))))),
    ]
}

/// (path, new value) pairs kvcr accepts.
fn descriptor_variants() -> Vec<(&'static str, Value)> {
    vec![
        ("model.quantization", json!("fp8")),
        (
            "gpu_uuid",
            json!("MIG-6a1f0c2e-0000-4000-8000-000000000000"),
        ),
        ("engine_id", json!(format!("{}:/._-", "A".repeat(123)))),
        ("node.hostname", json!("h".repeat(253))),
        ("epoch", json!(I63_MAX)),
        ("rank", json!(3)), // rank vs world_size is KV101, not a schema rule
        ("owner.start_ticks", json!(u64::MAX)),
        ("allocations.0.size_bytes", json!(u64::MAX)),
        ("allocations.0.handle.hex", json!("AB".repeat(64))),
        (
            "allocations.0.handle",
            json!({"kind": "cuda_ipc", "hex": "0f".repeat(64)}),
        ),
        ("allocations.0.handle", json!({"kind": "posix_fd", "fd": 0})),
        ("geometry.use_mla", json!(true)),
        ("geometry.dtype", json!("float8_e5m2")),
        ("geometry.block_size", json!(1u64 << 32)),
    ]
}

/// A sealed descriptor after `f`; the digest is recomputed unless `f`
/// changes the digest itself.
fn descriptor_with(path: &str, f: impl FnOnce(&mut Value)) -> Value {
    let mut doc = Desc::new("schema-test", 0, 2, 1).value();
    if path == "digest" {
        seal(&mut doc);
        f(&mut doc);
    } else {
        f(&mut doc);
        seal(&mut doc);
    }
    doc
}

#[test]
fn descriptor_schema_rejects_what_kvcr_rejects_as_kv007() {
    let v = validator(Kind::Descriptor);
    let base = descriptor_with("", |_| {});
    assert_eq!(
        kvcr_codes(&to_bytes(&base)),
        [],
        "the base descriptor is valid"
    );
    assert_eq!(errors(&v, &base), Vec::<String>::new());
    let mut failures = Vec::new();
    for (path, to) in descriptor_schema_errors() {
        let doc = descriptor_with(path, |d| edit(d, path, to.clone()));
        let codes = kvcr_codes(&to_bytes(&doc));
        assert!(
            codes.contains(&Code::KV007),
            "{path} = {to:?}: kvcr found {codes:?}"
        );
        if v.is_valid(&doc) {
            failures.push(format!("{path} = {to:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "the schema accepts:\n{}",
        failures.join("\n")
    );
}

#[test]
fn descriptor_schema_accepts_what_kvcr_accepts() {
    let v = validator(Kind::Descriptor);
    let mut failures = Vec::new();
    for (path, to) in descriptor_variants() {
        let doc = descriptor_with(path, |d| edit(d, path, Some(to.clone())));
        let codes = kvcr_codes(&to_bytes(&doc));
        assert!(
            !codes.contains(&Code::KV007) && !codes.contains(&Code::KV006),
            "{path} = {to}: kvcr found {codes:?}"
        );
        let errs = errors(&v, &doc);
        if !errs.is_empty() {
            failures.push(format!("{path} = {to}: {}", errs.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn profiles() -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = crate::util::samples::cases()
        .into_iter()
        .map(|d| d.join("profile.json"))
        .filter(|p| p.exists())
        .collect();
    out.sort();
    out
}

#[test]
fn every_fixture_profile_validates() {
    let v = validator(Kind::Profile);
    let all = profiles();
    assert!(all.len() >= 3, "{all:?}");
    for p in all {
        let bytes = std::fs::read(&p).unwrap();
        kvcr_audit::profile::parse_profile(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        let errs = errors(&v, &doc);
        assert!(errs.is_empty(), "{}: {}", p.display(), errs.join("; "));
    }
}

fn full_profile() -> Value {
    let p = repo().join("fixtures/profile-accept/profile.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    v["max_age_s"] = json!(86400);
    v["local_ranks"] = json!("0-1");
    v
}

#[test]
fn profile_schema_agrees_with_kvcr() {
    let v = validator(Kind::Profile);
    let parse = |doc: &Value| kvcr_audit::profile::parse_profile(&serde_json::to_vec(doc).unwrap());
    let full = full_profile();
    assert!(parse(&full).is_ok());
    assert_eq!(errors(&v, &full), Vec::<String>::new());

    let mut accepted = vec![json!({"schema": "kvcr.profile/v1", "engine_id": "e1"})];
    let mut nulls = full.clone();
    for k in [
        "world_size",
        "tp",
        "pp",
        "model",
        "geometry",
        "gpus",
        "incarnation",
        "min_epoch",
        "max_age_s",
        "local_ranks",
    ] {
        nulls[k] = Value::Null;
    }
    accepted.push(nulls);
    // 0 is accepted as the flags accept it (#19 item 13).
    let mut zeros = full.clone();
    zeros["min_epoch"] = json!(0);
    zeros["max_age_s"] = json!(0);
    accepted.push(zeros);
    for doc in &accepted {
        assert!(parse(doc).is_ok(), "{doc}");
        assert_eq!(errors(&v, doc), Vec::<String>::new(), "{doc}");
    }

    let rejected: Vec<(&str, Option<Value>)> = vec![
        ("schema", Some(json!("kvcr.retained-rank/v1"))),
        ("engine_id", None),
        ("engine", Some(json!("x"))),
        ("world_size", Some(json!(0))),
        ("tp", Some(json!("2"))),
        ("gpus", Some(json!([]))),
        ("gpus.1", Some(full["gpus"][0].clone())),
        (
            "gpus.0",
            Some(json!("GPU-6A1F0C2E-0000-4000-8000-000000000000")),
        ),
        ("incarnation", Some(json!(NIL))),
        ("min_epoch", Some(json!(-1))),
        ("max_age_s", Some(json!(9223372036854775808u64))),
        ("max_age_s", Some(json!(1.5))),
        ("local_ranks", Some(json!(""))),
        ("model.quantization", None),
        ("geometry.dtype", Some(json!("fp8"))),
        ("geometry.extra", Some(json!(1))),
    ];
    let mut failures = Vec::new();
    for (path, to) in rejected {
        let mut doc = full.clone();
        edit(&mut doc, path, to.clone());
        assert!(parse(&doc).is_err(), "{path} = {to:?}: kvcr accepts it");
        if v.is_valid(&doc) {
            failures.push(format!("{path} = {to:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "the schema accepts:\n{}",
        failures.join("\n")
    );
}

fn check_reports(reports: &[(String, Value)]) {
    let v = validator(Kind::Report);
    let failures: Vec<String> = reports
        .iter()
        .filter_map(|(name, doc)| {
            let errs = errors(&v, doc);
            (!errs.is_empty()).then(|| format!("{name}: {}", errs.join("; ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_committed_expected_report_validates() {
    check_reports(&crate::util::samples::expected_reports());
}

#[test]
fn every_fresh_report_validates() {
    let reports = crate::util::samples::fresh_reports();
    check_reports(&reports);
    // The samples reach what fixtures alone do not.
    let has = |f: &dyn Fn(&Value) -> bool| reports.iter().any(|(_, r)| f(r));
    assert!(has(
        &|r| r["reports"].is_array() && r["all_inputs_live"].is_boolean()
    ));
    assert!(has(
        &|r| r["boot_id"].is_string() && r["node_facts_source"].is_string()
    ));
    assert!(has(&|r| r["groups"][0]["ranks"][0]["age_ms"].is_u64()));
    assert!(has(&|r| r["live"] == true));
    assert!(has(&|r| r["groups"][0]["ranks"][0]["not_checked"]
        .as_array()
        .is_some_and(|a| !a.is_empty())));
    assert!(has(&|r| r["groups"][0]["local_ranks"].is_string()));
}

#[test]
fn report_schema_rejects_drift() {
    let v = validator(Kind::Report);
    let good = crate::util::samples::expected_reports()
        .into_iter()
        .find(|(n, _)| n.contains("kv103-missing-rank"))
        .unwrap()
        .1;
    assert!(v.is_valid(&good));
    let drifts: Vec<(&str, Option<Value>)> = vec![
        ("schema", Some(json!("kvcr.audit-report/v2"))),
        ("new_member", Some(json!(1))),
        ("summary", None),
        ("groups.0.verdict", Some(json!("maybe"))),
        ("groups.0.cause", None),
        ("groups.0.findings.0.name", Some(json!("missing"))),
        ("groups.0.findings.0.severity", Some(json!("warning"))),
        ("groups.0.findings.0.path", Some(Value::Null)),
        ("groups.0.ranks.0.gpu_uuid", Some(json!("GPU-x"))),
        ("groups.0.ranks.0.extra", Some(json!([]))),
        ("summary.notices", Some(json!(-1))),
        ("kvcr_version", None),
        ("generated_unix_ms", Some(json!("now"))),
        ("options.engine", Some(json!(7))),
        ("options.colour", Some(json!("red"))),
        ("exit_status", None),
        ("strict", None),
        ("node_facts_source", Some(json!(1))),
        ("groups.0.cause_code", Some(json!("KV1"))),
        ("groups.0.ranks.0.owner_pid", Some(json!("4242"))),
        ("groups.0.ranks.0.age_ms", None),
        ("summary.not_checked", None),
        ("reports", Some(json!(["a.json"]))),
    ];
    for (path, to) in drifts {
        let mut doc = good.clone();
        edit(&mut doc, path, to.clone());
        assert!(
            !v.is_valid(&doc),
            "{path} = {to:?} passes the report schema"
        );
    }
}

#[test]
fn the_example_in_docs_json_md_validates() {
    let doc = std::fs::read_to_string(repo().join("docs/json.md")).unwrap();
    let after = doc.split_once("## An example").unwrap().1;
    let block = after.split_once("```json\n").unwrap().1;
    let block = block.split_once("\n```").unwrap().0;
    let v: Value = serde_json::from_str(block).unwrap();
    let errs = errors(&validator(Kind::Report), &v);
    assert!(errs.is_empty(), "{errs:?}");
}
