#!/usr/bin/env bash
# GPU proof for `kvcr import` (docs/import.md, "The GPU proof"; issue #20 item 4).
#
# Runs the import contract against a real driver on a machine that has NO
# Rust toolchain and no package registry: it never calls cargo. It needs
#   KVCR_BIN       a kvcr binary (default: target/gpu-proof/kvcr, which
#                  scripts/gpu-proof-build.sh builds and the caller carries);
#   GPU_OWNER_BIN  a binary built from scripts/gpu-proof-owner.c (default:
#                  target/gpu-proof/gpu-proof-owner, else it is compiled here
#                  with $CC / cc from scripts/gpu-proof-owner.c; set and
#                  empty, it is always compiled here);
#   python3, timeout(1), and a libcuda (or the project's fake driver).
#
# Results go to GPU_PROOF_OUT, else $OUT (required): summary.json, rewritten
# after every step, and proof.log, every step's commands and output; two
# files, never deleted. summary.json is
#   {"schema": "kvcr.gpu-proof/v1", "finished": bool, "ok": bool|null,
#    "exit": N|null, "timed_out": bool, "elapsed_s": N, "timeout_s": N,
#    "driver": "real"|"fake"|"unknown", "environment": {...},
#    "steps": [{"name", "status": "passed"|"failed"|"skipped", "detail", "seconds"}]}
# Every step runs even when an earlier one failed; a skipped step says why.
# Exit 0 when no step failed, 1 when one did, 124 on the time limit
# (GPU_PROOF_TIMEOUT, default 420 s; each command inside is bounded too),
# 2 when the proof cannot run at all (no kvcr binary, no OUT, no python3).
#
# Usage: scripts/gpu-proof.sh [--size-mib N]   (default 64, at most 4096)
# Test hooks: GPU_PROOF_ONLY="STEP ..." (run only these; the others are
# recorded as skipped), GPU_PROOF_NO_POSIX_FD=REASON (behave as where
# pidfd_getfd is refused: no posix_fd in the base inventory),
# GPU_PROOF_WORK=DIR (scratch, default a temp dir, removed at the end),
# GPU_PROOF_CUDA_STUB=PATH (the toolkit's stub libcuda.so; default searched
# under $CUDA_HOME, /usr/local/cuda* and next to nvcc).
# On stdout: one line per step, then one JSON line (ok, exit, failed steps).
set -uo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
root=$(cd "$(dirname "$0")/.." && pwd)

SIZE_MIB=64
while [ $# -gt 0 ]; do
  case "$1" in
    --size-mib) SIZE_MIB=${2:-}; shift; [ $# -eq 0 ] || shift ;;
    *) echo "usage: $0 [--size-mib N]" >&2; exit 2 ;;
  esac
done
case $SIZE_MIB in ''|*[!0-9]*|0) echo "gpu-proof: --size-mib wants a positive integer" >&2; exit 2 ;; esac
# Three allocations of this size are filled byte by byte: keep it bounded.
[ "${#SIZE_MIB}" -le 4 ] && [ "$SIZE_MIB" -le 4096 ] || { echo "gpu-proof: --size-mib is at most 4096" >&2; exit 2; }
TIMEOUT=${GPU_PROOF_TIMEOUT:-420}
case $TIMEOUT in ''|*[!0-9]*|0) echo "gpu-proof: GPU_PROOF_TIMEOUT wants a positive number of seconds" >&2; exit 2 ;; esac
OUTDIR=${GPU_PROOF_OUT:-${OUT:-}}
if [ -z "$OUTDIR" ]; then
  echo "gpu-proof: set OUT (or GPU_PROOF_OUT) to the folder the results go to" >&2
  exit 2
fi
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
SUMMARY=$OUTDIR/summary.json
LOG=$OUTDIR/proof.log
command -v python3 >/dev/null || { echo "gpu-proof: needs python3" >&2; exit 2; }
command -v timeout >/dev/null || { echo "gpu-proof: needs timeout(1)" >&2; exit 2; }

KVCR=${KVCR_BIN:-$root/target/gpu-proof/kvcr}
if [ -z "${GPU_PROOF_INNER:-}" ] && [ ! -x "$KVCR" ]; then
  msg="no kvcr binary at $KVCR: set KVCR_BIN (scripts/gpu-proof-build.sh builds one to carry)"
  echo "gpu-proof: $msg" >&2
  python3 -c 'import json,sys; json.dump({"schema": "kvcr.gpu-proof/v1", "finished": True, "ok": False, "exit": 2, "error": sys.argv[2], "steps": []}, open(sys.argv[1], "w"), indent=1)' "$SUMMARY" "$msg"
  exit 2
fi

if [ -z "${GPU_PROOF_INNER:-}" ]; then
  # The outer run: the time limit, then the final summary. summary.json is
  # already complete up to the last finished step if this shell is killed.
  : >"$LOG"
  rm -f "$SUMMARY"
  t0=$(date +%s)
  rc=0
  GPU_PROOF_INNER=1 GPU_PROOF_T0=$t0 timeout --kill-after=10 "$TIMEOUT" "$self" --size-mib "$SIZE_MIB" || rc=$?
  python3 - "$SUMMARY" "$rc" "$TIMEOUT" "$(( $(date +%s) - t0 ))" <<'PY'
import json, os, sys
path, rc, limit, elapsed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    s = json.load(open(path))
except (OSError, ValueError):
    s = {"schema": "kvcr.gpu-proof/v1", "steps": [], "environment": {}, "driver": "unknown"}
timed_out = rc in (124, 137)
failed = [x["name"] for x in s["steps"] if x["status"] == "failed"]
if rc == 2 and not s["steps"]:
    s["error"] = s.get("error") or "the proof could not start"
s.update(finished=True, timed_out=timed_out, elapsed_s=elapsed, timeout_s=limit,
         ok=(not timed_out and rc == 0 and not failed),
         exit=124 if timed_out else (2 if rc == 2 else (1 if failed or rc else 0)))
if timed_out:
    s["error"] = f"timed out after {limit} s; the steps above finished"
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(s, f, indent=1)
    f.write("\n")
os.replace(tmp, path)
for x in s["steps"]:
    print(f'{x["status"]:8} {x["name"]}: {x["detail"][:200]}')
line = {k: s[k] for k in ("ok", "exit", "elapsed_s", "driver")}
line.update(failed=failed, summary=path)
print(json.dumps(line))
sys.exit(s["exit"])
PY
  exit $?
fi

