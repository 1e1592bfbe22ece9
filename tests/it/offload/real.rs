//! fixtures/offload/real/: trees written by the producers' own released
//! code (vLLM 0.34.0 and 0.22.0 from their wheels, llm-d-kv-cache 7be76e1's
//! and its release 0.22's (7fa4f3d) file mapper and compiled C++ writers,
//! llm-d v0.8.1's nested paths), made by
//! fixtures/offload/real/make.py (fixtures/offload/README). For every case:
//! the exit status, and per set the producer, the verdict, the exact codes,
//! each code's severity and the headline.

use super::{assert_code, codes, offload};
use crate::util::repo;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// §15.4's severities: KV301-KV310 reject, the rest notices.
fn severity(code: &str) -> &'static str {
    match code[2..].parse::<u32>().unwrap() {
        301..=310 => "reject",
        _ => "notice",
    }
}

/// A manifest case (files of at least 16 MiB) made as sparse files: kvcr
/// reads names and sizes only.
fn materialize(manifest: &Path, into: &Path) -> PathBuf {
    let root = into.join("root");
    let list: Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    for e in list.as_array().unwrap() {
        let p = root.join(e["path"].as_str().unwrap());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(e["size"].as_u64().unwrap()).unwrap();
    }
    root
}

#[test]
fn every_real_writer_case_gives_its_sets_verdicts_and_codes() {
    let dir = repo().join("fixtures/offload/real");
    let cases: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    let cases = cases.as_array().unwrap();
    let mut producers = BTreeSet::new();
    for c in cases {
        let name = c["case"].as_str().unwrap();
        producers.insert(name.split('/').next().unwrap().to_string());
        let tmp = tempfile::tempdir().unwrap();
        let root = if c["manifest"] == true {
            materialize(&dir.join(name).join("manifest.json"), tmp.path())
        } else {
            dir.join(name).join("root")
        };
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let (st, v) = offload(&[&root], &args);
        assert_eq!(st, c["exit_status"], "{name}: {v:#}");
        let mut sets: Vec<&Value> = v["sets"].as_array().unwrap().iter().collect();
        let want = c["sets"].as_array().unwrap();
        assert_eq!(sets.len(), want.len(), "{name}: {v:#}");
        for e in want {
            let codes_want: BTreeSet<String> = e["codes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_string())
                .collect();
            let i = sets
                .iter()
                .position(|s| {
                    let got: BTreeSet<String> = codes(s).into_iter().map(|(c, _)| c).collect();
                    s["producer"] == e["producer"]
                        && s["path"]
                            .as_str()
                            .unwrap()
                            .ends_with(e["path_ends"].as_str().unwrap())
                        && got == codes_want
                })
                .unwrap_or_else(|| panic!("{name}: no set like {e}: {v:#}"));
            let s = sets.remove(i);
            assert_eq!(s["verdict"], e["verdict"], "{name}: {s:#}");
            for code in &codes_want {
                assert_code(s, code, severity(code));
            }
        }
    }
    // Each producer's released code has its cases.
    let want: BTreeSet<String> = [
        "llmd-0.22-7fa4f3d",
        "llmd-7be76e1",
        "llmd-v0.8.1",
        "vllm-0.22.0",
        "vllm-0.34.0",
    ]
    .map(String::from)
    .into();
    assert_eq!(producers, want);
    assert!(cases.len() >= 40, "{} cases", cases.len());
}
