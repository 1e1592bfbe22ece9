//! Property tests (proptest) over hostile descriptors (issue #5):
//!
//! - any mutation of a valid descriptor (a field removed, retyped, set to an
//!   extreme, duplicated, or an unknown one added) yields either acceptance
//!   or a finding, never a panic, and a file with a finding never sits in an
//!   accepted rank;
//! - the canonical digest is invariant under key order, whitespace and
//!   escape spelling, and changes when any value changes;
//! - verdicts (and the whole report) do not depend on the order in which
//!   files are found.
//!
//! Case counts are kept to seconds in `cargo test`; `KVCR_PROP_CASES=N`
//! runs N cases per property instead (e.g. 20000 for a long run).

use crate::format::descriptor::parse::{compute_digest, MAX_FINDINGS};
use crate::format::descriptor::{canon, parse_descriptor};
use crate::format::finding::Code;
use crate::format::json;
use crate::format::profile::parse_profile;
use crate::rules::{judge, Candidate, Context, Expectations, FileVerdict, Judgement, Verdict};
use crate::testkit::{seal, to_bytes, Desc, INCARNATION_A, INCARNATION_B};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Value};

const NOW_MS: u64 = crate::testkit::CREATED_UNIX_MS + 60_000;

/// `KVCR_PROP_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("KVCR_PROP_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        // Shrinking a failure is worth a few seconds; keep it bounded.
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// JSON paths and a text writer that can duplicate a key.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Idx(usize),
}

/// Every path to a value inside `v` (the root excluded).
fn all_paths(v: &Value) -> Vec<Vec<Seg>> {
    fn walk(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    here.push(Seg::Key(k.clone()));
                    out.push(here.clone());
                    walk(x, here, out);
                    here.pop();
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    here.push(Seg::Idx(i));
                    out.push(here.clone());
                    walk(x, here, out);
                    here.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

fn get_mut<'a>(v: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::Idx(i) => &mut v[*i],
    })
}

fn get<'a>(v: &'a Value, path: &[Seg]) -> &'a Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &v[k.as_str()],
        Seg::Idx(i) => &v[*i],
    })
}

/// Removes the value at `path` from its parent.
fn remove(v: &mut Value, path: &[Seg]) {
    let (last, parent) = path.split_last().unwrap();
    match (get_mut(v, parent), last) {
        (Value::Object(m), Seg::Key(k)) => {
            m.shift_remove(k);
        }
        (Value::Array(a), Seg::Idx(i)) => {
            a.remove(*i);
        }
        _ => unreachable!(),
    }
}

