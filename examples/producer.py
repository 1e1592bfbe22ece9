#!/usr/bin/env python3
"""A reference producer: the sidecar that keeps a TP-N group's KV memory
alive and describes it to kvcr (docs/python.md "Reference producer").

    python3 examples/producer.py ROOT --engine ID --tp N --state FILE

Each start is a new owner lifetime:

1. reads the epoch it persisted (``--state``, written atomically) and the
   group's current epoch in the inventory (``kvcr_audit.current_epoch``), and
   takes the next one above both, with a new incarnation (a UUID);
2. "allocates" each rank's KV memory (here: bytes in this process) and
   computes each allocation's content digest from a read callback
   (``kvcr_audit.content_digest``);
3. writes every rank's descriptor into ``ROOT/epoch-<E>/`` with
   ``quiesced: false`` (the engine is still writing KV), then again with
   ``quiesced: true`` once it has stopped: every write is
   ``kvcr_audit.write_rank`` (validated, sealed, atomic, 0600);
4. records the incarnation in the state file and prints one JSON line
   ``{"event": "ready", ...}``;
5. on SIGUSR1 (the engine is serving from this incarnation) removes the
   descriptors earlier lifetimes left behind and prints ``{"event":
   "collected"}``; on SIGTERM or SIGINT removes its own descriptors
   (retirement), prints ``{"event": "retired"}`` and exits 0.

Each allocation carries its ``content`` member (docs/format.md §3.6), so
an importer can check it holds these bytes, not merely a valid handle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import kvcr_audit

GEOMETRY: Dict[str, Any] = {
    "num_layers": 2,
    "kv_heads_per_rank": 1,
    "head_size": 64,
    "block_size": 16,
    "num_blocks": 8,
    "dtype": "float16",
    "use_mla": False,
}
RANK_BYTES = 2 * 2 * 8 * 16 * 1 * 64 * 2  # §3.1 for GEOMETRY


def load_state(path: Path) -> Dict[str, Any]:
    try:
        state: Dict[str, Any] = json.loads(path.read_text())
        return state
    except FileNotFoundError:
        return {"epoch": 0, "lifetimes": []}


def save_state(path: Path, state: Dict[str, Any]) -> None:
    """Atomically, like a descriptor: a crash leaves the old state or the new."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def gpu_uuid(engine: str, rank: int) -> str:
    """Stand-in GPU UUIDs (a real sidecar asks its driver)."""
    h = hashlib.sha256(("%s/%d" % (engine, rank)).encode()).hexdigest()
    return "GPU-%s-%s-4%s-8%s-%s" % (h[:8], h[8:12], h[13:16], h[17:20], h[20:32])


def descriptor(
    engine: str, incarnation: str, epoch: int, rank: int, tp: int, memory: bytes,
    quiesced: bool, content: Dict[str, Any],
) -> Dict[str, Any]:
    me = os.getpid()
    ticks = kvcr_audit.proc_start_ticks(me)
    handle = hashlib.sha512(("%s/%s/%d" % (engine, incarnation, rank)).encode()).hexdigest()
    return {
        "schema": "kvcr.retained-rank/v1",
        "engine_id": engine,
        "incarnation": incarnation,
        "epoch": epoch,
        "rank": rank,
        "world_size": tp,
        "tp": tp,
        "pp": 1,
        "node": {"hostname": os.uname().nodename, "boot_id": kvcr_audit.boot_id()},
        "gpu_uuid": gpu_uuid(engine, rank),
        "model": {"name": "meta-llama/Llama-3.1-8B", "revision": "945c8663", "quantization": None},
        "geometry": GEOMETRY,
        "owner": {"pid": me, "start_ticks": ticks},
        "writer": {"pid": me, "start_ticks": ticks, "quiesced": quiesced},
        "allocations": [
            {"id": "kv-%d" % rank, "size_bytes": len(memory),
             "handle": {"kind": "fabric", "hex": handle}, "content": content}
        ],
        "created_unix_ms": int(time.time() * 1000),
    }


def reader(memory: bytes) -> Callable[[int, int], bytes]:
    """The read callback of kvcr_audit.content_digest over one rank's memory (a
    real sidecar copies from the GPU, e.g. with cudaMemcpy)."""

    def read(offset: int, length: int) -> bytes:
        return memory[offset : offset + length]

    return read


