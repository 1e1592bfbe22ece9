//! The writer side (docs/format.md §3.5): sealing descriptors and writing
//! them the way kvcr reads them.
//!
//! A sidecar (the owner) builds a descriptor as a [`serde_json::Value`] and
//! calls [`write_rank`]: the digest of docs/format.md §3.2 is computed with
//! the very code the audit checks it with, the result is checked against
//! the whole descriptor schema (so a sidecar bug is an error here, not a
//! KV007 at the next audit), staged as `.rank-<R>.json.<random>.tmp` in the
//! destination directory, synced, renamed to `rank-<R>.json`, and the
//! directory is synced.
//!
//! ```no_run
//! # fn descriptor() -> serde_json::Value { serde_json::json!({}) }
//! let value = descriptor(); // every member of docs/format.md §3; `digest` may be absent
//! let path = kvcr_audit::writer::write_rank(std::path::Path::new("/run/kv/inventory"), &value)?;
//! println!("wrote {}", path.display());
//! # Ok::<(), kvcr_audit::writer::Error>(())
//! ```
//!
//! [`content_member`] computes an allocation's optional `content` member
//! (docs/format.md §3.6) from a read callback over the owner's memory, once
//! the writer is quiesced.
//!
//! [`seal_value`] returns the sealed bytes without writing them;
//! [`write_atomic`] is the staging/rename step on its own. `kvcr seal` and
//! `kvcr digest` are built on [`check_file_with`] and [`digest_file`]: a
//! file whose digest is not its content's is refused there (KV008) unless
//! the operator says it means to reseal it, while [`seal_value`] and
//! [`write_rank`] seal whatever value the caller built (docs/format.md
//! §6.1, §13.1).

use crate::format::descriptor::canon::{digest_without, format_digest};
use crate::format::descriptor::{parse_descriptor, MAX_FILE_BYTES};
use crate::format::json;
use serde_json::Value;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a descriptor or file could not be sealed or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input itself is wrong (not a valid descriptor apart from its
    /// digest, a symlink, too large...): nothing was written. Exit 1.
    #[error("{0}")]
    Refused(String),
    /// Reading or writing failed (a missing file, a read-only directory, a
    /// full disk): nothing was written, or the staging file was removed.
    /// Exit 2.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
    /// The exit status this error maps to (docs/format.md §6.1).
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::Refused(_) => crate::format::exit::REJECTED,
            Error::Io { .. } => crate::format::exit::USAGE,
        }
    }
}

/// An allocation's `content` member (docs/format.md §3.6), computed with
/// the very code import verifies it with: `read(offset, length)` returns
/// the owner's bytes at `offset` from the start of the exported allocation
/// (`offset_bytes` included). `page_bytes` 4096 and `pages` 16 suit most
/// caches (`pages` must be 1 when `size_bytes ≤ page_bytes`). Refused when
/// the sampling breaks the rule or a read fails or comes back short.
pub fn content_member(
    size_bytes: u64,
    offset_bytes: u64,
    page_bytes: u64,
    pages: u64,
    read: &mut dyn FnMut(u64, u64) -> Result<Vec<u8>, String>,
) -> Result<Value, Error> {
    let c =
        crate::format::content::digest_content(size_bytes, offset_bytes, page_bytes, pages, read)
            .map_err(|e| Error::Refused(e.to_string()))?;
    Ok(serde_json::json!({
        "page_bytes": c.page_bytes,
        "pages": c.pages,
        "sha256": crate::format::hex::encode(&c.sha256),
    }))
}

/// The canonical digest (`sha256:…`) of a JSON object without its top-level
/// `digest` member, from the object's JSON text (strict: duplicate keys,
/// trailing data and the like are refused).
pub fn digest_of_bytes(bytes: &[u8]) -> Result<String, Error> {
    let v = json::parse(bytes).map_err(|e| Error::Refused(format!("not strict JSON: {e}")))?;
    if v.root().as_object().is_none() {
        return Err(Error::Refused("not a JSON object".into()));
    }
    Ok(format_digest(&digest_without(&v, "digest")))
}

/// The sealed bytes of a descriptor: `value` with its `digest` member set
/// (kept in place when present, else appended), as two-space indented JSON
/// with a trailing newline. Refused unless the result is a descriptor that
/// passes every check of docs/format.md §3.
pub fn seal_value(value: &Value) -> Result<Vec<u8>, Error> {
    let bytes = sealed_bytes(value)?;
    check_descriptor(&bytes)?;
    Ok(bytes)
}

