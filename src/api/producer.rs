//! The producer's side through the library: examine, seal and digest a
//! descriptor given as text, and write it as `rank-<R>.json`
//! (docs/format.md §3.5). [`writer`](super::writer) is the same writer for a
//! `serde_json::Value`.

use super::inventory::NODE_FACTS_NAMED;
use super::{Document, Error};
use crate::format::descriptor::parse_descriptor;
use crate::format::finding::Code;
use crate::format::json;
use std::path::{Path, PathBuf};

/// Decodes and checks one descriptor file on its own: the `kvcr.examine/v1`
/// document `kvcr examine FILE --format json` prints.
pub fn examine(path: &Path) -> Result<Document, Error> {
    let e = crate::service::examine::examine(path, crate::io::node::now_unix_ms())?;
    let status = e.exit_status;
    Document::of(&e, status)
}

/// The first problem of a descriptor the writer refused, as a typed error.
fn descriptor_error(text: &[u8], fallback: String) -> Error {
    // Parsed again, from the caller's own text (integers as written), only
    // to name the problem: the rule is the parser's.
    let out = parse_descriptor(text);
    let field = out
        .schema_errors
        .iter()
        .find(|e| e.field != "digest")
        .cloned();
    if let Some(e) = field {
        return Error::Descriptor {
            code: Code::KV007,
            message: e.message(),
            field: Some(e.field),
        };
    }
    let finding = out
        .findings
        .iter()
        .find(|f| f.code != Code::KV008 && !f.message.starts_with("digest"))
        .cloned()
        // A rule one descriptor breaks on its own (KV101, KV104, KV108...),
        // judged on the sealed bytes, as the writer judged them.
        .or_else(|| {
            let sealed = crate::api::writer::sealed_text_unchecked(text).ok()?;
            crate::api::writer::own_rejects(&sealed).into_iter().next()
        });
    match finding {
        Some(f) => Error::Descriptor {
            code: f.code,
            field: None,
            message: crate::format::message::render(&f.message),
        },
        None if fallback.contains("1 MiB") => Error::Descriptor {
            code: Code::KV004,
            field: None,
            message: fallback,
        },
        None => Error::Descriptor {
            code: Code::KV007,
            field: None,
            message: fallback,
        },
    }
}

/// Seals a descriptor given as JSON text, as `kvcr seal --reseal-edited`
/// seals a file (docs/format.md §3.2, §3.5, §6.1): strict JSON (KV006), then
/// every check the audit makes apart from the digest (KV007...), then the
/// digest set (kept in place when present, else appended). A `digest` the
/// text already carries is replaced whatever it is: the caller built this
/// value (the command, which seals files someone else may have edited,
/// refuses a mismatch unless told). Returns the sealed bytes: two-space
/// indented JSON with a trailing newline, byte for byte what `kvcr seal`
/// writes for the same content and member order.
pub fn seal_json(text: &[u8]) -> Result<Vec<u8>, Error> {
    if text.len() as u64 > crate::format::descriptor::MAX_FILE_BYTES {
        return Err(Error::Descriptor {
            code: Code::KV004,
            field: None,
            message: format!("{} bytes, over the 1 MiB limit", text.len()),
        });
    }
    // Strict first, as `kvcr seal`: serde_json would take the last of two equal keys.
    json::parse(text).map_err(|e| Error::Descriptor {
        code: Code::KV006,
        field: None,
        message: format!("malformed: {e}"),
    })?;
    crate::api::writer::seal_text(text).map_err(|e| match e {
        crate::api::writer::Error::Refused(m) => descriptor_error(text, m),
        io => Error::usage(io.to_string()),
    })
}

/// The canonical digest (`sha256:…`, docs/format.md §3.2) of a JSON object
/// given as text, without its `digest` member: `kvcr digest`.
pub fn digest_json(text: &[u8]) -> Result<String, Error> {
    crate::api::writer::digest_of_bytes(text).map_err(|e| Error::Descriptor {
        code: Code::KV006,
        field: None,
        message: e.to_string(),
    })
}

/// Validates, seals and writes a descriptor given as JSON text as
/// `root/[subdir/]rank-<R>.json`: [`write_rank_json_with`] against this
/// machine.
pub fn write_rank_json(root: &Path, text: &[u8], subdir: Option<&Path>) -> Result<PathBuf, Error> {
    let o = WriteOptions {
        subdir: subdir.map(Path::to_path_buf),
        node_facts: None,
    };
    write_rank_json_with(root, text, &o)
}

/// The names of a `subdir`: a relative path of plain names, read from its
/// bytes as given (`Path::components` would drop a `.` in the middle,
/// `a/./b`, or at the end, `a/.`, without a word); empty names (`a//b`,
/// `a/`) name nothing.
fn subdir_names(sub: &Path) -> Result<Vec<std::ffi::OsString>, Error> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = sub.as_os_str().as_bytes();
    let names: Vec<&[u8]> = bytes.split(|&b| b == b'/').collect();
    let plain = !bytes.starts_with(b"/")
        && names.iter().any(|n| !n.is_empty())
        && names.iter().all(|n| *n != b"." && *n != b"..");
    if !plain {
        return Err(Error::usage(format!(
            "subdir {}: a relative path of plain names below the root (no leading /, no . or \
             .. component)",
            crate::format::names::display_path(sub)
        )));
    }
    Ok(names
        .into_iter()
        .filter(|n| !n.is_empty())
        .map(|n| std::ffi::OsStr::from_bytes(n).to_os_string())
        .collect())
}

