//! fixtures/offload/real/lmcache-0.5.6 and sglang-0.5.23: trees the
//! producers' own released writer code wrote (fixtures/offload/real/
//! make_lmcache_sglang.py, fixtures/offload/README). Each case in
//! expect.json gives the exit status and, per set, the producer, the
//! verdict, the exact codes found and (where given) the complete blocks.

use super::offload;
use crate::util::repo;
use serde_json::Value;
use std::collections::BTreeSet;

fn codes(s: &Value) -> BTreeSet<String> {
    s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn what_the_released_writers_wrote_is_judged_as_expected() {
    let dir = repo().join("fixtures/offload/real");
    let cases: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expect.json")).unwrap()).unwrap();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() >= 12, "{} cases", cases.len());
    let mut producers = BTreeSet::new();
    for c in cases {
        let name = c["case"].as_str().unwrap();
        let args = super::args_of(c);
        let (st, v) = offload(&[&dir.join(name).join("root")], &args);
        assert_eq!(st, c["exit_status"], "{name}: {v:#}");
        let want = c["sets"].as_array().unwrap();
        let got = v["sets"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{name}: {v:#}");
        let mut used = vec![false; got.len()];
        for w in want {
            let wcodes: BTreeSet<String> = w["codes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect();
            let i = (0..got.len())
                .find(|&i| {
                    !used[i]
                        && got[i]["producer"] == w["producer"]
                        && got[i]["verdict"] == w["verdict"]
                        && codes(&got[i]) == wcodes
                        && (w.get("complete").is_none()
                            || got[i]["blocks"]["complete"] == w["complete"])
                })
                .unwrap_or_else(|| panic!("{name}: no set like {w:#} in {v:#}"));
            used[i] = true;
            producers.insert(w["producer"].as_str().unwrap().to_string());
        }
    }
    for p in ["sglang", "lmcache", "lmcache-gds"] {
        assert!(producers.contains(p), "no real {p} case");
    }
}

/// The real-writer script rewrites exactly what is committed. It needs the
/// two wheels unpacked and a Python with numpy, cachetools and aiofile
/// (fixtures/offload/README); run it by hand:
/// `KVCR_OFFLOAD_WHEELS=DIR KVCR_OFFLOAD_PYTHON=VENV/bin/python cargo test
/// --test it -- --ignored offload::real_lmsg::the_script_writes_what_is_committed`
/// (DIR holding `lm/` and `sg/`).
#[test]
#[ignore = "needs the LMCache 0.5.6 and SGLang 0.5.23 wheels unpacked (KVCR_OFFLOAD_WHEELS)"]
fn the_script_writes_what_is_committed() {
    let wheels = std::path::PathBuf::from(std::env::var("KVCR_OFFLOAD_WHEELS").unwrap());
    let python = std::env::var("KVCR_OFFLOAD_PYTHON").unwrap_or_else(|_| "python3".into());
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("real");
    std::fs::create_dir(&copy).unwrap();
    let script = repo().join("fixtures/offload/real/make_lmcache_sglang.py");
    std::fs::copy(&script, copy.join("make_lmcache_sglang.py")).unwrap();
    let st = std::process::Command::new(python)
        .arg(copy.join("make_lmcache_sglang.py"))
        .arg(wheels.join("lm"))
        .arg(wheels.join("sg"))
        .status()
        .unwrap();
    assert!(st.success());
    let list = |root: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(root)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                (rel, std::fs::read(e.path()).unwrap())
            })
            // This script's own output (make.py writes the rest of real/).
            .filter(|(rel, _)| {
                rel == "expect.json"
                    || rel.starts_with("lmcache-0.5.6/")
                    || rel.starts_with("sglang-0.5.23/")
            })
            .collect();
        v.sort();
        v
    };
    assert!(
        list(&copy) == list(&repo().join("fixtures/offload/real")),
        "regenerate fixtures/offload/real"
    );
}
