#!/usr/bin/env bash
# The merge-memory benchmark of issue #19 item 6 (see docs/bench.md): peak
# RSS of `kvcr merge` against the total size of its inputs, up to merge's
# 64 MiB-per-input limit; target ≤ 4 × input + 32 MiB.
#
# Usage: benches/merge_rss.sh [BASELINE_KVCR] [-- options of benches/merge_rss.py]
#   BASELINE_KVCR: another kvcr binary measured in the same run (e.g. one
#   built from main), alternating with this one.
#   Uses target/release/kvcr (built here), or $KVCR when set.
set -euo pipefail
cd "$(dirname "$0")/.."
base=()
if [[ $# -gt 0 && "$1" != "--" ]]; then base=(--baseline "$1"); shift; fi
[[ "${1:-}" == "--" ]] && shift
kvcr="${KVCR:-}"
if [[ -z "$kvcr" ]]; then
  cargo build --release --quiet --bin kvcr
  kvcr=target/release/kvcr
fi
exec python3 benches/merge_rss.py --kvcr "$kvcr" "${base[@]}" "$@"
