"""The ingest stage: any input of audit-contract §1 -> the bronze Delta tables of `schemas.tables`.

The driver only lists files (discovery, an inventory with fingerprints) and plans work units: one
per file, a large `.log` cut into byte ranges at batch boundaries taken from its `.index`, packed
into about one task per core. Executors read and decode the bytes (`jobs.decode_tasks`, through
`mapInArrow`), one pass per table, streamed straight into its Delta write. A `.log` is walked once
for `batches` (and once more with its records for `records`): the pass whose walk is the quarantine
pass's also reports which units met corrupt bytes, and the quarantine pass decodes only those (and
the units on which any pass failed: a decoder bug, which it records).

Idempotence: every table is partitioned by `(dump_id, replica)` and each write is a Delta
`replaceWhere` overwrite of exactly the `(dump_id, replica)` pairs this run ingests. Re-running on the
same input replaces those partitions with identical rows; a new dump only adds partitions; a run
killed between two table writes is repaired by the next run, which rewrites every table. Compared
with a MERGE on the natural key this needs no join against the existing table (its cost does not
grow with the table), and rows that disappeared from a re-dumped input (a quarantine row of a file
since repaired) are removed instead of lingering. The inventory (`files`) is written last, and
a run first takes its pairs out of it, so a dump listed there has all its tables written (the audit
refuses rows of a dump it does not list: an ingest that stopped halfway).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from jobs import decode_tasks as dt
from jobs.spark_session import concurrently
from kafka_log_decoder.errors import NotAKafkaArtifact
from schemas.tables import (
    ACKS,
    AUDIT_TABLES,
    BATCHES,
    FILES,
    PARTITION_STATE,
    PRODUCER_SNAPSHOTS,
    QUARANTINE,
    RECORDS,
    REMOTE_LOG_METADATA,
    REPORT_FOLDERS,
    TABLES,
    TXN_INDEX,
    TableSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from kafka_log_decoder.discovery import Discovered, FileInfo, LogDir, PartitionDir

DEFAULT_SPLIT_BYTES = 128 << 20
# A task decodes at most this many bytes: tasks come in whole waves over the cores, and on a big
# input a lost task costs little to redo. Each wave pays a Python worker round trip (a trivial
# two-task `mapInArrow` job takes ~0.37 s in a warm local[2] session): with 1 GiB here, 4 GB of
# 500-record batches took two waves and 3.40 s warm against 2.98 s in one (medians of 5, same session).
MAX_TASK_BYTES = 4 << 30
FINGERPRINT_EDGE = 64 << 10
# Every table but `files`, which is written last (see the module docstring). `batches` is written
# first; then records beside the independent tables; then quarantine (it needs the corrupt `.log`s
# their walk found, and the units any pass failed on).
DATA_TABLES: tuple[TableSpec, ...] = tuple(spec for spec in TABLES.values() if spec is not FILES)
INDEPENDENT_TABLES: tuple[TableSpec, ...] = (
    PRODUCER_SNAPSHOTS,
    PARTITION_STATE,
    TXN_INDEX,
    REMOTE_LOG_METADATA,
    ACKS,
)


class UsageError(NotAKafkaArtifact):
    """Arguments that cannot be used (exit status 2, one line on stderr)."""


@dataclass(frozen=True)
class LabeledPath:
    label: str | None
    path: str

    @classmethod
    def parse(cls, text: str) -> LabeledPath:
        """`LABEL=PATH` or `PATH` (a path that exists as given is never split at its `=`)."""
        label, sep, path = text.partition("=")
        if sep and label and "/" not in label and not os.path.exists(text):
            return cls(label, path)
        return cls(None, text)


@dataclass
class IngestOptions:
    inputs: list[LabeledPath]
    output: str
    records: bool = False
    acks: list[LabeledPath] = field(default_factory=list)
    split_bytes: int = DEFAULT_SPLIT_BYTES
    # `--captured-at [LABEL=]TIME`: when a dump was taken, by dump id (None: the call's only dump), in
    # epoch ms; a dump without one is dated by its newest file's mtime (contract §1).
    captured_at: dict[str | None, int] = field(default_factory=dict)


def parse_captured_at(texts: Iterable[str]) -> dict[str | None, int]:
    """`[LABEL=]TIME` values of `--captured-at`: TIME is ISO 8601 (UTC unless it says otherwise) or epoch
    milliseconds; LABEL is a dump id as the tables show it. Raises UsageError."""
    from datetime import UTC, datetime

    captured: dict[str | None, int] = {}
    for text in texts:
        label, sep, value = text.rpartition("=")
        key = label if sep else None
        if sep and not label:
            raise UsageError(f"--captured-at {text}: an empty label")
        if key in captured:
            raise UsageError(
                f"--captured-at: {'dump ' + repr(key) if key else 'the unlabelled time'} given twice"
            )
        try:
            if value.strip().isdigit():
                captured[key] = int(value)
            else:
                moment = datetime.fromisoformat(value.strip())
                moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
                captured[key] = int(moment.timestamp() * 1000)
            if captured[key] >= 1 << 63:
                raise ValueError("past a long")
        except ValueError:
            raise UsageError(
                f"--captured-at {text}: not a time (ISO 8601 such as 2026-11-23T09:30:00Z, or epoch ms)"
            ) from None
    return captured


def _apply_captured_at(captured: Mapping[str | None, int], rows: list[dict[str, Any]]) -> None:
    """Set each input file's `captured_at_ms` from `--captured-at`; usage errors for a label that names no
    dump of the call, or an unlabelled time where the call ingests several dumps."""
    dump_ids = sorted({row["dump_id"] for row in rows})
    unknown = sorted(str(k) for k in captured if k is not None and k not in dump_ids)
    if unknown:
        raise UsageError(
            f"--captured-at: no dump {', '.join(unknown)} among the inputs ({', '.join(dump_ids)})"
        )
    if None in captured and len(dump_ids) > 1:
        raise UsageError(
            f"--captured-at without a label dates one dump, and the inputs hold {len(dump_ids)} "
            f"({', '.join(dump_ids)}): give LABEL=TIME for each"
        )
    for row in rows:
        row["captured_at_ms"] = captured.get(row["dump_id"], captured.get(None))


@dataclass
class IngestPlan:
    """What the driver found: inventory rows, work units and the (dump_id, replica) pairs replaced."""

    inventory: list[dict[str, Any]] = field(default_factory=list)
    units: list[dt.WorkUnit] = field(default_factory=list)
    pairs: set[tuple[str, str | None]] = field(default_factory=set)
    # The labels of the --acks ledgers: (label, no replica) pairs of `pairs` that are ledgers.
    ledgers: set[str] = field(default_factory=set)
    # The inputs given without a label: their default dump id (the directory's or file's name) -> the
    # paths they were read from (absolute, and with symlinks resolved).
    unlabelled: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The same of the --acks ledgers given without a label (their default id is the file's name).
    unlabelled_ledgers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Every input's dump id -> the paths it was read from (absolute, and with symlinks resolved).
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class IngestResult:
    run_id: str
    tables: dict[str, str]
    pairs: list[tuple[str, str | None]]


# ---------------------------------------------------------------------------------------------
# Driver: discovery and planning (no bytes of segments are read here)


def plan_ingest(options: IngestOptions) -> IngestPlan:
    """Discover every input, list the files and plan the work units; usage errors raise UsageError."""
    from kafka_log_decoder.discovery import DumpLogText, discover, dumped_partition, dumped_parts

    plan = IngestPlan()
    seen: set[tuple[str, str | None, str]] = set()
    # The partition directory each log (dump, replica, topic, partition) is read from: two directories
    # under one key would be merged into one log, every batch of one a copy of the other's.
    owners: dict[tuple[str, str | None, str, int], tuple[str, str]] = {}
    # The text each dumped file (by its first `Dumping` line) is read from, per dump and replica: two
    # texts of one file (two brokers' dumps of the same path, both named dump.txt) would be one log.
    texts: dict[tuple[str, str | None, str], str] = {}
    for given in options.inputs:
        path = _usable_path(given.path)
        try:
            found = discover([path])
        except NotAKafkaArtifact as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"{given.path}: cannot read: {exc.strerror or exc}") from None
        dump_id = given.label or _default_dump_id(path)
        if given.label is None:
            plan.unlabelled[dump_id] = tuple(dict.fromkeys((path, os.path.realpath(path))))
        plan.sources[dump_id] = tuple(
            dict.fromkeys((*plan.sources.get(dump_id, ()), path, os.path.realpath(path)))
        )
        for item, item_dump_id, replica in _identify(found, dump_id):
            if isinstance(item, DumpLogText):
                # By the partition (of the dumped path, else the one the text names) and the segment's
                # name: two brokers' log.dirs may differ, or a path be printed as ./0.log or 0.log.
                where = dumped_partition(item.dumped) or item.partition
                segment = f"{where[0]}-{where[1]}/" if where else ""
                segment += (dumped_parts(item.dumped) or [item.dumped])[-1]
                _claim_text(texts, (item_dump_id, replica, segment), item.path, given.path)
            for row, unit in _files_of(item, item_dump_id, replica):
                key = (item_dump_id, replica, row["file"])
                if key in seen:
                    continue
                seen.add(key)
                _claim(owners, row, given.path)
                if row["kind"] == dt.LOG and row["topic"] is not None:
                    # A directory's segment, as a text dumping it would be claimed: a text of the same
                    # segment beside its partition directory would be every batch twice in one log.
                    name = f"{row['topic']}-{row['partition']}/{os.path.basename(row['file'])}"
                    _claim_text(texts, (item_dump_id, replica, name), row["file"], given.path)
                plan.pairs.add((item_dump_id, replica))
                plan.inventory.append(row)
                if unit is not None:
                    plan.units.extend(split_segment(unit, options.split_bytes))
    _apply_captured_at(options.captured_at, plan.inventory)
    input_dumps = {dump_id for dump_id, _ in plan.pairs}
    ledgers: dict[str, str] = {}
    for ledger in options.acks:
        path = _usable_path(ledger.path)
        if not os.path.isdir(path) and not stat.S_ISREG(os.stat(path).st_mode):
            # A FIFO (`--acks <(...)`) would block the reader, and its format sniff would eat its rows.
            raise UsageError(
                f"{ledger.path}: not a regular file (a FIFO, socket or device): write the ledger to a file"
            )
        parts = _ledger_parts(ledger.path, path)
        root = path if os.path.isdir(path) else None
        for part in parts:
            check_ledger(part, root)
        dump_id = ledger.label or os.path.basename(path)
        # A ledger's rows replace its label's (label, no replica) rows in every table, as a dump's do:
        # under an input's dump id it would replace that dump's rows, or be merged with another ledger.
        if dump_id in input_dumps or dump_id in ledgers:
            other = "an input's dump id" if dump_id in input_dumps else f"the label of {ledgers[dump_id]}"
            raise UsageError(
                f"{ledger.path}: the ledger's label {dump_id!r} is also {other}; label it "
                "(--acks LABEL=PATH) with a name of its own"
            )
        ledgers[dump_id] = ledger.path
        plan.ledgers.add(dump_id)
        if ledger.label is None:
            plan.unlabelled_ledgers[dump_id] = tuple(dict.fromkeys((path, os.path.realpath(path))))
        plan.pairs.add((dump_id, None))
        for part in parts:
            info = _stat(part)
            plan.inventory.append(_inventory_row(dump_id, None, None, None, info, "acks", None, None))
            plan.units.append(
                dt.WorkUnit(dt.ACKS_LEDGER, dump_id, None, None, None, part, info.size, ledger_root=root)
            )
    return plan


def _ledger_parts(given: str, path: str) -> list[str]:
    """The files of an `--acks` ledger: the file given, or the Parquet files of a directory (a table
    written by Spark, pandas or pyarrow: `part-*.parquet` beside `_SUCCESS` and `.crc` files, which are
    left out, as Parquet readers leave out names starting with `_` or `.`)."""
    if not os.path.isdir(path):
        return [path]
    if os.path.isdir(os.path.join(path, "_delta_log")):
        # Its Parquet files are every version's: the rows an overwrite, update or delete replaced too.
        raise UsageError(
            f"{given}: a Delta table, whose Parquet files hold its replaced rows too: give --acks an "
            "export of its current version (Parquet or JSON lines)"
        )

    def unreadable(error: OSError) -> None:
        # `os.walk` skips a directory it cannot list: its parts would be left out without a word.
        raise UsageError(f"{error.filename or given}: cannot be read ({error.strerror or error})")

    parts = sorted(
        os.path.join(root, name)
        for root, dirs, names in os.walk(path, onerror=unreadable)
        for name in names
        if name.endswith(".parquet")
        and not name.startswith(("_", "."))
        and not any(
            part.startswith(("_", ".")) for part in os.path.relpath(root, path).split(os.sep) if part != "."
        )
    )
    if not parts:
        raise UsageError(
            f"{given}: a directory holding no .parquet file: an ack ledger is a file, or a Parquet table"
        )
    return parts


def _claim_text(
    texts: dict[tuple[str, str | None, str], str], key: tuple[str, str | None, str], text: str, given: str
) -> None:
    """Record the text that dumps `key`'s file first (or the partition directory holding it); a
    UsageError where another text or directory of the same dump and replica gives it too."""
    owner = texts.setdefault(key, text)
    if owner != text:
        raise UsageError(
            f"{owner} and {given}: both give segment {key[2]} of dump {key[0]!r}, which would be read as "
            "one log, every batch twice: label the inputs (--input LABEL=PATH) to tell the dumps apart"
        )


def _claim(
    owners: dict[tuple[str, str | None, str, int], tuple[str, str]], row: dict[str, Any], given: str
) -> None:
    """Record the partition directory of `row`'s log; a UsageError where another directory already
    holds that log (the same dump id, replica, topic and partition: two inputs of one name, a default
    dump id being the directory's name)."""
    if row["topic"] is None or row["partition"] is None:
        return
    key = (row["dump_id"], row["replica"], row["topic"], row["partition"])
    folder = os.path.dirname(row["file"])
    owner = owners.setdefault(key, (folder, given))
    if owner[0] != folder:
        who = f"replica {key[1]} of " if key[1] is not None else ""
        raise UsageError(
            f"{owner[1]} and {given}: both hold {who}{key[2]}-{key[3]} of dump {key[0]!r} ({owner[0]}, "
            f"{folder}), which would be read as one log: label the inputs (--input LABEL=PATH) to tell "
            "the dumps apart"
        )


def _usable_path(raw: str, *, directory_ok: bool = True) -> str:
    if not raw.strip():
        # (os.path.abspath would make it the working directory: `--input "d=$UNSET"` read whatever is there)
        raise UsageError(f"an empty path ({raw!r}): give the file or directory to read")
    path = os.path.abspath(raw)
    if not os.path.exists(path):
        if is_uri(raw):
            # Inputs are listed by the driver and read by the executors as files.
            raise UsageError(
                f"{raw}: an input is read as files by the driver and every executor: give a path they "
                "all see (a shared mount, /Volumes/... or /dbfs/... on Databricks), not a URI"
            )
        try:
            os.stat(path)
        except OSError as exc:
            # A symlink loop or a dangling link is there but leads nowhere: say which (os.path.exists
            # says only False).
            if exc.errno == errno.ENOENT and os.path.islink(path):
                raise UsageError(
                    f"{raw}: a symbolic link to {os.readlink(path)}, which does not exist"
                ) from None
            if exc.errno not in (errno.ENOENT, None):
                raise UsageError(f"{raw}: {exc.strerror or exc}") from None
        raise UsageError(f"{raw}: no such file or directory")
    if os.path.isdir(path):
        if not directory_ok:
            raise UsageError(f"{raw}: is a directory, expected a file")
        if not os.access(path, os.R_OK | os.X_OK):
            raise UsageError(f"{raw}: cannot read directory: permission denied")
    elif not os.access(path, os.R_OK):
        raise UsageError(f"{raw}: cannot read: permission denied")
    return path


def _default_dump_id(path: str) -> str:
    name = os.path.basename(os.path.normpath(path))
    return name if os.path.isdir(path) else os.path.splitext(name)[0] or name


def _identify(found: Sequence[Discovered], dump_id: str) -> Iterator[tuple[Discovered, str, str | None]]:
    """(item, dump_id, replica) of each discovered item.

    A log directory's replica is its `node.id`/`broker.id`, else its directory name. When the log
    directories of one input do not have distinct replicas (one broker dumped at several times),
    each keeps its own dump_id `<dump_id>/<directory name>`.
    """
    from kafka_log_decoder.discovery import LogDir

    log_dirs = [item for item in found if isinstance(item, LogDir)]
    replicas = [_replica_of(ld) for ld in log_dirs]
    distinct = len(set(replicas)) == len(replicas)
    for item in found:
        if isinstance(item, LogDir):
            replica = _replica_of(item)
            own_id = dump_id if distinct or len(log_dirs) == 1 else f"{dump_id}/{os.path.basename(item.path)}"
            yield item, own_id, replica
        else:
            yield item, dump_id, None


def _replica_of(log_dir: LogDir) -> str:
    if log_dir.replica_id is not None:
        return str(log_dir.replica_id)
    return os.path.basename(os.path.normpath(log_dir.path))


_FileRow = tuple[dict[str, Any], "dt.WorkUnit | None"]


def _files_of(item: Discovered, dump_id: str, replica: str | None) -> Iterator[_FileRow]:
    """Inventory row and (for files that carry rows) work unit of every file of a discovered item."""
    from kafka_log_decoder.discovery import DumpLogText, LogDir, PartitionDir

    if isinstance(item, DumpLogText):
        row, unit = _file(dump_id, replica, None, None, item.file, dt.DUMP_LOG_TEXT, None, None)
        if unit is not None and item.partition is not None:
            # The partition of the dumped files that lie in no partition directory.
            unit = replace(unit, topic=item.partition[0], partition=item.partition[1])
        yield row, unit
        return
    if isinstance(item, LogDir):
        log_dir = item.path
        for _, checkpoint in sorted(item.checkpoint_files.items()):
            yield _file(dump_id, replica, None, None, checkpoint, dt.OFFSET_CHECKPOINT, log_dir, None)
        if item.meta_properties is not None:
            yield _file(dump_id, replica, None, None, item.meta_properties, dt.META_PROPERTIES, log_dir, None)
        if item.clean_shutdown is not None:
            yield _file(dump_id, replica, None, None, item.clean_shutdown, dt.CLEAN_SHUTDOWN, log_dir, None)
        if item.bootstrap_checkpoint is not None:
            yield _file(
                dump_id,
                replica,
                None,
                None,
                item.bootstrap_checkpoint,
                "bootstrap-checkpoint",
                log_dir,
                None,
                False,
            )
        yield from _excluded(item.excluded, dump_id, replica, None, None, log_dir)
        for partition_dir in item.partitions:
            yield from _partition_files(partition_dir, dump_id, replica, log_dir)
    elif isinstance(item, PartitionDir):
        yield from _partition_files(item, dump_id, replica, None)


def _partition_files(
    p: PartitionDir, dump_id: str, replica: str | None, log_dir: str | None
) -> Iterator[_FileRow]:
    t, n = p.topic, p.partition
    for segment in p.segments:
        row, unit = _file(dump_id, replica, t, n, segment.log, dt.LOG, log_dir, segment.base_offset)
        if unit is not None and segment.index is not None:
            unit = replace(unit, index_file=segment.index.path)
        yield row, unit
        if segment.index is not None:
            yield _file(dump_id, replica, t, n, segment.index, "index", log_dir, segment.base_offset, False)
        if segment.timeindex is not None:
            yield _file(dump_id, replica, t, n, segment.timeindex, dt.TIMEINDEX, log_dir, segment.base_offset)
        if segment.txnindex is not None:
            yield _file(dump_id, replica, t, n, segment.txnindex, dt.TXNINDEX, log_dir, segment.base_offset)
    for offset, info in p.snapshots:
        yield _file(dump_id, replica, t, n, info, dt.SNAPSHOT, log_dir, offset)
    if p.leader_epoch_checkpoint is not None:
        yield _file(
            dump_id, replica, t, n, p.leader_epoch_checkpoint, dt.LEADER_EPOCH_CHECKPOINT, log_dir, None
        )
    if p.partition_metadata is not None:
        yield _file(dump_id, replica, t, n, p.partition_metadata, dt.PARTITION_METADATA, log_dir, None)
    if p.quorum_state is not None:
        yield _file(dump_id, replica, t, n, p.quorum_state, dt.QUORUM_STATE, log_dir, None)
    for kraft in p.kraft_snapshots:
        yield _file(dump_id, replica, t, n, kraft.file, "kraft-snapshot", log_dir, kraft.end_offset, False)
    yield from _excluded(p.excluded, dump_id, replica, t, n, log_dir)


def _file(
    dump_id: str,
    replica: str | None,
    topic: str | None,
    partition: int | None,
    info: FileInfo,
    kind: str,
    log_dir: str | None,
    base_offset: int | None,
    carries_rows: bool = True,
) -> _FileRow:
    row = _inventory_row(dump_id, replica, topic, partition, info, kind, log_dir, base_offset)
    unit = None
    if carries_rows and kind in dt.TABLES_OF_KIND:
        if row["fingerprint"] is None and kind not in dt.PROBLEMS_ONLY:
            _require_readable(info.path)
        unit = dt.WorkUnit(kind, dump_id, replica, topic, partition, info.path, info.size)
    return row, unit


def _require_readable(path: str) -> None:
    """A file whose rows the ingest reads and that this user may not open is unreadable input (contract
    §2: exit 2), not a warning in quarantine: a run that read none of a segment must not say VALID. A
    file gone since it was listed (a live log directory's retention) stays quarantine's to tell."""
    try:
        with open(path, "rb"):
            pass
    except PermissionError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or 'permission denied'})") from None
    except OSError:
        return


