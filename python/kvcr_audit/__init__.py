"""kvcr_audit, the Python package of the ``kvcr`` command: audit retained
KV-cache inventories, write them, and ask the import gate.

The distribution is ``kvcr-audit``: ``kvcr`` on PyPI is NVIDIA's KV Cache
Runner, whose import package ``kvcr`` installs beside this one.

The producer side (a sidecar that keeps KV memory alive) writes descriptors
with :func:`write_rank`; the engine side asks :func:`gate` before it becomes
ready and imports from the plan it returns. Every rule is kvcr's own Rust
code (``kvcr_audit::api``), the same the ``kvcr`` command runs: nothing here
re-implements a check. See docs/python.md and docs/format.md §13.

The package reads no environment variable (except ``gms`` given no ``env=``,
which passes ``os.environb`` as GMS's variables): what the ``kvcr`` command takes
from ``KVCR_PROFILE``, ``KVCR_NODE_FACTS`` and ``KVCR_THREADS`` are the
arguments ``profile=``, ``node_facts=`` and ``threads=`` here. It prints
nothing: the notes the command prints on stderr go to the ``kvcr_audit`` logger
(level INFO).
"""

from __future__ import annotations

import json as _json
import logging as _logging
import operator as _operator
import os as _os
import pathlib as _pathlib
import sys as _sys
import uuid as _uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native

__version__: str = _native.version()

__all__ = [
    "__version__",
    "Error",
    "UsageError",
    "DescriptorError",
    "Refused",
    "seal",
    "digest",
    "write_rank",
    "proc_start_ticks",
    "boot_id",
    "content_digest",
    "audit",
    "examine",
    "gate",
    "current_epoch",
    "gms",
    "pools",
    "offload",
]

StrPath = Union[str, "_os.PathLike[str]"]

_U64_MAX = (1 << 64) - 1
# The range of --min-epoch, --max-age and --max-report-age (docs/format.md §5.4).
_I63_MAX = (1 << 63) - 1
# Ranks are below the largest world size (docs/format.md §3), as in the
# command line's --local-ranks text.
_MAX_WORLD_SIZE = 4096
# Python writes no integer of more than 4,300 digits as text (CPython's
# sys.int_info.default_max_str_digits); far out of every range of §3.
_HUGE = 10**4300

_log = _logging.getLogger("kvcr_audit")

# How os.fsencode encodes a str path (it takes them once, at import, too).
_FS_ENCODING = _sys.getfilesystemencoding()
_FS_ERRORS = _sys.getfilesystemencodeerrors()
# Path types that are never a mapping: a profile of one of these exact types
# is a path without asking the Mapping ABC (docs/bench.md, issue #39 §3).
_PLAIN_PATHS = frozenset((str, bytes, _pathlib.PosixPath, _pathlib.PurePosixPath))


def _notes(notes: Sequence[str]) -> None:
    # What the command line prints as `kvcr: note: …` on stderr.
    for n in notes:
        _log.info("%s", n)


# The exceptions the native half raises, built by these constructors
# (python/src/errors.rs, the one place a kvcr error is worded for Python).


