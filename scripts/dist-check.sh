#!/usr/bin/env bash
# Checks each artifact scripts/dist.sh put in dist/ as a user would, on this
# machine, without the build tree:
# - SHA256SUMS matches;
# - the binary needs only glibc's libraries, and no GLIBC_ symbol version
#   newer than 2.17 (the same for the wheel's extension module);
# - the tarball, unpacked in a scratch directory: `kvcr --version`, an audit
#   of an accepted and of a rejected fixture copied beside it (exit 0, 1),
#   its man pages and bash completion;
# - the .deb carries the tarball's binary byte for byte, depends on the libc6
#   that binary needs, and installs into a scratch root (scripts/deb-check.sh:
#   a fresh node's timer command exits 0);
# - the wheel is one cp39-abi3 manylinux_2_17 wheel (cp39: python/pyproject.toml's
#   requires-python), installs into a fresh venv with no Rust on the PATH
#   and passes scripts/wheel-smoke.py there.
# Usage: scripts/dist-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
fail() { echo "dist-check: $*" >&2; exit 1; }
say() { printf 'dist-check: %s\n' "$*"; }
glibc_max=2.17
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="kvcr-$version-x86_64-linux-gnu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v readelf >/dev/null || fail "readelf (binutils) is needed to read symbol versions"

(cd dist && sha256sum --quiet -c SHA256SUMS) || fail "dist/SHA256SUMS does not match"
listed=$(awk '{print $2}' dist/SHA256SUMS | sort | tr '\n' ' ')
present=$(cd dist && for f in *; do [ "$f" = SHA256SUMS ] || echo "$f"; done | sort | tr '\n' ' ')
[ "$listed" = "$present" ] || fail "SHA256SUMS lists '$listed', dist/ holds '$present'"
say "SHA256SUMS: $listed"

# The newest GLIBC_x.y a file's dynamic symbols need, and that it is <= 2.17.
newest_glibc() {
  readelf -V -W "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -1
}
version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
check_glibc() {
  local n
  n=$(newest_glibc "$1")
  [ -n "$n" ] || fail "$2: no GLIBC_ symbol version (not a dynamically linked glibc binary?)"
  version_le "$n" "$glibc_max" || fail "$2 needs GLIBC_$n, newer than $glibc_max"
  say "$2: newest symbol version GLIBC_$n (at most $glibc_max)"
}

# Tarball.
tarball="dist/$name.tar.gz"
[ -f "$tarball" ] || fail "$tarball is missing"
mkdir "$tmp/tar"
tar -xzf "$tarball" -C "$tmp/tar"
top="$tmp/tar/$name"
for f in kvcr README.md LICENSE-APACHE LICENSE-MIT man/kvcr.1 man/kvcr-audit.1 man/kvcr-import.1 \
         completions/kvcr.bash completions/_kvcr completions/kvcr.fish; do
  [ -f "$top/$f" ] || fail "$tarball has no $name/$f"
done
n_man=$(ls "$top/man" | wc -l)
[ "$n_man" = "$(ls man/*.1 | wc -l)" ] || fail "$tarball has $n_man man pages, man/ has $(ls man/*.1 | wc -l)"
bin="$top/kvcr"
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
for lib in $needed; do
  case "$lib" in
    libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-x86-64.so.2) ;;
    *) fail "the binary needs $lib, which is not part of glibc" ;;
  esac
