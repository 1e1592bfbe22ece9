//! The walk of a flat directory larger than one `getdents64` buffer
//! (src/offload/walk.rs): with statx spread over threads the answer is the
//! one a single thread gives, order included (which files are listed
//! first, the ranks of a chunk in the order read), and counts are exact.

use super::kit::{mp_name, pt_name};
use super::{assert_code, offload};
use serde_json::Value;
use std::path::Path;

fn write(dir: &Path, name: &str, size: usize) {
    std::fs::write(dir.join(name), vec![7u8; size]).unwrap();
}

/// The document without what differs between runs by design.
fn answer(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    o.remove("generated_unix_ms");
    o.remove("options");
    v
}

#[test]
fn a_large_flat_directory_gives_one_answer_whatever_the_threads() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // 2,400 chunks of world 2 (4,800 files; names of ~90 bytes fill
    // several 64 KiB buffers), of which: 100 miss rank 1, 50 have a short
    // rank 0, 30 have rank 1 as a symlink; a second salt and a world-4 set
    // of the same model interleave; LMCache .pt files, staging files and
    // foreign names among them.
    for i in 0..2_400u32 {
        let short = i % 48 == 5;
        let link = i % 80 == 7;
        write(
            root,
            &mp_name("org/M", 2, 0, 0, i, None),
            if short { 100 } else { 512 },
        );
        if i % 24 == 3 {
            // rank 1 missing
        } else if link {
            std::os::unix::fs::symlink("nowhere", root.join(mp_name("org/M", 2, 1, 0, i, None)))
                .unwrap();
        } else {
            write(root, &mp_name("org/M", 2, 1, 0, i, None), 512);
        }
        if i % 10 == 0 {
            for r in 0..2 {
                write(root, &mp_name("org/M", 2, r, 0, i, Some("s1")), 256);
            }
            for r in 0..4 {
                if r != 3 || i % 20 != 0 {
                    write(root, &mp_name("org/M", 4, r, 1, i, None), 128);
                }
            }
        }
        if i % 16 == 0 {
            write(
                root,
                &pt_name("m", 2, i % 2, &format!("{:x}", i + 1), &[]),
                64,
            );
            write(root, &format!("foreign-{i}.bin"), 1);
            write(
                root,
                &mp_name("org/M", 2, i % 2, 0, 90_000 + i, None).replace(".data", ".tmp"),
                0,
            );
        }
    }
    let (st1, one) = offload(&[root], &["--threads", "1"]);
    assert_eq!(st1, 1);
    let m2 = one["sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["producer"] == "lmcache-mp"
                && s["identity"]["world_size"] == 2
                && s["identity"]["salt"].is_null()
        })
        .unwrap();
    assert_eq!(m2["blocks"]["total"], 2_400, "{m2:#}");
    assert_eq!(m2["blocks"]["incomplete"], 100, "{m2:#}");
    assert_eq!(m2["blocks"]["damaged"], 80, "{m2:#}");
    assert_eq!(m2["blocks"]["complete"], 2_400 - 100 - 80, "{m2:#}");
    assert_eq!(m2["staging"].as_array().unwrap().len(), 150);
    assert_code(m2, "KV303", "reject");
    assert_eq!(one["entries"], 6_470, "{:#}", one["entries"]);
    for threads in ["2", "3", "8"] {
        let (st, many) = offload(&[root], &["--threads", threads]);
        assert_eq!(st, st1);
        assert_eq!(answer(many), answer(one.clone()), "--threads {threads}");
    }
}
