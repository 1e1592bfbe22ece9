//! Stand-ins for `/proc`, shared by the unit tests of the trusted `/proc`
//! (src/io/node/tests_proc.rs, tests_proc_note.rs) and the integration
//! tests of the command (tests/it/audit/untrusted_inputs.rs, proc_note.rs).

use crate::BOOT_ID;
use std::path::{Path, PathBuf};

/// Lays out `dir` like procfs (a plain directory, never procfs), with
/// forged facts: this node's boot id replaced by [`BOOT_ID`], this
/// process's start time forged (777), a GPU listed under driver/nvidia.
pub fn forged_proc(dir: &Path) {
    std::fs::create_dir_all(dir.join("sys/kernel/random")).expect("mkdir");
    std::fs::write(
        dir.join("sys/kernel/random/boot_id"),
        format!("{BOOT_ID}\n"),
    )
    .expect("write");
    let me = std::process::id();
    std::fs::create_dir_all(dir.join(me.to_string())).expect("mkdir");
    let mut stat = format!("{me} (kvcr) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777");
    for _ in 0..30 {
        stat.push_str(" 0");
    }
    std::fs::write(dir.join(format!("{me}/stat")), stat + "\n").expect("write");
    std::fs::create_dir_all(dir.join("driver/nvidia/gpus/0000:01:00.0")).expect("mkdir");
    std::fs::write(
        dir.join("driver/nvidia/gpus/0000:01:00.0/information"),
        "Model: Forged\nGPU UUID: GPU-6a1f0c2e-0000-4000-8000-000000000000\n",
    )
    .expect("write");
}

/// The note for a `KVCR_PROC_ROOT` hook naming `dir`, as the operator sees
/// it (with the prefix the command adds), the path escaped as the terminal
/// sanitizer does.
pub fn hook_note(dir: &Path) -> String {
    format!(
        "kvcr: note: /proc is read from KVCR_PROC_ROOT={}, a test hook\n",
        dir.to_string_lossy()
            .replace('\u{1b}', "\\x1b")
            .replace('\u{202e}', "\\u{202e}")
    )
}

/// Creates a directory (not procfs) in `parent` whose name holds terminal
/// controls, and returns it.
pub fn hostile_root(parent: &Path) -> PathBuf {
    let dir = parent.join("proc\u{1b}[31m\u{202e}");
    std::fs::create_dir(&dir).expect("mkdir");
    dir
}
