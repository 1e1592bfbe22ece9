//! The human table (docs/format.md §9): per group a header (verdict, one-line cause,
//! the safe next step), one row per rank, then file-level findings.

use super::{Printer, Verbosity};
use crate::format::finding::{Code, Finding};
use crate::format::message::render;
use crate::format::text::human_duration_ms;
use crate::format::text::terminal;
use crate::rules::{GroupVerdict, Judgement, RankVerdict, Verdict};
use std::io::{self, Write};
use unicode_width::UnicodeWidthChar;

fn paint(p: &Printer, s: &str, code: &str) -> String {
    if p.color {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

fn finding_line(f: &Finding) -> String {
    terminal(&format!("{} {}", f.code, render(&f.message))).into_owned()
}

/// The reason cell: the first rejecting finding, or with `-v` every
/// finding, every check with its status and the facts not checked.
fn reason(p: &Printer, r: &RankVerdict, live: bool) -> Vec<String> {
    let rejects: Vec<&Finding> = r.findings.iter().filter(|f| f.is_reject()).collect();
    let mut lines: Vec<String> = match p.verbosity {
        Verbosity::Verbose => r.findings.iter().map(finding_line).collect(),
        // The row's cause is the core's choice (`rules::cause::fill`).
        _ => match rejects.iter().find(|f| Some(f.code) == r.cause_code) {
            Some(first) if rejects.len() > 1 => {
                vec![format!(
                    "{} (+{} more)",
                    finding_line(first),
                    rejects.len() - 1
                )]
            }
            Some(first) => vec![finding_line(first)],
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
    lines
}

/// Terminal columns `s` takes: a wide character (CJK, most emoji) takes
/// two, a combining mark or a zero-width character none, and so do the
/// colour escape sequences (`\x1b[...m`) this printer writes. Measured by
/// the Unicode East Asian Width rules (`unicode-width`), never by
/// counting characters.
fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut in_escape = false;
    for c in s.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (false, _) => n += UnicodeWidthChar::width(c).unwrap_or(0),
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

/// A path on lines no wider than the printer's width, broken only after a
/// `/` or a `-` (never inside a name's word); `first` spaces before the
/// first line, `indent` before the others.
fn path_lines(
    out: &mut dyn Write,
    p: &Printer,
    path: &str,
    first: usize,
    indent: usize,
) -> io::Result<()> {
    let width = p.width.map_or(usize::MAX, usize::from);
    let mut parts: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in path.char_indices() {
        if c == '/' || c == '-' {
            parts.push(&path[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    if start < path.len() {
        parts.push(&path[start..]);
    }
    let mut line = " ".repeat(first);
    let mut len = first;
    let mut empty = true;
    for part in parts {
        let n = visible_len(part);
        if !empty && len + n > width {
            writeln!(out, "{}", line.trim_end())?;
            line = " ".repeat(indent);
            len = indent;
        }
        line.push_str(part);
        len += n;
        empty = false;
    }
    writeln!(out, "{}", line.trim_end())
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// One rank-table row before layout: the short cells, then the reason lines.
struct Row {
    cells: Vec<String>,
    /// Colour of the verdict cell (index 1 of `cells` after the rank).
    verdict: (String, &'static str),
    reason: Vec<String>,
}

/// Lays rows out in columns two spaces apart, no trailing spaces. The
/// reason goes on the row when it fits the width, else on its own lines
/// below, indented, wrapped at spaces (a word is never cut).
fn layout(out: &mut dyn Write, p: &Printer, header: &[&str], rows: &[Row]) -> io::Result<()> {
    let n = header.len() - 1; // the reason column is not padded
    let mut widths: Vec<usize> = header[..n].iter().map(|h| visible_len(h)).collect();
    for r in rows {
        for (i, c) in r.cells.iter().enumerate() {
            widths[i] = widths[i].max(visible_len(c));
        }
        widths[n - 1] = widths[n - 1].max(visible_len(&r.verdict.0));
    }
    let lead = "  ";
    let prefix_len = lead.len() + widths.iter().map(|w| w + 2).sum::<usize>();
    let line = |cells: Vec<String>, last: &str| {
        let mut s = lead.to_string();
        for (i, c) in cells.iter().enumerate() {
            s.push_str(c);
            s.push_str(&" ".repeat(widths[i] - visible_len(c) + 2));
        }
        s.push_str(last);
        s.trim_end().to_string()
    };
    let head: Vec<String> = header[..n].iter().map(|h| h.to_string()).collect();
    writeln!(out, "{}", paint(p, &line(head, header[n]), "1"))?;
    for r in rows {
        let mut cells = r.cells.clone();
        let v = &r.verdict;
        let pad = widths[n - 1] - visible_len(&v.0);
        cells.push(format!("{}{}", paint(p, &v.0, v.1), " ".repeat(pad)));
        // The verdict cell is padded by hand (colour codes take no columns).
        let fits = |l: &String| {
            p.width
                .is_none_or(|w| prefix_len + visible_len(l) <= w.into())
        };
        if r.reason.len() == 1 && fits(&r.reason[0]) {
            writeln!(out, "{}", line(cells, &r.reason[0]))?;
        } else {
            writeln!(out, "{}", line(cells, ""))?;
            for l in &r.reason {
                wrapped(out, p, "      ", l, " ", 8)?;
            }
        }
    }
    Ok(())
}

/// Plain columns two spaces apart after `lead`, each as wide as its widest
/// line; a cell of several lines goes on below in its own column. No line
/// ends in spaces (the import's rank table).
pub fn columns(
    out: &mut dyn Write,
    p: &Printer,
    lead: &str,
    header: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| visible_len(h)).collect();
    for cell in rows.iter().flat_map(|r| r.iter().enumerate()) {
        for l in cell.1.lines() {
            widths[cell.0] = widths[cell.0].max(visible_len(l));
        }
    }
    let line = |cells: &[&str]| {
        let mut s = lead.to_string();
        for (c, w) in cells.iter().zip(&widths) {
            s.push_str(c);
            s.push_str(&" ".repeat(w - visible_len(c) + 2));
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", paint(p, &line(header), "1"))?;
    for r in rows {
        let lines: Vec<Vec<&str>> = r.iter().map(|c| c.lines().collect()).collect();
        for k in 0..lines.iter().map(Vec::len).max().unwrap_or(0).max(1) {
            let cells: Vec<&str> = lines
                .iter()
                .map(|l| l.get(k).copied().unwrap_or(""))
                .collect();
            writeln!(out, "{}", line(&cells))?;
        }
    }
    Ok(())
}

/// The value every rank with a known value ("-" is unknown) shares in a
/// column, if they all do.
fn constant<'a>(rows: &'a [&'a RankVerdict], f: impl Fn(&RankVerdict) -> String) -> Option<String> {
    let mut known = rows.iter().map(|r| f(r)).filter(|v| v != "-");
    let first = known.next()?;
    known.all(|v| v == first).then_some(first)
}

fn age_of(r: &RankVerdict, now_ms: u64) -> String {
    r.created_unix_ms.map_or("-".into(), |c| {
        if c > now_ms {
            "future".to_string()
        } else {
            human_duration_ms(now_ms - c)
        }
    })
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
    let ranks: Vec<&RankVerdict> = g.ranks.iter().collect();
    let inc_of = |r: &RankVerdict| {
        r.incarnation
            .map_or("-".into(), |i| short(&i.to_string(), 8))
    };
    let epoch_of = |r: &RankVerdict| r.epoch.map_or("-".into(), |e| e.to_string());
    // Columns that are the same on every rank move to the header.
    let group_inc = g.incarnation.map(|i| short(&i.to_string(), 8));
    let same_inc =
        constant(&ranks, inc_of).filter(|i| Some(i) == group_inc.as_ref() || group_inc.is_none());
    let same_epoch = constant(&ranks, epoch_of);
    let same_age = constant(&ranks, |r| age_of(r, now_ms)).filter(|a| a != "-");
    let mut head = format!("group {}  {verdict}", terminal(&g.engine_id));
    if let Some(i) = group_inc.clone().or(same_inc.clone()) {
        head.push_str(&format!("  incarnation {i}"));
    }
    if let Some(e) = g.epoch.map(|e| e.to_string()).or(same_epoch.clone()) {
        head.push_str(&format!("  epoch {e}"));
    }
    if let Some(w) = g.world_size {
        head.push_str(&format!("  world_size {w}"));
    }
    if let Some(a) = &same_age {
        head.push_str(&format!("  age {a}"));
    }
    wrapped(out, p, "", &head, "  ", 2)?;
    wrapped(out, p, "  cause:  ", &terminal(&g.cause), " ", 10)?;
    wrapped(out, p, "  action: ", &terminal(&g.action), " ", 10)?;

    let show_inc = same_inc.is_none() && !ranks.is_empty();
    let show_epoch = same_epoch.is_none() && !ranks.is_empty();
    let show_age = same_age.is_none() && ranks.iter().any(|r| r.created_unix_ms.is_some());
    let mut header = vec!["rank", "gpu"];
    if show_inc {
        header.push("incarnation");
    }
    if show_epoch {
        header.push("epoch");
    }
    if show_age {
        header.push("age");
    }
    header.extend(["verdict", "reason"]);
    let cells = |rank: String, gpu: String, inc: String, epoch: String, age: String| {
        let mut c = vec![rank, gpu];
        if show_inc {
            c.push(inc);
        }
        if show_epoch {
            c.push(epoch);
        }
        if show_age {
            c.push(age);
        }
        c
    };
    // Runs of missing ranks are one row each (docs/format.md §9.3): a
    // table never grows with world_size alone.
    // A rank with more than one row (duplicates, unknown ranks): each row
    // names its file, so rows that look alike can be told apart.
    let mut per_rank: std::collections::HashMap<Option<u64>, usize> =
        std::collections::HashMap::new();
    for r in &g.ranks {
        *per_rank.entry(r.rank).or_default() += 1;
    }
    let mut rows: Vec<(Option<u64>, Row)> = g
        .ranks
        .iter()
        .map(|r| {
            let mut reason = reason(p, r, live);
            if per_rank.get(&r.rank).is_some_and(|&n| n > 1) {
                if let Some(first) = reason.first_mut() {
                    *first = format!("{}: {first}", terminal(&r.path));
                }
            }
            let verdict = match r.verdict {
                Verdict::Accept => ("accept".to_string(), "1;32"),
                Verdict::Reject => ("REJECT".to_string(), "1;31"),
            };
            (
                r.rank,
                Row {
                    cells: cells(
                        r.rank.map_or("?".to_string(), |n| n.to_string()),
                        // Untrusted: a merged report's gpu_uuid is whatever the file said.
                        r.gpu_uuid
                            .as_deref()
                            .map_or("-".into(), |g| terminal(&short(g, 12)).into_owned()),
                        inc_of(r),
                        epoch_of(r),
                        age_of(r, now_ms),
                    ),
                    verdict,
                    reason,
                },
            )
        })
        .collect();
    rows.extend(missing_rows(&g.missing, &cells));
    rows.sort_by_key(|(rank, _)| *rank);
    let rows: Vec<Row> = rows.into_iter().map(|(_, r)| r).collect();
    layout(out, p, &header, &rows)?;
    group_findings(out, p, g)?;
    if p.verbosity == Verbosity::Verbose {
        for r in &g.ranks {
            let rank = r.rank.map_or("?".to_string(), |n| n.to_string());
            writeln!(out, "  rank {rank} file: {}", terminal(&r.path))?;
        }
    }
    writeln!(out)
}

/// The cells of a rank row: rank, GPU, then incarnation, epoch and age
/// where they are columns.
type Cells<'a> = dyn Fn(String, String, String, String, String) -> Vec<String> + 'a;

/// One MISSING row per run of missing ranks (docs/format.md §9.3): a table
/// never grows with world_size alone.
fn missing_rows(missing: &[(u64, u64)], cells: &Cells<'_>) -> Vec<(Option<u64>, Row)> {
    let mut rows = Vec::new();
    for &(start, end) in missing {
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
        rows.push((
            Some(start),
            Row {
                cells: cells(label, "-".into(), "-".into(), "-".into(), "-".into()),
                verdict: ("MISSING".to_string(), "1;31"),
                reason: vec![why],
            },
        ));
    }
    rows
}

/// The group's own findings under its table (KV103 is its MISSING rows).
fn group_findings(out: &mut dyn Write, p: &Printer, g: &GroupVerdict) -> io::Result<()> {
    for f in &g.findings {
        if f.code == Code::KV103 {
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
    Ok(())
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
    /// The profile's path when it came from `$KVCR_PROFILE`, not
    /// `--profile`: an ambient profile changes verdicts, so the header says so.
    pub profile_from_env: Option<&'a str>,
}

/// Writes the whole table report.
pub fn write(
    out: &mut dyn Write,
    p: &Printer,
    h: &Header,
    j: &Judgement,
    now_ms: u64,
) -> io::Result<()> {
    let (live, merged, s) = (h.live, h.merged, &j.summary);
    let not_checked = s.not_checked.max(h.not_checked);
    // The first line says plainly whether, and how fully, this node was checked.
    let strict = if h.strict { " (strict)" } else { "" };
    let checked = match (merged, live) {
        (true, true) => "  (every input live)".to_string(),
        (true, false) => "  (not every input was live)".to_string(),
        (false, false) => "  (offline: node not checked; add --live)".to_string(),
        (false, true) if not_checked > 0 => format!(
            "  (live: checked against this node{strict}; {} not checked, {})",
            if not_checked == 1 {
                "1 fact".to_string()
            } else {
                format!("{not_checked} facts")
            },
            if h.strict {
                "each rejects"
            } else {
                "-v lists them"
            }
        ),
        (false, true) => format!("  (live: checked against this node{strict})"),
    };
    wrapped(
        out,
        p,
        "",
        &format!("inventory {}{checked}", terminal(h.root)),
        "  ",
        2,
    )?;
    if let Some(path) = h.profile_from_env {
        wrapped(
            out,
            p,
            "",
            &format!(
                "profile {} from $KVCR_PROFILE (the environment, not --profile)",
                terminal(path)
            ),
            "  ",
            2,
        )?;
    }
    if s.groups == 0 {
        wrapped(
            out,
            p,
            "",
            &format!("{} (exit {})", terminal(&j.cause), j.exit_status()),
            " ",
            2,
        )?;
    }
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
        let mut rows = Vec::new();
        for f in shown {
            for x in &f.findings {
                rows.push(Row {
                    cells: vec![terminal(&f.path).into_owned(), x.code.to_string()],
                    verdict: if x.is_reject() {
                        ("reject".to_string(), "1;31")
                    } else {
                        ("notice".to_string(), "0")
                    },
                    reason: vec![terminal(&render(&x.message)).into_owned()],
                });
            }
        }
        // A path too long for the columns: one block per file instead, the
        // path broken only after a '/' or '-', the findings below it.
        let longest = j
            .files
            .iter()
            .map(|f| visible_len(&terminal(&f.path)))
            .max();
        let too_wide = p
            .width
            .map(usize::from)
            .zip(longest)
            .is_some_and(|(w, l)| 2 + l + 2 + 5 + 2 + 8 + 2 + 16 > w);
        if too_wide {
            for f in j.files.iter().filter(|f| !f.findings.is_empty()) {
                path_lines(out, p, &terminal(&f.path), 2, 4)?;
                for x in &f.findings {
                    let sev = if x.is_reject() { "reject" } else { "notice" };
                    wrapped(
                        out,
                        p,
                        "      ",
                        &format!("{} {sev}: {}", x.code, terminal(&render(&x.message))),
                        " ",
                        8,
                    )?;
                }
            }
        } else {
            layout(out, p, &["path", "code", "severity", "finding"], &rows)?;
        }
        writeln!(out)?;
    }
    summary_line(out, p, j, live, merged)?;

    Ok(())
}

/// The table's last line: the counts of the summary, whether this node was
/// checked, and the exit status.
fn summary_line(
    out: &mut dyn Write,
    p: &Printer,
    j: &Judgement,
    live: bool,
    merged: bool,
) -> io::Result<()> {
    let s = &j.summary;
    let status = j.exit_status();
    let facts = match (merged, live) {
        (false, false) => " · offline".to_string(),
        (false, true) => format!(
            " · {} not checked",
            if s.not_checked == 1 {
                "1 fact".to_string()
            } else {
                format!("{} facts", s.not_checked)
            }
        ),
        _ => String::new(),
    };
    let line = format!(
        "{} group{}: {} accepted, {} rejected · {} descriptor{} · {} file{} rejected · {} \
         notice{}{facts} · exit {status}",
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{visible_len, wrapped};
    use crate::print::{ColorChoice, Format, Printer};

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

    /// A wide character takes two columns, a combining mark none: the
    /// table measures what a terminal shows, not characters.
    #[test]
    fn wide_characters_take_two_columns_and_combining_marks_none() {
        assert_eq!(visible_len("缓存/rank-0.json"), 4 + 12);
        assert_eq!(visible_len("e\u{301}"), 1);
        assert_eq!(visible_len("\x1b[1m缓\x1b[0m"), 2);
        // Wrapped by columns: "缓存 缓存" is 9 columns, not 5 characters.
        assert_eq!(wrap(Some(8), "", "缓存 缓存", " "), "缓存\n    缓存\n");
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
