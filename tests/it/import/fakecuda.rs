//! The CUDA path under test: the real `kvcr` binary against an ABI-level
//! fake driver (`tests/fakecuda/fakecuda.c`, compiled here with `$CC`, loaded
//! through `LD_LIBRARY_PATH` as `libcuda.so.1`). The fake keeps real state,
//! enforces the driver's rules (it logs a `violation` line whenever kvcr
//! breaks one), logs every call, and fails or delays the Nth call of any
//! symbol with any integer code. Every check here reads the fake's log:
//! what was acquired, released (in exact reverse order), and still held at
//! exit, compared with kvcr's report.
//!
//! posix_fd goes through a real owner process (`tests/fakecuda/owner.c`)
//! that exports VMM allocations through the fake in the driver's shape
//! (each export a fresh character-device file that says nothing about the
//! allocation, `FAKECUDA_STATE`), and kvcr's real pidfd_open +
//! pidfd_getfd path.
//!
//! Skipped, with a message, where no C compiler exists (`$CC`, default `cc`),
//! unless `KVCR_TEST_REQUIRE` (or `KVCR_FAKECUDA_REQUIRED`) is set (`.ci/run` sets it).

use crate::util::{signal, wait_for};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fakecuda");
pub(crate) const MIB: u64 = 1 << 20;

/// The fake driver and the owner program, built once per test run.
pub(crate) struct Built {
    _dir: tempfile::TempDir,
    pub(crate) lib_dir: PathBuf,
    owner: PathBuf,
    /// scripts/gpu-proof-owner.c: the proof's owner and engine tools.
    pub(crate) proof_owner: PathBuf,
}

