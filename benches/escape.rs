//! Micro-benchmark of terminal-safe escaping (issue #19 item 4): the JSON
//! report writer and the table's sanitizer, escaping by Unicode general
//! category, against the previous hand-listed rule (copied here as the
//! baseline, measured in the same run) and against plain serde_json.
//!
//! Run: cargo bench --bench escape   (prints ns per document / per string
//! and the ratios new/old)
//!
//! Inputs: a report-shaped document of 2,500 groups × 8 ranks, (a) all
//! ASCII, as nearly every real report is, (b) with a non-ASCII name
//! (é, 日本) in one rank of ten, (c) hostile: every string holds format
//! characters. Times are this thread's CPU time, fastest of 7 rounds.

use serde_json::{json, Value};
use std::hint::black_box;
use std::io::{self, Write};

fn cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0, "clock_gettime");
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn time(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<u128> = (0..7)
        .map(|_| {
            let t = cpu_ns();
            for _ in 0..iters {
                f();
            }
            cpu_ns() - t
        })
        .collect();
    rounds.sort();
    rounds[0] as f64 / f64::from(iters)
}

/// The rule before issue #19: a hand list of controls and bidi characters.
fn old_is_dangerous(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{061c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{2069}'
        | '\u{feff}')
}

/// The previous JSON formatter, verbatim but for the predicate, which is
/// a parameter: `old_is_dangerous` for the baseline, the library's
/// `is_dangerous` for "same-crate", which isolates the rule's cost from where
/// the code was compiled. `utf16` spells non-BMP escapes as surrogate pairs,
/// as the library does.
struct Fmt {
    pretty: serde_json::ser::PrettyFormatter<'static>,
    pred: fn(char) -> bool,
    utf16: bool,
}

impl serde_json::ser::Formatter for Fmt {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        frag: &str,
    ) -> io::Result<()> {
        if frag.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return w.write_all(frag.as_bytes());
        }
        let mut start = 0;
        for (i, c) in frag.char_indices() {
            if (self.pred)(c) {
                w.write_all(&frag.as_bytes()[start..i])?;
                if self.utf16 {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        write!(w, "\\u{:04x}", u)?;
                    }
                } else {
                    write!(w, "\\u{:04x}", c as u32)?;
                }
                start = i + c.len_utf8();
            }
        }
        w.write_all(&frag.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.pretty.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.pretty.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.pretty.end_object_value(w)
    }
}

fn fmt_write(out: &mut Vec<u8>, v: &Value, pred: fn(char) -> bool, utf16: bool) {
    let f = Fmt {
        pretty: serde_json::ser::PrettyFormatter::new(),
        pred,
        utf16,
    };
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, f);
    serde::Serialize::serialize(v, &mut ser).unwrap();
    out.push(b'\n');
}

fn old_terminal(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(old_is_dangerous) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if old_is_dangerous(c) {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A report-shaped document; `name(g, r)` gives each rank's file name.
fn report(name: impl Fn(usize, usize) -> String) -> Value {
    let groups: Vec<Value> = (0..2500)
        .map(|g| {
            let ranks: Vec<Value> = (0..8)
                .map(|r| {
                    json!({"rank": r, "path": format!("group-{g:05}/{}", name(g, r)),
                           "gpu_uuid": format!("GPU-6a1f0c2e-{g:04x}-4000-8000-00000000000{r}"),
                           "verdict": "accept", "findings": [], "not_checked": [],
                           "bytes": 5_368_709_120u64})
                })
                .collect();
            json!({"engine_id": format!("bench-{g:05}"),
                   "incarnation": "3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90",
                   "epoch": 1, "verdict": "accept", "headline": "accepted: 8 of 8 \
                       ranks", "ranks": ranks})
        })
        .collect();
    json!({"schema": "kvcr.audit-report/v1", "root": "/var/lib/kvcr/inventory", "groups": groups})
}

fn main() {
    let inputs = [
        ("ascii", report(|_, r| format!("rank-{r}.json"))),
        (
            "mixed",
            report(|g, r| {
                if (g + r) % 10 == 0 {
                    format!("rank-{r}-café-日本.json")
                } else {
                    format!("rank-{r}.json")
                }
            }),
        ),
        (
            "hostile",
            report(|_, r| format!("rank-{r}\u{ad}\u{202e}\u{e0041}x.json")),
        ),
    ];
    let iters = std::env::var("KVCR_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    println!(
        "{:<10} {:>11} {:>11} {:>11} {:>11} {:>8} {:>8}",
        "input", "serde ns", "old ns", "same-crate", "library", "same/old", "lib/old"
    );
    for (label, v) in &inputs {
        // The same-crate copy writes exactly what the library writes.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        fmt_write(&mut a, v, kvcr_audit::display::is_dangerous, true);
        kvcr_audit::display::write_json(&mut b, v).unwrap();
        assert!(a == b, "{label}: the copy differs from the library");
        let mut buf = Vec::with_capacity(8 << 20);
        let serde = time(iters, || {
            buf.clear();
            serde_json::to_writer_pretty(&mut buf, black_box(v)).unwrap();
        });
        let old = time(iters, || {
            buf.clear();
            fmt_write(&mut buf, black_box(v), old_is_dangerous, false);
        });
        let same = time(iters, || {
            buf.clear();
            fmt_write(
                &mut buf,
                black_box(v),
                kvcr_audit::display::is_dangerous,
                true,
            );
        });
        let new = time(iters, || {
            buf.clear();
            kvcr_audit::display::write_json(&mut buf, black_box(v)).unwrap();
        });
        println!(
            "{label:<10} {serde:>11.0} {old:>11.0} {same:>11.0} {new:>11.0} {:>8.3} {:>8.3}",
            same / old,
            new / old
        );
    }
    // The table's sanitizer, per string.
    let strings: Vec<(&str, Vec<String>)> = vec![
        (
            "ascii",
            (0..1000)
                .map(|i| format!("group-{i:05}/rank-3.json"))
                .collect(),
        ),
        (
            "mixed",
            (0..1000)
                .map(|i| format!("group-{i:05}/rank-3-café-日本.json"))
                .collect(),
        ),
        (
            "hostile",
            (0..1000)
                .map(|i| format!("g-{i}/\u{ad}\u{202e}\u{e0041}.json"))
                .collect(),
        ),
    ];
    println!(
        "{:<10} {:>12} {:>12} {:>9}",
        "terminal", "old ns/str", "new ns/str", "new/old"
    );
    for (label, ss) in &strings {
        let old = time(iters * 100, || {
            for s in ss {
                black_box(old_terminal(black_box(s)));
            }
        }) / ss.len() as f64;
        let new = time(iters * 100, || {
            for s in ss {
                black_box(kvcr_audit::display::terminal(black_box(s)));
            }
        }) / ss.len() as f64;
        println!("{label:<10} {old:>12.1} {new:>12.1} {:>9.3}", new / old);
    }
}
