//! llm-d ≤ v0.8.1's nested layout (docs/format.md §15.1, §15.2): found
//! below a root entry within its bounds, judged per `tp_…` directory and
//! dtype, and what is not the layout stays foreign.

use super::{assert_code, codes, offload, set};
use std::path::{Path, PathBuf};

const MIB16: u64 = 16 * 1024 * 1024;

/// A v0.8.1 file: `<root>/<model>/block_size_16_blocks_per_file_256/tp_<tp>_pp_size_1_pcp_size_1/rank_<r>/bfloat16/<3>/<2>/<16 hex>.bin`, sparse.
fn file(root: &Path, model: &str, tp: u32, r: u32, i: u32, size: u64) -> PathBuf {
    let h = &super::kit::hash(i)[..16];
    let p = root
        .join(model)
        .join("block_size_16_blocks_per_file_256")
        .join(format!("tp_{tp}_pp_size_1_pcp_size_1"))
        .join(format!("rank_{r}"))
        .join("bfloat16")
        .join(&h[..3])
        .join(&h[3..5])
        .join(format!("{h}.bin"));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::File::create(&p).unwrap().set_len(size).unwrap();
    p
}

fn tp2(root: &Path, model: &str) {
    for r in 0..2 {
        for i in 0..3 {
            file(root, model, 2, r, i, MIB16);
        }
    }
}

#[test]
fn a_complete_nested_set_is_ok_with_the_legacy_notice() {
    let d = tempfile::tempdir().unwrap();
    tp2(d.path(), "org/Model-7B");
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = set(&v, "llmd-nested");
    assert!(s["path"]
        .as_str()
        .unwrap()
        .ends_with("org/Model-7B/block_size_16_blocks_per_file_256/tp_2_pp_size_1_pcp_size_1"));
    assert_eq!(s["identity"]["model_name"], "org/Model-7B");
    assert_eq!(s["identity"]["tp_size"], 2);
    assert_eq!(s["ranks"]["expected"], serde_json::json!([0, 1]));
    assert_eq!(s["blocks"]["complete"], 3);
    assert_eq!(codes(s), vec![("KV323".into(), "notice".into())]);
    assert_code(s, "KV323", "notice");
    // --producer llmd reads it too; the other producers do not.
    let (st, v) = offload(&[d.path()], &["--producer", "llmd"]);
    assert_eq!(st, 0);
    set(&v, "llmd-nested");
    let (_, v) = offload(&[d.path()], &["--producer", "vllm"]);
    assert!(v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["producer"] != "llmd-nested"));
}

#[test]
fn a_key_missing_on_a_rank_a_short_file_and_a_rank_beyond_the_world_reject() {
    let d = tempfile::tempdir().unwrap();
    tp2(d.path(), "m");
    std::fs::remove_file(file(d.path(), "m", 2, 1, 0, MIB16)).unwrap();
    file(d.path(), "m", 2, 0, 1, 4096);
    file(d.path(), "m", 2, 2, 2, MIB16);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "llmd-nested");
    assert_code(s, "KV303", "reject");
    assert_code(s, "KV304", "reject");
    assert_code(s, "KV307", "reject");
    assert_code(s, "KV310", "reject");
    assert_eq!(s["cause_code"], "KV303");
    assert_eq!(s["blocks"]["incomplete"], 1);
    assert_eq!(s["blocks"]["damaged"], 1);
}

#[test]
fn a_temp_a_symlink_and_a_stray_name_inside_the_tree_are_reported() {
    let d = tempfile::tempdir().unwrap();
    tp2(d.path(), "m");
    let f = file(d.path(), "m", 2, 1, 1, MIB16);
    let tmp = PathBuf::from(format!("{}_3405691582.tmp", f.display()));
    std::fs::write(&tmp, b"").unwrap();
    std::fs::remove_file(&f).unwrap();
    let g = file(d.path(), "m", 2, 0, 2, MIB16);
    std::fs::remove_file(&g).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", &g).unwrap();
    std::fs::write(g.parent().unwrap().join("notes.txt"), b"x").unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 1, "{v:#}");
    let s = set(&v, "llmd-nested");
    assert_code(s, "KV303", "reject");
    assert_code(s, "KV308", "reject");
    assert_code(s, "KV311", "notice");
    assert_code(s, "KV312", "notice");
    // A symlink is never followed: the target is untouched and unread.
    assert_eq!(std::fs::read_link(&g).unwrap(), Path::new("/etc/hostname"));
}

#[test]
fn what_is_not_the_layout_stays_foreign() {
    let d = tempfile::tempdir().unwrap();
    // Beside a find: a directory that holds none.
    tp2(d.path(), "org/Model-7B");
    std::fs::create_dir_all(d.path().join("org/other/deeper")).unwrap();
    // A model directory holding a file is not a model's.
    std::fs::create_dir_all(d.path().join("x/y")).unwrap();
    file(d.path(), "x/y", 2, 0, 0, MIB16);
    std::fs::write(d.path().join("x/README"), b"x").unwrap();
    // Deeper than four model levels.
    file(d.path(), "a/b/c/d/e", 1, 0, 0, MIB16);
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let nested: Vec<_> = v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["producer"] == "llmd-nested")
        .collect();
    assert_eq!(nested.len(), 1, "{v:#}");
    let u = set(&v, "unattributed");
    let foreign: Vec<&str> = u["foreign"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for want in ["org/other", "/x", "/a"] {
        assert!(
            foreign.iter().any(|f| f.ends_with(want)),
            "{want} not foreign: {foreign:?}"
        );
    }
    assert_code(u, "KV312", "notice");
}

#[test]
fn a_path_naming_the_model_directory_and_two_world_sizes() {
    let d = tempfile::tempdir().unwrap();
    tp2(d.path(), "m");
    file(d.path(), "m", 1, 0, 0, MIB16);
    let (st, v) = offload(&[&d.path().join("m")], &[]);
    assert_eq!(st, 0, "{v:#}");
    let sets: Vec<_> = v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["producer"] == "llmd-nested")
        .collect();
    assert_eq!(sets.len(), 2, "{v:#}");
    assert!(sets.iter().all(|s| s["verdict"] == "ok"));
}

#[test]
fn the_grouped_nested_state_of_main_9e3eb64_is_read_too() {
    let d = tempfile::tempdir().unwrap();
    for r in 0..2 {
        for i in 0..2 {
            let h = super::kit::hash(i);
            let p = d
                .path()
                .join("m/block_size_16_blocks_per_file_256/tp_2_pp_size_1_pcp_size_1")
                .join(format!("rank_{r}/auto/{}/{}_g1/{h}.bin", &h[..3], &h[3..5]));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::File::create(&p).unwrap().set_len(MIB16).unwrap();
        }
    }
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    let s = set(&v, "llmd-nested");
    assert_eq!(s["blocks"]["complete"], 2);
    assert_eq!(s["identity"]["dtype"], "auto");
    // A group's bucket whose hash does not match its name is foreign.
    let h = super::kit::hash(7);
    let p = d
        .path()
        .join("m/block_size_16_blocks_per_file_256/tp_2_pp_size_1_pcp_size_1")
        .join(format!("rank_0/auto/{}/00_g1/{h}.bin", &h[..3]));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, b"x").unwrap();
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0, "{v:#}");
    assert_code(set(&v, "llmd-nested"), "KV312", "notice");
}
