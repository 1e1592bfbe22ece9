//! Where GMS puts its artifacts (its variables and defaults).

use super::*;

/// A place discovery looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A directory of lease rings (`gms-kv-lease-*.shm`).
    LeaseDir(PathBuf),
    /// One lease ring (`GMS_<ENGINE>_KV_LEASE_SHM_PATH`).
    LeaseFile(PathBuf),
    /// A writer-cohort directory.
    CohortDir(PathBuf),
    /// Recovery metadata.
    Recovery(PathBuf),
    /// A superseded block index (`GMS_KV_INDEX_PATH`) and its `.gen`.
    Index(PathBuf),
}

impl Place {
    pub fn path(&self) -> &Path {
        match self {
            Place::LeaseDir(p)
            | Place::LeaseFile(p)
            | Place::CohortDir(p)
            | Place::Recovery(p)
            | Place::Index(p) => p,
        }
    }

    /// What is looked for there, for "where kvcr looked".
    pub fn what(&self) -> &'static str {
        match self {
            Place::LeaseDir(_) => "lease rings (gms-kv-lease-*.shm)",
            Place::LeaseFile(_) => "a lease ring",
            Place::CohortDir(_) => "a writer-cohort directory",
            Place::Recovery(_) => "recovery metadata",
            Place::Index(_) => "a superseded block index",
        }
    }
}

/// Where GMS would put its artifacts, from the environment as GMS reads it
/// (docs/format.md §14.1). `dev_shm_is_dir` and `tmp` stand for the
/// checks GMS makes itself (`/dev/shm` exists, else the temp directory).
pub fn places(env: &dyn Fn(&str) -> Option<OsString>, dev_shm_is_dir: bool) -> Vec<Place> {
    let mut out: Vec<Place> = Vec::new();
    let mut push = |p: Place| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    for engine in format::ENGINES {
        let e = format::engine_env(engine);
        // GMS falls back from the per-engine variable to the generic one
        // only when the first is unset (`is None`); an empty value means
        // "none": no explicit path, the default directory.
        let explicit = match env(&format!("GMS_{e}_KV_LEASE_SHM_PATH")) {
            Some(v) => Some(v),
            None => env("GMS_KV_LEASE_SHM_PATH"),
        }
        .filter(|v| !v.is_empty());
        if let Some(p) = explicit {
            push(Place::LeaseFile(PathBuf::from(p)));
            continue;
        }
        let dir = env(&format!("GMS_{e}_KV_LEASE_SHM_DIR"))
            .or_else(|| env("GMS_KV_LEASE_SHM_DIR"))
            .filter(|v| !v.is_empty());
        let dir = dir.map(PathBuf::from).unwrap_or_else(|| {
            if dev_shm_is_dir {
                PathBuf::from("/dev/shm")
            } else {
                set("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
            }
        });
        push(Place::LeaseDir(dir));
    }
    let lock = env("FAILOVER_LOCK_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format::FAILOVER_LOCK_DEFAULT));
    for suffix in [format::VLLM_WRITERS, format::SGLANG_WRITERS] {
        let mut name = lock
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        name.push(suffix);
        push(Place::CohortDir(lock.with_file_name(name)));
    }
    let recovery = match env("DYN_KV_RECOVERY_PATH") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| !p.as_os_str().is_empty()),
        None => Some(
            env("GMS_SOCKET_DIR")
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
                .join("kv-recovery.mmap"),
        ),
    };
    if let Some(p) = recovery {
        push(Place::Recovery(p));
    }
    if let Some(p) = set("GMS_KV_INDEX_PATH") {
        push(Place::Index(PathBuf::from(p)));
    }
    out
}

/// What a directory of lease rings holds: its `gms-kv-lease-*.shm`
/// regular files, by name (bytes, as GMS's glob matches them).
pub fn lease_files(entries: &[Entry]) -> impl Iterator<Item = &Entry> {
    entries
        .iter()
        .filter(|e| e.ty == FileType::RegularFile && format::is_lease_file_name(e.name.as_bytes()))
}

/// What kind of entry a path is, without following a symlink.
pub fn lstat_kind(path: &Path) -> Result<Option<FileType>, ReadError> {
    match rustix::io::retry_on_intr(|| rustix::fs::lstat(path)) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
        Err(e) => Err(ReadError::new(path, "cannot stat", e)),
    }
}

/// Recognises an open file by its first bytes.
pub fn recognise(o: &Opened) -> Result<Option<Magic>, Errno> {
    Ok(format::recognise(&head(o)?))
}
