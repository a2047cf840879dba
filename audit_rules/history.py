"""The silver stage: every producer batch and marker with the broker's view of its sequence.

Replays `ProducerAppendInfo` (kafka-formats-and-rules §5.3-§5.4, RULES.md) per `(log, producer_id)`
in offset order: one shuffle, one sort and a streaming scan (`audit_rules.replay`). No per-producer
state is collected anywhere: a producer with ten million batches costs one sort, which Spark spills
to disk as needed, and one row of state in its task. A producer holding most of the batches has its
offset ranges scanned in tasks of their own where its state at each range's start follows from
aggregates (`split_plan`).
"""

from __future__ import annotations

import warnings
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StructField,
    StructType,
)

from audit_rules import replay
from audit_rules.logs import log_id, with_log_id
from audit_rules.profile import Profile
from schemas.tables import LOG_KEY, SEQUENCE_HISTORY

SEQUENCE_MODULUS = replay.SEQUENCE_MODULUS  # sequences are non-negative int32, wrap after 2147483647 (§1.4)


def is_producer_batch() -> Column:
    """True for a batch that takes part in producer state (§5.1): magic 2, a producer id, a trustworthy
    header."""
    return (F.col("magic") == 2) & (F.col("producer_id") >= 0) & F.col("crc_valid")


def producer_batches(batches: DataFrame) -> DataFrame:
    """Batches that take part in producer state (`is_producer_batch`)."""
    return batches.where(is_producer_batch())


# The batch columns the history carries through its shuffle and sort (besides the log and file ids):
# what the silver table and the rules read. The log's own columns (dump, replica, topic, partition, its
# key and bounds) and the file's path are joined back from the small `logs` and `file_ids` frames by
# those ids.
HISTORY_BATCH_COLUMNS = (
    "producer_id",
    "producer_epoch",
    "base_offset",
    "last_offset",
    "base_sequence",
    "last_sequence",
    "is_control",
    "is_transactional",
    "control_type",
    "coordinator_epoch",
    "max_timestamp",
    "partition_leader_epoch",
    "position",
)


# The replay's order of a log's batches: per producer, by offset, ties by position and file.
_REPLAY_ORDER = ("log_id", "producer_id", "base_offset", "position", "file_id")
REPLAY_TIES = ("position", "file_id")


def replayed(
    batches: DataFrame,
    copy_lookback: int = replay.COPY_LOOKBACK,
    markers_refresh: bool = True,
    split: Split | None = None,
) -> DataFrame:
    """Producer batches with the columns of their replay, keyed by the ids of their log and file
    (`logs.with_log_id`, hashes of each row's own columns: the history waits for no other frame): what
    the audit stores of the history. `derived` adds the history's other
    internal columns (`history_table` selects the silver schema); `with_log_columns` the log's columns
    and the file's path. Those are cheap functions of each row, computed again by every reader
    instead of stored (on 1 GB of one-record batches, storing them cost a fifth of the history's time).

    One shuffle by (log, producer id) and one sort by base offset, over narrow rows keyed by the
    numeric log id: a string log key would leave the sort's prefix comparison useless (every row of
    a dump starts with the same bytes) and be shuffled, sorted and sent to Python with every row.
    The running values of the replay (highest epoch so far, previous valid batch, the epoch stream's
    counters and 2^31 laps) come from one streaming pass per task (`audit_rules.replay`), and the
    rest are columns of each row. The batches of an epoch stream are consecutive among the
    producer's in-stream batches (a batch that is neither invalid nor an epoch regression never has a
    lower epoch than an earlier one), so stream values are running values minus their value where
    the epoch began.
    """
    b = with_log_id(producer_batches(batches), *HISTORY_BATCH_COLUMNS)
    # Batches of one producer at one offset (an OFFSET_OVERLAP) in a fixed order, whatever the shuffle
    # brought first: the same input gives the same transitions and finding ids (contract §3). (The
    # further keys are compared only where the offsets tie.)
    inputs = [F.col(c) for c in replay.INPUTS]
    if split is None:
        b = b.repartition("log_id", "producer_id").sortWithinPartitions(*_REPLAY_ORDER)
    else:
        # A hot producer's offset ranges in tasks of their own (`split_plan`); the same order within.
        b = (
            b.withColumn("_range", split.column())
            .withColumn("_part", split.part_column())
            .repartition(len(split.slots), "_part")
            .sortWithinPartitions("log_id", "producer_id", "_range", *_REPLAY_ORDER[2:])
        )
        inputs.append(F.col("_range"))
    # The scan reads its input columns in the sort's order and returns its own: a scalar Arrow UDF sends
    # only those through Python (nondeterministic: it carries state from row to row, so Spark must
    # evaluate it once per row, where it stands).
    outputs = StructType([StructField(name, _parse_type(kind)) for name, kind in replay.OUTPUTS])
    body = replay.replay_columns(copy_lookback, markers_refresh, split.starts if split else None)
    if hasattr(F, "arrow_udf"):
        # (pyspark's stubs have no overload for a struct-returning UDF typed by its hints)
        scan = F.arrow_udf(body, outputs).asNondeterministic()  # type: ignore[call-overload]
    else:
        scan = _pandas_scan(body, outputs, [b.select(c).schema[0].dataType for c in inputs])
    b = b.withColumn("_scan", scan(*inputs))
    scanned = [F.col("_scan")[name].alias(name) for name, _ in replay.OUTPUTS]
    return b.select(*[c for c in b.columns if c not in ("_scan", "_range", "_part")], *scanned)