fn render_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Idx(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Choices for writing one JSON text: member order, whitespace, escapes.
struct Style {
    bits: Vec<u8>,
    at: usize,
    /// A member to write twice: (object path, key, the second value).
    dup: Option<(Vec<Seg>, String, Value)>,
}

impl Style {
    fn plain() -> Style {
        Style {
            bits: vec![0],
            at: 0,
            dup: None,
        }
    }
    fn next(&mut self) -> u8 {
        let b = self.bits[self.at % self.bits.len()];
        self.at += 1;
        b.wrapping_add((self.at / self.bits.len()) as u8)
    }
    fn ws(&mut self, out: &mut String) {
        let b = self.next();
        for i in 0..(b % 4) {
            out.push([' ', '\n', '\t', '\r'][((b >> 2) as usize + i as usize) % 4]);
        }
    }
}

fn write_string(st: &mut Style, s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str(if st.next().is_multiple_of(2) {
                "\\n"
            } else {
                "\\u000a"
            }),
            '/' if st.next().is_multiple_of(2) => out.push_str("\\/"),
            c if (c as u32) < 0x20 || st.next().is_multiple_of(16) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    if st.next().is_multiple_of(2) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    } else {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes `v` as JSON text in the given style (members in an order chosen
/// by the style, whitespace anywhere it is allowed, escapes spelled freely).
fn write_styled(st: &mut Style, v: &Value, here: &mut Vec<Seg>, out: &mut String) {
    st.ws(out);
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => out.push_str(&v.to_string()),
        Value::String(s) => write_string(st, s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                here.push(Seg::Idx(i));
                write_styled(st, x, here, out);
                here.pop();
            }
            st.ws(out);
            out.push(']');
        }
        Value::Object(m) => {
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            // A Fisher-Yates shuffle driven by the style's bits.
            for i in (1..members.len()).rev() {
                let j = st.next() as usize % (i + 1);
                members.swap(i, j);
            }
            let mut extra = None;
            if let Some((p, k, second)) = &st.dup {
                if p == here {
                    extra = Some((k.clone(), second.clone()));
                }
            }
            out.push('{');
            let mut first = true;
            let mut member = |st: &mut Style, k: &str, x: &Value, out: &mut String| {
                if !first {
                    out.push(',');
                }
                first = false;
                st.ws(out);
                write_string(st, k, out);
                st.ws(out);
                out.push(':');
                here.push(Seg::Key(k.to_string()));
                write_styled(st, x, here, out);
                here.pop();
            };
            for (k, x) in members {
                member(st, k, x, out);
            }
            if let Some((k, second)) = extra {
                member(st, &k, &second, out);
            }
            st.ws(out);
            out.push('}');
        }
    }
    st.ws(out);
}

fn styled(v: &Value, st: &mut Style) -> Vec<u8> {
    let mut out = String::new();
    write_styled(st, v, &mut Vec::new(), &mut out);
    out.into_bytes()
}

// ---------------------------------------------------------------------------
// Mutations of a valid descriptor.

fn base_desc(kind: &'static str, allocations: usize) -> Desc {
    let mut d = Desc::new("props-a", 1, 2, 1);
    d.handle_kind = kind;
    d.allocations = allocations;
    d
}

fn sealed_value(d: &Desc) -> Value {
    let mut v = d.value();
    seal(&mut v);
    v
}

/// Values that stress a field: type changes and extremes.
fn extremes() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(false),
        json!(0),
        json!(-1),
        json!(1),
        json!(i32::MAX),
        json!(1u64 << 31),
        json!(u32::MAX),
        json!(1u64 << 32),
        json!((1u64 << 32) + 1),
        json!(i64::MAX),
        json!(1u64 << 63),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1.0),
        json!(-0.0),
        json!(1e300),
        json!(""),
        json!("x"),
        json!("a".repeat(129)),
        json!("é".repeat(257)),
        json!("\u{0}\u{1f}\"\\\u{7f}\u{2028}😀"),
        json!("GPU-00000000-0000-0000-0000-000000000000"),
        json!("00000000-0000-0000-0000-000000000000"),
        json!("sha256:"),
        json!([]),
        json!([1]),
        json!({}),
        json!({"kind": "posix_fd", "fd": 3}),
    ]
}

/// Integer literals serde_json cannot carry (beyond u64 / i64).
const HUGE: &[&str] = &[
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890123456789012345678901234567890",
    "-0",
    "1E2",
    "1.0e-400",
];

#[derive(Clone, Debug)]
enum Mutation {
    Remove,
    /// Replace with `extremes()[i]`.
    Set(Index),
    /// Replace with an integer literal from `HUGE` (textual splice).
    Huge(Index),
    /// Write the member twice; the second copy is `extremes()[i]` or the same.
    Duplicate(Option<Index>),
    /// Add an unknown member to the object at the path (or its parent).
    Unknown,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::Remove),
        any::<Index>().prop_map(Mutation::Set),
        any::<Index>().prop_map(Mutation::Huge),
        proptest::option::of(any::<Index>()).prop_map(Mutation::Duplicate),
        Just(Mutation::Unknown),
    ]
}

/// What the mutated file must produce.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    /// Must carry a finding (a required member is gone, a key is repeated...).
    Finding,
    /// Either outcome is legitimate; it must just not panic.
    Either,
}

