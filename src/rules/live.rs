//! Live-only rules: KV110 (foreign node), KV109 (writer not quiesced),
//! KV106 (GPU not on this node or not visible) and KV003 (handle bytes
//! readable by others). The live parts of KV108 (reboot, owner gone) are in
//! `staleness.rs`.
//!
//! A fact that could not be read is "not checked", never a mismatch. A check
//! that has no meaning for a descriptor (its processes on a node that
//! rebooted, or on another node) is "skipped", with the finding that already
//! rejects it as the reason.

use super::{Check, Row};
use crate::format::descriptor::{Descriptor, GpuKind, GpuUuid};
use crate::format::finding::{Code, Finding};
use crate::rules::facts::{Fact, Gpus, NodeFacts};

/// True when this node's hostname is known and is not the descriptor's.
/// Hostnames are compared ASCII case-insensitively, as DNS names are.
pub(crate) fn foreign(node: &NodeFacts, d: &Descriptor) -> bool {
    matches!(&node.hostname, Fact::Known(h) if !h.eq_ignore_ascii_case(&d.node.hostname))
}

/// True when this node's boot id is known and is not the descriptor's:
/// every process the descriptor names died with the previous boot.
pub(crate) fn rebooted(node: &NodeFacts, d: &Descriptor) -> bool {
    matches!(&node.boot_id, Fact::Known(b) if *b != d.node.boot_id)
}

/// Records a check that was not made because another finding makes it moot.
pub(crate) fn skipped(row: &mut Row, name: &'static str, why: &str) {
    row.checks.push(Check {
        name,
        status: super::CheckStatus::Skipped(why.to_owned()),
    });
}

pub(crate) const FOREIGN: &str = "written on another node (KV110)";
pub(crate) const REBOOTED: &str = "the node rebooted since (KV108)";

pub(crate) fn check(rows: &mut [Row], node: &NodeFacts) {
    for row in rows.iter_mut() {
        // The descriptor lent out of its row, not cloned (one per rank).
        row.with_desc(|row, d| {
            hostname(row, d, node);
            let foreign = foreign(node, d);
            if foreign {
                skipped(row, "writer", FOREIGN);
                skipped(row, "gpu-present", FOREIGN);
            } else {
                writer(row, d, node);
                gpu_present(row, d, &node.gpus);
            }
            handle_exposure(row, d);
        });
    }
}

/// KV110: the descriptor names another node. Also what the writer checks
/// before it writes (`super::own`).
pub(super) fn hostname(row: &mut Row, d: &Descriptor, node: &NodeFacts) {
    match &node.hostname {
        Fact::Known(h) if !h.eq_ignore_ascii_case(&d.node.hostname) => {
            row.check("hostname", false);
            row.reject(
                Finding::reject(
                    Code::KV110,
                    format!(
                        "descriptor was written on node {:?}, this is {h:?}: its handles mean \
                         nothing here",
                        d.node.hostname
                    ),
                )
                .values(format!("{:?}", d.node.hostname), format!("{h:?}")),
            )
        }
        Fact::Known(_) => row.check("hostname", true),
        Fact::NotChecked(why) => row.not_checked("hostname", why),
    }
}

/// KV109: the writer still runs (same pid and start time) and has not
/// quiesced. A quiesced writer, or one that is gone (or whose pid now
/// belongs to another process), is fine.
fn writer(row: &mut Row, d: &Descriptor, node: &NodeFacts) {
    if d.writer.quiesced {
        row.check("writer", true);
        return;
    }
    if rebooted(node, d) {
        // Its pid and start time may well repeat after a reboot, in another process.
        skipped(row, "writer", REBOOTED);
        return;
    }
    match node.process(d.writer.pid) {
        Fact::Known(Some(t)) if t == d.writer.start_ticks => {
            row.check("writer", false);
            row.reject(
                Finding::reject(
                    Code::KV109,
                    format!(
                        "writer pid {} still runs and has not quiesced; it may still be writing \
                         this KV",
                        d.writer.pid
                    ),
                )
                .values(
                    "writer quiesced or exited",
                    format!(
                        "pid {} running with start_ticks {t}, quiesced false",
                        d.writer.pid
                    ),
                ),
            )
        }
        Fact::Known(_) => row.check("writer", true),
        Fact::NotChecked(why) => row.not_checked("writer", &why),
    }
}

fn list(gpus: &std::collections::BTreeSet<GpuUuid>) -> String {
    if gpus.is_empty() {
        "no GPU visible".to_string()
    } else {
        let all: Vec<String> = gpus.iter().map(ToString::to_string).collect();
        format!("visible: {}", all.join(", "))
    }
}

