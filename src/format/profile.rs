//! The deployment profile (docs/format.md §4): what the operator declares the group
//! should be. Read with the same strict JSON reader and the same field rules
//! (and messages) as descriptors; unknown fields are rejected.
//!
//! Optional fields may be absent or `null` (both mean "not declared").

use crate::format::descriptor::check::{Checker, Field, FieldError};
use crate::format::descriptor::parse::{geometry, model, I63_MAX};
use crate::format::descriptor::{Geometry, GpuUuid, Model, MAX_WORLD_SIZE};
use crate::format::json::{self, JsonError};
use crate::format::rankset::RankSet;
use std::fmt;
use uuid::Uuid;

pub use crate::format::ids::PROFILE as PROFILE_SCHEMA;

const PROFILE_FIELDS: &[&str] = &[
    "schema",
    "engine_id",
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
    "derived",
    "require_content",
];

/// The members of a profile's `derived` object (`kvcr profile` writes it).
const DERIVED_FIELDS: &[&str] = &["from", "generated_unix_ms", "review"];

/// A profile `kvcr profile` derived from an audit rather than a deployer
/// wrote from the engine's configuration (docs/format.md §4): what it was
/// derived from, when, and the reminder that it must be reviewed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    pub from: String,
    pub generated_unix_ms: u64,
    pub review: String,
}

/// A parsed, valid deployment profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub engine_id: crate::format::descriptor::EngineId,
    pub world_size: Option<u64>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub model: Option<Model>,
    pub geometry: Option<Geometry>,
    /// GPU UUIDs indexed by rank.
    pub gpus: Option<Vec<GpuUuid>>,
    pub incarnation: Option<Uuid>,
    pub min_epoch: Option<u64>,
    pub max_age_s: Option<u64>,
    /// The ranks this node holds of a group spanning nodes, such as `0-7,12`
    /// (`--local-ranks` overrides it).
    pub local_ranks: Option<RankSet>,
    /// Set when `kvcr profile` derived the profile from an audit (a
    /// bootstrap, to be reviewed); it changes no check.
    pub derived: Option<Derived>,
    /// Import refuses an allocation without a `content` member (docs/format.md
    /// §3.6, §4): exit 1 at the gate, before any GPU call.
    pub require_content: bool,
}

impl Profile {
    /// The fields an import requires (docs/format.md §8.9) that this profile
    /// does not declare, in the order the format lists them.
    pub fn missing_for_import(&self) -> Vec<&'static str> {
        [
            ("world_size", self.world_size.is_none()),
            ("tp", self.tp.is_none()),
            ("pp", self.pp.is_none()),
            ("model", self.model.is_none()),
            ("geometry", self.geometry.is_none()),
            ("gpus", self.gpus.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect()
    }
}

/// Why a profile was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("profile is not valid JSON: {0}")]
    Malformed(#[from] JsonError),
    /// Field problems; `errors` holds the first ones, `total` counts all.
    #[error("{}", invalid_message(errors, *total))]
    Invalid {
        errors: Vec<FieldError>,
        total: usize,
    },
    /// Every field is well formed but `local_ranks` is not a rank list.
    #[error("local_ranks: {0}")]
    LocalRanks(String),
}

impl ProfileError {
    /// The field problems (empty for malformed JSON).
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            ProfileError::Malformed(_) | ProfileError::LocalRanks(_) => &[],
            ProfileError::Invalid { errors, .. } => errors,
        }
    }
}

fn invalid_message(errors: &[FieldError], total: usize) -> String {
    let mut s = String::from("invalid profile: ");
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&e.to_string());
    }
    if total > errors.len() {
        use fmt::Write as _;
        let _ = write!(s, "; and {} more", total - errors.len());
    }
    s
}

