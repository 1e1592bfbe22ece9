//! Everything `kvcr pools` does to a file (docs/format.md §16.7): listing a
//! pool directory by raw names, `O_RDONLY | O_NOFOLLOW` opens (the one read-only open the reader
//! families share, `crate::io::read_only::open_ro`), `pread`
//! bounded by the size `fstat` gave, and the G3 files' `lstat`. Never a
//! lock, a write, a truncate, an unlink, an `mmap` or a create.

use super::format::{self as fmt, Name};
use super::rules::{G3State, Handback, Journal, Options, Pending, PoolRead, Region, Replay, Stat};
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// The most entries of one pool directory kvcr reads.
pub const ENTRY_CAP: usize = 65_536;
/// Bytes per `pread` of the ring.
const CHUNK: u64 = 1 << 20;
/// The largest handback body kvcr reads (KVCR's own grows ≈ 60 bytes per
/// block: a 1 TiB G3 of 2 MiB blocks is ≈ 30 MB).
pub const BODY_CAP: u64 = 1 << 30;

pub use crate::io::read_only::open_ro;
use rustix::io::retry_on_intr as retry;

/// One entry of a pool directory.
pub struct Entry {
    pub name: Vec<u8>,
    pub kind: FileType,
    pub name_kind: Name,
}

