"""`jobs.audit.read_table_version`: the audit's bronze frames read one version of each Delta table,
whatever commits after they were read, with Delta's own semantics (partition columns, pruning,
deletion vectors), and without a file-selection job per query."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession

from jobs.audit import read_table_version
from jobs.ingest import session_conf

SCHEMA = "id long, topic string, value long"
T = TypeVar("T")


def ids(df: DataFrame) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def jobs_during(spark: SparkSession, group: str, call: Callable[[], T]) -> tuple[int, T]:
    """How many Spark jobs `call` runs (in a job group of its own), and what it returns."""
    spark.sparkContext.setJobGroup(group, group)
    try:
        result = call()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)), result


def jobs_of(spark: SparkSession, group: str, action: DataFrame) -> int:
    return jobs_during(spark, group, action.collect)[0]


def test_the_frame_keeps_its_version_while_the_table_moves_on(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    rows = [(1, "a", 10), (2, "b", 20)]
    # The partition column in the middle of the schema: the frame has the plain read's column order.
    spark.createDataFrame(rows, SCHEMA).write.format("delta").partitionBy("topic").save(path)
    pinned = read_table_version(spark, path)
    plain = spark.read.format("delta").load(path)
    assert pinned.schema == plain.schema
    assert sorted(pinned.collect()) == sorted(plain.collect())

    spark.createDataFrame([(3, "a", 30)], SCHEMA).write.format("delta").mode("append").save(path)
    assert ids(pinned) == [1, 2]
    assert ids(spark.read.format("delta").load(path)) == [1, 2, 3]
    assert ids(read_table_version(spark, path)) == [1, 2, 3]
    # Partition pruning on the pinned file list.
    assert ids(pinned.where("topic = 'b'")) == [2]


def test_deleted_rows_stay_deleted_with_deletion_vectors(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "dv")
    rows = [(i, "a", i * 10) for i in range(1, 7)]
    (
        spark.createDataFrame(rows, SCHEMA)
        .coalesce(1)
        .write.format("delta")
        .option("delta.enableDeletionVectors", "true")
        .save(path)
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (2, 5)")
    log = "".join(p.read_text() for p in sorted((Path(path) / "_delta_log").glob("*.json")))
    assert '"deletionVector":{' in log, "the delete did not write a deletion vector"
    assert ids(read_table_version(spark, path)) == [1, 3, 4, 6]


def test_queries_of_the_frame_select_no_files_again(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "q")
    spark.createDataFrame([(1, "a", 10), (2, "b", 20)], SCHEMA).write.format("delta").save(path)
    pinned = read_table_version(spark, path)
    plain = spark.read.format("delta").load(path)
    # Each query of the plain frame first runs Delta's file selection (a Spark job); the pinned frame's
    # queries run their own job only.
    assert jobs_of(spark, "pinned-1", pinned) == jobs_of(spark, "pinned-2", pinned.where("id > 1")) == 1
    assert jobs_of(spark, "plain", plain.where("id > 1")) > 1


def checksum_lists_files(path: str) -> bool:
    """Whether the `.crc` of the table's latest version lists its live files (`allFiles`)."""
    (latest,) = sorted(Path(path, "_delta_log").glob("*.crc"))[-1:]
    return "allFiles" in json.loads(latest.read_text())


def test_the_files_come_from_the_versions_checksum_when_it_lists_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta lists a small table's live files in each version's `.crc`: read from there, the frame costs
    no Spark job. A table whose checksums do not list them is read by Delta's state reconstruction (a
    job), with the same rows."""
    listed, unlisted = str(tmp_path / "listed"), str(tmp_path / "unlisted")
    for path, enabled in ((listed, "true"), (unlisted, "false")):
        with session_conf(spark, {"spark.databricks.delta.allFilesInCrc.enabled": enabled}):
            spark.createDataFrame([(1, "a", 10), (2, "b", 20)], SCHEMA).write.format("delta").save(path)
            spark.createDataFrame([(3, "a", 30)], SCHEMA).write.format("delta").mode("append").save(path)
            spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2")
    assert checksum_lists_files(listed) and not checksum_lists_files(unlisted)
    for path in (listed, unlisted):
        jobs, frame = jobs_during(spark, path, functools.partial(read_table_version, spark, path))
        assert (jobs == 0) == (path == listed), (path, jobs)
        assert ids(frame) == [1, 3]


class SessionWithoutJvm:
    """A session whose JVM is out of reach, as under Spark Connect (no `_jvm`)."""

    def __init__(self, spark: SparkSession) -> None:
        self.read = spark.read


def test_without_delta_on_the_jvm_the_frame_is_the_plain_read(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "p")
    spark.createDataFrame([(1, "a", 10)], SCHEMA).write.format("delta").save(path)
    frame = read_table_version(SessionWithoutJvm(spark), path)  # type: ignore[arg-type]
    spark.createDataFrame([(2, "a", 20)], SCHEMA).write.format("delta").mode("append").save(path)
    assert ids(frame) == [1, 2]  # a plain read follows the table's latest version
