//! The namespace digest of the vLLM and llm-d family (docs/format.md §15.2):
//! `config.json` parsed as Python's `json.loads` does and re-serialised as
//! `json.dumps(sort_keys=True, separators=(",", ":"))` with `ensure_ascii`,
//! byte for byte, then SHA-256; the directory carries its first 12 hex
//! digits (vLLM 0.34.0 `v1/kv_offload/file_mapper.py:17`, `_BASE_PATH_HASH_LEN = 12`).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The digest's length in hex digits in a namespace directory's name.
pub const DIGEST_HEX_LEN: usize = 12;
/// The most of `config.json` kvcr reads (a larger one is unverifiable).
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;
/// The file holding a namespace's fields.
pub const CONFIG_NAME: &str = "config.json";

/// Why a `config.json` gives no digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unverifiable {
    /// Not JSON (truncated, edited): the parser's message.
    NotJson(String),
    /// JSON, but not an object.
    NotObject,
    /// A value the producer never writes and kvcr cannot re-emit as Python
    /// would: a float, an integer beyond 64 bits.
    Unsupported(String),
}

impl Unverifiable {
    pub fn describe(&self) -> String {
        match self {
            Unverifiable::NotJson(e) => format!("not JSON ({e}): truncated or edited"),
            Unverifiable::NotObject => "not a JSON object".to_string(),
            Unverifiable::Unsupported(what) => {
                format!("holds {what}, which the producer never writes")
            }
        }
    }
}

/// The parsed fields and their canonical text.
#[derive(Clone, Debug)]
pub struct Canonical {
    pub fields: serde_json::Map<String, Value>,
    pub text: String,
}

impl Canonical {
    /// The full SHA-256 of the canonical text, lowercase hex.
    pub fn sha256_hex(&self) -> String {
        crate::format::hex::encode(&Sha256::digest(self.text.as_bytes()))
    }

    /// The 12 hex digits a namespace directory carries.
    pub fn digest12(&self) -> String {
        self.sha256_hex()[..DIGEST_HEX_LEN].to_string()
    }

    /// `model_name` with `/` replaced by `_`: the directory's prefix.
    pub fn safe_model(&self) -> Option<String> {
        self.fields
            .get("model_name")
            .and_then(Value::as_str)
            .map(|m| m.replace('/', "_"))
    }
}

/// Parses `config.json`'s bytes and builds the canonical text.
pub fn canonical(bytes: &[u8]) -> Result<Canonical, Unverifiable> {
    // Python's json.loads takes str; the producer writes ASCII (ensure_ascii
    // is not set for the file, so non-ASCII is written raw as UTF-8).
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        // serde_json refuses a lone surrogate escape (Python keeps it):
        // "lone leading surrogate", "unexpected end of hex escape".
        if msg.contains("surrogate") || (msg.contains("hex escape") && has_surrogate_escape(bytes))
        {
            Unverifiable::Unsupported("a lone surrogate escape".to_string())
        } else {
            Unverifiable::NotJson(msg)
        }
    })?;
    let Value::Object(fields) = v else {
        return Err(Unverifiable::NotObject);
    };
    let mut text = String::with_capacity(bytes.len());
    write_object(&fields, &mut text)?;
    Ok(Canonical { fields, text })
}

/// Whether `b` holds a `\uD800`-`\uDFFF` escape.
fn has_surrogate_escape(b: &[u8]) -> bool {
    b.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && w[2].eq_ignore_ascii_case(&b'd')
            && matches!(w[3].to_ascii_lowercase(), b'8'..=b'9' | b'a'..=b'f')
    })
}

fn write_value(v: &Value, out: &mut String) -> Result<(), Unverifiable> {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                return Err(Unverifiable::Unsupported(format!("the number {n}")));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(x, out)?;
            }
            out.push(']');
        }
        Value::Object(m) => write_object(m, out)?,
    }
    Ok(())
}

fn write_object(m: &serde_json::Map<String, Value>, out: &mut String) -> Result<(), Unverifiable> {
    // Python sorts str keys by code point; UTF-8 byte order is the same.
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    out.push('{');
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        write_value(&m[k.as_str()], out)?;
    }
    out.push('}');
    Ok(())
}

