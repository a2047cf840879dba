"""The audit as one function of the bronze tables: silver history, gold findings and partition summary.

`audit(bronze, profile)` builds DataFrames only (lazy); `jobs.audit` decides where they are written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit_rules import consistency, duplicates, epochs, ordering, retention, sequences, transactions
from audit_rules.findings import union_by_name, union_findings
from audit_rules.history import (
    copies,
    cores,
    corrupt_fills,
    coverage_holes,
    derived,
    events,
    explaining_fills,
    failed_producer_batches,
    filled_starts,
    history_table,
    hot_producers,
    late_ranges,
    left_whole,
    numbered,
    producer_summary,
    replayed,
    settle,
    split_plan,
    spread,
    undecided,
    with_log_columns,
)
from audit_rules.logs import (
    Store,
    as_is,
    check_ids,
    file_ids,
    file_producers,
    free_offsets,
    log_bounds,
    offset_holes,
    segment_files,
    sequenced,
    with_log_key,
)
from audit_rules.profile import Profile
from audit_rules.replay import COPY_LOOKBACK
from schemas.tables import FILES, LOG_KEY, PARTITION_SUMMARY, TABLES

T = TypeVar("T")


@dataclass(frozen=True)
class Bronze:
    """The ingest stage's tables (schemas.tables), as DataFrames."""

    batches: DataFrame
    files: DataFrame
    partition_state: DataFrame
    producer_snapshots: DataFrame
    txn_index: DataFrame
    quarantine: DataFrame
    acks: DataFrame
    records: DataFrame | None = None
    # Tiered storage's metadata events (ingests before it was read have no such table).
    remote_log_metadata: DataFrame | None = None

    @classmethod
    def from_batches(cls, batches: DataFrame, *, log_start_offset: int = 0, rolled: bool = False) -> Bronze:
        """Only batches (tests): every log's first segment is taken to start at `log_start_offset`, and
        holds all of its batches. With `rolled`, that segment was rolled: an empty active segment starts
        at the log's end offset (so the cleaner of a compacted topic may have passed every batch)."""
        spark = batches.sparkSession

        def empty(name: str) -> DataFrame:
            return spark.createDataFrame([], TABLES[name].schema)

        def segments(logs: DataFrame, base: F.Column) -> DataFrame:
            return logs.select(
                *[
                    (F.col(f.name) if f.name in LOG_KEY else _file_default(f.name, base))
                    .cast(f.dataType)
                    .alias(f.name)
                    for f in FILES.schema.fields
                ]
            )

        files = segments(batches.select(*LOG_KEY).distinct(), F.lit(log_start_offset))
        if rolled:
            ends = batches.groupBy(*LOG_KEY).agg((F.max("last_offset") + 1).alias("_end"))
            files = files.unionByName(segments(ends, F.greatest(F.col("_end"), F.lit(log_start_offset))))
        return cls(
            batches=batches,
            files=files,
            partition_state=empty("partition_state"),
            producer_snapshots=empty("producer_snapshots"),
            txn_index=empty("txn_index"),
            quarantine=empty("quarantine"),
            acks=empty("acks"),
        )


def _file_default(name: str, base_offset: F.Column) -> F.Column:
    values = {
        "file": F.concat_ws(
            "/",
            F.lit(""),
            F.col("topic"),
            F.concat(F.lpad(base_offset.cast("string"), 20, "0"), F.lit(".log")),
        ),
        "kind": F.lit("log"),
        "base_offset": base_offset,
        "size_bytes": F.lit(0),
        "mtime_ms": F.lit(0),
        "is_live": F.lit(True),
    }
    return values.get(name, F.lit(None))


@dataclass(frozen=True)
class AuditOutput:
    logs: DataFrame
    history: DataFrame
    findings: DataFrame
    quarantine: DataFrame
    producers: DataFrame  # history.producer_summary
    persisted: tuple[DataFrame, ...] = ()

    @property
    def summary(self) -> DataFrame:
        return partition_summary(self.logs, self.findings, self.quarantine, self.producers)

    def summary_of(self, findings: DataFrame) -> DataFrame:
        """The partition summary over already materialised findings (a job reads them back from Delta)."""
        return partition_summary(self.logs, findings, self.quarantine, self.producers)

    def release(self) -> None:
        for df in self.persisted:
            release(df)


