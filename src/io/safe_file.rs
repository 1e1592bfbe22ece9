//! The one reader of a single file kvcr is named (a profile, node facts,
//! merge inputs, a fleet report, a ready file, a descriptor to seal, digest
//! or examine): opened only when it is a regular file, never blocking on a
//! FIFO and never opening a device, never past a size bound. The file is
//! classified through an `O_PATH` fd, which opens nothing, and then exactly
//! that inode is reopened for reading through the trusted `/proc`
//! ([`reopen_for_reading`]); the inventory's walk opens descriptors the same
//! way, beneath its held root (`crate::io::inventory::open`).

use crate::io::procfs::ProcFs;
use rustix::fs::{Mode, OFlags};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

/// Opens the inode an `O_PATH` fd names for reading, via `/proc/self/fd/N`
/// (the only way Linux offers to upgrade an `O_PATH` fd). Without /proc, or
/// with a `/proc` that is not procfs (where `self/fd/N` could be a plain
/// symlink to anything), the file cannot be opened race-free, and it is
/// neither followed nor opened (KV005).
pub fn reopen_for_reading(path_fd: &OwnedFd) -> std::io::Result<File> {
    reopen_for_reading_in(ProcFs::system(), path_fd)
}

/// [`reopen_for_reading`] through the given procfs root (tests).
pub fn reopen_for_reading_in(proc: &ProcFs, path_fd: &OwnedFd) -> std::io::Result<File> {
    reopen_through(proc.fd_dir().as_ref().map(|d| *d), path_fd)
}

/// [`reopen_for_reading`] through `fd_dir`, the `self/fd` a caller took
/// from [`ProcFs::fd_dir`] (or why there is none) once for many files: the
/// inventory's reader takes it once per reader, not once per descriptor
/// (finding `self/fd` checks which process holds it, a system call). A
/// reader lives on the threads of the process that made it, so what it
/// took names that process's fds.
pub fn reopen_through(
    fd_dir: Result<std::os::fd::BorrowedFd<'_>, &String>,
    path_fd: &OwnedFd,
) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    // `self/fd` is opened and checked once per process: each reopen is
    // then one path component (the fd number) instead of four.
    let dir = fd_dir.map_err(|why| {
        std::io::Error::other(format!("{why}; the file cannot be opened race-free"))
    })?;
    // The fd's number, in decimal, NUL-terminated, on the stack: no
    // allocation per file.
    let mut digits = [0u8; 12];
    let name = fd_name(path_fd.as_raw_fd(), &mut digits);
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    rustix::io::retry_on_intr(|| rustix::fs::openat(dir, name, flags, Mode::empty()))
        .map(File::from)
        .map_err(Into::into)
}

/// The name of fd `fd` in `/proc/self/fd`: its decimal digits, written
/// NUL-terminated into `buf` (an fd is a non-negative `i32`: at most 10
/// digits).
fn fd_name(fd: i32, buf: &mut [u8; 12]) -> &std::ffi::CStr {
    let mut n = fd.unsigned_abs();
    let mut at = buf.len() - 1; // buf[11] stays the NUL
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::ffi::CStr::from_bytes_with_nul(&buf[at..]).expect("digits then one NUL")
}

/// Whether a symlink at the path's last component is followed: the
/// operator's own paths (`--profile`, a merge input) are theirs to link;
/// a file kvcr rewrites or judges on its own (`seal`, `digest`,
/// `examine`) is never reached through a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    Follow,
    Refuse,
}

/// Why [`open`] or [`read`] did not give a file's bytes.
#[derive(Debug)]
pub enum NotRead {
    /// The path could not be looked up, reopened or read.
    Io(std::io::Error),
    /// It is not a regular file (a symlink, with [`Links::Refuse`]): what
    /// it is, in words ("a FIFO").
    NotRegular(&'static str),
    /// It has more bytes than the bound.
    TooLarge { max: u64 },
}

impl std::fmt::Display for NotRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRead::Io(e) => write!(f, "{e}"),
            NotRead::NotRegular(what) => write!(f, "{what}, not a regular file"),
            NotRead::TooLarge { max } => write!(f, "larger than {max} bytes"),
        }
    }
}

