//! vLLM and llm-d namespaces (docs/format.md §15.2): the digest, ranks,
//! sizes, staging, links and special files, each with its code, verdict,
//! headline and exit status.

use super::kit::{self, block, block_path, full, hash, llmd_fields, namespace, vllm_fields};
use super::{assert_code, codes, offload, set};
use std::path::Path;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn a_complete_vllm_namespace_is_ok_and_says_ranks_are_not_checkable() {
    let d = tmp();
    let base = full(d.path(), &vllm_fields("org/Model-7B", 2), &[0], 4, 8192);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0);
    let s = set(&v, "vllm");
    assert_eq!(s["path"], base.display().to_string());
    assert_eq!(s["blocks"]["total"], 4);
    assert_eq!(s["blocks"]["complete"], 4);
    assert_eq!(s["ranks"]["expected"], serde_json::Value::Null);
    assert_eq!(s["ranks"]["checkable"], false);
    assert_code(s, "KV315", "notice");
    assert_code(s, "KV316", "notice");
    assert_eq!(s["identity"]["model_name"], "org/Model-7B");
    assert_eq!(s["bytes"], 4 * 8192);
    // With the row size given, the geometry notice goes.
    let (st, v) = offload(&[d.path()], &["--kv-bytes-per-chunk", "8192"]);
    assert_eq!(st, 0);
    assert!(!codes(set(&v, "vllm")).iter().any(|(c, _)| c == "KV316"));
    // A namespace directory named as the PATH reads the same set.
    let (st, v) = offload(&[&base], &[]);
    assert_eq!(st, 0);
    assert_eq!(set(&v, "vllm")["blocks"]["complete"], 4);
}

#[test]
fn vllm_sizes_short_long_and_misaligned() {
    let d = tmp();
    let base = full(d.path(), &vllm_fields("m", 1), &[0], 4, 8192);
    block(&base, 0, 1, 0, 4096);
    let (st, v) = offload(&[d.path()], &["--kv-bytes-per-chunk", "8192"]);
    assert_eq!(st, 1);
    let s = set(&v, "vllm");
    assert_code(s, "KV304", "reject");
    assert_eq!(s["blocks"]["damaged"], 1);
    let f = &s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV304")
        .unwrap();
    assert_eq!(f["expected"], "8192 bytes");
    assert_eq!(f["found"], "4096 bytes on rank 0");
    assert_eq!(s["listed"]["blocks"][0]["key"], hash(1));
    block(&base, 0, 1, 0, 8192);
    block(&base, 0, 2, 0, 12288);
    let (st, v) = offload(&[d.path()], &["--kv-bytes-per-chunk", "8192"]);
    assert_eq!(st, 1);
    assert_code(set(&v, "vllm"), "KV305", "reject");
    // Without geometry: the namespace's common size, and 4096 alignment.
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "vllm"), "KV305", "reject");
    block(&base, 0, 2, 0, 8000);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "vllm"), "KV306", "reject");
}

#[test]
fn config_json_missing_truncated_or_mismatched_is_unverifiable() {
    let d = tmp();
    let base = full(d.path(), &vllm_fields("org/M", 1), &[0], 2, 4096);
    // Truncated by a killed writer: kept forever by the engine.
    let text = std::fs::read(base.join("config.json")).unwrap();
    std::fs::write(base.join("config.json"), &text[..100]).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = &v["sets"][0];
    assert_code(s, "KV301", "reject");
    assert!(s["cause"].as_str().unwrap().contains("not JSON"));
    // Blocks are still counted.
    assert_eq!(s["blocks"]["total"], 2);
    std::fs::remove_file(base.join("config.json")).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(&v["sets"][0], "KV301", "reject");
    assert!(v["sets"][0]["cause"].as_str().unwrap().contains("missing"));
    // Edited after the directory was named: the digests differ.
    let mut f = vllm_fields("org/M", 1);
    let want = kit::base_name(&f);
    f["tp_size"] = 2.into();
    std::fs::write(
        base.join("config.json"),
        serde_json::to_string_pretty(&f).unwrap(),
    )
    .unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = set(&v, "vllm");
    assert_code(s, "KV302", "reject");
    let finding = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "KV302")
        .unwrap();
    assert_eq!(finding["found"], &want[want.len() - 12..]);
    assert_eq!(
        finding["expected"],
        &kit::base_name(&f)[kit::base_name(&f).len() - 12..]
    );
    // A float the producer never writes: unverifiable, never guessed.
    std::fs::write(
        base.join("config.json"),
        r#"{"model_name": "org/M", "tp_size": 1.0}"#,
    )
    .unwrap();
    let (_, v) = offload(&[d.path()], &[]);
    assert_code(&v["sets"][0], "KV301", "reject");
}

