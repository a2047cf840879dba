"""The silver stage: every producer batch and marker with the broker's view of its sequence.

Replays `ProducerAppendInfo` (kafka-formats-and-rules §5.3-§5.4, RULES.md) with window functions:
per `(log, producer_id)` in offset order for epochs, per `(log, producer_id, epoch)` for sequences.
No per-producer state is collected anywhere: a producer with ten million batches costs one window
sort, which Spark spills to disk as needed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.window import WindowSpec

from audit_rules.logs import with_log_key
from schemas.tables import SEQUENCE_HISTORY

SEQUENCE_MODULUS = 1 << 31  # sequences are non-negative int32 and wrap after 2147483647 (§1.4)
HALF_RANGE = 1 << 30


def producer_batches(batches: DataFrame) -> DataFrame:
    """Batches that take part in producer state (§5.1): magic 2, a producer id, a trustworthy header."""
    return batches.where((F.col("magic") == 2) & (F.col("producer_id") >= 0) & F.col("crc_valid"))


def _pid_window() -> WindowSpec:
    return Window.partitionBy("log_key", "producer_id").orderBy("base_offset")


def _stream_window() -> WindowSpec:
    # `in_stream` in the key: rows outside the epoch stream form their own partitions and are ignored.
    return Window.partitionBy("log_key", "producer_id", "producer_epoch", "in_stream").orderBy("base_offset")


def build_history(batches: DataFrame) -> DataFrame:
    """Producer batches with their replay columns (internal ones too; `history_table` selects the
    silver schema). Columns are added level by level with `withColumns`: one analysis per level."""
    b = with_log_key(producer_batches(batches))
    pid = _pid_window()
    before = pid.rowsBetween(Window.unboundedPreceding, -1)
    whole = pid.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    markers_before = (
        Window.partitionBy("log_key", "producer_id", "is_control")
        .orderBy("base_offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    epoch = F.col("producer_epoch").cast("int")

    # INVALID_SEQUENCE (KIP-98): a data batch's sequence range must span exactly its offset range.
    invalid = ~F.col("is_control") & (
        (F.col("base_sequence") < 0)
        | (
            F.pmod(F.col("last_sequence").cast("long") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS))
            != F.col("last_offset") - F.col("base_offset")
        )
    )
    b = b.withColumns(
        {
            "invalid": invalid,
            "last_marker_offset": F.max(F.when(F.col("is_control"), F.col("base_offset"))).over(whole),
            "_coord_before": F.max(
                F.struct(F.col("coordinator_epoch").alias("c"), (-F.col("base_offset")).alias("o"))
            ).over(markers_before),
        }
    )
    # Highest earlier epoch and the first batch that carried it (max of (epoch, -offset)).
    max_before = F.max(
        F.when(~F.col("invalid"), F.struct(epoch.alias("e"), (-F.col("base_offset")).alias("o")))
    ).over(before)
    b = b.withColumn("_max_before", max_before)
    regressed = ~F.col("invalid") & F.coalesce(epoch < F.col("_max_before.e"), F.lit(False))
    b = b.withColumns(
        {
            "epoch_regressed": regressed,
            "regression_related_offset": -F.col("_max_before.o"),
            "max_epoch_before": F.col("_max_before.e"),
            "ok": ~F.col("invalid") & ~regressed,
            "in_stream": ~F.col("invalid") & ~regressed & ~F.col("is_control"),
        }
    )
    s = _stream_window()
    upto = s.rowsBetween(Window.unboundedPreceding, 0)
    s_before = s.rowsBetween(Window.unboundedPreceding, -1)
    b = b.withColumns(
        {
            "prev_offset": F.last(F.when(F.col("ok"), F.col("base_offset")), ignorenulls=True).over(before),
            "prev_producer_epoch": F.last(
                F.when(F.col("ok"), F.col("producer_epoch")), ignorenulls=True
            ).over(before),
            "min_epoch_before": F.min(F.when(F.col("ok"), epoch)).over(before),
            # ProducerStateEntry.lastTimestamp: the previous batch or marker (markers count since 2.5,
            # KAFKA-9144); a producer with an open transaction never expires (§5.7).
            "prev_event_timestamp": F.last(
                F.when(F.col("ok"), F.col("max_timestamp")), ignorenulls=True
            ).over(before),
            "prev_event_open_txn": F.last(
                F.when(F.col("ok"), F.col("is_transactional") & ~F.col("is_control")), ignorenulls=True
            ).over(before),
            # The epoch stream: lag values, then the 2^31 unwrapping of RULES.md.
            "stream_index": F.row_number().over(s),
            "prev_base_offset": F.lag("base_offset").over(s),
            "prev_last_sequence": F.lag("last_sequence").over(s),
            "prev_max_timestamp": F.lag("max_timestamp").over(s),
        }
    )
    step = F.col("base_sequence").cast("long") - F.col("prev_last_sequence")
    jump = (
        F.when(F.col("prev_last_sequence").isNull(), 0)
        .when(step < -HALF_RANGE, 1)
        .when(step > HALF_RANGE, -1)
        .otherwise(0)
    )
    spans = F.when(F.col("last_sequence") < F.col("base_sequence"), 1).otherwise(0)
    b = b.withColumns({"_jump": jump, "_spans": spans})
    wraps = F.sum("_jump").over(upto) + F.coalesce(F.sum("_spans").over(s_before), F.lit(0))
    base_unwrapped = F.col("base_sequence") + wraps * F.lit(SEQUENCE_MODULUS)
    b = b.withColumn("base_sequence_unwrapped", base_unwrapped)
    b = b.withColumn(
        "last_sequence_unwrapped",
        F.col("base_sequence_unwrapped")
        + F.pmod(F.col("last_sequence").cast("long") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS)),
    )
    # Exact copies of an earlier batch of the stream (KIP-98 duplicate: same epoch and sequence range).
    copies = Window.partitionBy(
        "log_key",
        "producer_id",
        "producer_epoch",
        "in_stream",
        "base_sequence_unwrapped",
        "last_sequence_unwrapped",
    ).orderBy("base_offset")
    b = b.withColumns(
        {
            "prev_last_unwrapped": F.lag("last_sequence_unwrapped").over(s),
            "copy_index": F.row_number().over(copies),
            "first_copy_offset": F.first("base_offset").over(copies),
            "first_copy_stream_index": F.first("stream_index").over(copies),
        }
    )
    b = b.withColumn("expected_unwrapped", F.col("prev_last_unwrapped") + 1)

    first_of_epoch = F.col("in_stream") & (F.col("stream_index") == 1)
    first_of_producer = F.col("min_epoch_before").isNull() | (F.col("min_epoch_before") == epoch)
    transition = (
        F.when(F.col("invalid"), "INVALID")
        .when(F.col("epoch_regressed"), "EPOCH_REGRESSION")
        .when(F.col("is_control"), "MARKER")
        .when(first_of_epoch & first_of_producer, "FIRST")
        .when(first_of_epoch, "EPOCH_START")
        .when(F.col("copy_index") > 1, "DUPLICATE")
        .when(F.col("base_sequence_unwrapped") == F.col("expected_unwrapped"), "IN_SEQUENCE")
        .when(F.col("base_sequence_unwrapped") < F.col("expected_unwrapped"), "REGRESSION")
        .otherwise("GAP")
    )
    expected = (
        F.when(transition == "EPOCH_START", F.lit(0))
        .when(
            F.col("expected_unwrapped").isNotNull(),
            F.pmod(F.col("expected_unwrapped"), F.lit(SEQUENCE_MODULUS)),
        )
        .cast("int")
    )
    b = b.withColumns({"transition": transition, "expected_sequence": expected})
    return b.drop("_max_before", "_jump", "_spans")


def state_expired(expiration_ms: int) -> Column:
    """True where the broker had forgotten the producer before this batch (`isProducerExpired`, §5.7):
    no open transaction and at least `producer.id.expiration.ms` since its previous batch or marker."""
    idle = F.col("max_timestamp") - F.col("prev_event_timestamp")
    return ~F.coalesce(F.col("prev_event_open_txn"), F.lit(False)) & F.coalesce(
        idle >= F.lit(expiration_ms), F.lit(False)
    )


def coordinator_epoch_before() -> tuple[Column, Column]:
    """The highest coordinator epoch of the producer's earlier markers, and that marker's offset."""
    return F.col("_coord_before.c"), -F.col("_coord_before.o")


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
