"""What a decode task tells the ingest besides its rows: whether the quarantine pass must decode the unit."""

from __future__ import annotations

import shutil
import struct
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from jobs.ingest import split_segment
from kafka_log_decoder import native
from kafka_log_decoder.constants import ATTRIBUTES_OFFSET, MAGIC_OFFSET, RECORDS_OFFSET
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment
from schemas.tables import (
    BATCHES,
    QUARANTINE,
    RECORDS,
    REMOTE_LOG_METADATA,
    WALK_BEFORE_OVERLAP,
    WALK_FIRST,
    WALK_LAST,
    WALK_OVERLAP,
)
from tests.builders import V2Batch, build_v2, segment
from tests.indexes import metadata_segment_with_index

REAL_SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "broker-4.3.1"

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


def test_a_large_value_is_gathered_without_an_index_per_byte(tmp_path: Path) -> None:
    """One record of 16 MiB of zeros in a kafka-python zstd batch (a few KB on disk): its Arrow value is
    copied once from the decompressed payload; an index per byte would take 16 bytes per value byte."""
    value = bytes(16 << 20)
    unit = unit_of(tmp_path, build_v2(V2Batch(records=[(b"k", value)], codec="zstd")))
    arrow_before = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        (batch,) = dt.decode_unit(unit, RECORDS.name, SCHEMAS[RECORDS.name], records=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert batch.column("value")[0].as_py() == value
    assert peak < 2 * len(value)  # the payload itself is the one copy tracemalloc sees
    # Arrow's own allocations, which tracemalloc does not see: the batch holds the value once.
    assert len(value) <= pa.total_allocated_bytes() - arrow_before < 2 * len(value)


def test_only_the_pass_that_walks_like_the_quarantine_pass_reports() -> None:
    assert dt.walk_finds_quarantine("batches", records=False)
    assert not dt.walk_finds_quarantine("batches", records=True)
    assert dt.walk_finds_quarantine("records", records=True)
    assert not dt.walk_finds_quarantine("quarantine", records=False)


def test_a_stale_index_entry_sends_the_range_to_the_quarantine_pass(tmp_path: Path) -> None:
    whole = unit_of(tmp_path, clean())
    second = len(batches(1)[0])
    # The range after an index entry that points 3 bytes into the second batch.
    index = whole.file.replace(".log", ".index")
    Path(index).write_bytes(struct.pack(">ii", 2, second + 3))
    stale = dt.IndexBoundary(index, 0, 2, second + 3)
    ranged = replace(whole, start=second + 3, boundary=stale, fallbacks=(0,), index_file=index)
    assert decode(ranged, BATCHES.name, records=False)[1] is True
    assert decode(ranged, QUARANTINE.name, records=False)[0] == 1


def test_a_decoder_failure_is_reported_for_the_quarantine_pass(tmp_path: Path) -> None:
    unit = unit_of(tmp_path, clean())
    # A schema that cannot hold the rows stands for a bug in the decoder.
    wrong = pa.schema([pa.field("x", pa.int8())])
    stream = dt.decode_unit_safely(unit, BATCHES.name, wrong, records=False)
    with pytest.raises(StopIteration) as done:
        next(stream)
    assert isinstance(done.value.value, dt.PassFailed) and done.value.value.table == BATCHES.name


def test_a_task_merges_small_batches_without_changing_rows_order_or_verdicts(tmp_path: Path) -> None:
    """Units whose walks yield small batches (here one window per batch) leave the task as a few
    merged batches: the same rows in the same order, and each unit's quarantine verdict unchanged."""
    units = [unit_of(tmp_path / str(i), data) for i, data in enumerate((clean(), flipped_crc(), clean()))]

    def walk(unit: dt.WorkUnit) -> Any:
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


# ---------------------------------------------------------------------------------------------
# walk_mark: what the unit's walk saw of each batch's offsets (schemas.tables WALK_*)

FIRST, LAST, OVERLAP, BEFORE = WALK_FIRST, WALK_LAST, WALK_OVERLAP, WALK_BEFORE_OVERLAP


def two_record_batches(*bases: int) -> list[bytes]:
    """Batches of two records (offsets base, base + 1) at the given base offsets, in this file order."""
    return [build_v2(V2Batch(base_offset=b, records=[(b"k", b"a"), (b"k", b"b")])) for b in bases]


def marks_of(unit: dt.WorkUnit) -> list[tuple[int, int | None]]:
    """(base offset, walk_mark) of the unit's batches rows, in file order."""
    stream = dt.decode_unit_safely(unit, BATCHES.name, SCHEMAS[BATCHES.name], records=False)
    table = pa.Table.from_batches(list(stream), schema=SCHEMAS[BATCHES.name]).sort_by("position")
    return list(zip(table["base_offset"].to_pylist(), table["walk_mark"].to_pylist(), strict=True))


def test_a_clean_walk_marks_only_its_first_and_last_batch(tmp_path: Path) -> None:
    unit = unit_of(tmp_path, segment(*two_record_batches(0, 2, 4, 6)))
    assert marks_of(unit) == [(0, FIRST), (2, 0), (4, 0), (6, LAST)]
    alone = unit_of(tmp_path / "alone", segment(*two_record_batches(10)))
    assert marks_of(alone) == [(10, FIRST | LAST)]


def test_a_batch_starting_at_or_before_the_previous_last_offset_is_marked_with_its_predecessor(
    tmp_path: Path,
) -> None:
    # Offsets 0-1, 2-3, 3-4 (starts at 3, the previous last offset), 8-9, 1-2 (goes back), 20-21.
    unit = unit_of(tmp_path, segment(*two_record_batches(0, 2, 3, 8, 1, 20)))
    assert marks_of(unit) == [
        (0, FIRST),
        (2, BEFORE),
        (3, OVERLAP),
        (8, BEFORE),
        (1, OVERLAP),
        (20, LAST),
    ]


def test_a_batch_with_a_bad_crc_is_left_out_of_the_walk(tmp_path: Path) -> None:
    first, bad, *rest = two_record_batches(0, 2, 4)
    broken = bytearray(bad)
    broken[-1] ^= 0xFF  # a record byte: the CRC no longer matches, the header still reads
    unit = unit_of(tmp_path, segment(first, bytes(broken), *rest))
    assert marks_of(unit) == [(0, FIRST), (2, 0), (4, LAST)]
    # Its offsets are not compared either: a copy of the first batch's offsets after it is no overlap
    # of the bad batch, but of the first.
    again = unit_of(tmp_path / "again", segment(first, bytes(broken), *two_record_batches(1)))
    assert marks_of(again) == [(0, FIRST | BEFORE), (2, 0), (1, OVERLAP | LAST)]


def test_each_unit_of_a_split_segment_is_a_walk_of_its_own(tmp_path: Path) -> None:
    data = two_record_batches(0, 2, 4, 3, 8, 10)
    whole = unit_of(tmp_path, segment(*data))
    cut = len(data[0]) * 3  # the fourth batch (3: an overlap of 4-5) starts the second unit
    head = replace(whole, end=cut)
    tail = replace(whole, start=cut, fallbacks=(0,))
    assert marks_of(head) == [(0, FIRST), (2, 0), (4, LAST)]
    # The walk of the second unit cannot see the overlap: the audit checks a unit's first batch.
    assert marks_of(tail) == [(3, FIRST), (8, 0), (10, LAST)]
    assert marks_of(whole) == [(0, FIRST), (2, 0), (4, BEFORE), (3, OVERLAP), (8, 0), (10, LAST)]


@pytest.mark.parametrize("rows_per_batch", [1, 2, 3, 5])
def test_marks_do_not_depend_on_how_the_walk_cuts_its_rows_into_arrow_batches(rows_per_batch: int) -> None:
    bases = [0, 2, 2, 6, 4, 9, 12, 12, 12, 30]
    valid = [True, True, True, False, True, True, True, False, True, True]
    schema = SCHEMAS[BATCHES.name]
    given = {
        "position": pa.array(range(len(bases)), pa.int64()),
        "base_offset": pa.array(bases, pa.int64()),
        "last_offset": pa.array([b + 1 for b in bases], pa.int64()),
        "crc_valid": pa.array(valid),
    }
    table = pa.table(
        {name: given.get(name, pa.nulls(len(bases), schema.field(name).type)) for name in schema.names},
        schema=schema,
    )
    marks = dt.WalkMarks()
    out = [b for batch in table.to_batches(max_chunksize=rows_per_batch) for b in marks.add(batch)]
    out += list(marks.finish())
    # A batch holding the walk's latest valid row is held back: rows may leave in another order.
    got = pa.Table.from_batches(out, schema=schema).sort_by("position")["walk_mark"].to_pylist()
    # The invalid rows (3 and 7) are skipped: 4-5 follows 2-3, and 12-13 overlaps the 12-13 before 7.
    assert got == [FIRST, BEFORE, OVERLAP, 0, 0, 0, BEFORE, 0, OVERLAP, LAST]


def test_remote_log_metadata_rows_are_the_events_of_the_metadata_topic_only(tmp_path: Path) -> None:
    """A `__remote_log_metadata` segment's records (values a real broker wrote, in batches of our
    builder) give one row per record: the event, or the reason its value is none, naming the record's
    offset and the byte of its value. A split unit gives the rows of the batches starting in its
    range; a segment of another topic gives none."""
    from tests.unit.test_remote_log_metadata import SEGMENT, UPDATE

    schema = to_arrow_schema(REMOTE_LOG_METADATA.schema)
    parts = [
        build_v2(V2Batch(base_offset=0, records=[(None, SEGMENT)])),
        build_v2(V2Batch(base_offset=1, records=[(None, UPDATE), (None, b"\x01\x07\x00")])),
    ]
    data = segment(*parts)
    path = tmp_path / "__remote_log_metadata-0" / "00000000000000000000.log"
    path.parent.mkdir()
    path.write_bytes(data)
    unit = dt.WorkUnit(dt.LOG, "d", "1", "__remote_log_metadata", 0, str(path), len(data))

    def rows(u: dt.WorkUnit) -> list[dict[str, object]]:
        return [
            row
            for batch in dt.decode_unit(u, REMOTE_LOG_METADATA.name, schema, records=False)
            for row in batch.to_pylist()
        ]

    got = rows(unit)
    assert [(r["offset"], r["batch_position"], r["event"], r["state"]) for r in got] == [
        (0, 0, "segment", "COPY_SEGMENT_STARTED"),
        (1, len(parts[0]), "segment_update", "COPY_SEGMENT_FINISHED"),
        (2, len(parts[0]), None, None),
    ]
    assert (
        got[0]["segment_topic"],
        got[0]["segment_partition"],
        got[0]["start_offset"],
        got[0]["end_offset"],
    ) == (
        "tiered",
        0,
        0,
        199,
    )
    assert got[1]["segment_id"] == got[0]["segment_id"] == "1xZtUGyfTtKVcNimRwysMg"
    assert got[2]["error"] == (
        f"{path}: record at offset 2 (batch at byte {len(parts[0])}): byte 1 of the value: "
        "apiKey 7 is no remote log metadata event (0-2)"
    )
    assert [r["offset"] for r in rows(replace(unit, start=len(parts[0])))] == [1, 2]
    assert [r["offset"] for r in rows(replace(unit, end=len(parts[0])))] == [0]
    assert not dt.feeds(replace(unit, topic="t"), REMOTE_LOG_METADATA.name)
    assert dt.feeds(unit, REMOTE_LOG_METADATA.name) and dt.feeds(unit, BATCHES.name)


@pytest.mark.parametrize("corrupt", [227, 648], ids=["next-batch-inside-the-range", "next-batch-past-it"])
def test_a_length_past_the_end_of_the_file_gives_the_whole_files_rows_in_split_ranges(
    tmp_path: Path, corrupt: int
) -> None:
    """A broker-written segment with one batch's length corrupted to run past the end of the file, cut
    into two ranges at byte 875: the ranges' rows and errors together are the whole file's, whether the
    next valid batch after the corrupt one is inside the first range or is the second range's first."""
    data = bytearray((REAL_SAMPLE / "codec-gzip-0" / "00000000000000000000.log").read_bytes())
    data[corrupt + 8] ^= 0x10
    whole = unit_of(tmp_path, bytes(data))
    first, second = replace(whole, end=875), replace(whole, start=875)

    def items(unit: dt.WorkUnit) -> list[tuple[str, int, int | None]]:
        out: list[tuple[str, int, int | None]] = []
        for run in dt.segment_runs(unit, unit.start, records=False):
            rows = run.items(with_records=False) if not isinstance(run, list) else run
            out.extend((type(r).__name__, r.position, getattr(r, "length", None)) for r in rows)
        return out

    assert items(first) + items(second) == items(whole)
    assert ("DecodeError", corrupt, {227: 469, 648: 875}[corrupt] - corrupt) in items(whole)


@pytest.mark.parametrize("damage", ["crc", "length"])
def test_an_index_entry_at_a_corrupt_batch_is_right_and_the_range_reports_what_the_whole_file_does(
    tmp_path: Path, damage: str
) -> None:
    """The entry (offset 28, position 875) of a broker-written segment points at the batch holding
    offsets 28-35; that batch is corrupt (a record byte flipped, or its length field). The entry is not
    blamed (no INDEX_MISMATCH), and the range that starts at it reports the corruption as the whole file
    does, decoding from the file's start: a corrupt batch is no split point."""
    data = bytearray((REAL_SAMPLE / "codec-gzip-0" / "00000000000000000000.log").read_bytes())
    data[875 + (100 if damage == "crc" else 8)] ^= 0x10
    index = tmp_path / "t-0" / "00000000000000000000.index"
    index.parent.mkdir(parents=True)
    index.write_bytes(struct.pack(">iiii", 15, 227, 28, 875))
    whole = replace(unit_of(tmp_path, bytes(data)), index_file=str(index))
    entry = dt.IndexBoundary(str(index), 8, 28, 875)
    ranged = replace(whole, start=875, boundary=entry, fallbacks=(0,))
    assert dt.resolve_start(ranged) == 0
    first = replace(whole, end=875)

    def regions(unit: dt.WorkUnit) -> int:
        return decode(unit, QUARANTINE.name, records=False)[0]

    assert regions(first) + regions(ranged) == regions(whole) == 1


def rows_of(units: list[dt.WorkUnit], table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    out = []
    for unit in units:
        for batch in dt.decode_unit_safely(unit, table, SCHEMAS[table], records=False):
            out += [tuple(r[c] for c in columns) for r in batch.to_pylist()]
    return out


def test_a_split_point_inside_an_unreadable_region_gives_the_whole_files_rows(tmp_path: Path) -> None:
    """A broker-written segment whose batch at 648 has its length field set to -5 and whose next batch
    (875, offsets 28-35, an index entry's) has a record byte flipped: the whole file reads 648-1116 as
    one unreadable region, since no valid batch starts at 875. A range cut at that entry must not also
    report the batch at 875 (its bytes counted twice): a split point needs a batch that is whole and
    CRC-valid, else the range decodes from an earlier one."""
    data = bytearray((REAL_SAMPLE / "codec-gzip-0" / "00000000000000000000.log").read_bytes())
    struct.pack_into(">i", data, 648 + 8, -5)
    data[875 + 100] ^= 0x10
    whole = unit_of(tmp_path, bytes(data))
    entry = dt.IndexBoundary(whole.file[: -len(".log")] + ".index", 8, 28, 875)
    ranged = replace(whole, start=875, boundary=entry, fallbacks=(0,))
    split = [replace(whole, end=875), ranged]
    assert dt.resolve_start(ranged) == 0
    quarantine = ("position", "length", "kind")
    assert rows_of([whole], QUARANTINE.name, quarantine) == [(648, 1116 - 648, "UNREADABLE_BATCH")]
    assert rows_of(split, QUARANTINE.name, quarantine) == rows_of([whole], QUARANTINE.name, quarantine)
    batch_columns = ("position", "base_offset", "crc_valid")
    assert rows_of(split, BATCHES.name, batch_columns) == rows_of([whole], BATCHES.name, batch_columns)


# ---------------------------------------------------------------------------------------------
# Every `.index` entry checked against the batches of the walk


def index_mismatches(units: list[dt.WorkUnit]) -> list[tuple[str, int, int | None]]:
    rows = []
    for unit in units:
        stream = dt.decode_unit_safely(unit, QUARANTINE.name, SCHEMAS[QUARANTINE.name], records=False)
        for batch in stream:
            rows += [r for r in batch.to_pylist() if r["kind"] in ("INDEX_MISMATCH", "UNREADABLE_FILE")]
    return sorted((r["file"], r["position"], r["length"]) for r in rows)


def test_every_index_entry_is_checked_once_whatever_the_split(tmp_path: Path) -> None:
    """A real broker's segment (3.9 MB of `__cluster_metadata`) with an index as the broker writes it,
    then edited: an entry 5 bytes into its batch, three that name an offset past their batch's, one
    past the end of the file, and 3 stray bytes after the last entry. Each wrong entry is one
    INDEX_MISMATCH row at its byte position in the index, the same rows whether the segment is decoded
    whole or cut into ranges (where a wrong entry can also be a split point); the others, none."""
    log, index, entries = metadata_segment_with_index(tmp_path)
    assert len(entries) > 800
    whole = dt.WorkUnit(dt.LOG, "d", None, "meta", 0, str(log), log.stat().st_size, index_file=str(index))
    assert index_mismatches([whole]) == []  # the broker's entries all check out

    edited = list(entries)
    edited[100] = (entries[100][0], entries[100][1] + 5)
    for i in (400, 401, 402):
        edited[i] = (entries[i][0] - 1, entries[i][1])
    edited[-1] = (entries[-1][0], whole.size + 1000)
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in edited) + b"\x01\x02\x03")
    expected = sorted(
        [(str(index), 8 * i, 8) for i in (100, 400, 401, 402, len(entries) - 1)]
        + [(str(index), 8 * len(entries), 3)]
    )
    assert index_mismatches([whole]) == expected
    for split_bytes in (64 << 10, 300 << 10, 1 << 20):
        units = split_segment(whole, split_bytes)
        assert len(units) > 3
        assert index_mismatches(units) == expected, split_bytes
        # The walk that finds the quarantine rows sends exactly the ranges holding a wrong entry there.
        owners = {
            i
            for i, u in enumerate(units)
            for e in (100, 400, len(entries) - 1)
            if u.start <= edited[e][1] and (u.end is None or edited[e][1] < u.end)
        } | {0}
        assert {i for i, u in enumerate(units) if decode(u, BATCHES.name, records=False)[1]} == owners