/// A string as Python's `json.dumps` with `ensure_ascii=True` writes it.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYERS: [&str; 2] = [
        "model.layers.0.self_attn.attn",
        "model.layers.1.self_attn.attn",
    ];

    fn vllm(model: &str, extra: (&str, Value)) -> String {
        let replicated = extra.0 == "replicated_layout";
        let mut v = serde_json::json!({
            "model_name": model, "tokens_per_hash": 16, "blocks_per_file": 1,
            "tp_size": if replicated { 1 } else { 2 }, "pp_size": 1, "pcp_size": 1,
            "dcp_size": 1, "dtype": "bfloat16",
            "kv_cache_groups": [{"tokens_per_block": 16, "layer_names": LAYERS}],
            "inference_engine": "vllm",
        });
        v[extra.0] = extra.1;
        v.to_string()
    }

    /// vLLM's test vectors (computed with vLLM
    /// 0.34.0's FileMapper itself) and its 315-byte canonical text.
    #[test]
    fn vllm_test_vectors() {
        let not_agnostic = || ("parallel_agnostic", Value::Bool(false));
        let c = canonical(vllm("org/Model-7B", not_agnostic()).as_bytes()).unwrap();
        assert_eq!(c.text.len(), 315);
        assert_eq!(
            c.text,
            concat!(
                r#"{"blocks_per_file":1,"dcp_size":1,"dtype":"bfloat16","#,
                r#""inference_engine":"vllm","kv_cache_groups":[{"layer_names":"#,
                r#"["model.layers.0.self_attn.attn","model.layers.1.self_attn.attn"],"#,
                r#""tokens_per_block":16}],"model_name":"org/Model-7B","#,
                r#""parallel_agnostic":false,"pcp_size":1,"pp_size":1,"#,
                r#""tokens_per_hash":16,"tp_size":2}"#
            )
        );
        assert!(c.sha256_hex().starts_with("0867086f3a7a431b"));
        assert_eq!(c.digest12(), "0867086f3a7a");
        assert_eq!(c.safe_model().unwrap(), "org_Model-7B");
        let c = canonical(vllm("org/Modèle-7B", not_agnostic()).as_bytes()).unwrap();
        assert!(c.text.contains(r"Mod\u00e8le"));
        assert_eq!(c.digest12(), "72a8b5720df4");
        assert_eq!(c.safe_model().unwrap(), "org_Modèle-7B");
        let replicated = ("replicated_layout", Value::Bool(true));
        let c = canonical(vllm("org/Model-7B", replicated).as_bytes()).unwrap();
        assert_eq!(c.digest12(), "f9021efc7a2f");
    }

    /// llm-d's vector (llm-d-kv-cache 7be76e1's FileMapper).
    #[test]
    fn llmd_test_vector() {
        let text = serde_json::json!({
            "model_name": "org/Model-7B", "hash_block_size": 16, "gpu_blocks_per_file": 16,
            "tp_size": 2, "pp_size": 1, "pcp_size": 1, "dcp_size": 1, "dtype": "auto",
            "kv_cache_groups": [{"block_size": 16, "layer_names": LAYERS}],
            "inference_engine": "vllm",
        })
        .to_string();
        assert_eq!(
            canonical(text.as_bytes()).unwrap().digest12(),
            "89d743954de2"
        );
    }

    /// The indent=2 file the producer writes hashes as its compact form.
    #[test]
    fn indentation_and_key_order_do_not_matter_duplicates_keep_the_last() {
        let a = canonical(br#"{"b": 1, "a": [1, 2]}"#).unwrap();
        let b = canonical(b"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}").unwrap();
        assert_eq!(a.text, r#"{"a":[1,2],"b":1}"#);
        assert_eq!(a.text, b.text);
        let d = canonical(br#"{"a": 1, "a": 2}"#).unwrap();
        assert_eq!(d.text, r#"{"a":2}"#);
    }

    #[test]
    fn python_ensure_ascii_escapes() {
        let mut s = String::new();
        write_string("a\"\\\n\r\t\u{8}\u{c}\u{1}\u{7f}/é😀", &mut s);
        assert_eq!(s, r#""a\"\\\n\r\t\b\f\u0001\u007f/\u00e9\ud83d\ude00""#);
    }

    #[test]
    fn what_python_would_hash_differently_is_unverifiable() {
        assert!(matches!(
            canonical(br#"{"a": 1.0}"#),
            Err(Unverifiable::Unsupported(_))
        ));
        assert!(matches!(
            canonical(br#"{"a": 123456789012345678901234567890}"#),
            Err(Unverifiable::Unsupported(_))
        ));
        assert!(matches!(
            canonical(br#"{"a": "\ud800"}"#),
            Err(Unverifiable::Unsupported(_))
        ));
        assert!(matches!(
            canonical(br#"{"model_name": "x", "tp_"#),
            Err(Unverifiable::NotJson(_))
        ));
        assert!(matches!(canonical(b"[1]"), Err(Unverifiable::NotObject)));
        assert!(matches!(canonical(b""), Err(Unverifiable::NotJson(_))));
    }
}