/// [`seal_value`]'s bytes before its checks.
fn sealed_bytes(value: &Value) -> Result<Vec<u8>, Error> {
    let Value::Object(members) = value else {
        return Err(Error::Refused("a descriptor is a JSON object".into()));
    };
    let mut members = members.clone();
    let body = serde_json::to_vec(&Value::Object(members.clone()))
        .map_err(|e| Error::Refused(format!("cannot serialise: {e}")))?;
    let digest = digest_of_bytes(&body)?;
    members.insert("digest".into(), Value::String(digest));
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(members))
        .map_err(|e| Error::Refused(format!("cannot serialise: {e}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// [`seal_text`]'s bytes before its checks: what the library judges again
/// to name the code of a refusal.
pub(crate) fn sealed_text_unchecked(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    let doc = json::parse(bytes).map_err(|e| Error::Refused(format!("not strict JSON: {e}")))?;
    let value: Value = json::to_serde(doc.root()).map_err(|e| Error::Refused(e.to_string()))?;
    sealed_bytes(&value)
}

/// The sealed bytes of a descriptor given as JSON text: what `kvcr seal`
/// writes for a file with these bytes, and what the library's seal returns
/// (`crate::api::seal_json`).
pub fn seal_text(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    // Strict first: serde_json would silently take the last of two equal keys.
    // One number reader for seal and the audit (§3.2): `-0` is 0, 2^64 is
    // out of range (serde_json alone would make floats of both).
    let doc =
        json::parse(bytes).map_err(|e| Error::Refused(format!("KV006 not strict JSON: {e}")))?;
    // An integer out of range is the schema's (KV007), as in the audit.
    let value: Value =
        json::to_serde(doc.root()).map_err(|e| Error::Refused(format!("KV007 {e}")))?;
    seal_value(&value)
}

/// Refuses bytes that are not a descriptor passing every check one
/// descriptor can be given on its own: those of `kvcr examine`, by the same
/// function (`crate::rules::own::findings`): the schema and digest, KV101
/// (rank below world_size, world_size = tp × pp), KV104 (allocations the
/// geometry needs), KV111 (a handle repeated within it), KV108 (a
/// `created_unix_ms` in seconds).
fn check_descriptor(bytes: &[u8]) -> Result<(), Error> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::Refused(format!(
            "the sealed descriptor would be {} bytes, over the 1 MiB limit",
            bytes.len()
        )));
    }
    let rejects = own_rejects(bytes);
    if rejects.is_empty() {
        return Ok(());
    }
    let why: Vec<String> = rejects
        .iter()
        .map(|f| format!("{} {}", f.code, crate::format::message::render(&f.message)))
        .collect();
    Err(Error::Refused(format!(
        "not a valid descriptor apart from its digest: {}",
        why.join("; ")
    )))
}

/// The rejecting findings a descriptor earns by itself (what
/// [`check_descriptor`] refuses), judged now.
pub(crate) fn own_rejects(bytes: &[u8]) -> Vec<crate::format::finding::Finding> {
    let out = parse_descriptor(bytes);
    let cand = crate::rules::own::unwritten(out.descriptor, out.ident, out.findings);
    let mut all = crate::rules::own::findings(cand, crate::io::node::now_unix_ms());
    all.retain(crate::format::finding::Finding::is_reject);
    all
}

/// What a descriptor written now contradicts about this node (or the node
/// `facts` describes, named in messages as `named` and the path): each
/// mismatch with its member (`node.hostname`, `node.boot_id`, `owner`) and
/// the audit's finding (KV110, KV108), by `crate::rules::own::write_time`.
/// Only the facts that must hold while the owner writes: not the writer's
/// quiescence, not the GPUs (docs/format.md §3.5). A fact that cannot be
/// read is no mismatch.
pub(crate) fn node_mismatches(
    sealed: &[u8],
    facts: Option<&Path>,
    named: &str,
) -> Result<Vec<(&'static str, crate::format::finding::Finding)>, String> {
    let Some(d) = parse_descriptor(sealed).descriptor else {
        return Ok(Vec::new()); // refused by its own checks already
    };
    let (probe, _notes) = crate::io::node::probe(facts, named)?;
    let node = crate::rules::facts::NodeFacts {
        boot_id: probe.boot_id(),
        hostname: probe.hostname(),
        processes: [(d.owner.pid, probe.start_ticks(d.owner.pid))].into(),
        gpus: crate::rules::facts::Fact::NotChecked("not checked when writing".into()),
    };
    Ok(crate::rules::own::write_time(&d, &node))
}

