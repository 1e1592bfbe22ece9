"""The Python boundary (docs/format.md §13.2): every value a caller can pass
ends in the documented result or a kvcr_audit.Error subclass, never another
exception. One class per test, with its neighbours: what is accepted on
either side of each refusal."""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

import kvcr_audit
from conftest import (
    FIXTURES, cli, descriptor, facts, inventory, profile, write, writer_facts,
)

TP4 = FIXTURES / "accept-tp4" / "inventory"


def usage(f: Callable[[], Any], *names: str) -> kvcr_audit.UsageError:
    """`f()` raises UsageError (exit 2) whose message names each of `names`."""
    with pytest.raises(kvcr_audit.UsageError) as e:
        f()
    assert e.value.exit_status == 2
    for n in names:
        assert n in e.value.message, (n, e.value.message)
    return e.value


# ---- 1. Lone surrogates: UsageError, never UnicodeEncodeError -------------

LONE = ["\ud800", "a\udfffb", "\udbff\udbff"]


@pytest.mark.parametrize("s", LONE)
def test_a_lone_surrogate_in_a_string_option_is_a_usage_error(s: str, tmp_path: Path) -> None:
    node = facts(tmp_path / "facts.json", 8)
    usage(lambda: kvcr_audit.audit(TP4, engine=s), "engine=")
    usage(lambda: kvcr_audit.audit(TP4, incarnation=s), "incarnation=")
    usage(lambda: kvcr_audit.audit(TP4, local_ranks="0-" + s), "local_ranks=")
    usage(lambda: kvcr_audit.audit(TP4, max_age="5" + s), "max_age=")
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), engine=s), "engine=")
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), max_report_age=s), "max_report_age=")
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), local_ranks=s), "local_ranks=")
    # In a profile given as a dict: a bad profile.
    usage(lambda: kvcr_audit.audit(TP4, profile={**profile(world=4), "engine_id": s}), "profile=")
    # In a descriptor: not UTF-8, as the audit says of such a file (KV006).
    with pytest.raises(kvcr_audit.DescriptorError) as d:
        kvcr_audit.seal({**descriptor(), "engine_id": s})
    assert d.value.code == "KV006"
    assert node.exists()


@pytest.mark.parametrize("s", LONE)
def test_a_lone_surrogate_in_a_path_is_a_usage_error(s: str, tmp_path: Path) -> None:
    bad = str(tmp_path / ("x" + s))
    usage(lambda: kvcr_audit.audit(bad), "root=")
    usage(lambda: kvcr_audit.audit(TP4, profile=bad), "profile=")
    usage(lambda: kvcr_audit.audit(TP4, live=True, node_facts=bad), "node_facts=")
    usage(lambda: kvcr_audit.gate(bad, profile=profile(world=4)), "root=")
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), fleet_report=bad), "fleet_report=")
    usage(lambda: kvcr_audit.examine(bad), "path=")
    usage(lambda: kvcr_audit.write_rank(bad, descriptor()), "root=")
    usage(lambda: kvcr_audit.write_rank(tmp_path, descriptor(), subdir="a" + s), "subdir=")
    assert list(tmp_path.iterdir()) == []


def test_a_name_the_file_system_gave_round_trips_to_its_bytes(tmp_path: Path) -> None:
    # Neighbour: an undecodable byte read from a directory listing is a
    # surrogateescape character (U+DC80..U+DCFF), a valid path.
    raw = os.fsencode(str(tmp_path)) + b"/inv-\xff"
    os.mkdir(raw, 0o700)
    name = os.fsdecode(raw)
    assert "\udcff" in name
    write(name, descriptor())
    report = kvcr_audit.audit(name)
    assert report["exit_status"] == 0, report
    assert (Path(name) / "rank-0.json").exists()
    # And valid non-ASCII text is text: judged by the rules, not refused as text.
    usage(lambda: kvcr_audit.audit(TP4, engine="modèle"), "engine")


# ---- 2. Numbers of 2^63 or more: UsageError, as the flags ------------------

BIG = [2**63, 2**64 - 1, 2**64, 10**5000, -1]


