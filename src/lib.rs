//! kvcr: audit and all-or-nothing import of retained KV-cache inventories.
//!
//! Data flows one way: [`inventory`] → [`descriptor`] → ([`node`] facts) →
//! [`verdict`] → [`report`]; [`import`] consumes an accepted verdict.

pub mod descriptor;
pub mod exit;
pub mod finding;
pub mod inventory;