done
say "binary needs $needed"
check_glibc "$bin" "binary"
# A user's scratch directory: the fixtures copied beside it, relative paths.
mkdir "$tmp/user"
cp -r fixtures/accept-tp4/inventory "$tmp/user/accepted"
cp -r fixtures/kv104-geometry/inventory "$tmp/user/rejected"
chmod -R go-w "$tmp/user"
(
  cd "$tmp/user"
  out=$("$bin" --version | head -1)
  [ "$out" = "kvcr $version" ] || fail "tarball's kvcr --version says '$out', not 'kvcr $version'"
  "$bin" audit accepted > audit.txt || fail "tarball's kvcr audit accepted exited $?, not 0"
  grep -q 'ACCEPTED' audit.txt || fail "tarball's kvcr audit accepted printed no ACCEPTED group"
  set +e
  "$bin" audit -q rejected; st=$?
  set -e
  [ "$st" = 1 ] || fail "tarball's kvcr audit of a rejected fixture exited $st, not 1"
  bash -c "source '$top/completions/kvcr.bash' && complete -p kvcr" >/dev/null \
    || fail "the tarball's bash completion does not load"
  if man --version >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$top/man/kvcr-audit.1" 2>/dev/null | grep -q 'kvcr-audit' \
      || fail "man -l man/kvcr-audit.1 from the tarball"
  fi
)
say "tarball: kvcr --version, audit exit 0 and 1 from a scratch directory, completion, man page"

# .deb.
deb=$(ls dist/kvcr_"$version"-*_amd64.deb)
[ "$(echo "$deb" | wc -l)" = 1 ] || fail "not one .deb in dist/: $deb"
deb_sum=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/bin/kvcr | sha256sum | cut -d' ' -f1)
tar_sum=$(sha256sum "$bin" | cut -d' ' -f1)
[ "$deb_sum" = "$tar_sum" ] || fail "the .deb's /usr/bin/kvcr ($deb_sum) is not the tarball's kvcr ($tar_sum)"
depends=$(dpkg-deb -f "$deb" Depends)
want="libc6 (>= $(newest_glibc "$bin"))"
[ "$depends" = "$want" ] || fail "$deb: Depends: $depends, but the binary needs $want"
say ".deb: the tarball's binary ($tar_sum), Depends: $depends"
bash scripts/deb-check.sh "$deb"

# Wheel.
py_min=$(sed -n 's/^requires-python = ">=\([0-9]*\)\.\([0-9]*\)".*/\1\2/p' python/pyproject.toml)
[ -n "$py_min" ] || fail "python/pyproject.toml: no requires-python = \">=X.Y\""
wheels=$(cd dist && ls -- *.whl)
[ "$(echo "$wheels" | wc -l)" = 1 ] || fail "not one wheel in dist/: $wheels"
case "$wheels" in
  "kvcr-$version-cp$py_min-abi3-"*manylinux_2_17_x86_64*.whl) ;;
  *) fail "wheel $wheels: not kvcr-$version-cp$py_min-abi3-manylinux…2_17_x86_64" ;;
esac
case "$wheels" in *manylinux2014_x86_64*) ;; *) fail "wheel $wheels has no manylinux2014 tag" ;; esac
mkdir "$tmp/whl"
"${PYTHON:-python3}" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
  "dist/$wheels" "$tmp/whl"
check_glibc "$(ls "$tmp"/whl/kvcr/_native*.so)" "wheel's kvcr_audit/_native"
# The PATH without any directory that has cargo or rustc.
clean=""
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
  [ -e "$d/cargo" ] || [ -e "$d/rustc" ] || clean="$clean${clean:+:}$d"
done
"${PYTHON:-python3}" -m venv "$tmp/venv"
(
  cd "$tmp/user"
  export PATH="$tmp/venv/bin:$clean"
  unset CARGO_HOME RUSTUP_HOME CARGO_TARGET_DIR
  if command -v cargo >/dev/null || command -v rustc >/dev/null; then fail "Rust is still on the PATH"; fi
  pip install -q --disable-pip-version-check --no-index --no-deps "$repo/dist/$wheels" \
    || fail "pip install dist/$wheels into a fresh venv"
  python "$repo/scripts/wheel-smoke.py" "$repo/fixtures" "$version" || fail "wheel smoke test"
)
say "wheel: $wheels installs into a fresh venv without Rust on the PATH and passes the smoke test"
say "ok"
