//! The writer side (docs/format.md §3.5): `kvcr seal`, `kvcr digest`, the
//! Rust API and the Python recipe of the format document, each checked by
//! auditing what it wrote.

use crate::util::testkit::{to_bytes, Desc};
use crate::util::{audit_json, kvcr};
use serde_json::Value;
use std::fs;
use std::path::Path;

fn copy_fixture(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
        .join("inventory");
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// docs/format.md §6.1: a hand edit leaves the digest stale (KV008), and
/// `kvcr seal` refuses to launder it; only `--reseal-edited` seals the files
/// as they are now, saying for each what it overrode, and then they audit
/// clean.
#[test]
fn a_hand_edited_descriptor_is_resealed_only_when_asked_and_then_audits_clean() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("accept-tp4", dir.path());
    assert_eq!(audit_json(dir.path(), &[]).0, 0);
    // Edit rank 1 by hand: a new model revision in every rank, one of them
    // rewritten compactly with the members in another order.
    for r in 0..4 {
        let p = dir.path().join(format!("rank-{r}.json"));
        let mut v: Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        v["model"]["revision"] = Value::from("abcdef12");
        let text = if r == 1 {
            let mut o = v.as_object().unwrap().clone();
            let d = o.shift_remove("digest").unwrap();
            let mut sorted: serde_json::Map<String, Value> = serde_json::Map::new();
            sorted.insert("digest".into(), d);
            sorted.extend(o);
            serde_json::to_vec(&Value::Object(sorted)).unwrap()
        } else {
            to_bytes(&v)
        };
        fs::write(&p, text).unwrap();
    }
    let (code, report) = audit_json(dir.path(), &[]);
    assert_eq!(code, 1);
    assert!(report.to_string().contains("KV008"));
    let files: Vec<_> = (0..4)
        .map(|r| dir.path().join(format!("rank-{r}.json")))
        .collect();
    let before = crate::util::testkit::snapshot(dir.path());
    let out = kvcr().arg("seal").args(&files).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("KV008 digest does not match").count(),
        4,
        "{stderr}"
    );
    assert!(stderr.contains("--reseal-edited"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(
        crate::util::testkit::snapshot(dir.path()),
        before,
        "refused, nothing written"
    );
    let out = kvcr()
        .args(["seal", "--reseal-edited"])
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches("resealed ").count(), 4, "{stdout}");
    assert_eq!(stdout.matches(", overriding KV008 ").count(), 4, "{stdout}");
    let (code, report) = audit_json(dir.path(), &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(names(dir.path()).len(), 4, "no staging file left behind");
    // The member order of the compact file is kept; the digest stays first.
    let v: Value = serde_json::from_slice(&fs::read(&files[1]).unwrap()).unwrap();
    assert_eq!(v.as_object().unwrap().keys().next().unwrap(), "digest");
    // Sealing again changes nothing.
    let before = fs::read(&files[2]).unwrap();
    let out = kvcr().arg("seal").arg(&files[2]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("already sealed"));
    assert_eq!(fs::read(&files[2]).unwrap(), before);
    // kvcr digest prints what the file now carries.
    let out = kvcr().arg("digest").arg(&files[1]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        v["digest"].as_str().unwrap()
    );
}

#[test]
fn refused_files_are_left_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = d.join("rank-0.json");
    // Never sealed (no digest member): sealable.
    let v = Desc::new("e", 0, 2, 1).value();
    assert!(v.get("digest").is_none());
    fs::write(&good, to_bytes(&v)).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("not-json.json", b"{\"schema\": ".to_vec()),
        ("dup-key.json", br#"{"rank": 0, "rank": 1}"#.to_vec()),
        ("too-large.json", vec![b' '; 2 * 1024 * 1024]),
    ];
    let mut schema_bad = Desc::new("e", 1, 2, 1).value();
    schema_bad["epoch"] = Value::from(0);
    cases.push(("schema.json", to_bytes(&schema_bad)));
    for (name, bytes) in &cases {
        fs::write(d.join(name), bytes).unwrap();
    }
    std::os::unix::fs::symlink("rank-0.json", d.join("link.json")).unwrap();
    // Replacing one name of a hard-linked file would leave the other stale.
    let linked = Desc::new("e", 1, 2, 1).value();
    fs::write(d.join("linked.json"), to_bytes(&linked)).unwrap();
    fs::hard_link(d.join("linked.json"), d.join("linked-too.json")).unwrap();
    let before = crate::util::testkit::snapshot(d);
    let mut refused: Vec<&str> = cases.iter().map(|c| c.0).collect();
    refused.push("link.json");
    refused.push("linked.json");
    for name in &refused {
        // Alone, and beside a file that could be sealed: nothing is written.
        for with_good in [false, true] {
            let mut cmd = kvcr();
            cmd.arg("seal");
            if with_good {
                cmd.arg(&good);
            }
            let out = cmd.arg(d.join(name)).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
            assert!(stderr.contains(name), "{name}: {stderr}");
            assert!(stderr.contains("no file was written"), "{stderr}");
            // Every refusal names its code, as the audit would give it.
            let code = match *name {
                "not-json.json" | "dup-key.json" => "KV006",
                "too-large.json" => "KV004",
                "schema.json" => "KV007",
                "link.json" => "KV001",
                _ => "KV002",
            };
            assert!(stderr.contains(code), "{name}: {code}: {stderr}");
            assert_eq!(crate::util::testkit::snapshot(d), before, "{name} touched");
        }
        let out = kvcr().arg("digest").arg(d.join(name)).output().unwrap();
        // digest reads any JSON object: only the schema and hard-link cases print one.
        let expect = if ["schema.json", "linked.json"].contains(name) {
            0
        } else {
            1
        };
        assert_eq!(out.status.code(), Some(expect), "digest {name}");
    }
    assert!(fs::symlink_metadata(d.join("link.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    // A file that does not exist is "could not run", exit 2.
    let out = kvcr()
        .arg("seal")
        .arg(d.join("missing.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = kvcr()
        .arg("digest")
        .arg(d.join("missing.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(crate::util::testkit::snapshot(d), before);
}

#[test]
fn the_rust_api_writes_an_inventory_that_audits_clean() {
    let dir = tempfile::tempdir().unwrap();
    for rank in 0..4 {
        let v = Desc::new("api-group", rank, 2, 2).value();
        let facts = crate::util::fixtures_live("node-match.json");
        let p = kvcr_audit::writer::write_rank_with(dir.path(), &v, Some(&facts)).unwrap();
        assert_eq!(p.file_name().unwrap(), format!("rank-{rank}.json").as_str());
    }
    assert_eq!(
        names(dir.path()),
        ["rank-0.json", "rank-1.json", "rank-2.json", "rank-3.json"]
    );
    let (code, report) = audit_json(dir.path(), &[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["groups"][0]["engine_id"], "api-group");
}

/// The Python block of docs/format.md §3.5, verbatim.
fn python_recipe() -> String {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/format.md")).unwrap();
    let start = doc
        .find("```python\n")
        .expect("a python block in docs/format.md")
        + 10;
    let len = doc[start..].find("```").unwrap();
    doc[start..start + len].to_string()
}

#[test]
fn the_python_recipe_writes_an_inventory_that_audits_clean() {
    let recipe = python_recipe();
    assert!(recipe.contains("def write_rank"), "{recipe}");
    let have_python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_python {
        crate::util::missing("needs python3 to run the Python recipe");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inventory");
    fs::create_dir(&inv).unwrap();
    let values: Vec<Value> = (0..2)
        .map(|r| {
            let mut v = Desc::new("py-group", r, 2, 1).value();
            // Text the canonical form must escape, and non-ASCII it must not.
            v["model"]["name"] = Value::from("modèle \"q\"\\/\u{1}");
            v
        })
        .collect();
    let input = dir.path().join("values.json");
    fs::write(&input, serde_json::to_vec(&values).unwrap()).unwrap();
    let script = format!(
        "{recipe}\nimport sys\nfor obj in json.load(open(sys.argv[1])):\n    \
         write_rank(sys.argv[2], obj)\n"
    );
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(&script)
        .arg(&input)
        .arg(&inv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names(&inv), ["rank-0.json", "rank-1.json"]);
    let (code, report) = audit_json(&inv, &[]);
    assert_eq!(code, 0, "{report:#}");
    // Python and kvcr agree on the digest.
    let out = kvcr()
        .arg("digest")
        .arg(inv.join("rank-1.json"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&fs::read(inv.join("rank-1.json")).unwrap()).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), v["digest"]);
}

/// The sealed text of a fresh descriptor and the same text edited after
/// sealing (`epoch` 1 → 2), with the two digests: the one it carries and its
/// content's.
fn edited_after_sealing() -> (Vec<u8>, Vec<u8>, String, String) {
    let sealed =
        kvcr_audit::api::seal_json(&to_bytes(&Desc::new("launder", 0, 1, 1).value())).unwrap();
    let text = String::from_utf8(sealed.clone()).unwrap();
    assert!(text.contains("\"epoch\": 1,"));
    let edited = text
        .replacen("\"epoch\": 1,", "\"epoch\": 2,", 1)
        .into_bytes();
    let carried = kvcr_audit::api::digest_json(&sealed).unwrap();
    let actual = kvcr_audit::api::digest_json(&edited).unwrap();
    assert_ne!(carried, actual);
    (sealed, edited, carried, actual)
}

/// docs/format.md §6.1, issue #30 §3: `kvcr seal FILE` never launders. A
/// file whose digest is not its content's (edited, or damaged: another
/// digest, a malformed one, one that is not a string) is refused with KV008
/// naming both digests, nothing written, and the audit still says KV008;
/// beside clean files, none of them is written either. A file with no
/// digest is sealed, one whose digest matches is already sealed, with or
/// without the flag.
#[test]
fn seal_refuses_a_descriptor_whose_digest_does_not_match_its_content() {
    let (sealed, edited, carried, actual) = edited_after_sealing();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("rank-0.json");
    let other = d.path().join("rank-1.json");
    let fresh = to_bytes(&Desc::new("launder", 1, 2, 1).value());
    let edited_text = String::from_utf8(edited.clone()).unwrap();
    let damaged: Vec<(&str, Vec<u8>, String)> = vec![
        ("edited", edited.clone(), carried.clone()),
        (
            "malformed digest",
            edited_text
                .replacen(&carried, "sha256:stale", 1)
                .into_bytes(),
            "sha256:stale".to_string(),
        ),
        (
            "digest null",
            edited_text
                .replacen(&format!("\"{carried}\""), "null", 1)
                .into_bytes(),
            "null (not a string)".to_string(),
        ),
        (
            "upper-case other digest",
            edited_text
                .replacen(
                    &carried,
                    &carried.to_uppercase().replace("SHA256", "sha256"),
                    1,
                )
                .into_bytes(),
            carried.to_uppercase().replace("SHA256", "sha256"),
        ),
    ];
    for (what, bytes, shown) in &damaged {
        fs::write(&p, bytes).unwrap();
        fs::write(&other, &fresh).unwrap();
        let before = crate::util::testkit::snapshot(d.path());
        for files in [vec![&p], vec![&other, &p]] {
            let out = kvcr().arg("seal").args(&files).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "KV008 digest does not match the content (torn or edited file): it carries \
                     {shown}, its content digests to {actual}"
                )),
                "{what}: {stderr}"
            );
            assert!(stderr.contains("no file was written"), "{what}: {stderr}");
            assert!(out.stdout.is_empty(), "{what}");
            assert_eq!(
                crate::util::testkit::snapshot(d.path()),
                before,
                "{what}: written"
            );
        }
        let (code, report) = audit_json(d.path(), &[]);
        assert_eq!(code, 1, "{what}: {report:#}");
        fs::remove_file(&other).unwrap();
    }
    // Never sealed: sealed. Sealed and unchanged: already sealed.
    let mut unsealed: Value = serde_json::from_slice(&sealed).unwrap();
    unsealed.as_object_mut().unwrap().shift_remove("digest");
    fs::write(&p, to_bytes(&unsealed)).unwrap();
    let out = kvcr().arg("seal").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("sealed "));
    for flag in [None, Some("--reseal-edited")] {
        let out = kvcr().arg("seal").args(flag).arg(&p).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("already sealed "));
    }
    assert_eq!(audit_json(d.path(), &[]).0, 0);
}

/// With `--reseal-edited` the operator says the edit is meant: the file is
/// sealed as it is now, and the output says what was overridden (both
/// digests) on stdout, or on stderr with `--quiet`. The bytes are exactly
/// what the library's seal of the same text gives (`api::seal_json`,
/// `writer::seal_value`), which keeps sealing a value its caller built
/// (docs/format.md §13.1).
#[test]
fn reseal_edited_says_what_it_overrode_and_writes_the_librarys_bytes() {
    let (_, edited, carried, actual) = edited_after_sealing();
    let library = kvcr_audit::api::seal_json(&edited).unwrap();
    let value: Value = serde_json::from_slice(&edited).unwrap();
    assert_eq!(kvcr_audit::writer::seal_value(&value).unwrap(), library);
    let overriding = format!(
        "overriding KV008 digest does not match the content (torn or edited file): it carries \
         {carried}, its content digests to {actual}"
    );
    for quiet in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rank-0.json");
        fs::write(&p, &edited).unwrap();
        let out = kvcr()
            .args(["seal", "--reseal-edited"])
            .args(quiet.then_some("-q"))
            .arg(&p)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let line = format!("resealed {}, {overriding}", p.display());
        if quiet {
            assert!(stdout.is_empty(), "{stdout}");
            assert!(
                stderr.contains(&format!("kvcr: warning: {line}")),
                "{stderr}"
            );
        } else {
            assert_eq!(stdout.trim_end(), line);
        }
        assert_eq!(fs::read(&p).unwrap(), library, "the library's bytes");
        assert_eq!(audit_json(d.path(), &[]).0, 0);
    }
}

/// An integer out of range is refused naming its code (KV007), the field
/// and the literal, like every other refusal of seal.
#[test]
fn seal_names_kv007_for_an_integer_out_of_range() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("rank-0.json");
    let text = String::from_utf8(to_bytes(&Desc::new("range", 0, 1, 1).value())).unwrap();
    let big = text.replacen("\"epoch\": 1,", "\"epoch\": 18446744073709551616,", 1);
    assert_ne!(big, text);
    fs::write(&p, &big).unwrap();
    let out = kvcr().arg("seal").arg(&p).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "KV007 epoch: out of range (an integer must fit 64 bits), found 18446744073709551616"
        ),
        "{stderr}"
    );
    assert_eq!(fs::read_to_string(&p).unwrap(), big);
}

