//! What the GMS reader touches of the system (docs/format.md §14):
//! discovery, the read-only opens, `/proc/locks`, the cohort probe and the
//! processes `--live` asks about ([`read`]); the run that drives them is
//! the service's (`crate::service::gms`).

pub mod read;
