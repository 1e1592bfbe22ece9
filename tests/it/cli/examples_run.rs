//! Every example in the man pages, the README and docs/ runs, with the exit
//! status it claims (issue #21 item 13).
//!
//! - Man pages: the committed `man/*.1` EXAMPLES are parsed back from the
//!   roff; each says "(exit N)" and runs on a *healthy node*: the world below
//!   with its inventory at `/var/lib/kvcr/inventory` (accept-tp4, owner-private
//!   modes), this node described by `fixtures/live/node-match.json`, and the
//!   simulated GPU backend, so a trial import or a hold really runs.
//! - README.md and docs/*.md: every command line of a `sh` block (and the
//!   `$ ` lines of a plain block, the `kvcr` lines of a `yaml` block) runs
//!   on *this machine* (no GPU driver, no node facts unless the line sets
//!   them), in a fresh world per block, line after line; [`EXPECTED`] holds
//!   the status each line claims. A line the docs gain without an entry, or
//!   an entry no doc has any more, fails the test.
//!
//! The world is a temporary directory: a copy of `fixtures/`, and the
//! absolute paths the examples name (`/var/lib/kvcr/inventory`,
//! `/etc/kvcr/profile.json`, `/run/kvcr`, `/var/lib/prometheus/node-exporter`,
//! `/tmp/inv`, `~`) mapped into it. Nothing outside it is written.

use crate::util::fleet::{private, Fleet};
use crate::util::{bin, repo, test_env};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a README/docs line claims.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Runs, exits with this status.
    Status(i32),
    /// Exits with this status where no CUDA driver is installed (the line
    /// says so); skipped on a machine with libcuda.
    NoDriver(i32),
    /// Not run, and why (a build, a package install, a cluster, a pager).
    Skip(&'static str),
}
use Expect::*;

