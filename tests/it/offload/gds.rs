//! LMCache GDS trees (docs/format.md §15.7): data files judged by their
//! own headers, sidecars that must equal them, orphans and missing ones,
//! bucket directories from the decimal hash, temps with their rank.

use super::{assert_code, offload, set};
use std::path::{Path, PathBuf};

/// LMCache 0.5.6's `pack_metadata` (`gds_backend.py:101-124`): u64 LE 4088,
/// then `json.dumps` of the tensor's metadata padded with spaces.
pub fn header(shape: &[u64], nbytes: u64, version: &str) -> Vec<u8> {
    let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
    let json = format!(
        "{{\"kvcache\": {{\"dtype\": \"BF16\", \"shape\": [{}], \"data_offsets\": [0, {nbytes}], \
         \"fmt\": 1, \"__metadata__\": {{\"lmcache_version\": \"{version}\"}}}}}}",
        shape.join(", ")
    );
    let mut b = 4088u64.to_le_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b.resize(4096, b' ');
    b
}

/// Writes one chunk of [2, 2, 16, 16] BF16 (2048 payload bytes) for
/// `worker` of world `ws`, hash `h` (a Python int), with its sidecar when
/// asked; returns the data file's path.
pub fn chunk(root: &Path, model: &str, ws: u32, worker: u32, h: i64, sidecar: bool) -> PathBuf {
    let hex = if h < 0 {
        format!("-{:x}", h.unsigned_abs())
    } else {
        format!("{h:x}")
    };
    let key = format!("{model}@{ws}@{worker}@{hex}@bfloat16");
    let quoted: String = key
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    // os.path.join(base, str(h)[0:2], str(h)[2:4], name): an empty second
    // level is dropped.
    let dec = h.to_string();
    let dir = root
        .join(&dec[..dec.len().min(2)])
        .join(dec.get(2..dec.len().min(4)).unwrap_or(""));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{quoted}.kvcache.safetensors"));
    let head = header(&[2, 2, 16, 16], 2048, "1");
    let mut data = head.clone();
    data.extend(std::iter::repeat_n(3u8, 2048));
    std::fs::write(&p, data).unwrap();
    if sidecar {
        std::fs::write(sidecar_of(&p), head).unwrap();
    }
    p
}

pub fn sidecar_of(p: &Path) -> PathBuf {
    PathBuf::from(format!("{}.metadata", p.display()))
}

const H: i64 = -0x168c883837dc43ef;

#[test]
fn a_whole_set_and_each_kind_of_damage() {
    let d = tempfile::tempdir().unwrap();
    for w in 0..2 {
        chunk(d.path(), "org/M", 2, w, H, true);
        chunk(d.path(), "org/M", 2, w, 77_777, true);
    }
    // The reference's example path: -1/62/ for hash -1624823340610634735.
    assert!(d.path().join("-1/62").is_dir());
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = set(&v, "lmcache-gds");
    assert_eq!(s["blocks"]["complete"], 2);
    assert_eq!(s["identity"]["model"], "org/M");
    assert!(s["findings"].as_array().unwrap().is_empty(), "{s:#}");
    // A sidecar that disagrees with its header (the engine believes it).
    let p = chunk(d.path(), "org/M", 2, 1, H, true);
    std::fs::write(sidecar_of(&p), header(&[2, 2, 8, 16], 1024, "1")).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV353", "reject");
    assert_eq!(s["blocks"]["damaged"], 1);
    let f = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV353")
        .unwrap();
    assert!(f["expected"].as_str().unwrap().contains("6144"), "{f:#}");
    assert!(f["found"].as_str().unwrap().contains("5120"), "{f:#}");
    // Missing sidecar; then a sidecar without its data (and a rank missing).
    std::fs::remove_file(sidecar_of(&p)).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "lmcache-gds"), "KV351", "reject");
    std::fs::write(sidecar_of(&p), header(&[2, 2, 16, 16], 2048, "1")).unwrap();
    std::fs::remove_file(&p).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV352", "reject");
    assert_code(s, "KV303", "reject");
    // A long data file: the header's bytes are the rule, no option needed.
    let p = chunk(d.path(), "org/M", 2, 1, H, true);
    let mut data = std::fs::read(&p).unwrap();
    data.push(0);
    std::fs::write(&p, data).unwrap();
    let (st, v) = offload(&[d.path()], &["--producer", "lmcache"]);
    assert_eq!(st, 1);
    assert_code(set(&v, "lmcache-gds"), "KV305", "reject");
}