class Error(Exception):
    """Base of every kvcr error. ``exit_status`` is what the CLI exits with
    for the same input; ``message`` the text."""

    exit_status: int
    message: str

    def __init__(self, message: str, exit_status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


class UsageError(Error):
    """Where the CLI exits 2: a bad option, a missing or bad profile, a root
    or file that cannot be read, a write that failed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 2)


class DescriptorError(Error):
    """A descriptor (or a member of one) that kvcr rejects: ``code`` is the
    finding code the audit gives it (``KV006``, ``KV007``, ``KV004``),
    ``field`` the member's dotted path as the CLI prints it (``node.boot_id``,
    ``allocations[0].size_bytes``) or ``None``."""

    code: str
    field: Optional[str]

    def __init__(self, code: str, field: Optional[str], message: str) -> None:
        super().__init__(message, 1)
        self.code = code
        self.field = field

    def __str__(self) -> str:
        return "%s %s" % (self.code, self.message)


class Refused(Error):
    """The import gate refused the group; ``report`` is the
    ``kvcr.import-report/v1`` document (mode ``gate``) as a dict."""

    report: Dict[str, Any]

    def __init__(self, message: str, report: Dict[str, Any]) -> None:
        super().__init__(message, 1)
        self.report = report


def _path(name: str, p: Any) -> bytes:
    # A str path is encoded as the os module encodes it (surrogateescape: a
    # name read from the file system round-trips to its bytes); one that
    # cannot be (a lone surrogate outside U+DC80..U+DCFF) names no file.
    if isinstance(p, bytes):
        return p
    try:
        # os.fsencode(os.fspath(p)), one call shorter.
        s = _os.fspath(p)
        return s.encode(_FS_ENCODING, _FS_ERRORS) if isinstance(s, str) else s
    except TypeError:
        raise UsageError(
            "%s=: expected a str, bytes or os.PathLike path, found %s" % (name, type(p).__name__)
        ) from None
    except UnicodeError as e:
        raise UsageError(
            "%s=: the path is not valid text and names no file (%s)" % (name, e.reason)
        ) from None


def _text(name: str, v: Any, what: str = "a string") -> str:
    """A string option, refused as its flag would be when it is not text
    (a lone surrogate cannot be passed on a command line)."""
    if not isinstance(v, str):
        raise UsageError("%s=: expected %s, found %s" % (name, what, _shown(v)))
    try:
        v.encode("utf-8")
    except UnicodeError as e:
        raise UsageError(
            "%s=: not valid text: %s at index %d" % (name, e.reason, e.start)
        ) from None
    return v


def _shown(v: Any) -> str:
    """A value for a message, never Python's own refusal to print it (an
    integer past 4,300 digits) nor an unbounded text."""
    if isinstance(v, int) and not isinstance(v, bool):
        if abs(v) >= 10**40:
            return "an integer of %d bits" % v.bit_length()
        return str(v)
    if isinstance(v, str):
        r = repr(v[:64] + ("…" if len(v) > 64 else ""))
        return r
    return "a %s" % type(v).__name__


def _as_int(v: Any) -> Optional[int]:
    """An integer (int, or anything with __index__ such as numpy's), never a bool."""
    if isinstance(v, bool):
        return None
    try:
        return _operator.index(v)
    except TypeError:
        return None


def _int_option(name: str, v: Any, lo: int = 0, hi: int = _I63_MAX) -> int:
    # Options take what the CLI flag takes: anything else is a usage error,
    # as `--min-epoch 1e3` or `--min-epoch 9223372036854775808` is.
    n = _as_int(v)
    if n is None:
        raise UsageError("%s=: expected an integer, found %s" % (name, _shown(v)))
    if not lo <= n <= hi:
        bound = "2^63-1" if hi == _I63_MAX else str(hi)
        raise UsageError("%s=: %s is out of range (%d to %s)" % (name, _shown(n), lo, bound))
    return n


def _content_int(name: str, v: Any) -> int:
    # A content member's integers, as the audit would judge them (KV007).
    n = _as_int(v)
    if n is None:
        raise DescriptorError(
            "KV007", name, "%s: wrong type, expected integer, found %s" % (name, _shown(v))
        )
    v = n
    if not 0 <= v <= _U64_MAX:
        raise DescriptorError("KV007", name, "%s: out of range, found %s" % (name, _shown(v)))
    return v


def _huge_int(obj: Any) -> Optional[str]:
    """The dotted path (as the audit writes it: ``allocations[0].size_bytes``)
    of the first integer too long for Python to write as text, if any;
    nesting past 32 is left to the JSON rules (KV006)."""
    stack = [(obj, "", 0)]
    while stack:
        v, at, depth = stack.pop()
        if isinstance(v, int) and not isinstance(v, bool):
            if abs(v) >= _HUGE:
                return at or "(the value)"
        elif depth <= 33 and isinstance(v, Mapping):
            items = list(v.items())
            for k, x in reversed(items):
                key = k if isinstance(k, str) else repr(k)
                stack.append((x, "%s.%s" % (at, key) if at else key, depth + 1))
        elif depth <= 33 and isinstance(v, (list, tuple)):
            for i in range(len(v) - 1, -1, -1):
                stack.append((v[i], "%s[%d]" % (at, i), depth + 1))
    return None


def _json_text(what: str, obj: Any) -> bytes:
    # Exact text for every JSON value: ints in full (never rounded), floats
    # as floats (which the descriptor rules reject), NaN as NaN (not JSON:
    # KV006), non-ASCII raw.
    if not isinstance(obj, Mapping):
        raise DescriptorError(
            "KV007", None, "a %s is a JSON object (a dict), found %s" % (what, type(obj).__name__)
        )
    huge = _huge_int(obj)
    if huge is not None:
        # Out of every range of §3, as any out-of-range integer (KV007).
        raise DescriptorError(
            "KV007", huge, "%s: out of range, found an integer of more than 4300 digits" % huge
        )
    try:
        return _json.dumps(dict(obj), ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: not UTF-8
        raise DescriptorError("KV006", None, "malformed: %s" % e) from None
    except RecursionError:
        raise DescriptorError("KV006", None, "malformed: nested deeper than 32") from None
    except (TypeError, ValueError) as e:
        raise DescriptorError("KV007", None, "not JSON: %s" % e) from None


def _profile_args(profile: Any) -> Tuple[Optional[bytes], Optional[bytes]]:
    if profile is None:
        return None, None
    if type(profile) in _PLAIN_PATHS:
        return _path("profile", profile), None
    if isinstance(profile, Mapping):
        huge = _huge_int(profile)
        if huge is not None:
            raise UsageError(
                "bad profile=: %s: out of range, an integer of more than 4300 digits" % huge
            )
        try:
            text = _json.dumps(dict(profile), ensure_ascii=False, allow_nan=True)
            return None, text.encode("utf-8")
        except RecursionError:
            raise UsageError("bad profile=: nested deeper than 32") from None
        except (TypeError, ValueError) as e:  # UnicodeError is a ValueError
            raise UsageError("bad profile=: not JSON: %s" % e) from None
    return _path("profile", profile), None


def _ranks(local_ranks: Any) -> Optional[str]:
    """``local_ranks`` as the flag's text. A collection is bounded as the
    flag is (every rank below 4096) and refused at once, before any
    iteration, when it holds more items than there are ranks (a range is
    judged by its ends: ``range(2**62)`` is never iterated)."""
    if local_ranks is None:
        return None
    if isinstance(local_ranks, str):
        return _text("local_ranks", local_ranks)
    if isinstance(local_ranks, range):
        # By its ends, never len() (OverflowError past 2^63) nor iteration.
        if not local_ranks:
            raise UsageError("local_ranks=: an empty range names no rank")
        lo, hi = min(local_ranks[0], local_ranks[-1]), max(local_ranks[0], local_ranks[-1])
        for end in (lo, hi):
            _int_option("local_ranks", end, 0, _MAX_WORLD_SIZE - 1)
    if isinstance(local_ranks, (list, tuple, set, frozenset, range)):
        if len(local_ranks) > _MAX_WORLD_SIZE:
            raise UsageError(
                "local_ranks=: %d items, more than there are ranks (ranks are below %d)"
                % (len(local_ranks), _MAX_WORLD_SIZE)
            )
        ranks = sorted(
            {_int_option("local_ranks", r, 0, _MAX_WORLD_SIZE - 1) for r in local_ranks}
        )
        if not ranks:
            raise UsageError("local_ranks=: an empty list names no rank")
        return ",".join(str(r) for r in ranks)
    raise UsageError(
        "local_ranks=: expected a string such as \"0-3,8\" or a list of ints, found %s"
        % _shown(local_ranks)
    )


def _age(name: str, v: Any, optional: bool = True) -> Optional[int]:
    if v is None:
        if optional:
            return None
        raise UsageError("%s=: expected seconds or a duration such as \"5m\", found None" % name)
    if type(v) is int and 0 <= v <= _I63_MAX:
        return v
    if isinstance(v, str):
        return int(_native.parse_age(name, _text(name, v)))
    return _int_option(name, v)


def seal(descriptor: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of ``descriptor`` with ``digest`` set (docs/format.md §3.2),
    after every check the audit makes apart from the digest; raises
    :class:`DescriptorError` with the audit's code otherwise."""
    sealed = _native.seal(_json_text("descriptor", descriptor))
    out: Dict[str, Any] = _json.loads(sealed)
    return out


def digest(descriptor: Mapping[str, Any]) -> str:
    """The canonical digest (``sha256:…``) of ``descriptor`` without its
    ``digest`` member, as ``kvcr digest`` computes it."""
    return str(_native.digest(_json_text("descriptor", descriptor)))


def write_rank(
    root: StrPath,
    descriptor: Mapping[str, Any],
    *,
    subdir: Optional[StrPath] = None,
    node_facts: Optional[StrPath] = None,
) -> _pathlib.Path:
    """Validates, seals and writes ``descriptor`` as ``root/[subdir/]rank-<R>.json``
    atomically (docs/format.md §3.5: exclusive staging file, mode 0600,
    fsync, rename, directory fsync; never through a symlink). Every check
    ``kvcr examine`` makes comes first, then the node facts that must hold
    when it is written — this node's hostname (KV110) and boot id (KV108),
    the owner running with its start ticks (KV108) — read from this machine,
    or from the facts file ``node_facts`` names (docs/live.md; tests): a
    mismatch is :class:`DescriptorError` with the audit's code and the
    member. ``subdir`` (plain names; no ``.`` or ``..``) is created 0700
    where missing. Returns the path written."""
    r = _path("root", root)
    s = None if subdir is None else _path("subdir", subdir)
    nf = None if node_facts is None else _path("node_facts", node_facts)
    text = _json_text("descriptor", descriptor)
    written = _native.write_rank(r, text, s, nf)
    return _pathlib.Path(_os.fsdecode(written))


def proc_start_ticks(pid: int) -> int:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks since boot), read the
    way the live audit reads it; :class:`Error` when no such process runs."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise UsageError("pid=: expected an integer, found %s" % _shown(pid))
    if not 1 <= pid <= (1 << 31) - 1:
        raise Error("no running process %s" % _shown(pid), 1)
    return int(_native.proc_start_ticks(pid))


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id`` without its newline)."""
    return str(_native.boot_id())


def content_digest(
    read: Callable[[int, int], bytes],
    size_bytes: int,
    *,
    offset_bytes: int = 0,
    pages: int = 16,
    page_bytes: int = 4096,
) -> Dict[str, Any]:
    """The ``content`` member of an allocation: SHA-256 over the pages the
    sampling rule picks, each read with ``read(offset, length)`` (absolute
    offsets in the exported allocation). Returns
    ``{"page_bytes": …, "pages": …, "sha256": "<64 hex>"}``. If ``size_bytes``
    fits in one page, ``pages`` must be 1."""
    args = [
        _content_int("size_bytes", size_bytes),
        _content_int("offset_bytes", offset_bytes),
        _content_int("content.pages", pages),
        _content_int("content.page_bytes", page_bytes),
    ]
    pb, n, sha = _native.content_digest(read, *args)
    return {"page_bytes": pb, "pages": n, "sha256": sha}


def audit(
    root: StrPath,
    *,
    profile: Union[StrPath, Mapping[str, Any], None] = None,
    engine: Optional[str] = None,
    live: bool = False,
    strict: bool = False,
    local_ranks: Union[str, Sequence[int], None] = None,
    min_epoch: Optional[int] = None,
    max_age: Union[int, str, None] = None,
    incarnation: Union[str, _uuid.UUID, None] = None,
    node_facts: Optional[StrPath] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """The document ``kvcr audit ROOT --format json`` prints with the same
    options, computed in-process with the GIL released. A rejected group is
    no exception: read ``report["exit_status"]``. ``node_facts`` names a
    facts file that describes the node ``live`` judges against (docs/live.md;
    ``KVCR_NODE_FACTS`` for the command); ``threads`` the reading threads
    (default: the CPUs available). No environment variable is read."""
    r = _path("root", root)
    pp, pj = _profile_args(profile)
    if not isinstance(live, bool) or not isinstance(strict, bool):
        raise UsageError("live= and strict= are booleans")
    if engine is not None:
        engine = _text("engine", engine)
    if isinstance(incarnation, _uuid.UUID):
        incarnation = str(incarnation)
    if incarnation is not None:
        incarnation = _text("incarnation", incarnation, "a UUID string")
    me = None if min_epoch is None else _int_option("min_epoch", min_epoch)
    nf = None if node_facts is None else _path("node_facts", node_facts)
    th = None if threads is None else _int_option("threads", threads, 1, 64)
    out, _status, notes = _native.audit(
        r, pp, pj, engine, live, strict, _ranks(local_ranks), me,
        _age("max_age", max_age), incarnation, nf, th,
    )
    _notes(notes)
    return out


def examine(path: StrPath) -> Dict[str, Any]:
    """The document ``kvcr examine FILE --format json`` prints (one
    descriptor checked on its own)."""
    text = _native.examine(_path("path", path))
    out: Dict[str, Any] = _json.loads(text)
    return out


def gms(
    paths: Union[StrPath, Sequence[StrPath], None] = None,
    *,
    live: bool = False,
    num_blocks: Optional[int] = None,
    binding: Optional[str] = None,
    interval_ms: Optional[int] = None,
    env: Optional[Mapping[Union[str, bytes], Union[str, bytes]]] = None,
) -> Dict[str, Any]:
    """The document ``kvcr gms [PATH]... --format json`` prints: what
    Dynamo's GPU Memory Service left on this node (lease rings, writer
    cohorts, recovery metadata), judged read-only (docs/format.md §14).
    ``paths`` is one path or a sequence of them; with none, looks where GMS
    puts its artifacts, from GMS's variables in ``env`` (names and values as
    str or bytes); ``env`` not given is this process's environment
    (``os.environb``, read here, at the call), ``env={}`` none of them (GMS's
    defaults). A rejected artifact is no exception: read
    ``report["exit_status"]``."""
    if paths is None:
        listed: Sequence[Any] = []
    elif isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        listed = [paths]
    else:
        listed = list(paths)
    ps = [_path("paths", p) for p in listed]
    if not isinstance(live, bool):
        raise UsageError("live is a boolean")
    nb = None if num_blocks is None else _int_option("num_blocks", num_blocks)
    iv = None if interval_ms is None else _int_option("interval_ms", interval_ms, 0, 60000)
    if binding is not None and not isinstance(binding, str):
        raise UsageError("binding: expected 64 hex digits, found %r" % (binding,))
    # GMS's variables, passed explicitly: the Rust library never reads the
    # process's environment (docs/format.md §13.1, §14.1).
    given = _os.environb if env is None else env
    if not isinstance(given, Mapping):
        raise UsageError("env=: expected a mapping, found %s" % type(given).__name__)
    variables = [(_path("env", k), _path("env", v)) for k, v in given.items()]
    text = _native.gms(ps, live, nb, binding, iv, variables)
    out: Dict[str, Any] = _json.loads(text)
    return out


def pools(
    paths: Union[StrPath, Sequence[StrPath]],
    *,
    live: bool = False,
    socket_path: Optional[StrPath] = None,
    guard_count: Optional[int] = None,
    pool_sizes_gb: Optional[str] = None,
    journal_bytes: Optional[int] = None,
    pool_layouts: Optional[str] = None,
    compatibility_digest: Optional[str] = None,
    page_size: Optional[int] = None,
    g3_paths: Sequence[StrPath] = (),
    capacity_bytes_per_file: Optional[int] = None,
    identity: Optional[Tuple[int, int]] = None,
    interval_ms: Optional[int] = None,
) -> Dict[str, Any]:
    """The document ``kvcr pools PATH... --format json`` prints: NVIDIA
    KVCR's pool files (journal, handback region, slots, liveness), judged
    read-only (docs/format.md §16). ``paths`` is a pool directory (the
    service's ``--pool-dir``), a pool file, or a sequence of them: KVCR has
    no default. The options are named after KVCR's own flags and
    configuration fields: ``pool_sizes_gb`` as the service's
    ``--pool-sizes-gb`` text (``"0.0001"``), ``pool_layouts`` as
    ``"NAME:BYTES,..."`` (``":4096"`` for vLLM's one pool). A rejected pool
    is no exception: read ``report["exit_status"]``."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        listed: Sequence[Any] = [paths]
    else:
        listed = list(paths)
    ps = [_path("paths", p) for p in listed]
    if not isinstance(live, bool):
        raise UsageError("live is a boolean")
    sp = None if socket_path is None else _path("socket_path", socket_path)
    g3 = [_path("g3_paths", p) for p in g3_paths]
    ints = {
        "guard_count": guard_count,
        "journal_bytes": journal_bytes,
        "page_size": page_size,
        "capacity_bytes_per_file": capacity_bytes_per_file,
    }
    n = {k: None if v is None else _int_option(k, v) for k, v in ints.items()}
    iv = None if interval_ms is None else _int_option("interval_ms", interval_ms, 0, 60000)
    for name, v in (
        ("pool_sizes_gb", pool_sizes_gb),
        ("pool_layouts", pool_layouts),
        ("compatibility_digest", compatibility_digest),
    ):
        if v is not None and not isinstance(v, str):
            raise UsageError("%s: expected a string, found %r" % (name, v))
    ident = None
    if identity is not None:
        if not (isinstance(identity, tuple) and len(identity) == 2):
            raise UsageError("identity: expected (st_dev, st_ino), found %r" % (identity,))
        ident = (_int_option("identity", identity[0]), _int_option("identity", identity[1]))
    text = _native.pools(
        ps, live, sp, n["guard_count"], pool_sizes_gb, n["journal_bytes"],
        pool_layouts, compatibility_digest, n["page_size"], g3,
        n["capacity_bytes_per_file"], ident, iv,
    )
    out: Dict[str, Any] = _json.loads(text)
    return out


def offload(
    paths: Union[StrPath, Sequence[StrPath], None] = None,
    *,
    producer: str = "auto",
    threads: Optional[int] = None,
    kv_bytes_per_chunk: Optional[int] = None,
    bytes_per_block: Union[int, Mapping[int, int], None] = None,
    chunk_bytes: Optional[int] = None,
    sglang_storage_dir: Optional[StrPath] = None,
    page_bytes: Optional[int] = None,
    model: Union[str, Sequence[str], None] = None,
) -> Dict[str, Any]:
    """The document ``kvcr offload [PATH]... --format json`` prints: the
    disk offload tiers vLLM, llm-d, LMCache and SGLang left at ``paths``, judged
    read-only per set (docs/format.md §15). ``paths`` is one path or a
    sequence of them; with none, looks at the engines' default roots
    (``sglang_storage_dir`` stands for $SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR:
    the library reads no environment variable). ``bytes_per_block`` is one
    size for every llm-d group or a mapping from group id to size.
    ``model`` is SGLang's served model name (``--model``), one string or a
    sequence of them; ``page_bytes`` is ``--page-bytes``. A
    rejected set is no exception: read ``report["exit_status"]``."""
    if paths is None:
        listed: Sequence[Any] = []
    elif isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        listed = [paths]
    else:
        listed = list(paths)
    ps = [_path("paths", p) for p in listed]
    if not isinstance(producer, str):
        raise UsageError("producer: expected a string, found %r" % (producer,))
    th = None if threads is None else _int_option("threads", threads, 1, 256)
    kb = None if kv_bytes_per_chunk is None else _int_option("kv_bytes_per_chunk", kv_bytes_per_chunk, 1)
    cb = None if chunk_bytes is None else _int_option("chunk_bytes", chunk_bytes, 1)
    bpb: List[Tuple[Optional[int], int]] = []
    if isinstance(bytes_per_block, Mapping):
        for g, n in bytes_per_block.items():
            bpb.append((_int_option("bytes_per_block group", g, 0, 2**32 - 1), _int_option("bytes_per_block", n, 1)))
    elif bytes_per_block is not None:
        bpb.append((None, _int_option("bytes_per_block", bytes_per_block, 1)))
    sd = None if sglang_storage_dir is None else _path("sglang_storage_dir", sglang_storage_dir)
    pb = None if page_bytes is None else _int_option("page_bytes", page_bytes, 1)
    if model is None:
        models: List[str] = []
    elif isinstance(model, str):
        models = [model]
    else:
        models = list(model)
    for m in models:
        if not isinstance(m, str):
            raise UsageError("model: expected a string or a sequence of strings, found %r" % (m,))
    text = _native.offload(ps, producer, th, kb, bpb, cb, sd, pb, models)
    out: Dict[str, Any] = _json.loads(text)
    return out


def gate(
    root: StrPath,
    *,
    profile: Union[StrPath, Mapping[str, Any], None] = None,
    engine: Optional[str] = None,
    local_ranks: Union[str, Sequence[int], None] = None,
    fleet_report: Optional[StrPath] = None,
    max_report_age: Union[int, str] = 300,
    node_facts: Optional[StrPath] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """The engine's readiness question: the import gate in live, strict mode,
    in the documented order of answers, up to and not including the driver
    check (no GPU call). Returns the accepted group's ``kvcr.import-plan/v1``
    document; raises :class:`Refused` (with ``.report``) otherwise, and
    :class:`UsageError` for a missing or incomplete profile (no environment
    variable is read: pass it). ``node_facts`` and ``threads`` as for
    :func:`audit`: on a node without a GPU driver the GPUs cannot be
    checked and the gate refuses (``not-checked``) unless a facts file lists
    them (docs/live.md)."""
    r = _path("root", root)
    pp, pj = _profile_args(profile)
    if engine is not None:
        engine = _text("engine", engine)
    fr = None if fleet_report is None else _path("fleet_report", fleet_report)
    age = _age("max_report_age", max_report_age, optional=False)
    nf = None if node_facts is None else _path("node_facts", node_facts)
    th = None if threads is None else _int_option("threads", threads, 1, 64)
    out, notes = _native.gate(r, pp, pj, engine, _ranks(local_ranks), fr, age, nf, th)
    _notes(notes)
    return out


def current_epoch(root: StrPath, engine: str) -> Optional[int]:
    """The current epoch of group ``engine`` in the inventory at ``root``:
    the highest epoch any of its descriptors states (superseded or rejected
    ones too), or ``None`` when it has none. A producer's first start takes
    the larger of this and the epoch it persisted, plus one (docs/format.md
    §3.5)."""
    r = _path("root", root)
    e = _text("engine", engine)
    n = _native.current_epoch(r, e)
    return None if n is None else int(n)
