//! The walk of llm-d ≤ v0.8.1's nested layout ([`super::super::nested`]):
//! a root-level directory no producer's name matches is searched, by names
//! only and within bounds ([`MODEL_DEPTH`] levels, [`PROBE_DIRS`]
//! directories, a directory left at its first entry that is not a
//! directory), for `block_size_<B>_blocks_per_file_<F>`; what is found is
//! walked as the rest of the walk is (one `statx` per entry, never a link).

use super::super::nested::{self, MODEL_DEPTH, PROBE_DIRS};
use super::super::scan::{BlockFile, Loose, NestedScan, RankScan, Scan, Staged};
use super::{cannot, each, lossy, lstat_at, open_dir, state_of, stray, Counters, Kind};
use crate::format::failure::Failure;
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Dir, FileType};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// A `block_size_…` directory found below a root entry.
struct Found {
    /// The model's directories, `/`-joined (empty: the root entry is it).
    model: Vec<u8>,
    path: String,
    fd: OwnedFd,
    block_size: u64,
    per_file: u64,
}

/// Where a set's files go while its rank directory is walked.
struct At<'a> {
    root: &'a str,
    model: &'a [u8],
    bs: (u64, u64),
    par: (u32, u32, u32),
}

/// A root-level directory matching no producer's name: true when it holds
/// the nested layout (walked into `scan`), false when it is foreign.
pub(super) fn nested(
    scan: &mut Scan,
    c: &Counters<'_>,
    root: &str,
    parent: &OwnedFd,
    name: &OsStr,
    loose: &mut Loose,
) -> Result<bool, Failure> {
    let mut w = Nested { scan, c };
    w.entry(root, parent, name, loose)
}

struct Nested<'s, 'c> {
    scan: &'s mut Scan,
    c: &'s Counters<'c>,
}

impl Nested<'_, '_> {
    fn entry(
        &mut self,
        root: &str,
        parent: &OwnedFd,
        name: &OsStr,
        loose: &mut Loose,
    ) -> Result<bool, Failure> {
        let c = self.c;
        let path = format!("{root}/{}", lossy(name));
        let mut found = Vec::new();
        let mut budget = PROBE_DIRS;
        if let Some((b, f)) = nested::block_size_dir(name.as_bytes()) {
            let fd = open_dir(parent.as_fd(), name, c).map_err(|e| cannot(&path, "open", e))?;
            found.push(Found {
                model: Vec::new(),
                path,
                fd,
                block_size: b,
                per_file: f,
            });
        } else {
            let fd = open_dir(parent.as_fd(), name, c).map_err(|e| cannot(&path, "open", e))?;
            let mut foreign = Vec::new();
            let model = name.as_bytes().to_vec();
            if !probe(
                &fd,
                model,
                &path,
                1,
                &mut budget,
                &mut found,
                &mut foreign,
                c,
            )? {
                return Ok(false);
            }
            for f in foreign {
                loose.foreign.push(f);
            }
        }
        for f in found {
            self.block_size(root, &f, loose)?;
        }
        Ok(true)
    }

    fn block_size(&mut self, root: &str, f: &Found, loose: &mut Loose) -> Result<(), Failure> {
        let c = self.c;
        let mut pars = Vec::new();
        each(&f.fd, &f.path, c, |n, st| {
            let p = format!("{}/{}", f.path, lossy(n));
            match nested::parallel_dir(n.as_bytes()) {
                Some(par) if st.kind == Kind::Dir => pars.push((n.to_os_string(), p, par)),
                _ => stray(loose, p, &st),
            }
            Ok(())
        })?;
        for (n, p, par) in pars {
            let fd = open_dir(f.fd.as_fd(), &n, c).map_err(|e| cannot(&p, "open", e))?;
            let at = At {
                root,
                model: &f.model,
                bs: (f.block_size, f.per_file),
                par,
            };
            let before = self.scan.nested.len();
            let mut ranks = Vec::new();
            each(&fd, &p, c, |rn, st| {
                let rp = format!("{p}/{}", lossy(rn));
                match nested::rank_dir(rn.as_bytes()) {
                    Some(r) if st.kind == Kind::Dir => ranks.push((rn.to_os_string(), rp, r)),
                    _ => stray(loose, rp, &st),
                }
                Ok(())
            })?;
            for (rn, rp, r) in ranks {
                let rfd = open_dir(fd.as_fd(), &rn, c).map_err(|e| cannot(&rp, "open", e))?;
                self.rank(&at, r, &rfd, &rp, loose)?;
            }
            if self.scan.nested.len() == before {
                loose.empty_dirs.push(p);
            }
        }
        Ok(())
    }

