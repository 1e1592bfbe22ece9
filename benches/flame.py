#!/usr/bin/env python3
"""Folds `perf script` call stacks of a kvcr run into a flame graph (SVG)
and a table of where the time went, by phase and by thread (docs/bench.md,
issue #39 §2). Run through benches/flame.sh, which records the profile.

    perf script -F tid,time,ip,sym -i perf.data > perf.txt
    benches/flame.py perf.txt --svg flame.svg [--folded flame.folded]

Input: `perf script` with call chains (`perf record --call-graph=dwarf`),
one block per sample: a header line `TID TIME:` then one `IP SYMBOL` line
per frame, leaf first, and an empty line. Inlined frames are kept (a
release-debug build names them), generic parameters are dropped so one
function is one box.

Output:
- the phase table: each sample is put in the first phase, in the order
  below, whose pattern matches a frame of its stack, so a phase's share
  is inclusive of what it calls (the SHA-256 inside the digest is
  `sha256`, not `canonical form`);
- the serial tail: samples of the calling thread after the last sample of
  any other thread (the work that does not run in parallel);
- the SVG: width proportional to samples, root at the bottom, boxes under
  0.25 % of the samples left out; hover shows the frame and its share.
"""

import argparse
import collections
import html
import re
import sys
import zlib

# (phase, regular expression over one frame's symbol). First match wins,
# tested phase by phase over the whole stack.
PHASES = [
    ("sha256", r"sha2::|sha256"),
    ("canonical form", r"descriptor::canon::"),
    ("JSON reading", r"format::json::read::"),
    ("field checks, descriptor", r"descriptor::parse::|descriptor::check::"),
    ("judgement", r"kvcr_audit::rules::"),
    ("report", r"kvcr_audit::print::|serde_json::ser|format::json::write|format::wire::|io::output::"),
    ("read(2)", r"ksys_read|__x64_sys_read\b"),
    ("open, fstat, reopen, close (§2.3)", r"safe_file::|inventory::open::|inventory::beneath::|do_sys_open|do_sys_openat2|__x64_sys_openat|__x64_sys_close|__x64_sys_newfstat|vfs_fstat|__x64_sys_statx"),
    ("hand-off between threads", r"io::pipeline::Shared|futex|__x64_sys_futex|std::sync::"),
    ("walk (listing, names)", r"getdents|iterate_dir|inventory::walk|RawDir"),
    ("process start and exit", r"execve|_dl_start|_dl_|do_exit|exit_mmap|__libc_start"),
    ("malloc, free", r"^(_int_malloc|_int_free|malloc|free|cfree|realloc|_int_realloc|malloc_consolidate|unlink_chunk)"),
]


HEAD = re.compile(r"^\s*(\d+)\s+(\d+(?:\.\d+)?):\s*$")


def parse(path):
    """[(tid, time, [frames root first])]."""
    samples = []
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if cur is not None:
                    samples.append(cur)
                cur = None
                continue
            # A sample's head: the thread id (perf pads it with spaces to
            # its column when it has fewer digits) and the time; its frames
            # follow, one per line, indented.
            head = HEAD.match(line)
            if head:
                cur = (int(head.group(1)), float(head.group(2)), [])
                continue
            if cur is None:
                continue
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                cur[2].append(clean(parts[1]))
    if cur is not None:
        samples.append(cur)
    return [(t, ts, list(reversed(fr))) for t, ts, fr in samples]


def clean(sym):
    sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
    sym = sym.replace(" (inlined)", "")
    # Generic parameters: nested <...>, innermost first.
    prev = None
    while prev != sym:
        prev = sym
        sym = re.sub(r"<[^<>]*>", "", sym)
    sym = re.sub(r"::\{\{closure\}\}", "::{closure}", sym)
    return sym or "[unknown]"


def phase_of(frames):
    for name, pat in PHASES:
        rx = re.compile(pat)
        if any(rx.search(f) for f in frames):
            return name
    return "other"


