//! The read pipeline's result never depends on threads: an inventory with
//! files created in shuffled order, broken files among them, audits to the
//! same bytes with one thread and with several (`KVCR_THREADS`); the
//! pipeline's own candidates are checked inside the crate
//! (src/io/tests_pipeline.rs).

use crate::util::testkit::{seal, to_bytes, Desc, INCARNATION_B};
use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A small deterministic generator (no dependency, same order every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

enum Content {
    Bytes(Vec<u8>),
    Symlink(&'static str),
}

/// Every file of the inventory: many accepted groups (enough descriptors
/// for several batches on several threads) and one of each kind of broken
/// file, with paths spread over directories.
fn inventory() -> Vec<(String, Content, u32)> {
    let mut files = Vec::new();
    for g in 0..24u32 {
        let ranks = 2 + u64::from(g % 3) * 2;
        for rank in 0..ranks {
            let mut d = Desc::new(&format!("par-{g:02}"), rank, ranks, 1);
            d.group = g;
            d.allocations = 1 + (g as usize % 4);
            let dir = format!("node{}/g{g:02}", g % 3);
            files.push((
                format!("{dir}/rank-{rank}.json"),
                Content::Bytes(d.bytes()),
                0o600,
            ));
        }
    }
    let d = |rank: u64| {
        let mut d = Desc::new("broken", rank, 8, 1);
        d.group = 99;
        d
    };
    // Digest mismatch: content edited after sealing.
    let edited = String::from_utf8(d(0).bytes())
        .unwrap()
        .replace("\"pid\": 4242", "\"pid\": 4243");
    files.push((
        "broken/rank-0.json".into(),
        Content::Bytes(edited.into()),
        0o600,
    ));
    // Schema error (missing field), sealed.
    let mut v = d(1).value();
    v.as_object_mut().unwrap().remove("gpu_uuid");
    seal(&mut v);
    files.push((
        "broken/rank-1.json".into(),
        Content::Bytes(to_bytes(&v)),
        0o600,
    ));
    // Malformed: cut in the middle.
    let mut cut = d(2).bytes();
    cut.truncate(cut.len() / 2);
    files.push(("broken/rank-2.json".into(), Content::Bytes(cut), 0o600));
    // Duplicate key.
    let dup = String::from_utf8(d(3).bytes())
        .unwrap()
        .replacen("{", "{\n  \"rank\": 3,", 1);
    files.push((
        "broken/rank-3.json".into(),
        Content::Bytes(dup.into()),
        0o600,
    ));
    // Two descriptors claiming rank 4 (duplicate-rank), one group-writable.
    files.push((
        "broken/a/rank-4.json".into(),
        Content::Bytes(d(4).bytes()),
        0o600,
    ));
    files.push((
        "broken/b/rank-4.json".into(),
        Content::Bytes(d(4).bytes()),
        0o666,
    ));
    // An older incarnation of rank 5 beside the current one.
    let mut old = d(5);
    old.incarnation = INCARNATION_B.into();
    old.epoch = 1;
    files.push((
        "broken/old/rank-5.json".into(),
        Content::Bytes(old.bytes()),
        0o600,
    ));
    let mut cur = d(5);
    cur.epoch = 2;
    files.push((
        "broken/rank-5.json".into(),
        Content::Bytes(cur.bytes()),
        0o600,
    ));
    // File name rank differs from content rank.
    files.push((
        "broken/rank-7.json".into(),
        Content::Bytes(d(6).bytes()),
        0o600,
    ));
    // Not a descriptor at all, torn, stray, a symlink, too large.
    files.push((
        "broken/rank-8.json".into(),
        Content::Bytes(b"[1, 2, 3]".to_vec()),
        0o600,
    ));
    files.push((
        "broken/.rank-6.json.x1y2.tmp".into(),
        Content::Bytes(b"{".to_vec()),
        0o600,
    ));
    files.push((
        "broken/README.txt".into(),
        Content::Bytes(b"notes".to_vec()),
        0o600,
    ));
    files.push((
        "broken/rank-9.json".into(),
        Content::Symlink("rank-0.json"),
        0o600,
    ));
    files.push((
        "huge/rank-0.json".into(),
        Content::Bytes(vec![b' '; 1024 * 1024 + 1]),
        0o600,
    ));
    files
}

/// Writes the inventory in a shuffled order, so directory order on disk
/// differs from name order.
fn build(root: &Path, seed: u64) {
    let mut files = inventory();
    Lcg(seed).shuffle(&mut files);
    for (rel, content, mode) in files {
        let p = root.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        match content {
            Content::Bytes(b) => {
                std::fs::write(&p, b).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            Content::Symlink(target) => std::os::unix::fs::symlink(target, &p).unwrap(),
        }
    }
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        if e.file_type().is_dir() {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

fn audit_bytes(root: &Path, threads: usize) -> (i32, Vec<u8>) {
    let out = kvcr()
        .env("KVCR_THREADS", threads.to_string())
        .arg("audit")
        .arg(root)
        .args(["--format", "json"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        crate::util::testkit::without_clock_bytes(&out.stdout),
    )
}

#[test]
fn parallel_audit_equals_sequential_byte_for_byte() {
    let t = tempfile::tempdir().unwrap();
    build(t.path(), 7);
    let (exit1, one) = audit_bytes(t.path(), 1);
    assert_eq!(exit1, 1, "{}", String::from_utf8_lossy(&one));
    let text = String::from_utf8(one.clone()).unwrap();
    for code in [
        "KV001", "KV003", "KV004", "KV006", "KV007", "KV008", "KV009", "KV010", "KV101", "KV102",
        "KV108",
    ] {
        assert!(text.contains(code), "{code} missing from the report");
    }
    for threads in [2, 3, 8] {
        let (exit, many) = audit_bytes(t.path(), threads);
        assert_eq!(exit, exit1);
        assert!(
            one == many,
            "KVCR_THREADS={threads} differs from KVCR_THREADS=1"
        );
    }
}

#[test]
fn same_report_whatever_the_creation_order() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    build(a.path(), 1);
    build(b.path(), 2);
    let (_, ra) = audit_json(a.path(), &[]);
    let (_, rb) = audit_json(b.path(), &[]);
    // Only the root differs (and the clock).
    let strip = |v: serde_json::Value, root: &Path| {
        let root = std::fs::canonicalize(root).unwrap().display().to_string();
        let mut v = crate::util::testkit::without_clock(v);
        v.as_object_mut().unwrap().remove("root");
        let text = serde_json::to_string(&v).unwrap().replace(&root, "<ROOT>");
        serde_json::from_str::<serde_json::Value>(&text).unwrap()
    };
    assert_eq!(strip(ra, a.path()), strip(rb, b.path()));
}
