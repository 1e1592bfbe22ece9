//! `--hold` of `posix_fd` allocations (docs/format.md §8.6): the socket a
//! new engine takes kvcr's duplicates of the owner's fds from.
//!
//! A `posix_fd` handle is an fd in the owner; once the owner has closed it
//! (or exited), the only references left are kvcr's imported handle and
//! the duplicate kvcr took. A new engine cannot import a handle of kvcr's
//! process, and `pidfd_getfd` on a hold run as root is refused to a
//! non-root engine by the kernel's ptrace rules. So kvcr listens on a Unix
//! socket beside the ready file (`PATH.sock`, `SOCK_SEQPACKET`) and gives
//! every engine that connects, as one message per `posix_fd` allocation,
//! its JSON description with the fd attached (`SCM_RIGHTS`), then closes
//! the connection. Only root, kvcr's own user and the owners' users are
//! served (`SO_PEERCRED`); the socket file itself is 0666 so that the
//! check is the only gate.

use rustix::fd::{AsFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix,
    SocketFlags, SocketType,
};
use std::ffi::OsString;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One message of the hand-over: an allocation's description and its fd.
#[derive(Debug)]
pub struct Item {
    pub message: Vec<u8>,
    pub fd: Option<OwnedFd>,
}

/// The hand-over socket of one hold.
pub struct HandOver {
    path: PathBuf,
    /// The ready file's directory, held since it was checked
    /// (`crate::io::output::OutputFile`), and the socket's name in it.
    dir: OwnedFd,
    name: OsString,
    listener: OwnedFd,
    /// (device, inode) of the socket file this process bound.
    bound: (u64, u64),
    items: Vec<Item>,
    allowed: Vec<u32>,
    served: usize,
}

/// Where the socket of the ready file `ready` lies: `READY.sock`.
pub fn socket_path(ready: &Path) -> PathBuf {
    let mut p = OsString::from(ready.as_os_str());
    p.push(".sock");
    PathBuf::from(p)
}

