//! The GMS reader's rules on artifacts the test kit writes (read through
//! the real `io` readers from a temporary file), and on cohort reads built
//! by hand where the kernel cannot be made to say it (a holder outside
//! this PID namespace, a holder that is exiting).

use crate::format::finding::{Code, Finding, Severity};
use crate::gms::format;
use crate::gms::read as io;
use crate::gms::rules::*;
use crate::testkit::gms as kit;

fn lease_read(bytes: &[u8]) -> LeaseRead {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ring.shm");
    std::fs::write(&p, bytes).unwrap();
    let o = io::open_file(&p).unwrap();
    io::read_lease(&o).unwrap()
}

fn recovery_read(bytes: &[u8], ask: &RecoveryAsk) -> RecoveryRead {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("kv-recovery.mmap");
    std::fs::write(&p, bytes).unwrap();
    let o = io::open_file(&p).unwrap();
    io::read_recovery(&o, ask).unwrap()
}

fn codes(f: &[Finding]) -> Vec<(Code, Severity)> {
    f.iter().map(|f| (f.code, f.severity)).collect()
}

const OWNER: u64 = 0x1111_2222_3333_4444;

/// `--live` facts: [`OWNER`] runs, and the recovery owner as given.
fn owner_alive(recovery_owner_alive: Option<bool>) -> LeaseLive {
    LeaseLive {
        devices: 8,
        recovery_owner_alive,
        owners: [(
            OWNER,
            OwnerId {
                engine: "vllm",
                pid: 1,
                device: 0,
            },
        )]
        .into(),
        ..LeaseLive::default()
    }
}

#[test]
fn a_healthy_ring_read_twice_has_no_finding() {
    let r = lease_read(&kit::Lease::valid(16, OWNER).bytes());
    let s = r.scan.as_ref().unwrap();
    assert_eq!(s.states, [11, 3, 1, 1, 0]);
    assert_eq!(s.owners.get(&OWNER), Some(&4));
    let (f, facts) = judge_lease(&r, &r, None);
    assert_eq!(f, []);
    assert_eq!(facts.expected_size, Some(64 + 16 * 16));
}

/// Each recipe mutation of a lease ring, seen in both reads, earns its
/// code as a rejection (the liveness of owners aside: KV213 needs --live).
#[test]
fn each_lease_mutation_earns_its_code_in_both_reads() {
    let base = kit::Lease::valid(16, OWNER);
    for m in kit::LeaseMutation::ALL {
        let r = lease_read(&m.apply(&base).bytes());
        let live = LeaseLive {
            devices: 8,
            recovery_owner_alive: Some(false),
            ..LeaseLive::default()
        };
        let (f, _) = judge_lease(&r, &r, Some(&live));
        let want = Code::parse(m.code()).unwrap();
        let sev = if want == Code::KV207 {
            Severity::Notice
        } else {
            Severity::Reject
        };
        assert!(codes(&f).contains(&(want, sev)), "{m:?}: {f:#?}");
        let others: Vec<Code> = f
            .iter()
            .filter(|x| x.is_reject() && x.code != want && x.code != Code::KV213)
            .map(|x| x.code)
            .collect();
        assert_eq!(others, [], "{m:?}: only its own code rejects");
    }
}

#[test]
fn a_transition_seen_once_is_a_notice_and_the_same_block_twice_a_finding() {
    let base = kit::Lease::valid(16, OWNER);
    let healthy = lease_read(&base.bytes());
    let moving = lease_read(&kit::LeaseMutation::Transition.apply(&base).bytes());
    let (f, _) = judge_lease(&healthy, &moving, None);
    assert_eq!(codes(&f), [(Code::KV205, Severity::Notice)]);
    assert!(text(&f[0]).contains("in one read only"), "{}", text(&f[0]));
    // Block 5 in the first read, block 6 in the second: two moments.
    let mut other = kit::LeaseMutation::Transition.apply(&base);
    other.records.swap(5, 6);
    let (f, _) = judge_lease(&moving, &lease_read(&other.bytes()), None);
    assert_eq!(codes(&f), [(Code::KV205, Severity::Notice)]);
    let (f, _) = judge_lease(&moving, &moving, None);
    assert_eq!(codes(&f), [(Code::KV205, Severity::Reject)]);
    assert!(
        text(&f[0]).starts_with("1 block (5) in TRANSITION"),
        "{}",
        text(&f[0])
    );
}

