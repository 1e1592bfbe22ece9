//! The finding codes of `kvcr pools` (docs/format.md §16.6): KV401–KV499,
//! each with its name, severity and `kvcr explain` text, in one table. The
//! codes are the pool reader's own vocabulary: no other command emits them,
//! and no code of another command means one of these.

use crate::format::finding::Severity;

/// One finding code of `kvcr pools`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Code(pub u16);

/// One row of [`TABLE`].
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub code: Code,
    pub name: &'static str,
    pub severity: Severity,
    /// What the finding means (KVCR's behaviour, with its source line).
    pub meaning: &'static str,
    /// The safe next step.
    pub action: &'static str,
}

const fn r(n: u16, name: &'static str, meaning: &'static str, action: &'static str) -> Spec {
    Spec {
        code: Code(n),
        name,
        severity: Severity::Reject,
        meaning,
        action,
    }
}

const fn n(n: u16, name: &'static str, meaning: &'static str, action: &'static str) -> Spec {
    Spec {
        severity: Severity::Notice,
        ..r(n, name, meaning, action)
    }
}

pub const KV401: Code = Code(401);
pub const KV402: Code = Code(402);
pub const KV403: Code = Code(403);
pub const KV404: Code = Code(404);
pub const KV405: Code = Code(405);
pub const KV406: Code = Code(406);
pub const KV407: Code = Code(407);
pub const KV408: Code = Code(408);
pub const KV409: Code = Code(409);
pub const KV410: Code = Code(410);
pub const KV411: Code = Code(411);
pub const KV412: Code = Code(412);
pub const KV413: Code = Code(413);
pub const KV414: Code = Code(414);
pub const KV415: Code = Code(415);
pub const KV416: Code = Code(416);
pub const KV417: Code = Code(417);
pub const KV418: Code = Code(418);
pub const KV419: Code = Code(419);
pub const KV420: Code = Code(420);
pub const KV421: Code = Code(421);
pub const KV422: Code = Code(422);
pub const KV423: Code = Code(423);
pub const KV424: Code = Code(424);
pub const KV425: Code = Code(425);
pub const KV426: Code = Code(426);
pub const KV427: Code = Code(427);
pub const KV428: Code = Code(428);
pub const KV429: Code = Code(429);

