"""kvcr_audit.gms returns the document `kvcr gms --format json` prints (apart from
the clock), on GMS artifacts written here byte by byte (docs/format.md §14)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Dict

import pytest

import kvcr_audit
from conftest import SCHEMAS, cli, without_clock

LEASE_MAGIC = 0x4C534D47  # on disk: b"GMSL"


def owner_hash(owner_id: str) -> int:
    return int.from_bytes(hashlib.sha256(owner_id.encode()).digest()[:8], "little")


def ring(n: int, transition: bool = False) -> bytes:
    """A lease ring: block 0 RESERVED, 1-2 LEASED, the rest FREE; with
    `transition`, block 3 left in TRANSITION (its free count taken)."""
    states = [3, 1, 1] + [0] * (n - 3)
    if transition:
        states[3] = 4
    free = states.count(0)
    head = struct.pack("<IIIIQQQI4xQQ", LEASE_MAGIC, 1, n, 16, free, 0, 0, 0, 0, 0)
    owner = owner_hash("vllm-1-0")
    body = b"".join(
        struct.pack("<IIQ", s, 1, owner if s == 1 else 0) for s in states
    )
    return head + body


def recovery(num_blocks: int) -> bytes:
    b = bytearray(4096 + 128 * num_blocks)
    b[:8] = b"DYNKV001"
    struct.pack_into("<QQ", b, 16, 2, 2)
    b[32:64] = bytes(range(32))
    payload = struct.pack("<IQ68s", 36, 16, b"\x07" * 36)
    o = 4096 + 128
    struct.pack_into("<Q", b, o, 1)
    b[o + 8 : o + 88] = payload
    struct.pack_into("<I", b, o + 88, __import__("zlib").crc32(payload))
    return bytes(b)


def test_gms_matches_the_cli(tmp_path: Path) -> None:
    (tmp_path / "ok.shm").write_bytes(ring(16))
    (tmp_path / "torn.shm").write_bytes(ring(16, transition=True))
    (tmp_path / "meta").write_bytes(recovery(8))
    rc, out, err = cli("gms", str(tmp_path), "--format", "json", "--interval-ms", "1")
    want = json.loads(out)
    got = kvcr_audit.gms(tmp_path, interval_ms=1)
    # One path, or a sequence of them.
    assert without_clock(kvcr_audit.gms([str(tmp_path)], interval_ms=1)) == without_clock(got)
    assert without_clock(got) == without_clock(want)
    assert got["exit_status"] == rc == 1, err
    verdicts: Dict[str, str] = {
        Path(a["path"]).name: a["verdict"] for a in got["artifacts"]
    }
    assert verdicts == {"ok.shm": "ok", "torn.shm": "reject", "meta": "ok"}
    torn = [a for a in got["artifacts"] if a["path"].endswith("torn.shm")][0]
    assert torn["cause_code"] == "KV205"


def test_gms_validates_against_its_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    (tmp_path / "meta").write_bytes(recovery(8))
    doc = kvcr_audit.gms((tmp_path / "meta",), interval_ms=0, binding="00" * 32, num_blocks=8)
    schema = json.loads((SCHEMAS / "gms-report.schema.json").read_text())
    jsonschema.validate(doc, schema)
    art = doc["artifacts"][0]
    assert art["recovery"]["outcome"] == "FRESH"
    assert art["cause_code"] == "KV225"


def test_gms_errors_are_the_clis(tmp_path: Path) -> None:
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gms(tmp_path / "nope", interval_ms=0)
    assert e.value.exit_status == 2
    assert "does not exist" in e.value.message
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gms(tmp_path / "notes.txt")
    assert "is no GMS artifact" in e.value.message
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gms(tmp_path, binding="xyz")
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gms(tmp_path, interval_ms=60001)
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gms(tmp_path, live="yes")  # type: ignore[arg-type]


def test_gms_discovers_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "GMS_KV_LEASE_SHM_DIR": str(tmp_path / "shm"),
        "FAILOVER_LOCK_PATH": str(tmp_path / "failover.lock"),
        "DYN_KV_RECOVERY_PATH": str(tmp_path / "kv-recovery.mmap"),
    }
    (tmp_path / "shm").mkdir()
    (tmp_path / "shm" / "gms-kv-lease-0123456789abcdef0123.shm").write_bytes(ring(8))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    got = kvcr_audit.gms(interval_ms=0)
    rc, out, _ = cli("gms", "--format", "json", "--interval-ms", "0", env=env)
    assert without_clock(got) == without_clock(json.loads(out))
    assert rc == got["exit_status"] == 0
    assert [a["kind"] for a in got["artifacts"]] == ["lease"]
    assert [l["path"] for l in got["looked"]][0] == str(tmp_path / "shm")
