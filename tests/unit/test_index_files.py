"""`.index`, `.timeindex` and `.txnindex` (formats §3.3-§3.5): real broker files, the preallocated
zero tail, partial entries, streaming, and DumpLogSegments as the reference decoder."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_decoder import index_files
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.index_files import (
    decode_offset_index,
    decode_time_index,
    decode_txn_index,
    read_offset_index,
    read_time_index,
    read_txn_index,
)
from kafka_log_decoder.rows import IndexEntry, TimeIndexEntry, TxnIndexEntry
from tests.builders import V2Batch, build_v2, segment
from tests.unit.test_producer_snapshot import (
    CODECRAFTERS,
    DONALDY,
    REAL,
    copies_for_the_tool,
    dump_log_segments,
)

BASE = "00000000000000000100"
INDEX = f"{BASE}.index"
TIME_INDEX = f"{BASE}.timeindex"
TXN_INDEX = f"{BASE}.txnindex"
REAL_INDEXES = sorted(REAL.glob("*/*/*.index"))
REAL_TIME_INDEXES = sorted(REAL.glob("*/*/*.timeindex"))


Row = TypeVar("Row", IndexEntry, TimeIndexEntry, TxnIndexEntry)


def rows_only(items: Iterable[Row | DecodeError]) -> list[Row]:
    """The rows of a stream that must hold no error."""
    rows = list(items)
    assert not any(isinstance(item, DecodeError) for item in rows), rows
    return [item for item in rows if not isinstance(item, DecodeError)]


def offset_index_bytes(*entries: tuple[int, int], zero_entries: int = 0) -> bytes:
    return b"".join(struct.pack(">ii", *e) for e in entries) + bytes(8 * zero_entries)


def time_index_bytes(*entries: tuple[int, int], zero_entries: int = 0) -> bytes:
    return b"".join(struct.pack(">qi", *e) for e in entries) + bytes(12 * zero_entries)


def txn_index_bytes(*entries: tuple[int, int, int, int, int]) -> bytes:
    return b"".join(struct.pack(">hqqqq", *e) for e in entries)


# --------------------------------------------------------------------------------------------
# Real broker files


def test_codecrafters_metadata_offset_index_has_one_entry() -> None:
    path = CODECRAFTERS / "__cluster_metadata-0" / "00000000000000000000.index"
    assert list(read_offset_index(path)) == [IndexEntry(file=str(path), offset=56, position=4123)]


def test_codecrafters_metadata_time_index_has_three_increasing_entries() -> None:
    path = CODECRAFTERS / "__cluster_metadata-0" / "00000000000000000000.timeindex"
    assert [(e.timestamp, e.offset) for e in rows_only(read_time_index(path))] == [
        (1725272038072, 56),
        (1725272048281, 80),
        (1725272098040, 115),
    ]


def test_codecrafters_foo_indexes_point_at_the_last_batch() -> None:
    foo = CODECRAFTERS / "foo-0"
    assert list(read_offset_index(foo / "00000000000000000000.index")) == []
    assert [
        (e.timestamp, e.offset) for e in rows_only(read_time_index(foo / "00000000000000000000.timeindex"))
    ] == [(1725272041932, 2)]


@pytest.mark.parametrize(
    ("partition", "expected"),
    [("__consumer_offsets-17", (1670071252901, 0)), ("__consumer_offsets-28", (1660065823488, 1))],
)
def test_donaldy_consumer_offsets_time_indexes(partition: str, expected: tuple[int, int]) -> None:
    entries = rows_only(read_time_index(DONALDY / partition / "00000000000000000000.timeindex"))
    assert [(e.timestamp, e.offset) for e in entries] == [expected]


# --------------------------------------------------------------------------------------------
# .index


def test_offset_index_offsets_are_relative_to_the_base_in_the_file_name() -> None:
    entries, errors = decode_offset_index(offset_index_bytes((5, 0), (40, 4096)), f"p-0/{INDEX}")
    assert errors == []
    assert [(e.offset, e.position) for e in entries] == [(105, 0), (140, 4096)]


def test_offset_index_stops_at_the_zero_filled_preallocated_tail() -> None:
    data = offset_index_bytes((5, 0), (40, 4096), zero_entries=1000)
    entries, errors = decode_offset_index(data, INDEX)
    assert [(e.offset, e.position) for e in entries] == [(105, 0), (140, 4096)]
    assert errors == []


def test_a_first_entry_with_relative_offset_zero_is_kept_as_the_dump_tool_does() -> None:
    # An all-zero preallocated index: DumpLogSegments prints entry 0, then stops.
    entries, errors = decode_offset_index(bytes(8 * 1024), INDEX)
    assert [(e.offset, e.position) for e in entries] == [(100, 0)]
    assert errors == []


def test_empty_offset_index_has_no_entries() -> None:
    assert decode_offset_index(b"", INDEX) == ([], [])


def test_offset_index_with_a_partial_entry_reports_index_mismatch_at_it() -> None:
    data = offset_index_bytes((5, 0), (40, 4096)) + b"\x00\x00\x00"
    entries, errors = decode_offset_index(data, INDEX)
    assert [(e.offset, e.position) for e in entries] == [(105, 0), (140, 4096)]
    assert errors == [
        DecodeError(INDEX, 16, CorruptionKind.INDEX_MISMATCH, errors[0].message, 3),
    ]
    assert "3 bytes" in errors[0].message


def test_a_partial_entry_after_the_zero_tail_is_still_reported() -> None:
    data = offset_index_bytes((5, 0), zero_entries=10) + b"\x01"
    entries, errors = decode_offset_index(data, INDEX)
    assert len(entries) == 1
    assert [(e.position, e.length) for e in errors] == [(88, 1)]


# --------------------------------------------------------------------------------------------
# .timeindex


def test_time_index_offsets_are_relative_to_the_base() -> None:
    entries, errors = decode_time_index(
        time_index_bytes((1_700_000_000_000, 3), (1_700_000_000_500, 9)), TIME_INDEX
    )
    assert errors == []
    assert entries == [
        TimeIndexEntry(file=TIME_INDEX, timestamp=1_700_000_000_000, offset=103),
        TimeIndexEntry(file=TIME_INDEX, timestamp=1_700_000_000_500, offset=109),
    ]


def test_time_index_stops_at_the_zero_tail() -> None:
    entries, _ = decode_time_index(time_index_bytes((1_700_000_000_000, 3), zero_entries=50), TIME_INDEX)
    assert [(e.timestamp, e.offset) for e in entries] == [(1_700_000_000_000, 103)]


def test_time_index_stops_at_relative_offset_zero_whatever_the_timestamp() -> None:
    # DumpLogSegments.dumpTimeIndex tests the offset only. The entry after it is not zero: the broker
    # reads it, so the stop is reported at the entry the tool stops at.
    data = time_index_bytes((1_700_000_000_000, 3), (1_700_000_000_500, 0), (1_700_000_000_900, 9))
    entries, errors = decode_time_index(data, TIME_INDEX)
    assert [(e.timestamp, e.offset) for e in entries] == [(1_700_000_000_000, 103)]
    assert [(e.kind, e.position, e.length) for e in errors] == [(CorruptionKind.INDEX_MISMATCH, 12, 12)]
    assert "up to byte 36" in errors[0].message


def test_a_zeroed_entry_with_entries_after_it_is_reported_where_the_dump_tool_stops() -> None:
    # Entry 1 zeroed (a zeroed page), entry 2 real: the broker counts all three (AbstractIndex: the
    # file's length) and looks offsets up among them; DumpLogSegments stops at entry 1.
    data = offset_index_bytes((5, 4123), (0, 0), (61, 6177), zero_entries=100)
    entries, errors = decode_offset_index(data, INDEX)
    assert [(e.offset, e.position) for e in entries] == [(105, 4123)]
    assert [(e.kind, e.position, e.length) for e in errors] == [(CorruptionKind.INDEX_MISMATCH, 8, 8)]
    assert "up to byte 24" in errors[0].message
    # The last non-zero entry itself at relative offset 0 (position 777): reported as itself.
    entries, errors = decode_offset_index(offset_index_bytes((5, 4123), (0, 777), zero_entries=10), INDEX)
    assert [(e.position, e.length) for e in errors] == [(8, 8)]
    assert "but the entry itself is not zero" in errors[0].message


def test_time_index_with_a_partial_entry_reports_index_mismatch() -> None:
    entries, errors = decode_time_index(time_index_bytes((1_700_000_000_000, 3)) + bytes(11), TIME_INDEX)
    assert len(entries) == 1
    assert [(e.kind, e.position, e.length) for e in errors] == [(CorruptionKind.INDEX_MISMATCH, 12, 11)]


# --------------------------------------------------------------------------------------------
# .txnindex


def test_txn_index_entries_hold_absolute_offsets() -> None:
    data = txn_index_bytes((0, 2001, 40, 47, 48), (0, 2002, 10, 60, 10))
    entries, errors = decode_txn_index(data, TXN_INDEX)
    assert errors == []
    assert entries == [
        TxnIndexEntry(
            file=TXN_INDEX,
            version=0,
            producer_id=2001,
            first_offset=40,
            last_offset=47,
            last_stable_offset=48,
        ),
        TxnIndexEntry(
            file=TXN_INDEX,
            version=0,
            producer_id=2002,
            first_offset=10,
            last_offset=60,
            last_stable_offset=10,
        ),
    ]


def test_txn_index_is_not_preallocated_so_zero_entries_are_entries() -> None:
    entries, _ = decode_txn_index(txn_index_bytes((0, 0, 0, 0, 0), (0, 0, 0, 0, 0)), TXN_INDEX)
    assert len(entries) == 2


def test_txn_index_partial_tail_entry_is_an_error_at_its_position() -> None:
    data = txn_index_bytes((0, 2001, 40, 47, 48)) + bytes(20)
    entries, errors = decode_txn_index(data, TXN_INDEX)
    assert len(entries) == 1
    assert [(e.kind, e.position, e.length, e.file) for e in errors] == [
        (CorruptionKind.INDEX_MISMATCH, 34, 20, TXN_INDEX)
    ]


def test_txn_index_entry_of_an_unknown_version_ends_the_index() -> None:
    """The version short 0x0100: its first byte, the one AbortedTxn.version() reads, is 1. The broker's
    iterator throws there and the log does not load (LogLoader catches no KafkaException): the entry
    after it, of version 0, is not read as one the broker holds; the region runs to the file's end."""
    data = txn_index_bytes((0, 2001, 40, 47, 48), (0x0100, 2002, 50, 51, 52), (0, 2003, 60, 61, 62))
    entries, errors = decode_txn_index(data, TXN_INDEX)
    assert [e.producer_id for e in entries] == [2001]
    assert [(e.kind, e.position, e.length) for e in errors] == [(CorruptionKind.INDEX_MISMATCH, 34, 68)]
    assert "version 1" in errors[0].message and "the log does not load" in errors[0].message


