"""kvcr_audit.seal / kvcr_audit.digest / kvcr_audit.write_rank against `kvcr seal` and
`kvcr digest`: byte-identical digests and files, and the audit's codes for
what is wrong."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Dict

import pytest

import kvcr_audit
from conftest import cli, codes, descriptor, write, writer_facts


def cli_seal(tmp_path: Path, text: str, name: str = "rank-0.json") -> bytes:
    d = tmp_path / "cli"
    d.mkdir(exist_ok=True)
    f = d / name
    f.write_text(text, encoding="utf-8")
    rc, out, err = cli("seal", "-q", str(f))
    assert rc == 0, err
    return f.read_bytes()


ODD_STRINGS = [
    "Qwen/通义千问-72B",
    "Ünïcødé é ß 🚀",
    "tab\there \"quoted\" back\\slash /slash",
    "ctl \u0001\u001f del \u007f nbsp \u00a0 ls \u2028",
]


@pytest.mark.parametrize("name", ODD_STRINGS)
def test_seal_is_byte_identical_to_the_cli(tmp_path: Path, name: str) -> None:
    d = descriptor(model=name)
    text = json.dumps(d, indent=2)  # ensure_ascii escapes: the parsed content counts
    sealed_cli = cli_seal(tmp_path, text)
    ours = kvcr_audit.seal(d)
    assert ours["digest"] == json.loads(sealed_cli)["digest"]
    assert kvcr_audit.digest(d) == ours["digest"]
    rc, out, _ = cli("digest", str(tmp_path / "cli" / "rank-0.json"))
    assert rc == 0 and out.strip() == ours["digest"]
    # write_rank writes exactly the bytes `kvcr seal` writes.
    (tmp_path / "py").mkdir(mode=0o700)
    p = write(tmp_path / "py", d)
    assert p.read_bytes() == sealed_cli
    # The input is not modified; the copy keeps member order, digest last.
    assert "digest" not in d
    assert list(ours)[:-1] == list(d) and list(ours)[-1] == "digest"


def test_minus_zero_and_large_integers(tmp_path: Path) -> None:
    d = descriptor()
    d["created_unix_ms"] = 2**63 - 1  # the largest the schema takes
    d["allocations"][0]["size_bytes"] = 2**64 - 1
    d["owner"]["start_ticks"] = 2**64 - 1
    sealed_cli = json.loads(cli_seal(tmp_path, json.dumps(d, indent=2)))
    ours = kvcr_audit.seal(d)
    assert ours == sealed_cli  # json.loads keeps these ints exact
    assert ours["created_unix_ms"] == 2**63 - 1
    # `-0` is written 0 in the canonical form (§3.2): a file with -0 and
    # Python's 0 (json.loads("-0") == 0) have one digest.
    f = tmp_path / "minus-zero.json"
    d = descriptor()
    d["allocations"][0] = {"id": "kv-0", "offset_bytes": 0, **{
        k: v for k, v in d["allocations"][0].items() if k != "id"}}
    f.write_text(json.dumps(d).replace('"offset_bytes": 0', '"offset_bytes": -0'))
    assert "-0" in f.read_text()
    rc, out, _ = cli("digest", str(f))
    assert rc == 0
    assert out.strip() == kvcr_audit.digest(json.loads(f.read_text())) == kvcr_audit.seal(d)["digest"]


@pytest.mark.parametrize(
    "path,value",
    [
        (("epoch",), 2**63),
        (("epoch",), 2**64),
        (("epoch",), 2**200),
        (("epoch",), -1),
        (("epoch",), 0),
        (("epoch",), True),
        (("epoch",), 1.0),
        (("epoch",), float("nan")),
        (("rank",), False),
        (("owner", "pid"), 2**31),
        (("owner", "start_ticks"), 2**64),
        (("geometry", "num_layers"), 2**32 + 1),
        (("geometry", "use_mla"), 0),
        (("allocations", 0, "size_bytes"), 2**64),
        (("allocations", 0, "size_bytes"), 65536.0),
        (("node", "boot_id"), "6c1d0e52-3a1f-4d5e-9b7a-2f4c8e1d9a30\n"),
    ],
)
def test_bad_values_raise_the_clis_code(tmp_path: Path, path: Any, value: Any) -> None:
    d: Dict[str, Any] = descriptor()
    t: Any = d
    for k in path[:-1]:
        t = t[k]
    t[path[-1]] = value
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    # What the CLI says of the same text.
    f = tmp_path / "rank-0.json"
    f.write_text(json.dumps(d, allow_nan=True))
    rc, out, err = cli("seal", str(f))
    assert rc == 1
    rc, out, _ = cli("examine", str(f), "--format", "json")
    want = [c for c in codes(json.loads(out)) if c != "KV008"]
    assert e.value.code == want[0], (e.value, out)
    dotted = ".".join(str(k) for k in path).replace(".0.", "[0].")
    if e.value.code == "KV007":
        assert e.value.field == dotted, e.value
        assert dotted in e.value.message
    assert e.value.exit_status == 1
    assert isinstance(e.value, kvcr_audit.Error)
    with pytest.raises(kvcr_audit.DescriptorError):
        write(tmp_path, d)
    assert not (tmp_path / "rank-0.json").read_text().startswith("{\n")  # untouched


def test_shape_errors(tmp_path: Path) -> None:
    for bad in ([], "x", None, 3):
        with pytest.raises(kvcr_audit.DescriptorError):
            kvcr_audit.seal(bad)  # type: ignore[arg-type]
    d = descriptor()
    d["extra"] = 1
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV007" and e.value.field == "extra"
    d = descriptor()
    del d["node"]
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.field == "node"
    # A wrong digest is replaced: the library seals the value its caller
    # built (docs/format.md §6.1, §13.1). `kvcr seal` refuses the same file
    # (KV008) unless --reseal-edited, and then writes the same digest.
    d = descriptor()
    d["digest"] = "sha256:" + "0" * 64
    assert kvcr_audit.seal(d)["digest"] == kvcr_audit.digest(d) != d["digest"]
    f = tmp_path / "stale.json"
    f.write_text(json.dumps(d, indent=2))
    rc, out, err = cli("seal", str(f))
    assert rc == 1 and "KV008" in err, err
    rc, out, err = cli("seal", "--reseal-edited", str(f))
    assert rc == 0 and "overriding KV008" in out, (out, err)
    assert json.loads(f.read_text())["digest"] == kvcr_audit.seal(d)["digest"]
    # Over 1 MiB: KV004.
    d = descriptor(model="m" * 200)
    d["model"]["revision"] = "r"
    d["allocations"] = [
        {"id": "a%d" % i, "size_bytes": 65536, "handle": {"kind": "fabric", "hex": "%0128x" % i}}
        for i in range(4096)
    ]
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV004"


def test_write_rank_is_atomic_0600_and_replaces(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    p1 = write(root, descriptor(epoch=1), subdir="a/b")
    assert p1 == root / "a" / "b" / "rank-0.json"
    assert stat.S_IMODE(os.stat(p1).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(root / "a").st_mode) == 0o700
    ino = os.stat(p1).st_ino
    # Every argument by keyword, as the stub declares them.
    p2 = kvcr_audit.write_rank(
        root=str(root), descriptor=descriptor(epoch=2), subdir="a/b", node_facts=writer_facts()
    )
    assert p2 == p1 and os.stat(p2).st_ino != ino  # renamed over, not rewritten
    assert json.loads(p2.read_text())["epoch"] == 2
    assert sorted(os.listdir(root / "a" / "b")) == ["rank-0.json"]  # no staging file
    assert kvcr_audit.audit(root)["exit_status"] == 0


def test_write_rank_never_goes_through_a_symlink(tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "link")
    with pytest.raises(kvcr_audit.Error) as e:
        write(root, descriptor(), subdir="link")
    assert "symlink" in str(e.value)
    with pytest.raises(kvcr_audit.Error):
        write(root, descriptor(), subdir="link/deeper")
    assert os.listdir(elsewhere) == []
    (root / "file").write_text("x")
    with pytest.raises(kvcr_audit.UsageError) as e:
        write(root, descriptor(), subdir="file/x")
    assert "not a directory" in str(e.value)
    # A dangling symlink is refused too, and nothing is created behind it.
    os.symlink(tmp_path / "nowhere", root / "dangling")
    with pytest.raises(kvcr_audit.Error) as e:
        write(root, descriptor(), subdir="dangling")
    assert "symlink" in str(e.value) and not (tmp_path / "nowhere").exists()
    for bad in ("../out", "/abs", "a/../b", "."):
        with pytest.raises(kvcr_audit.UsageError):
            write(root, descriptor(), subdir=bad)
    # A symlink named rank-0.json is replaced, never followed.
    target = tmp_path / "target.json"
    target.write_text("keep")
    os.symlink(target, root / "rank-0.json")
    write(root, descriptor())
    assert target.read_text() == "keep"
    assert not os.path.islink(root / "rank-0.json")
    with pytest.raises(kvcr_audit.UsageError):
        write(tmp_path / "missing", descriptor())


def test_proc_start_ticks_and_boot_id() -> None:
    t = kvcr_audit.proc_start_ticks(os.getpid())
    stat_text = Path("/proc/self/stat").read_text()
    assert t == int(stat_text.rsplit(")", 1)[1].split()[19])
    assert kvcr_audit.proc_start_ticks(pid=os.getpid()) == t
    b = kvcr_audit.boot_id()
    assert b == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert "\n" not in b
    for pid in (0, -1, 2**31, 2**70):
        with pytest.raises(kvcr_audit.Error):
            kvcr_audit.proc_start_ticks(pid)
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.proc_start_ticks(True)


def test_odd_python_values_are_descriptor_errors() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    d = descriptor()
    d["model"]["quantization"] = deep
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV006"
    d = descriptor()
    d["model"]["name"] = "\ud800"  # a lone surrogate is not UTF-8
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV006"
    d = descriptor()
    d["model"]["name"] = b"bytes"
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV007"
    # Two keys that json writes alike are a duplicate key: KV006.
    d = descriptor()
    d["node"][1] = "a"  # type: ignore[index]
    d["node"]["1"] = "b"
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert e.value.code == "KV006"
