"""Never crash on any bytes: random and mutated real batches through the whole segment reader.

Invariant: the batches and the reported corrupt regions tile the file exactly, so no byte is lost
or counted twice, whatever the corruption.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.rows import BatchHeader, Record
from kafka_log_decoder.segment import read_log_segment
from tests.builders import V2Batch, build_legacy, build_v2
from tests.paths import REAL_FIXTURES

REAL = REAL_FIXTURES
SEEDS = [
    (REAL / "codecrafters-kraft-3x" / "foo-0" / "00000000000000000000.log").read_bytes(),
    build_v2(
        V2Batch(
            base_offset=3,
            records=[(b"k", b"v" * 300)] * 5,
            producer_id=9,
            producer_epoch=1,
            base_sequence=0,
            codec="zstd",
            headers=[("h", b"x")],
        )
    ),
    build_v2(
        V2Batch(
            base_offset=8,
            records=[(None, b"w" * 200)] * 3,
            codec="snappy",
            transactional=True,
            producer_id=9,
            producer_epoch=1,
            base_sequence=5,
        )
    ),
    build_v2(V2Batch(base_offset=11, records=[(b"a", b"lz4" * 100)] * 2, codec="lz4")),
    build_v2(V2Batch(base_offset=13, records=[(b"g", b"gz" * 100)] * 2, codec="gzip")),
    build_legacy(1, [(b"a", b"1"), (b"b", b"2")], first_offset=15, codec="gzip"),
    build_legacy(0, [(b"c", b"3")], first_offset=17),
]


@st.composite
def mutated_segments(draw: st.DrawFn) -> bytes:
    data = bytearray(b"".join(draw(st.lists(st.sampled_from(SEEDS), min_size=1, max_size=6))))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "overwrite", "delete"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif op == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=12))
            data[at : at + len(chunk)] = chunk
        else:
            del data[at : at + draw(st.integers(1, 30))]
    return bytes(data)


def assert_tiles_the_file(items: list, data: bytes) -> None:
    header_positions = {i.position for i in items if isinstance(i, BatchHeader)}
    spans = [(i.position, i.size_bytes) for i in items if isinstance(i, BatchHeader)]
    # Errors at a batch's own position describe that batch; the others are regions of their own.
    spans += [
        (e.position, e.length or 0)
        for e in items
        if isinstance(e, DecodeError) and e.position not in header_positions
    ]
    spans.sort()
    at = 0
    for position, length in spans:
        assert position == at, f"gap or overlap at byte {at}: next span starts at {position}"
        assert length > 0
        at = position + length
    # Only a zero-filled (preallocated) tail may be left unaccounted.
    assert at <= len(data) and data[at:].count(0) == len(data) - at


def decode_all(data: bytes, records: bool, *chunk_sizes: int) -> list[list]:
    """The rows of `data` read with each window size in turn, from one file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "00000000000000000000.log"
        path.write_bytes(data)
        decodes = [list(read_log_segment(path, records=records, chunk_size=size)) for size in chunk_sizes]
    for items in decodes:
        for item in items:
            assert isinstance(item, BatchHeader | Record | DecodeError)
    return decodes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_segments(), records=st.booleans(), chunk_size=st.sampled_from([64, 1000, 1 << 20]))
def test_mutated_real_batches_yield_only_rows_and_typed_errors(
    data: bytes, records: bool, chunk_size: int
) -> None:
    (items,) = decode_all(data, records, chunk_size)
    assert_tiles_the_file(items, data)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=3000), records=st.booleans())
def test_random_bytes_yield_only_typed_errors(data: bytes, records: bool) -> None:
    (items,) = decode_all(data, records, 1 << 20)
    assert_tiles_the_file(items, data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_segments(), records=st.booleans(), chunk_size=st.integers(17, 1200))
def test_the_read_window_size_never_changes_the_rows(data: bytes, records: bool, chunk_size: int) -> None:
    """Where a window ends is an accident of the read: the same bytes give the same batches, records
    and errors (kind, position, length, message) with any window."""
    small, whole = decode_all(data, records, chunk_size, 1 << 20)
    assert small == whole
