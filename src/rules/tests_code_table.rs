//! The finding-code table (src/format/finding.rs `TABLE`) is the one source of every
//! code's id, name, severity and root-cause rank.

use crate::format::finding::{Code, Family, Severity, TABLE};
use crate::rules::cause::ROOT_ORDER;
use crate::rules::explain::explain;
use std::collections::BTreeSet;

#[test]
fn root_cause_order_is_a_permutation_of_all_codes() {
    let order: BTreeSet<Code> = ROOT_ORDER.iter().copied().collect();
    let all: BTreeSet<Code> = Code::ALL.iter().copied().collect();
    assert_eq!(ROOT_ORDER.len(), Code::ALL.len());
    assert_eq!(order, all, "a code is missing from the root-cause order");
    let mut ranks: Vec<u8> = TABLE.iter().map(|s| s.root_rank).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..TABLE.len() as u8).collect::<Vec<_>>());
    for (i, c) in ROOT_ORDER.iter().enumerate() {
        assert_eq!(c.spec().root_rank as usize, i, "{c}");
    }
}

#[test]
fn root_cause_order_is_unchanged() {
    use Code::*;
    assert_eq!(
        ROOT_ORDER,
        [
            KV008, KV107, KV001, KV002, KV004, KV005, KV006, KV007, KV009, KV110, KV108, KV003,
            KV101, KV102, KV109, KV104, KV105, KV111, KV106, KV103,
            KV010, // the GMS reader's:
            KV201, KV202, KV203, KV204, KV210, KV209, KV205, KV206, KV208, KV211, KV212, KV213,
            KV207, KV221, KV222, KV223, KV224, KV225, KV226, KV227, KV228, KV229, KV234, KV231,
            KV232, KV233, KV235, KV236, KV241, KV242, KV250, // the offload reader's:
            KV301, KV302, KV303, KV304, KV305, KV306, KV307, KV308, KV309, KV310, KV311, KV312,
            KV313, KV314, KV315, KV316, KV317, KV318, KV319, KV320, KV321, KV322, KV323, KV350,
            KV351, KV352, KV353, KV354,
        ]
    );
}

#[test]
fn every_row_describes_its_own_code() {
    let mut ids = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, spec) in TABLE.iter().enumerate() {
        assert_eq!(spec.code as usize, i);
        assert_eq!(Code::ALL[i], spec.code);
        assert_eq!(spec.id, format!("{:?}", spec.code));
        assert_eq!(spec.code.as_str(), spec.id);
        assert_eq!(spec.code.name(), spec.name);
        assert_eq!(Code::parse(spec.id), Some(spec.code));
        assert_eq!(Code::parse(spec.name), Some(spec.code));
        assert!(ids.insert(spec.id), "duplicate id {}", spec.id);
        assert!(names.insert(spec.name), "duplicate name {}", spec.name);
        // `kvcr explain` takes the severity from the table, never its own.
        assert_eq!(explain(spec.code).severity, spec.severity);
    }
}

#[test]
fn only_stray_is_a_notice_code() {
    let notices: Vec<Code> = Code::ALL
        .into_iter()
        .filter(|c| c.severity() == Severity::Notice && c.family() == Family::Inventory)
        .collect();
    assert_eq!(notices, [Code::KV010]);
}

/// The GMS reader's codes (docs/format.md §14.6) are KV2xx, after every
/// inventory code in the table and in the root-cause order, and its notice
/// codes are the four conditions that never reject.
#[test]
fn the_gms_codes_follow_the_inventory_codes() {
    let split = Code::ALL
        .iter()
        .position(|c| c.family() == Family::Gms)
        .unwrap();
    assert_eq!(split, 21);
    let end = Code::ALL
        .iter()
        .position(|c| c.family() == Family::Offload)
        .unwrap();
    for (i, c) in Code::ALL.iter().enumerate().take(end) {
        let gms = i >= split;
        assert_eq!(c.family() == Family::Gms, gms, "{c}");
        assert_eq!(c.as_str().starts_with("KV2"), gms, "{c}");
        assert_eq!((c.spec().root_rank as usize) >= split, gms, "{c}");
    }
    let notices: Vec<Code> = Code::ALL
        .into_iter()
        .filter(|c| c.severity() == Severity::Notice && c.family() == Family::Gms)
        .collect();
    assert_eq!(
        notices,
        [Code::KV207, Code::KV229, Code::KV235, Code::KV236]
    );
}

/// The offload reader's codes (docs/format.md §15.4) are KV3xx, after the
/// GMS reader's, and its notices are KV311 to KV323 and KV350; KV351-KV354 reject.
#[test]
fn the_offload_codes_follow_the_gms_codes() {
    let split = Code::ALL
        .iter()
        .position(|c| c.family() == Family::Offload)
        .unwrap();
    assert_eq!(split, 52);
    for (i, c) in Code::ALL.iter().enumerate() {
        let off = i >= split;
        assert_eq!(c.family() == Family::Offload, off, "{c}");
        assert_eq!(c.as_str().starts_with("KV3"), off, "{c}");
        assert_eq!((c.spec().root_rank as usize) >= split, off, "{c}");
        if off {
            let n: u16 = c.as_str()[2..].parse().unwrap();
            let notice = (311..=323).contains(&n) || n == 350;
            assert_eq!(c.severity() == Severity::Notice, notice, "{c}");
        }
    }
}
