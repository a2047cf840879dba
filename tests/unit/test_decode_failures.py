"""What the ingest's decode tasks make of a number no column can hold, and of a pass that fails.

The inputs are real bytes: a golden `kafka-dump-log.sh` text with one number changed, and segments
of kafka-python's batches around a legacy wrapper it built. No Spark session is started.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import decode_tasks as dt
from schemas.tables import BATCHES, PRODUCER_SNAPSHOTS, QUARANTINE, RECORDS
from tests.builders import CODEC_IDS, V2Batch, build_v2, segment

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "dump_log_text"
SCHEMAS = {
    spec.name: to_arrow_schema(spec.schema) for spec in (BATCHES, RECORDS, QUARANTINE, PRODUCER_SNAPSHOTS)
}


def drain(
    unit: dt.WorkUnit, table: str, *, records: bool = False, **kwargs: Any
) -> tuple[list[dict[str, Any]], bool | dt.PassFailed]:
    """(rows of `table`, whether the quarantine pass must read the unit, or how the pass failed) of one
    decode task."""
    stream = dt.decode_unit_safely(unit, table, SCHEMAS[table], records=records, **kwargs)
    rows: list[dict[str, Any]] = []
    while True:
        try:
            rows += next(stream).to_pylist()
        except StopIteration as done:
            return rows, done.value


def text_unit(tmp_path: Path, text: bytes) -> dt.WorkUnit:
    path = tmp_path / "dump.txt"
    path.write_bytes(text)
    return dt.WorkUnit(dt.DUMP_LOG_TEXT, "d", None, None, None, str(path), len(text))


def log_unit(tmp_path: Path, data: bytes) -> dt.WorkUnit:
    path = tmp_path / "t-0" / "00000000000000000000.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return dt.WorkUnit(dt.LOG, "d", None, "t", 0, str(path), len(data))


MARKER = b"producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true"


@pytest.mark.parametrize("records", [False, True], ids=["headers", "records"])
def test_a_text_batch_line_out_of_range_is_one_quarantine_row_and_every_other_row_is_kept(
    tmp_path: Path, records: bool
) -> None:
    golden = (GOLDEN / "kafka-3.0-deep-iteration.txt").read_bytes()
    good = text_unit(tmp_path, golden)
    good_batches = drain(good, "batches")[0]
    good_records = drain(good, "records", records=True)[0]
    bad_text = golden.replace(MARKER, MARKER.replace(b"Epoch: 0", b"Epoch: 70000"), 1)
    (tmp_path / "bad").mkdir()
    bad = text_unit(tmp_path / "bad", bad_text)
    batches, _ = drain(bad, "batches", records=records)
    # The marker batch (byte 88 of orders-3) alone is gone; it held a control record only.
    assert [(r["file"], r["position"]) for r in batches] == [
        (r["file"], r["position"])
        for r in good_batches
        if not (r["position"] == 88 and r["file"].endswith("orders-3/00000000000000000000.log"))
    ]
    if records:
        assert drain(bad, "records", records=True)[0] == good_records
    quarantine, _ = drain(bad, "quarantine", records=records)
    unreadable = [r for r in quarantine if r["kind"] == "UNREADABLE_BATCH"]
    assert [(r["file"], r["position"]) for r in unreadable] == [(bad.file, bad_text.index(b"baseOffset: 3 "))]
    assert "producer_epoch 70000 is out of range" in unreadable[0]["message"]
    assert not any(r["kind"] == "UNREADABLE_FILE" for r in quarantine)


def legacy_wrapper_past_int64() -> bytes:
    """A v1 gzip wrapper at offset 1 whose relative inner offsets are 2^63 - 1 and 0 (kafka-python's
    builder writes them as given): its first message's absolute offset would be 2^63."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=CODEC_IDS["gzip"], batch_size=1 << 30)
    builder.append(2**63 - 1, timestamp=1_500_000_000_000, key=b"a", value=b"1")
    builder.append(0, timestamp=1_500_000_000_001, key=b"b", value=b"2")
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, 1)
    return bytes(raw)


@pytest.mark.parametrize("records", [False, True], ids=["headers", "records"])
def test_a_legacy_offset_past_int64_is_one_quarantine_row_and_the_segments_other_batches_are_kept(
    tmp_path: Path, records: bool
) -> None:
    first = build_v2(V2Batch(base_offset=0, records=[(b"k", b"v")]))
    wrapper = legacy_wrapper_past_int64()
    last = build_v2(V2Batch(base_offset=10, records=[(b"k", b"w")]))
    unit = log_unit(tmp_path, segment(first, wrapper, last))
    batches, corrupt = drain(unit, "batches", records=records)
    assert corrupt is True
    assert [(r["position"], r["base_offset"]) for r in batches] == [(0, 0), (len(first) + len(wrapper), 10)]
    if records:
        assert [r["offset"] for r in drain(unit, "records", records=True)[0]] == [0, 10]
    quarantine, _ = drain(unit, "quarantine", records=records)
    assert [(r["position"], r["length"], r["kind"]) for r in quarantine] == [
        (len(first), len(wrapper), "UNREADABLE_BATCH")
    ]
    assert "outside int64" in quarantine[0]["message"]


