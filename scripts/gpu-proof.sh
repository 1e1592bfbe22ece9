#!/usr/bin/env bash
# GPU proof for `kvcr import` (docs/format.md §8, §8.9; issues #4 and #12).
#
# One unattended command with a time limit that runs the whole import
# contract on a Linux machine with an NVIDIA GPU, its driver (libcuda),
# python3 and the Rust toolchain, and prints ONE JSON summary on stdout:
#   {"ok": true|false, "error": null|"...", "elapsed_s": N, "steps": [{"step", "ok", "detail"}, ...]}
# Exit 0 when every step passed, 1 when one failed, 124 on the time limit,
# 2 when the proof cannot run here (no GPU, no python3). Human-readable
# progress goes to stderr. It is NOT run in CI (no GPU there), and it has not
# been run by its author, who had no GPU: treat its first run as the real test.
# (CI runs the CUDA path against an ABI-level fake driver instead:
# tests/it/fakecuda.rs; docs/import.md says what each one proves.)
#
# What it does, on every visible GPU (one rank per GPU, or --ranks N):
#   1. starts examples/gpu_owner.rs as the KV owner: a cuMemAlloc buffer
#      exported as cuda_ipc, a second one whose rank bytes start at
#      offset_bytes, a VMM allocation exported as posix_fd (fd kept open in
#      the owner), and a VMM fabric allocation where supported; each filled
#      with its own byte; one sealed descriptor per rank and a profile;
#   2. kvcr audit --live, kvcr import --dry-run, kvcr import (trial), and a
#      trial with --map-read-write;
#   3. gpu_owner check: imports through kvcr's library (CUDA backend + ledger),
#      compares the bytes with what the owner wrote (after offset_bytes),
#      releases, and proves the mappings are gone;
#   4. injected failures on the real backend (KVCR_IMPORT_BACKEND=cuda:...):
#      exit 3 with nothing left, exit 4 with what remains, 130 on interrupt;
#   5. --hold with --ready-file, a byte check by a second importer (a second
#      mapping) while held, SIGTERM, the ready file removed; a real SIGINT in
#      the middle of an import;
#   6. the owner's bytes are unchanged after everything; with the owner gone
#      kvcr refuses (exit 1).
#
# Usage: scripts/gpu-proof.sh [--size-mib N] [--ranks N]   (GPU_PROOF_TIMEOUT=seconds, default 900)
# posix_fd needs pidfd_getfd on the owner: run as root, or as the owner's user
# with kernel.yama.ptrace_scope <= 1 (the helper sets PR_SET_PTRACER_ANY).
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."

SIZE_MIB=64
RANKS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --size-mib) SIZE_MIB=$2; shift 2 ;;
    --ranks) RANKS=(--ranks "$2"); shift 2 ;;
    *) echo "usage: $0 [--size-mib N] [--ranks N]" >&2; exit 2 ;;
  esac
done


TIMEOUT=${GPU_PROOF_TIMEOUT:-900}

# One JSON line to stdout for a proof that cannot run here.
cannot_run() {
  local msg=${1//\\/\\\\}
  msg=${msg//\"/\\\"}
  printf '{"ok": false, "error": "%s", "elapsed_s": 0, "steps": []}\n' "$msg"
  exit 2
}

if [ -z "${GPU_PROOF_INNER:-}" ]; then
  # The outer run: preconditions, the time limit, the one JSON summary.
  command -v python3 >/dev/null || cannot_run "gpu-proof needs python3 to read JSON"
  command -v nvidia-smi >/dev/null || cannot_run "no NVIDIA GPU: nvidia-smi not found (this proof needs an NVIDIA GPU and its driver)"
  nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || cannot_run "no NVIDIA GPU: nvidia-smi -L lists none"
  command -v timeout >/dev/null || cannot_run "gpu-proof needs timeout(1) (coreutils)"
  steps=$(mktemp)
  t0=$(date +%s)
  rc=0
  GPU_PROOF_INNER=1 GPU_PROOF_STEPS="$steps" timeout --kill-after=30 "$TIMEOUT" "$self" "$@" >&2 || rc=$?
  python3 - "$steps" "$rc" "$TIMEOUT" "$(( $(date +%s) - t0 ))" <<'PY'
import json, sys
path, rc, limit, elapsed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
steps = [json.loads(l) for l in open(path) if l.strip()]
if rc == 0:
    error = None
elif rc in (124, 137):
    error = f"timed out after {limit} s"
else:
    failed = [s for s in steps if not s["ok"]]
    error = failed[-1]["detail"] if failed else f"exited {rc}"
print(json.dumps({"ok": rc == 0, "error": error, "elapsed_s": elapsed, "steps": steps}))
PY
  rm -f "$steps"
  case $rc in 0) exit 0 ;; 124|137) exit 124 ;; *) exit 1 ;; esac