@pytest.mark.parametrize("n", BIG, ids=["2^63", "2^64-1", "2^64", "10^5000", "-1"])
def test_an_age_or_epoch_out_of_the_flags_range_is_a_usage_error(n: int) -> None:
    e = usage(lambda: kvcr_audit.audit(TP4, min_epoch=n), "min_epoch=")
    assert len(e.message) < 200, e.message  # never the 5,000 digits
    usage(lambda: kvcr_audit.audit(TP4, max_age=n), "max_age=")
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), max_report_age=n), "max_report_age=")
    if n > 0 and n < 10**30:
        usage(lambda: kvcr_audit.audit(TP4, max_age=str(n)), "max_age=")
        rc, _, _ = cli("audit", str(TP4), "--min-epoch", str(n))
        assert rc == 2


def test_the_largest_age_and_epoch_the_flags_take_are_taken() -> None:
    top = 2**63 - 1
    r = kvcr_audit.audit(TP4, min_epoch=top, max_age=top)
    assert r["options"]["min_epoch"] == top and r["options"]["max_age_s"] == top
    rc, out, _ = cli("audit", str(TP4), "--format", "json", "--min-epoch", str(top))
    assert json.loads(out)["options"]["min_epoch"] == top
    assert kvcr_audit.audit(TP4, max_age=str(top))["options"]["max_age_s"] == top
    assert kvcr_audit.audit(TP4, max_age=0)["options"]["max_age_s"] == 0


# ---- 3. None where a number belongs: UsageError -----------------------------

def test_none_where_a_number_belongs_is_a_usage_error() -> None:
    usage(lambda: kvcr_audit.gate(TP4, profile=profile(world=4), max_report_age=None),  # type: ignore[arg-type]
          "max_report_age=")
    usage(lambda: kvcr_audit.proc_start_ticks(None), "pid=")  # type: ignore[arg-type]
    usage(lambda: kvcr_audit.audit(TP4, live=None), "live=")  # type: ignore[arg-type]
    for bad in (1.5, "3", True, [1]):
        usage(lambda: kvcr_audit.audit(TP4, min_epoch=bad), "min_epoch=")  # type: ignore[arg-type]
        usage(lambda: kvcr_audit.audit(TP4, threads=bad), "threads=")  # type: ignore[arg-type]
    # Neighbours: None is "not given" where the option is optional.
    assert kvcr_audit.audit(TP4, min_epoch=None, max_age=None, threads=None)["exit_status"] == 0
    # A content member's integers stay the documented DescriptorError.
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.content_digest(lambda o, n: bytes(n), 65536, pages=None)  # type: ignore[arg-type]
    assert (e.value.code, e.value.field) == ("KV007", "content.pages")


def test_threads_take_what_the_variable_takes() -> None:
    for n in (0, 65, -1):
        usage(lambda: kvcr_audit.audit(TP4, threads=n), "threads=")
    for n in (1, 2, 64):
        assert kvcr_audit.audit(TP4, threads=n)["exit_status"] == 0


# ---- 4. Integers past 4,300 digits: DescriptorError with the member --------

@pytest.mark.parametrize(
    "path, value",
    [
        (("allocations", 0, "size_bytes"), 10**4300),
        (("epoch",), -(10**5000)),
        (("owner", "start_ticks"), 10**10000),
        (("geometry", "num_layers"), 10**4300 + 7),
    ],
    ids=["size_bytes", "epoch", "start_ticks", "num_layers"],
)
def test_an_integer_too_long_to_write_names_its_member(
    path: Any, value: int, tmp_path: Path
) -> None:
    d: Dict[str, Any] = descriptor()
    t: Any = d
    for k in path[:-1]:
        t = t[k]
    t[path[-1]] = value
    want = ".".join(str(p) for p in path).replace(".0.", "[0].")
    for f in (kvcr_audit.seal, kvcr_audit.digest, lambda x: write(tmp_path, x)):
        with pytest.raises(kvcr_audit.DescriptorError) as e:
            f(d)
        assert (e.value.code, e.value.field) == ("KV007", want), e.value.message
        assert "4300 digits" in e.value.message
        assert len(e.value.message) < 200
    assert list(tmp_path.iterdir()) == []


