//! Live mode through the audit service (docs/format.md §11, issue #3): KV003
//! (readable handle bytes), KV106 (GPU absent / not visible), KV108
//! (reboot, owner gone or PID reused), KV109 (writer running, not
//! quiesced), KV110 (other host), and "not checked", judged with a described
//! node (the fake probe); and the real probe on this machine. The command's
//! end (`KVCR_NODE_FACTS`, `--live` on this node) is tests/it/audit/live.rs.

use crate::format::finding::Message;
use crate::io::node::{Fact, FakeProbe, Gpus, LinuxProbe, NodeProbe};
use crate::rules::{Expectations, Judgement, Verdict};
use crate::testkit::{self, put_ranks, Desc, BOOT_ID, HOSTNAME};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use uuid::Uuid;

const OWNER: i32 = 4242;
const OWNER_TICKS: u64 = 123456;
const WRITER: i32 = 4100;
const WRITER_TICKS: u64 = 120000;

fn gpu(rank: u64) -> crate::format::descriptor::GpuUuid {
    crate::format::descriptor::GpuUuid::parse(&testkit::gpu(0, rank)).unwrap()
}

/// The node the testkit descriptors were written on: owner alive, writer
/// gone, GPUs 0..4 of group 0 present and visible.
fn matching() -> FakeProbe {
    let all: std::collections::BTreeSet<_> = (0..4).map(gpu).collect();
    FakeProbe {
        boot_id: Fact::Known(Uuid::parse_str(BOOT_ID).unwrap()),
        hostname: Fact::Known(HOSTNAME.to_string()),
        processes: BTreeMap::from([(OWNER, OWNER_TICKS)]),
        processes_unreadable: None,
        gpus: Fact::Known(Gpus {
            visible: all.clone(),
            on_node: Some(all),
            source: "test".into(),
            unreadable: Vec::new(),
        }),
    }
}

fn tp2() -> Desc {
    Desc::new("live-a", 0, 2, 1)
}

/// An inventory of one tp=2 group, mode 0600, edited by `edit`.
fn inventory(edit: impl Fn(&mut Value)) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    put_ranks(t.path(), &tp2(), 0o600, edit);
    t
}

/// The audit service in live mode (`kvcr audit --live`), with `probe`.
fn judge(root: &Path, probe: &dyn NodeProbe) -> Judgement {
    judge_with(root, probe, &Expectations::default())
}

/// [`judge`] with the given expectations (`--strict`, say).
fn judge_with(root: &Path, probe: &dyn NodeProbe, expect: &Expectations) -> Judgement {
    let inv = crate::service::audit::Inventory {
        root: Some(root.to_path_buf()),
        expect: expect.clone(),
        threads: crate::io::pipeline::threads(None),
        ..Default::default()
    };
    crate::service::audit::audit(&inv, Some(probe), false, true, expect.strict)
        .unwrap()
        .run
        .judgement
}

/// Every (rank, code, message) of the only group.
fn codes(j: &Judgement) -> Vec<(Option<u64>, String, Message)> {
    assert_eq!(j.groups.len(), 1, "{:#?}", j.groups);
    j.groups[0]
        .ranks
        .iter()
        .flat_map(|r| {
            r.findings
                .iter()
                .map(move |f| (r.rank, f.code.to_string(), f.message.clone()))
        })
        .collect()
}

/// Asserts the group is rejected and every rank carries exactly `want`
/// (codes, in order), each message containing `needle`.
fn assert_every_rank(j: &Judgement, want: &[&str], needle: &str) {
    let g = &j.groups[0];
    assert_eq!(g.verdict, Verdict::Reject, "{g:#?}");
    assert_eq!(g.ranks.len(), 2);
    for r in &g.ranks {
        let got: Vec<&str> = r.findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(got, want, "rank {:?}: {:#?}", r.rank, r.findings);
        assert!(
            r.findings.iter().any(|f| f.message.contains(needle)),
            "rank {:?}: no {needle:?} in {:#?}",
            r.rank,
            r.findings
        );
        assert!(r.findings.iter().all(|f| f.path.is_some()));
    }
}

fn accepted(j: &Judgement) -> bool {
    j.groups.len() == 1 && j.groups[0].verdict == Verdict::Accept && j.exit_status() == 0
}

// ---------------------------------------------------------------- fake probe

