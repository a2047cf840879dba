"""Labelled faults injected into real broker-written partition directories, with the findings they cause.

Each fault reads a clean partition directory (v2 batches only, contiguous offsets, no finding above
`info`), changes its batches in memory and writes a new partition directory that is a valid Kafka
log except for the fault: base offsets renumbered to stay contiguous, CRC-32C recomputed over
attributes..end (formats §1.3), `.index`/`.timeindex`/`.txnindex` rebuilt for every segment that
changed, producer snapshots kept only while their state still matches the rewritten log (§4.2), and
the log directory's offset checkpoints and the `leader-epoch-checkpoint` mapped to the new offsets.
The source is never modified.

Each fault also returns the findings a correct audit must emit (audit-contract §4, with the default
profile: `producer.id.expiration.ms` 1 day, `transaction.max.timeout.ms` 15 min, a 5-batch duplicate
window, broker >= 2.5). Every finding above `info` is listed; the `info` findings listed are the ones
the fault causes on purpose. Records carry offset deltas relative to their batch's base offset, so
renumbering only rewrites batch headers.

`python -m kafka_harness.faults --source LOGDIR_OR_PARTITION --out DIR [--fault NAME ...]` writes one
log directory per case and `expected.json`.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import shutil
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from kafka_log_decoder import native
from kafka_log_decoder.checkpoints import (
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
)
from kafka_log_decoder.constants import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CLEAN_SHUTDOWN_FILE_NAME,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    FILE_NAME_OFFSET_DIGITS,
    INDEX_FILE_SUFFIX,
    INT32_MAX,
    LAST_OFFSET_DELTA_OFFSET,
    LEADER_EPOCH_CHECKPOINT_FILENAME,
    LEADER_EPOCH_CHECKPOINT_VERSION,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT_FILENAME,
    MAGIC_VALUE_V2,
    MAX_TIMESTAMP_OFFSET,
    META_PROPERTIES_FILENAME,
    NO_TIMESTAMP,
    NUM_BATCHES_TO_RETAIN,
    OFFSET_CHECKPOINT_FILENAMES,
    OFFSET_CHECKPOINT_VERSION,
    PARTITION_LEADER_EPOCH_OFFSET,
    PARTITION_METADATA_FILENAME,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    TIME_INDEX_FILE_SUFFIX,
    TRANSACTIONAL_FLAG_MASK,
    TXN_INDEX_CURRENT_VERSION,
    TXN_INDEX_FILE_SUFFIX,
)
from kafka_log_decoder.discovery import LogDir, PartitionDir, SegmentFiles, discover
from kafka_log_decoder.errors import DecodeError, NotAKafkaArtifact
from kafka_log_decoder.producer_snapshot import read_producer_snapshot
from kafka_log_decoder.rows import BatchHeader
from kafka_log_decoder.segment import read_log_segment

__all__ = [
    "CORPUS_CASES",
    "FAULTS",
    "CorpusCase",
    "ExpectedFinding",
    "ExpectedFindings",
    "FaultError",
    "FaultNotApplicable",
    "LogBatch",
    "PartitionLog",
    "apply_fault",
    "build_corpus",
    "offset_and_time_index",
    "transaction_index",
]

# The default profile of audit-contract §1 (Kafka >= 3.4): the expected findings assume it.
PRODUCER_ID_EXPIRATION_MS = 86_400_000
TRANSACTION_MAX_TIMEOUT_MS = 900_000
DUPLICATE_WINDOW_BATCHES = NUM_BATCHES_TO_RETAIN
PROFILE = {
    "broker_line": "3.4",
    "producer_id_expiration_ms": PRODUCER_ID_EXPIRATION_MS,
    "transaction_max_timeout_ms": TRANSACTION_MAX_TIMEOUT_MS,
    "duplicate_window_batches": DUPLICATE_WINDOW_BATCHES,
}
COMPARISON = (
    "An audit of the rewritten log matches when its findings above info equal the listed findings above "
    "info on (kind, topic, partition, producer_id, first_offset), and each listed info finding is present; "
    "other info findings (e.g. an EPOCH_BUMP already in the source) are allowed."
)
# LogConfig index.interval.bytes default: an offset-index entry after this many bytes of batches.
INDEX_INTERVAL_BYTES = 4096
SEQUENCE_MODULUS = 1 << 31

# Contract §4 severities of the kinds the faults cause, written out here rather than imported from
# audit_rules so that the corpus stays an oracle independent of the auditor it checks.
SEVERITY = {
    "SEQUENCE_GAP": "critical",
    "SEQUENCE_GAP_UNVERIFIED": "warning",
    "HISTORY_TRUNCATED_BY_RETENTION": "info",
    "PRODUCER_STATE_RETAINED": "info",
    "DUPLICATE_BATCH": "error",
    "SEQUENCE_REGRESSION": "error",
    "EPOCH_REGRESSION": "error",
    "HANGING_TRANSACTION": "error",
    "CRC_MISMATCH": "error",
    "TRUNCATED_TAIL": "warning",
}

_OFFSET_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")
_TXN_INDEX_ENTRY = struct.Struct(">hqqqq")


class FaultError(ValueError):
    """A source that is not a clean v2 partition, an output that would touch the source, or bad params."""


class FaultNotApplicable(FaultError):
    """The partition holds nothing the fault can act on (e.g. no transactional producer for drop_marker)."""


# ---------------------------------------------------------------------------------------------
# Expected findings


@dataclass(frozen=True)
class ExpectedFinding:
    """A finding a correct audit of the rewritten log emits; offsets are those of the rewritten log.

    `producer_id` is None where the finding is not about a producer (corruption of the bytes).
    `related_offset` and `missing_records` are given where contract §3 defines them for the kind.
    """

    kind: str
    topic: str
    partition: int
    producer_id: int | None
    first_offset: int
    severity: str
    related_offset: int | None = None
    missing_records: int | None = None


@dataclass
class ExpectedFindings:
    """What one fault did to one partition and every finding it causes (compare as `COMPARISON` says)."""

    fault: str
    topic: str
    partition: int
    partition_dir: str
    description: str
    params: dict[str, Any]
    findings: list[ExpectedFinding]
    profile: dict[str, Any] = field(default_factory=lambda: dict(PROFILE))

    def above_info(self) -> list[ExpectedFinding]:
        return [f for f in self.findings if f.severity != "info"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Batches and partition logs in memory


class LogBatch:
    """One v2 batch whose header fields can be rewritten; fields inside the CRC re-seal it at once.

    `origin_offset` is the base offset in the source log (None for a batch the fault inserted);
    `segment` indexes `PartitionLog.segments`. Control type and coordinator epoch come from the
    source decode (no fault rewrites records).
    """

    __slots__ = (
        "control_type",
        "coordinator_epoch",
        "corrupt",
        "data",
        "origin_offset",
        "original",
        "segment",
    )

    def __init__(
        self,
        data: bytes,
        segment: int,
        origin_offset: int | None,
        control_type: str | None = None,
        coordinator_epoch: int | None = None,
    ) -> None:
        self.data = bytearray(data)
        self.original = bytes(data)
        self.segment = segment
        self.origin_offset = origin_offset
        self.control_type = control_type
        self.coordinator_epoch = coordinator_epoch
        # True once a fault damaged the bytes on purpose: never re-sealed, takes no part in replay.
        self.corrupt = False

    def copy(self, segment: int) -> LogBatch:
        return LogBatch(bytes(self.data), segment, None, self.control_type, self.coordinator_epoch)

    def _get(self, fmt: str, at: int) -> int:
        value: int = struct.unpack_from(fmt, self.data, at)[0]
        return value

    def _set(self, fmt: str, at: int, value: int, *, sealed: bool) -> None:
        struct.pack_into(fmt, self.data, at, value)
        if sealed and not self.corrupt:
            self.seal()

    def seal(self) -> None:
        """Recompute the CRC-32C over attributes..end (`DefaultRecordBatch.computeChecksum`)."""
        struct.pack_into(
            ">I", self.data, CRC_OFFSET, native.crc32c(memoryview(self.data)[ATTRIBUTES_OFFSET:])
        )

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def base_offset(self) -> int:
        return self._get(">q", 0)

    @base_offset.setter
    def base_offset(self, value: int) -> None:
        self._set(">q", 0, value, sealed=False)  # outside the CRC: the broker assigns it

    @property
    def partition_leader_epoch(self) -> int:
        return self._get(">i", PARTITION_LEADER_EPOCH_OFFSET)

    @partition_leader_epoch.setter
    def partition_leader_epoch(self, value: int) -> None:
        self._set(">i", PARTITION_LEADER_EPOCH_OFFSET, value, sealed=False)

    @property
    def attributes(self) -> int:
        return self._get(">h", ATTRIBUTES_OFFSET)

    @property
    def last_offset_delta(self) -> int:
        return self._get(">i", LAST_OFFSET_DELTA_OFFSET)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def base_timestamp(self) -> int:
        return self._get(">q", BASE_TIMESTAMP_OFFSET)

    @property
    def max_timestamp(self) -> int:
        return self._get(">q", MAX_TIMESTAMP_OFFSET)

    def shift_timestamps(self, delta_ms: int) -> None:
        """Move the batch in time; record timestamps are deltas from baseTimestamp, so they follow."""
        # Both lie inside the CRC: sealed once, whichever of them is set.
        changed = False
        for at, value in (
            (BASE_TIMESTAMP_OFFSET, self.base_timestamp),
            (MAX_TIMESTAMP_OFFSET, self.max_timestamp),
        ):
            if value != NO_TIMESTAMP:
                self._set(">q", at, value + delta_ms, sealed=False)
                changed = True
        if changed and not self.corrupt:
            self.seal()

    @property
    def producer_id(self) -> int:
        return self._get(">q", PRODUCER_ID_OFFSET)

    @producer_id.setter
    def producer_id(self, value: int) -> None:
        self._set(">q", PRODUCER_ID_OFFSET, value, sealed=True)

    @property
    def producer_epoch(self) -> int:
        return self._get(">h", PRODUCER_EPOCH_OFFSET)

    @producer_epoch.setter
    def producer_epoch(self, value: int) -> None:
        self._set(">h", PRODUCER_EPOCH_OFFSET, value, sealed=True)

    @property
    def base_sequence(self) -> int:
        return self._get(">i", BASE_SEQUENCE_OFFSET)

    @base_sequence.setter
    def base_sequence(self, value: int) -> None:
        self._set(">i", BASE_SEQUENCE_OFFSET, value, sealed=True)

    @property
    def last_sequence(self) -> int:
        """`incrementSequence(baseSequence, lastOffsetDelta)` (formats §1.4); -1 without a sequence."""
        if self.base_sequence < 0:
            return self.base_sequence
        return (self.base_sequence + self.last_offset_delta) % SEQUENCE_MODULUS

    @property
    def count(self) -> int:
        return self._get(">i", RECORDS_COUNT_OFFSET)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def is_end_txn_marker(self) -> bool:
        return self.is_control and self.control_type in ("COMMIT", "ABORT") and self.count > 0

    @property
    def sequence_range(self) -> tuple[int, int]:
        return self.base_sequence, self.last_sequence

    @property
    def changed(self) -> bool:
        return self.data != self.original or self.origin_offset is None

    def describe(self) -> str:
        return (
            f"offsets {self.base_offset}-{self.last_offset} (pid {self.producer_id}, epoch "
            f"{self.producer_epoch}, sequences {self.base_sequence}-{self.last_sequence})"
        )


@dataclass
class _Segment:
    """A source segment: its base offset, its files, and whether a fault emptied it on purpose."""

    base_offset: int
    files: SegmentFiles
    # Base offsets of the source batches it held: a segment written back with exactly these
    # batches, unchanged, keeps its index files.
    origin_offsets: list[int] = field(default_factory=list)
    deleted: bool = False


@dataclass
class PartitionLog:
    """A partition directory read into memory: batches in log order, the files around them, and the
    log directory's checkpoint entries for this partition."""

    source: PartitionDir
    segments: list[_Segment]
    batches: list[LogBatch]
    log_start_offset: int
    # name of an offset checkpoint file of the source log dir -> this partition's entry (None: no entry)
    checkpoints: dict[str, int | None]
    log_dir: Path | None
    leader_epochs: list[tuple[int, int]] | None
    # The batches a snapshot may describe unchanged; delete_head_segment drops the deleted ones.
    unchanged_reference: list[LogBatch] = field(default_factory=list)
    source_log_end_offset: int = 0
    # Bytes of a batch torn by a crash, left after the last whole batch of the last segment.
    torn_tail: bytes = b""
    clean_shutdown: bool = True

    @property
    def topic(self) -> str:
        return self.source.topic

    @property
    def partition(self) -> int:
        return self.source.partition

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def read(cls, path: str | Path) -> PartitionLog:
        """Read a clean partition directory; anything else raises `FaultError` with the reason."""
        source = _discover_partition(Path(path))
        if source.is_internal:
            raise FaultNotApplicable(
                f"{source.path}: internal topic {source.topic} (compacted, not a data log)"
            )
        if not source.segments:
            raise FaultError(f"{source.path}: no .log segment")
        segments = [_Segment(files.base_offset, files) for files in source.segments]
        batches: list[LogBatch] = []
        for index, segment in enumerate(segments):
            read = list(_read_segment(segment.files.log.path, index))
            segment.origin_offsets = [b.base_offset for b in read]
            batches.extend(read)
        if not batches:
            raise FaultNotApplicable(f"{source.path}: the log holds no batch")
        for previous, batch in itertools.pairwise(batches):
            if batch.base_offset != previous.last_offset + 1:
                raise FaultError(
                    f"{source.path}: offsets jump from {previous.last_offset} to {batch.base_offset} "
                    "(a compacted log?); faults need contiguous offsets"
                )
        log_dir = Path(source.path).parent
        checkpoints = _partition_checkpoints(log_dir, source.topic, source.partition)
        log_start = max(segments[0].base_offset, checkpoints.get(LOG_START_OFFSET_CHECKPOINT_FILENAME) or 0)
        leader_epochs = None
        if source.leader_epoch_checkpoint is not None:
            entries, errors = read_leader_epoch_checkpoint(source.leader_epoch_checkpoint.path)
            if errors:
                raise FaultError(str(errors[0]))
            leader_epochs = [(e.epoch, e.start_offset) for e in entries]
        return cls(
            source=source,
            segments=segments,
            batches=batches,
            log_start_offset=log_start,
            checkpoints=checkpoints,
            log_dir=log_dir if _has_log_dir_files(log_dir) else None,
            leader_epochs=leader_epochs,
            unchanged_reference=list(batches),
            source_log_end_offset=batches[-1].last_offset + 1,
        )

    # -- views --------------------------------------------------------------------------------

    def trusted(self) -> list[LogBatch]:
        """Batches an audit replays: every readable batch whose CRC holds."""
        return [b for b in self.batches if not b.corrupt]

    def producer_batches(self, producer_id: int) -> list[LogBatch]:
        return [b for b in self.trusted() if b.producer_id == producer_id]

    def streams(self) -> dict[tuple[int, int], list[LogBatch]]:
        """Data batches per (producer id, epoch), in offset order: the unit of the sequence rules."""
        out: dict[tuple[int, int], list[LogBatch]] = {}
        for b in self.trusted():
            if b.producer_id >= 0 and not b.is_control:
                out.setdefault((b.producer_id, b.producer_epoch), []).append(b)
        return dict(sorted(out.items()))

    def index_of(self, batch: LogBatch) -> int:
        return next(i for i, b in enumerate(self.batches) if b is batch)

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1

    # -- edits --------------------------------------------------------------------------------

    def remove(self, batch: LogBatch) -> None:
        del self.batches[self.index_of(batch)]

    def insert_after(self, anchor: LogBatch | None, batch: LogBatch) -> None:
        """Put `batch` right after `anchor` (at the log end when None), in the anchor's segment."""
        at = len(self.batches) if anchor is None else self.index_of(anchor) + 1
        neighbour = self.batches[at - 1]
        batch.segment = neighbour.segment if anchor is not None else len(self.segments) - 1
        # The leader that appends the copy stamps its own epoch (never lower than the batch before).
        batch.partition_leader_epoch = max(batch.partition_leader_epoch, neighbour.partition_leader_epoch)
        self.batches.insert(at, batch)

    def swap(self, first: LogBatch, second: LogBatch) -> None:
        """Exchange two batches' places; each slot keeps its segment and partition leader epoch."""
        i, j = self.index_of(first), self.index_of(second)
        self.batches[i], self.batches[j] = second, first
        first.segment, second.segment = second.segment, first.segment
        first_epoch, second_epoch = first.partition_leader_epoch, second.partition_leader_epoch
        first.partition_leader_epoch, second.partition_leader_epoch = second_epoch, first_epoch

    def renumber(self) -> None:
        """Contiguous base offsets from the first batch's: only headers change (records hold deltas)."""
        next_offset = self.batches[0].base_offset
        for batch in self.batches:
            batch.base_offset = next_offset
            next_offset = batch.last_offset + 1

    # -- offsets of the rewritten log ----------------------------------------------------------

    def map_offset(self, old: int) -> int:
        """Where a source offset (log start, high watermark, epoch start) lies now: inside a source
        batch still in the log, at the same place in it (DeleteRecords leaves the log start, and so the
        first leader epoch's start, inside a batch); else at the first batch from at or after it."""
        for b in self.batches:
            origin = b.origin_offset
            if origin is not None and origin <= old <= origin + b.last_offset_delta:
                return b.base_offset + (old - origin)
        moved = [
            b.base_offset for b in self.batches if b.origin_offset is not None and b.origin_offset >= old
        ]
        return min(moved, default=self.log_end_offset)

    def first_changed_offset(self) -> int:
        """The lowest source offset from which the log differs: snapshots at or below it still hold."""
        kept = self.unchanged_reference
        for old, new in zip(kept, self.batches, strict=False):
            if old is not new or new.changed or new.base_offset != old.origin_offset:
                assert old.origin_offset is not None
                return old.origin_offset
        if len(kept) > len(self.batches):
            origin = kept[len(self.batches)].origin_offset
            assert origin is not None
            return origin
        return self.source_log_end_offset

    # -- writing ------------------------------------------------------------------------------

    def write(self, out_partition_dir: str | Path) -> Path:
        """Write the rewritten partition directory, and its checkpoint entries in its log directory."""
        out = _check_output(Path(self.source.path), Path(out_partition_dir))
        out.mkdir(parents=True)
        layout = self._segment_layout()
        txn_entries = transaction_index(self.trusted())
        for segment, base, batches in layout:
            self._write_segment(out, segment, base, batches, txn_entries, last=segment is layout[-1][0])
        self._write_snapshots(out)
        if self.source.partition_metadata is not None:
            shutil.copyfile(self.source.partition_metadata.path, out / PARTITION_METADATA_FILENAME)
        if self.leader_epochs is not None:
            _write_text(out / LEADER_EPOCH_CHECKPOINT_FILENAME, self._leader_epoch_text())
        if self.log_dir is not None:
            self._write_log_dir_files(out.parent)
        return out

    def _segment_layout(self) -> list[tuple[_Segment, int, list[LogBatch]]]:
        by_segment: dict[int, list[LogBatch]] = {}
        last_segment = -1
        for batch in self.batches:
            if batch.segment < last_segment:
                raise AssertionError(f"batch {batch.describe()} would go back to an earlier segment")
            last_segment = batch.segment
            by_segment.setdefault(batch.segment, []).append(batch)
        layout: list[tuple[_Segment, int, list[LogBatch]]] = []
        next_offset = self.batches[0].base_offset
        for index, segment in enumerate(self.segments):
            batches = by_segment.get(index, [])
            holds_torn_tail = bool(self.torn_tail) and index == len(self.segments) - 1
            if segment.deleted or not (batches or holds_torn_tail or _source_segment_empty(segment)):
                continue  # deleted by the fault, or emptied by it (the broker keeps no empty old segment)
            if batches:
                base = batches[0].base_offset
                if not layout:  # the first segment keeps its name: it may start below its first batch
                    base = min(segment.base_offset, base)
                next_offset = batches[-1].last_offset + 1
            else:
                base = next_offset  # an empty (active) segment starts at the log end
            layout.append((segment, base, batches))
        return layout

    def _write_segment(
        self,
        out: Path,
        segment: _Segment,
        base: int,
        batches: list[LogBatch],
        txn_entries: dict[int, list[tuple[int, int, int, int]]],
        *,
        last: bool,
    ) -> None:
        stem = out / f"{base:0{FILE_NAME_OFFSET_DIGITS}d}"
        tail = self.torn_tail if last else b""
        with open(stem.with_suffix(LOG_FILE_SUFFIX), "wb") as handle:
            for batch in batches:
                handle.write(batch.data)
            handle.write(tail)
        files = segment.files
        unchanged = (
            base == segment.base_offset
            and not tail
            and [b.origin_offset for b in batches] == segment.origin_offsets
            and not any(b.changed for b in batches)
        )
        if unchanged:
            for source_file, suffix in (
                (files.index, INDEX_FILE_SUFFIX),
                (files.timeindex, TIME_INDEX_FILE_SUFFIX),
                (files.txnindex, TXN_INDEX_FILE_SUFFIX),
            ):
                if source_file is not None:
                    shutil.copyfile(source_file.path, stem.with_suffix(suffix))
            return
        offset_index, time_index = offset_and_time_index(batches, base)
        stem.with_suffix(INDEX_FILE_SUFFIX).write_bytes(offset_index)
        stem.with_suffix(TIME_INDEX_FILE_SUFFIX).write_bytes(time_index)
        entries = [e for b in batches for e in txn_entries.get(id(b), [])]
        if entries or files.txnindex is not None:
            stem.with_suffix(TXN_INDEX_FILE_SUFFIX).write_bytes(
                b"".join(_TXN_INDEX_ENTRY.pack(TXN_INDEX_CURRENT_VERSION, *e) for e in entries)
            )

    def _write_snapshots(self, out: Path) -> None:
        """Keep a snapshot only where the state it holds (every batch below its offset) is unchanged, and
        its segment is kept: the broker deletes a segment's snapshot with it, not below a log start that
        DeleteRecords moved into a kept segment."""
        valid_up_to = min(self.first_changed_offset(), self.log_end_offset)
        kept_from = min(
            (s.base_offset for s in self.segments if not s.deleted), default=self.log_start_offset
        )
        for snapshot in self.source.snapshots:
            if min(kept_from, self.log_start_offset) <= snapshot.offset <= valid_up_to:
                name = f"{snapshot.offset:0{FILE_NAME_OFFSET_DIGITS}d}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"
                shutil.copyfile(snapshot.file.path, out / name)

    def _leader_epoch_text(self) -> str:
        assert self.leader_epochs is not None
        entries: list[tuple[int, int]] = []
        for epoch, start in self.leader_epochs:
            mapped = self.map_offset(start)
            if start < self.log_start_offset:
                # LeaderEpochFileCache.truncateFromStart: the epoch covering the new log start starts there.
                entries = [e for e in entries if e[1] >= self.log_start_offset]
                mapped = self.log_start_offset
            if entries and entries[-1][1] == mapped:
                entries.pop()  # an epoch that wrote nothing left of the log: the later one starts there
            entries.append((epoch, mapped))
        lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(entries)), *(f"{e} {s}" for e, s in entries)]
        return "\n".join(lines) + "\n"

    def _write_log_dir_files(self, out_log_dir: Path) -> None:
        assert self.log_dir is not None
        meta = self.log_dir / META_PROPERTIES_FILENAME
        if meta.exists() and not (out_log_dir / META_PROPERTIES_FILENAME).exists():
            shutil.copyfile(meta, out_log_dir / META_PROPERTIES_FILENAME)
        clean = self.log_dir / CLEAN_SHUTDOWN_FILE_NAME
        if not self.clean_shutdown:
            (out_log_dir / CLEAN_SHUTDOWN_FILE_NAME).unlink(missing_ok=True)
        elif clean.exists() and not (out_log_dir / CLEAN_SHUTDOWN_FILE_NAME).exists():
            shutil.copyfile(clean, out_log_dir / CLEAN_SHUTDOWN_FILE_NAME)
        for name, old in self.checkpoints.items():
            offset = None if old is None else min(self.map_offset(old), self.log_end_offset)
            if name == LOG_START_OFFSET_CHECKPOINT_FILENAME and self.log_start_offset > (old or 0):
                offset = self.log_start_offset
            _update_offset_checkpoint(out_log_dir / name, self.topic, self.partition, offset)


