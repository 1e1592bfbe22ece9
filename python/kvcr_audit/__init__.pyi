import os
import pathlib
import uuid
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

StrPath = Union[str, "os.PathLike[str]"]

__version__: str
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

class Error(Exception):
    exit_status: int
    message: str
    def __init__(self, message: str, exit_status: int = 1) -> None: ...

class UsageError(Error):
    def __init__(self, message: str) -> None: ...

class DescriptorError(Error):
    code: str
    field: Optional[str]
    def __init__(self, code: str, field: Optional[str], message: str) -> None: ...

class Refused(Error):
    report: Dict[str, Any]
    def __init__(self, message: str, report: Dict[str, Any]) -> None: ...

def seal(descriptor: Mapping[str, Any]) -> Dict[str, Any]: ...
def digest(descriptor: Mapping[str, Any]) -> str: ...
def write_rank(
    root: StrPath,
    descriptor: Mapping[str, Any],
    *,
    subdir: Optional[StrPath] = None,
    node_facts: Optional[StrPath] = None,
) -> pathlib.Path: ...
def proc_start_ticks(pid: int) -> int: ...
def boot_id() -> str: ...
def content_digest(
    read: Callable[[int, int], bytes],
    size_bytes: int,
    *,
    offset_bytes: int = 0,
    pages: int = 16,
    page_bytes: int = 4096,
) -> Dict[str, Any]: ...
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
    incarnation: Union[str, uuid.UUID, None] = None,
    node_facts: Optional[StrPath] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]: ...
def examine(path: StrPath) -> Dict[str, Any]: ...
def gms(
    paths: Union[StrPath, Sequence[StrPath], None] = None,
    *,
    live: bool = False,
    num_blocks: Optional[int] = None,
    binding: Optional[str] = None,
    interval_ms: Optional[int] = None,
    env: Optional[Mapping[Union[str, bytes], Union[str, bytes]]] = None,
) -> Dict[str, Any]: ...
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
) -> Dict[str, Any]: ...
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
) -> Dict[str, Any]: ...
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
) -> Dict[str, Any]: ...
def current_epoch(root: StrPath, engine: str) -> Optional[int]: ...
