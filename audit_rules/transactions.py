"""Transaction rules (KIP-98 markers, KIP-664 hanging transactions, KAFKA-9144 coordinator epochs)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from audit_rules.findings import file_evidence, fmt, to_findings
from audit_rules.history import REPLAY_TIES, coordinator_epoch_before
from audit_rules.logs import below_start_cause, compaction_may_have_removed, with_log_key
from audit_rules.profile import Profile
from schemas.tables import LOG_KEY


def hanging_transactions(
    history: DataFrame, producers: DataFrame, profile: Profile, failed: DataFrame | None = None
) -> DataFrame:
    """HANGING_TRANSACTION: transactional data with no later marker, older than transaction.max.timeout.ms at
    the log's last timestamp (`producers`: `history.producer_summary`, for the producer's last marker).

    Its age is read on one clock at a time. A data batch's timestamp is its producer's (CreateTime: an
    application's event time, as Kafka Streams forwards it, may be hours old when written); a marker's
    is the brokers' (the partition leader's, when it wrote the marker). By the brokers' clock: the
    newest less the earliest timestamp of the markers after the transaction's first batch (which was
    appended before each of them: its age is at least that; a marker before it, from a leader whose
    clock ran ahead, says nothing of it), summed over the partition leader epochs (each leader's
    markers on its own clock: a leader change does not read one clock against another). By the
    producers': the newest
    data batch's timestamp in the log less the first batch's. The longer of the two counts (the
    brokers' stops where markers stop). Mixed, an exactly-once application catching up on old input,
    its transaction open for a second, was hanging by the hours between its records' event times and
    its last commit. A partition where such an application and producers stamping wall-clock time both
    write still mixes the producers' clocks.

    `failed` (`history.failed_producer_batches`, where some CRC failed): a failed batch after the open
    data whose header,
    not vouched for by the CRC, claims to be a marker of that producer at the transaction's epoch or
    above is named in the message: the transaction's end may be there, unreadable. The finding stays
    (a consumer cannot read past either)."""
    data = history.where(F.col("is_transactional") & ~F.col("is_control")).join(
        producers.select("log_key", "producer_id", "last_marker"), ["log_key", "producer_id"]
    )
    # Flagged batches count too: state rebuilt from the log does not validate (§5.4, §5.8).
    open_data = data.where(F.col("last_marker").isNull() | (F.col("base_offset") > F.col("last_marker")))
    txns = open_data.groupBy("log_key", "dump_id", "replica", "topic", "partition", "producer_id").agg(
        # The first batch, at one offset (an overlapping log) the one the replay takes first.
        F.min_by(
            F.struct("base_offset", "producer_epoch", "base_sequence", "max_timestamp"),
            F.struct("base_offset", *REPLAY_TIES),
        ).alias("f"),
        F.max("last_offset").alias("open_last_offset"),
        F.max("last_sequence").alias("open_last_sequence"),
        # Where read_committed consumers stop: the broker keeps its first unstable offset at or above the
        # log start (`UnifiedLog.maybeIncrementFirstUnstableOffset`), which DeleteRecords may move past it.
        F.max("log_start_offset").alias("_log_start"),
        F.max("log_max_data_timestamp").alias("max_timestamp"),
    )
    # The brokers' clock: the markers (any producer's) of the logs with an open transaction, in one
    # sort with the transactions' first offsets, from the log's end: the newest and the earliest time of
    # the markers after each first offset (a marker before it, from a leader whose clock ran ahead,
    # says nothing of the transaction's age).
    # One leader's clock at a time: each partition leader epoch's markers after the first offset span
    # part of the transaction's life, on the clock of the leader that wrote them, and the leaders held
    # the partition one after another, so the spans add up (a leader whose clock ran ahead, before a
    # leader change, makes no span of the markers after it). Each transaction's row goes to every
    # leader epoch of its log's markers (a handful), and one sort per (log, epoch) from its end gives
    # the newest and the earliest time after each first offset.
    markers = (
        history.where(F.col("is_control"))
        .join(txns.select("log_key").distinct(), "log_key", "left_semi")
        .select(
            "log_key",
            F.col("partition_leader_epoch").alias("_epoch"),
            F.lit(None).cast("long").alias("producer_id"),
            F.col("base_offset").alias("_at"),
            F.col("max_timestamp").alias("_t"),
        )
    )
    epochs = markers.select("log_key", "_epoch").distinct()
    firsts = txns.select(
        "log_key", "producer_id", F.col("f.base_offset").alias("_at"), F.lit(None).cast("long").alias("_t")
    ).join(epochs, "log_key")
    # From the end; at one offset (an overlapping log) the transaction's row before a marker's, which is
    # then not after it.
    from_end = Window.partitionBy("log_key", "_epoch").orderBy(
        F.col("_at").desc(), F.col("producer_id").isNull()
    )
    after = from_end.rowsBetween(Window.unboundedPreceding, 0)
    clock = (
        markers.unionByName(firsts)
        .withColumn("_span", F.max("_t").over(after) - F.min("_t").over(after))
        .where(F.col("producer_id").isNotNull())
        .groupBy("log_key", "producer_id")
        .agg(F.sum("_span").alias("_marker_span"))
    )
    txns = txns.join(clock, ["log_key", "producer_id"], "left")
    age = F.greatest(F.col("_marker_span"), F.col("max_timestamp") - F.col("f.max_timestamp"))
    hanging = txns.where(age > profile.transaction_max_timeout_ms)
    note = F.lit("")
    if failed is not None:
        hanging, note = _failed_marker_after(hanging, failed)
    return to_findings(
        hanging,
        "HANGING_TRANSACTION",
        F.concat(
            fmt(
                "Producer %s epoch %s opened a transaction at offset %s that has no COMMIT or ABORT marker, "
                "at least %s ms before the partition's last timestamp (transaction.max.timeout.ms = %s): "
                "read_committed consumers are stuck at offset %s.",
                "producer_id",
                "f.producer_epoch",
                "f.base_offset",
                age,
                F.lit(profile.transaction_max_timeout_ms),
                F.greatest(F.col("f.base_offset"), F.coalesce(F.col("_log_start"), F.col("f.base_offset"))),
            ),
            _within_late_buffer(age, profile),
            note,
        ),
        producer_id="producer_id",
        producer_epoch="f.producer_epoch",
        first_offset="f.base_offset",
        last_offset="open_last_offset",
        base_sequence="f.base_sequence",
    )


def swept_transactions(
    history: DataFrame,
    producers: DataFrame,
    profile: Profile,
    failed: DataFrame | None = None,
    unreadable: DataFrame | None = None,
) -> DataFrame:
    """HANGING_TRANSACTION of a transaction a later epoch's swept up: the producer's transactional data
    of epoch e (from offset f) followed, before any marker of the producer, by its data of a higher
    epoch, a marker after them, and the later data written more than the transaction timeout after f.

    Every normal path puts a marker between: transactions V1 end each transaction with a marker at its
    epoch, and a coordinator that fences an epoch (InitProducerId, a timeout) writes the ABORT before
    the new epoch can write; V2 writes each marker one epoch up. So the epoch-e data is a produce
    request that landed after its transaction had ended (a client's abort after a timeout, brokers before
    transaction verification, KIP-890 part 1 in 3.6): the partition's producer state opened a
    transaction there that no coordinator knew of (`ProducerAppendInfo.appendDataBatch`), the epoch
    change did not close it (`ProducerStateEntry.maybeUpdateProducerEpoch` keeps `currentTxnFirstOffset`),
    and the later epoch's marker closed it: read_committed consumers stuck at f until then, and f's
    records committed or aborted with a later transaction's. The contract's key is (pid, epoch): that
    data has no marker of its own. A transaction still open at the log's end is `hanging_transactions`'.

    The producer's rows since its previous marker (`markers_before`), flagged ones left out (their epochs
    never fall); on its own clock (the newest of the later epochs' data before the marker, less f's
    timestamp: the transaction was open until then). Not where the cleaner may have
    removed a marker between (compaction), nor where a CRC-failed batch claiming to be the producer's
    (`failed`), or bytes no header could be read from (`unreadable`: `consistency.unreadable_regions`),
    lie between: the marker may be there, unreadable."""
    rows = history.where(F.col("ok") & F.col("is_transactional") & ~F.col("is_control"))
    # One producer's transaction in one log (the log's columns ride along: they follow from its key).
    txn = ["log_key", *LOG_KEY, "cleaned_to", "producer_id", "markers_before"]
    order = F.struct("base_offset", *REPLAY_TIES)
    per_epoch = rows.groupBy(*txn, "producer_epoch").agg(
        F.min_by(F.struct("base_offset", "base_sequence", "max_timestamp"), order).alias("first"),
        F.max("last_offset").alias("last"),
        F.max(F.struct("max_timestamp", "base_offset")).alias("newest"),
    )
    epochs = (
        per_epoch.groupBy(*txn)
        .agg(
            F.sort_array(F.collect_list(F.struct("producer_epoch", "first", "last", "newest"))).alias(
                "_epochs"
            )
        )
        .where(F.size("_epochs") > 1)
        .select(
            *txn,
            F.col("_epochs")[0].alias("swept"),
            F.col("_epochs")[1].alias("by"),
            # The newest data of the later epochs before the marker: the transaction was open until then
            # at least (not only until the next epoch's first batch, which may follow it within minutes).
            F.array_max(F.transform(F.slice("_epochs", 2, F.size("_epochs")), lambda e: e["newest"])).alias(
                "_newest"
            ),
        )
    )
    swept = (
        epochs.join(producers.select("log_key", "producer_id", "last_marker"), ["log_key", "producer_id"])
        .where(F.col("last_marker") > F.col("by.first.base_offset"))
        .withColumn("_age", F.col("_newest.max_timestamp") - F.col("swept.first.max_timestamp"))
        .where(
            (F.col("_age") > profile.transaction_max_timeout_ms)
            & ~compaction_may_have_removed(F.col("swept.first.base_offset"))
        )
    )
    if failed is not None:
        swept = _no_batch_between(
            swept,
            with_log_key(failed).select("log_key", "producer_id", "base_offset"),
            F.col("swept.first.base_offset"),
            F.col("by.first.base_offset"),
        )
    if unreadable is not None:
        regions = unreadable.select(*LOG_KEY, "region_first_offset")
        swept = swept.join(
            regions,
            [swept[k].eqNullSafe(regions[k]) for k in LOG_KEY]
            + [
                regions["region_first_offset"] > F.col("swept.first.base_offset"),
                regions["region_first_offset"] <= F.col("by.first.base_offset"),
            ],
            "left_anti",
        )
    return to_findings(
        swept,
        "HANGING_TRANSACTION",
        fmt(
            "Producer %s epoch %s wrote transactional data from offset %s that no marker closed before it "
            "wrote epoch %s at offset %s%s, %s ms after it: the broker kept that transaction open "
            "(read_committed consumers stuck at offset %s) and a later epoch's marker closed it, "
            "committing or aborting its records with another transaction's (a produce request that "
            "landed after its transaction had ended; KIP-890).",
            "producer_id",
            "swept.producer_epoch",
            "swept.first.base_offset",
            "by.producer_epoch",
            "by.first.base_offset",
            F.when(
                F.col("_newest.base_offset") != F.col("by.first.base_offset"),
                fmt(" and its later data at offset %s", "_newest.base_offset"),
            ).otherwise(F.lit("")),
            "_age",
            "swept.first.base_offset",
        ),
        producer_id="producer_id",
        producer_epoch="swept.producer_epoch",
        first_offset="swept.first.base_offset",
        last_offset="swept.last",
        base_sequence="swept.first.base_sequence",
        related_offset="by.first.base_offset",
        rule=F.lit("KIP-890 data after its transaction's end, closed by a later epoch's marker"),
    )


def _no_batch_between(rows: DataFrame, batches: DataFrame, after: Column, before: Column) -> DataFrame:
    """`rows` with no batch of `batches` (log_key, producer_id, base_offset) of their log and producer
    at an offset strictly between `after` and `before`, columns of `rows`."""
    other = batches.select(
        F.col("log_key").alias("_b_key"),
        F.col("producer_id").alias("_b_producer"),
        F.col("base_offset").alias("_b_at"),
    )
    return rows.join(
        other,
        (F.col("log_key") == F.col("_b_key"))
        & (F.col("producer_id") == F.col("_b_producer"))
        & (F.col("_b_at") > after)
        & (F.col("_b_at") < before),
        "left_anti",
    )


def _within_late_buffer(age: Column, profile: Profile) -> Column:
    """A sentence for a transaction open past the timeout by less than the broker's late-transaction
    buffer (`ProducerStateManager.hasLateTransaction` counts it late only after both): the coordinator
    aborts timed-out transactions periodically and writes their markers after, so a dump taken in
    between shows the abort not yet landed. The finding stays (contract §4: older than the timeout)."""
    return F.when(
        age <= profile.late_transaction_ms,
        F.lit(
            " It is open less than 5 minutes past the timeout, the broker's own late-transaction buffer: "
            "the coordinator's abort may not have landed when this was dumped."
        ),
    ).otherwise(F.lit(""))


def _failed_marker_after(hanging: DataFrame, failed: DataFrame) -> tuple[DataFrame, Column]:
    """`hanging` transactions with the first CRC-failed batch after their open data whose header claims
    to be their producer's marker (at the transaction's epoch or above), and the sentence naming it."""
    markers = with_log_key(failed.where(F.col("is_control"))).select(
        F.col("log_key").alias("_log_key"),
        F.col("producer_id").alias("_producer_id"),
        F.struct("base_offset", "producer_epoch", "file", "position").alias("_marker"),
    )
    key = ["log_key", "producer_id", "open_last_offset"]
    near = (
        hanging.select(*key, F.col("f.producer_epoch").alias("_epoch"))
        .join(
            markers,
            (F.col("log_key") == F.col("_log_key"))
            & (F.col("producer_id") == F.col("_producer_id"))
            & (F.col("_marker.base_offset") > F.col("open_last_offset"))
            & (F.col("_marker.producer_epoch") >= F.col("_epoch")),
        )
        .groupBy(*key)
        .agg(F.min_by("_marker", F.col("_marker.base_offset")).alias("_failed_marker"))
    )
    m = F.col("_failed_marker")
    note = F.when(
        m.isNotNull(),
        fmt(
            " The batch at offset %s (%s at byte %s) fails its CRC and its header claims to be this "
            "producer's marker at epoch %s: the transaction's end may be there, unreadable.",
            m.base_offset,
            m.file,
            m.position,
            m.producer_epoch,
        ),
    ).otherwise(F.lit(""))
    return hanging.join(near, key, "left"), note


def hanging_transactions_in_snapshots(
    producers: DataFrame, entries: DataFrame, logs: DataFrame, profile: Profile
) -> DataFrame:
    """HANGING_TRANSACTION from the newest producer snapshot (§4.2, §5.8): a producer whose
    `currentTxnFirstOffset` is set there, with no marker of its own after that offset in the log, no
    transactional data from that offset on (else `hanging_transactions` judges it from the data), and
    idle for longer than transaction.max.timeout.ms at the log's last timestamp (its capture time when
    no batch is left; `producers`: `history.producer_summary`; `entries`: `latest_snapshot_entries`).
    This is the transaction whose data retention or loss has taken away."""
    entries = entries.where(F.col("current_txn_first_offset") >= 0)
    seen = producers.select(
        "log_key",
        "producer_id",
        F.col("last_marker").alias("_last_marker"),
        F.col("last_transactional_data").alias("_last_txn_data"),
    )
    context = logs.select(
        "log_key",
        "log_start_offset",
        "remote_log_start",
        F.coalesce(F.col("max_timestamp"), F.col("capture_time_ms")).alias("_now"),
    )
    j = entries.join(seen, ["log_key", "producer_id"], "left").join(F.broadcast(context), "log_key", "left")
    first = F.col("current_txn_first_offset")
    open_txn = j.where(
        F.coalesce(F.col("_last_marker") <= first, F.lit(True))
        & F.coalesce(F.col("_last_txn_data") < first, F.lit(True))
        & ((F.col("_now") - F.col("timestamp")) > profile.transaction_max_timeout_ms)
    )
    where = F.when(
        first < F.col("log_start_offset"),
        F.concat(F.lit("below the log start offset, "), below_start_cause(first)),
    ).otherwise(F.lit("missing from the log although at or above the log start offset"))
    return to_findings(
        open_txn,
        "HANGING_TRANSACTION",
        fmt(
            "The producer snapshot at offset %s holds producer %s epoch %s with a transaction open since "
            "offset %s, idle %s ms before the partition's last timestamp (transaction.max.timeout.ms = %s), "
            "and no marker closes it; its data is %s (log start %s): read_committed consumers are stuck at "
            "offset %s.",
            "snapshot_offset",
            "producer_id",
            "producer_epoch",
            first,
            F.col("_now") - F.col("timestamp"),
            F.lit(profile.transaction_max_timeout_ms),
            where,
            "log_start_offset",
            first,
        ),
        evidence=file_evidence("file", F.col("snapshot_offset").cast("string")),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset=first,
        last_sequence="last_sequence",
        related_offset="snapshot_offset",
    )


def coordinator_epoch_regression(history: DataFrame) -> DataFrame:
    """COORDINATOR_EPOCH_REGRESSION: a marker's coordinator epoch below an earlier marker's for the same pid
    (KAFKA-9144)."""
    highest, at = coordinator_epoch_before()
    rows = (
        history.where(F.col("is_control") & (F.col("coordinator_epoch") < highest))
        .withColumn("_at", at)
        .withColumn("_hi", highest)
    )
    return to_findings(
        rows,
        "COORDINATOR_EPOCH_REGRESSION",
        fmt(
            "The %s marker of producer %s at offset %s carries coordinator epoch %s, lower than %s at "
            "offset %s: a "
            "stale transaction coordinator wrote it (KAFKA-9144).",
            "control_type",
            "producer_id",
            "base_offset",
            "coordinator_epoch",
            "_hi",
            "_at",
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="_at",
    )


def stale_transaction_markers(stale: DataFrame) -> DataFrame:
    """STALE_TXN_MARKER (error; KIP-890 part 2, KAFKA-19446): the markers of `stale_markers`."""
    return to_findings(
        stale,
        "STALE_TXN_MARKER",
        fmt(
            "The %s marker of producer %s epoch %s at offset %s ends a transaction of its own epoch (its "
            "data from offset %s), right after the %s marker at offset %s had ended one at that epoch: "
            "under transactions V2 each marker is one epoch above its transaction's data, as this "
            "producer's are, so this is the earlier transaction's marker written again (a coordinator's "
            "retry) that the broker took while the next transaction was open, ending it with the "
            "earlier one's outcome before its own end (KAFKA-19446; brokers with that fix refuse it). "
            "Read its records from offset %s with care: read_committed consumers were given that "
            "outcome, not the transaction's own.",
            "control_type",
            "producer_id",
            "producer_epoch",
            "base_offset",
            "_data_first",
            "_prev_type",
            "_prev_offset",
            "_data_first",
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="_prev_offset",
    )


def stale_markers(history: DataFrame) -> DataFrame:
    """The rows of the markers `STALE_TXN_MARKER` names (`empty_transaction_markers` reads them too).

    Under transactions V2 the coordinator writes each COMMIT or ABORT marker one epoch above its
    transaction's data, and the producer's next transaction goes on at the marker's epoch. A marker of
    the earlier transaction written again (the coordinator retries its WriteTxnMarkers after a failover
    or a lost response) carries that same epoch: with no transaction open the broker takes it as the
    retry it is (KAFKA-19999, an `EMPTY_TXN_MARKER` here), but once the next transaction's data is in,
    a broker before KAFKA-19446 (`ProducerStateManager.checkProducerEpoch` without the transaction
    version) took it too, and it ended that transaction with the earlier one's outcome: its records
    committed or aborted before their own end, whose marker then closes nothing (an `EMPTY_TXN_MARKER`
    naming the stale one), or only what came after.

    The log shows a marker `m` whose transaction's data (the producer's rows the replay took since its
    previous marker, `markers_before`) is all at `m`'s own epoch, right after the producer's previous
    marker `p`, at that same epoch and above the data `p` closed (a V2 end), in a producer whose markers
    are V2 ones: a COMMIT at or before `p` raised the epoch over its data. Transactions V1 never raise
    a COMMIT's epoch (only the coordinator's fencing ABORT does, and a V1 producer may go on at that
    epoch), so a producer whose raised markers are ABORTs only is left alone. Under V2 no marker
    carries its data's epoch, so neither the cleaner's removals nor unreadable batches between can make
    one look so. A marker whose epoch regressed, or whose previous marker did, is not read.

    `_own_end`: the offset of the transaction's own end where it closes nothing: the producer's first
    marker after the stale one and its copies (the same type and epoch, each right after the one before
    with no data between), of a later epoch, with no data since the marker before it."""
    # One shuffle by producer: the transactions' windows (a producer's rows since a marker, and the
    # marker) and its markers' window are both clustered by it.
    rows = history.where(F.col("ok") & F.col("is_transactional")).repartition("log_key", "producer_id")
    data = ~F.col("is_control")
    txn = Window.partitionBy("log_key", "producer_id", "markers_before")
    ends = (
        rows.withColumns(
            {
                "_low": F.min(F.when(data, F.col("producer_epoch"))).over(txn),
                "_high": F.max(F.when(data, F.col("producer_epoch"))).over(txn),
                "_data_first": F.min(F.when(data, F.col("base_offset"))).over(txn),
            }
        )
        .where(F.col("is_control") & F.col("control_type").isin("COMMIT", "ABORT"))
        # A V2 end, or a V1 fencing abort: above every epoch of the data it closes.
        .withColumn("_raised", F.coalesce(F.col("_high") < F.col("producer_epoch"), F.lit(False)))
    )
    markers = Window.partitionBy("log_key", "producer_id").orderBy("base_offset", *REPLAY_TIES)
    v2 = F.col("_raised") & (F.col("control_type") == "COMMIT")
    flagged = ends.withColumns(
        {
            "_prev": F.lag(
                F.struct("markers_before", "producer_epoch", "base_offset", "control_type", "_raised")
            ).over(markers),
            "_v2": F.max(v2).over(markers.rowsBetween(Window.unboundedPreceding, -1)),
        }
    ).withColumn(
        "_stale",
        (F.col("_low") == F.col("producer_epoch"))
        & (F.col("_high") == F.col("producer_epoch"))
        # The marker right before it (no other control batch of the producer between) was a V2 end at
        # its epoch, and a COMMIT at or before it raised the epoch.
        & (F.col("_prev.markers_before") == F.col("markers_before") - 1)
        & F.col("_prev._raised")
        & (F.col("_prev.producer_epoch") == F.col("producer_epoch"))
        & F.col("_v2"),
    )
    # A marker's copies: the same type and epoch right after it, closing no data. A run is a marker
    # and its copies; the transaction's own end is the first marker of the run after the stale one's,
    # when it closes no data and is of a later epoch.
    copy = (
        F.col("_high").isNull()
        & (F.col("_prev.markers_before") == F.col("markers_before") - 1)
        & (F.col("_prev.control_type") == F.col("control_type"))
        & (F.col("_prev.producer_epoch") == F.col("producer_epoch"))
    )
    runs = flagged.withColumn(
        "_run",
        F.sum(F.when(F.coalesce(copy, F.lit(False)), 0).otherwise(1)).over(
            markers.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    )
    next_run = Window.partitionBy("log_key", "producer_id").orderBy("_run").rangeBetween(1, 1)
    head = F.min(F.struct("base_offset", "producer_epoch", F.col("_high").isNull().alias("empty"))).over(
        next_run
    )
    return (
        runs.withColumn("_next", head)
        .where(F.col("_stale"))
        .withColumns(
            {
                "_prev_offset": F.col("_prev.base_offset"),
                "_prev_type": F.col("_prev.control_type"),
                "_own_end": F.when(
                    F.col("_next.empty") & (F.col("_next.producer_epoch") > F.col("producer_epoch")),
                    F.col("_next.base_offset"),
                ),
            }
        )
    )


def empty_transaction_markers(
    history: DataFrame,
    logs: DataFrame,
    failed: DataFrame | None = None,
    unreadable: DataFrame | None = None,
    stale: DataFrame | None = None,
) -> DataFrame:
    """EMPTY_TXN_MARKER (info; prior-art §1.7, klog's `empty_txn`): a COMMIT or ABORT marker that closes
    no data of its producer in this log. The coordinator writes a transaction's markers to every
    partition the transaction added (`TransactionMarkerChannelManager`), whether or not the producer's
    data reached it: a produce that failed or timed out after AddPartitionsToTxn, a producer fenced or
    aborted before sending, a transaction the coordinator aborted on its timeout. Harmless, but it
    names the producers whose transactions did not go as they meant.

    The producer's previous row the replay took (`prev_event_open_txn`, of any epoch: under transactions V2
    a marker carries the epoch after its data's, KIP-890) is a marker, or there is
    none and the log holds every offset from 0 in batches from offset 0 on (`logs`: `log_bounds`; with a
    later start, or offsets missing before its first batch, the transaction's data may have been there).
    Not where the log cleaner may have worked since that row (`compaction_may_have_removed`): it
    removes aborted data, and committed data a later record of the key replaced, and keeps the markers
    until the delete horizon (kafka-formats-and-rules §5.9), so a marker alone there is its work. A
    marker whose epoch regressed is EPOCH_REGRESSION's. Nor where the producer's transactional data may
    lie between that row and the marker unseen by the replay: a batch of it the replay skipped (a
    sequence range its offsets do not fit, a lower epoch: the broker appended both, and such a batch
    opened the transaction), a CRC-failed batch whose header names the producer (`failed`:
    `history.failed_producer_batches`), or bytes no header could be read from in the log
    (`unreadable`: `consistency.unreadable_regions`).

    After a stale marker (`stale`: `stale_markers`), which ended the open transaction early, the
    transaction's own end closes nothing: the message names the stale marker and the data it took."""
    candidates = history.where(
        F.col("is_control")
        & F.col("control_type").isin("COMMIT", "ABORT")
        & ~F.col("epoch_regressed")
        & ~F.coalesce(F.col("prev_event_open_txn"), F.lit(False))
        & ~compaction_may_have_removed(F.coalesce(F.col("prev_offset"), F.lit(-1)))
    )
    # The producer's data batches the replay did not take, between its previous row and the marker.
    skipped = history.where(
        F.col("is_transactional") & ~F.col("is_control") & (F.col("invalid") | F.col("epoch_regressed"))
    ).select("log_key", "producer_id", "base_offset")
    if failed is not None:
        skipped = skipped.unionByName(
            with_log_key(failed.where(~F.col("is_control"))).select("log_key", "producer_id", "base_offset")
        )
    candidates = _no_batch_between(
        candidates, skipped, F.coalesce(F.col("prev_offset"), F.lit(-1)), F.col("base_offset")
    )
    if unreadable is not None:
        candidates = candidates.join(
            with_log_key(unreadable).select("log_key").distinct(), "log_key", "left_anti"
        )
    # A producer's first row: only in a log whose batches begin at offset 0 and that deleted none.
    whole = logs.select("log_id", (F.col("first_kept_offset") == 0) & (F.col("first_batch_offset") == 0))
    rows = candidates.join(F.broadcast(whole.toDF("log_id", "_whole")), "log_id", "left").where(
        F.col("prev_event_open_txn").isNotNull() | F.coalesce(F.col("_whole"), F.lit(False))
    )
    # A marker straight after one of the same type and epoch is that marker written again: a coordinator
    # retries its WriteTxnMarkers after a failover (the new one resends the markers of every transaction
    # it loads in PrepareCommit or PrepareAbort) or a lost response, and the broker appends a marker at
    # the producer's epoch whenever no transaction is open. The row before (few: candidates only).
    previous = history.where(F.col("is_control")).select(
        "log_id",
        "producer_id",
        F.col("base_offset").alias("prev_offset"),
        F.col("producer_epoch").alias("_prev_epoch"),
        F.col("control_type").alias("_prev_type"),
    )
    rows = rows.join(
        previous.groupBy("log_id", "producer_id", "prev_offset").agg(
            F.max("_prev_epoch").alias("_prev_epoch"), F.max("_prev_type").alias("_prev_type")
        ),
        ["log_id", "producer_id", "prev_offset"],
        "left",
    )
    if stale is not None:
        rows = rows.join(
            stale.where(F.col("_own_end").isNotNull())
            .select(
                "log_key",
                "producer_id",
                F.col("_own_end").alias("base_offset"),
                F.col("base_offset").alias("_stale_offset"),
                F.col("control_type").alias("_stale_type"),
                F.col("_data_first").alias("_stale_data"),
            )
            .dropDuplicates(["log_key", "producer_id", "base_offset"]),
            ["log_key", "producer_id", "base_offset"],
            "left",
        )
    else:
        rows = rows.withColumns(
            {
                "_stale_offset": F.lit(None).cast("long"),
                "_stale_type": F.lit(None).cast("string"),
                "_stale_data": F.lit(None).cast("long"),
            }
        )
    repeated = (F.col("_prev_type") == F.col("control_type")) & (
        F.col("_prev_epoch") == F.col("producer_epoch")
    )
    before = F.when(
        F.col("prev_offset").isNotNull(),
        fmt("its previous batch in this log, at offset %s, is not transactional data", "prev_offset"),
    ).otherwise(F.lit("it has no batch before it, and the log holds every offset from 0"))
    after_stale = fmt(
        "The %s marker of producer %s epoch %s at offset %s closes no data: the %s marker at offset %s "
        "before it, a marker of the transaction before written again (STALE_TXN_MARKER), had already "
        "ended the transaction whose data begins at offset %s, with that earlier transaction's "
        "outcome. This marker is that transaction's own end, come after it.",
        "control_type",
        "producer_id",
        "producer_epoch",
        "base_offset",
        "_stale_type",
        "_stale_offset",
        "_stale_data",
    )
    again = fmt(
        "The %s marker of producer %s epoch %s at offset %s repeats the one at offset %s, of the same "
        "epoch with nothing between: the coordinator wrote it again (it retries a transaction's markers "
        "after a failover or a lost response).",
        "control_type",
        "producer_id",
        "producer_epoch",
        "base_offset",
        "prev_offset",
    )
    no_data = F.concat(
        fmt(
            "The %s marker of producer %s epoch %s at offset %s closes a transaction that wrote no data "
            "to this partition: ",
            "control_type",
            "producer_id",
            "producer_epoch",
            "base_offset",
        ),
        before,
        F.lit(
            ". The coordinator marks every partition a transaction added, whether or not the "
            "producer's data reached it (a produce that failed or timed out, a producer fenced or "
            "aborted before sending)."
        ),
    )
    # After a stale marker, the same marker again is one more copy of it; the first marker of a later
    # epoch after it and its copies is the transaction's own end (`stale_markers`' `_own_end`).
    message = F.when(repeated, again).when(F.col("_stale_data").isNotNull(), after_stale).otherwise(no_data)
    return to_findings(
        rows,
        "EMPTY_TXN_MARKER",
        message,
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="base_offset",
        last_offset="last_offset",
        related_offset="prev_offset",
    )


def _segment(file: Column) -> Column:
    """A segment file's path without its suffix (`.log`, `.index`, `.txnindex`, any with `.swap`)."""
    return F.regexp_replace(file, r"\.(log|index|txnindex)(\.swap)?$", "")


def txn_index_consistency(
    history: DataFrame, txn_index: DataFrame, files: DataFrame, logs: DataFrame | None = None
) -> DataFrame:
    """INDEX_MISMATCH (TransactionIndex): ABORT markers closing a transaction and `.txnindex` entries must
    match one to one.

    The broker writes each entry into the index of its marker's segment (`LogSegment.updateTxnIndex`),
    with the transaction's first offset, which may lie in an earlier segment. An entry and a marker are
    one transaction when they name the same producer and marker offset in one segment; the entry's
    first offset must be the retained transaction's first batch, unless what lay between them is gone:
    below the log start (retention deleted the transaction's first segments), or where the cleaner may
    have removed batches (it drops an aborted transaction's data and keeps its marker and entry until the
    delete horizon, `LogCleaner`). A marker that closes no retained data needs no entry (the broker
    writes one only where a transaction was open, formats §5.6); one it has starts at an offset now
    gone, or at the marker's own (brokers that wrote entries for empty transactions)."""
    # The first offset of the transaction an ABORT closes: the first transactional data batch after the
    # pid's previous marker (`markers_before` numbers the pid's transactions in offset order). Fenced
    # rows (a lower epoch) count: a follower appends them with a warning
    # (`ProducerAppendInfo.checkProducerEpoch`, REPLICATION origin), its producer state closes the
    # transaction at such a marker, and the index lists it; the regression is EPOCH_REGRESSION's finding.
    # So do batches whose sequences do not fit their offsets (INVALID_SEQUENCE's): the broker appended
    # them, and `ProducerAppendInfo.appendDataBatch` opens the transaction at any transactional data.
    marked = history.withColumn("_txn", F.col("markers_before"))
    firsts = (
        marked.where(F.col("is_transactional") & ~F.col("is_control"))
        .groupBy("log_key", "producer_id", "_txn")
        .agg(F.min("base_offset").alias("txn_first_offset"))
    )
    # The pid's marker before each marker: every marker closes the pid's transaction
    # (`ProducerStateEntry.update` clears `currentTxnFirstOffset`), so an aborted transaction starts after
    # it, whatever retention or the cleaner took since.
    previous = Window.partitionBy("log_key", "producer_id").orderBy("base_offset")
    # And the lowest first offset of the aborted transactions closed after each ABORT in its log: those a
    # fetch that stops at its entry would miss (below).
    listed_after = (
        Window.partitionBy("log_key").orderBy("base_offset").rowsBetween(1, Window.unboundedFollowing)
    )
    aborts = (
        marked.where(F.col("is_control"))
        .withColumn("_previous_marker", F.lag("base_offset").over(previous))
        .where(F.col("control_type") == "ABORT")
        .join(firsts, ["log_key", "producer_id", "_txn"], "left")
        .withColumn("_later_first", F.min("txn_first_offset").over(listed_after))
    )
    # Only segments whose .txnindex was dumped can be checked, and those whose .index was dumped
    # without one: the broker creates a .txnindex with its first entry (`TransactionIndex` opens its
    # file on append), so a segment copied with its indexes and none holds no entry. A segment's files
    # meet by their name without its suffix in one log (`log_key`: one dump of one replica, a bare
    # partition directory's null replica a value too): a cleaned segment's may still end in `.swap`
    # (`LogSegment.changeFileSuffixes` renames them one by one), and two dumps of one directory share
    # their paths. Not the active segment's missing .txnindex: a copy of a live directory may list it
    # before the broker appends the first entry its last ABORT needs.
    # And only in a dump that holds some .txnindex (of any replica: one copy): a copy of `*.log` and
    # `*.index` alone left every one out, which says nothing of what the broker wrote.
    keyed = with_log_key(files)
    active = keyed.where(F.col("kind") == "log").groupBy("log_key").agg(F.max("base_offset").alias("_active"))
    copied = keyed.where(F.col("kind") == "txnindex").select("dump_id").distinct()
    indexed = (
        keyed.where(F.col("kind").isin("txnindex", "index"))
        .join(copied, "dump_id", "left_semi")
        .groupBy("log_key", "base_offset", _segment(F.col("file")).alias("_segment"))
        .agg(F.max(F.when(F.col("kind") == "txnindex", F.col("file"))).alias("_index_file"))
        .join(active, "log_key", "left")
        .where(
            F.col("_index_file").isNotNull()
            | F.coalesce(F.col("base_offset") < F.col("_active"), F.lit(False))
        )
        .select("log_key", "_segment", "_index_file")
    )
    aborts = aborts.withColumn("_segment", _segment(F.col("file"))).join(
        indexed, ["log_key", "_segment"], "inner"
    )
    entries = with_log_key(txn_index).select(
        "log_key",
        _segment(F.col("file")).alias("_segment"),
        F.col("file").alias("_index_file"),
        "producer_id",
        F.col("first_offset").alias("entry_first_offset"),
        F.col("last_offset").alias("base_offset"),
        F.col("last_stable_offset").alias("entry_last_stable_offset"),
        "dump_id",
        "replica",
        "topic",
        "partition",
    )
    marker = ["log_key", "_segment", "producer_id", "base_offset"]
    paired = aborts.join(
        entries.select(*marker, "entry_first_offset", "entry_last_stable_offset"), marker, "left"
    )
    entry_first = F.col("entry_first_offset")
    gone_before = (entry_first < F.col("log_start_offset")) | compaction_may_have_removed(entry_first - 1)
    agrees = F.coalesce(
        (
            (entry_first == F.col("txn_first_offset"))
            | (entry_first < F.col("txn_first_offset")) & gone_before
            | F.col("txn_first_offset").isNull() & ((entry_first == F.col("base_offset")) | gone_before)
        )
        # Not from the pid's previous marker or before: read_committed consumers would drop the records
        # of its committed transactions there as aborted (they filter from the entry's first offset).
        & F.coalesce(entry_first > F.col("_previous_marker"), F.lit(True)),
        F.lit(False),
    )
    # A marker closing retained data with no entry at all, or an entry from another first offset.
    wrong = paired.where(
        entry_first.isNull() & F.col("txn_first_offset").isNotNull() | entry_first.isNotNull() & ~agrees
    )
    stray = entries.join(aborts.select(*marker), marker, "left_anti")
    if logs is not None:
        # Not an entry of the active segment's .txnindex past the end of the dumped log: the broker
        # appends a marker to the .log and then its entry to the .txnindex (`UnifiedLog.append`), and a
        # copy of a live directory takes the .txnindex after the .log (it sorts after it), so it may
        # list markers appended in between. (A rolled segment's entries never pass its log's end.)
        ends = logs.select("log_key", "log_end_offset")
        bases = keyed.where(F.col("kind") == "txnindex").select(
            "log_key", F.col("file").alias("_index_file"), F.col("base_offset").alias("_index_base")
        )
        live_tail = (F.col("_index_base") >= F.col("_active")) & (
            F.col("base_offset") >= F.col("log_end_offset")
        )
        stray = (
            stray.join(F.broadcast(ends), "log_key", "left")
            .join(bases, ["log_key", "_index_file"], "left")
            .join(active, "log_key", "left")
            .where(~F.coalesce(live_tail, F.lit(False)))
        )
    index_name = F.coalesce(
        F.col("_index_file"),
        F.concat(F.col("_segment"), F.lit(".txnindex (no such file, though the segment's .index is there)")),
    )
    a = to_findings(
        wrong,
        "INDEX_MISMATCH",
        F.when(
            entry_first.isNull(),
            fmt(
                "The ABORT marker of producer %s at offset %s closes a transaction from offset %s, but %s "
                "has no aborted-transaction entry for it: read_committed consumers of this segment would "
                "see aborted data.",
                "producer_id",
                "base_offset",
                "txn_first_offset",
                index_name,
            ),
        ).otherwise(
            F.concat(
                fmt(
                    "The ABORT marker of producer %s at offset %s closes a transaction from offset %s, but "
                    "%s lists it from offset %s: read_committed consumers of this segment would filter "
                    "other offsets than the aborted ones",
                    "producer_id",
                    "base_offset",
                    F.coalesce(F.col("txn_first_offset").cast("string"), F.lit("(no retained batch)")),
                    index_name,
                    "entry_first_offset",
                ),
                F.when(
                    entry_first <= F.col("_previous_marker"),
                    fmt(
                        " (from the producer's previous marker, at offset %s, or before it: every marker "
                        "closes the producer's transaction, so its committed records there would be dropped)",
                        "_previous_marker",
                    ),
                ).otherwise(F.lit("")),
                F.lit("."),
            )
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset=F.coalesce(F.col("txn_first_offset"), entry_first),
        last_offset="base_offset",
        # The other side of the evidence: the first offset the entry lists, where read_committed
        # consumers start filtering (the marker where there is no entry, or no retained batch to differ).
        related_offset=F.coalesce(
            F.when(F.col("txn_first_offset").isNotNull(), entry_first), F.col("base_offset")
        ),
        rule=F.lit("TransactionIndex: one AbortedTxn per ABORT marker"),
    )
    b = to_findings(
        stray,
        "INDEX_MISMATCH",
        fmt(
            "%s lists an aborted transaction of producer %s from offset %s to %s, but no ABORT marker "
            "closes such "
            "a transaction there.",
            index_name,
            "producer_id",
            "entry_first_offset",
            "base_offset",
        ),
        producer_id="producer_id",
        first_offset="entry_first_offset",
        last_offset="base_offset",
        rule=F.lit("TransactionIndex: one AbortedTxn per ABORT marker"),
    )
    # The entry's last stable offset is the first offset of another producer's open transaction, else
    # the marker's + 1 (`ProducerStateManager.lastStableOffset`). A leader appends a marker alone, so
    # there it is at most the marker's next offset; a follower appends a fetched chunk and updates every
    # producer of it first (`UnifiedLog.append`), so another producer's transaction begun after the
    # marker in that chunk may set it. A fetch stops collecting aborted transactions at the first entry
    # whose last stable offset reaches its upper bound (`TransactionIndex.collectAbortedTxns`): an entry
    # past the marker's next offset is wrong where an aborted transaction closed after it begins below
    # that offset, which such a fetch misses. What a follower writes is bounded by the first transaction
    # another producer began after the marker; the marker's own producer's next transaction does not
    # bound it (`lastStableOffset` skips that producer), so where that one began first and was aborted,
    # a read_committed fetch from the follower (KIP-392) misses it: flagged, a hazard of Kafka's own.
    lso = F.col("entry_last_stable_offset")
    ahead = paired.where(
        entry_first.isNotNull()
        & agrees
        & (lso > F.col("base_offset") + 1)
        & F.coalesce(F.col("_later_first") < lso, F.lit(False))
    )
    c = to_findings(
        ahead,
        "INDEX_MISMATCH",
        fmt(
            "%s lists the aborted transaction of producer %s closed at offset %s with last stable offset %s, "
            "past the marker's next offset and past the aborted transaction from offset %s closed after "
            "it: a read_committed fetch ending below %s stops looking for aborted transactions at this "
            "entry and misses that one.",
            index_name,
            "producer_id",
            "base_offset",
            lso,
            "_later_first",
            lso,
        ),
        producer_id="producer_id",
        producer_epoch="producer_epoch",
        first_offset="entry_first_offset",
        last_offset="base_offset",
        # The other side: the aborted transaction a fetch misses.
        related_offset="_later_first",
        rule=F.lit("TransactionIndex: lastStableOffset <= the marker's offset + 1"),
    )
    return a.unionByName(b).unionByName(c)
