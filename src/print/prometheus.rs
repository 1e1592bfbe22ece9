//! The Prometheus text exposition format (docs/format.md §9.5), for
//! `kvcr audit --format prometheus` and node-exporter's textfile collector
//! (`--textfile PATH`).
//!
//! Every metric is a gauge: an audit is a snapshot, nothing here counts up
//! across runs, so no name ends in `_total`. Units are in the names
//! (`_seconds`). Findings are aggregated by code and severity, never by
//! path: a label per file would give a new time series per descriptor.

use crate::format::finding::{Finding, Severity};
use crate::rules::{Judgement, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

/// What the metrics say beyond the judgement.
#[derive(Clone, Debug)]
pub struct Meta {
    /// When the audit ran (Unix milliseconds); ages are measured from it.
    pub now_unix_ms: u64,
    pub live: bool,
    /// How long the audit took; `None` leaves the metric out (a merge).
    pub duration: Option<Duration>,
    /// The exit status the run returns (docs/format.md §6).
    pub exit_status: i32,
}

/// A label value escaped as the exposition format requires, after the
/// terminal sanitizer (control, bidi and format characters become visible
/// `\x1b` / `\u{202e}` text, whose backslash is then escaped): a label never
/// carries a raw character a terminal or a scraper would act on.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    let mut buf = [0u8; 4];
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c if crate::format::text::is_dangerous(c) => s.push_str(
                &crate::format::text::terminal(c.encode_utf8(&mut buf)).replace('\\', "\\\\"),
            ),
            c => s.push(c),
        }
    }
    s
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} gauge");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape_label(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Reject => "reject",
        Severity::Notice => "notice",
    }
}

/// (code, name, severity) → count.
type Tally = BTreeMap<(&'static str, &'static str, &'static str), u64>;

fn tally<'a>(t: &mut Tally, findings: impl Iterator<Item = &'a Finding>) {
    for f in findings {
        *t.entry((f.code.as_str(), f.name, severity(f.severity)))
            .or_default() += 1;
    }
}

const SUCCESS_HELP: &str =
    "1 when the audit ran, 0 when it could not run (exit 2: no verdict, no group metrics).";

/// The metrics every text carries, whether or not the audit ran.
fn header(o: &mut Out, success: bool, meta: &Meta) {
    o.family("kvcr_audit_success", SUCCESS_HELP);
    o.sample("kvcr_audit_success", &[], u8::from(success));
    if let Some(d) = meta.duration {
        o.family(
            "kvcr_audit_duration_seconds",
            "Wall time of the audit, reading to judging.",
        );
        o.sample("kvcr_audit_duration_seconds", &[], d.as_secs_f64());
    }
    o.family(
        "kvcr_audit_timestamp_seconds",
        "When the audit ran, Unix time.",
    );
    o.sample(
        "kvcr_audit_timestamp_seconds",
        &[],
        meta.now_unix_ms as f64 / 1000.0,
    );
    o.family(
        "kvcr_audit_live",
        "1 when the inventory was also checked against this node (--live).",
    );
    o.sample("kvcr_audit_live", &[], u8::from(meta.live));
    o.family(
        "kvcr_audit_exit_status",
        "The exit status of the audit: 0 accepted, 1 rejected, 2 could not run.",
    );
    o.sample("kvcr_audit_exit_status", &[], meta.exit_status);
    o.family(
        "kvcr_build_info",
        "The kvcr version that wrote these metrics.",
    );
    o.sample(
        "kvcr_build_info",
        &[("version", crate::format::version::VERSION)],
        1,
    );
}

/// The text for a run that could not happen (exit 2: no inventory, a bad
/// profile, no node probe, permission denied): `kvcr_audit_success 0`, the
/// time, the mode and the exit status, and no verdict at all, so a textfile
/// never goes on saying what an earlier run found (docs/format.md §9.5).
pub fn render_failure(meta: &Meta) -> String {
    let mut o = Out(String::new());
    header(&mut o, false, meta);
    o.0
}

