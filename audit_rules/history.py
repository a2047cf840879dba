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


def build_history(batches: DataFrame) -> DataFrame:
    """Producer batches with their replay columns (internal ones too; `history_table` selects the
    silver schema).

    Every window is over one producer's rows in offset order, so the whole replay costs one shuffle
    and one sort. The per-epoch sequence stream needs no window of its own: a batch that is neither
    invalid nor an epoch regression never has a lower epoch than any earlier one, so the batches of
    the stream are consecutive among the producer's in-stream batches, and stream values are running
    values minus their value where the epoch began. Columns are added level by level with
    `withColumns`: one analysis per level.

    `transition` here does not yet tell exact copies (DUPLICATE) from REGRESSION, IN_SEQUENCE or GAP:
    only an *irregular* stream (one that ever went backwards or jumped) can hold a copy or a hole, and
    `irregular_history` settles those streams alone.
    """
    b = with_log_key(producer_batches(batches))
    pid = _pid_window()
    before = pid.rowsBetween(Window.unboundedPreceding, -1)
    upto = pid.rowsBetween(Window.unboundedPreceding, 0)
    whole = pid.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
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
                F.when(
                    F.col("is_control"),
                    F.struct(F.col("coordinator_epoch").alias("c"), (-F.col("base_offset")).alias("o")),
                )
            ).over(before),
            # Highest earlier epoch and the first batch that carried it (max of (epoch, -offset)).
            "_max_before": F.max(
                F.when(~invalid, F.struct(epoch.alias("e"), (-F.col("base_offset")).alias("o")))
            ).over(before),
        }
    )
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
    in_stream = F.col("in_stream")
    b = b.withColumns(
        {
            "prev_offset": F.last(F.when(F.col("ok"), F.col("base_offset")), ignorenulls=True).over(before),
            "prev_producer_epoch": F.last(
                F.when(F.col("ok"), F.col("producer_epoch")), ignorenulls=True
            ).over(before),
            "min_epoch_before": F.min(F.when(F.col("ok"), epoch)).over(before),
            # The producer's unflagged markers before this row: the transactions it closed so far.
            "markers_before": F.count(F.when(F.col("ok") & F.col("is_control"), F.lit(1))).over(before),
            # ProducerStateEntry.lastTimestamp: the previous batch or marker (markers count since 2.5,
            # KAFKA-9144); a producer with an open transaction never expires (§5.7).
            "prev_event_timestamp": F.last(
                F.when(F.col("ok"), F.col("max_timestamp")), ignorenulls=True
            ).over(before),
            "prev_event_open_txn": F.last(
                F.when(F.col("ok"), F.col("is_transactional") & ~F.col("is_control")), ignorenulls=True
            ).over(before),
            # The previous in-stream batch: the stream's previous batch when its epoch is ours.
            "_p": F.last(
                F.when(
                    in_stream,
                    F.struct(
                        epoch.alias("e"),
                        F.col("base_offset").alias("o"),
                        F.col("base_sequence").alias("b"),
                        F.col("last_sequence").alias("l"),
                        F.col("max_timestamp").alias("t"),
                    ),
                ),
                ignorenulls=True,
            ).over(before),
            "_n": F.count(F.when(in_stream, F.lit(1))).over(upto),
            "_S": F.sum(F.when(in_stream, _spans(F.col("base_sequence"), F.col("last_sequence")))).over(upto),
        }
    )
    same = in_stream & F.coalesce(F.col("_p.e") == epoch, F.lit(False))
    b = b.withColumns(
        {
            "_first": in_stream & ~same,
            "prev_base_offset": F.when(same, F.col("_p.o")),
            "prev_last_sequence": F.when(same, F.col("_p.l")),
            "prev_max_timestamp": F.when(same, F.col("_p.t")),
        }
    )
    # The 2^31 unwrapping of RULES.md: +1 lap where the base sequence falls more than half the range
    # below the previous last sequence, -1 where it rises that far, +1 after a batch that wraps inside.
    step = F.col("base_sequence").cast("long") - F.col("prev_last_sequence")
    jump = (
        F.when(F.col("prev_last_sequence").isNull(), 0)
        .when(step < -HALF_RANGE, 1)
        .when(step > HALF_RANGE, -1)
        .otherwise(0)
    )
    b = b.withColumn("_jump", F.when(in_stream, jump))
    # The running values where the row's epoch stream began (its latest first batch).
    b = b.withColumns(
        {
            "_J": F.sum("_jump").over(upto),
            "_n0": F.last(F.when(F.col("_first"), F.col("_n") - 1), ignorenulls=True).over(upto),
            "_S0": F.last(
                F.when(F.col("_first"), F.col("_S") - _spans(F.col("base_sequence"), F.col("last_sequence"))),
                ignorenulls=True,
            ).over(upto),
        }
    )
    b = b.withColumn("_J0", F.last(F.when(F.col("_first"), F.col("_J")), ignorenulls=True).over(upto))
    spans = _spans(F.col("base_sequence"), F.col("last_sequence"))
    laps = (F.col("_J") - F.col("_J0")) + (F.col("_S") - spans - F.col("_S0"))
    # The previous stream batch's laps, from the running sums less this row's (and its own spans).
    prev_laps = (F.col("_J") - F.col("_jump") - F.col("_J0")) + (
        F.col("_S") - spans - _spans(F.col("_p.b"), F.col("_p.l")) - F.col("_S0")
    )
    prev_last = (
        F.col("_p.b").cast("long")
        + prev_laps * F.lit(SEQUENCE_MODULUS)
        + F.pmod(F.col("_p.l").cast("long") - F.col("_p.b"), F.lit(SEQUENCE_MODULUS))
    )
    b = b.withColumns(
        {
            "stream_index": F.when(in_stream, F.col("_n") - F.col("_n0")).cast("int"),
            "base_sequence_unwrapped": F.when(
                in_stream, F.col("base_sequence") + laps * F.lit(SEQUENCE_MODULUS)
            ),
            "prev_last_unwrapped": F.when(same, prev_last),
        }
    )
    b = b.withColumns(
        {
            "last_sequence_unwrapped": F.col("base_sequence_unwrapped")
            + F.pmod(F.col("last_sequence").cast("long") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS)),
            "expected_unwrapped": F.col("prev_last_unwrapped") + 1,
        }
    )
    first_of_producer = F.col("min_epoch_before").isNull() | (F.col("min_epoch_before") == epoch)
    transition = (
        F.when(F.col("invalid"), "INVALID")
        .when(F.col("epoch_regressed"), "EPOCH_REGRESSION")
        .when(F.col("is_control"), "MARKER")
        .when(F.col("_first") & first_of_producer, "FIRST")
        .when(F.col("_first"), "EPOCH_START")
        .when(F.col("base_sequence_unwrapped") == F.col("expected_unwrapped"), "IN_SEQUENCE")
        .when(F.col("base_sequence_unwrapped") < F.col("expected_unwrapped"), "REGRESSION")
        .otherwise("GAP")
    )
    b = b.withColumns(
        {
            "transition": transition,
            # A batch that did not follow on from the previous one: its stream is irregular. A stream
            # whose every batch follows on has strictly rising, disjoint ranges: no copy, no hole.
            "irregular": in_stream
            & ~F.col("_first")
            & (F.col("base_sequence_unwrapped") != F.col("expected_unwrapped")),
            "copy_index": F.lit(1),
            "first_copy_offset": F.lit(None).cast("long"),
            "first_copy_stream_index": F.lit(None).cast("int"),
        }
    )
    b = b.withColumn("expected_sequence", _expected_sequence())
    return b.drop(
        "_max_before",
        "_p",
        "_n",
        "_first",
        "_jump",
        "_spans",
        "_J",
        "_S",
        "_n0",
        "_J0",
        "_S0",
    )


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
