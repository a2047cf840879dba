"""Duplicate rules: exact batch copies (KIP-98 duplicate window) and records re-sent under a new epoch.

The broker recognises a retry only if its `(epoch, baseSeq, lastSeq)` is among the last 5 batches it
holds for the producer (`ProducerStateEntry.findDuplicateBatch`, KAFKA-5494; 1 in 0.11), and only
while the producer's state has not expired. A batch re-sent after an epoch bump gets new sequences,
so only its content can match (KAFKA-14034, librdkafka #4953).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import BATCH_FIELDS, fmt, to_findings
from audit_rules.history import (
    STREAM_KEY,
    evicted_by_log_start,
    forgotten_before,
    forgotten_by_expiry,
    state_expired,
    who_restarts,
)
from audit_rules.logs import compaction_may_have_removed
from audit_rules.profile import Profile


def duplicate_batches(history: DataFrame, profile: Profile, batches: DataFrame | None = None) -> DataFrame:
    """DUPLICATE_BATCH: the same (pid, epoch, baseSeq, lastSeq) retained at two offsets; says whether the
    profile's broker should have caught it (RULES.md).

    The broker's cache holds the producer's last appended batches, a copy among them too, so the
    window is measured from the nearest earlier copy (`copy_of_offset`, `copy_of_index`); the finding
    points at the first (`first_copy_offset`). Outside the window a broker holding the producer's state
    refuses the copy as out of sequence, unless it follows the batch before it in sequence; without
    state it accepts it only if it accepts an unknown producer's sequence (`accepts_unknown_producer`)
    or the sequence is 0. Before 2.4 the broker also forgot a producer once the log start offset
    passed its last batch (`evicted`).

    With `batches` (the stream batches of the history, with their log's columns), a copy whose stream
    has a batch the broker took from a forgotten producer (`forgotten_before`) after the nearest copy
    was not in the broker's cache: that cache started again there."""
    rows = history.where(F.col("transition") == "DUPLICATE")
    between = F.col("stream_index") - F.col("copy_of_index") - 1
    if profile.duplicate_window_sequences is not None:
        # Seed 003: "any sequence that is within 1000 of the latest": the request's (its first) sequence,
        # at most W below the latest the broker holds.
        in_window = (
            F.col("prev_last_unwrapped") - F.col("base_sequence_unwrapped")
        ) <= profile.duplicate_window_sequences
    else:
        in_window = between < profile.duplicate_window_batches
    if batches is not None:
        # The latest forget point before each copy (a window over the points and the copies of each
        # stream, not a join of the two: a producer idle between all its batches makes each a point).
        copies = rows.select(*STREAM_KEY, "base_offset", "copy_of_offset").distinct()
        points = batches.where(forgotten_before(profile)).select(
            *STREAM_KEY,
            "base_offset",
            F.lit(None).cast("long").alias("copy_of_offset"),
            F.col("base_offset").alias("_point"),
            # What made the broker forget the producer there (as `explained_by` names it).
            F.when(forgotten_by_expiry(profile), F.lit("expiry"))
            .otherwise(F.lit("retention"))
            .alias("_point_by"),
        )
        # At one offset the copy comes first: a point there is the copy itself, not one between.
        before = (
            Window.partitionBy(*STREAM_KEY)
            .orderBy("base_offset", F.col("_point").isNotNull())
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        resets = (
            copies.withColumns({"_point": F.lit(None).cast("long"), "_point_by": F.lit(None).cast("string")})
            .unionByName(points)
            .withColumns(
                {
                    "_latest": F.last("_point", ignorenulls=True).over(before),
                    "_latest_by": F.last("_point_by", ignorenulls=True).over(before),
                }
            )
            .where(F.col("_point").isNull())
            .select(
                *STREAM_KEY,
                "base_offset",
                "copy_of_offset",
                F.coalesce(F.col("_latest") > F.col("copy_of_offset"), F.lit(False)).alias("_reset"),
                F.col("_latest").alias("_forgot_at"),
                F.col("_latest_by").alias("_forgot_by"),
            )
        )
        rows = rows.join(resets, [*STREAM_KEY, "base_offset", "copy_of_offset"], "left")
        reset: Column = F.coalesce(F.col("_reset"), F.lit(False))
        forgot_at, forgot_by = F.col("_forgot_at"), F.col("_forgot_by")
    else:
        reset, forgot_at, forgot_by = F.lit(False), F.lit(None).cast("long"), F.lit(None).cast("string")
    # Expiry explains the copy only where the broker accepts it from a producer it holds no state for.
    expired = state_expired(profile.producer_id_expiration_ms)
    forgotten = forgotten_by_expiry(profile)
    evicted = evicted_by_log_start(profile)
    unknown_error = profile.unknown_producer_error
    follows = F.col("base_sequence_unwrapped") == F.col("prev_last_unwrapped") + 1
    # Before 2.5 the broker answers a forgotten producer's next batch UNKNOWN_PRODUCER_ID but for sequence
    # 0, and the client numbers its batches from 0 again (KAFKA-7190): a batch that follows on from that
    # restart holds new records under an earlier batch's numbers, not a re-send.
    # (0.11 answers OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to its client: no such restart.)
    renumbered = (
        reset & follows & F.lit(profile.has_unknown_producer_id and not profile.accepts_unknown_producer)
    )
    window = profile.describe_window()
    outside = f"outside {window} ({profile.name}) the broker would not have recognised it as a retry"
    # Inside the window, but the broker forgot the producer after the copy: its cache started again.
    not_a_retry = F.when(
        in_window & reset,
        fmt(
            f"{profile.name} had forgotten the producer after that copy and took the batch at offset %s as "
            "a new producer's, so its cache no longer held the copy",
            forgot_at,
        ),
    ).otherwise(F.lit(outside))
    # The cleaner may have removed batches of the producer between the two copies (it removes whole
    # batches and leaves their offsets free): the batches between are counted as the log holds them now,
    # fewer than the broker's cache held when the copy came.
    cleaned = compaction_may_have_removed(F.col("copy_of_offset"))
    verdict = (
        F.when(
            in_window & ~reset & ~forgotten & ~evicted & cleaned,
            F.lit(
                f"a broker keeping {window} ({profile.name}) should have caught it, unless the cleaner "
                "removed more of the producer's batches between the copies (the log is compacted: the "
                "batches between are counted as the log holds them now)"
            ),
        )
        .when(
            in_window & ~reset & ~forgotten & ~evicted,
            F.lit(f"a broker keeping {window} ({profile.name}) should have caught it"),
        )
        .when(
            forgotten,
            F.lit(
                f"the producer had been idle longer than {profile.expiration_setting}, so {profile.name} had "
                f"forgotten it"
            ),
        )
        .when(evicted, _evicted_message(profile))
        .when(
            # Before 2.5 a broker that forgot the producer refuses any sequence but 0 too.
            expired,
            F.concat(
                not_a_retry,
                F.lit(
                    ", and it should have refused it either way: as out of sequence while it held the "
                    "producer's state, and once that state expired (idle longer than "
                    f"{profile.expiration_setting}) as from a producer it did not know ({unknown_error}): a "
                    "broker bug, or producer state rolled back"
                ),
            ),
        )
        .when(
            renumbered,
            fmt(
                f"{profile.name} took sequence 0 at offset %s from a producer it had forgotten, and this "
                "batch follows on from there: the client numbered new records from 0 again (a client before "
                "2.5 does so after UNKNOWN_PRODUCER_ID, KAFKA-7190), so these are not the first copy's "
                "records sent again",
                forgot_at,
            ),
        )
        .when(
            follows,
            F.concat(
                not_a_retry,
                fmt(
                    ", and it follows the batch before it (offset %s) in sequence, so a broker that had "
                    "appended that batch appended this one too",
                    "prev_base_offset",
                ),
            ),
        )
        .otherwise(
            F.concat(
                not_a_retry,
                F.lit(
                    ", but while it held the producer's state it should have refused it as out of sequence: "
                    "its presence means the broker had lost the producer's state (or a broker bug)"
                ),
            )
        )
    )
    twice = fmt(
        "Producer %s epoch %s sequences %s-%s are written twice, at offset %s and again at offset %s "
        "(%s of its batch(es) between): ",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "last_sequence",
        "first_copy_offset",
        "base_offset",
        between,
    )
    again = fmt(
        "Producer %s epoch %s sequences %s-%s are written again at offset %s, first at offset %s and last "
        "at offset %s (%s of its batch(es) between): ",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "last_sequence",
        "base_offset",
        "first_copy_offset",
        "copy_of_offset",
        between,
    )
    opening = F.when(F.col("copy_of_offset") == F.col("first_copy_offset"), twice).otherwise(again)
    return to_findings(
        rows,
        "DUPLICATE_BATCH",
        F.concat(opening, verdict, F.lit(".")),
        related_offset="first_copy_offset",
        # A broker that had forgotten the producer (expiry) or evicted it (retention) took the copy.
        explained_by=F.when(forgotten, F.lit("expiry"))
        .when(evicted, F.lit("retention"))
        .when(~expired & renumbered, forgot_by),
        **BATCH_FIELDS,
    )


def _evicted_message(profile: Profile) -> Column:
    return fmt(
        "the log start offset (now %s) has passed the producer's previous batch (offset %s), and "
        f"{profile.name} forgets such a producer (truncateHead) and takes sequence 0 from it as from a "
        f"new producer ({who_restarts(profile)}): a restart, if the log start moved before this batch was "
        "written",
        "log_start_offset",
        "prev_base_offset",
    )


def _record_contents(history: DataFrame, records: DataFrame) -> DataFrame:
    """Records of unflagged data batches with their batch's producer fields and a hash of (key, value).

    A read_committed consumer's view: the records of an aborted transaction (the producer's next marker
    after the batch is an ABORT: `markers_before` numbers its transactions) are left out. Re-sending
    what an abort took back is how a transactional producer recovers (a new instance's
    initTransactions aborts the open transaction, and the application processes its input again)."""
    data = history.where(F.col("ok") & ~F.col("is_control"))
    aborts = history.where(
        F.col("is_control") & (F.col("control_type") == "ABORT") & ~F.col("invalid")
    ).select("log_key", "producer_id", "markers_before", F.lit(True).alias("_aborted"))
    committed = data.where(~F.col("is_transactional")).unionByName(
        data.where(F.col("is_transactional")).join(
            aborts, ["log_key", "producer_id", "markers_before"], "left_anti"
        )
    )
    batch_cols = committed.select(
        "log_key",
        "dump_id",
        "replica",
        "topic",
        "partition",
        "file",
        F.col("position").alias("batch_position"),
        "producer_id",
        "producer_epoch",
        "base_offset",
        "last_offset",
        "stream_index",
    )
    keyed = records.where(F.col("key").isNotNull() | F.col("value").isNotNull()).select(
        "dump_id",
        "replica",
        "file",
        "batch_position",
        "offset",
        "timestamp",
        F.xxhash64(
            F.coalesce(F.col("key"), F.lit(b"")),
            F.col("key").isNull(),
            F.coalesce(F.col("value"), F.lit(b"")),
            F.col("value").isNull(),
        ).alias("content"),
    )
    return keyed.join(batch_cols, ["dump_id", "file", "batch_position"], "inner").drop(keyed.replica)


_COPY_BATCH = ("log_key", "dump_id", "replica", "topic", "partition", "producer_id", "producer_epoch")


def _epoch_ends(history: DataFrame) -> DataFrame:
    """Per (log_key, producer_id, producer_epoch): the first and last offsets of its data batches and of
    its markers (one pass over the history, read by both rules of a new epoch's or new producer's copies)."""
    data = ~F.col("is_control")
    return (
        history.where(F.col("ok"))
        .groupBy("log_key", "producer_id", "producer_epoch")
        .agg(
            F.min(F.when(data, F.col("base_offset"))).alias("_first_data"),
            F.max(F.when(data, F.col("base_offset"))).alias("_last_data"),
            F.min(F.when(~data, F.col("base_offset"))).alias("_first_marker"),
            F.max(F.when(~data, F.col("base_offset"))).alias("_last_marker"),
        )
    )


def _client_bumps(epoch_ends: DataFrame) -> DataFrame:
    """(log_key, producer_id, producer_epoch, previous_epoch) for each epoch of a producer's data that a
    client raised, with the epoch of its data before (the next lower one in the log). An epoch whose
    first row is a marker was raised by the transaction coordinator: Transactions V2 ends every
    transaction so (KIP-890), and a timed-out transaction's abort fences its producer so; its data
    after the marker follows a completed transaction, and no in-flight batch is re-sent there. So was an
    epoch whose data follows a marker of an epoch between it and the data's epoch before (a marker-only
    epoch): a Transactions V2 producer's transaction that wrote no data to this partition still ends
    with a marker one epoch up, written only to its partitions, so here the epoch moves on by two. Nor
    does an epoch whose data before ends with a marker of its own epoch: a Transactions V1 producer that
    restarted after its transaction completed (`InitProducerId` bumps the epoch and writes no marker)
    had nothing in flight, and consecutive transactions may write the same values."""
    # A marker after the epoch's last data: its last transaction ended, nothing of it was in flight.
    epochs = epoch_ends.withColumn(
        "_ended", F.coalesce(F.col("_last_marker") > F.col("_last_data"), F.lit(False))
    )
    order = Window.partitionBy("log_key", "producer_id").orderBy("producer_epoch")
    # The epochs after one with data, up to the next with data, are one group: its marker-only epochs
    # (every epoch here has data or a marker) lie between the two epochs' data.
    has_data = F.col("_first_data").isNotNull()
    epochs = epochs.withColumn(
        "_group",
        F.coalesce(
            F.sum(has_data.cast("int")).over(order.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)
        ),
    ).withColumn(
        "_marker_between",
        F.max(F.when(~has_data, F.lit(True))).over(Window.partitionBy("log_key", "producer_id", "_group")),
    )
    with_data = epochs.where(has_data)
    return (
        with_data.withColumns(
            {
                "previous_epoch": F.lag("producer_epoch").over(order),
                "_previous_ended": F.lag("_ended").over(order),
            }
        )
        .where(
            F.col("previous_epoch").isNotNull()
            & ~F.col("_previous_ended")
            & ~F.coalesce(F.col("_marker_between"), F.lit(False))
            & F.coalesce(F.col("_first_marker") > F.col("_first_data"), F.lit(True))
        )
        .select("log_key", "producer_id", "producer_epoch", "previous_epoch")
    )


def duplicate_records_new_epoch(
    history: DataFrame, records: DataFrame, profile: Profile, bronze_batches: DataFrame | None = None
) -> DataFrame:
    """DUPLICATE_RECORDS_NEW_EPOCH: a record's key and value re-appear in the first batches of an epoch a
    client raised, repeating a record of the last batches of the producer's epoch before (the batches in
    flight when it bumped), or at the head of the producer id that took over from it (RULES.md)."""
    window = profile.duplicate_window_batches
    joined = _record_contents(history, records)
    epoch_ends = _epoch_ends(history)
    # The copies: records of an epoch's first data batches, where a client raised the epoch.
    heads = joined.where(F.col("stream_index") <= window).join(
        _client_bumps(epoch_ends), ["log_key", "producer_id", "producer_epoch"], "inner"
    )
    # The originals: records of the last data batches of an epoch, the batches in flight when it ended.
    # Counted among all its data batches: where those were aborted, no committed record was in flight
    # (an aborted batch's records are no original, and the window does not slide past it).
    from_tail = Window.partitionBy("log_key", "producer_id", "producer_epoch").orderBy(
        F.col("base_offset").desc()
    )
    batches = (
        history.where(F.col("ok") & ~F.col("is_control"))
        .select("log_key", "producer_id", "producer_epoch", "base_offset")
        .distinct()
    )
    tails = (
        batches.withColumn("_from_tail", F.dense_rank().over(from_tail))
        .where(F.col("_from_tail") <= window)
        .join(joined, ["log_key", "producer_id", "producer_epoch", "base_offset"], "inner")
        # One row per content: the join pairs each copy with its first original, not with every record
        # of equal content (a load generator's 10,000 equal values made 10,000 x 10,000 rows).
        .groupBy("log_key", "producer_id", "content", F.col("producer_epoch").alias("previous_epoch"))
        .agg(F.min("offset").alias("_original_offset"), F.collect_set("timestamp").alias("_stamps"))
    )
    copies = heads.join(tails, ["log_key", "producer_id", "previous_epoch", "content"], "inner")
    per_batch = copies.groupBy(*_COPY_BATCH, "base_offset", "last_offset").agg(
        F.countDistinct("offset").alias("copied"),
        *_kept_stamps(),
        F.min("_original_offset").alias("original_offset"),
        F.first("previous_epoch").alias("original_epoch"),
    )
    same_pid = to_findings(
        _with_stamp_note(per_batch, bronze_batches),
        "DUPLICATE_RECORDS_NEW_EPOCH",
        fmt(
            "Producer %s re-wrote %s record(s) under epoch %s at offsets %s-%s that were already written "
            "under epoch %s (first at offset %s): a retry after an epoch bump duplicated them (KAFKA-14034, "
            "librdkafka #4953).%s",
            "producer_id",
            "copied",
            "producer_epoch",
            "base_offset",
            "last_offset",
            "original_epoch",
            "original_offset",
            "_stamp_note",
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="original_offset",
    )
    return same_pid.unionByName(
        _duplicates_under_new_producer_id(history, joined, epoch_ends, profile, bronze_batches)
    )


def _kept_stamps() -> list[Column]:
    """Aggregates of a copy batch's copied records (rows with `offset`, `timestamp`, `file`,
    `batch_position` and `_stamps`, the timestamps of the originals of the row's content): `kept`, how
    many carry an original's timestamp, and `_at`, the batch's (file, position)."""
    kept = F.array_contains(F.col("_stamps"), F.col("timestamp"))
    return [
        F.countDistinct(F.when(kept, F.col("offset"))).alias("kept"),
        F.min(F.struct("file", "batch_position")).alias("_at"),
    ]


def _with_stamp_note(per_batch: DataFrame, bronze_batches: DataFrame | None) -> DataFrame:
    """`_stamp_note`: what the copies' timestamps say of who wrote them again, for a copy batch of
    CreateTime (the producer's clock). A client re-sending its in-flight batches (KAFKA-14034, a
    librdkafka retry) sends the same records, timestamps included; an application that produces a
    record again (its own retry of a send that failed, a heartbeat or an unchanged state of equal
    content) gives it a new timestamp, unless it sets one. Under LogAppendTime the broker stamps every
    append, and without the batches' timestamp types (`bronze_batches` None) nothing is said."""
    if bronze_batches is None:
        return per_batch.withColumn("_stamp_note", F.lit(""))
    # The copy batches are few: sent to every task that reads the batches' types (no shuffle of those).
    at = per_batch.withColumns({"file": F.col("_at.file"), "batch_position": F.col("_at.batch_position")})
    types = (
        bronze_batches.where(F.col("timestamp_type") == "CreateTime")
        .select(
            "dump_id", "file", F.col("position").alias("batch_position"), F.lit(True).alias("_create_time")
        )
        .join(F.broadcast(at), ["dump_id", "file", "batch_position"], "right")
    )
    note = (
        F.when(F.col("_create_time").isNull(), F.lit(""))
        .when(
            F.col("kept") == F.col("copied"),
            F.lit(" Each copy keeps its original's CreateTime, as a client's re-send of its batches does."),
        )
        .when(
            F.col("kept") == 0,
            F.lit(
                " No copy keeps its original's CreateTime, which a client's re-send of its batches keeps: "
                "the application produced these records again (its retry of sends that failed, or "
                "records of equal content such as a heartbeat)."
            ),
        )
        .otherwise(
            F.format_string(
                " %d of the copies keep their original's CreateTime (a client's re-send of its batches); "
                "the application produced the others again.",
                F.col("kept"),
            )
        )
    )
    return types.withColumn("_stamp_note", note)


def _duplicates_under_new_producer_id(
    history: DataFrame,
    joined: DataFrame,
    epoch_ends: DataFrame,
    profile: Profile,
    bronze_batches: DataFrame | None,
) -> DataFrame:
    """The same re-send under a new producer id (a client that reset its idempotent session, pre-KIP-360):
    records of the first `duplicate_window_batches` data batches of pid B, starting with B's very first
    batch, equal to records of the last that many data batches of a pid A whose data all lies before B's
    first batch (its batches counted as `duplicate_records_new_epoch` counts them, aborted ones too),
    the latest such A of each content, unless A's data ends with a marker (its last transaction ended:
    nothing of it was in flight)."""
    window = profile.duplicate_window_batches
    pid = Window.partitionBy("log_key", "producer_id")
    batch = ["log_key", "producer_id", "producer_epoch", "base_offset"]
    batches = history.where(F.col("ok") & ~F.col("is_control")).select(*batch).distinct()
    # A producer whose data ends with a marker after it ended its last transaction: nothing of it was in
    # flight. (A Transactions V2 producer moves to a new producer id at epoch 0 once its epoch is
    # exhausted, after the marker at 32767: `TransactionMetadata.prepareComplete`; its next
    # transactions may write the values its last ones did.)
    # (Such a producer's tails stay in the as-of match below: the latest producer of a content before B
    # is still the one B follows, and a pair with one that ended is no re-send.)
    # (A marker of an epoch above its data's counts: Transactions V2 writes the marker one epoch up.)
    ended = epoch_ends.groupBy("log_key", "producer_id").agg(
        F.coalesce(F.max("_last_marker") > F.max("_last_data"), F.lit(False)).alias("_ended")
    )
    ranked = batches.withColumns(
        {
            "_from_head": F.dense_rank().over(pid.orderBy("base_offset")),
            "_from_tail": F.dense_rank().over(pid.orderBy(F.col("base_offset").desc())),
            "_first_offset": F.min("base_offset").over(pid),
            "_last_offset": F.max("base_offset").over(pid),
        }
    )
    # By the log key (a bare partition directory has no replica: a null would match nothing).
    edge = joined.join(
        ranked.where((F.col("_from_head") <= window) | (F.col("_from_tail") <= window)), batch, "inner"
    )
    # A copy's columns (`content` is the match's key, beside them).
    columns = [
        *_COPY_BATCH,
        "file",
        "batch_position",
        "base_offset",
        "last_offset",
        "offset",
        "timestamp",
        "_from_head",
        "_first_offset",
    ]
    heads = edge.where(F.col("_from_head") <= window).select(*columns, "content")
    # Per earlier producer, its first record of each content.
    tails = (
        edge.where(F.col("_from_tail") <= window)
        .join(ended, ["log_key", "producer_id"], "left")
        .groupBy("log_key", "content", "producer_id", "_ended")
        .agg(
            F.min(F.struct("offset", "producer_epoch", "_last_offset")).alias("_t"),
            F.collect_set("timestamp").alias("_stamps"),
        )
        .select(
            "log_key",
            "content",
            F.col("producer_id").alias("original_producer_id"),
            F.col("_t.producer_epoch").alias("original_epoch"),
            F.col("_t.offset").alias("original_offset"),
            F.col("_t._last_offset").alias("_original_last"),
            F.coalesce(F.col("_ended"), F.lit(False)).alias("_original_ended"),
            "_stamps",
        )
    )
    # Each copy pairs with the producer that wrote its content last before the new one's first batch
    # (an as-of join: one sort by content, not every earlier producer of equal content, which gave K
    # short sessions re-sending one payload K x K rows and each of them a finding per earlier session).
    tail_columns = [
        "original_producer_id",
        "original_epoch",
        "original_offset",
        "_original_last",
        "_original_ended",
        "_stamps",
    ]
    events = heads.select(
        "log_key",
        "content",
        F.col("_first_offset").alias("_at"),
        F.lit(1).alias("_is_head"),
        F.struct(*columns).alias("_h"),
        F.lit(None).cast(tails.select(F.struct(*tail_columns)).schema[0].dataType).alias("_o"),
    ).unionByName(
        tails.select(
            "log_key",
            "content",
            F.col("_original_last").alias("_at"),
            F.lit(0).alias("_is_head"),
            F.lit(None).cast(heads.select(F.struct(*columns)).schema[0].dataType).alias("_h"),
            F.struct(*tail_columns).alias("_o"),
        )
    )
    # A head before a tail at one offset: a producer of one data batch, whose tail is its head, is no
    # earlier producer of itself (it hid the producer that did write the content before it).
    before = (
        Window.partitionBy("log_key", "content")
        .orderBy("_at", F.col("_is_head").desc())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    pairs = (
        events.withColumn("_latest", F.last("_o", ignorenulls=True).over(before))
        .where(F.col("_h").isNotNull() & F.col("_latest").isNotNull())
        .select("_h.*", "_latest.*")
        .where(
            (F.col("original_producer_id") != F.col("producer_id"))
            & (F.col("_original_last") < F.col("_first_offset"))
            & ~F.col("_original_ended")
        )
    )
    per_batch = pairs.groupBy(*_COPY_BATCH, "base_offset", "last_offset", "original_producer_id").agg(
        F.countDistinct("offset").alias("copied"),
        *_kept_stamps(),
        F.min("original_offset").alias("original_offset"),
        F.min("original_epoch").alias("original_epoch"),
        F.min("_from_head").alias("_from_head"),
    )
    # The re-send opens the new session: B's first batch must be one of the copies.
    starts = Window.partitionBy("log_key", "producer_id", "original_producer_id")
    resent = per_batch.withColumn("_opens", F.min("_from_head").over(starts) == 1).where(F.col("_opens"))
    return to_findings(
        _with_stamp_note(resent, bronze_batches),
        "DUPLICATE_RECORDS_NEW_EPOCH",
        fmt(
            "Producer %s (epoch %s) re-wrote %s record(s) at offsets %s-%s that producer %s (epoch %s) had "
            "written in its last batches (first at offset %s) before it stopped: a client that reset its "
            "idempotent session under a new producer id re-sent its in-flight batches (KAFKA-14034 shape).%s",
            "producer_id",
            "producer_epoch",
            "copied",
            "base_offset",
            "last_offset",
            "original_producer_id",
            "original_epoch",
            "original_offset",
            "_stamp_note",
        ),
        evidence=F.col("original_producer_id"),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="original_offset",
    )
