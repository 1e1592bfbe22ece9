//! The `kvcr.audit-report/v1` wire layer (docs/format.md §9, §10.2;
//! docs/json.md): typed structs for every member of the report, read back
//! strictly by `kvcr merge` and by the import gate (`--fleet-report`).
//!
//! Reading is strict in two steps, both naming the file and the field path
//! (`groups[0].ranks[1].epoch`):
//! 1. serde, straight from a buffered reader into these structs (no
//!    intermediate JSON value, so memory stays a small multiple of the
//!    input): unknown members, missing members and wrong types are errors;
//! 2. [`AuditReport::validate`]: every field a descriptor also has obeys the
//!    descriptor's own rule (docs/format.md §3), through the same functions
//!    the descriptor parser calls (`descriptor::check`, `descriptor::parse`).
//!
//! A report that fails either step was not written by `kvcr audit` (or was
//! edited): it is refused whole, never judged.

use crate::format::descriptor::check::{Checker, FieldError, Path};
use crate::format::descriptor::parse::{geometry_value, model_value, I63_MAX};
use crate::format::descriptor::{Geometry, GpuUuid, Model, MAX_WORLD_SIZE};
use crate::format::message::render;
use serde::{Deserialize, Serialize};
use std::io::Read;
use uuid::Uuid;

pub use crate::format::meta::REPORT_SCHEMA;

/// `"kvcr.audit-report/v1"`, and nothing else.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schema;

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REPORT_SCHEMA)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s == REPORT_SCHEMA {
            Ok(Schema)
        } else {
            Err(serde::de::Error::custom(format!(
                "schema {:?} is not {REPORT_SCHEMA:?}; only kvcr audit reports of this version are \
                 read",
                crate::format::text::terminal(&s)
            )))
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Accept,
    Reject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Reject,
    Notice,
}

/// A member that may be `null` but must be present (merge-only members are
/// absent from an audit report, present, maybe `null`, in a merge report).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A list read exactly to its length: serde grows a list from a capacity of
/// four, which for the one-finding lists of a large report is most of its
/// memory (docs/bench.md, merge memory).
fn shrunk<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let mut v = Vec::<T>::deserialize(d)?;
    v.shrink_to_fit();
    Ok(v)
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

/// The whole document. `G` and `F` are the lists of groups and files:
/// read as `Vec`s; the printer writes them from the verdicts one entry at a
/// time ([`Each`]), so printing never holds a second copy of a judgement.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditReport<G = Vec<Group>, F = Vec<File>> {
    pub schema: Schema,
    pub kvcr_version: String,
    pub generated_unix_ms: u64,
    /// The node's hostname; `null` in a merge report.
    pub host: Option<String>,
    /// Live audits only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    pub live: bool,
    pub strict: bool,
    pub node_facts_source: Option<String>,
    pub options: Options,
    pub exit_status: i32,
    pub root: String,
    /// Why the run exits with its status (`empty: …`, `accepted: …`,
    /// `rejected: …`; docs/json.md). Informational: merge and the gate
    /// never decide on it. Absent in reports of older kvcr builds.
    #[serde(default)]
    pub cause: String,
    /// Merge reports only: the inputs, in argument order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reports: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_inputs_live: Option<bool>,
    /// `Some(None)`: present and `null`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub oldest_input_age_ms: Option<Option<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<Input>>,
    pub groups: G,
    pub files: F,
    pub summary: Summary,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    pub engine: Option<String>,
    pub profile: Option<String>,
    /// Where the profile came from: `"flag"` or `"env"` (`$KVCR_PROFILE`);
    /// present only when a profile was given (docs/json.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_source: Option<String>,
    pub min_epoch: Option<u64>,
    pub max_age_s: Option<u64>,
    pub local_ranks: Option<String>,
    pub incarnation: Option<String>,
}

/// One input of a merge report.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub report: String,
    pub host: Option<String>,
    pub boot_id: Option<String>,
    pub live: bool,
    pub generated_unix_ms: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// As read: a report is untrusted input, so this stays a string, which
    /// [`AuditReport::validate`] checks by the engine-id rule; merge parses it
    /// into a `descriptor::EngineId` before using it as a group's id.
    pub engine_id: String,
    pub incarnation: Option<String>,
    pub epoch: Option<u64>,
    pub world_size: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub model: Option<Model>,
    pub geometry: Option<Geometry>,
    pub local_ranks: Option<String>,
    pub verdict: Verdict,
    pub cause: String,
    pub action: String,
    pub cause_code: Option<String>,
    #[serde(deserialize_with = "shrunk")]
    pub findings: Vec<Finding>,
    #[serde(deserialize_with = "shrunk")]
    pub ranks: Vec<Rank>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rank {
    /// `null` when the file name's rank does not fit in 64 bits.
    pub rank: Option<u64>,
    pub path: String,
    pub gpu_uuid: Option<String>,
    pub verdict: Verdict,
    #[serde(deserialize_with = "shrunk")]
    pub findings: Vec<Finding>,
    #[serde(deserialize_with = "shrunk")]
    pub not_checked: Vec<String>,
    /// Merge reports only: the input this rank came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    pub incarnation: Option<String>,
    pub epoch: Option<u64>,
    pub created_unix_ms: Option<u64>,
    pub age_ms: Option<u64>,
    pub owner_pid: Option<i32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub path: String,
    #[serde(deserialize_with = "shrunk")]
    pub findings: Vec<Finding>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub code: String,
    pub name: String,
    pub severity: Severity,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    /// `false` only for a problem of a descriptor outside its group's
    /// current incarnation (docs/format.md §10.1).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub counted: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub groups: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub descriptors: u64,
    pub files_rejected: u64,
    pub notices: u64,
    pub not_checked: u64,
}

