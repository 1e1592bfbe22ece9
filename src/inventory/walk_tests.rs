//! The walker that lists through held directory fds (issue #23): changes
//! made between listing and lookup, driven from inside the walk's own
//! callback so each race happens at a chosen step, and the bound on the fds
//! a deep walk holds.

use super::walk::MAX_HELD;
use super::*;
use crate::finding::Code;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

fn tmp() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn dir(p: &Path) {
    fs::create_dir_all(p).unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(0o700)).unwrap();
}

fn file(p: &Path) {
    fs::write(p, b"x").unwrap();
    fs::set_permissions(p, fs::Permissions::from_mode(0o600)).unwrap();
}

/// What the walk reported, as (path, codes, first message), read on this
/// thread; `during` runs after each entry is reported, with its path.
fn walk_with(root: &Path, mut during: impl FnMut(&str)) -> Vec<(String, Vec<Code>, String)> {
    let root = resolve_root(root).unwrap();
    let inv = InventoryRoot::open(&root).unwrap();
    let mut reader = inv.reader();
    let mut out = Vec::new();
    inv.walk(|listed| {
        let entry = match listed {
            Listed::Entry(e) => e,
            Listed::Read(job) => reader.read(job).0,
        };
        let at = display_path(&entry.rel_path);
        let codes = entry.findings.iter().map(|f| f.code).collect();
        let msg = entry
            .findings
            .first()
            .map(|f| f.message.as_text().unwrap_or_default().to_string())
            .unwrap_or_default();
        out.push((at.clone(), codes, msg));
        during(&at);
    })
    .unwrap();
    out
}

/// `d0/d1/…/d{n-1}` below `root`, with a stray `zz.txt` at every level
/// (sorted after the `d…` directory, so the walk comes back for it).
fn chain(root: &Path, n: usize) -> Vec<PathBuf> {
    let mut p = root.to_path_buf();
    let mut levels = Vec::new();
    for i in 0..n {
        p = p.join(format!("d{i:02}"));
        dir(&p);
        file(&p.join("zz.txt"));
        levels.push(p.clone());
    }
    levels
}

/// How many fds of this process are open on directories below `root`
/// (other tests' fds are elsewhere).
fn fds_below(root: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(root) && t != root)
        .count()
}

#[test]
fn a_deep_walk_holds_at_most_max_held_directories_and_misses_nothing() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    let n = 3 * MAX_HELD;
    let levels = chain(&root, n);
    let mut most = 0;
    let seen = walk_with(&root, |_| most = most.max(fds_below(&root)));
    // Every stray, deepest first (pre-order: each level's `zz.txt` comes
    // after its subdirectory), each once, none lost to a reopen.
    let strays: Vec<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
    let want: Vec<String> = levels
        .iter()
        .rev()
        .map(|l| display_path(l.join("zz.txt").strip_prefix(&root).unwrap()))
        .collect();
    assert_eq!(strays, want);
    assert!(seen.iter().all(|(_, c, _)| c == &[Code::KV010]), "{seen:?}");
    // The walk held at most MAX_HELD directories below the root (reopened
    // levels included), and at least that many at its deepest.
    assert!(most <= MAX_HELD, "{most} fds held");
    assert!(
        most >= MAX_HELD,
        "{most} fds held: not the window it claims"
    );
    assert_eq!(fds_below(&root), 0, "fds left open after the walk");
}

#[test]
fn a_closed_directory_swapped_for_a_symlink_is_reported_and_not_followed() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    let outside = tmp();
    file(&outside.path().join("zz.txt"));
    file(&outside.path().join("outside-only.txt"));
    let levels = chain(&root, MAX_HELD + 4);
    // `d00/d01` is closed by the time the walk is at the bottom: swapped
    // then for a symlink to the outside, it must not be listed through.
    let target = levels[1].clone();
    let parked = root.join("..").join(format!(
        "parked-{}",
        root.file_name().unwrap().to_string_lossy()
    ));
    let bottom = display_path(
        levels
            .last()
            .unwrap()
            .join("zz.txt")
            .strip_prefix(&root)
            .unwrap(),
    );
    let seen = walk_with(&root, |at| {
        if at == bottom {
            fs::rename(&target, &parked).unwrap();
            symlink(outside.path(), &target).unwrap();
        }
    });
    fs::remove_file(&target).unwrap();
    fs::rename(&parked, &target).unwrap();
    let at = display_path(target.strip_prefix(&root).unwrap());
    let (_, codes, msg) = seen
        .iter()
        .find(|(p, _, _)| *p == at)
        .unwrap_or_else(|| panic!("{at} not reported: {seen:?}"));
    assert_eq!(codes, &[Code::KV001]);
    assert!(
        msg.contains("directory replaced by a symlink while auditing"),
        "{msg}"
    );
    assert!(!seen.iter().any(|(p, _, _)| p.contains("outside-only")));
    // The rest of `d00/d01` is skipped; `d00` itself goes on.
    assert!(!seen.iter().any(|(p, _, _)| *p == format!("{at}/zz.txt")));
    assert!(seen.iter().any(|(p, _, _)| p == "d00/zz.txt"), "{seen:?}");
}

