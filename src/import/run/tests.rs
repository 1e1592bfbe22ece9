//! The run of `kvcr import` (`steps::import`) against the simulated
//! backend: refusal, selection, dry run, trial, hold and their reports, on
//! inventories built in temp directories and judged against a described
//! node. The engine alone is tested beside it (`crate::import::engine`).

use crate::commands::args::InventoryArgs;
use crate::format::descriptor::GpuUuid;
use crate::format::failure::Failure;
use crate::import::engine::sim::{Faults, SimBackend, SimEvent};
use crate::import::engine::{Backend, Step};
use crate::import::report::{ImportReport, Mode, ResultKind};
use crate::import::run::print;
use crate::import::run::steps::{self, Action, Done, Gpu, Request};
use crate::io::node::{Fact, FakeProbe, Gpus};
use crate::service::audit::Inventory;
use crate::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

const RANKS: u64 = 4;
const ALLOCS: usize = 3;

/// Writes a 4-rank × 3-allocation group with private modes (live mode
/// rejects handle bytes readable by others).
fn inventory(dir: &Path, engine: &str, handle_kind: &'static str, group: u32) {
    let mut d = Desc::new(engine, 0, RANKS, 1);
    d.allocations = ALLOCS;
    d.handle_kind = handle_kind;
    d.group = group;
    let sub = engine.replace('/', "_");
    put_group(dir, &sub, &d);
    private(dir);
}

fn private(dir: &Path) {
    for e in walkdir::WalkDir::new(dir) {
        let e = e.unwrap();
        let mode = if e.file_type().is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// The node the testkit descriptors describe: owner alive, GPUs present.
fn node() -> FakeProbe {
    let all: BTreeSet<GpuUuid> = (0..2)
        .flat_map(|g| (0..RANKS).map(move |r| GpuUuid::parse(&testkit::gpu(g, r)).unwrap()))
        .collect();
    FakeProbe {
        boot_id: Fact::Known(BOOT_ID.parse().unwrap()),
        hostname: Fact::Known(HOSTNAME.to_string()),
        processes: BTreeMap::from([(4242, 123456)]),
        processes_unreadable: None,
        gpus: Fact::Known(Gpus {
            visible: all.clone(),
            on_node: Some(all),
            source: "test".into(),
            unreadable: Vec::new(),
        }),
    }
}

/// The inventory arguments, with the declared profile an import requires
/// (docs/format.md §8.9) of the group imported, written beside the
/// descriptors (a stray file: a notice only).
fn args(root: &Path, engine: Option<&str>) -> Inventory {
    let e = engine.unwrap_or("llama3-70b-a");
    let mut d = Desc::new(e, 0, RANKS, 1);
    d.group = u32::from(e == "mixtral-b");
    let profile = root.join(format!("profile-{e}.json"));
    testkit::put_profile(&profile, &d);
    crate::commands::settings::inventory(&InventoryArgs {
        root: Some(root.to_path_buf()),
        profile: Some(profile),
        profile_from_env: false,
        engine: engine.map(|e| crate::format::descriptor::EngineId::parse(e).unwrap()),
        min_epoch: None,
        max_age: None,
        local_ranks: None,
        incarnation: None,
        producer_user: None,
    })
    .unwrap()
}

fn core(
    inv: &Inventory,
    mode: Mode,
    ready: Option<&Path>,
    sim: Option<&mut SimBackend>,
    interrupted: &dyn Fn() -> bool,
) -> Result<Done, Failure> {
    let probe = node();
    let req = Request {
        inventory: inv,
        fleet_report: None,
        max_report_age_s: 300,
        probe: &probe,
        interrupted,
        progress: false,
    };
    let none = || Some("no driver in the library's tests".to_string());
    let open = || -> Result<Box<dyn Backend>, Failure> {
        Err(Failure::usage("no driver in the library's tests", None))
    };
    let gpu = match sim {
        Some(s) => Gpu::Open(s),
        None => Gpu::Connect(&open),
    };
    let mut on_ready = |_: &ImportReport| {};
    let run = match mode {
        Mode::DryRun | Mode::Gate => Action::DryRun { driver: &none },
        Mode::Trial => Action::Trial { gpu },
        Mode::Hold => Action::Hold {
            gpu,
            ready_file: ready,
            poll: Duration::from_millis(1),
            on_ready: &mut on_ready,
        },
    };
    steps::import(&req, run)
}

#[test]
fn trial_through_the_command_core() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Imported, 0));
    assert_eq!(r.backend, "sim");
    assert_eq!(r.ranks.len(), 4);
    assert!(r.ranks.iter().all(|x| x.device.is_some() && x.ms.is_some()));
    assert_eq!(r.released, Some(sim.acquired().len()));
    sim.assert_released_in_reverse();
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["schema"], "kvcr.import-report/v1");
    assert_eq!(json["mode"], "trial");
    assert_eq!(json["result"], "imported");
    assert_eq!(json["ranks"][3]["gpu_uuid"], testkit::gpu(0, 3));
    assert!(json.get("failure").is_none() && json.get("remaining").is_none());
}

