//! Permission denied is counted by entry (docs/format.md §6): an entry that
//! cannot be looked up is refused once in "(and N more entries refused)",
//! not once for its listing and again for its lookup beneath the root (the
//! old count said 3 more here). Run as an unprivileged user
//! (`setpriv`), since root passes every permission check; skipped where the
//! tests are not root or `setpriv` is missing.

use crate::util::kvcr;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;

const NOBODY: u32 = 65534;

fn set(p: &Path, mode: u32) {
    chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn an_unsearchable_directory_refuses_each_entry_below_it_once() {
    let setpriv = Path::new("/usr/bin/setpriv");
    if rustix::process::geteuid().as_raw() != 0 || !setpriv.exists() {
        crate::util::missing("needs root and setpriv(1) to run kvcr as another user");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = t.path().join("inv");
    // g1 can be listed (r) but nothing in it looked up (no x): its
    // directory b and its file x.txt are each refused once.
    std::fs::create_dir_all(root.join("g1/b")).unwrap();
    std::fs::write(root.join("g1/x.txt"), b"x").unwrap();
    // a can be searched (x) but not listed (no r): refused once, as a
    // listing that fails.
    std::fs::create_dir_all(root.join("a/inner")).unwrap();
    for (p, mode) in [
        ("g1/b", 0o700),
        ("g1/x.txt", 0o600),
        ("a/inner", 0o700),
        ("g1", 0o400),
        ("a", 0o100),
        ("", 0o700),
    ] {
        set(&root.join(p), mode);
    }
    // Control: root reads everything (no KV005; the owner is uid 65534,
    // so KV003 is what root says).
    let out = kvcr()
        .arg("audit")
        .arg(&root)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("KV005") && text.contains("KV003"), "{text}");
    let mut c = std::process::Command::new(setpriv);
    crate::util::test_env(&mut c);
    let out = c
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(crate::util::bin())
        .arg("audit")
        .arg(&root)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "permission-denied", "{v:#}");
    // Refused: a (cannot list), g1/b and g1/x.txt (cannot stat): three,
    // the first by path named.
    let want = format!(
        "cannot audit {}: a: cannot list: Permission denied (os error 13) \
         (and 2 more entries refused); this user cannot read the whole inventory, \
         so there is no verdict",
        std::fs::canonicalize(&root).unwrap().display()
    );
    assert_eq!(v["message"], want.as_str(), "{v:#}");
    for p in ["g1/b", "g1/x.txt", "a/inner", "g1", "a", ""] {
        set(&root.join(p), 0o700);
    }
}
