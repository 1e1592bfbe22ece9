//! What docs/format.md defines, as types and strict readers: the descriptor
//! (§3) and the deployment profile (§4), rank lists, finding codes and
//! findings (§5.3), exit statuses (§6), the `kvcr.audit-report/v1` wire
//! types (§9.2), the content rule (§3.6), the ids and JSON Schemas of every
//! document, and the terminal-safety rule (§9.6). Pure: nothing here reads
//! a file, the environment or a clock; every layer above builds on it.

pub mod content;
pub mod descriptor;
pub mod exit;
pub mod failure;
pub mod finding;
pub mod hex;
pub mod ids;
pub mod json;
pub mod message;
pub mod meta;
pub mod names;
pub mod profile;
pub mod rankset;
pub mod schema;
pub mod text;
pub mod timefmt;
pub mod version;
pub mod wire;
