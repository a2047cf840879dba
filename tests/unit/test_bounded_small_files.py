"""Files with no size bound of their own are read a bounded piece at a time, and their rows leave as
they come; each error is still one row that names the file and byte."""

from __future__ import annotations

import io
import json
import re
import struct
import tracemalloc
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from kafka_log_decoder import text_lines
from kafka_log_decoder.dump_log_text import read_dump_log_text
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.index_files import decode_txn_index
from kafka_log_decoder.producer_snapshot import decode_producer_snapshot
from kafka_log_decoder.rows import Record
from schemas.tables import PRODUCER_SNAPSHOTS, QUARANTINE, TXN_INDEX
from tests.builders import producer_snapshot

ENTRIES = 60_000


def drain(unit: dt.WorkUnit, table: str, schema: pa.Schema) -> list[pa.RecordBatch]:
    return list(dt.decode_unit(unit, table, schema, records=False))


def peak_of(unit: dt.WorkUnit, table: str, schema: pa.Schema) -> tuple[int, int]:
    """The peak of Python memory while the unit's batches for `table` are made and let go of, one at a
    time (as a Spark task sends them), and the most rows of one batch."""
    most = 0
    tracemalloc.start()
    try:
        for batch in dt.decode_unit(unit, table, schema, records=False):
            most = max(most, batch.num_rows)
            del batch
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, most


def txn_index_unit(tmp_path: Path, data: bytes) -> dt.WorkUnit:
    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return dt.WorkUnit(dt.TXNINDEX, "d", "1", "t", 0, str(path), len(data))