pub(crate) fn built() -> Option<&'static Built> {
    static B: OnceLock<Option<Built>> = OnceLock::new();
    B.get_or_init(|| {
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let dir = tempfile::tempdir().unwrap();
        let lib_dir = dir.path().join("lib");
        std::fs::create_dir(&lib_dir).unwrap();
        let lib = lib_dir.join("libcuda.so.1");
        let owner = dir.path().join("owner");
        let run = |args: &[&str]| Command::new(&cc).args(args).stdin(Stdio::null()).output();
        let out = match run(&[
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            lib.to_str().unwrap(),
            &format!("{SRC}/fakecuda.c"),
            "-lpthread",
        ]) {
            Ok(o) => o,
            Err(e) => {
                crate::util::missing(&format!("needs a C compiler ({cc}: {e}); CI has one"));
                return None;
            }
        };
        assert!(
            out.status.success(),
            "fakecuda.c does not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The owner exports through the fake driver, as a real owner does.
        let out = run(&[
            "-O1",
            "-Wall",
            "-Werror",
            "-o",
            owner.to_str().unwrap(),
            &format!("{SRC}/owner.c"),
            lib.to_str().unwrap(),
            &format!("-Wl,-rpath,{}", lib_dir.display()),
        ])
        .unwrap();
        assert!(
            out.status.success(),
            "owner.c does not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let proof_owner = dir.path().join("gpu-proof-owner");
        let out = run(&[
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            proof_owner.to_str().unwrap(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gpu-proof-owner.c"),
            "-ldl",
        ])
        .unwrap();
        assert!(
            out.status.success(),
            "gpu-proof-owner.c does not compile:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::os::unix::fs::symlink("libcuda.so.1", lib_dir.join("libcuda.so")).unwrap();
        Some(Built {
            _dir: dir,
            lib_dir,
            owner,
            proof_owner,
        })
    })
    .as_ref()
}

/// Whether this kernel and sandbox let a process take another's fd
/// (pidfd_open + pidfd_getfd): where they refuse, posix_fd allocations are
/// replaced by fabric ones, with a message.
pub(crate) fn pidfd_works(b: &Built) -> bool {
    static W: OnceLock<bool> = OnceLock::new();
    *W.get_or_init(|| {
        let state = tempfile::tempdir().unwrap();
        let mut owner = Command::new(&b.owner)
            .arg(format!("0:{}", 2 * MIB))
            .env("FAKECUDA_GPUS", gpu(0))
            .env("FAKECUDA_STATE", state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(owner.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let fd: i32 = line.trim().parse().unwrap();
        let pid = owner.id() as i32;
        // The calls kvcr's import makes (src/import/engine/pidfd.rs), asked directly:
        // ENOSYS, EPERM or EACCES is a kernel or sandbox that refuses them.
        use rustix::io::Errno;
        use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
        let r = pidfd_open(Pid::from_raw(pid).unwrap(), PidfdFlags::empty())
            .and_then(|p| pidfd_getfd(&p, fd, PidfdGetfdFlags::empty()));
        let _ = owner.kill();
        let _ = owner.wait();
        match r {
            Ok(_) => true,
            Err(e @ (Errno::NOSYS | Errno::PERM | Errno::ACCESS)) => {
                eprintln!(
                    "posix_fd skipped (fabric instead): the kernel refuses pidfd_getfd here: {e}"
                );
                false
            }
            Err(e) => panic!("pidfd probe: {e}"),
        }
    })
}

macro_rules! need_cc {
    () => {
        match $crate::import::fakecuda::built() {
            Some(b) => b,
            None => return,
        }
    };
}

pub(crate) fn gpu(i: usize) -> String {
    format!("GPU-{:08x}-1111-4222-8333-{:012x}", 0x6a1f_0c2e + i, i)
}

pub(crate) fn hex(kind: &str, rank: usize, i: usize) -> String {
    let salt = if kind == "fabric" { 0x55 } else { 0x11 };
    (0..64)
        .map(|b| format!("{:02x}", (b * 7 + rank * 31 + i * 13 + salt) % 256))
        .collect()
}

/// One allocation of a rank: its handle kind, the device its memory really
/// lives on, the exported allocation's size, and what the descriptor says.
#[derive(Clone, Debug)]
pub(crate) struct Alloc {
    pub(crate) kind: &'static str,
    pub(crate) mem_dev: usize,
    pub(crate) alloc_size: u64,
    pub(crate) size_bytes: u64,
    pub(crate) offset_bytes: u64,
    /// Carry the very handle of this rank's allocation N (one exported
    /// segment carved into allocations).
    pub(crate) handle_of: Option<usize>,
    /// `cuda_ipc`: the fake's ALIAS (handles with one alias are one
    /// allocation); `posix_fd`: the owner's fd is a dup() of this rank's
    /// allocation N's fd (two fds of one file).
    pub(crate) same_memory_as: Option<usize>,
    /// `posix_fd`: the owner exports allocation (RANK, N) once more (a
    /// second, distinct file of one allocation, as the driver gives).
    pub(crate) export_of: Option<(usize, usize)>,
    /// `posix_fd`: the owner fills the allocation with the gpu-proof
    /// pattern of this seed (else it holds zeros).
    pub(crate) seed: Option<u8>,
    /// A `content` member (docs/format.md §3.6): page_bytes, pages, and
    /// whether its sha256 matches what the fake's memory holds.
    pub(crate) content: Option<(u64, u64, bool)>,
}

pub(crate) fn alloc(kind: &'static str, dev: usize) -> Alloc {
    Alloc {
        kind,
        mem_dev: dev,
        alloc_size: 2 * MIB,
        size_bytes: MIB,
        offset_bytes: 0,
        handle_of: None,
        same_memory_as: None,
        export_of: None,
        seed: None,
        content: None,
    }
}

/// The fake's memory (tests/fakecuda/fakecuda.c): a posix_fd allocation is
/// the owner's (zeros unless it was given a seed); cuda_ipc and fabric memory
/// holds `(o × 131) ^ (o >> 9) ^ seed` at offset `o`, seed the first handle byte.
pub(crate) fn fake_byte(kind: &str, seed: u8, o: u64) -> u8 {
    if kind == "posix_fd" {
        0
    } else {
        (o.wrapping_mul(131) ^ (o >> 9) ^ u64::from(seed)) as u8
    }
}

fn content_of(a: &Alloc, hex: Option<&str>) -> Option<Value> {
    let (page, pages, good) = a.content?;
    let seed = hex.map_or(0, |h| u8::from_str_radix(&h[..2], 16).unwrap());
    let mut read = |o: u64, n: u64| Ok((o..o + n).map(|x| fake_byte(a.kind, seed, x)).collect());
    let c =
        kvcr_audit::content::digest_content(a.size_bytes, a.offset_bytes, page, pages, &mut read)
            .unwrap();
    let mut sha = c.sha256;
    if !good {
        sha[31] ^= 1;
    }
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    Some(json!({"page_bytes": page, "pages": pages, "sha256": hex}))
}

/// A node with `gpus` GPUs and one group: rank r on GPU r with `allocs(r)`.
pub(crate) struct Scenario {
    pub(crate) dir: tempfile::TempDir,
    gpus: usize,
    env: Vec<(String, String)>,
    pub(crate) owner: Child,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let _ = self.owner.kill();
        let _ = self.owner.wait();
    }
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

impl Scenario {
    pub(crate) fn new(
        b: &Built,
        gpus: usize,
        ranks: usize,
        allocs: impl Fn(usize) -> Vec<Alloc>,
    ) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let mut plan: Vec<Vec<Alloc>> = (0..ranks).map(&allocs).collect();
        if !pidfd_works(b) {
            for a in plan.iter_mut().flatten().filter(|a| a.kind == "posix_fd") {
                a.kind = "fabric";
            }
        }
        // The owner exports one allocation per posix_fd allocation (a dup
        // of an earlier fd for `same_memory_as`, a second export for
        // `export_of`; none for `handle_of`), and per fabric allocation
        // with a seed.
        let mut fd_args: Vec<String> = Vec::new();
        let mut fd_index: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for (rank, list) in plan.iter().enumerate() {
            for (i, a) in list.iter().enumerate() {
                if a.handle_of.is_some() {
                    continue;
                }
                if let ("fabric", Some(seed)) = (a.kind, a.seed) {
                    // Exported by the owner: its fabric handle's hex.
                    fd_args.push(format!("{}:{}:{seed}", a.mem_dev, a.alloc_size));
                    fd_index.insert((rank, i), fd_args.len());
                    fd_args.push(format!("fabric:{}", fd_args.len() - 1));
                    continue;
                }
                if a.kind != "posix_fd" {
                    continue;
                }
                fd_index.insert((rank, i), fd_args.len());
                fd_args.push(match (a.same_memory_as, a.export_of) {
                    (Some(j), _) => format!("dup:{}", fd_index[&(rank, j)]),
                    (None, Some(at)) => format!("export:{}", fd_index[&at]),
                    (None, None) => match a.seed {
                        Some(seed) => format!("{}:{}:{seed}", a.mem_dev, a.alloc_size),
                        None => format!("{}:{}", a.mem_dev, a.alloc_size),
                    },
                });
            }
        }
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let gpu_list: Vec<String> = (0..gpus.max(1)).map(gpu).collect();
        let mut owner = Command::new(&b.owner)
            .args(&fd_args)
            .env("FAKECUDA_GPUS", gpu_list.join(","))
            .env("FAKECUDA_STATE", &state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(owner.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // An fd number per posix_fd entry, 128 hex digits per fabric one.
        let tokens: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        let fd = |k: usize| tokens[k].parse::<u64>().unwrap();
        let pid = owner.id() as i32;
        let ticks = kvcr_audit::api::proc_start_ticks(pid).unwrap();
        let host = read_trim("/proc/sys/kernel/hostname");
        let boot = read_trim("/proc/sys/kernel/random/boot_id");
        let inv = dir.path().join("inv");
        std::fs::create_dir(&inv).unwrap();
        let (mut ipc, mut fabric) = (Vec::new(), Vec::new());
        for (rank, list) in plan.iter().enumerate() {
            let mut v =
                crate::util::testkit::Desc::new("fake-engine", rank as u64, ranks as u64, 1)
                    .value();
            v["node"] = json!({"hostname": host, "boot_id": boot});
            v["gpu_uuid"] = json!(gpu(rank));
            v["owner"] = json!({"pid": pid, "start_ticks": ticks});
            v["writer"] = json!({"pid": pid, "start_ticks": ticks, "quiesced": true});
            // 1 × 2 × 16 × 16 × 1 × 64 × 2 = 64 KiB ≤ the allocations.
            v["geometry"] = json!({"num_layers": 1, "kv_heads_per_rank": 1, "head_size": 64,
                "block_size": 16, "num_blocks": 16, "dtype": "float16", "use_mla": false});
            let items: Vec<Value> = list
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let own = a.handle_of.unwrap_or(i);
                    let handle = match a.kind {
                        "posix_fd" => {
                            json!({"kind": "posix_fd", "fd": fd(fd_index[&(rank, own)])})
                        }
                        "fabric" if a.seed.is_some() => {
                            json!({"kind": "fabric", "hex": tokens[fd_index[&(rank, own)]]})
                        }
                        k => {
                            let h = hex(k, rank, own);
                            let alias = a.same_memory_as.map_or(0, |j| 1 + rank * 64 + j);
                            let cfg = format!("{h}:{}:{}:{alias}", a.mem_dev, a.alloc_size);
                            if a.handle_of.is_some() {
                            } else if k == "fabric" {
                                fabric.push(cfg)
                            } else {
                                if let Some(j) = a.same_memory_as {
                                    // The first of the alias group carries it too.
                                    let first = hex(k, rank, j);
                                    ipc.retain(|c: &String| !c.starts_with(&first));
                                    let (dev, size) = (list[j].mem_dev, list[j].alloc_size);
                                    ipc.push(format!("{first}:{dev}:{size}:{alias}"));
                                }
                                ipc.push(cfg)
                            }
                            json!({"kind": k, "hex": h})
                        }
                    };
                    let hex_of = handle["hex"].as_str().map(str::to_owned);
                    let id = format!("kv-{i}");
                    let mut o = json!({"id": id, "size_bytes": a.size_bytes, "handle": handle});
                    if let Some(c) = content_of(a, hex_of.as_deref()) {
                        o["content"] = c;
                    }
                    if a.offset_bytes > 0 {
                        o["offset_bytes"] = json!(a.offset_bytes);
                    }
                    o
                })
                .collect();
            v["allocations"] = Value::Array(items);
            crate::util::testkit::seal(&mut v);
            let p = inv.join(format!("rank-{rank}.json"));
            std::fs::write(&p, crate::util::testkit::to_bytes(&v)).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        std::fs::set_permissions(&inv, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Import requires the declared profile (docs/format.md §8.9).
        let mut profile = crate::util::testkit::profile(&crate::util::testkit::Desc::new(
            "fake-engine",
            0,
            ranks as u64,
            1,
        ));
        profile["gpus"] = json!((0..ranks).map(gpu).collect::<Vec<_>>());
        profile["geometry"] = json!({"num_layers": 1, "kv_heads_per_rank": 1, "head_size": 64,
            "block_size": 16, "num_blocks": 16, "dtype": "float16", "use_mla": false});
        let profile_path = dir.path().join("profile.json");
        std::fs::write(&profile_path, crate::util::testkit::to_bytes(&profile)).unwrap();
        let gpu_list: Vec<String> = (0..gpus).map(gpu).collect();
        let env = vec![
            ("KVCR_PROFILE".into(), profile_path.display().to_string()),
            ("LD_LIBRARY_PATH".into(), b.lib_dir.display().to_string()),
            ("FAKECUDA_STATE".into(), state.display().to_string()),
            ("FAKECUDA_GPUS".into(), gpu_list.join(",")),
            ("FAKECUDA_IPC".into(), ipc.join(",")),
            ("FAKECUDA_FABRIC".into(), fabric.join(",")),
        ];
        Scenario {
            dir,
            gpus,
            env,
            owner,
        }
    }

    /// Every rank on its own GPU with one allocation of each kind (the
    /// posix_fd one at an offset), plus one GPU no rank uses.
    /// The IPC and posix_fd allocations carry a content check of two pages
    /// (docs/format.md §3.6), so every call position includes the reads.
    fn mixed(b: &Built) -> Scenario {
        Scenario::new(b, 3, 2, |r| {
            vec![
                Alloc {
                    content: Some((4096, 2, true)),
                    ..alloc("cuda_ipc", r)
                },
                alloc("fabric", r),
                Alloc {
                    offset_bytes: MIB,
                    content: Some((4096, 2, true)),
                    ..alloc("posix_fd", r)
                },
            ]
        })
    }

    pub(crate) fn inv(&self) -> PathBuf {
        self.dir.path().join("inv")
    }

    pub(crate) fn command(
        &self,
        log: &Path,
        extra_env: &[(&str, String)],
        args: &[&str],
    ) -> Command {
        // Nothing inherited but PATH (no LD_LIBRARY_PATH to a real
        // libcuda), then the test environment and the fake's variables.
        let mut c = Command::new(crate::util::bin());
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        crate::util::test_env(&mut c)
            .args(args)
            .env("FAKECUDA_LOG", log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for (k, v) in extra_env {
            c.env(k, v);
        }
        c
    }

    /// `kvcr import INV --format json --hold --ready-file DIR/ready.json`
    /// started in the background; returns once the ready file exists.
    pub(crate) fn start_hold(&self, tag: &str, extra_env: &[(&str, String)]) -> Holding {
        let log = self.dir.path().join(format!("{tag}.log"));
        let ready = self.dir.path().join(format!("{tag}/ready.json"));
        std::fs::create_dir_all(ready.parent().unwrap()).unwrap();
        let inv = self.inv();
        let args = [
            "import",
            inv.to_str().unwrap(),
            "--format",
            "json",
            "--hold",
            "--ready-file",
            ready.to_str().unwrap(),
        ];
        let child = self.command(&log, extra_env, &args).spawn().unwrap();
        wait_for("the ready file", || ready.exists());
        Holding { child, ready, log }
    }

    /// `kvcr import INV --format json ARGS` with the fake; a fresh log per run.
    pub(crate) fn import(&self, tag: &str, extra_env: &[(&str, String)], args: &[&str]) -> Run {
        let log = self.dir.path().join(format!("{tag}.log"));
        let _ = std::fs::remove_file(&log);
        let inv = self.inv();
        let mut all = vec!["import", inv.to_str().unwrap(), "--format", "json"];
        all.extend_from_slice(args);
        let child = self.command(&log, extra_env, &all).spawn().unwrap();
        finish(child, &log)
    }
}

/// A hold in the background ([`Scenario::start_hold`]).
pub(crate) struct Holding {
    pub(crate) child: Child,
    pub(crate) ready: PathBuf,
    pub(crate) log: PathBuf,
}

impl Holding {
    /// SIGTERM, then what the hold did.
    pub(crate) fn release(self) -> Run {
        signal(&self.child, libc::SIGTERM);
        finish(self.child, &self.log)
    }
}

/// What one kvcr run did, from its report and the fake's log.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) report: Option<Value>,
    pub(crate) stderr: String,
    pub(crate) log: Log,
}

#[derive(Default, Debug)]
pub(crate) struct Log {
    /// (seq, symbol, status, details) of every counted call.
    pub(crate) calls: Vec<(u64, String, i32, String)>,
    pub(crate) acquired: Vec<String>,
    pub(crate) released: Vec<String>,
    pub(crate) held: Vec<String>,
    pub(crate) violations: Vec<String>,
    pub(crate) exited: bool,
}

pub(crate) fn parse_log(text: &str) -> Log {
    let mut l = Log::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f[0] {
            "call" => l.calls.push((
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3].parse().unwrap(),
                f.get(4).unwrap_or(&"").to_string(),
            )),
            "acquire" => l.acquired.push(format!("{} {}", f[1], f[2])),
            "release" => l.released.push(format!("{} {}", f[1], f[2])),
            "held" => l.held.push(format!("{} {}", f[1], f[2])),
            "violation" => l.violations.push(line.to_string()),
            "exit" => l.exited = true,
            _ => {}
        }
    }
    l
}

pub(crate) fn finish(child: Child, log: &Path) -> Run {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).ok();
    let text = std::fs::read_to_string(log).unwrap_or_default();
    Run {
        code: out.status.code().unwrap_or(-1),
        report,
        stderr,
        log: parse_log(&text),
    }
}

impl Run {
    pub(crate) fn report(&self) -> &Value {
        self.report
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON report (exit {}): {}", self.code, self.stderr))
    }

    pub(crate) fn why(&self) -> String {
        format!(
            "exit {}\nreport: {}\nstderr: {}\nviolations: {:?}",
            self.code,
            self.report
                .as_ref()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.stderr,
            self.log.violations
        )
    }

    /// The fake saw no broken rule, the process ran to its normal exit, and
    /// every release undid the latest acquisition still held: the releases
    /// are the acquisitions in exact reverse order, less what remains.
    pub(crate) fn assert_clean_reverse(&self) {
        let w = self.why();
        assert!(self.log.violations.is_empty(), "{w}");
        assert!(self.log.exited, "the process did not exit normally: {w}");
        let mut want: Vec<String> = self.log.acquired.clone();
        want.reverse();
        let mut held = self.log.held.clone();
        want.retain(|a| match held.iter().position(|h| h == a) {
            Some(i) => {
                held.remove(i);
                false
            }
            None => true,
        });
        assert_eq!(self.log.released, want, "release order\n{w}");
    }

    /// The fake holds at exit exactly what the report lists as remaining.
    pub(crate) fn assert_held_matches_report(&self) {
        let mut from_report: Vec<String> = self
            .report()
            .get("remaining")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let res = &r["resource"];
                let ptr = |k: &str| res[k].as_u64().unwrap();
                match res["kind"].as_str().unwrap() {
                    "context" => format!("ctx dev{}", res["device"]),
                    "ipc-mapping" => format!("ipc {:#x}", ptr("ptr")),
                    "imported-handle" => format!("mem {:#x}", ptr("handle")),
                    "reservation" => format!("va {:#x}+{}", ptr("ptr"), ptr("size")),
                    "mapping" => format!("map {:#x}+{}", ptr("ptr"), ptr("size")),
                    k => panic!("unknown resource kind {k}"),
                }
            })
            .collect();
        // Fake ids of ipc and mem carry a size kvcr does not know: compare the prefix.
        let mut held: Vec<String> = self
            .log
            .held
            .iter()
            .map(|h| {
                if h.starts_with("ipc ") || h.starts_with("mem ") {
                    h.split('+').next().unwrap().to_string()
                } else {
                    h.clone()
                }
            })
            .collect();
        from_report.sort();
        held.sort();
        assert_eq!(
            held,
            from_report,
            "held at exit vs the report's remaining\n{}",
            self.why()
        );
    }

    pub(crate) fn failure_message(&self) -> String {
        self.report()["failure"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// The details of every call of `sym` in a run, in order.
pub(crate) fn calls(r: &Run, sym: &str) -> Vec<String> {
    r.log
        .calls
        .iter()
        .filter(|c| c.1 == sym)
        .map(|c| c.3.clone())
        .collect()
}

/// The calls that release something (a failure there is exit 4).
const RELEASE_CALLS: [&str; 5] = [
    "cuIpcCloseMemHandle",
    "cuMemUnmap",
    "cuMemAddressFree",
    "cuMemRelease",
    "cuDevicePrimaryCtxRelease_v2",
];

#[test]
fn audit_live_lists_the_gpus_through_the_fake_driver() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let log = s.dir.path().join("audit.log");
    let out = s
        .command(
            &log,
            &[],
            &[
                "audit",
                "--live",
                s.inv().to_str().unwrap(),
                "--format",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let l = parse_log(&std::fs::read_to_string(&log).unwrap());
    let syms: Vec<&str> = l.calls.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(syms[..2], ["cuInit", "cuDeviceGetCount"]);
    assert_eq!(
        syms.iter().filter(|s| **s == "cuDeviceGetUuid_v2").count(),
        s.gpus
    );
    assert!(l.acquired.is_empty() && l.violations.is_empty(), "{l:?}");

    // A rank's GPU the driver does not list: KV106, exit 1.
    let mut c = s.command(
        &log,
        &[("FAKECUDA_GPUS", format!("{},{}", gpu(0), gpu(2)))],
        &[
            "audit",
            "--live",
            s.inv().to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("KV106"));
}

#[test]
fn trial_imports_every_kind_read_only_and_releases_in_reverse() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let r = s.import("trial", &[], &[]);
    assert_eq!(r.code, 0, "{}", r.why());
    assert_eq!(r.report()["result"], "imported");
    assert_eq!(r.report()["backend"], "cuda");
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty(), "{:?}", r.log.held);
    // 2 ranks × (context + IPC mapping + 2 × (handle, reservation, mapping)).
    assert_eq!(r.log.acquired.len(), 2 * 8);
    assert_eq!(r.report()["released"], 16);
    // Read-only access on the planned device, for every VMM mapping.
    let access: Vec<&str> = r
        .log
        .calls
        .iter()
        .filter(|c| c.1 == "cuMemSetAccess")
        .map(|c| c.3.as_str())
        .collect();
    assert_eq!(access.len(), 4);
    assert!(access.iter().all(|d| d.ends_with("access=1")), "{access:?}");
    // The offset allocation is mapped over offset + size (2 MiB).
    assert!(r
        .log
        .calls
        .iter()
        .any(|c| c.1 == "cuMemMap" && c.3.contains(&format!("size={}", 2 * MIB))));
    // The unused GPU is never opened, and the backend does not list the GPUs again.
    assert!(!r.log.acquired.iter().any(|a| a == "ctx dev2"));
    assert_eq!(
        r.log
            .calls
            .iter()
            .filter(|c| c.1 == "cuDeviceGetCount")
            .count(),
        1
    );
}

#[test]
fn map_read_write_only_when_asked_and_refusal_names_the_flag() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let refuse = [("FAKECUDA_NO_READONLY", "1".to_string())];
    let r = s.import("ro", &refuse, &[]);
    assert_eq!(r.code, 3, "{}", r.why());
    assert_eq!(r.report()["failure"]["step"], "set-access");
    assert!(
        r.failure_message().contains("--map-read-write"),
        "{}",
        r.why()
    );
    assert!(r
        .failure_message()
        .contains("CUDA_ERROR_NOT_SUPPORTED (801)"));
    r.assert_clean_reverse();
    assert!(r.log.held.is_empty());
    let r = s.import("rw", &refuse, &["--map-read-write"]);
    assert_eq!(r.code, 0, "{}", r.why());
    let access: Vec<&String> = r
        .log
        .calls
        .iter()
        .filter(|c| c.1 == "cuMemSetAccess")
        .map(|c| &c.3)
        .collect();
    assert!(!access.is_empty() && access.iter().all(|d| d.ends_with("access=3")));
}

#[test]
fn stub_library_is_exit_2_naming_the_stub() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let r = s.import("stub", &[("FAKECUDA_STUB", "1".into())], &[]);
    assert_eq!(r.code, 2, "{}", r.why());
    assert!(
        r.stderr.contains("the CUDA toolkit's stub, not the driver"),
        "{}",
        r.stderr
    );
    assert!(r.log.acquired.is_empty());
    // audit --live says why the GPUs were not checked.
    let log = s.dir.path().join("stub-audit.log");
    let out = s
        .command(
            &log,
            &[("FAKECUDA_STUB", "1".into())],
            &[
                "audit",
                "--live",
                s.inv().to_str().unwrap(),
                "--format",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("stub"),
        "{out:?}"
    );
    // The audit answers before the driver (docs/format.md §8.9): a rejected
    // group is exit 1 under the stub too, and the dry run names the stub
    // and exits as the real import would: 2 (§8.7).
    let dry = s.import("stub-dry", &[("FAKECUDA_STUB", "1".into())], &["--dry-run"]);
    assert_eq!(dry.code, 2, "{}", dry.why());
    let refusals = dry.report()["refusals"].to_string();
    assert!(
        refusals.contains("\"driver\"") && refusals.contains("stub"),
        "{refusals}"
    );
    std::fs::remove_file(s.inv().join("rank-1.json")).unwrap();
    let r = s.import("stub-rejected", &[("FAKECUDA_STUB", "1".into())], &[]);
    assert_eq!(r.code, 1, "{}", r.why());
    assert_eq!(r.report()["result"], "rejected");
    assert!(r.log.acquired.is_empty());
}

#[test]
fn verify_catches_memory_on_another_device_and_a_short_allocation() {
    let b = need_cc!();
    // Rank 0's memory really lives on device 1, for each handle kind.
    for kind in ["cuda_ipc", "fabric", "posix_fd"] {
        let s = Scenario::new(b, 2, 1, |_| vec![alloc(kind, 1)]);
        let r = s.import("dev", &[], &[]);
        assert_eq!(r.code, 3, "{kind}: {}", r.why());
        // VMM: the allocation's own properties say so first (§8.4).
        let (step, says) = if kind == "cuda_ipc" {
            ("verify", "resides on device 1")
        } else {
            (
                "verify-location",
                "location type 1 (device) id 1, the plan put it on device 0",
            )
        };
        assert_eq!(r.report()["failure"]["step"], step, "{kind}");
        assert!(r.failure_message().contains(says), "{kind}: {}", r.why());
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty());
    }

    // offset + size beyond the exported allocation: IPC fails verify, VMM fails cuMemMap.
    let s = Scenario::new(b, 1, 1, |_| {
        vec![Alloc {
            offset_bytes: 2 * MIB,
            ..alloc("cuda_ipc", 0)
        }]
    });
    let r = s.import("ipc-short", &[], &[]);
    assert_eq!(
        (r.code, r.report()["failure"]["step"].as_str()),
        (3, Some("verify")),
        "{}",
        r.why()
    );
    assert!(r.failure_message().contains("needs"), "{}", r.why());
    r.assert_clean_reverse();
    for kind in ["fabric", "posix_fd"] {
        if kind == "posix_fd" && !pidfd_works(b) {
            continue;
        }
        let s = Scenario::new(b, 1, 1, |_| {
            vec![Alloc {
                offset_bytes: MIB + 1,
                ..alloc(kind, 0)
            }]
        });
        let r = s.import(kind, &[], &[]);
        assert_eq!(
            (r.code, r.report()["failure"]["step"].as_str()),
            (3, Some("map")),
            "{kind}: {}",
            r.why()
        );
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty());
    }
}

#[test]
fn unknown_status_codes_are_reported_by_number() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    for code in [919, 36, 999_999, -7] {
        let r = s.import(
            "map",
            &[("FAKECUDA_FAIL", format!("cuMemMap:2:{code}"))],
            &[],
        );
        assert_eq!(r.code, 3, "{code}: {}", r.why());
        assert_eq!(r.report()["failure"]["step"], "map");
        let m = r.failure_message();
        assert!(
            m.contains(&format!("CUDA error {code} (unknown to this build)")),
            "{m}"
        );
        // The number itself, for scripts.
        assert_eq!(
            r.report()["failure"]["driver"],
            json!({"call": "cuMemMap", "status": code})
        );
        r.assert_clean_reverse();
        assert!(r.log.held.is_empty());
        // Mid-release: the rest is still released, the report lists what remains (exit 4).
        let r = s.import(
            "unmap",
            &[("FAKECUDA_FAIL", format!("cuMemUnmap:1:{code}"))],
            &[],
        );
        assert_eq!(r.code, 4, "{code}: {}", r.why());
        assert_eq!(r.report()["result"], "release-failed");
        let failed: Vec<&Value> = r.report()["remaining"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x.get("driver").is_some())
            .collect();
        assert_eq!(failed.len(), 1, "{}", r.why());
        assert_eq!(
            failed[0]["driver"],
            json!({"call": "cuMemUnmap", "status": code})
        );
        assert!(r
            .report()
            .to_string()
            .contains(&format!("CUDA error {code} (unknown to this build)")));
        r.assert_clean_reverse();
        r.assert_held_matches_report();
        assert!(!r.log.held.is_empty());
    }
    // A known code keeps its name.
    let r = s.import(
        "known",
        &[("FAKECUDA_FAIL", "cuMemAddressReserve:1:2".into())],
        &[],
    );
    assert!(
        r.failure_message().contains("CUDA_ERROR_OUT_OF_MEMORY (2)"),
        "{}",
        r.why()
    );
}

