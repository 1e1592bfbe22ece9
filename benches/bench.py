#!/usr/bin/env python3
"""Times kvcr against the floors (reading the files: benches/floor.c plain
and under docs/format.md §2.3, and find | cat) and a plain Python
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


def build_floor(args):
    """benches/floor.c (the read floors of docs/bench.md), built with cc -O2."""
    if args.floor:
        return args.floor
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor.c")
    out = os.path.join(args.dir, "floor")
    subprocess.run(["cc", "-O2", "-pthread", "-o", out, src], check=True)
    return out


def floors(floor_bin, root):
    """The contenders that only read: the tight reader (open, read, close),
    the same under docs/format.md §2.3 (O_PATH open, fstat, reopen through
    /proc/self/fd, read, close), both on kvcr's default thread count, and
    find | cat."""
    return [
        ("read floor", [floor_bin, "plain", root], None),
        ("§2.3 floor", [floor_bin, "rule", root], None),
        ("find|cat", ["sh", "-c", f"find '{root}' -type f -exec cat {{}} + > /dev/null"], None),
    ]


def time_contenders(contenders, n):
    """Times each contender n times, warm cache, interleaved: one warm-up
    run each, then rounds in which the order is reversed every other round
    (ABBA), so no contender always runs right after the same one. Prints
    medians and the ratios to both floors; returns the wall times."""
    for _, argv, env in contenders:  # warm the cache and the binaries
        run(argv, env)
    times = {name: [] for name, _, _ in contenders}
    rss = {name: [] for name, _, _ in contenders}
    cpu = {name: [] for name, _, _ in contenders}
    start = load()
    for i in range(n):
        for name, argv, env in contenders if i % 2 == 0 else contenders[::-1]:
            wall, maxrss, code, used = run(argv, env)
            assert code == 0, f"{name}: exit status {code}"
            times[name].append(wall)
            rss[name].append(maxrss)
            cpu[name].append(used)
    print(f"\n{n} runs each, interleaved (ABBA), warm cache; load average {start} at start, {load()} at end")
    print(
        "  (median wall, min–max; median CPU user+sys; peak RSS;"
        " wall / read floor, wall / §2.3 floor; CPU / read floor, CPU / §2.3 floor)"
    )
    plain, rule = median(times["read floor"]), median(times["§2.3 floor"])
    cplain, crule = median(cpu["read floor"]), median(cpu["§2.3 floor"])
    for name, _, _ in contenders:
        t = times[name]
        m, c = median(t), median(cpu[name])
        print(
            f"  {name:14s} {m:7.3f} s   ({min(t):.3f}–{max(t):.3f})"
            f"   CPU {c:6.3f} s   peak RSS {max(rss[name]) / 1024:6.1f} MiB"
            f"   wall {m / plain:5.2f}× {m / rule:5.2f}×   CPU {c / cplain:5.2f}× {c / crule:5.2f}×"
        )
    if "baseline" in times:
        print(f"  CPU kvcr / baseline {median(cpu['kvcr']) / median(cpu['baseline']):.3f}×")
    return times


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
    ap.add_argument("--scale-runs", type=int, default=3, help="runs each at --scale-groups")
    ap.add_argument("--no-python", action="store_true", help="leave the Python validator out of the timed runs")
    ap.add_argument("--floor", help="a built benches/floor.c (default: built with cc -O2 into --dir)")
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

    floor_bin = build_floor(args)
    env1 = dict(os.environ, KVCR_THREADS="1")
    contenders = floors(floor_bin, root) + [
        ("kvcr", [args.kvcr, "audit", root, "--format", "json"], None),
        ("kvcr 1 thread", [args.kvcr, "audit", root, "--format", "json"], env1),
    ]
    if not args.no_python:
        contenders.insert(3, ("python", [sys.executable, args.validator, root], None))
    if args.kvcr_baseline:
        contenders += [
            ("baseline", [args.kvcr_baseline, "audit", root, "--format", "json"], None),
            ("baseline 1 thr", [args.kvcr_baseline, "audit", root, "--format", "json"], env1),
        ]
    times = time_contenders(contenders, args.runs)
    kv = median(times["kvcr"])
    if not args.no_python:
        print(f"  python / kvcr  {median(times['python']) / kv:6.1f}×")
    if args.kvcr_baseline:
        base = median(times["baseline"])
        print(f"  kvcr / baseline {kv / base:.3f}×   (1 thread: {median(times['kvcr 1 thread']) / median(times['baseline 1 thr']):.3f}×)")

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
        n, total = size_of(big)
        print(f"\nscale: {big}: {n} descriptors, {args.scale_groups} groups, {total / 1e6:.1f} MB")
        contenders = floors(floor_bin, big) + [("kvcr", [args.kvcr, "audit", big, "--format", "json"], None)]
        if args.kvcr_baseline:
            contenders.append(("baseline", [args.kvcr_baseline, "audit", big, "--format", "json"], None))
        times = time_contenders(contenders, args.scale_runs)
        if args.kvcr_baseline:
            print(f"  kvcr / baseline {median(times['kvcr']) / median(times['baseline']):.3f}×")
    print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
