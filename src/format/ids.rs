//! The `schema` ids of kvcr's JSON documents and the [`Kind`] of each, in
//! one leaf (it names no other module of the crate), so that the command
//! line can name a kind and every module its id without pointing up; the
//! schema documents themselves are `crate::format::schema`'s. The modules that own
//! a format re-export its id under the name they always had.

/// The audit report (docs/format.md §9).
pub const AUDIT_REPORT: &str = "kvcr.audit-report/v1";
/// A retained-rank descriptor.
pub const RETAINED_RANK: &str = "kvcr.retained-rank/v1";
/// A deployment profile.
pub const PROFILE: &str = "kvcr.profile/v1";
/// The import report.
pub const IMPORT_REPORT: &str = "kvcr.import-report/v1";
/// The ready file of `kvcr import --hold --ready-file`.
pub const IMPORT_READY: &str = "kvcr.import-ready/v1";
/// The `schema` member of the error document (`schemas/error.schema.json`).
pub const ERROR: &str = "kvcr.error/v1";
/// The `schema` of an import plan.
pub const IMPORT_PLAN: &str = "kvcr.import-plan/v1";
/// The import log's record.
pub const IMPORT_LOG: &str = "kvcr.import-log/v1";
/// The GMS report (`kvcr gms --format json`, docs/format.md §14.8).
pub const GMS_REPORT: &str = "kvcr.gms-report/v1";
/// The offload report (`kvcr offload --format json`, docs/format.md §15.5).
pub const OFFLOAD_REPORT: &str = "kvcr.offload-report/v1";
/// The pools report (`kvcr pools --format json`, docs/format.md §16).
pub const POOLS_REPORT: &str = "kvcr.pools-report/v1";

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
    /// The GMS report (`kvcr gms --format json`), kvcr.gms-report/v1.
    GmsReport,
    /// The offload report (`kvcr offload --format json`), kvcr.offload-report/v1.
    OffloadReport,
    /// The pools report (`kvcr pools --format json`), kvcr.pools-report/v1.
    PoolsReport,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::Report,
        Kind::Descriptor,
        Kind::Profile,
        Kind::ImportReport,
        Kind::Ready,
        Kind::Error,
        Kind::ImportPlan,
        Kind::GmsReport,
        Kind::OffloadReport,
        Kind::PoolsReport,
    ];

    /// The `schema` member a document of this kind carries.
    pub fn schema_id(self) -> &'static str {
        match self {
            Kind::Report => AUDIT_REPORT,
            Kind::Descriptor => RETAINED_RANK,
            Kind::Profile => PROFILE,
            Kind::ImportReport => IMPORT_REPORT,
            Kind::Ready => IMPORT_READY,
            Kind::Error => ERROR,
            Kind::ImportPlan => IMPORT_PLAN,
            Kind::GmsReport => GMS_REPORT,
            Kind::OffloadReport => OFFLOAD_REPORT,
            Kind::PoolsReport => POOLS_REPORT,
        }
    }
}
