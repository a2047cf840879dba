"""`replay-audit dump`: decode files or partition directories to JSON lines (audit-contract §5)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kafka_log_decoder.constants import FILE_STATE_SUFFIXES, KRAFT_BOOTSTRAP_FILENAME, QUORUM_STATE_FILENAME
from kafka_log_decoder.discovery import DumpLogText, discover, first_dumping_line, stat_given
from kafka_log_decoder.errors import CorruptionKind, DecodeError, NotAKafkaArtifact
from kafka_log_decoder.remote_log_metadata import RemoteLogMetadataError, decode_remote_log_metadata
from kafka_log_decoder.rows import (
    BatchHeader,
    CheckpointEntry,
    IndexEntry,
    LeaderEpochEntry,
    MetaProperties,
    PartitionMetadata,
    Record,
    SnapshotEntry,
    TimeIndexEntry,
    TxnIndexEntry,
)

OFFSET_CHECKPOINTS = frozenset(
    {
        "replication-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
    }
)
# The partition directories of tiered storage's metadata topic (KIP-405): `__remote_log_metadata-<n>`.
REMOTE_LOG_METADATA_DIR = "__remote_log_metadata-"
# Severity of each corruption kind (audit-contract §4); errors and worse make `dump` exit 1.
FAILING_KINDS = frozenset(
    {
        CorruptionKind.CRC_MISMATCH,
        CorruptionKind.UNREADABLE_BATCH,
        CorruptionKind.SNAPSHOT_CORRUPT,
        CorruptionKind.OFFSET_OVERLAP,
        CorruptionKind.SNAPSHOT_MISMATCH,
    }
)


@dataclass(frozen=True, slots=True)
class QuorumState:
    """A KRaft `quorum-state` file (QuorumStateData JSON: leaderId, leaderEpoch, votedId, voters ...)."""

    file: str
    state: dict[str, Any]


def artifact_kind(path: Path) -> str | None:
    """What a file given by the user is: dump-log text by its first line whatever its name (its output is
    often saved as `*.log`), else by its name; None if not Kafka's (a `.log` that begins with text and
    is not named as a segment, such as a broker's `server.log`)."""
    if _starts_with_dumping(path):
        return "dump-log-text"
    kind = kind_from_name(path)
    if (
        kind == "log"
        and path.suffix == ".log"
        and not _SEGMENT_NAME.fullmatch(path.name)
        and _starts_with_text(path)
    ):
        return None
    return kind


# `<offset>.log` (1 to 20 digits, as discovery reads segment names).
_SEGMENT_NAME = re.compile(r"[0-9]{1,20}\.log")
_PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


