//! SGLang HiCache file backend sets (docs/format.md §15.1, §15.2): names
//! split against `--model`, sets per parallel layout and pool, ranks,
//! sizes, staging at the root, and the ambiguity without `--model`.

use super::kit::hash;
use super::{assert_code, codes, offload};
use serde_json::Value;
use std::path::Path;

fn write(dir: &Path, name: &str, size: usize) {
    std::fs::write(dir.join(name), vec![7u8; size]).unwrap();
}

/// SGLang 0.5.23's name (`hicache_storage.py:748-771`): `tp` is
/// (rank, size), `pp` (size, rank), `dcp` (tp size, rank, size, page).
fn name(i: u32, model: &str, tp: Option<(u32, u32)>, pp: Option<(u32, u32)>) -> String {
    let mut s = format!("{}_{}", hash(i), model.replace('/', "-"));
    if let Some((r, n)) = tp {
        s.push_str(&format!("_{r}_{n}"));
    }
    if let Some((n, r)) = pp {
        s.push_str(&format!("_{n}_{r}"));
    }
    s + ".bin"
}

fn sglang_sets(v: &Value) -> Vec<&Value> {
    v["sets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["producer"] == "sglang")
        .collect()
}

#[test]
fn a_model_ending_in_digits_is_split_by_model() {
    let d = tempfile::tempdir().unwrap();
    // Model "org/M_1": TP 2, PP 2; stage 1 holds more layers (larger pages).
    for i in 0..3 {
        for pp in 0..2 {
            for r in 0..2 {
                write(
                    d.path(),
                    &name(i, "org/M_1", Some((r, 2)), Some((2, pp))),
                    100 + 20 * pp as usize,
                );
            }
        }
    }
    let (st, v) = offload(&[d.path()], &["--model", "org/M_1"]);
    assert_eq!(st, 0, "{v:#}");
    let s = sglang_sets(&v);
    assert_eq!(s.len(), 1, "{v:#}");
    let s = s[0];
    assert_eq!(s["identity"]["model"], "org-M_1");
    assert_eq!(s["identity"]["tp_size"], 2);
    assert_eq!(s["identity"]["pp_size"], 2);
    assert_eq!(s["identity"]["mla"], false);
    assert_eq!(s["ranks"]["expected"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(s["identity"]["rank_names"][2], "pp_rank 1, tp_rank 0");
    assert_eq!(s["blocks"]["complete"], 3);
    assert_code(s, "KV316", "notice");
    // Without the model nothing is paired: every name reads two ways.
    let (st, v) = offload(&[d.path()], &[]);
    assert_eq!(st, 0);
    assert!(sglang_sets(&v).is_empty(), "{v:#}");
    let u = super::set(&v, "unattributed");
    assert_code(u, "KV314", "notice");
    let msg = u["findings"][0]["message"].as_str().unwrap();
    assert!(msg.contains("--model"), "{msg}");
    assert!(msg.contains("12 files"), "{msg}");
    // A page missing on stage 1, TP rank 0: rank 2 in pp, cp, tp order.
    std::fs::remove_file(
        d.path()
            .join(name(1, "org/M_1", Some((0, 2)), Some((2, 1)))),
    )
    .unwrap();
    let (st, v) = offload(&[d.path()], &["--model", "org/M_1"]);
    assert_eq!(st, 1);
    let s = sglang_sets(&v)[0];
    assert_code(s, "KV303", "reject");
    assert_eq!(s["blocks"]["incomplete"], 1);
    let listed = &s["listed"]["blocks"][0];
    assert_eq!(listed["missing_ranks"], serde_json::json!([2]), "{s:#}");
    assert_eq!(listed["key"], hash(1));
}

#[test]
fn sizes_against_page_bytes_and_against_each_other() {
    let d = tempfile::tempdir().unwrap();
    for i in 0..4 {
        for r in 0..2 {
            write(d.path(), &name(i, "m", Some((r, 2)), None), 64);
        }
    }
    let (st, v) = offload(&[d.path()], &["--model", "m", "--page-bytes", "64"]);
    assert_eq!(st, 0, "{v:#}");
    assert!(codes(sglang_sets(&v)[0]).is_empty(), "{v:#}");
    // Wrong geometry: every file is long; the reader loads the head silently.
    let (st, v) = offload(&[d.path()], &["--model", "m", "--page-bytes", "32"]);
    assert_eq!(st, 1);
    assert_code(sglang_sets(&v)[0], "KV305", "reject");
    // A truncated page (no partial page is ever legitimate): short even
    // without geometry, against the rank's common size.
    write(d.path(), &name(2, "m", Some((1, 2)), None), 10);
    let (st, v) = offload(&[d.path()], &["--model", "m"]);
    assert_eq!(st, 1);
    assert_code(sglang_sets(&v)[0], "KV304", "reject");
    // One rank's pages all of another size (a collision of two deployments
    // sharing names): its shards disagree, even without geometry.
    let c = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write(c.path(), &name(i, "m", Some((0, 2)), None), 64);
        write(c.path(), &name(i, "m", Some((1, 2)), None), 96);
    }
    let (st, v) = offload(&[c.path()], &["--model", "m"]);
    assert_eq!(st, 1, "{v:#}");
    assert_code(sglang_sets(&v)[0], "KV307", "reject");
    // The same short file on both ranks is still short (pages are always full).
    write(d.path(), &name(2, "m", Some((0, 2)), None), 10);
    let (st, v) = offload(&[d.path()], &["--model", "m"]);
    assert_eq!(st, 1);
    assert_code(sglang_sets(&v)[0], "KV304", "reject");
}

#[test]
fn links_special_files_and_staging() {
    let d = tempfile::tempdir().unwrap();
    for r in 0..2 {
        write(d.path(), &name(0, "m", Some((r, 2)), None), 64);
    }
    write(d.path(), &name(1, "m", Some((0, 2)), None), 64);
    std::os::unix::fs::symlink(
        "/etc/hostname",
        d.path().join(name(1, "m", Some((1, 2)), None)),
    )
    .unwrap();
    write(d.path(), ".00000000000000000000000000000000.tmp", 64);
    // An unmerged variant's manifest: recognised (legacy), never required.
    write(d.path(), "__warmup_manifest___m_0_2.jsonl", 5);
    let (st, v) = offload(&[d.path()], &["--model", "m", "--producer", "sglang"]);
    assert_eq!(st, 1, "{v:#}");
    let s = sglang_sets(&v)[0];
    assert_code(s, "KV308", "reject");
    // The temp name carries no key: it is the root's, never the set's.
    assert_eq!(s["staging"].as_array().unwrap().len(), 0);
    let u = super::set(&v, "unattributed");
    assert_code(u, "KV311", "notice");
    assert_code(u, "KV323", "notice");
    assert_eq!(u["staging"][0]["rank"], Value::Null);
}

#[test]
fn mla_pools_and_another_model() {
    let d = tempfile::tempdir().unwrap();
    // MLA (one file per page per stage) and its Mamba pool (TP-sharded).
    for i in 0..2 {
        write(d.path(), &name(i, "ds", None, None), 48);
        for r in 0..2 {
            write(d.path(), &format!("{}.mamba_ds_{r}_2.bin", hash(i)), 16);
        }
    }
    // A Mamba name without the TP part is not SGLang's: foreign.
    write(d.path(), &format!("{}.mamba_ds.bin", hash(5)), 16);
    write(d.path(), &name(0, "other", Some((0, 1)), None), 64);
    let (st, v) = offload(&[d.path()], &["--model", "ds"]);
    assert_eq!(st, 0, "{v:#}");
    let s = sglang_sets(&v);
    assert_eq!(s.len(), 2, "{v:#}");
    let mla = s.iter().find(|s| s["identity"]["pool"] == "kv").unwrap();
    assert_eq!(mla["identity"]["mla"], true);
    assert_eq!(mla["blocks"]["complete"], 2);
    let mamba = s.iter().find(|s| s["identity"]["pool"] == "mamba").unwrap();
    assert_eq!(mamba["identity"]["tp_size"], 2);
    assert_eq!(mamba["blocks"]["complete"], 2);
    let u = super::set(&v, "unattributed");
    assert_code(u, "KV312", "notice");
    assert_code(u, "KV314", "notice");
}

#[test]
fn the_library_takes_the_model_and_page_bytes() {
    let d = tempfile::tempdir().unwrap();
    for r in 0..2 {
        write(d.path(), &name(0, "m_0_2", Some((r, 2)), None), 64);
    }
    let o = kvcr_audit::api::OffloadOptions {
        models: vec!["m_0_2".into()],
        page_bytes: Some(64),
        ..Default::default()
    };
    let doc = kvcr_audit::api::offload(&[d.path().to_path_buf()], &o).unwrap();
    let v: Value = serde_json::from_str(doc.as_json()).unwrap();
    assert_eq!(v["exit_status"], 0, "{v:#}");
    let s = sglang_sets(&v);
    assert_eq!(s.len(), 1, "{v:#}");
    assert_eq!(s[0]["blocks"]["complete"], 1);
    assert_eq!(v["options"]["model"], serde_json::json!(["m_0_2"]));
    assert_eq!(v["options"]["page_bytes"], 64);
    let bad = kvcr_audit::api::OffloadOptions {
        page_bytes: Some(0),
        ..Default::default()
    };
    assert!(kvcr_audit::api::offload(&[d.path().to_path_buf()], &bad).is_err());
}
