//! The library (`kvcr::api`, docs/format.md §13) and the public surface it promises.

mod api;
mod public_surface;
