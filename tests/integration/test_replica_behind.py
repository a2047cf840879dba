"""A producer of a replica's earlier dump that its later dump lacks, where the later log ends before
the producer's last offset: the replica is behind (a follower catching up, or a broker back with an
empty volume). Another replica's log, dumped as late, that holds the producer says nothing was lost;
without one, the producer is lost (seed 000 rule 4)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def _lost(spark: SparkSession, leader_holds: tuple[int, ...]) -> list[tuple[str | None, int, int, int]]:
    # Replica 1 held producers 5 and 6 (offsets 0-9) at T1; at T2 it holds producer 5 alone (it ends at
    # offset 5), and replica 2 holds `leader_holds`.
    logs = [_log("d1", "1", (5, 6)), _log("d2", "1", (5,)), _log("d2", "2", leader_holds)]
    rows = [row for log in logs for row in log.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    bronze = replace(
        bronze,
        files=bronze.files.withColumn(
            "mtime_ms", (bronze.files["dump_id"] == "d1").cast("int") * (T1 - T2) + T2
        ),
    )
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