/// A count of mutations in flight is a finding only when both reads show
/// it and nothing changed between them: a ring in use keeps one.
#[test]
fn mutations_on_a_ring_that_changes_are_a_notice() {
    let mut l = kit::LeaseMutation::MutationsInFlight.apply(&kit::Lease::valid(16, OWNER));
    let a = lease_read(&l.bytes());
    let (f, _) = judge_lease(&a, &a, None);
    assert_eq!(codes(&f), [(Code::KV209, Severity::Reject)]);
    l.records[6].generation += 1;
    let b = lease_read(&l.bytes());
    let (f, _) = judge_lease(&a, &b, None);
    assert_eq!(codes(&f), [(Code::KV209, Severity::Notice)]);
    // No drift is judged while a mutation is in flight.
    l.free_count += 5;
    let c = lease_read(&l.bytes());
    let (f, _) = judge_lease(&c, &c, None);
    assert_eq!(codes(&f), [(Code::KV209, Severity::Reject)]);
}

#[test]
fn a_held_barrier_with_a_running_owner_is_a_recovery_in_progress() {
    let r = lease_read(
        &kit::LeaseMutation::Barrier
            .apply(&kit::Lease::valid(8, OWNER))
            .bytes(),
    );
    let (f, _) = judge_lease(&r, &r, Some(&owner_alive(Some(true))));
    assert_eq!(codes(&f), [(Code::KV210, Severity::Notice)]);
    let (f, _) = judge_lease(&r, &r, Some(&owner_alive(Some(false))));
    assert_eq!(codes(&f), [(Code::KV210, Severity::Reject)]);
    assert!(
        text(&f[0]).contains("pid 4194400) is gone"),
        "{}",
        text(&f[0])
    );
    let (f, _) = judge_lease(&r, &r, None);
    assert_eq!(codes(&f), [(Code::KV210, Severity::Reject)]);
    assert!(text(&f[0]).contains("not checked: add --live"));
    // A dead recovery_owner_pid at rest is normal (GMS never clears it).
    let mut rest = kit::Lease::valid(8, OWNER);
    rest.recovery_owner_pid = u64::from(kit::DEAD_PID);
    let r = lease_read(&rest.bytes());
    assert_eq!(judge_lease(&r, &r, Some(&owner_alive(Some(false)))).0, []);
}

#[test]
fn a_header_that_changes_between_reads_is_reported_not_guessed() {
    let a = lease_read(&kit::Lease::valid(8, OWNER).bytes());
    let b = lease_read(&kit::Lease::valid(9, OWNER).bytes());
    let (f, _) = judge_lease(&a, &b, None);
    assert_eq!(codes(&f), [(Code::KV250, Severity::Reject)]);
    assert!(f[0].expected.as_deref().unwrap().contains("total_blocks 8"));
    assert!(f[0].found.as_deref().unwrap().contains("total_blocks 9"));
}

