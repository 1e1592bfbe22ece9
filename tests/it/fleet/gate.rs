//! The import fleet gate refuses a forged or inconsistent merge report
//! (`fleet_gate_refuses_*`), and files named by the operator are handled
//! safely: `--textfile` never writes inside the inventory nor replaces a
//! non-regular file, FIFOs are refused at once, `seal f f` is consistent,
//! and headlines, actions and tables tell the operator the truth.
//!
//! Each test was a defect confirmed on main at eecc9c6, fixed since. Its
//! name states the guarantee; its comment records what kvcr did then and
//! cites what docs/format.md promises.

use crate::util::fleet::{private, Fleet, FACTS};

use crate::util::testkit::{self, Desc};
use crate::util::{ends_by_itself, is_root, kvcr};
use serde_json::{json, Value};
use std::path::Path;

const REJECT_FINDING: &str =
    r#"{"code":"KV106","name":"gpu-uuid","severity":"reject","message":"GPU claimed twice"}"#;

#[test]
fn fleet_gate_refuses_a_rank_marked_accept_that_carries_a_reject_finding() {
    // kvcr merge rejects such an input (§10); the gate reads only `verdict`.
    let f = Fleet::new();
    f.must_refuse("rank 2 accept with a KV106 reject finding", |v| {
        v["groups"][0]["ranks"][2]["findings"] =
            json!([serde_json::from_str::<Value>(REJECT_FINDING).unwrap()]);
    });
}

#[test]
fn fleet_gate_refuses_a_group_marked_accept_that_carries_a_reject_finding() {
    let f = Fleet::new();
    f.must_refuse("group accept with a KV104 reject finding", |v| {
        v["groups"][0]["findings"] = json!([{"code": "KV104", "name": "geometry",
            "severity": "reject", "message": "geometry differs between nodes"}]);
    });
}

#[test]
fn fleet_gate_refuses_ranks_whose_source_is_not_among_the_inputs() {
    // Ranks 2-3 name a report that is not in `inputs`: nothing says it was
    // live, from which host/boot, or how old. "Built only from live reports"
    // (§8.9) is unproven for half the group.
    let f = Fleet::new();
    f.must_refuse("ranks 2-3 from ghost.json, other input dropped", |v| {
        v["inputs"].as_array_mut().unwrap().truncate(1);
        for r in [2, 3] {
            v["groups"][0]["ranks"][r]["report"] = json!("ghost.json");
        }
    });
    f.must_refuse("other input dropped entirely", |v| {
        v["inputs"].as_array_mut().unwrap().truncate(1);
    });
}

#[test]
fn fleet_gate_refuses_one_other_node_listed_twice_by_case() {
    // §10: hosts equal ignoring ASCII case are one node; merge refuses two
    // reports from it. The gate only counts inputs from *this* host.
    let f = Fleet::new();
    f.must_refuse("gpu-node-18 and GPU-node-18 as two inputs", |v| {
        let mut twin = v["inputs"][1].clone();
        twin["host"] = json!("GPU-node-18");
        twin["report"] = json!("node-c.json");
        v["inputs"].as_array_mut().unwrap().push(twin);
        v["groups"][0]["ranks"][3]["report"] = json!("node-c.json");
    });
}

#[test]
fn fleet_gate_refuses_an_input_with_no_host() {
    // §10: a missing or empty host rejects or refuses.
    let f = Fleet::new();
    f.must_refuse("input host null", |v| v["inputs"][1]["host"] = Value::Null);
    f.must_refuse("input host empty", |v| v["inputs"][1]["host"] = json!(""));
}

