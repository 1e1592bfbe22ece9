//! `--hold --ready-file PATH`: the file a supervisor waits for.
//!
//! The staging file is created (exclusively, next to PATH) before any GPU
//! call, so an unwritable directory is a usage error and not a failed
//! import. Once every rank is imported the content is written, synced and
//! moved to PATH in one step that never replaces an existing file
//! (renameat2 RENAME_NOREPLACE, else link + unlink): a reader sees no file or
//! the whole file, and a second hold on the same PATH fails instead of
//! overwriting the first one's. The file is removed before the group is
//! released, and on every other way out (dropping [`ReadyFile`]), but only
//! while PATH is still the file this process published, so it never claims a
//! group kvcr no longer holds and never deletes another holder's file.
//! PATH's directory is the one [`OutputFile::resolve`] checked and holds
//! open: the staging file, the rename and the removal all name it by its
//! descriptor, never by the path again.

use crate::format::descriptor::{Allocation, Handle};
use crate::import::engine::RankResult;
use crate::import::plan::document::PlanHandle;
use crate::import::plan::{Plan, PlannedRank};
use crate::io::output::OutputFile;
use rustix::fd::BorrowedFd;
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;
use uuid::Uuid;

pub use crate::format::ids::IMPORT_READY as READY_SCHEMA;

/// The content of the ready file.
#[derive(Serialize)]
struct ReadyDoc<'a> {
    schema: &'static str,
    /// The backend holding the memory: `"cuda"` (a real GPU hold) or
    /// `"sim"` (the simulated backend of tests and demos): a supervisor must
    /// be able to tell them apart.
    backend: &'static str,
    engine_id: &'a str,
    incarnation: Option<Uuid>,
    epoch: Option<u64>,
    /// The holding kvcr process: signal it to release.
    pid: u32,
    /// Its start time (field 22 of /proc/PID/stat), so a reused pid is not
    /// taken for the holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    start_ticks: Option<u64>,
    /// The socket an engine takes the `posix_fd` allocations' fds from
    /// (docs/format.md §8.6), when the group has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    hand_over: Option<String>,
    ranks: Vec<ReadyRank<'a>>,
}

#[derive(Serialize)]
struct ReadyRank<'a> {
    rank: u64,
    gpu_uuid: &'a str,
    /// kvcr's own ordinal of the GPU (in kvcr's CUDA_VISIBLE_DEVICES): an
    /// engine with other visible devices finds it by `gpu_uuid`.
    device: i32,
    allocations: usize,
    bytes: u128,
    /// Every allocation: the plan's own `id`, sizes and `handle`
    /// (docs/format.md §13.4), and where an engine obtains it now.
    items: Vec<ReadyItem<'a>>,
}

#[derive(Serialize)]
struct ReadyItem<'a> {
    id: &'a str,
    size_bytes: u64,
    offset_bytes: u64,
    handle: ReadyHandle,
    obtain: Obtain,
}

/// The plan's handle (docs/format.md §13.4), and for `posix_fd` the process
/// its `fd` is a number in: the owner's `pid` and `start_ticks`, never
/// kvcr's (the ready file's top-level `pid`).
#[derive(Serialize)]
struct ReadyHandle {
    #[serde(flatten)]
    plan: PlanHandle,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_ticks: Option<u64>,
}

/// Where an engine obtains an allocation while kvcr holds it.
#[derive(Serialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
enum Obtain {
    /// `fabric`: import `handle` (`cuMemImportFromShareableHandle`); kvcr's
    /// reference keeps the memory importable while it holds.
    Handle,
    /// `posix_fd`: message `index` of the hand-over socket carries the fd
    /// (the owner's fd may be gone); `fd` is the number of that very fd in
    /// kvcr (the ready file's `pid`), for an engine allowed to take it with
    /// `pidfd_getfd`.
    HandOver { index: usize, fd: Option<i32> },
}

