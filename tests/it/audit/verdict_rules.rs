//! Rules of the verdict core that a wrong rule would break, each pinned by
//! its exact code, verdict and message: the cases a mutation pass over
//! `src/rules/` found untested (docs/testing.md lists that pass and the
//! mutants it leaves alive, with the reason each one is equivalent).

use crate::util::testkit::{self, handle_hex, put, put_group, Desc, INCARNATION_A, INCARNATION_B};
use crate::util::{audit_json, codes};
use serde_json::{json, Value};

/// The rank row of `path` in any group of the report.
fn rank<'a>(v: &'a Value, path: &str) -> &'a Value {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["ranks"].as_array().unwrap())
        .find(|r| r["path"] == path)
        .unwrap_or_else(|| panic!("no rank {path}: {v:#}"))
}

/// The messages of the findings with `code` on one rank row.
fn messages(r: &Value, code: &str) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect()
}

/// Audits `dir/inv` with the profile `p`, written to `dir/profile.json`
/// (outside the inventory).
fn audit_with_profile(dir: &std::path::Path, p: &Value) -> (i32, Value) {
    let profile = dir.join("profile.json");
    std::fs::write(&profile, testkit::to_bytes(p)).unwrap();
    audit_json(&dir.join("inv"), &["--profile", profile.to_str().unwrap()])
}

