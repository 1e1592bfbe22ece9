//! Everything that touches the system: the inventory walk and race-free
//! opens ([`inventory`]), the one safe reader of operator-named files
//! ([`safe_file`]), the node probes ([`node`]), the CUDA driver's FFI
//! ([`cuda_ffi`]), the parallel read pipeline ([`pipeline`]), stdout and
//! the output checks ([`output`]) and the trusted `/proc` ([`procfs`]).
//! The services that drive them are `crate::service`'s.

pub mod cuda_ffi;
pub mod inventory;
pub mod node;
pub mod output;
pub mod pipeline;
pub mod procfs;
pub mod safe_file;

#[cfg(test)]
mod tests_pipeline;
