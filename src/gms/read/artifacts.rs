//! The reads of one artifact: a lease ring, recovery metadata, a
//! superseded file.

use super::*;

/// One read of a lease ring: the header, then (for the current layout,
/// when the file holds every record) every record, streamed.
pub fn read_lease(o: &Opened) -> Result<LeaseRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut hb = [0u8; 64];
    if pread_full(&o.fd, &mut hb, 0)? < 64 {
        return Ok(LeaseRead {
            size,
            header: None,
            scan: None,
        });
    }
    let h = format::lease_header(&hb);
    let mut read = LeaseRead {
        size,
        header: Some(h),
        scan: None,
    };
    if !LeaseRead::decodable(&h) || size < h.expected_size() {
        return Ok(read);
    }
    let mut scan = LeaseScan::default();
    let mut digest = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let total = u64::from(h.total_blocks);
    let mut block = 0u64;
    while block < total {
        let want = ((total - block) * 16).min(CHUNK as u64) as usize;
        let off = format::LEASE_HEADER + block * 16;
        let n = pread_full(&o.fd, &mut buf[..want], off)?;
        if n < want {
            // The file shrank while read: the second read's size tells.
            read.size = size_of(&o.fd)?;
            return Ok(read);
        }
        digest.update(&buf[..n]);
        for rec in buf[..n].chunks_exact(16) {
            scan.push(block, &format::lease_record(rec));
            block += 1;
        }
    }
    scan.digest = digest.finalize().into();
    read.scan = Some(scan);
    Ok(read)
}

/// One read of recovery metadata: the header, then (when a block count
/// fits the size) records 1..num_blocks-1, streamed.
pub fn read_recovery(
    o: &Opened,
    ask: &crate::gms::rules::RecoveryAsk,
) -> Result<RecoveryRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut hb = [0u8; 80];
    if pread_full(&o.fd, &mut hb, 0)? < 80 {
        return Ok(RecoveryRead {
            size,
            header: None,
            scan: None,
        });
    }
    let mut read = RecoveryRead {
        size,
        header: Some(format::recovery_header(&hb)),
        scan: None,
    };
    let Some(n) = crate::gms::rules::recovery_blocks(size, ask) else {
        return Ok(read);
    };
    let mut scan = RecoveryScan {
        num_blocks: n,
        ..RecoveryScan::default()
    };
    let per = CHUNK / format::RECOVERY_RECORD as usize;
    let mut buf = vec![0u8; per * format::RECOVERY_RECORD as usize];
    let mut block = 1u64;
    while block < n {
        let count = (n - block).min(per as u64) as usize;
        let want = count * format::RECOVERY_RECORD as usize;
        let off = format::RECOVERY_HEADER + block * format::RECOVERY_RECORD;
        if pread_full(&o.fd, &mut buf[..want], off)? < want {
            read.size = size_of(&o.fd)?;
            return Ok(read);
        }
        for rec in buf[..want].chunks_exact(format::RECOVERY_RECORD as usize) {
            scan.push(block, &format::recovery_record(rec));
            block += 1;
        }
    }
    read.scan = Some(scan);
    Ok(read)
}

/// One read of a superseded file: its header, and for a snapshot every
/// record's length, to see whether they fill the file.
pub fn read_superseded(o: &Opened, s: Superseded, at: &Loc) -> Result<SupersededRead, Errno> {
    let size = size_of(&o.fd)?;
    let mut head = [0u8; Superseded::HEAD];
    let n = pread_full(&o.fd, &mut head, 0)?;
    let head = &head[..n];
    let mut exact = false;
    let expected_size = format::superseded_expected_size(s, head);
    if let Some((lid, count)) = format::snapshot_header(head) {
        if let Some(mut walk) = format::SnapshotWalk::new(s, lid, count) {
            let mut buf = vec![0u8; CHUNK];
            let mut off = 14u64;
            loop {
                let k = pread_full(&o.fd, &mut buf, off)?;
                if k == 0 {
                    break;
                }
                walk.feed(&buf[..k]);
                off += k as u64;
                if walk.trailing > 0 {
                    break;
                }
            }
            exact = walk.exact();
        }
    }
    Ok(SupersededRead {
        format: s,
        size,
        expected_size,
        exact,
        beside: beside(at, s),
    })
}

/// The files beside a superseded file that belong to it, by name only
/// (bytes, listed beneath the directory it was read in; shown escaped): a
/// DYNKVIX1 store's `.rank<R>` answers, `.status.jsonl` and `.tmp`; a
/// snapshot's `.gen`, `.del` and `.tmp`.
pub(super) fn beside(at: &Loc, s: Superseded) -> Vec<String> {
    let Ok(d) = open_ro(Some(at.dir.as_fd()), Path::new("."), OFlags::DIRECTORY) else {
        return Vec::new();
    };
    let Ok(entries) = list(&d) else {
        return Vec::new();
    };
    let mut prefix = at.name.as_bytes().to_vec();
    prefix.push(b'.');
    let mut out: Vec<Vec<u8>> = entries
        .into_iter()
        .map(OsString::into_vec)
        .filter(|n| {
            n.strip_prefix(prefix.as_slice())
                .is_some_and(|rest| match s {
                    Superseded::Dynkvix1 => {
                        rest == b"status.jsonl"
                            || rest == b"tmp"
                            || rest
                                .strip_prefix(b"rank")
                                .is_some_and(|r| !r.is_empty() && r.iter().all(u8::is_ascii_digit))
                    }
                    Superseded::Gmskvix1 | Superseded::Gmskvix2 => {
                        matches!(rest, b"gen" | b"del" | b"tmp")
                    }
                    Superseded::Gmskvgn1 => rest == b"tmp",
                })
        })
        .collect();
    out.sort();
    out.iter()
        .map(|n| crate::format::names::display_bytes(n))
        .collect()
}
