"""kvcr_audit.gate: the import gate up to the driver, in the documented order of
answers (docs/format.md §8.9), and the import plan it returns (§13.4),
which `kvcr import --dry-run --format json` carries too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict

import pytest

import kvcr_audit
from conftest import (
    BOOT, HOST, SCHEMAS, cli, descriptor, facts, inventory, profile, same_document, without_clock,
    write,
)


def validate(doc: Dict[str, Any], schema: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    s = json.loads((SCHEMAS / schema).read_text())
    jsonschema.Draft202012Validator(s).validate(doc)


@pytest.fixture
def group(tmp_path: Path, node: Path) -> Path:
    root = inventory(tmp_path / "inv", 8)
    (tmp_path / "profile.json").write_text(json.dumps(profile(world=8)))
    return root


def test_accepted_group_gives_the_plan(group: Path, tmp_path: Path, node: Path) -> None:
    plan = kvcr_audit.gate(group, node_facts=node, profile=tmp_path / "profile.json")
    validate(plan, "import-plan.schema.json")
    assert plan["schema"] == "kvcr.import-plan/v1"
    assert plan["engine_id"] == "llama-py" and plan["epoch"] == 1
    assert plan["incarnation"] == descriptor()["incarnation"]
    assert plan["world_size"] == 8 and plan["local_ranks"] is None
    assert [r["rank"] for r in plan["ranks"]] == list(range(8))
    for r in plan["ranks"]:
        d = json.loads((group / r["path"]).read_text())
        assert r["digest"] == d["digest"]
        assert r["gpu_uuid"] == d["gpu_uuid"]
        assert r["owner"] == d["owner"]
        assert r["writer"] == d["writer"]  # pid, start_ticks, quiesced
        a = d["allocations"][0]
        assert r["allocations"] == [
            {"id": a["id"], "size_bytes": a["size_bytes"], "offset_bytes": 0, "handle": a["handle"]}
        ]
    # The dry run carries the same plan.
    rc, out, _ = cli(
        "import", str(group), "--dry-run", "--format", "json",
        "--profile", str(tmp_path / "profile.json"),
        # The simulated backend answers the driver gate: with no NVIDIA driver
        # here the dry run would predict the real import's exit 2 (§8.7).
        env={"KVCR_NODE_FACTS": str(node), "KVCR_IMPORT_BACKEND": "sim"},
    )
    dry = json.loads(out)
    validate(dry, "import-report.schema.json")
    assert rc == 0 and dry["result"] == "planned", out
    same_document(plan, dry["plan"])
    # Profile as a dict; never from $KVCR_PROFILE (the package reads no
    # environment variable, docs/format.md §13.2).
    by_dict = kvcr_audit.gate(group, node_facts=node, profile=profile(world=8))
    assert without_clock(by_dict) == without_clock(plan)
    os.environ["KVCR_PROFILE"] = str(tmp_path / "profile.json")
    try:
        with pytest.raises(kvcr_audit.UsageError) as e:
            kvcr_audit.gate(str(group), node_facts=node)
        assert "profile" in str(e.value)
    finally:
        del os.environ["KVCR_PROFILE"]


def test_posix_fd_handles_and_offsets_as_stated(tmp_path: Path, node: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    for r in range(2):
        d = descriptor(rank=r, world=2, kind="posix_fd")
        d["allocations"][0]["offset_bytes"] = 4096 * (r + 1)
        write(root, d)
    facts(node, 2)
    plan = kvcr_audit.gate(root, node_facts=node, profile=profile(world=2))
    validate(plan, "import-plan.schema.json")
    assert [r["allocations"][0]["handle"] for r in plan["ranks"]] == [
        {"kind": "posix_fd", "fd": 10}, {"kind": "posix_fd", "fd": 11}
    ]
    assert [r["allocations"][0]["offset_bytes"] for r in plan["ranks"]] == [4096, 8192]


def test_the_plan_carries_content_as_stated(tmp_path: Path, node: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    mem = bytes(range(256)) * 256
    c = kvcr_audit.content_digest(lambda o, n: mem[o : o + n], 65536, pages=4)
    for r in range(2):
        d = descriptor(rank=r, world=2)
        if r == 0:
            d["allocations"][0]["content"] = c
        write(root, d)
    facts(node, 2)
    plan = kvcr_audit.gate(root, node_facts=node, profile=profile(world=2))
    validate(plan, "import-plan.schema.json")
    assert plan["ranks"][0]["allocations"][0]["content"] == c
    assert "content" not in plan["ranks"][1]["allocations"][0]


def test_a_missing_or_incomplete_profile_is_a_usage_error(group: Path, tmp_path: Path) -> None:
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json")
    assert "profile" in str(e.value) and e.value.exit_status == 2
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=profile(world=8, gpus=False))
    assert "gpus" in str(e.value)
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=group / "missing.json")


def test_a_rejected_group_is_refused_with_the_report(group: Path, tmp_path: Path) -> None:
    facts(tmp_path / "facts.json", 8, boot="00000000-0000-4000-8000-000000000001")
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=profile(world=8))
    rep = e.value.report
    validate(rep, "import-report.schema.json")
    assert rep["mode"] == "gate" and rep["result"] == "rejected"
    assert rep["audit"]["verdict"] == "reject"
    assert rep["exit_status"] == 1 == e.value.exit_status
    assert "KV108" in json.dumps(rep["audit"])


def test_the_order_of_answers(group: Path, tmp_path: Path) -> None:
    prof = profile(world=8)
    # Facts not checked: refused, naming them (the driver is not asked).
    facts(tmp_path / "facts.json", 8, processes={}, unreadable="permission denied")
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=prof)
    assert [r["gate"] for r in e.value.report["refusals"]] == ["not-checked"]
    # A rejection on checked facts comes before facts not checked.
    facts(
        tmp_path / "facts.json", 8, processes={}, unreadable="permission denied",
        boot="00000000-0000-4000-8000-000000000001",
    )
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=prof)
    assert e.value.report.get("refusals", []) == []
    assert e.value.report["audit"]["verdict"] == "reject"
    # A usage error comes before everything.
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=profile(world=8, gpus=False))


def test_a_local_part_needs_the_fleet_report(group: Path, tmp_path: Path) -> None:
    part = tmp_path / "part"
    part.mkdir(mode=0o700)
    for r in range(4):
        write(part, descriptor(rank=r, world=8))
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(part, node_facts=tmp_path / "facts.json", profile=profile(world=8), local_ranks="0-3")
    assert [r["gate"] for r in e.value.report["refusals"]] == ["fleet-report"]
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(part, node_facts=tmp_path / "facts.json", profile=profile(world=8), local_ranks=[0, 1, 2, 3],
                  fleet_report=tmp_path / "none.json")
    assert "fleet-report" in json.dumps(e.value.report["refusals"])
    # Every rank named is the whole group: no fleet report needed.
    plan = kvcr_audit.gate(group, node_facts=tmp_path / "facts.json", profile=profile(world=8), local_ranks=range(8))
    assert len(plan["ranks"]) == 8


def test_no_descriptor_and_several_groups(tmp_path: Path, node: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    with pytest.raises(kvcr_audit.Refused):
        kvcr_audit.gate(empty, node_facts=node, profile=profile(world=8))
    two = tmp_path / "two"
    two.mkdir(mode=0o700)
    write(two, descriptor("a", 0, 1), subdir="a")
    write(two, descriptor("b", 0, 1, group=1), subdir="b")
    p = profile("a", 1)
    facts(node, 1)
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gate(two, node_facts=node, profile=p)  # several groups, as `kvcr import` without --engine
    assert "engine=ID" in str(e.value) and "--" not in str(e.value)
    with pytest.raises(kvcr_audit.UsageError) as e:
        kvcr_audit.gate(two, node_facts=node, profile={**p, "engine_id": "a"}, engine="nope")
    assert "nope" in str(e.value)
    facts(node, 1)
    plan = kvcr_audit.gate(two, node_facts=node, profile=p, engine="a")
    assert plan["engine_id"] == "a"
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.gate(two, node_facts=node, profile=p, engine="b")  # the profile names a


def test_the_plan_carries_each_ranks_writer(tmp_path: Path) -> None:
    # A writer that crashed before quiescing (its process gone) is no
    # KV109; the plan says quiesced false, so the engine decides without
    # reading the descriptor again.
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    for r in range(2):
        write(root, descriptor(rank=r, world=2, quiesced=r == 0, writer=(4100 + r, 99 + r)))
    node = facts(tmp_path / "facts.json", 2, processes={4242: 123456})  # writers gone
    plan = kvcr_audit.gate(root, profile=profile(world=2), node_facts=node)
    validate(plan, "import-plan.schema.json")
    assert [r["writer"] for r in plan["ranks"]] == [
        {"pid": 4100, "start_ticks": 99, "quiesced": True},
        {"pid": 4101, "start_ticks": 100, "quiesced": False},
    ]


def test_a_gate_without_the_gpus_says_how_to_give_node_facts(tmp_path: Path) -> None:
    # What a machine without a GPU driver answers (docs/live.md,
    # docs/python.md): every other fact checks out, the GPUs cannot be read.
    root = inventory(tmp_path / "inv", 2)
    node = tmp_path / "no-gpus.json"
    node.write_text(json.dumps({
        "boot_id": BOOT, "hostname": HOST, "processes": {"4242": 123456}, "gpus": None,
    }))
    with pytest.raises(kvcr_audit.Refused) as e:
        kvcr_audit.gate(root, profile=profile(world=2), node_facts=node)
    assert [r["gate"] for r in e.value.report["refusals"]] == ["not-checked"]
    m = e.value.message
    assert "gpu-present: " in m and "not checked" in m, m
    assert "node_facts=FILE" in m and "docs/live.md" in m, m
    # Given the GPUs, the same gate answers with the plan.
    plan = kvcr_audit.gate(root, profile=profile(world=2), node_facts=facts(node, 2))
    assert len(plan["ranks"]) == 2
