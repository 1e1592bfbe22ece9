//! kvcr never writes inside the inventory (docs/format.md §1, §7, §8.8,
//! §9.5; issue #30 §1), whichever way the inventory root was chosen and
//! whichever path names it: every output path (`--textfile`, the import log
//! `$KVCR_IMPORT_LOG`, `--ready-file`) goes through one check
//! (`io::output::OutputFile`) that knows the effective root, the default
//! `/var/lib/kvcr/inventory` included.
//!
//! The default root is tested for real, not through a hook: in a private
//! mount namespace (`unshare -m`, or `unshare -Urm` for a user that is not
//! root) a tmpfs over `/var/lib` holds an inventory at
//! `/var/lib/kvcr/inventory`, seen by that one shell and the kvcr it runs
//! and by nothing else on the machine, and gone when they exit. Each case
//! runs kvcr with no ROOT and no `$KVCR_INVENTORY`, through the aliases an
//! attacker (or a confused operator) would use: relative paths, `..`, a
//! symlink, a bind mount of the inventory or of one of its directories, a
//! directory that does not exist yet, and a run that fails (a bad profile)
//! and would write its `kvcr_audit_success 0` file.

use crate::util::fleet::private;
use crate::util::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use crate::util::{bin, is_root, test_env};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// `unshare` arguments that give a private mount namespace here, or `None`
/// (with the reason on stderr) where the sandbox forbids one; under
/// `KVCR_TEST_REQUIRE` (.ci/run) a missing namespace fails.
fn namespace() -> Option<Vec<&'static str>> {
    let args: Vec<&'static str> = if is_root() {
        vec!["-m", "--propagation", "private"]
    } else {
        vec!["-Urm", "--propagation", "private"]
    };
    let ok = std::process::Command::new("unshare")
        .args(&args)
        .args(["sh", "-c", "mount -t tmpfs kvcr-probe /mnt"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::util::missing("needs a private mount namespace (unshare -m / -Urm)");
        return None;
    }
    Some(args)
}

