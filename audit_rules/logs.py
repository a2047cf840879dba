"""Per-log context the rules need: log start and end, high watermark, capture time, compaction.

A log is one `(dump_id, replica, topic, partition)`. The log start offset is what the broker uses on
load (`LogLoader`): the larger of the log-start-offset checkpoint and the first live segment's base
offset (kafka-formats-and-rules §3.6, §5.7); it separates retention (below) from loss (at or above).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import fmt, to_findings, union_by_name
from audit_rules.profile import Profile
from schemas.tables import LOG_KEY

# How a rule stores a frame that several of its findings read (`pipeline.local_checkpoint`, which
# names what it stores), or leaves each reader to compute it again (`as_is`).
Store = Callable[[DataFrame, str], DataFrame]


def as_is(df: DataFrame, name: str) -> DataFrame:
    """The `Store` that stores nothing."""
    return df


# What makes logs the same partition, for the rules that compare logs (replicas, dumps over time,
# acks): its topic, partition and topic incarnation (`log_bounds`).
PARTITION_OF_LOG = ("topic", "partition", "incarnation")


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


# Internal topics only the brokers' coordinators write (a client's produce to them is refused). The
# broker checks no sequence on a coordinator's append (`AppendOrigin.COORDINATOR`: offset commits
# "do not have sequence numbers and therefore only producer epoch validation is done",
# `ProducerAppendInfo`), yet a transactional offset commit carries its producer's id and epoch.
COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def sequenced() -> Column:
    """Whether the broker checked the sequences of a row's log (column `coordinator_written` of
    `log_bounds`): the sequence rules read only those logs; epochs and transactions are checked on all."""
    return ~F.coalesce(F.col("coordinator_written"), F.lit(False))


def compaction_may_have_removed(after: Column) -> Column:
    """Whether compaction may have removed batches that followed offset `after` in a row's log (column
    `cleaned_to` of `log_bounds`): the profile names the topic as compacted (`compacted_topics`), the
    dump's cleaner-offset-checkpoint lists the log, or its batches show the cleaner's work, and `after`
    lies below what the cleaner may have reached: not this broker's active segment, unless that segment
    shows a leader's cleaner in what this replica fetched (kafka-formats-and-rules §3.6, §5.9). The
    cleaner removes whole batches (keeping each live producer's last one), so sequences skipped there
    are not loss. Never null."""
    return F.coalesce(F.col("cleaned_to") > after, F.lit(False))


def compaction_room(offsets: Column, records: Column) -> Column:
    """Whether `offsets` offsets (those between two retained batches) could have held `records` records
    the cleaner removed: it removes whole batches and keeps the offsets of every batch it keeps, so what
    it removed left a hole of at least as many offsets (kafka-formats-and-rules §5.9). Sequences skipped
    where no offset is free were never in this log: the compaction excuse does not hold. The rules count
    the offsets from the previous batch's base offset (the history keeps no last offset of it): a bound,
    too high by that batch's records but for its first (`sequence_gaps` narrows it to the offsets no
    batch holds, `free_offsets`). True where either is unknown."""
    return F.coalesce(offsets >= records, F.lit(True))


def free_offsets(batches: DataFrame, logs: DataFrame) -> DataFrame:
    """(log_id, base_offset, free_before) for the batches of the logs compaction may have touched
    (`cleaned_to` set): `free_before` is the batch's base offset less the offsets the log's readable
    batches below it hold (each its whole range: the cleaner keeps a v2 batch's offsets when it drops
    some of its records, `MemoryRecords.filterTo`). Between two batches of a log, the difference of
    theirs counts the offsets no readable batch holds: all the cleaner can have emptied. Offsets
    other producers' retained batches hold between two batches of one producer never held its
    removed batches (`compaction_room` counted them as room: a gap on a topic with several producers
    was always excused). Batches that overlap (two copies of one range, OFFSET_OVERLAP) hold their
    offsets once. One sort of those logs' batches, of the logs whose sequences the broker checked
    (`sequenced`: the sequence rules read no other); none where no such log is compacted. And a row at
    each such log's `cleaned_to`: the free offsets below it are all the cleaner can have emptied."""
    compacted = logs.where(F.col("cleaned_to").isNotNull() & sequenced())
    # v2 batches only: a legacy wrapper the cleaner rewrote holds only the offsets it kept.
    rows = with_log_id(
        batches.where(F.col("crc_valid") & (F.col("magic") == 2)), "base_offset", "last_offset"
    )
    rows = rows.select("log_id", "base_offset", "last_offset")
    rows = rows.join(F.broadcast(compacted.select("log_id")), "log_id", "left_semi").unionByName(
        # A row at `cleaned_to` holding nothing: its count is that of the offsets free below what the
        # cleaner may have reached (`sequence_gaps` reads it where a batch lies past that).
        compacted.select(
            "log_id",
            F.col("cleaned_to").alias("base_offset"),
            (F.col("cleaned_to") - 1).alias("last_offset"),
        )
    )
    # Each batch adds the offsets of its range past the highest any batch before it reached (the union
    # of the ranges), then every batch with a lower base offset counts (a range frame: batches at one
    # offset all count the same).
    order = Window.partitionBy("log_id").orderBy("base_offset", "last_offset")
    reached = F.max("last_offset").over(order.rowsBetween(Window.unboundedPreceding, -1))
    start = F.greatest(F.col("base_offset"), F.coalesce(reached + 1, F.col("base_offset")))
    added = rows.withColumn("_added", F.greatest(F.col("last_offset") - start + 1, F.lit(0)))
    below = Window.partitionBy("log_id").orderBy("base_offset").rangeBetween(Window.unboundedPreceding, -1)
    held = F.coalesce(F.sum("_added").over(below), F.lit(0))
    return added.select(
        "log_id", "base_offset", (F.col("base_offset") - held).alias("free_before")
    ).distinct()


