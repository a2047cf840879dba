"""Memory bounds of record mode: the record cap of one batch, compressed or not, and the Arrow batches
its records leave in (batches built by kafka-python, not by our own encoder)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from kafka_log_decoder import segment as seg
from kafka_log_decoder.errors import DecodeError
from kafka_log_decoder.rows import Record
from kafka_log_decoder.segment import read_log_segment
from schemas.tables import QUARANTINE, RECORDS

CODECS = {"none": 0, "gzip": 1, "zstd": 4}
RECORDS_SCHEMA = to_arrow_schema(RECORDS.schema)
QUARANTINE_SCHEMA = to_arrow_schema(QUARANTINE.schema)


def kafka_batch(count: int, *, codec: str = "none", base_offset: int = 0) -> bytes:
    """`count` records, the i-th with i % 3 headers (none on some, several on others) and a null key
    on every fourth, as kafka-python's producer writes them."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=False,
        producer_id=7,
        producer_epoch=0,
        base_sequence=base_offset,
        batch_size=1 << 30,
    )
    for i in range(count):
        headers = [(f"h{i}.{h}", None if h == 1 else b"x%d" % i) for h in range(i % 3)]
        key = None if i % 4 == 0 else b"k%d" % i
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=b"v%d" % i, headers=headers)
    raw = bytearray(builder.build())
    raw[0:8] = base_offset.to_bytes(8, "big")  # outside the CRC, as a broker sets it
    return bytes(raw)


def write_log(tmp_path: Path, *batches: bytes) -> Path:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(batches))
    return path


def unit_of(path: Path) -> dt.WorkUnit:
    return dt.WorkUnit(dt.LOG, "d", "1", "t", 0, str(path), path.stat().st_size)


def arrow_batches(unit: dt.WorkUnit, table: str, schema: pa.Schema) -> tuple[list[pa.RecordBatch], object]:
    stream = dt.decode_unit_safely(unit, table, schema, records=True)
    out: list[pa.RecordBatch] = []
    while True:
        try:
            out.append(next(stream))
        except StopIteration as done:
            return out, done.value


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_over_the_record_cap_has_its_records_refused_compressed_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """One plain batch of millions of tiny records took gigabytes of columns: the cap of a compressed
    batch holds for it too, with the same error, and the batches around it still decode."""
    monkeypatch.setattr(seg, "MAX_BATCH_RECORDS", 10)
    path = write_log(
        tmp_path,
        kafka_batch(10, codec=codec),
        kafka_batch(11, codec=codec, base_offset=10),
        kafka_batch(3, codec=codec, base_offset=21),
    )
    items = list(read_log_segment(path, records=True))
    errors = [i for i in items if isinstance(i, DecodeError)]
    assert [(e.position, e.message) for e in errors] == [
        (len(kafka_batch(10, codec=codec)), "11 records: more than the 10 decoded from one batch")
    ]
    assert [r.offset for r in items if isinstance(r, Record)] == [*range(10), *range(21, 24)]


def test_the_records_table_reports_a_plain_batch_over_the_cap_to_the_quarantine_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seg, "MAX_BATCH_RECORDS", 10)
    unit = unit_of(write_log(tmp_path, kafka_batch(4), kafka_batch(11, base_offset=4)))
    rows, corrupt = arrow_batches(unit, RECORDS.name, RECORDS_SCHEMA)
    assert sum(b.num_rows for b in rows) == 4 and corrupt is True
    quarantined, _ = arrow_batches(unit, QUARANTINE.name, QUARANTINE_SCHEMA)
    messages = pa.Table.from_batches(quarantined).column("message").to_pylist()
    assert messages == ["11 records: more than the 10 decoded from one batch"]


@pytest.mark.parametrize("codec", CODECS)
def test_record_rows_leave_in_arrow_batches_of_at_most_max_rows_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    """A run's records are cut into slices, their headers with them; the rows are those of the row API
    (in another order: a run's records decoded in place come before its decompressed ones)."""
    monkeypatch.setattr(dt, "MAX_ROWS_PER_BATCH", 7)
    path = write_log(tmp_path, kafka_batch(20, codec=codec), kafka_batch(5, codec=codec, base_offset=20))
    out, corrupt = arrow_batches(unit_of(path), RECORDS.name, RECORDS_SCHEMA)
    assert corrupt is False
    assert max(b.num_rows for b in out) <= 7
    got = pa.Table.from_batches(out).select(["offset", "key", "value", "header_keys", "header_values"])
    expected = [
        (r.offset, r.key, r.value, r.header_keys, r.header_values)
        for r in read_log_segment(path, records=True)
        if isinstance(r, Record)
    ]
    assert sorted(zip(*got.to_pydict().values(), strict=True)) == expected
    assert len(expected) == 25 and any(r[3] for r in expected)


def test_merging_small_batches_never_passes_max_rows_per_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dt, "MAX_ROWS_PER_BATCH", 7)
    small, full = pa.record_batch({"a": [1, 2]}), pa.record_batch({"a": list(range(7))})

    def walk() -> dt.Decoded:
        yield small
        yield full
        yield small
        return False

    merged = dt.Coalesced(min_rows=4)
    out = [b.num_rows for b in merged.take(walk())] + [b.num_rows for b in merged.flush()]
    assert out == [2, 7, 2]