/// Seals `value` and writes it as `dir/rank-<R>.json` (R from its `rank`),
/// mode 0600, atomically (docs/format.md §3.5), after every check one
/// descriptor can be given ([`seal_value`]) and the node facts that must
/// hold when it is written, read from this machine: its hostname and boot
/// id, the owner process alive with its start ticks. Returns the path
/// written.
pub fn write_rank(dir: &Path, value: &Value) -> Result<PathBuf, Error> {
    write_rank_with(dir, value, None)
}

/// [`write_rank`] against the node a facts file describes (docs/live.md)
/// instead of this machine: the test and demo hook the library takes as
/// its `node_facts` option.
pub fn write_rank_with(
    dir: &Path,
    value: &Value,
    node_facts: Option<&Path>,
) -> Result<PathBuf, Error> {
    let bytes = seal_value(value)?;
    let mismatches = node_mismatches(&bytes, node_facts, "node_facts=").map_err(|m| Error::Io {
        what: "cannot read the node facts".into(),
        source: io::Error::other(m),
    })?;
    if let Some((_, f)) = mismatches.first() {
        return Err(Error::Refused(format!(
            "{} {}",
            f.code,
            crate::format::message::render(&f.message)
        )));
    }
    // seal_value checked the schema, so rank is an integer here; were it
    // not, the file is refused, never named rank-0.json.
    let rank = value
        .get("rank")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::Refused("rank: not an unsigned integer".into()))?;
    let name = format!("rank-{rank}.json");
    write_atomic(dir, OsStr::new(&name), &bytes, 0o600, None)?;
    Ok(dir.join(name))
}

/// Writes `bytes` to `dir/name` atomically: a staging file created
/// exclusively beside it, given `mode` (and `owner` uid/gid when set),
/// synced, renamed over `dir/name`, then the directory synced. A reader sees
/// the old file or the whole new one; on failure the staging file is
/// removed and `dir/name` is untouched. `dir` is opened once and every step
/// names that directory (`crate::io::output::write_atomic_at`).
pub fn write_atomic(
    dir: &Path,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), Error> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        Error::io(format!(
            "cannot create {}",
            dir.join(crate::io::output::staging_name(name)).display()
        ))(e.into())
    })?;
    crate::io::output::write_atomic_at(std::os::fd::AsFd::as_fd(&fd), dir, name, bytes, mode, owner)
        .map_err(|e| Error::Io {
            what: e.what,
            source: e.source,
        })
}

/// A file as kvcr found it before sealing or hashing.
struct Read1 {
    bytes: Vec<u8>,
    /// The inode that was read.
    meta: rustix::fs::Stat,
}

/// Reads a regular file that is not a symlink, at most 1 MiB, without ever
/// opening anything else (lstat first, then `O_NOFOLLOW | O_NONBLOCK`, and
/// the opened file must be the one that was classified).
fn read_regular(path: &Path) -> Result<Read1, Error> {
    let shown = path.display().to_string();
    let lmeta = fs::symlink_metadata(path).map_err(Error::io(format!("cannot read {shown}")))?;
    let ft = lmeta.file_type();
    if ft.is_symlink() {
        return Err(Error::Refused(format!(
            "KV001 {shown} is a symlink; seal and digest never follow links"
        )));
    }
    if !ft.is_file() {
        return Err(Error::Refused(format!(
            "KV002 {shown} is not a regular file"
        )));
    }
    if lmeta.len() > MAX_FILE_BYTES {
        return Err(Error::Refused(format!(
            "KV004 {shown} is {} bytes, over the 1 MiB limit",
            lmeta.len()
        )));
    }
    // The one safe reader: classified through O_PATH|O_NOFOLLOW and
    // reopened as that inode, so a FIFO, device or symlink swapped in since
    // the lstat is never opened.
    use crate::io::safe_file::{read, Links, NotRead};
    let (bytes, st) = read(path, Links::Refuse, MAX_FILE_BYTES).map_err(|e| match e {
        NotRead::NotRegular(what) => {
            Error::Refused(format!("KV002 {shown} is {what}, not a regular file"))
        }
        NotRead::TooLarge { .. } => {
            Error::Refused(format!("KV004 {shown} is over the 1 MiB limit"))
        }
        NotRead::Io(e) => Error::io(format!("cannot read {shown}"))(e),
    })?;
    if st.st_dev != lmeta.dev() || st.st_ino != lmeta.ino() {
        return Err(Error::Refused(format!(
            "{shown} changed while being opened"
        )));
    }
    let meta = st;
    Ok(Read1 { bytes, meta })
}

