//! The KV003 permission rule on a mode/uid pair: one rule for the
//! directories the walk lists and the descriptors the reader opens.

use crate::format::finding::{Code, Finding};

/// One KV003 reason: the finding and the words a descriptor below inherits.
#[derive(Clone)]
pub(super) struct PermIssue {
    pub(super) why: String,
    pub(super) finding: Finding,
}

/// KV003 checks on a mode/uid pair: writable by group/others, or owned by a
/// uid that is neither root nor the effective uid of this process.
pub(super) fn permission_issues(
    mode: u32,
    uid: u32,
    euid: u32,
    what: &str,
    at: &str,
) -> Vec<PermIssue> {
    let mut out = Vec::new();
    if mode & 0o022 != 0 {
        let why = "is writable by group/others".to_string();
        out.push(PermIssue {
            finding: Finding::reject(Code::KV003, format!("{what} {why}"))
                .at(at)
                .values("not group/other-writable", format!("{:04o}", mode & 0o7777)),
            why,
        });
    }
    if uid != 0 && uid != euid {
        let expected = if euid == 0 {
            "uid 0".to_string()
        } else {
            format!("uid 0 or {euid}")
        };
        let why = format!("is owned by uid {uid}, neither root nor the invoking user");
        out.push(PermIssue {
            finding: Finding::reject(Code::KV003, format!("{what} {why}"))
                .at(at)
                .values(expected, format!("uid {uid}")),
            why,
        });
    }
    out
}

pub(super) fn findings_of(issues: &[PermIssue]) -> impl Iterator<Item = Finding> + '_ {
    issues.iter().map(|i| i.finding.clone())
}