def _starts_with_text(path: Path) -> bool:
    """Whether the first 8 bytes are printable ASCII: as a segment's big-endian base offset that is at
    least 0x20 << 56 (2.3e18), an offset no log reaches, while a broker's own log begins `[2026-...`."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and all(b in _PRINTABLE for b in head)


def kind_from_name(path: Path) -> str | None:
    """What a file of a partition or log directory is, from its name alone (as discovery classed it)."""
    # A .swap file is the segment file it replaces; a .deleted or .cleaned one (not live: discovery
    # leaves it out of a directory) is still that file's bytes when the user names it, evidence of what
    # was removed (formats §3.7).
    name = path.name
    for suffix in FILE_STATE_SUFFIXES:
        name = name.removesuffix(suffix)
    for suffix, kind in ((".log", "log"), (".index", "index"), (".timeindex", "timeindex")):
        if name.endswith(suffix):
            return kind
    if (name.endswith(".checkpoint") and name[:1].isdigit()) or name == KRAFT_BOOTSTRAP_FILENAME:
        return "log"  # a KRaft snapshot `<end offset>-<epoch>.checkpoint`, or bootstrap.checkpoint: batches
    if name.endswith(".txnindex"):
        return "txnindex"
    if name.endswith(".snapshot"):
        return "snapshot"
    if name == "leader-epoch-checkpoint":
        return "leader-epoch-checkpoint"
    if name in OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name == "partition.metadata":
        return "partition.metadata"
    if name == "meta.properties":
        return "meta.properties"
    if name == QUORUM_STATE_FILENAME:
        return "quorum-state"
    return None


def _starts_with_dumping(path: Path) -> bool:
    try:
        return first_dumping_line(str(path)) is not None  # after a UTF-8 BOM, blank or stderr lines
    except OSError:
        return False


def iter_file_items(path: Path, *, records: bool, kind: str | None = None) -> Iterator[Any]:
    """Every row and decode error of one Kafka file, in file order (an `.index`'s entries are followed by
    the wrong ones among them, checked against the `.log` beside it)."""
    kind = kind or artifact_kind(path)
    if kind is None:
        raise NotAKafkaArtifact(f"{path}: not a Kafka log artifact (expected .log, .index, .snapshot, ...)")
    if kind == "log":
        from kafka_log_decoder.segment import read_log_segment

        yield from read_log_segment(path, records=records)
    elif kind == "dump-log-text":
        from kafka_log_decoder.dump_log_text import read_dump_log_text

        for item in read_dump_log_text(path):
            if records or not isinstance(item, Record):
                yield item
    elif kind == "index":
        from kafka_log_decoder.index_files import read_offset_index

        # The entries (streamed: an index may be large), then those that do not check out against the
        # `.log`, then a partial entry.
        tail = []
        for item in read_offset_index(path):
            if isinstance(item, DecodeError):
                tail.append(item)
            else:
                yield item
        # An entry the reader stopped at (a zeroed entry before non-zero ones) is reported once, by it.
        stopped_at = {error.position for error in tail}
        yield from (error for error in _index_mismatches(path) if error.position not in stopped_at)
        yield from tail
    else:
        yield from _read_small_artifact(kind, path)


def _index_mismatches(index: Path) -> Iterator[DecodeError]:
    """The entries of an `.index` that do not lead to their offset in the `.log` beside it (`IndexCheck`:
    a batch at or below the offset starts at the entry's position, and the offset is held before the
    next entry's; `DumpLogSegments` prints them as `Mismatches in`); nothing without that `.log`."""
    from kafka_log_decoder.index_check import IndexCheck
    from kafka_log_decoder.segment import iter_segment_runs

    # Its .log of the same state: `0.index.swap` beside `0.log.swap`, `0.index.deleted` beside
    # `0.log.deleted` (a file the user named: `kind_from_name`).
    state = next((s for s in FILE_STATE_SUFFIXES if index.name.endswith(s)), "")
    name = index.name.removesuffix(state)
    log = index.with_name(name.removesuffix(".index") + ".log" + state)
    if not log.is_file():
        return
    check = IndexCheck.of(str(log), str(index))
    if check is None:
        return
    try:
        for run in iter_segment_runs(log):
            check.see(run)
    except NotAKafkaArtifact:
        return  # the .log cannot be read: the entries are not checked
    check.partial = None  # the index's own reader reported it
    yield from check.errors()


def _read_small_artifact(kind: str, path: Path) -> Iterable[Any]:
    from kafka_log_decoder import checkpoints, index_files, producer_snapshot

    if kind == "snapshot":
        entries, errors = producer_snapshot.read_producer_snapshot(path)
        return [*entries, *errors]
    if kind == "quorum-state":
        state, errors = checkpoints.read_quorum_state(path)
        return [*([] if state is None else [QuorumState(str(path), state)]), *errors]
    readers = {
        "index": index_files.read_offset_index,
        "timeindex": index_files.read_time_index,
        "txnindex": index_files.read_txn_index,
        "leader-epoch-checkpoint": checkpoints.read_leader_epoch_checkpoint,
        "offset-checkpoint": checkpoints.read_offset_checkpoint,
        "partition.metadata": checkpoints.read_partition_metadata,
        "meta.properties": checkpoints.read_meta_properties,
    }
    result = readers[kind](path)
    if isinstance(result, tuple):
        entries, errors = result
        return [*_as_list(entries), *errors]
    return _as_list(result)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, Iterator):
        return list(value)
    return [value]


