#!/usr/bin/env bash
# kvcr offload against the statx floor (benches/offload_floor.c) on one
# generated tree, same run, warm cache (docs/bench.md "kvcr offload").
# Usage: benches/offload.sh [FILES] [LAYOUT]   (LAYOUT: mp = one flat
# lmcache-mp directory; llmd = an llm-d namespace of 2 ranks, FILES/2 keys)
# Environment: THREADS (both walkers, default 1), ROUNDS (default 3), BASE
# (a second kvcr binary to time in the same rounds), KVCR, BENCH_DIR.
# Prints one line per run: wall, user and system seconds, peak RSS.
# Needs: a release build (cargo build --release --locked), cc, python3, GNU time.
set -euo pipefail
files=${1:-1000000}
layout=${2:-mp}
kvcr=${KVCR:-target/release/kvcr}
# BENCH_DIR keeps the generated tree for the next run (it takes minutes).
if [ -n "${BENCH_DIR:-}" ]; then dir=$BENCH_DIR; mkdir -p "$dir"; else
  dir=$(mktemp -d /tmp/kvcr-offload-bench.XXXXXX); trap 'rm -rf "$dir"' EXIT; fi
cc -O2 -pthread -o "$dir/floor" benches/offload_floor.c
[ -d "$dir/root" ] || python3 - "$dir/root" "$files" "$layout" <<'PY'
import hashlib, json, os, sys
root, n, layout = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(root)
def h(i): return hashlib.sha256(str(i).encode()).hexdigest()
if layout == "mp":
    for i in range(n // 2):
        for r in range(2):
            kv = (2 << 24) | (r << 16) | (2 << 8) | r
            open(os.path.join(root, f"m@0x{kv:08x}@0@{h(i)}.data"), "wb").close()
else:
    f = {"model_name": "m", "hash_block_size": 16, "gpu_blocks_per_file": 16, "tp_size": 2,
         "pp_size": 1, "pcp_size": 1, "dcp_size": 1, "dtype": "auto",
         "kv_cache_groups": [{"block_size": 16, "layer_names": ["a"]}], "inference_engine": "vllm"}
    c = json.dumps(f, sort_keys=True, separators=(",", ":"))
    base = os.path.join(root, "m_" + hashlib.sha256(c.encode()).hexdigest()[:12])
    os.makedirs(base)
    json.dump(f, open(os.path.join(base, "config.json"), "w"), indent=2, sort_keys=True)
    for i in range(n // 2):
        x = h(i)
        for r in range(2):
            d = f"{base}_r{r}/{x[:3]}/{x[3:5]}_g0"
            os.makedirs(d, exist_ok=True)
            open(f"{d}/{x}.bin", "wb").close()
PY
threads=${THREADS:-1}
rounds=${ROUNDS:-3}
floor=(env FLOOR_THREADS="$threads" "$dir/floor" "$dir/root")
args=(offload "$dir/root" --threads "$threads" --progress never --format json)
# BASE names a second kvcr binary (the build before a change), timed in
# the same rounds. Each round runs the slots in ABBA order (floor, kvcr,
# [base, base,] kvcr, floor) so that a drift in load is shared. Exit
# status 1 (a set rejected) is an answer, not a failure.
t() { /usr/bin/time -f "$1 %e s wall %U user %S sys %M KiB" "${@:2}" >/dev/null 2>"$dir/time" || true
  grep -v '^Command exited' "$dir/time"; }
"${floor[@]}" >/dev/null; "$kvcr" "${args[@]}" >/dev/null || true
[ -z "${BASE:-}" ] || "$BASE" "${args[@]}" >/dev/null || true
echo "threads $threads; $(uptime)"
for i in $(seq "$rounds"); do
  t floor "${floor[@]}"
  t kvcr "$kvcr" "${args[@]}"
  if [ -n "${BASE:-}" ]; then t base "$BASE" "${args[@]}"; t base "$BASE" "${args[@]}"; fi
  t kvcr "$kvcr" "${args[@]}"
  t floor "${floor[@]}"
done
echo "$(uptime)"
