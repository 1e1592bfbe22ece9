//! KV104 (geometry), KV105 (model), KV106 (GPU UUID, non-live part), the
//! epoch-within-incarnation part of KV107 and the one-node part of KV110:
//! every current rank against the profile where it declares a field, else
//! against the reference rank.

use super::claims::{name_bounded, Claims};
use super::Row;
use crate::format::descriptor::{Descriptor, Geometry, Model, NodeId};
use crate::format::finding::{Code, Finding};
use crate::format::profile::Profile;
use std::fmt::Display;

/// The values every rank is compared with.
pub(crate) struct Reference {
    /// The reference's own row.
    pub row: usize,
    /// "profile" or "rank N".
    pub source_rank: Option<u64>,
    pub world_size: u64,
    pub tp: u64,
    pub pp: u64,
    pub geometry: Geometry,
    pub model: Model,
    pub epoch: u64,
    pub node: NodeId,
}

/// Rank 0 of the current incarnation, else the lowest valid rank (ties,
/// i.e. duplicates, broken by path so the verdict never depends on the
/// order files were found in).
///
/// When every current descriptor already carries a finding (all 0666, all
/// digest mismatches...), the lowest parsed one still serves, so the
/// group's world size, its missing ranks and its shape are still reported.
pub(crate) fn reference(rows: &[Row]) -> Option<Reference> {
    let lowest = |clean: bool| {
        rows.iter()
            .enumerate()
            .filter(|(_, r)| r.desc().is_some() && (!clean || r.is_clean()))
            .min_by(|(_, a), (_, b)| {
                let (da, db) = (a.desc().map(|d| d.rank), b.desc().map(|d| d.rank));
                da.cmp(&db).then_with(|| a.raw_path().cmp(b.raw_path()))
            })
    };
    let (row, best_row) = lowest(true).or_else(|| lowest(false))?;
    let best = best_row.desc()?;
    Some(Reference {
        row,
        source_rank: Some(best.rank),
        world_size: best.world_size,
        tp: best.tp,
        pp: best.pp,
        geometry: best.geometry.clone(),
        model: best.model.clone(),
        epoch: best.epoch,
        node: best.node.clone(),
    })
}

fn src(p_has: bool, r: Option<&Reference>) -> Src {
    Src(if p_has {
        None
    } else {
        Some(r.and_then(|r| r.source_rank))
    })
}

/// Where an expected value comes from, written only into a finding (not
/// formatted for every row that agrees): `None` is the profile,
/// `Some(rank)` the reference rank.
struct Src(Option<Option<u64>>);

impl Display for Src {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => f.write_str("the profile"),
            Some(Some(n)) => write!(f, "rank {n}"),
            Some(None) => f.write_str("the reference"),
        }
    }
}

/// A value compared as itself and written as its `Debug` form (which is
/// one-to-one, so the two agree on what differs).
#[derive(PartialEq)]
struct Dbg<'a, T>(&'a T);

impl<T: std::fmt::Debug> Display for Dbg<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Compares one value; pushes a finding naming the field and both values.
#[allow(clippy::too_many_arguments)]
fn cmp<T: PartialEq + Display>(
    row: &mut Row,
    ok: &mut bool,
    code: Code,
    field: &str,
    expected: &T,
    found: &T,
    from: &Src,
) {
    if expected != found {
        *ok = false;
        row.reject(
            Finding::reject(
                code,
                format!("{field} is {found} but {from} has {expected}"),
            )
            .values(expected, found),
        );
    }
}

#[derive(PartialEq)]
struct Q<'a>(&'a Option<String>);
impl Display for Q<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(s) => write!(f, "{s:?}"),
            None => f.write_str("null"),
        }
    }
}