def test_an_integer_just_short_of_that_is_out_of_range_as_usual() -> None:
    # Neighbour: 4,300 digits can be written; the schema's range refuses it.
    d = descriptor()
    d["allocations"][0]["size_bytes"] = 10**4299
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.seal(d)
    assert (e.value.code, e.value.field) == ("KV007", "allocations[0].size_bytes")
    # In a profile dict: a bad profile, naming the member.
    usage(
        lambda: kvcr_audit.audit(TP4, profile={**profile(world=4), "world_size": 10**4300}),
        "profile=", "world_size",
    )


# ---- 5. subdir: plain names only -------------------------------------------

@pytest.mark.parametrize(
    "bad", ["a/./b", "a/.", "./a", ".", "a/../b", "..", "a/..", "/abs", "", "/"]
)
def test_a_subdir_with_a_dot_component_is_refused_like_dotdot(bad: str, tmp_path: Path) -> None:
    root = tmp_path / "inv"
    root.mkdir(mode=0o700)
    usage(lambda: write(root, descriptor(), subdir=bad), "subdir")
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("ok, where", [("a//b", "a/b"), ("a/", "a"), ("a.b/..c", "a.b/..c")])
def test_empty_names_and_dots_inside_a_name_are_plain(ok: str, where: str, tmp_path: Path) -> None:
    p = write(tmp_path, descriptor(), subdir=ok)
    assert p == tmp_path / where / "rank-0.json"


@pytest.mark.parametrize("mask", [0o777, 0o000, 0o022, 0o077])
def test_created_subdirectories_are_0700_whatever_the_umask(mask: int, tmp_path: Path) -> None:
    old = os.umask(mask)
    try:
        p = write(tmp_path, descriptor(), subdir="x/y/z")
    finally:
        os.umask(old)
    for d in ("x", "x/y", "x/y/z"):
        assert stat.S_IMODE(os.stat(tmp_path / d).st_mode) == 0o700, (oct(mask), d)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    # A directory that exists keeps its mode (it is not the writer's to change).
    (tmp_path / "kept").mkdir(mode=0o750)
    os.chmod(tmp_path / "kept", 0o750)
    write(tmp_path, descriptor(), subdir="kept/new")
    assert stat.S_IMODE(os.stat(tmp_path / "kept").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "kept/new").st_mode) == 0o700


# ---- 6. local_ranks: bounded as the flag's text, refused at once ----------

@pytest.mark.parametrize(
    "huge",
    [range(2**62), range(2**64), range(4097), range(-1, 3), range(5000, 0, -1), [0] * 10**6,
     list(range(4097)), set(range(10**5))],
    ids=["2^62", "2^64", "4097", "negative", "5000-down", "1e6-zeros", "list-4097", "set-1e5"],
)
def test_a_huge_local_ranks_is_refused_at_once(huge: Any) -> None:
    t = time.monotonic()
    usage(lambda: kvcr_audit.audit(TP4, local_ranks=huge), "local_ranks=")
    assert time.monotonic() - t < 1.0


@pytest.mark.parametrize("bad", [[4096], [-1], [True], ["0"], [0.0], iter([0, 1]), {0: 1}])
def test_a_rank_the_flag_would_refuse_is_refused(bad: Any) -> None:
    usage(lambda: kvcr_audit.audit(TP4, local_ranks=bad), "local_ranks=")


def test_the_largest_local_ranks_are_taken() -> None:
    # Neighbours: every rank there can be, as a range, a set and text.
    for ok in (range(4096), set(range(4096)), range(4095, -1, -1), "0-4095", [4095]):
        r = kvcr_audit.audit(TP4, local_ranks=ok)
        assert r["exit_status"] in (0, 1), r


# ---- 7. No panic reaches Python --------------------------------------------

