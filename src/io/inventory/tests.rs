use super::open::{self, FileId, Strategy};
use super::*;
use crate::format::descriptor::MAX_FILE_BYTES;
use crate::format::finding::{Code, Severity};
use crate::format::names::{classify_name, display_path, is_staging_name, parse_rank_name};
use std::ffi::OsStr;
use std::fs;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

/// Walks the resolved `root` and calls `visit` once per reported entry, in
/// walk order (sorted by file name, pre-order). For a descriptor that opened
/// and read fine the second argument is its bytes (a buffer reused across
/// files). Directories are reported only when they carry findings.
fn scan<F: FnMut(Entry, Option<&[u8]>)>(
    root: &Path,
    visit: F,
) -> Result<ScanStats, InventoryError> {
    scan_with(root, None, visit)
}

/// [`scan`] trusting the files of the declared producer's uid `producer`.
fn scan_with<F: FnMut(Entry, Option<&[u8]>)>(
    root: &Path,
    producer: Option<u32>,
    mut visit: F,
) -> Result<ScanStats, InventoryError> {
    let inv = InventoryRoot::open(root, producer)?;
    let mut reader = inv.reader();
    inv.walk(|listed| match listed {
        Listed::Entry(entry) => visit(entry, None),
        Listed::Read(job) => {
            let (entry, bytes) = reader.read(job);
            visit(entry, bytes);
        }
    })
}

struct Seen {
    entry: Entry,
    bytes: Option<Vec<u8>>,
}

fn scan_all(root: &Path) -> (Vec<Seen>, ScanStats) {
    let resolved = resolve_root(root).expect("resolve");
    let mut seen = Vec::new();
    let stats = scan(&resolved, |entry, bytes| {
        seen.push(Seen {
            entry,
            bytes: bytes.map(<[u8]>::to_vec),
        })
    })
    .expect("scan");
    assert_eq!(stats.entries, seen.len());
    (seen, stats)
}

fn find<'a>(seen: &'a [Seen], rel: &str) -> &'a Seen {
    seen.iter()
        .find(|s| s.entry.rel_path == Path::new(rel))
        .unwrap_or_else(|| panic!("no entry {rel}: {:#?}", paths(seen)))
}

fn paths(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|s| display_path(&s.entry.rel_path))
        .collect()
}

fn codes(s: &Seen) -> Vec<Code> {
    s.entry.findings.iter().map(|f| f.code).collect()
}

fn write(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
}

fn mkdir(path: &Path) {
    fs::create_dir(path).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn tmp() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    d
}

#[test]
fn rank_name_table() {
    let table: &[(&[u8], Option<Option<u64>>)] = &[
        (b"rank-0.json", Some(Some(0))),
        (b"rank-7.json", Some(Some(7))),
        (b"rank-4095.json", Some(Some(4095))),
        (b"rank-18446744073709551615.json", Some(Some(u64::MAX))),
        (b"rank-18446744073709551616.json", Some(None)),
        (b"rank-99999999999999999999999.json", Some(None)),
        (b"rank-01.json", None),
        (b"rank-00.json", None),
        (b"rank-.json", None),
        (b"rank-+1.json", None),
        (b"rank--1.json", None),
        (b"rank-1a.json", None),
        (b"rank- 1.json", None),
        (b"rank-1.json.tmp", None),
        (b"rank-1.JSON", None),
        (b"Rank-1.json", None),
        (b"rank-1.json ", None),
        (b"rank-\xd9\xa1.json", None), // Arabic-Indic digit one
        (b"rank-1\xff.json", None),
        (b".rank-1.json", None),
    ];
    for (name, want) in table {
        let got = parse_rank_name(OsStr::from_bytes(name));
        assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(name));
    }
    assert!(is_staging_name(OsStr::new(".rank-3.json.a8Xk.tmp")));
    assert!(!is_staging_name(OsStr::new("rank-3.json.tmp")));
    assert!(!is_staging_name(OsStr::new(".rank-3.json")));
    assert_eq!(classify_name(OsStr::new(".x.tmp")), EntryKind::Torn);
    assert_eq!(classify_name(OsStr::new("notes.txt")), EntryKind::Stray);
    assert_eq!(
        classify_name(OsStr::new("rank-2.json")),
        EntryKind::Descriptor { name_rank: Some(2) }
    );
}