# ---- the inner run -------------------------------------------------------
# Every command below is bounded by its own `timeout --foreground` (so it
# stays in this process group: the outer time limit signals it too), and
# background kvcr runs by a watchdog.
exec >>"$LOG" 2>&1 </dev/null
unset KVCR_IMPORT_BACKEND KVCR_NODE_FACTS KVCR_INVENTORY KVCR_PROFILE
W=${GPU_PROOF_WORK:-$(mktemp -d)}
mkdir -p "$W"
chmod 700 "$W"
OWNER_PID=""
M_BASE=""
HOLD_PID=""
cleanup() {
  for p in $HOLD_PID $OWNER_PID; do kill -TERM "$p" 2>/dev/null; done
  for p in $HOLD_PID $OWNER_PID; do wait "$p" 2>/dev/null; done
  for p in $WATCHDOGS; do pkill -KILL -P "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  [ -n "${GPU_PROOF_WORK:-}" ] || rm -rf "$W"
}
trap cleanup EXIT
# The outer time limit signals this whole process group. A step cut by it
# (its owner killed, its kvcr run killed) has no verdict worth keeping, and
# no later step may run: once the limit is reached nothing more is recorded.
# The trap stops the run; the deadline check in step() stops it even where
# the signal did not reach this shell or was ignored when it started.
STOPPING=""
trap 'STOPPING=1; exit 143' TERM INT
INNER_T0=${EPOCHREALTIME/./}
past_limit() {
  [ -n "$STOPPING" ] && return 0
  [ $(( ${EPOCHREALTIME/./} - INNER_T0 )) -ge $(( TIMEOUT * 1000000 )) ]
}

# libcuda.so.1 where the driver usually puts it, when neither ld.so's cache
# nor LD_LIBRARY_PATH has it (a container, a driver under /run/nvidia): its
# folder goes first on LD_LIBRARY_PATH for the owner and every kvcr run.
# GPU_PROOF_LIBCUDA_DIRS (test hook) replaces the list of folders searched.
LIBCUDA_FOUND=""
find_libcuda() {
  local d
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then LIBCUDA_FOUND="ld.so cache"; return; fi
  for d in $(printf '%s' "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
    [ -e "$d/libcuda.so.1" ] && { LIBCUDA_FOUND="LD_LIBRARY_PATH ($d)"; return; }
  done
  for d in ${GPU_PROOF_LIBCUDA_DIRS:-/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/aarch64-linux-gnu \
           /usr/local/nvidia/lib64 /usr/local/nvidia/lib /run/nvidia/driver/usr/lib/x86_64-linux-gnu \
           /run/nvidia/driver/usr/lib64 /usr/lib/wsl/lib /usr/lib/nvidia /usr/local/cuda/compat /usr/lib}; do
    case $d in *stubs*) continue ;; esac
    if [ -e "$d/libcuda.so.1" ]; then
      export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      LIBCUDA_FOUND="$d (put first on LD_LIBRARY_PATH)"
      return
    fi
  done
  LIBCUDA_FOUND="not found: not in ld.so's cache, on LD_LIBRARY_PATH or in the driver's usual folders"
}
find_libcuda
echo "libcuda.so.1: $LIBCUDA_FOUND"

# Python helpers (scripts/gpu-proof-tool.py): JSON, descriptors, the content
# member, the summary.
T() { python3 "$root/scripts/gpu-proof-tool.py" "$@"; }
export GPU_PROOF_ENVFILE=$W/environment.json

# ---- steps: verdicts ---------------------------------------------------------
V=""; D=""
pass() { [ -n "$V" ] || { V=passed; D=$*; }; }
fail() { V=failed; D=$*; }
skip() { [ -n "$V" ] || { V=skipped; D=$*; }; }
step() {
  local name=$1 t0 t1
  V=""; D=""
  echo; echo "==== step $name ($(date -u +%H:%M:%S))"
  if past_limit; then echo "==== $name: not run: the time limit ($TIMEOUT s) is reached"; exit 124; fi
  t0=$(date +%s.%N)
  case " ${GPU_PROOF_ONLY:-$name} " in
    *" $name "*) "s_${name//-/_}" ;;
    *) skip "not selected (GPU_PROOF_ONLY)" ;;
  esac
  t1=$(date +%s.%N)
  if past_limit; then echo "==== $name: cut by the time limit ($TIMEOUT s): not recorded"; exit 124; fi
  [ -n "$V" ] || { V=failed; D="the step ended without a verdict"; }
  echo "==== $name: $V: $D"
  T record "$SUMMARY" "$name" "$V" "$D" "$(python3 -c "print(round($t1 - $t0, 2))")"
}

