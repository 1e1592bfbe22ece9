#!/usr/bin/env bash
# Installs the .deb built by `cargo deb` into a scratch root with
# `dpkg --root` (nothing on this system changes) and checks that the
# installed kvcr, its man pages, completions and systemd units work.
# Usage: scripts/deb-check.sh [target/debian/kvcr-audit_*.deb]
set -euo pipefail
cd "$(dirname "$0")/.."
deb=${1:-$(ls -t target/debian/kvcr-audit_*.deb | head -1)}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "deb-check: $*" >&2; exit 1; }

echo "deb-check: $deb"
dpkg-deb -c "$deb" > "$root.list"
for f in ./usr/bin/kvcr ./usr/share/man/man1/kvcr.1.gz ./usr/share/man/man1/kvcr-audit.1.gz \
         ./usr/share/man/man1/kvcr-seal.1.gz \
         ./usr/share/bash-completion/completions/kvcr ./usr/share/zsh/vendor-completions/_kvcr \
         ./usr/share/fish/vendor_completions.d/kvcr.fish \
         ./usr/lib/systemd/system/kvcr-audit-textfile.service \
         ./usr/lib/systemd/system/kvcr-audit-textfile.timer ./etc/default/kvcr \
         ./usr/share/kvcr/prometheus/kvcr-alerts.yml \
         ./usr/lib/systemd/system/kvcr-hold.service ./usr/lib/tmpfiles.d/kvcr.conf \
         ./usr/share/doc/kvcr-audit/format.md ./usr/share/doc/kvcr-audit/copyright; do
  grep -q " $f\$" "$root.list" || fail "$f is not in the package"
done
rm -f "$root.list"
dpkg-deb -I "$deb" postinst | grep -q 'systemd-tmpfiles' || fail "the package has no postinst running systemd-tmpfiles"

# A scratch dpkg database: a real `dpkg -i`, confined to $root. libc6 is not
# in that database, hence --force-depends. The postinst runs too, outside a
# chroot (the scratch root has no shell) with DPKG_ROOT=$root: it creates
# what tmpfiles.d/kvcr.conf declares there, as on a real node.
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
touch "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends --force-not-root --force-script-chrootless --log=/dev/null \
  --path-include="*" -i "$deb" >/dev/null 2>&1 \
  || fail "dpkg -i --root failed"
dpkg --root="$root" -s kvcr-audit | grep -q '^Status: install ok installed' || fail "not installed"
dpkg --root="$root" -s kvcr-audit | grep -q '^Conffiles:' || fail "/etc/default/kvcr is not a conffile"

kvcr="$root/usr/bin/kvcr"
"$kvcr" --version
[ "$("$kvcr" -V)" = "kvcr $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)" ] || fail "kvcr -V"
"$kvcr" audit fixtures/accept-tp4/inventory >/dev/null || fail "audit of an accepted fixture did not exit 0"
set +e
"$kvcr" audit -q fixtures/kv104-geometry/inventory; st=$?
set -e
[ "$st" = 1 ] || fail "audit of a rejected fixture exited $st, not 1"
echo "deb-check: installed kvcr audits (accepted fixture: exit 0; rejected fixture: exit 1)"

