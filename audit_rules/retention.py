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
from audit_rules.findings import fmt, to_findings, union_by_name
from audit_rules.history import SEQUENCE_MODULUS
from audit_rules.logs import (
    PARTITION_OF_LOG,
    Store,
    as_is,
    below_start_cause,
    compaction_may_have_removed,
    join_log,
    kept_start,
    with_log_key,
)
from audit_rules.profile import EXPIRY_CHECK_INTERVAL_MS, AppSequenceSpec, Profile
from kafka_log_decoder.remote_log_metadata import SEGMENT_STATES
from schemas.tables import LOG_KEY


def corrupt_holders(failed: DataFrame) -> DataFrame:
    """(log_key, producer_id) of the producers whose batches a log holds with a failed CRC (`failed`:
    `history.failed_producer_batches`), where a data batch's header looks as sent: a sequence span equal
    to its offset span (as `history.corrupt_fills` believes it). Such a producer is not absent from the
    log: its batches are there, unreadable, and the corruption (CRC_MISMATCH) is the finding, as the ack
    check counts such a batch holding its offsets."""
    span = F.pmod(F.col("last_sequence") - F.col("base_sequence"), F.lit(SEQUENCE_MODULUS))
    return (
        with_log_key(failed)
        .where(
            ~F.col("is_control")
            & (F.col("base_sequence") >= 0)
            & (span == F.col("last_offset") - F.col("base_offset"))
        )
        .select("log_key", "producer_id")
        .distinct()
    )


def latest_snapshot_entries(
    snapshots: DataFrame, files: DataFrame | None = None, quarantine: DataFrame | None = None
) -> DataFrame:
    """Entries of the newest snapshot of each log (the state the broker would load, §5.8): the live
    `.snapshot` file of the highest offset (`files`) that is readable (no SNAPSHOT_CORRUPT row of it in
    `quarantine`). That one may hold no entry: `takeSnapshot` writes the map however empty, and
    `loadFromSnapshot` loads the latest file, an older one only where the latest is corrupt. So an
    older file's entries are not the broker's state, and none of that log is returned. (A log whose
    snapshots the inventory does not list, a text dump's, reads its entries' newest.)"""
    s = with_log_key(snapshots)
    newest = F.max("snapshot_offset").over(Window.partitionBy("log_key"))
    if files is not None:
        live = files.where(
            (F.col("kind") == "snapshot") & F.col("is_live") & F.col("base_offset").isNotNull()
        ).alias("l")
        if quarantine is not None:
            corrupt = quarantine.where(F.col("kind") == "SNAPSHOT_CORRUPT").alias("q")
            # (A replica may be null: its key is compared null-safe.)
            same = (
                (F.col("l.file") == F.col("q.file"))
                & (F.col("l.dump_id") == F.col("q.dump_id"))
                & F.col("l.replica").eqNullSafe(F.col("q.replica"))
            )
            live = live.join(corrupt, same, "left_anti")
        readable = with_log_key(live).groupBy("log_key").agg(F.max("base_offset").alias("_newest_file"))
        s = s.join(F.broadcast(readable), "log_key", "left")
        newest = F.greatest(newest, F.coalesce(F.col("_newest_file"), newest))
    return (
        s.withColumn("_newest", newest)
        .where(F.col("snapshot_offset") == F.col("_newest"))
        .drop("_newest", "_newest_file")
    )


def _retained_state(profile: Profile) -> str:
    """What the profile's broker does with a producer whose batches retention deleted (§5.7)."""
    if profile.accepts_unknown_producer:
        return f"a {profile.name} broker keeps a producer's state after retention until it expires (KIP-360)"
    if not profile.evicts_at_log_start:
        return (
            f"a {profile.name} broker keeps a producer's state after retention until it expires "
            f"(KAFKA-7190), and then refuses its next batch unless it starts at sequence 0 "
            f"({profile.unknown_producer_error})"
        )
    return (
        f"a {profile.name} broker forgets a producer once retention deleted its batches, and refuses its "
        "next batch unless it starts at sequence 0 (" + profile.unknown_producer_error + ")"
    )