#[test]
fn display_path_escapes_only_invalid_utf8() {
    assert_eq!(display_path(Path::new("a/rank-0.json")), "a/rank-0.json");
    assert_eq!(display_path(Path::new("ünï/\u{1b}[31m")), "ünï/\u{1b}[31m");
    let p = PathBuf::from(OsStr::from_bytes(b"bad\xffname\xc3"));
    assert_eq!(display_path(&p), "bad\\xffname\\xc3");
}

#[test]
fn reads_descriptor_and_reports_in_order() {
    let d = tmp();
    write(&d.path().join("rank-1.json"), b"{\"one\":1}");
    write(&d.path().join("rank-0.json"), b"{\"zero\":0}");
    mkdir(&d.path().join("sub"));
    write(&d.path().join("sub/rank-2.json"), b"{}");
    let (seen, stats) = scan_all(d.path());
    assert_eq!(
        paths(&seen),
        ["rank-0.json", "rank-1.json", "sub/rank-2.json"]
    );
    assert_eq!(
        stats,
        ScanStats {
            entries: 3,
            descriptors: 3
        }
    );
    let s = find(&seen, "rank-0.json");
    assert_eq!(s.entry.kind, EntryKind::Descriptor { name_rank: Some(0) });
    assert!(s.entry.findings.is_empty(), "{:?}", s.entry.findings);
    assert_eq!(s.bytes.as_deref(), Some(&b"{\"zero\":0}"[..]));
    assert_eq!(s.entry.mode, Some(0o100644));
    assert_eq!(
        find(&seen, "rank-1.json").bytes.as_deref(),
        Some(&b"{\"one\":1}"[..])
    );
    assert_eq!(
        find(&seen, "sub/rank-2.json").bytes.as_deref(),
        Some(&b"{}"[..])
    );
}

#[test]
fn resolve_root_errors_and_symlinked_root() {
    let d = tmp();
    let missing = d.path().join("nope");
    let e = resolve_root(&missing).unwrap_err();
    assert!(matches!(e, InventoryError::NotFound { .. }));
    assert!(e.to_string().contains(&*missing.to_string_lossy()), "{e}");
    let file = d.path().join("file");
    write(&file, b"x");
    let e = resolve_root(&file).unwrap_err();
    assert!(matches!(e, InventoryError::NotADirectory { .. }), "{e:?}");
    assert!(e.to_string().contains(&*file.to_string_lossy()), "{e}");
    let real = d.path().join("real");
    mkdir(&real);
    let link = d.path().join("link");
    symlink(&real, &link).unwrap();
    assert_eq!(
        resolve_root(&link).unwrap(),
        fs::canonicalize(&real).unwrap()
    );
}

#[test]
fn torn_and_stray() {
    let d = tmp();
    write(&d.path().join(".rank-3.json.Xa81.tmp"), b"{\"half");
    write(&d.path().join("notes.txt"), b"hello");
    write(&d.path().join("rank-01.json"), b"{}");
    let (seen, stats) = scan_all(d.path());
    assert_eq!(stats.descriptors, 0);
    let t = find(&seen, ".rank-3.json.Xa81.tmp");
    assert_eq!(t.entry.kind, EntryKind::Torn);
    assert_eq!(codes(t), [Code::KV009]);
    assert_eq!(t.entry.findings[0].severity, Severity::Reject);
    assert_eq!(
        t.entry.findings[0].message,
        "staging leftover of an interrupted write"
    );
    assert!(t.bytes.is_none());
    for stray in ["notes.txt", "rank-01.json"] {
        let s = find(&seen, stray);
        assert_eq!(s.entry.kind, EntryKind::Stray);
        assert_eq!(codes(s), [Code::KV010]);
        assert_eq!(s.entry.findings[0].severity, Severity::Notice);
        assert_eq!(s.entry.findings[0].path.as_deref(), Some(stray));
        assert!(s.bytes.is_none());
        assert_eq!(s.entry.mode, None);
    }
}