/// `kvcr digest FILE`: the canonical digest of a file.
pub fn digest_file(path: &Path) -> Result<String, Error> {
    let r = read_regular(path)?;
    digest_of_bytes(&r.bytes).map_err(|e| Error::Refused(format!("{}: {e}", path.display())))
}

/// How [`check_file_with`] treats a file whose `digest` is not its
/// content's (docs/format.md §6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SealOptions {
    /// Seal it anyway (`kvcr seal --reseal-edited`): the operator checked
    /// the edit and means the file as it is now. The plan says what was
    /// overridden ([`SealPlan::overridden`]).
    pub reseal_edited: bool,
}

/// What sealing one file would do, decided before anything is written.
pub struct SealPlan {
    /// The file to seal.
    pub path: PathBuf,
    /// `None` when the file already carries its digest, byte for byte.
    bytes: Option<Vec<u8>>,
    /// With [`SealOptions::reseal_edited`]: the KV008 this seal overrides.
    overridden: Option<String>,
    mode: u32,
    owner: (u32, u32),
    /// Device, inode, size and mtime when checked: [`apply`] refuses a file
    /// that changed since, rather than replace someone else's newer write.
    seen: (u64, u64, u64, i64, i64),
}

fn identity(m: &fs::Metadata) -> (u64, u64, u64, i64, i64) {
    (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())
}

/// [`identity`] of the inode that was read.
// Field widths differ between architectures: the casts are not no-ops
// everywhere.
#[allow(clippy::unnecessary_cast)]
fn stat_identity(s: &rustix::fs::Stat) -> (u64, u64, u64, i64, i64) {
    (
        s.st_dev as u64,
        s.st_ino as u64,
        s.st_size as u64,
        s.st_mtime as i64,
        s.st_mtime_nsec as i64,
    )
}

impl SealPlan {
    /// True when the file would not change.
    pub fn already_sealed(&self) -> bool {
        self.bytes.is_none()
    }

    /// The mismatch this seal overrides (with
    /// [`SealOptions::reseal_edited`], a file whose digest was not its
    /// content's), in words: what it carried and what its content digests
    /// to.
    pub fn overridden(&self) -> Option<&str> {
        self.overridden.as_deref()
    }
}

/// [`check_file_with`] with the default options: a file whose `digest` is
/// not its content's is refused (KV008), never resealed.
pub fn check_file(path: &Path) -> Result<SealPlan, Error> {
    check_file_with(path, SealOptions::default())
}

