"""Files with no size bound of their own are read a bounded piece at a time, and their rows leave as
they come; each error is still one row that names the file and byte."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from kafka_log_decoder.index_files import decode_txn_index
from schemas.tables import QUARANTINE, TXN_INDEX

ENTRIES = 60_000


def drain(unit: dt.WorkUnit, table: str, schema: pa.Schema) -> tuple[list[pa.RecordBatch], int]:
    """The unit's batches for `table`, and the peak of Python memory while they were made (each batch
    let go once the next is asked for, as a Spark task does)."""
    out: list[pa.RecordBatch] = []
    tracemalloc.start()
    try:
        for batch in dt.decode_unit(unit, table, schema, records=False):
            out.append(batch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, peak


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
    rows, peak = drain(unit, TXN_INDEX.name, to_arrow_schema(TXN_INDEX.schema))
    assert peak < len(data) // 2  # a chunk of the file and a batch of rows
    assert max(b.num_rows for b in rows) <= 256
    table = pa.Table.from_batches(rows)
    entries, errors = decode_txn_index(data, unit.file)
    assert table.column("first_offset").to_pylist() == [e.first_offset for e in entries]
    assert table.column("position").to_pylist() == [34 * i for i in range(ENTRIES)]
    quarantined, _ = drain(unit, QUARANTINE.name, to_arrow_schema(QUARANTINE.schema))
    assert [(r["position"], r["message"]) for r in pa.Table.from_batches(quarantined).to_pylist()] == [
        (e.position, e.message) for e in errors
    ]
    assert len(errors) == 1


def test_a_txn_index_that_cannot_be_read_is_one_quarantine_row(tmp_path: Path) -> None:
    unit = txn_index_unit(tmp_path, b"")
    Path(unit.file).unlink()
    quarantined, _ = drain(unit, QUARANTINE.name, to_arrow_schema(QUARANTINE.schema))
    assert [r["message"] for r in pa.Table.from_batches(quarantined).to_pylist()] == [
        "cannot read: No such file or directory"
    ]