#[test]
fn symlink_to_outside_file_is_rejected_and_never_read() {
    let outside = tmp();
    let secret = outside.path().join("secret.json");
    write(&secret, b"UNIQUE-SECRET-7f3a9c");
    let d = tmp();
    symlink(&secret, d.path().join("rank-0.json")).unwrap();
    symlink("does/not/exist", d.path().join("rank-1.json")).unwrap();
    let (seen, stats) = scan_all(d.path());
    for s in &seen {
        if let Some(b) = &s.bytes {
            assert!(
                !b.windows(6).any(|w| w == b"UNIQUE"),
                "target content leaked"
            );
        }
    }
    let s = find(&seen, "rank-0.json");
    assert_eq!(s.entry.kind, EntryKind::Descriptor { name_rank: Some(0) });
    assert_eq!(codes(s), [Code::KV001]);
    let f = &s.entry.findings[0];
    let target = secret.to_string_lossy();
    assert!(f.message.contains(&target), "{:?}", f.message);
    assert_eq!(f.found.as_deref(), Some(&*format!("symlink to {target}")));
    assert!(s.bytes.is_none());
    assert_eq!(s.entry.mode, None);
    let dangling = find(&seen, "rank-1.json");
    assert_eq!(codes(dangling), [Code::KV001]);
    assert_eq!(
        dangling.entry.findings[0].found.as_deref(),
        Some("symlink to does/not/exist")
    );
    assert_eq!(stats.descriptors, 2);
}

#[test]
fn dir_symlink_is_never_traversed() {
    let outside = tmp();
    write(&outside.path().join("rank-0.json"), b"OUTSIDE");
    let d = tmp();
    symlink(outside.path(), d.path().join("group")).unwrap();
    let (seen, _) = scan_all(d.path());
    assert_eq!(paths(&seen), ["group"]);
    let s = find(&seen, "group");
    assert_eq!(s.entry.kind, EntryKind::Stray);
    assert_eq!(codes(s), [Code::KV001]);
    assert!(s.entry.findings[0]
        .found
        .as_deref()
        .unwrap()
        .contains(&*outside.path().to_string_lossy()));
    assert!(seen.iter().all(|s| s.bytes.is_none()));
}

#[test]
fn fifo_named_as_descriptor_is_not_opened() {
    let d = tmp();
    let p = d.path().join("rank-1.json");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    // A FIFO with a stray name and with a staging name: KV002 too.
    for name in ["pipe", ".rank-1.json.x.tmp"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join(name),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
    }
    let (seen, _) = scan_all(d.path()); // must not hang
    let s = find(&seen, "rank-1.json");
    assert_eq!(codes(s), [Code::KV002]);
    assert_eq!(s.entry.findings[0].found.as_deref(), Some("FIFO"));
    assert!(s.bytes.is_none());
    assert_eq!(codes(find(&seen, "pipe")), [Code::KV002]);
    assert_eq!(
        codes(find(&seen, ".rank-1.json.x.tmp")),
        [Code::KV009, Code::KV002]
    );
}

#[test]
fn char_device_named_as_descriptor() {
    let d = tmp();
    let p = d.path().join("rank-2.json");
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        &p,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o644),
        rustix::fs::makedev(1, 3),
    );
    if let Err(e) = made {
        println!("skipping char device test: mknod failed: {e}");
        return;
    }
    let (seen, _) = scan_all(d.path());
    let s = find(&seen, "rank-2.json");
    assert_eq!(codes(s), [Code::KV002]);
    assert_eq!(
        s.entry.findings[0].found.as_deref(),
        Some("character device")
    );
    assert!(s.bytes.is_none());
}

#[test]
fn directory_named_as_descriptor() {
    let d = tmp();
    mkdir(&d.path().join("rank-3.json"));
    write(&d.path().join("rank-3.json/rank-4.json"), b"{}");
    let (seen, _) = scan_all(d.path());
    let s = find(&seen, "rank-3.json");
    assert_eq!(s.entry.kind, EntryKind::Descriptor { name_rank: Some(3) });
    assert_eq!(codes(s), [Code::KV002]);
    assert!(s.bytes.is_none());
    // Its contents are still walked (the tree is organisation only).
    assert!(find(&seen, "rank-3.json/rank-4.json").bytes.is_some());
}