def with_free_before(rows: DataFrame, free: DataFrame, columns: list[str], where: Column) -> DataFrame:
    """`rows` with `free_offsets`' `free_before` at the offset each of `columns` holds (an offset of the
    row's log), as `_free_<column>`: null where no readable v2 batch (nor `cleaned_to`) is there. The
    counts are looked up only for the rows `where` holds: one semi-join picks them out of every batch's
    (no shuffle of them all per column). The difference of two counts is the offsets no batch holds
    from the lower one up to the higher; one alone counts those below it from offset 0."""
    picked = rows.where(where)
    ends = union_by_name([picked.select("log_id", F.col(c).alias("base_offset")) for c in columns])
    free = free.join(ends, ["log_id", "base_offset"], "left_semi")
    for c in columns:
        rows = rows.join(
            free.select("log_id", F.col("base_offset").alias(c), F.col("free_before").alias(f"_free_{c}")),
            ["log_id", c],
            "left",
        )
    return rows


def compaction_evidence() -> Column:
    """What says a row's log is compacted, for a message: the profile, the cleaner's work in its batches,
    or the cleaner's checkpoint."""
    return (
        F.when(
            F.coalesce(F.col("compacted"), F.lit(False)),
            F.format_string(
                "its topic is in compacted_topics: the log cleaner compacts it below offset %s",
                F.col("cleaned_to").cast("string"),
            ),
        )
        .when(
            F.col("compaction_source") == "batches",
            F.format_string(
                "its batches show the log cleaner's work (one holds fewer records than its offsets): the "
                "cleaner compacts it below offset %s",
                F.col("cleaned_to").cast("string"),
            ),
        )
        .when(
            F.col("compaction_source") == "holes",
            F.format_string(
                "offsets are free between the batches of a segment (a broker gives every record the next "
                "offset; only the log cleaner removes batches, this broker's or, in what it fetched as a "
                "follower, its leader's): the cleaner compacts it below offset %s",
                F.col("cleaned_to").cast("string"),
            ),
        )
        .otherwise(
            F.format_string(
                "the cleaner-offset-checkpoint lists it: the log cleaner compacts it below offset %s",
                F.col("cleaned_to").cast("string"),
            )
        )
    )


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


# What the batches tell of their log, per segment file: aggregated again per log by `log_bounds`.
_BATCH_FACTS = {
    "first_batch_offset": F.min,
    "log_end_offset": F.max,
    "max_timestamp": F.max,
    # The newest data batch's (not a marker's): the producers' clocks, where markers carry the
    # coordinator's (`transactions.hanging_transactions`).
    "max_data_timestamp": F.max,
    "batches": F.sum,
    "records": F.sum,
    "bytes": F.sum,
    # 1 where a v2 batch holds fewer records than its offsets span: only the log cleaner writes such a
    # batch (it keeps a batch's offsets and drops records; the broker refuses a producer's batch whose
    # count differs from its offsets, LogValidator), so the log is compacted even where no checkpoint
    # or profile says so (a partition directory copied without its log directory's checkpoints).
    "cleaned_batches": F.max,
    # The highest partition leader epoch of the v2 batches whose CRC holds: a partition's leader epochs
    # only rise, so a replica's later dump showing a lower one is of another topic of the same name.
    "max_leader_epoch": F.max,
    # The offsets the batches span (a marker one, a v2 batch its offset range), and 1 where a batch's
    # span cannot be trusted (a legacy entry, read shallow from dump-log text; a CRC-failed batch):
    # with `first_batch_offset` and `log_end_offset`, whether offsets are free between a file's batches
    # (`segment_files`, `holed_from`).
    "held_offsets": F.sum,
    "untrusted_spans": F.max,
    # Where a file's last batch ends (byte position): what follows to its size is zeros or quarantined
    # (`consistency.zeroed_tails`).
    "bytes_end": F.max,
}


