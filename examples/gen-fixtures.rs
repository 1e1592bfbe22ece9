//! Regenerates `fixtures/`: one inventory per accepted shape and per finding
//! code that git can hold, each with a `case.json` (arguments, expected exit
//! status, codes that must appear). Expected reports (`expected.json`) are
//! then written by `KVCR_BLESS=1 cargo test --test it audit::fixtures::` and reviewed.
//!
//! Usage: cargo run --example gen-fixtures [-- OUT_DIR]   (default: fixtures)

// A program of the project's tests and benchmarks, not the shipped crate: it
// prints its results, reads its own files by path and, where it drives the
// driver or the kernel, calls them directly; the crate's rules (Cargo.toml
// [lints], clippy.toml) hold for src/ alone.
#![allow(
    unsafe_code,
    clippy::undocumented_unsafe_blocks,
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr
)]

use kvcr_testkit as testkit;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use testkit::{put, put_group, to_bytes, Desc, INCARNATION_B};

struct Case {
    name: &'static str,
    about: &'static str,
    args: Vec<&'static str>,
    exit: i32,
    codes: Vec<&'static str>,
    build: fn(&Path),
}

fn with(d: &Desc, f: impl FnOnce(&mut Value)) -> Vec<u8> {
    d.bytes_with(f)
}

