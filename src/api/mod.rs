//! The library API: what the `kvcr` command does, callable in-process
//! (docs/format.md §13, docs/python.md). The Python package `kvcr_audit`
//! (`python/`) is built on this module alone.
//!
//! Every function runs the code the command line runs, never a copy of a
//! rule: [`audit`] is `kvcr audit --format json`, [`examine`] is
//! `kvcr examine --format json`, [`seal_json`] and [`digest_json`] are
//! `kvcr seal` and `kvcr digest` on JSON text, [`write_rank_json`] is the
//! writer of docs/format.md §3.5, [`gate`] is `kvcr import` up to (not
//! including) the driver check (§8.9), answering with the import plan,
//! [`gms`] is `kvcr gms --format json` (§14), [`pools`] is `kvcr pools
//! --format json` (§16), [`offload`] is `kvcr offload --format json` (§15).
//!
//! Documents (reports, plans) come back as the exact JSON text the command
//! prints ([`Document`]), so a caller parses them with the JSON library it
//! already has; integers are never rounded through a float. A caller that
//! builds its own objects asks [`audit_structured`] or [`gate_structured`]
//! instead: the same document as a [`Structured`] value to hand to any
//! serde serializer, with no text rendered and none to parse back (the
//! Python package builds its dicts so).
//!
//! A process forked after a call may call again: what is kept per process
//! (the `/proc` root and the `/proc/self/fd` directory files are reopened
//! through) is opened anew in the child, and the parent's is neither used
//! nor closed (docs/format.md §2.3, §13.1).
//!
//! A library, not a command line (docs/format.md §13.1): it reads no
//! environment variable (what the command takes from `KVCR_PROFILE`,
//! `KVCR_NODE_FACTS` and `KVCR_THREADS` are options here), prints nothing
//! (the notes the command prints on stderr come back in
//! [`Document::notes`]) and keeps no process-wide cache that a long-running
//! caller would see go stale (the GPU list is read afresh on every live
//! call).
//!
//! ```no_run
//! use kvcr_audit::api::{audit, AuditOptions};
//! let report = audit("/run/kv/inventory".as_ref(), &AuditOptions::default())?;
//! println!("exit status {}", report.exit_status());
//! # Ok::<(), kvcr_audit::api::Error>(())
//! ```
//!
//! Versioning: this module follows the crate's semantic version; the JSON
//! documents carry their own `schema` (`kvcr.audit-report/v1`,
//! `kvcr.examine/v1`, `kvcr.import-plan/v1`, `kvcr.import-report/v1`,
//! `kvcr.gms-report/v1`, `kvcr.offload-report/v1`).

// One idea a file: what a call answers (document.rs) or fails with
// (error.rs); the audit of an inventory (inventory.rs); the readiness gate
// (readiness.rs); the reader families (readers.rs); the producer's side
// through JSON text (producer.rs; writer.rs is the same writer for a
// serde_json::Value); what a producer asks of this node (node.rs).
mod document;
mod error;
mod inventory;
mod node;
mod producer;
mod readers;
mod readiness;
pub mod writer;

pub use crate::format::content::{digest_content, sampled_ranges, Content, ContentError};
#[allow(deprecated)]
pub use document::{message_text, AuditReport, Document, Report, Structured};
pub use error::Error;
pub use inventory::{audit, audit_files, audit_structured, parse_age, AuditOptions, Profile};
pub use node::{boot_id, current_epoch, proc_start_ticks};
pub use producer::{
    digest_json, examine, seal_json, write_rank_json, write_rank_json_with, WriteOptions,
};
pub use readers::{gms, offload, parse_binding, pools, GmsOptions, OffloadOptions, PoolsOptions};
pub use readiness::{gate, gate_structured, GateOptions, ImportPlan};