impl HandOver {
    /// Binds `READY.sock` beside the ready file `ready` and listens;
    /// refuses a path that exists. The socket is bound, checked, given its
    /// mode and later removed in the ready file's held directory (through
    /// `/proc/self/fd`, by name beneath that descriptor), never by resolving
    /// the path again: a directory swapped for a symlink after the check
    /// cannot put the socket inside the inventory.
    pub fn prepare(ready: &crate::io::output::OutputFile) -> io::Result<HandOver> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let path = socket_path(ready.path());
        let mut name = OsString::from(ready.name());
        name.push(".sock");
        let dir = rustix::fs::openat(
            ready.dir(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "hand-over socket {} already exists: another hold may serve it, or a \
                     killed one left it (remove it after checking nothing holds the group)",
                    path.display()
                ),
            ));
        }
        let proc = crate::io::procfs::ProcFs::system();
        let held = proc.fd_path(dir.as_fd()).map_err(|why| {
            io::Error::other(format!(
                "hand-over socket {}: {why}; the socket cannot be bound beneath the held \
                 directory",
                path.display()
            ))
        })?;
        // The path published in the ready file is absolute: the directory
        // that was checked and is held, as the kernel names it now (else
        // the path given, made absolute), never relative to kvcr's cwd.
        let path = proc
            .fd_target(dir.as_fd())
            .filter(|d| d.is_absolute())
            .map(|d| d.join(&name))
            .or_else(|| std::path::absolute(&path).ok())
            .unwrap_or(path);
        let at = held.join(&name);
        let addr = SocketAddrUnix::new(&at).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "hand-over socket {}: not a usable Unix socket path ({e}; its name at most \
                     about 85 bytes)",
                    path.display()
                ),
            )
        })?;
        let listener = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        rustix::net::bind(&listener, &addr)?;
        // The inode just bound, beneath the held directory, never through a
        // symlink swapped in at the name.
        let node = rustix::fs::openat(
            &dir,
            &name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&node)?;
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_socket() {
            return Err(io::Error::other(format!(
                "hand-over socket {} was replaced while being bound",
                path.display()
            )));
        }
        // Field widths differ between architectures.
        #[allow(clippy::unnecessary_cast)]
        let bound = (st.st_dev as u64, st.st_ino as u64);
        let out = HandOver {
            path,
            dir,
            name,
            listener,
            bound,
            items: Vec::new(),
            allowed: Vec::new(),
            served: 0,
        };
        // Who may connect is decided by SO_PEERCRED, not by the file mode.
        // The mode of the very inode held (its O_PATH descriptor).
        proc.chmod(node.as_fd(), 0o666)?;
        rustix::net::listen(&out.listener, 16)?;
        Ok(out)
    }

    /// The socket's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The number of each fd kvcr holds for the hand-over, in its order
    /// (`None` for a message without one): the ready file publishes them
    /// in `obtain`, for an engine that takes them by `pidfd_getfd`.
    pub fn fds(&self) -> Vec<Option<i32>> {
        use std::os::fd::AsRawFd;
        self.items
            .iter()
            .map(|i| i.fd.as_ref().map(|f| f.as_raw_fd()))
            .collect()
    }

    /// What to hand over, and to whom (uids besides root and kvcr's own).
    pub fn load(&mut self, items: Vec<Item>, owners: Vec<u32>) {
        self.items = items;
        let me = rustix::process::geteuid().as_raw();
        self.allowed = [0, me].into_iter().chain(owners).collect();
        self.allowed.sort_unstable();
        self.allowed.dedup();
    }

    /// How many engines were given the fds so far.
    #[cfg(test)]
    pub fn served(&self) -> usize {
        self.served
    }

    /// Serves every engine waiting to connect, or waits `poll` when none
    /// is; a warning for each connection that could not be served.
    pub fn serve(&mut self, poll: Duration) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut any = false;
        loop {
            let accept = || rustix::net::accept_with(&self.listener, SocketFlags::CLOEXEC);
            match rustix::io::retry_on_intr(accept) {
                Ok(conn) => {
                    any = true;
                    if let Err(w) = self.serve_one(&conn) {
                        warnings.push(w);
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(e) => {
                    warnings.push(format!(
                        "hand-over socket {}: accept: {e}",
                        self.path.display()
                    ));
                    break;
                }
            }
        }
        if !any {
            std::thread::sleep(poll);
        }
        warnings
    }

    fn serve_one(&mut self, conn: &OwnedFd) -> Result<(), String> {
        let at = self.path.display();
        let _ = rustix::net::sockopt::set_socket_timeout(
            conn,
            rustix::net::sockopt::Timeout::Send,
            Some(Duration::from_secs(2)),
        );
        let cred = rustix::net::sockopt::socket_peercred(conn)
            .map_err(|e| format!("hand-over socket {at}: SO_PEERCRED: {e}"))?;
        let uid = cred.uid.as_raw();
        if !self.allowed.contains(&uid) {
            let why = format!(
                "{{\"error\": \"uid {uid} may not take these fds: only root, kvcr's user and the \
                 owners' users ({:?}) may\"}}",
                self.allowed
            );
            let _ = send(conn, why.as_bytes(), None);
            return Err(format!(
                "hand-over socket {at}: refused pid {} (uid {uid}): not root, kvcr's user or an \
                 owner's user",
                cred.pid.as_raw_nonzero()
            ));
        }
        for item in &self.items {
            send(conn, &item.message, item.fd.as_ref())
                .map_err(|e| format!("hand-over socket {at}: sending to uid {uid}: {e}"))?;
        }
        self.served += 1;
        Ok(())
    }

    /// Removes the socket file (if it is still the one this process bound)
    /// and closes every fd it held.
    pub fn remove(&mut self) {
        use rustix::fs::AtFlags;
        self.items.clear();
        if let Ok(st) = rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            #[allow(clippy::unnecessary_cast)]
            if (st.st_dev as u64, st.st_ino as u64) == self.bound {
                let _ = rustix::fs::unlinkat(&self.dir, &self.name, AtFlags::empty());
            }
        }
    }
}

impl Drop for HandOver {
    fn drop(&mut self) {
        self.remove();
    }
}