/// The `posix_fd` allocations of `plan`, in the order the hand-over
/// socket sends them (rank order, then allocation order).
pub(crate) fn handed_over(plan: &Plan) -> impl Iterator<Item = (&PlannedRank, &Allocation)> {
    plan.ranks.iter().flat_map(|pr| {
        pr.allocations
            .iter()
            .filter(|a| matches!(a.handle, Handle::PosixFd(_)))
            .map(move |a| (pr, a))
    })
}

/// The message of the hand-over socket for allocation `a` of `pr`.
pub(crate) fn hand_over_message(
    pr: &PlannedRank,
    a: &Allocation,
    index: usize,
    of: usize,
) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "rank": pr.rank,
        "allocation": a.id,
        "size_bytes": a.size_bytes,
        "offset_bytes": a.offset_bytes,
        "index": index,
        "of": of,
    }))
    .unwrap_or_default()
}

pub(crate) fn ready_content(
    plan: &Plan,
    ranks: &[RankResult],
    backend: &'static str,
    hand_over: Option<&super::handover::HandOver>,
) -> Vec<u8> {
    let mut index = 0;
    let fds = hand_over.map(|h| h.fds()).unwrap_or_default();
    let mut items = |pr: &'_ PlannedRank| -> Vec<(usize, Obtain)> {
        pr.allocations
            .iter()
            .enumerate()
            .map(|(i, a)| match a.handle {
                Handle::PosixFd(_) => {
                    index += 1;
                    let fd = fds.get(index - 1).copied().flatten();
                    (
                        i,
                        Obtain::HandOver {
                            index: index - 1,
                            fd,
                        },
                    )
                }
                _ => (i, Obtain::Handle),
            })
            .collect()
    };
    let doc = ReadyDoc {
        schema: READY_SCHEMA,
        backend,
        engine_id: &plan.engine_id,
        incarnation: plan.incarnation,
        epoch: plan.epoch,
        pid: std::process::id(),
        start_ticks: crate::io::node::proc::start_ticks(std::process::id() as i32)
            .known()
            .copied()
            .flatten(),
        hand_over: hand_over.map(|h| h.path().display().to_string()),
        ranks: ranks
            .iter()
            .filter_map(|r| {
                let pr = plan.ranks.iter().find(|p| p.rank == r.rank)?;
                Some(ReadyRank {
                    rank: r.rank,
                    gpu_uuid: &r.gpu_uuid,
                    device: r.device,
                    allocations: r.allocations,
                    bytes: r.bytes,
                    items: items(pr)
                        .into_iter()
                        .map(|(i, obtain)| {
                            let a = &pr.allocations[i];
                            let posix = matches!(a.handle, Handle::PosixFd(_));
                            ReadyItem {
                                id: &a.id,
                                size_bytes: a.size_bytes,
                                offset_bytes: a.offset_bytes,
                                handle: ReadyHandle {
                                    plan: PlanHandle::of(&a.handle),
                                    pid: posix.then_some(pr.owner.pid),
                                    start_ticks: posix.then_some(pr.owner.start_ticks),
                                },
                                obtain,
                            }
                        })
                        .collect(),
                })
            })
            .collect(),
    };
    let mut v = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    v.push(b'\n');
    v
}

pub struct ReadyFile {
    /// PATH's directory, held open since it was checked, and its name.
    out: OutputFile,
    /// The staging file's name in that directory, and the file.
    staging: Option<(OsString, File)>,
    /// Identity of the file this process published at PATH (device, inode,
    /// ctime): an inode number alone can be reused by a newer file.
    published: Option<FileId>,
}

type FileId = (u64, u64, i64, i64);

// Field widths differ between architectures: the casts are not no-ops
// everywhere.
#[allow(clippy::unnecessary_cast)]
fn file_id(st: &rustix::fs::Stat) -> FileId {
    (
        st.st_dev as u64,
        st.st_ino as u64,
        st.st_ctime as i64,
        st.st_ctime_nsec as i64,
    )
}