#[test]
fn owners_are_judged_live_only_and_by_the_default_owner_id() {
    let r = lease_read(&kit::Lease::valid(8, OWNER).bytes());
    let mut live = LeaseLive {
        devices: 4,
        ..LeaseLive::default()
    };
    let (f, facts) = judge_lease(&r, &r, Some(&live));
    assert_eq!(codes(&f), [(Code::KV213, Severity::Reject)]);
    assert!(text(&f[0]).contains("4 leased or sealed block(s) of 1 owner(s)"));
    assert!(text(&f[0]).contains("devices 0-3"));
    assert!(text(&f[0]).contains("custom owner id"));
    assert_eq!(facts.owners, [(OWNER, 4, None)]);
    let id = OwnerId {
        engine: "sglang",
        pid: 77,
        device: 2,
    };
    live.owners.insert(OWNER, id.clone());
    let (f, facts) = judge_lease(&r, &r, Some(&live));
    assert_eq!(f, []);
    assert_eq!(facts.owners, [(OWNER, 4, Some(id))]);
    // Not checked (no trusted /proc, another PID namespace): said so, as a
    // notice with the reason, never silence and never a verdict.
    live.not_checked = Some("no procfs".into());
    live.owners.clear();
    let (f, facts) = judge_lease(&r, &r, Some(&live));
    assert_eq!(codes(&f), [(Code::KV213, Severity::Notice)]);
    assert!(
        text(&f[0]).contains("not checked: no procfs"),
        "{}",
        text(&f[0])
    );
    assert_eq!(facts.owners_not_checked.as_deref(), Some("no procfs"));
    assert_eq!(judge_lease(&r, &r, None).0, []);
}

#[test]
fn the_blocks_of_a_condition_are_compared_even_past_the_cap() {
    let mut a = Blocks::default();
    let mut b = Blocks::default();
    for id in 0..(BLOCK_CAP as u64 + 10) {
        a.push(id);
        b.push(id + 1);
    }
    let both = a.both(&b);
    assert_eq!(both.count, BLOCK_CAP as u64 - 1 + 10);
    assert_eq!(both.first[0], 1);
    assert!(Blocks {
        count: 9,
        first: (0..9).collect()
    }
    .describe()
    .ends_with("(0, 1, 2, 3, 4, 5, 6, 7, …)"));
}

#[test]
fn a_healthy_recovery_file_is_recovered_and_the_binding_checked_when_given() {
    let r = kit::Recovery::valid(8);
    let none = RecoveryAsk::default();
    let read = recovery_read(&r.bytes(), &none);
    let (f, facts) = judge_recovery(&read, &read, &none);
    assert_eq!(codes(&f), [(Code::KV229, Severity::Notice)]);
    assert_eq!(facts.outcome, Outcome::Recovered);
    assert_eq!(facts.num_blocks, Some(8));
    assert_eq!(
        facts.scan.as_ref().map(|s| (s.valid, s.empty)),
        Some((3, 4))
    );
    let ask = RecoveryAsk {
        num_blocks: Some(8),
        binding: Some(r.binding),
    };
    let read = recovery_read(&r.bytes(), &ask);
    let (f, facts) = judge_recovery(&read, &read, &ask);
    assert_eq!(f, []);
    assert_eq!(facts.outcome, Outcome::Recovered);
}

/// `test_incompatible_or_corrupt_metadata_starts_fresh[allocation|layout|
/// corruption]` (`tests/test_kv_recovery.py` @ 3474c1be): another
/// allocation (here its server nonce or GPU), another layout (here the
/// block count) or a corrupt record starts FRESH; so does each mutation of
/// the generator recipe, with its own code.
#[test]
fn test_incompatible_or_corrupt_metadata_starts_fresh() {
    let base = kit::Recovery::valid(8);
    for m in kit::RecoveryMutation::ALL {
        let ask = RecoveryAsk {
            num_blocks: None,
            binding: Some(base.binding),
        };
        let read = recovery_read(&m.apply(&base).bytes(), &ask);
        let (f, facts) = judge_recovery(&read, &read, &ask);
        let want = Code::parse(m.code()).unwrap();
        assert_eq!(facts.outcome, Outcome::Fresh, "{m:?}");
        let first = f.iter().find(|x| x.is_reject()).unwrap();
        assert_eq!(first.code, want, "{m:?}: the first reason");
    }
    // Layout: the engine asks for another block count.
    let ask = RecoveryAsk {
        num_blocks: Some(9),
        binding: None,
    };
    let read = recovery_read(&base.bytes(), &ask);
    let (f, facts) = judge_recovery(&read, &read, &ask);
    assert_eq!(facts.outcome, Outcome::Fresh);
    assert_eq!(f[0].code, Code::KV221);
    assert_eq!(f[0].expected.as_deref(), Some("5248"));
}

