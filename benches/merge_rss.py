#!/usr/bin/env python3
"""Peak RSS of `kvcr merge` against the size of its inputs (issue #19 item 6).

Builds pairs of per-node reports (node a: ranks 0-1, node b: ranks 2-3 of
many TP=4 groups), each pair of a given total size, from two genuine
reports that kvcr itself writes, then runs `kvcr merge A B --format json >
/dev/null` under /usr/bin/time -v for each binary given, alternating, and
prints peak RSS, its ratio to the input size, and the target
(4 x input + 32 MiB). See docs/bench.md.

Usage: benches/merge_rss.py --kvcr NEW [--baseline OLD] [--dir DIR]
           [--sizes-mib 8,32,127] [--baseline-max-mib 32] [--runs 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def base_reports(kvcr):
    inv = os.path.join(REPO, "fixtures", "accept-tp4", "inventory")
    out = []
    for local, host in (("0-1", "bench-node-a"), ("2-3", "bench-node-b")):
        p = subprocess.run(
            [kvcr, "audit", inv, "--format", "json", "--local-ranks", local],
            capture_output=True,
            check=False,
        )
        v = json.loads(p.stdout)
        v["host"] = host
        out.append(v)
    return out


STRAY = {"path": "@@ENGINE@@.tmp", "findings": [{"code": "KV010", "name": "stray",
          "severity": "notice", "message": "unexpected file; not read", "path": "@@ENGINE@@.tmp"}]}


def write_report(base, path, target_bytes, compact, shape):
    """`base` with its one group copied (engine ids bench-N), or with stray
    files (shape "files"), until the file is about `target_bytes`; streamed,
    so Python holds one entry at a time."""
    group = base["groups"][0]
    key = "files" if shape == "files" else "groups"
    head = dict(base)
    head[key] = ["@@ITEMS@@"]
    fmt = {"separators": (",", ":")} if compact else {"indent": 2}
    text = json.dumps(head, **fmt)
    before, after = text.split('"@@ITEMS@@"')
    if shape == "files":
        template = json.dumps(STRAY, **fmt)
    else:
        template = json.dumps(group, **fmt).replace(group["engine_id"], "@@ENGINE@@")
    n = 0
    with open(path, "w") as f:
        f.write(before)
        written = len(before) + len(after)
        while True:
            s = template.replace("@@ENGINE@@", f"bench-{n:07d}")
            if n and written + len(s) + 2 > target_bytes:
                break
            if n:
                f.write("," if compact else ",\n")
                written += 2
            f.write(s)
            written += len(s)
            n += 1
        f.write(after)
    return n


def peak_rss_kib(cmd):
    t0 = time.monotonic()
    p = subprocess.run(
        ["/usr/bin/time", "-v"] + cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.monotonic() - t0
    err = p.stderr.decode(errors="replace")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    if p.returncode not in (0, 1) or not m:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{err[-2000:]}")
    return int(m.group(1)), wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvcr", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--dir", default=os.environ.get("KVCR_BENCH_DIR", "/tmp/kvcr-merge-bench"))
    ap.add_argument("--sizes-mib", default="8,32,127")
    ap.add_argument("--baseline-max-mib", type=float, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shape", choices=["groups", "files"], default="groups",
                    help="what fills the reports: TP=4 groups, or stray files (KV010 notices)")
    ap.add_argument("--pretty", action="store_true",
                    help="indented inputs, as kvcr writes them (default: compact JSON, the worst case per byte)")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    bases = base_reports(a.kvcr)
    bins = [("kvcr", a.kvcr)] + ([("baseline", a.baseline)] if a.baseline else [])
    print(f"shape: {a.shape}, {'indented' if a.pretty else 'compact'} JSON")
    print(f"{'input MiB':>10} {'binary':>9} {'entries':>7} {'peak RSS MiB':>13} {'RSS/input':>9} "
          f"{'target MiB':>10} {'median s':>8}  ok")
    for size in (float(s) for s in a.sizes_mib.split(",")):
        paths, groups = [], 0
        for i, b in enumerate(bases):
            p = os.path.join(a.dir, f"{a.shape}-{size:g}-node-{'ab'[i]}.json")
            # Each input at most 64 MiB (merge's per-input limit).
            groups = write_report(b, p, min(int(size * MIB / 2), 64 * MIB - 4096), not a.pretty, a.shape)
            paths.append(p)
        total = sum(os.path.getsize(p) for p in paths)
        results = {name: [] for name, _ in bins}
        for _ in range(a.runs):
            for name, exe in bins:
                if name == "baseline" and total > a.baseline_max_mib * MIB:
                    continue
                results[name].append(peak_rss_kib([exe, "merge", *paths, "--format", "json"]))
        target = 4 * total + 32 * MIB
        for name, _ in bins:
            r = results[name]
            if not r:
                print(f"{total / MIB:>10.1f} {name:>9} {groups:>7} {'(skipped)':>13}")
                continue
            rss = max(k for k, _ in r) * 1024
            wall = statistics.median(w for _, w in r)
            print(f"{total / MIB:>10.1f} {name:>9} {groups:>7} {rss / MIB:>13.1f} "
                  f"{rss / total:>9.2f} {target / MIB:>10.1f} {wall:>8.2f}  "
                  f"{'yes' if rss <= target else 'NO'}")


if __name__ == "__main__":
    main()
