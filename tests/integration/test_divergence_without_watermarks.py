"""Two replicas of a partition whose high watermarks are unknown (partition directories given alone
have no `replication-offset-checkpoint`): a tail one of them holds and the other replaced is what a
clean election leaves (KIP-101: a leader crashed before its followers fetched its last batches), not
a rewrite of acknowledged data. Differences count below a batch both logs hold alike again, and where
one leader epoch wrote both sides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def _replica(
    topic: str, replica: str, tail: list[tuple[int, int]], *, rewrite_at: int | None = None
) -> LogBuilder:
    """Producer 5's batches at offsets 0-4 (leader epoch 0), then `tail`: one batch per (producer,
    leader epoch); with `rewrite_at`, that offset of the first five holds producer 8's batch instead."""
    log = LogBuilder(topic=topic, replica=replica, file=f"/d/{replica}/{topic}-0/{0:020d}.log")
    for sequence in range(5):
        if sequence == rewrite_at:
            log.data(8, 0, 0)
        else:
            log.data(5, 0, sequence)
    for i, (producer_id, leader_epoch) in enumerate(tail):
        log.data(producer_id, 0, i)["partition_leader_epoch"] = leader_epoch
    return log


def _divergences(spark: SparkSession, logs: list[LogBuilder]) -> dict[str, list[Any]]:
    rows = [row for log in logs for row in log.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema))
    found = audit(bronze, load_profile()).findings.where("kind = 'REPLICA_DIVERGENCE'").collect()
    out: dict[str, list[Any]] = {}
    for f in found:
        out.setdefault(f["topic"], []).append((f["first_offset"], f["last_offset"], f["message"]))
    return out


def test_without_watermarks_only_a_rewrite_below_agreement_or_within_one_leader_epoch_counts(
    spark: SparkSession,
) -> None:
    logs = [
        # A tail of leader epoch 1 on replica 1 that replica 2, leader in epoch 2, replaced: no rewrite.
        _replica("tail", "1", [(6, 1)] * 5),
        _replica("tail", "2", [(7, 2)] * 8),
        # Offset 2 differs, and both logs hold the same batches after it: rewritten.
        _replica("hole", "1", [(6, 1)] * 3),
        _replica("hole", "2", [(6, 1)] * 3, rewrite_at=2),
        # Offsets 5-9 differ within leader epoch 3 on both sides: one leader wrote two logs.
        _replica("one-leader", "1", [(6, 3)] * 5),
        _replica("one-leader", "2", [(7, 3)] * 5),
        # Replica 2, leader in epoch 2, took producer 6's retry of its batch at offset 9 in the same bytes
        # (the leader epoch is outside the CRC): the same batch under another epoch is no agreement
        # below which the tail would have been rewritten.
        _replica("retried", "1", [(6, 1)] * 5),
        _replica("retried", "2", [(7, 2)] * 4 + [(6, 2)]),
        # Old-format batches carry no leader epoch (-1 on both sides): a tail, not one leader's rewrite.
        _replica("legacy", "1", [(6, -1)] * 5),
        _replica("legacy", "2", [(7, -1)] * 5),
    ]
    found = _divergences(spark, logs)
    assert sorted(found) == ["hole", "one-leader"], found
    ((first, last, message),) = found["hole"]
    assert (first, last) == (2, 2)
    assert "each below a batch both logs hold alike again" in message, message
    ((first, last, _),) = found["one-leader"]
    assert (first, last) == (5, 9)
