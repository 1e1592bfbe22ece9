"""kvcr_audit.pools returns the document `kvcr pools --format json` prints (apart
from the clock), on a pool directory KVCR 0.1.1 itself wrote
(fixtures/pools/, recreated here), and refuses what KVCR would refuse
(docs/format.md §16)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import kvcr_audit
from conftest import FIXTURES, SCHEMAS, cli, same_document



def recreate(name: str, dst: Path) -> List[Tuple[Path, Tuple[int, int]]]:
    doc = json.loads((FIXTURES / "pools" / (name + ".json")).read_text())
    dst.mkdir()
    out = []
    for f in doc["files"]:
        p = dst / f["name"]
        with open(p, "wb") as o:
            o.truncate(f["size"])
            for off, b in f["pages"]:
                o.seek(off)
                o.write(base64.b64decode(b))
        os.chmod(p, int(f["mode"], 8))
        out.append((p, (int(f["st_dev"]), int(f["st_ino"]))))
    return out


def test_pools_is_the_commands_document(tmp_path: Path) -> None:
    files = recreate("released-then-service-killed", tmp_path / "pd")
    ident = files[0][1]
    got = kvcr_audit.pools(
        tmp_path / "pd", identity=ident, interval_ms=0,
        pool_sizes_gb="0.0001", pool_layouts=":4096", compatibility_digest="abc",
    )
    code, out, err = cli(
        "pools", str(tmp_path / "pd"), "--identity", "%d:%d" % ident,
        "--pool-sizes-gb", "0.0001", "--pool-layouts", ":4096",
        "--compatibility-digest", "abc", "--interval-ms", "0", "--format", "json",
    )
    assert code == 0, err
    same_document(got, json.loads(out))
    assert got["schema"] == "kvcr.pools-report/v1"
    p0 = got["pools"][0]
    assert p0["handback"]["state"] == "complete"
    assert p0["verdict"] == "ok"


def test_a_wrong_digest_is_a_rejection_not_an_exception(tmp_path: Path) -> None:
    files = recreate("released-then-service-killed", tmp_path / "pd")
    got = kvcr_audit.pools(
        [tmp_path / "pd"], identity=files[0][1], interval_ms=0,
        pool_sizes_gb="0.0001", pool_layouts=":4096", compatibility_digest="abd",
    )
    assert got["exit_status"] == 1
    assert "KV414" in [f["code"] for f in got["pools"][0]["findings"]]
    assert got["pools"][0]["verdict"] == "rejected"


def test_the_schema_accepts_it(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    recreate("service-killed-primary-publishing", tmp_path / "pd")
    got = kvcr_audit.pools(tmp_path / "pd", interval_ms=0)
    schema = json.loads((SCHEMAS / "pools-report.schema.json").read_text())
    jsonschema.validate(got, schema)
    assert got["pools"][1]["journal"]["pending"]["frames"] == 4


@pytest.mark.parametrize(
    "kw",
    [
        dict(pool_layouts="a:1,a:1"),
        dict(pool_sizes_gb="0"),
        dict(interval_ms=60001),
        dict(identity=(1,)),
        dict(live="yes"),
    ],
)
def test_what_kvcr_would_refuse_is_a_usage_error(tmp_path: Path, kw: Dict[str, Any]) -> None:
    (tmp_path / "pd").mkdir()
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.pools(tmp_path / "pd", **kw)


def test_no_path_is_a_usage_error() -> None:
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.pools([])