def file_producers(batches: DataFrame) -> DataFrame:
    """One row per (log, file, producer id) of the batches: the batch facts of `segment_files` and the
    producer facts of `history.producer_summary`, from one pass over the batches.

    `producer_id` is null on the row of a file's batches that take no part in producer state (no
    producer id, an older magic, a corrupt header: `history.producer_batches`). A file holds far
    fewer producers than batches (1,000 producers over 5.5 million batches in the audit bench), so
    the result is small, and both summaries are aggregates of it.
    """
    from audit_rules.history import is_producer_batch

    producer = is_producer_batch()
    values = {
        "first_batch_offset": F.col("base_offset"),
        "log_end_offset": F.col("last_offset") + 1,
        # A corrupt batch's timestamp cannot be trusted.
        "max_timestamp": F.when(F.col("crc_valid"), F.col("max_timestamp")),
        "max_data_timestamp": F.when(F.col("crc_valid") & ~F.col("is_control"), F.col("max_timestamp")),
        "batches": F.lit(1),
        # A legacy (magic 0/1) entry's count is its messages: one, or a compressed wrapper's inner
        # messages (the binary decoders open every wrapper; a shallow dump-log text counts from the
        # previous entry's last offset).
        "records": F.col("count"),
        "bytes": F.col("size_bytes"),
        "cleaned_batches": F.when(
            (F.col("magic") >= 2)
            & F.col("crc_valid")
            & (F.col("count") < F.col("last_offset") - F.col("base_offset") + 1),
            F.lit(1),
        ),
        "max_leader_epoch": F.when(
            (F.col("magic") >= 2) & F.col("crc_valid") & (F.col("partition_leader_epoch") >= 0),
            F.col("partition_leader_epoch"),
        ),
        "held_offsets": F.col("last_offset") - F.col("base_offset") + 1,
        "bytes_end": F.col("position") + F.col("size_bytes"),
        "untrusted_spans": F.when(
            (F.coalesce(F.col("magic"), F.lit(0)) < 2) | ~F.coalesce(F.col("crc_valid"), F.lit(False)),
            F.lit(1),
        ),
    }
    data = ~F.col("is_control")
    marker = F.col("is_control")
    per_producer = {
        "retained_first_offset": F.min(F.col("base_offset")),
        "retained_last_offset": F.max(F.col("last_offset")),
        "producer_timestamp": F.max(F.when(F.col("crc_valid"), F.col("max_timestamp"))),
        "producer_data_timestamp": F.max(F.when(F.col("crc_valid") & data, F.col("max_timestamp"))),
        "last_marker": F.max(F.when(marker, F.col("base_offset"))),
        "last_transactional_data": F.max(F.when(F.col("is_transactional") & data, F.col("base_offset"))),
        # Its last data batch (a corrupt one too: the broker appended it) and the highest epochs of its
        # data batches and markers whose CRC holds (a corrupt header's epoch cannot be trusted). Epochs
        # never fall in what the broker appended, so the highest is the last one's.
        "last_data": F.max(F.when(data, F.col("base_offset"))),
        "data_epoch": F.max(F.when(data & F.col("crc_valid"), F.col("producer_epoch"))),
        "marker_epoch": F.max(F.when(marker & F.col("crc_valid"), F.col("producer_epoch"))),
    }
    return batches.groupBy(*LOG_KEY, "file", F.when(producer, F.col("producer_id")).alias("producer_id")).agg(
        *[agg(values[name].cast("long")).alias(name) for name, agg in _BATCH_FACTS.items()],
        *[agg.alias(name) for name, agg in per_producer.items()],
    )


