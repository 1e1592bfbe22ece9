//! The KV003 permission rule on a mode/uid pair: one rule for the
//! directories the walk lists and the descriptors the reader opens.

use crate::finding::{Code, Finding, Subject};

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
