//! `kvcr examine FILE`: one descriptor decoded and checked on its own, like
//! `mdadm --examine` for one member: its fields, the digest, the bytes the
//! geometry needs against the bytes allocated, the handle kinds, and every
//! finding the descriptor earns by itself (KV006/7/8 parsing, KV101 own
//! rank, KV104 own sizes, KV111 a handle repeated within it, KV108 a
//! `created_unix_ms` in seconds: `crate::rules::own`, which the writers
//! refuse by too). Checks that
//! need the rest of the group or the node (KV102, KV103, KV106, KV110,
//! live mode) are the audit's.
//!
//! Exit 0 when the file passes its own checks, 1 when it does not, 2 when
//! it cannot be read as a regular file.

use crate::format::descriptor::{parse_descriptor, MAX_FILE_BYTES};
use crate::format::failure::Failure;
use crate::format::finding::{Code, Finding};
use crate::print::examine::{summary, Examined};
use crate::rules::{self, Candidate};
use std::path::Path;

/// The file's bytes, hard-link count and mode; `None` when it is larger
/// than a descriptor may be (KV004: not read).
fn read(path: &Path) -> Result<Option<(Vec<u8>, u64, u32)>, Failure> {
    use crate::io::safe_file::{read, Links, NotRead};
    let shown = crate::format::names::display_path(path);
    let hint =
        || Some("examine reads one regular descriptor file (symlinks are not followed)".into());
    // The one safe reader: no FIFO blocks, no device is opened, no symlink
    // is followed.
    match read(path, Links::Refuse, MAX_FILE_BYTES) {
        Ok((bytes, st)) => {
            // st_nlink is narrower than u64 on some architectures.
            #[allow(clippy::unnecessary_cast)]
            let nlink = st.st_nlink as u64;
            Ok(Some((bytes, nlink, st.st_mode)))
        }
        Err(NotRead::NotRegular(what)) => Err(Failure::usage(
            format!("{shown} is not a regular file ({what})"),
            hint(),
        )),
        Err(NotRead::TooLarge { .. }) => Ok(None),
        Err(NotRead::Io(e)) => Err(Failure::usage(format!("cannot open {shown}: {e}"), hint())),
    }
}

/// Decodes and checks `path`.
pub fn examine(path: &Path, now_ms: u64) -> Result<Examined, Failure> {
    let read = read(path)?;
    let shown = crate::format::names::display_path(path);
    let name = path.file_name().unwrap_or_default();
    let name_rank = crate::format::names::parse_rank_name(name).flatten();
    let Some((bytes, nlink, mode)) = read else {
        let f = Finding::reject(Code::KV004, "larger than 1 MiB; not read").at(shown.clone());
        return Ok(summary(shown, name_rank, None, "not checked", vec![f]));
    };
    let parsed = parse_descriptor(&bytes);
    let digest = if parsed.findings.iter().any(|f| f.code == Code::KV008) {
        "mismatch"
    } else if parsed.descriptor.is_some() {
        "ok"
    } else {
        "not checked"
    };
    // What this file earns by itself (KV103 for the other ranks does not
    // count): the one function the writers refuse by, too.
    let cand = Candidate {
        path: shown.clone(),
        raw_path: shown.as_bytes().to_vec(),
        name_rank: name_rank.or(parsed.descriptor.as_ref().map(|d| d.rank)),
        mode: Some(mode),
        ident: parsed.ident.clone(),
        descriptor: parsed.descriptor.clone(),
        findings: parsed
            .findings
            .iter()
            .cloned()
            .map(|f| f.at(shown.clone()))
            .chain(crate::io::inventory::reader::hard_links(nlink, &shown))
            .collect(),
    };
    let findings = rules::own::findings(cand, now_ms);
    Ok(summary(
        shown,
        name_rank,
        parsed.descriptor.as_ref(),
        digest,
        findings,
    ))
}