def segment_files(facts: DataFrame) -> DataFrame:
    """One row per (log, file) of the batches with the batch facts `log_bounds` needs (from
    `file_producers`), a `file_order` numbering the files in (log, file) order (the offset overlap's
    sort key), `holed_from`: the file's first batch offset where offsets are free between its
    batches, else null, and `holed_to` and `trimmed_to`: the file's end where offsets are free between
    its batches, or where one of them is trimmed (`cleaned_batches`).

    A broker gives every record and marker the next offset, so offsets free between two batches of one
    segment were taken by batches the log cleaner removed (it keeps the offsets of the batches it keeps,
    formats §5.9): the log is compacted, even where no checkpoint or profile says so and every batch the
    cleaner kept is whole (one record a batch). Only v2 batches whose CRC holds are counted (a legacy
    entry read shallow from dump-log text spans unknown offsets; a failed batch's span is untrusted);
    overlapping batches (OFFSET_OVERLAP) can only hide a hole."""
    per_file = facts.groupBy(*LOG_KEY, "file").agg(
        *[agg(name).cast("long").alias(name) for name, agg in _BATCH_FACTS.items()]
    )
    holed = F.col("untrusted_spans").isNull() & (
        F.col("log_end_offset") - F.col("first_batch_offset") > F.col("held_offsets")
    )
    # Files are few (one row per segment): one task numbers them.
    order = Window.orderBy(log_key(), F.col("file"))
    return per_file.withColumns(
        {
            "file_order": F.row_number().over(order).cast("int"),
            "holed_from": F.when(holed, F.col("first_batch_offset")),
            "holed_to": F.when(holed, F.col("log_end_offset")),
            "trimmed_to": F.when(F.col("cleaned_batches").isNotNull(), F.col("log_end_offset")),
        }
    )


def offset_holes(batches: DataFrame, segments: DataFrame, logs: DataFrame) -> DataFrame:
    """OFFSET_HOLE (warning, an addition beside the contract) per log whose compaction rests on free
    offsets alone (`compaction_source` "holes": the profile does not name its topic, the
    cleaner-offset-checkpoint has no entry for it, no batch is trimmed): the runs of offsets that no
    batch holds between two batches of one of its segments (`segment_files`, `holed_from`).

    A broker gives every record the next offset, so batches were removed there: by the log cleaner, or
    lost. The rules take them for the cleaner's work (a compacted topic's partition directory copied
    alone, or a follower holding what its leader's cleaner left) and count no sequence missing across
    them as loss; on a topic whose cleanup.policy is delete that hides lost batches, so the assumption
    is a finding of its own, which naming the topic in `compacted_topics` settles. One per log: a
    compacted topic's log may hold thousands of runs."""
    assumed = logs.where(F.col("compaction_source") == "holes").select("log_key", *LOG_KEY)
    files = segments.where(F.col("holed_from").isNotNull()).select(log_key().alias("log_key"), "file")
    rows = batches.where(F.col("crc_valid") & (F.col("magic") == 2)).select(
        log_key().alias("log_key"), "file", "base_offset", "last_offset"
    )
    # Only the segments that show free offsets (few files: `segment_files` rows), sorted by offset.
    rows = rows.join(F.broadcast(files), ["log_key", "file"], "left_semi")
    order = Window.partitionBy("log_key", "file").orderBy("base_offset", "last_offset")
    reached = F.max("last_offset").over(order.rowsBetween(Window.unboundedPreceding, -1))
    runs = (
        rows.withColumn("_reached", reached)
        .where(F.col("base_offset") > F.col("_reached") + 1)
        .select("log_key", (F.col("_reached") + 1).alias("first"), (F.col("base_offset") - 1).alias("last"))
    )
    per_log = runs.groupBy("log_key").agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum(F.col("last") - F.col("first") + 1).alias("free"),
        F.min(F.struct("first", "last")).alias("_first"),
        F.max("last").alias("_last"),
    )
    found = per_log.join(F.broadcast(assumed), "log_key")
    return to_findings(
        found,
        "OFFSET_HOLE",
        fmt(
            "Offsets %s-%s hold no batch although batches of the same segment lie on both sides (%s run(s) "
            "of free offsets, %s offsets in all, up to offset %s), and nothing else says topic %s is "
            "compacted: it is not in compacted_topics, the cleaner-offset-checkpoint has no entry for the "
            "partition and no batch shows the cleaner's trimming. A broker gives every record the next "
            "offset, so batches were removed there; the audit took them for the log cleaner's work and "
            "counted no sequence missing across them as loss. If the topic's cleanup.policy is delete, "
            "batches were lost there; if it is compact, name it in compacted_topics (--config).",
            "_first.first",
            "_first.last",
            "runs",
            "free",
            "_last",
            "topic",
        ),
        first_offset="_first.first",
        last_offset="_last",
        missing_records="free",
        explained_by=F.lit("compaction"),
    )


