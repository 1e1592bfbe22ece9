//! The services: each drives the adapters below it (`crate::io`) and the
//! verdict core (`crate::rules`) for one command, and hands the result to
//! a printer (`crate::report`): the audit ([`audit`], `kvcr audit`,
//! `kvcr merge`'s inputs, the import's gate), the examination of one
//! descriptor ([`examine`]) and the GMS run ([`gms`]).

pub mod audit;
pub mod examine;
pub mod gms;
