//! The services: each drives the adapters below it (`crate::io`) and the
//! verdict core (`crate::rules`) for one command, and hands the result to
//! a printer (`crate::print`): the audit ([`audit`], `kvcr audit`,
//! `kvcr merge`'s inputs, the import's gate) and the examination of one
//! descriptor ([`examine`]). A reader family's run is its own folder's
//! (`crate::gms::run`).

pub mod audit;
pub mod examine;

#[cfg(test)]
mod tests_live;