/// KV106 (live): the descriptor's GPU among the GPUs this process sees,
/// compared on the 16 UUID bytes. When the node's full list is known, a GPU
/// that is there but hidden (CUDA_VISIBLE_DEVICES) is told apart from one
/// that is absent. /proc lists physical GPUs only, so for a MIG instance that
/// is not visible, presence on the node cannot be told.
fn gpu_present(row: &mut Row, d: &Descriptor, gpus: &Fact<Gpus>) {
    let g = match gpus {
        Fact::Known(g) => g,
        Fact::NotChecked(why) => {
            row.not_checked("gpu-present", why);
            return;
        }
    };
    let want = d.gpu_uuid;
    if g.visible.iter().any(|v| v.uuid == want.uuid) {
        row.check("gpu-present", true);
        return;
    }
    if !g.unreadable.is_empty() {
        // It may be one of the devices the driver could not name.
        row.not_checked(
            "gpu-present",
            &format!(
                "GPU {want} is not among the GPUs whose UUID the driver gave ({})",
                g.unreadable.join("; ")
            ),
        );
        return;
    }
    let on_node = g.on_node.as_ref().and_then(|all| {
        if all.iter().any(|v| v.uuid == want.uuid) {
            Some(true)
        } else if want.kind == GpuKind::Gpu {
            Some(false)
        } else {
            None
        }
    });
    let msg = match on_node {
        Some(true) => format!(
            "GPU {want} is on this node but not visible to this process (CUDA_VISIBLE_DEVICES?)"
        ),
        Some(false) => format!(
            "GPU {want} is absent from this node (none of its {} GPUs)",
            g.on_node.as_ref().map_or(0, |all| all.len())
        ),
        None => format!(
            "GPU {want} is not visible to this process (per {}); whether it is on this node cannot \
             be told",
            g.source
        ),
    };
    let msg = match mig_reason(&want, &g.visible) {
        Some(why) => format!("{msg}; {why}"),
        None => msg,
    };
    row.check("gpu-present", false);
    row.reject(Finding::reject(Code::KV106, msg).values(want, list(&g.visible)));
}

/// Why a GPU is not visible when MIG is the reason: CUDA 11 and 12
/// enumerate a single MIG device per process, so with a MIG device visible
/// (or a MIG instance wanted) every other instance is hidden from this
/// process whatever CUDA_VISIBLE_DEVICES says.
fn mig_reason(want: &GpuUuid, visible: &std::collections::BTreeSet<GpuUuid>) -> Option<String> {
    let shown = visible.iter().find(|v| v.kind == GpuKind::Mig);
    if want.kind != GpuKind::Mig && shown.is_none() {
        return None;
    }
    Some(match shown {
        Some(m) => format!(
            "MIG: a CUDA process enumerates a single MIG device (CUDA 11 and 12), here {m}, so no \
             other is visible to it: audit and import each MIG device's ranks in a process of \
             its own (CUDA_VISIBLE_DEVICES naming that device)"
        ),
        None => "MIG: a CUDA process enumerates a single MIG device (CUDA 11 and 12), the one \
                 CUDA_VISIBLE_DEVICES names: audit and import each MIG device's ranks in a \
                 process of its own"
            .to_string(),
    })
}

/// `--strict` (docs/format.md §8.9): every fact that could not be read rejects
/// the rank, with the code of the rule it would have decided.
pub(crate) fn strict(row: &mut Row) {
    let facts = row.not_checked.clone();
    for entry in facts {
        let name = entry.split(':').next().unwrap_or(&entry);
        let code = match name {
            "boot_id" | "owner" => Code::KV108,
            "writer" => Code::KV109,
            "hostname" => Code::KV110,
            "handle-exposure" => Code::KV003,
            _ => Code::KV106,
        };
        row.reject(
            Finding::reject(code, format!("not checked: {entry} (--strict)"))
                .values(format!("{name} checked against this node"), "not checked"),
        );
    }
}

/// KV003 (live part): cuda_ipc and fabric handle bytes grant access to the
/// memory, so a descriptor carrying them must not be readable by group or
/// others.
fn handle_exposure(row: &mut Row, d: &Descriptor) {
    if !d.carries_handle_bytes() {
        row.check("handle-exposure", true);
        return;
    }
    // Unknown only for a candidate built without its file: that the bytes
    // are not exposed is then not known (import refuses it, --strict rejects).
    let Some(mode) = row.cand.mode else {
        row.not_checked("handle-exposure", "the file's mode is not known");
        return;
    };
    if mode & 0o044 != 0 {
        row.check("handle-exposure", false);
        row.reject(
            Finding::reject(
                Code::KV003,
                "descriptor carries cuda_ipc/fabric handle bytes and is readable by group/others; \
                 those bytes grant access to the memory",
            )
            .values(
                "not readable by group/others (mode 0600 or stricter)",
                format!("mode {:04o}", mode & 0o7777),
            ),
        );
    } else {
        row.check("handle-exposure", true);
    }
}

