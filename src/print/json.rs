//! The JSON report (docs/format.md §9): the judgement of one run (audit
//! or merge) written through the typed `kvcr.audit-report/v1` wire layer
//! (`crate::format::wire`) that merge and the import gate read back, so
//! what is printed and what is read are one set of types.

use crate::format::wire::{
    AuditReport, Each, File, Finding, Group, Input, Options, Rank, Schema, Summary, Verdict,
};
use crate::rules::{self, FileVerdict, GroupVerdict, Judgement, RankVerdict};

/// The document the printer writes for a run (audit or merge).
pub type Printed<'a> = AuditReport<Each<'a, GroupVerdict, Group>, Each<'a, FileVerdict, File>>;

/// The wire form of a run: its metadata, root, merge inputs and verdicts.
pub fn printed<'a>(
    root: &str,
    meta: &crate::format::meta::Meta,
    merge: Option<&crate::format::meta::MergeMeta>,
    j: &'a Judgement,
) -> Printed<'a> {
    let o = &meta.options;
    let s = &j.summary;
    AuditReport {
        schema: Schema,
        kvcr_version: meta.kvcr_version.to_string(),
        generated_unix_ms: meta.generated_unix_ms,
        host: meta.host.clone(),
        boot_id: meta.boot_id.map(|u| u.to_string()),
        live: meta.live,
        strict: meta.strict,
        node_facts_source: meta.node_facts_source.clone(),
        options: Options {
            engine: o.engine.as_ref().map(|e| e.to_string()),
            profile: o.profile.clone(),
            profile_source: o.profile_source.map(str::to_string),
            min_epoch: o.min_epoch,
            max_age_s: o.max_age_s,
            local_ranks: o.local_ranks.as_ref().map(|r| r.to_string()),
            incarnation: o.incarnation.map(|u| u.to_string()),
        },
        exit_status: meta.exit_status,
        root: root.to_string(),
        cause: j.cause.clone(),
        reports: merge.map(|m| m.reports.clone()),
        all_inputs_live: merge.map(|m| m.all_inputs_live),
        oldest_input_age_ms: merge.map(|m| m.oldest_input_age_ms),
        inputs: merge.map(|m| {
            m.inputs
                .iter()
                .map(|i| Input {
                    report: i.report.clone(),
                    host: i.host.clone(),
                    boot_id: i.boot_id.map(|u| u.to_string()),
                    live: i.live,
                    generated_unix_ms: i.generated_unix_ms,
                })
                .collect()
        }),
        groups: Each(&j.groups, group),
        files: Each(&j.files, file),
        summary: Summary {
            groups: s.groups as u64,
            accepted: s.accepted as u64,
            rejected: s.rejected as u64,
            descriptors: s.descriptors as u64,
            files_rejected: s.files_rejected as u64,
            notices: s.notices as u64,
            not_checked: s.not_checked as u64,
        },
    }
}

/// A verdict's wire form.
pub fn verdict(v: rules::Verdict) -> Verdict {
    match v {
        rules::Verdict::Accept => Verdict::Accept,
        rules::Verdict::Reject => Verdict::Reject,
    }
}

/// A group's wire form, as the report writes it.
pub fn group(g: &GroupVerdict) -> Group {
    Group {
        engine_id: g.engine_id.to_string(),
        incarnation: g.incarnation.map(|u| u.to_string()),
        epoch: g.epoch,
        world_size: g.world_size,
        tp: g.tp,
        pp: g.pp,
        model: g.model.clone(),
        geometry: g.geometry.clone(),
        local_ranks: g.local_ranks.as_ref().map(|r| r.to_string()),
        verdict: verdict(g.verdict),
        cause: g.cause.clone(),
        action: g.action.clone(),
        cause_code: g.cause_code.map(|c| c.as_str().to_string()),
        findings: g.findings.iter().map(Finding::of).collect(),
        ranks: g.ranks.iter().map(rank).collect(),
    }
}

/// A rank's wire form.
pub fn rank(r: &RankVerdict) -> Rank {
    Rank {
        rank: r.rank,
        path: r.path.clone(),
        gpu_uuid: r.gpu_uuid.clone(),
        verdict: verdict(r.verdict),
        findings: r.findings.iter().map(Finding::of).collect(),
        not_checked: r.not_checked.clone(),
        report: r.report.clone(),
        incarnation: r.incarnation.map(|u| u.to_string()),
        epoch: r.epoch,
        created_unix_ms: r.created_unix_ms,
        age_ms: r.age_ms,
        owner_pid: r.owner_pid,
    }
}

/// A file-level verdict's wire form.
pub fn file(f: &FileVerdict) -> File {
    File {
        path: f.path.clone(),
        findings: f.findings.iter().map(Finding::of).collect(),
    }
}
