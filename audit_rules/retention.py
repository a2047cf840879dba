"""Retention versus loss (seeds 000 and 001, KIP-360, KAFKA-7190).

What lies below the log start offset was deleted by retention (or DeleteRecords) and is explained;
what is at or above it and absent is loss. Evidence that a producer or record existed comes from
producer snapshots, earlier dumps of the same partition and the acknowledgement ledger.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules import ordering
from audit_rules.findings import fmt, to_findings
from audit_rules.history import SEQUENCE_MODULUS
from audit_rules.logs import (
    PARTITION_OF_LOG,
    below_start_cause,
    compaction_may_have_removed,
    join_log,
    with_log_key,
)
from audit_rules.profile import AppSequenceSpec
from schemas.tables import LOG_KEY


def latest_snapshot_entries(snapshots: DataFrame) -> DataFrame:
    """Entries of the newest snapshot of each log (the state the broker would load, §5.8)."""
    s = with_log_key(snapshots)
    newest = Window.partitionBy("log_key")
    return (
        s.withColumn("_newest", F.max("snapshot_offset").over(newest))
        .where(F.col("snapshot_offset") == F.col("_newest"))
        .drop("_newest")
    )


def snapshot_producers(producers: DataFrame, snapshots: DataFrame, logs: DataFrame) -> DataFrame:
    """PRODUCER_STATE_RETAINED (info) or UNKNOWN_PRODUCER_LOSS (critical) for snapshot producers with no
    retained batch (`producers`: `history.producer_summary`)."""
    entries = latest_snapshot_entries(snapshots)
    absent = entries.join(producers, ["log_key", "producer_id"], "left_anti")
    absent = join_log(absent, logs, "log_start_offset", "remote_log_start")
    retained = to_findings(
        absent.where(F.col("last_offset") < F.col("log_start_offset")),
        "PRODUCER_STATE_RETAINED",
        fmt(
            "The producer snapshot at offset %s still lists producer %s epoch %s (last offset %s, sequence "
            "%s), whose batches all lie below the log start offset %s (%s): state kept after retention "
            "(Kafka >= 2.5), not loss.",
            "snapshot_offset",
            "producer_id",
            "producer_epoch",
            "last_offset",
            "last_sequence",
            "log_start_offset",
            below_start_cause(),
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="last_offset",
        last_offset="last_offset",
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
        explained_by=F.lit("retention"),
    )
    lost = to_findings(
        absent.where(F.col("last_offset") >= F.col("log_start_offset")),
        "UNKNOWN_PRODUCER_LOSS",
        fmt(
            "The producer snapshot at offset %s lists producer %s epoch %s with its last batch at offset "
            "%s, at or "
            "above the log start offset %s, but the log holds no batch of that producer: its data is lost.",
            "snapshot_offset",
            "producer_id",
            "producer_epoch",
            "last_offset",
            "log_start_offset",
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="last_offset",
        last_offset="last_offset",
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
    )
    return retained.unionByName(lost)


def previous_dumps(logs: DataFrame) -> DataFrame:
    """Each log with the log of the same (replica, topic, partition) and topic incarnation
    (`logs.log_bounds`) in the dump captured just before it."""
    w = Window.partitionBy("replica", *PARTITION_OF_LOG).orderBy("capture_time_ms", "dump_id")
    return logs.select(
        "log_key",
        *LOG_KEY,
        "log_start_offset",
        "remote_log_start",
        "compacted",
        "cleaned_to",
        "capture_time_ms",
        F.lag("log_key").over(w).alias("previous_log_key"),
        F.lag("dump_id").over(w).alias("previous_dump_id"),
    ).where(F.col("previous_log_key").isNotNull())


def producers_across_dumps(producers: DataFrame, logs: DataFrame) -> DataFrame:
    """UNKNOWN_PRODUCER_RETENTION (info) or UNKNOWN_PRODUCER_LOSS (critical): a producer of the earlier dump
    absent from the later one (seed 000 rule 4; `producers`: `history.producer_summary`)."""
    pairs = previous_dumps(logs)
    producers = producers.select("log_key", "producer_id", "retained_last_offset")
    earlier = pairs.join(
        producers.withColumnRenamed("log_key", "previous_log_key"), "previous_log_key", "inner"
    )
    gone = earlier.join(producers, ["log_key", "producer_id"], "left_anti")
    common: dict[str, Any] = {
        "producer_id": "producer_id",
        "first_offset": "retained_last_offset",
        "last_offset": "retained_last_offset",
        "related_offset": "retained_last_offset",
    }
    retention = to_findings(
        gone.where(F.col("retained_last_offset") < F.col("log_start_offset")),
        "UNKNOWN_PRODUCER_RETENTION",
        fmt(
            "Producer %s, last seen at offset %s in dump %s, is absent from this dump because the log "
            "start offset moved to %s (its batches: %s): the broker may answer it with UNKNOWN_PRODUCER_ID, "
            "nothing is lost.",
            "producer_id",
            "retained_last_offset",
            "previous_dump_id",
            "log_start_offset",
            below_start_cause(),
        ),
        explained_by=F.lit("retention"),
        **common,
    )
    # A producer the broker had forgotten loses the cleaner's protection of its last batch (§5.9): on a
    # compacted log all of its batches may be gone without loss.
    loss = to_findings(
        gone.where(
            (F.col("retained_last_offset") >= F.col("log_start_offset"))
            & ~compaction_may_have_removed(F.col("retained_last_offset") - 1)
        ),
        "UNKNOWN_PRODUCER_LOSS",
        fmt(
            "Producer %s wrote up to offset %s in dump %s, but this dump holds none of its batches "
            "although its log "
            "starts at %s: the producer's data was lost or rewritten.",
            "producer_id",
            "retained_last_offset",
            "previous_dump_id",
            "log_start_offset",
        ),
        **common,
    )
    return retention.unionByName(loss)


# What an acknowledged offset is judged against: its log, where the log starts, and whether the cleaner
# may have removed batches there.
_ACK_TARGET = ("log_key", *LOG_KEY, "log_start_offset", "compacted", "cleaned_to")


def acked_records(
    batches: DataFrame,
    acks: DataFrame,
    logs: DataFrame,
    records: DataFrame | None = None,
    *,
    keys: bool = False,
    app: AppSequenceSpec | None = None,
    incarnations: bool = False,
) -> DataFrame:
    """ACKED_RECORD_RETENTION (info) or ACKED_RECORD_MISSING (critical) for every acknowledged offset,
    checked against the newest dump of each replica. With `records` (record-level mode), an ack that
    names its record's key (`keys`) or app producer and sequence (`app`: the extractor) must also
    find them in the record at its offset (`_rewritten`).

    With `incarnations` (some partition's dumps name two topic ids: the topic was deleted and created
    again, `logs.log_bounds`), each ack is checked against the newest dump of each replica in each
    incarnation, and belongs to the incarnation whose log holds it: the others do not judge it. (An
    ack that names neither producer, key nor app sequence is held by any batch at its offset.)"""
    newest = Window.partitionBy("replica", *PARTITION_OF_LOG).orderBy(
        F.col("capture_time_ms").desc(), F.col("dump_id").desc()
    )
    targets = (
        logs.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1).select(*_ACK_TARGET)
    )
    ack_rows = acks.select(
        "topic",
        "partition",
        "offset",
        F.col("producer_id").alias("ack_producer_id"),
        F.col("producer_epoch").alias("ack_producer_epoch"),
        F.col("sequence").alias("ack_sequence"),
        (F.col("key") if records is not None and keys else F.lit(None).cast("string")).alias("ack_key"),
        (
            _app_identity(F.col("app_producer"), F.col("app_sequence"))
            if records is not None and app
            else F.lit(None).cast("string")
        ).alias("ack_app"),
    ).distinct()
    # Every acknowledged offset against every target log of its partition (targets: one per replica).
    events_acks = ack_rows.join(F.broadcast(targets), ["topic", "partition"], "inner").select(
        *_ACK_TARGET,
        F.col("offset").alias("at"),
        F.lit(1).alias("_order"),
        "ack_producer_id",
        "ack_producer_epoch",
        "ack_sequence",
        "ack_key",
        "ack_app",
    )
    # Only logs some ack names are read.
    acked = targets.join(
        ack_rows.select("topic", "partition").distinct(), ["topic", "partition"], "left_semi"
    )
    data = with_log_key(batches.where(~F.col("is_control"))).join(
        F.broadcast(acked.select("log_key")), "log_key", "inner"
    )
    events_batches = data.select(
        "log_key",
        "dump_id",
        "replica",
        "topic",
        "partition",
        F.lit(None).cast("long").alias("log_start_offset"),
        F.lit(None).cast("boolean").alias("compacted"),
        F.lit(None).cast("long").alias("cleaned_to"),
        F.col("base_offset").alias("at"),
        F.lit(0).alias("_order"),
        F.struct("base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence").alias("b"),
    )
    events = events_acks.withColumn("b", F.lit(None).cast(events_batches.schema["b"].dataType)).unionByName(
        events_batches.withColumn("ack_producer_id", F.lit(None).cast("long"))
        .withColumn("ack_producer_epoch", F.lit(None).cast("short"))
        .withColumn("ack_sequence", F.lit(None).cast("int"))
        .withColumn("ack_key", F.lit(None).cast("string"))
        .withColumn("ack_app", F.lit(None).cast("string"))
    )
    # The batch holding an offset is the last batch starting at or before it (one sort per partition).
    w = Window.partitionBy("log_key").orderBy("at", "_order").rowsBetween(Window.unboundedPreceding, 0)
    located = events.withColumn("cover", F.last("b", ignorenulls=True).over(w)).where(F.col("_order") == 1)
    seq_at = F.pmod(
        F.col("cover.base_sequence").cast("long") + (F.col("at") - F.col("cover.base_offset")),
        F.lit(SEQUENCE_MODULUS),
    )
    covered = F.col("cover").isNotNull() & (F.col("cover.last_offset") >= F.col("at"))
    matches = (
        covered
        & (F.col("ack_producer_id").isNull() | (F.col("ack_producer_id") == F.col("cover.producer_id")))
        & (
            F.col("ack_producer_epoch").isNull()
            | (F.col("ack_producer_epoch") == F.col("cover.producer_epoch"))
        )
        & (
            F.col("ack_sequence").isNull()
            | (F.col("cover.producer_id") < 0)
            | (F.col("ack_sequence") == seq_at)
        )
    )
    outcome = (
        F.when(F.col("at") < F.col("log_start_offset"), F.lit("retention"))
        .when(matches, F.lit("ok"))
        # The cleaner removes whole batches below its checkpoint (a compacted topic's records are
        # replaced by later ones of their key): an acknowledged offset there may be gone without loss.
        .when(~covered & compaction_may_have_removed(F.col("at") - 1), F.lit("ok"))
        .when(~covered, F.lit("absent"))
        .otherwise(F.lit("other"))
    )
    checked = located.withColumn("_outcome", outcome)
    judged = checked.where(F.col("_outcome") != "ok")
    rewritten = None
    if records is not None and (keys or app is not None):
        rewritten = _rewritten(checked, records, acked, keys, app)
        judged = judged.unionByName(rewritten)
    if incarnations:
        # The acks some incarnation's log holds: judged nowhere else.
        held = checked.where(F.col("_outcome") == "ok")
        if rewritten is not None:
            held = _without(held, rewritten, ("log_key", *_ACK_IDENTITY))
        judged = _without(judged, held, ("replica", "topic", "partition", *_ACK_IDENTITY))
    # Consecutive offsets with one outcome and producer are one finding (offset minus rank is constant
    # along a run; a dense rank, since two acks with different keys may name one offset).
    run = Window.partitionBy("log_key", "_outcome", "ack_producer_id").orderBy("at")
    judged = judged.withColumn("_run", F.col("at") - F.dense_rank().over(run))
    ranges = judged.groupBy(
        "log_key", "dump_id", "replica", "topic", "partition", "_outcome", "ack_producer_id", "_run"
    ).agg(
        F.min("at").alias("first"),
        F.max("at").alias("last"),
        F.count(F.lit(1)).alias("n"),
        F.first("log_start_offset").alias("log_start_offset"),
        F.min_by("cover", "at").alias("cover"),
    )
    # " (producer N)" when the ledger names the producer.
    who = F.format_string(" (producer %s)", F.col("ack_producer_id").cast("string"))
    ranges = ranges.withColumn("_who", F.when(F.col("ack_producer_id").isNotNull(), who).otherwise(""))
    retention = to_findings(
        # Where the log's older segments are (`below_start_cause`): read for these ranges only.
        join_log(ranges.where(F.col("_outcome") == "retention"), logs, "remote_log_start"),
        "ACKED_RECORD_RETENTION",
        fmt(
            "%s acknowledged record(s) at offsets %s-%s lie below the log start offset %s: %s, not lost.",
            "n",
            "first",
            "last",
            "log_start_offset",
            below_start_cause(F.col("first")),
        ),
        producer_id="ack_producer_id",
        first_offset="first",
        last_offset="last",
        explained_by=F.lit("retention"),
    )
    held_by = ("cover.producer_id", "cover.producer_epoch", "cover.base_offset")
    missing = to_findings(
        ranges.where(F.col("_outcome") != "retention"),
        "ACKED_RECORD_MISSING",
        F.when(
            F.col("_outcome") == "absent",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s%s are not in the log although they are at or "
                "above the log start offset %s: acknowledged data was lost.",
                "n",
                "first",
                "last",
                "_who",
                "log_start_offset",
            ),
        )
        .when(
            F.col("_outcome") == "rewritten",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s%s are held by other records than the ledger's "
                "(another key or app sequence), in a batch of producer %s epoch %s at offset %s: the "
                "acknowledged data was overwritten.",
                "n",
                "first",
                "last",
                "_who",
                *held_by,
            ),
        )
        .otherwise(
            fmt(
                "%s acknowledged record(s) at offsets %s-%s%s are held by a batch of producer %s epoch %s "
                "at offset %s with other sequences: the acknowledged data was overwritten.",
                "n",
                "first",
                "last",
                "_who",
                *held_by,
            )
        ),
        producer_id="ack_producer_id",
        first_offset="first",
        last_offset="last",
        related_offset=F.when(F.col("_outcome") != "absent", F.col("cover.base_offset")),
        missing_records="n",
    )
    return retention.unionByName(missing)


def _app_identity(producer: Column, sequence: Column) -> Column:
    """An app producer and sequence as one comparable value (null unless both are known)."""
    known = producer.isNotNull() & sequence.isNotNull()
    return F.when(known, F.concat_ws("\u0001", producer, sequence.cast("long").cast("string")))


# What tells one ack from another at one offset.
_ACK_IDENTITY = ("at", "ack_producer_id", "ack_producer_epoch", "ack_sequence", "ack_key", "ack_app")


def _without(rows: DataFrame, other: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """`rows` but those equal to a row of `other` on `columns` (nulls equal)."""
    keys = other.select(*[F.col(c).alias(f"_w_{c}") for c in columns]).distinct()
    return rows.join(keys, [F.col(c).eqNullSafe(F.col(f"_w_{c}")) for c in columns], "left_anti")


def _rewritten(
    checked: DataFrame, records: DataFrame, acked: DataFrame, keys: bool, app: AppSequenceSpec | None
) -> DataFrame:
    """The acks `checked` found held (outcome ok) that name their record's key or app sequence, where the
    log's record at that offset has another: outcome "rewritten" (an unclean leader election's or an
    `acks=1` failover's signature: the offset was given again to another record).

    Keys are compared as the records' key bytes read as UTF-8, app sequences as the extractor reads
    them, each only in logs where some ack's value equals its record's: a ledger that writes keys
    another way (hex, base64, a number's text for a binary key) matches none and proves nothing. A
    record the input did not print (dump-log text without the data) proves nothing either; an offset
    holding no record (the cleaner removed it) is left to the batch-level check."""
    printed = (F.col("key").isNotNull() | (F.col("key_size") < 0)) & (
        F.col("value").isNotNull() | (F.col("value_size") < 0)
    )
    shown = (
        with_log_key(records).where(printed).join(F.broadcast(acked.select("log_key")), "log_key", "inner")
    )
    identities = []
    if keys:
        identities.append(("ack_key", F.col("key").cast("string")))
    if app is not None:
        sequence = F.trim(ordering.extract(app.sequence))
        identities.append(("ack_app", _app_identity(ordering.extract(app.producer), sequence)))
    found = []
    for column, identity in identities:
        held = shown.select("log_key", F.col("offset").alias("at"), identity.alias(column))
        named = checked.where((F.col("_outcome") == "ok") & F.col(column).isNotNull())
        same = named.join(held, ["log_key", "at", column], "left_semi").select("log_key").distinct()
        found.append(
            named.join(F.broadcast(same), "log_key", "left_semi")
            .join(held.select("log_key", "at"), ["log_key", "at"], "left_semi")
            .join(held, ["log_key", "at", column], "left_anti")
        )
    # An ack both of whose values differ is one ack.
    rewritten = found[0] if len(found) == 1 else found[0].unionByName(found[1]).distinct()
    return rewritten.withColumn("_outcome", F.lit("rewritten"))
