#!/usr/bin/env bash
# Where the audit's time goes (issue #39 §2, docs/bench.md): records
# `kvcr audit INVENTORY --format json` with perf call graphs (DWARF, from a
# release build with debug info: the release-debug profile) and prints the
# share of each phase, per thread and in the serial tail, and writes a
# flame graph (SVG) and the folded stacks.
#
# Usage: benches/flame.sh INVENTORY [OUT_PREFIX] [-- extra perf record options]
#   e.g. benches/flame.sh /tmp/kvcr-bench/inv-2500 /tmp/flame-audit
#   writes OUT_PREFIX.svg, OUT_PREFIX.folded and OUT_PREFIX.txt (the table).
# Needs perf (Debian: linux-perf) and permission to record
# (kernel.perf_event_paranoid ≤ 1, or root). KVCR_THREADS is passed through.
set -euo pipefail
cd "$(dirname "$0")/.."
inv="${1:?usage: benches/flame.sh INVENTORY [OUT_PREFIX] [-- perf options]}"
shift
out="/tmp/flame-audit"
if [[ $# -gt 0 && "$1" != "--" ]]; then out="$1"; shift; fi
[[ "${1:-}" == "--" ]] && shift
command -v perf >/dev/null || { echo "flame.sh: perf is not installed" >&2; exit 2; }
cargo build --profile release-debug --quiet --bin kvcr
bin="${CARGO_TARGET_DIR:-target}/release-debug/kvcr"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
perf record -q -F 4999 --call-graph=dwarf,16384 -o "$data/perf.data" "$@" \
    -- "$bin" audit "$inv" --format json >/dev/null
perf script -F tid,time,ip,sym -i "$data/perf.data" 2>/dev/null >"$data/perf.txt"
python3 benches/flame.py "$data/perf.txt" --svg "$out.svg" --folded "$out.folded" \
    --title "kvcr audit $(basename "$inv") (KVCR_THREADS=${KVCR_THREADS:-default})" | tee "$out.txt"
echo "flame graph: $out.svg" >&2
