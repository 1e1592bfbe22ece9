//! docs/format.md §8: the all-or-nothing import of one accepted rank group.
//!
//! Read it in the order an import runs:
//! - [`gate`]: the order of answers up to the driver, the checks besides the
//!   verdict, the fleet-report proof, and the library's readiness entry;
//! - [`plan`]: an accepted group's descriptors → one rank each (rank → GPU
//!   UUID → allocations), and the `kvcr.import-plan/v1` document;
//! - [`engine`]: the backend trait, the ledger, every rank or none, the CUDA
//!   and simulated backends, pidfd;
//! - [`run`]: `kvcr import` itself, which drives the three: signals,
//!   the hold's ready file, the import log, the report and its printing.
//!
//! [`spec`] holds the plain values an import is asked for (mode, steps,
//! the backend choice, the log's target).

pub mod engine;
pub mod gate;
pub mod plan;
pub mod report;
pub mod run;
pub mod spec;