pub(crate) fn check(rows: &mut [Row], reference: Option<&Reference>, profile: Option<&Profile>) {
    let refr = reference;
    for row in rows.iter_mut() {
        row.with_desc(|row, d| {
            geometry(row, d, refr, profile);
            model(row, d, refr, profile);
            node(row, d, refr);
            if let Some(r) = refr {
                if d.epoch != r.epoch {
                    let from = src(false, refr);
                    row.reject(
                        Finding::reject(
                            Code::KV107,
                            format!(
                                "epoch {} differs from {from} (epoch {}) within incarnation {}",
                                d.epoch, r.epoch, d.incarnation
                            ),
                        )
                        .values(r.epoch, d.epoch),
                    );
                }
            }
        });
    }
    gpus(rows, profile);
    if let Some(r) = refr {
        odd_reference(rows, r, profile);
    }
}

/// The reference rank is compared with the others, not with itself, so when
/// it alone disagrees (rank 0 with another hostname than the three ranks
/// that agree), the others would carry the findings and it would read
/// "accept". A field on which more than half of the other parsed ranks
/// agree on a value that differs from the reference's rejects the
/// reference too, naming it as the odd one. Fields the profile declares are
/// judged against the profile instead (the reference does not decide them).
fn odd_reference(rows: &mut [Row], r: &Reference, p: Option<&Profile>) {
    // Only a group where some rank already disagrees can have an odd
    // reference: the common case costs one scan of the findings.
    let disagrees = rows.iter().any(|x| {
        x.findings
            .iter()
            .any(|f| matches!(f.code, Code::KV104 | Code::KV105 | Code::KV110))
    });
    if !disagrees {
        return;
    }
    type Get = fn(&Descriptor) -> String;
    let geo = p.and_then(|p| p.geometry.as_ref()).is_some();
    let model = p.and_then(|p| p.model.as_ref()).is_some();
    let fields: Vec<(&str, Code, Get, bool)> = vec![
        (
            "node.hostname",
            Code::KV110,
            |d| d.node.hostname.to_ascii_lowercase(),
            false,
        ),
        (
            "node.boot_id",
            Code::KV110,
            |d| d.node.boot_id.to_string(),
            false,
        ),
        (
            "model.name",
            Code::KV105,
            |d| format!("{:?}", d.model.name),
            model,
        ),
        (
            "model.revision",
            Code::KV105,
            |d| format!("{:?}", d.model.revision),
            model,
        ),
        (
            "model.quantization",
            Code::KV105,
            |d| format!("{:?}", d.model.quantization),
            model,
        ),
        (
            "world_size",
            Code::KV104,
            |d| d.world_size.to_string(),
            p.and_then(|p| p.world_size).is_some(),
        ),
        (
            "tp",
            Code::KV104,
            |d| d.tp.to_string(),
            p.and_then(|p| p.tp).is_some(),
        ),
        (
            "pp",
            Code::KV104,
            |d| d.pp.to_string(),
            p.and_then(|p| p.pp).is_some(),
        ),
        (
            "geometry",
            Code::KV104,
            |d| format!("{:?}", d.geometry),
            geo,
        ),
    ];
    let Some(me) = rows.get(r.row).and_then(|x| x.desc()).cloned() else {
        return;
    };
    for (field, code, get, declared) in fields {
        if declared {
            continue;
        }
        let mine = get(&me);
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        let mut others = 0usize;
        for (i, row) in rows.iter().enumerate() {
            if i == r.row {
                continue;
            }
            if let Some(d) = row.desc() {
                others += 1;
                *counts.entry(get(d)).or_default() += 1;
            }
        }
        let Some((value, n)) = counts.into_iter().max_by_key(|(_, n)| *n) else {
            continue;
        };
        if others >= 2 && n * 2 > others && value != mine {
            rows[r.row].reject(
                Finding::reject(
                    code,
                    format!(
                        "{field} is {mine} here but {n} of the {others} other ranks have {value}: \
                            this rank is the odd one"
                    ),
                )
                .values(value, mine),
            );
        }
    }
}

