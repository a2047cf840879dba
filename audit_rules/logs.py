"""Per-log context the rules need: log start and end, high watermark, capture time, compaction.

A log is one `(dump_id, replica, topic, partition)`. The log start offset is what the broker uses on
load (`LogLoader`): the larger of the log-start-offset checkpoint and the first live segment's base
offset (kafka-formats-and-rules §3.6, §5.7); it separates retention (below) from loss (at or above).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audit_rules.profile import Profile
from schemas.tables import LOG_KEY


def log_key(prefix: str = "") -> Column:
    """One non-null string per log, so joins treat a null replica as a value (null-safe keys)."""
    return F.concat_ws(
        "\u0001",
        F.col(f"{prefix}dump_id"),
        F.coalesce(F.col(f"{prefix}replica"), F.lit("\u0000")),
        F.col(f"{prefix}topic"),
        F.col(f"{prefix}partition").cast("string"),
    )


def with_log_key(df: DataFrame) -> DataFrame:
    return df.withColumn("log_key", log_key())


def compacted(profile: Profile, topic: Column) -> Column:
    """True where the profile names the topic (or a glob matching it) as compacted."""
    terms = [
        topic.like(pattern.replace("%", "\\%").replace("*", "%").replace("?", "_"))
        for pattern in profile.compacted_topics
    ]
    out = F.lit(False)
    for term in terms:
        out = out | term
    return out


def log_bounds(
    batches: DataFrame, files: DataFrame, partition_state: DataFrame, profile: Profile
) -> DataFrame:
    """One row per log: log_start_offset (+ source), log_end_offset, high_watermark, capture time, counts
    (the producer count comes from the history: `pipeline.partition_summary`)."""
    stats = batches.groupBy(*LOG_KEY).agg(
        F.min("base_offset").alias("first_batch_offset"),
        (F.max("last_offset") + 1).alias("log_end_offset"),
        # A corrupt batch's timestamp cannot be trusted.
        F.max(F.when(F.col("crc_valid"), F.col("max_timestamp"))).alias("max_timestamp"),
        F.count(F.lit(1)).alias("batches"),
        F.sum(F.when(F.col("magic") >= 2, F.col("count")).otherwise(1)).cast("long").alias("records"),
        F.sum("size_bytes").cast("long").alias("bytes"),
    )
    segments = (
        files.where((F.col("kind") == "log") & F.col("is_live") & F.col("topic").isNotNull())
        .groupBy(*LOG_KEY)
        .agg(F.min("base_offset").alias("first_segment_offset"))
    )
    state = (
        partition_state.where(F.col("state").isin("log_start_offset", "high_watermark"))
        .groupBy(*LOG_KEY)
        .agg(
            F.max(F.when(F.col("state") == "log_start_offset", F.col("offset"))).alias(
                "checkpoint_log_start"
            ),
            F.max(F.when(F.col("state") == "high_watermark", F.col("offset"))).alias("high_watermark"),
        )
    )
    captures = files.groupBy("dump_id", "replica").agg(F.max("mtime_ms").alias("capture_time_ms"))
    keys = stats.select(*LOG_KEY).unionByName(segments.select(*LOG_KEY)).distinct()
    logs = keys
    for part in (stats, segments, state):
        logs = _left(logs, part)
    logs = logs.join(
        captures.withColumn(
            "_c", F.concat_ws("\u0001", "dump_id", F.coalesce("replica", F.lit("\u0000")))
        ).drop("dump_id", "replica"),
        F.concat_ws("\u0001", logs.dump_id, F.coalesce(logs.replica, F.lit("\u0000"))) == F.col("_c"),
        "left",
    ).drop("_c")
    start = F.greatest(F.col("checkpoint_log_start"), F.col("first_segment_offset"))
    return logs.select(
        *LOG_KEY,
        "capture_time_ms",
        F.coalesce(start, F.col("first_batch_offset"), F.lit(0)).cast("long").alias("log_start_offset"),
        F.when(
            F.col("checkpoint_log_start").isNotNull()
            & (F.col("checkpoint_log_start") >= F.coalesce(F.col("first_segment_offset"), F.lit(-1))),
            F.lit("checkpoint"),
        )
        .when(F.col("first_segment_offset").isNotNull(), F.lit("first_segment"))
        .when(F.col("first_batch_offset").isNotNull(), F.lit("first_batch"))
        .alias("log_start_source"),
        F.coalesce(F.col("log_end_offset"), start, F.lit(0)).cast("long").alias("log_end_offset"),
        "high_watermark",
        "max_timestamp",
        F.coalesce("batches", F.lit(0)).cast("long").alias("batches"),
        F.coalesce("records", F.lit(0)).cast("long").alias("records"),
        F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes"),
        compacted(profile, F.col("topic")).alias("compacted"),
    ).withColumn("log_key", log_key())


def _left(left: DataFrame, right: DataFrame) -> DataFrame:
    """Left join on the log key (null-safe), keeping the left key columns."""
    r = right.withColumn("_rk", log_key()).drop(*LOG_KEY)
    return left.withColumn("_lk", log_key()).join(r, F.col("_lk") == F.col("_rk"), "left").drop("_lk", "_rk")


def join_log(df: DataFrame, logs: DataFrame, *columns: str | Column) -> DataFrame:
    """Add the given per-log columns of `logs` (a `log_bounds` frame) to `df` (broadcast: logs are few)."""
    small = logs.select(F.col("log_key").alias("_lk"), *columns)
    return df.join(F.broadcast(small), log_key() == F.col("_lk"), "left").drop("_lk")
