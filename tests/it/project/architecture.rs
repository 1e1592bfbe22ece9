//! The module graph of `src/` has no import cycle.
//!
//! This is the project's own cycle check (std only, so CI needs nothing but
//! the toolchain). Every file under `src/` is one module (`a/b.rs` and
//! `a/b/mod.rs` are `a::b`; `lib.rs` is the crate root). An edge A → B is
//! recorded for every path A names that starts with `crate::`, `super::` or
//! (in a `use`) `self::`, resolved to the longest module prefix, including
//! every leaf of a braced `use` tree. Two kinds of edge are left out:
//!
//! - a module naming its own descendants (a parent composes its children;
//!   `mod.rs` re-exporting a child is its interface, not a dependency);
//! - test code: `#[cfg(test)]` items and modules named `tests` or `tests_*`.
//!
//! Any strongly connected component of more than one module is a cycle and
//! fails the test with the edges that close it (file and line).
//!
//! The same edges are checked against the layers in [`LAYERS`]: an edge
//! from a module to one in a higher layer is a back arrow, and fails the
//! layering test naming file:line, unless it is one of the [`KNOWN_BACK`]
//! arrows still to be removed (that list must be exact).

use super::rust_tokens::{tokens, Tok};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// module path ("" for the crate root) → file
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().and_then(|x| x.to_str()) != Some("rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap();
            let mut segs: Vec<String> = rel
                .iter()
                .map(|s| s.to_str().unwrap().to_string())
                .collect();
            let last = segs.pop().unwrap();
            let stem = last.trim_end_matches(".rs").to_string();
            if segs.is_empty() && (stem == "main" || stem == "build") {
                continue;
            }
            if !(segs.is_empty() && stem == "lib") && stem != "mod" {
                segs.push(stem);
            }
            if segs
                .last()
                .is_some_and(|m| m == "tests" || m.starts_with("tests_"))
            {
                continue;
            }
            out.insert(segs.join("::"), p);
        }
    }
    out
}

