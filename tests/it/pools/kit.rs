//! Recreates the snapshots of fixtures/pools/ (sparse files, then
//! `fallocate`d where the file system allows, with their modes), runs
//! `kvcr pools`, and starts helper processes that hold what KVCR's
//! processes held (this test binary re-run as [`holder`]).

use crate::util::{kvcr, repo};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

pub const JOURNAL: u64 = 104_857_600;
pub const POOL: u64 = 106_496;
pub const MAPPING: u64 = JOURNAL + POOL;

fn b64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// One recreated pool file.
#[derive(Clone, Debug)]
pub struct Made {
    pub path: PathBuf,
    pub name: String,
    /// The original `(st_dev, st_ino)`, which the handback digest covers.
    pub identity: (u64, u64),
    /// This snapshot's share of [`DISK_BUDGET`], given back when the
    /// last file of the snapshot is dropped.
    _permit: std::sync::Arc<Permit>,
}

/// The most bytes the pools tests keep allocated at once. Each snapshot
/// is about 210 MB of `fallocate`d pool files (KVCR allocates its journal
/// and pool whole, and a sparse file is KV407); with one test per core a
/// machine with many cores would otherwise fill a small disk.
pub const DISK_BUDGET: u64 = 256 << 20;

static IN_USE: std::sync::Mutex<u64> = std::sync::Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();

thread_local! {
    /// Snapshots this test's thread holds.
    static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Bytes of [`DISK_BUDGET`] held by one snapshot.
#[derive(Debug)]
struct Permit(u64);

impl Permit {
    /// Waits until `bytes` fit in the budget (a snapshot larger than the
    /// whole budget waits until it is alone). A test that already holds a
    /// snapshot never waits for a second one, so two tests each holding
    /// one cannot wait on each other.
    fn take(bytes: u64) -> Permit {
        let nested = HELD.with(|h| h.replace(h.get() + 1)) > 0;
        let mut used = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        while !nested && *used > 0 && *used + bytes > DISK_BUDGET {
            used = FREED.wait(used).unwrap_or_else(|e| e.into_inner());
        }
        *used += bytes;
        Permit(bytes)
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut used = IN_USE.lock().unwrap_or_else(|e| e.into_inner());
        *used -= self.0;
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
        FREED.notify_all();
    }
}

impl Made {
    pub fn identity_arg(&self) -> String {
        format!("{}:{}", self.identity.0, self.identity.1)
    }
    pub fn generation(&self) -> &str {
        &self.name[self.name.len() - 32..]
    }
}

/// Recreates snapshot `name` into `dir`; returns its files in name order.
pub fn snapshot(name: &str, dir: &Path) -> Vec<Made> {
    let text = std::fs::read_to_string(repo().join(format!("fixtures/pools/{name}.json"))).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let files = doc["files"].as_array().unwrap();
    let total = files.iter().map(|f| f["size"].as_u64().unwrap()).sum();
    let permit = std::sync::Arc::new(Permit::take(total));
    let mut out = Vec::new();
    for f in files {
        let fname = f["name"].as_str().unwrap().to_string();
        let path = dir.join(&fname);
        let file = std::fs::File::create(&path).unwrap();
        let size = f["size"].as_u64().unwrap();
        file.set_len(size).unwrap();
        // Allocated as KVCR allocates it, where the file system allows.
        if let Err(e) = rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size) {
            assert!(
                e != rustix::io::Errno::NOSPC,
                "{}: no room to allocate {size} bytes; the pools tests keep up to {DISK_BUDGET} \
                 bytes allocated under TMPDIR at once",
                path.display()
            );
        }
        for p in f["pages"].as_array().unwrap() {
            file.write_all_at(&b64(p[1].as_str().unwrap()), p[0].as_u64().unwrap())
                .unwrap();
        }
        let mode = u32::from_str_radix(f["mode"].as_str().unwrap(), 8).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        out.push(Made {
            path,
            name: fname,
            identity: (f["st_dev"].as_u64().unwrap(), f["st_ino"].as_u64().unwrap()),
            _permit: permit.clone(),
        });
    }
    out
}

/// The service options of every snapshot (fixtures/pools/README.md).
pub const TERMS: [&str; 6] = [
    "--pool-sizes-gb",
    "0.0001",
    "--pool-layouts",
    ":4096",
    "--compatibility-digest",
    "abc",
];

/// `kvcr pools ARGS --format json --interval-ms 0`: (exit, document, stderr).
pub fn pools(args: &[&str]) -> (i32, Value) {
    let out = kvcr()
        .arg("pools")
        .args(args)
        .args(["--format", "json", "--interval-ms", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not one JSON document ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let code = out.status.code().unwrap();
    assert_eq!(v["exit_status"], code, "{v:#}");
    check_schema(&v);
    (code, v)
}

/// Validates a document against schemas/pools-report.schema.json.
pub fn check_schema(v: &Value) {
    let s: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("schemas/pools-report.schema.json")).unwrap(),
    )
    .unwrap();
    let val = jsonschema::validator_for(&s).unwrap();
    let errs: Vec<String> = val.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errs.is_empty(), "{errs:#?}\n{v:#}");
}

