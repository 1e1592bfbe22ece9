//! JSON reader against serde_json (a differential oracle).
//!
//! Any input: `kvcr::descriptor::json::parse` and `serde_json` must read the
//! same tree when both accept; the hand reader may refuse what serde_json
//! accepts only for its documented reasons (a duplicate key, nesting deeper
//! than `MAX_DEPTH`), and accept what serde_json refuses only for a number
//! literal beyond `f64`. The oracle is tests/it/json_oracle.rs, which
//! `cargo test` also runs as property tests.
#![no_main]

#[path = "../../tests/it/json_oracle.rs"]
mod json_oracle;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    json_oracle::check(data);
});
