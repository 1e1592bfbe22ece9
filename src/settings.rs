//! Parse → resolve → run. The command line (clap's types, [`crate::cli`]),
//! the environment and the deployment profile become one settings value
//! per command here, before any work starts; commands and the library below
//! them see only these values (uv's `GlobalSettings::resolve`).

use crate::cli::{AuditArgs, ImportArgs, InventoryArgs, OutputArgs};
use crate::error::Failure;
use crate::import_spec::{BackendSpec, Mode, Target};
use crate::profile::{parse_profile, Profile, ProfileError};
use crate::report::Printer;
use crate::verdict::Expectations;
use std::path::{Path, PathBuf};

/// The inventory root when neither ROOT nor `$KVCR_INVENTORY` names one:
/// where the Debian package's units keep it (docs/format.md §2.1).
pub const DEFAULT_ROOT: &str = "/var/lib/kvcr/inventory";

/// `KVCR_NODE_FACTS` when set and not empty.
fn node_facts_from_env() -> Option<PathBuf> {
    std::env::var_os(crate::node::facts_file::ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}

/// The environment variable that declares the producer's user when
/// `--producer-user` is not given (docs/format.md §2.4).
pub const PRODUCER_USER_ENV: &str = "KVCR_PRODUCER_USER";

/// `--producer-user`, else `$KVCR_PRODUCER_USER`, as a uid. An empty
/// variable declares none (an EnvironmentFile's `KVCR_PRODUCER_USER=`); a
/// value that names no user is exit 2 naming the variable, so a value from
/// the environment is never mistaken for one given on the command line.
fn producer_uid(flag: Option<u32>) -> Result<Option<u32>, Failure> {
    if flag.is_some() {
        return Ok(flag);
    }
    let Some(v) = std::env::var_os(PRODUCER_USER_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let hint = || {
        Some(format!(
            "set {PRODUCER_USER_ENV} (in /etc/default/kvcr for the packaged units) to the \
             producer's user name or uid, or leave it empty to declare none"
        ))
    };
    let s = v.to_str().ok_or_else(|| {
        Failure::usage(
            format!("{PRODUCER_USER_ENV}={v:?}: not UTF-8, so it names no user"),
            hint(),
        )
    })?;
    crate::inventory::parse_user(s)
        .map(Some)
        .map_err(|e| Failure::usage(format!("{PRODUCER_USER_ENV}={s:?}: {e}"), hint()))
}

/// What every command that reads an inventory was asked to judge.
#[derive(Clone, Debug, Default)]
pub struct Inventory {
    /// ROOT or `$KVCR_INVENTORY`, as given ([`Inventory::root`] resolves it).
    pub root: Option<PathBuf>,
    /// `--profile` or `$KVCR_PROFILE`, as given (the report names it).
    pub profile_path: Option<PathBuf>,
    /// The profile came from `$KVCR_PROFILE`, not `--profile`.
    pub profile_from_env: bool,
    /// The loaded profile and the flags that override it.
    pub expect: Expectations,
    /// `KVCR_THREADS` (see `crate::pipeline`).
    pub threads: usize,
    /// `KVCR_NODE_FACTS`: a file describing the node, in place of this one
    /// (the test and demo hook of `crate::node::facts_file`).
    pub node_facts: Option<PathBuf>,
    /// `--producer-user` or `$KVCR_PRODUCER_USER`, as a uid: whose files
    /// are trusted besides root's and this user's (docs/format.md §2.4).
    pub producer_uid: Option<u32>,
}

impl Inventory {
    /// Loads the profile and checks it against `--engine`.
    pub fn resolve(a: &InventoryArgs) -> Result<Inventory, Failure> {
        let profile = a
            .profile
            .as_deref()
            .map(|p| load_profile(p, a.profile_from_env))
            .transpose()?;
        let mut inv = Inventory::resolve_loaded(a, profile)?;
        inv.producer_uid = producer_uid(a.producer_user)?;
        Ok(inv)
    }

    /// [`Inventory::resolve`] with the profile already loaded (the library
    /// takes one as JSON text too, `crate::api`).
    pub fn resolve_loaded(
        a: &InventoryArgs,
        profile: Option<Profile>,
    ) -> Result<Inventory, Failure> {
        if let (Some(p), Some(e)) = (&profile, &a.engine) {
            if p.engine_id != *e {
                return Err(Failure::usage(
                    format!(
                        "--engine {e:?} differs from the profile's engine_id {:?}",
                        p.engine_id
                    ),
                    Some("drop --engine, or use the profile written for that group".to_string()),
                ));
            }
        }
        Ok(Inventory {
            root: a.root.clone(),
            profile_path: a.profile.clone(),
            profile_from_env: a.profile.is_some() && a.profile_from_env,
            expect: Expectations {
                engine: a.engine.clone(),
                profile,
                min_epoch: a.min_epoch,
                max_age_s: a.max_age,
                local_ranks: a.local_ranks.clone(),
                incarnation: a.incarnation,
                strict: false,
            },
            threads: crate::pipeline::threads_from_env(),
            node_facts: node_facts_from_env(),
            producer_uid: a.producer_user,
        })
    }

    /// `kvcr profile`: the root, `--engine`, `--incarnation` and
    /// `--producer-user`; no profile.
    pub fn for_profile(a: &crate::cli::ProfileArgs) -> Result<Inventory, Failure> {
        let mut inv = Inventory {
            root: a.root.clone(),
            threads: crate::pipeline::threads_from_env(),
            node_facts: node_facts_from_env(),
            producer_uid: producer_uid(a.producer_user)?,
            ..Inventory::default()
        };
        inv.expect.engine = a.engine.clone();
        inv.expect.incarnation = a.incarnation;
        Ok(inv)
    }

    /// The resolved root: ROOT, else `$KVCR_INVENTORY`, else
    /// [`DEFAULT_ROOT`] (exit 2 when it cannot be used).
    pub fn root(&self) -> Result<PathBuf, Failure> {
        let given = self.root.is_some();
        let root = self.root.as_deref().unwrap_or(Path::new(DEFAULT_ROOT));
        crate::inventory::resolve_root(root).map_err(|e| {
            let denied = crate::error::is_denied(&e);
            let hint = if denied {
                Some(crate::error::access_hint(root))
            } else if !given {
                Some(format!(
                    "no ROOT and no KVCR_INVENTORY, so kvcr used the default {DEFAULT_ROOT} \
                        (where the package keeps it); pass ROOT or set KVCR_INVENTORY"
                ))
            } else {
                None
            };
            let f = Failure::usage(e.to_string(), hint);
            if denied {
                f.of_kind(crate::error::Kind::PermissionDenied)
            } else {
                f
            }
        })
    }
}

pub(crate) fn load_profile(path: &Path, from_env: bool) -> Result<Profile, Failure> {
    // A profile named only by the environment says so in every message.
    let shown = if from_env {
        format!("{} (from $KVCR_PROFILE)", path.display())
    } else {
        path.display().to_string()
    };
    // A profile is small; 1 MiB like a descriptor.
    let bytes = crate::input::read_regular(path, 1 << 20)
        .map_err(|e| Failure::usage(format!("cannot read profile {shown}: {e}"), None))?;
    parse_profile(&bytes).map_err(|e| match e {
        ProfileError::LocalRanks(e) => Failure::usage(
            format!("bad profile {shown}: local_ranks: {e}"),
            Some("write ranks as 0-7 or 0-3,8-11".to_string()),
        ),
        e => Failure::usage(
            format!("bad profile {shown}: {e}"),
            Some("see docs/format.md §4 / README 'Deployment profile' for the format".to_string()),
        ),
    })
}

/// Every output decision, from the flags and the terminal/environment.
pub fn printer(o: &OutputArgs) -> Printer {
    Printer::from_env(o.format, o.color, o.quiet, o.verbose)
}

/// `kvcr audit`.
pub struct Audit {
    pub inventory: Inventory,
    pub printer: Printer,
    /// `--live`: judge against this node.
    pub live: bool,
    /// `--strict`: a live fact not checked rejects its rank.
    pub strict: bool,
}

impl Audit {
    pub fn resolve(a: &AuditArgs) -> Result<Audit, Failure> {
        Ok(Audit {
            printer: printer(&a.output),
            inventory: Inventory::resolve(&a.inventory)?,
            live: a.live,
            strict: a.strict,
        })
    }
}

/// `kvcr import`.
pub struct Import {
    pub inventory: Inventory,
    pub printer: Printer,
    pub mode: Mode,
    /// `--hold --ready-file PATH`.
    pub ready_file: Option<PathBuf>,
    /// `--fleet-report`: proof of the whole group for a local part.
    pub fleet_report: Option<PathBuf>,
    /// `--max-report-age`, seconds.
    pub max_report_age_s: u64,
    /// `--map-read-write`.
    pub map_read_write: bool,
    /// `KVCR_IMPORT_BACKEND` (test-only; CUDA by default).
    pub backend: BackendSpec,
    /// `KVCR_IMPORT_LOG` (and the journal socket): where the record goes.
    pub import_log: Target,
}

impl Import {
    pub fn resolve(a: &ImportArgs) -> Result<Import, Failure> {
        let printer = printer(&a.output.output());
        let backend = match std::env::var(BackendSpec::ENV) {
            Ok(s) if !s.is_empty() => BackendSpec::parse(&s).map_err(|e| {
                Failure::usage(
                    format!("{}={s:?}: {e}", BackendSpec::ENV),
                    Some("unset it: it exists for kvcr's own tests".into()),
                )
            })?,
            _ => BackendSpec::default(),
        };
        Ok(Import {
            inventory: Inventory::resolve(&a.inventory)?,
            printer,
            mode: if a.dry_run {
                Mode::DryRun
            } else if a.hold {
                Mode::Hold
            } else {
                Mode::Trial
            },
            ready_file: a.ready_file.clone(),
            fleet_report: a.fleet_report.clone(),
            max_report_age_s: a.max_report_age,
            map_read_write: a.map_read_write,
            backend,
            import_log: Target::from_env(),
        })
    }
}