/// `kvcr explain KV008` says what seal does with such a file.
#[test]
fn explain_kv008_says_seal_refuses_unless_reseal_edited() {
    let out = kvcr().args(["explain", "KV008"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text.contains("refuses this file (KV008, naming both digests)"),
        "{text}"
    );
    assert!(text.contains("kvcr seal --reseal-edited FILE"), "{text}");
}

/// One descriptor broken in a way it can be judged on its own (the code the
/// audit gives it), for every writer and examine to agree on.
type Defect = (
    &'static str,
    kvcr_audit::finding::Code,
    Box<dyn Fn(&mut Value)>,
);

fn own_defects() -> Vec<Defect> {
    use kvcr_audit::finding::Code;
    vec![
        (
            "rank not below world_size",
            Code::KV101,
            Box::new(|v| v["rank"] = 2.into()),
        ),
        (
            "world_size is not tp × pp",
            Code::KV101,
            Box::new(|v| {
                v["tp"] = 3.into();
            }),
        ),
        (
            "allocations smaller than the geometry needs",
            Code::KV104,
            Box::new(|v| v["allocations"][0]["size_bytes"] = 4096.into()),
        ),
        (
            "two allocations with one id",
            Code::KV104,
            Box::new(|v| v["allocations"][1]["id"] = "kv-0".into()),
        ),
        (
            "one handle twice within the descriptor",
            Code::KV111,
            Box::new(|v| v["allocations"][1]["handle"] = v["allocations"][0]["handle"].clone()),
        ),
        (
            "created_unix_ms in seconds",
            Code::KV108,
            Box::new(|v| v["created_unix_ms"] = 1_764_460_800u64.into()),
        ),
        (
            "created_unix_ms one below 10^12",
            Code::KV108,
            Box::new(|v| v["created_unix_ms"] = 999_999_999_999u64.into()),
        ),
    ]
}

#[test]
fn every_writer_refuses_what_examine_rejects_with_the_same_code() {
    let dir = tempfile::tempdir().unwrap();
    let facts = crate::util::fixtures_live("node-match.json");
    let mut base = Desc::new("own", 1, 2, 1);
    base.allocations = 2;
    for (what, code, edit) in own_defects() {
        let mut v = base.value();
        edit(&mut v);
        let text = serde_json::to_vec(&v).unwrap();
        // examine (the file sealed by hand, as the test kit seals).
        let mut sealed = v.clone();
        crate::util::testkit::seal(&mut sealed);
        let f = dir.path().join(format!("rank-{}.json", v["rank"]));
        fs::write(&f, to_bytes(&sealed)).unwrap();
        let out = kvcr()
            .args(["examine", "--format", "json"])
            .arg(&f)
            .output()
            .unwrap();
        let ex: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(1), "{what}: {ex:#}");
        assert!(ex.to_string().contains(code.as_str()), "{what}: {ex:#}");
        // kvcr seal refuses it, naming the code, and writes nothing.
        let before = fs::read(&f).unwrap();
        let out = kvcr().arg("seal").arg(&f).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(code.as_str()), "{what}: {err}");
        assert_eq!(fs::read(&f).unwrap(), before, "{what}");
        fs::remove_file(&f).unwrap();
        // The Rust writer and the library, with the audit's code.
        match kvcr_audit::writer::seal_value(&v) {
            Err(kvcr_audit::writer::Error::Refused(m)) => assert!(m.contains(code.as_str()), "{m}"),
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            kvcr_audit::writer::write_rank_with(dir.path(), &v, Some(&facts)).is_err(),
            "{what}"
        );
        match kvcr_audit::api::seal_json(&text) {
            Err(kvcr_audit::api::Error::Descriptor { code: c, .. }) => {
                assert_eq!(c, code, "{what}")
            }
            other => panic!("{what}: {other:?}"),
        }
        let o = kvcr_audit::api::WriteOptions {
            subdir: None,
            node_facts: Some(facts.clone()),
        };
        match kvcr_audit::api::write_rank_json_with(dir.path(), &text, &o) {
            Err(kvcr_audit::api::Error::Descriptor { code: c, .. }) => {
                assert_eq!(c, code, "{what}")
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(
            names(dir.path()).is_empty(),
            "{what}: {:?}",
            names(dir.path())
        );
    }
    // Neighbours: the same descriptor unbroken, a time at exactly 10^12 ms,
    // and a rank written alone (its group's other rank missing is the
    // audit's KV103, never the writer's) are written.
    let mut v = base.value();
    kvcr_audit::writer::write_rank_with(dir.path(), &v, Some(&facts)).unwrap();
    v["created_unix_ms"] = 1_000_000_000_000u64.into();
    let o = kvcr_audit::api::WriteOptions {
        subdir: Some("edge".into()),
        node_facts: Some(facts.clone()),
    };
    kvcr_audit::api::write_rank_json_with(dir.path(), &serde_json::to_vec(&v).unwrap(), &o)
        .unwrap();
    let out = kvcr()
        .arg("examine")
        .arg(dir.path().join("edge/rank-1.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_time_in_seconds_is_one_finding_with_or_without_a_maximum_age() {
    let dir = tempfile::tempdir().unwrap();
    let d = Desc::new("secs", 0, 1, 1);
    crate::util::testkit::put(
        dir.path(),
        "rank-0.json",
        &d.bytes_with(|v| v["created_unix_ms"] = 1_764_460_800u64.into()),
    );
    for args in [&[][..], &["--max-age", "1d"], &["--max-age", "100000d"]] {
        let (code, v) = audit_json(dir.path(), args);
        assert_eq!(code, 1, "{args:?}: {v:#}");
        let rank = &v["groups"][0]["ranks"][0];
        assert_eq!(rank["verdict"], "reject");
        let findings = rank["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{args:?}: {findings:#?}");
        assert_eq!(findings[0]["code"], "KV108");
        let m = findings[0]["message"].as_str().unwrap();
        assert!(
            m.contains("plausibly seconds") && m.contains("2025-11-30"),
            "{m}"
        );
        assert_eq!(v["groups"][0]["cause_code"], "KV108");
    }
}
