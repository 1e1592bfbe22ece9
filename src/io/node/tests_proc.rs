//! Issue #19 item 7: a `/proc` that is not procfs is never trusted: not a
//! plain directory laid out like it, not one whose entries point into the
//! real one, not a tmpfs; a forged `self/fd` link is never followed. The
//! command's end of it is tests/it/audit/untrusted_inputs.rs
//! (`proc_forged_root_audit_refuses_every_descriptor_kv005`).

use crate::io::node::{Fact, NodeProbe, ProcProbe};
use crate::io::procfs::ProcFs;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A plain directory laid out like procfs, with forged facts
/// (the test kit's `proc::forged_proc`).
fn forged_proc() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    crate::testkit::proc::forged_proc(t.path());
    t
}

fn not_checked_because_not_procfs<T: std::fmt::Debug>(f: &Fact<T>) {
    match f {
        Fact::NotChecked(why) => assert!(why.contains("is not procfs"), "{why}"),
        Fact::Known(v) => panic!("forged fact trusted: {v:?}"),
    }
}

#[test]
fn proc_plain_directory_is_not_trusted() {
    let fake = forged_proc();
    let proc = ProcFs::open(fake.path());
    let why = proc.untrusted().expect("a plain directory is not procfs");
    assert!(why.contains("is not procfs"), "{why}");
    assert!(why.contains("0x9fa0"), "names procfs's magic: {why}");
    let probe = ProcProbe(&proc);
    not_checked_because_not_procfs(&probe.boot_id());
    // Our own process runs (the kernel says so), its forged start time is
    // not believed.
    not_checked_because_not_procfs(&probe.start_ticks(std::process::id() as i32));
    // A process that does not exist is known gone from the kernel (a null
    // signal), not from the forged files.
    assert_eq!(probe.start_ticks(i32::MAX - 1), Fact::Known(None));
    // The forged GPU is never listed.
    if let Fact::Known(g) = probe.gpus() {
        assert!(g.on_node.is_none(), "{g:?}");
        assert!(!format!("{g:?}").contains("6a1f0c2e"), "{g:?}");
    }
}

#[test]
fn proc_symlinks_into_the_real_proc_do_not_make_it_trusted() {
    // The forged root is not procfs even when its entries point into the
    // real one: the check is on the root that is held, once.
    let t = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/proc/sys", t.path().join("sys")).unwrap();
    std::os::unix::fs::symlink("/proc/self", t.path().join("self")).unwrap();
    let proc = ProcFs::open(t.path());
    assert!(proc.untrusted().is_some());
    not_checked_because_not_procfs(&ProcProbe(&proc).boot_id());
    let (_f, path_fd) = o_path_of_a_file();
    let e = crate::io::safe_file::reopen_for_reading_in(&proc, &path_fd).unwrap_err();
    assert!(e.to_string().contains("is not procfs"), "{e}");
    // A root that is itself a symlink to /proc is not opened (O_NOFOLLOW).
    let link = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/proc", link.path().join("proc")).unwrap();
    let proc = ProcFs::open(&link.path().join("proc"));
    assert!(proc.untrusted().is_some());
}

#[test]
fn proc_a_tmpfs_is_not_trusted() {
    // The attack of the issue: a tmpfs on /proc. /dev/shm is a tmpfs on
    // most Linux systems; elsewhere the case is skipped.
    let shm = Path::new("/dev/shm");
    let Ok(st) = rustix::fs::statfs(shm) else {
        return;
    };
    #[allow(clippy::unnecessary_cast)]
    if st.f_type as i64 != 0x0102_1994 {
        eprintln!("/dev/shm is not a tmpfs here: skipped");
        return;
    }
    let proc = ProcFs::open(shm);
    let why = proc.untrusted().expect("tmpfs is not procfs");
    assert!(why.contains("0x1021994"), "names the file system: {why}");
    not_checked_because_not_procfs(&ProcProbe(&proc).boot_id());
}

#[test]
fn proc_the_real_proc_is_trusted() {
    let proc = ProcFs::open(Path::new("/proc"));
    assert_eq!(proc.untrusted(), None);
    let real = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(
        ProcProbe(&proc).boot_id(),
        Fact::Known(uuid::Uuid::parse_str(real.trim()).unwrap())
    );
    assert!(matches!(
        ProcProbe(&proc).start_ticks(std::process::id() as i32),
        Fact::Known(Some(_))
    ));
    let (_f, path_fd) = o_path_of_a_file();
    let mut file = crate::io::safe_file::reopen_for_reading_in(&proc, &path_fd).unwrap();
    let mut s = String::new();
    std::io::Read::read_to_string(&mut file, &mut s).unwrap();
    assert_eq!(s, "payload");
}

/// A regular file with content and an O_PATH fd naming it.
fn o_path_of_a_file() -> (tempfile::NamedTempFile, std::os::fd::OwnedFd) {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), "payload").unwrap();
    let fd = rustix::fs::open(
        f.path(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    (f, fd)
}

#[test]
fn proc_fake_fd_dir_symlink_to_a_fifo_is_never_followed() {
    // self/fd/N is a plain symlink to a FIFO: on a real procfs the entry
    // is the magic link to the O_PATH fd's inode; here following it would
    // open the FIFO instead of the regular file classified.
    let fake = forged_proc();
    let fifo = fake.path().join("trap.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let (_f, path_fd) = o_path_of_a_file();
    std::fs::create_dir_all(fake.path().join("self/fd")).unwrap();
    std::os::unix::fs::symlink(
        &fifo,
        fake.path().join(format!("self/fd/{}", path_fd.as_raw_fd())),
    )
    .unwrap();
    let proc = ProcFs::open(fake.path());
    let e = crate::io::safe_file::reopen_for_reading_in(&proc, &path_fd).unwrap_err();
    assert!(e.to_string().contains("is not procfs"), "{e}");
    assert!(e.to_string().contains("race-free"), "{e}");
    // No reader holds the FIFO: opening its write end without blocking
    // fails with ENXIO.
    let w = rustix::fs::open(
        &fifo,
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    );
    assert_eq!(w.err(), Some(rustix::io::Errno::NXIO));
}