def test_txn_index_version_is_the_first_byte_as_the_broker_reads_it() -> None:
    # AbortedTxn.version() is buffer.get(0): a short of 1 (bytes 00 01) is version 0 to the broker,
    # which reads the entry; a first byte 0xff is version -1, not above the current one, read too.
    data = txn_index_bytes((1, 2001, 40, 47, 48), (-256, 2002, 50, 51, 52))
    entries, errors = decode_txn_index(data, TXN_INDEX)
    assert errors == []
    assert [(e.version, e.producer_id) for e in entries] == [(0, 2001), (-1, 2002)]


def test_txn_index_does_not_need_an_offset_in_its_name() -> None:
    assert decode_txn_index(txn_index_bytes((0, 1, 2, 3, 4)), "aborted.txnindex")[1] == []


# --------------------------------------------------------------------------------------------
# Streaming over paths


def test_streaming_a_ten_mebibyte_preallocated_index_stops_early(tmp_path: Path) -> None:
    path = tmp_path / INDEX
    path.write_bytes(offset_index_bytes((5, 0), (40, 4096)) + bytes(10 * 1024 * 1024 - 16))
    assert [(e.offset, e.position) for e in rows_only(read_offset_index(path))] == [(105, 0), (140, 4096)]


@settings(max_examples=60)
@given(data=st.binary(max_size=400), chunk_entries=st.integers(1, 5))
def test_streaming_equals_decoding_for_any_bytes_and_chunk_size(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk_entries: int
) -> None:
    directory = tmp_path_factory.mktemp("stream")
    saved = index_files._ENTRIES_PER_CHUNK
    index_files._ENTRIES_PER_CHUNK = chunk_entries
    try:
        for name, decode, read in (
            (INDEX, decode_offset_index, read_offset_index),
            (TIME_INDEX, decode_time_index, read_time_index),
            (TXN_INDEX, decode_txn_index, read_txn_index),
        ):
            path = directory / name
            path.write_bytes(data)
            rows, errors = decode(data, str(path))
            assert list(read(path)) == [*rows, *errors]
            assert all(e.kind is CorruptionKind.INDEX_MISMATCH for e in errors)
    finally:
        index_files._ENTRIES_PER_CHUNK = saved