def say(event: str, **kw: Any) -> None:
    print(json.dumps({"event": event, **kw}), flush=True)


class Producer:
    def __init__(self, root: Path, engine: str, tp: int, state_path: Path) -> None:
        self.root = root
        self.engine = engine
        self.tp = tp
        self.state_path = state_path
        self.state = load_state(state_path)
        # Above every epoch this group used: the persisted one, and those
        # still in the inventory (a lost state file is recovered from it).
        in_inventory = kvcr_audit.current_epoch(root, engine) or 0
        self.epoch = max(int(self.state["epoch"]), in_inventory) + 1
        self.incarnation = str(uuid.uuid4())
        self.subdir = "epoch-%d" % self.epoch
        # This lifetime's KV memory, one buffer per rank (deterministic bytes).
        self.memory: List[bytes] = [
            hashlib.shake_256(("%s/%d" % (self.incarnation, r)).encode()).digest(RANK_BYTES)
            for r in range(tp)
        ]
        self.stop: Optional[int] = None

    def write_all(self, quiesced: bool, content: List[Dict[str, Any]]) -> List[Path]:
        return [
            kvcr_audit.write_rank(
                self.root,
                descriptor(self.engine, self.incarnation, self.epoch, r, self.tp, m, quiesced,
                           content[r]),
                subdir=self.subdir,
            )
            for r, m in enumerate(self.memory)
        ]

    def start(self) -> None:
        # The epoch is persisted before anything is published: a crash
        # between the two never reuses an epoch.
        self.state["epoch"] = self.epoch
        save_state(self.state_path, self.state)
        content = [kvcr_audit.content_digest(reader(m), len(m)) for m in self.memory]
        self.write_all(False, content)  # the engine still writes KV
        paths = self.write_all(True, content)  # it stopped: mark quiesced
        self.state["lifetimes"].append(
            {"incarnation": self.incarnation, "epoch": self.epoch, "subdir": self.subdir,
             "pid": os.getpid(), "content": content}
        )
        save_state(self.state_path, self.state)
        say("ready", incarnation=self.incarnation, epoch=self.epoch,
            paths=[str(p) for p in paths], content=content)

    def remove(self, subdir: str) -> None:
        d = self.root / subdir
        if d.is_symlink() or not d.is_dir():
            return
        for r in range(self.tp):
            try:
                os.unlink(d / ("rank-%d.json" % r))
            except FileNotFoundError:
                pass
        try:
            d.rmdir()
        except OSError:
            shutil.rmtree(d, ignore_errors=True)

    def collect(self) -> None:
        """Removes what earlier lifetimes left behind."""
        old = [x for x in self.state["lifetimes"] if x["incarnation"] != self.incarnation]
        for x in old:
            self.remove(x["subdir"])
        self.state["lifetimes"] = [
            x for x in self.state["lifetimes"] if x["incarnation"] == self.incarnation
        ]
        save_state(self.state_path, self.state)
        say("collected", removed=[x["incarnation"] for x in old])

    def retire(self) -> None:
        self.remove(self.subdir)
        self.state["lifetimes"] = [
            x for x in self.state["lifetimes"] if x["incarnation"] != self.incarnation
        ]
        save_state(self.state_path, self.state)
        say("retired", incarnation=self.incarnation)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("root", type=Path)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--tp", type=int, required=True)
    ap.add_argument("--state", type=Path, required=True)
    a = ap.parse_args(argv)
    p = Producer(a.root, a.engine, a.tp, a.state)
    pending: List[int] = []

    def on_signal(sig: int, _frame: Any) -> None:
        pending.append(sig)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(s, on_signal)
    try:
        p.start()
    except kvcr_audit.Error as e:
        print("producer: %s" % e, file=sys.stderr)
        return 2
    while True:
        while not pending:
            time.sleep(0.05)  # no pause(): a signal before it would be missed
        sig = pending.pop(0)
        if sig == signal.SIGUSR1:
            p.collect()
            continue
        p.retire()
        return 0


if __name__ == "__main__":
    sys.exit(main())
