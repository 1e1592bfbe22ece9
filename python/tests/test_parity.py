"""kvcr_audit.audit and kvcr_audit.examine return the CLI's documents, for every shipped
fixture (apart from the clock)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

import kvcr_audit
from conftest import FIXTURES, cli, codes, facts, inventory, same_document, without_clock

CASES = sorted(p.parent for p in FIXTURES.glob("*/case.json"))


def kwargs_of(args: List[str]) -> Dict[str, Any]:
    """The CLI flags of a fixture's case.json as audit() keywords."""
    kw: Dict[str, Any] = {}
    it = iter(args)
    for a in it:
        name = a.lstrip("-").replace("-", "_")
        if name in ("live", "strict"):
            kw[name] = True
            continue
        value = next(it)
        kw["max_age" if name == "max_age" else name] = value
    if "min_epoch" in kw:
        kw["min_epoch"] = int(kw["min_epoch"])
    return kw


def test_every_fixture_is_compared() -> None:
    assert len(CASES) >= 30, CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_audit_matches_the_cli(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = json.loads((case / "case.json").read_text())
    args = [str(a) for a in spec["args"]]
    rc, out, err = cli("audit", "inventory", "--format", "json", *args, cwd=case)
    want = json.loads(out)
    monkeypatch.chdir(case)
    got = kvcr_audit.audit("inventory", **kwargs_of(args))
    same_document(got, want)
    # The document's exit status is the CLI's, and the fixture's.
    assert got["exit_status"] == rc == spec["exit"]
    assert sorted(set(spec["codes"])) == sorted(set(spec["codes"]) & set(codes(got)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_examine_matches_the_cli(case: Path) -> None:
    files = sorted(
        p for p in (case / "inventory").rglob("*.json") if p.is_file() and not p.is_symlink()
    )
    for f in files:
        rc, out, _ = cli("examine", str(f), "--format", "json")
        assert rc in (0, 1), out
        got = kvcr_audit.examine(f)
        assert without_clock(got) == without_clock(json.loads(out)), f
        assert got["exit_status"] == rc


def test_live_strict_audit_matches_the_cli(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 8)
    node = facts(tmp_path / "facts.json", 8, processes={4242: 123456})  # writer gone
    env = {"KVCR_NODE_FACTS": str(node)}
    for flags, kw in (
        (["--live"], {"live": True}),
        (["--live", "--strict"], {"live": True, "strict": True}),
        (["--live", "--local-ranks", "0-3"], {"live": True, "local_ranks": [0, 1, 2, 3]}),
        (["--max-age", "15m"], {"max_age": "15m"}),
        (["--max-age", "900"], {"max_age": 900}),
        (["--min-epoch", "2"], {"min_epoch": 2}),
    ):
        rc, out, _ = cli("audit", str(root), "--format", "json", *flags, env=env)
        got = kvcr_audit.audit(root, node_facts=node, **kw)
        same_document(got, json.loads(out))
        assert got["exit_status"] == rc, flags


def test_profile_as_dict_judges_like_the_file(tmp_path: Path) -> None:
    case = FIXTURES / "kv106-profile-gpu"
    p = json.loads((case / "profile.json").read_text())
    by_file = kvcr_audit.audit(case / "inventory", profile=case / "profile.json")
    by_dict = kvcr_audit.audit(case / "inventory", profile=p)
    assert by_dict["options"]["profile"] is None
    # A dict names no file: no path, and the source says it was a value.
    by_file["options"]["profile"] = None
    assert by_file["options"].pop("profile_source") == "flag"
    assert by_dict["options"].pop("profile_source") == "value"
    assert without_clock(by_dict) == without_clock(by_file)
    assert "KV106" in codes(by_dict)


def test_the_package_reads_no_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Each of these changes what the command answers; none changes the package's.
    case = FIXTURES / "kv106-profile-gpu"
    unknown = facts(tmp_path / "facts.json", 4, boot="00000000-0000-4000-8000-000000000001")
    rc, out, _ = cli("audit", str(case / "inventory"), "--format", "json")
    monkeypatch.setenv("KVCR_PROFILE", str(case / "profile.json"))
    monkeypatch.setenv("KVCR_NODE_FACTS", str(unknown))
    monkeypatch.setenv("KVCR_THREADS", "not-a-number")
    monkeypatch.setenv("KVCR_PROC_ROOT", str(tmp_path))
    got = kvcr_audit.audit(case / "inventory")
    assert "KV106" not in codes(got) and got["options"]["profile"] is None
    assert without_clock(got) == without_clock(json.loads(out))
    live = kvcr_audit.audit(case / "inventory", live=True)
    assert live["node_facts_source"] == "proc"
    # Given as arguments, they apply.
    assert "KV106" in codes(kvcr_audit.audit(case / "inventory", profile=case / "profile.json"))
    by_arg = kvcr_audit.audit(case / "inventory", live=True, node_facts=unknown)
    assert by_arg["node_facts_source"] == str(unknown)
    assert "KV108" in codes(by_arg)


def test_usage_errors_are_the_clis(tmp_path: Path) -> None:
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.audit(tmp_path / "missing")
    rc, _, err = cli("audit", str(tmp_path / "missing"))
    assert rc == 2 and e.value.exit_status == 2
    for bad in (
        {"strict": True},
        {"local_ranks": "3-1"},
        {"local_ranks": [True]},
        {"local_ranks": []},
        {"min_epoch": -1},
        {"min_epoch": 2**64},
        {"min_epoch": True},
        {"min_epoch": 1.0},
        {"max_age": "5y"},
        {"max_age": 2**64},
        {"engine": "bad id!"},
        {"incarnation": "not-a-uuid"},
        {"profile": tmp_path / "none.json"},
        {"profile": {"schema": "kvcr.profile/v1"}},
        {"profile": 3},
    ):
        with pytest.raises(kvcr_audit.UsageError):
            kvcr_audit.audit(FIXTURES / "accept-tp4" / "inventory", **bad)  # type: ignore[arg-type]


def test_paths_take_str_and_pathlike(tmp_path: Path) -> None:
    root = FIXTURES / "accept-tp4" / "inventory"
    a = kvcr_audit.audit(str(root))
    b = kvcr_audit.audit(root)

    class P:
        def __fspath__(self) -> str:
            return str(root)

    c = kvcr_audit.audit(P())  # type: ignore[arg-type]
    assert without_clock(a) == without_clock(b) == without_clock(c)
    assert kvcr_audit.examine(str(root / "rank-0.json"))["verdict"] == "accept"


def test_option_values_python_callers_have() -> None:
    import uuid as _uuid

    root = FIXTURES / "kv107-profile-incarnation" / "inventory"
    inc = json.loads(sorted(root.rglob("*.json"))[0].read_text())["incarnation"]
    a = kvcr_audit.audit(root, incarnation=inc)
    b = kvcr_audit.audit(root, incarnation=_uuid.UUID(inc))
    assert without_clock(a) == without_clock(b)

    class Index:
        def __index__(self) -> int:
            return 2

    root = FIXTURES / "accept-tp4" / "inventory"
    assert without_clock(kvcr_audit.audit(root, min_epoch=Index())) == without_clock(  # type: ignore[arg-type]
        kvcr_audit.audit(root, min_epoch=2)
    )
    assert without_clock(kvcr_audit.audit(root, local_ranks=[3, 0, 1, 2, 2])) == without_clock(
        kvcr_audit.audit(root, local_ranks="0-3")
    )