def test_a_rust_panic_is_kvcr_error_70_never_panic_exception() -> None:
    # The native half's test hook panics inside the guard every call runs in.
    with pytest.raises(kvcr_audit.Error) as k:
        kvcr_audit._native._panic_for_tests("boom")
    assert type(k.value) is kvcr_audit.Error
    # Raised from the native half as the package's own class: no other
    # exception in its chain.
    assert k.value.__context__ is None and k.value.__cause__ is None
    assert k.value.exit_status == 70
    assert "internal error: boom" in k.value.message


# ---- 8. Messages name the Python argument, not the flag --------------------

def test_messages_name_the_argument_not_the_flag(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 2)
    node = facts(tmp_path / "facts.json", 2)
    msgs = [
        usage(lambda: kvcr_audit.audit(root, strict=True), "strict=True", "live=True").message,
        usage(lambda: kvcr_audit.audit(root, engine="nope"), "engine=").message,
        usage(lambda: kvcr_audit.audit(root, incarnation="3f2b8c1e-7d4a-4b6e-9c2f-1a5d8e7b4c91"),
              "incarnation=").message,
        usage(lambda: kvcr_audit.audit(root, profile=profile(world=2), engine="other"),
              "engine=").message,
        usage(lambda: kvcr_audit.gate(root, node_facts=node), "profile=").message,
        usage(lambda: kvcr_audit.audit(root, max_age="5y"), "max_age=").message,
        usage(lambda: kvcr_audit.gate(root, profile=profile(world=2), max_report_age="5y"),
              "max_report_age=").message,
    ]
    part = tmp_path / "part"
    part.mkdir(mode=0o700)
    for rank in (0, 1):
        write(part, descriptor(rank=rank, world=4))
    with pytest.raises(kvcr_audit.Refused) as r:
        kvcr_audit.gate(part, profile=profile(world=4), local_ranks="0-1",
                  node_facts=facts(tmp_path / "facts4.json", 4),
                  fleet_report=tmp_path / "none.json")
    msgs.append(r.value.message)
    assert "fleet_report=" in r.value.message, r.value.message
    for m in msgs:
        assert "--" not in m and "KVCR_PROFILE" not in m, m
    # The report itself is the command's document, word for word.
    assert "--fleet-report" in json.dumps(r.value.report)


# ---- 9. Where the profile came from, and the notes -------------------------

def test_a_profile_given_as_a_dict_says_so(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 2)
    r = kvcr_audit.audit(root, profile=profile(world=2))
    assert r["options"]["profile"] is None and r["options"]["profile_source"] == "value"
    (tmp_path / "p.json").write_text(json.dumps(profile(world=2)))
    r = kvcr_audit.audit(root, profile=tmp_path / "p.json")
    assert r["options"]["profile_source"] == "flag"
    assert "profile_source" not in kvcr_audit.audit(root)["options"]


def test_notes_are_logged_never_printed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    root = inventory(tmp_path / "inv", 2)
    node = facts(tmp_path / "facts.json", 2)
    with caplog.at_level(logging.INFO, logger="kvcr_audit"):
        kvcr_audit.audit(root, live=True, node_facts=node)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    want = "node facts come from node_facts=%s, not from this node" % node
    assert [r.getMessage() for r in caplog.records if r.name == "kvcr_audit"] == [want]
    usage(lambda: kvcr_audit.audit(root, live=True, node_facts=tmp_path / "missing.json"),
          "node_facts=")


# ---- 10. write_rank's node checks ------------------------------------------

@pytest.mark.parametrize(
    "edit, code, field",
    [
        (lambda d: d["node"].update(boot_id="00000000-0000-4000-8000-000000000001"),
         "KV108", "node.boot_id"),
        (lambda d: d["node"].update(hostname="another-node"), "KV110", "node.hostname"),
        (lambda d: d["owner"].update(start_ticks=1), "KV108", "owner"),
        (lambda d: d["owner"].update(pid=4243), "KV108", "owner"),
    ],
)
def test_write_rank_refuses_what_the_node_contradicts(
    edit: Callable[[Dict[str, Any]], None], code: str, field: str, tmp_path: Path
) -> None:
    d = descriptor()
    edit(d)
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.write_rank(tmp_path, d, node_facts=writer_facts())
    assert (e.value.code, e.value.field) == (code, field), e.value.message
    assert list(tmp_path.iterdir()) == []
    # seal checks no node fact: it seals what was written elsewhere.
    assert kvcr_audit.seal(d)["digest"].startswith("sha256:")


