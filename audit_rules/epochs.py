"""Epoch rules (KIP-98 fencing, KIP-360 epoch bumps, KIP-588 InvalidProducerEpoch).

A CLIENT append with a lower epoch is refused (§5.3), so one in the log came through a path that
does not check (replication after an unclean election, a zombie). A new epoch must start at
sequence 0 (§5.4 step 2).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from audit_rules.consistency import unreadable_before
from audit_rules.findings import BATCH_FIELDS, fmt, to_findings
from audit_rules.history import start_after, state_expired
from audit_rules.logs import compaction_may_have_removed, compaction_room, sequenced, with_free_before
from audit_rules.profile import Profile


def epoch_regression(history: DataFrame) -> DataFrame:
    """EPOCH_REGRESSION: a batch or marker with a lower epoch than an earlier one of its producer (zombie
    write)."""
    rows = history.where(F.col("transition") == "EPOCH_REGRESSION")
    return to_findings(
        rows,
        "EPOCH_REGRESSION",
        F.when(
            F.col("is_control"),
            fmt(
                "Producer %s's %s marker at offset %s carries epoch %s after epoch %s had been used at "
                "offset %s: the transaction coordinator wrote a marker for a fenced epoch (a stale "
                "coordinator, or a marker that arrived late).",
                "producer_id",
                F.coalesce(F.col("control_type"), F.lit("transaction")),
                "base_offset",
                "producer_epoch",
                "max_epoch_before",
                "regression_related_offset",
            ),
        ).otherwise(
            fmt(
                "Producer %s wrote epoch %s at offset %s after epoch %s had been used at offset %s: a fenced "
                "(zombie) producer's write reached the log.",
                "producer_id",
                "producer_epoch",
                "base_offset",
                "max_epoch_before",
                "regression_related_offset",
            )
        ),
        related_offset="regression_related_offset",
        **BATCH_FIELDS,
    )


def epoch_starts(
    history: DataFrame,
    filled: DataFrame | None = None,
    unreadable: DataFrame | None = None,
    profile: Profile | None = None,
    free: DataFrame | None = None,
) -> DataFrame:
    """EPOCH_BUMP (info) when a new epoch starts at sequence 0; NEW_EPOCH_NONZERO_SEQUENCE otherwise
    (KIP-360).

    A new epoch whose producer's previous row is a marker already at that epoch was raised by the
    marker: with transactions V2 (KIP-890 part 2, on by default on 4.0+ clusters) the coordinator ends
    every transaction with a marker one epoch above its data, and the producer goes on at that epoch
    from sequence 0. That is each transaction's normal end, not a recovery, so it is no finding (a
    Kafka 4.3.1 log of a Java transactional producer would otherwise carry one per transaction per
    partition). A batch at sequence 0 above the marker's epoch (a re-initialised producer) still is.

    No NEW_EPOCH_NONZERO_SEQUENCE where CRC-failed batches before the epoch's first batch hold the
    sequences it skips (`filled`: `history.filled_starts`, RULES.md failed fill); one names the first
    unreadable region between the producer's previous row and the batch (`unreadable`:
    `consistency.unreadable_regions`), where the epoch's first records may be.

    Where the broker had forgotten the producer by expiry before the new epoch's first batch (`profile`:
    2.5 and later take an unknown producer's new epoch at any sequence, `ProducerAppendInfo.checkSequence`
    refuses a nonzero one only against a known epoch), the finding stays, `explained_by` expiry: the
    broker did not check, and the sequences before it may be lost or never sent. Not for a
    transactions-V2 producer's transaction, which the broker checks without state too.
    """
    rows = history.where(F.col("transition") == "EPOCH_START")
    if filled is not None:
        rows = rows.join(filled, ["log_id", "producer_id", "base_offset"], "left_anti")
    raised_by_marker = F.coalesce(F.col("prev_producer_epoch") == F.col("producer_epoch"), F.lit(False))
    bumps = to_findings(
        rows.where((F.col("base_sequence") == 0) & ~raised_by_marker),
        "EPOCH_BUMP",
        fmt(
            "Producer %s moved from epoch %s (offset %s) to epoch %s at offset %s and restarted at "
            "sequence 0: "
            "normal recovery or a new session.",
            "producer_id",
            "prev_producer_epoch",
            "prev_offset",
            "producer_epoch",
            "base_offset",
        ),
        related_offset="prev_offset",
        expected_sequence=F.lit(0),
        explained_by=F.lit("epoch_bump"),
        **BATCH_FIELDS,
    )
    # The new epoch's earlier batches lay after the producer's last row of a lower epoch (`start_after`):
    # compaction may have removed them, where there were offsets for its sequences 0 to base - 1. After
    # a marker already at the new epoch they may lie before that marker too (transactions V1 write a
    # transaction's marker after its data: the cleaner removes an aborted first transaction and keeps
    # its marker until the delete horizon), so there the room is not counted from the marker: they may
    # lie anywhere the cleaner reached from the log's start (or from the marker, kept below the start).
    # Only the offsets no batch holds count (`free`: `logs.free_offsets`, where some log is compacted):
    # other producers' batches there never held this one's.
    after = start_after()
    # (Only the offsets below what the cleaner may have reached: not the active segment's.)
    cleanable = F.least(F.col("base_offset"), F.col("cleaned_to"))
    offsets = cleanable - after - 1
    earliest = F.coalesce(after, F.least(F.col("prev_offset"), F.col("log_start_offset")))
    if free is not None:
        rows = with_free_before(
            rows.withColumn("_cleanable", cleanable).withColumn("_after", after),
            free,
            ["_cleanable", "_after"],
            (F.col("base_sequence") != 0) & compaction_may_have_removed(earliest),
        )
        free_below = F.col("_free__cleanable")
        offsets = F.when(after.isNull(), free_below).otherwise(
            F.least(offsets, F.coalesce(free_below - F.col("_free__after"), offsets))
        )
    room = compaction_room(offsets, F.col("base_sequence").cast("long"))
    nonzero = rows.where(
        (F.col("base_sequence") != 0) & ~(compaction_may_have_removed(earliest) & room) & sequenced()
    )
    note = F.lit("")
    if unreadable is not None:
        nonzero, note = unreadable_before(
            nonzero, unreadable, after, "before it, after the previous epoch", "those records"
        )
    # Not a transactions-V2 producer's transaction (its marker raised the epoch): the broker verifies a
    # transaction's first batch, and refuses one at a nonzero sequence from a producer it holds no
    # state of ("Expected sequence 0 for transactions v2 idempotent producer with no existing state",
    # `ProducerAppendInfo.checkSequence`, 4.0+), so expiry does not explain it.
    verified = F.col("is_transactional") & raised_by_marker
    expired = (
        state_expired(profile.producer_id_expiration_ms) & ~verified
        if profile is not None and profile.accepts_unknown_producer
        else F.lit(False)
    )
    unchecked = F.when(
        expired,
        fmt(
            " The producer had been idle %s ms, longer than "
            + (profile.expiration_setting if profile is not None else "producer.id.expiration.ms")
            + " = %s: the broker had "
            "forgotten it and took the new epoch's sequence unchecked.",
            F.col("max_timestamp") - F.col("prev_event_timestamp"),
            F.lit(profile.producer_id_expiration_ms if profile is not None else None),
        ),
    ).otherwise(F.lit(""))
    wrong = to_findings(
        nonzero,
        "NEW_EPOCH_NONZERO_SEQUENCE",
        F.concat(
            fmt(
                "Producer %s started epoch %s at offset %s with sequence %s instead of 0 (%s): the first %s "
                "record(s) of the new epoch are missing or the producer reused sequences.",
                "producer_id",
                "producer_epoch",
                "base_offset",
                "base_sequence",
                # A row before it at its own epoch is the marker that raised it (Transactions V2).
                F.when(
                    F.col("prev_producer_epoch") == F.col("producer_epoch"),
                    fmt("after the marker at offset %s that raised the epoch", "prev_offset"),
                ).otherwise(fmt("previous epoch %s at offset %s", "prev_producer_epoch", "prev_offset")),
                "base_sequence",
            ),
            unchecked,
            note,
        ),
        related_offset="prev_offset",
        expected_sequence=F.lit(0),
        explained_by=F.when(expired, F.lit("expiry")),
        **BATCH_FIELDS,
    )
    return bumps.unionByName(wrong)
