"""The silver stage: every producer batch and marker with the broker's view of its sequence.

Replays `ProducerAppendInfo` (kafka-formats-and-rules §5.3-§5.4, RULES.md) per `(log, producer_id)`
in offset order: one shuffle, one sort and a streaming scan (`audit_rules.replay`). No per-producer
state is collected anywhere: a producer with ten million batches costs one sort, which Spark spills
to disk as needed, and one row of state in its task.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
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
from audit_rules.logs import with_log_key
from schemas.tables import SEQUENCE_HISTORY

SEQUENCE_MODULUS = replay.SEQUENCE_MODULUS  # sequences are non-negative int32, wrap after 2147483647 (§1.4)


def producer_batches(batches: DataFrame) -> DataFrame:
    """Batches that take part in producer state (§5.1): magic 2, a producer id, a trustworthy header."""
    return batches.where((F.col("magic") == 2) & (F.col("producer_id") >= 0) & F.col("crc_valid"))


def build_history(batches: DataFrame) -> DataFrame:
    """Producer batches with their replay columns (internal ones too; `history_table` selects the
    silver schema).

    One shuffle by (log, producer id) and one sort by base offset; the running values of the replay
    (highest epoch so far, previous valid batch, the epoch stream's counters and 2^31 laps) come
    from one streaming pass per task (`audit_rules.replay`), and the rest are columns of each row.
    The batches of an epoch stream are consecutive among the producer's in-stream batches (a batch
    that is neither invalid nor an epoch regression never has a lower epoch than an earlier one), so
    stream values are running values minus their value where the epoch began.

    `transition` here does not yet tell exact copies (DUPLICATE) from REGRESSION, IN_SEQUENCE or GAP:
    only an *irregular* stream (one that ever went backwards or jumped) can hold a copy or a hole, and
    `irregular_history` settles those streams alone.
    """
    b = with_log_key(producer_batches(batches))
    schema = StructType(
        [*b.schema.fields, *(StructField(name, _parse_type(kind)) for name, kind in replay.OUTPUTS)]
    )
    b = (
        b.repartition("log_key", "producer_id")
        .sortWithinPartitions("log_key", "producer_id", "base_offset")
        .mapInArrow(replay.replay_batches, schema)
    )
    epoch = F.col("producer_epoch").cast("int")
    b = b.withColumns(
        {
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
        .when(F.col("base_sequence_unwrapped") == F.col("expected_unwrapped"), "IN_SEQUENCE")
        .when(F.col("base_sequence_unwrapped") < F.col("expected_unwrapped"), "REGRESSION")
        .otherwise("GAP")
    )
    b = b.withColumns(
        {
            "transition": transition,
            # A batch that did not follow on from the previous one: its stream is irregular. A stream
            # whose every batch follows on has strictly rising, disjoint ranges: no copy, no hole.
            "irregular": F.col("in_stream")
            & ~first
            & (F.col("base_sequence_unwrapped") != F.col("expected_unwrapped")),
            "copy_index": F.lit(1),
            "first_copy_offset": F.lit(None).cast("long"),
            "first_copy_stream_index": F.lit(None).cast("int"),
        }
    )
    return b.withColumn("expected_sequence", _expected_sequence()).drop("first_in_stream")


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


STREAM_KEY = ("log_key", "producer_id", "producer_epoch")


def irregular_streams(history: DataFrame) -> DataFrame:
    """The (log, producer, epoch) streams with a batch that went backwards or jumped: the only ones
    that can hold an exact copy, a regression or a gap (a stream that always advanced by one has none)."""
    return history.where(F.col("irregular")).select(*STREAM_KEY).distinct()


def irregular_history(history: DataFrame, streams: DataFrame) -> DataFrame:
    """The in-stream batches of `streams` (from `irregular_streams`, joined as given: broadcast it when
    small) with exact copies told apart: `transition` DUPLICATE where an earlier batch of the stream
    has the same unwrapped sequence range (KIP-98 duplicate), with the first copy's offset and
    stream index."""
    rows = history.where(F.col("in_stream")).join(streams, list(STREAM_KEY), "left_semi")
    copies = Window.partitionBy(*STREAM_KEY, "base_sequence_unwrapped", "last_sequence_unwrapped").orderBy(
        "base_offset"
    )
    rows = rows.withColumns(
        {
            "copy_index": F.row_number().over(copies),
            "first_copy_offset": F.first("base_offset").over(copies),
            "first_copy_stream_index": F.first("stream_index").over(copies),
        }
    )
    rows = rows.withColumn(
        "transition",
        F.when(
            F.col("transition").isin("IN_SEQUENCE", "REGRESSION", "GAP") & (F.col("copy_index") > 1),
            F.lit("DUPLICATE"),
        ).otherwise(F.col("transition")),
    )
    return rows.withColumns(
        {
            "first_copy_offset": F.when(F.col("copy_index") > 1, F.col("first_copy_offset")),
            "first_copy_stream_index": F.when(F.col("copy_index") > 1, F.col("first_copy_stream_index")),
        }
    )


def settled_history(history: DataFrame, streams: DataFrame, irregular: DataFrame) -> DataFrame:
    """The whole history with the irregular streams' rows replaced by their settled ones."""
    settled = history.join(streams, list(STREAM_KEY), "left_anti")
    in_irregular_not_stream = history.where(~F.col("in_stream")).join(streams, list(STREAM_KEY), "left_semi")
    return settled.unionByName(in_irregular_not_stream).unionByName(irregular.select(*history.columns))


