//! Labelled mutations of KVCR's own snapshots, one per finding code: the
//! code, its severity, the verdict, the cause and the exit status.

use super::kit::{self, codes, finding, frame, poke, pool, pools, record, snapshot, Made, TERMS};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

const GEN: &str = "0123456789abcdef0123456789abcdef";

struct Case {
    _d: tempfile::TempDir,
    dir: PathBuf,
    m: Vec<Made>,
}

fn released() -> Case {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    Case { _d: d, dir, m }
}

fn leaked() -> Case {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("service-killed-primary-publishing", &dir);
    Case { _d: d, dir, m }
}

impl Case {
    fn run(&self, extra: &[&str]) -> (i32, Value) {
        let id = self.m[0].identity_arg();
        let mut a = vec![self.dir.to_str().unwrap(), "--identity", &id];
        for t in TERMS.chunks(2) {
            if !extra.contains(&t[0]) {
                a.extend(t);
            }
        }
        a.extend(extra);
        pools(&a)
    }
}

/// The pool rejects with `code` as its cause, and the run exits 1.
fn rejects(v: &Value, code: i32, name: &str, want: &str) -> Value {
    assert_eq!(code, 1, "{v:#}");
    let p = pool(v, name);
    assert_eq!(p["verdict"], "rejected", "{p:#}");
    assert!(
        p["cause"].as_str().unwrap().ends_with(&format!("({want})")),
        "{p:#}"
    );
    assert!(v["cause"].as_str().unwrap().contains(want), "{v:#}");
    assert_eq!(finding(p, want)["severity"], "reject");
    assert!(p["action"]
        .as_str()
        .unwrap()
        .contains(&format!("kvcr explain {want}")));
    p.clone()
}

/// The pool (or group) carries `code` as a notice; nothing rejects.
fn notices(v: &Value, code: i32, e: &Value, want: &str) {
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(e["verdict"], "ok", "{e:#}");
    assert_eq!(finding(e, want)["severity"], "notice", "{e:#}");
}

#[test]
fn kv401_foreign_names() {
    let c = released();
    std::fs::write(
        c.dir.join(format!("kvcr-pool_0-{}", GEN.to_uppercase())),
        b"",
    )
    .unwrap();
    std::fs::write(c.dir.join("not-kvcr"), b"").unwrap();
    let (code, v) = c.run(&[]);
    let e = pool(&v, &GEN.to_uppercase());
    notices(&v, code, e, "KV401");
    assert_eq!(e["kind"], "foreign-name");
    assert_eq!(v["groups"][0]["other_entries"], 1);
    // A purgeable name with another pool id is read, and said not the service's.
    let c = released();
    std::fs::copy(&c.m[1].path, c.dir.join(format!("kvcr-mine-{GEN}"))).unwrap();
    let (code, v) = c.run(&[]);
    let e = pool(&v, &format!("kvcr-mine-{GEN}"));
    notices(&v, code, e, "KV401");
    assert_eq!(e["pool"], "mine");
    assert_eq!(e["journal"]["invalid"], 0);
}

#[test]
fn kv402_a_symlinked_pool_name() {
    let c = released();
    let name = format!("kvcr-pool_2-{GEN}");
    std::os::unix::fs::symlink(&c.m[1].path, c.dir.join(&name)).unwrap();
    let (code, v) = c.run(&[]);
    let p = rejects(&v, code, &name, "KV402");
    assert_eq!(p["kind"], "symlink");
    assert!(p["journal"].is_null(), "followed: {p:#}");
}

#[test]
fn kv403_a_pool_name_that_is_a_directory() {
    let c = released();
    let name = format!("kvcr-pool_2-{GEN}");
    std::fs::create_dir(c.dir.join(&name)).unwrap();
    let (code, v) = c.run(&[]);
    let p = rejects(&v, code, &name, "KV403");
    assert_eq!(p["kind"], "not-regular");
}

#[test]
fn kv404_mode_other_than_0600() {
    let c = released();
    std::fs::set_permissions(&c.m[1].path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, v) = c.run(&[]);
    let p = rejects(&v, code, &c.m[1].name, "KV404");
    assert_eq!(p["mode"], "0644");
    assert!(finding(&p, "KV404")["message"]
        .as_str()
        .unwrap()
        .contains("0644"));
}

