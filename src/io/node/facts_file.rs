//! The facts file, a test and demo hook: a JSON file that describes a node,
//! read instead of this machine (`KVCR_NODE_FACTS` on the command line,
//! the `node_facts` option in the library; docs/live.md).
//!
//! ```json
//! {"boot_id": "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30", "hostname": "gpu-node-17",
//!  "processes": {"4242": 123456}, "processes_unreadable": null,
//!  "gpus": {"visible": ["GPU-..."], "on_node": null, "source": "demo"}}
//! ```
//! `null` (or a missing key) means "could not be read": not checked. A pid
//! missing from `processes` is a process that does not run.

use super::{Fact, FakeProbe, Gpus};
use crate::format::descriptor::GpuUuid;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FactsFile {
    #[serde(default)]
    boot_id: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    /// `null` or missing: the process table could not be read (docs/live.md).
    #[serde(default)]
    processes: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    processes_unreadable: Option<String>,
    #[serde(default)]
    gpus: Option<GpusFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpusFile {
    visible: Vec<String>,
    #[serde(default)]
    on_node: Option<Vec<String>>,
    #[serde(default)]
    source: Option<String>,
}

fn gpu_set(list: &[String], field: &str) -> Result<BTreeSet<GpuUuid>, String> {
    list.iter()
        .map(|s| {
            GpuUuid::parse(s).ok_or_else(|| format!("gpus.{field}: {s:?} is not a GPU-/MIG- UUID"))
        })
        .collect()
}

/// Parses a node-facts document into a probe that answers from it.
pub fn parse(bytes: &[u8], origin: &str) -> Result<FakeProbe, String> {
    let f: FactsFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    fn not_in<T>(what: &str, origin: &str) -> Fact<T> {
        Fact::NotChecked(format!("{what} is null in {origin}"))
    }
    let boot_id = match f.boot_id {
        Some(s) => Fact::Known(
            crate::format::descriptor::parse_canonical_uuid(&s)
                .ok_or_else(|| format!("boot_id {s:?} is not a canonical lowercase UUID"))?,
        ),
        None => not_in("boot_id", origin),
    };
    let hostname = match f.hostname {
        Some(h) if h.is_empty() => return Err("hostname is empty".into()),
        Some(h) => Fact::Known(h),
        None => not_in("hostname", origin),
    };
    let mut processes = BTreeMap::new();
    // `null` (or no key) means "could not be read", like every other fact:
    // each process lookup is then not checked, never "not running".
    let unreadable = match (&f.processes, f.processes_unreadable) {
        (_, Some(why)) => Some(why),
        (None, None) => Some(format!("processes is null in {origin}")),
        (Some(_), None) => None,
    };
    for (pid, ticks) in f.processes.unwrap_or_default() {
        let p: i32 = pid
            .parse()
            .ok()
            .filter(|p| *p >= 1)
            .ok_or_else(|| format!("processes: {pid:?} is not a pid"))?;
        processes.insert(p, ticks);
    }
    let gpus = match f.gpus {
        Some(g) => Fact::Known(Gpus {
            visible: gpu_set(&g.visible, "visible")?,
            on_node: g
                .on_node
                .as_deref()
                .map(|l| gpu_set(l, "on_node"))
                .transpose()?,
            source: g.source.unwrap_or_else(|| origin.to_string()),
            unreadable: Vec::new(),
        }),
        None => not_in("gpus", origin),
    };
    Ok(FakeProbe {
        boot_id,
        hostname,
        processes,
        processes_unreadable: unreadable,
        gpus,
    })
}

/// Reads the facts file at `path`; every message names it as `named` and
/// the path (`KVCR_NODE_FACTS=PATH` for the command line).
pub fn load(path: &Path, named: &str) -> Result<FakeProbe, String> {
    let origin = format!("{named}{}", path.display());
    let bytes = crate::io::safe_file::read_regular(path, 1 << 20)
        .map_err(|e| format!("cannot read {origin}: {e}"))?;
    parse(&bytes, &origin).map_err(|e| format!("bad node facts in {origin}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::node::NodeProbe;

    #[test]
    fn full_document() {
        let p = parse(
            br#"{"boot_id": "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30", "hostname": "gpu-node-17",
                "processes": {"4242": 123456}, "processes_unreadable": null,
                "gpus": {"visible": ["GPU-6a1f0c2e-0000-4000-8000-000000000000"], "on_node": null, "source": "demo"}}"#,
            "t",
        )
        .unwrap();
        assert!(matches!(p.boot_id(), Fact::Known(_)));
        assert_eq!(p.hostname(), Fact::Known("gpu-node-17".into()));
        assert_eq!(p.start_ticks(4242), Fact::Known(Some(123456)));
        assert_eq!(p.start_ticks(4100), Fact::Known(None));
        let Fact::Known(g) = p.gpus() else { panic!() };
        assert_eq!(g.visible.len(), 1);
        assert_eq!(g.source, "demo");
    }

    /// Strings with escapes mean what they say, in every field; a later
    /// duplicate key wins.
    #[test]
    fn escaped_strings_are_read() {
        let p = parse(
            br#"{"boot_id": "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a3\u0030", "hostname": "gpu\u002dnode\n",
                "processes": {"42\u0034": 7, "4244": 8, "4245": 1, "4245": 2},
                "gpus": {"visible": ["GPU\u002d6a1f0c2e-0000-4000-8000-000000000000"],
                         "on_node": ["MIG-6a1f0c2e-0000-4000-8000-00000000000\u0031"], "source": "d\u00e9mo"}}"#,
            "t",
        )
        .unwrap();
        assert_eq!(
            p.boot_id(),
            Fact::Known(uuid::uuid!("6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30"))
        );
        assert_eq!(p.hostname(), Fact::Known("gpu-node\n".into()));
        assert_eq!(p.start_ticks(4244), Fact::Known(Some(8)));
        assert_eq!(p.start_ticks(4245), Fact::Known(Some(2)));
        let Fact::Known(g) = p.gpus() else { panic!() };
        assert_eq!(g.visible.len(), 1);
        assert_eq!(g.on_node.as_ref().map(|s| s.len()), Some(1));
        assert_eq!(g.source, "d\u{e9}mo");
        let e = parse(br#"{"gpus": {"visible": ["GPU-\u0078"]}}"#, "t").unwrap_err();
        assert_eq!(e, r#"gpus.visible: "GPU-x" is not a GPU-/MIG- UUID"#);
        let e = parse(br#"{"processes": {"\u0078": 1}}"#, "t").unwrap_err();
        assert_eq!(e, r#"processes: "x" is not a pid"#);
    }

    #[test]
    fn nulls_are_not_checked() {
        let p = parse(br#"{"processes_unreadable": "hidden"}"#, "t").unwrap();
        assert!(matches!(p.boot_id(), Fact::NotChecked(_)));
        assert!(matches!(p.hostname(), Fact::NotChecked(_)));
        assert_eq!(p.start_ticks(1), Fact::NotChecked("hidden".into()));
        assert!(matches!(p.gpus(), Fact::NotChecked(_)));
    }

    #[test]
    fn bad_documents_are_errors() {
        for bad in [
            &b"not json"[..],
            br#"{"boot_id": "6C1D0E52-3A1F-4D5E-9B7A-2F4C8E1D9A30"}"#,
            br#"{"hostname": ""}"#,
            br#"{"processes": {"-1": 5}}"#,
            br#"{"processes": {"x": 5}}"#,
            br#"{"gpus": {"visible": ["gpu-0"]}}"#,
            br#"{"gpus": {"visible": [], "on_node": ["nope"]}}"#,
            br#"{"bootid": null}"#,
        ] {
            assert!(parse(bad, "t").is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn load_names_the_file() {
        let e = load(Path::new("/nonexistent/facts.json"), "KVCR_NODE_FACTS=").unwrap_err();
        assert!(e.contains("KVCR_NODE_FACTS=/nonexistent/facts.json"), "{e}");
        let e = load(Path::new("/nonexistent/facts.json"), "node_facts=").unwrap_err();
        assert!(
            e.contains("cannot read node_facts=/nonexistent/facts.json"),
            "{e}"
        );
    }
}