/// The pool entry whose path ends with `name`.
pub fn pool<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no pool {name}: {v:#}"))
}

/// The codes of an entry's findings.
pub fn codes(e: &Value) -> Vec<String> {
    e["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// The finding of `code` in an entry.
pub fn finding<'a>(e: &'a Value, code: &str) -> &'a Value {
    e["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code}: {e:#}"))
}

/// Writes `b` at `off` of `path`.
pub fn poke(path: &Path, off: u64, b: &[u8]) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(b, off)
        .unwrap();
}

/// The handback digest KVCR computes for one pool of `POOL` bytes of
/// 4096-byte blocks named "", digest "abc" (KVCR's canonical_pool_terms, kvcr/recovery_journal.py:566-585): for tests that
/// write a region whose digest must verify.
pub fn digest(generation: &str, identity: (u64, u64), body: &[u8]) -> [u8; 32] {
    let mut t = b"KVCR-HANDBACK\0abc\0".to_vec();
    for i in 0..16 {
        t.push(u8::from_str_radix(&generation[2 * i..2 * i + 2], 16).unwrap());
    }
    t.extend([0x91, 0x84, 0xa4]);
    t.extend(b"name");
    t.push(0xa0);
    t.push(0xaa);
    t.extend(b"size_bytes");
    t.push(0xce);
    t.extend((POOL as u32).to_be_bytes());
    t.push(0xb0);
    t.extend(b"block_size_bytes");
    t.extend([0xcd, 0x10, 0x00]);
    t.push(0xac);
    t.extend(b"offset_bytes");
    t.push(0xce);
    t.extend((JOURNAL as u32).to_be_bytes());
    for v in [JOURNAL, MAPPING, identity.0, identity.1] {
        t.extend(v.to_le_bytes());
    }
    let mut h = Sha256::new();
    h.update(&t);
    h.update(body);
    h.finalize().into()
}

/// A frame as KVCR writes it: `<HHH` header, key, payload.
pub fn frame(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let size = 6 + key.len() + payload.len();
    let mut f = (size as u16).to_le_bytes().to_vec();
    f.extend(1u16.to_le_bytes());
    f.extend((key.len() as u16).to_le_bytes());
    f.extend(key);
    f.extend(payload);
    f
}

/// A record `[[["", slot]], nil, -1]` (KVCR's _RecoveryBlock, kvcr/recovery_journal.py:79-93).
pub fn record(slot: u8) -> Vec<u8> {
    assert!(slot < 128);
    vec![0x93, 0x91, 0x92, 0xa0, slot, 0xc0, 0xff]
}

/// Writes a handback region (header + body) past the mapping, with the
/// digest KVCR would write.
pub fn write_region(m: &Made, body: &[u8]) {
    let d = digest(m.generation(), m.identity, body);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&m.path)
        .unwrap();
    f.set_len(MAPPING).unwrap();
    let mut h = d.to_vec();
    h.extend((body.len() as u64).to_le_bytes());
    h.extend(body);
    f.write_all_at(&h, MAPPING).unwrap();
}

/// Processes holding what KVCR's held: killed on drop.
pub struct Holder {
    child: Child,
    pub pid: u32,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a child that takes `LOCK_SH` (or `LOCK_EX`) on each of `paths`
/// and, with `socket`, binds and listens on it, as KVCR's service does;
/// it holds them until it is killed.
pub fn hold(paths: &[&Path], exclusive: bool, socket: Option<&Path>) -> Holder {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([
        "pools::kit::holder",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env(
        "KVCR_TEST_POOLS_LOCK",
        std::env::join_paths(paths.iter()).unwrap(),
    )
    .env("KVCR_TEST_POOLS_MODE", if exclusive { "ex" } else { "sh" })
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(s) = socket {
        c.env("KVCR_TEST_POOLS_SOCKET", s);
    }
    let mut h = Holder {
        child: c.spawn().unwrap(),
        pid: 0,
    };
    let mut lines = BufReader::new(h.child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the holder ended").unwrap();
        if let Some(rest) = line.strip_prefix("held ") {
            h.pid = rest.trim().parse().unwrap();
            return h;
        }
    }
}

/// Not a test: the child process of [`hold`]. Takes the locks, listens,
/// says `held PID` and waits until its stdin closes or it is killed.
#[test]
#[ignore = "the holder the pools tests start as a child process"]
fn holder() {
    use rustix::fs::{flock, FlockOperation, Mode, OFlags};
    let Some(paths) = std::env::var_os("KVCR_TEST_POOLS_LOCK") else {
        return;
    };
    let op = match std::env::var("KVCR_TEST_POOLS_MODE").as_deref() {
        Ok("ex") => FlockOperation::LockExclusive,
        _ => FlockOperation::LockShared,
    };
    let mut fds = Vec::new();
    for p in std::env::split_paths(&paths).filter(|p| !p.as_os_str().is_empty()) {
        let fd = rustix::fs::open(&p, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).unwrap();
        flock(&fd, op).unwrap();
        fds.push(fd);
    }
    let _listener = std::env::var_os("KVCR_TEST_POOLS_SOCKET")
        .map(|s| std::os::unix::net::UnixListener::bind(s).unwrap());
    println!("held {}", std::process::id());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
