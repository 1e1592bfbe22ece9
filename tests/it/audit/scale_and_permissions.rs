//! Scale edges and permission edges (issue #5): many entries, the depth
//! limit, the allocation limit, the size limit to the byte, long names and
//! long strings; unsafe directories *between* the root and a descriptor.
//!
//! The one big directory holds 20,000 entries by default, to keep
//! `cargo test` to seconds on a small debug machine (100,000 take about
//! 7 s there, most of it creating the files); `KVCR_EDGE_ENTRIES=100000`
//! runs the full size.

use crate::util::testkit::{put, seal, to_bytes, Desc};
use crate::util::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const MIB: usize = 1024 * 1024;

fn notice(v: &Value, code: &str, path: &str) -> bool {
    findings(v)
        .iter()
        .any(|(c, s, p)| c == code && s == "notice" && p == path)
}

fn codes_on(v: &Value, path: &str) -> Vec<String> {
    findings(v)
        .into_iter()
        .filter(|(_, _, p)| p == path)
        .map(|(c, _, _)| c)
        .collect()
}

/// A tp 1 descriptor's sealed value.
fn tp1(engine: &str) -> Value {
    let mut v = Desc::new(engine, 0, 1, 1).value();
    seal(&mut v);
    v
}

fn audit_one(v: &Value) -> (i32, Value) {
    let t = tempfile::tempdir().unwrap();
    put(t.path(), "rank-0.json", &to_bytes(v));
    audit_json(t.path(), &[])
}

#[test]
fn many_entries_in_one_directory() {
    let n: usize = std::env::var("KVCR_EDGE_ENTRIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let t = tempfile::tempdir().unwrap();
    put(
        t.path(),
        "rank-0.json",
        &Desc::new("edge-many", 0, 1, 1).bytes(),
    );
    let big = t.path().join("big");
    std::fs::create_dir(&big).unwrap();
    let started = std::time::Instant::now();
    for i in 0..n {
        std::fs::File::create(big.join(format!("f{i:06}"))).unwrap();
    }
    let made = started.elapsed();
    let (exit, r) = audit_json(t.path(), &[]);
    eprintln!(
        "{n} entries: created in {made:?}, audited in {:?}",
        started.elapsed() - made
    );
    // Strays are notices: the group is still accepted, every one is listed.
    assert_eq!(exit, 0, "{}", r["groups"]);
    assert_eq!(r["groups"][0]["verdict"], "accept");
    assert_eq!(r["summary"]["notices"], n as u64);
    assert_eq!(r["files"].as_array().unwrap().len(), n);
    assert!(notice(&r, "KV010", &format!("big/f{:06}", n - 1)));
}

#[test]
fn descriptor_at_depth_9_is_reported_not_ignored() {
    let t = tempfile::tempdir().unwrap();
    let d = Desc::new("edge-deep", 0, 2, 1);
    put(t.path(), "rank-0.json", &d.bytes());
    let mut r1 = d.clone();
    r1.rank = 1;
    // Depth 8 (seven directories, then the file) is read...
    put(t.path(), "a/b/c/d/e/f/g/rank-1.json", &r1.bytes());
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "{r:#}");
    // ...depth 9 is beyond the limit: a notice on the file, and the rank is
    // missing (KV103), so the group is rejected rather than silently short.
    let t = tempfile::tempdir().unwrap();
    put(t.path(), "rank-0.json", &d.bytes());
    let deep = "a/b/c/d/e/f/g/h/rank-1.json";
    put(t.path(), deep, &r1.bytes());
    // Below the limit the walk goes on (unsafe entries are reported at any
    // depth), but files there are never read: notices only.
    let deeper = "a/b/c/d/e/f/g/h/i/j/rank-1.json";
    put(t.path(), deeper, &r1.bytes());
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{r:#}");
    assert!(notice(&r, "KV010", deep), "{r:#}");
    assert!(notice(&r, "KV010", deeper), "{r:#}");
    let text = r.to_string();
    assert!(text.contains("beyond the depth limit of 8"), "{text}");
    assert!(has(&r, "KV103", ""), "{r:#}");
    assert_eq!(r["groups"][0]["verdict"], "reject");
}

#[test]
fn allocations_4096_accepted_4097_rejected() {
    for (kind, pretty) in [("fabric", false), ("posix_fd", true)] {
        let mut d = Desc::new("edge-allocs", 0, 1, 1);
        d.handle_kind = kind;
        d.allocations = 4096;
        let mut v = d.value();
        seal(&mut v);
        // Pretty-printed, 4,096 fabric handles would pass 1 MiB; compact fits.
        let bytes = if pretty {
            to_bytes(&v)
        } else {
            serde_json::to_vec(&v).unwrap()
        };
        assert!(bytes.len() <= MIB, "{kind}: {} bytes", bytes.len());
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "rank-0.json", &bytes);
        let (exit, r) = audit_json(t.path(), &[]);
        assert_eq!(exit, 0, "{kind}: {}", r["groups"]);

        d.allocations = 4097;
        let mut v = d.value();
        seal(&mut v);
        let bytes = if pretty {
            to_bytes(&v)
        } else {
            serde_json::to_vec(&v).unwrap()
        };
        assert!(bytes.len() <= MIB, "{kind}: {} bytes", bytes.len());
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "rank-0.json", &bytes);
        let (exit, r) = audit_json(t.path(), &[]);
        assert_eq!(exit, 1);
        let f = &r["groups"][0]["ranks"][0]["findings"][0];
        assert_eq!(f["code"], "KV007", "{f:#}");
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .starts_with("allocations: wrong number of items (4097)"),
            "{f:#}"
        );
    }
}