def _excluded(
    excluded: Iterable[Any],
    dump_id: str,
    replica: str | None,
    topic: str | None,
    partition: int | None,
    log_dir: str | None,
) -> Iterator[_FileRow]:
    for path, reason in excluded:
        try:
            info = _stat(path)
        except OSError:
            continue
        row = _inventory_row(dump_id, replica, topic, partition, info, "other", log_dir, None)
        row.update(is_live=False, excluded_reason=dt.as_text(reason))
        if os.path.isdir(path):
            row.update(kind="directory", fingerprint=None)
        yield row, None


def _stat(path: str) -> FileInfo:
    from kafka_log_decoder.discovery import FileInfo

    st = os.stat(path)
    return FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)


def _inventory_row(
    dump_id: str,
    replica: str | None,
    topic: str | None,
    partition: int | None,
    info: FileInfo,
    kind: str,
    log_dir: str | None,
    base_offset: int | None,
) -> dict[str, Any]:
    return {
        "dump_id": dt.as_text(dump_id),
        "replica": dt.as_text(replica),
        "topic": dt.as_text(topic),
        "partition": partition,
        "file": dt.as_text(info.path),
        "kind": kind,
        "log_dir": dt.as_text(log_dir),
        "base_offset": base_offset,
        "size_bytes": info.size,
        "mtime_ms": info.mtime_ms,
        # Only a regular file's bytes are read (a FIFO left out as not one would block the read).
        "fingerprint": fingerprint(info) if os.path.isfile(info.path) else None,
        "is_live": True,
        "excluded_reason": None,
        "captured_at_ms": None,
    }