#[test]
fn fleet_gate_refuses_one_gpu_claimed_by_ranks_on_two_nodes() {
    // kvcr merge rejects the same reports with KV106 (one GPU, two ranks);
    // a report saying "accept" for it is forged, and the gate takes it.
    let f = Fleet::new();
    let mut b = f.node_report("b");
    b["groups"][0]["ranks"][0]["gpu_uuid"] = json!(testkit::gpu(0, 0));
    let pb = f.dir.path().join("node-b2.json");
    std::fs::write(&pb, b.to_string()).unwrap();
    let out = kvcr()
        .arg("merge")
        .arg(f.dir.path().join("node-a.json"))
        .arg(&pb)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        merged["groups"][0]["verdict"], "reject",
        "merge itself rejects"
    );
    f.must_refuse("rank 2 claims rank 0's GPU", |v| {
        v["groups"][0]["ranks"][2]["gpu_uuid"] = json!(testkit::gpu(0, 0));
    });
}

#[test]
fn fleet_gate_refuses_two_entries_for_one_group() {
    // A merge report never holds one engine_id twice; the gate reads the
    // first and ignores a second entry that rejects the group.
    let f = Fleet::new();
    f.must_refuse("second, rejecting entry for the same engine_id", |v| {
        let mut g = v["groups"][0].clone();
        g["verdict"] = json!("reject");
        g["cause"] = json!("rank 3 missing (KV103)");
        v["groups"].as_array_mut().unwrap().push(g);
    });
}

#[test]
fn fleet_gate_refuses_a_report_for_another_shape_of_the_group() {
    // The fleet report is proof of *this* group only if it is the same
    // group: same tp/pp, model and geometry as the local descriptors. The
    // gate compares incarnation, epoch and world_size only.
    let f = Fleet::new();
    f.must_refuse("tp 2 pp 2 instead of tp 4", |v| {
        v["groups"][0]["tp"] = json!(2);
        v["groups"][0]["pp"] = json!(2);
    });
    f.must_refuse("another model", |v| {
        v["groups"][0]["model"]["name"] = json!("another/model");
    });
    f.must_refuse("another geometry", |v| {
        v["groups"][0]["geometry"]["num_blocks"] = json!(1);
    });
}

#[test]
fn fleet_gate_refuses_ranks_of_another_incarnation_or_epoch() {
    // Ranks carry their own incarnation and epoch (§9.4); the gate checks
    // only the group-level fields, so a rank from another incarnation (or an
    // older epoch) passes as proof.
    let f = Fleet::new();
    f.must_refuse("rank 2 of incarnation B", |v| {
        v["groups"][0]["ranks"][2]["incarnation"] = json!(testkit::INCARNATION_B);
    });
    f.must_refuse("rank 3 of epoch 0", |v| {
        v["groups"][0]["ranks"][3]["epoch"] = json!(0);
    });
}

#[test]
fn fleet_gate_refuses_a_merge_report_dated_ahead_or_before_its_inputs() {
    // Inputs dated > 300 s ahead are refused; the merge report's own
    // generated_unix_ms (year 5138 here) is never looked at, nor that it
    // predates its inputs.
    let f = Fleet::new();
    f.must_refuse("generated_unix_ms in the year 5138", |v| {
        v["generated_unix_ms"] = json!(99_999_999_999_999u64);
    });
    f.must_refuse("merge report older than its inputs", |v| {
        v["generated_unix_ms"] = json!(1_000u64);
    });
}

// ---------------------------------------------------------------------------
// Class 6: `--textfile` writing inside the inventory.
// ---------------------------------------------------------------------------