@dataclass(frozen=True)
class Split:
    """Hot producers' rows cut into offset ranges for the history's scan (`split_plan`): `cuts` the
    first offset of each range after the first, per (log id, producer id); `starts` what the rows
    before each such range leave (`replay.split_start`'s `prior`), per (log id, producer id, range)."""

    cuts: dict[tuple[int, int], list[int]]
    starts: dict[tuple[int, int, int], dict[str, Any] | None]
    # slots[p]: a value whose hash puts a row in shuffle partition p (Spark's `HashPartitioning`).
    slots: list[int]

    @staticmethod
    def _of(log: int, producer: int) -> Column:
        return (F.col("log_id") == log) & (F.col("producer_id") == producer)

    def _cut(self) -> Column:
        """True for the rows of a cut producer."""
        expr: Column = F.lit(False)
        for log, producer in self.cuts:
            expr = expr | self._of(log, producer)
        return expr

    def column(self) -> Column:
        """Each row's range: 0 but for the rows of a cut producer at or above its cuts."""
        expr: Column = F.lit(0)
        for (log, producer), cuts in self.cuts.items():
            at = sum(((F.col("base_offset") >= c).cast("int") for c in cuts), F.lit(0))
            expr = F.when(self._of(log, producer), at).otherwise(expr)
        return expr

    def part_column(self) -> Column:
        """The slot of each row's shuffle partition: range r of a cut producer in partition r mod n, the
        rows of every other producer where the hash of (log id, producer id) puts them."""
        n = len(self.slots)
        home = F.pmod(F.hash("log_id", "producer_id"), F.lit(n))
        at = F.when(self._cut(), F.pmod(F.col("_range"), F.lit(n))).otherwise(home)
        return F.element_at(F.array(*[F.lit(v) for v in self.slots]), at + 1)


@dataclass(frozen=True)
class Hot:
    """A producer holding more than a core's share of the history (`hot_producers`): its log's id and
    its lowest and highest retained offsets."""

    log_id: int
    producer_id: int
    first: int | None
    last: int | None


def hot_producers(facts: DataFrame, min_rows: int | None = None) -> list[Hot]:
    """The producers each holding more than a core's share of the producer batches of `facts`
    (`logs.file_producers`, stored: one small job), when those are at least `min_rows`
    (`SPREAD_MIN_ROWS`): a pass over every row of the history in its own layout (a task per hash of
    (log, producer id)) would run mostly in their tasks while the other cores wait. `split_plan` cuts
    what it can of them into offset ranges; the silver write's `spread` serves those left whole."""
    spark = facts.sparkSession
    floor = SPREAD_MIN_ROWS if min_rows is None else min_rows
    per = (
        facts.where(F.col("producer_id").isNotNull())
        .groupBy(*LOG_KEY, "producer_id")
        .agg(
            F.sum("batches").alias("n"),
            F.min("retained_first_offset").alias("lo"),
            F.max("retained_last_offset").alias("hi"),
        )
    )
    rows = (
        per.crossJoin(per.agg(F.sum("n").alias("_all")))
        .where((F.col("n") * cores(spark) > F.col("_all")) & (F.col("_all") >= floor))
        .select(log_id().alias("log_id"), "producer_id", "lo", "hi")
        .collect()
    )
    return [Hot(int(r["log_id"]), int(r["producer_id"]), r["lo"], r["hi"]) for r in rows]


def left_whole(hot: list[Hot], split: Split | None) -> bool:
    """Whether a hot producer's history is scanned in one task (`split` did not cut it)."""
    return any(split is None or (h.log_id, h.producer_id) not in split.cuts for h in hot)


# A producer's rows are cut into this many ranges per shuffle partition of the history.
RANGES_PER_PARTITION = 1