def _epoch_incarnations(logs: DataFrame, topic_ids: Column) -> DataFrame:
    """`logs` with the incarnations of a partition whose logs name no topic id (brokers before 2.8,
    dump-log text) told apart by their leader epochs: a partition's leader epochs only rise, and so
    does the highest of a replica's batches (`max_leader_epoch`: a follower's carry its leaders'), so a
    replica's dump whose highest is below that replica's previous dump's (in capture time) holds a topic
    created again under its name. That dump and the later ones of the partition are another
    incarnation (`#1`, `#2`, ...; `""` before the first such fall, and for every dump of a partition
    where none falls). Replicas are compared with themselves: a follower behind its leader by an epoch
    is no fall. A topic created again on a cluster whose leaders never changed (epoch 0 both times)
    cannot be told so; a leader whose last epoch's batches were truncated, nothing written since, is
    taken for one."""
    # One replica's dumps of one time in epoch order: which came first is unknown, so no fall is read.
    own = Window.partitionBy("topic", "partition", "replica").orderBy(
        "capture_time_ms", "max_leader_epoch", "dump_id"
    )
    before = F.last("max_leader_epoch", ignorenulls=True).over(own.rowsBetween(Window.unboundedPreceding, -1))
    logs = logs.withColumn("_fall", F.coalesce(F.col("max_leader_epoch") < before, F.lit(False)).cast("int"))
    # Per dump (windows, not a join: no job of its own): its time, whether a replica fell, counted once.
    dump = Window.partitionBy("topic", "partition", "dump_id")
    logs = logs.withColumns(
        {
            "_t": F.max("capture_time_ms").over(dump),
            "_counted": F.when(
                F.row_number().over(dump.orderBy(F.col("replica").asc_nulls_first())) == 1,
                F.max("_fall").over(dump),
            ).otherwise(F.lit(0)),
        }
    )
    # The falls up to each dump (a range frame: every row of a dump counts its own).
    order = Window.partitionBy("topic", "partition").orderBy("_t", "dump_id")
    logs = logs.withColumns(
        {
            "_run": F.sum("_counted").over(order),
            "_runs": F.sum("_counted").over(Window.partitionBy("topic", "partition")),
            "_ids": F.size(topic_ids),
        }
    )
    by_epoch = F.coalesce(F.col("_ids") == 0, F.lit(False)) & F.coalesce(F.col("_runs") > 0, F.lit(False))
    return logs.withColumn(
        "incarnation",
        F.when(by_epoch & (F.col("_run") > 0), F.concat(F.lit("#"), F.col("_run").cast("string"))).otherwise(
            F.col("incarnation")
        ),
    ).drop("_fall", "_t", "_counted", "_ids", "_run", "_runs")