def test_a_txn_index_is_read_and_leaves_a_chunk_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 000 aborted transactions and a torn last entry: the rows and the error of the whole file read
    at once, made without holding the file or all of its rows."""
    monkeypatch.setattr(dt, "MAX_ROWS_PER_BATCH", 256)
    entry = struct.Struct(">hqqqq")
    data = b"".join(entry.pack(0, 7, 10 * i, 10 * i + 5, 10 * i) for i in range(ENTRIES)) + bytes(5)
    unit = txn_index_unit(tmp_path, data)
    peak, most = peak_of(unit, TXN_INDEX.name, to_arrow_schema(TXN_INDEX.schema))
    assert peak < len(data) // 2  # a chunk of the file and a batch of rows
    assert most <= 256
    rows = drain(unit, TXN_INDEX.name, to_arrow_schema(TXN_INDEX.schema))
    table = pa.Table.from_batches(rows)
    entries, errors = decode_txn_index(data, unit.file)
    assert table.column("first_offset").to_pylist() == [e.first_offset for e in entries]
    assert table.column("position").to_pylist() == [34 * i for i in range(ENTRIES)]
    quarantined = drain(unit, QUARANTINE.name, to_arrow_schema(QUARANTINE.schema))
    assert [(r["position"], r["message"]) for r in pa.Table.from_batches(quarantined).to_pylist()] == [
        (e.position, e.message) for e in errors
    ]
    assert len(errors) == 1


def test_a_txn_index_that_cannot_be_read_is_one_quarantine_row(tmp_path: Path) -> None:
    unit = txn_index_unit(tmp_path, b"")
    Path(unit.file).unlink()
    quarantined = drain(unit, QUARANTINE.name, to_arrow_schema(QUARANTINE.schema))
    assert [r["message"] for r in pa.Table.from_batches(quarantined).to_pylist()] == [
        "cannot read: No such file or directory"
    ]


# ---------------------------------------------------------------------------------------------
# Lines: read to MAX_LINE_BYTES, a longer one an error at its bytes


@settings(max_examples=500, deadline=None)
@given(
    st.binary(max_size=60).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)),
    st.integers(1, 9),
    st.integers(1, 9),
    st.booleans(),
)
def test_bounded_lines_are_the_lines_split_as_open_splits_them(
    data: bytes, limit: int, block: int, universal: bool
) -> None:
    """Whatever the blocks read: the lines `open` gives (universal newlines, or `\\n` alone), a longer
    one than `limit` as its length."""
    pattern = rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z" if universal else rb"[^\n]*\n|[^\n]+\Z"
    expected = [m.group() for m in re.finditer(pattern, data) if m.group()]
    with patch.object(text_lines, "_BLOCK_BYTES", block):
        got = list(text_lines.bounded_lines(io.BytesIO(data), universal=universal, limit=limit))
    assert got == [line if len(line) <= limit else len(line) for line in expected]


def acks_unit(path: Path) -> dt.WorkUnit:
    return dt.WorkUnit(dt.ACKS_LEDGER, "d", None, None, None, str(path), path.stat().st_size)


def ack(offset: int, key: str = "k") -> str:
    return json.dumps({"topic": "t", "partition": 0, "offset": offset, "key": key})


OVERLONG = "1000 bytes on one line: more than the 100 read of one line"


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_overlong_ledger_line_is_one_bad_row_at_its_bytes_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    monkeypatch.setattr(text_lines, "MAX_LINE_BYTES", 100)
    ledger = tmp_path / f"acks.{fmt}"
    if fmt == "jsonl":
        first, long = ack(0) + "\n", ack(1, "x" * (999 - len(ack(1, ""))))
        ledger.write_text(first + long + "\n" + ack(2) + "\n")
    else:
        first, long = "topic,partition,offset,key\n" + "t,0,0,k\n", "t,0,1," + "x" * 993
        ledger.write_text(first + long + "\n" + "t,0,2,k\n")
    unit = acks_unit(ledger)
    assert [row["offset"] for row in dt._acks_rows(unit, "acks")] == [0, 2]
    bad = [(row["position"], row["length"], row["message"]) for row in dt._acks_rows(unit, "quarantine")]
    assert bad == [(len(first), 1000, f"acks row 1: {OVERLONG}")]


def test_an_overlong_line_inside_a_quoted_csv_field_makes_its_row_bad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines around it do not join into a row without it: the row it was in is bad as a whole."""
    monkeypatch.setattr(text_lines, "MAX_LINE_BYTES", 100)
    ledger = tmp_path / "acks.csv"
    head = "topic,partition,offset,key\n"
    ledger.write_text(head + 't,0,1,"a\n' + "x" * 999 + "\n" + 'b"\n' + "t,0,2,k\n")
    unit = acks_unit(ledger)
    assert [row["offset"] for row in dt._acks_rows(unit, "acks")] == [2]
    messages = [row["message"] for row in dt._acks_rows(unit, "quarantine")]
    assert messages[0] == f"acks row 0: {OVERLONG}"
    assert messages[1:] == [
        "acks row 1: not CSV: a line inside its quotes was not read (longer than lines are read)"
    ]


def test_an_overlong_dump_text_line_is_one_error_at_its_bytes_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_lines, "MAX_LINE_BYTES", 300)
    head = "Dumping orders-3/00000000000000000000.log\nLog starting offset: 0\n"
    batch = (
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 1000 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "position: 0 CreateTime: 1700000000001 size: 1000 magic: 2 compresscodec: none crc: 1 isvalid: true\n"
    )
    record = (
        "| offset: {0} CreateTime: 170000000000{0} keySize: -1 valueSize: {1} sequence: {0} headerKeys: [] "
        "payload: {2}\n"
    )
    long = record.format(0, 900, "x" * 900)
    path = tmp_path / "dump.txt"
    path.write_text(head + batch + long + record.format(1, 2, "ab"))
    items = list(read_dump_log_text(path))
    (error,) = [i for i in items if isinstance(i, DecodeError)]
    assert (error.file, error.position, error.length) == (str(path), len(head + batch), len(long))
    assert error.message == f"line 4: {len(long)} bytes on one line: more than the 300 read of one line"
    assert [r.offset for r in items if isinstance(r, Record)] == [1]


# ---------------------------------------------------------------------------------------------
# Producer snapshots: checked a chunk at a time, entries into Arrow a batch at a time

SNAPSHOT_SCHEMA = to_arrow_schema(PRODUCER_SNAPSHOTS.schema)
QUARANTINE_ARROW = to_arrow_schema(QUARANTINE.schema)


