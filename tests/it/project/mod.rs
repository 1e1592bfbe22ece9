//! The repository itself: layering, formatting, packaging, the units shipped, doc references, skips.

mod architecture;
mod format_refs;
mod leaf_modules;
mod long_functions;
mod packaging;
mod rust_tokens;
mod rustfmt_coverage;
mod skips;
mod systemd_units;
mod workspace_layout;