#[test]
fn size_limit() {
    let d = tmp();
    write(&d.path().join("rank-0.json"), &vec![b' '; 2 * 1024 * 1024]);
    write(
        &d.path().join("rank-1.json"),
        &vec![b' '; MAX_FILE_BYTES as usize],
    );
    write(
        &d.path().join("rank-2.json"),
        &vec![b' '; MAX_FILE_BYTES as usize + 1],
    );
    let (seen, _) = scan_all(d.path());
    let big = find(&seen, "rank-0.json");
    assert_eq!(codes(big), [Code::KV004]);
    let f = &big.entry.findings[0];
    assert!(f.message.contains("unread"));
    assert_eq!(f.expected.as_deref(), Some("≤ 1048576 bytes"));
    assert_eq!(f.found.as_deref(), Some("2097152 bytes"));
    assert!(big.bytes.is_none());
    let exact = find(&seen, "rank-1.json");
    assert!(exact.entry.findings.is_empty());
    assert_eq!(
        exact.bytes.as_ref().map(Vec::len),
        Some(MAX_FILE_BYTES as usize)
    );
    let over = find(&seen, "rank-2.json");
    assert_eq!(codes(over), [Code::KV004]);
    assert_eq!(
        over.entry.findings[0].found.as_deref(),
        Some("1048577 bytes")
    );
}

#[test]
fn read_capped_stops_after_limit_plus_one() {
    let d = tmp();
    let p = d.path().join("big");
    write(&p, &vec![b'x'; 3 * 1024 * 1024]);
    let mut f = fs::File::open(&p).unwrap();
    let mut buf = vec![1, 2, 3];
    open::read_capped(&mut f, &mut buf).unwrap();
    assert_eq!(buf.len() as u64, MAX_FILE_BYTES + 1);
}

#[test]
fn read_sized_reads_the_whole_file_whatever_the_size_hint() {
    let d = tmp();
    let p = d.path().join("f");
    let content: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
    write(&p, &content);
    let mut buf = vec![9; 7];
    // Exact, too small (the file grew), too large (it shrank), zero.
    for hint in [5000, 100, 4999, 5001, 1 << 20, 0] {
        let mut f = fs::File::open(&p).unwrap();
        open::read_sized(&mut f, &mut buf, hint).unwrap();
        assert_eq!(buf, content, "hint {hint}");
    }
    // A buffer left large by a bigger file reads a small one whole too.
    let big = d.path().join("big");
    write(&big, &vec![b'x'; 3 * 1024 * 1024]);
    let mut f = fs::File::open(&big).unwrap();
    open::read_sized(&mut f, &mut buf, 3 * 1024 * 1024).unwrap();
    assert_eq!(buf.len() as u64, MAX_FILE_BYTES + 1);
    let mut f = fs::File::open(&p).unwrap();
    open::read_sized(&mut f, &mut buf, 5000).unwrap();
    assert_eq!(buf, content);
    let empty = d.path().join("empty");
    write(&empty, b"");
    let mut f = fs::File::open(&empty).unwrap();
    open::read_sized(&mut f, &mut buf, 0).unwrap();
    assert!(buf.is_empty());
}

#[test]
fn unsafe_permissions() {
    let d = tmp();
    let ww = d.path().join("rank-0.json");
    write(&ww, b"{}");
    fs::set_permissions(&ww, fs::Permissions::from_mode(0o666)).unwrap();
    let open_dir = d.path().join("shared");
    mkdir(&open_dir);
    write(&open_dir.join("rank-1.json"), b"{}");
    write(&open_dir.join("notes.txt"), b"x");
    mkdir(&open_dir.join("deeper"));
    write(&open_dir.join("deeper/rank-2.json"), b"{}");
    fs::set_permissions(&open_dir, fs::Permissions::from_mode(0o777)).unwrap();
    write(&d.path().join("rank-3.json"), b"{}");
    let (seen, _) = scan_all(d.path());

    let s = find(&seen, "rank-0.json");
    assert_eq!(codes(s), [Code::KV003]);
    assert_eq!(s.entry.findings[0].found.as_deref(), Some("0666"));
    assert_eq!(
        s.entry.findings[0].expected.as_deref(),
        Some("not group/other-writable")
    );
    assert_eq!(s.entry.mode, Some(0o100666));
    assert!(s.bytes.is_some(), "still read so later checks can run");

    let dir = find(&seen, "shared");
    assert_eq!(dir.entry.kind, EntryKind::Dir);
    assert_eq!(codes(dir), [Code::KV003]);
    assert_eq!(dir.entry.findings[0].found.as_deref(), Some("0777"));

    for below in ["shared/rank-1.json", "shared/deeper/rank-2.json"] {
        let s = find(&seen, below);
        assert_eq!(codes(s), [Code::KV003], "{below}");
        let f = &s.entry.findings[0];
        assert_eq!(f.message, "directory shared is writable by group/others");
        assert_eq!(f.path.as_deref(), Some(below));
    }
    // Stray files below are not descriptors: notice only.
    assert_eq!(codes(find(&seen, "shared/notes.txt")), [Code::KV010]);
    // Siblings outside the unsafe dir are clean; safe dirs are not reported.
    assert!(find(&seen, "rank-3.json").entry.findings.is_empty());
    assert!(!paths(&seen).contains(&"shared/deeper".to_string()));
}

