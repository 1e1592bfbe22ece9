//! The JSON Schemas (draft 2020-12) of kvcr's JSON formats, printed by
//! `kvcr schema`. They live as plain files under `schemas/` so operators and
//! other tools can read them without running kvcr; tests validate every
//! fixture and committed report against them.

use crate::report::json::REPORT_SCHEMA;

/// A JSON format kvcr reads or writes. The variants' doc comments are
/// `kvcr schema`'s help text, printed as written (`rank-<R>.json` is no
/// HTML tag).
#[allow(rustdoc::invalid_html_tags)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// The audit report (`kvcr audit --format json`), kvcr.audit-report/v1.
    Report,
    /// A retained-rank descriptor (rank-<R>.json), kvcr.retained-rank/v1.
    Descriptor,
    /// A deployment profile (--profile FILE), kvcr.profile/v1.
    Profile,
    /// The import report (`kvcr import --format json`), kvcr.import-report/v1.
    ImportReport,
    /// The ready file (`kvcr import --hold --ready-file PATH`), kvcr.import-ready/v1.
    Ready,
    /// The error document (`--format json` when the run could not happen), kvcr.error/v1.
    Error,
    /// The import plan (the library's gate, `kvcr import --dry-run`), kvcr.import-plan/v1.
    ImportPlan,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Report,
        Kind::Descriptor,
        Kind::Profile,
        Kind::ImportReport,
        Kind::Ready,
        Kind::Error,
        Kind::ImportPlan,
    ];

    /// The schema document, as committed under `schemas/`.
    pub fn text(self) -> &'static str {
        match self {
            Kind::Report => include_str!("../schemas/report.schema.json"),
            Kind::Descriptor => include_str!("../schemas/descriptor.schema.json"),
            Kind::Profile => include_str!("../schemas/profile.schema.json"),
            Kind::ImportReport => include_str!("../schemas/import-report.schema.json"),
            Kind::Ready => include_str!("../schemas/ready.schema.json"),
            Kind::Error => include_str!("../schemas/error.schema.json"),
            Kind::ImportPlan => include_str!("../schemas/import-plan.schema.json"),
        }
    }

    /// The `schema` member a document of this kind carries.
    pub fn schema_id(self) -> &'static str {
        match self {
            Kind::Report => REPORT_SCHEMA,
            Kind::Descriptor => crate::descriptor::SCHEMA,
            Kind::Profile => crate::profile::PROFILE_SCHEMA,
            Kind::ImportReport => crate::import::report::REPORT_SCHEMA,
            Kind::Ready => crate::import::ready::READY_SCHEMA,
            Kind::Error => crate::error::ERROR_SCHEMA,
            Kind::ImportPlan => crate::import::plan_document::PLAN_SCHEMA,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn every_schema_is_json_and_pins_its_schema_member() {
        for k in Kind::ALL {
            let v: serde_json::Value = serde_json::from_str(k.text()).unwrap();
            assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
            assert_eq!(v["properties"]["schema"]["const"], k.schema_id(), "{k:?}");
            assert_eq!(v["additionalProperties"], false, "{k:?}");
        }
    }
}