fn tp(n: u64) -> Desc {
    Desc::new("llama3-70b-a", 0, n, 1)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "accept-tp1",
            about: "one rank, \
            accepted",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| put_group(d, "", &tp(1)),
        },
        Case {
            name: "accept-tp4",
            about: "four TP ranks, \
            accepted",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| put_group(d, "", &tp(4)),
        },
        Case {
            name: "accept-tp2pp2",
            about: "tp=2 × pp=2, \
            accepted",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| put_group(d, "", &Desc::new("mixtral-tp2pp2", 0, 2, 2)),
        },
        Case {
            name: "accept-two-groups",
            about: "two independent groups, both \
            accepted",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| {
                put_group(d, "engine-a", &tp(2));
                let mut b = Desc::new("qwen2-7b-b", 0, 2, 1);
                b.group = 1;
                b.incarnation = INCARNATION_B.into();
                put_group(d, "engine-b", &b);
            },
        },
        Case {
            name: "accept-superseded",
            about: "a complete older incarnation (KV108 notices) \
            beside the complete current one",
            args: vec![],
            exit: 0,
            codes: vec!["KV108"],
            build: |d| {
                put_group(d, "old", &tp(2));
                let mut n = tp(2);
                n.incarnation = INCARNATION_B.into();
                n.epoch = 2;
                put_group(d, "new", &n);
            },
        },
        Case {
            name: "accept-posix-fd",
            about: "two ranks whose handles are posix_fd (no handle \
            bytes in the files): importable with --dry-run straight from a \
            checkout",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| {
                let mut g = tp(2);
                g.handle_kind = "posix_fd";
                put_group(d, "", &g);
                // The deployment profile `kvcr import` requires (README).
                let v = g.value();
                write_profile(
                    d,
                    json!({"world_size": 2, "tp": 2, "pp": 1,
                        "model": v["model"], "geometry": v["geometry"],
                        "gpus": [testkit::gpu(0, 0), testkit::gpu(0, 1)]}),
                );
            },
        },
        Case {
            name: "accept-nested",
            about: "ranks spread over nested \
            directories",
            args: vec![],
            exit: 0,
            codes: vec![],
            build: |d| {
                let g = tp(4);
                for (rank, sub) in [(0, "a"), (1, "a/b"), (2, "a/b/c/d"), (3, "x/y/z/w/v/u/t")] {
                    let mut r = g.clone();
                    r.rank = rank;
                    put(d, &format!("{sub}/rank-{rank}.json"), &r.bytes());
                }
            },
        },
        Case {
            name: "kv001-symlink",
            about: "rank 1 is a symlink to a file outside the root; a \
            symlinked directory is not \
            descended",
            args: vec![],
            exit: 1,
            codes: vec!["KV001", "KV103"],
            build: |d| {
                let g = tp(2);
                put(d, "rank-0.json", &g.bytes());
                let mut r1 = g.clone();
                r1.rank = 1;
                put(&d.join("../outside"), "rank-1.json", &r1.bytes());
                symlink("../outside/rank-1.json", &d.join("rank-1.json"));
                symlink("../outside", &d.join("linked-dir"));
            },
        },
        Case {
            name: "kv002-not-regular",
            about: "a directory named \
            rank-1.json",
            args: vec![],
            exit: 1,
            codes: vec!["KV002", "KV103"],
            build: |d| {
                let g = tp(2);
                put(d, "rank-0.json", &g.bytes());
                put(
                    d,
                    "rank-1.json/keep",
                    b"a directory with a descriptor's name\n",
                );
            },
        },
        Case {
            name: "kv006-malformed",
            about: "rank 1 has a duplicate \
            key",
            args: vec![],
            exit: 1,
            codes: vec!["KV006"],
            build: |d| {
                let g = tp(2);
                put(d, "rank-0.json", &g.bytes());
                let mut r1 = g.clone();
                r1.rank = 1;
                let text = String::from_utf8(r1.bytes()).unwrap();
                let dup = text.replacen("\"epoch\": 1,", "\"epoch\": 1,\n  \"epoch\": 1,", 1);
                put(d, "rank-1.json", dup.as_bytes());
            },
        },
        Case {
            name: "kv007-schema",
            about: "rank 1 lacks geometry.dtype and has a float \
            num_blocks",
            args: vec![],
            exit: 1,
            codes: vec!["KV007"],
            build: |d| {
                let mut r1 = tp(2);
                r1.rank = 1;
                put(d, "rank-0.json", &tp(2).bytes());
                put(
                    d,
                    "rank-1.json",
                    &with(&r1, |v| {
                        v["geometry"].as_object_mut().unwrap().remove("dtype");
                        v["geometry"]["num_blocks"] = json!(1024.5);
                    }),
                );
            },
        },
        Case {
            name: "kv008-digest",
            about: "rank 1 was edited after \
            sealing",
            args: vec![],
            exit: 1,
            codes: vec!["KV008"],
            build: |d| {
                let mut r1 = tp(2);
                r1.rank = 1;
                put(d, "rank-0.json", &tp(2).bytes());
                let text = String::from_utf8(r1.bytes()).unwrap();
                put(
                    d,
                    "rank-1.json",
                    text.replacen(
                        "\"num_blocks\": \
                    1024",
                        "\"num_blocks\": 2048",
                        1,
                    )
                    .as_bytes(),
                );
            },
        },
        Case {
            name: "kv009-torn",
            about: "rank 1 exists only as a staging \
            leftover",
            args: vec![],
            exit: 1,
            codes: vec!["KV009", "KV103"],
            build: |d| {
                let mut r1 = tp(2);
                r1.rank = 1;
                put(d, "rank-0.json", &tp(2).bytes());
                let b = r1.bytes();
                put(d, ".rank-1.json.x7Qp2.tmp", &b[..b.len() / 2]);
            },
        },
        Case {
            name: "kv010-stray",
            about: "an accepted group beside an unrelated file (notice \
            only)",
            args: vec![],
            exit: 0,
            codes: vec!["KV010"],
            build: |d| {
                put_group(d, "", &tp(2));
                put(d, "NOTES.txt", b"operator notes\n");
            },
        },
        Case {
            name: "kv101-wrong-rank",
            about: "rank-1.json says rank 0; world_size is not tp × \
            pp in another group",
            args: vec![],
            exit: 1,
            codes: vec!["KV101"],
            build: |d| {
                put(d, "a/rank-0.json", &tp(2).bytes());
                put(d, "a/rank-1.json", &tp(2).bytes());
                let b = Desc::new("bad-world", 0, 2, 1);
                put(
                    d,
                    "b/rank-0.json",
                    &with(&b, |v| v["world_size"] = json!(3)),
                );
                let mut b1 = b.clone();
                b1.rank = 1;
                put(
                    d,
                    "b/rank-1.json",
                    &with(&b1, |v| v["world_size"] = json!(3)),
                );
                put(
                    d,
                    "b/rank-2.json",
                    &with(&b1, |v| {
                        v["world_size"] = json!(3);
                        v["rank"] = json!(2);
                    }),
                );
            },
        },
        Case {
            name: "kv102-duplicate-rank",
            about: "two current descriptors claim rank \
            1",
            args: vec![],
            exit: 1,
            codes: vec!["KV102"],
            build: |d| {
                put_group(d, "", &tp(2));
                let mut r1 = tp(2);
                r1.rank = 1;
                put(d, "copy/rank-1.json", &r1.bytes());
            },
        },
        Case {
            name: "kv103-missing-rank",
            about: "rank 2 of 4 is \
            missing",
            args: vec![],
            exit: 1,
            codes: vec!["KV103"],
            build: |d| {
                for rank in [0, 1, 3] {
                    let mut r = tp(4);
                    r.rank = rank;
                    put(d, &format!("rank-{rank}.json"), &r.bytes());
                }
            },
        },
        Case {
            name: "kv104-geometry",
            about: "rank 1 has other num_blocks; rank 2 allocations \
            too small; rank 3 repeats an allocation \
            id",
            args: vec![],
            exit: 1,
            codes: vec!["KV104"],
            build: |d| {
                let g = tp(4);
                put(d, "rank-0.json", &g.bytes());
                let mut r = g.clone();
                r.rank = 1;
                put(
                    d,
                    "rank-1.json",
                    &with(&r, |v| v["geometry"]["num_blocks"] = json!(512)),
                );
                r.rank = 2;
                put(
                    d,
                    "rank-2.json",
                    &with(&r, |v| v["allocations"][1]["size_bytes"] = json!(4096)),
                );
                r.rank = 3;
                put(
                    d,
                    "rank-3.json",
                    &with(&r, |v| v["allocations"][1]["id"] = json!("kv-0")),
                );
            },
        },
        Case {
            name: "kv105-model",
            about: "rank 1 was computed by another model \
            revision",
            args: vec![],
            exit: 1,
            codes: vec!["KV105"],
            build: |d| {
                put(d, "rank-0.json", &tp(2).bytes());
                let mut r = tp(2);
                r.rank = 1;
                put(
                    d,
                    "rank-1.json",
                    &with(&r, |v| v["model"]["revision"] = json!("0e9e39f2")),
                );
            },
        },
        Case {
            name: "kv106-gpu-uuid",
            about: "ranks 0 and 1 claim one \
            GPU",
            args: vec![],
            exit: 1,
            codes: vec!["KV106"],
            build: |d| {
                put(d, "rank-0.json", &tp(2).bytes());
                let mut r = tp(2);
                r.rank = 1;
                put(
                    d,
                    "rank-1.json",
                    &with(&r, |v| v["gpu_uuid"] = json!(testkit::gpu(0, 0))),
                );
            },
        },
        Case {
            name: "kv106-mig-alias",
            about: "rank 1 claims rank 0's GPU spelled MIG-<same \
            uuid>: one GPU, two ranks",
            args: vec![],
            exit: 1,
            codes: vec!["KV106"],
            build: |d| {
                put(d, "rank-0.json", &tp(2).bytes());
                let mut r = tp(2);
                r.rank = 1;
                let mig = testkit::gpu(0, 0).replacen("GPU-", "MIG-", 1);
                put(d, "rank-1.json", &with(&r, |v| v["gpu_uuid"] = json!(mig)));
            },
        },
        Case {
            name: "kv110-two-nodes",
            about: "one inventory, two nodes: rank 1 names another \
            hostname and boot id (no --live needed)",
            args: vec![],
            exit: 1,
            codes: vec!["KV110"],
            build: |d| {
                put(d, "rank-0.json", &tp(2).bytes());
                let mut r = tp(2);
                r.rank = 1;
                put(
                    d,
                    "rank-1.json",
                    &with(&r, |v| {
                        v["node"]["hostname"] = json!("gpu-node-18");
                        v["node"]["boot_id"] = json!("0b7f3c2e-1d4a-4e5f-8a9b-7c6d5e4f3a21");
                    }),
                );
            },
        },
        Case {
            name: "kv111-handle-reuse",
            about: "rank 1 carries rank 0's fabric handle, and one \
            of rank 0's handles appears twice",
            args: vec![],
            exit: 1,
            codes: vec!["KV111"],
            build: |d| {
                let r0 = tp(2);
                let mut r1 = tp(2);
                r1.rank = 1;
                put(
                    d,
                    "rank-0.json",
                    &with(&r0, |v| {
                        let h = v["allocations"][0]["handle"].clone();
                        v["allocations"][1]["handle"] = h;
                    }),
                );
                put(
                    d,
                    "rank-1.json",
                    &with(&r1, |v| {
                        let hex = testkit::handle_hex("llama3-70b-a", 0, 0);
                        v["allocations"][1]["handle"] = json!({"kind": "fabric", "hex": hex});
                    }),
                );
            },
        },
        Case {
            name: "kv111-posix-fd-reuse",
            about: "both ranks name one fd of the same owner \
            process",
            args: vec![],
            exit: 1,
            codes: vec!["KV111"],
            build: |d| {
                let mut g = tp(2);
                g.handle_kind = "posix_fd";
                put(d, "rank-0.json", &g.bytes());
                let mut r1 = g.clone();
                r1.rank = 1;
                put(
                    d,
                    "rank-1.json",
                    &with(&r1, |v| {
                        v["allocations"][0]["handle"]["fd"] =
                            json!(testkit::handle_fd("llama3-70b-a", 0, 0, 2))
                    }),
                );
            },
        },
        Case {
            name: "kv108-future",
            about: "with --max-age, a descriptor dated a year in the \
            future cannot prove its \
            age",
            args: vec!["--max-age", "1d"],
            exit: 1,
            codes: vec!["KV108"],
            build: |d| {
                put(
                    d,
                    "rank-0.json",
                    &with(&tp(1), |v| v["created_unix_ms"] = json!(i64::MAX)),
                );
            },
        },
        Case {
            name: "kv108-seconds",
            about: "created_unix_ms written in seconds, not milliseconds: its age \
            cannot be proven, whatever the options",
            args: vec![],
            exit: 1,
            codes: vec!["KV108"],
            build: |d| {
                for rank in 0..2 {
                    let r = Desc { rank, ..tp(2) };
                    put(
                        d,
                        &format!("rank-{rank}.json"),
                        &with(&r, |v| {
                            v["created_unix_ms"] = json!(testkit::CREATED_UNIX_MS / 1000)
                        }),
                    );
                }
            },
        },
        Case {
            name: "kv106-profile-gpu",
            about: "the profile puts rank 1 on another \
            GPU",
            args: vec!["--profile", "profile.json"],
            exit: 1,
            codes: vec!["KV106"],
            build: |d| {
                put_group(d, "", &tp(2));
                write_profile(d, json!({"gpus": [testkit::gpu(0, 0), testkit::gpu(0, 7)]}));
            },
        },
        Case {
            name: "kv107-tie",
            about: "two incarnations tie on the highest \
            epoch",
            args: vec![],
            exit: 1,
            codes: vec!["KV107"],
            build: |d| {
                put_group(d, "a", &tp(2));
                let mut b = tp(2);
                b.incarnation = INCARNATION_B.into();
                put_group(d, "b", &b);
            },
        },
        Case {
            name: "kv107-profile-incarnation",
            about: "the profile pins the older incarnation: \
            the newer one is a KV107 \
            notice",
            args: vec!["--profile", "profile.json"],
            exit: 0,
            codes: vec!["KV107"],
            build: |d| {
                put_group(d, "old", &tp(2));
                let mut n = tp(2);
                n.incarnation = INCARNATION_B.into();
                n.epoch = 2;
                put_group(d, "new", &n);
                write_profile(d, json!({"incarnation": testkit::INCARNATION_A}));
            },
        },
        Case {
            name: "kv108-no-fallback",
            about: "the current incarnation is incomplete; the \
            complete older one is never used",
            args: vec![],
            exit: 1,
            codes: vec!["KV108", "KV103"],
            build: |d| {
                put_group(d, "old", &tp(2));
                let mut n = tp(2);
                n.incarnation = INCARNATION_B.into();
                n.epoch = 2;
                put(d, "new/rank-0.json", &n.bytes());
            },
        },
        Case {
            name: "kv108-min-epoch",
            about: "the profile demands epoch ≥ \
            5",
            args: vec!["--profile", "profile.json"],
            exit: 1,
            codes: vec!["KV108"],
            build: |d| {
                put_group(d, "", &tp(2));
                write_profile(d, json!({"min_epoch": 5}));
            },
        },
        Case {
            name: "kv108-max-age",
            about: "descriptors older than \
            --max-age",
            args: vec!["--max-age", "3600"],
            exit: 1,
            codes: vec!["KV108"],
            build: |d| put_group(d, "", &tp(2)),
        },
        Case {
            name: "profile-accept",
            about: "a full profile that \
            matches",
            args: vec!["--profile", "profile.json"],
            exit: 0,
            codes: vec![],
            build: |d| {
                put_group(d, "", &tp(2));
                let v = tp(2).value();
                write_profile(
                    d,
                    json!({"world_size": 2, "tp": 2, "pp": 1,
                        "model": v["model"], "geometry": v["geometry"],
                        "gpus": [testkit::gpu(0, 0), testkit::gpu(0, 1)],
                        "incarnation": testkit::INCARNATION_A, "min_epoch": 1}),
                );
            },
        },
        Case {
            name: "engine-filter",
            about: "--engine keeps the accepted group and ignores the \
            broken one",
            args: vec!["--engine", "qwen2-7b-b"],
            exit: 0,
            codes: vec![],
            build: |d| {
                put(d, "engine-a/rank-0.json", &tp(2).bytes());
                let mut b = Desc::new("qwen2-7b-b", 0, 2, 1);
                b.group = 1;
                put_group(d, "engine-b", &b);
            },
        },
        Case {
            name: "empty",
            about: "no descriptor at all: nothing retained, exit 0 with cause \
            \"empty\"",
            args: vec![],
            exit: 0,
            codes: vec!["KV010"],
            build: |d| put(d, "README", b"nothing retained\n"),
        },
    ]
}

/// Writes `profile.json` next to the inventory (the case's directory).
fn write_profile(inv: &Path, extra: Value) {
    let mut p = json!({"schema": "kvcr.profile/v1", "engine_id": "llama3-70b-a"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    put(inv.parent().unwrap(), "profile.json", &to_bytes(&p));
}

fn symlink(target: &str, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

fn main() {
    let out: PathBuf = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fixtures".into())
        .into();
    for c in cases() {
        let dir = out.join(c.name);
        if dir.exists() {
            // Keep a blessed expected.json; rebuild everything else.
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.file_name().unwrap() != "expected.json" {
                    if p.is_dir() && !p.is_symlink() {
                        std::fs::remove_dir_all(&p).unwrap();
                    } else {
                        std::fs::remove_file(&p).unwrap();
                    }
                }
            }
        }
        let inv = dir.join("inventory");
        std::fs::create_dir_all(&inv).unwrap();
        (c.build)(&inv);
        let case = json!({"about": c.about, "args": c.args, "exit": c.exit, "codes": c.codes});
        put(&dir, "case.json", &to_bytes(&case));
        println!("{}", dir.display());
    }
}