#[cfg(test)]
mod tests {
    use crate::format::descriptor::parse_descriptor;
    use crate::rules::facts::{Fact, Gpus, NodeFacts};
    use crate::rules::{judge, Candidate, Context, Expectations, Judgement, Verdict};
    use crate::testkit::{self, Desc};
    use std::collections::BTreeMap;
    use uuid::Uuid;

    fn group(mode: Option<u32>, edit: impl Fn(&mut Desc)) -> Vec<Candidate> {
        (0..2)
            .map(|rank| {
                let mut d = Desc::new("unit", rank, 2, 1);
                edit(&mut d);
                let p = parse_descriptor(&d.bytes());
                Candidate {
                    path: format!("rank-{rank}.json"),
                    raw_path: format!("rank-{rank}.json").into_bytes(),
                    name_rank: Some(rank),
                    mode,
                    ident: p.ident,
                    descriptor: p.descriptor,
                    findings: p.findings,
                }
            })
            .collect()
    }

    fn node() -> NodeFacts {
        let gpus = (0..2)
            .map(|r| crate::format::descriptor::GpuUuid::parse(&testkit::gpu(0, r)).unwrap())
            .collect();
        NodeFacts {
            boot_id: Fact::Known(Uuid::parse_str(testkit::BOOT_ID).unwrap()),
            hostname: Fact::Known(testkit::HOSTNAME.into()),
            processes: BTreeMap::from([
                (4242, Fact::Known(Some(123456))),
                (4100, Fact::Known(None)),
            ]),
            gpus: Fact::Known(Gpus {
                visible: gpus,
                on_node: None,
                source: "unit".into(),
                unreadable: Vec::new(),
            }),
        }
    }

    fn run(cands: Vec<Candidate>, n: &NodeFacts) -> Judgement {
        let expect = Expectations::default();
        let ctx = Context {
            now_unix_ms: testkit::CREATED_UNIX_MS + 1000,
            node: Some(n),
            expect: &expect,
            invocation: &Default::default(),
        };
        judge(cands, Vec::new(), &ctx)
    }