#[test]
fn textfile_through_a_bind_mount_of_the_inventory_is_refused() {
    // --ready-file compares (device, inode) with the inventory's directories
    // (app::refuse_inside_inventory); --textfile (app::textfile_target) only
    // compares canonical path prefixes, so the inventory seen through a bind
    // mount is written into. docs/format.md §9.5 / --help: PATH may not lie
    // inside the inventory; kvcr never writes inside the inventory.
    if !is_root()
        || std::process::Command::new("unshare")
            .arg("--help")
            .output()
            .is_err()
    {
        crate::util::missing("needs root and unshare(1)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let inv = d.path().join("inv");
    testkit::put_group(&inv, "", &Desc::new("tf", 0, 1, 1));
    private(&inv);
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let bin = crate::util::bin();
    let script = format!(
        "mount --bind {inv} {mnt} && {bin} audit {inv} -q --textfile {mnt}/kvcr.prom; echo rc=$?",
        inv = inv.display(),
        mnt = mnt.display(),
        bin = bin.display()
    );
    let out = crate::util::test_env(&mut std::process::Command::new("unshare"))
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if said.contains("mount:") {
        crate::util::skip_fact(&format!("a bind mount is not permitted here: {said}"));
        return;
    }
    let leaked: Vec<_> = std::fs::read_dir(&inv)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("prom"))
        .collect();
    assert!(
        leaked.is_empty() && said.contains("rc=2"),
        "--textfile wrote {leaked:?} inside the inventory (exit: {said})"
    );
}

// ---------------------------------------------------------------------------
// Class 5/6: `kvcr seal` tells the operator the wrong thing.
// ---------------------------------------------------------------------------

#[test]
fn seal_of_one_file_named_twice_never_both_writes_and_reports_failure() {
    // `kvcr seal f f` (a glob that matches one file twice, a CI job passing a
    // list with repeats): the first apply rewrites f, the second finds f
    // "changed since it was checked; not replaced" and the run exits 1 with
    // no word that f *was* sealed. Either refuse before writing (exit 1,
    // nothing written) or seal it once and exit 0; never both write and
    // claim failure with nothing on stdout.
    let d = tempfile::tempdir().unwrap();
    let mut v = Desc::new("seal", 0, 1, 1).value();
    testkit::seal(&mut v);
    v["epoch"] = json!(2); // hand edit: digest now stale
    let f = d.path().join("rank-0.json");
    std::fs::write(&f, testkit::to_bytes(&v)).unwrap();
    let before = std::fs::read(&f).unwrap();
    // The edit is meant (--reseal-edited): without it the stale digest is
    // refused (KV008) and nothing is written.
    let out = kvcr()
        .args(["seal", "--reseal-edited"])
        .arg(&f)
        .arg(&f)
        .output()
        .unwrap();
    let after = std::fs::read(&f).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wrote = before != after;
    let code = out.status.code();
    assert!(
        (code == Some(0) && wrote) || (code != Some(0) && !wrote) || stdout.contains("sealed"),
        "exit {code:?}, file rewritten: {wrote}, stdout {stdout:?}, stderr {stderr:?}"
    );
}

// ---------------------------------------------------------------------------
// Class 5: operator truth — headline and suggested commands.
// ---------------------------------------------------------------------------

/// A private two-rank inventory: rank 0 as `Desc`, rank 1 edited by `edit`,
/// resealed only when `reseal`.
fn two_ranks(edit: impl FnOnce(&mut Value), reseal: bool) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let g = Desc::new("hl", 0, 2, 1);
    testkit::put_group(d.path(), "", &g);
    let mut r1 = g.clone();
    r1.rank = 1;
    let mut v = r1.value();
    testkit::seal(&mut v);
    edit(&mut v);
    if reseal {
        testkit::seal(&mut v);
    }
    testkit::put(d.path(), "rank-1.json", &testkit::to_bytes(&v));
    private(d.path());
    d
}

