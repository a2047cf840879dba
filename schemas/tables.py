"""The bronze Delta tables written by `jobs.ingest`: one `TableSpec` per table, the single source of
truth for column names, partitioning and natural key.

Column names are Kafka's (and `kafka_log_decoder.rows`'s). Every row says where it came from:
`dump_id`, `replica`, `topic`, `partition`, `file` and a byte position in that file (`position`, or
`batch_position` for a record). `replica` is the `node.id`/`broker.id` of the log directory, null
when the input does not name it (a bare partition directory, dump-log text).

Layout: every table is partitioned by `(dump_id, replica)` first, the unit an ingest run replaces
(see `jobs/ingest.py`); the two large tables add `topic`. Small tables stay one directory per dump
and replica, so thousands of tiny checkpoint rows never become thousands of tiny files.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

REPLACE_KEY = ("dump_id", "replica")


@dataclass(frozen=True)
class TableSpec:
    """A Delta table: its name (also its directory under `--output`), schema, partitioning and natural key.

    The natural key identifies a row within the table: no two rows share it. `stats_columns`: for the
    tables of a row per batch or record, the columns Delta keeps min/max statistics of (set when a
    run creates the table), the keys of the range and producer filters their readers use; the
    others keep Delta's default (the first 32 columns).
    """

    name: str
    schema: StructType
    partition_by: tuple[str, ...]
    natural_key: tuple[str, ...]
    doc: str
    stats_columns: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.schema.fields]


def _f(name: str, data_type: DataType, nullable: bool = True) -> StructField:
    return StructField(name, data_type, nullable)


def _provenance(position: str | None = "position") -> list[StructField]:
    fields = [
        _f("dump_id", StringType(), False),
        _f("replica", StringType()),
        _f("topic", StringType()),
        _f("partition", IntegerType()),
        _f("file", StringType(), False),
    ]
    if position is not None:
        fields.append(_f(position, LongType(), False))
    return fields


FILES = TableSpec(
    name="files",
    schema=StructType(
        [
            *_provenance(position=None),
            # log, index, timeindex, txnindex, snapshot, leader-epoch-checkpoint, offset-checkpoint,
            # partition.metadata, meta.properties, quorum-state, kraft-snapshot, clean-shutdown,
            # bootstrap-checkpoint, dump-log-text, or other (an excluded file).
            _f("kind", StringType(), False),
            _f("log_dir", StringType()),
            _f("base_offset", LongType()),
            _f("size_bytes", LongType(), False),
            _f("mtime_ms", LongType(), False),
            # size + mtime + a hash of the first and last 64 KiB: tells a changed file without reading it.
            _f("fingerprint", StringType()),
            _f("is_live", BooleanType(), False),
            _f("excluded_reason", StringType()),
            # The dump's capture time given with --captured-at (epoch ms); null: its newest mtime dates it.
            _f("captured_at_ms", LongType()),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file"),
    doc="Inventory: every file found under the inputs, live or not (with why not).",
)

BATCHES = TableSpec(
    name="batches",
    schema=StructType(
        [
            *_provenance(),
            _f("base_offset", LongType(), False),
            _f("last_offset", LongType(), False),
            _f("count", IntegerType(), False),
            _f("magic", ByteType(), False),
            _f("crc", LongType(), False),
            _f("crc_valid", BooleanType(), False),
            _f("attributes", ShortType(), False),
            _f("compression", StringType(), False),
            _f("timestamp_type", StringType(), False),
            _f("is_transactional", BooleanType(), False),
            _f("is_control", BooleanType(), False),
            _f("partition_leader_epoch", IntegerType(), False),
            # Null only where the source does not carry it (dump-log text).
            _f("base_timestamp", LongType()),
            _f("max_timestamp", LongType(), False),
            _f("producer_id", LongType(), False),
            _f("producer_epoch", ShortType(), False),
            _f("base_sequence", IntegerType(), False),
            _f("last_sequence", IntegerType(), False),
            _f("size_bytes", IntegerType(), False),
            _f("delete_horizon_ms", LongType()),
            _f("control_type", StringType()),
            _f("coordinator_epoch", IntegerType()),
            # Where the decoder's walk stands on this batch's offsets (WALK_* bits below): 0 inside its
            # walk, after the previous valid batch; null where no walk marked it (another writer).
            _f("walk_mark", ByteType()),
        ]
    ),
    partition_by=(*REPLACE_KEY, "topic"),
    natural_key=("dump_id", "replica", "file", "position"),
    doc="One row per v2 record batch or legacy (magic 0/1) entry of every live segment.",
    stats_columns=("partition", "position", "base_offset", "last_offset", "producer_id"),
)

# `batches.walk_mark`: what the decoder saw of a batch's offsets as it walked its work unit (a whole
# segment, or a byte range of one) in file order, among the batches with a valid CRC. OFFSET_OVERLAP
# (a batch starting at or before the previous batch's last offset) then needs no sort of every batch:
# the audit orders only the marked ones (and the unmarked, null, ones), among which each batch it
# checks finds its true predecessor. A batch with none of these bits is 0.
WALK_FIRST = 1  # the unit's first valid batch: the walk did not see its predecessor
WALK_LAST = 2  # the unit's last valid batch: the next unit's first batch follows it
WALK_OVERLAP = 4  # starts at or before the last offset of the walk's previous valid batch
WALK_BEFORE_OVERLAP = 8  # the previous valid batch of a WALK_OVERLAP batch

RECORDS = TableSpec(
    name="records",
    schema=StructType(
        [
            *_provenance(position="batch_position"),
            _f("offset", LongType(), False),
            _f("timestamp", LongType(), False),
            _f("sequence", IntegerType(), False),
            _f("key_size", IntegerType(), False),
            _f("value_size", IntegerType(), False),
            # Null for a null key/value, and for dump-log text printed without the data.
            _f("key", BinaryType()),
            _f("value", BinaryType()),
            _f("header_keys", ArrayType(StringType(), False), False),
            _f("header_values", ArrayType(BinaryType(), True)),
        ]
    ),
    partition_by=(*REPLACE_KEY, "topic"),
    natural_key=("dump_id", "replica", "file", "batch_position", "offset"),
    stats_columns=("partition", "batch_position", "offset"),
    doc="Record-level mode (--records): one row per record, all codecs decoded.",
)

PRODUCER_SNAPSHOTS = TableSpec(
    name="producer_snapshots",
    schema=StructType(
        [
            *_provenance(),
            _f("snapshot_offset", LongType(), False),
            _f("producer_id", LongType(), False),
            _f("producer_epoch", ShortType(), False),
            _f("last_sequence", IntegerType(), False),
            _f("last_offset", LongType(), False),
            _f("offset_delta", IntegerType(), False),
            _f("timestamp", LongType(), False),
            _f("coordinator_epoch", IntegerType(), False),
            _f("current_txn_first_offset", LongType(), False),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file", "position"),
    doc="One row per producer entry of every `<offset>.snapshot` (ProducerSnapshot version 1).",
)

PARTITION_STATE = TableSpec(
    name="partition_state",
    schema=StructType(
        [
            *_provenance(),
            # log_start_offset | recovery_point | high_watermark | cleaner_offset | leader_epoch | topic_id
            _f("state", StringType(), False),
            # The checkpointed offset; for leader_epoch the epoch's start offset.
            _f("offset", LongType()),
            _f("leader_epoch", IntegerType()),
            _f("topic_id", StringType()),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file", "position"),
    doc=(
        "Per-partition state from the checkpoint files, one row per entry: log start offset, "
        "high watermark (replication-offset-checkpoint), recovery point, cleaner offset, "
        "leader epochs and the topic id; `position` is the byte position of the entry's line."
    ),
)

TXN_INDEX = TableSpec(
    name="txn_index",
    schema=StructType(
        [
            *_provenance(),
            _f("version", ShortType(), False),
            _f("producer_id", LongType(), False),
            _f("first_offset", LongType(), False),
            _f("last_offset", LongType(), False),
            _f("last_stable_offset", LongType(), False),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file", "position"),
    doc="Aborted transactions of every `.txnindex` (AbortedTxn entries).",
)

REMOTE_LOG_METADATA = TableSpec(
    name="remote_log_metadata",
    schema=StructType(
        [
            # Where the event was read: a record of a `__remote_log_metadata-<n>` segment.
            *_provenance(position="batch_position"),
            _f("offset", LongType(), False),
            # segment | segment_update | partition_delete (kafka_log_decoder.remote_log_metadata); null
            # where the value is not an event (`error`).
            _f("event", StringType()),
            # The partition the event is about, its topic id, and the remote segment's id.
            _f("segment_topic", StringType()),
            _f("segment_partition", IntegerType()),
            _f("topic_id", StringType()),
            _f("segment_id", StringType()),
            # The segment's offsets (a `segment` event only).
            _f("start_offset", LongType()),
            _f("end_offset", LongType()),
            # RemoteLogSegmentState or RemotePartitionDeleteState, e.g. COPY_SEGMENT_FINISHED.
            _f("state", StringType()),
            _f("broker_id", IntegerType()),
            _f("event_timestamp_ms", LongType()),
            _f("segment_size_bytes", IntegerType()),
            # Why the value is not an event, naming its byte.
            _f("error", StringType()),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file", "batch_position", "offset"),
    doc=(
        "Tiered storage (KIP-405): one row per record of `__remote_log_metadata`, the remote log "
        "metadata manager's events: a remote segment's offsets and each state it went through."
    ),
)

QUARANTINE = TableSpec(
    name="quarantine",
    schema=StructType(
        [
            *_provenance(),
            # Bytes from `position` that are corrupt; null where the decoder cannot tell. (A bad row of a
            # Parquet `--acks` ledger: `position` is its number, `length` null.)
            _f("length", LongType()),
            # A corruption kind of audit-contract §4, or UNREADABLE_FILE.
            _f("kind", StringType(), False),
            _f("message", StringType(), False),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "replica", "file", "position", "kind"),
    doc="Corrupt regions: the file, the byte range and why; the bytes themselves stay in the file.",
)

ACKS = TableSpec(
    name="acks",
    schema=StructType(
        [
            # dump_id is the ledger's label (`--acks LABEL=PATH`, else the file name); replica is null.
            *_provenance(),
            _f("offset", LongType(), False),
            _f("producer_id", LongType()),
            _f("producer_epoch", ShortType()),
            _f("sequence", IntegerType()),
            _f("key", StringType()),
            _f("timestamp", LongType()),
            _f("app_producer", StringType()),
            _f("app_sequence", LongType()),
        ]
    ),
    partition_by=REPLACE_KEY,
    natural_key=("dump_id", "file", "position"),
    doc=(
        "The --acks ledger: records producers were told were written. `position` is the row's "
        "number in the ledger (0-based, data rows only), whatever its format."
    ),
)

# ---------------------------------------------------------------------------------------------
# Silver and gold: written by `jobs.audit`, rebuilt whole on every audit of an output directory.

LOG_KEY = ("dump_id", "replica", "topic", "partition")

SEQUENCE_HISTORY = TableSpec(
    name="sequence_history",
    schema=StructType(
        [
            _f("dump_id", StringType(), False),
            _f("replica", StringType()),
            _f("topic", StringType()),
            _f("partition", IntegerType()),
            _f("producer_id", LongType(), False),
            _f("producer_epoch", ShortType(), False),
            _f("base_offset", LongType(), False),
            _f("last_offset", LongType(), False),
            _f("base_sequence", IntegerType(), False),
            _f("last_sequence", IntegerType(), False),
            _f("is_control", BooleanType(), False),
            _f("is_transactional", BooleanType(), False),
            _f("control_type", StringType()),
            _f("coordinator_epoch", IntegerType()),
            _f("max_timestamp", LongType(), False),
            _f("partition_leader_epoch", IntegerType(), False),
            _f("file", StringType(), False),
            _f("position", LongType(), False),
            # The producer's previous batch or marker in offset order (null for its first).
            _f("prev_offset", LongType()),
            _f("prev_producer_epoch", ShortType()),
            # Sequences unwrapped across the 2^31 wrap within the epoch stream (null outside it:
            # markers, invalid ranges, lower-epoch batches).
            _f("base_sequence_unwrapped", LongType()),
            _f("last_sequence_unwrapped", LongType()),
            # The broker's next expected sequence for this batch (null where nothing is expected).
            _f("expected_sequence", IntegerType()),
            # FIRST | IN_SEQUENCE | EPOCH_START | GAP | REGRESSION | DUPLICATE | EPOCH_REGRESSION
            # | INVALID | MARKER
            _f("transition", StringType(), False),
        ]
    ),
    partition_by=("dump_id", "replica", "topic"),
    natural_key=("dump_id", "replica", "topic", "partition", "base_offset"),
    doc="Silver: every batch and marker of every producer id, with the broker's view of its sequence.",
    stats_columns=("partition", "producer_id", "base_offset", "transition"),
)

FINDINGS = TableSpec(
    name="findings",
    schema=StructType(
        [
            _f("finding_id", StringType(), False),
            _f("kind", StringType(), False),
            _f("severity", StringType(), False),
            _f("category", StringType(), False),
            _f("topic", StringType()),
            _f("partition", IntegerType()),
            _f("dump_id", StringType()),
            _f("replica", StringType()),
            _f("producer_id", LongType()),
            _f("producer_epoch", IntegerType()),
            _f("first_offset", LongType()),
            _f("last_offset", LongType()),
            _f("base_sequence", IntegerType()),
            _f("last_sequence", IntegerType()),
            _f("expected_sequence", IntegerType()),
            _f("related_offset", LongType()),
            _f("missing_records", LongType()),
            _f("explained_by", StringType()),
            _f("rule", StringType(), False),
            _f("message", StringType(), False),
        ]
    ),
    partition_by=(),
    natural_key=("finding_id",),
    doc="Gold: one row per finding of audit-contract §3.",
)

PARTITION_SUMMARY = TableSpec(
    name="partition_summary",
    schema=StructType(
        [
            _f("dump_id", StringType(), False),
            _f("replica", StringType()),
            _f("topic", StringType()),
            _f("partition", IntegerType()),
            # The topic id of the log's partition.metadata (KIP-516; null for older brokers and text).
            _f("topic_id", StringType()),
            _f("capture_time_ms", LongType()),
            _f("log_start_offset", LongType()),
            # checkpoint | first_segment | first_batch
            _f("log_start_source", StringType()),
            # Tiered storage (KIP-405): the broker's log start offset, below the local log's, where the dump
            # shows a remote tier; the offsets from it up to log_start_offset are in remote storage.
            _f("remote_log_start", LongType()),
            _f("log_end_offset", LongType()),
            _f("high_watermark", LongType()),
            _f("batches", LongType(), False),
            _f("records", LongType(), False),
            _f("bytes", LongType(), False),
            _f("producers", LongType(), False),
            _f("quarantined_regions", LongType(), False),
            _f("critical", LongType(), False),
            _f("error", LongType(), False),
            _f("warning", LongType(), False),
            _f("info", LongType(), False),
            # The worst severity found, or `clean`.
            _f("verdict", StringType(), False),
        ]
    ),
    partition_by=(),
    natural_key=LOG_KEY,
    doc="Gold: one row per partition of each dump and replica, with its log bounds and verdict.",
)

RUNS = TableSpec(
    name="runs",
    schema=StructType(
        [
            _f("run_id", StringType(), False),
            _f("started_at_ms", LongType(), False),
            _f("finished_at_ms", LongType(), False),
            _f("command", StringType(), False),
            _f("profile", StringType(), False),
            _f("valid", BooleanType(), False),
            _f("fail_on", StringType(), False),
            _f("exit_status", IntegerType(), False),
            _f("findings", LongType(), False),
            _f("counts", MapType(StringType(), LongType(), False), False),
        ]
    ),
    partition_by=(),
    natural_key=("run_id",),
    doc="One row per distinct audit run (run id: the audited files' fingerprints and the profile); a "
    "re-run of the same audit replaces its row, another audit adds one: the run log.",
)

AUDIT_TABLES: dict[str, TableSpec] = {
    spec.name: spec for spec in (SEQUENCE_HISTORY, FINDINGS, PARTITION_SUMMARY, RUNS)
}

# The output's report folders (contract §2): the reports, the ones an audit is writing (renamed the
# reports once all are written) and the previous audit's (kept until this audit's are written).
REPORT = "report"
REPORT_PARTIAL = REPORT + ".partial"
REPORT_PREVIOUS = REPORT + ".previous"
REPORT_FOLDERS = (REPORT, REPORT_PARTIAL, REPORT_PREVIOUS)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        FILES,
        BATCHES,
        RECORDS,
        PRODUCER_SNAPSHOTS,
        PARTITION_STATE,
        TXN_INDEX,
        REMOTE_LOG_METADATA,
        QUARANTINE,
        ACKS,
    )
}
