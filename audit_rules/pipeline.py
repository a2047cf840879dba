"""The audit as one function of the bronze tables: silver history, gold findings and partition summary.

`audit(bronze, profile)` builds DataFrames only (lazy); `jobs.audit` decides where they are written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from audit_rules import consistency, duplicates, epochs, ordering, retention, sequences, transactions
from audit_rules.findings import union_findings
from audit_rules.history import build_history, history_table
from audit_rules.logs import join_log, log_bounds, with_log_key
from audit_rules.profile import Profile
from schemas.tables import FILES, LOG_KEY, PARTITION_SUMMARY, TABLES


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

    @classmethod
    def from_batches(cls, batches: DataFrame, *, log_start_offset: int = 0) -> Bronze:
        """Only batches (tests): every log's first segment is taken to start at `log_start_offset`."""
        spark = batches.sparkSession

        def empty(name: str) -> DataFrame:
            return spark.createDataFrame([], TABLES[name].schema)

        logs = batches.select(*LOG_KEY).distinct()
        files = logs.select(
            *[
                (F.col(f.name) if f.name in LOG_KEY else _file_default(f.name, log_start_offset))
                .cast(f.dataType)
                .alias(f.name)
                for f in FILES.schema.fields
            ]
        )
        return cls(
            batches=batches,
            files=files,
            partition_state=empty("partition_state"),
            producer_snapshots=empty("producer_snapshots"),
            txn_index=empty("txn_index"),
            quarantine=empty("quarantine"),
            acks=empty("acks"),
        )


def _file_default(name: str, base_offset: int) -> F.Column:
    values = {
        "file": F.concat_ws("/", F.lit(""), F.col("topic"), F.lit(f"{base_offset:020d}.log")),
        "kind": F.lit("log"),
        "base_offset": F.lit(base_offset),
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
    persisted: tuple[DataFrame, ...] = ()

    @property
    def summary(self) -> DataFrame:
        return partition_summary(self.logs, self.findings, self.quarantine)

    def summary_of(self, findings: DataFrame) -> DataFrame:
        """The partition summary over already materialised findings (a job reads them back from Delta)."""
        return partition_summary(self.logs, findings, self.quarantine)

    def release(self) -> None:
        for df in self.persisted:
            df.unpersist()


def local_checkpoint(df: DataFrame) -> DataFrame:
    """Materialise on the executors (memory, spilling to disk) and cut the lineage.

    Every rule reads the history; without this each would re-run its window sorts, and the plan of
    the findings union would re-analyse them all.
    """
    return df.localCheckpoint(eager=True)


def audit(
    bronze: Bronze,
    profile: Profile,
    *,
    materialize: Callable[[DataFrame], DataFrame] | None = local_checkpoint,
) -> AuditOutput:
    """Every rule of RULES.md over the bronze tables; `materialize` stores the history and log bounds
    that every rule reads (None: recompute them in each rule)."""
    logs = log_bounds(bronze.batches, bronze.files, bronze.partition_state, profile)
    # The per-log facts every producer rule needs ride along with the history: no join per rule.
    history = join_log(
        build_history(bronze.batches),
        logs,
        "log_start_offset",
        "compacted",
        F.col("max_timestamp").alias("log_max_timestamp"),
    )
    persisted: tuple[DataFrame, ...] = ()
    if materialize is not None:
        logs = materialize(logs)
        history = materialize(history)
        persisted = (logs, history)
    frames = [
        sequences.invalid_sequence(history),
        sequences.history_start(history),
        sequences.sequence_regression(history),
        sequences.sequence_gaps(history, profile),
        epochs.epoch_regression(history),
        epochs.epoch_starts(history),
        duplicates.duplicate_batches(history, profile),
        transactions.hanging_transactions(history, profile),
        transactions.coordinator_epoch_regression(history),
        transactions.txn_index_consistency(history, bronze.txn_index, bronze.files),
        retention.snapshot_producers(history, bronze.producer_snapshots, logs),
        retention.producers_across_dumps(history, logs),
        retention.acked_records(bronze.batches, bronze.acks, logs),
        consistency.quarantined(bronze.quarantine, bronze.batches),
        consistency.offset_overlap(bronze.batches),
        consistency.snapshot_mismatch(history, bronze.producer_snapshots, logs),
        consistency.replica_divergence(bronze.batches, logs),
    ]
    if bronze.records is not None:
        frames.append(duplicates.duplicate_records_new_epoch(history, bronze.records, profile))
        if profile.app_sequence is not None:
            frames.append(ordering.app_sequence_rules(bronze.records, profile.app_sequence))
    findings = union_findings(frames)
    return AuditOutput(logs, history_table(history), findings, bronze.quarantine, persisted)


def partition_summary(logs: DataFrame, findings: DataFrame, quarantine: DataFrame) -> DataFrame:
    """One row per log: its bounds, sizes and finding counts by severity, and the worst severity as
    verdict."""
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
    s = logs.join(counts, "log_key", "left").join(regions, "log_key", "left")
    s = s.fillna(0, subset=["critical", "error", "warning", "info", "quarantined_regions"])
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
