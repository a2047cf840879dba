"""The ingest stage: any input of audit-contract §1 -> the bronze Delta tables of `schemas.tables`.

The driver only lists files (discovery, an inventory with fingerprints) and plans work units: one
per file, a large `.log` cut into byte ranges at batch boundaries taken from its `.index`. Executors
read and decode the bytes (`jobs.decode_tasks`, through `mapInArrow`), one pass per table.

Idempotence: every table is partitioned by `(dump_id, replica)` and each write is a Delta
`replaceWhere` overwrite of exactly the `(dump_id, replica)` pairs this run ingests. Re-running on the
same input replaces those partitions with identical rows; a new dump only adds partitions; a run
killed between two table writes is repaired by the next run, which rewrites every table. Compared
with a MERGE on the natural key this needs no join against the existing table (its cost does not
grow with the table), and rows that disappeared from a re-dumped input (a quarantine row of a file
since repaired) are removed instead of lingering. The inventory (`files`) is written last, so a
dump listed there has all its tables written.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jobs import decode_tasks as dt
from kafka_log_decoder.errors import NotAKafkaArtifact
from schemas.tables import (
    ACKS,
    BATCHES,
    FILES,
    PARTITION_STATE,
    PRODUCER_SNAPSHOTS,
    QUARANTINE,
    RECORDS,
    TXN_INDEX,
    TableSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from kafka_log_decoder.discovery import Discovered, FileInfo, LogDir, PartitionDir

DEFAULT_SPLIT_BYTES = 128 << 20
FINGERPRINT_EDGE = 64 << 10
# Written in this order; `files` last (see the module docstring).
DATA_TABLES: tuple[TableSpec, ...] = (
    BATCHES,
    RECORDS,
    PRODUCER_SNAPSHOTS,
    PARTITION_STATE,
    TXN_INDEX,
    QUARANTINE,
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


@dataclass
class IngestPlan:
    """What the driver found: inventory rows, work units and the (dump_id, replica) pairs replaced."""

    inventory: list[dict[str, Any]] = field(default_factory=list)
    units: list[dt.WorkUnit] = field(default_factory=list)
    pairs: set[tuple[str, str | None]] = field(default_factory=set)


@dataclass
class IngestResult:
    run_id: str
    tables: dict[str, str]
    pairs: list[tuple[str, str | None]]


# ---------------------------------------------------------------------------------------------
# Driver: discovery and planning (no bytes of segments are read here)


def plan_ingest(options: IngestOptions) -> IngestPlan:
    """Discover every input, list the files and plan the work units; usage errors raise UsageError."""
    from kafka_log_decoder.discovery import discover

    plan = IngestPlan()
    seen: set[tuple[str, str | None, str]] = set()
    for given in options.inputs:
        path = _usable_path(given.path)
        try:
            found = discover([path])
        except NotAKafkaArtifact as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"{given.path}: cannot read: {exc.strerror or exc}") from None
        dump_id = given.label or _default_dump_id(path)
        for item, item_dump_id, replica in _identify(found, dump_id):
            for row, unit in _files_of(item, item_dump_id, replica):
                key = (item_dump_id, replica, row["file"])
                if key in seen:
                    continue
                seen.add(key)
                plan.pairs.add((item_dump_id, replica))
                plan.inventory.append(row)
                if unit is not None:
                    plan.units.extend(split_segment(unit, options.split_bytes))
    for ledger in options.acks:
        path = _usable_path(ledger.path, directory_ok=False)
        check_ledger(path)
        dump_id = ledger.label or os.path.basename(path)
        info = _stat(path)
        plan.pairs.add((dump_id, None))
        plan.inventory.append(_inventory_row(dump_id, None, None, None, info, "acks", None, None))
        plan.units.append(dt.WorkUnit(dt.ACKS_LEDGER, dump_id, None, None, None, path, info.size))
    return plan


def _usable_path(raw: str, *, directory_ok: bool = True) -> str:
    path = os.path.abspath(raw)
    if not os.path.exists(path):
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
        yield _file(dump_id, replica, None, None, item.file, dt.DUMP_LOG_TEXT, None, None)
        return
    if isinstance(item, LogDir):
        log_dir = item.path
        for _, checkpoint in sorted(item.checkpoint_files.items()):
            yield _file(dump_id, replica, None, None, checkpoint, dt.OFFSET_CHECKPOINT, log_dir, None)
        for info, kind in (
            (item.meta_properties, "meta.properties"),
            (item.clean_shutdown, "clean-shutdown"),
            (item.bootstrap_checkpoint, "bootstrap-checkpoint"),
        ):
            if info is not None:
                yield _file(dump_id, replica, None, None, info, kind, log_dir, None, carries_rows=False)
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
        yield _file(dump_id, replica, t, n, segment.log, dt.LOG, log_dir, segment.base_offset)
        if segment.index is not None:
            yield _file(dump_id, replica, t, n, segment.index, "index", log_dir, segment.base_offset, False)
        if segment.timeindex is not None:
            yield _file(
                dump_id, replica, t, n, segment.timeindex, "timeindex", log_dir, segment.base_offset, False
            )
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
        yield _file(dump_id, replica, t, n, p.quorum_state, "quorum-state", log_dir, None, False)
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
        unit = dt.WorkUnit(kind, dump_id, replica, topic, partition, info.path, info.size)
    return row, unit


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
        row.update(is_live=False, excluded_reason=reason)
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
        "dump_id": dump_id,
        "replica": replica,
        "topic": topic,
        "partition": partition,
        "file": info.path,
        "kind": kind,
        "log_dir": log_dir,
        "base_offset": base_offset,
        "size_bytes": info.size,
        "mtime_ms": info.mtime_ms,
        "fingerprint": None if os.path.isdir(info.path) else fingerprint(info),
        "is_live": True,
        "excluded_reason": None,
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
    index_path = unit.file[: -len(".log")] + ".index" if unit.file.endswith(".log") else None
    if index_path is None or not os.path.isfile(index_path):
        return [unit]
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
                        index_path, number * dt.OFFSET_INDEX_ENTRY_SIZE, entry.offset, entry.position
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


def pack_tasks(units: Iterable[dt.WorkUnit], task_bytes: int) -> list[list[dt.WorkUnit]]:
    """Consecutive units packed into tasks of about `task_bytes`: few output files for many small inputs."""
    ordered = sorted(units, key=lambda u: (u.dump_id, u.replica or "", u.file, u.start))
    tasks: list[list[dt.WorkUnit]] = []
    current: list[dt.WorkUnit] = []
    size = 0
    for unit in ordered:
        if current and size + unit.cost > task_bytes:
            tasks.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.cost
    if current:
        tasks.append(current)
    return tasks


def units_for(table: str, units: Iterable[dt.WorkUnit], *, records: bool) -> list[dt.WorkUnit]:
    if table == RECORDS.name and not records:
        return []
    if table == QUARANTINE.name:
        return list(units)
    return [u for u in units if table in dt.TABLES_OF_KIND[u.kind]]


# ---------------------------------------------------------------------------------------------
# Acks ledger


def check_ledger(path: str) -> None:
    """A usage error unless the ledger is JSON lines, CSV or Parquet with topic, partition and offset."""
    try:
        columns = dt.ledger_columns(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable acks ledger (JSON lines, CSV or Parquet): {exc}") from None
    missing = [c for c in dt.ACKS_REQUIRED if c not in columns]
    if missing:
        raise UsageError(f"{path}: acks ledger lacks column(s) {', '.join(missing)}")


# ---------------------------------------------------------------------------------------------
# Spark: one decode pass per table, replaceWhere writes


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
    _check_output(options.output)
    run_id = uuid.uuid4().hex
    tables: dict[str, str] = {}
    predicate = replace_predicate(plan.pairs)
    for spec in DATA_TABLES:
        df = decode_table(spark, spec, plan.units, records=options.records, split_bytes=options.split_bytes)
        tables[spec.name] = write_table(df, spec, options.output, predicate, run_id)
        if after_write is not None:
            after_write(spec.name)
    inventory = _arrow_table(plan.inventory, FILES)
    tables[FILES.name] = write_table(
        spark.createDataFrame(inventory), FILES, options.output, predicate, run_id
    )
    if after_write is not None:
        after_write(FILES.name)
    return IngestResult(run_id, tables, sorted(plan.pairs, key=lambda p: (p[0], p[1] or "")))


def _is_uri(path: str) -> bool:
    """`dbfs:/...`, `abfss://...`, `s3://...`: a location Spark resolves, not a local directory."""
    return "://" in path or path.startswith("dbfs:")


def _table_location(output: str, name: str) -> str:
    if _is_uri(output):
        return output.rstrip("/") + "/" + name
    return os.path.join(os.path.abspath(output), name)


def _check_output(output: str) -> None:
    if _is_uri(output):
        return
    path = os.path.abspath(output)
    parent = path
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{output}: output directory is not writable")


def decode_table(
    spark: SparkSession, spec: TableSpec, units: Sequence[dt.WorkUnit], *, records: bool, split_bytes: int
) -> DataFrame:
    """The rows of one table, decoded on the executors: one task per packed group of units."""
    from pyspark.sql.pandas.types import to_arrow_schema

    tasks = pack_tasks(units_for(spec.name, units, records=records), split_bytes)
    if not tasks:
        return spark.createDataFrame(_arrow_table([], spec))
    arrow_schema = to_arrow_schema(spec.schema)
    table = spec.name

    def decode(batches: Iterable[Any]) -> Iterator[Any]:
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                for unit in tasks[task_id]:
                    yield from dt.decode_unit_safely(unit, table, arrow_schema, records=records)

    # One input row per task, one partition per row: Spark runs the tasks in parallel.
    return spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(decode, spec.schema)


def replace_predicate(pairs: Iterable[tuple[str, str | None]]) -> str:
    """`replaceWhere` of the (dump_id, replica) partitions this run writes."""
    terms = []
    for dump_id, replica in sorted(pairs, key=lambda p: (p[0], p[1] or "")):
        replica_term = "replica IS NULL" if replica is None else f"replica = {_sql_string(replica)}"
        terms.append(f"(dump_id = {_sql_string(dump_id)} AND {replica_term})")
    return " OR ".join(terms) if terms else "false"


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_table(df: DataFrame, spec: TableSpec, output: str, predicate: str, run_id: str) -> str:
    path = _table_location(output, spec.name)
    (
        df.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", predicate)
        .option("userMetadata", f"replay-audit ingest run {run_id}")
        .partitionBy(*spec.partition_by)
        .save(path)
    )
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
    from jobs.spark_session import get_spark

    options = IngestOptions(
        inputs=[LabeledPath.parse(p) for p in args.input],
        output=args.output,
        records=args.records,
        acks=[LabeledPath.parse(p) for p in args.acks or ()],
        split_bytes=args.split_bytes,
    )
    # Usage errors before the JVM starts: a wrong path costs no Spark start-up.
    plan = plan_ingest(options)
    _check_output(options.output)
    result = run_ingest(get_spark("replay-audit ingest"), options, plan=plan)
    for name, path in result.tables.items():
        print(f"{name}\t{path}")
    return 0