/// Parses and validates a deployment profile.
pub fn parse_profile(bytes: &[u8]) -> Result<Profile, ProfileError> {
    let value = json::parse(bytes)?;
    let mut c = Checker::new();
    let p = extract(&mut c, Field::root(value.root()));
    match p {
        Some((_, Err(e))) if c.is_clean() => Err(ProfileError::LocalRanks(e)),
        Some((p, Ok(local_ranks))) if c.is_clean() => Ok(Profile { local_ranks, ..p }),
        _ => {
            debug_assert!(!c.is_clean(), "every failed field records an error");
            Err(ProfileError::Invalid {
                errors: c.errors,
                total: c.total,
            })
        }
    }
}

/// The profile (its `local_ranks` unset) and its `local_ranks` parsed.
type Extracted = (Profile, Result<Option<RankSet>, String>);

fn extract(c: &mut Checker, root: Field<'_, '_>) -> Option<Extracted> {
    let o = c.object(root, PROFILE_FIELDS)?;
    c.exact(o.at("schema"), PROFILE_SCHEMA);
    let engine_id = c.engine_id(o.at("engine_id"));
    let world_size = opt(o.at("world_size"), |f| c.uint(f, 1, MAX_WORLD_SIZE));
    let tp = opt(o.at("tp"), |f| c.uint(f, 1, MAX_WORLD_SIZE));
    let pp = opt(o.at("pp"), |f| c.uint(f, 1, MAX_WORLD_SIZE));
    let model = opt(o.at("model"), |f| model(c, f));
    let geometry = opt(o.at("geometry"), |f| geometry(c, f));
    let gpus = opt(o.at("gpus"), |f| gpus(c, f));
    let incarnation = opt(o.at("incarnation"), |f| c.uuid(f));
    // 0 is accepted exactly as `--min-epoch 0` and `--max-age 0` are (one
    // rule, docs/format.md §5.4): min_epoch 0 asks nothing, max_age_s 0
    // refuses every descriptor sealed before now.
    let min_epoch = opt(o.at("min_epoch"), |f| c.uint(f, 0, I63_MAX));
    let max_age_s = opt(o.at("max_age_s"), |f| c.uint(f, 0, I63_MAX));
    let local_ranks = opt(o.at("local_ranks"), |f| {
        c.string(f, 1, 1024).map(str::to_owned)
    });
    let derived = opt(o.at("derived"), |f| {
        let d = c.object(f, DERIVED_FIELDS)?;
        let from = c.string(d.at("from"), 1, 4096).map(str::to_owned);
        let generated_unix_ms = c.uint(d.at("generated_unix_ms"), 0, I63_MAX);
        let review = c.string(d.at("review"), 1, 4096).map(str::to_owned);
        Some(Derived {
            from: from?,
            generated_unix_ms: generated_unix_ms?,
            review: review?,
        })
    });
    let require_content = opt(o.at("require_content"), |f| c.boolean(f));

    // Relations within the profile itself: a profile that contradicts
    // itself could never accept any group.
    if let (Some(Some(ws)), Some(Some(tp)), Some(Some(pp))) = (world_size, tp, pp) {
        if ws != tp * pp {
            c.fail(
                &o.at("world_size").path,
                "does not equal tp × pp",
                format!("{tp} × {pp} = {}", tp * pp),
                ws.to_string(),
            );
        }
    }
    // One GPU per rank: the list's length is the world size. Checked
    // against `world_size`, or `tp × pp` when only those are declared.
    let declared = match (world_size, tp, pp) {
        (Some(Some(ws)), _, _) => Some((ws, "world_size")),
        (_, Some(Some(tp)), Some(Some(pp))) => Some((tp * pp, "tp × pp")),
        _ => None,
    };
    if let (Some((ws, source)), Some(Some(gpus))) = (declared, &gpus) {
        if gpus.len() as u64 != ws {
            c.fail(
                &o.at("gpus").path,
                "one GPU per rank required",
                format!("{ws} GPU UUIDs ({source})"),
                format!("{} GPU UUIDs", gpus.len()),
            );
        }
    }
    // A profile listing N GPUs and no `world_size` declares world size N
    // (docs/format.md §4): a group of any other size is judged against it.
    let world_size = match (world_size, &gpus) {
        (Some(None), Some(Some(list))) => Some(Some(list.len() as u64)),
        (ws, _) => ws,
    };

    let local_ranks = local_ranks?.map(|s| RankSet::parse(&s)).transpose();
    Some((
        Profile {
            engine_id: engine_id?,
            world_size: world_size?,
            tp: tp?,
            pp: pp?,
            model: model?,
            geometry: geometry?,
            gpus: gpus?,
            incarnation: incarnation?,
            min_epoch: min_epoch?,
            max_age_s: max_age_s?,
            local_ranks: None,
            derived: derived?,
            require_content: require_content?.unwrap_or(false),
        },
        local_ranks,
    ))
}

