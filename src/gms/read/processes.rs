//! The processes `--live` asks about: whether a pid runs or is exiting,
//! which process maps a ring, and the rings' namespaces.

use super::*;

/// Every pid in `/proc`.
pub(super) fn pids(proc: &ProcFs) -> Vec<i32> {
    let Ok(root) = proc.root() else {
        return Vec::new();
    };
    let Ok(d) = open_ro(Some(root), Path::new("."), OFlags::DIRECTORY) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = list_proc(&d)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| std::str::from_utf8(n.as_bytes()).ok()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// The kernel's PF_EXITING task flag.
pub(super) const PF_EXITING: u64 = 0x4;
/// SIGKILL's bit in SigPnd/ShdPnd.
pub(super) const SIGKILL_BIT: u64 = 1 << 8;

/// Whether `pid` runs, and whether every thread of it is exiting (never
/// returns to user space: PF_EXITING or a pending SIGKILL), as GMS's own
/// fence tells (`_user_space_dead`). A zombie thread does not run.
pub fn process_state(proc: &ProcFs, pid: i32) -> (bool, bool) {
    let Ok(root) = proc.root() else {
        return (false, false);
    };
    let tasks = match open_ro(
        Some(root),
        Path::new(&format!("{pid}/task")),
        OFlags::DIRECTORY,
    )
    .and_then(|d| list_proc(&d))
    {
        Ok(t) => t,
        Err(_) => return (false, false),
    };
    let mut running = false;
    let mut exiting = true;
    for tid in tasks {
        let tid = tid.to_string_lossy().into_owned();
        let Ok(stat) = proc.read(&format!("{pid}/task/{tid}/stat")) else {
            continue;
        };
        let Some(crate::io::node::proc::Stat { state, flags, .. }) =
            crate::io::node::proc::parse_stat(&stat)
        else {
            continue;
        };
        if matches!(state, 'Z' | 'X' | 'x') {
            continue;
        }
        running = true;
        let status = proc
            .read(&format!("{pid}/task/{tid}/status"))
            .unwrap_or_default();
        if flags & PF_EXITING == 0 && !sigkill_pending(&status) {
            exiting = false;
        }
    }
    (running, running && exiting)
}

/// Whether a task's status shows SIGKILL pending (SigPnd or ShdPnd).
pub fn sigkill_pending(status: &[u8]) -> bool {
    String::from_utf8_lossy(status).lines().any(|l| {
        (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            && l.split_whitespace()
                .nth(1)
                .and_then(|v| u64::from_str_radix(v, 16).ok())
                .is_some_and(|v| v & SIGKILL_BIT != 0)
    })
}

/// What `--live` needs for the lease rings, for every ring: the live
/// process behind each owner hash the reads saw (under GMS's default owner
/// id, every engine name and every device). [`ring_live`] makes it one
/// ring's.
pub fn lease_live(wanted: &BTreeSet<u64>) -> LeaseLive {
    let proc = ProcFs::system();
    let mut live = LeaseLive::default();
    if let Some(why) = proc.untrusted() {
        live.not_checked = Some(why.to_string());
        return live;
    }
    live.devices = devices(proc);
    if !wanted.is_empty() {
        for pid in pids(proc) {
            let Ok(p) = u32::try_from(pid) else { continue };
            for engine in format::ENGINES {
                for device in 0..live.devices {
                    let h = format::owner_hash(&format::default_owner_id(engine, p, device));
                    if wanted.contains(&h) {
                        live.owners.insert(
                            h,
                            OwnerId {
                                engine,
                                pid: p,
                                device,
                            },
                        );
                    }
                }
            }
        }
    }
    live
}

/// One ring's `--live` facts (docs/format.md §14.2): the pids a ring
/// records (in its owner ids, `recovery_owner_pid`) are its writers' PID
/// namespace's, so they are compared with this namespace's processes only
/// when every other process that has the ring open or mapped runs in this
/// PID namespace, and at least one does (`namespace`, the ring's answer
/// of [`ring_namespaces`]); otherwise nothing is judged alive or gone,
/// and `not_checked` says why.
pub fn ring_live(
    base: &LeaseLive,
    namespace: &Result<(), String>,
    recovery_pid: Option<u64>,
) -> LeaseLive {
    let mut live = base.clone();
    if live.not_checked.is_some() {
        return live;
    }
    match namespace {
        Err(why) => {
            live.not_checked = Some(why.clone());
            live.owners.clear();
        }
        Ok(()) => {
            live.recovery_owner_alive = recovery_pid
                .and_then(|p| i32::try_from(p).ok())
                .map(|p| p > 0 && process_state(ProcFs::system(), p).0)
        }
    }
    live
}

/// The (device, inode) pair one line of `/proc/<pid>/maps` maps
/// (`start-end perms offset MAJ:MIN inode path`, MAJ:MIN in hex); `None`
/// for an anonymous mapping or a line that does not parse.
pub fn parse_maps_line(line: &[u8]) -> Option<Key> {
    let mut f = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|x| !x.is_empty());
    let dev = std::str::from_utf8(f.nth(3)?).ok()?;
    let ino = std::str::from_utf8(f.next()?).ok()?;
    let (maj, min) = dev.split_once(':')?;
    let key = (
        u32::from_str_radix(maj, 16).ok()?,
        u32::from_str_radix(min, 16).ok()?,
        ino.parse::<u64>().ok()?,
    );
    (key.2 != 0).then_some(key)
}

/// How long one `/proc/<pid>/maps` is read before it is given up as "not
/// read whole" (a table of a million mappings reads in well under this).
pub const MAPS_SECONDS: u64 = 10;

/// Which of `keys` `pid` maps, from its whole `/proc/<pid>/maps`
/// (streamed: no length cuts it short). `Ok(None)`: the table cannot be
/// read (the process is gone, or this user may not read it: not counted);
/// `Err` says why it was not read whole (then whether it maps a ring is
/// not checked, never "not mapped").
pub fn maps(
    proc: &ProcFs,
    pid: i32,
    keys: &BTreeSet<Key>,
) -> Result<Option<BTreeSet<Key>>, String> {
    let rel = format!("{pid}/maps");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(MAPS_SECONDS);
    let mut found = BTreeSet::new();
    match proc.read_lines(&rel, deadline, |l| {
        if let Some(k) = parse_maps_line(l).filter(|k| keys.contains(k)) {
            found.insert(k);
        }
    }) {
        Ok(true) => Ok(Some(found)),
        Ok(false) => Err(format!(
            "pid {pid}'s memory map ({}) could not be read whole within {MAPS_SECONDS} s, so \
             whether it maps the ring is not checked",
            proc.display(&rel)
        )),
        Err(Err(why)) => Err(why),
        Err(Ok(_)) => Ok(None),
    }
}

/// Which of `keys` `pid` has open (a descriptor) or mapped (its whole
/// memory map, [`maps`]); `Err` when that cannot be told.
pub(super) fn uses(
    proc: &ProcFs,
    root: BorrowedFd<'_>,
    pid: i32,
    keys: &BTreeSet<Key>,
) -> Result<BTreeSet<Key>, String> {
    let mut used = maps(proc, pid, keys)?.unwrap_or_default();
    let dir = format!("{pid}/fd");
    if let Ok(fds) =
        open_ro(Some(root), Path::new(&dir), OFlags::DIRECTORY).and_then(|d| list_proc(&d))
    {
        for fd in fds {
            let link = format!("{pid}/fd/{}", fd.to_string_lossy());
            if let Ok(st) = rustix::fs::statat(root, link.as_str(), AtFlags::empty()) {
                if keys.contains(&key_of(&st)) {
                    used.insert(key_of(&st));
                }
            }
        }
    }
    Ok(used)
}

/// Whether the pids each ring records are this PID namespace's, for every
/// ring at once (each process's tables are read once per run, not once per
/// ring): `Ok` for a ring when some other process of this namespace has it
/// open or mapped and none of another namespace does (processes whose
/// tables this user cannot read are not counted); `Err` says why it cannot
/// be told. A process whose memory map cannot be read whole leaves every
/// ring not checked: it may map any of them.
pub fn ring_namespaces(keys: &BTreeSet<Key>) -> BTreeMap<Key, Result<(), String>> {
    let proc = ProcFs::system();
    let all = |why: String| keys.iter().map(|k| (*k, Err(why.clone()))).collect();
    let root = match proc.root() {
        Ok(r) => r,
        Err(why) => return all(why),
    };
    let ns = |rel: &str| {
        rustix::io::retry_on_intr(|| rustix::fs::statat(root, rel, AtFlags::empty()))
            .map(|st| st.st_ino)
            .map_err(std::io::Error::from)
    };
    let ours = match ns("self/ns/pid") {
        Ok(n) => n,
        Err(e) => {
            return all(format!(
                "this process's PID namespace cannot be read ({}: {e})",
                proc.display("self/ns/pid")
            ))
        }
    };
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut users: BTreeMap<Key, usize> = BTreeMap::new();
    let mut why: BTreeMap<Key, String> = BTreeMap::new();
    for pid in pids(proc) {
        if pid == me || why.len() == keys.len() {
            continue;
        }
        let used = match uses(proc, root, pid, keys) {
            Ok(u) => u,
            Err(w) => {
                for k in keys {
                    why.entry(*k).or_insert_with(|| w.clone());
                }
                continue;
            }
        };
        if used.is_empty() {
            continue;
        }
        let reason = match ns(&format!("{pid}/ns/pid")) {
            Ok(n) if n == ours => {
                for k in &used {
                    *users.entry(*k).or_default() += 1;
                }
                continue;
            }
            Ok(n) => format!(
                "pid {pid}, which has the ring open or mapped, runs in another PID namespace \
                 (pid:[{n}]; kvcr runs in pid:[{ours}]), so the pids the ring records may be \
                 that namespace's"
            ),
            Err(e) => format!(
                "the PID namespace of pid {pid}, which has the ring open or mapped, cannot be \
                 read ({e})"
            ),
        };
        for k in used {
            why.entry(k).or_insert_with(|| reason.clone());
        }
    }
    keys.iter()
        .map(|k| {
            let verdict = match why.remove(k) {
                Some(w) => Err(w),
                None if users.get(k).copied().unwrap_or(0) == 0 => Err(
                    "no process of kvcr's PID namespace has the ring open or mapped, so whose \
                     PID namespace the pids it records belong to cannot be told (GMS may run \
                     in another container)"
                        .to_string(),
                ),
                None => Ok(()),
            };
            (*k, verdict)
        })
        .collect()
}

/// The devices a default owner id may name: the node's GPUs as
/// `/proc/driver/nvidia/gpus` lists them, at least 8 when it lists none.
pub(super) fn devices(proc: &ProcFs) -> u32 {
    let n = proc
        .gpus_dir()
        .ok()
        .and_then(|d| crate::io::node::gpus::read_proc_gpus(&d).ok().flatten())
        .map_or(0, |g| g.len() as u32);
    n.max(8)
}