def split_plan(batches: DataFrame, hot: list[Hot]) -> Split | None:
    """The `hot_producers` whose history the scan can cut into offset ranges scanned in parallel, with
    what the rows before each range leave the scan (one aggregate over their batches, and a pass that
    picks the few batches the start states name): None when none of them can be cut.

    A producer can be cut where its running values are a count, a maximum and its first and last
    valid batches (`replay.split_start`): all its batches of one epoch, none a marker, and its valid
    batches' sequences neither wrapping inside a batch nor spanning half the sequence range (no 2^31
    lap anywhere). Such a producer is one epoch stream, and the rows before an offset leave the scan
    their number of valid batches, their highest last sequence and their first and last valid batch,
    aggregates of each range summed on the driver. Its ranges cut its offsets into equal spans."""
    spark = batches.sparkSession
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    ranges = max(2, RANGES_PER_PARTITION * partitions)
    cuts: dict[tuple[int, int], list[int]] = {}
    for h in hot:
        if h.first is None or h.last is None or h.last <= h.first:
            continue  # a single offset: nothing to cut
        span = h.last - h.first + 1
        cuts[(h.log_id, h.producer_id)] = sorted({h.first + span * k // ranges for k in range(1, ranges)})
    if not cuts:
        return None
    # One small job: for each shuffle partition, a value whose hash puts a row there.
    candidates = spark.range(0, 64 * partitions).select(F.col("id").cast("int").alias("v"))
    slot_rows = (
        candidates.groupBy(F.pmod(F.hash("v"), F.lit(partitions)).alias("p"))
        .agg(F.min("v").alias("v"))
        .collect()
    )
    found = {int(r["p"]): int(r["v"]) for r in slot_rows}
    slots = [found[p] for p in range(partitions)]
    plan = Split(cuts, {}, slots)
    rows = with_log_id(producer_batches(batches), *HISTORY_BATCH_COLUMNS)
    invalid = ~F.col("is_control") & (
        (F.col("base_sequence") < 0)
        | (
            F.pmod(F.col("last_sequence").cast("long") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS))
            != F.col("last_offset") - F.col("base_offset")
        )
    )
    valid = F.coalesce(~invalid, F.lit(False))
    hot_rows = rows.where(plan._cut())
    # Fixed-width aggregates only: Spark hashes them (a struct's min or max would make it sort every row).
    aggregates = (
        hot_rows.withColumn("_range", plan.column())
        .groupBy("log_id", "producer_id", "_range")
        .agg(
            F.count(F.when(F.col("is_control"), 1)).alias("markers"),
            F.min("producer_epoch").alias("low_epoch"),
            F.max("producer_epoch").alias("high_epoch"),
            F.count(F.when(F.col("producer_epoch").isNull(), 1)).alias("no_epoch"),
            F.count(F.when(valid, 1)).alias("valid"),
            F.count(F.when(valid & (F.col("last_sequence") < F.col("base_sequence")), 1)).alias("spans"),
            F.min(F.when(valid, F.col("base_sequence"))).alias("low_sequence"),
            F.max(F.when(valid, F.col("last_sequence"))).alias("max_last"),
            F.min(F.when(valid, F.col("base_offset"))).alias("first_valid"),
            F.max(F.when(valid, F.col("base_offset"))).alias("last_valid"),
        )
        .collect()
    )
    by_producer: dict[tuple[int, int], dict[int, Any]] = {}
    for row in aggregates:
        by_producer.setdefault((int(row["log_id"]), int(row["producer_id"])), {})[int(row["_range"])] = row
    # The producers the scan can cut, and the offsets of the valid batches their start states name: the
    # first valid batch's, and each range's last.
    named: dict[tuple[int, int], set[int]] = {}
    for key, per_range in by_producer.items():
        every = list(per_range.values())
        low = [r["low_sequence"] for r in every if r["low_sequence"] is not None]
        high = [r["max_last"] for r in every if r["max_last"] is not None]
        if (
            any(r["markers"] or r["no_epoch"] or r["spans"] for r in every)
            or min(r["low_epoch"] for r in every) != max(r["high_epoch"] for r in every)
            or (low and max(high) - min(low) >= replay.HALF_RANGE)
        ):
            continue  # not a producer the scan can cut
        with_valid = [r for r in every if r["valid"]]
        named[key] = {r["last_valid"] for r in with_valid}
        if with_valid:
            named[key].add(min(r["first_valid"] for r in with_valid))
    # Those batches (a few rows; more than one at an offset only where batches overlap), ordered as the
    # scan orders them.
    wanted: Column = F.lit(False)
    for (log, producer), offsets in named.items():
        if offsets:
            wanted = wanted | (Split._of(log, producer) & F.col("base_offset").isin(sorted(offsets)))
    ends: dict[tuple[int, int], list[Any]] = {}
    if any(named.values()):
        for row in hot_rows.where(wanted & valid).select(*_REPLAY_ORDER, *_START_FIELDS).collect():
            ends.setdefault((int(row["log_id"]), int(row["producer_id"])), []).append(row)
    starts: dict[tuple[int, int, int], dict[str, Any] | None] = {}
    for key in named:
        per_range = by_producer[key]
        batches_at = sorted(ends.get(key, []), key=lambda r: tuple(r[c] for c in _REPLAY_ORDER[2:]))
        prior: dict[str, Any] = {"valid": 0, "first": None, "last": None, "max_last": None}
        for r in range(len(cuts[key]) + 1):
            if r:
                starts[(*key, r)] = dict(prior)
            got = per_range.get(r)
            if got is None or not got["valid"]:
                continue
            at = [b for b in batches_at if bisect_right(cuts[key], b["base_offset"]) == r]
            prior["valid"] += got["valid"]
            if prior["first"] is None:
                prior["first"] = _start_batch(next(b for b in at if b["base_offset"] == got["first_valid"]))
            prior["last"] = _start_batch([b for b in at if b["base_offset"] == got["last_valid"]][-1])
            before = prior["max_last"]
            prior["max_last"] = got["max_last"] if before is None else max(before, got["max_last"])
    kept = {key: c for key, c in cuts.items() if (*key, 1) in starts}
    if not kept:
        return None
    return Split(kept, starts, slots)


# The columns of a valid batch a range's start state reads (`replay.split_start`).
_START_FIELDS = ("producer_epoch", "max_timestamp", "is_transactional", "base_sequence", "last_sequence")


def _start_batch(row: Any) -> dict[str, Any]:
    """A valid batch as `replay.split_start` reads it."""
    return {
        "offset": row["base_offset"],
        "epoch": row["producer_epoch"],
        "timestamp": row["max_timestamp"],
        "transactional": row["is_transactional"],
        "base": row["base_sequence"],
        "last": row["last_sequence"],
    }


def _pandas_scan(body: Any, outputs: StructType, input_types: list[Any]) -> Any:
    """The scan as a scalar pandas UDF (pyspark 4.0, Databricks Runtime 17.3: no `arrow_udf`)."""
    from pyspark.sql.functions import PandasUDFType
    from pyspark.sql.pandas.types import to_arrow_type

    arrow_types = [to_arrow_type(t) for t in input_types]
    with warnings.catch_warnings():
        # The function type named rather than read from type hints (the scan takes its columns as *args).
        warnings.simplefilter("ignore", UserWarning)
        udf = F.pandas_udf(replay.through_pandas(body, arrow_types), outputs, PandasUDFType.SCALAR)
    return udf.asNondeterministic()


def derived(b: DataFrame) -> DataFrame:
    """`replayed` rows with the columns that follow from each row alone: `ok` (neither invalid nor an
    epoch regression) and `in_stream` (an ok data batch), the unwrapped last and expected sequences, the
    transition, late and jump, the copy columns `settle` fills in, and the expected sequence.

    `transition` is DUPLICATE for the exact copies the scan found (`copy_of_offset`): only a late
    batch can repeat an earlier one. When the scan left a late batch UNDECIDED (`undecided`), `copies`
    and `settle` mark the copies instead; otherwise `numbered` numbers them among the events.
    """
    epoch = F.col("producer_epoch").cast("int")
    ok = ~F.col("invalid") & ~F.col("epoch_regressed")
    b = b.withColumns(
        {
            "ok": ok,
            "in_stream": ok & ~F.col("is_control"),
            "last_sequence_unwrapped": F.col("base_sequence_unwrapped")
            + F.pmod(F.col("last_sequence").cast("long") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS)),
            "expected_unwrapped": F.col("prev_last_unwrapped") + 1,
        }
    )
    first = F.col("first_in_stream")
    first_of_producer = F.col("min_epoch_before").isNull() | (F.col("min_epoch_before") == epoch)
    transition = (
        F.when(F.col("invalid"), "INVALID")
        .when(F.col("epoch_regressed"), "EPOCH_REGRESSION")
        .when(F.col("is_control"), "MARKER")
        .when(first & first_of_producer, "FIRST")
        .when(first, "EPOCH_START")
        # An exact copy the scan found (`replay.COPY_LOOKBACK`); `copies` and `settle` find the rest.
        .when(F.col("copy_of_offset").isNotNull(), "DUPLICATE")
        .when(F.col("base_sequence_unwrapped") == F.col("expected_unwrapped"), "IN_SEQUENCE")
        .when(F.col("base_sequence_unwrapped") < F.col("expected_unwrapped"), "REGRESSION")
        .otherwise("GAP")
    )
    later = F.col("in_stream") & ~first
    b = b.withColumns(
        {
            "transition": transition,
            # A batch at or below the highest sequence its stream reached before: the only kind that
            # can repeat an earlier batch (an exact copy has the same last sequence) or fill a hole.
            "late": later & (F.col("base_sequence_unwrapped") <= F.col("max_last_before")),
            # A batch past the highest sequence before plus one: the sequences in between are a hole
            # until a late batch covers them.
            "jump": later & (F.col("base_sequence_unwrapped") > F.col("max_last_before") + 1),
            # Settled by `copies` for the late batches' ranges; 1 and null for every other batch.
            "copy_index": F.lit(1),
            "first_copy_offset": F.lit(None).cast("long"),
            "first_copy_stream_index": F.lit(None).cast("int"),
        }
    )
    return b.withColumn("expected_sequence", _expected_sequence()).drop("first_in_stream")