/// Applies `m` at `path`; returns the file bytes and what must follow.
fn mutate(v: &Value, path: &[Seg], m: &Mutation, reseal: bool) -> (Vec<u8>, Expect) {
    let mut v = v.clone();
    let leaf_key = match path.last() {
        Some(Seg::Key(k)) => Some(k.as_str()),
        _ => None,
    };
    let seal_if = |v: &mut Value| {
        if reseal && path.first() != Some(&Seg::Key("digest".into())) {
            seal(v);
        }
    };
    match m {
        Mutation::Remove => {
            remove(&mut v, path);
            let expect = if leaf_key.is_some() {
                Expect::Finding // every member of every object is required
            } else {
                Expect::Either // one allocation fewer is still a descriptor
            };
            seal_if(&mut v);
            (to_bytes(&v), expect)
        }
        Mutation::Set(i) => {
            let all = extremes();
            let new = all[i.index(all.len())].clone();
            let old = get(&v, path).clone();
            let changed_type = std::mem::discriminant(&old) != std::mem::discriminant(&new)
                || (old.is_number() && !new.is_i64() && !new.is_u64());
            *get_mut(&mut v, path) = new.clone();
            seal_if(&mut v);
            // A nullable string may become a string (or null) legitimately.
            let nullable = leaf_key == Some("quantization") && (new.is_string() || new.is_null());
            let expect = if changed_type && !nullable {
                Expect::Finding
            } else {
                Expect::Either
            };
            (to_bytes(&v), expect)
        }
        Mutation::Huge(i) => {
            let lit = HUGE[i.index(HUGE.len())];
            let marker = "\u{1}kvcr-huge\u{1}";
            *get_mut(&mut v, path) = json!(marker);
            // Seal the exact text the parser will see, so the literal is
            // judged by the schema, not only by the digest.
            let text = String::from_utf8(to_bytes(&v))
                .unwrap()
                .replace(&serde_json::to_string(marker).unwrap(), lit);
            let mut bytes = text.into_bytes();
            if reseal && path.first() != Some(&Seg::Key("digest".into())) {
                let d = compute_digest(&bytes).expect("valid JSON");
                let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
                let mut val: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                if val.is_object() {
                    // Re-splice: serde_json cannot carry the literal itself.
                    val["digest"] = json!(format!("sha256:{hex}"));
                    *get_mut(&mut val, path) = json!(marker);
                    bytes = String::from_utf8(to_bytes(&val))
                        .unwrap()
                        .replace(&serde_json::to_string(marker).unwrap(), lit)
                        .into_bytes();
                }
            }
            // "-0" is 0, "1E2" a float: anything may happen but a panic.
            (bytes, Expect::Either)
        }
        Mutation::Duplicate(second) => {
            let Some(key) = leaf_key else {
                // An array item: duplicate it in place (two equal ids).
                let item = get(&v, path).clone();
                let (Seg::Idx(i), parent) = path.split_last().unwrap() else {
                    unreachable!()
                };
                get_mut(&mut v, parent)
                    .as_array_mut()
                    .unwrap()
                    .insert(*i, item);
                seal_if(&mut v);
                return (to_bytes(&v), Expect::Either);
            };
            let parent = path[..path.len() - 1].to_vec();
            let dup_value = match second {
                Some(i) => {
                    let all = extremes();
                    all[i.index(all.len())].clone()
                }
                None => get(&v, path).clone(),
            };
            let mut st = Style::plain();
            st.dup = Some((parent, key.to_string(), dup_value));
            // Duplicate keys are malformed whatever the digest says.
            (styled(&v, &mut st), Expect::Finding)
        }
        Mutation::Unknown => {
            let target = if get(&v, path).is_object() {
                path.to_vec()
            } else {
                path[..path.len() - 1].to_vec()
            };
            match get_mut(&mut v, &target) {
                Value::Object(m) => {
                    m.insert("x_unknown".into(), json!(1));
                }
                Value::Array(a) => a.push(json!({"x_unknown": 1})),
                _ => unreachable!(),
            }
            seal_if(&mut v);
            (to_bytes(&v), Expect::Finding)
        }
    }
}

