//! kvcr: audit and all-or-nothing import of retained KV-cache inventories.
//!
//! Data flows one way: [`inventory`] → [`descriptor`] → ([`node`] facts) →
//! [`verdict`] → [`report`]; [`import`] consumes an accepted verdict.

pub mod app;
pub mod audit;
pub mod cli;
pub mod cuda_ffi;
pub mod descriptor;
pub mod error;
pub mod examine;
pub mod exit;
pub mod finding;
pub mod import;
pub(crate) mod input;
pub mod inventory;
pub mod merge;
pub mod node;
pub mod pipeline;
pub mod profile;
pub mod rankset;
pub mod report;
pub mod schema;
pub mod seal;
pub mod settings;
pub mod timefmt;
pub mod verdict;
pub mod version;
pub mod writer;

pub use version::VERSION;

// The test builders are dev-only (tests/it/util/testkit.rs); the unit tests
// include the same file, which names this crate `kvcr`.
#[cfg(test)]
extern crate self as kvcr;
#[cfg(test)]
#[path = "../tests/it/util/testkit.rs"]
mod testkit;
