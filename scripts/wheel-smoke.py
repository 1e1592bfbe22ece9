"""Smoke test of an installed kvcr wheel (scripts/dist-check.sh runs it with a
fresh virtual environment's python, from a scratch directory, with no Rust
on the PATH).

Usage: python wheel-smoke.py FIXTURES VERSION

Writes the four ranks of FIXTURES/accept-tp4 into a new inventory with
kvcr_audit.write_rank (node facts from FIXTURES/live/node-match.json), audits it (accepted, exit 0), rewrites one rank with
another geometry (rejected, KV104, exit 1) and checks that a descriptor with
a bad member raises kvcr_audit.DescriptorError with the audit's code.
"""

import json
import pathlib
import sys
import tempfile

import kvcr_audit


def main() -> None:
    fixtures = pathlib.Path(sys.argv[1])
    version = sys.argv[2]
    where = pathlib.Path(kvcr_audit.__file__).resolve()
    assert "site-packages" in where.parts, f"kvcr imported from {where}, not the installed wheel"
    assert kvcr_audit.__version__ == version, f"kvcr_audit.__version__ {kvcr_audit.__version__!r}, not {version!r}"

    ranks = [
        json.loads((fixtures / "accept-tp4" / "inventory" / f"rank-{r}.json").read_text())
        for r in range(4)
    ]
    # The fixture's ranks describe its node (gpu-node-17), not this machine:
    # write_rank checks the node through the fixture's facts file, as a
    # producer's test would (docs/python.md).
    facts = fixtures / "live" / "node-match.json"
    root = pathlib.Path(tempfile.mkdtemp(prefix="kvcr-wheel-"))
    for d in ranks:
        written = kvcr_audit.write_rank(root, d, subdir="llama", node_facts=facts)
        assert written.parent == root / "llama", written
    doc = kvcr_audit.audit(root)
    assert doc["schema"] == "kvcr.audit-report/v1", doc["schema"]
    assert doc["exit_status"] == 0, doc["cause"]
    assert [(g["engine_id"], g["verdict"]) for g in doc["groups"]] == [
        ("llama3-70b-a", "accept")
    ], doc["groups"]

    other = dict(ranks[1], geometry=dict(ranks[1]["geometry"], num_blocks=512))
    kvcr_audit.write_rank(root, other, subdir="llama", node_facts=facts)
    doc = kvcr_audit.audit(root)
    assert doc["exit_status"] == 1, doc["exit_status"]
    codes = {f["code"] for g in doc["groups"] for r in g["ranks"] for f in r["findings"]}
    assert "KV104" in codes, codes

    bad = dict(ranks[0], node=dict(ranks[0]["node"], boot_id="not-a-uuid"))
    try:
        kvcr_audit.write_rank(root, bad, subdir="bad", node_facts=facts)
    except kvcr_audit.DescriptorError as e:
        assert e.code == "KV007" and e.field == "node.boot_id", (e.code, e.field)
    else:
        raise AssertionError("a bad boot_id was written")
    print(f"wheel-smoke: kvcr {kvcr_audit.__version__} from {where.parent}: write_rank, audit, errors ok")


if __name__ == "__main__":
    main()