def with_log_columns(history: DataFrame, logs: DataFrame, files: DataFrame) -> DataFrame:
    """History rows (`derived`) with their log's key columns, `log_key`, `log_start_offset`, `compacted`,
    `cleaned_to`, `compaction_source`, `coordinator_written`, `remote_log_start`, `log_max_timestamp` and
    `log_max_data_timestamp` (its newest batch's and newest data batch's), and their `file`
    (broadcast joins on the log and file ids of `logs` and `files`: the history is stored without them)."""
    per_log = logs.select(
        "log_id",
        *LOG_KEY,
        "log_key",
        "log_start_offset",
        "first_kept_offset",
        "compacted",
        "cleaned_to",
        "compaction_source",
        "coordinator_written",
        "remote_log_start",
        F.col("max_timestamp").alias("log_max_timestamp"),
        F.col("max_data_timestamp").alias("log_max_data_timestamp"),
    )
    paths = files.select("file_id", "file")
    return history.join(F.broadcast(per_log), "log_id", "inner").join(F.broadcast(paths), "file_id", "inner")


def events(history: DataFrame) -> DataFrame:
    """The history rows the rules over single batches and markers read: every transition but the
    ordinary ones, the first batches that start mid-sequence, and transactional data and markers. On a
    healthy log a sliver of the history, which those rules then filter instead of every row."""
    return history.where(
        F.col("transition").isin("INVALID", "EPOCH_REGRESSION", "EPOCH_START")
        | ((F.col("transition") == "FIRST") & (F.col("base_sequence") > 0))
        | F.col("transition").isin("GAP", "REGRESSION")
        | F.col("late")
        | F.col("jump")
        | F.col("is_control")
        | F.col("is_transactional")
    )


