//! "A flag beats the profile" is worked out once (`Expectations`' option
//! methods): the verdict, the staleness checks and the report's options
//! record all ask it.

use crate::format::profile::Profile;
use crate::format::rankset::RankSet;
use crate::rules::Expectations;
use uuid::Uuid;

fn profile() -> Profile {
    Profile {
        engine_id: "e".parse().unwrap(),
        world_size: None,
        tp: None,
        pp: None,
        model: None,
        geometry: None,
        gpus: None,
        incarnation: Some(Uuid::from_bytes([1; 16])),
        min_epoch: Some(3),
        max_age_s: Some(60),
        local_ranks: Some(RankSet::parse("0-1").unwrap()),
        derived: None,
        require_content: false,
    }
}

#[test]
fn each_option_falls_back_to_the_profile() {
    let p = profile();
    let e = Expectations::default();
    assert_eq!(e.min_epoch(Some(&p)), Some(3));
    assert_eq!(e.max_age_s(Some(&p)), Some(60));
    assert_eq!(e.local_ranks(Some(&p)).unwrap().to_string(), "0-1");
    assert_eq!(e.incarnation(Some(&p)), Some(Uuid::from_bytes([1; 16])));
    assert_eq!(e.min_epoch(None), None);
    assert_eq!(e.max_age_s(None), None);
    assert!(e.local_ranks(None).is_none());
    assert_eq!(e.incarnation(None), None);
}

#[test]
fn each_flag_beats_the_profile() {
    let p = profile();
    let e = Expectations {
        min_epoch: Some(0),
        max_age_s: Some(0),
        local_ranks: Some(RankSet::parse("2").unwrap()),
        incarnation: Some(Uuid::from_bytes([2; 16])),
        ..Expectations::default()
    };
    // Zero is a value given, not "unset": it still wins.
    assert_eq!(e.min_epoch(Some(&p)), Some(0));
    assert_eq!(e.max_age_s(Some(&p)), Some(0));
    assert_eq!(e.local_ranks(Some(&p)).unwrap().to_string(), "2");
    assert_eq!(e.incarnation(Some(&p)), Some(Uuid::from_bytes([2; 16])));
    assert_eq!(e.min_epoch(None), Some(0));
}