/// Every code, in order; the order is also the root-cause order (the first
/// rejecting finding in it is a pool's cause).
pub const TABLE: [Spec; 29] = [
    r(402, "pool-symlink",
      "A pool name is a symbolic link. KVCR's purge skips it and its attach fails with ELOOP \
          (kvcr/memory.py:33, :88): no claim of it ever succeeds. kvcr never follows it.",
      "remove the link (it is no pool KVCR made); name the real directory"),
    r(403, "pool-not-regular",
      "A pool name is not a regular file (a directory, FIFO, socket or device). KVCR's purge \
          leaves it and no attach accepts it (kvcr/memory.py:98). kvcr never opens it.",
      "remove it; KVCR never makes one"),
    r(428, "pool-layout-unknown",
      "The file is shorter than the journal KVCR writes, or its journal_bytes is not what KVCR \
          accepts (> 4096, a multiple of 4096, below the mapping: kvcr/memory.py:291-299): kvcr \
          does not decode it on a guess.",
      "check --journal-bytes (KVCR's CLI uses 104857600) and that the file is a KVCR 0.1.1 pool"),
    r(404, "pool-mode",
      "The pool file's mode is not 0600. KVCR's attach refuses it (\"must have mode 0600\", \
          kvcr/memory.py:100-101): every claim of this pool fails.",
      "find who changed the mode; restart the service so that it makes a new pool (kvcr never \
          chmods)"),
    r(406, "pool-size",
      "The file is smaller than the mapping KVCR grants (0 bytes: a start killed before \
          ftruncate). KVCR's attach refuses it (\"smaller than the grant describes\", \
          kvcr/memory.py:106-110); a Guard already mapping it faults on the missing pages.",
      "restart the service: a new start purges the unheld file and makes a new one"),
    r(409, "journal-cursors",
      "The journal's cursors are invalid in both reads: not multiples of 8, consumed above \
          published, or published more than the ring's capacity ahead \
          (kvcr/recovery_journal.py:289-294). KVCR's reader invalidates the journal; the lease \
          runs without recovery.",
      "nothing on disk to repair: the next claim resets the journal; if a primary runs, it is \
          running cold"),
    r(410, "journal-frame",
      "A pending journal frame breaks KVCR's framing (invalid key size, unknown type, exceeds \
          the published bytes, non-zero padding: kvcr/recovery_journal.py:255-266). The Guard \
          invalidates the journal and the lease is cold.",
      "the next claim resets the journal; report the file to whoever runs the primary"),
    r(411, "journal-payload",
      "A pending frame's payload is no valid recovery record, or names a pool the layout does \
          not have. A live Guard that mirrors it fails, and a failed Guard stops the whole \
          service (kvcr/guard.py:950-974, kvcr/kvcr_service.py:452-463).",
      "expect the service to stop; check --pool-layouts before acting, a wrong layout gives the \
          same result"),
    r(414, "handback-digest",
      "The handback region is complete but its digest does not match sha256(terms ‖ body) under \
          the terms given. KVCR refuses every claim of this pool until the service restarts \
          (kvcr/guard.py:216-218). A wrong --compatibility-digest, --pool-sizes-gb, \
          --pool-layouts, --journal-bytes or identity gives exactly this result.",
      "first check the options against the service's command line and the claimant's \
          pool_layouts; if they are right, restart the service (the region is then purged with \
          the file)"),
    r(416, "handback-malformed",
      "The handback digest verifies but a frame or a record in it is malformed \
          (kvcr/recovery_journal.py:686-703, :329-341). KVCR refuses the claim.",
      "restart the service so that the pool is purged and remade"),
    r(417, "slots",
      "The records name slots KVCR would refuse when it adopts the table: a G2 slot out of its \
          pool's range or named twice, a G3 slot out of range or twice, G3 records without G3 \
          configured, or with G3 a G2 residency of several slots or a part label \
          (kvcr/local_dram.py:230-265, kvcr/local_disk.py:179-193, kvcr/core.py:365-380). The \
          next primary fails to start, or a promoting Guard stops the service.",
      "check --pool-sizes-gb, --pool-layouts and the G3 options first; if right, restart the \
          service"),
    r(425, "g3-file",
      "A G3 file named by --g3-paths is not usable as KVCR needs it: not a regular file, a size \
          that is neither 0 nor capacity_bytes_per_file, or absent/empty while records name its \
          slots (KVCR would recreate it zero-filled and serve zeros as hits: \
          kvcr/local_disk.py:626-651).",
      "do not start a primary on these G3 paths until the file is restored or the records are \
          gone"),
    r(422, "group-missing-index",
      "The group lacks a pool_<i> below its highest index or below --guard-count. With a live \
          service, claims of that index fail (attach ENOENT); offline it is a notice.",
      "restart the service so that it recreates every index"),
    n(401, "pool-foreign-name",
      "A kvcr-* entry whose name is not a service's kvcr-pool_<i>-<32 hex>: either KVCR's purge \
          pattern kvcr-.+-[0-9a-f]{32} does not match it (never purged: its memory is never \
          reclaimed) or its pool id is not pool_<i> (purged when unheld, but not this service's) \
          (kvcr/kvcr_service.py:63, :148-175).",
      "find who made it; remove an unmatched one by hand once nothing holds it"),
    n(405, "pool-owner",
      "The pool file's owner differs from the other pools of its group: the purge's O_RDWR open \
          may fail, so it is never reclaimed.",
      "check which user runs the service"),
    n(407, "pool-sparse",
      "The file has fewer allocated blocks than its mapping: KVCR fallocates at creation \
          (kvcr/memory.py:256-265), so this is a copy or an interrupted start.",
      "nothing for KVCR; for a copy, give --st-dev/--st-ino of the original to check its digest"),
    n(408, "journal-invalid",
      "The journal's invalid flag is set (or a header byte KVCR never writes is not zero). \
          Recovery is off for this lease: if the primary dies, promotion is cold. The pending \
          frames are listed, never as the pool's content.",
      "nothing to repair: the next claim re-arms the journal"),
    n(412, "journal-unread",
      "The journal has pending frames nobody will consume: the pool is leaked or an orphan.",
      "nothing: the frames are one lease's changes, never the pool's content"),
    n(413, "handback-torn",
      "The handback region is torn (under 40 bytes, length 0, or a length past the file): KVCR \
          discards it at the next claim and the next primary starts cold \
          (kvcr/recovery_journal.py:686-711).",
      "nothing: expected after a crash while writing it"),
    n(415, "handback-unchecked",
      "A handback region is present but its digest cannot be checked: the terms \
          (--compatibility-digest, --pool-sizes-gb, --pool-layouts) are not all given. Only its \
          structure is checked.",
      "give the service's --compatibility-digest and --pool-sizes-gb and the claimant's \
          --pool-layouts"),
    n(418, "handback-trailing",
      "Bytes follow the handback region's declared length; KVCR ignores them.",
      "nothing"),
    n(419, "pool-leaked",
      "The pool is held only by processes other than a listening service: the service is gone \
          and a primary still maps the pool. A new start leaves it and creates a new generation \
          beside it.",
      "restart the primary against a running service; the old file is freed at the first service \
          start after it exits"),
    n(420, "pool-orphan",
      "Nobody holds the pool (the whole lock table was read from the initial PID namespace): the \
          next service start on this directory deletes it. An orphan is leaked RAM, never a \
          recoverable inventory: KVCR never adopts an old file.",
      "start the service on this directory to reclaim it, or leave it to the next start"),
    n(421, "liveness-not-checked",
      "Whether the pool is held could not be decided: /proc/locks cannot show holders from \
          another PID namespace, could not be read, or was longer than kvcr reads. Never called \
          an orphan on that basis.",
      "run kvcr pools --live in the service's PID namespace (or the host's), as root"),
    n(423, "group-sizes",
      "The mapping sizes of the group's pools differ: they are not one service's pools (a pool \
          with a handback region is longer as a file; that is not counted).",
      "give --pool-sizes-gb to judge each file against the service's geometry"),
    n(424, "group-generations",
      "Two generations of one pool_<i> in one directory. Only the holders tell which is current: \
          the listening service's is, the other is leaked or an orphan.",
      "run with --live to see which is whose"),
    n(426, "g3-notice",
      "A G3 file's state KVCR forgives: a mode other than 0600 (reset at the next start), a \
          symbolic link (KVCR follows it; kvcr does not), or a lock held by a process other than \
          a live primary.",
      "nothing required; check the named holder"),
    n(429, "pool-dir-symlink",
      "The pool directory was named through a symbolic link. KVCR resolves --pool-dir with \
          Path.resolve() (kvcr/kvcr_service.py:83), so the service's pools live in the target; \
          kvcr reads the target and says so. A pool name that is a link is KV402.",
      "name the resolved directory in scripts, so that what is checked is what KVCR uses"),
    n(427, "pool-changed",
      "The pool changed between the two reads (cursors, header, size or handback region): it is \
          in use. Conditions are judged only where both reads agree.",
      "nothing: a live journal moves"),
];

