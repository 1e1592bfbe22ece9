//! docs/format.md §8: the all-or-nothing import of one accepted rank group.
//!
//! The pieces, each in its own file:
//! - [`execute`](mod@execute): the pure engine. It walks the plan
//!   (`crate::import::plan`: one [`PlannedRank`] per rank) step by step
//!   through a [`Backend`], records every acquired resource in the
//!   [`Ledger`] right after it is acquired, checks for an interrupt between
//!   steps, and on any failure or interrupt releases the ledger in exact
//!   reverse order before it returns.
//! - [`backend`]: the trait a GPU memory backend implements, one method
//!   per step; [`resource`]: what a step takes (the device, each resource,
//!   a mapping's placement) and the granularity rounding both backends use;
//!   [`error`]: why a step failed.
//! - [`ledger`]: what was taken, and the reverse-order release.
//! - [`distinct`]: whether two allocations are one memory (docs/format.md
//!   §8.10).
//! - [`cuda`]: the real backend on the CUDA driver API; [`sim`]: a
//!   deterministic simulated backend and a fault injector usable around
//!   either backend.
//! - [`pidfd`]: taking a duplicate of the owner's POSIX fd.
//!
//! What drives it lives beside it in `crate::import`: `gate` (what must
//! hold besides the verdict before a GPU call), `plan`, and `run` (audit
//! → gate → plan → execute → report, the signal flag, the hold's ready file
//! and the probe).

pub mod backend;
pub mod cuda;
pub mod distinct;
pub mod error;
pub mod execute;
pub mod ledger;
pub mod pidfd;
pub mod resource;
pub mod sim;

pub use crate::import::plan::{Plan, PlannedRank};
pub use crate::import::spec::Step;
pub use backend::Backend;
pub use distinct::{Compared, Distinct, Identity, IdentityKind, MemoryId};
pub use error::{BackendError, Cause, DriverCall, StepFailure};
pub use execute::{execute, Event, Outcome, RankResult};
pub use ledger::{Ledger, ReleaseReport};
pub use resource::{round_up, Device, Mapped, Resource};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_memory;
#[cfg(test)]
mod tests_pidfd;
