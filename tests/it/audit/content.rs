//! docs/format.md §3.6, the content check, without a GPU: the worked
//! example of the format is what the code computes; the member's shape is
//! checked strictly (KV007) by the audit, `examine` and `seal`; `seal` keeps
//! it and the digest covers it; the writer API computes it; and `kvcr
//! import` on the simulated backend verifies it (good and bad).

use crate::util::fleet::private;
use crate::util::testkit::{self, put, put_group, Desc, BOOT_ID, HOSTNAME};
use crate::util::{audit_json, codes, has, kvcr};
use kvcr_audit::content::{digest_content, sampled_ranges, ContentError};
use serde_json::{json, Value};
use std::time::Duration;

const FORMAT: &str = include_str!("../../../docs/format.md");

fn section(title: &str) -> &'static str {
    let start = FORMAT.find(title).expect("section");
    let rest = &FORMAT[start + title.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

fn hex(sha: &[u8; 32]) -> String {
    sha.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_worked_example_of_the_format_is_what_the_code_computes() {
    let s = section("### §3.6 Content check");
    let mut memory = |o: u64, n: u64| Ok((o..o + n).map(|x| (x % 251) as u8).collect());
    // The table's ranges.
    let table: Vec<(u64, u64)> = s
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("`["))
        .map(|l| {
            let r = l.split('`').nth(1).unwrap();
            let (a, b) = r
                .trim_matches(|c| c == '[' || c == ')')
                .split_once(", ")
                .unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    let got: Vec<(u64, u64)> = sampled_ranges(10_000, 100, 4096, 3)
        .unwrap()
        .into_iter()
        .map(|r| (r.start, r.end))
        .collect();
    assert_eq!(table, got);
    assert!(s.contains(&format!("The {} sampled bytes", 3 * 4096)));
    // The two digests, in the order the text gives them.
    let shas: Vec<&str> = s
        .split(|c: char| !c.is_ascii_hexdigit())
        .filter(|w| w.len() == 64)
        .collect();
    assert_eq!(shas.len(), 2, "{shas:?}");
    let c = digest_content(10_000, 100, 4096, 3, &mut memory).unwrap();
    assert_eq!(hex(&c.sha256), shas[0]);
    assert!(s.contains(&format!(
        "{{\"page_bytes\": 4096, \"pages\": 3, \"sha256\": \"{}\"}}",
        shas[0]
    )));
    let small = digest_content(300, 0, 4096, 1, &mut memory).unwrap();
    assert_eq!(hex(&small.sha256), shas[1]);
    assert_eq!(sampled_ranges(300, 0, 4096, 1).unwrap()[0], 0..300);
}

#[test]
fn the_api_refuses_bad_shapes_and_short_reads() {
    assert!(matches!(
        sampled_ranges(10_000, 0, 4096, 1),
        Err(ContentError::Shape(_))
    ));
    let mut short = |_o: u64, n: u64| Ok(vec![0; n as usize / 2]);
    let e = digest_content(8192, 0, 4096, 2, &mut short).unwrap_err();
    assert!(matches!(e, ContentError::Read(_)), "{e}");
    assert!(
        e.to_string().contains("2048 bytes returned, 4096 asked"),
        "{e}"
    );
}

fn one_rank(edit: impl FnOnce(&mut Value)) -> (i32, Value, tempfile::TempDir) {
    let t = tempfile::tempdir().unwrap();
    let g = Desc::new("content", 0, 1, 1);
    put(t.path(), "rank-0.json", &g.bytes_with(edit));
    let (exit, v) = audit_json(t.path(), &[]);
    (exit, v, t)
}

const SHA: &str = "d04cb0cdb8a124f0f06d33cbdcc1d13874eaa81e09307879ec256a608c856f53";

#[test]
fn a_well_formed_content_member_is_accepted() {
    for c in [
        json!({"page_bytes": 4096, "pages": 16, "sha256": SHA}),
        json!({"page_bytes": 512, "pages": 2, "sha256": SHA}),
        json!({"page_bytes": 1 << 20, "pages": 64, "sha256": SHA}),
    ] {
        let (exit, v, _t) = one_rank(|v| v["allocations"][0]["content"] = c.clone());
        assert_eq!(exit, 0, "{c}: {v:#}");
        assert_eq!(v["groups"][0]["verdict"], "accept");
    }
}

#[test]
fn a_bad_content_member_is_kv007_naming_field_and_values() {
    let upper = SHA.to_uppercase();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"page_bytes": 4000, "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (
            json!({"page_bytes": 256, "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (
            json!({"page_bytes": 2 << 20, "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (
            json!({"page_bytes": 0, "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (
            json!({"page_bytes": 4096, "pages": 0, "sha256": SHA}),
            "pages",
        ),
        (
            json!({"page_bytes": 4096, "pages": 65, "sha256": SHA}),
            "pages",
        ),
        // size_bytes > page_bytes needs at least 2 pages.
        (
            json!({"page_bytes": 4096, "pages": 1, "sha256": SHA}),
            "at least 2",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": upper}),
            "sha256",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": &SHA[..63]}),
            "sha256",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": format!("{SHA}0")}),
            "sha256",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": format!("sha256:{SHA}")}),
            "sha256",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": format!("{}g", &SHA[..63])}),
            "sha256",
        ),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": 7}),
            "sha256",
        ),
        (json!({"page_bytes": 4096, "pages": 16}), "sha256"),
        (json!({"pages": 16, "sha256": SHA}), "page_bytes"),
        (
            json!({"page_bytes": 4096, "pages": 16, "sha256": SHA, "seed": 1}),
            "seed",
        ),
        (
            json!({"page_bytes": 4096.0, "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (
            json!({"page_bytes": "4096", "pages": 16, "sha256": SHA}),
            "page_bytes",
        ),
        (json!(null), "content"),
        (json!([4096, 16, SHA]), "content"),
    ];
    for (c, field) in cases {
        let (exit, v, _t) = one_rank(|v| v["allocations"][1]["content"] = c.clone());
        assert_eq!(exit, 1, "{c}: {v:#}");
        assert!(has(&v, "KV007", "rank-0.json"), "{c}: {v:#}");
        assert_eq!(v["groups"][0]["verdict"], "reject", "{c}: {v:#}");
        assert!(
            v["groups"][0]["cause"]
                .as_str()
                .is_some_and(|s| s.contains("KV007")),
            "{c}: {v:#}"
        );
        let text = v.to_string();
        assert!(text.contains("allocations[1].content"), "{c}: {text}");
        assert!(text.contains(field), "{c}: want {field}: {text}");
    }
    // One page for a small allocation: exactly 1.
    let (exit, v, _t) = one_rank(|v| {
        v["allocations"][0]["size_bytes"] = json!(4096);
        v["allocations"][0]["content"] = json!({"page_bytes": 4096, "pages": 2, "sha256": SHA});
    });
    assert_eq!(exit, 1, "{v:#}");
    assert!(v.to_string().contains("must be 1"), "{v:#}");
    let (exit, v, _t) = one_rank(|v| {
        v["allocations"][1]["size_bytes"] = json!(4096 * 1024 * 1024u64);
        v["allocations"][0]["size_bytes"] = json!(4096);
        v["allocations"][0]["content"] = json!({"page_bytes": 4096, "pages": 1, "sha256": SHA});
    });
    assert_eq!(exit, 0, "{v:#}");
}

#[test]
fn seal_keeps_the_member_and_the_digest_covers_it() {
    let t = tempfile::tempdir().unwrap();
    let mut v = Desc::new("content", 0, 1, 1).value();
    v["allocations"][0]["content"] = json!({"page_bytes": 4096, "pages": 16, "sha256": SHA});
    let p = t.path().join("rank-0.json");
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let out = kvcr().arg("seal").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let sealed: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    assert_eq!(sealed["allocations"][0]["content"]["sha256"], SHA);
    assert_eq!(audit_json(t.path(), &[]).0, 0);
    // examine says how many allocations carry one.
    let out = kvcr()
        .args(["examine", "--format", "json"])
        .arg(&p)
        .output()
        .unwrap();
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["content_checked"], 1, "{e:#}");
    let out = kvcr().arg("examine").arg(&p).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("1 of 2 allocations carry a content check"),
        "{table}"
    );
    // Another sha256 without resealing: the digest no longer matches.
    let text = std::fs::read_to_string(&p).unwrap();
    let other = SHA.replace("d04c", "d04d");
    std::fs::write(&p, text.replace(SHA, &other)).unwrap();
    let (exit, v) = audit_json(t.path(), &[]);
    assert_eq!(exit, 1, "{v:#}");
    assert!(codes(&v).contains(&"KV008".to_string()), "{v:#}");
    // A bad shape is refused by seal (nothing written).
    let mut v = Desc::new("content", 0, 1, 1).value();
    v["allocations"][0]["content"] = json!({"page_bytes": 4095, "pages": 16, "sha256": SHA});
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let before = std::fs::read(&p).unwrap();
    let out = kvcr().arg("seal").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("allocations[0].content.page_bytes"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn the_writer_api_computes_the_member() {
    let mut memory = |o: u64, n: u64| Ok((o..o + n).map(|x| (x % 251) as u8).collect());
    let m = kvcr_audit::writer::content_member(10_000, 100, 4096, 3, &mut memory).unwrap();
    assert_eq!(m, json!({"page_bytes": 4096, "pages": 3, "sha256": SHA}));
    let mut failing = |o: u64, _n: u64| Err(format!("owner gone at {o}"));
    let e = kvcr_audit::writer::content_member(10_000, 0, 4096, 3, &mut failing).unwrap_err();
    assert!(e.to_string().contains("owner gone at 0"), "{e}");
    assert_eq!(e.exit_status(), 1);
    let mut memory = |o: u64, n: u64| Ok(vec![o as u8; n as usize]);
    assert!(kvcr_audit::writer::content_member(10_000, 0, 4096, 1, &mut memory).is_err());
}

/// The simulator's memory (src/import/engine/sim.rs `sim_byte`): seed = first
/// handle byte.
fn sim_byte(seed: u8, o: u64) -> u8 {
    (o.wrapping_mul(131) ^ (o >> 9) ^ u64::from(seed)) as u8
}

#[test]
fn import_on_the_simulator_verifies_content_good_and_bad() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    let d = Desc::new("content-sim", 0, 2, 1);
    put_group(&inv, "", &d);
    // Rewrite each rank with a content member on allocation 1.
    for rank in 0..2 {
        let mut r = d.clone();
        r.rank = rank;
        let bytes = r.bytes_with(|v| {
            let a = &mut v["allocations"][1];
            let size = a["size_bytes"].as_u64().unwrap();
            let seed = u8::from_str_radix(&a["handle"]["hex"].as_str().unwrap()[..2], 16).unwrap();
            let mut mem = |o: u64, n: u64| Ok((o..o + n).map(|x| sim_byte(seed, x)).collect());
            a["content"] = kvcr_audit::writer::content_member(size, 0, 4096, 16, &mut mem).unwrap();
        });
        put(&inv, &format!("rank-{rank}.json"), &bytes);
    }
    private(&inv);
    let gpus: Vec<String> = (0..2).map(|r| testkit::gpu(0, r)).collect();
    let facts = json!({
        "boot_id": BOOT_ID, "hostname": HOSTNAME,
        "processes": {"4242": 123456}, "processes_unreadable": null,
        "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}
    });
    let fp = dir.path().join("facts.json");
    std::fs::write(&fp, facts.to_string()).unwrap();
    let pp = dir.path().join("profile.json");
    testkit::put_profile(&pp, &d);
    let run = |spec: &str| {
        let out = kvcr()
            .arg("import")
            .arg(&inv)
            .args(["--format", "json"])
            .env("KVCR_NODE_FACTS", &fp)
            .env("KVCR_PROFILE", &pp)
            .env("KVCR_IMPORT_BACKEND", spec)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), v)
    };
    let (code, v) = run("sim");
    assert_eq!(code, 0, "{v:#}");
    let items = &v["ranks"][1]["items"];
    assert_eq!(items[0]["content"], "none", "{v:#}");
    assert_eq!(items[1]["content"], "verified", "{v:#}");
    let (code, v) = run("sim:lie-content");
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["failure"]["step"], "verify-content");
    assert_eq!(v["failure"]["rank"], 0);
    assert_eq!(v["failure"]["allocation"], "kv-1");
    assert!(
        v["remaining"].as_array().is_none_or(|a| a.is_empty()),
        "{v:#}"
    );
    // An injected read failure is verify-content too.
    let (code, v) = run("sim:fail=verify-content@3");
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["failure"]["step"], "verify-content");
    assert!(
        v["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("injected failure"),
        "{v:#}"
    );
}

#[test]
fn the_descriptor_schema_knows_the_member() {
    let schema: Value = serde_json::from_str(kvcr_audit::schema::Kind::Descriptor.text()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    let doc = |c: Value| {
        let mut d = Desc::new("content", 0, 1, 1).value();
        d["allocations"][0]["content"] = c;
        testkit::seal(&mut d);
        d
    };
    let good = doc(json!({"page_bytes": 4096, "pages": 16, "sha256": SHA}));
    assert!(v.is_valid(&good), "{good:#}");
    for bad in [
        json!({"page_bytes": 4000, "pages": 16, "sha256": SHA}),
        json!({"page_bytes": 4096, "pages": 65, "sha256": SHA}),
        json!({"page_bytes": 4096, "pages": 16, "sha256": SHA.to_uppercase()}),
        json!({"page_bytes": 4096, "pages": 16}),
        json!({"page_bytes": 4096, "pages": 16, "sha256": SHA, "x": 1}),
        json!(null),
    ] {
        assert!(!v.is_valid(&doc(bad.clone())), "{bad}");
    }
}