/// The entries of a directory, by raw name, sorted; `.` and `..` aside.
pub fn list(dir: &OwnedFd) -> Result<Vec<Entry>, String> {
    let mut d = rustix::fs::Dir::read_from(dir).map_err(|e| err("cannot list", e))?;
    let mut out = Vec::new();
    while let Some(e) = d.read() {
        let e = e.map_err(|e| err("cannot list", e))?;
        let name = e.file_name().to_bytes().to_vec();
        if name == b"." || name == b".." {
            continue;
        }
        if out.len() >= ENTRY_CAP {
            return Err(format!(
                "holds more than {ENTRY_CAP} entries, the most kvcr reads of one directory"
            ));
        }
        let kind = match retry(|| {
            rustix::fs::statat(
                dir,
                OsString::from_vec(name.clone()).as_os_str(),
                AtFlags::SYMLINK_NOFOLLOW,
            )
        }) {
            Ok(st) => FileType::from_raw_mode(st.st_mode),
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(err("cannot stat an entry", e)),
        };
        let name_kind = fmt::classify_name(&name);
        out.push(Entry {
            name,
            kind,
            name_kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn err(what: &str, e: Errno) -> String {
    format!("{what}: {}", std::io::Error::from(e))
}

/// The `fstat` of an open file.
pub fn stat(fd: &OwnedFd) -> Result<Stat, Errno> {
    let st = rustix::fs::fstat(fd)?;
    Ok(Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
    })
}

/// Opens a pool file beneath its directory; refuses anything but a regular
/// file, and a file replaced between the listing and the open.
pub fn open_pool(dir: &OwnedFd, name: &[u8]) -> Result<OwnedFd, String> {
    let p = OsString::from_vec(name.to_vec());
    let fd = open_ro(Some(dir.as_fd()), Path::new(&p), OFlags::empty()).map_err(|e| match e {
        Errno::LOOP => "is a symbolic link (kvcr follows none)".to_string(),
        e => err("cannot open", e),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| err("cannot stat", e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err("is not a regular file".into());
    }
    Ok(fd)
}

/// Reads exactly `buf.len()` bytes at `off`, or says the file changed.
fn pread_exact(fd: &OwnedFd, buf: &mut [u8], off: u64) -> Result<(), String> {
    let mut n = 0;
    while n < buf.len() {
        match retry(|| rustix::io::pread(fd, &mut buf[n..], off + n as u64)) {
            Ok(0) => {
                return Err(format!(
                    "the file changed under the read: {} bytes at offset {off} came back short",
                    buf.len()
                ))
            }
            Ok(k) => n += k,
            Err(e) => return Err(err("cannot read", e)),
        }
    }
    Ok(())
}

fn word(fd: &OwnedFd, off: u64) -> Result<u64, String> {
    let mut b = [0u8; 8];
    pread_exact(fd, &mut b, off)?;
    Ok(u64::from_le_bytes(b))
}

/// The ring, read in bounded chunks, by logical cursor.
struct Ring<'a> {
    fd: &'a OwnedFd,
    cap: u64,
    start: u64,
    buf: Vec<u8>,
}

impl Ring<'_> {
    /// `len` bytes at logical cursor `c` (wrapping at the ring's end).
    fn get(&mut self, c: u64, len: u64) -> Result<&[u8], String> {
        let have = c >= self.start && c + len <= self.start + self.buf.len() as u64;
        if !have {
            let want = len.max(CHUNK.min(self.cap));
            let mut buf = vec![0u8; want as usize];
            let pos = c % self.cap;
            let first = want.min(self.cap - pos);
            pread_exact(
                self.fd,
                &mut buf[..first as usize],
                fmt::JOURNAL_HEADER_BYTES + pos,
            )?;
            if first < want {
                pread_exact(
                    self.fd,
                    &mut buf[first as usize..],
                    fmt::JOURNAL_HEADER_BYTES,
                )?;
            }
            self.buf = buf;
            self.start = c;
        }
        let off = (c - self.start) as usize;
        Ok(&self.buf[off..off + len as usize])
    }
}

/// Decodes the frames in `[consumed, published)`, bounded by the cursors.
fn pending(
    o: &Options,
    fd: &OwnedFd,
    consumed: u64,
    published: u64,
    cap: u64,
    names: Option<&[String]>,
) -> Result<Pending, String> {
    let mut p = Pending {
        bytes: published - consumed,
        ..Pending::default()
    };
    let mut ring = Ring {
        fd,
        cap,
        start: 0,
        buf: Vec::new(),
    };
    let mut table = Replay::default();
    let mut c = consumed;
    while c < published {
        // Cursors are multiples of 8: a whole 6-byte header is pending.
        let h = ring.get(c, fmt::FRAME_HEADER)?;
        let h = fmt::frame_header(h.try_into().expect("6 bytes"));
        let stored = match fmt::check_ring_frame(h, published - c, cap) {
            Ok(s) => s,
            Err(e) => {
                p.frame_error = Some((c, e));
                break;
            }
        };
        let frame = ring.get(c, stored)?.to_vec();
        let fs = usize::from(h.0);
        if frame[fs..].iter().any(|&b| b != 0) {
            p.frame_error = Some((c, fmt::FrameError::Padding));
            break;
        }
        let ks = 6 + usize::from(h.2);
        match fmt::decode_record(&frame[ks..fs], names) {
            Ok(r) => table.apply(&frame[6..ks], r),
            Err(e) => {
                if p.payload_error.is_none() {
                    p.payload_error = Some((c, e));
                }
            }
        }
        p.frames += 1;
        c += stored;
    }
    p.table = table.summary(o);
    Ok(p)
}

/// One read of a pool file: its `fstat`, the journal header (consumed read
/// before published, each on its own), the pending frames and the handback
/// region. `mapping` is the mapping size to locate the region by (given by
/// the options, or inferred from the group).
pub fn read_pool(
    fd: &OwnedFd,
    o: &Options,
    mapping: Option<(u64, bool)>,
    generation: Option<&str>,
) -> Result<PoolRead, String> {
    let st = stat(fd).map_err(|e| err("cannot stat", e))?;
    let jb = o.journal_bytes;
    let names = o
        .pool_layouts
        .as_ref()
        .map(|l| l.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
    let journal = if st.size >= fmt::JOURNAL_HEADER_BYTES
        && jb > fmt::JOURNAL_HEADER_BYTES
        && jb.is_multiple_of(4096)
    {
        let consumed = word(fd, fmt::CONSUMED_OFFSET)?;
        let published = word(fd, fmt::PUBLISHED_OFFSET)?;
        let mut hb = [0u8; fmt::JOURNAL_HEADER_BYTES as usize];
        pread_exact(fd, &mut hb, 0)?;
        let mut header = fmt::header(&hb);
        header.consumed = consumed;
        header.published = published;
        let cap = jb - fmt::JOURNAL_HEADER_BYTES;
        let pending = if st.size >= jb && fmt::cursors_valid(published, consumed, cap) {
            Some(pending(o, fd, consumed, published, cap, names.as_deref())?)
        } else {
            None
        };
        Some(Journal { header, pending })
    } else {
        None
    };
    let handback = match mapping {
        None => Handback::NotLocated(
            "the mapping size is not known: give --pool-sizes-gb (and --journal-bytes if not \
             KVCR's CLI default)"
                .into(),
        ),
        Some((m, _)) => handback(fd, &st, m, o, generation, names.as_deref())?,
    };
    Ok(PoolRead {
        stat: st,
        journal,
        handback,
        mapping,
    })
}

fn handback(
    fd: &OwnedFd,
    st: &Stat,
    mapping: u64,
    o: &Options,
    generation: Option<&str>,
    names: Option<&[String]>,
) -> Result<Handback, String> {
    let Some(offset) = fmt::round_up(mapping, o.page_size.max(1)) else {
        return Ok(Handback::NotLocated("the mapping size overflows".into()));
    };
    if st.size <= offset {
        return Ok(Handback::Absent);
    }
    let avail = st.size - offset;
    if avail < fmt::HANDBACK_HEADER {
        return Ok(Handback::Torn(format!(
            "{avail} bytes at offset {offset}, under the 40-byte header: \"truncated\""
        )));
    }
    let mut h = [0u8; 40];
    pread_exact(fd, &mut h, offset)?;
    let digest: [u8; 32] = h[..32].try_into().expect("32");
    let length = u64::from_le_bytes(h[32..].try_into().expect("8"));
    if length == 0 {
        return Ok(Handback::Torn(format!(
            "length 0 at offset {offset} ({avail} bytes): \"unfinished\""
        )));
    }
    if length > avail - fmt::HANDBACK_HEADER {
        return Ok(Handback::Torn(format!(
            "length {length} but {} bytes follow the header: \"length disagrees\"",
            avail - fmt::HANDBACK_HEADER
        )));
    }
    if length > BODY_CAP {
        return Ok(Handback::NotLocated(format!(
            "a {length}-byte handback body is more than the {BODY_CAP} bytes kvcr reads"
        )));
    }
    let mut body = vec![0u8; length as usize];
    pread_exact(fd, &mut body, offset + fmt::HANDBACK_HEADER)?;
    let (dev, ino, whose) = match o.identity {
        Some((d, i)) => (d, i, "the identity given"),
        None => (st.dev, st.ino, "this file's own"),
    };
    let computed = match (
        &o.compatibility_digest,
        &o.pool_sizes_bytes,
        &o.pool_layouts,
        generation.and_then(fmt::generation_bytes),
    ) {
        (Some(cd), Some(sizes), Some(layouts), Some(gen)) if sizes.len() == layouts.len() => {
            let pools = fmt::pool_terms(o.journal_bytes, sizes, layouts);
            let t = fmt::terms(&fmt::Terms {
                compatibility_digest: cd,
                generation: gen,
                pools: &pools,
                journal_bytes: o.journal_bytes,
                mapping_bytes: mapping,
                st_dev: dev,
                st_ino: ino,
            });
            Ok(fmt::handback_digest(&t, &body))
        }
        (_, Some(s), Some(l), _) if s.len() != l.len() => Err(format!(
            "--pool-sizes-gb gives {} pool(s), --pool-layouts {}",
            s.len(),
            l.len()
        )),
        (cd, s, l, _) => Err(format!(
            "missing {}",
            [
                cd.is_none().then_some("--compatibility-digest"),
                s.is_none().then_some("--pool-sizes-gb"),
                l.is_none().then_some("--pool-layouts"),
                generation
                    .is_none()
                    .then_some("a generation (the file is not named kvcr-<id>-<32 hex>)"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        )),
    };
    let terms_used = format!(
        "--compatibility-digest {:?}, --pool-sizes-gb {:?} bytes, --pool-layouts {:?}, \
            journal_bytes {}, mapping {mapping}, (st_dev, st_ino) ({dev}, {ino}) {whose}, page \
            size {}",
        o.compatibility_digest.as_deref().unwrap_or("?"),
        o.pool_sizes_bytes.clone().unwrap_or_default(),
        o.pool_layouts.clone().unwrap_or_default(),
        o.journal_bytes,
        o.page_size
    );
    let mut frames = 0;
    let records = fmt::handback_frames(&body).and_then(|fr| {
        let mut t = Replay::default();
        for (k, p) in fr {
            let r = fmt::decode_record(&body[p.clone()], names).map_err(|e| {
                format!(
                    "recovery record is malformed at body offset {}: {e}",
                    k.start - 6
                )
            })?;
            t.apply(&body[k], r);
            frames += 1;
        }
        Ok(t.summary(o))
    });
    Ok(Handback::Present(Region {
        offset,
        length,
        digest,
        computed,
        terms_used,
        trailing: avail - fmt::HANDBACK_HEADER - length,
        records,
        frames,
    }))
}

/// `(major, minor, inode)`, as `/proc/locks` names a file.
pub type InodeKey = (u32, u32, u64);

/// A G3 file as `lstat` and `fstat` show it (never opened for writing,
/// never created, never locked).
pub fn g3_state(path: &Path) -> Result<(G3State, Option<InodeKey>), String> {
    match rustix::fs::lstat(path) {
        Err(Errno::NOENT) => Ok((G3State::Absent, None)),
        Err(e) => Err(err("cannot stat", e)),
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => Ok((G3State::Symlink, None)),
            FileType::RegularFile => Ok((
                G3State::File {
                    size: st.st_size as u64,
                    mode: st.st_mode & 0o7777,
                    locks: None,
                },
                Some((
                    rustix::fs::major(st.st_dev),
                    rustix::fs::minor(st.st_dev),
                    st.st_ino,
                )),
            )),
            _ => Ok((G3State::NotRegular, None)),
        },
    }
}