/// The options of [`write_rank_json_with`].
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// A relative path of plain names below the root, created (mode 0700,
    /// whatever the umask) where missing; no component of it may be a
    /// symlink, `.` or `..`.
    pub subdir: Option<PathBuf>,
    /// The node the descriptor is checked against: `None` reads this
    /// machine; a facts file (docs/live.md) describes another (tests), as
    /// [`AuditOptions::node_facts`](super::AuditOptions::node_facts).
    pub node_facts: Option<PathBuf>,
}

/// Validates, seals and writes a descriptor given as JSON text as
/// `root/[subdir/]rank-<R>.json`, exactly as docs/format.md §3.5 says: every
/// check `kvcr examine` makes ([`seal_json`]); then the node facts that
/// must already hold when it is written: this node's hostname (KV110) and
/// boot id (KV108), the owner process alive with its start ticks (KV108),
/// each refused as [`Error::Descriptor`] with the audit's code and the
/// member (`node.hostname`, `node.boot_id`, `owner`) — not the writer's
/// quiescence, not the GPUs; then an exclusive staging file (mode 0600),
/// fsync, rename over the old file, directory fsync. Returns the path
/// written.
pub fn write_rank_json_with(root: &Path, text: &[u8], o: &WriteOptions) -> Result<PathBuf, Error> {
    // The subdir's names first: a bad argument is answered before the
    // descriptor is judged.
    let names = match o.subdir.as_deref() {
        Some(sub) => subdir_names(sub)?,
        None => Vec::new(),
    };
    let sealed = seal_json(text)?;
    let mismatches =
        crate::api::writer::node_mismatches(&sealed, o.node_facts.as_deref(), NODE_FACTS_NAMED)
            .map_err(Error::usage)?;
    if let Some((member, f)) = mismatches.into_iter().next() {
        return Err(Error::Descriptor {
            code: f.code,
            field: Some(member.to_string()),
            message: format!(
                "{member}: {}; a descriptor must describe this node and a running owner \
                 when it is written",
                crate::format::message::render(&f.message)
            ),
        });
    }
    // seal_json checked the schema: rank is an integer below 4096.
    let rank = crate::format::descriptor::parse_descriptor(&sealed)
        .descriptor
        .map(|d| d.rank)
        .ok_or_else(|| Error::Other {
            message: "internal error: the sealed descriptor does not parse".to_string(),
            status: crate::format::exit::INTERNAL,
        })?;
    let meta = std::fs::metadata(root)
        .map_err(|e| Error::usage(format!("inventory root {}: {e}", root.display())))?;
    if !meta.is_dir() {
        return Err(Error::usage(format!(
            "inventory root {} is not a directory",
            root.display()
        )));
    }
    // Held open from the root down, each component opened with O_NOFOLLOW
    // below the one before: a directory swapped for a symlink at any moment
    // is refused, never followed (the checks and the write name one inode).
    use rustix::fs::{Mode, OFlags};
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut fd = rustix::fs::open(root, dir_flags, Mode::empty())
        .map_err(|e| Error::usage(format!("inventory root {}: {e}", root.display())))?;
    let mut dir = root.to_path_buf();
    for name in &names {
        let name = name.as_os_str();
        dir.push(name);
        let open = |fd: &rustix::fd::OwnedFd| {
            rustix::fs::openat(fd, name, dir_flags | OFlags::NOFOLLOW, Mode::empty())
        };
        let next = match open(&fd) {
            Err(rustix::io::Errno::NOENT) => {
                match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o700)) {
                    // Created here: 0700 whatever the umask took away
                    // (§2.4). Through an O_PATH fd of the very
                    // directory (a umask of 0777 leaves nothing this
                    // user may open it with), then opened through it.
                    // The trusted /proc does both (`crate::io::procfs`).
                    Ok(()) => match rustix::fs::openat(
                        &fd,
                        name,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(std::io::Error::from)
                    .and_then(|p| {
                        let proc = crate::io::procfs::ProcFs::system();
                        proc.chmod(std::os::fd::AsFd::as_fd(&p), 0o700)?;
                        proc.reopen(std::os::fd::AsFd::as_fd(&p), dir_flags)
                    }) {
                        Ok(n) => Ok(n),
                        Err(e) => match e.raw_os_error() {
                            Some(n) => Err(rustix::io::Errno::from_raw_os_error(n)),
                            // A /proc that is not trusted: its words.
                            None => {
                                return Err(Error::usage(format!(
                                    "cannot open or create {}: {e}",
                                    dir.display()
                                )))
                            }
                        },
                    },
                    Err(rustix::io::Errno::EXIST) => open(&fd),
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        // O_NOFOLLOW | O_DIRECTORY on a symlink is ELOOP or ENOTDIR.
        let is_link = || {
            rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink())
        };
        fd = match next {
            Ok(n) => n,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) if is_link() => {
                return Err(Error::Other {
                    message: format!(
                        "{} is a symlink; descriptors are never written through one",
                        dir.display()
                    ),
                    status: crate::format::exit::REJECTED,
                })
            }
            Err(rustix::io::Errno::NOTDIR) => {
                return Err(Error::usage(format!(
                    "{} exists and is not a directory",
                    dir.display()
                )))
            }
            Err(e) => {
                return Err(Error::usage(format!(
                    "cannot open or create {}: {e}",
                    dir.display()
                )))
            }
        };
    }
    let name = format!("rank-{rank}.json");
    // Into the held directory, by its descriptor: nothing is resolved by
    // name again.
    crate::io::output::write_atomic_at(
        std::os::fd::AsFd::as_fd(&fd),
        &dir,
        std::ffi::OsStr::new(&name),
        &sealed,
        0o600,
        None,
    )
    .map_err(|e| {
        Error::usage(
            crate::api::writer::Error::Io {
                what: e.what,
                source: e.source,
            }
            .to_string(),
        )
    })?;
    drop(fd);
    Ok(dir.join(name))
}
