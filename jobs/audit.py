"""The audit stage: bronze Delta tables -> sequence history, findings, partition summary, runs and reports.

Silver and gold tables are rebuilt whole from the bronze tables under `--output` on every run, so a
re-run on the same input writes the same rows. `runs` keeps one row per distinct run id, a hash of
the audited files' fingerprints and the profile, so re-running replaces its row instead of adding one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from audit_rules.findings import union_by_name
from audit_rules.kinds import Severity
from audit_rules.pipeline import AuditOutput, Bronze, audit, local_checkpoint, release, started
from audit_rules.profile import AppSequenceSpec, Profile
from jobs.ingest import (
    WRITE_SESSION_CONF,
    UsageError,
    hadoop_path,
    is_delta,
    is_uri,
    session_conf,
    table_location,
    write_table,
)
from jobs.spark_session import PLAN_CONF, concurrently
from schemas.tables import (
    AUDIT_TABLES,
    FINDINGS,
    PARTITION_SUMMARY,
    REPORT,
    REPORT_PARTIAL,
    REPORT_PREVIOUS,
    RUNS,
    SEQUENCE_HISTORY,
    TABLES,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")

BRONZE_REQUIRED = (
    "files",
    "batches",
    "partition_state",
    "producer_snapshots",
    "txn_index",
    "quarantine",
    "acks",
)
# Read when present: an output written by an earlier version may lack them (`remote_log_metadata` is
# new with tiered storage's metadata; without it, the audit judges a tiered log by its traces alone).
BRONZE_OPTIONAL = ("records", "remote_log_metadata")


@dataclass(frozen=True)
class AuditResult:
    run_id: str
    valid: bool
    exit_status: int
    counts: dict[str, int]
    tables: dict[str, str]
    report_dir: str
    # The Great Expectations suites that failed or could not run (`report/gx/summary.json`): they guard
    # the tables the verdict is built on, and do not change the exit status.
    gx_failed: tuple[str, ...] = ()


def check_bronze(output: str, exists: Callable[[str], bool] | None = None) -> dict[str, str]:
    """The bronze tables under `output` (name -> path), the optional ones where present; a usage error
    naming the first required table that is missing. `exists` tells a Delta table (default: a local
    `_delta_log` directory, so a local output is checked before Spark starts)."""
    held = exists or (lambda path: os.path.isdir(os.path.join(path, "_delta_log")))
    paths: dict[str, str] = {}
    for name in (*BRONZE_REQUIRED, *BRONZE_OPTIONAL):
        path = table_location(output, name)
        if not held(path):
            if name in BRONZE_OPTIONAL:
                continue
            raise UsageError(f"{output}: no Delta table {name!r}: run `replay-audit ingest` first")
        paths[name] = path
    return paths


# How many times the audit reads the bronze tables again when an ingest commits to the inventory
# while it reads them (`read_bronze`), before it gives up with a usage error.
PIN_ATTEMPTS = 3


def read_bronze(spark: SparkSession, output: str) -> Bronze:
    """The ingest stage's tables under `output`, each pinned at its current version
    (`read_table_version`); a usage error if it holds none.

    The tables are pinned one by one, so an ingest committing meanwhile could leave the inventory
    (`files`) of one ingest beside the batches of another. An ingest commits to `files` first (it takes
    its pairs out) and last (it lists them again), so while the inventory's version holds from before
    the first pin to after the last, no ingest started or ended in between, and any ingest still
    running shows as a dump the inventory does not list (`_check_complete`). When it moved, the
    tables are read again."""
    paths = check_bronze(output, functools.partial(is_delta, spark))

    def read(frames: dict[str, DataFrame], name: str) -> None:
        frames[name] = read_table_version(spark, paths[name])

    for _ in range(PIN_ATTEMPTS):
        before = table_version(spark, paths["files"])
        frames: dict[str, DataFrame] = {}

        # The tables at once, each on a driver thread: reading a table's log and listing its files are
        # a few small Spark jobs that wait on the driver more than on the cores. A cold JVM's first
        # audit of 8 MB (bench, 2026-11-29) still spends 17-19 s here, against 18-27 s one table after
        # another: the JVM's warm-up, which the plain reads paid later, inside the history's and the
        # run id's phases.
        concurrently(spark, [functools.partial(read, frames, name) for name in paths])
        if before is None or table_version(spark, paths["files"]) == before:
            return Bronze(**{name: frames[name] for name in paths})
    raise UsageError(
        f"{output}: an ingest committed to the inventory (`files`) each of the {PIN_ATTEMPTS} times the "
        "audit read the tables: audit once the ingest has ended"
    )


def _check_complete(bronze: Bronze, output: str) -> None:
    """A usage error where a table holds a dump the inventory does not list: an ingest of it stopped
    before its end (or is running). `files` is written last, and an ingest first takes its pairs out of
    it, so the other tables may hold half of that ingest's rows (batches without their quarantine rows,
    whose corruption findings would be missing).

    The inventory's (dump, replica) pairs are collected first (`files`: a row per file), and each table
    is asked only for rows of other pairs. Every bronze table is partitioned by those two columns
    (`REPLACE_KEY`), so that condition prunes its files in Delta's log: the check reads no data file of
    a dump the inventory lists, where a distinct over every table read every batch and record. On the
    audit bench's bronze, the check alone in a warm session: 0.8-1.1 s against 1.1-1.6 s at 1 GB,
    1.1-1.4 s against 2.7-3.4 s at 4 GB (what is left is Delta's pruning and the small jobs, whatever
    the size; in records mode the records table, many times the batches, is not read either)."""
    from pyspark.sql import functions as F

    replica = F.coalesce("replica", F.lit(""))
    listed = [
        (r["dump_id"], r["replica"])
        for r in bronze.files.select("dump_id", replica.alias("replica")).distinct().collect()
    ]
    pair = F.struct(F.col("dump_id"), replica.alias("replica"))
    unlisted = (
        ~pair.isin([F.struct(F.lit(d).alias("dump_id"), F.lit(r).alias("replica")) for d, r in listed])
        if listed
        else F.lit(True)
    )
    tables = [(f.name, getattr(bronze, f.name)) for f in dataclasses.fields(bronze) if f.name != "files"]
    held = union_by_name(
        [
            df.where(unlisted)
            .select(F.lit(name).alias("table"), "dump_id", replica.alias("replica"))
            .distinct()
            for name, df in tables
            if df is not None
        ]
    )
    missing = (
        held.groupBy("dump_id", "replica")
        .agg(F.array_sort(F.collect_set("table")).alias("tables"))
        .orderBy("dump_id", "replica")
        .collect()
    )
    if missing:
        named = "; ".join(
            f"dump {r['dump_id']!r}"
            + (f" replica {r['replica']}" if r["replica"] else "")
            + f" ({', '.join(r['tables'])})"
            for r in missing
        )
        raise UsageError(
            f"{output}: rows of an ingest that did not finish (not in its inventory, `files`): {named}; "
            "re-run `replay-audit ingest` on that input, or ingest into a new output"
        )


def _without_records(bronze: Bronze) -> list[str]:
    """The dumps holding data batches with records but no record row: ingested without --records (a
    records-mode ingest writes every batch's records; one in headers mode writes none). A dump ingested
    with --records beside one ingested without is one of them. Two small aggregates by dump."""
    from pyspark.sql import functions as F

    with_data = bronze.batches.where(~F.col("is_control") & (F.col("count") > 0)).select("dump_id").distinct()
    if bronze.records is not None:
        with_data = with_data.join(bronze.records.select("dump_id").distinct(), "dump_id", "left_anti")
    return sorted(r["dump_id"] for r in with_data.collect())


def _reads_no_app_sequence(bronze: Bronze, spec: AppSequenceSpec) -> bool:
    """Whether records of applications exist and the extractor reads an app producer and sequence in
    none of them (a header name or JSON field misspelled): the app-sequence rules would check nothing,
    and the audit say valid. Any producer's records: those of producers without idempotence are
    checked whole, an idempotent one's for holes (`ordering.client_timeout_holes`). Two small jobs that
    stop at the first such record; the whole records table is read only when the extractor reads
    none."""
    from pyspark.sql import functions as F

    from audit_rules.logs import COORDINATOR_TOPICS
    from audit_rules.ordering import app_sequences
    from audit_rules.profile import CLUSTER_METADATA_TOPIC

    if bronze.records is None:
        return False
    # (Not the coordinators' and the controller's records: producer id -1 too, but no application's.)
    internal = (*COORDINATOR_TOPICS, CLUSTER_METADATA_TOPIC)
    applications = bronze.records.where(~F.col("topic").isin(*internal))
    return (
        bool(applications.limit(1).count())
        and not app_sequences(applications, spec, all_producers=True).limit(1).count()
    )


def read_table_version(spark: SparkSession, path: str) -> DataFrame:
    """The Delta table at `path` over the files of its current version: every query the audit plans
    from the frame reads that version (an ingest committing meanwhile is not half seen), and Delta
    lists the files once.

    A frame of `spark.read.format("delta").load(path)` is resolved again by each query planned from it:
    Delta's `PrepareDeltaScan` takes the table's latest snapshot and selects its files with a Spark job,
    48 of the 199 stages of a warm audit of the bundled sample. Delta's own commands read a fixed set
    of files through `DeltaLog.createDataFrame` (a `TahoeBatchFileIndex`, deletion vectors and column
    mapping applied as for any Delta scan). Where that JVM API is not reachable (Spark Connect,
    Databricks' own Delta classes) the frame is the plain read."""
    from py4j.protocol import Py4JError
    from pyspark.sql import DataFrame

    delta_log = _delta_log(spark)
    if delta_log is not None:
        try:
            jvm: Any = getattr(spark, "_jvm", None)
            none = jvm.scala.Option.empty()
            log = delta_log.forTable(spark._jsparkSession, path)
            snapshot = log.update(False, none, none)
            return DataFrame(log.createDataFrame(snapshot, _live_files(jvm, snapshot), False, none), spark)
        except Py4JError:
            pass  # a JVM that refuses the call (a cluster's allowlist): the plain read below
    return spark.read.format("delta").load(path)


def table_version(spark: SparkSession, path: str) -> int | None:
    """The latest version of the Delta table at `path` (a listing of its log, no Spark job); None where
    Delta's JVM API is out of reach (`read_table_version` then reads the latest version anyway)."""
    from py4j.protocol import Py4JError

    delta_log = _delta_log(spark)
    if delta_log is None:
        return None
    try:
        none = spark._jvm.scala.Option.empty()  # type: ignore[union-attr]
        return int(delta_log.forTable(spark._jsparkSession, path).update(False, none, none).version())
    except Py4JError:
        return None


def _delta_log(spark: SparkSession) -> Any:
    """Delta's `DeltaLog` class on the session's JVM, or None (Spark Connect, no `_jvm`)."""
    from py4j.java_gateway import JavaClass

    jvm: Any = getattr(spark, "_jvm", None)
    delta_log = getattr(jvm, "org.apache.spark.sql.delta.DeltaLog", None) if jvm is not None else None
    return delta_log if isinstance(delta_log, JavaClass) else None


def _live_files(jvm: Any, snapshot: Any) -> Any:
    """The snapshot's files (a Scala list of `AddFile`): from its version's checksum file when that lists
    them, else by Delta's state reconstruction.

    Delta writes every live file into the version's `.crc` when the table has few of them
    (`spark.databricks.delta.allFilesInCrc.*`, 50 by default: a bronze table up to ~6 GB of segments)
    and computes each commit's list from the previous one's. Reading it costs no Spark job; the state
    reconstruction caches the log's actions with one, 0.4-1.9 s per table in a warm session."""
    checksum = snapshot.checksumOpt()
    listed = checksum.get().allFiles() if checksum.isDefined() else None
    if listed is not None and listed.isDefined():
        return listed.get().toList()
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(snapshot.allFiles().collectAsList()).toList()


def run_id_of(bronze: Bronze, profile: Profile) -> str:
    """Same audited files and profile, same id (contract §3: same input, same ids)."""
    from pyspark.sql import functions as F

    # A capture time given at ingest (`captured_at_ms`) orders the dumps: part of the input. Null (not
    # given, or a table from before the column) adds nothing: those ids are as they were.
    captured = [F.col("captured_at_ms").cast("string")] if "captured_at_ms" in bronze.files.columns else []
    row = bronze.files.agg(
        F.sha2(
            F.concat_ws(
                "\n",
                F.array_sort(
                    F.collect_list(
                        F.concat_ws(
                            "|", "dump_id", F.coalesce("replica", F.lit("")), "file", "fingerprint", *captured
                        )
                    )
                ),
            ),
            256,
        ).alias("h")
    ).first()
    files_hash = row["h"] if row is not None else ""
    # The same files ingested with --records are another input (records feed rules of their own): the
    # logs that have records are part of it. None (a headers-only ingest) adds nothing, as before.
    recorded = (
        sorted(
            f"{r[0]}|{r[1]}"
            for r in bronze.records.select("dump_id", F.coalesce("replica", F.lit(""))).distinct().collect()
        )
        if bronze.records is not None
        else []
    )
    identity: list[Any] = [files_hash, asdict(profile)] + ([recorded] if recorded else [])
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def exit_status(counts_by_severity: dict[str, int], fail_on: Severity) -> int:
    """Contract §2: 1 when a finding reaches the --fail-on severity, else 0."""
    worst = [Severity.parse(s) for s, n in counts_by_severity.items() if n > 0]
    return 1 if worst and max(worst) >= fail_on else 0


def run_audit(
    spark: SparkSession,
    output: str,
    profile: Profile,
    *,
    fail_on: Severity = Severity.ERROR,
    command: str = "audit",
    gx: bool = True,
) -> AuditResult:
    """Audit everything ingested under `output`; write tables and `report/`; return the exit status."""
    started_at = int(time.time() * 1000)
    if is_uri(output):
        _hadoop_jvm(spark, output)  # reports need it: asked before any work
    drop_previous = _set_aside_report(spark, output)
    bronze = read_bronze(spark, output)
    _check_complete(bronze, output)
    headers_only = _without_records(bronze) if profile.app_sequence is not None else []
    if headers_only:
        # Contract §1: the extractor implies --records; `run` turns it on, a separate ingest may not have.
        raise UsageError(
            f"{output}: the app-sequence extractor reads records, and dump(s) {', '.join(headers_only)} "
            "were ingested without --records: ingest them with --records, or use `replay-audit run`"
        )
    if profile.app_sequence is not None and _reads_no_app_sequence(bronze, profile.app_sequence):
        spec = profile.app_sequence
        raise UsageError(
            f"{output}: the app-sequence extractor ({spec.producer}, {spec.sequence}) reads an app producer "
            "and a whole-number sequence in no record: check the header "
            "names or JSON fields (or, for dump-log text, dump it with --print-data-log), or audit without "
            "the extractor"
        )
    # The driver's waits (small jobs, Delta log reads and commits, code generation) overlap: the run id
    # beside the audit's first stages, the silver table's write beside the planning of the findings,
    # their write and the reports.
    run_id_of_bronze = started(spark, lambda: run_id_of(bronze, profile))
    tables: dict[str, str] = {}
    silver: list[Callable[[], str]] = []

    def write_silver(history: DataFrame) -> None:
        run_id = run_id_of_bronze()
        silver.append(
            started(
                spark,
                lambda: _overwrite(
                    history, SEQUENCE_HISTORY.name, output, run_id, SEQUENCE_HISTORY.partition_by
                ),
                pool="audit-silver",
            )
        )

    # Ingest's writer settings: no sort by the table partition, no statistics of paths or
    # dictionaries of per-row values (the history has millions of rows, like the batches). Session
    # confs, which only writers read: the findings' write sees them too, which changes nothing for its
    # few rows. And the planner's (`PLAN_CONF`), which a local session has from its start.
    out: AuditOutput | None = None
    with session_conf(spark, {**WRITE_SESSION_CONF, **PLAN_CONF}):
        try:
            out = audit(bronze, profile, on_silver=write_silver)
            run_id = run_id_of_bronze()
            result = _findings_and_reports(spark, out, bronze, output, run_id, profile, fail_on, gx, tables)
            for written in silver:
                tables[SEQUENCE_HISTORY.name] = written()
        finally:
            # The stored history and the frames beside it are freed, after a failure too (a session that
            # goes on would keep them), once the silver write that reads them has ended.
            for written in silver:
                with contextlib.suppress(Exception):
                    written()
            if out is not None:
                out.release()
    status, valid, counts, report_dir, gx_failed = result
    finished = int(time.time() * 1000)
    run_row = {
        "run_id": run_id,
        "started_at_ms": started_at,
        "finished_at_ms": finished,
        "command": command,
        "profile": profile.name,
        "valid": valid,
        "fail_on": fail_on.label,
        "exit_status": status,
        "findings": sum(counts.values()),
        "counts": counts,
    }
    tables[RUNS.name] = _upsert_run(spark, run_row, output)
    drop_previous()
    order = (SEQUENCE_HISTORY.name, FINDINGS.name, PARTITION_SUMMARY.name, RUNS.name)
    return AuditResult(
        run_id, valid, status, counts, {name: tables[name] for name in order}, report_dir, gx_failed
    )


def _findings_and_reports(
    spark: SparkSession,
    out: AuditOutput,
    bronze: Bronze,
    output: str,
    run_id: str,
    profile: Profile,
    fail_on: Severity,
    gx: bool,
    tables: dict[str, str],
) -> tuple[int, bool, dict[str, int], str, tuple[str, ...]]:
    """Write the findings and partition summary (into `tables`), `report/` and the GX validations; the
    exit status, validity, counts per kind, the report directory and the GX suites that failed."""
    # The findings are computed once and stored on the executors, then written from there; the counts,
    # the partition summary, both reports and the validations read the stored rows (the summary too is
    # stored, written and read). Read back from Delta instead, each of those queries planned a scan of
    # a table just written (its log read, its files listed by a Spark job).
    from jobs import gx_checks, report

    findings = _store(out.findings, FINDINGS.name)
    stored = [findings]
    running: list[Callable[[], object]] = []
    # The folder the reports are written in (`report.partial`, or a local one bound for a URI): gone
    # after a failure too (once published, a local one is `report/`).
    scratch: list[str] = []

    def beside(fn: Callable[[], T]) -> Callable[[], T]:
        running.append(wait := started(spark, fn))
        return wait

    try:
        tables[FINDINGS.name] = _overwrite(findings, FINDINGS.name, output, run_id, ())

        def write_summary() -> DataFrame:
            summary = _store(out.summary_of(findings), PARTITION_SUMMARY.name)
            stored.append(summary)
            tables[PARTITION_SUMMARY.name] = _overwrite(summary, PARTITION_SUMMARY.name, output, run_id, ())
            return summary

        # The summary's write (a few small jobs and a commit) beside the counts and findings.json.
        written_summary = beside(write_summary)

        # (severity, kind) -> findings: a few dozen rows at most, one aggregation for the exit status and
        # both reports.
        per_kind = report.finding_counts(findings)
        counts = report.counts_by_kind(per_kind)
        by_severity: dict[str, int] = {}
        for (severity, _), n in per_kind.items():
            by_severity[severity] = by_severity.get(severity, 0) + n
        status = exit_status(by_severity, fail_on)
        valid = status == 0
        report_dir, publish = _report_dir(spark, output)
        scratch.append(report_dir)
        # findings.json (a sort of the findings, streamed) beside the summary's write and index.html.
        json_written = beside(
            lambda: report.write_findings_json(
                findings,
                run_id=run_id,
                valid=valid,
                path=os.path.join(report_dir, "findings.json"),
                per_kind=per_kind,
                fail_on=fail_on.label,
            ),
        )
        summary = written_summary()
        # The validations before index.html, which shows their outcome beside the verdict.
        gx_dir = os.path.join(report_dir, gx_checks.GX_DIR)
        validations = None
        # The folder is new (`_report_dir`): no earlier run's validations stand beside this verdict.
        if gx:
            gx_tables = {"batches": bronze.batches, "findings": findings, "partition_summary": summary}
            validations = gx_checks.run_gx_validations(gx_tables, gx_dir)
        report.write_html_report(
            findings,
            summary,
            run_id=run_id,
            valid=valid,
            profile_name=profile.name,
            path=os.path.join(report_dir, "index.html"),
            per_kind=per_kind,
            fail_on=fail_on.label,
            gx=validations,
        )
        json_written()
        failed = () if validations is None else validations.failed_suites
        return status, valid, counts, publish(), failed
    finally:
        # After a failure, what still runs ends before the rows it reads are freed (the first error is
        # the one raised).
        for wait in running:
            with contextlib.suppress(Exception):
                wait()
        for df in stored:
            release(df)
        for folder in scratch:
            shutil.rmtree(folder, ignore_errors=True)


def _store(df: DataFrame, name: str) -> DataFrame:
    """`df` computed once and stored on the executors (`pipeline.local_checkpoint`), for the write of
    table `name` and every report that reads it."""
    return local_checkpoint(df, name)


def _set_aside_report(spark: SparkSession, output: str) -> Callable[[], None]:
    """The previous audit's `<output>/report` moved to `report.previous` before this audit starts (an
    older `report.previous` gives way), and the call that removes it once this audit has written its
    own. An audit that fails, or a `run` whose ingest changed the tables and whose audit then failed,
    leaves no verdict of other tables under `report/`: the last one written stays in `report.previous`
    until an audit ends."""
    if not is_uri(output):
        report = table_location(output, REPORT)
        previous = table_location(output, REPORT_PREVIOUS)
        if os.path.isdir(report):
            shutil.rmtree(previous, ignore_errors=True)
            os.rename(report, previous)
        return lambda: shutil.rmtree(previous, ignore_errors=True)
    from py4j.protocol import Py4JError

    target = table_location(output, REPORT)
    try:
        dest, fs = hadoop_path(spark, target)
        jvm_path = _hadoop_jvm(spark, output).org.apache.hadoop.fs.Path
        previous = jvm_path(table_location(output, REPORT_PREVIOUS))
        if fs.exists(dest):
            fs.delete(previous, True)
            if not fs.rename(dest, previous):
                raise OSError(f"{target}: the previous reports could not be moved to {target}.previous")
    except Py4JError as exc:
        raise OSError(f"{target}: cannot move the previous reports: {str(exc).splitlines()[0]}") from None

    def drop() -> None:
        fs.delete(previous, True)

    return drop


def _report_dir(spark: SparkSession, output: str) -> tuple[str, Callable[[], str]]:
    """Where the reports are written, and the call that publishes them: for a local output,
    `<output>/report.partial`, renamed `<output>/report` once every report is written (a failure
    leaves no half-written `report/`); for a URI (`s3://`, `abfss://`, `dbfs:/`, `file:/`), a local
    folder whose files then replace `<output>/report` through the session's Hadoop file system.
    Returns the folder and the call, which returns where the reports are."""
    if not is_uri(output):
        final = table_location(output, REPORT)
        partial = table_location(output, REPORT_PARTIAL)
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)

        def publish_local() -> str:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(partial, final)
            return final

        return partial, publish_local
    jvm = _hadoop_jvm(spark, output)
    local = tempfile.mkdtemp(prefix="replay-audit-report-")
    target = table_location(output, REPORT)

    def publish() -> str:
        from py4j.protocol import Py4JError

        fs_path = jvm.org.apache.hadoop.fs.Path
        partial_target = table_location(output, REPORT_PARTIAL)
        partial = fs_path(partial_target)
        try:
            dest, fs = hadoop_path(spark, target)
            # Copied beside the old reports first, which then give way whole (rebuilt on every audit).
            fs.delete(partial, True)
            fs.mkdirs(partial)
            for name in sorted(os.listdir(local)):
                fs.copyFromLocalFile(
                    False, True, fs_path("file://" + os.path.join(local, name)), fs_path(partial, name)
                )
            fs.delete(dest, True)
            if not fs.rename(partial, dest):
                raise OSError(f"{target}: the reports could not be moved from {partial_target}")
        except Py4JError as exc:
            raise OSError(f"{target}: cannot write the reports: {str(exc).splitlines()[0]}") from None
        finally:
            shutil.rmtree(local, ignore_errors=True)
        return target

    return local, publish


def _hadoop_jvm(spark: SparkSession, output: str) -> Any:
    """The session's JVM, through which reports reach an output given as a URI; a usage error, before
    any work, in a session that has none (Spark Connect)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise UsageError(
            f"{output}: the reports reach a URI through the JVM's Hadoop file system, which this "
            "session (Spark Connect) does not expose: give a /Volumes path (one place to Spark and to "
            "this process)"
        )
    return jvm


def _overwrite(df: DataFrame, name: str, output: str, run_id: str, partition_by: tuple[str, ...]) -> str:
    path = table_location(output, name)
    writer = (
        df.write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("userMetadata", f"replay-audit audit run {run_id}")
    )
    stats_columns = AUDIT_TABLES[name].stats_columns
    if stats_columns:
        writer = writer.option("delta.dataSkippingStatsColumns", ",".join(stats_columns))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(path)
    return path


def _upsert_run(spark: SparkSession, row: dict[str, Any], output: str) -> str:
    """Replace the row of this run id (a re-run of the same audit) or add it."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    df = spark.createDataFrame(pa.Table.from_pylist([row], schema=to_arrow_schema(RUNS.schema)))
    predicate = f"run_id = '{row['run_id']}'"
    user_metadata = {"userMetadata": f"replay-audit audit run {row['run_id']}"}
    return write_table(df, RUNS, output, predicate, row["run_id"], options=user_metadata)


__all__ = ["AUDIT_TABLES", "TABLES", "AuditResult", "run_audit"]