#[test]
fn a_closed_directory_replaced_by_another_is_not_listed_further() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    let levels = chain(&root, MAX_HELD + 4);
    let target = levels[1].clone();
    let parked = root.join("parked");
    let bottom = display_path(
        levels
            .last()
            .unwrap()
            .join("zz.txt")
            .strip_prefix(&root)
            .unwrap(),
    );
    let seen = walk_with(&root, |at| {
        if at == bottom {
            // Moved aside (not in the root's listing, read before) and a
            // fresh directory with the same names put in its place.
            fs::rename(&target, &parked).unwrap();
            dir(&target);
            file(&target.join("zz.txt"));
        }
    });
    let at = display_path(target.strip_prefix(&root).unwrap());
    let (_, codes, msg) = seen
        .iter()
        .find(|(p, _, _)| *p == at)
        .unwrap_or_else(|| panic!("{at} not reported: {seen:?}"));
    assert_eq!(codes, &[Code::KV005]);
    assert!(
        msg.contains("directory replaced by another while auditing"),
        "{msg}"
    );
    assert!(!seen.iter().any(|(p, _, _)| *p == format!("{at}/zz.txt")));
}

#[test]
fn a_held_directory_swapped_for_a_symlink_is_still_the_one_listed() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    let outside = tmp();
    for n in ["b.txt", "outside-only.txt"] {
        file(&outside.path().join(n));
    }
    let g = root.join("g");
    dir(&g);
    for n in ["a.txt", "b.txt"] {
        file(&g.join(n));
    }
    let parked = root.join("..").join(format!(
        "parked-{}",
        root.file_name().unwrap().to_string_lossy()
    ));
    let seen = walk_with(&root, |at| {
        if at == "g/a.txt" {
            fs::rename(&g, &parked).unwrap();
            symlink(outside.path(), &g).unwrap();
        }
    });
    fs::remove_file(&g).unwrap();
    fs::rename(&parked, &g).unwrap();
    let paths: Vec<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
    // `g/b.txt` is the listed one, looked up through the held fd; nothing
    // of the symlink's target is listed.
    assert_eq!(paths, ["g/a.txt", "g/b.txt"], "{seen:?}");
}

#[test]
fn a_directory_removed_or_replaced_after_listing() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    file(&root.join("a.txt"));
    dir(&root.join("b/inner"));
    dir(&root.join("c"));
    file(&root.join("c/x.txt"));
    let seen = walk_with(&root, |at| {
        if at == "a.txt" {
            // b: gone before it is opened; c: a regular file now.
            fs::remove_dir_all(root.join("b")).unwrap();
            fs::remove_dir_all(root.join("c")).unwrap();
            file(&root.join("c"));
        }
    });
    let paths: Vec<&str> = seen.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(paths, ["a.txt", "c"], "{seen:?}");
    assert_eq!(seen[1].1, [Code::KV005]);
    assert_eq!(
        seen[1].2,
        "changed while auditing (a directory when listed, a regular file now)"
    );
}

#[test]
fn a_file_swapped_for_a_symlink_after_listing_is_a_changed_type() {
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    file(&root.join("a.txt"));
    file(&root.join("b.txt"));
    let seen = walk_with(&root, |at| {
        if at == "a.txt" {
            fs::remove_file(root.join("b.txt")).unwrap();
            symlink("/etc/passwd", root.join("b.txt")).unwrap();
        }
    });
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].0, "b.txt");
    assert_eq!(seen[1].1, [Code::KV005]);
    assert_eq!(
        seen[1].2,
        "changed while auditing (a regular file when listed, a symlink now)"
    );
}

#[test]
fn a_directory_past_path_max_is_not_listed() {
    use std::os::fd::AsFd;
    let t = tmp();
    let root = fs::canonicalize(t.path()).unwrap();
    // 250-byte names: made through held fds, as a path would be too long.
    let mut fd = rustix::fs::open(
        &root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut rel = PathBuf::new();
    let mut first_unlisted = None;
    for i in 0..18u8 {
        let name = String::from_utf8(vec![b'a' + i; 250]).unwrap();
        rustix::fs::mkdirat(fd.as_fd(), name.as_str(), 0o700.into()).unwrap();
        let next = rustix::fs::openat(
            fd.as_fd(),
            name.as_str(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        drop(rustix::fs::openat(
            next.as_fd(),
            "zz.txt",
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE,
            0o600.into(),
        ));
        fd = next;
        rel.push(&name);
        if first_unlisted.is_none() && root.as_os_str().len() + 1 + rel.as_os_str().len() >= 4096 {
            first_unlisted = Some(display_path(&rel));
        }
    }
    let first_unlisted = first_unlisted.unwrap();
    let seen = walk_with(&root, |_| {});
    let (_, codes, msg) = seen
        .iter()
        .find(|(p, _, _)| *p == first_unlisted)
        .unwrap_or_else(|| panic!("no finding at the first unlisted directory"));
    assert_eq!(codes, &[Code::KV005]);
    assert_eq!(msg, "cannot list: File name too long (os error 36)");
    // Nothing below it; everything above it listed.
    assert!(!seen
        .iter()
        .any(|(p, _, _)| p.len() > first_unlisted.len() && p.starts_with(&first_unlisted)));
    let strays = seen.iter().filter(|(_, c, _)| c == &[Code::KV010]).count();
    assert_eq!(strays, first_unlisted.split('/').count() - 1);
}
