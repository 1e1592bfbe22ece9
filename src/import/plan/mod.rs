//! An accepted group's import plan: which descriptors, which GPU, which
//! allocations ([`select`]), and the `kvcr.import-plan/v1` document an
//! engine is handed ([`document`], docs/format.md §13.4).

pub mod document;
pub mod select;

pub use select::{Plan, PlannedRank};
