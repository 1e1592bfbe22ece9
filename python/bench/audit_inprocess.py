#!/usr/bin/env python3
"""Benchmark (not a test): in-process kvcr.audit of an 8-rank group against
spawning the CLI (`kvcr audit ROOT --format json`) on the same group, in
the same run, alternating, warm cache. Prints medians and the ratio.

    python3 python/bench/audit_inprocess.py [--runs 200] [--kvcr target/release/kvcr]

Build both in release mode first (docs/bench.md "In-process audit"):
    cargo build --release --locked
    (cd python && maturin develop --release --locked)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import kvcr  # noqa: E402
from conftest import descriptor, writer_facts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--kvcr", default=str(Path(__file__).resolve().parents[2] / "target/release/kvcr"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "inv"
        root.mkdir(mode=0o700)
        for r in range(8):
            kvcr.write_rank(root, descriptor(rank=r, world=8), node_facts=writer_facts())
        # Both see the same document (sanity, outside the timing).
        out = subprocess.run([a.kvcr, "audit", str(root), "--format", "json"],
                             capture_output=True, check=False).stdout
        assert json.loads(out)["summary"] == kvcr.audit(root)["summary"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KVCR_")}
        inproc, spawn = [], []
        for _ in range(10):  # warm-up
            kvcr.audit(root)
            subprocess.run([a.kvcr, "audit", str(root), "--format", "json"],
                           stdout=subprocess.DEVNULL, env=env)
        for _ in range(a.runs):
            t = time.perf_counter()
            kvcr.audit(root)
            inproc.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run([a.kvcr, "audit", str(root), "--format", "json"],
                           stdout=subprocess.PIPE, env=env)
            spawn.append(time.perf_counter() - t)
    mi, ms = statistics.median(inproc), statistics.median(spawn)
    print("machine: %s, %d CPUs, Python %s" % (platform.machine(), os.cpu_count() or 0,
                                                platform.python_version()))
    print("8-rank group, %d runs each, alternating" % a.runs)
    print("in-process kvcr.audit:        median %.3f ms (p10 %.3f, p90 %.3f)" % (
        mi * 1e3, *[q * 1e3 for q in statistics.quantiles(inproc, n=10)[::8]]))
    print("spawn kvcr audit --format json: median %.3f ms (p10 %.3f, p90 %.3f)" % (
        ms * 1e3, *[q * 1e3 for q in statistics.quantiles(spawn, n=10)[::8]]))
    print("ratio (spawn / in-process): %.1fx" % (ms / mi))
    return 0


if __name__ == "__main__":
    sys.exit(main())