def fingerprint(info: FileInfo) -> str | None:
    """size + mtime + BLAKE2b of the first and last 64 KiB: tells a changed file without reading it all."""
    digest = hashlib.blake2b(f"{info.size}:{info.mtime_ms}:".encode(), digest_size=16)
    try:
        with open(info.path, "rb") as handle:
            digest.update(handle.read(FINGERPRINT_EDGE))
            if info.size > FINGERPRINT_EDGE:
                handle.seek(max(info.size - FINGERPRINT_EDGE, FINGERPRINT_EDGE))
                digest.update(handle.read(FINGERPRINT_EDGE))
    except OSError:
        return None
    return digest.hexdigest()


def split_segment(unit: dt.WorkUnit, split_bytes: int) -> list[dt.WorkUnit]:
    """A `.log` larger than `split_bytes` as byte ranges starting at `.index` entries (checked later,
    on the executor, since an index can be stale); every other unit as it is."""
    if unit.kind != dt.LOG or unit.size <= split_bytes:
        return [unit]
    index_path = unit.index_file
    if index_path is None or not os.path.isfile(index_path) or _starts_legacy(unit.file):
        return [unit]
    from kafka_log_decoder.constants import OFFSET_INDEX_ENTRY_SIZE
    from kafka_log_decoder.index_files import read_offset_index
    from kafka_log_decoder.rows import IndexEntry

    boundaries: list[dt.IndexBoundary] = []
    last = 0
    try:
        for number, entry in enumerate(read_offset_index(index_path)):
            if not isinstance(entry, IndexEntry):
                continue
            if entry.position >= last + split_bytes and entry.position < unit.size:
                boundaries.append(
                    dt.IndexBoundary(
                        index_path, number * OFFSET_INDEX_ENTRY_SIZE, entry.offset, entry.position
                    )
                )
                last = entry.position
    except (OSError, NotAKafkaArtifact):
        return [unit]
    if not boundaries:
        return [unit]
    starts = [0, *(b.position for b in boundaries)]
    ends: list[int | None] = [*(b.position for b in boundaries), None]
    units = []
    for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
        units.append(
            replace(
                unit,
                start=start,
                end=end,
                boundary=boundaries[i - 1] if i else None,
                fallbacks=tuple(reversed(starts[:i])),
            )
        )
    return units


