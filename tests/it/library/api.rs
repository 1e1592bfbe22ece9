//! The library API (`kvcr_audit::api`, docs/format.md §13) answers what the
//! command answers: the audit and examine documents, seal and digest bytes,
//! the typed descriptor errors, the readiness gate's order of answers, and
//! the import plan the dry run carries (§13.4).

use crate::util::fleet::private;
use crate::util::testkit::{self, put_group, Desc};
use crate::util::{kvcr, repo};
use kvcr_audit::api::{self, AuditOptions, Error, GateOptions, Profile};
use kvcr_audit::finding::Code;
use serde_json::{json, Value};
use std::path::Path;

fn valid(kind: kvcr_audit::schema::Kind, doc: &Value) {
    let schema: Value = serde_json::from_str(kind.text()).unwrap();
    let v = jsonschema::draft202012::new(&schema).unwrap();
    let errs: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errs.is_empty(), "{kind:?}: {errs:?}\n{doc:#}");
}

fn cli_json(args: &[&str], cwd: &Path) -> (i32, Value) {
    let out = kvcr().current_dir(cwd).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[test]
fn audit_and_examine_are_the_clis_documents() {
    let case = repo().join("fixtures/kv106-profile-gpu");
    let (code, want) = cli_json(
        &[
            "audit",
            "inventory",
            "--format",
            "json",
            "--profile",
            "profile.json",
        ],
        &case,
    );
    let o = AuditOptions {
        profile: Some(Profile::Path(case.join("profile.json"))),
        ..AuditOptions::default()
    };
    let got = api::audit(&case.join("inventory"), &o).unwrap();
    assert_eq!(got.exit_status(), code);
    let mut got: Value = serde_json::from_str(got.as_json()).unwrap();
    // The CLI ran with a relative profile path.
    got["options"]["profile"] = want["options"]["profile"].clone();
    assert_eq!(testkit::without_clock(got), testkit::without_clock(want));

    let file = case.join("inventory/rank-0.json");
    let (code, want) = cli_json(
        &["examine", file.to_str().unwrap(), "--format", "json"],
        &case,
    );
    let got = api::examine(&file).unwrap();
    assert_eq!(got.exit_status(), code);
    let got: Value = serde_json::from_str(got.as_json()).unwrap();
    assert_eq!(testkit::without_clock(got), testkit::without_clock(want));

    // Options the flags would refuse are usage errors (exit 2).
    let strict = AuditOptions {
        strict: true,
        ..AuditOptions::default()
    };
    assert!(matches!(
        api::audit(&case.join("inventory"), &strict),
        Err(Error::Usage { .. })
    ));
    let engine = AuditOptions {
        engine: Some("bad id!".into()),
        ..AuditOptions::default()
    };
    assert_eq!(api::audit(&case, &engine).unwrap_err().exit_status(), 2);
    assert_eq!(api::parse_age("15m").unwrap(), 900);
    assert!(api::parse_age("5y").is_err());
}

#[test]
fn seal_json_is_kvcr_seal_and_errors_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = Desc::new("e", 0, 1, 1).value();
    v["model"]["name"] = json!("Qwen/通义千问 \u{1} \"q\"");
    let text = serde_json::to_vec(&v).unwrap();
    let f = dir.path().join("rank-0.json");
    std::fs::write(&f, &text).unwrap();
    let out = kvcr().args(["seal", "-q"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(api::seal_json(&text).unwrap(), std::fs::read(&f).unwrap());
    let out = kvcr().arg("digest").arg(&f).output().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        api::digest_json(&text).unwrap()
    );

    for (edit, field) in [
        (json!({"epoch": 18446744073709551616u128 as f64}), "epoch"),
        (json!({"epoch": true}), "epoch"),
        (json!({"rank": 1.0}), "rank"),
    ] {
        let mut bad = v.clone();
        for (k, x) in edit.as_object().unwrap() {
            bad[k] = x.clone();
        }
        match api::seal_json(&serde_json::to_vec(&bad).unwrap()) {
            Err(Error::Descriptor {
                code,
                field: Some(f),
                message,
            }) => {
                assert_eq!((code, f.as_str()), (Code::KV007, field), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Integers past u64 as written: out of range, not a float.
    let big = String::from_utf8(text.clone()).unwrap().replacen(
        "\"epoch\":1",
        "\"epoch\":18446744073709551616",
        1,
    );
    match api::seal_json(big.as_bytes()) {
        Err(Error::Descriptor {
            code: Code::KV007,
            field: Some(f),
            message,
        }) => {
            assert_eq!(f, "epoch");
            assert!(message.contains("18446744073709551616"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        api::seal_json(b"{\"a\":1,\"a\":2}"),
        Err(Error::Descriptor {
            code: Code::KV006,
            ..
        })
    ));
    assert!(matches!(
        api::digest_json(b"[1]"),
        Err(Error::Descriptor { .. })
    ));

    // write_rank_json: 0600, subdir 0700, never through a symlink.
    use std::os::unix::fs::PermissionsExt;
    let root = dir.path().join("inv");
    std::fs::create_dir(&root).unwrap();
    let write = |sub: &str| {
        let o = api::WriteOptions {
            subdir: Some(sub.into()),
            node_facts: Some(crate::util::fixtures_live("node-match.json")),
        };
        api::write_rank_json_with(&root, &text, &o)
    };
    let p = write("a/b").unwrap();
    assert_eq!(p, root.join("a/b/rank-0.json"));
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(root.join("a"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    std::os::unix::fs::symlink(dir.path(), root.join("link")).unwrap();
    assert!(write("link").is_err());
    assert!(matches!(write("../x"), Err(Error::Usage { .. })));
    // Against this machine the test kit's node is not this one: refused
    // with the audit's code and the member, nothing written.
    match api::write_rank_json(&root, &text, None) {
        Err(Error::Descriptor { code, field, .. }) => {
            assert!(matches!(code, Code::KV108 | Code::KV110), "{code:?}");
            assert!(field.is_some_and(|f| f.starts_with("node.") || f == "owner"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn proc_and_boot_id_read_as_the_live_audit_reads() {
    let me = std::process::id() as i32;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let ticks: u64 = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(api::proc_start_ticks(me).unwrap(), ticks);
    assert!(api::proc_start_ticks(0).is_err());
    let b = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(api::boot_id().unwrap().to_string(), b.trim());
}

#[test]
fn gate_usage_errors_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let d = Desc::new("llama3-70b-a", 0, 2, 1);
    put_group(&dir.path().join("inv"), "", &d);
    private(&dir.path().join("inv"));
    let inv = dir.path().join("inv");
    // No profile: a usage error before anything is read.
    let r = api::gate(&inv, &GateOptions::default());
    assert!(matches!(r, Err(Error::Usage { message, .. }) if message.contains("profile")));
    // An incomplete profile (no gpus): a usage error too.
    let mut p = testkit::profile(&d);
    p.as_object_mut().unwrap().remove("gpus");
    let o = GateOptions {
        profile: Some(Profile::Json(serde_json::to_vec(&p).unwrap())),
        ..GateOptions::default()
    };
    assert!(
        matches!(api::gate(&inv, &o), Err(Error::Usage { message, .. }) if message.contains("gpus"))
    );
    // On this node the descriptors' node is foreign: refused with the
    // import report (mode gate), and no GPU call.
    let o = GateOptions {
        profile: Some(Profile::Json(
            serde_json::to_vec(&testkit::profile(&d)).unwrap(),
        )),
        ..GateOptions::default()
    };
    match api::gate(&inv, &o) {
        Err(Error::Refused { report, message }) => {
            let r: Value = serde_json::from_str(report.as_json()).unwrap();
            valid(kvcr_audit::schema::Kind::ImportReport, &r);
            assert_eq!(
                (r["mode"].as_str(), r["result"].as_str()),
                (Some("gate"), Some("rejected"))
            );
            assert_eq!(r["exit_status"], 1);
            assert_eq!(r["backend"], "none");
            assert!(!message.is_empty());
        }
        other => panic!("{other:?}"),
    }
    // An empty inventory: refused, no descriptor.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    private(&empty);
    assert!(matches!(api::gate(&empty, &o), Err(Error::Refused { .. })));
}

#[test]
fn the_dry_run_carries_the_import_plan() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = Desc::new("llama3-70b-a", 0, 2, 1);
    d.allocations = 3;
    put_group(&dir.path().join("inv"), "", &d);
    let mut off = d.clone();
    off.rank = 1;
    let bytes = off.bytes_with(|v| {
        v["allocations"][2]["offset_bytes"] = json!(4096);
        v["allocations"][0]["content"] =
            json!({"page_bytes": 4096, "pages": 2, "sha256": "ab".repeat(32)});
    });
    std::fs::write(dir.path().join("inv/rank-1.json"), bytes).unwrap();
    private(&dir.path().join("inv"));
    facts_file(dir.path(), json!({"4242": 123456}));
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(dir.path().join("inv"))
        .env("KVCR_NODE_FACTS", dir.path().join("facts.json"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // No profile: the real import would stop there with exit 2, and the dry
    // run says so (docs/format.md §8.7); the plan is carried all the same.
    assert_eq!(out.status.code(), Some(2), "{v:#}");
    valid(kvcr_audit::schema::Kind::ImportReport, &v);
    let plan = &v["plan"];
    valid(kvcr_audit::schema::Kind::ImportPlan, plan);
    assert_eq!(plan["schema"], "kvcr.import-plan/v1");
    assert_eq!(plan["engine_id"], "llama3-70b-a");
    assert_eq!(plan["epoch"], 1);
    assert_eq!(plan["local_ranks"], Value::Null);
    let ranks = plan["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for r in ranks {
        let file: Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("inv").join(r["path"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        assert_eq!(r["digest"], file["digest"]);
        assert_eq!(r["gpu_uuid"], file["gpu_uuid"]);
        assert_eq!(r["owner"], file["owner"]);
        // The writer as judged: pid, start ticks and quiesced, from the file.
        assert_eq!(r["writer"], file["writer"]);
        assert_eq!(r["writer"].as_object().unwrap().len(), 3);
        let allocs = r["allocations"].as_array().unwrap();
        assert_eq!(allocs.len(), 3);
        for (a, f) in allocs.iter().zip(file["allocations"].as_array().unwrap()) {
            assert_eq!(a["id"], f["id"]);
            assert_eq!(a["size_bytes"], f["size_bytes"]);
            assert_eq!(a["handle"], f["handle"]);
            assert_eq!(
                a["offset_bytes"],
                f.get("offset_bytes").cloned().unwrap_or(json!(0))
            );
        }
    }
    assert_eq!(ranks[1]["allocations"][2]["offset_bytes"], 4096);
    // content (§3.6) as the descriptor states it, only where declared.
    assert_eq!(
        ranks[1]["allocations"][0]["content"],
        json!({"page_bytes": 4096, "pages": 2, "sha256": "ab".repeat(32)})
    );
    assert!(ranks[0]["allocations"][0].get("content").is_none());
    assert!(ranks[1]["allocations"][1].get("content").is_none());
    // A rejected group's dry run carries no plan.
    std::fs::remove_file(dir.path().join("inv/rank-1.json")).unwrap();
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(dir.path().join("inv"))
        .env("KVCR_NODE_FACTS", dir.path().join("facts.json"))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Still no profile, which is answered first (exit 2, §8.9).
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(v["result"], "rejected", "{v:#}");
    assert!(v.get("plan").is_none(), "{v:#}");
}

#[test]
fn content_digest_follows_the_sampling_rule() {
    let mem: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut calls = Vec::new();
    let mut read = |o: u64, n: u64| {
        calls.push((o, n));
        Ok(mem[o as usize..(o + n) as usize].to_vec())
    };
    let c = api::digest_content(8193, 100, 512, 3, &mut read).unwrap();
    assert_eq!(calls, [(100, 512), (3940, 512), (7781, 512)]);
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for (o, n) in &calls {
        h.update(&mem[*o as usize..(*o + *n) as usize]);
    }
    assert_eq!(c.sha256, <[u8; 32]>::from(h.finalize()));
    assert!(matches!(
        api::sampled_ranges(8193, 0, 512, 1),
        Err(api::ContentError::Shape(_))
    ));
}

/// `api::audit_files` (descriptors given as bytes, docs/format.md §13.1)
/// judges as `api::audit` judges an inventory holding exactly those files
/// as an owner writes them: every fixture made only of descriptors, copied
/// with private modes, with the fixture's options, gives the same groups,
/// findings, summary and exit status both ways, in whatever order the files
/// are given.
#[test]
fn audit_files_judges_as_the_audit_of_the_same_files_on_disk() {
    let mut compared = 0;
    for case in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let case = case.unwrap().path();
        let Ok(text) = std::fs::read_to_string(case.join("case.json")) else {
            continue;
        };
        let meta: Value = serde_json::from_str(&text).unwrap();
        let args: Vec<&str> = meta["args"]
            .as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap()).collect())
            .unwrap_or_default();
        let mut o = AuditOptions::default();
        let mut known = true;
        for pair in args.chunks(2) {
            match pair {
                ["--profile", p] => o.profile = Some(Profile::Path(case.join(p))),
                ["--engine", e] => o.engine = Some(e.to_string()),
                ["--max-age", a] => o.max_age_s = Some(api::parse_age(a).unwrap()),
                _ => known = false,
            }
        }
        let inv = case.join("inventory");
        let mut files = Vec::new();
        for e in walkdir::WalkDir::new(&inv).sort_by_file_name() {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(&inv).unwrap().to_path_buf();
            let name = e.file_name().to_string_lossy();
            if e.file_type().is_file() && name.starts_with("rank-") && name.ends_with(".json") {
                files.push((rel, std::fs::read(e.path()).unwrap()));
            } else if !e.file_type().is_dir() || name.starts_with("rank-") || name.ends_with(".tmp")
            {
                known = false;
            }
        }
        if !known || files.is_empty() {
            continue;
        }
        let d = tempfile::tempdir().unwrap();
        for (rel, bytes) in &files {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        private(d.path());
        let disk = api::audit(d.path(), &o).unwrap();
        let mut given: Vec<(&Path, &[u8])> = files
            .iter()
            .map(|(p, b)| (p.as_path(), b.as_slice()))
            .collect();
        given.reverse();
        let in_memory = || {
            let mem = api::audit_files(Path::new("/nowhere/inventory"), &given, &o).unwrap();
            let v: Value = serde_json::from_str(mem.as_json()).unwrap();
            (mem, v)
        };
        let (mut mem, mut mem_v) = in_memory();
        let disk_v: Value = serde_json::from_str(disk.as_json()).unwrap();
        if testkit::judgement(&mem_v) != testkit::judgement(&disk_v) {
            // Ages in words (`age N s`) may cross a second between two
            // audits: once more, after both, the step is behind them.
            let disk = api::audit(d.path(), &o).unwrap();
            let disk_v: Value = serde_json::from_str(disk.as_json()).unwrap();
            (mem, mem_v) = in_memory();
            assert_eq!(
                testkit::judgement(&mem_v),
                testkit::judgement(&disk_v),
                "{}",
                case.display()
            );
        }
        assert_eq!(mem.exit_status(), disk.exit_status(), "{}", case.display());
        assert_eq!(mem_v["root"], "/nowhere/inventory");
        valid(kvcr_audit::schema::Kind::Report, &mem_v);
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} fixtures compared");
}

/// What `api::audit_files` cannot stand for is refused, naming the path: a
/// path that is not plain names ending in a descriptor's name, too deep, a
/// directory named like a descriptor or a staging leftover, or a path given
/// twice. A file over the size limit is the reader's KV004, unread; nothing
/// named `root` is ever read.
#[test]
fn audit_files_refuses_what_it_cannot_stand_for_and_reads_no_disk() {
    let bytes = Desc::new("m", 0, 1, 1).bytes();
    let o = AuditOptions::default();
    let root = Path::new("/nowhere/inventory");
    let deep = format!("{}rank-0.json", "d/".repeat(8));
    for (bad, why) in [
        ("/abs/rank-0.json", "plain names"),
        ("g/../rank-0.json", "plain names"),
        ("./rank-0.json", "plain names"),
        ("g/notes.txt", "not a descriptor's name"),
        ("g/rank-01.json", "not a descriptor's name"),
        ("", "names no file"),
        (deep.as_str(), "deeper than 8"),
        ("rank-1.json/rank-0.json", "named like a descriptor"),
        (".stage.tmp/rank-0.json", "staging leftover"),
    ] {
        let e = api::audit_files(root, &[(Path::new(bad), &bytes[..])], &o).unwrap_err();
        assert_eq!(e.exit_status(), 2, "{bad}");
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
    let twice = [
        (Path::new("g/rank-0.json"), &bytes[..]),
        (Path::new("g/rank-0.json"), &bytes[..]),
    ];
    let e = api::audit_files(root, &twice, &o).unwrap_err();
    assert!(e.to_string().contains("g/rank-0.json: given twice"), "{e}");
    // Seven levels below the root is still read, as on disk.
    let seven = format!("{}rank-0.json", "d/".repeat(7));
    let ok = api::audit_files(root, &[(Path::new(&seven), &bytes[..])], &o).unwrap();
    assert_eq!(ok.exit_status(), 0, "{}", ok.as_json());
    // Over 1 MiB: KV004, unread, as the reader says it.
    let mut huge = bytes.clone();
    huge.resize(1024 * 1024 + 1, b' ');
    let r = api::audit_files(root, &[(Path::new("rank-0.json"), &huge[..])], &o).unwrap();
    let v: Value = serde_json::from_str(r.as_json()).unwrap();
    assert_eq!(r.exit_status(), 1);
    assert!(
        r.as_json()
            .contains("larger than 1048576 bytes; rejected unread"),
        "{v:#}"
    );
    assert!(!root.exists());
}

/// A facts file describing the node of testkit's descriptors, with
/// `processes` as given.
fn facts_file(dir: &Path, processes: Value) -> std::path::PathBuf {
    let gpus: Vec<String> = (0..2).map(|r| testkit::gpu(0, r)).collect();
    let facts = json!({
        "boot_id": testkit::BOOT_ID, "hostname": testkit::HOSTNAME,
        "processes": processes, "processes_unreadable": null,
        "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}
    });
    let p = dir.join("facts.json");
    std::fs::write(&p, facts.to_string()).unwrap();
    p
}

#[test]
fn node_facts_and_threads_are_options_and_notes_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    put_group(&inv, "", &Desc::new("opts", 0, 2, 1));
    private(&inv);
    let facts = facts_file(dir.path(), json!({"4242": 123456}));
    let out = kvcr()
        .args(["audit", "--live", "--format", "json"])
        .arg(&inv)
        .env("KVCR_NODE_FACTS", &facts)
        .output()
        .unwrap();
    let want: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    for threads in [None, Some(1), Some(3), Some(0)] {
        let o = AuditOptions {
            live: true,
            node_facts: Some(facts.clone()),
            threads,
            ..AuditOptions::default()
        };
        let got = api::audit(&inv, &o).unwrap();
        assert_eq!(got.exit_status(), out.status.code().unwrap());
        let doc: Value = serde_json::from_str(got.as_json()).unwrap();
        assert_eq!(doc["node_facts_source"], facts.to_str().unwrap());
        assert_eq!(
            testkit::without_clock(doc),
            testkit::without_clock(want.clone())
        );
        // The command's note, returned instead of printed, naming the option.
        let note = format!(
            "node facts come from node_facts={}, not from this node",
            facts.display()
        );
        assert_eq!(got.notes(), std::slice::from_ref(&note));
        assert!(
            stderr.contains(&note.replace("node_facts=", "KVCR_NODE_FACTS=")),
            "{stderr}"
        );
    }
    // Offline: no probe, no note.
    let got = api::audit(&inv, &AuditOptions::default()).unwrap();
    assert!(got.notes().is_empty());
    // A facts file that cannot be read names the option, not the variable.
    let o = AuditOptions {
        live: true,
        node_facts: Some(dir.path().join("missing.json")),
        ..AuditOptions::default()
    };
    match api::audit(&inv, &o) {
        Err(Error::Usage { message, .. }) => {
            assert!(message.contains("cannot read node_facts="), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A profile given as a value says so.
    let p = testkit::profile(&Desc::new("opts", 0, 2, 1));
    let o = AuditOptions {
        profile: Some(Profile::Json(serde_json::to_vec(&p).unwrap())),
        ..AuditOptions::default()
    };
    let doc: Value = serde_json::from_str(api::audit(&inv, &o).unwrap().as_json()).unwrap();
    assert_eq!(doc["options"]["profile"], Value::Null);
    assert_eq!(doc["options"]["profile_source"], "value");
    valid(kvcr_audit::schema::Kind::Report, &doc);
}

/// Run by [`the_library_reads_no_environment_variable`] in a child process
/// whose environment names a profile, a facts file, a thread count and a
/// `/proc` that would each change the answer: none does.
#[test]
#[ignore = "a child of the_library_reads_no_environment_variable"]
fn child_audits_with_a_hostile_environment() {
    let inv = std::path::PathBuf::from(std::env::var_os("KVCR_TEST_INVENTORY").unwrap());
    for k in [
        "KVCR_PROFILE",
        "KVCR_NODE_FACTS",
        "KVCR_THREADS",
        "KVCR_PROC_ROOT",
    ] {
        assert!(std::env::var_os(k).is_some(), "{k} set by the parent");
    }
    let o = AuditOptions {
        live: true,
        ..AuditOptions::default()
    };
    let got = api::audit(&inv, &o).expect("neither the profile nor the facts file is read");
    let doc: Value = serde_json::from_str(got.as_json()).unwrap();
    assert_eq!(doc["node_facts_source"], "proc", "{doc:#}");
    assert_eq!(doc["options"]["profile"], Value::Null, "{doc:#}");
    assert!(doc["options"].get("profile_source").is_none(), "{doc:#}");
    assert!(
        got.notes().iter().all(|n| !n.contains("KVCR_")),
        "{:?}",
        got.notes()
    );
    let g = GateOptions::default();
    let no_profile =
        |r| matches!(r, Err(Error::Usage { message, .. }) if message.contains("profile"));
    assert!(
        no_profile(api::gate(&inv, &g)),
        "the gate took no profile from the environment"
    );
    println!("child-ran-to-the-end");
}

#[test]
fn the_library_reads_no_environment_variable() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    put_group(&inv, "", &Desc::new("env", 0, 2, 1));
    private(&inv);
    // Each would fail the run or change the report if it were read.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "library::api::child_audits_with_a_hostile_environment",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KVCR_TEST_INVENTORY", &inv)
        .env("KVCR_PROFILE", dir.path().join("no-such-profile.json"))
        .env("KVCR_NODE_FACTS", dir.path().join("no-such-facts.json"))
        .env("KVCR_THREADS", "not-a-number")
        .env("KVCR_PROC_ROOT", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("child-ran-to-the-end"), "{stdout}");
    assert!(
        !stderr.contains("kvcr: note"),
        "the library printed: {stderr}"
    );
}

/// Run by [`a_long_running_caller_sees_the_gpu_list_afresh`] in a child
/// process that loads the fake driver (tests/fakecuda) with its first
/// `cuInit` failing: a driver that was not ready yet.
#[test]
#[ignore = "a child of a_long_running_caller_sees_the_gpu_list_afresh"]
fn child_asks_twice_while_the_driver_comes_up() {
    let inv = std::path::PathBuf::from(std::env::var_os("KVCR_TEST_INVENTORY").unwrap());
    let o = AuditOptions {
        live: true,
        ..AuditOptions::default()
    };
    let gpu_check = || {
        let doc: Value = serde_json::from_str(api::audit(&inv, &o).unwrap().as_json()).unwrap();
        let rank = &doc["groups"][0]["ranks"][0];
        let not_checked: Vec<String> = rank["not_checked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        (not_checked, doc)
    };
    let (first, doc) = gpu_check();
    assert!(
        first.iter().any(|n| n.starts_with("gpu-present:")),
        "the first cuInit fails: {doc:#}"
    );
    // The same process asks again: the list is read afresh, not the failure
    // kept from the first call.
    let (second, doc) = gpu_check();
    assert!(
        !second.iter().any(|n| n.starts_with("gpu-present:")),
        "{doc:#}"
    );
    assert!(!doc.to_string().contains("KV106"), "{doc:#}");
    println!("child-ran-to-the-end");
}

#[test]
fn a_long_running_caller_sees_the_gpu_list_afresh() {
    let Some(b) = crate::import::fakecuda::built() else {
        return; // no C compiler; fakecuda.rs says so (and fails in CI)
    };
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    // Written on this node, so the GPU is looked up (not skipped as foreign).
    let d = Desc::new("gpus", 0, 1, 1);
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let bytes = d.bytes_with(|v| {
        v["node"]["boot_id"] = json!(boot.trim());
        v["node"]["hostname"] = json!(host);
    });
    testkit::put(&inv, "rank-0.json", &bytes);
    private(&inv);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "library::api::child_asks_twice_while_the_driver_comes_up",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KVCR_TEST_INVENTORY", &inv)
        .env("LD_LIBRARY_PATH", &b.lib_dir)
        .env("FAKECUDA_GPUS", testkit::gpu(0, 0))
        // CUDA_ERROR_NOT_INITIALIZED (3) from the first cuInit only.
        .env("FAKECUDA_FAIL", "cuInit:1:3")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("child-ran-to-the-end"), "{stdout}");
}

#[test]
fn a_gate_that_cannot_list_the_gpus_says_how_to_give_node_facts() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    let d = Desc::new("nogpu", 0, 2, 1);
    put_group(&inv, "", &d);
    private(&inv);
    let profile = || {
        Some(Profile::Json(
            serde_json::to_vec(&testkit::profile(&d)).unwrap(),
        ))
    };
    // A node whose GPUs could not be read: everything else checks out.
    let facts = dir.path().join("facts.json");
    let f = json!({
        "boot_id": testkit::BOOT_ID, "hostname": testkit::HOSTNAME,
        "processes": {"4242": 123456}, "gpus": null
    });
    std::fs::write(&facts, f.to_string()).unwrap();
    let o = GateOptions {
        profile: profile(),
        node_facts: Some(facts.clone()),
        ..GateOptions::default()
    };
    let (message, report) = match api::gate(&inv, &o) {
        Err(Error::Refused { message, report }) => (message, report),
        other => panic!("{other:?}"),
    };
    let r: Value = serde_json::from_str(report.as_json()).unwrap();
    assert_eq!(r["refusals"][0]["gate"], "not-checked", "{r:#}");
    for text in [
        message.as_str(),
        r["refusals"][0]["message"].as_str().unwrap(),
    ] {
        assert!(text.contains("gpu-present: "), "{text}");
        assert!(
            text.contains("node_facts=FILE") && text.contains("docs/live.md"),
            "{text}"
        );
    }
    // Neighbour: GPUs listed, another fact not checked: no GPU hint.
    let gpus: Vec<String> = (0..2).map(|r| testkit::gpu(0, r)).collect();
    let f = json!({
        "boot_id": null, "hostname": testkit::HOSTNAME,
        "processes": {"4242": 123456}, "gpus": {"visible": gpus, "on_node": gpus}
    });
    std::fs::write(&facts, f.to_string()).unwrap();
    match api::gate(&inv, &o) {
        Err(Error::Refused { message, .. }) => {
            assert!(message.contains("boot_id: "), "{message}");
            assert!(!message.contains("node_facts=FILE"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The command line's import says what it always said (the driver is
    // its own check there, §8.9).
    let out = kvcr()
        .args(["import", "--dry-run", "--format", "json"])
        .arg(&inv)
        .env("KVCR_NODE_FACTS", &facts)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("node_facts=FILE"));
}

#[test]
fn current_epoch_is_the_highest_epoch_of_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    std::fs::create_dir(&inv).unwrap();
    private(&inv);
    assert_eq!(api::current_epoch(&inv, "grp").unwrap(), None);
    let mut d = Desc::new("grp", 0, 1, 1);
    d.epoch = 3;
    put_group(&inv, "old", &d);
    d.epoch = 7;
    d.incarnation = testkit::INCARNATION_B.into();
    put_group(&inv, "new", &d);
    // A descriptor of the group that does not parse still names its epoch.
    let mut broken = d.clone();
    broken.epoch = 9;
    let bytes = broken.bytes_with(|v| v["world_size"] = json!("one"));
    testkit::put(&inv, "broken/rank-0.json", &bytes);
    put_group(&inv, "other", &Desc::new("other-grp", 0, 1, 1));
    assert_eq!(api::current_epoch(&inv, "grp").unwrap(), Some(9));
    assert_eq!(api::current_epoch(&inv, "other-grp").unwrap(), Some(1));
    assert_eq!(api::current_epoch(&inv, "absent").unwrap(), None);
    assert!(matches!(
        api::current_epoch(&inv, "bad id!"),
        Err(Error::Usage { .. })
    ));
    assert!(matches!(
        api::current_epoch(&dir.path().join("missing"), "grp"),
        Err(Error::Usage { .. })
    ));
    // The audit agrees: the highest epoch is the current incarnation's.
    std::fs::remove_dir_all(inv.join("broken")).unwrap();
    let o = AuditOptions {
        engine: Some("grp".into()),
        ..AuditOptions::default()
    };
    let doc: Value = serde_json::from_str(api::audit(&inv, &o).unwrap().as_json()).unwrap();
    assert_eq!(doc["groups"][0]["epoch"], 7);
    assert_eq!(api::current_epoch(&inv, "grp").unwrap(), Some(7));
}

/// `audit_structured` and `gate_structured` are the documents `audit` and
/// `gate` render (docs/format.md §13.1): any serializer sees the text's
/// keys, in its order, with its values, and the exit status and notes are
/// the document's.
#[test]
fn structured_documents_are_the_rendered_ones() {
    let same = |s: &api::Structured, what: &str| {
        let doc = s.to_document().unwrap();
        let text: Value = serde_json::from_str(doc.as_json()).unwrap();
        assert_eq!(
            serde_json::to_string(s).unwrap(),
            serde_json::to_string(&text).unwrap(),
            "{what}"
        );
        assert_eq!(s.exit_status(), doc.exit_status(), "{what}");
        assert_eq!(s.notes(), doc.notes(), "{what}");
        text
    };
    let mut cases = 0;
    for e in std::fs::read_dir(repo().join("fixtures")).unwrap() {
        let case = e.unwrap().path();
        if !case.join("case.json").is_file() {
            continue;
        }
        let inv = case.join("inventory");
        let s = api::audit_structured(&inv, &AuditOptions::default()).unwrap();
        let text = same(&s, &case.display().to_string());
        let rendered: Value = serde_json::from_str(
            api::audit(&inv, &AuditOptions::default())
                .unwrap()
                .as_json(),
        )
        .unwrap();
        assert_eq!(
            testkit::without_clock(text),
            testkit::without_clock(rendered)
        );
        cases += 1;
    }
    assert!(cases >= 30, "{cases} fixtures");

    // The gate's plan, of an accepted group on the node the facts describe.
    let dir = tempfile::tempdir().unwrap();
    let d = Desc::new("llama3-70b-a", 0, 2, 1);
    put_group(&dir.path().join("inv"), "", &d);
    private(&dir.path().join("inv"));
    facts_file(dir.path(), json!({"4242": 123456}));
    let o = GateOptions {
        profile: Some(Profile::Json(
            serde_json::to_vec(&testkit::profile(&d)).unwrap(),
        )),
        node_facts: Some(dir.path().join("facts.json")),
        ..GateOptions::default()
    };
    let s = api::gate_structured(&dir.path().join("inv"), &o).unwrap();
    let plan = same(&s, "gate");
    assert_eq!(plan["schema"], "kvcr.import-plan/v1");
    assert_eq!(plan["ranks"].as_array().unwrap().len(), 2);
    assert!(s.notes()[0].contains("node_facts="), "{:?}", s.notes());
    let rendered: Value =
        serde_json::from_str(api::gate(&dir.path().join("inv"), &o).unwrap().as_json()).unwrap();
    assert_eq!(
        testkit::without_clock(plan),
        testkit::without_clock(rendered)
    );
    // A refusal is the same error as the rendering call's.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    private(&empty);
    assert!(matches!(
        api::gate_structured(&empty, &o),
        Err(Error::Refused { .. })
    ));
}