fn geometry(row: &mut Row, d: &Descriptor, r: Option<&Reference>, p: Option<&Profile>) {
    let refr = r;
    let mut ok = true;
    let pick = |pv: Option<u64>, rv: Option<u64>| -> Option<(u64, bool)> {
        pv.map(|v| (v, true)).or(rv.map(|v| (v, false)))
    };
    for (field, found, pv, rv) in [
        (
            "world_size",
            d.world_size,
            p.and_then(|p| p.world_size),
            r.map(|r| r.world_size),
        ),
        ("tp", d.tp, p.and_then(|p| p.tp), r.map(|r| r.tp)),
        ("pp", d.pp, p.and_then(|p| p.pp), r.map(|r| r.pp)),
    ] {
        if let Some((exp, from_profile)) = pick(pv, rv) {
            cmp(
                row,
                &mut ok,
                Code::KV104,
                field,
                &exp,
                &found,
                &src(from_profile, refr),
            );
        }
    }
    let (exp_geo, from_profile) = match (p.and_then(|p| p.geometry.as_ref()), r) {
        (Some(g), _) => (Some(g), true),
        (None, Some(r)) => (Some(&r.geometry), false),
        _ => (None, false),
    };
    if let Some(e) = exp_geo {
        let from = src(from_profile, refr);
        let g = &d.geometry;
        for (field, exp, found) in [
            ("geometry.num_layers", e.num_layers, g.num_layers),
            (
                "geometry.kv_heads_per_rank",
                e.kv_heads_per_rank,
                g.kv_heads_per_rank,
            ),
            ("geometry.head_size", e.head_size, g.head_size),
            ("geometry.block_size", e.block_size, g.block_size),
            ("geometry.num_blocks", e.num_blocks, g.num_blocks),
        ] {
            cmp(row, &mut ok, Code::KV104, field, &exp, &found, &from);
        }
        cmp(
            row,
            &mut ok,
            Code::KV104,
            "geometry.dtype",
            &e.dtype,
            &g.dtype,
            &from,
        );
        cmp(
            row,
            &mut ok,
            Code::KV104,
            "geometry.use_mla",
            &e.use_mla,
            &g.use_mla,
            &from,
        );
    }
    // docs/format.md §3.1: the allocations must cover what the geometry needs.
    if let Some(need) = d.geometry.bytes_needed() {
        let have = d.allocated_bytes();
        if have < need as u128 {
            ok = false;
            row.reject(
                Finding::reject(
                    Code::KV104,
                    format!(
                        "allocations total {have} bytes, fewer than the {need} bytes the geometry \
                            needs"
                    ),
                )
                .values(format!("≥ {need} bytes"), format!("{have} bytes")),
            );
        }
    }
    for id in d.duplicate_allocation_ids() {
        ok = false;
        row.reject(
            Finding::reject(
                Code::KV104,
                format!("allocation id {id:?} appears more than once"),
            )
            .values("unique allocation ids", format!("{id:?} repeated")),
        );
    }
    row.check("geometry", ok);
}

fn model(row: &mut Row, d: &Descriptor, r: Option<&Reference>, p: Option<&Profile>) {
    let refr = r;
    let (exp, from_profile) = match (p.and_then(|p| p.model.as_ref()), r) {
        (Some(m), _) => (m, true),
        (None, Some(r)) => (&r.model, false),
        _ => return,
    };
    let from = src(from_profile, refr);
    let mut ok = true;
    let m = &d.model;
    cmp(
        row,
        &mut ok,
        Code::KV105,
        "model.name",
        &Dbg(&exp.name),
        &Dbg(&m.name),
        &from,
    );
    cmp(
        row,
        &mut ok,
        Code::KV105,
        "model.revision",
        &Dbg(&exp.revision),
        &Dbg(&m.revision),
        &from,
    );
    cmp(
        row,
        &mut ok,
        Code::KV105,
        "model.quantization",
        &Q(&exp.quantization),
        &Q(&m.quantization),
        &from,
    );
    row.check("model", ok);
}