def test_index_entries_of_batches_appended_after_listing_are_no_mismatch(tmp_path: Path) -> None:
    """A live broker's active segment listed at size S and read later: the walk stops at S, and the
    index entries the broker added since for the batches past S pointed at nothing the walk saw: one
    INDEX_MISMATCH per entry. They are left out where the file has grown; where it has not (the log
    was cut below them), an entry past the end is still one."""
    log, index, entries = metadata_segment_with_index(tmp_path)
    listed = entries[len(entries) // 2][1]  # the size when listed: a batch boundary
    unit = dt.WorkUnit(dt.LOG, "d", None, "meta", 0, str(log), listed, index_file=str(index))
    assert index_mismatches([unit]) == []
    with open(log, "r+b") as cut:
        cut.truncate(listed)
    later = [i for i, e in enumerate(entries) if e[1] >= listed]
    assert index_mismatches([unit]) == [(str(index), 8 * i, 8) for i in later]


def test_an_index_of_zeros_has_no_entry_to_check(tmp_path: Path) -> None:
    """The active segment's index, preallocated with zeros (10 MiB by default), before and after its
    first entry: the zeros are no entries (the broker never indexes position 0)."""
    unit = unit_of(tmp_path, clean())
    index = Path(unit.file).with_suffix(".index")
    index.write_bytes(bytes(1 << 16))
    unit = replace(unit, index_file=str(index))
    assert index_mismatches([unit]) == []
    second = len(batches(1)[0])
    index.write_bytes(struct.pack(">ii", 3, second) + bytes(1 << 16))
    assert index_mismatches([unit]) == []
    index.write_bytes(struct.pack(">ii", 6, second) + bytes(1 << 16))  # past the log's last offset, 5
    assert index_mismatches([unit]) == [(str(index), 0, 8)]


def test_a_failed_batch_whose_length_runs_over_the_next_batches_does_not_hide_them(tmp_path: Path) -> None:
    """A real broker's segment (batches of 50 records, ~100 KB each) whose third batch's length claims
    30,000 bytes more than it has: its CRC fails, and the next batch, intact, starts inside the bytes
    it claims. That batch is found (the failed one's bytes up to it are an unreadable region), its
    index entry is not blamed, and a split decode gives the rows of the whole file."""
    source = REAL_SAMPLE / "idempotent-segments-0"
    log = tmp_path / "idempotent-segments-0" / "00000000000000000500.log"
    log.parent.mkdir()
    data = bytearray((source / log.name).read_bytes())
    shutil.copyfile(source / "00000000000000000500.index", log.with_suffix(".index"))
    heads = [h for h in read_log_segment(source / log.name) if isinstance(h, BatchHeader)]
    third = heads[2]
    struct.pack_into(">i", data, third.position + 8, third.size_bytes - 12 + 30_000)
    log.write_bytes(bytes(data))
    items = list(read_log_segment(log))
    assert [(h.position, h.base_offset) for h in items if isinstance(h, BatchHeader)] == [
        (h.position, h.base_offset) for h in heads if h is not third
    ]
    # Its bytes up to the next batch are an unreadable region: its length is what is corrupt.
    assert [(e.kind.value, e.position, e.length) for e in items if isinstance(e, DecodeError)] == [
        ("UNREADABLE_BATCH", third.position, third.size_bytes)
    ]
    whole = dt.WorkUnit(
        dt.LOG, "d", None, "s", 0, str(log), len(data), index_file=str(log.with_suffix(".index"))
    )

    def rows(units: list[dt.WorkUnit], table: str) -> list[tuple[Any, ...]]:
        out = []
        for unit in units:
            for batch in dt.decode_unit_safely(unit, table, SCHEMAS[table], records=False):
                out += [(r["position"], r.get("base_offset"), r.get("kind")) for r in batch.to_pylist()]
        return sorted(out)

    assert rows([whole], QUARANTINE.name) == [(third.position, None, "UNREADABLE_BATCH")]
    units = split_segment(whole, 64 << 10)
    assert len(units) > 3
    for table in (BATCHES.name, QUARANTINE.name):
        assert rows(units, table) == rows([whole], table), table


def test_a_compressed_marker_has_its_control_type_in_the_batches_rows_as_in_the_row_api(
    tmp_path: Path,
) -> None:
    """The walker never decompresses, so a gzip control batch's type and coordinator epoch come from
    its first record, read in Python: the Arrow rows said UNKNOWN where `read_log_segment` said COMMIT.
    kafka-python builds the marker's record (a COMMIT key and value; it leaves so small a batch
    uncompressed); its records are then gzipped and the codec and control bits set."""
    import gzip

    plain = build_v2(
        V2Batch(
            base_offset=3,
            records=[(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 9))],
            producer_id=5,
            producer_epoch=0,
            transactional=True,
        )
    )
    marker = bytearray(plain[:RECORDS_OFFSET] + gzip.compress(plain[RECORDS_OFFSET:]))
    struct.pack_into(">i", marker, 8, len(marker) - 12)  # batchLength: after baseOffset and itself
    attributes = struct.unpack_from(">h", marker, ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", marker, ATTRIBUTES_OFFSET, attributes | 0x20 | 1)  # control, gzip
    unit = unit_of(tmp_path, segment(*batches(1), with_valid_crc(marker)))
    (header,) = [h for h in read_log_segment(unit.file) if isinstance(h, BatchHeader) and h.is_control]
    assert (header.compression, header.control_type, header.coordinator_epoch) == ("gzip", "COMMIT", 9)
    stream = dt.decode_unit_safely(unit, BATCHES.name, SCHEMAS[BATCHES.name], records=False)
    rows = [r for batch in stream for r in batch.to_pylist()]
    assert [(r["base_offset"], r["is_control"], r["control_type"], r["coordinator_epoch"]) for r in rows] == [
        (0, False, None, None),
        (3, True, "COMMIT", 9),
    ]
