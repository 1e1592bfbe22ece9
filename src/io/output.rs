//! Where and how kvcr writes: the one writer of stdout ([`emit`]: a closed
//! pipe ends quietly) and the one writer of stderr ([`to_stderr`],
//! [`err_line`], [`print_note`]: a stderr that is closed or a pipe whose
//! reader has gone loses the text, never the exit status), and the check
//! every output file goes through, so that nothing is ever written inside
//! the inventory. Nothing else in `src/` prints (tests/it/architecture.rs).

use crate::format::failure::Failure;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Set once anything was written to stdout by [`emit`]: a failure after
/// that prints no second (error) document.
static EMITTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`emit`] has written to stdout in this process.
pub fn emitted() -> bool {
    EMITTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Writes to stdout; a closed pipe (`kvcr audit | head -1`) ends quietly.
pub fn emit(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    EMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut lock = io::BufWriter::new(io::stdout().lock());
    match f(&mut lock).and_then(|_| lock.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(Failure::new(
            crate::format::exit::USAGE,
            format!("cannot write the report: {e}"),
        )),
        _ => Ok(()),
    }
}

/// Prints `kvcr: note: {note}` on stderr, once per process: a note the
/// dispatcher already gave (the `KVCR_PROC_ROOT` hook, announced by every
/// command that reads files) is not repeated when the node probe returns it
/// again.
pub(crate) fn print_note(note: &str) {
    static PRINTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut printed = PRINTED.lock().unwrap_or_else(|e| e.into_inner());
    if !printed.iter().any(|p| p == note) {
        err_line(&format!("kvcr: note: {note}"));
        printed.push(note.to_string());
    }
}

/// Refuses an output path (a ready file, a metrics file) inside the
/// inventory `root` (already resolved): kvcr never writes there, and its own staging file would be
/// read back as a torn write. `what` names the flag. The path's directory is
/// resolved (symlinks followed) and compared with the resolved root
/// component by component, on raw bytes.
pub fn refuse_inside_root(root: &Path, path: &Path, what: &str) -> Result<(), Failure> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A directory that does not exist yet cannot be inside the inventory
    // unless an ancestor is: resolve the deepest existing ancestor.
    let mut probe = dir.as_path();
    let resolved = loop {
        match std::fs::canonicalize(probe) {
            Ok(p) => break Some(p),
            Err(_) => match probe.parent() {
                Some(up) if !up.as_os_str().is_empty() => probe = up,
                _ => break std::env::current_dir().ok(),
            },
        }
    };
    // By identity too: the directory (or an ancestor of it) may be one of
    // the inventory's directories seen through another path, such as a
    // bind mount of the inventory elsewhere. Compared as (device, inode).
    let inside_by_identity = resolved.as_deref().is_some_and(|d| {
        use std::os::unix::fs::MetadataExt;
        let mut ids = std::collections::HashSet::new();
        for a in d.ancestors() {
            if let Ok(m) = std::fs::metadata(a) {
                ids.insert((m.dev(), m.ino()));
            }
        }
        walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_dir())
            .any(|e| {
                e.metadata()
                    .is_ok_and(|m| ids.contains(&(m.dev(), m.ino())))
            })
    });
    if inside_by_identity || resolved.is_some_and(|d| d.starts_with(root)) {
        return Err(Failure::usage(
            format!(
                "{what} {} is inside the inventory {}; kvcr never writes inside the inventory",
                crate::format::names::display_path(path),
                crate::format::names::display_path(root)
            ),
            Some(format!(
                "choose a {what} path outside {}",
                crate::format::names::display_path(root)
            )),
        ));
    }
    Ok(())
}

/// Writes to stderr through `f`: the one writer of stderr. A write that
/// fails (a pipe whose reader has gone, EPIPE; a stderr that is closed or
/// not writable, EBADF, which the standard library already reads as
/// written; a full disk) loses the text and nothing else: no panic (where
/// `eprintln!` would panic, exit 101), no error, and the command's exit
/// status stays what its verdict says.
pub fn to_stderr(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
    let mut err = io::stderr().lock();
    let _ = f(&mut err).and_then(|()| err.flush());
}

/// Stderr as a writer for several writes in a row, with [`to_stderr`]'s
/// rule: a write that fails is dropped (and reported as written), so
/// nothing after it fails either.
pub fn stderr() -> impl Write {
    struct Lossy(io::StderrLock<'static>);
    impl Write for Lossy {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.0.write_all(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            let _ = self.0.flush();
            Ok(())
        }
    }
    Lossy(io::stderr().lock())
}

/// One line on stderr (the newline is added), through [`to_stderr`].
pub fn err_line(line: &str) {
    to_stderr(|w| {
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")
    });
}

/// Bytes on stdout exactly as given (clap's help and version), through the
/// same rule as [`emit`] but failing never: a closed pipe loses them.
pub fn to_stdout(bytes: &[u8]) {
    EMITTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut out = io::stdout().lock();
    let _ = out.write_all(bytes).and_then(|()| out.flush());
}