/// One message, with `fd` attached when there is one.
fn send(conn: &OwnedFd, message: &[u8], fd: Option<&OwnedFd>) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut anc = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = fd {
        fds = [fd.as_fd()];
        if !anc.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(io::Error::other("no room for the fd"));
        }
    }
    let n = rustix::net::sendmsg(
        conn,
        &[IoSlice::new(message)],
        &mut anc,
        SendFlags::NOSIGNAL,
    )?;
    if n != message.len() {
        return Err(io::Error::other(format!(
            "sent {n} of {} bytes",
            message.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::fs;
    use std::io::IoSliceMut;
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::PermissionsExt;

    fn receive(path: &Path) -> Vec<(String, Option<OwnedFd>)> {
        let s = rustix::net::socket(AddressFamily::UNIX, SocketType::SEQPACKET, None).unwrap();
        rustix::net::connect(&s, &SocketAddrUnix::new(path).unwrap()).unwrap();
        let mut out = Vec::new();
        loop {
            let mut buf = [0u8; 4096];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut anc = RecvAncillaryBuffer::new(&mut space);
            let r = rustix::net::recvmsg(
                &s,
                &mut [IoSliceMut::new(&mut buf)],
                &mut anc,
                RecvFlags::CMSG_CLOEXEC,
            )
            .unwrap();
            if r.bytes == 0 {
                return out;
            }
            let mut fd = None;
            for m in anc.drain() {
                if let RecvAncillaryMessage::ScmRights(mut fds) = m {
                    fd = fds.next();
                }
            }
            out.push((String::from_utf8_lossy(&buf[..r.bytes]).into_owned(), fd));
        }
    }

    /// The ready file `p` resolved as the import resolves it.
    fn out(p: &Path) -> crate::io::output::OutputFile {
        crate::io::output::OutputFile::resolve(
            Some(Path::new("/nonexistent-inventory")),
            p,
            "--ready-file",
            false,
        )
        .unwrap()
    }

    #[test]
    fn an_engine_receives_every_fd_and_the_socket_goes_with_the_hold() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready.json");
        let mut h = HandOver::prepare(&out(&ready)).unwrap();
        let canonical = dir.path().canonicalize().unwrap();
        assert_eq!(h.path(), canonical.join("ready.json.sock"));
        // A second hold on the same ready file is refused.
        let e = HandOver::prepare(&out(&ready)).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let mode = fs::symlink_metadata(h.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o666);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"the owner's bytes").unwrap();
        h.load(
            vec![
                Item {
                    message: br#"{"allocation":"kv-0"}"#.to_vec(),
                    fd: Some(OwnedFd::from(f)),
                },
                Item {
                    message: br#"{"allocation":"kv-1"}"#.to_vec(),
                    fd: None,
                },
            ],
            vec![],
        );
        let path = h.path().to_path_buf();
        let t = std::thread::spawn(move || receive(&path));
        let mut warnings = Vec::new();
        while !t.is_finished() {
            warnings.extend(h.serve(Duration::from_millis(5)));
        }
        let got = t.join().unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(h.served(), 1);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, r#"{"allocation":"kv-0"}"#);
        assert!(got[1].1.is_none());
        // The fd received is the very file kvcr held.
        let mut file = fs::File::from(got[0].1.as_ref().unwrap().try_clone().unwrap());
        file.rewind().unwrap();
        let mut s = String::new();
        file.read_to_string(&mut s).unwrap();
        assert_eq!(s, "the owner's bytes");
        drop(h);
        assert!(!dir.path().join("ready.json.sock").exists());
    }

    #[test]
    fn the_socket_path_is_absolute_and_names_the_directory_held() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        let ready = dir.path().join("sub/../ready.json");
        let h = HandOver::prepare(&out(&ready)).unwrap();
        assert!(h.path().is_absolute(), "{}", h.path().display());
        assert_eq!(
            h.path(),
            dir.path().canonicalize().unwrap().join("ready.json.sock")
        );
        assert!(!h.path().to_string_lossy().contains(".."));
    }

    #[test]
    fn a_path_too_long_for_a_socket_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("r".repeat(120));
        let e = HandOver::prepare(&out(&ready)).err().unwrap();
        assert!(
            e.to_string().contains("not a usable Unix socket path"),
            "{e}"
        );
        // A deep directory is not a limit: the socket is bound beneath the
        // held directory's descriptor.
        let deep = dir.path().join("d".repeat(100));
        fs::create_dir(&deep).unwrap();
        let h = HandOver::prepare(&out(&deep.join("ready.json"))).unwrap();
        assert!(deep.join("ready.json.sock").exists());
        drop(h);
        assert!(!deep.join("ready.json.sock").exists());
    }

    #[test]
    fn the_socket_is_bound_in_the_directory_that_was_checked() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        let inv = t.path().join("inv");
        fs::create_dir(&run).unwrap();
        fs::create_dir(&inv).unwrap();
        let ready = out(&run.join("ready.json"));
        // The directory swapped for a symlink into the inventory after the
        // check: the socket still goes to the directory that was checked.
        fs::rename(&run, t.path().join("checked")).unwrap();
        std::os::unix::fs::symlink(&inv, &run).unwrap();
        let h = HandOver::prepare(&ready).unwrap();
        assert!(t.path().join("checked/ready.json.sock").exists());
        assert_eq!(fs::read_dir(&inv).unwrap().count(), 0);
        drop(h);
        assert!(!t.path().join("checked/ready.json.sock").exists());
    }
}
