//! The library (`kvcr_audit::api`, docs/format.md §13) and the public surface it promises.

mod api;
mod public_surface;
