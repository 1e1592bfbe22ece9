//! Deployment profile parser (docs/format.md §4), and the verdict core under it.
//!
//! Any input is parsed with `kvcr_audit::profile::parse_profile`; a profile that
//! parses is then applied to a fixed inventory (two incarnations of the
//! fixtures' `llama3-70b-a` group and one other group), audited in memory
//! through `kvcr_audit::api::audit_files` (inventory.rs), its files given in one
//! order and in the reverse order, and for one input in 64 also on disk
//! through `kvcr_audit::api::audit`. Oracles: no panic; a refused profile says
//! why; judging exits 0 or 1, never accepts a group the profile names
//! without every rank (every local rank, for a group that spans nodes), and
//! depends neither on the order of the files nor on the route (memory or
//! disk).
#![no_main]

use kvcr_testkit as testkit;

use kvcr_audit::api::{AuditOptions, Profile};
use kvcr_audit::descriptor::parse_descriptor;
use kvcr_audit::profile::{parse_profile, ProfileError};
use testkit::{Desc, INCARNATION_B};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

mod inventory;

/// The fixed inventory: root-relative paths and sealed bytes.
fn files() -> &'static [(String, Vec<u8>)] {
    static FILES: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut files = Vec::new();
        for rank in 0..2 {
            files.push((
                format!("a/rank-{rank}.json"),
                Desc::new("llama3-70b-a", rank, 2, 1),
            ));
        }
        let mut newer = Desc::new("llama3-70b-a", 0, 2, 1);
        newer.incarnation = INCARNATION_B.to_string();
        newer.epoch = 2;
        files.push(("b/rank-0.json".to_string(), newer));
        let mut other = Desc::new("other", 0, 1, 1);
        other.group = 1;
        files.push(("c/rank-0.json".to_string(), other));
        files
            .into_iter()
            .map(|(path, d)| {
                assert!(parse_descriptor(&d.bytes()).findings.is_empty());
                (path, d.bytes())
            })
            .collect()
    })
}

/// The fixed inventory on disk, written in the reverse order.
fn on_disk() -> &'static inventory::Dir {
    static DIR: OnceLock<inventory::Dir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = inventory::Dir::new();
        for (path, bytes) in files().iter().rev() {
            dir.write(path, bytes);
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let profile = match parse_profile(data) {
        Ok(p) => p,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let ProfileError::Invalid { errors, total } = &e {
                assert!(!errors.is_empty() && *total >= errors.len());
            }
            return;
        }
    };
    if let (Some(ws), Some(tp), Some(pp)) = (profile.world_size, profile.tp, profile.pp) {
        assert_eq!(ws, tp * pp, "a self-contradicting profile was accepted");
    }
    let engine = profile.engine_id.to_string();
    let local = profile.local_ranks.clone();
    let o = AuditOptions {
        profile: Some(Profile::Json(data.to_vec())),
        ..AuditOptions::default()
    };
    let forward: Vec<(String, &[u8])> = files().iter().map(|(p, b)| (p.clone(), &b[..])).collect();
    let backward: Vec<_> = forward.iter().rev().cloned().collect();
    let report = inventory::audit_mem(&forward, &o);
    let status = report["exit_status"].as_i64().expect("exit status");
    assert!(status == 0 || status == 1);
    let named = report["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["engine_id"] == engine.as_str())
        .expect("the profile's group is always judged");
    if named["verdict"] == "accept" {
        let ws = named["world_size"].as_u64().expect("accepted with a world size");
        let ranks = named["ranks"].as_array().expect("ranks");
        // Every rank, or (a group spanning nodes) every local rank.
        match local.as_ref() {
            None => assert_eq!(ranks.len() as u64, ws),
            Some(l) => {
                let want = l.iter().filter(|&r| r < ws).count();
                assert_eq!(ranks.len(), want);
                assert!(ranks
                    .iter()
                    .all(|r| r["rank"].as_u64().is_some_and(|n| l.contains(n))));
            }
        }
    }
    inventory::assert_same(
        &report,
        &inventory::audit_mem(&backward, &o),
        || inventory::audit_mem(&forward, &o),
        "order-dependent verdict",
    );
    // A fixed sample also on disk (kvcr_audit::api::audit): the same judgement.
    if inventory::sampled(data) {
        inventory::assert_same(
            &report,
            &inventory::audit(&on_disk().0, &o),
            || inventory::audit_mem(&forward, &o),
            "in memory and on disk judged differently",
        );
    }
});
