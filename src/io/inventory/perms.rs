//! The KV003 permission rule on a mode/uid pair: one rule for the
//! directories the walk lists and the descriptors the reader opens.

// Calls the C library, the kernel or the CUDA driver through raw pointers:
// one of the files allowed unsafe code (Cargo.toml [lints]); every block
// says why it is sound.
#![allow(unsafe_code)]

use crate::format::finding::{Code, Finding, Subject};

/// Whose files an inventory may hold (docs/format.md §2.4): root, the
/// invoking user (this process's effective uid) and, when the operator
/// declares it, the producer's user (`--producer-user`,
/// `$KVCR_PRODUCER_USER`): the packaged timer audits as root while the
/// sidecar that writes the inventory runs as its own user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owners {
    /// The effective uid of this process.
    pub euid: u32,
    /// The declared producer's uid, if any.
    pub producer: Option<u32>,
}

impl Owners {
    /// This process's effective uid, and `producer` when declared.
    pub fn of_this_process(producer: Option<u32>) -> Owners {
        Owners {
            euid: rustix::process::geteuid().as_raw(),
            producer,
        }
    }

    /// Whether a file owned by `uid` is trusted: compared as numbers, the
    /// kernel's identity of a user.
    fn trusts(&self, uid: u32) -> bool {
        uid == 0 || uid == self.euid || self.producer == Some(uid)
    }

    /// The trusted uids, for a finding's `expected` (`uid 0`, `uid 0 or
    /// 1000`, `uid 0, 1000 or 1001`).
    fn expected(&self) -> String {
        let mut uids = vec![0, self.euid];
        uids.extend(self.producer);
        uids.sort_unstable();
        uids.dedup();
        let mut s = String::from("uid ");
        for (i, u) in uids.iter().enumerate() {
            if i > 0 {
                s.push_str(if i + 1 == uids.len() { " or " } else { ", " });
            }
            s.push_str(&u.to_string());
        }
        s
    }
}

/// `--producer-user USER`: a uid (decimal), or a user name looked up in this
/// node's user database (getpwnam_r), resolved once, before any file is
/// judged; findings compare uids only.
pub fn parse_user(s: &str) -> Result<u32, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<u32>() {
            // (uid_t)-1 means "no change" to chown and is nobody's uid.
            Ok(u) if u != u32::MAX => Ok(u),
            _ => Err(format!("uid {s} is out of range (0 to {})", u32::MAX - 1)),
        };
    }
    match uid_of_name(s)? {
        Some(uid) => Ok(uid),
        None => Err(format!(
            "no user named {s:?} in this node's user database; give the producer's user name or \
             its uid"
        )),
    }
}

