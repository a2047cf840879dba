"""App-sequence rules (contract §1 `--app-producer`/`--app-sequence`).

With `producer_id = -1` the broker checks nothing (§5.1); an application that stamps its own
producer name and sequence into each record lets the audit see what the broker could not: the
Sarama #2619 reordering (1,2,5,6,3,4,7 is one regression, at 3), duplicates, and holes. An
idempotent producer's log is gap-free in broker sequences even where librdkafka dropped timed-out
messages before sending them (#2163, PR #2188): its app sequences are read for those holes only.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import fmt, to_findings, union_by_name
from audit_rules.logs import compaction_may_have_removed, compaction_room, with_log_key
from audit_rules.profile import AppSequenceSpec
from audit_rules.replay import SEQUENCE_MODULUS


def extract(spec: str) -> Column:
    """The value named by `header:NAME` (a record header, UTF-8) or `json:FIELD` (a top-level field of a JSON
    value)."""
    source, _, name = AppSequenceSpec.check(spec).partition(":")
    if source == "header":
        at = F.array_position(F.col("header_keys"), name)
        return F.when(at > 0, F.element_at(F.col("header_values"), at.cast("int")).cast("string"))
    escaped = name.replace("'", "\\'")
    return F.get_json_object(F.col("value").cast("string"), f"$['{escaped}']")


def app_sequences(records: DataFrame, spec: AppSequenceSpec, *, all_producers: bool = False) -> DataFrame:
    """Records of producers without idempotence (contract §1: producer id -1, so no sequence of the
    broker's; an idempotent or transactional producer's records are the replay's), or with
    `all_producers` every record, with `app_producer` and `app_sequence` (long) where both could be
    read. A value that is no whole number, or does not fit a long, is not an app sequence (a null:
    `try_cast`, whatever `spark.sql.ansi.enabled` says; a cast failed the audit under Spark 4's ANSI
    default). A whole number written with a zero fraction, as JSON writers write a float (`3.0`:
    Python's `json.dumps`, Jackson), is that number."""
    whole = F.regexp_replace(F.trim(extract(spec.sequence)), r"^([+-]?[0-9]+)\.0+$", "$1")
    kept = records if all_producers else records.where(F.col("sequence") < 0)
    r = with_log_key(kept).select(
        "*",
        extract(spec.producer).alias("app_producer"),
        whole.try_cast("long").alias("app_sequence"),
    )
    return r.where(F.col("app_producer").isNotNull() & F.col("app_sequence").isNotNull())


def app_sequence_rules(
    records: DataFrame,
    spec: AppSequenceSpec,
    rotted: DataFrame | None = None,
    logs: DataFrame | None = None,
    batches: DataFrame | None = None,
) -> DataFrame:
    """DUPLICATE_APP_SEQUENCE, APP_SEQUENCE_REGRESSION and APP_SEQUENCE_GAP per (log, app producer) in offset
    order; for a counter that numbers a producer's records across a topic's partitions
    (`app_sequence_scopes`), duplicates across partitions and holes over the whole topic as well.
    Given the `batches` (their producers), also an idempotent or transactional producer's holes that
    its broker sequences show the client never sent (`client_timeout_holes`); nothing else of theirs.

    The records of a batch whose CRC failed (`rotted`: its `dump_id`, `replica`, `file` and
    `batch_position`) take no part, as such a batch takes none in the replay: rotted bytes could read
    as any app sequence (a duplicate or a regression that is the corruption's). Their values are then
    absent: a hole (a warning) beside the batch's CRC_MISMATCH, which cannot be told from loss.

    On a compacted log (`logs`: `log_bounds`, its `cleaned_to`) the cleaner removes every record but
    the last of each key below the active segment, so values missing there are the cleaner's, not a
    hole (kafka-formats-and-rules §5.9, as `SEQUENCE_GAP`): a hole of a counter per partition is no
    APP_SEQUENCE_GAP where the cleaner may have reached past the value before it
    (`compaction_may_have_removed`) and the offsets between the two could have held the missing
    values (`compaction_room`: one record per offset); a hole of a topic-wide counter, where any of the
    topic's logs in that dump is compacted (its missing values could have been in any partition)."""
    if rotted is not None:
        keys = ("dump_id", "replica", "file", "batch_position")
        bad = rotted.select(*[F.col(k).alias(f"_r_{k}") for k in keys])
        records = records.join(
            F.broadcast(bad), [F.col(k).eqNullSafe(F.col(f"_r_{k}")) for k in keys], "left_anti"
        )
    r = app_sequences(records, spec)
    # The compacted logs: a few rows, or none.
    compacted = None if logs is None else logs.where(F.col("cleaned_to").isNotNull())
    order = Window.partitionBy("log_key", "app_producer").orderBy("offset")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    same = Window.partitionBy("log_key", "app_producer", "app_sequence").orderBy("offset")
    r = r.withColumn("_copy", F.row_number().over(same)).withColumn(
        "_first_offset", F.first("offset").over(same)
    )
    # The record before, copies left out: in 1,2,3,5,6,3,4,7 the second 3 is a duplicate, and the 4
    # after it went back from 6 (it was compared with the copy, and the reordering was missed).
    first_copy = F.col("_copy") == 1
    r = r.withColumns(
        {
            "_prev": F.last(F.when(first_copy, F.col("app_sequence")), ignorenulls=True).over(before),
            "_prev_offset": F.last(F.when(first_copy, F.col("offset")), ignorenulls=True).over(before),
        }
    )
    duplicate = to_findings(
        r.where(F.col("_copy") > 1),
        "DUPLICATE_APP_SEQUENCE",
        fmt(
            "App producer %s wrote sequence %s again at offset %s (first at offset %s): the record is "
            "duplicated.",
            "app_producer",
            "app_sequence",
            "offset",
            "_first_offset",
        ),
        first_offset="offset",
        last_offset="offset",
        related_offset="_first_offset",
        evidence=F.col("app_producer"),
    )
    # Each log's first record of each value, and what each app producer's counter numbers.
    values = r.where(F.col("_copy") == 1).select(
        "log_key",
        "dump_id",
        "replica",
        "topic",
        "partition",
        "app_producer",
        "app_sequence",
        "offset",
        "timestamp",
    )
    per_partition: DataFrame | None = values
    topic_wide: DataFrame | None = None
    if spec.scope != "partition":
        held = values_by_partition(values)
        topic_wide = first_by_value(held)
        if spec.scope == "auto":
            # One row per (dump, topic, app producer): as many as the application has producers, which
            # may be one per client instance; Spark broadcasts it when it is small, not by force.
            across = app_sequence_scopes(held, topic_wide)
            per_partition = values.join(across.where(~F.col("_across")), PRODUCER_IN_TOPIC, "left_semi")
            topic_wide = topic_wide.join(across.where(F.col("_across")), PRODUCER_IN_TOPIC, "left_semi")
        else:
            per_partition = None
    candidates = r.where((F.col("_copy") == 1) & (F.col("app_sequence") < F.col("_prev")))
    frames = [duplicate]
    if topic_wide is not None:
        copies = cross_partition_copies(values, topic_wide)
        frames += [_copy_findings(copies), _topic_holes(topic_wide, compacted)]
        # A value below its predecessor that a topic-wide counter had already sent to another partition
        # is that value again (a duplicate), not the log going back.
        key = ["log_key", "app_producer", "app_sequence"]
        candidates = candidates.join(copies.select(*key), key, "left_anti")
    if per_partition is not None:
        frames.append(_partition_holes(per_partition, compacted, records))
    if batches is not None and spec.scope != "topic":
        frames.append(client_timeout_holes(records, spec, batches))
    regression = to_findings(
        candidates,
        "APP_SEQUENCE_REGRESSION",
        fmt(
            "App producer %s went back from sequence %s (offset %s) to %s at offset %s: records were "
            "written out of "
            "order (the Sarama #2619 retry signature).",
            "app_producer",
            "_prev",
            "_prev_offset",
            "app_sequence",
            "offset",
        ),
        first_offset="offset",
        last_offset="offset",
        related_offset="_prev_offset",
        evidence=F.col("app_producer"),
    )
    frames.append(regression)
    return union_by_name(frames)


# One app producer in one topic of one dump: what a topic-wide counter numbers.
PRODUCER_IN_TOPIC = ["dump_id", "topic", "app_producer"]
# `auto` takes a producer's counter for topic-wide when its values fill at most this share of each
# partition's span (lowest to highest value there) ...
TOPIC_WIDE_DENSITY = 0.75
# ... and at most this share of its distinct values are in two partitions or more: a counter per
# partition fills each partition's span and repeats its values in every partition it writes to; a
# topic-wide counter deals its values out, each to one partition.
TOPIC_WIDE_REPEATS = 0.1


def values_by_partition(values: DataFrame) -> DataFrame:
    """One row per (dump, topic, app producer, partition, value) whatever the replicas: `_first`, the
    lowest (offset, replica) holding it, with that record's timestamp."""
    return values.groupBy(*PRODUCER_IN_TOPIC, "partition", "app_sequence").agg(
        F.min(F.struct("offset", "replica", "timestamp")).alias("_first")
    )


def first_by_value(held: DataFrame) -> DataFrame:
    """One row per (dump, topic, app producer, value): `_parts`, how many partitions hold it, and `_at`
    (timestamp, partition, offset, replica), its first place: the earliest written (offsets of two
    partitions do not compare in time; the records' timestamps, the producer's clock, do), then the
    lowest partition, offset and replica."""
    at = F.struct(
        F.col("_first.timestamp").alias("timestamp"),
        "partition",
        F.col("_first.offset").alias("offset"),
        F.col("_first.replica").alias("replica"),
    )
    return held.groupBy(*PRODUCER_IN_TOPIC, "app_sequence").agg(
        F.count(F.lit(1)).alias("_parts"), F.min(at).alias("_at")
    )


def app_sequence_scopes(held: DataFrame, firsts: DataFrame) -> DataFrame:
    """Per (dump, topic, app producer), for scope `auto`: `_across`, whether its sequence numbers its
    records across the topic's partitions (as scope `topic`) rather than within each partition (as
    `partition`), decided from the values: across when the producer wrote to two partitions or more,
    its values fill at most `TOPIC_WIDE_DENSITY` of the partitions' spans and at most
    `TOPIC_WIDE_REPEATS` of them are in two partitions. Within one partition the two readings agree.
    """
    spans = (
        held.groupBy(*PRODUCER_IN_TOPIC, "partition")
        .agg(
            (F.max("app_sequence") - F.min("app_sequence") + 1).alias("_span"),
            F.count(F.lit(1)).alias("_held"),
        )
        .groupBy(*PRODUCER_IN_TOPIC)
        .agg(
            F.count(F.lit(1)).alias("_partitions"),
            F.sum("_span").alias("_span"),
            F.sum("_held").alias("_held"),
        )
    )
    distinct = firsts.groupBy(*PRODUCER_IN_TOPIC).agg(F.count(F.lit(1)).alias("_distinct"))
    sparse = F.col("_held") <= F.lit(TOPIC_WIDE_DENSITY) * F.col("_span")
    dealt = F.col("_held") - F.col("_distinct") <= F.lit(TOPIC_WIDE_REPEATS) * F.col("_distinct")
    across = (F.col("_partitions") >= 2) & sparse & dealt
    return spans.join(distinct, PRODUCER_IN_TOPIC).select(*PRODUCER_IN_TOPIC, across.alias("_across"))


def cross_partition_copies(values: DataFrame, topic_wide: DataFrame) -> DataFrame:
    """The `values` rows (each log's first record of a value) of a topic-wide counter that repeat a value
    first written to another partition (`_at`: that first place)."""
    return values.join(
        topic_wide.where(F.col("_parts") > 1).select(*PRODUCER_IN_TOPIC, "app_sequence", "_at"),
        [*PRODUCER_IN_TOPIC, "app_sequence"],
    ).where(F.col("partition") != F.col("_at.partition"))


def _copy_findings(copies: DataFrame) -> DataFrame:
    """DUPLICATE_APP_SEQUENCE for each `cross_partition_copies` row."""
    return to_findings(
        copies,
        "DUPLICATE_APP_SEQUENCE",
        fmt(
            "App producer %s wrote sequence %s again in partition %s at offset %s (first in partition %s "
            "at offset %s; its sequence numbers the topic's records across partitions): the record is "
            "duplicated.",
            "app_producer",
            "app_sequence",
            "partition",
            "offset",
            "_at.partition",
            "_at.offset",
        ),
        first_offset="offset",
        last_offset="offset",
        evidence=F.col("app_producer"),
    )


def free_record_offsets(records: DataFrame, compacted: DataFrame) -> DataFrame:
    """(log_key, offset, _free_before) for the offsets `records` hold in the `compacted` logs (`log_key`,
    `cleaned_to`), and a row at each one's `cleaned_to`: `_free_before`, the offsets below it that no
    record holds. Between two held offsets the difference of theirs counts the free ones: all the
    cleaner can have emptied (it drops records and keeps the offsets of those it keeps; a v2 batch keeps
    its range, so a removed record's offset is free of records, not of batches). One sort of those
    logs' records' offsets."""
    logs = F.broadcast(compacted.select("log_key", "cleaned_to"))
    held = (
        with_log_key(records)
        .join(logs.select("log_key"), "log_key", "left_semi")
        .select("log_key", "offset")
        .distinct()
        .withColumn("_held", F.lit(1))
    )
    rows = held.unionByName(
        logs.select("log_key", F.col("cleaned_to").alias("offset"), F.lit(0).alias("_held"))
    )
    below = Window.partitionBy("log_key").orderBy("offset").rangeBetween(Window.unboundedPreceding, -1)
    free = F.col("offset") - F.coalesce(F.sum("_held").over(below), F.lit(0))
    return rows.select("log_key", "offset", free.alias("_free_before")).distinct()


def _partition_holes(
    values: DataFrame, compacted: DataFrame | None, records: DataFrame | None = None
) -> DataFrame:
    """APP_SEQUENCE_GAP per (log, app producer) for a counter per partition: each run of values between
    the producer's lowest and highest in the log that the log does not hold, but where the cleaner of
    a `compacted` log (`log_key`, `cleaned_to`) may have removed them: where offsets between the two
    records that no record holds (of `records`: `free_record_offsets`, read only for the compacted logs
    with a hole) could have held them."""
    by_value = Window.partitionBy("log_key", "app_producer").orderBy("app_sequence")
    holes = (
        values.withColumn("_below", F.lag("app_sequence").over(by_value))
        .withColumn("_below_offset", F.lag("offset").over(by_value))
        .where(F.col("app_sequence") > F.col("_below") + 1)
        .withColumn("_missing", F.col("app_sequence") - F.col("_below") - 1)
    )
    if compacted is not None:
        cleaned = F.broadcast(compacted.select("log_key", "cleaned_to"))
        # The offsets free for the missing values: those between the two records below what the cleaner
        # may have reached (not the active segment, where other producers' records are no room, unless it
        # shows a leader's cleaner: `log_bounds`, `cleaned_to`). A
        # value below its predecessor's offset (the log went back) leaves the room unknown.
        first = F.least("offset", "_below_offset")
        offsets = F.least(F.col("offset"), F.col("cleaned_to")) - F.col("_below_offset") - 1
        holes = holes.join(cleaned, "log_key", "left")
        if records is not None:
            holed = compacted.join(holes.select("log_key").distinct(), "log_key", "left_semi")
            free = free_record_offsets(records, holed)
            # Less the offsets other records hold between the two (other producers' on a shared log):
            # the counts at the record before the hole and at the one after it (or at `cleaned_to`).
            holes = holes.withColumn("_free_key", F.least(F.col("offset"), F.col("cleaned_to")))
            holes = holes.join(
                free.select(
                    "log_key", F.col("offset").alias("_free_key"), F.col("_free_before").alias("_f_at")
                ),
                ["log_key", "_free_key"],
                "left",
            ).join(
                free.select(
                    "log_key", F.col("offset").alias("_below_offset"), F.col("_free_before").alias("_f_below")
                ),
                ["log_key", "_below_offset"],
                "left",
            )
            offsets = F.least(offsets, F.coalesce(F.col("_f_at") - F.col("_f_below"), offsets))
        room = (F.col("_below_offset") > F.col("offset")) | compaction_room(offsets, F.col("_missing"))
        holes = holes.where(~(compaction_may_have_removed(first) & room)).drop(
            "cleaned_to", "_free_key", "_f_at", "_f_below"
        )
    message = fmt(
        "App producer %s never wrote sequences %s-%s (%s value(s)) although %s (offset %s) and %s "
        "(offset %s) are in the log: records the client never sent, or lost.",
        "app_producer",
        F.col("_below") + 1,
        F.col("app_sequence") - 1,
        "_missing",
        "_below",
        "_below_offset",
        "app_sequence",
        "offset",
    )
    return _gaps(holes, message, F.col("_below_offset"))


def _gaps(holes: DataFrame, message: Column, related_offset: Column, **fields: Column | str) -> DataFrame:
    """APP_SEQUENCE_GAP per hole row (`offset`: the record after the hole, `_missing` its length)."""
    return to_findings(
        holes,
        "APP_SEQUENCE_GAP",
        message,
        first_offset="offset",
        last_offset="offset",
        related_offset=related_offset,
        missing_records="_missing",
        evidence=F.col("app_producer"),
        **fields,
    )


def client_timeout_holes(records: DataFrame, spec: AppSequenceSpec, batches: DataFrame) -> DataFrame:
    """APP_SEQUENCE_GAP (`explained_by` client_timeout) per (log, app producer) for a counter per
    partition: each run of values that no record of the log holds (any producer's, aborted ones too:
    they are in the log) where the records on either side (each value's first) are an idempotent or
    transactional producer's, of one producer id and epoch (their batches, of `batches`), at adjacent
    broker sequences (the records' `sequence`, baseSequence + offsetDelta; after 2147483647 comes 0).
    That producer sent nothing between the two, so the client dropped those values before sending them
    (librdkafka #2163, PR #2188: timed-out messages are skipped "as if they had never existed").

    Holes whose broker sequences jump are the sequence rules' (`SEQUENCE_GAP` and its kin), and
    duplicates and regressions of these producers the replay's (`DUPLICATE_BATCH`,
    `SEQUENCE_REGRESSION`): none here. A topic-wide counter (scope `topic`, or `auto` reading it so)
    has none either: one partition's broker sequences say nothing of the values sent to the others."""
    r = app_sequences(records, spec, all_producers=True)
    first = F.min(F.struct("offset", "sequence", "timestamp", "file", "batch_position")).alias("_first")
    values = (
        r.groupBy("log_key", "dump_id", "replica", "topic", "partition", "app_producer", "app_sequence")
        .agg(first)
        .select(
            "*",
            *[
                F.col(f"_first.{c}").alias(c)
                for c in ("offset", "sequence", "timestamp", "file", "batch_position")
            ],
        )
        .drop("_first")
    )
    if spec.scope == "auto":
        held = values_by_partition(values)
        across = app_sequence_scopes(held, first_by_value(held))
        values = values.join(across.where(~F.col("_across")), PRODUCER_IN_TOPIC, "left_semi")
    by_value = Window.partitionBy("log_key", "app_producer").orderBy("app_sequence")
    below = F.struct("app_sequence", "offset", "sequence", "file", "batch_position")
    after = (F.col("_below.sequence").cast("long") + 1) % SEQUENCE_MODULUS
    holes = (
        values.withColumn("_below", F.lag(below).over(by_value))
        .where(
            (F.col("app_sequence") > F.col("_below.app_sequence") + 1)
            & (F.col("_below.sequence") >= 0)
            & (F.col("sequence").cast("long") == after)
        )
        .withColumn("_missing", F.col("app_sequence") - F.col("_below.app_sequence") - 1)
    )
    # Only the batches holding a hole's two records (holes are few): a semi-join against them, broadcast,
    # instead of two shuffles of every batch.
    ends = (
        holes.select("file", F.col("batch_position").alias("position"))
        .unionByName(
            holes.select(F.col("_below.file").alias("file"), F.col("_below.batch_position").alias("position"))
        )
        .distinct()
    )
    producers = (
        batches.where(F.col("producer_id") >= 0)
        .select("dump_id", "replica", "file", "position", "producer_id", "producer_epoch")
        .join(F.broadcast(ends), ["file", "position"], "left_semi")
    )

    def producer_of(df: DataFrame, prefix: str, file: str, position: str) -> DataFrame:
        """`df` with the producer id and epoch of the batch at (`file`, `position`) of its log."""
        p = producers.select(*[F.col(c).alias(f"{prefix}{c}") for c in producers.columns])
        on = [
            F.col("dump_id") == F.col(f"{prefix}dump_id"),
            F.col("replica").eqNullSafe(F.col(f"{prefix}replica")),
            F.col(file) == F.col(f"{prefix}file"),
            F.col(position) == F.col(f"{prefix}position"),
        ]
        return df.join(p, on).drop(*[f"{prefix}{c}" for c in ("dump_id", "replica", "file", "position")])

    holes = producer_of(holes, "_b_", "file", "batch_position")
    holes = producer_of(holes, "_a_", "_below.file", "_below.batch_position").where(
        (F.col("_a_producer_id") == F.col("_b_producer_id"))
        & (F.col("_a_producer_epoch") == F.col("_b_producer_epoch"))
    )
    message = fmt(
        "App producer %s never wrote sequences %s-%s (%s value(s)) to this partition although %s (offset "
        "%s) and %s (offset %s) are in the log, and producer %s epoch %s's broker sequences are contiguous "
        "across the hole (%s, then %s): the client never sent those values (librdkafka #2163: timed-out "
        "messages dropped before sending), nothing the broker lost.",
        "app_producer",
        F.col("_below.app_sequence") + 1,
        F.col("app_sequence") - 1,
        "_missing",
        "_below.app_sequence",
        "_below.offset",
        "app_sequence",
        "offset",
        "_b_producer_id",
        "_b_producer_epoch",
        "_below.sequence",
        "sequence",
    )
    return _gaps(
        holes,
        message,
        F.col("_below.offset"),
        producer_id="_b_producer_id",
        producer_epoch="_b_producer_epoch",
        explained_by=F.lit("client_timeout"),
    )


def _topic_holes(topic_wide: DataFrame, compacted: DataFrame | None) -> DataFrame:
    """APP_SEQUENCE_GAP per (dump, topic, app producer) for a topic-wide counter: each run of values
    between its lowest and highest that no dumped partition of the topic holds (the dump does not say
    how many partitions the topic has: the message says a partition not dumped may hold them), reported
    at the first record
    of the value after it (`related_offset`: the value before it, when in the same partition); none
    where a log of the topic in that dump is `compacted` (the cleaner may have removed them there)."""
    if compacted is not None:
        cleaned = compacted.select("dump_id", "topic").distinct()
        topic_wide = topic_wide.join(F.broadcast(cleaned), ["dump_id", "topic"], "left_anti")
    by_value = Window.partitionBy(*PRODUCER_IN_TOPIC).orderBy("app_sequence")
    holes = (
        topic_wide.withColumn("_below", F.lag("app_sequence").over(by_value))
        .withColumn("_below_at", F.lag("_at").over(by_value))
        .where(F.col("app_sequence") > F.col("_below") + 1)
        .select(
            "*",
            (F.col("app_sequence") - F.col("_below") - 1).alias("_missing"),
            F.col("_at.replica").alias("replica"),
            F.col("_at.partition").alias("partition"),
            F.col("_at.offset").alias("offset"),
        )
    )
    same_partition = F.col("_below_at.partition") == F.col("partition")
    message = fmt(
        "App producer %s wrote sequences %s-%s (%s value(s)) to none of the topic's dumped partitions, "
        "although %s (partition %s, offset %s) and %s (partition %s, offset %s) are in the log (its "
        "sequence numbers the topic's records across partitions): records the client never sent, or "
        "lost, unless a partition of the topic that is not in the dump holds them.",
        "app_producer",
        F.col("_below") + 1,
        F.col("app_sequence") - 1,
        "_missing",
        "_below",
        "_below_at.partition",
        "_below_at.offset",
        "app_sequence",
        "partition",
        "offset",
    )
    return _gaps(holes, message, F.when(same_partition, F.col("_below_at.offset")))
