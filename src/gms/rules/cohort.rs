//! Writer-cohort directories (docs/format.md §14.3): their entries, the
//! locks and holders, and the two reads judged ([`judge_cohort`]).

use super::*;
use crate::format::finding::{Code, Finding};
use crate::gms::format::{self as format};
use std::os::unix::ffi::OsStrExt;

/// Which integration's layout a cohort directory has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `.vllm-writers`: tombstones, `.leader`, `.predecessor`, `joining-*`.
    Vllm,
    /// `.writers`: cohort files and `active` only.
    Sglang,
}

impl Flavour {
    pub fn as_str(self) -> &'static str {
        match self {
            Flavour::Vllm => "vllm",
            Flavour::Sglang => "sglang",
        }
    }
}

/// Who holds a lock, as the kernel tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The pid: from /proc/locks (the process that took the lock) or from
    /// a process whose descriptor table holds it.
    pub pid: i32,
    pub exclusive: bool,
    /// Whether the pid runs (a recorded pid may be gone: a forked child
    /// keeps the lock).
    pub running: bool,
    /// Every thread has PF_EXITING or a pending SIGKILL: it never runs user
    /// code again.
    pub exiting: bool,
}

/// A lock on one file, as far as kvcr can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Nobody holds it (the kernel lists none and a probe got it at once).
    Free,
    /// Held; `holders` may be empty when the kernel lists the lock but no
    /// running process could be named.
    Held { holders: Vec<Holder> },
    /// Could not be told (held outside this PID namespace, or no probe was
    /// possible); never read as free.
    NotChecked(String),
}

impl Lock {
    fn live_holders(&self) -> Vec<&Holder> {
        match self {
            Lock::Held { holders } => holders.iter().filter(|h| h.running && !h.exiting).collect(),
            _ => Vec::new(),
        }
    }
}

/// One entry of a cohort directory, as read once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortEntry {
    /// The name as the directory holds it: bytes, not necessarily UTF-8
    /// (docs/format.md §14.3); [`CohortEntry::shown`] for messages.
    pub name: std::ffi::OsString,
    /// A regular file (anything else is only listed).
    pub regular: bool,
    pub size: u64,
    /// mtime in nanoseconds (orders SGLang's cohort files, never written
    /// after creation).
    pub mtime_ns: i128,
    /// Markers: the first 64 bytes; cohort files: the first byte.
    pub content: Option<Vec<u8>>,
    /// Cohort files and `.leader` files only.
    pub lock: Option<Lock>,
    /// Why the file could not be opened or read (the errno, in words): its
    /// content is then unknown, never taken for empty (docs/format.md §14.3).
    pub unreadable: Option<String>,
}

impl CohortEntry {
    /// The name for messages: escaped as docs/format.md §9.6 says (a byte
    /// of an invalid sequence as `\xNN`).
    pub fn shown(&self) -> String {
        crate::format::names::display_bytes(self.name.as_bytes())
    }
}

/// One read of a cohort directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortRead {
    pub entries: Vec<CohortEntry>,
}

impl CohortRead {
    fn get(&self, name: &str) -> Option<&CohortEntry> {
        self.entries
            .iter()
            .find(|e| e.name.as_bytes() == name.as_bytes())
    }

    /// The layout, by shape: any vLLM-only name makes it vLLM.
    pub fn flavour(&self) -> Flavour {
        use format::{CohortName, Staging};
        let vllm = self.entries.iter().any(|e| {
            matches!(
                format::cohort_name_of(e.name.as_bytes()),
                CohortName::Leader(_)
                    | CohortName::Predecessor(_)
                    | CohortName::Joining(_)
                    | CohortName::Staging(Staging::Predecessor | Staging::Joining)
            ) || {
                let n = e.name.as_bytes();
                n.split(|&b| b == b'.').count() == 3 && n.ends_with(b".active")
            }
        });
        if vllm {
            Flavour::Vllm
        } else {
            Flavour::Sglang
        }
    }
}

