//! The read pipeline's candidates never depend on threads: the same
//! candidates and file verdicts, in the same order, with one thread and
//! with several, with the allocations kept or not (tests/it/audit/parallel.rs
//! checks the command's report bytes under `KVCR_THREADS`).

use crate::io::pipeline::{self, Options};
use crate::testkit::{put, seal, to_bytes, Desc, INCARNATION_B};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Groups over several directories, written out of name order, and broken
/// files among them (digest, schema, syntax, duplicate rank, an older
/// incarnation, a stray file, a symlink, one too large).
fn build(root: &Path) {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for g in (0..12u32).rev() {
        let ranks = 2 + u64::from(g % 3) * 2;
        for rank in (0..ranks).rev() {
            let mut d = Desc::new(&format!("par-{g:02}"), rank, ranks, 1);
            d.group = g;
            d.allocations = 1 + (g as usize % 4);
            files.push((format!("node{}/g{g:02}/rank-{rank}.json", g % 3), d.bytes()));
        }
    }
    let d = |rank: u64| {
        let mut d = Desc::new("broken", rank, 8, 1);
        d.group = 99;
        d
    };
    let edited = String::from_utf8(d(0).bytes())
        .unwrap()
        .replace("\"pid\": 4242", "\"pid\": 4243");
    files.push(("broken/rank-0.json".into(), edited.into()));
    let mut v = d(1).value();
    v.as_object_mut().unwrap().remove("gpu_uuid");
    seal(&mut v);
    files.push(("broken/rank-1.json".into(), to_bytes(&v)));
    let mut cut = d(2).bytes();
    cut.truncate(cut.len() / 2);
    files.push(("broken/rank-2.json".into(), cut));
    files.push(("broken/a/rank-4.json".into(), d(4).bytes()));
    files.push(("broken/b/rank-4.json".into(), d(4).bytes()));
    let mut old = d(5);
    old.incarnation = INCARNATION_B.into();
    files.push(("broken/old/rank-5.json".into(), old.bytes()));
    files.push(("broken/README.txt".into(), b"notes".to_vec()));
    files.push(("huge/rank-0.json".into(), vec![b' '; 1024 * 1024 + 1]));
    for (rel, bytes) in files {
        put(root, &rel, &bytes);
        let p = root.join(rel);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    std::os::unix::fs::symlink("rank-0.json", root.join("broken/rank-9.json")).unwrap();
}

#[test]
fn collect_is_the_same_on_any_number_of_threads() {
    let t = tempfile::tempdir().unwrap();
    build(t.path());
    let root = crate::io::inventory::resolve_root(t.path()).unwrap();
    let run = |threads: usize, keep_allocations: bool| {
        let opts = Options {
            threads,
            keep_allocations,
            producer_uid: None,
        };
        let (cands, files) = pipeline::collect(&root, &opts, &mut || {}).unwrap();
        format!("{cands:#?}\n{files:#?}")
    };
    let one = run(1, true);
    assert!(one.contains("kv-0"), "allocations kept");
    for code in ["KV001", "KV004", "KV006", "KV007", "KV010"] {
        assert!(
            one.contains(code),
            "{code} missing: the inventory lost a broken file"
        );
    }
    for threads in [2, 4] {
        assert_eq!(run(threads, true), one, "{threads} threads");
    }
    // Without allocations: everything else identical.
    let thin = run(3, false);
    assert_eq!(thin, run(1, false));
    assert!(!thin.contains("kv-0"));
}