def _parse_type(kind: str) -> DataType:
    return {"boolean": BooleanType(), "int": IntegerType(), "bigint": LongType(), "smallint": ShortType()}[
        kind
    ]


def _spans(base: Column, last: Column) -> Column:
    """1 for a batch whose sequences wrap inside it (last below base), else 0."""
    return F.when(last < base, 1).otherwise(0)


def _expected_sequence() -> Column:
    return (
        F.when(F.col("transition") == "EPOCH_START", F.lit(0))
        .when(
            F.col("expected_unwrapped").isNotNull(),
            F.pmod(F.col("expected_unwrapped"), F.lit(SEQUENCE_MODULUS)),
        )
        .cast("int")
    )


STREAM_KEY = ("log_id", "producer_id", "producer_epoch")


# A batch of the history is one (log, file, byte position).
ROW_KEY = ("log_id", "file_id", "position")
# The batches that can be copies of each other: one stream, one unwrapped sequence range.
COPY_KEY = (*STREAM_KEY, "base_sequence_unwrapped", "last_sequence_unwrapped")


def late_ranges(events: DataFrame) -> DataFrame:
    """The distinct (stream, unwrapped range) of the late batches (`events` holds them all): the only
    ranges two batches of a stream can share, since the later copy of a range is always late."""
    return events.where(F.col("late")).select(*COPY_KEY).distinct()


def copies(history: DataFrame, ranges: DataFrame) -> DataFrame:
    """The in-stream batches whose range is in `ranges` (`late_ranges`, joined as given: broadcast it
    when small), numbered in offset order per range: `copy_index` > 1 is an exact copy of the batch at
    `first_copy_offset` (KIP-98 duplicate), whose transition becomes DUPLICATE; `copy_of_offset` and
    `copy_of_index` name the nearest earlier batch of the range, as the scan names it (`replay._copies`)
    for the copies it found."""
    rows = history.where(F.col("in_stream")).join(ranges, list(COPY_KEY), "left_semi")
    same_range = Window.partitionBy(*COPY_KEY).orderBy("base_offset", *REPLAY_TIES)
    rows = rows.withColumns(
        {
            "copy_index": F.row_number().over(same_range),
            "first_copy_offset": F.first("base_offset").over(same_range),
            "first_copy_stream_index": F.first("stream_index").over(same_range),
            "nearest_offset": F.lag("base_offset").over(same_range),
            "nearest_index": F.lag("stream_index").over(same_range),
        }
    )
    return rows.where(F.col("copy_index") > 1).select(
        *ROW_KEY,
        F.when(F.col("transition").isin("IN_SEQUENCE", "REGRESSION", "GAP"), F.lit("DUPLICATE"))
        .otherwise(F.col("transition"))
        .alias("_transition"),
        F.col("copy_index").alias("_copy_index"),
        F.col("first_copy_offset").alias("_first_copy_offset"),
        F.col("first_copy_stream_index").alias("_first_copy_stream_index"),
        F.col("nearest_offset").alias("_copy_of_offset"),
        F.col("nearest_index").alias("_copy_of_index"),
    )


def undecided() -> Column:
    """A late batch the scan could not tell from a copy (`replay.UNDECIDED`)."""
    return F.col("copy_of_index") == replay.UNDECIDED


def numbered(events: DataFrame) -> DataFrame:
    """The events (`events`, which hold every late batch) with the exact copies the scan found numbered
    as `copies` numbers them, when the scan decided every late batch: the copies of a range are its
    late batches with `copy_of_offset`, each pointing at the nearest earlier batch of the range (what
    `copies` gives them too, and the duplicate window is measured from), so the earliest of them all
    (the range's first batch, `copy_index` 1) is the least such offset and stream index."""
    is_copy = F.col("copy_of_offset").isNotNull()
    ranged = Window.partitionBy(*[F.col(c) for c in COPY_KEY], is_copy)
    index = F.row_number().over(ranged.orderBy("base_offset", *REPLAY_TIES)) + 1
    return events.withColumns(
        {
            "copy_index": F.when(is_copy, index).otherwise(1),
            "first_copy_offset": F.when(is_copy, F.min("copy_of_offset").over(ranged)),
            "first_copy_stream_index": F.when(is_copy, F.min("copy_of_index").over(ranged)),
        }
    )


def settle(history: DataFrame, copied: DataFrame | None) -> DataFrame:
    """The rows of `history` (or of a part of it) with the exact copies of `copied` (`copies`; broadcast
    when small; None: there are none) marked DUPLICATE and numbered, each with the nearest earlier batch
    of its range in `copy_of_offset` and `copy_of_index` (also where the scan left it UNDECIDED)."""
    if copied is None:
        return history
    joined = history.join(copied, list(ROW_KEY), "left")
    return joined.withColumns(
        {
            "transition": F.coalesce("_transition", "transition"),
            "copy_index": F.coalesce("_copy_index", "copy_index"),
            "first_copy_offset": F.coalesce("_first_copy_offset", "first_copy_offset"),
            "first_copy_stream_index": F.coalesce("_first_copy_stream_index", "first_copy_stream_index"),
            "copy_of_offset": F.coalesce("_copy_of_offset", "copy_of_offset"),
            "copy_of_index": F.coalesce("_copy_of_index", "copy_of_index"),
        }
    ).drop(
        "_transition",
        "_copy_index",
        "_first_copy_offset",
        "_first_copy_stream_index",
        "_copy_of_offset",
        "_copy_of_index",
    )


