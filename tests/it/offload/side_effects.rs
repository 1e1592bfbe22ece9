//! Never a side effect (docs/format.md §15.3): every entry's bytes, size,
//! atime, mtime and ctime unchanged after a run, and under strace no data
//! file opened but LMCache GDS headers, nothing written but stdout and stderr, nothing created,
//! removed, renamed, truncated, locked or re-timed, every directory opened
//! with O_NOFOLLOW and O_NOATIME.

use super::kit::{block, block_path, full, hash, llmd_fields, mp_name, vllm_fields};
use crate::util::{bin, missing};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

type Snap = BTreeMap<PathBuf, [i64; 7]>;

/// Every entry below `root`, listed once (listing a directory may touch
/// its atime: the times are set after this).
fn entries(root: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .map(|e| e.unwrap().path().to_path_buf())
        .collect()
}

/// Each entry's times and size, by lstat alone (nothing listed or read).
fn snapshot(paths: &[PathBuf]) -> Snap {
    paths
        .iter()
        .map(|p| {
            let m = std::fs::symlink_metadata(p).unwrap();
            (
                p.clone(),
                [
                    m.atime(),
                    m.atime_nsec(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                    m.size() as i64,
                ],
            )
        })
        .collect()
}

/// The bytes of every regular file, read with O_NOATIME (the test owns them).
fn contents(paths: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = BTreeMap::new();
    for p in paths {
        if std::fs::symlink_metadata(p).unwrap().file_type().is_file() {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOATIME)
                .open(p)
                .unwrap();
            let mut v = Vec::new();
            f.read_to_end(&mut v).unwrap();
            out.insert(p.clone(), v);
        }
    }
    out
}

/// A root with each producer's damage: every kind of entry kvcr meets.
fn tree(root: &Path) {
    let base = full(root, &llmd_fields("m", 2), &[0, 1], 3, 4096);
    std::fs::remove_file(block_path(&base, 1, &hash(0), 0)).unwrap();
    let v = full(root, &vllm_fields("v", 1), &[0], 2, 4096);
    block(&v, 0, 5, 0, 100);
    let fifo = block_path(&v, 0, &hash(9), 0);
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let link = block_path(&v, 0, &hash(8), 0);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", link).unwrap();
    std::fs::write(root.join(mp_name("m", 2, 0, 0, 0, None)), b"x").unwrap();
    std::fs::write(root.join("foreign.txt"), b"x").unwrap();
    // LMCache GDS: data files and sidecars are opened for their 4096-byte
    // headers, never anything else.
    for w in 0..2 {
        super::gds::chunk(root, "g", 2, w, -0x168c883837dc43ef, w == 0);
    }
    // llm-d <= v0.8.1's nested layout, and a foreign tree the search for
    // it looks into (names only) and leaves.
    for r in 0..2 {
        let leaf = root
            .join("org/M/block_size_16_blocks_per_file_256/tp_2_pp_size_1_pcp_size_1")
            .join(format!("rank_{r}/bfloat16/abc/de"));
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(leaf.join("abcde0123456789f.bin"), b"x").unwrap();
    }
    std::fs::create_dir_all(root.join("gds/10/00")).unwrap();
    std::fs::write(root.join("gds/10/00/k.kvcache.safetensors"), b"x").unwrap();
}