#[test]
fn kv405_owners_differ() {
    if !crate::util::is_root() {
        crate::util::skip_fact("chown needs root");
        return;
    }
    let c = released();
    std::os::unix::fs::chown(&c.m[1].path, Some(4321), None).unwrap();
    let (code, v) = c.run(&[]);
    notices(&v, code, &v["groups"][0], "KV405");
}

#[test]
fn kv406_a_zero_byte_pool() {
    let c = released();
    std::fs::File::create(&c.m[1].path).unwrap();
    let (code, v) = c.run(&[]);
    let p = rejects(&v, code, &c.m[1].name, "KV406");
    let msg = finding(&p, "KV406")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("0 bytes") && msg.contains("104964096"),
        "{msg}"
    );
}

#[test]
fn kv407_a_sparse_copy() {
    let c = released();
    let sparse = c.dir.join(format!("kvcr-pool_2-{GEN}"));
    let f = std::fs::File::create(&sparse).unwrap();
    f.set_len(kit::MAPPING).unwrap();
    std::fs::set_permissions(&sparse, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, v) = c.run(&[]);
    notices(&v, code, pool(&v, &format!("kvcr-pool_2-{GEN}")), "KV407");
}

#[test]
fn kv408_an_invalidated_journal_and_a_value_kvcr_never_writes() {
    let c = leaked();
    poke(&c.m[1].path, 0, &1u64.to_le_bytes());
    let (code, v) = c.run(&[]);
    let p = pool(&v, &c.m[1].name);
    notices(&v, code, p, "KV408");
    // The pending frames are listed, never as the pool's content.
    let msg = finding(p, "KV408")["message"].as_str().unwrap();
    assert!(
        msg.contains("4 pending frame(s)") && msg.contains("never the pool's content"),
        "{msg}"
    );
    poke(&c.m[1].path, 0, &7u64.to_le_bytes());
    poke(&c.m[1].path, 3000, b"x");
    let (code, v) = c.run(&[]);
    let p = pool(&v, &c.m[1].name);
    notices(&v, code, p, "KV408");
    let all: Vec<&str> = p["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(all.iter().any(|m| m.contains("is 7")), "{all:?}");
    assert!(all.iter().any(|m| m.contains("offset 3000")), "{all:?}");
}

#[test]
fn kv409_invalid_cursors() {
    for (consumed, published) in [(16u64, 8u64), (0, 12), (0, 104_857_600)] {
        let c = released();
        poke(&c.m[1].path, 192, &consumed.to_le_bytes());
        poke(&c.m[1].path, 128, &published.to_le_bytes());
        let (code, v) = c.run(&[]);
        let p = rejects(&v, code, &c.m[1].name, "KV409");
        assert!(p["journal"]["pending"].is_null(), "{p:#}");
    }
}

#[test]
fn kv410_a_pending_frame_kvcr_refuses() {
    // Type 2, a key longer than the frame, non-zero padding.
    for (off, bytes) in [
        (2u64, vec![2u8, 0]),
        (4, vec![0xff, 0]),
        (4096 + 144 + 45, vec![1]),
    ] {
        let c = leaked();
        let at = if off < 4096 { 4096 + 144 + off } else { off };
        poke(&c.m[1].path, at, &bytes);
        let (code, v) = c.run(&[]);
        rejects(&v, code, &c.m[1].name, "KV410");
    }
}

#[test]
fn kv411_a_pending_payload_that_is_no_record() {
    let c = leaked();
    // The first pending frame: 6-byte header, 32-byte key, then the payload.
    poke(&c.m[1].path, 4096 + 144 + 38, &[0xc1]);
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[1].name, "KV411");
    // A label naming no pool of --pool-layouts.
    let c = leaked();
    let (code, v) = c.run(&["--pool-layouts", "kv:4096"]);
    let p = rejects(&v, code, &c.m[1].name, "KV411");
    assert!(finding(&p, "KV411")["message"]
        .as_str()
        .unwrap()
        .contains("--pool-layouts"));
}

