//! Blame lands on the odd rank (even when it is rank 0), cross-group KV110
//! does not depend on which rank is foreign, fleet inputs may share a boot
//! id, and operator-named files that are not regular (a FIFO as
//! `--ready-file`, a device swapped in for `--profile`) are refused without
//! being opened.
//!
//! Each test was a defect confirmed on main at e8b1a58, fixed since. Its
//! name states the guarantee; the comment above it records what kvcr did
//! then and what docs/format.md promises.

use crate::util::fleet::{private, Fleet, FACTS};

use crate::util::testkit::{self, Desc, BOOT_ID};
use crate::util::{ends_by_itself, is_root, kvcr};
use serde_json::{json, Value};
use std::path::Path;

// ---------------------------------------------------------------------------
// Class 1 (hang): an existing --ready-file that is a FIFO. ReadyFile::prepare
// (src/import/run/ready_file.rs) refuses an existing PATH, but first reads it to name
// the holder: `holder()` does a plain File::open(path), which blocks forever
// on a FIFO with no writer (the process sits in wait_for_partner). Import's
// SIGINT/SIGTERM handlers are installed by then, so SIGTERM does not end it:
// only SIGKILL. The third review fixed this class for --fleet-report,
// --profile, merge inputs and KVCR_NODE_FACTS (src/io/safe_file.rs), not here.
// Expected: refused at once (exit 2, "already exists ... not a regular file").
// ---------------------------------------------------------------------------

#[test]
fn import_hold_refuses_an_existing_fifo_as_ready_file_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/accept-posix-fd");
    let inv = d.path().join("inv");
    for e in walkdir::WalkDir::new(fx.join("inventory")) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(fx.join("inventory")).unwrap();
        if e.file_type().is_dir() {
            std::fs::create_dir_all(inv.join(rel)).unwrap();
        } else {
            std::fs::copy(e.path(), inv.join(rel)).unwrap();
        }
    }
    private(&inv);
    let ready = d.path().join("ready.json");
    let c = std::ffi::CString::new(ready.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let profile = fx.join("profile.json");
    let (ended, on_term) = ends_by_itself(
        &[
            "import".as_ref(),
            inv.as_os_str(),
            "--profile".as_ref(),
            profile.as_os_str(),
            "--hold".as_ref(),
            "--ready-file".as_ref(),
            ready.as_os_str(),
        ],
        &[
            ("KVCR_NODE_FACTS", FACTS.as_ref()),
            ("KVCR_IMPORT_BACKEND", "sim".as_ref()),
        ],
        5,
    );
    assert!(
        ended,
        "import --hold --ready-file FIFO blocked opening the FIFO (then ended on SIGTERM: \
         {on_term}); an existing non-regular ready file must be refused without being opened"
    );
}

// ---------------------------------------------------------------------------
// Class 2 (wrong root cause): rank 0 is the reference for every cross-rank
// comparison, so when rank 0 is the one odd descriptor (copied from another
// node, another model revision) the three agreeing ranks are rejected, the
// odd rank 0 is shown "accept ok", and the headline blames rank 1 ("3 ranks
// rejected in all"). The group is still rejected (safe), but the table and
// headline send the operator to the wrong three files. Expected: the rank
// that disagrees with the rest is the one named and rejected.
// ---------------------------------------------------------------------------

fn odd_rank_0(edit: impl Fn(&mut Value)) -> (i32, Value) {
    let d = tempfile::tempdir().unwrap();
    for r in 0..4u64 {
        let desc = Desc::new("odd0", r, 2, 2);
        let bytes = if r == 0 {
            desc.bytes_with(&edit)
        } else {
            desc.bytes()
        };
        testkit::put(d.path(), &format!("rank-{r}.json"), &bytes);
    }
    private(d.path());
    crate::util::audit_json(d.path(), &["--max-age", "100000d"])
}

