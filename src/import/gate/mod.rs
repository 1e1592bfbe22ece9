//! What must hold besides the verdict before a GPU call (docs/format.md
//! §8.9), asked in one order by `kvcr import` and the readiness gate alike.

pub mod checks;
pub mod fleet;
pub mod order;
pub mod readiness;