/// The whole exposition text.
pub fn render(j: &Judgement, meta: &Meta) -> String {
    let mut o = Out(String::new());
    header(&mut o, true, meta);
    if meta.live {
        o.family(
            "kvcr_audit_facts_not_checked",
            "Live facts (boot id, hostname, owner, writer, GPU) that could not be read, over \
                every rank in scope (only with --live).",
        );
        o.sample("kvcr_audit_facts_not_checked", &[], j.summary.not_checked);
    }

    let s = &j.summary;
    o.family("kvcr_groups", "Rank groups in scope, by verdict.");
    o.sample("kvcr_groups", &[("verdict", "accept")], s.accepted);
    o.sample("kvcr_groups", &[("verdict", "reject")], s.rejected);
    o.family(
        "kvcr_descriptors",
        "Descriptor files attributed to a group in scope.",
    );
    o.sample("kvcr_descriptors", &[], s.descriptors);
    o.family(
        "kvcr_files_rejected",
        "Entries belonging to no group with a rejecting finding.",
    );
    o.sample("kvcr_files_rejected", &[], s.files_rejected);

    let mut all = Tally::new();
    tally(&mut all, j.files.iter().flat_map(|f| &f.findings));
    for g in &j.groups {
        tally(&mut all, g.findings.iter());
        tally(&mut all, g.ranks.iter().flat_map(|r| &r.findings));
    }
    o.family(
        "kvcr_findings",
        "Findings in the whole audit, by code and severity.",
    );
    for ((code, name, sev), n) in &all {
        o.sample(
            "kvcr_findings",
            &[("code", code), ("name", name), ("severity", sev)],
            n,
        );
    }

    type PerGroup<'a> = Vec<(&'a str, String)>;
    let mut accepted: PerGroup = Vec::new();
    let mut live: PerGroup = Vec::new();
    let mut present: PerGroup = Vec::new();
    let mut expected: PerGroup = Vec::new();
    let mut epoch: PerGroup = Vec::new();
    let mut oldest: PerGroup = Vec::new();
    let mut unchecked: PerGroup = Vec::new();
    let mut findings: Vec<(&str, (&str, &str, &str), u64)> = Vec::new();
    for g in &j.groups {
        let e = g.engine_id.as_str();
        accepted.push((e, u8::from(g.verdict == Verdict::Accept).to_string()));
        live.push((e, u8::from(meta.live).to_string()));
        let ranks: BTreeSet<u64> = g.ranks.iter().filter_map(|r| r.rank).collect();
        present.push((e, ranks.len().to_string()));
        if let Some(w) = g.world_size {
            expected.push((e, w.to_string()));
        }
        if let Some(ep) = g.epoch {
            epoch.push((e, ep.to_string()));
        }
        if let Some(created) = g.ranks.iter().filter_map(|r| r.created_unix_ms).min() {
            let age_ms = meta.now_unix_ms.saturating_sub(created);
            oldest.push((e, (age_ms as f64 / 1000.0).to_string()));
        }
        if meta.live {
            let n: usize = g.ranks.iter().map(|r| r.not_checked.len()).sum();
            unchecked.push((e, n.to_string()));
        }
        let mut t = Tally::new();
        tally(&mut t, g.findings.iter());
        tally(&mut t, g.ranks.iter().flat_map(|r| &r.findings));
        findings.extend(t.into_iter().map(|(k, n)| (e, k, n)));
    }
    for (name, help, rows) in [
        (
            "kvcr_group_accepted",
            "1 when the rank group is accepted, 0 when rejected.",
            &accepted,
        ),
        (
            "kvcr_group_live",
            "1 when the group was checked against this node.",
            &live,
        ),
        (
            "kvcr_group_ranks_present",
            "Distinct ranks with a current descriptor.",
            &present,
        ),
        (
            "kvcr_group_ranks_expected",
            "The group's world size.",
            &expected,
        ),
        (
            "kvcr_group_epoch",
            "The epoch of the group's current incarnation.",
            &epoch,
        ),
        (
            "kvcr_group_oldest_descriptor_age_seconds",
            "Age of the group's oldest current descriptor (0 for one from the future).",
            &oldest,
        ),
        (
            "kvcr_group_facts_not_checked",
            "Live facts of the group's ranks that could not be read (only with --live).",
            &unchecked,
        ),
    ] {
        o.family(name, help);
        for (e, v) in rows {
            o.sample(name, &[("engine_id", e)], v);
        }
    }
    o.family(
        "kvcr_group_findings",
        "Findings of a group and its ranks, by code and severity.",
    );
    for (e, (code, _, sev), n) in &findings {
        o.sample(
            "kvcr_group_findings",
            &[("engine_id", e), ("code", code), ("severity", sev)],
            n,
        );
    }
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        assert_eq!(escape_label("llama3-70b:a/b"), "llama3-70b:a/b");
        assert_eq!(
            escape_label("a\u{1b}\u{7}\r\u{202e}\u{2028}b"),
            r"a\\x1b\\x07\\x0d\\u{202e}\\u{2028}b"
        );
    }

    #[test]
    fn an_empty_judgement_still_names_every_family() {
        let j = Judgement::new(Vec::new(), Vec::new(), 0);
        let text = render(
            &j,
            &Meta {
                now_unix_ms: 1_500,
                live: false,
                duration: Some(Duration::from_millis(250)),
                exit_status: 1,
            },
        );
        assert!(
            text.contains("\nkvcr_audit_duration_seconds 0.25\n"),
            "{text}"
        );
        assert!(text.contains("\nkvcr_audit_timestamp_seconds 1.5\n"));
        assert!(text.contains("\nkvcr_audit_exit_status 1\n"));
        assert!(text.contains("# TYPE kvcr_group_accepted gauge\n"));
        assert!(!text.contains("_total"));
        // Offline: nothing was read from the node, so no "not checked" count.
        assert!(!text.contains("kvcr_audit_facts_not_checked"));
    }

    #[test]
    fn a_failed_run_says_success_0_and_nothing_about_groups() {
        let text = render_failure(&Meta {
            now_unix_ms: 2_000,
            live: true,
            duration: None,
            exit_status: 2,
        });
        assert!(text.contains("\nkvcr_audit_success 0\n"), "{text}");
        assert!(
            text.contains("\nkvcr_audit_timestamp_seconds 2\n"),
            "{text}"
        );
        assert!(text.contains("\nkvcr_audit_exit_status 2\n"));
        assert!(text.contains("\nkvcr_audit_live 1\n"));
        assert!(!text.contains("kvcr_group"), "{text}");
        assert!(!text.contains("kvcr_findings"), "{text}");
        assert!(!text.contains("duration"), "{text}");
    }
}