def test_a_missing_index_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(NotAKafkaArtifact, match=INDEX):
        read_offset_index(tmp_path / INDEX)


def test_an_index_name_without_a_base_offset_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(NotAKafkaArtifact, match=re.escape("offsets.index")):
        decode_offset_index(b"", "offsets.index")
    with pytest.raises(NotAKafkaArtifact, match=re.escape("offsets.timeindex")):
        read_time_index(tmp_path / "offsets.timeindex")


# --------------------------------------------------------------------------------------------
# Cross-check against DumpLogSegments (Kafka 4.3.1)


def write_synthetic_segment(directory: Path) -> dict[str, Path]:
    """A segment at base 100 with real batches (tests.builders), and hand-made index files for it."""
    directory.mkdir()
    batches = [
        build_v2(V2Batch(base_offset=100, records=[(None, b"a")] * 3, base_timestamp=1_700_000_000_000)),
        build_v2(V2Batch(base_offset=103, records=[(None, b"b")] * 2, base_timestamp=1_700_000_000_100)),
        build_v2(V2Batch(base_offset=105, records=[(None, b"c")] * 4, base_timestamp=1_700_000_000_200)),
    ]
    positions = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    (directory / f"{BASE}.log").write_bytes(segment(*batches))
    paths = {
        # Entries at the last offsets of batches 2 and 3, then the preallocated zeros.
        "index": (
            directory / INDEX,
            offset_index_bytes((4, positions[1]), (8, positions[2]), zero_entries=64),
        ),
        "timeindex": (
            directory / TIME_INDEX,
            time_index_bytes(
                (1_700_000_000_002, 2), (1_700_000_000_101, 4), (1_700_000_000_203, 8), zero_entries=64
            ),
        ),
        "txnindex": (directory / TXN_INDEX, txn_index_bytes((0, 2001, 40, 47, 48), (0, 2002, 10, 104, 100))),
    }
    for path, data in paths.values():
        path.write_bytes(data)
    return {kind: path for kind, (path, _) in paths.items()}


