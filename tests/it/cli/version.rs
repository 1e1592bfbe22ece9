//! `kvcr -V` is the bare version; `kvcr --version` names the commit, the
//! build date and the CUDA headers (build.rs).

use crate::util::kvcr;

#[test]
fn short_and_long_version() {
    let short = kvcr().arg("-V").output().unwrap();
    assert_eq!(
        String::from_utf8(short.stdout).unwrap(),
        format!("kvcr {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(kvcr_audit::VERSION, env!("CARGO_PKG_VERSION"));
    let long = kvcr().arg("--version").output().unwrap();
    assert!(long.status.success());
    let text = String::from_utf8(long.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("kvcr {}", env!("CARGO_PKG_VERSION")));
    // The commit is this checkout's HEAD when git can tell, else "unknown".
    let head = std::process::Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    let commit = lines[1].strip_prefix("commit: ").expect(&text);
    match head {
        Some(h) if std::env::var("KVCR_BUILD_COMMIT").is_err() => assert_eq!(commit, h),
        _ => assert!(!commit.is_empty()),
    }
    let date = lines[2].strip_prefix("built: ").expect(&text);
    let b = date.as_bytes();
    assert!(
        b.len() == 10
            && b[4] == b'-'
            && b[7] == b'-'
            && date.replace('-', "").bytes().all(|c| c.is_ascii_digit()),
        "{date}"
    );
    assert!(lines[3].starts_with("cuda: CUDA 12.8 headers"), "{text}");
}
