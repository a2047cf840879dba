"""A zombie's batches of a lower epoch in the log (EPOCH_REGRESSION: a leader that had forgotten the
producer accepts them, a follower appends what its leader wrote) were applied to the broker's producer
state: its snapshot after them holds the zombie's epoch and batch, and that is no SNAPSHOT_MISMATCH.
A snapshot still holding the higher epoch there is one."""

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

DAY_MS = 86_400_000


def _log(topic: str) -> LogBuilder:
    """Producer 7 epoch 3 at offsets 0-4 (sequences 0-4); two days on, a zombie of epoch 2 writes
    sequences 0-2 at offsets 5-7."""
    log = LogBuilder(topic=topic, file=f"/d/{topic}-0/{0:020d}.log")
    for sequence in range(5):
        log.data(7, 3, sequence)
    log.wait(2 * DAY_MS)
    for sequence in range(3):
        log.data(7, 2, sequence)
    return log


def _entry(log: LogBuilder, epoch: int, last_sequence: int, last_offset: int) -> dict[str, Any]:
    return log.snapshot_entry(8, 7, epoch, last_sequence, last_offset)


def test_a_snapshot_after_a_zombies_batches_holds_the_zombies_epoch(spark: SparkSession) -> None:
    applied, stale = _log("applied"), _log("stale")
    rows = applied.rows + stale.rows
    entries = [_entry(applied, 2, 2, 7), _entry(stale, 3, 4, 4)]
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema)),
        producer_snapshots=spark.createDataFrame(entries, PRODUCER_SNAPSHOTS.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    verdicts = sorted({(f["topic"], f["kind"]) for f in found if f["severity"] != "info"})
    assert verdicts == [
        ("applied", "EPOCH_REGRESSION"),
        ("stale", "EPOCH_REGRESSION"),
        ("stale", "SNAPSHOT_MISMATCH"),
    ], verdicts