/// The reasons come in GMS's order of checks, and every one is listed: a
/// torn takeover with a corrupt record names the commit first.
#[test]
fn every_reason_is_listed_and_the_first_in_gmss_order_leads() {
    let base = kit::Recovery::valid(8);
    let m = kit::RecoveryMutation::CommitZero
        .apply(&kit::RecoveryMutation::FlippedPayloadByte.apply(&base));
    let ask = RecoveryAsk::default();
    let read = recovery_read(&m.bytes(), &ask);
    let (f, _) = judge_recovery(&read, &read, &ask);
    let rejects: Vec<Code> = f.iter().filter(|x| x.is_reject()).map(|x| x.code).collect();
    assert_eq!(rejects, [Code::KV224, Code::KV227]);
}

/// `test_sigkill_during_commit_cannot_publish_torn_state[publish|owner]`
/// (`tests/test_kv_recovery.py` @ 3474c1be): a writer killed while
/// publishing leaves its record's valid word 0, so the file still reads
/// RECOVERED (without that record); one killed mid-takeover leaves commit
/// 0 (FRESH, KV224).
#[test]
fn test_sigkill_during_commit_cannot_publish_torn_state() {
    let mut publish = kit::Recovery::valid(8);
    publish.records[2].1.valid = 0;
    publish.records[2].1.hash_len = 99;
    let ask = RecoveryAsk::default();
    let read = recovery_read(&publish.bytes(), &ask);
    let (_, facts) = judge_recovery(&read, &read, &ask);
    assert_eq!(facts.outcome, Outcome::Recovered);
    assert_eq!(facts.scan.unwrap().valid, 2);
    let owner = kit::RecoveryMutation::CommitZero.apply(&kit::Recovery::valid(8));
    let read = recovery_read(&owner.bytes(), &ask);
    let (f, facts) = judge_recovery(&read, &read, &ask);
    assert_eq!(facts.outcome, Outcome::Fresh);
    assert_eq!(f[0].code, Code::KV224);
}

/// A takeover between the two reads (epoch bumped) is reported, never
/// guessed; a commit 0 in one read only is a takeover in progress.
#[test]
fn a_takeover_between_the_reads_is_reported() {
    let a = kit::Recovery::valid(8);
    let mut b = a.clone();
    b.epoch += 1;
    b.commit += 1;
    let ask = RecoveryAsk::default();
    let (ra, rb) = (
        recovery_read(&a.bytes(), &ask),
        recovery_read(&b.bytes(), &ask),
    );
    let (f, _) = judge_recovery(&ra, &rb, &ask);
    assert_eq!(codes(&f), [(Code::KV250, Severity::Reject)]);
    let mut torn = a.clone();
    torn.commit = 0;
    let rt = recovery_read(&torn.bytes(), &ask);
    // Same epoch and owner, commit 0 in one read: the last step of a
    // takeover (commit = epoch) happened in between, a notice.
    let (f, _) = judge_recovery(&rt, &ra, &ask);
    assert_eq!(
        codes(&f),
        [
            (Code::KV224, Severity::Notice),
            (Code::KV229, Severity::Notice)
        ]
    );
}

fn entry(name: &str, content: &[u8], lock: Option<Lock>) -> CohortEntry {
    CohortEntry {
        name: name.into(),
        regular: true,
        size: content.len() as u64,
        mtime_ns: 0,
        content: Some(content.to_vec()),
        lock,
        unreadable: None,
    }
}

fn holder(pid: i32, running: bool, exiting: bool) -> Holder {
    Holder {
        pid,
        exclusive: false,
        running,
        exiting,
    }
}

/// A vLLM directory after one takeover, the predecessor's lock as given.
fn vllm(pred_lock: Lock, pred_content: &[u8]) -> CohortRead {
    let (p, a) = (kit::cohort_id(1), kit::cohort_id(2));
    CohortRead {
        entries: vec![
            entry(&p, pred_content, Some(pred_lock)),
            entry(&format!("{p}.leader"), b"", Some(Lock::Free)),
            entry(
                &a,
                b"",
                Some(Lock::Held {
                    holders: vec![holder(10, true, false)],
                }),
            ),
            entry(&format!("{a}.leader"), b"", Some(Lock::Free)),
            entry(&format!("{a}.predecessor"), p.as_bytes(), None),
            entry("active", a.as_bytes(), None),
        ],
    }
}