    /// `rank_<R>/`: one `<dtype>` directory per set.
    fn rank(
        &mut self,
        at: &At<'_>,
        r: u32,
        fd: &OwnedFd,
        path: &str,
        loose: &mut Loose,
    ) -> Result<(), Failure> {
        let c = self.c;
        let mut dtypes = Vec::new();
        each(fd, path, c, |n, st| {
            let p = format!("{path}/{}", lossy(n));
            match st.kind {
                Kind::Dir => dtypes.push((n.to_os_string(), p)),
                _ => stray(loose, p, &st),
            }
            Ok(())
        })?;
        for (n, p) in dtypes {
            let i = self.nested_set(at, n.as_bytes());
            let dfd = open_dir(fd.as_fd(), &n, c).map_err(|e| cannot(&p, "open", e))?;
            let mut out = RankScan {
                present: true,
                ..Default::default()
            };
            dtype_dir(&dfd, &p, r, &mut out, c)?;
            let rs = self.scan.nested[i].ranks.entry(r).or_default();
            rs.present = true;
            rs.blocks.extend(out.blocks);
            rs.loose.merge(out.loose);
        }
        Ok(())
    }

    fn nested_set(&mut self, at: &At<'_>, dtype: &[u8]) -> usize {
        let same = |s: &NestedScan| {
            s.root == at.root
                && s.model == at.model
                && (s.block_size, s.per_file) == at.bs
                && (s.tp, s.pp, s.pcp) == at.par
                && s.dtype == dtype
        };
        if let Some(i) = self.scan.nested.iter().position(same) {
            return i;
        }
        self.scan.nested.push(NestedScan {
            root: at.root.to_string(),
            model: at.model.to_vec(),
            block_size: at.bs.0,
            per_file: at.bs.1,
            tp: at.par.0,
            pp: at.par.1,
            pcp: at.par.2,
            dtype: dtype.to_vec(),
            ..Default::default()
        });
        self.scan.nested.len() - 1
    }
}

/// `<dtype>/<3 hex>/<2 hex>[_g<G>]/<hash>.bin`.
fn dtype_dir(
    fd: &OwnedFd,
    path: &str,
    r: u32,
    out: &mut RankScan,
    c: &Counters<'_>,
) -> Result<(), Failure> {
    let mut b1s = Vec::new();
    each(fd, path, c, |n, st| {
        let p = format!("{path}/{}", lossy(n));
        match st.kind {
            Kind::Dir if super::super::grammar::bucket1(n.as_bytes()) => {
                b1s.push((n.to_os_string(), p))
            }
            _ => stray(&mut out.loose, p, &st),
        }
        Ok(())
    })?;
    for (b1, p1) in b1s {
        let fd1 = open_dir(fd.as_fd(), &b1, c).map_err(|e| cannot(&p1, "open", e))?;
        let mut b2s = Vec::new();
        each(&fd1, &p1, c, |n, st| {
            let p = format!("{p1}/{}", lossy(n));
            match nested::bucket2(n.as_bytes()) {
                Some((b2, g)) if st.kind == Kind::Dir => {
                    b2s.push((n.to_os_string(), b2.to_vec(), g, p))
                }
                _ => stray(&mut out.loose, p, &st),
            }
            Ok(())
        })?;
        if b2s.is_empty() && out.loose.is_empty() {
            out.loose.empty_dirs.push(p1.clone());
        }
        for (n, b2, g, p2) in b2s {
            let fd2 = open_dir(fd1.as_fd(), &n, c).map_err(|e| cannot(&p2, "open", e))?;
            let mut any = false;
            each(&fd2, &p2, c, |leaf, st| {
                any = true;
                let lp = || format!("{p2}/{}", lossy(leaf));
                match nested::leaf(leaf.as_bytes(), b1.as_bytes(), &b2, g) {
                    Some((key, false)) => out.blocks.push(BlockFile {
                        key,
                        size: st.size,
                        state: state_of(st.kind),
                    }),
                    Some((_, true)) if st.kind == Kind::Reg => out.loose.staging.push(Staged {
                        path: lp(),
                        size: st.size,
                        mtime_s: st.mtime_s,
                        rank: Some(r),
                    }),
                    _ => stray(&mut out.loose, lp(), &st),
                }
                Ok(())
            })?;
            if !any {
                out.loose.empty_dirs.push(p2);
            }
        }
    }
    Ok(())
}

