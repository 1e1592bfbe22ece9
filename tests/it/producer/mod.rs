//! The producer's side: `kvcr seal`, `kvcr digest`, the writers and the lifecycle of docs/format.md §3.5.

mod lifecycle;
mod writer;
