"""A producer snapshot entry without a batch offset (`lastDataOffset` -1: a marker that raised the
producer's epoch cleared its cached batches, after every Transactions V2 commit or abort) says only
that the producer wrote below the snapshot's offset. It is retention where the snapshot lies at or
below the log start, loss where the log is complete from offset 0 and holds nothing of it, and no
verdict otherwise."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, PRODUCER_SNAPSHOTS
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def _log_and_entry(
    topic: str, start: int, snapshot_at: int, producer_id: int
) -> tuple[LogBuilder, dict[str, Any]]:
    """Producer 8's batches from `start` past `snapshot_at`; the snapshot at `snapshot_at` lists
    `producer_id` (epoch 3, after a V2 commit: no batch offset, no sequence), of which the log holds
    nothing."""
    log = LogBuilder(topic=topic, start_offset=start, file=f"/dump/{topic}-0/{start:020d}.log")
    for sequence in range(snapshot_at - start + 2):
        log.data(8, 0, sequence)
    entry = {
        **{k: log.rows[0][k] for k in ("dump_id", "replica", "topic", "partition")},
        "file": f"/dump/{topic}-0/{snapshot_at:020d}.snapshot",
        "position": 10,
        "snapshot_offset": snapshot_at,
        "producer_id": producer_id,
        "producer_epoch": 3,
        "last_sequence": -1,
        "last_offset": -1,
        "offset_delta": 0,
        "timestamp": log.clock,
        "coordinator_epoch": 0,
        "current_txn_first_offset": -1,
    }
    return log, entry


def _verdicts(spark: SparkSession, start: int, logs: list[tuple[LogBuilder, dict[str, Any]]]) -> set[Any]:
    rows = [row for log, _ in logs for row in log.rows]
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), log_start_offset=start),
        producer_snapshots=spark.createDataFrame([entry for _, entry in logs], PRODUCER_SNAPSHOTS.schema),
    )
    profile = replace(load_profile("kafka-3.4"), compacted_topics=("compacted",))
    found = audit(bronze, profile).findings.collect()
    return {
        (f["topic"], f["kind"], f["producer_id"], f["first_offset"], f["related_offset"])
        for f in found
        if f["kind"] in ("PRODUCER_STATE_RETAINED", "UNKNOWN_PRODUCER_LOSS")
    }


def test_an_entry_without_a_batch_offset_is_judged_by_its_snapshot_offset(spark: SparkSession) -> None:
    # The log starts at 20: a snapshot at 20 holds only what lies below the start; one at 30 may hold a
    # marker at 20-29 as well as below 20.
    assert _verdicts(
        spark, 20, [_log_and_entry("at-start", 20, 20, 5), _log_and_entry("above", 20, 30, 6)]
    ) == {("at-start", "PRODUCER_STATE_RETAINED", 5, None, 20)}
    # The log is complete from 0: the producer's marker below the snapshot at 10 must be in it, unless
    # the topic is compacted.
    assert _verdicts(
        spark, 0, [_log_and_entry("complete", 0, 10, 7), _log_and_entry("compacted", 0, 10, 9)]
    ) == {("complete", "UNKNOWN_PRODUCER_LOSS", 7, None, 10)}