/// Searches `fd` (the model's directories so far: `model`) for
/// `block_size_…` by names only; a directory holding anything but
/// directories is not a model's, and is left at that entry. True when
/// something was found below `fd`; then every directory beside a find that
/// held none is listed in `foreign` (never silently skipped).
#[allow(clippy::too_many_arguments)]
fn probe(
    fd: &OwnedFd,
    model: Vec<u8>,
    path: &str,
    depth: usize,
    budget: &mut usize,
    found: &mut Vec<Found>,
    foreign: &mut Vec<String>,
    c: &Counters<'_>,
) -> Result<bool, Failure> {
    if *budget == 0 {
        return Ok(false);
    }
    *budget -= 1;
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|e| cannot(path, "list", e))?;
    let mut dir = Dir::new(dup).map_err(|e| cannot(path, "list", e))?;
    let mut subs: Vec<OsString> = Vec::new();
    let mut hits = Vec::new();
    while let Some(ent) = dir.read() {
        let ent = ent.map_err(|e| cannot(path, "list", e))?;
        let name = OsStr::from_bytes(ent.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let is_dir = match ent.file_type() {
            FileType::Directory => true,
            FileType::Unknown => {
                lstat_at(fd.as_fd(), name).map_err(|e| cannot(path, "statx", e))? == Some(Kind::Dir)
            }
            _ => false,
        };
        if !is_dir {
            return Ok(false);
        }
        match nested::block_size_dir(name.as_bytes()) {
            Some(bf) => hits.push((name.to_os_string(), bf)),
            None => subs.push(name.to_os_string()),
        }
    }
    let mut misses = Vec::new();
    let mut any = !hits.is_empty();
    if hits.is_empty() && depth < MODEL_DEPTH {
        for n in subs {
            let p = format!("{path}/{}", lossy(&n));
            let sub = open_dir(fd.as_fd(), &n, c).map_err(|e| cannot(&p, "open", e))?;
            let mut m = model.clone();
            if !m.is_empty() {
                m.push(b'/');
            }
            m.extend_from_slice(n.as_bytes());
            let mut below = Vec::new();
            if probe(&sub, m, &p, depth + 1, budget, found, &mut below, c)? {
                any = true;
                foreign.extend(below);
            } else {
                misses.push(p);
            }
        }
    } else {
        misses = subs
            .iter()
            .map(|n| format!("{path}/{}", lossy(n)))
            .collect();
    }
    for (n, (b, f)) in &hits {
        let p = format!("{path}/{}", lossy(n));
        let sub = open_dir(fd.as_fd(), n, c).map_err(|e| cannot(&p, "open", e))?;
        found.push(Found {
            model: model.clone(),
            path: p,
            fd: sub,
            block_size: *b,
            per_file: *f,
        });
    }
    if any {
        foreign.extend(misses);
    }
    Ok(any)
}
