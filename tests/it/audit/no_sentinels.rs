//! No sentinel stands for a state (issue #23, "closed vocabularies"): a
//! value that is not known is `None`, never a real-looking 0 or -1, and a
//! checked engine id is its own type. Each test states the guarantee at
//! the boundary where the old sentinel could be seen. Unit tests beside
//! the code cover what has no outside boundary: the headline's world size
//! (rules/cause.rs), an unknown file mode (rules/live.rs), a device
//! not asked of the driver (import/engine/tests.rs), a hand-built report with a
//! bad engine id (rules/fleet/merge.rs) and a fleet check without a local world size
//! (import/gate/fleet.rs).

use crate::util::fleet::{merge_paths, refused, Fleet};
use crate::util::testkit::Desc;
use kvcr_audit::descriptor::{parse_descriptor, parse_descriptor_with, EngineId};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A negative owner pid in a report is refused as written: the wire check
/// turned it into 0 before (`try_from(..).unwrap_or(0)`), so the error
/// named a value the report never held.
#[test]
fn a_negative_owner_pid_in_a_report_is_refused_showing_the_pid_it_holds() {
    let f = Fleet::new();
    for pid in [-5i64, i64::from(i32::MIN)] {
        let mut a: Value = f.node_report("a");
        a["groups"][0]["ranks"][0]["owner_pid"] = json!(pid);
        let pa = f.dir.path().join("edited-a.json");
        std::fs::write(&pa, serde_json::to_vec_pretty(&a).unwrap()).unwrap();
        let pb = f.dir.path().join("b.json");
        std::fs::write(&pb, serde_json::to_vec_pretty(&f.node_report("b")).unwrap()).unwrap();
        let r = merge_paths(&[pa, pb], "json");
        refused(&r, "edited-a.json", "groups[0].ranks[0].owner_pid");
        let want = format!(
            "`groups[0].ranks[0].owner_pid`: out of range: expected integer 1..={}, found {pid}",
            i32::MAX
        );
        assert!(r.stderr.contains(&want), "{want}: {}", r.stderr);
        assert!(!r.stderr.contains("found 0"), "{}", r.stderr);
    }
}

/// Allocations not kept are `None`, never an empty list (which a
/// descriptor cannot have: it holds 1 to 4096); kept, they are all there.
#[test]
fn allocations_not_kept_are_none_and_kept_ones_are_complete() {
    for n in [1, 3, 16] {
        let mut d = Desc::new("keep", 0, 1, 1);
        d.allocations = n;
        let bytes = d.bytes();
        let full = parse_descriptor(&bytes).descriptor.unwrap();
        let lean = parse_descriptor_with(&bytes, false).descriptor.unwrap();
        assert_eq!(full.allocations.as_ref().map(Vec::len), Some(n));
        assert_eq!(full.alloc_summary.count, n);
        assert_eq!(lean.allocations, None);
        // Everything else is the same.
        assert_eq!(lean.alloc_summary, full.alloc_summary);
        assert_eq!(lean.engine_id, full.engine_id);
    }
}

/// An engine id reads, prints, debugs, orders and serializes exactly as
/// the string it holds, so typed fields leave every output byte-identical;
/// only the rule makes one.
#[test]
fn an_engine_id_is_its_string_in_every_output_and_only_the_rule_makes_one() {
    let ids = ["vllm:llama-70b/prod-1", "B", "a", "x.y_z", "0"];
    let mut typed: Vec<EngineId> = ids.iter().map(|s| s.parse().unwrap()).collect();
    for (id, s) in typed.iter().zip(ids) {
        assert_eq!(id.to_string(), s);
        assert_eq!(format!("{id:?}"), format!("{s:?}"));
        assert_eq!(format!("{id:>30}"), format!("{s:>30}"));
        assert_eq!(
            serde_json::to_string(id).unwrap(),
            serde_json::to_string(s).unwrap()
        );
        assert_eq!(id.as_str(), s);
        assert!(*id == s && *id == *s);
    }
    // Byte order, as the String keys it replaces.
    let mut strings: Vec<&str> = ids.to_vec();
    strings.sort();
    typed.sort();
    assert_eq!(
        typed.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        strings
    );
    // Found by &str in a map keyed by ids.
    let map: BTreeMap<EngineId, usize> = typed.iter().cloned().zip(0..).collect();
    assert!(map.contains_key("vllm:llama-70b/prod-1") && !map.contains_key("vllm"));
    for bad in ["", "engine id", "é", "a\u{1b}b"] {
        assert!(bad.parse::<EngineId>().is_err(), "{bad:?}");
    }
    // The descriptor reader makes the same id the rule does.
    let d = parse_descriptor(&Desc::new("vllm:llama-70b/prod-1", 0, 1, 1).bytes());
    let want: EngineId = "vllm:llama-70b/prod-1".parse().unwrap();
    assert_eq!(d.descriptor.unwrap().engine_id, want);
    assert_eq!(d.ident.engine_id.as_deref(), Some("vllm:llama-70b/prod-1"));
}
