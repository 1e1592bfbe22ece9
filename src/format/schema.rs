//! The JSON Schemas (draft 2020-12) of kvcr's JSON formats, printed by
//! `kvcr schema`. They live as plain files under `schemas/` so operators and
//! other tools can read them without running kvcr; tests validate every
//! fixture and committed report against them.

pub use crate::format::ids::Kind;

/// The documents themselves (the kinds and their ids are `crate::format::ids`,
/// below the command line that names them).
impl Kind {
    /// The schema document, as committed under `schemas/`.
    pub fn text(self) -> &'static str {
        match self {
            Kind::Report => include_str!("../../schemas/report.schema.json"),
            Kind::Descriptor => include_str!("../../schemas/descriptor.schema.json"),
            Kind::Profile => include_str!("../../schemas/profile.schema.json"),
            Kind::ImportReport => include_str!("../../schemas/import-report.schema.json"),
            Kind::Ready => include_str!("../../schemas/ready.schema.json"),
            Kind::Error => include_str!("../../schemas/error.schema.json"),
            Kind::ImportPlan => include_str!("../../schemas/import-plan.schema.json"),
            Kind::GmsReport => include_str!("../../schemas/gms-report.schema.json"),
            Kind::OffloadReport => include_str!("../../schemas/offload-report.schema.json"),
            Kind::PoolsReport => include_str!("../../schemas/pools-report.schema.json"),
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
