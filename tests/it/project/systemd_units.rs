//! The systemd units the package ships (issue #21 item 11): the sandbox
//! rates 3.0 or lower in `systemd-analyze security --offline=yes` without
//! taking away what `--live` needs, the hold unit runs a real hold (sim
//! backend) with the shipped defaults, and tmpfiles.d creates the ready
//! file's directory.

use crate::util::fleet::private;
use crate::util::testkit::{self, put_group, Desc, BOOT_ID, HOSTNAME};
use crate::util::{kvcr_std, repo, signal, wait_for};
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};

const AUDIT: &str = "packaging/systemd/kvcr-audit-textfile.service";
const HOLD: &str = "packaging/systemd/kvcr-hold.service";
const TMPFILES: &str = "packaging/tmpfiles.d/kvcr.conf";

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap()
}

/// `KEY=VALUE` settings of a unit (comments and sections left out), in order.
fn settings(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn values<'a>(s: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    s.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The overall exposure `systemd-analyze security --offline=yes` gives.
fn exposure(unit: &Path) -> f64 {
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(unit)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall exposure: {text}"));
    let after = line.rsplit(": ").next().unwrap();
    after.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_units_rate_3_or_lower_in_systemd_analyze_security() {
    if !have("systemd-analyze") {
        crate::util::missing("needs systemd-analyze (.ci/run installs systemd)");
        return;
    }
    for u in [AUDIT, HOLD] {
        let score = exposure(&repo().join(u));
        assert!(score <= 3.0, "{u}: exposure {score}, above 3.0");
    }
    // The same measure rates an unhardened oneshot high, so the pass above
    // means something.
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.service");
    std::fs::write(
        &bare,
        "[Service]\nType=oneshot\nExecStart=/usr/bin/kvcr audit\n",
    )
    .unwrap();
    assert!(exposure(&bare) > 9.0);
}

/// What `--live` reads must stay reachable inside the sandbox: every
/// process in /proc (owner and writer start times), /proc's non-process
/// files (boot id, /proc/driver/nvidia), the NVIDIA device nodes (libcuda),
/// the host's user ids (descriptor owners), and the output directory.
#[test]
fn the_sandbox_leaves_live_mode_what_it_reads() {
    for u in [AUDIT, HOLD] {
        let s = settings(&read(u));
        for (key, bad) in [
            ("ProtectProc", "invisible"),
            ("ProtectProc", "noaccess"),
            ("ProtectProc", "ptraceable"),
            ("ProcSubset", "pid"),
            ("PrivateDevices", "yes"),
            ("PrivateUsers", "yes"),
            ("InaccessiblePaths", "/proc"),
        ] {
            assert!(
                !values(&s, key).contains(&bad),
                "{u}: {key}={bad} hides what --live reads"
            );
        }
        let devices = values(&s, "DeviceAllow");
        for need in ["char-nvidia-frontend rw", "char-nvidia-uvm rw"] {
            assert!(devices.contains(&need), "{u}: no DeviceAllow={need}");
        }
        // kvcr's own syscalls for reading: not filtered away.
        let filters = values(&s, "SystemCallFilter");
        assert!(
            filters.contains(&"@system-service")
                || filters.iter().any(|f| f.starts_with("@system-service ")),
            "{u}: {filters:?}"
        );
        assert_eq!(values(&s, "RestrictAddressFamilies"), ["AF_UNIX"], "{u}");
    }
    // The audit writes the textfile where the shipped default puts it.
    let audit = settings(&read(AUDIT));
    let defaults = settings(&read("packaging/default/kvcr"));
    let textfile = values(&defaults, "KVCR_TEXTFILE")[0];
    let dir = Path::new(textfile).parent().unwrap().to_str().unwrap();
    assert!(
        values(&audit, "ReadWritePaths")
            .iter()
            .any(|p| p.trim_start_matches('-') == dir),
        "{dir} is not writable in {AUDIT}"
    );
    // The hold needs pidfd_getfd (posix_fd handles) and may take another
    // user's fd only with CAP_SYS_PTRACE.
    let hold = settings(&read(HOLD));
    assert!(values(&hold, "SystemCallFilter")
        .iter()
        .any(|f| f.split_whitespace().any(|w| w == "pidfd_getfd")));
    assert_eq!(values(&hold, "CapabilityBoundingSet"), ["CAP_SYS_PTRACE"]);
    // Two fds per posix_fd allocation: far more than the default 1024.
    let nofile: u64 = values(&hold, "LimitNOFILE")[0].parse().unwrap();
    assert!(nofile >= 65536, "{nofile}");
}

/// The ready file's directory is created by tmpfiles.d, writable by the
/// hold unit, and is the directory of its --ready-file.
#[test]
fn tmpfiles_creates_the_ready_file_directory_of_the_hold_unit() {
    let hold = settings(&read(HOLD));
    let exec = values(&hold, "ExecStart")[0];
    let words: Vec<&str> = exec.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "--ready-file").unwrap();
    let ready = Path::new(words[at + 1]);
    let dir = ready.parent().unwrap().to_str().unwrap();
    assert!(values(&hold, "ReadWritePaths").contains(&dir), "{dir}");
    let conf = read(TMPFILES);
    let entry: Vec<&str> = conf
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(entry[..5], ["d", dir, "0755", "root", "root"]);
    if !have("systemd-tmpfiles") {
        crate::util::missing("needs systemd-tmpfiles (.ci/run installs systemd)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let out = Command::new("systemd-tmpfiles")
        .arg(format!("--root={}", root.path().display()))
        .arg("--create")
        .arg(repo().join(TMPFILES))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(root.path().join(dir.trim_start_matches('/'))).unwrap();
    assert!(md.is_dir());
    assert_eq!(md.mode() & 0o7777, 0o755);
}

/// A node facts file (`KVCR_NODE_FACTS`) in `dir` describing the node the
/// test kit's TP=4 group was written on: its boot id, host, owner process
/// and GPUs.
fn this_node(dir: &Path) -> std::path::PathBuf {
    let gpus: Vec<String> = (0..4).map(|r| testkit::gpu(0, r)).collect();
    let facts = dir.join("facts.json");
    std::fs::write(
        &facts,
        json!({
            "boot_id": BOOT_ID, "hostname": HOSTNAME,
            "processes": {"4242": 123456}, "processes_unreadable": null,
            "gpus": {"visible": gpus, "on_node": gpus, "source": "test"}
        })
        .to_string(),
    )
    .unwrap();
    facts
}

/// The hold unit's command, word for word with the shipped defaults
/// (`$KVCR_HOLD_ARGS` from /etc/default/kvcr), on the simulated backend:
/// it imports, writes the ready file, and on `systemctl stop` (SIGTERM)
/// releases and exits 0, which the unit counts as success.
#[test]
fn the_hold_unit_holds_until_sigterm_with_the_shipped_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inv");
    let d = Desc::new("llama3-70b-a", 0, 4, 1);
    put_group(&inv, "", &d);
    private(&inv);
    let facts = this_node(dir.path());
    let profile = dir.path().join("profile.json");
    testkit::put_profile(&profile, &d);
    let ready = dir.path().join("ready.json");

    let hold = settings(&read(HOLD));
    let exec = values(&hold, "ExecStart")[0];
    let defaults = settings(&read("packaging/default/kvcr"));
    let hold_args = values(&defaults, "KVCR_HOLD_ARGS")[0].trim_matches('"');
    assert!(
        hold_args.contains("--profile /etc/kvcr/profile.json"),
        "{hold_args}"
    );
    let mut words: Vec<String> = Vec::new();
    for w in exec.split_whitespace() {
        match w {
            "$KVCR_HOLD_ARGS" => words.extend(hold_args.split_whitespace().map(|a| {
                if a == "/etc/kvcr/profile.json" {
                    profile.display().to_string()
                } else {
                    a.to_string()
                }
            })),
            "/run/kvcr/ready.json" => words.push(ready.display().to_string()),
            w => words.push(w.to_string()),
        }
    }
    assert_eq!(words[0], "/usr/bin/kvcr");
    let child = kvcr_std()
        .args(&words[1..])
        .env("KVCR_INVENTORY", &inv)
        .env("KVCR_NODE_FACTS", &facts)
        .env("KVCR_IMPORT_BACKEND", "sim:")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the ready file", || ready.exists());
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().unwrap();
    let ok: Vec<i32> = std::iter::once(0)
        .chain(
            values(&hold, "SuccessExitStatus")
                .iter()
                .flat_map(|v| v.split_whitespace().map(|n| n.parse::<i32>().unwrap())),
        )
        .collect();
    assert!(
        ok.contains(&code),
        "exit {code} is a failed unit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(code, 0);
    assert!(!ready.exists(), "the ready file is removed on release");
}

/// The audit unit's command line with the shipped /etc/default/kvcr, its
/// paths moved below `root`: `$KVCR_AUDIT_ARGS` split on whitespace,
/// `${KVCR_TEXTFILE}` one word, as systemd does; the variables kvcr reads
/// itself in its environment, as the EnvironmentFile sets them.
fn audit_command(root: &Path) -> (Command, std::path::PathBuf) {
    let audit = settings(&read(AUDIT));
    let exec = values(&audit, "ExecStart")[0];
    let defaults = settings(&read("packaging/default/kvcr"));
    let moved = |key: &str| root.join(values(&defaults, key)[0].trim_start_matches('/'));
    let textfile = moved("KVCR_TEXTFILE");
    std::fs::create_dir_all(textfile.parent().unwrap()).unwrap();
    let args = values(&defaults, "KVCR_AUDIT_ARGS")[0].trim_matches('"');
    let mut words: Vec<String> = Vec::new();
    for w in exec.split_whitespace() {
        match w {
            "${KVCR_TEXTFILE}" => words.push(textfile.display().to_string()),
            "$KVCR_AUDIT_ARGS" => words.extend(args.split_whitespace().map(str::to_string)),
            w => words.push(w.to_string()),
        }
    }
    assert_eq!(words[0], "/usr/bin/kvcr");
    let mut c = kvcr_std();
    c.args(&words[1..])
        .env("KVCR_INVENTORY", moved("KVCR_INVENTORY"))
        .env(
            "KVCR_PRODUCER_USER",
            values(&defaults, "KVCR_PRODUCER_USER")[0],
        );
    (c, textfile)
}

/// Issue #31: a node with the package installed and the timer enabled but
/// no producer output yet must not page. tmpfiles.d (applied by the
/// postinst at install and at every boot) creates the default inventory,
/// so the timer's command audits an empty inventory: exit 0 and
/// `kvcr_audit_success 1` (KvcrAuditFailing fires on 0). Without it, the
/// same command exits 2: what paged before.
#[test]
fn a_fresh_node_timer_command_exits_0_on_the_inventory_tmpfiles_creates() {
    let root = tempfile::tempdir().unwrap();
    let (mut before, prom) = audit_command(root.path());
    let out = before.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("\nkvcr_audit_success 0\n"), "{text}");

    let conf = read(TMPFILES);
    let entries: Vec<Vec<&str>> = conf
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let defaults = settings(&read("packaging/default/kvcr"));
    let inventory = values(&defaults, "KVCR_INVENTORY")[0];
    assert_eq!(
        inventory, "/var/lib/kvcr/inventory",
        "docs/format.md §2.1's default"
    );
    // Created 0700 (§2.4); "-" keeps an existing directory's owner.
    assert!(
        entries
            .iter()
            .any(|e| e[..5] == ["d", inventory, "0700", "-", "-"]),
        "{entries:?}"
    );
    if !have("systemd-tmpfiles") {
        crate::util::missing("needs systemd-tmpfiles (.ci/run installs systemd)");
        return;
    }
    let tmpfiles = |root: &Path| {
        let out = Command::new("systemd-tmpfiles")
            .arg(format!("--root={}", root.display()))
            .arg("--create")
            .arg(repo().join(TMPFILES))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    tmpfiles(root.path());
    use std::os::unix::fs::MetadataExt;
    let dir = root.path().join(inventory.trim_start_matches('/'));
    let md = std::fs::metadata(&dir).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o700);
    assert_eq!(md.uid(), rustix::process::geteuid().as_raw());
    let (mut after, prom) = audit_command(root.path());
    let out = after.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    for line in [
        "kvcr_audit_success 1",
        "kvcr_audit_exit_status 0",
        "kvcr_groups{verdict=\"reject\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
    }
    // A directory the operator gave the producer keeps its owner at the next
    // boot's tmpfiles run (chown needs root).
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&dir, Some(4321), Some(4321)).unwrap();
        tmpfiles(root.path());
        assert_eq!(std::fs::metadata(&dir).unwrap().uid(), 4321);
    }
}