/// The expected exit status when call `sym` (with the clean run's
/// `details`) fails in an otherwise clean trial.
fn expected_exit(sym: &str, details: &str, code: i32, in_release: bool) -> &'static [i32] {
    match sym {
        // MEMORY_BLOCK_ID not answered (an older driver's 1): that identity
        // is not available, the import goes on (docs/format.md §8.10).
        "cuPointerGetAttribute" if details.contains(" attr=20 ") && code == 1 => &[0],
        // Unbinding before a context release: its answer does not matter.
        "cuCtxSetCurrent" if details == "ctx=null" => &[0],
        // Only names MIG devices: ignored.
        "cuDeviceGetUuid" => &[0],
        // The compute mode only explains a refused context: not needed.
        "cuDeviceGetAttribute" => &[0],
        // The unused third GPU's entry: its error fails nothing (the
        // backend plans from the probe and never asks about it).
        "cuDeviceGet" | "cuDeviceGetUuid_v2" if details.ends_with("=2") => &[0],
        // The probe could not read the GPU list, or a used GPU: the backend,
        // planning from the probe, fails at step device before acquiring
        // anything (3). A strict gate (issue #12 item 9) refuses earlier (1).
        "cuInit" | "cuDeviceGetCount" | "cuDeviceGet" | "cuDeviceGetUuid_v2" => &[3, 1],
        s if RELEASE_CALLS.contains(&s) => &[4],
        // cuCtxSetCurrent before a release makes that release fail.
        "cuCtxSetCurrent" if in_release => &[4],
        _ => &[3],
    }
}

