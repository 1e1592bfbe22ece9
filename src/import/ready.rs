//! `--hold --ready-file PATH`: the file a supervisor waits for.
//!
//! The staging file is created (exclusively, next to PATH) before any GPU
//! call, so an unwritable directory is a usage error and not a failed
//! import. Once every rank is imported the content is written, synced and
//! renamed over PATH in one step: a reader sees no file or the whole file.
//! The file is removed before the group is released, and on every other way
//! out (dropping [`ReadyFile`]), so it never claims a group kvcr no longer
//! holds.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct ReadyFile {
    path: PathBuf,
    staging: Option<(PathBuf, File)>,
    published: bool,
}

impl ReadyFile {
    /// Prepares PATH: refuses an existing PATH (another hold may own it, or a
    /// killed one left it behind) and creates the staging file beside it.
    pub fn prepare(path: &Path) -> io::Result<ReadyFile> {
        if fs::symlink_metadata(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "ready file {} already exists (another `kvcr import --hold` may own it, or a killed one left it)",
                    path.display()
                ),
            ));
        }
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ready file {} has no file name", path.display()),
            )
        })?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut staging_name = std::ffi::OsString::from(".");
        staging_name.push(name);
        staging_name.push(format!(".{}.tmp", std::process::id()));
        let staging = dir.join(staging_name);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&staging)?;
        Ok(ReadyFile {
            path: path.to_path_buf(),
            staging: Some((staging, file)),
            published: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `content` and renames the staging file over PATH.
    pub fn publish(&mut self, content: &[u8]) -> io::Result<()> {
        let (staging, mut file) = self
            .staging
            .take()
            .ok_or_else(|| io::Error::other("ready file already published"))?;
        let r = file
            .write_all(content)
            .and_then(|_| file.sync_all())
            .and_then(|_| fs::rename(&staging, &self.path));
        match r {
            Ok(()) => {
                self.published = true;
                if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    // Best effort: make the rename durable.
                    let _ = File::open(dir).and_then(|d| d.sync_all());
                }
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&staging);
                Err(e)
            }
        }
    }

    /// Removes PATH (or the unused staging file).
    pub fn remove(&mut self) -> io::Result<()> {
        if let Some((staging, _)) = self.staging.take() {
            let _ = fs::remove_file(staging);
        }
        if self.published {
            self.published = false;
            match fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
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

    #[test]
    fn staged_then_published_then_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ready.json");
        let mut r = ReadyFile::prepare(&p).unwrap();
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
            ReadyFile::prepare(&p).err().unwrap().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(ReadyFile::prepare(&dir.path().join("no/such/dir/ready")).is_err());
        let q = dir.path().join("ready2");
        {
            let mut r = ReadyFile::prepare(&q).unwrap();
            r.publish(b"x").unwrap();
            assert!(q.exists());
        }
        assert!(!q.exists(), "dropping removes the published file");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