#[test]
fn an_edited_unsealed_rank_is_headlined_as_kv008_not_as_an_incarnation_problem() {
    // rank-1.json was edited after sealing (epoch, or incarnation): its
    // digest fails (KV008), so none of its fields can be believed, and the
    // headline must be KV008 (docs/format.md headline order: the root cause
    // is the finding no other finding explains). Edits of geometry, model
    // or GPU get KV008 as headline already; epoch and incarnation do not:
    // the operator is sent to "find the lifetime whose owner pid still runs,
    // then pin it", i.e. told to pin the corrupt file's incarnation.
    for (what, edit) in [
        ("epoch", json!({"epoch": 5})),
        (
            "incarnation",
            json!({"incarnation": testkit::INCARNATION_B}),
        ),
    ] {
        let d = two_ranks(
            |v| {
                for (k, x) in edit.as_object().unwrap() {
                    v[k] = x.clone();
                }
            },
            false,
        );
        let (code, v) = crate::util::audit_json(d.path(), &[]);
        assert_eq!(code, 1);
        assert!(
            crate::util::has(&v, "KV008", "rank-1.json"),
            "{what}: KV008 is found"
        );
        assert_eq!(
            v["groups"][0]["cause_code"], "KV008",
            "{what} edited after sealing: headline {} / action {}",
            v["groups"][0]["cause"], v["groups"][0]["action"]
        );
    }
}

#[test]
fn epoch_mismatch_action_suggests_no_incarnation_pin_that_cannot_run() {
    // Two ranks of one incarnation, epochs 1 and 5, both sealed. The action
    // reads "... kvcr audit --live ROOT --engine hl --incarnation 5 (or ); ..."
    // — an epoch passed as --incarnation and an empty alternative. Run as
    // printed it is a usage error. docs/format.md: any command the action
    // suggests carries the real root and this run's flags, and runs.
    let d = two_ranks(|v| v["epoch"] = json!(5), true);
    let (_, v) = crate::util::audit_json(d.path(), &[]);
    let action = v["groups"][0]["action"].as_str().unwrap().to_string();
    assert!(
        !action.contains("(or )") && !action.contains("--incarnation 5"),
        "action: {action}"
    );
}

#[test]
fn the_suggested_import_command_runs_as_printed() {
    // An accepted live audit's action says
    //   "none needed; to reuse the cache: kvcr import ROOT --engine ID"
    // but import now requires the declared profile (docs/format.md §8.9,
    // docs/format.md §8.9): run as printed it exits 2 "no deployment profile". The
    // README's first command (audit fixtures/accept-superseded/inventory)
    // ends on the same suggestion. The suggested command must name
    // --profile (or say one is needed), as it names the root and flags.
    let d = tempfile::tempdir().unwrap();
    let desc = Desc::new("sugg", 0, 2, 1);
    testkit::put_group(d.path(), "", &desc);
    private(d.path());
    // Without a profile the suggestion must say that import needs one.
    let out = kvcr()
        .arg("audit")
        .arg(d.path())
        .args(["--live", "--format", "json"])
        .env("KVCR_NODE_FACTS", FACTS)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "set-up: accepted live");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let action = v["groups"][0]["action"].as_str().unwrap();
    assert!(
        action.contains("--profile") && action.contains("deployment profile"),
        "{action}"
    );
    // With the audit's own profile the suggested command runs as printed.
    let pdir = tempfile::tempdir().unwrap();
    let profile = pdir.path().join("sugg-profile.json");
    testkit::put_profile(&profile, &desc);
    let out = kvcr()
        .arg("audit")
        .arg(d.path())
        .args(["--live", "--format", "json", "--profile"])
        .arg(&profile)
        .env("KVCR_NODE_FACTS", FACTS)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "set-up: accepted live with a profile"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let action = v["groups"][0]["action"].as_str().unwrap();
    let cmd = action
        .split("kvcr import ")
        .nth(1)
        .unwrap_or_else(|| panic!("no import suggested: {action}"));
    let cmd = cmd.split(';').next().unwrap();
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let out = kvcr()
        .arg("import")
        .args(&args)
        .env("KVCR_NODE_FACTS", FACTS)
        .env("KVCR_IMPORT_BACKEND", "sim")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "`kvcr import {cmd}` as suggested: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_files_table_fits_80_columns_with_a_long_path() {
    // The group table wraps at COLUMNS=80, the files table does not: its
    // path column is as wide as the longest path (117-128 columns here).
    // docs/format.md / README "The table at 80 columns": nothing wider than
    // the terminal, no word broken, no trailing space.
    let d = tempfile::tempdir().unwrap();
    let sub =
        "a-very-long-directory-name-for-the-retained-kv-cache-of-this-engine-instance-number-0001";
    testkit::put_group(d.path(), "", &Desc::new("w80", 0, 2, 1));
    testkit::put(d.path(), &format!("{sub}/rank-7.json"), b"x");
    private(d.path());
    let out = kvcr()
        .arg("audit")
        .arg(d.path())
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let wide: Vec<(usize, &str)> = text
        .lines()
        .filter(|l| l.chars().count() > 80 || l.ends_with(' '))
        .map(|l| (l.chars().count(), l))
        .collect();
    assert!(wide.is_empty(), "lines over 80 columns: {wide:#?}\n{text}");
}