#[test]
fn headers_names_buckets_and_temps() {
    let d = tempfile::tempdir().unwrap();
    for w in 0..2 {
        chunk(d.path(), "m", 2, w, H, true);
    }
    // A data file shorter than its header: the header cannot be read.
    let p = chunk(d.path(), "m", 2, 0, 55_555, true);
    chunk(d.path(), "m", 2, 1, 55_555, true);
    std::fs::write(&p, b"short").unwrap();
    // A temp left by a killed writer, with the key's rank.
    let t = PathBuf::from(format!("{}.tmp0a1b2c3d", p.display()));
    std::fs::write(&t, vec![0u8; 4096 + 2048]).unwrap();
    // A chunk in the wrong buckets, and a name LMCache never writes.
    let q = chunk(d.path(), "m", 2, 0, 66_666, true);
    let wrong = d.path().join("-1/62").join(q.file_name().unwrap());
    std::fs::rename(&q, &wrong).unwrap();
    std::fs::write(d.path().join("-1/62/notes.txt"), b"x").unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV354", "reject");
    assert_code(s, "KV311", "notice");
    assert_code(s, "KV312", "notice");
    assert_eq!(s["staging"][0]["rank"], 0);
    assert_code(set(&v, "unattributed"), "KV312", "notice");
}

#[test]
fn short_hashes_and_wekafs_names() {
    let d = tempfile::tempdir().unwrap();
    // str(123) puts the chunk in 12/3/; str(42) in 42/ with no second level.
    for w in 0..2 {
        chunk(d.path(), "m", 2, w, 123, true);
        chunk(d.path(), "m", 2, w, 42, true);
    }
    assert!(d.path().join("12/3").is_dir());
    assert!(d.path().join("42").is_dir() && !d.path().join("42/0").exists());
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    assert_eq!(set(&v, "lmcache-gds")["blocks"]["complete"], 2);
    // A 42 chunk inside a second level is misplaced (foreign, named).
    let p = chunk(d.path(), "m", 2, 0, 42, true);
    std::fs::create_dir(d.path().join("42/00")).unwrap();
    std::fs::rename(&p, d.path().join("42/00").join(p.file_name().unwrap())).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV312", "notice");
    // Where LMCache looks, the sidecar stays without its data file.
    assert_code(s, "KV352", "reject");
    assert_code(s, "KV303", "reject");
    // wekafs: .weka1 data files, listed by their own names.
    let w = tempfile::tempdir().unwrap();
    for r in 0..2 {
        let p = chunk(w.path(), "m", 2, r, H, r == 0);
        let weka = PathBuf::from(
            p.display()
                .to_string()
                .replace(".kvcache.safetensors", ".weka1"),
        );
        std::fs::rename(&p, &weka).unwrap();
        if r == 0 {
            std::fs::rename(sidecar_of(&p), sidecar_of(&weka)).unwrap();
        }
    }
    let (st, v) = offload(&[w.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV351", "reject");
    let listed = s["listed"]["blocks"][0]["path"].as_str().unwrap();
    assert!(listed.ends_with(".weka1"), "{listed}");
}

#[test]
fn sidecars_that_are_links_or_fifos_are_never_followed_or_opened() {
    let d = tempfile::tempdir().unwrap();
    let a = chunk(d.path(), "m", 2, 0, H, false);
    let b = chunk(d.path(), "m", 2, 1, H, false);
    std::os::unix::fs::symlink("/etc/hostname", sidecar_of(&a)).unwrap();
    let c = std::ffi::CString::new(sidecar_of(&b).as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    // A FIFO opened for reading would block: the run finishing is the proof.
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "lmcache-gds");
    assert_code(s, "KV308", "reject");
    assert_code(s, "KV309", "reject");
    assert_eq!(s["blocks"]["damaged"], 1);
}