/// Moves `from` to `to` in the directory `dir` without ever replacing an
/// existing `to`.
fn rename_noreplace(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    use rustix::fs::{renameat_with, AtFlags, RenameFlags};
    match renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        // Filesystems without RENAME_NOREPLACE: a hard link also refuses an
        // existing target.
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())?;
            Ok(rustix::fs::unlinkat(dir, from, AtFlags::empty())?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Who an existing ready file says holds the group, and whether that
/// process still runs (the file carries the holder's `pid` and, from this
/// version on, its `start_ticks`, so a reused pid is told apart).
fn holder(path: &Path) -> String {
    // Never blocks on a FIFO, never opens a device left at PATH.
    if let Ok(m) = fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return "and is not a regular file (a FIFO, a device, a symlink or a directory): \
                remove it or choose another path"
                .into();
        }
    }
    let doc: Option<serde_json::Value> = crate::io::safe_file::read_regular(path, 64 << 10)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let pid = doc
        .as_ref()
        .and_then(|d| d["pid"].as_i64())
        .and_then(|p| i32::try_from(p).ok());
    let Some(pid) = pid else {
        return "and names no holder pid: remove it after checking nothing holds the group".into();
    };
    let ticks = doc.as_ref().and_then(|d| d["start_ticks"].as_u64());
    match crate::io::node::proc::start_ticks(pid) {
        crate::io::node::Fact::Known(Some(t)) if ticks.is_none_or(|want| want == t) => {
            format!(
                "held by pid {pid}, still running: release that hold first (kill -TERM \
                {pid}), or choose another path"
            )
        }
        crate::io::node::Fact::Known(Some(_)) => format!(
            "left by pid {pid}, which is gone (its pid now belongs to another process): remove \
                the file after checking nothing holds the group"
        ),
        crate::io::node::Fact::Known(None) => format!(
            "left by pid {pid}, which is gone: remove the file after checking nothing holds the \
                group"
        ),
        crate::io::node::Fact::NotChecked(why) => format!(
            "held by pid {pid}, which may still run ({why}): check that process before removing \
                the file"
        ),
    }
}