#[test]
fn a_fenced_predecessor_is_ok_and_a_running_one_is_not() {
    let ok = vllm(Lock::Free, b"R");
    let (f, facts) = judge_cohort(&ok, &ok);
    assert_eq!(f, []);
    assert_eq!(facts.flavour, Flavour::Vllm);
    assert_eq!(facts.active, Some(kit::cohort_id(2)));
    assert_eq!(facts.predecessor, Some(kit::cohort_id(1)));
    let running = vllm(
        Lock::Held {
            holders: vec![holder(42, true, false)],
        },
        b"R",
    );
    let (f, _) = judge_cohort(&running, &running);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Reject)]);
    assert!(text(&f[0]).contains("pid 42"));
    // Seen in one read only: a notice.
    let (f, _) = judge_cohort(&ok, &running);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Notice)]);
}

/// Correction 2 of the GMS reference: the tombstone first, then the
/// holders re-checked; a holder that is exiting is a legitimate transient.
#[test]
fn a_tombstone_with_exiting_holders_is_the_end_of_a_fence() {
    let r = vllm(
        Lock::Held {
            holders: vec![holder(42, true, true)],
        },
        b"R",
    );
    let (f, _) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Notice)]);
    assert!(text(&f[0]).contains("exiting (pid 42)"), "{}", text(&f[0]));
    // Listed by the kernel, its recorded pid gone, no holder named.
    let gone = vllm(
        Lock::Held {
            holders: vec![holder(43, false, false)],
        },
        b"R",
    );
    let (f, _) = judge_cohort(&gone, &gone);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Notice)]);
    let unnamed = vllm(Lock::Held { holders: vec![] }, b"R");
    let (f, _) = judge_cohort(&unnamed, &unnamed);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Reject)]);
}

#[test]
fn a_lock_held_outside_this_namespace_is_not_checked_never_free() {
    let r = vllm(Lock::NotChecked("held outside".into()), b"R");
    let (f, _) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV235, Severity::Notice)]);
    assert!(text(&f[0]).contains("held outside"));
}

#[test]
fn an_unretired_or_damaged_predecessor_is_not_fenced() {
    for content in [&b""[..], b"X"] {
        let r = vllm(Lock::Free, content);
        let (f, _) = judge_cohort(&r, &r);
        assert_eq!(codes(&f), [(Code::KV231, Severity::Reject)], "{content:?}");
    }
}

#[test]
fn markers_staging_and_joining_are_judged() {
    let mut r = vllm(Lock::Free, b"R");
    r.entries.retain(|e| e.name != "active");
    r.entries.push(entry("active", b"not-a-uuid\n", None));
    let (f, _) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV234, Severity::Reject)]);
    let mut r = vllm(Lock::Free, b"R");
    r.entries.retain(|e| e.name != "active");
    r.entries
        .push(entry("active", kit::cohort_id(9).as_bytes(), None));
    let (f, _) = judge_cohort(&r, &r);
    assert!(
        codes(&f).contains(&(Code::KV234, Severity::Reject)),
        "{f:#?}"
    );
    let mut r = vllm(Lock::Free, b"R");
    let staging = format!("{}.{}.active", kit::cohort_id(2), kit::cohort_id(7));
    r.entries.push(entry(&staging, b"", None));
    let (f, _) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV233, Severity::Reject)]);
    assert_eq!(f[0].path.as_deref(), Some(staging.as_str()));
    let mut r = vllm(Lock::Free, b"R");
    r.entries.push(entry(
        &kit::joining_name("0"),
        kit::cohort_id(1).as_bytes(),
        None,
    ));
    let (f, _) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV236, Severity::Notice)]);
}

