//! Crafted names and trees (an adversarial review's findings): a claimed
//! world is never enumerated past `FLAT_WORLD_MAX`, an SGLang name's rank
//! arithmetic cannot overflow, a directory under a block's name is KV309,
//! and `lnk/` is the symlink `lnk`, never followed.

use super::{assert_code, offload, set};
use std::time::{Duration, Instant};

/// Runs `kvcr offload` and says how long it took (the bound is generous:
/// the unbounded versions took minutes and gigabytes).
fn timed(paths: &[&std::path::Path], args: &[&str]) -> (i32, serde_json::Value, Duration) {
    let t = Instant::now();
    let (code, v) = offload(paths, args);
    (code, v, t.elapsed())
}

#[test]
fn an_llmd_namespace_without_config_claiming_rank_u32_max_is_kv310_not_enumerated() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("m_0123456789ab_r0")).unwrap();
    std::fs::create_dir(d.path().join("m_0123456789ab_r4294967295")).unwrap();
    let (code, v, took) = timed(&[d.path()], &[]);
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(code, 1, "{v:#}");
    let s = set(&v, "llmd");
    assert_code(s, "KV310", "reject");
    let msg = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV310")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("4294967296 ranks") && msg.contains("4096"),
        "{msg}"
    );
    assert!(s["ranks"]["expected"].is_null(), "{s:#}");
}

#[test]
fn a_nested_llmd_tree_claiming_a_million_ranks_is_kv310_and_small() {
    let d = tempfile::tempdir().unwrap();
    for i in 10..20u64 {
        let h = format!("abcde{i:011x}");
        let dir = d
            .path()
            .join("m/block_size_16_blocks_per_file_1/tp_1048576_pp_size_1_pcp_size_1/rank_0")
            .join("bfloat16")
            .join(&h[..3])
            .join(&h[3..5]);
        std::fs::create_dir_all(&dir).unwrap();
        let f = std::fs::File::create(dir.join(format!("{h}.bin"))).unwrap();
        f.set_len(16 << 20).unwrap();
    }
    let out = crate::util::kvcr()
        .args(["offload", "--format", "json", "--progress", "never"])
        .arg(d.path())
        .output()
        .unwrap();
    assert!(out.stdout.len() < 1 << 20, "{} bytes", out.stdout.len());
    let (code, v, took) = timed(&[d.path()], &[]);
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(code, 1, "{v:#}");
    assert_code(set(&v, "llmd-nested"), "KV310", "reject");
}

#[test]
fn an_sglang_name_whose_rank_arithmetic_overflows_u64_is_refused_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let h = "ab".repeat(32);
    std::fs::write(
        d.path().join(format!(
            "{h}_m_0_4294967295_4294967295_0_cp0_4294967295.bin"
        )),
        b"x",
    )
    .unwrap();
    let (code, v) = offload(&[d.path()], &["--model", "m"]);
    assert_eq!(code, 1, "{v:#}");
    assert_code(set(&v, "sglang"), "KV310", "reject");
}

#[test]
fn a_directory_under_a_block_name_is_kv309() {
    // LMCache local disk: the name of worker 0's chunk, a directory.
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("m@1@0@ab@bfloat16.pt")).unwrap();
    let (code, v) = offload(&[d.path()], &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_code(set(&v, "lmcache"), "KV309", "reject");
    // LMCache GDS: a directory where a data file belongs.
    let d = tempfile::tempdir().unwrap();
    let p = super::gds::chunk(d.path(), "m", 1, 0, 6699, true);
    std::fs::remove_file(&p).unwrap();
    std::fs::create_dir(&p).unwrap();
    let (code, v) = offload(&[d.path()], &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_code(set(&v, "lmcache-gds"), "KV309", "reject");
}

#[test]
fn a_symlinked_path_with_a_trailing_slash_is_refused_as_a_symlink() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("real")).unwrap();
    std::os::unix::fs::symlink("real", d.path().join("lnk")).unwrap();
    for name in ["lnk", "lnk/", "lnk//"] {
        let out = crate::util::kvcr()
            .args(["offload", "--progress", "never"])
            .arg(d.path().join(name))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is a symlink"), "{name}: {err}");
    }
    // A real directory with trailing slashes is that directory.
    let (code, v) = offload(&[&d.path().join("real//")], &[]);
    assert_eq!(code, 0, "{v:#}");
}
