//! A test that cannot run says why, and `.ci/run` turns a skip for want of
//! something CI provides into a failure (`KVCR_TEST_REQUIRE`, tests/it/util):
//! every skip goes through `util::missing` (a tool or root is missing) or
//! `util::skip_fact` (a fact of the machine), never a bare print.

use crate::util::{repo, skip_unless_required};

#[test]
fn a_missing_tool_fails_when_required_and_skips_otherwise() {
    skip_unless_required(false, "needs a tool this machine lacks");
    let failed = std::panic::catch_unwind(|| skip_unless_required(true, "needs pdsh"));
    let why = failed.expect_err("a required skip must fail");
    let text = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.contains("KVCR_TEST_REQUIRE") && text.contains("needs pdsh"),
        "{text}"
    );
}

#[test]
fn no_test_skips_by_printing_alone() {
    let dir = repo().join("tests/it");
    let mut bare = Vec::new();
    let mut scanned = 0;
    for e in walkdir::WalkDir::new(&dir) {
        let p = e.unwrap().into_path();
        // util is where missing and skip_fact print; skips.rs names them.
        if p.extension().is_none_or(|x| x != "rs")
            || p.ends_with("skips.rs")
            || p.starts_with(dir.join("util"))
        {
            continue;
        }
        scanned += 1;
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, l) in text.lines().enumerate() {
            let printed = l.contains("eprintln!(") || l.contains("println!(");
            let next = text.lines().nth(i + 1).unwrap_or_default();
            if (printed && (l.contains("\"skipped") || l.contains("\"SKIP")))
                || (printed && l.trim_end().ends_with('(') && next.contains("\"SKIP"))
            {
                bare.push(format!("{}:{}: {}", p.display(), i + 1, l.trim()));
            }
        }
    }
    // Every file of every subject folder, not the top level alone.
    assert!(scanned >= 60, "only {scanned} test files scanned");
    assert!(
        bare.is_empty(),
        "skips that print only (use util::missing or util::skip_fact):\n{}",
        bare.join("\n")
    );
}
