//! The argument groups several subcommands share (the inventory to judge,
//! the output choice) and the value parsers of their flags, each the rule
//! of docs/format.md it names.

use crate::format::timefmt::{parse_age, I63_MAX};
use crate::print::{ColorChoice, Format};
use clap::Args;
use std::path::PathBuf;

/// Options shared by every command that reads an inventory.
#[derive(Args, Debug, Clone)]
pub struct InventoryArgs {
    /// Inventory root directory (default: $KVCR_INVENTORY, else /var/lib/kvcr/inventory).
    #[arg(value_name = "ROOT", env = "KVCR_INVENTORY")]
    pub root: Option<PathBuf>,
    /// Deployment profile (kvcr.profile/v1) declaring what the group should be
    /// (default: $KVCR_PROFILE); import requires one (docs/format.md §8.9).
    #[arg(long, value_name = "FILE", env = "KVCR_PROFILE")]
    pub profile: Option<PathBuf>,
    /// True when `profile` came from `$KVCR_PROFILE`, not `--profile`
    /// (set by `cli::parse` from clap's value source; the report says so).
    #[arg(skip)]
    pub profile_from_env: bool,
    /// Limit the run to the group with this engine_id.
    #[arg(long, value_name = "ID", value_parser = parse_engine_id)]
    pub engine: Option<crate::format::descriptor::EngineId>,
    /// Reject current descriptors whose epoch is below N (overrides the profile).
    #[arg(long, value_name = "N", value_parser = parse_min_epoch)]
    pub min_epoch: Option<u64>,
    /// Reject descriptors sealed more than this long ago (overrides the profile):
    /// plain seconds, or a number with s, m, h or d (90s, 15m, 2h, 1d).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub max_age: Option<u64>,
    /// The ranks this node holds of a group spanning nodes, e.g. 0-7 or 0-3,8-11
    /// (overrides the profile); other ranks are expected elsewhere.
    #[arg(long, value_name = "RANKS", value_parser = parse_ranks)]
    pub local_ranks: Option<crate::format::rankset::RankSet>,
    /// Pin the current owner lifetime of the group that has this incarnation
    /// (overrides the profile's incarnation); its other incarnations are notices.
    #[arg(long, value_name = "UUID")]
    pub incarnation: Option<uuid::Uuid>,
    #[arg(long, value_name = "USER", value_parser = parse_user, help = PRODUCER_USER_HELP)]
    pub producer_user: Option<u32>,
}

/// `--producer-user` (audit, import, profile): one text for every command.
pub const PRODUCER_USER_HELP: &str = "The producer's user (a name or a uid): files and \
    directories it owns are trusted like root's and the invoking user's, for a root audit of a \
    sidecar that runs as its own user (default: $KVCR_PRODUCER_USER; docs/format.md §2.4)";

/// `--producer-user USER` to a uid (`crate::io::inventory::parse_user`).
pub fn parse_user(s: &str) -> Result<u32, String> {
    crate::io::inventory::parse_user(s)
}

#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Output format (json: exactly one document on stdout).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Colour: auto follows the terminal, NO_COLOR and TERM=dumb.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// Print nothing; the exit status still tells.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Show every check per rank, including facts not checked.
    #[arg(short, long)]
    pub verbose: bool,
}

/// The docs/format.md §3 engine_id rule: 1-128 characters of `[A-Za-z0-9._:/-]`.
pub fn parse_engine_id(s: &str) -> Result<crate::format::descriptor::EngineId, String> {
    crate::format::descriptor::EngineId::parse(s).map_err(str::to_string)
}

pub fn parse_min_epoch(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n <= I63_MAX)
        .ok_or_else(|| format!("{s:?} is not an epoch: an integer from 0 to {I63_MAX}"))
}

pub fn parse_ranks(s: &str) -> Result<crate::format::rankset::RankSet, String> {
    crate::format::rankset::RankSet::parse(s)
}
