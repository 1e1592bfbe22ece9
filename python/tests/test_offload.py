"""kvcr_audit.offload returns the document `kvcr offload --format json` prints
(apart from the clock and the thread count), on the committed offload
fixtures (docs/format.md §15)."""

from __future__ import annotations

import json

import pytest

import kvcr_audit
from conftest import FIXTURES, SCHEMAS, cli, same_document

CASES = json.loads((FIXTURES / "offload" / "cases.json").read_text())


def doc_of_cli(root, *args):
    code, out, err = cli("offload", str(root), "--format", "json", "--progress", "never",
                         "--threads", "1", *args)
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_same_document_as_the_cli(case):
    root = FIXTURES / "offload" / case["case"] / "root"
    args = case["args"]
    code, want = doc_of_cli(root, *args)
    opts = {}
    it = iter(args)
    for flag in it:
        if flag == "--model":
            opts.setdefault("model", []).append(next(it))
            continue
        value = int(next(it))
        if flag == "--page-bytes":
            opts["page_bytes"] = value
        elif flag == "--kv-bytes-per-chunk":
            opts["kv_bytes_per_chunk"] = value
        elif flag == "--bytes-per-block":
            opts["bytes_per_block"] = value
        elif flag == "--chunk-bytes":
            opts["chunk_bytes"] = value
    got = kvcr_audit.offload(str(root), threads=1, **opts)
    assert got["exit_status"] == code == case["exit_status"]
    same_document(got, want)


def test_the_document_validates_against_its_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SCHEMAS / "offload-report.schema.json").read_text())
    doc = kvcr_audit.offload(FIXTURES / "offload" / "llmd-missing-rank" / "root")
    jsonschema.validate(doc, schema)
    assert doc["exit_status"] == 1
    [s] = doc["sets"]
    assert s["verdict"] == "reject" and s["cause_code"] == "KV303"


def test_usage_errors_are_exceptions():
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.offload("/nonexistent/offload/root")
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.offload(FIXTURES / "offload" / "vllm-complete" / "root", producer="tensorrt")
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.offload(FIXTURES / "offload" / "vllm-complete" / "root", chunk_bytes=0)
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.offload(FIXTURES / "offload" / "sglang-complete" / "root", page_bytes=0)
    with pytest.raises(kvcr_audit.UsageError):
        kvcr_audit.offload(FIXTURES / "offload" / "sglang-complete" / "root", model=[b"m"])


def test_sglang_model_settles_the_split():
    root = FIXTURES / "offload" / "sglang-ambiguous" / "root"
    doc = kvcr_audit.offload(root)
    assert [s["producer"] for s in doc["sets"]] == ["unattributed"]
    doc = kvcr_audit.offload(root, model="org/Model-7B", page_bytes=96)
    [s] = doc["sets"]
    assert s["producer"] == "sglang" and s["verdict"] == "ok"
    assert s["identity"]["tp_size"] == 2 and s["blocks"]["complete"] == 1
    assert doc["options"]["model"] == ["org/Model-7B"]


def test_without_a_path_it_looks_at_the_default_roots(tmp_path):
    doc = kvcr_audit.offload(sglang_storage_dir=tmp_path)
    looked = doc["looked_in"]
    assert looked[0]["path"] == "/tmp/shared-kv"
    assert looked[1]["path"] == str(tmp_path) and looked[1]["present"] is True