def snapshot_unit(tmp_path: Path, data: bytes) -> dt.WorkUnit:
    path = tmp_path / "t-0" / "00000000000000000120.snapshot"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return dt.WorkUnit(dt.SNAPSHOT, "d", "1", "t", 0, str(path), len(data))


def snapshot_entries(n: int) -> list[tuple[int, ...]]:
    """Every field a different value, the extremes of each type among them."""
    extremes = [(-(2**63), -(2**15), -(2**31), -(2**63), -(2**31), -(2**63), -(2**31), -(2**63))]
    return extremes + [
        (1000 + i, i % 7, i, 50 + i, i % 3, 1_700_000_000_000 + i, -1, -1) for i in range(n - 1)
    ]


def test_snapshot_rows_are_those_of_the_whole_file_decoded_made_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dt, "MAX_ROWS_PER_BATCH", 1000)
    data = producer_snapshot(snapshot_entries(200_000))
    unit = snapshot_unit(tmp_path, data)
    peak, most = peak_of(unit, PRODUCER_SNAPSHOTS.name, SNAPSHOT_SCHEMA)
    assert peak < len(data) // 4  # neither the file nor a row object per entry held
    assert most == 1000
    rows = drain(unit, PRODUCER_SNAPSHOTS.name, SNAPSHOT_SCHEMA)
    entries, errors = decode_producer_snapshot(data, unit.file)
    ctx = dt._Provenance(unit)
    expected = pa.Table.from_pylist(
        [dt._snapshot_row(ctx, e, i) for i, e in enumerate(entries)], SNAPSHOT_SCHEMA
    )
    assert errors == [] and pa.Table.from_batches(rows, SNAPSHOT_SCHEMA).equals(expected)
    assert drain(unit, QUARANTINE.name, QUARANTINE_ARROW) == []


CORRUPT_SNAPSHOTS = {
    "empty": lambda: b"",
    "short header": lambda: producer_snapshot(snapshot_entries(2))[:7],
    "version": lambda: producer_snapshot(snapshot_entries(2), version=2),
    "crc": lambda: producer_snapshot(snapshot_entries(2), crc=1),
    "cut entry": lambda: producer_snapshot(snapshot_entries(3))[:-5],
    "trailing": lambda: producer_snapshot(snapshot_entries(2)) + b"\x00",
    "negative count": lambda: b"\x00\x01" + bytes(4) + b"\xff\xff\xff\xff",
}


@pytest.mark.parametrize("make", CORRUPT_SNAPSHOTS.values(), ids=CORRUPT_SNAPSHOTS.keys())
def test_a_corrupt_snapshot_has_the_errors_of_the_whole_file_decoded_and_no_rows(
    tmp_path: Path, make: Any
) -> None:
    data = make()
    unit = snapshot_unit(tmp_path, data)
    assert drain(unit, PRODUCER_SNAPSHOTS.name, SNAPSHOT_SCHEMA) == []
    quarantined = pa.Table.from_batches(drain(unit, QUARANTINE.name, QUARANTINE_ARROW), QUARANTINE_ARROW)
    _, errors = decode_producer_snapshot(data, unit.file)
    assert errors
    assert quarantined.select(["kind", "position", "length", "message"]).to_pylist() == [
        {"kind": e.kind.value, "position": e.position, "length": e.length, "message": e.message}
        for e in errors
    ]


def test_the_quarantine_pass_reads_a_snapshot_without_holding_it(tmp_path: Path) -> None:
    data = producer_snapshot(snapshot_entries(200_000), crc=1)
    unit = snapshot_unit(tmp_path, data)
    assert peak_of(unit, QUARANTINE.name, QUARANTINE_ARROW)[0] < len(data) // 4
    quarantined = drain(unit, QUARANTINE.name, QUARANTINE_ARROW)
    assert [r["message"][:34] for r in pa.Table.from_batches(quarantined).to_pylist()] == [
        "producer snapshot CRC mismatch: st"
    ]