/// (file, the line as written, what it claims). A block with shell control
/// flow (`case`, `for`) is one entry, keyed by its first line.
const EXPECTED: &[(&str, &str, Expect)] = &[
    // GMS (README "GMS"): this machine runs no GMS, so nothing is found.
    (
        "README.md",
        "kvcr gms                                   # where GMS puts them, from GMS's own \
        variables",
        Status(0),
    ),
    (
        "README.md",
        "kvcr gms --live --format json              # one kvcr.gms-report/v1 document; lease \
        owners checked",
        Status(0),
    ),
    (
        "README.md",
        "GMS_KV_LEASE_SHM_DIR=/run/kvcr/ kvcr gms   # the rings of another directory",
        Status(0),
    ),
    (
        "README.md",
        "kvcr explain KV232                         # a writer of the predecessor cohort still \
        runs",
        Status(0),
    ),
    (
        "README.md",
        "pip install maturin && (cd python && maturin build --release --locked) && pip \
        install \
        python/target/wheels/kvcr_audit-*.whl",
        Skip(
            "builds or installs the Python package (.ci/run \
        does, in a fresh venv)",
        ),
    ),
    (
        "docs/bench.md",
        "cargo build --release --locked --bin kvcr",
        Skip("a build (.ci/run)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/offb-mp KVCR=target/release/kvcr THREADS=1 benches/offload.sh 1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/b KVCR=new BASE=old THREADS=1 ROUNDS=2 benches/offload.sh 1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/b KVCR=old BASE=new THREADS=1 ROUNDS=1 benches/offload.sh 1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/b KVCR=new BASE=old THREADS=2 ROUNDS=1 benches/offload.sh 1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/b KVCR=target/release/kvcr THREADS=1 ROUNDS=3 benches/offload.sh \
        1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "BENCH_DIR=/tmp/b KVCR=target/release/kvcr THREADS=2 ROUNDS=3 benches/offload.sh \
        1000000 mp",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "(cd python && maturin develop --release --locked) && pip install \
        pytest",
        Skip("builds or installs the Python package (.ci/run does, in a fresh venv)"),
    ),
    (
        "docs/bench.md",
        "python3 python/bench/audit_inprocess.py --runs \
        300",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/python.md",
        "pip install \
        maturin",
        Skip("builds or installs the Python package (.ci/run does, in a fresh venv)"),
    ),
    (
        "docs/python.md",
        "(cd python && maturin build --release --locked) && pip install \
        python/target/wheels/kvcr_audit-*.whl",
        Skip(
            "builds or installs the Python package (.ci/run \
        does, in a fresh venv)",
        ),
    ),
    (
        "docs/python.md",
        "# or, into the active virtual environment: (cd python && maturin develop \
        --release --locked)",
        Skip("a comment"),
    ),
    (
        "docs/python.md",
        "cargo build --locked                      # the CLI the tests compare \
        with",
        Skip("a build (.ci/run)"),
    ),
    (
        "docs/python.md",
        "cd python && maturin develop --locked && pip install pytest mypy \
        jsonschema",
        Skip("builds or installs the Python package (.ci/run does, in a fresh venv)"),
    ),
    (
        "docs/python.md",
        "python -m pytest                           # parity, seal, gate, \
        producer, stubs",
        Skip("the Python test suite (.ci/run runs it)"),
    ),
    (
        "docs/python.md",
        "python bench/audit_inprocess.py            # release builds: \
        docs/bench.md",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "README.md",
        "cargo run -q -- audit fixtures/accept-superseded/inventory   # audit a shipped \
        inventory: accepted, exit 0",
        Status(0),
    ),
    (
        "README.md",
        "cargo test --locked                                          # the whole test \
        suite; no GPU or CUDA driver needed",
        Skip("the test suite itself"),
    ),
    (
        "README.md",
        "$ COLUMNS=80 kvcr audit fixtures/kv104-geometry/inventory",
        Status(1),
    ),
    (
        "README.md",
        "kvcr examine fixtures/kv104-geometry/inventory/rank-2.json",
        Status(1),
    ),
    (
        "README.md",
        "# The shipped fixture describes node gpu-node-17: describe that node, then \
        plan",
        Skip("a comment"),
    ),
    (
        "README.md",
        "# (exit 2 like the real import: no --profile; the plan says \
        so).",
        Skip("a comment"),
    ),
    (
        "README.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json cargo run -q -- import --dry-run \
        fixtures/accept-posix-fd/inventory",
        Status(2),
    ),
    (
        "README.md",
        "# The real import needs the declared profile, and a driver: without libcuda \
        this exits 2 naming it.",
        Skip("a comment"),
    ),
    (
        "README.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json cargo run -q -- import --profile \
        fixtures/accept-posix-fd/profile.json fixtures/accept-posix-fd/inventory",
        NoDriver(2),
    ),
    (
        "docs/bench.md",
        "benches/audit.sh            # ~1 min; inventories are kept in /tmp/kvcr-bench \
        for the next run",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "docs/bench.md",
        "cargo bench --bench parse   # per-descriptor parse/digest \
        cost",
        Skip("a benchmark (docs/bench.md)"),
    ),
    (
        "README.md",
        "kvcr audit /var/lib/kvcr/inventory --format prometheus              # \
        exposition text on stdout",
        Status(0),
    ),
    (
        "README.md",
        "kvcr audit /var/lib/kvcr/inventory -q --textfile \
        /var/lib/prometheus/node-exporter/kvcr.prom",
        Status(0),
    ),
    (
        "README.md",
        "kvcr audit fixtures/accept-tp4/inventory --format json > \
        kvcr-report.json",
        Status(0),
    ),
    (
        "README.md",
        "kvcr seal fixtures/accept-tp4/inventory/rank-1.json   # write the digest, \
        atomically (here: already sealed)",
        Status(0),
    ),
    (
        "README.md",
        "mkdir -p /tmp/inv && cp fixtures/accept-tp4/inventory/rank-1.json /tmp/inv/ && \
        sed -i 's/\"epoch\": 1,/\"epoch\": 2,/' /tmp/inv/rank-1.json",
        Status(0),
    ),
    (
        "README.md",
        "kvcr seal /tmp/inv/rank-1.json                 # edited after sealing: refused, \
        KV008 naming both digests (exit 1)",
        Status(1),
    ),
    (
        "README.md",
        "kvcr seal --reseal-edited /tmp/inv/rank-1.json # an edit you checked: sealed as \
        it is now",
        Status(0),
    ),
    (
        "README.md",
        "kvcr digest fixtures/accept-tp4/inventory/rank-1.json # print the canonical \
        digest (sha256:...)",
        Status(0),
    ),
    (
        "README.md",
        "source <(kvcr completions bash)              # also zsh, fish, elvish, \
        powershell",
        Status(0),
    ),
    (
        "README.md",
        "man -l man/kvcr.1                            # kvcr-audit.1, kvcr-import.1, \
        ... beside it",
        Skip("a pager (tests/it/cli/man.rs checks the pages)"),
    ),
    (
        "README.md",
        "cargo install --locked --path .             # ~/.cargo/bin/kvcr, a release \
        build",
        Skip("a release build (.ci/run)"),
    ),
    (
        "README.md",
        "cargo deb --locked                          # \
        target/debian/kvcr-audit_<version>_<arch>.deb for this machine (cargo install \
        cargo-deb)",
        Skip("a release build (.ci/run)"),
    ),
    (
        "README.md",
        "tar -xzf kvcr-audit-0.2.0-x86_64-linux-gnu.tar.gz                # kvcr, man/, \
        completions/, README, licences",
        Skip("a release download (scripts/dist-check.sh unpacks dist/'s and runs it)"),
    ),
    (
        "README.md",
        "sudo dpkg -i kvcr-audit_0.2.0-1_amd64.deb                         # /usr/bin/kvcr, \
        man pages, completions, systemd timer",
        Skip("installs a package (scripts/deb-check.sh, into a scratch root)"),
    ),
    (
        "README.md",
        "pip install kvcr_audit-0.2.0-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl  # \
        Python package kvcr_audit, CPython >= 3.9",
        Skip("installs a release download (scripts/dist-check.sh, in a fresh venv)"),
    ),
    (
        "README.md",
        "kvcr --version                              # version, git commit, build date, \
        CUDA headers",
        Status(0),
    ),
    (
        "docs/bench.md",
        "benches/audit.sh [DIR] [-- options of \
        benches/bench.py]",
        Skip("a usage line"),
    ),
    (
        "docs/bench.md",
        "benches/audit.sh /tmp/kvcr-bench -- --runs 9 --scale-groups 0 \
        --latency-runs 500",
        Skip("a benchmark"),
    ),
    (
        "docs/bench.md",
        "benches/merge_rss.sh [BASELINE_KVCR] [-- --sizes-mib 8,32,127 --shape \
        groups|files --runs 3]",
        Skip("a usage line"),
    ),
    (
        "docs/ci.md",
        "kvcr seal --reseal-edited fixtures/my-case/inventory/rank-*.json && kvcr \
        audit fixtures/my-case/inventory",
        Status(0),
    ),
    (
        "docs/ci.md",
        "kvcr audit fixtures/accept-tp4/inventory --format json > \
        kvcr-report.json",
        Status(0),
    ),
    (
        "docs/ci.md",
        "source <(kvcr completions bash)                        # bash, this \
        shell",
        Status(0),
    ),
    (
        "docs/ci.md",
        "kvcr completions zsh > \"${fpath[1]}/_kvcr\"             # zsh",
        Status(0),
    ),
    (
        "docs/ci.md",
        "kvcr completions fish > ~/.config/fish/completions/kvcr.fish",
        Status(0),
    ),
    (
        "docs/ci.md",
        "man -l man/kvcr.1                                      # from a source \
        tree",
        Skip("a pager (tests/it/cli/man.rs checks the pages)"),
    ),
    (
        "docs/ci.md",
        "sudo install -m 644 man/*.1 /usr/local/share/man/man1/ # \
        system-wide",
        Skip("installs system-wide"),
    ),
    (
        "docs/import.md",
        "# The fixture describes node gpu-node-17; describe that node instead of \
        this one:",
        Skip("a comment"),
    ),
    (
        "docs/import.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr import --dry-run \
        fixtures/accept-tp4/inventory",
        Status(2),
    ),
    (
        "docs/import.md",
        "cp -r fixtures/accept-tp4/inventory /tmp/inv && chmod 700 /tmp/inv && \
        chmod 600 /tmp/inv/*",
        Status(0),
    ),
    (
        "docs/import.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr import --dry-run \
        /tmp/inv",
        Status(2),
    ),
    (
        "docs/json.md",
        "kvcr audit --format json /var/lib/kvcr/inventory > report.json",
        Status(0),
    ),
    (
        "docs/live.md",
        "cp -r fixtures/accept-tp4/inventory /tmp/inv && chmod 600 \
        /tmp/inv/rank-*.json",
        Status(0),
    ),
    (
        "docs/live.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr audit /tmp/inv --live \
        -v",
        Status(0),
    ),
    (
        "docs/live.md",
        "KVCR_NODE_FACTS=fixtures/live/node-unknown.json kvcr audit /tmp/inv --live \
        -v",
        Status(0),
    ),
    // docs/runbook.md: the real node's commands run on this machine, whose
    // hostname is not the descriptors' node; the practice lines run on the
    // node KVCR_NODE_FACTS describes.
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr audit --live /var/lib/kvcr/inventory                 # read-only; c\
        hecked against this node",
        Status(1),
    ),
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr audit --live -v /var/lib/kvcr/inventory              # the same, w\
        ith every check of every rank",
        Status(1),
    ),
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr audit --live --format json /var/lib/kvcr/inventory > kvcr-audit.j\
        son   # for the ticket",
        Status(1),
    ),
    (
        "docs/runbook.md",
        "$ COLUMNS=80 kvcr audit fixtures/kv103-missing-rank/inventory",
        Status(1),
    ),
    (
        "docs/runbook.md",
        "kvcr explain KV108            # what it means, what kvcr checked, the safe next step",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "kvcr explain                  # every code, one line each",
        Status(0),
    ),
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr import --dry-run --profile /etc/kvcr/profile.json /var/lib/kvcr/i\
        nventory   # the plan; exits with the status the real import would hav\
        e",
        Status(1),
    ),
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr import --profile /etc/kvcr/profile.json /var/lib/kvcr/inventory             # t\
        rial: every rank or none, then released",
        Status(1),
    ),
    // this machine is not gpu-node-17, the node the default inventory was written on: KV110.
    (
        "docs/runbook.md",
        "kvcr import --hold --ready-file /run/kvcr/ready.json --profile /etc/kv\
        cr/profile.json /var/lib/kvcr/inventory",
        Status(1),
    ),
    (
        "docs/runbook.md",
        "mkdir -p /tmp/inv && cp fixtures/profile-accept/inventory/rank-*.json /\
        tmp/inv/ && chmod 700 /tmp/inv && chmod 600 /tmp/inv/*",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr audit --live /tmp/i\
        nv                     # accepted (exit 0)",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json KVCR_IMPORT_BACKEND=sim k\
        vcr import --dry-run --profile fixtures/profile-accept/profile.json /t\
        mp/inv   # the plan (exit 0)",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json KVCR_IMPORT_BACKEND=sim k\
        vcr import --profile fixtures/profile-accept/profile.json /tmp/inv             # a s\
        imulated trial (exit 0)",
        Status(0),
    ),
    // released with SIGTERM once its ready file exists.
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json KVCR_IMPORT_BACKEND=sim k\
        vcr import --hold --ready-file /tmp/inv-ready.json --profile fixtures/\
        profile-accept/profile.json /tmp/inv   # until Ctrl-C (exit 0)",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "mkdir -p /tmp/inv && cp fixtures/accept-tp4/inventory/rank-0.json fixt\
        ures/accept-tp4/inventory/rank-1.json /tmp/inv/ && chmod 700 /tmp/inv &\
        & chmod 600 /tmp/inv/*",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr audit --live --loca\
        l-ranks 0-1 /tmp/inv   # this node's part: local part accepted (exit 0\
        )",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "KVCR_NODE_FACTS=fixtures/live/node-match.json kvcr audit --live --loca\
        l-ranks 0-1 --format json /tmp/inv > node-a.json",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "kvcr merge node-a.json        # one node's report alone: ranks 2-3 are m\
        issing, rejected (exit 1)",
        Status(1),
    ),
    // KVCR pools: the world's pool directory is empty (a clean stop).
    (
        "docs/runbook.md",
        "kvcr pools /dev/shm/kvcr --live --socket-path /run/kvcr/memory.sock --pool-sizes-gb 64",
        Status(0),
    ),
    // this machine runs no GMS, so nothing is found.
    (
        "docs/runbook.md",
        "kvcr gms --live               # where GMS puts them, from GMS's own va\
        riables; lease owners checked against this node",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "kvcr --version                # version, git commit, build date, CUDA headers",
        Status(0),
    ),
    (
        "docs/runbook.md",
        "kvcr offload fixtures/offload/llmd-missing-rank/root   # a fixture: rank 2 lacks a \
        block (exit 1)",
        Status(1),
    ),
    (
        "docs/runbook.md",
        "kvcr offload fixtures/offload/sglang-missing-rank/root --model m_7   # a fixture: a page \
        lacks stage 1's TP rank 0 (exit 1)",
        Status(1),
    ),
];

/// README blocks run by other suites (the multi-node recipes need launchers
/// and nodes): the `<!-- recipe: NAME -->` blocks, tests/it/fleet/nodes.rs.
const RECIPE_MARK: &str = "<!-- recipe:";

/// The scratch world the examples run in.
struct World {
    dir: tempfile::TempDir,
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// The profile an operator would write for accept-tp4's group.
fn tp4_profile() -> Value {
    let ranks: Vec<Value> = (0..4)
        .map(|r| {
            let p = repo().join(format!("fixtures/accept-tp4/inventory/rank-{r}.json"));
            serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
        })
        .collect();
    let d = &ranks[0];
    json!({
        "schema": "kvcr.profile/v1",
        "engine_id": d["engine_id"], "world_size": d["world_size"], "tp": d["tp"], "pp": d["pp"],
        "model": d["model"], "geometry": d["geometry"],
        "gpus": ranks.iter().map(|r| r["gpu_uuid"].clone()).collect::<Vec<_>>(),
    })
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path();
        copy_tree(&repo().join("fixtures"), &w.join("fixtures"));
        let tp4 = repo().join("fixtures/accept-tp4/inventory");
        for inv in [
            "var/lib/kvcr/inventory",
            "inventory",
            "fixtures/my-case/inventory",
        ] {
            copy_tree(&tp4, &w.join(inv));
            private(&w.join(inv));
        }
        std::fs::copy(tp4.join("rank-0.json"), w.join("rank-0.json")).unwrap();
        std::fs::create_dir_all(w.join("etc/kvcr")).unwrap();
        std::fs::write(
            w.join("etc/kvcr/profile.json"),
            serde_json::to_vec_pretty(&tp4_profile()).unwrap(),
        )
        .unwrap();
        for d in [
            "run/kvcr",
            "dev/shm/kvcr",
            "var/lib/prometheus/node-exporter",
            "var/log/kvcr",
            "tmp",
            "home/.zfunc",
            "home/.config/fish/completions",
            "bin",
        ] {
            std::fs::create_dir_all(w.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(bin(), w.join("bin/kvcr")).unwrap();
        World { dir }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    /// Two live node reports of one group for `kvcr merge node-a.json node-b.json`.
    fn with_node_reports(self) -> World {
        let f = Fleet::new();
        for n in ["node-a.json", "node-b.json"] {
            std::fs::copy(f.dir.path().join(n), self.path().join(n)).unwrap();
        }
        self
    }
    /// The example's absolute paths, mapped into the world.
    fn localize(&self, line: &str) -> String {
        let w = self.path().display().to_string();
        let mut s = line.replace("cargo run -q -- ", "kvcr ");
        for p in [
            "/var/lib/kvcr/inventory",
            "/var/lib/prometheus/node-exporter",
            "/etc/kvcr/",
            "/run/kvcr/",
            "/dev/shm/kvcr",
            "/tmp/inv",
        ] {
            s = s.replace(p, &format!("{w}{p}"));
        }
        s
    }
    /// Runs `line` with bash in the world and returns its exit status. A
    /// `--hold` is released with SIGTERM once its ready file exists.
    fn run(&self, line: &str, healthy_node: bool) -> (i32, String) {
        let w = self.path();
        let script = self.localize(line);
        let hold_ready = script.contains("--hold").then(|| {
            let words: Vec<&str> = script.split_whitespace().collect();
            let at = words
                .iter()
                .position(|x| *x == "--ready-file")
                .expect("a hold names its --ready-file");
            PathBuf::from(words[at + 1])
        });
        let mut c = Command::new("bash");
        test_env(&mut c);
        // zsh's $fpath, for the zsh completion line (1-based in zsh).
        let prelude = "fpath=(\"$HOME/.zfunc\" \"$HOME/.zfunc\")\n";
        // `exec env`: the line may start with variable assignments, and the
        // hold must be the process the SIGTERM reaches.
        let body = if hold_ready.is_some() {
            format!("exec env {script}")
        } else {
            script.clone()
        };
        c.arg("-c")
            .arg(format!("{prelude}{body}"))
            .current_dir(w)
            .env("HOME", w.join("home"))
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    w.join("bin").display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("KVCR_IMPORT_LOG", w.join("var/log/kvcr/import.jsonl"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if healthy_node {
            c.env("KVCR_NODE_FACTS", w.join("fixtures/live/node-match.json"))
                .env("KVCR_IMPORT_BACKEND", "sim");
        }
        let mut child = c.spawn().unwrap();
        let t = Instant::now();
        let mut signalled = false;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (st.code().unwrap_or(-1), err);
            }
            if let Some(r) = &hold_ready {
                if !signalled && r.exists() {
                    crate::util::signal(&child, libc::SIGTERM);
                    signalled = true;
                }
            }
            if t.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{line}: still running after 120 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// One man page example: the page, the command, the status it claims.
struct ManExample {
    page: String,
    cmd: String,
    status: i32,
}

/// roff back to text: the escapes clap_mangen's roff writer uses.
fn unroff(s: &str) -> String {
    s.replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "")
        .replace("\\*(Aq", "'")
        .replace("\\(aq", "'")
        .replace("\\-", "-")
        .replace("\\\\", "\\")
        .replace("\\&", "")
}

fn man_examples() -> Vec<ManExample> {
    let mut out = Vec::new();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("man"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    pages.sort();
    for p in pages {
        let text = std::fs::read_to_string(&p).unwrap();
        let Some(ex) = text.split(".SH EXAMPLES\n").nth(1) else {
            continue;
        };
        let ex = ex.split("\n.SH ").next().unwrap();
        let lines: Vec<&str> = ex.lines().collect();
        let mut claim: Option<i32> = None;
        for (i, l) in lines.iter().enumerate() {
            if *l == ".PP" {
                let what = unroff(lines[i + 1]);
                let tail = what.rsplit_once("(exit ").unwrap_or_else(|| {
                    panic!("{}: example {what:?} claims no exit status", p.display())
                });
                claim = Some(
                    tail.1
                        .trim_end_matches("):")
                        .parse()
                        .unwrap_or_else(|_| panic!("{what}")),
                );
            }
            if *l == ".nf" {
                out.push(ManExample {
                    page: p.file_name().unwrap().to_string_lossy().into_owned(),
                    cmd: unroff(lines[i + 1]),
                    status: claim.take().expect(".nf without its .PP"),
                });
            }
        }
    }
    out
}

#[test]
fn every_man_page_example_runs_with_the_status_it_claims() {
    let examples = man_examples();
    // The parser missed nothing: as many as the generator writes.
    let cmd = kvcr_audit::command();
    let mut want = crate::util::man::examples_of(None).len();
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        want += crate::util::man::examples_of(Some(s.get_name())).len();
    }
    assert_eq!(examples.len(), want);
    assert!(want >= 20, "{want}");
    let mut failed = Vec::new();
    // One world for all: no example changes what another reads.
    let world = World::new().with_node_reports();
    let jq = Command::new("jq")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    for e in &examples {
        if !jq && e.cmd.contains("jq ") {
            crate::util::missing(&format!("needs jq (.ci/run installs it) for: {}", e.cmd));
            continue;
        }
        let (code, err) = world.run(&e.cmd, true);
        if code != e.status {
            failed.push(format!(
                "{}: `{}` exited {code}, the page says {}\n{err}",
                e.page, e.cmd, e.status
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The man pages' import examples name the profile an import requires, and
/// ENVIRONMENT names KVCR_PROFILE.
#[test]
fn man_import_examples_declare_a_profile_and_kvcr_profile_is_documented() {
    let examples = man_examples();
    let imports: Vec<&ManExample> = examples
        .iter()
        .filter(|e| e.cmd.contains("kvcr import"))
        .collect();
    assert!(imports.len() >= 4);
    for e in imports {
        assert!(
            e.cmd.contains("--profile ") || e.cmd.contains("KVCR_PROFILE="),
            "{}: {}",
            e.page,
            e.cmd
        );
    }
    for page in ["kvcr.1", "kvcr-audit.1", "kvcr-import.1"] {
        let text = std::fs::read_to_string(repo().join("man").join(page)).unwrap();
        let env = text
            .split(".SH ENVIRONMENT")
            .nth(1)
            .unwrap()
            .split("\n.SH ")
            .next()
            .unwrap();
        assert!(env.contains("\\fBKVCR_PROFILE\\fR"), "{page}");
    }
}

/// (file, lines of one block in order, whether it has shell control flow).
struct Block {
    file: String,
    lines: Vec<String>,
    whole: bool,
}

fn doc_blocks() -> Vec<Block> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let name = f.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let mut fence: Option<(String, String)> = None; // (marker, lang)
        let mut lines: Vec<String> = Vec::new();
        let mut prev = "";
        let mut skip = false;
        for l in text.lines() {
            match &fence {
                None => {
                    if let Some(rest) = l.strip_prefix("```") {
                        let marker = "```".to_string()
                            + &rest.chars().take_while(|c| *c == '`').collect::<String>();
                        let lang = rest.trim_start_matches('`').trim().to_string();
                        fence = Some((marker, lang));
                        lines.clear();
                        skip = prev.starts_with(RECIPE_MARK);
                    }
                    if !l.trim().is_empty() {
                        prev = l;
                    }
                }
                Some((marker, lang)) => {
                    if l.trim_end() == marker {
                        let whole = lines.iter().any(|x| {
                            let w = x.split_whitespace().next().unwrap_or("");
                            ["case", "for", "while", "if"].contains(&w)
                        });
                        if !skip && !lines.is_empty() {
                            out.push(Block {
                                file: name.clone(),
                                lines: std::mem::take(&mut lines),
                                whole,
                            });
                        }
                        let _ = lang;
                        fence = None;
                        continue;
                    }
                    let cmd = match lang.as_str() {
                        "sh" | "bash" | "console" => (!l.trim().is_empty()).then(|| l.to_string()),
                        "" => l.starts_with("$ ").then(|| l.to_string()),
                        "yaml" => {
                            let t = l
                                .trim()
                                .trim_start_matches("- ")
                                .trim_start_matches("run: ")
                                .trim();
                            t.starts_with("kvcr ").then(|| t.to_string())
                        }
                        _ => None,
                    };
                    if let Some(c) = cmd {
                        // A continued line (`\` at the end) is one command.
                        match lines.last_mut() {
                            Some(last) if last.ends_with('\\') => {
                                last.push('\n');
                                last.push_str(&c);
                            }
                            _ => lines.push(c),
                        }
                    }
                }
            }
        }
    }
    out
}

fn have_libcuda() -> bool {
    Command::new("sh")
        .args(["-c", "ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn every_readme_and_docs_example_runs_with_the_status_it_claims() {
    let blocks = doc_blocks();
    let libcuda = have_libcuda();
    let mut seen = vec![false; EXPECTED.len()];
    let mut problems = Vec::new();
    let mut ran = 0;
    for b in &blocks {
        let runs: Vec<String> = if b.whole {
            vec![b.lines.join("\n")]
        } else {
            b.lines.clone()
        };
        let world = World::new();
        for cmd in runs {
            let key = if b.whole {
                b.lines[0].as_str()
            } else {
                cmd.as_str()
            };
            let hit = EXPECTED
                .iter()
                .enumerate()
                .find(|(_, (f, l, _))| *f == b.file && *l == key);
            let Some((i, (_, _, expect))) = hit else {
                problems.push(format!(
                    "{}: an example with no entry in EXPECTED (add it with the \
                    status it claims):\n    {key}",
                    b.file
                ));
                continue;
            };
            seen[i] = true;
            let want = match *expect {
                Skip(why) => {
                    eprintln!("not run ({why}): {}: {key}", b.file);
                    continue;
                }
                NoDriver(_) if libcuda => continue,
                Status(n) | NoDriver(n) => n,
            };
            let line = cmd.strip_prefix("$ ").unwrap_or(&cmd);
            let (code, err) = world.run(line, false);
            ran += 1;
            if code != want {
                problems.push(format!(
                    "{}: `{line}` exited {code}, the docs say {want}\n{err}",
                    b.file
                ));
            }
        }
    }
    for (i, (f, l, _)) in EXPECTED.iter().enumerate() {
        if !seen[i] {
            problems.push(format!("EXPECTED lists an example {f} no longer has: {l}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(ran >= 20, "{ran}");
}

/// Issue #31 §4: the README's first screen (24 lines) gives two commands
/// that work on a fresh machine — kvcr on a shipped fixture, and the very
/// test command `.ci/run` runs — and links the on-call runbook.
#[test]
fn the_readme_first_screen_runs_a_fixture_and_the_tests_and_links_the_runbook() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let screen: Vec<&str> = readme.lines().take(24).collect();
    let screen = screen.join("\n");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    let test_cmd = ci
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.starts_with("cargo test ")
                .then(|| l.split(" 2>&1").next().unwrap().trim().to_string())
        })
        .expect(".ci/run runs cargo test");
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with(&format!("{test_cmd} "))),
        "the first screen lacks .ci/run's `{test_cmd}`"
    );
    let fixture = screen
        .lines()
        .find(|l| l.starts_with("cargo run -q -- audit fixtures/"))
        .expect("a kvcr command on a shipped fixture");
    let dir = fixture.split_whitespace().nth(5).unwrap();
    assert!(repo().join(dir).is_dir(), "{dir}");
    assert!(screen.contains("(docs/runbook.md)"), "{screen}");
}