#[test]
fn a_changed_active_marker_is_a_takeover_between_the_reads() {
    let a = vllm(Lock::Free, b"R");
    let mut b = a.clone();
    for e in &mut b.entries {
        if e.name == "active" {
            e.content = Some(kit::cohort_id(1).into_bytes());
        }
    }
    let (f, _) = judge_cohort(&a, &b);
    assert_eq!(codes(&f), [(Code::KV250, Severity::Reject)]);
}

/// SGLang keeps no tombstone: an older cohort (created before the active
/// one) with a running writer is not fenced; a newer one is a standby.
#[test]
fn sglang_cohorts_are_ordered_by_creation() {
    let (old, active, newer) = (kit::cohort_id(1), kit::cohort_id(2), kit::cohort_id(3));
    let held = || {
        Some(Lock::Held {
            holders: vec![holder(5, true, false)],
        })
    };
    let mut e_old = entry(&old, b"", held());
    e_old.mtime_ns = 1;
    let mut e_active = entry(&active, b"", held());
    e_active.mtime_ns = 2;
    let mut e_new = entry(&newer, b"", held());
    e_new.mtime_ns = 3;
    let r = CohortRead {
        entries: vec![
            e_old.clone(),
            e_active.clone(),
            e_new,
            entry("active", active.as_bytes(), None),
        ],
    };
    assert_eq!(r.flavour(), Flavour::Sglang);
    let (f, facts) = judge_cohort(&r, &r);
    assert_eq!(codes(&f), [(Code::KV232, Severity::Reject)]);
    assert_eq!(f[0].path.as_deref(), Some(old.as_str()));
    let roles: Vec<Role> = facts.cohorts.iter().map(|c| c.role).collect();
    assert_eq!(roles, [Role::Active, Role::Older, Role::Other]);
    e_old.lock = Some(Lock::Free);
    let r = CohortRead {
        entries: vec![e_old, e_active, entry("active", active.as_bytes(), None)],
    };
    assert_eq!(judge_cohort(&r, &r).0, []);
}

#[test]
fn superseded_files_are_always_found_and_sized() {
    let r = SupersededRead {
        format: format::Superseded::Dynkvix1,
        size: 4096 + 64 * 4,
        expected_size: Some(4096 + 64 * 4),
        exact: false,
        beside: vec![],
    };
    assert_eq!(
        codes(&judge_superseded(&r)),
        [(Code::KV241, Severity::Reject)]
    );
    let short = SupersededRead {
        size: 4096 + 64 * 3,
        ..r.clone()
    };
    assert_eq!(
        codes(&judge_superseded(&short)),
        [
            (Code::KV241, Severity::Reject),
            (Code::KV242, Severity::Reject)
        ]
    );
    let snapshot = SupersededRead {
        format: format::Superseded::Gmskvix2,
        expected_size: None,
        exact: true,
        ..r
    };
    assert_eq!(judge_superseded(&snapshot).len(), 1);
}

#[test]
fn both_reads_keeps_what_both_saw_and_notes_the_rest() {
    let f = |c| Finding::reject(c, "x").at("p");
    let out = both_reads(
        vec![f(Code::KV233), f(Code::KV234)],
        vec![f(Code::KV233), f(Code::KV231)],
    );
    assert_eq!(
        codes(&out),
        [
            (Code::KV233, Severity::Reject),
            (Code::KV231, Severity::Notice),
            (Code::KV234, Severity::Notice)
        ]
    );
    assert!(text(&out[1]).starts_with("(in one of two reads"));
}

