//! Descriptor parser + validator (verdict core).
//!
//! The input is one or more descriptor files separated by NUL bytes (a raw
//! NUL can never occur inside valid JSON text, so a single valid descriptor
//! is simply the whole input). Each file is parsed with
//! `kvcr_audit::descriptor::parse_descriptor`, then all of them are audited
//! together as one inventory, in memory through `kvcr_audit::api::audit_files`
//! (inventory.rs), given in one order and in the reverse order, once more
//! in live mode on a node about which nothing is known (`KVCR_NODE_FACTS`;
//! its note goes to stderr: run with `-close_fd_mask=2`), and, for one input
//! in 64, on disk through `kvcr_audit::api::audit` (files written to a private
//! directory in the reverse order), which must judge alike.
//!
//! Oracles (a failed assertion is a crash):
//! - parsing never panics and reports at most `MAX_FINDINGS` findings;
//! - keeping the allocations or not changes nothing but the allocations
//!   (same findings, same identity, same summary);
//! - a file without findings yields a descriptor, and a descriptor comes
//!   with no finding other than a KV008 digest mismatch;
//! - a descriptor without findings really carries the docs/format.md §3.2 digest of its
//!   own bytes, and its identity agrees with the best-effort `Ident`;
//! - judging never panics, exits 0 or 1, and only files without findings
//!   ever sit in an accepted rank;
//! - the verdicts and the whole report do not depend on the order in which
//!   the files were given or created, nor on the route (memory or disk);
//! - live mode on a node about which nothing is known changes no verdict.
#![no_main]

use kvcr_audit::descriptor::parse::{compute_digest, MAX_FINDINGS};
use kvcr_audit::descriptor::{parse_descriptor, parse_descriptor_with};
use kvcr_audit::api::AuditOptions;
use kvcr_audit::finding::Code;
use libfuzzer_sys::fuzz_target;
use std::sync::Once;

mod inventory;

/// At most this many files per input, to keep one execution cheap.
const MAX_FILES: usize = 16;

/// A node about which nothing is known, for the live audit.
fn unknown_node() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let p = std::env::temp_dir().join(format!("kvcr-fuzz-node-{}.json", std::process::id()));
        let facts = r#"{"boot_id": null, "hostname": null, "processes": {},
            "processes_unreadable": "fuzz", "gpus": null}"#;
        std::fs::write(&p, facts).expect("write the node facts");
        // The fuzzer runs one input at a time on this thread: nothing
        // reads the environment meanwhile.
        std::env::set_var("KVCR_NODE_FACTS", p);
    });
}

fuzz_target!(|data: &[u8]| {
    unknown_node();
    let mut written = Vec::new();
    let mut clean = Vec::new();
    for (i, bytes) in data.split(|&b| b == 0).take(MAX_FILES).enumerate() {
        let out = parse_descriptor(bytes);
        let lean = parse_descriptor_with(bytes, false);
        assert_eq!(
            format!("{:?}", (&out.findings, &out.ident)),
            format!("{:?}", (&lean.findings, &lean.ident)),
            "keeping the allocations changed the findings"
        );
        assert_eq!(lean.descriptor.is_some(), out.descriptor.is_some());
        if let (Some(a), Some(b)) = (&lean.descriptor, &out.descriptor) {
            assert_eq!(a.alloc_summary, b.alloc_summary);
            assert!(a.allocations.is_none());
            assert!(b.allocations.is_some());
            let mut full = b.clone();
            full.allocations = None;
            assert_eq!(&full, a, "keeping the allocations changed the descriptor");
        }
        assert!(out.findings.len() <= MAX_FINDINGS, "{:?}", out.findings);
        assert!(
            out.findings.iter().all(|f| f.is_reject()
                && matches!(f.code, Code::KV006 | Code::KV007 | Code::KV008)),
            "{:?}",
            out.findings
        );
        if out.findings.is_empty() {
            assert!(out.descriptor.is_some(), "no finding and no descriptor");
        }
        if let Some(d) = &out.descriptor {
            assert!(
                out.findings.iter().all(|f| f.code == Code::KV008),
                "descriptor returned beside {:?}",
                out.findings
            );
            if out.findings.is_empty() {
                assert_eq!(compute_digest(bytes).expect("parsed before"), d.digest);
            }
            assert_eq!(out.ident.engine_id.as_deref(), Some(d.engine_id.as_str()));
            assert_eq!(out.ident.incarnation, Some(d.incarnation));
            assert_eq!(out.ident.epoch, Some(d.epoch));
            assert_eq!(out.ident.rank, Some(d.rank));
            assert!(d.allocated_bytes() > 0);
        }
        // File-name rank: the content's when known, else the chunk index.
        let name_rank = out.ident.rank.unwrap_or(i as u64);
        let path = format!("f{i}/rank-{name_rank}.json");
        if out.findings.is_empty() {
            clean.push(path.clone());
        }
        written.push((path, bytes));
    }

    // In memory (kvcr_audit::api::audit_files), in the order given and reversed.
    let o = AuditOptions::default();
    let report = inventory::audit_mem(&written, &o);
    let status = report["exit_status"].as_i64().expect("exit status");
    assert!(status == 0 || status == 1, "exit status {status}");
    let groups = report["groups"].as_array().expect("groups");
    for g in groups {
        if g["verdict"] == "accept" {
            let ranks = g["ranks"].as_array().expect("ranks");
            assert!(!ranks.is_empty());
            for r in ranks {
                let path = r["path"].as_str().expect("path");
                assert!(
                    clean.iter().any(|c| c == path),
                    "accepted a file with findings: {path}"
                );
            }
        }
    }
    let reversed: Vec<_> = written.iter().rev().cloned().collect();
    inventory::assert_same(
        &report,
        &inventory::audit_mem(&reversed, &o),
        || inventory::audit_mem(&written, &o),
        "order-dependent verdict",
    );
    // A fixed sample also on disk, created in the reverse order (through
    // kvcr_audit::api::audit): the in-memory route judges as the real one.
    if inventory::sampled(data) {
        let dir = inventory::Dir::new();
        for (path, bytes) in &reversed {
            dir.write(path, bytes);
        }
        inventory::assert_same(
            &report,
            &inventory::audit(&dir.0, &o),
            || inventory::audit_mem(&written, &o),
            "in memory and on disk judged differently",
        );
    }

    // Live mode with a node about which nothing is known: never a mismatch.
    let live = AuditOptions {
        live: true,
        ..AuditOptions::default()
    };
    let j = inventory::audit_mem(&written, &live);
    for (a, b) in groups.iter().zip(j["groups"].as_array().expect("groups")) {
        assert_eq!(a["verdict"], b["verdict"], "unknown node facts changed a verdict");
    }
});
