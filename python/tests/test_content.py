"""kvcr_audit.content_digest: the sampling rule of the import issue (item 1), from a
read callback."""

from __future__ import annotations

import hashlib
from typing import List, Tuple

import pytest

import kvcr_audit

MEM = bytes((i * 7 + 3) % 251 for i in range(1 << 16))


def reader(calls: List[Tuple[int, int]]):  # type: ignore[no-untyped-def]
    def read(offset: int, length: int) -> bytes:
        calls.append((offset, length))
        return MEM[offset : offset + length]

    return read


def test_the_worked_example() -> None:
    # S=8193, O=100, P=512, N=3: span 7681, starts O + floor(i*7681/2).
    calls: List[Tuple[int, int]] = []
    c = kvcr_audit.content_digest(reader(calls), 8193, offset_bytes=100, pages=3, page_bytes=512)
    assert calls == [(100, 512), (3940, 512), (7781, 512)]
    want = hashlib.sha256(b"".join(MEM[o : o + n] for o, n in calls)).hexdigest()
    assert c == {"page_bytes": 512, "pages": 3, "sha256": want}


def test_small_allocation_is_one_range() -> None:
    calls: List[Tuple[int, int]] = []
    c = kvcr_audit.content_digest(reader(calls), 100, offset_bytes=8, pages=1)
    assert calls == [(8, 100)]
    assert c["sha256"] == hashlib.sha256(MEM[8:108]).hexdigest()
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.content_digest(reader([]), 100)  # pages defaults to 16
    assert e.value.code == "KV007"


def test_defaults_first_and_last_page() -> None:
    calls: List[Tuple[int, int]] = []
    kvcr_audit.content_digest(reader(calls), 65536)
    assert len(calls) == 16 and calls[0] == (0, 4096) and calls[-1] == (65536 - 4096, 4096)


@pytest.mark.parametrize(
    "kw",
    [
        {"page_bytes": 3000},
        {"page_bytes": 256},
        {"page_bytes": 2 << 20},
        {"pages": 0},
        {"pages": 65},
        {"pages": 1},
        {"pages": True},
        {"page_bytes": 4096.0},
        {"offset_bytes": -1},
        {"offset_bytes": 2**64},
        {"offset_bytes": 2**64 - 1},
    ],
)
def test_bad_shapes_are_kv007(kw: dict) -> None:
    with pytest.raises(kvcr_audit.DescriptorError) as e:
        kvcr_audit.content_digest(reader([]), 65536, **kw)
    assert e.value.code == "KV007"
    assert not isinstance(e.value, (OverflowError, TypeError))


def test_read_errors() -> None:
    class Boom(Exception):
        pass

    def fails(o: int, n: int) -> bytes:
        raise Boom("device gone")

    with pytest.raises(Boom):
        kvcr_audit.content_digest(fails, 65536)
    with pytest.raises(kvcr_audit.Error) as e:
        kvcr_audit.content_digest(lambda o, n: b"short", 65536)
    assert "5 bytes" in str(e.value)
    with pytest.raises(kvcr_audit.Error):
        kvcr_audit.content_digest(lambda o, n: "text", 65536)  # type: ignore[arg-type, return-value]
    # A bytearray is bytes enough.
    a = kvcr_audit.content_digest(lambda o, n: bytearray(MEM[o : o + n]), 65536)
    b = kvcr_audit.content_digest(lambda o, n: MEM[o : o + n], size_bytes=65536)
    assert a == b
