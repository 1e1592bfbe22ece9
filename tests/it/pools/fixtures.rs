//! The snapshots KVCR 0.1.1 wrote, read as they are.

use super::kit::{self, pool, pools, snapshot, TERMS};

#[test]
fn a_released_pool_has_a_handback_region_whose_digest_verifies() {
    let d = tempfile::tempdir().unwrap();
    let m = snapshot("released-then-service-killed", &d.path().join("pd"));
    let dir = d.path().join("pd");
    let id = m[0].identity_arg();
    let mut args = vec![dir.to_str().unwrap(), "--identity", &id];
    args.extend(TERMS);
    let (code, v) = pools(&args);
    assert_eq!(code, 0, "{v:#}");
    let p = pool(&v, &m[0].name);
    assert_eq!(p["verdict"], "ok");
    assert_eq!(p["pool"], "pool_0");
    assert_eq!(p["generation"], m[0].generation());
    assert_eq!(p["handback"]["state"], "complete", "{p:#}");
    assert_eq!(p["handback"]["frames"], 5);
    assert_eq!(p["handback"]["length"], 225);
    assert_eq!(p["journal"]["published"], 240);
    assert_eq!(p["journal"]["consumed"], 240);
    assert_eq!(p["journal"]["pending"]["frames"], 0);
    assert!(
        p["cause"].as_str().unwrap().contains("digest verified"),
        "{p:#}"
    );
    assert_eq!(p["liveness"]["state"], "not-checked");
    let g = &v["groups"][0];
    assert_eq!(g["verdict"], "ok");
    assert_eq!(g["indices"], serde_json::json!([0, 1]));
    assert!(kit::codes(g).is_empty(), "{g:#}");
    // Without the original identity the digest cannot match: a copy.
    let mut args = vec![dir.to_str().unwrap()];
    args.extend(TERMS);
    let (code, v) = pools(&args);
    assert_eq!(code, 1);
    let f = kit::finding(pool(&v, &m[0].name), "KV414");
    assert!(
        f["message"].as_str().unwrap().contains("this file's own"),
        "{f:#}"
    );
}

#[test]
fn a_primary_publishing_after_the_service_died_leaves_pending_frames() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("service-killed-primary-publishing", &dir);
    let mut args = vec![dir.to_str().unwrap()];
    args.extend(TERMS);
    let (code, v) = pools(&args);
    assert_eq!(code, 0, "{v:#}");
    let p = pool(&v, &m[1].name);
    let j = &p["journal"];
    assert_eq!(
        (j["consumed"].as_u64(), j["published"].as_u64()),
        (Some(144), Some(336))
    );
    assert_eq!(j["pending"]["frames"], 4);
    assert_eq!(j["pending"]["bytes"], 192);
    assert_eq!(j["pending"]["keys"], 4);
    assert!(j["pending"]["note"]
        .as_str()
        .unwrap()
        .contains("never the pool's content"));
    assert_eq!(p["handback"]["state"], "absent");
}

#[test]
fn a_clean_stop_leaves_an_empty_directory() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    assert!(snapshot("clean-stop", &dir).is_empty());
    let (code, v) = pools(&[dir.to_str().unwrap(), "--guard-count", "2"]);
    assert_eq!(code, 0);
    assert!(v["cause"].as_str().unwrap().starts_with("empty"), "{v:#}");
    assert_eq!(v["groups"][0]["verdict"], "ok");
    assert!(kit::codes(&v["groups"][0]).is_empty());
}

#[test]
fn no_path_says_kvcr_has_no_default_and_names_its_documented_one() {
    let out = crate::util::kvcr().arg("pools").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("no default pool directory") && e.contains("/dev/shm/kvcr"),
        "{e}"
    );
}

#[test]
fn table_and_prometheus_say_the_same() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    let out = crate::util::kvcr()
        .args(["pools", dir.to_str().unwrap(), "--interval-ms", "0"])
        .args(TERMS)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("KV414") && t.contains(&m[0].name), "{t}");
    let out = crate::util::kvcr()
        .args(["pools", dir.to_str().unwrap(), "--interval-ms", "0"])
        .args(["--format", "prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let t = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<String> = t.lines().map(String::from).collect();
    prometheus_parse::Scrape::parse(lines.into_iter().map(Ok)).unwrap();
    assert!(t.contains("kvcr_pools_exit_status 0"), "{t}");
    assert!(t.contains("kvcr_pool_rejected{"), "{t}");
}

#[test]
fn the_library_call_gives_the_commands_document() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("pd");
    let m = snapshot("released-then-service-killed", &dir);
    let o = kvcr_audit::api::PoolsOptions {
        pool_sizes_gb: Some("0.0001".into()),
        pool_layouts: Some(":4096".into()),
        compatibility_digest: Some("abc".into()),
        identity: Some(m[0].identity),
        interval_ms: Some(0),
        ..Default::default()
    };
    let doc = kvcr_audit::api::pools(std::slice::from_ref(&dir), &o).unwrap();
    assert_eq!(doc.exit_status(), 0);
    let mut lib: serde_json::Value = serde_json::from_str(doc.as_json()).unwrap();
    kit::check_schema(&lib);
    let id = m[0].identity_arg();
    let mut args = vec![dir.to_str().unwrap(), "--identity", &id];
    args.extend(TERMS);
    let (_, mut cli) = pools(&args);
    for v in [&mut lib, &mut cli] {
        v["generated_unix_ms"] = 0.into();
    }
    assert_eq!(lib, cli);
    // What KVCR would refuse is refused here too, as a usage error.
    let bad = kvcr_audit::api::PoolsOptions {
        pool_layouts: Some("a:1,a:1".into()),
        ..Default::default()
    };
    let e = kvcr_audit::api::pools(std::slice::from_ref(&dir), &bad).unwrap_err();
    assert!(e.to_string().contains("--pool-layouts"), "{e}");
    assert!(kvcr_audit::api::pools(&[], &o).is_err());
}