# kv NAME ARGS...: runs kvcr (bounded), stdout → $W/NAME.json, stderr →
# $W/NAME.err; RC holds the exit status; both are copied to the log.
RC=0
kv() {
  local name=$1; shift
  echo "+ kvcr $*"
  RC=0
  timeout --foreground --kill-after=5 "${KV_TIMEOUT:-60}" "$KVCR" "$@" >"$W/$name.json" 2>"$W/$name.err" || RC=$?
  echo "  exit $RC"
  head -c 4000 "$W/$name.json" | sed 's/^/  | /'
  head -c 2000 "$W/$name.err" | sed 's/^/  ! /'
}
# jget NAME EXPR: a value from $W/NAME.json (d is the document).
jget() { T get "$W/$1.json" "$2" 2>/dev/null; }
# What a report says happened, for details: result, failure step and message.
outcome() {
  jget "$1" '"result=%s step=%s released=%s remaining=%d: %s" % (d.get("result"), (d.get("failure") or {}).get("step"), d.get("released"), len(d.get("remaining") or []), ((d.get("failure") or {}).get("message") or (d.get("audit") or {}).get("cause") or "")[:300])'
}
# bg NAME ARGS...: kvcr in the background (BG is its pid: signals reach kvcr
# itself, not a wrapper), killed after 120 s by a watchdog.
BG=""
bg() {
  local name=$1; shift
  echo "+ kvcr $* &"
  "$KVCR" "$@" >"$W/$name.json" 2>"$W/$name.err" &
  BG=$!
  ( sleep 120; kill -KILL "$BG" 2>/dev/null ) >/dev/null 2>&1 &
  WATCHDOGS="$WATCHDOGS $!"
}
WATCHDOGS=""
# sigcgt PID SIGNO: wait (≤ 20 s) until PID has a handler for SIGNO (SigCgt).
# Returns 2 when /proc shows no SigCgt at all (a runtime that does not
# emulate it): the caller then waits 2 s instead and says so.
SIGNOTE=""
sigcgt() {
  local pid=$1 bit=$(( $2 - 1 )) i=0 mask
  SIGNOTE=""
  while [ $i -lt 200 ]; do
    [ -r "/proc/$pid/status" ] || return 1
    if ! grep -q '^SigCgt:' "/proc/$pid/status"; then
      SIGNOTE=" (no SigCgt in /proc here: sent after 2 s)"
      sleep 2
      return 0
    fi
    mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
    [ -n "$mask" ] || return 1
    if (( (16#$mask >> bit) & 1 )); then return 0; fi
    i=$((i + 1)); sleep 0.1
  done
  return 1
}
# waitfile FILE PID SECONDS: until FILE exists, while PID lives.
waitfile() {
  local f=$1 pid=$2 n=$(( $3 * 10 )) i=0
  until [ -e "$f" ]; do
    kill -0 "$pid" 2>/dev/null || return 1
    i=$((i + 1)); [ $i -lt $n ] || return 1
    sleep 0.1
  done
}
owner_up() { [ -n "$OWNER_PID" ] && kill -0 "$OWNER_PID" 2>/dev/null && [ -s "$W/owner/owner.json" ]; }
need_owner() { owner_up || { skip "the owner is not running (see step owner)"; return 1; }; }
# posix_fd needs pidfd_getfd (step environment probes it); without it the
# base inventory leaves posix_fd out and the posix_fd steps skip.
export GPU_PROOF_NO_POSIX_FD=${GPU_PROOF_NO_POSIX_FD:-}
need_posix() {
  need_owner || return 1
  [ -z "$GPU_PROOF_NO_POSIX_FD" ] || { skip "posix_fd cannot be taken here: $GPU_PROOF_NO_POSIX_FD"; return 1; }
}
# inv NAME VARIANT [good|bad]: a sealed one-rank inventory $W/inv-NAME.
inv() {
  local d=$W/inv-$1
  rm -rf "$d"
  T inventory "$W/owner/owner.json" "$d" "$2" ${3:+"$3"} || return 1
  "$KVCR" seal -q "$d/rank-0.json" || return 1
  INV=$d
}
imp() { local name=$1; shift; kv "$name" import "$INV" --profile "$W/profile.json" --format json "$@"; }
# expect_fail NAME VARIANT STEP WHAT: a resealed variant the driver (or the
# kernel) must refuse: exit 3 at STEP, everything released.
expect_fail() {
  need_owner || return
  inv "$1" "$2" || { fail "could not write the $2 variant"; return; }
  imp "$1"
  local got
  got=$(outcome "$1")
  if [ "$RC" = 3 ] && [ "$(jget "$1" '(d.get("failure") or {}).get("step")')" = "$3" ] \
     && [ "$(jget "$1" 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "$4: exit 3, $got"
  else
    fail "$4: expected exit 3 at step $3 with nothing remaining, got exit $RC: $got"
  fi
}

# ---- the binaries --------------------------------------------------------------
OWNER_BIN=${GPU_OWNER_BIN:-}
if [ -z "${GPU_OWNER_BIN+set}" ] && [ -x "$root/target/gpu-proof/gpu-proof-owner" ]; then
  OWNER_BIN=$root/target/gpu-proof/gpu-proof-owner
fi

s_binaries() {
  [ -x "$KVCR" ] || { fail "no kvcr binary at $KVCR: set KVCR_BIN (scripts/gpu-proof-build.sh builds one to carry)"; return; }
  local ver orc=0
  ver=$("$KVCR" --version 2>&1 | head -1) || { fail "$KVCR --version failed: $ver"; return; }
  if [ -n "$OWNER_BIN" ] && [ -x "$OWNER_BIN" ]; then
    # A carried owner that cannot start here (another glibc, another
    # architecture) is built here instead; without arguments it says its
    # usage and exits 2, before it loads libcuda.
    "$OWNER_BIN" >/dev/null 2>"$W/owner-try.err" || orc=$?
    if [ "$orc" != 2 ]; then
      ver="$ver; the carried owner $OWNER_BIN does not run here (exit $orc: $(head -c 200 "$W/owner-try.err" | tr '\n' ' '))"
      OWNER_BIN=""
    fi
  fi
  if [ -z "$OWNER_BIN" ]; then
    local cc=${CC:-cc}
    command -v "$cc" >/dev/null || { fail "no GPU_OWNER_BIN and no C compiler ($cc) to build scripts/gpu-proof-owner.c"; return; }
    OWNER_BIN=$W/gpu-proof-owner
    "$cc" -O2 -Wall -Wextra -o "$OWNER_BIN" "$root/scripts/gpu-proof-owner.c" -ldl \
      || { fail "$cc could not build scripts/gpu-proof-owner.c"; OWNER_BIN=""; return; }
    ver="$ver; owner built here with $cc"
  else
    [ -x "$OWNER_BIN" ] || { fail "GPU_OWNER_BIN $OWNER_BIN is not executable"; OWNER_BIN=""; return; }
    ver="$ver; owner $OWNER_BIN"
  fi
  if "$KVCR" schema descriptor 2>/dev/null | grep -q '"content"'; then
    CONTENT=1; ver="$ver; descriptors take a content member"
  else
    CONTENT=""; ver="$ver; this kvcr has no content member (content steps skip)"
  fi
  pass "$ver"
}

s_environment() {
  [ -n "$OWNER_BIN" ] || { skip "no owner binary (see step binaries)"; return; }
  local smi="" cudav="" nvccv="" virt="" dm="" imex="" ldc="" product="" hyp="" cmdl=""
  if command -v nvidia-smi >/dev/null; then
    smi=$(timeout --foreground 20 nvidia-smi --query-gpu=driver_version,name,uuid,compute_mode,mig.mode.current,memory.total --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')
    cudav=$(timeout --foreground 20 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -1)
  else
    smi="nvidia-smi not found"
  fi
  nvccv=$(command -v nvcc >/dev/null && nvcc --version 2>/dev/null | grep -i release | head -1)
  virt=$(command -v systemd-detect-virt >/dev/null && systemd-detect-virt 2>/dev/null)
  dm=$(timeout --foreground 5 dmesg 2>/dev/null | head -3 | tr '\n' ' ' | cut -c1-300)
  product=$(cat /sys/class/dmi/id/product_name 2>/dev/null)
  hyp=$(grep -qw hypervisor /proc/cpuinfo 2>/dev/null && echo yes || echo no)
  cmdl=$(cut -c1-300 /proc/cmdline 2>/dev/null)
  local runtime=unknown
  case "$dm $(cat /proc/version 2>/dev/null)" in
    *gVisor*|*gvisor*) runtime=gvisor ;;
    *) case "$cmdl $dm" in *firecracker*|*virtio_mmio*) runtime=firecracker ;; *) [ -n "$virt" ] && runtime=$virt ;; esac ;;
  esac
  if [ -d /dev/nvidia-caps-imex-channels ]; then
    imex=$(ls /dev/nvidia-caps-imex-channels 2>/dev/null | tr '\n' ' ')
    imex=${imex:-"(directory, no channel)"}
  else
    imex=absent
  fi
  ldc=$(ldconfig -p 2>/dev/null | grep 'libcuda\.so' | head -3 | tr '\n' ';')
  # pidfd_open + pidfd_getfd on this very process (syscalls 434, 438).
  local pidfd
  pidfd=$(python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pfd = libc.syscall(434, os.getpid(), 0)
fd = libc.syscall(438, pfd, 0, 0) if pfd >= 0 else -1
print("ok" if fd >= 0 else "refused: " + os.strerror(ctypes.get_errno()))' 2>&1)
  [ "$pidfd" = ok ] || GPU_PROOF_NO_POSIX_FD="pidfd_getfd $pidfd"
  timeout --foreground 30 "$OWNER_BIN" env >"$W/owner-env.json" 2>"$W/owner-env.err"
  local erc=$?
  cat "$W/owner-env.json" "$W/owner-env.err"
  T environment "$GPU_PROOF_ENVFILE" "$W/owner-env.json" \
    "kernel=$(uname -srm)" "proc_version=$(cut -c1-200 /proc/version 2>/dev/null)" "runtime=$runtime" \
    "systemd_detect_virt=$virt" "dmesg_head=$dm" "dmi_product=$product" "cpu_hypervisor=$hyp" \
    "nvidia_smi=$smi" "nvidia_smi_cuda=$cudav" "nvcc=$nvccv" "imex_channels=$imex" \
    "ldconfig_libcuda=$ldc" "libcuda_found=$LIBCUDA_FOUND" "cuda_visible_devices=${CUDA_VISIBLE_DEVICES-<unset>}" "pidfd_getfd=$pidfd" \
    "ptrace_scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)" "uid=$(id -u)" "size_mib=$SIZE_MIB"
  [ $erc = 0 ] || { fail "gpu-proof-owner env exited $erc: $(head -c 300 "$W/owner-env.err")"; return; }
  local sum
  sum=$(T get "$GPU_PROOF_ENVFILE" '"driver %s (%s), libcuda %s; %s; runtime %s, kernel %s; compute modes %s; fabric attribute %s; IMEX channels: %s; pidfd_getfd %s; %s" % (d["owner_view"].get("driver_version"), d["driver"], d["owner_view"].get("libcuda_realpath") or d["owner_view"].get("libcuda"), d["nvidia_smi_cuda"] or "CUDA version not shown", d["runtime"], d["kernel"], [x["compute_mode"] for x in d["owner_view"].get("devices", [])], [x["fabric"] for x in d["owner_view"].get("devices", [])], d["imex_channels"], d["pidfd_getfd"], d["nvcc"] or "no nvcc")')
  if [ "$(T get "$W/owner-env.json" 'len(d.get("devices", []))')" -ge 1 ] 2>/dev/null; then
    pass "$sum"
  else
    fail "no device visible: $sum"
  fi
}

# start_owner: a fresh owner (gpu-proof-owner serve) and its profile; 1
# (with the reason in FAILED_WHY) when it does not come up.
start_owner() {
  mkdir -p "$W/owner"
  rm -f "$W/owner/owner.json"
  "$OWNER_BIN" serve "$W/owner" "$SIZE_MIB" >"$W/owner.out" 2>"$W/owner.err" &
  OWNER_PID=$!
  if ! waitfile "$W/owner/owner.json" "$OWNER_PID" 120; then
    cat "$W/owner.err"
    FAILED_WHY="the owner did not start: $(tail -c 300 "$W/owner.err")"
    OWNER_PID=""
    return 1
  fi
  cat "$W/owner/owner.json"
  T profile "$W/owner/owner.json" "$W/profile.json" || { FAILED_WHY="could not write the profile"; return 1; }
}

s_owner() {
  [ -n "$OWNER_BIN" ] || { skip "no owner binary (see step binaries)"; return; }
  # Device memory before any owner or kvcr ran: the hold's release is
  # compared with it (step hold).
  M_BASE=$(meminfo before-owner)
  start_owner || { fail "$FAILED_WHY"; return; }
  pass "$(T get "$W/owner/owner.json" '"pid %d on %s: cuda_ipc %d B, posix_fd %d B (fds %d, %d), for the hold posix_fd %d B (fd %d), fabric: %s" % (d["pid"], d["gpu_uuid"], d["ipc"]["size"], d["vmm"]["size"], d["vmm"]["fd"], d["vmm"]["fd2"], d["hold"]["size"], d["hold"]["fd"], "%d B" % d["fabric"]["size"] if d.get("fabric") else "none (" + d.get("fabric_error", "") + ")")')"
}

s_audit() {
  need_owner || return
  inv base base || { fail "could not write or seal the inventory"; return; }
  kv audit audit --live "$INV" --profile "$W/profile.json" --format json
  [ "$RC" = 0 ] || { fail "kvcr audit --live exited $RC: $(head -c 300 "$W/audit.err")"; return; }
  kv dry import --dry-run "$INV" --profile "$W/profile.json" --format json
  [ "$RC" = 0 ] && [ "$(jget dry 'd.get("result")')" = planned ] \
    || { fail "import --dry-run exited $RC: $(outcome dry)"; return; }
  pass "audit --live accepts the group; dry run planned $(jget dry '[i["kind"] for r in d.get("ranks", []) for i in r.get("items", [])]')"
}

trial() { # NAME ARGS...
  need_owner || return 1
  inv base base || { fail "could not write the inventory"; return 1; }
  imp "$@"
  if [ "$RC" = 0 ] && [ "$(jget "$1" 'd.get("result")')" = imported ] \
     && [ "$(jget "$1" 'd.get("backend")')" = cuda ] && [ "$(jget "$1" 'len(d.get("remaining") or [])')" = 0 ]; then
    return 0
  fi
  fail "expected exit 0, imported, backend cuda, nothing remaining; got exit $RC: $(outcome "$1")"
  return 1
}
s_trial_read_only() { trial trial-ro && pass "read-only VMM mappings: $(outcome trial-ro)"; }
s_trial_read_write() { trial trial-rw --map-read-write && pass "--map-read-write: $(outcome trial-rw)"; }

s_injected_failures() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  local spec seen=""
  # KVCR_IMPORT_BACKEND=cuda:... fails a step in front of the real driver:
  # the rollback then releases real resources in reverse.
  for spec in cuda:fail=import@2 cuda:fail=map@1 cuda:fail=verify@1; do
    KVCR_IMPORT_BACKEND=$spec imp "inj-${spec##*=}"
    if [ "$RC" != 3 ] || [ "$(jget "inj-${spec##*=}" 'len(d.get("remaining") or [])')" != 0 ]; then
      fail "$spec: expected exit 3 with nothing remaining, got exit $RC: $(outcome "inj-${spec##*=}")"
      return
    fi
    seen="$seen $spec: exit 3, released $(jget "inj-${spec##*=}" 'd.get("released")');"
  done
  KVCR_IMPORT_BACKEND=cuda:fail=verify@1,fail-release=1 imp inj-release
  if [ "$RC" = 4 ] && [ "$(jget inj-release 'len(d.get("remaining") or [])')" -ge 1 ]; then
    pass "$seen a refused release: exit 4, remaining $(jget inj-release '[r["resource"]["kind"] for r in d["remaining"]]')"
  else
    fail "$seen a refused release: expected exit 4 listing what remains, got exit $RC: $(outcome inj-release)"
  fi
}

s_content_good() {
  need_owner || return
  [ -n "${CONTENT:-}" ] || { skip "this kvcr has no content member (kvcr schema descriptor does not mention content)"; return; }
  inv content-good base good || { fail "could not write the inventory"; return; }
  imp content-good
  if [ "$RC" = 0 ] && [ "$(jget content-good 'd.get("result")')" = imported ]; then
    pass "sampled pages match the owner's bytes: $(outcome content-good)"
  else
    fail "expected exit 0 with the content verified, got exit $RC: $(outcome content-good)"
  fi
}
s_content_bad() {
  need_owner || return
  [ -n "${CONTENT:-}" ] || { skip "this kvcr has no content member (kvcr schema descriptor does not mention content)"; return; }
  inv content-bad base bad || { fail "could not write the inventory"; return; }
  imp content-bad
  if [ "$RC" = 3 ] && [ "$(jget content-bad '(d.get("failure") or {}).get("step")')" = verify-content ] \
     && [ "$(jget content-bad 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "a wrong sha256: exit 3, $(outcome content-bad)"
  else
    fail "a wrong sha256: expected exit 3 at verify-content with nothing remaining, got exit $RC: $(outcome content-bad)"
  fi
}

s_vmm_offset() {
  need_posix || return
  inv vmm-offset vmm-offset ${CONTENT:+good} || { fail "could not write the inventory"; return; }
  imp vmm-offset
  if [ "$RC" = 0 ] && [ "$(jget vmm-offset 'd.get("result")')" = imported ]; then
    pass "posix_fd at offset_bytes $(jget vmm-offset '[i.get("offset_bytes") for r in d.get("ranks", []) for i in r.get("items", [])]')${CONTENT:+ with its content verified}: $(outcome vmm-offset)"
  else
    fail "expected exit 0, got exit $RC: $(outcome vmm-offset)"
  fi
}

s_vmm_size_too_large() { need_posix || return; expect_fail vmm-size vmm-size map "VMM size_bytes 2 MiB beyond the allocation"; }
s_ipc_beyond_range() { expect_fail ipc-range ipc-range verify "IPC offset_bytes + size_bytes beyond the allocation"; }
# What the driver answers to 24 flipped IPC handle bytes is the driver's
# business; the step fails only on what says something about kvcr: no
# report, a crash, another exit status than 0 or 3, or anything left held.
s_ipc_corrupt_handle() {
  need_owner || return
  inv ipc-corrupt ipc-corrupt || { fail "could not write the ipc-corrupt variant"; return; }
  imp ipc-corrupt
  local said rem
  said=$(jget ipc-corrupt '"%s: %s" % ((d.get("failure") or {}).get("driver"), ((d.get("failure") or {}).get("message") or "")[:200])')
  rem=$(jget ipc-corrupt 'len(d.get("remaining") or [])')
  if [ "$(jget ipc-corrupt 'd.get("schema")')" != kvcr.import-report/v1 ]; then
    fail "IPC handle with 24 bytes flipped: no import report (exit $RC): $(head -c 300 "$W/ipc-corrupt.err")"
  elif [ "$RC" = 3 ] && [ "$rem" = 0 ]; then
    pass "IPC handle with 24 bytes flipped: the driver refused it, exit 3 at step $(jget ipc-corrupt '(d.get("failure") or {}).get("step")'), nothing remaining; the driver said $said"
  elif [ "$RC" = 0 ] && [ "$rem" = 0 ]; then
    pass "IPC handle with 24 bytes flipped: the driver opened it (what it maps is the driver's answer, not kvcr's), exit 0, everything released: $(outcome ipc-corrupt)"
  else
    fail "IPC handle with 24 bytes flipped: exit $RC with $rem remaining: $(outcome ipc-corrupt)"
  fi
}
s_fd_closed() { need_posix || return; expect_fail fd-closed fd-closed import "an fd number the owner closed"; }
s_plain_memfd() { need_posix || return; expect_fail plain-memfd plain-memfd import "a plain memfd (no GPU memory) as posix_fd"; }

s_read_only_refuses_writes() {
  need_posix || return
  local o=$W/owner/owner.json
  timeout --foreground 60 "$OWNER_BIN" probe "$OWNER_PID" "$(T get "$o" 'd["vmm"]["fd"]')" "$(T get "$o" 'd["vmm"]["size"]')" \
    "$(T get "$o" 'd["vmm"]["seed"]')" write >"$W/probe.json" 2>"$W/probe.err"
  local prc=$?
  cat "$W/probe.json" "$W/probe.err"
  rm -f "$W/owner/check.json"
  kill -USR2 "$OWNER_PID"
  waitfile "$W/owner/check.json" "$OWNER_PID" 30 || { fail "the owner wrote no check.json"; return; }
  cat "$W/owner/check.json"
  [ $prc = 0 ] || { fail "the throwaway importer failed: $(head -c 300 "$W/probe.json")"; return; }
  local access write same
  access=$(T get "$W/probe.json" 'd["access_flags"] if d["cuMemGetAccess"] else "no cuMemGetAccess in this libcuda"')
  write=$(T get "$W/probe.json" 'd["write_rc"]')
  same=$(T get "$W/owner/check.json" 'd.get("vmm")')
  local det
  det="cuMemGetAccess: $access; write through the read-only mapping: status $write ($(T get "$W/probe.json" 'd["write_name"]')), then cuCtxSynchronize $(T get "$W/probe.json" 'd["sync_rc"]'); the owner's bytes: $same"
  if [ "$write" != 0 ] && [ "$same" = same ] && [ "$access" != 3 ] && [ "$(T get "$W/probe.json" 'd["read"]')" = same ]; then
    if [ "$access" = 1 ]; then pass "$det"; else pass "$det (access flags not read back)"; fi
  else
    fail "$det"
  fi
}

# twice_facts: the driver's own answers (gpu-proof-owner twice), once.
twice_facts() {
  if [ ! -s "$W/twice.json" ]; then
    local o=$W/owner/owner.json
    timeout --foreground 60 "$OWNER_BIN" twice "$(T get "$o" 'd["ipc"]["hex"]')" "$OWNER_PID" "$(T get "$o" 'd["vmm"]["fd"]')" \
      "$(T get "$o" 'd["vmm"]["fd2"]')" >"$W/twice.json" 2>"$W/twice.err"
    cat "$W/twice.json" "$W/twice.err" >&2
  fi
  T get "$W/twice.json" "$1" 2>/dev/null || echo "driver facts unreadable: $(head -c 200 "$W/twice.err")"
}

s_same_ipc_handle_twice() {
  need_owner || return
  local facts
  facts=$(twice_facts '"driver: second cuIpcOpenMemHandle %d, same pointer %s, close %d, a read after one close %d, second close %d, third close %d" % tuple(d["ipc"][k] for k in ("open2", "same_pointer", "close1", "read_after_one_close", "close2", "close3"))')
  inv ipc-twice ipc-twice || { fail "could not write the inventory"; return; }
  imp ipc-twice
  # Issue #20 item 3: disjoint ranges of one exported segment import, sharing
  # one reference-counted open; exit 4 here is the old set-based backend.
  if [ "$RC" = 0 ] && [ "$(jget ipc-twice 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "one IPC handle at two disjoint ranges: imported and released ($(outcome ipc-twice)); $facts"
  else
    fail "one IPC handle at two disjoint ranges: expected exit 0 with nothing remaining, got exit $RC: $(outcome ipc-twice); $facts"
  fi
}

s_one_allocation_two_fds() {
  need_posix || return
  local facts same_h same_b
  facts=$(twice_facts '"driver: imports %d and %d, handles %s and %s (same %s), fd types %s and %s, kcmp %d, BUFFER_ID %s (status %s, same %s), MEMORY_BLOCK_ID %s (status %s, same %s)" % tuple(d["posix_fd"][k] for k in ("import1", "import2", "handle1", "handle2", "same_handle", "fd_type1", "fd_type2", "kcmp", "buffer_id", "buffer_id_rc", "same_buffer_id", "memory_block_id", "memory_block_id_rc", "same_memory_block_id"))')
  same_h=$(twice_facts 'd["posix_fd"]["same_handle"]')
  same_b=$(twice_facts 'd["posix_fd"]["same_memory_block_id"]')
  inv two-fds two-fds || { fail "could not write the inventory"; return; }
  imp two-fds
  local step rem blind
  step=$(jget two-fds '(d.get("failure") or {}).get("step")')
  rem=$(jget two-fds 'len(d.get("remaining") or [])')
  # Whether the report says no item's block id was compared.
  blind=$(jget two-fds 'all(not c["compared"] for r in d.get("ranks", []) for i in r.get("items", []) for c in i.get("distinct", []) if c["identity"] == "memory-block-id")')
  if [ "$RC" = 3 ] && [ "$rem" = 0 ] && { [ "$step" = verify-distinct ] || [ "$step" = verify-distinct-mapped ]; }; then
    pass "two posix_fd exports of one allocation: refused as the same memory twice at $step ($(outcome two-fds)); $facts"
  elif [ "$RC" = 0 ] && [ "$rem" = 0 ] && [ "$blind" = True ] && [ "$same_h" = False ] && [ "$same_b" = False ]; then
    pass "two posix_fd exports of one allocation: this driver gives no identity that shows it (new handles, no MEMORY_BLOCK_ID), so kvcr imported them and its report says memory-block-id not available; $facts"
  else
    fail "two posix_fd exports of one allocation: expected exit 3 at verify-distinct or verify-distinct-mapped (or, on a driver that gives no identity, an import whose report says so), got exit $RC: $(outcome two-fds); $facts"
  fi
}

# control-pair: two distinct allocations, exported and imported together as
# kvcr does, with the driver's MEMORY_BLOCK_ID of each (gpu-proof-owner
# pair); a kvcr import of the two must exit 0. Where the driver gives one
# id to both, kvcr cannot tell them from one memory twice on one device.
s_control_pair() {
  need_posix || return
  local o=$W/owner/owner.json facts distinct
  timeout --foreground 60 "$OWNER_BIN" pair "$OWNER_PID" "$(T get "$o" 'd["vmm"]["fd"]')" \
    "$(T get "$o" 'd["hold"]["fd"]')" >"$W/pair.json" 2>"$W/pair.err"
  cat "$W/pair.json" "$W/pair.err" >&2
  facts=$(T get "$W/pair.json" '"driver: imports %d and %d, handles %s and %s, MEMORY_BLOCK_ID %s and %s (status %d and %d), distinct %s" % (d["import"][0], d["import"][1], d["handles"][0], d["handles"][1], d["memory_block_id"][0], d["memory_block_id"][1], d["memory_block_id_rc"][0], d["memory_block_id_rc"][1], d["distinct_ids"])' 2>/dev/null \
    || echo "driver facts unreadable: $(head -c 200 "$W/pair.json" "$W/pair.err")")
  distinct=$(T get "$W/pair.json" 'd["distinct_ids"]' 2>/dev/null)
  inv control control || { fail "could not write the inventory"; return; }
  imp control
  local ev
  ev=$(jget control '[c["evidence"] for r in d.get("ranks", []) for i in r.get("items", []) for c in i.get("distinct", []) if c["identity"] == "memory-block-id"]')
  if [ "$RC" = 0 ] && [ "$(jget control 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "two distinct allocations imported together: exit 0 ($(outcome control)), memory-block-id evidence $ev; $facts"
  else
    fail "two distinct allocations imported together: expected exit 0, got exit $RC: $(outcome control); $facts (ids distinct: $distinct)"
  fi
}

s_visible_devices_uuid() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  local u
  u=$(T get "$W/owner/owner.json" 'd["gpu_uuid"]')
  CUDA_VISIBLE_DEVICES=$u imp cvd-uuid
  if [ "$RC" = 0 ] && [ "$(jget cvd-uuid 'd.get("result")')" = imported ]; then
    pass "CUDA_VISIBLE_DEVICES=$u: $(outcome cvd-uuid)"
  else
    fail "CUDA_VISIBLE_DEVICES=$u: expected exit 0, got exit $RC: $(outcome cvd-uuid)"
  fi
}

s_visible_devices_empty() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  CUDA_VISIBLE_DEVICES='' imp cvd-empty
  local why
  why=$(jget cvd-empty '(d.get("audit") or {}).get("cause")')
  if [ "$RC" = 1 ] && [ "$(jget cvd-empty 'd.get("result")')" = rejected ]; then
    pass "CUDA_VISIBLE_DEVICES empty: exit 1, rejected before any import ($why)"
  else
    fail "CUDA_VISIBLE_DEVICES empty: expected exit 1 (the GPU is not visible), got exit $RC: $(outcome cvd-empty) $why"
  fi
}

s_toolkit_stub() {
  need_owner || return
  local stub=${GPU_PROOF_CUDA_STUB:-} c
  if [ -z "$stub" ]; then
    for c in ${CUDA_HOME:+"$CUDA_HOME/lib64/stubs/libcuda.so"} /usr/local/cuda/lib64/stubs/libcuda.so \
             /usr/local/cuda/targets/*/lib/stubs/libcuda.so /usr/local/cuda-*/lib64/stubs/libcuda.so \
             $(command -v nvcc >/dev/null && echo "$(dirname "$(command -v nvcc)")/../lib64/stubs/libcuda.so"); do
      [ -f "$c" ] && { stub=$c; break; }
    done
  fi
  [ -n "$stub" ] && [ -f "$stub" ] || { skip "no toolkit stub libcuda.so found (GPU_PROOF_CUDA_STUB, \$CUDA_HOME, /usr/local/cuda*, next to nvcc)"; return; }
  # The stub directory has libcuda.so only, and kvcr loads libcuda.so.1
  # first: put the stub under both names in front of the real driver.
  mkdir -p "$W/stub"
  ln -sf "$stub" "$W/stub/libcuda.so.1"
  ln -sf "$stub" "$W/stub/libcuda.so"
  inv base base || { fail "could not write the inventory"; return; }
  LD_LIBRARY_PATH=$W/stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} imp stub
  if [ "$RC" = 2 ] && grep -qi stub "$W/stub.err" "$W/stub.json"; then
    pass "$stub: exit 2, $(grep -hi stub "$W/stub.err" "$W/stub.json" | head -1 | cut -c1-200)"
  else
    fail "$stub: expected exit 2 naming the stub, got exit $RC: $(head -c 300 "$W/stub.err")"
  fi
}

s_sigint() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  # Slow steps (delay-ms) so that the signal lands mid-import; it is sent
  # only once kvcr has SIGINT caught, so it can never kill kvcr outright.
  KVCR_IMPORT_BACKEND=cuda:delay-ms=300 bg sigint import "$INV" --profile "$W/profile.json" --format json
  local p=$BG
  if ! sigcgt "$p" 2; then
    kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null
    fail "kvcr never had SIGINT caught (SigCgt)"
    return
  fi
  sleep 1
  kill -INT "$p"
  RC=0; wait "$p" || RC=$?
  cat "$W/sigint.json" "$W/sigint.err"
  if [ "$RC" = 130 ] && [ "$(jget sigint 'd.get("result")')" = interrupted ] \
     && [ "$(jget sigint 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "SIGINT once caught$SIGNOTE: exit 130, $(outcome sigint)"
  else
    fail "SIGINT: expected exit 130, interrupted, nothing remaining; got exit $RC: $(outcome sigint)"
  fi
}

s_hold_refuses_ipc() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  local ready=$W/ready-ipc.json
  rm -f "$ready"
  imp hold-ipc --hold --ready-file "$ready"
  if [ "$RC" = 2 ] && grep -q 'cannot keep cuda_ipc memory' "$W/hold-ipc.err" && [ ! -e "$ready" ]; then
    pass "a hold of a cuda_ipc allocation: exit 2 before any GPU call: $(grep -o 'cannot keep cuda_ipc memory[^:]*' "$W/hold-ipc.err" | head -1)"
  else
    fail "a hold of a cuda_ipc allocation: expected exit 2 naming cuda_ipc, got exit $RC: $(head -c 300 "$W/hold-ipc.err")"
  fi
}

# meminfo NAME: device 0's used bytes as the driver counts them
# (gpu-proof-owner meminfo, a fresh process each time); empty when unknown.
meminfo() {
  timeout --foreground 30 "$OWNER_BIN" meminfo >"$W/mem-$1.json" 2>>"$W/mem.err"
  cat "$W/mem-$1.json" >&2
  T get "$W/mem-$1.json" 'd["used"]' 2>/dev/null | grep -E '^[0-9]+$' || true
}

s_hold() {
  need_owner || return
  local o=$W/owner/owner.json
  if [ -n "$GPU_PROOF_NO_POSIX_FD" ] && [ "$(T get "$o" "bool(d.get('fabric'))")" != True ]; then
    skip "nothing a hold keeps here: posix_fd cannot be taken ($GPU_PROOF_NO_POSIX_FD) and there is no fabric allocation"
    return
  fi
  inv hold hold || { fail "could not write the inventory"; return; }
  local ready=$W/ready.json det held m0 m1 m2 sock=""
  held=$(T get "$INV/rank-0.json" 'sum(a["size_bytes"] for a in d["allocations"])')
  # Device memory before the hold (the owner up, no kvcr).
  m0=$(meminfo before-hold)
  rm -f "$ready"
  bg hold import "$INV" --profile "$W/profile.json" --format json --hold --ready-file "$ready"
  HOLD_PID=$BG
  if ! waitfile "$ready" "$HOLD_PID" 60; then
    cat "$W/hold.err"
    fail "no ready file: $(head -c 300 "$W/hold.err")"
    kill -TERM "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null; HOLD_PID=""
    return
  fi
  cat "$ready"
  [ "$(T get "$ready" 'd.get("schema")')" = kvcr.import-ready/v1 ] && [ "$(T get "$ready" 'd.get("pid")')" = "$HOLD_PID" ] \
    || fail "the ready file does not name kvcr.import-ready/v1 and pid $HOLD_PID"
  det="holding $held bytes ($(T get "$ready" '[i["handle"]["kind"] + " from " + i["obtain"]["from"] for r in d["ranks"] for i in r["items"]]')); kvcr loaded $(grep -o '/[^ ]*libcuda[^ ]*' "/proc/$HOLD_PID/maps" 2>/dev/null | sort -u | tr '\n' ' ')"
  if command -v nvidia-smi >/dev/null && timeout --foreground 20 nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -qw "$HOLD_PID"; then
    det="$det; nvidia-smi lists it"
  else
    det="$det; nvidia-smi does not list it"
  fi
  # The owner is killed (SIGKILL: no chance to release or close anything
  # itself); only kvcr's references remain.
  kill -KILL "$OWNER_PID" 2>/dev/null
  wait "$OWNER_PID" 2>/dev/null
  if kill -0 "$OWNER_PID" 2>/dev/null; then
    fail "the owner survived SIGKILL"
  else
    det="$det; the owner was killed (SIGKILL) while kvcr held"
  fi
  OWNER_PID=""
  m1=$(meminfo held)
  # A new engine obtains each allocation from what the ready file names.
  if [ -z "$GPU_PROOF_NO_POSIX_FD" ]; then
    sock=$(T get "$ready" 'd.get("hand_over") or ""')
    timeout --foreground 60 "$OWNER_BIN" take "$sock" "$(T get "$o" 'd["hold"]["seed"]')" >"$W/take.json" 2>"$W/take.err"
    cat "$W/take.json" "$W/take.err"
    if [ "$(T get "$W/take.json" 'd.get("received", 0) >= 1 and all(i["read"] == "same" for i in d["items"])')" = True ]; then
      det="$det; an engine read the owner's bytes through the hand-over socket ($(T get "$W/take.json" '[i["fd_type"] for i in d["items"]]'))"
    else
      fail "the posix_fd allocation through the hand-over socket: $(head -c 300 "$W/take.json")"
    fi
  fi
  if [ "$(T get "$o" "bool(d.get('fabric'))")" = True ]; then
    timeout --foreground 60 "$OWNER_BIN" read fabric "$(T get "$o" "d['fabric']['hex']")" "$(T get "$o" "d['fabric']['size']")" \
      "$(T get "$o" "d['fabric']['seed']")" >"$W/read-fabric.json" 2>"$W/read-fabric.err"
    cat "$W/read-fabric.json" "$W/read-fabric.err"
    if [ "$(T get "$W/read-fabric.json" 'd.get("read") or d.get("error")')" = same ]; then
      det="$det; an engine read the fabric allocation by its handle"
    else
      fail "fabric through its handle while held: $(head -c 300 "$W/read-fabric.json")"
    fi
  fi
  if ! kill -0 "$HOLD_PID" 2>/dev/null; then
    fail "the hold ended by itself: $(head -c 300 "$W/hold.err")"
  elif ! sigcgt "$HOLD_PID" 15; then
    fail "the hold does not catch SIGTERM"
  fi
  kill -TERM "$HOLD_PID" 2>/dev/null
  RC=0; wait "$HOLD_PID" || RC=$?
  HOLD_PID=""
  cat "$W/hold.json" "$W/hold.err"
  m2=$(meminfo released)
  # With the owner killed and kvcr gone, nothing of theirs may remain: the
  # release is compared with the reading before the owner started (M_BASE,
  # no owner's or kvcr's context in it), never with a reading kvcr's own
  # context is part of.
  local mem
  if [ -n "$M_BASE" ] && [ -n "$m0" ] && [ -n "$m1" ] && [ -n "$m2" ]; then
    mem="device memory used: $M_BASE bytes before the owner started, $m0 before the hold, $m1 with the owner killed (kvcr holding), $m2 after the release"
    if [ $(( (m1 - M_BASE) * 10 )) -lt $(( held * 9 )) ]; then
      fail "$det; $mem: with the owner killed only $((m1 - M_BASE)) bytes are in use beyond the start, less than the $held kvcr holds"
    elif [ $(( (m2 - M_BASE) * 10 )) -gt "$held" ]; then
      fail "$det; $mem: after the release $((m2 - M_BASE)) bytes more are in use than before the owner started: the $held held did not come back"
    fi
  else
    mem="device memory not measured (cuMemGetInfo: $(head -c 200 "$W/mem.err" 2>/dev/null))"
    fail "$det; $mem"
  fi
  # A fresh owner for the steps after this one.
  start_owner || fail "$det; the owner could not be started again: $FAILED_WHY"
  if [ "$RC" = 0 ] && [ ! -e "$ready" ] && { [ -z "$sock" ] || [ ! -e "$sock" ]; } \
     && [ "$(jget hold 'd.get("result")')" = imported ] && [ "$(jget hold 'len(d.get("remaining") or [])')" = 0 ]; then
    pass "$det; $mem; SIGTERM$SIGNOTE: exit 0, ready file and socket removed, $(outcome hold)"
  else
    fail "$det; $mem; SIGTERM: expected exit 0, ready file and socket removed, nothing remaining; got exit $RC, ready file $([ -e "$ready" ] && echo present || echo removed): $(outcome hold)"
  fi
}

s_owner_gone() {
  need_owner || return
  inv base base || { fail "could not write the inventory"; return; }
  kill -TERM "$OWNER_PID"; wait "$OWNER_PID" 2>/dev/null; OWNER_PID=""
  imp owner-gone
  if [ "$RC" = 1 ] && grep -q KV108 "$W/owner-gone.json"; then
    pass "owner gone: exit 1 (KV108), nothing imported"
  else
    fail "owner gone: expected exit 1 with KV108, got exit $RC: $(outcome owner-gone)"
  fi
}

# read-only-refuses-writes faults the GPU on purpose: it runs last before
# owner-gone, so that nothing after it depends on a context it broke.
for s in binaries environment owner audit trial-read-only trial-read-write injected-failures content-good content-bad \
         vmm-offset vmm-size-too-large ipc-beyond-range ipc-corrupt-handle fd-closed plain-memfd \
         same-ipc-handle-twice one-allocation-two-fds control-pair visible-devices-uuid visible-devices-empty \
         toolkit-stub sigint hold-refuses-ipc hold read-only-refuses-writes owner-gone; do
  step "$s"
done
T get "$SUMMARY" '"%d passed, %d failed, %d skipped" % tuple(sum(1 for s in d["steps"] if s["status"] == k) for k in ("passed", "failed", "skipped"))'
if T get "$SUMMARY" 'any(s["status"] == "failed" for s in d["steps"])' | grep -q True; then exit 1; fi
exit 0
