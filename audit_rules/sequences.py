"""Sequence rules within one producer epoch (KIP-98 `checkSequence`, KIP-360, seeds 000-001).

A gap is loss only when nothing else explains it: the missing numbers appear nowhere else in the
epoch (else the late batch is a regression, Sarama #2619), the producer state cannot have expired in
between (KIP-854: the broker then accepts any sequence, §5.7), and the topic is not compacted.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.consistency import unreadable_before
from audit_rules.findings import BATCH_FIELDS, fmt, to_findings
from audit_rules.history import (
    ROW_KEY,
    STREAM_KEY,
    evicted_by_log_start,
    forgotten_before,
    forgotten_by_expiry,
    start_after,
    state_expired,
    who_restarts,
)
from audit_rules.logs import (
    below_start_cause,
    compaction_evidence,
    compaction_may_have_removed,
    compaction_room,
    kept_start,
    with_free_before,
)
from audit_rules.profile import Profile


def invalid_sequence(history: DataFrame) -> DataFrame:
    """INVALID_SEQUENCE: a negative base sequence, or a sequence range that differs from the offset range
    (KIP-98). (A v2 batch stores no last sequence: decoders and DumpLogSegments compute it from the base
    sequence and the last offset delta, as `DefaultRecordBatch.lastSequence` does, so on real bytes only
    the negative base sequence can be met; the range clause holds for rows given otherwise.)"""
    rows = history.where(F.col("transition") == "INVALID")
    return to_findings(
        rows,
        "INVALID_SEQUENCE",
        F.when(
            F.col("base_sequence") < 0,
            fmt(
                "Producer %s epoch %s wrote a data batch at offsets %s-%s without a sequence (base sequence "
                "%s), which a producer id needs; the broker should have refused it (INVALID_RECORD).",
                "producer_id",
                "producer_epoch",
                "base_offset",
                "last_offset",
                "base_sequence",
            ),
        ).otherwise(
            fmt(
                "Producer %s epoch %s wrote a batch at offsets %s-%s with sequences %s-%s, which do not "
                "match its offsets; the broker should have refused it (INVALID_RECORD).",
                "producer_id",
                "producer_epoch",
                "base_offset",
                "last_offset",
                "base_sequence",
                "last_sequence",
            )
        ),
        **BATCH_FIELDS,
    )


def history_start(
    history: DataFrame,
    profile: Profile,
    filled: DataFrame | None = None,
    unreadable: DataFrame | None = None,
    fills: DataFrame | None = None,
    free: DataFrame | None = None,
) -> DataFrame:
    """HISTORY_TRUNCATED_BY_RETENTION or HISTORY_START_MISSING for a producer whose first retained batch
    starts mid-sequence (KIP-360); none where CRC-failed batches before it hold the sequences it skips
    (`filled`: `history.filled_starts`, RULES.md failed fill). A HISTORY_START_MISSING names the first
    unreadable region before the batch (`unreadable`: `consistency.unreadable_regions`), where its
    epoch's first records may be. Sequences below the batch's that later batches of its stream hold
    (`late_before_start`) are in the log, out of order (their SEQUENCE_REGRESSION), and so are those
    CRC-failed batches before it hold in part (`fills`: `history.corrupt_fills`; their CRC_MISMATCH):
    only the others count, and where there are none, there is no finding. On a compacted log the
    cleaner's room is the offsets below the batch that no batch holds (`free`: `logs.free_offsets`,
    where some log is compacted): other producers' batches there never held this one's."""
    rows = history.where((F.col("transition") == "FIRST") & (F.col("base_sequence") > 0))
    if filled is not None:
        rows = rows.join(filled, ["log_id", "producer_id", "base_offset"], "left_anti")
    rows = rows.join(
        late_before_start(history, profile, fills), [*STREAM_KEY, "base_sequence_unwrapped"], "left"
    )
    rows = rows.withColumn(
        "_needed", F.col("base_sequence").cast("long") - F.coalesce(F.col("_held_later"), F.lit(0))
    ).where(F.col("_needed") > 0)
    # The epoch's sequences 0 to base - 1 (those no later batch holds) took an offset each, below this
    # batch: below the log start (retention took them) or, where the cleaner may have passed, anywhere
    # below the batch. Where fewer offsets than that were taken, at least the rest never reached the
    # log or were lost. (A batch below the log start, DeleteRecords having moved it inside a segment,
    # bounds them too.)
    needed = F.col("_needed")
    cleaned = compaction_may_have_removed(F.col("log_start_offset"))
    below = F.greatest(F.least(F.col("first_kept_offset"), F.col("base_offset")), F.lit(0))
    retained = below >= needed
    # The cleaner's offsets: those below what it may have reached (not the active segment's, held by
    # other producers' batches there, unless that segment shows a leader's cleaner: `cleaned_to`).
    cleanable = F.least(F.col("base_offset"), F.col("cleaned_to"))
    if free is not None:
        # Less the offsets other batches hold below it (other producers' on a shared log); never less
        # than those below the first kept offset (all free: no segment of the dump holds them).
        rows = with_free_before(rows.withColumn("_cleanable", cleanable), free, ["_cleanable"], cleaned)
        cleanable = F.least(cleanable, F.greatest(F.coalesce(F.col("_free__cleanable"), cleanable), below))
    compaction = ~retained & cleaned & compaction_room(cleanable, needed)
    room = F.when(cleaned, cleanable).otherwise(below)
    explained = rows.where(retained | compaction)
    because = F.when(retained, F.lit("retention")).otherwise(F.lit("compaction"))
    truncated = to_findings(
        explained,
        "HISTORY_TRUNCATED_BY_RETENTION",
        F.when(
            retained,
            fmt(
                "Producer %s epoch %s starts at sequence %s at offset %s because its earlier batches lie "
                "below the log start offset %s (%s); nothing is lost.",
                "producer_id",
                "producer_epoch",
                "base_sequence",
                "base_offset",
                "log_start_offset",
                below_start_cause(),
            ),
        ).otherwise(
            fmt(
                "Producer %s epoch %s starts at sequence %s at offset %s on a compacted log (%s), where the "
                "cleaner removes earlier batches; nothing is lost.",
                "producer_id",
                "producer_epoch",
                "base_sequence",
                "base_offset",
                compaction_evidence(),
            )
        ),
        expected_sequence=F.lit(0),
        explained_by=because,
        **BATCH_FIELDS,
    )
    unexplained, note = rows.where(~retained & ~compaction), F.lit("")
    if unreadable is not None:
        unexplained, note = unreadable_before(
            unexplained, unreadable, start_after(), "before it", "those records"
        )
    missing = to_findings(
        unexplained,
        "HISTORY_START_MISSING",
        F.concat(
            F.when(
                (F.col("first_kept_offset") <= 0) & ~cleaned,
                fmt(
                    "Producer %s epoch %s first appears at offset %s with sequence %s, but the log is "
                    "complete from offset 0: %s record(s) of that epoch before it are missing.",
                    "producer_id",
                    "producer_epoch",
                    "base_offset",
                    "base_sequence",
                    needed,
                ),
            ).otherwise(
                fmt(
                    "Producer %s epoch %s first appears at offset %s with sequence %s, but its %s earlier "
                    "record(s) of that epoch each took an offset below it, and only %s offset(s) there can "
                    "have been removed (%s): at least %s of them are missing.",
                    "producer_id",
                    "producer_epoch",
                    "base_offset",
                    "base_sequence",
                    needed,
                    room,
                    F.when(
                        cleaned,
                        F.concat(F.lit("by retention or the cleaner: "), compaction_evidence()),
                    ).otherwise(F.concat(F.lit("below "), kept_start(), F.lit(": "), below_start_cause())),
                    needed - room,
                )
            ),
            F.when(
                F.col("_held_later") > 0,
                fmt(
                    " %s other sequence(s) below %s are in the log, in batches after it (out of order) or in "
                    "CRC-failed batches before it: not counted.",
                    "_held_later",
                    "base_sequence",
                ),
            ).otherwise(F.lit("")),
            note,
        ),
        expected_sequence=F.lit(0),
        missing_records=needed - room,
        **BATCH_FIELDS,
    )
    return truncated.unionByName(missing)


def late_before_start(history: DataFrame, profile: Profile, fills: DataFrame | None = None) -> DataFrame:
    """(`STREAM_KEY`, `base_sequence_unwrapped` of a stream's first batch, `_held_later`): how many of the
    sequences 0 to that base - 1 later batches of the stream hold (late batches, `history.derived`: the
    only ones at or below a sequence the stream reached before), or CRC-failed batches before it
    (`fills`: `history.corrupt_fills`, its start's). Not from the first late batch the broker took from a
    producer it had forgotten (`forgotten_before`) on: a client restarting its sequence wrote those,
    other records than the ones the first batch's sequences followed."""
    first = F.col("stream_first_base")
    late = history.where(F.col("late"))
    restart = (
        late.where(forgotten_before(profile)).groupBy(*STREAM_KEY).agg(F.min("base_offset").alias("_restart"))
    )
    checked = late.join(restart, list(STREAM_KEY), "left").where(
        F.coalesce(F.col("base_offset") < F.col("_restart"), F.lit(True))
    )
    lates = checked.where(F.col("base_sequence_unwrapped") < first).select(
        *STREAM_KEY,
        first.alias("_first"),
        F.greatest(F.col("base_sequence_unwrapped"), F.lit(0)).alias("_from"),
        F.least(F.col("last_sequence_unwrapped"), first - 1).alias("_to"),
    )
    if fills is not None:
        start = F.col("gap_base_sequence")
        lates = lates.unionByName(
            fills.where(F.col("is_start")).select(
                *STREAM_KEY,
                start.alias("_first"),
                F.greatest(F.col("_from"), F.lit(0)).alias("_from"),
                F.least(F.col("_to"), start - 1).alias("_to"),
            )
        )
    # The union of their ranges: each adds what lies past the highest end of those before it.
    w = (
        Window.partitionBy(*STREAM_KEY, "_first")
        .orderBy("_from", "_to")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    reach = F.coalesce(F.max("_to").over(w), F.lit(-1))
    adds = F.greatest(F.col("_to") - F.greatest(F.col("_from"), reach + 1) + 1, F.lit(0))
    return (
        lates.withColumn("_adds", adds)
        .groupBy(*STREAM_KEY, F.col("_first").alias("base_sequence_unwrapped"))
        .agg(F.sum("_adds").alias("_held_later"))
    )


def sequence_regression(history: DataFrame, profile: Profile) -> DataFrame:
    """SEQUENCE_REGRESSION: a base sequence at or below the previous batch's last one, not an exact copy
    (KIP-98 OutOfOrderSequence). Where the broker had forgotten the producer before the batch (its
    state expired, or, before 2.4, the log start passed its previous batch: `evicted_by_log_start`) and
    takes the batch's sequence from a producer it does not know, the message says so: a client that
    restarts its sequence then (a transactional one before 2.5 restarts at 0 after
    UNKNOWN_PRODUCER_ID) wrote it, not a reordering."""
    rows = history.where(F.col("transition") == "REGRESSION")
    zero = F.col("base_sequence") == 0
    expired = forgotten_by_expiry(profile)
    why = (
        F.when(
            expired & zero,
            F.lit(
                " Unless the producer restarted its sequence: it had been idle longer than "
                f"{profile.expiration_setting}, so {profile.name} had forgotten it and took sequence 0 as "
                "from a new producer."
            ),
        )
        .when(
            # 2.5+ take any sequence from a producer they forgot: no client restarts mid-epoch elsewhere.
            expired,
            F.lit(
                f" The producer had been idle longer than {profile.expiration_setting}, so "
                f"{profile.name} had forgotten it and took the batch without checking its sequence."
            ),
        )
        .when(
            evicted_by_log_start(profile),
            fmt(
                " Unless the producer restarted at 0: the log start offset (now %s) has passed its previous "
                f"batch, and {profile.name} forgets such a producer (truncateHead) and takes sequence 0 "
                f"from it as from a new producer ({who_restarts(profile)}), if the log start moved before "
                "this batch was written.",
                "log_start_offset",
            ),
        )
        .otherwise(F.lit(""))
    )
    return to_findings(
        rows,
        "SEQUENCE_REGRESSION",
        F.concat(
            fmt(
                "Producer %s epoch %s wrote sequences %s-%s at offset %s after sequence %s (offset %s): the "
                "batch arrived out of order; the broker expected sequence %s.",
                "producer_id",
                "producer_epoch",
                "base_sequence",
                "last_sequence",
                "base_offset",
                "prev_last_sequence",
                "prev_base_offset",
                "expected_sequence",
            ),
            why,
        ),
        expected_sequence="expected_sequence",
        related_offset="prev_base_offset",
        # A broker that had forgotten (expiry) or evicted (retention) the producer took the batch.
        explained_by=F.when(expired, F.lit("expiry")).when(evicted_by_log_start(profile), F.lit("retention")),
        **BATCH_FIELDS,
    )


def sequence_gaps(
    history: DataFrame,
    holes: DataFrame,
    profile: Profile,
    unreadable: DataFrame | None = None,
    free: DataFrame | None = None,
) -> DataFrame:
    """SEQUENCE_GAP (critical) or SEQUENCE_GAP_UNVERIFIED (expiry, KIP-854): sequences skipped and found
    nowhere else in the epoch (`holes`: `history.coverage_holes`, what no batch of the epoch covers).
    On a compacted log, not where the offsets between the two batches that no batch holds (`free`:
    `logs.free_offsets`, where some log is compacted) could have held the skipped records.

    Where unreadable segment bytes lie between the two batches (`unreadable`:
    `consistency.unreadable_regions`), the message names the first region: the records may be in it,
    and nothing tells them from lost ones, so the finding stays."""
    # Only a batch past the stream's highest sequence yet (`jump`) skips sequences no batch before it
    # held: after a late batch, the one that goes on from the highest in order skips what the jump past
    # it skipped already, and counting it again would report one hole twice.
    jumps = history.where((F.col("transition") == "GAP") & F.col("jump")).alias("j")
    holes = holes.alias("h")
    # What it skipped starts past that highest sequence, not after the previous batch: in 0-4, 10-14,
    # 2-3, 20-24 the jump to 20 skips 15-19 only (5-9 is the jump to 10's), whatever follows 2-3.
    low = F.col("j.max_last_before") + 1
    overlap = (
        F.least(F.col("h.hole_end"), F.col("j.base_sequence_unwrapped") - 1)
        - F.greatest(F.col("h.hole_start"), low)
        + 1
    )
    joined = jumps.join(
        holes,
        (F.col("j.log_id") == F.col("h.log_id"))
        & (F.col("j.producer_id") == F.col("h.producer_id"))
        & (F.col("j.producer_epoch") == F.col("h.producer_epoch"))
        & (F.col("h.hole_start") <= F.col("j.base_sequence_unwrapped") - 1)
        & (F.col("h.hole_end") >= low),
        "inner",
    ).select(*[F.col(f"j.{k}") for k in ROW_KEY], overlap.alias("_missing"))
    # Summed per batch (its row key), then joined back: grouping by every column of the history would
    # compile an aggregation over a fifty-column key for a handful of rows.
    missing = joined.groupBy(*ROW_KEY).agg(F.sum("_missing").alias("missing"))
    # The skipped batches lay between the previous batch and this one: the cleaner may have removed them,
    # if there were offsets for them there (it removes whole batches and keeps every offset it keeps).
    # Counted where the previous batch is the stream's highest yet: after a late one (a copy, a
    # regression) the skipped sequences may lie before it.
    after_highest = F.coalesce(F.col("prev_last_unwrapped") >= F.col("max_last_before"), F.lit(False))
    # (Only the offsets below what the cleaner may have reached: not the active segment's.)
    offsets = F.least(F.col("base_offset"), F.col("cleaned_to")) - F.col("prev_base_offset") - 1
    gaps = jumps.join(missing, list(ROW_KEY), "inner")
    if free is not None:
        # Less the offsets other batches hold between the two (other producers' on a shared log).
        # At the batch, or at `cleaned_to` where the batch lies past it: offsets free above what the
        # cleaner may have reached (this broker's active segment's) were no cleaner's work.
        gaps = with_free_before(
            gaps.withColumn("_cleanable", F.least(F.col("base_offset"), F.col("cleaned_to"))),
            free,
            ["_cleanable", "prev_base_offset"],
            compaction_may_have_removed(F.col("prev_base_offset")),
        )
        between = F.col("_free__cleanable") - F.col("_free_prev_base_offset")
        offsets = F.least(offsets, F.coalesce(between, offsets))
    room = ~after_highest | compaction_room(
        offsets, F.col("base_sequence_unwrapped") - F.col("expected_unwrapped")
    )
    gaps = gaps.where(~(compaction_may_have_removed(F.col("prev_base_offset")) & room))
    note = F.lit("")
    if unreadable is not None:
        gaps, note = unreadable_before(
            gaps, unreadable, F.col("prev_base_offset"), "between the two batches", "the records"
        )
    elapsed = F.col("max_timestamp") - F.col("prev_event_timestamp")
    expired = F.lit(profile.accepts_unknown_producer) & state_expired(profile.producer_id_expiration_ms)
    common: dict[str, Any] = {
        **BATCH_FIELDS,
        "expected_sequence": "expected_sequence",
        "related_offset": "prev_base_offset",
        "missing_records": "missing",
    }
    # The jump itself, as both messages open.
    jumped = "Producer %s epoch %s jumped from sequence %s (offset %s) to %s (offset %s)"
    jump = (
        "producer_id",
        "producer_epoch",
        "prev_last_sequence",
        "prev_base_offset",
        "base_sequence",
        "base_offset",
    )
    lost = to_findings(
        gaps.where(~expired),
        "SEQUENCE_GAP",
        F.concat(
            fmt(
                jumped + ": %s record(s) were acknowledged by the producer's sequence but are absent from "
                "the log.",
                *jump,
                "missing",
            ),
            note,
        ),
        **common,
    )
    unverified = to_findings(
        gaps.where(expired),
        "SEQUENCE_GAP_UNVERIFIED",
        F.concat(
            fmt(
                jumped + f" after %s ms idle, longer than {profile.expiration_setting} = %s: the broker had "
                "forgotten the producer and did not check, so the loss of %s record(s) cannot be excluded.",
                *jump,
                elapsed,
                F.lit(profile.producer_id_expiration_ms),
                "missing",
            ),
            note,
        ),
        explained_by=F.lit("expiry"),
        rule=F.lit(profile.expiration_rule),
        **common,
    )
    return lost.unionByName(unverified)
