//! `kvcr profile ROOT [--engine ID]` (docs/format.md §4.1): a deployment
//! profile derived from the live, strict audit of an accepted group, for
//! bootstrapping `kvcr import --profile` (like `mdadm --examine --scan`).
//!
//! The profile says what the inventory already is, so it proves nothing
//! the audit did not; it is marked `derived` (from what, when, and that it
//! must be reviewed). In production the deployer writes the profile from
//! the engine's configuration. A rejected group prints nothing on stdout
//! and exits 1 naming why.

use crate::format::exit;
use crate::format::failure::Failure;
use crate::io::output::emit;
use crate::rules::{GroupVerdict, Verdict};
use crate::service::audit::Inventory;
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// Inventory root directory (default: $KVCR_INVENTORY, else /var/lib/kvcr/inventory).
    #[arg(value_name = "ROOT", env = "KVCR_INVENTORY")]
    pub root: Option<PathBuf>,
    /// The group to derive the profile of (required when the inventory holds several).
    #[arg(long, value_name = "ID", value_parser = super::args::parse_engine_id)]
    pub engine: Option<crate::format::descriptor::EngineId>,
    /// Pin the current owner lifetime of the group that has this incarnation.
    #[arg(long, value_name = "UUID")]
    pub incarnation: Option<uuid::Uuid>,
    #[arg(long, value_name = "USER", value_parser = super::args::parse_user,
          help = super::args::PRODUCER_USER_HELP)]
    pub producer_user: Option<u32>,
}

/// What a derived profile's `derived.review` says.
pub const REVIEW: &str = "derived by kvcr profile from the very inventory it is meant to check: \
    it proves only that the group agrees with itself; review every member against the engine's \
    configuration (model, tp, pp, geometry, the GPU of each rank) before relying on it, and have \
    the deployer write the production profile from that configuration";

/// `kvcr profile`.
pub fn run(inv: &Inventory) -> Result<i32, Failure> {
    let probe = crate::service::audit::probe_node(inv.node_facts.as_deref())
        .map_err(|e| Failure::usage(e, None))?;
    // Strict, as the import it prepares: a fact not checked rejects.
    let audited = crate::service::audit::audit(inv, Some(probe.as_ref()), false, false, true)?.run;
    let j = &audited.judgement;
    let refuse = |why: String| {
        crate::io::output::err_line(&format!(
            "kvcr: no profile derived: {}",
            crate::format::text::terminal(&why)
        ));
        Ok(exit::REJECTED)
    };
    let Some(g) = crate::import::plan::select::select(&j.groups, inv.expect.engine.as_deref())?
    else {
        return refuse(j.cause.clone());
    };
    if g.verdict != Verdict::Accept {
        return refuse(format!(
            "group {} rejected by the live, strict audit: {}",
            g.engine_id, g.cause
        ));
    }
    if g.local_ranks.is_some() {
        return refuse(format!(
            "group {} is accepted only as a local part: a profile declares the whole group, with \
                every rank's GPU",
            g.engine_id
        ));
    }
    let root = audited.root.clone();
    let host = audited.meta.host.clone().unwrap_or_else(|| "?".to_string());
    let doc = profile_of(g, &root, &host, audited.now_ms).map_err(|e| {
        Failure::internal(
            format!("internal error: the derived profile does not parse: {e}"),
            Some("nothing was written; please report this".to_string()),
        )
    })?;
    emit(|out| {
        crate::format::json::write(out, &doc)?;
        out.flush()
    })?;
    crate::io::output::err_line(&format!(
        "kvcr: profile derived from the live audit of {}; review it before use (see its \
            \"derived\" member)",
        crate::format::text::terminal(&g.engine_id)
    ));
    Ok(exit::OK)
}

/// The profile of an accepted group, checked by the profile reader itself
/// (what `kvcr import --profile` will read) before it is printed.
fn profile_of(g: &GroupVerdict, root: &str, host: &str, now_ms: u64) -> Result<Value, String> {
    let mut ranks: Vec<(u64, &str)> = g
        .ranks
        .iter()
        .filter_map(|r| Some((r.rank?, r.gpu_uuid.as_deref()?)))
        .collect();
    ranks.sort();
    let gpus: Vec<&str> = ranks.iter().map(|(_, u)| *u).collect();
    let from = format!(
        "kvcr profile: the live, strict audit of {root} on {host} (incarnation {}, epoch {})",
        g.incarnation.map(|u| u.to_string()).unwrap_or_default(),
        g.epoch.map(|e| e.to_string()).unwrap_or_default()
    );
    let doc = json!({
        "schema": crate::format::profile::PROFILE_SCHEMA,
        "engine_id": g.engine_id,
        "world_size": g.world_size,
        "tp": g.tp,
        "pp": g.pp,
        "model": g.model,
        "geometry": g.geometry,
        "gpus": gpus,
        "derived": {
            "from": from,
            "generated_unix_ms": now_ms,
            "review": REVIEW,
        },
    });
    let bytes = serde_json::to_vec(&doc).map_err(|e| e.to_string())?;
    let p = crate::format::profile::parse_profile(&bytes).map_err(|e| e.to_string())?;
    if !p.missing_for_import().is_empty() {
        return Err(format!("it lacks {}", p.missing_for_import().join(", ")));
    }
    Ok(doc)
}
