#!/usr/bin/env bash
# Builds the release artifacts into dist/, for a machine without Rust:
#   kvcr-audit-<version>-x86_64-linux-gnu.tar.gz  the binary kvcr (x86-64 Linux,
#                                           glibc 2.17 and later), man pages,
#                                           completions, licences, README
#   kvcr-audit_<version>-1_amd64.deb        the same binary, units, docs
#                                           (Cargo.toml [package.metadata.deb])
#   kvcr_audit-<version>-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#                                           the Python package kvcr_audit
#                                           (python/), one abi3 wheel for
#                                           CPython >= 3.9
#   SHA256SUMS                              `sha256sum -c SHA256SUMS` checks them
# The packages are named kvcr-audit: `kvcr` on PyPI is NVIDIA's KV Cache
# Runner (docs/format.md §13); the command is still kvcr.
# The release binary is built once, by cargo-zigbuild against glibc 2.17's
# symbol versions (zig supplies the old glibc stubs, so no container or old
# distribution is needed); cargo-deb packs that file as it is (--no-build,
# --no-strip). The wheel is built by maturin with --zig the same way.
# scripts/dist-check.sh checks every artifact as a user would.
#
# Needs: cargo (rustup's x86_64-unknown-linux-gnu target), python3 with venv
# and pip (PyPI), dpkg-dev (dpkg-shlibdeps, for the .deb's Depends). The
# build tools are installed, pinned, into a virtual environment
# ($KVCR_DIST_TOOLS, default target/dist-tools) and cargo-deb with
# `cargo install` when missing.
# CARGO_TARGET_DIR is honoured: the binary is read from where cargo wrote it.
# Usage: scripts/dist.sh
set -euo pipefail
cd "$(dirname "$0")/.."

triple=x86_64-unknown-linux-gnu
glibc=2.17
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="kvcr-audit-$version-x86_64-linux-gnu"
# Where cargo writes: $CARGO_TARGET_DIR (absolute, or relative to this
# directory, as cargo takes it), else target/.
target=${CARGO_TARGET_DIR:-target}
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
tools=${KVCR_DIST_TOOLS:-$target/dist-tools}
# Checked together on this toolchain (cargo 1.95): ziglang's zig is the
# linker cargo-zigbuild and maturin --zig drive.
pins="cargo-zigbuild==0.24.1 ziglang==0.17.1 maturin==1.16.0"

say() { printf 'dist: %s\n' "$*"; }
started=$SECONDS
step() { say "$1 ($((SECONDS - started)) s)"; }

if ! "$tools/bin/python" -m pip show -q cargo-zigbuild ziglang maturin >/dev/null 2>&1; then
  step "build tools into $tools: $pins"
  "${PYTHON:-python3}" -m venv "$tools"
  # shellcheck disable=SC2086
  "$tools/bin/pip" install -q --disable-pip-version-check $pins
fi
export PATH="$tools/bin:$PATH"
if ! command -v cargo-deb >/dev/null 2>&1; then
  step "cargo-deb"
  cargo install cargo-deb --locked --version 3.8.0
fi
# A reproducible build date in `kvcr --version` (build.rs): the commit's.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

rm -rf dist
mkdir dist

step "kvcr for $triple, glibc $glibc (cargo zigbuild --release)"
cargo zigbuild --locked --release --target "$triple.$glibc" --bin kvcr
bin="$target/$triple/release/kvcr"

step "tarball dist/$name.tar.gz"
stage="$target/dist-stage"
rm -rf "$stage"
mkdir -p "$stage/$name/man" "$stage/$name/completions"
install -m 755 "$bin" "$stage/$name/kvcr"
install -m 644 man/*.1 "$stage/$name/man/"
install -m 644 completions/kvcr.bash completions/_kvcr completions/kvcr.fish "$stage/$name/completions/"
install -m 644 README.md LICENSE-APACHE LICENSE-MIT "$stage/$name/"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  -C "$stage" -cf - "$name" | gzip -9n > "dist/$name.tar.gz"

step ".deb (cargo deb --no-build: the same binary)"
# With --target, cargo-deb reads the asset target/release/kvcr from
# $CARGO_TARGET_DIR/$triple/release/kvcr (it honours the variable too): the
# file just packed into the tarball.
cargo deb --locked --variant dist --no-build --no-strip --target "$triple" --output dist/

step "wheel (maturin --zig, manylinux2014, abi3)"
# python/ is its own workspace, built in its own target directory: maturin's
# settings differ from cargo-zigbuild's (cargo reports ConfigSettingsChanged),
# so in one directory each build would recompile everything the other built.
(cd python && CARGO_TARGET_DIR="$target/wheel" maturin build --release --locked --zig \
  --compatibility manylinux2014 --target "$triple" --out ../dist)

(cd dist && sha256sum -- * > SHA256SUMS)
step "done"
(cd dist && ls -l -- *)
