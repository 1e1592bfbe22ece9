"""The package in a process forked after it ran (an engine's forked worker,
multiprocessing's "fork" start method): it reads its own files, never the
parent's.

Files are reopened for reading through ``/proc/self/fd`` (docs/format.md
§2.3); ``self`` is resolved when that directory is opened, so one kept
from the parent names the parent's fds in the child, and the child's
``fd/N`` would be the parent's fd N: another file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import kvcr_audit
from conftest import codes, inventory


def test_a_forked_child_reads_its_own_files(tmp_path: Path) -> None:
    root = inventory(tmp_path / "inv", 8)
    want = kvcr_audit.audit(root)  # the parent has reopened files: its self/fd is kept
    assert want["exit_status"] == 0
    decoy = tmp_path / "decoy.json"
    decoy.write_text("{}")
    go_r, go_w = os.pipe()
    out = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:  # the child: audit once the parent holds the decoys
        code = 1
        try:
            os.close(go_w)
            os.read(go_r, 1)
            got = kvcr_audit.audit(root)
            out.write_text(json.dumps({"exit_status": got["exit_status"], "codes": codes(got)}))
            code = 0
        finally:
            os._exit(code)
    os.close(go_r)
    # The parent's lowest free fds, the numbers the child's next opens
    # get, now hold a file that is no descriptor.
    held = [os.open(decoy, os.O_RDONLY) for _ in range(32)]
    try:
        os.write(go_w, b"x")
        _, status = os.waitpid(pid, 0)
    finally:
        for fd in held:
            os.close(fd)
        os.close(go_w)
    assert os.waitstatus_to_exitcode(status) == 0
    got = json.loads(out.read_text())
    assert got == {"exit_status": 0, "codes": codes(want)}, got


def test_a_forked_child_that_closed_its_fds_keeps_the_ones_it_opened(tmp_path: Path) -> None:
    # The parent's kept directory fd is not the child's to close: a child
    # that closed every fd and opened others under the same numbers keeps
    # them all across a call.
    root = inventory(tmp_path / "inv", 8)
    want = kvcr_audit.audit(root)
    decoy = tmp_path / "decoy"
    decoy.write_text("the child's own file")
    out = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.closerange(3, 4096)
            mine = [os.open(decoy, os.O_RDONLY) for _ in range(64)]
            got = kvcr_audit.audit(root)
            ino = os.stat(decoy).st_ino
            still = [fd for fd in mine if _is(fd, ino)]
            out.write_text(json.dumps({
                "exit_status": got["exit_status"], "codes": codes(got),
                "kept": len(still), "opened": len(mine),
            }))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    got = json.loads(out.read_text())
    assert got == {"exit_status": 0, "codes": codes(want), "kept": 64, "opened": 64}, got


def _is(fd: int, ino: int) -> bool:
    try:
        return os.fstat(fd).st_ino == ino
    except OSError:
        return False


def test_forks_while_another_thread_audits_never_leave_the_child_waiting(tmp_path: Path) -> None:
    # What a call keeps per process is read without a lock: a fork taken
    # while another thread is inside a call leaves the child nothing held
    # to wait for. Each child audits under an alarm (a hang fails, never
    # stalls the suite).
    import signal
    import threading

    root = inventory(tmp_path / "inv", 8)
    want = codes(kvcr_audit.audit(root))
    stop = threading.Event()
    errors: list = []

    def busy() -> None:
        while not stop.is_set():
            try:
                kvcr_audit.audit(root)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

    t = threading.Thread(target=busy)
    t.start()
    try:
        for i in range(100):
            out = tmp_path / ("child-%d.json" % i)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    signal.alarm(10)
                    got = kvcr_audit.audit(root)
                    out.write_text(json.dumps([got["exit_status"], codes(got)]))
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, (i, status)
            assert json.loads(out.read_text()) == [0, want], i
    finally:
        stop.set()
        t.join()
    assert errors == []