/// A 4-rank group with private modes (copied into the default root), node
/// facts that match it and its profile, in `dir`.
fn world(dir: &Path) {
    let d = Desc::new("llama3-70b-a", 0, 4, 1);
    put_group(&dir.join("inv/g0"), "", &d);
    private(&dir.join("inv"));
    let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
    std::fs::write(
        dir.join("facts.json"),
        json!({"boot_id": BOOT_ID, "hostname": HOSTNAME, "processes": {"4242": 123456},
               "processes_unreadable": null,
               "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}})
        .to_string(),
    )
    .unwrap();
    testkit::put_profile(&dir.join("profile.json"), &d);
    std::fs::create_dir(dir.join("ok")).unwrap();
}

/// The cases: (name, shell command run with no ROOT, the exit it must
/// give). `$K` is kvcr, `$T` the test's directory outside the namespace's
/// tmpfs, `$INV` the default root. `imp` is `kvcr import` of the default
/// root with the sim backend, the node facts and the profile.
const CASES: &[(&str, &str, i32)] = &[
    // Controls: the namespace works and the default root audits clean, so
    // every refusal below is the check's.
    (
        "control-textfile",
        "$K audit -q --textfile $T/ok/kvcr.prom",
        0,
    ),
    (
        "control-failure-textfile",
        "$K audit -q --profile $T/missing.json --textfile $T/ok/failed.prom",
        2,
    ),
    (
        "control-import",
        "KVCR_IMPORT_LOG=$T/ok/import.jsonl imp",
        0,
    ),
    // --textfile inside the default root, by every name.
    ("textfile", "$K audit -q --textfile $INV/g0/kvcr.prom", 2),
    ("textfile-root", "$K audit -q --textfile $INV/kvcr.prom", 2),
    (
        "textfile-bad-profile",
        "$K audit -q --profile $T/missing.json --textfile $INV/failed.prom",
        2,
    ),
    (
        "textfile-bad-profile-env",
        "KVCR_PROFILE=$T/missing.json $K audit -q --textfile $INV/g0/failed.prom",
        2,
    ),
    (
        "textfile-relative",
        "cd $INV/g0 && $K audit -q --textfile kvcr.prom",
        2,
    ),
    (
        "textfile-relative-up",
        "cd $INV/g0 && $K audit -q --textfile ../kvcr.prom",
        2,
    ),
    (
        "textfile-dotdot",
        "$K audit -q --textfile $T/../../var/lib/kvcr/inventory/x.prom",
        2,
    ),
    (
        "textfile-dotdot-inside",
        "$K audit -q --textfile $INV/g0/../x.prom",
        2,
    ),
    (
        "textfile-new-dir",
        "$K audit -q --textfile $INV/new/x.prom",
        2,
    ),
    (
        "textfile-symlink",
        "$K audit -q --textfile $T/alias/x.prom",
        2,
    ),
    (
        "textfile-symlink-sub",
        "$K audit -q --textfile $T/alias/g0/x.prom",
        2,
    ),
    ("textfile-bind", "$K audit -q --textfile $T/bind/x.prom", 2),
    (
        "textfile-bind-sub",
        "$K audit -q --textfile $T/bind-g0/x.prom",
        2,
    ),
    // `..` from the top of a bind mount leaves the mount (the kernel's
    // rule): $T/x.prom is outside, and written.
    (
        "control-bind-dotdot",
        "$K audit -q --textfile $T/bind-g0/../x.prom",
        0,
    ),
    // The import log and the ready file, inside the default root.
    ("log", "KVCR_IMPORT_LOG=$INV/import.jsonl imp", 2),
    (
        "log-new-dir",
        "KVCR_IMPORT_LOG=$INV/logs/kvcr/import.jsonl imp",
        2,
    ),
    ("log-bind", "KVCR_IMPORT_LOG=$T/bind/import.jsonl imp", 2),
    (
        "log-relative",
        "cd $INV/g0 && KVCR_IMPORT_LOG=import.jsonl imp",
        2,
    ),
    // The test backend's event log is an output like any other.
    (
        "sim-log",
        "KVCR_IMPORT_LOG=$T/ok/sim.jsonl KVCR_IMPORT_BACKEND=sim:log=$INV/sim.log imp",
        2,
    ),
    (
        "ready-file",
        "KVCR_IMPORT_LOG=$T/ok/hold.jsonl imp --hold --ready-file $INV/ready.json",
        2,
    ),
    (
        "ready-file-symlink",
        "KVCR_IMPORT_LOG=$T/ok/hold.jsonl imp --hold --ready-file $T/alias/g0/ready.json",
        2,
    ),
];

#[test]
fn nothing_is_written_inside_the_default_root_by_any_name() {
    let Some(unshare) = namespace() else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    world(d);
    let mut script = String::from(
        "set -u\n\
         mount -t tmpfs -o mode=0755 kvcr-test /var/lib || exit 97\n\
         mkdir -p /var/lib/kvcr && cp -a \"$T/inv\" \"$INV\" || exit 98\n\
         ln -s \"$INV\" \"$T/alias\"\n\
         mkdir \"$T/bind\" \"$T/bind-g0\"\n\
         mount --bind \"$INV\" \"$T/bind\" && mount --bind \"$INV/g0\" \"$T/bind-g0\" || exit 99\n\
         imp() { $K import --format json \"$@\"; }\n\
         snap() { (cd /var/lib/kvcr && find . -print0 | sort -z | xargs -0 ls -ld --time-style=+ \
            && find . -type f -print0 | sort -z | xargs -0 sha256sum); }\n\
         snap > \"$T/before\"\n",
    );
    for (name, cmd, _) in CASES {
        script.push_str(&format!(
            "( {cmd} ) >\"$T/{name}.out\" 2>\"$T/{name}.err\"; echo \"{name} $?\"\n"
        ));
    }
    script.push_str("snap > \"$T/after\"\n");
    let out = test_env(&mut std::process::Command::new("unshare"))
        .args(&unshare)
        .args(["sh", "-c", &script])
        .env("K", bin())
        .env("T", d)
        .env("INV", "/var/lib/kvcr/inventory")
        .env("KVCR_NODE_FACTS", d.join("facts.json"))
        .env("KVCR_PROFILE", d.join("profile.json"))
        .env("KVCR_IMPORT_BACKEND", "sim")
        .env("KVCR_THREADS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the namespace script failed ({:?}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let got: BTreeMap<&str, i32> = stdout
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(n, rc)| (n, rc.parse().unwrap()))
        .collect();
    let read = |name: &str| std::fs::read_to_string(d.join(name)).unwrap_or_default();
    let mut wrong = Vec::new();
    for (name, cmd, want) in CASES {
        let err = read(&format!("{name}.err"));
        let refused = *want == 2 && !name.starts_with("control");
        if got.get(name) != Some(want) || (refused && !err.contains("inside the inventory")) {
            wrong.push(format!(
                "{name}: `{cmd}` exited {:?}, want {want}: {err}",
                got.get(name)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The controls wrote where they were told; the refusals nowhere.
    assert!(read("ok/kvcr.prom").contains("kvcr_audit_success 1"));
    assert!(read("ok/failed.prom").contains("kvcr_audit_success 0"));
    assert!(read("ok/import.jsonl").contains("\"result\":\"imported\""));
    assert!(read("x.prom").contains("kvcr_audit_success 1"));
    assert!(!d.join("ok/hold.jsonl").exists(), "a refused hold logged");
    let (before, after) = (read("before"), read("after"));
    assert!(before.contains("rank-3.json"), "{before}");
    assert_eq!(
        before, after,
        "something was written inside the default root"
    );
}

/// The same check whichever way the root was chosen: ROOT, or
/// `$KVCR_INVENTORY` with no ROOT; a bad profile's failure text is refused
/// there too, and written outside.
#[test]
fn the_root_from_the_argument_or_the_environment_is_the_same_check() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    world(d);
    let inv = d.join("inv");
    let before = testkit::snapshot(&inv);
    for (how, env_root) in [("ROOT", false), ("$KVCR_INVENTORY", true)] {
        for (profile, textfile) in [
            (None, inv.join("g0/x.prom")),
            (Some(d.join("missing.json")), inv.join("failed.prom")),
            (None, d.join("ok/../inv/y.prom")),
        ] {
            let mut c = crate::util::kvcr();
            c.args(["audit", "-q", "--textfile"]).arg(&textfile);
            if let Some(p) = &profile {
                c.arg("--profile").arg(p);
            }
            if env_root {
                c.env("KVCR_INVENTORY", &inv);
            } else {
                c.arg(&inv);
            }
            let out = c.output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{how} {}: {err}",
                textfile.display()
            );
            assert!(err.contains("inside the inventory"), "{how}: {err}");
            assert_eq!(testkit::snapshot(&inv), before, "{how}: written inside");
        }
        let ok = d.join("ok/failed.prom");
        let mut c = crate::util::kvcr();
        c.args(["audit", "-q", "--profile"])
            .arg(d.join("missing.json"))
            .arg("--textfile")
            .arg(&ok);
        if env_root {
            c.env("KVCR_INVENTORY", &inv);
        } else {
            c.arg(&inv);
        }
        assert_eq!(c.output().unwrap().status.code(), Some(2));
        assert!(std::fs::read_to_string(&ok)
            .unwrap()
            .contains("kvcr_audit_success 0"));
        std::fs::remove_file(&ok).unwrap();
    }
}