def _discover_partition(path: Path) -> PartitionDir:
    try:
        found = discover([path])
    except NotAKafkaArtifact as exc:
        raise FaultError(str(exc)) from None
    if len(found) != 1 or not isinstance(found[0], PartitionDir):
        raise FaultError(f"{path}: not a partition directory (<topic>-<partition> holding .log files)")
    return found[0]


def _read_segment(path: str, segment: int) -> Iterator[LogBatch]:
    with open(path, "rb") as handle:
        data = handle.read()
    for item in read_log_segment(path):
        if isinstance(item, DecodeError):
            raise FaultError(f"source is not clean: {item}")
        if not isinstance(item, BatchHeader):
            continue
        if item.magic != MAGIC_VALUE_V2:
            raise FaultError(
                f"{path}: byte {item.position}: magic {item.magic} entry; faults need v2 batches"
            )
        raw = data[item.position : item.position + item.size_bytes]
        yield LogBatch(raw, segment, item.base_offset, item.control_type, item.coordinator_epoch)


def _source_segment_empty(segment: _Segment) -> bool:
    return segment.files.log.size == 0


def _has_log_dir_files(log_dir: Path) -> bool:
    names = (*OFFSET_CHECKPOINT_FILENAMES, META_PROPERTIES_FILENAME)
    return any((log_dir / name).exists() for name in names)


