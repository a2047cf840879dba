"""What a decode task tells the ingest besides its rows: whether the quarantine pass must decode the unit."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from kafka_log_decoder import native
from kafka_log_decoder.constants import ATTRIBUTES_OFFSET, MAGIC_OFFSET
from schemas.tables import BATCHES, QUARANTINE, RECORDS
from tests.builders import V2Batch, build_v2, segment

SCHEMAS = {spec.name: to_arrow_schema(spec.schema) for spec in (BATCHES, RECORDS, QUARANTINE)}


def batches(n: int) -> list[bytes]:
    return [
        build_v2(V2Batch(base_offset=2 * b, records=[(b"k", b"v%d" % b), (None, b"w")], producer_id=7))
        for b in range(n)
    ]


def with_valid_crc(batch: bytearray) -> bytes:
    """The batch with its CRC recomputed: whatever was changed, only the record walk can tell."""
    crc = native.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])
    struct.pack_into(">I", batch, MAGIC_OFFSET + 1, crc)
    return bytes(batch)


def broken_framing() -> bytes:
    batch = bytearray(batches(1)[0])
    batch[-1] ^= 0x7F  # the last record's last byte: its header count no longer fits
    return with_valid_crc(batch)


def clean() -> bytes:
    return segment(*batches(3))


def flipped_crc() -> bytes:
    data = bytearray(clean())
    data[len(data) - 5] ^= 0xFF
    return bytes(data)


def garbage_between_batches() -> bytes:
    first, *rest = batches(3)
    return segment(first, b"\xee" * 100, *rest)


def truncated_tail() -> bytes:
    return clean() + batches(1)[0][:30]


def unit_of(tmp_path: Path, data: bytes) -> dt.WorkUnit:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return dt.WorkUnit(dt.LOG, "d", "1", "t", 0, str(path), len(data))


def decode(unit: dt.WorkUnit, table: str, *, records: bool) -> tuple[int, bool]:
    """(rows, whether the unit must be decoded again by the quarantine pass)."""
    stream = dt.decode_unit_safely(unit, table, SCHEMAS[table], records=records)
    rows = 0
    while True:
        try:
            rows += next(stream).num_rows
        except StopIteration as done:
            return rows, done.value


def main_table(records: bool) -> str:
    return RECORDS.name if records else BATCHES.name


@pytest.mark.parametrize("records", [False, True], ids=["headers", "records"])
def test_a_clean_segment_needs_no_quarantine_pass(tmp_path: Path, records: bool) -> None:
    rows, corrupt = decode(unit_of(tmp_path, clean()), main_table(records), records=records)
    assert rows == (6 if records else 3)
    assert corrupt is False


CORRUPT = {
    "crc": flipped_crc,
    "garbage": garbage_between_batches,
    "truncated": truncated_tail,
}


@pytest.mark.parametrize("records", [False, True], ids=["headers", "records"])
@pytest.mark.parametrize("make", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_bytes_send_the_unit_to_the_quarantine_pass(
    tmp_path: Path, make: Callable[[], bytes], records: bool
) -> None:
    unit = unit_of(tmp_path, make())
    _, corrupt = decode(unit, main_table(records), records=records)
    quarantined, _ = decode(unit, QUARANTINE.name, records=records)
    assert corrupt is True and quarantined > 0


def test_record_framing_errors_are_found_by_the_records_walk_only(tmp_path: Path) -> None:
    unit = unit_of(tmp_path, segment(*batches(2), broken_framing()))
    assert decode(unit, BATCHES.name, records=False)[1] is False
    assert decode(unit, QUARANTINE.name, records=False)[0] == 0
    assert decode(unit, RECORDS.name, records=True)[1] is True
    assert decode(unit, QUARANTINE.name, records=True)[0] == 1


def test_only_the_pass_that_walks_like_the_quarantine_pass_reports() -> None:
    assert dt.walk_finds_quarantine("batches", records=False)
    assert not dt.walk_finds_quarantine("batches", records=True)
    assert dt.walk_finds_quarantine("records", records=True)
    assert not dt.walk_finds_quarantine("quarantine", records=False)


def test_a_stale_index_entry_sends_the_range_to_the_quarantine_pass(tmp_path: Path) -> None:
    whole = unit_of(tmp_path, clean())
    second = len(batches(1)[0])
    # The range after an index entry that points 3 bytes into the second batch.
    stale = dt.IndexBoundary(whole.file.replace(".log", ".index"), 8, 2, second + 3)
    ranged = replace(whole, start=second + 3, boundary=stale, fallbacks=(0,))
    assert decode(ranged, BATCHES.name, records=False)[1] is True
    assert decode(ranged, QUARANTINE.name, records=False)[0] == 1


def test_a_decoder_failure_sends_the_unit_to_the_quarantine_pass(tmp_path: Path) -> None:
    unit = unit_of(tmp_path, clean())
    # A schema that cannot hold the rows stands for a bug in the decoder.
    wrong = pa.schema([pa.field("x", pa.int8())])
    stream = dt.decode_unit_safely(unit, BATCHES.name, wrong, records=False)
    with pytest.raises(StopIteration) as done:
        next(stream)
    assert done.value.value is True


def test_a_task_merges_small_batches_without_changing_rows_order_or_verdicts(tmp_path: Path) -> None:
    """Units whose walks yield small batches (here one window per batch) leave the task as a few
    merged batches: the same rows in the same order, and each unit's quarantine verdict unchanged."""
    units = [unit_of(tmp_path / str(i), data) for i, data in enumerate((clean(), flipped_crc(), clean()))]

    def walk(unit: dt.WorkUnit) -> dt.Decoded:
        return dt.decode_unit_safely(unit, BATCHES.name, SCHEMAS[BATCHES.name], records=False)

    direct: list[pa.RecordBatch] = []
    verdicts = []
    for unit in units:
        stream = walk(unit)
        while True:
            try:
                direct.append(next(stream))
            except StopIteration as done:
                verdicts.append(done.value)
                break
    merged = dt.Coalesced(min_rows=4)
    out: list[pa.RecordBatch] = []
    seen = []

    def task() -> dt.Decoded:
        for unit in units:
            seen.append((yield from merged.take(walk(unit))))
        yield from merged.flush()
        return False

    out.extend(task())
    assert verdicts == [False, True, False] and seen == verdicts
    assert pa.Table.from_batches(out).equals(pa.Table.from_batches(direct))
    # One batch per unit; merged until 4 rows are held, the rest flushed at the task's end.
    assert [b.num_rows for b in direct] == [3, 3, 3]
    assert [b.num_rows for b in out] == [6, 3]
    assert list(merged.flush()) == []