/// The messages of the group-level findings with `code`.
fn group_messages(v: &Value, code: &str) -> Vec<String> {
    v["groups"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect()
}

// ---- Claims: who conflicts with whom (KV102) ------------------------------

/// A descriptor whose incarnation cannot be read has an unknown owner
/// lifetime: it may be any lifetime's, so it conflicts with every claimant
/// of its rank slot, and each known-lifetime claimant counts it as a rival
/// (docs/format.md §5.6). Killed mutant: `Claims::rivals` counting
/// `same - unknown` instead of `same + unknown`.
#[test]
fn a_known_lifetime_claimant_counts_a_rival_of_unknown_lifetime() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vr", 0, 2, 1);
    put_group(t.path(), "a", &g);
    put(
        t.path(),
        "b/rank-0.json",
        &g.bytes_with(|v| v["incarnation"] = json!("not-a-uuid")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject");
    let known = rank(&v, "a/rank-0.json");
    assert_eq!(known["verdict"], "reject", "{known:#}");
    assert_eq!(
        messages(known, "KV102"),
        ["rank 0 is claimed by 2 current descriptors: a/rank-0.json (this one) and b/rank-0.json"]
    );
    let unknown = rank(&v, "b/rank-0.json");
    assert_eq!(
        messages(unknown, "KV102"),
        ["rank 0 is claimed by 2 current descriptors: b/rank-0.json (this one) and a/rank-0.json"]
    );
    // The other rank has no rival and nothing else wrong.
    assert_eq!(rank(&v, "a/rank-1.json")["verdict"], "accept");
}

/// Two lifetimes tied on the highest epoch are not rivals of each other on
/// a rank (only one of them could ever be imported: KV107 says so), but a
/// claimant of unknown lifetime is a rival of both, and sees both.
#[test]
fn tied_lifetimes_are_not_rivals_but_an_unknown_lifetime_rivals_both() {
    let t = tempfile::tempdir().unwrap();
    let a = Desc::new("vr", 0, 2, 1);
    let mut b = a.clone();
    b.incarnation = INCARNATION_B.into();
    put_group(t.path(), "a", &a);
    put_group(t.path(), "b", &b);
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(!codes(&v).contains(&"KV102".to_string()), "{v:#}");
    assert_eq!(group_messages(&v, "KV107").len(), 1, "{v:#}");

    put(
        t.path(),
        "c/rank-0.json",
        &a.bytes_with(|v| v["incarnation"] = json!("not-a-uuid")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(
        messages(rank(&v, "a/rank-0.json"), "KV102"),
        ["rank 0 is claimed by 2 current descriptors: a/rank-0.json (this one) and c/rank-0.json"]
    );
    assert_eq!(
        messages(rank(&v, "b/rank-0.json"), "KV102"),
        ["rank 0 is claimed by 2 current descriptors: b/rank-0.json (this one) and c/rank-0.json"]
    );
    assert_eq!(
        messages(rank(&v, "c/rank-0.json"), "KV102"),
        ["rank 0 is claimed by 3 current descriptors: \
          c/rank-0.json (this one) and a/rank-0.json, b/rank-0.json"]
    );
    // Rank 1 of each tied lifetime has no rank rival.
    assert!(messages(rank(&v, "a/rank-1.json"), "KV102").is_empty());
    assert!(messages(rank(&v, "b/rank-1.json"), "KV102").is_empty());
}

// ---- KV111 within one descriptor: every repeat counted ----------------------

/// One handle at byte ranges that overlap is the same memory twice; the
/// finding names the first pair and counts the repeats, each allocation
/// whose range starts inside an earlier one ("N repeats in all": three
/// copies of one memory are two repeats), while the same handle at disjoint ranges is one
/// segment carved into allocations and is accepted (docs/format.md §8.10).
#[test]
fn a_handle_repeated_at_overlapping_ranges_names_the_first_pair_and_counts_all() {
    let d = Desc {
        allocations: 3,
        ..Desc::new("vr", 0, 1, 1)
    };
    let size = d.value()["allocations"][0]["size_bytes"].as_u64().unwrap();
    let hex = handle_hex("vr", 0, 0);
    let with_offsets = |offsets: [u64; 3]| {
        d.bytes_with(|v| {
            for (a, o) in v["allocations"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .zip(offsets)
            {
                a["handle"]["hex"] = json!(hex);
                a["offset_bytes"] = json!(o);
            }
        })
    };
    let audit = |bytes: Vec<u8>| {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "rank-0.json", &bytes);
        audit_json(t.path(), &[])
    };

    // All three at offset 0: [1] and [2] repeat [0].
    let (exit, v) = audit(with_offsets([0, 0, 0]));
    assert_eq!(exit, 1, "{v:#}");
    let r = rank(&v, "rank-0.json");
    assert_eq!(r["verdict"], "reject");
    assert_eq!(
        messages(r, "KV111"),
        [
            "allocations[0] and allocations[1] carry the same fabric handle: \
          the memory would be counted twice; 2 repeats in all"
        ]
    );

    // Carved: disjoint and adjacent ranges of one segment.
    let (exit, v) = audit(with_offsets([0, size, 2 * size]));
    assert_eq!(exit, 0, "{v:#}");
    assert_eq!(rank(&v, "rank-0.json")["verdict"], "accept");

    // Only [1] and [2] overlap: one repeat, named, and no count.
    let (exit, v) = audit(with_offsets([0, size, size + size / 2]));
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(
        messages(rank(&v, "rank-0.json"), "KV111"),
        [
            "allocations[1] and allocations[2] carry the same fabric handle: \
          the memory would be counted twice"
        ]
    );
}

// ---- KV107: which lifetimes are tied ---------------------------------------

/// A third owner lifetime (not one of testkit's two).
const INCARNATION_C: &str = "5d4c3b2a-1f0e-4d9c-8b7a-6e5f4d3c2b1a";

/// Three lifetimes tied on the highest epoch: every descriptor of each one
/// carries KV107 naming the other two (by their first 8 hex digits), in
/// UUID order.
#[test]
fn a_three_way_tie_marks_every_tied_descriptor_naming_the_other_two() {
    let t = tempfile::tempdir().unwrap();
    for (dir, inc) in [
        ("a", INCARNATION_A),
        ("b", INCARNATION_B),
        ("c", INCARNATION_C),
    ] {
        let d = Desc {
            incarnation: inc.into(),
            ..Desc::new("vr", 0, 1, 1)
        };
        put(t.path(), &format!("{dir}/rank-0.json"), &d.bytes());
    }
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    let tied = |p: &str| messages(rank(&v, p), "KV107");
    assert_eq!(
        tied("a/rank-0.json"),
        ["tied with incarnation 5d4c3b2a…, 9a7e6d5c…: usable only once one lifetime is pinned"]
    );
    assert_eq!(
        tied("b/rank-0.json"),
        ["tied with incarnation 3f2b8c1e…, 5d4c3b2a…: usable only once one lifetime is pinned"]
    );
    assert_eq!(
        tied("c/rank-0.json"),
        ["tied with incarnation 3f2b8c1e…, 9a7e6d5c…: usable only once one lifetime is pinned"]
    );
    // Tied lifetimes are not rivals on a rank (only one could be imported).
    assert!(!codes(&v).contains(&"KV102".to_string()), "{v:#}");
    assert_eq!(group_messages(&v, "KV107").len(), 1, "{v:#}");
}

/// A descriptor of a lifetime outside the tie, whose epoch cannot be read,
/// still counts as current (nothing proves it older), but it is not one of
/// the tied lifetimes: it is not told it is tied.
#[test]
fn a_lifetime_outside_a_tie_is_not_marked_tied() {
    let t = tempfile::tempdir().unwrap();
    for (dir, inc) in [("a", INCARNATION_A), ("b", INCARNATION_B)] {
        let d = Desc {
            incarnation: inc.into(),
            ..Desc::new("vr", 0, 1, 1)
        };
        put(t.path(), &format!("{dir}/rank-0.json"), &d.bytes());
    }
    let c = Desc {
        incarnation: INCARNATION_C.into(),
        ..Desc::new("vr", 0, 1, 1)
    };
    put(
        t.path(),
        "c/rank-0.json",
        &c.bytes_with(|v| v["epoch"] = json!("one")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    let outside = rank(&v, "c/rank-0.json");
    assert!(messages(outside, "KV107").is_empty(), "{outside:#}");
    assert_eq!(messages(outside, "KV007").len(), 1, "{outside:#}");
    assert_eq!(
        messages(rank(&v, "a/rank-0.json"), "KV107"),
        ["tied with incarnation 9a7e6d5c…: usable only once one lifetime is pinned"]
    );
}

// ---- The current incarnation: what cannot be proven older counts ------------

/// A descriptor of another lifetime whose epoch cannot be read is not
/// proven older than the current incarnation, so it counts as current and
/// its own finding rejects the group (it is not demoted to a notice, which
/// would accept the group around an unreadable rank).
#[test]
fn another_lifetime_with_an_unreadable_epoch_counts_as_current() {
    let t = tempfile::tempdir().unwrap();
    let a = Desc {
        epoch: 2,
        ..Desc::new("vr", 0, 1, 1)
    };
    put_group(t.path(), "a", &a);
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "{v:#}");

    let b = Desc {
        incarnation: INCARNATION_B.into(),
        ..a.clone()
    };
    put(
        t.path(),
        "b/rank-0.json",
        &b.bytes_with(|v| v["epoch"] = json!(-1)),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject");
    let r = rank(&v, "b/rank-0.json");
    assert_eq!(r["verdict"], "reject", "{r:#}");
    assert_eq!(r["findings"][0]["code"], "KV007", "{r:#}");
    assert_eq!(r["findings"][0]["severity"], "reject", "{r:#}");
    // Nothing says it is superseded: its epoch is not known.
    assert!(group_messages(&v, "KV108").is_empty(), "{v:#}");
}

/// The tie's group finding describes each lifetime by its own descriptors
/// (their owner pids and earliest seal time), so the operator can tell the
/// dead owner from the live one.
#[test]
fn a_tie_describes_each_lifetime_by_its_own_descriptors() {
    let t = tempfile::tempdir().unwrap();
    let a = Desc::new("vr", 0, 2, 1);
    put_group(t.path(), "a", &a);
    let b = Desc {
        incarnation: INCARNATION_B.into(),
        ..a.clone()
    };
    put(
        t.path(),
        "b/rank-0.json",
        &b.bytes_with(|v| {
            v["owner"]["pid"] = json!(5151);
            v["created_unix_ms"] = json!(testkit::CREATED_UNIX_MS + 3_600_000);
        }),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(
        group_messages(&v, "KV107"),
        [format!(
            "incarnations {INCARNATION_A} (owner pid 4242, created 2025-11-30 00:00:00 UTC) \
             and {INCARNATION_B} (owner pid 5151, created 2025-11-30 01:00:00 UTC) tie on \
             the highest epoch 1; cannot tell which owner lifetime is current"
        )]
    );
}

/// A lifetime's description names at most four owner pids and counts the
/// rest; exactly four are all named; a lifetime known only from descriptors
/// that did not parse has an unknown owner (and no seal time).
#[test]
fn a_tie_names_at_most_four_owner_pids_and_an_unknown_owner() {
    let t = tempfile::tempdir().unwrap();
    let lifetime = |dir: &str, inc: &str, ranks: u64, pid0: u64| {
        for r in 0..ranks {
            let d = Desc {
                incarnation: inc.into(),
                ..Desc::new("vr", r, ranks, 1)
            };
            put(
                t.path(),
                &format!("{dir}/rank-{r}.json"),
                &d.bytes_with(|v| v["owner"]["pid"] = json!(pid0 + r)),
            );
        }
    };
    lifetime("a", INCARNATION_A, 5, 100);
    lifetime("b", INCARNATION_B, 4, 200);
    // Only its identity can be read: a geometry field is out of range.
    let c = Desc {
        incarnation: INCARNATION_C.into(),
        ..Desc::new("vr", 0, 1, 1)
    };
    put(
        t.path(),
        "c/rank-0.json",
        &c.bytes_with(|v| v["geometry"]["num_layers"] = json!(0)),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(
        group_messages(&v, "KV107"),
        [format!(
            "incarnations \
             {INCARNATION_A} (owner pids 100, 101, 102, 103, and 1 more, \
             created 2025-11-30 00:00:00 UTC) \
             and {INCARNATION_C} (owner pid unknown) \
             and {INCARNATION_B} (owner pids 200, 201, 202, 203, created 2025-11-30 00:00:00 UTC) \
             tie on the highest epoch 1; cannot tell which owner lifetime is current"
        )]
    );
}

// ---- The reference rank ----------------------------------------------------

/// The ranks are compared with the lowest *clean* rank: rank 0 with a
/// digest mismatch (its fields parsed, so it still has a shape) is not the
/// reference, so its own odd geometry is its finding, against rank 1, and
/// the ranks that agree are accepted.
#[test]
fn a_rank_with_a_finding_is_not_the_reference() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vr", 0, 3, 1);
    put_group(t.path(), "", &g);
    // Edited after sealing: KV008, and fewer blocks than the others.
    let mut v0 = g.value();
    testkit::seal(&mut v0);
    v0["geometry"]["num_blocks"] = json!(512);
    put(t.path(), "rank-0.json", &testkit::to_bytes(&v0));
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    let r0 = rank(&v, "rank-0.json");
    assert_eq!(messages(r0, "KV008").len(), 1, "{r0:#}");
    assert_eq!(
        messages(r0, "KV104"),
        ["geometry.num_blocks is 512 but rank 1 has 1024"]
    );
    for p in ["rank-1.json", "rank-2.json"] {
        let r = rank(&v, p);
        assert_eq!(r["verdict"], "accept", "{r:#}");
    }
    assert_eq!(v["groups"][0]["geometry"]["num_blocks"], 1024, "{v:#}");
}

// ---- --incarnation pins the group that has it ------------------------------

/// `--incarnation` pins the current lifetime of the group that has a
/// descriptor of it; another group of the inventory, which has none, is
/// judged as if no incarnation were given (not left without a current
/// lifetime).
#[test]
fn the_incarnation_flag_pins_only_the_group_that_has_it() {
    let t = tempfile::tempdir().unwrap();
    let a = Desc::new("one", 0, 2, 1);
    let newer = Desc {
        incarnation: INCARNATION_B.into(),
        epoch: 2,
        ..a.clone()
    };
    put_group(t.path(), "one/a", &a);
    put_group(t.path(), "one/b", &newer);
    let other = Desc {
        incarnation: INCARNATION_B.into(),
        group: 1,
        ..Desc::new("two", 0, 2, 1)
    };
    put_group(t.path(), "two", &other);
    let (exit, v) = audit_json(t.path(), &["--incarnation", INCARNATION_A]);
    assert_eq!(exit, 0, "{v:#}");
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    let (one, two) = (&groups[0], &groups[1]);
    assert_eq!(
        (&one["engine_id"], &one["verdict"]),
        (&json!("one"), &json!("accept"))
    );
    assert_eq!(one["incarnation"], INCARNATION_A, "pinned: {one:#}");
    // The newer lifetime of the pinned group is a notice, not counted.
    let notices: Vec<&str> = one["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "KV107")
        .map(|f| f["severity"].as_str().unwrap())
        .collect();
    assert_eq!(notices, ["notice", "notice"], "{one:#}");
    assert_eq!(
        (&two["engine_id"], &two["verdict"]),
        (&json!("two"), &json!("accept"))
    );
    assert_eq!(two["incarnation"], INCARNATION_B, "{two:#}");
    assert!(two["findings"].as_array().unwrap().is_empty(), "{two:#}");
}

// ---- Descriptor checks: lengths in characters, handle wording --------------

/// A string's limit counts characters, not bytes: `model.revision` (1–64
/// chars) of exactly 64 two-byte characters (128 bytes) is accepted, and
/// 65 is too long, naming the count.
#[test]
fn a_string_at_its_limit_in_multibyte_characters_is_accepted() {
    let audit = |revision: String| {
        let t = tempfile::tempdir().unwrap();
        let d = Desc::new("vr", 0, 1, 1);
        put(
            t.path(),
            "rank-0.json",
            &d.bytes_with(|v| v["model"]["revision"] = json!(revision)),
        );
        audit_json(t.path(), &[])
    };
    let (exit, v) = audit("é".repeat(64));
    assert_eq!(exit, 0, "{v:#}");
    let (exit, v) = audit("é".repeat(65));
    assert_eq!(exit, 1, "{v:#}");
    let m = messages(rank(&v, "rank-0.json"), "KV007");
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(
        m[0].starts_with("model.revision: too long (65 chars)"),
        "{m:?}"
    );
}

/// A handle's hex of the wrong length is "wrong length", even when it also
/// holds a character that is not hex; at the right length the character is
/// named.
#[test]
fn a_handle_of_the_wrong_length_says_so_before_naming_a_bad_character() {
    let audit = |hex: String| {
        let t = tempfile::tempdir().unwrap();
        let d = Desc::new("vr", 0, 1, 1);
        put(
            t.path(),
            "rank-0.json",
            &d.bytes_with(|v| v["allocations"][0]["handle"]["hex"] = json!(hex)),
        );
        let (exit, v) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1, "{v:#}");
        let m = messages(rank(&v, "rank-0.json"), "KV007");
        assert_eq!(m.len(), 1, "{m:?}");
        m[0].clone()
    };
    let m = audit(format!("z{}", "ab".repeat(63)));
    assert!(
        m.starts_with("allocations[0].handle.hex: wrong length (127 chars)"),
        "{m}"
    );
    let m = audit(format!("z{}", "a".repeat(127)));
    assert!(
        m.starts_with("allocations[0].handle.hex: non-hex character 'z'"),
        "{m}"
    );
}

// ---- Consistency: the model's quantization (KV105) -------------------------

/// A rank whose model quantization differs from the reference rank's is
/// KV105, and the message writes each side as JSON would: a string quoted,
/// an absent quantization as `null`. Killed mutant: the quantization's
/// `Display` writing nothing.
#[test]
fn a_quantization_mismatch_names_both_values_quoted_or_null() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vq", 0, 2, 1);
    put_group(t.path(), "", &g);
    let mut r1 = g.clone();
    r1.rank = 1;
    put(
        t.path(),
        "rank-1.json",
        &r1.bytes_with(|v| v["model"]["quantization"] = json!("fp8")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    assert_eq!(
        messages(rank(&v, "rank-1.json"), "KV105"),
        ["model.quantization is \"fp8\" but rank 0 has null"],
        "{v:#}"
    );
    assert!(
        messages(rank(&v, "rank-0.json"), "KV105").is_empty(),
        "{v:#}"
    );
}

// ---- Consistency: the odd reference rank (KV110, KV105) --------------------

/// The reference rank (rank 0) is compared with the others, not with
/// itself: when it alone disagrees, a field on which more than half of the
/// other parsed ranks agree rejects the reference too, naming it as the odd
/// one (docs/format.md §5.6). Killed mutants: `odd_reference` doing nothing,
/// its early return inverted, its count skipping the wrong row or
/// multiplying instead of counting.
#[test]
fn a_reference_rank_that_alone_disagrees_is_named_the_odd_one() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vo", 0, 4, 1);
    put_group(t.path(), "", &g);
    put(
        t.path(),
        "rank-0.json",
        &g.bytes_with(|v| v["node"]["hostname"] = json!("gpu-node-99")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    let host = testkit::HOSTNAME.to_ascii_lowercase();
    assert_eq!(
        messages(rank(&v, "rank-0.json"), "KV110"),
        [format!(
            "node.hostname is gpu-node-99 here but 3 of the 3 other ranks have {host}: \
             this rank is the odd one"
        )],
        "{v:#}"
    );
    for r in ["rank-1.json", "rank-2.json", "rank-3.json"] {
        assert_eq!(messages(rank(&v, r), "KV110").len(), 1, "{r}: {v:#}");
    }
}

/// With one other rank there is no majority to call the reference odd: a
/// tp=2 group whose ranks disagree rejects only the rank compared with the
/// reference (`others >= 2`).
#[test]
fn two_ranks_that_disagree_do_not_name_the_reference_odd() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vo2", 0, 2, 1);
    put_group(t.path(), "", &g);
    put(
        t.path(),
        "rank-0.json",
        &g.bytes_with(|v| v["node"]["hostname"] = json!("gpu-node-99")),
    );
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(
        messages(rank(&v, "rank-0.json"), "KV110").is_empty(),
        "{v:#}"
    );
    assert_eq!(messages(rank(&v, "rank-1.json"), "KV110").len(), 1, "{v:#}");
}

/// A profile that declares the geometry decides it, even when every rank
/// agrees with the reference: ranks whose geometry differs from the
/// profile's are KV104 against the profile. Killed mutant: the profile's
/// arm of the expected geometry deleted (the ranks then only compared
/// with each other, and accepted).
#[test]
fn a_declared_geometry_is_checked_even_when_the_ranks_agree() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vg", 0, 2, 1);
    put_group(t.path(), "inv", &g);
    let mut p = testkit::profile(&g);
    p["geometry"]["num_blocks"] = json!(2048);
    let (exit, v) = audit_with_profile(t.path(), &p);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    for r in ["rank-0.json", "rank-1.json"] {
        let m = messages(rank(&v, r), "KV104");
        assert_eq!(m.len(), 1, "{r}: {v:#}");
        assert!(
            m[0].starts_with("geometry.num_blocks is 1024 but the profile"),
            "{r}: {m:?}"
        );
    }
}

/// The same for the model: a profile that declares it decides it, even
/// when every rank agrees with the reference. Killed mutant: the profile's
/// arm of the expected model deleted.
#[test]
fn a_declared_model_is_checked_even_when_the_ranks_agree() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vm", 0, 2, 1);
    put_group(t.path(), "inv", &g);
    let mut p = testkit::profile(&g);
    p["model"]["name"] = json!("another-model");
    let (exit, v) = audit_with_profile(t.path(), &p);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    for r in ["rank-0.json", "rank-1.json"] {
        let m = messages(rank(&v, r), "KV105");
        assert_eq!(m.len(), 1, "{r}: {v:#}");
        assert!(
            m[0].starts_with("model.name is ") && m[0].contains("\"another-model\""),
            "{r}: {m:?}"
        );
    }
}

// ---- Consistency: the profile's GPUs (KV106) --------------------------------

/// A profile that lists fewer GPUs than the group has ranks (it declares no
/// world size to be checked against) places no rank past its list: that
/// rank is KV106 "the profile lists no GPU", the others are checked by their
/// entry. Killed mutant: the arm for a rank past the list deleted (the rank
/// then passed unplaced).
#[test]
fn a_rank_past_the_profiles_gpu_list_is_kv106() {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("vgpu", 0, 2, 1);
    put_group(t.path(), "inv", &g);
    let p = json!({
        "schema": "kvcr.profile/v1",
        "engine_id": g.engine_id,
        "gpus": [testkit::gpu(0, 0)],
    });
    let (exit, v) = audit_with_profile(t.path(), &p);
    assert_eq!(exit, 1, "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "reject", "{v:#}");
    assert_eq!(
        messages(rank(&v, "rank-1.json"), "KV106"),
        ["the profile lists no GPU for rank 1"],
        "{v:#}"
    );
    assert!(
        messages(rank(&v, "rank-0.json"), "KV106").is_empty(),
        "{v:#}"
    );
}
