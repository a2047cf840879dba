"""A producer snapshot whose entry names a batch at or past the log's end: the broker deletes every
snapshot past the log end when it truncates or recovers a log (`truncateAndReload`), so this replica
lost its tail after the snapshot was written (a crashed broker not yet recovered, or a copy of the log
taken before the snapshot). Where another replica's log, dumped as late, holds the producer that far,
the replica is behind and nothing was lost; without one, the producer's data is lost, and the verdicts
say that the log ends before the snapshot's batch."""

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


def _log(replica: str, producers: tuple[int, ...], topic: str = "orders") -> LogBuilder:
    """Five one-record batches of each producer in turn, from offset 0."""
    log = LogBuilder(replica=replica, topic=topic, file=f"/d/{replica}/{topic}-0/{0:020d}.log")
    for producer_id in producers:
        for sequence in range(5):
            log.data(producer_id, 0, sequence)
    return log


def _entry(log: LogBuilder, producer_id: int, last_offset: int, last_sequence: int) -> dict[str, Any]:
    """An entry of the snapshot at offset 10 of `log`'s replica."""
    return log.snapshot_entry(10, producer_id, 0, last_sequence, last_offset)


def _findings(spark: SparkSession, logs: list[LogBuilder], entries: list[dict[str, Any]]) -> list[Any]:
    rows = [row for log in logs for row in log.rows]
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema)),
        producer_snapshots=spark.createDataFrame(entries, PRODUCER_SNAPSHOTS.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    return [f for f in found if f["severity"] != "info"]


def _verdicts(found: list[Any]) -> set[tuple[Any, ...]]:
    return {(f["topic"], f["replica"], f["kind"], f["producer_id"], f["last_offset"]) for f in found}


def test_a_replica_whose_snapshot_outruns_its_log_lost_nothing_another_replica_holds(
    spark: SparkSession,
) -> None:
    # Replica 1's log ends at offset 5 (producer 5 alone); its snapshot at 10 lists producer 6 up to
    # offset 9. Replica 2 holds producer 6 to offset 9 in topic "held", and does not in topic "gone".
    held_short = _log("1", (5,), "held")
    gone_short = _log("1", (5,), "gone")
    found = _findings(
        spark,
        [held_short, _log("2", (5, 6), "held"), gone_short, _log("2", (5, 7), "gone")],
        [_entry(held_short, 6, 9, 4), _entry(gone_short, 6, 9, 4)],
    )
    assert _verdicts(found) == {("gone", "1", "UNKNOWN_PRODUCER_LOSS", 6, 9)}
    (lost,) = found
    assert "the log ends at offset 5, before that batch" in lost["message"], lost["message"]


def test_a_single_replica_whose_snapshot_outruns_its_log_lost_the_tail(spark: SparkSession) -> None:
    # The log holds producer 6's first two batches (offsets 5-6) and ends at 7; the snapshot at 10 says
    # its last batch was at offset 9 (sequence 4). Producer 8 is absent altogether.
    log = _log("1", (5,))
    log.data(6, 0, 0)
    log.data(6, 0, 1)
    found = _findings(spark, [log], [_entry(log, 5, 4, 4), _entry(log, 6, 9, 4), _entry(log, 8, 8, 0)])
    assert _verdicts(found) == {
        ("orders", "1", "SNAPSHOT_MISMATCH", 6, 9),
        ("orders", "1", "UNKNOWN_PRODUCER_LOSS", 8, 8),
    }
    messages = {f["kind"]: f["message"] for f in found}
    assert "the log ends at offset 7, before that batch" in messages["SNAPSHOT_MISMATCH"]
    assert "the log ends at offset 7, before that batch" in messages["UNKNOWN_PRODUCER_LOSS"]


def test_an_entry_past_the_log_end_is_not_excused_by_compaction(spark: SparkSession) -> None:
    """The cleaner never passes the log end: on a compacted topic an entry past it, of a producer idle
    longer than the expiration, is still a batch the log lost."""
    from audit_rules.pipeline import Bronze as B

    log = _log("1", (5,), "compacted")
    entry = {**_entry(log, 8, 9, 0), "timestamp": log.clock - 3 * 86_400_000}
    from pyspark.sql import functions as F

    bronze = B.from_batches(spark.createDataFrame(log.rows, BATCHES.schema))
    bronze = replace(
        bronze,
        producer_snapshots=spark.createDataFrame([entry], PRODUCER_SNAPSHOTS.schema),
        files=bronze.files.withColumn("mtime_ms", F.lit(log.clock + 1_000)),  # captured just after
    )
    profile = replace(load_profile("kafka-3.4"), compacted_topics=("compacted",))
    found = [f for f in audit(bronze, profile).findings.collect() if f["severity"] != "info"]
    assert _verdicts(found) == {("compacted", "1", "UNKNOWN_PRODUCER_LOSS", 8, 9)}, found