fi

unset KVCR_IMPORT_BACKEND KVCR_NODE_FACTS KVCR_INVENTORY

work=$(mktemp -d)
owner=""
kp=""
cleanup() {
  if [ -n "$kp" ]; then kill -TERM "$kp" 2>/dev/null || true; wait "$kp" 2>/dev/null || true; fi
  if [ -n "$owner" ]; then kill -TERM "$owner" 2>/dev/null || true; wait "$owner" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# record OK STEP DETAIL: one JSON line for the summary.
record() {
  python3 -c 'import json,sys; print(json.dumps({"step": sys.argv[2], "ok": sys.argv[1] == "1", "detail": sys.argv[3]}))' \
    "$1" "$STEP" "$2" >>"$GPU_PROOF_STEPS"
}
STEP=setup
pass() { echo "PASS: $*"; record 1 "$*"; }
fail() { echo "FAIL: $*"; record 0 "$*"; exit 1; }

STEP=build
cargo build --release --locked --bin kvcr --example gpu_owner || fail "cargo build --release failed"
K=$PWD/target/release/kvcr
O=$PWD/target/release/examples/gpu_owner

# run WANT CMD...: runs CMD with stdout → $work/out.json, checks its exit status.
run() {
  local want=$1; shift
  local got=0
  "$@" >"$work/out.json" 2>"$work/err.txt" || got=$?
  if [ "$got" != "$want" ]; then
    echo "--- stdout"; cat "$work/out.json"; echo "--- stderr"; cat "$work/err.txt"
    fail "$* exited $got, expected $want"
  fi
}
# j EXPR [FILE]: evaluates a Python expression over the JSON document `d`.
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[2])); print(eval(sys.argv[1]))' "$1" "${2:-$work/out.json}"; }
wait_file() {
  local f=$1 pid=$2 i=0
  until [ -e "$f" ]; do
    kill -0 "$pid" 2>/dev/null || fail "process $pid died before $f appeared"
    i=$((i + 1)); [ $i -lt 1200 ] || fail "timed out waiting for $f"
    sleep 0.1
  done
}

inv=$work/inv
expect=$work/expect.json
profile=$work/expect.profile.json

STEP=owner; echo "== 1. owner"
"$O" serve --inventory "$inv" --expect "$expect" --size-mib "$SIZE_MIB" "${RANKS[@]}" 2>"$work/owner.err" &
owner=$!
wait_file "$expect" "$owner"
cat "$work/owner.err"
nranks=$(ls "$inv" | grep -c '^rank-.*\.json$')
nallocs=$(j 'sum(len(v) for v in d.values())' "$expect")
pass "owner pid $owner serves $nranks ranks, $nallocs allocations"

STEP=trial; echo "== 2. audit, dry run, trial"
[ -e "$profile" ] || fail "the owner wrote no profile"
run 0 "$K" audit --live "$inv" --profile "$profile" --format json
pass "audit --live accepts the group"
run 0 "$K" import --dry-run "$inv" --profile "$profile" --format json
[ "$(j 'd["result"]')" = planned ] || fail "dry run result"
[ "$(j 'len(d["ranks"])')" = "$nranks" ] || fail "dry run ranks"
pass "dry run plans $nranks ranks"
run 0 "$K" import "$inv" --profile "$profile" --format json
[ "$(j 'd["result"]')" = imported ] || fail "trial result"
[ "$(j 'd["backend"]')" = cuda ] || fail "trial backend"
[ "$(j '"remaining" in d')" = False ] || fail "trial left something"
# per rank: 1 context; cuda_ipc: 1 resource; posix_fd/fabric: 3 each
want_res=$(j 'sum(1 + sum(1 if k.startswith("kv-ipc") else 3 for k in v) for v in d.values())' "$expect")
[ "$(j 'd["released"]')" = "$want_res" ] || fail "trial released $(j 'd["released"]'), expected $want_res"
pass "trial imported, verified (read-only VMM mappings) and released $want_res resources"
run 0 "$K" import "$inv" --profile "$profile" --map-read-write --format json
[ "$(j 'd["result"]')" = imported ] || fail "--map-read-write trial result"
pass "trial with --map-read-write imported and released"

STEP=bytes; echo "== 3. bytes through kvcr's CUDA backend"
run 0 "$O" check --inventory "$inv" --expect "$expect"
cat "$work/out.json"
pass "every mapping holds the owner's bytes; every mapping is gone after release"