def _partition_checkpoints(log_dir: Path, topic: str, partition: int) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in OFFSET_CHECKPOINT_FILENAMES:
        path = log_dir / name
        if not path.exists():
            continue
        entries, errors = read_offset_checkpoint(path)
        if errors:
            raise FaultError(f"source is not clean: {errors[0]}")
        out[name] = next((e.offset for e in entries if (e.topic, e.partition) == (topic, partition)), None)
    return out


def _update_offset_checkpoint(path: Path, topic: str, partition: int, offset: int | None) -> None:
    """Set (or, with None, leave out) this partition's line, keeping other partitions' lines."""
    entries: dict[tuple[str, int], int] = {}
    if path.exists():
        existing, errors = read_offset_checkpoint(path)
        if errors:
            raise FaultError(str(errors[0]))
        entries = {(e.topic, e.partition): e.offset for e in existing}
    entries.pop((topic, partition), None)
    if offset is not None:
        entries[(topic, partition)] = offset
    lines = [str(OFFSET_CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    _write_text(path, "\n".join(lines) + "\n")


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _check_output(source: Path, out: Path) -> Path:
    """The output must be a new directory named like the source, outside the source's log directory."""
    source, resolved = source.resolve(), out.resolve()
    if resolved.name != source.name:
        raise FaultError(f"{out}: the output partition directory must be named {source.name}")
    if resolved.parent == source.parent or (
        _has_log_dir_files(source.parent) and resolved.is_relative_to(source.parent)
    ):
        raise FaultError(f"{out}: would write into the source log directory {source.parent}")
    if resolved.is_relative_to(source) or source.is_relative_to(resolved):
        raise FaultError(f"{out}: overlaps the source {source}")
    if resolved.exists():
        raise FaultError(f"{out}: already exists")
    return out


# ---------------------------------------------------------------------------------------------
# Index files, rebuilt the way the broker writes them


def offset_and_time_index(
    batches: Sequence[LogBatch], base_offset: int, index_interval_bytes: int = INDEX_INTERVAL_BYTES
) -> tuple[bytes, bytes]:
    """`.index` and `.timeindex` bytes of a segment holding `batches`, as `LogSegment.append` and the
    roll/close of the segment leave them (formats §3.3, §3.4).

    An entry pair is added before a batch once more than `index.interval.bytes` were appended since
    the last one: offset entry (batch lastOffset, its position), time entry (max timestamp so far, the
    last offset of the batch that carried it). Closing the segment appends the final time entry.
    """
    offsets, times = bytearray(), bytearray()
    last_time = (NO_TIMESTAMP, base_offset)
    max_timestamp, offset_of_max = NO_TIMESTAMP, base_offset

    def maybe_append_time() -> None:
        nonlocal last_time
        # TimeIndex.maybeAppend: only a strictly greater timestamp makes an entry.
        if max_timestamp > last_time[0]:
            times.extend(_TIME_INDEX_ENTRY.pack(max_timestamp, offset_of_max - base_offset))
            last_time = (max_timestamp, offset_of_max)

    position = bytes_since_entry = 0
    for batch in batches:
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
        if bytes_since_entry > index_interval_bytes:
            offsets.extend(_OFFSET_INDEX_ENTRY.pack(batch.last_offset - base_offset, position))
            maybe_append_time()
            bytes_since_entry = 0
        bytes_since_entry += batch.size
        position += batch.size
    maybe_append_time()
    return bytes(offsets), bytes(times)


def transaction_index(batches: Iterable[LogBatch]) -> dict[int, list[tuple[int, int, int, int]]]:
    """`.txnindex` entries (producer id, first offset, last offset, last stable offset) keyed by the
    `id()` of the ABORT marker that completes each aborted transaction (formats §3.5).

    A transaction opens at a producer's first transactional data batch while none is open and is
    completed by its next COMMIT/ABORT marker; the last stable offset is the first offset of the
    earliest other open transaction, else the marker's offset + 1
    (`ProducerStateManager.lastStableOffset`).
    """
    open_first: dict[int, int] = {}
    entries: dict[int, list[tuple[int, int, int, int]]] = {}
    for batch in batches:
        pid = batch.producer_id
        if pid < 0:
            continue
        if batch.is_end_txn_marker:
            first = open_first.pop(pid, None)
            if first is not None and batch.control_type == "ABORT":
                last_stable = min(open_first.values(), default=batch.base_offset + 1)
                entries.setdefault(id(batch), []).append((pid, first, batch.base_offset, last_stable))
        elif not batch.is_control and batch.is_transactional and pid not in open_first:
            open_first[pid] = batch.base_offset
    return entries


# ---------------------------------------------------------------------------------------------
# Shared reasoning about the rewritten log


def _finding(
    log: PartitionLog,
    kind: str,
    first_offset: int,
    producer_id: int | None,
    *,
    related: LogBatch | None = None,
    missing_records: int | None = None,
) -> ExpectedFinding:
    return ExpectedFinding(
        kind=kind,
        topic=log.topic,
        partition=log.partition,
        producer_id=producer_id,
        first_offset=first_offset,
        severity=SEVERITY[kind],
        related_offset=None if related is None else related.base_offset,
        missing_records=missing_records,
    )


def _span(batch: LogBatch) -> int:
    """How many sequence numbers a batch covers (lastOffsetDelta + 1 when not compacted)."""
    return (batch.last_sequence - batch.base_sequence) % SEQUENCE_MODULUS + 1


def _gap(log: PartitionLog, before: LogBatch, after: LogBatch, missing: int) -> ExpectedFinding:
    """The gap at `after` once `missing` sequence numbers after `before` are in no batch of the epoch.

    SEQUENCE_GAP, or SEQUENCE_GAP_UNVERIFIED when the producer was idle for at least
    `producer.id.expiration.ms` since its last row (batch or marker: 2.5+ count markers) before
    `after`, with no transaction open there: a >= 2.5 broker had expired its state and accepted any
    sequence (formats §5.5, §5.7), so loss cannot be shown. A broker never expires a producer with a
    transaction open (`isProducerExpired`).
    """
    rows = log.producer_batches(after.producer_id)
    at = next((i for i, b in enumerate(rows) if b is after), None)
    last = rows[at - 1] if at else before
    open_transaction = last.is_transactional and not last.is_control
    idle = after.max_timestamp - last.max_timestamp
    expired = idle >= PRODUCER_ID_EXPIRATION_MS and not open_transaction
    kind = "SEQUENCE_GAP_UNVERIFIED" if expired else "SEQUENCE_GAP"
    return _finding(log, kind, after.base_offset, after.producer_id, related=before, missing_records=missing)


def _hanging_transactions(log: PartitionLog) -> list[ExpectedFinding]:
    """HANGING_TRANSACTION for each producer whose transactional data after its last marker began more
    than `transaction.max.timeout.ms` before the partition's last timestamp (KIP-664), on one clock at a
    time, the longer: the newest marker's less the earliest marker's after its first batch, summed over
    the partition leader epochs (the brokers'), and the newest data batch's less its first batch's (the
    producers')."""
    trusted = log.trusted()
    if not trusted:
        return []
    data_max = max((b.max_timestamp for b in trusted if not b.is_control), default=None)
    markers = [b for b in trusted if b.is_control]

    def age(first: LogBatch) -> int:
        ages = [] if data_max is None else [data_max - first.max_timestamp]
        by_leader: dict[int, list[int]] = {}
        for m in markers:
            if m.base_offset > first.base_offset:
                by_leader.setdefault(m.partition_leader_epoch, []).append(m.max_timestamp)
        if by_leader:
            ages.append(sum(max(times) - min(times) for times in by_leader.values()))
        return max(ages, default=0)

    open_first: dict[int, LogBatch] = {}
    for b in trusted:
        if b.producer_id < 0:
            continue
        if b.is_control:
            open_first.pop(b.producer_id, None)
        elif b.is_transactional:
            open_first.setdefault(b.producer_id, b)
    return [
        _finding(log, "HANGING_TRANSACTION", first.base_offset, pid)
        for pid, first in sorted(open_first.items())
        if age(first) > TRANSACTION_MAX_TIMEOUT_MS
    ]


def _pick_stream(
    log: PartitionLog,
    producer_id: int | None,
    producer_epoch: int | None,
    usable: Callable[[list[LogBatch]], bool],
    needs: str,
) -> tuple[tuple[int, int], list[LogBatch]]:
    """The (pid, epoch) data stream to act on: the given one, else the longest usable one (lowest pid)."""
    candidates = [
        (key, stream)
        for key, stream in log.streams().items()
        if (producer_id is None or key[0] == producer_id)
        and (producer_epoch is None or key[1] == producer_epoch)
        and usable(stream)
    ]
    if not candidates:
        wanted = "" if producer_id is None else f" of producer {producer_id}"
        raise FaultNotApplicable(f"{log.name}: no producer epoch{wanted} with {needs}")
    return max(candidates, key=lambda c: (len(c[1]), -c[0][0], -c[0][1]))


def _index_in(stream: list[LogBatch], batch_index: int | None, default: int, low: int, high: int) -> int:
    index = default if batch_index is None else batch_index
    if not low <= index <= high:
        raise FaultError(f"batch_index {index} outside {low}..{high} for a stream of {len(stream)} batches")
    return index


# ---------------------------------------------------------------------------------------------
# The faults. Each takes the log and keyword params, edits the log, and returns what it did.


class Injection(NamedTuple):
    description: str
    params: dict[str, Any]
    findings: list[ExpectedFinding]


def drop_batch(
    log: PartitionLog,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    batch_index: int | None = None,
) -> Injection:
    """Remove a middle data batch of an idempotent producer (default: the middle of its longest epoch).

    Rule (contract §4 SEQUENCE_GAP, KIP-98 next-sequence): the next batch of the same (pid, epoch)
    starts at `dropped.lastSeq + 1 > prev.lastSeq + 1`, the earlier batch is retained, and the
    dropped numbers appear nowhere else in the epoch, so one SEQUENCE_GAP at the batch after the
    dropped one (`related_offset` = the batch before it, `missing_records` = the dropped count).
    It is SEQUENCE_GAP_UNVERIFIED instead only if those two batches are a day or more apart. The
    dropped batch is a middle one, so neither HISTORY_START_MISSING nor NEW_EPOCH_NONZERO_SEQUENCE
    can arise, and nothing follows a last batch to show a gap.
    """
    (pid, epoch), stream = _pick_stream(
        log, producer_id, producer_epoch, lambda s: len(s) >= 3, "three or more data batches"
    )
    k = _index_in(stream, batch_index, len(stream) // 2, 1, len(stream) - 2)
    before, dropped, after = stream[k - 1], stream[k], stream[k + 1]
    described = dropped.describe()
    log.remove(dropped)
    log.renumber()
    return Injection(
        f"dropped the data batch at {described}",
        {
            "producer_id": pid,
            "producer_epoch": epoch,
            "batch_index": k,
            "dropped_offset": dropped.origin_offset,
        },
        [_gap(log, before, after, _span(dropped))],
    )


def duplicate_batch(
    log: PartitionLog,
    *,
    distance: int | None = 2,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    batch_index: int | None = None,
) -> Injection:
    """Append a copy of an earlier non-transactional data batch of the same producer right after the
    `distance`-th following batch of that producer (so `distance` of its batches lie between the two
    copies), or at the log end when `distance` is None.

    Rule (contract §4 DUPLICATE_BATCH, formats §5.2): the same (pid, epoch, baseSeq, lastSeq) at two
    offsets; `related_offset` = the original. A broker keeps the last 5 batches per producer, so it
    should have caught the retry iff fewer than 5 batches lie between (`distance` < 5) and the
    producer was not idle past `producer.id.expiration.ms`; the case says which ("window"). Nothing
    else: the copy is an exact duplicate (so no SEQUENCE_REGRESSION), and the batch after the copy
    jumps forward only over numbers that are retained before it (so no SEQUENCE_GAP). The batch is
    non-transactional so the copy opens no transaction.
    """
    if distance is not None and distance < 0:
        raise FaultError(f"distance must be >= 0 (or None for the log end), not {distance}")
    minimum = 1 if distance is None else distance + 1

    def usable(stream: list[LogBatch]) -> bool:
        # At the log end, after the producer's last row: a copy after a later epoch would be an
        # EPOCH_REGRESSION (RULES step 2), not a duplicate.
        last = distance is not None or log.producer_batches(stream[0].producer_id)[-1] is stream[-1]
        return len(stream) >= minimum and not any(b.is_transactional for b in stream) and last

    (pid, epoch), stream = _pick_stream(
        log,
        producer_id,
        producer_epoch,
        usable,
        f"{minimum} or more non-transactional data batches"
        + (", the producer's last" if distance is None else ""),
    )
    n = len(stream)
    if distance is None:
        k = _index_in(stream, batch_index, 0, 0, n - 1)
        anchor, between, previous = None, n - 1 - k, stream[-1]
    else:
        # Default: leave one batch of the producer after the copy, to show it is not a gap.
        k = _index_in(stream, batch_index, max(0, n - distance - 2), 0, n - 1 - distance)
        anchor = previous = stream[k + distance]
        between = distance
    original = stream[k]
    copy = original.copy(segment=original.segment)
    log.insert_after(anchor, copy)
    log.renumber()
    fresh = copy.max_timestamp - previous.max_timestamp < PRODUCER_ID_EXPIRATION_MS
    window = "inside" if between < DUPLICATE_WINDOW_BATCHES and fresh else "outside"
    return Injection(
        f"copied the data batch at {original.describe()} to offset {copy.base_offset}, "
        f"{between} batch(es) of the producer later ({window} the broker's duplicate window)",
        {
            "producer_id": pid,
            "producer_epoch": epoch,
            "batch_index": k,
            "distance": distance,
            "batches_between": between,
            "window": window,
        },
        [_finding(log, "DUPLICATE_BATCH", copy.base_offset, pid, related=original)],
    )


def reorder_batches(
    log: PartitionLog,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    batch_index: int | None = None,
) -> Injection:
    """Swap two consecutive data batches b[k], b[k+1] of one (pid, epoch) (k >= 1) in the log.

    Rule (contract §4 SEQUENCE_REGRESSION and the parenthesis of SEQUENCE_GAP): in offset order
    b[k+1] jumps over b[k]'s numbers, but they appear later in the epoch, so nothing is lost and
    there is no SEQUENCE_GAP; b[k] then has `baseSeq <= prev.lastSeq` and is no exact duplicate:
    one SEQUENCE_REGRESSION at b[k], the second of the two in offset order. b[k+2] jumps over b[k+1]'s
    numbers, which are retained: nothing. k >= 1 keeps b[k+1] from becoming the first batch of its
    epoch (which would start mid-sequence); no marker of the producer lies between the two, so no
    transaction changes shape.
    """

    def no_marker_between(stream: list[LogBatch], k: int) -> bool:
        lo, hi = log.index_of(stream[k]), log.index_of(stream[k + 1])
        return not any(b.is_control and b.producer_id == stream[k].producer_id for b in log.batches[lo:hi])

    def usable(stream: list[LogBatch]) -> bool:
        return any(no_marker_between(stream, k) for k in range(1, len(stream) - 1))

    (pid, epoch), stream = _pick_stream(
        log, producer_id, producer_epoch, usable, "three data batches and no marker of it between two of them"
    )
    fitting = [k for k in range(1, len(stream) - 1) if no_marker_between(stream, k)]
    default = min(fitting, key=lambda k: (abs(k - len(stream) // 2), k))
    k = _index_in(stream, batch_index, default, 1, len(stream) - 2)
    if not no_marker_between(stream, k):
        raise FaultError(f"a marker of producer {pid} lies between batch {k} and {k + 1}")
    first, second = stream[k], stream[k + 1]
    log.swap(first, second)
    log.renumber()
    return Injection(
        f"swapped the data batches with sequences {first.base_sequence}-{first.last_sequence} and "
        f"{second.base_sequence}-{second.last_sequence} of producer {pid}",
        {"producer_id": pid, "producer_epoch": epoch, "batch_index": k},
        [_finding(log, "SEQUENCE_REGRESSION", first.base_offset, pid, related=second)],
    )


def lower_epoch(
    log: PartitionLog,
    *,
    producer_id: int | None = None,
    batch_index: int | None = None,
) -> Injection:
    """Give a later data batch of a producer an epoch below every epoch the producer used before it
    (`batch_index` among its data batches; default: its last data batch, a zombie's late write).

    If the producer never left epoch 0, all its batches and markers first move up one epoch (a
    consistent relabel: the same sequences, bumps and transactions) so that a lower epoch exists.
    The batch gets an epoch the producer never used, so it starts no (pid, epoch) sequence of its
    own.

    Rule (contract §4 EPOCH_REGRESSION, formats §5.3): a lower epoch after a higher one: one
    EPOCH_REGRESSION at the batch. Its numbers leave its former epoch: when it was the last batch of
    that epoch nothing else changes; for a middle batch (`batch_index`), the next batch of that
    epoch now jumps over numbers found nowhere else in it, a SEQUENCE_GAP (or _UNVERIFIED) there.
    """
    batches_of: dict[int, list[LogBatch]] = {}
    for b in log.trusted():
        if b.producer_id >= 0:
            batches_of.setdefault(b.producer_id, []).append(b)

    candidates = sorted(
        (pid, batches)
        for pid, batches in batches_of.items()
        if (producer_id is None or pid == producer_id) and any(not b.is_control for b in batches[1:])
    )
    if not candidates:
        raise FaultNotApplicable(f"{log.name}: no producer with a data batch after its first batch")
    # The producer with the most batches; non-transactional data preferred (no transaction question).
    pid, batches = max(candidates, key=lambda c: (not c[1][-1].is_transactional, len(c[1]), -c[0]))
    data = [b for b in batches if not b.is_control]
    # The producer's first batch has no earlier epoch to fall below.
    lowest = 1 if data[0] is batches[0] else 0
    index = _index_in(data, batch_index, len(data) - 1, lowest, len(data) - 1)
    target = data[index]
    stream = log.streams()[(pid, target.producer_epoch)]
    position = stream.index(target)
    if position == 0 and len(stream) > 1:
        raise FaultError("the chosen batch starts its epoch; the next one would start it mid-sequence")
    relabelled = min(b.producer_epoch for b in batches) == 0
    if relabelled:
        for b in batches:
            b.producer_epoch += 1
    higher = max(b.producer_epoch for b in batches[: batches.index(target)])
    target.producer_epoch = min(b.producer_epoch for b in batches) - 1
    log.renumber()
    findings = [_finding(log, "EPOCH_REGRESSION", target.base_offset, pid)]
    if position < len(stream) - 1:
        findings.append(_gap(log, stream[position - 1], stream[position + 1], _span(target)))
    findings += _hanging_transactions(log)
    return Injection(
        f"set the epoch of the data batch at {target.describe()} below the earlier epoch {higher}"
        + (" (the producer's epochs were first raised by one)" if relabelled else ""),
        {"producer_id": pid, "batch_index": index, "epoch": target.producer_epoch, "relabelled": relabelled},
        findings,
    )


def restart_sequence(
    log: PartitionLog,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    batch_index: int | None = None,
) -> Injection:
    """Mid-epoch, batch b[k] (k >= 1) restarts at sequence 0 and the later batches of the epoch go on
    from there (b[k+1] starts at b[k].lastSeq + 1, ...): a client that lost its sequence state.

    Rule (contract §4 SEQUENCE_REGRESSION, DUPLICATE_BATCH): b[k] has `baseSeq 0 <= prev.lastSeq`.
    If its new range equals an earlier batch's (pid, epoch, baseSeq, lastSeq) it is a
    DUPLICATE_BATCH by definition (sequences only; content is not compared, formats §5.2), else a
    SEQUENCE_REGRESSION. Each later batch follows its predecessor in sequence, so it is a finding
    only if its new range, too, repeats an earlier one (DUPLICATE_BATCH). By default b[k] is chosen
    so that no range repeats: exactly one SEQUENCE_REGRESSION, and no gap (the numbers stay contiguous).
    """

    def ranges_after_restart(stream: list[LogBatch], k: int) -> list[tuple[int, int]]:
        ranges, next_base = [], 0
        for b in stream[k:]:
            span = b.last_offset_delta
            ranges.append((next_base, (next_base + span) % SEQUENCE_MODULUS))
            next_base = (next_base + span + 1) % SEQUENCE_MODULUS
        return ranges

    def repeats(stream: list[LogBatch], k: int) -> bool:
        earlier = [b.sequence_range for b in stream[:k]]
        new = ranges_after_restart(stream, k)
        return any(r in earlier or r in new[:i] for i, r in enumerate(new))

    def restartable(stream: list[LogBatch], k: int) -> bool:
        # After 2147483647 comes 0 (formats §1.4): a restart there would be in sequence.
        return stream[k - 1].last_sequence != INT32_MAX and stream[k].base_sequence != 0

    def usable(stream: list[LogBatch]) -> bool:
        return any(
            restartable(stream, k) and (batch_index is not None or not repeats(stream, k))
            for k in range(1, len(stream))
        )

    (pid, epoch), stream = _pick_stream(
        log, producer_id, producer_epoch, usable, "a batch whose restart at 0 repeats no earlier range"
    )
    default = next((k for k in range(1, len(stream)) if restartable(stream, k) and not repeats(stream, k)), 1)
    k = _index_in(stream, batch_index, default, 1, len(stream) - 1)
    if not restartable(stream, k):
        raise FaultError(
            f"batch {k} of producer {pid} cannot restart at 0 (it already starts there or wraps)"
        )
    described = stream[k].describe()
    for b, (base, _) in zip(stream[k:], ranges_after_restart(stream, k), strict=True):
        b.base_sequence = base
    log.renumber()
    findings = []
    for j in range(k, len(stream)):
        first_copy = next((b for b in stream[:j] if b.sequence_range == stream[j].sequence_range), None)
        if first_copy is not None:
            findings.append(_finding(log, "DUPLICATE_BATCH", stream[j].base_offset, pid, related=first_copy))
        elif j == k:
            findings.append(
                _finding(log, "SEQUENCE_REGRESSION", stream[j].base_offset, pid, related=stream[j - 1])
            )
    return Injection(
        f"restarted the sequence at 0 at the data batch at {described}; later batches of the epoch follow on",
        {"producer_id": pid, "producer_epoch": epoch, "batch_index": k},
        findings,
    )


def delete_head_segment(log: PartitionLog, *, segments: int = 1) -> Injection:
    """Delete the first `segments` segments, as retention does, and advance the log start offset to the
    next segment's base (log-start-offset-checkpoint, leader-epoch-checkpoint truncated from the start,
    snapshots of deleted segments removed: formats §3.6, §4.3, §5.7). Offsets do not change.

    Rule (contract §4 retention kinds): only `info` findings. A producer whose first retained data
    batch starts mid-sequence is HISTORY_TRUNCATED_BY_RETENTION (the log start offset is > 0, so the
    missing history lies below it, never HISTORY_START_MISSING); a producer the latest snapshot still
    lists, whose batches all lie below the log start, is PRODUCER_STATE_RETAINED (KAFKA-7190).
    """
    with_batches = sorted({b.segment for b in log.batches})
    if segments < 1 or segments >= len(with_batches):
        raise FaultNotApplicable(
            f"{log.name}: {len(with_batches)} segment(s) with data; cannot delete {segments} and keep one"
        )
    doomed = set(with_batches[:segments]) | set(range(with_batches[segments]))
    for index in doomed:
        log.segments[index].deleted = True
    log.batches = [b for b in log.batches if b.segment not in doomed]
    log.unchanged_reference = list(log.batches)
    new_start = log.segments[with_batches[segments]].base_offset
    log.log_start_offset = max(log.log_start_offset, new_start)
    findings = []
    seen: set[int] = set()
    for b in log.trusted():
        pid = b.producer_id
        if pid < 0 or pid in seen or b.is_control:
            continue
        # Markers of the same epoch may come first (formats §5.10); the first data batch decides.
        seen.add(pid)
        if b.base_sequence > 0:
            findings.append(_finding(log, "HISTORY_TRUNCATED_BY_RETENTION", b.base_offset, pid))
    findings += _retained_producer_state(log)
    return Injection(
        f"deleted {segments} head segment(s); log start offset {log.log_start_offset}",
        {"segments": segments, "log_start_offset": log.log_start_offset},
        findings,
    )


def _retained_producer_state(log: PartitionLog) -> list[ExpectedFinding]:
    """PRODUCER_STATE_RETAINED for producers the latest retained snapshot lists with no retained batch;
    `first_offset` is the entry's last offset (the only offset the evidence has)."""
    kept = [s for s in log.source.snapshots if s.offset >= log.log_start_offset]
    if not kept:
        return []
    latest = max(kept, key=lambda s: s.offset)
    entries, _ = read_producer_snapshot(latest.file.path)
    present = {b.producer_id for b in log.batches}
    return [
        _finding(log, "PRODUCER_STATE_RETAINED", e.last_offset, e.producer_id)
        for e in sorted(entries, key=lambda e: e.producer_id)
        if e.producer_id not in present and 0 <= e.last_offset < log.log_start_offset
    ]


def truncate_tail(log: PartitionLog, *, cut_bytes: int | None = None) -> Injection:
    """Cut the last `cut_bytes` bytes of the last segment (default: half its last batch), as a crash
    mid-write leaves it; the log directory loses its clean-shutdown marker.

    Rule (contract §4 TRUNCATED_TAIL): the bytes left do not form a whole batch: one TRUNCATED_TAIL
    (not about a producer) at the offset where the torn batch began. The torn batch leaves the
    readable log, and it was the last one, so no sequence finding follows; if it was the marker
    closing an old enough transaction, that transaction now hangs (HANGING_TRANSACTION). Snapshots
    past the new log end and the high watermark/recovery point are brought back to it.
    """
    last_segment = len(log.segments) - 1
    torn = log.batches[-1]
    if torn.segment != last_segment:
        raise FaultNotApplicable(f"{log.name}: the last segment is empty")
    cut = torn.size // 2 if cut_bytes is None else cut_bytes
    if not 0 < cut < torn.size:
        raise FaultError(f"cut_bytes must be in 1..{torn.size - 1} to end inside the last batch, not {cut}")
    left = bytes(torn.data[: torn.size - cut])
    if not left.strip(b"\x00"):
        raise FaultError(
            f"cutting {cut} bytes leaves only zero bytes, which read as preallocation, not a tail"
        )
    offset = torn.base_offset
    log.remove(torn)
    log.torn_tail = left
    log.clean_shutdown = False
    findings = [_finding(log, "TRUNCATED_TAIL", offset, None), *_hanging_transactions(log)]
    return Injection(
        f"cut the last {cut} of the {torn.size} bytes of the batch at offset {offset}",
        {"cut_bytes": cut, "torn_offset": offset},
        findings,
    )


def flip_byte(
    log: PartitionLog,
    *,
    batch_offset: int | None = None,
    position: int | None = None,
    in_sequence: bool = False,
    first_of_epoch: bool = False,
) -> Injection:
    """Flip every bit of one byte inside a batch's records (default: a value byte of the middle batch of
    a non-idempotent producer, else the last data batch of a non-transactional producer epoch; with
    `in_sequence`, the middle data batch of the longest non-transactional idempotent epoch; with
    `first_of_epoch`, that epoch's first batch).

    Rule (contract §4 CRC_MISMATCH, formats §1.3): the stored CRC-32C no longer matches: one
    CRC_MISMATCH at the batch (not about a producer: its header cannot be trusted). Such a batch takes
    no part in replay. Without `in_sequence` it is one whose absence changes nothing: no producer id,
    or the last batch of its (pid, epoch) outside any transaction. With it, the batches around it skip
    its sequences; its header, intact since only a value byte changed, fills that gap exactly, so the
    skipped records are in the log, unreadable, and nothing is lost (RULES.md): still one CRC_MISMATCH
    and no SEQUENCE_GAP. With `first_of_epoch`, the epoch's next batch starts above sequence 0, and
    the failed batch before it holds the sequences it skips: no HISTORY_START_MISSING. Flipping a
    value byte of an uncompressed batch keeps the record framing readable, so record-level mode finds
    nothing more.
    """
    streams = log.streams()
    last_of_epoch = {id(s[-1]) for s in streams.values()}
    if in_sequence and first_of_epoch:
        raise FaultError("in_sequence and first_of_epoch choose different batches: give one")
    inner = {
        id(b): len(s)
        for s in streams.values()
        if len(s) > 1 and not any(x.is_transactional for x in s)
        for b in (s[:1] if first_of_epoch else s[1:-1])
    }

    def safe(b: LogBatch) -> bool:
        if in_sequence or first_of_epoch:
            return id(b) in inner
        return not b.is_control and (b.producer_id < 0 or (id(b) in last_of_epoch and not b.is_transactional))

    if batch_offset is not None:
        target = next((b for b in log.batches if b.origin_offset == batch_offset), None)
        if target is None:
            raise FaultError(f"{log.name}: no batch starts at offset {batch_offset}")
        if not safe(target):
            raise FaultError(f"the batch at {batch_offset} is in a producer's sequence or transaction")
    elif in_sequence or first_of_epoch:
        candidates = [b for b in log.batches if safe(b) and _value_byte(b) is not None]
        if not candidates:
            raise FaultNotApplicable(f"{log.name}: no uncompressed batch inside an idempotent epoch")
        longest = max(inner[id(b)] for b in candidates)
        stream = [b for b in candidates if inner[id(b)] == longest]
        target = stream[len(stream) // 2]
    else:
        plain = [b for b in log.batches if safe(b) and b.producer_id < 0 and _value_byte(b) is not None]
        idempotent = [b for b in log.batches if safe(b) and b.producer_id >= 0 and _value_byte(b) is not None]
        if not plain and not idempotent:
            raise FaultNotApplicable(
                f"{log.name}: no uncompressed batch whose corruption affects nothing else"
            )
        target = plain[len(plain) // 2] if plain else idempotent[-1]
    at = _value_byte(target) if position is None else position
    # In the records: a header byte (attributes, producer fields, sequences, count) would change what
    # the failed batch's header says, and the findings with it.
    if at is None or not RECORDS_OFFSET <= at < target.size:
        raise FaultError(
            f"position must lie in the batch's records, bytes {RECORDS_OFFSET}..{target.size - 1}"
        )
    target.corrupt = True
    target.data[at] ^= 0xFF
    return Injection(
        f"flipped byte {at} of the batch at offset {target.base_offset}",
        {"batch_offset": target.base_offset, "position": at},
        [_finding(log, "CRC_MISMATCH", target.base_offset, None)],
    )


def _value_byte(batch: LogBatch) -> int | None:
    """Position in the batch of the middle byte of its first record's value (uncompressed only)."""
    if batch.is_compressed or batch.count < 1:
        return None
    at = RECORDS_OFFSET
    _, at = _varint(batch.data, at)  # record length
    at += 1  # attributes
    _, at = _varint(batch.data, at)  # timestamp delta
    _, at = _varint(batch.data, at)  # offset delta
    key_length, at = _varint(batch.data, at)
    at += max(key_length, 0)
    value_length, at = _varint(batch.data, at)
    return at + value_length // 2 if value_length > 0 else None


def _varint(data: bytearray, at: int) -> tuple[int, int]:
    """A zigzag varint/varlong (formats §1.6) and the position after it."""
    shift = raw = 0
    while True:
        byte = data[at]
        at += 1
        raw |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), at


def drop_marker(log: PartitionLog, *, producer_id: int | None = None, age_ms: int = 3_600_000) -> Injection:
    """Remove the last COMMIT/ABORT marker of a transactional producer and move the transaction it
    closed `age_ms` back in time (default 1 h).

    Rule (contract §4 HANGING_TRANSACTION, KIP-664): the producer's transactional data after its
    last marker now has no COMMIT/ABORT after it, and began more than `transaction.max.timeout.ms`
    (15 min) before the partition's last timestamp: one HANGING_TRANSACTION at the first batch of
    that transaction. The marker removed is the producer's last, so no later marker closes the
    transaction in any epoch. Its `.txnindex` entry (an ABORT) goes with it.
    """
    if age_ms < 0:
        raise FaultError(f"age_ms must be >= 0, not {age_ms}")
    pids = sorted({b.producer_id for b in log.trusted() if b.is_end_txn_marker})
    found = [(pid, _last_closed_transaction(log, pid)) for pid in pids if producer_id in (None, pid)]
    chosen = next(((pid, t) for pid, t in found if t is not None), None)
    if chosen is None:
        raise FaultNotApplicable(f"{log.name}: no transactional producer whose last marker closes data")
    pid, (marker, closed) = chosen
    kind = marker.control_type
    for b in closed:
        b.shift_timestamps(-age_ms)
    log.remove(marker)
    log.renumber()
    findings = _hanging_transactions(log)
    if not any(f.producer_id == pid for f in findings):
        # Not applicable here (e.g. nothing written after the transaction to age it by): the corpus
        # tries the next partition.
        raise FaultNotApplicable(
            f"{log.name}: age_ms {age_ms} leaves the open transaction younger than the 15 min timeout"
        )
    return Injection(
        f"removed the {kind} marker of producer {pid} and moved its transaction {age_ms} ms back",
        {"producer_id": pid, "marker": kind, "marker_offset": marker.origin_offset, "age_ms": age_ms},
        findings,
    )


def _last_closed_transaction(log: PartitionLog, pid: int) -> tuple[LogBatch, list[LogBatch]] | None:
    """The producer's last marker and the transactional data it closed, if that marker is a COMMIT/ABORT."""
    batches = log.producer_batches(pid)
    markers = [i for i, b in enumerate(batches) if b.is_control]
    if not markers or not batches[markers[-1]].is_end_txn_marker:
        return None
    start = markers[-2] + 1 if len(markers) > 1 else 0
    closed = [b for b in batches[start : markers[-1]] if b.is_transactional]
    return (batches[markers[-1]], closed) if closed else None


def space_batches(
    log: PartitionLog,
    *,
    producer_id: int | None = None,
    producer_epoch: int | None = None,
    batch_index: int | None = None,
    idle_ms: int = 2 * PRODUCER_ID_EXPIRATION_MS,
    drop: bool = True,
) -> Injection:
    """Make the partition idle for `idle_ms` (default 2 days) before batch b[k+1] of a producer, by
    moving it and every later batch forward in time, and (with `drop`) remove b[k] in between.

    Rule (contract §4 SEQUENCE_GAP_UNVERIFIED, formats §5.5, §5.7): the gap between b[k-1] and
    b[k+1] has the shape of a SEQUENCE_GAP, but more than `producer.id.expiration.ms` (1 day) passed
    between them, so a >= 2.5 broker had expired the producer and accepted any sequence: one
    SEQUENCE_GAP_UNVERIFIED at b[k+1]. Other producers only become idle as long, which is no finding
    while their sequences stay contiguous. Without `drop` nothing is expected (idle is not loss).
    """
    if idle_ms < PRODUCER_ID_EXPIRATION_MS:
        raise FaultError(f"idle_ms must be at least producer.id.expiration.ms ({PRODUCER_ID_EXPIRATION_MS})")
    (pid, epoch), stream = _pick_stream(
        log, producer_id, producer_epoch, lambda s: len(s) >= 3, "three or more data batches"
    )
    k = _index_in(stream, batch_index, len(stream) // 2, 1, len(stream) - 2)
    before, dropped, after = stream[k - 1], stream[k], stream[k + 1]
    for b in log.batches[log.index_of(after) :]:
        b.shift_timestamps(idle_ms)
    described = dropped.describe()
    if drop:
        log.remove(dropped)
    log.renumber()
    findings = [_gap(log, before, after, _span(dropped))] if drop else []
    # A transaction still open at the log end (none in a clean source) would now be days old.
    findings += _hanging_transactions(log)
    return Injection(
        f"moved the batches from offset {after.base_offset} {idle_ms} ms later"
        + (f" and dropped the data batch at {described}" if drop else ""),
        {"producer_id": pid, "producer_epoch": epoch, "batch_index": k, "idle_ms": idle_ms, "drop": drop},
        findings,
    )


class Fault(NamedTuple):
    name: str
    function: Callable[..., Injection]


FAULTS: dict[str, Fault] = {
    f.__name__: Fault(f.__name__, f)
    for f in (
        drop_batch,
        duplicate_batch,
        reorder_batches,
        lower_epoch,
        restart_sequence,
        delete_head_segment,
        truncate_tail,
        flip_byte,
        drop_marker,
        space_batches,
    )
}


def apply_fault(
    name: str, source_partition_dir: str | Path, out_partition_dir: str | Path, **params: Any
) -> ExpectedFindings:
    """Write `out_partition_dir`: the source partition with fault `name` applied. The source stays as is."""
    fault = FAULTS.get(name)
    if fault is None:
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    log = PartitionLog.read(source_partition_dir)
    try:
        inspect.signature(fault.function).bind(log, **params)
    except TypeError as exc:
        raise FaultError(f"{name}: {exc}") from None
    injected = fault.function(log, **params)
    out = log.write(out_partition_dir)
    findings = sorted(injected.findings, key=lambda f: (f.first_offset, f.kind))
    return ExpectedFindings(
        name, log.topic, log.partition, str(out), injected.description, injected.params, findings
    )


# ---------------------------------------------------------------------------------------------
# A corpus: one log directory per case


class CaseSpec(NamedTuple):
    name: str
    fault: str
    params: dict[str, Any]


CORPUS_CASES: tuple[CaseSpec, ...] = (
    CaseSpec("drop_batch", "drop_batch", {}),
    CaseSpec("duplicate_batch_inside_window", "duplicate_batch", {"distance": 2}),
    CaseSpec("duplicate_batch_outside_window", "duplicate_batch", {"distance": DUPLICATE_WINDOW_BATCHES + 1}),
    CaseSpec("duplicate_batch_at_log_end", "duplicate_batch", {"distance": None}),
    CaseSpec("reorder_batches", "reorder_batches", {}),
    CaseSpec("lower_epoch", "lower_epoch", {}),
    CaseSpec("restart_sequence", "restart_sequence", {}),
    CaseSpec("delete_head_segment", "delete_head_segment", {}),
    CaseSpec("truncate_tail", "truncate_tail", {}),
    CaseSpec("flip_byte", "flip_byte", {}),
    CaseSpec("flip_byte_in_sequence", "flip_byte", {"in_sequence": True}),
    CaseSpec("flip_byte_first_of_epoch", "flip_byte", {"first_of_epoch": True}),
    CaseSpec("drop_marker", "drop_marker", {}),
    CaseSpec("space_batches", "space_batches", {}),
)


@dataclass
class CorpusCase:
    """One faulted log directory (`log_dir`, holding one partition) and what an audit of it must find."""

    name: str
    log_dir: Path
    expected: ExpectedFindings

    def to_dict(self, root: Path) -> dict[str, Any]:
        expected = self.expected.to_dict()
        expected.pop("profile")
        expected["partition_dir"] = str(Path(expected["partition_dir"]).relative_to(root))
        return {"name": self.name, "log_dir": str(self.log_dir.relative_to(root)), **expected}


def build_corpus(
    source_log_dir: str | Path, out_dir: str | Path, faults: Sequence[str] | None = None
) -> list[CorpusCase]:
    """Apply every corpus case (or those whose case or fault name is in `faults`) to the first partition
    of the source where it applies, each into `out_dir/<case>/`, and write `out_dir/expected.json`.

    `source_log_dir` may also be a single partition directory. Partitions are tried in order of
    decreasing batch count; internal topics are skipped.
    """
    partitions = _source_partitions(Path(source_log_dir))
    cases = _select_cases(faults)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FaultError(f"{out}: exists and is not empty")
    out.mkdir(parents=True, exist_ok=True)
    built: list[CorpusCase] = []
    for spec in cases:
        reasons = []
        for partition in partitions:
            target = out / spec.name / Path(partition).name
            try:
                expected = apply_fault(spec.fault, partition, target, **spec.params)
            except FaultNotApplicable as exc:
                reasons.append(str(exc))
                shutil.rmtree(out / spec.name, ignore_errors=True)
                continue
            built.append(CorpusCase(spec.name, out / spec.name, expected))
            break
        else:
            raise FaultNotApplicable(f"case {spec.name}: no partition fits: " + "; ".join(reasons))
    document = {
        "profile": PROFILE,
        "comparison": COMPARISON,
        "cases": [case.to_dict(out) for case in built],
    }
    (out / "expected.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return built


def _source_partitions(source: Path) -> list[Path]:
    try:
        found = discover([source])
    except NotAKafkaArtifact as exc:
        raise FaultError(str(exc)) from None
    partitions: list[PartitionDir] = []
    for item in found:
        if isinstance(item, PartitionDir):
            partitions.append(item)
        elif isinstance(item, LogDir):
            partitions.extend(p for p in item.partitions if not p.is_internal)
    if not partitions:
        raise FaultError(f"{source}: no partition directory of a data topic")
    sizes = {p.path: sum(s.log.size for s in p.segments) for p in partitions}
    return [Path(p.path) for p in sorted(partitions, key=lambda p: (-sizes[p.path], p.path))]


def _select_cases(faults: Sequence[str] | None) -> list[CaseSpec]:
    if not faults:
        return list(CORPUS_CASES)
    known = {c.name for c in CORPUS_CASES} | set(FAULTS)
    unknown = [f for f in faults if f not in known]
    if unknown:
        raise FaultError(f"unknown fault or case {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [c for c in CORPUS_CASES if c.name in faults or c.fault in faults]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_harness.faults",
        description="Write faulted copies of broker-written partitions and the findings they must cause.",
    )
    parser.add_argument("--source", type=Path, required=True, help="a broker log directory or one partition")
    parser.add_argument("--out", type=Path, required=True, help="a new or empty directory")
    parser.add_argument(
        "--fault",
        action="append",
        metavar="NAME",
        help=f"a fault ({', '.join(FAULTS)}) or corpus case; repeatable; default: every case",
    )
    args = parser.parse_args(argv)
    try:
        cases = build_corpus(args.source, args.out, args.fault)
    except FaultError as exc:
        print(f"kafka_harness.faults: error: {exc}", file=sys.stderr)
        return 2
    for case in cases:
        kinds = ", ".join(f.kind for f in case.expected.findings) or "no finding"
        print(f"{case.name}: {case.expected.partition_dir}: {kinds}")
    print(f"expected findings: {args.out / 'expected.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