#[test]
fn nothing_it_reads_changes() {
    let d = tempfile::tempdir().unwrap();
    tree(d.path());
    let paths = entries(d.path());
    let bytes = contents(&paths);
    // atime = mtime, long ago: any read or listing that touches atime
    // (relatime included) would move it.
    for p in &paths {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let ts = [
            libc::timespec {
                tv_sec: 1_000_000_000,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: 1_000_000_000,
                tv_nsec: 0,
            },
        ];
        let rc = unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                ts.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        assert_eq!(rc, 0);
    }
    let before = snapshot(&paths);
    let (st, v) = super::offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    // The nested layout was walked, the foreign tree only looked into.
    super::set(&v, "llmd-nested");
    for format in ["table", "prometheus"] {
        let out = crate::util::kvcr()
            .arg("offload")
            .arg(d.path())
            .args(["--format", format, "--threads", "3"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
    }
    let after = snapshot(&paths);
    let changed: Vec<String> = before
        .iter()
        .filter(|(p, v)| after.get(*p) != Some(v))
        .map(|(p, v)| format!("{}: {v:?} -> {:?}", p.display(), after.get(p)))
        .collect();
    assert!(changed.is_empty(), "changed: {changed:#?}");
    assert_eq!(entries(d.path()), paths, "nothing created or removed");
    assert!(contents(&paths) == bytes, "the bytes changed");
}

#[test]
fn under_strace_only_directories_and_config_json_are_opened() {
    if Command::new("strace").arg("-V").output().is_err() {
        missing("needs strace (apt-get install strace)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    tree(d.path());
    let log = d.path().with_extension("strace");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args([
            "-e",
            concat!(
                "trace=open,openat,openat2,creat,unlink,unlinkat,rename,renameat,renameat2,",
                "mkdir,mkdirat,rmdir,utimensat,utimes,futimesat,flock,fcntl,truncate,",
                "ftruncate,setxattr,lsetxattr,fsetxattr,chmod,fchmod,fchmodat,link,linkat,",
                "symlink,symlinkat,write,pwrite64,writev"
            ),
        ])
        .arg(bin())
        .arg("offload")
        .arg(d.path())
        .args(["--format", "json", "--progress", "never", "--threads", "4"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("PTRACE") || stderr.contains("Operation not permitted") {
        // A container that refuses ptrace: a fact of the machine.
        crate::util::skip_fact(&format!("strace cannot trace here: {stderr}"));
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    let root = d.path().display().to_string();
    let mut opened = 0;
    for line in text.lines() {
        let call = line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .split('(')
            .next()
            .unwrap_or("");
        assert!(
            !matches!(
                call,
                "creat"
                    | "unlink"
                    | "unlinkat"
                    | "rename"
                    | "renameat"
                    | "renameat2"
                    | "mkdir"
                    | "mkdirat"
                    | "rmdir"
                    | "utimensat"
                    | "utimes"
                    | "futimesat"
                    | "flock"
                    | "truncate"
                    | "ftruncate"
                    | "setxattr"
                    | "lsetxattr"
                    | "fsetxattr"
                    | "chmod"
                    | "fchmod"
                    | "fchmodat"
                    | "link"
                    | "linkat"
                    | "symlink"
                    | "symlinkat"
            ),
            "{line}"
        );
        if call == "fcntl" {
            assert!(
                !line.contains("F_SETLK") && !line.contains("F_OFD"),
                "{line}"
            );
        }
        if matches!(call, "write" | "pwrite64" | "writev") {
            let fd = line.split('(').nth(1).unwrap().split(',').next().unwrap();
            assert!(fd == "1" || fd == "2", "{line}");
        }
        if matches!(call, "open" | "openat" | "openat2")
            && !line.contains("/lib")
            && !line.contains("/proc")
            && !line.contains("/etc/")
            && !line.contains("/sys/")
        {
            // Relative to a directory fd or under the root: ours.
            let name = line.split('"').nth(1).unwrap_or("");
            if name.starts_with('/') && !name.starts_with(&*root) {
                continue;
            }
            opened += 1;
            assert!(line.contains("O_NOFOLLOW"), "{line}");
            let header = name.ends_with(".kvcache.safetensors")
                || name.ends_with(".kvcache.safetensors.metadata");
            if header {
                assert!(
                    line.contains("O_RDONLY") && line.contains("O_NONBLOCK"),
                    "{line}"
                );
            }
            if name != "config.json" && name != "." && !header {
                assert!(line.contains("O_DIRECTORY"), "a file opened: {line}");
            }
            assert!(
                !line.contains("O_WRONLY") && !line.contains("O_RDWR") && !line.contains("O_CREAT"),
                "{line}"
            );
            assert!(
                line.contains("O_NOATIME") || line.contains("EPERM") || line.contains("= -1"),
                "{line}"
            );
        }
    }
    assert!(opened > 5, "too few opens traced:\n{text}");
}
