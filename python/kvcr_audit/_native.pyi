# The native half (python/src/lib.rs); not API: use the kvcr_audit package.
from typing import Any, Dict, List, Optional, Tuple


# The functions python/src/lib.rs adds, in its order.
__all__ = [
    "version",
    "audit",
    "parse_age",
    "examine",
    "seal",
    "digest",
    "write_rank",
    "proc_start_ticks",
    "boot_id",
    "content_digest",
    "gate",
    "current_epoch",
    "_panic_for_tests",
    "gms",
    "pools",
    "offload",
]

def version() -> str: ...
def audit(
    root: bytes,
    profile_path: Optional[bytes],
    profile_json: Optional[bytes],
    engine: Optional[str],
    live: bool,
    strict: bool,
    local_ranks: Optional[str],
    min_epoch: Optional[int],
    max_age_s: Optional[int],
    incarnation: Optional[str],
    node_facts: Optional[bytes],
    threads: Optional[int],
) -> Tuple[Dict[str, Any], int, List[str]]: ...
def parse_age(name: str, s: str) -> int: ...
def _panic_for_tests(message: str) -> None: ...
def examine(file: bytes) -> str: ...
def seal(text: bytes) -> bytes: ...
def digest(text: bytes) -> str: ...
def write_rank(
    root: bytes, text: bytes, subdir: Optional[bytes], node_facts: Optional[bytes]
) -> bytes: ...
def proc_start_ticks(pid: int) -> int: ...
def boot_id() -> str: ...
def content_digest(
    read: Any, size_bytes: int, offset_bytes: int, pages: int, page_bytes: int
) -> Tuple[int, int, str]: ...
def gms(
    paths: List[bytes],
    live: bool,
    num_blocks: Optional[int],
    binding: Optional[str],
    interval_ms: Optional[int],
    env: List[Tuple[bytes, bytes]],
) -> str: ...
def pools(
    paths: List[bytes],
    live: bool,
    socket_path: Optional[bytes],
    guard_count: Optional[int],
    pool_sizes_gb: Optional[str],
    journal_bytes: Optional[int],
    pool_layouts: Optional[str],
    compatibility_digest: Optional[str],
    page_size: Optional[int],
    g3_paths: List[bytes],
    capacity_bytes_per_file: Optional[int],
    identity: Optional[Tuple[int, int]],
    interval_ms: Optional[int],
) -> str: ...
def offload(
    paths: List[bytes],
    producer: Optional[str],
    threads: Optional[int],
    kv_bytes_per_chunk: Optional[int],
    bytes_per_block: List[Tuple[Optional[int], int]],
    chunk_bytes: Optional[int],
    sglang_storage_dir: Optional[bytes],
    page_bytes: Optional[int] = None,
    models: List[str] = ...,
) -> str: ...
def gate(
    root: bytes,
    profile_path: Optional[bytes],
    profile_json: Optional[bytes],
    engine: Optional[str],
    local_ranks: Optional[str],
    fleet_report: Optional[bytes],
    max_report_age_s: int,
    node_facts: Optional[bytes],
    threads: Optional[int],
) -> Tuple[Dict[str, Any], List[str]]: ...
def current_epoch(root: bytes, engine: str) -> Optional[int]: ...
