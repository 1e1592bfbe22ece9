"""The reference producer (examples/producer.py): run it, crash it, restart
it, collect, retire, and audit after each step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

import kvcr_audit
from conftest import REPO, cli, codes, without_clock

PRODUCER = REPO / "examples" / "producer.py"


class Running:
    def __init__(self, root: Path, state: Path, tp: int = 4) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(PRODUCER), str(root), "--engine", "sidecar-a",
             "--tp", str(tp), "--state", str(state)],
            stdout=subprocess.PIPE, text=True,
        )

    def event(self) -> Dict[str, Any]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        assert line, "the producer exited (%s)" % self.p.poll()
        e: Dict[str, Any] = json.loads(line)
        return e

    def signal(self, sig: int) -> None:
        self.p.send_signal(sig)


def current(report: Dict[str, Any]) -> List[str]:
    return sorted({r["incarnation"] for g in report["groups"] for r in g["ranks"]})


def paths(report: Dict[str, Any]) -> List[str]:
    return sorted(
        [r["path"] for g in report["groups"] for r in g["ranks"]]
        + [f["path"] for g in report["groups"] for f in g["findings"] if "path" in f]
    )


def test_a_producer_restarts_supersedes_and_retires(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    state = tmp_path / "state.json"

    # 1. First lifetime: accepted, owned by the producer process.
    a = Running(root, state)
    ready = a.event()
    assert ready["event"] == "ready" and ready["epoch"] == 1
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 0 and current(r) == [ready["incarnation"]]
    d = json.loads(Path(ready["paths"][0]).read_text())
    assert d["owner"]["pid"] == a.p.pid
    assert d["owner"]["start_ticks"] == kvcr_audit.proc_start_ticks(a.p.pid)
    assert d["writer"]["quiesced"] is True
    assert [c["pages"] for c in ready["content"]] == [16] * 4
    assert d["allocations"][0]["content"] == ready["content"][0]
    rc, out, _ = cli("audit", str(root), "--format", "json")
    assert rc == 0 and without_clock(json.loads(out)) == without_clock(r)

    # 2. The sidecar dies without retiring (its descriptors stay), a new one
    # starts: the epoch persisted, the new incarnation is current, the old
    # one superseded (KV108 notices), the group still accepted.
    a.signal(signal.SIGKILL)
    a.p.wait(timeout=10)
    b = Running(root, state)
    ready_b = b.event()
    assert ready_b["epoch"] == 2 and ready_b["incarnation"] != ready["incarnation"]
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 0
    assert current(r) == [ready_b["incarnation"]]
    stale = [f for g in r["groups"] for f in g["findings"] if f["code"] == "KV108"]
    assert len(stale) == 4 and all(f["path"].startswith("epoch-1/") for f in stale)

    # 3. The engine serves from the new lifetime: the old descriptors go.
    b.signal(signal.SIGUSR1)
    assert b.event() == {"event": "collected", "removed": [ready["incarnation"]]}
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 0 and "KV108" not in codes(r)
    assert all(p.startswith("epoch-2/") for p in paths(r))
    assert not (root / "epoch-1").exists()

    # 4. Retirement removes its own descriptors: nothing left to judge.
    b.signal(signal.SIGTERM)
    assert b.event()["event"] == "retired"
    assert b.p.wait(timeout=10) == 0
    r = kvcr_audit.audit(root)
    # Nothing retained is a healthy node, not a rejection (§6): exit 0, "empty:".
    assert r["groups"] == [] and r["exit_status"] == 0 and r["cause"].startswith("empty:")
    assert os.listdir(root) == []
    st = json.loads(state.read_text())
    assert st["epoch"] == 2 and st["lifetimes"] == []

    # 5. The next start takes epoch 3.
    c = Running(root, state)
    assert c.event()["epoch"] == 3
    c.signal(signal.SIGTERM)
    assert c.event()["event"] == "retired"
    assert c.p.wait(timeout=10) == 0


def test_a_lost_state_file_is_recovered_from_the_inventory(tmp_path: Path) -> None:
    # kvcr_audit.current_epoch: the first start of a producer whose state file is
    # gone takes the epoch after the inventory's, never a tie (KV107).
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    assert kvcr_audit.current_epoch(root, "sidecar-a") is None
    a = Running(root, tmp_path / "state-a.json")
    assert a.event()["epoch"] == 1
    a.signal(signal.SIGKILL)
    a.p.wait(timeout=10)
    assert kvcr_audit.current_epoch(root, "sidecar-a") == 1
    assert kvcr_audit.current_epoch(root, "another-group") is None
    b = Running(root, tmp_path / "state-lost.json")  # a fresh state file
    ready = b.event()
    assert ready["epoch"] == 2
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 0 and current(r) == [ready["incarnation"]]
    assert kvcr_audit.current_epoch(root, "sidecar-a") == 2
    b.signal(signal.SIGTERM)
    assert b.event()["event"] == "retired"
    assert b.p.wait(timeout=10) == 0


def test_current_epoch_refuses_what_the_flags_refuse(tmp_path: Path) -> None:
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.current_epoch(tmp_path / "missing", "sidecar-a")
    for bad in ("bad id!", "\ud800", 3):
        with pytest.raises(kvcr_audit.UsageError):
            kvcr_audit.current_epoch(tmp_path, bad)  # type: ignore[arg-type]
