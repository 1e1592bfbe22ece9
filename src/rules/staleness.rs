//! KV108 (stale) for current descriptors: a `created_unix_ms` plausibly in
//! seconds, below `min_epoch`, older than `max_age_s`, and in live mode a
//! rebooted node or a gone/reused owner. (Superseded descriptors are
//! notices, decided in `incarnation.rs`.)

use super::live::{foreign, rebooted, skipped, FOREIGN, REBOOTED};
use super::{Context, Row};
use crate::format::descriptor::Descriptor;
use crate::format::finding::{Code, Finding, Message};
use crate::format::profile::Profile;
use crate::rules::facts::{Fact, NodeFacts};

/// How far in the future a descriptor may be dated (clock skew between the
/// owner and this run) before, with a maximum age, it is KV108.
pub const FUTURE_SLACK_MS: u64 = 300_000;

/// 10^12 ms, 2001-09-09 01:46:40 UTC: a `created_unix_ms` below it cannot
/// be when a descriptor was written (docs/format.md §3), and is most
/// likely seconds since the epoch written where milliseconds belong
/// (seconds stay below 10^12 until the year 33658).
pub const MIN_CREATED_UNIX_MS: u64 = 1_000_000_000_000;

/// KV108 for a `created_unix_ms` below [`MIN_CREATED_UNIX_MS`], whatever
/// the options: its age cannot be proven, so no age rule can judge it.
fn in_seconds(created_unix_ms: u64) -> Option<Finding> {
    if created_unix_ms >= MIN_CREATED_UNIX_MS {
        return None;
    }
    let message = Message::new()
        .text(format!("created_unix_ms {created_unix_ms} is before "))
        .unix_ms(MIN_CREATED_UNIX_MS)
        .text(
            ", plausibly seconds since the epoch written where milliseconds belong (as seconds \
             it would be ",
        )
        .unix_ms(created_unix_ms.saturating_mul(1000))
        .text("): its age cannot be proven; the owner must write milliseconds");
    Some(Finding::reject(Code::KV108, message).values(
        format!("created_unix_ms ≥ {MIN_CREATED_UNIX_MS} (milliseconds since the epoch)"),
        format!("created_unix_ms {created_unix_ms}"),
    ))
}

pub(crate) fn check(rows: &mut [Row], profile: Option<&Profile>, ctx: &Context) {
    let min_epoch = ctx.expect.min_epoch(profile);
    let max_age_s = ctx.expect.max_age_s(profile);
    for row in rows.iter_mut() {
        row.with_desc(|row, d| {
            let mut ok = true;
            let seconds = in_seconds(d.created_unix_ms);
            if let Some(f) = seconds.clone() {
                ok = false;
                row.reject(f);
            }
            if let Some(min) = min_epoch {
                if d.epoch < min {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV108,
                            format!("epoch {} is below the minimum epoch {min}", d.epoch),
                        )
                        .values(format!("epoch ≥ {min}"), d.epoch),
                    );
                }
            }
            // A time in seconds has no age to compare: its own finding says so.
            if let Some(max) = max_age_s.filter(|_| seconds.is_none()) {
                let age_ms = ctx.now_unix_ms.saturating_sub(d.created_unix_ms);
                let ahead_ms = d.created_unix_ms.saturating_sub(ctx.now_unix_ms);
                let max_ms = max.saturating_mul(1000);
                if ahead_ms > FUTURE_SLACK_MS {
                    // A clock far ahead (or a forged timestamp) must not make a
                    // descriptor look fresh: its age cannot be proven.
                    ok = false;
                    let said = format!(
                        "dated in the future (created_unix_ms {}), beyond the {} s clock slack: \
                         its age cannot be proven against the maximum age of ",
                        d.created_unix_ms,
                        FUTURE_SLACK_MS / 1000
                    );
                    row.reject(
                        Finding::reject(Code::KV108, Message::new().text(said).duration_ms(max_ms))
                            .values(
                                format!(
                                    "created at most {} s in the future",
                                    FUTURE_SLACK_MS / 1000
                                ),
                                format!("created_unix_ms {}", d.created_unix_ms),
                            ),
                    );
                } else if age_ms > max_ms {
                    ok = false;
                    row.reject(
                        Finding::reject(
                            Code::KV108,
                            Message::new()
                                .text("sealed ")
                                .duration_ms(age_ms)
                                .text(" ago, older than the maximum age of ")
                                .duration_ms(max_ms),
                        )
                        .values(format!("age ≤ {max} s"), format!("age {} s", age_ms / 1000)),
                    );
                }
            }
            row.check("staleness", ok);
            if let Some(node) = ctx.node {
                live(row, d, node);
            }
        });
    }
}

/// The live parts of KV108: the node rebooted since the descriptor was
/// written (boot_id differs), or the owner is gone or its pid now belongs to
/// another process (start_ticks differs). On another node (KV110) neither
/// means anything; after a reboot the owner is certainly gone, and its pid
/// and start time may repeat in a new process, so it is not looked up.
/// Also what the writer checks before it writes (`super::own`).
pub(super) fn live(row: &mut Row, d: &Descriptor, node: &NodeFacts) {
    if foreign(node, d) {
        skipped(row, "boot_id", FOREIGN);
        skipped(row, "owner", FOREIGN);
        return;
    }
    match &node.boot_id {
        Fact::Known(boot) if *boot != d.node.boot_id => {
            row.check("boot_id", false);
            row.reject(
                Finding::reject(
                    Code::KV108,
                    "node rebooted since this descriptor was written; \
                     GPU memory does not survive a reboot",
                )
                .values(
                    format!("boot_id {}", d.node.boot_id),
                    format!("boot_id {boot}"),
                ),
            );
        }
        Fact::Known(_) => row.check("boot_id", true),
        Fact::NotChecked(why) => row.not_checked("boot_id", why),
    }
    if rebooted(node, d) {
        skipped(row, "owner", REBOOTED);
        return;
    }
    let owner = d.owner;
    // Written only for a finding: the owner that still runs (every rank of
    // an accepted group) costs no text.
    let expected = || {
        format!(
            "pid {} running with start_ticks {}",
            owner.pid, owner.start_ticks
        )
    };
    match node.process(owner.pid) {
        Fact::Known(Some(t)) if t == owner.start_ticks => row.check("owner", true),
        Fact::Known(Some(t)) => {
            row.check("owner", false);
            row.reject(
                Finding::reject(
                    Code::KV108,
                    format!(
                        "owner pid {} now belongs to another process (PID reused); \
                         the owner is gone and its memory went with it",
                        owner.pid
                    ),
                )
                .values(
                    expected(),
                    format!("pid {} running with start_ticks {t}", owner.pid),
                ),
            );
        }
        Fact::Known(None) => {
            row.check("owner", false);
            row.reject(
                Finding::reject(
                    Code::KV108,
                    format!("owner pid {} is gone; its memory went with it", owner.pid),
                )
                .values(expected(), "no such process"),
            );
        }
        Fact::NotChecked(why) => row.not_checked("owner", &why),
    }
}
