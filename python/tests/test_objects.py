"""The documents' Python objects are built by the native module with its
field names made once per process (python/src/objects.rs): every call's
document is still its own, equal to the CLI's, from any thread, and a call
made while another is building (a finaliser run by a collection in the
middle of it) neither hangs nor mixes the two."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List

import kvcr_audit
from conftest import cli, facts, inventory, profile, same_document, without_clock


def test_each_call_gets_its_own_objects(inv: Path) -> None:
    a = kvcr_audit.audit(inv)
    b = kvcr_audit.audit(inv)
    assert a is not b and a["groups"] is not b["groups"]
    assert without_clock(a) == without_clock(b)
    # Mutating one document changes nothing in the next.
    a["groups"][0]["engine_id"] = "changed"
    a["groups"].clear()
    a.pop("schema")
    c = kvcr_audit.audit(inv)
    assert c["schema"] == "kvcr.audit-report/v1"
    assert without_clock(c) == without_clock(b)
    rc, out, _ = cli("audit", str(inv), "--format", "json")
    assert rc == 0
    same_document(c, json.loads(out))


def test_the_keys_are_plain_str_in_document_order(inv: Path, tmp_path: Path) -> None:
    node = facts(tmp_path / "facts.json", 8)
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps(profile(world=8)))
    plan = kvcr_audit.gate(inv, profile=prof, node_facts=node)
    assert list(plan)[:3] == ["schema", "kvcr_version", "generated_unix_ms"]

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                assert type(k) is str, k
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        else:
            assert v is None or type(v) in (str, int, bool), v

    walk(plan)
    h = plan["ranks"][0]["allocations"][0]["handle"]
    assert list(h) == ["kind", "hex"] and h["kind"] == "fabric"


def test_calls_from_many_threads_give_the_same_document(inv: Path) -> None:
    want = without_clock(kvcr_audit.audit(inv))
    got: List[Dict[str, Any]] = []
    errors: List[BaseException] = []

    def run() -> None:
        try:
            for _ in range(20):
                got.append(without_clock(kvcr_audit.audit(inv)))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert len(got) == 160 and all(g == want for g in got)


# A collection in the middle of building a document runs a finaliser that
# asks for another document: the inner call must not wait for the outer one
# (it would wait forever), and both documents must be whole.
REENTER = r"""
import gc, json, sys
import kvcr_audit
root = sys.argv[1]
inner = []
class Asker:
    def __init__(self):
        self.me = self  # a cycle: freed only by a collection
    def __del__(self):
        inner.append(kvcr_audit.audit(root))
want = kvcr_audit.audit(root)
gc.collect()
gc.set_threshold(1)
outer = []
for _ in range(50):
    Asker()
    outer.append(kvcr_audit.audit(root))
gc.set_threshold(700)
gc.collect()
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("generated_unix_ms", "age_ms")}
    return [strip(x) for x in v] if isinstance(v, list) else v
assert inner, "no finaliser ran during a call"
assert all(strip(d) == strip(want) for d in outer + inner)
print(len(inner))
"""


def test_a_call_from_a_finaliser_while_building_neither_hangs_nor_mixes(inv: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-c", REENTER, str(inv)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) >= 1