/// The state of one cohort file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retired {
    /// Size 0: joiners are admitted.
    Open,
    /// Exactly the tombstone R at offset 0.
    Tombstone,
    /// Another first byte: joiners refuse it, the fence proof fails.
    Other(u8),
    /// The file could not be read: neither open nor retired (KV235).
    Unreadable,
}

impl Retired {
    pub fn of(e: &CohortEntry) -> Retired {
        if e.unreadable.is_some() {
            return Retired::Unreadable;
        }
        match e.content.as_deref().and_then(|c| c.first()) {
            None => Retired::Open,
            Some(&format::TOMBSTONE) => Retired::Tombstone,
            Some(&b) => Retired::Other(b),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Retired::Open => "open",
            Retired::Tombstone => "retired",
            Retired::Other(_) => "damaged",
            Retired::Unreadable => "unreadable",
        }
    }
}

/// A cohort's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Active,
    Predecessor,
    /// Created before the active cohort (SGLang), or retired (vLLM).
    Older,
    /// Open and not active: a standby, or a launch in progress.
    Other,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Active => "active",
            Role::Predecessor => "predecessor",
            Role::Older => "older",
            Role::Other => "other",
        }
    }
}

/// One cohort in the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortFacts {
    pub id: String,
    pub role: Role,
    pub state: Retired,
    pub lock: Lock,
    /// vLLM: the launcher's `.leader`: `None` absent, else its lock.
    pub leader: Option<Lock>,
}

/// The facts a cohort directory's report prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortDirFacts {
    pub flavour: Flavour,
    pub active: Option<String>,
    pub predecessor: Option<String>,
    pub cohorts: Vec<CohortFacts>,
    pub staging: Vec<String>,
    /// Joining markers: name and the cohort named.
    pub joining: Vec<(String, Option<String>)>,
}

/// Judges a cohort directory from two reads.
pub fn judge_cohort(a: &CohortRead, b: &CohortRead) -> (Vec<Finding>, CohortDirFacts) {
    let facts = cohort_facts(b);
    let marker = |r: &CohortRead, name: &str| r.get(name).map(|e| e.content.clone());
    let pred_name = |r: &CohortRead| {
        let f = cohort_facts(r);
        f.active.map(|id| format!("{id}.predecessor"))
    };
    if marker(a, "active") != marker(b, "active")
        || pred_name(a).map(|n| marker(a, &n)) != pred_name(b).map(|n| marker(b, &n))
    {
        let show = |r: &CohortRead| {
            let f = cohort_facts(r);
            format!(
                "active {}, predecessor {}",
                f.active.as_deref().unwrap_or("none"),
                f.predecessor.as_deref().unwrap_or("none")
            )
        };
        let f = Finding::reject(
            Code::KV250,
            "the active or predecessor marker changed between the two reads: a takeover ran",
        )
        .values(show(a), show(b));
        return (vec![f], facts);
    }
    let out = both_reads(cohort_reasons(a), cohort_reasons(b));
    (out, facts)
}

fn cohort_facts(r: &CohortRead) -> CohortDirFacts {
    use format::CohortName;
    let flavour = r.flavour();
    let id_of = |name: &str| {
        r.get(name)
            .and_then(|e| e.content.as_deref())
            .and_then(format::marker_id)
    };
    let active = id_of("active");
    let predecessor = match (&active, flavour) {
        (Some(a), Flavour::Vllm) => id_of(&format!("{a}.predecessor")),
        _ => None,
    };
    let active_mtime = active.as_deref().and_then(|a| r.get(a)).map(|e| e.mtime_ns);
    let mut cohorts = Vec::new();
    let mut staging = Vec::new();
    let mut joining = Vec::new();
    for e in &r.entries {
        match format::cohort_name_of(e.name.as_bytes()) {
            CohortName::Cohort(id) if e.regular => {
                let state = Retired::of(e);
                let role = if Some(&id) == active.as_ref() {
                    Role::Active
                } else if Some(&id) == predecessor.as_ref() {
                    Role::Predecessor
                } else if match flavour {
                    Flavour::Vllm => matches!(state, Retired::Tombstone | Retired::Other(_)),
                    Flavour::Sglang => active_mtime.is_some_and(|t| e.mtime_ns < t),
                } {
                    Role::Older
                } else {
                    Role::Other
                };
                let leader = r.get(&format!("{id}.leader")).map(|l| {
                    l.lock
                        .clone()
                        .unwrap_or(Lock::NotChecked("not probed".into()))
                });
                cohorts.push(CohortFacts {
                    id,
                    role,
                    state,
                    lock: e
                        .lock
                        .clone()
                        .unwrap_or(Lock::NotChecked("not probed".into())),
                    leader,
                });
            }
            CohortName::Staging(_) => staging.push(e.shown()),
            CohortName::Joining(_) => {
                joining.push((e.shown(), e.content.as_deref().and_then(format::marker_id)))
            }
            _ => {}
        }
    }
    cohorts.sort_by_key(|c| (c.role as u8, c.id.clone()));
    CohortDirFacts {
        flavour,
        active,
        predecessor,
        cohorts,
        staging,
        joining,
    }
}

