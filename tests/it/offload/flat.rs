//! lmcache-mp and LMCache local-disk identity groups (docs/format.md
//! §15.1, §15.2): never paired across world sizes or salts.

use super::kit::{hash, mp_name, pt_name};
use super::{assert_code, offload};
use serde_json::Value;

fn write(dir: &std::path::Path, name: &str, size: usize) {
    std::fs::write(dir.join(name), vec![1u8; size]).unwrap();
}

fn by_world<'a>(v: &'a Value, producer: &str, ws: u64) -> &'a Value {
    v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["producer"] == producer && s["identity"]["world_size"] == ws)
        .unwrap_or_else(|| panic!("no {producer} set of world size {ws} in {v:#}"))
}

#[test]
fn mp_sets_complete_incomplete_and_out_of_range() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..3 {
        for r in 0..2 {
            write(d.path(), &mp_name("org/M", 2, r, 0, i, None), 2048);
        }
    }
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = by_world(&v, "lmcache-mp", 2);
    assert_eq!(s["blocks"]["complete"], 3);
    assert_eq!(s["identity"]["model"], "org/M");
    assert_code(s, "KV316", "notice");
    std::fs::remove_file(d.path().join(mp_name("org/M", 2, 1, 0, 2, None))).unwrap();
    write(d.path(), &mp_name("org/M", 2, 0, 0, 1, None), 1000);
    write(
        d.path(),
        &mp_name("org/M", 2, 1, 0, 9, None).replace(".data", ".tmp"),
        0,
    );
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = by_world(&v, "lmcache-mp", 2);
    assert_code(s, "KV303", "reject");
    assert_code(s, "KV304", "reject");
    assert_code(s, "KV311", "notice");
    assert_eq!(s["staging"][0]["rank"], 1);
    // A rank byte at or above the world byte.
    write(
        d.path(),
        &mp_name("org/M", 2, 1, 0, 0, None).replace("0x02010201", "0x02020202"),
        2048,
    );
    let (_, v) = offload(&[d.path()], &[]);
    assert_code(by_world(&v, "lmcache-mp", 2), "KV310", "reject");
}

#[test]
fn mixed_world_sizes_are_separate_sets() {
    let d = tempfile::tempdir().unwrap();
    for r in 0..2 {
        write(d.path(), &mp_name("m", 2, r, 0, 0, None), 64);
    }
    write(d.path(), &mp_name("m", 4, 0, 0, 0, None), 32);
    let (st, v) = offload(&[d.path()], &["--chunk-bytes", "64"]);
    assert_eq!(st, 1);
    let two = by_world(&v, "lmcache-mp", 2);
    assert_eq!(two["verdict"], "ok");
    assert_code(two, "KV317", "notice");
    let four = by_world(&v, "lmcache-mp", 4);
    assert_code(four, "KV303", "reject");
    assert_code(four, "KV304", "reject");
    // Salts never pair either.
    let s = tempfile::tempdir().unwrap();
    write(s.path(), &mp_name("m", 2, 0, 0, 0, Some("tenantA")), 64);
    write(s.path(), &mp_name("m", 2, 1, 0, 0, Some("tenantB")), 64);
    let (st, v) = offload(&[s.path()], &[]);
    assert_eq!(st, 1);
    assert_eq!(v["sets"].as_array().unwrap().len(), 2);
}

#[test]
fn lmcache_local_disk_sets_legacy_and_ambiguous_names() {
    let d = tempfile::tempdir().unwrap();
    for h in ["-168c883837dc43ef", "9f0d8c7b770e52e"] {
        for w in 0..2 {
            write(d.path(), &pt_name("org/M", 2, w, h, &["user%alice"]), 4096);
        }
    }
    // The request's unfull last chunk, agreed by both workers.
    for w in 0..2 {
        write(
            d.path(),
            &pt_name("org/M", 2, w, "1f", &["user%alice"]),
            1024,
        );
    }
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = by_world(&v, "lmcache", 2);
    assert_code(s, "KV322", "notice");
    assert_code(s, "KV313", "notice");
    assert_eq!(s["blocks"]["complete"], 3);
    assert_eq!(s["identity"]["tags"][0], "user%alice");
    // A killed in-place writer: a short file on one worker only.
    write(
        d.path(),
        &pt_name("org/M", 2, 1, "9f0d8c7b770e52e", &["user%alice"]),
        100,
    );
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(by_world(&v, "lmcache", 2), "KV304", "reject");
    let o = tempfile::tempdir().unwrap();
    write(o.path(), "vllm@org-M@2@1@-1f.pt", 10);
    write(o.path(), "m@1@0@1f@half@t%v@1@0@2f@half.pt", 10);
    let (st, v) = offload(&[o.path()], &[]);
    assert_eq!(st, 0);
    let s = &v["sets"][0];
    assert_eq!(s["producer"], "unattributed");
    assert_code(s, "KV323", "notice");
    assert_code(s, "KV314", "notice");
    let _ = hash(0);
}

#[test]
fn sglang_files_without_a_model_are_ambiguous_not_judged() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), &format!("{}_org-Model-7B_1_2.bin", hash(0)), 10);
    write(d.path(), ".0123456789abcdef0123456789abcdef.tmp", 0);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0);
    let s = &v["sets"][0];
    assert_code(s, "KV314", "notice");
    assert_code(s, "KV311", "notice");
    assert_eq!(s["staging"][0]["rank"], Value::Null);
}
