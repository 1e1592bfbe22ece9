#!/usr/bin/env python3
"""Times kvcr against the floor (reading the files) and a plain Python
validator on a generated inventory; see docs/bench.md. Run through
benches/audit.sh, which builds kvcr and the generator first.

Every command runs with stdout to /dev/null, warm cache, contenders
alternating. Each run goes through the small bench-run helper
(examples/bench-run.rs), which times spawn to wait4 and reports the child's
ru_maxrss from wait4 (no /usr/bin/time needed; a child spawned straight
from this Python process would inherit its RSS high-water mark).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

RUNNER = None


def runs(argv, n=1, env=None):
    """[(wall seconds, peak RSS KiB, exit status, CPU seconds)] of n runs,
    stdout discarded."""
    out = subprocess.run([RUNNER, "-n", str(n), "--", *argv], env=env, capture_output=True, text=True, check=True)
    res = []
    for line in out.stdout.split("\n"):
        if line:
            wall, rss, code, cpu = line.split()
            res.append((float(wall), int(rss), int(code), float(cpu)))
    return res


def run(argv, env=None):
    return runs(argv, 1, env)[0]


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def generate(gen, path, groups):
    done = path + ".done"
    if os.path.exists(done):
        return
    if os.path.exists(path):
        subprocess.run(["rm", "-rf", path], check=True)
    subprocess.run([gen, path, str(groups)], check=True)
    open(done, "w").close()


def size_of(root):
    n = total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            n += 1
            total += os.lstat(os.path.join(dirpath, f)).st_size
    return n, total


def summary_of(argv, env=None):
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    return out.returncode, json.loads(out.stdout)["summary"]


def check_agreement(args, root, groups):
    """Both validators accept every group (python recomputes every digest
    itself), and both reject a descriptor edited after sealing."""
    rc, s = summary_of([args.kvcr, "audit", root, "--format", "json"])
    assert rc == 0 and s["accepted"] == groups, f"kvcr: exit {rc}, {s}"
    rc, s = summary_of([sys.executable, args.validator, root])
    assert rc == 0 and s["accepted"] == groups, f"python: exit {rc}, {s}"
    with tempfile.TemporaryDirectory() as t:
        small = os.path.join(t, "inv")
        subprocess.run([args.gen, small, "2"], check=True, stderr=subprocess.DEVNULL)
        victim = os.path.join(small, "g00001", "rank-3.json")
        with open(victim) as f:
            text = f.read()
        with open(victim, "w") as f:
            f.write(text.replace('"pid": 4242', '"pid": 4243'))
        rc, s = summary_of([args.kvcr, "audit", small, "--format", "json"])
        assert rc == 1 and s["accepted"] == 1 and s["rejected"] == 1, f"kvcr tamper: {s}"
        rc, s = summary_of([sys.executable, args.validator, small])
        assert rc == 1 and s["accepted"] == 1 and s["rejected"] == 1, f"python tamper: {s}"
    print(f"agreement: kvcr and python accept all {groups} groups and reject the same edited file")


def median(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvcr", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--runner", required=True, help="the bench-run helper")
    ap.add_argument("--validator", default=os.path.join(os.path.dirname(__file__), "validator.py"))
    ap.add_argument("--dir", required=True, help="where inventories are generated (kept for reuse)")
    ap.add_argument("--groups", type=int, default=2500)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--scale-groups", type=int, default=10000, help="0: skip the RSS scaling run")
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--kvcr-baseline", help="another kvcr binary (e.g. before a change) timed in the same run")
    args = ap.parse_args()
    global RUNNER
    RUNNER = args.runner

    print(f"machine: {os.cpu_count()} CPUs; load average at start: {load()}")
    root = os.path.join(args.dir, f"inv-{args.groups}")
    generate(args.gen, root, args.groups)
    n, total = size_of(root)
    print(f"inventory: {root}: {n} descriptors, {args.groups} groups, {total / 1e6:.1f} MB")
    check_agreement(args, root, args.groups)

    env1 = dict(os.environ, KVCR_THREADS="1")
    contenders = [
        ("floor", ["sh", "-c", f"find '{root}' -type f -exec cat {{}} + > /dev/null"], None),
        ("python", [sys.executable, args.validator, root], None),
        ("kvcr", [args.kvcr, "audit", root, "--format", "json"], None),
        ("kvcr 1 thread", [args.kvcr, "audit", root, "--format", "json"], env1),
    ]
    if args.kvcr_baseline:
        contenders += [
            ("baseline", [args.kvcr_baseline, "audit", root, "--format", "json"], None),
            ("baseline 1 thr", [args.kvcr_baseline, "audit", root, "--format", "json"], env1),
        ]
    for _, argv, env in contenders:  # warm the cache and the binaries
        run(argv, env)
    times = {name: [] for name, _, _ in contenders}
    rss = {name: [] for name, _, _ in contenders}
    cpu = {name: [] for name, _, _ in contenders}
    for _ in range(args.runs):
        for name, argv, env in contenders:
            wall, maxrss, _, used = run(argv, env)
            times[name].append(wall)
            rss[name].append(maxrss)
            cpu[name].append(used)

    print(f"\n{args.runs} runs each, alternating, warm cache (median wall, min–max; median CPU user+sys):")
    for name, _, _ in contenders:
        t = times[name]
        print(
            f"  {name:14s} {median(t):7.3f} s   ({min(t):.3f}–{max(t):.3f})"
            f"   CPU {median(cpu[name]):6.3f} s   peak RSS {max(rss[name]) / 1024:6.1f} MiB"
        )
    floor, py, kv = (median(times[k]) for k in ("floor", "python", "kvcr"))
    print(f"  kvcr / floor   {kv / floor:6.2f}×   (target ≤ 1.2×, stretch ≤ 1.0×)")
    print(f"  python / kvcr  {py / kv:6.1f}×")
    if args.kvcr_baseline:
        base = median(times["baseline"])
        print(f"  baseline / floor {base / floor:6.2f}×   (kvcr / baseline {kv / base:.3f}×)")
    print(f"  kvcr peak RSS at {args.groups} groups: {max(rss['kvcr']) / 1024:.1f} MiB")

    # One 8-rank group, process start to exit.
    with tempfile.TemporaryDirectory() as t:
        one = os.path.join(t, "one")
        subprocess.run([args.gen, one, "1"], check=True, stderr=subprocess.DEVNULL)
        argv = [args.kvcr, "audit", one, "--format", "json"]
        runs(argv, 10)
        lat = [r[0] for r in runs(argv, args.latency_runs)]
        base = [r[0] for r in runs(["true"], args.latency_runs)]
    print(
        f"\none 8-rank group: median {median(lat) * 1e3:.2f} ms over {args.latency_runs} runs"
        f" (p90 {sorted(lat)[int(0.9 * len(lat))] * 1e3:.2f} ms; spawning `true` takes {median(base) * 1e3:.2f} ms)"
    )

    if args.scale_groups:
        big = os.path.join(args.dir, f"inv-{args.scale_groups}")
        generate(args.gen, big, args.scale_groups)
        argv = [args.kvcr, "audit", big, "--format", "json"]
        res = runs(argv, 4)[1:]
        print(
            f"\nscale: {args.scale_groups} groups ({args.scale_groups * 8} descriptors): kvcr median"
            f" {median([r[0] for r in res]):.3f} s, peak RSS {max(r[1] for r in res) / 1024:.1f} MiB"
        )
    print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