impl ReadyFile {
    /// Prepares PATH, resolved and checked as `out`: refuses an existing
    /// PATH (another hold may own it, or a killed one left it behind) and
    /// creates the staging file beside it, in the held directory.
    pub fn prepare(out: OutputFile) -> io::Result<ReadyFile> {
        let path = out.path().to_path_buf();
        if out.lstat()?.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "ready file {} already exists, {}",
                    path.display(),
                    holder(&path)
                ),
            ));
        }
        let mut staging = OsString::from(".");
        staging.push(out.name());
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        staging.push(format!(".{}.{seq}.tmp", std::process::id()));
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::openat(
            out.dir(),
            &staging,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        Ok(ReadyFile {
            out,
            staging: Some((staging, File::from(fd))),
            published: None,
        })
    }

    pub fn path(&self) -> &Path {
        self.out.path()
    }

    /// PATH as resolved and checked: its held directory and name (the
    /// hand-over socket is bound beside it, `crate::import::run::handover`).
    pub fn output(&self) -> &OutputFile {
        &self.out
    }

    /// Writes `content` and moves the staging file to PATH; fails (and
    /// leaves PATH alone) when PATH appeared meanwhile.
    pub fn publish(&mut self, content: &[u8]) -> io::Result<()> {
        let (staging, mut file) = self
            .staging
            .take()
            .ok_or_else(|| io::Error::other("ready file already published"))?;
        let dir = self.out.dir();
        let r = file
            .write_all(content)
            .and_then(|_| file.sync_all())
            .and_then(|_| rename_noreplace(dir, &staging, self.out.name()))
            .and_then(|_| self.out.lstat())
            .and_then(|st| {
                st.map(|st| file_id(&st))
                    .ok_or_else(|| io::Error::other("gone"))
            });
        match r {
            Ok(id) => {
                self.published = Some(id);
                // Best effort: make the rename durable.
                let _ = rustix::fs::fsync(dir);
                Ok(())
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(dir, &staging, rustix::fs::AtFlags::empty());
                Err(e)
            }
        }
    }

    /// Removes PATH if it is still the file this process published (or
    /// the unused staging file).
    pub fn remove(&mut self) -> io::Result<()> {
        let dir = self.out.dir();
        if let Some((staging, _)) = self.staging.take() {
            let _ = rustix::fs::unlinkat(dir, &staging, rustix::fs::AtFlags::empty());
        }
        if let Some(id) = self.published.take() {
            match self.out.lstat()? {
                Some(st) if file_id(&st) == id => {}
                // Gone, or replaced by someone else's file: not ours to delete.
                _ => return Ok(()),
            }
            match rustix::fs::unlinkat(dir, self.out.name(), rustix::fs::AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

impl Drop for ReadyFile {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PATH resolved as the import resolves it (no inventory near).
    fn out(p: &Path) -> io::Result<OutputFile> {
        OutputFile::resolve(
            Some(Path::new("/nonexistent-inventory")),
            p,
            "--ready-file",
            false,
        )
        .map_err(|e| io::Error::other(format!("{e:?}")))
    }

    impl ReadyFile {
        fn at(p: &Path) -> io::Result<ReadyFile> {
            ReadyFile::prepare(out(p)?)
        }
    }

    #[test]
    fn staged_then_published_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ready.json");
        let mut r = ReadyFile::at(&p).unwrap();
        assert!(!p.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "staging file");
        r.publish(b"{}\n").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"{}\n");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "staging renamed"
        );
        r.remove().unwrap();
        assert!(!p.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn existing_file_or_missing_dir_is_refused_and_drop_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ready");
        fs::write(&p, "old").unwrap();
        assert_eq!(
            ReadyFile::at(&p).err().unwrap().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(ReadyFile::at(&dir.path().join("no/such/dir/ready")).is_err());
        // The message names the holder and whether it still runs.
        let msg = |content: String| {
            fs::write(&p, content).unwrap();
            ReadyFile::at(&p).err().unwrap().to_string()
        };
        let me = std::process::id();
        assert!(
            msg(format!("{{\"pid\": {me}}}")).contains(&format!("held by pid {me}, still running")),
            "live holder"
        );
        // Pid 2^22+1 is above every default pid_max: no such process.
        let m = msg("{\"pid\": 4194305}".into());
        assert!(
            m.contains(
                "left by pid 4194305, which is gone: remove the file after checking \
                nothing holds the group"
            ),
            "{m}"
        );
        let m = msg(format!("{{\"pid\": {me}, \"start_ticks\": 1}}"));
        assert!(
            m.contains(&format!("left by pid {me}, which is gone")),
            "{m}"
        );
        assert!(msg("old".into()).contains("names no holder pid"));
        fs::write(&p, "old").unwrap();
        let q = dir.path().join("ready2");
        {
            let mut r = ReadyFile::at(&q).unwrap();
            r.publish(b"x").unwrap();
            assert!(q.exists());
        }
        assert!(!q.exists(), "dropping removes the published file");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_second_holder_never_overwrites_nor_deletes_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ready");
        // Both prepared before either published (the race the check at
        // prepare time cannot see).
        let mut a = ReadyFile::at(&p).unwrap();
        let mut b = ReadyFile::at(&p).unwrap();
        a.publish(b"A").unwrap();
        let e = b.publish(b"B").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&p).unwrap(), b"A");
        drop(b);
        assert_eq!(fs::read(&p).unwrap(), b"A", "b removed nothing of a's");
        // Someone replaces the file: a's removal leaves it alone.
        fs::remove_file(&p).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&p, "C").unwrap();
        a.remove().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"C");
    }
}
