//! JSON, both ways: the strict, depth-bounded reader every kvcr input goes
//! through ([`read`]: duplicate keys, trailing data and BOMs refused, number
//! literals kept as written, into a flat node list) and the terminal-safe
//! writer of every kvcr document (`write`, docs/format.md §9.6).

pub mod read;
mod write;

pub use read::*;
pub use write::write;
