"""What an executor does with one work unit: read its bytes, decode them, return Arrow batches.

No Spark here (the functions run inside `mapInArrow` and are unit-testable without a JVM): a
`WorkUnit` names a file (or a byte range of a `.log`), and `decode_unit` turns it into record batches
of one bronze table, whose Arrow schema the driver derives from `schemas/`, then says whether the
unit met corrupt bytes: a `.log` walked clean for `batches` (or `records`) has no quarantine row, and
the ingest does not read it a second time for that table.

v2 batch headers go to Arrow without a Python object per batch: the walker's typed columns are
wrapped zero-copy (`pa.py_buffer` over the memoryviews) and the derived columns (codec name,
control type, ...) are computed with numpy over whole columns.
"""

from __future__ import annotations

import collections
import csv
import decimal
import functools
import itertools
import json
import os
import re
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import pyarrow as pa

from kafka_log_decoder import native, text_lines
from kafka_log_decoder.constants import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    COMPRESSION_NAMES,
    CONTROL_TYPE_NAMES,
    CONTROL_TYPE_UNKNOWN,
    DELETE_HORIZON_FLAG_MASK,
    PRODUCER_SNAPSHOT_ENTRY_SIZE,
    PRODUCER_SNAPSHOT_HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    TIMESTAMP_TYPE_NAMES,
    TRANSACTIONAL_FLAG_MASK,
    TXN_INDEX_ENTRY_SIZE,
    int_bounds,
)
from kafka_log_decoder.errors import NOT_DECODED, CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.index_check import IndexCheck, batch_holds_offset
from kafka_log_decoder.remote_log_metadata import RemoteLogMetadataError, decode_remote_log_metadata
from kafka_log_decoder.rows import (
    BatchHeader,
    CheckpointEntry,
    LeaderEpochEntry,
    Record,
    SnapshotEntry,
    TxnIndexEntry,
)
from kafka_log_decoder.segment import BatchRun, RecordRun, crc_mismatch, iter_segment_runs, valid_batch_at
from schemas.tables import ACKS, RECORDS, WALK_BEFORE_OVERLAP, WALK_FIRST, WALK_LAST, WALK_OVERLAP

# Unit kinds (files of `schemas.tables.FILES.kind` that carry rows).
LOG = "log"
DUMP_LOG_TEXT = "dump-log-text"
SNAPSHOT = "snapshot"
TXNINDEX = "txnindex"
OFFSET_CHECKPOINT = "offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
ACKS_LEDGER = "acks"
# A log directory's meta.properties: read on the driver for its broker id (discovery), and again here
# only for its problems, which become quarantine rows (else a bad file left the replica unnamed unsaid).
META_PROPERTIES = "meta.properties"
# Files read here only for their problems, as quarantine rows: a `.timeindex` (the audit reads no time
# index; its file-level faults, as `replay-audit dump` reports them), a KRaft `quorum-state` and a log
# directory's `.kafka_cleanshutdown` (JSON).
TIMEINDEX = "timeindex"
QUORUM_STATE = "quorum-state"
CLEAN_SHUTDOWN = "clean-shutdown"
PROBLEMS_ONLY = frozenset({TIMEINDEX, QUORUM_STATE, CLEAN_SHUTDOWN})

# The tables each unit kind feeds, besides `quarantine` (which every kind feeds).
TABLES_OF_KIND: dict[str, frozenset[str]] = {
    # `remote_log_metadata` from the segments of `__remote_log_metadata` only (`feeds`).
    LOG: frozenset({"batches", "records", "remote_log_metadata"}),
    DUMP_LOG_TEXT: frozenset({"batches", "records", "producer_snapshots"}),
    SNAPSHOT: frozenset({"producer_snapshots"}),
    TXNINDEX: frozenset({"txn_index"}),
    OFFSET_CHECKPOINT: frozenset({"partition_state"}),
    LEADER_EPOCH_CHECKPOINT: frozenset({"partition_state"}),
    PARTITION_METADATA: frozenset({"partition_state"}),
    ACKS_LEDGER: frozenset({"acks"}),
    META_PROPERTIES: frozenset(),
    TIMEINDEX: frozenset(),
    QUORUM_STATE: frozenset(),
    CLEAN_SHUTDOWN: frozenset(),
}

# Tiered storage's (KIP-405) metadata topic: its records are the remote log metadata manager's events.
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


def feeds(unit: WorkUnit, table: str) -> bool:
    """Whether `unit` has rows for `table`."""
    if table == "remote_log_metadata":
        return unit.kind == LOG and unit.topic == REMOTE_LOG_METADATA_TOPIC
    return table in TABLES_OF_KIND[unit.kind]


# `partition_state.state` of each offset checkpoint file (replication-offset = the high watermark).
CHECKPOINT_STATES = {
    "log-start-offset-checkpoint": "log_start_offset",
    "recovery-point-offset-checkpoint": "recovery_point",
    "replication-offset-checkpoint": "high_watermark",
    "cleaner-offset-checkpoint": "cleaner_offset",
}

# Output batches are cut at this many rows: bounded worker memory, reasonable Arrow batch sizes.
MAX_ROWS_PER_BATCH = 1 << 17

# Smaller batches are merged up to about this many rows or bytes before they leave the worker
# (`Coalesced`): a 2 MiB window of 500-record batches is ~50 header rows, and each Arrow batch
# costs the JVM a fixed setup besides its rows.
MIN_ROWS_PER_BATCH = 1 << 13
MIN_BYTES_PER_BATCH = 8 << 20


@dataclass(frozen=True, slots=True)
class IndexBoundary:
    """An `.index` entry used as a split point: the batch at `position` should hold `offset`."""

    index_file: str
    entry_position: int
    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class WorkUnit:
    """One file, or the byte range `[start, end)` of a `.log`, of one dump and replica.

    A range after the first starts at `boundary`; `fallbacks` are the earlier split points (nearest
    first, the file start last) to decode from when an index entry turns out to be stale.
    """

    kind: str
    dump_id: str
    replica: str | None
    topic: str | None
    partition: int | None
    file: str
    size: int
    start: int = 0
    end: int | None = None
    boundary: IndexBoundary | None = None
    fallbacks: tuple[int, ...] = ()
    # A `.log`'s `.index`, whose entries in `[start, end)` the unit's walk checks (`IndexCheck`).
    index_file: str | None = None
    # An `--acks` ledger given as a directory: the `name=value` directories between it and the file
    # are columns of a partitioned table (`_partition_values`).
    ledger_root: str | None = None

    @property
    def cost(self) -> int:
        """Bytes this unit reads (for packing units into tasks)."""
        end = self.size if self.end is None else self.end
        return max(end - self.start, 1)


# ---------------------------------------------------------------------------------------------
# Entry point


# What `decode_unit` returns after its batches: whether the quarantine pass must decode the unit.
Decoded = Generator[pa.RecordBatch, None, bool]


def decode_unit(unit: WorkUnit, table: str, schema: pa.Schema, *, records: bool) -> Decoded:
    """Record batches of `table` (a `schemas.tables` name) from one unit; never raises on bad bytes.

    Returns False only for a `.log` unit whose walk for `table` met no corrupt region, index
    mismatch or CRC failure: when that walk is the quarantine pass's (`walk_finds_quarantine`), the
    unit has no quarantine row and need not be decoded again.
    """
    ctx = _Provenance(unit)
    if unit.kind == LOG:
        return (yield from _log_unit(unit, ctx, table, schema, records))
    if unit.kind == DUMP_LOG_TEXT:
        rows = _dump_log_text_rows(unit, table, records)
        if table != "batches":
            yield from _rows_to_batches(rows, schema)
        else:
            # The text dumps its files one after the other: each file's batches are one walk.
            for _, file_rows in itertools.groupby(rows, key=lambda row: row["file"]):
                marks = WalkMarks()
                for batch in _rows_to_batches(file_rows, schema):
                    yield from marks.add(batch)
                yield from marks.finish()
    elif unit.kind == ACKS_LEDGER:
        yield from _rows_to_batches(_acks_rows(unit, table), schema)
    elif unit.kind == SNAPSHOT:
        yield from _snapshot_batches(unit, ctx, table, schema)
    else:
        yield from _rows_to_batches(_small_file_rows(unit, table), schema)
    return True