def table(samples, title):
    total = len(samples) or 1
    counts = collections.Counter(phase_of(fr) for _, _, fr in samples)
    print("%s: %d samples" % (title, len(samples)))
    order = [p for p, _ in PHASES] + ["other"]
    for p in order:
        if counts[p]:
            print("  %-36s %6d  %5.1f %%" % (p, counts[p], 100.0 * counts[p] / total))


def svg(samples, out, title):
    root = {"n": 0, "kids": {}}
    for _, _, fr in samples:
        node = root
        node["n"] += 1
        for f in fr:
            node = node["kids"].setdefault(f, {"n": 0, "kids": {}})
            node["n"] += 1
    total = root["n"] or 1
    width, row, pad = 1200.0, 16, 24
    boxes = []

    def walk(node, x, depth, name):
        boxes.append((x, depth, node["n"], name))
        cx = x
        for k, kid in sorted(node["kids"].items()):
            if kid["n"] * 400 >= total:
                walk(kid, cx, depth + 1, k)
            cx += kid["n"]

    walk(root, 0, 0, "all")
    depth = max(b[1] for b in boxes) + 1
    height = depth * row + pad * 2
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="11">'
        % (width, height),
        '<rect width="100%%" height="100%%" fill="#fdfdf6"/><text x="6" y="16">%s</text>'
        % html.escape(title),
    ]
    for x, d, n, name in boxes:
        px = x * width / total
        w = n * width / total
        y = height - pad - (d + 1) * row
        share = 100.0 * n / total
        h = (zlib.crc32(name.encode()) % 60) + 20
        color = "rgb(%d,%d,%d)" % (230, 100 + h, 40 + h // 2)
        label = html.escape(name)
        shown = ""
        if w > 40:
            chars = int(w / 6.6)
            shown = html.escape(name if len(name) <= chars else name[: max(chars - 2, 0)] + "..")
        parts.append(
            '<g><title>%s (%d samples, %.1f %%)</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#fff" stroke-width="0.5"/>'
            '<text x="%.1f" y="%d">%s</text></g>'
            % (label, n, share, px, y, max(w, 0.5), row - 1, color, px + 2, y + row - 4, shown)
        )
    parts.append("</svg>\n")
    with open(out, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script", help="perf script -F tid,time,ip,sym output")
    ap.add_argument("--svg", help="write the flame graph here")
    ap.add_argument("--folded", help="write folded stacks (one 'a;b;c N' line each) here")
    ap.add_argument("--title", default="kvcr audit")
    args = ap.parse_args()
    samples = parse(args.script)
    if not samples:
        sys.exit("no samples in %s (was it recorded with --call-graph?)" % args.script)
    tids = collections.Counter(t for t, _, _ in samples)
    main_tid = min(tids)
    t0 = min(ts for _, ts, _ in samples)
    t1 = max(ts for _, ts, _ in samples)
    print("%d samples over %.3f s, %d threads" % (len(samples), t1 - t0, len(tids)))
    table(samples, "all threads")
    for tid in sorted(tids):
        ts = [s for s in samples if s[0] == tid]
        table(ts, "thread %d%s, %.3f-%.3f s" % (
            tid, " (calling)" if tid == main_tid else "",
            min(s[1] for s in ts) - t0, max(s[1] for s in ts) - t0))
    others = [ts for t, ts, _ in samples if t != main_tid]
    if others:
        last = max(others)
        tail = [s for s in samples if s[0] == main_tid and s[1] > last]
        table(tail, "serial tail (calling thread after the others' last sample, %.3f s)" % (t1 - last))
    if args.folded:
        folded = collections.Counter(";".join(fr) for _, _, fr in samples)
        with open(args.folded, "w") as f:
            for k, v in sorted(folded.items()):
                f.write("%s %d\n" % (k, v))
    if args.svg:
        svg(samples, args.svg, "%s: %d samples" % (args.title, len(samples)))


if __name__ == "__main__":
    main()
