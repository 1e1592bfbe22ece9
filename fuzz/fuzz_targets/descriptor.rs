//! Descriptor parser + validator (verdict core).
//!
//! The input is one or more descriptor files separated by NUL bytes (a raw
//! NUL can never occur inside valid JSON text, so a single valid descriptor
//! is simply the whole input). Each file is parsed with
//! `kvcr::descriptor::parse_descriptor`, then all of them are judged together
//! as one inventory, forwards and backwards.
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
//!   the files were found.
#![no_main]

use kvcr::descriptor::parse::{compute_digest, MAX_FINDINGS};
use kvcr::descriptor::{parse_descriptor, parse_descriptor_with};
use kvcr::finding::Code;
use kvcr::internals::node::NodeFacts;
use kvcr::internals::verdict::{judge, Candidate, Context, Expectations, Judgement, Verdict};
use libfuzzer_sys::fuzz_target;

/// At most this many files per input, to keep one execution cheap.
const MAX_FILES: usize = 16;
const NOW_MS: u64 = 1_764_460_800_000 + 60_000;

fn render(j: &Judgement) -> String {
    let groups = serde_json::to_string(&j.groups).expect("groups serialise");
    let files = serde_json::to_string(&j.files).expect("files serialise");
    let summary = serde_json::to_string(&j.summary).expect("summary serialise");
    format!("{groups}\n{files}\n{summary}\n{}", j.exit_status())
}

fuzz_target!(|data: &[u8]| {
    let mut cands = Vec::new();
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
        cands.push(Candidate {
            path: path.clone(),
            raw_path: path.clone().into_bytes(),
            name_rank: Some(name_rank),
            mode: Some(0o600),
            ident: out.ident,
            descriptor: out.descriptor,
            findings: out
                .findings
                .into_iter()
                .map(|f| f.at(path.clone()))
                .collect(),
        });
    }

    let expect = Expectations::default();
    let ctx = Context {
        now_unix_ms: NOW_MS,
        node: None,
        expect: &expect,
    };
    let forward = judge(cands.clone(), Vec::new(), &ctx);
    let status = forward.exit_status();
    assert!(status == 0 || status == 1, "exit status {status}");
    for g in &forward.groups {
        if g.verdict == Verdict::Accept {
            assert!(!g.ranks.is_empty());
            for r in &g.ranks {
                assert!(
                    clean.contains(&r.path),
                    "accepted a file with findings: {}",
                    r.path
                );
            }
        }
    }
    let mut reversed = cands.clone();
    reversed.reverse();
    let backward = judge(reversed, Vec::new(), &ctx);
    assert_eq!(
        render(&forward),
        render(&backward),
        "order-dependent verdict"
    );

    // Live mode with a node about which nothing is known: never a mismatch.
    let facts = NodeFacts::unknown("fuzz");
    let live = Context {
        node: Some(&facts),
        ..ctx
    };
    let j = judge(cands, Vec::new(), &live);
    for (a, b) in forward.groups.iter().zip(&j.groups) {
        assert_eq!(a.verdict, b.verdict, "unknown node facts changed a verdict");
    }
});