/// Issue #31: root auditing a producer that runs as its own user. The
/// packaged units run as root; with the shipped /etc/default/kvcr (no
/// producer user declared) every file of uid 4242 is KV003 and the action
/// names the declaration; with `KVCR_PRODUCER_USER=4242` there, the timer's
/// command accepts the group. Needs root (chown).
#[test]
fn the_audit_unit_trusts_the_producer_user_declared_in_etc_default_kvcr() {
    if !rustix::process::geteuid().is_root() {
        crate::util::missing("needs root to give the inventory to another uid (CI runs as root)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let inv = root.path().join("var/lib/kvcr/inventory");
    let d = Desc::new("llama3-70b-a", 0, 4, 1);
    put_group(&inv, "llama", &d);
    private(&inv);
    for e in walkdir::WalkDir::new(&inv) {
        std::os::unix::fs::chown(e.unwrap().path(), Some(4242), Some(4242)).unwrap();
    }
    // This node, as the descriptors describe it (the shipped args audit --live).
    let facts = this_node(root.path());
    let timer = || {
        let (mut c, prom) = audit_command(root.path());
        c.env("KVCR_NODE_FACTS", &facts);
        (c, prom)
    };
    let (mut c, prom) = timer();
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("kvcr_group_findings{engine_id=\"llama3-70b-a\",code=\"KV003\""),
        "{text}"
    );
    // The action says what to declare, and where (the same audit, printed:
    // the unit's --quiet prints nothing).
    let out = kvcr_std()
        .args(["audit", "--live", "--format", "json"])
        .arg(&inv)
        .env("KVCR_NODE_FACTS", &facts)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let action = report["groups"][0]["action"].as_str().unwrap();
    assert!(
        action.starts_with("if uid 4242 is the producer's user")
            && action.contains("--producer-user 4242")
            && action.contains("KVCR_PRODUCER_USER=4242 in /etc/default/kvcr"),
        "{action}"
    );

    let (mut c, prom) = timer();
    let out = c.env("KVCR_PRODUCER_USER", "4242").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("kvcr_group_accepted{engine_id=\"llama3-70b-a\"} 1\n"),
        "{text}"
    );
}
