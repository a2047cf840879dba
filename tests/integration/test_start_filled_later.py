"""A producer's first batch mid-sequence whose earlier sequences later batches hold: those are in the
log, out of order (a SEQUENCE_REGRESSION), not missing. HISTORY_START_MISSING counts only the others,
and where there are none it is not reported; a batch the broker took from a producer it had forgotten
(a client restarting its sequence) fills none. Spark and the reference replay agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from audit_rules.pipeline import Bronze, audit
from audit_rules.profile import DAY_MS
from jobs.profiles import load_profile
from schemas.tables import BATCHES
from tests.reference_replay import reference_findings
from tests.strategies import LogBuilder

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def test_sequences_before_the_first_batch_held_later_are_not_missing(spark: SparkSession) -> None:
    profile = load_profile("kafka-3.4")
    # all: 5-9, then 0-4: every earlier sequence is later in the log.
    full = LogBuilder(topic="all", file="/d/all-0/0.log")
    full.data(7, 0, 5, 5)
    full.data(7, 0, 0, 5)
    # part: 5-9, then 2-4: 0 and 1 are in no batch.
    part = LogBuilder(topic="part", file="/d/part-0/0.log")
    part.data(8, 0, 5, 5)
    part.data(8, 0, 2, 3)
    # none: 5-9 alone: 0-4 are missing (the log is complete from 0).
    none = LogBuilder(topic="none", file="/d/none-0/0.log")
    none.data(9, 0, 5, 5)
    # restart: 5-9, eight days idle, 0-4: the broker had forgotten producer 10 and a client restarting
    # its sequence wrote 0-4, other records: the first batch's 0-4 are still missing.
    restart = LogBuilder(topic="restart", file="/d/restart-0/0.log")
    restart.data(10, 0, 5, 5)
    restart.wait(8 * DAY_MS)
    restart.data(10, 0, 0, 5)
    logs = (full, part, none, restart)
    bronze = Bronze.from_batches(spark.createDataFrame([r for log in logs for r in log.rows], BATCHES.schema))
    found = sorted(
        (f["topic"], f["kind"], f["first_offset"], f["missing_records"])
        for f in audit(bronze, profile).findings.collect()
    )
    assert found == [
        ("all", "SEQUENCE_REGRESSION", 5, None),
        ("none", "HISTORY_START_MISSING", 0, 5),
        ("part", "HISTORY_START_MISSING", 0, 2),
        ("part", "SEQUENCE_REGRESSION", 5, None),
        ("restart", "HISTORY_START_MISSING", 0, 5),
        ("restart", "SEQUENCE_REGRESSION", 5, None),
    ]
    expected = sorted(
        (log.rows[0]["topic"], f["kind"], f["first_offset"], f["missing_records"])
        for log in logs
        for f in reference_findings(log.rows, profile=profile, log_start_offset=0)
    )
    assert found == expected


def test_sequences_a_crc_failed_batch_before_the_first_holds_in_part_are_not_missing(
    spark: SparkSession,
) -> None:
    """Log start 500: producer 11's batch at 500 (sequences 500-549) fails its CRC, and its first
    readable batch is at 550 with sequence 550. Sequences 0-499 took the offsets below the log start
    (retention), 500-549 are in the corrupt batch (its CRC_MISMATCH): nothing is lost. The same
    producer with sequence 600 at 550 lacks 50 more: at least those are missing."""
    from dataclasses import replace

    from schemas.tables import QUARANTINE

    profile = load_profile("kafka-3.4")
    logs = []
    for topic, first in (("rotted", 550), ("rotted-short", 600)):
        log = LogBuilder(topic=topic, file=f"/d/{topic}-0/00000000000000000500.log", start_offset=500)
        log.data(11, 0, 500, 50, crc_valid=False)
        log.data(11, 0, first, 1)
        logs.append(log)
    rows = [r for log in logs for r in log.rows]
    bronze = Bronze.from_batches(spark.createDataFrame(rows, BATCHES.schema), log_start_offset=500)
    keep = ("dump_id", "replica", "topic", "partition", "file", "position")
    quarantine = [
        {**{k: b[k] for k in keep}, "length": b["size_bytes"], "kind": "CRC_MISMATCH", "message": "CRC-32C"}
        for b in rows
        if not b["crc_valid"]
    ]
    bronze = replace(bronze, quarantine=spark.createDataFrame(quarantine, QUARANTINE.schema))
    found = sorted(
        (f["topic"], f["kind"], f["first_offset"], f["missing_records"], f["explained_by"])
        for f in audit(bronze, profile).findings.collect()
    )
    assert found == [
        ("rotted", "CRC_MISMATCH", 500, None, None),
        ("rotted", "HISTORY_TRUNCATED_BY_RETENTION", 550, None, "retention"),
        ("rotted-short", "CRC_MISMATCH", 500, None, None),
        ("rotted-short", "HISTORY_START_MISSING", 550, 50, None),
    ]
    expected = sorted(
        (log.rows[0]["topic"], f["kind"], f["first_offset"], f["missing_records"], f["explained_by"])
        for log in logs
        for f in reference_findings(log.rows, profile=profile, log_start_offset=500)
    )
    assert found == expected