page=$(MANPATH="$root/usr/share/man" man -w kvcr) || fail "man -w kvcr"
case "$page" in "$root"/*) ;; *) fail "man -w kvcr found $page, not the installed page" ;; esac
MANPATH="$root/usr/share/man" man -w kvcr-audit >/dev/null || fail "man -w kvcr-audit"
MANPATH="$root/usr/share/man" MANWIDTH=80 man kvcr-seal 2>/dev/null | grep -q 'kvcr-seal' || fail "man kvcr-seal"
echo "deb-check: man -w kvcr -> $page"

bash -c "source '$root/usr/share/bash-completion/completions/kvcr' && complete -p kvcr" >/dev/null \
  || fail "bash completion does not load"

# The service's own command line, with the EnvironmentFile's variables.
units="$root/units"
mkdir -p "$units"
for u in kvcr-audit-textfile.service kvcr-audit-textfile.timer kvcr-hold.service; do
  sed "s#/usr/bin/kvcr#$kvcr#" "$root/usr/lib/systemd/system/$u" > "$units/$u"
done
exec_start=$(sed -n 's/^ExecStart=//p' "$units/kvcr-audit-textfile.service")
(
  set -a
  # shellcheck disable=SC1091
  . "$root/etc/default/kvcr"
  KVCR_INVENTORY=$PWD/fixtures/kv103-missing-rank/inventory
  KVCR_TEXTFILE=$root/kvcr.prom
  set +a
  set +e
  eval "$exec_start"; st=$?
  set -e
  [ "$st" = 1 ] || fail "the service's command exited $st (SuccessExitStatus=1 expects 0 or 1)"
)
grep -q '^kvcr_group_accepted{engine_id="llama3-70b-a"} 0$' "$root/kvcr.prom" \
  || fail "the service's command wrote no metrics"
echo "deb-check: the service's command wrote $root/kvcr.prom"

# A fresh node: the package just installed, the timer's command with the
# shipped /etc/default/kvcr unchanged (its paths moved into the scratch
# root), no producer output yet. It must exit 0 with kvcr_audit_success 1,
# or KvcrAuditFailing pages a node that merely retains nothing.
if command -v systemd-tmpfiles >/dev/null; then
  inv="$root/var/lib/kvcr/inventory"
  [ -d "$inv" ] || fail "the postinst did not create /var/lib/kvcr/inventory"
  [ "$(stat -c '%a %u' "$inv")" = "700 0" ] \
    || fail "/var/lib/kvcr/inventory is $(stat -c '%a uid %u' "$inv"), not 700 uid 0"
  [ "$(stat -c %a "$root/run/kvcr")" = 755 ] || fail "the postinst did not create /run/kvcr 0755"
  mkdir -p "$root/var/lib/prometheus/node-exporter"
  (
    set -a
    # shellcheck disable=SC1091
    . "$root/etc/default/kvcr"
    KVCR_INVENTORY=$root$KVCR_INVENTORY
    KVCR_TEXTFILE=$root$KVCR_TEXTFILE
    set +a
    set +e
    eval "$exec_start"; st=$?
    set -e
    [ "$st" = 0 ] || fail "a fresh node's timer command exited $st, not 0"
    grep -qx 'kvcr_audit_success 1' "$KVCR_TEXTFILE" || fail "a fresh node's audit did not succeed"
    grep -qx 'kvcr_audit_exit_status 0' "$KVCR_TEXTFILE" || fail "a fresh node's exit status metric"
    grep -qx 'kvcr_groups{verdict="reject"} 0' "$KVCR_TEXTFILE" || fail "a fresh node rejects a group"
  )
  echo "deb-check: a fresh node's timer command exits 0 on the package's empty inventory"
  # A producer running as its own user (uid 4242) fills the inventory: the
  # timer (root) rejects its files (KV003) until /etc/default/kvcr declares
  # it. Needs root for chown; the node is described by a facts file.
  if [ "$(id -u)" = 0 ]; then
    cp -r fixtures/accept-tp4/inventory/. "$inv/"
    chmod 600 "$inv"/*.json
    chown -R 4242:4242 "$inv"
    for declared in "" 4242; do
      (
        set -a
        # shellcheck disable=SC1091
        . "$root/etc/default/kvcr"
        KVCR_INVENTORY=$root$KVCR_INVENTORY
        KVCR_TEXTFILE=$root$KVCR_TEXTFILE
        export KVCR_PRODUCER_USER="$declared"
        export KVCR_NODE_FACTS="$PWD/fixtures/live/node-match.json"
        set +a
        set +e
        eval "$exec_start"; st=$?
        set -e
        want=$([ -n "$declared" ] && echo 0 || echo 1)
        [ "$st" = "$want" ] || fail "KVCR_PRODUCER_USER='$declared': the timer's command exited $st, not $want"
        if [ -z "$declared" ]; then
          grep -q 'code="KV003"' "$KVCR_TEXTFILE" || fail "an undeclared producer's files are not KV003"
        fi
      )
    done
    echo "deb-check: a producer's files (uid 4242) are KV003 until KVCR_PRODUCER_USER=4242 declares it"
  fi
else
  echo "deb-check: skipped the postinst and fresh-node checks (no systemd-tmpfiles)"
fi

if command -v systemd-analyze >/dev/null; then
  MANPATH="$root/usr/share/man" systemd-analyze verify "$units"/kvcr-audit-textfile.{service,timer} \
    "$units"/kvcr-hold.service || fail "systemd-analyze verify"
  echo "deb-check: systemd-analyze verify passed"
  for u in kvcr-audit-textfile.service kvcr-hold.service; do
    systemd-analyze security --offline=yes --threshold=30 "$units/$u" >/dev/null \
      || fail "$u: systemd-analyze security rates it above 3.0: $(systemd-analyze security --offline=yes "$units/$u" | tail -1)"
    echo "deb-check: $(systemd-analyze security --offline=yes "$units/$u" | tail -1)"
  done
else
  echo "deb-check: skipped systemd-analyze verify (not installed)"
fi
echo "deb-check: ok ($(stat -c %s "$kvcr") bytes installed binary, $(stat -c %s "$deb") bytes .deb)"
