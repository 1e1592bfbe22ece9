//! Files the operator names on the command line or in the environment (a
//! profile, node facts, merge inputs, a fleet report): read only when they
//! are regular files, never blocking on a FIFO and never opening a device,
//! and never past a size bound.

use std::io::Read;
use std::path::Path;

/// Reads `path` when it is a regular file of at most `max` bytes. A FIFO,
/// socket or device is refused before it is opened (and the open itself is
/// non-blocking, so one swapped in cannot hang the run); the open file is
/// checked again.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut file = open_regular(path, max)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// Opens `path` as [`read_regular`] does, for a streaming reader: refused
/// when it is not a regular file or is already larger than `max` bytes; the
/// reader ends after `max + 1` bytes, so a file that grows is cut short
/// (and then fails to parse) instead of being read without bound.
pub fn open_regular(path: &Path, max: u64) -> std::io::Result<std::io::Take<std::fs::File>> {
    use rustix::fs::{FileType, Mode, OFlags};
    let what = |ft: FileType| match ft {
        FileType::Directory => "a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "not a regular file",
    };
    // Classified through an O_PATH fd (which opens nothing), then exactly
    // that inode is reopened for reading: a device or FIFO swapped in at
    // any moment is never opened. (Symlinks the operator names are followed:
    // the path is theirs.)
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Err(std::io::Error::other(format!(
            "{}, not a regular file",
            what(ft)
        )));
    }
    let file = crate::io::inventory::open::reopen_for_reading(&fd)?;
    if file.metadata()?.len() > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(file.take(max.saturating_add(1)))
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
    }
}

/// Why [`open_no_follow`] did not open a file.
#[derive(Debug)]
pub(crate) enum NotOpened {
    /// The path could not be looked up or reopened.
    Io(std::io::Error),
    /// It is not a regular file (a symlink is not followed): what it is.
    NotRegular(&'static str),
}

/// Opens `path` for reading only if it is a regular file, without following
/// a symlink at its last component: classified through an `O_PATH |
/// O_NOFOLLOW` fd, then exactly that inode is reopened (nothing else is
/// ever opened, whatever is swapped in). For `seal`, `digest`, `examine`.
pub(crate) fn open_no_follow(path: &Path) -> Result<(std::fs::File, rustix::fs::Stat), NotOpened> {
    use rustix::fs::{FileType, Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| NotOpened::Io(e.into()))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| NotOpened::Io(e.into()))?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => return Err(NotOpened::NotRegular("a symlink")),
        FileType::Directory => return Err(NotOpened::NotRegular("a directory")),
        FileType::Fifo => return Err(NotOpened::NotRegular("a FIFO")),
        FileType::Socket => return Err(NotOpened::NotRegular("a socket")),
        _ => return Err(NotOpened::NotRegular("a device")),
    }
    let file = crate::io::inventory::open::reopen_for_reading(&fd).map_err(NotOpened::Io)?;
    Ok((file, st))
}