def test_a_pass_that_fails_is_a_quarantine_row_of_the_quarantine_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decoder bug that the quarantine pass itself does not meet (here: the batches rows of a text
    cannot become Arrow) still leaves a row saying which pass failed on which file."""
    unit = text_unit(tmp_path, (GOLDEN / "kafka-3.0-deep-iteration.txt").read_bytes())
    real = dt._rows_to_batch

    def failing_for_batches(rows: Any, schema: pa.Schema) -> pa.RecordBatch:
        if "base_offset" in schema.names:
            raise pa.ArrowInvalid("a bug")
        return real(rows, schema)

    monkeypatch.setattr(dt, "_rows_to_batch", failing_for_batches)
    failure = drain(unit, "batches")[1]
    assert failure == dt.PassFailed("batches", "ArrowInvalid: a bug")
    assert isinstance(failure, dt.PassFailed)
    # The driver hands the quarantine pass what the earlier passes reported.
    assert not [r for r in drain(unit, "quarantine")[0] if r["kind"] == "UNREADABLE_BATCH"]
    quarantine, _ = drain(unit, "quarantine", failures=[failure])
    # A text holds a log's batches that were not all read: an error over the whole text, not a warning.
    failed = [r for r in quarantine if r["kind"] == "UNREADABLE_BATCH"]
    size = Path(unit.file).stat().st_size
    assert [(r["file"], r["position"], r["length"], r["message"]) for r in failed] == [
        (
            unit.file,
            0,
            size,
            "decoder failed in the batches pass: ArrowInvalid: a bug; "
            f"bytes 0 to {size} were not (all) decoded",
        )
    ]
    # Where the driver cannot gather failures (Spark Connect), the pass fails its job, naming the file.
    with pytest.raises(RuntimeError, match=f"{unit.file}: byte 0: the batches pass failed: ArrowInvalid"):
        drain(unit, "batches", raise_failures=True)


def test_a_failing_quarantine_pass_is_still_its_own_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unit = text_unit(tmp_path, (GOLDEN / "kafka-3.0-deep-iteration.txt").read_bytes())

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(dt, "_dump_log_text_rows", failing)
    earlier = [dt.PassFailed("batches", "RuntimeError: a bug")]
    quarantine, corrupt = drain(unit, "quarantine", failures=earlier)
    assert corrupt is True
    # One row per unit (its natural key is the unit's file and start), naming every failed pass.
    assert [r["message"].split("; bytes ")[0] for r in quarantine] == [
        "decoder failed in the quarantine pass: RuntimeError: a bug; in the batches pass: RuntimeError: a bug"
    ]


def test_a_segment_gone_since_it_was_listed_is_a_quarantine_row_not_a_failed_pass(tmp_path: Path) -> None:
    """Retention deletes a live directory's head segment between discovery and decode: its batches pass
    gives nothing and asks the quarantine pass, which writes one row; no pass fails. Its batches were not
    audited: an UNREADABLE_BATCH (an error) over the bytes listed, not a warning a valid run passes."""
    unit = log_unit(tmp_path, segment(build_v2(V2Batch(base_offset=0))))
    Path(unit.file).unlink()
    assert drain(unit, "batches") == ([], True)
    quarantine, corrupt = drain(unit, "quarantine")
    assert corrupt is True
    assert [(r["kind"], r["file"], r["position"], r["length"]) for r in quarantine] == [
        ("UNREADABLE_BATCH", unit.file, 0, unit.size)
    ]
    assert "cannot read since it was listed" in quarantine[0]["message"]
    assert (
        "(deleted since it was listed: a live log directory's retention or cleaner?"
        in quarantine[0]["message"]
    )
    assert quarantine[0]["message"].endswith(f"bytes 0 to {unit.size} were not (all) decoded")


def test_a_pass_that_fails_mid_walk_keeps_every_row_it_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk holds back its latest Arrow batch (to mark the walk's last batch); a decoder bug after it
    must not lose it: the pass fails with the rows it gave, all of them."""
    batches = [V2Batch(base_offset=i) for i in range(3)]
    unit = log_unit(tmp_path, segment(*[build_v2(b) for b in batches]))
    real = dt.segment_runs

    def failing_after_the_runs(*args: Any, **kwargs: Any) -> Any:
        yield from real(*args, **kwargs)
        raise RuntimeError("a bug")

    monkeypatch.setattr(dt, "segment_runs", failing_after_the_runs)
    rows, failure = drain(unit, "batches")
    assert failure == dt.PassFailed("batches", "RuntimeError: a bug")
    assert [r["base_offset"] for r in rows] == [0, 1, 2]