#[test]
fn textfile_refuses_to_replace_a_symlink_such_as_dev_stdout() {
    // `kvcr audit ROOT --textfile /dev/stdout` (a common way to say "print
    // it") run as root renames a regular file over /dev/stdout: the
    // node's /dev/stdout symlink is gone until someone restores it. Seal
    // refuses symlinks; --textfile replaces whatever PATH is. Modelled here
    // on a private copy of the /dev/stdout link. Expected: a PATH that
    // exists and is not a regular file is refused (exit 2), nothing written.
    let d = tempfile::tempdir().unwrap();
    let inv = d.path().join("inv");
    testkit::put_group(&inv, "", &Desc::new("tfl", 0, 1, 1));
    private(&inv);
    let dev = d.path().join("dev");
    std::fs::create_dir(&dev).unwrap();
    let link = dev.join("stdout");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    let out = kvcr()
        .arg("audit")
        .arg(&inv)
        .arg("-q")
        .arg("--textfile")
        .arg(&link)
        .output()
        .unwrap();
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(
        meta.file_type().is_symlink(),
        "exit {:?}: --textfile replaced the symlink {} with a regular file",
        out.status.code(),
        link.display()
    );
    assert_eq!(out.status.code(), Some(2));
}

// ---------------------------------------------------------------------------
// Class 4: hangs on hostile input — a FIFO named as an input file.
// ---------------------------------------------------------------------------

fn fifo(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p
}

#[test]
fn import_refuses_a_fifo_as_fleet_report_or_profile_at_once() {
    // gate::read_bounded and the profile loader open(2) the path without
    // O_NONBLOCK or a file-type check: a FIFO with no writer blocks forever.
    // Import has installed its SIGINT/SIGTERM handlers (SA_RESTART) by then,
    // so `timeout`, `systemctl stop` or Ctrl-C cannot end it: only SIGKILL.
    // Expected: a non-regular --fleet-report/--profile is refused (exit 2 or
    // 1) at once, as seal/digest/examine do ("is not a regular file").
    let f = Fleet::new();
    let p = fifo(f.dir.path(), "fleet.fifo");
    let a = f.dir.path().join("a");
    let facts = f.dir.path().join("facts-a.json");
    let profile = f.dir.path().join("profile.json");
    let sim = std::ffi::OsStr::new("sim");
    let (ended, on_term) = ends_by_itself(
        &[
            "import".as_ref(),
            a.as_os_str(),
            "--local-ranks".as_ref(),
            "0-1".as_ref(),
            "--profile".as_ref(),
            profile.as_os_str(),
            "--fleet-report".as_ref(),
            p.as_os_str(),
        ],
        &[
            ("KVCR_NODE_FACTS", facts.as_os_str()),
            ("KVCR_IMPORT_BACKEND", sim),
        ],
        5,
    );
    let pf = fifo(f.dir.path(), "profile.fifo");
    let (ended_p, _) = ends_by_itself(
        &[
            "import".as_ref(),
            a.as_os_str(),
            "--profile".as_ref(),
            pf.as_os_str(),
        ],
        &[
            ("KVCR_NODE_FACTS", facts.as_os_str()),
            ("KVCR_IMPORT_BACKEND", sim),
        ],
        5,
    );
    assert!(
        ended && ended_p,
        "import blocked on a FIFO: --fleet-report ended {ended} (then on SIGTERM: {on_term}), \
         --profile ended {ended_p}"
    );
}