    fn codes(j: &Judgement) -> Vec<&'static str> {
        j.groups[0]
            .ranks
            .iter()
            .flat_map(|r| r.findings.iter().map(|f| f.code.as_str()))
            .collect()
    }

    fn status(j: &Judgement, name: &str) -> String {
        j.groups[0].ranks[0]
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .status
            .to_string()
    }

    /// A mode that is not known is never taken for a private one (it was
    /// 0, which passed): the exposure of handle bytes is "not checked",
    /// which --strict rejects as KV003; a posix_fd descriptor carries no
    /// bytes and passes whatever its mode.
    #[test]
    fn an_unknown_mode_leaves_handle_exposure_not_checked_never_passed() {
        let n = node();
        let j = run(group(None, |_| {}), &n);
        assert_eq!(
            status(&j, "handle-exposure"),
            "not checked: the file's mode is not known"
        );
        assert!(j.groups[0].ranks[0]
            .not_checked
            .iter()
            .any(|x| x.starts_with("handle-exposure: ")));
        assert_eq!(
            status(&run(group(Some(0o600), |_| {}), &n), "handle-exposure"),
            "pass"
        );
        let fd = run(group(None, |d| d.handle_kind = "posix_fd"), &n);
        assert_eq!(status(&fd, "handle-exposure"), "pass");
        let expect = Expectations {
            strict: true,
            ..Expectations::default()
        };
        let ctx = Context {
            now_unix_ms: testkit::CREATED_UNIX_MS + 1000,
            node: Some(&n),
            expect: &expect,
            invocation: &Default::default(),
        };
        let j = judge(group(None, |_| {}), Vec::new(), &ctx);
        assert_eq!(j.groups[0].verdict, Verdict::Reject);
        assert_eq!(codes(&j), ["KV003", "KV003"]);
    }

    #[test]
    fn strict_turns_every_fact_not_checked_into_a_rejection() {
        let unknown = NodeFacts::unknown("unreadable (test)");
        let j = run(group(Some(0o600), |_| {}), &unknown);
        assert_eq!(
            j.groups[0].verdict,
            Verdict::Accept,
            "not strict: listed only"
        );
        assert!(!j.groups[0].ranks[0].not_checked.is_empty());
        let expect = Expectations {
            strict: true,
            ..Expectations::default()
        };
        let ctx = Context {
            now_unix_ms: testkit::CREATED_UNIX_MS + 1000,
            node: Some(&unknown),
            expect: &expect,
            invocation: &Default::default(),
        };
        let j = judge(group(Some(0o600), |_| {}), Vec::new(), &ctx);
        assert_eq!(j.groups[0].verdict, Verdict::Reject);
        let r0: Vec<(&str, &str)> = j.groups[0].ranks[0]
            .findings
            .iter()
            .map(|f| (f.code.as_str(), f.message.as_text().unwrap()))
            .collect();
        // hostname, boot_id, owner (process 4242 was never probed); the writer is quiesced.
        assert_eq!(r0.len(), 4, "{r0:?}");
        for (code, fact) in [
            ("KV110", "hostname"),
            ("KV108", "boot_id"),
            ("KV108", "owner"),
            ("KV106", "gpu-present"),
        ] {
            assert!(
                r0.iter().any(|(c, m)| *c == code
                    && m.starts_with(&format!("not checked: {fact}"))
                    && m.ends_with("(--strict)")),
                "{fact}: {r0:?}"
            );
        }
    }

    #[test]
    fn matching_node_accepts() {
        let j = run(group(Some(0o600), |_| {}), &node());
        assert_eq!(j.groups[0].verdict, Verdict::Accept, "{:?}", codes(&j));
    }

    #[test]
    fn foreign_node_reports_only_kv110() {
        let mut n = node();
        n.hostname = Fact::Known("elsewhere".into());
        n.boot_id = Fact::Known(Uuid::from_u128(7));
        n.processes.clear();
        n.gpus = Fact::Known(Gpus::default());
        let j = run(group(Some(0o600), |_| {}), &n);
        assert_eq!(codes(&j), ["KV110", "KV110"]);
        for c in ["boot_id", "owner", "writer", "gpu-present"] {
            assert!(status(&j, c).starts_with("skipped"), "{c}");
        }
    }

    #[test]
    fn after_a_reboot_processes_are_not_looked_up() {
        let mut n = node();
        n.boot_id = Fact::Known(Uuid::from_u128(7));
        // A new process with the owner's and the writer's pid and start time.
        n.processes.insert(4100, Fact::Known(Some(120000)));
        let j = run(group(Some(0o600), |_| {}), &n);
        assert_eq!(codes(&j), ["KV108", "KV108"]);
        assert!(status(&j, "owner").starts_with("skipped"));
    }

    #[test]
    fn gpu_matched_on_bytes_and_posix_fd_not_exposed() {
        let mut n = node();
        let Fact::Known(g) = &mut n.gpus else {
            unreachable!()
        };
        g.visible = g
            .visible
            .iter()
            .map(|u| crate::format::descriptor::GpuUuid {
                kind: crate::format::descriptor::GpuKind::Mig,
                ..*u
            })
            .collect();
        let j = run(group(Some(0o644), |d| d.handle_kind = "posix_fd"), &n);
        assert_eq!(j.groups[0].verdict, Verdict::Accept, "{:?}", codes(&j));
        let j = run(group(Some(0o644), |_| {}), &n);
        assert_eq!(codes(&j), ["KV003", "KV003"]);
    }

    #[test]
    fn an_unreadable_device_makes_a_missing_gpu_not_checked_never_absent() {
        let mut n = node();
        let Fact::Known(g) = &mut n.gpus else {
            unreachable!()
        };
        // Rank 1's GPU is one the driver could not name.
        let rank1 = crate::format::descriptor::GpuUuid::parse(&testkit::gpu(0, 1)).unwrap();
        g.visible.remove(&rank1);
        g.unreadable = vec!["device 1: cuDeviceGetUuid_v2 failed: CUDA error 919".into()];
        let j = run(group(Some(0o600), |_| {}), &n);
        assert!(codes(&j).is_empty(), "{:?}", codes(&j));
        let r1 = &j.groups[0].ranks[1];
        let c = r1.checks.iter().find(|c| c.name == "gpu-present").unwrap();
        assert!(c.status.is_not_checked(), "{}", c.status);
        assert!(
            c.status.to_string().starts_with("not checked: "),
            "{}",
            c.status
        );
        // Rank 0's GPU was read: still checked.
        assert_eq!(status(&j, "gpu-present"), "pass");
        // Without unreadable devices the same gap is KV106.
        let Fact::Known(g) = &mut n.gpus else {
            unreachable!()
        };
        g.unreadable.clear();
        assert_eq!(codes(&run(group(Some(0o600), |_| {}), &n)), ["KV106"]);
    }
}
