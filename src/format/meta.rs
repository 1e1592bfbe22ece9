//! Report metadata (docs/format.md §9.4): who wrote a report, when, from
//! which facts, with which options and with which exit status; shared by
//! the audit, merge and import reports.

use serde::Serialize;

pub use crate::format::ids::AUDIT_REPORT as REPORT_SCHEMA;

/// The options a run was judged under (flags, else the profile's).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Options {
    pub engine: Option<crate::format::descriptor::EngineId>,
    pub profile: Option<String>,
    /// Where `profile` came from, `"flag"` or `"env"`; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_source: Option<&'static str>,
    pub min_epoch: Option<u64>,
    pub max_age_s: Option<u64>,
    pub local_ranks: Option<crate::format::rankset::RankSet>,
    pub incarnation: Option<uuid::Uuid>,
}

/// Report metadata (docs/format.md §9.4), shared by the audit, merge and
/// import reports.
#[derive(Clone, Debug, Serialize)]
pub struct Meta {
    pub kvcr_version: &'static str,
    pub generated_unix_ms: u64,
    /// This node's hostname (lets `kvcr merge` tell nodes apart); `null` in
    /// a merged report.
    pub host: Option<String>,
    /// The node's boot id, when live and readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<uuid::Uuid>,
    pub live: bool,
    /// Facts that could not be checked reject (`audit --strict`, every real import).
    pub strict: bool,
    /// Where node facts came from: "proc", or the facts file
    /// (`KVCR_NODE_FACTS=PATH`); `null` offline.
    pub node_facts_source: Option<String>,
    pub options: Options,
    pub exit_status: i32,
}

impl Meta {
    /// The metadata of a report whose exit status is already known: there
    /// is no placeholder status a report could be printed with.
    pub fn new(live: bool, now_ms: u64, exit_status: i32) -> Meta {
        Meta {
            kvcr_version: crate::format::version::VERSION,
            generated_unix_ms: now_ms,
            host: None,
            boot_id: None,
            live,
            strict: false,
            node_facts_source: None,
            options: Options::default(),
            exit_status,
        }
    }
}

/// `kvcr merge` only: what the inputs were.
#[derive(Clone, Debug, Serialize)]
pub struct MergeMeta {
    /// The per-node reports merged, in argument order.
    pub reports: Vec<String>,
    /// Every input report was written by `kvcr audit --live`.
    pub all_inputs_live: bool,
    /// Age of the oldest input at merge time (from its `generated_unix_ms`);
    /// `null` when an input does not say when it was written.
    pub oldest_input_age_ms: Option<u64>,
    /// Where each input came from, in argument order.
    pub inputs: Vec<MergeInput>,
}

/// `kvcr merge` only: one input report, as it describes itself. `kvcr
/// import --fleet-report` finds this node's share by `host` and `boot_id`.
#[derive(Clone, Debug, Serialize)]
pub struct MergeInput {
    /// The report's name (its path as given to merge).
    pub report: String,
    pub host: Option<String>,
    pub boot_id: Option<uuid::Uuid>,
    pub live: bool,
    /// When the input was written; `null` when it does not say.
    pub generated_unix_ms: Option<u64>,
}