def tool_view(item: IndexEntry | TimeIndexEntry | TxnIndexEntry) -> dict[str, str]:
    if isinstance(item, IndexEntry):
        return {"offset": str(item.offset), "position": str(item.position)}
    if isinstance(item, TimeIndexEntry):
        return {"timestamp": str(item.timestamp), "offset": str(item.offset)}
    return {
        "version": str(item.version),
        "producerId": str(item.producer_id),
        "firstOffset": str(item.first_offset),
        "lastOffset": str(item.last_offset),
        "lastStableOffset": str(item.last_stable_offset),
    }


def ours(path: Path) -> list[dict[str, str]]:
    reader = {".index": read_offset_index, ".timeindex": read_time_index, ".txnindex": read_txn_index}[
        path.suffix
    ]
    return [tool_view(item) for item in reader(path) if not isinstance(item, DecodeError)]


@pytest.mark.integration
def test_decoded_index_files_match_dump_log_segments_entry_by_entry(tmp_path: Path) -> None:
    synthetic = write_synthetic_segment(tmp_path / "synthetic-0")
    # An active segment's all-zero index and time index, and a time index whose second entry has
    # relative offset 0 with a real timestamp: the tool stops there too.
    zeros = tmp_path / "zeros-0"
    zeros.mkdir()
    (zeros / f"{BASE}.log").write_bytes((tmp_path / "synthetic-0" / f"{BASE}.log").read_bytes())
    (zeros / INDEX).write_bytes(bytes(8 * 128))
    (zeros / TIME_INDEX).write_bytes(time_index_bytes((1_700_000_000_002, 2), (1_700_000_000_101, 0), (1, 4)))
    real = copies_for_the_tool([*REAL_INDEXES, *REAL_TIME_INDEXES], tmp_path / "real")
    paths = [*real, *synthetic.values(), zeros / INDEX, zeros / TIME_INDEX]
    expected = {path: ours(path) for path in paths}
    sections, _ = dump_log_segments(paths)
    for path in paths:
        assert sections[str(path)] == expected[path], path
    assert len(real) == len(REAL_INDEXES) + len(REAL_TIME_INDEXES) == 10
    assert len(sections[str(synthetic["index"])]) == 2
    assert len(sections[str(synthetic["timeindex"])]) == 3
    assert len(sections[str(zeros / TIME_INDEX)]) == 1