#[test]
fn an_odd_rank_0_is_the_rank_rejected_and_named_not_the_three_agreeing_ranks() {
    for (what, edit) in [
        (
            "node.hostname (KV110)",
            Box::new(|v: &mut Value| v["node"]["hostname"] = json!("gpu-node-99"))
                as Box<dyn Fn(&mut Value)>,
        ),
        (
            "model.revision (KV105)",
            Box::new(|v: &mut Value| v["model"]["revision"] = json!("deadbeef")),
        ),
    ] {
        let (code, v) = odd_rank_0(|x| edit(x));
        assert_eq!(code, 1, "{what}: {v:#}");
        let g = &v["groups"][0];
        let verdicts: Vec<(u64, String)> = g["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["rank"].as_u64().unwrap(),
                    r["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(
            g["cause"].as_str().unwrap().starts_with("rank 0 "),
            "{what}: the headline must name rank 0, the one descriptor that disagrees with the \
             other three; got {:?}; ranks {verdicts:?}",
            g["cause"]
        );
        assert_eq!(
            verdicts[0].1, "reject",
            "{what}: the odd rank 0 is shown accepted; ranks {verdicts:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// Class 3 (doc claims more than the gate checks): README "Decisions" says the
// fleet report is refused unless its "inputs [have] distinct hosts and boot
// ids". judge_report_data (src/import/gate/fleet.rs) checks only that each input
// *names* a boot id; two inputs with one boot id (one machine audited twice
// under two hostnames) pass.
// ---------------------------------------------------------------------------

/// Decided (docs/format.md §8.9, which the README's summary now points to): inputs must have
/// distinct hosts and each name a boot id, but two inputs may share one boot
/// id: two pods (hostnames) on one machine, each with its own GPUs, hold two
/// parts of a group. The README said "distinct boot ids"; it now says this.
#[test]
fn two_inputs_may_share_a_boot_id_when_their_hosts_differ() {
    let f = Fleet::new();
    let mut v = f.fleet();
    v["inputs"][1]["boot_id"] = json!(BOOT_ID);
    let (code, r) = f.import(Some(&v), &[]);
    assert_eq!(code, 0, "{r:#}");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(!readme.contains("distinct hosts and boot ids"));
}

// ---------------------------------------------------------------------------
// Class 4 (cross-group KV110 depends on which rank is foreign): group a
// (2 ranks, gpu-node-17) and group b (2 ranks) in one inventory. When b's
// rank 0 names gpu-node-99, both groups get the cross-group KV110 ("one
// inventory is one node's, so no group in it can be trusted") and a is
// rejected. When b's rank 1 names gpu-node-99 instead, across.rs takes b's
// node from its lowest rank only (gpu-node-17), sees one node, and a is
// ACCEPTED (exit 0 with --engine a) although the inventory demonstrably
// holds two nodes' descriptors. Expected: the same verdict for a either way.
// ---------------------------------------------------------------------------

fn two_groups_with_b_rank_on_node_99(foreign_rank: u64) -> (i32, Value) {
    let d = tempfile::tempdir().unwrap();
    for r in 0..2u64 {
        let mut a = Desc::new("grp-a", r, 2, 1);
        a.group = 0;
        testkit::put(d.path(), &format!("a/rank-{r}.json"), &a.bytes());
        let mut b = Desc::new("grp-b", r, 2, 1);
        b.group = 1;
        let bytes = if r == foreign_rank {
            b.bytes_with(|v| v["node"]["hostname"] = json!("gpu-node-99"))
        } else {
            b.bytes()
        };
        testkit::put(d.path(), &format!("b/rank-{r}.json"), &bytes);
    }
    private(d.path());
    crate::util::audit_json(d.path(), &["--max-age", "100000d", "--engine", "grp-a"])
}

#[test]
fn a_foreign_rank_1_of_another_group_makes_the_inventory_two_nodes_like_a_foreign_rank_0() {
    let (code0, v0) = two_groups_with_b_rank_on_node_99(0);
    let (code1, v1) = two_groups_with_b_rank_on_node_99(1);
    assert_eq!(
        code0, 1,
        "set-up: b's rank 0 on another node rejects a (cross-group KV110): {v0:#}"
    );
    assert_eq!(
        (code1, v1["groups"][0]["verdict"].as_str()),
        (1, Some("reject")),
        "b's rank 1 on gpu-node-99: the inventory holds two nodes' descriptors, yet group a is \
         accepted: {v1:#}"
    );
}

// ---------------------------------------------------------------------------
// Class 5 (a device is opened): src/io/safe_file.rs read_regular classifies the
// operator-named file with stat(2) by path, then open(2)s the path again, so
// a device (or FIFO) swapped in between (renameat2 RENAME_EXCHANGE) is
// opened. The message "(replaced while opening)" is printed only after that
// open succeeded on the non-regular file: it is the proof. On e8b1a58 a
// character device (mknod c 1 3) swapped with `--profile`'s file was opened
// in 75 of 300 audits. README Decisions and docs/format.md say such a file
// "is refused before it could block or be opened"; docs/format.md §2.3 (issue 11,
// item 7) asks for classification through an O_PATH descriptor.
// ---------------------------------------------------------------------------

#[test]
fn a_device_swapped_in_for_the_profile_is_never_opened() {
    let d = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/accept-posix-fd");
    let good = d.path().join("p.json");
    std::fs::copy(fx.join("profile.json"), &good).unwrap();
    let other = d.path().join("other");
    let c_other = std::ffi::CString::new(other.as_os_str().as_encoded_bytes()).unwrap();
    // A character device when root (the /dev/null numbers), else a FIFO.
    let made = if is_root() {
        unsafe { libc::mknod(c_other.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) }
    } else {
        unsafe { libc::mkfifo(c_other.as_ptr(), 0o600) }
    };
    assert_eq!(made, 0);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let a = std::ffi::CString::new(good.as_os_str().as_encoded_bytes()).unwrap();
        let b = c_other.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
            }
        })
    };
    let mut opened = 0;
    let mut tries = 0;
    while tries < 300 && opened == 0 {
        tries += 1;
        let out = kvcr()
            .arg("audit")
            .arg(fx.join("inventory"))
            .arg("--profile")
            .arg(&good)
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stderr).contains("replaced while opening") {
            opened += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(
        opened, 0,
        "a non-regular file swapped in for --profile was opened (\"replaced while opening\") \
         within {tries} tries"
    );
}