/// One GPU claimed by two current ranks; not the profile's GPU for a rank.
/// GPUs are compared by their 16 UUID bytes (`GpuUuid`'s equality): a
/// `GPU-<u>` and a `MIG-<u>` are one GPU.
fn gpus(rows: &mut [Row], profile: Option<&Profile>) {
    let claims = Claims::new(
        rows,
        rows.iter()
            .enumerate()
            .filter_map(|(i, r)| r.desc().map(|d| (d.gpu_uuid, i))),
    );
    let found: Vec<Option<super::claims::Rivals>> = (0..rows.len())
        .map(|me| {
            rows[me]
                .desc()
                .and_then(|d| claims.rivals(rows, &d.gpu_uuid, me))
        })
        .collect();
    let names: Vec<Option<String>> = found
        .iter()
        .enumerate()
        .map(|(me, rv)| {
            let mine = rows[me].desc().map(|d| d.gpu_uuid.kind);
            rv.as_ref().map(|rv| {
                let named: Vec<String> = rv
                    .named
                    .iter()
                    .map(|&j| match rows[j].desc() {
                        // Name the other spelling (GPU-/MIG-) where it differs.
                        Some(o) if Some(o.gpu_uuid.kind) != mine => {
                            format!("rank {} ({}, as {})", o.rank, rows[j].path(), o.gpu_uuid)
                        }
                        Some(o) => format!("rank {} ({})", o.rank, rows[j].path()),
                        None => rows[j].path().to_string(),
                    })
                    .collect();
                name_bounded(&named, rv.total)
            })
        })
        .collect();
    for (row, who) in rows.iter_mut().zip(names) {
        let Some(d) = row.desc() else {
            continue;
        };
        // Copied out (the row changes below); the GPU is written only into
        // a finding.
        let (rank, uuid) = (d.rank, d.gpu_uuid);
        let mut ok = true;
        if let Some(who) = who {
            ok = false;
            row.reject(
                Finding::reject(Code::KV106, format!("GPU {uuid} is also claimed by {who}"))
                    .values("one rank per GPU", format!("{uuid} shared")),
            );
        }
        if let Some(list) = profile.and_then(|p| p.gpus.as_ref()) {
            match usize::try_from(rank).ok().and_then(|i| list.get(i)) {
                Some(want) if *want != uuid => {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV106,
                            format!("rank {rank} is on {uuid} but the profile puts it on {want}"),
                        )
                        .values(want, uuid),
                    );
                }
                None => {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV106,
                            format!("the profile lists no GPU for rank {rank}"),
                        )
                        .values(format!("a GPU in profile gpus[{}]", rank), uuid),
                    );
                }
                _ => {}
            }
        }
        row.check("gpu-uuid", ok);
    }
}

/// One inventory is one node's (docs/format.md §5.5): every current
/// descriptor of a group names the reference rank's hostname (ASCII
/// case-insensitive) and boot id, with or without `--live`.
fn node(row: &mut Row, d: &Descriptor, r: Option<&Reference>) {
    let Some(r) = r else {
        return;
    };
    let from = src(false, Some(r));
    let mut ok = true;
    if !d.node.hostname.eq_ignore_ascii_case(&r.node.hostname) {
        ok = false;
        row.reject(
            Finding::reject(
                Code::KV110,
                format!(
                    "node.hostname is {:?} but {from} has {:?}: one inventory holds one node's \
                        descriptors",
                    d.node.hostname, r.node.hostname
                ),
            )
            .values(
                format!("{:?}", r.node.hostname),
                format!("{:?}", d.node.hostname),
            ),
        );
    }
    if d.node.boot_id != r.node.boot_id {
        ok = false;
        row.reject(
            Finding::reject(
                Code::KV110,
                format!(
                    "node.boot_id is {} but {from} has {}: the descriptors were written in \
                        different boots or on different nodes",
                    d.node.boot_id, r.node.boot_id
                ),
            )
            .values(r.node.boot_id, d.node.boot_id),
        );
    }
    row.check("one-node", ok);
}