class Coalesced:
    """Merges the small record batches of a task's units into batches of at least MIN_ROWS_PER_BATCH
    rows or MIN_BYTES_PER_BATCH bytes, never past MAX_ROWS_PER_BATCH (the rows and their order
    unchanged); holds at most one such batch's worth of rows."""

    def __init__(self, min_rows: int = MIN_ROWS_PER_BATCH, min_bytes: int = MIN_BYTES_PER_BATCH) -> None:
        self.min_rows = min_rows
        self.min_bytes = min_bytes
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.bytes = 0

    def take(
        self, batches: Generator[pa.RecordBatch, None, bool | PassFailed]
    ) -> Generator[pa.RecordBatch, None, bool | PassFailed]:
        """Yields merged batches as `batches` fills them; returns what `batches` returns."""
        while True:
            try:
                batch = next(batches)
            except StopIteration as done:
                return done.value if isinstance(done.value, PassFailed) else bool(done.value)
            if self.pending and self.rows + batch.num_rows > MAX_ROWS_PER_BATCH:
                # Merged, they would pass the cut `record_runs_to_arrow` and the row paths keep.
                yield from self.flush()
            self.pending.append(batch)
            self.rows += batch.num_rows
            self.bytes += batch.nbytes
            if self.rows >= self.min_rows or self.bytes >= self.min_bytes:
                yield from self.flush()

    def flush(self) -> Iterator[pa.RecordBatch]:
        """The rows held, as one batch (nothing when none are held)."""
        pending, self.pending, self.rows, self.bytes = self.pending, [], 0, 0
        if len(pending) == 1:
            yield pending[0]
        elif pending:
            yield pa.concat_batches(pending)


def walk_finds_quarantine(table: str, *, records: bool) -> bool:
    """Whether a `.log` decoded for `table` is walked as the quarantine pass walks it (headers alone,
    or with records in record mode), so that its errors are exactly the unit's quarantine rows."""
    return table == ("records" if records else "batches")


@dataclass(frozen=True, slots=True)
class PassFailed:
    """A decode pass (of `table`) that raised on a unit: a decoder bug, since bad bytes are DecodeErrors."""

    table: str
    error: str


def decode_unit_safely(
    unit: WorkUnit,
    table: str,
    schema: pa.Schema,
    *,
    records: bool,
    failures: Sequence[PassFailed] = (),
    raise_failures: bool = False,
) -> Generator[pa.RecordBatch, None, bool | PassFailed]:
    """`decode_unit`, where a decoder bug ends the unit instead of the job.

    Decoders only ever report bad bytes as DecodeErrors; anything else escaping is our bug, and one
    unreadable file must not lose the other files' rows. A pass but quarantine that fails keeps the rows
    it gave and returns a `PassFailed`: the driver gathers them from every pass (`jobs.ingest`) and
    hands each unit's to the quarantine pass (`failures`), which writes one UNREADABLE_FILE row naming
    the passes that failed on it (its own too). Where the driver cannot gather them (Spark Connect has
    no accumulators: `raise_failures`), the pass raises instead, naming the file: a failed job, never
    a silent loss of the unit's rows.
    """
    if table != "quarantine":
        try:
            return (yield from decode_unit(unit, table, schema, records=records))
        except Exception as exc:
            if raise_failures:
                raise RuntimeError(
                    f"{unit.file}: byte {unit.start}: the {table} pass failed: {type(exc).__name__}: {exc}"
                ) from exc
            return PassFailed(table, f"{type(exc).__name__}: {exc}")
    failed = list(failures)
    found = True
    try:
        found = yield from decode_unit(unit, table, schema, records=records)
    except Exception as exc:
        failed.insert(0, PassFailed(table, f"{type(exc).__name__}: {exc}"))
    if failed:
        passes = "; ".join(f"in the {f.table} pass: {f.error}" for f in failed)
        error = _unread(unit, f"decoder failed {passes}")
        yield _rows_to_batch([_error_row(_Provenance(unit), error)], schema)
    return bool(found) or bool(failed)


def _checked_end(unit: WorkUnit) -> int | None:
    """Where the index entries a unit's walk checks end: its range's end; for a segment's last range,
    the size listed where the file has grown since (a live broker's appends, and their index entries,
    which the walk does not read: they were no mismatch), else none (an entry past the file's end is
    stale: the log was cut below it)."""
    if unit.end is not None:
        return unit.end
    try:
        grown = os.stat(unit.file).st_size > unit.size
    except OSError:
        return None
    return unit.size if grown else None


def _unread(unit: WorkUnit, message: str) -> DecodeError:
    """The quarantine row of a unit that could not be read, or whose decode failed. A log's bytes (a
    segment's range, a dump-log text) hold batches that were not all audited: an UNREADABLE_BATCH over
    the range, an error (a run must not say valid over data it did not read), whose region the loss
    rules name as where missing records may lie. Any other file is an UNREADABLE_FILE."""
    if unit.kind in (LOG, DUMP_LOG_TEXT):
        end = unit.size if unit.end is None else unit.end
        return DecodeError(
            unit.file,
            unit.start,
            CorruptionKind.UNREADABLE_BATCH,
            f"{message}; bytes {unit.start} to {end} {NOT_DECODED}",
            max(end - unit.start, 0),
        )
    return DecodeError(unit.file, unit.start, CorruptionKind.UNREADABLE_FILE, message)


@functools.cache
def _arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a bronze table, as the driver derives it (`jobs.ingest.decode_table`)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from schemas.tables import TABLES

    return to_arrow_schema(TABLES[table].schema)


@dataclass(slots=True)
class _Provenance:
    unit: WorkUnit

    def columns(self, n: int, file: str | None = None) -> list[pa.Array]:
        u = self.unit
        return [
            pa.repeat(pa.scalar(as_text(u.dump_id), pa.string()), n),
            pa.repeat(pa.scalar(as_text(u.replica), pa.string()), n),
            pa.repeat(pa.scalar(as_text(u.topic), pa.string()), n),
            pa.repeat(pa.scalar(u.partition, pa.int32()), n),
            pa.repeat(pa.scalar(as_text(file or u.file), pa.string()), n),
        ]

    def row(self, file: str | None = None, **values: Any) -> dict[str, Any]:
        u = self.unit
        return {
            "dump_id": as_text(u.dump_id),
            "replica": as_text(u.replica),
            "topic": as_text(u.topic),
            "partition": u.partition,
            "file": as_text(file or u.file),
            **values,
        }


@overload
def as_text(name: str) -> str: ...
@overload
def as_text(name: str | None) -> str | None: ...
def as_text(name: str | None) -> str | None:
    """A name from the file system as a table can hold it: bytes of a path that are not UTF-8 (which
    Python keeps as lone surrogates, and Arrow refuses) written as `\\xNN`. The file is still opened by
    its real name (`WorkUnit.file`); every row of it, in every table, names it the same way."""
    if name is None or name.isascii():
        return name
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# ---------------------------------------------------------------------------------------------
# .log segments


def _log_unit(unit: WorkUnit, ctx: _Provenance, table: str, schema: pa.Schema, records: bool) -> Decoded:
    start = resolve_start(unit)
    corrupt = False
    # Headers alone for `batches`: the walker never touches record bytes then.
    decode_records = table in ("records", "remote_log_metadata") or (table == "quarantine" and records)
    # The walk whose errors are the unit's quarantine rows, and the quarantine pass, check the index.
    check = None
    if unit.index_file is not None and (
        table == "quarantine" or walk_finds_quarantine(table, records=records)
    ):
        check = IndexCheck.of(unit.file, unit.index_file, unit.start, _checked_end(unit))
    marks = WalkMarks()
    try:
        for run in segment_runs(unit, start, records=decode_records):
            if check is not None:
                check.see(run)
            if isinstance(run, BatchRun):
                corrupt = corrupt or batch_run_has_errors(run)
                if table == "batches":
                    batch = batch_run_to_arrow(run, ctx, schema, unit.start, unit.end)
                    if batch.num_rows:
                        yield from marks.add(batch)
                    del batch
                elif table == "records":
                    # No name holds a batch of the run's values once it is yielded.
                    yield from (
                        b for b in record_runs_to_arrow(run, ctx, schema, unit.start, unit.end) if b.num_rows
                    )
                elif table == "remote_log_metadata":
                    rows = [
                        _remote_log_metadata_row(ctx, run.file, position, offset, value)
                        for record_batch in record_runs_to_arrow(
                            run, ctx, _records_arrow(), unit.start, unit.end
                        )
                        for position, offset, value in zip(
                            *(
                                record_batch.column(c).to_pylist()
                                for c in ("batch_position", "offset", "value")
                            ),
                            strict=True,
                        )
                    ]
                    if rows:
                        yield _rows_to_batch(rows, schema)
                elif table == "quarantine":
                    rows = [_error_row(ctx, e) for e in batch_run_errors(run) if _in_range(e.position, unit)]
                    if rows:
                        yield _rows_to_batch(rows, schema)
            else:
                corrupt = corrupt or any(isinstance(item, DecodeError) for item in run)
                if table == "remote_log_metadata":
                    rows = [
                        _remote_log_metadata_row(ctx, r.file, r.batch_position, r.offset, r.value)
                        for r in run
                        if isinstance(r, Record) and _in_range(r.batch_position, unit)
                    ]
                else:
                    rows = [r for r in _item_rows(run, ctx, table) if _in_range(_row_position(r), unit)]
                for batch in _rows_to_batches(rows, schema):
                    yield from marks.add(batch) if table == "batches" else (batch,)
            # Nothing of this run is held while the next one decompresses
            # (`segment.MAX_RUN_DECOMPRESSED_BYTES`).
            del run
    except (NotAKafkaArtifact, OSError) as exc:
        # Gone or unreadable since discovery listed it (a live directory's segment deleted by retention):
        # evidence that cannot be read, a quarantine row, not a failed pass.
        yield from marks.finish()
        if table == "quarantine":
            gone = (
                " (deleted since it was listed: a live log directory's retention or cleaner? ingest a copy "
                "taken at one moment)"
                if not os.path.lexists(unit.file)
                else ""
            )
            error = _unread(unit, f"cannot read since it was listed: {exc}{gone}")
            yield _rows_to_batch([_error_row(ctx, error)], schema)
        return True
    except Exception:
        # A decoder bug ends the pass (`decode_unit_safely`): the rows it gave are kept, the held one too.
        yield from marks.finish()
        raise
    yield from marks.finish()
    if check is not None:
        errors = check.errors()
        if table == "quarantine":
            yield from _rows_to_batches((_error_row(ctx, e) for e in errors), schema)
        else:
            corrupt = corrupt or next(errors, None) is not None
    return corrupt