@pytest.mark.integration
def test_dump_log_segments_ignores_the_partial_entry_we_report_and_trims_it_from_the_file(
    tmp_path: Path,
) -> None:
    synthetic = write_synthetic_segment(tmp_path / "partial-0")
    index = synthetic["index"]
    index.write_bytes(index.read_bytes()[:16] + b"\x00\x00\x00")
    errors = [e.position for e in read_offset_index(index) if isinstance(e, DecodeError)]
    expected = ours(index)
    sections, _ = dump_log_segments([index])
    assert errors == [16]
    assert sections[str(index)] == expected
    # OffsetIndex.close() -> trimToValidSize(): the tool rewrites the file it dumps. Never run it on evidence.
    assert index.stat().st_size == 16


@pytest.mark.parametrize(
    ("entries", "position", "why"),
    [
        # (timestamp, relative offset) entries; base offset 100
        (((1000, 5), (900, 9)), 12, "timestamp 900 not above the previous entry's, 1000"),
        (((1000, 5), (1000, 9)), 12, "timestamp 1000 not above the previous entry's, 1000"),
        (((1000, 5), (2000, 9), (3000, 7)), 24, "offset 107 below the previous entry's, 109"),
        (((1000, -5), (2000, 9)), 0, "offset 95 below the segment's base offset 100"),
    ],
)
def test_a_time_index_out_of_order_is_one_mismatch_at_its_first_bad_entry(
    tmp_path: Path, entries: tuple[tuple[int, int], ...], position: int, why: str
) -> None:
    """The broker appends a time index entry only for a timestamp above the last one's, at an offset not
    below it (`TimeIndex.maybeAppend`): a file of garbage read as entries breaks that order, and was taken
    whole (a review: a `.timeindex` of random bytes gave no quarantine row). The first entry out of order is
    the error, after the entries, streamed as decoded; a file in order has none."""
    data = time_index_bytes(*entries, (9000, 40))
    path = tmp_path / TIME_INDEX
    path.write_bytes(data)
    rows, errors = decode_time_index(data, str(path))
    assert [(e.position, e.kind, e.length) for e in errors] == [(position, CorruptionKind.INDEX_MISMATCH, 12)]
    assert why in errors[0].message
    assert list(read_time_index(path)) == [*rows, *errors]
    assert len(rows) == len(entries) + 1
    in_order = time_index_bytes((1000, 5), (2000, 9), (3000, 9))
    assert decode_time_index(in_order, str(path))[1] == []


def test_a_preallocated_time_index_is_not_judged_by_its_order(tmp_path: Path) -> None:
    """An active segment's `.timeindex` keeps, behind its entries, those a follower's truncation left
    (`truncateTo` moves the position only; `resize` to the same size changes nothing): entries written
    since may be later than them. With a zero-filled tail the file does not say which entries count, so
    its order is not judged (a review: a healthy follower's file was an INDEX_MISMATCH)."""
    data = time_index_bytes((1000, 10), (1100, 20), (5000, 25), (1300, 40), (1400, 50), zero_entries=4)
    path = tmp_path / TIME_INDEX
    path.write_bytes(data)
    rows, errors = decode_time_index(data, str(path))
    assert errors == [] and len(rows) == 5
    assert list(read_time_index(path)) == rows


def test_a_time_index_of_random_bytes_is_quarantined_by_its_decode_task(tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from jobs import decode_tasks as dt
    from schemas.tables import QUARANTINE

    path = tmp_path / "orders-0" / TIME_INDEX
    path.parent.mkdir()
    path.write_bytes(bytes(range(42, 6, -1)))  # three entries of bytes 42 down to 7: timestamps falling
    unit = dt.WorkUnit(dt.TIMEINDEX, "d", "1", "orders", 0, str(path), 36)
    stream = dt.decode_unit_safely(unit, QUARANTINE.name, to_arrow_schema(QUARANTINE.schema), records=False)
    rows = [row for batch in stream for row in batch.to_pylist()]
    assert [(r["file"], r["position"], r["kind"]) for r in rows] == [(str(path), 12, "INDEX_MISMATCH")]