fn holders_text(hs: &[&Holder]) -> String {
    hs.iter()
        .map(|h| format!("pid {}", h.pid))
        .collect::<Vec<_>>()
        .join(", ")
}

fn cohort_reasons(r: &CohortRead) -> Vec<Finding> {
    let facts = cohort_facts(r);
    let mut out = Vec::new();
    unreadable_files(r, &mut out);
    marker_reasons(r, &facts, &mut out);
    cohort_file_reasons(&facts, &mut out);
    out
}

/// A file that could not be read (KV235).
fn unreadable_files(r: &CohortRead, out: &mut Vec<Finding>) {
    // A file that could not be read is evidence of nothing: a notice naming
    // it and the errno, and no other check of it.
    for e in r.entries.iter().filter(|e| e.regular) {
        if let Some(why) = &e.unreadable {
            let what = match format::cohort_name_of(e.name.as_bytes()) {
                format::CohortName::Cohort(_) => {
                    "whether the cohort is retired and whether a writer of it runs are"
                }
                format::CohortName::Leader(_) => "whether its launcher holds it is",
                _ => "what the marker names is",
            };
            out.push(
                Finding::notice(
                    Code::KV235,
                    format!(
                        "{} could not be read ({why}): {what} not checked",
                        e.shown()
                    ),
                )
                .at(e.shown())
                .values("a readable file", why.clone()),
            );
        }
    }
}

/// The markers: `active`, the joining markers and staging files.
fn marker_reasons(r: &CohortRead, facts: &CohortDirFacts, out: &mut Vec<Finding>) {
    let unreadable = |name: &str| r.get(name).is_some_and(|e| e.unreadable.is_some());
    // Markers.
    if let Some(e) = r.get("active").filter(|_| !unreadable("active")) {
        match &facts.active {
            None => out.push(
                Finding::reject(Code::KV234, "active is not one 32-hex cohort identity")
                    .at("active")
                    .values("32 lower-case hex digits", shown(e.content.as_deref())),
            ),
            Some(id) if r.get(id).is_none_or(|c| !c.regular) => out.push(
                Finding::reject(
                    Code::KV234,
                    format!("active names cohort {id}, which is absent"),
                )
                .at("active")
                .values("a cohort file", "none"),
            ),
            _ => {}
        }
    }
    if let (Flavour::Vllm, Some(a)) = (facts.flavour, &facts.active) {
        let name = format!("{a}.predecessor");
        if let Some(e) = r.get(&name).filter(|_| !unreadable(&name)) {
            match &facts.predecessor {
                None => out.push(
                    Finding::reject(
                        Code::KV234,
                        "the predecessor marker is not one cohort identity",
                    )
                    .at(name.clone())
                    .values("32 lower-case hex digits", shown(e.content.as_deref())),
                ),
                Some(p) if r.get(p).is_none_or(|c| !c.regular) => out.push(
                    Finding::reject(
                        Code::KV234,
                        format!("the predecessor marker names cohort {p}, which is absent"),
                    )
                    .at(name.clone())
                    .values("a cohort file", "none"),
                ),
                _ => {}
            }
        }
    }
    for (name, id) in &facts.joining {
        if unreadable(name) {
            continue;
        }
        match id {
            None => out.push(
                Finding::reject(Code::KV234, "the joining marker is not one cohort identity")
                    .at(name.clone())
                    .values(
                        "32 lower-case hex digits",
                        shown(r.get(name).and_then(|e| e.content.as_deref())),
                    ),
            ),
            Some(id) => {
                let state = r.get(id).filter(|e| e.regular).map(Retired::of);
                if state.is_none_or(|s| s != Retired::Open) {
                    let what = if state.is_none() { "absent" } else { "retired" };
                    out.push(
                        Finding::notice(
                            Code::KV236,
                            format!("the joining marker names cohort {id}, which is {what}"),
                        )
                        .at(name.clone())
                        .values("an open cohort", what),
                    );
                }
            }
        }
    }
    for s in &facts.staging {
        let marker = match format::cohort_name(s) {
            format::CohortName::Staging(k) => k.marker(),
            _ => "a marker",
        };
        out.push(
            Finding::reject(
                Code::KV233,
                format!(
                    "a staging file of {marker}: a writer died between writing it and renaming \
                     it into place"
                ),
            )
            .at(s.clone())
            .values("no staging file", s.clone()),
        );
    }
}