/// The uid of user `name`, `None` when there is no such user.
fn uid_of_name(name: &str) -> Result<Option<u32>, String> {
    let c = std::ffi::CString::new(name).map_err(|_| "a user name has no NUL byte".to_string())?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: getpwnam_r writes only into `pwd` and `buf` (its length
        // passed with it) and sets `result` to null or to `&pwd`; `c` is a
        // NUL-terminated string that outlives the call.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: as above: every pointer is to a live local of the right
        // type, and `buf.len()` is the length of `buf`.
        let rc = unsafe {
            libc::getpwnam_r(
                c.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut result,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(format!(
                "cannot look up user {name:?}: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        return Ok((!result.is_null()).then_some(pwd.pw_uid));
    }
}

/// One KV003 reason: the finding and the words a descriptor below inherits.
#[derive(Clone)]
pub(super) struct PermIssue {
    pub(super) why: String,
    pub(super) finding: Finding,
}

/// KV003 checks on a mode/uid pair: writable by group/others, or owned by a
/// uid that `owners` does not trust.
pub(super) fn permission_issues(
    mode: u32,
    uid: u32,
    owners: Owners,
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
    if !owners.trusts(uid) {
        let why = match owners.producer {
            Some(p) => format!(
                "is owned by uid {uid}, neither root, the invoking user nor the declared \
                 producer user (uid {p})"
            ),
            None => format!(
                "is owned by uid {uid}, neither root, the invoking user nor a declared producer \
                 user"
            ),
        };
        out.push(PermIssue {
            finding: Finding::reject(Code::KV003, format!("{what} {why}"))
                .at(at)
                .values(owners.expected(), format!("uid {uid}"))
                .about(Subject::UndeclaredOwner(uid)),
            why,
        });
    }
    out
}

pub(super) fn findings_of(issues: &[PermIssue]) -> impl Iterator<Item = Finding> + '_ {
    issues.iter().map(|i| i.finding.clone())
}

/// What to do when this user may not read the inventory at `root`: run as
/// root or as the user that owns it (the root directory's owner, by uid).
pub fn access_hint(root: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(root)
        .map(|m| format!("uid {}, the owner of {}", m.uid(), root.display()))
        .unwrap_or_else(|_| "the owner of the inventory".to_string());
    format!(
        "run kvcr as root or as the inventory owner's user ({owner}); this user is uid {}",
        rustix::process::geteuid().as_raw()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(euid: u32, producer: Option<u32>) -> Owners {
        Owners { euid, producer }
    }

    #[test]
    fn root_the_invoking_user_and_the_declared_producer_are_trusted() {
        for (o, uid) in [
            (owners(0, None), 0),
            (owners(1000, None), 0),
            (owners(1000, None), 1000),
            (owners(0, Some(4242)), 4242),
            (owners(1000, Some(4242)), 1000),
        ] {
            assert!(
                permission_issues(0o700, uid, o, "directory", "g").is_empty(),
                "{o:?} {uid}"
            );
        }
    }

    #[test]
    fn any_other_owner_is_kv003_naming_what_is_trusted() {
        let i = permission_issues(
            0o600,
            4243,
            owners(0, Some(4242)),
            "descriptor",
            "a/rank-0.json",
        );
        assert_eq!(i.len(), 1);
        let f = &i[0].finding;
        assert_eq!(f.code, Code::KV003);
        assert_eq!(
            f.message.as_text(),
            Some(
                "descriptor is owned by uid 4243, neither root, the invoking user nor the \
                 declared producer user (uid 4242)"
            )
        );
        assert_eq!(f.expected.as_deref(), Some("uid 0 or 4242"));
        assert_eq!(f.found.as_deref(), Some("uid 4243"));
        assert_eq!(f.subject, Subject::UndeclaredOwner(4243));
        let i = permission_issues(0o600, 4243, owners(1000, Some(4242)), "descriptor", "x");
        assert_eq!(
            i[0].finding.expected.as_deref(),
            Some("uid 0, 1000 or 4242")
        );
        let i = permission_issues(0o600, 4243, owners(1000, None), "descriptor", "x");
        assert_eq!(i[0].finding.expected.as_deref(), Some("uid 0 or 1000"));
        assert!(
            i[0].why.ends_with("nor a declared producer user"),
            "{}",
            i[0].why
        );
    }

    #[test]
    fn a_declared_producer_does_not_excuse_a_group_writable_file() {
        let i = permission_issues(0o620, 4242, owners(0, Some(4242)), "descriptor", "x");
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].why, "is writable by group/others");
        assert_eq!(i[0].finding.subject, Subject::Files);
    }

    #[test]
    fn parse_user_takes_a_uid_or_a_name_of_this_node() {
        assert_eq!(parse_user("4242"), Ok(4242));
        assert_eq!(parse_user("0"), Ok(0));
        // Every node has root, by name.
        assert_eq!(parse_user("root"), Ok(0));
        for bad in ["4294967295", "99999999999", "no-such-user-kvcr", "a\0b", ""] {
            let e = parse_user(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad:?}");
        }
        assert!(parse_user("no-such-user-kvcr")
            .unwrap_err()
            .contains("no user named"));
        assert!(parse_user("4294967295")
            .unwrap_err()
            .contains("out of range"));
    }
}
