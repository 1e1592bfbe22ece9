#!/usr/bin/env bash
# The audit benchmark of issue #6 (see docs/bench.md): builds kvcr and the
# inventory generator in release mode, generates 2,500 groups × 8 ranks
# (20,000 descriptors, ~100 MB, real digests) once, then times, warm cache,
# interleaved: the read floors (benches/floor.c, plain and under
# docs/format.md §2.3, built by bench.py with cc -O2), find … -exec cat, a
# plain Python validator and `kvcr audit --format json`; prints medians,
# ratios to both floors, peak RSS (2,500 and 10,000 groups) and the latency
# of auditing one 8-rank group.
#
# Usage: benches/audit.sh [DIR] [-- extra options of benches/bench.py]
#   DIR: where inventories are generated and kept for the next run
#        (default: $KVCR_BENCH_DIR, else /tmp/kvcr-bench). Needs ~600 MB.
#   e.g. benches/audit.sh /tmp/kvcr-bench -- --runs 9 --scale-groups 0
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${KVCR_BENCH_DIR:-/tmp/kvcr-bench}"
if [[ $# -gt 0 && "$1" != "--" ]]; then dir="$1"; shift; fi
[[ "${1:-}" == "--" ]] && shift
mkdir -p "$dir"
cargo build --release --quiet --bin kvcr --example gen-bench --example bench-run
exec python3 benches/bench.py \
    --kvcr target/release/kvcr \
    --gen target/release/examples/gen-bench \
    --runner target/release/examples/bench-run \
    --dir "$dir" "$@"
