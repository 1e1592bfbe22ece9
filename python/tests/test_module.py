"""The module's surface: names, signatures against the stubs, exceptions,
the GIL released during audit, and the usage example under mypy --strict."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import kvcr_audit
from conftest import REPO, inventory, write

PKG = Path(kvcr_audit.__file__).parent
STUB = PKG / "__init__.pyi"
ALLOWLIST = REPO / "python" / "stubtest-allowlist.txt"


def stubtest(cwd: Path) -> "subprocess.CompletedProcess[str]":
    # mypy's own checker of stubs against the module (names, __all__,
    # signatures with their defaults, classes and their bases), run outside
    # the repository so the import is the installed package (or the copy in
    # cwd).
    return subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "kvcr_audit", "--allowlist", str(ALLOWLIST)],
        capture_output=True, text=True, timeout=300, cwd=cwd,
    )


def test_version_is_the_crates() -> None:
    cargo = (REPO / "Cargo.toml").read_text()
    version = next(
        line.split('"')[1] for line in cargo.splitlines() if line.startswith("version = ")
    )
    assert kvcr_audit.__version__ == version
    # The wheel's own version (python/Cargo.toml) is kept equal to it.
    from importlib.metadata import version as dist_version

    assert dist_version("kvcr-audit") == version
    binding = (REPO / "python" / "Cargo.toml").read_text()
    assert 'version = "%s"' % version in binding


def test_py_typed_and_stubs_ship() -> None:
    assert (PKG / "py.typed").exists()
    assert STUB.exists() and (PKG / "_native.pyi").exists()


def test_the_stubs_match_the_module_under_mypy_stubtest(tmp_path: Path) -> None:
    p = stubtest(tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    for name in kvcr_audit.__all__:
        assert hasattr(kvcr_audit, name), name


def test_stubtest_finds_a_stub_that_disagrees(tmp_path: Path) -> None:
    # The check above can fail: a copy of the package whose stub gives
    # content_digest's pages= another default is refused.
    shutil.copytree(PKG, tmp_path / "kvcr_audit")
    stub = tmp_path / "kvcr_audit" / "__init__.pyi"
    text = stub.read_text()
    assert "pages: int = 16," in text
    stub.write_text(text.replace("pages: int = 16,", "pages: int = 17,"))
    p = stubtest(tmp_path)
    assert p.returncode != 0, p.stdout
    assert "kvcr_audit.content_digest" in p.stdout, p.stdout


def test_every_argument_after_the_first_is_keyword_capable() -> None:
    for name in kvcr_audit.__all__:
        if not inspect.isfunction(getattr(kvcr_audit, name)):
            continue
        for p in list(inspect.signature(getattr(kvcr_audit, name)).parameters.values())[1:]:
            assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), (name, p)


def test_the_exceptions_keep_their_constructors_and_attributes() -> None:
    e = kvcr_audit.DescriptorError("KV007", "node.boot_id", "node.boot_id: bad")
    assert (e.code, e.field, e.message, e.exit_status) == ("KV007", "node.boot_id", "node.boot_id: bad", 1)
    assert isinstance(e, kvcr_audit.Error) and isinstance(kvcr_audit.UsageError("x"), kvcr_audit.Error)
    assert kvcr_audit.UsageError("x").exit_status == 2
    assert kvcr_audit.Refused("r", {"a": 1}).report == {"a": 1}


def test_the_gil_is_released_while_audit_runs(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    import conftest

    for sub in range(40):
        for r in range(8):
            write(
                root, conftest.descriptor("g%d" % sub, r, 8, group=sub), subdir="s%d" % sub
            )
    old = sys.getswitchinterval()
    # A long switch interval: while the audit holds the GIL, the other
    # thread could not run at all during the call.
    sys.setswitchinterval(2.0)
    stamps: List[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())
            if len(stamps) > 1_000_000:
                del stamps[:500_000]

    t = threading.Thread(target=spin)
    calls: List[Tuple[float, float]] = []
    try:
        t.start()
        time.sleep(0.05)  # the thread runs, then gives the GIL back
        # On a busy machine the other thread may not be scheduled on a CPU
        # within one short call, so up to 20 calls are made: a call that
        # held the GIL would let no stamp fall inside it, however many.
        for _ in range(20):
            t0 = time.perf_counter()
            report = kvcr_audit.audit(root)
            t1 = time.perf_counter()
            calls.append((t0, t1))
            assert report["summary"]["groups"] == 40
            if any(t0 < s < t1 for s in stamps):
                break
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    inside = [s for s in stamps for (t0, t1) in calls if t0 < s < t1]
    assert inside, "no other thread ran during %d calls of kvcr_audit.audit" % len(calls)


def test_the_usage_example_type_checks_under_mypy_strict() -> None:
    mypy = shutil.which("mypy") or os.path.join(os.path.dirname(sys.executable), "mypy")
    if not os.path.exists(mypy):
        pytest.fail("mypy is not installed in this environment (pip install mypy)")
    example = REPO / "python" / "examples" / "usage.py"
    producer = REPO / "examples" / "producer.py"
    p = subprocess.run(
        [mypy, "--strict", "--no-incremental", str(example), str(producer)],
        capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
