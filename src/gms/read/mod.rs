//! Everything the GMS reader does to the system (docs/format.md §14.7):
//! where GMS puts its artifacts, read-only opens, the two reads, the
//! kernel's lock table, the cohort probe and the processes `--live` asks
//! about, one file per concern ([`open`], [`artifacts`], [`dirs`],
//! [`locks`], [`processes`], [`places`](mod@places)). Nothing here judges (that is
//! `crate::gms::rules`).
//!
//! Every file is opened `O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
//! O_NOCTTY`, with `O_NOATIME` where the kernel allows it (the file's
//! owner, or CAP_FOWNER), and read with `pread`: nothing is ever created,
//! written, truncated, renamed or unlinked. No lock is ever taken on a
//! lease ring or on recovery metadata. On a cohort file whose lock the
//! kernel's table does not list, one non-blocking probe (exclusive on a
//! cohort file, shared on a `.leader`, as GMS's own liveness probe) is
//! taken and released at once.

use crate::gms::format::{self as format, Magic, Superseded};
use crate::gms::rules::{
    CohortEntry, CohortRead, Holder, LeaseLive, LeaseRead, LeaseScan, Lock, OwnerId, RecoveryRead,
    RecoveryScan, SupersededRead,
};
use crate::io::locks::{parse_locks, KernelLock, LOCKS_BYTES};
use crate::io::procfs::ProcFs;
use crate::io::read_only::open_ro;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod artifacts;
mod dirs;
mod locks;
mod open;
mod places;
mod processes;

pub use artifacts::*;
pub use dirs::*;
pub use locks::*;
pub use open::*;
pub use places::*;
pub use processes::*;