def log_bounds(
    segments: DataFrame,
    files: DataFrame,
    partition_state: DataFrame,
    profile: Profile,
    quarantine: DataFrame | None = None,
) -> DataFrame:
    """One row per log: log_start_offset (+ source), log_end_offset, high_watermark, capture time, counts
    (the producer count comes from the history: `pipeline.partition_summary`), its `topic_id` and
    `incarnation` (below), and its `log_id`.

    `segments` is `segment_files` of the batches. The facts of the tables are unioned and aggregated
    once per log: one shuffle, where a join per table would cost two each. `quarantine`: a log with a
    region no batch header could be read from (`UNREADABLE_KINDS`) may have batches there, so its
    free offsets do not show the cleaner.
    """
    nothing = F.lit(None)
    measures = {
        **_BATCH_FACTS,
        "first_segment_offset": F.min,
        "last_segment_offset": F.max,
        "mtime_ms": F.max,
        "captured_at_ms": F.max,
        "checkpoint_log_start": F.max,
        "high_watermark": F.max,
        "cleaner_offset": F.max,
        # The highest epoch of the log's leader-epoch-checkpoint: a replica elected leader writes its
        # epoch there before any batch of that epoch.
        "checkpoint_leader_epoch": F.max,
        "remote_trace": F.max,
        # The first offset of the log's first segment with offsets free between its batches, and the end
        # of its last such segment, or of its last segment holding a trimmed batch.
        "holed_from": F.min,
        "holed_to": F.max,
        "trimmed_to": F.max,
        # The first batch of the last segment whose batches begin past its base offset (below).
        "starts_late_to": F.max,
        "unreadable_regions": F.max,
    }

    def facts(df: DataFrame, topic_id: Column = nothing, **values: Column) -> DataFrame:
        return df.select(
            *LOG_KEY,
            *[values.get(name, nothing).cast("long").alias(name) for name in measures],
            topic_id.cast("string").alias("topic_id"),
        )

    evidence = ("holed_from", "holed_to", "trimmed_to")
    live_segment = (F.col("kind") == "log") & F.col("is_live") & F.col("topic").isNotNull()
    # A segment begins at the offset its first batch was appended at, but the cleaner writes a group of
    # segments it cleaned into one at the first one's base (`LogCleaner.cleanSegments`), and a follower
    # appends what it fetches of its leader's cleaned log into a segment at its own log end: offsets
    # free between a segment's base (its file's name, `files`) and its first batch are the cleaner's
    # too. Per segment holding batches: an empty or zero-filled file shows nothing.
    named = [*LOG_KEY, "file"]
    bases = files.where(live_segment).select(
        *[F.col(c).alias(f"_s_{c}") for c in named], F.col("base_offset").alias("_segment_base")
    )
    based = segments.join(F.broadcast(bases), [F.col(c).eqNullSafe(F.col(f"_s_{c}")) for c in named], "left")
    from_batches = facts(
        based,
        **{name: F.col(name) for name in (*_BATCH_FACTS, *evidence)},
        starts_late_to=F.when(
            F.col("untrusted_spans").isNull() & (F.col("first_batch_offset") > F.col("_segment_base")),
            F.col("first_batch_offset"),
        ),
    )
    from_files = facts(
        files,
        first_segment_offset=F.when(live_segment, F.col("base_offset")),
        last_segment_offset=F.when(live_segment, F.col("base_offset")),
        # The capture time of a (dump, replica): as given at ingest (`--captured-at`), else its newest
        # file, in or outside a partition.
        mtime_ms=F.col("mtime_ms"),
        captured_at_ms=F.col("captured_at_ms") if "captured_at_ms" in files.columns else nothing,
        remote_trace=F.when(_remote_tier_trace(), F.lit(1)),
    )
    from_state = facts(
        partition_state,
        checkpoint_log_start=F.when(F.col("state") == "log_start_offset", F.col("offset")),
        high_watermark=F.when(F.col("state") == "high_watermark", F.col("offset")),
        cleaner_offset=F.when(F.col("state") == "cleaner_offset", F.col("offset")),
        checkpoint_leader_epoch=F.when(F.col("state") == "leader_epoch", F.col("leader_epoch")),
        topic_id=F.when(F.col("state") == "topic_id", F.col("topic_id")),
    )
    sources = [from_batches, from_files, from_state]
    if quarantine is not None:
        from audit_rules.consistency import UNREADABLE_KINDS

        unread = quarantine.where(F.col("kind").isin(*UNREADABLE_KINDS) & F.col("topic").isNotNull())
        sources.append(facts(unread, unreadable_regions=F.lit(1)))
    per_log = (
        union_by_name(sources)
        .groupBy(*LOG_KEY)
        .agg(*[agg(name).alias(name) for name, agg in measures.items()], F.max("topic_id").alias("topic_id"))
    )
    capture = Window.partitionBy("dump_id", "replica")
    # A topic deleted and created again under its name between two dumps is another topic with a
    # topic id of its own (partition.metadata, KIP-516), its offsets again from 0: logs of different
    # incarnations are never compared. Where a partition's logs name one topic id (or none: older
    # brokers, dump-log text) they are all one incarnation, "".
    topic_ids = F.collect_set("topic_id").over(Window.partitionBy("topic", "partition"))
    per_log = per_log.withColumn(
        "incarnation", F.when(F.size(topic_ids) > 1, F.coalesce("topic_id", F.lit("?"))).otherwise(F.lit(""))
    )
    logs = per_log.withColumns(
        {
            "capture_time_ms": F.coalesce(
                F.max("captured_at_ms").over(capture), F.max("mtime_ms").over(capture)
            ),
            "_remote_tier": F.max("remote_trace").over(capture).isNotNull(),
        }
    ).where(
        F.col("topic").isNotNull()
        & (F.col("batches").isNotNull() | F.col("first_segment_offset").isNotNull())
    )
    logs = _epoch_incarnations(logs, topic_ids)
    start = F.greatest(F.col("checkpoint_log_start"), F.col("first_segment_offset"))
    log_start = F.coalesce(start, F.col("first_batch_offset"), F.lit(0)).cast("long")
    # Offsets free between the batches of a segment (`segment_files`): the cleaner's work. Beside
    # unreadable bytes they show nothing (batches may be there).
    trusted_holes = F.col("unreadable_regions").isNull()
    holed = F.coalesce(trusted_holes & F.col("holed_from").isNotNull(), F.lit(False))
    # Offsets free between a segment's base and its first batch (`starts_late_to`) show how far the
    # cleaner of a log known to be compacted reached, not that the log is: on a topic whose policy is
    # delete, batches missing at a segment's start were lost.
    starts_late = F.coalesce(trusted_holes & F.col("starts_late_to").isNotNull(), F.lit(False))
    # This broker's cleaner never touches its active segment, the last one; but a follower appends the
    # batches it fetches with their offsets (`appendAsFollower`) and rolls by its own segment size, so
    # its active segment may hold its leader's cleaned batches (a replica added to a small compacted
    # topic holds the whole log in one segment). Where the active segment itself shows the cleaner
    # (offsets free between its batches, a trimmed batch), the cleaner reached that far: to its end; where
    # it starts past its base (`starts_late`), to its first batch.
    active_shown = F.greatest(
        F.when(trusted_holes, F.col("holed_to")),
        F.col("trimmed_to"),
        F.when(starts_late, F.col("starts_late_to")),
    )
    active_end = F.when(active_shown > F.coalesce(F.col("last_segment_offset"), F.lit(0)), active_shown)
    return logs.select(
        *LOG_KEY,
        "capture_time_ms",
        # A dump's time: the newest capture time of its replicas (`capture_time_ms`, each replica's own,
        # is a lower bound of when it was copied; the earlier-dump rule orders a replica's dumps by it).
        F.max("capture_time_ms").over(Window.partitionBy("dump_id")).alias("dump_time_ms"),
        log_start.alias("log_start_offset"),
        # The lowest offset the broker had not deleted: the first segment's base where the log start lies
        # inside that segment. DeleteRecords (Kafka Streams purges its repartition topics so) and a
        # follower taking its leader's start move the log start only; the broker deletes a segment once
        # the next one starts at or below it (`UnifiedLog.deleteLogStartOffsetBreachedSegments`), so the
        # records between are still on disk, and one missing there was not deleted by retention.
        F.least(log_start, F.coalesce(F.col("first_segment_offset"), log_start)).alias("first_kept_offset"),
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
        "max_data_timestamp",
        "max_leader_epoch",
        # The latest leader epoch the replica knew of: its batches' or its leader-epoch-checkpoint's.
        F.greatest("max_leader_epoch", "checkpoint_leader_epoch").alias("known_leader_epoch"),
        F.coalesce("batches", F.lit(0)).cast("long").alias("batches"),
        F.coalesce("records", F.lit(0)).cast("long").alias("records"),
        F.coalesce("bytes", F.lit(0)).cast("long").alias("bytes"),
        compacted(profile, F.col("topic")).alias("compacted"),
        # A log the cleaner-offset-checkpoint lists is compacted (the broker keeps entries only for
        # topics whose cleanup.policy includes compact), and its cleaner may have removed batches
        # anywhere below the active segment, the last one: the checkpoint (the first dirty offset)
        # bounds only the rounds that finished, and a round stopped midway (a broker shutting down)
        # leaves the groups of segments it had already cleaned swapped in. A topic the profile names as
        # compacted is cleaned below its active segment too: the cleaner never touches that one, so what
        # is missing there is judged as on any other log (where no segment is known, the whole log),
        # unless the active segment shows a leader's cleaner in what this replica fetched (`active_end`).
        F.when(
            F.col("cleaner_offset").isNotNull(),
            F.greatest(
                F.col("cleaner_offset"), F.coalesce(F.col("last_segment_offset"), F.lit(0)), active_end
            ),
        )
        .when(
            compacted(profile, F.col("topic")) | F.col("cleaned_batches").isNotNull() | holed,
            F.greatest(
                F.coalesce(F.col("last_segment_offset"), F.col("log_end_offset"), F.lit(0)), active_end
            ),
        )
        .cast("long")
        .alias("cleaned_to"),
        # What says the log is compacted (`compaction_evidence`).
        F.when(compacted(profile, F.col("topic")), F.lit("profile"))
        .when(F.col("cleaner_offset").isNotNull(), F.lit("checkpoint"))
        .when(F.col("cleaned_batches").isNotNull(), F.lit("batches"))
        .when(holed, F.lit("holes"))
        .alias("compaction_source"),
        F.col("topic").isin(*COORDINATOR_TOPICS).alias("coordinator_written"),
        # The base offset of the log's last segment (the active one): this broker's cleaner never
        # reaches it.
        "last_segment_offset",
        # The lowest offset a batch of the dump holds.
        "first_batch_offset",
        "topic_id",
        "incarnation",
        # Tiered storage (KIP-405): the broker's log start offset (the log-start-offset checkpoint keeps
        # it for every log with remote storage) lies below the first local segment, and the log directory
        # shows a remote tier. Offsets from it up to the local start are in remote storage.
        F.when(
            F.col("_remote_tier") & (F.col("checkpoint_log_start") < F.col("first_segment_offset")),
            F.col("checkpoint_log_start"),
        ).alias("remote_log_start"),
    ).withColumns(
        {
            "log_key": log_key(),
            "log_id": log_id(),
        }
    )