def _starts_legacy(path: str) -> bool:
    """Whether a `.log` starts with a magic 0 or 1 entry (a segment written before 0.11's v2 format). A
    range can start only at a v2 batch (`decode_tasks.resolve_start` checks its header and CRC), so each
    range of such a segment would decode it from byte 0 again: it is one unit. The magic byte is at
    position 16 in every format (`LOG_OVERHEAD` + CRC or partition leader epoch). One byte read."""
    from kafka_log_decoder.constants import MAGIC_OFFSET

    try:
        with open(path, "rb") as handle:
            handle.seek(MAGIC_OFFSET)
            magic = handle.read(1)
    except OSError:
        return False
    return len(magic) == 1 and magic[0] < 2


_Unit = tuple[int, "dt.WorkUnit"]  # a unit and its index in `IngestPlan.units`


def task_count(total_bytes: int, units: int, split_bytes: int, parallelism: int | None) -> int:
    """How many tasks decode `total_bytes`: whole waves over `parallelism` cores of at most
    MAX_TASK_BYTES each, but never more than the units nor than `split_bytes`-sized pieces.

    Every task costs a Python worker round trip (on `local[N]` with Delta's jars on the Python path,
    ~0.3 s of CPU), so a task per 128 MB split would cost more than decoding it.
    """
    pieces = max(1, -(-total_bytes // split_bytes))
    if parallelism is not None:
        waves = max(1, -(-total_bytes // (parallelism * MAX_TASK_BYTES)))
        pieces = min(pieces, parallelism * waves)
    return max(1, min(units, pieces))


def pack_tasks(units: Iterable[_Unit], tasks: int) -> list[list[_Unit]]:
    """Units in file order, cut into `tasks` runs of consecutive units of about equal bytes."""
    ordered = sorted(units, key=lambda iu: (iu[1].dump_id, iu[1].replica or "", iu[1].file, iu[1].start))
    total = sum(u.cost for _, u in ordered)
    packed: list[list[_Unit]] = [[] for _ in range(max(1, tasks))]
    done = 0
    for item in ordered:
        cost = item[1].cost
        # The task whose share of the bytes holds the unit's middle byte.
        packed[min(len(packed) - 1, (2 * done + cost) * len(packed) // (2 * total))].append(item)
        done += cost
    return [task for task in packed if task]


def units_for(
    table: str, units: Sequence[dt.WorkUnit], *, records: bool, corrupt_logs: set[int] | None = None
) -> list[_Unit]:
    """The units (with their indexes) that feed `table`; for quarantine, every unit but the `.log`s
    known clean (`corrupt_logs` lists the others; None: none is known clean)."""
    if table == RECORDS.name and not records:
        return []
    if table == QUARANTINE.name:
        return [
            (i, u)
            for i, u in enumerate(units)
            if corrupt_logs is None or u.kind != dt.LOG or i in corrupt_logs
        ]
    return [(i, u) for i, u in enumerate(units) if dt.feeds(u, table)]


# ---------------------------------------------------------------------------------------------
# Acks ledger


def check_ledger(path: str, root: str | None = None) -> None:
    """A usage error unless the ledger (a part of the directory `root`) is JSON lines, CSV or Parquet
    with topic, partition and offset."""
    try:
        columns = dt.ledger_columns(path, root)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable acks ledger (JSON lines, CSV or Parquet): {exc}") from None
    missing = [c for c in dt.ACKS_REQUIRED if c not in columns]
    if missing:
        raise UsageError(f"{path}: acks ledger lacks column(s) {', '.join(missing)}")


# ---------------------------------------------------------------------------------------------
# Spark: one decode pass per table, replaceWhere writes

# Columns of the large tables (bronze batches and records, the audit's sequence history) whose value
# differs on (almost) every row.
UNIQUE_COLUMNS = (
    "position",
    "base_offset",
    "last_offset",
    "crc",
    "base_timestamp",
    "max_timestamp",
    "base_sequence",
    "last_sequence",
    "offset",
    "timestamp",
    "sequence",
    "prev_offset",
    "base_sequence_unwrapped",
    "last_sequence_unwrapped",
    "expected_sequence",
)

# The columns some table keeps Delta statistics of (`TableSpec.stats_columns`): the only ones with
# Parquet statistics too.
STATS_COLUMNS = sorted({c for t in (TABLES, AUDIT_TABLES) for spec in t.values() for c in spec.stats_columns})

# Session confs for the ingest's writes, restored afterwards.
WRITE_SESSION_CONF: dict[str, str] = {
    # Parquet 2.0 data pages: offsets, positions and timestamps, which rise from row to row, are
    # written DELTA_BINARY_PACKED instead of PLAIN (Spark's vectorised reader has read them since
    # 3.3). On the bench's 1 GB of 1-record batches (copies of one template batch, so even the CRCs
    # repeat) the table goes from 77 MB to 1 MB, and its write from 12.05 to 11.30 s (best of 3, one
    # warm session); random CRCs and sequence numbers shrink less.
    "parquet.writer.version": "v2",
    # Rows go to an open Parquet writer per table partition instead of being sorted by
    # (dump_id, replica, topic) first: a task's units share their partition, so the sort (which
    # copies every row and spills) bought nothing. Past this many partitions in one task Spark sorts.
    "spark.sql.maxConcurrentOutputFileWriters": "8",
    # Parquet min/max statistics (per row group and page) only of the columns Delta keeps statistics
    # of, the keys readers filter on (Hadoop keys: session confs reach the writer's Hadoop conf). Each
    # costs a comparison or two per value, and a string's a copy: statistics of `file` alone were a
    # tenth of the write on one-record batches. No size statistics (byte counts and level histograms
    # per page, which no reader of these tables uses). On the bench's 1 GB of one-record batches
    # (warm, interleaved, 5 rounds) ingest took 11.23 s against 11.59 s (medians); the audit's
    # 1 GB `sequence_history` write, with the dictionaries below, 7.35-7.63 s against 8.26-8.44 s.
    "parquet.column.statistics.enabled": "false",
    **{f"parquet.column.statistics.enabled#{column}": "true" for column in STATS_COLUMNS},
    "parquet.size.statistics.enabled": "false",
    # No dictionary for the columns that are unique per row: Parquet would build one per row group
    # until it overflows and fall back to plain, checking for the fallback on every value.
    **{f"parquet.enable.dictionary#{column}": "false" for column in UNIQUE_COLUMNS},
}

PARQUET_CODEC = "snappy"


def ingest_write_options(spec: TableSpec) -> dict[str, str]:
    """DataFrameWriter options of an ingest table write."""
    options = {
        "compression": PARQUET_CODEC,
        # Tasks already write whole table partitions; a shuffle to coalesce files would only cost.
        "optimizeWrite": "false",
    }
    if spec.stats_columns:
        # Delta's default, the first 32 columns, compares every row's file path and strings: a fifth
        # of the write's time on one-record batches.
        options["delta.dataSkippingStatsColumns"] = ",".join(spec.stats_columns)
    return options


@dataclass
class DecodePass:
    """The rows of one table and, once they are written, the `.log` units whose walk met corrupt bytes
    and the units on which the pass failed (`decode_tasks.PassFailed`)."""

    df: DataFrame
    # The `.log` units of the pass; an accumulator of (units decoded, units corrupt, (unit, table,
    # error) of the failures), none under Spark Connect; whether the corrupt units are the quarantine's.
    log_units: frozenset[int] = frozenset()
    unit_report: Any = None
    report: bool = False

    @property
    def corrupt_logs(self) -> set[int] | None:
        """The corrupt units; None unless this pass walks as quarantine does and every `.log` unit of
        the pass reported (it ran to the end)."""
        if self.unit_report is None or not self.report:
            return None
        decoded, corrupt, _ = self.unit_report.value
        return set(corrupt) if self.log_units <= decoded else None

    @property
    def failures(self) -> dict[int, list[dt.PassFailed]]:
        """The units on which the pass failed, with how (under Spark Connect it raised instead)."""
        if self.unit_report is None:
            return {}
        out: dict[int, list[dt.PassFailed]] = {}
        for unit_id, table, error in sorted(self.unit_report.value[2]):
            out.setdefault(unit_id, []).append(dt.PassFailed(table, error))
        return out


def _check_sources(spark: SparkSession, output: str, plan: IngestPlan) -> None:
    """A usage error where an input given without a label would replace a dump of the same default id
    (its directory's or file's name) that an earlier run read from elsewhere: `/b1/orders-0` then
    `/b2/orders-0` (two brokers' copies of one partition) are both dump `orders-0`, and the second
    ingest would wipe the first's rows without a word. Labels (`--input b2=/b2/orders-0`) tell them
    apart, or say that the replacement is meant. The same for an `--acks` ledger without a label
    (`/mon/acks.jsonl` then `/tue/acks.jsonl`: the second wiped Monday's acks). One small read of
    `files`, only where the output holds one and an input or ledger has no label."""
    if not plan.unlabelled and not plan.unlabelled_ledgers:
        return
    from pyspark.sql import functions as F

    files = table_location(output, FILES.name)
    if not is_delta(spark, files):
        return
    # The rows this run replaces (`replace_predicate`): per replica it writes, the input's id and the
    # `<id>/<directory>` ids of its log directories.
    replaced = {
        (base, replica, source)
        for dump_id, replica in plan.pairs
        if (base := dump_id.split("/", 1)[0]) in plan.unlabelled and dump_id not in plan.ledgers
        for source in plan.unlabelled[base]
    } | {(dump_id, None, source) for dump_id, paths in plan.unlabelled_ledgers.items() for source in paths}
    sources = spark.createDataFrame(
        [(dt.as_text(b), dt.as_text(r), dt.as_text(p)) for b, r, p in sorted(replaced, key=str)],
        "base string, source_replica string, source string",
    )
    same_dump = (F.col("dump_id") == F.col("base")) | F.col("dump_id").startswith(
        F.concat(F.col("base"), F.lit("/"))
    )
    under = (F.col("file") == F.col("source")) | F.col("file").startswith(
        F.concat(F.col("source"), F.lit("/"))
    )
    try:
        rows = (
            spark.read.format("delta")
            .load(files)
            .join(F.broadcast(sources), same_dump & F.col("replica").eqNullSafe(F.col("source_replica")))
            .groupBy("dump_id", "replica", "file")
            .agg(F.max(under).alias("_under"))
            .where(~F.col("_under"))
            .groupBy("dump_id")
            .agg(F.min("file").alias("file"))
            .collect()
        )
    except Exception as exc:  # no table after all (a URI under Spark Connect is not checked first)
        if "PATH_NOT_FOUND" in str(exc) or "is not a Delta table" in str(exc):
            return
        raise
    if rows:
        row = min(rows, key=lambda r: r["dump_id"])
        what, option = (
            ("ledger", "--acks") if row["dump_id"] in plan.unlabelled_ledgers else ("input", "--input")
        )
        raise UsageError(
            f"{output}: an earlier ingest read dump {row['dump_id']!r} from elsewhere ({row['file']}); this "
            f"{what} of the same name would replace it: label the {what} ({option} NAME=PATH), with the old "
            "name to replace that dump, with a new one to keep both"
        )


def _gone_pairs(spark: SparkSession, output: str, plan: IngestPlan) -> set[tuple[str, str | None]]:
    """The (dump_id, replica) pairs of this run's dumps an earlier ingest wrote that this run does not:
    a replica no longer in a re-dumped input (a broker's log directory removed from a directory of them:
    its `files` rows lie under the input's path), and those a stopped ingest left in the other tables
    but not in `files` (which it clears first: `audit` refuses them). Their rows go, as those of a
    removed partition directory do, so that a re-run ends as an ingest of the input as it is now. A job
    over the partition columns of this run's dumps in each table (the files of those partitions are
    opened, their columns not read), only where the output holds tables."""
    import functools

    from pyspark.sql import functions as F

    files_path = table_location(output, FILES.name)
    if not plan.sources or not is_delta(spark, files_path):
        return set()

    def of_dump(base: str) -> Column:
        return (F.col("dump_id") == dt.as_text(base)) | F.col("dump_id").startswith(dt.as_text(base) + "/")

    def under(source: str) -> Column:
        text = dt.as_text(source)
        return (F.col("file") == text) | F.col("file").startswith(text.rstrip("/") + "/")

    ours = functools.reduce(lambda a, b: a | b, [of_dump(base) for base in sorted(plan.sources)])
    read_from = functools.reduce(
        lambda a, b: a | b,
        [of_dump(base) & under(path) for base, paths in sorted(plan.sources.items()) for path in paths],
    )
    pair: list[Column] = [
        F.col("dump_id"),
        F.coalesce("replica", F.lit("")).alias("_replica"),
        F.col("replica"),
    ]
    files = spark.read.format("delta").load(files_path)
    listed = files.where(read_from).select(*pair)
    held = [
        spark.read.format("delta").load(location).where(ours).select(*pair)
        for name in TABLES
        if name != FILES.name and is_delta(spark, location := table_location(output, name))
    ]
    unlisted = [
        df.join(files.select(*pair[:2]).distinct(), ["dump_id", "_replica"], "left_anti") for df in held
    ]
    rows = functools.reduce(lambda a, b: a.unionByName(b), [listed, *unlisted]).distinct().collect()
    return {(r["dump_id"], r["replica"]) for r in rows} - plan.pairs


def _check_labels(spark: SparkSession, output: str, plan: IngestPlan) -> None:
    """A usage error where this run's rows would replace another kind of input's rows an earlier run
    wrote into `output` under the same dump id and no replica (the replaced pairs of every table): a
    ledger labelled as a bare partition directory's or text's dump (its batches would be wiped), or
    such an input labelled as an earlier ledger (its acks would be). One small read of `files`, only
    where the output holds tables and this run replaces a pair with no replica."""
    inputs = {d for d, replica in plan.pairs if replica is None} - plan.ledgers
    if not plan.ledgers and not inputs:
        return
    from pyspark.sql import functions as F

    files = table_location(output, FILES.name)
    if not is_delta(spark, files):
        return
    try:
        rows = (
            spark.read.format("delta")
            .load(files)
            .where(
                F.col("dump_id").isin(*sorted(dt.as_text(d) for d in plan.ledgers | inputs))
                & F.col("replica").isNull()
            )
            .groupBy("dump_id")
            .agg(F.max(F.col("kind") == "acks").alias("acks"), F.max(F.col("kind") != "acks").alias("dump"))
            .collect()
        )
    except Exception as exc:  # no table after all (a URI under Spark Connect is not checked first)
        if "PATH_NOT_FOUND" in str(exc) or "is not a Delta table" in str(exc):
            return
        raise
    held = {r["dump_id"]: (bool(r["acks"]), bool(r["dump"])) for r in rows}
    wiped = sorted(d for d in plan.ledgers if held.get(dt.as_text(d), (False, False))[1])
    wiped_acks = sorted(d for d in inputs if held.get(dt.as_text(d), (False, False))[0])
    if wiped:
        names = ", ".join(map(repr, wiped))
        raise UsageError(
            f"{output}: the --acks label(s) {names} are dump ids this output already holds; an ingest "
            "replaces its labels' rows in every table, so label the ledger with a name of its own"
        )
    if wiped_acks:
        names = ", ".join(map(repr, wiped_acks))
        raise UsageError(
            f"{output}: the input label(s) {names} are an earlier --acks ledger's label in this output; "
            "an ingest replaces its labels' rows in every table, so label the input with a name of its own"
        )


def run_ingest(
    spark: SparkSession,
    options: IngestOptions,
    *,
    plan: IngestPlan | None = None,
    after_write: Callable[[str], None] | None = None,
) -> IngestResult:
    """Plan on the driver, decode on executors, write every table; `after_write(table)` is a test hook."""
    if plan is None:
        plan = plan_ingest(options)
    _check_output_outside(options.output, [p.path for p in options.inputs])
    _check_output(options.output)
    _check_labels(spark, options.output, plan)
    _check_sources(spark, options.output, plan)
    run_id = uuid.uuid4().hex
    written: dict[str, str] = {}
    predicate = replace_predicate(plan.pairs | _gone_pairs(spark, options.output, plan), plan.ledgers)
    # The inventory is written last and tells the audit a dump's tables are whole: its pairs leave it
    # first, so a run that stops halfway leaves no earlier run's listing beside its half-written rows.
    if is_delta(spark, table_location(options.output, FILES.name)):
        write_table(spark.createDataFrame([], FILES.schema), FILES, options.output, predicate, run_id)

    passes: dict[str, DecodePass] = {}

    def write(
        spec: TableSpec,
        corrupt_logs: set[int] | None = None,
        failures: Mapping[int, Sequence[dt.PassFailed]] | None = None,
    ) -> None:
        """Decode and write one table (into `passes`)."""
        units = units_for(spec.name, plan.units, records=options.records, corrupt_logs=corrupt_logs)
        report = dt.walk_finds_quarantine(spec.name, records=options.records)
        decoded = decode_table(
            spark,
            spec,
            units,
            records=options.records,
            split_bytes=options.split_bytes,
            report=report,
            failures=failures or {},
        )
        written[spec.name] = write_table(
            decoded.df, spec, options.output, predicate, run_id, options=ingest_write_options(spec)
        )
        passes[spec.name] = decoded
        if after_write is not None:
            after_write(spec.name)

    with session_conf(spark, WRITE_SESSION_CONF):
        write(BATCHES)
        # The small tables are a few short jobs and a Delta commit each, which wait on the driver
        # more than on the cores: written concurrently, beside records.
        concurrently(spark, [partial(write, t) for t in (RECORDS, *INDEPENDENT_TABLES)])
        # Quarantine reads the `.log`s that the walk of batches (or of records, in record mode) found
        # corrupt, and every unit a pass failed on, to say so.
        walked = passes[RECORDS.name if options.records else BATCHES.name].corrupt_logs
        failures: dict[int, list[dt.PassFailed]] = {}
        for decoded in passes.values():
            for unit_id, failed in decoded.failures.items():
                failures.setdefault(unit_id, []).extend(failed)
        write(QUARANTINE, None if walked is None else walked | set(failures), failures)
        inventory = _arrow_table(plan.inventory, FILES)
        written[FILES.name] = write_table(
            spark.createDataFrame(inventory),
            FILES,
            options.output,
            predicate,
            run_id,
            options=ingest_write_options(FILES),
        )
    if after_write is not None:
        after_write(FILES.name)
    tables = {spec.name: written[spec.name] for spec in (*DATA_TABLES, FILES)}
    return IngestResult(run_id, tables, sorted(plan.pairs, key=lambda p: (p[0], p[1] or "")))


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set session confs for the duration of a block, then restore them; a conf the platform does not
    let a job set (serverless) keeps its value."""
    saved: dict[str, str | None] = {}
    for key, value in conf.items():
        try:
            previous = spark.conf.get(key, None)
            spark.conf.set(key, value)
        except Exception:
            continue
        saved[key] = previous
    try:
        yield
    finally:
        for key, previous in saved.items():
            if previous is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, previous)


def is_uri(path: str) -> bool:
    """`dbfs:/...`, `abfss://...`, `s3://...`, `file:/...`: a location Spark resolves, not a local
    directory (a scheme of two characters or more, so `C:\\...` stays local)."""
    return re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", path) is not None


def spark_output(output: str) -> str:
    """The `--output` as Spark and this process both resolve it. On Databricks a path under `/dbfs/` is
    the FUSE view of DBFS, while Spark reads a path without a scheme on DBFS itself (`/dbfs/x` would
    be `dbfs:/dbfs/x`, a place the Python side never sees): it becomes `dbfs:/x`, and the URI's branch
    (reports copied through Hadoop) serves it. `/Volumes/...` means one place to both and stays. Not
    under Spark Connect, whose session has no Hadoop file system to copy reports through: there a
    `/dbfs` output is a usage error, and only a `/Volumes` path is one place to both (README)."""
    connect = os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    if os.environ.get("DATABRICKS_RUNTIME_VERSION") and re.match(r"/dbfs(/|$)", output):
        if connect:
            raise UsageError(
                f"{output}: under Spark Connect a /dbfs path is two places (Spark's dbfs:/dbfs/..., this "
                "process's dbfs:/...), and reports cannot reach a dbfs:/ URI: give a /Volumes path"
            )
        return "dbfs:/" + output[len("/dbfs") :].lstrip("/")
    return output


def table_location(output: str, name: str) -> str:
    """Where `name` (a table, or a report folder) of an output lives: `<output>/<name>`, absolute when
    local."""
    if is_uri(output):
        return output.rstrip("/") + "/" + name
    return os.path.join(os.path.abspath(output), name)


def is_delta(spark: SparkSession, path: str) -> bool:
    """Whether `path` holds a Delta table (its `_delta_log`): a URI asked of the session's Hadoop file
    system (without one, Spark Connect, taken as there: a missing table fails at read time)."""
    if not is_uri(path):
        return os.path.isdir(os.path.join(path, "_delta_log"))
    if getattr(spark, "_jvm", None) is None:
        return True
    log, fs = hadoop_path(spark, path.rstrip("/") + "/_delta_log")
    return bool(fs.exists(log))


def hadoop_path(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """`uri` as a Hadoop Path, and the session's Hadoop file system that holds it (a classic session)."""
    path = spark._jvm.org.apache.hadoop.fs.Path(uri)  # type: ignore[union-attr]
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def _check_output(output: str, make: bool = True) -> None:
    """A usage error, before the JVM starts, where the tables cannot be written under `output`; with
    `make`, its directory is made now (`audit`, which writes only where an ingest did, makes none)."""
    if not output.strip():
        raise UsageError(f"--output is empty ({output!r}): give the directory the tables are written under")
    if is_uri(output):
        return
    path = os.path.abspath(output)
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{output}: output directory is not writable")
    # Made now, before the JVM starts: a path the access check passes that no directory can be made at
    # (under /proc, where root may write) failed the job later, a traceback and exit status 3.
    try:
        if make:
            os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{output}: cannot make the output directory: {exc.strerror or exc}") from None
    # The reports are written in report.partial/ and the previous ones wait in report.previous/.
    for name in (*TABLES, *AUDIT_TABLES, *REPORT_FOLDERS):
        where = os.path.join(path, name)
        if os.path.lexists(where) and not os.path.isdir(where):
            goes = "reports go" if name in REPORT_FOLDERS else name + " Delta table goes"
            raise UsageError(
                f"{where}: exists and is no directory, where the output's {goes}: give another output"
            )


def _check_output_outside(output: str, inputs: Sequence[str]) -> None:
    """A usage error where the output lies inside an input directory: the tables written there would be
    listed as the dump's files, another inventory on every run."""
    if is_uri(output):
        return
    out = os.path.realpath(output)
    for given in inputs:
        if is_uri(given) or not os.path.isdir(given):
            continue
        root = os.path.realpath(given)
        if out == root or out.startswith(root.rstrip(os.sep) + os.sep):
            raise UsageError(
                f"{output}: the output lies inside the input {given}; its tables would be read as the "
                "dump's files: give an output outside the inputs"
            )


def decode_table(
    spark: SparkSession,
    spec: TableSpec,
    units: Sequence[_Unit],
    *,
    records: bool,
    split_bytes: int,
    report: bool = False,
    failures: Mapping[int, Sequence[dt.PassFailed]] | None = None,
) -> DecodePass:
    """The rows of one table, decoded on the executors: one task per packed group of units. The units
    each pass failed on are gathered (`DecodePass.failures`), and with `report` the indexes of the
    `.log` units whose walk met corrupt bytes too; `failures` (the quarantine pass) are the earlier
    passes' per unit, for its rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if not units:
        return DecodePass(spark.createDataFrame(_arrow_table([], spec)))
    sc = _spark_context(spark)
    total = sum(u.cost for _, u in units)
    tasks = pack_tasks(units, task_count(total, len(units), split_bytes, sc and sc.defaultParallelism))
    arrow_schema = to_arrow_schema(spec.schema)
    table = spec.name
    # Spark Connect has no accumulators: the quarantine pass then decodes every unit, and a pass that
    # fails on a unit fails its job (`decode_tasks.decode_unit_safely`).
    report_to = sc.accumulator((set(), set(), set()), _UNIT_REPORT) if sc is not None else None
    given = dict(failures or {})

    def decode(batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                decoded: set[int] = set()
                corrupt: set[int] = set()
                failed: set[tuple[int, str, str]] = set()
                merged = dt.Coalesced()
                for unit_id, unit in tasks[task_id]:
                    walk = dt.decode_unit_safely(
                        unit,
                        table,
                        arrow_schema,
                        records=records,
                        failures=given.get(unit_id, ()),
                        raise_failures=report_to is None,
                    )
                    found = yield from merged.take(walk)
                    decoded.add(unit_id)
                    if isinstance(found, dt.PassFailed):
                        failed.add((unit_id, found.table, found.error))
                    elif found:
                        corrupt.add(unit_id)
                yield from merged.flush()
                if report_to is not None:
                    report_to.add((decoded, corrupt, failed))

    # One input row per task, one partition per row: Spark runs the tasks in parallel.
    df = spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(decode, spec.schema)
    log_units = frozenset(i for i, u in units if u.kind == dt.LOG)
    return DecodePass(df, log_units, report_to, report)


def _spark_context(spark: SparkSession) -> Any:
    """The SparkContext, or None under Spark Connect (which has none)."""
    try:
        return spark.sparkContext
    except Exception:
        return None


_Report = tuple[set[int], set[int], set[tuple[int, str, str]]]


class _UnitReport:
    """Accumulates (units decoded, units corrupt, failures) across tasks; a retried task only repeats
    members."""

    def zero(self, value: _Report) -> _Report:
        return set(), set(), set()

    def addInPlace(self, value1: _Report, value2: _Report) -> _Report:
        value1[0].update(value2[0])
        value1[1].update(value2[1])
        value1[2].update(value2[2])
        return value1


_UNIT_REPORT = _UnitReport()


def replace_predicate(pairs: Iterable[tuple[str, str | None]], ledgers: Iterable[str] = ()) -> str:
    """`replaceWhere` of the (dump_id, replica) partitions this run writes, and of those an earlier
    ingest of the same input wrote for the same replica under its other form of id: an input's log
    directories of one broker at several times are `<id>/<directory>` each (`_identify`), one alone is
    `<id>`, so adding or removing one changes the ids, and the rows under the old ones would stay
    beside the new (the same batches twice, as two dumps). Labels hold no `/`; a ledger's is exact."""
    ledger_ids = set(ledgers)
    terms = set()
    for dump_id, replica in pairs:
        replica_term = "replica IS NULL" if replica is None else f"replica = {_sql_string(replica)}"
        if dump_id in ledger_ids:
            terms.add(f"(dump_id = {_sql_string(dump_id)} AND {replica_term})")
            continue
        base = dump_id.split("/", 1)[0]
        ids = f"(dump_id = {_sql_string(base)} OR startswith(dump_id, {_sql_string(base + '/')}))"
        terms.add(f"({ids} AND {replica_term})")
    return " OR ".join(sorted(terms)) if terms else "false"


def _sql_string(value: str) -> str:
    # The rows name a dump or replica as a table can hold it (`decode_tasks.as_text`): so does the predicate.
    text = dt.as_text(value)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_table(
    df: DataFrame,
    spec: TableSpec,
    output: str,
    predicate: str,
    run_id: str,
    *,
    options: Mapping[str, str] | None = None,
) -> str:
    path = table_location(output, spec.name)
    writer = (
        df.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", predicate)
        .option("userMetadata", f"replay-audit ingest run {run_id}")
        # A table an earlier version wrote gains the columns added since (`batches.walk_mark`), null in
        # its old rows, which the readers take as not given (the audit then checks those rows itself).
        .option("mergeSchema", "true")
    )
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.partitionBy(*spec.partition_by).save(path)
    return path


def _arrow_table(rows: list[dict[str, Any]], spec: TableSpec) -> Any:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    return pa.Table.from_pylist(rows, schema=to_arrow_schema(spec.schema))


# ---------------------------------------------------------------------------------------------
# CLI


def parse_size(text: str) -> int:
    """Bytes, optionally with a K/M/G suffix (binary units)."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    multiplier = units.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in units else raw
    value = int(number) * multiplier
    if value <= 0:
        raise ValueError(f"{text}: must be positive")
    return value


def run_cli(args: Any) -> int:
    """`replay-audit ingest`: exit 0 when the tables were written (corrupt data is quarantined)."""
    from jobs.spark_session import get_spark, job_local_conf

    options = IngestOptions(
        inputs=[LabeledPath.parse(p) for p in args.input],
        output=args.output,
        records=args.records,
        acks=[LabeledPath.parse(p) for p in args.acks or ()],
        split_bytes=args.split_bytes,
        captured_at=parse_captured_at(args.captured_at or ()),
    )
    # Usage errors before the JVM starts: a wrong path costs no Spark start-up.
    t0 = time.perf_counter()
    plan = plan_ingest(options)
    if args.catalog_schema:
        from jobs.catalog import schema_parts

        schema_parts(args.catalog_schema)  # its form, before the JVM starts (its existence after)
    _check_output_outside(options.output, [p.path for p in options.inputs])  # before it is made
    _check_output(options.output)
    planned_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    spark = get_spark("replay-audit ingest", job_local_conf("ingest"), quiet_jvm=True)
    if args.catalog_schema:
        from jobs.catalog import check_schema

        check_schema(spark, args.catalog_schema, args.output)  # before the work, not after it
    t2 = time.perf_counter()
    result = run_ingest(spark, options, plan=plan)
    ingest_s = planned_s + time.perf_counter() - t2
    for name, path in result.tables.items():
        print(f"{name}\t{path}")
    if args.catalog_schema:
        from jobs.catalog import register_tables

        for name in register_tables(spark, args.catalog_schema, result.tables).values():
            print(f"registered\t{name}")
    # The time of the ingest itself (discovery, decoding and the Delta writes), apart from the JVM and
    # Spark session start (bench/ingest_throughput reads this line).
    print(
        f"replay-audit: ingested {len(plan.inventory)} files in {ingest_s:.3f} s "
        f"(Spark session started in {t2 - t1:.3f} s)",
        file=sys.stderr,
    )
    return 0