#[test]
fn unsafe_root_is_reported_and_inherited() {
    let d = tmp();
    write(&d.path().join("rank-0.json"), b"{}");
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o775)).unwrap();
    let (seen, _) = scan_all(d.path());
    let root = find(&seen, ".");
    assert_eq!(root.entry.kind, EntryKind::Dir);
    assert_eq!(codes(root), [Code::KV003]);
    assert_eq!(root.entry.findings[0].found.as_deref(), Some("0775"));
    let s = find(&seen, "rank-0.json");
    assert_eq!(codes(s), [Code::KV003]);
    assert_eq!(
        s.entry.findings[0].message,
        "the inventory root directory is writable by group/others"
    );
}

#[test]
fn foreign_owner() {
    if rustix::process::geteuid().as_raw() != 0 {
        println!("skipping foreign owner test: not root");
        return;
    }
    let d = tmp();
    let p = d.path().join("rank-0.json");
    write(&p, b"{}");
    std::os::unix::fs::chown(&p, Some(4242), None).unwrap();
    let (seen, _) = scan_all(d.path());
    let s = find(&seen, "rank-0.json");
    assert_eq!(codes(s), [Code::KV003]);
    assert_eq!(s.entry.findings[0].found.as_deref(), Some("uid 4242"));
    assert_eq!(s.entry.findings[0].expected.as_deref(), Some("uid 0"));

    let d = tmp();
    mkdir(&d.path().join("g"));
    write(&d.path().join("g/rank-0.json"), b"{}");
    std::os::unix::fs::chown(d.path().join("g"), Some(4242), None).unwrap();
    let (seen, _) = scan_all(d.path());
    assert_eq!(codes(find(&seen, "g")), [Code::KV003]);
    let s = find(&seen, "g/rank-0.json");
    assert_eq!(codes(s), [Code::KV003]);
    assert_eq!(
        s.entry.findings[0].message,
        "directory g is owned by uid 4242, neither root, the invoking user nor a declared \
         producer user"
    );
    assert_eq!(s.entry.findings[0].found.as_deref(), Some("uid 4242"));
    // Inherited with what chooses the headline's action.
    assert_eq!(
        s.entry.findings[0].subject,
        crate::format::finding::Subject::UndeclaredOwner(4242)
    );

    // The same tree with uid 4242 declared as the producer's user: nothing
    // to report; a file of another user in it is still KV003.
    write(&d.path().join("g/rank-1.json"), b"{}");
    std::os::unix::fs::chown(d.path().join("g/rank-0.json"), Some(4242), None).unwrap();
    std::os::unix::fs::chown(d.path().join("g/rank-1.json"), Some(4243), None).unwrap();
    let mut seen = Vec::new();
    let root = resolve_root(d.path()).unwrap();
    scan_with(&root, Some(4242), |e, _| seen.push(e)).unwrap();
    let at = |p: &str| seen.iter().find(|e| e.rel_path == Path::new(p));
    assert!(at("g").is_none(), "a trusted directory is not reported");
    let f = &at("g/rank-0.json").unwrap().findings;
    assert!(f.iter().all(|f| f.code != Code::KV003), "{f:?}");
    let f = &at("g/rank-1.json").unwrap().findings;
    assert_eq!(
        f.iter().filter(|f| f.code == Code::KV003).count(),
        1,
        "{f:?}"
    );
    assert_eq!(f[0].expected.as_deref(), Some("uid 0 or 4242"));
    assert_eq!(f[0].found.as_deref(), Some("uid 4243"));
}