def file_ids(segments: DataFrame, logs: DataFrame) -> DataFrame:
    """(log key columns, file, log_id, file_id, file_order) of every segment file of the batches
    (`segment_files`, `log_bounds`): small, broadcast to whatever joins batches back to their paths."""
    ids = logs.select(*(F.col(c).alias(f"_l_{c}") for c in LOG_KEY))
    keyed = segments.join(ids, [F.col(c).eqNullSafe(F.col(f"_l_{c}")) for c in LOG_KEY], "left_semi")
    return keyed.select(*LOG_KEY, "file", log_id().alias("log_id"), file_id().alias("file_id"), "file_order")


def _id_of(columns: tuple[str, ...]) -> Column:
    # Spark's hashes skip a null input: each nullable key column also hashes whether it is null, so
    # (a, null, b) and (a, b, null) differ.
    parts: list[Column] = []
    for c in columns:
        parts += [F.col(c), F.col(c).isNull()]
    return F.xxhash64(*parts)


def log_id() -> Column:
    """A 64-bit id of the row's log (`LOG_KEY`): a hash, so any row computes it alone (no join, no
    numbering to wait for). `check_ids` rejects a collision among the audited logs and files."""
    return _id_of(LOG_KEY)


def file_id() -> Column:
    """A 64-bit id of the row's segment file (`LOG_KEY` and `file`), like `log_id`."""
    return _id_of((*LOG_KEY, "file"))


