//! `kvcr import`: the gate, the plan, the engine against the fake CUDA driver, the hold and the log (docs/format.md §8).

mod command;
mod content;
mod driver;
pub(crate) mod fakecuda;
mod gate_parity;
mod gpu_proof;
mod hold;
mod log;
mod memory;
mod mig;
mod signals;