/// Checks that `path` can be sealed and computes its new bytes; writes
/// nothing. A file without a `digest` member is sealed; one whose `digest`
/// is its content's is already sealed; one whose `digest` is anything
/// else was edited or damaged after sealing, and is refused (KV008, naming
/// both digests) unless `o.reseal_edited` (docs/format.md §6.1): sealing it
/// would make the audit accept what nobody sealed.
pub fn check_file_with(path: &Path, o: SealOptions) -> Result<SealPlan, Error> {
    let shown = path.display().to_string();
    let r = read_regular(path)?;
    if r.meta.st_nlink > 1 {
        return Err(Error::Refused(format!(
            "KV002 {shown} has {} hard links; replacing it would leave the others unsealed",
            r.meta.st_nlink
        )));
    }
    let bytes = seal_text(&r.bytes).map_err(|e| match e {
        Error::Refused(m) => Error::Refused(format!("{shown}: {m}")),
        other => other,
    })?;
    // seal_text read it strictly: it parses.
    let claim = json::parse(&r.bytes)
        .map(|doc| crate::format::descriptor::parse::digest_claim(&doc))
        .map_err(|e| Error::Refused(format!("{shown}: KV006 not strict JSON: {e}")))?;
    let mut overridden = None;
    if let crate::format::descriptor::parse::DigestClaim::Differs { claimed, actual } = claim {
        let what = format!(
            "KV008 {}: it carries {claimed}, its content digests to {actual}",
            crate::format::descriptor::parse::DIGEST_MISMATCH
        );
        if !o.reseal_edited {
            return Err(Error::Refused(format!(
                "{shown}: {what}; kvcr seal never reseals an edited or damaged descriptor \
                 (check what changed, then `kvcr seal --reseal-edited` seals it as it is now)"
            )));
        }
        overridden = Some(what);
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    rustix::fs::access(parent, rustix::fs::Access::WRITE_OK)
        .map_err(|e| Error::io(format!("cannot write in {}", parent.display()))(e.into()))?;
    Ok(SealPlan {
        path: path.to_path_buf(),
        bytes: (bytes != r.bytes).then_some(bytes),
        overridden,
        mode: r.meta.st_mode,
        owner: (r.meta.st_uid, r.meta.st_gid),
        seen: stat_identity(&r.meta),
    })
}

/// Carries out a plan from [`check_file`]: an atomic rewrite keeping the
/// file's mode and owner. Returns false when there was nothing to write.
pub fn apply(plan: &SealPlan) -> Result<bool, Error> {
    let Some(bytes) = &plan.bytes else {
        return Ok(false);
    };
    let name = plan
        .path
        .file_name()
        .ok_or_else(|| Error::Refused(format!("{} names no file", plan.path.display())))?;
    let dir = match plan.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // Only change the owner when it differs: a non-root user cannot chown.
    let now = fs::symlink_metadata(&plan.path)
        .map_err(Error::io(format!("cannot read {}", plan.path.display())))?;
    if !now.file_type().is_file() || identity(&now) != plan.seen {
        return Err(Error::Refused(format!(
            "{} changed since it was checked; not replaced",
            plan.path.display()
        )));
    }
    let me = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let owner = (plan.owner != me).then_some(plan.owner);
    write_atomic(dir, name, bytes, plan.mode, owner)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{to_bytes, Desc};

    #[test]
    fn seal_value_matches_the_audit_and_refuses_invalid() {
        let v = Desc::new("e", 1, 2, 1).value();
        assert!(v.get("digest").is_none());
        let bytes = seal_value(&v).unwrap();
        let out = parse_descriptor(&bytes);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        assert_eq!(out.descriptor.unwrap().rank, 1);
        // The digest is the last member, appended.
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            back.as_object().unwrap().keys().next_back().unwrap(),
            "digest"
        );
        // A schema error is refused, not sealed.
        let mut bad = v.clone();
        bad["epoch"] = Value::from(0);
        assert!(matches!(seal_value(&bad), Err(Error::Refused(m)) if m.contains("KV")));
        let mut float = v;
        float["epoch"] = Value::from(1.5);
        assert!(matches!(seal_value(&float), Err(Error::Refused(_))));
    }

    /// The node the test kit's descriptors describe (docs/live.md).
    fn node_match() -> &'static Path {
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/live/node-match.json"
        ))
    }

    #[test]
    fn write_rank_checks_the_node_facts_that_hold_while_writing() {
        let dir = tempfile::tempdir().unwrap();
        let v = Desc::new("e", 0, 1, 1).value();
        // On this machine the test kit's boot id, hostname and owner are not
        // this node's: refused, nothing written.
        assert!(
            matches!(write_rank(dir.path(), &v), Err(Error::Refused(m)) if m.starts_with("KV"))
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // Each fact that must hold when writing, with the audit's code.
        type Case = (&'static str, fn(&mut Value), &'static str);
        let cases: [Case; 4] = [
            (
                "KV108",
                |v| v["node"]["boot_id"] = "00000000-0000-4000-8000-000000000001".into(),
                "rebooted",
            ),
            (
                "KV110",
                |v| v["node"]["hostname"] = "other-node".into(),
                "other-node",
            ),
            (
                "KV108",
                |v| v["owner"]["start_ticks"] = 7.into(),
                "another process",
            ),
            ("KV108", |v| v["owner"]["pid"] = 4243.into(), "is gone"),
        ];
        for (code, edit, says) in cases {
            let mut bad = v.clone();
            edit(&mut bad);
            match write_rank_with(dir.path(), &bad, Some(node_match())) {
                Err(Error::Refused(m)) => {
                    assert!(m.starts_with(code) && m.contains(says), "{code}: {m}")
                }
                other => panic!("{code}: {other:?}"),
            }
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // Not the writer's quiescence (false while writing), nor its process.
        let mut writing = v.clone();
        writing["writer"]["quiesced"] = false.into();
        writing["writer"]["pid"] = 4242.into();
        writing["writer"]["start_ticks"] = 123456.into();
        write_rank_with(dir.path(), &writing, Some(node_match())).unwrap();
    }

    #[test]
    fn write_rank_is_atomic_and_leaves_no_staging_file() {
        let dir = tempfile::tempdir().unwrap();
        let v = Desc::new("e", 0, 1, 1).value();
        let p = write_rank_with(dir.path(), &v, Some(node_match())).unwrap();
        assert_eq!(p, dir.path().join("rank-0.json"));
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["rank-0.json"]);
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert!(parse_descriptor(&fs::read(&p).unwrap()).findings.is_empty());
        // Writing into a missing directory is an I/O error, exit 2.
        let e = write_rank_with(&dir.path().join("nope"), &v, Some(node_match())).unwrap_err();
        assert_eq!(e.exit_status(), 2);
    }

    #[test]
    fn check_file_keeps_mode_and_detects_already_sealed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rank-0.json");
        let v = Desc::new("e", 0, 1, 1).value();
        fs::write(&p, to_bytes(&v)).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        let plan = check_file(&p).unwrap();
        assert!(!plan.already_sealed());
        assert!(apply(&plan).unwrap());
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        let sealed = fs::read(&p).unwrap();
        assert!(parse_descriptor(&sealed).findings.is_empty());
        let again = check_file(&p).unwrap();
        assert!(again.already_sealed());
        // A file changed between check and apply is not replaced.
        let mut v2 = v.clone();
        v2["epoch"] = Value::from(7);
        fs::write(&p, to_bytes(&v2)).unwrap();
        let plan = check_file(&p).unwrap();
        fs::write(&p, [to_bytes(&v2).as_slice(), b" "].concat()).unwrap();
        assert!(matches!(apply(&plan), Err(Error::Refused(m)) if m.contains("changed")));
        fs::write(&p, &sealed).unwrap();
        let again = check_file(&p).unwrap();
        assert!(!apply(&again).unwrap());
        assert_eq!(fs::read(&p).unwrap(), sealed);
        // Edited after sealing: refused (KV008) by default; with
        // reseal_edited the plan says what it overrides, and writes what
        // seal_text writes.
        let edited = String::from_utf8(sealed.clone()).unwrap().replacen(
            "\"epoch\": 1,",
            "\"epoch\": 9,",
            1,
        );
        fs::write(&p, &edited).unwrap();
        let e = check_file(&p).err().unwrap();
        assert!(
            matches!(&e, Error::Refused(m) if m.contains("KV008") && m.contains("--reseal-edited")),
            "{e}"
        );
        assert_eq!(e.exit_status(), 1);
        let plan = check_file_with(
            &p,
            SealOptions {
                reseal_edited: true,
            },
        )
        .unwrap();
        assert!(plan
            .overridden()
            .unwrap()
            .starts_with("KV008 digest does not match"));
        assert!(apply(&plan).unwrap());
        assert_eq!(fs::read(&p).unwrap(), seal_text(edited.as_bytes()).unwrap());
        assert!(check_file(&p).unwrap().already_sealed());
        assert!(check_file(&p).unwrap().overridden().is_none());
    }

    #[test]
    fn digest_of_bytes_ignores_layout_and_the_digest_member() {
        let a = digest_of_bytes(br#"{"b":1,"a":"x","digest":"sha256:00"}"#).unwrap();
        let b = digest_of_bytes(b"{ \"a\" : \"x\",\n \"b\" : 1 }").unwrap();
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 71);
        assert!(matches!(
            digest_of_bytes(br#"{"a":1,"a":2}"#),
            Err(Error::Refused(_))
        ));
        assert!(matches!(digest_of_bytes(b"[1]"), Err(Error::Refused(_))));
    }
}