def snapshot_producers(
    producers: DataFrame,
    entries: DataFrame,
    logs: DataFrame,
    profile: Profile,
    gone: DataFrame | None = None,
    corrupt: DataFrame | None = None,
) -> DataFrame:
    """PRODUCER_STATE_RETAINED (info) or UNKNOWN_PRODUCER_LOSS (critical) for snapshot producers with no
    retained batch (`producers`: `history.producer_summary`; `entries`: `latest_snapshot_entries`; not
    those `corrupt`, `corrupt_holders`, finds in CRC-failed batches). On a
    compacted log the cleaner may have removed them after the snapshot was written, once the broker
    forgot the producer (a producer the broker forgot loses the cleaner's protection of its last batch,
    §5.9): not loss where the cleaner has passed the entry's last offset, the entry's timestamp is at
    least producer.id.expiration.ms before the dump's capture time and it has no transaction open (the
    broker never expires such a producer, and the cleaner does not pass the last stable offset).

    With `gone` (`gone_since_previous_dump`), an entry staler than what the previous dump shows of its
    producer (a last offset below the producer's there) is left to `producers_across_dumps`.

    An entry whose last offset is at or past the log's end names a batch the log no longer reaches: the
    broker deletes every snapshot past the log end when it truncates or recovers a log
    (`truncateAndReload`, §4.3), so this replica lost its tail after the snapshot was written (a broker
    that crashed and has not recovered yet, or a copy of the log taken before the snapshot). Where the
    log of another replica (`held_elsewhere`: dumped as late or later, or knowing a leader epoch as
    late) holds the producer that far (with `gone`: several
    logs), the replica is behind, not loss, as in `producers_across_dumps`.

    A producer whose first retained batch lies after the entry's last offset (an entry without one: at or
    after the snapshot, below which lies the marker that raised its epoch) lost that batch too, where
    the offset is one the broker had not deleted: UNKNOWN_PRODUCER_LOSS as well (a snapshot is the state
    of the log below its offset, §4.2; nothing else takes a batch from inside a log)."""
    firsts = producers.select("log_key", "producer_id", F.col("retained_first_offset").alias("_first"))
    # Absent up to the entry: no batch or marker of the producer at or below its last offset, or (an
    # entry without one, -1) below the snapshot, where the marker that raised its epoch lies.
    absent = entries.join(firsts, ["log_key", "producer_id"], "left").where(
        F.col("_first").isNull()
        | ((F.col("last_offset") >= 0) & (F.col("_first") > F.col("last_offset")))
        | ((F.col("last_offset") < 0) & (F.col("_first") >= F.col("snapshot_offset")))
    )
    if corrupt is not None:
        absent = absent.join(corrupt, ["log_key", "producer_id"], "left_anti")
    if gone is not None:
        known = gone.select("log_key", "producer_id", F.col("retained_last_offset").alias("_known_last"))
        absent = absent.join(known, ["log_key", "producer_id"], "left").where(
            F.coalesce(F.col("last_offset") >= F.col("_known_last"), F.lit(True))
        )
    absent = join_log(
        absent,
        logs,
        "log_start_offset",
        "first_kept_offset",
        "log_end_offset",
        "remote_log_start",
        "compacted",
        "cleaned_to",
        "capture_time_ms",
        "incarnation",
    )
    past_end = (F.col("last_offset") >= 0) & (F.col("last_offset") >= F.col("log_end_offset"))
    behind = F.lit(False)
    if gone is not None:
        held = held_elsewhere(absent.where(past_end), producers, logs, "last_offset")
        absent = absent.join(held, ["log_key", "producer_id"], "left")
        behind = past_end & F.coalesce(F.col("held_elsewhere"), F.lit(False))
    # An entry without a batch offset (-1): a marker that raised the producer's epoch cleared its cached
    # batches (`ProducerStateEntry.maybeUpdateProducerEpoch`: after every Transactions V2 commit or abort,
    # KIP-890, and a coordinator's fencing abort), so only its snapshot's offset bounds what it wrote.
    has_offset = F.col("last_offset") >= 0
    # Below the first offset not deleted (`first_kept_offset`): the log start, or the first segment's
    # base where the log start lies inside it (its records still on disk).
    below_start = F.when(has_offset, F.col("last_offset") < F.col("first_kept_offset")).otherwise(
        F.col("snapshot_offset") <= F.col("first_kept_offset")
    )
    retained = to_findings(
        absent.where(below_start & F.col("_first").isNull()),
        "PRODUCER_STATE_RETAINED",
        F.when(
            has_offset,
            fmt(
                "The producer snapshot at offset %s still lists producer %s epoch %s (last offset %s, "
                "sequence %s), whose batches all lie below the log start offset %s (%s): not loss ("
                + _retained_state(profile)
                + ").",
                "snapshot_offset",
                "producer_id",
                "producer_epoch",
                "last_offset",
                "last_sequence",
                "log_start_offset",
                below_start_cause(),
            ),
        ).otherwise(
            fmt(
                "The producer snapshot at offset %s still lists producer %s epoch %s without a batch offset "
                "(-1: a marker raised its epoch), and the snapshot lies at or below the log start offset %s, "
                "so all it wrote does too (%s): not loss (" + _retained_state(profile) + ").",
                "snapshot_offset",
                "producer_id",
                "producer_epoch",
                "log_start_offset",
                below_start_cause(),
            )
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset=F.when(has_offset, F.col("last_offset")),
        last_offset=F.when(has_offset, F.col("last_offset")),
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
        explained_by=F.lit("retention"),
    )
    lost_known = (
        has_offset
        & ~behind
        & (
            (F.col("last_offset") >= F.col("first_kept_offset"))
            & ~(
                # The cleaner never passes the log end: past it, the log lost the batch.
                ~past_end
                & compaction_may_have_removed(F.col("last_offset"))
                # A batch no longer its producer's last (later ones are retained) the cleaner may take.
                & (
                    F.col("_first").isNotNull()
                    # A producer with a transaction open never expires, and the cleaner stops at the
                    # first open transaction's offset (the last stable offset): its batches stay.
                    | (F.col("current_txn_first_offset") < 0)
                    & F.coalesce(
                        F.col("capture_time_ms") - F.col("timestamp") >= profile.producer_id_expiration_ms,
                        F.lit(False),
                    )
                )
            )
        )
    )
    # Without a batch offset, its marker lies somewhere below the snapshot: it must be in a log complete
    # from offset 0 that no cleaner has touched; otherwise retention or the cleaner may have taken it.
    lost_unknown = (
        ~has_offset
        & (F.col("first_kept_offset") == 0)
        & (F.col("snapshot_offset") > 0)
        & ~compaction_may_have_removed(F.lit(-1))
    )
    lost = to_findings(
        absent.where(lost_known | lost_unknown),
        "UNKNOWN_PRODUCER_LOSS",
        F.when(
            past_end,
            fmt(
                "The producer snapshot at offset %s lists producer %s epoch %s with its last batch at offset "
                "%s, but the log ends at offset %s, before that batch, and holds none of that producer's: "
                "this replica lost its tail after the snapshot was written (a broker that crashed and has "
                "not recovered, or a copy of the log taken before the snapshot), and no other replica's "
                "log in these dumps holds the producer that far: its data is lost.",
                "snapshot_offset",
                "producer_id",
                "producer_epoch",
                "last_offset",
                "log_end_offset",
            ),
        )
        .when(
            has_offset,
            fmt(
                "The producer snapshot at offset %s lists producer %s epoch %s with its last batch at offset "
                "%s, at or above %s, but the log holds %s: its data is lost.",
                "snapshot_offset",
                "producer_id",
                "producer_epoch",
                "last_offset",
                kept_start(),
                F.when(F.col("_first").isNull(), F.lit("no batch of that producer")).otherwise(
                    fmt("none of that producer's batches up to it (its first is at offset %s)", "_first")
                ),
            ),
        )
        .otherwise(
            fmt(
                "The producer snapshot at offset %s lists producer %s epoch %s (without a batch offset: a "
                "marker raised its epoch, below the snapshot), but the log, complete from offset 0, holds "
                "%s: its data is lost.",
                "snapshot_offset",
                "producer_id",
                "producer_epoch",
                F.when(F.col("_first").isNull(), F.lit("no batch or marker of that producer")).otherwise(
                    fmt(
                        "none of that producer's batches or markers below it (its first is at offset %s)",
                        "_first",
                    )
                ),
            )
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset=F.when(has_offset, F.col("last_offset")),
        last_offset=F.when(has_offset, F.col("last_offset")),
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
    )
    return retained.unionByName(lost)


# One replica's dumps of a partition in time: by capture time, then (two dumps of one time: a
# `--captured-at` given twice, copies that kept their files' times) by what only rises in one replica's
# log: its batches' highest leader epoch and its log start; then its end (which a follower's truncation
# lowers: last); the dump id last.
_DUMP_ORDER = ("capture_time_ms", "max_leader_epoch", "log_start_offset", "log_end_offset", "dump_id")


def previous_dumps(logs: DataFrame) -> DataFrame:
    """Each log with the log of the same (replica, topic, partition) and topic incarnation
    (`logs.log_bounds`) in the dump captured just before it."""
    w = Window.partitionBy("replica", *PARTITION_OF_LOG).orderBy(*_DUMP_ORDER)
    return logs.select(
        "log_key",
        *LOG_KEY,
        "incarnation",
        "log_start_offset",
        "first_kept_offset",
        "log_end_offset",
        "remote_log_start",
        "compacted",
        "cleaned_to",
        "capture_time_ms",
        F.lag("log_key").over(w).alias("previous_log_key"),
        F.lag("dump_id").over(w).alias("previous_dump_id"),
        F.lag("capture_time_ms").over(w).alias("previous_capture_time_ms"),
        F.lag("high_watermark").over(w).alias("previous_high_watermark"),
    ).where(F.col("previous_log_key").isNotNull())


def gone_since_previous_dump(
    producers: DataFrame, logs: DataFrame, corrupt: DataFrame | None = None
) -> DataFrame:
    """The producers of each log's previous dump (`previous_dumps`) with no batch in the log (not even a
    CRC-failed one, `corrupt`: `corrupt_holders`): the log's
    columns, `producer_id`, `retained_first_offset` and `retained_last_offset` (its first and last
    offsets there; the last is `L`), `producer_timestamp` and `producer_data_timestamp` (its newest
    batch's or marker's, and its newest data batch's there), `fenced_by_marker`, `txn_open` (its
    transactional data there has no marker after it), `previous_dump_id`, `previous_capture_time_ms`
    and `previous_high_watermark` (`producers`: `history.producer_summary`), and
    `held_elsewhere`: the log of another replica of the partition (and topic incarnation), in a dump
    captured as late or later (or where this log knew no later leader epoch: `held_elsewhere`), holds
    the producer's batches up to `L` or further."""
    summary = producers.withColumn(
        "txn_open",
        F.coalesce(
            F.col("last_transactional_data") > F.coalesce(F.col("last_marker"), F.lit(-1)), F.lit(False)
        ),
    ).drop("last_marker", "last_transactional_data")
    earlier = previous_dumps(logs).join(
        summary.withColumnRenamed("log_key", "previous_log_key"), "previous_log_key", "inner"
    )
    gone = earlier.join(summary.select("log_key", "producer_id"), ["log_key", "producer_id"], "left_anti")
    if corrupt is not None:
        gone = gone.join(corrupt, ["log_key", "producer_id"], "left_anti")
    # Where the later log ends before L, the replica may be catching up (a follower, or a broker back
    # with an empty volume): another replica's log, dumped as late or later or of a leader epoch as late,
    # that holds the producer to L says nothing was lost.
    held = held_elsewhere(gone, producers, logs, "retained_last_offset")
    return gone.join(held, ["log_key", "producer_id"], "left").withColumn(
        "held_elsewhere", F.coalesce(F.col("held_elsewhere"), F.lit(False))
    )


def held_elsewhere(rows: DataFrame, producers: DataFrame, logs: DataFrame, last: str) -> DataFrame:
    """(log_key, producer_id, held_elsewhere) of the `rows` (a log's `log_key`, `replica` and partition
    columns, `producer_id` and `last`, an offset) whose producer the log of another replica of the
    partition and topic incarnation, in a dump captured as late or later, holds up to `last` or further
    (`producers`: `history.producer_summary`). A dump's time is its newest replica's (`dump_time_ms`):
    its replicas are one moment, whatever order their files were copied in (`cp` without -p dates each
    replica's by its copy, seconds apart). A dump captured earlier counts too where the row's log knew
    of no leader epoch later than that log did (`known_leader_epoch`: its batches' and its
    leader-epoch-checkpoint's): a replica gives up a tail only to a later leader's epoch, so one that
    knew none is behind the other (a broker dumped under its own label after another, or a follower
    back with an empty volume), whichever was copied first."""
    holders = producers.select(
        F.col("log_key").alias("_h_key"), "producer_id", F.col("retained_last_offset").alias("_h_last")
    ).join(
        F.broadcast(
            logs.select(
                F.col("log_key").alias("_h_key"),
                *[F.col(c).alias(f"_h_{c}") for c in ("replica", *PARTITION_OF_LOG)],
                F.col("dump_time_ms").alias("_h_time"),
                F.col("known_leader_epoch").alias("_h_epoch"),
            )
        ),
        "_h_key",
        "inner",
    )
    return (
        rows.select(
            "log_key",
            "producer_id",
            "replica",
            *PARTITION_OF_LOG,
            F.col(last).alias("_last"),
        )
        .join(
            F.broadcast(
                logs.select(
                    "log_key",
                    F.col("dump_time_ms").alias("_time"),
                    F.col("known_leader_epoch").alias("_epoch"),
                )
            ),
            "log_key",
        )
        # The partition's columns are join keys too (null-safe): a producer id is only met again in its
        # own partition's logs.
        .join(
            holders.withColumnRenamed("producer_id", "_h_producer_id"),
            (F.col("producer_id") == F.col("_h_producer_id"))
            & F.col("topic").eqNullSafe(F.col("_h_topic"))
            & F.col("partition").eqNullSafe(F.col("_h_partition"))
            & F.col("incarnation").eqNullSafe(F.col("_h_incarnation")),
            "inner",
        )
        .where(
            ~F.col("replica").eqNullSafe(F.col("_h_replica"))
            & (
                (F.col("_h_time") >= F.col("_time"))
                | F.coalesce(F.col("_h_epoch") >= F.col("_epoch"), F.lit(False))
            )
            & (F.col("_h_last") >= F.col("_last"))
        )
        .select("log_key", "producer_id", F.lit(True).alias("held_elsewhere"))
        .distinct()
    )


def _producer_at(offset: str) -> dict[str, Any]:
    """A whole-producer finding's fields: its id, and its last known offset (`L`) as its offsets."""
    return {
        "producer_id": "producer_id",
        "first_offset": offset,
        "last_offset": offset,
        "related_offset": offset,
    }


def producers_across_dumps(gone: DataFrame, profile: Profile, entries: DataFrame | None = None) -> DataFrame:
    """UNKNOWN_PRODUCER_RETENTION (info) or UNKNOWN_PRODUCER_LOSS (critical): a producer of the earlier dump
    absent from the later one (seed 000 rule 4; `gone`: `gone_since_previous_dump`). One the later
    log's newest snapshot (`entries`: `latest_snapshot_entries`) lists at or past its last offset here is
    left to `snapshot_producers`, which judges it by that later state; a staler entry does not hide what
    the earlier dump shows. A later log that ends before L, where another replica's log holds the
    producer (`held_elsewhere`), is a replica behind, not loss."""
    if entries is not None:
        # The snapshot knows the producer at least as late as the earlier dump did: its rule judges it.
        listed = entries.select("log_key", "producer_id", F.col("last_offset").alias("_listed_last"))
        gone = gone.join(
            listed,
            ["log_key", "producer_id"],
            "left",
        ).where(F.coalesce(F.col("_listed_last") < F.col("retained_last_offset"), F.lit(True)))
    common = _producer_at("retained_last_offset")
    retention = to_findings(
        gone.where(F.col("retained_last_offset") < F.col("first_kept_offset")),
        "UNKNOWN_PRODUCER_RETENTION",
        fmt(
            "Producer %s, last seen at offset %s in dump %s, is absent from this dump because the log "
            "start offset moved to %s (its batches: %s): nothing is lost (" + _retained_state(profile) + ").",
            "producer_id",
            "retained_last_offset",
            "previous_dump_id",
            "log_start_offset",
            below_start_cause(),
        ),
        explained_by=F.lit("retention"),
        producer_epoch="last_epoch",
        **common,
    )
    # A producer the broker had forgotten loses the cleaner's protection of its last batch (§5.9): on a
    # compacted log all of its batches may be gone without loss, where the broker may have forgotten it
    # before the later dump: its newest batch then is at least producer.id.expiration.ms older (a later
    # batch of its, gone too, would be newer still). 1.0 to 2.4.0 time the expiry from data batches only.
    # (A producer the earlier dump shows by its markers alone: their time, a bound all the same.) There a
    # marker that raised the epoch after its last data batch left it no time at all (`fenced_by_marker`):
    # the broker's next expiry check, at most EXPIRY_CHECK_INTERVAL_MS on, forgot it, and the cleaner
    # may drop that marker once it is past the delete horizon (delete.retention.ms) too.
    idle = F.col("capture_time_ms") - F.col("producer_timestamp")
    if profile.markers_refresh_expiry:
        forgotten = idle >= profile.producer_id_expiration_ms
    else:
        idle_since_data = F.col("capture_time_ms") - F.coalesce(
            "producer_data_timestamp", "producer_timestamp"
        )
        forgotten = (idle_since_data >= profile.producer_id_expiration_ms) | (
            F.col("fenced_by_marker") & (idle >= max(EXPIRY_CHECK_INTERVAL_MS, profile.delete_retention_ms))
        )
    # A transaction open in the earlier dump kept its producer (`isProducerExpired` needs none open),
    # and the cleaner cleans no further than the last stable offset: its batches could go only once a
    # marker, written after that dump, closed it; the cleaner keeps a marker delete.retention.ms at
    # least, and where markers restart the expiry time the producer is remembered that long after it.
    after_marker = max(
        profile.delete_retention_ms,
        profile.producer_id_expiration_ms if profile.markers_refresh_expiry else 0,
    )
    closed_since = F.col("capture_time_ms") - F.col("previous_capture_time_ms") >= after_marker
    forgotten = F.coalesce(forgotten & (~F.col("txn_open") | closed_since), F.lit(False))
    # A log that ends before L while another replica's holds the producer: this replica is behind.
    behind = (F.col("retained_last_offset") >= F.col("log_end_offset")) & F.col("held_elsewhere")
    loss = to_findings(
        gone.where(
            (F.col("retained_last_offset") >= F.col("first_kept_offset"))
            & ~(compaction_may_have_removed(F.col("retained_last_offset")) & forgotten)
            & ~behind
        ),
        "UNKNOWN_PRODUCER_LOSS",
        F.concat(
            fmt(
                "Producer %s wrote up to offset %s in dump %s, but this dump holds none of its batches "
                "although its log holds offsets from %s: the producer's data was lost or rewritten",
                "producer_id",
                "retained_last_offset",
                "previous_dump_id",
                "first_kept_offset",
            ),
            # All of it above the earlier dump's high watermark: not yet committed when it was dumped.
            F.when(
                F.col("retained_first_offset") >= F.col("previous_high_watermark"),
                fmt(
                    "; all of it lay at or above the high watermark that dump's checkpoint recorded, %s "
                    "(offsets %s to %s; the checkpoint can lag the broker's by seconds): if not yet "
                    "committed then, a leader change truncated batches an acks=all producer was never told "
                    "were written",
                    "previous_high_watermark",
                    "retained_first_offset",
                    "retained_last_offset",
                ),
            ).otherwise(F.lit("")),
            F.lit("."),
            # A partition directory or text given alone names no broker: its dumps are taken for one
            # replica's over time, which two brokers' copies are not (a follower behind its leader).
            F.when(
                F.col("replica").isNull() & (F.col("log_end_offset") <= F.col("retained_last_offset")),
                F.lit(
                    " Neither dump names its broker (a partition directory or text given alone), so both "
                    "were taken for one replica's dumps over time: if they are two brokers' copies, this "
                    "one may be a follower that had not yet fetched the producer's batches (give each "
                    "broker's log directory, whose meta.properties names it)."
                ),
            ).otherwise(F.lit("")),
        ),
        producer_epoch="last_epoch",
        **common,
    )
    return retention.unionByName(loss)


REMOTE_METADATA_TOPIC = "__remote_log_metadata"
_COPIED = "COPY_SEGMENT_FINISHED"
# RemoteLogSegmentState by id (`kafka_log_decoder.remote_log_metadata.SEGMENT_STATES`).
_SEGMENT_STATES = tuple(SEGMENT_STATES[i] for i in sorted(SEGMENT_STATES))


def remote_segments(events: DataFrame, quarantine: DataFrame) -> DataFrame:
    """The remote segments that tiered storage's metadata (`remote_log_metadata`, KIP-405) lists: one row
    per (dump_id, topic, partition, topic_id, segment_id) with its offsets, its last state, `copied`
    (the last state is COPY_SEGMENT_FINISHED: the remote tier holds its offsets) and `complete`.

    A partition's events are all in one `__remote_log_metadata` partition, in the order the remote log
    manager wrote them; a segment's state is the highest it reached (the broker's cache refuses a change
    back). The
    replicas of a metadata partition hold the same records at the same offsets: each is read once.
    `complete` says the events can prove an absence: the metadata partition's log holds its first
    offset (the topic keeps every event by default, `retention.ms` -1) and every offset after it, every
    value in it was an event and none of its bytes were quarantined, every segment's first event is
    there and in the state the broker accepts, and the partition was not being deleted (a
    RemotePartitionDeleteMetadataRecord)."""
    meta = ("dump_id", "partition")
    unique = events.dropDuplicates([*meta, "offset"])
    damaged = quarantine.where(F.col("topic") == REMOTE_METADATA_TOPIC).select(*meta).distinct()
    whole = (
        unique.groupBy(*meta)
        .agg(
            (F.min("offset") == 0).alias("_starts"),
            # No event missing between: the remote log manager's producer is not transactional, so its
            # events hold every offset (a copy that lost a middle segment, or cut one short, does not).
            (F.count(F.lit(1)) == F.max("offset") + 1).alias("_contiguous"),
            F.max(F.col("error").isNotNull()).alias("_unreadable"),
            # A segment's first record in another state than COPY_SEGMENT_STARTED: the broker refuses it
            # (`RemoteLogMetadataCache.addCopyInProgressSegment`), so these events are not its view.
            F.max((F.col("event") == "segment") & (F.col("state") != _SEGMENT_STATES[0])).alias("_refused"),
        )
        .join(damaged.withColumn("_damaged", F.lit(True)), list(meta), "left")
        .select(
            *meta,
            (
                F.col("_starts")
                & F.col("_contiguous")
                & ~F.col("_unreadable")
                & ~F.coalesce(F.col("_refused"), F.lit(False))
                & F.col("_damaged").isNull()
            ).alias("_whole"),
        )
    )
    partition = ("dump_id", "segment_topic", "segment_partition", "topic_id")
    # A segment's state: the highest it reached. Every valid change raises the state id
    # (`RemoteLogSegmentState.isValidTransition`); the cache drops any other (a stale leader's late
    # COPY_SEGMENT_FINISHED after DELETE_SEGMENT_STARTED leaves it being deleted).
    states = F.array(*[F.lit(state) for state in _SEGMENT_STATES])
    per_segment = (
        unique.where(F.col("event").isin("segment", "segment_update"))
        .groupBy(*meta, *partition, "segment_id")
        .agg(
            F.max("start_offset").alias("start_offset"),
            F.max("end_offset").alias("end_offset"),
            F.element_at(states, F.max(F.array_position(states, F.col("state"))).cast("int")).alias("state"),
        )
    )
    deleting = (
        unique.where(F.col("event") == "partition_delete")
        .select(*partition)
        .distinct()
        .withColumn("_deleting", F.lit(True))
    )
    per_partition = Window.partitionBy(*partition)
    return (
        per_segment.join(whole, list(meta), "left")
        .join(deleting, list(partition), "left")
        .withColumn(
            "complete",
            F.min(F.col("_whole") & F.col("start_offset").isNotNull()).over(per_partition)
            & F.col("_deleting").isNull(),
        )
        .select(
            "dump_id",
            F.col("segment_topic").alias("topic"),
            F.col("segment_partition").alias("partition"),
            "topic_id",
            "segment_id",
            "start_offset",
            "end_offset",
            "state",
            (F.col("state") == _COPIED).alias("copied"),
            "complete",
        )
    )


def remote_tier_holes(remote: DataFrame, logs: DataFrame) -> DataFrame:
    """REMOTE_SEGMENT_MISSING (critical) for every run of offsets of a tiered log (KIP-405) that lies
    below its local start and at or above the broker's log start (`remote_log_start`), between two
    segments that `remote_segments` says were copied, in neither: the remote tier should hold every
    offset from its first copied segment to the local start (the broker deletes a local segment only
    once its copy finished), so these were deleted from it, or never copied, while their local copies
    are gone. So too the offsets from the broker's log start to the first copied segment where no
    segment the metadata lists (copied or deleted) held any of them: never copied. Judged only where the
    dump's metadata for the partition is `complete`; the uncopied or deleted segment that held the first
    offset, if the metadata lists one, is named."""
    tiers = _remote_tier(
        logs.select("log_key", *LOG_KEY, "topic_id", "remote_log_start", "log_start_offset"), remote
    )
    tiers = tiers.where(F.col("complete"))
    copied = tiers.where(F.col("copied"))
    # Segments in start order; a hole starts where a segment starts past every earlier one's end.
    before = (
        Window.partitionBy("log_key")
        .orderBy("start_offset", "end_offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    bound = F.coalesce(F.col("remote_log_start"), F.lit(0))
    holes = (
        copied.withColumn("_reached", F.max("end_offset").over(before))
        .where(F.col("_reached").isNotNull() & (F.col("start_offset") > F.col("_reached") + 1))
        .select(
            "log_key",
            *LOG_KEY,
            F.greatest(F.col("_reached") + 1, bound).alias("first"),
            F.least(F.col("start_offset") - 1, F.col("log_start_offset") - 1).alias("last"),
            "log_start_offset",
        )
        .where(F.col("first") <= F.col("last"))
    )
    # From the broker's log start up to the first copied segment: offsets no segment the metadata lists,
    # copied or deleted (its events stay), ever held were never copied, yet their local segments are
    # gone. Only a range no listed segment touches (one partly held may be what remote retention took).
    lead = (
        copied.groupBy("log_key", *LOG_KEY, "remote_log_start", "log_start_offset")
        .agg(F.min("start_offset").alias("_first_copied"))
        .where(F.col("remote_log_start").isNotNull())
        .select(
            "log_key",
            *LOG_KEY,
            F.col("remote_log_start").alias("first"),
            F.least(F.col("_first_copied") - 1, F.col("log_start_offset") - 1).alias("last"),
            "log_start_offset",
        )
        .where(F.col("first") <= F.col("last"))
    )
    listed = tiers.select(
        F.col("log_key").alias("_k"), F.col("start_offset").alias("_s"), F.col("end_offset").alias("_e")
    )
    lead = lead.join(
        listed,
        (F.col("log_key") == F.col("_k")) & (F.col("_s") <= F.col("last")) & (F.col("_e") >= F.col("first")),
        "left_anti",
    )
    holes = holes.unionByName(lead)
    extent = copied.groupBy("log_key").agg(
        F.min("start_offset").alias("remote_start"), F.max("end_offset").alias("remote_end")
    )
    segment = F.struct("start_offset", "end_offset", "segment_id", "state")
    gone = (
        holes.select("log_key", "first")
        .join(tiers.where(~F.col("copied")), "log_key")
        .where((F.col("start_offset") <= F.col("first")) & (F.col("end_offset") >= F.col("first")))
        .groupBy("log_key", "first")
        .agg(F.min(segment).alias("gone"))
    )
    found = holes.join(extent, "log_key").join(gone, ["log_key", "first"], "left")
    return to_findings(
        found,
        "REMOTE_SEGMENT_MISSING",
        fmt(
            "Offsets %s-%s (%s) lie below the local log start offset %s and in no remote segment that "
            "__remote_log_metadata lists as copied, although copied segments hold offsets %s-%s %s%s: "
            "%s (tiered storage, KIP-405: a local segment is deleted only once its copy finished).",
            "first",
            "last",
            F.col("last") - F.col("first") + 1,
            "log_start_offset",
            "remote_start",
            "remote_end",
            F.when(
                F.col("last") < F.col("remote_start"),
                F.lit(
                    "above them, and no segment it lists ever held these, at or above the broker's log start"
                ),
            ).otherwise(F.lit("around them")),
            _gone_segment(),
            F.when(
                F.col("last") < F.col("remote_start"),
                F.lit("never copied to the remote tier, yet gone from the local log"),
            ).otherwise(F.lit("the remote tier lost them")),
        ),
        first_offset="first",
        last_offset="last",
        related_offset="gone.start_offset",
        missing_records=F.col("last") - F.col("first") + 1,
    )


def _gone_segment() -> Column:
    """The clause that names the `gone` segment, `(remote segment ID held offsets A-B and is STATE)`,
    or nothing without one."""
    return F.coalesce(
        fmt(
            " (remote segment %s held offsets %s-%s and is %s)",
            "gone.segment_id",
            "gone.start_offset",
            "gone.end_offset",
            "gone.state",
        ),
        F.lit(""),
    )


# What an acknowledged offset is judged against: its log, where the log starts, and whether the cleaner
# may have removed batches there.
_ACK_TARGET = ("log_key", *LOG_KEY, "log_start_offset", "first_kept_offset", "compacted", "cleaned_to")


def acked_records(
    batches: DataFrame,
    acks: DataFrame,
    logs: DataFrame,
    records: DataFrame | None = None,
    *,
    keys: bool = False,
    app: AppSequenceSpec | None = None,
    incarnations: bool = False,
    remote: DataFrame | None = None,
    producers: DataFrame | None = None,
    profile: Profile | None = None,
    judged_elsewhere: DataFrame | None = None,
    unreadable: DataFrame | None = None,
    keep: Store = as_is,
) -> DataFrame:
    """ACKED_RECORD_RETENTION (info) or ACKED_RECORD_MISSING (critical) for every acknowledged offset,
    checked against the newest dump of each replica. With `records` (record-level mode), an ack that
    names its record's key (`keys`) or app producer and sequence (`app`: the extractor) must also
    find them in the record at its offset (`_rewritten`).

    With `remote` (`remote_segments`: the dump holds tiered storage's metadata, KIP-405), an ack below
    a log's local start is also judged against the remote segments its dump's metadata lists for the
    partition (and topic id): in a copied segment it is in remote storage; below the first copied
    segment, deleted from remote storage by retention; past the last, the metadata predates the log
    (the broker deletes a local segment only once its copy finished). Between copied segments, in
    none of them, and with metadata that can prove it (`complete`), it is lost from the remote tier:
    ACKED_RECORD_MISSING, rule "KIP-405 remote log metadata".

    An offset at or past a log's end that the newest log of another replica (same partition and
    incarnation) holds in a batch of a leader epoch at least the latest this log knew of (where either
    is unknown: that log reaches past it, from a dump captured as late or later) is that replica
    behind (a follower catching up, or a replica the newer dump lacks): only the longer log judges it.

    With `incarnations` (some partition's dumps name two topic ids: the topic was deleted and created
    again, `logs.log_bounds`), each ack is checked against the newest dump of each replica in each
    incarnation, and belongs to the incarnation whose log holds it, on whichever broker: the logs of
    the other incarnations do not judge it. (An
    ack that names neither producer, key nor app sequence is held by any batch at its offset.)

    With `producers` (`history.producer_summary`) and `profile`, a producer the ledger names of which
    the log holds no batch is also judged as a whole (`_acked_producers`), unless `judged_elsewhere`
    (log_key, producer_id: the snapshot and earlier-dump rules' producers) holds it.

    An ack without an offset (a negative one: the -1 of a Java `acks=0` callback or of a success the
    broker gave no offset for, librdkafka's -1001) names no record to look for: it is not judged (it
    is no record below the log start either).

    Where unreadable segment bytes of the log (`unreadable`: `consistency.unreadable_regions`) begin
    after the batch before a missing range and at or before its last offset, the message names the
    first such region: the records may be in it. The finding stays (nothing tells them from lost ones).

    Acks of a partition no dump holds are judged by nothing: one ACKS_NOT_CHECKED (warning) per ledger
    and partition says so, with the offsets' range and number. So are acks timed after the capture of
    the logs that would hold them, that no log holds or judges (the others' newest log reaches no
    further): one ACKS_NOT_CHECKED per partition (rule "ack ledger timed after the dump").

    `keep(frame, name)` (`pipeline.local_checkpoint`) stores the checks and their runs of offsets, which
    several of these findings read; without it each reader computes them again."""
    acks = acks.where(F.col("offset") >= 0)
    newest = Window.partitionBy("replica", *PARTITION_OF_LOG).orderBy(*[F.col(c).desc() for c in _DUMP_ORDER])
    targets = (
        logs.withColumn("_rank", F.row_number().over(newest))
        .where(F.col("_rank") == 1)
        .select(*_ACK_TARGET, "topic_id", "remote_log_start", "capture_time_ms")
    )
    reach = _reach(logs, targets)
    ack_rows = acks.select(
        "topic",
        "partition",
        "offset",
        F.col("producer_id").alias("ack_producer_id"),
        F.col("producer_epoch").alias("ack_producer_epoch"),
        F.col("sequence").alias("ack_sequence"),
        F.col("timestamp").alias("ack_timestamp"),
        # An empty key names none: a ledger may write a null key so (Go's `string(msg.Key)` of nil), and
        # compared with the record's null key it read as another record at the offset.
        (
            F.when(F.col("key") != "", F.col("key"))
            if records is not None and keys
            else F.lit(None).cast("string")
        ).alias("ack_key"),
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
        "ack_timestamp",
        "capture_time_ms",
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
        F.lit(None).cast("long").alias("first_kept_offset"),
        F.lit(None).cast("boolean").alias("compacted"),
        F.lit(None).cast("long").alias("cleaned_to"),
        F.col("base_offset").alias("at"),
        F.lit(0).alias("_order"),
        F.struct(
            "base_offset",
            "last_offset",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "partition_leader_epoch",
        ).alias("b"),
    )
    events = events_acks.withColumn("b", F.lit(None).cast(events_batches.schema["b"].dataType)).unionByName(
        events_batches.withColumn("ack_producer_id", F.lit(None).cast("long"))
        .withColumn("ack_producer_epoch", F.lit(None).cast("short"))
        .withColumn("ack_sequence", F.lit(None).cast("int"))
        .withColumn("ack_key", F.lit(None).cast("string"))
        .withColumn("ack_app", F.lit(None).cast("string"))
        .withColumn("ack_timestamp", F.lit(None).cast("long"))
        .withColumn("capture_time_ms", F.lit(None).cast("long"))
    )
    tier = None if remote is None else _remote_tier(acked, remote)
    if tier is not None:
        events, tier_bounds = _with_remote_segments(events, tier)
    # The batch holding an offset is the last batch starting at or before it (one sort per partition).
    w = Window.partitionBy("log_key").orderBy("at", "_order").rowsBetween(Window.unboundedPreceding, 0)
    located = events.withColumn("cover", F.last("b", ignorenulls=True).over(w))
    if tier is not None:
        # The remote segments starting at or before the offset, copied or not, whose end is highest: if
        # any holds the offset, that one does.
        located = located.withColumns({"copied": F.max("r").over(w), "other": F.max("d").over(w)})
        located = located.where(F.col("_order") == 1).join(F.broadcast(tier_bounds), "log_key", "left")
    else:
        located = located.where(F.col("_order") == 1).withColumns(
            {
                "copied": F.lit(None).cast(_SEGMENT),
                "other": F.lit(None).cast(_SEGMENT),
                "remote_start": F.lit(None).cast("long"),
                "remote_end": F.lit(None).cast("long"),
                "remote_complete": F.lit(None).cast("boolean"),
                "remote_log_start": F.lit(None).cast("long"),
            }
        )
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
    # Below the first offset not deleted (`first_kept_offset`): an ack between it and a log start that
    # DeleteRecords moved inside the first segment names a record still on disk.
    below = F.col("at") < F.col("first_kept_offset")
    outcome = (
        # Below the local start: deleted by retention, or (tiered storage) judged by the remote tier.
        F.when(below & F.col("remote_complete").isNull(), F.lit("retention"))
        # Below the broker's log start (the checkpoint of a log with remote storage): deleted.
        .when(below & (F.col("at") < F.col("remote_log_start")), F.lit("retention"))
        .when(below & (F.col("copied.end_offset") >= F.col("at")), F.lit("remote"))
        .when(below & ~F.col("remote_complete"), F.lit("retention"))
        # Below the first copied segment: deleted from the remote tier where a segment the metadata lists
        # held it (its DELETE events stay: the metadata topic keeps every event). In none, at or above the
        # broker's log start, it was never copied, and the broker deletes a local segment only once its
        # copy finished (`UnifiedLog.deletableSegments`) or the log start passed it: lost.
        .when(
            below
            & (F.col("remote_start").isNull() | (F.col("at") < F.col("remote_start")))
            & (
                F.coalesce(F.col("other.end_offset") >= F.col("at"), F.lit(False))
                | F.col("remote_log_start").isNull()
            ),
            F.lit("remote_deleted"),
        )
        .when(
            below & (F.col("remote_start").isNull() | (F.col("at") < F.col("remote_start"))),
            F.lit("remote_never"),
        )
        .when(below & (F.col("at") > F.col("remote_end")), F.lit("remote_pending"))
        .when(below, F.lit("remote_absent"))
        .when(matches, F.lit("ok"))
        # The cleaner removes whole batches below its checkpoint (a compacted topic's records are
        # replaced by later ones of their key, tombstones and aborted data in time): an acknowledged
        # offset there may be gone without loss. Not past `cleaned_to` nor the log's end: this broker's
        # cleaner never reaches its last segment (a compacted topic named by the profile alone too),
        # unless that segment shows a leader's cleaner in what this replica fetched.
        .when(
            ~covered
            & compaction_may_have_removed(F.col("at") - 1)
            # (a cleaner checkpoint above the last dumped segment says that one was not the active one)
            & (
                F.col("at")
                < F.coalesce(
                    F.greatest(F.col("cleaned_to"), F.col("last_segment_offset")), F.col("log_end_offset")
                )
            ),
            F.lit("ok"),
        )
        .when(~covered, F.lit("absent"))
        .otherwise(F.lit("other"))
    )
    at_offset = Window.partitionBy("topic", "partition", "incarnation", "at")
    newest_leader = F.max(F.when(covered, F.col("cover.partition_leader_epoch"))).over(at_offset)
    # A log that ends before the offset, where another replica's newest log holds it: this replica was
    # behind (a follower catching up, or a broker the newer dump lacks); the longer log judges the
    # offset. Where both leader epochs are known, it is behind when it knew of no leader epoch later
    # than the one that wrote the offset there (`known_leader_epoch`: its batches' and its
    # leader-epoch-checkpoint's): a follower truncates only to a later leader's epoch end, so one that
    # knew none never gave the offset up, whenever each log was copied. One that did (a replica
    # elected past the offset: an unclean election, an `acks=1` failover) is judged here, though the
    # old leader's log was copied later and still holds its tail. Where either epoch is unknown (v0
    # and v1 batches carry none), it is behind where that log was captured as late or later.
    held_since = F.when(newest_leader >= 0, newest_leader) >= F.col("known_leader_epoch")
    lagging = (
        ~covered
        & (F.col("at") >= F.col("log_end_offset"))
        & F.coalesce(held_since, F.col("at") < F.col("_reach"))
    )
    # At or above this replica's high watermark the offset was not committed here: a leader that crashed
    # holds its uncommitted tail until it follows again and truncates it to the new leader's epoch end
    # (`AbstractFetcherThread`). Where another replica's log holds the offset in a batch of a later
    # leader epoch, that leader's log judges the ack (ACKED_RECORD_MISSING there if the record is not
    # its), and this one's other record is the tail it will truncate. A batch of the same or an older
    # epoch elsewhere superseded nothing (a new leader whose mark lags, an unclean election's loser):
    # the ack is judged here as anywhere.
    superseded = (
        (F.col("at") >= F.col("high_watermark"))
        & covered
        & (F.col("cover.partition_leader_epoch") < newest_leader)
    )
    outcome = F.when(~below & (lagging | (superseded & (outcome == "other"))), F.lit("lag")).otherwise(
        outcome
    )
    # An ack the ledger times after the log's capture (`--captured-at`, else its newest file's mtime):
    # the dump was taken before it, and cannot hold its record (a ledger that runs past the dump).
    later = F.coalesce(F.col("ack_timestamp") > F.col("capture_time_ms"), F.lit(False))
    outcome = F.when(~below & later & (outcome != "ok"), F.lit("later")).otherwise(outcome)
    # Every ack against every target log, and the runs of offsets judged alike, are read by several
    # findings (each of the kinds below, the producers' verdicts, the acks left unjudged): `keep`
    # (`pipeline.local_checkpoint`) computes each once instead of once per reader.
    checked = keep(
        located.join(F.broadcast(reach), "log_key", "left").withColumn("_outcome", outcome), "ack checks"
    )
    judged = checked.where(~F.col("_outcome").isin("ok", "lag", "later"))
    rewritten = None
    uncompared = None
    if records is not None and (keys or app is not None):
        rewritten, uncompared = _rewritten(checked, records, acked, keys, app)
        judged = judged.unionByName(rewritten)
    if incarnations:
        # The acks some incarnation's log holds: judged nowhere else.
        held = checked.where(F.col("_outcome") == "ok")
        if rewritten is not None:
            held = _without(held, rewritten, ("log_key", *_ACK_IDENTITY))
        the_ack = ("topic", "partition", *_ACK_IDENTITY)
        owned = held.select(
            *[F.col(c).alias(f"_h_{c}") for c in the_ack], F.col("incarnation").alias("_h_inc")
        )
        same_ack = [F.col(c).eqNullSafe(F.col(f"_h_{c}")) for c in the_ack]
        judged = judged.join(
            owned.distinct(), [*same_ack, F.col("incarnation") != F.col("_h_inc")], "left_anti"
        )
    # Consecutive offsets with one outcome and producer are one finding (offset minus rank is constant
    # along a run; a dense rank, since two acks with different keys may name one offset). A run's
    # offsets are consecutive, so it holds last - first + 1 records however many ledger rows name each
    # (a ledger that logged an ack twice, at two times or with two keys, counts the record once).
    run = Window.partitionBy("log_key", "_outcome", "ack_producer_id").orderBy("at")
    judged = judged.withColumn("_run", F.col("at") - F.dense_rank().over(run))
    ranges = judged.groupBy(
        "log_key", "dump_id", "replica", "topic", "partition", "_outcome", "ack_producer_id", "_run"
    ).agg(
        F.min("at").alias("first"),
        F.max("at").alias("last"),
        (F.max("at") - F.min("at") + 1).alias("n"),
        F.first("log_start_offset").alias("log_start_offset"),
        F.first("first_kept_offset").alias("first_kept_offset"),
        F.min_by("cover", "at").alias("cover"),
        F.min("copied.start_offset").alias("copied_from"),
        F.max("copied.end_offset").alias("copied_to"),
        F.count_distinct("copied.segment_id").alias("copied_segments"),
        # A remote segment, not (or no longer) copied, that held the first such offset.
        F.min(F.when(F.col("other.end_offset") >= F.col("at"), F.col("other"))).alias("gone"),
        F.first("remote_start").alias("remote_start"),
        F.first("remote_end").alias("remote_end"),
        F.first("remote_log_start").alias("_remote_log_start"),
    )
    ranges = keep(ranges, "ack ranges")
    # " (producer N)" when the ledger names the producer.
    who = F.format_string(" (producer %s)", F.col("ack_producer_id").cast("string"))
    ranges = ranges.withColumn("_who", F.when(F.col("ack_producer_id").isNotNull(), who).otherwise(""))
    explained = ("retention", "remote", "remote_deleted", "remote_pending")
    retention = to_findings(
        # Where the log's older segments are (`below_start_cause`): read for these ranges only.
        join_log(
            ranges.where(F.col("_outcome").isin(*explained)), logs, "remote_log_start", "log_start_source"
        ),
        "ACKED_RECORD_RETENTION",
        F.when(
            F.col("_outcome") == "remote",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s lie below the local log start offset %s: in "
                "remote storage (tiered storage, KIP-405: %s remote segment(s) that __remote_log_metadata "
                "lists as copied hold offsets %s-%s), not lost.",
                "n",
                "first",
                "last",
                "log_start_offset",
                "copied_segments",
                "copied_from",
                "copied_to",
            ),
        )
        .when(
            F.col("_outcome") == "remote_deleted",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s lie below the local log start offset %s and "
                "below the remote tier (tiered storage, KIP-405: %s): deleted from remote storage by "
                "retention, not lost.",
                "n",
                "first",
                "last",
                "log_start_offset",
                F.coalesce(
                    fmt(
                        "the first remote segment __remote_log_metadata lists as copied starts at %s",
                        "remote_start",
                    ),
                    F.lit("__remote_log_metadata lists no copied remote segment"),
                ),
            ),
        )
        .when(
            F.col("_outcome") == "remote_pending",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s lie below the local log start offset %s and past "
                "the last remote segment __remote_log_metadata lists as copied (to offset %s): the broker "
                "deletes a local segment only once its copy to remote storage finished (tiered storage, "
                "KIP-405), so the dump's remote log metadata is older than its log; not lost.",
                "n",
                "first",
                "last",
                "log_start_offset",
                "remote_end",
            ),
        )
        .otherwise(
            fmt(
                "%s acknowledged record(s) at offsets %s-%s lie below the log start offset %s: %s, not lost.",
                "n",
                "first",
                "last",
                "log_start_offset",
                below_start_cause(F.col("first"), F.col("log_start_source")),
            )
        ),
        producer_id="ack_producer_id",
        first_offset="first",
        last_offset="last",
        explained_by=F.lit("retention"),
    )
    lost_remotely = to_findings(
        ranges.where(F.col("_outcome").isin("remote_absent", "remote_never")),
        "ACKED_RECORD_MISSING",
        F.when(
            F.col("_outcome") == "remote_never",
            fmt(
                "%s acknowledged record(s) at offsets %s-%s%s lie below the local log start offset %s, at or "
                "above the broker's log start offset %s, and in no remote segment __remote_log_metadata "
                "lists, copied or deleted: never copied to the remote tier, yet gone from the local log "
                "(tiered storage, KIP-405: a local segment is deleted only once its copy finished): "
                "acknowledged data was lost.",
                "n",
                "first",
                "last",
                "_who",
                "log_start_offset",
                "_remote_log_start",
            ),
        ).otherwise(
            fmt(
                "%s acknowledged record(s) at offsets %s-%s%s lie below the local log start offset %s and in "
                "no remote segment that __remote_log_metadata lists as copied, although copied segments "
                "hold offsets %s-%s around them%s: acknowledged data was lost from the remote tier (tiered "
                "storage, KIP-405).",
                "n",
                "first",
                "last",
                "_who",
                "log_start_offset",
                "remote_start",
                "remote_end",
                _gone_segment(),
            )
        ),
        producer_id="ack_producer_id",
        first_offset="first",
        last_offset="last",
        related_offset="gone.start_offset",
        missing_records="n",
        rule=F.lit("KIP-405 remote log metadata"),
    )
    held_by = ("cover.producer_id", "cover.producer_epoch", "cover.base_offset")
    lost = ranges.where(~F.col("_outcome").isin(*explained, "remote_absent", "remote_never"))
    in_unreadable = F.lit("")
    if unreadable is not None:
        lost, in_unreadable = _unreadable_within(lost, unreadable)
    missing = to_findings(
        lost,
        "ACKED_RECORD_MISSING",
        F.when(
            F.col("_outcome") == "absent",
            F.concat(
                fmt(
                    "%s acknowledged record(s) at offsets %s-%s%s are not in the log although they are at "
                    "or above %s: acknowledged data was lost.",
                    "n",
                    "first",
                    "last",
                    "_who",
                    kept_start(),
                ),
                in_unreadable,
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
    # Acks of a partition no dump holds are checked against nothing: said once per partition, since a
    # ledger that matched no log (a partition not dumped, a topic misnamed) must not pass in silence.
    unchecked = (
        acks.join(targets.select("topic", "partition").distinct(), ["topic", "partition"], "left_anti")
        .groupBy("dump_id", "topic", "partition")
        .agg(*_offset_range("offset"))
        .withColumn("replica", F.lit(None).cast("string"))
    )
    not_checked = to_findings(
        unchecked,
        "ACKS_NOT_CHECKED",
        fmt(
            "%s acknowledged offset(s) from %s to %s name %s-%s, a partition no dump holds: they were not "
            "checked (dump that partition from its replicas to check them, or correct the ledger's topic).",
            "n",
            "first",
            "last",
            "topic",
            "partition",
        ),
        first_offset="first",
        last_offset="last",
    )
    # Acks timed after every capture of their partition that no dumped log holds (or judges: another
    # replica's longer log) were checked against nothing either: the ledger runs past the dumps.
    unjudged = (
        checked.groupBy("topic", "partition", *_ACK_IDENTITY)
        .agg(
            F.bool_or(~F.col("_outcome").isin("later", "lag")).alias("_judged"),
            F.bool_or(F.col("_outcome") == "later").alias("_later"),
            # (The logs that were captured before the ack: a log another one's reach judges is not.)
            F.max_by(
                F.when(F.col("_outcome") == "later", F.col("dump_id")),
                F.when(F.col("_outcome") == "later", F.col("capture_time_ms")),
            ).alias("dump_id"),
            F.max(F.when(F.col("_outcome") == "later", F.col("capture_time_ms"))).alias("captured"),
            F.min("ack_timestamp").alias("acked"),
        )
        .where(~F.col("_judged") & F.col("_later"))
        .groupBy("topic", "partition")
        .agg(
            *_offset_range("at"),
            F.max_by("dump_id", "captured").alias("dump_id"),
            F.max("captured").alias("captured"),
            F.min("acked").alias("acked"),
        )
        .withColumn("replica", F.lit(None).cast("string"))
    )
    after_capture = to_findings(
        unjudged,
        "ACKS_NOT_CHECKED",
        fmt(
            "%s acknowledged offset(s) from %s to %s of %s-%s, which no dumped log holds, are timed after "
            "the dump that would hold them was captured (epoch ms %s; the earliest such ack at %s): the "
            "dump cannot hold them, and they were not checked (dump the partition again, after the "
            "ledger's last ack, to check them).",
            "n",
            "first",
            "last",
            "topic",
            "partition",
            "captured",
            "acked",
        ),
        first_offset="first",
        last_offset="last",
        rule=F.lit("ack ledger timed after the dump"),
    )
    found = (
        retention.unionByName(missing)
        .unionByName(lost_remotely)
        .unionByName(not_checked)
        .unionByName(after_capture)
    )
    if uncompared is not None:
        found = found.unionByName(_uncompared_findings(uncompared))
    if producers is not None and profile is not None:
        found = found.unionByName(_acked_producers(ranges, producers, logs, profile, judged_elsewhere))
    return found


def _offset_range(offset: str) -> list[Column]:
    """`first`, `last` and `n` (how many distinct) of the acknowledged offsets `offset`, for a message."""
    return [
        F.min(offset).alias("first"),
        F.max(offset).alias("last"),
        F.count_distinct(offset).alias("n"),
    ]


def _unreadable_within(lost: DataFrame, unreadable: DataFrame) -> tuple[DataFrame, Column]:
    """The ranges of missing acks (`ranges` rows of `acked_records`) with the first unreadable region of
    their log (`consistency.unreadable_regions`) whose first possible offset lies after the batch before
    the range (`cover`) and at or before its last offset, where the range is absent from the log; and
    the sentence that names it (empty where there is none)."""
    log = ("dump_id", "replica", "topic", "partition")
    regions = unreadable.select(
        *[F.col(k).alias(f"_u_{k}") for k in log],
        F.col("region_first_offset").alias("_u_first"),
        F.struct("file", "position", "kind").alias("_u"),
    )
    near = [F.col(k).eqNullSafe(F.col(f"_u_{k}")) for k in log] + [
        F.col("_outcome") == "absent",
        F.col("_u_first") > F.coalesce(F.col("cover.last_offset"), F.lit(-1)),
        F.col("_u_first") <= F.col("last"),
    ]
    # One row per range: its first region (a range's key, as `ranges` groups it).
    first = Window.partitionBy("log_key", "_outcome", "ack_producer_id", "_run").orderBy(
        F.col("_u_first").asc_nulls_last(), F.col("_u.file"), F.col("_u.position")
    )
    named = (
        lost.join(regions, near, "left")
        .withColumn("_u_rank", F.row_number().over(first))
        .where(F.col("_u_rank") == 1)
        .drop("_u_rank", "_u_first", *[f"_u_{k}" for k in log])
    )
    note = F.when(
        F.col("_u").isNotNull(),
        fmt(
            " Unreadable bytes lie where they would be (%s at byte %s, %s): the records may be in them "
            "rather than lost.",
            F.col("_u.file"),
            F.col("_u.position"),
            F.col("_u.kind"),
        ),
    ).otherwise(F.lit(""))
    return named, note


# The ack outcomes that say an acknowledged record is gone at or above the log start, and those that
# explain its absence (a record lost from the remote tier is its ACKED_RECORD_MISSING alone).
_ACK_LOST = ("absent", "other")
_ACK_EXPLAINED = ("retention", "remote", "remote_deleted", "remote_pending")


def _acked_producers(
    ranges: DataFrame,
    producers: DataFrame,
    logs: DataFrame,
    profile: Profile,
    judged_elsewhere: DataFrame | None,
) -> DataFrame:
    """UNKNOWN_PRODUCER_LOSS (critical) or UNKNOWN_PRODUCER_RETENTION (info) for a producer the ack
    ledger names (contract §4: "a producer known earlier (earlier dump, snapshot or ack ledger, last
    offset L)") of which the log holds no batch at all, from the acks the record check judged
    (`ranges`: runs of one outcome): L is its last acknowledged offset there. Lost where some of its
    acknowledged records are gone at or above the log start; retention where every one of them lies
    below it. Acks the record check found held or excused (a compacted log's cleaner, a replica
    behind), or lost from the remote tier, leave no verdict of their own. One verdict per producer
    and log: one the snapshot or earlier-dump rule judges (`judged_elsewhere`: log_key, producer_id,
    last_offset) from a last offset at least L is left to it; where this rule judges one, theirs goes
    (`one_verdict_per_producer`)."""
    per_producer = (
        # A ledger row of a producer without idempotence names producer id -1, or none: no producer.
        ranges.where((F.col("ack_producer_id") >= 0) & ~F.col("_outcome").isin("rewritten"))
        .groupBy("log_key", *LOG_KEY, "ack_producer_id")
        .agg(
            F.max("last").alias("acked_last_offset"),
            F.min("first").alias("acked_first_offset"),
            F.sum(F.when(F.col("_outcome").isin(*_ACK_LOST), F.col("n"))).alias("lost_records"),
            F.min(F.col("_outcome").isin(*_ACK_EXPLAINED)).alias("all_explained"),
        )
        .withColumnRenamed("ack_producer_id", "producer_id")
    )
    absent = per_producer.join(
        producers.select("log_key", "producer_id"), ["log_key", "producer_id"], "left_anti"
    )
    if judged_elsewhere is not None:
        # Judged there from a last offset as late as the ledger's or later: one verdict per producer.
        known = judged_elsewhere.groupBy("log_key", "producer_id").agg(F.max("last_offset").alias("_known"))
        absent = absent.join(known, ["log_key", "producer_id"], "left").where(
            F.coalesce(F.col("_known") < F.col("acked_last_offset"), F.lit(True))
        )
    absent = join_log(absent, logs, "log_start_offset", "remote_log_start")
    common = _producer_at("acked_last_offset")
    retention = to_findings(
        absent.where(F.col("all_explained")),
        "UNKNOWN_PRODUCER_RETENTION",
        fmt(
            "The ack ledger names producer %s, acknowledged at offsets %s-%s, of which this log holds no "
            "batch because the log start offset moved to %s (its batches: %s): nothing is lost ("
            + _retained_state(profile)
            + ").",
            "producer_id",
            "acked_first_offset",
            "acked_last_offset",
            "log_start_offset",
            below_start_cause(F.col("acked_last_offset")),
        ),
        explained_by=F.lit("retention"),
        rule=F.lit(ACK_PRODUCER_RULE),
        **common,
    )
    lost = to_findings(
        absent.where(F.col("lost_records") > 0),
        "UNKNOWN_PRODUCER_LOSS",
        fmt(
            "The ack ledger names producer %s, acknowledged at offsets %s-%s, but this log holds no batch "
            "of that producer, and %s of its acknowledged record(s) lie at or above the log start offset "
            "%s (ACKED_RECORD_MISSING): the producer's data was lost or rewritten.",
            "producer_id",
            "acked_first_offset",
            "acked_last_offset",
            "lost_records",
            "log_start_offset",
        ),
        missing_records="lost_records",
        rule=F.lit(ACK_PRODUCER_RULE),
        **common,
    )
    return retention.unionByName(lost)


# The rule of the ack ledger's whole-producer verdicts (`_acked_producers`): told from the snapshot's
# and the earlier dump's verdicts of the same kinds by it (`one_verdict_per_producer`).
ACK_PRODUCER_RULE = "KIP-360 logStartOffset (seed 000 rule 4), from the ack ledger"
_PRODUCER_VERDICTS = ("UNKNOWN_PRODUCER_LOSS", "UNKNOWN_PRODUCER_RETENTION", "PRODUCER_STATE_RETAINED")


def one_verdict_per_producer(findings: DataFrame) -> DataFrame:
    """`findings` without the whole-producer verdicts of the snapshot and earlier-dump rules
    (`snapshot_producers`, `producers_across_dumps`) for a producer and log the ack ledger's rule judges
    too. That rule leaves a producer to them whenever their last offset is as late as its last
    acknowledged one (`judged_elsewhere`), so where it still judges one the ledger knows the producer
    later: a snapshot or an earlier dump that shows it at offset S, below the log start (retention),
    does not explain an acknowledged write at L > S that the log lacks. One verdict per producer and
    log, from the latest knowledge of it. A window over the findings (a small frame), so the ack rule's
    plan is not read a second time."""
    verdict = F.col("kind").isin(*_PRODUCER_VERDICTS)
    same = Window.partitionBy("dump_id", "replica", "topic", "partition", "producer_id", verdict)
    from_acks = F.col("rule") == ACK_PRODUCER_RULE
    judged = findings.withColumn("_judged_by_acks", F.max(from_acks.cast("int")).over(same) == 1)
    return judged.where(~verdict | from_acks | ~F.col("_judged_by_acks")).drop("_judged_by_acks")


# A remote segment as the ack check orders them: by end offset first.
_SEGMENT = "struct<end_offset:bigint,start_offset:bigint,segment_id:string,state:string>"


def _remote_tier(logs: DataFrame, remote: DataFrame) -> DataFrame:
    """The remote segments (`remote_segments`) of each of `logs`: its dump's, for its partition and, when
    the log names one (partition.metadata), its topic id."""
    logs = logs.select(
        "log_key",
        *LOG_KEY,
        "remote_log_start",
        "log_start_offset",
        F.col("topic_id").alias("_log_topic_id"),
    )
    return (
        logs.join(remote, ["dump_id", "topic", "partition"], "inner")
        .where(F.col("_log_topic_id").isNull() | (F.col("_log_topic_id") == F.col("topic_id")))
        .select(
            "log_key",
            *LOG_KEY,
            "segment_id",
            "start_offset",
            "end_offset",
            "state",
            "copied",
            "complete",
            "remote_log_start",
            "log_start_offset",
        )
    )


def _with_remote_segments(events: DataFrame, tier: DataFrame) -> tuple[DataFrame, DataFrame]:
    """`events` with a row per remote segment at its start offset (`r`: a copied one, `d`: another), and
    the bounds of each log's remote tier: the first and last copied offsets, and `remote_complete`."""
    segment = F.struct("end_offset", "start_offset", "segment_id", "state")
    bounds = tier.groupBy("log_key").agg(
        F.min(F.when(F.col("copied"), F.col("start_offset"))).alias("remote_start"),
        F.max(F.when(F.col("copied"), F.col("end_offset"))).alias("remote_end"),
        F.min("complete").alias("remote_complete"),
        F.first("remote_log_start").alias("remote_log_start"),
    )
    nothing = F.lit(None).cast(_SEGMENT)
    rows = tier.where(F.col("start_offset").isNotNull()).select(
        "log_key",
        *LOG_KEY,
        F.col("start_offset").alias("at"),
        F.lit(0).alias("_order"),
        F.when(F.col("copied"), segment).cast(_SEGMENT).alias("r"),
        F.when(~F.col("copied"), segment).cast(_SEGMENT).alias("d"),
    )
    events = events.withColumns({"r": nothing, "d": nothing}).unionByName(rows, allowMissingColumns=True)
    return events, bounds


def _app_identity(producer: Column, sequence: Column) -> Column:
    """An app producer and sequence as one comparable value (null unless both are known). A record's
    sequence that is no whole number is none (`try_cast`, as `ordering.app_sequences` reads it: under
    Spark 4's ANSI default a cast failed the audit)."""
    number = sequence.try_cast("long")
    known = producer.isNotNull() & number.isNotNull()
    return F.when(known, F.concat_ws("\u0001", producer, number.cast("string")))


# What tells one ack from another at one offset.
_ACK_IDENTITY = ("at", "ack_producer_id", "ack_producer_epoch", "ack_sequence", "ack_key", "ack_app")


def _reach(logs: DataFrame, targets: DataFrame) -> DataFrame:
    """Per target log of the acks (the newest log of each replica): its end, its incarnation, its high
    watermark, the latest leader epoch it knew of (`known_leader_epoch`), and `_reach`, the furthest
    end of the other replicas' target logs of its partition and incarnation whose dump was captured as
    late or later (null without one)."""
    mine = logs.join(targets.select("log_key"), "log_key", "left_semi").select(
        "log_key",
        *PARTITION_OF_LOG,
        "log_end_offset",
        "last_segment_offset",
        "high_watermark",
        "known_leader_epoch",
        F.col("dump_time_ms").alias("_time"),
    )
    theirs = mine.select(
        *PARTITION_OF_LOG,
        F.col("log_key").alias("_o_key"),
        F.col("log_end_offset").alias("_o_end"),
        F.col("_time").alias("_o_time"),
    )
    further = (
        mine.join(theirs, list(PARTITION_OF_LOG), "inner")
        .where((F.col("_o_key") != F.col("log_key")) & (F.col("_o_time") >= F.col("_time")))
        .groupBy("log_key")
        .agg(F.max("_o_end").alias("_reach"))
    )
    return mine.join(further, "log_key", "left").select(
        "log_key",
        "log_end_offset",
        "last_segment_offset",
        "incarnation",
        "high_watermark",
        "known_leader_epoch",
        "_reach",
    )


def _without(rows: DataFrame, other: DataFrame, columns: tuple[str, ...]) -> DataFrame:
    """`rows` but those equal to a row of `other` on `columns` (nulls equal)."""
    keys = other.select(*[F.col(c).alias(f"_w_{c}") for c in columns]).distinct()
    return rows.join(keys, [F.col(c).eqNullSafe(F.col(f"_w_{c}")) for c in columns], "left_anti")


def _rewritten(
    checked: DataFrame, records: DataFrame, acked: DataFrame, keys: bool, app: AppSequenceSpec | None
) -> tuple[DataFrame, DataFrame]:
    """The acks `checked` found held (outcome ok) that name their record's key or app sequence, where the
    log's record at that offset has another: outcome "rewritten" (an unclean leader election's or an
    `acks=1` failover's signature: the offset was given again to another record).

    Keys are compared as the records' key bytes read as UTF-8, app sequences as the extractor reads
    them, each only in logs where some ack's value equals its record's: a ledger that writes keys
    another way (hex, base64, a number's text for a binary key) matches none and proves nothing. A
    record the input did not print (dump-log text without the data) proves nothing either; an offset
    holding no record (the cleaner removed it) is left to the batch-level check. Second: per log and
    identity, the acks naming it at offsets holding a printed record where none matched (compared
    nowhere: `_uncompared_findings`)."""
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
    uncompared = []
    for column, identity in identities:
        held = shown.select("log_key", F.col("offset").alias("at"), identity.alias(column))
        named = checked.where((F.col("_outcome") == "ok") & F.col(column).isNotNull())
        same = named.join(held, ["log_key", "at", column], "left_semi").select("log_key").distinct()
        # The acks whose offsets hold a printed record: compared where the log has a match.
        comparable = named.join(held.select("log_key", "at"), ["log_key", "at"], "left_semi")
        found.append(
            comparable.join(F.broadcast(same), "log_key", "left_semi").join(
                held, ["log_key", "at", column], "left_anti"
            )
        )
        uncompared.append(
            comparable.join(F.broadcast(same), "log_key", "left_anti")
            .groupBy("log_key", "dump_id", "replica", "topic", "partition")
            .agg(*_offset_range("at"))
            .withColumn("_what", F.lit("a key" if column == "ack_key" else "an app producer and sequence"))
        )
    # An ack both of whose values differ is one ack.
    rewritten = found[0] if len(found) == 1 else found[0].unionByName(found[1]).distinct()
    return rewritten.withColumn("_outcome", F.lit("rewritten")), union_by_name(uncompared)


def _uncompared_findings(uncompared: DataFrame) -> DataFrame:
    """ACKS_NOT_CHECKED per log and identity (`_rewritten`'s second frame) where acks name a key or an app
    sequence and not one of them equals its record's: compared nowhere, which must not pass in silence
    (every acknowledged record there overwritten would read as valid)."""
    return to_findings(
        uncompared,
        "ACKS_NOT_CHECKED",
        fmt(
            "%s acknowledged offset(s) from %s to %s of %s-%s name %s, and not one equals that of the "
            "record the log holds at its offset: the ledger writes them another way (hex, base64, a "
            "number's text for a binary key), or every one of these offsets was given to another record "
            "(an unclean leader election, an acks=1 failover). Their records' identities were not "
            "checked (offsets, producers and sequences were); write the ledger's keys as the records' "
            "key bytes read as UTF-8 to check them.",
            "n",
            "first",
            "last",
            "topic",
            "partition",
            "_what",
        ),
        first_offset="first",
        last_offset="last",
        evidence=F.col("_what"),
        rule=F.lit("ack ledger identity comparable with the records"),
    )