impl Code {
    /// This code's row.
    pub fn spec(self) -> &'static Spec {
        TABLE
            .iter()
            .find(|s| s.code == self)
            .expect("every Code constant has a row")
    }
    pub fn name(self) -> &'static str {
        self.spec().name
    }
    pub fn severity(self) -> Severity {
        self.spec().severity
    }
    /// `KV4nn`.
    pub fn id(self) -> String {
        format!("KV{}", self.0)
    }
    /// Accepts `KV4nn`, `kv4nn`, `4nn` or the name.
    pub fn parse(s: &str) -> Option<Code> {
        let s = s.trim();
        let digits = s
            .strip_prefix("KV")
            .or_else(|| s.strip_prefix("kv"))
            .unwrap_or(s);
        if let Ok(n) = digits.parse::<u16>() {
            return TABLE.iter().find(|r| r.code.0 == n).map(|r| r.code);
        }
        TABLE
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(s))
            .map(|r| r.code)
    }
    /// Place in the root-cause order.
    pub fn rank(self) -> usize {
        TABLE
            .iter()
            .position(|s| s.code == self)
            .unwrap_or(usize::MAX)
    }
}

/// `kvcr explain KV4nn`.
pub fn explain(code: Code) -> String {
    let s = code.spec();
    let sev = match s.severity {
        Severity::Reject => "reject",
        Severity::Notice => "notice",
    };
    format!(
        "{} {} ({sev}; kvcr pools, docs/format.md §16.6)\n\n{}\n\nNext step: {}.\n",
        code.id(),
        s.name,
        s.meaning,
        s.action
    )
}

/// The list `kvcr explain` prints after the other codes.
pub fn list() -> String {
    TABLE
        .iter()
        .map(|s| format!("{}  {}\n", s.code.id(), s.name))
        .collect()
}
