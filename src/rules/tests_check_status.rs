//! A check's status is an enum (`CheckStatus`) that prints exactly the
//! strings the table and the JSON report always printed.

use crate::rules::CheckStatus;

#[test]
fn each_status_prints_and_serializes_its_old_string() {
    let cases = [
        (CheckStatus::Pass, "pass"),
        (CheckStatus::Fail, "fail"),
        (
            CheckStatus::NotChecked("/proc unreadable".into()),
            "not checked: /proc unreadable",
        ),
        (
            CheckStatus::Skipped("written on another node (KV110)".into()),
            "skipped: written on another node (KV110)",
        ),
    ];
    for (status, text) in cases {
        assert_eq!(status.to_string(), text);
        assert_eq!(serde_json::to_value(&status).unwrap(), text);
        assert_eq!(status.is_not_checked(), text.starts_with("not checked: "));
    }
}