def release(df: DataFrame) -> None:
    """Free the blocks of a stored frame (`local_checkpoint`, or a cached one).

    `DataFrame.unpersist` frees a cache but not the RDD blocks a local checkpoint stored (checked on
    Spark 4.1): those stay on the executors until the JVM collects the plan that holds them, a long
    while in a session that audits again. The checkpoint's RDD is the frame's plan (`LogicalRDD`).
    Under Spark Connect there is no handle on it; the server's cleaner frees the blocks.
    """
    df.unpersist()
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return
    plan = jdf.queryExecution().analyzed()
    if plan.nodeName() == "LogicalRDD":
        plan.rdd().unpersist(False)


# The stored frames with a row per batch (or per acknowledged offset and log). They go straight to
# the executors' disks, serialized: kept in memory first, Spark unrolls their rows as objects, finds
# they do not fit and spills them anyway, and the garbage collector pays for the attempt. On 1 GB of
# one-record batches (a warm local[2] session, 6g driver) storing the history took 12.7-13.8 s on
# disk against 15.7-19.6 s in memory and on disk, and reading it back cost the same (1.5-2.1 s).
ON_DISK = frozenset({"history", "free offsets", "ack checks"})


def local_checkpoint(df: DataFrame, name: str = "") -> DataFrame:
    """Materialise on the executors and cut the lineage (`name` says what it is: the frames of
    `ON_DISK` are stored on disk, the others in memory, spilling to disk).

    Several rules read the history; without this each would re-run its sort and scan, and the plan of
    the findings union would re-analyse them all.
    """
    if name in ON_DISK:
        from pyspark import StorageLevel

        return df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
    return df.localCheckpoint(eager=True)


# Up to this many late ranges (exact copies found) are broadcast to the tasks that pick their rows
# out of the history (a hash probe per row instead of a shuffle of the whole history); more go
# through a join.
BROADCAST_ROWS = 2_000_000