/// `test_post_fence_reclaim_recovers_process_death_at_every_transition_step
/// [acquire-0..3, release-0..2]` (`tests/test_kv_lease_shm_client.py` @
/// 12860c91, its `_crash_in_lease_transition`): a writer that registered its
/// mutation (active_mutations 1) and died after each atomic step of an
/// acquire or a release leaves a ring kvcr rejects, with the stranded count
/// (KV209) as the headline and the TRANSITION record (KV205) beside it:
/// what the post-fence reclaim then repairs.
#[test]
fn test_post_fence_reclaim_recovers_process_death_at_every_transition_step() {
    let old = kit::owner_hash("old");
    for (operation, phases) in [("acquire", 0..=3), ("release", 0..=2)] {
        for phase in phases {
            let mut l = kit::Lease::valid(8, OWNER);
            l.records.iter_mut().for_each(|r| {
                *r = kit::Record {
                    state: kit::FREE,
                    generation: 0,
                    owner_hash: 0,
                }
            });
            if operation == "release" {
                l.records[0] = kit::Record {
                    state: kit::LEASED,
                    generation: 1,
                    owner_hash: old,
                };
            }
            l.free_count = l.free_records();
            l.active_mutations = 1;
            let r = &mut l.records[0];
            r.state = kit::TRANSITION;
            if phase >= 1 {
                if operation == "acquire" {
                    r.generation += 1;
                } else {
                    r.owner_hash = 0;
                }
            }
            if phase >= 2 {
                if operation == "acquire" {
                    r.owner_hash = 0xBAD;
                } else {
                    l.free_count += 1;
                }
            }
            if phase >= 3 {
                l.free_count -= 1;
            }
            let read = lease_read(&l.bytes());
            let (f, _) = judge_lease(&read, &read, None);
            let rejects: Vec<Code> = f.iter().filter(|x| x.is_reject()).map(|x| x.code).collect();
            assert_eq!(
                rejects,
                [Code::KV205, Code::KV209],
                "{operation}-{phase}: {f:#?}"
            );
            let lead = f
                .iter()
                .filter(|x| x.is_reject())
                .min_by_key(|x| x.code.spec().root_rank)
                .unwrap();
            assert_eq!(lead.code, Code::KV209, "{operation}-{phase}");
        }
    }
}

/// `test_post_fence_reclaim_steals_barrier_from_crashed_recovery_owner`
/// (`tests/test_kv_lease_shm_client.py` @ 12860c91): active_mutations all
/// ones and recovery_owner_pid 0xDEAD, a pid that is gone: a stranded
/// barrier (KV210), which the next fenced reclaim steals.
#[test]
fn test_post_fence_reclaim_steals_barrier_from_crashed_recovery_owner() {
    let mut l = kit::Lease::valid(8, OWNER);
    l.active_mutations = u64::MAX;
    l.recovery_owner_pid = 0xDEAD;
    let r = lease_read(&l.bytes());
    let (f, facts) = judge_lease(&r, &r, Some(&owner_alive(Some(false))));
    assert_eq!(codes(&f), [(Code::KV210, Severity::Reject)]);
    assert!(
        text(&f[0]).contains("pid 57005) is gone: stranded"),
        "{}",
        text(&f[0])
    );
    assert!(facts.barrier);
}

/// Owners past the tracked 4,096 are counted and, with --live, reported
/// as not checked, never dropped (docs/format.md §14.2).
#[test]
fn owners_past_the_cap_are_reported_not_dropped() {
    let n = OWNER_CAP as u32 + 10;
    let mut l = kit::Lease::valid(n, OWNER);
    for (i, r) in l.records.iter_mut().enumerate().skip(5) {
        r.state = 1;
        r.owner_hash = 0x1000 + i as u64;
    }
    l.free_count = 0;
    let r = lease_read(&l.bytes());
    let scan = r.scan.as_ref().unwrap();
    assert_eq!(scan.owners.len(), OWNER_CAP);
    assert_eq!(scan.owners_untracked, 6);
    let live = LeaseLive {
        devices: 8,
        owners: scan
            .owners
            .keys()
            .map(|&h| {
                (
                    h,
                    OwnerId {
                        engine: "vllm",
                        pid: 1,
                        device: 0,
                    },
                )
            })
            .collect(),
        ..LeaseLive::default()
    };
    let (f, _) = judge_lease(&r, &r, Some(&live));
    assert_eq!(codes(&f), [(Code::KV213, Severity::Notice)]);
    assert!(text(&f[0]).contains("6 leased or sealed block(s) of owners beyond the first 4096"));
}