#[test]
fn the_reference_test_vector_names_the_namespace() {
    assert_eq!(
        kit::base_name(&llmd_fields("org/Model-7B", 2)),
        "org_Model-7B_89d743954de2"
    );
    let d = tmp();
    let base = full(d.path(), &llmd_fields("org/Model-7B", 2), &[0, 1], 1, 4096);
    assert!(base.ends_with("org_Model-7B_89d743954de2"));
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    assert_eq!(set(&v, "llmd")["identity"]["digest"], "89d743954de2");
}

#[test]
fn llmd_rank_completeness_naming_the_missing_rank() {
    let d = tmp();
    let base = full(d.path(), &llmd_fields("m", 4), &[0, 1, 2, 3], 3, 4096);
    std::fs::remove_file(block_path(&base, 2, &hash(1), 0)).unwrap();
    let (st, v) = offload(&[d.path()], &["--list", "5"]);
    assert_eq!(st, 1);
    let s = set(&v, "llmd");
    assert_code(s, "KV303", "reject");
    assert_eq!(s["blocks"]["incomplete"], 1);
    assert_eq!(s["blocks"]["complete"], 2);
    assert_eq!(s["ranks"]["expected"], serde_json::json!([0, 1, 2, 3]));
    let b = &s["listed"]["blocks"][0];
    assert_eq!(b["missing_ranks"], serde_json::json!([2]));
    assert_eq!(b["present_ranks"], serde_json::json!([0, 1, 3]));
    assert!(s["cause"].as_str().unwrap().contains("rank 2: 1"));
    // A rank at or above tp·pp·pcp.
    block(&base, 4, 0, 0, 4096);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "llmd"), "KV310", "reject");
}

#[test]
fn llmd_sizes_disagreeing_ranks_and_partial_chunks() {
    let d = tmp();
    let base = full(d.path(), &llmd_fields("m", 2), &[0, 1], 2, 4096 * 16);
    block(&base, 1, 0, 0, 4096 * 3);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "llmd"), "KV307", "reject");
    // Agreed by both ranks: a partial chunk (k < gpu_blocks_per_file).
    block(&base, 0, 0, 0, 4096 * 3);
    let (st, v) = offload(&[d.path()], &["--bytes-per-block", "4096"]);
    assert_eq!(st, 0, "{v:#}");
    assert_code(set(&v, "llmd"), "KV313", "notice");
    // With geometry: more than gpu_blocks_per_file blocks is long,
    // a part of a block misaligned.
    block(&base, 0, 1, 0, 4096 * 17);
    block(&base, 1, 1, 0, 4096 * 17);
    let (st, v) = offload(&[d.path()], &["--bytes-per-block", "0=4096"]);
    assert_eq!(st, 1);
    assert_code(set(&v, "llmd"), "KV305", "reject");
    block(&base, 0, 1, 0, 4000);
    block(&base, 1, 1, 0, 4000);
    let (st, v) = offload(&[d.path()], &["--bytes-per-block", "4096"]);
    assert_eq!(st, 1);
    assert_code(set(&v, "llmd"), "KV306", "reject");
}

#[test]
fn llmd_or_vllm_022_is_ambiguous_and_producer_settles_it() {
    let d = tmp();
    full(d.path(), &llmd_fields("m", 2), &[0], 2, 4096);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = set(&v, "llmd-or-vllm-0.22");
    assert_code(s, "KV314", "notice");
    let msg = s["findings"][0]["message"].as_str().unwrap();
    assert!(msg.contains("--producer"), "{msg}");
    assert!(msg.contains("missing on ranks 1-1"), "{msg}");
    let (st, v) = offload(&[d.path()], &["--producer", "llmd"]);
    assert_eq!(st, 1);
    assert_code(set(&v, "llmd"), "KV303", "reject");
}

