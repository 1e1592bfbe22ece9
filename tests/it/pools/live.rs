//! `--live`: who holds each pool, with helper processes holding the locks
//! and the listening socket KVCR's service and primaries held.

use super::kit::{self, finding, hold, pool, pools, snapshot};
use serde_json::Value;

/// Whether this process runs in the initial PID namespace: only there can
/// `/proc/locks` show every holder (elsewhere kvcr says "not checked").
fn initial_ns() -> bool {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .is_some_and(|v| v.split_whitespace().count() == 1)
}

fn live(dir: &std::path::Path, extra: &[&str]) -> (i32, Value) {
    let mut a = vec![dir.to_str().unwrap(), "--live"];
    a.extend(extra);
    pools(&a)
}

#[test]
fn held_by_the_listening_service_is_live() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    let sock = d.path().join("s.sock");
    let svc = hold(&[&m[0].path, &m[1].path], false, Some(&sock));
    let (code, v) = live(&dir, &["--socket-path", sock.to_str().unwrap()]);
    assert_eq!(code, 0, "{v:#}");
    for x in &m {
        let p = pool(&v, &x.name);
        assert_eq!(p["liveness"]["state"], "live", "{p:#}");
        assert_eq!(p["liveness"]["service_pid"], svc.pid);
        assert!(p["kvcr_would"].as_str().unwrap().contains("next claim"));
    }
    // Without --socket-path any listener of a holder is the service.
    let (_, v) = live(&dir, &[]);
    assert_eq!(pool(&v, &m[0].name)["liveness"]["state"], "live");
}

#[test]
fn held_only_by_a_primary_is_leaked_and_unheld_is_an_orphan() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("service-killed-primary-publishing", &dir);
    let sock = d.path().join("s.sock");
    let _svc = hold(&[], false, Some(&sock));
    let primary = hold(&[&m[1].path], false, None);
    let (code, v) = live(&dir, &["--socket-path", sock.to_str().unwrap()]);
    assert_eq!(code, 0, "{v:#}");
    let leaked = pool(&v, &m[1].name);
    let orphan = pool(&v, &m[0].name);
    if !initial_ns() {
        assert_eq!(orphan["liveness"]["state"], "not-checked");
        finding(orphan, "KV421");
        return;
    }
    assert_eq!(leaked["liveness"]["state"], "leaked", "{leaked:#}");
    assert_eq!(leaked["liveness"]["holder_pids"][0], primary.pid);
    assert_eq!(finding(leaked, "KV419")["severity"], "notice");
    // Its pending frames will never be consumed.
    assert_eq!(finding(leaked, "KV412")["severity"], "notice");
    assert_eq!(orphan["liveness"]["state"], "orphan");
    let f = finding(orphan, "KV420");
    assert!(
        f["message"].as_str().unwrap().contains("104964096 bytes"),
        "{f:#}"
    );
    assert!(orphan["kvcr_would"].as_str().unwrap().contains("delete it"));
}

#[test]
fn an_orphan_with_pending_frames() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("service-killed-primary-publishing", &dir);
    let (code, v) = live(&dir, &[]);
    assert_eq!(code, 0);
    let p = pool(&v, &m[1].name);
    if initial_ns() {
        assert_eq!(p["liveness"]["state"], "orphan");
        finding(p, "KV420");
        finding(p, "KV412");
    } else {
        finding(p, "KV421");
    }
}

#[test]
fn held_with_no_listener_on_the_socket_path_is_not_identified() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    let _h = hold(&[&m[0].path], false, None);
    let nowhere = d.path().join("nobody.sock");
    let (code, v) = live(&dir, &["--socket-path", nowhere.to_str().unwrap()]);
    assert_eq!(code, 0);
    let p = pool(&v, &m[0].name);
    assert_eq!(p["liveness"]["state"], "held-no-service", "{p:#}");
    assert_eq!(finding(p, "KV421")["severity"], "notice");
}

#[test]
fn a_missing_index_under_a_live_service_rejects() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    std::fs::remove_file(&m[0].path).unwrap();
    let sock = d.path().join("s.sock");
    let _svc = hold(&[&m[1].path], false, Some(&sock));
    let (code, v) = live(&dir, &["--socket-path", sock.to_str().unwrap()]);
    let g = &v["groups"][0];
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(g["verdict"], "rejected");
    assert_eq!(finding(g, "KV422")["severity"], "reject");
    assert!(v["cause"].as_str().unwrap().contains("KV422"));
}

#[test]
fn a_g3_file_locked_shared_by_someone_is_named() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    snapshot("released-then-service-killed", &dir);
    let g3 = d.path().join("g3");
    std::fs::write(&g3, b"").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&g3, std::fs::Permissions::from_mode(0o600)).unwrap();
    let h = hold(&[&g3], false, None);
    let (code, v) = live(&dir, &["--g3-paths", g3.to_str().unwrap()]);
    assert_eq!(code, 0);
    let f = finding(&v["g3"][0], "KV426");
    assert!(
        f["message"].as_str().unwrap().contains(&h.pid.to_string()),
        "{f:#}"
    );
    drop(h);
    // An exclusive lock (a primary's) is normal.
    let _p = hold(&[&g3], true, None);
    let (_, v) = live(&dir, &["--g3-paths", g3.to_str().unwrap()]);
    assert!(kit::codes(&v["g3"][0]).is_empty(), "{v:#}");
}
