"""kvcr's wheel beside NVIDIA's KV Cache Runner (issue #35 §2).

NVIDIA's KV Cache Runner is the PyPI distribution `kvcr` (import package
`kvcr`); kvcr's Python package is the distribution `kvcr-audit` (import
package `kvcr_audit`), and the command stays `kvcr`. This installs both into
fresh virtual environments, in both orders, and checks after each install:

- `pip list` lists both distributions, at their versions;
- every file in KVCR's RECORD is still there with its recorded SHA-256 and
  size (kvcr-audit removed or changed none of them), and the same for
  kvcr-audit's own files;
- one interpreter imports both packages, each from its own directory, and
  each works (KVCR's `KVCR` class is there; kvcr_audit audits a fixture);
- neither distribution installs an executable named `kvcr`, so the command
  on the PATH is still kvcr's binary (KVCR_BIN), byte for byte the file it
  was before;
- uninstalling kvcr-audit leaves every KVCR file as recorded.

KVCR is installed with --no-deps (as the issue asks: its dependencies are
not needed to check its files). `import kvcr` then needs what its modules
import at load time: numpy, msgspec, pyzmq and the transfer library NIXL
(the `nixl` front and its `nixl-cu12` backend, 69 MB), installed with
--no-deps beside it (nixl-cu12 would pull in torch, which `import kvcr`
does not need; measured with KVCR 0.1.1).

Usage: python3 scripts/side-by-side.py WHEEL KVCR_BIN FIXTURE_INVENTORY
Needs the network to PyPI (pip) unless KVCR_SIDE_BY_SIDE_WHEELS names a
directory holding kvcr-0.1.1 and the wheels of KVCR_IMPORT_DEPS.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

KVCR_DIST = "kvcr==0.1.1"
KVCR_IMPORT_DEPS = ["numpy>=1.26,<3", "msgspec>=0.21,<1", "pyzmq>=25,<28", "nixl==1.5.0", "nixl-cu12==1.5.0"]


def fail(msg):
    print(f"side-by-side: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail(f"{' '.join(map(str, argv))}: exit {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def site_packages(venv):
    out = run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Path(out.strip())


def record_of(site, dist_prefix):
    recs = sorted(site.glob(f"{dist_prefix}.dist-info/RECORD"))
    if len(recs) != 1:
        fail(f"{site}: {len(recs)} RECORD files for {dist_prefix}, want 1")
    rows = []
    for line in recs[0].read_text().splitlines():
        # RECORD is CSV; no path in these wheels holds a comma or a quote.
        path, digest, size = line.rsplit(",", 2)
        rows.append((path, digest, size))
    return recs[0], rows


def check_record(site, dist_prefix, label):
    rec, rows = record_of(site, dist_prefix)
    checked = 0
    for path, digest, size in rows:
        f = (site / path).resolve()
        if not digest:
            # RECORD itself, and files pip writes at install (INSTALLER,
            # REQUESTED, direct_url.json) carry no hash.
            continue
        if not f.is_file():
            fail(f"{label}: {path} (listed in {rec.name}) is gone")
        if sha256_file(f) != digest:
            fail(f"{label}: {path} changed: {sha256_file(f)} != recorded {digest}")
        if size and f.stat().st_size != int(size):
            fail(f"{label}: {path} is {f.stat().st_size} bytes, recorded {size}")
        checked += 1
    if checked == 0:
        fail(f"{label}: {rec} lists no hashed file")
    return checked, rows


def one_order(order, wheel, kvcr_bin, fixture, wheels_dir):
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        run([sys.executable, "-m", "venv", venv])
        pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        src = ["--no-index", "--find-links", wheels_dir] if wheels_dir else []
        bin_before = sha256_file(kvcr_bin)
        installs = {
            "kvcr": pip + src + ["--no-deps", KVCR_DIST],
            "kvcr-audit": pip + ["--no-index", "--no-deps", wheel],
        }
        for name in order:
            run(installs[name])
        run(pip + src + ["--no-deps"] + KVCR_IMPORT_DEPS)
        listed = {d["name"].lower(): d["version"] for d in json.loads(
            run([venv / "bin" / "python", "-m", "pip", "list", "--format", "json",
                 "--disable-pip-version-check"]))}
        if listed.get("kvcr") != "0.1.1":
            fail(f"order {order}: pip list shows kvcr {listed.get('kvcr')}, want 0.1.1 ({listed})")
        if "kvcr-audit" not in listed:
            fail(f"order {order}: pip list has no kvcr-audit ({listed})")
        site = site_packages(venv)
        n_kvcr, kvcr_rows = check_record(site, "kvcr-0.1.1", f"order {order}: KVCR's files")
        n_ours, our_rows = check_record(site, "kvcr_audit-*", f"order {order}: kvcr-audit's files")
        # Neither distribution owns a path of the other's, nor a `kvcr` executable.
        kvcr_paths = {r[0] for r in kvcr_rows}
        our_paths = {r[0] for r in our_rows}
        if kvcr_paths & our_paths:
            fail(f"order {order}: both distributions list {sorted(kvcr_paths & our_paths)}")
        for path in kvcr_paths | our_paths:
            if Path(path).name == "kvcr" and "bin" in Path(path).parts:
                fail(f"order {order}: a distribution installs an executable {path}")
        if (venv / "bin" / "kvcr").exists():
            fail(f"order {order}: {venv}/bin/kvcr exists and would shadow the kvcr command")
        probe = (
            "import sys, json, kvcr, kvcr_audit\n"
            "assert hasattr(kvcr, 'KVCR'), dir(kvcr)\n"
            "doc = kvcr_audit.audit(sys.argv[1])\n"
            "print(json.dumps({'kvcr': kvcr.__file__, 'kvcr_audit': kvcr_audit.__file__,\n"
            "  'accepted': doc['summary']['accepted'], 'exit': doc['exit_status']}))\n"
        )
        env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{Path(kvcr_bin).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        got = json.loads(run([venv / "bin" / "python", "-c", probe, fixture], cwd=tmp, env=env))
        if Path(got["kvcr"]).parent != site / "kvcr":
            fail(f"order {order}: import kvcr came from {got['kvcr']}, not {site / 'kvcr'}")
        if Path(got["kvcr_audit"]).parent != site / "kvcr_audit":
            fail(f"order {order}: import kvcr_audit came from {got['kvcr_audit']}")
        if got["exit"] != 0 or got["accepted"] < 1:
            fail(f"order {order}: kvcr_audit.audit({fixture}) gave {got}")
        which = run(["sh", "-c", "command -v kvcr"], env=env).strip()
        if Path(which).resolve() != Path(kvcr_bin).resolve():
            fail(f"order {order}: `kvcr` on the PATH is {which}, not {kvcr_bin}")
        if sha256_file(kvcr_bin) != bin_before:
            fail(f"order {order}: {kvcr_bin} changed")
        version = run([which, "--version"], env=env).splitlines()[0]
        if not version.startswith("kvcr "):
            fail(f"order {order}: `kvcr --version` says {version!r}")
        # Removing ours leaves theirs whole.
        run([venv / "bin" / "python", "-m", "pip", "uninstall", "-y", "-q", "kvcr-audit"])
        check_record(site, "kvcr-0.1.1", f"order {order}: KVCR's files after uninstalling kvcr-audit")
        print(f"side-by-side: order {' then '.join(order)}: both listed, {n_kvcr} KVCR files and "
              f"{n_ours} kvcr-audit files as recorded, both importable in one interpreter, "
              f"`kvcr` is {which} ({version}); uninstalling kvcr-audit left KVCR whole")


def main():
    if len(sys.argv) != 4:
        fail("usage: side-by-side.py WHEEL KVCR_BIN FIXTURE_INVENTORY")
    wheel, kvcr_bin, fixture = (str(Path(a).resolve()) for a in sys.argv[1:])
    wheels_dir = os.environ.get("KVCR_SIDE_BY_SIDE_WHEELS")
    for order in (("kvcr", "kvcr-audit"), ("kvcr-audit", "kvcr")):
        one_order(order, wheel, kvcr_bin, fixture, wheels_dir)
    print("side-by-side: both install orders passed")


if __name__ == "__main__":
    main()