def test_write_rank_does_not_ask_quiescence_or_the_gpus(tmp_path: Path) -> None:
    d = descriptor(quiesced=False, writer=(4100, 123400))
    d["gpu_uuid"] = "GPU-00000000-0000-4000-8000-00000000ffff"  # on no node
    kvcr_audit.write_rank(tmp_path, d, node_facts=writer_facts())
    # A fact the node cannot tell is no mismatch.
    unknown = facts(tmp_path / "unknown.json", 1, processes={}, unreadable="permission denied")
    kvcr_audit.write_rank(tmp_path, descriptor(), node_facts=unknown, subdir="u")


def test_write_rank_on_this_machine_checks_this_machine(tmp_path: Path) -> None:
    # The conftest's node is not this one: refused with the audit's code.
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.write_rank(tmp_path, descriptor())
    assert e.value.code in ("KV108", "KV110")
    # This node, this process as the owner: written.
    me = os.getpid()
    ticks = kvcr_audit.proc_start_ticks(me)
    d = descriptor(owner=(me, ticks), writer=(me, ticks))
    d["node"] = {"hostname": os.uname().nodename, "boot_id": kvcr_audit.boot_id()}
    assert kvcr_audit.write_rank(tmp_path, d).exists()


def test_write_rank_refuses_what_examine_rejects(tmp_path: Path) -> None:
    for edit, code in (
        (lambda d: d.update(rank=1), "KV101"),  # rank 1 of world 1
        (lambda d: d["allocations"][0].update(size_bytes=16), "KV104"),
        (lambda d: d.update(created_unix_ms=int(time.time())), "KV108"),  # seconds
    ):
        d = descriptor()
        edit(d)
        for f in (kvcr_audit.seal, lambda x: write(tmp_path, x)):
            with pytest.raises(kvcr_audit.DescriptorError) as e:
                f(d)
            assert e.value.code == code, e.value.message
        assert list(tmp_path.iterdir()) == []


# ---- The package's short paths decide as its general ones -------------------

def test_every_spelling_of_a_profile_path_and_an_age_gives_the_same_plan(tmp_path: Path) -> None:
    """A profile given as str, bytes, Path, PurePosixPath, a Path subclass
    or any os.PathLike (returning str or bytes) is the same file; an age of
    exact int type, an int subclass or an __index__ object is the same
    number, and a bool is none (the exact types take a shorter route through
    the package's checks, docs/bench.md, issue #39 §3)."""
    import pathlib

    root = inventory(tmp_path / "inv", 4)
    node = facts(tmp_path / "facts.json", 4)
    prof = tmp_path / "profile.json"
    prof.write_text(json.dumps(profile(world=4)))

    class Sub(type(prof)):  # type: ignore[misc,valid-type]
        pass

    class Like:
        def __init__(self, p: Any) -> None:
            self.p = p

        def __fspath__(self) -> Any:
            return self.p

    class Index:
        def __index__(self) -> int:
            return 300

    class IntSub(int):
        pass

    def plan(p: Any, age: Any = 300) -> Dict[str, Any]:
        d = kvcr_audit.gate(root, profile=p, node_facts=node, max_report_age=age)
        d.pop("generated_unix_ms")
        return d

    want = plan(prof)
    spellings = [str(prof), bytes(prof), pathlib.PurePosixPath(prof), Sub(prof), Like(str(prof)),
                 Like(bytes(prof))]
    for p in spellings:
        assert plan(p) == want, p
    for age in (IntSub(300), Index(), 0, 2**63 - 1, "5m"):
        assert plan(prof, age) == want, age
    for bad in (True, False, -1, 2**63):
        usage(lambda: plan(prof, bad), "max_report_age=")
    usage(lambda: plan(Like(1)), "profile=")
    usage(lambda: plan(Like("\udc80\ud800")), "profile=")
