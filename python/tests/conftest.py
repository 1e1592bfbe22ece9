"""Shared helpers: the repository, the CLI binary, descriptor builders, a
described node (KVCR_NODE_FACTS) and report normalisation."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
SCHEMAS = REPO / "schemas"


def kvcr_bin() -> str:
    """The CLI the package is compared with: $KVCR_BIN, else target/debug/kvcr."""
    b = os.environ.get("KVCR_BIN") or str(REPO / "target" / "debug" / "kvcr")
    if not os.access(b, os.X_OK):
        raise RuntimeError(
            "no kvcr binary at %s: run `cargo build --locked` or set KVCR_BIN" % b
        )
    return b


def cli(
    *args: str, cwd: Optional[os.PathLike] = None, env: Optional[Dict[str, str]] = None
) -> Tuple[int, str, str]:
    e = dict(os.environ)
    for k in ("KVCR_PROFILE", "KVCR_NODE_FACTS", "KVCR_INVENTORY"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run(
        [kvcr_bin(), *args], cwd=cwd, env=e, capture_output=True, text=True, timeout=60
    )
    return p.returncode, p.stdout, p.stderr


CLOCK = ("generated_unix_ms", "age_ms", "oldest_input_age_ms")


# The renderings of an age in a message, a headline or a `found`
# (docs/format.md §5.4): `sealed 371d 14h ago`, `age 32106744 s`. The second
# moves every second, so two documents made a few milliseconds apart (the
# CLI's, then the package's) can differ in it.
AGE_TEXT = re.compile(r"sealed (?:\d+[dhms] ?)+ ago|^age \d+ s$")


def without_clock(v: Any) -> Any:
    """The document without the fields the clock moves, and with the ages
    written in its texts as ``<AGE>``."""
    if isinstance(v, dict):
        return {k: without_clock(x) for k, x in v.items() if k not in CLOCK}
    if isinstance(v, list):
        return [without_clock(x) for x in v]
    if isinstance(v, str) and ("sealed " in v or v.startswith("age ")):
        return AGE_TEXT.sub(
            lambda m: "age <AGE> s" if m.group(0).startswith("age") else "sealed <AGE> ago", v
        )
    return v


def ages_ms(v: Any) -> List[int]:
    """Every ``age_ms`` of a document, in document order."""
    if isinstance(v, dict):
        own = [v["age_ms"]] if isinstance(v.get("age_ms"), int) else []
        return own + [a for x in v.values() for a in ages_ms(x)]
    if isinstance(v, list):
        return [a for x in v for a in ages_ms(x)]
    return []


def same_document(got: Any, want: Any) -> None:
    """``got`` (what the package built) is ``want`` (``json.loads`` of the
    CLI's text) apart from the clock: the same values, and also the same
    key order and the same types (``1`` is not ``1.0``, a list is not a
    tuple), as ``json.dumps`` writes them. The ages the clock moves agree
    within a minute (the two documents are made moments apart)."""
    g, w = without_clock(got), without_clock(want)
    assert g == w
    assert json.dumps(g) == json.dumps(w)
    ga, wa = ages_ms(got), ages_ms(want)
    assert len(ga) == len(wa), (ga, wa)
    assert all(abs(x - y) <= 60_000 for x, y in zip(ga, wa)), (ga, wa)


def codes(report: Dict[str, Any]) -> List[str]:
    """Every finding code anywhere in a report."""
    out: List[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "code" in v and "severity" in v:
                out.append(v["code"])
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(report)
    return out


BOOT = "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30"
HOST = "gpu-node-17"
OWNER = (4242, 123456)
WRITER = (4100, 123400)


def gpu(rank: int, group: int = 0) -> str:
    return "GPU-%08x-%04x-4000-8000-%012x" % (0x6A1F0C2E + group, group, rank)


def descriptor(
    engine: str = "llama-py",
    rank: int = 0,
    world: int = 1,
    *,
    incarnation: Optional[str] = None,
    epoch: int = 1,
    owner: Tuple[int, int] = OWNER,
    writer: Tuple[int, int] = WRITER,
    quiesced: bool = True,
    model: str = "meta-llama/Llama-3.1-8B",
    kind: str = "fabric",
    group: int = 0,
    created_unix_ms: Optional[int] = None,
) -> Dict[str, Any]:
    """A valid descriptor (without digest) for rank `rank` of a TP-`world` group."""
    inc = incarnation or "3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c90"
    seed = "%s/%s/%d" % (engine, inc, rank)
    if kind == "posix_fd":
        handle: Dict[str, Any] = {"kind": "posix_fd", "fd": 10 + rank}
    else:
        handle = {"kind": kind, "hex": hashlib.sha512(seed.encode()).hexdigest()}
    return {
        "schema": "kvcr.retained-rank/v1",
        "engine_id": engine,
        "incarnation": inc,
        "epoch": epoch,
        "rank": rank,
        "world_size": world,
        "tp": world,
        "pp": 1,
        "node": {"hostname": HOST, "boot_id": BOOT},
        "gpu_uuid": gpu(rank, group),
        "model": {"name": model, "revision": "945c8663", "quantization": None},
        "geometry": {
            "num_layers": 2,
            "kv_heads_per_rank": 1,
            "head_size": 64,
            "block_size": 16,
            "num_blocks": 8,
            "dtype": "float16",
            "use_mla": False,
        },
        "owner": {"pid": owner[0], "start_ticks": owner[1]},
        "writer": {"pid": writer[0], "start_ticks": writer[1], "quiesced": quiesced},
        "allocations": [{"id": "kv-%d" % rank, "size_bytes": 65536, "handle": handle}],
        "created_unix_ms": created_unix_ms or int(time.time() * 1000),
    }


def profile(
    engine: str = "llama-py", world: int = 1, *, gpus: bool = True, group: int = 0
) -> Dict[str, Any]:
    d = descriptor(engine, 0, world)
    p: Dict[str, Any] = {
        "schema": "kvcr.profile/v1",
        "engine_id": engine,
        "world_size": world,
        "tp": world,
        "pp": 1,
        "model": d["model"],
        "geometry": d["geometry"],
    }
    if gpus:
        p["gpus"] = [gpu(r, group) for r in range(world)]
    return p


def facts(
    path: Path,
    world: int,
    *,
    boot: str = BOOT,
    processes: Optional[Dict[int, int]] = None,
    unreadable: Optional[str] = None,
    group: int = 0,
) -> Path:
    """A KVCR_NODE_FACTS file describing a node that holds the group."""
    procs = {OWNER[0]: OWNER[1], WRITER[0]: WRITER[1]} if processes is None else processes
    gpus = [gpu(r, group) for r in range(world)]
    path.write_text(
        json.dumps(
            {
                "boot_id": boot,
                "hostname": HOST,
                "processes": {str(k): v for k, v in procs.items()},
                "processes_unreadable": unreadable,
                "gpus": {"visible": gpus, "on_node": gpus, "source": "pytest"},
            }
        )
    )
    return path


_FACTS_DIR = tempfile.mkdtemp(prefix="kvcr-pytest-facts-")
atexit.register(shutil.rmtree, _FACTS_DIR, True)


def writer_facts(owner: Tuple[int, int] = OWNER) -> Path:
    """The facts file of the node :func:`descriptor` describes, its owner
    running: what ``write_rank`` checks a descriptor against (it reads this
    machine otherwise, whose boot id, hostname and processes differ)."""
    p = Path(_FACTS_DIR) / ("writer-%d-%d.json" % owner)
    if not p.exists():
        facts(p, 8, processes={owner[0]: owner[1], WRITER[0]: WRITER[1]})
    return p


def write(root: Any, d: Dict[str, Any], **kw: Any) -> Path:
    """``kvcr_audit.write_rank`` against the node the descriptor describes."""
    import kvcr_audit

    try:
        owner = (d["owner"]["pid"], d["owner"]["start_ticks"])
        ok = all(type(x) is int for x in owner) and 0 < owner[0] < 2**31 and 0 <= owner[1] < 2**64
    except Exception:  # a descriptor broken on purpose: the default node
        ok = False
    kw.setdefault("node_facts", writer_facts(owner if ok else OWNER))
    return kvcr_audit.write_rank(root, d, **kw)


def inventory(root: Path, world: int = 8, **kw: Any) -> Path:
    """A TP-`world` group written by the package (root made 0700)."""
    root.mkdir(mode=0o700, exist_ok=True)
    os.chmod(root, 0o700)
    for r in range(world):
        write(root, descriptor(rank=r, world=world, **kw))
    return root


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    return inventory(tmp_path / "inv", 8)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """The facts file of a node that holds the group: pass it as
    ``node_facts=`` (the package reads no environment variable)."""
    return facts(tmp_path / "facts.json", 8)


@pytest.fixture(autouse=True)
def _no_inherited_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("KVCR_PROFILE", "KVCR_NODE_FACTS", "KVCR_INVENTORY"):
        monkeypatch.delenv(k, raising=False)


def new_incarnation() -> str:
    return str(uuid.uuid4())


def args_of(case: Dict[str, Any]) -> Sequence[str]:
    return [str(a) for a in case["args"]]
