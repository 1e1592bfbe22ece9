#!/usr/bin/env python3
"""The validator an operator would otherwise write, for the benchmark.

Walks ROOT, parses every rank-<R>.json, checks its SHA-256 digest over the
canonical form (docs/format.md §3.2: sorted keys, no whitespace, only the escapes JSON
requires; json.dumps with these arguments writes exactly that for
descriptors), groups descriptors by engine_id and accepts a group when every
rank 0..world_size-1 is there once, with a good digest, in one incarnation.
Prints one JSON summary; exit 1 when a group is rejected.

Deliberately plain (os.walk, json, hashlib): no multiprocessing, no tricks.

Usage: python3 benches/validator.py ROOT
"""

import collections
import hashlib
import json
import os
import re
import sys

NAME = re.compile(r"rank-(0|[1-9][0-9]*)\.json")


def digest_ok(doc):
    claimed = doc.pop("digest", None)
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    actual = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return claimed == actual


def main():
    root = sys.argv[1]
    groups = collections.defaultdict(list)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            m = NAME.fullmatch(name)
            if not m:
                files.append({"path": path, "problem": "not a descriptor"})
                continue
            try:
                with open(path, "rb") as f:
                    doc = json.loads(f.read())
            except (OSError, ValueError) as e:
                files.append({"path": path, "problem": f"unreadable: {e}"})
                continue
            if not isinstance(doc, dict) or "engine_id" not in doc:
                files.append({"path": path, "problem": "not a descriptor object"})
                continue
            ok = digest_ok(doc)
            if int(m.group(1)) != doc.get("rank"):
                ok = False
            groups[doc["engine_id"]].append({"path": path, "ok": ok, "doc": doc})

    report = []
    for engine in sorted(groups):
        ranks = groups[engine]
        best = max(ranks, key=lambda r: r["doc"].get("epoch", 0))["doc"]
        current = [r for r in ranks if r["doc"].get("incarnation") == best.get("incarnation")]
        world = best.get("world_size", 0)
        seen = collections.Counter(r["doc"].get("rank") for r in current)
        shape = (best.get("tp"), best.get("pp"), best.get("model"), best.get("geometry"))
        accepted = (
            all(r["ok"] for r in current)
            and sorted(seen) == list(range(world))
            and all(n == 1 for n in seen.values())
            and all(
                (r["doc"].get("tp"), r["doc"].get("pp"), r["doc"].get("model"), r["doc"].get("geometry"))
                == shape
                for r in current
            )
        )
        report.append(
            {
                "engine_id": engine,
                "verdict": "accept" if accepted else "reject",
                "ranks": [{"path": r["path"], "ok": r["ok"]} for r in sorted(current, key=lambda r: r["path"])],
            }
        )
    accepted = sum(g["verdict"] == "accept" for g in report)
    json.dump(
        {
            "groups": report,
            "files": files,
            "summary": {"groups": len(report), "accepted": accepted, "rejected": len(report) - accepted},
        },
        sys.stdout,
        indent=2,
    )
    sys.stdout.write("\n")
    return 0 if report and accepted == len(report) else 1


if __name__ == "__main__":
    sys.exit(main())
