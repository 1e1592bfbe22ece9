#!/usr/bin/env python3
"""Benchmark (not a test): in-process kvcr_audit.audit and kvcr_audit.gate of an 8-rank
group against spawning the CLI on the same group for the same document, in
the same run, alternating, warm page cache:

- ``kvcr_audit.audit(root)`` against ``kvcr audit ROOT --format json``;
- ``kvcr_audit.gate(root, profile=..., node_facts=...)`` against
  ``kvcr import ROOT --profile P --dry-run --format json`` (the import
  plan is its ``plan``), with ``KVCR_NODE_FACTS`` naming the same facts
  and the simulated backend answering the dry run's driver check.

Each in-process call follows a spawn, as in an engine that would otherwise
spawn the CLI: its caches are as cold as they would be. Prints medians,
p10 and p90, and the ratios.

The floor (issue #39 §3): benches/floor.c built as a shared library
(``cc -O2 -shared -fPIC -DFLOOR_LIB``) and called through ctypes, reading
the same group's files in C on one thread under docs/format.md §2.3
(``O_PATH`` open, ``fstat``, reopen through ``/proc/self/fd``, read, close)
and plainly (open, read, close). It is timed cold (after the same spawn)
and warm (back to back with the in-process calls, no spawn between), and
the in-process calls are reported as multiples of it. A second floor,
"floor §2.3 +2", reads the same 8 descriptors plus the gate's two other
files (the profile and the node facts, copies of the same bytes in a
directory of their own) under §2.3: what the gate must read at least.
Both are printed; the issue's targets are against the first.

    python3 python/bench/audit_inprocess.py [--runs 300] [--kvcr target/release/kvcr]

Build both in release mode first (docs/bench.md "In-process audit"):
    cargo build --release --locked
    (cd python && maturin build --release --locked) && pip install python/target/wheels/kvcr_audit-*.whl
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import kvcr_audit  # noqa: E402
from conftest import facts, inventory, profile, without_clock  # noqa: E402


def quantiles(xs: List[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return "median %.3f ms (p10 %.3f, p90 %.3f)" % (
        statistics.median(xs) * 1e3, q[0] * 1e3, q[-1] * 1e3)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--kvcr", default=str(Path(__file__).resolve().parents[2] / "target/release/kvcr"))
    ap.add_argument("--warm-runs", type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_floor(Path(tmp))
        root = inventory(Path(tmp) / "inv", 8)
        node = facts(Path(tmp) / "facts.json", 8)
        prof = Path(tmp) / "profile.json"
        prof.write_text(json.dumps(profile(world=8)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KVCR_")}
        # The simulated backend answers the dry run's driver check without
        # looking for a libcuda (the gate makes no GPU call either).
        gate_env = dict(env, KVCR_NODE_FACTS=str(node), KVCR_IMPORT_BACKEND="sim")
        audit_cmd = [a.kvcr, "audit", str(root), "--format", "json"]
        gate_cmd = [a.kvcr, "import", str(root), "--profile", str(prof), "--dry-run",
                    "--format", "json"]

        def spawn(cmd: List[str], e: Dict[str, str]) -> bytes:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e).stdout

        # Both answer the same document (sanity, outside the timing).
        assert without_clock(json.loads(spawn(audit_cmd, env))) == without_clock(kvcr_audit.audit(root))
        dry = json.loads(spawn(gate_cmd, gate_env))
        plan = kvcr_audit.gate(root, profile=prof, node_facts=node)
        assert dry["result"] == "planned", dry
        assert without_clock(dry["plan"]) == without_clock(plan)

        files = ctypes.c_long()
        rb = str(root).encode()

        def floor(rule: int) -> Callable[[], object]:
            return lambda: lib.kvcr_floor_read(rb, rule, ctypes.byref(files))

        assert floor(1)() > 0 and files.value == 8, files.value
        # The gate's files: the descriptors, the profile and the node facts.
        plus = Path(tmp) / "plus"
        plus.mkdir()
        for f in list(root.iterdir()) + [prof, node]:
            (plus / f.name).write_bytes(f.read_bytes())
        pb = str(plus).encode()
        assert lib.kvcr_floor_read(pb, 1, ctypes.byref(files)) > 0 and files.value == 10
        cases: Dict[str, Callable[[], object]] = {
            "floor §2.3": floor(1),
            "floor plain": floor(0),
            "floor §2.3 +2": lambda: lib.kvcr_floor_read(pb, 1, ctypes.byref(files)),
            "audit": lambda: kvcr_audit.audit(root),
            "gate": lambda: kvcr_audit.gate(root, profile=prof, node_facts=node),
        }
        cmds = {"audit": (audit_cmd, env), "gate": (gate_cmd, gate_env),
                "floor §2.3": (audit_cmd, env), "floor plain": (audit_cmd, env),
                "floor §2.3 +2": (gate_cmd, gate_env)}
        t_in: Dict[str, List[float]] = {k: [] for k in cases}
        t_sp: Dict[str, List[float]] = {k: [] for k in cases}
        for i in range(10 + a.runs):  # 10 warm-up rounds, not counted
            for k, call in cases.items():
                cmd, e = cmds[k]
                t = time.perf_counter()
                spawn(cmd, e)
                sp = time.perf_counter() - t
                t = time.perf_counter()
                call()
                ip = time.perf_counter() - t
                if i >= 10:
                    t_sp[k].append(sp)
                    t_in[k].append(ip)
        # Warm: the calls back to back, no spawn between.
        t_warm: Dict[str, List[float]] = {k: [] for k in cases}
        for i in range(100 + a.warm_runs):
            for k, call in cases.items():
                t = time.perf_counter()
                call()
                ip = time.perf_counter() - t
                if i >= 100:
                    t_warm[k].append(ip)
    print("machine: %s, %d CPUs, Python %s, load average %.2f" % (
        platform.machine(), os.cpu_count() or 0, platform.python_version(), os.getloadavg()[0]))
    print("8-rank group, %d runs each after a spawn (cold), %d back to back (warm), alternating"
          % (a.runs, a.warm_runs))
    fc, fw = statistics.median(t_in["floor §2.3"]), statistics.median(t_warm["floor §2.3"])
    gc_, gw = statistics.median(t_in["floor §2.3 +2"]), statistics.median(t_warm["floor §2.3 +2"])
    for k in cases:
        mi, mw = statistics.median(t_in[k]), statistics.median(t_warm[k])
        print("%-13s cold: %s   %.2fx the §2.3 floor, %.2fx +2" % (k, quantiles(t_in[k]), mi / fc, mi / gc_))
        print("%-13s warm: %s   %.2fx the §2.3 floor, %.2fx +2" % (k, quantiles(t_warm[k]), mw / fw, mw / gw))
        if k in ("audit", "gate"):
            ms = statistics.median(t_sp[k])
            print("%-16s spawn: %s" % ("audit --format json" if k == "audit" else "import --dry-run",
                                       quantiles(t_sp[k])))
            print("%s ratio (spawn / in-process, cold): %.1fx" % (k, ms / mi))
    return 0


def build_floor(tmp: Path) -> ctypes.CDLL:
    """benches/floor.c as a shared library (the in-process floor)."""
    src = Path(__file__).resolve().parents[2] / "benches" / "floor.c"
    out = tmp / "floor.so"
    subprocess.run(["cc", "-O2", "-pthread", "-shared", "-fPIC", "-DFLOOR_LIB", "-o", str(out), str(src)],
                   check=True)
    lib = ctypes.CDLL(str(out))
    lib.kvcr_floor_read.restype = ctypes.c_long
    lib.kvcr_floor_read.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_long)]
    return lib


if __name__ == "__main__":
    sys.exit(main())