#[test]
fn merge_and_audit_refuse_fifo_inputs_at_once() {
    // The same for `kvcr merge REPORT…` (reports gathered from many nodes
    // into one directory), `audit --profile` and the KVCR_NODE_FACTS file.
    let d = tempfile::tempdir().unwrap();
    let inv = d.path().join("inv");
    testkit::put_group(&inv, "", &Desc::new("ff", 0, 1, 1));
    private(&inv);
    let p = fifo(d.path(), "in.fifo");
    let none: [(&str, &std::ffi::OsStr); 0] = [];
    let merge = ends_by_itself(&["merge".as_ref(), p.as_os_str()], &none, 5).0;
    let profile = ends_by_itself(
        &[
            "audit".as_ref(),
            inv.as_os_str(),
            "--profile".as_ref(),
            p.as_os_str(),
        ],
        &none,
        5,
    )
    .0;
    let facts = ends_by_itself(
        &["audit".as_ref(), inv.as_os_str(), "--live".as_ref()],
        &[("KVCR_NODE_FACTS", p.as_os_str())],
        5,
    )
    .0;
    assert!(
        merge && profile && facts,
        "blocked on a FIFO: merge ended {merge}, audit --profile ended {profile}, \
         KVCR_NODE_FACTS ended {facts}"
    );
}

#[test]
fn local_ranks_covering_the_whole_group_claim_no_ranks_elsewhere() {
    // `--local-ranks 0-1` on a 2-rank group: "local part accepted: ranks 0-1
    // of 2 present ...; the other ranks are expected on other nodes" — there
    // are no other ranks, yet the action sends the operator to audit every
    // node and merge, and `import --local-ranks 0-1` then demands a fleet
    // report for a group that is entirely on this node. The header must not
    // claim ranks elsewhere when the local ranks are the whole group.
    let d = tempfile::tempdir().unwrap();
    testkit::put_group(d.path(), "", &Desc::new("whole", 0, 2, 1));
    private(d.path());
    let (code, v) = crate::util::audit_json(d.path(), &["--local-ranks", "0-1"]);
    assert_eq!(code, 0);
    let cause = v["groups"][0]["cause"].as_str().unwrap();
    assert!(
        !cause.contains("expected on other nodes"),
        "cause: {cause}\naction: {}",
        v["groups"][0]["action"]
    );
}

#[test]
fn a_genuine_fleet_report_whose_other_node_checked_nothing_does_not_prove_the_group() {
    // No forgery: node b ran `kvcr audit --live` without --strict on a node
    // whose GPUs and processes could not be read (driver missing, hidepid).
    // Its report accepts with 4 facts "not checked" (summary.not_checked 4,
    // ranks' not_checked lists owner and gpu-present), kvcr merge accepts,
    // and this node's `import --local-ranks 0-1` takes it as proof of the
    // whole group. Import is strict (docs/format.md §8.9, docs/format.md §8.9: every
    // live fact checked, a fact not read refuses): a proof whose other half
    // was never checked against its node is a doubt, so a refusal.
    let f = Fleet::with_facts_b(|facts| {
        facts["gpus"] = Value::Null;
        facts["processes_unreadable"] = json!("hidepid=2");
    });
    let fleet = f.fleet();
    assert_eq!(fleet["groups"][0]["verdict"], "accept");
    assert!(fleet["summary"]["not_checked"].as_u64().unwrap() > 0);
    let (code, v) = f.import(Some(&fleet), &[]);
    assert_eq!(
        (code, v["result"].as_str()),
        (1, Some("rejected")),
        "imported on a fleet proof whose node b facts were not checked: {v:#}"
    );
}