def audit(
    bronze: Bronze,
    profile: Profile,
    *,
    materialize: Store | None = local_checkpoint,
    on_silver: Callable[[DataFrame], None] | None = None,
    copy_lookback: int = COPY_LOOKBACK,
) -> AuditOutput:
    """Every rule of RULES.md over the bronze tables; `materialize` stores what several rules read (the
    log bounds, the history, its events and copies, the free offsets of compacted logs, the producers
    gone since an earlier dump, and what one rule reads in several of its findings: the ack checks,
    the pairs of logs compared; None: recompute them in each rule).

    `on_silver` is called with the silver history's frame as soon as it is final, before the findings
    are planned: a caller can start writing it while the driver builds the rules' plans.

    `copy_lookback`: how far back the history's scan looks for an exact copy's original
    (`replay.COPY_LOOKBACK`); the findings are the same whatever it is."""
    keep = materialize or as_is
    background = materialize is not None

    # The history needs the batches alone (its log and file ids are hashes of each row's own columns),
    # and so do its events and exact copies. What reads only the bronze tables is computed beside them,
    # on threads of their own: their jobs' tasks take the cores the history leaves idle (while the
    # driver plans, reads Delta logs and waits on small jobs; the tail of a stage; a hot producer's one
    # long task). The history's readers wait for the logs and files only where they join them.
    #   - Whether optional evidence exists (small jobs that wait on the driver more than on the cores),
    #     asked at once, concurrently.
    #   - One pass over the batches for their per-file and per-producer facts, and what follows from
    #     them: the logs and their bounds, the files, the producer summary; then the offset overlaps (a
    #     sort of the batches), before the silver write takes the cores.
    evidence = _nonempty(
        {
            # A dumped .txnindex, or an .index whose segment has none (then none was written).
            "txnindex": bronze.files.where(F.col("kind").isin("txnindex", "index")),
            "snapshots": bronze.producer_snapshots,
            "acks": bronze.acks,
            **(
                {"remote segments": bronze.remote_log_metadata}
                if bronze.remote_log_metadata is not None
                else {}
            ),
            # Acks to check against their records' keys and app sequences (record-level mode only).
            **(
                {
                    "keyed acks": bronze.acks.where(F.col("key").isNotNull()),
                    "app acks": bronze.acks.where(
                        F.col("app_producer").isNotNull() & F.col("app_sequence").isNotNull()
                    ),
                }
                if bronze.records is not None
                else {}
            ),
        },
        background=background,
    )

    # The kinds of quarantined region (a few rows of one small job): which corruption rules have work.
    quarantined_kinds = started(
        bronze.batches.sparkSession,
        lambda: {r["kind"] for r in bronze.quarantine.select("kind").distinct().collect()},
        background=background,
    )

    def log_facts(
        facts: DataFrame,
    ) -> tuple[tuple[DataFrame, ...], set[str], list[str], list[str]]:
        segments = keep(segment_files(facts), "segment files")
        logs = keep(
            log_bounds(segments, bronze.files, bronze.partition_state, profile, bronze.quarantine),
            "log bounds",
        )
        files = keep(file_ids(segments, logs), "file ids")
        # What follows from the logs and files alone, asked at once: small jobs that wait on the driver
        # (planning, Delta's file listings) more than on the cores.
        checked = started(spark, lambda: check_ids(logs, files), background=background)
        # Several logs of one partition (replicas, or dumps taken at different times) are evidence too,
        # and so is a partition whose dumps name two topic ids (the topic was deleted and created again).
        # (And in the same job: whether compaction may have touched a log whose sequences the broker
        # checked, where a gap's room counts only offsets no batch holds: `free_offsets`.)
        several = (
            logs.groupBy("topic", "partition")
            .agg(
                F.count(F.lit(1)).alias("logs"),
                F.max(F.col("incarnation") != "").alias("recreated"),
                F.max(F.col("cleaned_to").isNotNull() & sequenced()).alias("compacted"),
                F.max(F.col("compaction_source") == "holes").alias("holed"),
            )
            .agg(
                F.count(F.when(F.col("logs") > 1, F.lit(1))).alias("partitions"),
                F.max(F.when(F.col("logs") > 1, F.col("recreated"))).alias("recreated"),
                F.collect_set(F.when(F.col("compacted"), F.col("topic"))).alias("compacted"),
                F.collect_set(F.when(F.col("holed"), F.col("topic"))).alias("holed"),
            )
        )
        has_several = started(spark, lambda: several.first(), background=background)
        summary = started(
            spark, lambda: keep(producer_summary(facts, logs), "producer summary"), background=background
        )
        overlaps = keep(consistency.offset_overlap(bronze.batches, logs, files), "offset overlap")
        checked()
        counts = has_several()
        present = {"several logs"} if counts is not None and counts["partitions"] else set()
        if present and counts is not None and counts["recreated"]:
            present.add("recreated topics")
        compacted = sorted(counts["compacted"]) if counts is not None else []
        holed = sorted(counts["holed"]) if counts is not None else []
        return (facts, segments, logs, files, summary(), overlaps), present, compacted, holed

    spark = bronze.batches.sparkSession
    facts = keep(file_producers(bronze.batches), "file producers")
    beside = started(spark, lambda: log_facts(facts), background=background, pool="audit-beside")
    # A producer holding most of the history (`history.hot_producers`: one small job over the facts) has
    # its offset ranges scanned in tasks of their own where it can be cut (`history.split_plan`: one
    # aggregate over its batches), so that every pass over the stored history shares its rows out.
    hot = hot_producers(facts) if background else []
    split = split_plan(bronze.batches, hot)
    # The history is stored narrow: keyed by the numeric log and file ids, without the columns that
    # follow from each row alone (`derived`, which each reader adds) or from its log (the per-log facts
    # every producer rule needs, joined by `readable`: no join per rule).
    stored = keep(replayed(bronze.batches, copy_lookback, profile.markers_refresh_expiry, split), "history")
    # The events (the few rows the rules over single batches and markers can fire on) and the exact
    # copies are found by the ids alone, while the logs are still being bounded.
    event_base = keep(events(derived(stored)), "history events")
    # Exact copies: the batches whose range a late batch repeats (on a healthy log, none). The scan
    # found them when it decided every late batch (one small job over the stored events); otherwise,
    # and when nothing is stored, a pass over the history finds them by the late batches' ranges.
    decided = background and event_base.where(undecided()).isEmpty()
    ranges: DataFrame | None = None
    stored_copies: DataFrame | None = None
    copied: DataFrame | None = None
    if not decided:
        ranges = keep(late_ranges(event_base), "late ranges")
        late = ranges.count() if background else None  # a stored frame: one small job
        if late is None or late > 0:
            small = late is not None and late <= BROADCAST_ROWS
            copied = stored_copies = keep(
                copies(derived(stored), F.broadcast(ranges) if small else ranges), "copies"
            )
            if background and stored_copies.count() <= BROADCAST_ROWS:
                copied = F.broadcast(stored_copies)
    (facts, segments, logs, files, producers, overlaps), present, compacted_topics, holed_topics = beside()

    def readable(rows: DataFrame) -> DataFrame:
        """Rows of the stored history with their derived and log columns, as the rules read them."""
        return with_log_columns(derived(rows), logs, files)

    history = readable(stored)
    # The events with their log columns, stored once for the many rules that read them (each rule
    # would otherwise broadcast the logs and files again); the rows found by id alone are freed.
    event_rows = keep(with_log_columns(event_base, logs, files), "history events (logs)")
    if background:
        release(event_base)
    # The silver write reads every row: spread over the cores when a producer holding most of them was
    # scanned whole (not cut into ranges by `split`).
    silver_rows = readable(spread(stored)) if left_whole(hot, split) else history
    silver = history_table(settle(silver_rows, copied))
    if on_silver is not None:
        on_silver(silver)
    settled = numbered(event_rows) if decided else settle(event_rows, copied)
    present |= evidence()
    kinds = quarantined_kinds()
    # The batches whose CRC failed (a CRC_MISMATCH region each: few), and the quarantined regions with
    # their offsets, are stored once for the rules that read them: each is a pass over the batches.
    # The failed batches may hold what a gap or an epoch's start skipped (RULES.md, failed fill).
    failed = (
        keep(failed_producer_batches(bronze.batches), "failed batches") if "CRC_MISMATCH" in kinds else None
    )
    located = (
        keep(consistency.located_regions(bronze.quarantine, bronze.batches), "regions") if kinds else None
    )
    fills = corrupt_fills(failed, settled) if failed is not None else None
    holes = coverage_holes(settled, fills)
    starts = filled_starts(fills) if fills is not None else None
    # Segment bytes no batch header could be read from, which a gap's records may be in.
    unreadable = (
        consistency.unreadable_regions(located)
        if located is not None and kinds & set(consistency.UNREADABLE_KINDS)
        else None
    )
    stored_frames = (
        facts,
        segments,
        logs,
        files,
        stored,
        event_rows,
        ranges,
        producers,
        overlaps,
        stored_copies,
        failed,
        located,
    )
    persisted = tuple(df for df in stored_frames if df is not None) if background else ()
    # What is stored below for the rules' readers (freed with the rest): each is read by several of them.
    kept_by_rules: list[DataFrame] = []

    def keep_late(df: DataFrame, name: str) -> DataFrame:
        kept = keep(df, name)
        if background:
            kept_by_rules.append(kept)
        return kept

    # The sequence rules only where the broker checked sequences (not a coordinator's internal topic).
    checked_rows, checked = event_rows.where(sequenced()), settled.where(sequenced())
    # Copies (on a healthy log, none: a small job over the stored events) are judged against the
    # batches between them and the copy before, a pass over the history only where there are any:
    # asked now, answered once the other rules are planned.
    any_copies = started(
        spark,
        lambda: not checked.where(F.col("transition") == "DUPLICATE").isEmpty(),
        background=background,
    )
    # Where compaction may have touched a log whose sequences the broker checked, the rules excuse
    # sequences the cleaner may have removed only where offsets no batch holds could have held them.
    # (Only those topics' batches read: the bronze tables are partitioned by topic. Stored once: four
    # rules read it, and each would sort those batches again.)
    free = (
        keep_late(
            free_offsets(bronze.batches.where(F.col("topic").isin(*compacted_topics)), logs), "free offsets"
        )
        if compacted_topics
        else None
    )
    # (One frame for the two rules that read the stale markers: built once, read by both.)
    stale = transactions.stale_markers(event_rows)
    frames = [
        sequences.invalid_sequence(checked_rows),
        sequences.history_start(checked_rows, profile, starts, unreadable, fills, free),
        sequences.sequence_regression(checked, profile),
        sequences.sequence_gaps(checked, holes, profile, unreadable, free),
        epochs.epoch_regression(event_rows),
        epochs.epoch_starts(event_rows, starts, unreadable, profile, free),
        transactions.hanging_transactions(event_rows, producers, profile, failed),
        transactions.swept_transactions(event_rows, producers, profile, failed, unreadable),
        transactions.coordinator_epoch_regression(event_rows),
        transactions.empty_transaction_markers(event_rows, logs, failed, unreadable, stale),
        transactions.stale_transaction_markers(stale),
        overlaps,
    ]
    if holed_topics:
        # Logs taken for compacted on their free offsets alone: the assumption is a finding.
        frames.append(offset_holes(bronze.batches.where(F.col("topic").isin(*holed_topics)), segments, logs))
    if "txnindex" in present:
        frames.append(transactions.txn_index_consistency(event_rows, bronze.txn_index, bronze.files, logs))
    # The producers of each log's previous dump it holds no batch of: judged by the snapshot rule or by
    # the earlier-dump rule, whichever saw the producer later (one verdict each).
    # Producers a log holds only in CRC-failed batches are there, unreadable: not absent.
    corrupt = retention.corrupt_holders(failed) if failed is not None else None
    # (Stored once: the earlier-dump, snapshot and ack rules read it, some more than once.)
    gone = (
        keep_late(retention.gone_since_previous_dump(producers, logs, corrupt), "gone producers")
        if "several logs" in present
        else None
    )
    # The state the broker would load: each log's newest snapshot (read by four rules, planned once).
    entries = (
        retention.latest_snapshot_entries(bronze.producer_snapshots, bronze.files, bronze.quarantine)
        if "snapshots" in present
        else None
    )
    if entries is not None:
        frames += [
            transactions.hanging_transactions_in_snapshots(producers, entries, logs, profile),
            consistency.snapshot_mismatch(
                history,
                producers,
                bronze.producer_snapshots,
                logs,
                profile,
                failed,
            ),
        ]
    if gone is not None:
        # Several logs of one partition: replicas, or dumps taken at different times.
        frames.append(consistency.replica_divergence(bronze.batches, logs, unreadable, keep=keep_late))
    # Whole-producer verdicts from what the broker's state or an earlier dump knew of a producer the log
    # holds no batch of; the ack ledger's rule may know it later (below).
    known_earlier = []
    if entries is not None:
        known_earlier.append(retention.snapshot_producers(producers, entries, logs, profile, gone, corrupt))
    if gone is not None:
        known_earlier.append(retention.producers_across_dumps(gone, profile, entries))
    # Tiered storage (KIP-405): the remote segments the dump's `__remote_log_metadata` lists.
    remote = None
    if bronze.remote_log_metadata is not None and "remote segments" in present:
        remote = retention.remote_segments(bronze.remote_log_metadata, bronze.quarantine)
        frames.append(retention.remote_tier_holes(remote, logs))
    if "acks" in present:
        keys = "keyed acks" in present
        app = profile.app_sequence if "app acks" in present else None
        # A producer the snapshot or earlier-dump rule knows as late as the ledger does, or later, gets its
        # verdict there (one per producer).
        listed = entries.select("log_key", "producer_id", "last_offset") if entries is not None else None
        earlier = (
            gone.select("log_key", "producer_id", F.col("retained_last_offset").alias("last_offset"))
            if gone is not None
            else None
        )
        elsewhere = [df for df in (earlier, listed) if df is not None]
        acked = retention.acked_records(
            bronze.batches,
            bronze.acks,
            logs,
            bronze.records,
            keys=keys,
            app=app,
            incarnations="recreated topics" in present,
            remote=remote,
            producers=producers,
            profile=profile,
            judged_elsewhere=union_by_name(elsewhere) if elsewhere else None,
            unreadable=unreadable,
            keep=keep_late,
        )
        frames.append(acked)
    frames += known_earlier
    if located is not None:
        explaining = explaining_fills(fills, starts) if fills is not None and starts is not None else None
        frames.append(consistency.quarantined(located, explaining))
    # Zeros ending a segment older than the active one (the decoder takes zeros for preallocation).
    frames.append(consistency.zeroed_tails(bronze.files, segments, bronze.quarantine))
    if bronze.records is not None:
        frames.append(
            duplicates.duplicate_records_new_epoch(history, bronze.records, profile, bronze.batches)
        )
        if profile.app_sequence is not None:
            rotted = (
                bronze.quarantine.where(F.col("kind") == "CRC_MISMATCH").select(
                    "dump_id", "replica", "file", F.col("position").alias("batch_position")
                )
                if "CRC_MISMATCH" in kinds
                else None
            )
            frames.append(
                ordering.app_sequence_rules(
                    bronze.records, profile.app_sequence, rotted, logs, batches=bronze.batches
                )
            )
    frames.append(duplicates.duplicate_batches(checked, profile, history if any_copies() else None))
    findings = union_findings(frames, cores(spark))
    if "acks" in present and known_earlier:
        # One verdict per producer and log: where the ledger's rule judges a producer, it knew it later.
        findings = retention.one_verdict_per_producer(findings)
    return AuditOutput(logs, silver, findings, bronze.quarantine, producers, (*persisted, *kept_by_rules))