#[test]
fn a_rejected_group_never_reaches_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    std::fs::remove_file(dir.path().join("llama3-70b-a/rank-2.json")).unwrap();
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    assert_eq!(
        (done.report.result, done.report.status()),
        (ResultKind::Rejected, 1)
    );
    assert!(sim.log.is_empty(), "backend was called: {:?}", sim.log);
    let audit = done.report.audit.as_ref().unwrap();
    assert!(audit
        .findings
        .iter()
        .any(|f| f.code == crate::format::finding::Code::KV103));
    assert!(done.audit.is_some(), "the table prints the live audit");

    // Live facts reject too: the owner is gone.
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let probe = FakeProbe {
        processes: BTreeMap::new(),
        ..node()
    };
    let mut sim = SimBackend::new();
    let inv = args(dir.path(), None);
    let req = Request {
        inventory: &inv,
        fleet_report: None,
        max_report_age_s: 300,
        probe: &probe,
        interrupted: &|| false,
        progress: false,
    };
    let run = Action::Trial {
        gpu: Gpu::Open(&mut sim),
    };
    let done = steps::import(&req, run).unwrap();
    assert_eq!(done.report.status(), 1);
    assert!(sim.log.is_empty());

    // A rejecting file-level finding (a torn write) refuses as well.
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    std::fs::write(dir.path().join(".rank-9.json.x1.tmp"), b"{").unwrap();
    private(dir.path());
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    assert_eq!(done.report.status(), 1);
    assert_eq!(done.report.files.len(), 1);
    assert!(sim.log.is_empty());

    // No descriptor at all.
    let empty = tempfile::tempdir().unwrap();
    let mut sim = SimBackend::new();
    let done = core(
        &args(empty.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    assert_eq!(done.report.status(), 1);
    assert!(sim.log.is_empty());
}

#[test]
fn selection_needs_engine_when_several_groups() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    inventory(dir.path(), "mixtral-b", "posix_fd", 1);
    let mut sim = SimBackend::new();
    let err = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .err()
    .unwrap();
    assert_eq!(err.status, crate::format::exit::USAGE);
    assert!(err.message.contains("2 groups"), "{}", err.message);
    assert!(err.hint.unwrap().contains("--engine"));
    assert!(sim.log.is_empty());

    let done = core(
        &args(dir.path(), Some("mixtral-b")),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    assert_eq!(done.report.status(), 0);
    assert_eq!(done.report.engine_id.as_deref(), Some("mixtral-b"));

    // An --engine that names no group, with a profile declaring that group:
    // the declared group is missing (rejected, exit 1), nothing imported.
    // (Without a profile it is a usage error listing the groups present:
    // tests/it/audit/headline.rs.)
    let mut sim = SimBackend::new();
    let done = core(
        &args(dir.path(), Some("nope")),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    assert_eq!(done.report.status(), crate::format::exit::REJECTED);
    assert!(sim.log.is_empty());
}

#[test]
fn dry_run_plans_without_a_backend() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "posix_fd", 0);
    let done = core(&args(dir.path(), None), Mode::DryRun, None, None, &|| false).unwrap();
    let r = &done.report;
    // The plan lists what would refuse the real import: here, no driver,
    // and exits as that import would (§8.7).
    let gates: Vec<_> = r.refusals.iter().map(|x| (x.check, x.status)).collect();
    assert_eq!(gates, [(crate::import::report::Check::Driver, 2)]);
    assert_eq!(
        (r.result, r.status(), r.backend),
        (ResultKind::Planned, 2, "none")
    );
    assert_eq!(r.ranks.len(), 4);
    assert!(r.ranks.iter().all(|x| x.device.is_none() && x.ms.is_none()));
    assert_eq!(r.ranks[1].items.len(), 3);
    assert_eq!(r.ranks[1].items[0].kind, "posix_fd");
    assert_eq!(r.ranks[1].gpu_uuid, testkit::gpu(0, 1));
    let mut out = Vec::new();
    let p = crate::print::Printer::decide(
        crate::print::Format::Table,
        crate::print::ColorChoice::Never,
        false,
        true,
        &|_| None,
        false,
        false,
    );
    print::write_table(&mut out, &p, r).unwrap();
    print::write_result(&mut out, r).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("plan for llama3-70b-a"), "{text}");
    assert!(text.contains(&testkit::gpu(0, 3)), "{text}");
    assert!(text.contains("posix_fd×3"), "{text}");
    assert!(text.contains("nothing imported (dry run)"), "{text}");
}

/// Records whether the ready file existed at each simulator event.
fn watch(sim: &mut SimBackend, path: PathBuf) -> Rc<RefCell<Vec<(String, bool)>>> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    sim.on_event(move |e| {
        let op = match e {
            SimEvent::Acquire { .. } => "acquire",
            SimEvent::Release { .. } => "release",
            SimEvent::Call { .. } => "call",
            _ => "other",
        };
        s.borrow_mut().push((op.to_string(), path.exists()));
    });
    seen
}

