"""Corruption and consistency: quarantined bytes, offsets, snapshots against the log, replicas against each
other."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import file_evidence, fmt, to_findings, union_by_name
from audit_rules.history import ROW_KEY
from audit_rules.kinds import KINDS
from audit_rules.logs import PARTITION_OF_LOG, Store, as_is, join_log, with_log_id, with_log_key
from audit_rules.profile import Profile
from kafka_log_decoder.constants import INDEX_FILE_SUFFIX, OFFSET_INDEX_ENTRY_SIZE
from kafka_log_decoder.errors import NOT_DECODED
from schemas.tables import LOG_KEY, WALK_FIRST, WALK_OVERLAP

# What a quarantined region's finding says where the walk read on past it.
READ_ON = "the bytes are quarantined, the rest of the file was read"


def quarantined(located: DataFrame, fills: DataFrame | None = None) -> DataFrame:
    """CRC_MISMATCH, TRUNCATED_TAIL, UNREADABLE_BATCH, INDEX_MISMATCH, SNAPSHOT_CORRUPT, UNREADABLE_FILE
    from the quarantine table's rows with the offsets of the region where the log tells them
    (`located`: `located_regions`).

    A CRC_MISMATCH also says what the failed batch's header names (producer, epoch, sequences: no
    longer vouched for by the CRC), and, where that fills a gap of its producer or the start of its
    epoch (`fills`: `history.corrupt_fills`), that the skipped records are in the log but unreadable:
    what they fill is not reported as lost."""
    frames = []
    for kind in (
        "CRC_MISMATCH",
        "TRUNCATED_TAIL",
        "UNREADABLE_BATCH",
        "INDEX_MISMATCH",
        "SNAPSHOT_CORRUPT",
        "UNREADABLE_FILE",
    ):
        rows = located.where(F.col("kind") == kind)
        about = F.lit("")
        if kind == "CRC_MISMATCH":
            rows, about = _failed_header(rows, fills)
        rows = rows.withColumn("_about", about).drop("region_batch")
        if kind == "INDEX_MISMATCH":
            rows = _index_entry_runs(rows)
        frames.append(
            to_findings(
                rows,
                kind,
                F.concat(
                    # A bad row of a Parquet ledger is named by its number (in the message), not bytes.
                    F.when(_parquet_ledger_row(), F.col("file")).otherwise(
                        fmt("%s at byte %s", "file", "position")
                    ),
                    F.when(F.col("length").isNotNull(), fmt(" (%s bytes)", "length")).otherwise(F.lit("")),
                    F.lit(": "),
                    F.col("message"),
                    F.col("_about"),
                    # (A file or range that could not be read at all, or a file the broker would refuse
                    # whole, has no rest that was read.)
                    F.when(
                        F.col("message").endswith(NOT_DECODED)
                        | F.lit(kind in ("UNREADABLE_FILE", "SNAPSHOT_CORRUPT")),
                        F.lit(f" [{KINDS[kind].category}: the bytes are quarantined]"),
                    ).otherwise(F.lit(f" [{KINDS[kind].category}: {READ_ON}]")),
                ),
                first_offset="region_first_offset",
                last_offset="region_last_offset",
                # A byte position is not an offset: it is in the message and in the finding id.
                evidence=file_evidence("file", "position"),
                rule=_rule_of_file(kind),
            )
        )
    return union_by_name(frames)


# Quarantined segment regions from which no batch header could be read.
UNREADABLE_KINDS = ("UNREADABLE_BATCH", "TRUNCATED_TAIL")


def unreadable_regions(located: DataFrame) -> DataFrame:
    """The quarantined regions of `.log` segments where no batch header could be read (`UNREADABLE_KINDS`:
    a corrupt length, a torn write; `located`: `located_regions`), with their log (`dump_id`,
    `replica`, `topic`, `partition`), `file`, `position`, `kind` and `region_first_offset`: the offset
    after the last readable batch before them (else the segment's base offset). Whatever the region
    held lies at or after that offset and before the next readable batch: a producer's records there
    cannot be told from lost ones."""
    rows = located.where(F.col("kind").isin(*UNREADABLE_KINDS) & F.col("file").endswith(".log"))
    # A region where a header was read (a batch whose records would not decode) is that batch's: its
    # offsets and producer are known.
    return rows.where(F.col("region_first_offset").isNotNull() & F.col("region_batch").isNull()).select(
        "dump_id", "replica", "topic", "partition", "file", "position", "kind", "region_first_offset"
    )


def unreadable_before(
    rows: DataFrame, unreadable: DataFrame, after: Column, where: str, what: str
) -> tuple[DataFrame, Column]:
    """History `rows` with the first region of `unreadable` (`unreadable_regions`) of their log that
    begins after the offset `after` (a column of `rows`; null: the log's start) and before the row's
    `base_offset`, and the sentence that names it (empty where there is none): "Unreadable bytes lie
    `where` (file at byte P, KIND): `what` may be in them rather than lost."

    The finding stays: nothing tells the records from lost ones."""
    log = ("dump_id", "replica", "topic", "partition")
    g = rows.select(*ROW_KEY, *log, F.coalesce(after, F.lit(-1)).alias("_after"), "base_offset").alias("g")
    r = unreadable.alias("r")
    near = g.join(
        r,
        [F.col(f"g.{k}").eqNullSafe(F.col(f"r.{k}")) for k in log]
        + [
            F.col("r.region_first_offset") > F.col("g._after"),
            F.col("r.region_first_offset") < F.col("g.base_offset"),
        ],
    )
    first = near.groupBy(*[F.col(f"g.{k}") for k in ROW_KEY]).agg(
        F.min_by(
            F.struct(F.col("r.file"), F.col("r.position"), F.col("r.kind")),
            F.struct(F.col("r.region_first_offset"), F.col("r.file"), F.col("r.position")),
        ).alias("_unreadable")
    )
    region = F.col("_unreadable")
    note = F.when(
        region.isNotNull(),
        fmt(
            f" Unreadable bytes lie {where} (%s at byte %s, %s): {what} may be in them rather than lost.",
            region.file,
            region.position,
            region.kind,
        ),
    ).otherwise(F.lit(""))
    return rows.join(first, list(ROW_KEY), "left"), note


def _failed_header(rows: DataFrame, fills: DataFrame | None) -> tuple[DataFrame, Column]:
    """CRC_MISMATCH rows (`located_regions`) with the words that tell what the failed batch's header
    names, and which gap or epoch start of its producer it fills (`fills`: one row per failed batch at
    most, since the skips of a stream lie between different batches)."""
    b = F.col("region_batch")
    named = (b.magic == 2) & (b.producer_id >= 0) & ~b.is_control
    header = F.when(
        named,
        fmt(
            "; its header, which the CRC no longer vouches for, names producer %s epoch %s, sequences %s-%s",
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.last_sequence,
        ),
    ).otherwise(F.lit(""))
    if fills is None:
        return rows, header
    keys = ("dump_id", "replica", "file", "position")
    gap = fills.select(
        *[F.col(k).alias(f"_fill_{k}") for k in keys], "gap_offset", "gap_prev_offset", "is_start"
    )
    rows = rows.join(gap, [F.col(k).eqNullSafe(F.col(f"_fill_{k}")) for k in keys], "left")
    unread = ": those records are in the log, unreadable, not lost"
    filled = (
        F.when(F.col("gap_offset").isNull(), F.lit(""))
        .when(
            F.col("is_start"),
            fmt(", sequences its epoch skipped before its batch at offset %s" + unread, "gap_offset"),
        )
        .otherwise(
            fmt(
                ", sequences it skipped between its batches at offsets %s and %s" + unread,
                "gap_prev_offset",
                "gap_offset",
            )
        )
    )
    return rows, F.concat(header, filled)


def _rule_of_file(kind: str) -> Column:
    """The rule a quarantined region's file breaks, where the kind's registry rule names another file's:
    a bad row of an ack ledger (contract §1), a `.timeindex`'s entries (read for the region only)."""
    rule = F.lit(KINDS[kind].rule)
    if kind == "UNREADABLE_FILE":
        return F.when(
            F.col("message").startswith("acks row "), F.lit("ack ledger row (contract §1)")
        ).otherwise(rule)
    if kind == "INDEX_MISMATCH":
        return F.when(F.col("file").endswith(".timeindex"), F.lit("TimeIndex entry")).otherwise(rule)
    return rule


def _parquet_ledger_row() -> Column:
    """A quarantine row of a Parquet `--acks` ledger: `position` is the row's number, not a byte."""
    return F.col("length").isNull() & F.col("message").startswith("acks row ")


def _index_entry_runs(rows: DataFrame) -> DataFrame:
    """INDEX_MISMATCH rows of wrong `.index` entries (one quarantine row each, `OFFSET_INDEX_ENTRY_SIZE`
    bytes) that follow each other in their file as one region: a stale or overwritten index is one
    fault, whose first entry the message quotes. Other INDEX_MISMATCH rows (a partial entry, a
    `.txnindex` entry) are left as they are."""
    entry = (F.col("length") == OFFSET_INDEX_ENTRY_SIZE) & F.col("file").endswith(INDEX_FILE_SUFFIX)
    w = Window.partitionBy("dump_id", "replica", "file", "_entry").orderBy("position")
    runs = (
        rows.withColumn("_entry", entry)
        .withColumn(
            "_starts",
            (
                ~F.col("_entry")
                | F.coalesce(
                    F.lag(F.col("position") + F.col("length")).over(w) != F.col("position"), F.lit(True)
                )
            ).cast("long"),
        )
        .withColumn(
            "_run", F.sum("_starts").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        )
    )
    keys = ["dump_id", "replica", "file", "_entry", "_run"]
    first = F.min_by(F.struct(*[c for c in rows.columns if c not in keys[:3]]), F.col("position"))
    merged = runs.groupBy(*keys).agg(
        first.alias("_first"), F.count(F.lit(1)).alias("_entries"), F.sum("length").alias("_length")
    )
    message = F.when(
        F.col("_entries") > 1,
        F.concat(
            F.col("_entries").cast("string"),
            F.lit(" consecutive index entries do not lead to batches holding their offsets; the first: "),
            F.col("_first.message"),
        ),
    ).otherwise(F.col("_first.message"))
    return merged.select(
        "dump_id",
        "replica",
        "file",
        *[F.col(f"_first.{c}").alias(c) for c in rows.columns if c not in (*keys[:3], "length", "message")],
        F.col("_length").alias("length"),
        message.alias("message"),
    ).select(*rows.columns)


def located_regions(quarantine: DataFrame, batches: DataFrame) -> DataFrame:
    """The offsets of each quarantined region of a segment: those of the (CRC-failed) batch that starts
    there, else the offset right after the last readable batch before it (a torn tail, garbage)."""
    keys = ["dump_id", "replica", "file", "position"]
    # Only the batches of files with a quarantined region are read (those files are few: broadcast).
    file_key = F.concat_ws("\u0001", "dump_id", F.coalesce("replica", F.lit("\u0000")), "file")
    damaged = quarantine.select(file_key.alias("_fk")).distinct()
    batches = batches.withColumn("_fk", file_key).join(F.broadcast(damaged), "_fk", "left_semi").drop("_fk")
    regions = quarantine.select(
        *keys, "topic", "partition", "length", "kind", "message", F.lit(1).alias("_order")
    )
    at = batches.select(
        *keys,
        # Offsets lie outside the CRC; the producer fields of a failed batch cannot be trusted (they are
        # quoted as its header's, `_failed_header`).
        F.struct(
            "base_offset",
            "last_offset",
            "magic",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "last_sequence",
            "is_control",
        ).alias("b"),
        F.lit(0).alias("_order"),
    )
    events = regions.withColumn("b", F.lit(None).cast(at.schema["b"].dataType)).unionByName(
        at, allowMissingColumns=True
    )
    w = (
        Window.partitionBy("dump_id", "replica", "file")
        .orderBy("position", "_order")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    events = events.withColumns(
        {
            "_before": F.last("b", ignorenulls=True).over(w),
            "_before_position": F.last(
                F.when(F.col("b").isNotNull(), F.col("position")), ignorenulls=True
            ).over(w),
        }
    ).where(F.col("_order") == 1)
    same = F.col("_before").isNotNull() & (F.col("_before_position") == F.col("position"))
    # The segment's base offset from its name, for a region before any readable batch.
    segment_base = F.regexp_extract(F.col("file"), r"(\d{20})\.log$", 1)
    after = F.coalesce(
        F.col("_before.last_offset") + 1,
        F.when(segment_base != "", segment_base.cast("long")),
    )
    return events.select(
        *keys,
        "topic",
        "partition",
        "length",
        "kind",
        "message",
        F.when(same, F.col("_before.base_offset")).otherwise(after).alias("region_first_offset"),
        F.when(same, F.col("_before.last_offset")).alias("region_last_offset"),
        F.when(same, F.col("_before")).alias("region_batch"),
    )


def offset_overlap(batches: DataFrame, logs: DataFrame, files: DataFrame) -> DataFrame:
    """OFFSET_OVERLAP: in file order, a batch whose offsets start at or before the previous batch's last
    offset (`logs`, `files`: `log_bounds` and `file_ids`, whose `file_order` numbers the files of a log:
    the sort of narrow rows has numeric keys). Among the batches with a valid CRC (RULES.md).

    Ingest's decoder marks what its walk saw (`batches.walk_mark`, schemas.tables WALK_*): each work
    unit's first and last valid batch, and each overlap it met with the batch before it. Only those and
    the unmarked (null: rows no walk wrote) are sorted. A unit's first batch then follows the previous
    unit's last, and a marked overlap its own predecessor, with no valid batch between them; a batch
    marked only as last or as the predecessor of an overlap is not checked (what precedes it among
    the sorted rows need not be its predecessor, and the walk checked it).
    """
    mark = F.col("walk_mark") if "walk_mark" in batches.columns else F.lit(None).cast("byte")
    checked = mark.isNull() | (mark.bitwiseAND(F.lit(WALK_FIRST | WALK_OVERLAP)) != 0)
    edges = batches.where(F.col("crc_valid") & (mark.isNull() | (mark != 0))).withColumn("_checked", checked)
    b = with_log_id(
        edges,
        "position",
        "base_offset",
        "last_offset",
        "producer_id",
        "producer_epoch",
        "_checked",
    ).join(F.broadcast(files.select("file_id", "file_order")), "file_id")
    w = Window.partitionBy("log_id").orderBy("file_order", "position")
    b = b.withColumn("_prev_last", F.lag("last_offset").over(w)).withColumn(
        "_prev_base", F.lag("base_offset").over(w)
    )
    rows = (
        b.where(F.col("_checked") & (F.col("base_offset") <= F.col("_prev_last")))
        .join(F.broadcast(logs.select("log_id", *LOG_KEY)), "log_id")
        .join(F.broadcast(files.select("file_id", "file")), "file_id")
    )
    return to_findings(
        rows,
        "OFFSET_OVERLAP",
        fmt(
            "The batch at offsets %s-%s (%s byte %s) starts at or before the end of the previous batch "
            "(offsets %s-%s): "
            "offsets must increase within a partition.",
            "base_offset",
            "last_offset",
            "file",
            "position",
            "_prev_base",
            "_prev_last",
        ),
        producer_id=F.when(F.col("producer_id") >= 0, F.col("producer_id")),
        producer_epoch=F.when(F.col("producer_id") >= 0, F.col("producer_epoch")),
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="_prev_base",
    )


def snapshot_mismatch(
    history: DataFrame,
    producers: DataFrame,
    snapshots: DataFrame,
    logs: DataFrame,
    profile: Profile,
    failed: DataFrame | None = None,
) -> DataFrame:
    """SNAPSHOT_MISMATCH: a snapshot entry differs from the state replayed from the retained log below its
    offset (§4.2, §5.8; `producers`: `history.producer_summary`).

    An entry whose last offset lies in a batch of its log whose CRC failed and whose header names the
    entry's producer (`failed`: `history.failed_producer_batches`) is not compared: the replay skips
    that batch (its producer fields are not vouched for), so the state it gives ends before it, and the
    batch's CRC_MISMATCH is the finding (bytes that rotted after the snapshot was written).

    An entry's last offset is its producer's last data batch's (`lastDataOffset`, 1.0 and later), or,
    where `profile.markers_move_last_offset` (0.11, whose `ProducerIdEntry` took a marker's offset as its
    last offset), its last batch's or marker's; its last sequence is its last data batch's, or, in 0.11,
    -1 once a marker raised the epoch after it (0.11 reset the sequence then)."""
    entries = join_log(
        with_log_key(snapshots), logs, "log_start_offset", "log_end_offset", "compacted", "cleaned_to"
    )
    entries = entries.join(producers.select("log_key", "producer_id"), ["log_key", "producer_id"], "inner")
    # Snapshot entries become events in the producer's offset order: ordered at the snapshot offset,
    # before a batch ending there (the snapshot holds the state *before* its offset).
    ev_snap = entries.select(
        "log_key",
        "producer_id",
        F.col("snapshot_offset").alias("at"),
        F.lit(0).alias("_order"),
        F.struct(
            "snapshot_offset",
            "producer_epoch",
            "last_sequence",
            "last_offset",
            "file",
            "dump_id",
            "replica",
            "topic",
            "partition",
            "log_start_offset",
            "log_end_offset",
            "compacted",
            "cleaned_to",
        ).alias("snap"),
    )
    # Only the logs that have snapshots are replayed (their keys are few: broadcast).
    with_snapshots = logs.join(with_log_key(snapshots).select("log_key").distinct(), "log_key", "left_semi")
    # Every batch and marker the log holds was applied to the broker's state, a zombie's lower epoch
    # too (EPOCH_REGRESSION: a leader that had forgotten the producer, or a follower, which appends
    # what its leader wrote): the state takes the epoch of the last one (`maybeUpdateProducerEpoch`
    # sets any other epoch), not the highest.
    applied = history.join(F.broadcast(with_snapshots.select("log_key")), "log_key", "left_semi")
    ev_batch = applied.select(
        "log_key",
        "producer_id",
        F.col("last_offset").alias("at"),
        F.lit(1).alias("_order"),
        F.when(
            ~F.col("is_control"), F.struct("base_offset", "last_offset", "last_sequence", "producer_epoch")
        ).alias("data"),
        F.col("producer_epoch").cast("int").alias("epoch"),
        "position",
        "file_id",
    )
    events = (
        ev_snap.withColumn("data", F.lit(None).cast(ev_batch.schema["data"].dataType))
        .withColumn("epoch", F.lit(None).cast("int"))
        .withColumn("position", F.lit(None).cast(ev_batch.schema["position"].dataType))
        .withColumn("file_id", F.lit(None).cast(ev_batch.schema["file_id"].dataType))
        .unionByName(ev_batch.withColumn("snap", F.lit(None).cast(ev_snap.schema["snap"].dataType)))
    )
    # Batches ending at one offset (an overlap) in a fixed order: the last one's epoch is the state's.
    w = (
        Window.partitionBy("log_key", "producer_id")
        .orderBy("at", "_order", "position", "file_id")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    replayed = (
        events.withColumn("last_data", F.last("data", ignorenulls=True).over(w))
        .withColumn("epoch_seen", F.last("epoch", ignorenulls=True).over(w))
        # Events are in offset order: the latest batch or marker so far ends at the highest offset.
        .withColumn("last_row", F.max(F.when(F.col("_order") == 1, F.col("at"))).over(w))
        .where(F.col("snap").isNotNull() & F.col("epoch_seen").isNotNull())
    )
    s = F.col("snap")
    if profile.markers_move_last_offset:
        # 0.11: the last batch or marker; a marker that raised the epoch reset the sequence (-1). A data
        # batch the log no longer shows (below the log start, or cleaned) leaves the sequence unknown.
        last_offset = F.col("last_row")
        last_sequence = F.when(
            F.col("last_data.producer_epoch").cast("int") == F.col("epoch_seen"),
            F.col("last_data.last_sequence"),
        ).when(F.col("last_data").isNotNull(), F.lit(-1))
        unknown = F.lit(False)
    else:
        last_offset = F.col("last_data.last_offset")
        last_sequence = F.col("last_data.last_sequence")
        unknown = F.col("last_data").isNull()
    full = (s.last_offset >= s.log_start_offset) & (s.last_offset >= 0)
    differs = (s.producer_epoch != F.col("epoch_seen")) | (
        full
        & (
            unknown
            | (s.last_offset != last_offset)
            | F.coalesce(s.last_sequence != last_sequence, F.lit(False))
        )
    )
    # An older snapshot of a compacted log names a batch (and epoch) the cleaner has since removed: the
    # log then holds an earlier batch below the snapshot, or none. The batch lay below the segment the
    # cleaner stops at (not the active one, unless that shows a leader's cleaner: `cleaned_to`).
    replayed_last = F.coalesce(last_offset, F.lit(-1))
    removed = F.coalesce(s.cleaned_to > s.last_offset, F.lit(False))
    # (The cleaner never passes the log end: an entry at or past it names a batch the log lost.)
    # An entry without a batch (a marker that raised the epoch cleared its batches: Transactions V2, a
    # coordinator's fencing abort) at a higher epoch than the log shows: the cleaner removed that marker
    # (after delete.retention.ms, with its transaction's data) where it may have passed the log's last
    # event below the snapshot.
    marker_removed = (
        (s.last_offset < 0)
        & (s.producer_epoch > F.col("epoch_seen"))
        & F.coalesce(s.cleaned_to > F.col("last_row"), F.lit(False))
    )
    compacted_away = (
        removed
        & (s.producer_epoch >= F.col("epoch_seen"))
        & (s.last_offset > replayed_last)
        & (s.last_offset < s.log_end_offset)
    ) | marker_removed
    rows = replayed.where(differs & ~compacted_away)
    if failed is not None:
        # The failed header names the producer and its last offset, neither vouched for: only an entry
        # of the producer it names is excused, so a rotted offset delta hides no other producer's.
        rotted = with_log_key(failed).select(
            F.col("log_key").alias("_f_key"),
            F.col("producer_id").alias("_f_producer"),
            F.col("base_offset").alias("_f_base"),
            F.col("last_offset").alias("_f_last"),
        )
        rows = rows.join(
            rotted,
            (F.col("log_key") == F.col("_f_key"))
            & (F.col("producer_id") == F.col("_f_producer"))
            & (F.col("snap.last_offset") >= F.col("_f_base"))
            & (F.col("snap.last_offset") <= F.col("_f_last")),
            "left_anti",
        )
    rows = rows.select(
        "producer_id",
        "snap.*",
        "epoch_seen",
        last_offset.alias("replayed_last_offset"),
        last_sequence.alias("replayed_last_sequence"),
        F.col("last_row").alias("replayed_last_row"),
    )
    # An entry without a batch (-1: a marker raised the epoch and cleared them, `maybeUpdateProducerEpoch`)
    # points at the replayed producer's last row instead.
    has_offset = F.col("last_offset") >= 0
    said = F.when(
        has_offset,
        fmt(
            "%s says producer %s had epoch %s, last sequence %s at offset %s, but ",
            "file",
            "producer_id",
            "producer_epoch",
            "last_sequence",
            "last_offset",
        ),
    ).otherwise(
        fmt(
            "%s says producer %s had epoch %s and no batch (offset -1: a marker raised its epoch), but ",
            "file",
            "producer_id",
            "producer_epoch",
        )
    )
    # The broker deletes every snapshot past the log end when it truncates or recovers a log
    # (`truncateAndReload`, §4.3): an entry at or past the end names batches this log has lost since.
    message = F.when(
        F.col("last_offset") >= F.col("log_end_offset"),
        F.concat(
            said,
            fmt(
                "the log ends at offset %s, before that batch, and replaying it gives epoch %s, last "
                "sequence %s at offset %s: this replica lost its tail after the snapshot was written (a "
                "broker that crashed and has not recovered, or a copy of the log taken before the snapshot).",
                "log_end_offset",
                "epoch_seen",
                "replayed_last_sequence",
                "replayed_last_offset",
            ),
        ),
    ).otherwise(
        F.concat(
            said,
            fmt(
                "replaying the log up to offset %s gives epoch %s, last sequence %s at offset %s.",
                "snapshot_offset",
                "epoch_seen",
                "replayed_last_sequence",
                "replayed_last_offset",
            ),
        )
    )
    return to_findings(
        rows,
        "SNAPSHOT_MISMATCH",
        message,
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset=F.when(has_offset, F.col("last_offset")).otherwise(F.col("replayed_last_row")),
        last_offset=F.when(has_offset, F.col("last_offset")).otherwise(F.col("replayed_last_row")),
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
    )


def unreadable_spans(unreadable: DataFrame, batches: DataFrame) -> DataFrame:
    """(`log_key`, `_from`, `_to`) of each region of `unreadable` (`unreadable_regions`): the offsets what
    it held may have had, from its `region_first_offset` up to the base offset of the next readable
    batch of its log (later in its file, or in a later segment file: names sort as their base offsets;
    `_to` null: none follows). Only the batches of logs with such a region are read: with the regions,
    in one sort per log from its end, each region takes the lowest base offset of the batches after it
    (a join of each batch with the regions before it grew as regions times batches)."""
    regions = with_log_key(unreadable).select(
        "log_key",
        "file",
        "position",
        F.col("region_first_offset").alias("_from"),
        F.lit(None).cast("long").alias("base_offset"),
        F.lit(True).alias("_region"),
    )
    damaged = regions.select("log_key").distinct()
    readable = (
        with_log_key(batches)
        .join(F.broadcast(damaged), "log_key", "left_semi")
        .select(
            "log_key",
            "file",
            "position",
            F.lit(None).cast("long").alias("_from"),
            "base_offset",
            F.lit(False).alias("_region"),
        )
    )
    # From the log's end: the rows before a region's in this order are the batches after it (no batch
    # header lies at a region's own position).
    after = (
        Window.partitionBy("log_key")
        .orderBy(F.col("file").desc(), F.col("position").desc())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return (
        regions.unionByName(readable)
        .withColumn("_to", F.min("base_offset").over(after))
        .where(F.col("_region"))
        .select("log_key", "_from", "_to")
    )


def replica_divergence(
    batches: DataFrame,
    logs: DataFrame,
    unreadable: DataFrame | None = None,
    keep: Store = as_is,
) -> DataFrame:
    """REPLICA_DIVERGENCE (contract §4): two replicas of a partition, or two dumps of one replica taken
    at different times, of one topic incarnation (`logs.log_bounds`: a topic deleted and created again
    is another topic), hold different batches at the same offset, at or above both log starts and
    below both bounds. A log's bound is its high watermark, or its end where that is lower or the
    watermark unknown: a follower behind, or a tail the dump does not hold, is not a rewrite.

    Each log is compared with each other replica's log nearest in capture time (the one of its own
    dump first) and with its own replica's previous dump; each batch goes to each pair its log is in,
    so the work grows with the logs and replicas, not with the square of the dumps. A log without a
    batch starting at an offset where the other has one differs from it; so do batches with another
    `(last_offset, crc)`. Where a batch's CRC failed on either side its bytes rotted (`CRC_MISMATCH`):
    only its partition leader epoch, which the CRC does not cover and a rewrite by another leader
    changes, is compared. Where no header could be read on one side (`unreadable`:
    `unreadable_regions`), the offsets the unreadable bytes may have held are that log's corruption
    (UNREADABLE_BATCH, TRUNCATED_TAIL), not a rewrite: a batch only the other side holds there does
    not count. A pair that differs is one finding, in the later log of the two (by its
    dump's capture time, then dump id and replica), naming the earlier one.

    Where either high watermark is unknown (a partition directory given alone has no
    `replication-offset-checkpoint`), a log's end is no evidence of what was committed: a leader that
    crashed before its followers fetched its last batches, once a clean election moved on, holds a
    tail the new leader replaced, and nothing acknowledged was lost (KIP-101). There a position counts
    where both logs hold the same batch again at a higher offset (a follower that fetched that batch
    had truncated to its leader's log below it: they differ below it only if a log was rewritten), or
    where both hold a batch of the same partition leader epoch with other contents (one leader wrote
    both, and no election explains it).

    `keep(frame, name)` (`pipeline.local_checkpoint`) stores the pairs of logs compared, read three
    times below, and the comparison at each offset, read twice; without it each reader computes them
    again."""
    # Each replica's cleaner compacts on its own schedule: compacted logs differ without loss.
    replica = F.coalesce("replica", F.lit(""))
    eligible = logs.where(~F.col("compacted") & F.col("cleaned_to").isNull()).select(
        *PARTITION_OF_LOG,
        "log_key",
        "dump_id",
        "replica",
        F.col("log_start_offset").alias("_start"),
        F.least(F.coalesce("high_watermark", "log_end_offset"), F.col("log_end_offset")).alias("_bound"),
        F.col("high_watermark").isNotNull().alias("_hw"),
        F.col("dump_time_ms").alias("_time"),
    )
    eligible = eligible.withColumn(
        "_order",
        F.row_number().over(Window.partitionBy(*PARTITION_OF_LOG).orderBy("_time", "dump_id", replica)),
    )
    fields = ("log_key", "dump_id", "replica", "_start", "_bound", "_hw", "_time", "_order")
    other = eligible.select(*PARTITION_OF_LOG, *[F.col(c).alias(f"ref{c}") for c in fields])
    candidates = eligible.join(other, list(PARTITION_OF_LOG), "inner").where(
        F.col("reflog_key") != F.col("log_key")
    )
    ref_replica = F.coalesce("refreplica", F.lit(""))
    # Each other replica's log nearest in time (its own dump first), and the same replica's previous dump.
    nearest = Window.partitionBy("log_key", ref_replica).orderBy(
        F.abs(F.col("ref_time") - F.col("_time")), F.col("refdump_id") != F.col("dump_id"), "refdump_id"
    )
    replicas = (
        candidates.where(ref_replica != replica)
        .withColumn("_rank", F.row_number().over(nearest))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )
    previous = Window.partitionBy("log_key").orderBy(F.col("ref_order").desc())
    over_time = (
        candidates.where((ref_replica == replica) & (F.col("ref_order") < F.col("_order")))
        .withColumn("_rank", F.row_number().over(previous))
        .where(F.col("_rank") == 1)
        .drop("_rank")
    )
    # Each pair once, reported in its later log.
    me = F.struct(*[F.col(c).alias(c) for c in fields])
    them = F.struct(*[F.col(f"ref{c}").alias(c) for c in fields])
    later = F.col("_order") > F.col("ref_order")
    oriented = replicas.unionByName(over_time).select(
        *PARTITION_OF_LOG,
        F.when(later, me).otherwise(them).alias("a"),
        F.when(later, them).otherwise(me).alias("b"),
    )
    pairs = (
        oriented.select(
            *PARTITION_OF_LOG,
            F.col("a.log_key").alias("log_key"),
            F.col("a.dump_id").alias("dump_id"),
            F.col("a.replica").alias("replica"),
            F.col("b.log_key").alias("ref_key"),
            F.col("b.dump_id").alias("ref_dump_id"),
            F.col("b.replica").alias("ref_replica"),
            F.greatest("a._start", "b._start").alias("lo"),
            F.least("a._bound", "b._bound").alias("hi"),
            (F.col("a._hw") & F.col("b._hw")).alias("watermarks"),
        )
        .where(F.col("lo") < F.col("hi"))
        .distinct()
        .withColumn("_pair", F.xxhash64("log_key", "ref_key"))
    )
    # (A row per two logs compared.)
    pairs = keep(pairs, "log pairs")
    sides = pairs.select(
        "_pair",
        "lo",
        "hi",
        "watermarks",
        F.explode(
            F.array(
                F.struct(F.col("log_key").alias("member"), F.lit(True).alias("mine")),
                F.struct(F.col("ref_key").alias("member"), F.lit(False).alias("mine")),
            )
        ).alias("_side"),
    ).select(
        "_pair",
        "lo",
        "hi",
        "watermarks",
        F.col("_side.member").alias("log_key"),
        F.col("_side.mine").alias("mine"),
    )
    placed = (
        with_log_key(batches)
        .join(F.broadcast(sides), "log_key", "inner")
        .where((F.col("base_offset") >= F.col("lo")) & (F.col("base_offset") < F.col("hi")))
    )
    batch = F.when(F.col("crc_valid"), F.struct("last_offset", "crc"))

    def side(mine: bool) -> list[Column]:
        this = F.col("mine") == F.lit(mine)
        name = "x" if mine else "y"
        return [
            F.max(this).alias(f"{name}_held"),
            F.max(this & ~F.col("crc_valid")).alias(f"{name}_rotted"),
            # Both ends of what the log holds there: a log with two batches at one offset (an overlap)
            # is compared by both, whichever the shuffle brings first.
            F.min(F.when(this, batch)).alias(f"{name}_min"),
            F.max(F.when(this, batch)).alias(f"{name}_max"),
            F.min(F.when(this, F.col("partition_leader_epoch"))).alias(f"{name}_epoch"),
            # The range's end from readable batches (a rotted one's offset delta may be rotted too).
            F.max(
                F.when(this, F.when(F.col("crc_valid"), F.col("last_offset")).otherwise(F.col("base_offset")))
            ).alias(f"{name}_last"),
        ]

    # (Stored: read by both aggregations below, which Spark's column pruning would otherwise plan as two
    # aggregates of their own, each scanning and shuffling every batch of both logs.)
    at_offset = keep(
        placed.groupBy("_pair", "base_offset").agg(
            F.first("watermarks").alias("watermarks"), *side(True), *side(False)
        ),
        "offset comparison",
    )
    rotted = F.col("x_rotted") | F.col("y_rotted")
    differs = F.when(
        F.col("x_held") & F.col("y_held") & rotted, F.col("x_epoch") != F.col("y_epoch")
    ).otherwise(
        ~(F.col("x_held") & F.col("y_held"))
        | ~F.col("x_min").eqNullSafe(F.col("y_min"))
        | ~F.col("x_max").eqNullSafe(F.col("y_max"))
    )
    # Without both watermarks, what lies below a batch both logs hold alike, or what one leader epoch
    # wrote twice. (Both aggregations read the comparison stored above.)
    # (A batch of magic 0 or 1, or dump-log text without it, has no leader epoch: -1 on both sides.)
    one_leader = (
        F.col("x_held") & F.col("y_held") & (F.col("x_epoch") >= 0) & (F.col("x_epoch") == F.col("y_epoch"))
    )
    # Alike in one leader epoch: a follower copies its leader's batches with their epoch (outside the
    # CRC), so the same bytes under another epoch are another append of them (a producer's retry to
    # the next leader), no sign that the logs agreed there.
    agreed = (
        at_offset.where(
            F.col("x_held") & F.col("y_held") & ~differs & F.col("x_epoch").eqNullSafe(F.col("y_epoch"))
        )
        .groupBy("_pair")
        .agg(F.max("base_offset").alias("_agreed_to"))
    )
    below_agreed = F.coalesce(F.col("base_offset") < F.col("_agreed_to"), F.lit(False))
    differing = at_offset.where(differs)
    if unreadable is not None:
        spans = unreadable_spans(unreadable, batches).withColumnRenamed("log_key", "_blind_key")
        keys = pairs.select("_pair", F.col("log_key").alias("_x_key"), F.col("ref_key").alias("_y_key"))
        missing = F.when(~F.col("x_held"), F.col("_x_key")).when(~F.col("y_held"), F.col("_y_key"))
        differing = (
            differing.join(F.broadcast(keys), "_pair", "inner")
            .join(
                F.broadcast(spans),
                (missing == F.col("_blind_key"))
                & (F.col("base_offset") >= F.col("_from"))
                & (F.col("_to").isNull() | (F.col("base_offset") < F.col("_to"))),
                "left_anti",
            )
            .drop("_x_key", "_y_key")
        )
    agg = (
        differing.join(F.broadcast(agreed), "_pair", "left")
        .where(F.col("watermarks") | below_agreed | one_leader)
        .groupBy("_pair")
        .agg(
            F.min("base_offset").alias("first"),
            F.max(F.greatest("x_last", "y_last")).alias("last"),
            F.count(F.lit(1)).alias("n"),
        )
    )
    rows = agg.join(F.broadcast(pairs), "_pair", "inner")
    return to_findings(
        rows,
        "REPLICA_DIVERGENCE",
        F.concat(
            fmt(
                "%s batch position(s) between offsets %s and %s differ between dump %s replica %s and dump "
                "%s replica %s, ",
                "n",
                "first",
                "last",
                "dump_id",
                "replica",
                "ref_dump_id",
                "ref_replica",
            ),
            F.when(
                F.col("watermarks"),
                F.lit(
                    "below both high watermarks (or log ends): acknowledged data was rewritten (e.g. an "
                    "unclean leader election)."
                ),
            ).otherwise(
                F.lit(
                    "each below a batch both logs hold alike again, or written in one partition leader epoch "
                    "on both sides (the high watermarks are not both known: a tail one log lost to a clean "
                    "election does not count): acknowledged data was rewritten."
                )
            ),
        ),
        first_offset="first",
        last_offset="last",
        related_offset="first",
        # One log differs from several others over one range: each pair is a finding of its own.
        evidence="ref_key",
    )


def zeroed_tails(files: DataFrame, segments: DataFrame, quarantine: DataFrame) -> DataFrame:
    """TRUNCATED_TAIL for the bytes past the last batch (and quarantined region) of a live segment that
    is not its log's last, active one: the decoder reads zeros to a file's end as preallocation
    (`file.preallocate`) and quarantines nothing, which holds only for the active segment. The broker
    trims a segment to its data when it rolls (`LogSegment.onBecomeInactiveSegment`: `log.trim()`) and
    truncates a crashed log's invalid tail on recovery, so zeros ending an older segment were batches:
    zeroed (a crash on a filesystem that zero-fills blocks not yet flushed) or a damaged copy. Bytes
    other than zeros there are already quarantined. Offsets from after the segment's last batch up to
    the next segment's base are where they were. `segments`: `logs.segment_files` (`bytes_end`)."""
    live = with_log_key(
        files.where((F.col("kind") == "log") & F.col("is_live") & F.col("topic").isNotNull()).select(
            *LOG_KEY, "file", "base_offset", "size_bytes"
        )
    )
    # Files are few (one row per segment): the next one's base per log.
    following = Window.partitionBy("log_key").orderBy("base_offset")
    older = live.withColumn("_next_base", F.lead("base_offset").over(following)).where(
        F.col("_next_base").isNotNull() & (F.col("size_bytes") > 0)
    )
    # The batches' end per file, from the segment facts (`logs.segment_files`: no pass over the batches).
    ends = with_log_key(segments).select(
        "log_key", "file", F.col("bytes_end").alias("_end"), (F.col("log_end_offset") - 1).alias("_last")
    )
    regions = (
        with_log_key(quarantine.where(F.col("topic").isNotNull()))
        .groupBy("log_key", "file")
        .agg(F.max(F.col("position") + F.coalesce(F.col("length"), F.lit(0))).alias("_quarantined"))
    )
    read = F.greatest(F.coalesce(F.col("_end"), F.lit(0)), F.coalesce(F.col("_quarantined"), F.lit(0)))
    tails = (
        older.join(ends, ["log_key", "file"], "left")
        .join(regions, ["log_key", "file"], "left")
        .withColumn("position", read)
        .where(F.col("position") < F.col("size_bytes"))
        .withColumn("_first", F.coalesce(F.col("_last") + 1, F.col("base_offset")))
    )
    held = F.col("_first") < F.col("_next_base")
    return to_findings(
        tails,
        "TRUNCATED_TAIL",
        fmt(
            "%s at byte %s (%s bytes): zeros to the end of a segment that is not its log's active one, where "
            "the broker leaves none (it trims a segment when it rolls and a crashed log's tail when it "
            "recovers; only the active segment is preallocated): batches written there were zeroed, or the "
            "copy is damaged%s [corruption: the bytes hold no batch]",
            "file",
            "position",
            F.col("size_bytes") - F.col("position"),
            F.when(
                held,
                fmt(
                    ". Offsets %s-%s, up to the next segment's base, were there",
                    "_first",
                    F.col("_next_base") - 1,
                ),
            ).otherwise(F.lit("")),
        ),
        first_offset=F.when(held, F.col("_first")),
        last_offset=F.when(held, F.col("_next_base") - 1),
        evidence=file_evidence("file", "position"),
        rule=F.lit("LogSegment.onBecomeInactiveSegment trims a rolled segment"),
    )