/// A list written from `items`, each entry converted to its wire form as it
/// is written and dropped after.
pub struct Each<'a, T, W>(pub &'a [T], pub fn(&T) -> W);

impl<T, W: Serialize> Serialize for Each<'_, T, W> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for x in self.0 {
            seq.serialize_element(&(self.1)(x))?;
        }
        seq.end()
    }
}

impl Finding {
    pub fn of(f: &crate::format::finding::Finding) -> Finding {
        Finding {
            code: f.code.as_str().to_string(),
            name: f.name.to_string(),
            severity: match f.severity {
                crate::format::finding::Severity::Reject => Severity::Reject,
                crate::format::finding::Severity::Notice => Severity::Notice,
            },
            message: render(&f.message),
            path: f.path.clone(),
            expected: f.expected.clone(),
            found: f.found.clone(),
            counted: f.counted,
        }
    }
}

/// Reads one report from `r` (buffered here), strictly: an error names the
/// file `name`, the field path and what is wrong.
pub fn read(name: &str, r: impl Read) -> Result<AuditReport, String> {
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 << 10, r));
    let report: AuditReport = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner();
        let what = if inner.is_syntax() || inner.is_eof() || inner.is_io() {
            format!("not JSON: {inner}")
        } else if at == "." || at.is_empty() {
            format!("not a kvcr audit report: {inner}")
        } else {
            format!("malformed kvcr audit report at `{at}`: {inner}")
        };
        format!("{name}: {}", crate::format::text::terminal(&what))
    })?;
    de.end()
        .map_err(|e| format!("{name}: trailing data after the report: {e}"))?;
    report
        .validate()
        .map_err(|e| format!("{name}: {}", crate::format::text::terminal(&e)))?;
    Ok(report)
}

impl AuditReport {
    /// Every field a descriptor has too obeys the descriptor's rule
    /// (docs/format.md §3), checked by the descriptor's own functions; the
    /// first few problems, each with its field path and both values.
    pub fn validate(&self) -> Result<(), String> {
        let mut c = Checker::new();
        let root = Path::ROOT;
        if let Some(b) = &self.boot_id {
            c.uuid_str(&root.key("boot_id"), b);
        }
        if let Some(h) = &self.host {
            c.string_str(&root.key("host"), h, 1, 253);
        }
        if let Some(inputs) = &self.inputs {
            let p = root.key("inputs");
            for (i, x) in inputs.iter().enumerate() {
                let p = p.index(i);
                if let Some(b) = &x.boot_id {
                    c.uuid_str(&p.key("boot_id"), b);
                }
                if let Some(h) = &x.host {
                    c.string_str(&p.key("host"), h, 1, 253);
                }
                if let Some(t) = x.generated_unix_ms {
                    c.uint_value(&p.key("generated_unix_ms"), t, 0, I63_MAX);
                }
            }
        }
        c.uint_value(
            &root.key("generated_unix_ms"),
            self.generated_unix_ms,
            0,
            I63_MAX,
        );
        let gs = root.key("groups");
        for (gi, g) in self.groups.iter().enumerate() {
            let p = gs.index(gi);
            c.engine_id_str(&p.key("engine_id"), &g.engine_id);
            if let Some(u) = &g.incarnation {
                c.uuid_str(&p.key("incarnation"), u);
            }
            if let Some(e) = g.epoch {
                c.uint_value(&p.key("epoch"), e, 1, I63_MAX);
            }
            for (field, v) in [("world_size", g.world_size), ("tp", g.tp), ("pp", g.pp)] {
                if let Some(v) = v {
                    c.uint_value(&p.key(field), v, 1, MAX_WORLD_SIZE);
                }
            }
            if let Some(m) = &g.model {
                model_value(&mut c, &p.key("model"), m);
            }
            if let Some(geo) = &g.geometry {
                geometry_value(&mut c, &p.key("geometry"), geo);
            }
            if let Some(l) = &g.local_ranks {
                if crate::format::rankset::RankSet::parse(l).is_err() {
                    c.fail(
                        &p.key("local_ranks"),
                        "unreadable rank list",
                        "a rank list such as 0-3",
                        crate::format::json::quote_preview(l),
                    );
                }
            }
            let rs = p.key("ranks");
            for (ri, r) in g.ranks.iter().enumerate() {
                let p = rs.index(ri);
                if let Some(n) = r.rank {
                    c.uint_value(&p.key("rank"), n, 0, I63_MAX);
                }
                if let Some(u) = &r.gpu_uuid {
                    c.gpu_uuid_str(&p.key("gpu_uuid"), u);
                }
                if let Some(u) = &r.incarnation {
                    c.uuid_str(&p.key("incarnation"), u);
                }
                if let Some(e) = r.epoch {
                    c.uint_value(&p.key("epoch"), e, 1, I63_MAX);
                }
                if let Some(t) = r.created_unix_ms {
                    c.uint_value(&p.key("created_unix_ms"), t, 0, I63_MAX);
                }
                if let Some(pid) = r.owner_pid {
                    // A negative pid is shown as written, never as 0.
                    match u64::try_from(pid) {
                        Ok(v) => {
                            c.uint_value(&p.key("owner_pid"), v, 1, i32::MAX as u64);
                        }
                        Err(_) => c.fail(
                            &p.key("owner_pid"),
                            "out of range",
                            format!("integer 1..={}", i32::MAX),
                            pid.to_string(),
                        ),
                    }
                }
            }
        }
        if c.is_clean() {
            return Ok(());
        }
        Err(describe(&c.errors, c.total))
    }