def producer_summary(facts: DataFrame, logs: DataFrame) -> DataFrame:
    """One row per (log, producer id) of the history: the first and last offsets of its retained batches
    and markers, their highest timestamp and that of its data batches (of batches whose CRC holds), the
    offset of its last marker and of its last transactional data batch, `fenced_by_marker` (below) and
    `last_epoch`, its highest epoch.

    Aggregated from the per-file facts of the bronze batches the history is built of
    (`logs.file_producers`; `logs`: `logs.log_bounds`): no pass over the batches of its own.
    """
    per_producer = (
        facts.where(F.col("producer_id").isNotNull())
        .groupBy(*LOG_KEY, "producer_id")
        .agg(
            F.min("retained_first_offset").alias("retained_first_offset"),
            F.max("retained_last_offset").alias("retained_last_offset"),
            F.max("producer_timestamp").alias("producer_timestamp"),
            F.max("producer_data_timestamp").alias("producer_data_timestamp"),
            F.max("last_marker").alias("last_marker"),
            F.max("last_transactional_data").alias("last_transactional_data"),
            F.max("last_data").alias("_last_data"),
            F.max("data_epoch").alias("_data_epoch"),
            F.max("marker_epoch").alias("_marker_epoch"),
        )
    )
    keys = logs.select(*(F.col(c).alias(f"_l_{c}") for c in LOG_KEY), "log_key")
    on = [F.col(c).eqNullSafe(F.col(f"_l_{c}")) for c in LOG_KEY]
    return per_producer.join(F.broadcast(keys), on, "inner").select(
        "log_key",
        "producer_id",
        "retained_first_offset",
        "retained_last_offset",
        "producer_timestamp",
        "producer_data_timestamp",
        "last_marker",
        "last_transactional_data",
        # Its last marker follows its last data batch and raised the epoch past every data batch's (a
        # coordinator's abort of a timed-out transaction fences the producer so, §5.7): before 2.4.1
        # that emptied the broker's cache of its batches, and with it `lastTimestamp` (-1): expired at
        # the next check. Unknown (no data batch, or no epoch to trust) is not fenced.
        F.coalesce(
            (F.col("last_marker") > F.col("_last_data")) & (F.col("_marker_epoch") > F.col("_data_epoch")),
            F.lit(False),
        ).alias("fenced_by_marker"),
        # Its highest epoch, of data batches and markers whose CRC holds: the evidence's epoch.
        F.greatest("_data_epoch", "_marker_epoch").cast("short").alias("last_epoch"),
    )


def state_expired(expiration_ms: int) -> Column:
    """True where the broker had forgotten the producer before this batch (`isProducerExpired`, §5.7):
    no open transaction and at least `producer.id.expiration.ms` since its previous batch or marker
    (its previous data batch where the profile's markers do not refresh the time: `replayed`)."""
    idle = F.col("max_timestamp") - F.col("prev_event_timestamp")
    return ~F.coalesce(F.col("prev_event_open_txn"), F.lit(False)) & F.coalesce(
        idle >= F.lit(expiration_ms), F.lit(False)
    )


def forgotten_by_expiry(profile: Profile) -> Column:
    """True where the broker had forgotten the producer by expiry (`state_expired`) and takes this
    batch's sequence from a producer it does not know: any sequence since 2.5, else only 0. Never null."""
    accepted_unknown = F.lit(profile.accepts_unknown_producer) | (F.col("base_sequence") == 0)
    return state_expired(profile.producer_id_expiration_ms) & F.coalesce(accepted_unknown, F.lit(False))


def evicted_by_log_start(profile: Profile) -> Column:
    """True where a broker before 2.4 (`Profile.evicts_at_log_start`) had evicted the producer before
    this sequence-0 batch: the log start offset (now) lies past the producer's previous batch (0.11: its
    previous batch or marker), and `truncateHead` forgot every producer whose last data offset (0.11:
    last offset) fell below a new log start, whether retention or DeleteRecords moved it (§5.5, §5.7);
    it then takes sequence 0 as a new producer's. The previous row's base offset stands for its last
    one (the history keeps no other): a batch that straddles the log start kept its producer, yet
    counts as evicted. Never null."""
    if not profile.evicts_at_log_start:
        return F.lit(False)
    # 0.11's last offset moved with markers too (`ProducerIdEntry.lastOffset`): its previous valid row.
    kept_last = F.col("prev_offset") if profile.markers_move_last_offset else F.col("prev_base_offset")
    return F.coalesce((F.col("base_sequence") == 0) & (kept_last < F.col("log_start_offset")), F.lit(False))


def who_restarts(profile: Profile) -> str:
    """Who writes sequence 0 again under one producer id and epoch once the broker forgot the producer,
    for a message: a 1.0-2.4 broker answers UNKNOWN_PRODUCER_ID, and a transactional client before 2.5
    rewrites its sequences from 0 (§7.1); 0.11 answers OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to its client."""
    if not profile.has_unknown_producer_id:
        return "a client restarting its sequence at 0"
    return "a transactional client before 2.5 restarts at 0 after UNKNOWN_PRODUCER_ID"


