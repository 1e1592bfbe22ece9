"""A Python-written TP8 inventory is accepted, and each way a producer
typically gets it wrong is caught with the documented code (docs/format.md
§3, §3.2, §3.5, §5.3) — by the package before anything is written, and by
the audit when a hand-rolled writer wrote it anyway."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Dict

import pytest

import kvcr_audit
from conftest import cli, codes, descriptor, inventory, without_clock, write


def hand_written(root: Path, d: Dict[str, Any], *, ensure_ascii: bool = False) -> Path:
    """What a producer following a half-remembered recipe writes."""
    body = {k: v for k, v in d.items() if k != "digest"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii)
    d = dict(d, digest="sha256:" + hashlib.sha256(canon.encode()).hexdigest())
    p = root / ("rank-%d.json" % d["rank"])
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(d, indent=2))
    return p


def rank_codes(report: Dict[str, Any]) -> Dict[int, list]:
    out: Dict[int, list] = {}
    for g in report["groups"]:
        for r in g["ranks"]:
            out[r["rank"]] = [f["code"] for f in r["findings"]]
    return out


def test_a_python_written_tp8_inventory_is_accepted(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 8)
    names = sorted(os.listdir(root))
    assert names == ["rank-%d.json" % r for r in range(8)]
    for n in names:
        assert stat.S_IMODE(os.stat(root / n).st_mode) == 0o600
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 0
    assert r["summary"]["accepted"] == 1
    assert [g["verdict"] for g in r["groups"]] == ["accept"]
    assert len(r["groups"][0]["ranks"]) == 8
    rc, out, _ = cli("audit", str(root), "--format", "json")
    assert rc == 0 and without_clock(json.loads(out)) == without_clock(r)


def test_the_recipe_of_format_3_5_is_accepted(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    for r in range(2):
        hand_written(root, descriptor(rank=r, world=2, model="Qwen/通义千问"))
    assert kvcr_audit.audit(root)["exit_status"] == 0


def test_unstripped_boot_id_is_kv007(tmp_path: Path) -> None:
    d = descriptor()
    d["node"]["boot_id"] = Path("/proc/sys/kernel/random/boot_id").read_text()  # with "\n"
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        write(tmp_path, d)
    assert (e.value.code, e.value.field) == ("KV007", "node.boot_id")
    assert not list(tmp_path.iterdir())  # nothing written
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    hand_written(root, d)
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 1 and "KV007" in codes(r)


def test_a_float_is_kv007(tmp_path: Path) -> None:
    d = descriptor()
    d["allocations"][0]["size_bytes"] = 65536.0  # e.g. size computed with /
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert (e.value.code, e.value.field) == ("KV007", "allocations[0].size_bytes")
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    hand_written(root, d)
    assert "KV007" in codes(kvcr_audit.audit(root))


def test_ensure_ascii_digest_on_a_non_ascii_model_is_kv008(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    d = descriptor(model="Qwen/通义千问-72B")
    hand_written(root, d, ensure_ascii=True)
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 1
    assert rank_codes(r)[0] == ["KV008"]
    # The package computes the digest the audit checks.
    write(root, d)
    assert kvcr_audit.audit(root)["exit_status"] == 0
    # An ASCII-only name digests alike either way: the mistake hides until then.
    hand_written(root, descriptor(), ensure_ascii=True)
    assert kvcr_audit.audit(root)["exit_status"] == 0


def test_a_torn_file_without_fsync_is_caught(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 2)
    good = (root / "rank-1.json").read_bytes()
    # A crash after a non-atomic, un-synced write: the file is cut short...
    (root / "rank-1.json").write_bytes(good[: len(good) // 2])
    r = kvcr_audit.audit(root)
    assert r["exit_status"] == 1
    assert "KV006" in codes(r)
    # ...or left empty.
    (root / "rank-1.json").write_bytes(b"")
    assert "KV006" in codes(kvcr_audit.audit(root))
    # Edited in place after sealing: the digest no longer matches.
    (root / "rank-1.json").write_bytes(good.replace(b'"epoch": 1', b'"epoch": 2'))
    assert "KV008" in codes(kvcr_audit.audit(root))
    # A writer that died before its rename leaves a staging file: KV009.
    (root / "rank-1.json").write_bytes(good)
    (root / ".rank-1.json.0123456789abcdef.tmp").write_bytes(good[:10])
    r = kvcr_audit.audit(root)
    assert "KV009" in codes(r)
    rc, out, _ = cli("audit", str(root), "--format", "json")
    assert without_clock(json.loads(out)) == without_clock(r)


def test_bool_and_out_of_range_ints_never_raise_type_or_overflow_errors() -> None:
    for path, v in (
        (("rank",), True),
        (("world_size",), 2**4096),
        (("owner", "pid"), -(2**70)),
        (("writer", "quiesced"), 1),
    ):
        d: Dict[str, Any] = descriptor()
        t: Any = d
        for k in path[:-1]:
            t = t[k]
        t[path[-1]] = v
        for f in (kvcr_audit.seal, lambda x: write("/nonexistent", x)):
            with pytest.raises(kvcr_audit.DescriptorError) as e:
                f(d)
            assert e.value.code == "KV007"
            assert e.value.field == ".".join(path)