#[test]
fn kv413_a_torn_handback_region() {
    let c = released();
    poke(&c.m[0].path, kit::MAPPING + 32, &0u64.to_le_bytes());
    let (code, v) = c.run(&[]);
    let p = pool(&v, &c.m[0].name);
    notices(&v, code, p, "KV413");
    assert_eq!(p["handback"]["state"], "torn");
    // A length past the file, and a region under 40 bytes.
    poke(&c.m[0].path, kit::MAPPING + 32, &9999u64.to_le_bytes());
    let (code, v) = c.run(&[]);
    notices(&v, code, pool(&v, &c.m[0].name), "KV413");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&c.m[0].path)
        .unwrap();
    f.set_len(kit::MAPPING + 20).unwrap();
    let (code, v) = c.run(&[]);
    let p = pool(&v, &c.m[0].name);
    notices(&v, code, p, "KV413");
    assert!(finding(p, "KV413")["message"]
        .as_str()
        .unwrap()
        .contains("truncated"));
}

#[test]
fn kv414_a_digest_under_other_terms_names_the_terms() {
    let c = released();
    let (code, v) = c.run(&["--compatibility-digest", "abd"]);
    let p = rejects(&v, code, &c.m[0].name, "KV414");
    let msg = finding(&p, "KV414")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("\"abd\"")
            && msg.contains("wrong option")
            && msg.contains("the identity given"),
        "{msg}"
    );
    assert_eq!(p["handback"]["state"], "digest-mismatch");
    // A wrong block size gives the same.
    let (code, v) = c.run(&["--pool-layouts", ":8192"]);
    assert_eq!(code, 1);
    assert!(codes(pool(&v, &c.m[0].name)).contains(&"KV414".to_string()));
}

#[test]
fn kv415_a_digest_that_cannot_be_checked() {
    let c = released();
    let dir = c.dir.to_str().unwrap();
    let (code, v) = pools(&[dir]);
    let p = pool(&v, &c.m[0].name);
    notices(&v, code, p, "KV415");
    assert_eq!(p["handback"]["state"], "digest-not-checked");
    let why = p["handback"]["not_checked_why"].as_str().unwrap();
    assert!(
        why.contains("--compatibility-digest") && why.contains("--pool-layouts"),
        "{why}"
    );
    // The mapping was inferred from the group (no --pool-sizes-gb).
    assert_eq!(p["mapping_given"], false);
}

#[test]
fn kv416_a_verified_region_with_a_malformed_frame() {
    let c = released();
    let mut body = frame(&[7; 32], &record(1));
    body[2] = 2; // type 2
    kit::write_region(&c.m[0], &body);
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[0].name, "KV416");
    let c = released();
    kit::write_region(&c.m[0], &frame(&[7; 32], &[0x93, 0xc0, 0xc0, 0xfe]));
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[0].name, "KV416");
}

#[test]
fn kv417_slots_kvcr_would_refuse() {
    // Out of range: the pool has 26 slots.
    let c = released();
    kit::write_region(&c.m[0], &frame(&[7; 32], &record(26)));
    let (code, v) = c.run(&[]);
    let p = rejects(&v, code, &c.m[0].name, "KV417");
    assert_eq!(p["handback"]["state"], "complete");
    // One slot named by two keys.
    let c = released();
    let mut body = frame(&[7; 32], &record(3));
    body.extend(frame(&[8; 32], &record(3)));
    kit::write_region(&c.m[0], &body);
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[0].name, "KV417");
    // A G3 slot with no G3 configured.
    let c = released();
    kit::write_region(
        &c.m[0],
        &frame(&[7; 32], &[0x93, 0x91, 0x92, 0xa0, 0, 5, 0xff]),
    );
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[0].name, "KV417");
    // The same slot in range twice in the pending frames (last write per key).
    let c = leaked();
    let mut ring = frame(&[1; 32], &record(2));
    ring.resize(48, 0);
    let mut second = frame(&[2; 32], &record(2));
    second.resize(48, 0);
    ring.extend(second);
    poke(&c.m[1].path, 4096 + 336, &ring);
    poke(&c.m[1].path, 128, &(336u64 + 96).to_le_bytes());
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[1].name, "KV417");
}