def forgotten_before(profile: Profile) -> Column:
    """True on a stream batch (not its first) the broker took from a producer it had forgotten: its state
    had expired and the broker takes the batch's sequence from an unknown producer (any sequence since
    2.5, else only 0), or it had evicted the producer (`evicted_by_log_start`). Its cache of the
    producer's last batches starts again there. Never null."""
    forgot = forgotten_by_expiry(profile) | evicted_by_log_start(profile)
    # `prev_base_offset`: the stream's previous batch (null on its first).
    return F.coalesce(F.col("in_stream") & F.col("prev_base_offset").isNotNull() & forgot, F.lit(False))


def coordinator_epoch_before() -> tuple[Column, Column]:
    """The highest coordinator epoch of the producer's earlier markers, and that marker's offset."""
    return F.col("coord_before_epoch"), F.col("coord_before_offset")


# Past every sequence: the end of the last run of sequences a stream's batches cover without a hole.
_BEYOND = 1 << 62


def failed_producer_batches(batches: DataFrame) -> DataFrame:
    """Batches whose CRC failed and whose (untrusted) header names a producer: magic 2, a producer id.
    Read by `corrupt_fills` (data batches) and `transactions.hanging_transactions` (markers)."""
    return batches.where((F.col("magic") == 2) & (F.col("producer_id") >= 0) & ~F.col("crc_valid"))


def corrupt_fills(failed: DataFrame, events: DataFrame) -> DataFrame:
    """CRC-failed data batches (of `failed`: `failed_producer_batches`) that hold sequences their producer
    skipped (`events`: the history's events),
    one row per (failed batch, skip): the failed batch's `dump_id`, `replica`, `file` and `position`,
    the stream (`STREAM_KEY`), its unwrapped range `_from`-`_to`, and the skip: `gap_offset`, the batch
    after it, `gap_prev_offset`, the producer's batch before it (null if none), and `is_start`.

    A skip is a jump's `[expected, base - 1]` (RULES.md's failed fill: a batch past its stream's highest
    sequence plus one, not a late batch that skips after a regression), or the sequences `[0, base - 1]`
    before a stream's first batch (FIRST or EPOCH_START with a base above 0: `is_start`), the previous
    batch then being the producer's previous row if its epoch is lower (`start_after`; else none: a
    marker of the same epoch may follow the epoch's first, rotted, transaction).

    The CRC-32C covers a batch's producer id, epoch and sequences (formats §1.3), so a failed batch
    takes no part in the replay (`is_producer_batch`) and the batches around it show the skip. Its
    header is believed only where it fits the skip exactly as a sent batch would: magic 2, a data batch
    lying between the two batches, a sequence span equal to its offset span, and every sequence inside
    the skipped range. A flipped byte among the records leaves it so; one in the producer fields almost
    never does. Then the skipped sequences are in the log, unreadable: the corruption (CRC_MISMATCH) is
    the finding, not a loss (`coverage_holes` counts a gap's fills as covered; `filled_starts` tells
    the starts they fill).
    """
    data = with_log_id(
        failed.where(~F.col("is_control")),
        *("dump_id", "replica", "file", "position", "producer_id", "producer_epoch"),
        *("base_offset", "last_offset", "base_sequence", "last_sequence"),
    ).alias("c")
    gap = F.col("jump")
    is_start = F.col("transition").isin("FIRST", "EPOCH_START") & (F.col("base_sequence") > 0)
    skips = events.where(gap | is_start).select(
        *STREAM_KEY,
        "base_offset",
        F.when(gap, F.col("prev_base_offset")).otherwise(start_after()).alias("_prev"),
        F.when(gap, F.col("expected_unwrapped")).otherwise(F.lit(0).cast("long")).alias("_expected"),
        "base_sequence_unwrapped",
        (~gap).alias("is_start"),
    )
    j = skips.alias("j")
    joined = data.join(
        j,
        [F.col(f"c.{k}") == F.col(f"j.{k}") for k in STREAM_KEY]
        + [
            F.col("c.base_offset") > F.coalesce(F.col("j._prev"), F.lit(-1)),
            F.col("c.last_offset") < F.col("j.base_offset"),
        ],
    )
    modulus = F.lit(SEQUENCE_MODULUS)
    expected = F.col("j._expected")
    # The failed batch's sequences read from the first skipped one on (a lower base wraps far beyond).
    start = expected + F.pmod(F.col("c.base_sequence") - F.pmod(expected, modulus), modulus)
    span = F.pmod(F.col("c.last_sequence").cast("long") - F.col("c.base_sequence"), modulus)
    fits = (
        (F.col("c.base_sequence") >= 0)
        & (F.col("c.last_sequence") >= 0)
        & (span == F.col("c.last_offset") - F.col("c.base_offset"))
        & (start + span < F.col("j.base_sequence_unwrapped"))
    )
    return joined.where(fits).select(
        *[F.col(f"c.{k}") for k in ("dump_id", "replica", "file", "position", *STREAM_KEY)],
        start.alias("_from"),
        (start + span).alias("_to"),
        F.col("j.base_offset").alias("gap_offset"),
        F.col("j._prev").alias("gap_prev_offset"),
        F.col("j.base_sequence_unwrapped").alias("gap_base_sequence"),
        "j.is_start",
    )


