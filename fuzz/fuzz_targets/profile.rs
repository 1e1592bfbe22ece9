//! Deployment profile parser (docs/format.md §4), and the verdict core under it.
//!
//! Any input is parsed with `kvcr::profile::parse_profile`; a profile that
//! parses is then applied to a fixed inventory (two incarnations of the
//! fixtures' `llama3-70b-a` group and one other group), forwards and
//! backwards. Oracles: no panic; a refused profile says why; judging exits 0
//! or 1, never accepts a group the profile names without every rank (every
//! local rank, for a group that spans nodes), and does not depend on the
//! order of the files.
#![no_main]

use kvcr_testkit as testkit;

use kvcr::descriptor::parse_descriptor;
use kvcr::profile::{parse_profile, ProfileError};
use testkit::{Desc, INCARNATION_B};
use kvcr::internals::verdict::{judge, Candidate, Context, Expectations, Judgement, Verdict};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const NOW_MS: u64 = 1_764_460_800_000 + 60_000;

fn inventory() -> &'static [Candidate] {
    static INV: OnceLock<Vec<Candidate>> = OnceLock::new();
    INV.get_or_init(|| {
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
                let out = parse_descriptor(&d.bytes());
                assert!(out.findings.is_empty());
                Candidate {
                    raw_path: path.clone().into_bytes(),
                    path,
                    name_rank: Some(d.rank),
                    mode: Some(0o600),
                    ident: out.ident,
                    descriptor: out.descriptor,
                    findings: Vec::new(),
                }
            })
            .collect()
    })
}

fn render(j: &Judgement) -> String {
    format!(
        "{}\n{}\n{}",
        serde_json::to_string(&j.groups).unwrap(),
        serde_json::to_string(&j.summary).unwrap(),
        j.exit_status()
    )
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
    let engine = profile.engine_id.clone();
    let local = profile.local_ranks.clone();
    let expect = Expectations {
        profile: Some(profile),
        ..Expectations::default()
    };
    let ctx = Context {
        now_unix_ms: NOW_MS,
        node: None,
        expect: &expect,
    };
    let cands = inventory().to_vec();
    let forward = judge(cands.clone(), Vec::new(), &ctx);
    let status = forward.exit_status();
    assert!(status == 0 || status == 1);
    let named = forward
        .groups
        .iter()
        .find(|g| g.engine_id == engine)
        .expect("the profile's group is always judged");
    if named.verdict == Verdict::Accept {
        let ws = named.world_size.expect("accepted with a world size");
        // Every rank, or (a group spanning nodes) every local rank.
        match local.as_ref() {
            None => assert_eq!(named.ranks.len() as u64, ws),
            Some(l) => {
                let want = l.iter().filter(|&r| r < ws).count();
                assert_eq!(named.ranks.len(), want);
                assert!(named.ranks.iter().all(|r| r.rank.is_some_and(|n| l.contains(n))));
            }
        }
    }
    let mut reversed = cands;
    reversed.reverse();
    let backward = judge(reversed, Vec::new(), &ctx);
    assert_eq!(
        render(&forward),
        render(&backward),
        "order-dependent verdict"
    );
});
