//! docs/format.md §8.10 at the audit: one handle in one descriptor at
//! disjoint byte ranges is one exported segment carved into allocations
//! (accepted); at overlapping ranges it is the same memory twice (KV111,
//! rejected, exit 1); in two ranks it is KV111 whatever the ranges.

use crate::util::testkit::{put, Desc};
use crate::util::{audit_json, codes, has};
use serde_json::{json, Value};

fn one_rank(kind: &'static str, edit: impl FnOnce(&mut Value)) -> (i32, Value) {
    let t = tempfile::tempdir().unwrap();
    let mut g = Desc::new("seg", 0, 1, 1);
    g.handle_kind = kind;
    put(t.path(), "rank-0.json", &g.bytes_with(edit));
    audit_json(t.path(), &[])
}

/// allocations[1] and [2] carry allocations[0]'s handle at these offsets.
fn carve(kind: &'static str, offsets: [Option<u64>; 3]) -> (i32, Value) {
    one_rank(kind, |v| {
        let a = v["allocations"].as_array_mut().unwrap();
        let extra = a[0].clone();
        a.push(extra);
        for n in 1..3 {
            a[n]["handle"] = a[0]["handle"].clone();
            a[n]["id"] = json!(format!("kv-{n}"));
        }
        for (n, o) in offsets.iter().enumerate() {
            match o {
                Some(o) => a[n]["offset_bytes"] = json!(o),
                None => {
                    a[n].as_object_mut().unwrap().remove("offset_bytes");
                }
            }
        }
    })
}

fn size0(kind: &'static str) -> u64 {
    let mut g = Desc::new("seg", 0, 1, 1);
    g.handle_kind = kind;
    g.value()["allocations"][0]["size_bytes"].as_u64().unwrap()
}

#[test]
fn disjoint_ranges_of_one_handle_are_accepted() {
    for kind in ["cuda_ipc", "fabric", "posix_fd"] {
        let s = size0(kind);
        // In order, out of order, and with the first at an offset.
        for offsets in [
            [None, Some(s), Some(2 * s)],
            [Some(2 * s), None, Some(s)],
            [Some(s), Some(3 * s), Some(2 * s)],
        ] {
            let (exit, v) = carve(kind, offsets);
            assert!(
                !codes(&v).contains(&"KV111".to_string()),
                "{kind} {offsets:?}: {v:#}"
            );
            assert_eq!(exit, 0, "{kind} {offsets:?}: {v:#}");
            assert_eq!(v["groups"][0]["verdict"], "accept", "{kind}");
        }
    }
}

#[test]
fn overlapping_ranges_of_one_handle_are_kv111() {
    for kind in ["cuda_ipc", "fabric", "posix_fd"] {
        let s = size0(kind);
        for (offsets, pair) in [
            // One byte of overlap between [1] and [2].
            (
                [None, Some(s), Some(2 * s - 1)],
                "allocations[1] and allocations[2]",
            ),
            // [0] at offset 0 and [2] at offset 0 (absent and explicit 0).
            (
                [None, Some(s), Some(0)],
                "allocations[0] and allocations[2]",
            ),
            // [2] inside [0]'s range.
            (
                [None, Some(2 * s), Some(s / 2)],
                "allocations[0] and allocations[2]",
            ),
        ] {
            let (exit, v) = carve(kind, offsets);
            assert_eq!(exit, 1, "{kind} {offsets:?}: {v:#}");
            assert!(has(&v, "KV111", "rank-0.json"), "{kind} {offsets:?}: {v:#}");
            assert_eq!(v["groups"][0]["verdict"], "reject", "{kind}");
            assert!(
                v["groups"][0]["cause"].as_str().unwrap().contains("KV111"),
                "{kind}"
            );
            let text = v.to_string();
            assert!(
                text.contains(pair),
                "{kind} {offsets:?}: want {pair}: {v:#}"
            );
        }
    }
}

#[test]
fn disjoint_ranges_in_two_ranks_stay_kv111() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("seg", 0, 2, 1);
    let r0 = g.value();
    let s = r0["allocations"][0]["size_bytes"].as_u64().unwrap();
    put(t.path(), "rank-0.json", &g.bytes());
    let mut g1 = g.clone();
    g1.rank = 1;
    put(
        t.path(),
        "rank-1.json",
        &g1.bytes_with(|v| {
            v["allocations"][0]["handle"] = r0["allocations"][0]["handle"].clone();
            v["allocations"][0]["offset_bytes"] = json!(16 * s);
        }),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(has(&v, "KV111", "rank-1.json"), "{v:#}");
    assert!(has(&v, "KV111", "rank-0.json"), "{v:#}");
}

#[test]
fn examine_applies_the_same_rule() {
    let s = size0("fabric");
    for (second_offset, want_exit) in [(s, 0), (s - 1, 1)] {
        let t = tempfile::tempdir().unwrap();
        let mut g = Desc::new("seg", 0, 1, 1);
        g.handle_kind = "fabric";
        put(
            t.path(),
            "rank-0.json",
            &g.bytes_with(|v| {
                let h = v["allocations"][0]["handle"].clone();
                v["allocations"][1]["handle"] = h;
                v["allocations"][1]["offset_bytes"] = json!(second_offset);
            }),
        );
        let out = crate::util::kvcr()
            .args(["examine", "--format", "json"])
            .arg(t.path().join("rank-0.json"))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(want_exit), "{v:#}");
        assert_eq!(
            codes(&v).contains(&"KV111".to_string()),
            want_exit == 1,
            "{v:#}"
        );
    }
}