def with_log_id(df: DataFrame, *columns: str) -> DataFrame:
    """`log_id`, `file_id` and `columns` of the batch rows of `df`: narrow rows with numeric keys for a
    shuffle and sort of every batch (a string log key or path would be shuffled, sorted and sent to
    Python with every row, and leave the sort's prefix useless). Computed per row: no join."""
    return df.select(log_id().alias("log_id"), file_id().alias("file_id"), *columns)


def check_ids(logs: DataFrame, files: DataFrame) -> None:
    """Fail (ValueError) if two audited logs, or two files, share an id (`log_id`, `file_id`: 64-bit
    hashes; with a million files the odds are about 1 in 37 million). One small job over each frame."""
    for what, df, key in (("logs", logs, "log_id"), ("files", files, "file_id")):
        row = df.agg(F.count(F.lit(1)).alias("n"), F.countDistinct(key).alias("ids")).first()
        if row is not None and row["n"] != row["ids"]:
            raise ValueError(
                f"two of the {row['n']} audited {what} share a 64-bit {key}: audit them in separate runs"
            )


def _remote_tier_trace() -> Column:
    """A `files` row that shows its log directory has a remote tier: the remote log manager's index cache
    (`remote-log-index-cache`, made when `remote.log.storage.system.enable` is on) or a partition of the
    topic-based remote log metadata manager's `__remote_log_metadata`."""
    return ((F.col("kind") == "directory") & F.col("file").endswith("/remote-log-index-cache")) | (
        F.col("topic") == "__remote_log_metadata"
    )


def below_start_cause(lowest: Column | None = None, source: Column | None = None) -> Column:
    """Why a log's dump lacks offsets below its start (from `lowest`, when known), for a message: deleted by
    retention or, on a log with a remote tier (`remote_log_start`), in remote storage. With `source` (the
    log's `log_start_source`), a start no log-start-offset checkpoint gave (the first dumped segment's
    base, or the first batch's offset) says the offsets may only be missing from the dump."""
    remote = F.col("remote_log_start")
    retention = F.lit("deleted by retention")
    if source is not None:
        retention = F.when(source == "checkpoint", retention).otherwise(
            F.lit(
                "deleted by retention, or not in this dump (no log-start-offset checkpoint entry for this "
                "log, which a broker writes only where the start lies past the first segment's base: the "
                "log start is the first offset the dump holds)"
            )
        )
    from_offset = fmt(
        "in remote storage from offset %s and deleted by retention below it (tiered storage, KIP-405: this "
        "dump holds only the local log)",
        remote,
    )
    return (
        F.when(remote.isNull(), retention)
        .when(
            remote <= (lowest if lowest is not None else F.lit(0)),
            fmt(
                "in remote storage (tiered storage, KIP-405: local retention removed the local copies; the "
                "broker's log start offset is %s, and this dump holds only the local log)",
                remote,
            ),
        )
        .otherwise(from_offset)
    )


def kept_start(offset: str = "first_kept_offset") -> Column:
    """For a message: "the log start offset L", or, where the log start lies inside the first segment
    (`first_kept_offset` in `log_bounds`), that segment's base, with why."""
    return F.when(
        F.col(offset) < F.col("log_start_offset"),
        fmt(
            "offset %s, the first segment's base (the log start offset %s lies inside that segment, "
            "moved by DeleteRecords or a leader's start: the records between are still on disk)",
            offset,
            "log_start_offset",
        ),
    ).otherwise(fmt("the log start offset %s", "log_start_offset"))


def join_log(df: DataFrame, logs: DataFrame, *columns: str | Column) -> DataFrame:
    """Add the given per-log columns of `logs` (a `log_bounds` frame) to `df` (broadcast: logs are few)."""
    small = logs.select(F.col("log_key").alias("_lk"), *columns)
    return df.join(F.broadcast(small), log_key() == F.col("_lk"), "left").drop("_lk")