/// Drops `#[cfg(test)]` items: the attribute, then everything up to the end
/// of the item (a `;` at depth 0 or a balanced `{ … }`).
fn strip_test_items(toks: Vec<(Tok, usize)>) -> Vec<(Tok, usize)> {
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let is_cfg_test = toks[i].0 == Tok::Hash
            && matches!(toks.get(i + 2), Some((Tok::Ident(s), _)) if s == "cfg")
            && matches!(toks.get(i + 4), Some((Tok::Ident(s), _)) if s == "test");
        if !is_cfg_test {
            out.push(toks[i].clone());
            i += 1;
            continue;
        }
        // skip the attribute `#[cfg(test)]` (7 tokens: # [ cfg ( test ) ])
        i += 7;
        let mut depth = 0;
        while i < toks.len() {
            match toks[i].0 {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                Tok::Semi if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// Expands a path starting at `toks[i]` (which is `crate`, `super` or
/// `self`) into every full path it names (braced `use` trees included).
fn paths_at(toks: &[(Tok, usize)], i: usize) -> Vec<Vec<String>> {
    fn walk(
        toks: &[(Tok, usize)],
        mut i: usize,
        prefix: Vec<String>,
        out: &mut Vec<Vec<String>>,
    ) -> usize {
        let mut cur = prefix;
        loop {
            match toks.get(i).map(|t| &t.0) {
                Some(Tok::Ident(s)) => {
                    cur.push(s.clone());
                    i += 1;
                    if toks.get(i).map(|t| &t.0) == Some(&Tok::Colons) {
                        i += 1;
                        continue;
                    }
                    out.push(cur);
                    return i;
                }
                Some(Tok::Open) => {
                    i += 1;
                    loop {
                        match toks.get(i).map(|t| &t.0) {
                            Some(Tok::Close) => {
                                i += 1;
                                break;
                            }
                            Some(Tok::Comma) => i += 1,
                            None => return i,
                            _ => {
                                let before = i;
                                i = walk(toks, i, cur.clone(), out);
                                // skip `as name` and anything else up to , or }
                                while !matches!(
                                    toks.get(i).map(|t| &t.0),
                                    Some(Tok::Comma) | Some(Tok::Close) | None
                                ) {
                                    i += 1;
                                }
                                if i == before {
                                    i += 1;
                                }
                            }
                        }
                    }
                    if !cur.is_empty() {
                        out.push(cur);
                    }
                    return i;
                }
                _ => {
                    out.push(cur);
                    return i;
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(toks, i, Vec::new(), &mut out);
    out
}

/// Resolves `path` (as written in module `from`) to the longest known module.
fn resolve(from: &str, path: &[String], mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut base: Vec<String> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").map(String::from).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut best = base.join("::");
    let mut cur = base;
    for seg in rest {
        cur.push(seg.clone());
        let key = cur.join("::");
        if mods.contains_key(&key) {
            best = key;
        } else {
            break;
        }
    }
    Some(best)
}

fn is_descendant(child: &str, parent: &str) -> bool {
    parent.is_empty() || child == parent || child.starts_with(&format!("{parent}::"))
}

type Edges = BTreeMap<String, BTreeMap<String, (PathBuf, usize)>>;

fn graph(src: &Path) -> (BTreeMap<String, PathBuf>, Edges) {
    let mods = modules(src);
    let mut edges: Edges = BTreeMap::new();
    for (m, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap();
        let toks = strip_test_items(tokens(&text));
        for i in 0..toks.len() {
            let Tok::Ident(s) = &toks[i].0 else { continue };
            if !matches!(s.as_str(), "crate" | "super" | "self") {
                continue;
            }
            // only the start of a path: not preceded by `::`
            if i > 0 && toks[i - 1].0 == Tok::Colons {
                continue;
            }
            if toks.get(i + 1).map(|t| &t.0) != Some(&Tok::Colons) {
                continue;
            }
            // `self::` outside `use` is a local path (methods use `self.`,
            // so `self::` is always a module path anyway)
            for p in paths_at(&toks, i) {
                if let Some(to) = resolve(m, &p, &mods) {
                    if to == *m || is_descendant(&to, m) {
                        continue;
                    }
                    edges
                        .entry(m.clone())
                        .or_default()
                        .entry(to)
                        .or_insert((file.clone(), toks[i].1));
                }
            }
        }
    }
    (mods, edges)
}

/// Tarjan's strongly connected components.
fn sccs(nodes: &BTreeMap<String, PathBuf>, edges: &Edges) -> Vec<Vec<String>> {
    struct St<'a> {
        edges: &'a Edges,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        on: BTreeSet<String>,
        stack: Vec<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(st: &mut St<'_>, v: &str) {
        st.index.insert(v.to_string(), st.next);
        st.low.insert(v.to_string(), st.next);
        st.next += 1;
        st.stack.push(v.to_string());
        st.on.insert(v.to_string());
        let succ: Vec<String> = st
            .edges
            .get(v)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for w in succ {
            if !st.index.contains_key(&w) {
                visit(st, &w);
                let lw = st.low[&w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if st.on.contains(&w) {
                let iw = st.index[&w];
                let lv = st.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = st.stack.pop().unwrap();
                st.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for n in nodes.keys() {
        if !st.index.contains_key(n) {
            visit(&mut st, n);
        }
    }
    st.out
}

fn name(m: &str) -> &str {
    if m.is_empty() {
        "crate"
    } else {
        m
    }
}

#[test]
fn the_module_graph_has_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mods, edges) = graph(&src);
    assert!(
        mods.len() > 20,
        "found only {} modules under src/",
        mods.len()
    );
    let comps = sccs(&mods, &edges);
    let mut msg = String::new();
    for comp in &comps {
        msg.push_str(&format!(
            "cycle among {}:\n",
            comp.iter().map(|m| name(m)).collect::<Vec<_>>().join(", ")
        ));
        for a in comp {
            for (b, (file, line)) in edges.get(a).into_iter().flatten() {
                if comp.contains(b) {
                    msg.push_str(&format!(
                        "  {} -> {}  ({}:{})\n",
                        name(a),
                        name(b),
                        file.strip_prefix(&src).unwrap().display(),
                        line
                    ));
                }
            }
        }
    }
    assert!(comps.is_empty(), "import cycles in src/:\n{msg}");
}

#[test]
fn the_checker_sees_a_cycle_it_is_shown() {
    // A two-module cycle written out: the checker must find it, so a
    // tokenizer bug cannot make the real test pass vacuously.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod c;\n").unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::{b::{self, X as Y}, c};\n// use crate::zzz;\nlet s = \"crate::b\";",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub fn f() { super::a::g() }\n#[cfg(test)]\nmod tests { use crate::c; }\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "#[cfg(test)]\nuse crate::a;\n").unwrap();
    let (mods, edges) = graph(src);
    assert_eq!(mods.len(), 4);
    let comps = sccs(&mods, &edges);
    assert_eq!(comps, vec![vec!["a".to_string(), "b".to_string()]]);
    assert!(edges["a"].contains_key("c"), "{edges:?}");
    assert!(!edges.contains_key("c"), "cfg(test) use counted: {edges:?}");
}

/// The layers of `src/`, lowest first: the top-level folders, which are
/// the layers ("crate" is lib.rs, the facade). A module may use modules of
/// its own layer or below; an arrow to a higher layer runs back up. There
/// is no exception list: the folders say where a module belongs.
///
/// - `format`: what docs/format.md defines, as types and strict readers;
/// - `rules`: the pure verdict core (finished verdicts: cause and action
///   included);
/// - `io`: the adapters, everything that touches the system;
/// - `print`: the printers (they print what the rules made; no I/O but the
///   writer they are handed);
/// - `service`: the runs that drive the adapters, the rules and a printer
///   (audit, examine);
/// - `gms`, `pools`, `offload`: the reader families, each one vertical
///   folder (see [`GMS_LAYERS`], [`POOLS_LAYERS`], [`OFFLOAD_LAYERS`]);
/// - `import`: the import (see [`IMPORT_LAYERS`]);
/// - `api`: the library;
/// - `commands`: one file per subcommand, and the settings;
/// - `cli`: the command line itself.
const LAYERS: &[(&str, &[&str])] = &[
    ("format", &["format"]),
    ("rules", &["rules"]),
    ("io", &["io"]),
    ("print", &["print"]),
    ("service", &["service"]),
    ("readers", &["gms", "pools", "offload"]),
    ("import", &["import"]),
    ("api", &["api"]),
    ("commands", &["commands"]),
    ("cli", &["cli", "main", "crate"]),
];

/// The layers inside `import/`, lowest first: the plain values it is asked
/// for, the plan, the engine that runs a plan, the import report both the
/// gate and the run fill, the gate, and the run of `kvcr import` that
/// drives them ("import" is its map, `import/mod.rs`).
const IMPORT_LAYERS: &[(&str, &[&str])] = &[
    ("spec", &["spec"]),
    ("plan", &["plan"]),
    ("engine", &["engine"]),
    ("report", &["report"]),
    ("gate", &["gate"]),
    ("run", &["run", "import"]),
];

/// The layers inside `pools/`, lowest first: its codes, the on-disk
/// format, the pure rules, the reads of files and of `/proc`, the printers,
/// and the run (`pools/mod.rs`).
const POOLS_LAYERS: &[(&str, &[&str])] = &[
    ("codes", &["codes"]),
    ("format", &["format"]),
    ("rules", &["rules"]),
    ("read", &["read", "live"]),
    ("print", &["print"]),
    ("run", &["pools"]),
];

/// The layers inside `offload/`, lowest first: the names and the digest,
/// what the walk found, the rules, the printers, the walk, and the run
/// that ties them ("offload" is `offload/mod.rs`).
const OFFLOAD_LAYERS: &[(&str, &[&str])] = &[
    ("format", &["grammar", "canon"]),
    ("scan", &["scan"]),
    ("rules", &["set", "tally", "family", "nested", "judge"]),
    ("print", &["print"]),
    ("io", &["walk"]),
    ("run", &["offload"]),
];

/// The layers inside a reader family's folder, lowest first (README.md
/// "Architecture": a reader family is one vertical folder with its own
/// format, rules, reads and printer), here `gms/`: the byte layouts, the
/// checks, the reads, the printers, and the run that drives them ("gms"
/// is its map, `gms/mod.rs`).
const GMS_LAYERS: &[(&str, &[&str])] = &[
    ("format", &["format"]),
    ("rules", &["rules"]),
    ("read", &["read"]),
    ("print", &["print"]),
    ("run", &["run", "gms"]),
];

/// The back arrows still in `src/`: none, and none may be listed. The
/// parameter stays for the planted test of the checker.
const KNOWN_BACK: &[(&str, &str)] = &[];

fn top(m: &str) -> &str {
    if m.is_empty() {
        "crate"
    } else {
        m.split("::").next().unwrap()
    }
}

/// The layer key of module `m` inside `folder`: its next path segment
/// below the folder (the folder's own `mod.rs` is the folder's name), or
/// `None` when `m` is outside it. `folder` "" is the crate: [`top`].
fn key_in<'a>(m: &'a str, folder: &'a str) -> Option<&'a str> {
    if folder.is_empty() {
        return Some(top(m));
    }
    if m == folder {
        return Some(folder.rsplit("::").next().unwrap());
    }
    m.strip_prefix(folder)?
        .strip_prefix("::")
        .map(|rest| rest.split("::").next().unwrap())
}

fn layer_of(top: &str, layers: &[(&str, &[&str])]) -> Option<usize> {
    layers.iter().position(|(_, ms)| ms.contains(&top))
}

/// Every arrow of `edges` that runs back up `layers`, as
/// (from, to) top-level modules → "file:line from -> to" lines; and the
/// top-level modules that have no layer.
#[allow(clippy::type_complexity)]
fn back_arrows(
    src: &Path,
    mods: &BTreeMap<String, PathBuf>,
    edges: &Edges,
    folder: &str,
    layers: &[(&str, &[&str])],
) -> (BTreeMap<(String, String), Vec<String>>, BTreeSet<String>) {
    let mut back: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut unplaced = BTreeSet::new();
    for m in mods.keys() {
        if let Some(k) = key_in(m, folder) {
            if layer_of(k, layers).is_none() {
                unplaced.insert(k.to_string());
            }
        }
    }
    for (a, bs) in edges {
        for (b, (file, line)) in bs {
            let (Some(ta), Some(tb)) = (key_in(a, folder), key_in(b, folder)) else {
                continue;
            };
            let (Some(la), Some(lb)) = (layer_of(ta, layers), layer_of(tb, layers)) else {
                continue;
            };
            if lb > la {
                back.entry((ta.to_string(), tb.to_string()))
                    .or_default()
                    .push(format!(
                        "{}:{line}: {} ({}) -> {} ({})",
                        file.strip_prefix(src).unwrap_or(file).display(),
                        name(a),
                        layers[la].0,
                        name(b),
                        layers[lb].0
                    ));
            }
        }
    }
    (back, unplaced)
}

/// The layering verdict: `Err` names every unlisted back arrow (file:line),
/// every listed one that is gone, and every module without a layer.
fn judge_layers(
    src: &Path,
    layers: &[(&str, &[&str])],
    known: &[(&str, &str)],
) -> Result<(), String> {
    judge_layers_in(src, "", layers, known)
}

/// [`judge_layers`] for the modules inside `folder` ("" for the crate).
fn judge_layers_in(
    src: &Path,
    folder: &str,
    layers: &[(&str, &[&str])],
    known: &[(&str, &str)],
) -> Result<(), String> {
    let (mods, edges) = graph(src);
    let (back, unplaced) = back_arrows(src, &mods, &edges, folder, layers);
    let mut msg = String::new();
    for ((a, b), lines) in &back {
        if !known.contains(&(a.as_str(), b.as_str())) {
            msg.push_str(&format!("back arrow {a} -> {b}:\n"));
            for l in lines {
                msg.push_str(&format!("  {l}\n"));
            }
        }
    }
    for (a, b) in known {
        if !back.contains_key(&(a.to_string(), b.to_string())) {
            msg.push_str(&format!(
                "{a} -> {b} no longer runs back up: remove it from KNOWN_BACK\n"
            ));
        }
    }
    for m in &unplaced {
        msg.push_str(&format!("module {m} has no layer: add it to LAYERS\n"));
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(msg)
    }
}

#[test]
fn no_arrow_runs_back_up_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Err(msg) = judge_layers(&src, LAYERS, KNOWN_BACK) {
        panic!("layering of src/ (tests/it/project/architecture.rs LAYERS):\n{msg}");
    }
}

#[test]
fn the_pools_folder_reads_format_rules_read_print_run() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Err(msg) = judge_layers_in(&src, "pools", POOLS_LAYERS, &[]) {
        panic!("layering of src/pools/ (tests/it/project/architecture.rs POOLS_LAYERS):\n{msg}");
    }
}

#[test]
fn the_offload_reader_is_layered_names_scan_rules_print_walk() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Err(msg) = judge_layers_in(&src, "offload", OFFLOAD_LAYERS, &[]) {
        panic!(
            "layering of src/offload/ (tests/it/project/architecture.rs OFFLOAD_LAYERS):\n{msg}"
        );
    }
}

#[test]
fn the_import_reads_gate_plan_engine_driven_by_command() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Err(msg) = judge_layers_in(&src, "import", IMPORT_LAYERS, &[]) {
        panic!("layering of src/import/ (tests/it/project/architecture.rs IMPORT_LAYERS):\n{msg}");
    }
}

#[test]
fn the_gms_family_reads_format_rules_read_print_run() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Err(msg) = judge_layers_in(&src, "gms", GMS_LAYERS, &[]) {
        panic!("layering of src/gms/ (tests/it/project/architecture.rs GMS_LAYERS):\n{msg}");
    }
}

/// The graph with every module replaced by its ancestor `depth` segments
/// deep (a shallower module stays itself): the arrows between folders at
/// that level. An arrow inside one folder disappears.
fn collapsed(
    mods: &BTreeMap<String, PathBuf>,
    edges: &Edges,
    depth: usize,
) -> (BTreeMap<String, PathBuf>, Edges) {
    let cut = |m: &str| -> String { m.split("::").take(depth).collect::<Vec<_>>().join("::") };
    let mut nodes = BTreeMap::new();
    for (m, f) in mods {
        nodes.entry(cut(m)).or_insert_with(|| f.clone());
    }
    let mut out: Edges = BTreeMap::new();
    for (a, bs) in edges {
        for (b, at) in bs {
            let (ca, cb) = (cut(a), cut(b));
            if ca != cb {
                out.entry(ca)
                    .or_default()
                    .entry(cb)
                    .or_insert_with(|| at.clone());
            }
        }
    }
    (nodes, out)
}

/// Cycles between folders at every depth: "a → b → c → a" where each is a
/// folder (or a file) of the same parent, found however many modules deep
/// the arrows that close it start.
fn folder_cycles(src: &Path) -> String {
    let (mods, edges) = graph(src);
    let deepest = mods
        .keys()
        .map(|m| m.split("::").count())
        .max()
        .unwrap_or(1);
    let mut msg = String::new();
    for depth in 1..=deepest {
        let (nodes, e) = collapsed(&mods, &edges, depth);
        for comp in sccs(&nodes, &e) {
            msg.push_str(&format!(
                "cycle at depth {depth} among {}:\n",
                comp.join(", ")
            ));
            for a in &comp {
                for (b, (file, line)) in e.get(a).into_iter().flatten() {
                    if comp.contains(b) {
                        let f = file.strip_prefix(src).unwrap_or(file).display();
                        msg.push_str(&format!("  {a} -> {b}  (e.g. {f}:{line})\n"));
                    }
                }
            }
        }
    }
    msg
}

#[test]
fn no_cycle_between_folders_at_any_level() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let msg = folder_cycles(&src);
    assert!(msg.is_empty(), "folder cycles in src/:\n{msg}");
}

#[test]
fn the_folder_check_sees_a_cycle_no_module_closes() {
    // input → inventory::open → node::proc, and node::facts_file → input:
    // no module-level cycle, but one between the three at depth 1.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("inventory")).unwrap();
    std::fs::create_dir(src.join("node")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod input;\npub mod inventory;\npub mod node;\n",
    )
    .unwrap();
    std::fs::write(src.join("input.rs"), "use crate::inventory::open::f;\n").unwrap();
    std::fs::write(src.join("inventory/mod.rs"), "pub mod open;\n").unwrap();
    std::fs::write(src.join("inventory/open.rs"), "use crate::node::proc::g;\n").unwrap();
    std::fs::write(
        src.join("node/mod.rs"),
        "pub mod proc;\npub mod facts_file;\n",
    )
    .unwrap();
    std::fs::write(src.join("node/proc.rs"), "pub fn g() {}\n").unwrap();
    std::fs::write(src.join("node/facts_file.rs"), "use crate::input::h;\n").unwrap();
    let (mods, edges) = graph(src);
    assert!(
        sccs(&mods, &edges).is_empty(),
        "a module-level cycle: {edges:?}"
    );
    let msg = folder_cycles(src);
    assert!(
        msg.contains("cycle at depth 1 among input, inventory, node"),
        "{msg}"
    );
}

#[test]
fn the_layering_check_finds_a_planted_back_arrow_and_a_stale_exception() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("report")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod finding;\npub mod report;\n").unwrap();
    std::fs::write(
        src.join("report/mod.rs"),
        "pub mod table;\nuse crate::finding::Code;\n",
    )
    .unwrap();
    // The planted arrow: a leaf helper naming the report (line 3).
    std::fs::write(
        src.join("finding.rs"),
        "pub enum Code {}\n#[cfg(test)]\nuse crate::report::x;\nuse crate::report::table::y;\n",
    )
    .unwrap();
    std::fs::write(src.join("report/table.rs"), "pub fn y() {}\n").unwrap();
    let layers: &[(&str, &[&str])] = &[
        ("leaf", &["finding"]),
        ("report", &["report"]),
        ("app", &["crate"]),
    ];
    let err = judge_layers(src, layers, &[]).unwrap_err();
    assert!(
        err.contains("back arrow finding -> report")
            && err.contains("finding.rs:4: finding (leaf) -> report::table (report)"),
        "{err}"
    );
    assert!(
        !err.contains("finding.rs:3"),
        "cfg(test) use counted: {err}"
    );
    // Listed, it passes; listed but gone, it fails; unplaced, it fails.
    assert_eq!(judge_layers(src, layers, &[("finding", "report")]), Ok(()));
    let stale = judge_layers(src, layers, &[("finding", "report"), ("report", "crate")]);
    assert!(
        stale
            .as_ref()
            .unwrap_err()
            .contains("report -> crate no longer runs back up"),
        "{stale:?}"
    );
    let unplaced = judge_layers(src, &layers[1..], &[]).unwrap_err();
    assert!(
        unplaced.contains("module finding has no layer"),
        "{unplaced}"
    );
}

/// The house rules are the compiler's (issue #37 §3): Cargo.toml's
/// `[lints]` deny unsafe code, undocumented unsafe blocks and the print
/// macros, and clippy.toml disallows reading the environment, holding
/// stdout/stderr and reading files by path with std::fs. `.ci/run`'s
/// `cargo clippy -- -D warnings` enforces them; this test holds the
/// configuration and the places that opt out, each of which must be one of
/// these (a new one is a decision: add it here with its reason).
#[test]
fn the_lints_hold_the_house_rules_and_only_these_places_opt_out() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let toml = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for line in [
        "unsafe_code = \"deny\"",
        "undocumented_unsafe_blocks = \"deny\"",
        "print_stdout = \"deny\"",
        "print_stderr = \"deny\"",
        "dbg_macro = \"deny\"",
        "disallowed_methods = \"deny\"",
    ] {
        assert!(toml.lines().any(|l| l == line), "Cargo.toml lacks {line}");
    }
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).unwrap();
    for m in [
        "std::env::var",
        "std::env::var_os",
        "std::env::vars_os",
        "std::io::stdout",
        "std::io::stderr",
        "std::fs::read",
        "std::fs::read_to_string",
        "std::fs::File::open",
    ] {
        assert!(
            clippy.contains(&format!("path = \"{m}\"")),
            "clippy.toml does not disallow {m}"
        );
    }
    let allowed: &[(&str, &str)] = &[
        // The one reader of kvcr's environment, the one writer.
        ("commands/settings.rs", "clippy::disallowed_methods"),
        ("io/output.rs", "clippy::disallowed_methods"),
        // The driver's procfs file under the given /proc.
        ("io/node/gpus.rs", "clippy::disallowed_methods"),
        // Unit tests (the library target is checked without cfg(test)).
        ("lib.rs", "clippy::disallowed_methods"),
        // Raw calls into libc, the kernel and the CUDA driver.
        ("import/run/fd_budget.rs", "unsafe_code"),
        ("import/run/signals.rs", "unsafe_code"),
        ("import/engine/cuda.rs", "unsafe_code"),
        ("import/engine/pidfd.rs", "unsafe_code"),
        ("import/engine/tests_pidfd.rs", "unsafe_code"),
        ("io/cuda_ffi.rs", "unsafe_code"),
        ("io/inventory/perms.rs", "unsafe_code"),
        ("io/procfs.rs", "unsafe_code"),
    ];
    let mut found = Vec::new();
    for file in modules(&root.join("src")).values() {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file
            .strip_prefix(root.join("src"))
            .unwrap()
            .display()
            .to_string();
        for lint in [
            "unsafe_code",
            "clippy::disallowed_methods",
            "clippy::print_stdout",
            "clippy::print_stderr",
            "clippy::dbg_macro",
            "clippy::undocumented_unsafe_blocks",
        ] {
            let opted = text.lines().any(|l| {
                let l = l.trim_start();
                (l.starts_with("#![allow(")
                    || l.starts_with("#[allow(")
                    || l.starts_with("#![cfg_attr(test, allow("))
                    && l.contains(lint)
            });
            if opted && !allowed.contains(&(rel.as_str(), lint)) {
                found.push(format!("{rel}: allows {lint}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "places that opt out of a house rule without being listed here:\n{}",
        found.join("\n")
    );
}

/// Lines of code (comments left out) under `src/` outside `io/procfs.rs`
/// and the unit tests that name a path through `/proc/self/fd`.
fn self_fd_paths(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (m, file) in modules(src) {
        if m == "io::procfs" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if code.contains("/proc/self/fd") || code.contains("\"self/fd") {
                out.push(format!("{}:{}", file.display(), i + 1));
            }
        }
    }
    out
}

/// Every `/proc/self/fd` path goes through the trusted `/proc`
/// (`io/procfs.rs`: `fd_path`, `fd_target`, `reopen`, `chmod`,
/// `open_fds`), which checks it is procfs; none is built by hand.
#[test]
fn every_self_fd_path_goes_through_io_procfs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = self_fd_paths(&src);
    assert!(
        found.is_empty(),
        "/proc/self/fd built by hand (use crate::io::procfs::ProcFs):\n{}",
        found.join("\n")
    );
    // The check sees one.
    let planted = tempfile::tempdir().unwrap();
    std::fs::create_dir(planted.path().join("api")).unwrap();
    std::fs::write(
        planted.path().join("api/mod.rs"),
        "fn f(fd: i32) -> String {\n    format!(\"/proc/self/fd/{fd}\")\n}\n",
    )
    .unwrap();
    assert_eq!(self_fd_paths(planted.path()).len(), 1);
}