    /// A merge report (it lists its inputs).
    pub fn is_merged(&self) -> bool {
        self.reports.is_some() || self.inputs.is_some()
    }
}

fn describe(errors: &[FieldError], total: usize) -> String {
    const SHOWN: usize = 4;
    let mut s = errors
        .iter()
        .take(SHOWN)
        .map(|e| {
            format!(
                "`{}`: {}: expected {}, found {}",
                e.field, e.problem, e.expected, e.found
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if total > SHOWN {
        s.push_str(&format!("; and {} more", total - SHOWN));
    }
    format!("a field breaks the rule the same descriptor field obeys (docs/format.md §3): {s}")
}

/// A report's UUID string, already validated by [`AuditReport::validate`].
pub fn uuid(s: Option<&str>) -> Option<Uuid> {
    s.and_then(crate::format::descriptor::parse_canonical_uuid)
}

/// A report's GPU UUID string, already validated.
pub fn gpu(s: Option<&str>) -> Option<GpuUuid> {
    s.and_then(GpuUuid::parse)
}

#[cfg(test)]
mod tests {
    /// Every committed expected report reads through the wire layer and
    /// writes back byte for byte: the layer holds every member the printer
    /// writes, in its order, with its types.
    #[test]
    fn expected_reports_round_trip_byte_for_byte() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path().join("expected.json");
            let Ok(bytes) = std::fs::read(&p) else {
                continue;
            };
            let name = p.display().to_string();
            let r = super::read(&name, bytes.as_slice()).unwrap_or_else(|e| panic!("{e}"));
            let mut out = Vec::new();
            crate::format::json::write(&mut out, &r).unwrap();
            assert!(
                out == bytes,
                "{name} does not round-trip:\n{}",
                String::from_utf8_lossy(&out)
            );
            n += 1;
        }
        assert!(n >= 30, "only {n} expected reports");
    }

    #[test]
    fn a_merge_report_member_must_be_present_when_null() {
        let base = concat!(
            r#"{"schema":"kvcr.audit-report/v1","kvcr_version":"x","generated_unix_ms":1,"#,
            r#""host":"h","live":false,"strict":false,"node_facts_source":null,"#,
            r#""options":{"engine":null,"profile":null,"min_epoch":null,"max_age_s":null,"#,
            r#""local_ranks":null,"incarnation":null},"exit_status":1,"root":"r","#,
            r#""groups":[],"files":[],"summary":{"groups":0,"accepted":0,"rejected":0,"#,
            r#""descriptors":0,"files_rejected":0,"notices":0,"not_checked":0}}"#
        );
        let r = super::read("r.json", base.as_bytes()).unwrap();
        assert!(!r.is_merged() && r.oldest_input_age_ms.is_none());
        let with = base.replace(
            r#""groups":[]"#,
            r#""oldest_input_age_ms":null,"groups":[]"#,
        );
        let r = super::read("r.json", with.as_bytes()).unwrap();
        assert_eq!(r.oldest_input_age_ms, Some(None));
        let e = super::read(
            "r.json",
            base.replace("\"live\":false", "\"live\":0").as_bytes(),
        )
        .unwrap_err();
        assert!(e.contains("r.json") && e.contains("`live`"), "{e}");
        let e = super::read("r.json", format!("{base} {{}}").as_bytes()).unwrap_err();
        assert!(e.contains("trailing"), "{e}");
    }
}