def start_after() -> Column:
    """Of a stream's first batch: the offset after which its epoch's earlier batches would lie, the
    producer's previous row when that row's epoch is lower; null (the log's start) when there is none or
    it is a marker of the same epoch (transactions V1 write an epoch's markers after its data; V2 a
    marker one epoch above its transaction's data, which raises the epoch)."""
    return F.when(F.col("prev_producer_epoch") < F.col("producer_epoch"), F.col("prev_offset"))


def explaining_fills(fills: DataFrame, starts: DataFrame) -> DataFrame:
    """The `fills` whose records their CRC_MISMATCH may call not lost: every gap's (a gap counts what they
    hold as covered) and the starts' that `starts` (`filled_starts`) holds complete (a start filled in
    part keeps its finding and its whole count)."""
    complete = starts.select("log_id", "producer_id", F.col("base_offset").alias("gap_offset"))
    return fills.where(~F.col("is_start")).unionByName(
        fills.where(F.col("is_start")).join(complete, ["log_id", "producer_id", "gap_offset"], "left_semi")
    )


def filled_starts(fills: DataFrame) -> DataFrame:
    """The stream starts (`corrupt_fills` rows with `is_start`) whose sequences `[0, base - 1]` the failed
    batches cover without a hole: (`log_id`, `producer_id`, `base_offset`) of the stream's first batch,
    which then starts where its producer began, as far as the log can tell."""
    key = [*STREAM_KEY, "gap_offset"]
    w = Window.partitionBy(*key).orderBy("_from", "_to").rowsBetween(Window.unboundedPreceding, -1)
    ranges = fills.where(F.col("is_start")).withColumn(
        "_joins", F.col("_from") <= F.coalesce(F.max("_to").over(w), F.lit(-1)) + 1
    )
    covered = ranges.groupBy(*key, "gap_base_sequence").agg(
        F.bool_and("_joins").alias("_joined"), F.max("_to").alias("_reach")
    )
    return covered.where(F.col("_joined") & (F.col("_reach") == F.col("gap_base_sequence") - 1)).select(
        "log_id", "producer_id", F.col("gap_offset").alias("base_offset")
    )


def coverage_holes(events: DataFrame, fills: DataFrame | None = None) -> DataFrame:
    """Sequence ranges of each (log, pid, epoch) that no retained batch covers, between its lowest and
    highest (`events` holds its late and jump batches; `fills`, from `corrupt_fills`, the ranges of
    CRC-failed batches that hold sequences a gap skipped, which count as covered).

    Read in offset order, a stream's highest sequence so far rises contiguously except at a jump, so its
    batches cover [first base, the highest before the first jump], then from each jump's base to the
    highest before the next jump, and only late batches can cover what lies between (or below the
    first base). Those runs and the late batches' own ranges, a handful per irregular stream, give the
    holes: no window over the whole stream.
    """
    stream = Window.partitionBy(*STREAM_KEY).orderBy("base_offset", *REPLAY_TIES)
    jumps = events.where(F.col("jump"))
    from_jumps = jumps.select(
        *STREAM_KEY,
        F.col("base_sequence_unwrapped").alias("_from"),
        F.coalesce(F.lead("max_last_before").over(stream), F.lit(_BEYOND)).alias("_to"),
    )
    marked = events.where(F.col("late") | F.col("jump"))
    from_first = marked.groupBy(*STREAM_KEY).agg(
        F.first("stream_first_base").alias("_from"),
        F.coalesce(F.min(F.when(F.col("jump"), F.col("max_last_before"))), F.lit(_BEYOND)).alias("_to"),
    )
    lates = events.where(F.col("late")).select(
        *STREAM_KEY,
        F.col("base_sequence_unwrapped").alias("_from"),
        F.col("last_sequence_unwrapped").alias("_to"),
    )
    covered = from_first.select(*STREAM_KEY, "_from", "_to").unionByName(from_jumps).unionByName(lates)
    if fills is not None:
        covered = covered.unionByName(fills.where(~F.col("is_start")).select(*STREAM_KEY, "_from", "_to"))
    w = Window.partitionBy(*STREAM_KEY).orderBy("_from", "_to").rowsBetween(Window.unboundedPreceding, -1)
    covered = covered.withColumn("_covered_to", F.max("_to").over(w))
    return covered.where(F.col("_from") > F.col("_covered_to") + 1).select(
        *STREAM_KEY,
        (F.col("_covered_to") + 1).alias("hole_start"),
        (F.col("_from") - 1).alias("hole_end"),
    )


def cores(spark: SparkSession) -> int:
    """The task slots of the session's executors (`defaultParallelism`; under Spark Connect, which has
    no SparkContext, the shuffle width)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: no SparkContext
        return int(spark.conf.get("spark.sql.shuffle.partitions") or 1)


# Below this many history rows a single task writes them all in a few seconds: no shuffle to save that.
SPREAD_MIN_ROWS = 1_000_000


def spread(stored: DataFrame) -> DataFrame:
    """The stored history (`replayed`) through one shuffle by (producer id, base offset), so that every
    core reads a share of a hot producer's rows: for the `sequence_history` write of a history one of
    whose `hot_producers` was scanned whole (`split_plan` could not cut it), where the hot task then
    only reads and re-serialises its rows and every core derives and encodes its share. On a balanced
    history the shuffle would only add its cost."""
    return stored.repartition("producer_id", "base_offset")


def history_table(history: DataFrame) -> DataFrame:
    """The silver `sequence_history` rows."""
    return history.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in SEQUENCE_HISTORY.schema.fields]
    )
