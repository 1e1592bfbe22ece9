//! `kvcr gms`: the GMS reader family (docs/format.md §14), one vertical
//! folder with its own layers, lowest first (README.md "Architecture",
//! tests/it/project/architecture.rs `GMS_LAYERS`):
//!
//! - [`format`](mod@format): the artifacts' byte layouts and names (§14.1–§14.5), pure;
//! - [`rules`]: what each artifact saw in, findings and a verdict out
//!   (§14.6), pure;
//! - [`read`]: everything that touches the system: discovery, the
//!   read-only opens, `/proc/locks`, the cohort probe, the processes
//!   `--live` asks about;
//! - [`print`](mod@print): the table and the `kvcr.gms-report/v1` document (§14.8);
//! - [`run`]: the run that drives them (find, read twice, judge).
//!
//! The shared layers below it (`crate::format`, `crate::rules`,
//! `crate::io`) hold what every family uses: finding codes and their
//! explanations, the trusted `/proc`, the safe reader.

pub mod format;
pub mod print;
pub mod read;
pub mod rules;
pub mod run;

#[cfg(test)]
mod tests_rules;