class WalkMarks:
    """Sets `batches.walk_mark` (schemas.tables WALK_* bits) on the record batches of one walk, given in
    walk order: the unit's first and last valid batch, and each valid batch that starts at or before
    the previous valid batch's last offset, with that previous batch. Holds back the batch holding the
    walk's latest valid row (its marks depend on what follows): one record batch at most.
    """

    def __init__(self) -> None:
        self.pending: tuple[pa.RecordBatch, np.ndarray, int] | None = None  # batch, marks, last valid row
        self.prev_last: int | None = None  # the last offset of the walk's latest valid batch

    def add(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        marks = np.zeros(batch.num_rows, dtype=np.int8)
        valid = np.flatnonzero(np.asarray(batch.column("crc_valid")))
        if not len(valid):
            yield _with_marks(batch, marks)
            return
        base = np.asarray(batch.column("base_offset"))[valid]
        last = np.asarray(batch.column("last_offset"))[valid]
        overlap = np.zeros(len(valid), dtype=bool)
        overlap[1:] = base[1:] <= last[:-1]
        marks[valid[overlap]] |= WALK_OVERLAP
        marks[valid[:-1][overlap[1:]]] |= WALK_BEFORE_OVERLAP
        if self.prev_last is None:
            marks[valid[0]] |= WALK_FIRST
        elif base[0] <= self.prev_last:
            marks[valid[0]] |= WALK_OVERLAP
            assert self.pending is not None
            self.pending[1][self.pending[2]] |= WALK_BEFORE_OVERLAP
        yield from self._release()
        self.pending = (batch, marks, int(valid[-1]))
        self.prev_last = int(last[-1])

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The held batch, its last valid row marked as the walk's last."""
        if self.pending is not None:
            self.pending[1][self.pending[2]] |= WALK_LAST
        yield from self._release()
        self.prev_last = None

    def _release(self) -> Iterator[pa.RecordBatch]:
        if self.pending is not None:
            batch, marks, _ = self.pending
            self.pending = None
            yield _with_marks(batch, marks)


def _with_marks(batch: pa.RecordBatch, marks: np.ndarray) -> pa.RecordBatch:
    i = batch.schema.get_field_index("walk_mark")
    return batch.set_column(i, batch.schema.field(i), pa.array(marks, pa.int8()))


def segment_runs(unit: WorkUnit, start: int, *, records: bool) -> Iterator[BatchRun | list[Any]]:
    """The decoder's stream over the unit's range, exactly as a decode of the whole file would see it.

    Decoding stops at the first batch starting at or after `unit.end` (a whole file's: its listed
    size). When a corrupt region runs
    past `unit.end`, the decoder (bounded by `end`) cannot see the next valid batch; that region is
    decoded again without the bound so its error is the one the whole-file decode reports.
    """
    end = unit.end
    # A whole file is read to the size discovery listed: batches a live broker appended since are not
    # the inventory's file, and every pass (batches, records, quarantine) reads the same ones.
    bound = unit.size if end is None else end
    for run in iter_segment_runs(unit.file, records=records, start_position=start, end_position=bound):
        if end is not None and isinstance(run, list) and run and _runs_past_end(run[-1], end, unit.size):
            *head, last = run
            if head:
                yield head
            assert isinstance(last, DecodeError)
            for again in iter_segment_runs(unit.file, records=records, start_position=last.position):
                if isinstance(again, list):
                    yield [item for item in again if _item_position(item) < end]
                    break
                # A valid batch follows the region: the region ended before it.
                break
            return
        yield run
        del run  # not held while the next run decompresses


def _runs_past_end(item: Any, end: int, size: int) -> bool:
    return (
        isinstance(item, DecodeError)
        and item.kind == CorruptionKind.UNREADABLE_BATCH
        and item.length is not None
        and item.position < end < item.position + item.length
        and item.position + item.length == size
    )


def resolve_start(unit: WorkUnit) -> int:
    """Where to start decoding the unit: its boundary if a whole, CRC-valid batch holding the entry's
    offset starts there, else the nearest earlier split point that checks out (an index can be stale;
    `IndexCheck` reports the entry with the index's other wrong ones).

    A corrupt batch at the boundary is not enough, though the entry is right: the whole file's walk may
    be inside an unreadable region there (a corrupt length before it, resynced past it), and a range
    decoded from it would report those bytes a second time."""
    b = unit.boundary
    if b is None or (
        batch_starts_at(unit.file, b.position) and batch_holds_offset(unit.file, b.position, b.offset)
    ):
        return unit.start
    for position in unit.fallbacks:
        if position == 0 or batch_starts_at(unit.file, position):
            return position
    return 0


def batch_starts_at(path: str, position: int) -> bool:
    """A whole, CRC-valid v2 batch starts at `position`: one a resync of the whole file would land on."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return valid_batch_at(fd, os.fstat(fd).st_size, position)
    finally:
        os.close(fd)


def _in_range(position: int, unit: WorkUnit) -> bool:
    return position >= unit.start and (unit.end is None or position < unit.end)


def _item_position(item: Any) -> int:
    if isinstance(item, Record):
        return item.batch_position
    return int(item.position)


def _row_position(row: dict[str, Any]) -> int:
    return int(row["batch_position"] if "batch_position" in row else row["position"])


# ---------------------------------------------------------------------------------------------
# BatchRun columns -> Arrow

_COMPRESSION = pa.array([COMPRESSION_NAMES.get(c, f"unknown({c})") for c in range(8)], pa.string())
_TIMESTAMP_TYPE = pa.array([TIMESTAMP_TYPE_NAMES[0], TIMESTAMP_TYPE_NAMES[1]], pa.string())
_MAX_CONTROL = max(CONTROL_TYPE_NAMES)
_CONTROL_TYPE = pa.array(
    [CONTROL_TYPE_NAMES[c] for c in range(_MAX_CONTROL + 1)] + [CONTROL_TYPE_UNKNOWN], pa.string()
)
_END_TXN_CONTROL = (0, 1)  # ABORT, COMMIT (ControlRecordType)


def _column(run: BatchRun, name: str, dtype: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(dtype, run.n, [None, pa.py_buffer(run.batches[name])])


def _np(run: BatchRun, name: str) -> np.ndarray:
    return np.frombuffer(run.batches[name], dtype=run.batches[name].format, count=run.n)


def batch_run_to_arrow(
    run: BatchRun, ctx: _Provenance, schema: pa.Schema, start: int = 0, end: int | None = None
) -> pa.RecordBatch:
    """The `batches` rows of a run, equal to `run.header(i)` for every i, without a Python object per row."""
    n = run.n
    position = _np(run, "position") + run.file_offset
    attributes = _np(run, "attributes")
    control = _np(run, "control_type").astype(np.int32)
    coordinator_epoch = _np(run, "coordinator_epoch").astype(np.int32)
    # A compressed control batch's type and coordinator epoch come from its first record, read in Python
    # (`BatchRun.control`): the walker never decompresses, so its columns say "unknown" there.
    for i, (control_type, epoch) in run.control.items():
        control[i], coordinator_epoch[i] = control_type, epoch
    base_timestamp = _column(run, "base_timestamp", pa.int64())
    is_control = control != native.NOT_CONTROL
    control_index = np.where((control >= 0) & (control <= _MAX_CONTROL), control, _MAX_CONTROL + 1)
    is_end_txn = np.isin(control, _END_TXN_CONTROL)
    columns = [
        *ctx.columns(n, run.file),
        pa.array(position, pa.int64()),
        _column(run, "base_offset", pa.int64()),
        _column(run, "last_offset", pa.int64()),
        _column(run, "count", pa.int32()),
        _column(run, "magic", pa.int8()),
        _column(run, "crc", pa.uint32()).cast(pa.int64()),
        pa.array(_np(run, "crc_valid") != 0),
        _column(run, "attributes", pa.int16()),
        _COMPRESSION.take(pa.array(attributes & COMPRESSION_CODEC_MASK)),
        _TIMESTAMP_TYPE.take(pa.array((attributes & TIMESTAMP_TYPE_MASK) >> 3)),
        pa.array((attributes & TRANSACTIONAL_FLAG_MASK) != 0),
        pa.array(is_control),
        _column(run, "partition_leader_epoch", pa.int32()),
        base_timestamp,
        _column(run, "max_timestamp", pa.int64()),
        _column(run, "producer_id", pa.int64()),
        _column(run, "producer_epoch", pa.int16()),
        _column(run, "base_sequence", pa.int32()),
        _column(run, "last_sequence", pa.int32()),
        _column(run, "size_bytes", pa.int32()),
        pa.array(_np(run, "base_timestamp"), pa.int64(), mask=(attributes & DELETE_HORIZON_FLAG_MASK) == 0),
        _CONTROL_TYPE.take(pa.array(control_index, mask=~is_control)),
        pa.array(coordinator_epoch, pa.int32(), mask=~is_end_txn),
        pa.nulls(n, pa.int8()),  # walk_mark: the unit's walk sets it (`WalkMarks`)
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
    if start > 0 or end is not None:
        keep = (position >= start) & (position < (end if end is not None else np.iinfo(np.int64).max))
        if not keep.all():
            batch = batch.filter(pa.array(keep))
    return batch


def batch_run_has_errors(run: BatchRun) -> bool:
    """Whether `batch_run_errors(run)` yields anything, without building the errors."""
    return bool(run.errors) or not _np(run, "crc_valid").all()


def batch_run_errors(run: BatchRun) -> Iterator[DecodeError]:
    """The decode errors of a run: CRC mismatches and the per-batch errors, as `run.items` yields them."""
    crc_valid = _np(run, "crc_valid")
    bad_crc = set(np.flatnonzero(crc_valid == 0).tolist())
    for i in sorted(bad_crc | set(run.errors)):
        if i in bad_crc:
            start = run.batches["position"][i]
            size = run.batches["size_bytes"][i]
            computed = native.crc32c(memoryview(run.buffer)[start + ATTRIBUTES_OFFSET : start + size])
            yield crc_mismatch(run.file, run.file_position(i), size, run.batches["crc"][i], computed)
        yield from run.errors.get(i, ())


def record_runs_to_arrow(
    run: BatchRun, ctx: _Provenance, schema: pa.Schema, start: int = 0, end: int | None = None
) -> Iterator[pa.RecordBatch]:
    """The `records` rows of a run (record mode), at most MAX_ROWS_PER_BATCH a batch: keys, values and
    headers gathered with numpy."""
    batch_positions = _np(run, "position") + run.file_offset
    for record_run in run.records:
        for batch in _record_run_to_arrow(record_run, batch_positions, run.file, ctx, schema):
            if start > 0 or end is not None:
                pos = batch.column("batch_position").to_numpy()
                keep = (pos >= start) & (pos < (end if end is not None else np.iinfo(np.int64).max))
                if not keep.all():
                    batch = batch.filter(pa.array(keep))
            yield batch


def _rc(run: RecordRun, name: str) -> np.ndarray:
    view = run.columns[name]
    return np.frombuffer(view, dtype=view.format)


def _record_run_to_arrow(
    run: RecordRun, batch_positions: np.ndarray, file: str, ctx: _Provenance, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """A run's records a slice of MAX_ROWS_PER_BATCH at a time: one uncompressed batch may hold
    millions of tiny records, and gathering them all at once took 1.7 GB for 8 million."""
    n = len(run.columns["offset"])
    source = np.frombuffer(run.source, dtype=np.uint8)
    # The header rows of records [a, b) are rows [first_header[a], first_header[b]): the walker writes
    # them in record order.
    first_header = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(_rc(run, "headers_count"), out=first_header[1:])
    for a in range(0, n, MAX_ROWS_PER_BATCH):
        b = min(a + MAX_ROWS_PER_BATCH, n)
        rows = slice(a, b)
        headers = slice(int(first_header[a]), int(first_header[b]))
        if run.batch_index is None:
            batch_position = batch_positions[_rc(run, "batch_index")[rows]]
        else:
            batch_position = np.full(b - a, batch_positions[run.batch_index], dtype=np.int64)
        key_len = _rc(run, "key_len")[rows]
        value_len = _rc(run, "value_len")[rows]
        list_offsets = pa.array((first_header[a : b + 1] - first_header[a]).astype(np.int32))
        header_keys = _gather(
            source,
            _rc(run, "hdr_key_pos")[headers],
            _rc(run, "hdr_key_len")[headers],
            pa.string(),
            nullable=False,
        )
        header_values = _gather(
            source, _rc(run, "hdr_value_pos")[headers], _rc(run, "hdr_value_len")[headers], pa.binary()
        )
        columns = [
            *ctx.columns(b - a, file),
            pa.array(batch_position, pa.int64()),
            pa.array(_rc(run, "offset")[rows], pa.int64()),
            pa.array(_rc(run, "timestamp")[rows], pa.int64()),
            pa.array(_rc(run, "sequence")[rows], pa.int32()),
            pa.array(key_len, pa.int32()),
            pa.array(value_len, pa.int32()),
            _gather(source, _rc(run, "key_pos")[rows], key_len, pa.binary()),
            _gather(source, _rc(run, "value_pos")[rows], value_len, pa.binary()),
            pa.ListArray.from_arrays(list_offsets, header_keys),
            pa.ListArray.from_arrays(list_offsets, header_values),
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _gather(
    source: np.ndarray,
    positions: np.ndarray,
    lengths: np.ndarray,
    dtype: pa.DataType,
    *,
    nullable: bool = True,
) -> pa.Array:
    """A binary/string array of `source[positions[i] : positions[i] + lengths[i]]`; length -1 is null.

    Memory is the values' bytes and a few integers per value, never per byte: one record can hold a
    value of hundreds of MB (a decompressed payload may reach MAX_DECOMPRESSED_BYTES).
    """
    n = len(lengths)
    if not n:
        return pa.array([], dtype)
    null = lengths < 0
    sizes = np.where(null, 0, lengths).astype(np.int64)
    starts = positions.astype(np.int64)
    if null.any():
        # A null (position -1) is an empty slice where the values before it end.
        starts = np.where(null, np.maximum.accumulate(np.where(null, 0, starts + sizes)), starts)
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = starts + sizes
    if (bounds[1:] >= bounds[:-1]).all():
        # The values and the bytes between them, as one array over `source`: every second element
        # is a value, and `take` copies exactly those bytes.
        spans = pa.Array.from_buffers(
            pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(bounds), pa.py_buffer(source)]
        )
        _, offsets, data = spans.take(pa.array(np.arange(0, 2 * n, 2))).buffers()
    else:
        # The walker writes positions in order; slices out of order are still gathered, one by one.
        offsets = pa.py_buffer(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
        data = pa.py_buffer(
            b"".join(source[s : s + size].tobytes() for s, size in zip(starts, sizes, strict=True))
        )
    validity = pa.array(~null).buffers()[1] if nullable and null.any() else None
    array = pa.Array.from_buffers(pa.large_binary(), n, [validity, offsets, data])
    if dtype == pa.string():
        try:
            return array.cast(pa.string())
        except pa.ArrowInvalid:
            # Header keys are UTF-8 in Kafka; replace what is not, as the decoder's Record does.
            return pa.array([v.decode("utf-8", errors="replace") for v in array.to_pylist()], pa.string())
    return array.cast(dtype)


# ---------------------------------------------------------------------------------------------
# Python rows (legacy entries, errors, text dumps, small files) -> Arrow


def _rows_to_batches(rows: Iterable[dict[str, Any]], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= MAX_ROWS_PER_BATCH:
            yield _rows_to_batch(chunk, schema)
            chunk = []
    if chunk:
        yield _rows_to_batch(chunk, schema)


def _rows_to_batch(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=schema)


def _item_rows(items: Iterable[Any], ctx: _Provenance, table: str) -> Iterator[dict[str, Any]]:
    """Rows of `table` from decoder items (BatchHeader, Record, SnapshotEntry, DecodeError)."""
    snapshot_entries: dict[str, int] = {}
    for item in items:
        if table == "batches" and isinstance(item, BatchHeader):
            yield _batch_row(ctx, item)
        elif table == "records" and isinstance(item, Record):
            yield _record_row(ctx, item)
        elif table == "quarantine" and isinstance(item, DecodeError):
            yield _error_row(ctx, item)
        elif table == "producer_snapshots" and isinstance(item, SnapshotEntry):
            number = snapshot_entries.get(item.file, 0)
            snapshot_entries[item.file] = number + 1
            yield _snapshot_row(ctx, item, number)


def _batch_row(ctx: _Provenance, h: BatchHeader) -> dict[str, Any]:
    row = h.to_dict()
    return ctx.row(file=row.pop("file"), **row)


def _record_row(ctx: _Provenance, r: Record) -> dict[str, Any]:
    return ctx.row(
        file=r.file,
        batch_position=r.batch_position,
        offset=r.offset,
        timestamp=r.timestamp,
        sequence=r.sequence,
        key_size=r.key_size,
        value_size=r.value_size,
        key=r.key,
        value=r.value,
        header_keys=list(r.header_keys),
        header_values=None if r.header_values is None else list(r.header_values),
    )


@functools.cache
def _records_arrow() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(RECORDS.schema)


def _remote_log_metadata_row(
    ctx: _Provenance, file: str, batch_position: int, offset: int, value: bytes | None
) -> dict[str, Any]:
    """A `remote_log_metadata` row: the event a `__remote_log_metadata` record's value holds, or why
    it holds none."""
    row = ctx.row(file=file, batch_position=batch_position, offset=offset)
    try:
        event = decode_remote_log_metadata(value if value is not None else b"")
    except RemoteLogMetadataError as exc:
        return {**row, "error": f"{file}: record at offset {offset} (batch at byte {batch_position}): {exc}"}
    return {
        **row,
        "event": event["event"],
        "segment_topic": event["topic"],
        "segment_partition": event["partition"],
        "topic_id": event["topic_id"],
        "segment_id": event.get("segment_id"),
        "start_offset": event.get("start_offset"),
        "end_offset": event.get("end_offset"),
        "state": event["state"],
        "broker_id": event["broker_id"],
        "event_timestamp_ms": event["event_timestamp_ms"],
        "segment_size_bytes": event.get("segment_size_bytes"),
    }


def _error_row(ctx: _Provenance, e: DecodeError) -> dict[str, Any]:
    return ctx.row(
        file=e.file, position=e.position, length=e.length, kind=e.kind.value, message=as_text(e.message)
    )


def _snapshot_row(ctx: _Provenance, s: SnapshotEntry, number: int) -> dict[str, Any]:
    return ctx.row(
        file=s.file,
        position=PRODUCER_SNAPSHOT_HEADER_SIZE + number * PRODUCER_SNAPSHOT_ENTRY_SIZE,
        snapshot_offset=s.snapshot_offset,
        producer_id=s.producer_id,
        producer_epoch=s.producer_epoch,
        last_sequence=s.last_sequence,
        last_offset=s.last_offset,
        offset_delta=s.offset_delta,
        timestamp=s.timestamp,
        coordinator_epoch=s.coordinator_epoch,
        current_txn_first_offset=s.current_txn_first_offset,
    )


def _dump_log_text_rows(unit: WorkUnit, table: str, records: bool) -> Iterator[dict[str, Any]]:
    """Rows of a `kafka-dump-log.sh` text: each item belongs to the partition of the file it dumps (else
    to the one the text's name names; with neither, the file's items are left out, and quarantine says
    so once). A KRaft snapshot's section (a dumped `.checkpoint`, which the tool reads as one) gives no
    rows, as the binary file gives none: its batches restart at offset 0 and are no segment of the
    `__cluster_metadata` log."""
    from kafka_log_decoder.constants import KRAFT_SNAPSHOT_SUFFIX
    from kafka_log_decoder.discovery import dumped_partition, dumped_parts
    from kafka_log_decoder.dump_log_text import read_dump_log_text

    if table == "records" and not records:
        return
    contexts: dict[str, _Provenance] = {}

    def context_of(file: str) -> _Provenance:
        if file not in contexts:
            parsed = dumped_partition(file)
            # Else the partition the text itself names (`DumpLogText.partition`), if any.
            topic, partition = parsed if parsed is not None else (unit.topic, unit.partition)
            contexts[file] = _Provenance(
                WorkUnit(unit.kind, unit.dump_id, unit.replica, topic, partition, file, unit.size)
            )
        return contexts[file]

    text_ctx = _Provenance(unit)
    snapshot_entries: dict[str, int] = {}
    placed: dict[str, bool] = {}
    # Records only where they are wanted: the records table, and the errors of an ingest with --records
    # (a batch over the records decoded from one batch is one then, as from the binary decoders).
    wanted = records and table in ("records", "quarantine")
    for item in read_dump_log_text(unit.file, records=wanted):
        file = getattr(item, "file", unit.file)
        if file != unit.file and file not in placed:
            parts = dumped_parts(file)
            if parts and parts[-1].endswith(KRAFT_SNAPSHOT_SUFFIX):
                placed[file] = False
                continue
            placed[file] = context_of(file).unit.topic is not None
            if not placed[file] and table == "quarantine":
                # At the dumped file (one row each), named by the text it was read from.
                yield _error_row(
                    text_ctx,
                    DecodeError(
                        file,
                        0,
                        CorruptionKind.UNREADABLE_FILE,
                        f"dumped in {unit.file}, but lies in no <topic>-<partition> directory, and the "
                        "text's name names no partition: its rows are not read",
                    ),
                )
        if file != unit.file and not placed[file]:
            continue
        if isinstance(item, DecodeError):
            if table == "quarantine":
                # Errors inside the text are located in the text (and belong to the partition of the
                # section they stand in, where it names one); the rest in the dumped file.
                ctx = context_of(item.file) if item.file != unit.file else text_ctx
                section = item.section if item.file == unit.file else None
                # (A KRaft snapshot's section gives no rows, before its first batch too.)
                kraft = section is not None and (dumped_parts(section) or [""])[-1].endswith(
                    KRAFT_SNAPSHOT_SUFFIX
                )
                if section is not None and not kraft and placed.get(section) is not False:
                    named = context_of(section)
                    ctx = named if named.unit.topic is not None else text_ctx
                yield _error_row(ctx, item)
        elif isinstance(item, BatchHeader):
            if table == "batches":
                yield _batch_row(context_of(item.file), item)
        elif isinstance(item, Record):
            if table == "records":
                yield _record_row(context_of(item.file), item)
        elif isinstance(item, SnapshotEntry) and table == "producer_snapshots":
            number = snapshot_entries.get(item.file, 0)
            snapshot_entries[item.file] = number + 1
            yield _snapshot_row(context_of(item.file), item, number)


# ---------------------------------------------------------------------------------------------
# Snapshots, txn indexes, checkpoints


def _snapshot_batches(
    unit: WorkUnit, ctx: _Provenance, table: str, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """A producer snapshot's rows (or for `quarantine` its errors), as `_snapshot_row` makes them, its
    entries read MAX_ROWS_PER_BATCH at a time into Arrow with numpy: a snapshot holds an entry per live
    producer, and nothing bounds their number. The quarantine pass reads the CRC alone."""
    from kafka_log_decoder import producer_snapshot
    from kafka_log_decoder.discovery import segment_base_offset

    if table not in TABLES_OF_KIND[SNAPSHOT] and table != "quarantine":
        return
    snapshot_offset = segment_base_offset(unit.file)
    try:
        with open(unit.file, "rb") as handle:
            count, errors = producer_snapshot.check_producer_snapshot(handle, unit.file)
            if table == "quarantine":
                yield from _rows_to_batches((_error_row(ctx, e) for e in errors), schema)
                return
            number = 0
            for chunk in producer_snapshot.iter_entry_chunks(handle, count, MAX_ROWS_PER_BATCH):
                n = len(chunk)
                first = PRODUCER_SNAPSHOT_HEADER_SIZE + number * PRODUCER_SNAPSHOT_ENTRY_SIZE
                columns = {
                    "position": pa.array(np.arange(n, dtype=np.int64) * PRODUCER_SNAPSHOT_ENTRY_SIZE + first),
                    "snapshot_offset": pa.repeat(pa.scalar(snapshot_offset, pa.int64()), n),
                    # Big-endian fields made native first: Arrow takes native-endian buffers.
                    **{
                        name: pa.array(chunk[name].astype(chunk[name].dtype.newbyteorder("=")))
                        for name in chunk.dtype.names or ()
                    },
                }
                provenance = ctx.columns(n)
                values = [
                    columns[name].cast(schema.field(name).type) for name in schema.names[len(provenance) :]
                ]
                yield pa.RecordBatch.from_arrays([*provenance, *values], schema=schema)
                number += n
    except OSError as exc:
        if table == "quarantine":
            yield _rows_to_batch([_error_row(ctx, _cannot_read(unit, exc.strerror))], schema)


def _cannot_read(unit: WorkUnit, why: str | None) -> DecodeError:
    """A file gone or unreadable since discovery listed it: corrupt evidence, not a failed job."""
    return DecodeError(unit.file, 0, CorruptionKind.UNREADABLE_FILE, f"cannot read: {why}")


def _small_file_rows(unit: WorkUnit, table: str) -> Iterator[dict[str, Any]]:
    ctx = _Provenance(unit)
    if unit.kind == TXNINDEX:
        yield from _txn_index_rows(unit, ctx, table)
        return
    rows, errors = _decode_small_file(unit, ctx)
    if table == "quarantine":
        for error in errors:
            yield _error_row(ctx, error)
    elif table in TABLES_OF_KIND[unit.kind]:
        yield from rows


def _decode_small_file(unit: WorkUnit, ctx: _Provenance) -> tuple[list[dict[str, Any]], list[DecodeError]]:
    from kafka_log_decoder import checkpoints, index_files

    if unit.kind == TIMEINDEX:
        # Preallocated to segment.index.bytes while active: streamed, not read whole.
        try:
            return [], [e for e in index_files.read_time_index(unit.file) if isinstance(e, DecodeError)]
        except NotAKafkaArtifact as exc:
            return [], [DecodeError(unit.file, 0, CorruptionKind.UNREADABLE_FILE, f"cannot read: {exc}")]
    try:
        with open(unit.file, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return [], [_cannot_read(unit, exc.strerror)]
    if unit.kind == OFFSET_CHECKPOINT:
        offset_entries, errors = checkpoints.decode_offset_checkpoint(data, unit.file)
        positions = _entry_line_positions(data, errors)
        return [_checkpoint_row(ctx, e, p) for e, p in zip(offset_entries, positions, strict=False)], errors
    if unit.kind == LEADER_EPOCH_CHECKPOINT:
        epoch_entries, errors = checkpoints.decode_leader_epoch_checkpoint(data, unit.file)
        positions = _entry_line_positions(data, errors)
        return [_leader_epoch_row(ctx, e, p) for e, p in zip(epoch_entries, positions, strict=False)], errors
    if unit.kind == META_PROPERTIES:
        return [], checkpoints.decode_meta_properties(data, unit.file)[1]
    if unit.kind == QUORUM_STATE:
        return [], checkpoints.decode_quorum_state(data, unit.file)[1]
    if unit.kind == CLEAN_SHUTDOWN:
        return [], checkpoints.decode_clean_shutdown(data, unit.file)[1]
    if unit.kind == PARTITION_METADATA:
        metadata, errors = checkpoints.decode_partition_metadata(data, unit.file)
        if metadata is None:
            return [], errors
        row = ctx.row(
            position=metadata.topic_id_position,
            state="topic_id",
            offset=None,
            leader_epoch=None,
            topic_id=metadata.topic_id,
        )
        return [row], errors
    raise ValueError(f"unknown unit kind {unit.kind}")


def _txn_index_rows(unit: WorkUnit, ctx: _Provenance, table: str) -> Iterator[dict[str, Any]]:
    """The rows of a `.txnindex` (its entries, or for `quarantine` its errors), read a chunk at a time:
    nothing bounds the file (64 MiB of entries, read whole, took 1.5 GB), and the rows leave in batches
    as they come."""
    from kafka_log_decoder.index_files import read_txn_index

    entries = table in TABLES_OF_KIND[TXNINDEX]
    if not entries and table != "quarantine":
        return
    try:
        # Entries are fixed-size and read up to the first the broker refuses (`index_files`): each in
        # its slot.
        number = 0
        for item in read_txn_index(unit.file):
            if isinstance(item, DecodeError):
                if table == "quarantine":
                    yield _error_row(ctx, item)
            else:
                if entries:
                    yield _txn_row(ctx, item, number)
                number += 1
    except NotAKafkaArtifact as exc:
        # The row names the file already: its message is the reason alone, as for the other small files.
        if table == "quarantine":
            why = str(exc).removeprefix(f"{unit.file}: ").removeprefix("cannot read: ")
            yield _error_row(ctx, _cannot_read(unit, why))
    except OSError as exc:
        if table == "quarantine":
            yield _error_row(ctx, _cannot_read(unit, exc.strerror))


def _txn_row(ctx: _Provenance, entry: TxnIndexEntry, number: int) -> dict[str, Any]:
    return ctx.row(
        position=number * TXN_INDEX_ENTRY_SIZE,
        version=entry.version,
        producer_id=entry.producer_id,
        first_offset=entry.first_offset,
        last_offset=entry.last_offset,
        last_stable_offset=entry.last_stable_offset,
    )


_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def _entry_line_positions(data: bytes, errors: list[DecodeError]) -> list[int]:
    """Byte positions of the entry lines (third line on) that parsed: the lines no error points at."""
    starts = [0, *(m.end() for m in _LINE_BREAK.finditer(data))]
    starts = [s for s in starts if s < len(data)]
    bad = {e.position for e in errors}
    return [s for s in starts[2:] if s not in bad]


def _checkpoint_row(ctx: _Provenance, e: CheckpointEntry, position: int) -> dict[str, Any]:
    return ctx.row(
        position=position,
        topic=e.topic,
        partition=e.partition,
        state=CHECKPOINT_STATES.get(e.checkpoint, e.checkpoint),
        offset=e.offset,
        leader_epoch=None,
        topic_id=None,
    )


def _leader_epoch_row(ctx: _Provenance, e: LeaderEpochEntry, position: int) -> dict[str, Any]:
    return ctx.row(
        position=position,
        state="leader_epoch",
        offset=e.start_offset,
        leader_epoch=e.epoch,
        topic_id=None,
    )


# ---------------------------------------------------------------------------------------------
# The --acks ledger: JSON lines, CSV or Parquet

ACKS_REQUIRED = ("topic", "partition", "offset")
_ACKS_INTEGERS = (
    "partition",
    "offset",
    "producer_id",
    "producer_epoch",
    "sequence",
    "timestamp",
    "app_sequence",
)
_ACKS_STRINGS = ("topic", "key", "app_producer")
_ACKS_COLUMNS = frozenset((*_ACKS_INTEGERS, *_ACKS_STRINGS))
# The directory name Hive, Spark and pyarrow give a null partition value.
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# An integer's text, or a whole number's written as a float's (`1000.0`: pandas writes an integer column
# that holds a NaN as floats, and the same ledger as JSON or Parquet floats is read); ASCII digits only.
_INTEGER_TEXT = re.compile(r"([+-]?[0-9]+)(?:\.0*)?")
# The last epoch millisecond of the year 9999: a larger `timestamp` is in another unit (microseconds,
# nanoseconds), and read as milliseconds it would put every ack after the dump, none of them judged.
_MAX_TIMESTAMP_MS = 253_402_300_799_999
# Each integer column's range, from its type in the acks table: a value outside it is a bad row (it
# would otherwise fail the Arrow batch of the whole ledger).
_ACKS_BOUNDS = {
    f.name: int_bounds({"short": 16, "integer": 32, "long": 64}[f.dataType.typeName()])
    for f in ACKS.schema.fields
    if f.name in _ACKS_INTEGERS
}
_PARQUET_MAGIC = b"PAR1"
_UTF8_BOM = b"\xef\xbb\xbf"


def ledger_format(path: str) -> str:
    """`parquet`, `json` (JSON lines) or `csv`: from the extension, else from the first bytes."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".parquet", ".pq"):
        return "parquet"
    if ext in (".jsonl", ".ndjson", ".json"):
        return "json"
    if ext == ".csv":
        return "csv"
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    return "json" if head.removeprefix(_UTF8_BOM).lstrip().startswith(b"{") else "csv"


def ledger_columns(path: str, root: str | None = None) -> list[str]:
    """The column names of a ledger, reading only its schema or first line."""
    fmt = ledger_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            names = list(pq.read_schema(path).names)
        except pa.ArrowException as exc:
            raise ValueError(str(exc)) from None
        return names + [name for name in _partition_values(path, root) if name not in names]
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        # Its first non-blank line, read no further than a header can be long (a binary file given by
        # mistake, a preallocated index's zeros, has no line end to stop at).
        first = ""
        while not first.strip():
            first = handle.readline(_LEDGER_HEADER_CHARS)
            if not first:
                raise ValueError("the ledger is empty")
            if len(first) >= _LEDGER_HEADER_CHARS and not first.endswith("\n"):
                raise ValueError(f"its first line runs past {_LEDGER_HEADER_CHARS} characters")
        if fmt == "json":
            return _json_ledger_columns(first, handle)
    # Read as `_ledger_rows` reads the header: `"topic", "partition"` names partition, not ` "partition"`.
    try:
        return [c.strip() for c in next(csv.reader([first], skipinitialspace=True), [])]
    except csv.Error as exc:
        raise ValueError(f"first line is not CSV: {exc}") from None


# How long a ledger's first line (its CSV header or first JSON object) may be.
_LEDGER_HEADER_CHARS = 1 << 16
# How many lines of a JSON-lines ledger are read for its columns.
_LEDGER_SNIFF_LINES = 64


def _json_ledger_columns(first: str, handle: Any) -> list[str]:
    """The keys of a JSON-lines ledger's objects, from its first lines up to the first that holds every
    column `ACKS_REQUIRED` names (at most `_LEDGER_SNIFF_LINES`): a torn or incomplete first row is one
    bad row (quarantined when the rows are read), not a ledger refused whole. An error where none of
    them is a JSON object."""
    keys: dict[str, None] = {}
    problem = None
    line = first
    for _ in range(_LEDGER_SNIFF_LINES):
        if line.strip():
            try:
                value = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                problem = problem or f"first line is not JSON: {getattr(exc, 'msg', 'nested too deep')}"
            else:
                if isinstance(value, dict):
                    keys.update(dict.fromkeys(value))
                    if all(column in value for column in ACKS_REQUIRED):
                        break
                else:
                    problem = problem or "first line is not a JSON object"
        line = handle.readline(_LEDGER_HEADER_CHARS)
        if not line:
            break
    if not keys:
        raise ValueError(problem or "the ledger is empty")
    return list(keys)


# A ledger row, or why it cannot be read; where it starts (a byte position in a text ledger, the row's
# number in a Parquet one) and its length in bytes (None in Parquet).
_LedgerRow = tuple[dict[str, Any] | str, int, int | None]


def _ledger_rows(path: str, root: str | None = None) -> Iterator[_LedgerRow]:
    """Each row of a ledger as a dict, or a string saying why it could not be read, with where it is."""
    fmt = ledger_format(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        ledger = pq.ParquetFile(path)
        # A partitioned table's columns are in its directory names (`topic=orders/partition=0/`).
        partitions = _partition_values(path, root)
        number = 0
        # Row group by row group: one whose pages cannot be read is a bad region of its rows.
        for group in range(ledger.num_row_groups):
            first, rows = number, ledger.metadata.row_group(group).num_rows
            try:
                for batch in ledger.iter_batches(row_groups=[group]):
                    for row in _times_as_ms(batch).to_pylist():
                        yield ({**partitions, **row} if partitions else row), number, None
                        number += 1
            except (OSError, pa.ArrowException) as exc:
                # The rows from the first that could not be read to the group's last.
                why = str(exc).split("\n")[0]
                yield f"row group {group} (to row {first + rows - 1}) cannot be read: {why}", number, None
                number = first + rows
        return
    with open(path, "rb") as handle:
        lines = _Lines(handle)
        if fmt == "json":
            for line in lines:
                if line.blank:
                    continue
                if line.overlong:
                    yield text_lines.overlong(line.end - line.start), *line.where
                    continue
                if line.invalid is not None:
                    yield f"not UTF-8 (byte {line.invalid})", *line.where
                    continue
                try:
                    value = json.loads(line.text)
                except json.JSONDecodeError as exc:
                    yield f"not JSON: {exc.msg}", *line.where
                    continue
                except (ValueError, RecursionError) as exc:
                    # An integer of thousands of digits (Python's int limit), arrays nested too deep.
                    why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split("\n")[0]
                    yield f"not JSON: {why}", *line.where
                    continue
                yield (value if isinstance(value, dict) else "not a JSON object"), *line.where
            return

        # Strict: a quote left open is an error (at the end of the file, or where the field passes
        # `csv`'s field size limit), not a field that takes in every row after it. Such a row is bad
        # from its first line only: the lines after it are read again as rows, so that one stray quote
        # costs one row, not the rest of the ledger. (A row of several lines that `csv` refuses began
        # with a quote no writer of CSV leaves open; the lines it took in are rows of their own.)
        # The header is the first line that is not blank (`ledger_columns` too): `csv` would take a
        # blank first line for a header of no names.
        # Spaces after the commas are skipped only in a ledger whose header has them (written by hand,
        # `t, 0, 1`): a program's CSV (Python's `csv`, pandas) writes a key's leading space as it is,
        # unquoted, and a key read without it named another record.
        # An overlong line is never given to `csv` (`_Texts`): it is a bad row where `csv` reaches past
        # it, before the row `csv` then reads, which is bad too where the line lies inside it (a quoted
        # field's lines would join over it).
        def passed_over() -> Iterator[_LedgerRow]:
            for line in lines.overlong():
                yield text_lines.overlong(line.end - line.start), *line.where

        texts = lines.texts()
        for text in texts:
            if text.strip():
                fieldnames = next(csv.reader([text], skipinitialspace=True), [])
                # (A name after a comma that starts with a space: not a quoted name's own ", ".)
                spaced = any(name.startswith(" ") for name in next(csv.reader([text]), [])[1:])
                break
        else:
            yield from passed_over()
            return
        yield from passed_over()
        reader = csv.DictReader(texts, fieldnames=fieldnames, strict=True, skipinitialspace=spaced)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                yield from passed_over()
                return
            except csv.Error as exc:
                yield from passed_over()
                # The lines `csv` read for the row it could not parse (it reads no further ahead): a quote
                # left open took in the lines after it (to the end, past the field limit, or to a later
                # stray quote). They are read again while the lines read again number no more than the
                # text's: a text whose every line opens a quote again costs two passes, not one per line
                # (its tail is then one bad row).
                bad = lines.take()
                again = len(bad) - 1
                if again and lines.read_again_count + again <= bad[-1].number:
                    lines.read_again(bad[1:])
                    reader = csv.DictReader(
                        texts, fieldnames=fieldnames, strict=True, skipinitialspace=spaced
                    )
                    yield f"not CSV: {exc} in a row of {len(bad)} lines from here; {_AGAIN}", *bad[0].where
                else:
                    start, end = bad[0].start if bad else 0, bad[-1].end if bad else 0
                    yield f"not CSV: {exc}", start, end - start
                continue
            # `csv` reads no line ahead of the row it returns: the lines read since the last row are its.
            mine = lines.take()
            start, end = mine[0].start, mine[-1].end
            skipped = lines.overlong()
            for line in skipped:
                yield text_lines.overlong(line.end - line.start), *line.where
            invalid = next((line.invalid for line in mine if line.invalid is not None), None)
            if any(start < line.start < end for line in skipped):
                yield f"not CSV: {_HOLDS_OVERLONG}", start, end - start
                continue
            if invalid is not None:
                yield f"not UTF-8 (byte {invalid})", start, end - start
                continue
            if not spaced and any(isinstance(v, str) and _SPACED_QUOTE.match(v) for v in row.values()):
                # A row written `t, 0, "a, b"` under a header without spaces: no writer of CSV leaves a
                # quote inside an unquoted field, so the row is read again skipping the spaces after its
                # commas (read as written, its quoted field was cut at its comma).
                try:
                    fields = next(
                        csv.reader([line.text for line in mine], strict=True, skipinitialspace=True)
                    )
                except (csv.Error, StopIteration) as exc:
                    yield f"not CSV: {exc}", start, end - start
                    continue
                row = dict(itertools.zip_longest(fieldnames, fields[: len(fieldnames)]))
            yield (
                {k.strip(): (v if v != "" else None) for k, v in row.items() if k is not None},
                start,
                end - start,
            )


_AGAIN = "the lines after its first were read again as rows"
_HOLDS_OVERLONG = "a line inside its quotes was not read (longer than lines are read)"
# A field that opens a quote after spaces (`, "a, b"` read without skipping the space).
_SPACED_QUOTE = re.compile(r"\s+\"")


@dataclass(frozen=True, slots=True)
class _Line:
    number: int  # 1-based, as `csv`'s `line_num` counts
    start: int
    end: int
    invalid: int | None  # the position of the first byte that is not UTF-8
    text: str
    # Longer than text_lines.MAX_LINE_BYTES: not read (its text empty), a bad row of its own.
    overlong: bool = False

    @property
    def blank(self) -> bool:
        return not self.overlong and not self.text.strip()

    @property
    def where(self) -> tuple[int, int]:
        """(start, length) of the line's bytes."""
        return self.start, self.end - self.start


class _Lines:
    """The lines of a text ledger read as bytes (each ended by `\\n`, `\\r\\n` or `\\r`, as universal
    newlines split them) with the byte positions they span: a bad row's quarantine row names its
    bytes. A line that is not UTF-8 is read with replacement characters and the position of its first
    invalid byte kept, so that its row is quarantined rather than compared as mangled text. A UTF-8
    BOM before the first line is skipped (and counted in the positions)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.pending: list[_Line] = []  # the lines `csv` read since the last `take`
        self.passed_over: list[_Line] = []  # overlong lines not given to `csv` since the last `overlong`
        self.again: collections.deque[_Line] = collections.deque()  # lines to read again, first
        self.read_again_count = 0  # how many lines were handed back to be read again
        self.header_line = 0  # the CSV header's line number, once read

    def __iter__(self) -> Iterator[_Line]:
        position = number = 0
        for raw in text_lines.bounded_lines(self.handle, universal=True):
            if isinstance(raw, int):
                start, position, number = position, position + raw, number + 1
                yield _Line(number, start, position, None, "", overlong=True)
                continue
            start, position, number = position, position + len(raw), number + 1
            body = raw.removeprefix(_UTF8_BOM) if start == 0 else raw
            try:
                text, invalid = body.decode("utf-8"), None
            except UnicodeDecodeError as exc:
                text = body.decode("utf-8", errors="replace")
                invalid = start + len(raw) - len(body) + exc.start
            yield _Line(number, start, position, invalid, text)

    def overlong(self) -> list[_Line]:
        """The overlong lines `csv` was not given since the last call (`_Texts` passes over them)."""
        passed, self.passed_over = self.passed_over, []
        return passed

    def texts(self) -> Iterator[str]:
        """The lines' text, for `csv`, those handed back by `read_again` first; `take` then gives the
        lines of the row it has read. Never exhausted while lines are handed back: `csv` may ask again
        after the end of the file, once a bad row's lines are to be read again."""
        return _Texts(self)

    def read_again(self, lines: list[_Line]) -> None:
        self.again.extendleft(reversed(lines))
        self.read_again_count += len(lines)

    def take(self) -> list[_Line]:
        """The lines read since the last call: those of the row `csv` has just read, without the blank
        lines before it (`csv` skips them) nor the header and the lines before it, at the first call.
        A row of blank lines only (`csv` read none else) is its last line."""
        mine, self.pending = self.pending, []
        while len(mine) > 1 and (mine[0].blank or mine[0].number <= self.header_line):
            mine.pop(0)
        return mine


class _Texts:
    """`_Lines.texts()`: an iterator that a bad row's handed-back lines make go on after the end."""

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines
        self.source = iter(lines)

    def __iter__(self) -> _Texts:
        return self

    def __next__(self) -> str:
        lines = self.lines
        line = lines.again.popleft() if lines.again else next(self.source)
        while line.overlong:
            # Not `csv`'s to read (its text is not there): a bad row of its own (`_ledger_rows`).
            lines.passed_over.append(line)
            line = next(self.source)
        lines.pending.append(line)
        if not lines.header_line and not line.blank:
            lines.header_line = line.number
        return line.text


def _acks_rows(unit: WorkUnit, table: str) -> Iterator[dict[str, Any]]:
    """The `acks` rows of a ledger (`position`: the row's number), or the `quarantine` rows of those
    that cannot be used (`position`, `length`: the row's bytes in a text ledger, its number in Parquet)."""
    ctx = _Provenance(unit)
    for count, (row, at, length) in enumerate(_ledger_rows(unit.file, unit.ledger_root)):
        # A Parquet ledger's rows are numbered by the reader (a row group it cannot read is one item
        # of many rows); a text ledger's are the rows read.
        number = at if length is None else count
        ack = row if isinstance(row, str) else _ack(row)
        if isinstance(ack, str):
            if table == "quarantine":
                message = f"acks row {number}: {ack}"
                error = DecodeError(unit.file, at, CorruptionKind.UNREADABLE_FILE, message, length)
                yield _error_row(ctx, error)
        elif table == "acks":
            yield ctx.row(position=number, **ack)


def _partition_values(path: str, root: str | None) -> dict[str, str | None]:
    """The `name=value` directories between a ledger directory `root` and one of its Parquet files (a
    table partitioned by Spark, pandas or pyarrow, values escaped as Hive escapes them, a null as Hive
    writes it), the innermost first where a name repeats; only the ledger's columns. None without a
    root (a file given alone): directories above the ledger name nothing of it."""
    from urllib.parse import unquote

    if root is None:
        return {}
    values: dict[str, str | None] = {}
    below = os.path.relpath(os.path.dirname(os.path.abspath(path)), os.path.abspath(root))
    for part in reversed(below.split(os.sep)):
        name, sep, value = part.partition("=")
        if sep and name in _ACKS_COLUMNS and name not in values:
            values[name] = None if value == _HIVE_NULL else unquote(value)
    return values


def _times_as_ms(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A Parquet ledger's timestamp and date columns as epoch milliseconds (int64), in Arrow: a value
    past the year 9999 (microseconds in a millisecond column) is then a bad row of its own, where
    Python's datetime failed the rest of its row group."""
    import pyarrow.compute as pc

    columns = []
    for column, field in zip(batch.columns, batch.schema, strict=True):
        kind = field.type
        if pa.types.is_timestamp(kind):
            raw = pc.cast(column, pa.int64())
            scale = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[kind.unit]
            column = pc.multiply_checked(raw, -scale) if scale < 0 else pc.divide(raw, scale)
        elif pa.types.is_date32(kind):
            days = pc.cast(column.view(pa.int32()), pa.int64())
            column = pc.multiply_checked(days, 86_400_000)
        elif pa.types.is_date64(kind):
            column = column.view(pa.int64())
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _epoch_ms(value: Any) -> Any:
    """A ledger's `timestamp` as epoch milliseconds where it is a point in time rather than a number: a
    Parquet timestamp column (pandas' datetime64), or ISO 8601 text; a time with no zone is UTC, as
    `--captured-at` takes it. Anything else is returned as it is, for the integer checks."""
    import datetime as dt

    numeric = _INTEGER_TEXT.fullmatch(value.strip()) if isinstance(value, str) else None
    if isinstance(value, str) and not numeric:
        try:
            value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return round(value.timestamp() * 1000)
    return value


def _ack(row: dict[str, Any]) -> dict[str, Any] | str:
    """The acks columns of one ledger row, or why it cannot be used."""
    out: dict[str, Any] = {}
    for name in _ACKS_INTEGERS:
        value = row.get(name)
        if name == "timestamp":
            value = _epoch_ms(value)
        if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
            value = int(value)  # a Parquet decimal(20, 0) offset
        if value is None:
            if name in ACKS_REQUIRED:
                return f"no {name}"
            out[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, int | str | float):
            return f"{name} {value!r} is not an integer"
        # ASCII digits only: Python's int() also takes `1_0` and other scripts' digits.
        if isinstance(value, str):
            integral = _INTEGER_TEXT.fullmatch(value.strip())
            if integral is None:
                return f"{name} {value!r} is not an integer"
            value = integral.group(1)
        try:
            out[name] = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (ValueError, OverflowError):
            return f"{name} {value!r} is not an integer"
        if out[name] is None:
            return f"{name} {value!r} is not an integer"
        low, high = _ACKS_BOUNDS[name]
        if not low <= out[name] <= high:
            return f"{name} {value!r} is out of range ({low} to {high})"
        if name == "timestamp" and out[name] > _MAX_TIMESTAMP_MS:
            return (
                f"timestamp {value!r} is past the year 9999 as epoch milliseconds (microseconds or "
                "nanoseconds?)"
            )
    for name in _ACKS_STRINGS:
        value = row.get(name)
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                if name in ACKS_REQUIRED:
                    return f"{name} is not UTF-8 (its byte {exc.start})"
                # A binary key (a UUID's bytes, a serializer's): compared with the records' keys as text
                # it proves nothing, as a key the ledger writes another way; the ack is judged without it.
                value = None
        if value is None and name in ACKS_REQUIRED:
            return f"no {name}"
        if value is not None and not isinstance(value, str | int):
            return f"{name} {value!r} is not a string"
        if isinstance(value, str):
            # JSON's `\ud800` escapes and Python's surrogateescape text read fine, but no UTF-8 holds
            # them: the Arrow batch of the whole ledger would fail.
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{name} is not UTF-8 (a lone surrogate at its character {exc.start})"
        out[name] = None if value is None else str(value)
    return out