#[test]
fn hold_writes_the_ready_file_only_after_the_last_rank_and_removes_it_first() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let ready = out.path().join("ready.json");
    let mut sim = SimBackend::new();
    let seen = watch(&mut sim, ready.clone());
    // The "supervisor" signals as soon as it sees the ready file.
    let ready_seen = RefCell::new(None::<serde_json::Value>);
    let signal = || {
        if let Ok(b) = std::fs::read(&ready) {
            *ready_seen.borrow_mut() = Some(serde_json::from_slice(&b).unwrap());
            true
        } else {
            false
        }
    };
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &signal,
    )
    .unwrap();
    assert_eq!(
        (done.report.result, done.report.status()),
        (ResultKind::Imported, 0)
    );
    let seen = seen.borrow();
    let acquires = seen.iter().filter(|(op, _)| op != "release");
    assert!(acquires.clone().count() > 40);
    assert!(
        acquires.clone().all(|(_, exists)| !exists),
        "ready file before the last rank"
    );
    assert!(
        seen.iter()
            .filter(|(op, _)| op == "release")
            .all(|(_, e)| !e),
        "removed before release"
    );
    assert!(!ready.exists());
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "no staging leftovers"
    );
    let doc = ready_seen.borrow().clone().expect("ready file was read");
    assert_eq!(doc["schema"], "kvcr.import-ready/v1");
    assert_eq!(doc["engine_id"], "llama3-70b-a");
    assert_eq!(doc["pid"], std::process::id());
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 4);
    sim.assert_released_in_reverse();
}

#[test]
fn hold_interrupted_mid_import_never_writes_the_ready_file() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let ready = out.path().join("ready.json");
    let mut sim = SimBackend::with_faults(Faults::interrupt_after(20));
    let seen = watch(&mut sim, ready.clone());
    let flag = sim.faults.flag.clone();
    let interrupted = move || flag.load(Ordering::SeqCst);
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &interrupted,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Interrupted, 130));
    assert_eq!(r.released, Some(20));
    assert!(seen.borrow().iter().all(|(_, e)| !e));
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
    sim.assert_released_in_reverse();
}

#[test]
fn hold_that_cannot_publish_the_ready_file_fails_and_releases() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let out = tempfile::tempdir().unwrap();
    let sub = out.path().join("run");
    std::fs::create_dir(&sub).unwrap();
    let ready = sub.join("ready.json");
    let mut sim = SimBackend::new();
    let gone = sub.clone();
    // The directory vanishes during the import: the rename must fail.
    sim.on_event(move |_| {
        let _ = std::fs::remove_dir_all(&gone);
    });
    let done = core(
        &args(dir.path(), None),
        Mode::Hold,
        Some(&ready),
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    assert_eq!(r.failure.as_ref().unwrap().step, Step::ReadyFile);
    sim.assert_released_in_reverse();
}

#[test]
fn a_failed_trial_release_exits_4_with_what_remains() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_release(3));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::ReleaseFailed, 4));
    let f = r.failure.as_ref().unwrap();
    assert_eq!((f.step, f.rank), (Step::Release, 3));
    assert_eq!(r.remaining.len(), 2, "{:?}", r.remaining);
    assert!(r.remaining.iter().any(|x| x.error.is_some()));
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["result"], "release-failed");
    assert_eq!(json["remaining"][1]["resource"]["kind"], "imported-handle");
    assert_eq!(json["remaining"][1]["release_call"], "cuMemRelease");
    let mut text = Vec::new();
    print::write_result(&mut text, r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("2 remain held"), "{text}");
}

#[test]
fn a_failed_import_through_the_command_core_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_at(Step::Map, 5));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    let f = r.failure.as_ref().unwrap();
    assert_eq!(
        (f.rank, f.allocation.as_deref(), f.step),
        (1, Some("kv-1"), Step::Map)
    );
    assert_eq!(r.ranks.len(), 1, "rank 0 completed before the failure");
    assert!(r.remaining.is_empty());
    let mut text = Vec::new();
    print::write_result(&mut text, r).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("FAILED: rank 1, allocation \"kv-1\", step map"),
        "{text}"
    );
    assert!(text.contains("nothing remains held"), "{text}");
    sim.assert_released_in_reverse();
}

#[test]
fn a_failure_in_rank_0_reports_no_imported_rank() {
    let dir = tempfile::tempdir().unwrap();
    inventory(dir.path(), "llama3-70b-a", "fabric", 0);
    let mut sim = SimBackend::with_faults(Faults::fail_at(Step::Import, 2));
    let done = core(
        &args(dir.path(), None),
        Mode::Trial,
        None,
        Some(&mut sim),
        &|| false,
    )
    .unwrap();
    let r = &done.report;
    assert_eq!((r.result, r.status()), (ResultKind::Failed, 3));
    assert!(r.ranks.is_empty(), "{:?}", r.ranks);
    assert_eq!(r.released, Some(4), "ctx + kv-0 import/reserve/map");
    sim.assert_released_in_reverse();
}