#[test]
fn matching_node_accepts_with_everything_checked() {
    let inv = inventory(|_| {});
    let j = judge(inv.path(), &matching());
    assert!(accepted(&j), "{:#?}", codes(&j));
    for r in &j.groups[0].ranks {
        assert!(r.not_checked.is_empty(), "{:?}", r.not_checked);
        let names: Vec<&str> = r.checks.iter().map(|c| c.name).collect();
        for want in [
            "boot_id",
            "owner",
            "hostname",
            "writer",
            "gpu-present",
            "handle-exposure",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(
            r.checks.iter().all(|c| c.status.to_string() == "pass"),
            "{:?}",
            r.checks
        );
    }
}

#[test]
fn rebooted_node_is_kv108() {
    let inv = inventory(|_| {});
    let mut p = matching();
    p.boot_id = Fact::Known(Uuid::parse_str("0b5e2a3c-1111-4222-8333-444455556666").unwrap());
    let j = judge(inv.path(), &p);
    assert_every_rank(
        &j,
        &["KV108"],
        "node rebooted since this descriptor was written",
    );
    let f = &j.groups[0].ranks[0].findings[0];
    assert_eq!(f.expected.as_deref(), Some(&*format!("boot_id {BOOT_ID}")));
    assert_eq!(
        f.found.as_deref(),
        Some("boot_id 0b5e2a3c-1111-4222-8333-444455556666")
    );
    // The owner is not looked up after a reboot: its pid and start time may
    // repeat in a new process.
    let r = &j.groups[0].ranks[0];
    assert!(r
        .checks
        .iter()
        .any(|c| c.name == "owner" && c.status.to_string().starts_with("skipped: ")));
}

#[test]
fn other_host_is_kv110_alone() {
    let inv = inventory(|_| {});
    let mut p = matching();
    p.hostname = Fact::Known("gpu-node-18".into());
    // Another node has another boot id and other processes; none of that is
    // reported again as a reboot or a dead owner.
    p.boot_id = Fact::Known(Uuid::parse_str("0b5e2a3c-1111-4222-8333-444455556666").unwrap());
    p.processes.clear();
    let j = judge(inv.path(), &p);
    assert_every_rank(&j, &["KV110"], "written on node \"gpu-node-17\"");
    let f = &j.groups[0].ranks[0].findings[0];
    assert_eq!(f.expected.as_deref(), Some("\"gpu-node-17\""));
    assert_eq!(f.found.as_deref(), Some("\"gpu-node-18\""));
}

#[test]
fn hostname_compares_case_insensitively() {
    let inv = inventory(|_| {});
    let mut p = matching();
    p.hostname = Fact::Known("GPU-Node-17".into());
    assert!(accepted(&judge(inv.path(), &p)));
}

#[test]
fn owner_alive_gone_and_reused() {
    let inv = inventory(|_| {});
    // Alive: same pid, same start time.
    assert!(accepted(&judge(inv.path(), &matching())));
    // Gone.
    let mut p = matching();
    p.processes.remove(&OWNER);
    let j = judge(inv.path(), &p);
    assert_every_rank(
        &j,
        &["KV108"],
        "owner pid 4242 is gone; its memory went with it",
    );
    assert_eq!(
        j.groups[0].ranks[0].findings[0].found.as_deref(),
        Some("no such process")
    );
    // PID reused: the pid runs with another start time.
    let mut p = matching();
    p.processes.insert(OWNER, OWNER_TICKS + 1);
    let j = judge(inv.path(), &p);
    assert_every_rank(&j, &["KV108"], "PID reused");
    let f = &j.groups[0].ranks[0].findings[0];
    assert_eq!(
        f.expected.as_deref(),
        Some("pid 4242 running with start_ticks 123456")
    );
    assert_eq!(
        f.found.as_deref(),
        Some("pid 4242 running with start_ticks 123457")
    );
}

fn not_quiesced(v: &mut Value) {
    v["writer"]["quiesced"] = json!(false);
}

#[test]
fn writer_running_not_quiesced_is_kv109() {
    let inv = inventory(not_quiesced);
    let mut p = matching();
    p.processes.insert(WRITER, WRITER_TICKS);
    let j = judge(inv.path(), &p);
    assert_every_rank(
        &j,
        &["KV109"],
        "writer pid 4100 still runs and has not quiesced",
    );
}

#[test]
fn writer_quiesced_running_is_fine() {
    let inv = inventory(|_| {}); // testkit writes quiesced: true
    let mut p = matching();
    p.processes.insert(WRITER, WRITER_TICKS);
    assert!(accepted(&judge(inv.path(), &p)));
}

#[test]
fn writer_dead_or_pid_reused_is_fine() {
    let inv = inventory(not_quiesced);
    // Dead: not running.
    assert!(accepted(&judge(inv.path(), &matching())));
    // Its pid now belongs to another process: the writer itself is dead.
    let mut p = matching();
    p.processes.insert(WRITER, WRITER_TICKS + 5);
    assert!(accepted(&judge(inv.path(), &p)));
}

/// docs/format.md §8.9: under `--strict` each fact not checked rejects the
/// rank with the code of the rule it would have decided: the owner's is
/// KV108, the writer's KV109 (never a catch-all code).
#[test]
fn strict_rejects_an_unreadable_writer_as_kv109_and_owner_as_kv108() {
    let inv = inventory(not_quiesced);
    let mut p = matching();
    p.processes_unreadable = Some("procfs hidden".into());
    let expect = Expectations {
        strict: true,
        ..Expectations::default()
    };
    let j = judge_with(inv.path(), &p, &expect);
    assert_eq!(j.groups[0].verdict, Verdict::Reject);
    assert_eq!(j.exit_status(), 1);
    for r in &j.groups[0].ranks {
        let mut got: Vec<(String, String)> = r
            .findings
            .iter()
            .map(|f| {
                (
                    f.code.to_string(),
                    crate::format::message::render(&f.message),
                )
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                (
                    "KV108".to_string(),
                    "not checked: owner: procfs hidden (--strict)".to_string()
                ),
                (
                    "KV109".to_string(),
                    "not checked: writer: procfs hidden (--strict)".to_string()
                ),
            ],
            "rank {:?}",
            r.rank
        );
    }
}

#[test]
fn writer_unreadable_is_not_checked() {
    let inv = inventory(not_quiesced);
    let mut p = matching();
    p.processes_unreadable = Some("procfs hidden".into());
    let j = judge(inv.path(), &p);
    assert!(accepted(&j), "{:#?}", codes(&j));
    for r in &j.groups[0].ranks {
        assert!(
            r.not_checked.contains(&"writer: procfs hidden".to_string()),
            "{:?}",
            r.not_checked
        );
        assert!(r.not_checked.contains(&"owner: procfs hidden".to_string()));
    }
}

#[test]
fn gpu_present() {
    let inv = inventory(|_| {});
    let j = judge(inv.path(), &matching());
    assert!(accepted(&j));
    // Compared on the 16 bytes: the driver's MIG/GPU naming does not matter.
    let mut p = matching();
    let Fact::Known(g) = &mut p.gpus else {
        unreachable!()
    };
    g.visible = (0..2)
        .map(|r| crate::format::descriptor::GpuUuid {
            kind: crate::format::descriptor::GpuKind::Mig,
            ..gpu(r)
        })
        .collect();
    assert!(accepted(&judge(inv.path(), &p)));
}

#[test]
fn gpu_absent_from_node_is_kv106() {
    let inv = inventory(|_| {});
    let mut p = matching();
    let others: std::collections::BTreeSet<_> = (4..8).map(gpu).collect();
    p.gpus = Fact::Known(Gpus {
        visible: others.clone(),
        on_node: Some(others),
        source: "/proc/driver/nvidia".into(),
        unreadable: Vec::new(),
    });
    let j = judge(inv.path(), &p);
    assert_every_rank(
        &j,
        &["KV106"],
        "is absent from this node (none of its 4 GPUs)",
    );
    let f = &j.groups[0].ranks[1].findings[0];
    assert_eq!(f.expected.as_deref(), Some(&*testkit::gpu(0, 1)));
    assert!(f.found.as_deref().unwrap().starts_with("visible: GPU-"));
}

#[test]
fn gpu_on_node_but_not_visible_is_kv106_and_says_so() {
    let inv = inventory(|_| {});
    let mut p = matching();
    let Fact::Known(g) = &mut p.gpus else {
        unreachable!()
    };
    g.visible = [gpu(0)].into(); // CUDA_VISIBLE_DEVICES=0
    g.source = "cuda driver".into();
    let j = judge(inv.path(), &p);
    let c = codes(&j);
    assert_eq!(c.len(), 1, "{c:#?}");
    assert_eq!(c[0].0, Some(1));
    assert_eq!(c[0].1, "KV106");
    assert!(
        c[0].2
            .contains("on this node but not visible to this process"),
        "{:?}",
        c[0].2
    );
    // Without the node's full list it cannot tell which.
    let Fact::Known(g) = &mut p.gpus else {
        unreachable!()
    };
    g.on_node = None;
    let c = codes(&judge(inv.path(), &p));
    assert!(
        c[0].2
            .contains("not visible to this process (per cuda driver)"),
        "{:?}",
        c[0].2
    );
    assert!(c[0].2.contains("cannot be told"));
    // No GPU visible at all.
    let Fact::Known(g) = &mut p.gpus else {
        unreachable!()
    };
    g.visible.clear();
    let j = judge(inv.path(), &p);
    assert_every_rank(&j, &["KV106"], "not visible to this process");
    assert_eq!(
        j.groups[0].ranks[0].findings[0].found.as_deref(),
        Some("no GPU visible")
    );
}

#[test]
fn gpu_unknown_is_not_checked() {
    let inv = inventory(|_| {});
    let mut p = matching();
    p.gpus = Fact::NotChecked(
        "no NVIDIA driver: libcuda not found and /proc/driver/nvidia absent".into(),
    );
    let j = judge(inv.path(), &p);
    assert!(accepted(&j));
    for r in &j.groups[0].ranks {
        assert_eq!(
            r.not_checked,
            vec!["gpu-present: no NVIDIA driver: libcuda not found and /proc/driver/nvidia absent"]
        );
    }
}

#[test]
fn nothing_readable_rejects_nothing() {
    let inv = inventory(not_quiesced);
    let p = FakeProbe {
        boot_id: Fact::NotChecked("no boot id".into()),
        hostname: Fact::NotChecked("no hostname".into()),
        processes: BTreeMap::new(),
        processes_unreadable: Some("no procfs".into()),
        gpus: Fact::NotChecked("no driver".into()),
    };
    let j = judge(inv.path(), &p);
    assert!(accepted(&j), "{:#?}", codes(&j));
    for r in &j.groups[0].ranks {
        assert!(r.findings.is_empty());
        for want in [
            "hostname: no hostname",
            "boot_id: no boot id",
            "owner: no procfs",
            "writer: no procfs",
            "gpu-present: no driver",
        ] {
            assert!(
                r.not_checked.iter().any(|n| n == want),
                "{want} not in {:?}",
                r.not_checked
            );
        }
    }
}

#[test]
fn readable_handle_bytes_are_kv003() {
    let p = matching();
    for (kind, mode, reject) in [
        ("fabric", 0o644, true),
        ("fabric", 0o640, true),
        ("cuda_ipc", 0o604, true),
        ("fabric", 0o600, false),
        ("cuda_ipc", 0o400, false),
        ("posix_fd", 0o644, false), // the fd lives in the owner: nothing to read
    ] {
        let t = tempfile::tempdir().unwrap();
        let mut d = tp2();
        d.handle_kind = kind;
        put_ranks(t.path(), &d, mode, |_| {});
        let j = judge(t.path(), &p);
        if reject {
            assert_every_rank(&j, &["KV003"], "those bytes grant access to the memory");
            assert_eq!(
                j.groups[0].ranks[0].findings[0].found.as_deref(),
                Some(&*format!("mode {mode:04o}"))
            );
        } else {
            assert!(accepted(&j), "{kind} {mode:o}: {:#?}", codes(&j));
        }
    }
}

#[test]
fn every_live_reason_is_listed() {
    // Rebooted, a readable fabric descriptor, GPU absent and writer unknown:
    // each reason appears, reboot first.
    let t = tempfile::tempdir().unwrap();
    put_ranks(t.path(), &tp2(), 0o644, not_quiesced);
    let p = FakeProbe {
        boot_id: Fact::Known(Uuid::parse_str("0b5e2a3c-1111-4222-8333-444455556666").unwrap()),
        hostname: Fact::Known(HOSTNAME.into()),
        processes: BTreeMap::new(),
        processes_unreadable: None,
        gpus: Fact::Known(Gpus::default()),
    };
    let j = judge(t.path(), &p);
    assert_every_rank(&j, &["KV108", "KV106", "KV003"], "rebooted");
    assert!(
        j.groups[0].cause.contains("node rebooted"),
        "{}",
        j.groups[0].cause
    );
}

// ------------------------------------------------------------- real probe

/// A child process killed and reaped when dropped.
struct Child(std::process::Child);

impl Child {
    fn sleep() -> Child {
        Child(
            std::process::Command::new("sleep")
                .arg("300")
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_ticks(pid: i32) -> u64 {
    match LinuxProbe.start_ticks(pid) {
        Fact::Known(Some(t)) => t,
        other => panic!("start_ticks({pid}) = {other:?}"),
    }
}

#[test]
fn real_probe_boot_id_is_this_machines() {
    let file = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(
        LinuxProbe.boot_id(),
        Fact::Known(Uuid::parse_str(file.trim()).unwrap())
    );
}

#[test]
fn real_probe_reads_a_child_start_time() {
    let child = Child::sleep();
    let t = start_ticks(child.pid());
    let stat = std::fs::read(format!("/proc/{}/stat", child.pid())).unwrap();
    assert_eq!(
        crate::io::node::proc::parse_stat(&stat)
            .unwrap()
            .start_ticks,
        t
    );
    // Our own process is older than the child.
    assert!(start_ticks(std::process::id() as i32) <= t);
}