def test_a_legacy_segment_is_one_unit_since_a_range_can_start_only_at_a_v2_batch(tmp_path: Path) -> None:
    """Every range of a magic 0/1 segment would fall back to byte 0 (`resolve_start` takes only a v2
    batch as a start) and decode the segment again: a 1 GiB segment in 8 ranges read 4.5 GiB. It is
    not split; a v2 segment with the same index is."""
    from jobs.ingest import split_segment

    def written(name: str, entries: list[bytes]) -> dt.WorkUnit:
        path = tmp_path / name / "00000000000000000000.log"
        path.parent.mkdir()
        path.write_bytes(b"".join(entries))
        positions = [sum(len(e) for e in entries[:i]) for i in range(len(entries))]
        index = b"".join(struct.pack(">ii", i, p) for i, p in enumerate(positions) if i and i % 4 == 0)
        path.with_suffix(".index").write_bytes(index)
        return dt.WorkUnit(
            dt.LOG,
            "d",
            None,
            name,
            0,
            str(path),
            path.stat().st_size,
            index_file=str(path.with_suffix(".index")),
        )

    def legacy(offset: int) -> bytes:
        builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 30)
        builder.append(0, timestamp=1_500_000_000_000, key=b"k", value=b"v" * 100)
        raw = bytearray(builder.build())
        struct.pack_into(">q", raw, 0, offset)
        return bytes(raw)

    old = written("old-0", [legacy(i) for i in range(40)])
    new = written(
        "new-0", [build_v2(V2Batch(base_offset=i, records=[(b"k", b"v" * 100)])) for i in range(40)]
    )
    assert len(split_segment(old, 1024)) == 1
    assert len(split_segment(new, 1024)) > 3


@pytest.mark.parametrize("table", ["batches", "quarantine"])
def test_a_segment_grown_since_it_was_listed_is_read_to_its_listed_size(tmp_path: Path, table: str) -> None:
    """A live broker appends a batch between discovery and decode: every pass reads the batches that
    start within the size the inventory lists, the same ones, and nothing is reported of the rest."""
    first = build_v2(V2Batch(base_offset=0))
    unit = log_unit(tmp_path, first)
    with open(unit.file, "ab") as log:
        log.write(build_v2(V2Batch(base_offset=1)))
    rows, corrupt = drain(unit, table)
    if table == "batches":
        assert [r["base_offset"] for r in rows] == [0]
    else:
        assert rows == []
    assert corrupt is False


def test_a_bad_line_of_a_dump_text_belongs_to_the_partition_of_its_section(tmp_path: Path) -> None:
    """A line of a `kafka-dump-log.sh` text that cannot be read is located in the text (its file and
    byte), and belongs to the partition whose `Dumping` section it stands in: with no partition, the
    partition's summary counted no quarantined region for it. Before any section, it has none."""
    batch = (
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1000 "
        "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 88 magic: 2 "
        "compresscodec: none crc: 179343200 isvalid: true"
    )
    lines = [
        "garbage before any section",
        "Dumping /data/garb-0/00000000000000000000.log",
        "Log starting offset: 0",
        batch,
        "garbage in garb-0",
        "Dumping /data/other-3/00000000000000000000.log",
        "Log starting offset: 0",
        "garbage in other-3",
        batch,
    ]
    text = "".join(f"{line}\n" for line in lines).encode()
    unit = text_unit(tmp_path, text)
    rows, _ = drain(unit, QUARANTINE.name)
    placed = [(r["topic"], r["partition"], r["file"], r["position"]) for r in rows]
    assert placed == [
        (None, None, unit.file, 0),
        ("garb", 0, unit.file, text.index(b"garbage in garb-0")),
        ("other", 3, unit.file, text.index(b"garbage in other-3")),
    ], rows
    # A KRaft snapshot's section gives no rows (no segment of __cluster_metadata), before its first
    # batch too: its bad line is the text's alone.
    kraft = "Dumping /data/__cluster_metadata-0/00000000000000000116-0000000001.checkpoint\ngarbage\n"
    unit = text_unit(tmp_path, kraft.encode())
    rows, _ = drain(unit, QUARANTINE.name)
    assert [(r["topic"], r["partition"]) for r in rows] == [(None, None)], rows