#[test]
fn kv418_bytes_past_the_region() {
    let c = released();
    let len = std::fs::metadata(&c.m[0].path).unwrap().len();
    poke(&c.m[0].path, len, b"extra");
    let (code, v) = c.run(&[]);
    let p = pool(&v, &c.m[0].name);
    notices(&v, code, p, "KV418");
    assert_eq!(p["handback"]["state"], "complete");
    assert_eq!(p["handback"]["trailing_bytes"], 5);
}

#[test]
fn kv422_a_missing_index_offline_is_a_notice() {
    let c = released();
    std::fs::remove_file(&c.m[0].path).unwrap();
    let (code, v) = c.run(&[]);
    notices(&v, code, &v["groups"][0], "KV422");
    let c = released();
    let (code, v) = c.run(&["--guard-count", "3"]);
    let g = &v["groups"][0];
    notices(&v, code, g, "KV422");
    assert!(finding(g, "KV422")["message"]
        .as_str()
        .unwrap()
        .contains("pool_2"));
}

#[test]
fn kv423_mapping_sizes_differ() {
    let c = released();
    let other = c.dir.join(format!("kvcr-pool_2-{GEN}"));
    let f = std::fs::File::create(&other).unwrap();
    f.set_len(kit::MAPPING + 4096).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, v) = pools(&[c.dir.to_str().unwrap()]);
    notices(&v, code, &v["groups"][0], "KV423");
}

#[test]
fn kv424_two_generations_of_one_pool() {
    let c = released();
    std::fs::copy(&c.m[1].path, c.dir.join(format!("kvcr-pool_1-{GEN}"))).unwrap();
    let (code, v) = c.run(&[]);
    let g = &v["groups"][0];
    notices(&v, code, g, "KV424");
    let msg = finding(g, "KV424")["message"].as_str().unwrap();
    assert!(
        msg.contains(GEN) && msg.contains(c.m[1].generation()),
        "{msg}"
    );
}

