//! An inventory for the fuzz targets that judge, in memory or on disk.
//!
//! In memory ([`audit_mem`]): the files handed as bytes to kvcr's public
//! library API `kvcr_audit::api::audit_files`, which judges them as
//! `kvcr audit --format json` judges an inventory holding exactly those
//! files (mode 0600, directories 0700, as an owner writes them): the same
//! walk order, parser and verdict core, without a file system in the loop
//! (thousands of executions a second instead of about fifty).
//!
//! On disk ([`Dir`], [`audit`]): files written under a fresh private
//! directory and audited through `kvcr_audit::api::audit`. The targets run it on
//! a fixed sample of inputs ([`sampled`]) and require the same judgement
//! both ways, so the fast route is held to the real one.

use kvcr_audit::api::{self, AuditOptions};
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Each audit reads on this thread alone (`KVCR_THREADS=1`): an input is a
/// few small files, and starting a pool per execution would dominate.
fn one_thread() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // The fuzzer runs one input at a time on this thread: nothing reads the
    // environment meanwhile.
    ONCE.call_once(|| std::env::set_var("KVCR_THREADS", "1"));
}

/// A directory removed when dropped.
pub struct Dir(pub PathBuf);

impl Dir {
    /// A new, empty, private directory under the temp directory.
    pub fn new() -> Dir {
        one_thread();
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("kvcr-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::DirBuilder::new().mode(0o700).create(&p).expect("mkdir");
        Dir(p)
    }

    /// Writes `bytes` at `rel` (plain names separated by `/`), mode 0600.
    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let p = self.0.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(parent)
                .expect("mkdir");
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
            .expect("create");
        f.write_all(bytes).expect("write");
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The audit report of `root` as JSON, its exit status checked against
/// the document's.
pub fn audit(root: &Path, o: &AuditOptions) -> Value {
    let doc = api::audit(root, o).expect("an inventory kvcr can read is audited");
    let v: Value = serde_json::from_str(doc.as_json()).expect("the report is JSON");
    assert_eq!(v["exit_status"], doc.exit_status());
    v
}

/// The root the in-memory audits name (never opened).
pub const MEM_ROOT: &str = "/fuzz/inventory";

/// The audit report of `files` (root-relative paths and bytes) through
/// `kvcr_audit::api::audit_files`, its exit status checked against the
/// document's.
pub fn audit_mem(files: &[(String, &[u8])], o: &AuditOptions) -> Value {
    one_thread();
    let files: Vec<(&Path, &[u8])> = files.iter().map(|(p, b)| (Path::new(p), *b)).collect();
    let doc = api::audit_files(Path::new(MEM_ROOT), &files, o)
        .expect("descriptor paths in memory are audited");
    let v: Value = serde_json::from_str(doc.as_json()).expect("the report is JSON");
    assert_eq!(v["exit_status"], doc.exit_status());
    v
}

/// Whether this input is also judged on disk (one in 64, chosen by its
/// bytes: the same input always is or is not).
pub fn sampled(data: &[u8]) -> bool {
    let h = data
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    h % 64 == 0
}

/// Asserts that audit `b` judges as audit `a` did, allowing for the
/// clock: a report writes ages in words (KV108's `age 31736474 s`, `sealed
/// 367d 7h ago`), so two audits a second apart may differ in them alone.
/// When `a` and `b` differ, the first audit is run once more (`again`, later
/// than `b`): the clock's step that separated `a` from `b` is then behind
/// both, so `b` and the new report must agree. (The profile target's first
/// 10-minute run stopped on such a step, at 3.5 million executions:
/// `age 31736474 s` in memory, `age 31736475 s` on disk.)
pub fn assert_same(a: &Value, b: &Value, again: impl FnOnce() -> Value, what: &str) {
    let (ja, jb) = (judgement(a), judgement(b));
    if ja == jb {
        return;
    }
    let jc = judgement(&again());
    assert_eq!(jb, jc, "{what} (and before: {ja})");
}

/// What two audits of the same files (on disk and in memory, or given in
/// two orders) must agree on: the test kit's `judgement` (the groups, the
/// files, the summary and the exit status, with the report's root and the
/// clock left out).
pub fn judgement(v: &Value) -> String {
    kvcr_testkit::judgement(v)
}
