#!/usr/bin/env bash
# Adversarial audit benchmark (docs/bench.md): inputs that once made the
# audit quadratic in memory, output or time. For each case it generates
# the inventory, then measures, in the same run, the raw read floor
# (`find -type f -exec cat {} +`) and `kvcr audit` (JSON, table, -q):
# wall time, peak RSS (GNU time, else /proc-less python fallback) and
# output bytes, and prints the ratios to the input size and to the floor.
#
# Usage: benches/adversarial.sh [DIR]   (default /tmp/kvcr-adv; ~60 MB)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/tmp/kvcr-adv}"
cargo build --release --quiet --bin kvcr --example gen-adversarial
kvcr=target/release/kvcr
gen=target/release/examples/gen-adversarial
mkdir -p "$dir"

measure() { # prints: seconds peak_kib bytes_out
  python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{dt:.3f} {ru.ru_maxrss} {len(p.stdout)} {p.returncode}")
PY
}

run_case() { # name mode n
  local name=$1 mode=$2 n=$3 inv="$dir/$1"
  if [[ ! -d "$inv" ]]; then "$gen" "$mode" "$inv" "$n"; fi
  local in_bytes files
  in_bytes=$(find "$inv" -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
  files=$(find "$inv" -type f | wc -l)
  read -r f_s f_kib _ _ < <(measure find "$inv" -type f -exec cat {} +)
  read -r j_s j_kib j_out j_rc < <(measure "$kvcr" audit "$inv" --format json)
  read -r t_s t_kib t_out t_rc < <(measure "$kvcr" audit "$inv")
  read -r q_s q_kib q_out q_rc < <(measure "$kvcr" audit "$inv" -q)
  python3 - "$name" "$files" "$in_bytes" "$f_s" "$j_s" "$j_kib" "$j_out" "$t_s" "$t_kib" "$t_out" "$q_s" "$q_kib" "$j_rc" <<'PY'
import sys
n, files, inb, fs, js, jk, jo, ts, tk, to, qs, qk, rc = sys.argv[1:]
files, inb, jk, jo, tk, to, qk = map(int, (files, inb, jk, jo, tk, to, qk))
fs, js, ts, qs = map(float, (fs, js, ts, qs))
print(f"{n}: {files} files, {inb/1e6:.1f} MB in; floor (cat) {fs:.3f} s")
for what, s, k, o in (("json", js, jk, jo), ("table", ts, tk, to), ("-q", qs, qk, 0)):
    print(f"  {what:5} {s:.3f} s ({s/fs:.2f}x floor)  peak RSS {k/1024:.1f} MiB  "
          f"out {o/1e6:.2f} MB ({o/inb:.2f}x input)")
print(f"  exit {rc}")
PY
}

run_case copies-1000 copies 1000
run_case copies-3000 copies 3000
run_case copies-4000 copies 4000
run_case wide-2000 wide 2000