#[test]
fn symlinks_and_special_files_are_never_followed_or_opened() {
    let d = tmp();
    let base = full(d.path(), &vllm_fields("m", 1), &[0], 2, 4096);
    let p = block_path(&base, 0, &hash(0), 0);
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    assert_code(set(&v, "vllm"), "KV308", "reject");
    std::fs::remove_file(&p).unwrap();
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1);
    let s = set(&v, "vllm");
    assert_code(s, "KV309", "reject");
    assert!(s["cause"].as_str().unwrap().contains("FIFO"));
}

#[test]
fn staging_probe_empty_and_version_notices() {
    let d = tmp();
    let base = full(d.path(), &vllm_fields("m", 1), &[0], 2, 4096);
    let blk = block_path(&base, 0, &hash(7), 0);
    std::fs::create_dir_all(blk.parent().unwrap()).unwrap();
    let mut tmpname = blk.clone().into_os_string();
    tmpname.push("_7447066661002759665.tmp");
    std::fs::write(&tmpname, b"").unwrap();
    std::fs::write(base.join(".o_direct_probe_12.tmp"), vec![0u8; 4096]).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = set(&v, "vllm");
    assert_code(s, "KV311", "notice");
    assert_code(s, "KV318", "notice");
    assert_eq!(s["staging"][0]["empty"], true);
    assert_eq!(s["staging"][0]["rank"], 0);
    assert_eq!(s["staging_count"], 1);
    // An empty namespace: config.json and no rank directory.
    let e = tmp();
    namespace(e.path(), &vllm_fields("n", 1));
    let (st, v) = offload(&[e.path()], &[]);
    assert_eq!(st, 0);
    assert_code(set(&v, "vllm"), "KV319", "notice");
    // Agnostic without canonical_format (≤ 0.33 direct layout), and a
    // group id beyond kv_cache_groups.
    let a = tmp();
    let mut f = vllm_fields("n", 1);
    f.as_object_mut().unwrap().remove("parallel_agnostic");
    let base = full(a.path(), &f, &[0], 1, 4096);
    block(&base, 0, 3, 5, 4096);
    let (st, v) = offload(&[a.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    assert_code(set(&v, "vllm"), "KV320", "notice");
    assert_code(set(&v, "vllm"), "KV321", "notice");
}

#[test]
fn foreign_entries_are_listed_never_skipped() {
    let d = tmp();
    full(d.path(), &vllm_fields("m", 1), &[0], 1, 4096);
    std::fs::write(d.path().join("notes.txt"), b"x").unwrap();
    std::fs::create_dir(d.path().join("mooncake")).unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0);
    let s = set(&v, "unattributed");
    assert_code(s, "KV312", "notice");
    assert_eq!(s["foreign_count"], 2);
    let names: Vec<&str> = s["foreign"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(names.iter().any(|n| n.ends_with("/notes.txt")));
    // A vLLM _r1 is foreign to the namespace.
    let base = d.path().join(kit::base_name(&vllm_fields("m", 1)));
    block(&base, 1, 0, 0, 4096);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0);
    let s = set(&v, "vllm");
    assert_code(s, "KV312", "notice");
    assert!(s["foreign"][0].as_str().unwrap().ends_with("_r1"));
}

#[test]
fn what_cannot_be_read_is_exit_2() {
    let d = tmp();
    let out = crate::util::kvcr()
        .args(["offload", "--format", "json"])
        .arg(d.path().join("absent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "kvcr.error/v1");
    let link = d.path().join("link");
    std::os::unix::fs::symlink(d.path(), &link).unwrap();
    let out = crate::util::kvcr()
        .args(["offload"])
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symlink"));
    if crate::util::is_root() {
        return; // root lists any directory
    }
    let base = full(d.path(), &llmd_fields("m", 2), &[0, 1], 1, 4096);
    let r1 = block_path(&base, 1, &hash(0), 0);
    let bucket = r1.parent().unwrap().parent().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bucket, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = crate::util::kvcr()
        .args(["offload"])
        .arg(d.path())
        .output()
        .unwrap();
    std::fs::set_permissions(bucket, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&*bucket.to_string_lossy()));
}

#[test]
fn threads_give_the_same_answer() {
    let d = tmp();
    let base = full(d.path(), &llmd_fields("m", 2), &[0, 1], 40, 4096);
    std::fs::remove_file(block_path(&base, 1, &hash(3), 0)).unwrap();
    let (_, one) = offload(&[d.path()], &["--threads", "1"]);
    let (_, many) = offload(&[d.path()], &["--threads", "8"]);
    assert_eq!(one["sets"], many["sets"]);
    let _ = Path::new("");
}
