//! Issue #31 §2: a root audit of a producer that runs as its own user. The
//! operator declares the producer's user (`--producer-user USER`,
//! `$KVCR_PRODUCER_USER`; docs/format.md §2.4): its files are trusted like
//! root's; any other undeclared owner stays KV003, and the headline's action
//! names the declaration, not a rewrite of files the owner already owns.
//! Giving files to another uid needs root (CI runs as root); those tests
//! say so and return elsewhere.

use crate::util::fleet::private;
use crate::util::testkit::{put_group, Desc};
use crate::util::{audit_json, kvcr};
use serde_json::Value;
use std::path::Path;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A TP=4 group under `dir/llama`, 0700/0600, every entry owned by `uid`.
fn group_owned_by(dir: &Path, uid: u32) {
    put_group(dir, "llama", &Desc::new("llama3-70b-a", 0, 4, 1));
    private(dir);
    for e in walkdir::WalkDir::new(dir) {
        std::os::unix::fs::chown(e.unwrap().path(), Some(uid), Some(uid)).unwrap();
    }
}

fn kv003_paths(report: &Value) -> Vec<String> {
    crate::util::findings(report)
        .into_iter()
        .filter(|(c, _, _)| c == "KV003")
        .map(|(_, _, p)| p)
        .collect()
}

#[test]
fn a_declared_producer_user_is_trusted_and_any_other_owner_is_kv003() {
    if !is_root() {
        crate::util::missing("needs root to give files to another uid");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    group_owned_by(&inv, 4242);

    // Not declared: every descriptor and the root are KV003; the action is
    // the declaration, with the uid found.
    let (code, r) = audit_json(&inv, &[]);
    assert_eq!(code, 1);
    let g = &r["groups"][0];
    assert_eq!(g["verdict"], "reject");
    assert_eq!(g["cause_code"], "KV003");
    let paths = kv003_paths(&r);
    assert!(paths.contains(&".".to_string()), "{paths:?}");
    assert!(
        paths.contains(&"llama/rank-3.json".to_string()),
        "{paths:?}"
    );
    let action = g["action"].as_str().unwrap();
    assert_eq!(
        action,
        "if uid 4242 is the producer's user (its sidecar runs as uid 4242), declare it: \
         --producer-user 4242, or KVCR_PRODUCER_USER=4242 in /etc/default/kvcr for the packaged \
         units, then audit again; if it is not, someone else wrote into the inventory: do not \
         import; see `kvcr explain KV003`"
    );
    let f = &g["ranks"][0]["findings"][0];
    assert_eq!(f["expected"], "uid 0");
    assert_eq!(f["found"], "uid 4242");

    // Declared, by flag and by the environment: accepted, no KV003.
    for declared in [audit_json(&inv, &["--producer-user", "4242"]), {
        let out = kvcr()
            .args(["audit", "--format", "json"])
            .arg(&inv)
            .env("KVCR_PRODUCER_USER", "4242")
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            serde_json::from_slice(&out.stdout).unwrap(),
        )
    }] {
        let (code, r) = declared;
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["groups"][0]["verdict"], "accept");
        assert!(kv003_paths(&r).is_empty());
    }

    // Another user's file among the producer's: KV003 for that rank alone,
    // naming what is trusted; the action names that uid.
    std::os::unix::fs::chown(inv.join("llama/rank-2.json"), Some(4243), None).unwrap();
    let (code, r) = audit_json(&inv, &["--producer-user", "4242"]);
    assert_eq!(code, 1);
    assert_eq!(kv003_paths(&r), ["llama/rank-2.json"]);
    let rank2 = &r["groups"][0]["ranks"][2]["findings"][0];
    assert_eq!(
        rank2["message"],
        "descriptor is owned by uid 4243, neither root, the invoking user nor the declared \
         producer user (uid 4242)"
    );
    assert_eq!(rank2["expected"], "uid 0 or 4242");
    let action = r["groups"][0]["action"].as_str().unwrap();
    assert!(
        action.starts_with("if uid 4243 is the producer's user"),
        "{action}"
    );

    // Declaring another user trusts nothing here.
    let (code, r) = audit_json(&inv, &["--producer-user", "4244"]);
    assert_eq!(code, 1);
    assert!(kv003_paths(&r).contains(&"llama/rank-0.json".to_string()));
}

/// A user name is looked up once in this node's user database; the uid is
/// what is compared.
#[test]
fn a_producer_user_name_is_resolved_to_its_uid() {
    if !is_root() {
        crate::util::missing("needs root to give files to another uid");
        return;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let Some(uid) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&"nobody")).then(|| f[2].parse::<u32>().unwrap())
    }) else {
        crate::util::skip_fact("no user nobody in /etc/passwd");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let inv = t.path().join("inv");
    group_owned_by(&inv, uid);
    assert_eq!(audit_json(&inv, &[]).0, 1);
    let (code, r) = audit_json(&inv, &["--producer-user", "nobody"]);
    assert_eq!(code, 0, "{r}");
}

/// A declaration that names no user is exit 2 naming where it came from;
/// an empty variable (an EnvironmentFile's `KVCR_PRODUCER_USER=`) declares
/// none. No root needed: nothing is chowned.
#[test]
fn a_bad_producer_user_is_exit_2_naming_the_flag_or_the_variable() {
    let inv = crate::util::repo().join("fixtures/accept-tp4/inventory");
    let out = kvcr()
        .args(["audit", "-q", "--producer-user", "no-such-user-kvcr"])
        .arg(&inv)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--producer-user") && err.contains("no user named \"no-such-user-kvcr\""),
        "{err}"
    );
    let out = kvcr()
        .args(["audit", "-q"])
        .arg(&inv)
        .env("KVCR_PRODUCER_USER", "no-such-user-kvcr")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KVCR_PRODUCER_USER=\"no-such-user-kvcr\": no user named"),
        "{err}"
    );
    for cmd in [&["audit", "-q"][..], &["import", "--dry-run", "-q"][..]] {
        let out = kvcr()
            .args(cmd)
            .arg(&inv)
            .env("KVCR_PRODUCER_USER", "99999999999")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("out of range"));
    }
    let out = kvcr()
        .args(["audit", "-q"])
        .arg(&inv)
        .env("KVCR_PRODUCER_USER", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn explain_kv003_names_the_declaration() {
    let out = kvcr().args(["explain", "KV003"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("neither root, the invoking user nor the declared producer user"),
        "{text}"
    );
    assert!(
        text.contains("--producer-user USER, or KVCR_PRODUCER_USER in /etc/default/kvcr"),
        "{text}"
    );
}
