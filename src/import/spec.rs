//! The plain values `kvcr import` is asked for, below both the settings
//! that resolve them and the import that acts on them (a leaf: it names no
//! other module of the crate): the [`Mode`], the [`Step`] names, the
//! test-only backend choice [`BackendSpec`] and the import log's [`Target`].
//! `import` re-exports each where it always was.

use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Audit and plan; no CUDA call.
    DryRun,
    /// Import, verify, release in reverse (the default).
    Trial,
    /// Import, verify, publish the ready file, wait for SIGINT/SIGTERM, release.
    Hold,
    /// The library's readiness gate (docs/format.md §13.3): audit, prove
    /// and plan for an engine that imports with its own driver; no CUDA call.
    Gate,
}

/// One step of the import, as reported when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Find the GPU by UUID and retain its primary context.
    Device,
    /// `cuIpcOpenMemHandle` (cuda_ipc) or `cuMemImportFromShareableHandle`
    /// (fabric, posix_fd; for posix_fd also pidfd_open + pidfd_getfd).
    Import,
    /// `cuMemAddressReserve` (granularity from `cuMemGetAllocationGranularity`).
    Reserve,
    /// `cuMemMap`.
    Map,
    /// `cuMemSetAccess` (read-only unless `--map-read-write`).
    SetAccess,
    /// Two allocations resolve to one memory at overlapping ranges, or
    /// across ranks (docs/format.md §8.10): the same IPC pointer, the same
    /// imported handle, or two POSIX fds of one file. No driver call.
    VerifyDistinct,
    /// Once mapped, the identities that exist only then (the driver's
    /// `CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID`, an IPC mapping's range) show
    /// one memory at overlapping ranges or in two ranks (docs/format.md
    /// §8.10). No call that changes anything.
    VerifyDistinctMapped,
    /// VMM: `cuMemGetAllocationPropertiesFromHandle` says pinned device
    /// memory on the planned device (docs/format.md §8.4).
    VerifyLocation,
    /// `cuMemGetAddressRange` + `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` of the
    /// rank's first and last byte.
    Verify,
    /// The allocation's `content` check (docs/format.md §3.6): the sampled
    /// bytes read through kvcr's own mapping (`cuMemcpyDtoH_v2`) against
    /// the descriptor's `sha256`.
    VerifyContent,
    /// `--hold`: publishing the ready file.
    ReadyFile,
    /// Releasing a ledger entry.
    Release,
}