impl From<NotRead> for std::io::Error {
    fn from(e: NotRead) -> std::io::Error {
        match e {
            NotRead::Io(e) => e,
            e => std::io::Error::other(e.to_string()),
        }
    }
}

/// What a file is, in words, when it is not a regular file.
fn what(ft: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType;
    match ft {
        FileType::Symlink => "a symlink",
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "not a regular file",
    }
}

/// Opens `path` for reading when it is a regular file of at most `max`
/// bytes: classified on an `O_PATH` fd, that inode reopened, its size
/// checked on the open file. The reader ends after `max + 1` bytes, so a
/// file that grows is cut short (and then fails to parse) instead of being
/// read without bound. The `Stat` is the classified inode's.
pub fn open(
    path: &Path,
    links: Links,
    max: u64,
) -> Result<(std::io::Take<File>, rustix::fs::Stat), NotRead> {
    use rustix::fs::FileType;
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if links == Links::Refuse {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| NotRead::Io(e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| NotRead::Io(e.into()))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Err(NotRead::NotRegular(what(ft)));
    }
    // The size stated before anything is opened: the reopened file is this
    // very inode (no second stat), and a file that grows after the stat is
    // still bounded by the `take` below.
    if u64::try_from(st.st_size).unwrap_or(0) > max {
        return Err(NotRead::TooLarge { max });
    }
    let file = reopen_for_reading(&fd).map_err(NotRead::Io)?;
    Ok((file.take(max.saturating_add(1)), st))
}

/// [`open`], then the whole file: at most `max` bytes, in one `read(2)`
/// when it still has the size it was classified with ([`read_sized`]).
pub fn read(path: &Path, links: Links, max: u64) -> Result<(Vec<u8>, rustix::fs::Stat), NotRead> {
    let (file, st) = open(path, links, max)?;
    let mut bytes = Vec::new();
    let stated = u64::try_from(st.st_size).unwrap_or(0);
    read_sized(
        &mut file.into_inner(),
        &mut bytes,
        stated,
        max.saturating_add(1),
    )
    .map_err(NotRead::Io)?;
    if bytes.len() as u64 > max {
        return Err(NotRead::TooLarge { max });
    }
    Ok((bytes, st))
}

/// Reads `file`, a regular file whose size `size` was just taken from it,
/// from where it stands to its end into `buf` (cleared first), at most
/// `cap` bytes (`cap` ≥ 1, and as much as the caller would hold in memory:
/// `size` is trusted only below it; a caller bounding a file at `max` bytes
/// passes `max + 1` and refuses more than `max`). It asks for `size + 1` bytes in
/// one `read(2)`: a short read of exactly `size` bytes is the end of the
/// file (a regular file reads short only at its end), so no second read is
/// needed to see it. Anything else (the file grew or shrank, a short read
/// elsewhere) goes on reading to the end, up to `cap`, as `read_to_end`
/// does. The inventory's reader and this module's [`read`] both read so.
pub fn read_sized(file: &mut File, buf: &mut Vec<u8>, size: u64, cap: u64) -> std::io::Result<()> {
    buf.clear();
    let cap_len = usize::try_from(cap).unwrap_or(usize::MAX);
    let want = usize::try_from(size)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(cap_len);
    buf.reserve_exact(want);
    let spare = buf.spare_capacity_mut().len().min(cap_len);
    // Into the spare capacity, which a reused buffer may hold beyond `cap`:
    // what is read past `cap` is dropped below.
    let n = rustix::io::retry_on_intr(|| {
        rustix::io::read(&*file, rustix::buffer::spare_capacity(&mut *buf))
    })?;
    if !(n == 0 || (n as u64 == size && n < spare)) {
        let left = cap.saturating_sub(n as u64);
        file.take(left).read_to_end(buf)?;
    }
    buf.truncate(cap_len);
    Ok(())
}

