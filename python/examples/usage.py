"""The package in ten lines each side (README "Python"); type-checked by
tests/test_module.py under mypy --strict."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any, Dict

import kvcr_audit


def produce(root: pathlib.Path, memory: bytes) -> pathlib.Path:
    descriptor: Dict[str, Any] = {
        "schema": "kvcr.retained-rank/v1",
        "engine_id": "llama-a",
        "incarnation": "3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90",
        "epoch": 1,
        "rank": 0,
        "world_size": 1,
        "tp": 1,
        "pp": 1,
        "node": {"hostname": os.uname().nodename, "boot_id": kvcr_audit.boot_id()},
        "gpu_uuid": "GPU-6a1f0c2e-0000-4000-8000-000000000000",
        "model": {"name": "meta-llama/Llama-3.1-8B", "revision": "945c8663", "quantization": None},
        "geometry": {"num_layers": 2, "kv_heads_per_rank": 1, "head_size": 64,
                     "block_size": 16, "num_blocks": 8, "dtype": "float16", "use_mla": False},
        "owner": {"pid": os.getpid(), "start_ticks": kvcr_audit.proc_start_ticks(os.getpid())},
        "writer": {"pid": os.getpid(), "start_ticks": kvcr_audit.proc_start_ticks(os.getpid()),
                   "quiesced": True},
        "allocations": [{"id": "kv-0", "size_bytes": len(memory),
                         "handle": {"kind": "fabric", "hex": "ab" * 64}}],
        "created_unix_ms": 1764547200000,
    }
    content = kvcr_audit.content_digest(lambda off, n: memory[off:off + n], len(memory))
    print("content", content["sha256"])
    return kvcr_audit.write_rank(root, descriptor, subdir="llama-a")


def engine(root: pathlib.Path, profile: pathlib.Path) -> int:
    try:
        plan = kvcr_audit.gate(root, profile=profile)
    except kvcr_audit.Refused as e:
        print("not ready:", e.message, e.report["result"], file=sys.stderr)
        return 1
    except kvcr_audit.UsageError as e:
        print("cannot ask:", e.message, file=sys.stderr)
        return 2
    for rank in plan["ranks"]:
        for a in rank["allocations"]:
            print(rank["rank"], rank["gpu_uuid"], a["id"], a["size_bytes"], a["handle"]["kind"])
    report = kvcr_audit.audit(root, live=True, strict=True, max_age="15m")
    status: int = report["exit_status"]
    return status


if __name__ == "__main__":
    produce(pathlib.Path(sys.argv[1]), bytes(65536))
    sys.exit(engine(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])))