fn candidate(path: &str, name_rank: Option<u64>, bytes: &[u8]) -> Candidate {
    let out = parse_descriptor(bytes);
    Candidate {
        path: path.to_string(),
        raw_path: path.as_bytes().to_vec(),
        name_rank,
        mode: Some(0o600),
        ident: out.ident,
        descriptor: out.descriptor,
        findings: out.findings.into_iter().map(|f| f.at(path)).collect(),
    }
}

fn judge_default(cands: Vec<Candidate>, files: Vec<FileVerdict>) -> Judgement {
    let expect = Expectations::default();
    let ctx = Context {
        now_unix_ms: NOW_MS,
        node: None,
        expect: &expect,
        invocation: &Default::default(),
    };
    judge(cands, files, &ctx)
}

/// The mutated file at rank 1 beside a valid rank 0: judging must not
/// panic, and a file with findings must never be part of an accepted rank.
fn judge_with_mutant(bytes: &[u8], parse_clean: bool) -> Result<(), TestCaseError> {
    let mut r0 = base_desc("fabric", 2);
    r0.rank = 0;
    let rank0 = candidate("a/rank-0.json", Some(0), &r0.bytes());
    let mutant = candidate("a/rank-1.json", Some(1), bytes);
    let j = judge_default(vec![rank0, mutant], Vec::new());
    let status = j.exit_status();
    prop_assert!(status == 0 || status == 1);
    for g in &j.groups {
        for r in &g.ranks {
            if r.path == "a/rank-1.json" && r.verdict == Verdict::Accept {
                prop_assert!(parse_clean, "a file with findings was accepted: {r:?}");
            }
        }
        if g.verdict == Verdict::Accept {
            prop_assert!(g.ranks.iter().all(|r| r.verdict == Verdict::Accept));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    /// Any mutation of a valid descriptor: acceptance or a finding, never a
    /// panic; required members, unknown members and duplicate keys always
    /// give a finding.
    #[test]
    fn mutations_accept_or_find_never_panic(
        kind in prop_oneof![Just("fabric"), Just("cuda_ipc"), Just("posix_fd")],
        allocations in 1usize..4,
        at in any::<Index>(),
        m in mutation(),
        reseal in any::<bool>(),
    ) {
        let v = sealed_value(&base_desc(kind, allocations));
        let paths = all_paths(&v);
        let path = &paths[at.index(paths.len())];
        let (bytes, expect) = mutate(&v, path, &m, reseal);
        let out = parse_descriptor(&bytes);
        prop_assert!(out.findings.len() <= MAX_FINDINGS, "{:?}", out.findings);
        let accepted = out.findings.is_empty();
        if accepted {
            prop_assert!(out.descriptor.is_some(), "no finding and no descriptor");
        } else if out.descriptor.is_some() {
            prop_assert!(out.findings.iter().all(|f| f.code == Code::KV008));
        }
        if expect == Expect::Finding {
            prop_assert!(
                !accepted,
                "{m:?} at {} was accepted:\n{}",
                render_path(path),
                String::from_utf8_lossy(&bytes)
            );
        }
        if let (Mutation::Remove, Some(Seg::Key(_))) = (&m, path.last()) {
            let field = render_path(path);
            prop_assert!(
                out.findings.iter().any(|f| f.code == Code::KV007 && f.message.contains(&field)),
                "removing {field} not named: {:?}", out.findings
            );
        }
        judge_with_mutant(&bytes, accepted)?;
    }

    /// Profiles get the same treatment: never a panic, and removed or
    /// retyped required fields are refused.
    #[test]
    fn profile_mutations_never_panic(at in any::<Index>(), m in mutation()) {
        let v = json!({
            "schema": "kvcr.profile/v1", "engine_id": "props-a", "world_size": 2, "tp": 2, "pp": 1,
            "model": {"name": "m", "revision": "r", "quantization": null},
            "geometry": {"num_layers": 80, "kv_heads_per_rank": 2, "head_size": 128,
                         "block_size": 16, "num_blocks": 1024, "dtype": "bfloat16",
                         "use_mla": false},
            "gpus": [crate::testkit::gpu(0, 0), crate::testkit::gpu(0, 1)],
            "incarnation": INCARNATION_A, "min_epoch": 1, "max_age_s": 3600
        });
        prop_assert!(parse_profile(&to_bytes(&v)).is_ok());
        let paths = all_paths(&v);
        let path = &paths[at.index(paths.len())];
        let (bytes, _) = mutate(&v, path, &m, false);
        let _ = parse_profile(&bytes);
    }

    /// The digest ignores member order, whitespace and how strings are
    /// escaped; the descriptor stays valid however it is written.
    #[test]
    fn digest_invariant_under_order_whitespace_escapes(
        kind in prop_oneof![Just("fabric"), Just("cuda_ipc"), Just("posix_fd")],
        allocations in 1usize..4,
        engine in "[A-Za-z0-9._:/-]{1,40}",
        model in "(?s).{1,40}",
        bits in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let mut d = base_desc(kind, allocations);
        d.engine_id = engine;
        let mut v = d.value();
        v["model"]["name"] = json!(model);
        seal(&mut v);
        let compact = serde_json::to_vec(&v).unwrap();
        let want = compute_digest(&compact).unwrap();
        let mut st = Style { bits, at: 0, dup: None };
        let text = styled(&v, &mut st);
        prop_assert_eq!(compute_digest(&text).unwrap(), want);
        let out = parse_descriptor(&text);
        prop_assert!(
            out.findings.is_empty(),
            "{:?}\n{}",
            out.findings,
            String::from_utf8_lossy(&text)
        );
        // And the canonical bytes are the same, not just the hash.
        let a = canon::canonical_bytes(&json::parse(&text).unwrap(), None);
        let b = canon::canonical_bytes(&json::parse(&compact).unwrap(), None);
        prop_assert_eq!(a, b);
    }

    /// Changing any value (outside the digest member) changes the digest,
    /// and the sealed file then fails its digest check.
    #[test]
    fn digest_changes_when_any_value_changes(
        at in any::<Index>(),
        to in any::<Index>(),
        bits in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let v = sealed_value(&base_desc("fabric", 2));
        let paths: Vec<Vec<Seg>> = all_paths(&v)
            .into_iter()
            .filter(|p| p[0] != Seg::Key("digest".into()))
            .collect();
        let path = &paths[at.index(paths.len())];
        let all = extremes();
        let new = all[to.index(all.len())].clone();
        let old = get(&v, path).clone();
        prop_assume!(new != old);
        let mut w = v.clone();
        *get_mut(&mut w, path) = new;
        let mut st = Style { bits, at: 0, dup: None };
        let text = styled(&w, &mut st);
        let before = compute_digest(&serde_json::to_vec(&v).unwrap()).unwrap();
        prop_assert_ne!(compute_digest(&text).unwrap(), before, "{}", render_path(path));
        let out = parse_descriptor(&text);
        prop_assert!(!out.findings.is_empty());
        prop_assert!(out.findings.iter().any(|f| f.code == Code::KV008 || f.code == Code::KV007));
    }
}

// ---------------------------------------------------------------------------
// Order independence of the verdict.

#[derive(Clone, Debug)]
enum Twist {
    None,
    /// Claims rank 0's GPU (KV106).
    SameGpuAsRank0,
    /// A schema error (KV007); the identity survives.
    Schema,
    /// Edited after sealing (KV008).
    Digest,
    /// Not JSON at all (KV006, unattributable).
    Malformed,
    /// The file name says another rank (KV101).
    NameRank,
    /// Another model name (KV105).
    Model,
}

#[derive(Clone, Debug)]
struct FileSpec {
    engine: u8,
    newer: bool,
    epoch: u64,
    rank: u64,
    twist: Twist,
}

fn file_spec() -> impl Strategy<Value = FileSpec> {
    (
        0u8..2,
        any::<bool>(),
        1u64..3,
        0u64..3,
        prop_oneof![
            6 => Just(Twist::None),
            1 => Just(Twist::SameGpuAsRank0),
            1 => Just(Twist::Schema),
            1 => Just(Twist::Digest),
            1 => Just(Twist::Malformed),
            1 => Just(Twist::NameRank),
            1 => Just(Twist::Model),
        ],
    )
        .prop_map(|(engine, newer, epoch, rank, twist)| FileSpec {
            engine,
            newer,
            epoch,
            rank,
            twist,
        })
}

/// The bytes and file-name rank of one spec.
fn build(spec: &FileSpec) -> (Vec<u8>, u64) {
    let engine = ["order-a", "order-b"][spec.engine as usize];
    // order-a is tp 2, order-b is tp 1 × pp 3.
    let (tp, pp) = if spec.engine == 0 { (2, 1) } else { (1, 3) };
    let mut d = Desc::new(engine, spec.rank, tp, pp);
    d.group = u32::from(spec.engine);
    if spec.newer {
        d.incarnation = INCARNATION_B.to_string();
        d.epoch = spec.epoch + 2;
    } else {
        d.epoch = spec.epoch;
    }
    let mut v = d.value();
    let mut name_rank = spec.rank;
    match spec.twist {
        Twist::SameGpuAsRank0 => v["gpu_uuid"] = json!(crate::testkit::gpu(d.group, 0)),
        Twist::Schema => v["tp"] = json!(0),
        Twist::Model => v["model"]["name"] = json!("other/model"),
        Twist::NameRank => name_rank = spec.rank + 1,
        _ => {}
    }
    seal(&mut v);
    let mut bytes = to_bytes(&v);
    match spec.twist {
        Twist::Digest => {
            let text = String::from_utf8(bytes).unwrap();
            bytes = text
                .replace(
                    "\"owner\": {\n    \"pid\": 4242",
                    "\"owner\": {\n    \"pid\": 4243",
                )
                .into_bytes();
        }
        Twist::Malformed => bytes.truncate(bytes.len() / 2),
        _ => {}
    }
    (bytes, name_rank)
}

/// Everything the judgement holds (its `Debug` form: every field, the
/// messages' typed quantities included).
fn render(j: &Judgement) -> String {
    format!(
        "{:#?}\n{:#?}\n{}\n{}",
        j.groups,
        j.files,
        serde_json::to_string(&j.summary).unwrap(),
        j.exit_status(),
    )
}

fn order_inputs(specs: &[FileSpec], strays: u8) -> (Vec<Candidate>, Vec<FileVerdict>) {
    let cands = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (bytes, name_rank) = build(s);
            candidate(
                &format!("d{i}/rank-{name_rank}.json"),
                Some(name_rank),
                &bytes,
            )
        })
        .collect();
    // Unattributable rank files (symlinks) name themselves as hints for
    // missing ranks; several per rank so their order matters.
    let files = (0..strays)
        .map(|i| {
            let path = format!("s{i}/rank-{}.json", i % 2);
            FileVerdict {
                path: path.clone(),
                findings: vec![
                    crate::format::finding::Finding::reject(Code::KV001, "symlink").at(path),
                ],
            }
        })
        .collect();
    (cands, files)
}

