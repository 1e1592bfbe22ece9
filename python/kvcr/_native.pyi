# The native half (python/src/lib.rs); not API: use the kvcr package.
from typing import Any, List, Optional, Tuple

class NativeError(Exception): ...

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
) -> Tuple[str, int]: ...
def parse_age(s: str) -> int: ...
def examine(file: bytes) -> str: ...
def seal(text: bytes) -> bytes: ...
def digest(text: bytes) -> str: ...
def write_rank(root: bytes, text: bytes, subdir: Optional[bytes]) -> bytes: ...
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
) -> str: ...
def gate(
    root: bytes,
    profile_path: Optional[bytes],
    profile_json: Optional[bytes],
    engine: Optional[str],
    local_ranks: Optional[str],
    fleet_report: Optional[bytes],
    max_report_age_s: int,
) -> str: ...
