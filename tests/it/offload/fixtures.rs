//! fixtures/offload/: every committed case (fixtures/offload/cases.json,
//! written by fixtures/offload/generate.py) gives the exit status and the
//! codes it claims, each with its verdict and headline; and the generator
//! rewrites exactly what is committed.

use super::{assert_code, offload};
use crate::util::repo;
use serde_json::Value;

#[test]
fn every_offload_fixture_gives_its_codes_and_exit_status() {
    let dir = repo().join("fixtures/offload");
    let cases: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for c in cases.as_array().unwrap() {
        let name = c["case"].as_str().unwrap();
        let args = super::args_of(c);
        let root = dir.join(name).join("root");
        let (st, v) = offload(&[&root], &args);
        assert_eq!(st, c["exit_status"], "{name}: {v:#}");
        for e in c["expect"].as_array().unwrap() {
            let producer = e["producer"].as_str().unwrap();
            let code = e["code"].as_str().unwrap();
            let set = v["sets"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| {
                    s["producer"] == producer
                        && s["findings"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|f| f["code"] == code)
                })
                .unwrap_or_else(|| panic!("{name}: no {producer} set with {code}: {v:#}"));
            assert_code(set, code, e["severity"].as_str().unwrap());
            seen.insert(code.to_string());
        }
    }
    // Every offload code has a committed fixture.
    let want: std::collections::BTreeSet<String> = (301..=323)
        .chain(350..=354)
        .map(|n| format!("KV{n}"))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn the_generator_writes_what_is_committed() {
    let Ok(out) = std::process::Command::new("python3").arg("-V").output() else {
        crate::util::missing("needs python3");
        return;
    };
    assert!(out.status.success());
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("offload");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(
        repo().join("fixtures/offload/generate.py"),
        copy.join("generate.py"),
    )
    .unwrap();
    let st = std::process::Command::new("python3")
        .arg(copy.join("generate.py"))
        .status()
        .unwrap();
    assert!(st.success());
    let list = |root: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| !e.file_type().is_dir())
            .filter(|e| !e.file_name().to_string_lossy().ends_with(".md"))
            .map(|e| {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                let bytes = if e.file_type().is_symlink() {
                    std::fs::read_link(e.path())
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes()
                } else {
                    std::fs::read(e.path()).unwrap()
                };
                (rel, bytes)
            })
            // README, and real/ (fixtures/offload/real/make.py's, from the
            // producers' own packages; tests/it/offload/real.rs)
            .filter(|(rel, _)| rel != "README" && !rel.starts_with("real/"))
            .collect();
        v.sort();
        v
    };
    assert!(
        list(&copy) == list(&repo().join("fixtures/offload")),
        "regenerate fixtures/offload"
    );
}