impl Step {
    /// The steps a backend can be told to fail at (test-only fault injection).
    pub const BACKEND: [Step; 6] = [
        Step::Device,
        Step::Import,
        Step::Reserve,
        Step::Map,
        Step::SetAccess,
        Step::Verify,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::Device => "device",
            Step::Import => "import",
            Step::Reserve => "reserve",
            Step::Map => "map",
            Step::SetAccess => "set-access",
            Step::VerifyDistinct => "verify-distinct",
            Step::VerifyDistinctMapped => "verify-distinct-mapped",
            Step::VerifyLocation => "verify-location",
            Step::Verify => "verify",
            Step::VerifyContent => "verify-content",
            Step::ReadyFile => "ready-file",
            Step::Release => "release",
        }
    }

    pub fn parse(s: &str) -> Option<Step> {
        [
            Step::Device,
            Step::Import,
            Step::Reserve,
            Step::Map,
            Step::SetAccess,
            Step::VerifyDistinct,
            Step::VerifyDistinctMapped,
            Step::VerifyLocation,
            Step::Verify,
            Step::VerifyContent,
            Step::ReadyFile,
            Step::Release,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The default log file.
pub const DEFAULT_PATH: &str = "/var/log/kvcr/import.jsonl";
/// The variable that names the log file.
pub const ENV: &str = "KVCR_IMPORT_LOG";
/// The journal's native socket.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";
/// A test hook: another socket path for the journal record.
pub const JOURNAL_ENV: &str = "KVCR_JOURNAL_SOCKET";

/// Where the records go (resolved with the other settings).
#[derive(Clone, Debug)]
pub struct Target {
    pub file: PathBuf,
    pub journal: PathBuf,
    /// `KVCR_IMPORT_LOG` named the file (not the default).
    pub file_named: bool,
    /// `KVCR_JOURNAL_SOCKET` named the socket (not the system's journal).
    pub journal_named: bool,
}

impl Target {
    /// From the values of `KVCR_IMPORT_LOG` and `KVCR_JOURNAL_SOCKET`
    /// (`None`: unset or empty, the defaults), which the command's settings
    /// read (src/commands/settings.rs, the one place that reads kvcr's
    /// environment).
    pub fn new(file: Option<PathBuf>, journal: Option<PathBuf>) -> Target {
        Target {
            file_named: file.is_some(),
            journal_named: journal.is_some(),
            file: file.unwrap_or_else(|| PathBuf::from(DEFAULT_PATH)),
            journal: journal.unwrap_or_else(|| PathBuf::from(JOURNAL_SOCKET)),
        }
    }

    /// Where the records of an import with this backend go; `None`: nowhere.
    /// A simulated import (`sim`) imported nothing, so it writes no record
    /// into the system's logs: none at all unless `KVCR_IMPORT_LOG` names a
    /// file, and to the journal only at a socket `KVCR_JOURNAL_SOCKET` names
    /// (an empty path: no journal). docs/import.md "The import log".
    pub fn for_backend(&self, sim: bool) -> Option<Target> {
        if !sim {
            return Some(self.clone());
        }
        if !self.file_named {
            return None;
        }
        let mut t = self.clone();
        if !t.journal_named {
            t.journal = PathBuf::new();
        }
        Some(t)
    }
}

/// The faults `KVCR_IMPORT_BACKEND` asks for (test-only); the import's
/// `sim::Faults` counts calls against them.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Fail the Nth (1-based) call of this step, or of any step when the
    /// step is `None`. Steps are the [`Step::BACKEND`] calls.
    pub fail: Option<(Option<Step>, usize)>,
    /// Fail the Nth (1-based) release.
    pub fail_release: Option<usize>,
    /// Raise `flag` after the Nth successful acquisition (device, import,
    /// reserve, map).
    pub interrupt_after: Option<usize>,
    /// Sleep this long before every step and release.
    pub delay: Duration,
    /// The flag `interrupt_after` raises; the caller checks it.
    pub flag: Arc<AtomicBool>,
}

/// Which backend `kvcr import` uses, from `KVCR_IMPORT_BACKEND` (test-only).
#[derive(Clone, Debug, Default)]
pub struct BackendSpec {
    pub sim: bool,
    pub faults: FaultPlan,
    /// Sim: append the event log here.
    pub log: Option<PathBuf>,
    pub lie_size: Option<u64>,
    pub lie_device: bool,
    pub lie_location: bool,
    pub lie_content: bool,
}

impl BackendSpec {
    /// The environment variable that selects the backend.
    pub const ENV: &'static str = "KVCR_IMPORT_BACKEND";

    /// `cuda` (the default) or `sim`, optionally followed by `:` and
    /// comma-separated options: `fail=STEP@N` (the Nth call of STEP fails;
    /// STEP is device, import, reserve, map, set-access or verify),
    /// `fail=N` (the Nth step overall fails), `fail-release=N`,
    /// `interrupt-after=N` (act as if SIGINT arrived after N acquisitions),
    /// `delay-ms=N` (before every step and release), and for `sim` only
    /// `log=PATH`, `lie-size=N`, `lie-device`, `lie-location` (VMM memory
    /// on another device), `lie-content` (other bytes than described).
    pub fn parse(s: &str) -> Result<BackendSpec, String> {
        let (kind, opts) = match s.split_once(':') {
            Some((k, o)) => (k, o),
            None => (s, ""),
        };
        let mut spec = BackendSpec {
            sim: match kind {
                "sim" => true,
                "cuda" | "" => false,
                other => return Err(format!("unknown backend {other:?} (cuda or sim)")),
            },
            ..BackendSpec::default()
        };
        let num = |k: &str, v: &str| -> Result<usize, String> {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{k}={v:?}: expected a number ≥ 1"))
        };
        for opt in opts.split(',').filter(|o| !o.is_empty()) {
            let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
            match k {
                "fail" => {
                    spec.faults.fail = Some(match v.split_once('@') {
                        Some((st, n)) => {
                            let step = Step::parse(st)
                                .filter(|s| {
                                    Step::BACKEND.contains(s)
                                        || [Step::VerifyLocation, Step::VerifyContent].contains(s)
                                })
                                .ok_or_else(|| format!("fail={v:?}: unknown step {st:?}"))?;
                            (Some(step), num(k, n)?)
                        }
                        None => (None, num(k, v)?),
                    })
                }
                "fail-release" => spec.faults.fail_release = Some(num(k, v)?),
                "interrupt-after" => spec.faults.interrupt_after = Some(num(k, v)?),
                "delay-ms" => {
                    let ms: u64 = v.parse().map_err(|_| format!("delay-ms={v:?}"))?;
                    spec.faults.delay = Duration::from_millis(ms);
                }
                "log" if spec.sim && !v.is_empty() => spec.log = Some(PathBuf::from(v)),
                "lie-size" if spec.sim => {
                    spec.lie_size = Some(v.parse().map_err(|_| format!("lie-size={v:?}"))?)
                }
                "lie-device" if spec.sim => spec.lie_device = true,
                "lie-location" if spec.sim => spec.lie_location = true,
                "lie-content" if spec.sim => spec.lie_content = true,
                _ => return Err(format!("unknown option {opt:?} for backend {kind:?}")),
            }
        }
        Ok(spec)
    }

    /// True when nothing but the plain CUDA backend was asked for.
    pub fn is_plain_cuda(&self) -> bool {
        !self.sim
            && self.faults.fail.is_none()
            && self.faults.fail_release.is_none()
            && self.faults.interrupt_after.is_none()
            && self.faults.delay.is_zero()
    }

    /// The interrupt flag the injected faults raise.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.faults.flag.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn parses_specs() {
        let s = BackendSpec::parse("sim").unwrap();
        assert!(s.sim && s.faults.fail.is_none());
        assert!(BackendSpec::parse("cuda").unwrap().is_plain_cuda());
        let s = BackendSpec::parse(
            "sim:fail=map@5,fail-release=2,interrupt-after=4,delay-ms=10,log=/tmp/x,lie-device",
        )
        .unwrap();
        assert_eq!(s.faults.fail, Some((Some(Step::Map), 5)));
        assert_eq!(s.faults.fail_release, Some(2));
        assert_eq!(s.faults.interrupt_after, Some(4));
        assert_eq!(s.faults.delay, Duration::from_millis(10));
        assert_eq!(s.log, Some(PathBuf::from("/tmp/x")));
        assert!(s.lie_device);
        assert_eq!(
            BackendSpec::parse("sim:fail=7").unwrap().faults.fail,
            Some((None, 7))
        );
        let c = BackendSpec::parse("cuda:fail=set-access@1").unwrap();
        assert!(!c.sim && !c.is_plain_cuda());
        for bad in [
            "gpu",
            "sim:fail=teleport@1",
            "sim:fail=map@0",
            "sim:fail=release@1",
            "sim:bogus",
            "cuda:log=/tmp/x",
            "sim:fail-release=x",
        ] {
            assert!(BackendSpec::parse(bad).is_err(), "{bad}");
        }
    }

    /// A simulated import writes nothing into the system's logs: no record
    /// unless `KVCR_IMPORT_LOG` named a file, and the journal only at a
    /// socket `KVCR_JOURNAL_SOCKET` named; a real import goes to both.
    #[test]
    fn a_simulated_import_records_only_where_it_is_told() {
        let t = |file: Option<&str>, journal: Option<&str>| Target {
            file: PathBuf::from(file.unwrap_or(DEFAULT_PATH)),
            journal: PathBuf::from(journal.unwrap_or(JOURNAL_SOCKET)),
            file_named: file.is_some(),
            journal_named: journal.is_some(),
        };
        let real = t(None, None).for_backend(false).unwrap();
        assert_eq!(real.file, Path::new(DEFAULT_PATH));
        assert_eq!(real.journal, Path::new(JOURNAL_SOCKET));
        assert!(t(None, None).for_backend(true).is_none());
        assert!(t(None, Some("/tmp/j.sock")).for_backend(true).is_none());
        let named = t(Some("/tmp/i.jsonl"), None).for_backend(true).unwrap();
        assert_eq!(named.file, Path::new("/tmp/i.jsonl"));
        assert_eq!(named.journal, Path::new(""));
        assert!(!named.journal.exists(), "an empty path names no journal");
        let both = t(Some("/tmp/i.jsonl"), Some("/tmp/j.sock"))
            .for_backend(true)
            .unwrap();
        assert_eq!(both.journal, Path::new("/tmp/j.sock"));
    }
}