fn expectations(which: u8) -> Expectations {
    let mut e = Expectations::default();
    match which {
        1 => {
            let p = json!({"schema": "kvcr.profile/v1", "engine_id": "order-a",
                           "incarnation": INCARNATION_A});
            e.profile = Some(parse_profile(&to_bytes(&p)).unwrap());
        }
        2 => e.min_epoch = Some(2),
        3 => e.engine = Some("order-b".parse().unwrap()),
        _ => {}
    }
    e
}

proptest! {
    #![proptest_config(config(256))]

    /// Any permutation of the files found gives the same report, byte for
    /// byte (verdicts, findings, their order and messages). The permuted
    /// run is `judge_keeping`'s, which must also hand back every parsed
    /// descriptor it was given, by raw path: those of the current
    /// incarnation, of other incarnations and of groups `--engine` leaves
    /// out alike (what `kvcr import` planned from a copy of each before).
    #[test]
    fn verdicts_do_not_depend_on_file_order(
        (specs, perm) in prop::collection::vec(file_spec(), 1..12).prop_flat_map(|specs| {
            let n = specs.len();
            (Just(specs), Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
        }),
        strays in 0u8..5,
        which in 0u8..4,
    ) {
        let (cands, files) = order_inputs(&specs, strays);
        let expect = expectations(which);
        let invocation = Default::default();
        let ctx = Context {
            now_unix_ms: NOW_MS,
            node: None,
            expect: &expect,
            invocation: &invocation,
        };
        let want: crate::rules::Kept = cands
            .iter()
            .filter_map(|c| c.descriptor.clone().map(|d| (c.raw_path.clone(), d)))
            .collect();
        let a = judge(cands.clone(), files.clone(), &ctx);
        let shuffled: Vec<Candidate> = perm.iter().map(|&i| cands[i].clone()).collect();
        let mut rev_files = files;
        rev_files.reverse();
        let mut kept = crate::rules::Kept::new();
        let b = crate::rules::judge_keeping(shuffled, rev_files, &ctx, Some(&mut kept));
        prop_assert_eq!(render(&a), render(&b));
        prop_assert_eq!(kept, want);
    }
}

// ---------------------------------------------------------------------------
// Regressions found by the fuzzer and these properties.

fn both_orders(
    cands: Vec<Candidate>,
    files: Vec<FileVerdict>,
    expect: &Expectations,
) -> [String; 2] {
    let ctx = Context {
        now_unix_ms: NOW_MS,
        node: None,
        expect,
        invocation: &Default::default(),
    };
    let a = judge(cands.clone(), files.clone(), &ctx);
    let mut rc = cands;
    rc.reverse();
    let mut rf = files;
    rf.reverse();
    let b = judge(rc, rf, &ctx);
    [render(&a), render(&b)]
}

/// fuzz/profile crash-7765f775: superseded (KV108) and not-the-profile's
/// (KV107) notices were listed in the order the files were found.
#[test]
fn regression_superseded_notices_in_path_order() {
    let mut specs = Vec::new();
    for rank in 0..2 {
        specs.push(FileSpec {
            engine: 0,
            newer: false,
            epoch: 1,
            rank,
            twist: Twist::None,
        });
    }
    specs.push(FileSpec {
        engine: 0,
        newer: true,
        epoch: 1,
        rank: 0,
        twist: Twist::None,
    });
    let (cands, files) = order_inputs(&specs, 0);
    let p = json!({"schema": "kvcr.profile/v1", "engine_id": "order-a", "min_epoch": 5});
    let expect = Expectations {
        profile: Some(parse_profile(&to_bytes(&p)).unwrap()),
        ..Expectations::default()
    };
    let [a, b] = both_orders(cands.clone(), files.clone(), &expect);
    assert_eq!(a, b);
    let [a, b] = both_orders(cands, files, &Expectations::default());
    assert_eq!(a, b);
}

/// KV102 named the duplicate paths, KV106 the other claimants and KV103
/// the unattributable rank files in the order they were found.
#[test]
fn regression_duplicate_gpu_and_hint_messages_in_path_order() {
    let specs = vec![
        FileSpec {
            engine: 1,
            newer: false,
            epoch: 1,
            rank: 1,
            twist: Twist::None,
        },
        FileSpec {
            engine: 1,
            newer: false,
            epoch: 1,
            rank: 1,
            twist: Twist::None,
        },
        FileSpec {
            engine: 1,
            newer: false,
            epoch: 1,
            rank: 1,
            twist: Twist::None,
        },
        FileSpec {
            engine: 1,
            newer: false,
            epoch: 1,
            rank: 2,
            twist: Twist::SameGpuAsRank0,
        },
        FileSpec {
            engine: 1,
            newer: false,
            epoch: 1,
            rank: 0,
            twist: Twist::SameGpuAsRank0,
        },
    ];
    let (cands, files) = order_inputs(&specs, 4);
    let [a, b] = both_orders(cands, files, &Expectations::default());
    assert!(
        a.contains("KV102") && a.contains("KV106") && a.contains("s0/rank-0.json"),
        "{a}"
    );
    assert_eq!(a, b);
}
