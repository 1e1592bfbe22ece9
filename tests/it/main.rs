//! kvcr's integration tests: one test binary (linking the crate once, not
//! once per file), one module per former `tests/NAME.rs`, so a test keeps
//! its old name as `NAME::test` (`cargo test --test it fleet::`).
//! Shared helpers, and the one environment every kvcr command starts from,
//! are in [`util`]. The tests run as threads of one process: a test must not
//! change process-wide state (environment, current directory, signal
//! dispositions, inheritable file descriptors); see `util`.

mod util;

mod adversarial;
mod api;
mod architecture;
mod blame_and_file_kinds;
mod cli_output;
mod cli_terminal;
mod content;
mod edges;
mod edges2;
mod engine_id;
mod examine;
mod examples_run;
mod explain;
mod fakecuda;
mod fakecuda_content;
mod fakecuda_driver;
mod fakecuda_hold;
mod fakecuda_memory;
mod fakecuda_mig;
mod fakecuda_signals;
mod fixtures;
mod fleet;
mod fleet_gate_and_operator_files;
mod format_refs;
mod gate_parity;
mod gms;
mod gpu_proof;
mod group_and_merge_rules;
mod handle_kind;
mod headline;
mod hostile;
mod import_cli;
mod import_log;
mod json_oracle;
mod json_report;
mod json_schema;
mod leaf_modules;
mod lifecycle;
mod live;
mod man;
mod memory_identity;
mod merge_attacks;
mod merge_judge;
mod monitoring;
mod no_sentinels;
mod node_notes;
mod operator;
mod output_paths;
mod packaging;
mod parallel;
mod permission_count;
mod proc_note;
mod producer_user;
mod prometheus;
mod public_surface;
mod race;
mod rustfmt_coverage;
mod skips;
mod typed_messages;
mod units;
mod verdict_rules;
mod version;
mod workspace_layout;
mod writer;
