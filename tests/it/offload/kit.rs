//! Offload trees as the producers write them (vLLM 0.34, llm-d 7be76e1, LMCache 0.5.6):
//! vLLM and llm-d namespaces with their `config.json` (indent 2, sorted
//! keys, no trailing newline) under the digest of its canonical form, rank
//! directories with `<h[0:3]>/<h[3:5]>_g<G>/<h>.bin` blocks, lmcache-mp
//! `.data` and LMCache local-disk `.pt` files. fixtures/offload/generate.py
//! writes fixtures/offload/ with these same functions.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The two layer names of the reference's test vectors.
pub const LAYERS: [&str; 2] = [
    "model.layers.0.self_attn.attn",
    "model.layers.1.self_attn.attn",
];

/// vLLM ≥ 0.33's fields (`file_mapper.py:51-73`), not agnostic.
pub fn vllm_fields(model: &str, tp: u64) -> Value {
    json!({
        "model_name": model, "tokens_per_hash": 16, "blocks_per_file": 1,
        "tp_size": tp, "pp_size": 1, "pcp_size": 1, "dcp_size": 1,
        "dtype": "bfloat16",
        "kv_cache_groups": [{"tokens_per_block": 16, "layer_names": LAYERS}],
        "inference_engine": "vllm", "parallel_agnostic": false,
    })
}

/// llm-d's fields (`llmd_fs_backend/file_mapper.py:63-74`).
pub fn llmd_fields(model: &str, tp: u64) -> Value {
    json!({
        "model_name": model, "hash_block_size": 16, "gpu_blocks_per_file": 16,
        "tp_size": tp, "pp_size": 1, "pcp_size": 1, "dcp_size": 1, "dtype": "auto",
        "kv_cache_groups": [{"block_size": 16, "layer_names": LAYERS}],
        "inference_engine": "vllm",
    })
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        v => v.clone(),
    }
}

/// `json.dumps(fields, sort_keys=True, separators=(",", ":"))` for ASCII
/// fields (serde_json writes ASCII text as Python does).
pub fn canonical(fields: &Value) -> String {
    serde_json::to_string(&sorted(fields)).unwrap()
}

/// `<safe_model>_<digest12>` of `fields`.
pub fn base_name(fields: &Value) -> String {
    let d = Sha256::digest(canonical(fields).as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}_{}",
        fields["model_name"].as_str().unwrap().replace('/', "_"),
        &hex[..12]
    )
}

/// Block hash `i` (sha256 of its decimal text): 64 hex digits.
pub fn hash(i: u32) -> String {
    Sha256::digest(i.to_string().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A namespace: its directory and `config.json`, written as the engine
/// writes it (`json.dump(indent=2, sort_keys=True)`, no newline).
pub fn namespace(root: &Path, fields: &Value) -> PathBuf {
    let base = root.join(base_name(fields));
    std::fs::create_dir_all(&base).unwrap();
    let text = serde_json::to_string_pretty(&sorted(fields)).unwrap();
    std::fs::write(base.join("config.json"), text).unwrap();
    base
}

/// The block file of hash `h`, group `g` on rank `r` of namespace `base`.
pub fn block_path(base: &Path, r: u32, h: &str, g: u32) -> PathBuf {
    let mut name = base.file_name().unwrap().to_os_string();
    name.push(format!("_r{r}"));
    base.with_file_name(name)
        .join(&h[..3])
        .join(format!("{}_g{g}", &h[3..5]))
        .join(format!("{h}.bin"))
}

/// Writes block `i` of group `g` on rank `r`, `size` bytes.
pub fn block(base: &Path, r: u32, i: u32, g: u32, size: usize) -> PathBuf {
    let p = block_path(base, r, &hash(i), g);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, vec![0x5a; size]).unwrap();
    p
}

/// A namespace with `n` blocks of group 0 on each of `ranks`, `size` bytes each.
pub fn full(root: &Path, fields: &Value, ranks: &[u32], n: u32, size: usize) -> PathBuf {
    let base = namespace(root, fields);
    for &r in ranks {
        for i in 0..n {
            block(&base, r, i, 0, size);
        }
    }
    base
}

/// An lmcache-mp file name (`fs_l2_adapter.py:99-121`).
pub fn mp_name(model: &str, ws: u32, rank: u32, group: u32, i: u32, salt: Option<&str>) -> String {
    let kv_rank = (ws << 24) | (rank << 16) | (ws << 8) | rank;
    let salt = salt.map(|s| format!("@{s}")).unwrap_or_default();
    format!(
        "{}@0x{kv_rank:08x}@{group:x}@{}{salt}.data",
        model.replace('/', "-SEP-"),
        hash(i)
    )
}

/// An LMCache local-disk file name (`lmcache/utils.py:467-475`).
pub fn pt_name(model: &str, ws: u32, worker: u32, hash: &str, tags: &[&str]) -> String {
    let mut s = format!("{}@{ws}@{worker}@{hash}@bfloat16", model.replace('/', "-"));
    for t in tags {
        s.push('@');
        s.push_str(t);
    }
    s.push_str(".pt");
    s
}
