"""kvcr_audit.gate asks the profile's `require_content` exactly where `kvcr import`
does: the two run one function for the order of answers (docs/format.md
§13.3, src/import/sequence.rs). Content comes after the fleet proof and
before facts that could not be checked, and the refusal is the one the
dry run lists first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Set

import pytest

import kvcr_audit
from conftest import cli, descriptor, facts, profile, write


def content() -> Dict[str, Any]:
    return kvcr_audit.content_digest(lambda offset, length: bytes(length), 65536)


def group(root: Path, world: int, with_content: Set[int]) -> Path:
    root.mkdir(mode=0o700)
    for r in range(world):
        d = descriptor(rank=r, world=world)
        if r in with_content:
            d["allocations"][0]["content"] = content()
        write(root, d)
    return root


def requiring(world: int) -> Dict[str, Any]:
    return {**profile(world=world), "require_content": True}


def dry_run(root: Path, p: Dict[str, Any], tmp_path: Path, node: Path, *args: str) -> Any:
    path = tmp_path / "profile-dry.json"
    path.write_text(json.dumps(p))
    rc, out, err = cli(
        "import", str(root), "--dry-run", "--format", "json", "--profile", str(path), *args,
        env={"KVCR_NODE_FACTS": str(node), "KVCR_IMPORT_BACKEND": "sim"},
    )
    return rc, json.loads(out)


def test_missing_content_the_profile_requires_is_refused(tmp_path: Path, node: Path) -> None:
    root = group(tmp_path / "inv", 8, {0, 1, 2})
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(root, node_facts=node, profile=requiring(8))
    rep = e.value.report
    assert rep["mode"] == "gate" and rep["exit_status"] == 1 == e.value.exit_status
    assert [r["gate"] for r in rep["refusals"]] == ["content"]
    msg = rep["refusals"][0]["message"]
    assert "5 of 8 allocations" in msg and "rank 3 allocation kv-3" in msg, msg
    # The dry run says the same first.
    rc, dry = dry_run(root, requiring(8), tmp_path, node)
    assert rc == 1 and dry["refusals"][0] == rep["refusals"][0], dry
    # Not required: the same group is ready.
    assert len(kvcr_audit.gate(root, node_facts=node, profile=profile(world=8))["ranks"]) == 8


def test_every_allocation_with_content_is_ready_and_the_plan_carries_it(
    tmp_path: Path, node: Path
) -> None:
    root = group(tmp_path / "inv", 8, set(range(8)))
    plan = kvcr_audit.gate(root, node_facts=node, profile=requiring(8))
    assert [a["content"] for r in plan["ranks"] for a in r["allocations"]] == [content()] * 8
    rc, dry = dry_run(root, requiring(8), tmp_path, node)
    assert rc == 0 and dry.get("refusals", []) == [] and dry["result"] == "planned", dry


def test_the_fleet_proof_comes_before_content(tmp_path: Path, node: Path) -> None:
    part = tmp_path / "part"
    part.mkdir(mode=0o700)
    for r in range(4):
        write(part, descriptor(rank=r, world=8))
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(part, node_facts=node, profile=requiring(8), local_ranks="0-3")
    assert [r["gate"] for r in e.value.report["refusals"]] == ["fleet-report"]
    rc, dry = dry_run(part, requiring(8), tmp_path, node, "--local-ranks", "0-3")
    assert [r["gate"] for r in dry["refusals"]] == ["fleet-report", "content"], dry


def test_content_comes_before_facts_not_checked(tmp_path: Path) -> None:
    root = group(tmp_path / "inv", 8, set())
    unknown = facts(tmp_path / "unknown.json", 8, processes={}, unreadable="permission denied")
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(root, profile=requiring(8), node_facts=unknown)
    assert [r["gate"] for r in e.value.report["refusals"]] == ["content"]
    rc, dry = dry_run(root, requiring(8), tmp_path, unknown)
    assert [r["gate"] for r in dry["refusals"]] == ["content", "not-checked"], dry
