//! The human table (docs/format.md §9): per group a header (verdict, one-line cause,
//! the safe next step), one row per rank, then file-level findings.

use super::sanitize::terminal;
use super::{human_duration_ms, Printer, Verbosity};
use crate::finding::Finding;
use crate::verdict::{GroupVerdict, Judgement, RankVerdict, Verdict};
use comfy_table::{
    presets, Attribute, Cell, Color, ColumnConstraint, ContentArrangement, LineStyle, Table,
    TableStyle,
};
use std::io::{self, Write};

fn paint(p: &Printer, s: &str, code: &str) -> String {
    if p.color {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

fn verdict_cell(p: &Printer, v: Verdict, missing: bool) -> Cell {
    let (text, color) = match (v, missing) {
        (_, true) => ("MISSING", Color::Red),
        (Verdict::Accept, _) => ("accept", Color::Green),
        (Verdict::Reject, _) => ("REJECT", Color::Red),
    };
    let c = Cell::new(text);
    if p.color {
        c.fg(color).add_attribute(Attribute::Bold)
    } else {
        c
    }
}

/// Rules above and below the table and under the header; none between rows.
const STYLE: TableStyle = presets::UTF8_HORIZONTAL_ONLY.row_separator(LineStyle::none());

/// A table in kvcr's style; only the columns in `wrap` wrap to fit the
/// printer's width, the short ones (rank, codes, verdicts) never do.
fn new_table(p: &Printer, header: &[&str], wrap: &[usize]) -> Table {
    let mut t = Table::new();
    t.load_style(STYLE)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(
            header
                .iter()
                .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
        );
    // comfy-table never asks the terminal itself: the Printer decided
    // colour and width once at start-up.
    t.force_no_tty();
    if p.color {
        t.enforce_styling();
    }
    if let Some(w) = p.width {
        t.set_width(w);
    }
    for (i, c) in t.column_iter_mut().enumerate() {
        if !wrap.contains(&i) {
            c.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    t
}

fn finding_line(f: &Finding) -> String {
    terminal(&format!("{} {}", f.code, f.message)).into_owned()
}

/// The reason cell: the first rejecting finding, or with `-v` every
/// finding, every check with its status and the facts not checked.
fn reason(p: &Printer, r: &RankVerdict, live: bool) -> String {
    let rejects: Vec<&Finding> = r.findings.iter().filter(|f| f.is_reject()).collect();
    let mut lines: Vec<String> = match p.verbosity {
        Verbosity::Verbose => r.findings.iter().map(finding_line).collect(),
        _ => match rejects.split_first() {
            Some((first, rest)) if !rest.is_empty() => {
                vec![format!("{} (+{} more)", finding_line(first), rest.len())]
            }
            Some((first, _)) => vec![finding_line(first)],
            None => Vec::new(),
        },
    };
    if p.verbosity == Verbosity::Verbose {
        for c in &r.checks {
            lines.push(terminal(&format!("{}: {}", c.name, c.status)).into_owned());
        }
        if !live {
            lines.push("node facts: not checked (no --live)".to_string());
        }
    }
    if lines.is_empty() {
        lines.push("ok".to_string());
    }
    lines.join("\n")
}

/// Characters a terminal shows: escape sequences (`\x1b[...m`) take none.
fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (false, _) => n += 1,
            (true, 'm') => in_escape = false,
            (true, _) => {}
        }
    }
    n
}

/// Writes `first` then `text`, wrapped at `sep` to the printer's width (when
/// it has one), continuation lines indented by `indent` spaces. A part
/// longer than the width is never cut.
fn wrapped(
    out: &mut dyn Write,
    p: &Printer,
    first: &str,
    text: &str,
    sep: &str,
    indent: usize,
) -> io::Result<()> {
    let Some(width) = p.width.map(usize::from) else {
        return writeln!(out, "{first}{text}");
    };
    let sep_len = visible_len(sep);
    let mut line = first.to_string();
    let mut len = visible_len(first);
    let mut empty = true;
    for part in text.split(sep) {
        let n = visible_len(part);
        if !empty && len + sep_len + n > width {
            writeln!(out, "{line}")?;
            line = " ".repeat(indent);
            len = indent;
            empty = true;
        }
        if !empty {
            line.push_str(sep);
            len += sep_len;
        }
        line.push_str(part);
        len += n;
        empty = false;
    }
    writeln!(out, "{line}")
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

fn group(
    out: &mut dyn Write,
    p: &Printer,
    g: &GroupVerdict,
    live: bool,
    now_ms: u64,
) -> io::Result<()> {
    let verdict = match g.verdict {
        Verdict::Accept => paint(p, "ACCEPTED", "1;32"),
        Verdict::Reject => paint(p, "REJECTED", "1;31"),
    };
    let mut head = format!("group {}  {verdict}", terminal(&g.engine_id));
    if let Some(i) = g.incarnation {
        head.push_str(&format!("  incarnation {}", short(&i.to_string(), 8)));
    }
    if let Some(e) = g.epoch {
        head.push_str(&format!("  epoch {e}"));
    }
    if let Some(w) = g.world_size {
        head.push_str(&format!("  world_size {w}"));
    }
    wrapped(out, p, "", &head, "  ", 2)?;
    wrapped(out, p, "  cause:  ", &terminal(&g.cause), " ", 10)?;
    wrapped(out, p, "  action: ", &terminal(&g.action), " ", 10)?;

    let mut t = new_table(
        p,
        &[
            "rank",
            "gpu",
            "incarnation",
            "epoch",
            "age",
            "verdict",
            "reason",
        ],
        &[6],
    );
    // Runs of missing ranks are one row each (docs/format.md §9.3): a
    // table never grows with world_size alone.
    enum Line<'a> {
        Rank(&'a RankVerdict),
        Missing(u64, u64),
    }
    let mut rows: Vec<(Option<u64>, Line)> =
        g.ranks.iter().map(|r| (r.rank, Line::Rank(r))).collect();
    rows.extend(
        g.missing
            .iter()
            .map(|&(start, end)| (Some(start), Line::Missing(start, end))),
    );
    rows.sort_by_key(|(rank, _)| *rank);
    for (_, line) in rows {
        match line {
            Line::Rank(r) => {
                let rank_s = r.rank.map_or("?".to_string(), |n| n.to_string());
                t.add_row(vec![
                    Cell::new(rank_s),
                    // Untrusted: a merged report's gpu_uuid is whatever the file said.
                    Cell::new(
                        r.gpu_uuid
                            .as_deref()
                            .map_or("-".into(), |g| terminal(&short(g, 12)).into_owned()),
                    ),
                    Cell::new(
                        r.incarnation
                            .map_or("-".into(), |i| short(&i.to_string(), 8)),
                    ),
                    Cell::new(r.epoch.map_or("-".into(), |e| e.to_string())),
                    Cell::new(r.created_unix_ms.map_or("-".into(), |c| {
                        if c > now_ms {
                            "future".to_string()
                        } else {
                            human_duration_ms(now_ms - c)
                        }
                    })),
                    verdict_cell(p, r.verdict, false),
                    Cell::new(reason(p, r, live)),
                ]);
            }
            Line::Missing(start, end) => {
                let (label, why) = if start == end {
                    (
                        start.to_string(),
                        "KV103 no current descriptor for this rank".to_string(),
                    )
                } else {
                    (
                        format!("{start}-{end}"),
                        format!(
                            "KV103 no current descriptor for these {} ranks",
                            end - start + 1
                        ),
                    )
                };
                t.add_row(vec![
                    Cell::new(label),
                    Cell::new("-"),
                    Cell::new("-"),
                    Cell::new("-"),
                    Cell::new("-"),
                    verdict_cell(p, Verdict::Reject, true),
                    Cell::new(why),
                ]);
            }
        }
    }
    writeln!(out, "{t}")?;
    for f in &g.findings {
        if f.code == crate::finding::Code::KV103 {
            continue; // shown as MISSING rows
        }
        let kind = if f.is_reject() { "reject" } else { "notice" };
        let path = f
            .path
            .as_deref()
            .map(|p| format!(" [{}]", terminal(p)))
            .unwrap_or_default();
        wrapped(
            out,
            p,
            &format!("  {kind}: "),
            &format!("{}{path}", finding_line(f)),
            " ",
            4,
        )?;
    }
    if p.verbosity == Verbosity::Verbose {
        for r in &g.ranks {
            let rank = r.rank.map_or("?".to_string(), |n| n.to_string());
            writeln!(out, "  rank {rank} file: {}", terminal(&r.path))?;
        }
    }
    writeln!(out)
}

/// What the report's first line says about the run.
pub struct Header<'a> {
    pub root: &'a str,
    pub live: bool,
    pub strict: bool,
    /// Live facts not checked, over every rank.
    pub not_checked: usize,
    /// `kvcr merge`: the node was never this one.
    pub merged: bool,
}

/// Writes the whole table report.
pub fn write(
    out: &mut dyn Write,
    p: &Printer,
    h: &Header,
    j: &Judgement,
    now_ms: u64,
) -> io::Result<()> {
    let live = h.live;
    // The second line says plainly whether, and how fully, this node was checked.
    let node = match (h.merged, h.live, h.not_checked, h.strict) {
        (true, true, _, _) => "node: merged from live reports".to_string(),
        (true, false, _, _) => "node: merged; not every input was live".to_string(),
        (false, false, _, _) => "node: offline, this node was not checked (add --live)".to_string(),
        (false, true, 0, s) => format!(
            "node: live, checked against this node{}",
            if s { " (strict)" } else { "" }
        ),
        (false, true, n, s) => format!(
            "node: live, checked against this node; {n} fact{} not checked{}",
            if n == 1 { "" } else { "s" },
            if s {
                ", each rejects (--strict)"
            } else {
                " (-v lists them)"
            }
        ),
    };
    writeln!(out, "inventory {}", terminal(h.root))?;
    writeln!(out, "{node}")?;
    writeln!(out)?;
    for g in &j.groups {
        group(out, p, g, live, now_ms)?;
    }
    let shown: Vec<_> = j
        .files
        .iter()
        .filter(|f| {
            p.verbosity == Verbosity::Verbose
                || f.findings.iter().any(Finding::is_reject)
                || !f.findings.is_empty()
        })
        .collect();
    if !shown.is_empty() {
        writeln!(out, "files")?;
        let mut t = new_table(p, &["path", "code", "severity", "finding"], &[0, 3]);
        for f in shown {
            for x in &f.findings {
                t.add_row(vec![
                    Cell::new(terminal(&f.path)),
                    Cell::new(x.code),
                    Cell::new(if x.is_reject() { "reject" } else { "notice" }),
                    Cell::new(terminal(&x.message)),
                ]);
            }
        }
        writeln!(out, "{t}")?;
        writeln!(out)?;
    }
    let s = &j.summary;
    let status = j.exit_status();
    let line = format!(
        "{} group{}: {} accepted, {} rejected · {} descriptor{} · {} file{} rejected · {} notice{} · exit {status}",
        s.groups,
        if s.groups == 1 { "" } else { "s" },
        s.accepted,
        s.rejected,
        s.descriptors,
        if s.descriptors == 1 { "" } else { "s" },
        s.files_rejected,
        if s.files_rejected == 1 { "" } else { "s" },
        s.notices,
        if s.notices == 1 { "" } else { "s" },
    );
    wrapped(out, p, "", &line, " · ", 2)?;
    if s.groups == 0 {
        writeln!(out, "no descriptor found: nothing to import")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{visible_len, wrapped};
    use crate::report::{ColorChoice, Format, Printer};

    fn printer(width: Option<u16>) -> Printer {
        Printer::decide(
            Format::Table,
            ColorChoice::Never,
            false,
            false,
            &|_| None,
            true,
            true,
        )
        .with_width(width)
    }

    fn wrap(width: Option<u16>, first: &str, text: &str, sep: &str) -> String {
        let mut out = Vec::new();
        wrapped(&mut out, &printer(width), first, text, sep, 4).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escape_sequences_take_no_columns() {
        assert_eq!(visible_len("\x1b[1;31mREJECTED\x1b[0m"), 8);
        assert_eq!(visible_len("3f2b8c1e…"), 9);
    }

    #[test]
    fn lines_wrap_to_the_width_and_only_with_one() {
        let text = "one two three four five six";
        assert_eq!(
            wrap(None, "> ", text, " "),
            "> one two three four five six\n"
        );
        assert_eq!(
            wrap(Some(14), "> ", text, " "),
            "> one two\n    three four\n    five six\n"
        );
        // Parts stay whole, even when longer than the width.
        assert_eq!(
            wrap(Some(10), "", "a · b-is-long · c", " · "),
            "a\n    b-is-long\n    c\n"
        );
    }
}