#[test]
fn depth_limit() {
    let d = tmp();
    let mut p = d.path().to_path_buf();
    for i in 1..=8 {
        p.push(format!("d{i}"));
        mkdir(&p);
    }
    // Depth 8 (inside d1..d7) is read; depth 9 (inside d1..d8) is not.
    write(&p.parent().unwrap().join("rank-0.json"), b"{}");
    write(&p.join("rank-1.json"), b"{}");
    mkdir(&p.join("d9"));
    write(&p.join("d9/rank-2.json"), b"{}");
    let (seen, stats) = scan_all(d.path());
    assert_eq!(stats.descriptors, 1);
    let ok = find(&seen, "d1/d2/d3/d4/d5/d6/d7/rank-0.json");
    assert!(ok.bytes.is_some());
    let deep = find(&seen, "d1/d2/d3/d4/d5/d6/d7/d8/rank-1.json");
    assert_eq!(deep.entry.kind, EntryKind::Stray);
    assert_eq!(codes(deep), [Code::KV010]);
    assert_eq!(deep.entry.findings[0].severity, Severity::Notice);
    assert_eq!(
        deep.entry.findings[0].message,
        "beyond the depth limit of 8; not read"
    );
    assert!(deep.bytes.is_none());
    // The walk goes on below the depth limit: deeper files are notices,
    // never read, and the directory itself carries nothing.
    let deeper = find(&seen, "d1/d2/d3/d4/d5/d6/d7/d8/d9/rank-2.json");
    assert_eq!(codes(deeper), [Code::KV010]);
    assert!(deeper.bytes.is_none());
    assert!(!paths(&seen)
        .iter()
        .any(|p| p == "d1/d2/d3/d4/d5/d6/d7/d8/d9"));
}