STEP=failures; echo "== 4. injected failures on the real backend"
for spec in "cuda:fail=device@1" "cuda:fail=import@2" "cuda:fail=reserve@1" "cuda:fail=map@1" \
            "cuda:fail=set-access@1" "cuda:fail=verify@$((nallocs))"; do
  run 3 env KVCR_IMPORT_BACKEND="$spec" "$K" import "$inv" --profile "$profile" --format json
  [ "$(j 'd["result"]')" = failed ] || fail "$spec: result"
  [ "$(j '"remaining" in d')" = False ] || fail "$spec: something remains"
  pass "$spec → exit 3 at $(j 'd["failure"]["step"]'), released $(j 'd["released"]'), nothing remains"
done
run 4 env KVCR_IMPORT_BACKEND="cuda:fail=verify@1,fail-release=1" "$K" import "$inv" --profile "$profile" --format json
[ "$(j 'd["result"]')" = release-failed ] || fail "release-failed result"
[ "$(j 'len(d["remaining"]) > 0')" = True ] || fail "release-failed lists nothing"
pass "failed release → exit 4, remaining: $(j '[r["resource"]["kind"] for r in d["remaining"]]')"
run 130 env KVCR_IMPORT_BACKEND="cuda:interrupt-after=2" "$K" import "$inv" --profile "$profile" --format json
[ "$(j 'd["result"]')" = interrupted ] || fail "interrupt result"
pass "interrupt after 2 acquisitions → exit 130, released $(j 'd["released"]')"

STEP=hold; echo "== 5. hold, ready file, SIGTERM; SIGINT mid-import"
ready=$work/ready.json
"$K" import --hold --ready-file "$ready" "$inv" --profile "$profile" --format json >"$work/hold.json" 2>"$work/hold.err" &
kp=$!
wait_file "$ready" "$kp"
[ "$(j 'd["schema"]' "$ready")" = kvcr.import-ready/v1 ] || fail "ready schema"
[ "$(j 'd["pid"]' "$ready")" = "$kp" ] || fail "ready pid"
[ "$(j 'len(d["ranks"])' "$ready")" = "$nranks" ] || fail "ready ranks"
if nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -qw "$kp"; then
  pass "nvidia-smi lists the holding kvcr ($kp)"
else
  echo "note: nvidia-smi does not list pid $kp (containers often hide it)"
fi
run 0 "$O" check --inventory "$inv" --expect "$expect"
pass "bytes readable by a second importer (a second mapping) while kvcr holds"
kill -TERM "$kp"
got=0; wait "$kp" || got=$?; kp=""
[ "$got" = 0 ] || { cat "$work/hold.err"; fail "hold exited $got after SIGTERM"; }
[ ! -e "$ready" ] || fail "ready file still there after release"
[ "$(j 'd["result"]' "$work/hold.json")" = imported ] || fail "hold result"
[ "$(j '"remaining" in d' "$work/hold.json")" = False ] || fail "hold left something"
pass "hold: ready file after the last rank, released on SIGTERM (exit 0), ready file removed"

KVCR_IMPORT_BACKEND="cuda:delay-ms=400" "$K" import "$inv" --profile "$profile" --format json >"$work/int.json" 2>"$work/int.err" &
kp=$!
sleep 1.5
kill -INT "$kp"
got=0; wait "$kp" || got=$?; kp=""
[ "$got" = 130 ] || { cat "$work/int.err"; fail "SIGINT mid-import exited $got"; }
[ "$(j 'd["result"]' "$work/int.json")" = interrupted ] || fail "SIGINT result"
[ "$(j '"remaining" in d' "$work/int.json")" = False ] || fail "SIGINT left something"
pass "SIGINT mid-import → exit 130 at $(j 'd["failure"]["step"]' "$work/int.json"), released $(j 'd["released"]' "$work/int.json")"

STEP=owner-gone; echo "== 6. the owner's memory is untouched; without the owner kvcr refuses"
run 0 "$O" check --inventory "$inv" --expect "$expect"
pass "bytes unchanged after every import above"
kill -TERM "$owner"; wait "$owner" 2>/dev/null || true; owner=""
run 1 "$K" import "$inv" --profile "$profile" --format json
[ "$(j 'd["result"]')" = rejected ] || fail "owner-gone result"
grep -q KV108 "$work/out.json" || fail "owner gone is not KV108"
pass "owner gone → exit 1 (KV108), nothing imported"

STEP=done; pass "GPU proof passed"
