//! JSON reader against serde_json (a differential oracle).
//!
//! Any input: `kvcr_audit::descriptor::json::parse` and `serde_json` must read the
//! same tree when both accept; the hand reader may refuse what serde_json
//! accepts only for its documented reasons (a duplicate key, nesting deeper
//! than `MAX_DEPTH`), and accept what serde_json refuses only for a number
//! literal beyond `f64`. The oracle is the test kit's `json_oracle`
//! (crates/kvcr-testkit), which `cargo test` also runs as property tests
//! (tests/it/report/json_oracle.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kvcr_testkit::json_oracle::check(data);
});
