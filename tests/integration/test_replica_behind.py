"""A producer of a replica's earlier dump that its later dump lacks, where the later log ends before
the producer's last offset: the replica is behind (a follower catching up, or a broker back with an
empty volume). Another replica's log, dumped as late, that holds the producer says nothing was lost;
without one, the producer is lost (seed 000 rule 4)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

pytestmark = pytest.mark.integration

T1 = 1_700_000_000_000
T2 = T1 + 3_600_000


def _log(dump_id: str, replica: str, producers: tuple[int, ...]) -> LogBuilder:
    """Five one-record batches of each producer in turn, from offset 0."""
    log = LogBuilder(dump_id=dump_id, replica=replica, file=f"/{dump_id}/{replica}/orders-0/0.log", clock=T1)
    for producer_id in producers:
        for sequence in range(5):
            log.data(producer_id, 0, sequence)
    return log


def _lost(
    spark: SparkSession, leader_holds: tuple[int, ...], copied_later_ms: int = 0
) -> list[tuple[str | None, int, int, int]]:
    # Replica 1 held producers 5 and 6 (offsets 0-9) at T1; at T2 it holds producer 5 alone (it ends at
    # offset 5), and replica 2 holds `leader_holds`. `copied_later_ms`: how much later than replica 2's
    # files replica 1's were copied into d2 (`cp` without -p: each file's time is its copy's).
    from pyspark.sql import functions as F

    logs = [_log("d1", "1", (5, 6)), _log("d2", "1", (5,)), _log("d2", "2", leader_holds)]
    return _losses_of(
        spark,
        logs,
        lambda files: (
            F.when(files["dump_id"] == "d1", T1)
            .when(files["replica"] == "1", T2 + copied_later_ms)
            .otherwise(T2)
        ),
    )


def _losses_of(
    spark: SparkSession, logs: list[LogBuilder], taken: Callable[[DataFrame], Column]
) -> list[tuple[str | None, int, int, int]]:
    """Audit `logs`' batches, each file's `mtime_ms` given by `taken(files)`: the UNKNOWN_PRODUCER_LOSS
    findings as (replica, producer id, epoch, last offset)."""
    bronze = Bronze.from_batches(
        spark.createDataFrame([row for log in logs for row in log.rows], BATCHES.schema)
    )
    bronze = replace(bronze, files=bronze.files.withColumn("mtime_ms", taken(bronze.files)))
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    return sorted(
        (f["replica"], f["producer_id"], f["producer_epoch"], f["last_offset"])
        for f in found
        if f["kind"] == "UNKNOWN_PRODUCER_LOSS"
    )


def test_a_replica_behind_another_that_holds_the_producer_lost_nothing(spark: SparkSession) -> None:
    assert _lost(spark, (5, 6)) == []


def test_a_replica_behind_where_no_replica_holds_the_producer_lost_it(spark: SparkSession) -> None:
    assert _lost(spark, (5, 7)) == [("1", 6, 0, 9)]


def test_a_replica_copied_after_the_one_that_holds_the_producer_in_one_dump_lost_nothing(
    spark: SparkSession,
) -> None:
    """One dump's replicas are one moment, whatever order their files were copied in: replica 1's files
    copied 40 s after replica 2's were taken as a later capture, so replica 2 did not count as holding
    the producer (UNKNOWN_PRODUCER_LOSS, critical)."""
    assert _lost(spark, (5, 6), copied_later_ms=40_000) == []
    assert _lost(spark, (5, 7), copied_later_ms=40_000) == [("1", 6, 0, 9)]


def test_two_dumps_of_one_time_are_ordered_by_the_log_not_by_their_labels(spark: SparkSession) -> None:
    """Dumps `after` and `before` of one capture time (one `--captured-at` given to both): `after` sorted
    first by its label, so producer 6, written between them, was gone from `before`: a false
    UNKNOWN_PRODUCER_LOSS. The log that ends later is the later dump."""
    logs = [_log("before", "1", (5,)), _log("after", "1", (5, 6))]
    bronze = Bronze.from_batches(
        spark.createDataFrame([row for log in logs for row in log.rows], BATCHES.schema)
    )
    from pyspark.sql import functions as F

    bronze = replace(bronze, files=bronze.files.withColumn("mtime_ms", F.lit(T2)))
    found = audit(bronze, load_profile("kafka-3.4")).findings.where("severity != 'info'").collect()
    assert [(f["kind"], f["dump_id"]) for f in found] == []


def test_two_dumps_of_one_time_are_ordered_by_leader_epoch_before_the_logs_end(spark: SparkSession) -> None:
    """Dumps `b` (producer 5 at offsets 0-19, leader epoch 0, the last five above the mark) and `a`, of
    one capture time: a new leader (epoch 1) truncated the follower to 15 and producer 6 wrote 15-17.
    `a`'s log ends first (18 against 20), but its epoch is the later: by the log's end `a` came first and
    producer 6 was gone from `b`, a false UNKNOWN_PRODUCER_LOSS."""
    from pyspark.sql import functions as F

    before = LogBuilder(dump_id="b", replica="1", file="/b/1/orders-0/0.log", clock=T1)
    after = LogBuilder(dump_id="a", replica="1", file="/a/1/orders-0/0.log", clock=T1)
    for sequence in range(20):
        before.data(5, 0, sequence)
    for sequence in range(15):
        after.data(5, 0, sequence)
    for sequence in range(3):
        after.data(6, 0, sequence)["partition_leader_epoch"] = 1
    rows = before.rows + after.rows
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    bronze = replace(bronze, files=bronze.files.withColumn("mtime_ms", F.lit(T2)))
    found = audit(bronze, load_profile("kafka-3.4")).findings.where("severity != 'info'").collect()
    assert [(f["kind"], f["dump_id"]) for f in found] == []


def _lost_beside(spark: SparkSession, elected: bool) -> list[tuple[str | None, int, int, int]]:
    """Replica 1 held producers 5 and 6 (offsets 0-9) in dump d1; in dump d2 it holds producer 5 alone,
    copied five seconds after replica 2's own dump `b2` (a dump per broker) that holds both. `elected`:
    replica 1 then wrote producer 7's batch at offset 5 as the leader of epoch 1."""
    from pyspark.sql import functions as F

    later = _log("d2", "1", (5,))
    if elected:
        later.data(7, 0, 0)["partition_leader_epoch"] = 1
    logs = [_log("d1", "1", (5, 6)), later, _log("b2", "2", (5, 6))]
    return _losses_of(
        spark,
        logs,
        lambda files: (
            F.when(files["dump_id"] == "d1", T1).when(files["dump_id"] == "d2", T2 + 5_000).otherwise(T2)
        ),
    )


def test_a_replica_behind_a_broker_dumped_before_it_under_its_own_label_lost_nothing(
    spark: SparkSession,
) -> None:
    """Replica 2's dump was copied first, but replica 1 knew no leader epoch later than replica 2's:
    it gave nothing up, it is behind (UNKNOWN_PRODUCER_LOSS, critical, when only a dump captured as late
    or later counted)."""
    assert _lost_beside(spark, elected=False) == []


def test_a_replica_elected_past_a_producer_a_broker_dumped_before_it_holds_lost_it(
    spark: SparkSession,
) -> None:
    """Replica 1 knew leader epoch 1, later than any of replica 2's: elected past producer 6's batches,
    it gave them up, and replica 2's older copy does not excuse it."""
    assert _lost_beside(spark, elected=True) == [("1", 6, 0, 9)]