/// An optional field: `Some(None)` when absent or null, `Some(Some(x))` when
/// valid, `None` when present but invalid (the error is recorded).
fn opt<'p, 'v, T>(
    f: Field<'p, 'v>,
    check: impl FnOnce(Field<'p, 'v>) -> Option<T>,
) -> Option<Option<T>> {
    match f.optional() {
        None => Some(None),
        Some(f) => check(f).map(Some),
    }
}

fn gpus(c: &mut Checker, f: Field<'_, '_>) -> Option<Vec<GpuUuid>> {
    let items = c.array(&f, 1, MAX_WORLD_SIZE as usize, "GPU UUIDs")?;
    let mut out: Vec<GpuUuid> = Vec::with_capacity(items.len());
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let field = f.item(i, item);
        match c.gpu_uuid(field) {
            Some(g) => {
                if let Some(j) = out.iter().position(|x| *x == g) {
                    c.fail(
                        &field.path,
                        format!("GPU already listed for rank {j}"),
                        "a GPU not listed for another rank",
                        json::preview(item),
                    );
                    ok = false;
                }
                out.push(g);
            }
            None => {
                ok = false;
                // Keep indices aligned for the duplicate check's messages.
                out.push(GpuUuid {
                    kind: crate::format::descriptor::GpuKind::Gpu,
                    uuid: Uuid::nil(),
                });
            }
        }
    }
    ok.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::descriptor::Dtype;
    use serde_json::json;

    fn full() -> serde_json::Value {
        json!({
            "schema": "kvcr.profile/v1",
            "engine_id": "vllm:llama-70b/prod-1",
            "world_size": 2,
            "tp": 2,
            "pp": 1,
            "model": {
                "name": "meta-llama/Llama-3.1-70B", "revision": "main", "quantization": "fp8"
            },
            "geometry": {
                "num_layers": 80, "kv_heads_per_rank": 4, "head_size": 128,
                "block_size": 16, "num_blocks": 1000, "dtype": "float8_e4m3", "use_mla": false
            },
            "gpus": [
                "GPU-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8",
                "MIG-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f9"
            ],
            "incarnation": "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b",
            "min_epoch": 3,
            "max_age_s": 86400,
            "local_ranks": "0-1"
        })
    }

    fn parse(v: &serde_json::Value) -> Result<Profile, ProfileError> {
        parse_profile(&serde_json::to_vec(v).unwrap())
    }

    fn errors(v: &serde_json::Value) -> Vec<FieldError> {
        match parse(v) {
            Err(ProfileError::Invalid { errors, .. }) => errors,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn full_profile() {
        let p = parse(&full()).unwrap();
        assert_eq!(p.engine_id, "vllm:llama-70b/prod-1");
        assert_eq!((p.world_size, p.tp, p.pp), (Some(2), Some(2), Some(1)));
        assert_eq!(p.model.unwrap().quantization.as_deref(), Some("fp8"));
        assert_eq!(p.geometry.unwrap().dtype, Dtype::Float8E4m3);
        let gpus = p.gpus.unwrap();
        assert_eq!(
            gpus[1].to_string(),
            "MIG-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f9"
        );
        assert!(p.incarnation.is_some());
        assert_eq!(p.min_epoch, Some(3));
        assert_eq!(p.max_age_s, Some(86400));
        assert_eq!(p.local_ranks.unwrap().to_string(), "0-1");
    }

    #[test]
    fn import_needs_the_declared_shape() {
        assert!(parse(&full()).unwrap().missing_for_import().is_empty());
        let p = parse(&json!({"schema": "kvcr.profile/v1", "engine_id": "e1", "tp": 2})).unwrap();
        assert_eq!(
            p.missing_for_import(),
            ["world_size", "pp", "model", "geometry", "gpus"]
        );
    }

    #[test]
    fn minimal_profile_and_nulls() {
        let p = parse(&json!({"schema": "kvcr.profile/v1", "engine_id": "e1"})).unwrap();
        assert_eq!(p.engine_id, "e1");
        assert_eq!(p.world_size, None);
        assert_eq!(p.gpus, None);
        let p = parse(
            &json!({"schema": "kvcr.profile/v1", "engine_id": "e1", "tp": null, "model": null}),
        )
        .unwrap();
        assert_eq!((p.tp, p.model), (None, None));
    }

    #[test]
    fn field_errors_name_field_expected_found() {
        let mut v = full();
        v["geometry"]["num_layers"] = json!(0);
        let err = parse(&v).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid profile: `geometry.num_layers`: out of range: expected integer \
                1..=4294967296, found 0"
        );
        let e = &err.field_errors()[0];
        assert_eq!(e.field, "geometry.num_layers");
        assert_eq!(e.expected, "integer 1..=4294967296");
        assert_eq!(e.found, "0");
    }

    #[test]
    fn schema_and_unknown_and_missing() {
        let e = errors(&json!({"schema": "kvcr.retained-rank/v1", "engine": "x"}));
        let fields: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.field.as_str(), e.problem.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("engine", "unknown field"),
                ("schema", "wrong schema"),
                ("engine_id", "missing field"),
            ]
        );
        assert_eq!(e[1].expected, "\"kvcr.profile/v1\"");
        assert_eq!(e[2].found, crate::format::descriptor::check::MISSING);
    }

    #[test]
    fn nested_shapes_are_the_descriptor_rules() {
        let mut v = full();
        v["model"] = json!({"name": "m", "revision": ""});
        v["gpus"][1] = json!("GPU-3F9A1B2C-4D5E-6F70-8192-A3B4C5D6E7F8");
        v["incarnation"] = json!("00000000-0000-0000-0000-000000000000");
        v["min_epoch"] = json!(1.5);
        let e = errors(&v);
        let msgs: Vec<String> = e.iter().map(FieldError::message).collect();
        assert_eq!(
            msgs,
            [
                "model.revision: empty string, found \"\"",
                "model.quantization: missing field",
                "gpus[1]: uppercase UUID (must be lowercase), found \
                    \"GPU-3F9A1B2C-4D5E-6F70-8192-A3B4C5D6E7F8\"",
                "incarnation: nil UUID, found \"00000000-0000-0000-0000-000000000000\"",
                "min_epoch: float not allowed, found 1.5",
            ]
        );
    }

    #[test]
    fn self_contradictions() {
        let mut v = full();
        v["tp"] = json!(4);
        let e = errors(&v);
        assert_eq!(e[0].field, "world_size");
        assert_eq!(e[0].expected, "4 × 1 = 4");
        let mut v = full();
        v["gpus"] = json!(["GPU-3f9a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8"]);
        assert_eq!(errors(&v)[0].field, "gpus");
        let mut v = full();
        v["gpus"][1] = v["gpus"][0].clone();
        let e = errors(&v);
        assert_eq!(e[0].field, "gpus[1]");
        assert_eq!(e[0].problem, "GPU already listed for rank 0");
    }

    #[test]
    fn malformed_json() {
        let err = parse_profile(br#"{"schema":"kvcr.profile/v1","schema":"x"}"#).unwrap_err();
        assert!(matches!(err, ProfileError::Malformed(_)));
        assert_eq!(
            err.to_string(),
            "profile is not valid JSON: duplicate key \"schema\" at byte 28"
        );
        assert!(matches!(
            parse_profile(b""),
            Err(ProfileError::Malformed(_))
        ));
        assert!(matches!(
            parse_profile(b"[]"),
            Err(ProfileError::Invalid { .. })
        ));
    }
}