/// Whitespace is not part of the canonical digest, so a sealed descriptor
/// can be padded to any size.
fn padded(total: usize) -> Vec<u8> {
    let bytes = Desc::new("edge-size", 0, 1, 1).bytes();
    let mut out = b"{".to_vec();
    out.resize(total - (bytes.len() - 1), b' ');
    out.extend_from_slice(&bytes[1..]);
    assert_eq!(out.len(), total);
    out
}

#[test]
fn one_mib_exactly_is_read_one_more_byte_is_rejected_unread() {
    let t = tempfile::tempdir().unwrap();
    put(t.path(), "rank-0.json", &padded(MIB));
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "{}", r["groups"]);

    let t = tempfile::tempdir().unwrap();
    put(t.path(), "rank-0.json", &padded(MIB + 1));
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert!(has(&r, "KV004", "rank-0.json"), "{r:#}");
    assert_eq!(codes_on(&r, "rank-0.json"), ["KV004"], "{r:#}");
    let f = findings(&r);
    assert!(
        !f.iter().any(|(c, _, _)| c == "KV006" || c == "KV007"),
        "read anyway: {r:#}"
    );
}

#[test]
fn file_names_of_255_bytes() {
    let t = tempfile::tempdir().unwrap();
    // Directories with 255-byte names down to depth 8 (about 2 KiB of path).
    let dir: Vec<String> = (0..7).map(|i| format!("{i}{}", "d".repeat(254))).collect();
    let dir = dir.join("/");
    put(
        t.path(),
        &format!("{dir}/rank-0.json"),
        &Desc::new("edge-names", 0, 1, 1).bytes(),
    );
    // A stray whose name is 255 bytes of UTF-8 (two-byte characters + 'x').
    let stray = format!("{}x", "é".repeat(127));
    assert_eq!(stray.len(), 255);
    put(t.path(), &stray, b"");
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 0, "{r:#}");
    assert_eq!(
        r["groups"][0]["ranks"][0]["path"],
        format!("{dir}/rank-0.json")
    );
    assert!(notice(&r, "KV010", &stray), "{r:#}");

    // A descriptor name of 255 bytes: its rank does not fit in 64 bits.
    let t = tempfile::tempdir().unwrap();
    let name = format!("rank-{}.json", "9".repeat(245));
    assert_eq!(name.len(), 255);
    put(t.path(), &name, &Desc::new("edge-names", 0, 1, 1).bytes());
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert!(has(&r, "KV101", &name), "{r:#}");
    assert!(r.to_string().contains("does not fit in 64 bits"));

    // 256 bytes is more than any Linux filesystem takes: nothing to audit.
    let too_long = t.path().join("x".repeat(256));
    assert!(std::fs::write(too_long, b"").is_err());
}

/// (pointer into the descriptor, the longest length allowed in characters).
const STRING_LIMITS: &[(&str, usize)] = &[
    ("/engine_id", 128),
    ("/model/name", 256),
    ("/model/revision", 64),
    ("/model/quantization", 64),
    ("/node/hostname", 253),
    ("/allocations/0/id", 128),
];

#[test]
fn long_strings_at_and_past_their_limits() {
    for &(ptr, max) in STRING_LIMITS {
        for (unit, len) in [("e", max), ("é", max), ("e", max + 1), ("é", max + 1)] {
            if ptr == "/engine_id" && unit == "é" {
                continue; // engine_id is ASCII only (another rule)
            }
            let mut v = Desc::new("edge-strings", 0, 1, 1).value();
            *v.pointer_mut(ptr).unwrap() = json!(unit.repeat(len));
            seal(&mut v);
            let (exit, r) = audit_one(&v);
            let field = ptr[1..].replace("/0/", "[0].").replace('/', ".");
            if len == max {
                assert_eq!(exit, 0, "{field} of {len} × {unit:?}: {r:#}");
            } else {
                assert_eq!(exit, 1, "{field} of {len} × {unit:?}");
                let msg = format!("{field}: too long ({len} chars)");
                assert!(r.to_string().contains(&msg), "{msg}: {r:#}");
            }
        }
    }
}

