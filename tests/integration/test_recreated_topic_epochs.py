"""A topic deleted and created again between two dumps on brokers before 2.8, which write no
partition.metadata (no topic id, KIP-516): a partition's leader epochs only rise, so a later dump whose
batches carry a lower one holds another topic of the same name. Read as one topic, its offsets from 0
rewrote the old topic's (`REPLICA_DIVERGENCE`) and lost its producers (`UNKNOWN_PRODUCER_LOSS`), both
critical and both wrong."""

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


def _log(dump_id: str, leader_epoch: int, producers: tuple[int, ...], records: int) -> list[dict]:
    log = LogBuilder(dump_id=dump_id, replica="1", file=f"/{dump_id}/1/orders-0/0.log", clock=T1)
    for producer_id in producers:
        for sequence in range(records):
            log.data(producer_id, 0, sequence)
    return [{**row, "partition_leader_epoch": leader_epoch} for row in log.rows]


def _above_info(spark: SparkSession, later_epoch: int) -> list[tuple[str, str]]:
    # d1: producers 11 and 12 at offsets 0-9, leader epoch 4; d2, an hour later: producer 20 at 0-2.
    rows = _log("d1", 4, (11, 12), 5) + _log("d2", later_epoch, (20,), 3)
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    from pyspark.sql import functions as F

    files = bronze.files
    bronze = replace(
        bronze, files=files.withColumn("mtime_ms", F.when(files["dump_id"] == "d1", T1).otherwise(T2))
    )
    found = audit(bronze, load_profile("kafka-2.5")).findings.where("severity != 'info'").collect()
    return sorted({(f["kind"], f["dump_id"]) for f in found})


def test_a_later_dump_with_a_lower_leader_epoch_is_another_topic(spark: SparkSession) -> None:
    assert _above_info(spark, later_epoch=0) == []


def test_a_later_dump_with_the_same_leader_epoch_is_the_same_topic_rewritten(spark: SparkSession) -> None:
    assert ("UNKNOWN_PRODUCER_LOSS", "d2") in _above_info(spark, later_epoch=4)
