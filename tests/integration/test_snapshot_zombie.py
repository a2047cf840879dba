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


def test_a_v2_entry_whose_marker_the_cleaner_removed_is_no_mismatch(spark: SparkSession) -> None:
    """Transactions V2 on a compacted topic: producer 7's transaction at epoch 3 (offset 0) committed by a
    marker at epoch 4 (offset 1); its next one at epoch 4 (offsets 2-3, data and the COMMIT at epoch 5)
    the cleaner removed whole. The snapshot at 6 holds epoch 5 and no batch (the marker that raised the
    epoch cleared them): the log shows epoch 4 at most, and that is the cleaner's doing, whether the
    profile names the topic or only the offsets free in a segment show the cleaner (in the active one
    too: a follower's holds its leader's cleaned batches)."""
    log = LogBuilder(topic="c-v2", file=f"/d/c-v2-0/{0:020d}.log")
    log.data(7, 3, 0, transactional=True)
    log.marker(7, 4, "COMMIT")
    log.next_offset = 4
    for sequence in range(3):
        log.data(8, 0, sequence)
    entry = log.snapshot_entry(6, 7, 5, -1, -1)
    batches = spark.createDataFrame(log.rows, BATCHES.schema)
    snapshots = spark.createDataFrame([entry], PRODUCER_SNAPSHOTS.schema)

    def mismatches(rolled: bool, compacted: tuple[str, ...]) -> list[Any]:
        bronze = replace(Bronze.from_batches(batches, rolled=rolled), producer_snapshots=snapshots)
        profile = replace(load_profile("kafka-3.4"), compacted_topics=compacted)
        found = audit(bronze, profile).findings.collect()
        return [f["producer_id"] for f in found if f["kind"] == "SNAPSHOT_MISMATCH"]

    assert mismatches(rolled=True, compacted=("c-*",)) == []
    assert mismatches(rolled=False, compacted=("c-*",)) == []
    assert mismatches(rolled=False, compacted=()) == []
    # Named by no profile, the log still shows the cleaner: offsets 2-3 are free between its batches
    # in a rolled segment, and only the cleaner removes batches.
    assert mismatches(rolled=True, compacted=()) == []


def test_a_marker_of_a_fenced_epoch_is_the_coordinators_not_a_zombie_producers(spark: SparkSession) -> None:
    """A marker carries the epoch the coordinator wrote it for: one below an epoch already used is the
    coordinator's (stale, or late), and its EPOCH_REGRESSION says so, not that a zombie producer wrote."""
    log = LogBuilder(topic="late-marker", file=f"/d/late-marker-0/{0:020d}.log")
    log.data(7, 3, 0, transactional=True)
    log.marker(7, 3, "COMMIT")
    log.marker(7, 2, "ABORT")
    found = audit(
        Bronze.from_batches(spark.createDataFrame(log.rows, BATCHES.schema)), load_profile()
    ).findings
    (regression,) = found.where("kind = 'EPOCH_REGRESSION'").collect()
    message = regression["message"]
    assert regression["first_offset"] == 2, message
    assert message.startswith("Producer 7's ABORT marker at offset 2 carries epoch 2 after epoch 3"), message
    assert "the transaction coordinator wrote a marker for a fenced epoch" in message, message
    assert "zombie) producer's write" not in message, message


def test_a_mismatch_of_an_entry_without_a_batch_points_at_the_replayed_row_not_offset_minus_one(
    spark: SparkSession,
) -> None:
    """Transactions V2: producer 7's transaction at epoch 3 (offset 0) committed by a marker at epoch 4
    (offset 1). The snapshot at 4 says epoch 6 and no batch (-1: a marker raised the epoch and cleared
    them), where replaying gives epoch 4: a SNAPSHOT_MISMATCH, whose evidence is the producer's last
    replayed row, not an offset -1 that sorts before the log."""
    log = LogBuilder(topic="v2-minus-one", file=f"/d/v2-minus-one-0/{0:020d}.log")
    log.data(7, 3, 0, transactional=True)
    log.marker(7, 4, "COMMIT")
    for sequence in range(2):
        log.data(8, 0, sequence)
    entry = log.snapshot_entry(4, 7, 6, -1, -1)
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(log.rows, BATCHES.schema)),
        producer_snapshots=spark.createDataFrame([entry], PRODUCER_SNAPSHOTS.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    (mismatch,) = [f for f in found if f["kind"] == "SNAPSHOT_MISMATCH"]
    assert mismatch["first_offset"] in (0, 1) and mismatch["last_offset"] == mismatch["first_offset"], (
        mismatch
    )
    assert "no batch (offset -1" in mismatch["message"] and "at offset -1" not in mismatch["message"]