/// Bytes read per `pread` while streaming records.
const CHUNK: usize = 1 << 16;
/// The most entries of one directory kvcr reads.
pub const ENTRY_CAP: usize = 65_536;
/// The most bytes of a marker kvcr reads.
const MARKER_BYTES: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// The format GMS's own fence parses (`_lock_owner_pids` in
    /// `process_lifecycle.py`): granted locks, waiters (`->`) skipped,
    /// MAJ:MIN in hex, the inode in decimal.
    #[test]
    fn proc_locks_parse_as_the_kernel_writes_them() {
        let text = "1: FLOCK  ADVISORY  READ 25774 fe:00:10010796 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 25816 fe:00:10010796 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 23177 08:01:5521527 0 EOF\n\
                    3: OFDLCK ADVISORY  READ -1 fe:00:7 0 EOF\n\
                    garbage\n";
        let l = parse_locks(text);
        assert_eq!(l.len(), 3);
        assert_eq!(
            l[0],
            KernelLock {
                major: 0xfe,
                minor: 0,
                ino: 10010796,
                pid: 25774,
                exclusive: false
            }
        );
        assert_eq!((l[1].major, l[1].minor, l[1].exclusive), (8, 1, true));
        assert_eq!(l[2].pid, -1);
    }

    /// A table cut at kvcr's limit is incomplete: a lock it does not list,
    /// that a probe finds held, is "not checked" because of the limit,
    /// never "free" and never "outside this PID namespace".
    #[test]
    fn a_lock_table_longer_than_kvcr_reads_is_incomplete() {
        let proc = ProcFs::system();
        if proc.untrusted().is_some() {
            return;
        }
        let (head, whole) = proc.read_limited("self/status", 8).unwrap();
        assert_eq!((head.len(), whole), (8, false));
        let (_, whole) = proc.read_limited("self/status", 1 << 20).unwrap();
        assert!(whole);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cohort");
        std::fs::write(&p, b"").unwrap();
        let holder = open_file(&p).unwrap();
        rustix::fs::flock(&holder.fd, FlockOperation::NonBlockingLockShared).unwrap();
        let probed = open_file(&p).unwrap();
        let table = |complete| LockTable {
            locks: Some(Vec::new()),
            complete,
            fd_holders: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            proc,
        };
        let probe = FlockOperation::NonBlockingLockExclusive;
        match lock_of(&probed.fd, &table(false), probe) {
            Lock::NotChecked(why) => assert!(why.contains("longer than"), "{why}"),
            l => panic!("{l:?}"),
        }
        match lock_of(&probed.fd, &table(true), probe) {
            Lock::NotChecked(why) => assert!(why.contains("PID namespace"), "{why}"),
            l => panic!("{l:?}"),
        }
        rustix::fs::flock(&holder.fd, FlockOperation::Unlock).unwrap();
        assert_eq!(lock_of(&probed.fd, &table(false), probe), Lock::Free);
    }

    /// A maps line names (major, minor, inode) in hex:hex and decimal; an
    /// anonymous mapping (inode 0) or a line that does not parse is none.
    #[test]
    fn a_maps_line_parses_as_the_kernel_writes_it() {
        let l = b"7f12a000-7f12b000 r--s 00000000 fe:01 10010796    /dev/shm/a b";
        assert_eq!(parse_maps_line(l), Some((0xfe, 1, 10_010_796)));
        assert_eq!(parse_maps_line(b"7f-80 rw-p 00000000 00:00 0 "), None);
        assert_eq!(parse_maps_line(b"garbage"), None);
        assert_eq!(parse_maps_line(b""), None);
    }

    /// `/proc/self/maps` streamed: every line handed over, the last one
    /// without a newline too, whatever the length; a deadline already
    /// passed is "not read whole", never a partial table taken for whole.
    #[test]
    fn a_proc_table_is_streamed_whole_or_said_not_whole() {
        let proc = ProcFs::system();
        if proc.untrusted().is_some() {
            return;
        }
        let later = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut lines = 0usize;
        let whole = proc.read_lines("self/maps", later, |_| lines += 1).unwrap();
        assert!(whole && lines > 3, "{lines}");
        let past = std::time::Instant::now();
        let mut none = 0usize;
        assert!(!proc.read_lines("self/maps", past, |_| none += 1).unwrap());
        assert_eq!(none, 0);
    }

    /// An entry is classified from its statx before any open: a FIFO is
    /// refused without being opened (an open of a FIFO for reading without
    /// O_NONBLOCK would block; with it, it would still be an open), a
    /// directory is no file, a file swapped since its listing is refused.
    #[test]
    fn only_the_regular_file_listed_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let d = open_dir(dir.path()).unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        match open_regular_at(d.as_fd(), OsStr::new("fifo"), None) {
            Err(Refused::Type(_, "FIFO")) => {}
            r => panic!("{:?}", r.map(|o| o.key)),
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(matches!(
            open_regular_at(d.as_fd(), OsStr::new("sub"), None),
            Err(Refused::Type(_, "directory"))
        ));
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let first = open_regular_at(d.as_fd(), OsStr::new("a"), None).unwrap();
        // Renamed away (still alive: its inode cannot be reused), and a
        // new file under the name.
        std::fs::rename(dir.path().join("a"), dir.path().join("a.old")).unwrap();
        std::fs::write(dir.path().join("a"), b"y").unwrap();
        assert!(matches!(
            open_regular_at(d.as_fd(), OsStr::new("a"), Some(first.key)),
            Err(Refused::Replaced(..))
        ));
        assert!(matches!(
            open_dir_at(d.as_fd(), OsStr::new("fifo"), None),
            Err(Refused::Type("directory", "FIFO"))
        ));
    }

    /// GMS's `_user_space_dead`: field 9 of the task's stat (after the
    /// command's closing parenthesis, index 6), PF_EXITING 0x4, read by the
    /// one stat parser (`crate::io::node::proc::parse_stat`); SIGKILL
    /// pending in SigPnd or ShdPnd.
    #[test]
    fn task_stat_and_status_parse() {
        use crate::io::node::proc::parse_stat;
        let tail = " 0 0 0 0 0 0 0 0 0 0 0 0 7 0 0";
        let stat = format!("123 (a) b) c) S 1 123 123 0 -1 4194560{tail}");
        let s = parse_stat(stat.as_bytes()).unwrap();
        assert_eq!((s.state, s.flags, s.start_ticks), ('S', 4194560, 7));
        let exiting = format!("9 (x) D 1 9 9 0 -1 4194564{tail}");
        assert_eq!(
            parse_stat(exiting.as_bytes()).map(|s| s.flags & PF_EXITING),
            Some(4)
        );
        assert_eq!(parse_stat(b"no parenthesis"), None);
        assert!(sigkill_pending(b"Name:\tx\nSigPnd:\t0000000000000100\n"));
        assert!(sigkill_pending(b"ShdPnd:\t0000000000000100\n"));
        assert!(!sigkill_pending(b"SigPnd:\t0000000000000002\nShdPnd:\t0\n"));
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let v: Vec<(String, String)> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        move |k| {
            v.iter()
                .find(|(n, _)| n == k)
                .map(|(_, x)| OsString::from(x))
        }
    }

    /// `_kv_lease_shm_path` and `_kv_lease_shm_dir` (`kv_lease_client.py` @
    /// 12860c91), `_directory` (vLLM and SGLang `writer_lifecycle.py`), the
    /// vLLM recovery hook's `DYN_KV_RECOVERY_PATH` / `GMS_SOCKET_DIR` or
    /// `/tmp`.
    #[test]
    fn places_are_where_gms_puts_them() {
        let none = places(&env(&[]), true);
        assert_eq!(
            none,
            [
                Place::LeaseDir("/dev/shm".into()),
                Place::CohortDir("/shared/failover.lock.vllm-writers".into()),
                Place::CohortDir("/shared/failover.lock.writers".into()),
                Place::Recovery("/tmp/kv-recovery.mmap".into()),
            ]
        );
        assert_eq!(
            places(&env(&[("TMPDIR", "/t")]), false)[0],
            Place::LeaseDir("/t".into())
        );
        let dirs = places(
            &env(&[
                ("GMS_KV_LEASE_SHM_DIR", "/d"),
                ("GMS_SGLANG_KV_LEASE_SHM_DIR", "/s"),
                ("GMS_TRTLLM_KV_LEASE_SHM_DIR", ""),
                ("FAILOVER_LOCK_PATH", "/run/x/lock"),
                ("GMS_SOCKET_DIR", "/sock"),
                ("GMS_KV_INDEX_PATH", "/idx"),
            ]),
            true,
        );
        assert_eq!(
            dirs,
            [
                Place::LeaseDir("/d".into()),
                Place::LeaseDir("/s".into()),
                // An empty per-engine directory does not fall through.
                Place::LeaseDir("/dev/shm".into()),
                Place::CohortDir("/run/x/lock.vllm-writers".into()),
                Place::CohortDir("/run/x/lock.writers".into()),
                Place::Recovery("/sock/kv-recovery.mmap".into()),
                Place::Index("/idx".into()),
            ]
        );
        // An explicit path replaces the engine's directory; an empty
        // per-engine path does not fall through to the generic one.
        let paths = places(
            &env(&[
                ("GMS_VLLM_KV_LEASE_SHM_PATH", "/v.shm"),
                ("GMS_SGLANG_KV_LEASE_SHM_PATH", ""),
                ("GMS_KV_LEASE_SHM_PATH", "/g.shm"),
            ]),
            true,
        );
        assert_eq!(
            paths[..3],
            [
                Place::LeaseFile("/v.shm".into()),
                Place::LeaseDir("/dev/shm".into()),
                Place::LeaseFile("/g.shm".into()),
            ]
        );
        let explicit = places(&env(&[("DYN_KV_RECOVERY_PATH", "/r.mmap")]), true);
        assert!(explicit.contains(&Place::Recovery("/r.mmap".into())));
        let empty = places(&env(&[("DYN_KV_RECOVERY_PATH", "")]), true);
        assert!(!empty.iter().any(|p| matches!(p, Place::Recovery(_))));
    }
}
