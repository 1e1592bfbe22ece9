"""The module's surface: names, signatures against the stubs, exceptions,
the GIL released during audit, and the usage example under mypy --strict."""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import kvcr_audit
from conftest import REPO, inventory, write

PKG = Path(kvcr_audit.__file__).parent
STUB = PKG / "__init__.pyi"


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text())


def stub_functions() -> Dict[str, ast.FunctionDef]:
    return {n.name: n for n in stub_tree().body if isinstance(n, ast.FunctionDef)}


def stub_classes() -> Dict[str, ast.ClassDef]:
    return {n.name: n for n in stub_tree().body if isinstance(n, ast.ClassDef)}


def test_version_is_the_crates() -> None:
    cargo = (REPO / "Cargo.toml").read_text()
    version = next(
        line.split('"')[1] for line in cargo.splitlines() if line.startswith("version = ")
    )
    assert kvcr_audit.__version__ == version
    # The wheel's own version (python/Cargo.toml) is kept equal to it.
    from importlib.metadata import version as dist_version

    assert dist_version("kvcr") == version
    binding = (REPO / "python" / "Cargo.toml").read_text()
    assert 'version = "%s"' % version in binding


def test_py_typed_and_stubs_ship() -> None:
    assert (PKG / "py.typed").exists()
    assert STUB.exists() and (PKG / "_native.pyi").exists()


def test_every_public_name_is_stubbed_and_exists() -> None:
    stubbed = set(stub_functions()) | set(stub_classes()) | {"__version__"}
    assert set(kvcr_audit.__all__) == stubbed
    for name in kvcr_audit.__all__:
        assert hasattr(kvcr, name), name


def params(f: ast.FunctionDef) -> List[Any]:
    a = f.args
    out = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for p, d in zip(pos, defaults):
        out.append((p.arg, "POSITIONAL_OR_KEYWORD", None if d is None else ast.literal_eval(d)))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, "KEYWORD_ONLY", None if d is None else ast.literal_eval(d)))
    return out


@pytest.mark.parametrize("name", sorted(stub_functions()))
def test_signatures_match_the_stubs(name: str) -> None:
    sig = inspect.signature(getattr(kvcr, name))
    got = [
        (p.name, p.kind.name, None if p.default is inspect.Parameter.empty else p.default)
        for p in sig.parameters.values()
    ]
    assert got == params(stub_functions()[name])
    # The return annotation names the same type as the stub's.
    ann = sig.return_annotation
    stub_ret = ast.unparse(stub_functions()[name].returns) if sys.version_info >= (3, 9) else ""
    assert str(ann).replace("_pathlib.", "pathlib.") == stub_ret


def test_every_argument_after_the_first_is_keyword_capable() -> None:
    for name, f in stub_functions().items():
        for p in list(inspect.signature(getattr(kvcr, name)).parameters.values())[1:]:
            assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), (name, p)


def test_exception_hierarchy_matches_the_stubs() -> None:
    for name, c in stub_classes().items():
        cls = getattr(kvcr, name)
        bases = [ast.unparse(b) for b in c.bases]
        assert [b.__name__ for b in cls.__bases__] == bases, name
        for node in c.body:
            if isinstance(node, ast.AnnAssign):
                assert node.target.id in cls.__annotations__, (name, node.target.id)  # type: ignore[attr-defined]
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
    try:
        t.start()
        time.sleep(0.05)  # the thread runs, then gives the GIL back
        t0 = time.perf_counter()
        report = kvcr_audit.audit(root)
        t1 = time.perf_counter()
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert report["summary"]["groups"] == 40
    inside = [s for s in stamps if t0 < s < t1]
    assert inside, "no other thread ran during kvcr_audit.audit (%.3f s)" % (t1 - t0)


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