def producer_summary(history: DataFrame) -> DataFrame:
    """One row per (log, producer id) of the history: the last offset of any retained batch or marker,
    the offset of its last marker and of its last transactional data batch."""
    return history.groupBy("log_key", "producer_id").agg(
        F.max("last_offset").alias("retained_last_offset"),
        F.max(F.when(F.col("is_control"), F.col("base_offset"))).alias("last_marker"),
        F.max(F.when(F.col("is_transactional") & ~F.col("is_control"), F.col("base_offset"))).alias(
            "last_transactional_data"
        ),
    )


def state_expired(expiration_ms: int) -> Column:
    """True where the broker had forgotten the producer before this batch (`isProducerExpired`, §5.7):
    no open transaction and at least `producer.id.expiration.ms` since its previous batch or marker."""
    idle = F.col("max_timestamp") - F.col("prev_event_timestamp")
    return ~F.coalesce(F.col("prev_event_open_txn"), F.lit(False)) & F.coalesce(
        idle >= F.lit(expiration_ms), F.lit(False)
    )


def coordinator_epoch_before() -> tuple[Column, Column]:
    """The highest coordinator epoch of the producer's earlier markers, and that marker's offset."""
    return F.col("coord_before_epoch"), F.col("coord_before_offset")


def coverage_holes(history: DataFrame) -> DataFrame:
    """Sequence ranges of each (log, pid, epoch) that no retained batch covers, between its lowest and
    highest."""
    stream = history.where(F.col("in_stream"))
    w = (
        Window.partitionBy("log_key", "producer_id", "producer_epoch")
        .orderBy("base_sequence_unwrapped", "base_offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    covered = stream.withColumn("_covered_to", F.max("last_sequence_unwrapped").over(w))
    return covered.where(F.col("base_sequence_unwrapped") > F.col("_covered_to") + 1).select(
        "log_key",
        "producer_id",
        "producer_epoch",
        (F.col("_covered_to") + 1).alias("hole_start"),
        (F.col("base_sequence_unwrapped") - 1).alias("hole_end"),
    )


def history_table(history: DataFrame) -> DataFrame:
    """The silver `sequence_history` rows."""
    return history.select(
        *[F.col(f.name).cast(f.dataType).alias(f.name) for f in SEQUENCE_HISTORY.schema.fields]
    )