def started(
    spark: SparkSession, fn: Callable[[], T], *, background: bool = True, pool: str | None = None
) -> Callable[[], T]:
    """Start `fn` on a thread that inherits the caller's Spark job group and local properties (or, not
    `background`, call it now); the returned call waits for its result.

    `pool`: the thread's jobs go to this scheduler pool. Under `spark.scheduler.mode=FAIR` pools share
    the cores, so a thread's short jobs do not wait behind every task of another's long ones (FIFO,
    Spark's default, ignores pools).
    """
    if not background:
        result = fn()
        return lambda: result
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.util import inheritable_thread_target

    def in_pool() -> T:
        if pool is not None:
            # Spark Connect has no SparkContext: no pool to name.
            with contextlib.suppress(NotImplementedError):
                spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
        return fn()

    executor = ThreadPoolExecutor(max_workers=1)
    future = executor.submit(inheritable_thread_target(spark)(in_pool))
    executor.shutdown(wait=False)
    return future.result


def _nonempty(frames: dict[str, DataFrame], *, background: bool = True) -> Callable[[], set[str]]:
    """The names of `frames` that hold a row, asked concurrently (`started`); the returned call waits
    for the answers."""
    answers = {
        name: started(df.sparkSession, lambda df=df: not df.isEmpty(), background=background)  # type: ignore[misc]
        for name, df in frames.items()
    }
    return lambda: {name for name, has_rows in answers.items() if has_rows()}