#[test]
fn a_huge_string_is_cut_in_the_report() {
    let mut v = tp1("edge-huge");
    v["model"]["name"] = json!("m".repeat(1_000_000));
    let bytes = to_bytes(&v);
    assert!(bytes.len() < MIB);
    let t = tempfile::tempdir().unwrap();
    put(t.path(), "rank-0.json", &bytes);
    let out = kvcr()
        .arg("audit")
        .arg(t.path())
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.len() < 64 * 1024,
        "{} bytes of report",
        out.stdout.len()
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r
        .to_string()
        .contains("model.name: too long (1000000 chars)"));
    let out = kvcr().arg("audit").arg(t.path()).output().unwrap();
    assert!(
        out.stdout.len() < 64 * 1024,
        "{} bytes of table",
        out.stdout.len()
    );
}

// ---------------------------------------------------------------------------
// Permissions and ownership between the root and a descriptor.

/// tp 2: rank 0 three levels down below `a/b`, rank 1 in a sibling tree.
fn nested_group(root: &Path) {
    let d = Desc::new("edge-perms", 0, 2, 1);
    put(root, "a/b/c/rank-0.json", &d.bytes());
    let mut r1 = d.clone();
    r1.rank = 1;
    put(root, "x/rank-1.json", &r1.bytes());
    for dir in ["a", "a/b", "a/b/c", "x"] {
        std::fs::set_permissions(root.join(dir), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn assert_unsafe_between(r: &Value, dir: &str, word: &str) {
    assert!(has(r, "KV003", dir), "no KV003 on {dir}: {r:#}");
    let ranks = r["groups"][0]["ranks"].as_array().unwrap();
    let rank0 = ranks.iter().find(|x| x["rank"] == 0).unwrap();
    let inherited = rank0["findings"].as_array().unwrap().iter().any(|f| {
        f["code"] == "KV003"
            && f["message"]
                .as_str()
                .is_some_and(|m| m.contains(&format!("directory {dir} ")) && m.contains(word))
    });
    assert!(
        inherited,
        "rank 0 does not inherit {dir}'s KV003: {rank0:#}"
    );
    assert_eq!(rank0["verdict"], "reject");
    // The sibling tree is not tainted.
    let rank1 = ranks.iter().find(|x| x["rank"] == 1).unwrap();
    assert_eq!(rank1["verdict"], "accept", "{rank1:#}");
    assert_eq!(r["groups"][0]["verdict"], "reject");
}

#[test]
fn writable_directory_between_root_and_descriptor() {
    for mode in [0o775, 0o757, 0o1777, 0o2770] {
        let t = tempfile::tempdir().unwrap();
        nested_group(t.path());
        let (exit, r) = audit_json(t.path(), &[]);
        assert_eq!(exit, 0, "{r:#}");
        std::fs::set_permissions(t.path().join("a/b"), std::fs::Permissions::from_mode(mode))
            .unwrap();
        let before = crate::util::testkit::snapshot(t.path());
        let (exit, r) = audit_json(t.path(), &[]);
        assert_eq!(crate::util::testkit::snapshot(t.path()), before);
        assert_eq!(exit, 1, "{mode:o}");
        assert_unsafe_between(&r, "a/b", "writable by group/others");
        let own = r["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "a/b")
            .unwrap_or_else(|| panic!("{r:#}"));
        assert_eq!(own["findings"][0]["found"], format!("{mode:04o}"));
    }
}

#[test]
fn directory_and_descriptor_owned_by_another_uid_between() {
    if !is_root() {
        crate::util::missing("needs root to chown to nobody");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    nested_group(t.path());
    std::os::unix::fs::chown(t.path().join("a/b"), Some(65534), Some(65534)).unwrap();
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert_unsafe_between(&r, "a/b", "owned by uid 65534");

    let t = tempfile::tempdir().unwrap();
    nested_group(t.path());
    std::os::unix::fs::chown(t.path().join("a/b/c/rank-0.json"), Some(65534), None).unwrap();
    let (exit, r) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1);
    assert!(has(&r, "KV003", "a/b/c/rank-0.json"), "{r:#}");
    assert!(r.to_string().contains("owned by uid 65534"));
}
