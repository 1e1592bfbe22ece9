#!/usr/bin/env bash
# Builds, HERE (a machine with the Rust toolchain), what scripts/gpu-proof.sh
# needs on a GPU machine that has no Rust and no registry, into one ignored
# folder to carry there (docs/import.md, "The GPU proof"):
#   target/gpu-proof/kvcr             cargo build --release --locked --bin kvcr
#   target/gpu-proof/gpu-proof-owner  $CC (cc) from scripts/gpu-proof-owner.c
# (the proof builds the owner itself with the GPU machine's cc when this one
# is missing or does not run there). Prints the sizes, the newest glibc
# symbol version each binary needs (the GPU machine's glibc must be at least
# that), and checks that the working tree plus the folder fit the 64 MiB a
# carried tree may hold. Exit 1 when a build fails or the folder is too big.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/gpu-proof
mkdir -p "$out"
cargo build --release --locked --bin kvcr
cp target/release/kvcr "$out/kvcr.tmp" && mv "$out/kvcr.tmp" "$out/kvcr"
"${CC:-cc}" -O2 -Wall -Wextra -Werror -o "$out/gpu-proof-owner" scripts/gpu-proof-owner.c -ldl
"$out/kvcr" --version | head -1
glibc() {
  if command -v objdump >/dev/null; then
    objdump -T "$1" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1
  else
    echo "unknown (no objdump)"
  fi
}
for b in kvcr gpu-proof-owner; do
  printf '%-16s %9d bytes, needs %s\n' "$b" "$(stat -c %s "$out/$b")" "$(glibc "$out/$b")"
done
carry=$(du -cb "$out" | tail -1 | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
limit=$((64 * 1024 * 1024))
echo "carried folder $carry bytes + working tree $tree bytes = $((carry + tree)) of $limit"
if [ $((carry + tree)) -gt "$limit" ]; then
  echo "gpu-proof-build: too big to carry (64 MiB in all)" >&2
  exit 1
fi
echo "carry: $out; command: bash scripts/gpu-proof.sh (results in \$OUT); see docs/import.md"