/// [`read`] of an operator's path (links followed), as an `io::Error`.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    Ok(read(path, Links::Follow, max)?.0)
}

/// [`open`] of an operator's path (links followed), for a streaming reader.
pub fn open_regular(path: &Path, max: u64) -> std::io::Result<std::io::Take<File>> {
    Ok(open(path, Links::Follow, max)?.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn fifos_and_directories_are_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("f");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = super::read_regular(&fifo, 10).unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        let e = super::read_regular(t.path(), 10).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        std::fs::write(t.path().join("x"), b"0123456789A").unwrap();
        let e = super::read_regular(&t.path().join("x"), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than 10"), "{e}");
        assert_eq!(
            super::read_regular(&t.path().join("x"), 11).unwrap().len(),
            11
        );
        // A symlink is followed or refused, as asked.
        std::os::unix::fs::symlink(t.path().join("x"), t.path().join("l")).unwrap();
        let l = t.path().join("l");
        assert_eq!(super::read_regular(&l, 11).unwrap().len(), 11);
        let e = super::read(&l, super::Links::Refuse, 11).unwrap_err();
        assert!(matches!(e, super::NotRead::NotRegular("a symlink")), "{e}");
    }

    #[test]
    fn fd_names_are_the_decimal_digits() {
        for fd in [0, 7, 10, 99, 1000, 65535, i32::MAX] {
            let mut buf = [0u8; 12];
            assert_eq!(
                super::fd_name(fd, &mut buf).to_bytes(),
                fd.to_string().as_bytes()
            );
        }
    }

    /// The stated size bounds nothing alone: a regular file that states 0
    /// bytes and holds more (a procfs file; one that grows after the stat)
    /// is read whole when it fits, and refused past the bound.
    #[test]
    fn the_bound_holds_while_reading_not_only_at_the_stat() {
        let status = std::path::Path::new("/proc/self/status");
        let (bytes, st) = super::read(status, super::Links::Follow, 1 << 20).unwrap();
        assert_eq!(st.st_size, 0);
        assert!(bytes.starts_with(b"Name:"), "{:?}", &bytes[..16]);
        assert!(bytes.len() > 100);
        let e = super::read(status, super::Links::Follow, 100).unwrap_err();
        assert!(matches!(e, super::NotRead::TooLarge { max: 100 }), "{e}");
    }

    /// `read_sized` reads the whole file whatever the size it is told (the
    /// file changed since its stat), never more than `cap` bytes, and from
    /// where the file stands.
    #[test]
    fn read_sized_is_read_to_end_up_to_the_cap() {
        use std::io::{Seek, SeekFrom};
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let mut buf = b"stale".to_vec();
        for size in [0, 1, 4999, 5000, 5001, 1 << 20, u64::MAX] {
            for cap in [1u64, 100, 4999, 5000, 5001, 1 << 20] {
                let mut f = std::fs::File::open(&p).unwrap();
                super::read_sized(&mut f, &mut buf, size, cap).unwrap();
                let want = &data[..data.len().min(cap as usize)];
                assert_eq!(buf, want, "size {size} cap {cap}");
            }
        }
        let mut f = std::fs::File::open(&p).unwrap();
        f.seek(SeekFrom::Start(4000)).unwrap();
        super::read_sized(&mut f, &mut buf, 5000, 1 << 20).unwrap();
        assert_eq!(buf, &data[4000..]);
        std::fs::write(&p, b"").unwrap();
        let mut f = std::fs::File::open(&p).unwrap();
        super::read_sized(&mut f, &mut buf, 0, 10).unwrap();
        assert!(buf.is_empty());
    }
}
