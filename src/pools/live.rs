//! Who holds a pool file (`kvcr pools --live`, docs/format.md §16.5), from
//! `/proc/locks`, `/proc/net/unix` and the holders' descriptor tables, read
//! only: no lock probe (unlike `kvcr gms`), no connect to the socket, no
//! signal, no pidfd.

use super::rules::Liveness;
use crate::io::locks::{parse_locks, KernelLock, LOCKS_BYTES};
use crate::io::procfs::ProcFs;
use std::collections::{BTreeMap, BTreeSet};

/// A listening unix socket of `/proc/net/unix`: inode → path.
pub fn parse_unix_listeners(text: &str) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(1) {
        // Num RefCount Protocol Flags Type St Inode [Path]
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let accepting = u32::from_str_radix(f[3], 16).is_ok_and(|x| x & 0x0001_0000 != 0);
        if !accepting || f[5] != "01" {
            continue;
        }
        if let Ok(ino) = f[6].parse::<u64>() {
            out.insert(ino, f[7..].join(" "));
        }
    }
    out
}

/// What one look at `/proc` gave.
pub struct Snapshot {
    /// `None`: why the lock table cannot show every holder.
    blind: Option<String>,
    locks: Vec<KernelLock>,
    /// inode key → pids whose descriptors hold a lock on it.
    holders: BTreeMap<(u32, u32, u64), BTreeSet<i32>>,
    /// pid → the listening socket paths it has open.
    listening: BTreeMap<i32, Vec<String>>,
}

/// Whether this process runs in the initial PID namespace (its `NSpid`
/// has one entry): only then does `/proc/locks` list every holder.
pub fn parse_nspid(status: &[u8]) -> Option<usize> {
    let s = String::from_utf8_lossy(status);
    s.lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| v.split_whitespace().count())
}

impl Snapshot {
    /// Reads the lock table, the listening sockets and, for the inodes of
    /// `wanted`, every process's descriptor table.
    pub fn read(wanted: &BTreeSet<(u32, u32, u64)>) -> Snapshot {
        let proc = ProcFs::system();
        let mut blind = None;
        if let Some(why) = proc.untrusted() {
            blind = Some(format!("/proc is not trusted: {why}"));
        }
        let locks = match proc.read_limited("locks", LOCKS_BYTES) {
            Ok((b, true)) => parse_locks(&String::from_utf8_lossy(&b)),
            Ok((b, false)) => {
                blind.get_or_insert(format!(
                    "the kernel's lock table (/proc/locks) is longer than the {LOCKS_BYTES} \
                     bytes kvcr reads"
                ));
                parse_locks(&String::from_utf8_lossy(&b))
            }
            Err(_) => {
                blind.get_or_insert("the kernel's lock table (/proc/locks) cannot be read".into());
                Vec::new()
            }
        };
        match proc
            .read("self/status")
            .ok()
            .as_deref()
            .and_then(parse_nspid)
        {
            Some(1) => {}
            Some(_) => {
                blind.get_or_insert(
                    "kvcr runs in a nested PID namespace: /proc/locks omits every lock taken by \
                     a process outside it"
                        .into(),
                );
            }
            None => {
                blind.get_or_insert("this process's PID namespace cannot be read".into());
            }
        }
        let listeners = proc
            .read_limited("net/unix", 64 << 20)
            .map(|(b, _)| parse_unix_listeners(&String::from_utf8_lossy(&b)))
            .unwrap_or_default();
        let mut s = Snapshot {
            blind,
            locks,
            holders: BTreeMap::new(),
            listening: BTreeMap::new(),
        };
        s.scan(proc, wanted, &listeners);
        s
    }

    fn scan(
        &mut self,
        proc: &ProcFs,
        wanted: &BTreeSet<(u32, u32, u64)>,
        listeners: &BTreeMap<u64, String>,
    ) {
        use rustix::fs::OFlags;
        let Ok(root) = proc.root() else { return };
        let locked: BTreeSet<(u32, u32, u64)> = self
            .locks
            .iter()
            .map(|l| (l.major, l.minor, l.ino))
            .filter(|k| wanted.contains(k))
            .collect();
        let Ok(d) = super::read::open_ro(Some(root), std::path::Path::new("."), OFlags::DIRECTORY)
        else {
            return;
        };
        let Ok(entries) = super::read::list(&d) else {
            return;
        };
        for e in entries {
            let Some(pid) = std::str::from_utf8(&e.name)
                .ok()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let dir = format!("{pid}/fd");
            let Ok(fdd) =
                super::read::open_ro(Some(root), std::path::Path::new(&dir), OFlags::DIRECTORY)
            else {
                continue;
            };
            let Ok(fds) = super::read::list(&fdd) else {
                continue;
            };
            for fd in fds {
                let fd = String::from_utf8_lossy(&fd.name).into_owned();
                let link = format!("{pid}/fd/{fd}");
                if let Ok(target) = rustix::fs::readlinkat(root, link.as_str(), Vec::new()) {
                    let t = target.to_string_lossy();
                    if let Some(ino) = t
                        .strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .and_then(|i| i.parse::<u64>().ok())
                    {
                        if let Some(path) = listeners.get(&ino) {
                            self.listening.entry(pid).or_default().push(path.clone());
                        }
                        continue;
                    }
                }
                if locked.is_empty() {
                    continue;
                }
                let held = crate::io::locks::fd_holds_lock(proc, root, pid, &fd, &locked);
                if let Some(key) = held {
                    self.holders.entry(key).or_default().insert(pid);
                }
            }
        }
    }

    /// The locks the kernel lists on one inode: (pid, exclusive).
    pub fn locks_on(&self, key: (u32, u32, u64)) -> Vec<(i32, bool)> {
        self.locks
            .iter()
            .filter(|l| (l.major, l.minor, l.ino) == key)
            .map(|l| (l.pid, l.exclusive))
            .collect()
    }

    /// The pids holding a lock on `key`: those whose descriptors show it,
    /// else the pids the kernel recorded.
    pub fn holders_of(&self, key: (u32, u32, u64)) -> Vec<i32> {
        match self.holders.get(&key) {
            Some(p) if !p.is_empty() => p.iter().copied().collect(),
            _ => {
                let mut v: Vec<i32> = self
                    .locks_on(key)
                    .iter()
                    .map(|l| l.0)
                    .filter(|&p| p > 0)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// A pool file's liveness. `socket_path`: the service's `--socket-path`
    /// (raw path bytes compared), or any listening socket when not given.
    pub fn liveness(&self, key: (u32, u32, u64), socket_path: Option<&[u8]>) -> Liveness {
        let listed = self.locks_on(key);
        if listed.is_empty() {
            return match &self.blind {
                Some(why) => Liveness::NotChecked(why.clone()),
                None => Liveness::Orphan,
            };
        }
        let holders = self.holders_of(key);
        let service = holders.iter().copied().find_map(|pid| {
            self.listening.get(&pid).and_then(|paths| {
                paths
                    .iter()
                    .find(|p| socket_path.is_none_or(|s| p.as_bytes() == s))
                    .map(|p| (pid, p.clone()))
            })
        });
        match service {
            Some((pid, socket)) => Liveness::Live {
                service: pid,
                socket,
                primaries: holders.into_iter().filter(|&p| p != pid).collect(),
            },
            None => match socket_path {
                Some(s) if !self.listening.values().flatten().any(|p| p.as_bytes() == s) => {
                    Liveness::HeldNoService { holders }
                }
                _ => Liveness::Leaked { holders },
            },
        }
    }
}
