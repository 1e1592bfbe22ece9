//! Everything that touches the system: the inventory walk and race-free
//! opens ([`inventory`]), the one safe reader of operator-named files
//! ([`safe_file`]), the node probes ([`node`]), the CUDA driver's FFI
//! ([`cuda_ffi`]), the parallel read pipeline ([`pipeline`]), stdout and
//! the output checks ([`output`]), the trusted `/proc` ([`procfs`]), the
//! kernel's lock table ([`locks`]) and the read-only open of another
//! program's artifact ([`read_only`]).
//! The services that drive them are `crate::service`'s.

pub mod cuda_ffi;
pub mod inventory;
pub mod locks;
pub mod node;
pub mod output;
pub mod pipeline;
pub mod procfs;
pub mod read_only;
pub mod safe_file;

#[cfg(test)]
mod tests_pipeline;
