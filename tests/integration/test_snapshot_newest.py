"""The broker loads a log's newest snapshot file (`ProducerStateManager.loadFromSnapshot`: an older
one only where the newest is corrupt), and `takeSnapshot` writes the producer map however empty: an
older file's entries are not the state the broker holds when a newer, empty one is there."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from audit_rules.pipeline import Bronze, audit
from jobs.profiles import load_profile
from schemas.tables import BATCHES, FILES, PRODUCER_SNAPSHOTS, QUARANTINE
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000


def _snapshot_file(log: LogBuilder, offset: int) -> dict[str, Any]:
    row: dict[str, Any] = {f.name: None for f in FILES.schema.fields}
    folder = str(log._log["file"]).rsplit("/", 1)[0]
    row.update({k: log._log[k] for k in ("dump_id", "replica", "topic", "partition")})
    row.update(
        file=f"{folder}/{offset:020d}.snapshot",
        kind="snapshot",
        base_offset=offset,
        size_bytes=10,
        mtime_ms=0,
        is_live=True,
    )
    return row


def test_an_empty_newest_snapshot_is_the_state_not_an_older_files_entries(spark: SparkSession) -> None:
    """A compacted topic: the snapshot at 5 lists producer 6 with a transaction open since offset 2.
    Since then its marker closed it, it expired (three days idle) and the cleaner removed its batches;
    a later roll wrote the snapshot at 12 with no producer left. With that file dumped (`empty-newest`),
    the broker's state is empty: nothing to say of producer 6. Without it (`older-only`), or with it
    corrupt (`corrupt-newest`: the broker falls back to the one at 5), the entry is the state, and a
    producer with a transaction open that the log does not hold is judged."""
    logs, entries, files, quarantine = [], [], [], []
    for topic in ("empty-newest", "older-only", "corrupt-newest"):
        log = LogBuilder(topic=topic, file=f"/d/{topic}-0/{0:020d}.log")
        entries.append(log.snapshot_entry(5, 6, 0, 0, 2, timestamp=log.clock, current_txn_first_offset=2))
        log.wait(3 * DAY_MS)
        for _ in range(12):
            log.plain()
        logs.append(log)
        files.append(_snapshot_file(log, 5))
        if topic != "older-only":
            files.append(_snapshot_file(log, 12))
        if topic == "corrupt-newest":
            bad: dict[str, Any] = {f.name: None for f in QUARANTINE.schema.fields}
            bad.update({k: files[-1][k] for k in ("dump_id", "replica", "topic", "partition", "file")})
            bad.update(position=0, length=10, kind="SNAPSHOT_CORRUPT", message="CRC mismatch")
            quarantine.append(bad)
    rows = [row for log in logs for row in log.rows]
    base = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), rolled=True)
    bronze = replace(
        base,
        files=base.files.unionByName(spark.createDataFrame(files, FILES.schema)),
        producer_snapshots=spark.createDataFrame(entries, PRODUCER_SNAPSHOTS.schema),
        quarantine=spark.createDataFrame(quarantine, QUARANTINE.schema),
    )
    profile = replace(
        load_profile("kafka-3.4"), compacted_topics=("empty-newest", "older-only", "corrupt-newest")
    )
    found = audit(bronze, profile).findings.collect()
    judged = {f["topic"] for f in found if f["producer_id"] == 6 and f["severity"] != "info"}
    assert judged == {"older-only", "corrupt-newest"}, [(f["topic"], f["kind"], f["message"]) for f in found]


def test_an_entry_without_a_batch_offset_needs_its_producer_below_the_snapshot(spark: SparkSession) -> None:
    """Transactions V2: the snapshot at 10 lists producer 5 at epoch 4 with no batch offset (-1: the
    marker that raised its epoch cleared its batches), so it wrote below offset 10. In a log complete
    from offset 0 that no cleaner touched, its first row at 10 (`after`) says that was lost, as no row
    at all would; its COMMIT at 3 (`below`) is what the entry remembers."""
    rows, entries = [], []
    for topic in ("after", "below"):
        log = LogBuilder(topic=topic, file=f"/d/{topic}-0/{0:020d}.log")
        for sequence in range(9 if topic == "below" else 10):
            if topic == "below" and sequence == 3:
                log.marker(5, 4)
            log.data(8, 0, sequence)
        entries.append(log.snapshot_entry(10, 5, 4, -1, -1))
        log.data(5, 4, 0, transactional=True)
        log.marker(5, 5)
        rows += log.rows
    bronze = replace(
        Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), rolled=True),
        producer_snapshots=spark.createDataFrame(entries, PRODUCER_SNAPSHOTS.schema),
    )
    found = audit(bronze, load_profile("kafka-3.4")).findings.collect()
    judged = sorted((f["topic"], f["kind"]) for f in found if f["severity"] != "info")
    assert judged == [("after", "UNKNOWN_PRODUCER_LOSS")], [
        (f["topic"], f["kind"], f["message"]) for f in found
    ]
