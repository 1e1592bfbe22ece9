//! Files the operator names on the command line or in the environment (a
//! profile, node facts, merge inputs, a fleet report): read only when they
//! are regular files, never blocking on a FIFO and never opening a device,
//! and never past a size bound.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Reads `path` when it is a regular file of at most `max` bytes. A FIFO,
/// socket or device is refused before it is opened (and the open itself is
/// non-blocking, so one swapped in cannot hang the run); the open file is
/// checked again.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let what = |ft: std::fs::FileType| {
        if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        }
    };
    let md = std::fs::metadata(path)?;
    if !md.is_file() {
        return Err(std::io::Error::other(format!(
            "{}, not a regular file",
            what(md.file_type())
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::other(format!(
            "{}, not a regular file (replaced while opening)",
            what(md.file_type())
        )));
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
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