def expand_paths(paths: Iterable[str]) -> Iterator[tuple[Path, str]]:
    """Files in dump order, with their kinds: a file as given (dump-log text by its first line, whatever
    its name); a directory as its live partition files, segment by segment, each what its name says (as
    the ingest reads them)."""
    for raw in paths:
        path = Path(raw)
        if stat.S_ISREG(stat_given(raw)):
            try:
                os.close(os.open(path, os.O_RDONLY))  # unreadable: say so, not "not a Kafka artifact"
            except OSError as exc:
                raise NotAKafkaArtifact.from_os_error(raw, exc) from None
            kind = artifact_kind(path)
            if kind is None:
                text = " (a .log that begins with text: not a segment)" if path.suffix == ".log" else ""
                raise NotAKafkaArtifact(f"{raw}: not a Kafka log artifact{text}")
            yield path, kind
            continue
        for found in discover([raw]):
            for file in _live_files(found):
                kind = "dump-log-text" if isinstance(found, DumpLogText) else kind_from_name(file)
                assert kind is not None, file
                yield file, kind


def _live_files(found: Any) -> Iterator[Path]:
    from kafka_log_decoder.discovery import LogDir, PartitionDir

    if isinstance(found, LogDir):
        if found.meta_properties is not None:
            yield Path(found.meta_properties.path)
        for checkpoint in found.checkpoint_files.values():
            yield Path(checkpoint.path)
        if found.bootstrap_checkpoint is not None:
            yield Path(found.bootstrap_checkpoint.path)
        for partition in found.partitions:
            yield from _live_files(partition)
    elif isinstance(found, PartitionDir):
        for extra in (found.partition_metadata, found.leader_epoch_checkpoint, found.quorum_state):
            if extra is not None:
                yield Path(extra.path)
        for segment in found.segments:
            for file in (segment.log, segment.index, segment.timeindex, segment.txnindex):
                if file is not None:
                    yield Path(file.path)
        for snapshot in found.snapshots:
            yield Path(snapshot.file.path)
        for kraft_snapshot in found.kraft_snapshots:
            yield Path(kraft_snapshot.file.path)
    else:
        yield Path(found.path)


def item_to_json(item: Any, *, remote_log_metadata: bool = False) -> dict[str, Any]:
    """The contract §5 object for one row; `remote_log_metadata`: the row is of a
    `__remote_log_metadata-<n>` file, whose record values are decoded."""
    if isinstance(item, BatchHeader):
        out: dict[str, Any] = {"type": "batch"}
        out.update(item.to_dict())
        if not item.is_control:
            del out["control_type"], out["coordinator_epoch"]
        return out
    if isinstance(item, Record):
        record: dict[str, Any] = {
            "type": "record",
            "file": item.file,
            "offset": item.offset,
            "timestamp": item.timestamp,
            "sequence": item.sequence,
            "key_size": item.key_size,
            "value_size": item.value_size,
            "headers": list(item.header_keys),
        }
        if remote_log_metadata and item.value is not None:
            # Tiered storage's remote segment events, as kafka-dump-log.sh --remote-log-metadata-decoder.
            try:
                record["remote_log_metadata"] = decode_remote_log_metadata(item.value)
            except RemoteLogMetadataError as exc:
                record["remote_log_metadata_error"] = str(exc)
        return record
    if isinstance(item, DecodeError):
        return {
            "type": "error",
            "file": item.file,
            "position": item.position,
            "kind": item.kind.value,
            "message": item.message,
            "length": item.length,
        }
    simple: dict[type, str] = {
        SnapshotEntry: "snapshot_entry",
        IndexEntry: "index_entry",
        TimeIndexEntry: "time_index_entry",
        TxnIndexEntry: "txn_index_entry",
        CheckpointEntry: "checkpoint_entry",
        LeaderEpochEntry: "leader_epoch_entry",
        PartitionMetadata: "partition_metadata",
    }
    if isinstance(item, MetaProperties):
        return {"type": "meta_properties", "file": item.file, "properties": dict(item.properties)}
    if isinstance(item, QuorumState):
        return {"type": "quorum_state", "file": item.file, "state": dict(item.state)}
    kind = simple.get(type(item))
    if kind is None:
        raise TypeError(f"cannot dump {type(item).__name__}")
    from dataclasses import asdict

    return {"type": kind, **asdict(item)}