def partition_summary(
    logs: DataFrame, findings: DataFrame, quarantine: DataFrame, producers: DataFrame
) -> DataFrame:
    """One row per log: its bounds, sizes, producer ids (of the history) and finding counts by severity,
    and the worst severity as verdict."""
    counts = (
        with_log_key(findings.where(F.col("topic").isNotNull()))
        .groupBy("log_key")
        .pivot("severity", ["critical", "error", "warning", "info"])
        .count()
    )
    regions = (
        with_log_key(quarantine.where(F.col("topic").isNotNull()))
        .groupBy("log_key")
        .agg(F.count(F.lit(1)).alias("quarantined_regions"))
    )
    ids = producers.groupBy("log_key").agg(F.count(F.lit(1)).alias("producers"))
    s = logs.join(counts, "log_key", "left").join(regions, "log_key", "left").join(ids, "log_key", "left")
    s = s.fillna(0, subset=["critical", "error", "warning", "info", "quarantined_regions", "producers"])
    verdict = (
        F.when(F.col("critical") > 0, "critical")
        .when(F.col("error") > 0, "error")
        .when(F.col("warning") > 0, "warning")
        .when(F.col("info") > 0, "info")
        .otherwise("clean")
    )
    s = s.withColumn("verdict", verdict)
    return s.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in PARTITION_SUMMARY.schema.fields])


__all__ = ["AuditOutput", "Bronze", "audit"]