#[test]
fn unsafe_entries_are_reported_at_any_depth() {
    let d = tmp();
    let mut p = d.path().to_path_buf();
    for i in 1..=20 {
        p.push(format!("d{i}"));
        mkdir(&p);
    }
    std::os::unix::fs::symlink("/etc/passwd", p.join("rank-0.json")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p.join("rank-1.json"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    mkdir(&p.join("rank-2.json"));
    let (seen, stats) = scan_all(d.path());
    assert_eq!(stats.descriptors, 3, "{:?}", paths(&seen));
    let rel = p
        .strip_prefix(d.path())
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let link = find(&seen, &format!("{rel}/rank-0.json"));
    assert_eq!(codes(link), [Code::KV001]);
    assert!(link.entry.findings[0].message.contains("/etc/passwd"));
    assert_eq!(
        codes(find(&seen, &format!("{rel}/rank-1.json"))),
        [Code::KV002]
    );
    assert_eq!(
        codes(find(&seen, &format!("{rel}/rank-2.json"))),
        [Code::KV002]
    );
}

#[test]
fn escape_bytes_and_invalid_utf8_names() {
    let d = tmp();
    let esc = "\u{1b}]0;pwned\u{7}\u{1b}[2J.json";
    write(&d.path().join(esc), b"x");
    let bad = OsStr::from_bytes(b"rank-\xff.json");
    write(&d.path().join(bad), b"x");
    let bad_dir = OsStr::from_bytes(b"g\xfe");
    mkdir(&d.path().join(bad_dir));
    write(&d.path().join(bad_dir).join("rank-5.json"), b"{\"r\":5}");
    let (seen, _) = scan_all(d.path());
    let s = find(&seen, esc);
    assert_eq!(s.entry.kind, EntryKind::Stray);
    assert_eq!(s.entry.findings[0].path.as_deref(), Some(esc));
    let b = seen
        .iter()
        .find(|s| s.entry.rel_path.as_os_str() == bad)
        .unwrap();
    assert_eq!(b.entry.kind, EntryKind::Stray);
    assert_eq!(b.entry.findings[0].path.as_deref(), Some("rank-\\xff.json"));
    let r = seen
        .iter()
        .find(|s| s.entry.rel_path.ends_with("rank-5.json"))
        .unwrap();
    assert_eq!(r.bytes.as_deref(), Some(&b"{\"r\":5}"[..]));
    assert_eq!(display_path(&r.entry.rel_path), "g\\xfe/rank-5.json");
}

fn id_of(p: &Path) -> FileId {
    FileId::of(&fs::symlink_metadata(p).unwrap())
}

#[test]
fn swap_race_leaf_replaced_by_symlink() {
    let outside = tmp();
    let secret = outside.path().join("secret");
    write(&secret, b"SECRET");
    for strategy in [Strategy::Auto, Strategy::Openat2, Strategy::PerComponent] {
        let d = tmp();
        let p = d.path().join("rank-0.json");
        write(&p, b"{}");
        let listed = id_of(&p); // listing
        let staged = d.path().join(".swap");
        symlink(&secret, &staged).unwrap();
        fs::rename(&staged, &p).unwrap(); // swap after listing
        let root = open::open_root(&fs::canonicalize(d.path()).unwrap()).unwrap();
        let res = open::open_listed_with(root.as_fd(), Path::new("rank-0.json"), listed, strategy);
        if strategy == Strategy::Openat2 {
            if let Err(f) = &res {
                if f.code == Code::KV005
                    && (f.message.contains("not implemented")
                        || f.message.contains("not permitted"))
                {
                    println!("openat2 unavailable here; skipping that strategy");
                    continue;
                }
            }
        }
        let f = res.expect_err("must not open through a symlink");
        assert_eq!(f.code, Code::KV001, "{strategy:?}: {f:?}");
        assert!(f.message.contains("replaced by a symlink"));
        assert_eq!(
            f.found.as_deref(),
            Some(&*format!("symlink to {}", secret.display()))
        );
        assert_eq!(f.path.as_deref(), Some("rank-0.json"));
    }
}

#[test]
fn swap_race_parent_dir_replaced_by_symlink() {
    let outside = tmp();
    write(&outside.path().join("rank-0.json"), b"SECRET");
    for strategy in [Strategy::Auto, Strategy::PerComponent] {
        let d = tmp();
        mkdir(&d.path().join("g"));
        let p = d.path().join("g/rank-0.json");
        write(&p, b"{}");
        let listed = id_of(&p);
        fs::rename(d.path().join("g"), d.path().join("g.old")).unwrap();
        symlink(outside.path(), d.path().join("g")).unwrap();
        let root = open::open_root(&fs::canonicalize(d.path()).unwrap()).unwrap();
        let f = open::open_listed_with(root.as_fd(), Path::new("g/rank-0.json"), listed, strategy)
            .expect_err("must not open through a symlinked directory");
        assert_eq!(f.code, Code::KV001, "{strategy:?}: {f:?}");
    }
}

#[test]
fn swap_race_other_regular_file_or_fifo() {
    let d = tmp();
    let p = d.path().join("rank-0.json");
    write(&p, b"{}");
    let listed = id_of(&p);
    let root = open::open_root(&fs::canonicalize(d.path()).unwrap()).unwrap();
    // Same file: opens.
    assert!(open::open_listed_with(
        root.as_fd(),
        Path::new("rank-0.json"),
        listed,
        Strategy::Auto
    )
    .is_ok());
    // Another regular file renamed over it: KV005 changed while auditing.
    let other = d.path().join("other");
    write(&other, b"{}");
    fs::rename(&other, &p).unwrap();
    let f = open::open_listed_with(
        root.as_fd(),
        Path::new("rank-0.json"),
        listed,
        Strategy::Auto,
    )
    .unwrap_err();
    assert_eq!(f.code, Code::KV005);
    assert!(f.message.contains("changed while auditing"));
    // A FIFO swapped in: opened non-blocking (no hang), then KV002.
    fs::remove_file(&p).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let f = open::open_listed_with(
        root.as_fd(),
        Path::new("rank-0.json"),
        listed,
        Strategy::Auto,
    )
    .unwrap_err();
    assert_eq!(f.code, Code::KV002);
    // Vanished: KV005 with the OS error.
    fs::remove_file(&p).unwrap();
    let f = open::open_listed_with(
        root.as_fd(),
        Path::new("rank-0.json"),
        listed,
        Strategy::Auto,
    )
    .unwrap_err();
    assert_eq!(f.code, Code::KV005);
    assert!(f.message.contains("No such file"), "{:?}", f.message);
}

#[test]
fn open_beneath_refuses_non_normal_components() {
    let d = tmp();
    let root = open::open_root(&fs::canonicalize(d.path()).unwrap()).unwrap();
    for rel in ["../x", "/etc/passwd", "", "./a"] {
        assert!(
            open::open_beneath(root.as_fd(), Path::new(rel), false).is_err(),
            "{rel}"
        );
    }
}

#[test]
fn unlistable_directory_is_kv005() {
    if rustix::process::geteuid().as_raw() == 0 {
        println!("skipping unlistable directory test: root bypasses permissions");
        return;
    }
    let d = tmp();
    let locked = d.path().join("locked");
    mkdir(&locked);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let (seen, _) = scan_all(d.path());
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    let s = find(&seen, "locked");
    assert_eq!(codes(s), [Code::KV005]);
}