/// Each cohort file: a predecessor not retired, and who holds its lock.
fn cohort_file_reasons(facts: &CohortDirFacts, out: &mut Vec<Finding>) {
    for c in &facts.cohorts {
        if c.state == Retired::Unreadable {
            continue;
        }
        if c.role == Role::Predecessor && c.state != Retired::Tombstone {
            let found = match c.state {
                Retired::Open => "size 0 (open: joiners admitted)".to_string(),
                Retired::Other(b) => format!("byte {b:#04x}"),
                Retired::Tombstone | Retired::Unreadable => unreachable!("filtered"),
            };
            out.push(
                Finding::reject(Code::KV231, "the predecessor cohort is not retired")
                    .at(c.id.clone())
                    .values("the tombstone R", found),
            );
        }
        if !matches!(c.role, Role::Predecessor | Role::Older) {
            continue;
        }
        let live = c.lock.live_holders();
        let whose = match c.role {
            Role::Predecessor => "the predecessor cohort",
            _ => "an older cohort",
        };
        match &c.lock {
            Lock::Held { holders } if !live.is_empty() => out.push(
                Finding::reject(
                    Code::KV232,
                    format!(
                        "{whose} still has a running writer ({}): not fenced",
                        holders_text(&live)
                    ),
                )
                .at(c.id.clone())
                .values("no lock holder", format!("{} holder(s)", holders.len())),
            ),
            Lock::Held { holders } if holders.is_empty() => out.push(
                Finding::reject(
                    Code::KV232,
                    format!(
                        "{whose} is locked, and no running process could be named as its holder \
                         (another user's process, or a descriptor passed on)"
                    ),
                )
                .at(c.id.clone())
                .values("no lock holder", "a lock"),
            ),
            Lock::Held { holders } => {
                let exiting: Vec<&Holder> = holders.iter().filter(|h| h.running).collect();
                let text = if exiting.is_empty() {
                    format!(
                        "{whose} is locked by a process that has gone (recorded pid {}): its \
                         lock is released as it finishes exiting",
                        holders[0].pid
                    )
                } else {
                    format!(
                        "{whose}'s last writers are exiting ({}): the end of a fence",
                        holders_text(&exiting)
                    )
                };
                out.push(
                    Finding::notice(Code::KV232, text)
                        .at(c.id.clone())
                        .values("no lock holder", "exiting holders"),
                );
            }
            Lock::NotChecked(why) => out.push(
                Finding::notice(
                    Code::KV235,
                    format!("whether a writer of {whose} still runs is not checked: {why}"),
                )
                .at(c.id.clone())
                .values("a lock the kernel lists, or none", "not checked"),
            ),
            Lock::Free => {}
        }
    }
}

fn shown(content: Option<&[u8]>) -> String {
    match content {
        None => "unreadable".to_string(),
        Some(c) => format!("{:?}", String::from_utf8_lossy(c).trim()),
    }
}