@dataclass
class FileSummary:
    file: str
    batches: int = 0
    records: int = 0
    bytes: int = 0
    crc_failures: int = 0
    errors: int = 0
    producer_ids: set[int] = field(default_factory=set)
    first_offset: int | None = None
    last_offset: int | None = None
    # A DumpLogSegments text: its batches print records only when it was dumped with --deep-iteration,
    # and the last batch of each file of a text before 2.2 prints no size (-1).
    text: bool = False
    # A text's data batch whose records have not been seen yet: its header's count.
    _unseen: int = 0

    def add(self, item: Any, *, records_mode: bool) -> None:
        if isinstance(item, BatchHeader):
            self.records += self._unseen
            self._unseen = 0
            self.batches += 1
            self.bytes += max(item.size_bytes, 0)
            # With --records, the records decoded; a control batch's (markers) are never emitted as
            # `record` items, so its header counts them in both modes.
            if not records_mode or item.is_control:
                self.records += item.count
            elif self.text:
                self._unseen = item.count
            if not item.crc_valid:
                self.crc_failures += 1
            if item.producer_id >= 0:
                self.producer_ids.add(item.producer_id)
            if self.first_offset is None:
                self.first_offset = item.base_offset
            self.last_offset = item.last_offset
        elif isinstance(item, Record):
            # A batch printed with its records: they are counted one by one.
            self._unseen = 0
            self.records += 1
        elif isinstance(item, DecodeError):
            self.errors += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "summary",
            "file": self.file,
            "batches": self.batches,
            "records": self.records + self._unseen,
            "bytes": self.bytes,
            "crc_failures": self.crc_failures,
            "errors": self.errors,
            "producer_ids": sorted(self.producer_ids),
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
        }


def _read_items(path: Path, *, records: bool, kind: str) -> Iterator[Any]:
    """`iter_file_items`, where an OSError of the reading (a file of a directory this user may not read,
    or gone since it was listed) is unreadable input: exit 2 with one line naming it (contract §2). An
    error writing the output is not caught here: it is no fault of the input."""
    items = iter_file_items(path, records=records, kind=kind)
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except OSError as exc:
            raise NotAKafkaArtifact.from_os_error(str(path), exc) from None
        yield item


def run_dump(paths: list[str], *, records: bool, summary: bool, out: TextIO) -> int:
    """Write the JSON lines; the exit status of audit-contract §2 (1 when an error-severity kind was seen)."""
    failing = False
    for path, kind in expand_paths(paths):
        file_summary = FileSummary(str(path), text=kind == "dump-log-text")
        remote_log_metadata = path.parent.name.startswith(REMOTE_LOG_METADATA_DIR)
        for item in _read_items(path, records=records, kind=kind):
            if isinstance(item, DecodeError) and item.kind in FAILING_KINDS:
                failing = True
            if summary:
                file_summary.add(item, records_mode=records)
            else:
                row = item_to_json(item, remote_log_metadata=remote_log_metadata)
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
        if summary:
            out.write(json.dumps(file_summary.to_json(), separators=(",", ":")) + "\n")
    return 1 if failing else 0