#[test]
fn kv425_and_kv426_g3_files() {
    let c = released();
    let g3 = c.dir.parent().unwrap().join("g3");
    std::fs::create_dir(&g3).unwrap();
    let a = g3.join("a");
    let b = g3.join("b");
    // A record names G3 slot 5: with two files, file 1 ("b"), absent.
    kit::write_region(
        &c.m[0],
        &frame(&[7; 32], &[0x93, 0x91, 0x92, 0xa0, 0, 5, 0xff]),
    );
    std::fs::write(&a, vec![0u8; 4096]).unwrap();
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o644)).unwrap();
    let paths = format!("{},{}", a.display(), b.display());
    let (code, v) = c.run(&["--g3-paths", &paths, "--capacity-bytes-per-file", "16384"]);
    assert_eq!(code, 1, "{v:#}");
    let ga = &v["g3"][0];
    let gb = &v["g3"][1];
    assert_eq!(gb["verdict"], "rejected");
    assert_eq!(finding(gb, "KV425")["severity"], "reject");
    assert!(!b.exists(), "kvcr created a missing G3 file");
    // "a": 4096 bytes, neither 0 nor the capacity; mode 0644.
    assert_eq!(finding(ga, "KV425")["severity"], "reject");
    assert_eq!(finding(ga, "KV426")["severity"], "notice");
    assert!(v["cause"].as_str().unwrap().contains("KV425"), "{v:#}");
    // A directory where a G3 file should be.
    let (code, v) = c.run(&["--g3-paths", g3.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(v["g3"][0]["state"]["kind"], "not-regular");
}

#[test]
fn kv427_a_pool_that_changes_between_the_reads() {
    let c = released();
    let path = c.m[1].path.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    // A producer that keeps publishing empty cursor steps (published moves).
    let writer = std::thread::spawn(move || {
        let mut p = 0u64;
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            p += 8;
            poke(&path, 192, &p.to_le_bytes());
            poke(&path, 128, &p.to_le_bytes());
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let out = crate::util::kvcr()
        .args([
            "pools",
            c.dir.to_str().unwrap(),
            "--format",
            "json",
            "--interval-ms",
            "200",
        ])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = pool(&v, &c.m[1].name);
    notices(&v, out.status.code().unwrap(), p, "KV427");
    assert!(!p["changed"].as_array().unwrap().is_empty());
}

#[test]
fn kv428_a_journal_size_kvcr_does_not_accept() {
    let c = released();
    let (code, v) = c.run(&["--journal-bytes", "5000"]);
    rejects(&v, code, &c.m[1].name, "KV428");
    // A file shorter than the journal, with no geometry given.
    let c = released();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&c.m[1].path)
        .unwrap();
    f.set_len(8192).unwrap();
    let (code, v) = pools(&[c.dir.to_str().unwrap()]);
    rejects(&v, code, &c.m[1].name, "KV428");
}

#[test]
fn every_code_of_the_table_has_a_test_here_or_in_live() {
    let here = include_str!("mutations.rs").to_string() + include_str!("live.rs");
    let doc = std::fs::read_to_string(crate::util::repo().join("docs/format.md")).unwrap();
    let sec = doc.split("### §16.6").nth(1).unwrap();
    for l in sec.lines().filter(|l| l.starts_with("| KV4")) {
        let code = &l[2..7];
        assert!(here.contains(&format!("\"{code}\"")), "{code} has no test");
    }
}

#[test]
fn kv429_a_symlinked_pool_directory_is_followed_and_said() {
    let c = released();
    let link = c.dir.parent().unwrap().join("link");
    std::os::unix::fs::symlink(&c.dir, &link).unwrap();
    let id = c.m[0].identity_arg();
    let mut a = vec![link.to_str().unwrap(), "--identity", &id];
    a.extend(TERMS);
    let (code, v) = pools(&a);
    let g = &v["groups"][0];
    notices(&v, code, g, "KV429");
    assert_eq!(g["indices"], serde_json::json!([0, 1]));
    // A symlink to a pool file is refused: KVCR never follows a pool name.
    let flink = c.dir.parent().unwrap().join(&c.m[0].name);
    std::os::unix::fs::symlink(&c.m[0].path, &flink).unwrap();
    let out = crate::util::kvcr()
        .args(["pools", flink.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn kv425_a_g3_path_named_twice() {
    let c = released();
    let g3 = c.dir.parent().unwrap().join("g3");
    std::fs::write(&g3, b"").unwrap();
    std::fs::set_permissions(&g3, std::fs::Permissions::from_mode(0o600)).unwrap();
    let twice = format!("{},{}", g3.display(), g3.display());
    let (code, v) = c.run(&["--g3-paths", &twice]);
    assert_eq!(code, 1, "{v:#}");
    assert!(codes(&v["g3"][0]).is_empty());
    assert_eq!(finding(&v["g3"][1], "KV425")["severity"], "reject");
}

#[test]
fn pending_frames_that_wrap_the_ring_are_read_across_its_end() {
    const C: u64 = kit::JOURNAL - 4096;
    let mut f = frame(&[9; 32], &record(4));
    f.resize(48, 0);
    let place = |c: &Case, f: &[u8]| {
        // consumed 24 bytes before the ring's end: the frame wraps.
        let consumed = 3 * C - 24;
        poke(&c.m[1].path, kit::JOURNAL - 24, &f[..24]);
        poke(&c.m[1].path, 4096, &f[24..]);
        poke(&c.m[1].path, 192, &consumed.to_le_bytes());
        poke(&c.m[1].path, 128, &(consumed + 48).to_le_bytes());
    };
    let c = released();
    place(&c, &f);
    let (code, v) = c.run(&[]);
    assert_eq!(code, 0, "{v:#}");
    let p = pool(&v, &c.m[1].name);
    assert_eq!(p["journal"]["pending"]["frames"], 1, "{p:#}");
    assert!(p["journal"]["pending"]["frame_error"].is_null());
    // The same frame with non-zero padding past the wrap is refused.
    let c = released();
    let mut bad = f.clone();
    bad[47] = 1;
    place(&c, &bad);
    let (code, v) = c.run(&[]);
    rejects(&v, code, &c.m[1].name, "KV410");
}