#[test]
fn a_failure_at_every_call_position_rolls_back() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let clean = s.import("clean", &[], &[]);
    assert_eq!(clean.code, 0, "{}", clean.why());
    clean.assert_clean_reverse();
    let calls = clean.log.calls.clone();
    // The trial's release phase starts after the last verify query.
    let first_release = calls
        .iter()
        .rposition(|c| c.1 == "cuPointerGetAttribute" || c.1 == "cuMemcpyDtoH_v2")
        .unwrap()
        + 1;
    assert!(calls.len() > 60, "{} calls", calls.len());
    let codes = [999, 919, 36, 999_999, 1];
    let started = Instant::now();
    let positions: Vec<usize> = (0..calls.len()).collect();
    let threads = 4;
    let results: Vec<(usize, i32)> = std::thread::scope(|sc| {
        let hs: Vec<_> = positions
            .chunks(calls.len().div_ceil(threads))
            .map(|chunk| {
                let s = &s;
                let calls = &calls;
                sc.spawn(move || {
                    let mut out = Vec::new();
                    for &k in chunk {
                        let (seq, sym, _, details) = &calls[k];
                        let code = codes[k % codes.len()];
                        let r = s.import(
                            &format!("pos{seq}"),
                            &[("FAKECUDA_FAIL", format!("*:{seq}:{code}"))],
                            &[],
                        );
                        let ctx = format!("position {seq} ({sym}) with {code}: {}", r.why());
                        assert!(
                            expected_exit(sym, details, code, k >= first_release).contains(&r.code),
                            "{ctx}"
                        );
                        // The failure was the call that was asked to fail.
                        assert!(
                            r.log
                                .calls
                                .iter()
                                .any(|c| c.0 == *seq && c.1 == *sym && c.2 == code),
                            "{ctx}"
                        );
                        r.assert_clean_reverse();
                        if r.code == 3 || r.code == 0 {
                            assert!(r.log.held.is_empty(), "{ctx}");
                        }
                        if r.code == 4 {
                            r.assert_held_matches_report();
                            assert!(!r.log.held.is_empty(), "{ctx}");
                        }
                        if r.code == 3 && sym.starts_with("cuDevice") && !sym.contains("Primary") {
                            assert_eq!(r.report()["failure"]["step"], "device", "{ctx}");
                        }
                        // A failed driver call is in the report by number.
                        if r.code == 3 || r.code == 4 {
                            let status =
                                |v: &Value| v["driver"]["status"].as_i64() == Some(code as i64);
                            let rep = r.report();
                            let in_failure = status(&rep["failure"]);
                            let in_remaining = rep["remaining"]
                                .as_array()
                                .is_some_and(|a| a.iter().any(status));
                            // (A used GPU whose UUID could not be read: named in the message.)
                            let in_message = rep["failure"]["step"] == "device"
                                && r.failure_message().contains(&format!("({code})"))
                                || r.failure_message().contains(&format!("CUDA error {code} "));
                            assert!(in_failure || in_remaining || in_message, "{ctx}");
                        }
                        if r.code == 3 && code == 919 {
                            assert!(
                                r.report()
                                    .to_string()
                                    .contains("CUDA error 919 (unknown to this build)"),
                                "{ctx}"
                            );
                        }
                        out.push((k, r.code));
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.len(), calls.len());
    let by_exit = results.iter().fold(BTreeMap::new(), |mut m, (_, c)| {
        *m.entry(*c).or_insert(0) += 1;
        m
    });
    eprintln!(
        "fakecuda: {} call positions failed one by one in {:?}: exits {by_exit:?}",
        calls.len(),
        started.elapsed()
    );
    assert!(by_exit.get(&3).copied().unwrap_or(0) > 30 && by_exit.contains_key(&4));
}

#[test]
fn a_failed_release_during_rollback_is_exit_4_with_the_rest_released() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    // Fail the second rank's verify, and the first unmap of the rollback.
    for (fail, release) in [
        ("cuPointerGetAttribute:5", "cuMemUnmap:1"),
        ("cuMemSetAccess:3", "cuMemRelease:1"),
        ("cuIpcOpenMemHandle_v2:2", "cuIpcCloseMemHandle:1"),
        ("cuMemMap:4", "cuDevicePrimaryCtxRelease_v2:1"),
    ] {
        let r = s.import(
            "rollback",
            &[("FAKECUDA_FAIL", format!("{fail}:919,{release}:36"))],
            &[],
        );
        assert_eq!(r.code, 4, "{fail}/{release}: {}", r.why());
        r.assert_clean_reverse();
        r.assert_held_matches_report();
        assert!(r
            .report()
            .to_string()
            .contains("CUDA error 36 (unknown to this build)"));
    }
}

#[test]
fn a_signal_during_a_driver_call_exits_130_with_everything_released() {
    let b = need_cc!();
    let s = Scenario::mixed(b);
    let cases = [
        (libc::SIGINT, "cuMemMap:2"),
        (libc::SIGTERM, "cuIpcOpenMemHandle_v2:2"),
        (libc::SIGINT, "cuPointerGetAttribute:1"),
        (libc::SIGTERM, "cuMemImportFromShareableHandle:3"),
    ];
    std::thread::scope(|sc| {
        for (n, (sig, at)) in cases.into_iter().enumerate() {
            let s = &s;
            sc.spawn(move || {
                let log = s.dir.path().join(format!("sig{n}.log"));
                let inv = s.inv();
                let child = s
                    .command(
                        &log,
                        &[("FAKECUDA_DELAY", format!("{at}:1000"))],
                        &["import", inv.to_str().unwrap(), "--format", "json"],
                    )
                    .spawn()
                    .unwrap();
                let sym = at.split(':').next().unwrap();
                wait_for("the delayed call", || {
                    std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains(&format!("delay\t{sym}\t"))
                });
                signal(&child, sig);
                let r = finish(child, &log);
                assert_eq!(r.code, 130, "{at}: {}", r.why());
                assert_eq!(r.report()["result"], "interrupted");
                r.assert_clean_reverse();
                assert!(r.log.held.is_empty(), "{:?}", r.log.held);
                assert!(!r.log.released.is_empty());
                // The call in flight finished; no acquiring call came after it.
                let nth: usize = at.split(':').nth(1).unwrap().parse().unwrap();
                let delayed = r
                    .log
                    .calls
                    .iter()
                    .enumerate()
                    .filter(|c| c.1 .1 == sym)
                    .nth(nth - 1)
                    .map(|c| c.0)
                    .unwrap();
                assert!(r.log.calls[delayed + 1..].iter().all(|c| ![
                    "cuMemMap",
                    "cuMemImportFromShareableHandle",
                    "cuIpcOpenMemHandle_v2"
                ]
                .contains(&c.1.as_str())));
            });
        }
    });
}

/// The fake is only worth its "no violation" if it catches violations:
/// `selftest.c` breaks each rule once through the same entry points.
#[test]
fn the_fake_reports_every_broken_rule() {
    let b = need_cc!();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("selftest");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-O1", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(format!("{SRC}/selftest.c"))
        .arg(b.lib_dir.join("libcuda.so.1"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = dir.path().join("selftest.log");
    let h = hex("fabric", 0, 0);
    let out = Command::new(&exe)
        .arg(&h)
        .env_clear()
        .env("LD_LIBRARY_PATH", &b.lib_dir)
        .env("FAKECUDA_GPUS", gpu(0))
        .env("FAKECUDA_FABRIC", format!("{h}:0:{}", 4 * MIB))
        .env("FAKECUDA_LOG", &log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let l = parse_log(&std::fs::read_to_string(&log).unwrap());
    let broken: Vec<&str> = l
        .violations
        .iter()
        .map(|v| v.split('\t').nth(2).unwrap_or(""))
        .collect();
    for want in [
        "called before cuInit",
        "(an ordinal?)",
        "without a retain",
        "prop.type 0",
        "is not a multiple of",
        "offset 4096, must be 0",
        "is not inside a reservation",
        "overlaps a mapping",
        "access flags 2",
        "is still mapped",
        "is not a reservation",
        "double release",
        "is released",
    ] {
        assert!(
            broken.iter().any(|b| b.contains(want)),
            "{want}: {broken:#?}"
        );
    }
    assert_eq!(
        broken
            .iter()
            .filter(|b| b.contains("is not exactly a mapping"))
            .count(),
        3
    );
    assert_eq!(l.violations.len(), 16, "{broken:#?}");
    // Everything the self-test took it gave back.
    assert!(l.held.is_empty() && l.exited, "{l:?}");
}

/// A build of the fake with these `-D` defines (`FAKECUDA_OLD_DRIVER`,
/// `FAKECUDA_AS_STUB`), as `libcuda.so.1` in a fresh directory.
pub(crate) fn build_variant(defines: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1"])
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg("-o")
        .arg(dir.path().join("libcuda.so.1"))
        .arg(format!("{SRC}/fakecuda.c"))
        .arg("-lpthread")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn a_driver_without_an_entry_point_is_exit_2_naming_it() {
    let b = need_cc!();
    let dir = build_variant(&["FAKECUDA_OLD_DRIVER"]);
    let mut s = Scenario::mixed(b);
    for (k, v) in s.env.iter_mut() {
        if k == "LD_LIBRARY_PATH" {
            *v = dir.path().display().to_string();
        }
    }
    let r = s.import("old", &[], &[]);
    assert_eq!(r.code, 2, "{}", r.why());
    assert!(
        r.stderr.contains("too old") && r.stderr.contains("cuMemImportFromShareableHandle"),
        "{}",
        r.stderr
    );
    assert!(r.log.acquired.is_empty());
    // The probe needs none of the VMM calls: audit --live still lists the GPUs.
    let log = s.dir.path().join("old-audit.log");
    let out = s
        .command(
            &log,
            &[],
            &[
                "audit",
                "--live",
                s.inv().to_str().unwrap(),
                "--format",
                "json",
            ],
        )
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
