//! The audit: the walker, the reader and the verdict core through `kvcr audit` (docs/format.md §2–§6, §11).

mod adversarial;
mod blame;
mod content;
mod engine_id;
mod fixtures;
mod handle_kind;
mod headline;
mod hostile;
mod live;
mod memory_identity;
mod no_sentinels;
mod node_notes;
mod parallel;
mod permission_count;
mod proc_note;
mod producer_user;
mod race;
mod scale_and_permissions;
mod typed_messages;
mod untrusted_inputs;
mod verdict_rules;
